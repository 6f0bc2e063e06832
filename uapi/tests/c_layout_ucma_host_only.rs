//! Layout check of `uverbs_uapi::ucma` (`rdma/rdma_user_cm.h`, linux-libc-dev) and of the
//! librdmacm values it carries (`rdma/rdma_cma.h`, librdmacm-dev) against the headers installed
//! on this machine; same mechanism and environment variables as `c_layout_host_only.rs` (see
//! `common/mod.rs`). The two headers are compiled separately: both declare `RDMA_PS_*` (in
//! different enums), so one translation unit cannot include both.

#[macro_use]
mod common;

use uverbs_uapi::ucma::*;

#[test]
#[rustfmt::skip] // one line per struct / constant
fn ucma_uapi_matches_c_headers() {
    let mut layout = common::Layout::new(&["rdma/rdma_user_cm.h"]);
    let l = &mut layout;
    check_struct!(l, RdmaUcmCmdHdr, "struct rdma_ucm_cmd_hdr", cmd, r#in, out);
    check_struct!(l, RdmaUcmCreateId, "struct rdma_ucm_create_id", uid, response, ps, qp_type, reserved);
    check_struct!(l, RdmaUcmCreateIdResp, "struct rdma_ucm_create_id_resp", id);
    check_struct!(l, RdmaUcmDestroyId, "struct rdma_ucm_destroy_id", response, id, reserved);
    check_struct!(l, RdmaUcmDestroyIdResp, "struct rdma_ucm_destroy_id_resp", events_reported);
    check_struct!(l, RdmaUcmBindIp, "struct rdma_ucm_bind_ip", response, addr, id);
    check_struct!(l, RdmaUcmBind, "struct rdma_ucm_bind", id, addr_size, reserved, addr);
    check_struct!(l, RdmaUcmResolveIp, "struct rdma_ucm_resolve_ip", src_addr, dst_addr, id, timeout_ms);
    check_struct!(l, RdmaUcmResolveAddr, "struct rdma_ucm_resolve_addr", id, timeout_ms, src_size, dst_size, reserved, src_addr, dst_addr);
    check_struct!(l, RdmaUcmResolveRoute, "struct rdma_ucm_resolve_route", id, timeout_ms);
    check_struct!(l, RdmaUcmQuery, "struct rdma_ucm_query", response, id, option);
    check_struct!(l, IbUserPathRec, "struct ib_user_path_rec", dgid, sgid, dlid, slid, raw_traffic, flow_label, reversible, mtu, pkey, hop_limit, traffic_class, numb_path, sl, mtu_selector, rate_selector, rate, packet_life_time_selector, packet_life_time, preference);
    check_struct!(l, IbPathRecData, "struct ib_path_rec_data", flags, reserved, path_rec);
    check_struct!(l, RdmaUcmQueryRouteResp, "struct rdma_ucm_query_route_resp", node_guid, ib_route, src_addr, dst_addr, num_paths, port_num, reserved, ibdev_index, reserved1);
    check_struct!(l, RdmaUcmQueryAddrResp, "struct rdma_ucm_query_addr_resp", node_guid, port_num, reserved, pkey, src_size, dst_size, src_addr, dst_addr, ibdev_index, reserved1);
    check_struct!(l, RdmaUcmQueryPathResp, "struct rdma_ucm_query_path_resp", num_paths, reserved);
    check_struct!(l, RdmaUcmConnParam, "struct rdma_ucm_conn_param", qp_num, qkey, private_data, private_data_len, srq, responder_resources, initiator_depth, flow_control, retry_count, rnr_retry_count, valid);
    check_struct!(l, RdmaUcmUdParam, "struct rdma_ucm_ud_param", qp_num, qkey, ah_attr, private_data, private_data_len, reserved);
    check_struct!(l, RdmaUcmEce, "struct rdma_ucm_ece", vendor_id, attr_mod);
    check_struct!(l, RdmaUcmConnect, "struct rdma_ucm_connect", conn_param, id, reserved, ece);
    check_struct!(l, RdmaUcmListen, "struct rdma_ucm_listen", id, backlog);
    check_struct!(l, RdmaUcmAccept, "struct rdma_ucm_accept", uid, conn_param, id, reserved, ece);
    check_struct!(l, RdmaUcmReject, "struct rdma_ucm_reject", id, private_data_len, reason, reserved, private_data);
    check_struct!(l, RdmaUcmDisconnect, "struct rdma_ucm_disconnect", id);
    check_struct!(l, RdmaUcmInitQpAttr, "struct rdma_ucm_init_qp_attr", response, id, qp_state);
    check_struct!(l, RdmaUcmNotify, "struct rdma_ucm_notify", id, event);
    check_struct!(l, RdmaUcmJoinIpMcast, "struct rdma_ucm_join_ip_mcast", response, uid, addr, id);
    check_struct!(l, RdmaUcmJoinMcast, "struct rdma_ucm_join_mcast", response, uid, id, addr_size, join_flags, addr);
    check_struct!(l, RdmaUcmGetEvent, "struct rdma_ucm_get_event", response);
    check_struct!(l, RdmaUcmEventResp, "struct rdma_ucm_event_resp", uid, id, event, status, param, reserved, ece);
    check_struct!(l, RdmaUcmSetOption, "struct rdma_ucm_set_option", optval, id, level, optname, optlen);
    check_struct!(l, RdmaUcmMigrateId, "struct rdma_ucm_migrate_id", response, id, fd);
    check_struct!(l, RdmaUcmMigrateResp, "struct rdma_ucm_migrate_resp", events_reported);
    check_const!(l, RDMA_USER_CM_ABI_VERSION, RDMA_MAX_PRIVATE_DATA);
    check_const!(l, RDMA_USER_CM_CMD_CREATE_ID, RDMA_USER_CM_CMD_DESTROY_ID, RDMA_USER_CM_CMD_BIND_IP, RDMA_USER_CM_CMD_RESOLVE_IP);
    check_const!(l, RDMA_USER_CM_CMD_RESOLVE_ROUTE, RDMA_USER_CM_CMD_QUERY_ROUTE, RDMA_USER_CM_CMD_CONNECT, RDMA_USER_CM_CMD_LISTEN);
    check_const!(l, RDMA_USER_CM_CMD_ACCEPT, RDMA_USER_CM_CMD_REJECT, RDMA_USER_CM_CMD_DISCONNECT, RDMA_USER_CM_CMD_INIT_QP_ATTR);
    check_const!(l, RDMA_USER_CM_CMD_GET_EVENT, RDMA_USER_CM_CMD_GET_OPTION, RDMA_USER_CM_CMD_SET_OPTION, RDMA_USER_CM_CMD_NOTIFY);
    check_const!(l, RDMA_USER_CM_CMD_JOIN_IP_MCAST, RDMA_USER_CM_CMD_LEAVE_MCAST, RDMA_USER_CM_CMD_MIGRATE_ID, RDMA_USER_CM_CMD_QUERY);
    check_const!(l, RDMA_USER_CM_CMD_BIND, RDMA_USER_CM_CMD_RESOLVE_ADDR, RDMA_USER_CM_CMD_JOIN_MCAST);
    check_const!(l, RDMA_PS_IPOIB, RDMA_PS_IB, RDMA_PS_TCP, RDMA_PS_UDP);
    check_const!(l, RDMA_USER_CM_QUERY_ADDR, RDMA_USER_CM_QUERY_PATH, RDMA_USER_CM_QUERY_GID);
    check_const!(l, RDMA_MC_JOIN_FLAG_FULLMEMBER, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, RDMA_MC_JOIN_FLAG_RESERVED);
    check_const!(l, RDMA_OPTION_ID, RDMA_OPTION_IB, RDMA_OPTION_ID_TOS, RDMA_OPTION_ID_REUSEADDR, RDMA_OPTION_ID_AFONLY, RDMA_OPTION_ID_ACK_TIMEOUT, RDMA_OPTION_IB_PATH);
    check_not_in_uapi!(l, "kernel include/rdma/ib_cm.h", IB_CM_REQ_PRIVATE_DATA_SIZE, IB_CM_REP_PRIVATE_DATA_SIZE, IB_CM_REJ_PRIVATE_DATA_SIZE, IB_CM_DREQ_PRIVATE_DATA_SIZE, IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE, IB_CM_SIDR_REP_PRIVATE_DATA_SIZE);
    check_not_in_uapi!(l, "kernel drivers/infiniband/core/cma.c (struct cma_hdr)", CMA_HDR_SIZE);
    layout.run("ucma_uapi");
}

#[test]
#[rustfmt::skip]
fn librdmacm_values_match_rdma_cma_h() {
    let mut layout = common::Layout::new(&["rdma/rdma_cma.h"]);
    let l = &mut layout;
    check_const!(l, RDMA_PS_IPOIB, RDMA_PS_IB, RDMA_PS_TCP, RDMA_PS_UDP);
    check_const!(l, RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ROUTE_RESOLVED, RDMA_CM_EVENT_ROUTE_ERROR);
    check_const!(l, RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_CONNECT_RESPONSE, RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_UNREACHABLE);
    check_const!(l, RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_DEVICE_REMOVAL);
    check_const!(l, RDMA_CM_EVENT_MULTICAST_JOIN, RDMA_CM_EVENT_MULTICAST_ERROR, RDMA_CM_EVENT_ADDR_CHANGE, RDMA_CM_EVENT_TIMEWAIT_EXIT);
    check_const!(l, RDMA_UDP_QKEY, RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH);
    check_const!(l, RDMA_OPTION_ID, RDMA_OPTION_IB, RDMA_OPTION_ID_TOS, RDMA_OPTION_ID_REUSEADDR, RDMA_OPTION_ID_AFONLY, RDMA_OPTION_ID_ACK_TIMEOUT, RDMA_OPTION_IB_PATH);
    layout.run("librdmacm");
}
