//! Each family's device profile: `ibv_devinfo -v` of the sim's device
//! shows the headline attributes the table in `docs/ibv-sim.md` ("Limits
//! and timing") gives for it, and the features its provider lacks fail
//! with that provider's errno (the `features` probe of
//! `tests/c/fidelity/`, whose rxe0 output is what real rxe printed, and
//! `tests/c/profiles/verbs.c` for QP types, SRQs, address handles and
//! `ibv_rereg_mr`).

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use common::*;

const BEGIN: &str = "<!-- profiles: begin -->";
const END: &str = "<!-- profiles: end -->";

/// The table's rows: device name -> (column -> value).
fn table() -> Vec<(String, BTreeMap<String, String>)> {
    let doc = std::fs::read_to_string(repo_dir().join("docs/ibv-sim.md")).unwrap();
    let start = doc
        .find(BEGIN)
        .expect("no profiles table in docs/ibv-sim.md")
        + BEGIN.len();
    let end = doc[start..].find(END).expect("profiles table not closed") + start;
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut lines = doc[start..end].lines().filter(|l| l.starts_with('|'));
    let head = cells(lines.next().expect("no header row"));
    lines
        .skip(1)
        .map(|l| {
            let row = cells(l);
            assert_eq!(row.len(), head.len(), "row {l:?}");
            let m = head.iter().cloned().zip(row.iter().cloned()).collect();
            (row[0].clone(), m)
        })
        .collect()
}

/// A device of each family the sim offers.
const DEVICES: [&str; 15] = [
    "mlx5_0",
    "mlx4_0",
    "mthca0",
    "qib0",
    "hfi1_0",
    "irdma0",
    "i40iw0",
    "cxgb4_0",
    "bnxt_re0",
    "qedr0",
    "hns_0",
    "ocrdma0",
    "vmw_pvrdma0",
    "rxe0",
    "siw0",
];

/// `ibv_devinfo -v -d DEV` on the sim, as `attribute: value` pairs.
fn devinfo(dev: &str) -> BTreeMap<String, String> {
    let fabric = fabric_name("profiles", dev);
    let _guard = FabricGuard(fabric.clone());
    let mut cmd = Command::new("ibv_devinfo");
    cmd.args(["-v", "-d", dev])
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_DEVICES", dev)
        .env("IBV_SIM_FABRIC", &fabric);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    stdout(&out)
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn devinfo_shows_each_profiles_attributes() {
    let rows = table();
    let names: Vec<&str> = rows.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(names, DEVICES, "the table's devices: one per family");
    for (dev, want) in &rows {
        let got = devinfo(dev);
        let figures = want
            .iter()
            .filter(|(k, _)| !["device", "stands for"].contains(&k.as_str()));
        for (k, v) in figures {
            assert_eq!(got.get(k), Some(v), "{dev}: {k} (docs/ibv-sim.md's table)");
        }
    }
}

/// The `features` probe on `dev`: one line per feature.
fn features(dev: &str, gid: &str) -> BTreeMap<String, String> {
    probe("fidelity/features.c", dev, gid)
}

/// The probe `tests/c/<src>` run on `dev`, as `key: value` pairs.
fn probe(src: &str, dev: &str, gid: &str) -> BTreeMap<String, String> {
    let src = repo_dir().join("tests/c").join(src);
    let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
    let exe = cc(&format!("profile_{stem}"), &[src.as_path()], &["-libverbs"]);
    let fabric = fabric_name("profiles-f", dev);
    let _guard = FabricGuard(fabric.clone());
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_DEVICES", dev)
        .env("IBV_SIM_FABRIC", &fabric)
        .env("FIDELITY_DEVICE", dev)
        .env("FIDELITY_GID_INDEX", gid);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    stdout(&out)
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What each provider answers for the features of the probe: rdma-core's
/// placeholder (EOPNOTSUPP) for a verb it does not implement, the
/// kernel's EINVAL for on-demand paging on a device without it ("":
/// the probe does not get that far).
#[test]
fn missing_features_fail_as_each_provider_fails() {
    let ok = "ok";
    let no = "EOPNOTSUPP";
    #[rustfmt::skip]
    let want: &[(&str, &str, [&str; 11])] = &[
        // open_xrcd, reg_mr_on_demand, alloc_dm, alloc_td, alloc_parent_domain,
        // create_cq_ex_timestamp, create_cq_ex_byte_len, alloc_mw_type_1,
        // alloc_mw_type_2, create_qp_ex_send_ops, create_qp_ex_tso
        ("mlx5_0", "0", [ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, no]),
        ("mlx4_0", "0", [ok, "EINVAL", no, no, no, ok, ok, ok, ok, ok, no]),
        ("rxe0", "1", [no, "EINVAL", no, no, no, no, ok, ok, ok, ok, no]),
        // (The probe makes its QPs on an extended CQ, which siw lacks.)
        ("siw0", "0", [no, "EINVAL", no, no, no, no, no, no, no, "", ""]),
        // Providers with none of these verbs (rdma-core 44's tables).
        ("mthca0", "0", [no, "EINVAL", no, no, no, no, no, no, no, "", ""]),
        ("qib0", "0", [no, "EINVAL", no, no, no, no, no, no, no, "", ""]),
        ("hfi1_0", "0", [no, "EINVAL", no, no, no, no, no, no, no, "", ""]),
        ("cxgb4_0", "0", [no, "EINVAL", no, no, no, no, no, no, no, "", ""]),
        ("bnxt_re0", "0", [no, "EINVAL", no, no, no, no, no, no, no, "", ""]),
        ("ocrdma0", "0", [no, "EINVAL", no, no, no, no, no, no, no, "", ""]),
        ("vmw_pvrdma0", "0", [no, "EINVAL", no, no, no, no, no, no, no, "", ""]),
        // irdma: the extended CQ with a clock, type 1 windows only, no
        // create_qp_ex; gen 1 (X722) refuses the extended CQ.
        ("irdma0", "0", [no, "EINVAL", no, no, no, ok, ok, ok, no, no, no]),
        ("i40iw0", "0", [no, "EINVAL", no, no, no, no, no, ok, no, "", ""]),
        // qedr: XRC domains, nothing else of these.
        ("qedr0", "0", [ok, "EINVAL", no, no, no, no, no, no, no, "", ""]),
        // hns: XRC, both window types, extended CQ (no clock) and QP.
        ("hns_0", "0", [ok, "EINVAL", no, no, no, no, ok, ok, ok, ok, no]),
    ];
    let covered: Vec<&str> = want.iter().map(|(d, _, _)| *d).collect();
    for dev in DEVICES {
        assert!(covered.contains(&dev), "{dev} has no expected features");
    }
    let keys = [
        "open_xrcd",
        "reg_mr_on_demand",
        "alloc_dm",
        "alloc_td",
        "alloc_parent_domain",
        "create_cq_ex_timestamp",
        "create_cq_ex_byte_len",
        "alloc_mw_type_1",
        "alloc_mw_type_2",
        "create_qp_ex_send_ops",
        "create_qp_ex_tso",
    ];
    for (dev, gid, values) in want {
        let got = features(dev, gid);
        let want: BTreeMap<String, String> = keys
            .iter()
            .zip(values)
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want, "{dev}");
    }
    // rxe0's line is what real rxe printed.
    let expected =
        std::fs::read_to_string(repo_dir().join("tests/c/fidelity/features.expected")).unwrap();
    let real: BTreeMap<String, String> = expected
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(features("rxe0", "1"), real, "rxe0 against real rxe");
}

/// UC and UD QPs, SRQs, address handles, `ibv_rereg_mr` and XRC receive
/// QPs: made, or refused with the provider's errno, and a send with one
/// SGE too many refused with its post verb's (rdma-core's
/// placeholder EOPNOTSUPP for a verb it lacks; hns's own EINVAL for a UD
/// QP on Hip08; iWARP has RC only and no address handles; qedr takes an
/// XRC domain in `ibv_create_qp_ex`, nothing else beyond a PD).
#[test]
fn qp_types_srqs_ahs_rereg_xrc_and_posts_fail_as_each_provider_fails() {
    let ok = "ok";
    let no = "EOPNOTSUPP";
    #[rustfmt::skip]
    let want: &[(&str, &str, [&str; 7])] = &[
        // create_qp_uc, create_qp_ud, create_srq, create_ah, rereg_mr,
        // create_qp_xrc_recv, post_too_many_sges (mthca returns -1, cxgb4
        // and qedr -EINVAL: the sim's listed EINVAL)
        ("mlx5_0", "0", [ok, ok, ok, ok, ok, ok, "ENOMEM"]),
        ("mlx4_0", "0", [ok, ok, ok, ok, ok, ok, "ENOMEM"]),
        ("mthca0", "0", [ok, ok, ok, ok, no, no, "EINVAL"]),
        ("qib0", "0", [ok, ok, ok, ok, no, no, "EINVAL"]),
        ("hfi1_0", "0", [ok, ok, ok, ok, no, no, "EINVAL"]),
        ("irdma0", "0", [no, ok, no, ok, no, no, "EINVAL"]),
        ("i40iw0", "0", [no, no, no, no, no, no, "EINVAL"]),
        ("cxgb4_0", "0", [no, no, ok, no, no, no, "EINVAL"]),
        ("bnxt_re0", "0", [no, ok, ok, ok, no, no, "ENOMEM"]),
        ("qedr0", "0", [no, ok, ok, ok, no, ok, "EINVAL"]),
        ("hns_0", "0", [no, "EINVAL", ok, ok, ok, ok, "EINVAL"]),
        ("ocrdma0", "0", [no, ok, ok, ok, no, no, "ENOMEM"]),
        ("vmw_pvrdma0", "0", [no, ok, ok, ok, no, no, "EINVAL"]),
        ("rxe0", "1", [ok, ok, ok, ok, no, no, "EINVAL"]),
        ("siw0", "0", [no, no, ok, no, no, no, "EINVAL"]),
    ];
    let keys = [
        "create_qp_uc",
        "create_qp_ud",
        "create_srq",
        "create_ah",
        "rereg_mr",
        "create_qp_xrc_recv",
        "post_too_many_sges",
    ];
    let covered: Vec<&str> = want.iter().map(|(d, _, _)| *d).collect();
    assert_eq!(covered, DEVICES, "one row per family");
    for (dev, gid, values) in want {
        let want: BTreeMap<String, String> = keys
            .iter()
            .zip(values)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(probe("profiles/verbs.c", dev, gid), want, "{dev}");
    }
}
