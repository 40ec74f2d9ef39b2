//! Every command the README and `docs/*.md` show runs.
//!
//! A fenced shell block (```` ```sh ````) is marked either `runnable` (run
//! here) or `norun=FILE` (the test FILE, which must exist, covers what it
//! shows: it needs root on the machine, or sources this machine lacks); an
//! unmarked shell block fails the test. A runnable block runs with
//! `bash -e`, and must exit 0, or `status=N`; `hw` marks a block that uses
//! the machine's own RDMA devices, whose outcome depends on the machine:
//! any exit but a usage error (2), a launcher failure (125-127) or a
//! signal. `cwd=repo` runs a block in the repository (the build commands);
//! the others run in order, per page, in a scratch directory where
//! `target`, `include`, `c_examples` and `tests` are the repository's and
//! these programs are built: `./my_verbs_test` (c_examples/open_close.c,
//! clean), `./leaky` (c_examples/leaky.c), `./device_guids`
//! (c_examples/device_guids.c), `./my_pingpong`
//! (tests/c/sim/sim_loopback.c, RC and UD traffic between two QPs) and
//! `./error_paths` (tests/c/faults/error_paths.c). The launcher is on PATH.
//!
//! Every relative link resolves. The README's GitHub Actions and GitLab CI
//! snippets run too: their `run:` steps (with each step's `env:`, and
//! `$GITHUB_PATH`), and their
//! `variables:`, `script:` and `after_script:`, in a checkout where
//! `ibv-shim/` is this repository and the launcher is not on PATH until
//! the snippet puts it there; the JUnit file they make must be there.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;

/// A hang guard, not a timing assertion: a block that runs this long hangs.
const HANG: Duration = Duration::from_secs(900);

struct Block {
    file: String,
    line: usize,
    info: String,
    text: String,
}

impl Block {
    fn attr(&self, name: &str) -> Option<&str> {
        self.info.split_whitespace().find_map(|w| {
            if w == name {
                Some("")
            } else {
                w.strip_prefix(name)?.strip_prefix('=')
            }
        })
    }
    fn lang(&self) -> &str {
        self.info.split_whitespace().next().unwrap_or("")
    }
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// The fenced blocks of a Markdown file.
fn blocks(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path).unwrap();
    let file = path
        .strip_prefix(repo_dir())
        .unwrap_or(path)
        .display()
        .to_string();
    let mut out = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => open = Some((n + 1, info.trim().to_string(), String::new())),
            (Some(_), Some(_)) => {
                let (line, info, text) = open.take().unwrap();
                out.push(Block {
                    file: file.clone(),
                    line,
                    info,
                    text,
                });
            }
            (Some((_, _, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "{file}: a fenced block is not closed");
    out
}

/// README.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repo_dir().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo_dir().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 8, "docs/ has {} pages", docs.len());
    pages.extend(docs);
    pages
}

fn is_shell(b: &Block) -> bool {
    matches!(b.lang(), "sh" | "bash" | "shell" | "console")
}

/// The scratch directory the blocks run in, with the programs they name.
fn scratch() -> TempDir {
    let tmp = TempDir::new("docs");
    for name in ["target", "include", "c_examples", "tests"] {
        std::os::unix::fs::symlink(repo_dir().join(name), tmp.join(name)).unwrap();
    }
    std::os::unix::fs::symlink(repo_dir(), tmp.join("ibv-shim")).unwrap();
    let repo = repo_dir();
    let tests_c = format!("-I{}", repo.join("tests/c").display());
    for (name, src, extra) in [
        ("my_verbs_test", "c_examples/open_close.c", ""),
        ("leaky", "c_examples/leaky.c", ""),
        ("device_guids", "c_examples/device_guids.c", ""),
        (
            "my_pingpong",
            "tests/c/sim/sim_loopback.c",
            tests_c.as_str(),
        ),
        ("error_paths", "tests/c/faults/error_paths.c", ""),
    ] {
        let mut cmd = Command::new("gcc");
        cmd.args(["-O1", "-g", "-o"])
            .arg(tmp.join(name))
            .arg(repo.join(src))
            .args(extra.split_whitespace())
            .arg("-libverbs");
        let out = run(&mut cmd);
        assert!(out.status.success(), "{}", describe(&cmd, &out));
    }
    tmp
}

/// PATH with the launcher first, or without it.
fn path_var(with_launcher: bool) -> String {
    let base = std::env::var("PATH").unwrap_or_default();
    let rest: Vec<&str> = base
        .split(':')
        .filter(|d| Path::new(d) != target_dir() && !d.is_empty())
        .collect();
    let mut dirs = Vec::new();
    let launcher_dir = target_dir().display().to_string();
    if with_launcher {
        dirs.push(launcher_dir.as_str());
    }
    dirs.extend(rest);
    dirs.join(":")
}

/// `bash -e -c TEXT` in `dir`, with the shim's and the loader's variables
/// cleared and a fabric of its own.
fn shell(dir: &Path, text: &str, path: &str, fabric: &str) -> Command {
    let mut cmd = Command::new("bash");
    cmd.args(["-e", "-c", text])
        .current_dir(dir)
        .env("PATH", path);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("IBV_SHIM_") || k.starts_with("IBV_SIM_") {
            cmd.env_remove(&k);
        }
    }
    cmd.env_remove("LD_PRELOAD")
        .env_remove("LD_LIBRARY_PATH")
        .env("IBV_SIM_FABRIC", fabric);
    cmd
}

fn check_status(b: &Block, cmd: &Command, out: &std::process::Output) {
    let code = out.status.code();
    let ok = if b.attr("hw").is_some() {
        matches!(code, Some(c) if !matches!(c, 2 | 125..=127))
    } else {
        let want: i32 = b.attr("status").map_or(0, |s| s.parse().unwrap());
        code == Some(want)
    };
    assert!(
        ok,
        "{} (```{}```) ended {:?}:\n{}",
        b.at(),
        b.info,
        out.status,
        describe(cmd, out)
    );
}

#[test]
fn every_shell_block_is_marked_runnable_or_names_the_test_that_covers_it() {
    let mut problems = Vec::new();
    let mut runnable = 0;
    for page in pages() {
        for b in blocks(&page).iter().filter(|b| is_shell(b)) {
            match (b.attr("runnable"), b.attr("norun")) {
                (Some(_), None) => runnable += 1,
                (None, Some(test)) if repo_dir().join(test).is_file() => {}
                (None, Some(test)) => {
                    problems.push(format!("{}: norun={test} does not exist", b.at()))
                }
                _ => problems.push(format!(
                    "{}: ```{}``` is neither `runnable` nor `norun=TEST`",
                    b.at(),
                    b.info
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(runnable >= 12, "only {runnable} runnable blocks");
}

#[test]
fn the_runnable_blocks_of_the_readme_and_docs_run() {
    let tmp = scratch();
    let fabric = fabric_name("docs", "blocks");
    let _guard = FabricGuard(fabric.clone());
    let mut ran = Vec::new();
    for (n, page) in pages().iter().enumerate() {
        // Each page's blocks in a directory of its own, in order.
        let name = page.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = tmp.join(format!("run-{n}-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(tmp.path()).unwrap().flatten() {
            let p = entry.path();
            if !p.file_name().unwrap().to_string_lossy().starts_with("run-") {
                std::os::unix::fs::symlink(&p, dir.join(p.file_name().unwrap())).unwrap();
            }
        }
        for b in blocks(page)
            .iter()
            .filter(|b| is_shell(b) && b.attr("runnable").is_some())
        {
            let cwd = if b.attr("cwd") == Some("repo") {
                repo_dir()
            } else {
                dir.clone()
            };
            let mut cmd = shell(&cwd, &b.text, &path_var(true), &fabric);
            let out = run_unchecked(&mut cmd, HANG);
            check_status(b, &cmd, &out);
            ran.push(b.at());
        }
    }
    eprintln!("ran {} blocks: {}", ran.len(), ran.join(", "));
}

/// The README's yaml blocks: the first with `steps:` (GitHub Actions), the
/// first with `script:` (GitLab CI).
fn ci_snippet(key: &str) -> Block {
    blocks(&repo_dir().join("README.md"))
        .into_iter()
        .find(|b| b.lang() == "yaml" && b.text.lines().any(|l| l.trim() == key))
        .unwrap_or_else(|| panic!("the README has no yaml block with {key}"))
}

/// `key: value` of a yaml line (after a list's `- `).
fn key_value(line: &str) -> Option<(&str, &str)> {
    let l = line.trim().trim_start_matches("- ");
    let (k, v) = l.split_once(':')?;
    Some((k.trim(), v.trim()))
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// `${{ expr }}`, GitHub's expressions, made a word.
fn github_expressions(v: &str) -> String {
    let mut out = String::new();
    let mut rest = v;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        let end = rest[i..]
            .find("}}")
            .map(|j| i + j + 2)
            .unwrap_or(rest.len());
        out.push_str("expr");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn the_github_actions_snippet_runs() {
    let block = ci_snippet("steps:");
    // Steps: their `run:` (one line or a `|` block) and `env:`.
    struct Step {
        run: String,
        env: Vec<(String, String)>,
    }
    let mut steps: Vec<Step> = Vec::new();
    let lines: Vec<&str> = block.text.lines().collect();
    let mut i = 0;
    let mut in_steps = false;
    while i < lines.len() {
        let line = lines[i];
        if line.trim() == "steps:" {
            in_steps = true;
        } else if in_steps && line.trim_start().starts_with("- ") {
            steps.push(Step {
                run: String::new(),
                env: Vec::new(),
            });
        }
        if let (true, Some(step), Some((k, v))) = (in_steps, steps.last_mut(), key_value(line)) {
            match k {
                "run" if v == "|" => {
                    let base = indent(lines[i + 1]);
                    while i + 1 < lines.len() && indent(lines[i + 1]) >= base {
                        i += 1;
                        step.run.push_str(lines[i].trim());
                        step.run.push('\n');
                    }
                }
                "run" => step.run = v.to_string(),
                "env" => {
                    let base = indent(line);
                    while i + 1 < lines.len() && indent(lines[i + 1]) > base {
                        i += 1;
                        let (k, v) = key_value(lines[i]).unwrap();
                        step.env.push((k.to_string(), github_expressions(v)));
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    let steps: Vec<Step> = steps.into_iter().filter(|s| !s.run.is_empty()).collect();
    assert!(
        steps.len() >= 4,
        "{}: {} run steps",
        block.at(),
        steps.len()
    );

    let tmp = scratch();
    let fabric = fabric_name("docs", "github");
    let _guard = FabricGuard(fabric.clone());
    let github_path = tmp.join("github_path");
    std::fs::write(&github_path, "").unwrap();
    for step in &steps {
        // $GITHUB_PATH's lines go before PATH for the steps after.
        let added: Vec<String> = std::fs::read_to_string(&github_path)
            .unwrap()
            .lines()
            .rev()
            .map(String::from)
            .collect();
        let path = added
            .into_iter()
            .chain([path_var(false)])
            .collect::<Vec<_>>()
            .join(":");
        let mut cmd = shell(tmp.path(), &step.run, &path, &fabric);
        cmd.env("GITHUB_PATH", &github_path);
        for (k, v) in &step.env {
            cmd.env(k, v);
        }
        let out = run_unchecked(&mut cmd, HANG);
        assert!(
            out.status.success(),
            "{}: {}",
            block.at(),
            describe(&cmd, &out)
        );
    }
    let junit = std::fs::read_to_string(tmp.join("leaks.xml")).expect("leaks.xml");
    assert!(junit.contains("<testsuites"), "{junit}");
}

#[test]
fn the_gitlab_ci_snippet_runs() {
    let block = ci_snippet("script:");
    // The job's keys (indented 2): `variables:` a map, `script:` and
    // `after_script:` lists of commands.
    let mut lists: Vec<(String, Vec<String>)> = Vec::new();
    let mut variables: Vec<(String, String)> = Vec::new();
    let mut current = String::new();
    for line in block.text.lines() {
        if indent(line) == 2 {
            current = key_value(line)
                .map(|(k, _)| k.to_string())
                .unwrap_or_default();
            continue;
        }
        if indent(line) <= 2 {
            current.clear();
            continue;
        }
        let t = line.trim();
        match (current.as_str(), t.strip_prefix("- ")) {
            ("script" | "after_script", Some(item)) => match lists.last_mut() {
                Some((name, items)) if *name == current => items.push(item.to_string()),
                _ => lists.push((current.clone(), vec![item.to_string()])),
            },
            ("variables", None) => {
                if let Some((k, v)) = key_value(line) {
                    variables.push((k.to_string(), v.to_string()));
                }
            }
            _ => {}
        }
    }
    let script = lists
        .iter()
        .find(|(n, _)| n == "script")
        .map(|(_, i)| i.clone())
        .unwrap_or_default();
    let after = lists
        .iter()
        .find(|(n, _)| n == "after_script")
        .map(|(_, i)| i.clone())
        .unwrap_or_default();
    assert!(
        script.len() >= 3 && !after.is_empty(),
        "{}: script {script:?}, after_script {after:?}",
        block.at()
    );
    assert!(!variables.is_empty(), "{}: no variables", block.at());

    let tmp = scratch();
    let fabric = fabric_name("docs", "gitlab");
    let _guard = FabricGuard(fabric.clone());
    // GitLab runs `script` in one shell and `after_script` in another,
    // each with the job's variables (which may name predefined ones).
    let exports: String = variables
        .iter()
        .map(|(k, v)| format!("export {k}={v}\n"))
        .collect();
    for items in [&script, &after] {
        let text = exports.clone() + &items.join("\n");
        let mut cmd = shell(tmp.path(), &text, &path_var(false), &fabric);
        cmd.env("CI_JOB_ID", std::process::id().to_string());
        let out = run_unchecked(&mut cmd, HANG);
        assert!(
            out.status.success(),
            "{}: {}",
            block.at(),
            describe(&cmd, &out)
        );
    }
    let junit = std::fs::read_to_string(tmp.join("leaks.xml")).expect("leaks.xml");
    assert!(junit.contains("<testsuites"), "{junit}");
}

/// Every relative link of the README and docs/ names a file that exists
/// (pages move; a link left behind is found here).
#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let link = &rest[..end];
            if link.starts_with("http") || link.starts_with('#') || link.contains(' ') {
                continue;
            }
            let path = link.split('#').next().unwrap();
            if !dir.join(path).exists() {
                broken.push(format!("{}: {link}", page.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}
