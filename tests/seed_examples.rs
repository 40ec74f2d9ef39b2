//! The seed document's programs (`c_examples/`), compiled unchanged against
//! the real `verbs.h`, open and close every simulated device with the shim
//! preloaded and logging, and print what they print without it.
//!
//! Needs gcc, libibverbs-dev and a built shim and sim (`make test`).

mod common;

use common::*;
use std::process::Command;

const DEVICES: &str = "mlx5_0,mlx4_0,rxe0,siw0";

fn on_sim(prog: &std::path::Path, with_shim: bool, log_dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(prog);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_DEVICES", DEVICES)
        .env_remove("IBV_SHIM_LIBRARY")
        .env_remove("LD_PRELOAD");
    if with_shim {
        cmd.env("LD_PRELOAD", shim_so())
            .env("IBV_SHIM_LOG", "debug")
            .env("IBV_SHIM_LOG_FILE", log_dir.join("log.%p"));
    }
    cmd
}

#[test]
fn seed_programs_open_and_close_every_simulated_device_under_the_shim() {
    let dir = TempDir::new("seed-sim");
    let names: Vec<&str> = DEVICES.split(',').collect();
    for example in ["list_devices", "open_close"] {
        let prog = cc(example, &[&c_example(example)], &["-libverbs"]);
        let logs = dir.join(example);
        std::fs::create_dir_all(&logs).unwrap();
        let mut plain = on_sim(&prog, false, &logs);
        let without = run(&mut plain);
        let mut cmd = on_sim(&prog, true, &logs);
        let with = run(&mut cmd);
        assert_same_output(
            &format!("{example} on the sim"),
            (&plain, &without),
            (&cmd, &with),
        );
        let out = stdout(&with);
        assert!(
            out.contains(&format!("{} RDMA device(s) found", names.len())),
            "{out}"
        );
        let log = read_logs(&logs);
        assert_eq!(
            log_lines_for(&log, "ibv_get_device_list").len(),
            1,
            "{}",
            show_log(&log)
        );
        assert_eq!(
            log_lines_for(&log, "ibv_free_device_list").len(),
            1,
            "{}",
            show_log(&log)
        );
        for name in &names {
            if example == "open_close" {
                assert!(
                    out.contains(&format!("The device '{name}' was opened")),
                    "{out}"
                );
                let opened = log_lines_for(&log, "ibv_open_device")
                    .into_iter()
                    .filter(|l| l.message.contains(name) && !l.message.contains("= NULL"))
                    .count();
                let closed = log_lines_for(&log, "ibv_close_device")
                    .into_iter()
                    .filter(|l| l.message.contains(name) && l.message.contains(") = 0"))
                    .count();
                assert_eq!((opened, closed), (1, 1), "{name}\n{}", show_log(&log));
            } else {
                assert!(out.contains(&format!("name={name}")), "{out}");
            }
        }
        // A clean program: no leak report.
        assert!(!stderr(&with).contains("leak"), "{}", describe(&cmd, &with));
    }
}
