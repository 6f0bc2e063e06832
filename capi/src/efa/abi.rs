//! The structs of rdma-core's `<infiniband/efadv.h>` (master's layout, which extends rdma-core
//! 44's), and the two completion-counter structs of master's `<infiniband/verbs.h>` that
//! `efadv_create_comp_cntr` takes and returns. Names are the C names, as in [`crate::abi`].
//!
//! Master grew some of rdma-core 44's structs at their end or in their reserved bytes
//! (`efadv_device_attr.inline_buf_size_ex` where 44 has `reserved[2]`, `efadv_qp_init_attr`
//! and `efadv_cq_init_attr` longer, `efadv_cq` with a second reader): a caller compiled against
//! 44 passes its shorter `inlen`, which every call here accepts as libefa does.
//! [`efa_layout`] lists the rows that hold for 44's installed header, [`efa_layout_master`]
//! every row of master's.
#![allow(non_camel_case_types, non_snake_case, missing_docs)]

use crate::abi::{ibv_context, LayoutRow};

pub const EFADV_DEVICE_ATTR_CAPS_RDMA_READ: u32 = 1 << 0;
pub const EFADV_DEVICE_ATTR_CAPS_RNR_RETRY: u32 = 1 << 1;
pub const EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID: u32 = 1 << 2;
pub const EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE: u32 = 1 << 3;
pub const EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV: u32 = 1 << 4;
pub const EFADV_DEVICE_ATTR_CAPS_CQ_WITH_EXT_MEM_DMABUF: u32 = 1 << 5;
pub const EFADV_DEVICE_ATTR_CAPS_COMP_CNTR: u32 = 1 << 6;

pub const EFADV_QP_DRIVER_TYPE_SRD: u32 = 0;
pub const EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV: u16 = 1 << 0;
pub const EFADV_QP_FLAGS_INLINE_WRITE: u16 = 1 << 1;
pub const EFADV_WR_EX_WITH_PROCESSING_HINTS: u64 = 1 << 0;
pub const EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE: u32 = 1 << 0;
pub const EFADV_WQ_CAPS_64_BIT_REQ_ID: u16 = 1 << 0;
pub const EFADV_WC_EX_WITH_SGID: u64 = 1 << 0;
pub const EFADV_WC_EX_WITH_IS_UNSOLICITED: u64 = 1 << 1;
pub const EFADV_CQ_INIT_FLAGS_EXT_MEM_DMABUF: u64 = 1 << 0;
pub const EFADV_MEMORY_LOCATION_VA: u8 = 0;
pub const EFADV_MEMORY_LOCATION_DMABUF: u8 = 1;
pub const EFADV_COMP_CNTR_INIT_WITH_COMP_EXTERNAL_MEM: u32 = 1 << 0;
pub const EFADV_COMP_CNTR_INIT_WITH_ERR_EXTERNAL_MEM: u32 = 1 << 1;
pub const EFADV_SQ_DEPTH_ATTR_INLINE_WRITE: u32 = 1 << 0;
pub const IBV_COMP_CNTR_TYPE_WRS: u32 = 0;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct efadv_device_attr {
    pub comp_mask: u64,
    pub max_sq_wr: u32,
    pub max_rq_wr: u32,
    pub max_sq_sge: u16,
    pub max_rq_sge: u16,
    pub inline_buf_size: u16,
    /// `reserved[2]` in rdma-core 44.
    pub inline_buf_size_ex: u16,
    pub device_caps: u32,
    pub max_rdma_size: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct efadv_ah_attr {
    pub comp_mask: u64,
    pub ahn: u16,
    pub reserved: [u8; 6],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct efadv_sq_depth_attr {
    pub comp_mask: u64,
    pub flags: u32,
    pub max_send_sge: u32,
    pub max_rdma_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct efadv_rq_depth_attr {
    pub comp_mask: u64,
    pub max_recv_sge: u32,
}

/// rdma-core 44: `comp_mask`, `driver_qp_type`, `reserved[4]` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct efadv_qp_init_attr {
    pub comp_mask: u64,
    pub driver_qp_type: u32,
    pub flags: u16,
    pub sl: u8,
    pub reserved: u8,
    pub wr_flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct efadv_wq_attr {
    pub comp_mask: u64,
    pub buffer: *mut u8,
    pub entry_size: u32,
    pub num_entries: u32,
    pub doorbell: *mut u32,
    pub max_batch: u32,
    pub caps: u16,
    pub reserved: [u8; 2],
}

/// `struct efadv_qp`: the one embedded in every QP (`crate::qp`'s `DvQp`).
pub type efadv_qp = crate::qp::DvQp;

/// `ext_mem_dmabuf` of [`efadv_cq_init_attr`] (an anonymous struct in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct efadv_cq_init_attr_ext_mem_dmabuf {
    pub buffer: *mut u8,
    pub length: u64,
    pub offset: u64,
    pub fd: i32,
    pub reserved: [u8; 4],
}

/// rdma-core 44: `comp_mask`, `wc_flags` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct efadv_cq_init_attr {
    pub comp_mask: u64,
    pub wc_flags: u64,
    pub flags: u64,
    pub ext_mem_dmabuf: efadv_cq_init_attr_ext_mem_dmabuf,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct efadv_cq_attr {
    pub comp_mask: u64,
    pub buffer: *mut u8,
    pub entry_size: u32,
    pub num_entries: u32,
    pub doorbell: *mut u32,
}

/// `struct efadv_cq` (rdma-core 44: `comp_mask`, `wc_read_sgid`, 16 bytes): the one embedded
/// in every CQ (`crate::cq`'s `DvCq`).
pub type efadv_cq = crate::cq::DvCq;

/// `dmabuf` of [`efadv_memory_location`] (an anonymous struct in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct efadv_memory_location_dmabuf {
    pub offset: u64,
    pub fd: i32,
    pub reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct efadv_memory_location {
    pub ptr: *mut u8,
    pub dmabuf: efadv_memory_location_dmabuf,
    pub type_: u8,
    pub reserved: [u8; 7],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct efadv_comp_cntr_init_attr {
    pub comp_mask: u64,
    pub flags: u32,
    pub reserved: u32,
    pub comp_cntr_ext_mem: efadv_memory_location,
    pub err_cntr_ext_mem: efadv_memory_location,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct efadv_mr_attr {
    pub comp_mask: u64,
    pub ic_id_validity: u16,
    pub recv_ic_id: u16,
    pub rdma_read_ic_id: u16,
    pub rdma_recv_ic_id: u16,
}

/// `struct ibv_comp_cntr` of master's verbs.h.
#[repr(C)]
pub struct ibv_comp_cntr {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_comp_cntr_init_attr` of master's verbs.h.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_comp_cntr_init_attr {
    pub comp_mask: u32,
    pub type_: u32,
    pub flags: u32,
}

macro_rules! efa_rows {
    ($name:ident: $( $ty:ident $([$sized:ident])? { $($field:ident $(. $sub:ident)* => $cname:literal),* $(,)? } )*) => {
        /// Layout rows (C struct, C field, Rust offset, Rust size), as [`crate::abi::layout`];
        /// a struct's size row (field `""`) only where the header's struct is this one whole.
        pub fn $name() -> Vec<LayoutRow> {
            let mut v = Vec::new();
            $(
                $(
                    let _ = stringify!($sized);
                    v.push((stringify!($ty), "", 0, core::mem::size_of::<$ty>()));
                )?
                $(
                    {
                        let off = core::mem::offset_of!($ty, $field $(. $sub)*);
                        let size = size_of_field(|s: &$ty| &s.$field $(. $sub)*);
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

efa_rows! { efa_layout:
    efadv_device_attr [sized] { comp_mask => "comp_mask", max_sq_wr => "max_sq_wr", max_rq_wr => "max_rq_wr", max_sq_sge => "max_sq_sge", max_rq_sge => "max_rq_sge", inline_buf_size => "inline_buf_size", device_caps => "device_caps", max_rdma_size => "max_rdma_size" }
    efadv_ah_attr [sized] { comp_mask => "comp_mask", ahn => "ahn", reserved => "reserved" }
    efadv_qp_init_attr { comp_mask => "comp_mask", driver_qp_type => "driver_qp_type" }
    efadv_cq_init_attr { comp_mask => "comp_mask", wc_flags => "wc_flags" }
    efadv_cq { comp_mask => "comp_mask", wc_read_sgid => "wc_read_sgid" }
}

efa_rows! { efa_layout_master:
    efadv_device_attr [sized] { comp_mask => "comp_mask", max_sq_wr => "max_sq_wr", max_rq_wr => "max_rq_wr", max_sq_sge => "max_sq_sge", max_rq_sge => "max_rq_sge", inline_buf_size => "inline_buf_size", inline_buf_size_ex => "inline_buf_size_ex", device_caps => "device_caps", max_rdma_size => "max_rdma_size" }
    efadv_ah_attr [sized] { comp_mask => "comp_mask", ahn => "ahn", reserved => "reserved" }
    efadv_sq_depth_attr [sized] { comp_mask => "comp_mask", flags => "flags", max_send_sge => "max_send_sge", max_rdma_sge => "max_rdma_sge", max_inline_data => "max_inline_data" }
    efadv_rq_depth_attr [sized] { comp_mask => "comp_mask", max_recv_sge => "max_recv_sge" }
    efadv_qp_init_attr [sized] { comp_mask => "comp_mask", driver_qp_type => "driver_qp_type", flags => "flags", sl => "sl", reserved => "reserved", wr_flags => "wr_flags" }
    efadv_wq_attr [sized] { comp_mask => "comp_mask", buffer => "buffer", entry_size => "entry_size", num_entries => "num_entries", doorbell => "doorbell", max_batch => "max_batch", caps => "caps", reserved => "reserved" }
    efadv_qp [sized] { comp_mask => "comp_mask", wr_set_processing_hints => "wr_set_processing_hints" }
    efadv_cq_init_attr [sized] { comp_mask => "comp_mask", wc_flags => "wc_flags", flags => "flags", ext_mem_dmabuf => "ext_mem_dmabuf", ext_mem_dmabuf.buffer => "ext_mem_dmabuf.buffer", ext_mem_dmabuf.length => "ext_mem_dmabuf.length", ext_mem_dmabuf.offset => "ext_mem_dmabuf.offset", ext_mem_dmabuf.fd => "ext_mem_dmabuf.fd", ext_mem_dmabuf.reserved => "ext_mem_dmabuf.reserved" }
    efadv_cq_attr [sized] { comp_mask => "comp_mask", buffer => "buffer", entry_size => "entry_size", num_entries => "num_entries", doorbell => "doorbell" }
    efadv_cq [sized] { comp_mask => "comp_mask", wc_read_sgid => "wc_read_sgid", wc_is_unsolicited => "wc_is_unsolicited" }
    efadv_memory_location [sized] { ptr => "ptr", dmabuf => "dmabuf", dmabuf.offset => "dmabuf.offset", dmabuf.fd => "dmabuf.fd", dmabuf.reserved => "dmabuf.reserved", type_ => "type", reserved => "reserved" }
    efadv_comp_cntr_init_attr [sized] { comp_mask => "comp_mask", flags => "flags", reserved => "reserved", comp_cntr_ext_mem => "comp_cntr_ext_mem", err_cntr_ext_mem => "err_cntr_ext_mem" }
    efadv_mr_attr [sized] { comp_mask => "comp_mask", ic_id_validity => "ic_id_validity", recv_ic_id => "recv_ic_id", rdma_read_ic_id => "rdma_read_ic_id", rdma_recv_ic_id => "rdma_recv_ic_id" }
    ibv_comp_cntr [sized] { context => "context", handle => "handle" }
    ibv_comp_cntr_init_attr [sized] { comp_mask => "comp_mask", type_ => "type", flags => "flags" }
}
