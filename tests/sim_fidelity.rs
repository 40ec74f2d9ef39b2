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
    // RoCE v2 over IPv4: rxe leaves 20 zero bytes and the IPv4 header in
    // a UD receive's GRH bytes, the sim an IPv6-style GRH (UCX's ud_verbs
    // over the sim stops receiving with the IPv4 layout).
    ("ud_grh", "grh.first_20_zero", "no"),
    ("ud_grh", "grh.ip_version_ihl", "0xa"),
    ("ud_grh", "grh.tos", "0x1"),
    ("ud_grh", "grh.ttl", "0"),
    ("ud_grh", "grh.protocol", "0"),
    // From that GRH, ibv_init_ah_from_wc takes 0xff as the hop limit; from
    // rxe's IPv4 header, its TTL.
    ("ud_grh", "reply_ah.hop_limit", "255"),
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
