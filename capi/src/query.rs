//! The queries: `ibv_query_device(_ex)`, `ibv_query_port`, `ibv_query_gid(_ex, _table,
//! _type)`, `ibv_query_pkey`, `ibv_get_pkey_index`.

use core::ffi::{c_char, c_int};
use core::mem::size_of;
use core::ptr;

use crate::abi::*;
use crate::device::context;
use crate::util::{guard, report};

fn device_attr(a: &uverbs::DeviceAttr) -> ibv_device_attr {
    let mut fw_ver = [0 as c_char; 64];
    for (d, b) in fw_ver.iter_mut().zip(a.fw_ver.bytes().take(63)) {
        *d = b as c_char;
    }
    let i = |v: u32| v.min(i32::MAX as u32) as c_int;
    ibv_device_attr {
        fw_ver,
        node_guid: a.node_guid.to_be(),
        sys_image_guid: a.sys_image_guid.to_be(),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: i(a.max_qp),
        max_qp_wr: i(a.max_qp_wr),
        device_cap_flags: a.device_cap_flags.bits(),
        max_sge: i(a.max_sge),
        max_sge_rd: i(a.max_sge_rd),
        max_cq: i(a.max_cq),
        max_cqe: i(a.max_cqe),
        max_mr: i(a.max_mr),
        max_pd: i(a.max_pd),
        max_qp_rd_atom: i(a.max_qp_rd_atom),
        max_ee_rd_atom: i(a.max_ee_rd_atom),
        max_res_rd_atom: i(a.max_res_rd_atom),
        max_qp_init_rd_atom: i(a.max_qp_init_rd_atom),
        max_ee_init_rd_atom: i(a.max_ee_init_rd_atom),
        atomic_cap: a.atomic_cap.raw() as c_int,
        max_ee: i(a.max_ee),
        max_rdd: i(a.max_rdd),
        max_mw: i(a.max_mw),
        max_raw_ipv6_qp: i(a.max_raw_ipv6_qp),
        max_raw_ethy_qp: i(a.max_raw_ethy_qp),
        max_mcast_grp: i(a.max_mcast_grp),
        max_mcast_qp_attach: i(a.max_mcast_qp_attach),
        max_total_mcast_qp_attach: i(a.max_total_mcast_qp_attach),
        max_ah: i(a.max_ah),
        max_fmr: i(a.max_fmr),
        max_map_per_fmr: i(a.max_map_per_fmr),
        max_srq: i(a.max_srq),
        max_srq_wr: i(a.max_srq_wr),
        max_srq_sge: i(a.max_srq_sge),
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        phys_port_cnt: a.phys_port_cnt,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    guard("ibv_query_device", libc::EIO, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            return libc::EINVAL;
        };
        if attr.is_null() {
            return libc::EINVAL;
        }
        match c.ctx.query_device() {
            Ok(a) => {
                // SAFETY: attr is non-NULL and points at a struct ibv_device_attr.
                unsafe { attr.write(device_attr(&a)) };
                0
            }
            Err(e) => report(&e),
        }
    })
}

/// `verbs_context.query_device_ex`: fills at most `attr_size` bytes (a program built against
/// an older header passes a shorter struct), as rdma-core does.
pub unsafe extern "C" fn query_device_ex(
    ctx: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    guard("ibv_query_device_ex", libc::EIO, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            return libc::EINVAL;
        };
        // SAFETY: input is NULL or a valid ibv_query_device_ex_input.
        if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
            return libc::EINVAL;
        }
        if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
            return libc::EINVAL;
        }
        let a = match c.ctx.query_device_ex() {
            Ok(a) => a,
            Err(e) => return report(&e),
        };
        let x = ibv_device_attr_ex {
            orig_attr: device_attr(&a.orig_attr),
            comp_mask: 0,
            odp_caps: ibv_odp_caps {
                general_caps: a.odp_caps.general_caps.bits(),
                per_transport_caps: ibv_odp_per_transport_caps {
                    rc_odp_caps: a.odp_caps.rc_odp_caps.bits(),
                    uc_odp_caps: a.odp_caps.uc_odp_caps.bits(),
                    ud_odp_caps: a.odp_caps.ud_odp_caps.bits(),
                },
            },
            completion_timestamp_mask: a.completion_timestamp_mask,
            hca_core_clock: a.hca_core_clock,
            device_cap_flags_ex: a.device_cap_flags_ex,
            tso_caps: ibv_tso_caps {
                max_tso: a.tso_caps.max_tso,
                supported_qpts: a.tso_caps.supported_qpts,
            },
            rss_caps: ibv_rss_caps {
                supported_qpts: a.rss_caps.supported_qpts,
                max_rwq_indirection_tables: a.rss_caps.max_rwq_indirection_tables,
                max_rwq_indirection_table_size: a.rss_caps.max_rwq_indirection_table_size,
                rx_hash_fields_mask: a.rss_caps.rx_hash_fields_mask,
                rx_hash_function: a.rss_caps.rx_hash_function,
            },
            max_wq_type_rq: a.max_wq_type_rq,
            packet_pacing_caps: ibv_packet_pacing_caps {
                qp_rate_limit_min: a.packet_pacing_caps.qp_rate_limit_min,
                qp_rate_limit_max: a.packet_pacing_caps.qp_rate_limit_max,
                supported_qpts: a.packet_pacing_caps.supported_qpts,
            },
            raw_packet_caps: a.raw_packet_caps,
            tm_caps: ibv_tm_caps {
                max_rndv_hdr_size: a.tm_caps.max_rndv_hdr_size,
                max_num_tags: a.tm_caps.max_num_tags,
                flags: a.tm_caps.flags,
                max_ops: a.tm_caps.max_ops,
                max_sge: a.tm_caps.max_sge,
            },
            cq_mod_caps: ibv_cq_moderation_caps {
                max_cq_count: a.cq_mod_caps.max_cq_count,
                max_cq_period: a.cq_mod_caps.max_cq_period,
            },
            max_dm_size: a.max_dm_size,
            pci_atomic_caps: ibv_pci_atomic_caps {
                fetch_add: a.pci_atomic_caps.fetch_add,
                swap: a.pci_atomic_caps.swap,
                compare_swap: a.pci_atomic_caps.compare_swap,
            },
            xrc_odp_caps: a.xrc_odp_caps.bits(),
            phys_port_cnt_ex: a.phys_port_cnt_ex,
        };
        let n = attr_size.min(size_of::<ibv_device_attr_ex>());
        // SAFETY: the caller's struct is attr_size bytes long; we copy at most that many
        // bytes of a plain repr(C) value (padding included, as rdma-core's memcpy does).
        unsafe { ptr::copy_nonoverlapping(&x as *const _ as *const u8, attr as *mut u8, n) };
        0
    })
}

fn port_attr(p: &uverbs::PortAttr) -> ibv_port_attr {
    ibv_port_attr {
        state: p.state.raw() as c_int,
        max_mtu: p.max_mtu.raw() as c_int,
        active_mtu: p.active_mtu.raw() as c_int,
        gid_tbl_len: p.gid_tbl_len.min(i32::MAX as u32) as c_int,
        port_cap_flags: p.port_cap_flags,
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed,
        phys_state: p.phys_state,
        link_layer: p.link_layer.raw(),
        flags: p.flags,
        port_cap_flags2: p.port_cap_flags2,
        active_speed_ex: p.active_speed_ex,
    }
}

fn query_port_into(ctx: *mut ibv_context, port: u8, out: *mut ibv_port_attr, len: usize) -> c_int {
    // SAFETY: the program passes a context it opened (or NULL).
    let Some(c) = (unsafe { context(ctx) }) else {
        return libc::EINVAL;
    };
    if out.is_null() {
        return libc::EINVAL;
    }
    match c.ctx.query_port(port) {
        Ok(p) => {
            let a = port_attr(&p);
            let n = len.min(size_of::<ibv_port_attr>());
            // SAFETY: the caller's struct is `len` bytes long; at most that many are written.
            unsafe { ptr::copy_nonoverlapping(&a as *const _ as *const u8, out as *mut u8, n) };
            0
        }
        Err(e) => report(&e),
    }
}

/// The exported `ibv_query_port` (IBVERBS_1.1): the header's inline version calls
/// `verbs_context.query_port` instead; this one serves old binaries and the header's
/// fallback, and writes `struct _compat_ibv_port_attr` (everything up to `flags`).
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port_num: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    guard("ibv_query_port", libc::EIO, || {
        query_port_into(ctx, port_num, attr, COMPAT_PORT_ATTR_LEN)
    })
}

/// `verbs_context.query_port`: writes at most `port_attr_len` bytes.
pub unsafe extern "C" fn query_port(
    ctx: *mut ibv_context,
    port_num: u8,
    attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> c_int {
    guard("ibv_query_port", libc::EIO, || {
        query_port_into(ctx, port_num, attr, port_attr_len)
    })
}

/// `ibv_query_port_speed` (rdma-core master, IBVERBS_1.16): the effective speed in units of
/// 100 Mb/s.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port_speed(
    ctx: *mut ibv_context,
    port_num: u32,
    port_speed: *mut u64,
) -> c_int {
    guard("ibv_query_port_speed", libc::EIO, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            return libc::EINVAL;
        };
        let Ok(port) = u8::try_from(port_num) else {
            return libc::EINVAL;
        };
        if port_speed.is_null() {
            return libc::EINVAL;
        }
        match c.ctx.query_port_speed(port) {
            Ok(s) => {
                // SAFETY: non-NULL, points at a u64 (above).
                unsafe { *port_speed = s };
                0
            }
            Err(e) => report(&e),
        }
    })
}

/// `ibv_query_gid` returns -1 on failure (rdma-core: "0 on success, -1 on error").
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    guard("ibv_query_gid", -1, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            crate::util::set_errno(libc::EINVAL);
            return -1;
        };
        if gid.is_null() || index < 0 {
            crate::util::set_errno(libc::EINVAL);
            return -1;
        }
        match c.ctx.query_gid(port_num, index as u32) {
            Ok(g) => {
                // SAFETY: non-NULL, points at a union ibv_gid (16 bytes).
                unsafe { (*gid).raw = g.raw };
                0
            }
            Err(e) => {
                crate::util::set_errno(report(&e));
                -1
            }
        }
    })
}

fn gid_entry(e: &uverbs::GidEntry) -> ibv_gid_entry {
    ibv_gid_entry {
        gid: ibv_gid { raw: e.gid.raw },
        gid_index: e.gid_index,
        port_num: e.port_num,
        gid_type: e.gid_type.raw(),
        ndev_ifindex: e.ndev_ifindex,
    }
}

/// `_ibv_query_gid_ex` (IBVERBS_1.11), behind the header's `ibv_query_gid_ex`.
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    guard("ibv_query_gid_ex", libc::EIO, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            return libc::EINVAL;
        };
        if entry.is_null() || flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
            return libc::EINVAL;
        }
        let Ok(port) = u8::try_from(port_num) else {
            return libc::EINVAL;
        };
        match c.ctx.query_gid_ex(port, gid_index) {
            Ok(e) => {
                // SAFETY: non-NULL and at least one ibv_gid_entry long (checked above).
                unsafe { entry.write(gid_entry(&e)) };
                0
            }
            Err(e) => report(&e),
        }
    })
}

/// `_ibv_query_gid_table` (IBVERBS_1.11): the number of entries written, or a negative
/// errno.
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    guard("ibv_query_gid_table", -(libc::EIO as isize), || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            return -(libc::EINVAL as isize);
        };
        if flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
            return -(libc::EINVAL as isize);
        }
        let table = match c.ctx.query_gid_table() {
            Ok(t) => t,
            Err(e) => return -(report(&e) as isize),
        };
        if table.len() > max_entries {
            return -(libc::EINVAL as isize);
        }
        if !table.is_empty() && entries.is_null() {
            return -(libc::EINVAL as isize);
        }
        for (i, e) in table.iter().enumerate() {
            // SAFETY: the caller's array has max_entries entries of entry_size bytes; i is
            // below table.len() <= max_entries, and entry_size >= sizeof(ibv_gid_entry).
            unsafe {
                let dst = (entries as *mut u8).add(i * entry_size) as *mut ibv_gid_entry;
                dst.write_unaligned(gid_entry(e));
            }
        }
        table.len() as isize
    })
}

/// `ibv_query_gid_type` (IBVERBS_PRIVATE_34; ibv_devinfo and pyverbs call it): the GID's
/// type as rdma-core's sysfs enum, which is not `enum ibv_gid_type`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut ibv_context,
    port_num: u8,
    index: u32,
    type_: *mut u32,
) -> c_int {
    guard("ibv_query_gid_type", libc::EIO, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            return libc::EINVAL;
        };
        if type_.is_null() {
            return libc::EINVAL;
        }
        match c.ctx.query_gid_ex(port_num, index) {
            Ok(e) => {
                // `enum ibv_gid_type_sysfs` (rdma-core's private ABI): IB and RoCE v1 are
                // IBV_GID_TYPE_SYSFS_IB_ROCE_V1 (0), RoCE v2 is IBV_GID_TYPE_SYSFS_ROCE_V2 (1).
                let t = u32::from(e.gid_type == uverbs::GidType::RoceV2);
                // SAFETY: non-NULL, points at the caller's enum ibv_gid_type_sysfs.
                unsafe { *type_ = t };
                0
            }
            Err(e) => report(&e),
        }
    })
}

/// `ibv_query_pkey` returns -1 on failure, as rdma-core.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard("ibv_query_pkey", -1, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            crate::util::set_errno(libc::EINVAL);
            return -1;
        };
        let Ok(index) = u16::try_from(index) else {
            crate::util::set_errno(libc::EINVAL);
            return -1;
        };
        if pkey.is_null() {
            crate::util::set_errno(libc::EINVAL);
            return -1;
        }
        match c.ctx.query_pkey(port_num, index) {
            Ok(p) => {
                // SAFETY: non-NULL, points at a __be16.
                unsafe { *pkey = p.to_be() };
                0
            }
            Err(e) => {
                crate::util::set_errno(report(&e));
                -1
            }
        }
    })
}

/// `ibv_get_pkey_index` (IBVERBS_1.5): the index of `pkey` (network order), or -1.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_pkey_index(
    ctx: *mut ibv_context,
    port_num: u8,
    pkey: u16,
) -> c_int {
    guard("ibv_get_pkey_index", -1, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            crate::util::set_errno(libc::EINVAL);
            return -1;
        };
        let want = u16::from_be(pkey);
        let len = match c.ctx.query_port(port_num) {
            Ok(p) => p.pkey_tbl_len,
            Err(e) => {
                crate::util::set_errno(report(&e));
                return -1;
            }
        };
        for i in 0..len {
            match c.ctx.query_pkey(port_num, i) {
                Ok(p) if p == want => return c_int::from(i),
                Ok(_) => {}
                Err(e) => {
                    crate::util::set_errno(report(&e));
                    return -1;
                }
            }
        }
        crate::util::set_errno(libc::ENOENT);
        -1
    })
}
