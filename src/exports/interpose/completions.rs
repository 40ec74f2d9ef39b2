//! Error completions explained (with the data-path checks on): the first
//! error completion of each QP is logged with its status, vendor error, the
//! work request it belongs to (matched by `wr_id` among the QP's recent
//! posts) and the QP's state; the flushed completions that follow are
//! counted: one line per QP per error (at the first poll that drains the
//! CQ after it), whatever the number of threads polling, and the rest in
//! one line per QP when it is destroyed or at exit. A destroyed QP's
//! number starts a new life (a QP made later may get it).
//!
//! A flush the program caused (it moved the QP to ERR with
//! `ibv_modify_qp`, or destroyed it, with requests still posted: every
//! well-behaved teardown) is no error: its count is an INFO line, and
//! only an error the program did not cause is a warning.
//!
//! The one place a polled completion passes through the shim is
//! [`polled`]: the hooks of the completion-fault injector and of the
//! tracer belong there.

use std::collections::HashMap;
use std::ffi::c_int;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::addr_of;
use std::sync::atomic::{AtomicBool, Ordering};

use verbs_abi::{ibv_context, ibv_cq, ibv_qp, ibv_wc};

use super::datapath::wr_opcode;
use super::wr_rules::state_name;
use crate::addr::Addr;
use crate::log::Level;
use crate::registry::lock::{mutex, Mutex};
use crate::registry::objects;

const WC_WR_FLUSH_ERR: c_int = verbs_abi::ibv_wc_status::IBV_WC_WR_FLUSH_ERR as c_int;

/// A posted work request, as remembered.
#[derive(Clone, Copy)]
pub(super) struct Posted {
    pub wr_id: u64,
    /// `IBV_WR_*`, or -1 for a receive.
    pub opcode: c_int,
    pub num_sge: c_int,
    /// The first SGE: addr, length, lkey.
    pub sge: Option<(u64, u32, u32)>,
}

impl Posted {
    /// What is remembered of a work request with `num_sge` SGEs at `sges`
    /// (the program's list, read while its post is under way).
    ///
    /// # Safety
    /// `sges` is NULL or the program's list of at least `num_sge` entries.
    #[inline(always)]
    pub(super) unsafe fn of(
        wr_id: u64,
        opcode: c_int,
        sges: *const verbs_abi::ibv_sge,
        num_sge: c_int,
    ) -> Posted {
        let sge = if num_sge > 0 && !sges.is_null() {
            // SAFETY: the program's SGE list has at least one entry.
            let s = unsafe { *sges };
            Some((s.addr, s.length, s.lkey))
        } else {
            None
        };
        Posted {
            wr_id,
            opcode,
            num_sge,
            sge,
        }
    }
}

/// A QP's error completions (touched only when one arrives, or when the
/// program moves the QP to ERR or destroys it).
#[derive(Default)]
struct QpLog {
    /// The first error completion was logged.
    failed: bool,
    /// Flushed completions not yet counted in a line.
    flushed: u64,
    /// The flushed completions since the QP's last error had their line:
    /// the next ones wait for the exit's.
    counted: bool,
    /// The program flushed the QP itself: what it did.
    by_program: Option<&'static str>,
}

/// Some QP has flushed completions whose line is due at the next poll
/// that drains its CQ.
static FLUSHED: AtomicBool = AtomicBool::new(false);

/// Per (context, qp_num), of the QPs with an error completion; hashed with one multiply (SipHash would cost
/// more than the rest of a post's bookkeeping).
static QPS: Mutex<Option<QpLogs>> = mutex(None);

type QpLogs = HashMap<(Addr<ibv_context>, u32), QpLog, BuildHasherDefault<MulHash>>;

/// A multiplicative hash of the words it is fed.
#[derive(Default)]
struct MulHash(u64);

impl Hasher for MulHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|b| self.write_u64(*b as u64));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = crate::addr_table::mix(self.0.rotate_left(5) ^ v);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// A work request posted at `site` to QP `qp_num` of `ctx`.
#[inline]
pub(super) fn posted(ctx: Addr<ibv_context>, qp_num: u32, p: &Posted, site: usize) {
    super::recent::remember(ctx.get(), qp_num, p, site);
}

/// `IBV_WC_*` status names, with `ibv_wc_status_str`'s words.
fn status_name(status: c_int) -> &'static str {
    const NAMES: [&str; 24] = [
        "IBV_WC_SUCCESS (success)",
        "IBV_WC_LOC_LEN_ERR (local length error)",
        "IBV_WC_LOC_QP_OP_ERR (local QP operation error)",
        "IBV_WC_LOC_EEC_OP_ERR (local EE context operation error)",
        "IBV_WC_LOC_PROT_ERR (local protection error)",
        "IBV_WC_WR_FLUSH_ERR (Work Request Flushed Error)",
        "IBV_WC_MW_BIND_ERR (memory management operation error)",
        "IBV_WC_BAD_RESP_ERR (bad response error)",
        "IBV_WC_LOC_ACCESS_ERR (local access error)",
        "IBV_WC_REM_INV_REQ_ERR (remote invalid request error)",
        "IBV_WC_REM_ACCESS_ERR (remote access error)",
        "IBV_WC_REM_OP_ERR (remote operation error)",
        "IBV_WC_RETRY_EXC_ERR (transport retry counter exceeded)",
        "IBV_WC_RNR_RETRY_EXC_ERR (RNR retry counter exceeded)",
        "IBV_WC_LOC_RDD_VIOL_ERR (local RDD violation error)",
        "IBV_WC_REM_INV_RD_REQ_ERR (remote invalid RD request)",
        "IBV_WC_REM_ABORT_ERR (aborted error)",
        "IBV_WC_INV_EECN_ERR (invalid EE context number)",
        "IBV_WC_INV_EEC_STATE_ERR (invalid EE context state)",
        "IBV_WC_FATAL_ERR (fatal error)",
        "IBV_WC_RESP_TIMEOUT_ERR (response timeout error)",
        "IBV_WC_GENERAL_ERR (general error)",
        "IBV_WC_TM_ERR (TM error)",
        "IBV_WC_TM_RNDV_INCOMPLETE (TM software rendezvous)",
    ];
    NAMES
        .get(status as usize)
        .copied()
        .unwrap_or("unknown status")
}

/// Is there anything for [`polled`] to do? An error among the completions
/// (one branch per completion: the success path of a poll), or flushed
/// ones to count when the CQ is drained.
#[inline]
pub(super) fn worth_a_look(done: &[ibv_wc], drained: bool) -> bool {
    let failed = |wc: &ibv_wc| {
        // SAFETY: the provider wrote this completion; its status read as
        // the int it is in C.
        unsafe { addr_of!(wc.status).cast::<c_int>().read() != 0 }
    };
    done.iter().any(failed) || (drained && FLUSHED.load(Ordering::Relaxed))
}

/// The completions a poll of `cq` (on `ctx`) returned; `drained`: fewer
/// than asked for (the CQ is empty for now).
#[cold]
#[inline(never)]
pub(super) fn polled(ctx: Addr<ibv_context>, cq: *mut ibv_cq, done: &[ibv_wc], drained: bool) {
    // Hook: completion faults (`faults::completion_status`) and trace
    // events for each completion go here, before the scan below.
    for wc in done {
        // SAFETY: the provider wrote these completions; status read as the
        // int it is in C.
        let status = unsafe { addr_of!(wc.status).cast::<c_int>().read() };
        if status != 0 {
            let e = Failed {
                qp_num: wc.qp_num,
                wr_id: wc.wr_id,
                status,
                vendor_err: wc.vendor_err,
            };
            failed(ctx, Addr::of(cq), &e);
        }
    }
    if drained {
        self::drained(ctx);
    }
}

/// A poll found the CQ empty for now: the flushed completions of `ctx`'s
/// QPs not yet counted get their line.
pub(super) fn drained(ctx: Addr<ibv_context>) {
    if FLUSHED.load(Ordering::Relaxed) {
        flush_lines(ctx);
    }
}

/// An error completion, from an `ibv_wc` or an extended CQ's cursor.
pub(super) struct Failed {
    pub qp_num: u32,
    pub wr_id: u64,
    pub status: c_int,
    pub vendor_err: u32,
}

/// An error completion of `cq` on `ctx`: the QP's first is explained, the
/// flushed ones after it counted.
#[cold]
#[inline(never)]
pub(super) fn failed(ctx: Addr<ibv_context>, cq: Addr<ibv_cq>, wc: &Failed) {
    let status = wc.status;
    let key = (ctx, wc.qp_num);
    let (first, wr) = {
        let mut g = QPS.lock();
        let log = g
            .get_or_insert_with(HashMap::default)
            .entry(key)
            .or_default();
        // Flushed after an error, or after the program flushed the QP:
        // counted, not explained.
        if status == WC_WR_FLUSH_ERR && (log.failed || log.by_program.is_some()) {
            log.flushed += 1;
            if !log.counted {
                FLUSHED.store(true, Ordering::Relaxed);
            }
            return;
        }
        // A new error: the flushed ones after it get a line of their own.
        log.counted = false;
        if log.failed {
            (false, None)
        } else {
            log.failed = true;
            (true, super::recent::find(ctx.get(), wc.qp_num, wc.wr_id))
        }
    };
    let qp = objects::collect(|o| {
        o.ctx == ctx.get() && o.facts.qp().is_some_and(|q| q.qp_num == wc.qp_num)
    })
    .first()
    .map(|o| o.addr);
    let state = match qp {
        // SAFETY: a tracked QP of an open context; its state read as a C int.
        Some(qp) => state_name(unsafe {
            addr_of!((*(qp as *mut ibv_qp)).state)
                .cast::<c_int>()
                .read()
        }),
        None => "unknown (a QP the shim did not see created)",
    };
    let wr = match wr {
        Some((p, site)) => {
            let op = if p.opcode < 0 {
                "RECV".to_string()
            } else {
                wr_opcode(p.opcode).to_string()
            };
            let sge = match p.sge {
                Some((a, l, k)) => format!(" sge[0]={{addr={a:#x} length={l} lkey={k:#x}}}"),
                None => String::new(),
            };
            format!(
                "posted as opcode={op} num_sge={}{sge} at {}",
                p.num_sge,
                crate::report::site(site)
            )
        }
        None => "not among the QP's recent posts".to_string(),
    };
    crate::log!(
        Level::Warn,
        "{} completion on cq={cq:#x} for qp_num={:#x}{}: {} vendor_err={:#x} wr_id={:#x} ({wr}); QP state now {state}",
        if first { "first error" } else { "another error" },
        wc.qp_num,
        qp.map(|q| format!(" (qp={q:#x})")).unwrap_or_default(),
        status_name(status),
        wc.vendor_err,
        wc.wr_id
    );
}

/// A line counting a QP's flushed completions.
struct Count {
    qp_num: u32,
    n: u64,
    /// After an error the program did not cause (else: what it did).
    by_program: Option<&'static str>,
    /// The last line for these (at exit, at the QP's destroy), and why.
    last: Option<&'static str>,
}

impl Count {
    /// The line for `log`'s flushed completions, which it forgets.
    fn take(qp_num: u32, log: &mut QpLog, last: Option<&'static str>) -> Count {
        let c = Count {
            qp_num,
            n: log.flushed,
            by_program: log.by_program.filter(|_| !log.failed),
            last,
        };
        log.flushed = 0;
        log.counted = true;
        c
    }

    fn log(self) {
        let (qp_num, n) = (self.qp_num, self.n);
        let s = if n == 1 { "" } else { "s" };
        match (self.by_program, self.last) {
            (Some(what), _) => crate::log!(
                Level::Info,
                "qp_num={qp_num:#x}: {n} completion{s} flushed (IBV_WC_WR_FLUSH_ERR) after the \
                 program {what}, as it asked"
            ),
            (None, Some(until)) => crate::log!(
                Level::Warn,
                "qp_num={qp_num:#x}: {n} more completion{s} flushed (IBV_WC_WR_FLUSH_ERR) after \
                 its error, counted until {until}"
            ),
            (None, None) => crate::log!(
                Level::Warn,
                "qp_num={qp_num:#x}: {n} more completion{s} flushed (IBV_WC_WR_FLUSH_ERR) after \
                 its first error (later ones are counted in one line at its destroy or exit)"
            ),
        }
    }
}

/// One line per QP of `ctx` whose flushed completions since its last
/// error have had none yet; at exit (`ctx` 0), one per QP with any not
/// yet counted.
fn flush_lines(ctx: Addr<ibv_context>) {
    let at_exit = ctx.is_null();
    let mut lines: Vec<Count> = Vec::new();
    {
        let mut g = QPS.lock();
        FLUSHED.store(false, Ordering::Relaxed);
        let Some(map) = g.as_mut() else { return };
        for (&(c, qp_num), log) in map.iter_mut() {
            if log.flushed == 0 || (log.counted && !at_exit) {
                continue;
            }
            if at_exit || c == ctx {
                lines.push(Count::take(qp_num, log, at_exit.then_some("exit")));
            } else {
                FLUSHED.store(true, Ordering::Relaxed);
            }
        }
    }
    lines.into_iter().for_each(Count::log);
}

pub(super) fn at_exit() {
    flush_lines(Addr::NULL);
}

/// QPs whose flush the program caused are remembered up to this many in
/// all (with those that had an error); past it, a flush after a destroy
/// is reported as any other.
const REMEMBERED: usize = 1 << 16;

/// The program moved QP `qp_num` of `ctx` to ERR itself: the flushed
/// completions that follow are no error of its own. A QP that already
/// failed keeps its warning.
pub(super) fn moved_to_err(ctx: Addr<ibv_context>, qp_num: u32) {
    let mut g = QPS.lock();
    let map = g.get_or_insert_with(HashMap::default);
    if map.len() >= REMEMBERED && !map.contains_key(&(ctx, qp_num)) {
        return;
    }
    map.entry((ctx, qp_num))
        .or_default()
        .by_program
        .get_or_insert("moved the QP to ERR");
}

/// The program destroyed QP `qp_num` of `ctx`: the flushed completions
/// counted for it get their line now, and the number starts a new life
/// (a QP made later may get it, on a context at the same address: its
/// first error is its own); what is flushed after the destroy is the
/// program's doing.
pub(super) fn destroyed(ctx: Addr<ibv_context>, qp_num: u32) {
    let line = {
        let mut g = QPS.lock();
        let map = g.get_or_insert_with(HashMap::default);
        if map.len() >= REMEMBERED && !map.contains_key(&(ctx, qp_num)) {
            return;
        }
        let log = map.entry((ctx, qp_num)).or_default();
        let line = (log.flushed > 0).then(|| Count::take(qp_num, log, Some("its destroy")));
        *log = QpLog {
            by_program: Some("destroyed the QP"),
            ..QpLog::default()
        };
        line
    };
    if let Some(l) = line {
        l.log();
    }
}

/// QP `qp_num` of `ctx` starts again (moved to RESET or INIT: also a new
/// QP given a destroyed one's number): what the program did before is no
/// reason to keep a later error quiet.
pub(super) fn qp_reset(ctx: Addr<ibv_context>, qp_num: u32) {
    let mut g = QPS.lock();
    if let Some(log) = g.as_mut().and_then(|m| m.get_mut(&(ctx, qp_num))) {
        log.by_program = None;
    }
}

/// `fork()`: this module's lock, held across the fork (`interpose::fork`).
pub(super) fn fork(step: crate::registry::lock::ForkStep) {
    step.apply(&QPS);
}
