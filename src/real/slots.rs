//! The real functions of the declared verbs (`trace_format::ibverbs!`):
//! a type per verb named as its entry's `Slot` (`AllocPd`), holding the
//! function resolved in its library at the version that library gives
//! the name by default ([`RealFn`](super::RealFn)). `exports::verbs`
//! adds each verb's record to the same type.

use std::ffi::{c_char, c_int, c_uint, c_void};

#[allow(unused_imports)]
use libc::sockaddr;
#[allow(unused_imports)]
use rdmacm_abi::*;
#[allow(unused_imports)]
use verbs_abi::*;

/// The slots of a declaration table: `export` and `forward` verbs, and
/// the `called` functions.
macro_rules! slots {
    (verbs [$([$kind:ident $lib:ident $id:literal $($entry:tt)*])*] called [$([$($called:tt)*])*]) => {
        $(slots!(@verb $kind $lib $($entry)*);)*
        $(slots!(@real $($called)*);)*
    };
    (@verb export $lib:ident $konst:ident $slot:ident $name:ident
        [$($arg:ident: $t:ty => $show:tt),*] [$($x:tt)*] $rt:ty => $res:ident [$($rx:tt)*]) => {
        slots!(@real $lib $slot $name [$($arg: $t),*] $rt);
    };
    (@verb forward $lib:ident $konst:ident $slot:ident $name:ident
        [$($arg:ident: $t:ty => $show:tt),*] [$($x:tt)*] $rt:ty => $res:ident [$($rx:tt)*]) => {
        slots!(@real $lib $slot $name [$($arg: $t),*] $rt);
    };
    (@verb $other:ident $lib:ident $($rest:tt)*) => {};
    (@real $lib:ident $slot:ident $name:ident [$($arg:ident: $t:ty),*] $rt:ty) => {
        /// A function of the real library (see `real::slots`).
        #[derive(Clone, Copy)]
        pub struct $slot(unsafe extern "C" fn($($t),*) -> $rt);

        #[allow(dead_code)]
        impl $slot {
            #[inline(always)]
            fn slot() -> &'static $crate::real::RealFn<unsafe extern "C" fn($($t),*) -> $rt> {
                // SAFETY: the declared signature is the C one of this name
                // (the header and layout tests compare it with rdma-core's).
                static REAL: $crate::real::RealFn<unsafe extern "C" fn($($t),*) -> $rt> = unsafe {
                    $crate::real::RealFn::new($crate::real::Library::$lib, match std::ffi::CStr::from_bytes_with_nul(
                        concat!(stringify!($name), "\0").as_bytes(),
                    ) {
                        Ok(name) => name,
                        Err(_) => panic!("a function name has no NUL"),
                    })
                };
                &REAL
            }

            /// The real function for the program's call of the export, or
            /// why it cannot be called (a fault rule that fires on this
            /// call: `faults`; a `void` verb is never failed).
            #[inline(always)]
            pub fn get() -> Result<Self, $crate::real::Unavailable> {
                Self::slot()
                    .get_hooked(|| {
                        $crate::faults::check(stringify!($name), std::mem::size_of::<$rt>() != 0)
                    })
                    .map($slot)
            }

            /// The real function, for the shim's own calls (no fault rule).
            #[inline(always)]
            pub fn unhooked() -> Result<Self, $crate::real::Unavailable> {
                Self::slot().get().map($slot)
            }

            /// The real function, resolved before.
            ///
            /// # Safety
            /// `get` or `unhooked` returned it before.
            #[inline(always)]
            pub unsafe fn resolved() -> Self {
                // SAFETY: the caller's contract.
                $slot(unsafe { Self::slot().resolved() })
            }

            /// Calls the real function.
            ///
            /// # Safety
            /// The C API's contract of this verb: the arguments are what a
            /// program may pass it (an export passes its caller's own, or
            /// the values the API documents).
            #[inline(always)]
            pub unsafe fn call(self, $($arg: $t),*) -> $rt {
                // SAFETY: the caller's contract; the signature is the C one.
                unsafe { (self.0)($($arg),*) }
            }
        }
    };

}

trace_format::ibverbs!(slots);
