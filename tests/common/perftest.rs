//! perftest's server and client as two processes on the sim, both under
//! the shim with the data-path checks and a debug log (tests of the
//! checks that real programs must pass clean).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{fabric_name, free_port, listening, preload_shim, run_unchecked, sim_dir};
use super::{FabricGuard, TempDir};

/// One side of a perftest run.
pub struct Side {
    pub out: std::process::Output,
    pub log: String,
    pub json: Option<Value>,
}

/// Runs perftest's `prog` as server and client on the sim (a fabric named
/// after `tag`), both under the shim with `IBV_SHIM_CHECK=datapath` and a
/// debug log (for the lines saying what was wrapped); (server, client).
pub fn perftest_checked(tag: &str, prog: &str, args: &[&str]) -> (Side, Side) {
    let dir = TempDir::new(&format!("{tag}-perftest"));
    let fab = fabric_name(tag, prog);
    let _g = FabricGuard(fab.clone());
    let port = free_port().to_string();
    let mk = |who: &str| {
        let mut c = Command::new(prog);
        for var in [
            "IBV_SHIM_LIBRARY",
            "IBV_SHIM_LEAK_EXITCODE",
            "IBV_SHIM_TRACE",
        ] {
            c.env_remove(var);
        }
        c.env("LD_LIBRARY_PATH", sim_dir())
            .env("IBV_SIM_FABRIC", &fab)
            .env("IBV_SIM_DEVICES", "mlx5_0");
        preload_shim(&mut c)
            .env("IBV_SHIM_CHECK", "datapath")
            .env("IBV_SHIM_LOG", "debug")
            .env("IBV_SHIM_LOG_FILE", dir.join(format!("{who}.log")))
            .env("IBV_SHIM_REPORT", dir.join(format!("{who}.json")))
            .args(["-d", "mlx5_0", "-p", &port])
            .args(args);
        c
    };
    let mut server = mk("server");
    let server = std::thread::spawn(move || run_unchecked(&mut server, Duration::from_secs(120)));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !listening(port.parse().unwrap()) && !server.is_finished() {
        assert!(
            Instant::now() < deadline,
            "{prog}: the server never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut client = mk("client");
    client.arg("127.0.0.1");
    let c = run_unchecked(&mut client, Duration::from_secs(120));
    let s = server.join().expect("server thread");
    let side = |who: &str, out| {
        let log = std::fs::read_to_string(dir.join(format!("{who}.log"))).unwrap_or_default();
        let json = std::fs::read_to_string(dir.join(format!("{who}.json")))
            .ok()
            .map(|t| serde_json::from_str(&t).unwrap_or_else(|e| panic!("bad JSON {e}: {t}")));
        Side { out, log, json }
    };
    (side("server", s), side("client", c))
}
