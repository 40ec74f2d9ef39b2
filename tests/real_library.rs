//! The real libibverbs behind the shim: finding and loading it, and what
//! the forwarded calls answer without one.
//!
//! - The first call, the one that loads the real library, leaves errno as
//!   the real call left it (a candidate path that did not exist used to
//!   change it).
//! - With no real library to forward to, the `*_str` helpers say "unknown".
//!
//! Needs gcc, libibverbs-dev and a built shim and sim (`make test`).

mod common;

use common::*;
use std::process::Command;

const ERRNO_FIRST_CALL: &str = r#"
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    (void)argc;
    errno = 0;
    if (!strcmp(argv[1], "forwarded")) {
        const char *s = ibv_wc_status_str(IBV_WC_SUCCESS);
        printf("%s errno=%d\n", s ? s : "NULL", errno);
    } else {
        int n = 0;
        struct ibv_device **l = ibv_get_device_list(&n);
        printf("%d errno=%d\n", l ? n : -1, errno);
    }
    return 0;
}
"#;

#[test]
fn the_call_that_loads_the_real_library_leaves_errno_alone() {
    let dir = TempDir::new("errno");
    let prog = cc_text(&dir, "errno", ERRNO_FIRST_CALL, &["-libverbs"]);
    // Drop-in mode: libibverbs.so.1 on the search path is the shim, so it
    // looks further along LD_LIBRARY_PATH: an empty directory (a failed
    // stat, ENOENT) before the sim.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let sim = sim_dir();
    let path = path_list(&[&dropin(&dir), &empty, &sim]);
    for (arg, want) in [
        ("forwarded", "success errno=0"),
        ("instrumented", "2 errno=0"),
    ] {
        let mut cmd = Command::new(&prog);
        cmd.arg(arg)
            .env("LD_LIBRARY_PATH", &path)
            .env("IBV_SIM_DEVICES", "mlx5_0,mlx5_1")
            .env_remove("IBV_SHIM_LIBRARY")
            .env_remove("LD_PRELOAD");
        let out = run(&mut cmd);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want,
            "{}",
            describe(&cmd, &out)
        );
    }
}

const STR_HELPERS: &str = r#"
#include <infiniband/verbs.h>
#include <stdio.h>
int main(void) {
    printf("[%s] [%s]\n", ibv_wc_status_str(IBV_WC_SUCCESS), ibv_node_type_str(IBV_NODE_CA));
    return 0;
}
"#;

/// With no real library to forward to, the forwarded `*_str` helpers answer
/// "unknown" (their callers print the result unchecked) instead of NULL.
#[test]
fn str_helpers_without_a_real_library_say_unknown() {
    let dir = TempDir::new("str");
    let prog = cc_text(&dir, "str", STR_HELPERS, &["-libverbs"]);
    let mut cmd = Command::new(&prog);
    cmd.env("LD_PRELOAD", shim_so())
        .env("IBV_SHIM_LIBRARY", dir.join("no-such-library.so"));
    let out = run(&mut cmd);
    assert_eq!(
        stdout(&out).trim(),
        "[unknown] [unknown]",
        "{}",
        describe(&cmd, &out)
    );
    assert!(
        stderr(&out).contains("cannot load the real libibverbs"),
        "{}",
        describe(&cmd, &out)
    );
}
