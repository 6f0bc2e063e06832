//! EFA (AWS Elastic Fabric Adapter) driver ABI: `rdma/efa-abi.h`.
//!
//! Mirrors the newest header (rdma-core `kernel-headers/rdma/efa-abi.h`, 2026): unsolicited
//! write receive, 64-bit SQ request ids, CQ-with-SGID, the query-MR driver method and the
//! completion-counter attributes. Only the kernel ABI lives here; the device's own WQE/CQE
//! formats (`efa_io_defs.h`) are not kernel ABI and live in the `uverbs-efa` crate.
//!
//! How each driver struct travels (rdma-core `providers/efa/efa-abi.h`, `DECLARE_DRV_CMD`):
//!
//! | command                             | driver request           | driver response            |
//! |-------------------------------------|--------------------------|----------------------------|
//! | `IB_USER_VERBS_CMD_GET_CONTEXT`     | [`EfaIbvAllocUcontextCmd`] | [`EfaIbvAllocUcontextResp`] |
//! | `IB_USER_VERBS_CMD_ALLOC_PD`        | (none)                   | [`EfaIbvAllocPdResp`]      |
//! | `IB_USER_VERBS_EX_CMD_CREATE_CQ`    | [`EfaIbvCreateCq`]       | [`EfaIbvCreateCqResp`]     |
//! | `IB_USER_VERBS_CMD_CREATE_QP`       | [`EfaIbvCreateQp`]       | [`EfaIbvCreateQpResp`]     |
//! | `IB_USER_VERBS_CMD_CREATE_AH`       | (none)                   | [`EfaIbvCreateAhResp`]     |
//! | `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` | (none)                   | [`EfaIbvExQueryDeviceResp`] |
//!
//! Over `RDMA_VERBS_IOCTL` the same structs go in the `UVERBS_ATTR_UHW_IN` / `UVERBS_ATTR_UHW_OUT`
//! attributes of the corresponding method.

use core::mem::{offset_of, size_of};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `UVERBS_ID_NS_SHIFT` from `rdma/ib_user_ioctl_cmds.h`: driver-namespace ids start at `1 << 12`.
const UVERBS_ID_NS_SHIFT: u16 = 12;

/// ABI version the kernel's EFA driver reports; bump means an incompatible change.
pub const EFA_UVERBS_ABI_VERSION: u32 = 1;

// ---------------------------------------------------------------------------------------------
// Alloc ucontext (GET_CONTEXT)
// ---------------------------------------------------------------------------------------------

/// `supported_caps` bit: userspace honours `max_tx_batch` from the response.
pub const EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_TX_BATCH: u32 = 1 << 0;
/// `supported_caps` bit: userspace honours `min_sq_wr` from the response.
pub const EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_MIN_SQ_WR: u32 = 1 << 1;

/// `struct efa_ibv_alloc_ucontext_cmd`: driver part of the GET_CONTEXT request.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIbvAllocUcontextCmd {
    /// `EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_*` the userspace driver understands.
    pub supported_caps: u32,
    /// Must be zero.
    pub reserved_20: [u8; 4],
}

/// `cmds_supp_udata_mask` bit: QUERY_DEVICE returns [`EfaIbvExQueryDeviceResp`].
pub const EFA_USER_CMDS_SUPP_UDATA_QUERY_DEVICE: u32 = 1 << 0;
/// `cmds_supp_udata_mask` bit: CREATE_AH returns [`EfaIbvCreateAhResp`].
pub const EFA_USER_CMDS_SUPP_UDATA_CREATE_AH: u32 = 1 << 1;

/// `struct efa_ibv_alloc_ucontext_resp`: driver part of the GET_CONTEXT response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIbvAllocUcontextResp {
    /// Extension mask (none defined).
    pub comp_mask: u32,
    /// `EFA_USER_CMDS_SUPP_UDATA_*`: which commands carry driver udata.
    pub cmds_supp_udata_mask: u32,
    /// Number of sub-CQs every CQ is split into (the value to pass as `num_sub_cqs`).
    pub sub_cqs_per_cq: u16,
    /// Inline buffer size of a 64-byte send WQE.
    pub inline_buf_size: u16,
    /// Size of the low-latency (device memory) SQ in bytes.
    pub max_llq_size: u32,
    /// Maximum doorbell batch, in units of 64 bytes (0: unlimited).
    pub max_tx_batch: u16,
    /// Minimum SQ depth the device accepts (0: no minimum).
    pub min_sq_wr: u16,
    /// Inline buffer size of a 128-byte send WQE.
    pub inline_buf_size_ex: u16,
    /// Must be zero.
    pub reserved_b0: [u8; 2],
}

// ---------------------------------------------------------------------------------------------
// Alloc PD
// ---------------------------------------------------------------------------------------------

/// `struct efa_ibv_alloc_pd_resp`: driver part of the ALLOC_PD response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIbvAllocPdResp {
    /// Extension mask (none defined).
    pub comp_mask: u32,
    /// Device PD number.
    pub pdn: u16,
    /// Must be zero.
    pub reserved_30: [u8; 2],
}

// ---------------------------------------------------------------------------------------------
// Create CQ
// ---------------------------------------------------------------------------------------------

/// [`EfaIbvCreateCq::flags`]: the CQ is bound to a completion channel (needs
/// [`EFA_QUERY_DEVICE_CAPS_CQ_NOTIFICATIONS`]).
pub const EFA_CREATE_CQ_WITH_COMPLETION_CHANNEL: u8 = 1 << 0;
/// [`EfaIbvCreateCq::flags`]: receive CQEs carry the source GID when the AH is unknown
/// (needs [`EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID`] and the extended CQE size).
pub const EFA_CREATE_CQ_WITH_SGID: u8 = 1 << 1;
/// [`EfaIbvCreateCq::flags`]: send CQEs carry a 64-bit request id (needs
/// [`EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID`]).
pub const EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID: u8 = 1 << 2;

/// `struct efa_ibv_create_cq`: driver part of the (extended) CREATE_CQ request.
///
/// External CQ memory (a dmabuf) is not expressed here: it travels in the generic ioctl
/// attributes `UVERBS_ATTR_CREATE_CQ_BUFFER_*`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIbvCreateCq {
    /// Extension mask (none defined).
    pub comp_mask: u32,
    /// Size of one CQE in bytes (`sizeof(efa_io_rx_cdesc)` = 16 or
    /// `sizeof(efa_io_rx_cdesc_ex)` = 32).
    pub cq_entry_size: u32,
    /// Number of sub-CQs; must equal [`EfaIbvAllocUcontextResp::sub_cqs_per_cq`].
    pub num_sub_cqs: u16,
    /// `EFA_CREATE_CQ_WITH_*`.
    pub flags: u8,
    /// Must be zero.
    pub reserved_58: [u8; 5],
}

/// [`EfaIbvCreateCqResp::comp_mask`]: `db_off` and `db_mmap_key` are valid (the CQ has a doorbell).
pub const EFA_CREATE_CQ_RESP_DB_OFF: u32 = 1 << 0;

/// `struct efa_ibv_create_cq_resp`: driver part of the CREATE_CQ response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIbvCreateCqResp {
    /// `EFA_CREATE_CQ_RESP_*`.
    pub comp_mask: u32,
    /// Must be zero.
    pub reserved_20: [u8; 4],
    /// mmap offset (on the uverbs fd) of the CQ ring, mapped read-only.
    pub q_mmap_key: u64,
    /// Length of the CQ ring mapping in bytes.
    pub q_mmap_size: u64,
    /// Device CQ number.
    pub cq_idx: u16,
    /// Must be zero.
    pub reserved_d0: [u8; 2],
    /// Byte offset of the 32-bit CQ doorbell inside the page mapped with `db_mmap_key`.
    pub db_off: u32,
    /// mmap offset of the page holding the CQ doorbell, mapped write-only.
    pub db_mmap_key: u64,
}

// ---------------------------------------------------------------------------------------------
// Create QP
// ---------------------------------------------------------------------------------------------

/// [`EfaIbvCreateQp::driver_qp_type`] for SRD (scalable reliable datagram) QPs, created with
/// the generic `IB_QPT_DRIVER` QP type.
pub const EFA_QP_DRIVER_TYPE_SRD: u32 = 0;

/// [`EfaIbvCreateQp::flags`]: RDMA write with immediate may complete on the receive side
/// without a posted receive (needs [`EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV`]).
pub const EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV: u16 = 1 << 0;
/// [`EfaIbvCreateQp::flags`]: the SQ uses 64-bit request ids (needs
/// [`EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID`]).
pub const EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID: u16 = 1 << 1;

/// `struct efa_ibv_create_qp`: driver part of the CREATE_QP request.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIbvCreateQp {
    /// Extension mask (none defined).
    pub comp_mask: u32,
    /// RQ ring size in bytes (descriptor count × 16).
    pub rq_ring_size: u32,
    /// SQ ring size in bytes (WQE count × WQE size, 64 or 128).
    pub sq_ring_size: u32,
    /// `EFA_QP_DRIVER_TYPE_*` when the generic QP type is `IB_QPT_DRIVER`.
    pub driver_qp_type: u32,
    /// `EFA_CREATE_QP_WITH_*`.
    pub flags: u16,
    /// Service level.
    pub sl: u8,
    /// Must be zero.
    pub reserved_98: [u8; 5],
}

/// `struct efa_ibv_create_qp_resp`: driver part of the CREATE_QP response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIbvCreateQpResp {
    /// Extension mask (none defined).
    pub comp_mask: u32,
    /// Byte offset of the RQ doorbell inside the page mapped with `rq_db_mmap_key`.
    pub rq_db_offset: u32,
    /// Byte offset of the SQ doorbell inside the page mapped with `sq_db_mmap_key`.
    pub sq_db_offset: u32,
    /// Byte offset of the first SQ descriptor inside the mapping of `llq_desc_mmap_key`.
    pub llq_desc_offset: u32,
    /// mmap offset of the RQ ring (host memory, mapped write-only by rdma-core).
    pub rq_mmap_key: u64,
    /// Length of the RQ ring mapping in bytes.
    pub rq_mmap_size: u64,
    /// mmap offset of the page holding the RQ doorbell (write-only).
    pub rq_db_mmap_key: u64,
    /// mmap offset of the page holding the SQ doorbell (write-only).
    pub sq_db_mmap_key: u64,
    /// mmap offset of the SQ descriptor ring in device memory (write-only, write-combined).
    pub llq_desc_mmap_key: u64,
    /// Sub-CQ of the send CQ that receives this QP's send completions.
    pub send_sub_cq_idx: u16,
    /// Sub-CQ of the receive CQ that receives this QP's receive completions.
    pub recv_sub_cq_idx: u16,
    /// Must be zero.
    pub reserved_1e0: [u8; 4],
}

// ---------------------------------------------------------------------------------------------
// Create AH
// ---------------------------------------------------------------------------------------------

/// `struct efa_ibv_create_ah_resp`: driver part of the CREATE_AH response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIbvCreateAhResp {
    /// Extension mask (none defined).
    pub comp_mask: u32,
    /// Device address handle number, written into send WQEs.
    pub efa_address_handle: u16,
    /// Must be zero.
    pub reserved_30: [u8; 2],
}

// ---------------------------------------------------------------------------------------------
// Query device (extended)
// ---------------------------------------------------------------------------------------------

/// [`EfaIbvExQueryDeviceResp::device_caps`]: RDMA read is supported.
pub const EFA_QUERY_DEVICE_CAPS_RDMA_READ: u32 = 1 << 0;
/// [`EfaIbvExQueryDeviceResp::device_caps`]: RNR retry is supported.
pub const EFA_QUERY_DEVICE_CAPS_RNR_RETRY: u32 = 1 << 1;
/// [`EfaIbvExQueryDeviceResp::device_caps`]: CQ notifications (completion channels).
pub const EFA_QUERY_DEVICE_CAPS_CQ_NOTIFICATIONS: u32 = 1 << 2;
/// [`EfaIbvExQueryDeviceResp::device_caps`]: CQs can report the source GID.
pub const EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID: u32 = 1 << 3;
/// [`EfaIbvExQueryDeviceResp::device_caps`]: 128-byte data polling.
pub const EFA_QUERY_DEVICE_CAPS_DATA_POLLING_128: u32 = 1 << 4;
/// [`EfaIbvExQueryDeviceResp::device_caps`]: RDMA write is supported.
pub const EFA_QUERY_DEVICE_CAPS_RDMA_WRITE: u32 = 1 << 5;
/// [`EfaIbvExQueryDeviceResp::device_caps`]: unsolicited RDMA-write-with-imm receive.
pub const EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV: u32 = 1 << 6;
/// [`EfaIbvExQueryDeviceResp::device_caps`]: CQ ring in external (dmabuf) memory.
pub const EFA_QUERY_DEVICE_CAPS_CQ_WITH_EXT_MEM: u32 = 1 << 7;
/// [`EfaIbvExQueryDeviceResp::device_caps`]: completion counters.
pub const EFA_QUERY_DEVICE_CAPS_COMP_CNTR: u32 = 1 << 8;
/// [`EfaIbvExQueryDeviceResp::device_caps`]: 64-bit SQ request ids.
pub const EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID: u32 = 1 << 9;

/// `struct efa_ibv_ex_query_device_resp`: driver part of the extended QUERY_DEVICE response.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EfaIbvExQueryDeviceResp {
    /// Extension mask (none defined).
    pub comp_mask: u32,
    /// Maximum SQ depth.
    pub max_sq_wr: u32,
    /// Maximum RQ depth.
    pub max_rq_wr: u32,
    /// Maximum SGEs per send WR.
    pub max_sq_sge: u16,
    /// Maximum SGEs per receive WR.
    pub max_rq_sge: u16,
    /// Maximum RDMA read/write length in bytes.
    pub max_rdma_size: u32,
    /// `EFA_QUERY_DEVICE_CAPS_*`.
    pub device_caps: u32,
}

// ---------------------------------------------------------------------------------------------
// Driver methods and attributes (ioctl driver namespace)
// ---------------------------------------------------------------------------------------------

/// `EFA_IB_ATTR_QUERY_MR_RESP_IC_ID_VALIDITY` bit: `RECV_IC_ID` is valid.
pub const EFA_QUERY_MR_VALIDITY_RECV_IC_ID: u16 = 1 << 0;
/// `EFA_IB_ATTR_QUERY_MR_RESP_IC_ID_VALIDITY` bit: `RDMA_READ_IC_ID` is valid.
pub const EFA_QUERY_MR_VALIDITY_RDMA_READ_IC_ID: u16 = 1 << 1;
/// `EFA_IB_ATTR_QUERY_MR_RESP_IC_ID_VALIDITY` bit: `RDMA_RECV_IC_ID` is valid.
pub const EFA_QUERY_MR_VALIDITY_RDMA_RECV_IC_ID: u16 = 1 << 2;

/// `enum efa_query_mr_attrs`: the MR handle (IDR, in).
pub const EFA_IB_ATTR_QUERY_MR_HANDLE: u16 = 1 << UVERBS_ID_NS_SHIFT;
/// `enum efa_query_mr_attrs`: validity mask of the interconnect ids (u16, out).
pub const EFA_IB_ATTR_QUERY_MR_RESP_IC_ID_VALIDITY: u16 = EFA_IB_ATTR_QUERY_MR_HANDLE + 1;
/// `enum efa_query_mr_attrs`: receive interconnect id (u16, out).
pub const EFA_IB_ATTR_QUERY_MR_RESP_RECV_IC_ID: u16 = EFA_IB_ATTR_QUERY_MR_HANDLE + 2;
/// `enum efa_query_mr_attrs`: RDMA read interconnect id (u16, out).
pub const EFA_IB_ATTR_QUERY_MR_RESP_RDMA_READ_IC_ID: u16 = EFA_IB_ATTR_QUERY_MR_HANDLE + 3;
/// `enum efa_query_mr_attrs`: RDMA receive interconnect id (u16, out).
pub const EFA_IB_ATTR_QUERY_MR_RESP_RDMA_RECV_IC_ID: u16 = EFA_IB_ATTR_QUERY_MR_HANDLE + 4;

/// `enum efa_mr_methods`: driver method on the MR object (`efadv_query_mr`).
pub const EFA_IB_METHOD_MR_QUERY: u16 = 1 << UVERBS_ID_NS_SHIFT;

/// `enum efa_comp_cntr_create_attrs`: completion-counter buffer (driver attr of the
/// completion-counter create method).
pub const EFA_IB_ATTR_CREATE_COMP_CNTR_COMP_BUFFER: u16 = 1 << UVERBS_ID_NS_SHIFT;
/// `enum efa_comp_cntr_create_attrs`: error-counter buffer.
pub const EFA_IB_ATTR_CREATE_COMP_CNTR_ERR_BUFFER: u16 =
    EFA_IB_ATTR_CREATE_COMP_CNTR_COMP_BUFFER + 1;

// ---------------------------------------------------------------------------------------------
// Layout checks: sizes from the header (all structs are 8-byte multiples, as it requires) and
// the offsets named by the `reserved_XXX` fields (XXX = bit offset in hex).
// ---------------------------------------------------------------------------------------------

const _: () = {
    assert!(size_of::<EfaIbvAllocUcontextCmd>() == 8);
    assert!(offset_of!(EfaIbvAllocUcontextCmd, reserved_20) * 8 == 0x20);

    assert!(size_of::<EfaIbvAllocUcontextResp>() == 24);
    assert!(offset_of!(EfaIbvAllocUcontextResp, max_llq_size) == 12);
    assert!(offset_of!(EfaIbvAllocUcontextResp, max_tx_batch) == 16);
    assert!(offset_of!(EfaIbvAllocUcontextResp, inline_buf_size_ex) == 20);
    assert!(offset_of!(EfaIbvAllocUcontextResp, reserved_b0) * 8 == 0xb0);

    assert!(size_of::<EfaIbvAllocPdResp>() == 8);
    assert!(offset_of!(EfaIbvAllocPdResp, reserved_30) * 8 == 0x30);

    assert!(size_of::<EfaIbvCreateCq>() == 16);
    assert!(offset_of!(EfaIbvCreateCq, flags) == 10);
    assert!(offset_of!(EfaIbvCreateCq, reserved_58) * 8 == 0x58);

    assert!(size_of::<EfaIbvCreateCqResp>() == 40);
    assert!(offset_of!(EfaIbvCreateCqResp, reserved_20) * 8 == 0x20);
    assert!(offset_of!(EfaIbvCreateCqResp, q_mmap_key) == 8);
    assert!(offset_of!(EfaIbvCreateCqResp, cq_idx) == 24);
    assert!(offset_of!(EfaIbvCreateCqResp, reserved_d0) * 8 == 0xd0);
    assert!(offset_of!(EfaIbvCreateCqResp, db_off) == 28);
    assert!(offset_of!(EfaIbvCreateCqResp, db_mmap_key) == 32);

    assert!(size_of::<EfaIbvCreateQp>() == 24);
    assert!(offset_of!(EfaIbvCreateQp, flags) == 16);
    assert!(offset_of!(EfaIbvCreateQp, sl) == 18);
    assert!(offset_of!(EfaIbvCreateQp, reserved_98) * 8 == 0x98);

    assert!(size_of::<EfaIbvCreateQpResp>() == 64);
    assert!(offset_of!(EfaIbvCreateQpResp, rq_mmap_key) == 16);
    assert!(offset_of!(EfaIbvCreateQpResp, llq_desc_mmap_key) == 48);
    assert!(offset_of!(EfaIbvCreateQpResp, send_sub_cq_idx) == 56);
    assert!(offset_of!(EfaIbvCreateQpResp, reserved_1e0) * 8 == 0x1e0);

    assert!(size_of::<EfaIbvCreateAhResp>() == 8);
    assert!(offset_of!(EfaIbvCreateAhResp, reserved_30) * 8 == 0x30);

    assert!(size_of::<EfaIbvExQueryDeviceResp>() == 24);
    assert!(offset_of!(EfaIbvExQueryDeviceResp, max_rdma_size) == 16);
    assert!(offset_of!(EfaIbvExQueryDeviceResp, device_caps) == 20);

    assert!(EFA_IB_METHOD_MR_QUERY == 0x1000);
    assert!(EFA_IB_ATTR_QUERY_MR_RESP_RDMA_RECV_IC_ID == 0x1004);
    assert!(EFA_IB_ATTR_CREATE_COMP_CNTR_ERR_BUFFER == 0x1001);
};
