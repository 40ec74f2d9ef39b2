//! `ibv-shim report merge [--format text|junit] [-o FILE] [--exit-zero]
//! REPORTS...`: one summary over the JSON reports of many processes (an
//! MPI job, a test suite): the leaks grouped by creation site, each with
//! its counts by kind and the processes it came from. `--format junit`
//! writes JUnit XML for CI: one test case per process, one failure per
//! site it leaked at. Exits 23 (the leak exit code) when a report holds a
//! leak, unless `--exit-zero`.
//!
//! Reports are read with the report model's types, another schema refused
//! by name; only regular files, of a report's size at most (a FIFO or
//! `/dev/zero` is refused, never waited on or read without end).
//! Suppressed objects are not leaks and are left out. The text shows
//! control characters of report fields escaped; `-o` replaces its file
//! through a temporary, refusing a symbolic link or a special file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use report_model::{Created, Kind, Report};

use crate::summary::printable;

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct MergeOptions {
    pub junit: bool,
    /// `-o FILE`; stdout without it.
    pub output: Option<PathBuf>,
    /// `--exit-zero`: leaks do not make the exit status.
    pub exit_zero: bool,
    pub files: Vec<PathBuf>,
}

/// A usage error: the message, the usage line, status 2.
pub fn usage(msg: &str) -> i32 {
    eprintln!("ibv-shim: {msg}\n{USAGE}\n(ibv-shim report merge --help explains)");
    2
}

pub const USAGE: &str =
    "usage: ibv-shim report merge [--format text|junit] [-o FILE] [--exit-zero] REPORT.json...";

/// The exit status when a merged report holds a leak: the launcher's
/// default leak exit code.
pub const LEAK_STATUS: i32 = crate::options::DEFAULT_LEAK_EXITCODE as i32;

/// `ibv-shim report merge --help`.
pub fn help() -> String {
    format!(
        "\
usage: ibv-shim report merge [--format text|junit] [-o FILE] [--exit-zero]
                             REPORT.json...

One summary over the JSON leak reports of many processes (an MPI job, a
test suite; `--report DIR/r.%p.json` or IBV_SHIM_REPORT writes one per
process): the leaks grouped by creation site, most first, each with its
counts by kind and the processes (pid, program) it came from. Suppressed
objects are not leaks. Each file must be a regular file holding a report
of schema ibv-shim/leak-report/1.

Options:
  --format text|junit   text (the default), or JUnit XML for CI: one test
                        case per process, one failure per site it leaked at
  -o, --output FILE     write there instead of stdout, replacing FILE
                        through a temporary (a symbolic link or anything
                        but a regular file at FILE is refused)
  --exit-zero           exit 0 even when the reports hold leaks
  -h, --help            this text
  --                    what follows are report files

Exit status:
  0    no report holds a leak (or --exit-zero)
  1    a report could not be read (named on stderr; the others are still
       merged), or the output could not be written
  2    usage error
  {LEAK_STATUS}   a report holds a leak (the leak exit code of --fail-on-leak)
"
    )
}

/// One process, as the merged summary names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Process {
    pub pid: u32,
    pub program: String,
}

/// The leaks at one creation site, over every process.
#[derive(Debug, Default)]
pub struct SiteLeaks {
    pub counts: [u64; Kind::ALL.len()],
    /// Per process, how many.
    pub processes: BTreeMap<Process, u64>,
}

impl SiteLeaks {
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The merged reports.
#[derive(Debug, Default)]
pub struct Merged {
    /// Every process read, with its leaks by site.
    pub processes: Vec<(Process, BTreeMap<String, SiteLeaks>)>,
    /// All leaks by site.
    pub sites: BTreeMap<String, SiteLeaks>,
    /// Reports cut short by out of memory (their counts are what they
    /// list).
    pub truncated: Vec<Process>,
    /// A report holds a leak (its own verdict, or an object listed).
    pub leaked: bool,
}

/// `function (file:line) in module`, `symbol+0xoff in module`, or
/// `module+0xoff (BuildId: ..)`: the best name the report has.
pub fn site_name(c: &Created<'_>) -> String {
    let module = c.module.as_deref().unwrap_or("an unknown module");
    match (&c.file, c.line, &c.symbol, c.offset) {
        (Some(file), Some(line), _, _) => {
            let func = c.function.as_deref().or(c.symbol.as_deref()).unwrap_or("?");
            format!("{func} ({file}:{line}) in {module}")
        }
        (_, _, Some(sym), Some(off)) => format!("{sym}+{off:#x} in {module}"),
        (_, _, None, Some(off)) => match &c.build_id {
            Some(id) => format!("{module}+{off:#x} (BuildId: {id})"),
            None => format!("{module}+{off:#x}"),
        },
        _ => module.to_string(),
    }
}

impl Merged {
    pub fn add(&mut self, r: &Report<'_>) {
        let process = Process {
            pid: r.pid,
            program: r.program.to_string(),
        };
        let mut own: BTreeMap<String, SiteLeaks> = BTreeMap::new();
        for o in r.objects.iter().filter(|o| !o.suppressed) {
            let name = site_name(&o.created);
            for map in [&mut own, &mut self.sites] {
                let s = map.entry(name.clone()).or_default();
                s.counts[o.kind().index()] += 1;
                *s.processes.entry(process.clone()).or_default() += 1;
            }
        }
        if r.truncated.is_some() {
            self.truncated.push(process.clone());
        }
        self.leaked |= r.leaked || !own.is_empty();
        self.processes.push((process, own));
    }

    /// Sites, most leaks first.
    fn by_count(sites: &BTreeMap<String, SiteLeaks>) -> Vec<(&String, &SiteLeaks)> {
        let mut v: Vec<_> = sites.iter().collect();
        v.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then(a.0.cmp(b.0)));
        v
    }

    pub fn text(&self) -> String {
        let leaking = self.processes.iter().filter(|(_, s)| !s.is_empty()).count();
        let total: u64 = self.sites.values().map(SiteLeaks::total).sum();
        let mut out = format!(
            "ibv-shim: {} reports, {leaking} leaked: {total} {} at {} {}\n",
            self.processes.len(),
            if total == 1 { "object" } else { "objects" },
            self.sites.len(),
            if self.sites.len() == 1 {
                "site"
            } else {
                "sites"
            },
        );
        for (name, s) in Self::by_count(&self.sites) {
            let _ = writeln!(
                out,
                "ibv-shim:   {} ({}) at {}",
                s.total(),
                kinds(&s.counts),
                printable(name)
            );
            let from: Vec<String> = s
                .processes
                .iter()
                .map(|(p, n)| format!("pid {} ({}): {n}", p.pid, printable(base(&p.program))))
                .collect();
            let _ = writeln!(out, "ibv-shim:     from {}", from.join(", "));
        }
        for p in &self.truncated {
            let _ = writeln!(
                out,
                "ibv-shim: the report of pid {} ({}) is incomplete: out of memory",
                p.pid,
                printable(base(&p.program))
            );
        }
        out
    }

    pub fn junit(&self) -> String {
        let failures: usize = self.processes.iter().filter(|(_, s)| !s.is_empty()).count();
        let tests = self.processes.len();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites name=\"ibv-shim\" tests=\"{tests}\" failures=\"{failures}\">"
        );
        let _ = writeln!(
            out,
            "  <testsuite name=\"ibv-shim leak check\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\">"
        );
        for (p, sites) in &self.processes {
            let _ = write!(
                out,
                "    <testcase classname=\"ibv-shim.{}\" name=\"{} (pid {})\"",
                xml(base(&p.program)),
                xml(&p.program),
                p.pid
            );
            if sites.is_empty() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            for (name, s) in Self::by_count(sites) {
                let message = format!(
                    "{} RDMA {} leaked ({}) at {name}",
                    s.total(),
                    if s.total() == 1 { "object" } else { "objects" },
                    kinds(&s.counts)
                );
                let _ = writeln!(
                    out,
                    "      <failure type=\"leak\" message=\"{}\">{}</failure>",
                    xml(&message),
                    xml(&message)
                );
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}

/// "1 pd, 3 mr", in the model's order.
fn kinds(counts: &[u64]) -> String {
    Kind::ALL
        .iter()
        .zip(counts)
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn base(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Text as XML character data or an attribute value.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Not allowed in XML 1.0 at all.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// Runs `ibv-shim report ...`; returns the exit status: 0, 1 when a
/// report cannot be read or the output written, 2 for a usage error,
/// [`LEAK_STATUS`] when a report holds a leak (unless `--exit-zero`).
pub fn main(o: MergeOptions) -> i32 {
    // Refused before anything is read: the output is no file to replace.
    if let Some(path) = &o.output {
        if let Err(why) = crate::files::check_target(path) {
            eprintln!("ibv-shim: cannot write {}: {why}", path.display());
            return 1;
        }
    }
    let mut merged = Merged::default();
    let mut status = 0;
    for f in &o.files {
        let read = crate::files::read_text(f, crate::files::MAX_REPORT);
        match read.and_then(|t| report_model::parse(&t).map(|r| merged.add(&r))) {
            Ok(()) => {}
            Err(e) => {
                eprintln!(
                    "ibv-shim: cannot read the report {}: {}",
                    f.display(),
                    printable(&e)
                );
                status = 1;
            }
        }
    }
    let text = match o.junit {
        true => merged.junit(),
        false => merged.text(),
    };
    let written = match &o.output {
        Some(path) => crate::files::write_replacing(path, text.as_bytes(), 0o666)
            .map_err(|e| (path.display().to_string(), e)),
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(|e| ("stdout".to_string(), e.to_string())),
    };
    if let Err((to, e)) = written {
        eprintln!("ibv-shim: cannot write {to}: {e}");
        return 1;
    }
    match (status, merged.leaked && !o.exit_zero) {
        (0, true) => LEAK_STATUS,
        (s, _) => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn parse(a: &[&str]) -> Result<MergeOptions, String> {
        let args = ["report"].iter().chain(a).map(OsString::from).collect();
        match crate::cli::parse(args) {
            crate::cli::Parsed::Merge(o) => Ok(o),
            crate::cli::Parsed::Print(help) => Err(format!("help: {help}")),
            crate::cli::Parsed::Usage(_, m) => Err(m),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_command_line() {
        let o = parse(&["merge", "--format", "junit", "-o", "x.xml", "a", "b"]).unwrap();
        assert!(o.junit);
        assert_eq!(o.output, Some(PathBuf::from("x.xml")));
        assert_eq!(o.files, [PathBuf::from("a"), PathBuf::from("b")]);
        assert!(!parse(&["merge", "a"]).unwrap().junit);
        assert!(parse(&["merge"]).unwrap_err().contains("no report files"));
        for help in [&["merge", "--help"][..], &["merge", "a", "-h"], &["--help"]] {
            assert!(parse(help)
                .unwrap_err()
                .starts_with("help: usage: ibv-shim report merge"));
        }
        assert!(parse(&["merge", "--exit-zero", "a"]).unwrap().exit_zero);
        assert!(help().lines().all(|l| l.len() <= 80), "fits 80 columns");
        assert!(parse(&["split", "a"]).unwrap_err().contains("`merge`"));
        assert!(parse(&["merge", "--format", "xml", "a"]).is_err());
        assert!(parse(&["merge", "--frob", "a"])
            .unwrap_err()
            .contains("--frob"));
        assert_eq!(
            parse(&["merge", "--", "-o"]).unwrap().files,
            [PathBuf::from("-o")]
        );
    }

    #[test]
    fn xml_escapes() {
        assert_eq!(xml("a<b>&\"c'\u{1}"), "a&lt;b&gt;&amp;&quot;c&apos;?");
    }
}
