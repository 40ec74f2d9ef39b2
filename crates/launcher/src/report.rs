//! The shim's JSON leak reports: where they are written and what they say.
//!
//! Contract (schema `ibv-shim/leak-report/1`, one document per process):
//! `{"schema", "pid", "program", "leaked", "totals": {kind: n},
//!   "objects": [{"kind", "handle", "context", "device", "guid", "parent",
//!   "fields", "created": {"thread", "time", "module", "symbol", "offset",
//!   "backtrace"}, "found": "close"|"exit", "suppressed", "kept_by"}]}`.
//! A report is read only with the shim's own types (`report_model`): one
//! that does not fit them (damaged, or another schema's) is named as
//! unreadable, never guessed at.

use std::collections::HashSet;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The file name of each process's report in the private directory.
pub const PRIVATE_NAME: &str = "ibv-shim-report.%p.json";

/// Where the reports of a run go.
#[derive(Debug)]
pub struct ReportLocation {
    /// The `IBV_SHIM_REPORT` value, absolute; `%p` = pid.
    template: PathBuf,
    /// The launcher's own temporary directory, removed after the summary.
    private: Option<PathBuf>,
}

/// What was in the reports' place before the run: a file that is still
/// there unchanged afterwards is an old report, not this run's.
#[derive(Debug, Default)]
pub struct Before(HashSet<(PathBuf, Identity)>);

/// Inode, size and modification time: a rewritten file differs in one.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Identity(u64, u64, i64, i64);

impl ReportLocation {
    /// Reports at a path the user chose, kept after the run.
    pub fn kept(template: PathBuf) -> ReportLocation {
        ReportLocation {
            template,
            private: None,
        }
    }

    /// Reports in the launcher's own fresh directory.
    pub fn private(dir: PathBuf) -> ReportLocation {
        ReportLocation {
            template: dir.join(PRIVATE_NAME),
            private: Some(dir),
        }
    }

    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }

    /// The value of `IBV_SHIM_REPORT`.
    pub fn template(&self) -> PathBuf {
        self.template.clone()
    }

    /// Where the report of process `pid` goes (`%p` = pid).
    pub fn path_for(&self, pid: u64) -> PathBuf {
        let text = self.template.as_os_str().as_bytes();
        let mut out = Vec::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            match text[i..].starts_with(b"%p") {
                true => {
                    out.extend_from_slice(pid.to_string().as_bytes());
                    i += 2;
                }
                false => {
                    out.push(text[i]);
                    i += 1;
                }
            }
        }
        PathBuf::from(std::ffi::OsString::from_vec(out))
    }

    /// The files that may be this run's reports: the template itself, or
    /// with `%p` in its file name, every file whose name matches it with
    /// digits in place of `%p`. Sorted by name.
    pub fn candidates(&self) -> Vec<PathBuf> {
        let Some(name) = self.template.file_name() else {
            return Vec::new();
        };
        let dir = self.template.parent().unwrap_or(Path::new("/"));
        let pattern = name.as_bytes();
        // Without `%p` every process writes the one name, but one that
        // finds another's report written there since it started adds its
        // pid (`r.json` -> `r.<pid>.json`) rather than replace it.
        let (fixed, pattern) = match pattern.windows(2).any(|w| w == b"%p") {
            true => (None, pattern.to_vec()),
            false => (Some(&self.template), with_pid(pattern)),
        };
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|e| matches_pid_pattern(&pattern, e.file_name().as_bytes()))
            .map(|e| e.path())
            .chain(fixed.cloned())
            .filter(|p| p.is_file())
            .collect();
        found.sort();
        found
    }

    /// Notes the candidates present before the run.
    pub fn before(&self) -> Before {
        Before(
            self.candidates()
                .into_iter()
                .filter_map(|p| identity(&p).map(|id| (p, id)))
                .collect(),
        )
    }

    /// This run's reports: the candidates now, less those unchanged since
    /// [`ReportLocation::before`].
    pub fn written_since(&self, before: &Before) -> Vec<PathBuf> {
        self.candidates()
            .into_iter()
            .filter(|p| identity(p).is_some_and(|id| !before.0.contains(&(p.clone(), id))))
            .collect()
    }
}

fn identity(p: &Path) -> Option<Identity> {
    let m = std::fs::metadata(p).ok()?;
    Some(Identity(m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}

/// `r.json` -> `r.%p.json`, `r` -> `r.%p`: the name the shim falls back to
/// (see `report_path` in the shim).
fn with_pid(name: &[u8]) -> Vec<u8> {
    let at = match name.iter().rposition(|&b| b == b'.') {
        Some(dot) if dot > 0 => dot,
        _ => name.len(),
    };
    [&name[..at], b".%p", &name[at..]].concat()
}

/// Whether `name` is `pattern` with each `%p` replaced by one or more digits.
fn matches_pid_pattern(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.windows(2).position(|w| w == b"%p") {
        None => pattern == name,
        Some(i) => {
            let (lit, rest) = (&pattern[..i], &pattern[i + 2..]);
            let Some(after) = name.strip_prefix(lit) else {
                return false;
            };
            let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
            // Try every split of the digits: `%p%p` or a digit after `%p`.
            (1..=digits).any(|n| matches_pid_pattern(rest, &after[n..]))
        }
    }
}

/// One process's report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub pid: Option<u64>,
    pub program: Option<String>,
    /// The launcher run that started the process (`IBV_SHIM_RUN`).
    pub run: Option<String>,
    /// The report's own verdict; `None` if it has none.
    pub leaked: Option<bool>,
    /// `totals`, by kind name (the summary puts them in its own order).
    pub totals: Vec<(String, u64)>,
    /// `None` when the document has no `objects` array.
    pub objects: Option<Vec<Object>>,
    /// Why the report is incomplete (`out of memory`), if it is.
    pub truncated: Option<String>,
    /// The data-path checks' findings, by rule (those above 0).
    pub checks: Vec<(String, u64)>,
}

/// One leaked object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Object {
    pub kind: String,
    pub handle: Option<String>,
    pub device: Option<String>,
    pub parent: Option<String>,
    pub module: Option<String>,
    pub symbol: Option<String>,
    pub offset: Option<u64>,
    /// `close` or `exit`.
    pub found: Option<String>,
    pub suppressed: bool,
    /// The library that keeps it on purpose (a built-in suppression).
    pub kept_by: Option<String>,
}

impl Report {
    /// Reads a report from `text` with the report model's types.
    pub fn parse(text: &str) -> Result<Report, String> {
        report_model::parse(text).map(Report::from)
    }

    /// Reads a report file: a regular file of a report's size at most
    /// (`files::read_text`).
    pub fn read(path: &Path) -> Result<Report, String> {
        Report::parse(&crate::files::read_text(path, crate::files::MAX_REPORT)?)
    }

    /// The leaked objects by kind, suppressed ones left out: counted from
    /// `objects`, or taken from `totals` when the list is incomplete (a
    /// truncated report).
    pub fn counts(&self) -> Vec<(String, u64)> {
        match &self.objects {
            Some(objects) if self.truncated.is_none() => {
                let mut counts: Vec<(String, u64)> = Vec::new();
                for o in objects.iter().filter(|o| !o.suppressed) {
                    match counts.iter_mut().find(|(k, _)| *k == o.kind) {
                        Some((_, n)) => *n += 1,
                        None => counts.push((o.kind.clone(), 1)),
                    }
                }
                counts
            }
            _ => self
                .totals
                .iter()
                .filter(|(_, n)| *n > 0)
                .cloned()
                .collect(),
        }
    }

    /// How many leaked objects were suppressed by the user's rules.
    pub fn suppressed(&self) -> u64 {
        self.objects.as_ref().map_or(0, |o| {
            o.iter()
                .filter(|o| o.suppressed && o.kept_by.is_none())
                .count() as u64
        })
    }

    /// Objects kept on purpose by a library (built-in suppressions), by
    /// library in the order first listed.
    pub fn kept(&self) -> Vec<(String, u64)> {
        let mut kept: Vec<(String, u64)> = Vec::new();
        for o in self.objects.iter().flatten().filter(|o| o.suppressed) {
            let Some(owner) = &o.kept_by else { continue };
            match kept.iter_mut().find(|(k, _)| k == owner) {
                Some((_, n)) => *n += 1,
                None => kept.push((owner.clone(), 1)),
            }
        }
        kept
    }

    /// Whether the process leaked: the report's verdict, else whether any
    /// unsuppressed object is listed.
    pub fn has_leaks(&self) -> bool {
        self.leaked
            .unwrap_or_else(|| self.counts().iter().any(|(_, n)| *n > 0))
    }
}

impl From<report_model::Report<'_>> for Report {
    fn from(r: report_model::Report<'_>) -> Report {
        let mut totals: Vec<(String, u64)> = report_model::Kind::ALL
            .iter()
            .map(|k| (k.name().to_string(), r.totals.get(*k)))
            .collect();
        // By name (the summary puts them in its own order).
        totals.sort();
        let mut objects: Vec<Object> = r.objects.iter().map(Object::from).collect();
        // The connection manager's objects count as the verbs objects do
        // (`cm_id`, `event_channel`, ...), after them.
        if let Some(cm) = &r.connection_manager {
            for o in &cm.objects {
                objects.push(Object::from(o));
                if o.suppressed {
                    continue;
                }
                let kind = o.kind.name();
                match totals.iter_mut().find(|(k, _)| k == kind) {
                    Some((_, n)) => *n += 1,
                    None => totals.push((kind.to_string(), 1)),
                }
            }
        }
        Report {
            pid: Some(r.pid.into()),
            program: nonempty(Some(&r.program)),
            run: nonempty(r.run.as_deref()),
            leaked: Some(r.leaked),
            totals,
            objects: Some(objects),
            truncated: nonempty(r.truncated.as_deref()),
            checks: r
                .checks
                .iter()
                .flatten()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| (k.clone(), *n))
                .collect(),
        }
    }
}

impl From<&report_model::Object<'_>> for Object {
    fn from(o: &report_model::Object<'_>) -> Object {
        let hex = |a: report_model::Address| format!("{:#x}", a.0);
        Object {
            kind: o.kind().name().to_string(),
            handle: Some(hex(o.handle)),
            device: nonempty(o.device.as_deref()),
            parent: o.parent.map(hex),
            module: nonempty(o.created.module.as_deref()),
            symbol: nonempty(o.created.symbol.as_deref()),
            offset: o.created.offset,
            found: Some(
                match o.found {
                    report_model::Found::Close => "close",
                    report_model::Found::Exit => "exit",
                }
                .to_string(),
            ),
            suppressed: o.suppressed,
            kept_by: nonempty(o.kept_by.as_deref()),
        }
    }
}

impl From<&report_model::CmObject<'_>> for Object {
    fn from(o: &report_model::CmObject<'_>) -> Object {
        Object {
            kind: o.kind.name().to_string(),
            handle: Some(format!("{:#x}", o.handle.0)),
            device: None,
            parent: o.channel.or(o.id).map(|a| format!("{:#x}", a.0)),
            module: nonempty(o.created.module.as_deref()),
            symbol: nonempty(o.created.symbol.as_deref()),
            offset: o.created.offset,
            found: Some("exit".to_string()),
            suppressed: o.suppressed,
            kept_by: nonempty(o.kept_by.as_deref()),
        }
    }
}

/// Empty text is `None`.
fn nonempty(s: Option<&str>) -> Option<String> {
    s.filter(|s| !s.is_empty()).map(str::to_string)
}

impl Object {
    /// `module:symbol+0xoffset`, with the module's directory left out;
    /// `None` if the report has no module.
    pub fn site(&self) -> Option<String> {
        let module = self.module.as_deref()?;
        let module = module.rsplit('/').next().unwrap_or(module);
        let mut s = module.to_string();
        if let Some(sym) = &self.symbol {
            s.push(':');
            s.push_str(sym);
        }
        if let Some(off) = self.offset {
            s.push_str(&format!("+{off:#x}"));
        }
        Some(s)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn pid_patterns() {
        let m = |p: &str, n: &str| matches_pid_pattern(p.as_bytes(), n.as_bytes());
        assert!(m("r.%p.json", "r.123.json"));
        assert!(!m("r.%p.json", "r..json"));
        assert!(!m("r.%p.json", "r.12x.json"));
        assert!(!m("r.%p.json", "r.123.json.tmp"));
        assert!(m("r%p", "r7"));
        assert!(m("%p-%p.j", "12-12.j"));
        assert!(m("r", "r"));
        assert!(!m("r", "s"));
    }

    /// A document as the report model requires it: `partial` with every
    /// field it leaves out at a neutral value (each kind's `fields` at
    /// valid values), for the tests' short fixtures.
    pub(crate) fn complete(partial: &str) -> String {
        use serde_json::{json, Map, Value};
        fn fill(d: &mut Map<String, Value>, k: &str, v: Value) {
            d.entry(k.to_string()).or_insert(v);
        }
        let mut doc: Value = serde_json::from_str(partial).unwrap();
        let d = doc.as_object_mut().unwrap();
        fill(d, "schema", json!(report_model::SCHEMA));
        fill(d, "pid", json!(0));
        fill(d, "program", json!(""));
        fill(d, "leaked", json!(false));
        fill(d, "objects", json!([]));
        fill(d, "totals", json!({}));
        let totals = d["totals"].as_object_mut().unwrap();
        for k in report_model::Kind::ALL {
            fill(totals, k.name(), json!(0));
        }
        for o in d["objects"].as_array_mut().unwrap() {
            let o = o.as_object_mut().unwrap();
            let kind = o["kind"].as_str().unwrap().to_string();
            let mut fields = match kind.as_str() {
                "context" => json!({"imported": false}),
                "device_list" => json!({"count": 1}),
                "pd" | "imported_pd" => json!({"handle": 1}),
                "mr" => json!({"addr": "0x1000", "length": 1, "lkey": 1, "rkey": 1,
                               "access": 0, "via": "ibv_reg_mr"}),
                "cq" => json!({"cqe": 1, "comp_vector": 0}),
                "comp_channel" => json!({"fd": 3}),
                "srq" => json!({"max_wr": 1, "max_sge": 1, "srq_limit": 0}),
                "qp" => json!({"qp_num": 1, "qp_type": "RC", "send_cq": null,
                               "recv_cq": null, "srq": null}),
                "ah" => json!({"dlid": 1, "port_num": 1, "sl": 0, "is_global": false,
                               "via": "ibv_create_ah"}),
                _ => json!({"handle": 1, "addr": "0x1000", "length": 1, "lkey": 1, "rkey": 1}),
            };
            let given = o.remove("fields").unwrap_or(json!({}));
            let f = fields.as_object_mut().unwrap();
            for (k, v) in given.as_object().unwrap() {
                if f.contains_key(k) {
                    f.insert(k.clone(), v.clone());
                }
            }
            o.insert("fields".into(), fields);
            for (k, v) in [
                ("handle", json!("0x1")),
                ("context", Value::Null),
                ("device", Value::Null),
                ("guid", Value::Null),
                ("parent", Value::Null),
                ("found", json!("exit")),
                ("suppressed", json!(false)),
                ("kept_by", Value::Null),
                ("created", json!({})),
            ] {
                fill(o, k, v);
            }
            let c = o.get_mut("created").unwrap().as_object_mut().unwrap();
            fill(c, "thread", json!(1));
            for k in ["time", "module", "symbol", "offset", "backtrace"] {
                fill(c, k, Value::Null);
            }
        }
        doc.to_string()
    }

    /// Only a document that fits the report model is read: a damaged one,
    /// or one missing a field or with one too many, is refused.
    #[test]
    fn a_report_that_does_not_fit_the_model_is_refused() {
        let good = complete(r#"{"pid":5,"leaked":true,"objects":[{"kind":"pd"}]}"#);
        let r = Report::parse(&good).unwrap();
        assert_eq!(r.pid, Some(5));
        assert!(r.has_leaks());
        assert_eq!(r.counts(), [("pd".to_string(), 1)]);
        for bad in [
            good.replacen("\"pid\":5", "\"new\":1,\"pid\":5", 1),
            good.replacen("\"pid\":5,", "", 1),
            good.replacen("\"kind\":\"pd\"", "\"kind\":\"rocket\"", 1),
            r#"{"objects":[{"kind":"pd"},{"created":5},7]}"#.to_string(),
            "[1]".to_string(),
            "{\"schema\": ".to_string(),
        ] {
            assert!(Report::parse(&bad).is_err(), "{bad}");
        }
    }

    /// A report as the shim writes it reads as the report model has it.
    #[test]
    fn a_shim_report_reads_as_the_model_has_it() {
        let text = r#"{"schema":"ibv-shim/leak-report/1","pid":77,"program":"/bin/p","leaked":true,
          "totals":{"context":1,"device_list":0,"pd":1,"mr":0,"cq":0,"comp_channel":0,"srq":0,"qp":1,"ah":0,"imported_pd":0,"imported_mr":0,
            "mw":0,"xrcd":0,"wq":0,"rwq_ind_table":0,"flow":0,"flow_action":0,"td":0,"parent_domain":0,"dm":0,"counters":0},
          "objects":[
          {"kind":"context","handle":"0x5000","context":"0x5000","device":"rxe0","guid":"0002c90300445566","parent":null,"fields":{"imported":false},"created":{"thread":77,"time":1732900000.5,"module":"/bin/p","symbol":"main","offset":28,"backtrace":null},"found":"exit","suppressed":false,"kept_by":null},
          {"kind":"pd","handle":"0x100","context":"0x5000","device":"rxe0","guid":null,"parent":null,"fields":{"handle":1},"created":{"thread":77,"time":1732900000.5,"module":"/lib/librdmacm.so.1","symbol":null,"offset":4096,"backtrace":null},"found":"close","suppressed":true,"kept_by":"librdmacm"},
          {"kind":"qp","handle":"0x600","context":"0x5000","device":"","guid":null,"parent":"0x100","fields":{"qp_num":17,"qp_type":"RC","send_cq":"0x300","recv_cq":null,"srq":null},"created":{"thread":78,"time":null,"module":null,"symbol":null,"offset":null,"backtrace":["main (p.c:3)"]},"found":"exit","suppressed":false,"kept_by":null}
          ],"truncated":null}"#;
        let strict: report_model::Report = serde_json::from_str(text).unwrap();
        let r = Report::parse(text).unwrap();
        assert_eq!(r, Report::from(strict));
        let objects = r.objects.as_ref().unwrap();
        assert_eq!(objects[2].device, None);
        assert_eq!(objects[0].site().as_deref(), Some("p:main+0x1c"));
        assert_eq!(
            r.counts(),
            [("context".to_string(), 1), ("qp".to_string(), 1)]
        );
        assert_eq!(r.kept(), [("librdmacm".to_string(), 1)]);
    }

    #[test]
    fn totals_stand_in_for_a_truncated_object_list() {
        let r = Report::parse(&complete(
            r#"{"leaked":true,"totals":{"pd":1,"cq":2},"objects":[{"kind":"pd"}],"truncated":"out of memory"}"#,
        ))
        .unwrap();
        assert_eq!(r.counts(), [("cq".to_string(), 2), ("pd".to_string(), 1)]);
    }

    #[test]
    fn candidates_skip_reports_from_before_the_run() {
        let dir = crate::environment::private_dir().unwrap();
        let loc = ReportLocation::kept(dir.join("r.%p.json"));
        std::fs::write(dir.join("r.1.json"), "old").unwrap();
        std::fs::write(dir.join("r.2.json"), "old").unwrap();
        std::fs::write(dir.join("other.json"), "x").unwrap();
        let before = loc.before();
        std::fs::write(dir.join("r.3.json"), "new").unwrap();
        std::fs::write(dir.join("r.2.json"), "rewritten").unwrap();
        assert_eq!(
            loc.written_since(&before),
            [dir.join("r.2.json"), dir.join("r.3.json")]
        );
        let single = ReportLocation::kept(dir.join("other.json"));
        assert_eq!(single.candidates(), [dir.join("other.json")]);
        assert!(single.written_since(&single.before()).is_empty());
        // A fixed name and the reports that could not take it.
        std::fs::write(dir.join("other.77.json"), "x").unwrap();
        std::fs::write(dir.join("other.x.json"), "x").unwrap();
        assert_eq!(
            single.candidates(),
            [dir.join("other.77.json"), dir.join("other.json")]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn private_reports_are_named_by_pid() {
        let dir = crate::environment::private_dir().unwrap();
        let loc = ReportLocation::private(dir.clone());
        assert_eq!(loc.template(), dir.join("ibv-shim-report.%p.json"));
        std::fs::write(dir.join("ibv-shim-report.9.json"), "{}").unwrap();
        assert_eq!(loc.candidates(), [dir.join("ibv-shim-report.9.json")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
