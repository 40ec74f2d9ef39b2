//! ibv-sim beyond the plain verbs: the `IBVERBS_PRIVATE_34` symbols that
//! provider direct-verbs libraries (libmlx5, libefa) link to, so that the
//! programs built on them (perftest, libfabric's `fi_info`, UCX, pyverbs)
//! load and run on the sim alone; and the extended verbs real programs use
//! by default (`ibv_create_qp_ex` + `ibv_wr_*`, `ibv_create_cq_ex` + the poll
//! cursor, `ibv_query_device_ex`), exercised by C programs compiled against
//! the real `/usr/include/infiniband/verbs.h`.
//!
//! Needs gcc, libibverbs-dev, ibverbs-providers, perftest, libfabric-bin,
//! ucx-utils, python3-pyverbs, valgrind and a built sim (`make test`).

mod common;

use common::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A command running `prog` on the sim alone (its default two mlx5 devices).
fn on_sim(prog: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(prog);
    c.env("LD_LIBRARY_PATH", sim_dir())
        .env_remove("IBV_SIM_DEVICES")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null());
    c
}

/// What a program that failed to load says.
fn load_failure(text: &str) -> bool {
    text.contains("undefined symbol") || text.contains("symbol lookup error")
}

fn assert_loaded(what: &str, cmd: &Command, out: &std::process::Output) {
    let all = format!("{}{}", stdout_lossy(out), stderr(out));
    assert!(
        !load_failure(&all) && signal(&out.status).is_none(),
        "{what} did not load or crashed on the sim\n{}",
        describe(cmd, out)
    );
}

fn stdout_lossy(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles `tests/c/sim/NAME.c` against the real verbs.h (and `libs`).
fn c_program(name: &str, libs: &[&str]) -> PathBuf {
    let dir = repo_dir().join("tests/c/sim");
    let include = format!("-I{}", dir.display());
    let mut args = vec![include.as_str()];
    args.extend_from_slice(libs);
    args.extend_from_slice(&["-libverbs", "-lpthread"]);
    cc(name, &[&dir.join(format!("{name}.c"))], &args)
}

/// Runs a self-checking C program on the sim; it must print "checks passed".
fn run_c(bin: &Path, devices: Option<&str>) -> String {
    let mut cmd = on_sim(bin);
    if let Some(d) = devices {
        cmd.env("IBV_SIM_DEVICES", d);
    }
    let out = run(&mut cmd);
    assert!(
        out.status.success() && stdout(&out).contains("checks passed"),
        "{}",
        describe(&cmd, &out)
    );
    stdout(&out)
}

/// A program running in the background, its stdout and stderr collected
/// by a reader thread each, which ends at the pipe's end of file.
struct Background {
    child: Child,
    text: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Background {
    fn spawn(mut cmd: Command) -> Background {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let text = Arc::new(Mutex::new(String::new()));
        let pipes: [Box<dyn Read + Send>; 2] = [
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        ];
        let mut readers = Vec::new();
        for mut p in pipes {
            let t = text.clone();
            readers.push(std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = p.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    t.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }));
        }
        Background {
            child,
            text,
            readers,
        }
    }

    /// Waits for the reader threads: every byte the program wrote is in
    /// `text` (the program has exited; its pipes are at their end).
    fn drain(&mut self) {
        for r in self.readers.drain(..) {
            r.join().expect("a reader thread panicked");
        }
    }

    /// Waits until the output contains `marker` (true) or the program exits
    /// or `timeout` passes (false).
    fn wait_for(&mut self, marker: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.text.lock().unwrap().contains(marker) {
                return true;
            }
            if self.child.try_wait().expect("try_wait").is_some() {
                self.drain();
                return self.text.lock().unwrap().contains(marker);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Kills it (if still running); returns its output and whether it was
    /// still running (a crash would have ended it by a signal).
    fn finish(mut self) -> (String, Option<std::process::ExitStatus>) {
        let status = self.child.try_wait().expect("try_wait");
        if status.is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        self.drain();
        let text = self.text.lock().unwrap().clone();
        (text, status)
    }
}

// ---- (a) the symbols ------------------------------------------------------

#[test]
fn sim_exports_every_private_34_symbol_of_rdma_core_44() {
    let snapshot =
        std::fs::read_to_string(repo_dir().join("abi/libibverbs.so.1.abi")).expect("abi snapshot");
    let want: Vec<(String, bool)> = snapshot
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 5 && f[2] == "IBVERBS_PRIVATE_34")
                .then(|| (f[1].to_string(), f[0] == "object"))
        })
        .collect();
    assert!(
        want.len() >= 70,
        "the snapshot lists {} private symbols",
        want.len()
    );
    let lib = sim_dir().join("libibverbs.so.1");
    let have = dynamic_symbols(&lib);
    let mut missing = Vec::new();
    for (name, object) in &want {
        let ok = have.iter().any(|s| {
            s.name == *name
                && s.version == "IBVERBS_PRIVATE_34"
                && s.default
                && !s.undefined
                && s.line.contains(if *object { " DO " } else { " DF " })
        });
        if !ok {
            missing.push(name.as_str());
        }
    }
    assert!(
        missing.is_empty(),
        "not exported by the sim at IBVERBS_PRIVATE_34: {missing:?}"
    );
    let unversioned: Vec<_> = have
        .iter()
        .filter(|s| !s.undefined && (s.version == "Base" || s.version.is_empty()))
        .map(|s| &s.line)
        .collect();
    assert!(
        unversioned.is_empty(),
        "unversioned exports: {unversioned:?}"
    );
}

// ---- (b) real programs linked to the provider libraries -------------------

#[test]
fn provider_direct_verbs_fail_cleanly_on_sim_devices() {
    // The real libmlx5 / libefa in the process, asked about the sim's devices,
    // and the private kernel-command entry points called as a provider would.
    let bin = c_program("sim_ext_dv", &["-lmlx5", "-lefa"]);
    run_c(&bin, None);
}

#[test]
fn perftest_servers_load_and_wait_for_a_client() {
    for prog in ["ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_send_lat"] {
        let port = free_port().to_string();
        let mut cmd = on_sim("stdbuf");
        cmd.args(["-o0", "-e0", prog, "-d", "mlx5_0", "-p", &port]);
        let mut server = Background::spawn(cmd);
        let waiting = server.wait_for("Waiting for client to connect", TIMEOUT);
        let (text, status) = server.finish();
        assert!(
            waiting && status.is_none() && !load_failure(&text),
            "{prog} on the sim: waiting={waiting} exit={status:?}\n{text}"
        );
    }
}

#[test]
fn perftest_client_and_server_create_their_qps_with_the_wr_api() {
    // perftest's default path creates its QPs with send_ops_flags (the
    // ibv_wr_* API) and its CQs plain or extended. Both sides must get past
    // resource creation and exchange addresses; the traffic itself needs
    // the two processes to share a fabric, so its outcome is not judged here.
    for prog in ["ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_send_lat"] {
        let port = free_port().to_string();
        let mut cmd = on_sim("stdbuf");
        cmd.args(["-o0", "-e0", prog, "-d", "mlx5_0", "-p", &port, "-n", "5"]);
        let mut server = Background::spawn(cmd);
        assert!(
            server.wait_for("Waiting for client to connect", TIMEOUT),
            "{prog} server did not start: {}",
            server.finish().0
        );
        let mut ccmd = on_sim("timeout");
        ccmd.args([
            "20", "stdbuf", "-o0", "-e0", prog, "-d", "mlx5_1", "-p", &port, "-n", "5",
        ])
        .arg("127.0.0.1");
        let client = run_unchecked(&mut ccmd, Duration::from_secs(60));
        let (stext, _) = server.finish();
        let ctext = format!("{}{}", stdout_lossy(&client), stderr(&client));
        for (side, text) in [("client", &ctext), ("server", &stext)] {
            assert!(
                !load_failure(text)
                    && !text.contains("Unable to create QP")
                    && !text.contains("Couldn't create IB resources")
                    && text.contains("local address: LID"),
                "{prog} {side} did not create its QPs on the sim\n--- client ---\n{ctext}\n--- server ---\n{stext}"
            );
        }
        assert!(
            signal(&client.status).is_none() || client.status.code() == Some(124),
            "{prog} client crashed\n{ctext}"
        );
    }
}

#[test]
fn fi_info_lists_the_sims_devices_through_the_verbs_provider() {
    let mut cmd = on_sim("fi_info");
    cmd.args(["-p", "verbs"]);
    let out = run(&mut cmd);
    assert_loaded("fi_info", &cmd, &out);
    let text = stdout(&out);
    assert!(
        out.status.success() && text.contains("domain: mlx5_0") && text.contains("domain: mlx5_1"),
        "{}",
        describe(&cmd, &out)
    );
}

#[test]
fn ucx_loads_its_ib_transport_on_the_sim() {
    // UCX dlopen()s libuct_ib (linked to libmlx5) and says why at debug level
    // when that fails. It then lists only devices with a character device at
    // /dev/infiniband/uverbsN, which the sim does not fake, so no IB memory
    // domain is expected; the point is that the module loads.
    let mut cmd = on_sim("ucx_info");
    cmd.arg("-d").env("UCX_LOG_LEVEL", "debug");
    let out = run(&mut cmd);
    assert_loaded("ucx_info", &cmd, &out);
    let all = format!("{}{}", stdout_lossy(&out), stderr(&out));
    assert!(
        out.status.success() && !all.contains("libuct_ib.so.0', mode=0x1) failed"),
        "{}",
        describe(&cmd, &out)
    );
}

#[test]
fn pyverbs_and_its_provider_modules_load_on_the_sim() {
    // mlx5dv refuses a device that is not its own (pyverbs checks
    // mlx5dv_is_supported); efadv opens the context through plain verbs and
    // its query reaches libefa, which answers EOPNOTSUPP (95).
    let script = "import pyverbs.device as d\n\
                  import pyverbs.providers.mlx5.mlx5dv as m\n\
                  import pyverbs.providers.efa.efadv as e\n\
                  from pyverbs.pyverbs_error import PyverbsError\n\
                  devs = d.get_device_list()\n\
                  print(sorted(x.name.decode() for x in devs))\n\
                  with d.Context(name='mlx5_0') as c:\n    \
                      print('ports', c.query_device().phys_port_cnt)\n\
                  try:\n    \
                      m.Mlx5Context(m.Mlx5DVContextAttr(), name='mlx5_0')\n    \
                      print('mlx5dv opened a sim device')\n\
                  except PyverbsError as x:\n    \
                      print('mlx5dv refused:', x)\n\
                  try:\n    \
                      e.EfaContext(name='mlx5_1').query_efa_device()\n    \
                      print('efadv answered')\n\
                  except PyverbsError as x:\n    \
                      print('efadv refused:', x)\n";
    let mut cmd = on_sim("/usr/bin/python3");
    cmd.args(["-c", script]);
    let out = run(&mut cmd);
    assert_loaded("pyverbs", &cmd, &out);
    let text = stdout(&out);
    assert!(
        out.status.success()
            && text.contains("['mlx5_0', 'mlx5_1']")
            && text.contains("ports 1")
            && text.contains("mlx5dv refused: This is not an MLX5 device")
            && text.contains("efadv refused: ")
            && text.contains("Errno: 95"),
        "{}",
        describe(&cmd, &out)
    );
}

// ---- (c) the extended post and poll API -----------------------------------

#[test]
fn c_create_qp_ex_wr_api_and_cq_ex_poll_cursor() {
    let bin = c_program("sim_ext_post", &[]);
    run_c(&bin, None);
}

#[test]
fn c_extended_post_and_poll_from_threads() {
    // Four threads post batches to one QP while two drain its CQ with the
    // cursor: each work request completes once, every write lands.
    let bin = c_program("sim_ext_threads", &[]);
    run_c(&bin, None);
}

#[test]
fn valgrind_extended_post_and_poll_clean() {
    let bin = c_program("sim_ext_post", &[]);
    let mut cmd = on_sim("valgrind");
    cmd.args(["-q", "--error-exitcode=99", "--leak-check=full"])
        .arg(&bin);
    let out = run(&mut cmd);
    assert!(
        out.status.success() && stdout(&out).contains("checks passed"),
        "{}",
        describe(&cmd, &out)
    );
}

// ---- (d) ibv_query_device_ex ----------------------------------------------

#[test]
fn c_query_device_ex_matches_query_device_and_what_the_device_does() {
    let bin = c_program("sim_ext_device", &[]);
    run_c(&bin, None);
    run_c(&bin, Some("rxe0,siw0,mlx4_0,irdma0"));
}
