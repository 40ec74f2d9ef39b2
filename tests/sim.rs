//! Tests of `ibv-sim`, the software `libibverbs.so.1`.
//!
//! The sim is `target/<profile>/libibv_sim.so` (built by `make` or
//! `cargo build -p ibv-sim`); each test installs it as
//! `target/sim/libibverbs.so.1` (when missing or older) and runs the real
//! rdma-core tools, and C programs compiled against the real
//! `/usr/include/infiniband/verbs.h` and linked with the real `-libverbs`,
//! with `LD_LIBRARY_PATH` pointing at the sim.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `target/` and `target/<profile>/`, from this test binary's own path
/// (`target/<profile>/deps/sim-<hash>`).
fn dirs() -> (PathBuf, PathBuf) {
    let exe = std::env::current_exe().expect("current_exe");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf();
    let target = profile.parent().expect("target").to_path_buf();
    (target, profile)
}

/// The directory holding the sim as `libibverbs.so.1`.
fn sim_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let (target, profile) = dirs();
        let built = profile.join("libibv_sim.so");
        assert!(
            built.exists(),
            "{} is missing: build the sim first (`make`, or `cargo build -p ibv-sim` with this profile)",
            built.display()
        );
        let dir = target.join("sim");
        std::fs::create_dir_all(&dir).expect("create target/sim");
        let installed = dir.join("libibverbs.so.1");
        let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        if mtime(&installed).is_none() || mtime(&installed) < mtime(&built) {
            let tmp = dir.join(format!(".libibverbs.so.1.{}", std::process::id()));
            std::fs::copy(&built, &tmp).expect("copy the sim");
            std::fs::rename(&tmp, &installed).expect("install the sim");
        }
        dir
    })
}

/// Runs `cmd` to its end, killed as a hang after `common::TIMEOUT` (a
/// program that waits forever fails its test instead of stopping the
/// suite); a death by signal is returned for the caller to judge.
fn run(cmd: &mut Command) -> Output {
    common::run_unchecked(cmd, common::TIMEOUT)
}

/// Runs `prog args` on the sim with `IBV_SIM_DEVICES` set (None: unset).
fn on_sim(prog: &Path, args: &[&str], devices: Option<&str>) -> Output {
    let mut c = Command::new(prog);
    c.args(args).env("LD_LIBRARY_PATH", sim_dir());
    match devices {
        Some(d) => c.env("IBV_SIM_DEVICES", d),
        None => c.env_remove("IBV_SIM_DEVICES"),
    };
    run(&mut c)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn assert_ok(what: &str, o: &Output) -> String {
    let (out, err) = text(o);
    assert!(
        o.status.success(),
        "{what} failed ({}):\nstdout:\n{out}\nstderr:\n{err}",
        o.status
    );
    out
}

/// Compiles `tests/c/sim/NAME.c` against the real verbs.h and libibverbs.
fn c_program(name: &str) -> PathBuf {
    let (_, profile) = dirs();
    let out_dir = profile.join("sim-tests");
    std::fs::create_dir_all(&out_dir).expect("create sim-tests");
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c/sim")
        .join(format!("{name}.c"));
    let bin = out_dir.join(name);
    let o = run(Command::new("gcc")
        .args(["-Wall", "-Wextra", "-Werror", "-g", "-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .args(["-libverbs", "-lpthread"]));
    assert_ok(&format!("gcc {name}.c"), &o);
    bin
}

fn run_c(name: &str) -> String {
    let bin = c_program(name);
    let out = assert_ok(name, &on_sim(&bin, &[], None));
    assert!(out.contains("checks passed"), "{name} printed: {out}");
    out
}

/// `(version, name)` of every defined dynamic symbol of `lib`, as objdump -T prints them.
fn dynamic_symbols(lib: &Path) -> BTreeSet<(String, String)> {
    let o = run(Command::new("objdump").arg("-T").arg(lib));
    let out = assert_ok("objdump -T", &o);
    out.lines()
        .filter(|l| l.contains(" DF ") && !l.contains("*UND*"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 2).then(|| (f[f.len() - 2].to_string(), f[f.len() - 1].to_string()))
        })
        .collect()
}

/// `(version, name)` of every libibverbs symbol a binary imports.
fn imports(bin: &Path) -> BTreeSet<(String, String)> {
    let o = run(Command::new("objdump").arg("-T").arg(bin));
    let out = assert_ok("objdump -T", &o);
    out.lines()
        .filter(|l| l.contains("*UND*") && l.contains("IBVERBS"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 2).then(|| {
                let v = f[f.len() - 2].trim_start_matches('(').trim_end_matches(')');
                (v.to_string(), f[f.len() - 1].to_string())
            })
        })
        .collect()
}

/// `(version as objdump shows it, name)` of every public function of rdma-core 44,
/// from the committed ABI snapshot (compat versions in parentheses).
fn rdma_core_44_public() -> BTreeSet<(String, String)> {
    let snap = Path::new(env!("CARGO_MANIFEST_DIR")).join("abi/libibverbs.so.1.abi");
    let text = std::fs::read_to_string(&snap).expect("abi snapshot");
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[0] == "func" && !f[2].contains("PRIVATE")).then(|| {
                let v = if f[3] == "default" {
                    f[2].to_string()
                } else {
                    format!("({})", f[2])
                };
                (v, f[1].to_string())
            })
        })
        .collect()
}

#[test]
fn sim_exports_every_rdma_core_44_symbol_at_its_version() {
    let lib = sim_dir().join("libibverbs.so.1");
    let have = dynamic_symbols(&lib);
    let want = rdma_core_44_public();
    assert!(
        want.len() > 100,
        "snapshot has {} public functions",
        want.len()
    );
    let missing: Vec<_> = want.difference(&have).collect();
    assert!(missing.is_empty(), "missing from the sim: {missing:?}");
    let unversioned: Vec<_> = have.iter().filter(|(v, _)| v == "Base").collect();
    assert!(
        unversioned.is_empty(),
        "unversioned exports: {unversioned:?}"
    );
    assert!(have.contains(&("IBVERBS_PRIVATE_34".into(), "ibv_query_gid_type".into())));
    let o = run(Command::new("readelf").arg("-d").arg(&lib));
    assert!(assert_ok("readelf", &o).contains("Library soname: [libibverbs.so.1]"));
}

#[test]
fn sim_provides_every_import_of_the_ibverbs_utils() {
    let have: BTreeSet<(String, String)> = dynamic_symbols(&sim_dir().join("libibverbs.so.1"))
        .into_iter()
        .map(|(v, n)| {
            (
                v.trim_start_matches('(').trim_end_matches(')').to_string(),
                n,
            )
        })
        .collect();
    let mut checked = 0;
    for e in std::fs::read_dir("/usr/bin").expect("/usr/bin").flatten() {
        let p = e.path();
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("ibv_"))
        {
            for imp in imports(&p) {
                assert!(
                    have.contains(&imp),
                    "{} imports {imp:?}, which the sim lacks",
                    p.display()
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 20,
        "found only {checked} imports in /usr/bin/ibv_*"
    );
}

#[test]
fn ibv_devices_lists_the_simulated_devices() {
    let out = assert_ok("ibv_devices", &on_sim(Path::new("ibv_devices"), &[], None));
    assert!(out.contains("mlx5_0") && out.contains("mlx5_1"), "{out}");
    assert!(out.contains("0c42a10300123456"), "{out}");
    let out = assert_ok(
        "ibv_devices",
        &on_sim(
            Path::new("ibv_devices"),
            &[],
            Some("rxe0,mlx4_0=0002:c903:00ab:cdef"),
        ),
    );
    assert!(out.contains("rxe0") && out.contains("mlx4_0"), "{out}");
    assert!(out.contains("0002c90300abcdef"), "{out}");
    assert!(!out.contains("mlx5_0"), "{out}");
}

#[test]
fn ibv_devinfo_prints_devices_and_ports() {
    let out = assert_ok("ibv_devinfo", &on_sim(Path::new("ibv_devinfo"), &[], None));
    for want in [
        "hca_id:\tmlx5_0",
        "hca_id:\tmlx5_1",
        "transport:\t\t\tInfiniBand (0)",
        "node_guid:\t\t\t0c42:a103:0012:3456",
        "vendor_id:\t\t\t0x02c9",
        "board_id:\t\t\tMT_0000000222",
        "state:\t\t\tPORT_ACTIVE (4)",
        "link_layer:\t\tInfiniBand",
        "port_lid:\t\t2",
    ] {
        assert!(out.contains(want), "ibv_devinfo lacks {want:?}:\n{out}");
    }
}

#[test]
fn ibv_devinfo_verbose_prints_attributes_and_gids() {
    let o = on_sim(Path::new("ibv_devinfo"), &["-v"], Some("mlx5_0,rxe0,siw0"));
    let out = assert_ok("ibv_devinfo -v", &o);
    for want in [
        "max_qp:\t\t\t\t262144",
        "max_cqe:\t\t\t4194303",
        "atomic_cap:\t\t\tATOMIC_HCA (1)",
        "num_comp_vectors:\t\t8",
        "GID[  0]:\t\tfe80:0000:0000:0000:0c42:a103:0012:3456",
        "hca_id:\trxe0",
        "link_layer:\t\tEthernet",
        "RoCE v2",
        "::ffff:10.2.1.1",
        "hca_id:\tsiw0",
        "transport:\t\t\tiWARP (1)",
        "vendor_id:\t\t\t0x626d74",
    ] {
        assert!(out.contains(want), "ibv_devinfo -v lacks {want:?}:\n{out}");
    }
}

#[test]
fn malformed_device_list_is_an_error_not_a_crash() {
    let o = on_sim(Path::new("ibv_devices"), &[], Some("mlx5_0,,bogus"));
    let (_out, err) = text(&o);
    assert!(err.contains("IBV_SIM_DEVICES"), "stderr: {err}");
    let bin = c_program("sim_config");
    for bad in [
        "bogus0",
        "mlx5_0,,mlx5_1",
        "mlx5_0=notaguid",
        "mlx5_0,mlx5_0",
    ] {
        let o = on_sim(&bin, &["malformed"], Some(bad));
        let (out, err) = text(&o);
        assert!(o.status.success(), "{bad:?}: {out}{err}");
        assert!(err.contains("invalid IBV_SIM_DEVICES"), "{bad:?}: {err}");
    }
    let o = on_sim(
        &bin,
        &["families"],
        Some("mlx5_0=0002:c903:0001:0002,rxe0,siw0"),
    );
    assert_ok("sim_config families", &o);
}

#[test]
fn c_every_simulated_verb() {
    run_c("sim_verbs");
}

#[test]
fn c_bad_arguments_ebusy_ordering_and_orphans() {
    run_c("sim_errors");
}

#[test]
fn c_fork_init_after_registration_is_einval() {
    run_c("sim_fork");
}

#[test]
fn c_qp_state_machine() {
    run_c("sim_qp_state");
}

#[test]
fn c_loopback_data_path() {
    run_c("sim_loopback");
}

#[test]
fn c_threads_on_one_and_two_contexts() {
    run_c("sim_threads");
}

#[test]
fn valgrind_one_of_everything_leaks_nothing() {
    let bin = c_program("sim_everything");
    let mut c = Command::new("valgrind");
    c.args(["-q", "--leak-check=full", "--error-exitcode=1"])
        .arg(&bin)
        .env("LD_LIBRARY_PATH", sim_dir())
        .env_remove("IBV_SIM_DEVICES");
    let o = run(&mut c);
    let out = assert_ok("valgrind sim_everything", &o);
    assert!(out.contains("checks passed"), "{out}");
    let (_, err) = text(&o);
    assert!(!err.contains("lost in loss record"), "{err}");
}
