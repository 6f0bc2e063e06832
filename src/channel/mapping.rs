//! One owning type for every mapping of kernel or device memory.
#![allow(unsafe_code)]

use std::ptr::NonNull;

use rustix::mm;

/// A region of kernel queue memory or a doorbell page mapped into this process.
///
/// It is reached only through its raw pointer: the kernel and the device write it concurrently,
/// so no `&[u8]` or `&mut [u8]` over it is ever formed. Dropping it unmaps the region; owners
/// that hand the pointer to ring code keep the `Mapping` alive for as long as that code runs.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is an address range; moving the owner to another thread moves the duty
// to unmap it, and all access to the memory goes through raw pointers whose users synchronise
// with atomics.
unsafe impl Send for Mapping {}
// SAFETY: `&Mapping` only exposes the address and length, never the bytes.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Takes ownership of a region mapped with `mmap`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be a mapping made by `mmap` that nothing else will unmap.
    pub unsafe fn from_raw(ptr: NonNull<u8>, len: usize) -> Self {
        Mapping { ptr, len }
    }

    /// The start of the region.
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The length of the region in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never true for a mapping the kernel made).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pointer to `offset` bytes into the mapping, if `offset + size` stays inside it.
    pub fn ptr_at(&self, offset: usize, size: usize) -> Option<NonNull<u8>> {
        let end = offset.checked_add(size)?;
        if end > self.len {
            return None;
        }
        // SAFETY: offset <= len, so the result stays within (or one past) the mapped object.
        let p = unsafe { self.ptr.as_ptr().add(offset) };
        NonNull::new(p)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: by the contract of `from_raw` we own this mapping and nothing else unmaps it;
        // users of the pointer are owned by (and dropped before) the object that owns us.
        let r = unsafe { mm::munmap(self.ptr.as_ptr().cast(), self.len) };
        if let Err(e) = r {
            // munmap of a range we mapped can only fail if our bookkeeping is broken.
            crate::report_drop_error("munmap", "mapping", e);
        }
    }
}

/// Maps an anonymous, private, zero-filled region (used by tests and device models).
pub fn anonymous(len: usize) -> Result<Mapping, rustix::io::Errno> {
    // SAFETY: a fresh anonymous mapping at an address the kernel chooses aliases nothing.
    let p = unsafe {
        mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            mm::ProtFlags::READ | mm::ProtFlags::WRITE,
            mm::MapFlags::PRIVATE,
        )?
    };
    let ptr = NonNull::new(p.cast::<u8>()).ok_or(rustix::io::Errno::NOMEM)?;
    // SAFETY: we just made this mapping and own it.
    Ok(unsafe { Mapping::from_raw(ptr, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptr_at_checks_bounds() {
        let m = anonymous(4096).unwrap();
        assert!(m.ptr_at(0, 4096).is_some());
        assert!(m.ptr_at(4092, 4).is_some());
        assert!(m.ptr_at(4093, 4).is_none());
        assert!(m.ptr_at(usize::MAX, 2).is_none());
    }
}
