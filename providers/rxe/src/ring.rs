//! Raw view of one mmapped rxe queue (`struct rxe_queue_buf` + element array).
//!
//! This module owns every pointer into kernel-shared memory: it validates the header once,
//! keeps a private copy of the geometry (the kernel could rewrite the header under us), reads
//! and writes the two indices as atomics, and copies bytes in and out of element slots through
//! raw pointers with bounds checked against that private geometry. It never forms a `&`/`&mut`
//! to non-atomic ring memory and never decides protocol matters (who owns which index, when a
//! queue is full): that is the job of the typed queues in `sq`, `rq` and `cq`.
//!
//! # Ordering, and why no device barrier is needed on any architecture
//!
//! The other side of an rxe ring is the kernel running on another CPU, not a device: the
//! buffer is ordinary cacheable memory (`vmalloc_user`) mapped into both, so the CPUs' own
//! coherence (the inner-shareable domain on aarch64) is all that orders it, and the language's
//! Acquire/Release pairs are exactly enough. The kernel side uses `smp_load_acquire` /
//! `smp_store_release` on the indices (drivers/infiniband/sw/rxe/rxe_queue.h), and rdma-core's
//! provider (providers/rxe/rxe_queue.h, checked at commit 691953d8d) does what we do:
//! `atomic_load_explicit(.., memory_order_acquire)` of the other side's index,
//! `memory_order_relaxed` of its own, `atomic_store_explicit(.., memory_order_release)` to
//! publish, and no `udma_*` barrier anywhere. On aarch64 both compile to the same
//! instructions as ours: `ldar` for an Acquire load, `stlr` for a Release store, `ldr` for a
//! Relaxed one; on x86_64 all three are plain `mov`s. So ours is as strong as rdma-core's on
//! both, with nothing architecture-specific to get wrong (unlike EFA's device memory,
//! providers/efa/src/mmio.rs).
//!
//! What runs these orderings with threads under Miri's weak-memory emulation: see
//! `tests::producer_and_consumer_threads_see_whole_slots` (a producer thread writes slots and
//! Release-stores the index, a consumer thread Acquire-loads it and reads the slots).
#![allow(unsafe_code)]

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use uverbs_uapi::rxe::{
    RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET, RXE_QUEUE_BUF_DATA_OFFSET,
    RXE_QUEUE_BUF_INDEX_MASK_OFFSET, RXE_QUEUE_BUF_LOG2_ELEM_SIZE_OFFSET,
    RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET,
};

use zerocopy::FromBytes;

use crate::error::{IndexKind, RingError};

/// Smallest element size accepted (8 bytes); the typed queues demand more.
const MIN_LOG2_ELEM_SIZE: u32 = 3;
/// Largest element size accepted (1 MiB); rxe elements are a few hundred bytes.
const MAX_LOG2_ELEM_SIZE: u32 = 20;
/// Largest number of slots accepted; keeps every index computation inside `u32`.
const MAX_SLOTS: u64 = 1 << 31;

/// One mapped rxe queue: the memory the kernel shares for a CQ, SQ, RQ or SRQ.
///
/// Construct it with [`Queue::from_raw`] over the mapping of an [`Mminfo`] returned by a create
/// command, then wrap it in [`SendQueue`], [`RecvQueue`] or [`CompletionQueue`]. It does not own
/// the mapping: unmap only after the `Queue` is dropped.
///
/// [`Mminfo`]: uverbs_uapi::rxe::Mminfo
/// [`SendQueue`]: crate::SendQueue
/// [`RecvQueue`]: crate::RecvQueue
/// [`CompletionQueue`]: crate::CompletionQueue
#[doc(alias = "rxe_queue_buf")]
#[derive(Debug)]
pub struct Queue {
    base: NonNull<u8>,
    len: usize,
    elem_size: usize,
    log2_elem_size: u32,
    index_mask: u32,
}

// SAFETY: a `Queue` is a pointer to a process-wide shared mapping plus plain numbers; the
// `from_raw` contract makes it the only user-space accessor of that mapping, so moving it to
// another thread moves that exclusive role with it. It is not `Sync`: two threads writing slots
// through `&Queue` could race, and the typed queues take `&mut self` to write.
unsafe impl Send for Queue {}

impl Queue {
    /// Validates the header of a mapped rxe queue and returns a view of it.
    ///
    /// Checks: `base` 8-byte aligned; `log2_elem_size` in `3..=20`; `index_mask + 1` a power of
    /// two in `1..=2^31`; header + `(index_mask + 1) << log2_elem_size` within `len`; both indices
    /// `<= index_mask`; and, when `expected_elem_size` is `Some`, the element size equal to it.
    ///
    /// # Safety
    ///
    /// For as long as the returned `Queue` (or the typed queue built from it) lives:
    /// - `base..base + len` is a live, readable and writable mapping of an rxe queue (e.g. the
    ///   `mmap` of an `Mminfo` from the uverbs fd), not unmapped or remapped;
    /// - no other `Queue` over the same memory exists, and nothing else in this process reads or
    ///   writes it through references or non-atomic accesses;
    /// - the only other party touching it is the kernel (or a test's stand-in), following the rxe
    ///   protocol: it writes the index it owns and the slots it owns.
    pub unsafe fn from_raw(
        base: NonNull<u8>,
        len: usize,
        expected_elem_size: Option<usize>,
    ) -> Result<Self, RingError> {
        let addr = base.as_ptr() as usize;
        if addr % 8 != 0 {
            return Err(RingError::Misaligned { addr });
        }
        if len < RXE_QUEUE_BUF_DATA_OFFSET {
            return Err(RingError::MappingTooSmall {
                len,
                need: RXE_QUEUE_BUF_DATA_OFFSET as u64,
            });
        }
        // SAFETY: the header fields lie inside base..base+len (len >= 384 checked above),
        // are 4-byte aligned (base is 8-aligned, offsets are multiples of 4) and the caller
        // guarantees the mapping is live and only accessed atomically by others.
        let log2_elem_size =
            unsafe { atomic_at(base, RXE_QUEUE_BUF_LOG2_ELEM_SIZE_OFFSET) }.load(Ordering::Relaxed);
        // SAFETY: as above.
        let index_mask =
            unsafe { atomic_at(base, RXE_QUEUE_BUF_INDEX_MASK_OFFSET) }.load(Ordering::Relaxed);
        // Relaxed is enough for the geometry: the kernel wrote it before the create command
        // that handed out the mmap offset returned, and the syscall boundary orders that.

        if !(MIN_LOG2_ELEM_SIZE..=MAX_LOG2_ELEM_SIZE).contains(&log2_elem_size) {
            return Err(RingError::BadElemSize { log2_elem_size });
        }
        let slots = u64::from(index_mask) + 1;
        if !slots.is_power_of_two() || !(1..=MAX_SLOTS).contains(&slots) {
            return Err(RingError::BadIndexMask { index_mask });
        }
        let need = (RXE_QUEUE_BUF_DATA_OFFSET as u64) + (slots << log2_elem_size);
        if need > len as u64 {
            return Err(RingError::MappingTooSmall { len, need });
        }
        let elem_size = 1usize << log2_elem_size;
        if let Some(expected) = expected_elem_size {
            if expected != elem_size {
                return Err(RingError::ElemSizeMismatch {
                    expected,
                    found: elem_size,
                });
            }
        }
        let q = Queue {
            base,
            len,
            elem_size,
            log2_elem_size,
            index_mask,
        };
        q.load_index(IndexKind::Producer, Ordering::Relaxed)?;
        q.load_index(IndexKind::Consumer, Ordering::Relaxed)?;
        Ok(q)
    }

    /// Element (slot) size in bytes, `1 << log2_elem_size`.
    pub fn elem_size(&self) -> usize {
        self.elem_size
    }

    /// `log2_elem_size` as validated at construction.
    pub fn log2_elem_size(&self) -> u32 {
        self.log2_elem_size
    }

    /// `index_mask` as validated at construction (number of slots minus one).
    pub fn index_mask(&self) -> u32 {
        self.index_mask
    }

    /// Number of slots (`index_mask + 1`).
    pub fn num_slots(&self) -> u32 {
        self.index_mask.wrapping_add(1)
    }

    /// How many elements the queue can hold at once: `index_mask` (one slot stays empty so that
    /// `producer == consumer` means empty).
    pub fn capacity(&self) -> u32 {
        self.index_mask
    }

    /// Length of the mapping this queue was built over.
    pub fn mapping_len(&self) -> usize {
        self.len
    }

    /// `(index + 1) & index_mask`.
    #[inline]
    pub(crate) fn next(&self, index: u32) -> u32 {
        index.wrapping_add(1) & self.index_mask
    }

    /// Number of elements between `from` (inclusive) and `to` (exclusive), modulo the ring.
    #[inline]
    pub(crate) fn distance(&self, from: u32, to: u32) -> u32 {
        to.wrapping_sub(from) & self.index_mask
    }

    #[inline]
    fn index_offset(which: IndexKind) -> usize {
        match which {
            IndexKind::Producer => RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET,
            IndexKind::Consumer => RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET,
        }
    }

    /// Loads an index with `order` and checks it is `<= index_mask`.
    ///
    /// Callers pass `Acquire` for the other side's index (so the other side's slot writes or
    /// reads before its release store are visible/finished) and `Relaxed` for their own, as
    /// rdma-core's `load_producer_index`/`load_consumer_index` do (`ldar` / `ldr` on aarch64);
    /// the kernel publishes with `smp_store_release`.
    #[inline]
    pub(crate) fn load_index(&self, which: IndexKind, order: Ordering) -> Result<u32, RingError> {
        // SAFETY: both index offsets are < 384 <= len, 4-aligned; the mapping is live per the
        // `from_raw` contract and the other side only accesses the index atomically.
        let value = unsafe { atomic_at(self.base, Self::index_offset(which)) }.load(order);
        if value > self.index_mask {
            return Err(RingError::IndexOutOfRange {
                index: which,
                value,
                index_mask: self.index_mask,
            });
        }
        Ok(value)
    }

    /// Loads an index with `order` without the range check: for a fast path that only compares
    /// the value with one it validated before (an unchanged index needs no new check); any other
    /// value must go through the same check as [`Queue::load_index`] before it is used.
    #[inline]
    pub(crate) fn load_index_raw(&self, which: IndexKind, order: Ordering) -> u32 {
        // SAFETY: as in `load_index`.
        unsafe { atomic_at(self.base, Self::index_offset(which)) }.load(order)
    }

    /// Checks an index loaded with [`Queue::load_index_raw`]: the same check as `load_index`.
    #[inline]
    pub(crate) fn check_index(&self, which: IndexKind, value: u32) -> Result<u32, RingError> {
        if value > self.index_mask {
            return Err(RingError::IndexOutOfRange {
                index: which,
                value,
                index_mask: self.index_mask,
            });
        }
        Ok(value)
    }

    /// Byte offset in the mapping of slot `index & index_mask`.
    #[inline(always)]
    pub(crate) fn slot_offset(&self, index: u32) -> usize {
        RXE_QUEUE_BUF_DATA_OFFSET + (((index & self.index_mask) as usize) << self.log2_elem_size)
    }

    /// Stores our own index with `Release`: every slot write (producer) or slot read (consumer)
    /// done before this call happens-before the other side's `Acquire` load that sees `value`.
    /// rdma-core: `store_producer_index`/`store_consumer_index`, `memory_order_release`
    /// (`stlr` on aarch64, as this is); the kernel pairs it with `smp_load_acquire`.
    #[inline]
    pub(crate) fn store_index(&self, which: IndexKind, value: u32) {
        let value = value & self.index_mask;
        // SAFETY: as in `load_index`.
        unsafe { atomic_at(self.base, Self::index_offset(which)) }.store(value, Ordering::Release);
    }

    /// Pointer to byte `offset` of slot `index & index_mask`, if `offset + len <= elem_size`.
    #[inline]
    fn slot_ptr(&self, index: u32, offset: usize, len: usize) -> Option<*mut u8> {
        let end = offset.checked_add(len)?;
        if end > self.elem_size {
            return None;
        }
        let slot = ((index & self.index_mask) as usize) << self.log2_elem_size;
        // The whole element array fits in the mapping (checked in `from_raw`), so
        // RXE_QUEUE_BUF_DATA_OFFSET + slot + end <= len and this offset stays in bounds.
        let off = RXE_QUEUE_BUF_DATA_OFFSET + slot + offset;
        debug_assert!(off + len <= self.len);
        // SAFETY: `off + len <= self.len` (see above), so the result points into the mapping.
        Some(unsafe { self.base.as_ptr().add(off) })
    }

    /// Copies `bytes` into slot `index` at `offset`. Returns `false` (writing nothing) if the
    /// range does not fit in one element.
    ///
    /// Only call this for a slot the other side does not own (a producer's slot at or after its
    /// private producer index, before publishing it).
    #[must_use]
    #[inline]
    pub(crate) fn write_slot(&self, index: u32, offset: usize, bytes: &[u8]) -> bool {
        let Some(dst) = self.slot_ptr(index, offset, bytes.len()) else {
            return false;
        };
        // SAFETY: `dst..dst+len` is inside the mapping (slot_ptr), the slot is owned by us per the
        // caller's protocol so the kernel does not access it concurrently, and `bytes` is a Rust
        // slice that cannot overlap the mapping (no references into it are ever created).
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
        true
    }

    /// Slot `index & index_mask` for a producer to write, if an element holds at least `min`
    /// bytes. The returned [`SlotMut`] knows the element size, so each of its writes is one
    /// bounds check against it (none left once inlined, for a write at a constant offset that
    /// ends within `min`), with the slot's address computed once. Same rule as
    /// [`Queue::write_slot`]: only for a slot the other side does not own.
    #[inline(always)]
    pub(crate) fn slot_mut(&self, index: u32, min: usize) -> Option<SlotMut<'_>> {
        if min > self.elem_size {
            return None;
        }
        // `* elem_size`, which is `<< log2_elem_size` (a power of two, `from_raw`), as one
        // multiply by a field instead of a shift by a register.
        let off = RXE_QUEUE_BUF_DATA_OFFSET + ((index & self.index_mask) as usize) * self.elem_size;
        // `from_raw` checked that the whole element array lies in the mapping, so this slot's
        // `elem_size` bytes at `off` do.
        debug_assert!(off + self.elem_size <= self.len);
        // SAFETY: `off + elem_size <= len` (above), so the pointer stays inside the mapping.
        let ptr = unsafe { self.base.as_ptr().add(off) };
        Some(SlotMut {
            ptr,
            len: self.elem_size,
            _queue: core::marker::PhantomData,
        })
    }

    /// Copies bytes of slot `index` at `offset` into `out`. Returns `false` (reading nothing) if
    /// the range does not fit in one element.
    ///
    /// Only call this for a slot the other side has published to us (between the consumer
    /// index and an `Acquire`-loaded producer index) or that we wrote ourselves.
    #[must_use]
    pub(crate) fn read_slot(&self, index: u32, offset: usize, out: &mut [u8]) -> bool {
        let Some(src) = self.slot_ptr(index, offset, out.len()) else {
            return false;
        };
        // SAFETY: `src..src+len` is inside the mapping (slot_ptr); the producer finished writing
        // the slot before its release store we acquired, and will not touch it again until we
        // release it; `out` is a Rust buffer that cannot overlap the mapping.
        unsafe { core::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
        true
    }
}

/// A [`Queue`] whose every element holds at least `MIN` bytes: checked once, by
/// [`ElemQueue::new`]. A `Queue`'s geometry is private and never changes after
/// [`Queue::from_raw`], which proved that every slot lies in the mapping, so a read of up to
/// `MIN` bytes from the start of any slot is in bounds with nothing checked at run time: the
/// type is the proof. Everything else of the `Queue` is reached through `Deref`.
#[derive(Debug)]
pub(crate) struct ElemQueue<const MIN: usize> {
    q: Queue,
}

impl<const MIN: usize> ElemQueue<MIN> {
    /// `q`, if its elements hold at least `MIN` bytes.
    pub(crate) fn new(q: Queue) -> Result<Self, RingError> {
        if q.elem_size < MIN {
            return Err(RingError::ElemTooSmall {
                need: MIN,
                found: q.elem_size,
            });
        }
        Ok(ElemQueue { q })
    }

    /// Slot `index & index_mask` for the consumer to read: the returned [`SlotRef`] reads
    /// fields that end within `MIN` with no check at all (a compile-time one on the offset;
    /// `new` proved an element holds `MIN` bytes), and moves to other slots of the same queue
    /// without checking again. It borrows the queue mutably, as the one consumer of the ring
    /// (so it can be moved to another thread with it). Same rule as [`Queue::read_slot`]:
    /// only for slots the other side has published to us.
    #[inline(always)]
    pub(crate) fn slot_ref(&mut self, index: u32) -> SlotRef<'_, MIN> {
        let ptr = self.q.base.as_ptr();
        let elem_size = self.q.elem_size;
        let mut s = SlotRef {
            q: &mut self.q,
            ptr,
            run: 0,
            elem_size,
        };
        s.move_to(index);
        s
    }

    /// A `U` copied from the start of slot `index & index_mask`. `U` must fit in `MIN` bytes
    /// (checked at compile time). Same rule as [`Queue::read_slot`]: only for a slot the
    /// other side has published to us.
    #[inline(always)]
    pub(crate) fn read_head<U: FromBytes>(&self, index: u32) -> U {
        const { assert!(core::mem::size_of::<U>() <= MIN) };
        let off = self.q.slot_offset(index);
        debug_assert!(off + core::mem::size_of::<U>() <= self.q.len);
        // `off` starts slot `index & index_mask`, whose `elem_size` bytes lie in the live
        // mapping (`from_raw` checked the whole element array against `len`).
        // SAFETY: in bounds (`size_of::<U>() <= MIN <= elem_size`: the assertion and `new`);
        // unaligned copy, no reference into kernel-shared memory; `U: FromBytes`.
        unsafe { core::ptr::read_unaligned(self.q.base.as_ptr().add(off).cast::<U>()) }
    }

    /// Fills `out` from consecutive slots starting at `start` (`& index_mask`), each slot's
    /// first `size_of::<U>()` bytes (`U` fits in `MIN`, checked at compile time) converted by
    /// `f`, as (at most) two contiguous runs around the wrap; returns how many it filled:
    /// `out.len()`, or the ring's slot count if `out` is longer (it never reads a slot
    /// twice). Same rule as [`Queue::read_slot`]: only for slots the other side has
    /// published to us.
    #[inline]
    pub(crate) fn read_run<U: FromBytes, T>(
        &self,
        start: u32,
        out: &mut [T],
        mut f: impl FnMut(U) -> T,
    ) -> usize {
        const { assert!(core::mem::size_of::<U>() <= MIN) };
        let slots = self.q.num_slots() as usize;
        let n = out.len().min(slots);
        let first = (start & self.q.index_mask) as usize;
        let (before_wrap, after_wrap) = out[..n].split_at_mut(n.min(slots - first));
        for (run, slot) in [(before_wrap, first), (after_wrap, 0)] {
            let mut p = self
                .q
                .base
                .as_ptr()
                .wrapping_add(RXE_QUEUE_BUF_DATA_OFFSET + slot * self.q.elem_size);
            for d in run {
                // `p` starts slot `slot + k` with `slot + run.len() <= slots` (the first run
                // stops at the wrap; the second, from slot 0, is `n - (slots - first) <= first`
                // long); `from_raw` checked every slot lies in the mapping; the slot was
                // published before our acquire and stays ours until we release it.
                // SAFETY: in bounds (above; `size_of::<U>() <= MIN <= elem_size`); unaligned
                // copy, no reference; `U: FromBytes`.
                let u = unsafe { core::ptr::read_unaligned(p.cast::<U>()) };
                *d = f(u);
                p = p.wrapping_add(self.q.elem_size);
            }
        }
        n
    }
}

impl<const MIN: usize> core::ops::Deref for ElemQueue<MIN> {
    type Target = Queue;

    #[inline(always)]
    fn deref(&self) -> &Queue {
        &self.q
    }
}

/// One element of a ring whose elements hold at least `MIN` bytes, for a consumer to read
/// (made by [`ElemQueue::slot_ref`]; the size was checked once, by [`ElemQueue::new`]): the start of a slot of `q`,
/// inside the mapping. It borrows the queue (mutably: the ring's one consumer), so the
/// mapping outlives it; reads go through the raw pointer (no reference into the mapping is
/// formed).
#[derive(Debug)]
pub(crate) struct SlotRef<'q, const MIN: usize> {
    q: &'q mut Queue,
    /// The start of a slot: `base + RXE_QUEUE_BUF_DATA_OFFSET + (i << log2_elem_size)` for
    /// some `i <= index_mask` (written by `move_to`, and by `step_in_run` only while `run`
    /// says slot `i + 1` exists).
    ptr: *const u8,
    /// How many times `step_in_run` may still move on by one slot: at most
    /// `index_mask - i` (so every step stays inside the element array, before the wrap),
    /// and at most what the owner allowed in `set_run` (slots it knows published).
    run: u32,
    /// `elem_size`, copied so a step loads no pointer.
    elem_size: usize,
}

// SAFETY: `ptr` points into the mapping of `q`, which the `SlotRef` borrows exclusively
// (`&mut Queue`, and `Queue` is `Send`); moving the `SlotRef` to another thread moves that
// exclusive access with it, as moving the `&mut Queue` would. Not `Sync`: like `Queue`.
unsafe impl<const MIN: usize> Send for SlotRef<'_, MIN> {}

impl<const MIN: usize> SlotRef<'_, MIN> {
    /// The queue the slot belongs to.
    #[inline(always)]
    pub(crate) fn queue(&self) -> &Queue {
        self.q
    }

    /// Moves to slot `index & index_mask` of the same queue (whose elements hold `MIN` bytes:
    /// `ElemQueue::new` checked it).
    #[inline(always)]
    pub(crate) fn move_to(&mut self, index: u32) {
        let off = self.q.slot_offset(index);
        // `from_raw` checked that the whole element array lies in the mapping, so this
        // slot's `elem_size` bytes at `off` do.
        debug_assert!(off + self.q.elem_size <= self.q.len);
        self.ptr = self.q.base.as_ptr().wrapping_add(off);
        // No steps allowed until the owner says how many slots are ready (`set_run`).
        self.run = 0;
    }

    /// The index (`<= index_mask`) of the current slot, from the pointer.
    #[inline]
    pub(crate) fn index(&self) -> u32 {
        let first = self.q.base.as_ptr() as usize + RXE_QUEUE_BUF_DATA_OFFSET;
        ((self.ptr as usize - first) >> self.q.log2_elem_size) as u32
    }

    /// Allows up to `ready_after` steps of [`Self::step_in_run`] (the owner knows that many
    /// slots after the current one are published to it), capped at the slots left before
    /// the wrap; returns the number allowed.
    #[inline]
    pub(crate) fn set_run(&mut self, ready_after: u32) -> u32 {
        self.run = ready_after.min(self.q.index_mask - self.index());
        self.run
    }

    /// Steps allowed left (see [`Self::set_run`]).
    #[inline(always)]
    pub(crate) fn run(&self) -> u32 {
        self.run
    }

    /// Moves on to the next slot if a step is allowed (`true`), by adding the element size
    /// to the pointer (no index, mask or shift); `false`, and stays, when none is.
    #[inline(always)]
    pub(crate) fn step_in_run(&mut self) -> bool {
        if self.run == 0 {
            return false;
        }
        self.run -= 1;
        // `run <= index_mask - i` held before the step, so `i + 1 <= index_mask`: the new
        // pointer starts slot `i + 1`, inside the element array.
        self.ptr = self.ptr.wrapping_add(self.elem_size);
        true
    }

    /// The `U` at byte `OFF` of the slot; `OFF + size_of::<U>() <= MIN` is checked at compile
    /// time, so no check runs.
    #[inline(always)]
    pub(crate) fn read<U: FromBytes, const OFF: usize>(&self) -> U {
        const { assert!(OFF + core::mem::size_of::<U>() <= MIN) };
        // `ptr` starts a slot inside the live mapping (`move_to`, `step_in_run`, `from_raw`;
        // the borrow of `q` keeps it alive); the slot holds at least `MIN` bytes
        // (`ElemQueue::new`; only `ElemQueue::slot_ref` makes a `SlotRef`).
        // SAFETY: `OFF + size_of::<U>() <= MIN` (the assertion), so the read is inside the
        // slot; unaligned copy, no reference into kernel-shared memory; `U: FromBytes`.
        unsafe { core::ptr::read_unaligned(self.ptr.add(OFF).cast::<U>()) }
    }
}

/// One element of a ring, lent by [`Queue::slot_mut`] to the producer that owns it: `len`
/// (the element size) bytes at `ptr`, inside the mapping. Writes are bounds-checked against
/// `len` and go through the raw pointer (no reference into the mapping is formed). It borrows
/// the queue, which is not `Sync`: only its one owner writes slots, as with
/// [`Queue::write_slot`].
pub(crate) struct SlotMut<'q> {
    ptr: *mut u8,
    len: usize,
    _queue: core::marker::PhantomData<&'q Queue>,
}

impl SlotMut<'_> {
    /// Copies `bytes` to `offset` of the element. Returns `false` (writing nothing) if the
    /// range does not fit in it.
    #[must_use]
    #[inline(always)]
    pub(crate) fn write(&mut self, offset: usize, bytes: &[u8]) -> bool {
        match offset.checked_add(bytes.len()) {
            Some(end) if end <= self.len => {}
            _ => return false,
        }
        // SAFETY: `offset + bytes.len() <= len` (checked above) and `ptr..ptr+len` is the
        // element inside the live mapping (`Queue::slot_mut`), owned by this producer per the
        // protocol, so the kernel does not touch it now; `bytes` is a Rust slice, which cannot
        // overlap the mapping (no references into it exist).
        unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(offset), bytes.len())
        };
        true
    }

    /// Zeroes `len` bytes of the element from `offset`. Returns `false` (writing nothing) if
    /// the range does not fit in it.
    #[must_use]
    #[inline(always)]
    pub(crate) fn zero(&mut self, offset: usize, len: usize) -> bool {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {}
            _ => return false,
        }
        // SAFETY: as in `write`: in bounds (checked above), a slot the kernel does not touch
        // now, byte stores through a raw pointer.
        unsafe { core::ptr::write_bytes(self.ptr.add(offset), 0, len) };
        true
    }

    /// Copies `sges` back to back from `offset` of the element, each as one 16-byte copy, and
    /// returns the sum of their lengths. One bounds check for the whole run (none per SGE);
    /// `None` (writing nothing) if the run does not fit in the element.
    #[must_use]
    #[inline(always)]
    pub(crate) fn write_sges(&mut self, offset: usize, sges: &[uverbs_wr::Sge]) -> Option<u64> {
        // `sges` is a Rust slice, so its byte size fits in `isize` and this cannot overflow.
        let bytes = core::mem::size_of_val(sges);
        match offset.checked_add(bytes) {
            Some(end) if end <= self.len => {}
            _ => return None,
        }
        let mut dst = self.ptr.wrapping_add(offset);
        match sges {
            [] => return Some(0),
            [sge] => {
                // One SGE, the common case, without the loop's set-up.
                // SAFETY: `offset..offset + 16` is inside the live, producer-owned element
                // (checked above); `sge` is a Rust value; the unaligned write forms no
                // reference.
                unsafe { core::ptr::write_unaligned(dst.cast::<uverbs_wr::Sge>(), *sge) };
                return Some(u64::from(sge.length));
            }
            _ => {}
        }
        let mut total = 0u64;
        // The run `offset..offset + 16 * sges.len()` is inside the element (checked above) and
        // `dst` walks it one SGE at a time; the element is inside the live mapping
        // (`Queue::slot_mut`) and owned by this producer, so the kernel does not touch it now.
        for sge in sges {
            // SAFETY: `dst..dst + 16` lies in that checked run; `sge` is a Rust value, which
            // cannot overlap the mapping; the unaligned write forms no reference into it.
            unsafe { core::ptr::write_unaligned(dst.cast::<uverbs_wr::Sge>(), *sge) };
            dst = dst.wrapping_add(core::mem::size_of::<uverbs_wr::Sge>());
            // At most `elem_size / 16` SGEs (2^16 for the largest element `Queue` accepts), each
            // under 2^32 bytes: the sum stays far below 2^64.
            total += u64::from(sge.length);
        }
        Some(total)
    }

    /// The element size: how many bytes [`SlotMut::write`] may reach.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// The `AtomicU32` at `base + offset`.
///
/// # Safety
///
/// `base + offset .. +4` must be inside a live mapping, 4-byte aligned, and accessed by everyone
/// else only atomically for the returned lifetime (the caller uses it for a single operation).
unsafe fn atomic_at<'a>(base: NonNull<u8>, offset: usize) -> &'a AtomicU32 {
    // SAFETY: per the function contract the pointer is in bounds, aligned and valid for atomic
    // access; `AtomicU32` has the same layout as `u32`, and only a shared reference to an atomic
    // (an `UnsafeCell`) is formed, which permits the kernel's concurrent writes.
    unsafe { AtomicU32::from_ptr(base.as_ptr().add(offset).cast::<u32>()) }
}

#[cfg(test)]
pub(crate) mod fake {
    //! Heap-backed stand-in for a kernel-allocated rxe queue, and the kernel side of the
    //! protocol, for tests: consume SQ/RQ elements, produce CQ elements.
    use super::*;
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::vec::Vec;

    /// A zeroed, page-aligned allocation laid out like an rxe queue mapping.
    pub struct FakeMapping {
        ptr: NonNull<u8>,
        layout: Layout,
    }

    impl FakeMapping {
        /// A mapping with a valid header for `2^log2_slots` slots of `2^log2_elem` bytes.
        pub fn new(log2_elem: u32, log2_slots: u32) -> Self {
            let len = RXE_QUEUE_BUF_DATA_OFFSET + (1usize << (log2_elem + log2_slots));
            let m = Self::raw(len);
            m.set_header(log2_elem, (1u32 << log2_slots) - 1);
            m
        }

        /// A zeroed mapping of `len` bytes (header all zero).
        pub fn raw(len: usize) -> Self {
            let layout = Layout::from_size_align(len.max(8), 4096).unwrap();
            // SAFETY: layout has non-zero size.
            let p = unsafe { alloc_zeroed(layout) };
            FakeMapping {
                ptr: NonNull::new(p).expect("allocation failed"),
                layout,
            }
        }

        pub fn base(&self) -> NonNull<u8> {
            self.ptr
        }

        pub fn len(&self) -> usize {
            self.layout.size()
        }

        fn atomic(&self, off: usize) -> &AtomicU32 {
            // SAFETY: off < 384 <= len, 4-aligned, memory lives as long as &self.
            unsafe { atomic_at(self.ptr, off) }
        }

        pub fn set_header(&self, log2_elem: u32, index_mask: u32) {
            self.atomic(RXE_QUEUE_BUF_LOG2_ELEM_SIZE_OFFSET)
                .store(log2_elem, Ordering::Relaxed);
            self.atomic(RXE_QUEUE_BUF_INDEX_MASK_OFFSET)
                .store(index_mask, Ordering::Relaxed);
        }

        pub fn producer(&self) -> u32 {
            self.atomic(RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET)
                .load(Ordering::Acquire)
        }

        pub fn consumer(&self) -> u32 {
            self.atomic(RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET)
                .load(Ordering::Acquire)
        }

        pub fn set_producer(&self, v: u32) {
            self.atomic(RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET)
                .store(v, Ordering::Release);
        }

        pub fn set_consumer(&self, v: u32) {
            self.atomic(RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET)
                .store(v, Ordering::Release);
        }

        fn geometry(&self) -> (usize, u32) {
            let log2 = self
                .atomic(RXE_QUEUE_BUF_LOG2_ELEM_SIZE_OFFSET)
                .load(Ordering::Relaxed);
            let mask = self
                .atomic(RXE_QUEUE_BUF_INDEX_MASK_OFFSET)
                .load(Ordering::Relaxed);
            (1usize << log2, mask)
        }

        fn slot(&self, index: u32) -> *mut u8 {
            let (elem, mask) = self.geometry();
            let off = RXE_QUEUE_BUF_DATA_OFFSET + (index & mask) as usize * elem;
            assert!(off + elem <= self.len());
            // SAFETY: checked in bounds just above.
            unsafe { self.ptr.as_ptr().add(off) }
        }

        /// Kernel side of an SQ/RQ/SRQ: takes the element at the consumer index, if the
        /// producer published one, and advances the consumer index.
        pub fn kernel_consume(&self) -> Option<Vec<u8>> {
            let (elem, mask) = self.geometry();
            let prod = self.producer();
            let cons = self.consumer();
            if prod == cons {
                return None;
            }
            let mut v = std::vec![0u8; elem];
            // SAFETY: slot() is in bounds; the producer published it (acquire above).
            unsafe { core::ptr::copy_nonoverlapping(self.slot(cons), v.as_mut_ptr(), elem) };
            self.set_consumer((cons + 1) & mask);
            Some(v)
        }

        /// Reads the element at `index` without touching indices.
        pub fn peek_slot(&self, index: u32) -> Vec<u8> {
            let (elem, _) = self.geometry();
            let mut v = std::vec![0u8; elem];
            // SAFETY: slot() is in bounds.
            unsafe { core::ptr::copy_nonoverlapping(self.slot(index), v.as_mut_ptr(), elem) };
            v
        }

        /// Kernel side of a CQ: writes `bytes` at the producer index and advances it; `false`
        /// when the queue is full (the kernel raises IB_EVENT_CQ_ERR then).
        pub fn kernel_produce(&self, bytes: &[u8]) -> bool {
            let (elem, mask) = self.geometry();
            assert!(bytes.len() <= elem);
            let prod = self.producer();
            let cons = self.consumer();
            if (prod + 1) & mask == cons {
                return false;
            }
            // SAFETY: slot() is in bounds and bytes.len() <= elem; the slot is free.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.slot(prod), bytes.len()) };
            self.set_producer((prod + 1) & mask);
            true
        }
    }

    impl Drop for FakeMapping {
        fn drop(&mut self) {
            // SAFETY: allocated in `raw` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeMapping;
    use super::*;

    fn open(m: &FakeMapping, expected: Option<usize>) -> Result<Queue, RingError> {
        // SAFETY: the fake mapping outlives the queue in every test and nothing else accesses it.
        unsafe { Queue::from_raw(m.base(), m.len(), expected) }
    }

    #[test]
    fn valid_header_gives_geometry() {
        let m = FakeMapping::new(6, 4);
        let q = open(&m, Some(64)).unwrap();
        assert_eq!(q.elem_size(), 64);
        assert_eq!(q.index_mask(), 15);
        assert_eq!(q.num_slots(), 16);
        assert_eq!(q.capacity(), 15);
        assert_eq!(q.next(15), 0);
        assert_eq!(q.distance(14, 2), 4);
    }

    #[test]
    fn hostile_headers_are_refused() {
        let m = FakeMapping::new(6, 4);
        m.set_header(2, 15);
        assert_eq!(
            open(&m, None).unwrap_err(),
            RingError::BadElemSize { log2_elem_size: 2 }
        );
        m.set_header(31, 15);
        assert_eq!(
            open(&m, None).unwrap_err(),
            RingError::BadElemSize { log2_elem_size: 31 }
        );
        // A one-slot ring (mask 0) is valid: the kernel makes one for a QP created with
        // max_recv_wr 0, and it simply never has room.
        m.set_header(6, 0);
        let q = open(&m, None).expect("one-slot ring");
        assert_eq!(q.capacity(), 0);
        for mask in [14u32, 0x10, u32::MAX] {
            m.set_header(6, mask);
            assert_eq!(
                open(&m, None).unwrap_err(),
                RingError::BadIndexMask { index_mask: mask },
                "mask {mask:#x}"
            );
        }
        // 32 slots of 64 bytes do not fit a mapping made for 16.
        m.set_header(6, 31);
        assert!(matches!(
            open(&m, None).unwrap_err(),
            RingError::MappingTooSmall { need, .. } if need == 384 + 32 * 64
        ));
        // Element 128 bytes: 16 * 128 does not fit either.
        m.set_header(7, 15);
        assert!(matches!(
            open(&m, None).unwrap_err(),
            RingError::MappingTooSmall { .. }
        ));
        m.set_header(6, 15);
        assert_eq!(
            open(&m, Some(128)).unwrap_err(),
            RingError::ElemSizeMismatch {
                expected: 128,
                found: 64
            }
        );
        m.set_producer(16);
        assert_eq!(
            open(&m, None).unwrap_err(),
            RingError::IndexOutOfRange {
                index: IndexKind::Producer,
                value: 16,
                index_mask: 15
            }
        );
        m.set_producer(0);
        m.set_consumer(0xdead_beef);
        assert!(matches!(
            open(&m, None).unwrap_err(),
            RingError::IndexOutOfRange {
                index: IndexKind::Consumer,
                ..
            }
        ));
    }

    #[test]
    fn short_or_misaligned_mapping_is_refused() {
        let m = FakeMapping::raw(100);
        assert!(matches!(
            open(&m, None).unwrap_err(),
            RingError::MappingTooSmall { len: 100, .. }
        ));
        let m = FakeMapping::new(6, 4);
        // SAFETY: base+4 is inside the allocation; from_raw must refuse it before reading.
        let r = unsafe {
            Queue::from_raw(
                NonNull::new(m.base().as_ptr().add(4)).unwrap(),
                m.len() - 4,
                None,
            )
        };
        assert!(matches!(r.unwrap_err(), RingError::Misaligned { .. }));
    }

    #[test]
    fn slot_access_is_bounds_checked() {
        let m = FakeMapping::new(6, 2);
        let q = open(&m, None).unwrap();
        assert!(q.write_slot(5, 60, &[1, 2, 3, 4])); // index 5 masks to 1
        assert!(!q.write_slot(1, 61, &[1, 2, 3, 4]));
        assert!(!q.write_slot(1, usize::MAX, &[1]));
        let mut out = [0u8; 4];
        assert!(q.read_slot(1, 60, &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        assert_eq!(&m.peek_slot(1)[60..64], &[1, 2, 3, 4]);
        let mut big = [0u8; 65];
        assert!(!q.read_slot(0, 0, &mut big));
    }
}
