//! rxe (soft-RoCE) driver ABI: `rdma/rdma_user_rxe.h`.
//!
//! Mirrors the newest header (rdma-core `kernel-headers/rdma/rdma_user_rxe.h`). Besides the
//! driver udata of the create commands, this header defines the *ring formats* that userspace
//! and the kernel share through mmapped queues: [`RxeQueueBuf`] (the queue header),
//! [`RxeSendWqe`] (SQ element), [`RxeRecvWqe`] (RQ/SRQ element). The CQ element is the generic
//! `struct ib_uverbs_wc` at the start of each CQ slot (from `rdma/ib_user_verbs.h`).
//!
//! How each driver struct travels (rdma-core `providers/rxe/rxe-abi.h`, `DECLARE_DRV_CMD`):
//!
//! | command                                   | driver request       | driver response        |
//! |-------------------------------------------|----------------------|------------------------|
//! | `IB_USER_VERBS_CMD_CREATE_AH`             | (none)               | [`RxeCreateAhResp`]    |
//! | `IB_USER_VERBS_CMD_CREATE_CQ` / `EX_`     | (none)               | [`RxeCreateCqResp`]    |
//! | `IB_USER_VERBS_CMD_RESIZE_CQ`             | (none)               | [`RxeResizeCqResp`]    |
//! | `IB_USER_VERBS_CMD_CREATE_QP` / `EX_`     | (none)               | [`RxeCreateQpResp`]    |
//! | `IB_USER_VERBS_CMD_CREATE_SRQ` / `_XSRQ`  | (none)               | [`RxeCreateSrqResp`]   |
//! | `IB_USER_VERBS_CMD_MODIFY_SRQ`            | [`RxeModifySrqCmd`]  | (none)                 |
//!
//! Each [`Mminfo`] in a response names one queue: `mmap(NULL, size, PROT_READ|PROT_WRITE,
//! MAP_SHARED, uverbs_fd, offset)` maps it, starting with the [`RxeQueueBuf`] header.

use core::mem::{offset_of, size_of};

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// `RXE_NETWORK_TYPE_IPV4`: [`RxeAv::network_type`] for a RoCEv2-over-IPv4 destination.
pub const RXE_NETWORK_TYPE_IPV4: u8 = 1;
/// `RXE_NETWORK_TYPE_IPV6`: [`RxeAv::network_type`] for a RoCEv2-over-IPv6 destination.
pub const RXE_NETWORK_TYPE_IPV6: u8 = 2;

/// `wqe_state_posted` (kernel `drivers/infiniband/sw/rxe/rxe_verbs.h`, `enum wqe_state`):
/// the [`RxeSendWqe::state`] userspace writes into a freshly posted send WQE. The enum is not
/// in the uapi header, but its first value is part of the contract (rdma-core writes 0).
#[doc(alias = "wqe_state_posted")]
pub const RXE_WQE_STATE_POSTED: u32 = 0;

// ---------------------------------------------------------------------------------------------
// Address vector
// ---------------------------------------------------------------------------------------------

/// `union rxe_gid`: a 16-byte GID, viewed as raw bytes or as two big-endian halves.
///
/// The C union has 8-byte alignment (its `global` view holds two `__be64`); `align(8)` keeps it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C, align(8))]
pub struct RxeGid {
    /// `raw`: the GID bytes in network order.
    pub raw: [u8; 16],
}

impl RxeGid {
    /// `global.subnet_prefix`, converted from big-endian.
    pub fn subnet_prefix(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.raw[..8]);
        u64::from_be_bytes(b)
    }

    /// `global.interface_id`, converted from big-endian.
    pub fn interface_id(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.raw[8..]);
        u64::from_be_bytes(b)
    }
}

/// `struct rxe_global_route`: the GRH part of an [`RxeAv`].
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeGlobalRoute {
    /// Destination GID.
    pub dgid: RxeGid,
    /// IPv6 flow label.
    pub flow_label: u32,
    /// Index of the source GID in the port's GID table.
    pub sgid_index: u8,
    /// IP hop limit / TTL.
    pub hop_limit: u8,
    /// IP traffic class.
    pub traffic_class: u8,
    /// Implicit tail padding of the C struct; zero.
    pub reserved: u8,
}

/// The anonymous `union { struct sockaddr_in; struct sockaddr_in6; }` of [`RxeAv`]
/// (`sgid_addr`, `dgid_addr`): raw bytes of the larger member, `sockaddr_in6` (28 bytes).
///
/// rdma-core fills it from a GID: an IPv4-mapped GID becomes a `sockaddr_in` (address at
/// bytes 4..8, family left 0), any other GID a `sockaddr_in6` (family `AF_INET6` at bytes 0..2 in
/// host order, address at bytes 8..24).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C, align(4))]
pub struct RxeAvSockaddr {
    /// The socket address bytes.
    pub raw: [u8; 28],
}

/// `struct rxe_av`: the address vector of a UD destination as the rxe kernel driver expects it.
///
/// Only old kernels (whose CREATE_AH response carries `ah_num == 0`) need it copied into each
/// UD send WQE; newer kernels take [`RxeSendWrUd::ah_num`] instead.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeAv {
    /// Port number (1-based).
    pub port_num: u8,
    /// `RXE_NETWORK_TYPE_*`.
    pub network_type: u8,
    /// Destination MAC address.
    pub dmac: [u8; 6],
    /// Global route (GRH) attributes.
    pub grh: RxeGlobalRoute,
    /// Source address, as a `sockaddr_in`/`sockaddr_in6`.
    pub sgid_addr: RxeAvSockaddr,
    /// Destination address, as a `sockaddr_in`/`sockaddr_in6`.
    pub dgid_addr: RxeAvSockaddr,
}

// ---------------------------------------------------------------------------------------------
// Send work request (the `wr` part of a send WQE)
// ---------------------------------------------------------------------------------------------

/// Size of the `wr` union inside [`RxeSendWr`] (its largest member is `ud`).
pub const RXE_SEND_WR_UNION_SIZE: usize = 120;

/// `struct rxe_send_wr.wr.rdma`: RDMA read/write (and atomic write) target.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeSendWrRdma {
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct rxe_send_wr.wr.atomic`: compare-and-swap / fetch-and-add operands.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeSendWrAtomic {
    /// Remote virtual address (8-byte aligned).
    pub remote_addr: u64,
    /// Compare value (CAS) or addend (FAA).
    pub compare_add: u64,
    /// Swap value (CAS only).
    pub swap: u64,
    /// Remote key.
    pub rkey: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct rxe_send_wr.wr.ud`: UD destination.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeSendWrUd {
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
    /// P_Key index (rdma-core leaves it 0).
    pub pkey_index: u16,
    /// Zero.
    pub reserved: u16,
    /// Kernel AH index from [`RxeCreateAhResp::ah_num`]; 0 means "use [`Self::av`]".
    pub ah_num: u32,
    /// Zero.
    pub pad: [u32; 4],
    /// Address vector, used by kernels that return `ah_num == 0`.
    pub av: RxeAv,
}

/// `struct rxe_send_wr.wr.mw`: memory-window bind.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeSendWrMw {
    /// Start address of the window.
    pub addr: u64,
    /// Length of the window.
    pub length: u64,
    /// lkey of the MR the window is bound to.
    pub mr_lkey: u32,
    /// Current rkey of the MW.
    pub mw_rkey: u32,
    /// New rkey of the MW after the bind.
    pub rkey: u32,
    /// `IBV_ACCESS_*` flags of the window.
    pub access: u32,
}

/// `struct rxe_send_wr.wr.flush`: RDMA FLUSH target.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeSendWrFlush {
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Length to flush.
    pub length: u32,
    /// Remote key.
    pub rkey: u32,
    /// Flush type (`IB_FLUSH_*` placement type).
    pub r#type: u8,
    /// Flush level.
    pub level: u8,
    /// Implicit tail padding of the C struct; zero.
    pub reserved: [u8; 6],
}

/// `struct rxe_send_wr`: the work-request part of an [`RxeSendWqe`].
///
/// The C `ex` union (`__be32 imm_data` / `__u32 invalidate_rkey`) and the `wr` union become byte
/// arrays; use the typed accessors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RxeSendWr {
    /// User's work-request id, returned in the completion.
    pub wr_id: u64,
    /// Zero.
    pub reserved: u32,
    /// `IB_UVERBS_WR_*` opcode.
    pub opcode: u32,
    /// `IB_SEND_*` flags (fence 1, signaled 2, solicited 4, inline 8).
    pub send_flags: u32,
    /// `union { __be32 imm_data; __u32 invalidate_rkey; } ex`, raw bytes.
    pub ex: [u8; 4],
    /// `union { flush, rdma, atomic, ud, mw } wr`, raw bytes.
    pub wr: [u8; RXE_SEND_WR_UNION_SIZE],
}

impl Default for RxeSendWr {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// Reads a `T` from the start of a byte array (the sizes are checked by const asserts below).
fn read_prefix<T: FromBytes + IntoBytes>(bytes: &[u8]) -> T {
    let mut v = T::new_zeroed();
    let n = size_of::<T>();
    v.as_mut_bytes().copy_from_slice(&bytes[..n]);
    v
}

impl RxeSendWr {
    /// `ex.imm_data` as a host-order value (the ABI stores it big-endian).
    pub fn imm_data(&self) -> u32 {
        u32::from_be_bytes(self.ex)
    }

    /// Sets `ex.imm_data` from a host-order value (stored big-endian).
    pub fn set_imm_data(&mut self, imm_data: u32) {
        self.ex = imm_data.to_be_bytes();
    }

    /// `ex.invalidate_rkey` (host order, as the ABI stores it).
    pub fn invalidate_rkey(&self) -> u32 {
        u32::from_ne_bytes(self.ex)
    }

    /// Sets `ex.invalidate_rkey`.
    pub fn set_invalidate_rkey(&mut self, rkey: u32) {
        self.ex = rkey.to_ne_bytes();
    }

    /// The `wr.rdma` view of the union.
    pub fn rdma(&self) -> RxeSendWrRdma {
        read_prefix(&self.wr)
    }

    /// Writes the `wr.rdma` view (its first 16 bytes; the rest of the union is unchanged).
    pub fn set_rdma(&mut self, v: &RxeSendWrRdma) {
        self.wr[..size_of::<RxeSendWrRdma>()].copy_from_slice(v.as_bytes());
    }

    /// The `wr.atomic` view of the union.
    pub fn atomic(&self) -> RxeSendWrAtomic {
        read_prefix(&self.wr)
    }

    /// Writes the `wr.atomic` view (its first 32 bytes).
    pub fn set_atomic(&mut self, v: &RxeSendWrAtomic) {
        self.wr[..size_of::<RxeSendWrAtomic>()].copy_from_slice(v.as_bytes());
    }

    /// The `wr.ud` view of the union.
    pub fn ud(&self) -> RxeSendWrUd {
        read_prefix(&self.wr)
    }

    /// Writes the `wr.ud` view (the whole union).
    pub fn set_ud(&mut self, v: &RxeSendWrUd) {
        self.wr[..size_of::<RxeSendWrUd>()].copy_from_slice(v.as_bytes());
    }

    /// The `wr.mw` view of the union.
    pub fn mw(&self) -> RxeSendWrMw {
        read_prefix(&self.wr)
    }

    /// Writes the `wr.mw` view (its first 32 bytes).
    pub fn set_mw(&mut self, v: &RxeSendWrMw) {
        self.wr[..size_of::<RxeSendWrMw>()].copy_from_slice(v.as_bytes());
    }

    /// The `wr.flush` view of the union.
    pub fn flush(&self) -> RxeSendWrFlush {
        read_prefix(&self.wr)
    }

    /// Writes the `wr.flush` view (its first 24 bytes).
    pub fn set_flush(&mut self, v: &RxeSendWrFlush) {
        self.wr[..size_of::<RxeSendWrFlush>()].copy_from_slice(v.as_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Scatter/gather and WQEs
// ---------------------------------------------------------------------------------------------

/// `struct rxe_sge`: one scatter/gather element (same layout as `struct ibv_sge`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeSge {
    /// Virtual address of the buffer.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR that covers the buffer.
    pub lkey: u32,
}

/// `struct mminfo`: where to mmap one queue from the uverbs fd.
#[doc(alias = "mmap_info")]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Mminfo {
    /// mmap offset (a cookie the kernel hands out, page aligned).
    pub offset: u64,
    /// Length of the mapping in bytes.
    pub size: u32,
    /// Zero.
    pub pad: u32,
}

/// `struct rxe_dma_info`: progress state of a WQE's data transfer.
///
/// In the ring it is followed directly by a flexible array, the union of `inline_data[]`
/// (bytes), `atomic_wr[]` (8 bytes of atomic-write data) and `sge[]` ([`RxeSge`]s). That array
/// starts at `size_of::<RxeDmaInfo>()` from the start of this struct.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C, align(8))]
pub struct RxeDmaInfo {
    /// Total length of the transfer.
    pub length: u32,
    /// Bytes still to transfer (userspace sets it to `length`).
    pub resid: u32,
    /// Current SGE (userspace sets 0).
    pub cur_sge: u32,
    /// Number of SGEs in the trailing array (0 for inline data).
    pub num_sge: u32,
    /// Offset into the current SGE (userspace sets 0).
    pub sge_offset: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct rxe_send_wqe`: one SQ element; followed in its slot by the [`RxeDmaInfo`] trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RxeSendWqe {
    /// The work request.
    pub wr: RxeSendWr,
    /// Kernel-private status (userspace writes 0).
    pub status: u32,
    /// [`RXE_WQE_STATE_POSTED`] when posted.
    pub state: u32,
    /// Remote address of RDMA/atomic operations (copy of the `wr` union's `remote_addr`).
    pub iova: u64,
    /// Kernel-private opcode mask.
    pub mask: u32,
    /// Kernel-private first PSN.
    pub first_psn: u32,
    /// Kernel-private last PSN.
    pub last_psn: u32,
    /// Kernel-private acknowledged length.
    pub ack_length: u32,
    /// Kernel-private send sequence number.
    pub ssn: u32,
    /// Kernel-private flag.
    pub has_rd_atomic: u32,
    /// Data description; its flexible array follows in the slot.
    pub dma: RxeDmaInfo,
}

impl Default for RxeSendWqe {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// `struct rxe_recv_wqe`: one RQ/SRQ element; followed in its slot by `dma.num_sge` [`RxeSge`]s.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeRecvWqe {
    /// User's work-request id, returned in the completion.
    pub wr_id: u64,
    /// Zero.
    pub reserved: u32,
    /// Zero.
    pub padding: u32,
    /// Data description; its SGE array follows in the slot.
    pub dma: RxeDmaInfo,
}

// ---------------------------------------------------------------------------------------------
// Command udata
// ---------------------------------------------------------------------------------------------

/// `struct rxe_create_ah_resp`: driver part of the CREATE_AH response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeCreateAhResp {
    /// Kernel AH index to put in UD WQEs; 0 on old kernels (then build an [`RxeAv`]).
    pub ah_num: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct rxe_create_cq_resp`: driver part of the CREATE_CQ response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeCreateCqResp {
    /// Where to mmap the CQ ring.
    pub mi: Mminfo,
}

/// `struct rxe_resize_cq_resp`: driver part of the RESIZE_CQ response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeResizeCqResp {
    /// Where to mmap the new CQ ring (unmap the old one).
    pub mi: Mminfo,
}

/// `struct rxe_create_qp_resp`: driver part of the CREATE_QP response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeCreateQpResp {
    /// Where to mmap the RQ ring (size 0 / unused when the QP has an SRQ).
    pub rq_mi: Mminfo,
    /// Where to mmap the SQ ring.
    pub sq_mi: Mminfo,
}

/// `struct rxe_create_srq_resp`: driver part of the CREATE_SRQ response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeCreateSrqResp {
    /// Where to mmap the SRQ ring.
    pub mi: Mminfo,
    /// SRQ number.
    pub srq_num: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct rxe_modify_srq_cmd`: driver part of the MODIFY_SRQ request.
///
/// On a resize (`IBV_SRQ_MAX_WR`) the kernel writes the new ring's [`Mminfo`] to this user
/// address (not to a response buffer); unmap the old ring and map the new one.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RxeModifySrqCmd {
    /// User address of an [`Mminfo`] the kernel fills in.
    pub mmap_info_addr: u64,
}

// ---------------------------------------------------------------------------------------------
// Queue header
// ---------------------------------------------------------------------------------------------

/// `struct rxe_queue_buf`: the header at the start of every mmapped rxe queue, followed by the
/// element array `data[]` ([`RXE_QUEUE_BUF_DATA_OFFSET`]).
///
/// Both indices always lie in `0..=index_mask` (they are masked when advanced); a queue holds at
/// most `index_mask` elements (one slot stays empty). The producer and consumer indices are on
/// separate 128-byte lines and are accessed as atomics, never through a reference to this
/// struct: it exists for its layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RxeQueueBuf {
    /// log2 of the element size in bytes (elements are a power of two in size).
    pub log2_elem_size: u32,
    /// Number of slots minus one (slots are a power of two in number).
    pub index_mask: u32,
    /// Padding to the producer line.
    pub pad_1: [u32; 30],
    /// Producer index (written by the producer side with release ordering).
    pub producer_index: u32,
    /// Padding to the consumer line.
    pub pad_2: [u32; 31],
    /// Consumer index (written by the consumer side with release ordering).
    pub consumer_index: u32,
    /// Padding to the data.
    pub pad_3: [u32; 31],
}

impl Default for RxeQueueBuf {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// Byte offset of `log2_elem_size` in [`RxeQueueBuf`].
pub const RXE_QUEUE_BUF_LOG2_ELEM_SIZE_OFFSET: usize = offset_of!(RxeQueueBuf, log2_elem_size);
/// Byte offset of `index_mask` in [`RxeQueueBuf`].
pub const RXE_QUEUE_BUF_INDEX_MASK_OFFSET: usize = offset_of!(RxeQueueBuf, index_mask);
/// Byte offset of `producer_index` in [`RxeQueueBuf`].
pub const RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET: usize = offset_of!(RxeQueueBuf, producer_index);
/// Byte offset of `consumer_index` in [`RxeQueueBuf`].
pub const RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET: usize = offset_of!(RxeQueueBuf, consumer_index);
/// Byte offset of `data[]` (element 0) in a mapped queue.
pub const RXE_QUEUE_BUF_DATA_OFFSET: usize = size_of::<RxeQueueBuf>();

// ---------------------------------------------------------------------------------------------
// Layout checks (values from gcc on x86_64 against rdma_user_rxe.h)
// ---------------------------------------------------------------------------------------------

const _: () = {
    assert!(size_of::<RxeGid>() == 16);
    assert!(core::mem::align_of::<RxeGid>() == 8);
    assert!(size_of::<RxeGlobalRoute>() == 24);
    assert!(offset_of!(RxeGlobalRoute, flow_label) == 16);
    assert!(offset_of!(RxeGlobalRoute, sgid_index) == 20);
    assert!(offset_of!(RxeGlobalRoute, traffic_class) == 22);
    assert!(size_of::<RxeAvSockaddr>() == 28);
    assert!(size_of::<RxeAv>() == 88);
    assert!(core::mem::align_of::<RxeAv>() == 8);
    assert!(offset_of!(RxeAv, grh) == 8);
    assert!(offset_of!(RxeAv, sgid_addr) == 32);
    assert!(offset_of!(RxeAv, dgid_addr) == 60);

    assert!(size_of::<RxeSendWrRdma>() == 16);
    assert!(size_of::<RxeSendWrAtomic>() == 32);
    assert!(offset_of!(RxeSendWrAtomic, rkey) == 24);
    assert!(size_of::<RxeSendWrUd>() == RXE_SEND_WR_UNION_SIZE);
    assert!(offset_of!(RxeSendWrUd, ah_num) == 12);
    assert!(offset_of!(RxeSendWrUd, av) == 32);
    assert!(size_of::<RxeSendWrMw>() == 32);
    assert!(offset_of!(RxeSendWrMw, access) == 28);
    assert!(size_of::<RxeSendWrFlush>() == 24);
    assert!(offset_of!(RxeSendWrFlush, r#type) == 16);

    assert!(size_of::<RxeSendWr>() == 144);
    assert!(offset_of!(RxeSendWr, opcode) == 12);
    assert!(offset_of!(RxeSendWr, send_flags) == 16);
    assert!(offset_of!(RxeSendWr, ex) == 20);
    assert!(offset_of!(RxeSendWr, wr) == 24);

    assert!(size_of::<RxeSge>() == 16);
    assert!(size_of::<Mminfo>() == 16);
    assert!(size_of::<RxeDmaInfo>() == 24);
    assert!(core::mem::align_of::<RxeDmaInfo>() == 8);

    assert!(size_of::<RxeSendWqe>() == 208);
    assert!(offset_of!(RxeSendWqe, status) == 144);
    assert!(offset_of!(RxeSendWqe, state) == 148);
    assert!(offset_of!(RxeSendWqe, iova) == 152);
    assert!(offset_of!(RxeSendWqe, mask) == 160);
    assert!(offset_of!(RxeSendWqe, has_rd_atomic) == 180);
    assert!(offset_of!(RxeSendWqe, dma) == 184);

    assert!(size_of::<RxeRecvWqe>() == 40);
    assert!(offset_of!(RxeRecvWqe, dma) == 16);

    assert!(size_of::<RxeCreateAhResp>() == 8);
    assert!(size_of::<RxeCreateCqResp>() == 16);
    assert!(size_of::<RxeResizeCqResp>() == 16);
    assert!(size_of::<RxeCreateQpResp>() == 32);
    assert!(offset_of!(RxeCreateQpResp, sq_mi) == 16);
    assert!(size_of::<RxeCreateSrqResp>() == 24);
    assert!(size_of::<RxeModifySrqCmd>() == 8);

    assert!(size_of::<RxeQueueBuf>() == 384);
    assert!(RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET == 128);
    assert!(RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET == 256);
    assert!(RXE_QUEUE_BUF_DATA_OFFSET == 384);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_accessors_write_the_c_offsets() {
        let mut wr = RxeSendWr::default();
        wr.set_atomic(&RxeSendWrAtomic {
            remote_addr: 0x1122_3344_5566_7788,
            compare_add: 7,
            swap: 9,
            rkey: 0xabcd,
            reserved: 0,
        });
        let b = wr.as_bytes();
        // wr.atomic.rkey sits at offset 48 of struct rxe_send_wr (gcc).
        assert_eq!(&b[48..52], &0xabcdu32.to_ne_bytes());
        assert_eq!(&b[24..32], &0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(wr.atomic().swap, 9);

        wr.set_imm_data(0x0102_0304);
        assert_eq!(&wr.as_bytes()[20..24], &[1, 2, 3, 4]);
        assert_eq!(wr.imm_data(), 0x0102_0304);

        let mut ud = RxeSendWrUd {
            ah_num: 5,
            ..Default::default()
        };
        ud.av.port_num = 1;
        wr.set_ud(&ud);
        // wr.ud.ah_num at 36, wr.ud.av at 56.
        assert_eq!(&wr.as_bytes()[36..40], &5u32.to_ne_bytes());
        assert_eq!(wr.as_bytes()[56], 1);
        assert_eq!(wr.ud(), ud);
    }

    #[test]
    fn gid_halves_are_big_endian() {
        let mut gid = RxeGid::default();
        gid.raw[7] = 1;
        gid.raw[15] = 2;
        assert_eq!(gid.subnet_prefix(), 1);
        assert_eq!(gid.interface_id(), 2);
    }
}
