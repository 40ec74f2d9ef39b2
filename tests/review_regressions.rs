//! Regression tests for defects found in the pre-release review.
//!
//! - `dlclose()` of the shim (drop-in mode, a program or plugin that loads
//!   libibverbs by hand and closes it again) ran the exit report and the
//!   leak exit code in the middle of the program: the shim is now never
//!   unloaded (`-z nodelete`).
//! - The first call that loaded the real library left errno changed (a
//!   candidate path that did not exist) even when the real call succeeded.
//! - Two threads closing the same context both passed the shim's check and
//!   the close was forwarded twice.
//!
//! Needs gcc, libibverbs-dev and a built shim and sim (`make test`).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes `text` as `<dir>/<name>.c` and compiles it with `args`.
fn c_program(dir: &TempDir, name: &str, text: &str, args: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, text).unwrap_or_else(|e| panic!("write {}: {e}", src.display()));
    cc(name, &[src.as_path()], args)
}

/// A private drop-in directory: the shim as `libibverbs.so.1`.
fn dropin(dir: &TempDir) -> PathBuf {
    let d = dir.join("dropin");
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(shim_so(), d.join("libibverbs.so.1")).unwrap();
    d
}

fn sim_lib() -> PathBuf {
    sim_dir().join("libibverbs.so.1")
}

fn path_list(dirs: &[&Path]) -> std::ffi::OsString {
    std::env::join_paths(dirs).unwrap()
}

const DLCLOSE: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
    void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    void **(*list)(int *) = (void **(*)(int *))dlvsym(h, "ibv_get_device_list", "IBVERBS_1.1");
    if (!list) { printf("dlvsym failed\n"); return 1; }
    int n = 0;
    if (!list(&n)) { printf("no list\n"); return 1; }  /* leaked on purpose */
    dlclose(h);
    printf("after dlclose\n");
    fflush(stdout);
    return 0;
}
"#;

#[test]
fn dlclose_of_the_dropin_shim_does_not_run_the_exit_report_mid_program() {
    let dir = TempDir::new("review-dlclose");
    let prog = c_program(&dir, "review_dlclose", DLCLOSE, &["-ldl"]);
    let mut cmd = Command::new(&prog);
    cmd.env("LD_LIBRARY_PATH", dropin(&dir))
        .env("IBV_SHIM_LIBRARY", sim_lib())
        .env("IBV_SHIM_LEAK_EXITCODE", "23")
        .env_remove("LD_PRELOAD");
    let out = run(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("after dlclose"),
        "the program was stopped at dlclose\n{}",
        describe(&cmd, &out)
    );
    // The leaked list is still reported, at the real exit.
    assert_eq!(out.status.code(), Some(23), "{}", describe(&cmd, &out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("leak report at exit"));
}

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
    let dir = TempDir::new("review-errno");
    let prog = c_program(&dir, "review_errno", ERRNO_FIRST_CALL, &["-libverbs"]);
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

const RACING_CLOSE: &str = r#"
#include <infiniband/verbs.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
static pthread_barrier_t go;
static struct ibv_context *ctx;
static int rc[2], err[2];
static void *closer(void *arg) {
    int i = (int)(long)arg;
    pthread_barrier_wait(&go);
    rc[i] = ibv_close_device(ctx);
    err[i] = errno;
    return NULL;
}
int main(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) { printf("no devices\n"); return 1; }
    for (int round = 0; round < 300; round++) {
        ctx = ibv_open_device(list[0]);
        if (!ctx) { printf("open failed\n"); return 1; }
        pthread_t t[2];
        pthread_barrier_init(&go, NULL, 2);
        for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, closer, (void *)i);
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
        pthread_barrier_destroy(&go);
        int ok = (rc[0] == 0) + (rc[1] == 0);
        int refused = (rc[0] == -1 && err[0] == EINVAL) + (rc[1] == -1 && err[1] == EINVAL);
        if (ok != 1 || refused != 1) {
            printf("round %d: rc %d/%d errno %d/%d\n", round, rc[0], rc[1], err[0], err[1]);
            return 1;
        }
    }
    ibv_free_device_list(list);
    printf("ok\n");
    return 0;
}
"#;

#[test]
fn two_threads_closing_one_context_forward_one_close() {
    let dir = TempDir::new("review-close");
    let prog = c_program(
        &dir,
        "review_close",
        RACING_CLOSE,
        &["-libverbs", "-pthread"],
    );
    let mut cmd = Command::new(&prog);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("LD_PRELOAD", shim_so())
        .env("IBV_SHIM_LOG", "warn")
        .env_remove("IBV_SHIM_LOG_FILE")
        .env_remove("IBV_SHIM_LIBRARY");
    let out = run(&mut cmd);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        describe(&cmd, &out)
    );
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    // The sim survives a second close and fails it; rdma-core frees the
    // context twice. So the shim itself must refuse the loser every round.
    let refused = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("double close (not forwarded"))
        .count();
    assert_eq!(refused, 300, "{}", describe(&cmd, &out));
}

const FORK_INHERITED: &str = r#"
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) { printf("no devices\n"); return 1; }
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (!ctx) { printf("open failed\n"); return 1; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child closes and frees what it inherited: legitimate calls. */
        errno = 0;
        int rc = ibv_close_device(ctx);
        printf("child close=%d errno=%d\n", rc, errno);
        ibv_free_device_list(list);
        printf("child freed the list\n");
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("parent: child exited %d\n", WEXITSTATUS(status));
    /* The parent keeps and cleans up its own. */
    printf("parent close=%d\n", ibv_close_device(ctx));
    ibv_free_device_list(list);
    return 0;
}
"#;

/// A forked child may close the contexts and free the device lists it
/// inherited (they used to be refused as unknown), and they are not its leaks.
#[test]
fn a_forked_child_may_close_what_it_inherited() {
    let dir = TempDir::new("review-fork");
    let prog = c_program(&dir, "review_fork", FORK_INHERITED, &["-libverbs"]);
    let reports = dir.join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    let mut cmd = Command::new(&prog);
    cmd.env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_DEVICES", "mlx5_0")
        .env("LD_PRELOAD", shim_so())
        .env("IBV_SHIM_REPORT", reports.join("report.%p.json"))
        .env("IBV_SHIM_LEAK_EXITCODE", "23")
        .env_remove("IBV_SHIM_LIBRARY");
    let out = run(&mut cmd);
    let text = stdout(&out);
    assert!(
        text.contains("child close=0 errno=0"),
        "{}",
        describe(&cmd, &out)
    );
    assert!(
        text.contains("child freed the list"),
        "{}",
        describe(&cmd, &out)
    );
    assert!(
        text.contains("parent: child exited 0"),
        "{}",
        describe(&cmd, &out)
    );
    assert!(text.contains("parent close=0"), "{}", describe(&cmd, &out));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&cmd, &out));
    assert!(
        !stderr(&out).contains("not a context") && !stderr(&out).contains("double free"),
        "the child's calls were refused\n{}",
        describe(&cmd, &out)
    );
    // Each process that used verbs wrote a report; none leaked.
    let mut docs = 0;
    for e in std::fs::read_dir(&reports).unwrap().flatten() {
        let doc = std::fs::read_to_string(e.path()).unwrap();
        assert!(
            doc.contains("\"leaked\":false"),
            "{}: {doc}",
            e.path().display()
        );
        docs += 1;
    }
    assert!(docs >= 1, "no report written\n{}", describe(&cmd, &out));
}

const NULL_OBJECTS: &str = r#"
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdio.h>
#define SHOW(expr) do { errno = 0; long r_ = (long)(expr); printf("%s %s %d\n", #expr, r_ == 0 ? "0" : r_ == -1 ? "-1" : r_ == EINVAL ? "EINVAL" : "other", errno); } while (0)
int main(void) {
    struct ibv_port_attr port;
    struct ibv_device_attr dev;
    union ibv_gid gid;
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia = {0};
    SHOW(ibv_alloc_pd(NULL));
    SHOW(ibv_reg_mr(NULL, &port, sizeof(port), IBV_ACCESS_LOCAL_WRITE));
    SHOW(ibv_create_cq(NULL, 16, NULL, NULL, 0));
    SHOW(ibv_create_comp_channel(NULL));
    SHOW(ibv_create_qp(NULL, &qia));
    SHOW(ibv_query_device(NULL, &dev));
    SHOW(ibv_query_gid(NULL, 1, 0, &gid));
    SHOW(ibv_modify_qp(NULL, &qa, IBV_QP_STATE));
    (void)port;
    return 0;
}
"#;

/// rdma-core dereferences the object argument of a create or query verb:
/// NULL crashes the program without the shim. Under the shim it is refused
/// with the verb's failure value and errno EINVAL, and a warning.
#[test]
fn null_object_arguments_are_refused_not_crashed_on() {
    let dir = TempDir::new("review-null");
    let prog = c_program(&dir, "review_null", NULL_OBJECTS, &["-libverbs"]);
    let mut cmd = Command::new(&prog);
    cmd.env("LD_PRELOAD", shim_so())
        .env_remove("IBV_SHIM_LIBRARY")
        .env_remove("IBV_SHIM_LOG");
    let out = run(&mut cmd);
    let text = stdout(&out);
    for (call, want) in [
        ("ibv_alloc_pd(NULL)", "0 22"),
        ("ibv_create_cq(NULL, 16, NULL, NULL, 0)", "0 22"),
        ("ibv_create_comp_channel(NULL)", "0 22"),
        ("ibv_create_qp(NULL, &qia)", "0 22"),
        ("ibv_query_device(NULL, &dev)", "EINVAL 22"),
        ("ibv_query_gid(NULL, 1, 0, &gid)", "-1 22"),
        ("ibv_modify_qp(NULL, &qa, IBV_QP_STATE)", "EINVAL 22"),
    ] {
        assert!(
            text.lines().any(|l| l == format!("{call} {want}")),
            "{call}: want `{want}`\n{}",
            describe(&cmd, &out)
        );
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("ibv_reg_mr(NULL") && l.ends_with(" 0 22")),
        "{}",
        describe(&cmd, &out)
    );
    let warnings = stderr(&out)
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("=NULL) (not forwarded"))
        .count();
    assert_eq!(warnings, 8, "{}", describe(&cmd, &out));
}

const DLOPEN_BY_PATH: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    (void)argc;
    /* A probe first: nothing has loaded libibverbs yet. */
    void *probe = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    printf("probe %s\n", probe ? "loaded" : "not loaded");
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    void **(*list)(int *) = (void **(*)(int *))dlvsym(h, "ibv_get_device_list", "IBVERBS_1.1");
    const char *(*name)(void *) = (const char *(*)(void *))dlvsym(h, "ibv_get_device_name", "IBVERBS_1.1");
    int n = -1;
    void **l = list(&n);
    printf("%d devices", l ? n : -1);
    for (int i = 0; l && i < n; i++) printf(" %s", name(l[i]));
    printf("\n");
    return 0;
}
"#;

/// Preload mode: a program that dlopens a verbs library by path (a private
/// rdma-core, here the sim) gets that library behind the shim, not whatever
/// `libibverbs.so.1` the search path holds; and an `RTLD_NOLOAD` probe
/// answers as it would without the shim.
#[test]
fn a_verbs_library_dlopened_by_path_is_the_one_forwarded_to() {
    let dir = TempDir::new("review-bypath");
    let prog = c_program(&dir, "review_bypath", DLOPEN_BY_PATH, &["-ldl"]);
    let mut cmd = Command::new(&prog);
    cmd.arg(sim_lib())
        .env("IBV_SIM_DEVICES", "mlx5_0,rxe0")
        .env("LD_PRELOAD", shim_so())
        .env("IBV_SHIM_LOG", "debug")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("IBV_SHIM_LIBRARY");
    let out = run(&mut cmd);
    assert_eq!(
        stdout(&out).trim(),
        "probe not loaded\n2 devices mlx5_0 rxe0",
        "{}",
        describe(&cmd, &out)
    );
    assert!(
        stderr(&out).contains("ibv_get_device_list("),
        "{}",
        describe(&cmd, &out)
    );
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
    let dir = TempDir::new("review-str");
    let prog = c_program(&dir, "review_str", STR_HELPERS, &["-libverbs"]);
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
