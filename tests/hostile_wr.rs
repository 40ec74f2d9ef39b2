//! Hostile work requests (`tests/c/wholeapi/hostile_wr.c`): `num_sge`
//! above the queue's granted SGEs with the list ending at an unreadable
//! page, a chain that loops back on itself, `sg_list` NULL with SGEs.
//! The sim alone fails each post as a provider does (EINVAL / ENOMEM,
//! `bad_wr` the request) without crashing or hanging; the data-path
//! checks report each once, reading no SGE past the granted ones and
//! walking no chain past its queue; a trace has one post event per
//! request the queue took, not one per lap of the loop.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::*;

fn program() -> PathBuf {
    wholeapi_program("hostile_wr")
}

/// What each mode's posts answer, on the sim with or without the shim.
fn expected(mode: &str) -> &'static [&'static str] {
    match mode {
        // The sim's mlx5_0 (ConnectX-6's profile): mlx5's post_send
        // answers too many SGEs with ENOMEM, its post_recv with EINVAL.
        "sge_cap" => &[
            "send_above_cap rc ENOMEM bad wr",
            "send_huge rc ENOMEM bad wr",
            "recv_above_cap rc EINVAL bad wr",
            "recv_huge rc EINVAL bad wr",
            "srq_above_cap rc EINVAL bad wr",
        ],
        "loop" => &[
            "send_loop rc ENOMEM bad wr",
            "recv_loop rc ENOMEM bad wr",
            "srq_loop rc ENOMEM bad wr",
            "send_loop_err rc ENOMEM bad wr",
            "recv_loop_err rc ENOMEM bad wr",
        ],
        "null_sg" => &[
            "send_null_sg rc EINVAL bad wr",
            "recv_null_sg rc EINVAL bad wr",
        ],
        _ => unreachable!(),
    }
}

fn assert_answers(mode: &str, stdout: &str, more: &str) {
    let mut want: Vec<String> = expected(mode).iter().map(|s| s.to_string()).collect();
    want.push(format!("hostile_wr {mode} done"));
    let got: Vec<&str> = stdout.lines().collect();
    assert_eq!(got, want, "{mode}:\n{stdout}\n{more}");
}

#[test]
fn the_sim_fails_hostile_posts_as_a_provider_does_without_crashing_or_hanging() {
    let exe = program();
    for mode in ["sge_cap", "loop", "null_sg"] {
        let fabric = fabric_name("hostile-wr", mode);
        let _guard = FabricGuard(fabric.clone());
        let mut cmd = Command::new(&exe);
        cmd.arg(mode)
            .env("LD_LIBRARY_PATH", sim_dir())
            .env("IBV_SIM_FABRIC", &fabric)
            .env_remove("LD_PRELOAD")
            .env_remove("IBV_SIM_DEVICES");
        let out = run_unchecked(&mut cmd, Duration::from_secs(60));
        assert!(out.status.success(), "{mode}: {}", describe(&cmd, &out));
        assert_answers(mode, &stdout(&out), &stderr(&out));
    }
}

fn check_lines<'a>(log: &'a str, check: &str) -> Vec<&'a str> {
    let tag = format!("data-path check {check}: ");
    log.lines().filter(|l| l.contains(&tag)).collect()
}

#[test]
fn the_checks_report_num_sge_above_the_cap_without_reading_past_it() {
    let r = shim_run(
        &program(),
        "hostile-wr",
        &["sge_cap"],
        &[("IBV_SHIM_CHECK", "datapath")],
    );
    assert!(r.status.success(), "{}\n{}", r.stdout, r.log);
    assert_answers("sge_cap", &r.stdout, &r.log);
    let lines = check_lines(&r.log, "num_sge");
    assert_eq!(lines.len(), 5, "{}", r.log);
    for (l, wr_id, field) in [
        (lines[0], "0x11", "max_send_sge 2"),
        (lines[1], "0x12", "max_send_sge 2"),
        (lines[2], "0x21", "max_recv_sge 2"),
        (lines[3], "0x21", "max_recv_sge 2"),
        (lines[4], "0x31", "max_sge 2"),
    ] {
        assert!(l.contains(&format!("wr_id={wr_id} ")), "{l}");
        assert!(l.contains(&format!("is above the queue's {field}")), "{l}");
        // The granted SGEs shown, none past them (in the unreadable page).
        assert!(l.contains(" sge[1]=") && !l.contains(" sge[2]="), "{l}");
    }
    let json = r.json.expect("a JSON report");
    assert_eq!(json["checks"]["num_sge"], 5, "{json:#}");
}

#[test]
fn the_checks_report_a_looping_chain_once_per_site_and_stop_at_the_queue_depth() {
    let r = shim_run(
        &program(),
        "hostile-wr",
        &["loop"],
        &[("IBV_SHIM_CHECK", "datapath")],
    );
    assert!(r.status.success(), "{}\n{}", r.stdout, r.log);
    assert_answers("loop", &r.stdout, &r.log);
    let lines = check_lines(&r.log, "chain_length");
    assert_eq!(lines.len(), 5, "{}", r.log);
    for (l, verb, wr_id) in [
        (lines[0], "ibv_post_send(qp=", "0x41"),
        (lines[1], "ibv_post_recv(qp=", "0x51"),
        (lines[2], "ibv_post_srq_recv(srq=", "0x61"),
        (lines[3], "ibv_post_send(qp=", "0x42"),
        (lines[4], "ibv_post_recv(qp=", "0x52"),
    ] {
        for part in [
            verb,
            &format!("wr_id={wr_id} "),
            "work request chain longer than the queue (loops?): this is WR 17 of a queue of 16",
            "forwarded unchanged",
        ] {
            assert!(l.contains(part), "no {part:?} in {l}");
        }
    }
    // Nothing else found: each request of the chain checked once.
    let all = r
        .log
        .lines()
        .filter(|l| l.contains("data-path check "))
        .count();
    assert_eq!(all, 5, "{}", r.log);
    let json = r.json.expect("a JSON report");
    assert_eq!(json["checks"]["chain_length"], 5, "{json:#}");
}

#[test]
fn the_checks_report_a_null_sg_list_with_sges() {
    let r = shim_run(
        &program(),
        "hostile-wr",
        &["null_sg"],
        &[("IBV_SHIM_CHECK", "datapath")],
    );
    assert!(r.status.success(), "{}\n{}", r.stdout, r.log);
    assert_answers("null_sg", &r.stdout, &r.log);
    let lines = check_lines(&r.log, "sg_list");
    assert_eq!(lines.len(), 2, "{}", r.log);
    assert!(
        lines[0].contains("wr_id=0x71 opcode=RDMA_WRITE num_sge=2 sg_list=NULL")
            && lines[0].contains("sg_list is NULL with num_sge 2"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("ibv_post_recv(")
            && lines[1].contains("wr_id=0x81 num_sge=1 sg_list=NULL"),
        "{}",
        lines[1]
    );
    let json = r.json.expect("a JSON report");
    assert_eq!(json["checks"]["sg_list"], 2, "{json:#}");
}

/// `target/<profile>/ibv-shim`, the launcher (built by `make build`).
fn launcher() -> PathBuf {
    let path = target_dir().join("ibv-shim");
    assert!(path.is_file(), "{}: run `make build`", path.display());
    path
}

#[test]
fn a_trace_of_a_looping_chain_has_an_event_per_request_the_queue_took() {
    let dir = TempDir::new("hostile-wr-trace");
    let trace = dir.join("t");
    let r = shim_run(
        &program(),
        "hostile-wr",
        &["loop"],
        &[("IBV_SHIM_TRACE", trace.to_str().unwrap())],
    );
    assert!(r.status.success(), "{}\n{}", r.stdout, r.log);
    assert_answers("loop", &r.stdout, &r.log);
    let out = run(Command::new(launcher()).arg("trace").arg(&trace));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // Each looping chain: the 16 requests its queue took (SRQ posts are
    // not traced).
    for (event, wr_id) in [
        ("post_send", "0x41"),
        ("post_recv", "0x51"),
        ("post_send", "0x42"),
        ("post_recv", "0x52"),
    ] {
        let needle = format!(" {event}(qp_num=");
        let n = text
            .lines()
            .filter(|l| l.contains(&needle) && l.contains(&format!("wr_id={wr_id})")))
            .count();
        assert_eq!(n, 16, "{event} {wr_id}: {n} events");
    }
}
