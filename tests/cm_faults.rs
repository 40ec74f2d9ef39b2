//! Connection failures on demand: `cm_event` fault rules replace an event
//! `rdma_get_cm_event` returns with a failure event, and the program's
//! error path runs. `tests/c/cm_audit/connect.c` (a client and a server,
//! two processes on the sim with its librdmacm, the shim preloaded in
//! both) shows what the program saw and what its error path left behind.

mod common;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn connect() -> PathBuf {
    cc(
        "cm_connect",
        &[&repo_dir().join("tests/c/cm_audit/connect.c")],
        &["-lrdmacm", "-libverbs"],
    )
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

/// `connect ARGS` on the fabric, the shim preloaded, logging at warn.
fn command(fabric: &Fabric, args: &[&str]) -> Command {
    let mut c = Command::new(connect());
    c.args(args)
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", &fabric.0)
        .env("IBV_SIM_DEVICES", "rxe0")
        .env("IBV_SHIM_LOG", "warn")
        .env_remove("IBV_SHIM_LOG_FILE")
        .env_remove("IBV_SHIM_FAULTS")
        .stdin(Stdio::null());
    preload_shim(&mut c);
    c
}

/// A server started and listening on `port`.
fn server(fabric: &Fabric, port: u16, faults: Option<&str>) -> Child {
    let mut c = command(fabric, &["server", &port.to_string()]);
    if let Some(f) = faults {
        c.env("IBV_SHIM_FAULTS", f);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let start = Instant::now();
    while !cm_listening(&fabric.0, port) {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("the server never listened on {port}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The server's end (killed after 30 s): (exit code, stdout, stderr).
fn finish(mut child: Child) -> (Option<i32>, String, String) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let status = child.wait().expect("wait for the server");
    let mut out = String::new();
    let mut err = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut out);
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    (status.code(), out, err)
}

/// The client against a server on `port`, with `faults`: (exit code,
/// stdout, stderr).
fn client(fabric: &Fabric, port: u16, faults: &str) -> (Option<i32>, String, String) {
    client_reporting(fabric, port, faults, None)
}

/// [`client`], its JSON report written to `report`.
fn client_reporting(
    fabric: &Fabric,
    port: u16,
    faults: &str,
    report: Option<&std::path::Path>,
) -> (Option<i32>, String, String) {
    let mut c = command(fabric, &["client", "127.0.0.1", &port.to_string()]);
    c.env("IBV_SHIM_FAULTS", faults);
    if let Some(r) = report {
        c.env("IBV_SHIM_REPORT", r);
    }
    let out = run_unchecked(&mut c, Duration::from_secs(60));
    (out.status.code(), stdout(&out), stderr(&out))
}

/// The shim's WARN line containing every one of `parts`.
fn warn_with<'a>(err: &'a str, parts: &[&str]) -> &'a str {
    err.lines()
        .find(|l| l.contains(" WARN ") && parts.iter().all(|p| l.contains(p)))
        .unwrap_or_else(|| panic!("no WARN line with {parts:?} in:\n{err}"))
}

/// The client's ESTABLISHED becomes REJECTED (reason 28): the client
/// prints it and takes its error path, which destroys the id under its
/// live QP (diagnosed at the call) and leaves the QP, its CQ, the PD and
/// the channel (reported at exit). The server, connected, sees the
/// client go away and cleans up.
#[test]
fn an_established_event_replaced_by_rejected() {
    let fabric = Fabric(fabric_name("cmfaults", "rejected"));
    let dir = TempDir::new("cm-faults-rejected");
    let report = dir.join("client.json");
    let srv = server(&fabric, 7481, None);
    let (code, out, err) =
        client_reporting(&fabric, 7481, "cm_event:as=REJECTED:nth=1", Some(&report));
    let (scode, sout, serr) = finish(srv);
    let all = format!("client:\n{out}{err}\nserver:\n{sout}{serr}");
    assert_eq!(code, Some(2), "{all}");
    assert!(
        out.contains("event RDMA_CM_EVENT_ROUTE_RESOLVED status 0\nevent RDMA_CM_EVENT_REJECTED status 28\nerror path"),
        "{all}"
    );
    warn_with(
        &err,
        &[
            "fault injected: rdma_get_cm_event call 1 from ",
            "cm_connect-",
            "(rule \"cm_event:as=REJECTED:nth=1\"): event ESTABLISHED replaced by REJECTED (status 28)",
        ],
    );
    warn_with(
        &err,
        &["[id-before-qp] rdma_destroy_id(id=0x", "while its QP 0x"],
    );
    warn_with(
        &err,
        &["connection manager at exit: 1 thing was never freed"],
    );
    warn_with(
        &err,
        &["  event channel 0x", "made by rdma_create_event_channel"],
    );
    warn_with(
        &err,
        &["SUMMARY: ibv-shim: 3 objects leaked (1 pd, 1 cq, 1 qp) in 1 context"],
    );
    // The JSON report lists the replacement.
    let text = std::fs::read_to_string(&report).expect("the client's report");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let fault = &doc["faults"][0];
    assert_eq!(fault["verb"], "rdma_get_cm_event", "{text}");
    assert_eq!(fault["nth"], 1, "{text}");
    assert_eq!(
        fault["event"],
        serde_json::json!({"fetched": "ESTABLISHED", "given": "REJECTED", "status": 28}),
        "{text}"
    );
    assert_eq!(fault["errno"], serde_json::Value::Null, "{text}");
    assert_eq!(scode, Some(0), "{all}");
    assert!(
        sout.contains("event RDMA_CM_EVENT_DISCONNECTED status 0\ndone\n"),
        "{all}"
    );
    assert!(!serr.contains("fault injected"), "{all}");
}

/// The server's ESTABLISHED becomes an early DISCONNECTED; the client's
/// ADDR_RESOLVED an ADDR_ERROR with the status the rule gives: each side
/// sees the event as written, takes its error path, and leaves what that
/// path forgets (the server its QP, CQ, PD and channel; the client,
/// which has no QP yet, its channel).
#[test]
fn an_early_disconnect_and_an_address_error() {
    let fabric = Fabric(fabric_name("cmfaults", "early"));
    let srv = server(
        &fabric,
        7482,
        Some("cm_event:event=ESTABLISHED:as=DISCONNECTED:nth=1"),
    );
    let (_, out, err) = client(
        &fabric,
        7482,
        "cm_event:as=UNREACHABLE:event=DISCONNECTED:nth=1",
    );
    let (scode, sout, serr) = finish(srv);
    let all = format!("client:\n{out}{err}\nserver:\n{sout}{serr}");
    assert_eq!(scode, Some(2), "{all}");
    assert!(
        sout.contains("event RDMA_CM_EVENT_CONNECT_REQUEST status 0\nevent RDMA_CM_EVENT_DISCONNECTED status 0\nerror path"),
        "{all}"
    );
    warn_with(
        &serr,
        &["event ESTABLISHED replaced by DISCONNECTED (status 0)"],
    );
    warn_with(
        &serr,
        &["SUMMARY: ibv-shim: 3 objects leaked (1 pd, 1 cq, 1 qp)"],
    );

    let fabric = Fabric(fabric_name("cmfaults", "addr"));
    let srv = server(&fabric, 7483, None);
    let (code, out, err) = client(&fabric, 7483, "cm_event:as=ADDR_ERROR:reason=-113:nth=1");
    let mut srv = srv;
    let _ = srv.kill();
    let _ = srv.wait();
    let all = format!("client:\n{out}{err}");
    assert_eq!(code, Some(2), "{all}");
    assert!(
        out.starts_with("event RDMA_CM_EVENT_ADDR_ERROR status -113\nerror path"),
        "{all}"
    );
    warn_with(
        &err,
        &["event ADDR_RESOLVED replaced by ADDR_ERROR (status -113)"],
    );
    warn_with(
        &err,
        &["connection manager at exit: 1 thing was never freed"],
    );
    assert!(!err.contains("SUMMARY: ibv-shim"), "{all}");
}

/// `--fault-sweep --peer`: rping's server as the peer, its client as the
/// program, on the sim. The counting run counts both ends; each chosen
/// point fails in turn on its own end (a call failed, or an event
/// replaced), and the table and the JSON summary say which end and what
/// each end left behind.
#[test]
fn a_sweep_of_both_ends_of_rping() {
    let dir = TempDir::new("cm-faults-sweep");
    let json = dir.join("sweep.json");
    let fabric = Fabric(fabric_name("cmfaults", "sweep"));
    let mut c = Command::new(target_dir().join("ibv-shim"));
    c.args(["--sim", "--sim-dir"])
        .arg(sim_dir())
        .args([
            "--fault-sweep",
            "--sweep-timeout",
            "30",
            "--sweep-verbs",
            "rdma_resolve_addr,rdma_listen,cm_event",
            "--sweep-json",
        ])
        .arg(&json)
        .args(["--peer", "rping -s -a 127.0.0.1 -p 7484 -C 1"])
        .args([
            "--",
            "rping",
            "-c",
            "-a",
            "127.0.0.1",
            "-p",
            "7484",
            "-C",
            "1",
        ])
        .current_dir(dir.join("."))
        .env("IBV_SIM_FABRIC", &fabric.0)
        .env("IBV_SIM_DEVICES", "rxe0")
        .env_remove("LD_PRELOAD");
    let out = run_unchecked(&mut c, Duration::from_secs(600));
    let err = stderr(&out);
    // rping leaks on its error paths: the sweep says so (exit 1).
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("with peer rping -s -a 127.0.0.1 -p 7484 -C 1"),
        "{err}"
    );
    let row = |end: &str, call: &str| {
        err.lines()
            .find(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.get(1) == Some(&end) && w.get(2) == Some(&call)
            })
            .unwrap_or_else(|| panic!("no {end} row for {call}:\n{err}"))
            .to_string()
    };
    for (end, call) in [
        ("program", "rdma_resolve_addr"),
        ("program", "cm_event:event=ADDR_RESOLVED:as=ADDR_ERROR"),
        ("program", "cm_event:event=ROUTE_RESOLVED:as=ROUTE_ERROR"),
        ("program", "cm_event:event=ESTABLISHED:as=REJECTED"),
        ("peer", "rdma_listen"),
        ("peer", "cm_event:event=ESTABLISHED:as=REJECTED"),
    ] {
        row(end, call);
    }
    let text = std::fs::read_to_string(&json).expect("the JSON summary");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["peer"], "rping -s -a 127.0.0.1 -p 7484 -C 1", "{text}");
    assert_eq!(doc["baseline"]["program"]["exit"], 0, "{text}");
    assert_eq!(doc["baseline"]["peer"]["exit"], 0, "{text}");
    let runs = doc["runs"].as_array().expect("runs");
    let run = |end: &str, verb: &str| {
        runs.iter()
            .find(|r| r["end"] == end && r["verb"] == verb)
            .unwrap_or_else(|| panic!("no {end} run of {verb}: {text}"))
    };
    // The client told REJECTED instead of ESTABLISHED exits with its
    // whole connection left: the id, its QP, CQ, MRs, PD and channels.
    let r = run("program", "cm_event:event=ESTABLISHED:as=REJECTED");
    assert_eq!(r["program"]["injected"], true, "{text}");
    assert_ne!(r["program"]["exit"], 0, "{text}");
    for kind in ["cm_id", "event_channel", "qp", "cq", "pd", "mr"] {
        assert!(
            r["program"]["leaks"][kind].as_u64() > Some(0),
            "{kind}: {text}"
        );
    }
    // The server whose rdma_listen fails: the fault is the peer's.
    let r = run("peer", "rdma_listen");
    assert_eq!(r["peer"]["injected"], true, "{text}");
    assert_ne!(r["peer"]["exit"], 0, "{text}");
    // The server told REJECTED for its ESTABLISHED leaks its ids.
    let r = run("peer", "cm_event:event=ESTABLISHED:as=REJECTED");
    assert_eq!(r["peer"]["injected"], true, "{text}");
    assert!(r["peer"]["leaks"]["cm_id"].as_u64() > Some(0), "{text}");
}
