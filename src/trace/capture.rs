//! A binary call record's payload (the layout is `trace_format::verbs`'s):
//! the result's and arguments' raw words, plus the few strings the text
//! needs that may be gone by the time it is read (a device's name, a
//! returned C string). A few stores and, for a device, one registry
//! lookup: no formatting on the calling thread.

use std::ffi::c_char;

use trace_format::verbs::{Show, Verb, DEV_GUID, DEV_KNOWN};
use verbs_abi::ibv_device;

use crate::registry::devices;

/// Writes the payload of `verb(args) = result` at `out` (room for `cap`
/// bytes); returns its length and whether it was cut to fit.
///
/// # Safety
/// `out` is valid for `cap` bytes; `args` has one word per argument; a
/// `Dev` word is NULL or a device pointer, a `Str` result NULL or a C
/// string from the real library.
#[inline(always)]
pub unsafe fn encode(
    verb: &Verb,
    args: &[u64],
    result: u64,
    out: *mut u8,
    cap: usize,
) -> (usize, bool) {
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
    // A `void` verb's result has no word in the layout: writing one would
    // shift every argument (and spill into the strings).
    if verb.result != Show::Void {
        w.word(result);
    }
    if verb.result == Show::Str && result != 0 {
        // SAFETY: per the contract, a C string from the real library.
        unsafe { w.c_string(result as *const c_char, 255) };
    }
    for (&(_, show), &a) in verb.args.iter().zip(args) {
        if show == Show::Dev {
            w.device(a as *const ibv_device);
        } else {
            w.word(a);
        }
    }
    (w.strings, w.cut)
}

struct Writer {
    out: *mut u8,
    cap: usize,
    words: usize,
    strings: usize,
    cut: bool,
}

impl Writer {
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
    fn device(&mut self, d: *const ibv_device) {
        self.word(d as u64);
        // One registry lookup when the GUID is cached (the usual case: the
        // list call caches it while the debug gate is open).
        let guid = if d.is_null() {
            None
        } else {
            devices::cached_guid(d)
        };
        let known = guid.is_some() || (!d.is_null() && devices::is_known(d));
        self.word(guid.unwrap_or(0));
        self.word(if known { DEV_KNOWN } else { 0 } | if guid.is_some() { DEV_GUID } else { 0 });
        if known {
            // SAFETY: a known device is a live struct ibv_device from the
            // real library; name is a NUL-terminated char[64] in it.
            unsafe { self.c_string((*d).name.as_ptr(), 63) };
        }
    }
}

#[cfg(test)]
mod tests {
    use trace_format::verbs::{CallText, Show, VERBS};

    /// Every verb whose words are plain (no device, no string) reads back
    /// with each argument where the shim put it: a `void` verb used to get
    /// a result word, which shifted its arguments by one.
    #[test]
    fn words_read_back_in_place() {
        for verb in VERBS {
            if verb.args.iter().any(|a| a.1 == Show::Dev) || verb.result == Show::Str {
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
                    Show::Int => format!("{name}={}", 0x1000 + i),
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
