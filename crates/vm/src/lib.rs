//! A real kernel RDMA stack on any Linux machine: Debian's own kernel
//! (`kernel`) booted in a QEMU micro-VM over the host's own userland, with
//! Soft-RoCE (`rdma_rxe`, device `rxe0`) and the RDMA connection manager
//! (`rdma_ucm`) loaded. No root on the host beyond what QEMU needs.
//!
//! - `kernel`: finding, or fetching once with the machine's package tools,
//!   the unpacked kernel package.
//! - `initramfs`: stage 1 (busybox: 9p, overlay, switch_root) and stage 2
//!   (`guest/stage2`: modules, network, rxe0, shares, the job agent).
//! - `qemu`: QEMU's command line, its process and its console.
//! - `job`: the guest command protocol ([`Vm::spawn`], [`Job`], [`Running`]).
//! - this file: the VM's configuration and booting it ([`Vm::boot`]).
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
mod job;
pub mod kernel;
mod qemu;

pub use job::{Job, Output, Running};
pub use kernel::Kernel;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use job::quote;
use qemu::which;

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

        let files = qemu::Files {
            initrd: &initrd,
            console: &console,
            sock: &sock,
            jobs: &jobs,
        };
        let cmd = qemu::command(qemu_bin, cfg, &kernel, &files);
        let mut qemu = qemu::spawn_bound_to_process(cmd)?;
        let deadline = started + cfg.boot_timeout;
        let ctl = qemu::wait_ready(&mut qemu, &sock, &console, deadline, cfg)?;
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
