//! ibv-sim as a fabric between processes: the unmodified ibverbs-utils
//! pingpong programs run as server and client processes on the sim and
//! exchange data through the shared-memory fabric; a peer that is gone
//! ends in error completions, never in a hang or a false success; fabrics
//! named apart do not see each other; a bad fabric segment is a clear error.
//!
//! Each test uses its own fabric (`IBV_SIM_FABRIC`) and TCP port, so the
//! tests run in parallel.

mod common;

use std::io::{Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{
    describe, fabric_name, free_port, listening, run_unchecked, segment_path, sim_dir, FabricGuard,
};

/// A fabric name unique to this test run and call.
fn fabric(tag: &str) -> String {
    fabric_name("test", tag)
}

fn sim_command(prog: &str, fabric: &str, devices: &str) -> Command {
    let mut c = Command::new(prog);
    c.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", fabric)
        .env("IBV_SIM_DEVICES", devices)
        .stdin(Stdio::null());
    c
}

/// A started server whose output is collected.
struct Server {
    child: Child,
    out: std::thread::JoinHandle<Vec<u8>>,
    err: std::thread::JoinHandle<Vec<u8>>,
    what: String,
}

fn start(mut cmd: Command) -> Server {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let mut o = child.stdout.take().unwrap();
    let mut e = child.stderr.take().unwrap();
    Server {
        child,
        out: std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = o.read_to_end(&mut v);
            v
        }),
        err: std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = e.read_to_end(&mut v);
            v
        }),
        what,
    }
}

impl Server {
    fn wait_listening(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !listening(port) {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("{} exited ({st}) before listening", self.what);
            }
            assert!(Instant::now() < deadline, "{} never listened", self.what);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the server to end (kills it after `timeout`: `None`).
    fn finish(mut self, timeout: Duration) -> (Option<Output>, String) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                break Some(st);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let stdout = self.out.join().unwrap();
        let stderr = self.err.join().unwrap();
        let text = format!(
            "{}\n--- stdout\n{}--- stderr\n{}",
            self.what,
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
        (
            status.map(|status| Output {
                status,
                stdout,
                stderr,
            }),
            text,
        )
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// The QP numbers a pingpong printed as its own ("local address").
fn local_qpns(o: &Output) -> Vec<String> {
    text(o)
        .lines()
        .filter(|l| l.contains("local address"))
        .filter_map(|l| l.split("QPN ").nth(1))
        .map(|q| q.split([',', ':']).next().unwrap_or("").to_string())
        .collect()
}

/// Runs `prog` as server and client on the sim (`-c`: buffer validation)
/// and checks that both exit 0 having exchanged `iters` messages.
fn pingpong(
    prog: &str,
    devices: &str,
    extra: &[&str],
    launcher: Option<&[&str]>,
) -> (Output, Output) {
    let fab = fabric(prog);
    let _g = FabricGuard(fab.clone());
    let port = free_port().to_string();
    let dev = devices.split(',').next().unwrap();
    let mut args: Vec<&str> = vec!["-d", dev, "-c", "-n", "200", "-p", &port];
    args.extend_from_slice(extra);
    let mk = |client: bool| {
        let mut c = match launcher {
            Some(l) => {
                let mut c = sim_command(
                    common::target_dir().join("ibv-shim").to_str().unwrap(),
                    &fab,
                    devices,
                );
                c.args(l).arg("--").arg(prog);
                c
            }
            None => sim_command(prog, &fab, devices),
        };
        c.args(&args);
        if client {
            c.arg("127.0.0.1");
        }
        c
    };
    let mut server = start(mk(false));
    server.wait_listening(port.parse().unwrap());
    let mut client_cmd = mk(true);
    let client = run_unchecked(&mut client_cmd, Duration::from_secs(120));
    let (server_out, server_text) = server.finish(Duration::from_secs(60));
    let server_out = server_out.unwrap_or_else(|| panic!("server hung:\n{server_text}"));
    assert!(
        client.status.success() && server_out.status.success(),
        "client:\n{}\nserver:\n{server_text}",
        describe(&client_cmd, &client)
    );
    for (who, o) in [("client", &client), ("server", &server_out)] {
        assert!(
            text(o).contains("200 iters in"),
            "{who} did not finish its iterations:\n{}",
            text(o)
        );
    }
    // The last process out removed the fabric's file.
    assert!(
        !segment_path(&fab).exists(),
        "{} left behind",
        segment_path(&fab).display()
    );
    // QP numbers are unique across the fabric: the two processes' differ.
    let (a, b) = (local_qpns(&client), local_qpns(&server_out));
    assert!(
        !a.is_empty() && !b.is_empty(),
        "{}\n{}",
        text(&client),
        text(&server_out)
    );
    assert!(
        a.iter().all(|q| !b.contains(q)),
        "shared QP numbers: {a:?} {b:?}"
    );
    (server_out, client)
}

#[test]
fn rc_pingpong_between_processes() {
    pingpong("ibv_rc_pingpong", "mlx5_0", &[], None);
}

#[test]
fn rc_pingpong_large_messages_and_events() {
    // 100000-byte messages travel in fragments; -e waits on the completion
    // channel, so the background progress thread is what answers.
    pingpong("ibv_rc_pingpong", "mlx5_0", &["-s", "100000", "-e"], None);
}

#[test]
fn rc_pingpong_on_roce_with_gid_index() {
    for g in ["0", "1"] {
        pingpong("ibv_rc_pingpong", "rxe0", &["-g", g], None);
    }
}

#[test]
fn uc_pingpong_between_processes() {
    pingpong("ibv_uc_pingpong", "mlx5_0", &[], None);
}

#[test]
fn ud_pingpong_between_processes() {
    pingpong("ibv_ud_pingpong", "mlx5_0", &["-s", "2048"], None);
}

#[test]
fn srq_pingpong_between_processes() {
    pingpong("ibv_srq_pingpong", "mlx5_0", &[], None);
}

#[test]
fn shim_on_both_ends_reports_each_process() {
    let (s, c) = pingpong(
        "ibv_rc_pingpong",
        "mlx5_0",
        &[],
        Some(&["--sim", "--fail-on-leak"]),
    );
    for o in [&s, &c] {
        assert!(
            text(o).contains("ibv-shim: no RDMA resources leaked"),
            "{}",
            text(o)
        );
    }
}

/// A python stand-in for the pingpong server's address exchange:
/// `mode` "proxy" starts the real server (as its own child), relays the
/// exchange, and SIGKILLs (and reaps) the server just before handing its
/// address to the client; "bogus" answers with a QP number nobody has.
const EXCHANGE: &str = r#"
import os, signal, socket, subprocess, sys, time
mode, port, server_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def recv(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            break
        b += c
    return b
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(1)
if mode == "proxy":
    srv = subprocess.Popen(sys.argv[4:])
    for _ in range(3000):
        try:
            s = socket.create_connection(("127.0.0.1", server_port))
            break
        except OSError:
            time.sleep(0.01)
print("ready", flush=True)
c, _ = ls.accept()
mine = recv(c, 52)
if mode == "proxy":
    s.sendall(mine)
    theirs = recv(s, 52)
    srv.kill()
    srv.wait()
else:
    lid, qpn, psn, gid = mine.rstrip(b"\0").decode().split(":")
    qpn = (int(qpn, 16) + 0x1234) & 0xffffff
    theirs = ("%s:%06x:%s:%s" % (lid, qpn, psn, gid)).encode() + b"\0"
c.sendall(theirs)
recv(c, 5)
print("exchanged", flush=True)
"#;

/// The client of a peer that is gone (or never was) gets error
/// completions (transport retry counter exceeded) within a bounded time,
/// never a hang or a false success.
fn client_of_a_gone_peer(mode: &str) -> String {
    let fab = fabric(mode);
    let _g = FabricGuard(fab.clone());
    let port = free_port();
    let server_port = free_port();
    let p = port.to_string();
    let sp = server_port.to_string();
    let mut ex = sim_command("python3", &fab, "mlx5_0");
    ex.args(["-c", EXCHANGE, mode, &p, &sp]);
    if mode == "proxy" {
        ex.args(["ibv_rc_pingpong", "-d", "mlx5_0", "-c", "-p", &sp]);
    }
    let mut ex = start(ex);
    ex.wait_listening(port);
    let mut client = sim_command("ibv_rc_pingpong", &fab, "mlx5_0");
    client.args(["-d", "mlx5_0", "-c", "-n", "5", "-p", &p, "127.0.0.1"]);
    let t0 = Instant::now();
    let o = run_unchecked(&mut client, Duration::from_secs(60));
    let took = t0.elapsed();
    let (_, ex_text) = ex.finish(Duration::from_secs(10));
    let out = text(&o);
    assert!(
        !o.status.success(),
        "a false success:\n{}\n{ex_text}",
        describe(&client, &o)
    );
    assert!(
        out.contains("transport retry counter exceeded"),
        "{}\n{ex_text}",
        describe(&client, &o)
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // The dead process left nothing that breaks the next run in this fabric.
    let port = free_port().to_string();
    let args = ["-d", "mlx5_0", "-c", "-n", "20", "-p", &port];
    let mut server = start({
        let mut c = sim_command("ibv_rc_pingpong", &fab, "mlx5_0");
        c.args(args);
        c
    });
    server.wait_listening(port.parse().unwrap());
    let mut c = sim_command("ibv_rc_pingpong", &fab, "mlx5_0");
    c.args(args).arg("127.0.0.1");
    let o = run_unchecked(&mut c, Duration::from_secs(60));
    let (s, st) = server.finish(Duration::from_secs(30));
    assert!(
        o.status.success() && s.is_some_and(|s| s.status.success()),
        "{}\n{st}",
        describe(&c, &o)
    );
    // The dead server's slot was reclaimed and the last one out removed the file.
    assert!(!segment_path(&fab).exists());
    out
}

#[test]
fn client_whose_server_was_killed_gets_retry_exceeded() {
    client_of_a_gone_peer("proxy");
}

#[test]
fn client_given_a_qp_number_nobody_has_gets_retry_exceeded() {
    client_of_a_gone_peer("bogus");
}

#[test]
fn two_fabrics_in_parallel_do_not_see_each_other() {
    let (a, b) = (fabric("a"), fabric("b"));
    let _ga = FabricGuard(a.clone());
    let _gb = FabricGuard(b.clone());
    // Two pairs at once, one per fabric: both work.
    let ports = [free_port().to_string(), free_port().to_string()];
    let mut servers = Vec::new();
    for (f, p) in [(&a, &ports[0]), (&b, &ports[1])] {
        let mut c = sim_command("ibv_rc_pingpong", f, "mlx5_0");
        c.args(["-d", "mlx5_0", "-c", "-n", "100", "-p", p]);
        let mut s = start(c);
        s.wait_listening(p.parse().unwrap());
        servers.push(s);
    }
    let clients: Vec<_> = [(&a, &ports[0]), (&b, &ports[1])]
        .into_iter()
        .map(|(f, p)| {
            let mut c = sim_command("ibv_rc_pingpong", f, "mlx5_0");
            c.args(["-d", "mlx5_0", "-c", "-n", "100", "-p", p, "127.0.0.1"]);
            std::thread::spawn(move || {
                let o = run_unchecked(&mut c, Duration::from_secs(120));
                (describe(&c, &o), o.status.success())
            })
        })
        .collect();
    for c in clients {
        let (d, ok) = c.join().unwrap();
        assert!(ok, "{d}");
    }
    for s in servers {
        let (o, t) = s.finish(Duration::from_secs(30));
        assert!(o.is_some_and(|o| o.status.success()), "{t}");
    }
    // A server in fabric a, its client in fabric b: the client's messages
    // reach nobody.
    let p = free_port().to_string();
    let mut c = sim_command("ibv_rc_pingpong", &a, "mlx5_0");
    c.args(["-d", "mlx5_0", "-c", "-n", "5", "-p", &p]);
    let mut server = start(c);
    server.wait_listening(p.parse().unwrap());
    let mut client = sim_command("ibv_rc_pingpong", &b, "mlx5_0");
    client.args(["-d", "mlx5_0", "-c", "-n", "5", "-p", &p, "127.0.0.1"]);
    let o = run_unchecked(&mut client, Duration::from_secs(60));
    let (_, st) = server.finish(Duration::from_secs(2));
    assert!(
        !o.status.success() && text(&o).contains("transport retry counter exceeded"),
        "{}\n{st}",
        describe(&client, &o)
    );
}

/// Writes `bytes` as the fabric's segment, then opens a device on it.
fn open_on_segment(bytes: &[u8]) -> Output {
    let fab = fabric("bad");
    let _g = FabricGuard(fab.clone());
    let path = segment_path(&fab);
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        f.write_all(bytes).unwrap();
    }
    let mut c = sim_command("ibv_devinfo", &fab, "mlx5_0");
    run_unchecked(&mut c, Duration::from_secs(60))
}

#[test]
fn corrupted_fabric_segment_is_a_clear_error() {
    let o = open_on_segment(&[0x5a; 8192]);
    let t = text(&o);
    assert!(t.contains("corrupted"), "{t}");
    assert!(!t.contains("PORT_ACTIVE"), "{t}");
}

#[test]
fn fabric_segment_of_another_version_is_a_clear_error() {
    let mut h = vec![0u8; 8192];
    h[0..8].copy_from_slice(b"IBVSIMFB");
    h[8..12].copy_from_slice(&999u32.to_le_bytes());
    let o = open_on_segment(&h);
    let t = text(&o);
    assert!(t.contains("another ibv-sim version"), "{t}");
    assert!(!t.contains("PORT_ACTIVE"), "{t}");
}

#[test]
fn invalid_fabric_name_is_a_clear_error() {
    let mut c = sim_command("ibv_devinfo", "../x", "mlx5_0");
    let o = run_unchecked(&mut c, Duration::from_secs(60));
    assert!(text(&o).contains("invalid IBV_SIM_FABRIC"), "{}", text(&o));
}

/// RDMA WRITE (with imm), READ, atomics and a fragmented SEND between two
/// processes, with the responder's remote checks and error statuses, and a
/// passive responder served by its progress thread (`tests/c/sim/sim_fabric_rdma.c`).
#[test]
fn rdma_and_atomics_between_processes_with_remote_checks() {
    let src = common::repo_dir().join("tests/c/sim/sim_fabric_rdma.c");
    let bin = common::cc("sim_fabric_rdma", &[&src], &["-O1", "-libverbs"]);
    let fab = fabric("rdma");
    let _g = FabricGuard(fab.clone());
    let mut c = sim_command(bin.to_str().unwrap(), &fab, "mlx5_0");
    let o = run_unchecked(&mut c, Duration::from_secs(120));
    let t = text(&o);
    assert!(o.status.success(), "{}", describe(&c, &o));
    assert!(
        t.contains("responder: ") && t.contains("sim_fabric_rdma: "),
        "{t}"
    );
}

/// RC WRITEs waiting for room in a stopped peer's ring wait in place (the
/// program's buffer, not a copy); a QP reset, a flush to ERR, an error
/// completion (the QP goes to ERR with the others flushed) and destroying
/// the QP give the buffer back to the program, and a program may
/// deregister or re-register it early: then it scribbles on and unmaps it.
/// The sim copied what was still waiting first, so the requester does not
/// crash and the responder gets exactly the posted bytes
/// (`tests/c/sim/sim_fabric_outbox.c`, once each way; every way is run and
/// the failures are reported together). The same set-up checks the order
/// of completions (`bind`): a memory window bound behind the waiting
/// WRITEs completes after them.
#[test]
fn writes_waiting_for_a_stopped_peer_survive_the_buffer_going_back() {
    let src = common::repo_dir().join("tests/c/sim/sim_fabric_outbox.c");
    let bin = common::cc("sim_fabric_outbox", &[&src], &["-O1", "-libverbs"]);
    let mut failed = Vec::new();
    for how in [
        "reset", "flush", "error", "atomic", "destroy", "dereg", "rereg", "bind",
    ] {
        let fab = fabric(&format!("outbox-{how}"));
        let _g = FabricGuard(fab.clone());
        let mut c = sim_command(bin.to_str().unwrap(), &fab, "mlx5_0");
        c.arg(how);
        let o = run_unchecked(&mut c, Duration::from_secs(120));
        let t = text(&o);
        if !o.status.success() || !t.contains("responder: ") || !t.contains("sim_fabric_outbox: ") {
            failed.push(format!("{how}: {}", describe(&c, &o)));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A responder that takes its memory back (deregisters the MR, or
/// destroys the QP and then deregisters) while another process keeps
/// WRITEs, SENDs or READs in flight to it finds nothing touched after the
/// call returned: it zeroes and unmaps the buffer and neither sees a byte
/// land nor dies of SIGSEGV (`tests/c/sim/sim_fabric_teardown.c`, 24
/// rounds each way at different moments of the traffic).
#[test]
fn memory_taken_back_under_arriving_requests_is_never_touched_again() {
    let src = common::repo_dir().join("tests/c/sim/sim_fabric_teardown.c");
    let bin = common::cc("sim_fabric_teardown", &[&src], &["-O1", "-libverbs"]);
    let mut failed = Vec::new();
    for how in ["write", "recv", "read"] {
        let fab = fabric(&format!("teardown-{how}"));
        let _g = FabricGuard(fab.clone());
        let mut c = sim_command(bin.to_str().unwrap(), &fab, "mlx5_0");
        c.arg(how);
        let o = run_unchecked(&mut c, Duration::from_secs(180));
        let t = text(&o);
        if !o.status.success() || !t.contains("responder: ") || !t.contains("sim_fabric_teardown: ")
        {
            failed.push(format!("{how}: {}", describe(&c, &o)));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// qperf (server and client processes) measures real traffic on the sim:
/// every figure is non-zero (on the one-process sim it reported 0 bytes/s).
#[test]
fn qperf_measures_traffic_between_processes() {
    let fab = fabric("qperf");
    let _g = FabricGuard(fab.clone());
    let port = free_port();
    let p = port.to_string();
    let mut server = start({
        let mut c = sim_command("qperf", &fab, "mlx5_0");
        c.args(["-lp", &p]);
        c
    });
    server.wait_listening(port);
    let mut c = sim_command("qperf", &fab, "mlx5_0");
    c.args(["-lp", &p, "-t", "1", "127.0.0.1"]);
    let tests = [
        "rc_bw",
        "rc_rdma_write_bw",
        "rc_rdma_read_bw",
        "rc_lat",
        "uc_bw",
        "ud_bw",
        "rc_compare_swap_mr",
    ];
    c.args(tests);
    let o = run_unchecked(&mut c, Duration::from_secs(120));
    let _ = server.finish(Duration::from_millis(100));
    let t = text(&o);
    assert!(o.status.success(), "{}", describe(&c, &o));
    let figures: Vec<f64> = t
        .lines()
        .filter_map(|l| l.split('=').nth(1))
        .filter_map(|v| v.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(figures.len() >= tests.len(), "{t}");
    assert!(figures.iter().all(|&f| f > 0.0), "{t}");
}

/// The LID a pingpong printed as its own.
fn local_lid(o: &Output) -> String {
    text(o)
        .lines()
        .find(|l| l.contains("local address"))
        .and_then(|l| l.split("LID ").nth(1))
        .map(|l| l.split(',').next().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// Two processes on different simulated HCAs (mlx4_0 and mlx5_0, whose
/// ports both ask for LID 1) get distinct fabric-wide LIDs, and the
/// addresses they exchange reach each other.
#[test]
fn lids_are_fabric_wide_across_different_devices() {
    let fab = fabric("lids");
    let _g = FabricGuard(fab.clone());
    let port = free_port().to_string();
    let mut s = sim_command("ibv_rc_pingpong", &fab, "mlx4_0");
    s.args(["-d", "mlx4_0", "-c", "-n", "50", "-p", &port]);
    let mut server = start(s);
    server.wait_listening(port.parse().unwrap());
    let mut c = sim_command("ibv_rc_pingpong", &fab, "mlx5_0");
    c.args(["-d", "mlx5_0", "-c", "-n", "50", "-p", &port, "127.0.0.1"]);
    let o = run_unchecked(&mut c, Duration::from_secs(120));
    let (so, st) = server.finish(Duration::from_secs(60));
    let so = so.unwrap_or_else(|| panic!("server hung:\n{st}"));
    assert!(
        o.status.success() && so.status.success(),
        "{}\n{st}",
        describe(&c, &o)
    );
    let (a, b) = (local_lid(&o), local_lid(&so));
    assert!(
        !a.is_empty() && a != "0x0000" && a != b,
        "LIDs {a} and {b}\n{st}"
    );
}
