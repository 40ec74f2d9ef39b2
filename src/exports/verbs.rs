//! The shim's side of the verb declarations (`trace_format::ibverbs!`,
//! one table for the shim and the trace's reader). From each entry:
//!
//! - `export` and `forward` verbs: a type named as the entry's `Slot`
//!   (`AllocPd`) holding the real function, resolved at its library's
//!   version on first use ([`real::RealFn`]): `get()` (the export's own
//!   call, which a fault rule may fail), `unhooked()` (the shim's own
//!   calls), `call(..)` with the declared C signature;
//! - every verb: `Slot::done(call, args.., result, failed)`, its record
//!   (the debug line, the trace's binary record) from typed arguments: the
//!   words are the ones the trace table describes, checked when the shim
//!   is compiled (their number, and that a device, MR, QP or string is
//!   shown only from a value of its type);
//! - `export` verbs: a check that the shim's export (written in
//!   `exports/`, where cbindgen reads its contract for the header) has
//!   the declared signature;
//! - `forward` verbs: the export itself (guard -> forward -> record ->
//!   log), its C prototype being the header's already;
//! - `called` functions: the slot alone.
//!
//! A second library (librdmacm) is a second table with its own
//! `library(..)`: its slots resolve in that library, at its versions.

use std::ffi::{c_char, c_int, c_uint, c_void};

#[allow(unused_imports)]
use libc::sockaddr;
#[allow(unused_imports)]
use rdmacm_abi::*;
use trace_format::verbs::Show;
#[allow(unused_imports)]
use verbs_abi::*;

/// A value recorded as one word of a call's record.
pub trait Word: Copy {
    /// The word for a value shown as `show`: a signed value shown as a
    /// signed number is sign-extended, otherwise zero-extended from its
    /// width (a C `int` of access flags shows as `0xffffffff`, not as 64
    /// bits of ones).
    fn word(self, show: Show) -> u64;
}

impl<T> Word for *mut T {
    #[inline(always)]
    fn word(self, _: Show) -> u64 {
        self as usize as u64
    }
}

impl<T> Word for *const T {
    #[inline(always)]
    fn word(self, _: Show) -> u64 {
        self as usize as u64
    }
}

impl Word for c_int {
    #[inline(always)]
    fn word(self, show: Show) -> u64 {
        match show {
            Show::Int | Show::Rc | Show::RcCq | Show::RcEventType | Show::Status => {
                self as i64 as u64
            }
            _ => self as u32 as u64,
        }
    }
}

macro_rules! unsigned_words {
    ($($t:ty),*) => {$(
        impl Word for $t {
            #[inline(always)]
            fn word(self, _: Show) -> u64 {
                self as u64
            }
        }
    )*};
}
unsigned_words!(u8, u16, u32, u64, usize);

impl Word for bool {
    #[inline(always)]
    fn word(self, _: Show) -> u64 {
        u64::from(self)
    }
}

impl Word for () {
    #[inline(always)]
    fn word(self, _: Show) -> u64 {
        0
    }
}

/// Did a forwarded call fail, by its C convention (for a generated
/// export's record)?
pub trait Outcome {
    fn failed(&self) -> bool;
}

impl Outcome for c_int {
    fn failed(&self) -> bool {
        *self != 0
    }
}

impl<T> Outcome for *mut T {
    fn failed(&self) -> bool {
        self.is_null()
    }
}

impl<T> Outcome for *const T {
    fn failed(&self) -> bool {
        self.is_null()
    }
}

impl Outcome for () {
    fn failed(&self) -> bool {
        false
    }
}

impl Outcome for u64 {
    fn failed(&self) -> bool {
        *self == 0
    }
}

/// The expansion of a declaration table (see the module's comment).
macro_rules! declare {
    (verbs [$([$($entry:tt)*])*] called [$($called:tt)*]) => {
        $(declare!(@verb $($entry)*);)*
    };

    (@verb export $lib:ident $id:literal $konst:ident $slot:ident $name:ident
        [$($arg:ident: $t:ty => $show:tt),*] [$($x:ident: $xt:ty => $xshow:ident),*]
        $rt:ty => $res:ident [$($rx:ident: $rxt:ty)?]
    ) => {
        declare!(@record $konst ($crate::real::slots::$slot) $name
            [$($arg: $t => $show),*] [$($x: $xt => $xshow),*] $rt => $res [$($rx: $rxt)?]);
        // The export the shim writes (`exports/`) has the declared signature.
        const _: unsafe extern "C" fn($($t),*) -> $rt = $crate::exports::all::$name;
        declare!(@forward $lib $slot [$($arg: $t => $show),*] [$($x: $xt),*] $rt => $res [$($rx)?]);
        declare!(@made $res $slot [$($arg: $t => $show),*] [$($x),*] $rt);
        declare!(@destroys $res $slot [$($arg: $t => $show),*] [$($x),*]);
    };

    // Verbs that destroy an object (its one argument).
    (@destroys Rc $slot:ident [$obj:ident: $t:ty => Ptr] []) => {
        impl $crate::real::slots::$slot {
            /// The program's destroy forwarded (`create_destroy::destroy`,
            /// `d` this verb's).
            ///
            /// # Safety
            /// The argument is the program's, as the C API takes it.
            #[inline(always)]
            pub unsafe fn destroy(
                d: &$crate::exports::create_destroy::Destroy,
                $obj: $t,
            ) -> Result<$crate::guard::ErrnoCode, $crate::guard::Refused> {
                let real = Self::get()?;
                // SAFETY: the caller's contract: the program's argument.
                $crate::exports::create_destroy::destroy(d, $obj, || unsafe { real.call($obj) })
                    .map($crate::guard::ErrnoCode)
            }
        }
    };
    (@destroys Void $slot:ident [$obj:ident: $t:ty => Ptr] []) => {
        impl $crate::real::slots::$slot {
            /// The program's `void` destroy forwarded (as a destroy that
            /// returned 0).
            ///
            /// # Safety
            /// The argument is the program's, as the C API takes it.
            #[inline(always)]
            pub unsafe fn destroy(
                d: &$crate::exports::create_destroy::Destroy,
                $obj: $t,
            ) -> Result<(), $crate::guard::Refused> {
                let real = Self::get()?;
                $crate::exports::create_destroy::destroy(d, $obj, || {
                    // SAFETY: the caller's contract: the program's argument.
                    unsafe { real.call($obj) };
                    0
                })
                .map(|_| ())
            }
        }
    };
    (@destroys $res:ident $slot:ident [$($a:tt)*] [$($x:tt)*]) => {};

    // Verbs that make an object (a pointer result, no extra word).
    (@made Ptr $slot:ident [$($a:tt)*] [] $rt:ty) => { declare!(@create $slot [$($a)*] $rt); };
    (@made Mr $slot:ident [$($a:tt)*] [] $rt:ty) => { declare!(@create $slot [$($a)*] $rt); };
    (@made Qp $slot:ident [$($a:tt)*] [] $rt:ty) => { declare!(@create $slot [$($a)*] $rt); };
    (@made $res:ident $slot:ident [$($a:tt)*] [$($x:tt)*] $rt:ty) => {};

    (@verb forward $lib:ident $id:literal $konst:ident $slot:ident $name:ident
        [$($arg:ident: $t:ty => $show:tt),*] [] $rt:ty => $res:ident []
    ) => {
        declare!(@record $konst ($crate::real::slots::$slot) $name [$($arg: $t => $show),*] [] $rt => $res []);

        declare!(@forward $lib $slot [$($arg: $t => $show),*] [] $rt => $res []);

        /// Forwarded to the real library and recorded (a declared verb
        /// with nothing of its own to check or track).
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> $rt {
            use $crate::real::slots::$slot;
            // SAFETY: the program's own arguments.
            $slot::export(|| unsafe { $slot::forward(|| Ok(()), $($arg),*) })
        }
    };

    // The skeleton of an export that only forwards and records (no extra
    // word to compute): guard -> check -> forward -> record -> log.
    (@forward $lib:ident $slot:ident [$($arg:ident: $t:ty => $show:tt),*] [] $rt:ty => $res:ident []) => {
        impl $crate::real::slots::$slot {
            /// The program's call forwarded: the real function (unless a
            /// fault rule fails the call), after `check` (skipped when the
            /// real library calls its own export), recorded and logged;
            /// the result in the verb's C convention.
            ///
            /// # Safety
            /// The arguments are the program's, as the C API takes them.
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn forward(
                check: impl FnOnce() -> Result<(), $crate::guard::Refused>,
                $($arg: $t),*
            ) -> Result<declare!(@convention_ty $res $rt), $crate::guard::Refused> {
                // SAFETY: the caller's contract.
                unsafe { Self::forward_then(check, |_| {}, $($arg),*) }
            }

            /// [`Self::forward`], with `after` given the real result
            /// before it is recorded (an export's tracking); not run when
            /// the real library calls its own export.
            ///
            /// # Safety
            /// As [`Self::forward`].
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn forward_then(
                check: impl FnOnce() -> Result<(), $crate::guard::Refused>,
                after: impl FnOnce(&$rt),
                $($arg: $t),*
            ) -> Result<declare!(@convention_ty $res $rt), $crate::guard::Refused> {
                let real = Self::get()?;
                declare!(@forward_fn $lib)(
                    check,
                    // SAFETY: the caller's contract: the program's own
                    // arguments, to the real function of the declared
                    // (the C API's) signature.
                    || unsafe { real.call($($arg),*) },
                    |call, r| {
                        after(r);
                        // SAFETY: the arguments as the program passed them
                        // and the result as the real function returned it.
                        unsafe { Self::done(call, $($arg,)* *r, declare!(@failed $res r)) }
                    },
                )
                .map(declare!(@convention $res))
            }
        }
    };
    // An export that records words of its own (what it made): `extra`
    // computes them from the real result, as the export tracks it.
    (@forward $lib:ident $slot:ident [$($arg:ident: $t:ty => $show:tt),*] [$($x:ident: $xt:ty),+] $rt:ty => $res:ident []) => {
        impl $crate::real::slots::$slot {
            /// The program's call forwarded as [`Self::done`] records it:
            /// the real function (unless a fault rule fails the call)
            /// after `check`, then `extra` given the real result (the
            /// export's tracking, which returns the words it adds to the
            /// record), recorded and logged; the result in the verb's C
            /// convention. Not tracked when the real library calls its
            /// own export.
            ///
            /// # Safety
            /// The arguments are the program's, as the C API takes them.
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn forward_with(
                check: impl FnOnce() -> Result<(), $crate::guard::Refused>,
                extra: impl FnOnce(&$rt) -> ($($xt,)+),
                $($arg: $t),*
            ) -> Result<declare!(@convention_ty $res $rt), $crate::guard::Refused> {
                let real = Self::get()?;
                declare!(@forward_fn $lib)(
                    check,
                    // SAFETY: the caller's contract: the program's own
                    // arguments, to the real function of the declared
                    // (the C API's) signature.
                    || unsafe { real.call($($arg),*) },
                    |call, r| {
                        let ($($x,)+) = extra(r);
                        // SAFETY: the arguments as the program passed them
                        // and the result as the real function returned it.
                        unsafe { Self::done(call, $($arg,)* $($x,)+ *r, declare!(@failed $res r)) }
                    },
                )
                .map(declare!(@convention $res))
            }
        }
    };
    (@forward $lib:ident $slot:ident [$($any:tt)*] [$($x:tt)*] $rt:ty => $res:ident [$($rx:tt)*]) => {};

    // Each library's forwarding shape: the verbs' (a call inside the real
    // library is its own), the connection manager's (`cm::forward`: an
    // rdma_* call inside librdmacm is its own, a verbs call there is not).
    (@forward_fn Ibverbs) => { $crate::exports::forward };
    (@forward_fn Rdmacm) => { $crate::exports::cm::forward };

    // The skeleton of a create: forward, record what it made, log.
    (@create $slot:ident [$($arg:ident: $t:ty => $show:tt),*] $rt:ty) => {
        impl $crate::real::slots::$slot {
            /// The program's create forwarded (`create_destroy::create`):
            /// refused on a `parent` (its argument's name and address) of
            /// a closed context, else the real function (unless a fault
            /// rule fails the call), `track` given what it made, recorded
            /// and logged.
            ///
            /// # Safety
            /// The arguments are the program's, as the C API takes them.
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn create(
                parent: Option<(&'static str, usize)>,
                track: impl FnOnce($rt),
                $($arg: $t),*
            ) -> Result<$rt, $crate::guard::Refused> {
                let real = Self::get()?;
                $crate::exports::create_destroy::create(
                    parent.map(|(arg, addr)| (Self::NAME, arg, addr)),
                    // SAFETY: the caller's contract: the program's own
                    // arguments, to the real function.
                    || unsafe { real.call($($arg),*) },
                    track,
                    // SAFETY: what the real function just returned.
                    |call, made| unsafe { Self::done(call, $($arg,)* made, made.is_null()) },
                )
            }
        }
    };

    (@verb table $lib:ident $id:literal $konst:ident $slot:ident $name:ident
        [$($arg:ident: $t:ty => $show:tt),*] [] $rt:ty => $res:ident []
    ) => {
        /// A function-table verb's record.
        pub struct $slot;
        declare!(@record $konst ($slot) $name [$($arg: $t => $show),*] [] $rt => $res []);
    };

    (@verb event $lib:ident $id:literal $konst:ident $slot:ident $name:ident
        [$($arg:ident: $t:ty => $show:tt),*] [] $rt:ty => $res:ident []
    ) => {
        /// A data-path event of the trace.
        pub struct $slot;
        impl $slot {
            /// Puts the event in the trace (one relaxed load when not tracing).
            #[inline(always)]
            pub fn put($($arg: $t,)* result: $rt, failed: bool) {
                let words = [$(Word::word($arg, Show::$show)),*];
                const _: () = assert!(
                    matches!(trace_format::verbs::$konst.shape, trace_format::verbs::Shape::Words)
                        && trace_format::verbs::$konst.raw_words() == 0 $(+ declare!(@one $arg))*,
                    "an event's words are plain, one per argument"
                );
                // SAFETY: one plain word per argument (checked above).
                unsafe {
                    $crate::trace::event_bin(
                        &trace_format::verbs::$konst,
                        &words,
                        Word::word(result, Show::$res),
                        failed,
                    )
                };
            }
        }
    };

    (@record $konst:ident ($($ty:tt)*) $name:ident
        [$($arg:ident: $t:ty => $show:tt),*] [$($x:ident: $xt:ty => $xshow:ident),*]
        $rt:ty => $res:ident [$($rx:ident: $rxt:ty)?]
    ) => {
        impl $($ty)* {
            /// The verb's name (the log's, the faults', the refusals').
            pub const NAME: &'static str = stringify!($name);
            /// Its trace descriptor.
            pub const VERB: &'static trace_format::verbs::Verb = &trace_format::verbs::$konst;

            /// Runs an export's `body` behind the panic boundary (`guard`):
            /// a refusal becomes the verb's failure value, with errno.
            #[inline(always)]
            pub fn export<R: $crate::guard::CReturn>(
                body: impl FnOnce() -> Result<R, $crate::guard::Refused>,
            ) -> R::C {
                $crate::guard::export(Self::NAME, body)
            }

            /// Records the call: its arguments (those the table records),
            /// its extra words, and its result.
            ///
            /// # Safety
            /// A device is NULL or one the real library handed out; an MR
            /// or QP result is NULL or the object the real library just
            /// returned; a string result is NULL or a C string of the real
            /// library's.
            #[inline(always)]
            #[allow(clippy::too_many_arguments, unused_variables, unused_assignments, unused_mut)]
            pub unsafe fn done(
                call: &$crate::exports::Call,
                $($arg: $t,)* $($x: $xt,)* $($rx: $rxt,)? result: $rt, failed: bool,
            ) {
                const RAW: usize = 0 $(+ declare!(@one $show))* $(+ declare!(@one $x))* $(+ declare!(@one $rx))?;
                const _: () = assert!(
                    RAW == trace_format::verbs::$konst.raw_words(),
                    concat!(stringify!($name), ": the words recorded are not the table's")
                );
                $(declare!(@typed $show $t);)*
                $(declare!(@typed $xshow $xt);)*
                declare!(@typed $res $rt);
                // Nothing to build when not logging: the words' stores
                // would otherwise run before `Call::done`'s test.
                if !call.logging() {
                    return;
                }
                let mut words = [0u64; RAW];
                let mut at = 0;
                $(if let Some(show) = trace_format::__show!($show) {
                    words[at] = Word::word($arg, show);
                    at += 1;
                })*
                $(words[at] = Word::word($x, Show::$xshow);
                at += 1;)*
                $(words[at] = Word::word($rx, Show::$res);
                at += 1;)?
                // SAFETY: one word per recorded argument and extra (checked
                // above), devices and results per this function's contract.
                unsafe { call.done(Self::VERB, &words, Word::word(result, Show::$res), failed) }
            }
        }
    };

    (@one _) => { 0 };
    (@one $x:tt) => { 1 };

    // Values the encoder reads behind: of their type only.
    (@typed Dev $t:ty) => { const _: fn($t) -> *mut ibv_device = |d| d; };
    (@typed OnDev $t:ty) => { const _: fn($t) -> *mut ibv_device = |d| d; };
    (@typed ListDev $t:ty) => { const _: fn($t) -> *mut ibv_device = |d| d; };
    (@typed Mr $t:ty) => { const _: fn($t) -> *mut ibv_mr = |m| m; };
    (@typed Qp $t:ty) => { const _: fn($t) -> *mut ibv_qp = |q| q; };
    (@typed Str $t:ty) => { const _: fn($t) -> *const c_char = |s| s; };
    (@typed $show:tt $t:ty) => {};

    // What C sees on failure, by how the result is shown.
    (@convention Rc) => { $crate::guard::ErrnoCode };
    (@convention Int) => { $crate::guard::MinusOne };
    (@convention $other:ident) => { std::convert::identity };
    (@convention_ty Rc $rt:ty) => { $crate::guard::ErrnoCode };
    (@convention_ty Int $rt:ty) => { $crate::guard::MinusOne };
    (@convention_ty $other:ident $rt:ty) => { $rt };

    // Is the record's call failed? An errno-returning verb's result says
    // so itself (and a void verb cannot fail).
    (@failed Rc $r:ident) => { false };
    (@failed Void $r:ident) => { false };
    (@failed $other:ident $r:ident) => { $crate::exports::verbs::Outcome::failed($r) };
}

trace_format::ibverbs!(declare);
