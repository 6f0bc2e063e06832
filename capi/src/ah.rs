//! Address handles: `ibv_create_ah`, `ibv_destroy_ah`, `ibv_init_ah_from_wc`,
//! `ibv_create_ah_from_wc`, `ibv_resolve_eth_l2_from_gid`, and the kernel-struct copies of
//! `<infiniband/marshall.h>` (`ibv_copy_*_kern`) that librdmacm calls.

use core::ffi::c_int;
use core::mem::ManuallyDrop;
use core::ptr;

use uverbs::uapi::ucma::IbUserPathRec;
use uverbs::uapi::write::{IbUverbsAhAttr, IbUverbsQpAttr};
use uverbs::{AhAttr, Gid, GidType, GlobalRoute, WcFlags};

use crate::abi::*;
use crate::device::context;
use crate::pd::pd;
use crate::util::{destroy_in_place, einval, eopnotsupp, guard, ptr_or_errno, report, set_errno};

/// An AH as C sees it and the uverbs AH behind it.
#[repr(C)]
pub struct Ah {
    pub ibv: ibv_ah,
    pub ah: ManuallyDrop<uverbs::Ah>,
}

/// The [`Ah`] of an `ibv_ah` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live AH from [`ibv_create_ah`].
pub unsafe fn ah<'a>(p: *mut ibv_ah) -> Option<&'a Ah> {
    // SAFETY: see above; ibv is the first field of the repr(C) Ah.
    unsafe { (p as *const Ah).as_ref() }
}

/// The bytes of a GID (every bit pattern of the union is its `raw` bytes).
pub fn gid_raw(g: &ibv_gid) -> [u8; 16] {
    // SAFETY: both members of the union are plain bytes of the same 16-byte storage, so
    // reading `raw` is valid whichever member was written.
    unsafe { g.raw }
}

/// uverbs' address vector of a C one.
pub fn ah_attr_from_c(a: &ibv_ah_attr) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            dgid: Gid {
                raw: gid_raw(&a.grh.dgid),
            },
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: a.is_global != 0,
        port_num: a.port_num,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(p: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    guard("ibv_create_ah", ptr::null_mut(), || {
        // SAFETY: the program passes a PD it allocated and NULL or a valid attribute.
        let (Some(w), Some(a)) = (unsafe { pd(p) }, unsafe { attr.as_ref() }) else {
            return ptr_or_errno(Err(einval("ibv_create_ah", "pd or attr is NULL")));
        };
        ptr_or_errno(w.pd.create_ah(&ah_attr_from_c(a)).map(|ah| {
            let ibv = ibv_ah {
                context: w.ibv.context,
                pd: p,
                handle: ah.handle(),
            };
            Box::into_raw(Box::new(Ah {
                ibv,
                ah: ManuallyDrop::new(ah),
            })) as *mut ibv_ah
        }))
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(a: *mut ibv_ah) -> c_int {
    guard("ibv_destroy_ah", libc::EIO, || {
        // SAFETY: the program passes NULL or an AH it created.
        if unsafe { ah(a) }.is_none() {
            return libc::EINVAL;
        }
        // SAFETY: the program gives up an AH it created (boxed by ibv_create_ah).
        unsafe { destroy_in_place(a as *mut Ah, |w| &mut w.ah, uverbs::Ah::destroy) }
    })
}

/// `IPPROTO_UDP` in a GRH's next header: RoCE v2.
const NEXT_HDR_UDP: u8 = 17;
/// The IB transport as a GRH's next header: RoCE v1 (and IB).
const NEXT_HDR_IB: u8 = 0x1b;
/// Where a RoCE v2 IPv4 header starts in the 40 bytes of a GRH slot.
const IPV4_AT: usize = 20;

/// The index of `gid` of `port` in the GID table, with RoCE v2 (`v2`) or IB / RoCE v1 type,
/// as rdma-core's `ibv_find_gid_index` looks it up. Not found: EINVAL, what rdma-core's
/// search ends with (the query past the end of the table).
fn find_gid_index(ctx: &uverbs::Context, port: u8, gid: [u8; 16], v2: bool) -> Result<u8, c_int> {
    let table = ctx.query_gid_table().map_err(|e| report(&e))?;
    table
        .iter()
        .filter(|e| e.port_num == u32::from(port) && e.gid.raw == gid)
        .find(|e| (e.gid_type == GidType::RoceV2) == v2)
        .map(|e| e.gid_index as u8)
        .ok_or(libc::EINVAL)
}

/// The IPv4-mapped IPv6 address of an IPv4 address (network order bytes).
fn v4_mapped(addr: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&addr);
    g
}

/// The IP version of the headers in a GRH slot, as rdma-core's `get_grh_header_version`
/// decides it: an IPv6 header says 6 unless bytes 20..40 hold an IPv4 header (IHL 5) whose
/// checksum is right; otherwise an IPv4 header says 4.
fn grh_version(b: &[u8; 40]) -> Result<u8, c_int> {
    let ip6_version = b[0] >> 4;
    let ip4 = &b[IPV4_AT..];
    if ip6_version != 6 {
        if ip4[0] >> 4 == 4 {
            return Ok(4);
        }
        return Err(libc::EPROTONOSUPPORT);
    }
    if ip4[0] & 0xf != 5 {
        return Ok(6);
    }
    // The header's ten 16-bit words with the checksum zeroed, summed and folded once, as
    // rdma-core's ipv4_calc_hdr_csum does (in the machine's byte order, as it loads them).
    let mut sum: u32 = 0;
    for (i, w) in ip4.chunks_exact(2).enumerate() {
        if i != 5 {
            sum += u32::from(u16::from_ne_bytes([w[0], w[1]]));
        }
    }
    sum = (sum & 0xffff) + (sum >> 16);
    let csum = !(sum as u16);
    if u16::from_ne_bytes([ip4[10], ip4[11]]) == csum {
        Ok(4)
    } else {
        Ok(6)
    }
}

/// `ibv_init_ah_from_wc`'s work: the address vector that answers the sender of `wc`.
fn ah_from_wc(
    ctx: &uverbs::Context,
    port: u8,
    wc: &ibv_wc,
    grh: Option<&[u8; 40]>,
) -> Result<ibv_ah_attr, c_int> {
    // SAFETY: all-zero is a valid ibv_ah_attr (rdma-core memsets it too).
    let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
    a.dlid = wc.slid;
    a.sl = wc.sl;
    a.src_path_bits = wc.dlid_path_bits;
    a.port_num = port;
    let Some(g) = grh else {
        if wc.wc_flags.contains(WcFlags::GRH) {
            return Err(libc::EINVAL);
        }
        return Ok(a);
    };
    let flow_class = u32::from_be_bytes([g[0], g[1], g[2], g[3]]);
    a.grh.flow_label = flow_class & 0xfffff;
    if !wc.wc_flags.contains(WcFlags::GRH) {
        return Ok(a);
    }
    a.is_global = 1;
    match grh_version(g)? {
        4 => {
            let ip4 = &g[IPV4_AT..];
            let daddr = [ip4[16], ip4[17], ip4[18], ip4[19]];
            // No point searching the GID table for a multicast (class D) address.
            if daddr[0] & 0xf0 == 0xe0 {
                return Err(libc::EINVAL);
            }
            let idx = find_gid_index(ctx, port, v4_mapped(daddr), true)?;
            a.grh.dgid = ibv_gid {
                raw: v4_mapped([ip4[12], ip4[13], ip4[14], ip4[15]]),
            };
            a.grh.sgid_index = idx;
            a.grh.hop_limit = ip4[8];
            a.grh.traffic_class = ip4[1];
        }
        _ => {
            let next_hdr = g[6];
            let hop_limit = g[7];
            let mut sgid = [0u8; 16];
            sgid.copy_from_slice(&g[8..24]);
            let mut dgid = [0u8; 16];
            dgid.copy_from_slice(&g[24..40]);
            if dgid[0] == 0xff {
                return Err(libc::EINVAL);
            }
            a.grh.dgid = ibv_gid { raw: sgid };
            let v2 = match next_hdr {
                NEXT_HDR_UDP => true,
                NEXT_HDR_IB => false,
                _ => return Err(libc::EPROTONOSUPPORT),
            };
            a.grh.sgid_index = find_gid_index(ctx, port, dgid, v2)?;
            a.grh.hop_limit = hop_limit;
            a.grh.traffic_class = ((flow_class >> 20) & 0xff) as u8;
        }
    }
    Ok(a)
}

/// `ibv_init_ah_from_wc`: 0, or -1 with errno set (as rdma-core returns).
#[no_mangle]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    ctx: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    guard("ibv_init_ah_from_wc", -1, || {
        // SAFETY: the program passes its context, a completion, NULL or the 40 bytes of the
        // GRH slot of the receive buffer, and an attribute to fill.
        let (c, w, g, out) = unsafe {
            (
                context(ctx),
                wc.as_ref(),
                (grh as *const [u8; 40]).as_ref(),
                ah_attr.as_mut(),
            )
        };
        let (Some(c), Some(w), Some(out)) = (c, w, out) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        match ah_from_wc(&c.ctx, port_num, w, g) {
            Ok(a) => {
                *out = a;
                0
            }
            Err(e) => {
                set_errno(e);
                -1
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    p: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    guard("ibv_create_ah_from_wc", ptr::null_mut(), || {
        // SAFETY: the program passes a PD it allocated.
        let Some(w) = (unsafe { pd(p) }) else {
            return ptr_or_errno(Err(einval("ibv_create_ah_from_wc", "pd is NULL")));
        };
        // SAFETY: all-zero is a valid ibv_ah_attr.
        let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
        // SAFETY: the arguments as the program passed them, and an attribute of ours.
        if unsafe { ibv_init_ah_from_wc(w.ibv.context, port_num, wc, grh, &mut a) } != 0 {
            return ptr::null_mut();
        }
        // SAFETY: the program's PD and our attribute.
        unsafe { ibv_create_ah(p, &mut a) }
    })
}

/// `ibv_resolve_eth_l2_from_gid` (the destination MAC and VLAN of a RoCE address, from the
/// kernel's neighbour table): uverbs leaves that to the kernel's CREATE_AH; -1 with errno
/// `EOPNOTSUPP`.
#[no_mangle]
pub unsafe extern "C" fn ibv_resolve_eth_l2_from_gid(
    _ctx: *mut ibv_context,
    _attr: *mut ibv_ah_attr,
    _eth_mac: *mut u8,
    _vid: *mut u16,
) -> c_int {
    guard("ibv_resolve_eth_l2_from_gid", -1, || {
        set_errno(report(&eopnotsupp(
            "ibv_resolve_eth_l2_from_gid",
            "the kernel resolves the destination MAC when it creates an AH",
        )));
        -1
    })
}

fn ah_attr_from_kern(s: &IbUverbsAhAttr) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: s.grh.dgid },
            flow_label: s.grh.flow_label,
            sgid_index: s.grh.sgid_index,
            hop_limit: s.grh.hop_limit,
            traffic_class: s.grh.traffic_class,
        },
        dlid: s.dlid,
        sl: s.sl,
        src_path_bits: s.src_path_bits,
        static_rate: s.static_rate,
        is_global: s.is_global,
        port_num: s.port_num,
    }
}

/// `ibv_copy_ah_attr_from_kern`: `struct ib_uverbs_ah_attr` to `struct ibv_ah_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_copy_ah_attr_from_kern(
    dst: *mut ibv_ah_attr,
    src: *const IbUverbsAhAttr,
) {
    guard("ibv_copy_ah_attr_from_kern", (), || {
        // SAFETY: the caller passes a valid destination and source, as rdma-core requires.
        if let (Some(d), Some(s)) = unsafe { (dst.as_mut(), src.as_ref()) } {
            *d = ah_attr_from_kern(s);
        }
    })
}

/// `ibv_copy_qp_attr_from_kern`: `struct ib_uverbs_qp_attr` to `struct ibv_qp_attr`. As
/// rdma-core's, it copies every field but `qp_state`.
#[no_mangle]
pub unsafe extern "C" fn ibv_copy_qp_attr_from_kern(
    dst: *mut ibv_qp_attr,
    src: *const IbUverbsQpAttr,
) {
    guard("ibv_copy_qp_attr_from_kern", (), || {
        // SAFETY: the caller passes a valid destination and source, as rdma-core requires.
        let (Some(d), Some(s)) = (unsafe { (dst.as_mut(), src.as_ref()) }) else {
            return;
        };
        d.cur_qp_state = s.cur_qp_state as c_int;
        d.path_mtu = s.path_mtu as c_int;
        d.path_mig_state = s.path_mig_state as c_int;
        d.qkey = s.qkey;
        d.rq_psn = s.rq_psn;
        d.sq_psn = s.sq_psn;
        d.dest_qp_num = s.dest_qp_num;
        d.qp_access_flags = s.qp_access_flags;
        d.cap = ibv_qp_cap {
            max_send_wr: s.max_send_wr,
            max_recv_wr: s.max_recv_wr,
            max_send_sge: s.max_send_sge,
            max_recv_sge: s.max_recv_sge,
            max_inline_data: s.max_inline_data,
        };
        d.ah_attr = ah_attr_from_kern(&s.ah_attr);
        d.alt_ah_attr = ah_attr_from_kern(&s.alt_ah_attr);
        d.pkey_index = s.pkey_index;
        d.alt_pkey_index = s.alt_pkey_index;
        d.en_sqd_async_notify = s.en_sqd_async_notify;
        d.sq_draining = s.sq_draining;
        d.max_rd_atomic = s.max_rd_atomic;
        d.max_dest_rd_atomic = s.max_dest_rd_atomic;
        d.min_rnr_timer = s.min_rnr_timer;
        d.port_num = s.port_num;
        d.timeout = s.timeout;
        d.retry_cnt = s.retry_cnt;
        d.rnr_retry = s.rnr_retry;
        d.alt_port_num = s.alt_port_num;
        d.alt_timeout = s.alt_timeout;
    })
}

/// `ibv_copy_path_rec_from_kern`: `struct ib_user_path_rec` to `struct ibv_sa_path_rec`
/// (network-order fields stay so).
#[no_mangle]
pub unsafe extern "C" fn ibv_copy_path_rec_from_kern(
    dst: *mut ibv_sa_path_rec,
    src: *const IbUserPathRec,
) {
    guard("ibv_copy_path_rec_from_kern", (), || {
        // SAFETY: the caller passes a valid destination and source, as rdma-core requires.
        let (Some(d), Some(s)) = (unsafe { (dst.as_mut(), src.as_ref()) }) else {
            return;
        };
        d.dgid = ibv_gid { raw: s.dgid };
        d.sgid = ibv_gid { raw: s.sgid };
        d.dlid = s.dlid;
        d.slid = s.slid;
        d.raw_traffic = s.raw_traffic as c_int;
        d.flow_label = s.flow_label;
        d.hop_limit = s.hop_limit;
        d.traffic_class = s.traffic_class;
        d.reversible = s.reversible as c_int;
        d.numb_path = s.numb_path;
        d.pkey = s.pkey;
        d.sl = s.sl;
        d.mtu_selector = s.mtu_selector;
        d.mtu = s.mtu as u8;
        d.rate_selector = s.rate_selector;
        d.rate = s.rate;
        d.packet_life_time = s.packet_life_time;
        d.preference = s.preference;
        d.packet_life_time_selector = s.packet_life_time_selector;
    })
}

/// `ibv_copy_path_rec_to_kern`: `struct ibv_sa_path_rec` to `struct ib_user_path_rec`.
#[no_mangle]
pub unsafe extern "C" fn ibv_copy_path_rec_to_kern(
    dst: *mut IbUserPathRec,
    src: *const ibv_sa_path_rec,
) {
    guard("ibv_copy_path_rec_to_kern", (), || {
        // SAFETY: the caller passes a valid destination and source, as rdma-core requires.
        let (Some(d), Some(s)) = (unsafe { (dst.as_mut(), src.as_ref()) }) else {
            return;
        };
        d.dgid = gid_raw(&s.dgid);
        d.sgid = gid_raw(&s.sgid);
        d.dlid = s.dlid;
        d.slid = s.slid;
        d.raw_traffic = s.raw_traffic as u32;
        d.flow_label = s.flow_label;
        d.hop_limit = s.hop_limit;
        d.traffic_class = s.traffic_class;
        d.reversible = s.reversible as u32;
        d.numb_path = s.numb_path;
        d.pkey = s.pkey;
        d.sl = s.sl;
        d.mtu_selector = s.mtu_selector;
        d.mtu = u32::from(s.mtu);
        d.rate_selector = s.rate_selector;
        d.rate = s.rate;
        d.packet_life_time = s.packet_life_time;
        d.preference = s.preference;
        d.packet_life_time_selector = s.packet_life_time_selector;
    })
}
