//! The extended post API under the data-path checks: an
//! extended QP's `ibv_wr_*` builders are wrapped, each bad work request is
//! reported once per site (the program's call of the setter) with its WR
//! and counted in the JSON, a clean program reports nothing, and the
//! unmodified perftest programs with their default post API (`ibv_wr_*`)
//! run clean. On the sim (`tests/c/wholeapi/wr_ex.c`).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

fn program() -> PathBuf {
    wholeapi_program("wr_ex")
}

fn shim_run(mode: &str, env: &[(&str, &str)]) -> ShimRun {
    common::shim_run(&program(), "wrex", &[mode], env)
}

fn check_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("data-path check "))
        .collect()
}

/// Each kind of bad request, built twice from one site with the
/// `ibv_wr_*` API: one line each, naming the setter (the builder, for the
/// QP's state) and the program's site, two in the JSON. The inline one the sim's `ibv_wr_complete`
/// refuses (EINVAL) before anything reaches `post_send`: only the
/// wrapped setter can see it.
#[test]
fn each_bad_extended_work_request_is_reported_once_at_its_setter() {
    let r = shim_run("bad", &[("IBV_SHIM_CHECK", "datapath")]);
    assert!(
        r.status.success() && r.stdout.contains("bad done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    // (check, the program's function that set it, setter, wr_id of the
    // first of its two, opcode, what it says)
    let want = [
        (
            "dead_lkey",
            "send_sge",
            "ibv_wr_set_sge(",
            "0xa",
            "SEND",
            "which was deregistered",
        ),
        (
            "out_of_range",
            "write_past_end",
            "ibv_wr_set_sge(",
            "0x14",
            "RDMA_WRITE",
            "is not inside MR",
        ),
        (
            "other_pd",
            "send_other_pd",
            "ibv_wr_set_sge_list(",
            "0x1e",
            "SEND",
            "not of the queue's PD",
        ),
        (
            "access",
            "read_into",
            "ibv_wr_set_sge(",
            "0x28",
            "RDMA_READ",
            "without IBV_ACCESS_LOCAL_WRITE",
        ),
        (
            "inline_size",
            "send_inline",
            "ibv_wr_set_inline_data(",
            "0x32",
            "SEND",
            "128 bytes of inline data, above the QP's max_inline_data 64",
        ),
        (
            "qp_state",
            "send_in_reset",
            "ibv_wr_send(",
            "0x3c",
            "SEND",
            "the QP is in state RESET, where ibv_wr_send is not allowed",
        ),
    ];
    let lines = check_lines(&r.log);
    assert_eq!(lines.len(), want.len(), "{}", r.log);
    for (check, func, setter, wr_id, opcode, says) in want {
        let tag = format!("data-path check {check}:");
        let mine: Vec<&&str> = lines.iter().filter(|l| l.contains(&tag)).collect();
        assert_eq!(mine.len(), 1, "{check}: want one line:\n{}", r.log);
        for part in [
            setter,
            &format!("wr_id={wr_id} "),
            &format!("opcode={opcode} "),
            says,
            &format!(" at {func} ("),
            "wr_ex.c:",
            "forwarded unchanged",
        ] {
            assert!(
                mine[0].contains(part),
                "{check}: no {part:?} in {}",
                mine[0]
            );
        }
    }
    let json = r.json.expect("a JSON report");
    for (check, n) in [
        ("dead_lkey", 2),
        ("out_of_range", 2),
        ("other_pd", 2),
        ("access", 2),
        ("inline_size", 2),
        ("qp_state", 2),
        ("other_context", 0),
        ("num_sge", 0),
    ] {
        assert_eq!(json["checks"][check], n, "{check}: {json:#}");
    }
    // Forwarded unchanged: the sim answered as without the shim (the
    // inline batches refused by its own builders with mlx5's ENOMEM, the
    // others posted).
    assert_eq!(r.stdout.matches("rc 0\n").count(), 8, "{}", r.stdout);
    assert_eq!(r.stdout.matches("rc 12\n").count(), 2, "{}", r.stdout);
    assert_eq!(r.stdout.matches("rc_reset 22\n").count(), 2, "{}", r.stdout);
    // The first error completion is matched to the request built with
    // the wr API, and its site.
    the_line_with(
        &r.log,
        "first error completion",
        &[
            "wr_id=0xa ",
            "posted as opcode=SEND num_sge=1",
            "at send_sge (",
        ],
    );
}

/// Every operation the sim builds, each completed with success: nothing
/// reported, every count 0; the builders are the shim's with the checks
/// on and the provider's without.
#[test]
fn a_clean_extended_post_program_reports_nothing() {
    let r = shim_run("clean", &[("IBV_SHIM_CHECK", "datapath")]);
    assert!(
        r.status.success() && r.stdout.contains("clean done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    assert!(
        r.stdout.contains("wr_set_sge in ") && r.stdout.contains("libibv_shim.so"),
        "{}",
        r.stdout
    );
    assert_eq!(check_lines(&r.log), Vec::<&str>::new(), "{}", r.log);
    assert!(!r.log.contains("error completion"), "{}", r.log);
    let json = r.json.expect("a JSON report");
    let checks = json["checks"].as_object().expect("checks");
    assert_eq!(checks.len(), 10, "{json:#}");
    for (k, v) in checks {
        assert_eq!(v, 0, "{k}: {json:#}");
    }
    let off = shim_run("clean", &[]);
    assert!(off.status.success(), "{}\n{}", off.stdout, off.log);
    let sim = sim_dir().join("libibverbs.so.1");
    assert!(
        off.stdout
            .contains(&format!("wr_set_sge in {}", sim.display())),
        "{}",
        off.stdout
    );
}

/// A long-running program makes and destroys extended QPs at ever new
/// addresses: a destroyed QP's saved builders are forgotten, so the table
/// of wrapped QPs never fills and the 4,201st distinct QP is still
/// checked (before, past 4,096 addresses it was not: "more than 4096
/// extended QPs made").
#[test]
fn extended_qps_destroyed_free_their_place_for_new_ones() {
    let r = shim_run("churn", &[("IBV_SHIM_CHECK", "datapath")]);
    assert!(
        r.status.success() && r.stdout.contains("churn done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    assert!(!r.log.contains("extended QPs"), "{}", r.log);
    let lines = check_lines(&r.log);
    assert_eq!(lines.len(), 1, "{}", r.log);
    assert!(
        lines[0].contains("qp_state") && lines[0].contains("wr_id=0x77"),
        "{}",
        lines[0]
    );
}

/// With a trace (no checks), each request built with the wr API is a post
/// event matched to its completion: `ibv-shim trace --per-qp` shows the
/// sending QP's 7 signaled requests, all matched (the aborted one is no
/// post).
#[test]
fn a_traced_extended_post_program_has_its_posts_and_completions() {
    let dir = TempDir::new("datapath-ex-trace");
    let file = dir.join("wr.trace");
    let file_s = file.to_str().unwrap().to_string();
    let r = shim_run("clean", &[("IBV_SHIM_TRACE", &file_s)]);
    assert!(
        r.status.success() && r.stdout.contains("clean done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    let out = run(Command::new(target_dir().join("ibv-shim"))
        .args(["trace", "--per-qp"])
        .arg(&file));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // pid qp_num posts completions failed matched ...: the sender has 7
    // posts (and an aborted batch) and 7 completions; the receiver 2 and 2.
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() > 5 && w[1].starts_with("0x"))
        .collect();
    let counts: Vec<&[&str]> = rows.iter().map(|w| &w[2..6]).collect();
    assert!(
        counts.contains(&&["7", "7", "0", "7"][..]),
        "no sender row:\n{text}"
    );
    assert!(
        counts.contains(&&["2", "2", "0", "2"][..]),
        "no receiver row:\n{text}"
    );
}

/// The unmodified perftest programs with their default post API (the
/// `ibv_wr_*` builders) under the checks: the builders are wrapped on the
/// posting side(s), nothing is reported, every count is 0, and each
/// finishes with its figures.
#[test]
fn perftest_default_post_api_under_the_checks_reports_nothing() {
    for (prog, args, figures) in [
        ("ib_send_bw", &["-n", "200", "-s", "4096"][..], "BW average"),
        (
            "ib_write_bw",
            &["-n", "200", "-s", "4096"][..],
            "BW average",
        ),
        ("ib_read_bw", &["-n", "200", "-s", "4096"][..], "BW average"),
        ("ib_atomic_bw", &["-n", "200"][..], "BW average"),
        ("ib_send_lat", &["-n", "200"][..], "t_avg"),
        ("ib_read_lat", &["-n", "200"][..], "t_avg"),
    ] {
        let (s, c) = perftest_checked("wrex", prog, args);
        let mut wrapped = 0;
        for (who, d) in [("server", &s), ("client", &c)] {
            let out = String::from_utf8_lossy(&d.out.stdout);
            let what = format!("{prog} {who}: {}\n{out}\n{}", d.out.status, d.log);
            assert!(d.out.status.success(), "{what}");
            // The passive side of a READ / latency test prints none.
            if who == "client" {
                assert!(out.contains(figures), "no figures: {what}");
            }
            wrapped += d.log.matches("ibv_wr_* builders wrapped").count();
            assert_eq!(check_lines(&d.log), Vec::<&str>::new(), "{what}");
            let json = d.json.as_ref().unwrap_or_else(|| panic!("no JSON: {what}"));
            let checks = json["checks"].as_object().expect("checks");
            assert_eq!(checks.len(), 10, "{json:#}");
            for (k, v) in checks {
                assert_eq!(v, 0, "{prog} {who}: {k}: {json:#}");
            }
        }
        assert!(wrapped > 0, "{prog}: no extended QP was wrapped");
    }
}

/// Completions read through an extended CQ's cursor are treated as polled
/// ones: a `wc` rule fails the first (the one `ibv_start_poll` reads) at
/// the program's call, the failure is explained with the request built by
/// the wr API, and each completion is a trace event matched to its post.
#[test]
fn an_extended_cq_cursor_gets_completion_faults_explanations_and_trace_events() {
    let dir = TempDir::new("datapath-ex-excq");
    let file = dir.join("excq.trace");
    let file_s = file.to_str().unwrap().to_string();
    let r = shim_run(
        "excq",
        &[
            ("IBV_SHIM_CHECK", "datapath"),
            ("IBV_SHIM_FAULTS", "wc:nth=1:status=IBV_WC_RETRY_EXC_ERR"),
            ("IBV_SHIM_TRACE", &file_s),
        ],
    );
    assert!(
        r.status.success() && r.stdout.contains("excq done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    // IBV_WC_RETRY_EXC_ERR = 12: the first completion, and only it.
    let got: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("excq wr_id="))
        .collect();
    assert_eq!(
        got,
        [
            "excq wr_id=1 status=12 qp_num_ok=1",
            "excq wr_id=2 status=0 qp_num_ok=1",
            "excq wr_id=3 status=0 qp_num_ok=1",
            "excq wr_id=4 status=0 qp_num_ok=1",
        ],
        "{}",
        r.log
    );
    let injected: Vec<&str> = r
        .log
        .lines()
        .filter(|l| l.contains("fault injected: wc call 1 from "))
        .collect();
    assert_eq!(injected.len(), 1, "{}", r.log);
    assert!(injected[0].contains("wr_ex"), "{}", injected[0]);
    the_line_with(
        &r.log,
        "first error completion",
        &[
            "IBV_WC_RETRY_EXC_ERR",
            "wr_id=0x1 ",
            "posted as opcode=RDMA_WRITE num_sge=1",
            "wr_ex.c:",
        ],
    );
    let qp_num = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("qp_num "))
        .expect("qp_num")
        .to_string();
    let out = run(Command::new(target_dir().join("ibv-shim"))
        .args(["trace", "--per-qp"])
        .arg(&file));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(qp_num.as_str()))
        .unwrap_or_else(|| panic!("no row for QP {qp_num}:\n{text}"))
        .split_whitespace()
        .collect();
    // pid qp_num posts completions failed matched ...
    assert_eq!(&row[2..6], ["4", "4", "1", "4"], "{text}");
}
