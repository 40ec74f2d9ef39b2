//! Each family's device profile: `ibv_devinfo -v` of the sim's device
//! shows the headline attributes the table in `docs/ibv-sim.md` ("Limits
//! and timing") gives for it, and the features its provider lacks fail
//! with that provider's errno (the `features` probe of
//! `tests/c/fidelity/`, whose rxe0 output is what real rxe printed).

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
    assert_eq!(
        names,
        ["mlx5_0", "mlx4_0", "rxe0", "siw0"],
        "the table's devices"
    );
    for (dev, want) in &rows {
        let got = devinfo(dev);
        for (k, v) in want.iter().filter(|(k, _)| k.starts_with("max_")) {
            assert_eq!(got.get(k), Some(v), "{dev}: {k} (docs/ibv-sim.md's table)");
        }
    }
}

/// The `features` probe on `dev`: one line per feature.
fn features(dev: &str, gid: &str) -> BTreeMap<String, String> {
    let src = repo_dir().join("tests/c/fidelity/features.c");
    let exe = cc("profile_features", &[src.as_path()], &["-libverbs"]);
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
    ];
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
