//! The program's environment: where the shim and the sim are, and the
//! variables the options set.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::options::Options;
use crate::report::ReportLocation;

/// A failure of the launcher itself (exit status 125).
#[derive(Debug)]
pub struct SetupError(pub String);

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn setup(msg: impl Into<String>) -> SetupError {
    SetupError(msg.into())
}

/// The file name of the shim next to the launcher.
pub const SHIM_NAME: &str = "libibv_shim.so";
/// The file name of the sim as cargo builds it, next to the launcher.
pub const SIM_BUILT_NAME: &str = "libibv_sim.so";
/// The soname the sim is loaded under.
pub const SIM_SONAME: &str = "libibverbs.so.1";
/// Where `make install` puts the shim (and the sim in its `sim/`),
/// relative to the directory of the installed launcher (`PREFIX/bin`).
pub const INSTALLED_LIBDIR: &str = "../lib/ibv-shim";

/// The Debian multiarch directory the package puts its libraries under
/// (`/usr/lib/<triplet>/ibv-shim`).
const MULTIARCH: &str = if cfg!(target_arch = "x86_64") {
    "x86_64-linux-gnu"
} else if cfg!(target_arch = "aarch64") {
    "aarch64-linux-gnu"
} else {
    ""
};

/// `PREFIX/lib/ibv-shim` of an installed launcher in `PREFIX/bin` (`make
/// install`), or `PREFIX/lib/<triplet>/ibv-shim` when only that exists
/// (the Debian package, `make deb`).
fn installed_dir(exe_dir: &Path) -> PathBuf {
    let Some(up) = exe_dir.parent() else {
        return exe_dir.join(INSTALLED_LIBDIR);
    };
    let plain = up.join("lib").join("ibv-shim");
    let multiarch = up.join("lib").join(MULTIARCH).join("ibv-shim");
    if !plain.exists() && !MULTIARCH.is_empty() && multiarch.is_dir() {
        multiarch
    } else {
        plain
    }
}

/// The variables to set for the program, in order, and the report location.
#[derive(Debug)]
pub struct Plan {
    pub vars: Vec<(OsString, OsString)>,
    pub report: ReportLocation,
    /// The launcher's private directory (`IBV_SHIM_STATUS_DIR`, and the
    /// reports unless they are kept elsewhere), removed after the summary.
    pub private: PathBuf,
    /// This run's id (`IBV_SHIM_RUN`): the private directory's name, which
    /// no other run has while this one lasts. The shim writes it into each
    /// report; the summary reads only the reports that carry it.
    pub run: String,
}

impl Plan {
    /// Removes the private directory.
    pub fn cleanup(&self) {
        let _ = std::fs::remove_dir_all(&self.private);
    }
}

/// Where the launcher's executable is, for its defaults.
pub fn exe_dir() -> Result<PathBuf, SetupError> {
    let exe = std::env::current_exe()
        .map_err(|e| setup(format!("cannot find the launcher's own executable: {e}")))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| setup(format!("{} has no directory", exe.display())))
}

/// `path` made absolute against the current directory (not canonicalised:
/// `..` and symlinks stay as given).
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(path),
        Err(_) => path.to_path_buf(),
    }
}

/// The shim to preload: `--shim`, else `libibv_shim.so` next to the
/// launcher (the build tree), else in `../lib/ibv-shim` (installed).
pub fn find_shim(
    opt: Option<&Path>,
    exe_dir: impl FnOnce() -> Result<PathBuf, SetupError>,
) -> Result<PathBuf, SetupError> {
    let path = match opt {
        Some(p) => absolute(p),
        None => {
            let dir = exe_dir()?;
            let built = dir.join(SHIM_NAME);
            let installed = installed_dir(&dir).join(SHIM_NAME);
            if !built.is_file() && installed.is_file() {
                installed
            } else {
                built
            }
        }
    };
    if !path.is_file() {
        let how = match opt {
            Some(_) => "check the --shim argument".to_string(),
            None => "build it (`make`, or `cargo build --release` at the repository root) or name it with --shim PATH".to_string(),
        };
        return Err(setup(format!(
            "the shim {} does not exist: {how}",
            path.display()
        )));
    }
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    let bytes = path.as_os_str().as_bytes();
    if bytes
        .iter()
        .any(|b| matches!(b, b' ' | b':' | b'\t' | b'\n'))
    {
        return Err(setup(format!(
            "the shim's path {} has a space or colon, which LD_PRELOAD cannot hold: copy it elsewhere and use --shim",
            path.display()
        )));
    }
    Ok(path)
}

/// The directory with the sim's `libibverbs.so.1`: `--sim-dir`, else
/// `<exe dir>/../sim` (`target/sim`), made (or refreshed) from `<exe dir>/libibv_sim.so`
/// when that is newer than the copy or the copy is missing; else, for an
/// installed launcher, `<exe dir>/../lib/ibv-shim/sim`.
pub fn find_sim_dir(
    opt: Option<&Path>,
    exe_dir: impl FnOnce() -> Result<PathBuf, SetupError>,
) -> Result<PathBuf, SetupError> {
    if let Some(dir) = opt {
        let dir = absolute(dir);
        if !dir.join(SIM_SONAME).is_file() {
            return Err(setup(format!(
                "--sim-dir {}: there is no {SIM_SONAME} in it",
                dir.display()
            )));
        }
        return Ok(std::fs::canonicalize(&dir).unwrap_or(dir));
    }
    let exe_dir = exe_dir()?;
    let dir = match exe_dir.parent() {
        Some(up) => up.join("sim"),
        None => exe_dir.join("..").join("sim"),
    };
    let lib = dir.join(SIM_SONAME);
    let built = exe_dir.join(SIM_BUILT_NAME);
    let installed = installed_dir(&exe_dir).join("sim");
    if !lib.is_file() && !built.is_file() && installed.join(SIM_SONAME).is_file() {
        return Ok(std::fs::canonicalize(&installed).unwrap_or(installed));
    }
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(&lib), modified(&built)) {
        (Some(have), Some(new)) if new > have => copy_sim(&built, &dir, &lib)?,
        (None, Some(_)) => copy_sim(&built, &dir, &lib)?,
        (None, None) => {
            return Err(setup(format!(
                "the sim is not built: neither {} nor {} exists; build it (`make`, or `cargo build --release -p ibv-sim`) or name its directory with --sim-dir",
                lib.display(),
                built.display()
            )))
        }
        _ => {}
    }
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

/// Copies the built sim to `dir/libibverbs.so.1` through a fresh temporary
/// and a rename (`files::write_replacing`), so a program loading the old
/// copy is not disturbed and nothing planted in `dir` is written through.
fn copy_sim(built: &Path, dir: &Path, lib: &Path) -> Result<(), SetupError> {
    std::fs::create_dir_all(dir).map_err(|e| setup(format!("mkdir {}: {e}", dir.display())))?;
    let bytes =
        std::fs::read(built).map_err(|e| setup(format!("reading {}: {e}", built.display())))?;
    crate::files::write_replacing(lib, &bytes, 0o755)
        .map_err(|e| setup(format!("writing {}: {e}", lib.display())))
}

/// `new` first, then the entries of `old` (split on spaces and colons, as
/// ld.so does for LD_PRELOAD) other than `new` itself, joined by `:`.
pub fn prepend_preload(new: &Path, old: Option<&OsStr>) -> OsString {
    let new = new.as_os_str().as_bytes();
    let mut out = new.to_vec();
    for entry in old
        .map(OsStr::as_bytes)
        .unwrap_or_default()
        .split(|b| *b == b' ' || *b == b':')
        .filter(|e| !e.is_empty() && *e != new)
    {
        out.push(b':');
        out.extend_from_slice(entry);
    }
    OsString::from_vec(out)
}

/// `dir` first in a colon-separated search path (`LD_LIBRARY_PATH`). An
/// empty old value stays out: an empty entry would mean the current
/// directory.
pub fn prepend_path(dir: &Path, old: Option<&OsStr>) -> OsString {
    let mut out = dir.as_os_str().to_os_string();
    if let Some(old) = old.filter(|o| !o.is_empty()) {
        out.push(":");
        out.push(old);
    }
    out
}

/// Paths the program reads or writes are made absolute: it may change
/// directory before the shim opens them.
fn absolute_os(p: &OsStr) -> OsString {
    absolute(Path::new(p)).into_os_string()
}

/// The variables for the program. `inherited` looks up the launcher's own
/// environment (a parameter so tests can give their own).
pub fn plan(
    o: &Options,
    shim: &Path,
    sim_dir: Option<&Path>,
    private_dir: impl FnOnce() -> Result<PathBuf, SetupError>,
    inherited: impl Fn(&str) -> Option<OsString>,
) -> Result<Plan, SetupError> {
    let mut vars: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |k: &str, v: OsString| vars.push((k.into(), v));

    set(
        "LD_PRELOAD",
        prepend_preload(shim, inherited("LD_PRELOAD").as_deref()),
    );
    if let Some(dir) = sim_dir {
        set(
            "LD_LIBRARY_PATH",
            prepend_path(dir, inherited("LD_LIBRARY_PATH").as_deref()),
        );
    }
    if let Some(devices) = &o.sim_devices {
        set("IBV_SIM_DEVICES", devices.clone());
    }
    if let Some(level) = &o.log {
        set("IBV_SHIM_LOG", level.into());
    }
    if let Some(f) = &o.log_file {
        set("IBV_SHIM_LOG_FILE", absolute_os(f));
    }
    if let Some(f) = &o.trace {
        set("IBV_SHIM_TRACE", absolute_os(f));
    }
    if let Some(n) = o.leak_exitcode {
        set("IBV_SHIM_LEAK_EXITCODE", n.to_string().into());
    }
    if let Some(f) = &o.suppress {
        set("IBV_SHIM_SUPPRESS", absolute_os(f));
    }
    if o.backtrace {
        set("IBV_SHIM_BACKTRACE", "1".into());
    }
    if let Some(rules) = &o.faults {
        set("IBV_SHIM_FAULTS", rules.into());
    }
    if o.check_datapath {
        let v = match (o.check_inflight, o.check_abort) {
            (true, true) => "inflight,abort",
            (true, false) => "inflight",
            (false, true) => "datapath,abort",
            (false, false) => "datapath",
        };
        set("IBV_SHIM_CHECK", v.into());
    }
    if o.no_default_suppressions {
        set("IBV_SHIM_DEFAULT_SUPPRESSIONS", "0".into());
    }
    if let Some(lib) = &o.library {
        // A bare name is for dlopen's own search; a path is made absolute.
        let lib = if lib.as_bytes().contains(&b'/') {
            absolute_os(lib)
        } else {
            lib.clone()
        };
        set("IBV_SHIM_LIBRARY", lib);
    }
    let private = private_dir()?;
    let inherited_report = inherited("IBV_SHIM_REPORT").filter(|r| !r.is_empty());
    let report = match (&o.report, inherited_report) {
        (Some(path), _) => ReportLocation::kept(absolute(Path::new(path))),
        (None, Some(path)) => ReportLocation::kept(absolute(Path::new(&path))),
        (None, None) => ReportLocation::private(private.clone()),
    };
    set("IBV_SHIM_REPORT", report.template().into_os_string());
    // Each process that uses verbs notes itself there: the launcher can
    // then name one that died before writing its report.
    set("IBV_SHIM_STATUS_DIR", private.clone().into_os_string());
    let run = private
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    set("IBV_SHIM_RUN", run.clone().into());
    Ok(Plan {
        vars,
        report,
        private,
        run,
    })
}

/// The leak exit code the program runs with: `--leak-exitcode` /
/// `--fail-on-leak`, else an inherited `IBV_SHIM_LEAK_EXITCODE` the shim
/// will accept.
pub fn leak_exitcode(o: &Options, inherited: impl Fn(&str) -> Option<OsString>) -> Option<u8> {
    o.leak_exitcode.or_else(|| {
        inherited("IBV_SHIM_LEAK_EXITCODE")?
            .to_str()?
            .trim()
            .parse::<u8>()
            .ok()
            .filter(|n| *n != 0)
    })
}

/// A fresh private directory (mode 0700) under the system's temporary
/// directory, for the reports of one run.
pub fn private_dir() -> Result<PathBuf, SetupError> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = None;
    for attempt in 0..100u32 {
        let dir = base.join(format!(
            "ibv-shim.{}.{:08x}",
            std::process::id(),
            nanos.wrapping_add(attempt.wrapping_mul(0x9e37_79b9))
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(setup(format!(
                    "cannot create a temporary directory in {}: {e}",
                    base.display()
                )))
            }
        }
    }
    Err(setup(format!(
        "cannot create a temporary directory in {}: {}",
        base.display(),
        last.map(|e| e.to_string()).unwrap_or_default()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn opts() -> Options {
        Options {
            program: "p".into(),
            ..Options::default()
        }
    }

    fn vars(plan: &Plan) -> HashMap<String, String> {
        plan.vars
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect()
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn preload_goes_first_and_keeps_the_rest() {
        let shim = Path::new("/s/libibv_shim.so");
        assert_eq!(prepend_preload(shim, None), "/s/libibv_shim.so");
        assert_eq!(
            prepend_preload(shim, Some("".as_ref())),
            "/s/libibv_shim.so"
        );
        assert_eq!(
            prepend_preload(shim, Some("/a.so /b.so:/c.so".as_ref())),
            "/s/libibv_shim.so:/a.so:/b.so:/c.so"
        );
        assert_eq!(
            prepend_preload(shim, Some("/a.so:/s/libibv_shim.so".as_ref())),
            "/s/libibv_shim.so:/a.so"
        );
    }

    #[test]
    fn library_path_goes_first() {
        let d = Path::new("/t/sim");
        assert_eq!(prepend_path(d, None), "/t/sim");
        assert_eq!(prepend_path(d, Some("".as_ref())), "/t/sim");
        assert_eq!(prepend_path(d, Some("/x:/y".as_ref())), "/t/sim:/x:/y");
    }

    #[test]
    fn options_become_variables() {
        let o = Options {
            log: Some("debug".into()),
            log_file: Some("/l.%p".into()),
            report: Some("/r.%p.json".into()),
            leak_exitcode: Some(23),
            suppress: Some("/s.supp".into()),
            no_default_suppressions: true,
            backtrace: true,
            check_datapath: true,
            sim: true,
            sim_devices: Some("rxe0".into()),
            library: Some("libibverbs.so.1".into()),
            ..opts()
        };
        let plan = plan(
            &o,
            Path::new("/s/libibv_shim.so"),
            Some(Path::new("/t/sim")),
            || Ok(PathBuf::from("/tmp/ibv-shim.1.x")),
            env(&[("LD_PRELOAD", "/a.so"), ("LD_LIBRARY_PATH", "/lib")]),
        )
        .unwrap();
        let v = vars(&plan);
        let want = [
            ("LD_PRELOAD", "/s/libibv_shim.so:/a.so"),
            ("LD_LIBRARY_PATH", "/t/sim:/lib"),
            ("IBV_SIM_DEVICES", "rxe0"),
            ("IBV_SHIM_LOG", "debug"),
            ("IBV_SHIM_LOG_FILE", "/l.%p"),
            ("IBV_SHIM_LEAK_EXITCODE", "23"),
            ("IBV_SHIM_SUPPRESS", "/s.supp"),
            ("IBV_SHIM_BACKTRACE", "1"),
            ("IBV_SHIM_CHECK", "datapath"),
            ("IBV_SHIM_DEFAULT_SUPPRESSIONS", "0"),
            ("IBV_SHIM_LIBRARY", "libibverbs.so.1"),
            ("IBV_SHIM_REPORT", "/r.%p.json"),
            ("IBV_SHIM_STATUS_DIR", "/tmp/ibv-shim.1.x"),
            ("IBV_SHIM_RUN", "ibv-shim.1.x"),
        ];
        for (k, val) in want {
            assert_eq!(v.get(k).map(String::as_str), Some(val), "{k}");
        }
        assert_eq!(v.len(), want.len());
        assert!(!plan.report.is_private());
    }

    #[test]
    fn defaults_set_only_the_preload_and_a_private_report() {
        let plan = plan(
            &opts(),
            Path::new("/s/libibv_shim.so"),
            None,
            || Ok(PathBuf::from("/tmp/ibv-shim.1.x")),
            env(&[]),
        )
        .unwrap();
        let v = vars(&plan);
        assert_eq!(v.len(), 4, "{v:?}");
        assert_eq!(v["IBV_SHIM_STATUS_DIR"], "/tmp/ibv-shim.1.x");
        assert_eq!(v["IBV_SHIM_RUN"], "ibv-shim.1.x");
        assert_eq!(v["LD_PRELOAD"], "/s/libibv_shim.so");
        assert_eq!(
            v["IBV_SHIM_REPORT"],
            "/tmp/ibv-shim.1.x/ibv-shim-report.%p.json"
        );
        assert!(plan.report.is_private());
    }

    #[test]
    fn relative_paths_are_made_absolute() {
        let o = Options {
            report: Some("r.json".into()),
            log_file: Some("logs/l".into()),
            library: Some("./lib.so".into()),
            ..opts()
        };
        let cwd = std::env::current_dir().unwrap();
        let private = || Ok(PathBuf::from("/p"));
        let plan = plan(&o, Path::new("/s.so"), None, private, env(&[])).unwrap();
        let v = vars(&plan);
        assert_eq!(
            Path::new(&v["IBV_SHIM_REPORT"]),
            cwd.join("r.json").as_path()
        );
        assert_eq!(Path::new(&v["IBV_SHIM_LOG_FILE"]), cwd.join("logs/l"));
        assert_eq!(Path::new(&v["IBV_SHIM_LIBRARY"]), cwd.join("./lib.so"));
    }

    #[test]
    fn an_inherited_report_is_kept_and_read() {
        let plan = plan(
            &opts(),
            Path::new("/s.so"),
            None,
            || Ok(PathBuf::from("/p")),
            env(&[("IBV_SHIM_REPORT", "/keep/r.%p.json")]),
        )
        .unwrap();
        assert_eq!(vars(&plan)["IBV_SHIM_REPORT"], "/keep/r.%p.json");
        assert!(!plan.report.is_private());
    }

    #[test]
    fn the_leak_exitcode_comes_from_the_option_or_the_environment() {
        let o = Options {
            leak_exitcode: Some(5),
            ..opts()
        };
        assert_eq!(
            leak_exitcode(&o, env(&[("IBV_SHIM_LEAK_EXITCODE", "7")])),
            Some(5)
        );
        assert_eq!(
            leak_exitcode(&opts(), env(&[("IBV_SHIM_LEAK_EXITCODE", "7")])),
            Some(7)
        );
        assert_eq!(
            leak_exitcode(&opts(), env(&[("IBV_SHIM_LEAK_EXITCODE", "x")])),
            None
        );
        assert_eq!(leak_exitcode(&opts(), env(&[])), None);
    }

    #[test]
    fn the_sim_is_copied_next_to_the_launcher_when_missing() {
        let base = private_dir().unwrap();
        let exe = base.join("release");
        std::fs::create_dir_all(&exe).unwrap();
        let exe_dir = || Ok(exe.clone());
        let err = find_sim_dir(None, exe_dir).unwrap_err();
        assert!(err.0.contains("the sim is not built"), "{err}");
        std::fs::write(exe.join(SIM_BUILT_NAME), b"sim v1").unwrap();
        let dir = find_sim_dir(None, exe_dir).unwrap();
        assert_eq!(dir, std::fs::canonicalize(base.join("sim")).unwrap());
        assert_eq!(std::fs::read(dir.join(SIM_SONAME)).unwrap(), b"sim v1");
        // A rebuilt sim replaces the copy.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(exe.join(SIM_BUILT_NAME), b"sim v2").unwrap();
        find_sim_dir(None, exe_dir).unwrap();
        assert_eq!(std::fs::read(dir.join(SIM_SONAME)).unwrap(), b"sim v2");
        // An explicit directory must hold the library.
        assert!(find_sim_dir(Some(&exe), exe_dir).is_err());
        assert_eq!(find_sim_dir(Some(&dir), exe_dir).unwrap(), dir);
        // The shim: missing is a clear error; present is found.
        let err = find_shim(None, exe_dir).unwrap_err();
        assert!(err.0.contains("libibv_shim.so does not exist"), "{err}");
        std::fs::write(exe.join(SHIM_NAME), b"").unwrap();
        assert_eq!(
            find_shim(None, exe_dir).unwrap(),
            std::fs::canonicalize(exe.join(SHIM_NAME)).unwrap()
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn an_installed_launcher_finds_the_installed_shim_and_sim() {
        // make install: PREFIX/bin/ibv-shim, PREFIX/lib/ibv-shim/{libibv_shim.so,sim/}.
        let base = private_dir().unwrap();
        let bin = base.join("bin");
        let lib = base.join("lib/ibv-shim");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(lib.join("sim")).unwrap();
        let exe_dir = || Ok(bin.clone());
        assert!(find_shim(None, exe_dir).is_err());
        assert!(find_sim_dir(None, exe_dir).is_err());
        std::fs::write(lib.join(SHIM_NAME), b"").unwrap();
        std::fs::write(lib.join("sim").join(SIM_SONAME), b"sim").unwrap();
        assert_eq!(
            find_shim(None, exe_dir).unwrap(),
            std::fs::canonicalize(lib.join(SHIM_NAME)).unwrap()
        );
        assert_eq!(
            find_sim_dir(None, exe_dir).unwrap(),
            std::fs::canonicalize(lib.join("sim")).unwrap()
        );
        // Nothing was made next to the launcher.
        assert!(!base.join("sim").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_packaged_launcher_finds_the_shim_and_sim_in_the_multiarch_directory() {
        // make deb: /usr/bin/ibv-shim, /usr/lib/<triplet>/ibv-shim/{libibv_shim.so,sim/}.
        let base = private_dir().unwrap();
        let bin = base.join("bin");
        let lib = base.join("lib").join(MULTIARCH).join("ibv-shim");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(lib.join("sim")).unwrap();
        std::fs::write(lib.join(SHIM_NAME), b"").unwrap();
        std::fs::write(lib.join("sim").join(SIM_SONAME), b"sim").unwrap();
        let exe_dir = || Ok(bin.clone());
        assert_eq!(
            find_shim(None, exe_dir).unwrap(),
            std::fs::canonicalize(lib.join(SHIM_NAME)).unwrap()
        );
        assert_eq!(
            find_sim_dir(None, exe_dir).unwrap(),
            std::fs::canonicalize(lib.join("sim")).unwrap()
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
