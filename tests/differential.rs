//! ibv-sim's `rxe0` against real Soft-RoCE (rdma-core 44 on Debian 12's
//! kernel, in the micro-VM: `common::kernel_vm`, test group `vm`), the
//! same work side by side:
//!
//! - `ibv_devinfo -v` of rxe0, attribute by attribute (GUIDs and GIDs,
//!   which name the machine, left out);
//! - the fidelity probes of `tests/c/fidelity/` (single-process loopback,
//!   `key: value` lines), whose output on real rxe must also be their
//!   `NAME.expected` (what `sim_fidelity.rs` holds the sim to);
//! - unmodified programs (pingpongs, perftest, qperf, the librdmacm
//!   programs, libfabric, UCX, pyverbs): how each process ended;
//! - the connection manager's event paths (`tests/c/cm/paths.c`, the sim's
//!   own librdmacm against the kernel's rdma_cm): what each side printed,
//!   events, statuses, private data sizes and QP states.
//!
//! Every difference must be listed in `tests/fidelity/known.tsv` (source,
//! key, why), and every listed one must still be one: the test fails on an
//! unlisted difference and on a listed one that went away. The table of
//! `docs/ibv-sim.md` between its `differential` markers is made from the
//! list and the values seen, and must be current (`IBV_SHIM_BLESS=1`
//! rewrites it).

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// (source, key) -> value, on one side.
type Seen = BTreeMap<(String, String), String>;

struct Observations {
    kernel: Seen,
    sim: Seen,
    /// Probes whose output on real rxe is not their `.expected` file.
    expected_wrong: Vec<String>,
}

const KNOWN: &str = "tests/fidelity/known.tsv";
const TABLE_BEGIN: &str =
    "<!-- differential: begin (made by tests/differential.rs from tests/fidelity/known.tsv) -->";
const TABLE_END: &str = "<!-- differential: end -->";

struct Known {
    source: String,
    /// A key, or `*` for every key of the source.
    key: String,
    why: String,
}

fn known() -> Vec<Known> {
    let text =
        std::fs::read_to_string(repo_dir().join(KNOWN)).unwrap_or_else(|e| panic!("{KNOWN}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "{KNOWN}: not `source<TAB>key<TAB>why`: {l:?}");
            Known {
                source: f[0].into(),
                key: f[1].into(),
                why: f[2].into(),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Running a command on each side

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Kernel,
    Sim,
}

/// A process on one side.
enum Proc {
    Local(std::process::Child, Instant),
    Vm(VmRunning<'static>),
}

/// How a process ended, and its stdout.
struct End {
    status: String,
    stdout: String,
}

struct World {
    side: Side,
    vm: &'static Vm,
    fabric: String,
}

impl World {
    fn new(side: Side, vm: &'static Vm, tag: &str) -> World {
        World {
            side,
            vm,
            fabric: fabric_name("differential", tag),
        }
    }

    fn argv(&self, text: &str, port: u16) -> Vec<String> {
        let host = match self.side {
            Side::Kernel => GUEST_IP,
            Side::Sim => "127.0.0.1",
        };
        text.split_whitespace()
            .map(|w| {
                w.replace("{port}", &port.to_string())
                    .replace("{host}", host)
                    .replace("{repo}", &repo_dir().display().to_string())
            })
            .collect()
    }

    fn start(&self, argv: &[String], env: &[(&str, &str)]) -> Proc {
        match self.side {
            Side::Kernel => {
                let mut job = Job::new(argv).timeout(Duration::from_secs(120));
                for (k, v) in env {
                    job = job.env(k, v);
                }
                Proc::Vm(
                    self.vm
                        .spawn(&job)
                        .unwrap_or_else(|e| panic!("{argv:?}: {e}")),
                )
            }
            Side::Sim => {
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..])
                    .env_remove("LD_PRELOAD")
                    .env("LD_LIBRARY_PATH", sim_dir())
                    .env("IBV_SIM_DEVICES", "rxe0")
                    .env("IBV_SIM_FABRIC", &self.fabric)
                    .envs(env.iter().copied())
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null());
                let child = cmd.spawn().unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                Proc::Local(child, Instant::now())
            }
        }
    }

    fn wait_listening(&self, p: &mut Proc, port: u16) {
        match p {
            Proc::Vm(job) => vm_wait_listening(self.vm, job, port, Duration::from_secs(30)),
            Proc::Local(child, _) => {
                let deadline = Instant::now() + Duration::from_secs(10);
                while !listening(port)
                    && matches!(child.try_wait(), Ok(None))
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(format!(
            "/dev/shm/ibv-sim-{}-{}",
            unsafe { libc::getuid() },
            self.fabric
        ));
    }
}

fn status_text(code: i32) -> String {
    match code {
        0 => "exit 0".into(),
        129..=159 => format!("signal {}", code - 128),
        c => format!("exit {c}"),
    }
}

/// Waits up to `timeout`; past it the process is killed and "hung".
fn finish(p: Proc, timeout: Duration) -> End {
    match p {
        Proc::Vm(job) => {
            let deadline = Instant::now() + timeout;
            loop {
                match job.try_wait() {
                    Ok(Some(o)) => {
                        return End {
                            status: if o.timed_out {
                                "hung".into()
                            } else {
                                status_text(o.status)
                            },
                            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                        }
                    }
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Ok(None) => {
                        job.kill();
                        let o = job.wait().ok();
                        return End {
                            status: "hung".into(),
                            stdout: o
                                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                                .unwrap_or_default(),
                        };
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        Proc::Local(mut child, started) => {
            use std::os::unix::process::ExitStatusExt;
            let deadline = started.max(Instant::now()) + timeout;
            let status = loop {
                if let Some(s) = child.try_wait().expect("wait") {
                    break match (s.code(), s.signal()) {
                        (Some(c), _) => status_text(c),
                        (None, Some(sig)) => format!("signal {sig}"),
                        _ => "?".into(),
                    };
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break "hung".into();
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            let mut stdout = String::new();
            if let Some(mut o) = child.stdout.take() {
                let _ = std::io::Read::read_to_string(&mut o, &mut stdout);
            }
            End { status, stdout }
        }
    }
}

// ---------------------------------------------------------------------------
// What is compared

/// `ibv_devinfo -v -d rxe0` as attributes: `key: value` lines, a flag
/// list's continuation lines joined to its key; GUIDs and GIDs left out.
fn devinfo(text: &str) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<String> = None;
    let mut port = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        match t.split_once(':') {
            Some((k, v)) => {
                let k = k.trim().to_string();
                let v = v.split_whitespace().collect::<Vec<_>>().join(" ");
                if k == "port" {
                    port = format!("port {v} ");
                    last = None;
                    continue;
                }
                if k.contains("guid") || k.starts_with("GID[") || k == "hca_id" {
                    last = None;
                    continue;
                }
                let key = format!("{port}{k}");
                m.insert(key.clone(), v);
                last = Some(key);
            }
            _ => {
                if let Some(k) = &last {
                    let e = m.get_mut(k).unwrap();
                    e.push(' ');
                    e.push_str(t);
                }
            }
        }
    }
    m
}

fn key_values(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// A program case: `{port}`, `{host}` (the side's address for rdma_cm)
/// and `{repo}` filled in.
struct Program {
    name: &'static str,
    server: Option<&'static str>,
    client: &'static str,
    env: &'static [(&'static str, &'static str)],
    /// The server never ends by itself (qperf): stopped after the client.
    server_stays: bool,
}

const fn alone(name: &'static str, client: &'static str) -> Program {
    Program {
        name,
        server: None,
        client,
        env: &[],
        server_stays: false,
    }
}

const fn pair(name: &'static str, server: &'static str, client: &'static str) -> Program {
    Program {
        name,
        server: Some(server),
        client,
        env: &[],
        server_stays: false,
    }
}

const UCX_RXE: &[(&str, &str)] = &[("UCX_NET_DEVICES", "rxe0:1")];

const PROGRAMS: &[Program] = &[
    alone("ibv_devices", "ibv_devices"),
    alone("ibv_devinfo", "ibv_devinfo -d rxe0"),
    pair("ibv_rc_pingpong", "ibv_rc_pingpong -g 1 -p {port} -n 5", "ibv_rc_pingpong -g 1 -p {port} -n 5 127.0.0.1"),
    pair("ibv_uc_pingpong", "ibv_uc_pingpong -g 1 -p {port} -n 5", "ibv_uc_pingpong -g 1 -p {port} -n 5 127.0.0.1"),
    pair("ibv_ud_pingpong", "ibv_ud_pingpong -g 1 -p {port} -n 5", "ibv_ud_pingpong -g 1 -p {port} -n 5 127.0.0.1"),
    pair("ibv_srq_pingpong", "ibv_srq_pingpong -g 1 -p {port} -n 5", "ibv_srq_pingpong -g 1 -p {port} -n 5 127.0.0.1"),
    pair("ibv_xsrq_pingpong", "ibv_xsrq_pingpong -g 1 -p {port} -n 5", "ibv_xsrq_pingpong -g 1 -p {port} -n 5 127.0.0.1"),
    pair("ib_send_bw", "ib_send_bw -F -p {port} -n 10", "ib_send_bw -F -p {port} -n 10 127.0.0.1"),
    pair("ib_write_bw", "ib_write_bw -F -p {port} -n 10", "ib_write_bw -F -p {port} -n 10 127.0.0.1"),
    pair("ib_read_bw", "ib_read_bw -F -p {port} -n 10", "ib_read_bw -F -p {port} -n 10 127.0.0.1"),
    pair("ib_atomic_bw", "ib_atomic_bw -F -p {port} -n 10", "ib_atomic_bw -F -p {port} -n 10 127.0.0.1"),
    pair("ib_send_lat", "ib_send_lat -F -p {port} -n 10", "ib_send_lat -F -p {port} -n 10 127.0.0.1"),
    pair("ib_read_lat", "ib_read_lat -F -p {port} -n 10", "ib_read_lat -F -p {port} -n 10 127.0.0.1"),
    pair("ib_send_bw_inline_900", "ib_send_bw -F -I 900 -p {port} -n 10", "ib_send_bw -F -I 900 -p {port} -n 10 127.0.0.1"),
    Program { server_stays: true, ..pair("qperf_rc_bw", "qperf -lp {port}", "qperf -lp {port} -t 1 127.0.0.1 rc_bw") },
    Program { server_stays: true, ..pair("qperf_rc_bw_cm", "qperf -lp {port}", "qperf -lp {port} -t 1 -cm1 {host} rc_bw") },
    pair("rping", "rping -s -a {host} -p {port} -C 3", "rping -c -a {host} -p {port} -C 3 -v"),
    pair("ucmatose", "ucmatose -p {port}", "ucmatose -s {host} -p {port}"),
    pair("udaddy", "udaddy", "udaddy -s {host}"),
    pair("rdma_server", "rdma_server -s {host} -p {port}", "rdma_client -s {host} -p {port}"),
    pair("rstream", "rstream -p {port} -S 4096 -C 20", "rstream -s {host} -p {port} -S 4096 -C 20"),
    pair("ib_send_bw_rdma_cm", "ib_send_bw -F -R -p {port} -n 10", "ib_send_bw -F -R -p {port} -n 10 {host}"),
    alone("fi_info", "fi_info -p verbs"),
    pair("fi_pingpong_msg", "fi_pingpong -p verbs -e msg -B {port} -I 10", "fi_pingpong -p verbs -e msg -P {port} -I 10 {host}"),
    Program { env: UCX_RXE, ..alone("ucx_info", "ucx_info -d") },
    Program { env: UCX_RXE, ..pair("ucx_get_rc", "ucx_perftest -p {port} -f", "ucx_perftest -p {port} -f -n 200 -w 20 -t get -x rc_verbs -d rxe0:1 -s 4096 -D zcopy 127.0.0.1") },
    alone("pyverbs", "/usr/bin/python3 {repo}/tests/third_party/pyverbs_pd_mr.py"),
];

/// The event-path scenarios of `tests/c/cm/paths.c` compared (name, has a
/// server). Not `unreachable`: the kernel's CM waits about a minute.
const CM_PATHS: &[(&str, bool)] = &[
    ("connect", true),
    ("reject", true),
    ("reject_ece", true),
    ("nolistener", false),
    ("addr_error", false),
    ("peer_death", true),
    ("server_death", true),
    ("nonblock", false),
    ("udp", true),
    ("limits", true),
    ("destroy_blocks", true),
];

/// One scenario on one side: each process's lines (" / "-joined) and end.
fn cm_path(w: &World, scen: &str, with_server: bool) -> BTreeMap<String, String> {
    let exe = cc(
        "cm_paths",
        &[&repo_dir().join("tests/c/cm/paths.c")],
        &["-lrdmacm", "-libverbs", "-lpthread"],
    )
    .display()
    .to_string();
    let port = free_port();
    let argv = |role: &str| w.argv(&format!("{exe} {role} {scen} {{port}} {{host}}"), port);
    let mut server = with_server.then(|| w.start(&argv("server"), &[]));
    if let Some(s) = server.as_mut() {
        w.wait_listening(s, port);
    }
    let client = finish(w.start(&argv("client"), &[]), Duration::from_secs(120));
    let lines = |e: &End| format!("{}: {}", e.status, e.stdout.trim().replace('\n', " / "));
    let mut m = BTreeMap::from([("client".to_string(), lines(&client))]);
    if let Some(s) = server {
        m.insert("server".into(), lines(&finish(s, Duration::from_secs(60))));
    }
    m
}

/// How a program's processes ended on one side: "client exit 0, server
/// exit 0" (a pair) or "exit 0"; for ucx_info, whether it lists rxe0's RC.
fn outcome(w: &World, p: &Program) -> String {
    let port = free_port();
    let mut server = p.server.map(|s| w.start(&w.argv(s, port), p.env));
    if let Some(s) = server.as_mut() {
        if p.server.is_some_and(|a| a.contains("{port}")) {
            w.wait_listening(s, port);
        } else {
            std::thread::sleep(Duration::from_millis(1500));
        }
    }
    let client = finish(
        w.start(&w.argv(p.client, port), p.env),
        Duration::from_secs(120),
    );
    let mut text = match (&server, p.name) {
        (None, "ucx_info") => format!(
            "{}, rc_verbs on rxe0:1 {}",
            client.status,
            if client.stdout.contains("Transport: rc_verbs")
                && client.stdout.contains("Device: rxe0:1")
            {
                "listed"
            } else {
                "not listed"
            }
        ),
        (None, _) => client.status.clone(),
        (Some(_), _) => format!("client {}", client.status),
    };
    if let Some(s) = server {
        let end = if p.server_stays {
            if let Proc::Vm(job) = &s {
                std::thread::sleep(Duration::from_millis(500));
                job.kill();
            } else if let Proc::Local(child, _) = &s {
                // SAFETY: kill(2) of a process this test started.
                unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
            }
            None
        } else {
            Some(finish(s, Duration::from_secs(30)))
        };
        if let Some(e) = end {
            text += &format!(", server {}", e.status);
        }
    }
    text
}

// ---------------------------------------------------------------------------
// Observing both sides once

fn probes() -> Vec<(String, PathBuf)> {
    let dir = repo_dir().join("tests/c/fidelity");
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.extension().is_some_and(|x| x == "c")
                        && p.with_extension("expected").is_file()
                })
                .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), p))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// One observation to make, tagged "alone" when it must run by itself.
type Task<'a> = Box<dyn Fn() + Send + Sync + 'a>;

/// Probes that allocate objects up to a device's limit: "alone".
fn limit_probe(name: &str) -> &'static str {
    // port_events takes the VM's link down and up again.
    if ["limits", "limits_shared", "mw_limit", "port_events"].contains(&name) {
        "alone"
    } else {
        ""
    }
}

fn observe(vm: &'static Vm) -> Observations {
    let kernel = Mutex::new(Seen::new());
    let sim = Mutex::new(Seen::new());
    let expected_wrong = Mutex::new(Vec::new());
    {
        let put_fn = |side: Side, source: &str, m: BTreeMap<String, String>| {
            let target = if side == Side::Kernel { &kernel } else { &sim };
            let mut t = target.lock().unwrap();
            for (k, v) in m {
                t.insert((source.to_string(), k), v);
            }
        };
        let put = &put_fn;
        let expected_wrong_ref = &expected_wrong;
        let mut work: Vec<(&str, Task<'_>)> = Vec::new();
        for side in [Side::Kernel, Side::Sim] {
            work.push((
                "",
                Box::new(move || {
                    let w = World::new(side, vm, "devinfo");
                    let end = finish(
                        w.start(&w.argv("ibv_devinfo -v -d rxe0", 0), &[]),
                        Duration::from_secs(120),
                    );
                    let mut m = devinfo(&end.stdout);
                    m.insert("exit".into(), end.status);
                    put(side, "ibv_devinfo -v", m);
                }),
            ));
            for (name, src) in probes() {
                let expected_wrong = expected_wrong_ref;
                work.push((
                    limit_probe(&name),
                    Box::new(move || {
                        let exe = cc(
                            &format!("fidelity_{name}"),
                            &[src.as_path()],
                            &["-libverbs"],
                        );
                        let w = World::new(side, vm, &name);
                        let env = [("FIDELITY_DEVICE", "rxe0"), ("FIDELITY_GID_INDEX", "1")];
                        let end = finish(
                            w.start(&[exe.display().to_string()], &env),
                            Duration::from_secs(120),
                        );
                        let mut m = key_values(&end.stdout);
                        if end.status != "exit 0" {
                            m.insert("exit".into(), end.status);
                        }
                        if side == Side::Kernel {
                            let want =
                                std::fs::read_to_string(src.with_extension("expected")).unwrap();
                            if key_values(&want) != m {
                                expected_wrong.lock().unwrap().push(format!(
                                    "{name}: real rxe printed\n{}\n{name}.expected says\n{want}",
                                    end.stdout
                                ));
                            }
                        }
                        put(side, &format!("probe {name}"), m);
                    }),
                ));
            }
            for &(scen, with_server) in CM_PATHS {
                work.push((
                    "",
                    Box::new(move || {
                        let w = World::new(side, vm, scen);
                        put(
                            side,
                            &format!("cm_paths {scen}"),
                            cm_path(&w, scen, with_server),
                        );
                    }),
                ));
            }
            for p in PROGRAMS {
                work.push((
                    "",
                    Box::new(move || {
                        let w = World::new(side, vm, p.name);
                        let o = outcome(&w, p);
                        put(
                            side,
                            &format!("program {}", p.name),
                            BTreeMap::from([("ended".to_string(), o)]),
                        );
                    }),
                ));
            }
        }
        // The probes that fill a device-wide limit (rxe counts objects per
        // device, across processes) run first, one at a time with nothing
        // else on the device; then the rest three at a time: the VM has two
        // CPUs, and most of a job's time is waiting for a program to start.
        let (alone, shared): (Vec<_>, Vec<_>) =
            work.into_iter().partition(|(tag, _)| *tag == "alone");
        for (_, job) in &alone {
            job();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((_, job)) = shared.get(i) else { break };
                    job();
                });
            }
        });
    }
    Observations {
        kernel: kernel.into_inner().unwrap(),
        sim: sim.into_inner().unwrap(),
        expected_wrong: expected_wrong.into_inner().unwrap(),
    }
}

fn observations() -> Option<&'static Observations> {
    static OBS: OnceLock<Observations> = OnceLock::new();
    let vm = kernel_vm()?;
    Some(OBS.get_or_init(|| observe(vm)))
}

/// Every (source, key) whose values differ: (rxe's, the sim's).
fn differences(o: &Observations) -> BTreeMap<(String, String), (String, String)> {
    let none = String::from("(none)");
    let keys: std::collections::BTreeSet<&(String, String)> =
        o.kernel.keys().chain(o.sim.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (a, b) = (
                o.kernel.get(k).unwrap_or(&none),
                o.sim.get(k).unwrap_or(&none),
            );
            (a != b).then(|| (k.clone(), (a.clone(), b.clone())))
        })
        .collect()
}

fn listed<'a>(known: &'a [Known], source: &str, key: &str) -> Option<&'a Known> {
    known
        .iter()
        .find(|k| k.source == source && (k.key == key || k.key == "*"))
}

/// The checks for the sources starting with `prefix`.
fn only_listed_differences(prefix: &str) {
    let Some(o) = observations() else { return };
    let known = known();
    let diffs = differences(o);
    let mut bad = String::new();
    for ((source, key), (rxe, sim)) in diffs.iter().filter(|((s, _), _)| s.starts_with(prefix)) {
        if listed(&known, source, key).is_none() {
            bad += &format!(
                "- unlisted difference: {source} / {key}: real rxe {rxe:?}, the sim {sim:?}\n"
            );
        }
    }
    for k in known.iter().filter(|k| k.source.starts_with(prefix)) {
        let still = diffs
            .keys()
            .any(|(s, key)| *s == k.source && (k.key == "*" || *key == k.key));
        if !still {
            bad += &format!(
                "- listed in {KNOWN} but no longer a difference: {} / {}: take it off the list\n",
                k.source, k.key
            );
        }
    }
    assert!(
        bad.is_empty(),
        "ibv-sim's rxe0 against real rxe ({prefix}...):\n{bad}"
    );
}

#[test]
fn ibv_devinfo_differs_only_where_listed() {
    only_listed_differences("ibv_devinfo");
}

#[test]
fn the_probes_differ_only_where_listed() {
    only_listed_differences("probe ");
}

#[test]
fn the_probes_expected_files_are_what_real_rxe_prints() {
    let Some(o) = observations() else { return };
    assert!(
        probes().len() >= 10,
        "the fidelity probes are missing from tests/c/fidelity"
    );
    assert!(
        o.expected_wrong.is_empty(),
        "{}",
        o.expected_wrong.join("\n")
    );
}

#[test]
fn programs_end_alike_but_where_listed() {
    only_listed_differences("program ");
}

/// The connection manager's event paths: the sim's librdmacm against the
/// kernel's rdma_cm, the same C program on both.
#[test]
fn cm_event_paths_differ_only_where_listed() {
    only_listed_differences("cm_paths ");
}

/// The table in `docs/ibv-sim.md`, made from the list and what was seen.
#[test]
fn the_fidelity_table_in_the_docs_is_current() {
    let Some(o) = observations() else { return };
    let diffs = differences(o);
    let mut table = String::from("| what | key | real rxe (kernel 6.1) | ibv-sim rxe0 | why |\n| --- | --- | --- | --- | --- |\n");
    for k in known() {
        let rows: Vec<_> = diffs
            .iter()
            .filter(|((s, key), _)| *s == k.source && (k.key == "*" || *key == k.key))
            .collect();
        for ((s, key), (rxe, sim)) in rows {
            let cell = |v: &str| v.replace('|', "\\|");
            table += &format!(
                "| {s} | {key} | {} | {} | {} |\n",
                cell(rxe),
                cell(sim),
                cell(&k.why)
            );
        }
    }
    let path = repo_dir().join("docs/ibv-sim.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (Some(a), Some(b)) = (doc.find(TABLE_BEGIN), doc.find(TABLE_END)) else {
        panic!(
            "{}: no {TABLE_BEGIN} ... {TABLE_END} markers",
            path.display()
        );
    };
    let current = &doc[a + TABLE_BEGIN.len()..b];
    let want = format!("\n{table}");
    if current != want {
        if std::env::var_os("IBV_SHIM_BLESS").is_some() {
            std::fs::write(
                &path,
                format!("{}{want}{}", &doc[..a + TABLE_BEGIN.len()], &doc[b..]),
            )
            .unwrap();
            return;
        }
        panic!(
            "{} is stale: its differential table should be (IBV_SHIM_BLESS=1 cargo test --test differential rewrites it):\n{table}",
            path.display()
        );
    }
}
