//! The object record: what a tracked object is (`Obj`, `Kind`, `Kinds`,
//! its `Facts`) and its packing into the 64-byte stored record (`Rec`).

use super::facts::{Facts, Words};

/// What a tracked object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Kind {
    Pd = 1,
    Mr = 2,
    Cq = 3,
    CompChannel = 4,
    Srq = 5,
    Qp = 6,
    Ah = 7,
    ImportedPd = 8,
    ImportedMr = 9,
    // The kinds only the context's function tables create (`interpose`).
    Mw = 10,
    Xrcd = 11,
    Wq = 12,
    RwqIndTable = 13,
    Flow = 14,
    FlowAction = 15,
    Td = 16,
    ParentDomain = 17,
    Dm = 18,
    Counters = 19,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 19] = [
        Kind::Pd,
        Kind::Mr,
        Kind::Cq,
        Kind::CompChannel,
        Kind::Srq,
        Kind::Qp,
        Kind::Ah,
        Kind::ImportedPd,
        Kind::ImportedMr,
        Kind::Mw,
        Kind::Xrcd,
        Kind::Wq,
        Kind::RwqIndTable,
        Kind::Flow,
        Kind::FlowAction,
        Kind::Td,
        Kind::ParentDomain,
        Kind::Dm,
        Kind::Counters,
    ];

    /// The report model's kind: its name, place and fields in reports
    /// and suppressions are the model's (one table for the shim, the
    /// schema and the launcher).
    pub const fn report(self) -> report_model::Kind {
        use report_model::Kind as R;
        match self {
            Kind::Pd => R::Pd,
            Kind::Mr => R::Mr,
            Kind::Cq => R::Cq,
            Kind::CompChannel => R::CompChannel,
            Kind::Srq => R::Srq,
            Kind::Qp => R::Qp,
            Kind::Ah => R::Ah,
            Kind::ImportedPd => R::ImportedPd,
            Kind::ImportedMr => R::ImportedMr,
            Kind::Mw => R::Mw,
            Kind::Xrcd => R::Xrcd,
            Kind::Wq => R::Wq,
            Kind::RwqIndTable => R::RwqIndTable,
            Kind::Flow => R::Flow,
            Kind::FlowAction => R::FlowAction,
            Kind::Td => R::Td,
            Kind::ParentDomain => R::ParentDomain,
            Kind::Dm => R::Dm,
            Kind::Counters => R::Counters,
        }
    }

    /// The name used in reports and suppressions (the model's).
    pub fn name(self) -> &'static str {
        self.report().name()
    }

    #[inline]
    pub(super) fn from_u8(v: u8) -> Option<Kind> {
        if (1..=Kind::ALL.len() as u8).contains(&v) {
            // SAFETY: Kind is repr(u8) with the values 1..=ALL.len(), all
            // used (checked below), and `v` is one of them.
            Some(unsafe { std::mem::transmute::<u8, Kind>(v) })
        } else {
            None
        }
    }

    /// This kind as a bit of a [`Kinds`] set.
    pub const fn bit(self) -> Kinds {
        Kinds(1 << self as u32)
    }
}

// `Kind::from_u8` relies on the values being exactly 1..=ALL.len().
const _: () = {
    let mut i = 0;
    while i < Kind::ALL.len() {
        assert!(Kind::ALL[i] as usize == i + 1);
        i += 1;
    }
};

/// A set of kinds (what a destroy verb accepts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kinds(u32);

impl Kinds {
    pub const fn or(self, k: Kind) -> Kinds {
        Kinds(self.0 | k.bit().0)
    }

    pub fn contains(self, k: Kind) -> bool {
        self.0 & k.bit().0 != 0
    }

    /// [`Kinds::contains`] for a stored kind number (no valid kind is 0,
    /// so neither is any bit of a set).
    #[inline]
    pub(super) fn contains_raw(self, v: u8) -> bool {
        v < 32 && self.0 >> v & 1 != 0
    }
}

/// The record's context was closed: a destroy would touch freed memory.
pub const FLAG_ZOMBIE: u8 = 1;
/// A backtrace of the creation is in the side map.
pub const FLAG_BACKTRACE: u8 = 2;
/// Flagged a zombie by an `ibv_close_device` still under way: cleared when
/// that close is reported ([`finish_close`](super::finish_close)) or undone
/// ([`abort_close`](super::abort_close)).
pub const FLAG_CLOSING: u8 = 4;

/// One tracked object, as the table hands it out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Obj {
    /// The object's address (the key).
    pub addr: usize,
    /// `struct ibv_context *` it was created on.
    pub ctx: usize,
    /// The PD (MR, QP, SRQ, AH, imported MR) or completion channel (CQ).
    pub parent: usize,
    /// Return address of the creating call (the creation site).
    pub caller: usize,
    /// What is known of it, by kind.
    pub facts: Facts,
    /// Creating thread.
    pub tid: u32,
    /// `time_ms:39 | 0:8 | kind:5 | flags:3 << 61`: the record's `when`
    /// word but for its thread id, and its `caller` word's kind bits.
    meta: u64,
}

impl Obj {
    /// A record for a new object created now by this thread.
    #[inline]
    pub fn new(kind: Kind, addr: usize, ctx: usize, parent: usize, caller: usize, tid: i32) -> Obj {
        Obj {
            addr,
            ctx,
            parent,
            caller,
            tid: tid as u32,
            meta: (now_ms() & LOW39) | (kind as u64) << KIND_SHIFT,
            ..Obj::default()
        }
    }

    /// This record with `facts`.
    #[inline(always)]
    pub fn with(mut self, facts: Facts) -> Obj {
        self.facts = facts;
        self
    }

    pub fn kind(&self) -> Kind {
        Kind::from_u8((self.meta >> KIND_SHIFT) as u8 & 0x1f).unwrap_or(Kind::Pd)
    }

    /// Creation time, CLOCK_MONOTONIC_COARSE milliseconds (see [`now_ms`]).
    pub fn time_ms(&self) -> u64 {
        self.meta & LOW39
    }

    pub fn flags(&self) -> u8 {
        (self.meta >> FLAGS_SHIFT) as u8
    }

    pub fn set_flag(&mut self, flag: u8) {
        self.meta |= ((flag & 7) as u64) << FLAGS_SHIFT;
    }

    pub fn is_zombie(&self) -> bool {
        self.flags() & FLAG_ZOMBIE != 0
    }
}

/// An object as stored. 64 bytes, one cache line, its context's list links
/// included. User addresses are below 2^47 and contexts and parents are
/// 8-aligned, so the object's own key (`addr >> 3`, 44 bits, which an index
/// probe compares: the 4-byte index slot holds only a hash tag), `parent >>
/// 3` (44 bits) and `caller` (47 bits) leave room for the context (`ctx >>
/// 3`, 44 bits, in three pieces). The key is whole in the first word, so a
/// probe compares it with one mask; the context is read only by a close's
/// list walk and the reports. A kernel thread id is below 2^22
/// (`PID_MAX_LIMIT`) and 39 bits of milliseconds of `CLOCK_MONOTONIC` are
/// 17 years of uptime, which leaves 32 bits for the two list links.
///
/// Not `align(64)`: the slab is page-aligned and a record 64 bytes, so
/// records sit on cache lines anyway, and a copy handed out by `take` then
/// costs its callers no realigned stack frame.
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub(super) struct Rec {
    /// `addr >> 3 | ctx[0..20] << 44` (`ctx` is `ctx >> 3`)
    key_c: u64,
    /// `parent >> 3 | ctx[20..40] << 44`
    parent_c: u64,
    /// `caller | ctx[40..44] << 47 | sub << 51 | kind << 59`
    caller_c: u64,
    pub(super) a: u64,
    b: u64,
    c: u64,
    /// `time_ms:39 | tid:22 | flags:3`
    when: u64,
    /// `x | prev << 32 | next << 48` (the list links: slab indices)
    x_links: u64,
}

const _: () = assert!(std::mem::size_of::<Rec>() == 64);

const LOW44: u64 = (1 << 44) - 1;
const LOW47: u64 = (1 << 47) - 1;
const TIME_BITS: u32 = 39;
const TID_BITS: u32 = 22;
const FLAGS_SHIFT: u32 = TIME_BITS + TID_BITS;
const LOW39: u64 = (1 << TIME_BITS) - 1;
/// Where an [`Obj`]'s kind sits in its `meta` (after the 8 bits of sub).
const KIND_SHIFT: u32 = TIME_BITS + 8;

/// Can `o` be stored (see [`Rec`]), its address as the key (`keyable`)?
/// Always, for what a real library returns. One mask test for the three
/// 8-aligned addresses below 2^47.
#[inline]
pub(super) fn packable(o: &Obj) -> bool {
    const BAD: u64 = !((1 << 47) - 1) | 7;
    ((o.addr | o.ctx | o.parent) as u64 & BAD | (o.caller as u64) >> 47) == 0 && o.addr != 0
}

impl Rec {
    /// The record of `o`, with list links `prev` and `next`.
    #[inline]
    pub(super) fn of(o: &Obj, prev: u16, next: u16) -> Rec {
        let c = o.ctx as u64 >> 3;
        let w = o.facts.pack();
        // sub and kind, as the caller word's top 13 bits.
        let sub_kind = (w.sub as u64) << 51 | (o.meta >> KIND_SHIFT & 0x1f) << 59;
        Rec {
            key_c: (o.addr as u64 >> 3) | c << 44,
            parent_c: (o.parent as u64 >> 3) | (c >> 20) << 44,
            caller_c: o.caller as u64 | (c >> 40) << 47 | sub_kind,
            a: w.a,
            b: w.b,
            c: w.c,
            when: (o.meta & (LOW39 | 7 << FLAGS_SHIFT))
                | (o.tid as u64 & ((1 << TID_BITS) - 1)) << TIME_BITS,
            x_links: w.x as u64 | (prev as u64) << 32 | (next as u64) << 48,
        }
    }

    #[inline]
    pub(super) fn ctx(&self) -> usize {
        let c = self.key_c >> 44 | (self.parent_c >> 44) << 20 | (self.caller_c >> 47 & 0xf) << 40;
        (c << 3) as usize
    }

    /// Is this the record of `addr`?
    #[inline(always)]
    pub(super) fn is(&self, addr: usize) -> bool {
        self.key_c & LOW44 == addr as u64 >> 3
    }

    #[inline]
    pub(super) fn addr(&self) -> usize {
        ((self.key_c & LOW44) << 3) as usize
    }

    #[inline]
    pub(super) fn flags(&self) -> u8 {
        (self.when >> FLAGS_SHIFT) as u8
    }

    #[inline]
    pub(super) fn set_flags(&mut self, flags: u8) {
        self.when = (self.when & !(7 << FLAGS_SHIFT)) | ((flags & 7) as u64) << FLAGS_SHIFT;
    }

    #[inline]
    pub(super) fn prev(&self) -> u16 {
        (self.x_links >> 32) as u16
    }

    #[inline]
    pub(super) fn next(&self) -> u16 {
        (self.x_links >> 48) as u16
    }

    #[inline]
    pub(super) fn set_prev(&mut self, v: u16) {
        self.x_links = (self.x_links & !(0xffff << 32)) | (v as u64) << 32;
    }

    #[inline]
    pub(super) fn set_next(&mut self, v: u16) {
        self.x_links = (self.x_links & !(0xffff << 48)) | (v as u64) << 48;
    }

    #[inline]
    pub(super) fn obj(&self) -> Obj {
        let r = *self;
        let kind = r.caller_c >> 59;
        let meta = (r.when & (LOW39 | 7 << FLAGS_SHIFT)) | kind << KIND_SHIFT;
        let words = Words {
            a: r.a,
            b: r.b,
            c: r.c,
            x: r.x_links as u32,
            sub: (r.caller_c >> 51) as u8,
        };
        Obj {
            addr: r.addr(),
            ctx: r.ctx(),
            parent: ((r.parent_c & LOW44) << 3) as usize,
            caller: (r.caller_c & LOW47) as usize,
            facts: Kind::from_u8(kind as u8).map_or(Facts::None, |k| Facts::unpack(k, words)),
            tid: (r.when >> TIME_BITS) as u32 & ((1 << TID_BITS) - 1),
            meta,
        }
    }
}

/// A record as stored, handed out whole by `take`: unpacked into an [`Obj`]
/// only when needed, so that a destroy pays for its kind and flags alone.
#[derive(Clone, Copy)]
pub struct Stored(pub(super) Rec);

impl Stored {
    /// A buffer for `take` to fill.
    pub const EMPTY: Stored = Stored(Rec {
        key_c: 0,
        parent_c: 0,
        caller_c: 0,
        a: 0,
        b: 0,
        c: 0,
        when: 0,
        x_links: 0,
    });

    #[inline]
    pub fn kind(&self) -> Kind {
        Kind::from_u8(self.raw_kind()).unwrap_or(Kind::Pd)
    }

    #[inline]
    pub(super) fn raw_kind(&self) -> u8 {
        (self.0.caller_c >> 59) as u8
    }

    /// Is its kind one of `kinds`? (No decoding.)
    #[inline]
    pub fn kind_in(&self, kinds: Kinds) -> bool {
        kinds.contains_raw(self.raw_kind())
    }

    #[inline]
    pub fn flags(&self) -> u8 {
        self.0.flags()
    }

    #[inline]
    pub fn obj(&self) -> Obj {
        self.0.obj()
    }
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.obj().fmt(f)
    }
}

impl PartialEq for Stored {
    fn eq(&self, other: &Stored) -> bool {
        self.obj() == other.obj()
    }
}

impl Eq for Stored {}

/// Milliseconds of CLOCK_MONOTONIC_COARSE: a few ns through the vDSO, and
/// immune to wall-clock jumps. Reports convert it to wall-clock time.
#[inline]
pub fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; the clock always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::objects::insert;

    #[test]
    fn records_keep_every_field() {
        for (addr, ctx, parent, caller) in [
            (
                0x7fff_ffff_fff8,
                0x7fff_ffff_fff0,
                0x7fff_0000_0008,
                0x7fff_ffff_ffff,
            ),
            (0x8, 0x10, 0, 1),
            (
                0x5555_1234_5678,
                0x5555_8765_4320,
                0x5555_0000_1000,
                0x5555_dead_beef,
            ),
        ] {
            let mut o = Obj::new(Kind::Qp, addr, ctx, parent, caller, 77).with(Facts::Qp(
                super::super::QpFacts {
                    qp_num: u32::MAX,
                    qp_type: 0xff,
                    send_cq: crate::addr::Addr::new(usize::MAX),
                    recv_cq: crate::addr::Addr::new(1),
                    srq: crate::addr::Addr::new(2),
                },
            ));
            o.set_flag(FLAG_ZOMBIE);
            assert!(packable(&o));
            o.tid = (1 << 22) - 1;
            let mut r = Rec::of(&o, 0xfffe, 0xffff);
            assert_eq!(r.obj(), o);
            assert_eq!((r.addr(), r.ctx()), (addr, ctx));
            assert_eq!(
                (r.prev(), r.next(), r.flags()),
                (0xfffe, 0xffff, FLAG_ZOMBIE)
            );
            r.set_prev(3);
            r.set_next(4);
            r.set_flags(FLAG_CLOSING | FLAG_BACKTRACE);
            assert_eq!((r.prev(), r.next()), (3, 4));
            o.set_flag(FLAG_CLOSING | FLAG_BACKTRACE);
            o.meta &= !((FLAG_ZOMBIE as u64) << FLAGS_SHIFT);
            assert_eq!(r.obj(), o);
        }
        let odd = Obj::new(Kind::Pd, 0x1000, 0x1001, 0, 0, 1);
        assert!(!packable(&odd) && !insert(odd));
    }

    #[test]
    fn meta_fields_round_trip() {
        let mut o = Obj::new(Kind::Qp, 1, 2, 3, 4, 99);
        o.set_flag(FLAG_ZOMBIE);
        assert_eq!(o.kind(), Kind::Qp);
        assert!(o.is_zombie());
        assert_eq!(o.tid, 99);
        assert!(o.time_ms() > 0);
        assert_eq!(Kind::from_u8(0), None);
        assert_eq!(Kind::from_u8(9), Some(Kind::ImportedMr));
    }

    #[test]
    fn kinds_sets() {
        let k = Kind::Mr.bit().or(Kind::ImportedMr);
        assert!(k.contains(Kind::ImportedMr));
        assert!(!k.contains(Kind::Pd));
    }
}
