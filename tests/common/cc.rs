//! Building C: gcc with warnings as errors, cached by content.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use super::*;

/// Compiles `sources` with `gcc -Wall -Wextra -Werror -g -o OUT SOURCES ARGS`
/// (put libraries such as `-libverbs` in `args`) and returns the executable,
/// `<CARGO_TARGET_TMPDIR>/c/<name>-<hash of sources and args>-<pid>`.
/// Panics with gcc's output if it fails. Safe to call from parallel tests:
/// each program is built once per test process (a rebuild renamed over an
/// executable another test is running made that one's `/proc/PID/exe`
/// "(deleted)"), and the pid keeps test binaries running at once apart.
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
    let key = hasher.finish();
    static BUILT: OnceLock<Mutex<HashMap<u64, Arc<OnceLock<PathBuf>>>>> = OnceLock::new();
    let once = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_default()
        .clone();
    once.get_or_init(|| build(&dir, name, key, sources, args))
        .clone()
}

fn build(dir: &Path, name: &str, key: u64, sources: &[&Path], args: &[&str]) -> PathBuf {
    let out = dir.join(format!("{name}-{key:016x}-{}", std::process::id()));
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

/// Writes `text` as `<dir>/<name>.c` and compiles it with [`cc`] and `args`.
pub fn cc_text(dir: &TempDir, name: &str, text: &str, args: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, text).unwrap_or_else(|e| panic!("write {}: {e}", src.display()));
    cc(name, &[src.as_path()], args)
}
