//! UCX over the rdmacm connection manager: `tests/c/cm/ucx_sockaddr.c`
//! (UCP's client-server mode: `ucp_listener_create` on a socket address,
//! `ucp_ep_create` with `UCP_EP_PARAM_FIELD_SOCK_ADDR`) moves a tagged
//! message each way, checked byte for byte, between two processes: on the
//! sim, with UCX told to use rdmacm as its only sockaddr connection manager
//! (`UCX_SOCKADDR_TLS_PRIORITY=rdmacm`, UCX 1.13's name for it), and on
//! real rxe in the VM, without and under the preloaded shim (whose leak
//! reports of both ends must find nothing). Each endpoint's configuration
//! (`ucp_ep_print_info`) names the lane it was connected through:
//! `cm rdmacm`.
//!
//! Needs `libucx-dev` (`scripts/deps.sh`) and, for the sim, root (UCX lists
//! a verbs device only if `/dev/infiniband/uverbsN` is a character device:
//! [`DevNamespace`]).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

fn program() -> PathBuf {
    assert!(
        std::path::Path::new("/usr/include/ucp/api/ucp.h").exists(),
        "missing /usr/include/ucp/api/ucp.h: install libucx-dev (scripts/deps.sh)"
    );
    cc(
        "cm_ucx_sockaddr",
        &[&repo_dir().join("tests/c/cm/ucx_sockaddr.c")],
        &["-lucp", "-lucs"],
    )
}

/// UCX's settings for both ends: rdmacm as the only sockaddr connection
/// manager, RC and UD verbs on `dev` for the data.
fn ucx_env(dev: &str) -> [(&'static str, String); 3] {
    [
        ("UCX_SOCKADDR_TLS_PRIORITY", "rdmacm".into()),
        ("UCX_TLS", "rc_verbs,ud_verbs".into()),
        ("UCX_NET_DEVICES", format!("{dev}:1")),
    ]
}

/// What both ends must say: the message arrived intact, the endpoint's
/// first lane is the rdmacm connection manager, and the program ended well.
fn check(role: &str, status: Option<i32>, text: &str, all: &str) {
    let intact = if role == "server" {
        "server: request received intact\n"
    } else {
        "client: reply received intact\n"
    };
    assert!(
        status == Some(0)
            && text.contains(intact)
            && text.contains("lane[0]: cm rdmacm\n")
            && text.contains("rc_verbs/")
            && text.ends_with("ok\n"),
        "{role} exit {status:?}\n{all}"
    );
}

/// On the sim (mlx5_0, InfiniBand; rxe0, RoCE).
#[test]
fn ucx_sockaddr_over_rdmacm_on_the_sim() {
    let prog = program();
    for dev in ["mlx5_0", "rxe0"] {
        let fabric = fabric_name("cmucx", dev);
        let ns = DevNamespace::new(UverbsNode::CharDevice, 2);
        let port = free_port().to_string();
        let cmd = |role: &str| {
            let mut c = ns.command(&prog);
            c.args([role, "127.0.0.1", &port])
                .env("LD_LIBRARY_PATH", sim_dir())
                .env("IBV_SIM_FABRIC", &fabric)
                .env("IBV_SIM_DEVICES", dev)
                .env_remove("LD_PRELOAD")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (k, v) in ucx_env(dev) {
                c.env(k, v);
            }
            c
        };
        let mut server = cmd("server").spawn().expect("start the server");
        let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
        let mut sout = String::new();
        for l in lines.by_ref() {
            let l = l.unwrap_or_default();
            sout += &format!("{l}\n");
            if l == "listening" {
                break;
            }
        }
        let client = cmd("client").output().expect("start the client");
        let rest = std::thread::spawn(move || {
            lines
                .map_while(Result::ok)
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Ok(Some(s)) = server.try_wait() {
                break s.code();
            }
            if Instant::now() > deadline {
                let _ = server.kill();
                let _ = server.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        sout += &rest.join().unwrap();
        let mut serr = String::new();
        let _ = server.stderr.take().unwrap().read_to_string(&mut serr);
        let cout = String::from_utf8_lossy(&client.stdout).into_owned();
        let all = format!(
            "{dev}: client:\n{cout}{}\nserver:\n{sout}{serr}",
            String::from_utf8_lossy(&client.stderr)
        );
        check("client", client.status.code(), &cout, &all);
        check("server", status, &sout, &all);
        let _ = std::fs::remove_file(segment_path(&fabric));
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let _ = std::fs::remove_dir_all(format!("/dev/shm/ibv-sim-cm-{uid}-{fabric}"));
    }
}

/// On real rxe in the VM, through the kernel's rdma_cm: the same program,
/// the same settings, the same result.
#[test]
fn ucx_sockaddr_over_rdmacm_on_the_real_kernel() {
    let Some(vm) = kernel_vm() else { return };
    on_the_kernel(vm, false);
}

/// The same pair under the preloaded shim in the VM: the same results, and
/// each end's leak report (verbs and connection manager) finds no leak.
#[test]
fn ucx_sockaddr_over_rdmacm_on_the_real_kernel_under_the_shim() {
    let Some(vm) = kernel_vm() else { return };
    let reports = on_the_kernel(vm, true);
    assert_eq!(reports.len(), 2, "one report per end: {reports:?}");
    for (path, text) in &reports {
        let doc: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(doc["leaked"], false, "{}: {text}", path.display());
        assert!(
            doc["connection_manager"].is_object(),
            "{}: the shim saw no rdma_* call: {text}",
            path.display()
        );
    }
}

/// Runs the client/server pair on rxe in the VM (preloaded with the shim
/// when `shim`), checks both ends; returns the shim's reports.
fn on_the_kernel(vm: &Vm, shim: bool) -> Vec<(PathBuf, String)> {
    let prog = program();
    let tmp = TempDir::new(if shim { "cm-ucx-shim" } else { "cm-ucx" });
    let slog = tmp.join("server.out");
    let script = format!(
        "{p} server {ip} {port} > {s} 2>&1 & \
         i=0; while ! grep -q listening {s} && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; \
         {p} client {ip} {port}; echo \"client exit $?\"; wait $!; echo \"server exit $?\" >> {s}",
        // Its own port: the two tests share the VM and may run at once.
        port = if shim { 13341 } else { 13340 },
        p = prog.display(),
        ip = GUEST_IP,
        s = slog.display()
    );
    let mut job = Job::new(["sh", "-c", &script]).timeout(Duration::from_secs(300));
    for (k, v) in ucx_env("rxe0") {
        job = job.env(k, v);
    }
    if shim {
        job = job
            .env("LD_PRELOAD", shim_so().display().to_string())
            .env("IBV_SHIM_LOG", "warn")
            .env(
                "IBV_SHIM_REPORT",
                tmp.join("report.%p.json").display().to_string(),
            );
    }
    let out = vm.run(&job).expect("run in the VM");
    let cout = String::from_utf8_lossy(&out.stdout).into_owned();
    let sout = std::fs::read_to_string(&slog).unwrap_or_default();
    let all = format!(
        "client:\n{cout}{}\nserver:\n{sout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ccode = cout
        .lines()
        .find_map(|l| l.strip_prefix("client exit "))
        .and_then(|c| c.parse().ok());
    let scode = sout
        .lines()
        .find_map(|l| l.strip_prefix("server exit "))
        .and_then(|c| c.parse().ok());
    let strip = |t: &str, tag: &str| {
        t.lines()
            .filter(|l| !l.starts_with(tag))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    check("client", ccode, &strip(&cout, "client exit"), &all);
    check("server", scode, &strip(&sout, "server exit"), &all);
    let mut reports: Vec<(PathBuf, String)> = std::fs::read_dir(tmp.path())
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with(".json"))
                .map(|p| {
                    let t = std::fs::read_to_string(&p).unwrap_or_default();
                    (p, t)
                })
                .collect()
        })
        .unwrap_or_default();
    reports.sort();
    reports
}
