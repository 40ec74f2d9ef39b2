//! `ibv-shim report merge [--format text|junit] [-o FILE] REPORTS...`: one
//! summary over the JSON reports of many processes (an MPI job, a test
//! suite): the leaks grouped by creation site, each with its counts by
//! kind and the processes it came from. `--format junit` writes JUnit XML
//! for CI: one test case per process, one failure per site it leaked at.
//!
//! Reports are read with the report model's types; suppressed objects
//! are not leaks and are left out.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use report_model::{Created, Kind, Report};

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct MergeOptions {
    pub junit: bool,
    /// `-o FILE`; stdout without it.
    pub output: Option<PathBuf>,
    pub files: Vec<PathBuf>,
}

pub const USAGE: &str =
    "usage: ibv-shim report merge [--format text|junit] [-o FILE] REPORT.json...";

/// Parses what follows `report`.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<MergeOptions, String> {
    let mut args = args.into_iter();
    if args.next().as_deref() != Some("merge".as_ref()) {
        return Err("the report subcommand is `merge`".into());
    }
    let mut o = MergeOptions {
        junit: false,
        output: None,
        files: Vec::new(),
    };
    let mut only_files = false;
    while let Some(arg) = args.next() {
        let text = arg.to_str().unwrap_or_default();
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match text {
            _ if only_files => o.files.push(arg.into()),
            "--" => only_files = true,
            "--format" => {
                o.junit = match value("--format")?.to_str() {
                    Some("junit") => true,
                    Some("text") => false,
                    _ => return Err("--format is text or junit".into()),
                }
            }
            "--format=junit" => o.junit = true,
            "--format=text" => o.junit = false,
            "-o" | "--output" => o.output = Some(value("-o")?.into()),
            _ if text.starts_with('-') && text != "-" => {
                return Err(format!("unknown option {text}"))
            }
            _ => o.files.push(arg.into()),
        }
    }
    if o.files.is_empty() {
        return Err("no report files".into());
    }
    Ok(o)
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
                "ibv-shim:   {} ({}) at {name}",
                s.total(),
                kinds(&s.counts)
            );
            let from: Vec<String> = s
                .processes
                .iter()
                .map(|(p, n)| format!("pid {} ({}): {n}", p.pid, base(&p.program)))
                .collect();
            let _ = writeln!(out, "ibv-shim:     from {}", from.join(", "));
        }
        for p in &self.truncated {
            let _ = writeln!(
                out,
                "ibv-shim: the report of pid {} ({}) is incomplete: out of memory",
                p.pid,
                base(&p.program)
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
/// report cannot be read or the output written, 2 for a usage error.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ibv-shim: {e}\n{USAGE}");
            return 2;
        }
    };
    let mut merged = Merged::default();
    let mut status = 0;
    for f in &o.files {
        let read = std::fs::read_to_string(f).map_err(|e| e.to_string());
        match read.and_then(|t| {
            serde_json::from_str::<Report>(&t)
                .map(|r| merged.add(&r))
                .map_err(|e| e.to_string())
        }) {
            Ok(()) => {}
            Err(e) => {
                eprintln!("ibv-shim: cannot read the report {}: {e}", f.display());
                status = 1;
            }
        }
    }
    let text = match o.junit {
        true => merged.junit(),
        false => merged.text(),
    };
    let written = match &o.output {
        Some(path) => std::fs::write(path, text).map_err(|e| (path.display().to_string(), e)),
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(|e| ("stdout".to_string(), e)),
    };
    if let Err((to, e)) = written {
        eprintln!("ibv-shim: cannot write {to}: {e}");
        return 1;
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_command_line() {
        let o = parse(args(&[
            "merge", "--format", "junit", "-o", "x.xml", "a", "b",
        ]))
        .unwrap();
        assert!(o.junit);
        assert_eq!(o.output, Some(PathBuf::from("x.xml")));
        assert_eq!(o.files, [PathBuf::from("a"), PathBuf::from("b")]);
        assert!(!parse(args(&["merge", "a"])).unwrap().junit);
        assert!(parse(args(&["merge"])).is_err());
        assert!(parse(args(&["split", "a"])).is_err());
        assert!(parse(args(&["merge", "--format", "xml", "a"])).is_err());
        assert!(parse(args(&["merge", "--frob", "a"])).is_err());
        assert_eq!(
            parse(args(&["merge", "--", "-o"])).unwrap().files,
            [PathBuf::from("-o")]
        );
    }

    #[test]
    fn xml_escapes() {
        assert_eq!(xml("a<b>&\"c'\u{1}"), "a&lt;b&gt;&amp;&quot;c&apos;?");
    }
}
