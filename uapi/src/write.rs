//! Legacy `write()` commands of `/dev/infiniband/uverbsN` and the structs they carry.
//!
//! Mirrors `rdma/ib_user_verbs.h` (version basis: rdma-core 65.0 `kernel-headers`; items
//! marked "Newer than the 6.1 headers" are missing from Linux 6.1's copy).
//!
//! A write command is `[IbUverbsCmdHdr][command struct][driver data]` (`in_words`/`out_words`
//! count 4-byte words of command and response). An extended command sets
//! [`IB_USER_VERBS_CMD_FLAG_EXTENDED`] in `command` and puts an [`IbUverbsExCmdHdr`] after the
//! [`IbUverbsCmdHdr`]. The same command structs also travel inside `RDMA_VERBS_IOCTL` with
//! `UVERBS_METHOD_INVOKE_WRITE` (`crate::cmds`).
//!
//! C flexible array members are not part of the Rust structs; each struct's docs say what
//! follows it. Most command structs end in `__aligned_u64 driver_data[]` (the driver's private
//! `udata`, e.g. `crate::efa::EfaIbvCreateQp`) and responses in `driver_data[]` of `u32` or
//! `u64`. The `response` fields are user pointers (as `u64`) to the response buffer.
//!
//! Constants that are not in this header but whose values the kernel writes into these
//! structs (WC status, async event types, QP states, access flags, ...) are in
//! [`crate::verbs`].

use zerocopy::byteorder::big_endian;
use zerocopy::{FromBytes, IntoBytes};

/// `IB_USER_VERBS_ABI_VERSION`: the uverbs ABI version this header describes (the kernel
/// reports it in `/sys/class/infiniband_verbs/abi_version`).
pub const IB_USER_VERBS_ABI_VERSION: u32 = 6;
/// `IB_USER_VERBS_CMD_THRESHOLD`: extended-only commands are numbered from here.
pub const IB_USER_VERBS_CMD_THRESHOLD: u32 = 50;
/// `IB_USER_VERBS_CMD_COMMAND_MASK`: bits of `IbUverbsCmdHdr::command` holding the command
/// number.
pub const IB_USER_VERBS_CMD_COMMAND_MASK: u32 = 0xff;
/// `IB_USER_VERBS_CMD_FLAG_EXTENDED`: set in `IbUverbsCmdHdr::command` for an extended
/// command (an [`IbUverbsExCmdHdr`] follows the header).
pub const IB_USER_VERBS_CMD_FLAG_EXTENDED: u32 = 0x8000_0000;
/// `IB_DEVICE_NAME_MAX`: longest device name including the NUL.
pub const IB_DEVICE_NAME_MAX: usize = 64;
/// `IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE`: largest `log_ind_tbl_size` of a RWQ indirection table.
pub const IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE: u32 = 0x0d;

// enum ib_uverbs_write_cmds
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_GET_CONTEXT`.
pub const IB_USER_VERBS_CMD_GET_CONTEXT: u32 = 0;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_QUERY_DEVICE`.
pub const IB_USER_VERBS_CMD_QUERY_DEVICE: u32 = 1;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_QUERY_PORT`.
pub const IB_USER_VERBS_CMD_QUERY_PORT: u32 = 2;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_ALLOC_PD`.
pub const IB_USER_VERBS_CMD_ALLOC_PD: u32 = 3;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_DEALLOC_PD`.
pub const IB_USER_VERBS_CMD_DEALLOC_PD: u32 = 4;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_CREATE_AH`.
pub const IB_USER_VERBS_CMD_CREATE_AH: u32 = 5;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_MODIFY_AH`.
pub const IB_USER_VERBS_CMD_MODIFY_AH: u32 = 6;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_QUERY_AH`.
pub const IB_USER_VERBS_CMD_QUERY_AH: u32 = 7;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_DESTROY_AH`.
pub const IB_USER_VERBS_CMD_DESTROY_AH: u32 = 8;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_REG_MR`.
pub const IB_USER_VERBS_CMD_REG_MR: u32 = 9;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_REG_SMR`.
pub const IB_USER_VERBS_CMD_REG_SMR: u32 = 10;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_REREG_MR`.
pub const IB_USER_VERBS_CMD_REREG_MR: u32 = 11;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_QUERY_MR`.
pub const IB_USER_VERBS_CMD_QUERY_MR: u32 = 12;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_DEREG_MR`.
pub const IB_USER_VERBS_CMD_DEREG_MR: u32 = 13;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_ALLOC_MW`.
pub const IB_USER_VERBS_CMD_ALLOC_MW: u32 = 14;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_BIND_MW`.
pub const IB_USER_VERBS_CMD_BIND_MW: u32 = 15;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_DEALLOC_MW`.
pub const IB_USER_VERBS_CMD_DEALLOC_MW: u32 = 16;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`.
pub const IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: u32 = 17;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_CREATE_CQ`.
pub const IB_USER_VERBS_CMD_CREATE_CQ: u32 = 18;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_RESIZE_CQ`.
pub const IB_USER_VERBS_CMD_RESIZE_CQ: u32 = 19;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_DESTROY_CQ`.
pub const IB_USER_VERBS_CMD_DESTROY_CQ: u32 = 20;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_POLL_CQ`.
pub const IB_USER_VERBS_CMD_POLL_CQ: u32 = 21;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_PEEK_CQ`.
pub const IB_USER_VERBS_CMD_PEEK_CQ: u32 = 22;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`.
pub const IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: u32 = 23;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_CREATE_QP`.
pub const IB_USER_VERBS_CMD_CREATE_QP: u32 = 24;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_QUERY_QP`.
pub const IB_USER_VERBS_CMD_QUERY_QP: u32 = 25;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_MODIFY_QP`.
pub const IB_USER_VERBS_CMD_MODIFY_QP: u32 = 26;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_DESTROY_QP`.
pub const IB_USER_VERBS_CMD_DESTROY_QP: u32 = 27;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_POST_SEND`.
pub const IB_USER_VERBS_CMD_POST_SEND: u32 = 28;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_POST_RECV`.
pub const IB_USER_VERBS_CMD_POST_RECV: u32 = 29;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_ATTACH_MCAST`.
pub const IB_USER_VERBS_CMD_ATTACH_MCAST: u32 = 30;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_DETACH_MCAST`.
pub const IB_USER_VERBS_CMD_DETACH_MCAST: u32 = 31;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_CREATE_SRQ`.
pub const IB_USER_VERBS_CMD_CREATE_SRQ: u32 = 32;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_MODIFY_SRQ`.
pub const IB_USER_VERBS_CMD_MODIFY_SRQ: u32 = 33;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_QUERY_SRQ`.
pub const IB_USER_VERBS_CMD_QUERY_SRQ: u32 = 34;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_DESTROY_SRQ`.
pub const IB_USER_VERBS_CMD_DESTROY_SRQ: u32 = 35;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_POST_SRQ_RECV`.
pub const IB_USER_VERBS_CMD_POST_SRQ_RECV: u32 = 36;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_OPEN_XRCD`.
pub const IB_USER_VERBS_CMD_OPEN_XRCD: u32 = 37;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_CLOSE_XRCD`.
pub const IB_USER_VERBS_CMD_CLOSE_XRCD: u32 = 38;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_CREATE_XSRQ`.
pub const IB_USER_VERBS_CMD_CREATE_XSRQ: u32 = 39;
/// `enum ib_uverbs_write_cmds` member `IB_USER_VERBS_CMD_OPEN_QP`.
pub const IB_USER_VERBS_CMD_OPEN_QP: u32 = 40;

// anonymous enum
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` (= `IB_USER_VERBS_CMD_QUERY_DEVICE`).
pub const IB_USER_VERBS_EX_CMD_QUERY_DEVICE: u32 = 1;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_CREATE_CQ` (= `IB_USER_VERBS_CMD_CREATE_CQ`).
pub const IB_USER_VERBS_EX_CMD_CREATE_CQ: u32 = 18;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_CREATE_QP` (= `IB_USER_VERBS_CMD_CREATE_QP`).
pub const IB_USER_VERBS_EX_CMD_CREATE_QP: u32 = 24;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_MODIFY_QP` (= `IB_USER_VERBS_CMD_MODIFY_QP`).
pub const IB_USER_VERBS_EX_CMD_MODIFY_QP: u32 = 26;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_CREATE_FLOW` (= `IB_USER_VERBS_CMD_THRESHOLD`).
pub const IB_USER_VERBS_EX_CMD_CREATE_FLOW: u32 = 50;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_DESTROY_FLOW`.
pub const IB_USER_VERBS_EX_CMD_DESTROY_FLOW: u32 = 51;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_CREATE_WQ`.
pub const IB_USER_VERBS_EX_CMD_CREATE_WQ: u32 = 52;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_MODIFY_WQ`.
pub const IB_USER_VERBS_EX_CMD_MODIFY_WQ: u32 = 53;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_DESTROY_WQ`.
pub const IB_USER_VERBS_EX_CMD_DESTROY_WQ: u32 = 54;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL`.
pub const IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL: u32 = 55;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL`.
pub const IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL: u32 = 56;
/// Anonymous enum member `IB_USER_VERBS_EX_CMD_MODIFY_CQ`.
pub const IB_USER_VERBS_EX_CMD_MODIFY_CQ: u32 = 57;

// enum ib_placement_type
/// `enum ib_placement_type` member `IB_FLUSH_GLOBAL`. Newer than the 6.1 headers.
pub const IB_FLUSH_GLOBAL: u32 = 1 << 0;
/// `enum ib_placement_type` member `IB_FLUSH_PERSISTENT`. Newer than the 6.1 headers.
pub const IB_FLUSH_PERSISTENT: u32 = 1 << 1;

// enum ib_selectivity_level
/// `enum ib_selectivity_level` member `IB_FLUSH_RANGE`. Newer than the 6.1 headers.
pub const IB_FLUSH_RANGE: u32 = 0;
/// `enum ib_selectivity_level` member `IB_FLUSH_MR`. Newer than the 6.1 headers.
pub const IB_FLUSH_MR: u32 = 1;

// enum ib_uverbs_odp_general_cap_bits
/// `enum ib_uverbs_odp_general_cap_bits` member `IB_UVERBS_ODP_SUPPORT`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT: u64 = 1 << 0;
/// `enum ib_uverbs_odp_general_cap_bits` member `IB_UVERBS_ODP_SUPPORT_IMPLICIT`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT_IMPLICIT: u64 = 1 << 1;

// enum ib_uverbs_odp_transport_cap_bits
/// `enum ib_uverbs_odp_transport_cap_bits` member `IB_UVERBS_ODP_SUPPORT_SEND`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT_SEND: u32 = 1 << 0;
/// `enum ib_uverbs_odp_transport_cap_bits` member `IB_UVERBS_ODP_SUPPORT_RECV`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT_RECV: u32 = 1 << 1;
/// `enum ib_uverbs_odp_transport_cap_bits` member `IB_UVERBS_ODP_SUPPORT_WRITE`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT_WRITE: u32 = 1 << 2;
/// `enum ib_uverbs_odp_transport_cap_bits` member `IB_UVERBS_ODP_SUPPORT_READ`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT_READ: u32 = 1 << 3;
/// `enum ib_uverbs_odp_transport_cap_bits` member `IB_UVERBS_ODP_SUPPORT_ATOMIC`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT_ATOMIC: u32 = 1 << 4;
/// `enum ib_uverbs_odp_transport_cap_bits` member `IB_UVERBS_ODP_SUPPORT_SRQ_RECV`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT_SRQ_RECV: u32 = 1 << 5;
/// `enum ib_uverbs_odp_transport_cap_bits` member `IB_UVERBS_ODP_SUPPORT_FLUSH`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT_FLUSH: u32 = 1 << 6;
/// `enum ib_uverbs_odp_transport_cap_bits` member `IB_UVERBS_ODP_SUPPORT_ATOMIC_WRITE`. Newer than the 6.1 headers.
pub const IB_UVERBS_ODP_SUPPORT_ATOMIC_WRITE: u32 = 1 << 7;

// enum ib_uverbs_ex_create_cq_flags
/// `enum ib_uverbs_ex_create_cq_flags` member `IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION`.
pub const IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION: u32 = 1 << 0;
/// `enum ib_uverbs_ex_create_cq_flags` member `IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN`.
pub const IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN: u32 = 1 << 1;

// enum ib_uverbs_wc_opcode
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_SEND`.
pub const IB_UVERBS_WC_SEND: u32 = 0;
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_RDMA_WRITE`.
pub const IB_UVERBS_WC_RDMA_WRITE: u32 = 1;
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_RDMA_READ`.
pub const IB_UVERBS_WC_RDMA_READ: u32 = 2;
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_COMP_SWAP`.
pub const IB_UVERBS_WC_COMP_SWAP: u32 = 3;
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_FETCH_ADD`.
pub const IB_UVERBS_WC_FETCH_ADD: u32 = 4;
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_BIND_MW`.
pub const IB_UVERBS_WC_BIND_MW: u32 = 5;
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_LOCAL_INV`.
pub const IB_UVERBS_WC_LOCAL_INV: u32 = 6;
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_TSO`.
pub const IB_UVERBS_WC_TSO: u32 = 7;
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_FLUSH`. Newer than the 6.1 headers.
pub const IB_UVERBS_WC_FLUSH: u32 = 8;
/// `enum ib_uverbs_wc_opcode` member `IB_UVERBS_WC_ATOMIC_WRITE`. Newer than the 6.1 headers.
pub const IB_UVERBS_WC_ATOMIC_WRITE: u32 = 9;

// enum ib_uverbs_create_qp_mask
/// `enum ib_uverbs_create_qp_mask` member `IB_UVERBS_CREATE_QP_MASK_IND_TABLE`.
pub const IB_UVERBS_CREATE_QP_MASK_IND_TABLE: u32 = 1 << 0;

// anonymous enum
/// Anonymous enum member `IB_UVERBS_CREATE_QP_SUP_COMP_MASK` (= `IB_UVERBS_CREATE_QP_MASK_IND_TABLE`).
pub const IB_UVERBS_CREATE_QP_SUP_COMP_MASK: u32 = 1;

// enum ib_uverbs_wr_opcode
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_RDMA_WRITE`.
pub const IB_UVERBS_WR_RDMA_WRITE: u32 = 0;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_RDMA_WRITE_WITH_IMM`.
pub const IB_UVERBS_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_SEND`.
pub const IB_UVERBS_WR_SEND: u32 = 2;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_SEND_WITH_IMM`.
pub const IB_UVERBS_WR_SEND_WITH_IMM: u32 = 3;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_RDMA_READ`.
pub const IB_UVERBS_WR_RDMA_READ: u32 = 4;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_ATOMIC_CMP_AND_SWP`.
pub const IB_UVERBS_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD`.
pub const IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_LOCAL_INV`.
pub const IB_UVERBS_WR_LOCAL_INV: u32 = 7;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_BIND_MW`.
pub const IB_UVERBS_WR_BIND_MW: u32 = 8;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_SEND_WITH_INV`.
pub const IB_UVERBS_WR_SEND_WITH_INV: u32 = 9;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_TSO`.
pub const IB_UVERBS_WR_TSO: u32 = 10;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_RDMA_READ_WITH_INV`.
pub const IB_UVERBS_WR_RDMA_READ_WITH_INV: u32 = 11;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP`.
pub const IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP: u32 = 12;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD`.
pub const IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD: u32 = 13;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_FLUSH`. Newer than the 6.1 headers.
pub const IB_UVERBS_WR_FLUSH: u32 = 14;
/// `enum ib_uverbs_wr_opcode` member `IB_UVERBS_WR_ATOMIC_WRITE`. Newer than the 6.1 headers.
pub const IB_UVERBS_WR_ATOMIC_WRITE: u32 = 15;

// enum ib_uverbs_device_cap_flags
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_RESIZE_MAX_WR`.
pub const IB_UVERBS_DEVICE_RESIZE_MAX_WR: u64 = 1 << 0;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_BAD_PKEY_CNTR`.
pub const IB_UVERBS_DEVICE_BAD_PKEY_CNTR: u64 = 1 << 1;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_BAD_QKEY_CNTR`.
pub const IB_UVERBS_DEVICE_BAD_QKEY_CNTR: u64 = 1 << 2;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_RAW_MULTI`.
pub const IB_UVERBS_DEVICE_RAW_MULTI: u64 = 1 << 3;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_AUTO_PATH_MIG`.
pub const IB_UVERBS_DEVICE_AUTO_PATH_MIG: u64 = 1 << 4;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_CHANGE_PHY_PORT`.
pub const IB_UVERBS_DEVICE_CHANGE_PHY_PORT: u64 = 1 << 5;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE`.
pub const IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE: u64 = 1 << 6;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_CURR_QP_STATE_MOD`.
pub const IB_UVERBS_DEVICE_CURR_QP_STATE_MOD: u64 = 1 << 7;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_SHUTDOWN_PORT`.
pub const IB_UVERBS_DEVICE_SHUTDOWN_PORT: u64 = 1 << 8;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT`.
pub const IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT: u64 = 1 << 10;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_SYS_IMAGE_GUID`.
pub const IB_UVERBS_DEVICE_SYS_IMAGE_GUID: u64 = 1 << 11;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_RC_RNR_NAK_GEN`.
pub const IB_UVERBS_DEVICE_RC_RNR_NAK_GEN: u64 = 1 << 12;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_SRQ_RESIZE`.
pub const IB_UVERBS_DEVICE_SRQ_RESIZE: u64 = 1 << 13;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_N_NOTIFY_CQ`.
pub const IB_UVERBS_DEVICE_N_NOTIFY_CQ: u64 = 1 << 14;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_MEM_WINDOW`.
pub const IB_UVERBS_DEVICE_MEM_WINDOW: u64 = 1 << 17;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_UD_IP_CSUM`.
pub const IB_UVERBS_DEVICE_UD_IP_CSUM: u64 = 1 << 18;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_XRC`.
pub const IB_UVERBS_DEVICE_XRC: u64 = 1 << 20;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS`.
pub const IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS: u64 = 1 << 21;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A`.
pub const IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A: u64 = 1 << 23;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B`.
pub const IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B: u64 = 1 << 24;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_RC_IP_CSUM`.
pub const IB_UVERBS_DEVICE_RC_IP_CSUM: u64 = 1 << 25;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_RAW_IP_CSUM`.
pub const IB_UVERBS_DEVICE_RAW_IP_CSUM: u64 = 1 << 26;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING`.
pub const IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING: u64 = 1 << 29;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_RAW_SCATTER_FCS`.
pub const IB_UVERBS_DEVICE_RAW_SCATTER_FCS: u64 = 1 << 34;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING`.
pub const IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING: u64 = 1 << 36;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_FLUSH_GLOBAL`. Newer than the 6.1 headers.
pub const IB_UVERBS_DEVICE_FLUSH_GLOBAL: u64 = 1 << 38;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_FLUSH_PERSISTENT`. Newer than the 6.1 headers.
pub const IB_UVERBS_DEVICE_FLUSH_PERSISTENT: u64 = 1 << 39;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_ATOMIC_WRITE`. Newer than the 6.1 headers.
pub const IB_UVERBS_DEVICE_ATOMIC_WRITE: u64 = 1 << 40;
/// `enum ib_uverbs_device_cap_flags` member `IB_UVERBS_DEVICE_CC_DMA_BOUNCE`. Newer than the 6.1 headers.
pub const IB_UVERBS_DEVICE_CC_DMA_BOUNCE: u64 = 1 << 41;

// enum ib_uverbs_raw_packet_caps
/// `enum ib_uverbs_raw_packet_caps` member `IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING`.
pub const IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING: u32 = 1 << 0;
/// `enum ib_uverbs_raw_packet_caps` member `IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS`.
pub const IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS: u32 = 1 << 1;
/// `enum ib_uverbs_raw_packet_caps` member `IB_UVERBS_RAW_PACKET_CAP_IP_CSUM`.
pub const IB_UVERBS_RAW_PACKET_CAP_IP_CSUM: u32 = 1 << 2;
/// `enum ib_uverbs_raw_packet_caps` member `IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP`.
pub const IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP: u32 = 1 << 3;

uapi_struct! {
    /// `ib_uverbs_async_event_desc`: what `read(2)` on the async event fd returns.
    ///
    /// `element` is the `user_handle` of the CQ/QP/SRQ/WQ the event is about (or the port
    /// number for port events); `event_type` is an `IB_EVENT_*` of [`crate::verbs`].
    #[repr(align(8))]
    pub struct IbUverbsAsyncEventDesc = "ib_uverbs_async_event_desc", size 16 {
        pub element: u64,
        /// `enum ib_event_type` ([`crate::verbs::IB_EVENT_CQ_ERR`], ...).
        pub event_type: u32,
        pub reserved: u32,
    }

    /// What `read(2)` on a completion channel fd returns: the `user_handle` of the CQ that
    /// has a new completion event.
    #[repr(align(8))]
    pub struct IbUverbsCompEventDesc = "ib_uverbs_comp_event_desc", size 8 {
        pub cq_handle: u64,
    }

    /// CQ moderation capabilities in [`IbUverbsExQueryDeviceResp`].
    pub struct IbUverbsCqModerationCaps = "ib_uverbs_cq_moderation_caps", size 8 {
        pub max_cq_moderation_count: u16,
        pub max_cq_moderation_period: u16,
        pub reserved: u32,
    }

    /// Header of every `write()` command.
    pub struct IbUverbsCmdHdr = "ib_uverbs_cmd_hdr", size 8 {
        /// `IB_USER_VERBS_CMD_*`, or `IB_USER_VERBS_EX_CMD_*` |
        /// [`IB_USER_VERBS_CMD_FLAG_EXTENDED`].
        pub command: u32,
        /// Length of the command in 4-byte words (legacy: including this header; extended:
        /// the core command only, without both headers).
        pub in_words: u16,
        /// Length of the response buffer in 4-byte words (extended: core response only).
        pub out_words: u16,
    }

    /// Second header of an extended `write()` command, after [`IbUverbsCmdHdr`].
    #[repr(align(8))]
    pub struct IbUverbsExCmdHdr = "ib_uverbs_ex_cmd_hdr", size 16 {
        /// User pointer to the response buffer.
        pub response: u64,
        /// Driver data after the core command, in 8-byte words.
        pub provider_in_words: u16,
        /// Driver response after the core response, in 8-byte words.
        pub provider_out_words: u16,
        pub cmd_hdr_reserved: u32,
    }

    /// `IB_USER_VERBS_CMD_GET_CONTEXT`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsGetContext = "ib_uverbs_get_context", size 8 {
        pub response: u64,
    }

    /// Response of `IB_USER_VERBS_CMD_GET_CONTEXT`. Followed by driver data
    /// (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsGetContextResp = "ib_uverbs_get_context_resp", size 8 {
        /// The async event fd the kernel created for this context.
        pub async_fd: u32,
        pub num_comp_vectors: u32,
    }

    /// `IB_USER_VERBS_CMD_QUERY_DEVICE`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsQueryDevice = "ib_uverbs_query_device", size 8 {
        pub response: u64,
    }

    /// Response of `IB_USER_VERBS_CMD_QUERY_DEVICE` (and `base` of the extended one).
    #[repr(align(8))]
    pub struct IbUverbsQueryDeviceResp = "ib_uverbs_query_device_resp", size 176 {
        pub fw_ver: u64,
        /// `__be64`.
        pub node_guid: big_endian::U64,
        /// `__be64`.
        pub sys_image_guid: big_endian::U64,
        pub max_mr_size: u64,
        pub page_size_cap: u64,
        pub vendor_id: u32,
        pub vendor_part_id: u32,
        pub hw_ver: u32,
        pub max_qp: u32,
        pub max_qp_wr: u32,
        /// Low 32 bits of `IB_UVERBS_DEVICE_*`.
        pub device_cap_flags: u32,
        pub max_sge: u32,
        pub max_sge_rd: u32,
        pub max_cq: u32,
        pub max_cqe: u32,
        pub max_mr: u32,
        pub max_pd: u32,
        pub max_qp_rd_atom: u32,
        pub max_ee_rd_atom: u32,
        pub max_res_rd_atom: u32,
        pub max_qp_init_rd_atom: u32,
        pub max_ee_init_rd_atom: u32,
        /// `IB_ATOMIC_*` of [`crate::verbs`].
        pub atomic_cap: u32,
        pub max_ee: u32,
        pub max_rdd: u32,
        pub max_mw: u32,
        pub max_raw_ipv6_qp: u32,
        pub max_raw_ethy_qp: u32,
        pub max_mcast_grp: u32,
        pub max_mcast_qp_attach: u32,
        pub max_total_mcast_qp_attach: u32,
        pub max_ah: u32,
        pub max_fmr: u32,
        pub max_map_per_fmr: u32,
        pub max_srq: u32,
        pub max_srq_wr: u32,
        pub max_srq_sge: u32,
        pub max_pkeys: u16,
        pub local_ca_ack_delay: u8,
        pub phys_port_cnt: u8,
        pub reserved: [u8; 4],
    }

    /// `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` (extended command).
    pub struct IbUverbsExQueryDevice = "ib_uverbs_ex_query_device", size 8 {
        pub comp_mask: u32,
        pub reserved: u32,
    }

    /// Per-transport on-demand-paging caps (`IB_UVERBS_ODP_SUPPORT_SEND`, ...).
    pub struct IbUverbsOdpCapsPerTransportCaps = "ib_uverbs_odp_caps.per_transport_caps", size 12 {
        pub rc_odp_caps: u32,
        pub uc_odp_caps: u32,
        pub ud_odp_caps: u32,
    }

    /// On-demand-paging capabilities in [`IbUverbsExQueryDeviceResp`].
    #[repr(align(8))]
    pub struct IbUverbsOdpCaps = "ib_uverbs_odp_caps", size 24 {
        /// `IB_UVERBS_ODP_SUPPORT*`.
        pub general_caps: u64,
        pub per_transport_caps: IbUverbsOdpCapsPerTransportCaps,
        pub reserved: u32,
    }

    /// RSS capabilities in [`IbUverbsExQueryDeviceResp`].
    pub struct IbUverbsRssCaps = "ib_uverbs_rss_caps", size 16 {
        /// Bit `1 << qp_type` set for each QP type (`IB_UVERBS_QPT_*`) that supports RSS.
        pub supported_qpts: u32,
        pub max_rwq_indirection_tables: u32,
        pub max_rwq_indirection_table_size: u32,
        pub reserved: u32,
    }

    /// Tag-matching capabilities in [`IbUverbsExQueryDeviceResp`].
    pub struct IbUverbsTmCaps = "ib_uverbs_tm_caps", size 24 {
        pub max_rndv_hdr_size: u32,
        pub max_num_tags: u32,
        pub flags: u32,
        pub max_ops: u32,
        pub max_sge: u32,
        pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_EX_CMD_QUERY_DEVICE`. The kernel fills only
    /// `response_length` bytes (older kernels know fewer fields); zero the buffer first.
    #[repr(align(8))]
    pub struct IbUverbsExQueryDeviceResp = "ib_uverbs_ex_query_device_resp", size 304 {
        pub base: IbUverbsQueryDeviceResp,
        pub comp_mask: u32,
        /// Bytes of this struct the kernel wrote.
        pub response_length: u32,
        pub odp_caps: IbUverbsOdpCaps,
        pub timestamp_mask: u64,
        /// In kHz.
        pub hca_core_clock: u64,
        /// `IB_UVERBS_DEVICE_*` (all 64 bits).
        pub device_cap_flags_ex: u64,
        pub rss_caps: IbUverbsRssCaps,
        pub max_wq_type_rq: u32,
        /// `IB_UVERBS_RAW_PACKET_CAP_*`.
        pub raw_packet_caps: u32,
        pub tm_caps: IbUverbsTmCaps,
        pub cq_moderation_caps: IbUverbsCqModerationCaps,
        pub max_dm_size: u64,
        pub xrc_odp_caps: u32,
        pub reserved: u32,
    }

    /// `IB_USER_VERBS_CMD_QUERY_PORT`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsQueryPort = "ib_uverbs_query_port", size 16 {
        pub response: u64,
        pub port_num: u8,
        pub reserved: [u8; 7],
    }

    /// Response of `IB_USER_VERBS_CMD_QUERY_PORT` (also `legacy_resp` of
    /// [`crate::verbs::IbUverbsQueryPortRespEx`]).
    pub struct IbUverbsQueryPortResp = "ib_uverbs_query_port_resp", size 40 {
        /// `IB_UVERBS_PCF_*` of [`crate::verbs`].
        pub port_cap_flags: u32,
        pub max_msg_sz: u32,
        pub bad_pkey_cntr: u32,
        pub qkey_viol_cntr: u32,
        pub gid_tbl_len: u32,
        pub pkey_tbl_len: u16,
        pub lid: u16,
        pub sm_lid: u16,
        /// `IB_PORT_*` of [`crate::verbs`].
        pub state: u8,
        /// `IB_MTU_*` of [`crate::verbs`].
        pub max_mtu: u8,
        /// `IB_MTU_*` of [`crate::verbs`].
        pub active_mtu: u8,
        pub lmc: u8,
        pub max_vl_num: u8,
        pub sm_sl: u8,
        pub subnet_timeout: u8,
        pub init_type_reply: u8,
        pub active_width: u8,
        pub active_speed: u8,
        pub phys_state: u8,
        /// `IB_LINK_LAYER_*` of [`crate::verbs`].
        pub link_layer: u8,
        /// `IB_UVERBS_QPF_*` of [`crate::verbs`].
        pub flags: u8,
        pub reserved: u8,
    }

    /// `IB_USER_VERBS_CMD_ALLOC_PD`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsAllocPd = "ib_uverbs_alloc_pd", size 8 {
        pub response: u64,
    }

    /// Response of `IB_USER_VERBS_CMD_ALLOC_PD`. Followed by driver data (`__u32 driver_data[]`).
    pub struct IbUverbsAllocPdResp = "ib_uverbs_alloc_pd_resp", size 4 {
        pub pd_handle: u32,
    }

    /// `IB_USER_VERBS_CMD_DEALLOC_PD`.
    pub struct IbUverbsDeallocPd = "ib_uverbs_dealloc_pd", size 4 {
        pub pd_handle: u32,
    }

    /// `IB_USER_VERBS_CMD_OPEN_XRCD`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsOpenXrcd = "ib_uverbs_open_xrcd", size 16 {
        pub response: u64,
        /// File whose inode names the XRC domain, or `-1` as `u32` for a private one.
        pub fd: u32,
        /// `O_CREAT`/`O_EXCL`.
        pub oflags: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_OPEN_XRCD`. Followed by driver data (`__u32 driver_data[]`).
    pub struct IbUverbsOpenXrcdResp = "ib_uverbs_open_xrcd_resp", size 4 {
        pub xrcd_handle: u32,
    }

    /// `IB_USER_VERBS_CMD_CLOSE_XRCD`.
    pub struct IbUverbsCloseXrcd = "ib_uverbs_close_xrcd", size 4 {
        pub xrcd_handle: u32,
    }

    /// `IB_USER_VERBS_CMD_REG_MR`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsRegMr = "ib_uverbs_reg_mr", size 40 {
        pub response: u64,
        /// User virtual address of the memory.
        pub start: u64,
        pub length: u64,
        /// I/O virtual address the MR is addressed by (usually `start`).
        pub hca_va: u64,
        pub pd_handle: u32,
        /// `IB_UVERBS_ACCESS_*` of [`crate::verbs`].
        pub access_flags: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_REG_MR`. Followed by driver data (`__u32 driver_data[]`).
    pub struct IbUverbsRegMrResp = "ib_uverbs_reg_mr_resp", size 12 {
        pub mr_handle: u32,
        pub lkey: u32,
        pub rkey: u32,
    }

    /// `IB_USER_VERBS_CMD_REREG_MR`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsReregMr = "ib_uverbs_rereg_mr", size 48 {
        pub response: u64,
        pub mr_handle: u32,
        /// `IB_MR_REREG_*` of [`crate::verbs`].
        pub flags: u32,
        pub start: u64,
        pub length: u64,
        pub hca_va: u64,
        pub pd_handle: u32,
        pub access_flags: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_REREG_MR`. Followed by driver data
    /// (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsReregMrResp = "ib_uverbs_rereg_mr_resp", size 8 {
        pub lkey: u32,
        pub rkey: u32,
    }

    /// `IB_USER_VERBS_CMD_DEREG_MR`.
    pub struct IbUverbsDeregMr = "ib_uverbs_dereg_mr", size 4 {
        pub mr_handle: u32,
    }

    /// `IB_USER_VERBS_CMD_ALLOC_MW`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsAllocMw = "ib_uverbs_alloc_mw", size 16 {
        pub response: u64,
        pub pd_handle: u32,
        /// `IB_MW_TYPE_1` / `IB_MW_TYPE_2` of [`crate::verbs`].
        pub mw_type: u8,
        pub reserved: [u8; 3],
    }

    /// Response of `IB_USER_VERBS_CMD_ALLOC_MW`. Followed by driver data
    /// (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsAllocMwResp = "ib_uverbs_alloc_mw_resp", size 8 {
        pub mw_handle: u32,
        pub rkey: u32,
    }

    /// `IB_USER_VERBS_CMD_DEALLOC_MW`.
    pub struct IbUverbsDeallocMw = "ib_uverbs_dealloc_mw", size 4 {
        pub mw_handle: u32,
    }

    /// `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`.
    #[repr(align(8))]
    pub struct IbUverbsCreateCompChannel = "ib_uverbs_create_comp_channel", size 8 {
        pub response: u64,
    }

    /// Response of `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`.
    pub struct IbUverbsCreateCompChannelResp = "ib_uverbs_create_comp_channel_resp", size 4 {
        /// The new completion channel fd.
        pub fd: u32,
    }

    /// `IB_USER_VERBS_CMD_CREATE_CQ`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsCreateCq = "ib_uverbs_create_cq", size 32 {
        pub response: u64,
        /// Opaque value the kernel hands back in completion events
        /// ([`IbUverbsCompEventDesc::cq_handle`]) and async events
        /// ([`IbUverbsAsyncEventDesc::element`]).
        pub user_handle: u64,
        pub cqe: u32,
        pub comp_vector: u32,
        /// Completion channel fd, or -1 for none.
        pub comp_channel: i32,
        pub reserved: u32,
    }

    /// `IB_USER_VERBS_EX_CMD_CREATE_CQ` (extended command).
    #[repr(align(8))]
    pub struct IbUverbsExCreateCq = "ib_uverbs_ex_create_cq", size 32 {
        pub user_handle: u64,
        pub cqe: u32,
        pub comp_vector: u32,
        /// Completion channel fd, or -1 for none.
        pub comp_channel: i32,
        pub comp_mask: u32,
        /// `IB_UVERBS_CQ_FLAGS_*`.
        pub flags: u32,
        pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_CREATE_CQ`. Followed by driver data
    /// (`__aligned_u64 driver_data[0]`).
    #[repr(align(8))]
    pub struct IbUverbsCreateCqResp = "ib_uverbs_create_cq_resp", size 8 {
        pub cq_handle: u32,
        /// Actual number of CQEs (may be larger than asked).
        pub cqe: u32,
    }

    /// Response of `IB_USER_VERBS_EX_CMD_CREATE_CQ`.
    #[repr(align(8))]
    pub struct IbUverbsExCreateCqResp = "ib_uverbs_ex_create_cq_resp", size 16 {
        pub base: IbUverbsCreateCqResp,
        pub comp_mask: u32,
        pub response_length: u32,
    }

    /// `IB_USER_VERBS_CMD_RESIZE_CQ`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsResizeCq = "ib_uverbs_resize_cq", size 16 {
        pub response: u64,
        pub cq_handle: u32,
        pub cqe: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_RESIZE_CQ`. Followed by driver data
    /// (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsResizeCqResp = "ib_uverbs_resize_cq_resp", size 8 {
        pub cqe: u32,
        pub reserved: u32,
    }

    /// `IB_USER_VERBS_CMD_POLL_CQ` (kernel-side polling; drivers with user-mapped CQs such as
    /// rxe and EFA are polled in user space instead).
    #[repr(align(8))]
    pub struct IbUverbsPollCq = "ib_uverbs_poll_cq", size 16 {
        pub response: u64,
        pub cq_handle: u32,
        /// Maximum number of completions to return.
        pub ne: u32,
    }

    /// A work completion as the kernel reports it (`POLL_CQ`, and rxe's CQ ring entries).
    ///
    /// `ex` is the C union `ex { __be32 imm_data; __u32 invalidate_rkey; }`; read it with
    /// [`IbUverbsWc::imm_data`] / [`IbUverbsWc::invalidate_rkey`].
    #[repr(align(8))]
    pub struct IbUverbsWc = "ib_uverbs_wc", size 48 {
        pub wr_id: u64,
        /// `enum ib_wc_status`: [`crate::verbs::IB_WC_SUCCESS`], ...
        pub status: u32,
        /// `IB_UVERBS_WC_*`, or [`crate::verbs::IB_WC_RECV`] /
        /// [`crate::verbs::IB_WC_RECV_RDMA_WITH_IMM`] for receives.
        pub opcode: u32,
        pub vendor_err: u32,
        pub byte_len: u32,
        /// C union `ex { __be32 imm_data; __u32 invalidate_rkey; }`.
        pub ex: [u8; 4],
        pub qp_num: u32,
        pub src_qp: u32,
        /// Kernel `enum ib_wc_flags`: [`crate::verbs::IB_WC_GRH`], ...
        pub wc_flags: u32,
        pub pkey_index: u16,
        pub slid: u16,
        pub sl: u8,
        pub dlid_path_bits: u8,
        pub port_num: u8,
        pub reserved: u8,
    }

    /// Response of `IB_USER_VERBS_CMD_POLL_CQ`: followed by `count` [`IbUverbsWc`]
    /// (`struct ib_uverbs_wc wc[]`).
    #[repr(align(8))]
    pub struct IbUverbsPollCqResp = "ib_uverbs_poll_cq_resp", size 8 {
        pub count: u32,
        pub reserved: u32,
    }

    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ` (no response).
    pub struct IbUverbsReqNotifyCq = "ib_uverbs_req_notify_cq", size 8 {
        pub cq_handle: u32,
        /// Non-zero: notify only for solicited completions.
        pub solicited_only: u32,
    }

    /// `IB_USER_VERBS_CMD_DESTROY_CQ`.
    #[repr(align(8))]
    pub struct IbUverbsDestroyCq = "ib_uverbs_destroy_cq", size 16 {
        pub response: u64,
        pub cq_handle: u32,
        pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_DESTROY_CQ`: how many events were delivered, so user
    /// space can wait until it has acknowledged them all.
    pub struct IbUverbsDestroyCqResp = "ib_uverbs_destroy_cq_resp", size 8 {
        pub comp_events_reported: u32,
        pub async_events_reported: u32,
    }

    /// Global route (GRH) part of [`IbUverbsAhAttr`].
    pub struct IbUverbsGlobalRoute = "ib_uverbs_global_route", size 24 {
        /// Destination GID in network byte order.
        pub dgid: [u8; 16],
        pub flow_label: u32,
        pub sgid_index: u8,
        pub hop_limit: u8,
        pub traffic_class: u8,
        pub reserved: u8,
    }

    /// Address vector of `CREATE_AH` and of [`IbUverbsQpAttr`].
    pub struct IbUverbsAhAttr = "ib_uverbs_ah_attr", size 32 {
        pub grh: IbUverbsGlobalRoute,
        pub dlid: u16,
        pub sl: u8,
        pub src_path_bits: u8,
        pub static_rate: u8,
        /// Non-zero: `grh` is valid (always for RoCE).
        pub is_global: u8,
        pub port_num: u8,
        pub reserved: u8,
    }

    /// QP attributes as the ioctl-era kernel describes them (`ib_qp_cap` fields inline).
    pub struct IbUverbsQpAttr = "ib_uverbs_qp_attr", size 144 {
        /// `IB_QP_*` of [`crate::verbs`].
        pub qp_attr_mask: u32,
        pub qp_state: u32,
        pub cur_qp_state: u32,
        pub path_mtu: u32,
        pub path_mig_state: u32,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        pub qp_access_flags: u32,
        pub ah_attr: IbUverbsAhAttr,
        pub alt_ah_attr: IbUverbsAhAttr,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub pkey_index: u16,
        pub alt_pkey_index: u16,
        pub en_sqd_async_notify: u8,
        pub sq_draining: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub reserved: [u8; 5],
    }

    /// `IB_USER_VERBS_CMD_CREATE_QP`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsCreateQp = "ib_uverbs_create_qp", size 56 {
        pub response: u64,
        pub user_handle: u64,
        pub pd_handle: u32,
        pub send_cq_handle: u32,
        pub recv_cq_handle: u32,
        pub srq_handle: u32,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub sq_sig_all: u8,
        /// `IB_UVERBS_QPT_*` of [`crate::verbs`].
        pub qp_type: u8,
        pub is_srq: u8,
        pub reserved: u8,
    }

    /// `IB_USER_VERBS_EX_CMD_CREATE_QP` (extended command; driver data follows as provider
    /// data).
    #[repr(align(8))]
    pub struct IbUverbsExCreateQp = "ib_uverbs_ex_create_qp", size 64 {
        pub user_handle: u64,
        pub pd_handle: u32,
        pub send_cq_handle: u32,
        pub recv_cq_handle: u32,
        pub srq_handle: u32,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub sq_sig_all: u8,
        /// `IB_UVERBS_QPT_*` of [`crate::verbs`].
        pub qp_type: u8,
        pub is_srq: u8,
        pub reserved: u8,
        /// `IB_UVERBS_CREATE_QP_MASK_*`.
        pub comp_mask: u32,
        /// `IB_UVERBS_QP_CREATE_*` of [`crate::verbs`].
        pub create_flags: u32,
        pub rwq_ind_tbl_handle: u32,
        pub source_qpn: u32,
    }

    /// `IB_USER_VERBS_CMD_OPEN_QP` (open a shareable XRC target QP). Followed by driver data
    /// (`__aligned_u64 driver_data[]`); the response is an [`IbUverbsCreateQpResp`].
    #[repr(align(8))]
    pub struct IbUverbsOpenQp = "ib_uverbs_open_qp", size 32 {
        pub response: u64,
        pub user_handle: u64,
        /// XRCD handle (the field is named `pd_handle` in C).
        pub pd_handle: u32,
        pub qpn: u32,
        pub qp_type: u8,
        pub reserved: [u8; 7],
    }

    /// Response of `IB_USER_VERBS_CMD_CREATE_QP` and `OPEN_QP`. Followed by driver data
    /// (`__u32 driver_data[0]`).
    pub struct IbUverbsCreateQpResp = "ib_uverbs_create_qp_resp", size 32 {
        pub qp_handle: u32,
        pub qpn: u32,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_EX_CMD_CREATE_QP`.
    pub struct IbUverbsExCreateQpResp = "ib_uverbs_ex_create_qp_resp", size 40 {
        pub base: IbUverbsCreateQpResp,
        pub comp_mask: u32,
        pub response_length: u32,
    }

    /// Path (address vector) in `MODIFY_QP` / `QUERY_QP`.
    pub struct IbUverbsQpDest = "ib_uverbs_qp_dest", size 32 {
        /// Destination GID in network byte order.
        pub dgid: [u8; 16],
        pub flow_label: u32,
        pub dlid: u16,
        pub reserved: u16,
        pub sgid_index: u8,
        pub hop_limit: u8,
        pub traffic_class: u8,
        pub sl: u8,
        pub src_path_bits: u8,
        pub static_rate: u8,
        pub is_global: u8,
        pub port_num: u8,
    }

    /// `IB_USER_VERBS_CMD_QUERY_QP`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsQueryQp = "ib_uverbs_query_qp", size 16 {
        pub response: u64,
        pub qp_handle: u32,
        /// `IB_QP_*` of [`crate::verbs`].
        pub attr_mask: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_QUERY_QP`. Followed by driver data
    /// (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsQueryQpResp = "ib_uverbs_query_qp_resp", size 128 {
        pub dest: IbUverbsQpDest,
        pub alt_dest: IbUverbsQpDest,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        pub qp_access_flags: u32,
        pub pkey_index: u16,
        pub alt_pkey_index: u16,
        /// `IB_QPS_*` of [`crate::verbs`].
        pub qp_state: u8,
        pub cur_qp_state: u8,
        /// `IB_MTU_*` of [`crate::verbs`].
        pub path_mtu: u8,
        pub path_mig_state: u8,
        pub sq_draining: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub sq_sig_all: u8,
        pub reserved: [u8; 5],
    }

    /// `IB_USER_VERBS_CMD_MODIFY_QP` (no response). Followed by driver data
    /// (`__aligned_u64 driver_data[0]`).
    #[repr(align(8))]
    pub struct IbUverbsModifyQp = "ib_uverbs_modify_qp", size 112 {
        pub dest: IbUverbsQpDest,
        pub alt_dest: IbUverbsQpDest,
        pub qp_handle: u32,
        /// `IB_QP_*` of [`crate::verbs`]: which of the fields below to apply.
        pub attr_mask: u32,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        /// `IB_UVERBS_ACCESS_*` of [`crate::verbs`].
        pub qp_access_flags: u32,
        pub pkey_index: u16,
        pub alt_pkey_index: u16,
        /// `IB_QPS_*` of [`crate::verbs`].
        pub qp_state: u8,
        pub cur_qp_state: u8,
        /// `IB_MTU_*` of [`crate::verbs`].
        pub path_mtu: u8,
        pub path_mig_state: u8,
        pub en_sqd_async_notify: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub reserved: [u8; 2],
    }

    /// `IB_USER_VERBS_EX_CMD_MODIFY_QP` (extended command).
    #[repr(align(8))]
    pub struct IbUverbsExModifyQp = "ib_uverbs_ex_modify_qp", size 120 {
        pub base: IbUverbsModifyQp,
        /// Packet pacing rate limit in kbps (with `IB_QP_RATE_LIMIT`).
        pub rate_limit: u32,
        pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_EX_CMD_MODIFY_QP`.
    pub struct IbUverbsExModifyQpResp = "ib_uverbs_ex_modify_qp_resp", size 8 {
        pub comp_mask: u32,
        pub response_length: u32,
    }

    /// `IB_USER_VERBS_CMD_DESTROY_QP`.
    #[repr(align(8))]
    pub struct IbUverbsDestroyQp = "ib_uverbs_destroy_qp", size 16 {
        pub response: u64,
        pub qp_handle: u32,
        pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_DESTROY_QP`.
    pub struct IbUverbsDestroyQpResp = "ib_uverbs_destroy_qp_resp", size 4 {
        pub events_reported: u32,
    }

    /// A scatter/gather element as `POST_SEND`/`POST_RECV` carry them after the WRs (the C
    /// header notes the kernel really reads `struct ib_sge`, which has the same layout).
    #[repr(align(8))]
    pub struct IbUverbsSge = "ib_uverbs_sge", size 16 {
        pub addr: u64,
        pub length: u32,
        pub lkey: u32,
    }

    /// `wr.rdma` member of the [`IbUverbsSendWr`] union (RDMA read/write).
    #[repr(align(8))]
    pub struct IbUverbsSendWrRdma = "ib_uverbs_send_wr.wr.rdma", size 16 {
        pub remote_addr: u64,
        pub rkey: u32,
        pub reserved: u32,
    }

    /// `wr.atomic` member of the [`IbUverbsSendWr`] union (compare-and-swap, fetch-and-add).
    #[repr(align(8))]
    pub struct IbUverbsSendWrAtomic = "ib_uverbs_send_wr.wr.atomic", size 32 {
        pub remote_addr: u64,
        pub compare_add: u64,
        pub swap: u64,
        pub rkey: u32,
        pub reserved: u32,
    }

    /// `wr.ud` member of the [`IbUverbsSendWr`] union (UD sends).
    pub struct IbUverbsSendWrUd = "ib_uverbs_send_wr.wr.ud", size 16 {
        /// AH handle.
        pub ah: u32,
        pub remote_qpn: u32,
        pub remote_qkey: u32,
        pub reserved: u32,
    }

    /// One send work request of `POST_SEND`.
    ///
    /// `ex` is the C union `ex { __be32 imm_data; __u32 invalidate_rkey; }` and `wr` the C
    /// union `wr { rdma; atomic; ud; }`; use the accessor methods.
    #[repr(align(8))]
    pub struct IbUverbsSendWr = "ib_uverbs_send_wr", size 56 {
        pub wr_id: u64,
        pub num_sge: u32,
        /// `IB_UVERBS_WR_*`.
        pub opcode: u32,
        /// `IB_SEND_*` of [`crate::verbs`].
        pub send_flags: u32,
        /// C union `ex { __be32 imm_data; __u32 invalidate_rkey; }`.
        pub ex: [u8; 4],
        /// C union `wr { rdma; atomic; ud; }` (32 bytes, 8-aligned).
        pub wr: [u8; 32],
    }

    /// `IB_USER_VERBS_CMD_POST_SEND`: followed by `wr_count` WRs of `wqe_size` bytes each
    /// (an [`IbUverbsSendWr`] at the start of each) and then `sge_count` [`IbUverbsSge`]
    /// (C: `struct ib_uverbs_send_wr send_wr[]`). rxe: `wr_count` = 0 just kicks the SQ.
    #[repr(align(8))]
    pub struct IbUverbsPostSend = "ib_uverbs_post_send", size 24 {
        pub response: u64,
        pub qp_handle: u32,
        pub wr_count: u32,
        pub sge_count: u32,
        pub wqe_size: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_POST_SEND`.
    pub struct IbUverbsPostSendResp = "ib_uverbs_post_send_resp", size 4 {
        /// Index of the first WR that failed.
        pub bad_wr: u32,
    }

    /// One receive work request of `POST_RECV`/`POST_SRQ_RECV`.
    #[repr(align(8))]
    pub struct IbUverbsRecvWr = "ib_uverbs_recv_wr", size 16 {
        pub wr_id: u64,
        pub num_sge: u32,
        pub reserved: u32,
    }

    /// `IB_USER_VERBS_CMD_POST_RECV`: followed by `wr_count` WRs of `wqe_size` bytes and then
    /// `sge_count` [`IbUverbsSge`] (C: `struct ib_uverbs_recv_wr recv_wr[]`).
    #[repr(align(8))]
    pub struct IbUverbsPostRecv = "ib_uverbs_post_recv", size 24 {
        pub response: u64,
        pub qp_handle: u32,
        pub wr_count: u32,
        pub sge_count: u32,
        pub wqe_size: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_POST_RECV`.
    pub struct IbUverbsPostRecvResp = "ib_uverbs_post_recv_resp", size 4 {
        pub bad_wr: u32,
    }

    /// `IB_USER_VERBS_CMD_POST_SRQ_RECV`: followed by `wr_count` WRs of `wqe_size` bytes and
    /// then `sge_count` [`IbUverbsSge`] (C: `struct ib_uverbs_recv_wr recv[]`).
    #[repr(align(8))]
    pub struct IbUverbsPostSrqRecv = "ib_uverbs_post_srq_recv", size 24 {
        pub response: u64,
        pub srq_handle: u32,
        pub wr_count: u32,
        pub sge_count: u32,
        pub wqe_size: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_POST_SRQ_RECV`.
    pub struct IbUverbsPostSrqRecvResp = "ib_uverbs_post_srq_recv_resp", size 4 {
        pub bad_wr: u32,
    }

    /// `IB_USER_VERBS_CMD_CREATE_AH`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsCreateAh = "ib_uverbs_create_ah", size 56 {
        pub response: u64,
        pub user_handle: u64,
        pub pd_handle: u32,
        pub reserved: u32,
        pub attr: IbUverbsAhAttr,
    }

    /// Response of `IB_USER_VERBS_CMD_CREATE_AH`. Followed by driver data
    /// (`__u32 driver_data[]`), e.g. EFA's `efa_ibv_create_ah_resp`.
    pub struct IbUverbsCreateAhResp = "ib_uverbs_create_ah_resp", size 4 {
        pub ah_handle: u32,
    }

    /// `IB_USER_VERBS_CMD_DESTROY_AH`.
    pub struct IbUverbsDestroyAh = "ib_uverbs_destroy_ah", size 4 {
        pub ah_handle: u32,
    }

    /// `IB_USER_VERBS_CMD_ATTACH_MCAST` (no response). Followed by driver data
    /// (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsAttachMcast = "ib_uverbs_attach_mcast", size 24 {
        pub gid: [u8; 16],
        pub qp_handle: u32,
        pub mlid: u16,
        pub reserved: u16,
    }

    /// `IB_USER_VERBS_CMD_DETACH_MCAST` (no response). Followed by driver data
    /// (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsDetachMcast = "ib_uverbs_detach_mcast", size 24 {
        pub gid: [u8; 16],
        pub qp_handle: u32,
        pub mlid: u16,
        pub reserved: u16,
    }

    /// `IB_USER_VERBS_CMD_CREATE_SRQ`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsCreateSrq = "ib_uverbs_create_srq", size 32 {
        pub response: u64,
        pub user_handle: u64,
        pub pd_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub srq_limit: u32,
    }

    /// `IB_USER_VERBS_CMD_CREATE_XSRQ` (SRQ of any type: basic, XRC, tag matching). Followed by
    /// driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsCreateXsrq = "ib_uverbs_create_xsrq", size 48 {
        pub response: u64,
        pub user_handle: u64,
        /// `IB_UVERBS_SRQT_*` of [`crate::verbs`].
        pub srq_type: u32,
        pub pd_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub srq_limit: u32,
        pub max_num_tags: u32,
        pub xrcd_handle: u32,
        pub cq_handle: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_CREATE_SRQ` / `CREATE_XSRQ`. Followed by driver data
    /// (`__u32 driver_data[]`).
    pub struct IbUverbsCreateSrqResp = "ib_uverbs_create_srq_resp", size 16 {
        pub srq_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        /// SRQ number (XRC SRQs).
        pub srqn: u32,
    }

    /// `IB_USER_VERBS_CMD_MODIFY_SRQ` (no response). Followed by driver data
    /// (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsModifySrq = "ib_uverbs_modify_srq", size 16 {
        pub srq_handle: u32,
        /// `IB_SRQ_MAX_WR` / `IB_SRQ_LIMIT` of [`crate::verbs`].
        pub attr_mask: u32,
        pub max_wr: u32,
        pub srq_limit: u32,
    }

    /// `IB_USER_VERBS_CMD_QUERY_SRQ`. Followed by driver data (`__aligned_u64 driver_data[]`).
    #[repr(align(8))]
    pub struct IbUverbsQuerySrq = "ib_uverbs_query_srq", size 16 {
        pub response: u64,
        pub srq_handle: u32,
        pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_QUERY_SRQ`.
    pub struct IbUverbsQuerySrqResp = "ib_uverbs_query_srq_resp", size 16 {
        pub max_wr: u32,
        pub max_sge: u32,
        pub srq_limit: u32,
        pub reserved: u32,
    }

    /// `IB_USER_VERBS_CMD_DESTROY_SRQ`.
    #[repr(align(8))]
    pub struct IbUverbsDestroySrq = "ib_uverbs_destroy_srq", size 16 {
        pub response: u64,
        pub srq_handle: u32,
        pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_CMD_DESTROY_SRQ`.
    pub struct IbUverbsDestroySrqResp = "ib_uverbs_destroy_srq_resp", size 4 {
        pub events_reported: u32,
    }

    /// `IB_USER_VERBS_EX_CMD_CREATE_WQ` (extended command).
    #[repr(align(8))]
    pub struct IbUverbsExCreateWq = "ib_uverbs_ex_create_wq", size 40 {
        pub comp_mask: u32,
        /// `IB_UVERBS_WQT_*` of [`crate::verbs`].
        pub wq_type: u32,
        pub user_handle: u64,
        pub pd_handle: u32,
        pub cq_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        /// `IB_UVERBS_WQ_FLAGS_*` of [`crate::verbs`].
        pub create_flags: u32,
        pub reserved: u32,
    }

    /// Response of `IB_USER_VERBS_EX_CMD_CREATE_WQ`.
    pub struct IbUverbsExCreateWqResp = "ib_uverbs_ex_create_wq_resp", size 24 {
        pub comp_mask: u32,
        pub response_length: u32,
        pub wq_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub wqn: u32,
    }

    /// `IB_USER_VERBS_EX_CMD_DESTROY_WQ` (extended command).
    pub struct IbUverbsExDestroyWq = "ib_uverbs_ex_destroy_wq", size 8 {
        pub comp_mask: u32,
        pub wq_handle: u32,
    }

    /// Response of `IB_USER_VERBS_EX_CMD_DESTROY_WQ`.
    pub struct IbUverbsExDestroyWqResp = "ib_uverbs_ex_destroy_wq_resp", size 16 {
        pub comp_mask: u32,
        pub response_length: u32,
        pub events_reported: u32,
        pub reserved: u32,
    }

    /// `IB_USER_VERBS_EX_CMD_MODIFY_WQ` (extended command).
    pub struct IbUverbsExModifyWq = "ib_uverbs_ex_modify_wq", size 24 {
        pub attr_mask: u32,
        pub wq_handle: u32,
        pub wq_state: u32,
        pub curr_wq_state: u32,
        /// `IB_UVERBS_WQ_FLAGS_*` of [`crate::verbs`].
        pub flags: u32,
        pub flags_mask: u32,
    }

    /// `IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL`: followed by `1 << log_ind_tbl_size` WQ
    /// handles (`__u32 wq_handles[]`), padded to 8 bytes.
    pub struct IbUverbsExCreateRwqIndTable = "ib_uverbs_ex_create_rwq_ind_table", size 8 {
        pub comp_mask: u32,
        pub log_ind_tbl_size: u32,
    }

    /// Response of `IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL`.
    pub struct IbUverbsExCreateRwqIndTableResp = "ib_uverbs_ex_create_rwq_ind_table_resp", size 16 {
        pub comp_mask: u32,
        pub response_length: u32,
        pub ind_tbl_handle: u32,
        pub ind_tbl_num: u32,
    }

    /// `IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL` (extended command).
    pub struct IbUverbsExDestroyRwqIndTable = "ib_uverbs_ex_destroy_rwq_ind_table", size 8 {
        pub comp_mask: u32,
        pub ind_tbl_handle: u32,
    }

    /// CQ moderation parameters of `EX_MODIFY_CQ`.
    pub struct IbUverbsCqModeration = "ib_uverbs_cq_moderation", size 4 {
        pub cq_count: u16,
        pub cq_period: u16,
    }

    /// `IB_USER_VERBS_EX_CMD_MODIFY_CQ` (extended command).
    pub struct IbUverbsExModifyCq = "ib_uverbs_ex_modify_cq", size 16 {
        pub cq_handle: u32,
        /// `IB_CQ_MODERATE` of [`crate::verbs`].
        pub attr_mask: u32,
        pub attr: IbUverbsCqModeration,
        pub reserved: u32,
    }

    /// Timecounter state some drivers map read-only for converting completion timestamps.
    /// Newer than the 6.1 headers.
    #[repr(align(8))]
    pub struct IbUverbsClockInfo = "ib_uverbs_clock_info", size 56 {
        /// Sequence counter: odd while the kernel updates; re-read if it changed.
        pub sign: u32,
        pub resv: u32,
        pub nsec: u64,
        pub cycles: u64,
        pub frac: u64,
        pub mult: u32,
        pub shift: u32,
        pub mask: u64,
        pub overflow_period: u64,
    }
}

/// `wr.rdma` padded to the 32 bytes of the `wr` union, so converting is a plain transmute.
#[derive(Clone, Copy, FromBytes, IntoBytes, zerocopy::Immutable)]
#[repr(C)]
struct SendWrRdmaPadded {
    v: IbUverbsSendWrRdma,
    pad: [u8; 16],
}

/// `wr.ud` padded to the 32 bytes of the `wr` union.
#[derive(Clone, Copy, FromBytes, IntoBytes, zerocopy::Immutable)]
#[repr(C)]
struct SendWrUdPadded {
    v: IbUverbsSendWrUd,
    pad: [u8; 16],
}

impl IbUverbsWc {
    /// `ex.imm_data` (`__be32`; `.get()` gives the host-order value).
    pub fn imm_data(&self) -> big_endian::U32 {
        big_endian::U32::from_bytes(self.ex)
    }

    /// `ex.invalidate_rkey` (host order).
    pub const fn invalidate_rkey(&self) -> u32 {
        u32::from_ne_bytes(self.ex)
    }
}

impl IbUverbsSendWr {
    /// `ex.imm_data` (`__be32`).
    pub fn imm_data(&self) -> big_endian::U32 {
        big_endian::U32::from_bytes(self.ex)
    }

    /// Sets `ex.imm_data`.
    pub fn set_imm_data(&mut self, imm_data: big_endian::U32) {
        self.ex = imm_data.to_bytes();
    }

    /// `ex.invalidate_rkey` (host order).
    pub const fn invalidate_rkey(&self) -> u32 {
        u32::from_ne_bytes(self.ex)
    }

    /// Sets `ex.invalidate_rkey`.
    pub fn set_invalidate_rkey(&mut self, rkey: u32) {
        self.ex = rkey.to_ne_bytes();
    }

    /// Reads the `wr` union as `wr.rdma`.
    pub fn rdma(&self) -> IbUverbsSendWrRdma {
        let padded: SendWrRdmaPadded = zerocopy::transmute!(self.wr);
        padded.v
    }

    /// Writes `wr.rdma` (the rest of the union is zeroed).
    pub fn set_rdma(&mut self, rdma: IbUverbsSendWrRdma) {
        self.wr = zerocopy::transmute!(SendWrRdmaPadded {
            v: rdma,
            pad: [0; 16]
        });
    }

    /// Reads the `wr` union as `wr.atomic`.
    pub fn atomic(&self) -> IbUverbsSendWrAtomic {
        zerocopy::transmute!(self.wr)
    }

    /// Writes `wr.atomic`.
    pub fn set_atomic(&mut self, atomic: IbUverbsSendWrAtomic) {
        self.wr = zerocopy::transmute!(atomic);
    }

    /// Reads the `wr` union as `wr.ud`.
    pub fn ud(&self) -> IbUverbsSendWrUd {
        let padded: SendWrUdPadded = zerocopy::transmute!(self.wr);
        padded.v
    }

    /// Writes `wr.ud` (the rest of the union is zeroed).
    pub fn set_ud(&mut self, ud: IbUverbsSendWrUd) {
        self.wr = zerocopy::transmute!(SendWrUdPadded {
            v: ud,
            pad: [0; 16]
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn send_wr_union_accessors_place_fields_like_c() {
        let mut wr = IbUverbsSendWr::default();
        wr.set_rdma(IbUverbsSendWrRdma {
            remote_addr: 0x1122_3344_5566_7788,
            rkey: 0xaabb_ccdd,
            reserved: 0,
        });
        // wr union starts at byte 24 of the struct; remote_addr first, rkey at +8.
        let b = wr.as_bytes();
        assert_eq!(&b[24..32], &0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(&b[32..36], &0xaabb_ccddu32.to_ne_bytes());
        assert_eq!(wr.rdma().rkey, 0xaabb_ccdd);

        wr.set_ud(IbUverbsSendWrUd {
            ah: 7,
            remote_qpn: 0x12_3456,
            remote_qkey: 0x1111_1111,
            reserved: 0,
        });
        assert_eq!(wr.ud().remote_qpn, 0x12_3456);
        assert_eq!(&wr.as_bytes()[28..32], &0x12_3456u32.to_ne_bytes());
        // set_ud zeroes the tail that an earlier rdma/atomic left behind.
        assert_eq!(&wr.wr[16..], &[0u8; 16]);

        wr.set_atomic(IbUverbsSendWrAtomic {
            remote_addr: 1,
            compare_add: 2,
            swap: 3,
            rkey: 4,
            reserved: 0,
        });
        assert_eq!(wr.atomic().swap, 3);
        assert_eq!(&wr.as_bytes()[48..52], &4u32.to_ne_bytes());
    }

    #[test]
    fn imm_data_is_network_order() {
        let mut wr = IbUverbsSendWr::default();
        wr.set_imm_data(big_endian::U32::new(0x0102_0304));
        assert_eq!(wr.ex, [1, 2, 3, 4]);
        assert_eq!(wr.imm_data().get(), 0x0102_0304);
        let wc = IbUverbsWc {
            ex: [1, 2, 3, 4],
            ..Default::default()
        };
        assert_eq!(wc.imm_data().get(), 0x0102_0304);
        assert_eq!(wc.invalidate_rkey(), u32::from_ne_bytes([1, 2, 3, 4]));
    }
}
