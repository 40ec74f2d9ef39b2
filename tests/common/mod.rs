//! Helpers shared by the integration tests (`mod common;` in each test file).
//!
//! - Where things are: [`repo_dir`], [`target_dir`], [`shim_so`], [`sim_dir`],
//!   [`TempDir`].
//! - Building C: [`cc`] (gcc `-Wall -Wextra -Werror`).
//! - Running the **real** rdma-core with devices but no hardware: [`Testbed`].
//! - Running anything: [`run`] / [`run_unchecked`] (timeout, clear panics),
//!   [`describe`], [`assert_same_output`].
//! - Reading the shim's log: [`LogLine`], [`read_logs`], [`log_lines_for`].
//!
//! Not every test file uses every helper.
#![allow(dead_code)]

use std::collections::hash_map::DefaultHasher;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long [`run`] waits before it calls a program hung and kills it.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The repository root (where `Cargo.toml`, `include/` and `c_examples/` are).
pub fn repo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`, found from the running test binary
/// (`target/<profile>/deps/<test>-<hash>`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test binary has a parent directory");
    assert_eq!(
        deps.file_name().and_then(|n| n.to_str()),
        Some("deps"),
        "test binary {} is not in target/<profile>/deps",
        exe.display()
    );
    deps.parent().expect("deps has a parent").to_path_buf()
}

/// `target/<profile>/libibv_shim.so`; panics if it has not been built.
pub fn shim_so() -> PathBuf {
    built("libibv_shim.so")
}

/// A directory holding `libibverbs.so.1`, a fresh copy of
/// `target/<profile>/libibv_sim.so` (the software provider), to put on
/// `LD_LIBRARY_PATH` or name in `IBV_SHIM_LIBRARY`. It is `target/sim`.
pub fn sim_dir() -> PathBuf {
    let built = built("libibv_sim.so");
    let dir = target_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .join("sim");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let copy = dir.join("libibverbs.so.1");
    let want = std::fs::read(&built).unwrap_or_else(|e| panic!("read {}: {e}", built.display()));
    if std::fs::read(&copy).ok().as_deref() != Some(&want[..]) {
        // Copy then rename: a process of another test may be loading the old one.
        let tmp = dir.join(format!(
            ".libibverbs.so.1.{}.{}",
            std::process::id(),
            unique()
        ));
        std::fs::write(&tmp, &want).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
        std::fs::rename(&tmp, &copy)
            .unwrap_or_else(|e| panic!("rename {} -> {}: {e}", tmp.display(), copy.display()));
    }
    // Programs that try the development name first (NCCL does) must find the
    // sim under it too, as `make build` arranges.
    let dev = dir.join("libibverbs.so");
    if std::fs::read_link(&dev).ok().as_deref() != Some(std::path::Path::new("libibverbs.so.1")) {
        let _ = std::fs::remove_file(&dev);
        let _ = std::os::unix::fs::symlink("libibverbs.so.1", &dev);
    }
    dir
}

fn built(name: &str) -> PathBuf {
    let path = target_dir().join(name);
    assert!(
        path.is_file(),
        "{} does not exist: build it first: make test",
        path.display()
    );
    path
}

fn unique() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A fresh directory under `CARGO_TARGET_TMPDIR`, removed on drop (also
/// when the test panics).
pub struct TempDir(PathBuf);

impl TempDir {
    /// `<CARGO_TARGET_TMPDIR>/<prefix>-<pid>-<n>`, empty.
    pub fn new(prefix: &str) -> TempDir {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "{prefix}-{}-{}",
            std::process::id(),
            unique()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles `sources` with `gcc -Wall -Wextra -Werror -g -o OUT SOURCES ARGS`
/// (put libraries such as `-libverbs` in `args`) and returns the executable,
/// `<CARGO_TARGET_TMPDIR>/c/<name>-<hash of sources and args>`. Panics with
/// gcc's output if it fails. Safe to call from parallel tests.
pub fn cc(name: &str, sources: &[&Path], args: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let mut hasher = DefaultHasher::new();
    (sources, args).hash(&mut hasher);
    for src in sources {
        std::fs::read(src)
            .unwrap_or_else(|e| panic!("read {}: {e}", src.display()))
            .hash(&mut hasher);
    }
    let out = dir.join(format!("{name}-{:016x}", hasher.finish()));
    let tmp = dir.join(format!(".{name}.{}.{}", std::process::id(), unique()));
    let mut cmd = Command::new("gcc");
    cmd.args(["-Wall", "-Wextra", "-Werror", "-g", "-o"])
        .arg(&tmp)
        .args(sources)
        .args(args);
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run gcc: {e}"));
    assert!(
        output.status.success(),
        "compiling {name} failed\n{}",
        describe(&cmd, &output)
    );
    std::fs::rename(&tmp, &out)
        .unwrap_or_else(|e| panic!("rename {} -> {}: {e}", tmp.display(), out.display()));
    out
}

/// `tests/c/device/<name>.c`.
pub fn c_test_source(name: &str) -> PathBuf {
    repo_dir().join("tests/c/device").join(format!("{name}.c"))
}

/// `c_examples/<name>.c`.
pub fn c_example(name: &str) -> PathBuf {
    repo_dir().join("c_examples").join(format!("{name}.c"))
}

/// One device of the fake sysfs tree.
#[derive(Clone, Debug)]
pub struct FakeDevice {
    /// The verbs name (`rxe0`).
    pub name: &'static str,
    /// `node_guid` as sysfs writes it (`0c42:a103:0012:3456`).
    pub node_guid: &'static str,
    /// PCI modalias matched by the mlx4/mlx5 providers; rxe matches by name.
    pub modalias: Option<&'static str>,
    /// The provider ABI in `uverbsN/abi_version`.
    pub abi_version: u32,
}

impl FakeDevice {
    /// The GUID as `ibv_devices` prints it (`0c42a10300123456`).
    pub fn guid(&self) -> String {
        self.node_guid.replace(':', "")
    }
}

/// The three devices of the test bed: an rxe, an mlx5 (ConnectX-5) and an
/// mlx4 (ConnectX-3), in uverbs order.
pub const DEVICES: [FakeDevice; 3] = [
    FakeDevice {
        name: "rxe0",
        node_guid: "0c42:a103:0012:3456",
        modalias: None,
        abi_version: 2,
    },
    FakeDevice {
        name: "mlx5_0",
        node_guid: "9803:9b03:0011:2233",
        modalias: Some("pci:v000015B3d00001017sv000015B3sd00000008bc02sc00i00"),
        abi_version: 1,
    },
    FakeDevice {
        name: "mlx4_0",
        node_guid: "0002:c903:0044:5566",
        modalias: Some("pci:v000015B3d00001003sv000015B3sd00000006bc02sc00i00"),
        abi_version: 4,
    },
];

/// `testbed.sh NS_DIR N_DEVICES PROGRAM ARGS...`, run by `sh` in the new
/// mount namespace: sets it up, then execs the program. The setup commands run without the
/// caller's LD_PRELOAD / LD_LIBRARY_PATH; the program gets them back.
const TESTBED_SH: &str = r#"
set -e
ns=$1; n=$2; shift 2
if [ "${LD_PRELOAD+set}" = set ]; then tb_preload=$LD_PRELOAD; unset LD_PRELOAD; fi
if [ "${LD_LIBRARY_PATH+set}" = set ]; then tb_libpath=$LD_LIBRARY_PATH; unset LD_LIBRARY_PATH; fi
mount -t tmpfs -o mode=0755 ibv-testbed "$ns"
mkdir -p "$ns/upper/infiniband" "$ns/work" "$ns/dev"
i=0
while [ "$i" -lt "$n" ]; do : > "$ns/upper/infiniband/uverbs$i"; i=$((i + 1)); done
mount -t overlay overlay -o "lowerdir=/dev,upperdir=$ns/upper,workdir=$ns/work" "$ns/dev"
for sub in /dev/*/; do
    sub=${sub%/}
    if mountpoint -q "$sub"; then mount --rbind "$sub" "$ns/dev/${sub#/dev/}"; fi
done
mount --move "$ns/dev" /dev
if [ "${tb_preload+set}" = set ]; then LD_PRELOAD=$tb_preload; export LD_PRELOAD; fi
if [ "${tb_libpath+set}" = set ]; then LD_LIBRARY_PATH=$tb_libpath; export LD_LIBRARY_PATH; fi
exec "$@"
"#;

/// The real rdma-core with three devices and no hardware.
///
/// A fake sysfs tree (`SYSFS_PATH`) describes [`DEVICES`]; [`Testbed::command`]
/// runs a program in a private mount namespace (`unshare -m`) where an
/// overlayfs over `/dev` adds `/dev/infiniband/uverbs0..2` as empty regular
/// files (never device nodes). The real libibverbs and its real provider
/// plugins then list the devices; `ibv_open_device` fails with ENOENT.
/// Needs root. The machine's own `/dev` is never touched.
pub struct Testbed {
    dir: TempDir,
}

impl Testbed {
    /// Builds the sysfs tree in a fresh temporary directory.
    pub fn new() -> Testbed {
        let dir = TempDir::new("testbed");
        let sys = dir.join("sys");
        let write = |path: PathBuf, text: String| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        };
        write(sys.join("class/infiniband_verbs/abi_version"), "6\n".into());
        for (i, dev) in DEVICES.iter().enumerate() {
            let uverbs = sys.join(format!("class/infiniband_verbs/uverbs{i}"));
            write(uverbs.join("ibdev"), format!("{}\n", dev.name));
            write(uverbs.join("dev"), format!("231:{}\n", 192 + i));
            write(uverbs.join("abi_version"), format!("{}\n", dev.abi_version));
            let ib = sys.join("class/infiniband").join(dev.name);
            write(ib.join("node_type"), "1: CA\n".into());
            write(ib.join("node_guid"), format!("{}\n", dev.node_guid));
            std::fs::create_dir_all(ib.join("device")).unwrap();
            if let Some(modalias) = dev.modalias {
                write(ib.join("device/modalias"), format!("{modalias}\n"));
            }
        }
        std::fs::create_dir_all(dir.join("ns")).unwrap();
        write(dir.join("testbed.sh"), TESTBED_SH.into());
        Testbed { dir }
    }

    /// The devices the real library will list, in order.
    pub fn devices(&self) -> &'static [FakeDevice] {
        &DEVICES
    }

    /// The fake tree, as `SYSFS_PATH`.
    pub fn sysfs_path(&self) -> PathBuf {
        self.dir.join("sys")
    }

    /// A command that runs `prog` in the test bed. Add arguments, `env`
    /// (`LD_PRELOAD`, `IBV_SHIM_*`, ...) and run it as usual: the arguments
    /// and environment reach `prog`. `unshare` and `sh` exec into `prog`, so
    /// the child's pid is `prog`'s pid (the `%p` of a log file name).
    /// Stdin is /dev/null.
    pub fn command(&self, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("unshare");
        cmd.args(["-m", "--propagation", "private", "sh"])
            .arg(self.dir.join("testbed.sh"))
            .arg(self.dir.join("ns"))
            .arg(DEVICES.len().to_string())
            .arg(prog)
            .env("SYSFS_PATH", self.sysfs_path())
            .stdin(Stdio::null());
        cmd
    }
}

impl Default for Testbed {
    fn default() -> Self {
        Testbed::new()
    }
}

/// Runs `cmd` to completion (stdin /dev/null unless set) and returns its
/// output. Panics, showing the command line and whatever it printed, if it
/// cannot start, runs longer than [`TIMEOUT`] (killed: a hang), or is killed
/// by a signal (a crash). A non-zero exit status is returned, not a panic.
pub fn run(cmd: &mut Command) -> Output {
    let output = run_unchecked(cmd, TIMEOUT);
    if let Some(sig) = signal(&output.status) {
        panic!(
            "killed by signal {sig} (a crash)\n{}",
            describe(cmd, &output)
        );
    }
    output
}

/// Like [`run`], with another timeout, and a death by signal is returned.
pub fn run_unchecked(cmd: &mut Command, timeout: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let status = child.wait().expect("wait");
            let output = Output {
                status,
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            };
            panic!("hung: killed after {timeout:?}\n{}", describe(cmd, &output));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The signal that killed the process, if one did.
pub fn signal(status: &ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

/// The command line (with the environment it adds), status, stdout and
/// stderr, for a failure message.
pub fn describe(cmd: &Command, output: &Output) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "command: {cmd:?}");
    let _ = writeln!(s, "status: {}", output.status);
    let _ = writeln!(
        s,
        "stdout:\n{}",
        indent(&String::from_utf8_lossy(&output.stdout))
    );
    let _ = write!(
        s,
        "stderr:\n{}",
        indent(&String::from_utf8_lossy(&output.stderr))
    );
    s
}

fn indent(text: &str) -> String {
    if text.is_empty() {
        return "    (empty)\n".into();
    }
    text.lines().map(|l| format!("    | {l}\n")).collect()
}

/// Asserts that two runs printed byte-identical stdout and stderr and ended
/// the same way; the message shows both runs in full.
pub fn assert_same_output(
    what: &str,
    (cmd_a, a): (&Command, &Output),
    (cmd_b, b): (&Command, &Output),
) {
    let mut diffs = Vec::new();
    if a.status.code() != b.status.code() || signal(&a.status) != signal(&b.status) {
        diffs.push("exit status");
    }
    if a.stdout != b.stdout {
        diffs.push("stdout");
    }
    if a.stderr != b.stderr {
        diffs.push("stderr");
    }
    assert!(
        diffs.is_empty(),
        "{what}: the two runs differ in {}\n--- first run ---\n{}\n--- second run ---\n{}",
        diffs.join(", "),
        describe(cmd_a, a),
        describe(cmd_b, b)
    );
}

/// Stdout as text (panics on invalid UTF-8).
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

/// Stderr as text (lossy).
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// One line of the shim's log:
/// `ibv-shim <secs>.<micros> <pid>:<tid> <LEVEL> <message>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub secs: u64,
    pub micros: u32,
    pub pid: u32,
    pub tid: u32,
    /// One of ERROR WARN INFO DEBUG TRACE.
    pub level: String,
    pub message: String,
}

impl LogLine {
    /// Parses one line (without its newline); `None` if it is not a
    /// well-formed log line.
    pub fn parse(line: &str) -> Option<LogLine> {
        let rest = line.strip_prefix("ibv-shim ")?;
        let (time, rest) = rest.split_once(' ')?;
        let (secs, micros) = time.split_once('.')?;
        if micros.len() != 6 {
            return None;
        }
        let (ids, rest) = rest.split_once(' ')?;
        let (pid, tid) = ids.split_once(':')?;
        let (level, message) = rest.split_once(' ')?;
        if !["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level) || message.is_empty() {
            return None;
        }
        Some(LogLine {
            secs: digits(secs)?,
            micros: digits(micros)? as u32,
            pid: digits(pid)? as u32,
            tid: digits(tid)? as u32,
            level: level.to_string(),
            message: message.to_string(),
        })
    }

    /// The function a call line is about: the message up to its first `(`,
    /// when that is an identifier (`ibv_open_device(device=...) = ...`).
    pub fn function(&self) -> Option<&str> {
        let (name, _) = self.message.split_once('(')?;
        (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            .then_some(name)
    }
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses shim log text; panics, naming `origin` and the line, on any line
/// that is not a well-formed log line (a torn or interleaved line).
pub fn parse_log(origin: &str, text: &str) -> Vec<LogLine> {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            LogLine::parse(line).unwrap_or_else(|| {
                panic!(
                    "{origin}:{}: not a well-formed shim log line: {line:?}",
                    i + 1
                )
            })
        })
        .collect()
}

/// Every line of every file in `dir` (e.g. the `log.%p` files of one run),
/// parsed with [`parse_log`], files in name order; empty if there is none.
pub fn read_logs(dir: &Path) -> Vec<LogLine> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let text =
                std::fs::read_to_string(f).unwrap_or_else(|e| panic!("read {}: {e}", f.display()));
            parse_log(&f.display().to_string(), &text)
        })
        .collect()
}

/// The shim's lines in some stderr output: those starting `ibv-shim `,
/// each of which must parse.
pub fn shim_lines_in(origin: &str, text: &str) -> Vec<LogLine> {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ibv-shim "))
        .collect();
    parse_log(origin, &lines.join("\n"))
}

/// The lines about calls of `function`.
pub fn log_lines_for<'a>(log: &'a [LogLine], function: &str) -> Vec<&'a LogLine> {
    log.iter()
        .filter(|l| l.function() == Some(function))
        .collect()
}

/// The whole log as text, for a failure message.
pub fn show_log(log: &[LogLine]) -> String {
    if log.is_empty() {
        return "    (no log lines)\n".into();
    }
    log.iter()
        .map(|l| {
            format!(
                "    | {}.{:06} {}:{} {} {}\n",
                l.secs, l.micros, l.pid, l.tid, l.level, l.message
            )
        })
        .collect()
}

/// Preloads the shim into `cmd` (`LD_PRELOAD=<shim_so>`).
pub fn preload_shim(cmd: &mut Command) -> &mut Command {
    cmd.env("LD_PRELOAD", shim_so())
}

/// The shim's environment for a debug log into `dir/log.%p`.
pub fn debug_log_env(dir: &Path) -> [(&'static str, String); 2] {
    [
        ("IBV_SHIM_LOG", "debug".to_string()),
        (
            "IBV_SHIM_LOG_FILE",
            dir.join("log.%p").display().to_string(),
        ),
    ]
}

/// The versioned dynamic symbols of a shared object, from `objdump -T`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynSymbol {
    pub name: String,
    /// `IBVERBS_1.1`, `Base`, or empty when objdump printed none.
    pub version: String,
    /// True for the default version (`@@`), false for a hidden one (`(...)`).
    pub default: bool,
    /// True for `*UND*` (a reference, not a definition).
    pub undefined: bool,
    /// The raw objdump line.
    pub line: String,
}

/// Runs `objdump -T` on `lib` and parses every symbol line.
pub fn dynamic_symbols(lib: &Path) -> Vec<DynSymbol> {
    let mut cmd = Command::new("objdump");
    cmd.arg("-T").arg(lib);
    let output = run(&mut cmd);
    assert!(output.status.success(), "{}", describe(&cmd, &output));
    let text = stdout(&output);
    text.lines()
        .filter_map(|line| {
            // 0000000000011620 g    DF .text	0000000000000005  IBVERBS_1.1 ibv_get_device_name
            // 0000000000000000      DF *UND*	0000000000000000  GLIBC_2.2.5 dlsym
            let (head, tail) = line.split_once('\t')?;
            if head.len() < 17 || !head.as_bytes()[..16].iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let mut words = tail.split_whitespace();
            let _size = words.next()?;
            let rest: Vec<&str> = words.collect();
            let (version, name) = match rest.as_slice() {
                [name] => ("", *name),
                [version, name] => (*version, *name),
                // "(IBVERBS_1.0)" may be followed by nothing else; anything longer
                // keeps the last word as the name.
                [.., version, name] => (*version, *name),
                [] => return None,
            };
            let default = !version.starts_with('(');
            Some(DynSymbol {
                name: name.to_string(),
                version: version.trim_matches(|c| c == '(' || c == ')').to_string(),
                default,
                undefined: head.contains("*UND*"),
                line: line.to_string(),
            })
        })
        .collect()
}

/// The real `libibverbs.so.1` this machine's programs link to.
pub fn real_libibverbs() -> PathBuf {
    let mut cmd = Command::new("gcc");
    cmd.arg("-print-file-name=libibverbs.so.1");
    let output = run(&mut cmd);
    let path = PathBuf::from(stdout(&output).trim());
    assert!(
        path.is_absolute() && path.exists(),
        "libibverbs.so.1 not found (is libibverbs-dev installed?)\n{}",
        describe(&cmd, &output)
    );
    path
}
