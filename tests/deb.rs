//! `make deb`: the Debian package builds (`ibv-shim_<version>_<arch>.deb`),
//! holds the launcher in `/usr/bin` and the shim, drop-in directory and
//! sim in the private `/usr/lib/<triplet>/ibv-shim/` (no `libibverbs.so*`
//! anywhere a loader would find it), the header, pkg-config file, man
//! pages and copyright; lintian reports no error; it installs with
//! `dpkg -i`, its launcher runs a program on the sim and fails it on a
//! leak, and `dpkg -r` leaves nothing behind.
//!
//! The package is installed into a private root (`dpkg --root`, with a
//! copy of this machine's dpkg status, so `Depends` is checked against
//! what the machine really has), not into the machine itself: a test run
//! never changes the system, and two runs never contend for its dpkg lock.
//! Needs root (dpkg chowns to root), dpkg-dev, lintian (`make deps`) and a
//! `make build`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// A verbs program that opens the first device and allocates a PD, left
/// allocated with `leak`.
const PROGRAM: &str = r#"
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) {
        fprintf(stderr, "no devices\n");
        return 1;
    }
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (!ctx)
        return 2;
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (!pd)
        return 3;
    printf("device %s\n", ibv_get_device_name(list[0]));
    if (!(argc > 1 && strcmp(argv[1], "leak") == 0))
        ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return 0;
}
"#;

fn output_of(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(out.status.success(), "{}", describe(cmd, &out));
    stdout(&out)
}

/// `make deb` of this build into `out`; the package's path.
fn make_deb(out: &Path) -> PathBuf {
    let mut cmd = Command::new("make");
    cmd.current_dir(repo_dir())
        .args(["-s", "deb"])
        .arg(format!("REL={}", target_dir().display()))
        .arg(format!("TARGET={}", out.display()));
    let printed = output_of(&mut cmd);
    PathBuf::from(printed.trim())
}

/// A root for dpkg: its admin directory holds this machine's package
/// status (each package with an empty file list), so dependencies are
/// checked against what is installed here.
fn dpkg_root(dir: &Path) -> PathBuf {
    let admin = dir.join("var/lib/dpkg");
    for d in ["updates", "info", "triggers"] {
        std::fs::create_dir_all(admin.join(d)).unwrap();
    }
    std::fs::copy("/var/lib/dpkg/status", admin.join("status")).unwrap();
    std::fs::write(admin.join("available"), "").unwrap();
    let installed = output_of(Command::new("dpkg-query").args(["-W", "-f=${binary:Package}\n"]));
    for p in installed.lines().filter(|p| !p.is_empty()) {
        std::fs::write(admin.join("info").join(format!("{p}.list")), "").unwrap();
    }
    dir.to_path_buf()
}

fn dpkg(root: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new("dpkg");
    cmd.arg(format!("--root={}", root.display())).args(args);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    stdout(&out) + &stderr(&out)
}

/// Every file and link below `dir`, but dpkg's own database.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.starts_with(dir.join("var/lib/dpkg")) {
                continue;
            }
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

fn multiarch() -> String {
    output_of(Command::new("gcc").arg("-print-multiarch"))
        .trim()
        .to_string()
}

#[test]
fn make_deb_builds_a_lintian_clean_package_that_installs_runs_and_removes() {
    let tmp = TempDir::new("deb");
    let deb = make_deb(tmp.path());
    let version = std::fs::read_to_string(repo_dir().join("Cargo.toml"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("version = \"")?
                .strip_suffix('"')
                .map(String::from)
        })
        .unwrap();
    let arch = output_of(Command::new("dpkg").arg("--print-architecture"));
    assert_eq!(
        deb.file_name().unwrap().to_string_lossy(),
        format!("ibv-shim_{version}_{}.deb", arch.trim())
    );
    assert!(deb.is_file(), "{} was not made", deb.display());

    // What it holds, and where.
    let triplet = multiarch();
    let listing = output_of(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let private = format!("./usr/lib/{triplet}/ibv-shim/");
    for want in [
        "./usr/bin/ibv-shim".to_string(),
        format!("{private}libibv_shim.so"),
        format!("{private}dropin/libibverbs.so.1 -> ../libibv_shim.so"),
        format!("{private}dropin/librdmacm.so.1 -> ../libibv_shim.so"),
        format!("{private}dropin/librdmacm.so -> librdmacm.so.1"),
        format!("{private}sim/libibverbs.so.1"),
        format!("{private}sim/librdmacm.so.1"),
        format!("{private}sim/librdmacm.so -> librdmacm.so.1"),
        "./usr/include/ibv-shim/infiniband/verbs.h".to_string(),
        format!("./usr/lib/{triplet}/pkgconfig/ibv-shim.pc"),
        "./usr/share/man/man1/ibv-shim.1.gz".to_string(),
        "./usr/share/man/man7/ibv-shim.7.gz".to_string(),
        "./usr/share/doc/ibv-shim/copyright".to_string(),
    ] {
        assert!(
            listing.contains(&want),
            "{want} not in the package:\n{listing}"
        );
    }
    // Nothing shadows the system's libibverbs: every libibverbs in the
    // package is inside the private directory.
    for line in listing
        .lines()
        .filter(|l| l.contains("libibverbs") || l.contains("librdmacm"))
    {
        assert!(line.contains(&private), "outside {private}: {line}");
    }
    // Its dependencies are the C runtime's, not rdma-core's.
    let depends = output_of(
        Command::new("dpkg-deb")
            .args(["-f"])
            .arg(&deb)
            .arg("Depends"),
    );
    assert!(depends.contains("libc6"), "Depends: {depends}");
    assert!(!depends.contains("libibverbs"), "Depends: {depends}");

    // lintian: no error (nor warning).
    let mut cmd = Command::new("lintian");
    cmd.arg(&deb);
    let out = run(&mut cmd);
    let text = stdout(&out);
    assert!(
        out.status.success()
            && !text
                .lines()
                .any(|l| l.starts_with("E:") || l.starts_with("W:")),
        "lintian: {}",
        describe(&cmd, &out)
    );

    // Install, use, remove.
    let root = dpkg_root(&tmp.join("root"));
    dpkg(&root, &["-i", deb.to_str().unwrap()]);
    assert!(dpkg(&root, &["-s", "ibv-shim"]).contains("Status: install ok installed"));
    let usr = root.join("usr");
    let launcher = usr.join("bin/ibv-shim");
    let prog = {
        let src = tmp.join("packaged_prog.c");
        std::fs::write(&src, PROGRAM).unwrap();
        let inc = format!("-I{}", usr.join("include/ibv-shim").display());
        let lib = format!(
            "-L{}",
            usr.join(format!("lib/{triplet}/ibv-shim/sim")).display()
        );
        cc("packaged_prog", &[&src], &[&inc, &lib, "-libverbs"])
    };
    let launch = |prog_args: &[&str]| {
        let mut cmd = Command::new(&launcher);
        cmd.args(["--sim", "--fail-on-leak", "--"])
            .arg(&prog)
            .args(prog_args)
            .env_remove("LD_PRELOAD")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("IBV_SHIM_REPORT")
            .env_remove("IBV_SHIM_LEAK_EXITCODE");
        let out = run(&mut cmd);
        (describe(&cmd, &out), out)
    };
    let (what, out) = launch(&[]);
    assert!(out.status.success(), "{what}");
    assert!(stdout(&out).contains("device mlx5_0"), "{what}");
    assert!(stderr(&out).contains("no RDMA resources leaked"), "{what}");
    let (what, out) = launch(&["leak"]);
    assert_eq!(out.status.code(), Some(23), "{what}");
    assert!(
        stderr(&out).contains("leaked 1 RDMA object: 1 pd"),
        "{what}"
    );
    // The package's own shim and sim were used, nothing from the build tree.
    let (what, out) = {
        let mut cmd = Command::new(&launcher);
        cmd.args([
            "--sim",
            "--",
            "sh",
            "-c",
            "echo $LD_PRELOAD; echo $LD_LIBRARY_PATH",
        ])
        .env_remove("LD_PRELOAD")
        .env_remove("LD_LIBRARY_PATH");
        let out = run(&mut cmd);
        (describe(&cmd, &out), out)
    };
    let private_dir = std::fs::canonicalize(usr.join(format!("lib/{triplet}/ibv-shim"))).unwrap();
    assert!(
        stdout(&out)
            .lines()
            .all(|l| l.starts_with(private_dir.to_str().unwrap())),
        "{what}"
    );

    dpkg(&root, &["-r", "ibv-shim"]);
    let left = files_below(&root);
    assert!(left.is_empty(), "left after dpkg -r: {left:#?}");
    assert!(!usr.join(format!("lib/{triplet}/ibv-shim")).exists());
}

/// The package on the real-kernel test bed: installed as above, its
/// `/usr/bin/ibv-shim --vm --fail-on-leak -- ibv_devinfo` (a QEMU guest
/// with Soft-RoCE; real kernel, real rdma-core) lists rxe0 through the
/// package's own shim and leaks nothing (test group `vm`).
#[test]
fn the_package_runs_a_program_on_the_vm() {
    if opted_out("vm") {
        let _ = require::<()>("vm", Err("the real-kernel VM is opted out".into()));
        return;
    }
    let tmp = TempDir::new("deb-vm");
    let deb = make_deb(tmp.path());
    let root = dpkg_root(&tmp.join("root"));
    dpkg(&root, &["-i", deb.to_str().unwrap()]);
    let mut cmd = Command::new(root.join("usr/bin/ibv-shim"));
    cmd.args(["--vm", "--fail-on-leak", "--", "ibv_devinfo"])
        .current_dir(tmp.path())
        .env_remove("LD_PRELOAD");
    let out = run_unchecked(&mut cmd, std::time::Duration::from_secs(600));
    let shown = describe(&cmd, &out);
    assert!(out.status.success(), "{shown}");
    // The real kernel's device, through the package's own shim.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("rxe0"),
        "{shown}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ibv-shim: no RDMA resources leaked"),
        "{shown}"
    );
    dpkg(&root, &["-r", "ibv-shim"]);
}
