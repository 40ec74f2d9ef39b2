//! `#[repr(C)]` mirrors of the types in rdma-core's `<infiniband/verbs.h>`.
//!
//! Shared by the shim (which only reads a few fields and hands the real
//! library's own pointers back to the program) and by the software provider
//! `ibv-sim` (which builds these objects itself). Nothing here links to
//! libibverbs, so either library can depend on it without pulling in the
//! other's exports. Every layout is pinned by compile-time assertions here
//! and checked against the real `verbs.h` by the C layout test.
#![allow(non_camel_case_types, non_snake_case)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod device;
pub mod extended;
pub mod flow;
pub mod masks;
pub mod raw;
pub mod resources;
pub mod rss;
pub mod work;

pub use device::*;
pub use extended::*;
pub use flow::*;
pub use masks::*;
pub use resources::*;
pub use rss::*;
pub use work::*;

/// Compile-time layout assertion: `assert_layout!(T, size, align; field => offset, ...)`.
#[macro_export]
macro_rules! assert_layout {
    ($t:ty, $size:expr, $align:expr $(; $($field:ident => $off:expr),* $(,)?)?) => {
        const _: () = {
            assert!(::core::mem::size_of::<$t>() == $size);
            assert!(::core::mem::align_of::<$t>() == $align);
            $($(assert!(::core::mem::offset_of!($t, $field) == $off);)*)?
        };
    };
}
