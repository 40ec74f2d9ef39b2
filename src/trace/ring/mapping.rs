//! The trace file's mapping: made and sized at open (the header written,
//! only its space allocated), the view of its header and rings, and
//! dropped in a forked child.

use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use trace_format::{header, ring as meta, HEADER_SIZE, RING_META_SIZE, RING_UNIT, SHARED_OWNER};

use super::space::reserve;
use super::SHARED_RINGS;
use crate::files::Identity;
use crate::trace::config;

/// The mapping (null when there is none) and its shape.
static BASE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static LEN: AtomicUsize = AtomicUsize::new(0);
/// A ring's size in bytes.
static SIZE: AtomicUsize = AtomicUsize::new(0);
/// The file, for the writer's appends, and which file it is.
pub static FD: AtomicI32 = AtomicI32::new(-1);
pub static FD_DEV: AtomicU64 = AtomicU64::new(0);
pub static FD_INO: AtomicU64 = AtomicU64::new(0);
/// Bumped in a forked child: a ring claimed before the fork is the
/// The trace file's path (the one made: `PATH.<pid>` when the asked one
/// was taken), for reopening it; a leaked C string, null before `open`.
static PATH: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// A view of the mapping.
#[derive(Clone, Copy)]
pub struct Mapping {
    pub(super) base: *mut u8,
    /// A ring's size in bytes.
    pub size: usize,
}

/// The mapping, if the trace is open.
pub fn mapping() -> Option<Mapping> {
    let base = BASE.load(Ordering::Acquire);
    (!base.is_null()).then(|| Mapping {
        base,
        size: SIZE.load(Ordering::Relaxed),
    })
}

impl Mapping {
    /// An aligned 8-byte word of the header.
    ///
    /// # Safety
    ///
    /// `at` is a multiple of 8 below `HEADER_SIZE` (a `header::` word, or
    /// a ring's meta word through `ring_word`).
    #[inline(always)]
    pub unsafe fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at.is_multiple_of(8) && at < HEADER_SIZE);
        // SAFETY: `at` is 8-aligned inside the header (the caller's
        // contract) of the live mapping (page-aligned, never unmapped
        // while the trace is on but in a forked child, where no other
        // thread exists).
        unsafe { &*self.base.add(at).cast::<AtomicU64>() }
    }
    /// Word `field` of `ring`'s meta.
    ///
    /// # Safety
    ///
    /// `ring` is below `config::RINGS` and `field` is one of the ring's
    /// 8-byte meta words (`meta::HEAD`, `meta::TAIL`, ...).
    #[inline(always)]
    pub unsafe fn ring_word(&self, ring: usize, field: usize) -> &AtomicU64 {
        debug_assert!(ring < config::RINGS && field < RING_META_SIZE);
        // SAFETY: a ring's meta lies inside the header, 8-aligned, and so
        // does its 8-byte field (the caller's contract).
        unsafe { self.word(header::RINGS_META + ring * RING_META_SIZE + field) }
    }
    pub fn owner(&self, ring: usize) -> &AtomicU32 {
        self.word32(header::RINGS_META + ring * RING_META_SIZE + meta::OWNER)
    }
    /// Set while the owner writes a record: a signal handler that makes a
    /// verbs call meanwhile would write the same place.
    pub(super) fn busy(&self, ring: usize) -> &AtomicU32 {
        self.word32(header::RINGS_META + ring * RING_META_SIZE + meta::BUSY)
    }
    fn word32(&self, at: usize) -> &AtomicU32 {
        debug_assert!(at.is_multiple_of(4) && at < HEADER_SIZE);
        // SAFETY: as in `word`; `at` is 4-aligned.
        unsafe { &*self.base.add(at).cast::<AtomicU32>() }
    }
    /// Where position `pos` of `ring` lies (the size is a power of two).
    pub fn at(&self, ring: usize, pos: u64) -> *mut u8 {
        let off = ring * self.size + (pos as usize & (self.size - 1));
        // SAFETY: ring < RINGS and the offset is below the ring's size:
        // inside the mapping.
        unsafe { self.base.add(HEADER_SIZE + off) }
    }
}

/// Makes the trace file (0600, never through a link, only a regular file),
/// sizes it and maps it. Says why not, once, at error.
pub fn open() -> bool {
    let cfg = config::get();
    let Some(template) = cfg.file.as_ref() else {
        return false;
    };
    let asked = crate::config::expand_pid(template);
    let made = match crate::files::create_trace(&asked) {
        Ok(v) => v,
        Err(e) => {
            crate::log!(
                crate::log::Level::Error,
                "IBV_SHIM_TRACE={}: {e}; not tracing",
                asked.to_string_lossy()
            );
            return false;
        }
    };
    let (fd, id) = (made.fd, made.id);
    let path = made.path;
    if let Some(why) = &made.instead {
        crate::log!(
            crate::log::Level::Warn,
            "IBV_SHIM_TRACE={}: {why}; tracing to {} instead",
            asked.to_string_lossy(),
            path.to_string_lossy()
        );
    }
    let slots = cfg.slots;
    let size = trace_format::ring_bytes(slots);
    let len = trace_format::rings_end(config::RINGS, slots);
    // The file's size, sparse: only the header is allocated now (the
    // mapping touches nothing else until `grow` allocates it).
    // SAFETY: fd is the regular file just created, open read-write.
    let sized = unsafe { libc::ftruncate(fd, len as libc::off_t) } == 0;
    if let (true, Err(e)) = (sized, reserve(fd, 0, HEADER_SIZE as u64)) {
        // SAFETY: our own descriptor, not handed out; the path is the
        // file just made, still empty of records.
        unsafe {
            libc::unlink(path.as_ptr());
            libc::close(fd);
        }
        crate::log!(
            crate::log::Level::Error,
            "IBV_SHIM_TRACE={}: cannot allocate the trace's header: {e}; not tracing",
            path.to_string_lossy()
        );
        return false;
    }
    let base = if sized {
        // SAFETY: a fresh shared mapping of `len` bytes of our own file.
        unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        }
    } else {
        libc::MAP_FAILED
    };
    if base == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        // SAFETY: our own descriptor, not handed out; the path is the file
        // just made, with no header yet (left, it would be no trace).
        unsafe {
            libc::unlink(path.as_ptr());
            libc::close(fd);
        }
        crate::log!(
            crate::log::Level::Error,
            "IBV_SHIM_TRACE={}: cannot map {len} bytes: {e}; not tracing",
            path.to_string_lossy()
        );
        return false;
    }
    let base = base.cast::<u8>();
    let m = Mapping { base, size };
    // SAFETY: the header's first bytes, inside the fresh mapping.
    unsafe {
        std::ptr::copy_nonoverlapping(trace_format::MAGIC.as_ptr(), base, 8);
        let put32 = |at: usize, v: u32| base.add(at).cast::<u32>().write(v);
        put32(header::VERSION, trace_format::VERSION);
        put32(header::PID, libc::getpid() as u32);
        put32(header::RINGS, config::RINGS as u32);
        put32(header::SLOTS, slots as u32);
        put32(header::SLOT_SIZE, RING_UNIT as u32);
        put32(header::POLICY, cfg.block as u32);
    }
    if cfg.block {
        for r in config::RINGS - SHARED_RINGS..config::RINGS {
            m.owner(r).store(SHARED_OWNER, Ordering::Relaxed);
        }
    }
    // SAFETY: `header::REALTIME_NS` and `MONOTONIC_NS` are 8-aligned
    // header words.
    unsafe {
        m.word(header::REALTIME_NS).store(
            crate::log::clock_ns(libc::CLOCK_REALTIME),
            Ordering::Relaxed,
        );
        m.word(header::MONOTONIC_NS)
            .store(crate::clock::monotonic_ns(), Ordering::Relaxed);
    }
    // SAFETY: the header's clock field, inside the fresh mapping.
    unsafe {
        base.add(header::CLOCK)
            .cast::<u32>()
            .write(if crate::clock::tsc() {
                trace_format::CLOCK_TSC
            } else {
                0
            })
    };
    store_clock(&m);
    // SAFETY: `header::DRAINED_END` is an 8-aligned header word.
    unsafe { m.word(header::DRAINED_END) }.store(len as u64, Ordering::Relaxed);
    FD_DEV.store(id.dev, Ordering::Relaxed);
    FD_INO.store(id.ino, Ordering::Relaxed);
    // Kept for the life of the process (a forked child's own trace leaks
    // its parent's few bytes).
    PATH.store(path.into_raw(), Ordering::Release);
    FD.store(fd, Ordering::Relaxed);
    SIZE.store(size, Ordering::Relaxed);
    LEN.store(len, Ordering::Relaxed);
    BASE.store(base, Ordering::Release);
    true
}

/// Puts the clock's latest calibration in the header (a reader turns TSC
/// ticks into ns with it, also after a crash).
pub fn store_clock(m: &Mapping) {
    if !crate::clock::tsc() {
        return;
    }
    // A fresh pair when the last is over a millisecond old; the header
    // gets the pairs either way (the first time at open: a process killed
    // before any drain still has a calibration in its file).
    crate::clock::calibrate();
    let [t0, m0, t1, m1] = crate::clock::pairs();
    // SAFETY: the clock pairs' fields are 8-aligned header words.
    unsafe {
        m.word(header::TSC0).store(t0, Ordering::Relaxed);
        m.word(header::MONO0).store(m0, Ordering::Relaxed);
        m.word(header::TSC1).store(t1, Ordering::Relaxed);
        m.word(header::MONO1).store(m1, Ordering::Relaxed);
    }
}

/// The trace file's path, once it is made.
pub fn path() -> Option<&'static std::ffi::CStr> {
    let p = PATH.load(Ordering::Acquire);
    // SAFETY: a C string leaked by `open`, never freed.
    (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) })
}

/// Is `FD` still the trace file? (Daemons close every descriptor and the
/// number may be another file's now.)
pub fn fd_is_ours(fd: i32) -> bool {
    Identity::of(fd)
        == Some(Identity {
            dev: FD_DEV.load(Ordering::Relaxed),
            ino: FD_INO.load(Ordering::Relaxed),
        })
}

/// In a forked child: drops the parent's mapping and descriptor.
pub(super) fn drop_in_child() {
    let base = BASE.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !base.is_null() {
        // SAFETY: the child's copy of the mapping made by `open`; the
        // child has one thread, which is here.
        unsafe { libc::munmap(base.cast(), LEN.load(Ordering::Relaxed)) };
    }
    let fd = FD.swap(-1, Ordering::Relaxed);
    if fd >= 0 && fd_is_ours(fd) {
        // SAFETY: the child's copy of the shim's own descriptor.
        unsafe { libc::close(fd) };
    }
}
