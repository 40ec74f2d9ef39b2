//! The leak audit sees the connection manager: `tests/c/cm_audit/mistakes.c`
//! (compiled against the real `<rdma/rdma_cma.h>`, linked to `-lrdmacm`)
//! makes one mistake a run on the sim's librdmacm, with the shim preloaded
//! (and once through the drop-in `librdmacm.so.1`), and the shim's log
//! names it: a leaked id and channel with their creation sites, an
//! unacked event before `rdma_destroy_id` blocks (the program is killed
//! while blocked and the diagnosis read), a double ack, an id destroyed
//! before its QP.

mod common;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn mistakes() -> PathBuf {
    cc(
        "cm_mistakes",
        &[&repo_dir().join("tests/c/cm_audit/mistakes.c")],
        &["-lrdmacm", "-libverbs"],
    )
}

/// `mistakes.c:N`, N the line of the `nth` (from 1) line of mistakes.c
/// holding `code`: the sites the report must name.
fn site(code: &str, nth: usize) -> String {
    let src = std::fs::read_to_string(repo_dir().join("tests/c/cm_audit/mistakes.c")).unwrap();
    let line = src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(code))
        .nth(nth - 1)
        .unwrap_or_else(|| panic!("no {code:?} (#{nth}) in mistakes.c"))
        .0;
    format!("mistakes.c:{}", line + 1)
}

/// The line number of a `site`.
fn line_no(site: &str) -> u64 {
    site.rsplit(':').next().unwrap().parse().unwrap()
}

/// The sites of the `leak` scenario's id and channel.
fn leak_id() -> String {
    site("rdma_create_id(ch, &id", 2)
}
fn leak_channel() -> String {
    site("ch = rdma_create_event_channel()", 2)
}

/// The program on its own fabric of the sim, with its librdmacm.
fn command(scenario: &str, tag: &str) -> (Command, Fabric) {
    let (mut c, fabric) = on_the_sim(&mistakes(), tag);
    c.arg(scenario);
    (c, fabric)
}

/// `prog` on its own fabric of the sim (`tag`), with its librdmacm, the
/// shim's log at warn on stderr.
fn on_the_sim(prog: &std::path::Path, tag: &str) -> (Command, Fabric) {
    let fabric = Fabric(fabric_name("cmaudit", tag));
    let mut c = Command::new(prog);
    c.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", &fabric.0)
        .env("IBV_SIM_DEVICES", "rxe0")
        .env("IBV_SHIM_LOG", "warn")
        .env_remove("IBV_SHIM_LOG_FILE")
        .stdin(Stdio::null());
    (c, fabric)
}

/// Removes the fabric's segment and rendezvous directory.
struct Fabric(String);

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(segment_path(&self.0));
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let _ = std::fs::remove_dir_all(format!("/dev/shm/ibv-sim-cm-{uid}-{}", self.0));
    }
}

/// Runs a scenario to its end with the shim preloaded: (exit code,
/// stdout, stderr).
fn run_preloaded(scenario: &str) -> (Option<i32>, String, String) {
    let (mut c, _fabric) = command(scenario, scenario);
    preload_shim(&mut c);
    let out = run_unchecked(&mut c, Duration::from_secs(60));
    (out.status.code(), stdout(&out), stderr(&out))
}

/// The shim's WARN line of stderr containing every one of `parts`.
fn warn_with<'a>(err: &'a str, parts: &[&str]) -> &'a str {
    err.lines()
        .find(|l| l.contains(" WARN ") && parts.iter().all(|p| l.contains(p)))
        .unwrap_or_else(|| panic!("no WARN line with {parts:?} in:\n{err}"))
}

/// A leaked id and channel are reported at exit, each with the line of
/// mistakes.c that made it.
#[test]
fn leaked_id_and_channel_are_reported_with_their_sites() {
    let (code, out, err) = run_preloaded("leak");
    assert_eq!(code, Some(0), "{out}{err}");
    warn_with(
        &err,
        &["connection manager at exit: 2 things were never freed"],
    );
    warn_with(
        &err,
        &[
            "cm_id 0x",
            "port space TCP",
            "made by rdma_create_id at main",
            &leak_id(),
        ],
    );
    warn_with(
        &err,
        &[
            "event channel 0x",
            "made by rdma_create_event_channel at main",
            &leak_channel(),
        ],
    );
}

/// The same leak through the drop-in librdmacm.so.1 (the shim under
/// librdmacm's name, first on the search path, forwarding to the sim's).
#[test]
fn the_dropin_librdmacm_forwards_and_audits() {
    let dropin = target_dir().parent().unwrap().join("dropin");
    let (mut c, _fabric) = command("leak", "dropin");
    c.env("LD_LIBRARY_PATH", path_list(&[&dropin, &sim_dir()]))
        .env_remove("LD_PRELOAD");
    let out = run_unchecked(&mut c, Duration::from_secs(60));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{}{err}", stdout(&out));
    warn_with(
        &err,
        &["cm_id 0x", "made by rdma_create_id at main", &leak_id()],
    );
}

/// An event fetched and never acked: the diagnosis names it and where it
/// was fetched before rdma_destroy_id blocks, and again while it stays
/// blocked; the program is killed then.
#[test]
fn unacked_event_is_diagnosed_before_destroy_blocks() {
    let (mut c, _fabric) = command("unacked", "unacked");
    preload_shim(&mut c);
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mistakes");
    let mut err_pipe = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut v = String::new();
        let _ = err_pipe.read_to_string(&mut v);
        v
    });
    let mut out_pipe = child.stdout.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = String::new();
        let _ = out_pipe.read_to_string(&mut v);
        v
    });
    // Blocked for ever by librdmacm's contract: give the watchdog time to
    // repeat the diagnosis once (every 2 s), then kill it.
    let start = Instant::now();
    let mut exited = None;
    while start.elapsed() < Duration::from_millis(5000) {
        if let Ok(Some(s)) = child.try_wait() {
            exited = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let (out, err) = (out_reader.join().unwrap(), err_reader.join().unwrap());
    assert!(
        exited.is_none(),
        "rdma_destroy_id returned with its event unacked:\n{out}{err}"
    );
    assert!(
        out.contains("destroying the id with its event unacked\n"),
        "{out}{err}"
    );
    assert!(!out.contains("destroy returned"), "{out}{err}");
    warn_with(
        &err,
        &[
            "rdma_destroy_id(id=0x",
            "with events fetched and never acked: event ADDR_RESOLVED",
            "fetched at resolved",
            &site("rdma_get_cm_event(ch, &ev)", 1),
            "blocks",
        ],
    );
    warn_with(
        &err,
        &[
            "rdma_destroy_id(0x",
            "still blocked after",
            "event ADDR_RESOLVED",
        ],
    );
}

/// A second ack of an event is said (where) and refused with EINVAL, as
/// the sim's librdmacm answers it; the program goes on.
#[test]
fn double_ack_is_diagnosed() {
    let (code, out, err) = run_preloaded("double");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("second ack -1 errno 22\n"), "{out}{err}");
    warn_with(
        &err,
        &[
            "double ack: rdma_ack_cm_event(event=0x",
            "mistakes.c:",
            "acked already",
        ],
    );
}

/// rdma_destroy_id of an id whose QP rdma_create_qp made and nobody
/// destroyed: said at the call, and the QP reported at exit.
#[test]
fn id_destroyed_before_its_qp_is_diagnosed() {
    let (code, out, err) = run_preloaded("id_qp");
    assert_eq!(code, Some(0), "{out}{err}");
    warn_with(
        &err,
        &[
            "rdma_destroy_id(id=0x",
            "mistakes.c:",
            "while its QP 0x",
            "is alive",
        ],
    );
    warn_with(&err, &["qp 0x", "qp_num="]);
}

/// The verbs objects that belong with a leaked id are named under it: the
/// CQs and completion channels rdma_create_qp made (the program gave
/// none), the QP's PD and the buffer rdma_reg_msgs registered on it; in
/// the text report (each line right after its id) and in the JSON report's
/// `verbs` of the cm_id, by the addresses the program printed.
#[test]
fn what_librdmacm_made_for_an_id_is_listed_under_it() {
    let dir = TempDir::new("cm-audit-verbs");
    let report = dir.join("leak.json");
    let (mut c, _fabric) = command("id_verbs", "id_verbs");
    preload_shim(&mut c);
    c.env("IBV_SHIM_REPORT", &report);
    let out = run_unchecked(&mut c, Duration::from_secs(60));
    let (out_s, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{out_s}{err}");
    // "id 0x.. qp 0x.. pd 0x.. send_cq 0x.. ..." from the program.
    let printed = out_s
        .lines()
        .find(|l| l.starts_with("id 0x"))
        .unwrap_or_else(|| panic!("{out_s}"));
    let words: Vec<&str> = printed.split(' ').collect();
    let addr_of = |name: &str| {
        let i = words.iter().position(|w| *w == name).unwrap();
        words[i + 1].to_string()
    };
    // The text report: the id's line, then its objects, in order.
    let lines: Vec<&str> = err.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(&format!("cm_id {}", addr_of("id"))))
        .unwrap_or_else(|| panic!("no cm_id line in:\n{err}"));
    let under: Vec<&str> = lines[at + 1..]
        .iter()
        .take_while(|l| l.contains(" WARN ") && l.contains("     "))
        .copied()
        .collect();
    let has = |parts: &[&str]| under.iter().any(|l| parts.iter().all(|p| l.contains(p)));
    for role in ["send_cq", "recv_cq", "send_cq_channel", "recv_cq_channel"] {
        assert!(
            has(&[
                &format!("{role} {}", addr_of(role)),
                "made by librdmacm with the QP"
            ]),
            "{role} not under its id:\n{err}"
        );
    }
    assert!(has(&[&format!("qp {}", addr_of("qp")), "alive"]), "{err}");
    assert!(has(&[&format!("pd {}", addr_of("pd")), "alive"]), "{err}");
    assert!(
        has(&[
            &format!("mr {}", addr_of("mr")),
            "on that pd",
            "rdma_reg_msgs"
        ]),
        "{err}"
    );
    // The JSON report: the same objects, by role.
    let text = std::fs::read_to_string(&report).expect("the report");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let id = doc["connection_manager"]["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .find(|o| o["kind"] == "cm_id")
        .unwrap_or_else(|| panic!("{text}"));
    let mut roles: Vec<(String, String)> = id["verbs"]
        .as_array()
        .unwrap_or_else(|| panic!("no verbs under the id: {text}"))
        .iter()
        .map(|v| {
            (
                v["role"].as_str().unwrap().to_string(),
                v["handle"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    roles.sort();
    let mut want: Vec<(String, String)> = [
        "mr",
        "pd",
        "recv_cq",
        "recv_cq_channel",
        "send_cq",
        "send_cq_channel",
    ]
    .iter()
    .map(|r| (r.to_string(), addr_of(r)))
    .collect();
    want.sort();
    assert_eq!(roles, want, "{text}");
}

/// A program that loads librdmacm by hand (`dlopen`, `dlsym` on that
/// handle; tests/c/cm_audit/by_hand.c) is audited: what it left is
/// reported with its sites, what it destroyed is not, and its `dlclose`
/// unloads the library exactly when it does without the shim.
#[test]
fn a_program_that_loads_librdmacm_by_hand_is_audited() {
    let prog = cc(
        "cm_by_hand",
        &[&repo_dir().join("tests/c/cm_audit/by_hand.c")],
        &["-ldl"],
    );
    let run_it = |shim: bool| {
        let (mut c, _fabric) = on_the_sim(&prog, if shim { "hand1" } else { "hand0" });
        c.env_remove("LD_PRELOAD");
        if shim {
            preload_shim(&mut c);
        }
        let out = run_unchecked(&mut c, Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&c, &out));
        (stdout(&out), stderr(&out))
    };
    let (plain, _) = run_it(false);
    let (out, err) = run_it(true);
    assert_eq!(
        out, plain,
        "the program saw something else under the shim\n{err}"
    );
    assert!(plain.contains("left a channel and an id"), "{plain}");
    let src = std::fs::read_to_string(repo_dir().join("tests/c/cm_audit/by_hand.c")).unwrap();
    let line_of = |code: &str| src.lines().position(|l| l.contains(code)).unwrap() + 1;
    warn_with(
        &err,
        &["connection manager at exit: 2 things were never freed"],
    );
    warn_with(
        &err,
        &[
            "cm_id 0x",
            "made by rdma_create_id at round_trip",
            &format!("by_hand.c:{}", line_of("if (create_id(ch, &id")),
        ],
    );
    warn_with(
        &err,
        &[
            "event channel 0x",
            "made by rdma_create_event_channel at round_trip",
            &format!("by_hand.c:{}", line_of("ch = create_channel()")),
        ],
    );
}

/// Through the launcher: the summary counts the leaked id and channel as
/// leaks (the leak exit code), and the JSON report's
/// `connection_manager` lists them with their sites and is valid under
/// `docs/leak-report.schema.json`.
#[test]
fn the_launcher_and_the_json_report_count_them() {
    let dir = TempDir::new("cm-audit-json");
    let report = dir.join("leak.json");
    let fabric = Fabric(fabric_name("cmaudit", "json"));
    let mut c = Command::new(target_dir().join("ibv-shim"));
    c.args(["--sim", "--sim-dir"])
        .arg(sim_dir())
        .args(["--leak-exitcode", "23", "--report"])
        .arg(&report)
        .arg("--")
        .arg(mistakes())
        .arg("leak")
        .env("IBV_SIM_FABRIC", &fabric.0)
        .env("IBV_SIM_DEVICES", "rxe0")
        .env_remove("LD_PRELOAD");
    let out = run_unchecked(&mut c, Duration::from_secs(60));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(23), "{}{err}", stdout(&out));
    assert!(
        err.contains("leaked 2 RDMA objects: 1 cm_id, 1 event_channel"),
        "{err}"
    );
    let text = std::fs::read_to_string(&report).expect("the report");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["leaked"], true, "{text}");
    let objects = doc["connection_manager"]["objects"]
        .as_array()
        .expect("objects");
    let lines: Vec<(String, u64)> = objects
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_string(),
                o["created"]["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("cm_id".to_string(), line_no(&leak_id())),
            ("event_channel".to_string(), line_no(&leak_channel()))
        ],
        "{text}"
    );
    let script = r#"
import json, sys
import jsonschema
v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
errors = list(v.iter_errors(json.load(open(sys.argv[2]))))
print("invalid" if errors else "valid", "; ".join(e.message for e in errors[:3]))
"#;
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(script)
        .arg(repo_dir().join("docs/leak-report.schema.json"))
        .arg(&report);
    let v = run(&mut cmd);
    assert!(
        v.status.success() && stdout(&v).starts_with("valid"),
        "python3 with jsonschema is needed (Debian: python3-jsonschema)\n{}",
        describe(&cmd, &v)
    );
}

/// A fault rule fails an rdma_* call as librdmacm would (-1 and the
/// rule's errno, the real call not made); the error path's leaks are then
/// reported.
#[test]
fn a_fault_rule_fails_an_rdma_call() {
    let (mut c, _fabric) = command("double", "fault");
    preload_shim(&mut c);
    c.env("IBV_SHIM_FAULTS", "rdma_resolve_addr:nth=1:errno=ETIMEDOUT");
    let out = run_unchecked(&mut c, Duration::from_secs(60));
    let (o, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{o}{err}");
    assert!(
        o.contains("FAIL: rdma_resolve_addr (errno 110)"),
        "{o}{err}"
    );
    warn_with(
        &err,
        &["fault injected: rdma_resolve_addr call 1", "ETIMEDOUT"],
    );
    warn_with(&err, &["cm_id 0x", "made by rdma_create_id at resolved"]);
}

/// The connection manager's calls and events are in the binary trace like
/// verbs calls (their declarations make the records): `ibv-shim trace`
/// shows them as the debug log does, and the Chrome trace has a slice for
/// each.
#[test]
fn rdma_calls_and_events_are_traced() {
    let dir = TempDir::new("cm-audit-trace");
    let trace = dir.join("trace");
    let (mut c, _fabric) = command("double", "trace");
    preload_shim(&mut c);
    c.env("IBV_SHIM_TRACE", &trace);
    let out = run_unchecked(&mut c, Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let decode = |format: &str| {
        let mut d = Command::new(target_dir().join("ibv-shim"));
        d.args(["trace", "--format", format]).arg(&trace);
        let o = run(&mut d);
        assert!(o.status.success(), "{}", describe(&d, &o));
        stdout(&o)
    };
    let text = decode("text");
    for call in [
        "rdma_create_event_channel() = 0x",
        "rdma_create_id(channel=0x",
        "rdma_resolve_addr(id=0x",
        "rdma_get_cm_event(channel=0x",
        "(event_type=0)",
        "rdma_ack_cm_event(event=0x",
        "rdma_destroy_id(id=0x",
    ] {
        assert!(text.contains(call), "no {call:?} in the trace:\n{text}");
    }
    let chrome = decode("chrome");
    let doc: serde_json::Value = serde_json::from_str(&chrome).expect("Chrome JSON");
    let names: Vec<&str> = doc["traceEvents"]
        .as_array()
        .or_else(|| doc.as_array())
        .expect("events")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for n in ["rdma_get_cm_event", "rdma_ack_cm_event", "rdma_create_id"] {
        assert!(names.contains(&n), "no {n} slice in {names:?}");
    }
}
