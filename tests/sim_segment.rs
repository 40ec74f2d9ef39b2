//! The sim's fabric segment (`/dev/shm/ibv-sim-<uid>-<name>`) leaves
//! nothing behind its processes (`tests/c/sim/sim_segment.c`): the last
//! process out removes it also when it exits with a context open (as
//! every librdmacm, UCX and MPI program does), while another process
//! still attached keeps it; a process that cannot map it (`RLIMIT_AS`)
//! removes the file it made.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

fn program() -> PathBuf {
    let src = repo_dir().join("tests/c/sim/sim_segment.c");
    cc("sim_segment", &[&src], &["-O1", "-libverbs"])
}

fn command(exe: &PathBuf, fabric: &str, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.args(args)
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", fabric)
        .env_remove("LD_PRELOAD")
        .env_remove("IBV_SIM_DEVICES");
    c
}

#[test]
fn the_last_process_to_exit_with_a_context_open_removes_the_segment() {
    let exe = program();
    let fabric = fabric_name("segment", "hold");
    let _guard = FabricGuard(fabric.clone());
    let seg = segment_path(&fabric);
    // A holds a context open until its stdin closes.
    let mut a = command(&exe, &fabric, &["hold"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the holder");
    let mut line = String::new();
    BufReader::new(a.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "open\n");
    assert!(seg.exists(), "{} not made", seg.display());
    // B exits with its context open while A is attached: the segment stays.
    let mut b = command(&exe, &fabric, &["hold"]);
    b.stdin(Stdio::null());
    let out = run_unchecked(&mut b, Duration::from_secs(60));
    assert!(out.status.success(), "{}", describe(&b, &out));
    assert_eq!(stdout(&out), "open\n");
    assert!(
        seg.exists(),
        "{} removed under a live process",
        seg.display()
    );
    // A exits with its context open, the last one: the segment goes.
    drop(a.stdin.take());
    let status = a.wait().unwrap();
    assert!(status.success(), "holder: {status}");
    assert!(!seg.exists(), "{} left behind", seg.display());
}

#[test]
fn a_process_that_cannot_map_the_segment_leaves_no_file() {
    let exe = program();
    let fabric = fabric_name("segment", "rlimit");
    let _guard = FabricGuard(fabric.clone());
    let seg = segment_path(&fabric);
    // 200 MiB of address space: the process runs, the 273 MiB segment
    // cannot be mapped.
    let mut c = command(&exe, &fabric, &["rlimit", "200"]);
    c.stdin(Stdio::null());
    let out = run_unchecked(&mut c, Duration::from_secs(60));
    assert!(out.status.success(), "{}", describe(&c, &out));
    assert_eq!(stdout(&out), "open failed\n", "{}", describe(&c, &out));
    assert!(
        stderr(&out).contains("cannot map"),
        "{}",
        describe(&c, &out)
    );
    assert!(!seg.exists(), "{} left behind", seg.display());
    // The fabric is usable afterwards.
    let mut d = command(&exe, &fabric, &["hold"]);
    d.stdin(Stdio::null());
    let out = run_unchecked(&mut d, Duration::from_secs(60));
    assert!(out.status.success(), "{}", describe(&d, &out));
    assert!(!seg.exists(), "{} left behind", seg.display());
}
