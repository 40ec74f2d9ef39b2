//! `IBV_SHIM_FAULTS` rules: the grammar, the checks and the decision of
//! whether the n-th matching call fails; and the shim's default leak
//! suppressions. Plain data and std only: the shim decides with it, the
//! launcher refuses a wrong rule with it before it starts the program.
//!
//! ```text
//! RULES := RULE ( (',' | ';') RULE )*
//! RULE  := TARGET ( ':' KEY '=' VALUE )*
//! TARGET:= a verb (ibv_reg_mr) | '*' (every injectable verb) | 'wc' (completions)
//!        | 'cm_event' (events rdma_get_cm_event returns: [`cm_event`])
//! KEY   := nth | every | after | prob | seed | errno | status | site | as | event | reason
//! ```
//!
//! Exactly one of `nth=N` (the N-th matching call only), `every=N` (calls
//! N, 2N, ...), `after=N` (every call after the first N) or `prob=P` (each
//! call with probability P, decided by `seed=S` and the call's number, so
//! the same calls fail on every run). `errno=` names the failure (a name
//! like `ENOMEM` or a number; default `ENOMEM`); `status=` is a `wc` rule's
//! work-completion status (`IBV_WC_RETRY_EXC_ERR` or a number; required).
//! `site=MODULE+0xOFFSET` limits a rule to calls from one return address
//! (MODULE is a file name or a path; the sweep writes these). Calls are
//! counted per rule and per verb: `*:nth=2` fails the second call of each
//! verb.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

pub mod cm_event;

pub use cm_event::Replace;

/// What failing a verb tests, which decides whether a sweep fails it by
/// default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A verb the real library can fail: the program's error path runs.
    Gives,
    /// A verb that gives something back. Its failure leaves the object
    /// alive, which the audit then rightly reports: a sweep leaves these
    /// out unless asked (`--sweep-verbs`), since that finds nothing about
    /// the program.
    Release,
    /// A verb the real library cannot fail for a device it listed
    /// (`ibv_get_device_name` returns the name the device holds): a sweep
    /// leaves these out unless asked (`--sweep-infallible`, or named in
    /// `--sweep-verbs`), as a failure there tests a path no real run takes.
    Infallible,
}

/// One verb a rule may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verb {
    pub name: &'static str,
    pub failure: Failure,
}

impl Verb {
    const fn new(name: &'static str, failure: Failure) -> Verb {
        Verb { name, failure }
    }
}

/// The verbs the shim can make fail: its exports that return a value (a
/// `void` verb has no way to say it failed). Inline verbs of `verbs.h`
/// (`ibv_post_send`, `ibv_poll_cq`, ...) never reach a symbol. The grammar
/// knows verbs only through this table: another family of calls is more
/// rows.
pub const VERBS: &[Verb] = &[
    Verb::new("ibv_get_device_list", Failure::Gives),
    Verb::new("ibv_get_device_name", Failure::Infallible),
    Verb::new("ibv_get_device_guid", Failure::Gives),
    Verb::new("ibv_get_device_index", Failure::Gives),
    Verb::new("ibv_open_device", Failure::Gives),
    Verb::new("ibv_close_device", Failure::Release),
    Verb::new("verbs_open_device", Failure::Gives),
    Verb::new("ibv_query_device", Failure::Gives),
    Verb::new("ibv_query_port", Failure::Gives),
    Verb::new("ibv_query_gid", Failure::Gives),
    Verb::new("ibv_query_pkey", Failure::Gives),
    Verb::new("ibv_modify_qp", Failure::Gives),
    Verb::new("ibv_query_qp", Failure::Gives),
    Verb::new("ibv_modify_srq", Failure::Gives),
    Verb::new("ibv_query_srq", Failure::Gives),
    Verb::new("ibv_get_cq_event", Failure::Gives),
    Verb::new("ibv_get_async_event", Failure::Gives),
    Verb::new("ibv_attach_mcast", Failure::Gives),
    Verb::new("ibv_detach_mcast", Failure::Gives),
    Verb::new("ibv_fork_init", Failure::Gives),
    Verb::new("ibv_alloc_pd", Failure::Gives),
    Verb::new("ibv_dealloc_pd", Failure::Release),
    Verb::new("ibv_reg_mr", Failure::Gives),
    Verb::new("ibv_reg_mr_iova", Failure::Gives),
    Verb::new("ibv_reg_mr_iova2", Failure::Gives),
    Verb::new("ibv_reg_dmabuf_mr", Failure::Gives),
    Verb::new("ibv_rereg_mr", Failure::Gives),
    Verb::new("ibv_dereg_mr", Failure::Release),
    Verb::new("ibv_create_comp_channel", Failure::Gives),
    Verb::new("ibv_destroy_comp_channel", Failure::Release),
    Verb::new("ibv_create_cq", Failure::Gives),
    Verb::new("ibv_resize_cq", Failure::Gives),
    Verb::new("ibv_destroy_cq", Failure::Release),
    Verb::new("ibv_create_srq", Failure::Gives),
    Verb::new("ibv_destroy_srq", Failure::Release),
    Verb::new("ibv_create_qp", Failure::Gives),
    Verb::new("ibv_destroy_qp", Failure::Release),
    Verb::new("ibv_create_ah", Failure::Gives),
    Verb::new("ibv_create_ah_from_wc", Failure::Gives),
    Verb::new("ibv_destroy_ah", Failure::Release),
    Verb::new("ibv_import_device", Failure::Gives),
    Verb::new("ibv_import_pd", Failure::Gives),
    Verb::new("ibv_import_mr", Failure::Gives),
    // librdmacm (the shim interposes it too): the connection's setup, each
    // failing with -1 and errno (NULL for the creates of a pointer).
    Verb::new("rdma_create_event_channel", Failure::Gives),
    Verb::new("rdma_create_id", Failure::Gives),
    Verb::new("rdma_destroy_id", Failure::Release),
    Verb::new("rdma_bind_addr", Failure::Gives),
    Verb::new("rdma_resolve_addr", Failure::Gives),
    Verb::new("rdma_resolve_route", Failure::Gives),
    Verb::new("rdma_create_qp", Failure::Gives),
    Verb::new("rdma_create_qp_ex", Failure::Gives),
    Verb::new("rdma_create_ep", Failure::Gives),
    Verb::new("rdma_connect", Failure::Gives),
    Verb::new("rdma_listen", Failure::Gives),
    Verb::new("rdma_accept", Failure::Gives),
    Verb::new("rdma_reject", Failure::Gives),
    Verb::new("rdma_get_request", Failure::Gives),
    Verb::new("rdma_get_cm_event", Failure::Gives),
    Verb::new("rdma_ack_cm_event", Failure::Release),
    Verb::new("rdma_disconnect", Failure::Release),
    Verb::new("rdma_migrate_id", Failure::Gives),
    Verb::new("rdma_set_option", Failure::Gives),
    Verb::new("rdma_join_multicast", Failure::Gives),
    Verb::new("rdma_getaddrinfo", Failure::Gives),
    Verb::new("rdma_get_devices", Failure::Gives),
];

/// The verb named `name`, if a rule may name it.
pub fn verb(name: &str) -> Option<&'static Verb> {
    VERBS.iter().find(|v| v.name == name)
}

/// Every verb's name, in the table's order.
pub fn verb_names() -> impl Iterator<Item = &'static str> {
    VERBS.iter().map(|v| v.name)
}

/// Does the shim wrap `poll_cq` (the context's function table), so that
/// `wc` rules can act? It does (`exports::interpose`: a `wc` rule alone
/// wraps `poll_cq` of every context opened); kept so that a build without
/// the wrapper would refuse `wc` rules at start-up, never ignore them.
pub const COMPLETIONS_WRAPPED: bool = true;

/// A verb whose failure only tests a release ([`Failure::Release`]).
pub fn is_release(name: &str) -> bool {
    verb(name).is_some_and(|v| v.failure == Failure::Release)
}

/// A verb the real library cannot fail ([`Failure::Infallible`]).
pub fn is_infallible(name: &str) -> bool {
    verb(name).is_some_and(|v| v.failure == Failure::Infallible)
}

/// The shim's built-in leak suppressions (the objects libraries keep for
/// the life of the process on purpose), in the suppression file's syntax:
/// compiled into the shim and printed by the launcher's
/// `--list-default-suppressions`.
pub const DEFAULT_SUPPRESSIONS: &str = include_str!("../default_suppressions.txt");

/// Which calls a rule is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Verb(&'static str),
    Any,
    /// Work completions (`wc`): decided by the poll wrapper.
    Completion,
    /// Connection-manager events (`cm_event`): decided at
    /// `rdma_get_cm_event`'s return.
    CmEvent,
}

/// When a rule fires, given the number (from 1) of the call among those it
/// matches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum When {
    Nth(u64),
    Every(u64),
    After(u64),
    /// Probability as a fraction of 2^64, and the seed.
    Prob(u64, u64),
}

/// One rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// As written, for messages and the report.
    pub text: String,
    pub target: Target,
    pub when: When,
    pub errno: i32,
    /// A `wc` rule's status.
    pub status: Option<u32>,
    /// `site=`: module file name and offset of the return address.
    pub site: Option<(String, u64)>,
    /// A `cm_event` rule's replacement.
    pub replace: Option<Replace>,
}

impl Rule {
    /// Does the rule look at a call of `verb` (`wc`: a completion)?
    pub fn covers(&self, verb: &str) -> bool {
        match self.target {
            Target::Verb(v) => v == verb,
            Target::Any => verb != "wc" && verb != "cm_event",
            Target::Completion => verb == "wc",
            Target::CmEvent => verb == "cm_event",
        }
    }

    /// Does the rule look at a call from `module` (a path) at `offset`?
    pub fn at_site(&self, module: &str, offset: u64) -> bool {
        match &self.site {
            None => true,
            Some((m, o)) => *o == offset && (m == module || basename(module) == m),
        }
    }

    /// Does the `n`-th call (from 1) the rule matched fail? `key` tells
    /// apart the verbs of a `*` rule's random draws.
    pub fn fires(&self, n: u64, key: &str) -> bool {
        match self.when {
            When::Nth(k) => n == k,
            When::Every(k) => n.checked_rem(k) == Some(0),
            When::After(k) => n > k,
            When::Prob(threshold, seed) => draw(seed ^ fnv(key), n) < threshold,
        }
    }
}

/// The file name of a path.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// splitmix64 of the seed and the call's number: the same call gets the
/// same draw on every run, whatever the threads did in between.
fn draw(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Parses `IBV_SHIM_FAULTS`. The error names the rule and what is wrong.
pub fn parse(spec: &str) -> Result<Vec<Rule>, String> {
    let rules: Vec<Rule> = spec
        .split([',', ';'])
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| parse_rule(r).map_err(|why| format!("fault rule {r:?}: {why}")))
        .collect::<Result<_, _>>()?;
    if rules.is_empty() {
        return Err(format!("no fault rule in {spec:?}"));
    }
    if let Some(r) = rules.iter().find(|r| r.target == Target::Completion) {
        if !COMPLETIONS_WRAPPED {
            return Err(format!(
                "fault rule {:?}: completion faults need the shim to wrap ibv_poll_cq (an inline \
                 verb), which this build does not do yet",
                r.text
            ));
        }
    }
    Ok(rules)
}

fn number(key: &str, v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .map_err(|_| format!("{key}={v:?} is not a whole number"))
}

pub fn parse_rule(text: &str) -> Result<Rule, String> {
    let mut parts = text.split(':');
    let target = match parts.next().unwrap_or("").trim() {
        "*" => Target::Any,
        "wc" => Target::Completion,
        "cm_event" => Target::CmEvent,
        v => match verb(v) {
            Some(k) => Target::Verb(k.name),
            None if v.is_empty() => return Err("no verb before the first `:`".into()),
            None => {
                return Err(format!(
                    "{v:?} is not a verb the shim can make fail (those are: {}, `*`, `wc` or `cm_event`; \
                     inline verbs such as ibv_post_send never reach the shim)",
                    verb_names().collect::<Vec<_>>().join(" ")
                ))
            }
        },
    };
    let (mut when, mut seed, mut errno, mut status, mut site) = (None, None, None, None, None);
    let (mut with, mut event, mut reason) = (None, None, None);
    // A key given twice is refused, not decided by the last one: the rule
    // says two things and only its writer knows which was meant.
    let mut keys: Vec<&str> = Vec::new();
    for part in parts {
        let Some((key, value)) = part.split_once('=') else {
            return Err(format!("{part:?} is not KEY=VALUE"));
        };
        let (key, value) = (key.trim(), value.trim());
        if keys.contains(&key) {
            return Err(format!("{key}= is given twice"));
        }
        keys.push(key);
        let new_when = match key {
            "nth" | "every" => match number(key, value)? {
                0 => return Err(format!("{key}=0: calls are counted from 1")),
                n if key == "nth" => Some(When::Nth(n)),
                n => Some(When::Every(n)),
            },
            "after" => Some(When::After(number(key, value)?)),
            "prob" => match value.parse::<f64>() {
                Ok(p) if (0.0..=1.0).contains(&p) => {
                    Some(When::Prob((p * u64::MAX as f64) as u64, 0))
                }
                _ => return Err(format!("prob={value:?} is not a probability in 0..1")),
            },
            "seed" => {
                seed = Some(number(key, value)?);
                None
            }
            "errno" => {
                errno = Some(parse_errno(value)?);
                None
            }
            "status" => {
                status = Some(parse_status(value)?);
                None
            }
            "site" => {
                site = Some(parse_site(value)?);
                None
            }
            "as" | "event" | "reason" if target != Target::CmEvent => {
                return Err(format!("{key}= is for cm_event rules"))
            }
            "as" => {
                with = Some(value);
                None
            }
            "event" => {
                event = Some(value);
                None
            }
            "reason" => {
                reason = Some(value);
                None
            }
            _ => {
                return Err(format!(
                    "unknown key {key:?} (nth, every, after, prob, seed, errno, status, site, as, \
                     event, reason)"
                ))
            }
        };
        if let Some(w) = new_when {
            if when.is_some() {
                return Err("more than one of nth=, every=, after=, prob=".into());
            }
            when = Some(w);
        }
    }
    let when = match (when, seed) {
        (None, _) => return Err("says not when: give one of nth=, every=, after=, prob=".into()),
        (Some(When::Prob(p, _)), s) => When::Prob(p, s.unwrap_or(0)),
        (Some(_), Some(_)) => return Err("seed= only goes with prob=".into()),
        (Some(w), None) => w,
    };
    match (&target, status, errno) {
        (Target::Completion, None, _) => {
            return Err("a wc rule needs status= (e.g. status=IBV_WC_RETRY_EXC_ERR)".into())
        }
        (Target::Completion, _, Some(_)) => {
            return Err("a wc rule fails completions by status=, not errno=".into())
        }
        (Target::Verb(_) | Target::Any, Some(_), _) => {
            return Err("status= is for wc rules; a verb fails with errno=".into())
        }
        (Target::CmEvent, Some(_), _) | (Target::CmEvent, _, Some(_)) => {
            return Err("a cm_event rule replaces an event by as=, not status= or errno=".into())
        }
        _ => {}
    }
    let replace = match target {
        Target::CmEvent => Some(cm_event::replace(event, with, reason)?),
        _ => None,
    };
    Ok(Rule {
        text: text.to_string(),
        target,
        when,
        errno: errno.unwrap_or(libc::ENOMEM),
        status,
        site,
        replace,
    })
}

fn parse_site(v: &str) -> Result<(String, u64), String> {
    let bad = || format!("site={v:?} is not MODULE+0xOFFSET");
    let (m, o) = v.rsplit_once('+').ok_or_else(bad)?;
    let o = o.strip_prefix("0x").ok_or_else(bad)?;
    let o = u64::from_str_radix(o, 16).map_err(|_| bad())?;
    if m.is_empty() {
        return Err(bad());
    }
    Ok((basename(m).to_string(), o))
}

/// The errno names a rule may use.
pub const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("ENODEV", libc::ENODEV),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("ENOSPC", libc::ENOSPC),
    ("ERANGE", libc::ERANGE),
    ("ENOSYS", libc::ENOSYS),
    ("ENODATA", libc::ENODATA),
    ("EPROTO", libc::EPROTO),
    ("EOVERFLOW", libc::EOVERFLOW),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("ENOBUFS", libc::ENOBUFS),
    ("ENETDOWN", libc::ENETDOWN),
    ("ENETUNREACH", libc::ENETUNREACH),
    ("ECONNRESET", libc::ECONNRESET),
    ("ECONNREFUSED", libc::ECONNREFUSED),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("EHOSTUNREACH", libc::EHOSTUNREACH),
    ("ECANCELED", libc::ECANCELED),
    ("EREMOTEIO", libc::EREMOTEIO),
];

/// The errno values the kernel defines on Linux (`EPERM` 1 to
/// `EHWPOISON` 133): a number outside them is no failure a verb can
/// report.
pub const ERRNO_MAX: i32 = 133;

fn parse_errno(v: &str) -> Result<i32, String> {
    if let Some(&(_, e)) = ERRNOS.iter().find(|(n, _)| n.eq_ignore_ascii_case(v)) {
        return Ok(e);
    }
    match v.parse::<i32>() {
        Ok(e) if (1..=ERRNO_MAX).contains(&e) => Ok(e),
        _ => Err(format!(
            "errno={v:?} is not an errno name ({}) or a number 1..={ERRNO_MAX}",
            ERRNOS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" ")
        )),
    }
}

/// `enum ibv_wc_status` of verbs.h, in order (its values are the indexes).
pub const WC_STATUSES: &[&str] = &[
    "IBV_WC_SUCCESS",
    "IBV_WC_LOC_LEN_ERR",
    "IBV_WC_LOC_QP_OP_ERR",
    "IBV_WC_LOC_EEC_OP_ERR",
    "IBV_WC_LOC_PROT_ERR",
    "IBV_WC_WR_FLUSH_ERR",
    "IBV_WC_MW_BIND_ERR",
    "IBV_WC_BAD_RESP_ERR",
    "IBV_WC_LOC_ACCESS_ERR",
    "IBV_WC_REM_INV_REQ_ERR",
    "IBV_WC_REM_ACCESS_ERR",
    "IBV_WC_REM_OP_ERR",
    "IBV_WC_RETRY_EXC_ERR",
    "IBV_WC_RNR_RETRY_EXC_ERR",
    "IBV_WC_LOC_RDD_VIOL_ERR",
    "IBV_WC_REM_INV_RD_REQ_ERR",
    "IBV_WC_REM_ABORT_ERR",
    "IBV_WC_INV_EECN_ERR",
    "IBV_WC_INV_EEC_STATE_ERR",
    "IBV_WC_FATAL_ERR",
    "IBV_WC_RESP_TIMEOUT_ERR",
    "IBV_WC_GENERAL_ERR",
    "IBV_WC_TM_ERR",
    "IBV_WC_TM_RNDV_INCOMPLETE",
];

fn parse_status(v: &str) -> Result<u32, String> {
    let found = WC_STATUSES
        .iter()
        .position(|s| s.eq_ignore_ascii_case(v) || s[7..].eq_ignore_ascii_case(v))
        .map(|i| i as u32)
        .or_else(|| {
            v.parse::<u32>()
                .ok()
                .filter(|&n| n < WC_STATUSES.len() as u32)
        });
    match found {
        Some(0) => Err("status=IBV_WC_SUCCESS is not a failure".into()),
        Some(s) => Ok(s),
        None => Err(format!(
            "status={v:?} is not an ibv_wc_status (IBV_WC_LOC_LEN_ERR .. IBV_WC_TM_RNDV_INCOMPLETE)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_examples_parse() {
        let r = parse("ibv_reg_mr:nth=3:errno=ENOMEM, ibv_create_qp:every=10:errno=EAGAIN;*:prob=0.01:seed=42,ibv_modify_qp:nth=2:errno=ETIMEDOUT").unwrap();
        assert_eq!(r.len(), 4);
        assert_eq!(r[0].target, Target::Verb("ibv_reg_mr"));
        assert_eq!((r[0].when, r[0].errno), (When::Nth(3), libc::ENOMEM));
        assert_eq!((r[1].when, r[1].errno), (When::Every(10), libc::EAGAIN));
        assert!(matches!(r[2].when, When::Prob(_, 42)));
        assert_eq!(r[3].errno, libc::ETIMEDOUT);
        let wc = parse_rule("wc:nth=1:status=IBV_WC_RETRY_EXC_ERR").unwrap();
        assert_eq!((wc.target, wc.status), (Target::Completion, Some(12)));
        if !COMPLETIONS_WRAPPED {
            let e = parse("wc:nth=1:status=RETRY_EXC_ERR").unwrap_err();
            assert!(e.contains("wrap ibv_poll_cq"), "{e}");
        }
    }

    #[test]
    fn the_table_classes_each_verb_by_what_its_failure_tests() {
        for v in VERBS {
            let releases = [
                "ibv_close_device",
                "ibv_dealloc_",
                "ibv_dereg_",
                "ibv_destroy_",
                "rdma_destroy_",
                "rdma_ack_",
                "rdma_disconnect",
            ]
            .iter()
            .any(|p| v.name.starts_with(p));
            assert_eq!(v.failure == Failure::Release, releases, "{}", v.name);
            assert_eq!(is_release(v.name), releases, "{}", v.name);
        }
        assert!(is_infallible("ibv_get_device_name") && !is_infallible("ibv_reg_mr"));
        assert!(verb("ibv_post_send").is_none() && !is_release("ibv_post_send"));
        assert_eq!(verb_names().count(), VERBS.len());
        let names: std::collections::BTreeSet<_> = verb_names().collect();
        assert_eq!(names.len(), VERBS.len(), "a verb is listed twice");
    }

    #[test]
    fn wrong_rules_say_what_is_wrong() {
        for (spec, says) in [
            ("ibv_reg_mrr:nth=1", "not a verb"),
            ("ibv_post_send:nth=1", "inline verbs"),
            ("ibv_reg_mr:nth=0", "counted from 1"),
            ("ibv_reg_mr:nth=x", "whole number"),
            ("ibv_reg_mr:errno=ENOMEM", "says not when"),
            ("ibv_reg_mr:nth=1:every=2", "more than one"),
            ("ibv_reg_mr:nth=1:errno=EWHAT", "errno name"),
            ("ibv_reg_mr:nth=1:errno=0", "1..=133"),
            ("ibv_reg_mr:nth=1:errno=134", "1..=133"),
            ("ibv_reg_mr:nth=1:errno=200", "1..=133"),
            ("ibv_reg_mr:nth=1:errno=99999", "1..=133"),
            (
                "ibv_reg_mr:nth=1:errno=EIO:errno=ENOMEM",
                "errno= is given twice",
            ),
            ("ibv_reg_mr:nth=1:nth=2", "nth= is given twice"),
            ("*:prob=0.5:seed=1:seed=2", "seed= is given twice"),
            (
                "ibv_reg_mr:nth=1:site=p+0x1:site=p+0x2",
                "site= is given twice",
            ),
            ("ibv_reg_mr:nth=1:seed=3", "seed= only"),
            ("*:prob=2", "probability"),
            ("ibv_reg_mr:nth=1:status=5", "status= is for wc"),
            ("ibv_reg_mr:nth=1:bogus=1", "unknown key"),
            ("ibv_reg_mr:nth", "KEY=VALUE"),
            ("ibv_reg_mr:nth=1:site=prog", "MODULE+0x"),
            (" , ", "no fault rule"),
        ] {
            let e = parse(spec).unwrap_err();
            assert!(e.contains(says), "{spec}: {e}");
        }
        for (spec, says) in [
            ("wc:nth=1", "needs status="),
            ("wc:nth=1:status=IBV_WC_SUCCESS", "not a failure"),
            ("wc:nth=1:status=99", "not an ibv_wc_status"),
            ("wc:nth=1:status=5:errno=EIO", "not errno="),
            ("cm_event:nth=1", "needs as="),
            ("cm_event:nth=1:as=ESTABLISHED", "not a failure event"),
            (
                "cm_event:nth=1:as=REJECTED:errno=EIO",
                "not status= or errno=",
            ),
            (
                "cm_event:nth=1:as=REJECTED:event=NOPE",
                "not an rdma_cm event",
            ),
            ("ibv_reg_mr:nth=1:as=REJECTED", "for cm_event rules"),
        ] {
            let e = parse_rule(spec).unwrap_err();
            assert!(e.contains(says), "{spec}: {e}");
        }
        let r = parse_rule("cm_event:as=REJECTED:reason=8:nth=2").unwrap();
        assert_eq!(r.target, Target::CmEvent);
        assert_eq!(
            r.replace,
            Some(Replace {
                event: 9,
                with: 8,
                reason: 8
            })
        );
        assert!(r.covers("cm_event") && !r.covers("rdma_get_cm_event"));
        assert!(!parse_rule("*:nth=1").unwrap().covers("cm_event"));
        assert_eq!(parse_rule("ibv_reg_mr:nth=1:errno=133").unwrap().errno, 133);
        assert_eq!(parse_rule("ibv_reg_mr:nth=1:errno=1").unwrap().errno, 1);
        // The message names the rule it is about.
        assert!(parse("ibv_alloc_pd:nth=1,ibv_reg_mr:nth=1:errno=200")
            .unwrap_err()
            .starts_with("fault rule \"ibv_reg_mr:nth=1:errno=200\": "));
        assert!(parse("ibv_alloc_pd:nth=1,oops")
            .unwrap_err()
            .starts_with("fault rule \"oops\""));
    }

    #[test]
    fn when_rules_fire() {
        let r = |s: &str| parse(s).unwrap().remove(0);
        let fired = |rule: &Rule| (1..=12).filter(|&n| rule.fires(n, "v")).collect::<Vec<_>>();
        assert_eq!(fired(&r("ibv_reg_mr:nth=3")), [3]);
        assert_eq!(fired(&r("ibv_reg_mr:every=5")), [5, 10]);
        assert_eq!(fired(&r("ibv_reg_mr:after=10")), [11, 12]);
        assert_eq!(fired(&r("*:prob=0")), Vec::<u64>::new());
        assert_eq!(fired(&r("*:prob=1")).len(), 12);
        let half = r("*:prob=0.5:seed=7");
        let a: Vec<_> = (1..=1000).filter(|&n| half.fires(n, "v")).collect();
        assert_eq!(
            a,
            (1..=1000)
                .filter(|&n| half.fires(n, "v"))
                .collect::<Vec<_>>()
        );
        assert!((400..600).contains(&a.len()), "{}", a.len());
        let site = r("ibv_reg_mr:nth=1:site=/x/prog+0x1a2");
        assert!(site.at_site("/usr/bin/prog", 0x1a2) && !site.at_site("/usr/bin/prog", 0x1a3));
    }
}
