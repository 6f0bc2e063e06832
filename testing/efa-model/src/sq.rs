//! The send side of the rings: taking WQEs from a QP's LLQ as the driver rang the doorbell
//! for them, holding each doorbell and each WQE to the device's rules, and the SGE checks.

use uverbs_efa::defs::*;
use uverbs_uapi::efa::*;
use uverbs_uapi::verbs::*;
use zerocopy::FromBytes;

use crate::state::{Dev, Fabric, MrState, QpKind, LLQ_DESC_OFFSET, SQ_DB_OFFSET};
use crate::trap;

/// A send WQE taken from an LLQ, ready to execute.
pub(crate) struct Msg {
    pub(crate) dev: usize,
    pub(crate) qp: u32,
    pub(crate) kind: QpKind,
    /// The slot's bytes in the 128-byte layout (a 64-byte WQE is its prefix, zero after).
    pub(crate) wqe: EfaIoTxWqe128,
}

/// Takes the WQEs of QP `h` the driver rang the SQ doorbell for: each doorbell store the trap
/// logged, in order, checked by [`check_ring`]; without a trap, the doorbell word as it is now.
pub(crate) fn collect_wqes(f: &mut Fabric, d: usize, h: u32, out: &mut Vec<Msg>) {
    let q = &f.devs[d].qps[&h];
    let Some((rings, lost)) = q.db_trap.as_ref().map(trap::Trap::drain) else {
        let db = q.sq_db.load32(SQ_DB_OFFSET as usize);
        return consume_wqes(f, d, h, db, out);
    };
    if lost {
        let qpn = q.qpn;
        f.violation(format!(
            "qp {qpn}: the model's SQ doorbell log overflowed (over {} doorbells between two \
             process() calls): doorbells were lost, call process() more often",
            trap::LOG
        ));
    }
    for r in rings {
        if check_ring(f, d, h, &r) {
            consume_wqes(f, d, h, r.value, out);
        }
    }
}

/// Checks one SQ doorbell store against the previous one: the right word, a step forward of at
/// most `max_tx_batch` 64-byte lines of WQEs written since the previous doorbell, over WQEs
/// already in the LLQ. Returns whether it is a doorbell value the device acts on.
pub(crate) fn check_ring(f: &mut Fabric, d: usize, h: u32, r: &trap::Ring) -> bool {
    let cfg = f.devs[d].cfg;
    let q = f.devs[d].qps.get_mut(&h).expect("qp");
    let qpn = q.qpn;
    if r.offset != SQ_DB_OFFSET {
        let (v, o) = (r.value, r.offset);
        f.violation(format!(
            "qp {qpn}: store of {v:#x} at offset {o:#x} of the SQ doorbell page, not at the \
             doorbell ({SQ_DB_OFFSET:#x})"
        ));
        return false;
    }
    q.db_history.push(r.value);
    let (seen, ahead0, depth) = (q.db_seen, q.db_ahead, q.depth);
    let v = r.value as u16;
    let step = u32::from(v.wrapping_sub(seen));
    q.db_seen = v;
    q.db_ahead = r.ahead;
    // Written to the LLQ between the two doorbells: the step, plus what is already written
    // past this doorbell, minus what was already written past the previous one.
    let written = (step + r.ahead).saturating_sub(ahead0);
    let lines = written * q.wqe_size / 64;
    let mut bad = Vec::new();
    if step == 0 {
        bad.push(format!(
            "qp {qpn}: SQ doorbell rung again with {v}, no new WQE"
        ));
    } else if step > depth {
        // Backwards, or past the ring: `consume_wqes` reports it.
        return true;
    }
    if cfg.max_tx_batch != 0 && lines > u32::from(cfg.max_tx_batch) {
        let m = cfg.max_tx_batch;
        bad.push(format!(
            "qp {qpn}: {written} WQEs ({lines} 64-byte lines) written to the LLQ between SQ \
             doorbells {seen} and {v}, more than max_tx_batch {m}"
        ));
    }
    if cfg.min_sq_wr != 0 && step >= depth {
        bad.push(format!(
            "qp {qpn}: SQ doorbell {v} rings the whole SQ ({depth} WQEs) at once, which a \
             device with min_sq_wr cannot take"
        ));
    }
    if r.fresh != step {
        let fresh = r.fresh;
        bad.push(format!(
            "qp {qpn}: SQ doorbell {v} covers {step} WQEs, but only {fresh} of them were in \
             the LLQ when it was rung"
        ));
    }
    for b in bad {
        f.violation(b);
    }
    true
}

/// Consumes the WQEs between the device's producer counter and doorbell value `db`.
pub(crate) fn consume_wqes(f: &mut Fabric, d: usize, h: u32, db: u32, out: &mut Vec<Msg>) {
    let (pc, depth, state, qpn) = {
        let q = &f.devs[d].qps[&h];
        (q.sq_pc, q.depth, q.state, q.qpn)
    };
    let db16 = db as u16;
    let new = u32::from(db16.wrapping_sub(pc));
    if new == 0 {
        return;
    }
    if db >> 16 != 0 {
        f.violation(format!("qp {qpn}: SQ doorbell {db:#x} has bits above 15"));
    }
    if state != IB_QPS_RTS {
        f.violation(format!(
            "qp {qpn}: SQ doorbell rung in state {state}, not RTS"
        ));
    }
    if new > depth {
        f.violation(format!(
            "qp {qpn}: SQ doorbell {db16} is {new} WQEs past the device's {pc}, more than the depth {depth}"
        ));
        let q = f.devs[d].qps.get_mut(&h).expect("qp");
        q.sq_pc = db16;
        return;
    }
    for _ in 0..new {
        let q = f.devs[d].qps.get_mut(&h).expect("qp");
        let slot = (u32::from(q.sq_pc) & (depth - 1)) as usize;
        let mut bytes = [0u8; 128];
        let size = q.wqe_size as usize;
        q.llq
            .read(LLQ_DESC_OFFSET as usize + slot * size, &mut bytes[..size]);
        let phase = (q.sq_total / u64::from(depth)) % 2 == 1;
        q.sq_pc = q.sq_pc.wrapping_add(1);
        q.sq_total += 1;
        let kind = q.kind;
        let wqe = EfaIoTxWqe128::read_from_bytes(&bytes).expect("128 bytes");
        if let Some(why) = check_wqe(&f.devs[d], h, &wqe, phase) {
            f.violation(format!("qp {qpn} slot {slot}: {why}"));
            continue;
        }
        out.push(Msg {
            dev: d,
            qp: h,
            kind,
            wqe,
        });
    }
}

/// What a correct driver never writes. `None` = the WQE is well formed.
pub(crate) fn check_wqe(dev: &Dev, h: u32, w: &EfaIoTxWqe128, phase: bool) -> Option<String> {
    let q = &dev.qps[&h];
    let m = &w.meta;
    if !m.meta_desc() {
        return Some("meta_desc bit clear".into());
    }
    if m.meta_extension() {
        return Some("meta_extension set".into());
    }
    if !m.first() || !m.last() {
        return Some("first/last not both set (EFA WQEs are one descriptor)".into());
    }
    if m.phase() != phase {
        return Some(format!(
            "phase {} but the device expects {} (stale or wrapped wrong)",
            m.phase(),
            phase
        ));
    }
    if !m.comp_req() {
        return Some("unsignaled send (comp_req clear): EFA requires every send signaled".into());
    }
    if m.ctrl2
        & !(EFA_IO_TX_META_DESC_PHASE_MASK
            | EFA_IO_TX_META_DESC_FIRST_MASK
            | EFA_IO_TX_META_DESC_LAST_MASK
            | EFA_IO_TX_META_DESC_COMP_REQ_MASK)
        != 0
        || m.ctrl3 & !EFA_IO_TX_META_DESC_PROCESSING_HINTS_MASK != 0
        || m.reserved != 0
        || m.reserved2 != [0; 6]
    {
        return Some(format!(
            "reserved bits set (ctrl2 {:#x}, ctrl3 {:#x})",
            m.ctrl2, m.ctrl3
        ));
    }
    let op = m.op_type();
    let caps = dev.cfg.device_caps;
    match op {
        EFA_IO_SEND => {}
        EFA_IO_RDMA_READ | EFA_IO_RDMA_WRITE => {
            if q.kind != QpKind::Srd {
                return Some("RDMA on a UD QP".into());
            }
            let need = if op == EFA_IO_RDMA_READ {
                EFA_QUERY_DEVICE_CAPS_RDMA_READ
            } else {
                EFA_QUERY_DEVICE_CAPS_RDMA_WRITE
            };
            if caps & need == 0 {
                return Some(format!("op {op} not in the device caps"));
            }
            if op == EFA_IO_RDMA_READ && m.has_imm() {
                return Some("RDMA read with immediate".into());
            }
        }
        _ => return Some(format!("unknown op_type {op}")),
    }
    let len = u32::from(m.length.get());
    let big = q.wqe_size == 128;
    if m.inline_msg() {
        if op == EFA_IO_RDMA_READ {
            return Some("inline RDMA read".into());
        }
        if op == EFA_IO_RDMA_WRITE && !big {
            return Some("inline RDMA write in a 64-byte WQE".into());
        }
        let room = if big {
            EFA_IO_TX_DESC_INLINE_MAX_SIZE_128 as u32
        } else {
            EFA_IO_TX_DESC_INLINE_MAX_SIZE as u32
        };
        if len > room || len > q.max_inline {
            return Some(format!(
                "inline length {len} over the QP's max_inline_data {} or the {}-byte WQE's room {room}",
                q.max_inline, q.wqe_size
            ));
        }
        if op == EFA_IO_RDMA_WRITE && w.rdma_req().remote_mem.length.get() != len {
            return Some("inline RDMA write: remote length differs from the inline length".into());
        }
    } else if op == EFA_IO_SEND {
        if len > q.max_send_sge.max(1) {
            return Some(format!(
                "{len} SGEs, the QP has max_send_sge {}",
                q.max_send_sge
            ));
        }
        for b in &w.sgl()[..len as usize] {
            if let Some(why) = check_sge(dev, q.pd, b.buf_addr(), b.length.get(), b.lkey_value()) {
                return Some(why);
            }
        }
    } else {
        if len != 1 {
            return Some(format!("RDMA WQE with {len} local buffers (must be 1)"));
        }
        let r = w.rdma_req();
        let b = &r.local_mem()[0];
        if let Some(why) = check_sge(dev, q.pd, b.buf_addr(), b.length.get(), b.lkey_value()) {
            return Some(why);
        }
        if r.remote_mem.length.get() != b.length.get() {
            return Some("remote length differs from the local buffer length".into());
        }
        if r.remote_mem.length.get() > dev.cfg.max_rdma_size {
            return Some("RDMA longer than max_rdma_size".into());
        }
    }
    None
}

pub(crate) fn find_lkey(dev: &Dev, lkey: u32) -> Option<MrState> {
    dev.mrs.values().find(|m| m.lkey == lkey).copied()
}

pub(crate) fn check_sge(dev: &Dev, pd: u32, addr: u64, len: u32, lkey: u32) -> Option<String> {
    let Some(m) = find_lkey(dev, lkey) else {
        return Some(format!("lkey {lkey:#x} is not registered"));
    };
    if m.pd != pd {
        return Some(format!("lkey {lkey:#x} belongs to another PD"));
    }
    let end = addr.checked_add(u64::from(len));
    if addr < m.addr || end.is_none_or(|e| e > m.addr + m.len) {
        return Some(format!(
            "SGE {addr:#x}+{len} outside MR {:#x}+{} of lkey {lkey:#x}",
            m.addr, m.len
        ));
    }
    None
}
