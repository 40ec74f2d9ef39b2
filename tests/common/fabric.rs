//! ibv-sim fabrics for tests: a name of its own per test (so tests run in
//! parallel), and its shared segment removed when the test ends.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// An `IBV_SIM_FABRIC` name unique to this test process and call:
/// `<prefix>-<pid>-<tag>-<n>`.
pub fn fabric_name(prefix: &str, tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Where the sim keeps fabric `name`'s shared segment.
pub fn segment_path(name: &str) -> PathBuf {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    PathBuf::from(format!("/dev/shm/ibv-sim-{uid}-{name}"))
}

/// Removes the fabric's segment when dropped (also when a test fails).
pub struct FabricGuard(pub String);

impl Drop for FabricGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(segment_path(&self.0));
    }
}

/// Whether an id of the sim's librdmacm is bound to `port` on fabric
/// `name`: its socket in the fabric's rendezvous directory (the sim's
/// counterpart of a listening socket in /proc/net/tcp).
pub fn cm_listening(name: &str, port: u16) -> bool {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let suffix = format!("-{port}");
    std::fs::read_dir(format!("/dev/shm/ibv-sim-cm-{uid}-{name}")).is_ok_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(&suffix))
    })
}
