//! The module graph has no cycles: each `src/` module of the
//! shim and of ibv-sim may use the modules below it, never one that uses it
//! back; and no file of the shim or of ibv-sim is over 700 lines. Reads the sources as text: every `crate::x` / `$crate::x` path and
//! `use crate::{x, ..}` group is an edge from the file's top-level module to
//! `x`. Any cycle fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`None` for the crate root).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// The modules a source text names through `crate::`.
fn references(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::c, d}`: the first name of each entry at depth 0.
                let (mut depth, mut start) = (0, true);
                let mut name = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => start = true,
                        c if start && (c.is_alphanumeric() || c == '_') => name.push(c),
                        _ => {
                            if !name.is_empty() {
                                out.insert(std::mem::take(&mut name));
                            }
                            if !c.is_whitespace() {
                                start = false;
                            }
                        }
                    }
                }
                if !name.is_empty() {
                    out.insert(name);
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        }
    }
    out.retain(|m| modules.contains(m));
    out
}

type Graph = BTreeMap<String, BTreeSet<String>>;

fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_module(src, f)).collect();
    let mut graph = Graph::new();
    for f in &files {
        let Some(from) = top_module(src, f) else {
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        let to = references(&text, &modules);
        let edges = graph.entry(from.clone()).or_default();
        edges.extend(to.into_iter().filter(|m| *m != from));
    }
    graph
}

/// Tarjan's strongly connected components with more than one module.
fn cycles(graph: &Graph) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// One path around a cycle group, for the message: `a -> b -> a`.
fn describe(graph: &Graph, scc: &BTreeSet<String>) -> String {
    let mut lines = Vec::new();
    for from in scc {
        let to: Vec<&str> = graph[from]
            .iter()
            .filter(|m| scc.contains(*m))
            .map(String::as_str)
            .collect();
        lines.push(format!("{from} -> {}", to.join(", ")));
    }
    lines.join("; ")
}

fn check(krate: &str, src: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    let graph = module_graph(&root);
    cycles(&graph)
        .iter()
        .map(|scc| format!("{krate}: {:?}: {}", scc, describe(&graph, scc)))
        .collect()
}

#[test]
fn no_module_cycles() {
    let mut problems = check("ibv-shim", "src");
    problems.extend(check("ibv-sim", "crates/ibv-sim/src"));
    problems.extend(check("ibv-sim-cm", "crates/ibv-sim-cm/src"));
    assert!(
        problems.is_empty(),
        "module cycles (a module uses one that uses it back):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_sees_use_groups_and_paths() {
    let modules: BTreeSet<String> = ["a", "b", "c", "d"].map(String::from).into();
    let refs = references(
        "use crate::{a::X, b};\n// crate::c in a comment\nfn f() { $crate::d::g(); }",
        &modules,
    );
    assert_eq!(refs, ["a", "b", "d"].map(String::from).into());
    let mut g = Graph::new();
    g.insert("a".into(), ["b".to_string()].into());
    g.insert("b".into(), ["a".to_string()].into());
    g.insert("c".into(), ["a".to_string()].into());
    assert_eq!(cycles(&g), vec![["a", "b"].map(String::from).into()]);
}

/// One concern per file: no source file of the shim or of ibv-sim is
/// over 700 lines; a longer one is two concerns to split.
#[test]
fn no_shim_or_sim_source_file_is_over_700_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "crates/ibv-sim/src"] {
        let before = files.len();
        rs_files(&root.join(dir), &mut files);
        assert!(files.len() > before + 20, "no sources under {dir}");
    }
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, n)| *n > 700)
        .map(|(f, n)| format!("{} ({n} lines)", f.display()))
        .collect();
    assert!(long.is_empty(), "split: {}", long.join(", "));
}
