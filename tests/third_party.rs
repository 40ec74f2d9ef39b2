//! Third-party verbs programs, unmodified, under the shim: the Debian
//! binaries of ibverbs-utils, perftest, qperf, rdmacm-utils, libfabric-bin,
//! ucx-utils and a pyverbs script, on the sim and on the fake-sysfs test bed
//! (the real rdma-core), with the shim preloaded and as drop-in.
//!
//! Each case runs first without the shim (the baseline), then in both modes,
//! and asserts for every process of every mode:
//!
//! - no death by signal, no hang (every process has a timeout);
//! - the same exit status as the baseline, and the same output (exactly, or
//!   in shape where the program prints timings and random numbers);
//! - no ERROR line, panic or "internal error" in the shim's log;
//! - one JSON leak report naming the program, whose unsuppressed objects
//!   are exactly the leaks the program really has on the path it took (read
//!   from its source; see each case), and whose suppressed objects are only
//!   what librdmacm keeps for the life of the process.
//!
//! A third run, with every feature of the shim on at once (debug log,
//! binary trace, data-path checks: `all_features.rs`), must also show no
//! violation, a trace per process that decodes and holds the debug log's
//! calls, and (pairs on the sim) the work requests and completions.
//!
//! UCX lists a verbs device only if `/dev/infiniband/uverbsN` is a
//! character device it may read and write: its cases on the sim run in a
//! private mount namespace where that node exists (`DevNamespace`; only
//! `stat()`ed, the sim never opens it). Its `ucx_perftest` pairs move data
//! over the sim's RC and UD QPs (rc_verbs, ud_verbs).
//!
//! Client/server pairs talk over 127.0.0.1 on a free port. Where the
//! baseline itself cannot work on a backend (no kernel rdma_cm for rping,
//! no device to open on the test bed) the programs fail, and the shim must
//! fail them the same way and report what they really leaked.
//!
//! Known true leaks the shim must keep finding:
//! - qperf's teardown calls `ibv_dealloc_pd` before `ibv_dereg_mr` (EBUSY),
//!   so the PD is orphaned at `ibv_close_device`; its device list is
//!   released with `free()`, never `ibv_free_device_list`.
//! - perftest never calls `ibv_free_device_list`; the `ib_send_bw` client
//!   never destroys its receive CQ (orphaned at `ibv_close_device` after a
//!   good run); after a failed QP creation perftest returns without closing
//!   the device.
//!
//! Needs root (the test bed), the Debian packages of `scripts/deps.sh` and a
//! built shim and sim (`make test`).

#[path = "third_party/all_features.rs"]
mod all_features;
mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long any one process of a case may run before it counts as hung.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(30);
/// The same on the real kernel, whose VM is emulated (TCG): a program's
/// start alone takes a second or more there.
const PROCESS_TIMEOUT_KERNEL: Duration = Duration::from_secs(150);
/// How long a server may take to start listening.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// Where a case runs

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    /// ibv-sim, `libibverbs.so.1` from `sim_dir()` on LD_LIBRARY_PATH.
    Sim,
    /// The real rdma-core on the fake-sysfs test bed: devices are listed,
    /// `ibv_open_device` fails with ENOENT.
    Testbed,
    /// The real rdma-core on a real kernel stack: Soft-RoCE (rxe0) and
    /// rdma_cm in the micro-VM (`common::kernel_vm`), as root there.
    Kernel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Baseline,
    Preload,
    DropIn,
    /// Preloaded with every feature on (see `all_features`).
    AllPreload,
    /// Drop-in with every feature on.
    AllDropIn,
    /// Under the launcher, `ibv-shim --report ... -- PROGRAM`.
    Launcher,
}

impl Mode {
    fn dropin(self) -> bool {
        matches!(self, Mode::DropIn | Mode::AllDropIn)
    }

    fn preload(self) -> bool {
        matches!(self, Mode::Preload | Mode::AllPreload)
    }

    /// Prints the launcher's summary on stderr, after the program's own.
    fn launcher(self) -> bool {
        self == Mode::Launcher
    }

    fn all_features(self) -> bool {
        matches!(self, Mode::AllPreload | Mode::AllDropIn)
    }
}

/// The shim's modes a case runs in: preloaded and drop-in with the default
/// options always; with every feature on, preloaded for every case on the
/// sim and drop-in for its pairs, and on the test bed for a few (the open
/// fails there, so little but the device calls is traced), to keep the
/// time down.
fn shim_modes(backend: Backend, case: &Case) -> Vec<Mode> {
    let mut modes = vec![Mode::Preload, Mode::DropIn];
    match backend {
        Backend::Sim => {
            modes.push(Mode::AllPreload);
            if case.server.is_some() {
                modes.push(Mode::AllDropIn);
            }
        }
        Backend::Testbed => {
            if ["ibv_devinfo", "ibv_rc_pingpong", "qperf_rc_bw", "rping"].contains(&case.name) {
                modes.push(Mode::AllDropIn);
            }
        }
        Backend::Kernel => {
            // (The launcher waits for its program: a server that never
            // exits by itself is not run under it.)
            if !case.server_stays {
                modes.push(Mode::Launcher);
            }
            modes.push(Mode::AllPreload);
            if case.server.is_some() {
                modes.push(Mode::AllDropIn);
            }
        }
    }
    modes
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Alone,
    Server,
    Client,
}

/// One backend set up for one case: the test bed or a private sim fabric,
/// and a drop-in directory.
struct World {
    backend: Backend,
    testbed: Option<Testbed>,
    /// On the sim, for UCX: `/dev/infiniband/uverbsN` as character devices.
    uverbs_nodes: Option<DevNamespace>,
    /// The case's own environment (`UCX_TLS`, ...).
    env: Vec<(&'static str, &'static str)>,
    /// `IBV_SIM_FABRIC`: the sim's processes of this case find each other
    /// here and no other case's.
    fabric: String,
    dropin: TempDir,
    /// The real kernel's VM (Backend::Kernel).
    vm: Option<&'static Vm>,
}

impl World {
    fn new(backend: Backend, case: &Case, vm: Option<&'static Vm>) -> World {
        let dropin = TempDir::new("third-party-dropin");
        std::os::unix::fs::symlink(shim_so(), dropin.join("libibverbs.so.1")).unwrap();
        std::os::unix::fs::symlink("libibverbs.so.1", dropin.join("libibverbs.so")).unwrap();
        // The shim stands in for librdmacm too: the drop-in mode audits the
        // connection manager as the preloaded one does.
        std::os::unix::fs::symlink(shim_so(), dropin.join("librdmacm.so.1")).unwrap();
        let world = World {
            backend,
            testbed: (backend == Backend::Testbed).then(Testbed::new),
            // One node per device of the sim's default list, mlx5_0 and
            // mlx5_1 (uverbs0, uverbs1).
            uverbs_nodes: (backend == Backend::Sim && case.uverbs_nodes)
                .then(|| DevNamespace::new(UverbsNode::CharDevice, 2)),
            env: case.env.to_vec(),
            fabric: format!("tp-{}-{}", case.name, std::process::id()),
            dropin,
            vm,
        };
        world.remove_fabric();
        world
    }

    /// The shared-memory segments the sim made for this case's fabric.
    fn remove_fabric(&self) {
        let Ok(dir) = std::fs::read_dir("/dev/shm") else {
            return;
        };
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("ibv-sim") && name.ends_with(&self.fabric) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// `argv` on this backend in `mode`; the shim (if any) logs into `out`
    /// and writes its JSON report there. The caller's LD_* and shim
    /// variables are cleared first.
    fn command(&self, mode: Mode, argv: &[String], out: &Path) -> Command {
        let mut cmd = match (&self.testbed, &self.uverbs_nodes) {
            _ if mode.launcher() => {
                let mut c = Command::new(target_dir().join("ibv-shim"));
                c.arg("--report")
                    .arg(out.join("report.%p.json"))
                    .arg("--log-file")
                    .arg(out.join("log.%p"))
                    .arg("--")
                    .arg(&argv[0]);
                c
            }
            (Some(tb), _) => tb.command(&argv[0]),
            (None, Some(ns)) => ns.command(&argv[0]),
            (None, None) => Command::new(&argv[0]),
        };
        cmd.args(&argv[1..]).stdin(Stdio::null());
        for var in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "IBV_SHIM_LIBRARY",
            "IBV_SHIM_LOG",
            "IBV_SHIM_LOG_FILE",
            "IBV_SHIM_REPORT",
            "IBV_SHIM_LEAK_EXITCODE",
            "IBV_SHIM_SUPPRESS",
            "IBV_SHIM_BACKTRACE",
            "IBV_SHIM_TRACE",
            "IBV_SHIM_TRACE_FULL",
            "IBV_SHIM_TRACE_SLOTS",
            "IBV_SHIM_TRACE_CLOCK",
            "IBV_SHIM_CHECK",
            "IBV_SHIM_LOG_SYNC",
            "IBV_SIM_DEVICES",
            "IBV_SIM_WITNESS",
        ] {
            cmd.env_remove(var);
        }
        cmd.envs(self.env.iter().copied());
        let mut path: Vec<PathBuf> = Vec::new();
        if mode.dropin() {
            path.push(self.dropin.path().to_path_buf());
        }
        if self.backend == Backend::Sim {
            path.push(sim_dir());
            cmd.env("IBV_SIM_FABRIC", &self.fabric);
        }
        if !path.is_empty() {
            cmd.env("LD_LIBRARY_PATH", std::env::join_paths(&path).unwrap());
        }
        if mode.preload() {
            cmd.env("LD_PRELOAD", shim_so());
        }
        if mode != Mode::Baseline && !mode.launcher() {
            cmd.env("IBV_SHIM_LOG", "warn")
                .env("IBV_SHIM_LOG_FILE", out.join("log.%p"))
                .env("IBV_SHIM_REPORT", out.join("report.%p.json"));
        }
        if mode.all_features() {
            cmd.envs(all_features::env(out));
        }
        cmd
    }
}

impl World {
    /// A case's command line on this backend: on the real kernel, rdma_cm
    /// resolves the guest's own address to rxe0 (127.0.0.1 has no RDMA
    /// device behind it: `rdma_resolve_route: No such device`).
    fn argv(&self, text: &str, port: u16) -> Vec<String> {
        let mut v = argv(text, port);
        if self.backend == Backend::Kernel {
            for w in &mut v {
                *w = w.replace("127.0.0.1", GUEST_IP);
            }
        }
        v
    }

    /// Starts a command made by [`World::command`] on this backend.
    fn start(&self, cmd: Command) -> Running {
        match self.vm {
            Some(vm) => Running::start_vm(vm, cmd),
            None => Running::start(cmd),
        }
    }

    /// Waits until the server listens on `port` (or has ended, or the
    /// listen timeout passed).
    fn wait_listening(&self, server: &mut Running, port: u16) {
        if let (Some(vm), Running::Vm { job: Some(job), .. }) = (self.vm, &*server) {
            return vm_wait_listening(vm, job, port, LISTEN_TIMEOUT);
        }
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        let ready = |w: &World| {
            listening(port) || (w.backend == Backend::Sim && cm_listening(&w.fabric, port))
        };
        while !ready(self) && !server.exited() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.remove_fabric();
    }
}

// ---------------------------------------------------------------------------
// Running processes

/// A started process whose output is collected in the background; killed
/// (with what it forked) if dropped before it finished. On the real
/// kernel it is a job in the VM (its whole process group is killed).
enum Running {
    Local {
        child: Option<Child>,
        pid: u32,
        out: mpsc::Receiver<(bool, Vec<u8>)>,
    },
    Vm {
        vm: &'static Vm,
        job: Option<VmRunning<'static>>,
        pid: u32,
    },
}

/// How a process ended.
struct Ended {
    /// `None`: it was still running at the deadline (then killed).
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

impl Running {
    fn start(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let (tx, rx) = mpsc::channel();
        for (is_err, mut pipe) in [
            (
                false,
                Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            ),
            (true, Box::new(child.stderr.take().unwrap())),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = pipe.read_to_end(&mut buf);
                let _ = tx.send((is_err, buf));
            });
        }
        Running::Local {
            pid: child.id(),
            child: Some(child),
            out: rx,
        }
    }

    /// `cmd` (its program, arguments, directory and the variables it sets)
    /// as a job in the VM.
    fn start_vm(vm: &'static Vm, cmd: Command) -> Running {
        let mut job = Job::new(
            std::iter::once(cmd.get_program().to_owned())
                .chain(cmd.get_args().map(|a| a.to_owned())),
        )
        .timeout(PROCESS_TIMEOUT_KERNEL);
        if let Some(dir) = cmd.get_current_dir() {
            job = job.cwd(dir);
        }
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                job = job.env(k, v);
            }
        }
        let running = vm
            .spawn(&job)
            .unwrap_or_else(|e| panic!("cannot start {cmd:?} in the VM: {e}"));
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        let pid = loop {
            if let Some(pid) = running.pid() {
                break pid;
            }
            assert!(Instant::now() < deadline, "{cmd:?} never started in the VM");
            std::thread::sleep(Duration::from_millis(10));
        };
        Running::Vm {
            vm,
            job: Some(running),
            pid,
        }
    }

    fn pid(&self) -> u32 {
        match self {
            Running::Local { pid, .. } | Running::Vm { pid, .. } => *pid,
        }
    }

    fn exited(&mut self) -> bool {
        match self {
            Running::Local { child, .. } => {
                matches!(child.as_mut().map(|c| c.try_wait()), Some(Ok(Some(_))))
            }
            Running::Vm { job, .. } => {
                matches!(
                    job.as_ref().map(|j| j.try_wait()),
                    Some(Ok(Some(_)) | Err(_))
                )
            }
        }
    }

    /// What the process forked (still running).
    fn children(&self) -> Vec<u32> {
        match self {
            Running::Local { pid, .. } => children(*pid),
            Running::Vm { vm, pid, .. } => vm_children(vm, *pid),
        }
    }

    /// SIGKILL to the process and everything it forked.
    fn kill_all(&self) {
        match self {
            Running::Local { pid, .. } => kill_tree(*pid),
            Running::Vm { job, .. } => {
                if let Some(j) = job {
                    j.kill();
                }
            }
        }
    }

    /// Waits up to `timeout` for the process; past it, kills it and what it
    /// forked. Output is whatever arrived by then (a forked process that
    /// keeps the pipes open cannot hold this up for more than a moment).
    fn finish(mut self, timeout: Duration) -> Ended {
        if let Running::Vm { job, .. } = &mut self {
            let job = job.take().unwrap();
            let deadline = Instant::now() + timeout;
            let done = loop {
                match job.try_wait() {
                    Ok(Some(o)) => break Some(o),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Ok(None) => {
                        job.kill();
                        break job.wait().ok();
                    }
                    Err(e) => panic!("{e}"),
                }
            };
            let done = done.expect("a killed job ends");
            return Ended {
                status: (!done.timed_out && Instant::now() <= deadline)
                    .then(|| shell_status(done.status)),
                stdout: String::from_utf8_lossy(&done.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
            };
        }
        let Running::Local { child, pid, out } = &mut self else {
            unreachable!()
        };
        let mut child = child.take().unwrap();
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break Some(status);
            }
            if Instant::now() > deadline {
                kill_tree(*pid);
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let grace = Instant::now() + Duration::from_secs(5);
        for _ in 0..2 {
            let left = grace.saturating_duration_since(Instant::now());
            match out.recv_timeout(left) {
                Ok((false, b)) => stdout = b,
                Ok((true, b)) => stderr = b,
                Err(_) => break,
            }
        }
        Ended {
            status,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }
}

/// A shell's status (the exit code, or 128 + a signal's number) as a wait
/// status.
fn shell_status(status: i32) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    match status {
        129..=159 => ExitStatus::from_raw(status - 128),
        code => ExitStatus::from_raw((code & 0xff) << 8),
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        match self {
            Running::Local { child, pid, .. } => {
                if let Some(mut child) = child.take() {
                    kill_tree(*pid);
                    let _ = child.wait();
                }
            }
            Running::Vm { job, .. } => {
                if let Some(j) = job.take() {
                    j.kill();
                }
            }
        }
    }
}

/// The children of `pid` (from `/proc/PID/task/*/children`).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|w| w.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// SIGKILL to `pid` and, first, everything it forked (only processes this
/// test started, by id).
fn kill_tree(pid: u32) {
    for c in children(pid) {
        kill_tree(c);
    }
    // SAFETY: kill(2) with a pid this test started; no memory involved.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
}

// ---------------------------------------------------------------------------
// What one process did

/// One object of a JSON leak report.
#[derive(Clone, Debug)]
struct Object {
    kind: String,
    found: String,
    module: String,
    suppressed: bool,
}

/// One JSON leak report.
#[derive(Clone, Debug)]
struct Report {
    file: PathBuf,
    pid: u64,
    program: String,
    objects: Vec<Object>,
    /// The data-path checks' counts by rule (with `IBV_SHIM_CHECK`).
    checks: Vec<(String, u64)>,
}

fn read_reports(dir: &Path) -> Vec<Report> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("report."))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            let doc: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not JSON ({e}):\n{text}", file.display()));
            let s = |v: &Value| v.as_str().unwrap_or("").to_string();
            let mut objects: Vec<Object> = doc["objects"]
                .as_array()
                .unwrap_or_else(|| panic!("{}: no objects array", file.display()))
                .iter()
                .map(|o| Object {
                    kind: s(&o["kind"]),
                    found: s(&o["found"]),
                    module: s(&o["created"]["module"]),
                    suppressed: o["suppressed"].as_bool().unwrap_or(false),
                })
                .collect();
            // The connection manager's objects left at exit (ids, event
            // channels, unacked events, lists) are leaks like the verbs
            // objects: a program that frees what it makes has none, so the
            // librdmacm rows check for no false leak there too.
            if let Some(cm) = doc["connection_manager"]["objects"].as_array() {
                objects.extend(cm.iter().map(|o| Object {
                    kind: s(&o["kind"]),
                    found: "exit".to_string(),
                    module: s(&o["created"]["module"]),
                    suppressed: o["suppressed"].as_bool().unwrap_or(false),
                }));
            }
            let checks = doc["checks"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(u64::MAX)))
                        .collect()
                })
                .unwrap_or_default();
            Report {
                checks,
                pid: doc["pid"].as_u64().unwrap_or(0),
                program: s(&doc["program"]),
                file,
                objects,
            }
        })
        .collect()
}

fn read_log(dir: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("log."))
        })
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect()
}

/// One process of one run of a case.
struct Proc {
    role: Role,
    argv: Vec<String>,
    command: String,
    pid: u32,
    ended: Ended,
    /// We killed it ourselves (a server that never exits by itself).
    killed_by_us: bool,
    reports: Vec<Report>,
    log: String,
    /// Its trace files (all-features runs).
    traces: Vec<PathBuf>,
}

impl Proc {
    fn name(&self) -> &str {
        Path::new(&self.argv[0])
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    }

    fn show(&self) -> String {
        let status = match self.ended.status {
            None => "HUNG (killed at the timeout)".to_string(),
            Some(s) if self.killed_by_us => format!("{s} (stopped by the test)"),
            Some(s) => s.to_string(),
        };
        let mut s = format!(
            "  {:?} pid {}: {}\n  status: {status}\n  stdout:\n{}  stderr:\n{}",
            self.role,
            self.pid,
            self.command,
            indent(&self.ended.stdout),
            indent(&self.ended.stderr)
        );
        if !self.log.is_empty() {
            s += &format!("  shim log:\n{}", indent(&short_log(&self.log)));
        }
        for r in &self.reports {
            s += &format!("  report {}:\n", r.file.display());
            for o in &r.objects {
                s += &format!(
                    "    | {} found at {} created in {}{}\n",
                    o.kind,
                    o.found,
                    o.module,
                    if o.suppressed { " (suppressed)" } else { "" }
                );
            }
        }
        s
    }
}

/// A debug log (all-features runs: a line per call, 200,000 for qperf)
/// without its DEBUG lines past the first 50.
fn short_log(log: &str) -> String {
    let mut debug = 0;
    let mut out = String::new();
    for line in log.lines() {
        if line.contains(" DEBUG ") {
            debug += 1;
            if debug > 50 {
                continue;
            }
        }
        out += line;
        out.push('\n');
    }
    if debug > 50 {
        out += &format!("({} more DEBUG lines)\n", debug - 50);
    }
    out
}

fn indent(text: &str) -> String {
    if text.is_empty() {
        return "    (empty)\n".into();
    }
    text.lines().map(|l| format!("    | {l}\n")).collect()
}

// ---------------------------------------------------------------------------
// Cases

/// The leaks a process must report, given the path it took.
#[derive(Clone, Debug, Default)]
struct Expect {
    /// Accepted sets of unsuppressed leaks (kind, where found, count); the
    /// report must match one exactly. Most paths have exactly one.
    leaks: Vec<Vec<(&'static str, &'static str, usize)>>,
    /// The process used verbs, so it must write a report.
    reports: bool,
    /// Text the shim's log must contain.
    log_has: Vec<&'static str>,
}

impl Expect {
    fn exactly(leaks: &[(&'static str, &'static str, usize)]) -> Expect {
        Expect {
            leaks: vec![leaks.to_vec()],
            reports: true,
            log_has: Vec::new(),
        }
    }
}

/// What a process printed and how it ended, to tell its path.
struct Seen<'a> {
    backend: Backend,
    role: Role,
    code: Option<i32>,
    stdout: &'a str,
    stderr: &'a str,
}

impl Seen<'_> {
    fn said(&self, text: &str) -> bool {
        self.stdout.contains(text) || self.stderr.contains(text)
    }
}

/// How much of the output must equal the baseline's.
#[derive(Clone, Copy, Debug)]
enum Compare {
    /// Byte for byte.
    Exact,
    /// Byte for byte, without the lines containing any of these (a figure
    /// that changes from run to run, a line a program's own race decides).
    ExactBut(&'static [&'static str]),
    /// Numbers (decimal and hex) replaced: timings, PSNs, QP numbers.
    Shape,
    /// Each line up to its first `=` (qperf scales its units).
    Labels,
    /// Only the exit status (the pair races over who fails first).
    Status,
}

struct Case {
    name: &'static str,
    /// The command lines, `{port}` standing for a free TCP port (a fresh
    /// one for each run: a server's old connections may hold the last).
    server: Option<String>,
    client: String,
    compare: Compare,
    /// The server never exits by itself (qperf): the test stops it once the
    /// client is done and what it forked has exited.
    server_stays: bool,
    expect: fn(&Seen<'_>) -> Result<Expect, String>,
    /// Environment of every process of the case.
    env: &'static [(&'static str, &'static str)],
    /// On the sim, `/dev/infiniband/uverbsN` must exist as character
    /// devices (UCX lists no verbs device without them).
    uverbs_nodes: bool,
    /// Its teardown moves QPs that still have receives posted to ERR
    /// (`rdma_disconnect`): flushed completions are part of a good run.
    flushes: bool,
    /// A race of the program's own that a loaded machine can lose, told by
    /// what it prints (see [`settled`]); None for most.
    racy_end: Option<fn(&[Proc]) -> bool>,
}

/// A command line split at blanks, then `{port}` and `{repo}` (the
/// repository, which may hold blanks) filled in.
fn argv(text: &str, port: u16) -> Vec<String> {
    let repo = repo_dir().display().to_string();
    text.split_whitespace()
        .map(|w| {
            w.replace("{port}", &port.to_string())
                .replace("{repo}", &repo)
        })
        .collect()
}

fn alone(
    name: &'static str,
    cmd: &str,
    compare: Compare,
    expect: fn(&Seen<'_>) -> Result<Expect, String>,
) -> Case {
    Case {
        name,
        server: None,
        client: cmd.into(),
        compare,
        server_stays: false,
        expect,
        env: &[],
        uverbs_nodes: false,
        flushes: false,
        racy_end: None,
    }
}

fn pair(
    name: &'static str,
    server: &str,
    client: &str,
    compare: Compare,
    expect: fn(&Seen<'_>) -> Result<Expect, String>,
) -> Case {
    Case {
        name,
        server: Some(server.into()),
        client: client.into(),
        compare,
        server_stays: false,
        expect,
        env: &[],
        uverbs_nodes: false,
        flushes: false,
        racy_end: None,
    }
}

/// A librdmacm case: its teardown flushes receives (see [`Case::flushes`]).
fn cm(mut c: Case) -> Case {
    c.flushes = true;
    c
}

fn unknown(s: &Seen<'_>) -> Result<Expect, String> {
    Err(format!(
        "{:?} on {:?} took a path this test does not know (exit {:?})",
        s.role, s.backend, s.code
    ))
}

/// ` -g 1` on the real kernel's RoCE device, else nothing.
fn gid(backend: Backend) -> &'static str {
    match backend {
        Backend::Kernel => " -g 1",
        _ => "",
    }
}

/// librdmacm programs: on the real kernel they must connect and end well;
/// elsewhere they fail alike with and without the shim. They free what
/// they create (librdmacm's own device list and contexts are suppressed).
fn connected(s: &Seen<'_>) -> Result<Expect, String> {
    if s.backend == Backend::Kernel && s.code != Some(0) {
        return unknown(s);
    }
    no_leaks(s)
}

/// Programs that free everything they create, on every path they take here.
fn no_leaks(_: &Seen<'_>) -> Result<Expect, String> {
    Ok(Expect::exactly(&[]))
}

/// ibverbs-utils pingpongs: `main` returns on a failed open without
/// `ibv_free_device_list`; on success everything is freed.
fn pingpong(s: &Seen<'_>) -> Result<Expect, String> {
    if s.code == Some(0) {
        Ok(Expect::exactly(&[]))
    } else if s.said("Couldn't get context for") {
        Ok(Expect::exactly(&[("device_list", "exit", 1)]))
    } else if s.said("Couldn't Open the XRC Domain") {
        // ibv_xsrq_pingpong's pp_init_ctx returns without undoing the open,
        // the PD and the MR (a provider without XRC).
        Ok(Expect::exactly(&[
            ("context", "exit", 1),
            ("pd", "exit", 1),
            ("mr", "exit", 1),
        ]))
    } else {
        unknown(s)
    }
}

/// perftest never calls `ibv_free_device_list`. A SEND test always creates
/// a receive CQ, but `destroy_ctx` and `ctx_init`'s error path destroy it
/// only for a latency test, a server, duplex or events: an `ib_send_bw`
/// client leaks it on every path. On success the rest is destroyed and
/// the device closed (the CQ is orphaned there); when QP creation fails
/// `ctx_init` undoes the rest and `main` returns without closing the device.
fn perftest(s: &Seen<'_>, prog: &str) -> Result<Expect, String> {
    let send_bw_client = prog == "ib_send_bw" && s.role == Role::Client;
    if s.code == Some(0) {
        let mut leaks = vec![("device_list", "exit", 1)];
        if send_bw_client {
            leaks.push(("cq", "close", 1));
        }
        Ok(Expect::exactly(&leaks))
    } else if s.said("Couldn't get context for the device") {
        Ok(Expect::exactly(&[("device_list", "exit", 1)]))
    } else if s.said("Failed to create QP") {
        let mut leaks = vec![("context", "exit", 1), ("device_list", "exit", 1)];
        if send_bw_client {
            leaks.push(("cq", "exit", 1));
        }
        Ok(Expect::exactly(&leaks))
    } else {
        unknown(s)
    }
}

/// perftest over the connection manager (`-R`), on the real kernel: `main`
/// opens a context of its own, then works on the one of its `rdma_cm_id`
/// (`ctx->context = ctx->cm_id->verbs`), and `destroy_ctx` closes a
/// context only without `-R`: the program's own context is never closed
/// (a true leak, found at exit), beside the device list. The `ib_send_bw`
/// client's receive CQ (see [`perftest`]) is on the CM's context, which
/// librdmacm never closes either: found at exit. The connection manager's
/// side: perftest makes two cm_ids, each on an event channel of its own,
/// and destroys one pair: the other id (ESTABLISHED) and its channel are
/// left at exit on both sides.
fn perftest_rdma_cm(s: &Seen<'_>, prog: &str) -> Result<Expect, String> {
    connected(s)?;
    let mut leaks = vec![
        ("device_list", "exit", 1),
        ("context", "exit", 1),
        ("cm_id", "exit", 1),
        ("event_channel", "exit", 1),
    ];
    if prog == "ib_send_bw" && s.role == Role::Client {
        leaks.push(("cq", "exit", 1));
    }
    Ok(Expect::exactly(&leaks))
}

/// On the real kernel's emulated VM perftest's calibration of its cycle
/// counter may fail ("Correlation coefficient r^2 < 0.9"), which ends the
/// program ("Can't produce a report") unless `-F` lets it report anyway.
fn perftest_extra(backend: Backend) -> &'static str {
    match backend {
        Backend::Kernel => "-F",
        _ => "",
    }
}

/// qperf: `rd_close` deallocates the PD before deregistering the MR (EBUSY),
/// closes the device (the PD is orphaned) and `free()`s the device list.
/// On the test bed the open fails and it exits with the list not freed.
fn qperf(s: &Seen<'_>) -> Result<Expect, String> {
    let opened_and_failed = s
        .stdout
        .lines()
        .chain(s.stderr.lines())
        .any(|l| l.starts_with("failed to open device"));
    if s.backend == Backend::Testbed {
        if opened_and_failed {
            return Ok(Expect::exactly(&[("device_list", "exit", 1)]));
        }
        // The other side failed first: this one may have got its device
        // list before it heard (then it leaks it), or never run verbs.
        return Ok(Expect {
            leaks: vec![vec![], vec![("device_list", "exit", 1)]],
            reports: false,
            log_has: Vec::new(),
        });
    }
    if s.role == Role::Client && s.code != Some(0) {
        return unknown(s);
    }
    // On the real kernel (`-cm1`) the server serves the test in its own
    // process (no fork) and ends only when the test kills it: no report.
    // The client's device is librdmacm's, and its context is never
    // closed: the PD `rd_close` fails to free is found at exit, and there
    // is no device list of its own. Its `-cm1` cm_id and event channel are
    // never destroyed (the connection-manager audit lists them at exit).
    if s.backend == Backend::Kernel {
        return Ok(match s.role {
            Role::Server => Expect {
                leaks: vec![vec![]],
                reports: false,
                log_has: Vec::new(),
            },
            _ => Expect {
                leaks: vec![vec![
                    ("pd", "exit", 1),
                    ("cm_id", "exit", 1),
                    ("event_channel", "exit", 1),
                ]],
                reports: true,
                log_has: vec!["ibv_dealloc_pd(", "= EBUSY: still held by 1 object: mr"],
            },
        });
    }
    Ok(Expect {
        leaks: vec![vec![("pd", "close", 1), ("device_list", "exit", 1)]],
        reports: true,
        log_has: vec!["ibv_dealloc_pd(", "= EBUSY: still held by 1 object: mr"],
    })
}

/// `ucx_info -d`: on the sim, both devices with UCX's generic verbs
/// transports (rc_verbs, ud_verbs; the mlx5 ones need mlx5dv, which the sim
/// is not), and the real kernel's rxe0 with the same. On the test bed no
/// device can be opened, and UCX lists none.
fn ucx_info(s: &Seen<'_>) -> Result<Expect, String> {
    let devices: &[&str] = match s.backend {
        Backend::Sim => &["mlx5_0", "mlx5_1"],
        Backend::Kernel => &["rxe0"],
        Backend::Testbed => &[],
    };
    for dev in devices {
        for tl in ["rc_verbs", "ud_verbs"] {
            let listed = s.stdout.lines().collect::<Vec<_>>().windows(2).any(|w| {
                w[0].trim_start_matches(['#', ' ']) == format!("Transport: {tl}")
                    && w[1].trim_start_matches(['#', ' ']) == format!("Device: {dev}:1")
            });
            if !listed {
                return Err(format!("ucx_info lists no {tl} on {dev}:1"));
            }
        }
    }
    no_leaks(s)
}

/// `ucx_perftest`: both sides free everything; the client must print its
/// result row (the iteration count first).
fn ucx_perftest(s: &Seen<'_>) -> Result<Expect, String> {
    let result_row = s
        .stdout
        .lines()
        .any(|l| l.split_whitespace().next() == Some(UCX_ITERATIONS));
    if s.code != Some(0) || (s.role == Role::Client && !result_row) {
        return unknown(s);
    }
    no_leaks(s)
}

/// Iterations of a `ucx_perftest` case (after 20 of warm-up).
const UCX_ITERATIONS: &str = "200";

/// UCP's transports for the RC cases: RC needs UD beside it to set up its
/// connections; the traffic itself goes over RC (`ep_cfg[0]:
/// tag(rc_verbs/mlx5_0:1)` at `UCX_LOG_LEVEL=info`).
const UCP_RC: &[(&str, &str)] = &[
    ("UCX_TLS", "rc_verbs,ud_verbs"),
    ("UCX_NET_DEVICES", "mlx5_0:1"),
];
const UCP_UD: &[(&str, &str)] = &[("UCX_TLS", "ud_verbs"), ("UCX_NET_DEVICES", "mlx5_0:1")];
/// RC over RoCE: the sim's rxe0 alone (GID-addressed, with a GRH). UD
/// over RoCE v2 with an IPv4 GID puts 20 zero bytes and the IPv4 header
/// before the payload, and rxe (real and simulated) reports 0 in the
/// completion's `sl` where mlx5 reports the packet type (2 for IPv4):
/// UCX 1.13's ud_verbs then compares the 16 bytes where an IPv6 header
/// keeps the destination GID, finds none of its own and drops every
/// packet (measured on real rxe in the VM: "UD endpoint ... unhandled
/// timeout"). Without its destination GID check it runs on both.
const UCP_RC_ROCE: &[(&str, &str)] = &[
    ("IBV_SIM_DEVICES", "rxe0"),
    ("UCX_TLS", "rc_verbs,ud_verbs"),
    ("UCX_NET_DEVICES", "rxe0:1"),
    ("UCX_UD_VERBS_ETH_DGID_CHECK", "n"),
];

/// `ucx_perftest` over the sim's mlx5_0 (unless `env` says otherwise):
/// `test` is `-t TEST` and its options (a UCT test names its transport and
/// device, `-x`, `-d`; a UCP test gets them from `env`). `-f` prints the
/// final row only, whatever the run's length.
fn ucx_perftest_case(
    name: &'static str,
    test: &str,
    env: &'static [(&'static str, &'static str)],
) -> Case {
    let mut c = pair(
        name,
        "ucx_perftest -p {port} -f",
        &format!("ucx_perftest -p {{port}} -f -n {UCX_ITERATIONS} -w 20 {test} 127.0.0.1"),
        Compare::Shape,
        ucx_perftest,
    );
    c.env = env;
    c.uverbs_nodes = true;
    c
}

fn perftest_case(name: &'static str, prog: &'static str, extra: &str) -> Case {
    fn expect_for(prog: &str) -> fn(&Seen<'_>) -> Result<Expect, String> {
        match prog {
            "ib_send_bw" => |s| perftest(s, "ib_send_bw"),
            _ => |s| perftest(s, "other"),
        }
    }
    pair(
        name,
        &format!("{prog} -p {{port}} -n 10 {extra}"),
        &format!("{prog} -p {{port}} -n 10 {extra} 127.0.0.1"),
        Compare::Shape,
        expect_for(prog),
    )
}

/// On the test bed client and server race to fail first, and either may
/// print the error: only the exit status is the same every time.
/// On the real kernel's RoCE device qperf needs the connection manager
/// (`-cm1`: its own exchange sets no GRH, and RTR fails with EINVAL).
fn qperf_case(name: &'static str, test: &str, backend: Backend) -> Case {
    let compare = match backend {
        Backend::Sim | Backend::Kernel => Compare::Labels,
        Backend::Testbed => Compare::Status,
    };
    let cm = if backend == Backend::Kernel {
        " -cm1"
    } else {
        ""
    };
    let mut c = pair(
        name,
        "qperf -lp {port}",
        &format!("qperf -lp {{port}} -t 1{cm} 127.0.0.1 {test}"),
        compare,
        qperf,
    );
    c.server_stays = true;
    c
}

fn case(name: &'static str, backend: Backend) -> Case {
    match name {
        "ibv_devices" => alone("ibv_devices", "ibv_devices", Compare::Exact, no_leaks),
        "ibv_devinfo" => alone("ibv_devinfo", "ibv_devinfo -v", Compare::Exact, no_leaks),
        // Debian's python3, whose dist-packages hold pyverbs.
        // (Real rxe's lkeys differ from run to run.)
        "pyverbs" => alone(
            "pyverbs",
            "/usr/bin/python3 {repo}/tests/third_party/pyverbs_pd_mr.py",
            if backend == Backend::Kernel {
                Compare::Shape
            } else {
                Compare::Exact
            },
            no_leaks,
        ),
        // libfabric's verbs provider reaches libibverbs through librdmacm,
        // which keeps its device list and contexts for the life of the
        // process: suppressed by default, so nothing is reported.
        "fi_info" => alone("fi_info", "fi_info -p verbs", Compare::Exact, no_leaks),
        "ucx_info" => {
            let mut c = alone(
                "ucx_info",
                "ucx_info -d",
                Compare::ExactBut(&["allocate:"]),
                ucx_info,
            );
            c.uverbs_nodes = true;
            c
        }
        // UCP: tag-matched sends, RDMA writes of 64 KiB (over RC), sends of
        // 8 KiB cut by UCX into UD datagrams of the path MTU.
        "ucx_tag_lat_rc" => ucx_perftest_case(name, "-t tag_lat", UCP_RC),
        "ucx_put_bw_rc" => ucx_perftest_case(name, "-t ucp_put_bw -s 65536", UCP_RC),
        "ucx_tag_bw_ud" => ucx_perftest_case(name, "-t tag_bw -s 8192", UCP_UD),
        "ucx_tag_lat_roce" => ucx_perftest_case(name, "-t tag_lat", UCP_RC_ROCE),
        // 1 MiB: UCX's rendezvous protocol, zero-copy from the user's buffers
        // (registered whole, through UCX's registration cache).
        "ucx_tag_bw_rndv_rc" => ucx_perftest_case(name, "-t tag_bw -s 1048576", UCP_RC),
        // UCT over RC: zero-copy RDMA reads, and fetch-and-add atomics.
        "ucx_get_rc" => {
            ucx_perftest_case(name, "-t get -x rc_verbs -d mlx5_0:1 -s 4096 -D zcopy", &[])
        }
        "ucx_fadd_rc" => ucx_perftest_case(name, "-t fadd -x rc_verbs -d mlx5_0:1", &[]),
        // RoCE (the real kernel's rxe0) needs a GID: index 1 is eth0's
        // IPv4-mapped one.
        "ibv_rc_pingpong" | "ibv_uc_pingpong" | "ibv_ud_pingpong" | "ibv_srq_pingpong"
        | "ibv_xsrq_pingpong" => pair(
            name,
            &format!("{name} -p {{port}} -n 5{}", gid(backend)),
            &format!("{name} -p {{port}} -n 5{} 127.0.0.1", gid(backend)),
            // xsrq prints its random PSNs as bare hex ("PSN c5a712"), whose
            // shape varies from run to run: its exit status is compared.
            if name == "ibv_xsrq_pingpong" {
                Compare::Status
            } else {
                Compare::Shape
            },
            pingpong,
        ),
        "ib_send_bw" => perftest_case("ib_send_bw", "ib_send_bw", perftest_extra(backend)),
        "ib_write_bw" => perftest_case("ib_write_bw", "ib_write_bw", perftest_extra(backend)),
        "ib_read_bw" => perftest_case("ib_read_bw", "ib_read_bw", perftest_extra(backend)),
        "ib_atomic_bw" => perftest_case("ib_atomic_bw", "ib_atomic_bw", perftest_extra(backend)),
        "ib_send_lat" => perftest_case("ib_send_lat", "ib_send_lat", perftest_extra(backend)),
        "ib_write_lat" => perftest_case("ib_write_lat", "ib_write_lat", perftest_extra(backend)),
        "ib_read_lat" => perftest_case("ib_read_lat", "ib_read_lat", perftest_extra(backend)),
        // 900 bytes inline is within perftest's limit and beyond the
        // device's (the sim's max_inline_data is 512): QP creation fails on
        // both sides, whatever else the sim supports.
        "ib_send_bw_failed_qp" => perftest_case("ib_send_bw_failed_qp", "ib_send_bw", "-I 900"),
        "qperf_rc_bw" => qperf_case("qperf_rc_bw", "rc_bw", backend),
        "qperf_rc_lat" => qperf_case("qperf_rc_lat", "rc_lat", backend),
        "qperf_ud_lat" => qperf_case("qperf_ud_lat", "ud_lat", backend),
        // librdmacm programs: on the sim through the sim's own librdmacm
        // (target/sim/librdmacm.so.1, found on the same LD_LIBRARY_PATH),
        // on the real kernel through rdma_cm; on the test bed they fail the
        // same way with and without the shim. What librdmacm keeps is not a
        // leak. Their disconnections flush the receives still posted.
        "rping" => cm(pair(
            "rping",
            "rping -s -a 127.0.0.1 -p {port} -C 3",
            "rping -c -a 127.0.0.1 -p {port} -C 3 -v",
            // Which side sees the other disconnect first, and in what state
            // the server is then, is rping's own race.
            Compare::ExactBut(&["DISCONNECT EVENT", "wait for RDMA_READ_ADV state"]),
            connected,
        )),
        "ucmatose" => cm(pair(
            "ucmatose",
            "ucmatose -p {port}",
            "ucmatose -s 127.0.0.1 -p {port}",
            Compare::Exact,
            connected,
        )),
        "udaddy" => cm(pair(
            "udaddy",
            "udaddy",
            "udaddy -s 127.0.0.1",
            Compare::Exact,
            connected,
        )),
        "rdma_server" => cm(pair(
            "rdma_server",
            "rdma_server -s 127.0.0.1 -p {port}",
            "rdma_client -s 127.0.0.1 -p {port}",
            Compare::Exact,
            connected,
        )),
        // rdma_xclient sends 16 bytes inline on a QP created asking for
        // none: rxe rounds its inline size up, mlx5 does not (ENOMEM).
        "rdma_xserver" => {
            let mut c = cm(pair(
                "rdma_xserver",
                "rdma_xserver -p {port}",
                "rdma_xclient -s 127.0.0.1 -p {port}",
                Compare::Exact,
                connected,
            ));
            c.env = &[("IBV_SIM_DEVICES", "rxe0")];
            c
        }
        // Multicast between two processes: the receiver waits for its
        // count of datagrams from the sender.
        "mckey" => cm(pair(
            "mckey",
            "mckey -m 239.1.2.3 -b 127.0.0.1 -C 5",
            "mckey -m 239.1.2.3 -b 127.0.0.1 -s -C 5",
            Compare::Exact,
            connected,
        )),
        // rsockets, over the connection manager (on the sim, its
        // librdmacm's own rsockets).
        "rstream" | "riostream" => cm(pair(
            name,
            &format!("{name} -p {{port}} -S 4096 -C 20"),
            &format!("{name} -s 127.0.0.1 -p {{port}} -S 4096 -C 20"),
            Compare::Shape,
            connected,
        )),
        "ib_send_bw_rdma_cm" => {
            let mut c = cm(perftest_case(
                name,
                "ib_send_bw",
                &format!("{} -R", perftest_extra(backend)),
            ));
            c.expect = |s| perftest_rdma_cm(s, "ib_send_bw");
            c
        }
        "ib_write_bw_rdma_cm" => {
            let mut c = cm(perftest_case(
                name,
                "ib_write_bw",
                &format!("{} -R", perftest_extra(backend)),
            ));
            c.expect = |s| perftest_rdma_cm(s, "ib_write_bw");
            c
        }
        "ib_read_lat_rdma_cm" => {
            let mut c = cm(perftest_case(
                name,
                "ib_read_lat",
                &format!("{} -R", perftest_extra(backend)),
            ));
            c.expect = |s| perftest_rdma_cm(s, "ib_read_lat");
            c
        }
        // libfabric's verbs provider, msg endpoints over rdma_cm (its
        // control port: -B on the server, -P on the client), and rdm
        // endpoints (ofi_rxm over verbs msg endpoints).
        "fi_pingpong_msg" => cm(pair(
            name,
            "fi_pingpong -p verbs -e msg -B {port} -I 10",
            "fi_pingpong -p verbs -e msg -P {port} -I 10 127.0.0.1",
            Compare::Labels,
            connected,
        )),
        "fi_pingpong_rdm" => {
            let mut c = cm(pair(
                name,
                "fi_pingpong -p verbs;ofi_rxm -e rdm -B {port} -I 10",
                "fi_pingpong -p verbs;ofi_rxm -e rdm -P {port} -I 10 127.0.0.1",
                Compare::Labels,
                connected,
            ));
            c.racy_end = Some(rxm_lost_its_last_receive);
            c
        }
        // UCT over rxe0's RC: zero-copy RDMA reads and atomics. (UCP's
        // wire-up needs UD beside RC, and UCX's UD endpoints time out on the
        // emulated VM: "UD endpoint ...: unhandled timeout error", without
        // any shim.)
        "ucx_get_rc_rxe" => {
            ucx_perftest_case(name, "-t get -x rc_verbs -d rxe0:1 -s 4096 -D zcopy", &[])
        }
        "ucx_fadd_rc_rxe" => ucx_perftest_case(name, "-t fadd -x rc_verbs -d rxe0:1", &[]),
        other => panic!("no case {other}"),
    }
}

// ---------------------------------------------------------------------------
// Running a case

/// A process of a run, started.
struct Started {
    role: Role,
    argv: Vec<String>,
    running: Running,
    dir: PathBuf,
    command: String,
}

impl Started {
    fn end(self, timeout: Duration, killed_by_us: bool) -> Proc {
        let pid = self.running.pid();
        let ended = self.running.finish(timeout);
        Proc {
            role: self.role,
            argv: self.argv,
            command: self.command,
            pid,
            ended,
            killed_by_us,
            reports: read_reports(&self.dir),
            log: read_log(&self.dir),
            traces: all_features::traces(&self.dir),
        }
    }
}

/// Runs the case once in `mode`: the server (if any) until it listens, the
/// client to its end, then the server to its end. The client comes first
/// in the result.
/// How many times a case with a racy end is run before its last run
/// counts.
const RACY_TRIES: usize = 5;

/// `run_mode`, run again (up to [`RACY_TRIES`] runs) while the case's own
/// race shows (`Case::racy_end`). The race is the program's, with or without
/// the shim, so each mode's last run is judged as any other.
fn settled(world: &World, case: &Case, mode: Mode, tmp: &TempDir) -> Vec<Proc> {
    let mut tries = 1;
    loop {
        let procs = run_mode(world, case, mode, tmp);
        let lost = case.racy_end.is_some_and(|f| f(&procs));
        if !lost || tries == RACY_TRIES {
            return procs;
        }
        eprintln!(
            "{} ({mode:?}): the program's own shutdown race showed; run {} of {RACY_TRIES}",
            case.name,
            tries + 1
        );
        // The next run's reports and traces alone in its processes' folders.
        let prefix = format!("{mode:?}-");
        for e in std::fs::read_dir(tmp.path()).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                std::fs::remove_dir_all(e.path()).unwrap();
            }
        }
        tries += 1;
    }
}

/// fi_pingpong over `ofi_rxm`: every transfer done, then one side's last
/// receive cancelled (`cq_readerr: Work Request Flushed Error`, exit
/// FI_ECANCELED or a wait for ever) when the peer's disconnect reaches
/// rxm before that receive's completion, which sits in the verbs CQ
/// (neither the verbs CQs nor the QPs show an error or a flush, seen with
/// `IBV_SHIM_CHECK=datapath`). A descheduled process loses it.
fn rxm_lost_its_last_receive(procs: &[Proc]) -> bool {
    procs.iter().all(|p| p.ended.stdout.contains("\n1m "))
        && procs.iter().any(|p| {
            p.ended
                .stderr
                .contains("cq_readerr: Work Request Flushed Error")
        })
}

fn run_mode(world: &World, case: &Case, mode: Mode, tmp: &TempDir) -> Vec<Proc> {
    let start = |role: Role, argv: &[String]| {
        let dir = tmp.join(format!("{mode:?}-{role:?}"));
        std::fs::create_dir_all(&dir).unwrap();
        let cmd = world.command(mode, argv, &dir);
        Started {
            role,
            argv: argv.to_vec(),
            command: format!("{cmd:?}"),
            running: world.start(cmd),
            dir,
        }
    };
    let timeout = match world.backend {
        Backend::Kernel => PROCESS_TIMEOUT_KERNEL,
        _ => PROCESS_TIMEOUT,
    };
    let port = free_port();
    let mut server = case
        .server
        .as_ref()
        .map(|a| start(Role::Server, &world.argv(a, port)));
    if let Some(s) = server.as_mut() {
        if case.server.as_ref().is_some_and(|a| a.contains("{port}")) {
            world.wait_listening(&mut s.running, port);
        } else {
            // udaddy's port is fixed (and it fails before binding it here).
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let role = if server.is_some() {
        Role::Client
    } else {
        Role::Alone
    };
    let mut procs = vec![start(role, &world.argv(&case.client, port)).end(timeout, false)];
    if let Some(mut s) = server {
        procs.push(if case.server_stays {
            // Stop it once what it forked for the client has exited; a fork
            // still there at the deadline counts as a hang.
            let deadline = Instant::now() + timeout;
            while !s.running.children().is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let stuck = !s.running.children().is_empty();
            // A server that ended on its own is judged like any process.
            let ended_itself = s.running.exited();
            s.running.kill_all();
            let mut p = s.end(timeout, !ended_itself);
            if stuck {
                p.ended.status = None;
            }
            p
        } else {
            s.end(timeout, false)
        });
    }
    procs
}

/// Decimal and hex numbers as `#`, blanks squeezed, line ends trimmed
/// (perftest pads its columns to the width of the figures).
fn shape(text: &str) -> String {
    text.lines()
        // perftest calibrates its cycle counter against the clock; on a
        // loaded machine it says so on stderr and prints its latencies as
        // inf/-nan: a property of the machine, not of the shim.
        .filter(|l| !l.starts_with("Correlation coefficient r^2"))
        .map(|l| format!("{}\n", shape_line(&not_a_number_as_number(l)).trim_end()))
        .collect()
}

/// `inf`, `-nan` and the like as words of their own become `0`.
fn not_a_number_as_number(line: &str) -> String {
    line.split_inclusive(char::is_whitespace)
        .map(|piece| {
            let word = piece.trim_end();
            match word {
                "inf" | "-inf" | "nan" | "-nan" => piece.replacen(word, "0", 1),
                _ => piece.to_string(),
            }
        })
        .collect()
}

fn shape_line(text: &str) -> String {
    let mut out = String::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'0' && i + 2 < b.len() && b[i + 1] == b'x' && b[i + 2].is_ascii_hexdigit() {
            i += 2;
            while i < b.len() && b[i].is_ascii_hexdigit() {
                i += 1;
            }
            out.push('#');
        } else if b[i].is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            out.push('#');
        } else if b[i] == b' ' || b[i] == b'\t' {
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            out.push(' ');
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn comparable(compare: Compare, text: &str) -> String {
    match compare {
        Compare::Exact => text.to_string(),
        Compare::ExactBut(skip) => text
            .lines()
            .filter(|l| !skip.iter().any(|s| l.contains(s)))
            .map(|l| format!("{l}\n"))
            .collect(),
        Compare::Shape => shape(text),
        Compare::Labels => text
            .lines()
            .map(|l| format!("{}\n", l.split('=').next().unwrap().trim()))
            .collect(),
        Compare::Status => String::new(),
    }
}

/// Everything wrong with one process run under the shim, compared with the
/// same process of the baseline.
fn judge(backend: Backend, mode: Mode, case: &Case, p: &Proc, base: &Proc) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(status) = p.ended.status else {
        return vec!["hung (killed at the timeout)".into()];
    };
    let base_status = base.ended.status.unwrap();
    if let Some(sig) = signal(&status).filter(|_| !p.killed_by_us) {
        bad.push(format!("killed by signal {sig} (a crash)"));
    }
    if status.code() != base_status.code() || signal(&status) != signal(&base_status) {
        bad.push(format!("ended {status}, the baseline {base_status}"));
    }
    // Under the launcher, its summary follows the program's stderr.
    let stderr = match mode.launcher() {
        true => without_launcher_lines(&p.ended.stderr),
        false => p.ended.stderr.clone(),
    };
    if mode.launcher() && !p.ended.stderr.lines().any(|l| l.starts_with("ibv-shim: ")) {
        bad.push("the launcher printed no summary".into());
    }
    for (what, ours, theirs) in [
        ("stdout", &p.ended.stdout, &base.ended.stdout),
        ("stderr", &stderr, &base.ended.stderr),
    ] {
        if comparable(case.compare, ours) != comparable(case.compare, theirs) {
            bad.push(format!(
                "{what} differs from the baseline's ({:?}); the baseline printed:\n{}",
                case.compare,
                indent(theirs)
            ));
        }
    }
    for line in p.log.lines() {
        if line.contains(" ERROR ") || line.contains("panic") || line.contains("internal error") {
            bad.push(format!("the shim logged: {line}"));
        }
    }
    let seen = Seen {
        backend,
        role: p.role,
        code: status.code(),
        stdout: &p.ended.stdout,
        stderr: &p.ended.stderr,
    };
    let expect = match (case.expect)(&seen) {
        Ok(e) => e,
        Err(e) => {
            bad.push(e);
            return bad;
        }
    };
    if p.reports.len() > 1 || (expect.reports && p.reports.is_empty()) {
        bad.push(format!(
            "{} JSON leak reports, expected {}",
            p.reports.len(),
            if expect.reports { "one" } else { "at most one" }
        ));
    }
    let mut leaked: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in &p.reports {
        // A forking server reports from its child; everything else from
        // the very process the test started (exec'd through the test bed's
        // wrappers, the pid is the same).
        if !case.server_stays && !mode.launcher() && r.pid != u64::from(p.pid) {
            bad.push(format!("report of pid {}, the program is {}", r.pid, p.pid));
        }
        let program = Path::new(&r.program).file_name().unwrap_or_default();
        if !program.to_string_lossy().starts_with(p.name()) {
            bad.push(format!("report names the program {:?}", r.program));
        }
        for o in &r.objects {
            let module = Path::new(&o.module).file_name().unwrap_or_default();
            let module = module.to_string_lossy();
            if o.suppressed {
                // libfabric's verbs provider's address lists (built-in
                // suppression `addrinfo:libfabric.so*`).
                let libfabric = o.kind == "addrinfo" && module.starts_with("libfabric");
                if !module.starts_with("librdmacm") && !libfabric {
                    bad.push(format!(
                        "{} from {} is suppressed: only what librdmacm (or libfabric's \
                         address lists) keeps may be",
                        o.kind, o.module
                    ));
                }
                continue;
            }
            if module != p.name() {
                bad.push(format!(
                    "leak of a {} created in {}, not by the program itself",
                    o.kind, o.module
                ));
            }
            *leaked.entry((o.kind.clone(), o.found.clone())).or_default() += 1;
        }
    }
    let matches = |want: &Vec<(&str, &str, usize)>| {
        let want: BTreeMap<(String, String), usize> = want
            .iter()
            .map(|(k, f, n)| ((k.to_string(), f.to_string()), *n))
            .collect();
        want == leaked
    };
    if !expect.leaks.iter().any(matches) {
        bad.push(format!(
            "leaks reported (kind, found at: count) {leaked:?}; the program's true leaks on this path are {}",
            expect
                .leaks
                .iter()
                .map(|l| format!("{l:?}"))
                .collect::<Vec<_>>()
                .join(" or ")
        ));
    }
    for text in expect.log_has {
        if !p.log.contains(text) {
            bad.push(format!("the shim's log does not say {text:?}"));
        }
    }
    bad
}

/// The launcher's own lines (`ibv-shim: ...`) taken out.
fn without_launcher_lines(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("ibv-shim: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Runs `name` on `backend` without the shim, preloaded and as drop-in,
/// and fails with every difference and wrong report found.
fn check(backend: Backend, name: &'static str) {
    let vm = match backend {
        Backend::Kernel => match kernel_vm() {
            Some(vm) => Some(vm),
            None => return, // opted out, and counted as skipped
        },
        _ => None,
    };
    let case = case(name, backend);
    let name = case.name;
    let world = World::new(backend, &case, vm);
    let tmp = TempDir::new(&format!("third-party-{name}"));
    let base = settled(&world, &case, Mode::Baseline, &tmp);
    let show = |procs: &[Proc]| procs.iter().map(Proc::show).collect::<String>();
    for p in &base {
        let problem = match p.ended.status {
            None => Some("hung".to_string()),
            Some(s) if signal(&s).is_some() && !p.killed_by_us => Some(format!("crashed ({s})")),
            _ if p.ended.stderr.contains("symbol lookup error") => {
                Some("cannot even be loaded".to_string())
            }
            _ => None,
        };
        if let Some(problem) = problem {
            panic!(
                "{name} on {backend:?} WITHOUT the shim {problem}: the backend cannot run it \
                 (nothing about the shim is judged)\n{}",
                show(&base)
            );
        }
    }
    let mut failures = String::new();
    for mode in shim_modes(backend, &case) {
        let runs = settled(&world, &case, mode, &tmp);
        let mut here = String::new();
        for (p, b) in runs.iter().zip(&base) {
            let mut bad = judge(backend, mode, &case, p, b);
            if mode.all_features() {
                bad.extend(all_features::judge(p));
            }
            for f in bad {
                here += &format!("- {:?} {}: {f}\n", p.role, p.name());
            }
        }
        if mode.all_features() && backend == Backend::Sim {
            for f in all_features::judge_data_path(&runs, case.flushes) {
                here += &format!("- the pair: {f}\n");
            }
        }
        if !here.is_empty() {
            failures += &format!(
                "=== {name} on {backend:?}, shim {mode:?}:\n{here}--- what ran:\n{}",
                show(&runs)
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{failures}=== the baseline (no shim):\n{}",
        show(&base)
    );
}

/// One test per case and backend: `on_the_sim::qperf_rc_bw`, ...; the
/// cases after `sim only:` need a device that opens (UCX's transfers), so
/// they run on the sim only; those after `sim and kernel:` need a
/// connection manager, which the test bed has not.
macro_rules! cases {
    ($($name:ident),* $(,)?;
     not on the kernel: $($nk:ident),* $(,)?;
     sim only: $($sim:ident),* $(,)?;
     sim and kernel: $($sk:ident),* $(,)?;
     kernel only: $($k:ident),* $(,)?) => {
        mod on_the_sim {
            $( #[test] fn $name() { super::check(super::Backend::Sim, stringify!($name)) } )*
            $( #[test] fn $nk() { super::check(super::Backend::Sim, stringify!($nk)) } )*
            $( #[test] fn $sim() { super::check(super::Backend::Sim, stringify!($sim)) } )*
            $( #[test] fn $sk() { super::check(super::Backend::Sim, stringify!($sk)) } )*
        }
        mod on_the_testbed {
            $( #[test] fn $name() { super::check(super::Backend::Testbed, stringify!($name)) } )*
            $( #[test] fn $nk() { super::check(super::Backend::Testbed, stringify!($nk)) } )*
        }
        mod on_the_kernel {
            $( #[test] fn $name() { super::check(super::Backend::Kernel, stringify!($name)) } )*
            $( #[test] fn $sk() { super::check(super::Backend::Kernel, stringify!($sk)) } )*
            $( #[test] fn $k() { super::check(super::Backend::Kernel, stringify!($k)) } )*
        }
    };
}

cases! {
    ibv_devices,
    ibv_devinfo,
    pyverbs,
    fi_info,
    ucx_info,
    ibv_rc_pingpong,
    ibv_uc_pingpong,
    ibv_ud_pingpong,
    ibv_srq_pingpong,
    ibv_xsrq_pingpong,
    ib_send_bw,
    ib_write_bw,
    ib_read_bw,
    ib_atomic_bw,
    ib_send_lat,
    ib_write_lat,
    ib_read_lat,
    qperf_rc_bw,
    qperf_rc_lat,
    rping,
    ucmatose,
    udaddy,
    rdma_server;
    not on the kernel:
    // Made for the sim's inline limit (512 bytes); rxe's differs.
    ib_send_bw_failed_qp,
    // On rxe qperf's UD tests need the connection manager (RoCE needs a
    // GRH), and `-cm1 ud_lat` fails there without any shim (exit 1).
    qperf_ud_lat;
    sim only:
    ucx_tag_lat_rc,
    ucx_put_bw_rc,
    ucx_tag_bw_ud,
    ucx_tag_lat_roce,
    ucx_tag_bw_rndv_rc,
    ucx_get_rc,
    ucx_fadd_rc,
    // The sim's librdmacm; not yet run on the real kernel's VM by this test.
    rdma_xserver,
    mckey,
    ib_write_bw_rdma_cm,
    // (On the emulated VM it died of SIGSEGV by itself, without any shim,
    // once in a suite's run.)
    ib_read_lat_rdma_cm,
    // On real rxe in the VM this fails without any shim.
    fi_pingpong_rdm;
    sim and kernel:
    ib_send_bw_rdma_cm,
    fi_pingpong_msg,
    rstream,
    riostream;
    kernel only:
    ucx_get_rc_rxe,
    ucx_fadd_rc_rxe,
}
