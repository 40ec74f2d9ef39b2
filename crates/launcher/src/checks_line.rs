//! The summary's line for the data-path checks: what the shim's checks
//! (`--check-datapath`, `--check-inflight`) found in all the run's
//! processes, by rule, so a run that printed its warnings into a log file
//! still says so at its end.

use crate::report::Report;

/// "data-path checks found: send_modified 2, teardown_qp 1 (...)", or None
/// when nothing was found.
pub fn line(reports: &[Report]) -> Option<String> {
    let mut by_rule: std::collections::BTreeMap<&str, u64> = Default::default();
    for r in reports {
        for (rule, n) in &r.checks {
            *by_rule.entry(rule).or_default() += n;
        }
    }
    if by_rule.is_empty() {
        return None;
    }
    let list: Vec<String> = by_rule.iter().map(|(r, n)| format!("{r} {n}")).collect();
    Some(format!(
        "data-path checks found: {} (each site's first is a WARN in the log)",
        list.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summed_by_rule_over_processes() {
        let r = |c: &[(&str, u64)]| Report {
            checks: c.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            ..Report::default()
        };
        assert_eq!(line(&[r(&[]), r(&[])]), None);
        assert_eq!(
            line(&[r(&[("send_modified", 2)]), r(&[("send_modified", 1), ("cq_overrun", 1)])])
                .unwrap(),
            "data-path checks found: cq_overrun 1, send_modified 3 (each site's first is a WARN in the log)"
        );
    }
}
