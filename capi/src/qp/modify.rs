//! `ibv_modify_qp`, `ibv_query_qp` (the attributes both ways), multicast, the data-in-order
//! query and ECE.

use super::*;

fn ah_attr_to_c(a: &AhAttr) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid {
                raw: a.grh.dgid.raw,
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
        is_global: u8::from(a.is_global),
        port_num: a.port_num,
    }
}

fn cap_to_c(c: &QpCap) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// `ibv_qp_attr` as uverbs takes it (every field; the mask says which apply).
pub(crate) fn attr_from_c(a: &ibv_qp_attr) -> QpAttr {
    QpAttr {
        qp_state: QpState::from_raw(a.qp_state as u8),
        cur_qp_state: QpState::from_raw(a.cur_qp_state as u8),
        path_mtu: Mtu::from_raw(a.path_mtu as u8),
        path_mig_state: a.path_mig_state as u8,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: AccessFlags::from_bits_retain(a.qp_access_flags),
        cap: QpCap {
            max_send_wr: a.cap.max_send_wr,
            max_recv_wr: a.cap.max_recv_wr,
            max_send_sge: a.cap.max_send_sge,
            max_recv_sge: a.cap.max_recv_sge,
            max_inline_data: a.cap.max_inline_data,
        },
        ah_attr: ah_attr_from_c(&a.ah_attr),
        alt_ah_attr: ah_attr_from_c(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify != 0,
        sq_draining: a.sq_draining != 0,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    }
}

/// Writes what `ibv_cmd_query_qp` writes of a query's answer (every field but
/// `en_sqd_async_notify` and `rate_limit`).
pub(crate) fn attr_to_c(q: &QpAttr, a: &mut ibv_qp_attr) {
    a.qp_state = c_int::from(q.qp_state.raw());
    a.cur_qp_state = c_int::from(q.cur_qp_state.raw());
    a.path_mtu = c_int::from(q.path_mtu.raw());
    a.path_mig_state = c_int::from(q.path_mig_state);
    a.qkey = q.qkey;
    a.rq_psn = q.rq_psn;
    a.sq_psn = q.sq_psn;
    a.dest_qp_num = q.dest_qp_num;
    a.qp_access_flags = q.qp_access_flags.bits();
    a.cap = cap_to_c(&q.cap);
    a.ah_attr = ah_attr_to_c(&q.ah_attr);
    a.alt_ah_attr = ah_attr_to_c(&q.alt_ah_attr);
    a.pkey_index = q.pkey_index;
    a.alt_pkey_index = q.alt_pkey_index;
    a.sq_draining = u8::from(q.sq_draining);
    a.max_rd_atomic = q.max_rd_atomic;
    a.max_dest_rd_atomic = q.max_dest_rd_atomic;
    a.min_rnr_timer = q.min_rnr_timer;
    a.port_num = q.port_num;
    a.timeout = q.timeout;
    a.retry_cnt = q.retry_cnt;
    a.rnr_retry = q.rnr_retry;
    a.alt_port_num = q.alt_port_num;
    a.alt_timeout = q.alt_timeout;
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    q: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    guard("ibv_modify_qp", libc::EIO, || {
        // SAFETY: the program passes NULL or a live QP, and NULL or a valid attr.
        let (Some(w), Some(a)) = (unsafe { qp(q) }, unsafe { attr.as_ref() }) else {
            return libc::EINVAL;
        };
        // The rate limit needs the extended modify, which uverbs sends for RATE_LIMIT; bits
        // above it rdma-core refuses.
        if attr_mask & !(IBV_QP_RATE_LIMIT | (IBV_QP_RATE_LIMIT - 1)) != 0 {
            return libc::EOPNOTSUPP;
        }
        let mask = QpAttrMask::from_bits_retain(attr_mask as u32);
        match w.qp.modify(&attr_from_c(a), mask) {
            Ok(()) => {
                if attr_mask & IBV_QP_STATE != 0 {
                    w.ibv.qp_base.state = a.qp_state;
                }
                0
            }
            Err(e) => report(&e),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    q: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard("ibv_query_qp", libc::EIO, || {
        // SAFETY: the program passes NULL or a live QP, and NULL or a valid attr.
        let (Some(w), Some(a)) = (unsafe { qp(q) }, unsafe { attr.as_mut() }) else {
            return libc::EINVAL;
        };
        // As ibv_cmd_query_qp: the rate limit and above go only through the extended path.
        if attr_mask & !(IBV_QP_RATE_LIMIT - 1) != 0 {
            return libc::EOPNOTSUPP;
        }
        let r = match w.qp.query(QpAttrMask::from_bits_retain(attr_mask as u32)) {
            Ok(r) => r,
            Err(e) => return report(&e),
        };
        attr_to_c(&r.attr, a);
        // SAFETY: the program passes NULL or a valid init attr.
        if let Some(i) = unsafe { init_attr.as_mut() } {
            let b = &w.ibv.qp_base;
            i.qp_context = b.qp_context;
            i.send_cq = b.send_cq;
            i.recv_cq = b.recv_cq;
            i.srq = b.srq;
            i.qp_type = b.qp_type;
            i.cap = cap_to_c(&r.cap);
            i.sq_sig_all = c_int::from(r.sq_sig_all);
        }
        if attr_mask & IBV_QP_STATE != 0 {
            w.ibv.qp_base.state = a.qp_state;
        }
        0
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(q: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    guard("ibv_attach_mcast", libc::EIO, || {
        // SAFETY: the program passes NULL or a live QP and NULL or a valid GID.
        let (Some(w), Some(g)) = (unsafe { qp(q) }, unsafe { gid.as_ref() }) else {
            return libc::EINVAL;
        };
        crate::util::ret(w.qp.attach_mcast(&Gid { raw: gid_raw(g) }, lid))
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(q: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    guard("ibv_detach_mcast", libc::EIO, || {
        // SAFETY: the program passes NULL or a live QP and NULL or a valid GID.
        let (Some(w), Some(g)) = (unsafe { qp(q) }, unsafe { gid.as_ref() }) else {
            return libc::EINVAL;
        };
        crate::util::ret(w.qp.detach_mcast(&Gid { raw: gid_raw(g) }, lid))
    })
}

/// rdma-core's semantics: the provider's answer (rxe: none, as rdma-core's default; EFA:
/// 128-byte-aligned in-order data when the device has `DATA_POLLING_128`), widened and
/// reduced as `flags` say. x86 only unless `DEVICE_ONLY`, as rdma-core.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp_data_in_order(
    q: *mut ibv_qp,
    _op: c_int,
    flags: u32,
) -> c_int {
    guard("ibv_query_qp_data_in_order", 0, || {
        let known = IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS | IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY;
        if flags & !known != 0 {
            return 0;
        }
        if !cfg!(any(target_arch = "x86", target_arch = "x86_64"))
            && flags & IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY == 0
        {
            return 0;
        }
        // SAFETY: the program passes NULL or a live QP.
        let Some(w) = (unsafe { qp(q) }) else {
            return 0;
        };
        let mut caps = 0;
        if let uverbs::ProviderInfo::Efa(_) = w.qp.pd().context().provider() {
            let polling_128 = uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_DATA_POLLING_128;
            if let Ok(d) = w.qp.pd().context().efadv_query_device() {
                if d.kernel_caps & polling_128 != 0 {
                    caps |= IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES;
                }
            }
        }
        if caps & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG != 0 {
            caps |= IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES;
        }
        if flags & IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS != 0 {
            caps
        } else {
            c_int::from(caps & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG != 0)
        }
    })
}

/// No ECE on rxe or EFA: EOPNOTSUPP, as rdma-core for a provider without it (errno set too
/// when `vendor_id` is 0, as rdma-core's check does).
#[no_mangle]
pub unsafe extern "C" fn ibv_set_ece(_q: *mut ibv_qp, ece: *mut ibv_ece) -> c_int {
    guard("ibv_set_ece", libc::EIO, || {
        // SAFETY: the program passes NULL or a valid ibv_ece.
        if unsafe { ece.as_ref() }.is_none_or(|e| e.vendor_id == 0) {
            set_errno(libc::EOPNOTSUPP);
        }
        libc::EOPNOTSUPP
    })
}

/// No ECE on rxe or EFA: EOPNOTSUPP.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_ece(_q: *mut ibv_qp, _ece: *mut ibv_ece) -> c_int {
    guard("ibv_query_ece", libc::EIO, || libc::EOPNOTSUPP)
}
