//! Suppressions: the user's `leak:<kind>:<pattern>` rules
//! (`IBV_SHIM_SUPPRESS`) and the built-in ones, and the per-site cache
//! that decides them.

use std::collections::HashMap;

use once_cell::sync::Lazy;

use crate::config;
use crate::log::Level;
use crate::oom;
use crate::registry::objects::Obj;

use report_model::Kind as ReportKind;

use super::site::{frames, site, Site};

/// One `leak:<kind>:<pattern>` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suppression {
    /// `None` for `*`.
    pub kind: Option<String>,
    pub pattern: String,
    /// For a built-in rule: the library that keeps such objects on purpose
    /// (the rule then matches the creation site's module only).
    pub owner: Option<&'static str>,
}

/// Why an object left allocated is not a leak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// A rule of `IBV_SHIM_SUPPRESS`.
    User,
    /// A built-in rule: this library keeps it for the life of the process.
    Kept(&'static str),
}

/// The built-in rules (`leak:KIND:MODULE  LIBRARY  why`), shared with the
/// launcher's `--list-default-suppressions`.
pub const DEFAULT_SUPPRESSIONS: &str = fault_rules::DEFAULT_SUPPRESSIONS;

/// The built-in rules, parsed; a malformed line is a bug caught by a test.
pub fn default_suppressions() -> Vec<Suppression> {
    DEFAULT_SUPPRESSIONS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let (rule, owner) = (words.next()?, words.next()?);
            let mut s = parse_rule(rule)?;
            s.owner = Some(owner);
            Some(s)
        })
        .collect()
}

/// Parses a suppressions file; bad lines are returned as problems.
pub fn parse_suppressions(text: &str) -> (Vec<Suppression>, Vec<String>) {
    let (mut out, mut problems) = (Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_rule(line) {
            Some(s) => out.push(s),
            None => problems.push(format!(
                "line {}: {line:?} is not leak:<kind>:<pattern> with kind one of *, {}, {}",
                n + 1,
                ReportKind::NAMES.join(", "),
                report_model::CmKind::ALL.map(|k| k.name()).join(", ")
            )),
        }
    }
    (out, problems)
}

/// One `leak:<kind>:<pattern>` rule, trimmed (no temporary list: the
/// built-in rules are parsed at load, in the program's heap).
fn parse_rule(line: &str) -> Option<Suppression> {
    let (kind, pattern) = line.strip_prefix("leak:")?.split_once(':')?;
    let known = kind == "*"
        || ReportKind::from_name(kind).is_some()
        || report_model::CmKind::from_name(kind).is_some();
    (known && !pattern.is_empty()).then(|| Suppression {
        kind: (kind != "*").then(|| kind.to_string()),
        pattern: pattern.to_string(),
        owner: None,
    })
}

/// `*` matches any run of characters; everything else is literal.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

impl Suppression {
    /// Does it cover an object of `kind` created at `site` (or, with a
    /// backtrace, any frame of it)? The pattern is matched against the
    /// module's path, its file name, and the symbol.
    pub fn matches(&self, kind: &str, site: &Site, frames: &[String]) -> bool {
        if self.kind.as_deref().is_some_and(|k| k != kind) {
            return false;
        }
        let m = |s: &str| glob(&self.pattern, s);
        if let Some(module) = &site.module {
            if m(module) || m(module.rsplit('/').next().unwrap_or(module)) {
                return true;
            }
        }
        if self.owner.is_some() {
            // A library's own objects are those its own code created.
            return false;
        }
        if site.symbol.as_deref().is_some_and(m) {
            return true;
        }
        frames.iter().any(|f| m(f.split(" (").next().unwrap_or(f)))
    }
}

pub(super) static SUPPRESSIONS: Lazy<Vec<Suppression>> = Lazy::new(|| {
    let Some(path) = &config::get().suppress else {
        return Vec::new();
    };
    match crate::files::read_small(path, crate::files::SUPPRESS_LIMIT) {
        Ok(bytes) => {
            let (list, problems) = parse_suppressions(&String::from_utf8_lossy(&bytes));
            for p in problems {
                crate::log!(
                    Level::Warn,
                    "IBV_SHIM_SUPPRESS={}: {p}; ignored",
                    path.to_string_lossy()
                );
            }
            list
        }
        Err(e) => {
            crate::log!(
                Level::Warn,
                "IBV_SHIM_SUPPRESS={}: {e}; no suppressions",
                path.to_string_lossy()
            );
            Vec::new()
        }
    }
});

/// The built-in rules in force (none with `IBV_SHIM_DEFAULT_SUPPRESSIONS=0`).
pub(super) static DEFAULTS: Lazy<Vec<Suppression>> = Lazy::new(|| {
    if config::get().default_suppressions {
        default_suppressions()
    } else {
        Vec::new()
    }
});

/// Decides suppression, once per kind and creation site (objects with a
/// backtrace are matched one by one against the user's rules).
pub(super) struct Suppressor {
    pub(super) cache: HashMap<(&'static str, usize), Option<Why>>,
}

impl Suppressor {
    pub(super) fn new() -> Suppressor {
        Suppressor {
            cache: HashMap::new(),
        }
    }

    pub(super) fn site(&mut self, kind: &'static str, caller: usize) -> Option<Why> {
        // The usual case (no rules of the user's, none of the built-in
        // ones for this kind) costs no lookup per object: a report may
        // walk a million of them.
        if SUPPRESSIONS.is_empty()
            && !DEFAULTS
                .iter()
                .any(|x| x.kind.as_deref().is_none_or(|k| k == kind))
        {
            return None;
        }
        if let Some(why) = self.cache.get(&(kind, caller)) {
            return *why;
        }
        let s = site(caller);
        // The user's rules first: they name the reason themselves.
        let why = if SUPPRESSIONS.iter().any(|x| x.matches(kind, &s, &[])) {
            Some(Why::User)
        } else {
            DEFAULTS
                .iter()
                .find(|x| x.matches(kind, &s, &[]))
                .and_then(|x| x.owner.map(Why::Kept))
        };
        // Out of memory it is decided again next time, not cached.
        if oom::quietly(|| self.cache.try_reserve(1)).is_some() {
            self.cache.insert((kind, caller), why);
        }
        why
    }

    pub(super) fn obj(&mut self, o: &Obj) -> Option<Why> {
        if SUPPRESSIONS.is_empty() && DEFAULTS.is_empty() {
            return None;
        }
        match frames(o) {
            Some(frames) => {
                let s = site(o.caller);
                if SUPPRESSIONS
                    .iter()
                    .any(|x| x.matches(o.kind().name(), &s, &frames))
                {
                    return Some(Why::User);
                }
                self.site(o.kind().name(), o.caller)
            }
            None => self.site(o.kind().name(), o.caller),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::inventory::Quiet;
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("*", ""));
        assert!(glob("libfoo*", "libfoo.so.1"));
        assert!(glob("*/libfoo.so*", "/usr/lib/libfoo.so.1"));
        assert!(glob("leak_*_pd", "leak_the_pd"));
        assert!(!glob("leak_*_pd", "leak_the_pdx"));
        assert!(glob("a*b*c", "aXbYbZc"));
        assert!(!glob("abc", "abcd"));
    }

    #[test]
    fn suppression_lines() {
        let (s, bad) =
            parse_suppressions("# comment\n\nleak:mr:libfoo*\nleak:*:main\nleak:bogus:x\nnope\n");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].kind.as_deref(), Some("mr"));
        assert_eq!(s[1].kind, None);
        assert_eq!(bad.len(), 2);
        let site = Site {
            module: Some("/usr/lib/libfoo.so.1".into()),
            symbol: Some("init".into()),
            offset: Some(4),
            ..Site::default()
        };
        assert!(s[0].matches("mr", &site, &[]));
        assert!(!s[0].matches("pd", &site, &[]));
        assert!(s[1].matches(
            "qp",
            &Site {
                symbol: Some("main".into()),
                ..Site::default()
            },
            &[]
        ));
        assert!(s[1].matches("qp", &Site::default(), &["main (x.c:3)".into()]));
    }

    #[test]
    fn the_default_rules_parse_and_match_only_their_library_s_own_calls() {
        let d = default_suppressions();
        let rules = DEFAULT_SUPPRESSIONS
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .count();
        assert_eq!(d.len(), rules, "a built-in rule did not parse");
        // Each rule is kept by the library that makes those objects.
        for s in &d {
            let owner = s.owner.expect("a built-in rule names its owner");
            assert!(
                ["librdmacm", "libfabric"].contains(&owner),
                "an unexpected owner {owner}"
            );
        }
        let rdmacm = Site {
            module: Some("/lib/x86_64-linux-gnu/librdmacm.so.1".into()),
            symbol: None,
            offset: Some(0x5c43),
            ..Site::default()
        };
        let program = Site {
            module: Some("/tmp/rping".into()),
            symbol: Some("librdmacm.so.1".into()),
            offset: Some(1),
            ..Site::default()
        };
        for kind in ["context", "device_list", "pd"] {
            assert!(d.iter().any(|s| s.matches(kind, &rdmacm, &[])), "{kind}");
            // The program's own objects, whatever its symbols are called.
            assert!(!d.iter().any(|s| s.matches(kind, &program, &[])), "{kind}");
        }
        for kind in ["mr", "cq", "qp", "comp_channel"] {
            assert!(!d.iter().any(|s| s.matches(kind, &rdmacm, &[])), "{kind}");
        }
        let mut q = Quiet::default();
        q.add(Why::Kept("librdmacm"));
        q.add(Why::User);
        q.add(Why::Kept("librdmacm"));
        assert_eq!(
            q.to_string(),
            "1 suppressed by IBV_SHIM_SUPPRESS, 2 kept by librdmacm (suppressed by default)"
        );
    }
}
