//! QP creation and state changes (`IB_USER_VERBS_CMD_CREATE_QP`, `_MODIFY_QP`): the checks
//! the EFA driver makes, and the SQ (LLQ), RQ and doorbell regions a QP gets.

use uverbs::channel::WriteCmd;
use uverbs::Errno;
use uverbs_uapi::efa::*;
use uverbs_uapi::verbs::*;
use uverbs_uapi::write::*;

use crate::state::{
    page_align, Dev, QpKind, QpState, LLQ_DESC_OFFSET, PAGE, RQ_DB_OFFSET, SQ_DB_OFFSET,
};
use crate::write::{drv, put, req};

pub(crate) fn create_qp(dev: &mut Dev, cmd: &mut WriteCmd) -> Result<(), Errno> {
    let cfg = dev.cfg;
    let r: IbUverbsCreateQp = req(cmd)?;
    let e: EfaIbvCreateQp = drv(cmd)?;
    if e.comp_mask != 0 || e.reserved_98 != [0; 5] {
        return Err(Errno::INVAL);
    }
    if !dev.pds.contains_key(&r.pd_handle)
        || !dev.cqs.contains_key(&r.send_cq_handle)
        || !dev.cqs.contains_key(&r.recv_cq_handle)
    {
        return Err(Errno::INVAL);
    }
    if r.is_srq != 0 {
        return Err(Errno::OPNOTSUPP);
    }
    let kind = match r.qp_type {
        IB_UVERBS_QPT_UD => QpKind::Ud,
        0xff if e.driver_qp_type == EFA_QP_DRIVER_TYPE_SRD => QpKind::Srd,
        _ => return Err(Errno::OPNOTSUPP),
    };
    let known = EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV | EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID;
    if e.flags & !known != 0 {
        return Err(Errno::INVAL);
    }
    let unsolicited = e.flags & EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV != 0;
    if unsolicited && cfg.device_caps & EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV == 0 {
        return Err(Errno::OPNOTSUPP);
    }
    // 64-bit request ids only where the device has them, and only completing into a send
    // CQ created for them (its CQEs must have room for req_id_ex: strict, libefa never asks
    // otherwise, since it sets both flags from the one device cap).
    let req_id_64 = e.flags & EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID != 0;
    if req_id_64 && cfg.device_caps & EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID == 0 {
        return Err(Errno::OPNOTSUPP);
    }
    if req_id_64 && !dev.cqs[&r.send_cq_handle].req_id_64 {
        return Err(Errno::INVAL);
    }
    // The WQE size is what the ring holds per requested WR: 64, or 128 for the extended
    // format (inline data over 32 bytes, inline RDMA write).
    let wqe_size = e.sq_ring_size.checked_div(r.max_send_wr).unwrap_or(0);
    if wqe_size != 64 && wqe_size != 128 {
        return Err(Errno::INVAL);
    }
    let depth = e.sq_ring_size / wqe_size;
    let inline_max = if wqe_size == 128 {
        cfg.inline_buf_size_ex
    } else {
        cfg.inline_buf_size
    };
    if e.sq_ring_size == 0
        || e.sq_ring_size % wqe_size != 0
        || !depth.is_power_of_two()
        || e.sq_ring_size > cfg.max_llq_size
        || depth < u32::from(cfg.min_sq_wr)
        || depth > cfg.max_sq_wr
    {
        return Err(Errno::INVAL);
    }
    let rq_descs = e.rq_ring_size / 16;
    if e.rq_ring_size % 16 != 0 || !rq_descs.is_power_of_two() {
        return Err(Errno::INVAL);
    }
    if r.max_send_sge > u32::from(cfg.max_sq_sge)
        || r.max_recv_sge > u32::from(cfg.max_rq_sge)
        || r.max_inline_data > u32::from(inline_max)
    {
        return Err(Errno::INVAL);
    }
    let (k0, llq) = dev.region(LLQ_DESC_OFFSET as usize + e.sq_ring_size as usize)?;
    let (k1, sq_db) = dev.region(PAGE)?;
    let (k2, rq) = dev.region(e.rq_ring_size.max(16) as usize)?;
    let (k3, rq_db) = dev.region(PAGE)?;
    let qpn = dev.next_qpn;
    dev.next_qpn += 1;
    let h = dev.handle();
    let nsub = dev.cqs[&r.send_cq_handle].nsub;
    let rnsub = dev.cqs[&r.recv_cq_handle].nsub;
    let send_sub = qpn % nsub;
    let recv_sub = qpn % rnsub;
    for c in [r.send_cq_handle, r.recv_cq_handle] {
        if let Some(c) = dev.cqs.get_mut(&c) {
            c.qp_refs += 1;
        }
    }
    dev.qps.insert(
        h,
        QpState {
            qpn,
            pd: r.pd_handle,
            kind,
            send_cq: r.send_cq_handle,
            recv_cq: r.recv_cq_handle,
            state: IB_QPS_RESET,
            qkey: 0,
            sq_psn: 0,
            depth,
            wqe_size,
            max_send_sge: r.max_send_sge,
            max_recv_sge: r.max_recv_sge,
            max_inline: r.max_inline_data,
            sq_sig_all: r.sq_sig_all != 0,
            unsolicited,
            req_id_64,
            create_drv: zerocopy::IntoBytes::as_bytes(&e).to_vec(),
            hints: Vec::new(),
            rq_descs,
            keys: [k0, k1, k2, k3],
            llq,
            sq_db,
            db_trap: None,
            db_seen: 0,
            db_ahead: 0,
            db_history: Vec::new(),
            rq,
            rq_db,
            sq_pc: 0,
            sq_total: 0,
            rq_cc: 0,
            send_sub,
            recv_sub,
            cntr_ops: 0,
            cntrs: Vec::new(),
        },
    );
    let resp = IbUverbsCreateQpResp {
        qp_handle: h,
        qpn: u32::from(qpn),
        max_send_wr: depth,
        max_recv_wr: r.max_recv_wr,
        max_send_sge: r.max_send_sge,
        max_recv_sge: r.max_recv_sge,
        max_inline_data: r.max_inline_data,
        ..Default::default()
    };
    put(cmd.response_mut(), &resp);
    let d = EfaIbvCreateQpResp {
        rq_db_offset: RQ_DB_OFFSET,
        sq_db_offset: SQ_DB_OFFSET,
        llq_desc_offset: LLQ_DESC_OFFSET,
        rq_mmap_key: k2,
        rq_mmap_size: page_align(e.rq_ring_size.max(16) as usize) as u64,
        rq_db_mmap_key: k3,
        sq_db_mmap_key: k1,
        llq_desc_mmap_key: k0,
        send_sub_cq_idx: send_sub,
        recv_sub_cq_idx: recv_sub,
        ..Default::default()
    };
    put(cmd.driver_response_mut(), &d);
    Ok(())
}

pub(crate) fn modify_qp(dev: &mut Dev, cmd: &mut WriteCmd) -> Result<(), Errno> {
    let caps = dev.cfg.device_caps;
    let r: IbUverbsModifyQp = req(cmd)?;
    let q = dev.qps.get_mut(&r.qp_handle).ok_or(Errno::INVAL)?;
    let mask = r.attr_mask;
    let cur = q.state;
    let new = if mask & IB_QP_STATE != 0 {
        r.qp_state
    } else {
        cur
    };
    // ib_modify_qp_is_ok for UD-like QPs (SRD follows UD), plus EFA's RNR retry on RTR->RTS.
    let (required, optional) = match (cur, new) {
        (IB_QPS_RESET, IB_QPS_INIT) => (IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY, 0),
        (IB_QPS_INIT, IB_QPS_INIT) => (0, IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY),
        (IB_QPS_INIT, IB_QPS_RTR) => (0, IB_QP_PKEY_INDEX | IB_QP_QKEY),
        (IB_QPS_RTR, IB_QPS_RTS) => (IB_QP_SQ_PSN, IB_QP_CUR_STATE | IB_QP_QKEY | IB_QP_RNR_RETRY),
        (IB_QPS_RTS, IB_QPS_RTS) => (0, IB_QP_CUR_STATE | IB_QP_QKEY),
        (_, IB_QPS_ERR) | (_, IB_QPS_RESET) => (0, 0),
        _ => return Err(Errno::INVAL),
    };
    let given = mask & !IB_QP_STATE;
    if given & required != required || given & !(required | optional) != 0 {
        return Err(Errno::INVAL);
    }
    if mask & IB_QP_RNR_RETRY != 0 && caps & EFA_QUERY_DEVICE_CAPS_RNR_RETRY == 0 {
        return Err(Errno::OPNOTSUPP);
    }
    if mask & IB_QP_PORT != 0 && r.port_num != 1 {
        return Err(Errno::INVAL);
    }
    if mask & IB_QP_QKEY != 0 {
        q.qkey = r.qkey;
    }
    if mask & IB_QP_SQ_PSN != 0 {
        q.sq_psn = r.sq_psn;
    }
    q.state = new;
    Ok(())
}
