//! Binary call records: what a traced call stores instead of text, and how
//! its text is made back. The shim writes a verb's id (its index in
//! [`VERBS`]) and raw words; the shim's debug log and `ibv-shim trace`
//! both format them with [`CallText`] and [`ResultText`], so the two texts
//! cannot drift apart.
//!
//! Payload (a record's text area when `FLAG_BINARY` is set): the result's
//! words, then each argument's words (`Show::words` each, little-endian
//! u64), then the strings the kinds ask for (a device's name, a returned C
//! string), each a length byte and its bytes. A payload cut to fit its slot
//! formats what is there and `?` for the rest.

use std::fmt::{self, Write as _};

/// How a word is shown (and how many words and strings it takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Show {
    /// `NULL` or `0x...`.
    Ptr,
    /// Signed decimal.
    Int,
    /// `0x...` (`{:#x}`).
    Hex,
    /// A device: address, name, GUID and vendor as the log shows it.
    /// Words: address, GUID (network order), bits (1 = known device,
    /// 2 = GUID known); string: its name.
    Dev,
    /// A returned C string, quoted (`NULL` when none). Word: the pointer;
    /// string: its bytes.
    Str,
    /// 0, or an errno value: `16 (EBUSY)`.
    Rc,
    /// A GUID (network order) as 16 hex digits.
    Guid,
    /// `void` (no word).
    Void,
    /// Unsigned decimal.
    Uint,
    /// An MR: `NULL` or `0x... (lkey=0x.. rkey=0x..)`. Words: the pointer,
    /// then lkey | rkey << 32.
    Mr,
    /// A QP: `NULL` or `0x... (qp_num=0x..)`. Words: the pointer, qp_num.
    Qp,
    /// An int result and the CQ the call returned through a pointer:
    /// `rc (cq=0x..)`. Words: the result, the CQ (the export passes it
    /// after the arguments' words).
    RcCq,
    /// An int result and the event's type: `rc (event_type=N)`; words as
    /// `RcCq`'s.
    RcEventType,
    /// A data-path event's outcome `posted` (no word).
    Posted,
    /// A completion's status: `status=N`.
    Status,
    /// A device shown after the argument before it as ` on <device>`
    /// (`ibv_close_device(context=0x.. on <device>)`); words as `Dev`'s.
    OnDev,
    /// A device list (`ibv_get_device_list`'s result): `NULL` or
    /// `0x... [N devices: <device>, ...]`, the devices being the verb's
    /// `ListDev` arguments. Words: the list, its length.
    DevList,
    /// A device of a `DevList` result, shown in the result, not in the
    /// call; words as `Dev`'s. A list longer than the verb's `ListDev`
    /// arguments shows the first ones, then `...`.
    ListDev,
}

impl Show {
    pub const fn words(self) -> usize {
        match self {
            Show::Void | Show::Posted => 0,
            Show::Dev | Show::OnDev | Show::ListDev => 3,
            Show::Mr | Show::Qp | Show::RcCq | Show::RcEventType | Show::DevList => 2,
            _ => 1,
        }
    }

    /// Words of a device, and its name when known (`capture` stores them).
    pub const fn is_device(self) -> bool {
        matches!(self, Show::Dev | Show::OnDev | Show::ListDev)
    }
}

/// A `Str` result's length byte that stands for "the first argument's
/// device name, the next string" (`ibv_get_device_name`: one copy).
pub const SAME_AS_DEVICE_NAME: u8 = 0xff;
/// The longest `Str` result kept (its length byte is never the marker).
pub const STR_MAX: usize = 254;

/// Bits of a `Dev`'s third word.
pub const DEV_KNOWN: u64 = 1;
pub const DEV_GUID: u64 = 2;

/// A verb: its name, its arguments (name, shown as), its result.
#[derive(Debug)]
pub struct Verb {
    pub id: u16,
    pub name: &'static str,
    pub args: &'static [(&'static str, Show)],
    pub result: Show,
    /// Words of the payload: the result's and the arguments'.
    pub nwords: usize,
    /// Words of the result (0 to 2).
    pub rwords: usize,
    /// What the shim's encoder may skip (see [`Shape`]).
    pub shape: Shape,
}

/// A verb's payload as the shim writes it, for a shorter path than the
/// walk over its descriptor (the bytes are the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Any other.
    Walk,
    /// The result's word (if any), then the arguments' words as passed:
    /// no device, no string, no second result word.
    Words,
    /// One `Dev` argument and a one-word result (`Str` included).
    OneDev,
}

const fn shape(args: &[Show], result: Show) -> Shape {
    if result.words() > 1 {
        return Shape::Walk;
    }
    if let [Show::Dev] = args {
        return Shape::OneDev;
    }
    if matches!(result, Show::Str) {
        return Shape::Walk;
    }
    let mut i = 0;
    while i < args.len() {
        if args[i].words() != 1 || args[i].is_device() {
            return Shape::Walk;
        }
        i += 1;
    }
    Shape::Words
}

impl Verb {
    /// Words of the payload: the result's, then the arguments'.
    #[inline(always)]
    pub fn words(&self) -> usize {
        self.nwords
    }
}

macro_rules! verbs {
    ($($id:literal $konst:ident = $name:literal ($($arg:ident: $show:ident),*) -> $res:ident;)*) => {
        $(pub static $konst: Verb = Verb {
            id: $id,
            name: $name,
            args: &[$((stringify!($arg), Show::$show)),*],
            result: Show::$res,
            nwords: Show::$res.words() $(+ Show::$show.words())*,
            rwords: Show::$res.words(),
            shape: shape(&[$(Show::$show),*], Show::$res),
        };)*
        /// Every verb with a binary record, by id.
        pub static VERBS: &[&Verb] = &[$(&$konst),*];
    };
}

verbs! {
    0 GET_DEVICE_NAME = "ibv_get_device_name"(device: Dev) -> Str;
    1 GET_DEVICE_GUID = "ibv_get_device_guid"(device: Dev) -> Guid;
    2 GET_DEVICE_INDEX = "ibv_get_device_index"(device: Dev) -> Int;
    3 OPEN_DEVICE = "ibv_open_device"(device: Dev) -> Ptr;
    4 FREE_DEVICE_LIST = "ibv_free_device_list"(list: Ptr) -> Void;
    5 ALLOC_PD = "ibv_alloc_pd"(context: Ptr) -> Ptr;
    6 QUERY_DEVICE = "ibv_query_device"(context: Ptr, device_attr: Ptr) -> Rc;
    7 QUERY_PORT = "ibv_query_port"(context: Ptr, port_num: Int, port_attr: Ptr) -> Rc;
    8 QUERY_GID = "ibv_query_gid"(context: Ptr, port_num: Int, index: Int, gid: Ptr) -> Int;
    9 QUERY_PKEY = "ibv_query_pkey"(context: Ptr, port_num: Int, index: Int, pkey: Ptr) -> Int;
    10 QUERY_QP = "ibv_query_qp"(qp: Ptr, attr: Ptr, attr_mask: Hex, init_attr: Ptr) -> Rc;
    11 MODIFY_SRQ = "ibv_modify_srq"(srq: Ptr, srq_attr: Ptr, srq_attr_mask: Hex) -> Rc;
    12 QUERY_SRQ = "ibv_query_srq"(srq: Ptr, srq_attr: Ptr) -> Rc;
    13 ACK_CQ_EVENTS = "ibv_ack_cq_events"(cq: Ptr, nevents: Int) -> Void;
    14 CREATE_COMP_CHANNEL = "ibv_create_comp_channel"(context: Ptr) -> Ptr;
    15 CREATE_CQ = "ibv_create_cq"(context: Ptr, cqe: Int, cq_context: Ptr, channel: Ptr, comp_vector: Int) -> Ptr;
    16 RESIZE_CQ = "ibv_resize_cq"(cq: Ptr, cqe: Int) -> Rc;
    17 CREATE_SRQ = "ibv_create_srq"(pd: Ptr, srq_init_attr: Ptr) -> Ptr;
    18 CREATE_AH = "ibv_create_ah"(pd: Ptr, attr: Ptr) -> Ptr;
    19 IMPORT_DEVICE = "ibv_import_device"(cmd_fd: Int) -> Ptr;
    20 IMPORT_PD = "ibv_import_pd"(context: Ptr, pd_handle: Int) -> Ptr;
    21 CREATE_AH_FROM_WC = "ibv_create_ah_from_wc"(pd: Ptr, wc: Ptr, grh: Ptr, port_num: Int) -> Ptr;
    22 REG_MR = "ibv_reg_mr"(pd: Ptr, addr: Ptr, length: Uint, access: Hex) -> Mr;
    23 REG_MR_IOVA = "ibv_reg_mr_iova"(pd: Ptr, addr: Ptr, length: Uint, iova: Hex, access: Hex) -> Mr;
    24 REG_MR_IOVA2 = "ibv_reg_mr_iova2"(pd: Ptr, addr: Ptr, length: Uint, iova: Hex, access: Hex) -> Mr;
    25 REG_DMABUF_MR = "ibv_reg_dmabuf_mr"(pd: Ptr, offset: Hex, length: Uint, iova: Hex, fd: Int, access: Hex) -> Mr;
    26 CREATE_QP = "ibv_create_qp"(pd: Ptr, qp_init_attr: Ptr) -> Qp;
    27 MODIFY_QP = "ibv_modify_qp"(qp: Ptr, attr: Ptr, attr_mask: Hex, qp_state: Int) -> Rc;
    28 CLOSE_DEVICE = "ibv_close_device"(context: Ptr, device: OnDev) -> Int;
    29 IMPORT_MR = "ibv_import_mr"(pd: Ptr, mr_handle: Uint) -> Mr;
    // The data path's events (`trace::event_bin`), for `ibv-shim trace --per-qp`.
    30 POST_SEND_EVENT = "post_send"(qp_num: Hex, wr_id: Hex) -> Posted;
    31 POST_RECV_EVENT = "post_recv"(qp_num: Hex, wr_id: Hex) -> Posted;
    32 COMPLETION_EVENT = "completion"(qp_num: Hex, wr_id: Hex, recv: Int) -> Status;
    // The destroys (`by_name`: the shim's generic destroy knows its verb by name).
    33 DEALLOC_PD = "ibv_dealloc_pd"(pd: Ptr) -> Rc;
    34 DEREG_MR = "ibv_dereg_mr"(mr: Ptr) -> Rc;
    35 DESTROY_CQ = "ibv_destroy_cq"(cq: Ptr) -> Rc;
    36 DESTROY_SRQ = "ibv_destroy_srq"(srq: Ptr) -> Rc;
    37 DESTROY_QP = "ibv_destroy_qp"(qp: Ptr) -> Rc;
    38 DESTROY_AH = "ibv_destroy_ah"(ah: Ptr) -> Rc;
    39 DESTROY_COMP_CHANNEL = "ibv_destroy_comp_channel"(channel: Ptr) -> Rc;
    40 UNIMPORT_PD = "ibv_unimport_pd"(pd: Ptr) -> Void;
    41 UNIMPORT_MR = "ibv_unimport_mr"(mr: Ptr) -> Void;
    42 GET_CQ_EVENT = "ibv_get_cq_event"(channel: Ptr) -> RcCq;
    43 GET_ASYNC_EVENT = "ibv_get_async_event"(context: Ptr, event: Ptr) -> RcEventType;
    44 ACK_ASYNC_EVENT = "ibv_ack_async_event"(event: Ptr) -> Void;
    45 FORK_INIT = "ibv_fork_init"() -> Rc;
    46 REREG_MR = "ibv_rereg_mr"(mr: Ptr, flags: Hex, pd: Ptr, addr: Ptr, length: Uint, access: Hex) -> Int;
    // The rest of the exports that used to log text.
    47 GET_DEVICE_LIST = "ibv_get_device_list"(num_devices: Ptr, d0: ListDev, d1: ListDev, d2: ListDev, d3: ListDev, d4: ListDev, d5: ListDev) -> DevList;
    48 VERBS_OPEN_DEVICE = "verbs_open_device"(device: Dev, private_data: Ptr) -> Ptr;
    49 CREATE_QP_EX = "ibv_create_qp_ex"(context: Ptr, qp_init_attr_ex: Ptr) -> Qp;
    50 BIND_MW = "ibv_bind_mw"(qp: Ptr, mw: Ptr) -> Rc;
    51 ATTACH_MCAST = "ibv_attach_mcast"(qp: Ptr, gid: Ptr, lid: Hex) -> Rc;
    52 DETACH_MCAST = "ibv_detach_mcast"(qp: Ptr, gid: Ptr, lid: Hex) -> Rc;
    // The context table's creates (`made`: found by name, `made`).
    53 ALLOC_MW = "ibv_alloc_mw"(context: Ptr, pd: Ptr) -> Ptr;
    54 CREATE_COUNTERS = "ibv_create_counters"(context: Ptr, attr: Ptr) -> Ptr;
    55 REG_DM_MR = "ibv_reg_dm_mr"(context: Ptr, pd: Ptr) -> Ptr;
    56 ALLOC_DM = "ibv_alloc_dm"(context: Ptr, attr: Ptr) -> Ptr;
    57 CREATE_FLOW_ACTION_ESP = "ibv_create_flow_action_esp"(context: Ptr, attr: Ptr) -> Ptr;
    58 ALLOC_PARENT_DOMAIN = "ibv_alloc_parent_domain"(context: Ptr, pd: Ptr) -> Ptr;
    59 ALLOC_TD = "ibv_alloc_td"(context: Ptr, attr: Ptr) -> Ptr;
    60 CREATE_RWQ_IND_TABLE = "ibv_create_rwq_ind_table"(context: Ptr, attr: Ptr) -> Ptr;
    61 CREATE_WQ = "ibv_create_wq"(context: Ptr, pd: Ptr) -> Ptr;
    62 CREATE_CQ_EX = "ibv_create_cq_ex"(context: Ptr, channel: Ptr) -> Ptr;
    63 CREATE_FLOW = "ibv_create_flow"(context: Ptr, qp: Ptr) -> Ptr;
    64 OPEN_QP = "ibv_open_qp"(context: Ptr, xrcd: Ptr) -> Ptr;
    65 CREATE_SRQ_EX = "ibv_create_srq_ex"(context: Ptr, pd: Ptr) -> Ptr;
    66 OPEN_XRCD = "ibv_open_xrcd"(context: Ptr, attr: Ptr) -> Ptr;
    // The context table's destroys (`destroy`).
    67 DEALLOC_MW = "ibv_dealloc_mw"(mw: Ptr) -> Rc;
    68 DESTROY_COUNTERS = "ibv_destroy_counters"(counters: Ptr) -> Rc;
    69 FREE_DM = "ibv_free_dm"(dm: Ptr) -> Rc;
    70 DESTROY_FLOW_ACTION = "ibv_destroy_flow_action"(action: Ptr) -> Rc;
    71 DEALLOC_TD = "ibv_dealloc_td"(td: Ptr) -> Rc;
    72 DESTROY_RWQ_IND_TABLE = "ibv_destroy_rwq_ind_table"(rwq_ind_table: Ptr) -> Rc;
    73 DESTROY_WQ = "ibv_destroy_wq"(wq: Ptr) -> Rc;
    74 CLOSE_XRCD = "ibv_close_xrcd"(xrcd: Ptr) -> Rc;
    75 DESTROY_FLOW = "ibv_destroy_flow"(flow: Ptr) -> Rc;
}

/// The destroy verb `name(arg)` (one pointer argument named `arg`;
/// `void` when `void`), if it has a descriptor.
pub fn destroy(name: &str, arg: &str, void: bool) -> Option<&'static Verb> {
    VERBS[DEALLOC_PD.id as usize..=UNIMPORT_MR.id as usize]
        .iter()
        .chain(&VERBS[DEALLOC_MW.id as usize..=DESTROY_FLOW.id as usize])
        .copied()
        .find(|v| v.name == name && v.args[0].0 == arg && (v.result == Show::Void) == void)
}

/// The context table's create `name(context, arg)` (`arg` the second
/// argument's name), if it has a descriptor.
pub fn made(name: &str, arg: &str) -> Option<&'static Verb> {
    VERBS[ALLOC_MW.id as usize..=OPEN_XRCD.id as usize]
        .iter()
        .copied()
        .find(|v| v.name == name && v.args[1].0 == arg)
}

/// The verb with id `id`, if this reader knows it.
pub fn verb(id: u16) -> Option<&'static Verb> {
    VERBS.get(id as usize).copied()
}

/// Reads a payload: words in order, then strings in order.
struct Reader<'a> {
    verb: &'a Verb,
    p: &'a [u8],
    word: usize,
    string: usize,
}

impl<'a> Reader<'a> {
    fn new(verb: &'a Verb, p: &'a [u8]) -> Reader<'a> {
        Reader {
            verb,
            p,
            word: 0,
            string: verb.words() * 8,
        }
    }
    fn word(&mut self) -> Option<u64> {
        let at = self.word * 8;
        self.word += 1;
        let b = self.p.get(at..at + 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
    fn string(&mut self) -> Option<&'a [u8]> {
        if *self.p.get(self.string)? == SAME_AS_DEVICE_NAME {
            // The next string, left for the device to read.
            self.string += 1;
            let len = *self.p.get(self.string)? as usize;
            let start = self.string + 1;
            return self.p.get(start..(start + len).min(self.p.len()));
        }
        let len = *self.p.get(self.string)? as usize;
        let start = self.string + 1;
        self.string = start + len;
        // A string cut with its record: what is there.
        self.p.get(start..(start + len).min(self.p.len()))
    }
    /// Skips the words of the result (the call's text comes first).
    fn skip_result(&mut self, verb: &Verb) {
        self.word += verb.result.words();
        if verb.result == Show::Str {
            self.string();
        }
    }
}

/// `{v:#x}`, by hand: core::fmt's padded integers cost more than the rest
/// of a debug line (the log's writer thread formats every line with this).
fn hex(f: &mut dyn fmt::Write, v: u64) -> fmt::Result {
    let digits = (64 - v.leading_zeros() as usize).div_ceil(4).max(1);
    f.write_str("0x")?;
    hex_digits(f, v, digits)
}

/// The lowest `digits` hex digits of `v` (zero-padded), lower case.
fn hex_digits(f: &mut dyn fmt::Write, v: u64, digits: usize) -> fmt::Result {
    let mut buf = [b'0'; 16];
    let digits = digits.min(16);
    for (i, b) in buf[16 - digits..].iter_mut().rev().enumerate() {
        *b = b"0123456789abcdef"[(v >> (4 * i)) as usize & 15];
    }
    f.write_str(std::str::from_utf8(&buf[16 - digits..]).unwrap_or("?"))
}

fn ptr(f: &mut dyn fmt::Write, v: u64) -> fmt::Result {
    if v == 0 {
        f.write_str("NULL")
    } else {
        hex(f, v)
    }
}

/// One value of kind `show`.
fn value(f: &mut dyn fmt::Write, show: Show, r: &mut Reader<'_>) -> fmt::Result {
    if show == Show::Void {
        return f.write_str("void");
    }
    if show == Show::Posted {
        return f.write_str("posted");
    }
    let Some(w) = r.word() else {
        return f.write_str("?");
    };
    match show {
        Show::Ptr => ptr(f, w),
        Show::Int => write!(f, "{}", w as i64),
        Show::Uint => write!(f, "{w}"),
        Show::Status => write!(f, "status={}", w as i64),
        Show::RcCq | Show::RcEventType => {
            let v = r.word().unwrap_or(0);
            write!(f, "{} (", w as i64)?;
            if show == Show::RcCq {
                f.write_str("cq=")?;
                ptr(f, v)?;
            } else {
                write!(f, "event_type={}", v as i64)?;
            }
            f.write_char(')')
        }
        Show::Mr | Show::Qp => {
            let more = r.word().unwrap_or(0);
            if w == 0 {
                return f.write_str("NULL");
            }
            if show == Show::Mr {
                write!(f, "{w:#x} (lkey={:#x} rkey={:#x})", more as u32, more >> 32)
            } else {
                write!(f, "{w:#x} (qp_num={:#x})", more as u32)
            }
        }
        Show::Hex => hex(f, w),
        Show::Guid => hex_digits(f, u64::from_be(w), 16),
        Show::Rc => match w as i32 {
            0 => f.write_str("0"),
            rc => write!(f, "{rc} ({})", crate::errno_name(rc)),
        },
        Show::Str => {
            if w == 0 {
                return f.write_str("NULL");
            }
            let s = String::from_utf8_lossy(r.string().unwrap_or(b"?"));
            if s.bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
            {
                f.write_char('"')?;
                f.write_str(&s)?;
                f.write_char('"')
            } else {
                write!(f, "{s:?}")
            }
        }
        Show::DevList => {
            let n = r.word().unwrap_or(0);
            if w == 0 {
                return f.write_str("NULL");
            }
            hex(f, w)?;
            write!(f, " [{n} devices: ")?;
            // The list's devices are the last arguments, after
            // arguments without strings (`num_devices`).
            let args = r.verb.args;
            r.word += args
                .iter()
                .filter(|a| a.1 != Show::ListDev)
                .map(|a| a.1.words())
                .sum::<usize>();
            let slots = args.iter().filter(|a| a.1 == Show::ListDev).count();
            let shown = slots.min(n as usize);
            for i in 0..shown {
                if i > 0 {
                    f.write_str(", ")?;
                }
                value(f, Show::Dev, r)?;
            }
            if shown < n as usize {
                f.write_str(if shown > 0 { ", ..." } else { "..." })?;
            }
            f.write_char(']')
        }
        Show::Dev | Show::OnDev | Show::ListDev => {
            let guid = r.word().unwrap_or(0);
            let bits = r.word().unwrap_or(0);
            if w == 0 {
                return f.write_str("NULL");
            }
            hex(f, w)?;
            if bits & DEV_KNOWN != 0 {
                let name = String::from_utf8_lossy(r.string().unwrap_or(b"?"));
                let guid = (bits & DEV_GUID != 0).then_some(guid);
                f.write_char(' ')?;
                f.write_str(&name)?;
                if let Some(g) = guid {
                    f.write_char('/')?;
                    hex_digits(f, u64::from_be(g), 16)?;
                }
                if let Some(v) = crate::vendor::vendor(&name, guid) {
                    f.write_str(" [")?;
                    f.write_str(v)?;
                    f.write_char(']')?;
                }
            }
            Ok(())
        }
        Show::Void | Show::Posted => unreachable!("handled above"),
    }
}

/// `name(arg=value, ...)`, as the debug log shows a call.
pub struct CallText<'a>(pub &'a Verb, pub &'a [u8]);

impl fmt::Display for CallText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CallText(verb, payload) = *self;
        let mut r = Reader::new(verb, payload);
        r.skip_result(verb);
        f.write_str(verb.name)?;
        f.write_char('(')?;
        for (i, (name, show)) in verb.args.iter().enumerate() {
            if *show == Show::ListDev {
                // Shown in the result (`DevList`).
                continue;
            }
            if *show == Show::OnDev {
                f.write_str(" on ")?;
                value(f, *show, &mut r)?;
                continue;
            }
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
            f.write_char('=')?;
            value(f, *show, &mut r)?;
        }
        f.write_char(')')
    }
}

/// The result, as the debug log shows it.
pub struct ResultText<'a>(pub &'a Verb, pub &'a [u8]);

impl fmt::Display for ResultText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ResultText(verb, payload) = *self;
        // The result's string, if any, is the first one.
        let mut r = Reader::new(verb, payload);
        value(f, verb.result, &mut r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_indices() {
        for (i, v) in VERBS.iter().enumerate() {
            assert_eq!(v.id as usize, i, "{}", v.name);
            let words = v.result.words() + v.args.iter().map(|a| a.1.words()).sum::<usize>();
            assert_eq!(v.nwords, words, "{}", v.name);
            // A shape's promise, which the shim's shortcut relies on.
            match v.shape {
                Shape::Words => assert!(
                    v.rwords <= 1
                        && v.result != Show::Str
                        && v.args.iter().all(|a| a.1.words() == 1 && !a.1.is_device()),
                    "{}",
                    v.name
                ),
                Shape::OneDev => assert!(
                    v.rwords == 1 && matches!(v.args, [(_, Show::Dev)]),
                    "{}",
                    v.name
                ),
                Shape::Walk => {}
            }
        }
    }

    fn payload(words: &[u64], strings: &[&[u8]]) -> Vec<u8> {
        let mut p: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        for s in strings {
            p.push(s.len() as u8);
            p.extend_from_slice(s);
        }
        p
    }

    #[test]
    fn hex_by_hand_is_core_fmts() {
        for v in [
            0u64,
            1,
            0xf,
            0x10,
            0xdead_beef,
            0x0002_c903_0000_1234,
            u64::MAX,
        ] {
            let mut a = String::new();
            hex(&mut a, v).unwrap();
            assert_eq!(a, format!("{v:#x}"));
            let mut b = String::new();
            hex_digits(&mut b, v, 16).unwrap();
            assert_eq!(b, format!("{v:016x}"));
        }
    }

    #[test]
    fn texts_match_the_log() {
        let guid = 0x0002_c903_0000_1234u64.to_be();
        let p = payload(
            &[0x7000, 0x5000, guid, DEV_KNOWN | DEV_GUID],
            &[b"mlx5_0", b"mlx5_0"],
        );
        assert_eq!(
            CallText(&GET_DEVICE_NAME, &p).to_string(),
            "ibv_get_device_name(device=0x5000 mlx5_0/0002c90300001234 [NVIDIA/Mellanox])"
        );
        assert_eq!(ResultText(&GET_DEVICE_NAME, &p).to_string(), "\"mlx5_0\"");
        // The result said once: the device's name.
        let mut p = payload(&[0x5040, 0x5000, guid, DEV_KNOWN | DEV_GUID], &[b"mlx5_0"]);
        p.insert(32, SAME_AS_DEVICE_NAME);
        assert_eq!(
            CallText(&GET_DEVICE_NAME, &p).to_string(),
            "ibv_get_device_name(device=0x5000 mlx5_0/0002c90300001234 [NVIDIA/Mellanox])"
        );
        assert_eq!(ResultText(&GET_DEVICE_NAME, &p).to_string(), "\"mlx5_0\"");
        let p = payload(&[16, 0xab0, 0, 1], &[]);
        assert_eq!(
            CallText(&RESIZE_CQ, &p).to_string(),
            "ibv_resize_cq(cq=0xab0, cqe=0)"
        );
        assert_eq!(ResultText(&RESIZE_CQ, &p).to_string(), "16 (EBUSY)");
        let p = payload(&[0, u64::MAX], &[]);
        assert_eq!(
            CallText(&IMPORT_DEVICE, &p).to_string(),
            "ibv_import_device(cmd_fd=-1)"
        );
        assert_eq!(ResultText(&IMPORT_DEVICE, &p).to_string(), "NULL");
        let q = payload(&[0, 0x7000, 0x5000, 0, DEV_KNOWN], &[b"rxe0"]);
        assert_eq!(
            CallText(&CLOSE_DEVICE, &q).to_string(),
            "ibv_close_device(context=0x7000 on 0x5000 rxe0 [soft-RoCE (rxe)])"
        );
        let q = payload(&[0xa000, 0x1234_0000_5678, 0xb000, 0x100, 4096, 7], &[]);
        assert_eq!(
            CallText(&REG_MR, &q).to_string(),
            "ibv_reg_mr(pd=0xb000, addr=0x100, length=4096, access=0x7)"
        );
        assert_eq!(
            ResultText(&REG_MR, &q).to_string(),
            "0xa000 (lkey=0x5678 rkey=0x1234)"
        );
        let q = payload(&[0, 0x6000, 0xc000], &[]);
        assert_eq!(
            CallText(&GET_CQ_EVENT, &q).to_string(),
            "ibv_get_cq_event(channel=0xc000)"
        );
        assert_eq!(ResultText(&GET_CQ_EVENT, &q).to_string(), "0 (cq=0x6000)");
        // A list: its devices in the result, not in the call; more than
        // the record's six slots are cut and marked.
        let dev = |at: u64, name: &'static [u8]| ([at, 0, DEV_KNOWN], name);
        let devs: Vec<_> = (0..6).map(|i| dev(0x100 * (i + 1), b"rxe0")).collect();
        let mut words = vec![0x9000, 8, 0x7ff0];
        words.extend(devs.iter().flat_map(|d| d.0));
        let q = payload(&words, &devs.iter().map(|d| d.1).collect::<Vec<_>>());
        assert_eq!(
            CallText(&GET_DEVICE_LIST, &q).to_string(),
            "ibv_get_device_list(num_devices=0x7ff0)"
        );
        let one = "rxe0 [soft-RoCE (rxe)]";
        assert_eq!(
            ResultText(&GET_DEVICE_LIST, &q).to_string(),
            format!(
                "0x9000 [8 devices: 0x100 {one}, 0x200 {one}, 0x300 {one}, 0x400 {one}, \
                 0x500 {one}, 0x600 {one}, ...]"
            )
        );
        // Unused slots: NULL devices.
        let mut words = vec![0x9000, 1, 0, 0x100, 0, DEV_KNOWN];
        words.resize(GET_DEVICE_LIST.words(), 0);
        let q = payload(&words, &[b"rxe0"]);
        assert_eq!(
            ResultText(&GET_DEVICE_LIST, &q).to_string(),
            format!("0x9000 [1 devices: 0x100 {one}]")
        );
        // Cut: what is there, then `?`.
        assert_eq!(
            CallText(&QUERY_PORT, &p).to_string(),
            "ibv_query_port(context=0xffffffffffffffff, port_num=?, port_attr=?)"
        );
    }
}
