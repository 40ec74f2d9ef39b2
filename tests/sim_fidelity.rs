//! ibv-sim's `rxe0` against real Soft-RoCE: each probe of
//! `tests/c/fidelity/` (single-process loopback, `key: value` lines) runs
//! on the sim's `rxe0`, and its output must equal `NAME.expected`, what the
//! probe prints on real rxe (rdma-core 44, kernel 6.1).
//!
//! A line where the sim still differs from rxe is listed in [`KNOWN`] with
//! the value the sim gives, and in `tests/c/fidelity/DIFFERENCES.md` with
//! the reason: the test then requires that value, so a difference that
//! goes away (or changes) must be taken off both lists, and an unlisted
//! one fails.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use common::*;

/// (probe, key, what the sim's rxe0 prints) for each listed difference.
const KNOWN: &[(&str, &str, &str)] = &[
    // A simulated device has no netdev to take down: its port stays
    // ACTIVE and raises no port event.
    ("port_events", "down.state", "no netdev"),
    ("port_events", "down.events.port_err", "no netdev"),
    ("port_events", "down.events.port_active", "no netdev"),
    ("port_events", "up.state", "no netdev"),
    ("port_events", "up.events.port_active", "no netdev"),
    ("port_events", "up.events.port_err", "no netdev"),
];

fn probe_dir() -> PathBuf {
    repo_dir().join("tests/c/fidelity")
}

fn lines(text: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let (k, v) = l
            .split_once(": ")
            .unwrap_or_else(|| panic!("not a `key: value` line: {l:?}"));
        assert!(
            m.insert(k.to_string(), v.to_string()).is_none(),
            "key {k:?} printed twice"
        );
    }
    m
}

/// Runs `tests/c/fidelity/NAME.c` on the sim's `device` (GID `gid`).
fn run_probe(name: &str, device: &str, gid: &str) -> (Command, std::process::Output) {
    let dir = probe_dir();
    let src = dir.join(format!("{name}.c"));
    let exe = cc(name, &[src.as_path()], &["-libverbs"]);
    let fabric = fabric_name("fidelity", name);
    let _guard = FabricGuard(fabric.clone());
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_DEVICES", device)
        .env("IBV_SIM_FABRIC", &fabric)
        .env("FIDELITY_DEVICE", device)
        .env("FIDELITY_GID_INDEX", gid)
        .current_dir(&dir);
    let out = run(&mut cmd);
    assert!(
        out.status.success(),
        "probe {name} could not run on {device}\n{}",
        describe(&cmd, &out)
    );
    (cmd, out)
}

/// Builds and runs `tests/c/fidelity/NAME.c` on the sim's rxe0, compares.
fn probe(name: &str) {
    let dir = probe_dir();
    let (cmd, out) = run_probe(name, "rxe0", "1");
    let expected_file = dir.join(format!("{name}.expected"));
    let expected = std::fs::read_to_string(&expected_file)
        .unwrap_or_else(|e| panic!("read {}: {e}", expected_file.display()));
    let want = lines(&expected);
    let got = lines(&stdout(&out));
    let mut wrong = Vec::new();
    for (k, v) in &want {
        let known = KNOWN
            .iter()
            .find(|(p, key, _)| *p == name && key == k)
            .map(|(_, _, sim)| *sim);
        let g = got.get(k).map(String::as_str);
        match known {
            Some(sim) if g != Some(sim) => wrong.push(format!(
                "{k}: sim gives {g:?}; listed as a known difference with {sim:?} (rxe: {v:?}): \
                 update KNOWN and DIFFERENCES.md"
            )),
            Some(_) => {}
            None if g != Some(v.as_str()) => {
                wrong.push(format!("{k}: rxe gives {v:?}, the sim {g:?}"))
            }
            None => {}
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        wrong.push(format!("{k}: printed by the sim, not in {name}.expected"));
    }
    assert!(
        wrong.is_empty(),
        "probe {name} on the sim's rxe0 differs from real rxe:\n  {}\n{}",
        wrong.join("\n  "),
        describe(&cmd, &out)
    );
}

#[test]
fn every_listed_difference_names_a_probe_line() {
    for (p, k, _) in KNOWN {
        let f = probe_dir().join(format!("{p}.expected"));
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(lines(&text).contains_key(*k), "{p}: no key {k}");
    }
}

#[test]
fn access_write() {
    probe("access_write");
}

#[test]
fn recv_too_small() {
    probe("recv_too_small");
}

#[test]
fn cq_overflow() {
    probe("cq_overflow");
}

#[test]
fn rnr() {
    probe("rnr");
}

#[test]
fn queue_depth() {
    probe("queue_depth");
}

#[test]
fn reg_mr() {
    probe("reg_mr");
}

#[test]
fn memlock() {
    probe("memlock");
}

#[test]
fn devinfo() {
    probe("devinfo");
}

#[test]
fn features() {
    probe("features");
}

#[test]
fn send_completion() {
    probe("send_completion");
}

#[test]
fn mw_bind() {
    probe("mw_bind");
}

#[test]
fn cq_notify() {
    probe("cq_notify");
}

#[test]
fn limits() {
    probe("limits");
}

#[test]
fn mw_limit() {
    probe("mw_limit");
}

/// The other profiles enforce their limits too: ConnectX-6's max_mw
/// (65536; the sim allocated 65546), refused with mlx5's ENOMEM.
#[test]
fn mw_limit_on_mlx5() {
    let (cmd, out) = run_probe("mw_limit", "mlx5_0", "0");
    assert_eq!(
        stdout(&out),
        "mw_allocated_is_max_mw: yes\nmw_past_max: ENOMEM\nmw_after_freeing: allocated\n",
        "{}",
        describe(&cmd, &out)
    );
}

#[test]
fn handles() {
    probe("handles");
}

#[test]
fn ud_grh() {
    probe("ud_grh");
}

#[test]
fn retry() {
    probe("retry");
}

#[test]
fn limits_shared() {
    probe("limits_shared");
}

#[test]
fn handles_errno() {
    probe("handles_errno");
}

#[test]
fn rnr_srq() {
    probe("rnr_srq");
}

#[test]
fn rnr_remote() {
    probe("rnr_remote");
}

#[test]
fn retry_remote() {
    probe("retry_remote");
}

#[test]
fn async_events() {
    probe("async_events");
}

#[test]
fn port_events() {
    probe("port_events");
}

/// The ConnectX-6 profile raises the IB spec's QP events where rxe raises
/// none: COMM_EST for the first request a QP in RTR receives, and
/// QP_ACCESS_ERR on the responder a refused RDMA READ moved to ERR (as
/// rxe's, its receive flushed); its refused lkey is LOC_PROT_ERR (rxe:
/// LOC_QP_OP_ERR). Everything else as rxe.
#[test]
fn async_events_on_mlx5() {
    let (cmd, out) = run_probe("async_events", "mlx5_0", "0");
    let expected = std::fs::read_to_string(probe_dir().join("async_events.expected")).unwrap();
    let mut want = lines(&expected);
    for (k, v) in [
        ("recv_in_rtr.events.responder.comm_est", "one"),
        ("bad_lkey.requester", "LOC_PROT_ERR"),
        ("read_past_end.events.responder.qp_access_err", "one"),
    ] {
        assert!(want.insert(k.into(), v.into()).is_some(), "no key {k}");
    }
    assert_eq!(lines(&stdout(&out)), want, "{}", describe(&cmd, &out));
}

#[test]
fn ex_sge() {
    probe("ex_sge");
}

#[test]
fn rxe_quirks() {
    probe("rxe_quirks");
}

/// The ConnectX-6 profile's builders are bounded by the QP's own
/// capabilities too, failing with mlx5's ENOMEM (rxe: ENOSPC), and it
/// has none of rxe's quirks: the SGE list and inline list go out whole,
/// atomic write and SEND with invalidate on UC are refused at creation
/// (the sim does not simulate atomic write), READs without credits are
/// neither held nor refused, and `ibv_rereg_mr` works.
#[test]
fn ex_sge_and_quirks_on_mlx5() {
    let (cmd, out) = run_probe("ex_sge", "mlx5_0", "0");
    let got = lines(&stdout(&out));
    for (k, v) in [
        ("max_sge", "30"),
        ("qp4.sge_5.complete", "ENOMEM"),
        ("qp4.inline_65.complete", "ENOMEM"),
        ("qp4.sge_4.recv_bytes", "32"),
    ] {
        assert_eq!(
            got.get(k).map(String::as_str),
            Some(v),
            "{k}\n{}",
            describe(&cmd, &out)
        );
    }
    let (cmd, out) = run_probe("rxe_quirks", "mlx5_0", "0");
    let got = lines(&stdout(&out));
    for (k, v) in [
        ("inline_list.recv_bytes", "16"),
        ("sge_list_8_100.recv_bytes", "108"),
        ("atomic_write.create", "EOPNOTSUPP"),
        ("uc_send_inv.create", "EOPNOTSUPP"),
        ("read_max_rd_atomic_0.send", "SUCCESS"),
        ("read_max_dest_rd_atomic_0.send", "SUCCESS"),
        ("rereg_mr.result", "0"),
    ] {
        assert_eq!(
            got.get(k).map(String::as_str),
            Some(v),
            "{k}\n{}",
            describe(&cmd, &out)
        );
    }
}
