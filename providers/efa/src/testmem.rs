//! Heap-backed stand-ins for the mappings the kernel would give (tests only).
//!
//! The test plays the device: it reads what the queues wrote and writes CQEs, all through the
//! same raw pointer the queue holds (no references to memory the queue writes).
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// A zeroed, 64-byte aligned heap region.
pub struct Mem {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Mem {
    pub fn new(len: usize) -> Self {
        let layout = Layout::from_size_align(len.max(64), 64).unwrap();
        // SAFETY: the layout has non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        Mem {
            ptr: NonNull::new(p).expect("test allocation"),
            layout,
        }
    }

    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    pub fn u32_ptr(&self) -> NonNull<u32> {
        self.ptr.cast()
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Copies `len` bytes at `off` out (the test device reading).
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off + len <= self.len());
        (0..len)
            // SAFETY: in bounds (asserted); the queue writes only between our calls (same
            // thread), so there is no concurrent access.
            .map(|i| unsafe { self.ptr.as_ptr().add(off + i).read_volatile() })
            .collect()
    }

    /// Writes bytes at `off` (the test device writing).
    pub fn write(&self, off: usize, bytes: &[u8]) {
        assert!(off + bytes.len() <= self.len());
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: in bounds (asserted); single-threaded test, no concurrent access.
            unsafe { self.ptr.as_ptr().add(off + i).write_volatile(*b) };
        }
    }

    /// Reads the first 32-bit word (a fake doorbell's last value).
    pub fn word(&self) -> u32 {
        let b = self.read(0, 4);
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// An address handle as the tests make them: the device's AH number and the identity of the
/// protection domain it belongs to (what the object model's `Ah` gives a provider).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestAh {
    pub num: u32,
    pub domain: usize,
}

impl uverbs_wr::AddressHandle for TestAh {
    fn ah_num(&self) -> u32 {
        self.num
    }
    fn domain(&self) -> usize {
        self.domain
    }
}

/// The protection domain of the test QPs.
pub const PD: usize = 0x5eed;

/// An AH of the test QPs' domain with device AH number `num`.
pub const fn ah(num: u32) -> TestAh {
    TestAh { num, domain: PD }
}
