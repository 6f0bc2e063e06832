//! rxe rings the kernel shares with us, made hostile: the `rxe_queue_buf` header (element size,
//! index mask), the mapping length, the producer index of a CQ and the consumer index of an
//! SQ/RQ (out of range, moving backwards, jumping), and CQE contents (opcodes, statuses,
//! lengths, QP numbers) — rewritten between calls, as a kernel could at any time.
//!
//! Property: `Queue::from_raw`, `CompletionQueue::{new, ready, peek, poll, refresh,
//! start_poll}` (and the lazy `PollCursor`'s readers, `advance` and drop, with the kernel
//! moving while a cursor is open), `SendQueue`/`RecvQueue` construction and posting
//! (`post`, `post_list`) return values or typed `RingError`s / `WrError`s; they never read or
//! write outside the mapping (ASan), never panic, never hand out more completions than were
//! asked for, keep our own index in range, and `refresh` (the inline part of a poll) promises
//! exactly what the next poll returns. Whatever the slot holds, the three ways a completion is
//! read agree: `peek` (field by field), `poll` (the slot copied whole, then fixed up) and the
//! cursor's `wc()` against its one-field readers; translated flags hold libibverbs' bits only.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uverbs_fuzz::{FuzzAh, Input, Shared, FUZZ_PD};
use uverbs_rxe::{CompletionQueue, Queue, RecvQueue, SendQueue, SendQueueCaps};
use uverbs_uapi::rxe::{
    RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET as CONS, RXE_QUEUE_BUF_DATA_OFFSET as DATA,
    RXE_QUEUE_BUF_INDEX_MASK_OFFSET as MASK, RXE_QUEUE_BUF_LOG2_ELEM_SIZE_OFFSET as LOG2,
    RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET as PROD,
};
use uverbs_wr::{QpType, RecvWr, SendWr, Sge, Wc, WcFlags, WrOp};

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let kind = inp.u8() % 3;
    // Geometry: mostly plausible (so the fuzzer gets past the header), sometimes anything.
    let (log2, mask) = if inp.u8() % 4 == 0 {
        (inp.u32(), inp.u32())
    } else {
        (5 + inp.below(4), (1u32 << (1 + inp.below(6))) - 1)
    };
    let plausible = DATA + (((mask as usize) + 1) << log2.min(12));
    let len = match inp.u8() % 4 {
        0 => inp.below(1 << 16) as usize,
        1 => plausible.saturating_sub(1 + inp.below(64) as usize),
        _ => plausible,
    }
    .min(1 << 20);
    let mem = Shared::new(len);
    mem.write(LOG2, &log2.to_le_bytes());
    mem.write(MASK, &mask.to_le_bytes());
    mem.write(PROD, &inp.u32().to_le_bytes());
    mem.write(CONS, &inp.u32().to_le_bytes());
    let fill = inp.take(inp.remaining().min(4096) / 2).to_vec();
    mem.write(DATA, &fill);
    let misalign = if inp.u8() == 0xff { 4 } else { 0 };
    let base = std::ptr::NonNull::new(mem.ptr().as_ptr().wrapping_add(misalign)).unwrap();
    // SAFETY: `base..base+len-misalign` lies in `mem`, which outlives the queue; only this
    // function touches it otherwise, through raw pointers between calls (the "kernel").
    let q = match unsafe { Queue::from_raw(base, mem.len() - misalign, None) } {
        Ok(q) => q,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    assert!(q.num_slots().is_power_of_two());
    assert!(DATA + q.num_slots() as usize * q.elem_size() <= q.mapping_len());
    let slots = q.num_slots();
    let elem = q.elem_size();
    match kind {
        0 => cq(q, &mem, &mut inp, slots, elem),
        1 => sq(q, &mem, &mut inp, slots),
        _ => rq(q, &mem, &mut inp, slots),
    }
});

/// Every reader of a lazy poll cursor: each loads its field from the current slot, and the
/// whole completion (`wc`) is what they read one by one.
fn read_cursor(c: &uverbs_rxe::PollCursor<'_>) {
    let w = c.wc();
    assert_eq!(
        (w.wr_id, w.status, w.opcode, w.vendor_err, w.byte_len),
        (
            c.wr_id(),
            c.status(),
            c.opcode(),
            c.vendor_err(),
            c.byte_len()
        )
    );
    assert_eq!(
        (w.qp_num, w.src_qp, w.wc_flags, w.pkey_index, w.slid),
        (
            c.qp_num(),
            c.src_qp(),
            c.wc_flags(),
            c.pkey_index(),
            c.slid()
        )
    );
    assert_eq!((w.sl, w.dlid_path_bits), (c.sl(), c.dlid_path_bits()));
    // The `ex` union: immediate data (host order) with WITH_IMM, else as stored.
    let ex = if c.wc_flags().contains(WcFlags::WITH_IMM) {
        c.imm_data()
    } else {
        c.invalidated_rkey()
    };
    assert_eq!(w.imm_data, ex);
    check_wc(&w);
}

/// What every completion satisfies whatever the kernel wrote: only libibverbs' four flag bits
/// the kernel's translate to.
fn check_wc(w: &Wc) {
    assert_eq!(
        w.wc_flags.bits() & !0xf,
        0,
        "untranslated flags {:?}",
        w.wc_flags
    );
}

/// The kernel's moves between our calls.
fn kernel_moves(mem: &Shared, inp: &mut Input<'_>, slots: u32, elem: usize) {
    match inp.u8() % 6 {
        0 => mem.write(PROD, &inp.u32().to_le_bytes()),
        1 => {
            // Publish k more entries (legitimately), with hostile contents.
            let p = mem.read_u32(PROD);
            let k = inp.below(slots);
            for i in 0..k {
                let idx = (p.wrapping_add(i) & (slots - 1)) as usize;
                let bytes = inp.take(48).to_vec();
                mem.write(DATA + idx * elem, &bytes);
            }
            mem.write(PROD, &(p.wrapping_add(k) & (slots - 1)).to_le_bytes());
        }
        2 => {
            // Rewrite the header: the queue must keep the geometry it validated.
            mem.write(LOG2, &inp.u32().to_le_bytes());
            mem.write(MASK, &inp.u32().to_le_bytes());
        }
        3 => mem.write(CONS, &inp.u32().to_le_bytes()),
        _ => {
            let off = inp.below((slots as usize * elem) as u32) as usize;
            let bytes = inp.take(16).to_vec();
            mem.write(DATA + off, &bytes);
        }
    }
}

fn cq(q: Queue, mem: &Shared, inp: &mut Input<'_>, slots: u32, elem: usize) {
    let mut cq = match CompletionQueue::new(q) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let mut out = [Wc::default(); 8];
    while !inp.is_empty() {
        match inp.u8() % 6 {
            0 => match cq.poll(&mut out[..1]) {
                Ok(1) => {
                    // Consuming stores our index, always in range.
                    assert!(mem.read_u32(CONS) < slots);
                    check_wc(&out[0]);
                    let _ = (out[0].imm(), out[0].invalidated_rkey());
                }
                Ok(k) => assert_eq!(k, 0, "{k} completions from a poll of one"),
                Err(e) => {
                    let _ = e.to_string();
                }
            },
            1 => {
                let n = 1 + inp.below(8) as usize;
                match cq.poll(&mut out[..n]) {
                    Ok(k) => {
                        assert!(k <= n && (k as u32) < slots);
                        assert!(k == 0 || mem.read_u32(CONS) < slots);
                        out[..k].iter().for_each(check_wc);
                    }
                    Err(e) => {
                        let _ = e.to_string();
                    }
                }
            }
            2 => match cq.peek() {
                // The field-by-field read and the whole-slot copy (with its fix-up) of the
                // same slot are the same completion, by the inline one-completion path or
                // the run.
                Ok(Some(p)) => {
                    check_wc(&p);
                    // (A poll of more than is known ready reloads the producer index, which
                    // the kernel may have made hostile since: an error is the answer then.)
                    let n = 1 + inp.below(8) as usize;
                    match cq.poll(&mut out[..n]) {
                        Ok(k) => {
                            assert!(k >= 1, "peeked one, polled none");
                            assert_eq!(out[0], p);
                        }
                        Err(e) => {
                            assert!(n > 1, "a poll of one takes the peeked one: {e}");
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    let _ = e.to_string();
                }
            },
            3 => {
                // What `refresh` counts is what the next poll takes: it never hides a
                // completion and never promises one that is not there.
                let want = 1 + inp.below(8) as usize;
                if let Ok(r) = cq.refresh(want) {
                    assert!(r <= want && (r as u32) < slots);
                    assert_eq!(cq.poll(&mut out[..want]), Ok(r));
                    assert!(r == 0 || mem.read_u32(CONS) < slots);
                }
                if let Ok(r) = cq.ready() {
                    assert!(r < slots);
                }
            }
            4 => match cq.start_poll() {
                Ok(Some(mut c)) => {
                    read_cursor(&c);
                    for _ in 0..inp.below(2 * slots) {
                        if inp.u8() % 4 == 0 {
                            // The kernel may move while a lazy poll is open.
                            kernel_moves(mem, inp, slots, elem);
                        }
                        match c.advance() {
                            Ok(true) => read_cursor(&c),
                            Ok(false) => break,
                            Err(e) => {
                                let _ = e.to_string();
                                break;
                            }
                        }
                    }
                    // Ending the poll publishes our index once, in range.
                    drop(c);
                    assert!(mem.read_u32(CONS) < slots);
                }
                Ok(None) => {}
                Err(e) => {
                    let _ = e.to_string();
                }
            },
            _ => kernel_moves(mem, inp, slots, elem),
        }
    }
}

fn sges(inp: &mut Input<'_>) -> Vec<Sge> {
    (0..inp.below(6))
        .map(|_| Sge {
            addr: inp.u64(),
            length: inp.size(),
            lkey: inp.u32(),
        })
        .collect()
}

fn sq(q: Queue, mem: &Shared, inp: &mut Input<'_>, slots: u32) {
    let elem = q.elem_size();
    // Mostly the types rxe has; sometimes one it refuses.
    let types = [
        QpType::Rc,
        QpType::Uc,
        QpType::Ud,
        QpType::Srd,
        QpType::XrcSend,
    ];
    let qp_type = types[(inp.below(12) as usize).min(types.len() - 1)];
    let caps = SendQueueCaps {
        qp_type,
        domain: FUZZ_PD,
        max_send_sge: inp.below(8),
        max_inline_data: inp.size() % 1024,
    };
    let mut sq = match SendQueue::new(q, caps) {
        Ok(s) => s,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    while !inp.is_empty() {
        let before = mem.read_u32(PROD);
        match inp.u8() % 4 {
            0 => {
                let sg = sges(inp);
                let ah = FuzzAh::from_input(inp);
                let mut wr = SendWr::new(inp.u64(), WrOp::Send).sge(&sg);
                if inp.bool() {
                    wr = wr.ud(&ah, inp.u32(), inp.u32());
                }
                if sq.post(&wr).is_err() {
                    assert_eq!(mem.read_u32(PROD), before, "a failed post published");
                }
            }
            1 => {
                let p = sq.publish();
                assert!(p < slots);
            }
            2 => {
                let _ = sq.outstanding().map_err(|e| e.to_string());
            }
            _ => kernel_moves(mem, inp, slots, elem),
        }
    }
}

fn rq(q: Queue, mem: &Shared, inp: &mut Input<'_>, slots: u32) {
    let elem = q.elem_size();
    let mut rq = match RecvQueue::new(q, inp.below(8)) {
        Ok(r) => r,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    while !inp.is_empty() {
        let before = mem.read_u32(PROD);
        match inp.u8() % 5 {
            0 => {
                let sg = sges(inp);
                if rq.post(inp.u64(), &sg).is_err() {
                    assert_eq!(mem.read_u32(PROD), before, "a failed post published");
                }
            }
            4 => {
                // A list: posted up to the first refusal, all of those (and any earlier
                // unpublished receives) published. (Our index is stored first: the kernel
                // may have scribbled over it.)
                rq.publish();
                let base = mem.read_u32(PROD);
                let mut pending = 0;
                for _ in 0..inp.below(3) {
                    let (id, sg) = (inp.u64(), sges(inp));
                    pending += u32::from(rq.post(id, &sg).is_ok());
                }
                assert_eq!(rq.pending(), pending);
                let lists: Vec<Vec<Sge>> = (0..inp.below(5)).map(|_| sges(inp)).collect();
                let wrs: Vec<RecvWr<'_>> = lists
                    .iter()
                    .enumerate()
                    .map(|(i, l)| RecvWr::new(i as u64, l))
                    .collect();
                let posted = uverbs_fuzz::post_recv_list_checked(&mut rq, &wrs);
                let moved = mem.read_u32(PROD).wrapping_sub(base) & (slots - 1);
                assert_eq!(moved as usize, (pending as usize + posted) % slots as usize);
            }
            1 => assert!(rq.publish() < slots),
            2 => {
                let _ = rq.outstanding().map_err(|e| e.to_string());
            }
            _ => kernel_moves(mem, inp, slots, elem),
        }
    }
}
