//! Verbs as their declarations (`crates/trace-format/src/decl.rs`) make
//! them: a C program on ibv-sim's device calls a verb under the shim with
//! the debug log on, and the call's line is the one the table describes
//! (its recorded arguments, shown as declared), with the real library's
//! result and errno; the binary trace decodes to the same text.

mod common;

use common::*;
use std::process::Command;

/// Runs `body` (C statements; `ctx` is an open context of the sim's first
/// device, `port` 1) under the shim with the debug log and a trace;
/// returns the program's output, the log and the decoded trace.
fn on_sim(tag: &str, body: &str) -> (String, String, String) {
    let dir = TempDir::new(tag);
    let text = format!(
        r#"#include <stdio.h>
#include <errno.h>
#include <endian.h>
#include <infiniband/verbs.h>
int main(void) {{
    struct ibv_device **list = ibv_get_device_list(NULL);
    if (!list || !list[0]) {{ printf("no device\n"); return 2; }}
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (!ctx) {{ printf("no context\n"); return 2; }}
    const int port = 1;
    (void)port;
    {body}
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return 0;
}}
"#
    );
    let prog = cc_text(&dir, tag, &text, &["-libverbs"]);
    let fabric = fabric_name("declared", tag);
    let _guard = FabricGuard(fabric.clone());
    let mut cmd = Command::new(prog);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("LD_PRELOAD", shim_so())
        .env("IBV_SIM_FABRIC", &fabric)
        .env("IBV_SHIM_TRACE", dir.join("t.%p"))
        .envs(debug_log_env(dir.path()));
    let out = run(&mut cmd);
    let log = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("log."))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    let traces: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("t."))
        .collect();
    let launcher = target_dir().join("ibv-shim");
    assert!(
        launcher.is_file(),
        "{}: run `make build`",
        launcher.display()
    );
    let decoded = run(Command::new(launcher).arg("trace").args(&traces));
    (stdout(&out), log, stdout(&decoded))
}

/// The call's text in the log and in the trace: the same, and as given.
fn logged_and_traced(log: &str, trace: &str, call: &str) {
    the_line_with(log, call, &[]);
    assert!(
        trace.lines().any(|l| l.contains(call)),
        "no {call:?} in the trace:\n{trace}"
    );
}

/// The name of the errno the program printed last (`errno=N`).
fn errno_of(out: &str) -> &'static str {
    let n: i32 = out
        .rsplit("errno=")
        .next()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no errno in {out:?}"));
    match n {
        libc::EINVAL => "EINVAL",
        libc::ENOENT => "ENOENT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => panic!("errno {n} in {out:?}"),
    }
}

#[test]
fn a_declared_export_records_its_declared_words() {
    let (out, log, trace) = on_sim(
        "query_pkey",
        r#"uint16_t pkey = 0;
    int rc = ibv_query_pkey(ctx, port, 0, &pkey);
    printf("rc=%d pkey=%#x\n", rc, be16toh(pkey));
    rc = ibv_query_pkey(ctx, 9, 0, &pkey);
    printf("rc=%d errno=%d\n", rc, errno);"#,
    );
    assert!(out.contains("rc=0 pkey=0xffff\n"), "{out}");
    // A port the device does not have: the real library's failure, as is.
    let errno = errno_of(&out);
    logged_and_traced(&log, &trace, ", port_num=1, index=0, pkey=0x");
    let bad = the_line_with(&log, ", port_num=9, index=0, pkey=0x", &[]);
    assert!(bad.contains(&format!(") = -1 errno={errno} ")), "{bad}");
}

/// Forwarded by trampoline before its declaration: now logged and traced
/// with its arguments, its result as the real library gave it.
#[test]
fn a_verb_declared_forward_is_exported_logged_and_traced() {
    let (out, log, trace) = on_sim(
        "pkey_index",
        r#"int i = ibv_get_pkey_index(ctx, port, htobe16(0xffff));
    printf("index=%d\n", i);
    i = ibv_get_pkey_index(ctx, port, htobe16(0x1234));
    printf("index=%d errno=%d\n", i, errno);"#,
    );
    assert!(out.contains("index=0\n"), "{out}");
    assert!(out.contains("index=-1 errno="), "{out}");
    let call = "ibv_get_pkey_index(context=0x";
    logged_and_traced(&log, &trace, ", port_num=1, pkey=0xffff) = 0 ");
    let missing = the_line_with(&log, ", port_num=1, pkey=0x3412) = -1", &[call]);
    assert!(
        missing.contains(&format!(" errno={} ", errno_of(&out))),
        "{missing}"
    );
    // Exported at its rdma-core version, written in Rust now.
    let syms = dynamic_symbols(&shim_so());
    assert!(
        syms.iter()
            .any(|s| s.name == "ibv_get_pkey_index" && s.version == "IBVERBS_1.5" && s.default),
        "{syms:?}"
    );
}
