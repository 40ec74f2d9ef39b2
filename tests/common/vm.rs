//! The real kernel RDMA stack (`crates/vm`): Debian's kernel with Soft-RoCE
//! (rxe0) and rdma_cm in a QEMU micro-VM, booted once per test binary at
//! first use, with `CARGO_TARGET_TMPDIR` shared writable: every
//! [`TempDir`](super::TempDir) has the same path in the guest, and the
//! host's files (the build, the Debian packages' programs) are there
//! read-only. Test group `vm` (see `skip`): a missing QEMU, busybox, kmod
//! or kernel package fails the test, naming it, unless opted out.

use super::{opted_out, require};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use ibv_shim_vm::{Job, Output as VmOutput, Running as VmRunning, Vm, GUEST_IP};

/// The test binary's VM; `None` when the `vm` group is opted out.
pub fn kernel_vm() -> Option<&'static Vm> {
    if opted_out("vm") {
        return require("vm", Err("the real-kernel VM is opted out".into()));
    }
    static VM: OnceLock<Result<Vm, String>> = OnceLock::new();
    let vm = VM.get_or_init(|| {
        let cfg = ibv_shim_vm::Config {
            shares: vec![env!("CARGO_TARGET_TMPDIR").into()],
            ..Default::default()
        };
        std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR")).map_err(|e| e.to_string())?;
        let vm = Vm::boot(&cfg).map_err(|e| format!("the real-kernel VM: {e}"))?;
        eprintln!(
            "vm: booted {} in {:.1} s",
            vm.kernel().release,
            vm.boot_time().as_secs_f64()
        );
        Ok(vm)
    });
    match vm {
        Ok(vm) => Some(vm),
        Err(why) => require("vm", Err(why.clone())),
    }
}

/// Runs a shell command line in the guest as root and returns its output;
/// panics on a non-zero status.
pub fn vm_sh(vm: &Vm, script: &str) -> String {
    let out = vm
        .run(&Job::new(["sh", "-c", script]).timeout(Duration::from_secs(120)))
        .unwrap_or_else(|e| panic!("vm: sh -c {script:?}: {e}"));
    assert_eq!(
        out.status,
        0,
        "vm: sh -c {script:?} exited {}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits (in the guest) until something listens on TCP `port` there, or
/// `running` has ended, or `timeout` passed.
pub fn vm_wait_listening(vm: &Vm, running: &VmRunning<'_>, port: u16, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if matches!(running.try_wait(), Ok(Some(_)) | Err(_)) {
            return;
        }
        let out = vm.run(&Job::new([
            "sh",
            "-c",
            // A listening socket's line in /proc/net/tcp{,6}: local port in
            // hex, state 0A.
            &format!(
                "for i in $(seq 100); do grep -qE '^ *[0-9]+: [0-9A-F]+:{port:04X} [0-9A-F]+:0000 0A' /proc/net/tcp /proc/net/tcp6 && exit 0; sleep 0.05; done; exit 1"
            ),
        ]));
        if matches!(out, Ok(ref o) if o.status == 0) {
            return;
        }
    }
}

/// The children of guest process `pid`.
pub fn vm_children(vm: &Vm, pid: u32) -> Vec<u32> {
    vm.run(&Job::new([
        "sh",
        "-c",
        &format!("cat /proc/{pid}/task/*/children 2>/dev/null; true"),
    ]))
    .map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect()
    })
    .unwrap_or_default()
}
