//! Compares every `uverbs_uapi` struct (size, alignment, each field's offset and size) and
//! every constant of the `ioctl`, `cmds`, `write` and `verbs` modules with the kernel uapi
//! headers installed on this machine (`/usr/include/rdma`, linux-libc-dev), by compiling and
//! running a generated C program. See `common/mod.rs` for the mechanism and the environment
//! variables (`UVERBS_C_LAYOUT_INCLUDE=/work/ref/rdma-core/kernel-headers` checks against the
//! newest uapi instead; `UVERBS_SKIP_C_LAYOUT=1` is the only way to skip).
//!
//! Adding a struct or constant is one line: `check_struct!(l, Type, "struct c_name", fields..)`
//! / `check_const!(l, NAME)`. Items newer than Linux 6.1's headers are marked `newer` and are
//! reported by name as "not checked: newer than installed headers" when absent.

#[macro_use]
mod common;

use uverbs_uapi::cmds::*;
use uverbs_uapi::ioctl::*;
use uverbs_uapi::verbs::*;
use uverbs_uapi::write::*;

const HEADERS: &[&str] = &[
    "rdma/rdma_user_ioctl_cmds.h",
    "rdma/rdma_user_ioctl.h",
    "rdma/ib_user_ioctl_cmds.h",
    "rdma/ib_user_ioctl_verbs.h",
    "rdma/ib_user_verbs.h",
    "rdma/rdma_netlink.h",
];

#[test]
#[rustfmt::skip] // one line per struct / constant: the table is meant to be read and extended by line
fn core_uapi_matches_c_headers() {
    let mut layout = common::Layout::new(HEADERS);
    let l = &mut layout;
    // ---- ioctl ----
    check_struct!(l, IbUverbsAttr, "struct ib_uverbs_attr", attr_id, len, flags, attr_data, data);
    check_struct!(l, IbUverbsIoctlHdr, "struct ib_uverbs_ioctl_hdr", length, object_id, method_id, num_attrs, reserved1, driver_id, reserved2);
    // ioctl constants
    check_const!(l, RDMA_IOCTL_MAGIC);
    check_const!(l, IB_IOCTL_MAGIC);
    check_const!(l, RDMA_VERBS_IOCTL);
    check_const!(l, UVERBS_ATTR_F_MANDATORY);
    check_const!(l, UVERBS_ATTR_F_VALID_OUTPUT);
    check_const!(l, RDMA_DRIVER_UNKNOWN);
    check_const!(l, RDMA_DRIVER_MLX5);
    check_const!(l, RDMA_DRIVER_MLX4);
    check_const!(l, RDMA_DRIVER_CXGB3);
    check_const!(l, RDMA_DRIVER_CXGB4);
    check_const!(l, RDMA_DRIVER_MTHCA);
    check_const!(l, RDMA_DRIVER_BNXT_RE);
    check_const!(l, RDMA_DRIVER_OCRDMA);
    check_const!(l, RDMA_DRIVER_NES);
    check_const!(l, RDMA_DRIVER_I40IW);
    check_const!(l, RDMA_DRIVER_IRDMA);
    check_const!(l, RDMA_DRIVER_VMW_PVRDMA);
    check_const!(l, RDMA_DRIVER_QEDR);
    check_const!(l, RDMA_DRIVER_HNS);
    check_const!(l, RDMA_DRIVER_USNIC);
    check_const!(l, RDMA_DRIVER_RXE);
    check_const!(l, RDMA_DRIVER_HFI1);
    check_const!(l, RDMA_DRIVER_QIB);
    check_const!(l, RDMA_DRIVER_EFA);
    check_const!(l, RDMA_DRIVER_SIW);
    check_const!(l, RDMA_DRIVER_ERDMA);
    check_const!(l, newer RDMA_DRIVER_MANA);
    check_const!(l, newer RDMA_DRIVER_IONIC);
    // ---- cmds ----
    // cmds constants
    check_const!(l, UVERBS_ID_NS_MASK);
    check_const!(l, UVERBS_ID_NS_SHIFT);
    check_const!(l, older UVERBS_UDATA_DRIVER_DATA_NS);
    check_const!(l, older UVERBS_UDATA_DRIVER_DATA_FLAG);
    check_const!(l, UVERBS_OBJECT_DEVICE);
    check_const!(l, UVERBS_OBJECT_PD);
    check_const!(l, UVERBS_OBJECT_COMP_CHANNEL);
    check_const!(l, UVERBS_OBJECT_CQ);
    check_const!(l, UVERBS_OBJECT_QP);
    check_const!(l, UVERBS_OBJECT_SRQ);
    check_const!(l, UVERBS_OBJECT_AH);
    check_const!(l, UVERBS_OBJECT_MR);
    check_const!(l, UVERBS_OBJECT_MW);
    check_const!(l, UVERBS_OBJECT_FLOW);
    check_const!(l, UVERBS_OBJECT_XRCD);
    check_const!(l, UVERBS_OBJECT_RWQ_IND_TBL);
    check_const!(l, UVERBS_OBJECT_WQ);
    check_const!(l, UVERBS_OBJECT_FLOW_ACTION);
    check_const!(l, UVERBS_OBJECT_DM);
    check_const!(l, UVERBS_OBJECT_COUNTERS);
    check_const!(l, UVERBS_OBJECT_ASYNC_EVENT);
    check_const!(l, newer UVERBS_OBJECT_DMAH);
    check_const!(l, newer UVERBS_OBJECT_DMABUF);
    check_const!(l, newer UVERBS_OBJECT_COMP_CNTR);
    check_const!(l, newer UVERBS_ID_DRIVER_NS);
    check_const!(l, UVERBS_ATTR_UHW_IN);
    check_const!(l, UVERBS_ATTR_UHW_OUT);
    check_const!(l, newer UVERBS_ID_DRIVER_NS_WITH_UHW);
    check_const!(l, UVERBS_METHOD_INVOKE_WRITE);
    check_const!(l, UVERBS_METHOD_INFO_HANDLES);
    check_const!(l, UVERBS_METHOD_QUERY_PORT);
    check_const!(l, UVERBS_METHOD_GET_CONTEXT);
    check_const!(l, UVERBS_METHOD_QUERY_CONTEXT);
    check_const!(l, UVERBS_METHOD_QUERY_GID_TABLE);
    check_const!(l, UVERBS_METHOD_QUERY_GID_ENTRY);
    check_const!(l, newer UVERBS_METHOD_QUERY_PORT_SPEED);
    check_const!(l, newer UVERBS_METHOD_QUERY_COMP_CNTR_CAPS);
    check_const!(l, UVERBS_ATTR_CORE_IN);
    check_const!(l, UVERBS_ATTR_CORE_OUT);
    check_const!(l, UVERBS_ATTR_WRITE_CMD);
    check_const!(l, UVERBS_ATTR_QUERY_PORT_PORT_NUM);
    check_const!(l, UVERBS_ATTR_QUERY_PORT_RESP);
    check_const!(l, newer UVERBS_ATTR_QUERY_PORT_SPEED_PORT_NUM);
    check_const!(l, newer UVERBS_ATTR_QUERY_PORT_SPEED_RESP);
    check_const!(l, newer UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_COUNTERS);
    check_const!(l, newer UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_VALUE);
    check_const!(l, newer UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_SUPPORTED_QP_ATTACH_OPS);
    check_const!(l, UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS);
    check_const!(l, UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT);
    check_const!(l, newer UVERBS_ATTR_GET_CONTEXT_FD_ARR);
    check_const!(l, UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS);
    check_const!(l, UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT);
    check_const!(l, UVERBS_ATTR_CREATE_CQ_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_CQ_CQE);
    check_const!(l, UVERBS_ATTR_CREATE_CQ_USER_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL);
    check_const!(l, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR);
    check_const!(l, UVERBS_ATTR_CREATE_CQ_FLAGS);
    check_const!(l, UVERBS_ATTR_CREATE_CQ_RESP_CQE);
    check_const!(l, UVERBS_ATTR_CREATE_CQ_EVENT_FD);
    check_const!(l, newer UVERBS_ATTR_CREATE_CQ_BUFFER_VA);
    check_const!(l, newer UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH);
    check_const!(l, newer UVERBS_ATTR_CREATE_CQ_BUFFER_FD);
    check_const!(l, newer UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET);
    check_const!(l, newer UVERBS_ATTR_CREATE_CQ_BUF_UMEM);
    check_const!(l, UVERBS_ATTR_DESTROY_CQ_HANDLE);
    check_const!(l, UVERBS_ATTR_DESTROY_CQ_RESP);
    check_const!(l, UVERBS_ATTR_CREATE_FLOW_ACTION_ESP_HANDLE);
    check_const!(l, UVERBS_ATTR_FLOW_ACTION_ESP_ATTRS);
    check_const!(l, UVERBS_ATTR_FLOW_ACTION_ESP_ESN);
    check_const!(l, UVERBS_ATTR_FLOW_ACTION_ESP_KEYMAT);
    check_const!(l, UVERBS_ATTR_FLOW_ACTION_ESP_REPLAY);
    check_const!(l, UVERBS_ATTR_FLOW_ACTION_ESP_ENCAP);
    check_const!(l, UVERBS_ATTR_MODIFY_FLOW_ACTION_ESP_HANDLE);
    check_const!(l, UVERBS_ATTR_DESTROY_FLOW_ACTION_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_XRCD_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_PD_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_SRQ_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_USER_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_CAP);
    check_const!(l, UVERBS_ATTR_CREATE_QP_TYPE);
    check_const!(l, UVERBS_ATTR_CREATE_QP_FLAGS);
    check_const!(l, UVERBS_ATTR_CREATE_QP_SOURCE_QPN);
    check_const!(l, UVERBS_ATTR_CREATE_QP_EVENT_FD);
    check_const!(l, UVERBS_ATTR_CREATE_QP_RESP_CAP);
    check_const!(l, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM);
    check_const!(l, newer UVERBS_ATTR_CREATE_QP_BUF_UMEM);
    check_const!(l, newer UVERBS_ATTR_CREATE_QP_RQ_BUF_UMEM);
    check_const!(l, newer UVERBS_ATTR_CREATE_QP_SQ_BUF_UMEM);
    check_const!(l, UVERBS_ATTR_DESTROY_QP_HANDLE);
    check_const!(l, UVERBS_ATTR_DESTROY_QP_RESP);
    check_const!(l, newer UVERBS_ATTR_QP_ATTACH_COMP_CNTR_HANDLE);
    check_const!(l, newer UVERBS_ATTR_QP_ATTACH_COMP_CNTR_CNTR_HANDLE);
    check_const!(l, newer UVERBS_ATTR_QP_ATTACH_COMP_CNTR_OP_MASK);
    check_const!(l, UVERBS_METHOD_QP_CREATE);
    check_const!(l, UVERBS_METHOD_QP_DESTROY);
    check_const!(l, newer UVERBS_METHOD_QP_ATTACH_COMP_CNTR);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_PD_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_USER_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_MAX_WR);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_MAX_SGE);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_LIMIT);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_TYPE);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_EVENT_FD);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE);
    check_const!(l, UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM);
    check_const!(l, UVERBS_ATTR_DESTROY_SRQ_HANDLE);
    check_const!(l, UVERBS_ATTR_DESTROY_SRQ_RESP);
    check_const!(l, UVERBS_METHOD_SRQ_CREATE);
    check_const!(l, UVERBS_METHOD_SRQ_DESTROY);
    check_const!(l, UVERBS_METHOD_CQ_CREATE);
    check_const!(l, UVERBS_METHOD_CQ_DESTROY);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_PD_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_CQ_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_USER_HANDLE);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_TYPE);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_EVENT_FD);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_MAX_WR);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_MAX_SGE);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_FLAGS);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_RESP_MAX_WR);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_RESP_MAX_SGE);
    check_const!(l, UVERBS_ATTR_CREATE_WQ_RESP_WQ_NUM);
    check_const!(l, UVERBS_ATTR_DESTROY_WQ_HANDLE);
    check_const!(l, UVERBS_ATTR_DESTROY_WQ_RESP);
    check_const!(l, UVERBS_METHOD_WQ_CREATE);
    check_const!(l, UVERBS_METHOD_WQ_DESTROY);
    check_const!(l, UVERBS_METHOD_FLOW_ACTION_ESP_CREATE);
    check_const!(l, UVERBS_METHOD_FLOW_ACTION_DESTROY);
    check_const!(l, UVERBS_METHOD_FLOW_ACTION_ESP_MODIFY);
    check_const!(l, UVERBS_ATTR_ALLOC_DM_HANDLE);
    check_const!(l, UVERBS_ATTR_ALLOC_DM_LENGTH);
    check_const!(l, UVERBS_ATTR_ALLOC_DM_ALIGNMENT);
    check_const!(l, UVERBS_ATTR_FREE_DM_HANDLE);
    check_const!(l, UVERBS_METHOD_DM_ALLOC);
    check_const!(l, UVERBS_METHOD_DM_FREE);
    check_const!(l, newer UVERBS_ATTR_ALLOC_DMAH_HANDLE);
    check_const!(l, newer UVERBS_ATTR_ALLOC_DMAH_CPU_ID);
    check_const!(l, newer UVERBS_ATTR_ALLOC_DMAH_TPH_MEM_TYPE);
    check_const!(l, newer UVERBS_ATTR_ALLOC_DMAH_PH);
    check_const!(l, newer UVERBS_ATTR_FREE_DMA_HANDLE);
    check_const!(l, newer UVERBS_METHOD_DMAH_ALLOC);
    check_const!(l, newer UVERBS_METHOD_DMAH_FREE);
    check_const!(l, newer UVERBS_ATTR_ALLOC_DMABUF_HANDLE);
    check_const!(l, newer UVERBS_ATTR_ALLOC_DMABUF_PGOFF);
    check_const!(l, newer UVERBS_METHOD_DMABUF_ALLOC);
    check_const!(l, UVERBS_ATTR_REG_DM_MR_HANDLE);
    check_const!(l, UVERBS_ATTR_REG_DM_MR_OFFSET);
    check_const!(l, UVERBS_ATTR_REG_DM_MR_LENGTH);
    check_const!(l, UVERBS_ATTR_REG_DM_MR_PD_HANDLE);
    check_const!(l, UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS);
    check_const!(l, UVERBS_ATTR_REG_DM_MR_DM_HANDLE);
    check_const!(l, UVERBS_ATTR_REG_DM_MR_RESP_LKEY);
    check_const!(l, UVERBS_ATTR_REG_DM_MR_RESP_RKEY);
    check_const!(l, UVERBS_METHOD_DM_MR_REG);
    check_const!(l, UVERBS_METHOD_MR_DESTROY);
    check_const!(l, UVERBS_METHOD_ADVISE_MR);
    check_const!(l, UVERBS_METHOD_QUERY_MR);
    check_const!(l, UVERBS_METHOD_REG_DMABUF_MR);
    check_const!(l, newer UVERBS_METHOD_REG_MR);
    check_const!(l, UVERBS_ATTR_DESTROY_MR_HANDLE);
    check_const!(l, UVERBS_ATTR_ADVISE_MR_PD_HANDLE);
    check_const!(l, UVERBS_ATTR_ADVISE_MR_ADVICE);
    check_const!(l, UVERBS_ATTR_ADVISE_MR_FLAGS);
    check_const!(l, UVERBS_ATTR_ADVISE_MR_SGE_LIST);
    check_const!(l, UVERBS_ATTR_QUERY_MR_HANDLE);
    check_const!(l, UVERBS_ATTR_QUERY_MR_RESP_LKEY);
    check_const!(l, UVERBS_ATTR_QUERY_MR_RESP_RKEY);
    check_const!(l, UVERBS_ATTR_QUERY_MR_RESP_LENGTH);
    check_const!(l, UVERBS_ATTR_QUERY_MR_RESP_IOVA);
    check_const!(l, UVERBS_ATTR_REG_DMABUF_MR_HANDLE);
    check_const!(l, UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE);
    check_const!(l, UVERBS_ATTR_REG_DMABUF_MR_OFFSET);
    check_const!(l, UVERBS_ATTR_REG_DMABUF_MR_LENGTH);
    check_const!(l, UVERBS_ATTR_REG_DMABUF_MR_IOVA);
    check_const!(l, UVERBS_ATTR_REG_DMABUF_MR_FD);
    check_const!(l, UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS);
    check_const!(l, UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY);
    check_const!(l, UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY);
    check_const!(l, newer UVERBS_ATTR_REG_MR_HANDLE);
    check_const!(l, newer UVERBS_ATTR_REG_MR_PD_HANDLE);
    check_const!(l, newer UVERBS_ATTR_REG_MR_DMA_HANDLE);
    check_const!(l, newer UVERBS_ATTR_REG_MR_IOVA);
    check_const!(l, newer UVERBS_ATTR_REG_MR_ADDR);
    check_const!(l, newer UVERBS_ATTR_REG_MR_LENGTH);
    check_const!(l, newer UVERBS_ATTR_REG_MR_ACCESS_FLAGS);
    check_const!(l, newer UVERBS_ATTR_REG_MR_FD);
    check_const!(l, newer UVERBS_ATTR_REG_MR_FD_OFFSET);
    check_const!(l, newer UVERBS_ATTR_REG_MR_RESP_LKEY);
    check_const!(l, newer UVERBS_ATTR_REG_MR_RESP_RKEY);
    check_const!(l, UVERBS_ATTR_CREATE_COUNTERS_HANDLE);
    check_const!(l, UVERBS_ATTR_DESTROY_COUNTERS_HANDLE);
    check_const!(l, UVERBS_ATTR_READ_COUNTERS_HANDLE);
    check_const!(l, UVERBS_ATTR_READ_COUNTERS_BUFF);
    check_const!(l, UVERBS_ATTR_READ_COUNTERS_FLAGS);
    check_const!(l, UVERBS_METHOD_COUNTERS_CREATE);
    check_const!(l, UVERBS_METHOD_COUNTERS_DESTROY);
    check_const!(l, UVERBS_METHOD_COUNTERS_READ);
    check_const!(l, UVERBS_ATTR_INFO_OBJECT_ID);
    check_const!(l, UVERBS_ATTR_INFO_TOTAL_HANDLES);
    check_const!(l, UVERBS_ATTR_INFO_HANDLES_LIST);
    check_const!(l, UVERBS_METHOD_PD_DESTROY);
    check_const!(l, UVERBS_ATTR_DESTROY_PD_HANDLE);
    check_const!(l, UVERBS_METHOD_MW_DESTROY);
    check_const!(l, UVERBS_ATTR_DESTROY_MW_HANDLE);
    check_const!(l, UVERBS_METHOD_XRCD_DESTROY);
    check_const!(l, UVERBS_ATTR_DESTROY_XRCD_HANDLE);
    check_const!(l, UVERBS_METHOD_AH_DESTROY);
    check_const!(l, UVERBS_ATTR_DESTROY_AH_HANDLE);
    check_const!(l, UVERBS_METHOD_RWQ_IND_TBL_DESTROY);
    check_const!(l, UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE);
    check_const!(l, UVERBS_METHOD_FLOW_DESTROY);
    check_const!(l, UVERBS_ATTR_DESTROY_FLOW_HANDLE);
    check_const!(l, UVERBS_METHOD_ASYNC_EVENT_ALLOC);
    check_const!(l, UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE);
    check_const!(l, UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE);
    check_const!(l, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS);
    check_const!(l, UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES);
    check_const!(l, UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES);
    check_const!(l, UVERBS_ATTR_QUERY_GID_ENTRY_PORT);
    check_const!(l, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX);
    check_const!(l, UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS);
    check_const!(l, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY);
    check_const!(l, newer UVERBS_METHOD_COMP_CNTR_CREATE);
    check_const!(l, newer UVERBS_METHOD_COMP_CNTR_DESTROY);
    check_const!(l, newer UVERBS_METHOD_COMP_CNTR_MODIFY);
    check_const!(l, newer UVERBS_METHOD_COMP_CNTR_READ);
    check_const!(l, newer UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE);
    check_const!(l, newer UVERBS_ATTR_DESTROY_COMP_CNTR_HANDLE);
    check_const!(l, newer UVERBS_ATTR_MODIFY_COMP_CNTR_HANDLE);
    check_const!(l, newer UVERBS_ATTR_MODIFY_COMP_CNTR_ENTRY);
    check_const!(l, newer UVERBS_ATTR_MODIFY_COMP_CNTR_OP);
    check_const!(l, newer UVERBS_ATTR_MODIFY_COMP_CNTR_VALUE);
    check_const!(l, newer UVERBS_ATTR_READ_COMP_CNTR_HANDLE);
    check_const!(l, newer UVERBS_ATTR_READ_COMP_CNTR_ENTRY);
    check_const!(l, newer UVERBS_ATTR_READ_COMP_CNTR_RESP_VALUE);
    // ---- write ----
    check_struct!(l, IbUverbsAsyncEventDesc, "struct ib_uverbs_async_event_desc", element, event_type, reserved);
    check_struct!(l, IbUverbsCompEventDesc, "struct ib_uverbs_comp_event_desc", cq_handle);
    check_struct!(l, IbUverbsCqModerationCaps, "struct ib_uverbs_cq_moderation_caps", max_cq_moderation_count, max_cq_moderation_period, reserved);
    check_struct!(l, IbUverbsCmdHdr, "struct ib_uverbs_cmd_hdr", command, in_words, out_words);
    check_struct!(l, IbUverbsExCmdHdr, "struct ib_uverbs_ex_cmd_hdr", response, provider_in_words, provider_out_words, cmd_hdr_reserved);
    check_struct!(l, IbUverbsGetContext, "struct ib_uverbs_get_context", response);
    check_struct!(l, IbUverbsGetContextResp, "struct ib_uverbs_get_context_resp", async_fd, num_comp_vectors);
    check_struct!(l, IbUverbsQueryDevice, "struct ib_uverbs_query_device", response);
    check_struct!(l, IbUverbsQueryDeviceResp, "struct ib_uverbs_query_device_resp", fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id, vendor_part_id, hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd, max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom, max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt, reserved);
    check_struct!(l, IbUverbsExQueryDevice, "struct ib_uverbs_ex_query_device", comp_mask, reserved);
    check_struct!(l, IbUverbsOdpCapsPerTransportCaps, "__typeof__(((struct ib_uverbs_odp_caps *)0)->per_transport_caps)", rc_odp_caps, uc_odp_caps, ud_odp_caps);
    check_struct!(l, IbUverbsOdpCaps, "struct ib_uverbs_odp_caps", general_caps, per_transport_caps, reserved);
    check_struct!(l, IbUverbsRssCaps, "struct ib_uverbs_rss_caps", supported_qpts, max_rwq_indirection_tables, max_rwq_indirection_table_size, reserved);
    check_struct!(l, IbUverbsTmCaps, "struct ib_uverbs_tm_caps", max_rndv_hdr_size, max_num_tags, flags, max_ops, max_sge, reserved);
    check_struct!(l, IbUverbsExQueryDeviceResp, "struct ib_uverbs_ex_query_device_resp", base, comp_mask, response_length, odp_caps, timestamp_mask, hca_core_clock, device_cap_flags_ex, rss_caps, max_wq_type_rq, raw_packet_caps, tm_caps, cq_moderation_caps, max_dm_size, xrc_odp_caps, reserved);
    check_struct!(l, IbUverbsQueryPort, "struct ib_uverbs_query_port", response, port_num, reserved);
    check_struct!(l, IbUverbsQueryPortResp, "struct ib_uverbs_query_port_resp", port_cap_flags, max_msg_sz, bad_pkey_cntr, qkey_viol_cntr, gid_tbl_len, pkey_tbl_len, lid, sm_lid, state, max_mtu, active_mtu, lmc, max_vl_num, sm_sl, subnet_timeout, init_type_reply, active_width, active_speed, phys_state, link_layer, flags, reserved);
    check_struct!(l, IbUverbsAllocPd, "struct ib_uverbs_alloc_pd", response);
    check_struct!(l, IbUverbsAllocPdResp, "struct ib_uverbs_alloc_pd_resp", pd_handle);
    check_struct!(l, IbUverbsDeallocPd, "struct ib_uverbs_dealloc_pd", pd_handle);
    check_struct!(l, IbUverbsOpenXrcd, "struct ib_uverbs_open_xrcd", response, fd, oflags);
    check_struct!(l, IbUverbsOpenXrcdResp, "struct ib_uverbs_open_xrcd_resp", xrcd_handle);
    check_struct!(l, IbUverbsCloseXrcd, "struct ib_uverbs_close_xrcd", xrcd_handle);
    check_struct!(l, IbUverbsRegMr, "struct ib_uverbs_reg_mr", response, start, length, hca_va, pd_handle, access_flags);
    check_struct!(l, IbUverbsRegMrResp, "struct ib_uverbs_reg_mr_resp", mr_handle, lkey, rkey);
    check_struct!(l, IbUverbsReregMr, "struct ib_uverbs_rereg_mr", response, mr_handle, flags, start, length, hca_va, pd_handle, access_flags);
    check_struct!(l, IbUverbsReregMrResp, "struct ib_uverbs_rereg_mr_resp", lkey, rkey);
    check_struct!(l, IbUverbsDeregMr, "struct ib_uverbs_dereg_mr", mr_handle);
    check_struct!(l, IbUverbsAllocMw, "struct ib_uverbs_alloc_mw", response, pd_handle, mw_type, reserved);
    check_struct!(l, IbUverbsAllocMwResp, "struct ib_uverbs_alloc_mw_resp", mw_handle, rkey);
    check_struct!(l, IbUverbsDeallocMw, "struct ib_uverbs_dealloc_mw", mw_handle);
    check_struct!(l, IbUverbsCreateCompChannel, "struct ib_uverbs_create_comp_channel", response);
    check_struct!(l, IbUverbsCreateCompChannelResp, "struct ib_uverbs_create_comp_channel_resp", fd);
    check_struct!(l, IbUverbsCreateCq, "struct ib_uverbs_create_cq", response, user_handle, cqe, comp_vector, comp_channel, reserved);
    check_struct!(l, IbUverbsExCreateCq, "struct ib_uverbs_ex_create_cq", user_handle, cqe, comp_vector, comp_channel, comp_mask, flags, reserved);
    check_struct!(l, IbUverbsCreateCqResp, "struct ib_uverbs_create_cq_resp", cq_handle, cqe);
    check_struct!(l, IbUverbsExCreateCqResp, "struct ib_uverbs_ex_create_cq_resp", base, comp_mask, response_length);
    check_struct!(l, IbUverbsResizeCq, "struct ib_uverbs_resize_cq", response, cq_handle, cqe);
    check_struct!(l, IbUverbsResizeCqResp, "struct ib_uverbs_resize_cq_resp", cqe, reserved);
    check_struct!(l, IbUverbsPollCq, "struct ib_uverbs_poll_cq", response, cq_handle, ne);
    check_struct!(l, IbUverbsWc, "struct ib_uverbs_wc", wr_id, status, opcode, vendor_err, byte_len, ex, qp_num, src_qp, wc_flags, pkey_index, slid, sl, dlid_path_bits, port_num, reserved);
    check_struct!(l, IbUverbsPollCqResp, "struct ib_uverbs_poll_cq_resp", count, reserved);
    check_struct!(l, IbUverbsReqNotifyCq, "struct ib_uverbs_req_notify_cq", cq_handle, solicited_only);
    check_struct!(l, IbUverbsDestroyCq, "struct ib_uverbs_destroy_cq", response, cq_handle, reserved);
    check_struct!(l, IbUverbsDestroyCqResp, "struct ib_uverbs_destroy_cq_resp", comp_events_reported, async_events_reported);
    check_struct!(l, IbUverbsGlobalRoute, "struct ib_uverbs_global_route", dgid, flow_label, sgid_index, hop_limit, traffic_class, reserved);
    check_struct!(l, IbUverbsAhAttr, "struct ib_uverbs_ah_attr", grh, dlid, sl, src_path_bits, static_rate, is_global, port_num, reserved);
    check_struct!(l, IbUverbsQpAttr, "struct ib_uverbs_qp_attr", qp_attr_mask, qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags, ah_attr, alt_ah_attr, max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data, pkey_index, alt_pkey_index, en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout, reserved);
    check_struct!(l, IbUverbsCreateQp, "struct ib_uverbs_create_qp", response, user_handle, pd_handle, send_cq_handle, recv_cq_handle, srq_handle, max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data, sq_sig_all, qp_type, is_srq, reserved);
    check_struct!(l, IbUverbsExCreateQp, "struct ib_uverbs_ex_create_qp", user_handle, pd_handle, send_cq_handle, recv_cq_handle, srq_handle, max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data, sq_sig_all, qp_type, is_srq, reserved, comp_mask, create_flags, rwq_ind_tbl_handle, source_qpn);
    check_struct!(l, IbUverbsOpenQp, "struct ib_uverbs_open_qp", response, user_handle, pd_handle, qpn, qp_type, reserved);
    check_struct!(l, IbUverbsCreateQpResp, "struct ib_uverbs_create_qp_resp", qp_handle, qpn, max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data, reserved);
    check_struct!(l, IbUverbsExCreateQpResp, "struct ib_uverbs_ex_create_qp_resp", base, comp_mask, response_length);
    check_struct!(l, IbUverbsQpDest, "struct ib_uverbs_qp_dest", dgid, flow_label, dlid, reserved, sgid_index, hop_limit, traffic_class, sl, src_path_bits, static_rate, is_global, port_num);
    check_struct!(l, IbUverbsQueryQp, "struct ib_uverbs_query_qp", response, qp_handle, attr_mask);
    check_struct!(l, IbUverbsQueryQpResp, "struct ib_uverbs_query_qp_resp", dest, alt_dest, max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data, qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags, pkey_index, alt_pkey_index, qp_state, cur_qp_state, path_mtu, path_mig_state, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout, sq_sig_all, reserved);
    check_struct!(l, IbUverbsModifyQp, "struct ib_uverbs_modify_qp", dest, alt_dest, qp_handle, attr_mask, qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags, pkey_index, alt_pkey_index, qp_state, cur_qp_state, path_mtu, path_mig_state, en_sqd_async_notify, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout, reserved);
    check_struct!(l, IbUverbsExModifyQp, "struct ib_uverbs_ex_modify_qp", base, rate_limit, reserved);
    check_struct!(l, IbUverbsExModifyQpResp, "struct ib_uverbs_ex_modify_qp_resp", comp_mask, response_length);
    check_struct!(l, IbUverbsDestroyQp, "struct ib_uverbs_destroy_qp", response, qp_handle, reserved);
    check_struct!(l, IbUverbsDestroyQpResp, "struct ib_uverbs_destroy_qp_resp", events_reported);
    check_struct!(l, IbUverbsSge, "struct ib_uverbs_sge", addr, length, lkey);
    check_struct!(l, IbUverbsSendWrRdma, "__typeof__(((struct ib_uverbs_send_wr *)0)->wr.rdma)", remote_addr, rkey, reserved);
    check_struct!(l, IbUverbsSendWrAtomic, "__typeof__(((struct ib_uverbs_send_wr *)0)->wr.atomic)", remote_addr, compare_add, swap, rkey, reserved);
    check_struct!(l, IbUverbsSendWrUd, "__typeof__(((struct ib_uverbs_send_wr *)0)->wr.ud)", ah, remote_qpn, remote_qkey, reserved);
    check_struct!(l, IbUverbsSendWr, "struct ib_uverbs_send_wr", wr_id, num_sge, opcode, send_flags, ex, wr);
    check_struct!(l, IbUverbsPostSend, "struct ib_uverbs_post_send", response, qp_handle, wr_count, sge_count, wqe_size);
    check_struct!(l, IbUverbsPostSendResp, "struct ib_uverbs_post_send_resp", bad_wr);
    check_struct!(l, IbUverbsRecvWr, "struct ib_uverbs_recv_wr", wr_id, num_sge, reserved);
    check_struct!(l, IbUverbsPostRecv, "struct ib_uverbs_post_recv", response, qp_handle, wr_count, sge_count, wqe_size);
    check_struct!(l, IbUverbsPostRecvResp, "struct ib_uverbs_post_recv_resp", bad_wr);
    check_struct!(l, IbUverbsPostSrqRecv, "struct ib_uverbs_post_srq_recv", response, srq_handle, wr_count, sge_count, wqe_size);
    check_struct!(l, IbUverbsPostSrqRecvResp, "struct ib_uverbs_post_srq_recv_resp", bad_wr);
    check_struct!(l, IbUverbsCreateAh, "struct ib_uverbs_create_ah", response, user_handle, pd_handle, reserved, attr);
    check_struct!(l, IbUverbsCreateAhResp, "struct ib_uverbs_create_ah_resp", ah_handle);
    check_struct!(l, IbUverbsDestroyAh, "struct ib_uverbs_destroy_ah", ah_handle);
    check_struct!(l, IbUverbsAttachMcast, "struct ib_uverbs_attach_mcast", gid, qp_handle, mlid, reserved);
    check_struct!(l, IbUverbsDetachMcast, "struct ib_uverbs_detach_mcast", gid, qp_handle, mlid, reserved);
    check_struct!(l, IbUverbsCreateSrq, "struct ib_uverbs_create_srq", response, user_handle, pd_handle, max_wr, max_sge, srq_limit);
    check_struct!(l, IbUverbsCreateXsrq, "struct ib_uverbs_create_xsrq", response, user_handle, srq_type, pd_handle, max_wr, max_sge, srq_limit, max_num_tags, xrcd_handle, cq_handle);
    check_struct!(l, IbUverbsCreateSrqResp, "struct ib_uverbs_create_srq_resp", srq_handle, max_wr, max_sge, srqn);
    check_struct!(l, IbUverbsModifySrq, "struct ib_uverbs_modify_srq", srq_handle, attr_mask, max_wr, srq_limit);
    check_struct!(l, IbUverbsQuerySrq, "struct ib_uverbs_query_srq", response, srq_handle, reserved);
    check_struct!(l, IbUverbsQuerySrqResp, "struct ib_uverbs_query_srq_resp", max_wr, max_sge, srq_limit, reserved);
    check_struct!(l, IbUverbsDestroySrq, "struct ib_uverbs_destroy_srq", response, srq_handle, reserved);
    check_struct!(l, IbUverbsDestroySrqResp, "struct ib_uverbs_destroy_srq_resp", events_reported);
    check_struct!(l, IbUverbsExCreateWq, "struct ib_uverbs_ex_create_wq", comp_mask, wq_type, user_handle, pd_handle, cq_handle, max_wr, max_sge, create_flags, reserved);
    check_struct!(l, IbUverbsExCreateWqResp, "struct ib_uverbs_ex_create_wq_resp", comp_mask, response_length, wq_handle, max_wr, max_sge, wqn);
    check_struct!(l, IbUverbsExDestroyWq, "struct ib_uverbs_ex_destroy_wq", comp_mask, wq_handle);
    check_struct!(l, IbUverbsExDestroyWqResp, "struct ib_uverbs_ex_destroy_wq_resp", comp_mask, response_length, events_reported, reserved);
    check_struct!(l, IbUverbsExModifyWq, "struct ib_uverbs_ex_modify_wq", attr_mask, wq_handle, wq_state, curr_wq_state, flags, flags_mask);
    check_struct!(l, IbUverbsExCreateRwqIndTable, "struct ib_uverbs_ex_create_rwq_ind_table", comp_mask, log_ind_tbl_size);
    check_struct!(l, IbUverbsExCreateRwqIndTableResp, "struct ib_uverbs_ex_create_rwq_ind_table_resp", comp_mask, response_length, ind_tbl_handle, ind_tbl_num);
    check_struct!(l, IbUverbsExDestroyRwqIndTable, "struct ib_uverbs_ex_destroy_rwq_ind_table", comp_mask, ind_tbl_handle);
    check_struct!(l, IbUverbsCqModeration, "struct ib_uverbs_cq_moderation", cq_count, cq_period);
    check_struct!(l, IbUverbsExModifyCq, "struct ib_uverbs_ex_modify_cq", cq_handle, attr_mask, attr, reserved);
    check_struct!(l, IbUverbsClockInfo, newer "struct ib_uverbs_clock_info", sign, resv, nsec, cycles, frac, mult, shift, mask, overflow_period);
    // write constants
    check_const!(l, IB_USER_VERBS_ABI_VERSION);
    check_const!(l, IB_USER_VERBS_CMD_THRESHOLD);
    check_const!(l, IB_USER_VERBS_CMD_COMMAND_MASK);
    check_const!(l, IB_USER_VERBS_CMD_FLAG_EXTENDED);
    check_const!(l, IB_DEVICE_NAME_MAX);
    check_const!(l, IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE);
    check_const!(l, IB_USER_VERBS_CMD_GET_CONTEXT);
    check_const!(l, IB_USER_VERBS_CMD_QUERY_DEVICE);
    check_const!(l, IB_USER_VERBS_CMD_QUERY_PORT);
    check_const!(l, IB_USER_VERBS_CMD_ALLOC_PD);
    check_const!(l, IB_USER_VERBS_CMD_DEALLOC_PD);
    check_const!(l, IB_USER_VERBS_CMD_CREATE_AH);
    check_const!(l, IB_USER_VERBS_CMD_MODIFY_AH);
    check_const!(l, IB_USER_VERBS_CMD_QUERY_AH);
    check_const!(l, IB_USER_VERBS_CMD_DESTROY_AH);
    check_const!(l, IB_USER_VERBS_CMD_REG_MR);
    check_const!(l, IB_USER_VERBS_CMD_REG_SMR);
    check_const!(l, IB_USER_VERBS_CMD_REREG_MR);
    check_const!(l, IB_USER_VERBS_CMD_QUERY_MR);
    check_const!(l, IB_USER_VERBS_CMD_DEREG_MR);
    check_const!(l, IB_USER_VERBS_CMD_ALLOC_MW);
    check_const!(l, IB_USER_VERBS_CMD_BIND_MW);
    check_const!(l, IB_USER_VERBS_CMD_DEALLOC_MW);
    check_const!(l, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL);
    check_const!(l, IB_USER_VERBS_CMD_CREATE_CQ);
    check_const!(l, IB_USER_VERBS_CMD_RESIZE_CQ);
    check_const!(l, IB_USER_VERBS_CMD_DESTROY_CQ);
    check_const!(l, IB_USER_VERBS_CMD_POLL_CQ);
    check_const!(l, IB_USER_VERBS_CMD_PEEK_CQ);
    check_const!(l, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
    check_const!(l, IB_USER_VERBS_CMD_CREATE_QP);
    check_const!(l, IB_USER_VERBS_CMD_QUERY_QP);
    check_const!(l, IB_USER_VERBS_CMD_MODIFY_QP);
    check_const!(l, IB_USER_VERBS_CMD_DESTROY_QP);
    check_const!(l, IB_USER_VERBS_CMD_POST_SEND);
    check_const!(l, IB_USER_VERBS_CMD_POST_RECV);
    check_const!(l, IB_USER_VERBS_CMD_ATTACH_MCAST);
    check_const!(l, IB_USER_VERBS_CMD_DETACH_MCAST);
    check_const!(l, IB_USER_VERBS_CMD_CREATE_SRQ);
    check_const!(l, IB_USER_VERBS_CMD_MODIFY_SRQ);
    check_const!(l, IB_USER_VERBS_CMD_QUERY_SRQ);
    check_const!(l, IB_USER_VERBS_CMD_DESTROY_SRQ);
    check_const!(l, IB_USER_VERBS_CMD_POST_SRQ_RECV);
    check_const!(l, IB_USER_VERBS_CMD_OPEN_XRCD);
    check_const!(l, IB_USER_VERBS_CMD_CLOSE_XRCD);
    check_const!(l, IB_USER_VERBS_CMD_CREATE_XSRQ);
    check_const!(l, IB_USER_VERBS_CMD_OPEN_QP);
    check_const!(l, IB_USER_VERBS_EX_CMD_QUERY_DEVICE);
    check_const!(l, IB_USER_VERBS_EX_CMD_CREATE_CQ);
    check_const!(l, IB_USER_VERBS_EX_CMD_CREATE_QP);
    check_const!(l, IB_USER_VERBS_EX_CMD_MODIFY_QP);
    check_const!(l, IB_USER_VERBS_EX_CMD_CREATE_FLOW);
    check_const!(l, IB_USER_VERBS_EX_CMD_DESTROY_FLOW);
    check_const!(l, IB_USER_VERBS_EX_CMD_CREATE_WQ);
    check_const!(l, IB_USER_VERBS_EX_CMD_MODIFY_WQ);
    check_const!(l, IB_USER_VERBS_EX_CMD_DESTROY_WQ);
    check_const!(l, IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL);
    check_const!(l, IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL);
    check_const!(l, IB_USER_VERBS_EX_CMD_MODIFY_CQ);
    check_const!(l, newer IB_FLUSH_GLOBAL);
    check_const!(l, newer IB_FLUSH_PERSISTENT);
    check_const!(l, newer IB_FLUSH_RANGE);
    check_const!(l, newer IB_FLUSH_MR);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT_IMPLICIT);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT_SEND);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT_RECV);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT_WRITE);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT_READ);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT_ATOMIC);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT_SRQ_RECV);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT_FLUSH);
    check_const!(l, newer IB_UVERBS_ODP_SUPPORT_ATOMIC_WRITE);
    check_const!(l, IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION);
    check_const!(l, IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN);
    check_const!(l, IB_UVERBS_WC_SEND);
    check_const!(l, IB_UVERBS_WC_RDMA_WRITE);
    check_const!(l, IB_UVERBS_WC_RDMA_READ);
    check_const!(l, IB_UVERBS_WC_COMP_SWAP);
    check_const!(l, IB_UVERBS_WC_FETCH_ADD);
    check_const!(l, IB_UVERBS_WC_BIND_MW);
    check_const!(l, IB_UVERBS_WC_LOCAL_INV);
    check_const!(l, IB_UVERBS_WC_TSO);
    check_const!(l, newer IB_UVERBS_WC_FLUSH);
    check_const!(l, newer IB_UVERBS_WC_ATOMIC_WRITE);
    check_const!(l, IB_UVERBS_CREATE_QP_MASK_IND_TABLE);
    check_const!(l, IB_UVERBS_CREATE_QP_SUP_COMP_MASK);
    check_const!(l, IB_UVERBS_WR_RDMA_WRITE);
    check_const!(l, IB_UVERBS_WR_RDMA_WRITE_WITH_IMM);
    check_const!(l, IB_UVERBS_WR_SEND);
    check_const!(l, IB_UVERBS_WR_SEND_WITH_IMM);
    check_const!(l, IB_UVERBS_WR_RDMA_READ);
    check_const!(l, IB_UVERBS_WR_ATOMIC_CMP_AND_SWP);
    check_const!(l, IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD);
    check_const!(l, IB_UVERBS_WR_LOCAL_INV);
    check_const!(l, IB_UVERBS_WR_BIND_MW);
    check_const!(l, IB_UVERBS_WR_SEND_WITH_INV);
    check_const!(l, IB_UVERBS_WR_TSO);
    check_const!(l, IB_UVERBS_WR_RDMA_READ_WITH_INV);
    check_const!(l, IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP);
    check_const!(l, IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD);
    check_const!(l, newer IB_UVERBS_WR_FLUSH);
    check_const!(l, newer IB_UVERBS_WR_ATOMIC_WRITE);
    check_const!(l, IB_UVERBS_DEVICE_RESIZE_MAX_WR);
    check_const!(l, IB_UVERBS_DEVICE_BAD_PKEY_CNTR);
    check_const!(l, IB_UVERBS_DEVICE_BAD_QKEY_CNTR);
    check_const!(l, IB_UVERBS_DEVICE_RAW_MULTI);
    check_const!(l, IB_UVERBS_DEVICE_AUTO_PATH_MIG);
    check_const!(l, IB_UVERBS_DEVICE_CHANGE_PHY_PORT);
    check_const!(l, IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE);
    check_const!(l, IB_UVERBS_DEVICE_CURR_QP_STATE_MOD);
    check_const!(l, IB_UVERBS_DEVICE_SHUTDOWN_PORT);
    check_const!(l, IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT);
    check_const!(l, IB_UVERBS_DEVICE_SYS_IMAGE_GUID);
    check_const!(l, IB_UVERBS_DEVICE_RC_RNR_NAK_GEN);
    check_const!(l, IB_UVERBS_DEVICE_SRQ_RESIZE);
    check_const!(l, IB_UVERBS_DEVICE_N_NOTIFY_CQ);
    check_const!(l, IB_UVERBS_DEVICE_MEM_WINDOW);
    check_const!(l, IB_UVERBS_DEVICE_UD_IP_CSUM);
    check_const!(l, IB_UVERBS_DEVICE_XRC);
    check_const!(l, IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS);
    check_const!(l, IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A);
    check_const!(l, IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B);
    check_const!(l, IB_UVERBS_DEVICE_RC_IP_CSUM);
    check_const!(l, IB_UVERBS_DEVICE_RAW_IP_CSUM);
    check_const!(l, IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING);
    check_const!(l, IB_UVERBS_DEVICE_RAW_SCATTER_FCS);
    check_const!(l, IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING);
    check_const!(l, newer IB_UVERBS_DEVICE_FLUSH_GLOBAL);
    check_const!(l, newer IB_UVERBS_DEVICE_FLUSH_PERSISTENT);
    check_const!(l, newer IB_UVERBS_DEVICE_ATOMIC_WRITE);
    check_const!(l, newer IB_UVERBS_DEVICE_CC_DMA_BOUNCE);
    check_const!(l, IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING);
    check_const!(l, IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS);
    check_const!(l, IB_UVERBS_RAW_PACKET_CAP_IP_CSUM);
    check_const!(l, IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP);
    // ---- verbs ----
    check_struct!(l, IbUverbsFlowActionEspKeymatAesGcm, "struct ib_uverbs_flow_action_esp_keymat_aes_gcm", iv, iv_algo, salt, icv_len, key_len, aes_key);
    check_struct!(l, IbUverbsFlowActionEspReplayBmp, "struct ib_uverbs_flow_action_esp_replay_bmp", size);
    check_struct!(l, IbUverbsFlowActionEspEncap, "struct ib_uverbs_flow_action_esp_encap", val_ptr, next_ptr, len, r#type; rust_only: pad);
    check_struct!(l, IbUverbsFlowActionEsp, "struct ib_uverbs_flow_action_esp", spi, seq, tfc_pad, flags, hard_limit_pkts);
    check_struct!(l, IbUverbsQueryPortRespEx, "struct ib_uverbs_query_port_resp_ex", legacy_resp, port_cap_flags2; newer: active_speed_ex; resized: reserved);
    check_struct!(l, IbUverbsQpCap, "struct ib_uverbs_qp_cap", max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data);
    check_struct!(l, IbUverbsGidEntry, "struct ib_uverbs_gid_entry", gid, gid_index, port_num, gid_type, netdev_ifindex);
    check_struct!(l, IbUverbsBufferDesc, newer "struct ib_uverbs_buffer_desc", r#type, fd, flags, optional_flags, addr, length);
    // verbs constants
    check_const!(l, IB_UVERBS_ACCESS_OPTIONAL_FIRST);
    check_const!(l, IB_UVERBS_ACCESS_OPTIONAL_LAST);
    check_const!(l, IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS);
    check_const!(l, newer IB_UVERBS_CORE_SUPPORT_ROBUST_UDATA);
    check_const!(l, IB_UVERBS_ACCESS_LOCAL_WRITE);
    check_const!(l, IB_UVERBS_ACCESS_REMOTE_WRITE);
    check_const!(l, IB_UVERBS_ACCESS_REMOTE_READ);
    check_const!(l, IB_UVERBS_ACCESS_REMOTE_ATOMIC);
    check_const!(l, IB_UVERBS_ACCESS_MW_BIND);
    check_const!(l, IB_UVERBS_ACCESS_ZERO_BASED);
    check_const!(l, IB_UVERBS_ACCESS_ON_DEMAND);
    check_const!(l, IB_UVERBS_ACCESS_HUGETLB);
    check_const!(l, newer IB_UVERBS_ACCESS_FLUSH_GLOBAL);
    check_const!(l, newer IB_UVERBS_ACCESS_FLUSH_PERSISTENT);
    check_const!(l, IB_UVERBS_ACCESS_RELAXED_ORDERING);
    check_const!(l, IB_UVERBS_ACCESS_OPTIONAL_RANGE);
    check_const!(l, IB_UVERBS_SRQT_BASIC);
    check_const!(l, IB_UVERBS_SRQT_XRC);
    check_const!(l, IB_UVERBS_SRQT_TM);
    check_const!(l, IB_UVERBS_WQT_RQ);
    check_const!(l, IB_UVERBS_WQ_FLAGS_CVLAN_STRIPPING);
    check_const!(l, IB_UVERBS_WQ_FLAGS_SCATTER_FCS);
    check_const!(l, IB_UVERBS_WQ_FLAGS_DELAY_DROP);
    check_const!(l, IB_UVERBS_WQ_FLAGS_PCI_WRITE_END_PADDING);
    check_const!(l, IB_UVERBS_QPT_RC);
    check_const!(l, IB_UVERBS_QPT_UC);
    check_const!(l, IB_UVERBS_QPT_UD);
    check_const!(l, IB_UVERBS_QPT_RAW_PACKET);
    check_const!(l, IB_UVERBS_QPT_XRC_INI);
    check_const!(l, IB_UVERBS_QPT_XRC_TGT);
    check_const!(l, IB_UVERBS_QPT_DRIVER);
    check_const!(l, IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK);
    check_const!(l, IB_UVERBS_QP_CREATE_SCATTER_FCS);
    check_const!(l, IB_UVERBS_QP_CREATE_CVLAN_STRIPPING);
    check_const!(l, IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING);
    check_const!(l, IB_UVERBS_QP_CREATE_SQ_SIG_ALL);
    check_const!(l, IB_UVERBS_PCF_SM);
    check_const!(l, IB_UVERBS_PCF_NOTICE_SUP);
    check_const!(l, IB_UVERBS_PCF_TRAP_SUP);
    check_const!(l, IB_UVERBS_PCF_OPT_IPD_SUP);
    check_const!(l, IB_UVERBS_PCF_AUTO_MIGR_SUP);
    check_const!(l, IB_UVERBS_PCF_SL_MAP_SUP);
    check_const!(l, IB_UVERBS_PCF_MKEY_NVRAM);
    check_const!(l, IB_UVERBS_PCF_PKEY_NVRAM);
    check_const!(l, IB_UVERBS_PCF_LED_INFO_SUP);
    check_const!(l, IB_UVERBS_PCF_SM_DISABLED);
    check_const!(l, IB_UVERBS_PCF_SYS_IMAGE_GUID_SUP);
    check_const!(l, IB_UVERBS_PCF_PKEY_SW_EXT_PORT_TRAP_SUP);
    check_const!(l, IB_UVERBS_PCF_EXTENDED_SPEEDS_SUP);
    check_const!(l, IB_UVERBS_PCF_CM_SUP);
    check_const!(l, IB_UVERBS_PCF_SNMP_TUNNEL_SUP);
    check_const!(l, IB_UVERBS_PCF_REINIT_SUP);
    check_const!(l, IB_UVERBS_PCF_DEVICE_MGMT_SUP);
    check_const!(l, IB_UVERBS_PCF_VENDOR_CLASS_SUP);
    check_const!(l, IB_UVERBS_PCF_DR_NOTICE_SUP);
    check_const!(l, IB_UVERBS_PCF_CAP_MASK_NOTICE_SUP);
    check_const!(l, IB_UVERBS_PCF_BOOT_MGMT_SUP);
    check_const!(l, IB_UVERBS_PCF_LINK_LATENCY_SUP);
    check_const!(l, IB_UVERBS_PCF_CLIENT_REG_SUP);
    check_const!(l, IB_UVERBS_PCF_LINK_SPEED_WIDTH_TABLE_SUP);
    check_const!(l, IB_UVERBS_PCF_VENDOR_SPECIFIC_MADS_TABLE_SUP);
    check_const!(l, IB_UVERBS_PCF_MCAST_PKEY_TRAP_SUPPRESSION_SUP);
    check_const!(l, IB_UVERBS_PCF_MCAST_FDB_TOP_SUP);
    check_const!(l, IB_UVERBS_PCF_HIERARCHY_INFO_SUP);
    check_const!(l, IB_UVERBS_PCF_IP_BASED_GIDS);
    check_const!(l, IB_UVERBS_QPF_GRH_REQUIRED);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM);
    check_const!(l, IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT);
    check_const!(l, IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW);
    check_const!(l, IB_UVERBS_READ_COUNTERS_PREFER_CACHED);
    check_const!(l, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH);
    check_const!(l, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE);
    check_const!(l, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT);
    check_const!(l, IB_UVERBS_ADVISE_MR_FLAG_FLUSH);
    check_const!(l, IB_UVERBS_GID_TYPE_IB);
    check_const!(l, IB_UVERBS_GID_TYPE_ROCE_V1);
    check_const!(l, IB_UVERBS_GID_TYPE_ROCE_V2);
    check_const!(l, newer IB_UVERBS_BUFFER_TYPE_DMABUF);
    check_const!(l, newer IB_UVERBS_BUFFER_TYPE_VA);
    check_const!(l, newer IB_UVERBS_COMP_CNTR_ENTRY_COMP);
    check_const!(l, newer IB_UVERBS_COMP_CNTR_ENTRY_ERR);
    check_const!(l, newer IB_UVERBS_COMP_CNTR_MODIFY_OP_SET);
    check_const!(l, newer IB_UVERBS_COMP_CNTR_MODIFY_OP_INC);
    check_const!(l, newer IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND);
    check_const!(l, newer IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV);
    check_const!(l, newer IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_READ);
    check_const!(l, newer IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ);
    check_const!(l, newer IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE);
    check_const!(l, newer IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE);
    check_const!(l, RDMA_NODE_IB_CA);
    check_const!(l, RDMA_NODE_IB_SWITCH);
    check_const!(l, RDMA_NODE_IB_ROUTER);
    check_const!(l, RDMA_NODE_RNIC);
    check_const!(l, RDMA_NODE_USNIC);
    check_const!(l, RDMA_NODE_USNIC_UDP);
    check_const!(l, RDMA_NODE_UNSPECIFIED);

    // Values the kernel carries through uverbs structs but defines only in its internal
    // include/rdma/ib_verbs.h: no uapi header to compare with; listed in the report.
    check_not_in_uapi!(
        l,
        "kernel include/rdma/ib_verbs.h",
        IB_WC_SUCCESS,
        IB_WC_LOC_LEN_ERR,
        IB_WC_LOC_QP_OP_ERR,
        IB_WC_LOC_EEC_OP_ERR,
        IB_WC_LOC_PROT_ERR,
        IB_WC_WR_FLUSH_ERR,
        IB_WC_MW_BIND_ERR,
        IB_WC_BAD_RESP_ERR,
        IB_WC_LOC_ACCESS_ERR,
        IB_WC_REM_INV_REQ_ERR,
        IB_WC_REM_ACCESS_ERR,
        IB_WC_REM_OP_ERR,
        IB_WC_RETRY_EXC_ERR,
        IB_WC_RNR_RETRY_EXC_ERR,
        IB_WC_LOC_RDD_VIOL_ERR,
        IB_WC_REM_INV_RD_REQ_ERR,
        IB_WC_REM_ABORT_ERR,
        IB_WC_INV_EECN_ERR,
        IB_WC_INV_EEC_STATE_ERR,
        IB_WC_FATAL_ERR,
        IB_WC_RESP_TIMEOUT_ERR,
        IB_WC_GENERAL_ERR,
        IB_WC_RECV,
        IB_WC_RECV_RDMA_WITH_IMM,
        IB_WC_GRH,
        IB_WC_WITH_IMM,
        IB_WC_WITH_INVALIDATE,
        IB_WC_IP_CSUM_OK,
        IB_WC_WITH_SMAC,
        IB_WC_WITH_VLAN,
        IB_WC_WITH_NETWORK_HDR_TYPE,
        IB_SEND_FENCE,
        IB_SEND_SIGNALED,
        IB_SEND_SOLICITED,
        IB_SEND_INLINE,
        IB_SEND_IP_CSUM,
        IB_EVENT_CQ_ERR,
        IB_EVENT_QP_FATAL,
        IB_EVENT_QP_REQ_ERR,
        IB_EVENT_QP_ACCESS_ERR,
        IB_EVENT_COMM_EST,
        IB_EVENT_SQ_DRAINED,
        IB_EVENT_PATH_MIG,
        IB_EVENT_PATH_MIG_ERR,
        IB_EVENT_DEVICE_FATAL,
        IB_EVENT_PORT_ACTIVE,
        IB_EVENT_PORT_ERR,
        IB_EVENT_LID_CHANGE,
        IB_EVENT_PKEY_CHANGE,
        IB_EVENT_SM_CHANGE,
        IB_EVENT_SRQ_ERR,
        IB_EVENT_SRQ_LIMIT_REACHED,
        IB_EVENT_QP_LAST_WQE_REACHED,
        IB_EVENT_CLIENT_REREGISTER,
        IB_EVENT_GID_CHANGE,
        IB_EVENT_WQ_FATAL,
        IB_EVENT_DEVICE_SPEED_CHANGE,
        IB_PORT_NOP,
        IB_PORT_DOWN,
        IB_PORT_INIT,
        IB_PORT_ARMED,
        IB_PORT_ACTIVE,
        IB_PORT_ACTIVE_DEFER,
        IB_MTU_256,
        IB_MTU_512,
        IB_MTU_1024,
        IB_MTU_2048,
        IB_MTU_4096,
        IB_LINK_LAYER_UNSPECIFIED,
        IB_LINK_LAYER_INFINIBAND,
        IB_LINK_LAYER_ETHERNET,
        IB_QPS_RESET,
        IB_QPS_INIT,
        IB_QPS_RTR,
        IB_QPS_RTS,
        IB_QPS_SQD,
        IB_QPS_SQE,
        IB_QPS_ERR,
        IB_MIG_MIGRATED,
        IB_MIG_REARM,
        IB_MIG_ARMED,
        IB_QP_STATE,
        IB_QP_CUR_STATE,
        IB_QP_EN_SQD_ASYNC_NOTIFY,
        IB_QP_ACCESS_FLAGS,
        IB_QP_PKEY_INDEX,
        IB_QP_PORT,
        IB_QP_QKEY,
        IB_QP_AV,
        IB_QP_PATH_MTU,
        IB_QP_TIMEOUT,
        IB_QP_RETRY_CNT,
        IB_QP_RNR_RETRY,
        IB_QP_RQ_PSN,
        IB_QP_MAX_QP_RD_ATOMIC,
        IB_QP_ALT_PATH,
        IB_QP_MIN_RNR_TIMER,
        IB_QP_SQ_PSN,
        IB_QP_MAX_DEST_RD_ATOMIC,
        IB_QP_PATH_MIG_STATE,
        IB_QP_CAP,
        IB_QP_DEST_QPN,
        IB_QP_RATE_LIMIT,
        IB_SRQ_MAX_WR,
        IB_SRQ_LIMIT,
        IB_MR_REREG_TRANS,
        IB_MR_REREG_PD,
        IB_MR_REREG_ACCESS,
        IB_MW_TYPE_1,
        IB_MW_TYPE_2,
        IB_ATOMIC_NONE,
        IB_ATOMIC_HCA,
        IB_ATOMIC_GLOB,
        IB_CQ_MODERATE,
    );

    layout.run("core_uapi");
}
