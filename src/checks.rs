//! The data-path checks' switches and tallies (`IBV_SHIM_CHECK`): what the
//! wrappers of `exports::interpose` found, counted for the JSON report.
//! A leaf below both `exports` (which counts) and `report` (which reads).

use std::sync::atomic::{AtomicU64, Ordering};

/// A rule a posted work request can break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Check {
    /// An SGE's lkey is no live MR (never registered, or deregistered).
    DeadLkey,
    /// The SGE reaches past its MR.
    OutOfRange,
    /// The MR is on another PD than the QP.
    OtherPd,
    /// The MR is on another context than the QP.
    OtherContext,
    /// The MR's access does not allow what the WR does with it.
    Access,
    /// The QP's state does not allow posting.
    QpState,
    /// More SGEs than the queue takes.
    NumSge,
    /// More inline data than the QP takes.
    InlineSize,
    /// `num_sge` SGEs, but no list (`sg_list` NULL).
    NullSgList,
    /// A chain longer than its queue holds (or one that loops).
    ChainLength,
    /// A send's source bytes changed before its completion (`inflight`).
    SendModified,
    /// A receive buffer given out again before its receive completed.
    RecvReused,
    /// An MR deregistered (or re-registered) under outstanding WRs.
    TeardownMr,
    /// A QP destroyed or reset with sends whose completions were never polled.
    TeardownQp,
    /// A CQ destroyed with completions of posted WRs never polled.
    TeardownCq,
    /// More completions due on a CQ than it has entries.
    CqOverrun,
    /// A memory window deallocated under its own outstanding bind or
    /// local invalidation.
    TeardownMw,
}

impl Check {
    pub const ALL: [Check; 17] = [
        Check::DeadLkey,
        Check::OutOfRange,
        Check::OtherPd,
        Check::OtherContext,
        Check::Access,
        Check::QpState,
        Check::NumSge,
        Check::InlineSize,
        Check::NullSgList,
        Check::ChainLength,
        Check::SendModified,
        Check::RecvReused,
        Check::TeardownMr,
        Check::TeardownQp,
        Check::TeardownCq,
        Check::CqOverrun,
        Check::TeardownMw,
    ];

    /// Its name in the log and the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            Check::DeadLkey => "dead_lkey",
            Check::OutOfRange => "out_of_range",
            Check::OtherPd => "other_pd",
            Check::OtherContext => "other_context",
            Check::Access => "access",
            Check::QpState => "qp_state",
            Check::NumSge => "num_sge",
            Check::InlineSize => "inline_size",
            Check::NullSgList => "sg_list",
            Check::ChainLength => "chain_length",
            Check::SendModified => "send_modified",
            Check::RecvReused => "recv_reused",
            Check::TeardownMr => "teardown_mr",
            Check::TeardownQp => "teardown_qp",
            Check::TeardownCq => "teardown_cq",
            Check::CqOverrun => "cq_overrun",
            Check::TeardownMw => "teardown_mw",
        }
    }

    /// A check of work in flight (`IBV_SHIM_CHECK=inflight` only).
    pub fn inflight_only(self) -> bool {
        self as u8 >= Check::SendModified as u8
    }
}

static COUNTS: [AtomicU64; Check::ALL.len()] = [const { AtomicU64::new(0) }; Check::ALL.len()];

/// Are the data-path checks on?
#[inline]
pub fn datapath() -> bool {
    match crate::config::CHECK_LEVEL.load(Ordering::Relaxed) {
        0 => false,
        crate::config::CHECK_UNSET => unread().check_datapath,
        _ => true,
    }
}

/// The configuration not read yet: read it now.
#[cold]
fn unread() -> &'static crate::config::Config {
    crate::config::get()
}

/// Is posted work tracked until its completion (`IBV_SHIM_CHECK=inflight`)?
#[inline]
pub fn inflight() -> bool {
    match crate::config::CHECK_LEVEL.load(Ordering::Relaxed) {
        2 => true,
        crate::config::CHECK_UNSET => unread().check_inflight,
        _ => false,
    }
}

/// Abort at the first violation?
pub fn abort() -> bool {
    crate::config::get().check_abort
}

/// Counts one violation (every one, also those not logged again).
pub fn count(c: Check) {
    COUNTS[c as usize].fetch_add(1, Ordering::Relaxed);
}

/// Violations so far, by check, in [`Check::ALL`]'s order.
pub fn counts() -> [(Check, u64); Check::ALL.len()] {
    Check::ALL.map(|c| (c, COUNTS[c as usize].load(Ordering::Relaxed)))
}
