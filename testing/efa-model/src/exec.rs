//! The data path: executing a send WQE (SEND, RDMA READ and WRITE, over SRD or UD) between
//! registered memory of QPs on the fabric, taking receive WQEs, and writing CQEs with their
//! phase bits.

use uverbs_efa::defs::*;
use uverbs_uapi::verbs::*;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::cntr::count;
use crate::sq::{check_sge, Msg};
use crate::state::{Fabric, QpKind, RQ_DB_OFFSET};

/// Copies between registered memory (addresses checked against live MRs by the caller).
pub(crate) fn mem_read(addr: u64, dst: &mut [u8]) {
    for (i, b) in dst.iter_mut().enumerate() {
        // SAFETY: `addr..addr+len` lies in a memory region registered in this process and
        // still registered (checked against the model's MR table under its lock); the client
        // keeps registered memory mapped until it deregisters. Volatile, through raw
        // pointers: the client may touch it concurrently, as with a real device.
        *b = unsafe { (addr as *const u8).add(i).read_volatile() };
    }
}

pub(crate) fn mem_write(addr: u64, src: &[u8]) {
    for (i, b) in src.iter().enumerate() {
        // SAFETY: as in `mem_read`.
        unsafe { (addr as *mut u8).add(i).write_volatile(*b) };
    }
}

pub(crate) fn find_dev_by_gid(f: &Fabric, gid: &[u8; 16]) -> Option<usize> {
    f.devs.iter().position(|d| &d.gid == gid)
}

pub(crate) fn push_cqe(f: &mut Fabric, d: usize, cq_h: u32, sub: u16, mut cqe: EfaIoRxCdescEx) {
    let Some(cq) = f.devs[d].cqs.get_mut(&cq_h) else {
        return;
    };
    let s = usize::from(sub);
    let p = cq.produced[s];
    let idx = p & (cq.depth - 1);
    let phase = (p / cq.depth) % 2 == 0;
    cq.produced[s] = p.wrapping_add(1);
    cqe.base.common.set_phase(phase);
    let entry = cq.entry as usize;
    let off = cq.buf_off + (s * cq.depth as usize + idx as usize) * entry;
    let bytes = cqe.as_bytes();
    cq.buf.write(off + 4, &bytes[4..entry]);
    cq.buf.store32(
        off,
        u32::from_ne_bytes(bytes[..4].try_into().expect("4 bytes")),
    );
}

pub(crate) fn tx_cqe(qpn: u16, req_id: u16, status: u8, op: u8) -> EfaIoRxCdescEx {
    let mut c = EfaIoRxCdescEx::new_zeroed();
    c.base.common.req_id.set(req_id);
    c.base.common.status = status;
    c.base.common.set_q_type(EFA_IO_SEND_QUEUE);
    c.base.common.set_op_type(op);
    c.base.common.qp_num.set(qpn);
    c
}

/// A receive WQE taken from an RQ: req_id and buffers.
pub(crate) struct RecvWqe {
    pub(crate) req_id: u16,
    pub(crate) bufs: Vec<(u64, u32, u32)>,
}

pub(crate) fn take_recv(f: &mut Fabric, d: usize, h: u32) -> Result<Option<RecvWqe>, String> {
    let q = f.devs[d].qps.get_mut(&h).expect("qp");
    let db = q.rq_db.load32(RQ_DB_OFFSET as usize) as u16;
    if db == q.rq_cc {
        return Ok(None);
    }
    let mut bufs = Vec::new();
    let mut req_id = 0;
    loop {
        if db == q.rq_cc {
            return Err("receive WQE without a last descriptor before the doorbell".into());
        }
        let slot = (u32::from(q.rq_cc) & (q.rq_descs - 1)) as usize;
        let mut b = [0u8; 16];
        q.rq.read(slot * 16, &mut b);
        q.rq_cc = q.rq_cc.wrapping_add(1);
        let desc = EfaIoRxDesc::read_from_bytes(&b).expect("16 bytes");
        if bufs.is_empty() {
            if !desc.first() {
                return Err("receive descriptor without first set starts a WQE".into());
            }
            req_id = desc.req_id.get();
        } else if desc.first() {
            return Err("first set in the middle of a receive WQE".into());
        }
        if desc.lkey_ctrl.get() & 0x3f00_0000 != 0 {
            return Err("reserved bits set in a receive descriptor".into());
        }
        bufs.push((desc.buf_addr(), u32::from(desc.length.get()), desc.lkey()));
        if desc.last() {
            break;
        }
    }
    if bufs.len() > q.max_recv_sge.max(1) as usize {
        return Err(format!(
            "receive WQE with {} descriptors, max_recv_sge {}",
            bufs.len(),
            q.max_recv_sge
        ));
    }
    Ok(Some(RecvWqe { req_id, bufs }))
}

pub(crate) fn execute(f: &mut Fabric, m: Msg) {
    let w = m.wqe;
    let meta = w.meta;
    let (sqpn, s_pd, s_cq, s_sub, s_kind, s_64) = {
        let q = &f.devs[m.dev].qps[&m.qp];
        (q.qpn, q.pd, q.send_cq, q.send_sub, q.kind, q.req_id_64)
    };
    let req_id = meta.req_id.get();
    let op = meta.op_type();
    let s_qp = m.qp;
    if let Some(q) = f.devs[m.dev].qps.get_mut(&s_qp) {
        q.hints.push(meta.processing_hints());
    }
    let complete = |f: &mut Fabric, status: u8| {
        let mut cqe = tx_cqe(sqpn, req_id, status, op);
        if s_64 {
            // efa_io_tx_cdesc.req_id_ex (bytes 6..12) echoes the WQE's, as req_id does.
            cqe.as_mut_bytes()[6..12].copy_from_slice(meta.req_id_ex.as_bytes());
        }
        push_cqe(f, m.dev, s_cq, s_sub, cqe);
        let bit = match op {
            EFA_IO_RDMA_READ => IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_READ,
            EFA_IO_RDMA_WRITE => IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE,
            _ => IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND,
        };
        count(f, m.dev, s_qp, bit, status == EFA_IO_COMP_STATUS_OK);
    };
    // Resolve the destination through the sender's AH table.
    let Some(dgid) = f.devs[m.dev].gid_for_ahn(meta.ah.get()) else {
        return complete(f, EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH);
    };
    let Some(dd) = find_dev_by_gid(f, &dgid) else {
        return complete(f, EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE);
    };
    let Some(dh) = f.devs[dd].qp_by_qpn(meta.dest_qp_num.get()) else {
        return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN);
    };
    let (dqpn, d_pd, d_kind, d_state, d_qkey, d_cq, d_sub, d_unsol) = {
        let q = &f.devs[dd].qps[&dh];
        (
            q.qpn,
            q.pd,
            q.kind,
            q.state,
            q.qkey,
            q.recv_cq,
            q.recv_sub,
            q.unsolicited,
        )
    };
    if d_kind != s_kind
        || !(d_state == IB_QPS_RTR || d_state == IB_QPS_RTS)
        || d_qkey != meta.qkey.get()
    {
        return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN);
    }
    let sgid = f.devs[m.dev].gid;
    let recv_ah = f.devs[dd].ahn_for_gid_in_pd(&sgid, d_pd);
    let len = usize::from(meta.length.get());
    // Local data of a send or write.
    let mut data = Vec::new();
    if op != EFA_IO_RDMA_READ {
        if meta.inline_msg() && op == EFA_IO_RDMA_WRITE {
            data.extend_from_slice(&w.rdma_req().inline_data()[..len]);
        } else if meta.inline_msg() {
            data.extend_from_slice(&w.inline_data()[..len]);
        } else if op == EFA_IO_SEND {
            for b in &w.sgl()[..len] {
                let mut v = vec![0u8; b.length.get() as usize];
                mem_read(b.buf_addr(), &mut v);
                data.extend_from_slice(&v);
            }
        } else {
            let b = &w.rdma_req().local_mem()[0];
            let mut v = vec![0u8; b.length.get() as usize];
            mem_read(b.buf_addr(), &mut v);
            data = v;
        }
    }
    let _ = s_pd;
    let mut rx = EfaIoRxCdescEx::new_zeroed();
    rx.base.common.set_q_type(EFA_IO_RECV_QUEUE);
    rx.base.common.qp_num.set(dqpn);
    rx.base.src_qp_num.set(sqpn);
    rx.base
        .ah
        .set(recv_ah.unwrap_or(EFA_IO_RX_CDESC_AH_UNKNOWN));
    if meta.has_imm() {
        rx.base.common.set_has_imm(true);
        rx.base.imm.set(meta.immediate_data.get());
    }
    let with_sgid = f.devs[dd].cqs.get(&d_cq).is_some_and(|c| c.with_sgid);
    if recv_ah.is_none() && with_sgid && op == EFA_IO_SEND {
        *rx.src_addr_mut() = sgid;
    }
    match op {
        EFA_IO_SEND => {
            if data.len() > f.devs[dd].cfg.mtu as usize {
                return complete(f, EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH);
            }
            let rwqe = match take_recv(f, dd, dh) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    // SRD: receiver not ready; UD: dropped silently.
                    let st = if s_kind == QpKind::Srd {
                        EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR
                    } else {
                        EFA_IO_COMP_STATUS_OK
                    };
                    return complete(f, st);
                }
                Err(why) => {
                    f.violation(format!("qp {dqpn} RQ: {why}"));
                    return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT);
                }
            };
            rx.base.common.req_id.set(rwqe.req_id);
            rx.base.common.set_op_type(EFA_IO_SEND);
            let room: u64 = rwqe.bufs.iter().map(|b| u64::from(b.1)).sum();
            for &(a, l, k) in &rwqe.bufs {
                if let Some(why) = check_sge(&f.devs[dd], d_pd, a, l, k) {
                    f.violation(format!("qp {dqpn} RQ: {why}"));
                    rx.base.common.status = EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY;
                    push_cqe(f, dd, d_cq, d_sub, rx);
                    count(f, dd, dh, IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV, false);
                    return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT);
                }
            }
            if data.len() as u64 > room {
                rx.base.common.status = EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH;
                push_cqe(f, dd, d_cq, d_sub, rx);
                count(f, dd, dh, IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV, false);
                return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_LENGTH);
            }
            let mut off = 0;
            for &(a, l, _) in &rwqe.bufs {
                let n = (data.len() - off).min(l as usize);
                mem_write(a, &data[off..off + n]);
                off += n;
            }
            rx.base.length.set(data.len() as u16);
            push_cqe(f, dd, d_cq, d_sub, rx);
            count(f, dd, dh, IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV, true);
            complete(f, EFA_IO_COMP_STATUS_OK)
        }
        _ => {
            let r = w.rdma_req();
            let rkey = r.remote_mem.rkey.get();
            let raddr = r.remote_mem.buf_addr();
            let rlen = r.remote_mem.length.get();
            let need = if op == EFA_IO_RDMA_READ {
                IB_UVERBS_ACCESS_REMOTE_READ
            } else {
                IB_UVERBS_ACCESS_REMOTE_WRITE
            };
            let ok = f.devs[dd].mrs.values().any(|mr| {
                mr.rkey == rkey
                    && mr.pd == d_pd
                    && mr.access & need != 0
                    && raddr >= mr.addr
                    && raddr + u64::from(rlen) <= mr.addr + mr.len
            });
            if !ok {
                return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS);
            }
            if op == EFA_IO_RDMA_READ {
                let mut v = vec![0u8; rlen as usize];
                mem_read(raddr, &mut v);
                mem_write(r.local_mem()[0].buf_addr(), &v);
                count(
                    f,
                    dd,
                    dh,
                    IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ,
                    true,
                );
                return complete(f, EFA_IO_COMP_STATUS_OK);
            }
            mem_write(raddr, &data);
            count(
                f,
                dd,
                dh,
                IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE,
                true,
            );
            if meta.has_imm() {
                rx.base.common.set_op_type(EFA_IO_RDMA_WRITE);
                rx.base.length.set(data.len() as u16);
                rx.set_rdma_write_length_hi((data.len() >> 16) as u16);
                match take_recv(f, dd, dh) {
                    Ok(Some(rw)) => rx.base.common.req_id.set(rw.req_id),
                    Ok(None) if d_unsol => rx.base.common.set_unsolicited(true),
                    Ok(None) => return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR),
                    Err(why) => {
                        f.violation(format!("qp {dqpn} RQ: {why}"));
                        return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT);
                    }
                }
                push_cqe(f, dd, d_cq, d_sub, rx);
            }
            complete(f, EFA_IO_COMP_STATUS_OK)
        }
    }
}
