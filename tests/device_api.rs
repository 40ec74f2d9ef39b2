//! The shim's device API at its edges: bad input, the generated header, the
//! exported symbol versions.
//!
//! Runs in the test bed (`common::Testbed`) with the shim preloaded over the
//! real rdma-core 44, or linked alone. Needs root, gcc, libibverbs-dev,
//! binutils and a built shim (`make test`).

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The seven device calls the shim exports itself.
const DEVICE_API: [&str; 7] = [
    "ibv_get_device_list",
    "ibv_free_device_list",
    "ibv_get_device_name",
    "ibv_get_device_guid",
    "ibv_get_device_index",
    "ibv_open_device",
    "ibv_close_device",
];

fn bad_input_prog() -> PathBuf {
    cc("bad_input", &[&c_test_source("bad_input")], &["-libverbs"])
}

/// rdma-core 44 defines no answer for a NULL device, context or list: it
/// dereferences the pointer (a crash; `ibv_get_device_name(NULL)` happens to
/// return the garbage pointer 0x18). So the shim's contract applies to all
/// six: NULL or -1 (0 for the GUID, which is rdma-core's own failure value)
/// with errno EINVAL, and a warning in the log.
#[test]
fn null_arguments_do_not_crash_and_give_einval_with_a_warning() {
    let cases: [(&str, &str, Option<&str>); 6] = [
        // (bad_input CASE, function, expected "-> RESULT errno=E" or None for void)
        ("name", "ibv_get_device_name", Some("NULL errno=EINVAL")),
        (
            "guid",
            "ibv_get_device_guid",
            Some("0000000000000000 errno=EINVAL"),
        ),
        ("index", "ibv_get_device_index", Some("-1 errno=EINVAL")),
        ("open", "ibv_open_device", Some("NULL errno=EINVAL")),
        ("close", "ibv_close_device", Some("-1 errno=EINVAL")),
        ("free", "ibv_free_device_list", None),
    ];
    let tb = Testbed::new();
    let prog = bad_input_prog();
    let mut failures = Vec::new();
    for (case, function, expected) in cases {
        let logs = TempDir::new("log");
        let mut cmd = tb.command(&prog);
        cmd.arg(case).env("IBV_SHIM_LOG_FILE", logs.join("log.%p"));
        preload_shim(&mut cmd);
        let output = run_unchecked(&mut cmd, TIMEOUT);
        if let Some(sig) = signal(&output.status) {
            failures.push(format!(
                "{function}(NULL) crashed (signal {sig})\n{}",
                describe(&cmd, &output)
            ));
            continue;
        }
        let text = stdout(&output);
        let got = text
            .strip_prefix(&format!("{function}(NULL) -> "))
            .map(str::trim_end);
        let ok = match (expected, got) {
            (Some(want), Some(got)) => want == got,
            (None, Some(got)) => got.starts_with("void errno="),
            (_, None) => false,
        };
        if !ok || !output.status.success() {
            failures.push(format!(
                "{function}(NULL): expected \"{function}(NULL) -> {}\"\n{}",
                expected.unwrap_or("void errno=..."),
                describe(&cmd, &output)
            ));
        }
        let log = read_logs(logs.path());
        if !log
            .iter()
            .any(|l| l.level == "WARN" && l.message.contains(function))
        {
            failures.push(format!(
                "{function}(NULL): no WARN line naming {function} in the log:\n{}",
                show_log(&log)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn get_device_list_accepts_a_null_count() {
    let tb = Testbed::new();
    let prog = bad_input_prog();
    let mut plain = tb.command(&prog);
    plain.arg("list_null_num");
    let plain_out = run(&mut plain);
    for dev in tb.devices() {
        assert!(
            stdout(&plain_out).contains(dev.name),
            "the test bed is broken: ibv_get_device_list(NULL) on the real library did not list {}\n{}",
            dev.name,
            describe(&plain, &plain_out)
        );
    }
    let logs = TempDir::new("log");
    let mut shim = tb.command(&prog);
    shim.arg("list_null_num")
        .env("IBV_SHIM_LOG_FILE", logs.join("log.%p"));
    preload_shim(&mut shim);
    let shim_out = run(&mut shim);
    assert_same_output(
        "ibv_get_device_list(NULL) without, then with the shim",
        (&plain, &plain_out),
        (&shim, &shim_out),
    );
}

/// `include/infiniband/verbs.h`, the shim's generated header.
fn shim_header() -> PathBuf {
    let header = repo_dir().join("include/infiniband/verbs.h");
    assert!(
        header.is_file(),
        "{} is missing: without it gcc would silently use /usr/include's",
        header.display()
    );
    header
}

/// The `NEEDED` entries of an ELF file.
fn needed(elf: &Path) -> Vec<String> {
    let mut cmd = Command::new("objdump");
    cmd.arg("-p").arg(elf);
    let output = run(&mut cmd);
    assert!(output.status.success(), "{}", describe(&cmd, &output));
    stdout(&output)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
        .map(|s| s.trim().to_string())
        .collect()
}

#[test]
fn seed_programs_compile_unchanged_against_the_shim_header_and_run_on_the_shim_alone() {
    let header = shim_header();
    let include = repo_dir().join("include");
    let include_arg = format!("-I{}", include.display());
    let target = target_dir();
    let lib_arg = format!("-L{}", target.display());
    let _ = shim_so();
    let tb = Testbed::new();

    for name in ["list_devices", "open_close", "device_guids"] {
        let src = c_example(name);

        // Every infiniband/ header the program sees must be the shim's.
        let mut deps = Command::new("gcc");
        deps.arg(&include_arg).arg("-M").arg(&src);
        let deps_out = run(&mut deps);
        assert!(deps_out.status.success(), "{}", describe(&deps, &deps_out));
        let deps_text = stdout(&deps_out);
        assert!(
            deps_text.contains(&*header.to_string_lossy())
                && !deps_text.contains("/usr/include/infiniband"),
            "{name}.c must compile against {} alone, not /usr/include/infiniband:\n{deps_text}",
            header.display()
        );

        let real = cc(&format!("{name}-real"), &[&src], &["-libverbs"]);
        let shim = cc(
            &format!("{name}-shimheader"),
            &[&src],
            &[&include_arg, &lib_arg, "-libv_shim"],
        );
        let libs = needed(&shim);
        assert!(
            libs.iter().any(|l| l == "libibv_shim.so")
                && !libs.iter().any(|l| l.starts_with("libibverbs")),
            "{name} against the shim header must need libibv_shim.so and not libibverbs: {libs:?}"
        );

        let mut plain = tb.command(&real);
        let plain_out = run(&mut plain);
        // open_close prints names only as it opens them (it stops at the first).
        let listed = |d: &FakeDevice| stdout(&plain_out).contains(d.name);
        assert!(
            name == "open_close" || tb.devices().iter().all(listed),
            "the test bed is broken: {name} on the real library\n{}",
            describe(&plain, &plain_out)
        );
        let logs = TempDir::new("log");
        let mut alone = tb.command(&shim);
        alone
            .env("LD_LIBRARY_PATH", &target)
            .env("IBV_SHIM_LOG_FILE", logs.join("log.%p"));
        let alone_out = run(&mut alone);
        assert_same_output(
            &format!("{name}: real header + real library, then shim header + shim alone"),
            (&plain, &plain_out),
            (&alone, &alone_out),
        );
    }
}

/// name -> default version of every `ibv_*` function the real library
/// defines.
fn real_default_versions() -> BTreeMap<String, String> {
    dynamic_symbols(&real_libibverbs())
        .into_iter()
        .filter(|s| !s.undefined && s.default && s.name.starts_with("ibv_"))
        .map(|s| (s.name, s.version))
        .collect()
}

#[test]
fn dlvsym_finds_the_device_api_in_the_shim_at_the_real_versions() {
    let real = real_default_versions();
    let mut wanted: Vec<String> = DEVICE_API
        .iter()
        .map(|f| {
            let v = real
                .get(*f)
                .unwrap_or_else(|| panic!("the real libibverbs has no default {f}"));
            format!("{f}@{v}")
        })
        .collect();
    // The issue names these two; keep them even if the real library changed.
    for pinned in [
        "ibv_get_device_list@IBVERBS_1.1",
        "ibv_get_device_index@IBVERBS_1.9",
    ] {
        if !wanted.iter().any(|w| w == pinned) {
            wanted.push(pinned.to_string());
        }
    }

    let shim = shim_so();
    let shim_real = shim.canonicalize().unwrap();
    let prog = cc("dlvsym", &[&c_test_source("dlvsym")], &["-ldl"]);
    let tb = Testbed::new();
    let mut cmd = tb.command(&prog);
    cmd.arg(&shim).args(&wanted);
    let output = run(&mut cmd);
    let text = stdout(&output);
    assert!(
        output.status.success(),
        "dlvsym on the shim failed\n{}",
        describe(&cmd, &output)
    );
    for w in &wanted {
        let file = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{w}: ")))
            .unwrap_or_else(|| panic!("no answer for {w}\n{}", describe(&cmd, &output)));
        assert_eq!(
            Path::new(file).canonicalize().ok().as_ref(),
            Some(&shim_real),
            "dlvsym({w}) must resolve in the shim itself, not in {file}"
        );
    }
    // Called through the dlvsym pointer, the shim's list reaches the real one.
    assert!(
        text.lines()
            .any(|l| l == format!("call: {} device(s)", tb.devices().len())),
        "ibv_get_device_list through dlvsym must list the test bed's {} devices\n{}",
        tb.devices().len(),
        describe(&cmd, &output)
    );
}

#[test]
fn every_ibv_export_is_versioned_like_libibverbs_and_none_is_undefined() {
    let shim = shim_so();
    let symbols = dynamic_symbols(&shim);
    let real: Vec<(String, String)> = dynamic_symbols(&real_libibverbs())
        .into_iter()
        .filter(|s| !s.undefined)
        .map(|s| (s.name, s.version))
        .collect();
    let real_default = real_default_versions();
    let mut problems = Vec::new();
    for s in symbols.iter().filter(|s| s.name.starts_with("ibv_")) {
        if s.undefined {
            problems.push(format!(
                "undefined {} (the shim would call itself by name): {}",
                s.name, s.line
            ));
        } else if s.version.is_empty() || s.version == "Base" {
            problems.push(format!("{} has no version: {}", s.name, s.line));
        } else if !real.iter().any(|(n, v)| *n == s.name && *v == s.version) {
            problems.push(format!(
                "{}@{} does not exist in the real libibverbs: {}",
                s.name, s.version, s.line
            ));
        }
    }
    for f in DEVICE_API {
        let want = &real_default[f];
        if !symbols
            .iter()
            .any(|s| s.name == f && !s.undefined && s.default && s.version == *want)
        {
            problems.push(format!("{f}@@{want} is not exported"));
        }
    }
    assert!(
        problems.is_empty(),
        "objdump -T {}:\n{}",
        shim.display(),
        problems.join("\n")
    );
}
