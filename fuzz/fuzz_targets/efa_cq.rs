//! EFA completion parsing over hostile sub-CQ rings: the CQ configuration the core derives from
//! the kernel (sub-CQ count, depth, entry size, SGID), and CQE bytes the device writes at any
//! time — phase bits, req_ids (wrong generation, out of range, not posted, completed twice),
//! queue types, opcodes, lengths, QP numbers of unknown QPs.
//!
//! Property: `CompletionQueue::new` refuses bad configurations with `EfaError::BadConfig`;
//! `poll` returns at most the slots given, never reads outside the buffer (ASan), never
//! panics, and hands out each posted wr_id at most once and only wr_ids that were posted —
//! a hostile CQE is consumed and reported as a typed error instead. The same holds for the
//! lazy extended-poll cursor (`start_poll`, every reader, `advance` with the device writing
//! meanwhile, drop), whose doorbell at the end carries the consumer counter.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use uverbs_efa::{Completion, CompletionQueue, CqConfig, QpEntry, WridCompleter, WridPool};
use uverbs_fuzz::{Input, Shared};

struct FakeQp {
    qp_num: u32,
    send: (WridPool, WridCompleter),
    recv: (WridPool, WridCompleter),
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let sane = inp.u8() % 8 != 0;
    let cfg = if sane {
        CqConfig {
            cqn: inp.u32(),
            num_sub_cqs: 1 + inp.below(4) as u16,
            sub_cq_depth: 1 << inp.below(7),
            entry_size: if inp.bool() { 32 } else { 16 },
            with_sgid: inp.bool(),
        }
    } else {
        CqConfig {
            cqn: inp.u32(),
            num_sub_cqs: inp.u16(),
            sub_cq_depth: inp.size(),
            entry_size: inp.below(64),
            with_sgid: inp.bool(),
        }
    };
    let want = cfg.buffer_size().min(1 << 20);
    let len = if inp.u8() == 0xff {
        want.saturating_sub(1 + inp.below(64) as usize)
    } else {
        want
    };
    let buf = Shared::new(len);
    let fill = inp.take(len.min(inp.remaining() / 2)).to_vec();
    buf.write(0, &fill);
    let db = Shared::new(4);
    let with_db = inp.bool();
    // SAFETY: `buf` (len bytes, at least as many as given) and `db` outlive `cq`; only this
    // function writes them otherwise, between calls (playing the device).
    let cq = unsafe {
        CompletionQueue::new(cfg, buf.ptr(), len, with_db.then(|| db.ptr().cast::<u32>()))
    };
    let mut cq = match cq {
        Ok(cq) => cq,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };

    let mut qps: Vec<FakeQp> = Vec::new();
    for _ in 0..1 + inp.below(3) {
        let qp_num = u32::from(inp.u16() % 8);
        let (Ok(send), Ok(recv)) = (
            WridPool::new(1 + inp.below(64), inp.u16()),
            WridPool::new(1 + inp.below(64), inp.u16()),
        ) else {
            return;
        };
        qps.push(FakeQp { qp_num, send, recv });
    }
    let mut next_wr_id = 1000u64;
    let mut posted: HashSet<u64> = HashSet::new();
    let mut wcs = [Completion::default(); 8];
    let entry = cfg.entry_size as usize;
    let slots = cfg.num_sub_cqs as usize * cfg.sub_cq_depth as usize;

    while !inp.is_empty() {
        match inp.u8() % 7 {
            0 | 1 => {
                // Post some WRs on a QP (ids become valid completions).
                let q = inp.below(qps.len() as u32) as usize;
                let recv = inp.bool();
                let pool = if recv {
                    &mut qps[q].recv.0
                } else {
                    &mut qps[q].send.0
                };
                for _ in 0..inp.below(4) {
                    if pool.alloc(next_wr_id).is_some() {
                        posted.insert(next_wr_id);
                        next_wr_id += 1;
                    }
                }
                pool.publish();
            }
            2 => {
                // The device writes a CQE (phase and fields hostile) into some slot.
                let slot = inp.below(slots as u32) as usize;
                let bytes = inp.take(entry).to_vec();
                buf.write(slot * entry, &bytes);
            }
            3 => {
                let _ = cq.req_notify(inp.bool()).map_err(|e| e.to_string());
                cq.note_event();
            }
            4 => {
                let mut lookup = lookup(&mut qps);
                let before = db.read_u32(0);
                let mut consumed = false;
                match cq.start_poll(&mut lookup[..]) {
                    Ok(Some(mut c)) => {
                        consumed = true;
                        check_cursor(&c, &mut posted);
                        for _ in 0..inp.below(2 * slots as u32 + 2) {
                            if inp.u8() % 4 == 0 {
                                // The device may write while a poll is open.
                                let slot = inp.below(slots as u32) as usize;
                                let bytes = inp.take(entry).to_vec();
                                buf.write(slot * entry, &bytes);
                            }
                            match c.advance(&mut lookup[..]) {
                                Ok(true) => check_cursor(&c, &mut posted),
                                Ok(false) => {
                                    if inp.bool() {
                                        break;
                                    }
                                }
                                Err(e) => {
                                    let _ = e.to_string();
                                    // Still readable: the last good completion (or none).
                                    let _ = c.completion();
                                }
                            }
                        }
                        let _ = format!("{c:?}");
                    }
                    Ok(None) => {}
                    Err(e) => {
                        consumed = true;
                        let _ = e.to_string();
                    }
                }
                if with_db {
                    let after = db.read_u32(0);
                    if consumed {
                        // Ending the poll rang the doorbell with the consumer counter.
                        assert_eq!(after & 0xffff, u32::from(cq.consumer_counter()));
                    } else {
                        assert_eq!(after, before, "an empty poll rings nothing");
                    }
                }
            }
            _ => {
                let n = 1 + inp.below(8) as usize;
                let mut lookup = lookup(&mut qps);
                let (got, err) = match cq.poll(&mut wcs[..n], &mut lookup[..]) {
                    Ok(k) => (k, None),
                    Err(e) => (e.polled, Some(e)),
                };
                assert!(got <= n, "{got} completions into {n} slots");
                for c in &wcs[..got] {
                    check(c, &mut posted);
                }
                if let Some(e) = err {
                    let _ = e.to_string();
                }
            }
        }
    }
});

/// A completion handed out once: a posted wr_id, never seen before (or 0, unsolicited).
/// The QP table the CQ looks completions up in: every fake QP, both its pools.
fn lookup(qps: &mut [FakeQp]) -> Vec<QpEntry<'_>> {
    qps.iter_mut()
        .map(|q| QpEntry {
            qp_num: q.qp_num,
            send: Some(&mut q.send.1),
            recv: Some(&mut q.recv.1),
        })
        .collect()
}

fn check(c: &Completion, posted: &mut HashSet<u64>) {
    // Only receives are unsolicited, and only receives carry a sender's GID.
    assert!(!(c.is_unsolicited || c.sgid.is_some()) || c.wc.opcode.is_recv());
    if c.is_unsolicited {
        assert_eq!(c.wc.wr_id, 0);
        return;
    }
    assert!(
        posted.remove(&c.wc.wr_id),
        "wr_id {} completed but not outstanding (or twice)",
        c.wc.wr_id
    );
}

/// [`check`] of the cursor's completion, whose standard fields (`wc`) and extras are what
/// its one-field readers say.
fn check_cursor(cur: &uverbs_efa::cq::PollCursor<'_>, posted: &mut HashSet<u64>) {
    let c = cur.completion();
    assert_eq!(c.wc, cur.wc());
    assert_eq!(
        (c.wc.wr_id, c.wc.status, c.wc.opcode, c.wc.wc_flags),
        (cur.wr_id(), cur.status(), cur.opcode(), cur.wc_flags())
    );
    assert_eq!(
        (c.sgid, c.is_unsolicited),
        (cur.sgid(), cur.is_unsolicited())
    );
    check(&c, posted);
}
