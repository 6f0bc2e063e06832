//! Doorbells, write-combined copies and the barriers between them.
//!
//! This module owns every store to device memory (the LLQ and the doorbell registers) and the
//! fences that order those stores against each other and against host-memory ring writes. It
//! must not read device memory: the LLQ and doorbell pages are mapped write-only.
#![allow(unsafe_code)]

use core::ptr::NonNull;
use core::sync::atomic::{compiler_fence, fence, AtomicU32, Ordering};

/// A 32-bit doorbell register (MMIO), written with one atomic little-endian store.
#[derive(Debug)]
pub struct Doorbell {
    ptr: NonNull<u32>,
    /// Every value rung, so tests can check how often and with what (tests only).
    #[cfg(test)]
    pub(crate) log: Vec<u32>,
}

impl Doorbell {
    /// Wraps a doorbell register.
    ///
    /// # Safety
    /// `ptr` must be 4-byte aligned and valid for 32-bit writes for as long as the returned
    /// value (or the queue owning it) lives, may be written from any thread, and must not be
    /// accessed non-atomically by anyone else in this process.
    pub(crate) unsafe fn new(ptr: NonNull<u32>) -> Self {
        Doorbell {
            ptr,
            #[cfg(test)]
            log: Vec::new(),
        }
    }

    /// Writes `val` to the register. The caller has already issued the barrier that orders the
    /// ring writes this doorbell publishes.
    #[inline]
    pub(crate) fn ring(&mut self, val: u32) {
        #[cfg(test)]
        self.log.push(val);
        // SAFETY: `new`'s contract: the pointer is 4-byte aligned and valid for 32-bit writes
        // for our whole lifetime, and nothing in this process accesses it non-atomically.
        let reg = unsafe { AtomicU32::from_ptr(self.ptr.as_ptr()) };
        // One whole 32-bit store (the device requires the doorbell be written whole; an
        // atomic store is never split, elided or merged; it compiles to a plain `mov`/`stlr`
        // and never reads the write-only register). Release: every store to host memory
        // before it (wr_id pool entries, RQ descriptors) happens-before whatever observes this
        // value — a device model on another thread that Acquire-loads it, and so the CQEs it
        // writes after; real hardware is ordered by the barrier the caller issued.
        reg.store(val.to_le(), Ordering::Release);
    }
}

// SAFETY: the doorbell is an MMIO register (or test memory) owned by the queue holding this
// value; writing it from another thread is as valid as from this one (the mapping is
// process-wide). All writes go through `&mut self`, so there is no concurrent use.
unsafe impl Send for Doorbell {}

/// Barrier before the first write-combined store of a batch (`mmio_wc_start`): orders the
/// previous doorbell (UC MMIO) write before the new WC stores, so the device never sees WQE
/// bytes of the next batch before the doorbell of the previous one.
#[inline]
pub(crate) fn wc_start() {
    wc_flush();
}

/// Barrier between write-combined WQE stores and the doorbell store that publishes them
/// (`mmio_flush_writes`): every WC store to the LLQ before it becomes visible to the device
/// before the doorbell write after it. `fence(SeqCst)` stops the compiler (and weakly ordered
/// CPUs for normal memory) from moving stores across; WC stores on x86 are not ordered by it,
/// which is what `sfence` is for; on aarch64 `dsb st` drains the write buffers the same way.
///
/// Under Miri only the `fence(SeqCst)` runs: Miri implements neither the `sfence` intrinsic nor
/// inline asm, and it has no device or write-combining buffer for them to order; for the
/// memory model it checks, `fence(SeqCst)` is the strongest barrier there is.
#[inline]
pub(crate) fn wc_flush() {
    fence(Ordering::SeqCst);
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `sfence` only orders stores; SSE is part of the x86_64 baseline, so the
    // instruction exists on every CPU this code runs on. (The intrinsic is a safe fn on newer
    // compilers, hence the allow.)
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: `dsb st` is a barrier instruction with no operands; it touches no memory and no
    // registers besides draining the store buffer.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags))
    };
}

/// Barrier between host-memory ring writes (RQ descriptors) and the doorbell that publishes
/// them (`udma_to_device_barrier`): the device, reading the ring by DMA after it sees the
/// doorbell, sees every descriptor written before. On x86_64, stores to write-back memory are
/// not reordered with a later UC store, so a compiler fence suffices (as in rdma-core); on
/// aarch64 `dmb oshst` orders the stores for the outer-shareable domain the device is in;
/// elsewhere a full fence.
#[inline]
pub(crate) fn dma_wmb() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    compiler_fence(Ordering::SeqCst);
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: a barrier instruction with no operands; touches no memory or registers.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
    // Other architectures, and Miri (no inline asm; see `wc_flush`): a full fence, at least as
    // strong as any of the above in the language's memory model.
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    fence(Ordering::SeqCst);
}

/// Barrier between reading a CQE's phase (an `Acquire` load) and reading the rest of the CQE
/// (`udma_from_device_barrier`): no field of the entry is read before the phase that says the
/// device finished writing it. `Acquire` already orders the later loads in the Rust model; the
/// extra instruction matches what rdma-core does for DMA-written memory (`lfence` on x86_64,
/// `dmb oshld` on aarch64).
#[inline]
pub(crate) fn dma_rmb() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `lfence` only orders loads; SSE2 is part of the x86_64 baseline.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_lfence()
    };
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: a barrier instruction with no operands; touches no memory or registers.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
    // Other architectures, and Miri (which implements neither `lfence` nor inline asm; see
    // `wc_flush`): a full fence, at least as strong in the language's memory model.
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    fence(Ordering::SeqCst);
    compiler_fence(Ordering::SeqCst);
}

/// Copies `src` to write-combined device memory with ascending 64-bit volatile stores (the
/// equivalent of `mmio_memcpy_x64`): whole 8-byte words, in address order, never reading the
/// destination. `src.len()` must be a multiple of 8 (WQEs are 64 or 128 bytes).
///
/// # Safety
/// `dst` must be 8-byte aligned and valid for writes of `src.len()` bytes.
#[inline]
pub(crate) unsafe fn copy_to_wc(dst: NonNull<u8>, src: &[u8]) {
    let words = dst.as_ptr().cast::<u64>();
    for (i, chunk) in src.chunks_exact(8).enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        // SAFETY: the caller guarantees `dst` is 8-aligned and writable for `src.len()` bytes;
        // word `i` covers bytes `8*i .. 8*i+8 <= src.len()`. Native-endian bytes in, the same
        // bytes out: the copy is byte-exact.
        unsafe { words.add(i).write_volatile(u64::from_ne_bytes(w)) };
    }
}
