//! Where things are: the repository, the build, the sim, temporary directories.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

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
/// `target/<profile>/libibv_sim.so` (the software provider), and
/// `librdmacm.so.1`, one of `libibv_sim_cm.so` (its connection manager), to
/// put on `LD_LIBRARY_PATH` or name in `IBV_SHIM_LIBRARY`. It is `target/sim`.
pub fn sim_dir() -> PathBuf {
    let dir = target_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .join("sim");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    install_copy(&dir, "libibv_sim.so", "libibverbs");
    install_copy(&dir, "libibv_sim_cm.so", "librdmacm");
    dir
}

/// `dir/<soname>.so.1`, a copy of the built `name` when it differs, and the
/// development name `<soname>.so` linked to it (programs that try that name
/// first, as NCCL does, must find the sim under it too, as `make build`
/// arranges).
fn install_copy(dir: &Path, name: &str, soname: &str) {
    let built = built(name);
    let copy = dir.join(format!("{soname}.so.1"));
    let want = std::fs::read(&built).unwrap_or_else(|e| panic!("read {}: {e}", built.display()));
    if std::fs::read(&copy).ok().as_deref() != Some(&want[..]) {
        // Copy then rename: a process of another test may be loading the old one.
        let tmp = dir.join(format!(
            ".{soname}.so.1.{}.{}",
            std::process::id(),
            unique()
        ));
        std::fs::write(&tmp, &want).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
        std::fs::rename(&tmp, &copy)
            .unwrap_or_else(|e| panic!("rename {} -> {}: {e}", tmp.display(), copy.display()));
    }
    let dev = dir.join(format!("{soname}.so"));
    let target = format!("{soname}.so.1");
    if std::fs::read_link(&dev).ok().as_deref() != Some(Path::new(&target)) {
        let _ = std::fs::remove_file(&dev);
        let _ = std::os::unix::fs::symlink(&target, &dev);
    }
}

pub(super) fn built(name: &str) -> PathBuf {
    let path = target_dir().join(name);
    assert!(
        path.is_file(),
        "{} does not exist: build it first: make test",
        path.display()
    );
    path
}

pub(super) fn unique() -> usize {
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

/// A private drop-in directory: the shim as `libibverbs.so.1` and
/// `librdmacm.so.1`.
pub fn dropin(dir: &TempDir) -> PathBuf {
    let d = dir.join("dropin");
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(shim_so(), d.join("libibverbs.so.1")).unwrap();
    // The shim stands in for librdmacm too (the same file: one object).
    std::os::unix::fs::symlink(shim_so(), d.join("librdmacm.so.1")).unwrap();
    d
}

/// The sim as `libibverbs.so.1` (in [`sim_dir`]).
pub fn sim_lib() -> PathBuf {
    sim_dir().join("libibverbs.so.1")
}

/// `dirs` joined as a search path (`LD_LIBRARY_PATH`).
pub fn path_list(dirs: &[&Path]) -> std::ffi::OsString {
    std::env::join_paths(dirs).unwrap()
}
