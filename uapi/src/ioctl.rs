//! The `RDMA_VERBS_IOCTL` envelope: request number, header and attribute records.
//!
//! Mirrors `rdma/rdma_user_ioctl_cmds.h`, the `RDMA_IOCTL_MAGIC` part of
//! `rdma/rdma_user_ioctl.h`, and `enum rdma_driver_id` from `rdma/ib_user_ioctl_verbs.h`
//! (version basis: rdma-core 65.0 `kernel-headers`; identical in Linux 6.1 except where noted).
//!
//! One ioctl call is an [`IbUverbsIoctlHdr`] immediately followed by `num_attrs`
//! [`IbUverbsAttr`] records in one buffer of `length` bytes; the ids that go into
//! `object_id`/`method_id`/`attr_id` are in [`crate::cmds`].

uapi_struct! {
    /// One attribute of an ioctl method call.
    ///
    /// `data` is, by attribute type: a user pointer (`len` = buffer length), inline data of up
    /// to 8 bytes (`len` <= 8), an object handle (IDR, `len` = 0), a file descriptor (FD,
    /// read through [`IbUverbsAttr::data_s64`], `len` = 0) or a pointer to a `u32` array of
    /// handles. `attr_data` is a C union: for `UVERBS_ATTR_TYPE_ENUM` attributes it holds
    /// `enum_data { u8 elem_id; u8 reserved; }` (see [`IbUverbsAttr::elem_id`]), otherwise it
    /// is a `u16 reserved` that must be zero (the kernel rejects non-zero with `EINVAL`).
    #[repr(align(8))]
    pub struct IbUverbsAttr = "ib_uverbs_attr", size 16 {
        /// Attribute id within the method (`crate::cmds::UVERBS_ATTR_*`).
        pub attr_id: u16,
        /// Length of what `data` points to (pointers, handle arrays, inline data).
        pub len: u16,
        /// `UVERBS_ATTR_F_*`: [`UVERBS_ATTR_F_MANDATORY`] in, [`UVERBS_ATTR_F_VALID_OUTPUT`] out.
        pub flags: u16,
        /// C union `attr_data { struct { u8 elem_id; u8 reserved; } enum_data; u16 reserved; }`.
        pub attr_data: [u8; 2],
        /// C union `{ __aligned_u64 data; __s64 data_s64; }`.
        pub data: u64,
    }

    /// Header of an `RDMA_VERBS_IOCTL` call.
    ///
    /// C has a trailing flexible array `struct ib_uverbs_attr attrs[]`: the header is followed
    /// by `num_attrs` [`IbUverbsAttr`] records and `length` covers header plus records.
    #[repr(align(8))]
    pub struct IbUverbsIoctlHdr = "ib_uverbs_ioctl_hdr", size 24 {
        /// Total length in bytes: header + `num_attrs * size_of::<IbUverbsAttr>()`.
        pub length: u16,
        /// `crate::cmds::UVERBS_OBJECT_*`.
        pub object_id: u16,
        /// `crate::cmds::UVERBS_METHOD_*` of that object.
        pub method_id: u16,
        /// Number of [`IbUverbsAttr`] records following the header.
        pub num_attrs: u16,
        /// Must be zero (`EPROTONOSUPPORT` otherwise).
        pub reserved1: u64,
        /// `RDMA_DRIVER_*` of the device; must match the device when driver-namespace ids
        /// are used (`EINVAL` otherwise).
        pub driver_id: u32,
        /// Must be zero (`EPROTONOSUPPORT` otherwise).
        pub reserved2: u32,
    }
}

impl IbUverbsAttr {
    /// `attr_data.enum_data.elem_id`: the chosen element of an enum attribute.
    pub const fn elem_id(&self) -> u8 {
        self.attr_data[0]
    }

    /// Sets `attr_data.enum_data.elem_id` and clears `attr_data.enum_data.reserved`.
    pub fn set_elem_id(&mut self, elem_id: u8) {
        self.attr_data = [elem_id, 0];
    }

    /// `attr_data.reserved` (the whole 2-byte union as one `u16`).
    pub const fn attr_data_reserved(&self) -> u16 {
        u16::from_ne_bytes(self.attr_data)
    }

    /// `data_s64`: the union member the kernel reads for FD attributes.
    pub const fn data_s64(&self) -> i64 {
        self.data as i64
    }

    /// Sets `data_s64` (e.g. a file descriptor for an `FD_IN` attribute).
    pub fn set_data_s64(&mut self, value: i64) {
        self.data = value as u64;
    }
}

/// `RDMA_IOCTL_MAGIC`: the ioctl type byte of all RDMA ioctls (`rdma/rdma_user_ioctl_cmds.h`).
pub const RDMA_IOCTL_MAGIC: u8 = 0x1b;

/// `IB_IOCTL_MAGIC`: legacy name of [`RDMA_IOCTL_MAGIC`] (`rdma/rdma_user_ioctl.h`).
pub const IB_IOCTL_MAGIC: u8 = RDMA_IOCTL_MAGIC;

/// `RDMA_VERBS_IOCTL` = `_IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)`.
///
/// Computed with the generic Linux `_IOC` encoding (x86, arm, arm64, riscv, s390 and the
/// other architectures that use `asm-generic/ioctl.h`): `dir << 30 | size << 16 | type << 8
/// | nr`, with `_IOC_READ|_IOC_WRITE` = 3 and size = `sizeof(struct ib_uverbs_ioctl_hdr)` = 24.
/// The value is `0xc018_1b01`; `tests/c_layout_host_only.rs` compares it with the C macro.
pub const RDMA_VERBS_IOCTL: u32 = (3 << 30)
    | ((core::mem::size_of::<IbUverbsIoctlHdr>() as u32) << 16)
    | ((RDMA_IOCTL_MAGIC as u32) << 8)
    | 1;

/// `UVERBS_ATTR_F_MANDATORY`: the kernel must understand this attribute, or fail the call
/// with `EPROTONOSUPPORT` (an unknown attribute without it is ignored).
pub const UVERBS_ATTR_F_MANDATORY: u16 = 1 << 0;
/// `UVERBS_ATTR_F_VALID_OUTPUT`: set by the kernel on output attributes it has written.
pub const UVERBS_ATTR_F_VALID_OUTPUT: u16 = 1 << 1;

/// `enum rdma_driver_id` `RDMA_DRIVER_UNKNOWN`.
pub const RDMA_DRIVER_UNKNOWN: u32 = 0;
/// `enum rdma_driver_id` `RDMA_DRIVER_MLX5`.
pub const RDMA_DRIVER_MLX5: u32 = 1;
/// `enum rdma_driver_id` `RDMA_DRIVER_MLX4`.
pub const RDMA_DRIVER_MLX4: u32 = 2;
/// `enum rdma_driver_id` `RDMA_DRIVER_CXGB3`.
pub const RDMA_DRIVER_CXGB3: u32 = 3;
/// `enum rdma_driver_id` `RDMA_DRIVER_CXGB4`.
pub const RDMA_DRIVER_CXGB4: u32 = 4;
/// `enum rdma_driver_id` `RDMA_DRIVER_MTHCA`.
pub const RDMA_DRIVER_MTHCA: u32 = 5;
/// `enum rdma_driver_id` `RDMA_DRIVER_BNXT_RE`.
pub const RDMA_DRIVER_BNXT_RE: u32 = 6;
/// `enum rdma_driver_id` `RDMA_DRIVER_OCRDMA`.
pub const RDMA_DRIVER_OCRDMA: u32 = 7;
/// `enum rdma_driver_id` `RDMA_DRIVER_NES`.
pub const RDMA_DRIVER_NES: u32 = 8;
/// `enum rdma_driver_id` `RDMA_DRIVER_I40IW`.
pub const RDMA_DRIVER_I40IW: u32 = 9;
/// `enum rdma_driver_id` `RDMA_DRIVER_IRDMA` (= `RDMA_DRIVER_I40IW`).
pub const RDMA_DRIVER_IRDMA: u32 = RDMA_DRIVER_I40IW;
/// `enum rdma_driver_id` `RDMA_DRIVER_VMW_PVRDMA`.
pub const RDMA_DRIVER_VMW_PVRDMA: u32 = 10;
/// `enum rdma_driver_id` `RDMA_DRIVER_QEDR`.
pub const RDMA_DRIVER_QEDR: u32 = 11;
/// `enum rdma_driver_id` `RDMA_DRIVER_HNS`.
pub const RDMA_DRIVER_HNS: u32 = 12;
/// `enum rdma_driver_id` `RDMA_DRIVER_USNIC`.
pub const RDMA_DRIVER_USNIC: u32 = 13;
/// `enum rdma_driver_id` `RDMA_DRIVER_RXE` (soft-RoCE).
pub const RDMA_DRIVER_RXE: u32 = 14;
/// `enum rdma_driver_id` `RDMA_DRIVER_HFI1`.
pub const RDMA_DRIVER_HFI1: u32 = 15;
/// `enum rdma_driver_id` `RDMA_DRIVER_QIB`.
pub const RDMA_DRIVER_QIB: u32 = 16;
/// `enum rdma_driver_id` `RDMA_DRIVER_EFA` (AWS Elastic Fabric Adapter).
pub const RDMA_DRIVER_EFA: u32 = 17;
/// `enum rdma_driver_id` `RDMA_DRIVER_SIW`.
pub const RDMA_DRIVER_SIW: u32 = 18;
/// `enum rdma_driver_id` `RDMA_DRIVER_ERDMA`.
pub const RDMA_DRIVER_ERDMA: u32 = 19;
/// `enum rdma_driver_id` `RDMA_DRIVER_MANA`. Newer than the 6.1 headers.
pub const RDMA_DRIVER_MANA: u32 = 20;
/// `enum rdma_driver_id` `RDMA_DRIVER_IONIC`. Newer than the 6.1 headers.
pub const RDMA_DRIVER_IONIC: u32 = 21;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_ioctl_number_matches_linux_encoding() {
        // The well-known value libibverbs passes to ioctl(2) on x86_64 and arm64.
        assert_eq!(RDMA_VERBS_IOCTL, 0xc018_1b01);
    }

    #[test]
    fn attr_union_accessors_round_trip() {
        let mut a = IbUverbsAttr::default();
        a.set_elem_id(3);
        assert_eq!(a.elem_id(), 3);
        assert_eq!(a.attr_data, [3, 0]);
        a.set_data_s64(-1);
        assert_eq!(a.data, u64::MAX);
        assert_eq!(a.data_s64(), -1);
        a.set_data_s64(7);
        assert_eq!(a.data, 7);
    }
}
