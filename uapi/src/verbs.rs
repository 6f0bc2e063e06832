//! Verbs enums, flags and small structs of the ioctl interface, plus the kernel-internal
//! values that travel through uverbs structs.
//!
//! Mirrors `rdma/ib_user_ioctl_verbs.h` (version basis: rdma-core 65.0 `kernel-headers`;
//! items marked "Newer than the 6.1 headers" are missing from Linux 6.1's copy).
//!
//! The second half of this module holds numbers that are *not* in any uapi header but that
//! the kernel writes into / reads from uverbs structs unchanged: they come from the kernel's
//! `include/rdma/ib_verbs.h` (WC status, WC receive opcodes and flags, send flags, async event
//! types, QP/port states, MTUs, attribute masks, ...) and from `rdma/rdma_netlink.h` (node
//! types). rdma-core's libibverbs passes them through with the same numbers; where its
//! `IBV_*` value differs that is noted.

/// `IB_UVERBS_ACCESS_OPTIONAL_FIRST`: lowest "optional" access bit (a kernel that does not
/// know an optional bit ignores it instead of failing).
pub const IB_UVERBS_ACCESS_OPTIONAL_FIRST: u32 = 1 << 20;
/// `IB_UVERBS_ACCESS_OPTIONAL_LAST`: highest "optional" access bit.
pub const IB_UVERBS_ACCESS_OPTIONAL_LAST: u32 = 1 << 29;

// enum ib_uverbs_core_support
/// `enum ib_uverbs_core_support` member `IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS`.
pub const IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS: u64 = 1 << 0;
/// `enum ib_uverbs_core_support` member `IB_UVERBS_CORE_SUPPORT_ROBUST_UDATA`. Newer than the 6.1 headers.
pub const IB_UVERBS_CORE_SUPPORT_ROBUST_UDATA: u64 = 1 << 1;

// enum ib_uverbs_access_flags
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_LOCAL_WRITE`.
pub const IB_UVERBS_ACCESS_LOCAL_WRITE: u32 = 1 << 0;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_REMOTE_WRITE`.
pub const IB_UVERBS_ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_REMOTE_READ`.
pub const IB_UVERBS_ACCESS_REMOTE_READ: u32 = 1 << 2;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_REMOTE_ATOMIC`.
pub const IB_UVERBS_ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_MW_BIND`.
pub const IB_UVERBS_ACCESS_MW_BIND: u32 = 1 << 4;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_ZERO_BASED`.
pub const IB_UVERBS_ACCESS_ZERO_BASED: u32 = 1 << 5;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_ON_DEMAND`.
pub const IB_UVERBS_ACCESS_ON_DEMAND: u32 = 1 << 6;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_HUGETLB`.
pub const IB_UVERBS_ACCESS_HUGETLB: u32 = 1 << 7;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_FLUSH_GLOBAL`. Newer than the 6.1 headers.
pub const IB_UVERBS_ACCESS_FLUSH_GLOBAL: u32 = 1 << 8;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_FLUSH_PERSISTENT`. Newer than the 6.1 headers.
pub const IB_UVERBS_ACCESS_FLUSH_PERSISTENT: u32 = 1 << 9;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_RELAXED_ORDERING` (= `IB_UVERBS_ACCESS_OPTIONAL_FIRST`).
pub const IB_UVERBS_ACCESS_RELAXED_ORDERING: u32 = 1 << 20;
/// `enum ib_uverbs_access_flags` member `IB_UVERBS_ACCESS_OPTIONAL_RANGE` (= `((IB_UVERBS_ACCESS_OPTIONAL_LAST << 1) - 1) & ~(IB_UVERBS_ACCESS_OPTIONAL_FIRST - 1)`).
pub const IB_UVERBS_ACCESS_OPTIONAL_RANGE: u32 = 0x3ff00000;

// enum ib_uverbs_srq_type
/// `enum ib_uverbs_srq_type` member `IB_UVERBS_SRQT_BASIC`.
pub const IB_UVERBS_SRQT_BASIC: u32 = 0;
/// `enum ib_uverbs_srq_type` member `IB_UVERBS_SRQT_XRC`.
pub const IB_UVERBS_SRQT_XRC: u32 = 1;
/// `enum ib_uverbs_srq_type` member `IB_UVERBS_SRQT_TM`.
pub const IB_UVERBS_SRQT_TM: u32 = 2;

// enum ib_uverbs_wq_type
/// `enum ib_uverbs_wq_type` member `IB_UVERBS_WQT_RQ`.
pub const IB_UVERBS_WQT_RQ: u32 = 0;

// enum ib_uverbs_wq_flags
/// `enum ib_uverbs_wq_flags` member `IB_UVERBS_WQ_FLAGS_CVLAN_STRIPPING`.
pub const IB_UVERBS_WQ_FLAGS_CVLAN_STRIPPING: u32 = 1 << 0;
/// `enum ib_uverbs_wq_flags` member `IB_UVERBS_WQ_FLAGS_SCATTER_FCS`.
pub const IB_UVERBS_WQ_FLAGS_SCATTER_FCS: u32 = 1 << 1;
/// `enum ib_uverbs_wq_flags` member `IB_UVERBS_WQ_FLAGS_DELAY_DROP`.
pub const IB_UVERBS_WQ_FLAGS_DELAY_DROP: u32 = 1 << 2;
/// `enum ib_uverbs_wq_flags` member `IB_UVERBS_WQ_FLAGS_PCI_WRITE_END_PADDING`.
pub const IB_UVERBS_WQ_FLAGS_PCI_WRITE_END_PADDING: u32 = 1 << 3;

// enum ib_uverbs_qp_type
/// `enum ib_uverbs_qp_type` member `IB_UVERBS_QPT_RC`.
pub const IB_UVERBS_QPT_RC: u8 = 2;
/// `enum ib_uverbs_qp_type` member `IB_UVERBS_QPT_UC`.
pub const IB_UVERBS_QPT_UC: u8 = 3;
/// `enum ib_uverbs_qp_type` member `IB_UVERBS_QPT_UD`.
pub const IB_UVERBS_QPT_UD: u8 = 4;
/// `enum ib_uverbs_qp_type` member `IB_UVERBS_QPT_RAW_PACKET`.
pub const IB_UVERBS_QPT_RAW_PACKET: u8 = 8;
/// `enum ib_uverbs_qp_type` member `IB_UVERBS_QPT_XRC_INI`.
pub const IB_UVERBS_QPT_XRC_INI: u8 = 9;
/// `enum ib_uverbs_qp_type` member `IB_UVERBS_QPT_XRC_TGT`.
pub const IB_UVERBS_QPT_XRC_TGT: u8 = 10;
/// `enum ib_uverbs_qp_type` member `IB_UVERBS_QPT_DRIVER`.
pub const IB_UVERBS_QPT_DRIVER: u8 = 255;

// enum ib_uverbs_qp_create_flags
/// `enum ib_uverbs_qp_create_flags` member `IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK`.
pub const IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK: u32 = 1 << 1;
/// `enum ib_uverbs_qp_create_flags` member `IB_UVERBS_QP_CREATE_SCATTER_FCS`.
pub const IB_UVERBS_QP_CREATE_SCATTER_FCS: u32 = 1 << 8;
/// `enum ib_uverbs_qp_create_flags` member `IB_UVERBS_QP_CREATE_CVLAN_STRIPPING`.
pub const IB_UVERBS_QP_CREATE_CVLAN_STRIPPING: u32 = 1 << 9;
/// `enum ib_uverbs_qp_create_flags` member `IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING`.
pub const IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING: u32 = 1 << 11;
/// `enum ib_uverbs_qp_create_flags` member `IB_UVERBS_QP_CREATE_SQ_SIG_ALL`.
pub const IB_UVERBS_QP_CREATE_SQ_SIG_ALL: u32 = 1 << 12;

// enum ib_uverbs_query_port_cap_flags
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_SM`.
pub const IB_UVERBS_PCF_SM: u32 = 1 << 1;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_NOTICE_SUP`.
pub const IB_UVERBS_PCF_NOTICE_SUP: u32 = 1 << 2;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_TRAP_SUP`.
pub const IB_UVERBS_PCF_TRAP_SUP: u32 = 1 << 3;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_OPT_IPD_SUP`.
pub const IB_UVERBS_PCF_OPT_IPD_SUP: u32 = 1 << 4;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_AUTO_MIGR_SUP`.
pub const IB_UVERBS_PCF_AUTO_MIGR_SUP: u32 = 1 << 5;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_SL_MAP_SUP`.
pub const IB_UVERBS_PCF_SL_MAP_SUP: u32 = 1 << 6;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_MKEY_NVRAM`.
pub const IB_UVERBS_PCF_MKEY_NVRAM: u32 = 1 << 7;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_PKEY_NVRAM`.
pub const IB_UVERBS_PCF_PKEY_NVRAM: u32 = 1 << 8;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_LED_INFO_SUP`.
pub const IB_UVERBS_PCF_LED_INFO_SUP: u32 = 1 << 9;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_SM_DISABLED`.
pub const IB_UVERBS_PCF_SM_DISABLED: u32 = 1 << 10;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_SYS_IMAGE_GUID_SUP`.
pub const IB_UVERBS_PCF_SYS_IMAGE_GUID_SUP: u32 = 1 << 11;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_PKEY_SW_EXT_PORT_TRAP_SUP`.
pub const IB_UVERBS_PCF_PKEY_SW_EXT_PORT_TRAP_SUP: u32 = 1 << 12;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_EXTENDED_SPEEDS_SUP`.
pub const IB_UVERBS_PCF_EXTENDED_SPEEDS_SUP: u32 = 1 << 14;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_CM_SUP`.
pub const IB_UVERBS_PCF_CM_SUP: u32 = 1 << 16;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_SNMP_TUNNEL_SUP`.
pub const IB_UVERBS_PCF_SNMP_TUNNEL_SUP: u32 = 1 << 17;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_REINIT_SUP`.
pub const IB_UVERBS_PCF_REINIT_SUP: u32 = 1 << 18;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_DEVICE_MGMT_SUP`.
pub const IB_UVERBS_PCF_DEVICE_MGMT_SUP: u32 = 1 << 19;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_VENDOR_CLASS_SUP`.
pub const IB_UVERBS_PCF_VENDOR_CLASS_SUP: u32 = 1 << 20;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_DR_NOTICE_SUP`.
pub const IB_UVERBS_PCF_DR_NOTICE_SUP: u32 = 1 << 21;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_CAP_MASK_NOTICE_SUP`.
pub const IB_UVERBS_PCF_CAP_MASK_NOTICE_SUP: u32 = 1 << 22;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_BOOT_MGMT_SUP`.
pub const IB_UVERBS_PCF_BOOT_MGMT_SUP: u32 = 1 << 23;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_LINK_LATENCY_SUP`.
pub const IB_UVERBS_PCF_LINK_LATENCY_SUP: u32 = 1 << 24;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_CLIENT_REG_SUP`.
pub const IB_UVERBS_PCF_CLIENT_REG_SUP: u32 = 1 << 25;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_LINK_SPEED_WIDTH_TABLE_SUP`.
pub const IB_UVERBS_PCF_LINK_SPEED_WIDTH_TABLE_SUP: u32 = 1 << 27;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_VENDOR_SPECIFIC_MADS_TABLE_SUP`.
pub const IB_UVERBS_PCF_VENDOR_SPECIFIC_MADS_TABLE_SUP: u32 = 1 << 28;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_MCAST_PKEY_TRAP_SUPPRESSION_SUP`.
pub const IB_UVERBS_PCF_MCAST_PKEY_TRAP_SUPPRESSION_SUP: u32 = 1 << 29;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_MCAST_FDB_TOP_SUP`.
pub const IB_UVERBS_PCF_MCAST_FDB_TOP_SUP: u32 = 1 << 30;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_HIERARCHY_INFO_SUP`.
pub const IB_UVERBS_PCF_HIERARCHY_INFO_SUP: u32 = 1 << 31;
/// `enum ib_uverbs_query_port_cap_flags` member `IB_UVERBS_PCF_IP_BASED_GIDS`.
pub const IB_UVERBS_PCF_IP_BASED_GIDS: u32 = 1 << 26;

// enum ib_uverbs_query_port_flags
/// `enum ib_uverbs_query_port_flags` member `IB_UVERBS_QPF_GRH_REQUIRED`.
pub const IB_UVERBS_QPF_GRH_REQUIRED: u8 = 1 << 0;

// enum ib_uverbs_flow_action_esp_keymat
/// `enum ib_uverbs_flow_action_esp_keymat` member `IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM`.
pub const IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM: u32 = 0;

// enum ib_uverbs_flow_action_esp_keymat_aes_gcm_iv_algo
/// `enum ib_uverbs_flow_action_esp_keymat_aes_gcm_iv_algo` member `IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ`.
pub const IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ: u32 = 0;

// enum ib_uverbs_flow_action_esp_replay
/// `enum ib_uverbs_flow_action_esp_replay` member `IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE`.
pub const IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE: u32 = 0;
/// `enum ib_uverbs_flow_action_esp_replay` member `IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP`.
pub const IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP: u32 = 1;

// enum ib_uverbs_flow_action_esp_flags
/// `enum ib_uverbs_flow_action_esp_flags` member `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO`.
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO: u32 = 0;
/// `enum ib_uverbs_flow_action_esp_flags` member `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD`.
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD: u32 = 1 << 0;
/// `enum ib_uverbs_flow_action_esp_flags` member `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL`.
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL: u32 = 0;
/// `enum ib_uverbs_flow_action_esp_flags` member `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT`.
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT: u32 = 1 << 1;
/// `enum ib_uverbs_flow_action_esp_flags` member `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT`.
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT: u32 = 0;
/// `enum ib_uverbs_flow_action_esp_flags` member `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT`.
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT: u32 = 1 << 2;
/// `enum ib_uverbs_flow_action_esp_flags` member `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW`.
pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW: u32 = 1 << 3;

// enum ib_uverbs_read_counters_flags
/// `enum ib_uverbs_read_counters_flags` member `IB_UVERBS_READ_COUNTERS_PREFER_CACHED`.
pub const IB_UVERBS_READ_COUNTERS_PREFER_CACHED: u32 = 1 << 0;

// enum ib_uverbs_advise_mr_advice
/// `enum ib_uverbs_advise_mr_advice` member `IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH`.
pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH: u32 = 0;
/// `enum ib_uverbs_advise_mr_advice` member `IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE`.
pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE: u32 = 1;
/// `enum ib_uverbs_advise_mr_advice` member `IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT`.
pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT: u32 = 2;

// enum ib_uverbs_advise_mr_flag
/// `enum ib_uverbs_advise_mr_flag` member `IB_UVERBS_ADVISE_MR_FLAG_FLUSH`.
pub const IB_UVERBS_ADVISE_MR_FLAG_FLUSH: u32 = 1 << 0;

// enum ib_uverbs_gid_type
/// `enum ib_uverbs_gid_type` member `IB_UVERBS_GID_TYPE_IB`.
pub const IB_UVERBS_GID_TYPE_IB: u32 = 0;
/// `enum ib_uverbs_gid_type` member `IB_UVERBS_GID_TYPE_ROCE_V1`.
pub const IB_UVERBS_GID_TYPE_ROCE_V1: u32 = 1;
/// `enum ib_uverbs_gid_type` member `IB_UVERBS_GID_TYPE_ROCE_V2`.
pub const IB_UVERBS_GID_TYPE_ROCE_V2: u32 = 2;

// enum ib_uverbs_buffer_type
/// `enum ib_uverbs_buffer_type` member `IB_UVERBS_BUFFER_TYPE_DMABUF`. Newer than the 6.1 headers.
pub const IB_UVERBS_BUFFER_TYPE_DMABUF: u32 = 0;
/// `enum ib_uverbs_buffer_type` member `IB_UVERBS_BUFFER_TYPE_VA`. Newer than the 6.1 headers.
pub const IB_UVERBS_BUFFER_TYPE_VA: u32 = 1;

// enum ib_uverbs_comp_cntr_entry
/// `enum ib_uverbs_comp_cntr_entry` member `IB_UVERBS_COMP_CNTR_ENTRY_COMP`. Newer than the 6.1 headers.
pub const IB_UVERBS_COMP_CNTR_ENTRY_COMP: u32 = 0;
/// `enum ib_uverbs_comp_cntr_entry` member `IB_UVERBS_COMP_CNTR_ENTRY_ERR`. Newer than the 6.1 headers.
pub const IB_UVERBS_COMP_CNTR_ENTRY_ERR: u32 = 1;

// enum ib_uverbs_comp_cntr_modify_op
/// `enum ib_uverbs_comp_cntr_modify_op` member `IB_UVERBS_COMP_CNTR_MODIFY_OP_SET`. Newer than the 6.1 headers.
pub const IB_UVERBS_COMP_CNTR_MODIFY_OP_SET: u32 = 0;
/// `enum ib_uverbs_comp_cntr_modify_op` member `IB_UVERBS_COMP_CNTR_MODIFY_OP_INC`. Newer than the 6.1 headers.
pub const IB_UVERBS_COMP_CNTR_MODIFY_OP_INC: u32 = 1;

// enum ib_uverbs_qp_attach_comp_cntr_op
/// `enum ib_uverbs_qp_attach_comp_cntr_op` member `IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND`. Newer than the 6.1 headers.
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND: u32 = 1 << 0;
/// `enum ib_uverbs_qp_attach_comp_cntr_op` member `IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV`. Newer than the 6.1 headers.
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV: u32 = 1 << 1;
/// `enum ib_uverbs_qp_attach_comp_cntr_op` member `IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_READ`. Newer than the 6.1 headers.
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_READ: u32 = 1 << 2;
/// `enum ib_uverbs_qp_attach_comp_cntr_op` member `IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ`. Newer than the 6.1 headers.
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ: u32 = 1 << 3;
/// `enum ib_uverbs_qp_attach_comp_cntr_op` member `IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE`. Newer than the 6.1 headers.
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE: u32 = 1 << 4;
/// `enum ib_uverbs_qp_attach_comp_cntr_op` member `IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE`. Newer than the 6.1 headers.
pub const IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE: u32 = 1 << 5;

uapi_struct! {
    /// AES-GCM key material of a flow action ESP (`UVERBS_ATTR_FLOW_ACTION_ESP_KEYMAT`).
    #[repr(align(8))]
    pub struct IbUverbsFlowActionEspKeymatAesGcm = "ib_uverbs_flow_action_esp_keymat_aes_gcm", size 56 {
        pub iv: u64,
        /// `IB_UVERBS_FLOW_ACTION_IV_ALGO_*`.
        pub iv_algo: u32,
        pub salt: u32,
        pub icv_len: u32,
        pub key_len: u32,
        pub aes_key: [u32; 8],
    }

    /// Replay-protection bitmap size of a flow action ESP.
    pub struct IbUverbsFlowActionEspReplayBmp = "ib_uverbs_flow_action_esp_replay_bmp", size 4 {
        pub size: u32,
    }

    /// One link of the ESP encapsulation filter list (`UVERBS_ATTR_FLOW_ACTION_ESP_ENCAP`).
    #[repr(align(8))]
    pub struct IbUverbsFlowActionEspEncap = "ib_uverbs_flow_action_esp_encap", size 24 {
        /// User pointer to a `flow_xxx_filter`.
        pub val_ptr: u64,
        /// User pointer to the next `ib_uverbs_flow_action_esp_encap`, or 0.
        pub next_ptr: u64,
        pub len: u16,
        /// `enum ib_flow_spec_type` of the filter `val_ptr` points to.
        pub r#type: u16,
        /// Not a C field: the 4 bytes of implicit tail padding C leaves here, spelled out.
        pub pad: u32,
    }

    /// ESP attributes of a flow action (`UVERBS_ATTR_FLOW_ACTION_ESP_ATTRS`).
    #[repr(align(8))]
    pub struct IbUverbsFlowActionEsp = "ib_uverbs_flow_action_esp", size 24 {
        pub spi: u32,
        pub seq: u32,
        pub tfc_pad: u32,
        /// `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_*`.
        pub flags: u32,
        pub hard_limit_pkts: u64,
    }

    /// Response of `UVERBS_METHOD_QUERY_PORT` (`UVERBS_ATTR_QUERY_PORT_RESP`).
    pub struct IbUverbsQueryPortRespEx = "ib_uverbs_query_port_resp_ex", size 48 {
        pub legacy_resp: crate::write::IbUverbsQueryPortResp,
        pub port_cap_flags2: u16,
        /// 6.1 headers: `reserved[6]` (covering `active_speed_ex` too).
        pub reserved: [u8; 2],
        /// Extended active speed. Newer than the 6.1 headers (a 6.1 kernel leaves it 0).
        pub active_speed_ex: u32,
    }

    /// QP capabilities (`UVERBS_ATTR_CREATE_QP_CAP` / `UVERBS_ATTR_CREATE_QP_RESP_CAP`).
    pub struct IbUverbsQpCap = "ib_uverbs_qp_cap", size 20 {
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
    }

    /// One GID table entry (`UVERBS_METHOD_QUERY_GID_TABLE` / `QUERY_GID_ENTRY`).
    #[repr(align(8))]
    pub struct IbUverbsGidEntry = "ib_uverbs_gid_entry", size 32 {
        /// The GID, 16 bytes in network byte order (C: `__aligned_u64 gid[2]`).
        pub gid: [u64; 2],
        pub gid_index: u32,
        pub port_num: u32,
        /// `IB_UVERBS_GID_TYPE_*`.
        pub gid_type: u32,
        /// 0 if no netdev is associated.
        pub netdev_ifindex: u32,
    }

    /// A buffer backed by a dma-buf or a user virtual address (`UVERBS_ATTR_*_BUF_UMEM`).
    /// Newer than the 6.1 headers.
    #[repr(align(8))]
    pub struct IbUverbsBufferDesc = "ib_uverbs_buffer_desc", size 32 {
        /// `IB_UVERBS_BUFFER_TYPE_*`.
        pub r#type: u32,
        /// dma-buf fd (`IB_UVERBS_BUFFER_TYPE_DMABUF`).
        pub fd: i32,
        /// Required flags (unknown bits fail with `EINVAL`; none defined yet).
        pub flags: u32,
        /// Advisory flags (unknown bits ignored; none defined yet).
        pub optional_flags: u32,
        /// Offset within the dma-buf, or user virtual address.
        pub addr: u64,
        pub length: u64,
    }
}

impl IbUverbsGidEntry {
    /// The GID as its 16 raw bytes (network byte order).
    pub fn gid_bytes(&self) -> [u8; 16] {
        zerocopy::transmute!(self.gid)
    }
}

// ---------------------------------------------------------------------------------------
// Kernel-internal values (include/rdma/ib_verbs.h) carried unchanged by uverbs structs.
// ---------------------------------------------------------------------------------------

// enum ib_wc_status, carried by `IbUverbsWc::status` (and rxe's CQ ring entries).
/// `IB_WC_SUCCESS` (kernel `enum ib_wc_status`, in `ib_uverbs_wc.status`).
pub const IB_WC_SUCCESS: u32 = 0;
/// `IB_WC_LOC_LEN_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_LOC_LEN_ERR: u32 = 1;
/// `IB_WC_LOC_QP_OP_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_LOC_QP_OP_ERR: u32 = 2;
/// `IB_WC_LOC_EEC_OP_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_LOC_EEC_OP_ERR: u32 = 3;
/// `IB_WC_LOC_PROT_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_LOC_PROT_ERR: u32 = 4;
/// `IB_WC_WR_FLUSH_ERR` (kernel `enum ib_wc_status`): WR flushed because the QP is in error.
pub const IB_WC_WR_FLUSH_ERR: u32 = 5;
/// `IB_WC_MW_BIND_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_MW_BIND_ERR: u32 = 6;
/// `IB_WC_BAD_RESP_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_BAD_RESP_ERR: u32 = 7;
/// `IB_WC_LOC_ACCESS_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_LOC_ACCESS_ERR: u32 = 8;
/// `IB_WC_REM_INV_REQ_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_REM_INV_REQ_ERR: u32 = 9;
/// `IB_WC_REM_ACCESS_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_REM_ACCESS_ERR: u32 = 10;
/// `IB_WC_REM_OP_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_REM_OP_ERR: u32 = 11;
/// `IB_WC_RETRY_EXC_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_RETRY_EXC_ERR: u32 = 12;
/// `IB_WC_RNR_RETRY_EXC_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_RNR_RETRY_EXC_ERR: u32 = 13;
/// `IB_WC_LOC_RDD_VIOL_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_LOC_RDD_VIOL_ERR: u32 = 14;
/// `IB_WC_REM_INV_RD_REQ_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_REM_INV_RD_REQ_ERR: u32 = 15;
/// `IB_WC_REM_ABORT_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_REM_ABORT_ERR: u32 = 16;
/// `IB_WC_INV_EECN_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_INV_EECN_ERR: u32 = 17;
/// `IB_WC_INV_EEC_STATE_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_INV_EEC_STATE_ERR: u32 = 18;
/// `IB_WC_FATAL_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_FATAL_ERR: u32 = 19;
/// `IB_WC_RESP_TIMEOUT_ERR` (kernel `enum ib_wc_status`).
pub const IB_WC_RESP_TIMEOUT_ERR: u32 = 20;
/// `IB_WC_GENERAL_ERR` (kernel `enum ib_wc_status`): the last kernel status value.
pub const IB_WC_GENERAL_ERR: u32 = 21;

// enum ib_wc_opcode: the send-side values are `IB_UVERBS_WC_*` in `crate::write`; receive
// completions carry these two.
/// `IB_WC_RECV` = `1 << 7` (kernel `enum ib_wc_opcode`): `opcode & IB_WC_RECV` marks a receive.
pub const IB_WC_RECV: u32 = 1 << 7;
/// `IB_WC_RECV_RDMA_WITH_IMM` (kernel `enum ib_wc_opcode`): RDMA write with immediate received.
pub const IB_WC_RECV_RDMA_WITH_IMM: u32 = IB_WC_RECV + 1;

// enum ib_wc_flags, carried by `IbUverbsWc::wc_flags`. Note: libibverbs' `IBV_WC_WITH_INV`
// (1 << 3) and `IBV_WC_IP_CSUM_OK` (1 << 2) are swapped relative to these kernel values.
/// `IB_WC_GRH` (kernel `enum ib_wc_flags`): a GRH is present in the receive buffer's first 40 B.
pub const IB_WC_GRH: u32 = 1 << 0;
/// `IB_WC_WITH_IMM` (kernel `enum ib_wc_flags`): `ex` holds immediate data.
pub const IB_WC_WITH_IMM: u32 = 1 << 1;
/// `IB_WC_WITH_INVALIDATE` (kernel `enum ib_wc_flags`): `ex` holds an invalidated rkey.
pub const IB_WC_WITH_INVALIDATE: u32 = 1 << 2;
/// `IB_WC_IP_CSUM_OK` (kernel `enum ib_wc_flags`).
pub const IB_WC_IP_CSUM_OK: u32 = 1 << 3;
/// `IB_WC_WITH_SMAC` (kernel `enum ib_wc_flags`).
pub const IB_WC_WITH_SMAC: u32 = 1 << 4;
/// `IB_WC_WITH_VLAN` (kernel `enum ib_wc_flags`).
pub const IB_WC_WITH_VLAN: u32 = 1 << 5;
/// `IB_WC_WITH_NETWORK_HDR_TYPE` (kernel `enum ib_wc_flags`).
pub const IB_WC_WITH_NETWORK_HDR_TYPE: u32 = 1 << 6;

// enum ib_send_flags, carried by `IbUverbsSendWr::send_flags` (same values as IBV_SEND_*).
/// `IB_SEND_FENCE` (kernel `enum ib_send_flags`).
pub const IB_SEND_FENCE: u32 = 1 << 0;
/// `IB_SEND_SIGNALED` (kernel `enum ib_send_flags`): generate a completion.
pub const IB_SEND_SIGNALED: u32 = 1 << 1;
/// `IB_SEND_SOLICITED` (kernel `enum ib_send_flags`).
pub const IB_SEND_SOLICITED: u32 = 1 << 2;
/// `IB_SEND_INLINE` (kernel `enum ib_send_flags`): payload copied into the WQE.
pub const IB_SEND_INLINE: u32 = 1 << 3;
/// `IB_SEND_IP_CSUM` (kernel `enum ib_send_flags`).
pub const IB_SEND_IP_CSUM: u32 = 1 << 4;

// enum ib_event_type, carried by `IbUverbsAsyncEventDesc::event_type`.
/// `IB_EVENT_CQ_ERR` (kernel `enum ib_event_type`); element = CQ user_handle.
pub const IB_EVENT_CQ_ERR: u32 = 0;
/// `IB_EVENT_QP_FATAL` (kernel `enum ib_event_type`); element = QP user_handle.
pub const IB_EVENT_QP_FATAL: u32 = 1;
/// `IB_EVENT_QP_REQ_ERR` (kernel `enum ib_event_type`).
pub const IB_EVENT_QP_REQ_ERR: u32 = 2;
/// `IB_EVENT_QP_ACCESS_ERR` (kernel `enum ib_event_type`).
pub const IB_EVENT_QP_ACCESS_ERR: u32 = 3;
/// `IB_EVENT_COMM_EST` (kernel `enum ib_event_type`).
pub const IB_EVENT_COMM_EST: u32 = 4;
/// `IB_EVENT_SQ_DRAINED` (kernel `enum ib_event_type`).
pub const IB_EVENT_SQ_DRAINED: u32 = 5;
/// `IB_EVENT_PATH_MIG` (kernel `enum ib_event_type`).
pub const IB_EVENT_PATH_MIG: u32 = 6;
/// `IB_EVENT_PATH_MIG_ERR` (kernel `enum ib_event_type`).
pub const IB_EVENT_PATH_MIG_ERR: u32 = 7;
/// `IB_EVENT_DEVICE_FATAL` (kernel `enum ib_event_type`): the device is gone (e.g. `rdma link
/// delete`); later commands fail with `EIO`.
pub const IB_EVENT_DEVICE_FATAL: u32 = 8;
/// `IB_EVENT_PORT_ACTIVE` (kernel `enum ib_event_type`); element = port number.
pub const IB_EVENT_PORT_ACTIVE: u32 = 9;
/// `IB_EVENT_PORT_ERR` (kernel `enum ib_event_type`); element = port number.
pub const IB_EVENT_PORT_ERR: u32 = 10;
/// `IB_EVENT_LID_CHANGE` (kernel `enum ib_event_type`).
pub const IB_EVENT_LID_CHANGE: u32 = 11;
/// `IB_EVENT_PKEY_CHANGE` (kernel `enum ib_event_type`).
pub const IB_EVENT_PKEY_CHANGE: u32 = 12;
/// `IB_EVENT_SM_CHANGE` (kernel `enum ib_event_type`).
pub const IB_EVENT_SM_CHANGE: u32 = 13;
/// `IB_EVENT_SRQ_ERR` (kernel `enum ib_event_type`); element = SRQ user_handle.
pub const IB_EVENT_SRQ_ERR: u32 = 14;
/// `IB_EVENT_SRQ_LIMIT_REACHED` (kernel `enum ib_event_type`).
pub const IB_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
/// `IB_EVENT_QP_LAST_WQE_REACHED` (kernel `enum ib_event_type`).
pub const IB_EVENT_QP_LAST_WQE_REACHED: u32 = 16;
/// `IB_EVENT_CLIENT_REREGISTER` (kernel `enum ib_event_type`).
pub const IB_EVENT_CLIENT_REREGISTER: u32 = 17;
/// `IB_EVENT_GID_CHANGE` (kernel `enum ib_event_type`).
pub const IB_EVENT_GID_CHANGE: u32 = 18;
/// `IB_EVENT_WQ_FATAL` (kernel `enum ib_event_type`); element = WQ user_handle.
pub const IB_EVENT_WQ_FATAL: u32 = 19;
/// `IB_EVENT_DEVICE_SPEED_CHANGE` (kernel `enum ib_event_type`). Newer than Linux 6.1.
pub const IB_EVENT_DEVICE_SPEED_CHANGE: u32 = 20;

// enum ib_port_state, carried by `IbUverbsQueryPortResp::state`.
/// `IB_PORT_NOP` (kernel `enum ib_port_state`).
pub const IB_PORT_NOP: u8 = 0;
/// `IB_PORT_DOWN` (kernel `enum ib_port_state`).
pub const IB_PORT_DOWN: u8 = 1;
/// `IB_PORT_INIT` (kernel `enum ib_port_state`).
pub const IB_PORT_INIT: u8 = 2;
/// `IB_PORT_ARMED` (kernel `enum ib_port_state`).
pub const IB_PORT_ARMED: u8 = 3;
/// `IB_PORT_ACTIVE` (kernel `enum ib_port_state`).
pub const IB_PORT_ACTIVE: u8 = 4;
/// `IB_PORT_ACTIVE_DEFER` (kernel `enum ib_port_state`).
pub const IB_PORT_ACTIVE_DEFER: u8 = 5;

// enum ib_mtu, carried by `max_mtu`/`active_mtu`/`path_mtu`.
/// `IB_MTU_256` (kernel `enum ib_mtu`).
pub const IB_MTU_256: u8 = 1;
/// `IB_MTU_512` (kernel `enum ib_mtu`).
pub const IB_MTU_512: u8 = 2;
/// `IB_MTU_1024` (kernel `enum ib_mtu`).
pub const IB_MTU_1024: u8 = 3;
/// `IB_MTU_2048` (kernel `enum ib_mtu`).
pub const IB_MTU_2048: u8 = 4;
/// `IB_MTU_4096` (kernel `enum ib_mtu`).
pub const IB_MTU_4096: u8 = 5;

// enum rdma_link_layer, carried by `IbUverbsQueryPortResp::link_layer`.
/// `IB_LINK_LAYER_UNSPECIFIED` (kernel `enum rdma_link_layer`): EFA reports this.
pub const IB_LINK_LAYER_UNSPECIFIED: u8 = 0;
/// `IB_LINK_LAYER_INFINIBAND` (kernel `enum rdma_link_layer`).
pub const IB_LINK_LAYER_INFINIBAND: u8 = 1;
/// `IB_LINK_LAYER_ETHERNET` (kernel `enum rdma_link_layer`): RoCE (rxe) reports this.
pub const IB_LINK_LAYER_ETHERNET: u8 = 2;

// Node types: anonymous enum of rdma/rdma_netlink.h (RDMA_NLDEV_ATTR_DEV_NODE_TYPE), also the
// number in /sys/class/infiniband/<dev>/node_type.
/// `RDMA_NODE_IB_CA` (`rdma/rdma_netlink.h`).
pub const RDMA_NODE_IB_CA: u32 = 1;
/// `RDMA_NODE_IB_SWITCH` (`rdma/rdma_netlink.h`).
pub const RDMA_NODE_IB_SWITCH: u32 = 2;
/// `RDMA_NODE_IB_ROUTER` (`rdma/rdma_netlink.h`).
pub const RDMA_NODE_IB_ROUTER: u32 = 3;
/// `RDMA_NODE_RNIC` (`rdma/rdma_netlink.h`).
pub const RDMA_NODE_RNIC: u32 = 4;
/// `RDMA_NODE_USNIC` (`rdma/rdma_netlink.h`).
pub const RDMA_NODE_USNIC: u32 = 5;
/// `RDMA_NODE_USNIC_UDP` (`rdma/rdma_netlink.h`).
pub const RDMA_NODE_USNIC_UDP: u32 = 6;
/// `RDMA_NODE_UNSPECIFIED` (`rdma/rdma_netlink.h`): EFA reports this.
pub const RDMA_NODE_UNSPECIFIED: u32 = 7;

// enum ib_qp_state, carried by `qp_state`/`cur_qp_state`.
/// `IB_QPS_RESET` (kernel `enum ib_qp_state`).
pub const IB_QPS_RESET: u8 = 0;
/// `IB_QPS_INIT` (kernel `enum ib_qp_state`).
pub const IB_QPS_INIT: u8 = 1;
/// `IB_QPS_RTR` (kernel `enum ib_qp_state`).
pub const IB_QPS_RTR: u8 = 2;
/// `IB_QPS_RTS` (kernel `enum ib_qp_state`).
pub const IB_QPS_RTS: u8 = 3;
/// `IB_QPS_SQD` (kernel `enum ib_qp_state`).
pub const IB_QPS_SQD: u8 = 4;
/// `IB_QPS_SQE` (kernel `enum ib_qp_state`).
pub const IB_QPS_SQE: u8 = 5;
/// `IB_QPS_ERR` (kernel `enum ib_qp_state`).
pub const IB_QPS_ERR: u8 = 6;

// enum ib_mig_state, carried by `path_mig_state`.
/// `IB_MIG_MIGRATED` (kernel `enum ib_mig_state`).
pub const IB_MIG_MIGRATED: u8 = 0;
/// `IB_MIG_REARM` (kernel `enum ib_mig_state`).
pub const IB_MIG_REARM: u8 = 1;
/// `IB_MIG_ARMED` (kernel `enum ib_mig_state`).
pub const IB_MIG_ARMED: u8 = 2;

// enum ib_qp_attr_mask, carried by `IbUverbsModifyQp::attr_mask` / `IbUverbsQueryQp::attr_mask`.
/// `IB_QP_STATE` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_STATE: u32 = 1 << 0;
/// `IB_QP_CUR_STATE` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_CUR_STATE: u32 = 1 << 1;
/// `IB_QP_EN_SQD_ASYNC_NOTIFY` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
/// `IB_QP_ACCESS_FLAGS` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_ACCESS_FLAGS: u32 = 1 << 3;
/// `IB_QP_PKEY_INDEX` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_PKEY_INDEX: u32 = 1 << 4;
/// `IB_QP_PORT` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_PORT: u32 = 1 << 5;
/// `IB_QP_QKEY` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_QKEY: u32 = 1 << 6;
/// `IB_QP_AV` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_AV: u32 = 1 << 7;
/// `IB_QP_PATH_MTU` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_PATH_MTU: u32 = 1 << 8;
/// `IB_QP_TIMEOUT` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_TIMEOUT: u32 = 1 << 9;
/// `IB_QP_RETRY_CNT` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_RETRY_CNT: u32 = 1 << 10;
/// `IB_QP_RNR_RETRY` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_RNR_RETRY: u32 = 1 << 11;
/// `IB_QP_RQ_PSN` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_RQ_PSN: u32 = 1 << 12;
/// `IB_QP_MAX_QP_RD_ATOMIC` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
/// `IB_QP_ALT_PATH` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_ALT_PATH: u32 = 1 << 14;
/// `IB_QP_MIN_RNR_TIMER` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_MIN_RNR_TIMER: u32 = 1 << 15;
/// `IB_QP_SQ_PSN` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_SQ_PSN: u32 = 1 << 16;
/// `IB_QP_MAX_DEST_RD_ATOMIC` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
/// `IB_QP_PATH_MIG_STATE` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_PATH_MIG_STATE: u32 = 1 << 18;
/// `IB_QP_CAP` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_CAP: u32 = 1 << 19;
/// `IB_QP_DEST_QPN` (kernel `enum ib_qp_attr_mask`).
pub const IB_QP_DEST_QPN: u32 = 1 << 20;
/// `IB_QP_RATE_LIMIT` (kernel `enum ib_qp_attr_mask`; bits 21..=24 are reserved).
pub const IB_QP_RATE_LIMIT: u32 = 1 << 25;

// enum ib_srq_attr_mask, carried by `IbUverbsModifySrq::attr_mask`.
/// `IB_SRQ_MAX_WR` (kernel `enum ib_srq_attr_mask`): resize the SRQ.
pub const IB_SRQ_MAX_WR: u32 = 1 << 0;
/// `IB_SRQ_LIMIT` (kernel `enum ib_srq_attr_mask`): arm the SRQ limit event.
pub const IB_SRQ_LIMIT: u32 = 1 << 1;

// enum ib_mr_rereg_flags, carried by `IbUverbsReregMr::flags`.
/// `IB_MR_REREG_TRANS` (kernel `enum ib_mr_rereg_flags`): change address/length.
pub const IB_MR_REREG_TRANS: u32 = 1 << 0;
/// `IB_MR_REREG_PD` (kernel `enum ib_mr_rereg_flags`): change the PD.
pub const IB_MR_REREG_PD: u32 = 1 << 1;
/// `IB_MR_REREG_ACCESS` (kernel `enum ib_mr_rereg_flags`): change access flags.
pub const IB_MR_REREG_ACCESS: u32 = 1 << 2;

// enum ib_mw_type, carried by `IbUverbsAllocMw::mw_type`.
/// `IB_MW_TYPE_1` (kernel `enum ib_mw_type`).
pub const IB_MW_TYPE_1: u8 = 1;
/// `IB_MW_TYPE_2` (kernel `enum ib_mw_type`).
pub const IB_MW_TYPE_2: u8 = 2;

// enum ib_atomic_cap, carried by `IbUverbsQueryDeviceResp::atomic_cap`.
/// `IB_ATOMIC_NONE` (kernel `enum ib_atomic_cap`).
pub const IB_ATOMIC_NONE: u32 = 0;
/// `IB_ATOMIC_HCA` (kernel `enum ib_atomic_cap`).
pub const IB_ATOMIC_HCA: u32 = 1;
/// `IB_ATOMIC_GLOB` (kernel `enum ib_atomic_cap`).
pub const IB_ATOMIC_GLOB: u32 = 2;

// enum ib_cq_attr_mask, carried by `IbUverbsExModifyCq::attr_mask`.
/// `IB_CQ_MODERATE` (kernel `enum ib_cq_attr_mask`).
pub const IB_CQ_MODERATE: u32 = 1 << 0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_bytes_keep_memory_order() {
        let mut e = IbUverbsGidEntry::default();
        e.gid = zerocopy::transmute!([0xfeu8, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(e.gid_bytes()[..2], [0xfe, 0x80]);
        assert_eq!(e.gid_bytes()[15], 8);
    }

    #[test]
    fn receive_opcodes_have_the_recv_bit() {
        assert_ne!(IB_WC_RECV_RDMA_WITH_IMM & IB_WC_RECV, 0);
        assert_eq!(crate::write::IB_UVERBS_WC_ATOMIC_WRITE & IB_WC_RECV, 0);
    }
}
