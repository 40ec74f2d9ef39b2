//! ibv-sim's objects of issue 12, each created, used and destroyed by a C
//! program compiled against the real `/usr/include/infiniband/verbs.h`,
//! reaching them the way every program does: through the inline verbs,
//! which jump through the context's function tables. Each program checks
//! the objects' behaviour and the errno of each misuse, and prints
//! "checks passed".
//!
//! The real `ibv_xsrq_pingpong` (ibverbs-utils) runs between processes on
//! the sim's fabric: XRC domains, XRC SRQs, XRC send and receive QPs.
//!
//! Needs gcc, libibverbs-dev, ibverbs-utils and a built sim (`make test`).

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Compiles `tests/c/objects/NAME.c` (with `tests/c/sim/check.h`).
fn c_program(name: &str) -> PathBuf {
    let dir = repo_dir().join("tests/c/objects");
    let inc_sim = format!("-I{}", repo_dir().join("tests/c/sim").display());
    let inc_own = format!("-I{}", dir.display());
    let src = dir.join(format!("{name}.c"));
    cc(name, &[src.as_path()], &[&inc_sim, &inc_own, "-libverbs"])
}

/// A command running `prog` on the sim alone (its default two devices).
fn on_sim(prog: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(prog);
    c.env("LD_LIBRARY_PATH", sim_dir())
        .env_remove("IBV_SIM_DEVICES")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null());
    c
}

/// Runs the self-checking C program `name` on the sim.
fn run_c(name: &str) {
    let bin = c_program(name);
    let mut cmd = on_sim(&bin);
    let out = run(&mut cmd);
    assert!(
        out.status.success() && stdout(&out).contains("checks passed"),
        "{}",
        describe(&cmd, &out)
    );
}

/// Memory windows: alloc / dealloc, type 1 and type 2 binds (three APIs),
/// invalidation, and the responder's rkey checks.
#[test]
fn memory_windows() {
    run_c("obj_mw");
}

/// XRC domains (private and file-named), thread domains, parent domains
/// (used as PDs in the data path), device memory (copies and an MR on it
/// in the data path), each with the kernel's errno on misuse.
#[test]
fn domains_and_device_memory() {
    run_c("obj_domains");
}

/// Runs `ibv_xsrq_pingpong` as a server for `clients` and as that many
/// clients (each with `args`), on a fabric of its own; every process must
/// print "success" and exit 0.
fn xsrq_pingpong(clients: usize, args: &[&str]) {
    let fab = fabric_name("objects", "xsrq");
    let _g = FabricGuard(fab.clone());
    let dir = TempDir::new("xsrq");
    let port = free_port().to_string();
    let cmd = |name: &str| {
        let mut c = on_sim("ibv_xsrq_pingpong");
        c.env("IBV_SIM_FABRIC", &fab)
            .env("IBV_SIM_DEVICES", "mlx5_0")
            .args(["-p", &port])
            .args(args)
            .current_dir(dir.path());
        let out = std::fs::File::create(dir.join(name)).expect("output file");
        c.stdout(out.try_clone().expect("dup")).stderr(out);
        c
    };
    let n = clients.to_string();
    let server = cmd("server")
        .args(["-c", &n])
        .spawn()
        .expect("start server");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !listening(port.parse().unwrap()) {
        assert!(Instant::now() < deadline, "the server never listened");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut procs: Vec<(String, std::process::Child)> = (0..clients)
        .map(|i| {
            let name = format!("client{i}");
            let c = cmd(&name).arg("127.0.0.1").spawn().expect("start client");
            (name, c)
        })
        .collect();
    procs.push(("server".into(), server));
    let deadline = Instant::now() + Duration::from_secs(60);
    for (name, p) in &mut procs {
        let status = loop {
            if let Some(st) = p.try_wait().expect("wait") {
                break Some(st);
            }
            if Instant::now() > deadline {
                let _ = p.kill();
                let _ = p.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let text = std::fs::read_to_string(dir.join(&*name)).unwrap_or_default();
        assert!(
            status.is_some_and(|s| s.success()) && text.contains("success"),
            "ibv_xsrq_pingpong {name} {args:?}: {status:?}\n{text}"
        );
    }
}

/// The unmodified `ibv_xsrq_pingpong`: one client, polling.
#[test]
fn xsrq_pingpong_between_processes() {
    xsrq_pingpong(1, &[]);
}

/// Two clients sharing the server's XRC SRQ, more messages, CQ events.
#[test]
fn xsrq_pingpong_two_clients_with_events() {
    xsrq_pingpong(2, &["-n", "20", "-e"]);
}

/// Receive WQs (state machine, posting), RWQ indirection tables, flow
/// steering rules, flow actions and counters as control-path objects.
#[test]
fn wqs_flows_and_counters() {
    run_c("obj_control");
}
