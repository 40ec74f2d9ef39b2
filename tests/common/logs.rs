//! Reading the shim's log.

use std::path::{Path, PathBuf};

/// One line of the shim's log:
/// `ibv-shim <secs>.<micros> <pid>:<tid> <LEVEL> <message>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub secs: u64,
    pub micros: u32,
    pub pid: u32,
    pub tid: u32,
    /// One of ERROR WARN INFO DEBUG TRACE.
    pub level: String,
    pub message: String,
}

impl LogLine {
    /// Parses one line (without its newline); `None` if it is not a
    /// well-formed log line.
    pub fn parse(line: &str) -> Option<LogLine> {
        let rest = line.strip_prefix("ibv-shim ")?;
        let (time, rest) = rest.split_once(' ')?;
        let (secs, micros) = time.split_once('.')?;
        if micros.len() != 6 {
            return None;
        }
        let (ids, rest) = rest.split_once(' ')?;
        let (pid, tid) = ids.split_once(':')?;
        let (level, message) = rest.split_once(' ')?;
        if !["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level) || message.is_empty() {
            return None;
        }
        Some(LogLine {
            secs: digits(secs)?,
            micros: digits(micros)? as u32,
            pid: digits(pid)? as u32,
            tid: digits(tid)? as u32,
            level: level.to_string(),
            message: message.to_string(),
        })
    }

    /// The function a call line is about: the message up to its first `(`,
    /// when that is an identifier (`ibv_open_device(device=...) = ...`).
    pub fn function(&self) -> Option<&str> {
        let (name, _) = self.message.split_once('(')?;
        (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            .then_some(name)
    }
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses shim log text; panics, naming `origin` and the line, on any line
/// that is not a well-formed log line (a torn or interleaved line).
pub fn parse_log(origin: &str, text: &str) -> Vec<LogLine> {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            LogLine::parse(line).unwrap_or_else(|| {
                panic!(
                    "{origin}:{}: not a well-formed shim log line: {line:?}",
                    i + 1
                )
            })
        })
        .collect()
}

/// Every line of every file in `dir` (e.g. the `log.%p` files of one run),
/// parsed with [`parse_log`], files in name order; empty if there is none.
pub fn read_logs(dir: &Path) -> Vec<LogLine> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let text =
                std::fs::read_to_string(f).unwrap_or_else(|e| panic!("read {}: {e}", f.display()));
            parse_log(&f.display().to_string(), &text)
        })
        .collect()
}

/// The shim's lines in some stderr output: those starting `ibv-shim `,
/// each of which must parse.
pub fn shim_lines_in(origin: &str, text: &str) -> Vec<LogLine> {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ibv-shim "))
        .collect();
    parse_log(origin, &lines.join("\n"))
}

/// The lines about calls of `function`.
pub fn log_lines_for<'a>(log: &'a [LogLine], function: &str) -> Vec<&'a LogLine> {
    log.iter()
        .filter(|l| l.function() == Some(function))
        .collect()
}

/// The whole log as text, for a failure message.
pub fn show_log(log: &[LogLine]) -> String {
    if log.is_empty() {
        return "    (no log lines)\n".into();
    }
    log.iter()
        .map(|l| {
            format!(
                "    | {}.{:06} {}:{} {} {}\n",
                l.secs, l.micros, l.pid, l.tid, l.level, l.message
            )
        })
        .collect()
}
/// The shim's environment for a debug log into `dir/log.%p`.
pub fn debug_log_env(dir: &Path) -> [(&'static str, String); 2] {
    [
        ("IBV_SHIM_LOG", "debug".to_string()),
        (
            "IBV_SHIM_LOG_FILE",
            dir.join("log.%p").display().to_string(),
        ),
    ]
}

/// The one line of `log` that contains `needle`, which must also contain
/// each of `parts`; panics, showing the log or the line, otherwise.
pub fn the_line_with<'a>(log: &'a str, needle: &str, parts: &[&str]) -> &'a str {
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(
        lines.len(),
        1,
        "{} lines with {needle:?} in the log:\n{log}",
        lines.len()
    );
    for part in parts {
        assert!(lines[0].contains(part), "no {part:?} in {}", lines[0]);
    }
    lines[0]
}
