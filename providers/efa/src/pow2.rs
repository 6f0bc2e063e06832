//! An array whose length is a power of two, indexed by a wrapping counter: the index is the
//! counter masked by `len - 1`, so it is always in bounds and no bounds check is needed. The
//! wr_id pools' free rings are these (their positions are counters that run mod 2^32).
//!
//! This file holds the one `unsafe` it takes: an unchecked index whose bound the type keeps.
#![allow(unsafe_code)]

/// A boxed slice of `2^k` elements (`k` <= 31), read at `counter & (len - 1)`.
#[derive(Debug)]
pub(crate) struct Pow2Ring<T> {
    cells: Box<[T]>,
    /// `cells.len() - 1`; `cells.len()` is a power of two, so `i & mask < cells.len()`.
    mask: u32,
}

impl<T> Pow2Ring<T> {
    /// `len` cells (rounded up to a power of two, at least 1) made by `f` from their index.
    pub(crate) fn new(len: u32, f: impl FnMut(u32) -> T) -> Self {
        let len = len.max(1).next_power_of_two();
        let cells: Box<[T]> = (0..len).map(f).collect();
        Pow2Ring {
            mask: len - 1,
            cells,
        }
    }

    /// The cell at position `pos` (mod the length).
    #[inline(always)]
    pub(crate) fn at(&self, pos: u32) -> &T {
        let i = (pos & self.mask) as usize;
        debug_assert!(i < self.cells.len());
        // SAFETY: `mask` is `cells.len() - 1` with `cells.len()` a power of two (set together
        // in `new`, the only constructor; neither field is written afterwards), so
        // `pos & mask <= mask < cells.len()`.
        unsafe { self.cells.get_unchecked(i) }
    }

    /// The cells from position `pos` (mod the length) to the end of the array.
    #[inline]
    pub(crate) fn tail_from(&self, pos: u32) -> &[T] {
        self.cells.get((pos & self.mask) as usize..).unwrap_or(&[])
    }
}
