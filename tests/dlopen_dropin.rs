//! Reaching programs that dlopen libibverbs, and the shim as a
//! drop-in `libibverbs.so.1`.
//!
//! Two ways to put the shim in a process, on two beds:
//!
//! - preload mode: `LD_PRELOAD=libibv_shim.so`; the shim's `dlopen` hook hands
//!   a program that dlopens `libibverbs.so[.N]` a handle to the shim;
//! - drop-in mode: `LD_LIBRARY_PATH=target/dropin` (the shim under the names
//!   `libibverbs.so.1` and `libibverbs.so`), the shim forwarding to the real
//!   library by its absolute path;
//! - beds: the sim (`target/sim/libibverbs.so.1`, devices that open) and the
//!   real rdma-core on the fake-sysfs test bed (devices that list but fail to
//!   open with ENOENT).
//!
//! Every expectation comes from a run of the same program without the shim,
//! from the real library's own files, or from the program's own output
//! (addresses); nothing is hard-coded but the contract.
//!
//! Also: `dlclose()` of the drop-in shim does not run the exit report in
//! the middle of the program (`-z nodelete`), and a library dlopened by path
//! in preload mode is the one forwarded to.
//!
//! Needs root (test bed), gcc, binutils, libibverbs-dev, ibverbs-utils,
//! ibverbs-providers, and a built shim and sim (`make test`).

mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// ---------------------------------------------------------------------------
// Where things are, and how a process gets the shim
// ---------------------------------------------------------------------------

/// `tests/c/dlopen/<name>.c`.
fn src(name: &str) -> PathBuf {
    repo_dir().join("tests/c/dlopen").join(format!("{name}.c"))
}

/// Makes `link` a symlink to `to`, atomically (parallel tests), unless it
/// already is one.
fn ensure_symlink(to: &Path, link: &Path) {
    if std::fs::read_link(link).ok().as_deref() == Some(to) {
        return;
    }
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let tmp = link.with_file_name(format!(
        ".{}.{}.{}",
        link.file_name().unwrap().to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(to, &tmp)
        .unwrap_or_else(|e| panic!("symlink {} -> {}: {e}", tmp.display(), to.display()));
    std::fs::rename(&tmp, link)
        .unwrap_or_else(|e| panic!("rename {} -> {}: {e}", tmp.display(), link.display()));
}

/// The drop-in directory: `target/dropin` as `make build` makes it
/// (`libibverbs.so.1 -> ../release/libibv_shim.so`, `libibverbs.so ->
/// libibverbs.so.1`). Made the same way when the test runs from a target
/// directory the Makefile did not build (`target/dropin-<profile>` for a
/// profile other than release). Panics if it resolves to anything but this
/// build's shim.
fn dropin_dir() -> PathBuf {
    let shim = shim_so();
    let target = target_dir();
    let profile = target.file_name().unwrap().to_string_lossy().into_owned();
    let root = target.parent().unwrap();
    let dir = if profile == "release" {
        root.join("dropin")
    } else {
        root.join(format!("dropin-{profile}"))
    };
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let so1 = dir.join("libibverbs.so.1");
    let so = dir.join("libibverbs.so");
    if !so1.exists() {
        ensure_symlink(&Path::new("..").join(&profile).join("libibv_shim.so"), &so1);
    }
    if !so.exists() {
        ensure_symlink(Path::new("libibverbs.so.1"), &so);
    }
    let want = shim.canonicalize().unwrap();
    for f in [&so1, &so] {
        assert_eq!(
            f.canonicalize().ok().as_ref(),
            Some(&want),
            "{} must be this build's shim {} (make build makes it)",
            f.display(),
            shim.display()
        );
    }
    dir
}

/// The sim as a directory a dlopen()ing program can use: `libibverbs.so.1`
/// (the sim, from `sim_dir()`) and `libibverbs.so` next to it.
///
/// `target/sim` holds only `libibverbs.so.1`; a program that tries
/// `dlopen("libibverbs.so")` first (NCCL does) would then get the system's
/// development symlink, the REAL library, and the run "without the shim"
/// would not be on the sim at all. The shim itself never opens
/// `libibverbs.so`, so this only matters for the baseline runs.
struct SimLib {
    dir: TempDir,
}

impl SimLib {
    fn new() -> SimLib {
        let sim = sim_dir().join("libibverbs.so.1");
        let dir = TempDir::new("simlib");
        std::os::unix::fs::symlink(&sim, dir.join("libibverbs.so.1")).unwrap();
        std::os::unix::fs::symlink("libibverbs.so.1", dir.join("libibverbs.so")).unwrap();
        SimLib { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `LD_PRELOAD=<shim>`.
    Preload,
    /// `LD_LIBRARY_PATH=<dropin dir>` in front.
    DropIn,
}

const MODES: [Mode; 2] = [Mode::Preload, Mode::DropIn];

/// The library that really provides verbs on a bed.
#[derive(Clone, Copy)]
enum Bed<'a> {
    /// The sim, `libibverbs.so.1` in `dir`, found through LD_LIBRARY_PATH.
    Sim(&'a Path),
    /// The real rdma-core on the fake-sysfs test bed.
    Real(&'a Testbed),
}

impl std::fmt::Debug for Bed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bed::Sim(dir) => write!(f, "the sim ({})", dir.display()),
            Bed::Real(_) => f.write_str("the real test bed"),
        }
    }
}

impl Bed<'_> {
    /// The canonical path of the library that provides verbs on this bed.
    fn provider(&self) -> PathBuf {
        match self {
            Bed::Sim(dir) => dir.join("libibverbs.so.1").canonicalize().unwrap(),
            Bed::Real(_) => real_libibverbs().canonicalize().unwrap(),
        }
    }
}

/// A command that runs `prog` on `bed`, with the shim in `mode` (or without
/// it). The test harness's own LD_LIBRARY_PATH (cargo's) and any shim
/// option of the caller's environment are cleared first.
fn command(bed: Bed<'_>, mode: Option<Mode>, prog: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = match bed {
        Bed::Sim(_) => {
            let mut c = Command::new(prog);
            c.stdin(std::process::Stdio::null());
            c
        }
        Bed::Real(tb) => tb.command(prog),
    };
    for var in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "IBV_SHIM_LIBRARY",
        "IBV_SHIM_LOG",
        "IBV_SHIM_LOG_FILE",
        "IBV_SHIM_REPORT",
        "IBV_SHIM_LEAK_EXITCODE",
        "IBV_SHIM_SUPPRESS",
    ] {
        cmd.env_remove(var);
    }
    let mut path: Vec<PathBuf> = Vec::new();
    if mode == Some(Mode::DropIn) {
        path.push(dropin_dir());
    }
    if let Bed::Sim(dir) = bed {
        path.push(dir.to_path_buf());
    }
    if !path.is_empty() {
        cmd.env("LD_LIBRARY_PATH", std::env::join_paths(&path).unwrap());
    }
    if mode == Some(Mode::Preload) {
        cmd.env("LD_PRELOAD", shim_so());
    }
    cmd
}

fn mode_name(mode: Option<Mode>) -> &'static str {
    match mode {
        None => "without the shim",
        Some(Mode::Preload) => "preload mode",
        Some(Mode::DropIn) => "drop-in mode",
    }
}

/// Canonical path of a file a program printed (`object PATH` lines etc.).
fn canonical(path: &str) -> Option<PathBuf> {
    Path::new(path).canonicalize().ok()
}

/// The values of the lines `<prefix> VALUE`.
fn values<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    let p = format!("{prefix} ");
    text.lines().filter_map(|l| l.strip_prefix(&p)).collect()
}

/// How many of the `object` lines (dl_iterate_phdr) are the file `want`.
fn objects_that_are(text: &str, want: &Path) -> usize {
    values(text, "object")
        .into_iter()
        .filter(|o| canonical(o).as_deref() == Some(want))
        .count()
}

/// The lines two runs must have in common: everything but addresses and
/// file names.
fn comparable(text: &str) -> Vec<&str> {
    const VARIES: [&str; 5] = ["sym ", "optional ", "addr ", "object ", "mapped "];
    text.lines()
        .filter(|l| !VARIES.iter().any(|p| l.starts_with(p)))
        .collect()
}

/// Provider plugins (`lib*-rdmav*.so`) among the `object` lines, by file name.
fn plugins(text: &str) -> BTreeSet<String> {
    values(text, "object")
        .into_iter()
        .filter_map(|o| Path::new(o).file_name())
        .map(|f| f.to_string_lossy().into_owned())
        .filter(|f| f.contains("-rdmav") && f.ends_with(".so"))
        .collect()
}

/// The ELF file's `NEEDED` entries.
fn needed(elf: &Path) -> Vec<String> {
    let mut cmd = Command::new("objdump");
    cmd.arg("-p").arg(elf);
    let output = run(&mut cmd);
    assert!(output.status.success(), "{}", describe(&cmd, &output));
    stdout(&output)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
        .map(|s| s.trim().to_string())
        .collect()
}

/// A run with the shim logging at debug into a fresh directory, and a JSON
/// report requested into another.
struct ShimRun {
    cmd: Command,
    out: Output,
    log: Vec<LogLine>,
    /// The text of every file the shim wrote for `IBV_SHIM_REPORT`.
    reports: Vec<(PathBuf, String)>,
}

impl ShimRun {
    fn text(&self) -> String {
        stdout(&self.out)
    }

    fn explain(&self) -> String {
        let reports: String = if self.reports.is_empty() {
            "    (no report file)\n".into()
        } else {
            self.reports
                .iter()
                .map(|(p, t)| format!("    {}:\n{t}\n", p.display()))
                .collect()
        };
        format!(
            "{}\nshim log:\n{}IBV_SHIM_REPORT files:\n{reports}",
            describe(&self.cmd, &self.out),
            show_log(&self.log)
        )
    }
}

fn run_with_shim(mut cmd: Command) -> ShimRun {
    let logs = TempDir::new("log");
    let reports = TempDir::new("report");
    cmd.envs(debug_log_env(logs.path()))
        .env("IBV_SHIM_REPORT", reports.join("report.%p.json"));
    let out = run(&mut cmd);
    let log = read_logs(logs.path());
    let mut files: Vec<PathBuf> = std::fs::read_dir(reports.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let reports = files
        .into_iter()
        .map(|p| {
            let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, t)
        })
        .collect();
    ShimRun {
        cmd,
        out,
        log,
        reports,
    }
}

/// Does `text` name the address `addr` (`0x...` as printf's %p prints it)?
/// Accepts any hex case, with or without leading zeros, or decimal.
fn names_address(text: &str, addr: &str) -> bool {
    let Some(hex) = addr.strip_prefix("0x") else {
        return false;
    };
    let Ok(value) = u64::from_str_radix(hex, 16) else {
        return false;
    };
    let lower = text.to_ascii_lowercase();
    let hex = format!("{value:x}");
    let dec = value.to_string();
    let is_hex = |c: char| c.is_ascii_hexdigit();
    // 0x + optional zeros + the digits, not followed by another hex digit.
    lower.match_indices("0x").any(|(i, _)| {
        let rest = lower[i + 2..].trim_start_matches('0');
        rest.starts_with(&hex) && !rest[hex.len()..].starts_with(is_hex)
    }) || text.match_indices(&dec).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + dec.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

// ---------------------------------------------------------------------------
// 1. A program that loads verbs the way NCCL does
// ---------------------------------------------------------------------------

fn nccl_like() -> PathBuf {
    let prog = cc("nccl_like", &[&src("nccl_like")], &["-ldl"]);
    let libs = needed(&prog);
    assert!(
        !libs.iter().any(|l| l.starts_with("libibverbs")),
        "nccl_like must not be linked to libibverbs (it dlopens it): NEEDED {libs:?}"
    );
    prog
}

/// Runs nccl_like on `bed` without the shim, then in both modes with it, and
/// checks what holds on every bed: same outcome line for line, every verb
/// looked up on the handle resolves in the shim (at the same versions as
/// without it), one provider library and one shim in the process, the same
/// provider plugins, and the shim's log has the device calls. Returns the
/// plain run's stdout and the two shim runs.
fn nccl_like_everywhere(bed: Bed<'_>) -> (String, Vec<(Mode, ShimRun)>) {
    let prog = nccl_like();
    let shim = shim_so().canonicalize().unwrap();
    let provider = bed.provider();

    let mut plain = command(bed, None, &prog);
    let plain_out = run(&mut plain);
    let plain_text = stdout(&plain_out);
    assert!(
        plain_out.status.success() && plain_text.lines().any(|l| l == "done"),
        "nccl_like without the shim must run to the end (the bed is broken)\n{}",
        describe(&plain, &plain_out)
    );
    for f in values(&plain_text, "sym") {
        let file = f.split_once(": ").map(|x| x.1).unwrap_or("");
        assert_eq!(
            canonical(file).as_ref(),
            Some(&provider),
            "without the shim every verb must come from {}: {f}\n{}",
            provider.display(),
            describe(&plain, &plain_out)
        );
    }

    let mut runs = Vec::new();
    for mode in MODES {
        let what = format!("nccl_like on {bed:?}, {}", mode_name(Some(mode)));
        let r = run_with_shim(command(bed, Some(mode), &prog));
        let text = r.text();
        assert!(
            r.out.status.code() == plain_out.status.code(),
            "{what}: exit status differs from the run without the shim ({})\n{}",
            plain_out.status,
            r.explain()
        );
        assert_eq!(
            comparable(&text),
            comparable(&plain_text),
            "{what}: the program's outcome differs from the run without the shim\n--- without ---\n{}\n--- with ---\n{}",
            describe(&plain, &plain_out),
            r.explain()
        );
        // Every verb on the handle is the shim's: instrumented or forwarded.
        let looked_up: Vec<&str> = values(&text, "sym")
            .into_iter()
            .chain(values(&text, "optional"))
            .collect();
        assert!(!looked_up.is_empty(), "{what}: no lookups\n{}", r.explain());
        for l in &looked_up {
            let (name, file) = l.split_once(": ").unwrap();
            if file == "absent" {
                continue;
            }
            assert_eq!(
                canonical(file).as_ref(),
                Some(&shim),
                "{what}: dlvsym({name}) on the handle must resolve in the shim, not {file}\n{}",
                r.explain()
            );
        }
        // The same optional verbs exist as without the shim.
        let present = |t: &str| -> BTreeMap<String, bool> {
            values(t, "optional")
                .into_iter()
                .filter_map(|l| l.split_once(": "))
                .map(|(n, f)| (n.to_string(), f != "absent"))
                .collect()
        };
        assert_eq!(
            present(&text),
            present(&plain_text),
            "{what}: the optional verbs found differ from the run without the shim\n{}",
            r.explain()
        );
        // One shim, one provider library, the same provider plugins.
        assert_eq!(
            objects_that_are(&text, &shim),
            1,
            "{what}: exactly one copy of the shim must be loaded\n{}",
            r.explain()
        );
        assert_eq!(
            objects_that_are(&text, &provider),
            1,
            "{what}: exactly one {} must be loaded\n{}",
            provider.display(),
            r.explain()
        );
        assert_eq!(
            plugins(&text),
            plugins(&plain_text),
            "{what}: the provider plugins loaded differ from the run without the shim\n{}",
            r.explain()
        );
        // The shim saw the calls made through the dlvsym pointers.
        let devices = values(&text, "device").len();
        for (function, at_least) in [
            ("ibv_get_device_list", 1),
            ("ibv_get_device_name", devices),
            ("ibv_open_device", 1),
            ("ibv_free_device_list", 1),
        ] {
            let n = log_lines_for(&r.log, function).len();
            assert!(
                n >= at_least,
                "{what}: the shim's debug log must have {at_least}+ {function} line(s), has {n}\n{}",
                r.explain()
            );
        }
        runs.push((mode, r));
    }
    (plain_text, runs)
}

#[test]
fn nccl_style_loader_on_the_real_test_bed_is_logged_in_both_modes() {
    let tb = Testbed::new();
    let (plain, runs) = nccl_like_everywhere(Bed::Real(&tb));
    // The real bed cannot open: the program stops after the failed open.
    assert!(
        plain
            .lines()
            .any(|l| l.starts_with("open ") && l.contains("NULL errno=")),
        "on the test bed ibv_open_device is expected to fail:\n{plain}"
    );
    for (mode, r) in &runs {
        assert!(
            plugins(&r.text()).contains("libmlx5-rdmav34.so"),
            "{}: the real mlx5 provider plugin must be loaded\n{}",
            mode_name(Some(*mode)),
            r.explain()
        );
        // The failed open is logged with its errno.
        let opens = log_lines_for(&r.log, "ibv_open_device");
        let errno = plain
            .lines()
            .find_map(|l| l.split_once("NULL errno=").map(|x| x.1))
            .unwrap();
        assert!(
            opens
                .iter()
                .any(|l| l.message.contains(&format!("errno={errno}"))),
            "{}: the log must show ibv_open_device failing with {errno}\n{}",
            mode_name(Some(*mode)),
            r.explain()
        );
    }
}

#[test]
fn nccl_style_loader_on_the_sim_is_logged_and_its_leaked_pd_and_mr_are_reported() {
    let sim = SimLib::new();
    let (plain, runs) = nccl_like_everywhere(Bed::Sim(sim.path()));
    for step in [
        "alloc_pd: ok",
        "reg_mr: ok",
        "reg_mr_iova2: ok",
        "dereg_mr iova2: 0",
    ] {
        assert!(
            plain.lines().any(|l| l == step),
            "nccl_like on the sim without the shim must get '{step}'; the sim is incomplete:\n{plain}"
        );
    }
    let mut failures = Vec::new();
    for (mode, r) in &runs {
        let what = format!("nccl_like on the sim, {}", mode_name(Some(*mode)));
        let text = r.text();
        let addr = values(&text, "addr");
        let field = |k: &str| -> String {
            addr.first()
                .and_then(|a| a.split_whitespace().find_map(|w| w.strip_prefix(k)))
                .unwrap_or_else(|| panic!("{what}: no {k} in the addr line\n{}", r.explain()))
                .to_string()
        };
        let (pd, mr, mr2) = (field("pd="), field("mr="), field("mr_iova2="));
        let mut bad = Vec::new();

        // The create and destroy calls made through dlvsym pointers are logged.
        for function in [
            "ibv_alloc_pd",
            "ibv_reg_mr",
            "ibv_reg_mr_iova2",
            "ibv_dereg_mr",
            "ibv_close_device",
        ] {
            if log_lines_for(&r.log, function).is_empty() {
                bad.push(format!("no {function} line in the shim's debug log"));
            }
        }
        // The text report (WARN) names the leaked PD and MR, not the freed MR.
        let warn: String = r
            .log
            .iter()
            .filter(|l| l.level == "WARN")
            .map(|l| format!("{}\n", l.message))
            .collect();
        for (kind, a) in [("PD", &pd), ("MR", &mr)] {
            if !names_address(&warn, a) {
                bad.push(format!(
                    "no WARN line of the log names the leaked {kind} {a}"
                ));
            }
        }
        if names_address(&warn, &mr2) {
            bad.push(format!(
                "the log reports the MR {mr2} that was deregistered"
            ));
        }
        // So does the JSON report.
        match r.reports.as_slice() {
            [(path, json)] => {
                for (kind, a) in [("PD", &pd), ("MR", &mr)] {
                    if !names_address(json, a) {
                        bad.push(format!(
                            "the JSON report {} does not name the leaked {kind} {a}",
                            path.display()
                        ));
                    }
                }
                if names_address(json, &mr2) {
                    bad.push(format!(
                        "the JSON report names the MR {mr2} that was deregistered"
                    ));
                }
            }
            other => bad.push(format!(
                "expected one IBV_SHIM_REPORT file, found {}",
                other.len()
            )),
        }
        if !bad.is_empty() {
            failures.push(format!("{what}:\n  {}\n{}", bad.join("\n  "), r.explain()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------
// 2. The real rdma-core utilities in drop-in mode
// ---------------------------------------------------------------------------

/// Paths (canonical) of every object the dynamic linker initialised, from
/// `LD_DEBUG=files` output files in `dir`.
fn initialised_objects(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        for l in text.lines() {
            if let Some((_, path)) = l.split_once("calling init: ") {
                out.push(canonical(path.trim()).unwrap_or_else(|| PathBuf::from(path.trim())));
            }
        }
    }
    out
}

/// From `LD_DEBUG=bindings` output files in `dir`: for each binding of a
/// reference of `from` (canonical path) at symbol version `version`, the
/// symbol and the canonical path of the object it was bound to.
fn bindings_of(dir: &Path, from: &Path, version: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let tag = format!("[{version}]");
    for e in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for l in text.lines().filter(|l| l.trim_end().ends_with(&tag)) {
            // binding file A [0] to B [0]: normal symbol `S' [V]
            let Some((_, rest)) = l.split_once("binding file ") else {
                continue;
            };
            let Some((a, rest)) = rest.split_once(" [") else {
                continue;
            };
            let Some((_, rest)) = rest.split_once("] to ") else {
                continue;
            };
            let Some((b, rest)) = rest.split_once(" [") else {
                continue;
            };
            let Some(sym) = rest.split('`').nth(1).and_then(|x| x.split('\'').next()) else {
                continue;
            };
            if canonical(a).as_deref() == Some(from) {
                out.push((
                    sym.to_string(),
                    canonical(b).unwrap_or_else(|| PathBuf::from(b)),
                ));
            }
        }
    }
    out
}

#[test]
fn real_utilities_in_dropin_mode_print_what_they_print_without_the_shim() {
    let tb = Testbed::new();
    let real = real_libibverbs().canonicalize().unwrap();
    let shim = shim_so().canonicalize().unwrap();
    let mlx5 = real
        .parent()
        .unwrap()
        .join("libibverbs/libmlx5-rdmav34.so")
        .canonicalize()
        .expect("the real mlx5 provider plugin (ibverbs-providers) is installed");

    for args in [&["ibv_devices"][..], &["ibv_devinfo", "-l"][..]] {
        let what = args.join(" ");
        let mut plain = command(Bed::Real(&tb), None, args[0]);
        plain.args(&args[1..]);
        let plain_out = run(&mut plain);
        let plain_text = stdout(&plain_out);
        assert!(
            plain_out.status.success() && tb.devices().iter().all(|d| plain_text.contains(d.name)),
            "{what} without the shim must list the test bed's devices (the bed is broken)\n{}",
            describe(&plain, &plain_out)
        );

        let mut dropin = command(Bed::Real(&tb), Some(Mode::DropIn), args[0]);
        dropin.args(&args[1..]);
        let dropin_out = run(&mut dropin);
        assert!(
            dropin_out.stdout == plain_out.stdout
                && dropin_out.status.code() == plain_out.status.code(),
            "{what}: drop-in mode must print byte-identical stdout and exit the same\n--- without ---\n{}\n--- drop-in ---\n{}",
            describe(&plain, &plain_out),
            describe(&dropin, &dropin_out)
        );

        // Which objects were loaded, and where the plugin's references to
        // the real library's private interface went: LD_DEBUG for the
        // utility alone (`env` sets it after the test bed's setup commands).
        for mode in [None, Some(Mode::DropIn)] {
            let ld = TempDir::new("ld-debug");
            let mut cmd = command(Bed::Real(&tb), mode, "env");
            cmd.arg("LD_DEBUG=files,bindings")
                .arg(format!("LD_DEBUG_OUTPUT={}", ld.join("ld").display()))
                .args(args);
            let out = run(&mut cmd);
            assert_eq!(
                out.stdout,
                plain_out.stdout,
                "{what} {} under LD_DEBUG printed something else\n{}",
                mode_name(mode),
                describe(&cmd, &out)
            );
            let inits = initialised_objects(ld.path());
            let count = |f: &Path| inits.iter().filter(|p| p.as_path() == f).count();
            let explain = || {
                format!(
                    "objects initialised (LD_DEBUG=files):\n{}\n{}",
                    inits
                        .iter()
                        .map(|p| format!("    {}\n", p.display()))
                        .collect::<String>(),
                    describe(&cmd, &out)
                )
            };
            assert_eq!(
                count(&real),
                1,
                "{what} {}: exactly one {} must be loaded\n{}",
                mode_name(mode),
                real.display(),
                explain()
            );
            assert_eq!(
                count(&shim),
                usize::from(mode.is_some()),
                "{what} {}: the shim must be loaded exactly when it is on the path\n{}",
                mode_name(mode),
                explain()
            );
            assert_eq!(
                count(&mlx5),
                1,
                "{what} {}: the real mlx5 provider plugin must be loaded once\n{}",
                mode_name(mode),
                explain()
            );
            // glibc binds the plugin's `libibverbs.so.1` (NEEDED) to the
            // object already loaded under that name: in drop-in mode the
            // shim, whose trampolines lead to the one real library.
            let private = bindings_of(ld.path(), &mlx5, "IBVERBS_PRIVATE_34");
            let allowed: Vec<&PathBuf> = if mode.is_some() {
                vec![&shim, &real]
            } else {
                vec![&real]
            };
            assert!(
                private.iter().any(|(s, _)| s == "verbs_register_driver_34")
                    && private.iter().all(|(_, to)| allowed.contains(&to)),
                "{what} {}: mlx5's IBVERBS_PRIVATE_34 references must bind to {allowed:?}: {private:?}\n{}",
                mode_name(mode),
                explain()
            );
        }
    }
}

#[test]
fn a_linked_program_in_dropin_mode_maps_one_real_libibverbs_and_its_plugins() {
    let tb = Testbed::new();
    let real = real_libibverbs().canonicalize().unwrap();
    let shim = shim_so().canonicalize().unwrap();
    let prog = cc("list_open-real", &[&src("list_open")], &["-libverbs"]);

    let mut plain = command(Bed::Real(&tb), None, &prog);
    let plain_out = run(&mut plain);
    let plain_text = stdout(&plain_out);
    assert!(
        plain_out.status.success() && plain_text.lines().any(|l| l == "done"),
        "{}",
        describe(&plain, &plain_out)
    );

    let r = run_with_shim(command(Bed::Real(&tb), Some(Mode::DropIn), &prog));
    let text = r.text();
    assert_eq!(
        comparable(&text),
        comparable(&plain_text),
        "list_open in drop-in mode differs from the run without the shim\n--- without ---\n{}\n--- drop-in ---\n{}",
        describe(&plain, &plain_out),
        r.explain()
    );
    let mapped_as = |f: &Path| {
        values(&text, "mapped")
            .into_iter()
            .filter(|m| canonical(m).as_deref() == Some(f))
            .count()
    };
    assert_eq!(
        objects_that_are(&text, &real),
        1,
        "one real libibverbs object\n{}",
        r.explain()
    );
    assert_eq!(
        mapped_as(&real),
        1,
        "one real libibverbs mapped\n{}",
        r.explain()
    );
    assert_eq!(
        objects_that_are(&text, &shim),
        1,
        "one shim object\n{}",
        r.explain()
    );
    // Any other file that calls itself libibverbs.so.1.* would be a second copy.
    let others: Vec<&str> = values(&text, "mapped")
        .into_iter()
        .filter(|m| {
            Path::new(m)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("libibverbs.so"))
                && canonical(m).as_deref() != Some(&real)
        })
        .collect();
    assert!(
        others.is_empty(),
        "other libibverbs mapped: {others:?}\n{}",
        r.explain()
    );
    assert_eq!(
        plugins(&text),
        plugins(&plain_text),
        "the provider plugins differ from the run without the shim\n{}",
        r.explain()
    );
    assert!(
        plugins(&text).contains("libmlx5-rdmav34.so"),
        "the mlx5 plugin must be loaded\n{}",
        r.explain()
    );
    for function in [
        "ibv_get_device_list",
        "ibv_open_device",
        "ibv_free_device_list",
    ] {
        assert!(
            !log_lines_for(&r.log, function).is_empty(),
            "drop-in mode: no {function} line in the shim's log\n{}",
            r.explain()
        );
    }
}

// ---------------------------------------------------------------------------
// 3. The drop-in library's exported ABI is the real one's
// ---------------------------------------------------------------------------

/// `(name, version, default, kind)` of every defined, versioned symbol,
/// without the version nodes' own marker symbols (`IBVERBS_1.0` in `*ABS*`,
/// which GNU ld emits and lld does not: version *definitions* are compared
/// separately).
fn versioned_exports(lib: &Path) -> BTreeMap<(String, String), (bool, String, String)> {
    let mut out = BTreeMap::new();
    for s in dynamic_symbols(lib) {
        if s.undefined || s.version.is_empty() || s.version == "Base" {
            continue;
        }
        if s.name == s.version && s.line.contains("*ABS*") {
            continue;
        }
        // "0000000000011620 g    DF .text\t0000000000000005  IBVERBS_1.1 name"
        let kind = s
            .line
            .split('\t')
            .next()
            .and_then(|h| {
                h.split_whitespace()
                    .find(|w| w.starts_with('D') && w.len() == 2)
            })
            .unwrap_or("?")
            .to_string();
        let size = s
            .line
            .split('\t')
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        let size = if kind == "DO" { size } else { String::new() };
        out.insert((s.name, s.version), (s.default, kind, size));
    }
    out
}

/// The version definitions (`objdump -p`), without the base one (the file's
/// own name).
fn version_definitions(lib: &Path) -> BTreeSet<String> {
    let mut cmd = Command::new("objdump");
    cmd.arg("-p").arg(lib);
    let output = run(&mut cmd);
    assert!(output.status.success(), "{}", describe(&cmd, &output));
    let text = stdout(&output);
    let mut defs = BTreeSet::new();
    let mut inside = false;
    for l in text.lines() {
        if l.starts_with("Version definitions:") {
            inside = true;
            continue;
        }
        if inside {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [_, flags, _, name] if *flags != "0x01" => {
                    defs.insert(name.to_string());
                }
                [_, _, _, _] => {}
                [_] => {} // a parent link line
                _ => break,
            }
        }
    }
    defs
}

/// The shim stands in for both libibverbs and librdmacm (drop-in
/// `libibverbs.so.1` and `librdmacm.so.1` are the same file): it exports
/// both real libraries' symbols and version nodes, and nothing else.
#[test]
fn the_dropin_library_exports_every_public_symbol_of_the_real_one_at_its_version() {
    let real_lib = real_libibverbs();
    let real_cm = real_lib.with_file_name("librdmacm.so.1");
    let dropin = dropin_dir().join("libibverbs.so.1");
    assert_eq!(
        std::fs::canonicalize(&dropin).unwrap(),
        std::fs::canonicalize(dropin_dir().join("librdmacm.so.1")).unwrap(),
        "the drop-in librdmacm.so.1 is the shim"
    );
    let mut real = versioned_exports(&real_lib);
    let cm = versioned_exports(&real_cm);
    assert!(
        cm.len() > 60,
        "objdump -T {} gave only {} versioned symbols",
        real_cm.display(),
        cm.len()
    );
    real.extend(cm);
    let ours = versioned_exports(&dropin);
    assert!(
        real.len() > 100,
        "objdump -T {} gave only {} versioned symbols",
        real_lib.display(),
        real.len()
    );
    let at = |(n, v): &(String, String), d: bool| format!("{n}{}{v}", if d { "@@" } else { "@" });
    let mut problems = Vec::new();
    for (key, (default, kind, size)) in &real {
        match ours.get(key) {
            None => problems.push(format!("missing: {} ({kind})", at(key, *default))),
            Some((d, k, s)) => {
                if d != default {
                    problems.push(format!(
                        "{} is {} in the shim",
                        at(key, *default),
                        if *d {
                            "the default (@@)"
                        } else {
                            "a compat version (@)"
                        }
                    ));
                }
                if k != kind || s != size {
                    problems.push(format!(
                        "{}: real {kind} {size}, shim {k} {s}",
                        at(key, *default)
                    ));
                }
            }
        }
    }
    for (key, (default, _, _)) in &ours {
        if !real.contains_key(key) {
            problems.push(format!(
                "extra: the shim exports {}, which the real library does not",
                at(key, *default)
            ));
        }
    }
    // No ibv_* export of the shim is unversioned.
    for s in dynamic_symbols(&dropin) {
        if !s.undefined
            && s.name.starts_with("ibv_")
            && (s.version.is_empty() || s.version == "Base")
        {
            problems.push(format!("unversioned ibv_ export: {}", s.line));
        }
    }
    // Every version node exists.
    let mut real_defs = version_definitions(&real_lib);
    real_defs.extend(version_definitions(&real_cm));
    let our_defs = version_definitions(&dropin);
    for d in real_defs.difference(&our_defs) {
        problems.push(format!("version node {d} is not defined"));
    }
    for d in our_defs.difference(&real_defs) {
        problems.push(format!("extra version node {d}"));
    }
    assert!(
        problems.is_empty(),
        "objdump -T {} against {}: {} difference(s)\n{}",
        dropin.display(),
        real_lib.display(),
        problems.len(),
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------
// 4. Linked programs, real header and shim header, both modes, on the sim
// ---------------------------------------------------------------------------

#[test]
fn linked_programs_with_the_real_or_the_shim_header_work_in_both_modes_on_the_sim() {
    let sim = SimLib::new();
    let sim = sim.path();
    let shim = shim_so().canonicalize().unwrap();
    let provider = Bed::Sim(sim).provider();
    let real = real_libibverbs().canonicalize().unwrap();
    let target = target_dir();

    let real_header = cc("list_open-real", &[&src("list_open")], &["-libverbs"]);
    let shim_header = cc(
        "list_open-shimheader",
        &[&src("list_open")],
        &[
            &format!("-I{}", repo_dir().join("include").display()),
            &format!("-L{}", target.display()),
            "-libv_shim",
            &format!("-Wl,-rpath,{}", target.display()),
        ],
    );
    assert!(
        needed(&shim_header).iter().any(|l| l == "libibv_shim.so"),
        "the shim-header program must be linked to libibv_shim.so: {:?}",
        needed(&shim_header)
    );

    let mut plain = command(Bed::Sim(sim), None, &real_header);
    let plain_out = run(&mut plain);
    let plain_text = stdout(&plain_out);
    assert!(
        plain_out.status.success()
            && plain_text
                .lines()
                .any(|l| l.starts_with("open ") && l.ends_with(": ok")),
        "list_open on the sim without the shim must open devices (the sim is broken)\n{}",
        describe(&plain, &plain_out)
    );
    let opened = plain_text
        .lines()
        .filter(|l| l.starts_with("open ") && l.ends_with(": ok"))
        .count();

    let mut failures = Vec::new();
    for (label, prog) in [("real header", &real_header), ("shim header", &shim_header)] {
        for mode in MODES {
            let what = format!("list_open ({label}) on the sim, {}", mode_name(Some(mode)));
            let r = run_with_shim(command(Bed::Sim(sim), Some(mode), prog));
            let text = r.text();
            let mut bad = Vec::new();
            if r.out.status.code() != plain_out.status.code() {
                bad.push(format!(
                    "exit status {} (without the shim: {})",
                    r.out.status, plain_out.status
                ));
            }
            if comparable(&text) != comparable(&plain_text) {
                bad.push(format!(
                    "output differs from the run without the shim:\n{}",
                    indent_lines(&plain_text)
                ));
            }
            if objects_that_are(&text, &shim) != 1 {
                bad.push("not exactly one shim loaded".into());
            }
            if objects_that_are(&text, &provider) != 1 {
                bad.push(format!("not exactly one {} loaded", provider.display()));
            }
            if objects_that_are(&text, &real) != 0 {
                bad.push("the real libibverbs is loaded on the sim".into());
            }
            for (function, n) in [
                ("ibv_get_device_list", 1),
                ("ibv_open_device", opened),
                ("ibv_close_device", opened),
            ] {
                if log_lines_for(&r.log, function).len() < n {
                    bad.push(format!(
                        "fewer than {n} {function} line(s) in the shim's log"
                    ));
                }
            }
            if !bad.is_empty() {
                failures.push(format!("{what}:\n  {}\n{}", bad.join("\n  "), r.explain()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn indent_lines(text: &str) -> String {
    text.lines().map(|l| format!("    | {l}\n")).collect()
}

// ---------------------------------------------------------------------------
// 5. The dlopen hook: the handle, the lookups, the caller's RUNPATH
// ---------------------------------------------------------------------------

/// `lookup`'s answer `ADDRESS FILE SYMBOL` as `(FILE, SYMBOL)` (FILE may
/// have spaces).
fn lookup_answer(answer: &str) -> Option<(&str, &str)> {
    let (_address, rest) = answer.split_once(' ')?;
    rest.rsplit_once(' ')
}

#[test]
fn dlopen_of_libibverbs_gives_the_shim_and_dlvsym_finds_every_version() {
    let tb = Testbed::new();
    let shim = shim_so().canonicalize().unwrap();
    let real = real_libibverbs().canonicalize().unwrap();
    let prog = cc("lookup", &[&src("lookup")], &["-ldl"]);
    let wanted = [
        "ibv_get_device_list@IBVERBS_1.1",
        "ibv_free_device_list@IBVERBS_1.1",
        "ibv_query_gid_type@IBVERBS_PRIVATE_34",
        "ibv_reg_mr_iova2@IBVERBS_1.8",
        "ibv_get_device_list@IBVERBS_1.0",
    ];
    let mut failures = Vec::new();
    for library in ["libibverbs.so.1", "libibverbs.so"] {
        for mode in [None, Some(Mode::Preload), Some(Mode::DropIn)] {
            let what = format!("dlopen(\"{library}\") {}", mode_name(mode));
            let mut cmd = command(Bed::Real(&tb), mode, &prog);
            cmd.arg(library).args(wanted);
            let out = run(&mut cmd);
            let text = stdout(&out);
            let expected = if mode.is_some() { &shim } else { &real };
            let mut bad = Vec::new();
            if !out.status.success() {
                bad.push(format!("exit status {}", out.status));
            }
            match values(&text, "handle")
                .first()
                .and_then(|h| h.split_once(": "))
            {
                Some((_, file)) if canonical(file).as_ref() == Some(expected) => {}
                other => bad.push(format!(
                    "the handle is {other:?}, not {}",
                    expected.display()
                )),
            }
            for w in wanted {
                let Some(answer) = values(&text, &format!("{w}:")).first().copied() else {
                    bad.push(format!("no answer for {w}"));
                    continue;
                };
                let name = w.split('@').next().unwrap();
                match lookup_answer(answer) {
                    Some((file, sym))
                        if canonical(file).as_ref() == Some(expected) && sym == name => {}
                    _ => bad.push(format!(
                        "{w} must resolve to {name} in {}: got {answer}",
                        expected.display()
                    )),
                }
            }
            if !text
                .lines()
                .any(|l| l == format!("call: {} device(s)", tb.devices().len()))
            {
                bad.push(format!(
                    "ibv_get_device_list through dlvsym must list the {} devices",
                    tb.devices().len()
                ));
            }
            if !bad.is_empty() {
                failures.push(format!(
                    "{what}:\n  {}\n{}",
                    bad.join("\n  "),
                    describe(&cmd, &out)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_dlopen_hook_keeps_the_callers_runpath() {
    let dir = TempDir::new("runpath");
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    let foo = cc("libfoo", &[&src("foo")], &["-shared", "-fPIC"]);
    std::fs::copy(&foo, dir.join("lib/libfoo.so")).unwrap();
    // $ORIGIN is the directory of the executable: copy it next to lib/.
    let build = |name: &str, args: &[&str]| -> PathBuf {
        let built = cc(name, &[&src("load_foo")], args);
        let exe = dir.join(name);
        std::fs::copy(&built, &exe).unwrap();
        exe
    };
    let runpath = build(
        "load_foo-runpath",
        &["-ldl", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/lib"],
    );
    let rpath = build(
        "load_foo-rpath",
        &["-ldl", "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN/lib"],
    );
    let bare = build("load_foo-bare", &["-ldl"]);
    let naive = cc(
        "naive_hook",
        &[&src("naive_hook")],
        &["-O0", "-shared", "-fPIC", "-ldl"],
    );

    let dynamic = |exe: &Path| -> String {
        let mut cmd = Command::new("objdump");
        cmd.arg("-p").arg(exe);
        stdout(&run(&mut cmd))
    };
    assert!(dynamic(&runpath)
        .lines()
        .any(|l| l.trim().starts_with("RUNPATH")));
    assert!(dynamic(&rpath)
        .lines()
        .any(|l| l.trim().starts_with("RPATH")));

    let go = |exe: &Path, preload: Option<&Path>| -> (Command, Output) {
        let mut cmd = Command::new(exe);
        cmd.arg("libfoo.so")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("LD_PRELOAD")
            .current_dir("/");
        if let Some(p) = preload {
            cmd.env("LD_PRELOAD", p);
        }
        let out = run(&mut cmd);
        (cmd, out)
    };
    let shim = shim_so();
    let mut failures = Vec::new();
    let mut expect = |what: &str, (cmd, out): (Command, Output), ok: bool| {
        if out.status.success() != ok {
            failures.push(format!(
                "{what}: expected dlopen(\"libfoo.so\") to {}\n{}",
                if ok { "succeed" } else { "fail" },
                describe(&cmd, &out)
            ));
        }
    };
    // Controls: the bare name is found only through the program's own path
    // entries, and a hook that calls dlopen normally loses RUNPATH.
    expect("RUNPATH program, no hook", go(&runpath, None), true);
    expect("program without RUNPATH, no hook", go(&bare, None), false);
    expect(
        "RUNPATH program under a naive (non-tail-call) hook",
        go(&runpath, Some(&naive)),
        false,
    );
    // The shim's hook.
    expect(
        "RUNPATH program under the shim",
        go(&runpath, Some(&shim)),
        true,
    );
    expect(
        "RPATH program under the shim",
        go(&rpath, Some(&shim)),
        true,
    );
    expect(
        "program without RUNPATH under the shim",
        go(&bare, Some(&shim)),
        false,
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The hook hands back the shim under the name the dynamic linker knows it
/// by, so the handle is the loaded shim wherever it came from: a relative
/// `LD_PRELOAD` after the program changed directory, and a drop-in directory
/// whose path has a space (a linked program, so the hook is in the global
/// scope, that also dlopens `libibverbs.so.1`).
#[test]
fn the_hooks_handle_is_the_loaded_shim_after_chdir_and_under_a_path_with_spaces() {
    let tb = Testbed::new();
    let dir = TempDir::new("hook name");
    let spaced = dir.join("dir with space");
    std::fs::create_dir_all(&spaced).unwrap();
    let copy = spaced.join("libibv_shim.so");
    std::fs::copy(shim_so(), &copy).unwrap();
    let dropin = spaced.join("dropin");
    std::fs::create_dir_all(&dropin).unwrap();
    std::os::unix::fs::symlink("../libibv_shim.so", dropin.join("libibverbs.so.1")).unwrap();
    std::os::unix::fs::symlink("libibverbs.so.1", dropin.join("libibverbs.so")).unwrap();
    let want = copy.canonicalize().unwrap();

    let lookup = cc("lookup", &[&src("lookup")], &["-ldl"]);
    let linked = cc(
        "lookup-linked",
        &[&src("lookup")],
        &["-ldl", "-Wl,--no-as-needed", "-libverbs"],
    );
    assert!(needed(&linked).iter().any(|l| l == "libibverbs.so.1"));

    let args = [
        "libibverbs.so.1",
        "ibv_get_device_list@IBVERBS_1.1",
        "ibv_free_device_list@IBVERBS_1.1",
    ];
    let mut relative = command(Bed::Real(&tb), None, &lookup);
    relative
        .current_dir(&spaced)
        .env("LD_PRELOAD", "./libibv_shim.so")
        .args(["-C", "/"])
        .args(args);
    let mut spaced_dropin = command(Bed::Real(&tb), None, &linked);
    spaced_dropin.env("LD_LIBRARY_PATH", &dropin).args(args);

    let mut failures = Vec::new();
    for (what, mut cmd) in [
        ("LD_PRELOAD=./libibv_shim.so, then chdir(\"/\")", relative),
        (
            "drop-in from a directory with a space, linked program",
            spaced_dropin,
        ),
    ] {
        let out = run(&mut cmd);
        let text = stdout(&out);
        let handle = values(&text, "handle")
            .first()
            .and_then(|h| h.split_once(": "))
            .map(|x| x.1);
        let resolved = values(&text, "ibv_get_device_list@IBVERBS_1.1:")
            .first()
            .and_then(|a| lookup_answer(a))
            .map(|(file, _)| file);
        // A relative name is the LD_PRELOAD entry, relative to where it started.
        let file = |f: Option<&str>| f.and_then(|f| spaced.join(f).canonicalize().ok());
        let ok = out.status.success()
            && file(handle).as_ref() == Some(&want)
            && file(resolved).as_ref() == Some(&want)
            && text
                .lines()
                .any(|l| l == format!("call: {} device(s)", tb.devices().len()));
        if !ok {
            failures.push(format!(
                "{what}: dlopen(\"libibverbs.so.1\") must give the loaded shim {}\n{}",
                want.display(),
                describe(&cmd, &out)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `verbs_allow_disassociate_destroy` is a data object of the real library
/// that the provider plugins read. Wherever the shim stands in for
/// libibverbs, the plugins bind to the shim's copy of it; that copy must hold
/// what the real library decided (from `RDMAV_ALLOW_DISASSOC_DESTROY`), in
/// both modes, for a program that dlopens verbs and for one linked to them.
#[test]
fn the_real_librarys_data_object_reaches_the_plugins_in_both_modes() {
    let tb = Testbed::new();
    let dlopening = cc("disassoc", &[&src("disassoc")], &["-ldl"]);
    let linked = cc(
        "disassoc-linked",
        &[&src("disassoc")],
        &["-ldl", "-Wl,--no-as-needed", "-libverbs"],
    );
    let mut failures = Vec::new();
    let mut plain_values = BTreeSet::new();
    for env in [None, Some("1")] {
        let with_env = |cmd: &mut Command| {
            if let Some(v) = env {
                cmd.env("RDMAV_ALLOW_DISASSOC_DESTROY", v);
            }
        };
        let mut plain = command(Bed::Real(&tb), None, &dlopening);
        with_env(&mut plain);
        let plain_out = run(&mut plain);
        let plain_text = stdout(&plain_out);
        assert!(
            plain_out.status.success() && !values(&plain_text, "value:").is_empty(),
            "{}",
            describe(&plain, &plain_out)
        );
        plain_values.insert(plain_text.clone());
        for (label, prog) in [
            ("dlopening program", &dlopening),
            ("linked program", &linked),
        ] {
            for mode in MODES {
                let mut cmd = command(Bed::Real(&tb), Some(mode), prog);
                with_env(&mut cmd);
                let out = run(&mut cmd);
                if stdout(&out) != plain_text {
                    failures.push(format!(
                        "RDMAV_ALLOW_DISASSOC_DESTROY={env:?}, {label}, {}: expected\n{}\n{}",
                        mode_name(Some(mode)),
                        indent_lines(&plain_text),
                        describe(&cmd, &out)
                    ));
                }
            }
        }
    }
    // The control: the real library does set it from the environment.
    assert_eq!(
        plain_values.len(),
        2,
        "the variable made no difference: {plain_values:?}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const DLCLOSE: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
    void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    void **(*list)(int *) = (void **(*)(int *))dlvsym(h, "ibv_get_device_list", "IBVERBS_1.1");
    if (!list) { printf("dlvsym failed\n"); return 1; }
    int n = 0;
    if (!list(&n)) { printf("no list\n"); return 1; }  /* leaked on purpose */
    dlclose(h);
    printf("after dlclose\n");
    fflush(stdout);
    return 0;
}
"#;

#[test]
fn dlclose_of_the_dropin_shim_does_not_run_the_exit_report_mid_program() {
    let dir = TempDir::new("dlclose");
    let prog = cc_text(&dir, "dlclose", DLCLOSE, &["-ldl"]);
    let mut cmd = Command::new(&prog);
    cmd.env("LD_LIBRARY_PATH", dropin(&dir))
        .env("IBV_SHIM_LIBRARY", sim_lib())
        .env("IBV_SHIM_LEAK_EXITCODE", "23")
        .env_remove("LD_PRELOAD");
    let out = run(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("after dlclose"),
        "the program was stopped at dlclose\n{}",
        describe(&cmd, &out)
    );
    // The leaked list is still reported, at the real exit.
    assert_eq!(out.status.code(), Some(23), "{}", describe(&cmd, &out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("leak report at exit"));
}

const DLOPEN_BY_PATH: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    (void)argc;
    /* A probe first: nothing has loaded libibverbs yet. */
    void *probe = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    printf("probe %s\n", probe ? "loaded" : "not loaded");
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    void **(*list)(int *) = (void **(*)(int *))dlvsym(h, "ibv_get_device_list", "IBVERBS_1.1");
    const char *(*name)(void *) = (const char *(*)(void *))dlvsym(h, "ibv_get_device_name", "IBVERBS_1.1");
    int n = -1;
    void **l = list(&n);
    printf("%d devices", l ? n : -1);
    for (int i = 0; l && i < n; i++) printf(" %s", name(l[i]));
    printf("\n");
    return 0;
}
"#;

/// Preload mode: a program that dlopens a verbs library by path (a private
/// rdma-core, here the sim) gets that library behind the shim, not whatever
/// `libibverbs.so.1` the search path holds; and an `RTLD_NOLOAD` probe
/// answers as it would without the shim.
#[test]
fn a_verbs_library_dlopened_by_path_is_the_one_forwarded_to() {
    let dir = TempDir::new("bypath");
    let prog = cc_text(&dir, "bypath", DLOPEN_BY_PATH, &["-ldl"]);
    let mut cmd = Command::new(&prog);
    cmd.arg(sim_lib())
        .env("IBV_SIM_DEVICES", "mlx5_0,rxe0")
        .env("LD_PRELOAD", shim_so())
        .env("IBV_SHIM_LOG", "debug")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("IBV_SHIM_LIBRARY");
    let out = run(&mut cmd);
    assert_eq!(
        stdout(&out).trim(),
        "probe not loaded\n2 devices mlx5_0 rxe0",
        "{}",
        describe(&cmd, &out)
    );
    assert!(
        stderr(&out).contains("ibv_get_device_list("),
        "{}",
        describe(&cmd, &out)
    );
}
