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

const fn shape(args: &[(&str, Show)], result: Show) -> Shape {
    if result.words() > 1 {
        return Shape::Walk;
    }
    if let [(_, Show::Dev)] = args {
        return Shape::OneDev;
    }
    if matches!(result, Show::Str) {
        return Shape::Walk;
    }
    let mut i = 0;
    while i < args.len() {
        if args[i].1.words() != 1 || args[i].1.is_device() {
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

    /// The raw words a recorder hands the shim's encoder: one per
    /// argument, then a two-word result's second (the encoder reads the
    /// rest: a device's name and GUID, an MR's keys, a QP's number).
    pub const fn raw_words(&self) -> usize {
        self.args.len()
            + match self.result {
                Show::RcCq | Show::RcEventType | Show::DevList => 1,
                _ => 0,
            }
    }
}

/// Makes the descriptors from the declaration table (`decl`): a
/// `static` per verb, and [`VERBS`] by id.
macro_rules! descriptors {
    (
        verbs [$(
            [$kind:ident $lib:ident $id:literal $konst:ident $slot:ident $name:ident
                [$($arg:ident: $t:ty => $show:tt),*] [$($x:ident: $xt:ty => $xshow:ident),*]
                $rt:ty => $res:ident [$($rx:tt)*]]
        )*]
        called [$($called:tt)*]
    ) => {
        $(pub static $konst: Verb = {
            const ALL: &[(&str, Option<Show>)] = &[
                $((stringify!($arg), $crate::__show!($show)),)*
                $((stringify!($x), Some(Show::$xshow)),)*
            ];
            const ARGS: [(&str, Show); recorded(ALL)] = keep(ALL);
            Verb {
                id: $id,
                name: stringify!($name),
                args: &ARGS,
                result: Show::$res,
                nwords: Show::$res.words() + arg_words(&ARGS),
                rwords: Show::$res.words(),
                shape: shape(&ARGS, Show::$res),
            }
        };)*
        /// Every verb with a binary record, by id (every library's).
        pub static VERBS: &[&Verb] = &{
            let mut all: [&Verb; 0 $(+ { let _ = $id; 1 })*] = [&UNUSED; 0 $(+ { let _ = $id; 1 })*];
            $(all[$id] = &$konst;)*
            all
        };
    };
}

/// The place of an id the table does not declare (none: `ids_are_indices`).
static UNUSED: Verb = Verb {
    id: u16::MAX,
    name: "?",
    args: &[],
    result: Show::Void,
    nwords: 0,
    rwords: 0,
    shape: Shape::Walk,
};

/// How many of a declaration's arguments are recorded.
const fn recorded(all: &[(&str, Option<Show>)]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < all.len() {
        if all[i].1.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The recorded arguments of a declaration, in order.
const fn keep<const N: usize>(all: &[(&'static str, Option<Show>)]) -> [(&'static str, Show); N] {
    let mut out = [("", Show::Void); N];
    let (mut n, mut i) = (0, 0);
    while i < all.len() {
        if let Some(show) = all[i].1 {
            out[n] = (all[i].0, show);
            n += 1;
        }
        i += 1;
    }
    out
}

const fn arg_words(args: &[(&str, Show)]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < args.len() {
        n += args[i].1.words();
        i += 1;
    }
    n
}

crate::ibverbs!(descriptors);

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

    /// The declaration table describes the records of format version 4
    /// as they were: ids, names, arguments and shows (a file written
    /// before still decodes the same). New verbs take ids after these.
    #[test]
    fn the_table_keeps_version_4s_records() {
        let v4 = include_str!("verbs_v4.txt");
        for (line, v) in v4.lines().zip(VERBS) {
            let args: Vec<String> = v.args.iter().map(|(n, s)| format!("{n}: {s:?}")).collect();
            let now = format!("{} {}({}) -> {:?}", v.id, v.name, args.join(", "), v.result);
            assert_eq!(now, line);
        }
        assert!(VERBS.len() >= v4.lines().count());
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
