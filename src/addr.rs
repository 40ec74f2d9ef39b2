//! Addresses of the real library's objects, typed by what is there: a
//! `Addr<ibv_cq>` is a CQ's address and nothing else, where a bare `usize`
//! could be any. Only an address: never dereferenced through this type.

use std::fmt;
use std::marker::PhantomData;

/// The address of a `T` the real library (or a provider) handed out; 0 for
/// none.
pub struct Addr<T>(usize, PhantomData<fn() -> T>);

impl<T> Addr<T> {
    /// No object.
    pub const NULL: Addr<T> = Addr(0, PhantomData);

    #[inline(always)]
    pub const fn new(addr: usize) -> Addr<T> {
        Addr(addr, PhantomData)
    }

    #[inline(always)]
    pub fn of(p: *const T) -> Addr<T> {
        Addr(p as usize, PhantomData)
    }

    #[inline(always)]
    pub const fn get(self) -> usize {
        self.0
    }

    #[inline(always)]
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }
}

impl<T> Clone for Addr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Addr<T> {}

impl<T> PartialEq for Addr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl<T> Eq for Addr<T> {}

impl<T> std::hash::Hash for Addr<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl<T> Default for Addr<T> {
    fn default() -> Self {
        Addr::NULL
    }
}

impl<T> fmt::LowerHex for Addr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

impl<T> fmt::Debug for Addr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
