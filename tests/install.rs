//! `make install` and `make uninstall`: into a temporary
//! DESTDIR, a C program built with `pkg-config --cflags --libs ibv-shim`
//! runs through the installed launcher on the installed sim with the
//! installed shim; the man pages render without warnings; uninstall
//! leaves none of our files.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const PREFIX: &str = "/usr/local";

/// A verbs program: opens the first device, allocates a PD (left allocated
/// with `leak`), and prints the device and the loader variables it got.
const PROGRAM: &str = r#"
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v ? v : "";
}

int main(int argc, char **argv) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) {
        fprintf(stderr, "no devices\n");
        return 1;
    }
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (!ctx) {
        perror("ibv_open_device");
        return 2;
    }
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (!pd) {
        perror("ibv_alloc_pd");
        return 3;
    }
    printf("device %s\n", ibv_get_device_name(list[0]));
    printf("LD_PRELOAD=%s\n", env("LD_PRELOAD"));
    printf("LD_LIBRARY_PATH=%s\n", env("LD_LIBRARY_PATH"));
    if (!(argc > 1 && strcmp(argv[1], "leak") == 0))
        ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return 0;
}
"#;

/// `make TARGET PREFIX=/usr/local DESTDIR=dest`, installing this build
/// (`REL`): make must not run cargo, which waits for the lock this test
/// run holds.
fn make(target: &str, dest: &Path) {
    let mut cmd = Command::new("make");
    cmd.current_dir(repo_dir())
        .args(["-s", target])
        .arg(format!("PREFIX={PREFIX}"))
        .arg(format!("DESTDIR={}", dest.display()))
        .arg(format!("REL={}", target_dir().display()));
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
}

/// `dest` + `PREFIX/rel`.
fn staged(dest: &Path, rel: &str) -> PathBuf {
    dest.join(PREFIX.trim_start_matches('/')).join(rel)
}

/// Every file and symbolic link below `dir`, sorted.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `pkg-config ARGS ibv-shim` against the staged `.pc`.
fn pkg_config(dest: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new("pkg-config");
    cmd.args(args)
        .arg("ibv-shim")
        .env("PKG_CONFIG_PATH", staged(dest, "lib/pkgconfig"))
        .env("PKG_CONFIG_SYSROOT_DIR", dest)
        .env_remove("PKG_CONFIG_LIBDIR");
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    stdout(&out).trim().to_string()
}

#[test]
fn install_build_run_render_and_uninstall() {
    let tmp = TempDir::new("install");
    let dest = tmp.join("dest");
    make("install", &dest);

    let installed = files_below(&dest);
    for rel in [
        "bin/ibv-shim",
        "lib/ibv-shim/libibv_shim.so",
        "lib/ibv-shim/dropin/libibverbs.so.1",
        "lib/ibv-shim/dropin/librdmacm.so.1",
        "lib/ibv-shim/dropin/librdmacm.so",
        "lib/ibv-shim/sim/libibverbs.so.1",
        "lib/ibv-shim/sim/librdmacm.so.1",
        "lib/ibv-shim/sim/librdmacm.so",
        "include/ibv-shim/infiniband/verbs.h",
        "lib/pkgconfig/ibv-shim.pc",
        "share/man/man1/ibv-shim.1",
        "share/man/man7/ibv-shim.7",
    ] {
        let p = staged(&dest, rel);
        assert!(
            installed.contains(&p),
            "{rel} not installed: {installed:#?}"
        );
    }
    // The drop-in directory is the installed shim under the real names
    // (one file for both libraries: one registry).
    for name in ["libibverbs.so.1", "librdmacm.so.1", "librdmacm.so"] {
        assert_eq!(
            std::fs::canonicalize(staged(&dest, &format!("lib/ibv-shim/dropin/{name}"))).unwrap(),
            std::fs::canonicalize(staged(&dest, "lib/ibv-shim/libibv_shim.so")).unwrap(),
            "{name}"
        );
    }

    // Build against the installed header and library, nothing else.
    let flags = pkg_config(&dest, &["--cflags", "--libs"]);
    assert!(
        flags.contains(&format!(
            "-I{}",
            staged(&dest, "include/ibv-shim").display()
        )),
        "{flags}"
    );
    let src = tmp.join("installed_prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let args: Vec<&str> = flags.split_whitespace().collect();
    let prog = cc("installed_prog", &[&src], &args);
    // Linked like any verbs program: it needs libibverbs.so.1.
    let needed = run(Command::new("readelf").arg("-d").arg(&prog));
    assert!(
        stdout(&needed).contains("Shared library: [libibverbs.so.1]"),
        "{}",
        stdout(&needed)
    );

    // Through the installed launcher, on the installed sim, with the
    // installed shim preloaded (the program shows what it was given).
    let launcher = staged(&dest, "bin/ibv-shim");
    let shim = std::fs::canonicalize(staged(&dest, "lib/ibv-shim/libibv_shim.so")).unwrap();
    let sim = std::fs::canonicalize(staged(&dest, "lib/ibv-shim/sim")).unwrap();
    let launch = |opts: &[&str], prog_args: &[&str]| {
        let mut cmd = Command::new(&launcher);
        cmd.args(["--sim", "--sim-devices", "mlx5_0"])
            .args(opts)
            .arg("--")
            .arg(&prog)
            .args(prog_args)
            .env_remove("LD_PRELOAD")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("IBV_SHIM_REPORT")
            .env_remove("IBV_SHIM_LEAK_EXITCODE");
        let out = run(&mut cmd);
        (describe(&cmd, &out), out)
    };
    let (what, out) = launch(&[], &[]);
    assert!(out.status.success(), "{what}");
    let text = stdout(&out);
    assert!(text.contains("device mlx5_0"), "{what}");
    assert!(
        text.contains(&format!("LD_PRELOAD={}\n", shim.display())),
        "{what}"
    );
    assert!(
        text.contains(&format!("LD_LIBRARY_PATH={}\n", sim.display())),
        "{what}"
    );
    assert!(stderr(&out).contains("no RDMA resources leaked"), "{what}");
    // The installed shim audits: the leaked PD fails the run.
    let (what, out) = launch(&["--fail-on-leak"], &["leak"]);
    assert_eq!(out.status.code(), Some(23), "{what}");
    assert!(
        stderr(&out).contains("leaked 1 RDMA object: 1 pd"),
        "{what}"
    );

    // Each man page renders with no warning.
    for page in ["share/man/man1/ibv-shim.1", "share/man/man7/ibv-shim.7"] {
        let mut cmd = Command::new("man");
        cmd.args(["--warnings", "-l", "-Tutf8"])
            .arg(staged(&dest, page))
            .env("MANROFFSEQ", "")
            .env("MANWIDTH", "80");
        let out = run(&mut cmd);
        assert!(
            out.status.success() && stderr(&out).is_empty(),
            "{page}: {}",
            describe(&cmd, &out)
        );
        // Bold is overstruck (`N\bN`): drop each character a backspace follows.
        let mut text = String::new();
        for c in stdout(&out).chars() {
            if c == '\u{8}' {
                text.pop();
            } else {
                text.push(c);
            }
        }
        assert!(
            text.contains("NAME") && text.contains("ENVIRONMENT") == page.ends_with(".7"),
            "{page}: not rendered as expected:\n{text}"
        );
    }

    // Uninstall leaves directories at most, none of ours.
    make("uninstall", &dest);
    let left = files_below(&dest);
    assert!(left.is_empty(), "left after uninstall: {left:#?}");
    for ours in ["lib/ibv-shim", "include/ibv-shim"] {
        assert!(!staged(&dest, ours).exists(), "{ours} left after uninstall");
    }
}

/// The man pages and the reference pages keep up with the code and with
/// each other: every option `ibv-shim --help` lists is in ibv-shim(1) and
/// in the README or a page of docs/; every `IBV_SHIM_*` variable the
/// README and docs/ name is in ibv-shim(7); and docs/environment.md and
/// ibv-shim(7) name the same `IBV_SHIM_*` and `IBV_SIM_*` variables.
#[test]
fn the_man_pages_name_every_option_and_variable() {
    let help = Command::new(target_dir().join("ibv-shim"))
        .arg("--help")
        .output()
        .expect("ibv-shim --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    // roff writes a hyphen in an option as `\-`.
    let page1 = std::fs::read_to_string(repo_dir().join("man/ibv-shim.1"))
        .unwrap()
        .replace("\\-", "-");
    let page7 = std::fs::read_to_string(repo_dir().join("man/ibv-shim.7")).unwrap();
    let words = |text: &str, start: &str| -> std::collections::BTreeSet<String> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .filter(|w| w.starts_with(start) && w.len() > start.len())
            .map(|w| w.trim_end_matches('-').to_string())
            .collect()
    };
    let options = words(&help, "--");
    assert!(options.len() > 20, "{help}");
    let missing: Vec<_> = options
        .iter()
        .filter(|o| !page1.contains(o.as_str()))
        .collect();
    assert!(missing.is_empty(), "ibv-shim(1) lacks {missing:?}");

    let mut docs = std::fs::read_to_string(repo_dir().join("README.md")).unwrap();
    let mut pages: Vec<_> = std::fs::read_dir(repo_dir().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    for p in &pages {
        docs += &std::fs::read_to_string(p).unwrap();
    }
    let missing: Vec<_> = options
        .iter()
        .filter(|o| !docs.contains(o.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "neither the README nor docs/ names {missing:?}"
    );
    // The test suite's own variables are not the shim's.
    const SUITE: [&str; 3] = [
        "IBV_SHIM_TEST_SKIP",
        "IBV_SHIM_SKIP_LOG",
        "IBV_SHIM_SRC_CACHE",
    ];
    let vars: std::collections::BTreeSet<String> = words(&docs, "IBV_SHIM_")
        .into_iter()
        .filter(|v| !SUITE.contains(&v.as_str()))
        .collect();
    assert!(vars.len() > 10, "{vars:?}");
    let missing: Vec<_> = vars
        .iter()
        .filter(|v| !page7.contains(v.as_str()))
        .collect();
    assert!(missing.is_empty(), "ibv-shim(7) lacks {missing:?}");

    let env_page = std::fs::read_to_string(repo_dir().join("docs/environment.md")).unwrap();
    let env_vars = |text: &str| {
        let mut v = words(text, "IBV_SHIM_");
        v.extend(words(text, "IBV_SIM_"));
        v
    };
    let (in_page, in_man) = (env_vars(&env_page), env_vars(&page7));
    let only_page: Vec<_> = in_page.difference(&in_man).collect();
    let only_man: Vec<_> = in_man.difference(&in_page).collect();
    assert!(
        only_page.is_empty() && only_man.is_empty(),
        "docs/environment.md and ibv-shim(7) differ: only in the page {only_page:?}, only in the man page {only_man:?}"
    );
}
