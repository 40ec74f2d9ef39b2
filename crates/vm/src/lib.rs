//! A real kernel RDMA stack on any Linux machine: Debian's own kernel
//! (`kernel`) booted in a QEMU micro-VM over the host's own userland, with
//! Soft-RoCE (`rdma_rxe`, device `rxe0`) and the RDMA connection manager
//! (`rdma_ucm`) loaded. No root on the host beyond what QEMU needs.
//!
//! - `kernel`: finding, or fetching once with the machine's package tools,
//!   the unpacked kernel package.
//! - `initramfs`: stage 1 (busybox: 9p, overlay, switch_root) and stage 2
//!   (`guest/stage2`: modules, network, rxe0, shares, the job agent).
//! - this file: booting ([`Vm::boot`]) and running jobs ([`Vm::spawn`]).
//!
//! The guest sees the host's root read-only (9p) under a tmpfs overlay, so
//! every host path, the project's binaries among them, is there as it is on
//! the host; the directories in [`Config::shares`] are mounted writable at
//! their own paths. A job is a command line with its environment and
//! directory, written as a shell script into a private jobs directory
//! shared with the guest; a line on a virtio-serial control port starts it;
//! its output and status come back as files there. TCG by default: KVM
//! guests hung after the BIOS on the machines this was built on.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

mod initramfs;
pub mod kernel;

pub use kernel::Kernel;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Why a VM could not be had or a job not run.
#[derive(Debug)]
pub enum Error {
    /// A piece is missing on this machine (QEMU, busybox, kmod, the kernel
    /// package, the network to fetch it); the text says which and how to
    /// get it.
    Missing(String),
    /// The VM or a job failed; the text says how (with the guest's console).
    Failed(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Missing(s) => write!(f, "missing: {s}"),
            Error::Failed(s) => write!(f, "{s}"),
        }
    }
}

impl std::error::Error for Error {}

pub(crate) fn missing(s: String) -> Error {
    Error::Missing(s)
}

/// How the VM is accelerated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// Software emulation: works everywhere, slower.
    Tcg,
    /// KVM: only where a guest is known to boot (`IBV_SHIM_VM_ACCEL=kvm`).
    Kvm,
}

/// What a VM is booted with.
#[derive(Clone, Debug)]
pub struct Config {
    /// Host directories mounted writable at their own paths in the guest.
    pub shares: Vec<PathBuf>,
    pub memory_mib: u32,
    pub cpus: u32,
    pub accel: Accel,
    /// How long the boot (to rxe0 up) may take.
    pub boot_timeout: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            shares: Vec::new(),
            memory_mib: 2048,
            cpus: 2,
            accel: match std::env::var("IBV_SHIM_VM_ACCEL").as_deref() {
                Ok("kvm") => Accel::Kvm,
                _ => Accel::Tcg,
            },
            boot_timeout: Duration::from_secs(
                std::env::var("IBV_SHIM_VM_BOOT_TIMEOUT")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(300),
            ),
        }
    }
}

/// The guest's address on its network device (rxe0's IPv4-mapped GID,
/// index 1). The guest's network is QEMU's user network with `restrict=on`:
/// nothing leaves the guest.
pub const GUEST_IP: &str = "10.0.2.15";

/// A booted VM. Jobs may run at once from many threads. Dropping it powers
/// the guest off; a process that exits without dropping it (a `static`)
/// takes QEMU with it (`PR_SET_PDEATHSIG` from a thread that lives as long
/// as the process).
pub struct Vm {
    qemu: Mutex<Child>,
    ctl: Mutex<UnixStream>,
    dir: PathBuf,
    next: AtomicU64,
    boot_time: Duration,
    kernel: Kernel,
}

/// A command to run in the guest.
#[derive(Clone, Debug)]
pub struct Job {
    pub argv: Vec<OsString>,
    /// Set on top of the guest's own `PATH` and `HOME`.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    /// Killed (its whole process group) after this long.
    pub timeout: Duration,
}

impl Job {
    pub fn new<I, S>(argv: I) -> Job
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Job {
            argv: argv.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: PathBuf::from("/"),
            timeout: Duration::from_secs(120),
        }
    }

    pub fn env(mut self, k: impl Into<OsString>, v: impl Into<OsString>) -> Job {
        self.env.push((k.into(), v.into()));
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Job {
        self.cwd = dir.into();
        self
    }

    pub fn timeout(mut self, t: Duration) -> Job {
        self.timeout = t;
        self
    }

    /// The job as a shell script.
    fn script(&self) -> Vec<u8> {
        let mut s = Vec::new();
        for (k, v) in &self.env {
            s.extend_from_slice(b"export ");
            s.extend_from_slice(k.as_bytes());
            s.push(b'=');
            quote(&mut s, v.as_bytes());
            s.push(b'\n');
        }
        // The pid the program will have (the shell execs it).
        s.extend_from_slice(b"echo $$ > \"${0%/*}/program.pid\"\n");
        s.extend_from_slice(b"cd ");
        quote(&mut s, self.cwd.as_os_str().as_bytes());
        s.extend_from_slice(b" || exit 126\nexec");
        for a in &self.argv {
            s.push(b' ');
            quote(&mut s, a.as_bytes());
        }
        s.push(b'\n');
        s
    }
}

/// `'...'` with every `'` as `'\''`.
fn quote(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'\'');
    for &b in s {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
}

/// A job's result.
#[derive(Clone, Debug)]
pub struct Output {
    /// The shell's status: the exit code, or 128 + the signal's number.
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Killed for running past its timeout.
    pub timed_out: bool,
}

/// A job under way.
pub struct Running<'a> {
    vm: &'a Vm,
    id: u64,
    dir: PathBuf,
    timeout: Duration,
    started: Instant,
}

impl Vm {
    /// Boots a VM: the kernel (found or fetched), the initramfs, QEMU; waits
    /// until the guest says rxe0 is up.
    pub fn boot(cfg: &Config) -> Result<Vm, Error> {
        let started = Instant::now();
        let qemu_bin = which("qemu-system-x86_64").ok_or_else(|| {
            missing("qemu-system-x86_64 is not on PATH (apt-get install qemu-system-x86)".into())
        })?;
        let kernel = Kernel::find()?;
        for s in &cfg.shares {
            if !s.is_absolute() || !s.is_dir() || s == Path::new("/") {
                return Err(Error::Failed(format!(
                    "{}: a share must be an absolute directory other than /",
                    s.display()
                )));
            }
        }
        let dir = run_dir()?;
        let jobs_in_guest = "/run/ibv-shim-vm/jobs";
        let mut shares = String::new();
        for (i, s) in cfg.shares.iter().enumerate() {
            shares.push_str(&format!("share{i} {}\n", s.display()));
        }
        let mut conf = Vec::new();
        for (k, v) in [
            ("KVER", kernel.release.as_bytes()),
            ("MODULES", kernel.modules().as_os_str().as_bytes()),
            ("SHARES", shares.as_bytes()),
            ("JOBS", jobs_in_guest.as_bytes()),
            ("GUEST_IP", GUEST_IP.as_bytes()),
        ] {
            conf.extend_from_slice(k.as_bytes());
            conf.push(b'=');
            quote(&mut conf, v);
            conf.push(b'\n');
        }
        let initrd = dir.join("initrd.cpio");
        initramfs::write(&initrd, &kernel, &String::from_utf8_lossy(&conf))?;
        let sock = dir.join("ctl.sock");
        let console = dir.join("console.log");
        let jobs = dir.join("jobs");
        std::fs::create_dir(&jobs)
            .map_err(|e| Error::Failed(format!("{}: {e}", jobs.display())))?;

        let mut cmd = Command::new(qemu_bin);
        cmd.args([
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
            "-machine",
            "q35",
        ])
        .arg("-accel")
        .arg(match cfg.accel {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        })
        .arg("-smp")
        .arg(cfg.cpus.to_string())
        .arg("-m")
        .arg(cfg.memory_mib.to_string())
        .arg("-kernel")
        .arg(kernel.vmlinuz())
        .arg("-initrd")
        .arg(&initrd)
        .args(["-append", "console=ttyS0 quiet loglevel=3 panic=-1"])
        .arg("-serial")
        .arg(path_arg("file:", &console))
        .args([
            "-netdev",
            "user,id=n0,restrict=on",
            "-device",
            "virtio-net-pci,netdev=n0,romfile=",
        ])
        .args(["-device", "virtio-serial-pci,id=vs"])
        .arg("-chardev")
        .arg(path_arg("socket,id=ctl,server=on,wait=off,path=", &sock))
        .args([
            "-device",
            "virtserialport,bus=vs.0,chardev=ctl,name=ibvshim.ctl",
        ])
        .arg("-virtfs")
        .arg("local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap")
        .arg("-virtfs")
        .arg(path_arg(
            "local,mount_tag=jobs,security_model=none,multidevs=remap,path=",
            &jobs,
        ));
        for (i, s) in cfg.shares.iter().enumerate() {
            cmd.arg("-virtfs").arg(path_arg(
                &format!("local,mount_tag=share{i},security_model=none,multidevs=remap,path="),
                s,
            ));
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut qemu = spawn_bound_to_process(cmd)?;

        // Connect to the control port, then wait for the guest's "ready".
        let deadline = started + cfg.boot_timeout;
        let ctl = loop {
            if let Ok(s) = UnixStream::connect(&sock) {
                break s;
            }
            if let Ok(Some(st)) = qemu.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = qemu.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return Err(Error::Failed(format!(
                    "qemu exited with {st} before the guest booted: {}",
                    err.trim()
                )));
            }
            if Instant::now() > deadline {
                let _ = qemu.kill();
                return Err(Error::Failed("qemu's control socket never appeared".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut reader = ctl.try_clone().map_err(|e| Error::Failed(e.to_string()))?;
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let _ = qemu.kill();
                return Err(Error::Failed(format!(
                    "the guest did not come up within {:?}; its console:\n{}",
                    cfg.boot_timeout,
                    tail(&console)
                )));
            }
            let _ = reader.set_read_timeout(Some(left.min(Duration::from_secs(1))));
            match reader.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => {
                    let text = String::from_utf8_lossy(&line).to_string();
                    if text == "ready" {
                        break;
                    }
                    if let Some(why) = text.strip_prefix("failed ") {
                        let _ = qemu.kill();
                        return Err(Error::Failed(format!(
                            "the guest's set-up failed: {why}; its console:\n{}",
                            tail(&console)
                        )));
                    }
                    line.clear();
                }
                Ok(1) => line.push(byte[0]),
                Ok(_) => {
                    let _ = qemu.kill();
                    return Err(Error::Failed(format!(
                        "the guest closed its control port; its console:\n{}",
                        tail(&console)
                    )));
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if let Ok(Some(st)) = qemu.try_wait() {
                        return Err(Error::Failed(format!(
                            "qemu exited with {st} during boot; the console:\n{}",
                            tail(&console)
                        )));
                    }
                }
                Err(e) => return Err(Error::Failed(format!("control port: {e}"))),
            }
        }
        let _ = reader.set_read_timeout(None);
        Ok(Vm {
            qemu: Mutex::new(qemu),
            ctl: Mutex::new(ctl),
            dir,
            next: AtomicU64::new(1),
            boot_time: started.elapsed(),
            kernel,
        })
    }

    /// From QEMU's start to rxe0 up in the guest.
    pub fn boot_time(&self) -> Duration {
        self.boot_time
    }

    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Starts a job.
    pub fn spawn(&self, job: &Job) -> Result<Running<'_>, Error> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join("jobs").join(id.to_string());
        let fail = |e: std::io::Error| Error::Failed(format!("job {id}: {e}"));
        std::fs::create_dir(&dir).map_err(fail)?;
        std::fs::write(dir.join("cmd"), job.script()).map_err(fail)?;
        std::fs::write(
            dir.join("timeout"),
            format!("{}\n", job.timeout.as_secs_f64().ceil() as u64),
        )
        .map_err(fail)?;
        self.send(&format!("run {id}\n"))?;
        Ok(Running {
            vm: self,
            id,
            dir,
            timeout: job.timeout,
            started: Instant::now(),
        })
    }

    /// Runs a job to its end.
    pub fn run(&self, job: &Job) -> Result<Output, Error> {
        self.spawn(job)?.wait()
    }

    fn send(&self, line: &str) -> Result<(), Error> {
        let mut ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
        ctl.write_all(line.as_bytes()).map_err(|e| {
            Error::Failed(format!(
                "the VM's control port: {e}; its console:\n{}",
                tail(&self.dir.join("console.log"))
            ))
        })
    }

    /// Whether QEMU still runs.
    fn alive(&self) -> bool {
        let mut q = self.qemu.lock().unwrap_or_else(|p| p.into_inner());
        matches!(q.try_wait(), Ok(None))
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.send("quit\n");
        let mut q = self.qemu.lock().unwrap_or_else(|p| p.into_inner());
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = q.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = q.kill();
        let _ = q.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Running<'_> {
    /// The job's result, if it has ended.
    pub fn try_wait(&self) -> Result<Option<Output>, Error> {
        let Ok(rc) = std::fs::read_to_string(self.dir.join("rc")) else {
            if !self.vm.alive() {
                return Err(Error::Failed(format!(
                    "the VM died while job {} ran; its console:\n{}",
                    self.id,
                    tail(&self.vm.dir.join("console.log"))
                )));
            }
            return Ok(None);
        };
        let status: i32 = rc.trim().parse().unwrap_or(-1);
        let read = |n: &str| std::fs::read(self.dir.join(n)).unwrap_or_default();
        Ok(Some(Output {
            // `timeout -s KILL` gives 137, as a kill by SIGKILL does.
            timed_out: status == 137 && self.started.elapsed() >= self.timeout,
            status,
            stdout: read("out"),
            stderr: read("err"),
        }))
    }

    /// Waits for the end: the guest kills the job at its timeout; the host
    /// gives up 30 s later (a guest too slow even for that).
    pub fn wait(self) -> Result<Output, Error> {
        self.wait_streaming(None)
    }

    /// As [`Running::wait`], copying the job's output to `sink` (stdout,
    /// stderr) as it comes.
    pub fn wait_streaming(
        self,
        mut sink: Option<(&mut dyn Write, &mut dyn Write)>,
    ) -> Result<Output, Error> {
        let mut sent = [0usize; 2];
        let give_up = self.timeout + Duration::from_secs(30);
        loop {
            let done = self.try_wait()?;
            if let Some((out, err)) = sink.as_mut() {
                self.copy_new("out", &mut sent[0], &mut **out);
                self.copy_new("err", &mut sent[1], &mut **err);
            }
            if let Some(o) = done {
                return Ok(o);
            }
            if self.started.elapsed() > give_up {
                self.kill();
                return Err(Error::Failed(format!(
                    "job {} did not end within {give_up:?}",
                    self.id
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Writes what file `name` holds past `*sent` to `w`.
    fn copy_new(&self, name: &str, sent: &mut usize, w: &mut dyn Write) {
        if let Ok(data) = std::fs::read(self.dir.join(name)) {
            if data.len() > *sent {
                let _ = w.write_all(&data[*sent..]);
                let _ = w.flush();
                *sent = data.len();
            }
        }
    }

    /// The program's pid in the guest, once its shell has started.
    pub fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.join("program.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Kills the job's whole process group.
    pub fn kill(&self) {
        let _ = self.vm.send(&format!("kill {}\n", self.id));
    }
}

/// A fresh private directory for one VM: `<cache>/run/<pid>.<n>`, mode 0700;
/// the ones left by processes that are gone are removed first.
fn run_dir() -> Result<PathBuf, Error> {
    static N: AtomicU64 = AtomicU64::new(0);
    let base = kernel::cache_dir()?.join("run");
    std::fs::create_dir_all(&base)
        .map_err(|e| Error::Failed(format!("{}: {e}", base.display())))?;
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let name = e.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.split('.').next())
                .and_then(|p| p.parse::<i32>().ok());
            if let Some(pid) = pid {
                // SAFETY: kill with signal 0 only asks whether the process
                // exists; it sends nothing.
                let gone = unsafe { libc::kill(pid, 0) } != 0;
                if pid != std::process::id() as i32 && gone {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }
    let dir = base.join(format!(
        "{}.{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| Error::Failed(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

/// Spawns QEMU from a thread that lives as long as the process, with
/// `PR_SET_PDEATHSIG` (which fires when the spawning *thread* ends): QEMU
/// dies with the process, however it ends, and not before.
fn spawn_bound_to_process(mut cmd: Command) -> Result<Child, Error> {
    // SAFETY: the closure runs in the child between fork and exec and only
    // makes async-signal-safe calls (prctl, getppid).
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 || libc::getppid() == 1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("ibv-shim-vm".into())
        .spawn(move || {
            let _ = tx.send(cmd.spawn());
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| Error::Failed(format!("thread: {e}")))?;
    rx.recv()
        .map_err(|e| Error::Failed(e.to_string()))?
        .map_err(|e| Error::Failed(format!("qemu-system-x86_64: {e}")))
}

/// `prefix` + `path`, with QEMU's option separator `,` doubled.
fn path_arg(prefix: &str, path: &Path) -> OsString {
    let mut s = OsString::from(prefix);
    s.push(std::ffi::OsStr::from_bytes(
        &path
            .as_os_str()
            .as_bytes()
            .iter()
            .flat_map(|&b| if b == b',' { vec![b, b] } else { vec![b] })
            .collect::<Vec<u8>>(),
    ));
    s
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .as_bytes()
        .split(|&b| b == b':')
        .map(|d| Path::new(std::ffi::OsStr::from_bytes(d)).join(name))
        .find(|p| p.is_file())
}

/// The last lines of the guest's console, for an error message.
fn tail(console: &Path) -> String {
    let text = std::fs::read(console).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_a_script_with_every_word_quoted() {
        let j = Job::new(["prog", "it's"]).env("A", "x y").cwd("/w d");
        assert_eq!(
            String::from_utf8(j.script()).unwrap(),
            "export A='x y'\necho $$ > \"${0%/*}/program.pid\"\ncd '/w d' || exit 126\nexec 'prog' 'it'\\''s'\n"
        );
    }

    #[test]
    fn commas_in_paths_are_doubled_for_qemu() {
        assert_eq!(
            path_arg("file:", Path::new("/a,b")),
            OsString::from("file:/a,,b")
        );
    }
}
