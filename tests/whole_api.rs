//! The whole verbs API, shim side: objects only the context's
//! function tables make (the inline verbs of `verbs.h`) are tracked with
//! their parents and reported at close and in the JSON; the data-path
//! checks (`IBV_SHIM_CHECK=datapath`) report each bad work request once per
//! site with its WR, count them in the JSON, explain the first error
//! completion, and leave the program's calls unchanged; without them the
//! data path is not touched. The real ibverbs-utils pingpongs run clean
//! under the checks.
//!
//! On the sim (`tests/c/wholeapi/whole_api.c`); kinds the sim does not make
//! yet (the program prints `skip KIND`) are left out of each run's
//! expectations, the ones it does make are all checked.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn program() -> PathBuf {
    wholeapi_program("whole_api")
}

fn shim_run(args: &[&str], env: &[(&str, &str)]) -> ShimRun {
    common::shim_run(&program(), "wholeapi", args, env)
}

/// The `made KIND HANDLE PARENT` lines.
fn made(stdout: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("made "))
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (w[0].to_string(), w[1].to_string(), w[2].to_string())
        })
        .collect()
}

#[test]
fn objects_made_through_the_tables_are_reported_with_their_parents_at_close_and_in_the_json() {
    let r = shim_run(&["leak"], &[]);
    assert!(r.status.success(), "{}\n{}", r.stdout, r.log);
    let made = made(&r.stdout);
    assert_eq!(made.iter().filter(|(k, _, _)| k == "mw").count(), 2);
    // Every kind (ibv_open_qp's QP only where the sim makes one).
    for kind in [
        "qp",
        "cq",
        "mw",
        "xrcd",
        "srq",
        "wq",
        "rwq_ind_table",
        "flow",
        "flow_action",
        "td",
        "parent_domain",
        "dm",
        "mr",
        "counters",
    ] {
        assert!(
            made.iter().any(|(k, _, _)| k == kind),
            "no {kind} made:\n{}",
            r.stdout
        );
    }
    let close: Vec<&str> = r
        .log
        .lines()
        .skip_while(|l| !l.contains("leak: ibv_close_device("))
        .take_while(|l| !l.contains("leak report at exit"))
        .collect();
    let json = r.json.expect("a JSON report");
    let objects = json["objects"].as_array().unwrap();
    for (kind, handle, parent) in &made {
        assert!(
            close
                .iter()
                .any(|l| l.contains(&format!("{kind} {handle} ("))),
            "{kind} {handle} not in the close report:\n{}",
            r.log
        );
        let o = objects
            .iter()
            .find(|o| o["handle"] == handle.as_str())
            .unwrap_or_else(|| panic!("{kind} {handle} not in the JSON: {json:#}"));
        assert_eq!(o["kind"], kind.as_str(), "{o:#}");
        assert_eq!(o["found"], "close", "{o:#}");
        let want_parent = if parent == "0x0" {
            Value::Null
        } else {
            Value::from(parent.as_str())
        };
        assert_eq!(o["parent"], want_parent, "{kind} {handle}: {o:#}");
        assert!(json["totals"][kind.as_str()].as_u64().unwrap() >= 1);
    }
}

#[test]
fn a_program_that_destroys_everything_is_silent() {
    let r = shim_run(&["clean"], &[]);
    assert!(
        r.status.success() && r.stdout.contains("checks passed"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    assert!(made(&r.stdout).len() >= 2, "{}", r.stdout);
    assert!(
        !r.log.contains("WARN") && !r.log.contains("ERROR"),
        "{}",
        r.log
    );
    let json = r.json.expect("a JSON report");
    assert_eq!(json["leaked"], false, "{json:#}");
    assert_eq!(json["objects"].as_array().unwrap().len(), 0, "{json:#}");
    assert!(json.get("checks").is_none(), "{json:#}");
}

#[test]
fn table_made_objects_follow_the_exports_rules() {
    let r = shim_run(&["rules"], &[]);
    assert!(
        r.status.success() && r.stdout.contains("checks passed"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    // EBUSY is the real answer, the record kept (the TD is destroyed
    // later without a warning), and the holder named.
    assert!(r.stdout.contains("busy ibv_dealloc_td 16"), "{}", r.stdout);
    assert!(
        r.log.lines().any(|l| l.contains("ibv_dealloc_td(td=")
            && l.contains("EBUSY: still held by 1 object: parent_domain")),
        "{}",
        r.log
    );
    assert!(!r.log.contains("not a td the shim saw"), "{}", r.log);
    // A destroy after close is refused, not forwarded.
    assert!(
        r.stdout.contains("closed ibv_dealloc_mw 22"),
        "{}",
        r.stdout
    );
    assert!(
        r.log
            .lines()
            .any(|l| l.contains("use after close: ibv_dealloc_mw(mw=")),
        "{}",
        r.log
    );
    // The MW left on the closed context is reported under its PD.
    let json = r.json.unwrap();
    let kinds: Vec<&str> = json["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "mw").count(), 1, "{json:#}");
}

/// The data-path check lines of a log, by check name.
fn violations<'a>(log: &'a str, check: &str) -> Vec<&'a str> {
    let tag = format!("data-path check {check}:");
    log.lines().filter(|l| l.contains(&tag)).collect()
}

#[test]
fn work_requests_above_the_granted_sges_and_inline_data_are_reported() {
    let r = shim_run(&["caps"], &[("IBV_SHIM_CHECK", "datapath")]);
    assert!(
        r.status.success() && r.stdout.contains("caps done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    // (check, verb, wr_id of the first of its two posts, what it says)
    let want = [
        (
            "ibv_post_recv",
            "0xa",
            "num_sge 3 is above the queue's max_recv_sge 2",
        ),
        (
            "ibv_post_send",
            "0x14",
            "num_sge 3 is above the queue's max_send_sge 2",
        ),
        (
            "ibv_post_send",
            "0x1e",
            "IBV_SEND_INLINE with 32 bytes, above the QP's max_inline_data 0",
        ),
    ];
    let lines: Vec<&str> = r
        .log
        .lines()
        .filter(|l| l.contains("data-path check"))
        .collect();
    assert_eq!(lines.len(), want.len(), "{}", r.log);
    for (verb, wr_id, says) in want {
        let hit = lines.iter().any(|l| {
            l.contains(verb) && l.contains(&format!("wr_id={wr_id} ")) && l.contains(says)
        });
        assert!(hit, "no {verb} wr_id={wr_id} {says:?}:\n{}", r.log);
    }
    let json = r.json.expect("a JSON report");
    for (check, n) in [("num_sge", 4), ("inline_size", 2), ("dead_lkey", 0)] {
        assert_eq!(json["checks"][check], n, "{check}: {json:#}");
    }
}

/// `ibv_rereg_mr` moving an MR to another PD and back: the checks follow
/// it (they cache each lkey's facts): a receive while the MR is the other
/// PD's is reported once, the receives while it is the QP's PD's are not.
#[test]
fn an_mr_moved_to_another_pd_by_rereg_is_checked_against_its_new_pd() {
    let r = shim_run(&["rereg"], &[("IBV_SHIM_CHECK", "datapath")]);
    assert!(
        r.status.success() && r.stdout.contains("rereg done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    let lines: Vec<&str> = r
        .log
        .lines()
        .filter(|l| l.contains("data-path check"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", r.log);
    assert!(
        lines[0].contains("other_pd") && lines[0].contains("wr_id=0x6e "),
        "{}",
        lines[0]
    );
    let json = r.json.expect("a JSON report");
    assert_eq!(json["checks"]["other_pd"], 2, "{json:#}");
    let total: u64 = json["checks"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 2, "{json:#}");
}

#[test]
fn each_bad_work_request_is_reported_once_per_site_with_its_wr_and_counted() {
    let r = shim_run(&["datapath"], &[("IBV_SHIM_CHECK", "datapath")]);
    assert!(
        r.status.success() && r.stdout.contains("datapath done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    // (check, verb, wr_id of the first of its two posts, what it says)
    let want = [
        ("other_pd", "ibv_post_recv", "0xa", "not of the queue's PD"),
        (
            "access",
            "ibv_post_recv",
            "0x14",
            "without IBV_ACCESS_LOCAL_WRITE",
        ),
        ("out_of_range", "ibv_post_send", "0x1e", "is not inside MR"),
        (
            "dead_lkey",
            "ibv_post_send",
            "0x28",
            "which was deregistered",
        ),
    ];
    for (check, verb, wr_id, says) in want {
        let lines = violations(&r.log, check);
        assert_eq!(lines.len(), 1, "{check}: want one line:\n{}", r.log);
        let l = lines[0];
        for part in [
            verb,
            &format!("wr_id={wr_id} "),
            "sge[0]={addr=",
            says,
            " at ",
            "whole_api",
            "forwarded unchanged",
        ] {
            assert!(l.contains(part), "{check}: no {part:?} in {l}");
        }
    }
    // Nothing else: the clean exchange and the states were fine.
    let all = r
        .log
        .lines()
        .filter(|l| l.contains("data-path check"))
        .count();
    assert_eq!(all, 4, "{}", r.log);
    // Every violation counted (two posts each), in the JSON.
    let json = r.json.expect("a JSON report");
    let checks = &json["checks"];
    for (check, n) in [
        ("other_pd", 2),
        ("access", 2),
        ("out_of_range", 2),
        ("dead_lkey", 2),
        ("other_context", 0),
        ("qp_state", 0),
        ("num_sge", 0),
        ("inline_size", 0),
    ] {
        assert_eq!(checks[check], n, "{check}: {json:#}");
    }
    // The calls were forwarded unchanged: the sim answered them all.
    assert_eq!(r.stdout.matches("rc 0").count(), 8, "{}", r.stdout);
    // The first error completion explained: status, vendor error, its WR
    // and where it was posted, the QP state; then the flushed ones counted.
    the_line_with(
        &r.log,
        "first error completion",
        &[
            "IBV_WC_LOC_PROT_ERR (local protection error)",
            "vendor_err=",
            "wr_id=0x1e",
            "posted as opcode=SEND",
            "whole_api",
            "QP state now ERR",
        ],
    );
    assert!(
        r.log
            .lines()
            .any(|l| l.contains("3 more completions flushed (IBV_WC_WR_FLUSH_ERR)")),
        "{}",
        r.log
    );
}

#[test]
fn without_the_checks_the_data_path_is_not_wrapped_and_nothing_is_reported() {
    let r = shim_run(&["datapath"], &[]);
    assert!(r.status.success(), "{}\n{}", r.stdout, r.log);
    assert!(!r.log.contains("data-path check"), "{}", r.log);
    assert!(!r.log.contains("error completion"), "{}", r.log);
    assert!(r.json.unwrap().get("checks").is_none());
    // The program's table entries are the provider's own...
    let off = shim_run(&["ops"], &[]);
    assert!(off.status.success(), "{}", off.log);
    let sim = sim_dir().join("libibverbs.so.1");
    for entry in ["post_send", "poll_cq"] {
        assert!(
            off.stdout
                .contains(&format!("{entry} in {}", sim.display())),
            "{}",
            off.stdout
        );
    }
    // ...and the shim's only with the checks on.
    let on = shim_run(&["ops"], &[("IBV_SHIM_CHECK", "datapath")]);
    assert!(on.status.success(), "{}", on.log);
    assert!(
        on.stdout.contains("post_send in ") && on.stdout.contains("libibv_shim.so"),
        "{}",
        on.stdout
    );
}

#[test]
fn the_abort_option_ends_the_process_at_the_first_violation() {
    let r = shim_run(&["datapath"], &[("IBV_SHIM_CHECK", "datapath,abort")]);
    assert_eq!(
        signal(&r.status),
        Some(libc::SIGABRT),
        "{}\n{}",
        r.stdout,
        r.log
    );
    assert_eq!(
        r.log
            .lines()
            .filter(|l| l.contains("data-path check"))
            .count(),
        1,
        "{}",
        r.log
    );
    assert!(!r.stdout.contains("datapath done"));
}

/// Runs an ibverbs-utils pingpong as server and client on the sim with the
/// checks on; returns both logs.
fn pingpong(prog: &str, args: &[&str], done: &str) -> String {
    let dir = TempDir::new("whole-api-pp");
    let fabric = fabric_name("wholeapi", prog);
    let _guard = FabricGuard(fabric.clone());
    let port = free_port().to_string();
    let mk = |who: &str, client: bool| {
        let mut c = Command::new(prog);
        c.args(["-d", "mlx5_0", "-p", &port]).args(args);
        if client {
            c.arg("127.0.0.1");
        }
        c.env_remove("IBV_SHIM_LIBRARY")
            .env("LD_LIBRARY_PATH", sim_dir())
            .env("IBV_SIM_FABRIC", &fabric)
            .env("IBV_SIM_DEVICES", "mlx5_0")
            .env("IBV_SHIM_CHECK", "datapath")
            .env("IBV_SHIM_LOG", "debug")
            .env("IBV_SHIM_LOG_FILE", dir.join(format!("{who}.log")))
            .stdin(Stdio::null());
        preload_shim(&mut c);
        c
    };
    let out = |who: &str| std::fs::File::create(dir.join(format!("{who}.out"))).unwrap();
    let mut server = mk("server", false)
        .stdout(out("server"))
        .stderr(out("server.err"))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !listening(port.parse().unwrap()) {
        assert!(
            Instant::now() < deadline && server.try_wait().unwrap().is_none(),
            "{prog} server never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let client = run_unchecked(&mut mk("client", true), Duration::from_secs(120));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = server.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = server.kill();
            panic!("{prog} server hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let server_out = read(&dir.join("server.out"));
    assert!(
        client.status.success() && status.success(),
        "{prog}: client {}\n{}\nserver {status}\n{server_out}{}",
        client.status,
        stdout(&client) + &stderr(&client),
        read(&dir.join("server.err"))
    );
    assert!(stdout(&client).contains(done) && server_out.contains(done));
    read(&dir.join("client.log")) + &read(&dir.join("server.log"))
}

#[test]
fn the_real_pingpongs_run_clean_under_the_checks() {
    let validated: &[&str] = &["-c", "-n", "100"];
    for (prog, args, done) in [
        ("ibv_rc_pingpong", validated, "100 iters in"),
        ("ibv_srq_pingpong", validated, "100 iters in"),
        ("ibv_ud_pingpong", validated, "100 iters in"),
        // XRC: SRQs and QPs from ibv_create_srq_ex / ibv_create_qp_ex.
        ("ibv_xsrq_pingpong", &[], "success"),
    ] {
        let log = pingpong(prog, args, done);
        // Both processes ran with their data path wrapped...
        assert_eq!(
            log.matches("function tables interposed (with data-path checks)")
                .count(),
            2,
            "{prog}:\n{log}"
        );
        // ...and nothing was found.
        assert!(
            !log.contains("WARN data-path check") && !log.contains("error completion"),
            "{prog}: false positives:\n{log}"
        );
    }
}

/// The sim's self-checking programs, which also post on purpose what they
/// must not (unknown lkeys, QPs in RESET), pass unchanged with the data
/// path wrapped: every call is forwarded as the program made it.
#[test]
fn the_sims_self_checks_pass_unchanged_under_the_checks() {
    let sim_c = repo_dir().join("tests/c/sim");
    let obj_c = repo_dir().join("tests/c/objects");
    let includes = [
        format!("-I{}", sim_c.display()),
        format!("-I{}", repo_dir().join("tests/c/common").display()),
    ];
    let suites = [
        (&sim_c, "sim_errors"),
        (&sim_c, "sim_qp_state"),
        (&sim_c, "sim_loopback"),
        (&sim_c, "sim_threads"),
        (&sim_c, "sim_everything"),
        (&sim_c, "sim_ext_post"),
        (&sim_c, "sim_ext_threads"),
        (&obj_c, "obj_mw"),
        (&obj_c, "obj_domains"),
        (&obj_c, "obj_control"),
    ];
    let mut violations = 0;
    for (dir, name) in suites {
        let prog = cc(
            &format!("checked_{name}"),
            &[&dir.join(format!("{name}.c"))],
            &[&includes[0], &includes[1], "-libverbs", "-lpthread"],
        );
        let mut cmd = Command::new(&prog);
        cmd.env("LD_LIBRARY_PATH", sim_dir())
            .env_remove("IBV_SIM_DEVICES")
            .env_remove("IBV_SHIM_LIBRARY")
            .env_remove("IBV_SHIM_LEAK_EXITCODE")
            .env("IBV_SHIM_CHECK", "datapath")
            .env("IBV_SHIM_LOG", "warn")
            .stdin(Stdio::null());
        preload_shim(&mut cmd);
        let out = run_unchecked(&mut cmd, Duration::from_secs(120));
        assert!(
            out.status.success() && stdout(&out).contains("checks passed"),
            "{name} failed under the checks\n{}",
            describe(&cmd, &out)
        );
        violations += stderr(&out).matches("WARN data-path check").count();
    }
    // The deliberate ones were seen (a post in RESET, an unknown lkey).
    assert!(violations >= 2, "{violations}");
}

#[test]
fn the_launcher_turns_the_checks_on() {
    let mut cmd = Command::new(target_dir().join("ibv-shim"));
    cmd.args(["--sim", "--check-datapath", "--"])
        .arg(program())
        .arg("datapath")
        .env_remove("IBV_SHIM_CHECK")
        .env_remove("IBV_SHIM_LOG")
        .env_remove("IBV_SIM_DEVICES")
        .env("IBV_SIM_FABRIC", fabric_name("wholeapi", "launcher"))
        .stdin(Stdio::null());
    let out = run_unchecked(&mut cmd, Duration::from_secs(60));
    let err = stderr(&out);
    assert!(
        out.status.success() && err.contains("data-path check dead_lkey: ibv_post_send("),
        "{}",
        describe(&cmd, &out)
    );
}

#[test]
fn an_error_completion_read_through_an_extended_cq_is_explained() {
    let r = shim_run(&["excq"], &[("IBV_SHIM_CHECK", "datapath")]);
    assert!(
        r.status.success() && r.stdout.contains("excq done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    // The CQ's own cursor is wrapped (a real provider's does not poll
    // through the context's table, as the sim's does)...
    assert!(
        r.stdout.contains("start_poll in ") && r.stdout.contains("libibv_shim.so"),
        "{}",
        r.stdout
    );
    // ...and the program read its completion as without the shim.
    assert!(
        r.stdout
            .contains("excq wr_id=7 status=local protection error qp_num_ok=1"),
        "{}",
        r.stdout
    );
    the_line_with(
        &r.log,
        "error completion on cq=",
        &[
            "first error completion",
            "IBV_WC_LOC_PROT_ERR",
            "wr_id=0x7 (posted as opcode=SEND",
            "lkey=0xdead",
            "QP state now ERR",
        ],
    );
}

/// The unmodified perftest programs (their `ibv_post_send`/`ibv_post_recv`
/// path: `--use_old_post_send`) run under the checks with the data path
/// wrapped on both sides and nothing reported: no check line, every
/// `checks` count 0.
#[test]
fn perftest_under_the_datapath_checks_reports_nothing() {
    for (prog, args) in [
        ("ib_send_bw", &["-n", "200", "-s", "4096"][..]),
        ("ib_write_bw", &["-n", "200", "-s", "4096"][..]),
        ("ib_read_bw", &["-n", "200", "-s", "4096"][..]),
        ("ib_send_lat", &["-n", "200"][..]),
    ] {
        let mut args = args.to_vec();
        args.push("--use_old_post_send");
        let (s, c) = perftest_checked("wholeapi", prog, &args);
        for (who, d) in [("server", &s), ("client", &c)] {
            let what = format!(
                "{prog} {who}: {}\n{}\n{}",
                d.out.status,
                String::from_utf8_lossy(&d.out.stdout),
                d.log
            );
            assert!(d.out.status.success(), "{what}");
            assert!(
                d.log
                    .contains("function tables interposed (with data-path checks)"),
                "not wrapped: {what}"
            );
            let lines = d.log.lines().filter(|l| l.contains("data-path check "));
            assert_eq!(lines.count(), 0, "{what}");
            let json = d.json.as_ref().unwrap_or_else(|| panic!("no JSON: {what}"));
            let checks = json["checks"].as_object().expect("checks");
            assert_eq!(checks.len(), 10, "{json:#}");
            for (k, v) in checks {
                assert_eq!(v, 0, "{prog} {who}: {k}: {json:#}");
            }
        }
    }
}

/// With a trace (and no checks), the data path is wrapped for the posts
/// and completions: `ibv-shim trace --per-qp` shows, for each of the two
/// QPs of a 40-round ping-pong, 40 posts (20 sends, 20 receives), 40
/// completions, all 40 matched to their post with a positive latency.
#[test]
fn a_traced_pingpong_gives_posts_completions_and_latency_per_qp() {
    let dir = TempDir::new("whole-api-trace");
    let file = dir.join("pp.trace");
    let file_s = file.to_str().unwrap().to_string();
    let r = shim_run(&["pingpong"], &[("IBV_SHIM_TRACE", &file_s)]);
    assert!(
        r.status.success() && r.stdout.contains("pingpong done"),
        "{}\n{}",
        r.stdout,
        r.log
    );
    let qp = |side: &str| {
        let at = r.stdout.find(&format!("{side}=")).unwrap() + 2;
        r.stdout[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let out = run(Command::new(target_dir().join("ibv-shim"))
        .args(["trace", "--per-qp"])
        .arg(&file));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for q in [qp("a"), qp("b")] {
        let row: Vec<&str> = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(q.as_str()))
            .unwrap_or_else(|| panic!("no row for QP {q}:\n{text}"))
            .split_whitespace()
            .collect();
        // pid qp_num posts completions failed matched mean p50 p99 max
        assert_eq!(&row[2..6], ["40", "40", "0", "40"], "{q}:\n{text}");
        let us = |s: &str| s.trim_end_matches("us").parse::<f64>().unwrap();
        assert!(us(row[6]) > 0.0 && us(row[9]) >= us(row[8]), "{q}:\n{text}");
    }
    // The posts and completions are binary records: no text made on the
    // data path.
    let t = trace_format::decode(&std::fs::read(&file).unwrap()).unwrap();
    let events: Vec<_> = t
        .records
        .iter()
        .filter(|r| r.flags & trace_format::FLAG_EVENT != 0)
        .collect();
    assert_eq!(events.len(), 160, "{events:?}");
    assert!(
        events
            .iter()
            .all(|r| r.flags & trace_format::FLAG_BINARY != 0),
        "{:?}",
        events[0]
    );
}

/// A QP destroyed and the next made at its address: the checks judge the
/// new QP by its own caps (the caps kept for a queue go at its destroy),
/// neither missing its violation nor inventing one.
#[test]
fn a_qp_made_at_a_destroyed_qps_address_is_checked_against_its_own_caps() {
    let include = |dir: &str| format!("-I{}", repo_dir().join(dir).display());
    let prog = cc(
        "recycled_qp",
        &[&repo_dir().join("tests/c/wholeapi/recycled_qp.c")],
        &[
            &include("tests/c/sim"),
            &include("tests/c/common"),
            "-O2",
            "-libverbs",
        ],
    );
    let dir = TempDir::new("recycled-qp");
    let mut cmd = Command::new(prog);
    for var in ["IBV_SHIM_LOG", "IBV_SHIM_LIBRARY", "IBV_SIM_DEVICES"] {
        cmd.env_remove(var);
    }
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", fabric_name("wholeapi", "recycled"));
    preload_shim(&mut cmd)
        .env("IBV_SHIM_CHECK", "datapath")
        .env("IBV_SHIM_LOG_FILE", dir.join("log"))
        .env("IBV_SHIM_REPORT", dir.join("report.json"));
    let out = run_unchecked(&mut cmd, Duration::from_secs(60));
    let (out, log) = (
        stdout(&out),
        std::fs::read_to_string(dir.join("log")).unwrap_or_default(),
    );
    assert!(out.contains("recycled_qp:"), "{out}\n{log}");
    // Otherwise the test shows nothing: the allocator must hand a
    // destroyed QP's memory to a QP with other caps.
    let recycled: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("recycled "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(recycled >= 5, "{out}");
    let lines = violations(&log, "num_sge");
    assert_eq!(lines.len(), 1, "{log}");
    for part in [
        "ibv_post_recv",
        "num_sge 3 is above the queue's max_recv_sge 2",
    ] {
        assert!(lines[0].contains(part), "no {part:?} in {}", lines[0]);
    }
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    // Each of the 20 QPs granting 2 SGEs, none of the 20 granting 4.
    assert_eq!(json["checks"]["num_sge"], 20, "{json:#}");
}
