//! Encoding of `RDMA_VERBS_IOCTL` calls (`rdma_user_ioctl_cmds.h`).
//!
//! An ioctl call is a header followed by an array of attributes. Each attribute is 16 bytes:
//! an id, a length, flags, and 8 bytes of data that hold, depending on the attribute's type,
//! the input itself (inline when it is at most 8 bytes), a pointer to an input or output
//! buffer, an object handle (IDR), or a file descriptor. [`IoctlCmd`] builds the array in the
//! exact layout the kernel reads, borrows every buffer it points to for its lifetime `'a` (so a
//! pointer in the array can never dangle), and remembers privately what each attribute is, so
//! that a device model can read inputs and write outputs safely.
#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd};

use uverbs_uapi::cmds::{UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT};
use uverbs_uapi::ioctl::{
    IbUverbsAttr, IbUverbsIoctlHdr, UVERBS_ATTR_F_MANDATORY, UVERBS_ATTR_F_VALID_OUTPUT,
};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use super::Errno;

/// The most attributes one call carries (the largest verbs method, QP create, uses about 20).
pub const MAX_ATTRS: usize = 32;

/// What an attribute carries; decides how its 8 data bytes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrKind {
    /// `UVERBS_ATTR_TYPE_PTR_IN`: input bytes, inline in `data` when at most 8 bytes long.
    PtrIn,
    /// `UVERBS_ATTR_TYPE_PTR_OUT`: `data` points at a buffer of `len` bytes for the kernel.
    PtrOut,
    /// `UVERBS_ATTR_TYPE_IDR` naming an existing object (its handle in `data`).
    Idr,
    /// `UVERBS_ATTR_TYPE_IDR` with `UVERBS_ACCESS_NEW`: the kernel writes the new handle.
    IdrNew,
    /// `UVERBS_ATTR_TYPE_FD` naming an open file descriptor.
    Fd,
    /// `UVERBS_ATTR_TYPE_FD` with `UVERBS_ACCESS_NEW`: the kernel writes the new fd.
    FdNew,
    /// `UVERBS_ATTR_TYPE_CONST`: a scalar inline in `data`.
    Const,
    /// `UVERBS_ATTR_TYPE_ENUM_IN`: an element id plus that element's input bytes.
    EnumIn,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    kind: AttrKind,
    // For PtrIn/EnumIn longer than 8 bytes and PtrOut: the borrowed buffer.
    ptr: *mut u8,
    len: usize,
}

const EMPTY_SLOT: Slot = Slot {
    kind: AttrKind::Const,
    ptr: std::ptr::null_mut(),
    len: 0,
};

/// The header and attribute array, contiguous as the kernel reads them.
#[repr(C)]
struct Wire {
    hdr: IbUverbsIoctlHdr,
    attrs: [IbUverbsAttr; MAX_ATTRS],
}

/// One `RDMA_VERBS_IOCTL` call under construction, and after the call its outputs.
///
/// Every buffer an attribute points to is borrowed for `'a`, so the call cannot outlive them.
pub struct IoctlCmd<'a> {
    wire: Wire,
    slots: [Slot; MAX_ATTRS],
    count: usize,
    error: Option<&'static str>,
    _borrows: PhantomData<&'a mut [u8]>,
}

impl std::fmt::Debug for IoctlCmd<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoctlCmd")
            .field("object_id", &self.wire.hdr.object_id)
            .field("method_id", &self.wire.hdr.method_id)
            .field("attrs", &&self.wire.attrs[..self.count])
            .finish()
    }
}

fn attr(id: u16, len: u16, data: u64) -> IbUverbsAttr {
    IbUverbsAttr {
        attr_id: id,
        len,
        flags: UVERBS_ATTR_F_MANDATORY,
        data,
        ..IbUverbsAttr::default()
    }
}

impl<'a> IoctlCmd<'a> {
    /// Starts a call of `method_id` on `object_id` (ids from `ib_user_ioctl_cmds.h`, or a
    /// driver's own ids in the driver namespace).
    pub fn new(object_id: u16, method_id: u16) -> Self {
        IoctlCmd {
            wire: Wire {
                hdr: IbUverbsIoctlHdr {
                    object_id,
                    method_id,
                    ..IbUverbsIoctlHdr::default()
                },
                attrs: [IbUverbsAttr::default(); MAX_ATTRS],
            },
            slots: [EMPTY_SLOT; MAX_ATTRS],
            count: 0,
            error: None,
            _borrows: PhantomData,
        }
    }

    fn push(&mut self, a: IbUverbsAttr, slot: Slot) -> &mut Self {
        if self.count == MAX_ATTRS {
            self.error = Some("too many attributes for one ioctl call");
            return self;
        }
        if self.wire.attrs[..self.count]
            .iter()
            .any(|x| x.attr_id == a.attr_id)
        {
            self.error = Some("the same attribute was given twice");
            return self;
        }
        self.wire.attrs[self.count] = a;
        self.slots[self.count] = slot;
        self.count += 1;
        self
    }

    fn len16(&mut self, len: usize) -> u16 {
        match u16::try_from(len) {
            Ok(l) => l,
            Err(_) => {
                self.error = Some("an attribute buffer is longer than 65535 bytes");
                0
            }
        }
    }

    /// An input object handle (`UVERBS_ATTR_TYPE_IDR`, read or write or destroy access).
    pub fn idr(&mut self, id: u16, handle: u32) -> &mut Self {
        let slot = Slot {
            kind: AttrKind::Idr,
            ..EMPTY_SLOT
        };
        self.push(attr(id, 0, u64::from(handle)), slot)
    }

    /// A new object: the kernel writes its handle, read it with [`IoctlCmd::out_data`].
    pub fn idr_new(&mut self, id: u16) -> &mut Self {
        let slot = Slot {
            kind: AttrKind::IdrNew,
            ..EMPTY_SLOT
        };
        self.push(attr(id, 0, 0), slot)
    }

    /// An input file descriptor (`UVERBS_ATTR_TYPE_FD`), borrowed for the call.
    pub fn fd(&mut self, id: u16, fd: BorrowedFd<'a>) -> &mut Self {
        let slot = Slot {
            kind: AttrKind::Fd,
            ..EMPTY_SLOT
        };
        let raw = fd.as_raw_fd();
        self.push(attr(id, 0, raw as i64 as u64), slot)
    }

    /// A new file descriptor the kernel creates; read it with [`IoctlCmd::out_data`].
    pub fn fd_new(&mut self, id: u16) -> &mut Self {
        let slot = Slot {
            kind: AttrKind::FdNew,
            ..EMPTY_SLOT
        };
        self.push(attr(id, 0, 0), slot)
    }

    /// A scalar constant (`UVERBS_ATTR_TYPE_CONST`), carried as 8 bytes.
    pub fn const_u64(&mut self, id: u16, value: u64) -> &mut Self {
        let slot = Slot {
            kind: AttrKind::Const,
            ..EMPTY_SLOT
        };
        self.push(attr(id, 8, value), slot)
    }

    /// A 32-bit input (`UVERBS_ATTR_TYPE_PTR_IN` of a `u32`, inline).
    pub fn u32_in(&mut self, id: u16, value: u32) -> &mut Self {
        let mut data = [0u8; 8];
        data[..4].copy_from_slice(&value.to_ne_bytes());
        let slot = Slot {
            kind: AttrKind::PtrIn,
            ..EMPTY_SLOT
        };
        self.push(attr(id, 4, u64::from_ne_bytes(data)), slot)
    }

    /// A 64-bit input (`UVERBS_ATTR_TYPE_PTR_IN` of a `u64`, inline).
    pub fn u64_in(&mut self, id: u16, value: u64) -> &mut Self {
        let slot = Slot {
            kind: AttrKind::PtrIn,
            ..EMPTY_SLOT
        };
        self.push(attr(id, 8, value), slot)
    }

    /// An input buffer (`UVERBS_ATTR_TYPE_PTR_IN`): inline when at most 8 bytes, else a pointer.
    pub fn ptr_in<T: IntoBytes + Immutable + ?Sized>(
        &mut self,
        id: u16,
        value: &'a T,
    ) -> &mut Self {
        let bytes = value.as_bytes();
        let len = self.len16(bytes.len());
        let (data, slot) = inline_or_pointer(bytes, AttrKind::PtrIn);
        self.push(attr(id, len, data), slot)
    }

    /// An output buffer (`UVERBS_ATTR_TYPE_PTR_OUT`) the kernel fills (up to its length).
    pub fn ptr_out<T: FromBytes + IntoBytes + ?Sized>(
        &mut self,
        id: u16,
        out: &'a mut T,
    ) -> &mut Self {
        let bytes = out.as_mut_bytes();
        let len = self.len16(bytes.len());
        let slot = Slot {
            kind: AttrKind::PtrOut,
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
        };
        self.push(attr(id, len, bytes.as_mut_ptr() as u64), slot)
    }

    /// An enum input (`UVERBS_ATTR_TYPE_ENUM_IN`): element `elem_id` with its input bytes.
    pub fn enum_in(&mut self, id: u16, elem_id: u8, value: &'a [u8]) -> &mut Self {
        let len = self.len16(value.len());
        let (data, slot) = inline_or_pointer(value, AttrKind::EnumIn);
        let mut a = attr(id, len, data);
        a.attr_data = [elem_id, 0];
        self.push(a, slot)
    }

    /// Driver-specific input (`UVERBS_ATTR_UHW_IN`), e.g. `struct efa_ibv_create_qp`.
    pub fn driver_in(&mut self, data: &'a [u8]) -> &mut Self {
        if data.is_empty() {
            return self;
        }
        self.ptr_in(UVERBS_ATTR_UHW_IN, data)
    }

    /// Driver-specific output (`UVERBS_ATTR_UHW_OUT`), e.g. `struct efa_ibv_create_qp_resp`.
    pub fn driver_out(&mut self, out: &'a mut [u8]) -> &mut Self {
        if out.is_empty() {
            return self;
        }
        self.ptr_out(UVERBS_ATTR_UHW_OUT, out)
    }

    /// Makes the attribute added last optional: a kernel that does not know it ignores it.
    pub fn optional(&mut self) -> &mut Self {
        if let Some(a) = self.count.checked_sub(1).map(|i| &mut self.wire.attrs[i]) {
            a.flags &= !(UVERBS_ATTR_F_MANDATORY);
        }
        self
    }

    /// The object id of the call.
    pub fn object_id(&self) -> u16 {
        self.wire.hdr.object_id
    }

    /// The method id of the call.
    pub fn method_id(&self) -> u16 {
        self.wire.hdr.method_id
    }

    /// The driver id the header carries (set by the channel when the call is made).
    pub fn driver_id(&self) -> u32 {
        self.wire.hdr.driver_id
    }

    /// The attributes as they will be (or were) sent.
    pub fn attrs(&self) -> impl Iterator<Item = AttrRef<'_>> {
        self.wire.attrs[..self.count]
            .iter()
            .zip(&self.slots[..self.count])
            .map(|(raw, slot)| AttrRef { raw, slot: *slot })
    }

    /// The attribute with `id`, for a device model to fill in outputs.
    pub fn attr_mut(&mut self, id: u16) -> Option<AttrMut<'_>> {
        let i = self.wire.attrs[..self.count]
            .iter()
            .position(|a| a.attr_id == id)?;
        Some(AttrMut {
            raw: &mut self.wire.attrs[i],
            slot: self.slots[i],
        })
    }

    /// The data word of attribute `id` after the call (a new handle or fd), if present.
    pub fn out_data(&self, id: u16) -> Option<u64> {
        self.attrs().find(|a| a.id() == id).map(|a| a.data())
    }

    /// Whether the kernel wrote output attribute `id` (`UVERBS_ATTR_F_VALID_OUTPUT`).
    pub fn out_valid(&self, id: u16) -> bool {
        self.attrs()
            .find(|a| a.id() == id)
            .is_some_and(|a| a.flags() & UVERBS_ATTR_F_VALID_OUTPUT != 0)
    }

    /// Finalises the header for `driver_id` and returns a pointer to the wire bytes.
    ///
    /// Fails with `EINVAL` when a builder call recorded an encoding error (too many attributes,
    /// a duplicate, a buffer longer than the kernel accepts).
    pub(crate) fn prepare(&mut self, driver_id: u32) -> Result<*mut IbUverbsIoctlHdr, Errno> {
        if let Some(_why) = self.error {
            return Err(Errno::INVAL);
        }
        let len = std::mem::size_of::<IbUverbsIoctlHdr>()
            + self.count * std::mem::size_of::<IbUverbsAttr>();
        self.wire.hdr.length = len as u16;
        self.wire.hdr.num_attrs = self.count as u16;
        self.wire.hdr.driver_id = driver_id;
        self.wire.hdr.reserved1 = 0;
        self.wire.hdr.reserved2 = 0;
        Ok(&mut self.wire.hdr)
    }

    /// Returns the header as the caller left it, refusing only an attribute count larger than
    /// the array this command owns (the kernel would then read and write past it).
    pub(crate) fn prepare_unchecked(&mut self) -> Result<*mut IbUverbsIoctlHdr, Errno> {
        if usize::from(self.wire.hdr.num_attrs) > MAX_ATTRS {
            return Err(Errno::INVAL);
        }
        Ok(&mut self.wire.hdr)
    }

    /// Fills in length, attribute count and driver id as [`Channel::ioctl`] would, without
    /// sending, so a test can then alter the header (see [`IoctlCmd::raw_header_mut`]).
    ///
    /// [`Channel::ioctl`]: super::Channel::ioctl
    pub fn finalize(&mut self, driver_id: u32) -> Result<(), Errno> {
        self.prepare(driver_id).map(|_| ())
    }

    /// Why the command cannot be encoded, if a builder call failed.
    pub fn encoding_error(&self) -> Option<&'static str> {
        self.error
    }

    /// The header and attribute bytes exactly as the syscall passes them (after `prepare`).
    pub fn wire_bytes(&self) -> Vec<u8> {
        let mut v = self.wire.hdr.as_bytes().to_vec();
        for a in &self.wire.attrs[..self.count] {
            v.extend_from_slice(a.as_bytes());
        }
        v
    }

    /// Gives raw access to an attribute's 16 bytes, for tests of what the kernel rejects.
    ///
    /// # Safety
    /// The kernel follows `data` as a pointer for pointer attributes and writes outputs
    /// there: the caller must leave `data` of pointer attributes pointing at memory valid for
    /// `len` bytes (reads for inputs, writes for outputs) for the duration of the call.
    #[allow(unsafe_code)]
    pub unsafe fn raw_attr_mut(&mut self, index: usize) -> Option<&mut IbUverbsAttr> {
        self.wire.attrs[..self.count].get_mut(index)
    }

    /// Gives raw access to the header, for tests of what the kernel rejects (sent as is by
    /// `uverbs::raw::ioctl_unchecked`).
    pub fn raw_header_mut(&mut self) -> &mut IbUverbsIoctlHdr {
        &mut self.wire.hdr
    }
}

fn inline_or_pointer(bytes: &[u8], kind: AttrKind) -> (u64, Slot) {
    if bytes.len() <= 8 {
        let mut data = [0u8; 8];
        data[..bytes.len()].copy_from_slice(bytes);
        let slot = Slot { kind, ..EMPTY_SLOT };
        (u64::from_ne_bytes(data), slot)
    } else {
        let slot = Slot {
            kind,
            ptr: bytes.as_ptr().cast_mut(),
            len: bytes.len(),
        };
        (bytes.as_ptr() as u64, slot)
    }
}

/// A read-only view of one attribute.
#[derive(Debug, Clone, Copy)]
pub struct AttrRef<'c> {
    raw: &'c IbUverbsAttr,
    slot: Slot,
}

impl AttrRef<'_> {
    /// The attribute id.
    pub fn id(&self) -> u16 {
        self.raw.attr_id
    }
    /// The attribute's flags (`UVERBS_ATTR_F_*`).
    pub fn flags(&self) -> u16 {
        self.raw.flags
    }
    /// Whether the attribute is mandatory.
    pub fn is_mandatory(&self) -> bool {
        self.raw.flags & UVERBS_ATTR_F_MANDATORY != 0
    }
    /// What the attribute carries.
    pub fn kind(&self) -> AttrKind {
        self.slot.kind
    }
    /// The length field.
    pub fn len(&self) -> usize {
        usize::from(self.raw.len)
    }
    /// Whether the length field is zero.
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }
    /// The 8 data bytes as a number (a handle, an fd, a constant or a pointer).
    pub fn data(&self) -> u64 {
        self.raw.data
    }
    /// The enum element id of an `ENUM_IN` attribute.
    pub fn enum_elem(&self) -> u8 {
        self.raw.attr_data[0]
    }
    /// The input bytes of a `PTR_IN`/`ENUM_IN`/`CONST` attribute, wherever they live.
    pub fn input(&self) -> Option<&[u8]> {
        match self.slot.kind {
            AttrKind::PtrIn | AttrKind::EnumIn | AttrKind::Const => {}
            _ => return None,
        }
        if self.slot.ptr.is_null() {
            let bytes: &[u8; 8] = zerocopy::transmute_ref!(&self.raw.data);
            Some(&bytes[..self.len().min(8)])
        } else {
            // SAFETY: the slot pointer and length come from a `&'a [u8]` the IoctlCmd<'a>
            // borrows; that borrow outlives `self` (tied to `&IoctlCmd`), and shared borrows
            // cannot be written through meanwhile.
            Some(unsafe { std::slice::from_raw_parts(self.slot.ptr, self.slot.len) })
        }
    }
}

/// A writable view of one attribute, for a device model answering a call.
#[derive(Debug)]
pub struct AttrMut<'c> {
    raw: &'c mut IbUverbsAttr,
    slot: Slot,
}

impl AttrMut<'_> {
    /// Copies `bytes` into a `PTR_OUT` buffer as the kernel's `uverbs_copy_to` does: at most
    /// the buffer's length, and marks the output valid. Returns the bytes copied.
    pub fn write_output(&mut self, bytes: &[u8]) -> Result<usize, Errno> {
        if self.slot.kind != AttrKind::PtrOut {
            return Err(Errno::INVAL);
        }
        let n = bytes.len().min(self.slot.len);
        // SAFETY: the slot came from a `&'a mut [u8]` borrowed by the IoctlCmd<'a> for its whole
        // life; we hold `&mut` to the command, so no other reference to that buffer is live.
        // `n` is within both buffers.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.slot.ptr, n) };
        self.raw.flags |= UVERBS_ATTR_F_VALID_OUTPUT;
        Ok(n)
    }

    /// Sets the data word of an `IDR`-new or `FD`-new attribute (the new handle or fd).
    pub fn set_new(&mut self, value: u64) -> Result<(), Errno> {
        match self.slot.kind {
            AttrKind::IdrNew | AttrKind::FdNew => {
                self.raw.data = value;
                Ok(())
            }
            _ => Err(Errno::INVAL),
        }
    }

    /// A read-only view of this attribute.
    pub fn as_ref(&self) -> AttrRef<'_> {
        AttrRef {
            raw: self.raw,
            slot: self.slot,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_inputs_are_inline_long_ones_point() {
        let long = [7u8; 24];
        let short = 0x1122_3344u32;
        let mut cmd = IoctlCmd::new(3, 4);
        cmd.ptr_in(1, &short).ptr_in(2, &long[..]).optional();
        let v: Vec<_> = cmd.attrs().collect();
        assert_eq!(v[0].len(), 4);
        assert_eq!(v[0].data() as u32, short);
        assert_eq!(v[0].input(), Some(&short.to_ne_bytes()[..]));
        assert!(v[0].is_mandatory());
        assert_eq!(v[1].data(), long.as_ptr() as u64);
        assert_eq!(v[1].input(), Some(&long[..]));
        assert!(!v[1].is_mandatory());
    }

    #[test]
    fn header_is_finalised_with_length_and_driver() {
        let mut out = [0u32; 2];
        let mut cmd = IoctlCmd::new(1, 2);
        cmd.idr_new(0).const_u64(1, 9).ptr_out(2, &mut out[..]);
        let hdr = cmd.prepare(7).unwrap();
        // SAFETY: prepare returned a pointer to cmd's own header, still live and unaliased.
        let hdr = unsafe { &*hdr };
        assert_eq!(hdr.length, 24 + 3 * 16);
        assert_eq!(hdr.num_attrs, 3);
        assert_eq!(hdr.driver_id, 7);
        assert_eq!(cmd.wire_bytes().len(), 24 + 3 * 16);
    }

    #[test]
    fn duplicate_and_oversized_attributes_are_refused() {
        let mut cmd = IoctlCmd::new(1, 2);
        cmd.const_u64(5, 1).const_u64(5, 2);
        assert!(cmd.prepare(0).is_err());
        let big = vec![0u8; 70_000];
        let mut cmd = IoctlCmd::new(1, 2);
        cmd.ptr_in(1, &big[..]);
        assert_eq!(cmd.prepare(0).unwrap_err(), Errno::INVAL);
    }

    #[test]
    fn model_side_writes_outputs_within_bounds() {
        let mut out = [0u8; 4];
        let mut cmd = IoctlCmd::new(1, 2);
        cmd.ptr_out(9, &mut out[..]).idr_new(10).const_u64(11, 3);
        assert_eq!(
            cmd.attr_mut(9).unwrap().write_output(&[1, 2, 3, 4, 5, 6]),
            Ok(4)
        );
        cmd.attr_mut(10).unwrap().set_new(42).unwrap();
        assert!(cmd.attr_mut(11).unwrap().set_new(1).is_err());
        assert!(cmd.attr_mut(11).unwrap().write_output(&[1]).is_err());
        assert!(cmd.out_valid(9));
        assert_eq!(cmd.out_data(10), Some(42));
        assert_eq!(out, [1, 2, 3, 4]);
    }
}
