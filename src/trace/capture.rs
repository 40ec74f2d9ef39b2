//! A binary call record's payload (the layout is `trace_format::verbs`'s):
//! the result's and arguments' raw words, plus the few strings the text
//! needs that may be gone by the time it is read (a device's name, a
//! returned C string). A few stores and, for a device, one registry
//! lookup: no formatting on the calling thread.

use std::ffi::c_char;

use trace_format::verbs::{Shape, Show, Verb, DEV_GUID, DEV_KNOWN, SAME_AS_DEVICE_NAME, STR_MAX};
use verbs_abi::{ibv_device, ibv_mr, ibv_qp};

use crate::registry::devices;

/// Writes the payload of `verb(args) = result` at `out` (room for `cap`
/// bytes); returns its length, every byte below it written, and whether
/// it was cut to fit.
///
/// # Safety
/// `out` is valid for `cap` bytes; `args` has one word per argument (then,
/// for an `RcCq`, `RcEventType` or `DevList` result, its value); a
/// `Dev` word is NULL or a device pointer, a `Str` result NULL or a C
/// string from the real library, an `Mr` or `Qp` result NULL or the
/// object the real library just returned.
#[inline(always)]
pub unsafe fn encode(
    verb: &Verb,
    args: &[u64],
    result: u64,
    out: *mut u8,
    cap: usize,
) -> (usize, bool) {
    // The usual shapes without the walk over the descriptor (the same
    // bytes; `Shape`); the rest, or a payload that may not fit, walks.
    match verb.shape {
        Shape::Words if verb.words() * 8 <= cap && args.len() + verb.rwords == verb.words() => {
            // SAFETY: the words fit (checked); one word per argument.
            unsafe { words(verb.rwords > 0, args, result, out) }
        }
        // SAFETY: as `encode`'s: a device (or NULL) argument, a C string
        // result from the real library.
        Shape::OneDev if cap >= 32 && !args.is_empty() => unsafe {
            one_device(verb.result == Show::Str, args[0], result, out, cap)
        },
        // SAFETY: as `encode`'s.
        _ => unsafe { walk(verb, args, result, out, cap) },
    }
}

/// `encode` for a `OneDev` verb (`args` being `[dev]`), for a caller
/// that knows the shape: no dispatch on it.
///
/// # Safety
/// As `encode`'s.
#[inline(always)]
pub unsafe fn encode_dev(
    verb: &Verb,
    dev: u64,
    result: u64,
    out: *mut u8,
    cap: usize,
) -> (usize, bool) {
    debug_assert!(verb.shape == Shape::OneDev);
    if cap >= 32 {
        // SAFETY: as `encode`'s.
        unsafe { one_device(verb.result == Show::Str, dev, result, out, cap) }
    } else {
        // SAFETY: as `encode`'s.
        unsafe { walk(verb, &[dev], result, out, cap) }
    }
}

/// A `Words` verb's payload: the result's word, if it has one, then the
/// arguments'.
///
/// # Safety
/// `out` is valid for that many words.
#[inline(always)]
unsafe fn words(result_word: bool, args: &[u64], result: u64, out: *mut u8) -> (usize, bool) {
    let mut at = out;
    if result_word {
        // SAFETY: the first of the words `out` has room for.
        unsafe { at.cast::<u64>().write_unaligned(result) };
        at = at.wrapping_add(8);
    }
    // SAFETY: the rest of them.
    unsafe { std::ptr::copy_nonoverlapping(args.as_ptr().cast::<u8>(), at, args.len() * 8) };
    (usize::from(result_word) * 8 + args.len() * 8, false)
}

/// A `OneDev` verb's payload: the result's word, the device's three, the
/// result's string if it is one, the device's name.
///
/// # Safety
/// `out` is valid for `cap` bytes, at least 32; `dev` is NULL or a device
/// pointer; a `Str` result is NULL or a C string from the real library.
#[inline(always)]
unsafe fn one_device(
    str_result: bool,
    dev: u64,
    result: u64,
    out: *mut u8,
    cap: usize,
) -> (usize, bool) {
    let d = Device::of(dev as *const ibv_device);
    let words = out.cast::<u64>();
    // SAFETY: cap >= 32: the four words.
    unsafe {
        words.write_unaligned(result);
        words.add(1).write_unaligned(dev);
        words.add(2).write_unaligned(d.guid.unwrap_or(0));
        words.add(3).write_unaligned(d.bits());
    }
    let (mut at, mut cut) = (32, false);
    if str_result && result != 0 {
        if d.known && d.name() as u64 == result && at < cap {
            // SAFETY: at < cap.
            unsafe { *out.add(at) = SAME_AS_DEVICE_NAME };
            at += 1;
        } else {
            let mut w = Writer::strings_at(out, cap, at);
            // SAFETY: per the contract, a C string from the real library.
            unsafe { w.c_string(result as *const c_char, STR_MAX) };
            (at, cut) = (w.strings, w.cut);
        }
    }
    if d.known {
        let mut w = Writer::strings_at(out, cap, at);
        w.device_name(d.name());
        (at, cut) = (w.strings, cut | w.cut);
    }
    (at, cut)
}

/// Any verb: a walk over its descriptor, argument by argument.
///
/// # Safety
/// As `encode`'s.
#[inline(never)]
unsafe fn walk(verb: &Verb, args: &[u64], result: u64, out: *mut u8, cap: usize) -> (usize, bool) {
    let mut w = Writer {
        out,
        cap,
        words: 0,
        strings: verb.words() * 8,
        cut: false,
    };
    if w.strings > cap {
        return (0, true);
    }
    // The first argument's device, looked up once.
    let first = match (verb.args.first(), args.first()) {
        (Some(&(_, Show::Dev)), Some(&d)) => Some(Device::of(d as *const ibv_device)),
        _ => None,
    };
    // A `void` verb's or an event's result has no word: the arguments'
    // words come first.
    if verb.rwords > 0 {
        w.word(result);
    }
    // An MR's keys, a QP's number: read now, the object may be gone later;
    // a value returned through a pointer: the word after the arguments'.
    let more = match verb.result {
        Show::Mr if result != 0 => {
            let mr = result as *const ibv_mr;
            // SAFETY: per the contract, the MR the real library just returned.
            unsafe { u64::from((*mr).lkey) | u64::from((*mr).rkey) << 32 }
        }
        // SAFETY: per the contract, the QP the real library just returned.
        Show::Qp if result != 0 => u64::from(unsafe { (*(result as *const ibv_qp)).qp_num }),
        Show::RcCq | Show::RcEventType | Show::DevList => {
            args.get(verb.args.len()).copied().unwrap_or(0)
        }
        _ => 0,
    };
    if verb.rwords > 1 {
        w.word(more);
    }
    if verb.result == Show::Str && result != 0 {
        // ibv_get_device_name returns the device's own name: a marker
        // rather than the same bytes twice (the name follows).
        if first.is_some_and(|d| d.known && d.name() as u64 == result) && w.strings < cap {
            // SAFETY: strings < cap: inside the payload area.
            unsafe { *w.out.add(w.strings) = SAME_AS_DEVICE_NAME };
            w.strings += 1;
        } else {
            // SAFETY: per the contract, a C string from the real library.
            unsafe { w.c_string(result as *const c_char, STR_MAX) };
        }
    }
    for (i, (&(_, show), &a)) in verb.args.iter().zip(args).enumerate() {
        if show.is_device() {
            let d = match first {
                Some(d) if i == 0 => d,
                _ => Device::of(a as *const ibv_device),
            };
            w.device(d);
        } else {
            w.word(a);
        }
    }
    // Fewer words than the verb has (not per the contract): zeros, so that
    // every byte below the length is written (`log::entry` relies on it).
    let end = verb.words() * 8;
    if w.words * 8 < end {
        // SAFETY: below `end`, which is within `cap` (checked above).
        unsafe { w.out.add(w.words * 8).write_bytes(0, end - w.words * 8) };
    }
    (w.strings, w.cut)
}

/// A device argument: its address and what the registry knows of it.
#[derive(Clone, Copy)]
struct Device {
    at: *const ibv_device,
    guid: Option<u64>,
    known: bool,
}

impl Device {
    /// One registry lookup when the GUID is cached (the usual case: the
    /// list call caches it while the debug gate is open).
    #[inline(always)]
    fn of(d: *const ibv_device) -> Device {
        let guid = if d.is_null() {
            None
        } else {
            devices::cached_guid(d)
        };
        Device {
            at: d,
            guid,
            known: guid.is_some() || (!d.is_null() && devices::is_known(d)),
        }
    }
    /// Its third word.
    #[inline(always)]
    fn bits(&self) -> u64 {
        (u64::from(self.known) * DEV_KNOWN) | (u64::from(self.guid.is_some()) * DEV_GUID)
    }

    /// Where its name is (no read).
    fn name(&self) -> *const u8 {
        self.at
            .cast::<u8>()
            .wrapping_add(std::mem::offset_of!(ibv_device, name))
    }
}

struct Writer {
    out: *mut u8,
    cap: usize,
    words: usize,
    strings: usize,
    cut: bool,
}

impl Writer {
    /// A writer of strings only, from `at`.
    #[inline(always)]
    fn strings_at(out: *mut u8, cap: usize, at: usize) -> Writer {
        Writer {
            out,
            cap,
            words: 0,
            strings: at,
            cut: false,
        }
    }

    #[inline(always)]
    fn word(&mut self, v: u64) {
        // SAFETY: the words fit (checked by `encode`), 8 bytes each.
        unsafe {
            self.out
                .add(self.words * 8)
                .cast::<u64>()
                .write_unaligned(v)
        };
        self.words += 1;
    }

    /// A length byte and up to `max` bytes of the string at `s`.
    ///
    /// # Safety
    /// `s` is a NUL-terminated string, or `max` bytes are readable there.
    #[inline(always)]
    unsafe fn c_string(&mut self, s: *const c_char, max: usize) {
        if self.strings >= self.cap {
            self.cut = true;
            return;
        }
        let room = (self.cap - self.strings - 1).min(max);
        // SAFETY: strnlen reads at most `room` + 1 bytes (a NUL-terminated
        // string, or `max` readable bytes); the copy stays below `cap`.
        unsafe {
            let len = libc::strnlen(s, room + 1);
            let n = len.min(room);
            self.cut |= len > room;
            std::ptr::copy_nonoverlapping(s.cast::<u8>(), self.out.add(self.strings + 1), n);
            *self.out.add(self.strings) = n as u8;
            self.strings += 1 + n;
        }
    }

    /// A device: address, cached GUID, bits, and its name when known.
    #[inline(always)]
    fn device(&mut self, d: Device) {
        self.word(d.at as u64);
        self.word(d.guid.unwrap_or(0));
        self.word(d.bits());
        if d.known {
            self.device_name(d.name());
        }
    }

    /// A device's name: the bytes of its `char name[64]` up to the first
    /// NUL (at most 63), copied a word at a time (no strnlen and memcpy
    /// calls: this is most of a device verb's record).
    #[inline(always)]
    fn device_name(&mut self, name: *const u8) {
        const NAME: usize = 64;
        if self.strings + 1 + NAME > self.cap {
            // SAFETY: a known device is a live struct ibv_device from the
            // real library; name is a NUL-terminated char[64] in it.
            unsafe { self.c_string(name.cast(), NAME - 1) };
            return;
        }
        // SAFETY: strings + 1 + 64 <= cap (checked above); a known
        // device's name is a char[64].
        let (n, cut) = unsafe { copy_name(name, self.out.add(self.strings)) };
        self.cut |= cut;
        self.strings += n;
    }
}

/// A device's name, the bytes of its `char name[64]` up to the first NUL
/// (at most 63), after its length byte at `to`, copied a word at a time
/// (no strnlen and memcpy calls); returns the bytes written and whether
/// it was cut (no NUL).
///
/// # Safety
/// `name` is 64 readable bytes; `to` has room for 65.
#[inline(always)]
unsafe fn copy_name(name: *const u8, to: *mut u8) -> (usize, bool) {
    let mut n = 0;
    let cut = loop {
        // SAFETY: n + 8 <= 64: inside the name and the room.
        let w = unsafe {
            let w = name.add(n).cast::<u64>().read_unaligned();
            to.add(1 + n).cast::<u64>().write_unaligned(w);
            w
        };
        // The lowest zero byte of the word, if any.
        let zero = w.wrapping_sub(0x0101_0101_0101_0101) & !w & 0x8080_8080_8080_8080;
        if zero != 0 {
            n += zero.trailing_zeros() as usize / 8;
            break false;
        }
        n += 8;
        if n == 64 {
            n = 63;
            break true;
        }
    };
    // SAFETY: the length byte, inside the room.
    unsafe { *to = n as u8 };
    (1 + n, cut)
}

#[cfg(test)]
mod tests {
    use trace_format::verbs::{CallText, Shape, Show, VERBS};
    use verbs_abi::ibv_device;

    use crate::registry::devices;

    /// Memory that passes for a `struct ibv_device` with `name` (only its
    /// address and name are read).
    fn fake_device(name: &[u8]) -> Vec<u64> {
        let mut d = vec![0u64; std::mem::size_of::<ibv_device>() / 8 + 1];
        let at = std::mem::offset_of!(ibv_device, name);
        // SAFETY: the name field lies inside `d`; `name` is at most 64 bytes.
        unsafe {
            let p = d.as_mut_ptr().cast::<u8>().add(at);
            std::ptr::copy_nonoverlapping(name.as_ptr(), p, name.len().min(64));
        }
        d
    }

    /// The shortcuts (`Shape::Words`, `Shape::OneDev`, `encode_dev`) write
    /// what the walk over the descriptor writes, byte for byte, for every
    /// verb of their shape and every room from none to a record's: known
    /// devices (with and without a cached GUID, a name of 63 bytes, one of
    /// 64 with no NUL), an unknown one, NULL; a string result that is the
    /// device's name, another string, NULL. Each side starts from other
    /// bytes: one that leaves a byte below its length unwritten differs.
    #[test]
    fn shortcuts_write_what_the_walk_writes() {
        let mut short = fake_device(b"mlx5_7\0");
        let mut guid = fake_device(b"rxe0\0");
        let mut long63 = fake_device(&[b'n'; 63]);
        let mut long64 = fake_device(&[b'x'; 64]);
        let unknown = fake_device(b"ghost\0");
        let known =
            [&mut short, &mut guid, &mut long63, &mut long64].map(|d| d.as_mut_ptr() as u64);
        for &d in &known {
            devices::remember(d as *mut ibv_device);
        }
        devices::cache_guid(known[1] as *const ibv_device, 0x1234_5678_9abc_def0);
        let other = b"another string\0";
        let name_of = |d: u64| d + std::mem::offset_of!(ibv_device, name) as u64;
        let mut devs: Vec<u64> = known.to_vec();
        devs.extend([unknown.as_ptr() as u64, 0]);
        let caps = [
            0, 1, 8, 31, 32, 33, 34, 40, 64, 96, 97, 98, 99, 100, 128, 150, 216,
        ];
        let mut checked = [0usize; 2];
        for verb in VERBS.iter().filter(|v| v.shape != Shape::Walk) {
            let mut cases: Vec<(Vec<u64>, u64)> = Vec::new();
            if verb.shape == Shape::Words {
                let args = (0..verb.args.len() as u64).map(|i| 0x1000 + i).collect();
                cases.push((args, 0xdead_beef));
            } else {
                for &d in &devs {
                    let mut results = vec![0, 0x5000];
                    if verb.result == Show::Str {
                        results = vec![0, other.as_ptr() as u64];
                        if d != 0 {
                            results.push(name_of(d));
                        }
                    }
                    cases.extend(results.into_iter().map(|r| (vec![d], r)));
                }
            }
            for (args, result) in &cases {
                for cap in caps {
                    let (mut a, mut b) = (
                        [0xaau8; trace_format::TEXT_MAX],
                        [0x55u8; trace_format::TEXT_MAX],
                    );
                    // SAFETY: `cap` bytes of each buffer; the devices and
                    // strings above, one word per argument.
                    let (fast, walked) = unsafe {
                        (
                            super::encode(verb, args, *result, a.as_mut_ptr(), cap),
                            super::walk(verb, args, *result, b.as_mut_ptr(), cap),
                        )
                    };
                    let what = format!("{} {args:x?} = {result:#x}, room {cap}", verb.name);
                    assert_eq!(fast, walked, "{what}");
                    assert_eq!(a[..fast.0], b[..walked.0], "{what}");
                    if verb.shape == Shape::OneDev {
                        let mut c = [0x33u8; trace_format::TEXT_MAX];
                        // SAFETY: as above.
                        let dev = unsafe {
                            super::encode_dev(verb, args[0], *result, c.as_mut_ptr(), cap)
                        };
                        assert_eq!(dev, walked, "encode_dev: {what}");
                        assert_eq!(c[..dev.0], b[..walked.0], "encode_dev: {what}");
                    }
                }
            }
            checked[(verb.shape == Shape::OneDev) as usize] += 1;
        }
        // Both shortcuts were taken by some verb.
        assert!(checked[0] > 10 && checked[1] >= 4, "{checked:?}");
    }

    /// Every verb whose words are plain (no device, no string) reads back
    /// with each argument where the shim put it: a `void` verb used to get
    /// a result word, which shifted its arguments by one.
    #[test]
    fn words_read_back_in_place() {
        for verb in VERBS {
            if verb.args.iter().any(|a| a.1.is_device()) || verb.result == Show::Str {
                continue;
            }
            let args: Vec<u64> = (0..verb.args.len() as u64).map(|i| 0x1000 + i).collect();
            let mut buf = [0u8; trace_format::TEXT_MAX];
            // SAFETY: `buf` holds TEXT_MAX bytes; one word per argument.
            let (len, cut) = unsafe { super::encode(verb, &args, 0, buf.as_mut_ptr(), buf.len()) };
            assert!(!cut, "{}", verb.name);
            let text = CallText(verb, &buf[..len]).to_string();
            for (i, &(name, show)) in verb.args.iter().enumerate() {
                let want = match show {
                    Show::Int | Show::Uint => format!("{name}={}", 0x1000 + i),
                    _ => format!("{name}={:#x}", 0x1000 + i),
                };
                assert!(
                    text.contains(&want),
                    "{}: {text:?} lacks {want:?}",
                    verb.name
                );
            }
        }
    }
}
