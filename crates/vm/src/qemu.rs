//! The QEMU process and its console: the command line a VM boots with,
//! QEMU spawned so that it dies with this process, the wait for the
//! guest's "ready" on the control port, and the console's last lines for
//! error messages.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Accel, Config, Error, Kernel};

/// Where a VM's pieces are on the host.
pub(crate) struct Files<'a> {
    pub initrd: &'a Path,
    /// The guest's serial console, written by QEMU.
    pub console: &'a Path,
    /// The control port's socket (virtio-serial), QEMU the server.
    pub sock: &'a Path,
    /// The jobs directory shared with the guest.
    pub jobs: &'a Path,
}

/// QEMU's command line: a q35 micro-VM with no devices but a user network
/// that lets nothing out, the control port, the host's root read-only and
/// the jobs directory and shares writable (9p).
pub(crate) fn command(qemu_bin: PathBuf, cfg: &Config, kernel: &Kernel, f: &Files) -> Command {
    let (initrd, console, sock, jobs) = (f.initrd, f.console, f.sock, f.jobs);
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
    .arg(initrd)
    .args(["-append", "console=ttyS0 quiet loglevel=3 panic=-1"])
    .arg("-serial")
    .arg(path_arg("file:", console))
    .args([
        "-netdev",
        "user,id=n0,restrict=on",
        "-device",
        "virtio-net-pci,netdev=n0,romfile=",
    ])
    .args(["-device", "virtio-serial-pci,id=vs"])
    .arg("-chardev")
    .arg(path_arg("socket,id=ctl,server=on,wait=off,path=", sock))
    .args([
        "-device",
        "virtserialport,bus=vs.0,chardev=ctl,name=ibvshim.ctl",
    ])
    .arg("-virtfs")
    .arg("local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap")
    .arg("-virtfs")
    .arg(path_arg(
        "local,mount_tag=jobs,security_model=none,multidevs=remap,path=",
        jobs,
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
    cmd
}

/// Connects to the control port, then waits for the guest's "ready" line
/// (QEMU is killed on a failure or at `deadline`).
pub(crate) fn wait_ready(
    qemu: &mut Child,
    sock: &Path,
    console: &Path,
    deadline: Instant,
    cfg: &Config,
) -> Result<UnixStream, Error> {
    let ctl = loop {
        if let Ok(s) = UnixStream::connect(sock) {
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
                tail(console)
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
                        tail(console)
                    )));
                }
                line.clear();
            }
            Ok(1) => line.push(byte[0]),
            Ok(_) => {
                let _ = qemu.kill();
                return Err(Error::Failed(format!(
                    "the guest closed its control port; its console:\n{}",
                    tail(console)
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
                        tail(console)
                    )));
                }
            }
            Err(e) => return Err(Error::Failed(format!("control port: {e}"))),
        }
    }
    let _ = reader.set_read_timeout(None);
    Ok(ctl)
}

/// Spawns QEMU from a thread that lives as long as the process, with
/// `PR_SET_PDEATHSIG` (which fires when the spawning *thread* ends): QEMU
/// dies with the process, however it ends, and not before.
pub(crate) fn spawn_bound_to_process(mut cmd: Command) -> Result<Child, Error> {
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

pub(crate) fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .as_bytes()
        .split(|&b| b == b':')
        .map(|d| Path::new(std::ffi::OsStr::from_bytes(d)).join(name))
        .find(|p| p.is_file())
}

/// The last lines of the guest's console, for an error message.
pub(crate) fn tail(console: &Path) -> String {
    let text = std::fs::read(console).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commas_in_paths_are_doubled_for_qemu() {
        assert_eq!(
            path_arg("file:", Path::new("/a,b")),
            OsString::from("file:/a,,b")
        );
    }
}
