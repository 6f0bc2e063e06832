//! Work-request validation: rxe and EFA send and receive WRs (the shared `uverbs_wr::SendWr`)
//! with arbitrary opcodes, flags, SGE counts and lengths, inline sizes, destinations (none,
//! an AH of the QP's PD or another's, any AH number) and atomics' lengths and alignment,
//! against queues of arbitrary caps; both providers' `wr_*` builders called in any order.
//!
//! Property: a WR is accepted or refused with a typed error, and a refused WR changes nothing
//! the device could see (the published producer index of rxe; the EFA producer counter and
//! doorbell); a `wr_*` batch posts all of its WRs or none and ends either way, and nothing
//! else posts while it is open; posting never writes outside the ring (ASan) and never
//! panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uverbs_fuzz::{FuzzAh, Input, Shared, FUZZ_PD};
use uverbs_rxe as rxe;
use uverbs_uapi::rxe::{
    RXE_QUEUE_BUF_DATA_OFFSET as DATA, RXE_QUEUE_BUF_INDEX_MASK_OFFSET as MASK,
    RXE_QUEUE_BUF_LOG2_ELEM_SIZE_OFFSET as LOG2, RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET as PROD,
};
use uverbs_wr::{AccessFlags, QpType, RecvWr, SendWr, Sge, UdDest, WrData, WrOp};

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    match inp.u8() % 3 {
        0 => rxe_send(&mut inp),
        1 => rxe_recv(&mut inp),
        _ => efa(&mut inp),
    }
});

fn rxe_ring(inp: &mut Input<'_>) -> (Shared, rxe::Queue) {
    let log2 = 6 + inp.below(4);
    let slots = 1u32 << (1 + inp.below(5));
    let mem = Shared::new(DATA + ((slots as usize) << log2));
    mem.write(LOG2, &log2.to_le_bytes());
    mem.write(MASK, &(slots - 1).to_le_bytes());
    // SAFETY: `mem` outlives the queue (both returned together, the queue dropped first by
    // the callers' declaration order) and only this target touches it otherwise.
    let q = unsafe { rxe::Queue::from_raw(mem.ptr(), mem.len(), None) }.expect("valid header");
    (mem, q)
}

fn rxe_sges(inp: &mut Input<'_>) -> Vec<Sge> {
    (0..inp.below(8))
        .map(|_| Sge {
            addr: inp.u64(),
            length: inp.size(),
            lkey: inp.u32(),
        })
        .collect()
}

/// Any operation of the shared vocabulary (both providers take every one and refuse what
/// their QP or device lacks).
fn wr_op(inp: &mut Input<'_>) -> WrOp {
    use WrOp::*;
    let (a, k, x, y) = (inp.u64(), inp.u32(), inp.u64(), inp.u32());
    match inp.u8() % 10 {
        0 => Send,
        1 => SendWithImm { imm_data: y },
        2 => SendWithInv { invalidate_rkey: y },
        3 => RdmaWrite {
            remote_addr: a,
            rkey: k,
        },
        4 => RdmaWriteWithImm {
            remote_addr: a,
            rkey: k,
            imm_data: y,
        },
        5 => RdmaRead {
            remote_addr: a,
            rkey: k,
        },
        6 => AtomicCmpAndSwp {
            remote_addr: a,
            rkey: k,
            compare: x,
            swap: x ^ a,
        },
        7 => AtomicFetchAndAdd {
            remote_addr: a,
            rkey: k,
            add: x,
        },
        8 => LocalInv { invalidate_rkey: y },
        _ => BindMw {
            mw_rkey: k,
            new_rkey: y,
            mr_lkey: inp.u32(),
            addr: a,
            length: x,
            access: AccessFlags::from_bits_retain(inp.u32()),
        },
    }
}

fn rxe_send(inp: &mut Input<'_>) {
    let (mem, q) = rxe_ring(inp);
    let types = [QpType::Rc, QpType::Uc, QpType::Ud];
    let caps = rxe::SendQueueCaps {
        qp_type: types[inp.below(3) as usize],
        domain: FUZZ_PD,
        max_send_sge: inp.below(10),
        max_inline_data: inp.below(600),
    };
    let Ok(mut sq) = rxe::SendQueue::new(q, caps) else {
        return;
    };
    while !inp.is_empty() {
        let sg = rxe_sges(inp);
        let n = inp.below(700) as usize;
        let inline = inp.take(n).to_vec();
        let list: Vec<&[u8]> = inline.chunks(1 + inp.below(64) as usize).collect();
        let op = wr_op(inp);
        // Any AH number (0: no kernel index) of the QP's domain or another.
        let ah = FuzzAh::from_input(inp);
        let mut wr =
            SendWr::new(inp.u64(), op).flags(uverbs_wr::SendFlags::from_bits_retain(inp.u32()));
        wr.data = if inp.bool() {
            WrData::Sge(&sg)
        } else {
            WrData::Inline(&inline)
        };
        if inp.u8() % 3 != 0 {
            wr = wr.ud(&ah, inp.u32(), inp.u32());
        }
        let published = mem.read_u32(PROD);
        match inp.u8() % 4 {
            0 | 1 => {
                let pending = sq.pending();
                // The fast path first, as uverbs posts: it posts the WR or moves nothing, and
                // never takes inline data or a destination.
                if sq.post_fast(&wr) {
                    assert_eq!(sq.pending(), pending + 1, "a fast post takes one slot");
                    assert!(matches!(wr.data, WrData::Sge(_)) && wr.ud.is_none());
                } else {
                    assert_eq!(sq.pending(), pending, "a declined WR was written");
                    match sq.post(&wr) {
                        Ok(()) => assert_eq!(sq.pending(), pending + 1),
                        Err(e) => {
                            let _ = e.to_string();
                            assert_eq!(sq.pending(), pending, "a refused WR was written: {e}");
                        }
                    }
                }
            }
            2 => {
                // The wr_* builder: start, op, setters in fuzz order, complete or abort.
                let pending = sq.pending();
                let _ = sq.wr_start();
                let _ = sq.wr_op(wr.wr_id, wr.flags, wr.op);
                for _ in 0..inp.below(4) {
                    let _ = match inp.u8() % 4 {
                        0 => sq.wr_set_sge_list(&sg),
                        1 => sq.wr_set_inline_data(&inline),
                        2 => sq.wr_set_inline_data_list(&list),
                        _ => match wr.ud {
                            Some(d) => sq.wr_set_ud_addr(d),
                            None => sq.wr_set_sge(inp.u32(), inp.u64(), inp.u32()),
                        },
                    };
                    // Nothing else posts into an open batch.
                    if inp.u8() % 8 == 0 {
                        assert!(!sq.post_fast(&wr));
                        assert!(sq.post(&wr).is_err());
                    }
                }
                assert!(sq.wr_len() < 1 << 5);
                if inp.bool() {
                    match sq.wr_complete() {
                        // The batch and what was written before it are published.
                        Ok(_) => assert_eq!(sq.pending(), 0),
                        Err(e) => {
                            let _ = e.to_string();
                            assert_eq!(sq.pending(), pending, "a refused batch was kept");
                        }
                    }
                } else {
                    sq.wr_abort();
                    assert_eq!(sq.pending(), pending, "an aborted batch was kept");
                }
                assert_eq!(sq.wr_len(), 0, "the batch is over");
            }
            _ => {
                sq.publish();
            }
        }
        // Only `publish` (or a completed batch) moves the index the kernel reads.
        let now = mem.read_u32(PROD);
        assert!(now <= (1 << 5), "producer index {now} out of the ring");
        let _ = published;
    }
}

fn rxe_recv(inp: &mut Input<'_>) {
    let (mem, q) = rxe_ring(inp);
    let Ok(mut rq) = rxe::RecvQueue::new(q, inp.below(12)) else {
        return;
    };
    while !inp.is_empty() {
        if inp.u8() % 4 == 0 {
            // A list: posted up to the first refusal, which it names; those and every
            // receive written before are published.
            let lists: Vec<Vec<Sge>> = (0..inp.below(6)).map(|_| rxe_sges(inp)).collect();
            let wrs: Vec<RecvWr<'_>> = lists
                .iter()
                .enumerate()
                .map(|(i, l)| RecvWr::new(i as u64, l))
                .collect();
            let pending = rq.pending();
            let before = mem.read_u32(PROD);
            let posted = uverbs_fuzz::post_recv_list_checked(&mut rq, &wrs);
            let moved = mem.read_u32(PROD).wrapping_sub(before) & rq.queue().index_mask();
            assert_eq!(moved as usize, pending as usize + posted);
            continue;
        }
        let sg = rxe_sges(inp);
        let pending = rq.pending();
        let published = mem.read_u32(PROD);
        if let Err(e) = rq.post(inp.u64(), &sg) {
            let _ = e.to_string();
            assert_eq!(rq.pending(), pending, "a refused receive was written: {e}");
        }
        assert_eq!(mem.read_u32(PROD), published, "post must not publish");
        if inp.bool() {
            rq.publish();
        }
    }
}

fn efa(inp: &mut Input<'_>) {
    use uverbs_efa::{DeviceCaps, EfaError, RecvQueue, RqConfig, SendQueue, SqConfig};
    let wqe_size = if inp.bool() { 128 } else { 64 };
    // Mostly UD and SRD; sometimes a type an EFA send queue refuses.
    let qp_type = match inp.below(8) {
        0 => QpType::Rc,
        k if k % 2 == 0 => QpType::Srd,
        _ => QpType::Ud,
    };
    let cfg = SqConfig {
        qp_num: inp.u32(),
        qp_type,
        domain: FUZZ_PD,
        sq_sig_all: inp.bool(),
        processing_hints: inp.bool(),
        depth: 1 << inp.below(8),
        wqe_size,
        max_send_sge: inp.below(3),
        max_rdma_sge: inp.below(2),
        max_inline_data: inp.below(if wqe_size == 128 { 81 } else { 33 }),
        inline_write: wqe_size == 128 && inp.bool(),
        max_tx_batch: inp.u16() % 16,
        min_sq_wr: inp.u16() % 4,
        caps: DeviceCaps {
            device_caps: inp.u32(),
            max_rdma_size: inp.size(),
        },
        gen: inp.u16(),
        req_id_64: inp.bool(),
    };
    let llq = Shared::new(cfg.sq_ring_size() as usize);
    let sq_db = Shared::new(4);
    // SAFETY: the LLQ stand-in holds depth * wqe_size bytes and the doorbell 4; both outlive
    // the queue and nothing else writes them.
    let sq = unsafe { SendQueue::new(cfg, llq.ptr(), llq.len(), sq_db.ptr().cast()) };
    let rq_cfg = RqConfig::for_caps(inp.u32(), 1 + inp.below(64), 1 + inp.below(3), inp.u16());
    let ring = Shared::new(rq_cfg.rq_ring_size() as usize);
    let rq_db = Shared::new(4);
    // SAFETY: as above, for the RQ ring and its doorbell.
    let rq = unsafe { RecvQueue::new(rq_cfg, ring.ptr(), ring.len(), rq_db.ptr().cast()) };
    let sq = match sq {
        Ok(sq) => sq,
        Err(e) => {
            assert!(matches!(e, EfaError::BadConfig { .. }), "{e:?}");
            return;
        }
    };
    let (mut sq, Ok(mut rq)) = (sq, rq) else {
        return;
    };
    while !inp.is_empty() {
        let sges: Vec<Sge> = (0..inp.below(5))
            .map(|_| Sge {
                addr: inp.u64(),
                length: inp.size(),
                lkey: inp.u32(),
            })
            .collect();
        let n = inp.below(120) as usize;
        let bytes = inp.take(n).to_vec();
        let ah = FuzzAh::from_input(inp);
        let op = wr_op(inp);
        let mut wr =
            SendWr::new(inp.u64(), op).flags(uverbs_wr::SendFlags::from_bits_retain(inp.u32()));
        wr.data = if inp.bool() {
            WrData::Sge(&sges)
        } else {
            WrData::Inline(&bytes)
        };
        if inp.u8() % 8 != 0 {
            wr = wr.ud(&ah, inp.u32(), inp.u32());
        }
        let pc = sq.producer_counter();
        let db = sq_db.read_u32(0);
        match inp.u8() % 5 {
            0 | 1 => {
                let n = 1 + inp.below(4) as usize;
                let wrs = vec![wr; n];
                match sq.post_send(&wrs) {
                    Ok(k) => assert_eq!(k, n),
                    Err(e) => {
                        let _ = e.to_string();
                        assert!(e.index < n);
                        if e.index == 0 {
                            assert_eq!(sq.producer_counter(), pc, "refused WR reached the ring");
                            assert_eq!(sq_db.read_u32(0), db, "doorbell rung for nothing");
                        }
                    }
                }
            }
            2 => {
                // The single-WR path posts the WR (and rings for it) or touches nothing.
                if sq.post_plain(&wr) {
                    assert_eq!(sq.producer_counter(), pc.wrapping_add(1));
                    assert_eq!(sq_db.read_u32(0) & 0xffff, u32::from(pc.wrapping_add(1)));
                } else {
                    assert_eq!(sq.producer_counter(), pc, "a declined WR reached the ring");
                    assert_eq!(sq_db.read_u32(0), db, "doorbell rung for nothing");
                }
            }
            3 => {
                // The wr_* builder: calls in fuzz order, all of the batch or none.
                let _ = sq.wr_start();
                let dest = wr.ud.unwrap_or(UdDest::new(&ah, inp.u32(), inp.u32()));
                for _ in 0..inp.below(8) {
                    let _ = match inp.u8() % 7 {
                        0 | 1 => sq.wr_op(inp.u64(), wr.flags, wr_op(inp)),
                        2 => sq.wr_set_sge_list(&sges),
                        3 => sq.wr_set_inline_data(&bytes),
                        4 => sq.wr_set_ud_addr(dest),
                        5 => sq.wr_set_processing_hints(inp.u8()),
                        _ => {
                            // Nothing else posts into an open batch.
                            assert!(!sq.post_plain(&wr));
                            assert!(sq.post_send(&[wr]).is_err());
                            Ok(())
                        }
                    };
                }
                let len = sq.wr_len();
                assert_eq!(sq_db.read_u32(0), db, "rung before wr_complete");
                let complete = inp.bool();
                let posted = if complete {
                    match sq.wr_complete() {
                        Ok(k) => {
                            assert_eq!(k, len, "wr_complete posts what wr_len counted");
                            k
                        }
                        Err(e) => {
                            let _ = e.to_string();
                            0
                        }
                    }
                } else {
                    sq.wr_abort();
                    0
                };
                assert_eq!(sq.wr_len(), 0, "the batch is over");
                assert_eq!(sq.producer_counter(), pc.wrapping_add(posted as u16));
                if posted == 0 {
                    assert_eq!(sq_db.read_u32(0), db, "doorbell rung for nothing");
                } else {
                    assert_eq!(sq_db.read_u32(0) & 0xffff, u32::from(sq.producer_counter()));
                }
            }
            _ => {
                let wrs: Vec<RecvWr<'_>> = (0..1 + inp.below(3))
                    .map(|j| RecvWr {
                        wr_id: u64::from(j),
                        sg_list: &sges,
                    })
                    .collect();
                let pc = rq.producer_counter();
                match rq.post_recv(&wrs) {
                    Ok(k) => assert_eq!(k, wrs.len()),
                    Err(e) => {
                        let _ = e.to_string();
                        if e.index == 0 {
                            assert_eq!(
                                rq.producer_counter(),
                                pc,
                                "refused receive reached the ring"
                            );
                        }
                    }
                }
            }
        }
    }
}
