//! Flushed completions under the data-path checks' error explainer
//! (`tests/c/wholeapi/flush_flood.c`): however many threads poll, a QP's
//! flushed completions after an error are counted in one line (at the
//! first poll that drains its CQ) and the rest in one line at its destroy or exit, the
//! counts adding up to what the program polled; a flush the program asked
//! for (the QP moved to ERR with receives posted, as every well-behaved
//! teardown does) is an INFO line, not a warning.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::*;

fn program() -> PathBuf {
    wholeapi_program("flush_flood")
}

#[test]
fn flushed_completions_polled_by_16_threads_are_at_most_two_lines_per_qp() {
    let r = shim_run(
        &program(),
        "flushed",
        &["flood", "16"],
        &[("IBV_SHIM_CHECK", "datapath")],
    );
    assert!(r.status.success(), "{}\n{}", r.stdout, r.log);
    let total: u64 = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("flushed "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {}", r.stdout));
    assert_eq!(total, 16 * 199, "{}", r.stdout);
    let first = r
        .log
        .lines()
        .filter(|l| l.contains("WARN first error completion"))
        .count();
    assert_eq!(first, 16, "{}", r.log);
    // qp_num -> (lines, flushed counted)
    let mut per_qp: HashMap<String, (u32, u64)> = HashMap::new();
    for l in r
        .log
        .lines()
        .filter(|l| l.contains(" WARN qp_num=") && l.contains(" flushed (IBV_WC_WR_FLUSH_ERR)"))
    {
        let rest = &l[l.find("qp_num=").unwrap() + 7..];
        let (qp, rest) = rest.split_once(": ").unwrap();
        let n: u64 = rest.split(' ').next().unwrap().parse().unwrap();
        let e = per_qp.entry(qp.to_string()).or_default();
        e.0 += 1;
        e.1 += n;
    }
    assert_eq!(per_qp.len(), 16, "{}", r.log);
    for (qp, (lines, n)) in &per_qp {
        assert!(*lines <= 2, "qp_num={qp}: {lines} lines\n{}", r.log);
        assert_eq!(*n, 199, "qp_num={qp}: {n} counted\n{}", r.log);
    }
    let warnings = r.log.lines().filter(|l| l.contains(" WARN ")).count();
    // The dead lkey once (one site), then per QP its first error and at
    // most two count lines.
    assert!(warnings <= 1 + 16 * 3, "{warnings} warnings:\n{}", r.log);
}

#[test]
fn a_teardown_flush_the_program_asked_for_is_no_warning() {
    let r = shim_run(
        &program(),
        "flushed",
        &["teardown"],
        &[("IBV_SHIM_CHECK", "datapath"), ("IBV_SHIM_LOG", "info")],
    );
    assert!(r.status.success(), "{}\n{}", r.stdout, r.log);
    assert!(r.stdout.contains("flushed 4 then "), "{}", r.stdout);
    assert!(
        !r.log.contains(" WARN ") && !r.log.contains(" ERROR "),
        "{}",
        r.log
    );
    the_line_with(
        &r.log,
        " INFO qp_num=",
        &["4 completions flushed (IBV_WC_WR_FLUSH_ERR) after the program moved the QP to ERR"],
    );
}
