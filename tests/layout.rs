//! The generated `include/infiniband/verbs.h` against rdma-core's own.
//!
//! Both headers define the same struct tags, so no single C file can include
//! both. The layout test therefore compiles a probe against the generated
//! header that prints every size, alignment, offset and constant, then
//! writes those numbers as `_Static_assert`s into a C file that includes
//! only the real header, and compiles that: any difference is a compile
//! error naming the struct and member. Member lists are compared too (from
//! parsing both headers), so a member missing from the mirror is caught even
//! where padding would hide it.
//!
//! Run: `cargo test --release --test layout`. Needs gcc, g++ and
//! libibverbs-dev; the freshness test also needs cbindgen 0.27.0
//! (`make deps` installs all of them).

#[path = "layout/cparse.rs"]
mod cparse;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cparse::{Aggregate, Header, Kind};

/// rdma-core's header, included by absolute path so `-I` can never pick ours.
const REAL_HEADER: &str = "/usr/include/infiniband/verbs.h";
/// The committed, generated header, relative to the repository root.
const GENERATED: &str = "include/infiniband/verbs.h";
const PINNED_CBINDGEN: &str = "0.27.0";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A per-test scratch directory under cargo's temp dir for integration tests.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("layout")
        .join(test);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

fn read_real_header() -> String {
    fs::read_to_string(REAL_HEADER)
        .unwrap_or_else(|e| panic!("{REAL_HEADER}: {e}: install libibverbs-dev (make deps)"))
}

/// rdma-core's verbs.h and the rdma-core headers it pulls in (verbs_api.h,
/// rdma/ib_user_ioctl_verbs.h, ...), where some verbs names are defined
/// under their kernel-ABI names and aliased by `#define`.
fn read_real_headers() -> (String, Header) {
    let mut texts = String::new();
    let mut merged = Header::default();
    let mut queue = vec![PathBuf::from(REAL_HEADER)];
    let mut seen = BTreeSet::new();
    while let Some(path) = queue.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let text = if path == Path::new(REAL_HEADER) {
            read_real_header()
        } else {
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix("#include <") else {
                continue;
            };
            let inc = rest.split('>').next().unwrap_or("");
            if inc.starts_with("infiniband/") || inc.starts_with("rdma/") {
                queue.push(Path::new("/usr/include").join(inc));
            }
        }
        let h = parse_header(&path.display().to_string(), &text);
        merged.aggregates.extend(h.aggregates);
        merged.enums.extend(h.enums);
        merged.defines.extend(h.defines);
        merged.opaque.extend(h.opaque);
        merged.prototypes.extend(h.prototypes);
        merged.definitions.extend(h.definitions);
        texts.push_str(&text);
    }
    (texts, merged)
}

/// Follows `#define NAME OTHER` aliases (verbs_api.h spells many verbs names
/// that way) to the name C finally sees.
fn resolve_alias<'h>(real: &'h Header, name: &'h str) -> &'h str {
    let mut name = name;
    for _ in 0..8 {
        let next = real
            .defines
            .iter()
            .find(|(d, _)| d == name)
            .map(|(_, v)| v.as_str());
        match next {
            Some(v) if v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => name = v,
            _ => break,
        }
    }
    name
}

fn read_generated_header() -> String {
    let path = root().join(GENERATED);
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}: run `make header`", path.display()))
}

fn parse_header(what: &str, text: &str) -> Header {
    cparse::parse(text).unwrap_or_else(|e| panic!("cannot parse {what}: {e}"))
}

fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (gcc and g++ come with `make deps`)"))
}

fn write(path: &Path, text: &str) {
    fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

// ---------------------------------------------------------------------------
// tests/layout/anonymous.txt
// ---------------------------------------------------------------------------

/// What a type name of the generated header stands for in the real one.
#[derive(Clone, Debug)]
enum Synthetic {
    /// The type of this C expression (`((struct s *)0)->member`).
    Expr(String),
    /// An unnamed member of this parent (a generated-header type name).
    Anonymous(String),
    /// An untagged enum.
    AnonymousEnum,
}

#[derive(Default)]
struct Mapping {
    synthetic: BTreeMap<String, Synthetic>,
    /// owner type name -> (real member left out, mirrored member it overlays)
    aliases: BTreeMap<String, Vec<(String, String)>>,
}

fn read_mapping() -> Mapping {
    let path = root().join("tests/layout/anonymous.txt");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut mapping = Mapping::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || panic!("{}:{}: cannot parse `{line}`", path.display(), n + 1);
        let Some((name, rule)) = line.split_once('=') else {
            bad()
        };
        let (name, rule) = (name.trim(), rule.trim());
        let (verb, arg) = rule.split_once(' ').unwrap_or((rule, ""));
        let arg = arg.trim();
        match verb {
            "expr" if !arg.is_empty() => {
                mapping
                    .synthetic
                    .insert(name.into(), Synthetic::Expr(arg.into()));
            }
            "anonymous" if arg == "enum" => {
                mapping
                    .synthetic
                    .insert(name.into(), Synthetic::AnonymousEnum);
            }
            "anonymous" if !arg.is_empty() => {
                mapping
                    .synthetic
                    .insert(name.into(), Synthetic::Anonymous(arg.into()));
            }
            "alias" if !arg.is_empty() => {
                let Some((owner, member)) = name.split_once('.') else {
                    bad()
                };
                mapping
                    .aliases
                    .entry(owner.into())
                    .or_default()
                    .push((member.into(), arg.into()));
            }
            _ => bad(),
        }
    }
    mapping
}

/// `((struct s *)0)->a.b` -> (`struct s`, [a, b]).
fn expr_path(expr: &str) -> Option<(String, Vec<String>)> {
    let rest = expr.trim().strip_prefix("((")?;
    let (tag, rest) = rest.split_once('*')?;
    let path = rest.trim_start().strip_prefix(")0)->")?;
    Some((
        cparse::normalize(tag),
        path.split('.').map(|p| p.trim().to_string()).collect(),
    ))
}

/// The generated header's `#define`s that stand for a number (or a pointer
/// constant), each name once: attribute macros (`__attribute_const`) and the
/// C++ spelling of a macro defined for both languages are left out.
fn value_defines(h: &Header) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    h.defines
        .iter()
        .filter(|(_, v)| !v.contains("__attribute__") && !v.contains("std::"))
        .filter(|(name, _)| seen.insert(name.as_str()))
        .map(|(name, _)| name.as_str())
        .collect()
}

// ---------------------------------------------------------------------------
// The probe: numbers from the generated header
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Measured {
    /// `struct x` -> (size, align)
    aggregates: BTreeMap<String, (u64, u64)>,
    /// (`struct x`, member) -> (offset, size)
    members: BTreeMap<(String, String), (u64, u64)>,
    /// enum name -> size
    enum_sizes: BTreeMap<String, u64>,
    /// constant or macro -> value
    values: BTreeMap<String, i128>,
}

impl Measured {
    fn member(&self, tag: &str, member: &str) -> (u64, u64) {
        self.members[&(tag.to_string(), member.to_string())]
    }
}

/// Compiles and runs a C program (against the generated header) that prints
/// the layout of everything the generated header defines.
fn measure(ours: &Header, dir: &Path) -> Measured {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\n\nint main(void)\n{\n",
    );
    for agg in &ours.aggregates {
        let tag = agg.tag();
        writeln!(
            c,
            "    printf(\"A\\t{tag}\\t%zu\\t%zu\\n\", sizeof({tag}), _Alignof({tag}));"
        )
        .unwrap();
        // Anonymous nested members as C names them (`spec.eth`).
        for name in agg.flat_names() {
            writeln!(
                c,
                "    printf(\"M\\t{tag}\\t{name}\\t%zu\\t%zu\\n\", offsetof({tag}, {name}), sizeof((({tag} *)0)->{name}));"
            )
            .unwrap();
        }
    }
    for e in &ours.enums {
        if !e.name.is_empty() {
            let name = &e.name;
            writeln!(
                c,
                "    printf(\"E\\t{name}\\t%zu\\n\", sizeof(enum {name}));"
            )
            .unwrap();
        }
        for k in &e.constants {
            writeln!(c, "    printf(\"V\\t{k}\\t%lld\\n\", (long long)({k}));").unwrap();
        }
    }
    for name in value_defines(ours) {
        writeln!(
            c,
            "    printf(\"V\\t{name}\\t%lld\\n\", (long long)({name}));"
        )
        .unwrap();
    }
    c.push_str("    return 0;\n}\n");

    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    write(&src, &c);
    let built = output(
        Command::new("gcc")
            .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg(format!("-I{}", root().join("include").display())),
    );
    assert!(
        built.status.success(),
        "the layout probe does not compile against {GENERATED} ({}):\n{}",
        src.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = output(&mut Command::new(&exe));
    assert!(ran.status.success(), "{} failed", exe.display());

    let mut measured = Measured::default();
    for line in String::from_utf8_lossy(&ran.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let num = |s: &str| -> u64 { s.parse().unwrap_or_else(|_| panic!("probe: {line}")) };
        match f.as_slice() {
            ["A", tag, size, align] => {
                measured
                    .aggregates
                    .insert(tag.to_string(), (num(size), num(align)));
            }
            ["M", tag, member, off, size] => {
                measured
                    .members
                    .insert((tag.to_string(), member.to_string()), (num(off), num(size)));
            }
            ["E", name, size] => {
                measured.enum_sizes.insert(name.to_string(), num(size));
            }
            ["V", name, value] => {
                let v = value.parse().unwrap_or_else(|_| panic!("probe: {line}"));
                measured.values.insert(name.to_string(), v);
            }
            _ => panic!("probe printed an unexpected line: {line}"),
        }
    }
    measured
}

// ---------------------------------------------------------------------------
// The check: the same numbers, asserted against the real header
// ---------------------------------------------------------------------------

/// The C file of `_Static_assert`s, with each line's meaning kept for errors.
struct Checks {
    c: String,
    /// line number (1-based) -> what that line checks
    lines: BTreeMap<usize, String>,
}

impl Checks {
    fn new() -> Self {
        let c = format!("#include <stddef.h>\n#include <{REAL_HEADER}>\n\n");
        Checks {
            c,
            lines: BTreeMap::new(),
        }
    }

    fn line(&mut self, text: &str, what: &str) {
        let n = self.c.lines().count() + 1;
        self.c.push_str(text);
        self.c.push('\n');
        self.lines.insert(n, what.to_string());
    }

    /// One `_Static_assert(cond)`; `what` names what is checked, in words.
    fn check(&mut self, cond: &str, what: &str) {
        let text = format!("_Static_assert({cond}, \"{what}\");");
        self.line(&text, what);
    }
}

/// How a generated-header type is reached in the real header.
enum RealType {
    /// A C type name usable in `sizeof`, `offsetof`, casts.
    Named(String),
    /// Members live directly in this parent's real type.
    Anonymous { parent: String },
}

struct Comparison<'a> {
    ours: &'a Header,
    real: &'a Header,
    /// The real headers' text, to tell "declared but incomplete" from "absent".
    real_text: &'a str,
    mapping: &'a Mapping,
    measured: &'a Measured,
    checks: Checks,
    problems: Vec<String>,
    anon_count: usize,
}

impl<'a> Comparison<'a> {
    fn real_type(&mut self, agg: &Aggregate) -> Option<RealType> {
        match self.mapping.synthetic.get(&agg.name) {
            Some(Synthetic::Expr(expr)) => Some(RealType::Named(format!("__typeof__({expr})"))),
            Some(Synthetic::Anonymous(parent)) => Some(RealType::Anonymous {
                parent: parent.clone(),
            }),
            Some(Synthetic::AnonymousEnum) => {
                self.problems.push(format!(
                    "{}: tests/layout/anonymous.txt maps it as an enum",
                    agg.tag()
                ));
                None
            }
            None if self.real_aggregate(agg.kind, &agg.name).is_some() => {
                Some(RealType::Named(agg.tag()))
            }
            None => {
                let why = if self.real_text.contains(&format!("{} ", agg.tag())) {
                    "only declared (incomplete) in the real verbs.h, so it must have no body: \
                     mirror it as a Rust struct without #[repr(C)] so cbindgen declares it the same way"
                } else {
                    "not defined in the real verbs.h: if it stands for an anonymous C type, \
                     map it in tests/layout/anonymous.txt"
                };
                self.problems.push(format!("{}: {why}", agg.tag()));
                None
            }
        }
    }

    fn real_aggregate(&self, kind: Kind, name: &str) -> Option<&'a Aggregate> {
        self.real.aggregate(kind, resolve_alias(self.real, name))
    }

    /// The real header's body for a generated-header type, for member lists.
    fn real_body(&self, agg: &Aggregate) -> Option<&'a Aggregate> {
        match self.mapping.synthetic.get(&agg.name) {
            Some(Synthetic::Expr(expr)) => {
                let (tag, path) = expr_path(expr)?;
                let (kind, name) = tag.split_once(' ')?;
                let kind = if kind == "union" {
                    Kind::Union
                } else {
                    Kind::Struct
                };
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                self.real_aggregate(kind, name)?.nested_at(&path)
            }
            Some(_) => None,
            None => self.real_aggregate(agg.kind, &agg.name),
        }
    }

    /// The generated-header type a member is declared with, if it is one of
    /// the anonymous stand-ins of `parent`.
    fn anonymous_member_type(&self, ty: &str, parent: &str) -> Option<&'a Aggregate> {
        let (kind, name) = ty.split_once(' ')?;
        if kind != "struct" && kind != "union" {
            return None;
        }
        match self.mapping.synthetic.get(name) {
            Some(Synthetic::Anonymous(p)) if p == parent => self.ours.aggregate_named(name),
            _ => None,
        }
    }

    fn compare_aggregate(&mut self, agg: &'a Aggregate) {
        let tag = agg.tag();
        let Some(&(size, align)) = self.measured.aggregates.get(&tag) else {
            self.problems
                .push(format!("{tag}: the probe did not measure it"));
            return;
        };
        match self.real_type(agg) {
            None => {}
            Some(RealType::Named(t)) => {
                self.checks.check(
                    &format!("sizeof({t}) == {size}"),
                    &format!("{tag}: size is {size}"),
                );
                self.checks.check(
                    &format!("_Alignof({t}) == {align}"),
                    &format!("{tag}: alignment is {align}"),
                );
                for m in &agg.members {
                    if let (true, Some(inner)) = (m.name.is_empty(), &m.nested) {
                        // An unnamed union/struct in place: C names its members.
                        for k in inner.flat_names() {
                            let (koff, ksize) = self.measured.member(&tag, &k);
                            self.member_check(&t, &tag, &k, koff, ksize);
                        }
                        continue;
                    }
                    let (off, msize) = self.measured.member(&tag, &m.name);
                    if let Some(anon) = self.anonymous_member_type(&m.ty, &agg.name) {
                        // C code names the anonymous union's members directly.
                        let anon_tag = anon.tag();
                        for k in &anon.members {
                            let (koff, ksize) = self.measured.member(&anon_tag, &k.name);
                            self.member_check(&t, &tag, &k.name, off + koff, ksize);
                        }
                    } else {
                        self.member_check(&t, &tag, &m.name, off, msize);
                    }
                }
                for (member, overlays) in self.mapping.aliases.get(&agg.name).into_iter().flatten()
                {
                    let Some(&(off, msize)) =
                        self.measured.members.get(&(tag.clone(), overlays.clone()))
                    else {
                        self.problems.push(format!(
                            "{tag}: anonymous.txt says {member} overlays {overlays}, which it does not have"
                        ));
                        continue;
                    };
                    self.member_check(&t, &tag, member, off, msize);
                }
                self.compare_member_names(agg);
            }
            Some(RealType::Anonymous { parent }) => {
                // Rebuild the anonymous aggregate from the real members'
                // types; its size and alignment must match ours.
                let Some(parent_agg) = self.ours.aggregate_named(&parent) else {
                    self.problems
                        .push(format!("{tag}: its parent {parent} is not in {GENERATED}"));
                    return;
                };
                let Some(RealType::Named(pt)) = self.real_type(parent_agg) else {
                    self.problems.push(format!(
                        "{tag}: its parent {parent} has no real type to check against"
                    ));
                    return;
                };
                self.anon_count += 1;
                let alias = format!("layout_anonymous_{}", self.anon_count);
                let mut def = format!("typedef {} {{", agg.kind.keyword());
                for k in &agg.members {
                    write!(def, " __typeof__((({pt} *)0)->{0}) {0};", k.name).unwrap();
                }
                write!(def, " }} {alias};").unwrap();
                self.checks
                    .line(&def, &format!("{tag}: rebuilt from {parent}'s members"));
                self.checks.check(
                    &format!("sizeof({alias}) == {size}"),
                    &format!("{tag} (anonymous in {parent}): size is {size}"),
                );
                self.checks.check(
                    &format!("_Alignof({alias}) == {align}"),
                    &format!("{tag} (anonymous in {parent}): alignment is {align}"),
                );
            }
        }
    }

    fn member_check(&mut self, t: &str, tag: &str, member: &str, off: u64, size: u64) {
        self.checks.check(
            &format!("offsetof({t}, {member}) == {off}"),
            &format!("{tag}: {member} is at offset {off}"),
        );
        self.checks.check(
            &format!("sizeof((({t} *)0)->{member}) == {size}"),
            &format!("{tag}: {member} is {size} bytes"),
        );
    }

    /// Every real member is mirrored and nothing else is.
    fn compare_member_names(&mut self, agg: &Aggregate) {
        let tag = agg.tag();
        let Some(real) = self.real_body(agg) else {
            self.problems.push(format!(
                "{tag}: cannot find its body in the real verbs.h to compare member lists"
            ));
            return;
        };
        let mut ours = BTreeSet::new();
        for m in &agg.members {
            match (self.anonymous_member_type(&m.ty, &agg.name), &m.nested) {
                (Some(anon), _) => ours.extend(anon.members.iter().map(|k| k.name.clone())),
                (None, Some(inner)) if m.name.is_empty() => ours.extend(inner.flat_names()),
                (None, _) => {
                    ours.insert(m.name.clone());
                }
            }
        }
        for (member, _) in self.mapping.aliases.get(&agg.name).into_iter().flatten() {
            ours.insert(member.clone());
        }
        let theirs: BTreeSet<String> = real.flat_names().into_iter().collect();
        for missing in theirs.difference(&ours) {
            self.problems.push(format!(
                "{tag}: member {missing} of the real verbs.h is not mirrored"
            ));
        }
        for extra in ours.difference(&theirs) {
            self.problems
                .push(format!("{tag}: member {extra} is not in the real verbs.h"));
        }
    }

    fn compare_enums(&mut self) {
        for e in &self.ours.enums {
            let label = if e.name.is_empty() {
                "enum (untagged)".to_string()
            } else {
                format!("enum {}", e.name)
            };
            let anonymous = matches!(
                self.mapping.synthetic.get(&e.name),
                Some(Synthetic::AnonymousEnum)
            );
            if !e.name.is_empty() && !anonymous {
                match self.real.enum_named(resolve_alias(self.real, &e.name)) {
                    Some(real) => {
                        let size = self.measured.enum_sizes[&e.name];
                        self.checks.check(
                            &format!("sizeof(enum {}) == {size}", e.name),
                            &format!("{label}: size is {size}"),
                        );
                        // Compare as C code sees them: through `#define` aliases.
                        let ours: BTreeSet<&str> = e
                            .constants
                            .iter()
                            .map(|k| resolve_alias(self.real, k))
                            .collect();
                        let theirs: BTreeSet<&str> =
                            real.constants.iter().map(String::as_str).collect();
                        // A Rust enum cannot repeat a value (the ESP flags' zero
                        // defaults): such a constant may be a `#define` instead,
                        // whose value is checked below.
                        let defined: BTreeSet<&str> = value_defines(self.ours)
                            .into_iter()
                            .map(|d| resolve_alias(self.real, d))
                            .collect();
                        for missing in theirs.difference(&ours) {
                            if defined.contains(missing) {
                                continue;
                            }
                            self.problems.push(format!(
                                "{label}: constant {missing} of the real verbs.h is not mirrored"
                            ));
                        }
                        for extra in ours.difference(&theirs) {
                            self.problems
                                .push(format!("{label}: constant {extra} is not in the real enum"));
                        }
                    }
                    None => self.problems.push(format!(
                        "{label}: not in the real verbs.h; if it stands for an untagged enum, \
                         map it in tests/layout/anonymous.txt (`NAME = anonymous enum`)"
                    )),
                }
            }
            for k in &e.constants {
                let v = self.measured.values[k];
                self.checks.check(
                    &format!("(long long)({k}) == {v}LL"),
                    &format!("{label}: {k} is {v}"),
                );
            }
        }
        for name in value_defines(self.ours) {
            let v = self.measured.values[name];
            self.checks.check(
                &format!("(long long)({name}) == {v}LL"),
                &format!("#define {name}: is {v}"),
            );
        }
    }
}

/// Compiles `src` with `cmd`; on failure, names what each failing line checks.
fn compile_checks(checks: &Checks, src: &Path, mut cmd: Command) -> Vec<String> {
    let out = output(cmd.arg(src));
    if out.status.success() {
        return Vec::new();
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = src.display().to_string();
    let mut problems = Vec::new();
    let mut reported = BTreeSet::new();
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix(&format!("{file}:")) else {
            continue;
        };
        let mut parts = rest.splitn(3, ':');
        let (Some(n), Some(_col), Some(msg)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        // One error per line: gcc's follow-on errors add nothing.
        if !msg.trim_start().starts_with("error") || !reported.insert(n.to_string()) {
            continue;
        }
        let what = n
            .parse::<usize>()
            .ok()
            .and_then(|n| checks.lines.get(&n))
            .map_or("?", String::as_str);
        problems.push(format!(
            "{what} in {GENERATED}, not in {REAL_HEADER}: {}",
            msg.trim()
        ));
    }
    if problems.is_empty() {
        problems.push(format!("{} does not compile:\n{stderr}", src.display()));
    }
    problems
}

fn fail_with(problems: &[String], context: &str) {
    if !problems.is_empty() {
        panic!(
            "{context}: {} problem(s):\n  - {}",
            problems.len(),
            problems.join("\n  - ")
        );
    }
}

#[test]
fn generated_header_matches_real_verbs_h() {
    let (real_text, real) = read_real_headers();
    let ours = parse_header(GENERATED, &read_generated_header());
    let mapping = read_mapping();
    let dir = scratch("layout");
    let measured = measure(&ours, &dir);
    assert!(
        !ours.aggregates.is_empty() && !ours.enums.is_empty(),
        "{GENERATED} defines no structs or enums"
    );

    let mut cmp = Comparison {
        ours: &ours,
        real: &real,
        real_text: &real_text,
        mapping: &mapping,
        measured: &measured,
        checks: Checks::new(),
        problems: Vec::new(),
        anon_count: 0,
    };
    for agg in &ours.aggregates {
        cmp.compare_aggregate(agg);
    }
    cmp.compare_enums();
    for tag in &ours.opaque {
        let (kind, name) = tag.split_once(' ').unwrap_or(("struct", tag));
        let kind = if kind == "union" {
            Kind::Union
        } else {
            Kind::Struct
        };
        if ours.aggregate(kind, name).is_none() && cmp.real_aggregate(kind, name).is_some() {
            cmp.problems.push(format!(
                "{tag}: only declared (incomplete) in {GENERATED}, but the real verbs.h defines it, \
                 so C code using it would not compile: mirror its members"
            ));
        }
    }
    // The other direction: every struct, union and enum rdma-core's verbs.h
    // itself defines is in ours (and so measured above); the constants of
    // its untagged enums are there as constants or macros.
    let own = parse_header(REAL_HEADER, &read_real_header());
    let our_constants: BTreeSet<&str> = ours
        .enums
        .iter()
        .flat_map(|e| e.constants.iter().map(String::as_str))
        .chain(ours.defines.iter().map(|(n, _)| n.as_str()))
        .collect();
    for agg in own.aggregates.iter().filter(|a| !a.name.is_empty()) {
        if ours.aggregate(agg.kind, &agg.name).is_none() {
            cmp.problems.push(format!(
                "{}: defined in {REAL_HEADER}, missing from {GENERATED}",
                agg.tag()
            ));
        }
    }
    for e in &own.enums {
        if !e.name.is_empty() && ours.enum_named(&e.name).is_none() {
            cmp.problems.push(format!(
                "enum {}: defined in {REAL_HEADER}, missing from {GENERATED}",
                e.name
            ));
        }
        for k in e
            .constants
            .iter()
            .filter(|k| !our_constants.contains(k.as_str()))
        {
            cmp.problems.push(format!(
                "{k}: defined in {REAL_HEADER}, missing from {GENERATED}"
            ));
        }
    }
    for name in mapping.synthetic.keys() {
        let known = ours.aggregate_named(name).is_some() || ours.enum_named(name).is_some();
        if !known {
            cmp.problems.push(format!(
                "tests/layout/anonymous.txt maps {name}, which {GENERATED} does not define"
            ));
        }
    }

    let src = dir.join("check_real.c");
    write(&src, &cmp.checks.c);
    let mut gcc = Command::new("gcc");
    gcc.args([
        "-std=gnu11",
        "-Wall",
        "-Werror",
        "-fsyntax-only",
        "-fmax-errors=0",
    ]);
    let mut problems = cmp.problems;
    problems.extend(compile_checks(&cmp.checks, &src, gcc));
    fail_with(
        &problems,
        &format!(
            "{GENERATED} differs from {REAL_HEADER} (checks in {})",
            src.display()
        ),
    );
}

/// The function name in a normalised declaration head: the identifier
/// before the parameter list.
fn function_name(decl: &str) -> Option<(usize, &str)> {
    let open = decl.find('(')?;
    let head = decl[..open].trim_end();
    let start = head
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    Some((start, &head[start..]))
}

#[test]
fn function_declarations_match_real_verbs_h() {
    // Only for its message when libibverbs-dev is missing.
    read_real_header();
    let ours = parse_header(GENERATED, &read_generated_header());
    let path = root().join("tests/layout/prototypes.txt");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let exceptions: BTreeMap<&str, &str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, why) = l.split_once(':').unwrap_or((l, ""));
            (name.trim(), why.trim())
        })
        .collect();

    let mut checks = Checks::new();
    let mut problems = Vec::new();
    let mut declared = BTreeSet::new();
    let inline_heads = ours.definitions.iter().map(|d| {
        d.trim_start_matches("static ")
            .trim_start_matches("inline ")
            .to_string()
    });
    for decl in ours.prototypes.iter().cloned().chain(inline_heads) {
        let Some((start, name)) = function_name(&decl) else {
            problems.push(format!("cannot find the function name in `{decl}`"));
            continue;
        };
        declared.insert(name.to_string());
        if exceptions.contains_key(name) {
            continue;
        }
        // A redeclaration must have a compatible type. Parenthesising the
        // name keeps rdma-core's function-like macros (ibv_reg_mr,
        // ibv_query_port) from expanding.
        let end = start + name.len();
        let redecl = format!("{}({}){};", &decl[..start], name, &decl[end..]);
        checks.line(&redecl, &format!("{name}()'s declaration"));
    }
    for name in exceptions.keys() {
        if !declared.contains(*name) {
            problems.push(format!(
                "tests/layout/prototypes.txt lists {name}, which {GENERATED} does not declare"
            ));
        }
    }
    let dir = scratch("prototypes");
    let src = dir.join("check_prototypes.c");
    write(&src, &checks.c);
    let mut gcc = Command::new("gcc");
    gcc.args([
        "-std=gnu11",
        "-Wall",
        "-Werror",
        "-fsyntax-only",
        "-fmax-errors=0",
    ]);
    problems.extend(compile_checks(&checks, &src, gcc));
    fail_with(
        &problems,
        &format!(
            "function declarations in {GENERATED} conflict with {REAL_HEADER} (checks in {}; \
             deliberate differences go in tests/layout/prototypes.txt)",
            src.display()
        ),
    );
}

// ---------------------------------------------------------------------------
// Freshness
// ---------------------------------------------------------------------------

/// cbindgen from PATH, else from cargo's bin directory.
fn find_cbindgen() -> PathBuf {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("cbindgen"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(cargo_home) = std::env::var_os("CARGO_HOME") {
        candidates.push(Path::new(&cargo_home).join("bin/cbindgen"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join(".cargo/bin/cbindgen"));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("cbindgen not found on PATH or in ~/.cargo/bin: `make deps` installs cbindgen {PINNED_CBINDGEN}")
        })
}

#[test]
fn committed_header_is_fresh() {
    let cbindgen = find_cbindgen();
    let version = output(Command::new(&cbindgen).arg("--version"));
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    assert_eq!(
        version,
        format!("cbindgen {PINNED_CBINDGEN}"),
        "{} is not the pinned cbindgen {PINNED_CBINDGEN}: `make deps` installs it",
        cbindgen.display()
    );

    let fresh = scratch("fresh").join("verbs.h");
    let _ = fs::remove_file(&fresh);
    let out = output(
        Command::new(&cbindgen)
            .current_dir(root())
            .args([
                "--config",
                "cbindgen.toml",
                "--crate",
                "ibv-shim",
                "--output",
            ])
            .arg(&fresh),
    );
    assert!(
        out.status.success(),
        "cbindgen failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh_text = fs::read(&fresh).unwrap_or_else(|e| panic!("{}: {e}", fresh.display()));
    let committed = fs::read(root().join(GENERATED)).unwrap_or_default();
    if fresh_text != committed {
        let fresh_s = String::from_utf8_lossy(&fresh_text);
        let committed_s = String::from_utf8_lossy(&committed);
        let first = fresh_s
            .lines()
            .zip(committed_s.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| fresh_s.lines().count().min(committed_s.lines().count()));
        panic!(
            "{GENERATED} is stale: run `make header` (first difference at line {}; fresh output in {})",
            first + 1,
            fresh.display()
        );
    }
}

// ---------------------------------------------------------------------------
// Compiling against the header
// ---------------------------------------------------------------------------

#[test]
fn header_compiles_as_c_and_cpp() {
    let include = format!("-I{}", root().join("include").display());
    let strict = ["-Wall", "-Wextra", "-Werror", "-fsyntax-only"];
    let sources = [
        root().join("tests/layout/api_use.c"),
        // The seed document's programs, which must compile unchanged.
        root().join("c_examples/list_devices.c"),
        root().join("c_examples/open_close.c"),
    ];
    let mut problems = Vec::new();
    for src in &sources {
        let modes: [(&str, &[&str]); 3] = [
            ("gcc", &["-std=c11"]),
            ("gcc", &["-std=gnu99"]),
            ("g++", &["-x", "c++"]),
        ];
        for (compiler, mode) in modes {
            let out = output(
                Command::new(compiler)
                    .args(strict)
                    .args(mode)
                    .arg(&include)
                    .arg(src),
            );
            if !out.status.success() {
                problems.push(format!(
                    "{compiler} {} {}:\n{}",
                    mode.join(" "),
                    src.display(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    fail_with(&problems, &format!("{GENERATED} does not compile"));
}

// ---------------------------------------------------------------------------
// Coverage of the export list
// ---------------------------------------------------------------------------

/// Every type verbs-abi defines reaches the header (cbindgen.toml's
/// `[export] include` list is kept by hand).
#[test]
fn every_mirrored_type_is_in_the_header() {
    let ours = parse_header(GENERATED, &read_generated_header());
    let src_dir = root().join("crates/verbs-abi/src");
    let entries = fs::read_dir(&src_dir).unwrap_or_else(|e| panic!("{}: {e}", src_dir.display()));
    let mut missing = Vec::new();
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
    {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some("pub"), Some(kind), Some(name)) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            let name = name.trim_end_matches(['{', '<', ';']);
            // A macro's template (`raw.rs`'s newtypes, which are not C types).
            if name.starts_with('$') {
                continue;
            }
            let present = match kind {
                "struct" | "union" => {
                    ours.aggregate_named(name).is_some()
                        || ours.opaque.iter().any(|o| o.ends_with(&format!(" {name}")))
                }
                "enum" => ours.enum_named(name).is_some(),
                _ => continue,
            };
            if !present {
                let file = file.file_name().unwrap_or_default().to_string_lossy();
                missing.push(format!("{kind} {name} ({file})"));
            }
        }
    }
    fail_with(
        &missing,
        &format!("types missing from {GENERATED}: add them to `[export] include` in cbindgen.toml"),
    );
}
