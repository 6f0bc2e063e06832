//! The EFA device's I/O descriptor formats (`efa_io_defs.h`, `efa_io_regs_defs.h`).
//!
//! These are what the device reads (send WQEs in the LLQ, receive descriptors in the RQ ring) and
//! writes (completion descriptors in the CQ ring). They are a device format, not kernel ABI, so
//! they live here and not in `uverbs-uapi`. All multi-byte fields are little-endian on the wire;
//! the structs use zerocopy's little-endian integers so the layout is exact on any host.
//!
//! C unions become byte arrays; typed views of them are returned by accessor methods (zerocopy
//! transmutes checked at compile time, no `unsafe`, no panics). Every bitfield accessor is derived
//! from the published `*_MASK` constant: the shift is the mask's lowest set bit.
//!
//! A device model (a test double standing behind the core's command channel) decodes WQEs and
//! encodes CQEs with the same types.

use core::mem::{offset_of, size_of};

use zerocopy::little_endian::{U16, U32};
use zerocopy::{
    transmute_mut, transmute_ref, FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout,
};

/// Number of buffer descriptors a send WQE has room for (`EFA_IO_TX_DESC_NUM_BUFS`).
pub const EFA_IO_TX_DESC_NUM_BUFS: usize = 2;
/// Number of local buffers an RDMA WQE has room for (`EFA_IO_TX_DESC_NUM_RDMA_BUFS`).
pub const EFA_IO_TX_DESC_NUM_RDMA_BUFS: usize = 1;
/// Inline bytes a 64-byte send WQE has room for (`EFA_IO_TX_DESC_INLINE_MAX_SIZE`).
pub const EFA_IO_TX_DESC_INLINE_MAX_SIZE: usize = 32;
/// Inline bytes a 128-byte send WQE has room for (`EFA_IO_TX_DESC_INLINE_MAX_SIZE_128`).
pub const EFA_IO_TX_DESC_INLINE_MAX_SIZE_128: usize = 80;
/// Size of immediate data (`EFA_IO_TX_DESC_IMM_DATA_SIZE`).
pub const EFA_IO_TX_DESC_IMM_DATA_SIZE: usize = 4;

/// `enum efa_io_queue_type`: a send queue (of a QP).
pub const EFA_IO_SEND_QUEUE: u8 = 1;
/// `enum efa_io_queue_type`: a receive queue (of a QP).
pub const EFA_IO_RECV_QUEUE: u8 = 2;

/// `enum efa_io_send_op_type`: send message.
pub const EFA_IO_SEND: u8 = 0;
/// `enum efa_io_send_op_type`: RDMA read.
pub const EFA_IO_RDMA_READ: u8 = 1;
/// `enum efa_io_send_op_type`: RDMA write.
pub const EFA_IO_RDMA_WRITE: u8 = 2;

/// `enum efa_io_comp_status`: successful completion.
pub const EFA_IO_COMP_STATUS_OK: u8 = 0;
/// `enum efa_io_comp_status`: flushed during QP destroy.
pub const EFA_IO_COMP_STATUS_FLUSHED: u8 = 1;
/// `enum efa_io_comp_status`: internal QP error.
pub const EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR: u8 = 2;
/// `enum efa_io_comp_status`: unsupported operation.
pub const EFA_IO_COMP_STATUS_LOCAL_ERROR_UNSUPPORTED_OP: u8 = 3;
/// `enum efa_io_comp_status`: bad AH.
pub const EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH: u8 = 4;
/// `enum efa_io_comp_status`: LKEY not registered or does not match IOVA.
pub const EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY: u8 = 5;
/// `enum efa_io_comp_status`: message too long.
pub const EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH: u8 = 6;
/// `enum efa_io_comp_status`: RKEY not registered or does not match remote IOVA.
pub const EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS: u8 = 7;
/// `enum efa_io_comp_status`: connection was reset by remote side.
pub const EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT: u8 = 8;
/// `enum efa_io_comp_status`: bad destination QP number.
pub const EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN: u8 = 9;
/// `enum efa_io_comp_status`: destination resource not ready (no receive posted).
pub const EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR: u8 = 10;
/// `enum efa_io_comp_status`: receiver SGL too short.
pub const EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_LENGTH: u8 = 11;
/// `enum efa_io_comp_status`: unexpected status returned by responder.
pub const EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_STATUS: u8 = 12;
/// `enum efa_io_comp_status`: unresponsive remote (was previously responsive).
pub const EFA_IO_COMP_STATUS_LOCAL_ERROR_UNRESP_REMOTE: u8 = 13;
/// `enum efa_io_comp_status`: no valid AH at remote side (required for RDMA).
pub const EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER: u8 = 14;
/// `enum efa_io_comp_status`: unreachable remote (never received a response).
pub const EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE: u8 = 15;
/// `enum efa_io_comp_status`: feature mismatch.
pub const EFA_IO_COMP_STATUS_REMOTE_ERROR_FEATURE_MISMATCH: u8 = 18;

/// `enum efa_io_processing_hint`: optimise for throughput.
pub const EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE: u8 = 1 << 0;

// tx_meta_desc ctrl1
/// `ctrl1` bits 3:0: `op_type` (`EFA_IO_SEND` / `EFA_IO_RDMA_*`).
pub const EFA_IO_TX_META_DESC_OP_TYPE_MASK: u8 = 0x0f;
/// `ctrl1` bit 4: `immediate_data` is valid.
pub const EFA_IO_TX_META_DESC_HAS_IMM_MASK: u8 = 1 << 4;
/// `ctrl1` bit 5: inline message follows the meta descriptor.
pub const EFA_IO_TX_META_DESC_INLINE_MSG_MASK: u8 = 1 << 5;
/// `ctrl1` bit 6: extended metadata (must be zero).
pub const EFA_IO_TX_META_DESC_META_EXTENSION_MASK: u8 = 1 << 6;
/// `ctrl1` bit 7: this is a metadata descriptor (must be set).
pub const EFA_IO_TX_META_DESC_META_DESC_MASK: u8 = 1 << 7;
// tx_meta_desc ctrl2
/// `ctrl2` bit 0: phase (flips on every SQ wrap).
pub const EFA_IO_TX_META_DESC_PHASE_MASK: u8 = 1 << 0;
/// `ctrl2` bit 2: first descriptor of the transaction (must be set).
pub const EFA_IO_TX_META_DESC_FIRST_MASK: u8 = 1 << 2;
/// `ctrl2` bit 3: last descriptor of the transaction (must be set).
pub const EFA_IO_TX_META_DESC_LAST_MASK: u8 = 1 << 3;
/// `ctrl2` bit 4: post a completion after transmission.
pub const EFA_IO_TX_META_DESC_COMP_REQ_MASK: u8 = 1 << 4;
// tx_meta_desc ctrl3
/// `ctrl3` bits 1:0: `EFA_IO_PROCESSING_HINT_*`.
pub const EFA_IO_TX_META_DESC_PROCESSING_HINTS_MASK: u8 = 0x03;
/// `efa_io_tx_buf_desc.lkey` bits 23:0.
pub const EFA_IO_TX_BUF_DESC_LKEY_MASK: u32 = 0x00ff_ffff;
/// `efa_io_rx_desc.lkey_ctrl` bits 23:0.
pub const EFA_IO_RX_DESC_LKEY_MASK: u32 = 0x00ff_ffff;
/// `efa_io_rx_desc.lkey_ctrl` bit 30: first descriptor of the WQE.
pub const EFA_IO_RX_DESC_FIRST_MASK: u32 = 1 << 30;
/// `efa_io_rx_desc.lkey_ctrl` bit 31: last descriptor of the WQE.
pub const EFA_IO_RX_DESC_LAST_MASK: u32 = 1 << 31;
/// `efa_io_cdesc_common.flags` bit 0: phase.
pub const EFA_IO_CDESC_COMMON_PHASE_MASK: u8 = 1 << 0;
/// `efa_io_cdesc_common.flags` bits 2:1: `EFA_IO_SEND_QUEUE` / `EFA_IO_RECV_QUEUE`.
pub const EFA_IO_CDESC_COMMON_Q_TYPE_MASK: u8 = 0x06;
/// `efa_io_cdesc_common.flags` bit 3: immediate data present (receive only).
pub const EFA_IO_CDESC_COMMON_HAS_IMM_MASK: u8 = 1 << 3;
/// `efa_io_cdesc_common.flags` bits 6:4: `efa_io_send_op_type`.
pub const EFA_IO_CDESC_COMMON_OP_TYPE_MASK: u8 = 0x70;
/// `efa_io_cdesc_common.flags` bit 7: unsolicited (RDMA write with imm, no receive consumed).
pub const EFA_IO_CDESC_COMMON_UNSOLICITED_MASK: u8 = 1 << 7;
/// CQ doorbell register bits 15:0: consumer index.
pub const EFA_IO_REGS_CQ_DB_CONSUMER_INDEX_MASK: u32 = 0xffff;
/// CQ doorbell register bits 30:29: command sequence number (events acknowledged, mod 4).
pub const EFA_IO_REGS_CQ_DB_CMD_SN_MASK: u32 = 0x6000_0000;
/// CQ doorbell register bit 31: arm (request a completion event).
pub const EFA_IO_REGS_CQ_DB_ARM_MASK: u32 = 0x8000_0000;

/// `FIELD_GET` for an 8-bit register.
#[inline]
pub const fn field_get8(mask: u8, reg: u8) -> u8 {
    (reg & mask) >> mask.trailing_zeros()
}

/// `FIELD_PREP` into an 8-bit register: replaces the field, bits outside the mask are dropped.
#[inline]
pub const fn field_set8(mask: u8, reg: u8, val: u8) -> u8 {
    (reg & !mask) | ((val << mask.trailing_zeros()) & mask)
}

/// `FIELD_GET` for a 32-bit register.
#[inline]
pub const fn field_get32(mask: u32, reg: u32) -> u32 {
    (reg & mask) >> mask.trailing_zeros()
}

/// `FIELD_PREP` into a 32-bit register: replaces the field, bits outside the mask are dropped.
#[inline]
pub const fn field_set32(mask: u32, reg: u32, val: u32) -> u32 {
    (reg & !mask) | ((val << mask.trailing_zeros()) & mask)
}

/// The 32-bit value written to a CQ doorbell: consumer counter, command sequence number, arm.
#[inline]
pub const fn cq_doorbell_value(consumer_index: u16, cmd_sn: u8, arm: bool) -> u32 {
    let v = field_set32(
        EFA_IO_REGS_CQ_DB_CONSUMER_INDEX_MASK,
        0,
        consumer_index as u32,
    );
    let v = field_set32(EFA_IO_REGS_CQ_DB_CMD_SN_MASK, v, (cmd_sn & 0x3) as u32);
    field_set32(EFA_IO_REGS_CQ_DB_ARM_MASK, v, arm as u32)
}

macro_rules! bit8 {
    ($field:ident, $get:ident, $set:ident, $mask:ident, $doc:literal) => {
        #[doc = concat!("Reads ", $doc, " (`", stringify!($mask), "`).")]
        #[inline]
        pub fn $get(&self) -> bool {
            field_get8($mask, self.$field) != 0
        }
        #[doc = concat!("Writes ", $doc, " (`", stringify!($mask), "`).")]
        #[inline]
        pub fn $set(&mut self, on: bool) {
            self.$field = field_set8($mask, self.$field, on as u8);
        }
    };
}

macro_rules! field8 {
    ($field:ident, $get:ident, $set:ident, $mask:ident, $doc:literal) => {
        #[doc = concat!("Reads ", $doc, " (`", stringify!($mask), "`).")]
        #[inline]
        pub fn $get(&self) -> u8 {
            field_get8($mask, self.$field)
        }
        #[doc = concat!("Writes ", $doc, " (`", stringify!($mask), "`); excess bits are dropped.")]
        #[inline]
        pub fn $set(&mut self, val: u8) {
            self.$field = field_set8($mask, self.$field, val);
        }
    };
}

/// `struct efa_io_req_id_ex`: bits 63:16 of a 64-bit request id.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoReqIdEx {
    /// Words 1..=3 of the request id (bits 31:16, 47:32, 63:48).
    pub w: [U16; 3],
}

/// `struct efa_io_tx_meta_desc`: the first 32 bytes of every send WQE.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoTxMetaDesc {
    /// Verbs-generated request id, echoed in the completion.
    pub req_id: U16,
    /// op_type, has_imm, inline_msg, meta_extension, meta_desc.
    pub ctrl1: u8,
    /// phase, first, last, comp_req.
    pub ctrl2: u8,
    /// Destination QP number.
    pub dest_qp_num: U16,
    /// Inline: message length in bytes; otherwise the number of buffer descriptors.
    pub length: U16,
    /// Immediate data (host-order value) when `has_imm` is set.
    pub immediate_data: U32,
    /// Device address handle number.
    pub ah: U16,
    /// processing_hints.
    pub ctrl3: u8,
    /// Must be zero.
    pub reserved: u8,
    /// Queue key.
    pub qkey: U32,
    /// Must be zero.
    pub reserved2: [u8; 6],
    /// Bits 63:16 of the request id (64-bit request-id mode).
    pub req_id_ex: EfaIoReqIdEx,
}

impl EfaIoTxMetaDesc {
    field8!(
        ctrl1,
        op_type,
        set_op_type,
        EFA_IO_TX_META_DESC_OP_TYPE_MASK,
        "op_type"
    );
    bit8!(
        ctrl1,
        has_imm,
        set_has_imm,
        EFA_IO_TX_META_DESC_HAS_IMM_MASK,
        "has_imm"
    );
    bit8!(
        ctrl1,
        inline_msg,
        set_inline_msg,
        EFA_IO_TX_META_DESC_INLINE_MSG_MASK,
        "inline_msg"
    );
    bit8!(
        ctrl1,
        meta_extension,
        set_meta_extension,
        EFA_IO_TX_META_DESC_META_EXTENSION_MASK,
        "meta_extension"
    );
    bit8!(
        ctrl1,
        meta_desc,
        set_meta_desc,
        EFA_IO_TX_META_DESC_META_DESC_MASK,
        "meta_desc"
    );
    bit8!(
        ctrl2,
        phase,
        set_phase,
        EFA_IO_TX_META_DESC_PHASE_MASK,
        "phase"
    );
    bit8!(
        ctrl2,
        first,
        set_first,
        EFA_IO_TX_META_DESC_FIRST_MASK,
        "first"
    );
    bit8!(ctrl2, last, set_last, EFA_IO_TX_META_DESC_LAST_MASK, "last");
    bit8!(
        ctrl2,
        comp_req,
        set_comp_req,
        EFA_IO_TX_META_DESC_COMP_REQ_MASK,
        "comp_req"
    );
    field8!(
        ctrl3,
        processing_hints,
        set_processing_hints,
        EFA_IO_TX_META_DESC_PROCESSING_HINTS_MASK,
        "processing_hints"
    );
}

/// `struct efa_io_tx_buf_desc`: a local buffer of a send WQE.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoTxBufDesc {
    /// Length in bytes.
    pub length: U32,
    /// lkey in bits 23:0, rest must be zero.
    pub lkey: U32,
    /// Buffer address bits 31:0.
    pub buf_addr_lo: U32,
    /// Buffer address bits 63:32.
    pub buf_addr_hi: U32,
}

impl EfaIoTxBufDesc {
    /// A buffer descriptor for `addr`/`length` under `lkey` (lkey masked to 24 bits).
    pub fn new(addr: u64, lkey: u32, length: u32) -> Self {
        let mut d = Self::default();
        d.length.set(length);
        d.set_lkey(lkey);
        d.set_buf_addr(addr);
        d
    }
    /// Reads the lkey (`EFA_IO_TX_BUF_DESC_LKEY_MASK`).
    pub fn lkey_value(&self) -> u32 {
        field_get32(EFA_IO_TX_BUF_DESC_LKEY_MASK, self.lkey.get())
    }
    /// Writes the lkey (`EFA_IO_TX_BUF_DESC_LKEY_MASK`); bits above 23 are dropped.
    pub fn set_lkey(&mut self, lkey: u32) {
        self.lkey.set(field_set32(
            EFA_IO_TX_BUF_DESC_LKEY_MASK,
            self.lkey.get(),
            lkey,
        ));
    }
    /// The 64-bit buffer address.
    pub fn buf_addr(&self) -> u64 {
        (u64::from(self.buf_addr_hi.get()) << 32) | u64::from(self.buf_addr_lo.get())
    }
    /// Splits `addr` into `buf_addr_lo`/`buf_addr_hi`.
    pub fn set_buf_addr(&mut self, addr: u64) {
        self.buf_addr_lo.set(addr as u32);
        self.buf_addr_hi.set((addr >> 32) as u32);
    }
}

/// `struct efa_io_remote_mem_addr`: the remote side of an RDMA WQE.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoRemoteMemAddr {
    /// Length in bytes.
    pub length: U32,
    /// Remote memory key.
    pub rkey: U32,
    /// Buffer address bits 31:0.
    pub buf_addr_lo: U32,
    /// Buffer address bits 63:32.
    pub buf_addr_hi: U32,
}

impl EfaIoRemoteMemAddr {
    /// The 64-bit remote address.
    pub fn buf_addr(&self) -> u64 {
        (u64::from(self.buf_addr_hi.get()) << 32) | u64::from(self.buf_addr_lo.get())
    }
    /// Splits `addr` into `buf_addr_lo`/`buf_addr_hi`.
    pub fn set_buf_addr(&mut self, addr: u64) {
        self.buf_addr_lo.set(addr as u32);
        self.buf_addr_hi.set((addr >> 32) as u32);
    }
}

/// `struct efa_io_rdma_req`: RDMA addresses of a 64-byte WQE.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoRdmaReq {
    /// Remote memory.
    pub remote_mem: EfaIoRemoteMemAddr,
    /// Local memory.
    pub local_mem: [EfaIoTxBufDesc; EFA_IO_TX_DESC_NUM_RDMA_BUFS],
}

/// `struct efa_io_rdma_req_128`: RDMA addresses of a 128-byte WQE; the second part is a union
/// of `local_mem[1]` and `inline_data[80]` (inline RDMA write).
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct EfaIoRdmaReq128 {
    /// Remote memory.
    pub remote_mem: EfaIoRemoteMemAddr,
    /// Union `{ local_mem[1]; inline_data[80]; }`; see the accessors.
    pub data: [u8; 80],
}

impl Default for EfaIoRdmaReq128 {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
struct LocalMemIn80 {
    local_mem: [EfaIoTxBufDesc; EFA_IO_TX_DESC_NUM_RDMA_BUFS],
    rest: [u8; 64],
}

impl EfaIoRdmaReq128 {
    /// The `local_mem` view of the union.
    pub fn local_mem(&self) -> &[EfaIoTxBufDesc; EFA_IO_TX_DESC_NUM_RDMA_BUFS] {
        let v: &LocalMemIn80 = transmute_ref!(&self.data);
        &v.local_mem
    }
    /// The `local_mem` view of the union, writable.
    pub fn local_mem_mut(&mut self) -> &mut [EfaIoTxBufDesc; EFA_IO_TX_DESC_NUM_RDMA_BUFS] {
        let v: &mut LocalMemIn80 = transmute_mut!(&mut self.data);
        &mut v.local_mem
    }
    /// The `inline_data` view of the union.
    pub fn inline_data(&self) -> &[u8; EFA_IO_TX_DESC_INLINE_MAX_SIZE_128] {
        &self.data
    }
    /// The `inline_data` view of the union, writable.
    pub fn inline_data_mut(&mut self) -> &mut [u8; EFA_IO_TX_DESC_INLINE_MAX_SIZE_128] {
        &mut self.data
    }
}

/// `struct efa_io_tx_wqe`: a 64-byte send WQE: meta descriptor + union of `sgl[2]`,
/// `inline_data[32]` and `rdma_req`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoTxWqe {
    /// Meta descriptor.
    pub meta: EfaIoTxMetaDesc,
    /// Union `{ sgl[2]; inline_data[32]; rdma_req; }`; see the accessors.
    pub data: [u8; 32],
}

impl EfaIoTxWqe {
    /// The `sgl` view of the data union.
    pub fn sgl(&self) -> &[EfaIoTxBufDesc; EFA_IO_TX_DESC_NUM_BUFS] {
        transmute_ref!(&self.data)
    }
    /// The `sgl` view of the data union, writable.
    pub fn sgl_mut(&mut self) -> &mut [EfaIoTxBufDesc; EFA_IO_TX_DESC_NUM_BUFS] {
        transmute_mut!(&mut self.data)
    }
    /// The `inline_data` view of the data union.
    pub fn inline_data(&self) -> &[u8; EFA_IO_TX_DESC_INLINE_MAX_SIZE] {
        &self.data
    }
    /// The `inline_data` view of the data union, writable.
    pub fn inline_data_mut(&mut self) -> &mut [u8; EFA_IO_TX_DESC_INLINE_MAX_SIZE] {
        &mut self.data
    }
    /// The `rdma_req` view of the data union.
    pub fn rdma_req(&self) -> &EfaIoRdmaReq {
        transmute_ref!(&self.data)
    }
    /// The `rdma_req` view of the data union, writable.
    pub fn rdma_req_mut(&mut self) -> &mut EfaIoRdmaReq {
        transmute_mut!(&mut self.data)
    }
}

/// `struct efa_io_tx_wqe_128`: a 128-byte send WQE: meta descriptor + union of `sgl[2]`,
/// `inline_data[80]` and `rdma_req` (128-byte flavour).
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct EfaIoTxWqe128 {
    /// Meta descriptor.
    pub meta: EfaIoTxMetaDesc,
    /// Union `{ sgl[2]; inline_data[80]; rdma_req_128; }`; see the accessors.
    pub data: [u8; 96],
}

impl Default for EfaIoTxWqe128 {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
struct SglIn96 {
    sgl: [EfaIoTxBufDesc; EFA_IO_TX_DESC_NUM_BUFS],
    rest: [u8; 64],
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
struct InlineIn96 {
    inline_data: [u8; EFA_IO_TX_DESC_INLINE_MAX_SIZE_128],
    rest: [u8; 16],
}

impl EfaIoTxWqe128 {
    /// The `sgl` view of the data union.
    pub fn sgl(&self) -> &[EfaIoTxBufDesc; EFA_IO_TX_DESC_NUM_BUFS] {
        let v: &SglIn96 = transmute_ref!(&self.data);
        &v.sgl
    }
    /// The `sgl` view of the data union, writable.
    pub fn sgl_mut(&mut self) -> &mut [EfaIoTxBufDesc; EFA_IO_TX_DESC_NUM_BUFS] {
        let v: &mut SglIn96 = transmute_mut!(&mut self.data);
        &mut v.sgl
    }
    /// The `inline_data` view of the data union.
    pub fn inline_data(&self) -> &[u8; EFA_IO_TX_DESC_INLINE_MAX_SIZE_128] {
        let v: &InlineIn96 = transmute_ref!(&self.data);
        &v.inline_data
    }
    /// The `inline_data` view of the data union, writable.
    pub fn inline_data_mut(&mut self) -> &mut [u8; EFA_IO_TX_DESC_INLINE_MAX_SIZE_128] {
        let v: &mut InlineIn96 = transmute_mut!(&mut self.data);
        &mut v.inline_data
    }
    /// The `rdma_req` view of the data union.
    pub fn rdma_req(&self) -> &EfaIoRdmaReq128 {
        transmute_ref!(&self.data)
    }
    /// The `rdma_req` view of the data union, writable.
    pub fn rdma_req_mut(&mut self) -> &mut EfaIoRdmaReq128 {
        transmute_mut!(&mut self.data)
    }
}

/// `struct efa_io_rx_desc`: one receive buffer; a receive WQE is one or more of these.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoRxDesc {
    /// Buffer address bits 31:0.
    pub buf_addr_lo: U32,
    /// Buffer address bits 63:32.
    pub buf_addr_hi: U32,
    /// Verbs-generated request id (meaningful in the first descriptor of a WQE).
    pub req_id: U16,
    /// Length in bytes.
    pub length: U16,
    /// lkey (23:0), first (30), last (31).
    pub lkey_ctrl: U32,
}

impl EfaIoRxDesc {
    /// Reads the lkey (`EFA_IO_RX_DESC_LKEY_MASK`).
    pub fn lkey(&self) -> u32 {
        field_get32(EFA_IO_RX_DESC_LKEY_MASK, self.lkey_ctrl.get())
    }
    /// Writes the lkey (`EFA_IO_RX_DESC_LKEY_MASK`); bits above 23 are dropped.
    pub fn set_lkey(&mut self, lkey: u32) {
        self.lkey_ctrl.set(field_set32(
            EFA_IO_RX_DESC_LKEY_MASK,
            self.lkey_ctrl.get(),
            lkey,
        ));
    }
    /// Reads `first` (`EFA_IO_RX_DESC_FIRST_MASK`).
    pub fn first(&self) -> bool {
        field_get32(EFA_IO_RX_DESC_FIRST_MASK, self.lkey_ctrl.get()) != 0
    }
    /// Writes `first` (`EFA_IO_RX_DESC_FIRST_MASK`).
    pub fn set_first(&mut self, on: bool) {
        let v = field_set32(EFA_IO_RX_DESC_FIRST_MASK, self.lkey_ctrl.get(), on as u32);
        self.lkey_ctrl.set(v);
    }
    /// Reads `last` (`EFA_IO_RX_DESC_LAST_MASK`).
    pub fn last(&self) -> bool {
        field_get32(EFA_IO_RX_DESC_LAST_MASK, self.lkey_ctrl.get()) != 0
    }
    /// Writes `last` (`EFA_IO_RX_DESC_LAST_MASK`).
    pub fn set_last(&mut self, on: bool) {
        let v = field_set32(EFA_IO_RX_DESC_LAST_MASK, self.lkey_ctrl.get(), on as u32);
        self.lkey_ctrl.set(v);
    }
    /// The 64-bit buffer address.
    pub fn buf_addr(&self) -> u64 {
        (u64::from(self.buf_addr_hi.get()) << 32) | u64::from(self.buf_addr_lo.get())
    }
    /// Splits `addr` into `buf_addr_lo`/`buf_addr_hi`.
    pub fn set_buf_addr(&mut self, addr: u64) {
        self.buf_addr_lo.set(addr as u32);
        self.buf_addr_hi.set((addr >> 32) as u32);
    }
}

/// `struct efa_io_cdesc_common`: the first 6 bytes of every completion descriptor.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoCdescCommon {
    /// Request id from the completed descriptor.
    pub req_id: U16,
    /// `EFA_IO_COMP_STATUS_*`.
    pub status: u8,
    /// phase, q_type, has_imm, op_type, unsolicited.
    pub flags: u8,
    /// Local QP number.
    pub qp_num: U16,
}

impl EfaIoCdescCommon {
    bit8!(
        flags,
        phase,
        set_phase,
        EFA_IO_CDESC_COMMON_PHASE_MASK,
        "phase"
    );
    field8!(
        flags,
        q_type,
        set_q_type,
        EFA_IO_CDESC_COMMON_Q_TYPE_MASK,
        "q_type"
    );
    bit8!(
        flags,
        has_imm,
        set_has_imm,
        EFA_IO_CDESC_COMMON_HAS_IMM_MASK,
        "has_imm"
    );
    field8!(
        flags,
        op_type,
        set_op_type,
        EFA_IO_CDESC_COMMON_OP_TYPE_MASK,
        "op_type"
    );
    bit8!(
        flags,
        unsolicited,
        set_unsolicited,
        EFA_IO_CDESC_COMMON_UNSOLICITED_MASK,
        "unsolicited"
    );
}

/// `struct efa_io_tx_cdesc`: send completion descriptor (16 bytes).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoTxCdesc {
    /// Common completion info.
    pub common: EfaIoCdescCommon,
    /// Bits 63:16 of a 64-bit request id.
    pub req_id_ex: EfaIoReqIdEx,
    /// Must be zero.
    pub reserved: [u8; 4],
}

/// `struct efa_io_rx_cdesc`: receive completion descriptor (16 bytes).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoRxCdesc {
    /// Common completion info.
    pub common: EfaIoCdescCommon,
    /// Transferred length bits 15:0.
    pub length: U16,
    /// Remote address handle; `0xFFFF` = unknown AH.
    pub ah: U16,
    /// Source QP number.
    pub src_qp_num: U16,
    /// Immediate data (host-order value).
    pub imm: U32,
}

/// `efa_io_rx_cdesc.ah` value that means "sender has no AH here" (then the SGID may be valid).
pub const EFA_IO_RX_CDESC_AH_UNKNOWN: u16 = 0xffff;

/// `struct efa_io_rx_cdesc_ex`: extended receive completion descriptor (32 bytes); the tail is a
/// union of `rdma_write.length_hi` and `src_addr[16]`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIoRxCdescEx {
    /// Base receive completion.
    pub base: EfaIoRxCdesc,
    /// Union `{ struct { u16 length_hi; } rdma_write; u8 src_addr[16]; }`; see the accessors.
    pub u: [u8; 16],
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
struct LengthHiIn16 {
    length_hi: U16,
    rest: [u8; 14],
}

impl EfaIoRxCdescEx {
    /// `u.rdma_write.length_hi`: transferred length bits 31:16 of an RDMA write.
    pub fn rdma_write_length_hi(&self) -> u16 {
        let v: &LengthHiIn16 = transmute_ref!(&self.u);
        v.length_hi.get()
    }
    /// Writes `u.rdma_write.length_hi`.
    pub fn set_rdma_write_length_hi(&mut self, hi: u16) {
        let v: &mut LengthHiIn16 = transmute_mut!(&mut self.u);
        v.length_hi.set(hi);
    }
    /// `u.src_addr`: the sender's GID (valid only when `ah` is unknown and the CQ has SGID).
    pub fn src_addr(&self) -> &[u8; 16] {
        &self.u
    }
    /// `u.src_addr`, writable.
    pub fn src_addr_mut(&mut self) -> &mut [u8; 16] {
        &mut self.u
    }
}

const _: () = {
    assert!(size_of::<EfaIoReqIdEx>() == 6);
    assert!(size_of::<EfaIoTxMetaDesc>() == 32);
    assert!(offset_of!(EfaIoTxMetaDesc, ctrl1) == 2);
    assert!(offset_of!(EfaIoTxMetaDesc, ctrl2) == 3);
    assert!(offset_of!(EfaIoTxMetaDesc, dest_qp_num) == 4);
    assert!(offset_of!(EfaIoTxMetaDesc, length) == 6);
    assert!(offset_of!(EfaIoTxMetaDesc, immediate_data) == 8);
    assert!(offset_of!(EfaIoTxMetaDesc, ah) == 12);
    assert!(offset_of!(EfaIoTxMetaDesc, ctrl3) == 14);
    assert!(offset_of!(EfaIoTxMetaDesc, qkey) == 16);
    assert!(offset_of!(EfaIoTxMetaDesc, req_id_ex) == 26);
    assert!(size_of::<EfaIoTxBufDesc>() == 16);
    assert!(size_of::<EfaIoRemoteMemAddr>() == 16);
    assert!(size_of::<EfaIoRdmaReq>() == 32);
    assert!(size_of::<EfaIoRdmaReq128>() == 96);
    assert!(size_of::<EfaIoTxWqe>() == 64);
    assert!(size_of::<EfaIoTxWqe128>() == 128);
    assert!(size_of::<EfaIoRxDesc>() == 16);
    assert!(offset_of!(EfaIoRxDesc, req_id) == 8);
    assert!(offset_of!(EfaIoRxDesc, lkey_ctrl) == 12);
    assert!(size_of::<EfaIoCdescCommon>() == 6);
    assert!(size_of::<EfaIoTxCdesc>() == 16);
    assert!(size_of::<EfaIoRxCdesc>() == 16);
    assert!(offset_of!(EfaIoRxCdesc, length) == 6);
    assert!(offset_of!(EfaIoRxCdesc, ah) == 8);
    assert!(offset_of!(EfaIoRxCdesc, src_qp_num) == 10);
    assert!(offset_of!(EfaIoRxCdesc, imm) == 12);
    assert!(size_of::<EfaIoRxCdescEx>() == 32);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_match_header_bit_ranges() {
        // GENMASK(3,0) = 0b1111; GENMASK(2,1) = 0b110; GENMASK(6,4) = 0b111_0000.
        assert_eq!(EFA_IO_TX_META_DESC_OP_TYPE_MASK, 0b1111);
        assert_eq!(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, 0b110);
        assert_eq!(EFA_IO_CDESC_COMMON_OP_TYPE_MASK, 0b111_0000);
        assert_eq!(EFA_IO_TX_META_DESC_PROCESSING_HINTS_MASK, 0b11);
        assert_eq!(EFA_IO_TX_BUF_DESC_LKEY_MASK, (1 << 24) - 1);
    }

    #[test]
    fn field_helpers_round_trip_and_drop_excess() {
        let mut m = EfaIoTxMetaDesc::default();
        m.set_op_type(EFA_IO_RDMA_WRITE);
        m.set_meta_desc(true);
        // 0x2 in bits 3:0, bit 7 set -> 0x82.
        assert_eq!(m.ctrl1, 0x82);
        m.set_op_type(0x1f); // 5 bits into a 4-bit field: bit 4 (has_imm) must stay clear
        assert_eq!(m.ctrl1, 0x8f);
        assert!(!m.has_imm());
        m.set_has_imm(true);
        assert_eq!(m.op_type(), 0xf);
        assert!(m.has_imm());
        m.set_has_imm(false);
        assert_eq!(m.ctrl1, 0x8f);

        let mut c = EfaIoCdescCommon::default();
        c.set_q_type(EFA_IO_RECV_QUEUE);
        c.set_op_type(EFA_IO_RDMA_WRITE);
        c.set_unsolicited(true);
        c.set_phase(true);
        // q_type 2 << 1 = 0x04, op 2 << 4 = 0x20, unsolicited 0x80, phase 0x01 -> 0xa5.
        assert_eq!(c.flags, 0xa5);
        assert_eq!(c.q_type(), EFA_IO_RECV_QUEUE);
        assert_eq!(c.op_type(), EFA_IO_RDMA_WRITE);

        let mut b = EfaIoTxBufDesc::default();
        b.set_lkey(0xabcd_ef12);
        assert_eq!(b.lkey.get(), 0x00cd_ef12);
    }

    #[test]
    fn cq_doorbell_golden() {
        // cc 0x1234 in 15:0, cmd_sn 3 -> bits 30:29 = 0x6000_0000, arm -> bit 31.
        assert_eq!(cq_doorbell_value(0x1234, 3, true), 0xe000_1234);
        // cmd_sn is taken mod 4: 5 & 3 = 1 -> 0x2000_0000.
        assert_eq!(cq_doorbell_value(0xffff, 5, false), 0x2000_ffff);
    }

    #[test]
    fn union_views_alias_the_right_bytes() {
        let mut w = EfaIoTxWqe128::default();
        w.sgl_mut()[1] = EfaIoTxBufDesc::new(0x1122_3344_5566_7788, 7, 9);
        // sgl[1] starts 16 bytes into the union: length at data[16..20].
        assert_eq!(&w.data[16..20], &9u32.to_le_bytes());
        assert_eq!(&w.data[24..28], &0x5566_7788u32.to_le_bytes());
        w.rdma_req_mut().local_mem_mut()[0].length.set(0xaabb);
        // rdma_req_128.local_mem follows the 16-byte remote_mem: data[16..20] again.
        assert_eq!(&w.data[16..20], &0xaabbu32.to_le_bytes());
        w.inline_data_mut()[79] = 0x5a;
        assert_eq!(w.data[79], 0x5a);

        let mut x = EfaIoRxCdescEx::default();
        x.set_rdma_write_length_hi(0x0102);
        assert_eq!(&x.u[..2], &[0x02, 0x01]);
        assert_eq!(x.src_addr()[0], 0x02);
    }
}
