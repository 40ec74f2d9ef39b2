//! What the data-path checks (`IBV_SHIM_CHECK=datapath`) add to a clean
//! work request and its completion, counted in instructions by callgrind
//! (deterministic, unlike a time; `bench/dpcheck.sh` gives both).
//!
//! The program is the benchmark's (`bench/c/datapath.c`: one signaled
//! 8-byte RDMA WRITE from an SGE, then polling its completion), on the
//! sim, direct and under the shim with the checks on. The cost is that of
//! the clean path (`interpose::clean`); `tests/c/wholeapi/clean_chain.c`
//! checks its hand-over to the full checks and what it remembers.
//! Needs gcc, libibverbs-dev, valgrind and a built shim (`make test`).

mod common;

use common::*;
use std::path::{Path, PathBuf};

fn datapath() -> PathBuf {
    cc(
        "datapath",
        &[&repo_dir().join("bench/c/datapath.c")],
        &["-O2", "-libverbs", "-ldl"],
    )
}

/// Instructions `datapath n 1 sge` executes under callgrind on the sim,
/// direct or with the shim preloaded and the data-path checks on.
fn instructions(exe: &Path, n: u64, checked: bool) -> u64 {
    let mut cmd = std::process::Command::new("valgrind");
    cmd.args(CALLGRIND)
        .arg(exe)
        .args([&n.to_string(), "1", "sge"])
        .env("LD_LIBRARY_PATH", sim_dir())
        .env_remove("IBV_SIM_DEVICES")
        .env_remove("IBV_SHIM_LOG")
        .env_remove("IBV_SHIM_TRACE")
        .env_remove("IBV_SHIM_FAULTS")
        .env_remove("IBV_SHIM_BACKTRACE");
    if checked {
        preload_shim(&mut cmd).env("IBV_SHIM_CHECK", "datapath");
    } else {
        cmd.env_remove("LD_PRELOAD").env_remove("IBV_SHIM_CHECK");
    }
    let out = run(&mut cmd);
    assert!(stdout(&out).starts_with("ns="), "{}", describe(&cmd, &out));
    instructions_counted(&cmd, &out)
}

/// Instructions the checks add per WR + its completion: the difference
/// between two run lengths cancels start-up and set-up (the program runs
/// n / 10 + 1 warm-up operations, then n). Callgrind counts every thread,
/// the sim's progress thread too, which spins or naps as the machine
/// schedules it: that only ever adds instructions, so each length's count
/// is the least of three runs.
fn added_per_op() -> f64 {
    let exe = datapath();
    let (short, long) = (1_000u64, 3_000u64);
    let ops = |n: u64| n / 10 + 1 + n;
    let least = |n: u64, checked: bool| {
        (0..3)
            .map(|_| instructions(&exe, n, checked))
            .min()
            .unwrap()
    };
    let per_op = |checked| {
        let a = least(short, checked);
        let b = least(long, checked);
        (b as f64 - a as f64) / (ops(long) - ops(short)) as f64
    };
    per_op(true) - per_op(false)
}

/// A clean post is vouched for with loads only (`interpose::clean`): the
/// checked WR + completion adds at most 310 instructions (+298 measured;
/// +419 before, when every post went through the panic boundary, errno's
/// save and the full checks).
#[test]
fn a_checked_wr_and_its_completion_add_at_most_310_instructions() {
    let added = added_per_op();
    eprintln!("checked WR + completion: +{added:.1} instructions (limit 310)");
    assert!(
        added <= 310.0,
        "checked WR + completion: +{added:.1} instructions (limit 310)"
    );
}

/// The clean path hands a chain over to the full checks at its first
/// doubtful WR, and remembers what it vouched for: a clean WRITE's error
/// completion (bad rkey) is explained with the WR as posted; in a chain of
/// three WRITEs whose third runs past its MR, and one of two receives
/// whose second has an unknown lkey, only the bad one is reported, once
/// (each after clean posts that asked the caps and cached the lkey).
#[test]
fn the_clean_path_hands_a_chain_over_at_its_first_bad_wr_and_remembers_its_posts() {
    let exe = wholeapi_program("clean_chain");
    let r = shim_run(
        &exe,
        "check-cost",
        &["clean_chain"],
        &[("IBV_SHIM_CHECK", "datapath")],
    );
    for line in [
        "bad rkey: wr_id=0x201 status=remote access error",
        "chain rc 0",
        "recv chain rc 0",
        "clean_chain done",
    ] {
        assert!(
            r.stdout.contains(line),
            "no {line:?} in\n{}\n{}",
            r.stdout,
            r.log
        );
    }
    the_line_with(
        &r.log,
        "first error completion",
        &[
            "IBV_WC_REM_ACCESS_ERR",
            "wr_id=0x201 (posted as opcode=RDMA_WRITE num_sge=1 sge[0]=",
            "clean_chain",
        ],
    );
    let reported: Vec<&str> = r
        .log
        .lines()
        .filter(|l| l.contains("data-path check "))
        .collect();
    assert_eq!(reported.len(), 2, "{}", r.log);
    assert!(
        reported[0].contains("data-path check out_of_range: ibv_post_send")
            && reported[0].contains("wr_id=0x103 "),
        "{}",
        reported[0]
    );
    assert!(
        reported[1].contains("data-path check dead_lkey: ibv_post_recv")
            && reported[1].contains("wr_id=0x302 "),
        "{}",
        reported[1]
    );
    let json = r.json.as_ref().expect("a JSON report");
    for (check, n) in [
        ("out_of_range", 1),
        ("dead_lkey", 1),
        ("num_sge", 0),
        ("other_pd", 0),
    ] {
        assert_eq!(json["checks"][check], n, "{check}: {json:#}");
    }
}
