//! Layout check of the provider ABI modules (`uverbs_uapi::rxe` = `rdma/rdma_user_rxe.h`,
//! `uverbs_uapi::efa` = `rdma/efa-abi.h`) against the headers installed on this machine; same
//! mechanism and environment variables as `c_layout_host_only.rs` (see `common/mod.rs`).
//!
//! OWNERS OF rxe.rs / efa.rs: extend the tables below, one line per item.
//! - `check_struct!(l, RxeSendWqe, "struct rxe_send_wqe", wr, status, ...);` — list *every*
//!   Rust field (the macro's exhaustive pattern fails to compile otherwise). Fields only in
//!   headers newer than 6.1: `...; newer: field, ...`. A field whose size changed between
//!   versions: `...; resized: field`. Rust-only padding fields: `...; rust_only: pad`.
//! - Whole struct newer than 6.1: `check_struct!(l, T, newer "struct efa_...", ...)`.
//! - Anonymous nested C structs/unions: give the C type as
//!   `"__typeof__(((struct rxe_send_wr *)0)->wr.rdma)"`.
//! - Constants: `check_const!(l, NAME)`, `check_const!(l, newer NAME)`,
//!   `check_const!(l, older NAME)` (removed/renamed in newer headers).
//! - Run `UVERBS_C_LAYOUT_INCLUDE=/work/ref/rdma-core/kernel-headers cargo test -p
//!   uverbs-uapi --test c_layout_providers_host_only` to check the `newer` items against the newest
//!   uapi as well.
//!
//! Still to add (as of this file's creation): the remaining efa structs/constants (every rxe
//! struct and constant is listed).

#[macro_use]
mod common;

use uverbs_uapi::efa::*;
use uverbs_uapi::rxe::*;

#[test]
#[rustfmt::skip] // one line per struct / constant
fn rxe_uapi_matches_c_headers() {
    let mut layout = common::Layout::new(&["rdma/rdma_user_rxe.h"]);
    let l = &mut layout;
    check_struct!(l, RxeSge, "struct rxe_sge", addr, length, lkey);
    check_struct!(l, Mminfo, "struct mminfo", offset, size, pad);
    check_struct!(l, RxeCreateCqResp, "struct rxe_create_cq_resp", mi);
    check_struct!(l, RxeRecvWqe, "struct rxe_recv_wqe", wr_id, reserved, padding, dma);
    check_struct!(l, RxeGid, "union rxe_gid", raw);
    check_struct!(l, RxeGlobalRoute, "struct rxe_global_route", dgid, flow_label, sgid_index, hop_limit, traffic_class; rust_only: reserved);
    check_struct!(l, RxeAvSockaddr, "__typeof__(((struct rxe_av *)0)->sgid_addr)"; rust_only: raw);
    check_struct!(l, RxeAv, "struct rxe_av", port_num, network_type, dmac, grh, sgid_addr, dgid_addr);
    check_struct!(l, RxeSendWrRdma, "__typeof__(((struct rxe_send_wr *)0)->wr.rdma)", remote_addr, rkey, reserved);
    check_struct!(l, RxeSendWrAtomic, "__typeof__(((struct rxe_send_wr *)0)->wr.atomic)", remote_addr, compare_add, swap, rkey, reserved);
    check_struct!(l, RxeSendWrUd, "__typeof__(((struct rxe_send_wr *)0)->wr.ud)", remote_qpn, remote_qkey, pkey_index, reserved, ah_num, pad, av);
    check_struct!(l, RxeSendWrMw, "__typeof__(((struct rxe_send_wr *)0)->wr.mw)", addr, length, mr_lkey, mw_rkey, rkey, access);
    check_struct!(l, RxeSendWrFlush, newer "__typeof__(((struct rxe_send_wr *)0)->wr.flush)", remote_addr, length, rkey, r#type, level; rust_only: reserved);
    check_struct!(l, RxeSendWr, "struct rxe_send_wr", wr_id, reserved, opcode, send_flags, ex, wr);
    check_struct!(l, RxeDmaInfo, "struct rxe_dma_info", length, resid, cur_sge, num_sge, sge_offset, reserved);
    check_struct!(l, RxeSendWqe, "struct rxe_send_wqe", wr, status, state, iova, mask, first_psn, last_psn, ack_length, ssn, has_rd_atomic, dma);
    check_struct!(l, RxeCreateAhResp, "struct rxe_create_ah_resp", ah_num, reserved);
    check_struct!(l, RxeResizeCqResp, "struct rxe_resize_cq_resp", mi);
    check_struct!(l, RxeCreateQpResp, "struct rxe_create_qp_resp", rq_mi, sq_mi);
    check_struct!(l, RxeCreateSrqResp, "struct rxe_create_srq_resp", mi, srq_num, reserved);
    check_struct!(l, RxeModifySrqCmd, "struct rxe_modify_srq_cmd", mmap_info_addr);
    check_struct!(l, RxeQueueBuf, "struct rxe_queue_buf", log2_elem_size, index_mask, pad_1, producer_index, pad_2, consumer_index, pad_3);
    check_const!(l, RXE_NETWORK_TYPE_IPV4);
    check_const!(l, RXE_NETWORK_TYPE_IPV6);
    check_not_in_uapi!(l, "kernel drivers/infiniband/sw/rxe/rxe_verbs.h enum wqe_state", RXE_WQE_STATE_POSTED);
    layout.run("rxe_uapi");
}

#[test]
#[rustfmt::skip] // one line per struct / constant
fn efa_uapi_matches_c_headers() {
    let mut layout = common::Layout::new(&["rdma/ib_user_ioctl_cmds.h", "rdma/efa-abi.h"]);
    let l = &mut layout;
    check_struct!(l, EfaIbvAllocPdResp, "struct efa_ibv_alloc_pd_resp", comp_mask, pdn, reserved_30);
    check_struct!(l, EfaIbvCreateCq, "struct efa_ibv_create_cq", comp_mask, cq_entry_size, num_sub_cqs, flags, reserved_58);
    check_const!(l, EFA_CREATE_CQ_WITH_COMPLETION_CHANNEL);
    check_const!(l, EFA_CREATE_CQ_WITH_SGID);
    check_const!(l, newer EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID);
    check_const!(l, newer EFA_QUERY_DEVICE_CAPS_RDMA_WRITE);
    check_struct!(l, EfaIbvAllocUcontextCmd, newer "struct efa_ibv_alloc_ucontext_cmd", supported_caps, reserved_20);
    check_struct!(l, EfaIbvAllocUcontextResp, newer "struct efa_ibv_alloc_ucontext_resp", comp_mask, cmds_supp_udata_mask, sub_cqs_per_cq, inline_buf_size, max_llq_size, max_tx_batch, min_sq_wr, inline_buf_size_ex, reserved_b0);
    check_struct!(l, EfaIbvCreateCqResp, "struct efa_ibv_create_cq_resp", comp_mask, reserved_20, q_mmap_key, q_mmap_size, cq_idx, reserved_d0, db_off, db_mmap_key);
    // EfaIbvCreateQp (efa_ibv_create_qp) grew from 16 to 24 bytes after 6.1 (flags, sl, reserved_98);
    // the harness has no marker for a grown struct, so it is checked only by uapi/src/efa.rs's
    // compile-time asserts. Against the newest headers it matches: see the line kept here for
    // `UVERBS_C_LAYOUT_INCLUDE` runs once the harness can express growth:
    // check_struct!(l, EfaIbvCreateQp, "struct efa_ibv_create_qp", comp_mask, rq_ring_size, sq_ring_size, driver_qp_type; newer: flags, sl, reserved_98);
    check_struct!(l, EfaIbvCreateQpResp, "struct efa_ibv_create_qp_resp", comp_mask, rq_db_offset, sq_db_offset, llq_desc_offset, rq_mmap_key, rq_mmap_size, rq_db_mmap_key, sq_db_mmap_key, llq_desc_mmap_key, send_sub_cq_idx, recv_sub_cq_idx, reserved_1e0);
    check_struct!(l, EfaIbvCreateAhResp, "struct efa_ibv_create_ah_resp", comp_mask, efa_address_handle, reserved_30);
    check_struct!(l, EfaIbvExQueryDeviceResp, "struct efa_ibv_ex_query_device_resp", comp_mask, max_sq_wr, max_rq_wr, max_sq_sge, max_rq_sge, max_rdma_size, device_caps);
    check_const!(l, EFA_UVERBS_ABI_VERSION);
    check_const!(l, newer EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_TX_BATCH, EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_MIN_SQ_WR);
    check_const!(l, EFA_USER_CMDS_SUPP_UDATA_QUERY_DEVICE, EFA_USER_CMDS_SUPP_UDATA_CREATE_AH);
    check_const!(l, EFA_CREATE_CQ_RESP_DB_OFF, EFA_QP_DRIVER_TYPE_SRD);
    check_const!(l, newer EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV, EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID);
    check_const!(l, EFA_QUERY_DEVICE_CAPS_RDMA_READ, EFA_QUERY_DEVICE_CAPS_RNR_RETRY, EFA_QUERY_DEVICE_CAPS_CQ_NOTIFICATIONS, EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID);
    check_const!(l, newer EFA_QUERY_DEVICE_CAPS_DATA_POLLING_128, EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV, EFA_QUERY_DEVICE_CAPS_CQ_WITH_EXT_MEM, EFA_QUERY_DEVICE_CAPS_COMP_CNTR, EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID);
    check_const!(l, newer EFA_QUERY_MR_VALIDITY_RECV_IC_ID, EFA_QUERY_MR_VALIDITY_RDMA_READ_IC_ID, EFA_QUERY_MR_VALIDITY_RDMA_RECV_IC_ID);
    check_const!(l, newer EFA_IB_ATTR_QUERY_MR_HANDLE, EFA_IB_ATTR_QUERY_MR_RESP_IC_ID_VALIDITY, EFA_IB_ATTR_QUERY_MR_RESP_RECV_IC_ID, EFA_IB_ATTR_QUERY_MR_RESP_RDMA_READ_IC_ID, EFA_IB_ATTR_QUERY_MR_RESP_RDMA_RECV_IC_ID);
    check_const!(l, newer EFA_IB_METHOD_MR_QUERY, EFA_IB_ATTR_CREATE_COMP_CNTR_COMP_BUFFER, EFA_IB_ATTR_CREATE_COMP_CNTR_ERR_BUFFER);
    layout.run("efa_uapi");
}
