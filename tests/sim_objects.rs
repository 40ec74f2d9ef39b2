//! ibv-sim's objects that only the context's tables make, each created, used and destroyed by a C
//! program compiled against the real `/usr/include/infiniband/verbs.h`,
//! reaching them the way every program does: through the inline verbs,
//! which jump through the context's function tables. Each program checks
//! the objects' behaviour and the errno of each misuse, and prints
//! "checks passed".
//!
//! The real `ibv_xsrq_pingpong` (ibverbs-utils) runs between processes on
//! the sim's fabric: XRC domains, XRC SRQs, XRC send and receive QPs.
//!
//! pyverbs (python3-pyverbs) makes the same objects through its own
//! Cython wrappers of the inline verbs.
//!
//! Needs gcc, libibverbs-dev, ibverbs-utils, python3-pyverbs and a built
//! sim (`make test`).

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Compiles `tests/c/objects/NAME.c` (with `tests/c/sim/check.h` and the
/// set-up headers of `tests/c/common`).
fn c_program(name: &str) -> PathBuf {
    let dir = repo_dir().join("tests/c/objects");
    let inc_sim = format!("-I{}", repo_dir().join("tests/c/sim").display());
    let inc_common = format!("-I{}", repo_dir().join("tests/c/common").display());
    let src = dir.join(format!("{name}.c"));
    cc(
        name,
        &[src.as_path()],
        &[&inc_sim, &inc_common, "-libverbs"],
    )
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
    run_c_with(name, &[]);
}

/// [`run_c`] with more environment.
fn run_c_with(name: &str, env: &[(&str, &str)]) {
    let bin = c_program(name);
    let mut cmd = on_sim(&bin);
    cmd.envs(env.iter().copied());
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

/// Memory windows between two processes: the responder's progress engine
/// checks window rkeys (range, access, local and remote invalidation).
#[test]
fn memory_windows_between_processes() {
    let fab = fabric_name("objects", "mw");
    let _g = FabricGuard(fab.clone());
    run_c_with(
        "obj_mw_remote",
        &[("IBV_SIM_FABRIC", &fab), ("IBV_SIM_DEVICES", "mlx5_0")],
    );
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

/// XRC in one process: XRC SRQs and QPs with their errno, ibv_get_srq_num,
/// ibv_open_qp (the QP outlives its first handle), a send landing in the
/// SRQ it names, and a wrong SRQ number.
#[test]
fn xrc_srqs_and_qps() {
    run_c("obj_xrc");
}

/// Device memory copies in whole 32-bit words (unaligned offset or length:
/// `EINVAL`, after the range's `EFAULT`) and empty MRs on device memory, as
/// on mlx5 (pyverbs' `test_dm_write_bad_flow`, `test_dm_bad_access`,
/// `test_create_dm_mr`).
#[test]
fn device_memory_words_and_empty_mrs() {
    run_c("obj_dm_words");
}

/// XRC RDMA WRITE (with immediate), READ and atomics, checked against the
/// named XRC SRQ's PD (pyverbs' `test_xrc_atomic_*`).
#[test]
fn xrc_rdma_and_atomics() {
    run_c("obj_xrc_rdma");
}

/// An extended CQ on a parent domain, held while the CQ lives (pyverbs'
/// `test_mem_align_srq_excq_rc_traffic`).
#[test]
fn extended_cq_on_a_parent_domain() {
    run_c("obj_cq_parent");
}

/// On-demand paging: reported (not implicit), ODP MRs in the data path,
/// `ibv_advise_mr`'s checks (pyverbs' `test_odp`).
#[test]
fn on_demand_paging() {
    run_c("obj_odp");
}

/// pyverbs, a third-party user of the inline verbs: memory windows of both
/// types, device memory with copies and an MR on it, a parent domain with
/// an MR, an XRC domain with an XRC SRQ and its number.
#[test]
fn pyverbs_makes_the_objects_on_the_sim() {
    let script = "import os\n\
        import pyverbs.device as d, pyverbs.pd as pdm, pyverbs.mr as mrm\n\
        import pyverbs.xrcd as xm, pyverbs.srq as sm, pyverbs.cq as cqm\n\
        import pyverbs.enums as e\n\
        ctx = d.Context(name='mlx5_0')\n\
        pd = pdm.PD(ctx)\n\
        cq = cqm.CQ(ctx, 8)\n\
        mw1 = mrm.MW(pd, e.IBV_MW_TYPE_1)\n\
        mw2 = mrm.MW(pd, e.IBV_MW_TYPE_2)\n\
        print('mw', mw1.type, mw2.type, mw1.rkey != mw2.rkey)\n\
        dm = d.DM(ctx, d.AllocDmAttr(length=4096))\n\
        dm.copy_to_dm(8, b'hello dm', 8)\n\
        print('dm', dm.copy_from_dm(8, 8))\n\
        dmmr = mrm.DMMR(pd, 1024, e.IBV_ACCESS_ZERO_BASED | e.IBV_ACCESS_LOCAL_WRITE, dm, 0)\n\
        print('dm mr', dmmr.lkey > 0)\n\
        dmmr.close(); dm.close()\n\
        ppd = pdm.ParentDomain(ctx, attr=pdm.ParentDomainInitAttr(pd=pd))\n\
        mr = mrm.MR(ppd, 4096, e.IBV_ACCESS_LOCAL_WRITE)\n\
        print('parent domain mr', mr.lkey > 0)\n\
        mr.close(); ppd.close()\n\
        xrcd = xm.XRCD(ctx, xm.XRCDInitAttr(e.IBV_XRCD_INIT_ATTR_FD | e.IBV_XRCD_INIT_ATTR_OFLAGS, os.O_CREAT, -1))\n\
        sa = sm.SrqInitAttrEx(max_wr=4, max_sge=1)\n\
        sa.srq_type = e.IBV_SRQT_XRC\n\
        sa.pd = pd\n\
        sa.xrcd = xrcd\n\
        sa.cq = cq\n\
        sa.comp_mask = e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD | e.IBV_SRQ_INIT_ATTR_CQ | e.IBV_SRQ_INIT_ATTR_XRCD\n\
        srq = sm.SRQ(ctx, sa)\n\
        print('xrc srq num', srq.get_srq_num() > 0)\n\
        srq.close(); xrcd.close(); mw1.close(); mw2.close()\n\
        cq.close(); pd.close(); ctx.close()\n\
        print('pyverbs objects done')\n";
    let mut cmd = on_sim("/usr/bin/python3");
    cmd.env("IBV_SIM_DEVICES", "mlx5_0").args(["-c", script]);
    let out = run(&mut cmd);
    let text = stdout(&out);
    assert!(
        out.status.success()
            && text.contains("mw 1 2 True")
            && text.contains("dm b'hello dm'")
            && text.contains("dm mr True")
            && text.contains("parent domain mr True")
            && text.contains("xrc srq num True")
            && text.contains("pyverbs objects done"),
        "{}",
        describe(&cmd, &out)
    );
}
