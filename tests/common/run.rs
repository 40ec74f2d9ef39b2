//! Running programs: timeouts, clear panics, comparing runs.

use std::fmt::Write as _;
use std::io::Read;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// How long [`run`] waits before it calls a program hung and kills it.
pub const TIMEOUT: Duration = Duration::from_secs(120);
/// Runs `cmd` to completion (stdin /dev/null unless set) and returns its
/// output. Panics, showing the command line and whatever it printed, if it
/// cannot start, runs longer than [`TIMEOUT`] (killed: a hang), or is killed
/// by a signal (a crash). A non-zero exit status is returned, not a panic.
pub fn run(cmd: &mut Command) -> Output {
    let output = run_unchecked(cmd, TIMEOUT);
    if let Some(sig) = signal(&output.status) {
        panic!(
            "killed by signal {sig} (a crash)\n{}",
            describe(cmd, &output)
        );
    }
    output
}

/// Like [`run`], with another timeout, and a death by signal is returned.
pub fn run_unchecked(cmd: &mut Command, timeout: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let status = child.wait().expect("wait");
            let output = Output {
                status,
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            };
            panic!("hung: killed after {timeout:?}\n{}", describe(cmd, &output));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The signal that killed the process, if one did.
pub fn signal(status: &ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

/// The command line (with the environment it adds), status, stdout and
/// stderr, for a failure message.
pub fn describe(cmd: &Command, output: &Output) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "command: {cmd:?}");
    let _ = writeln!(s, "status: {}", output.status);
    let _ = writeln!(
        s,
        "stdout:\n{}",
        indent(&String::from_utf8_lossy(&output.stdout))
    );
    let _ = write!(
        s,
        "stderr:\n{}",
        indent(&String::from_utf8_lossy(&output.stderr))
    );
    s
}

fn indent(text: &str) -> String {
    if text.is_empty() {
        return "    (empty)\n".into();
    }
    text.lines().map(|l| format!("    | {l}\n")).collect()
}

/// Asserts that two runs printed byte-identical stdout and stderr and ended
/// the same way; the message shows both runs in full.
pub fn assert_same_output(
    what: &str,
    (cmd_a, a): (&Command, &Output),
    (cmd_b, b): (&Command, &Output),
) {
    let mut diffs = Vec::new();
    if a.status.code() != b.status.code() || signal(&a.status) != signal(&b.status) {
        diffs.push("exit status");
    }
    if a.stdout != b.stdout {
        diffs.push("stdout");
    }
    if a.stderr != b.stderr {
        diffs.push("stderr");
    }
    assert!(
        diffs.is_empty(),
        "{what}: the two runs differ in {}\n--- first run ---\n{}\n--- second run ---\n{}",
        diffs.join(", "),
        describe(cmd_a, a),
        describe(cmd_b, b)
    );
}

/// valgrind's arguments that count instructions and write no profile.
pub const CALLGRIND: [&str; 2] = ["--tool=callgrind", "--callgrind-out-file=/dev/null"];

/// The instructions callgrind counted in `output`, a run of `cmd` under
/// [`CALLGRIND`]; panics, showing the run, when it printed no count.
pub fn instructions_counted(cmd: &Command, output: &Output) -> u64 {
    stderr(output)
        .lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no instruction count\n{}", describe(cmd, output)))
}

/// Stdout as text (panics on invalid UTF-8).
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

/// Stderr as text (lossy).
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
/// Preloads the shim into `cmd` (`LD_PRELOAD=<shim_so>`).
pub fn preload_shim(cmd: &mut Command) -> &mut Command {
    cmd.env("LD_PRELOAD", shim_so())
}
