//! Open MPI's openib BTL uses a verbs device only if
//! `ibv_get_sysfs_path()`'s `class/infiniband` is a directory
//! (`opal_common_verbs_check_basics`), which a machine without RDMA
//! hardware lacks. The sim honours `SYSFS_PATH` as rdma-core does, so a
//! directory holding an empty `class/infiniband` passes that check, while
//! the devices and their sysfs attributes (served by the sim through each
//! device's `ibdev_path`) stay as they are (`tests/c/sim/sim_sysfs_class.c`,
//! which makes Open MPI's check and its next steps).

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

#[test]
fn a_sysfs_path_with_an_empty_class_infiniband_passes_open_mpis_check_on_the_sim() {
    let src = repo_dir().join("tests/c/sim/sim_sysfs_class.c");
    let exe = cc("sim_sysfs_class", &[&src], &["-O1", "-libverbs"]);
    let dir = TempDir::new("sim-sysfs");
    std::fs::create_dir_all(dir.join("class/infiniband")).unwrap();
    let fabric = fabric_name("sim-sysfs", "openib");
    let _guard = FabricGuard(fabric.clone());
    let mut c = Command::new(&exe);
    c.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", &fabric)
        .env("SYSFS_PATH", dir.path())
        .env_remove("LD_PRELOAD")
        .env_remove("IBV_SIM_DEVICES");
    let out = run_unchecked(&mut c, Duration::from_secs(60));
    assert!(out.status.success(), "{}", describe(&c, &out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{}", describe(&c, &out));
    assert_eq!(lines[0], format!("sysfs {}", dir.path().display()));
    assert_eq!(lines[1], "class/infiniband ok");
    for (line, dev) in lines[2..].iter().zip(["mlx5_0", "mlx5_1"]) {
        let board = line
            .strip_prefix(&format!("device {dev} board_id "))
            .unwrap_or_else(|| panic!("{line}"));
        assert!(!board.is_empty(), "{line}");
    }
}
