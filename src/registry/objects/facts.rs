//! What a record knows of its object, by kind ([`Facts`]): filled by the
//! verb that made it, read by the reports and the data-path checks, and
//! packed into the stored record's five kind-specific words only here.

use verbs_abi::{ibv_cq, ibv_srq, ibv_td};

use super::record::Kind;
use crate::addr::Addr;

/// An MR's keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keys {
    pub lkey: u32,
    pub rkey: u32,
}

/// The verb that registered an MR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum MrVia {
    #[default]
    RegMr,
    RegMrIova,
    RegMrIova2,
    RegDmabufMr,
    RegDmMr,
}

impl MrVia {
    const ALL: [MrVia; 5] = [
        MrVia::RegMr,
        MrVia::RegMrIova,
        MrVia::RegMrIova2,
        MrVia::RegDmabufMr,
        MrVia::RegDmMr,
    ];

    /// The verb's name.
    pub fn name(self) -> &'static str {
        use trace_format::verbs::{REG_DMABUF_MR, REG_DM_MR, REG_MR, REG_MR_IOVA, REG_MR_IOVA2};
        match self {
            MrVia::RegMr => REG_MR.name,
            MrVia::RegMrIova => REG_MR_IOVA.name,
            MrVia::RegMrIova2 => REG_MR_IOVA2.name,
            MrVia::RegDmabufMr => REG_DMABUF_MR.name,
            MrVia::RegDmMr => REG_DM_MR.name,
        }
    }

    /// Are the SGE addresses of its MR virtual addresses inside `[addr,
    /// addr + length)`? Not an iova, a dma-buf offset or a device-memory
    /// offset (their range is not checked).
    pub fn virtual_range(self) -> bool {
        matches!(self, MrVia::RegMr | MrVia::RegMrIova2)
    }

    fn from_u8(v: u8) -> MrVia {
        Self::ALL.get(v as usize).copied().unwrap_or_default()
    }
}

/// A registered MR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrFacts {
    /// Its start (the offset into a dma-buf or device memory for those).
    pub addr: u64,
    pub length: u64,
    pub keys: Keys,
    /// `IBV_ACCESS_*`.
    pub access: u32,
    pub via: MrVia,
}

/// A QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpFacts {
    pub qp_num: u32,
    /// `enum ibv_qp_type`, as a number.
    pub qp_type: u8,
    pub send_cq: Addr<ibv_cq>,
    pub recv_cq: Addr<ibv_cq>,
    pub srq: Addr<ibv_srq>,
}

/// The verb that created an AH.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum AhVia {
    #[default]
    CreateAh,
    /// Its LID is the sender's (`slid`), answered.
    CreateAhFromWc,
}

impl AhVia {
    pub fn name(self) -> &'static str {
        use trace_format::verbs::{CREATE_AH, CREATE_AH_FROM_WC};
        match self {
            AhVia::CreateAh => CREATE_AH.name,
            AhVia::CreateAhFromWc => CREATE_AH_FROM_WC.name,
        }
    }
}

/// An address handle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AhFacts {
    pub dlid: u16,
    pub port_num: u8,
    pub sl: u8,
    pub global: bool,
    pub via: AhVia,
}

/// What a record knows of its object, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Facts {
    /// Nothing beyond the record's common fields.
    #[default]
    None,
    /// A PD or an imported PD: its kernel handle.
    Pd {
        handle: u32,
    },
    /// A parent domain: its handle, and its TD (what keeps
    /// `ibv_dealloc_td` busy).
    ParentDomain {
        handle: u32,
        td: Addr<ibv_td>,
    },
    Mr(MrFacts),
    /// An imported MR: its handle, range and keys.
    ImportedMr {
        handle: u32,
        addr: u64,
        length: u64,
        keys: Keys,
    },
    Cq {
        cqe: i32,
        comp_vector: u32,
    },
    CompChannel {
        fd: i32,
    },
    Srq {
        max_wr: u32,
        max_sge: u32,
        srq_limit: u32,
    },
    Qp(QpFacts),
    Ah(AhFacts),
    Mw {
        mw_type: u32,
        rkey: u32,
    },
    Dm {
        length: u64,
    },
    /// The other table-made kinds: one number (a flow's handle, a WQ's
    /// number, an RWQ table's size).
    Id(u32),
}

/// The stored record's kind-specific words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Words {
    pub(super) a: u64,
    pub(super) b: u64,
    pub(super) c: u64,
    pub(super) x: u32,
    pub(super) sub: u8,
}

impl Keys {
    fn word(self) -> u64 {
        self.lkey as u64 | (self.rkey as u64) << 32
    }
    fn of(w: u64) -> Keys {
        Keys {
            lkey: w as u32,
            rkey: (w >> 32) as u32,
        }
    }
}

impl Facts {
    /// An SRQ's sizes, as its creation attributes give them.
    pub fn srq(attr: &verbs_abi::ibv_srq_attr) -> Facts {
        Facts::Srq {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        }
    }

    /// An MR's (or an imported MR's) range and keys.
    pub fn mr_range(&self) -> Option<(u64, u64, Keys)> {
        match *self {
            Facts::Mr(m) => Some((m.addr, m.length, m.keys)),
            Facts::ImportedMr {
                addr, length, keys, ..
            } => Some((addr, length, keys)),
            _ => None,
        }
    }

    /// The QP's facts.
    pub fn qp(&self) -> Option<QpFacts> {
        match *self {
            Facts::Qp(q) => Some(q),
            _ => None,
        }
    }

    /// These facts as a `kind`'s (what a record of that kind stores and
    /// gives back): `None` becomes the kind's facts, all zero.
    pub fn of_kind(self, kind: Kind) -> Facts {
        Facts::unpack(kind, self.pack())
    }

    #[inline(always)]
    pub(super) fn pack(&self) -> Words {
        let w = Words::default();
        match *self {
            Facts::None => w,
            Facts::Pd { handle } | Facts::Id(handle) => Words {
                a: handle as u64,
                ..w
            },
            Facts::ParentDomain { handle, td } => Words {
                a: handle as u64,
                b: td.get() as u64,
                ..w
            },
            Facts::Mr(m) => Words {
                a: m.addr,
                b: m.length,
                c: m.keys.word(),
                x: m.access,
                sub: m.via as u8,
            },
            Facts::ImportedMr {
                handle,
                addr,
                length,
                keys,
            } => Words {
                a: addr,
                b: length,
                c: keys.word(),
                x: handle,
                ..w
            },
            Facts::Cq { cqe, comp_vector } => Words {
                a: comp_vector as u64,
                x: cqe as u32,
                ..w
            },
            Facts::CompChannel { fd } => Words { x: fd as u32, ..w },
            Facts::Srq {
                max_wr,
                max_sge,
                srq_limit,
            } => Words {
                a: max_sge as u64,
                b: srq_limit as u64,
                x: max_wr,
                ..w
            },
            Facts::Qp(q) => Words {
                a: q.send_cq.get() as u64,
                b: q.recv_cq.get() as u64,
                c: q.srq.get() as u64,
                x: q.qp_num,
                sub: q.qp_type,
            },
            Facts::Ah(h) => Words {
                a: h.dlid as u64,
                b: h.port_num as u64,
                c: h.sl as u64 | (h.global as u64) << 8,
                sub: h.via as u8,
                ..w
            },
            Facts::Mw { mw_type, rkey } => Words {
                a: rkey as u64,
                x: mw_type,
                ..w
            },
            Facts::Dm { length } => Words { a: length, ..w },
        }
    }

    /// The facts of a `kind` stored as `w` (what `pack` made of them).
    pub(super) fn unpack(kind: Kind, w: Words) -> Facts {
        match kind {
            Kind::Pd | Kind::ImportedPd => Facts::Pd { handle: w.a as u32 },
            Kind::ParentDomain => Facts::ParentDomain {
                handle: w.a as u32,
                td: Addr::new(w.b as usize),
            },
            Kind::Mr => Facts::Mr(MrFacts {
                addr: w.a,
                length: w.b,
                keys: Keys::of(w.c),
                access: w.x,
                via: MrVia::from_u8(w.sub),
            }),
            Kind::ImportedMr => Facts::ImportedMr {
                handle: w.x,
                addr: w.a,
                length: w.b,
                keys: Keys::of(w.c),
            },
            Kind::Cq => Facts::Cq {
                cqe: w.x as i32,
                comp_vector: w.a as u32,
            },
            Kind::CompChannel => Facts::CompChannel { fd: w.x as i32 },
            Kind::Srq => Facts::Srq {
                max_wr: w.x,
                max_sge: w.a as u32,
                srq_limit: w.b as u32,
            },
            Kind::Qp => Facts::Qp(QpFacts {
                qp_num: w.x,
                qp_type: w.sub,
                send_cq: Addr::new(w.a as usize),
                recv_cq: Addr::new(w.b as usize),
                srq: Addr::new(w.c as usize),
            }),
            Kind::Ah => Facts::Ah(AhFacts {
                dlid: w.a as u16,
                port_num: w.b as u8,
                sl: w.c as u8,
                global: w.c >> 8 & 1 != 0,
                via: if w.sub == AhVia::CreateAhFromWc as u8 {
                    AhVia::CreateAhFromWc
                } else {
                    AhVia::CreateAh
                },
            }),
            Kind::Mw => Facts::Mw {
                mw_type: w.x,
                rkey: w.a as u32,
            },
            Kind::Dm => Facts::Dm { length: w.a },
            Kind::Xrcd
            | Kind::Wq
            | Kind::RwqIndTable
            | Kind::Flow
            | Kind::FlowAction
            | Kind::Td
            | Kind::Counters => Facts::Id(w.a as u32),
        }
    }
}
