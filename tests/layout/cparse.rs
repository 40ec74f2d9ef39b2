//! Just enough of a C declaration parser for `verbs.h`: top-level struct,
//! union and enum definitions (with nested and anonymous members), object-like
//! `#define`s and function prototypes. It handles cbindgen's regular output
//! and rdma-core's hand-written header; it is not a general C parser (no
//! typedef tracking, no macro expansion), and it does not need to be.

/// `struct` or `union`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Struct,
    Union,
}

impl Kind {
    pub fn keyword(self) -> &'static str {
        match self {
            Kind::Struct => "struct",
            Kind::Union => "union",
        }
    }
}

/// One member of a struct or union.
#[derive(Clone, Debug)]
pub struct Member {
    /// Empty for an anonymous nested struct/union.
    pub name: String,
    /// The declaration text before the name, whitespace-normalised
    /// (`struct ibv_send_wr_wr`, `uint32_t`, ...); empty for nested bodies.
    pub ty: String,
    /// The body of a nested struct/union declared in place.
    pub nested: Option<Aggregate>,
}

/// A struct or union body.
#[derive(Clone, Debug)]
pub struct Aggregate {
    pub kind: Kind,
    pub name: String,
    pub members: Vec<Member>,
}

impl Aggregate {
    /// `struct ibv_wc`, `union ibv_gid`.
    pub fn tag(&self) -> String {
        format!("{} {}", self.kind.keyword(), self.name)
    }

    /// Member names, with anonymous nested members flattened into this level
    /// (C lets code name them directly).
    pub fn flat_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for m in &self.members {
            match (&m.nested, m.name.is_empty()) {
                (Some(inner), true) => out.extend(inner.flat_names()),
                _ => out.push(m.name.clone()),
            }
        }
        out
    }

    /// The nested body reached by a member path (`["wr", "rdma"]`).
    pub fn nested_at(&self, path: &[&str]) -> Option<&Aggregate> {
        let Some((first, rest)) = path.split_first() else {
            return Some(self);
        };
        for m in &self.members {
            let Some(inner) = &m.nested else { continue };
            if m.name == *first {
                return inner.nested_at(rest);
            }
            // A member of an anonymous nested body is reachable by name too.
            if m.name.is_empty() {
                if let Some(found) = inner.nested_at(path) {
                    return Some(found);
                }
            }
        }
        None
    }
}

/// An enum definition; `name` is empty for `enum { ... }`.
#[derive(Clone, Debug)]
pub struct Enum {
    pub name: String,
    pub constants: Vec<String>,
}

/// Everything parsed from one header.
#[derive(Default, Debug)]
pub struct Header {
    pub aggregates: Vec<Aggregate>,
    pub enums: Vec<Enum>,
    /// Object-like macros with a non-empty value: (name, value).
    pub defines: Vec<(String, String)>,
    /// Tags declared without a body (`struct foo;`).
    pub opaque: Vec<String>,
    /// Function declarations (not definitions), whitespace-normalised, without `;`.
    pub prototypes: Vec<String>,
    /// The heads of function definitions (`static inline int f(...)`), normalised.
    pub definitions: Vec<String>,
}

impl Header {
    pub fn aggregate(&self, kind: Kind, name: &str) -> Option<&Aggregate> {
        self.aggregates
            .iter()
            .find(|a| a.kind == kind && a.name == name)
    }

    pub fn aggregate_named(&self, name: &str) -> Option<&Aggregate> {
        self.aggregates.iter().find(|a| a.name == name)
    }

    pub fn enum_named(&self, name: &str) -> Option<&Enum> {
        self.enums
            .iter()
            .find(|e| !e.name.is_empty() && e.name == name)
    }
}

/// Parses a header's text. Errors name what could not be understood.
pub fn parse(text: &str) -> Result<Header, String> {
    let mut header = Header::default();
    let code = preprocess(&strip_comments(text), &mut header.defines);
    let code = strip_attributes(&code);
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if bytes[i] == b'}' {
            // The close of an `extern "C" {` block.
            i += 1;
            continue;
        }
        let (stop, at) = scan_to(bytes, i, b";{")
            .ok_or_else(|| format!("unterminated declaration: {}", excerpt(&code[i..])))?;
        let prefix = normalize(&code[i..at]);
        if stop == b';' {
            classify_statement(&prefix, &mut header);
            i = at + 1;
            continue;
        }
        let close = matching_brace(bytes, at)
            .ok_or_else(|| format!("unbalanced braces after: {prefix}"))?;
        let body = &code[at + 1..close];
        if prefix == "extern \"C\"" {
            // Transparent: parse its contents at top level.
            i = at + 1;
            continue;
        }
        let words: Vec<&str> = prefix.split(' ').collect();
        match words.as_slice() {
            ["struct", name] | ["union", name] => {
                let kind = if words[0] == "struct" {
                    Kind::Struct
                } else {
                    Kind::Union
                };
                header.aggregates.push(Aggregate {
                    kind,
                    name: name.to_string(),
                    members: parse_members(body)?,
                });
                i = skip_past_semicolon(bytes, close + 1);
            }
            ["enum", name] => {
                header.enums.push(Enum {
                    name: name.to_string(),
                    constants: parse_enum_body(body),
                });
                i = skip_past_semicolon(bytes, close + 1);
            }
            ["enum"] => {
                header.enums.push(Enum {
                    name: String::new(),
                    constants: parse_enum_body(body),
                });
                i = skip_past_semicolon(bytes, close + 1);
            }
            // A function definition (`static inline ...`): no `;` follows.
            _ => {
                header.definitions.push(prefix);
                i = close + 1;
            }
        }
    }
    Ok(header)
}

fn classify_statement(prefix: &str, header: &mut Header) {
    if prefix.is_empty() || prefix.starts_with("typedef ") {
        return;
    }
    let words: Vec<&str> = prefix.split(' ').collect();
    if let ["struct" | "union", name] = words.as_slice() {
        header.opaque.push(format!("{} {}", words[0], name));
        return;
    }
    if prefix.contains('(') {
        header.prototypes.push(prefix.to_string());
    }
}

fn parse_members(body: &str) -> Result<Vec<Member>, String> {
    let mut members = Vec::new();
    for decl in split_top(body, b';') {
        let decl = decl.trim();
        if decl.is_empty() {
            continue;
        }
        if let Some(open) = decl.find('{') {
            let bytes = decl.as_bytes();
            let close = matching_brace(bytes, open)
                .ok_or_else(|| format!("unbalanced nested member: {}", excerpt(decl)))?;
            let head = normalize(&decl[..open]);
            let kind = if head.starts_with("union") {
                Kind::Union
            } else if head.starts_with("struct") {
                Kind::Struct
            } else {
                return Err(format!("unexpected nested member: {}", excerpt(decl)));
            };
            let inner = Aggregate {
                kind,
                name: String::new(),
                members: parse_members(&decl[open + 1..close])?,
            };
            members.push(Member {
                name: declarator_name(&decl[close + 1..]),
                ty: String::new(),
                nested: Some(inner),
            });
            continue;
        }
        let decl = normalize(decl);
        // rdma-core's `RDMA_UAPI_PTR(type, name)`: a pointer that shares its
        // 8 bytes with a u64 view; C code names it `name`.
        if let Some(args) = decl
            .strip_prefix("RDMA_UAPI_PTR")
            .map(str::trim)
            .and_then(|r| r.strip_prefix('('))
            .and_then(|r| r.strip_suffix(')'))
        {
            if let Some((ty, name)) = args.rsplit_once(',') {
                members.push(Member {
                    name: name.trim().to_string(),
                    ty: normalize(ty),
                    nested: None,
                });
                continue;
            }
        }
        if let Some(name) = fn_pointer_name(&decl) {
            members.push(Member {
                name,
                ty: decl.clone(),
                nested: None,
            });
            continue;
        }
        // `T a, b[4];`: the first declarator carries the type.
        let mut parts = split_top(&decl, b',').into_iter();
        let first = parts.next().unwrap_or_default();
        let first = first.trim();
        let name = declarator_name(first);
        // The declarator without array bounds or bit-field width ends in the name.
        let base = first.split(['[', ':']).next().unwrap_or("").trim_end();
        let ty = normalize(&base[..base.len() - name.len()]);
        members.push(Member {
            name,
            ty: ty.clone(),
            nested: None,
        });
        for more in parts {
            members.push(Member {
                name: declarator_name(&more),
                ty: ty.clone(),
                nested: None,
            });
        }
    }
    Ok(members)
}

fn parse_enum_body(body: &str) -> Vec<String> {
    split_top(body, b',')
        .into_iter()
        .map(|c| c.split('=').next().unwrap_or("").trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// The identifier a declarator declares: `*name`, `name[4]`, `name : 3`.
fn declarator_name(decl: &str) -> String {
    let decl = decl.split('[').next().unwrap_or("");
    let decl = decl.split(':').next().unwrap_or("");
    let ident: String = decl
        .trim()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    ident.chars().rev().collect()
}

/// `ret (*name)(args)` -> `name`.
fn fn_pointer_name(decl: &str) -> Option<String> {
    let start = decl.find("(*")? + 2;
    let rest = &decl[start..];
    let end = rest.find(')')?;
    Some(rest[..end].trim().to_string())
}

/// Removes `/* */` and `//` comments, leaving string literals alone.
pub fn strip_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(bytes.len());
                out.push_str(&text[start..i]);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |e| i + 2 + e + 2);
                // Keep line structure, so preprocessor lines stay lines.
                out.extend(text[i..end].chars().filter(|c| *c == '\n'));
                out.push(' ');
                i = end;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = text[i..].find('\n').map_or(bytes.len(), |e| i + e);
            }
            _ => {
                let ch = text[i..].chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    out
}

/// Joins continued lines, records object-like `#define`s, drops every
/// preprocessor line. Both branches of conditionals are kept, which is fine
/// for declarations (both headers only put includes and macros there), except
/// the C++-only `extern "C"` wrapper, which the top-level scan skips.
fn preprocess(text: &str, defines: &mut Vec<(String, String)>) -> String {
    let joined = text.replace("\\\n", " ");
    let mut out = String::with_capacity(joined.len());
    for line in joined.lines() {
        let trimmed = line.trim_start();
        if let Some(directive) = trimmed.strip_prefix('#') {
            let directive = directive.trim_start();
            if let Some(rest) = directive.strip_prefix("define") {
                let rest = rest.trim_start();
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let after = &rest[name.len()..];
                // Function-like macros (`NAME(`) are not constants.
                if !name.is_empty() && !after.starts_with('(') && !after.trim().is_empty() {
                    defines.push((name, normalize(after)));
                }
            }
            out.push('\n');
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Drops `__attribute__((...))` and rdma-core's `__attribute_const`.
fn strip_attributes(code: &str) -> String {
    let mut out = code.replace("__attribute_const", " ");
    while let Some(at) = out.find("__attribute__") {
        let bytes = out.as_bytes();
        let mut j = at + "__attribute__".len();
        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
            j += 1;
        }
        let mut end = j;
        if bytes.get(j) == Some(&b'(') {
            let mut depth = 0usize;
            for (k, b) in bytes.iter().enumerate().skip(j) {
                match b {
                    b'(' => depth += 1,
                    b')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
        }
        out.replace_range(at..end.max(j), " ");
    }
    out
}

/// From `i`, finds the first byte of `stops` outside parentheses.
fn scan_to(bytes: &[u8], mut i: usize, stops: &[u8]) -> Option<(u8, usize)> {
    let mut parens = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => parens += 1,
            b')' => parens = parens.saturating_sub(1),
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += 1;
                }
            }
            b if parens == 0 && stops.contains(&b) => return Some((b, i)),
            _ => {}
        }
        i += 1;
    }
    None
}

fn matching_brace(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, b) in bytes.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

fn skip_past_semicolon(bytes: &[u8], from: usize) -> usize {
    scan_to(bytes, from, b";").map_or(bytes.len(), |(_, at)| at + 1)
}

/// Splits on `sep` outside braces, brackets and parentheses.
fn split_top(text: &str, sep: u8) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0isize;
    let mut start = 0;
    for (k, b) in text.bytes().enumerate() {
        match b {
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => depth -= 1,
            _ if b == sep && depth == 0 => {
                parts.push(text[start..k].to_string());
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].to_string());
    parts
}

/// Collapses whitespace runs to one space and trims.
pub fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn excerpt(text: &str) -> String {
    normalize(&text.chars().take(80).collect::<String>())
}
