//! Object, method and attribute ids of the `RDMA_VERBS_IOCTL` interface.
//!
//! Mirrors `rdma/ib_user_ioctl_cmds.h` (version basis: rdma-core 65.0 `kernel-headers`).
//! Every C enum member is a `pub const NAME: u16` with the value C gives it (C enums count
//! from 0 unless a member says otherwise); the comment above each group names its C enum.
//! Ids marked "Newer than the 6.1 headers" are rejected by older kernels with
//! `EPROTONOSUPPORT` when sent as mandatory attributes / methods.
//!
//! Id namespaces: the top 4 bits of an id ([`UVERBS_ID_NS_MASK`]) select the namespace. 0 is
//! the core namespace (all ids below); ids with [`UVERBS_ID_DRIVER_NS`] set belong to the
//! driver of the device (`efa`, `mlx5`, ...) and need the right `driver_id` in the header.
//! The driver's private command data travels in the core-defined attributes
//! [`UVERBS_ATTR_UHW_IN`] / [`UVERBS_ATTR_UHW_OUT`].

/// `UVERBS_ID_NS_MASK`: bits of an object/method/attribute id that select its namespace.
pub const UVERBS_ID_NS_MASK: u16 = 0xF000;
/// `UVERBS_ID_NS_SHIFT`: position of the namespace bits in an id.
pub const UVERBS_ID_NS_SHIFT: u32 = 12;

/// `UVERBS_UDATA_DRIVER_DATA_NS`: the driver namespace number (1). Defined by the 6.1 headers,
/// removed from newer headers, which spell the same value [`UVERBS_ID_DRIVER_NS`].
pub const UVERBS_UDATA_DRIVER_DATA_NS: u16 = 1;
/// `UVERBS_UDATA_DRIVER_DATA_FLAG` = `1UL << UVERBS_ID_NS_SHIFT`: marks an id as belonging to the
/// driver namespace. Defined by the 6.1 headers; newer headers call it [`UVERBS_ID_DRIVER_NS`].
pub const UVERBS_UDATA_DRIVER_DATA_FLAG: u16 = 1 << UVERBS_ID_NS_SHIFT;

// enum uverbs_default_objects
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_DEVICE`.
pub const UVERBS_OBJECT_DEVICE: u16 = 0;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_PD`.
pub const UVERBS_OBJECT_PD: u16 = 1;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_COMP_CHANNEL`.
pub const UVERBS_OBJECT_COMP_CHANNEL: u16 = 2;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_CQ`.
pub const UVERBS_OBJECT_CQ: u16 = 3;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_QP`.
pub const UVERBS_OBJECT_QP: u16 = 4;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_SRQ`.
pub const UVERBS_OBJECT_SRQ: u16 = 5;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_AH`.
pub const UVERBS_OBJECT_AH: u16 = 6;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_MR`.
pub const UVERBS_OBJECT_MR: u16 = 7;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_MW`.
pub const UVERBS_OBJECT_MW: u16 = 8;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_FLOW`.
pub const UVERBS_OBJECT_FLOW: u16 = 9;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_XRCD`.
pub const UVERBS_OBJECT_XRCD: u16 = 10;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_RWQ_IND_TBL`.
pub const UVERBS_OBJECT_RWQ_IND_TBL: u16 = 11;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_WQ`.
pub const UVERBS_OBJECT_WQ: u16 = 12;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_FLOW_ACTION`.
pub const UVERBS_OBJECT_FLOW_ACTION: u16 = 13;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_DM`.
pub const UVERBS_OBJECT_DM: u16 = 14;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_COUNTERS`.
pub const UVERBS_OBJECT_COUNTERS: u16 = 15;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_ASYNC_EVENT`.
pub const UVERBS_OBJECT_ASYNC_EVENT: u16 = 16;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_DMAH`. Newer than the 6.1 headers.
pub const UVERBS_OBJECT_DMAH: u16 = 17;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_DMABUF`. Newer than the 6.1 headers.
pub const UVERBS_OBJECT_DMABUF: u16 = 18;
/// `enum uverbs_default_objects` member `UVERBS_OBJECT_COMP_CNTR`. Newer than the 6.1 headers.
pub const UVERBS_OBJECT_COMP_CNTR: u16 = 19;

// anonymous enum (driver namespace)
/// Anonymous enum member `UVERBS_ID_DRIVER_NS` (= `1UL << UVERBS_ID_NS_SHIFT`). Newer than the 6.1 headers.
pub const UVERBS_ID_DRIVER_NS: u16 = 0x1000;
/// Anonymous enum member `UVERBS_ATTR_UHW_IN` (= `UVERBS_ID_DRIVER_NS`): attribute carrying the
/// driver's private input struct (`udata` in), e.g. `struct efa_ibv_create_qp`.
pub const UVERBS_ATTR_UHW_IN: u16 = 0x1000;
/// Anonymous enum member `UVERBS_ATTR_UHW_OUT`: attribute carrying the driver's private
/// response struct (`udata` out), e.g. `struct efa_ibv_create_qp_resp`.
pub const UVERBS_ATTR_UHW_OUT: u16 = 0x1001;
/// Anonymous enum member `UVERBS_ID_DRIVER_NS_WITH_UHW`: first free driver-namespace attribute
/// id in a method that also takes the UHW attributes. Newer than the 6.1 headers.
pub const UVERBS_ID_DRIVER_NS_WITH_UHW: u16 = 0x1002;

// enum uverbs_methods_device
/// `enum uverbs_methods_device` member `UVERBS_METHOD_INVOKE_WRITE`.
pub const UVERBS_METHOD_INVOKE_WRITE: u16 = 0;
/// `enum uverbs_methods_device` member `UVERBS_METHOD_INFO_HANDLES`.
pub const UVERBS_METHOD_INFO_HANDLES: u16 = 1;
/// `enum uverbs_methods_device` member `UVERBS_METHOD_QUERY_PORT`.
pub const UVERBS_METHOD_QUERY_PORT: u16 = 2;
/// `enum uverbs_methods_device` member `UVERBS_METHOD_GET_CONTEXT`.
pub const UVERBS_METHOD_GET_CONTEXT: u16 = 3;
/// `enum uverbs_methods_device` member `UVERBS_METHOD_QUERY_CONTEXT`.
pub const UVERBS_METHOD_QUERY_CONTEXT: u16 = 4;
/// `enum uverbs_methods_device` member `UVERBS_METHOD_QUERY_GID_TABLE`.
pub const UVERBS_METHOD_QUERY_GID_TABLE: u16 = 5;
/// `enum uverbs_methods_device` member `UVERBS_METHOD_QUERY_GID_ENTRY`.
pub const UVERBS_METHOD_QUERY_GID_ENTRY: u16 = 6;
/// `enum uverbs_methods_device` member `UVERBS_METHOD_QUERY_PORT_SPEED`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_QUERY_PORT_SPEED: u16 = 7;
/// `enum uverbs_methods_device` member `UVERBS_METHOD_QUERY_COMP_CNTR_CAPS`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_QUERY_COMP_CNTR_CAPS: u16 = 8;

// enum uverbs_attrs_invoke_write_cmd_attr_ids
/// `enum uverbs_attrs_invoke_write_cmd_attr_ids` member `UVERBS_ATTR_CORE_IN`.
pub const UVERBS_ATTR_CORE_IN: u16 = 0;
/// `enum uverbs_attrs_invoke_write_cmd_attr_ids` member `UVERBS_ATTR_CORE_OUT`.
pub const UVERBS_ATTR_CORE_OUT: u16 = 1;
/// `enum uverbs_attrs_invoke_write_cmd_attr_ids` member `UVERBS_ATTR_WRITE_CMD`.
pub const UVERBS_ATTR_WRITE_CMD: u16 = 2;

// enum uverbs_attrs_query_port_cmd_attr_ids
/// `enum uverbs_attrs_query_port_cmd_attr_ids` member `UVERBS_ATTR_QUERY_PORT_PORT_NUM`.
pub const UVERBS_ATTR_QUERY_PORT_PORT_NUM: u16 = 0;
/// `enum uverbs_attrs_query_port_cmd_attr_ids` member `UVERBS_ATTR_QUERY_PORT_RESP`.
pub const UVERBS_ATTR_QUERY_PORT_RESP: u16 = 1;

// enum uverbs_attrs_query_port_speed_cmd_attr_ids
/// `enum uverbs_attrs_query_port_speed_cmd_attr_ids` member `UVERBS_ATTR_QUERY_PORT_SPEED_PORT_NUM`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_QUERY_PORT_SPEED_PORT_NUM: u16 = 0;
/// `enum uverbs_attrs_query_port_speed_cmd_attr_ids` member `UVERBS_ATTR_QUERY_PORT_SPEED_RESP`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_QUERY_PORT_SPEED_RESP: u16 = 1;

// enum uverbs_attrs_query_comp_cntr_caps_attr_ids
/// `enum uverbs_attrs_query_comp_cntr_caps_attr_ids` member `UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_COUNTERS`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_COUNTERS: u16 = 0;
/// `enum uverbs_attrs_query_comp_cntr_caps_attr_ids` member `UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_VALUE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_MAX_VALUE: u16 = 1;
/// `enum uverbs_attrs_query_comp_cntr_caps_attr_ids` member `UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_SUPPORTED_QP_ATTACH_OPS`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_QUERY_COMP_CNTR_CAPS_SUPPORTED_QP_ATTACH_OPS: u16 = 2;

// enum uverbs_attrs_get_context_attr_ids
/// `enum uverbs_attrs_get_context_attr_ids` member `UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS`.
pub const UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS: u16 = 0;
/// `enum uverbs_attrs_get_context_attr_ids` member `UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT`.
pub const UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT: u16 = 1;
/// `enum uverbs_attrs_get_context_attr_ids` member `UVERBS_ATTR_GET_CONTEXT_FD_ARR`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_GET_CONTEXT_FD_ARR: u16 = 2;

// enum uverbs_attrs_query_context_attr_ids
/// `enum uverbs_attrs_query_context_attr_ids` member `UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS`.
pub const UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS: u16 = 0;
/// `enum uverbs_attrs_query_context_attr_ids` member `UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT`.
pub const UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT: u16 = 1;

// enum uverbs_attrs_create_cq_cmd_attr_ids
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_HANDLE`.
pub const UVERBS_ATTR_CREATE_CQ_HANDLE: u16 = 0;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_CQE`.
pub const UVERBS_ATTR_CREATE_CQ_CQE: u16 = 1;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_USER_HANDLE`.
pub const UVERBS_ATTR_CREATE_CQ_USER_HANDLE: u16 = 2;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL`.
pub const UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL: u16 = 3;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_COMP_VECTOR`.
pub const UVERBS_ATTR_CREATE_CQ_COMP_VECTOR: u16 = 4;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_FLAGS`.
pub const UVERBS_ATTR_CREATE_CQ_FLAGS: u16 = 5;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_RESP_CQE`.
pub const UVERBS_ATTR_CREATE_CQ_RESP_CQE: u16 = 6;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_EVENT_FD`.
pub const UVERBS_ATTR_CREATE_CQ_EVENT_FD: u16 = 7;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_BUFFER_VA`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_CREATE_CQ_BUFFER_VA: u16 = 8;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH: u16 = 9;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_BUFFER_FD`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_CREATE_CQ_BUFFER_FD: u16 = 10;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET: u16 = 11;
/// `enum uverbs_attrs_create_cq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_CQ_BUF_UMEM`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_CREATE_CQ_BUF_UMEM: u16 = 12;

// enum uverbs_attrs_destroy_cq_cmd_attr_ids
/// `enum uverbs_attrs_destroy_cq_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_CQ_HANDLE`.
pub const UVERBS_ATTR_DESTROY_CQ_HANDLE: u16 = 0;
/// `enum uverbs_attrs_destroy_cq_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_CQ_RESP`.
pub const UVERBS_ATTR_DESTROY_CQ_RESP: u16 = 1;

// enum uverbs_attrs_create_flow_action_esp
/// `enum uverbs_attrs_create_flow_action_esp` member `UVERBS_ATTR_CREATE_FLOW_ACTION_ESP_HANDLE`.
pub const UVERBS_ATTR_CREATE_FLOW_ACTION_ESP_HANDLE: u16 = 0;
/// `enum uverbs_attrs_create_flow_action_esp` member `UVERBS_ATTR_FLOW_ACTION_ESP_ATTRS`.
pub const UVERBS_ATTR_FLOW_ACTION_ESP_ATTRS: u16 = 1;
/// `enum uverbs_attrs_create_flow_action_esp` member `UVERBS_ATTR_FLOW_ACTION_ESP_ESN`.
pub const UVERBS_ATTR_FLOW_ACTION_ESP_ESN: u16 = 2;
/// `enum uverbs_attrs_create_flow_action_esp` member `UVERBS_ATTR_FLOW_ACTION_ESP_KEYMAT`.
pub const UVERBS_ATTR_FLOW_ACTION_ESP_KEYMAT: u16 = 3;
/// `enum uverbs_attrs_create_flow_action_esp` member `UVERBS_ATTR_FLOW_ACTION_ESP_REPLAY`.
pub const UVERBS_ATTR_FLOW_ACTION_ESP_REPLAY: u16 = 4;
/// `enum uverbs_attrs_create_flow_action_esp` member `UVERBS_ATTR_FLOW_ACTION_ESP_ENCAP`.
pub const UVERBS_ATTR_FLOW_ACTION_ESP_ENCAP: u16 = 5;

// enum uverbs_attrs_modify_flow_action_esp
/// `enum uverbs_attrs_modify_flow_action_esp` member `UVERBS_ATTR_MODIFY_FLOW_ACTION_ESP_HANDLE` (= `UVERBS_ATTR_CREATE_FLOW_ACTION_ESP_HANDLE`).
pub const UVERBS_ATTR_MODIFY_FLOW_ACTION_ESP_HANDLE: u16 = 0;

// enum uverbs_attrs_destroy_flow_action_esp
/// `enum uverbs_attrs_destroy_flow_action_esp` member `UVERBS_ATTR_DESTROY_FLOW_ACTION_HANDLE`.
pub const UVERBS_ATTR_DESTROY_FLOW_ACTION_HANDLE: u16 = 0;

// enum uverbs_attrs_create_qp_cmd_attr_ids
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_HANDLE`.
pub const UVERBS_ATTR_CREATE_QP_HANDLE: u16 = 0;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_XRCD_HANDLE`.
pub const UVERBS_ATTR_CREATE_QP_XRCD_HANDLE: u16 = 1;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_PD_HANDLE`.
pub const UVERBS_ATTR_CREATE_QP_PD_HANDLE: u16 = 2;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_SRQ_HANDLE`.
pub const UVERBS_ATTR_CREATE_QP_SRQ_HANDLE: u16 = 3;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE`.
pub const UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE: u16 = 4;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE`.
pub const UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE: u16 = 5;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE`.
pub const UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE: u16 = 6;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_USER_HANDLE`.
pub const UVERBS_ATTR_CREATE_QP_USER_HANDLE: u16 = 7;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_CAP`.
pub const UVERBS_ATTR_CREATE_QP_CAP: u16 = 8;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_TYPE`.
pub const UVERBS_ATTR_CREATE_QP_TYPE: u16 = 9;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_FLAGS`.
pub const UVERBS_ATTR_CREATE_QP_FLAGS: u16 = 10;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_SOURCE_QPN`.
pub const UVERBS_ATTR_CREATE_QP_SOURCE_QPN: u16 = 11;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_EVENT_FD`.
pub const UVERBS_ATTR_CREATE_QP_EVENT_FD: u16 = 12;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_RESP_CAP`.
pub const UVERBS_ATTR_CREATE_QP_RESP_CAP: u16 = 13;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_RESP_QP_NUM`.
pub const UVERBS_ATTR_CREATE_QP_RESP_QP_NUM: u16 = 14;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_BUF_UMEM`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_CREATE_QP_BUF_UMEM: u16 = 15;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_RQ_BUF_UMEM`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_CREATE_QP_RQ_BUF_UMEM: u16 = 16;
/// `enum uverbs_attrs_create_qp_cmd_attr_ids` member `UVERBS_ATTR_CREATE_QP_SQ_BUF_UMEM`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_CREATE_QP_SQ_BUF_UMEM: u16 = 17;

// enum uverbs_attrs_destroy_qp_cmd_attr_ids
/// `enum uverbs_attrs_destroy_qp_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_QP_HANDLE`.
pub const UVERBS_ATTR_DESTROY_QP_HANDLE: u16 = 0;
/// `enum uverbs_attrs_destroy_qp_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_QP_RESP`.
pub const UVERBS_ATTR_DESTROY_QP_RESP: u16 = 1;

// enum uverbs_attrs_qp_attach_comp_cntr_cmd_attr_ids
/// `enum uverbs_attrs_qp_attach_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_QP_ATTACH_COMP_CNTR_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_QP_ATTACH_COMP_CNTR_HANDLE: u16 = 0;
/// `enum uverbs_attrs_qp_attach_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_QP_ATTACH_COMP_CNTR_CNTR_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_QP_ATTACH_COMP_CNTR_CNTR_HANDLE: u16 = 1;
/// `enum uverbs_attrs_qp_attach_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_QP_ATTACH_COMP_CNTR_OP_MASK`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_QP_ATTACH_COMP_CNTR_OP_MASK: u16 = 2;

// enum uverbs_methods_qp
/// `enum uverbs_methods_qp` member `UVERBS_METHOD_QP_CREATE`.
pub const UVERBS_METHOD_QP_CREATE: u16 = 0;
/// `enum uverbs_methods_qp` member `UVERBS_METHOD_QP_DESTROY`.
pub const UVERBS_METHOD_QP_DESTROY: u16 = 1;
/// `enum uverbs_methods_qp` member `UVERBS_METHOD_QP_ATTACH_COMP_CNTR`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_QP_ATTACH_COMP_CNTR: u16 = 2;

// enum uverbs_attrs_create_srq_cmd_attr_ids
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_HANDLE`.
pub const UVERBS_ATTR_CREATE_SRQ_HANDLE: u16 = 0;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_PD_HANDLE`.
pub const UVERBS_ATTR_CREATE_SRQ_PD_HANDLE: u16 = 1;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE`.
pub const UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE: u16 = 2;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE`.
pub const UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE: u16 = 3;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_USER_HANDLE`.
pub const UVERBS_ATTR_CREATE_SRQ_USER_HANDLE: u16 = 4;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_MAX_WR`.
pub const UVERBS_ATTR_CREATE_SRQ_MAX_WR: u16 = 5;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_MAX_SGE`.
pub const UVERBS_ATTR_CREATE_SRQ_MAX_SGE: u16 = 6;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_LIMIT`.
pub const UVERBS_ATTR_CREATE_SRQ_LIMIT: u16 = 7;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS`.
pub const UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS: u16 = 8;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_TYPE`.
pub const UVERBS_ATTR_CREATE_SRQ_TYPE: u16 = 9;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_EVENT_FD`.
pub const UVERBS_ATTR_CREATE_SRQ_EVENT_FD: u16 = 10;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR`.
pub const UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR: u16 = 11;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE`.
pub const UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE: u16 = 12;
/// `enum uverbs_attrs_create_srq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM`.
pub const UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM: u16 = 13;

// enum uverbs_attrs_destroy_srq_cmd_attr_ids
/// `enum uverbs_attrs_destroy_srq_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_SRQ_HANDLE`.
pub const UVERBS_ATTR_DESTROY_SRQ_HANDLE: u16 = 0;
/// `enum uverbs_attrs_destroy_srq_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_SRQ_RESP`.
pub const UVERBS_ATTR_DESTROY_SRQ_RESP: u16 = 1;

// enum uverbs_methods_srq
/// `enum uverbs_methods_srq` member `UVERBS_METHOD_SRQ_CREATE`.
pub const UVERBS_METHOD_SRQ_CREATE: u16 = 0;
/// `enum uverbs_methods_srq` member `UVERBS_METHOD_SRQ_DESTROY`.
pub const UVERBS_METHOD_SRQ_DESTROY: u16 = 1;

// enum uverbs_methods_cq
/// `enum uverbs_methods_cq` member `UVERBS_METHOD_CQ_CREATE`.
pub const UVERBS_METHOD_CQ_CREATE: u16 = 0;
/// `enum uverbs_methods_cq` member `UVERBS_METHOD_CQ_DESTROY`.
pub const UVERBS_METHOD_CQ_DESTROY: u16 = 1;

// enum uverbs_attrs_create_wq_cmd_attr_ids
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_HANDLE`.
pub const UVERBS_ATTR_CREATE_WQ_HANDLE: u16 = 0;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_PD_HANDLE`.
pub const UVERBS_ATTR_CREATE_WQ_PD_HANDLE: u16 = 1;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_CQ_HANDLE`.
pub const UVERBS_ATTR_CREATE_WQ_CQ_HANDLE: u16 = 2;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_USER_HANDLE`.
pub const UVERBS_ATTR_CREATE_WQ_USER_HANDLE: u16 = 3;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_TYPE`.
pub const UVERBS_ATTR_CREATE_WQ_TYPE: u16 = 4;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_EVENT_FD`.
pub const UVERBS_ATTR_CREATE_WQ_EVENT_FD: u16 = 5;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_MAX_WR`.
pub const UVERBS_ATTR_CREATE_WQ_MAX_WR: u16 = 6;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_MAX_SGE`.
pub const UVERBS_ATTR_CREATE_WQ_MAX_SGE: u16 = 7;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_FLAGS`.
pub const UVERBS_ATTR_CREATE_WQ_FLAGS: u16 = 8;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_RESP_MAX_WR`.
pub const UVERBS_ATTR_CREATE_WQ_RESP_MAX_WR: u16 = 9;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_RESP_MAX_SGE`.
pub const UVERBS_ATTR_CREATE_WQ_RESP_MAX_SGE: u16 = 10;
/// `enum uverbs_attrs_create_wq_cmd_attr_ids` member `UVERBS_ATTR_CREATE_WQ_RESP_WQ_NUM`.
pub const UVERBS_ATTR_CREATE_WQ_RESP_WQ_NUM: u16 = 11;

// enum uverbs_attrs_destroy_wq_cmd_attr_ids
/// `enum uverbs_attrs_destroy_wq_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_WQ_HANDLE`.
pub const UVERBS_ATTR_DESTROY_WQ_HANDLE: u16 = 0;
/// `enum uverbs_attrs_destroy_wq_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_WQ_RESP`.
pub const UVERBS_ATTR_DESTROY_WQ_RESP: u16 = 1;

// enum uverbs_methods_wq
/// `enum uverbs_methods_wq` member `UVERBS_METHOD_WQ_CREATE`.
pub const UVERBS_METHOD_WQ_CREATE: u16 = 0;
/// `enum uverbs_methods_wq` member `UVERBS_METHOD_WQ_DESTROY`.
pub const UVERBS_METHOD_WQ_DESTROY: u16 = 1;

// enum uverbs_methods_actions_flow_action_ops
/// `enum uverbs_methods_actions_flow_action_ops` member `UVERBS_METHOD_FLOW_ACTION_ESP_CREATE`.
pub const UVERBS_METHOD_FLOW_ACTION_ESP_CREATE: u16 = 0;
/// `enum uverbs_methods_actions_flow_action_ops` member `UVERBS_METHOD_FLOW_ACTION_DESTROY`.
pub const UVERBS_METHOD_FLOW_ACTION_DESTROY: u16 = 1;
/// `enum uverbs_methods_actions_flow_action_ops` member `UVERBS_METHOD_FLOW_ACTION_ESP_MODIFY`.
pub const UVERBS_METHOD_FLOW_ACTION_ESP_MODIFY: u16 = 2;

// enum uverbs_attrs_alloc_dm_cmd_attr_ids
/// `enum uverbs_attrs_alloc_dm_cmd_attr_ids` member `UVERBS_ATTR_ALLOC_DM_HANDLE`.
pub const UVERBS_ATTR_ALLOC_DM_HANDLE: u16 = 0;
/// `enum uverbs_attrs_alloc_dm_cmd_attr_ids` member `UVERBS_ATTR_ALLOC_DM_LENGTH`.
pub const UVERBS_ATTR_ALLOC_DM_LENGTH: u16 = 1;
/// `enum uverbs_attrs_alloc_dm_cmd_attr_ids` member `UVERBS_ATTR_ALLOC_DM_ALIGNMENT`.
pub const UVERBS_ATTR_ALLOC_DM_ALIGNMENT: u16 = 2;

// enum uverbs_attrs_free_dm_cmd_attr_ids
/// `enum uverbs_attrs_free_dm_cmd_attr_ids` member `UVERBS_ATTR_FREE_DM_HANDLE`.
pub const UVERBS_ATTR_FREE_DM_HANDLE: u16 = 0;

// enum uverbs_methods_dm
/// `enum uverbs_methods_dm` member `UVERBS_METHOD_DM_ALLOC`.
pub const UVERBS_METHOD_DM_ALLOC: u16 = 0;
/// `enum uverbs_methods_dm` member `UVERBS_METHOD_DM_FREE`.
pub const UVERBS_METHOD_DM_FREE: u16 = 1;

// enum uverbs_attrs_alloc_dmah_cmd_attr_ids
/// `enum uverbs_attrs_alloc_dmah_cmd_attr_ids` member `UVERBS_ATTR_ALLOC_DMAH_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_ALLOC_DMAH_HANDLE: u16 = 0;
/// `enum uverbs_attrs_alloc_dmah_cmd_attr_ids` member `UVERBS_ATTR_ALLOC_DMAH_CPU_ID`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_ALLOC_DMAH_CPU_ID: u16 = 1;
/// `enum uverbs_attrs_alloc_dmah_cmd_attr_ids` member `UVERBS_ATTR_ALLOC_DMAH_TPH_MEM_TYPE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_ALLOC_DMAH_TPH_MEM_TYPE: u16 = 2;
/// `enum uverbs_attrs_alloc_dmah_cmd_attr_ids` member `UVERBS_ATTR_ALLOC_DMAH_PH`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_ALLOC_DMAH_PH: u16 = 3;

// enum uverbs_attrs_free_dmah_cmd_attr_ids
/// `enum uverbs_attrs_free_dmah_cmd_attr_ids` member `UVERBS_ATTR_FREE_DMA_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_FREE_DMA_HANDLE: u16 = 0;

// enum uverbs_methods_dmah
/// `enum uverbs_methods_dmah` member `UVERBS_METHOD_DMAH_ALLOC`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_DMAH_ALLOC: u16 = 0;
/// `enum uverbs_methods_dmah` member `UVERBS_METHOD_DMAH_FREE`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_DMAH_FREE: u16 = 1;

// enum uverbs_attrs_alloc_dmabuf_cmd_attr_ids
/// `enum uverbs_attrs_alloc_dmabuf_cmd_attr_ids` member `UVERBS_ATTR_ALLOC_DMABUF_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_ALLOC_DMABUF_HANDLE: u16 = 0;
/// `enum uverbs_attrs_alloc_dmabuf_cmd_attr_ids` member `UVERBS_ATTR_ALLOC_DMABUF_PGOFF`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_ALLOC_DMABUF_PGOFF: u16 = 1;

// enum uverbs_methods_dmabuf
/// `enum uverbs_methods_dmabuf` member `UVERBS_METHOD_DMABUF_ALLOC`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_DMABUF_ALLOC: u16 = 0;

// enum uverbs_attrs_reg_dm_mr_cmd_attr_ids
/// `enum uverbs_attrs_reg_dm_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DM_MR_HANDLE`.
pub const UVERBS_ATTR_REG_DM_MR_HANDLE: u16 = 0;
/// `enum uverbs_attrs_reg_dm_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DM_MR_OFFSET`.
pub const UVERBS_ATTR_REG_DM_MR_OFFSET: u16 = 1;
/// `enum uverbs_attrs_reg_dm_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DM_MR_LENGTH`.
pub const UVERBS_ATTR_REG_DM_MR_LENGTH: u16 = 2;
/// `enum uverbs_attrs_reg_dm_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DM_MR_PD_HANDLE`.
pub const UVERBS_ATTR_REG_DM_MR_PD_HANDLE: u16 = 3;
/// `enum uverbs_attrs_reg_dm_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS`.
pub const UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS: u16 = 4;
/// `enum uverbs_attrs_reg_dm_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DM_MR_DM_HANDLE`.
pub const UVERBS_ATTR_REG_DM_MR_DM_HANDLE: u16 = 5;
/// `enum uverbs_attrs_reg_dm_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DM_MR_RESP_LKEY`.
pub const UVERBS_ATTR_REG_DM_MR_RESP_LKEY: u16 = 6;
/// `enum uverbs_attrs_reg_dm_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DM_MR_RESP_RKEY`.
pub const UVERBS_ATTR_REG_DM_MR_RESP_RKEY: u16 = 7;

// enum uverbs_methods_mr
/// `enum uverbs_methods_mr` member `UVERBS_METHOD_DM_MR_REG`.
pub const UVERBS_METHOD_DM_MR_REG: u16 = 0;
/// `enum uverbs_methods_mr` member `UVERBS_METHOD_MR_DESTROY`.
pub const UVERBS_METHOD_MR_DESTROY: u16 = 1;
/// `enum uverbs_methods_mr` member `UVERBS_METHOD_ADVISE_MR`.
pub const UVERBS_METHOD_ADVISE_MR: u16 = 2;
/// `enum uverbs_methods_mr` member `UVERBS_METHOD_QUERY_MR`.
pub const UVERBS_METHOD_QUERY_MR: u16 = 3;
/// `enum uverbs_methods_mr` member `UVERBS_METHOD_REG_DMABUF_MR`.
pub const UVERBS_METHOD_REG_DMABUF_MR: u16 = 4;
/// `enum uverbs_methods_mr` member `UVERBS_METHOD_REG_MR`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_REG_MR: u16 = 5;

// enum uverbs_attrs_mr_destroy_ids
/// `enum uverbs_attrs_mr_destroy_ids` member `UVERBS_ATTR_DESTROY_MR_HANDLE`.
pub const UVERBS_ATTR_DESTROY_MR_HANDLE: u16 = 0;

// enum uverbs_attrs_advise_mr_cmd_attr_ids
/// `enum uverbs_attrs_advise_mr_cmd_attr_ids` member `UVERBS_ATTR_ADVISE_MR_PD_HANDLE`.
pub const UVERBS_ATTR_ADVISE_MR_PD_HANDLE: u16 = 0;
/// `enum uverbs_attrs_advise_mr_cmd_attr_ids` member `UVERBS_ATTR_ADVISE_MR_ADVICE`.
pub const UVERBS_ATTR_ADVISE_MR_ADVICE: u16 = 1;
/// `enum uverbs_attrs_advise_mr_cmd_attr_ids` member `UVERBS_ATTR_ADVISE_MR_FLAGS`.
pub const UVERBS_ATTR_ADVISE_MR_FLAGS: u16 = 2;
/// `enum uverbs_attrs_advise_mr_cmd_attr_ids` member `UVERBS_ATTR_ADVISE_MR_SGE_LIST`.
pub const UVERBS_ATTR_ADVISE_MR_SGE_LIST: u16 = 3;

// enum uverbs_attrs_query_mr_cmd_attr_ids
/// `enum uverbs_attrs_query_mr_cmd_attr_ids` member `UVERBS_ATTR_QUERY_MR_HANDLE`.
pub const UVERBS_ATTR_QUERY_MR_HANDLE: u16 = 0;
/// `enum uverbs_attrs_query_mr_cmd_attr_ids` member `UVERBS_ATTR_QUERY_MR_RESP_LKEY`.
pub const UVERBS_ATTR_QUERY_MR_RESP_LKEY: u16 = 1;
/// `enum uverbs_attrs_query_mr_cmd_attr_ids` member `UVERBS_ATTR_QUERY_MR_RESP_RKEY`.
pub const UVERBS_ATTR_QUERY_MR_RESP_RKEY: u16 = 2;
/// `enum uverbs_attrs_query_mr_cmd_attr_ids` member `UVERBS_ATTR_QUERY_MR_RESP_LENGTH`.
pub const UVERBS_ATTR_QUERY_MR_RESP_LENGTH: u16 = 3;
/// `enum uverbs_attrs_query_mr_cmd_attr_ids` member `UVERBS_ATTR_QUERY_MR_RESP_IOVA`.
pub const UVERBS_ATTR_QUERY_MR_RESP_IOVA: u16 = 4;

// enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids
/// `enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DMABUF_MR_HANDLE`.
pub const UVERBS_ATTR_REG_DMABUF_MR_HANDLE: u16 = 0;
/// `enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE`.
pub const UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE: u16 = 1;
/// `enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DMABUF_MR_OFFSET`.
pub const UVERBS_ATTR_REG_DMABUF_MR_OFFSET: u16 = 2;
/// `enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DMABUF_MR_LENGTH`.
pub const UVERBS_ATTR_REG_DMABUF_MR_LENGTH: u16 = 3;
/// `enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DMABUF_MR_IOVA`.
pub const UVERBS_ATTR_REG_DMABUF_MR_IOVA: u16 = 4;
/// `enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DMABUF_MR_FD`.
pub const UVERBS_ATTR_REG_DMABUF_MR_FD: u16 = 5;
/// `enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS`.
pub const UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS: u16 = 6;
/// `enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY`.
pub const UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY: u16 = 7;
/// `enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY`.
pub const UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY: u16 = 8;

// enum uverbs_attrs_reg_mr_cmd_attr_ids
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_HANDLE: u16 = 0;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_PD_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_PD_HANDLE: u16 = 1;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_DMA_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_DMA_HANDLE: u16 = 2;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_IOVA`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_IOVA: u16 = 3;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_ADDR`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_ADDR: u16 = 4;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_LENGTH`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_LENGTH: u16 = 5;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_ACCESS_FLAGS`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_ACCESS_FLAGS: u16 = 6;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_FD`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_FD: u16 = 7;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_FD_OFFSET`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_FD_OFFSET: u16 = 8;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_RESP_LKEY`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_RESP_LKEY: u16 = 9;
/// `enum uverbs_attrs_reg_mr_cmd_attr_ids` member `UVERBS_ATTR_REG_MR_RESP_RKEY`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_REG_MR_RESP_RKEY: u16 = 10;

// enum uverbs_attrs_create_counters_cmd_attr_ids
/// `enum uverbs_attrs_create_counters_cmd_attr_ids` member `UVERBS_ATTR_CREATE_COUNTERS_HANDLE`.
pub const UVERBS_ATTR_CREATE_COUNTERS_HANDLE: u16 = 0;

// enum uverbs_attrs_destroy_counters_cmd_attr_ids
/// `enum uverbs_attrs_destroy_counters_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_COUNTERS_HANDLE`.
pub const UVERBS_ATTR_DESTROY_COUNTERS_HANDLE: u16 = 0;

// enum uverbs_attrs_read_counters_cmd_attr_ids
/// `enum uverbs_attrs_read_counters_cmd_attr_ids` member `UVERBS_ATTR_READ_COUNTERS_HANDLE`.
pub const UVERBS_ATTR_READ_COUNTERS_HANDLE: u16 = 0;
/// `enum uverbs_attrs_read_counters_cmd_attr_ids` member `UVERBS_ATTR_READ_COUNTERS_BUFF`.
pub const UVERBS_ATTR_READ_COUNTERS_BUFF: u16 = 1;
/// `enum uverbs_attrs_read_counters_cmd_attr_ids` member `UVERBS_ATTR_READ_COUNTERS_FLAGS`.
pub const UVERBS_ATTR_READ_COUNTERS_FLAGS: u16 = 2;

// enum uverbs_methods_actions_counters_ops
/// `enum uverbs_methods_actions_counters_ops` member `UVERBS_METHOD_COUNTERS_CREATE`.
pub const UVERBS_METHOD_COUNTERS_CREATE: u16 = 0;
/// `enum uverbs_methods_actions_counters_ops` member `UVERBS_METHOD_COUNTERS_DESTROY`.
pub const UVERBS_METHOD_COUNTERS_DESTROY: u16 = 1;
/// `enum uverbs_methods_actions_counters_ops` member `UVERBS_METHOD_COUNTERS_READ`.
pub const UVERBS_METHOD_COUNTERS_READ: u16 = 2;

// enum uverbs_attrs_info_handles_id
/// `enum uverbs_attrs_info_handles_id` member `UVERBS_ATTR_INFO_OBJECT_ID`.
pub const UVERBS_ATTR_INFO_OBJECT_ID: u16 = 0;
/// `enum uverbs_attrs_info_handles_id` member `UVERBS_ATTR_INFO_TOTAL_HANDLES`.
pub const UVERBS_ATTR_INFO_TOTAL_HANDLES: u16 = 1;
/// `enum uverbs_attrs_info_handles_id` member `UVERBS_ATTR_INFO_HANDLES_LIST`.
pub const UVERBS_ATTR_INFO_HANDLES_LIST: u16 = 2;

// enum uverbs_methods_pd
/// `enum uverbs_methods_pd` member `UVERBS_METHOD_PD_DESTROY`.
pub const UVERBS_METHOD_PD_DESTROY: u16 = 0;

// enum uverbs_attrs_pd_destroy_ids
/// `enum uverbs_attrs_pd_destroy_ids` member `UVERBS_ATTR_DESTROY_PD_HANDLE`.
pub const UVERBS_ATTR_DESTROY_PD_HANDLE: u16 = 0;

// enum uverbs_methods_mw
/// `enum uverbs_methods_mw` member `UVERBS_METHOD_MW_DESTROY`.
pub const UVERBS_METHOD_MW_DESTROY: u16 = 0;

// enum uverbs_attrs_mw_destroy_ids
/// `enum uverbs_attrs_mw_destroy_ids` member `UVERBS_ATTR_DESTROY_MW_HANDLE`.
pub const UVERBS_ATTR_DESTROY_MW_HANDLE: u16 = 0;

// enum uverbs_methods_xrcd
/// `enum uverbs_methods_xrcd` member `UVERBS_METHOD_XRCD_DESTROY`.
pub const UVERBS_METHOD_XRCD_DESTROY: u16 = 0;

// enum uverbs_attrs_xrcd_destroy_ids
/// `enum uverbs_attrs_xrcd_destroy_ids` member `UVERBS_ATTR_DESTROY_XRCD_HANDLE`.
pub const UVERBS_ATTR_DESTROY_XRCD_HANDLE: u16 = 0;

// enum uverbs_methods_ah
/// `enum uverbs_methods_ah` member `UVERBS_METHOD_AH_DESTROY`.
pub const UVERBS_METHOD_AH_DESTROY: u16 = 0;

// enum uverbs_attrs_ah_destroy_ids
/// `enum uverbs_attrs_ah_destroy_ids` member `UVERBS_ATTR_DESTROY_AH_HANDLE`.
pub const UVERBS_ATTR_DESTROY_AH_HANDLE: u16 = 0;

// enum uverbs_methods_rwq_ind_tbl
/// `enum uverbs_methods_rwq_ind_tbl` member `UVERBS_METHOD_RWQ_IND_TBL_DESTROY`.
pub const UVERBS_METHOD_RWQ_IND_TBL_DESTROY: u16 = 0;

// enum uverbs_attrs_rwq_ind_tbl_destroy_ids
/// `enum uverbs_attrs_rwq_ind_tbl_destroy_ids` member `UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE`.
pub const UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE: u16 = 0;

// enum uverbs_methods_flow
/// `enum uverbs_methods_flow` member `UVERBS_METHOD_FLOW_DESTROY`.
pub const UVERBS_METHOD_FLOW_DESTROY: u16 = 0;

// enum uverbs_attrs_flow_destroy_ids
/// `enum uverbs_attrs_flow_destroy_ids` member `UVERBS_ATTR_DESTROY_FLOW_HANDLE`.
pub const UVERBS_ATTR_DESTROY_FLOW_HANDLE: u16 = 0;

// enum uverbs_method_async_event
/// `enum uverbs_method_async_event` member `UVERBS_METHOD_ASYNC_EVENT_ALLOC`.
pub const UVERBS_METHOD_ASYNC_EVENT_ALLOC: u16 = 0;

// enum uverbs_attrs_async_event_create
/// `enum uverbs_attrs_async_event_create` member `UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE`.
pub const UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE: u16 = 0;

// enum uverbs_attrs_query_gid_table_cmd_attr_ids
/// `enum uverbs_attrs_query_gid_table_cmd_attr_ids` member `UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE`.
pub const UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE: u16 = 0;
/// `enum uverbs_attrs_query_gid_table_cmd_attr_ids` member `UVERBS_ATTR_QUERY_GID_TABLE_FLAGS`.
pub const UVERBS_ATTR_QUERY_GID_TABLE_FLAGS: u16 = 1;
/// `enum uverbs_attrs_query_gid_table_cmd_attr_ids` member `UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES`.
pub const UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES: u16 = 2;
/// `enum uverbs_attrs_query_gid_table_cmd_attr_ids` member `UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES`.
pub const UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES: u16 = 3;

// enum uverbs_attrs_query_gid_entry_cmd_attr_ids
/// `enum uverbs_attrs_query_gid_entry_cmd_attr_ids` member `UVERBS_ATTR_QUERY_GID_ENTRY_PORT`.
pub const UVERBS_ATTR_QUERY_GID_ENTRY_PORT: u16 = 0;
/// `enum uverbs_attrs_query_gid_entry_cmd_attr_ids` member `UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX`.
pub const UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX: u16 = 1;
/// `enum uverbs_attrs_query_gid_entry_cmd_attr_ids` member `UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS`.
pub const UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS: u16 = 2;
/// `enum uverbs_attrs_query_gid_entry_cmd_attr_ids` member `UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY`.
pub const UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY: u16 = 3;

// enum uverbs_methods_comp_cntr
/// `enum uverbs_methods_comp_cntr` member `UVERBS_METHOD_COMP_CNTR_CREATE`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_COMP_CNTR_CREATE: u16 = 0;
/// `enum uverbs_methods_comp_cntr` member `UVERBS_METHOD_COMP_CNTR_DESTROY`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_COMP_CNTR_DESTROY: u16 = 1;
/// `enum uverbs_methods_comp_cntr` member `UVERBS_METHOD_COMP_CNTR_MODIFY`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_COMP_CNTR_MODIFY: u16 = 2;
/// `enum uverbs_methods_comp_cntr` member `UVERBS_METHOD_COMP_CNTR_READ`. Newer than the 6.1 headers.
pub const UVERBS_METHOD_COMP_CNTR_READ: u16 = 3;

// enum uverbs_attrs_create_comp_cntr_cmd_attr_ids
/// `enum uverbs_attrs_create_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE: u16 = 0;

// enum uverbs_attrs_destroy_comp_cntr_cmd_attr_ids
/// `enum uverbs_attrs_destroy_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_DESTROY_COMP_CNTR_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_DESTROY_COMP_CNTR_HANDLE: u16 = 0;

// enum uverbs_attrs_modify_comp_cntr_cmd_attr_ids
/// `enum uverbs_attrs_modify_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_MODIFY_COMP_CNTR_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_MODIFY_COMP_CNTR_HANDLE: u16 = 0;
/// `enum uverbs_attrs_modify_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_MODIFY_COMP_CNTR_ENTRY`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_MODIFY_COMP_CNTR_ENTRY: u16 = 1;
/// `enum uverbs_attrs_modify_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_MODIFY_COMP_CNTR_OP`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_MODIFY_COMP_CNTR_OP: u16 = 2;
/// `enum uverbs_attrs_modify_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_MODIFY_COMP_CNTR_VALUE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_MODIFY_COMP_CNTR_VALUE: u16 = 3;

// enum uverbs_attrs_read_comp_cntr_cmd_attr_ids
/// `enum uverbs_attrs_read_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_READ_COMP_CNTR_HANDLE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_READ_COMP_CNTR_HANDLE: u16 = 0;
/// `enum uverbs_attrs_read_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_READ_COMP_CNTR_ENTRY`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_READ_COMP_CNTR_ENTRY: u16 = 1;
/// `enum uverbs_attrs_read_comp_cntr_cmd_attr_ids` member `UVERBS_ATTR_READ_COMP_CNTR_RESP_VALUE`. Newer than the 6.1 headers.
pub const UVERBS_ATTR_READ_COMP_CNTR_RESP_VALUE: u16 = 2;
