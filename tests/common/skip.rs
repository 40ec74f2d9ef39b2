//! A test whose dependency is missing (a tool, a package, a source tree, the
//! VM's kernel) fails and says what is missing, unless its group is opted
//! out by name in `IBV_SHIM_TEST_SKIP` (a comma-separated list, e.g.
//! `vm,pyverbs`). An opted-out test passes without running and leaves a line
//! `SKIPPED [group] test: why` on stderr and in `IBV_SHIM_SKIP_LOG` (a file
//! the suite's summary reads, so a skip is always counted and named).

use std::io::Write;

/// `Ok(v)` gives `Some(v)`. `Err(why)` (the dependency is missing, `why`
/// says what and how to get it) panics with `why`, or, with `group` opted
/// out, records the skip and gives `None`: the test returns at once.
pub fn require<T>(group: &str, found: Result<T, String>) -> Option<T> {
    let why = match found {
        Ok(v) => return Some(v),
        Err(why) => why,
    };
    if !opted_out(group) {
        panic!("{why}\n(missing dependency of test group '{group}'; set IBV_SHIM_TEST_SKIP={group} to skip this group and have it counted as skipped)");
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_string();
    let line = format!("SKIPPED [{group}] {test}: {why}\n");
    eprint!("{line}");
    if let Some(log) = std::env::var_os("IBV_SHIM_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
    None
}

/// Whether `group` is named in `IBV_SHIM_TEST_SKIP`.
pub fn opted_out(group: &str) -> bool {
    std::env::var("IBV_SHIM_TEST_SKIP")
        .map(|v| v.split(',').any(|g| g.trim() == group))
        .unwrap_or(false)
}
