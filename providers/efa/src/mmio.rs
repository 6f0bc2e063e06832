//! Doorbells, write-combined copies and the barriers between them.
//!
//! This module owns every store to device memory (the LLQ and the doorbell registers) and the
//! fences that order those stores against each other and against host-memory ring writes. It
//! must not read device memory: the LLQ and doorbell pages are mapped write-only.
//!
//! # The barriers against rdma-core's, per architecture
//!
//! rdma-core (`util/udma_barrier.h`, `util/mmio.h`, checked at commit 691953d8d) and ours:
//!
//! | rdma-core                  | x86_64 (theirs / ours)        | aarch64 (theirs / ours)                  |
//! |----------------------------|-------------------------------|------------------------------------------|
//! | `udma_to_device_barrier`   | compiler barrier / same       | `dmb oshst` / `dmb oshst` ([`dma_wmb`])  |
//! | `udma_from_device_barrier` | `lfence` / same               | `dmb oshld` / `dmb oshld` ([`dma_rmb`])  |
//! | `mmio_flush_writes`        | `sfence` / `mfence`+`sfence`  | `dsb st` / `dmb ish`+`dsb st` ([`wc_flush`]) |
//! | `mmio_wc_start`            | = `mmio_flush_writes`         | = `mmio_flush_writes` ([`wc_start`])     |
//! | `mmio_write32` (doorbell)  | relaxed store `mov` / `mov` (Release is free on x86) | relaxed `str` / `stlr` (Release) |
//! | `mmio_memcpy_x64`          | 8-byte stores / same          | `ld4`+`st4` of 64 bytes / same ([`store_block64`]) |
//!
//! Ours is never weaker: each of rdma-core's instructions is issued at the same point, and the
//! `fence(SeqCst)` (`dmb ish` on aarch64, `mfence` on x86_64) and Release stores on top of them
//! order our host-memory bookkeeping for other threads and for Miri. A `dmb ish` alone would
//! not do for the device: it orders accesses only as observed from the inner-shareable domain
//! (the CPUs), while the device reads host memory by DMA from the outer-shareable domain and
//! the LLQ is write-combined Normal-NC memory whose buffered stores only a `dsb` drains; that
//! is why `oshst`/`oshld`/`dsb st` are issued explicitly on aarch64 and not left to Rust's
//! orderings. Any other architecture fails to compile below: a silent fallback to plain stores
//! where the device needs a barrier would corrupt rings only on that machine.
#![allow(unsafe_code)]

/// Names the architecture in the error (the supported ones are handled in each barrier).
macro_rules! unsupported_arch {
    ($($arch:literal),* $(,)?) => {$(
        #[cfg(target_arch = $arch)]
        compile_error!(concat!(
            "uverbs-efa: no DMA/MMIO barriers are defined for target_arch = \"", $arch,
            "\" (only x86_64 and aarch64): the EFA rings and LLQ need the device barriers of \
             rdma-core's util/udma_barrier.h for that architecture in providers/efa/src/mmio.rs"
        ));
    )*};
}
unsupported_arch!(
    "x86",
    "arm",
    "riscv32",
    "riscv64",
    "powerpc",
    "powerpc64",
    "s390x",
    "loongarch64",
    "mips",
    "mips64",
    "sparc64",
    "wasm32",
    "wasm64",
);
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "x86",
    target_arch = "arm",
    target_arch = "riscv32",
    target_arch = "riscv64",
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "s390x",
    target_arch = "loongarch64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc64",
    target_arch = "wasm32",
    target_arch = "wasm64",
)))]
compile_error!(
    "uverbs-efa: no DMA/MMIO barriers are defined for this target_arch (only x86_64 and \
     aarch64): add them to providers/efa/src/mmio.rs"
);

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
        // and never reads the write-only register). rdma-core's `mmio_write32` is a relaxed
        // atomic store (`str` on aarch64); `stlr` is at least as strong (it also waits for
        // every earlier load and store). Release: every store to host memory
        // before it (wr_id pool entries, RQ descriptors) happens-before whatever observes this
        // value — a device model on another thread that Acquire-loads it, and so the CQEs it
        // writes after; real hardware is ordered by the barrier the caller issued.
        reg.store(val.to_le(), Ordering::Release);
    }
}

impl Doorbell {
    /// The register's address (`efadv_query_qp_wqs` / `efadv_query_cq` hand it out).
    pub fn as_ptr(&self) -> NonNull<u32> {
        self.ptr
    }
}

// SAFETY: the doorbell is an MMIO register (or test memory) owned by the queue holding this
// value; writing it from another thread is as valid as from this one (the mapping is
// process-wide). All writes go through `&mut self`, so there is no concurrent use.
unsafe impl Send for Doorbell {}

/// Barrier before the first write-combined store of a batch (`mmio_wc_start`): orders the
/// previous doorbell (UC MMIO) write before the new WC stores, so the device never sees WQE
/// bytes of the next batch before the doorbell of the previous one. rdma-core defines
/// `mmio_wc_start()` as `mmio_flush_writes()` on every architecture (`dsb st` on aarch64; its
/// `mmio_wc_spinlock` adds it after taking the lock everywhere but x86), and so does this.
/// We take no lock: the send queue is `&mut`, so one thread owns the LLQ, and the barrier is
/// issued unconditionally.
#[inline]
pub(crate) fn wc_start() {
    wc_flush();
}

/// Barrier between write-combined WQE stores and the doorbell store that publishes them
/// (`mmio_flush_writes`): every WC store to the LLQ before it becomes visible to the device
/// before the doorbell write after it. `fence(SeqCst)` stops the compiler (and weakly ordered
/// CPUs for normal memory) from moving stores across; WC stores on x86 are not ordered by it,
/// which is what `sfence` is for; on aarch64 `dsb st` drains the write buffers the same way.
/// rdma-core's `mmio_flush_writes` is exactly `sfence` (x86_64) / `dsb st` (aarch64); the
/// `fence(SeqCst)` before it (`mfence` / `dmb ish`) only adds ordering. `dsb st` completes
/// every earlier store, to any memory type and for every observer (the device included),
/// before any later store (the doorbell) starts, which `dmb ish` alone does not promise for
/// write-combined device memory.
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
/// aarch64 `dmb oshst` orders the stores for the outer-shareable domain the device is in
/// (rdma-core's `udma_to_device_barrier` is the same instructions on both, and Linux's
/// `dma_wmb()` on arm64 is `dmb oshst` too). The doorbell's Release store (`stlr`) on top of
/// it is not what either relies on for DMA ordering, so the explicit `dmb oshst` stays.
#[inline]
pub(crate) fn dma_wmb() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    compiler_fence(Ordering::SeqCst);
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: a barrier instruction with no operands; touches no memory or registers.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
    // Miri (no inline asm; see `wc_flush`): a full fence, at least as strong as any of the
    // above in the language's memory model. (Other architectures do not compile, see above.)
    #[cfg(miri)]
    fence(Ordering::SeqCst);
}

/// Barrier between reading a CQE's phase (an `Acquire` load) and reading the rest of the CQE
/// (`udma_from_device_barrier`): no field of the entry is read before the phase that says the
/// device finished writing it. `Acquire` already orders the later loads in the Rust model; the
/// extra instruction matches what rdma-core does for DMA-written memory (`lfence` on x86_64,
/// `dmb oshld` on aarch64, `udma_from_device_barrier`). On aarch64 the `Acquire` load is an
/// `ldar`; the CQE is written by the device's DMA, and what rdma-core (and Linux's arm64
/// `dma_rmb()`) relies on for that is `dmb oshld`, so we issue it after the `ldar` as well.
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
    // Miri (which implements neither `lfence` nor inline asm; see `wc_flush`): a full fence,
    // at least as strong in the language's memory model.
    #[cfg(miri)]
    fence(Ordering::SeqCst);
    compiler_fence(Ordering::SeqCst);
}

/// Stores one 64-byte block (`words`, already in device byte order) to write-combined device
/// memory at `dst`, in ascending address order, never reading the destination.
///
/// On aarch64 this is what rdma-core's `mmio_memcpy_x64` does there (`vst4q_u64(dest,
/// vld4q_u64(src))`, util/mmio.h): one `ld4` into four vector registers and one `st4` of all
/// 64 bytes, a single instruction writing the whole block, so the write-combining buffer
/// receives it at once and the device sees a whole 64-byte block rather than eight 8-byte
/// pieces that might be flushed separately. (ld4 de-interleaves and st4 interleaves back: the
/// bytes land unchanged.) rdma-core uses `st64b` (FEAT_LS64, single-copy atomic) only when built
/// with `-march=armv8-a+ls64` and the CPU has it; Graviton 2-4 do not, and neither do we. On
/// x86_64 (and under Miri, which has no inline asm) eight ascending 8-byte volatile stores,
/// as rdma-core's generic `mmio_memcpy_x64`.
///
/// # Safety
/// `dst` must be 8-byte aligned and valid for writes of 64 bytes.
#[inline(always)]
pub(crate) unsafe fn store_block64(dst: *mut u64, words: &[u64; 8]) {
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: `words` is 64 readable bytes (a `&[u64; 8]`); the caller guarantees `dst` is
    // valid for 64 bytes of writes. `ld4`/`st4` (NEON, part of the aarch64 baseline the Rust
    // targets assume) read exactly `words` and write exactly `dst..dst+64`; v0-v3 are declared
    // clobbered, no other register or flag is touched, and no stack is used.
    unsafe {
        core::arch::asm!(
            "ld4 {{v0.2d, v1.2d, v2.2d, v3.2d}}, [{src}]",
            "st4 {{v0.2d, v1.2d, v2.2d, v3.2d}}, [{dst}]",
            src = in(reg) words.as_ptr(),
            dst = in(reg) dst,
            out("v0") _,
            out("v1") _,
            out("v2") _,
            out("v3") _,
            options(nostack, preserves_flags),
        )
    };
    #[cfg(any(not(target_arch = "aarch64"), miri))]
    for (i, w) in words.iter().enumerate() {
        // SAFETY: the caller guarantees `dst` is 8-aligned and writable for 64 bytes; word
        // `i` < 8 covers bytes `8*i .. 8*i+8`.
        unsafe { dst.add(i).write_volatile(*w) };
    }
}

/// Copies `src` to write-combined device memory in 64-byte blocks ([`store_block64`], the
/// equivalent of `mmio_memcpy_x64`) and any 8-byte words after the last whole block with
/// ascending volatile stores: in address order, never reading the destination. `src.len()`
/// must be a multiple of 8 (WQEs are 64 or 128 bytes, so whole blocks).
///
/// # Safety
/// `dst` must be 8-byte aligned and valid for writes of `src.len()` bytes.
#[inline]
pub(crate) unsafe fn copy_to_wc(dst: NonNull<u8>, src: &[u8]) {
    let words = dst.as_ptr().cast::<u64>();
    let blocks = src.chunks_exact(64);
    let tail = blocks.remainder();
    let mut n = 0;
    for block in blocks {
        let mut w = [0u64; 8];
        for (d, c) in w.iter_mut().zip(block.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            *d = u64::from_ne_bytes(b);
        }
        // SAFETY: the caller guarantees `dst` is 8-aligned and writable for `src.len()` bytes;
        // block `n` covers bytes `64*n .. 64*n+64 <= src.len()` (a whole chunk). Native-endian
        // bytes in, the same bytes out: the copy is byte-exact.
        unsafe { store_block64(words.add(8 * n), &w) };
        n += 1;
    }
    for (i, chunk) in tail.chunks_exact(8).enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        // SAFETY: as above; word `8*n + i` covers bytes up to `64*n + 8*i + 8 <= src.len()`.
        unsafe { words.add(8 * n + i).write_volatile(u64::from_ne_bytes(w)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// The 64-byte block store (`ld4`/`st4` on aarch64, run there under qemu-user by
    /// `cargo xtask aarch64`) and the word tail copy every byte exactly where it belongs and
    /// nothing past the end.
    #[test]
    fn copy_to_wc_is_byte_exact_in_blocks_and_words() {
        for len in [64usize, 128, 136, 8, 0] {
            let src: Vec<u8> = (0..len)
                .map(|i| (i as u8).wrapping_mul(37) ^ 0x5a)
                .collect();
            // 8-aligned destination with a guard word after it.
            let mut dst = [u64::from_ne_bytes([0xee; 8]); 20];
            let ptr = NonNull::new(dst.as_mut_ptr().cast::<u8>()).unwrap();
            // SAFETY: `dst` is 8-aligned and 160 >= len + 8 bytes long.
            unsafe { copy_to_wc(ptr, &src) };
            let bytes: Vec<u8> = dst.iter().flat_map(|w| w.to_ne_bytes()).collect();
            assert_eq!(&bytes[..len], &src[..], "len {len}");
            assert!(
                bytes[len..].iter().all(|&b| b == 0xee),
                "len {len}: wrote past the end"
            );
        }
    }
}
