//! Work in flight (`IBV_SHIM_CHECK=inflight`): each scenario of
//! `tests/c/inflight/inflight.c` (two connected RC QPs on rxe0; UD QPs,
//! a QP posting through `ibv_wr_*`, memory windows in some) makes the
//! shim report its finding, at the program's call, once per site, counted
//! in the JSON; `clean` reports nothing. On the sim's rxe0 and on real
//! Soft-RoCE in the VM (test group `vm`). The same runs under
//! `IBV_SHIM_CHECK=datapath` find nothing: the post-time checks cannot
//! see any of these.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;

fn program() -> PathBuf {
    cc(
        "inflight",
        &[repo_dir().join("tests/c/inflight/inflight.c").as_path()],
        &["-O2", "-libverbs"],
    )
}

/// (check, count, the program's function named as the site of its first)
type Finding = (&'static str, u64, &'static str);

/// Each scenario and what it makes the shim find.
const SCENARIOS: &[(&str, &[Finding])] = &[
    ("clean", &[]),
    ("send_modified", &[("send_modified", 2, "send_then_touch")]),
    ("repost", &[("send_modified", 1, "repost_then_touch")]),
    ("recv_reused", &[("recv_reused", 2, "recv_again")]),
    ("dereg", &[("teardown_mr", 1, "dereg")]),
    // rxe has no rereg (EOPNOTSUPP): the failed call tore nothing down.
    ("rereg", &[]),
    (
        "destroy_qp",
        &[
            ("teardown_qp", 1, "destroy"),
            ("teardown_cq", 1, "destroy_cq"),
        ],
    ),
    ("reset", &[("teardown_qp", 1, "to_reset")]),
    ("overrun", &[("cq_overrun", 1, "one_recv_too_many")]),
    ("srq", &[("recv_reused", 1, "srq_again")]),
    (
        "ud",
        &[
            ("send_modified", 1, "ud_send_then_touch"),
            ("recv_reused", 1, "ud_recv_again"),
            ("teardown_qp", 1, "destroy"),
            ("teardown_cq", 1, "destroy_cq"),
        ],
    ),
    (
        "ex",
        &[
            ("send_modified", 1, "ex_send_then_touch"),
            ("recv_reused", 1, "ex_read_into"),
            ("teardown_mr", 1, "ex_dereg"),
            ("teardown_qp", 1, "ex_destroy"),
            ("teardown_cq", 1, "ex_destroy_cq"),
        ],
    ),
    (
        "uc",
        &[
            ("send_modified", 1, "uc_write_then_touch"),
            ("recv_reused", 1, "uc_recv_again"),
            ("teardown_qp", 1, "destroy"),
            ("teardown_cq", 1, "destroy_cq"),
        ],
    ),
    ("recv_cross", &[("recv_reused", 3, "recv_other")]),
    ("dealloc_mw", &[("teardown_mw", 4, "dealloc")]),
    ("unsignalled_tail", &[]),
    ("send_from_recv", &[]),
    ("dereg_after_err", &[]),
];

const RULES: [&str; 7] = [
    "send_modified",
    "recv_reused",
    "teardown_mr",
    "teardown_qp",
    "teardown_cq",
    "cq_overrun",
    "teardown_mw",
];

/// How a long source's changed bytes are told: exactly on ibv-sim (the
/// bytes it read when it executed the request), by fingerprinted blocks
/// on hardware (and on the sim with `IBV_SIM_WITNESS=off`).
#[derive(Clone, Copy, PartialEq)]
enum Long {
    Exact,
    Blocks,
}

/// Checks one run's log and JSON counts against what `scenario` makes.
fn judge(long: Long, scenario: &str, stdout: &str, log: &str, json: &serde_json::Value) {
    let (_, want) = SCENARIOS.iter().find(|(s, _)| *s == scenario).unwrap();
    assert!(
        stdout.contains(&format!("{scenario} done")),
        "{scenario}: did not finish:\n{stdout}\n{log}"
    );
    let checks = &json["checks"];
    for (rule, n) in checks.as_object().expect("checks in the JSON") {
        assert!(
            RULES.contains(&rule.as_str()) || n == 0,
            "{scenario}: the scenario itself breaks a post-time rule, {rule} {n}\n{log}"
        );
    }
    for rule in RULES {
        let n = want
            .iter()
            .find(|(r, _, _)| *r == rule)
            .map_or(0, |(_, n, _)| *n);
        assert_eq!(checks[rule], n, "{scenario}: {rule} count\n{log}\n{json}");
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&format!("data-path check {rule}:")))
            .collect();
        assert_eq!(
            lines.len() as u64,
            n,
            "{scenario}: {rule}: one WARN per site\n{log}"
        );
    }
    for (rule, _, func) in *want {
        let line = log
            .lines()
            .find(|l| l.contains(&format!("data-path check {rule}:")))
            .unwrap();
        assert!(
            line.contains(" WARN ") && line.contains(&format!(" at {func} (")),
            "{scenario}: {rule} not reported at {func}:\n{line}"
        );
    }
    if scenario == "recv_cross" {
        for (func, shown) in [
            ("recv_other", "wr_id=0x121"),
            ("read_other", "wr_id=0x122 opcode=RDMA_READ"),
            ("srq_other", "wr_id=0x123"),
        ] {
            assert!(
                log.lines()
                    .any(|l| l.contains("data-path check recv_reused:")
                        && l.contains(&format!(" at {func} ("))
                        && l.contains(shown)
                        && l.contains("(wr_id=0x120 of another queue, qp=")),
                "{scenario}: no recv_reused at {func} for {shown}:\n{log}"
            );
        }
    }
    if scenario == "dealloc_mw" {
        for (func, shown) in [
            ("dealloc", "wr_id=0x101 opcode=BIND_MW"),
            ("dealloc_invalidating", "wr_id=0x103 opcode=LOCAL_INV"),
            ("dealloc_type1", "wr_id=0x104 opcode=BIND_MW"),
            ("dealloc_ex", "wr_id=0x106 opcode=BIND_MW"),
        ] {
            assert!(
                log.lines()
                    .any(|l| l.contains("data-path check teardown_mw:")
                        && l.contains(&format!(" at {func} ("))
                        && l.contains(shown)
                        && l.contains("deallocated while 1 posted work request(s)")),
                "{scenario}: no teardown_mw at {func} for {shown}:\n{log}"
            );
        }
    }
    if scenario == "send_modified" {
        assert!(
            log.contains("wr_id=0x51 opcode=SEND")
                && log.contains("wr_id=0x61 opcode=RDMA_WRITE")
                && log.contains("changed between the post and its completion"),
            "{log}"
        );
        // The SEND's 64 bytes were copied: the exact count. The WRITE's
        // 128 bytes, fingerprinted in 2 blocks of 64: the block; on the
        // sim, exact again.
        let write = match long {
            Long::Exact => "+128) changed between the post and its completion: 1 byte(s) differ, the first at +44 (exact: compared by ibv-sim with the bytes it read when it executed the request)",
            Long::Blocks => "+128) changed between the post and its completion: differences within 1 of its 2 blocks of 64 bytes, the first block at +0 (at most 64 bytes",
        };
        assert!(
            log.contains("[0x")
                && log.contains("+64) changed between the post and its completion: 1 byte(s) differ, the first at +10 (exact: compared with a copy")
                && log.contains(write),
            "{log}"
        );
    }
    if scenario == "rereg" {
        assert!(stdout.contains("rereg: -4 (errno 95)"), "{stdout}\n{log}");
    }
    if scenario == "repost" {
        // Six earlier posts of the same wr_id and buffer, each rewritten
        // after its completion: no finding, and on the sim none of their
        // kept bytes is taken for the last one's.
        let last = match long {
            Long::Exact => "+256) changed between the post and its completion: 3 byte(s) differ, the first at +200 (exact: compared by ibv-sim",
            Long::Blocks => "+256) changed between the post and its completion: differences within 1 of its 4 blocks of 64 bytes, the first block at +192 (at most 64 bytes",
        };
        assert!(
            log.contains("wr_id=0x81 opcode=RDMA_WRITE") && log.contains(last),
            "{log}"
        );
    }
}

fn sim_run(scenario: &str, check: &str) -> ShimRun {
    shim_run(
        &program(),
        "inflight",
        &[scenario],
        &[
            ("IBV_SHIM_CHECK", check),
            ("IBV_SIM_DEVICES", "rxe0"),
            ("FIDELITY_DEVICE", "rxe0"),
        ],
    )
}

#[test]
fn each_finding_on_the_sim() {
    for (scenario, _) in SCENARIOS {
        let r = sim_run(scenario, "inflight");
        assert!(r.status.success(), "{scenario}: {}\n{}", r.stdout, r.log);
        let json = r.json.as_ref().expect("a JSON report");
        judge(Long::Exact, scenario, &r.stdout, &r.log, json);
    }
}

#[test]
fn the_post_time_checks_find_none_of_them() {
    for (scenario, _) in SCENARIOS {
        let r = sim_run(scenario, "datapath");
        assert!(r.status.success(), "{scenario}: {}\n{}", r.stdout, r.log);
        assert!(
            !r.log.contains("data-path check "),
            "{scenario}: datapath alone reported:\n{}",
            r.log
        );
        let json = r.json.expect("a JSON report");
        for rule in RULES {
            assert!(
                json["checks"].get(rule).is_none(),
                "{rule} without inflight: {json}"
            );
        }
    }
}

#[test]
fn without_the_sims_witness_long_sources_are_told_by_blocks() {
    for scenario in ["send_modified", "repost"] {
        let r = shim_run(
            &program(),
            "inflight",
            &[scenario],
            &[
                ("IBV_SHIM_CHECK", "inflight"),
                ("IBV_SIM_DEVICES", "rxe0"),
                ("FIDELITY_DEVICE", "rxe0"),
                ("IBV_SIM_WITNESS", "off"),
            ],
        );
        assert!(r.status.success(), "{scenario}: {}\n{}", r.stdout, r.log);
        let json = r.json.as_ref().expect("a JSON report");
        judge(Long::Blocks, scenario, &r.stdout, &r.log, json);
    }
}

/// `ibv_rereg_mr` under posted work is `teardown_mr` where the provider
/// re-registers the MR (the sim's hns_0, as hns does), and no finding
/// where it refuses (rxe, in the scenarios above).
#[test]
fn a_rereg_is_a_finding_where_it_succeeds() {
    let r = shim_run(
        &program(),
        "inflight",
        &["rereg"],
        &[
            ("IBV_SHIM_CHECK", "inflight"),
            ("IBV_SIM_DEVICES", "hns_0"),
            ("FIDELITY_DEVICE", "hns_0"),
        ],
    );
    assert!(r.status.success(), "{}\n{}", r.stdout, r.log);
    assert!(r.stdout.contains("rereg: 0 "), "{}\n{}", r.stdout, r.log);
    let json = r.json.as_ref().expect("a JSON report");
    assert_eq!(json["checks"]["teardown_mr"], 1, "{json}");
    let lines: Vec<&str> = r
        .log
        .lines()
        .filter(|l| l.contains("data-path check "))
        .collect();
    assert!(
        lines.len() == 1
            && lines[0].contains("data-path check teardown_mr: ibv_rereg_mr(")
            && lines[0].contains(" at rereg (")
            && lines[0].contains("wr_id=0x85")
            && lines[0].contains("torn down while 1 posted work request(s)"),
        "{}",
        r.log
    );
}

#[test]
fn abort_mode_stops_at_the_first_finding() {
    let r = sim_run("send_modified", "inflight,abort");
    assert!(!r.status.success(), "{}\n{}", r.stdout, r.log);
    assert!(
        r.log.contains("data-path check send_modified:")
            && r.log.contains("aborting at the first data-path violation"),
        "{}",
        r.log
    );
}

#[test]
fn each_finding_on_real_rxe() {
    let Some(vm) = kernel_vm() else { return };
    let prog = program();
    for (scenario, _) in SCENARIOS {
        let tmp = TempDir::new("inflight-vm");
        let report = tmp.join("report.json");
        let job = Job::new([prog.as_os_str(), std::ffi::OsStr::new(scenario)])
            .cwd(tmp.path())
            .env("LD_PRELOAD", shim_so())
            .env("IBV_SHIM_CHECK", "inflight")
            .env("IBV_SHIM_REPORT", &report)
            .env("IBV_SHIM_LOG_FILE", tmp.join("log"))
            .timeout(Duration::from_secs(300));
        let out = vm.run(&job).unwrap_or_else(|e| panic!("{scenario}: {e}"));
        let log = std::fs::read_to_string(tmp.join("log")).unwrap_or_default();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status,
            0,
            "{scenario} on rxe: {stdout}{}\n{log}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&report)
            .unwrap_or_else(|e| panic!("{}: {e}\n{log}", report.display()));
        judge(
            Long::Blocks,
            scenario,
            &stdout,
            &log,
            &serde_json::from_str(&text).unwrap(),
        );
    }
}
