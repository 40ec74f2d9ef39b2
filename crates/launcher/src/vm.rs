//! `ibv-shim --vm [options] -- PROGRAM`: the same run on a real kernel RDMA
//! stack (`ibv-shim-vm`: Debian's kernel with rxe0 in a QEMU micro-VM). The
//! launcher itself runs inside, with the other options and the caller's
//! environment, in the current directory (shared writable); its output is
//! streamed back and its exit status is the launcher's.

use std::ffi::OsString;
use std::time::Duration;

/// Variables of the caller's session that mean nothing in the guest.
const NOT_PASSED: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "PWD",
    "OLDPWD",
];

/// Takes `--vm` out of the options (before `--`): `Some(rest)` when it was
/// there.
pub fn strip(args: &[OsString]) -> Option<Vec<OsString>> {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let at = args[..end].iter().position(|a| a == "--vm")?;
    let mut rest = args.to_vec();
    rest.remove(at);
    Some(rest)
}

/// Runs the launcher with `args` (the options less `--vm`) in a VM.
pub fn run(args: Vec<OsString>) -> Result<i32, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let cwd = std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?;
    if cwd == std::path::Path::new("/") {
        return Err("--vm shares the current directory writable with the VM: run it from a directory other than /".into());
    }
    let cfg = ibv_shim_vm::Config {
        shares: vec![cwd.clone()],
        ..Default::default()
    };
    let vm = ibv_shim_vm::Vm::boot(&cfg).map_err(|e| format!("--vm: {e}"))?;
    let mut job = ibv_shim_vm::Job::new(std::iter::once(exe.into_os_string()).chain(args))
        .cwd(&cwd)
        .timeout(timeout());
    for (k, v) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| !NOT_PASSED.contains(&k) && k != "PATH")
        {
            job = job.env(k, v);
        }
    }
    // The caller's PATH, then the guest's system directories.
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    path.push(":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    job = job.env("PATH", path);
    let running = vm.spawn(&job).map_err(|e| format!("--vm: {e}"))?;
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    let done = running
        .wait_streaming(Some((&mut out, &mut err)))
        .map_err(|e| format!("--vm: {e}"))?;
    if done.timed_out {
        return Err(format!(
            "--vm: the program ran past IBV_SHIM_VM_TIMEOUT ({}s) and was killed",
            timeout().as_secs()
        ));
    }
    Ok(done.status)
}

/// `IBV_SHIM_VM_TIMEOUT` seconds, default a day.
fn timeout() -> Duration {
    Duration::from_secs(
        std::env::var("IBV_SHIM_VM_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(86_400),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn only_an_option_before_the_program_counts() {
        assert_eq!(
            strip(&os(&["--vm", "--quiet", "--", "p"])),
            Some(os(&["--quiet", "--", "p"]))
        );
        assert_eq!(strip(&os(&["--quiet", "--", "p", "--vm"])), None);
    }
}
