//! The structs of rdma-core's `<infiniband/verbs.h>` that programs read or call through, laid
//! out as the header says (rdma-core 44 and master). Names are the C names, so code here reads
//! like the header; `tests/layout_host_only.rs` compiles C against the installed header and
//! compares every offset and size listed in [`layout`].
#![allow(non_camel_case_types, non_snake_case, missing_docs)]

use core::ffi::{c_char, c_int, c_uint, c_void};
use libc::{pthread_cond_t, pthread_mutex_t};

pub const IBV_SYSFS_NAME_MAX: usize = 64;
pub const IBV_SYSFS_PATH_MAX: usize = 256;
/// `__VERBS_ABI_IS_EXTENDED`: `ibv_context.abi_compat` of a context that is a `verbs_context`.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_global {
    pub subnet_prefix: u64,
    pub interface_id: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

#[repr(C)]
pub struct _ibv_device_ops {
    pub _dummy1: Option<unsafe extern "C" fn(*mut ibv_device, c_int) -> *mut ibv_context>,
    pub _dummy2: Option<unsafe extern "C" fn(*mut ibv_context)>,
}

#[repr(C)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

#[repr(C)]
pub struct ibv_query_device_ex_input {
    pub comp_mask: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_odp_per_transport_caps {
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    pub per_transport_caps: ibv_odp_per_transport_caps,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_tso_caps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_packet_pacing_caps {
    pub qp_rate_limit_min: u32,
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_tm_caps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_cq_moderation_caps {
    pub max_cq_count: u16,
    pub max_cq_period: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_pci_atomic_caps {
    pub fetch_add: u16,
    pub swap: u16,
    pub compare_swap: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub tso_caps: ibv_tso_caps,
    pub rss_caps: ibv_rss_caps,
    pub max_wq_type_rq: u32,
    pub packet_pacing_caps: ibv_packet_pacing_caps,
    pub raw_packet_caps: u32,
    pub tm_caps: ibv_tm_caps,
    pub cq_mod_caps: ibv_cq_moderation_caps,
    pub max_dm_size: u64,
    pub pci_atomic_caps: ibv_pci_atomic_caps,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_port_attr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
    /// rdma-core master; a caller compiled against rdma-core 44 passes a length without it.
    pub active_speed_ex: u32,
}

/// The length of `struct _compat_ibv_port_attr`: what the exported `ibv_query_port` writes
/// (everything up to and including `flags`).
pub const COMPAT_PORT_ATTR_LEN: usize = core::mem::offset_of!(ibv_port_attr, flags) + 1;

type Fp = Option<unsafe extern "C" fn()>;

#[repr(C)]
pub struct ibv_context_ops {
    pub _compat_query_device: Fp,
    pub _compat_query_port: Fp,
    pub _compat_alloc_pd: Fp,
    pub _compat_dealloc_pd: Fp,
    pub _compat_reg_mr: Fp,
    pub _compat_rereg_mr: Fp,
    pub _compat_dereg_mr: Fp,
    pub alloc_mw: Option<unsafe extern "C" fn(*mut ibv_pd, c_int) -> *mut ibv_mw>,
    pub bind_mw: Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int>,
    pub dealloc_mw: Option<unsafe extern "C" fn(*mut ibv_mw) -> c_int>,
    pub _compat_create_cq: Fp,
    pub poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int>,
    pub _compat_cq_event: Fp,
    pub _compat_resize_cq: Fp,
    pub _compat_destroy_cq: Fp,
    pub _compat_create_srq: Fp,
    pub _compat_modify_srq: Fp,
    pub _compat_query_srq: Fp,
    pub _compat_destroy_srq: Fp,
    pub post_srq_recv: Option<
        unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int,
    >,
    pub _compat_create_qp: Fp,
    pub _compat_query_qp: Fp,
    pub _compat_modify_qp: Fp,
    pub _compat_destroy_qp: Fp,
    pub post_send:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int>,
    pub _compat_create_ah: Fp,
    pub _compat_destroy_ah: Fp,
    pub _compat_attach_mcast: Fp,
    pub _compat_detach_mcast: Fp,
    pub _compat_async_event: Fp,
}

#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `struct verbs_context`: the extended operations, which the header's inline functions
/// (`verbs_get_ctx_op`) find before the `ibv_context` it ends with. Fields this library
/// does not implement stay NULL, which those inline functions answer with EOPNOTSUPP.
#[repr(C)]
pub struct verbs_context {
    // rdma-core master's newest operations ("grows up": new ones are added here).
    pub free_buf: Fp,
    pub alloc_buf: Fp,
    pub dm_export_dmabuf_fd: Fp,
    pub reg_mr_ex: Fp,
    pub dealloc_dmah: Fp,
    pub alloc_dmah: Fp,
    // rdma-core 44 starts here.
    pub query_port:
        Option<unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int>,
    pub advise_mr: Fp,
    pub alloc_null_mr: Option<unsafe extern "C" fn(*mut ibv_pd) -> *mut ibv_mr>,
    pub read_counters: Fp,
    pub attach_counters_point_flow: Fp,
    pub create_counters: Fp,
    pub destroy_counters: Fp,
    pub reg_dm_mr: Fp,
    pub alloc_dm: Fp,
    pub free_dm: Fp,
    pub modify_flow_action_esp: Fp,
    pub destroy_flow_action: Fp,
    pub create_flow_action_esp: Fp,
    pub modify_qp_rate_limit: Fp,
    pub alloc_parent_domain: Fp,
    pub dealloc_td: Fp,
    pub alloc_td: Fp,
    pub modify_cq: Fp,
    pub post_srq_ops: Fp,
    pub destroy_rwq_ind_table: Fp,
    pub create_rwq_ind_table: Fp,
    pub destroy_wq: Fp,
    pub modify_wq: Fp,
    pub create_wq: Fp,
    pub query_rt_values: Fp,
    pub create_cq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex>,
    pub priv_: *mut c_void,
    pub query_device_ex: Option<
        unsafe extern "C" fn(
            *mut ibv_context,
            *const ibv_query_device_ex_input,
            *mut ibv_device_attr_ex,
            usize,
        ) -> c_int,
    >,
    pub ibv_destroy_flow: Fp,
    pub ABI_placeholder2: Fp,
    pub ibv_create_flow: Fp,
    pub ABI_placeholder1: Fp,
    pub open_qp:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_open_attr) -> *mut ibv_qp>,
    pub create_qp_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp>,
    pub get_srq_num: Option<unsafe extern "C" fn(*mut ibv_srq, *mut u32) -> c_int>,
    pub create_srq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_srq_init_attr_ex) -> *mut ibv_srq>,
    pub open_xrcd:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_xrcd_init_attr) -> *mut ibv_xrcd>,
    pub close_xrcd: Option<unsafe extern "C" fn(*mut ibv_xrcd) -> c_int>,
    pub _ABI_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_xrcd_init_attr {
    pub comp_mask: u32,
    pub fd: c_int,
    pub oflags: c_int,
}

#[repr(C)]
pub struct ibv_xrcd {
    pub context: *mut ibv_context,
}

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    pub type_: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

#[repr(C)]
pub struct ibv_mw_bind {
    pub wr_id: u64,
    pub send_flags: c_uint,
    pub bind_info: ibv_mw_bind_info,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_grh {
    pub version_tclass_flow: u32,
    pub paylen: u16,
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

#[repr(C)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

#[repr(C)]
pub struct ibv_wc_tm_info {
    pub tag: u64,
    pub priv_: u32,
}

#[repr(C)]
pub struct ibv_cq_ex {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
    pub comp_mask: u32,
    pub status: c_int,
    pub wr_id: u64,
    pub start_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int>,
    pub next_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub end_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex)>,
    pub read_opcode: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub read_vendor_err: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_byte_len: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_imm_data: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_qp_num: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_src_qp: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_wc_flags: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_uint>,
    pub read_slid: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_sl: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_completion_ts: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u64>,
    pub read_cvlan: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u16>,
    pub read_flow_tag: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_tm_info: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_wc_tm_info)>,
    pub read_completion_wallclock_ns: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u64>,
}

#[repr(C)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

/// `struct ibv_wc`: the same bytes as [`uverbs::Wc`] (checked in `tests/layout_host_only.rs`), so
/// `poll_cq` writes the caller's array directly.
pub type ibv_wc = uverbs::Wc;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

#[repr(C)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    pub srq_type: c_int,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}

#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

#[repr(C)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

#[repr(C)]
pub struct ibv_qp_open_attr {
    pub comp_mask: u32,
    pub qp_num: u32,
    pub xrcd: *mut ibv_xrcd,
    pub qp_context: *mut c_void,
    pub qp_type: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_attr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
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
    pub rate_limit: u32,
}

#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// `struct ibv_sge`: the same bytes as [`uverbs::Sge`], so SGE lists are read in place.
pub type ibv_sge = uverbs::Sge;

type QpEx = *mut ibv_qp_ex;

#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(QpEx, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(QpEx, u32, u64, u64)>,
    pub wr_bind_mw: Option<unsafe extern "C" fn(QpEx, *mut ibv_mw, u32, *const ibv_mw_bind_info)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(QpEx, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(QpEx, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(QpEx, u32, u64)>,
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(QpEx, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(QpEx)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(QpEx, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(QpEx, u32)>,
    pub wr_send_tso: Option<unsafe extern "C" fn(QpEx, *mut c_void, u16, u16)>,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(QpEx, *mut ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(QpEx, u32)>,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(QpEx, *mut c_void, usize)>,
    pub wr_set_inline_data_list: Option<unsafe extern "C" fn(QpEx, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(QpEx, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(QpEx, usize, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(QpEx)>,
    pub wr_complete: Option<unsafe extern "C" fn(QpEx) -> c_int>,
    pub wr_abort: Option<unsafe extern "C" fn(QpEx)>,
    pub wr_atomic_write: Option<unsafe extern "C" fn(QpEx, u32, u64, *const c_void)>,
    pub wr_flush: Option<unsafe extern "C" fn(QpEx, u32, u64, usize, u8, u8)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_xrc {
    pub remote_srqn: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_qp_type {
    pub xrc: ibv_send_wr_xrc,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_ext {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

#[repr(C)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: c_uint,
    /// `imm_data` (network order) or `invalidate_rkey`, one anonymous union in C.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    pub qp_type: ibv_send_wr_qp_type,
    /// `bind_mw` or `tso`, one anonymous union in C.
    pub ext: ibv_send_wr_ext,
}

#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_async_event_element {
    pub cq: *mut ibv_cq,
    pub qp: *mut ibv_qp,
    pub srq: *mut ibv_srq,
    pub wq: *mut c_void,
    pub port_num: c_int,
}

#[repr(C)]
pub struct ibv_async_event {
    pub element: ibv_async_event_element,
    pub event_type: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_ece {
    pub vendor_id: u32,
    pub options: u32,
    pub comp_mask: u32,
}

/// One checked field: (C struct, C field path, Rust offset, Rust size of the field).
pub type LayoutRow = (&'static str, &'static str, usize, usize);

macro_rules! rows {
    ($( $ty:ident { $($field:ident $(. $sub:ident)* => $cname:literal),* $(,)? } )*) => {
        /// Every struct and field `tests/layout_host_only.rs` checks against the C header: the
        /// struct's size (field `""`), then each field's offset and size.
        pub fn layout() -> Vec<LayoutRow> {
            let mut v = Vec::new();
            $(
                v.push((stringify!($ty), "", 0, core::mem::size_of::<$ty>()));
                $(
                    #[allow(unused_unsafe)]
                    {
                        let off = core::mem::offset_of!($ty, $field $(. $sub)*);
                        // SAFETY: only the address of the (possibly union) field is taken, never read.
                        let size = size_of_field(|s: &$ty| unsafe { &s.$field $(. $sub)* });
                        v.push((stringify!($ty), $cname, off, size));
                    }
                )*
            )*
            v
        }
    };
}

fn size_of_field<S, F>(_: impl Fn(&S) -> &F) -> usize {
    core::mem::size_of::<F>()
}

rows! {
    ibv_gid { raw => "raw", global.subnet_prefix => "global.subnet_prefix", global.interface_id => "global.interface_id" }
    ibv_gid_entry { gid => "gid", gid_index => "gid_index", port_num => "port_num", gid_type => "gid_type", ndev_ifindex => "ndev_ifindex" }
    ibv_device { _ops => "_ops", node_type => "node_type", transport_type => "transport_type", name => "name", dev_name => "dev_name", dev_path => "dev_path", ibdev_path => "ibdev_path" }
    ibv_device_attr { fw_ver => "fw_ver", node_guid => "node_guid", sys_image_guid => "sys_image_guid", max_mr_size => "max_mr_size", page_size_cap => "page_size_cap", vendor_id => "vendor_id", vendor_part_id => "vendor_part_id", hw_ver => "hw_ver", max_qp => "max_qp", max_qp_wr => "max_qp_wr", device_cap_flags => "device_cap_flags", max_sge => "max_sge", max_sge_rd => "max_sge_rd", max_cq => "max_cq", max_cqe => "max_cqe", max_mr => "max_mr", max_pd => "max_pd", max_qp_rd_atom => "max_qp_rd_atom", max_ee_rd_atom => "max_ee_rd_atom", max_res_rd_atom => "max_res_rd_atom", max_qp_init_rd_atom => "max_qp_init_rd_atom", max_ee_init_rd_atom => "max_ee_init_rd_atom", atomic_cap => "atomic_cap", max_ee => "max_ee", max_rdd => "max_rdd", max_mw => "max_mw", max_raw_ipv6_qp => "max_raw_ipv6_qp", max_raw_ethy_qp => "max_raw_ethy_qp", max_mcast_grp => "max_mcast_grp", max_mcast_qp_attach => "max_mcast_qp_attach", max_total_mcast_qp_attach => "max_total_mcast_qp_attach", max_ah => "max_ah", max_fmr => "max_fmr", max_map_per_fmr => "max_map_per_fmr", max_srq => "max_srq", max_srq_wr => "max_srq_wr", max_srq_sge => "max_srq_sge", max_pkeys => "max_pkeys", local_ca_ack_delay => "local_ca_ack_delay", phys_port_cnt => "phys_port_cnt" }
    ibv_device_attr_ex { orig_attr => "orig_attr", comp_mask => "comp_mask", odp_caps => "odp_caps", odp_caps.per_transport_caps.ud_odp_caps => "odp_caps.per_transport_caps.ud_odp_caps", completion_timestamp_mask => "completion_timestamp_mask", hca_core_clock => "hca_core_clock", device_cap_flags_ex => "device_cap_flags_ex", tso_caps => "tso_caps", rss_caps => "rss_caps", rss_caps.rx_hash_function => "rss_caps.rx_hash_function", max_wq_type_rq => "max_wq_type_rq", packet_pacing_caps => "packet_pacing_caps", raw_packet_caps => "raw_packet_caps", tm_caps => "tm_caps", cq_mod_caps => "cq_mod_caps", max_dm_size => "max_dm_size", pci_atomic_caps => "pci_atomic_caps", xrc_odp_caps => "xrc_odp_caps", phys_port_cnt_ex => "phys_port_cnt_ex" }
    ibv_port_attr { state => "state", max_mtu => "max_mtu", active_mtu => "active_mtu", gid_tbl_len => "gid_tbl_len", port_cap_flags => "port_cap_flags", max_msg_sz => "max_msg_sz", bad_pkey_cntr => "bad_pkey_cntr", qkey_viol_cntr => "qkey_viol_cntr", pkey_tbl_len => "pkey_tbl_len", lid => "lid", sm_lid => "sm_lid", lmc => "lmc", max_vl_num => "max_vl_num", sm_sl => "sm_sl", subnet_timeout => "subnet_timeout", init_type_reply => "init_type_reply", active_width => "active_width", active_speed => "active_speed", phys_state => "phys_state", link_layer => "link_layer", flags => "flags", port_cap_flags2 => "port_cap_flags2", active_speed_ex => "active_speed_ex" }
    ibv_context_ops { alloc_mw => "alloc_mw", bind_mw => "bind_mw", dealloc_mw => "dealloc_mw", poll_cq => "poll_cq", req_notify_cq => "req_notify_cq", post_srq_recv => "post_srq_recv", post_send => "post_send", post_recv => "post_recv", _compat_async_event => "_compat_async_event" }
    ibv_context { device => "device", ops => "ops", cmd_fd => "cmd_fd", async_fd => "async_fd", num_comp_vectors => "num_comp_vectors", mutex => "mutex", abi_compat => "abi_compat" }
    verbs_context { free_buf => "free_buf", alloc_dmah => "alloc_dmah", query_port => "query_port", advise_mr => "advise_mr", alloc_null_mr => "alloc_null_mr", reg_dm_mr => "reg_dm_mr", alloc_dm => "alloc_dm", modify_qp_rate_limit => "modify_qp_rate_limit", alloc_parent_domain => "alloc_parent_domain", alloc_td => "alloc_td", modify_cq => "modify_cq", post_srq_ops => "post_srq_ops", create_wq => "create_wq", query_rt_values => "query_rt_values", create_cq_ex => "create_cq_ex", priv_ => "priv", query_device_ex => "query_device_ex", ibv_destroy_flow => "ibv_destroy_flow", ibv_create_flow => "ibv_create_flow", open_qp => "open_qp", create_qp_ex => "create_qp_ex", get_srq_num => "get_srq_num", create_srq_ex => "create_srq_ex", open_xrcd => "open_xrcd", close_xrcd => "close_xrcd", _ABI_placeholder3 => "_ABI_placeholder3", sz => "sz", context => "context" }
    ibv_pd { context => "context", handle => "handle" }
    ibv_xrcd_init_attr { comp_mask => "comp_mask", fd => "fd", oflags => "oflags" }
    ibv_xrcd { context => "context" }
    ibv_mr { context => "context", pd => "pd", addr => "addr", length => "length", handle => "handle", lkey => "lkey", rkey => "rkey" }
    ibv_mw { context => "context", pd => "pd", rkey => "rkey", handle => "handle", type_ => "type" }
    ibv_mw_bind_info { mr => "mr", addr => "addr", length => "length", mw_access_flags => "mw_access_flags" }
    ibv_mw_bind { wr_id => "wr_id", send_flags => "send_flags", bind_info => "bind_info" }
    ibv_global_route { dgid => "dgid", flow_label => "flow_label", sgid_index => "sgid_index", hop_limit => "hop_limit", traffic_class => "traffic_class" }
    ibv_grh { version_tclass_flow => "version_tclass_flow", paylen => "paylen", next_hdr => "next_hdr", hop_limit => "hop_limit", sgid => "sgid", dgid => "dgid" }
    ibv_ah_attr { grh => "grh", dlid => "dlid", sl => "sl", src_path_bits => "src_path_bits", static_rate => "static_rate", is_global => "is_global", port_num => "port_num" }
    ibv_ah { context => "context", pd => "pd", handle => "handle" }
    ibv_comp_channel { context => "context", fd => "fd", refcnt => "refcnt" }
    ibv_cq { context => "context", channel => "channel", cq_context => "cq_context", handle => "handle", cqe => "cqe", mutex => "mutex", cond => "cond", comp_events_completed => "comp_events_completed", async_events_completed => "async_events_completed" }
    ibv_poll_cq_attr { comp_mask => "comp_mask" }
    ibv_wc_tm_info { tag => "tag", priv_ => "priv" }
    ibv_cq_ex { context => "context", handle => "handle", cqe => "cqe", comp_events_completed => "comp_events_completed", async_events_completed => "async_events_completed", comp_mask => "comp_mask", status => "status", wr_id => "wr_id", start_poll => "start_poll", next_poll => "next_poll", end_poll => "end_poll", read_opcode => "read_opcode", read_vendor_err => "read_vendor_err", read_byte_len => "read_byte_len", read_imm_data => "read_imm_data", read_qp_num => "read_qp_num", read_src_qp => "read_src_qp", read_wc_flags => "read_wc_flags", read_slid => "read_slid", read_sl => "read_sl", read_dlid_path_bits => "read_dlid_path_bits", read_completion_ts => "read_completion_ts", read_cvlan => "read_cvlan", read_flow_tag => "read_flow_tag", read_tm_info => "read_tm_info", read_completion_wallclock_ns => "read_completion_wallclock_ns" }
    ibv_cq_init_attr_ex { cqe => "cqe", cq_context => "cq_context", channel => "channel", comp_vector => "comp_vector", wc_flags => "wc_flags", comp_mask => "comp_mask", flags => "flags", parent_domain => "parent_domain" }
    ibv_wc { wr_id => "wr_id", status => "status", opcode => "opcode", vendor_err => "vendor_err", byte_len => "byte_len", imm_data => "imm_data", qp_num => "qp_num", src_qp => "src_qp", wc_flags => "wc_flags", pkey_index => "pkey_index", slid => "slid", sl => "sl", dlid_path_bits => "dlid_path_bits" }
    ibv_srq_attr { max_wr => "max_wr", max_sge => "max_sge", srq_limit => "srq_limit" }
    ibv_srq_init_attr { srq_context => "srq_context", attr => "attr" }
    ibv_srq_init_attr_ex { srq_context => "srq_context", attr => "attr", comp_mask => "comp_mask", srq_type => "srq_type", pd => "pd", xrcd => "xrcd", cq => "cq", tm_cap => "tm_cap" }
    ibv_srq { context => "context", srq_context => "srq_context", pd => "pd", handle => "handle", mutex => "mutex", cond => "cond", events_completed => "events_completed" }
    ibv_qp_cap { max_send_wr => "max_send_wr", max_recv_wr => "max_recv_wr", max_send_sge => "max_send_sge", max_recv_sge => "max_recv_sge", max_inline_data => "max_inline_data" }
    ibv_qp_init_attr { qp_context => "qp_context", send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq", cap => "cap", qp_type => "qp_type", sq_sig_all => "sq_sig_all" }
    ibv_rx_hash_conf { rx_hash_function => "rx_hash_function", rx_hash_key_len => "rx_hash_key_len", rx_hash_key => "rx_hash_key", rx_hash_fields_mask => "rx_hash_fields_mask" }
    ibv_qp_init_attr_ex { qp_context => "qp_context", send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq", cap => "cap", qp_type => "qp_type", sq_sig_all => "sq_sig_all", comp_mask => "comp_mask", pd => "pd", xrcd => "xrcd", create_flags => "create_flags", max_tso_header => "max_tso_header", rwq_ind_tbl => "rwq_ind_tbl", rx_hash_conf => "rx_hash_conf", source_qpn => "source_qpn", send_ops_flags => "send_ops_flags" }
    ibv_qp_open_attr { comp_mask => "comp_mask", qp_num => "qp_num", xrcd => "xrcd", qp_context => "qp_context", qp_type => "qp_type" }
    ibv_qp_attr { qp_state => "qp_state", cur_qp_state => "cur_qp_state", path_mtu => "path_mtu", path_mig_state => "path_mig_state", qkey => "qkey", rq_psn => "rq_psn", sq_psn => "sq_psn", dest_qp_num => "dest_qp_num", qp_access_flags => "qp_access_flags", cap => "cap", ah_attr => "ah_attr", alt_ah_attr => "alt_ah_attr", pkey_index => "pkey_index", alt_pkey_index => "alt_pkey_index", en_sqd_async_notify => "en_sqd_async_notify", sq_draining => "sq_draining", max_rd_atomic => "max_rd_atomic", max_dest_rd_atomic => "max_dest_rd_atomic", min_rnr_timer => "min_rnr_timer", port_num => "port_num", timeout => "timeout", retry_cnt => "retry_cnt", rnr_retry => "rnr_retry", alt_port_num => "alt_port_num", alt_timeout => "alt_timeout", rate_limit => "rate_limit" }
    ibv_qp { context => "context", qp_context => "qp_context", pd => "pd", send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq", handle => "handle", qp_num => "qp_num", state => "state", qp_type => "qp_type", mutex => "mutex", cond => "cond", events_completed => "events_completed" }
    ibv_data_buf { addr => "addr", length => "length" }
    ibv_sge { addr => "addr", length => "length", lkey => "lkey" }
    ibv_qp_ex { qp_base => "qp_base", comp_mask => "comp_mask", wr_id => "wr_id", wr_flags => "wr_flags", wr_atomic_cmp_swp => "wr_atomic_cmp_swp", wr_atomic_fetch_add => "wr_atomic_fetch_add", wr_bind_mw => "wr_bind_mw", wr_local_inv => "wr_local_inv", wr_rdma_read => "wr_rdma_read", wr_rdma_write => "wr_rdma_write", wr_rdma_write_imm => "wr_rdma_write_imm", wr_send => "wr_send", wr_send_imm => "wr_send_imm", wr_send_inv => "wr_send_inv", wr_send_tso => "wr_send_tso", wr_set_ud_addr => "wr_set_ud_addr", wr_set_xrc_srqn => "wr_set_xrc_srqn", wr_set_inline_data => "wr_set_inline_data", wr_set_inline_data_list => "wr_set_inline_data_list", wr_set_sge => "wr_set_sge", wr_set_sge_list => "wr_set_sge_list", wr_start => "wr_start", wr_complete => "wr_complete", wr_abort => "wr_abort", wr_atomic_write => "wr_atomic_write", wr_flush => "wr_flush" }
    ibv_send_wr { wr_id => "wr_id", next => "next", sg_list => "sg_list", num_sge => "num_sge", opcode => "opcode", send_flags => "send_flags", imm_data => "imm_data", wr => "wr", wr.rdma.remote_addr => "wr.rdma.remote_addr", wr.rdma.rkey => "wr.rdma.rkey", wr.atomic.remote_addr => "wr.atomic.remote_addr", wr.atomic.compare_add => "wr.atomic.compare_add", wr.atomic.swap => "wr.atomic.swap", wr.atomic.rkey => "wr.atomic.rkey", wr.ud.ah => "wr.ud.ah", wr.ud.remote_qpn => "wr.ud.remote_qpn", wr.ud.remote_qkey => "wr.ud.remote_qkey", qp_type => "qp_type", qp_type.xrc.remote_srqn => "qp_type.xrc.remote_srqn", ext.bind_mw.mw => "bind_mw.mw", ext.bind_mw.rkey => "bind_mw.rkey", ext.bind_mw.bind_info => "bind_mw.bind_info", ext.tso.hdr => "tso.hdr", ext.tso.hdr_sz => "tso.hdr_sz", ext.tso.mss => "tso.mss" }
    ibv_recv_wr { wr_id => "wr_id", next => "next", sg_list => "sg_list", num_sge => "num_sge" }
    ibv_async_event { element => "element", element.port_num => "element.port_num", event_type => "event_type" }
    ibv_ece { vendor_id => "vendor_id", options => "options", comp_mask => "comp_mask" }
}
