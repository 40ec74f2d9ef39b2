//! The sim's librdmacm (`target/sim/librdmacm.so.1`, `crates/ibv-sim-cm`):
//! its ABI against the real rdma-core 44 library and headers, and each of
//! the connection manager's event paths as two processes on the sim see
//! them (`tests/c/cm/paths.c`, compiled against the real
//! `/usr/include/rdma` headers and linked to `-lrdmacm`, run with the sim
//! first on `LD_LIBRARY_PATH`).
//!
//! Each test uses its own fabric, so they run in parallel.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

const REAL_LIBRDMACM: &str = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";

fn sim_cm() -> PathBuf {
    sim_dir().join("librdmacm.so.1")
}

// ---------------------------------------------------------------------------
// ABI

#[test]
fn exports_every_symbol_of_the_real_librdmacm_at_its_version() {
    let set = |lib: &Path| -> BTreeSet<(String, String, bool)> {
        dynamic_symbols(lib)
            .into_iter()
            .filter(|s| !s.undefined && s.version.starts_with("RDMACM_") && s.name != s.version)
            .map(|s| (s.name, s.version, s.default))
            .collect()
    };
    let real = set(Path::new(REAL_LIBRDMACM));
    let ours = set(&sim_cm());
    assert!(
        real.len() >= 60,
        "the real librdmacm lists {} symbols",
        real.len()
    );
    let missing: Vec<_> = real.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&real).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}\nextra {extra:?}"
    );
    // Nothing of ours is exported unversioned beside them.
    let stray: Vec<String> = dynamic_symbols(&sim_cm())
        .into_iter()
        .filter(|s| {
            !s.undefined
                && (s.name.starts_with("rdma_") || s.name.starts_with('r'))
                && s.version == "Base"
        })
        .map(|s| s.line)
        .collect();
    assert!(stray.is_empty(), "unversioned exports: {stray:?}");
}

#[test]
fn soname_and_libibverbs_dependency() {
    let mut cmd = Command::new("readelf");
    cmd.arg("-d").arg(sim_cm());
    let out = run(&mut cmd);
    let text = stdout(&out);
    assert!(text.contains("Library soname: [librdmacm.so.1]"), "{text}");
    assert!(text.contains("Shared library: [libibverbs.so.1]"), "{text}");
    // Verbs only through the public API: every ibv_ symbol it needs is
    // one the real libibverbs exports.
    let verbs: BTreeSet<String> = dynamic_symbols(&real_libibverbs())
        .into_iter()
        .filter(|s| !s.undefined)
        .map(|s| s.name)
        .collect();
    let needed: Vec<String> = dynamic_symbols(&sim_cm())
        .into_iter()
        .filter(|s| s.undefined && s.name.starts_with("ibv_"))
        .map(|s| s.name)
        .collect();
    assert!(!needed.is_empty());
    for n in &needed {
        assert!(verbs.contains(n), "{n} is not public verbs API");
    }
}

/// The mirror's sizes and offsets (`rdmacm_abi::LAYOUT`) as
/// `_Static_assert`s in a C file that includes only the real headers.
#[test]
fn abi_layout_matches_real_rdma_cma_h() {
    let tmp = TempDir::new("cm-layout");
    let mut c = String::from(
        "#include <stddef.h>\n#include </usr/include/rdma/rdma_cma.h>\n#include </usr/include/infiniband/sa.h>\n",
    );
    let mut n = 0;
    for (name, size, align, members) in rdmacm_abi::LAYOUT {
        c += &format!(
            "_Static_assert(sizeof(struct {name}) == {size}, \"sizeof {name}\");\n_Static_assert(_Alignof(struct {name}) == {align}, \"align {name}\");\n"
        );
        for (m, off) in *members {
            c += &format!(
                "_Static_assert(offsetof(struct {name}, {m}) == {off}, \"{name}.{m}\");\n"
            );
            n += 1;
        }
    }
    for (name, value) in [
        ("RDMA_PS_TCP", rdmacm_abi::RDMA_PS_TCP as u64),
        ("RDMA_PS_UDP", rdmacm_abi::RDMA_PS_UDP as u64),
        ("RDMA_PS_IB", rdmacm_abi::RDMA_PS_IB as u64),
        ("RDMA_PS_IPOIB", rdmacm_abi::RDMA_PS_IPOIB as u64),
        (
            "RDMA_CM_EVENT_TIMEWAIT_EXIT",
            rdmacm_abi::RDMA_CM_EVENT_TIMEWAIT_EXIT as u64,
        ),
        (
            "RDMA_CM_EVENT_ESTABLISHED",
            rdmacm_abi::RDMA_CM_EVENT_ESTABLISHED as u64,
        ),
        ("RDMA_UDP_QKEY", rdmacm_abi::RDMA_UDP_QKEY as u64),
        ("RDMA_IB_IP_PS_TCP", rdmacm_abi::RDMA_IB_IP_PS_TCP),
        ("RAI_FAMILY", rdmacm_abi::RAI_FAMILY as u64),
        (
            "RDMA_OPTION_ID_ACK_TIMEOUT",
            rdmacm_abi::RDMA_OPTION_ID_ACK_TIMEOUT as u64,
        ),
        (
            "RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER",
            rdmacm_abi::RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER as u64,
        ),
    ] {
        c += &format!("_Static_assert((unsigned long long){name} == {value}ULL, \"{name}\");\n");
    }
    for (i, name) in rdmacm_abi::EVENT_NAMES.iter().enumerate() {
        c += &format!(
            "_Static_assert({} == {i}, \"event {i}\");\n",
            name.to_str().unwrap()
        );
    }
    c += "int main(void) { return 0; }\n";
    assert!(n > 80, "only {n} members checked");
    cc_text(&tmp, "cm_layout", &c, &[]);
}

// ---------------------------------------------------------------------------
// Event paths, two processes

fn paths_program() -> PathBuf {
    cc(
        "cm_paths",
        &[&repo_dir().join("tests/c/cm/paths.c")],
        &["-lrdmacm", "-libverbs", "-lpthread"],
    )
}

/// One process of a scenario on the sim.
fn command(prog: &Path, fabric: &str, args: &[&str]) -> Command {
    let mut c = Command::new(prog);
    c.args(args)
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", fabric)
        .env("IBV_SIM_DEVICES", "rxe0")
        .env("IBV_SIM_CM_TIMEOUT_MS", "500")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null());
    c
}

/// Removes the fabric's segment and its rendezvous directory.
struct Fabric(String);

impl Fabric {
    fn new(tag: &str) -> Fabric {
        Fabric(fabric_name("cm", tag))
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(segment_path(&self.0));
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let _ = std::fs::remove_dir_all(format!("/dev/shm/ibv-sim-cm-{uid}-{}", self.0));
    }
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = std::time::Instant::now();
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `scenario`: the server until it says "listening" (unless
/// `no_server`), then the client; returns (client, server) outputs, each
/// with its exit status appended as "exit N".
fn scenario(name: &str, no_server: bool) -> (String, String) {
    let prog = paths_program();
    let fabric = Fabric::new(name);
    let port = free_port().to_string();
    let mut server_out = String::new();
    let mut server = None;
    if !no_server {
        let mut s = command(&prog, &fabric.0, &["server", name, &port])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the server");
        let mut r = BufReader::new(s.stdout.take().unwrap());
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 && !line.ends_with("listening\n") {}
        server_out.push_str(&line);
        let rest = std::thread::spawn(move || {
            let mut v = String::new();
            let _ = r.read_to_string(&mut v);
            v
        });
        server = Some((s, rest));
    }
    let mut c = command(&prog, &fabric.0, &["client", name, &port])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the client");
    let mut out = c.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = String::new();
        let _ = out.read_to_string(&mut v);
        v
    });
    let status = wait_timeout(&mut c, Duration::from_secs(30));
    let mut client_out = reader.join().unwrap();
    client_out += &format!("exit {:?}\n", status.and_then(|s| s.code()));
    if let Some((mut s, rest)) = server {
        let st = wait_timeout(&mut s, Duration::from_secs(30));
        server_out += &rest.join().unwrap();
        server_out += &format!("exit {:?}\n", st.and_then(|s| s.code()));
    }
    (client_out, server_out)
}

fn lines(text: &str) -> String {
    text.trim_start().to_string()
}

fn expect(name: &str, no_server: bool, client: &str, server: &str) {
    let (c, s) = scenario(name, no_server);
    let (wc, ws) = (lines(client), lines(server));
    assert!(
        c == wc && s == ws,
        "{name}: the client printed\n{c}\nwanted\n{wc}\nthe server printed\n{s}\nwanted\n{ws}"
    );
}

const CLIENT_CONNECTED: &str = "
event RDMA_CM_EVENT_ADDR_RESOLVED status 0
event RDMA_CM_EVENT_ROUTE_RESOLVED status 0
qp INIT
";

const SERVER_REQUEST: &str = "
listening
event RDMA_CM_EVENT_CONNECT_REQUEST status 0
private_len 56
private_data ok
";

/// A connection made and torn down: private data padded to 56 / 196
/// bytes, the QP through INIT, RTS, ERR, DISCONNECTED then TIMEWAIT_EXIT
/// on both sides.
#[test]
fn connect_establish_disconnect() {
    let client = format!(
        "{CLIENT_CONNECTED}event RDMA_CM_EVENT_ESTABLISHED status 0
private_len 196
private_data ok
responder_resources 1 initiator_depth 1
qp RTS
qp ERR
event RDMA_CM_EVENT_DISCONNECTED status 0
event RDMA_CM_EVENT_TIMEWAIT_EXIT status 0
ok
exit Some(0)
"
    );
    let server = format!(
        "{SERVER_REQUEST}qp INIT
event RDMA_CM_EVENT_ESTABLISHED status 0
qp RTS
event RDMA_CM_EVENT_DISCONNECTED status 0
qp ERR
event RDMA_CM_EVENT_TIMEWAIT_EXIT status 0
ok
exit Some(0)
"
    );
    expect("connect", false, &client, &server);
}

fn rejected(name: &str, status: i32) {
    let client = format!(
        "{CLIENT_CONNECTED}event RDMA_CM_EVENT_REJECTED status {status}
private_len 148
private_data ok
ok
exit Some(0)
"
    );
    let server = format!("{SERVER_REQUEST}ok\nexit Some(0)\n");
    expect(name, false, &client, &server);
}

/// `rdma_reject`: REJECTED with reason 28 and the reject's private data.
#[test]
fn reject_is_reason_28() {
    rejected("reject", 28);
}

/// `rdma_reject_ece`: reason 35.
#[test]
fn reject_ece_is_reason_35() {
    rejected("reject_ece", 35);
}

/// Nobody listens: REJECTED, reason 8 (invalid service id).
#[test]
fn no_listener_is_reason_8() {
    let client = format!(
        "{CLIENT_CONNECTED}event RDMA_CM_EVENT_REJECTED status 8
ok
exit Some(0)
"
    );
    expect("nolistener", true, &client, "");
}

/// An address no sim device has: ADDR_ERROR after the timeout.
#[test]
fn unknown_address_is_addr_error() {
    expect(
        "addr_error",
        true,
        "event RDMA_CM_EVENT_ADDR_ERROR status -110\nok\nexit Some(0)\n",
        "",
    );
}

/// An address the host has no route to (a network namespace with no
/// routes): `rdma_resolve_addr` fails at once with `ENETUNREACH`, as the
/// kernel's does (next test), not ADDR_ERROR after the timeout.
#[test]
fn unroutable_address_fails_at_once() {
    let prog = paths_program();
    let fabric = Fabric::new("unroutable");
    let port = free_port().to_string();
    let inner = command(&prog, &fabric.0, &["client", "addr_error", &port]);
    let mut cmd = Command::new("unshare");
    cmd.arg("-n")
        .arg(inner.get_program())
        .args(inner.get_args());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = run(&mut cmd);
    assert!(
        out.status.success() && stdout(&out) == "rdma_resolve_addr errno 101\nok\n",
        "{}",
        describe(&cmd, &out)
    );
}

/// The same on the real kernel (rxe in the VM, the real librdmacm): an
/// unroutable address fails in `rdma_resolve_addr` with `ENETUNREACH`.
#[test]
fn unroutable_address_on_the_real_kernel() {
    let Some(vm) = kernel_vm() else { return };
    let prog = paths_program();
    let prog = prog.display().to_string();
    let job = Job::new(["unshare", "-n", &prog, "client", "addr_error", "7000"])
        .timeout(Duration::from_secs(120));
    let out = vm.run(&job).expect("run in the VM");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status == 0 && text == "rdma_resolve_addr errno 101\nok\n",
        "exit {}:\n{text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The server process dies once connected: the client gets DISCONNECTED.
#[test]
fn peer_death_is_disconnected() {
    let client = format!(
        "{CLIENT_CONNECTED}event RDMA_CM_EVENT_ESTABLISHED status 0
private_len 196
private_data ok
responder_resources 1 initiator_depth 1
qp RTS
event RDMA_CM_EVENT_DISCONNECTED status 0
ok
exit Some(0)
"
    );
    let server = format!(
        "{SERVER_REQUEST}qp INIT
event RDMA_CM_EVENT_ESTABLISHED status 0
qp RTS
exit Some(0)
"
    );
    expect("peer_death", false, &client, &server);
}

/// The server dies holding the request: rejected (28), as the dying
/// process's CM would.
#[test]
fn listener_death_is_rejected() {
    let client = format!(
        "{CLIENT_CONNECTED}event RDMA_CM_EVENT_REJECTED status 28
ok
exit Some(0)
"
    );
    let server = format!("{SERVER_REQUEST}exit Some(0)\n");
    expect("server_death", false, &client, &server);
}

/// The server holds the request, alive, and never answers: UNREACHABLE
/// after the CM's response timeout (`IBV_SIM_CM_TIMEOUT_MS`, short here).
#[test]
fn unanswered_request_is_unreachable() {
    let client = format!(
        "{CLIENT_CONNECTED}event RDMA_CM_EVENT_UNREACHABLE status -110
ok
exit Some(0)
"
    );
    let server = format!("{SERVER_REQUEST}exit Some(0)\n");
    expect("unreachable", false, &client, &server);
}

/// The channel's fd: `O_NONBLOCK` gives EAGAIN, and it polls readable
/// when an event is queued.
#[test]
fn event_channel_fd_polls_and_does_not_block() {
    expect(
        "nonblock",
        true,
        "empty EAGAIN\npoll readable\nevent RDMA_CM_EVENT_ADDR_RESOLVED status 0\nok\nexit Some(0)\n",
        "",
    );
}

/// RDMA_PS_UDP: a SIDR exchange, private data of 180 / 136 bytes, the
/// server's QP number and the UDP qkey; the UD QPs at RTS from creation.
#[test]
fn udp_port_space_resolves_the_service() {
    let client = "
event RDMA_CM_EVENT_ADDR_RESOLVED status 0
event RDMA_CM_EVENT_ROUTE_RESOLVED status 0
qp RTS
event RDMA_CM_EVENT_ESTABLISHED status 0
private_len 136
private_data ok
qkey 0x1234567 qp_num_set 1
ok
exit Some(0)
";
    let server = "
listening
event RDMA_CM_EVENT_CONNECT_REQUEST status 0
private_len 180
private_data ok
qp RTS
ok
exit Some(0)
";
    expect("udp", false, client, server);
}

/// Private data over the limit is EINVAL: 57 bytes on connect (the id
/// stays usable), 197 on accept (the request is then rejected, 28, as the
/// kernel's rdma_accept does).
#[test]
fn private_data_limits() {
    let client = format!(
        "{CLIENT_CONNECTED}connect 57 EINVAL
event RDMA_CM_EVENT_REJECTED status 28
ok
exit Some(0)
"
    );
    let server = format!("{SERVER_REQUEST}qp INIT\naccept 197 EINVAL\nok\nexit Some(0)\n");
    expect("limits", false, &client, &server);
}

/// `rdma_destroy_id` returns only once the id's event is acknowledged.
#[test]
fn destroy_id_waits_for_the_ack() {
    let (c, _) = scenario("destroy_blocks", false);
    assert!(
        c.contains("destroy returned before ack: no\ndestroy returned after ack: yes\nok\n"),
        "{c}"
    );
}

// ---------------------------------------------------------------------------
// Unmodified Debian programs, two processes on the sim

/// A server and a client of one program on the sim (the server stopped
/// once the client is done if `stays`); (client, server) as
/// (exit code, stdout + stderr).
fn program_pair(
    tag: &str,
    server: &[&str],
    client: &[&str],
    launcher: bool,
    stays: bool,
) -> ((Option<i32>, String), (Option<i32>, String)) {
    let fabric = Fabric::new(tag);
    let port = free_port().to_string();
    let fill = |argv: &[&str]| -> Vec<String> {
        argv.iter().map(|a| a.replace("{port}", &port)).collect()
    };
    let cmd = |argv: Vec<String>| {
        let mut c = if launcher {
            let mut c = Command::new(target_dir().join("ibv-shim"));
            c.args(["--sim", "--sim-dir"])
                .arg(sim_dir())
                .arg("--fail-on-leak")
                .arg("--");
            c.args(&argv);
            c
        } else {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]).env("LD_LIBRARY_PATH", sim_dir());
            c
        };
        c.env("IBV_SIM_FABRIC", &fabric.0)
            .env_remove("LD_PRELOAD")
            .env_remove("IBV_SIM_DEVICES")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let collect = |mut child: Child, limit: Duration, kill: bool| -> (Option<i32>, String) {
        let mut o = child.stdout.take().unwrap();
        let mut e = child.stderr.take().unwrap();
        let ro = std::thread::spawn(move || {
            let mut v = String::new();
            let _ = o.read_to_string(&mut v);
            v
        });
        let re = std::thread::spawn(move || {
            let mut v = String::new();
            let _ = e.read_to_string(&mut v);
            v
        });
        if kill {
            let _ = child.kill();
        }
        let status = wait_timeout(&mut child, limit);
        let text = ro.join().unwrap() + &re.join().unwrap();
        (status.and_then(|s| s.code()), text)
    };
    let mut s = cmd(fill(server)).spawn().expect("start the server");
    std::thread::sleep(Duration::from_millis(800));
    let c = cmd(fill(client)).spawn().expect("start the client");
    let client = collect(c, Duration::from_secs(60), false);
    if stays {
        std::thread::sleep(Duration::from_millis(300));
    }
    let server = if stays {
        let _ = s.kill();
        collect(s, Duration::from_secs(10), false)
    } else {
        collect(s, Duration::from_secs(60), false)
    };
    (client, server)
}

/// rping, 100 iterations: every ping the client shows is the exact
/// pattern rping writes (the server read it with RDMA READ and the client
/// got it back by RDMA WRITE), in order.
#[test]
fn rping_100_iterations_move_the_data() {
    let ((cc, cout), (sc, sout)) = program_pair(
        "rping100",
        &[
            "rping",
            "-s",
            "-a",
            "127.0.0.1",
            "-p",
            "{port}",
            "-C",
            "100",
            "-V",
        ],
        &[
            "rping",
            "-c",
            "-a",
            "127.0.0.1",
            "-p",
            "{port}",
            "-C",
            "100",
            "-v",
            "-V",
        ],
        false,
        false,
    );
    assert_eq!(
        (cc, sc),
        (Some(0), Some(0)),
        "client:\n{cout}\nserver:\n{sout}"
    );
    let mut want = String::new();
    let mut start = b'A';
    for ping in 0..100 {
        let mut line = format!("rdma-ping-{ping}: ").into_bytes();
        let mut c = start;
        while line.len() < 63 {
            line.push(c);
            c = if c >= b'z' { b'A' } else { c + 1 };
        }
        start = if start >= b'z' { b'A' } else { start + 1 };
        want += &format!("ping data: {}\n", String::from_utf8(line).unwrap());
    }
    let got: String = cout
        .lines()
        .filter(|l| l.starts_with("ping data: "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(got, want, "client:\n{cout}");
}

/// `ibv-shim --sim --fail-on-leak` on both ends: the objects the sim's
/// librdmacm keeps (its contexts and PDs) are its own, not the program's.
#[test]
fn the_shim_on_both_ends_finds_no_false_leak() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "rping",
            &["rping", "-s", "-a", "127.0.0.1", "-p", "{port}", "-C", "10"],
            &["rping", "-c", "-a", "127.0.0.1", "-p", "{port}", "-C", "10"],
        ),
        (
            "ucmatose",
            &["ucmatose", "-p", "{port}"],
            &["ucmatose", "-s", "127.0.0.1", "-p", "{port}"],
        ),
        (
            "rdma_server",
            &["rdma_server", "-s", "127.0.0.1", "-p", "{port}"],
            &["rdma_client", "-s", "127.0.0.1", "-p", "{port}"],
        ),
        (
            "fi_pingpong",
            &[
                "fi_pingpong",
                "-p",
                "verbs",
                "-e",
                "msg",
                "-B",
                "{port}",
                "-I",
                "10",
            ],
            &[
                "fi_pingpong",
                "-p",
                "verbs",
                "-e",
                "msg",
                "-P",
                "{port}",
                "-I",
                "10",
                "127.0.0.1",
            ],
        ),
    ];
    let mut bad = String::new();
    for (tag, server, client) in cases {
        let ((cc, cout), (sc, sout)) = program_pair(tag, server, client, true, false);
        for (who, code, out) in [("client", cc, &cout), ("server", sc, &sout)] {
            if code != Some(0)
                || !out.contains("ibv-shim: no RDMA resources leaked")
                || !out.contains("kept by librdmacm (suppressed by default)")
            {
                bad += &format!("{tag} {who} exit {code:?}:\n{out}\n");
            }
        }
    }
    assert!(bad.is_empty(), "{bad}");
}

/// qperf's RC tests over the connection manager, and cmtime's timed
/// steps (resolve, route, connect, disconnect) for 20 connections.
#[test]
fn qperf_cm_and_cmtime_run() {
    let ((cc, cout), _) = program_pair(
        "qperf",
        &["qperf", "-lp", "{port}"],
        &[
            "qperf",
            "-lp",
            "{port}",
            "-t",
            "1",
            "-cm1",
            "127.0.0.1",
            "rc_bw",
            "rc_lat",
        ],
        false,
        true,
    );
    assert_eq!(cc, Some(0), "{cout}");
    assert!(
        cout.contains("rc_bw:") && cout.contains("bw  =") && cout.contains("latency  ="),
        "{cout}"
    );
    let ((cc, cout), _) = program_pair(
        "cmtime",
        &["cmtime", "-b", "127.0.0.1", "-p", "{port}", "-c", "20"],
        &["cmtime", "-s", "127.0.0.1", "-p", "{port}", "-c", "20"],
        false,
        true,
    );
    assert_eq!(cc, Some(0), "{cout}");
    for step in [
        "resolve addr",
        "resolve route",
        "connect",
        "disconnect",
        "destroy",
    ] {
        assert!(cout.contains(step), "no {step:?} step in\n{cout}");
    }
}

/// rdma_verbs.h's inline helpers (`rdma_reg_msgs`, `rdma_post_send`,
/// `rdma_post_write`, `rdma_post_read`, `rdma_get_send_comp`, ...) over
/// synchronous endpoints (`rdma_create_ep`, `rdma_get_request`), with
/// `rdma_getaddrinfo`, `rdma_get_devices`, `rdma_set_option`,
/// `rdma_init_qp_attr` and the ports: `tests/c/cm/inline.c`.
#[test]
fn rdma_verbs_inline_helpers_work() {
    let prog = cc(
        "cm_inline",
        &[&repo_dir().join("tests/c/cm/inline.c")],
        &["-lrdmacm", "-libverbs"],
    );
    let p = prog.display().to_string();
    let ((cc_, cout), (sc, sout)) = program_pair(
        "inline",
        &[&p, "server", "{port}"],
        &[&p, "client", "{port}"],
        false,
        false,
    );
    assert!(
        cc_ == Some(0)
            && sc == Some(0)
            && cout.contains("read back: written by the client\nok\n")
            && sout.contains("window: written by the client\nok\n"),
        "client exit {cc_:?}:\n{cout}\nserver exit {sc:?}:\n{sout}"
    );
}

// ---------------------------------------------------------------------------
// rsockets

/// rstream and riostream (blocking, non-blocking, through rpoll), each
/// with the data verified by the program itself (`-T v`); rcopy copies a
/// file, compared byte for byte.
#[test]
fn rsockets_rstream_riostream_rcopy() {
    let mut bad = String::new();
    for (prog, opts) in [
        ("rstream", "-S 4096 -C 20"),
        ("rstream", "-T v -S 30000 -C 50"),
        ("rstream", "-T a -S 100000 -C 30"),
        ("rstream", "-T n -S 65536 -C 30"),
        ("riostream", "-S 4096 -C 20"),
        ("riostream", "-T v -S 65536 -C 50"),
    ] {
        let opts: Vec<&str> = opts.split_whitespace().collect();
        let mut server = vec![prog, "-p", "{port}"];
        server.extend(&opts);
        let mut client = vec![prog, "-s", "127.0.0.1", "-p", "{port}"];
        client.extend(&opts);
        let ((cc, cout), (sc, sout)) = program_pair(prog, &server, &client, false, false);
        if cc != Some(0) || sc != Some(0) || !cout.contains("custom") || !sout.contains("custom") {
            bad += &format!(
                "{prog} {opts:?}: client exit {cc:?}:\n{cout}\nserver exit {sc:?}:\n{sout}\n"
            );
        }
    }
    let tmp = TempDir::new("rcopy");
    let src = tmp.join("src");
    let dst = tmp.join("dst");
    let data: Vec<u8> = (0..3 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();
    let target = format!("127.0.0.1:{}", dst.display());
    let ((cc, cout), _) = program_pair(
        "rcopy",
        &["rcopy", "-p", "{port}"],
        &["rcopy", &src.display().to_string(), &target, "-p", "{port}"],
        false,
        true,
    );
    if cc != Some(0) || std::fs::read(&dst).ok().as_deref() != Some(&data[..]) {
        bad += &format!("rcopy: exit {cc:?}, the copy differs or is missing:\n{cout}\n");
    }
    assert!(bad.is_empty(), "{bad}");
}

/// Datagram rsockets: udpong (rdmacm-utils) between two processes, its
/// client sending 100 datagrams the server counts (the count it answers
/// with is the client's "xfers" column), and in echo mode (`-T e`, every
/// datagram answered), over IPv4 and IPv6 loopback.
#[test]
fn udpong_datagram_rsockets() {
    let mut bad = String::new();
    for (addr, opts, want) in [
        ("127.0.0.1", "-C 100", "custom    1000    100     "),
        ("::1", "-T e -C 50", "custom    1000    100     "),
        (
            "127.0.0.1",
            "-T b -S 500 -C 100",
            "custom    500     100     ",
        ),
    ] {
        let opts: Vec<&str> = opts.split_whitespace().collect();
        let server = ["udpong", "-b", addr, "-p", "{port}"];
        let mut client = vec!["udpong", "-s", addr, "-p", "{port}"];
        client.extend(&opts);
        let ((cc, cout), (_, sout)) = program_pair("udpong", &server, &client, false, true);
        if cc != Some(0) || !cout.lines().any(|l| l.starts_with(want)) {
            bad += &format!("{addr} {opts:?}: client exit {cc:?}:\n{cout}\nserver:\n{sout}\n");
        }
    }
    assert!(bad.is_empty(), "{bad}");
}

/// UCX finds the sim's librdmacm as its sockaddr connection manager
/// (`ucx_info -d`: "Connection manager: rdmacm", whose private data limit
/// is the sim's 56 bytes less UCX's own header). (ucx_perftest 1.13 has no
/// sockaddr mode to connect through it.)
#[test]
fn ucx_lists_the_rdmacm_connection_manager() {
    let fabric = Fabric::new("ucx");
    let mut cmd = Command::new("ucx_info");
    cmd.arg("-d")
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", &fabric.0)
        .env_remove("LD_PRELOAD");
    let out = run(&mut cmd);
    let text = stdout(&out);
    assert!(
        text.contains("# Connection manager: rdmacm") && text.contains("max_conn_priv: 54 bytes"),
        "{}",
        describe(&cmd, &out)
    );
}

/// `rdma_join_multicast` / `rdma_leave_multicast` on RoCE (rxe0) and
/// InfiniBand (mlx5_0): MULTICAST_JOIN with the group's address vector,
/// QP 0xffffff, the UDP qkey and the program's context, and a SEND to the
/// group received by the other member (one process: the sim's multicast
/// reaches the QPs of the sending process): `tests/c/cm/mcast.c`.
#[test]
fn multicast_join_send_and_leave() {
    let prog = cc(
        "cm_mcast",
        &[&repo_dir().join("tests/c/cm/mcast.c")],
        &["-lrdmacm", "-libverbs"],
    );
    for dev in ["rxe0", "mlx5_0"] {
        let fabric = Fabric::new("mcast");
        let mut cmd = Command::new(&prog);
        cmd.env("LD_LIBRARY_PATH", sim_dir())
            .env("IBV_SIM_FABRIC", &fabric.0)
            .env("IBV_SIM_DEVICES", dev)
            .env_remove("LD_PRELOAD");
        let out = run(&mut cmd);
        let text = stdout(&out);
        assert!(
            out.status.success()
                && text.contains("context 1 qp_num 0xffffff qkey 0x1234567 global 1\n")
                && text.contains("context 2 qp_num 0xffffff qkey 0x1234567 global 1\n")
                && text.ends_with("received: to the group\nok\n"),
            "{dev}: {}",
            describe(&cmd, &out)
        );
    }
}

/// mckey between two processes: the receiver in one process gets every
/// datagram the sender in another sends to the group (the fabric's
/// multicast table fans a send out to each member process), and both end
/// well. The sender starts once the receiver says it has joined and
/// receives (its output line-buffered by `stdbuf`); a receiver that gets
/// nothing waits for its count of messages and times out here.
#[test]
fn mckey_between_two_processes() {
    let fabric = Fabric::new("mckey");
    let mckey = |args: &[&str]| {
        let mut c = Command::new("stdbuf");
        c.args([
            "-oL",
            "mckey",
            "-m",
            "239.1.2.3",
            "-b",
            "127.0.0.1",
            "-C",
            "20",
        ])
        .args(args)
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", &fabric.0)
        .env("IBV_SIM_DEVICES", "rxe0")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    };
    let mut receiver = mckey(&[]).spawn().expect("start mckey (rdmacm-utils)");
    let mut lines = BufReader::new(receiver.stdout.take().unwrap()).lines();
    let mut rout = String::new();
    for l in lines.by_ref() {
        let l = l.unwrap_or_default();
        rout += &format!("{l}\n");
        if l.starts_with("receiving data transfers") {
            break;
        }
    }
    let sender = mckey(&["-s"]).output().expect("start mckey -s");
    let rest = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let status = wait_timeout(&mut receiver, Duration::from_secs(30));
    for l in rest.join().unwrap() {
        rout += &format!("{l}\n");
    }
    let sout = String::from_utf8_lossy(&sender.stdout).into_owned()
        + &String::from_utf8_lossy(&sender.stderr);
    assert!(
        sender.status.success()
            && status.is_some_and(|s| s.success())
            && rout.contains("receiving data transfers\ndata transfers complete\n")
            && rout.contains("return status 0")
            && sout.contains("return status 0"),
        "sender {:?}:\n{sout}\nreceiver {status:?}:\n{rout}",
        sender.status
    );
}
