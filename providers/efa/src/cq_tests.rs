//! CQ tests: the test writes CQEs into heap memory as the device would.

use super::*;
use crate::wrid::WridPool;
use zerocopy::IntoBytes;

/// Allocates and publishes one id, as a post does before its doorbell.
fn post(p: &mut WridPool, wr_id: u64) -> u16 {
    let r = p.alloc(wr_id).unwrap();
    p.publish();
    r
}
use crate::error::{ReqIdProblem, EIO, EOPNOTSUPP};
use crate::testmem::Mem;

/// Fields drop in declaration order: the queue goes before the memory it points into.
struct Rig {
    cq: CompletionQueue,
    buf: Mem,
    db: Mem,
}

fn rig(cfg: CqConfig, with_db: bool) -> Rig {
    let buf = Mem::new(cfg.buffer_size());
    let db = Mem::new(4);
    let dbp = with_db.then(|| db.u32_ptr());
    // SAFETY: heap regions of the needed sizes, kept alive by `Rig` until after the queue is
    // dropped (field order); only this thread touches them.
    let cq = unsafe { CompletionQueue::new(cfg, buf.ptr(), buf.len(), dbp) }.unwrap();
    Rig { cq, buf, db }
}

fn cfg(num_sub_cqs: u16, depth: u32, entry_size: u32, with_sgid: bool) -> CqConfig {
    CqConfig {
        cqn: 3,
        num_sub_cqs,
        sub_cq_depth: depth,
        entry_size,
        with_sgid,
    }
}

impl Rig {
    /// Two rigs fed the same CQEs stand at the same place: round-robin position and CQ-wide
    /// consumer counter.
    fn assert_same_position(&self, other: &Rig, what: &str) {
        assert_eq!(self.cq.next_poll_idx, other.cq.next_poll_idx, "{what}");
        assert_eq!(
            self.cq.consumer_counter(),
            other.cq.consumer_counter(),
            "{what}"
        );
    }

    /// ... and wrote the same doorbell values.
    fn assert_same_doorbells(&self, other: &Rig, what: &str) {
        assert_eq!(
            self.cq.db.as_ref().unwrap().log,
            other.cq.db.as_ref().unwrap().log,
            "{what}"
        );
    }

    /// Device side: writes `bytes` as entry `idx` of sub-CQ `sub`.
    fn put(&self, sub: usize, idx: usize, bytes: &[u8]) {
        write_cqe(&self.buf, self.cq.config(), sub, idx, bytes);
    }
}

/// [`Rig::put`] for when the queue is borrowed (a cursor is open): the device writes anyway.
fn write_cqe(buf: &Mem, c: &CqConfig, sub: usize, idx: usize, bytes: &[u8]) {
    let off = (sub * c.sub_cq_depth as usize + idx) * c.entry_size as usize;
    buf.write(off, bytes);
}

/// A send CQE (16 bytes) built with the typed accessors.
fn tx_cqe(req_id: u16, qp: u16, status: u8, op: u8, phase: bool) -> [u8; 16] {
    let mut c = EfaIoTxCdesc::default();
    c.common.req_id.set(req_id);
    c.common.qp_num.set(qp);
    c.common.status = status;
    c.common.set_q_type(EFA_IO_SEND_QUEUE);
    c.common.set_op_type(op);
    c.common.set_phase(phase);
    let mut out = [0u8; 16];
    out.copy_from_slice(c.as_bytes());
    out
}

fn rx_cqe(req_id: u16, qp: u16, phase: bool) -> [u8; 32] {
    let mut c = EfaIoRxCdescEx::default();
    c.base.common.req_id.set(req_id);
    c.base.common.qp_num.set(qp);
    c.base.common.set_q_type(EFA_IO_RECV_QUEUE);
    c.base.common.set_phase(phase);
    c.base.length.set(64);
    c.base.ah.set(1);
    let mut out = [0u8; 32];
    out.copy_from_slice(c.as_bytes());
    out
}

#[test]
fn golden_recv_with_imm_and_sgid() {
    let mut r = rig(cfg(1, 4, 32, true), true);
    let (mut recv_p, mut recv) = WridPool::new(4, 0).unwrap();
    let id = post(&mut recv_p, 0xabc);
    assert_eq!(id, 0);
    #[rustfmt::skip]
    let cqe: [u8; 32] = [
        // req_id 0, status OK
        0x00, 0x00, 0x00,
        // flags: phase BIT(0)=1 | q_type RECV (2) in 2:1 = 0x04 | has_imm BIT(3)=0x08
        //        | op_type SEND (0) in 6:4 -> 0x0d
        0x0d,
        // qp_num 0x0011
        0x11, 0x00,
        // length 0x0400, ah 0xffff (unknown sender), src_qp_num 0x0022
        0x00, 0x04, 0xff, 0xff, 0x22, 0x00,
        // imm 0xcafebabe LE
        0xbe, 0xba, 0xfe, 0xca,
        // src_addr (GID) 0xf0..0xff
        0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7,
        0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff,
    ];
    r.put(0, 0, &cqe);
    let mut table = [QpEntry {
        qp_num: 0x11,
        send: None,
        recv: Some(&mut recv),
    }];
    let mut wcs = [Completion::default(); 4];
    assert_eq!(r.cq.poll(&mut wcs, &mut table[..]), Ok(1));
    let gid: [u8; 16] = core::array::from_fn(|i| 0xf0 + i as u8);
    assert_eq!(
        wcs[0],
        Completion {
            wc: Wc {
                wr_id: 0xabc,
                status: WcStatus::SUCCESS,
                vendor_err: 0,
                opcode: WcOpcode::RECV,
                byte_len: 0x400,
                imm_data: 0xcafe_babe,
                qp_num: 0x11,
                src_qp: 0x22,
                slid: 0xffff,
                wc_flags: WcFlags::WITH_IMM,
                ..Wc::default()
            },
            sgid: Some(gid),
            is_unsolicited: false,
        }
    );
    assert_eq!(wcs[0].wc.imm(), Some(0xcafe_babe));
    assert_eq!(recv_p.outstanding(), 0, "the receive slot was returned");
    assert_eq!(
        r.cq.db.as_ref().unwrap().log,
        [1],
        "consumer counter 1, no arm"
    );
}

#[test]
fn golden_send_error_and_unsolicited_write() {
    let mut r = rig(cfg(1, 4, 32, true), true);
    let (mut send_p, mut send) = WridPool::new(4, 0).unwrap();
    let (_recv_p, mut recv) = WridPool::new(4, 0).unwrap();
    let sid = post(&mut send_p, 0x51);
    #[rustfmt::skip]
    let tx: [u8; 16] = [
        // req_id (slot 0), status 7 = REMOTE_ERROR_BAD_ADDRESS
        0x00, 0x00, 0x07,
        // flags: phase 1 | q_type SEND (1) << 1 = 0x02 | op_type RDMA_WRITE (2) << 4 = 0x20
        0x23,
        // qp_num 0x0011, req_id_ex, reserved
        0x11, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(sid, 0);
    r.put(0, 0, &tx);
    #[rustfmt::skip]
    let rx: [u8; 32] = [
        // req_id garbage (unsolicited: no receive consumed, must not be looked up)
        0x34, 0x12, 0x00,
        // flags: phase 1 | q_type RECV 0x04 | has_imm 0x08 | op RDMA_WRITE 0x20
        //        | unsolicited BIT(7) 0x80 -> 0xad
        0xad,
        0x11, 0x00,
        // length bits 15:0 = 0x0010, ah 5 (known), src_qp 0x0022
        0x10, 0x00, 0x05, 0x00, 0x22, 0x00,
        // imm 7
        0x07, 0x00, 0x00, 0x00,
        // u.rdma_write.length_hi = 0x0001 -> byte_len 0x10010
        0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    r.put(0, 1, &rx);
    let mut table = [QpEntry {
        qp_num: 0x11,
        send: Some(&mut send),
        recv: Some(&mut recv),
    }];
    let mut wcs = [Completion::default(); 4];
    assert_eq!(r.cq.poll(&mut wcs, &mut table[..]), Ok(2));
    assert_eq!(wcs[0].wc.wr_id, 0x51);
    assert_eq!(wcs[0].wc.status, WcStatus::REM_ACCESS_ERR);
    assert_eq!(wcs[0].wc.vendor_err, 7);
    assert_eq!(wcs[0].wc.opcode, WcOpcode::RDMA_WRITE);
    assert_eq!(wcs[0].wc.byte_len, 0);
    assert!(!wcs[0].is_unsolicited);
    assert_eq!(wcs[1].wc.wr_id, 0);
    assert!(wcs[1].is_unsolicited);
    assert_eq!(wcs[1].wc.opcode, WcOpcode::RECV_RDMA_WITH_IMM);
    assert_eq!(wcs[1].wc.byte_len, 0x1_0010);
    assert_eq!(wcs[1].wc.imm_data, 7);
    assert_eq!(wcs[1].wc.wc_flags, WcFlags::WITH_IMM);
    assert_eq!(wcs[1].sgid, None, "known AH: no SGID");
    assert_eq!(send_p.outstanding(), 0);
}

#[test]
fn round_robin_across_sub_cqs() {
    let mut r = rig(cfg(2, 4, 32, false), true);
    let (mut send_p, mut send) = WridPool::new(8, 0).unwrap();
    // sub-CQ 0 gets WRs 0,1,2; sub-CQ 1 gets WR 3.
    let ids: Vec<u16> = (0..4).map(|i| post(&mut send_p, i)).collect();
    for (i, &id) in ids[..3].iter().enumerate() {
        r.put(0, i, &tx_cqe(id, 9, 0, EFA_IO_SEND, true));
    }
    r.put(1, 0, &tx_cqe(ids[3], 9, 0, EFA_IO_SEND, true));
    let mut table = [QpEntry {
        qp_num: 9,
        send: Some(&mut send),
        recv: None,
    }];
    let mut order = Vec::new();
    let mut wc = [Completion::default(); 1];
    while r.cq.poll(&mut wc, &mut table[..]) == Ok(1) {
        order.push(wc[0].wc.wr_id);
    }
    // next_poll_idx: 0 -> take s0; 1 -> take s1; 0 -> take s0; 1 -> s1 empty, s0.
    assert_eq!(order, [0, 3, 1, 2]);
    assert_eq!(r.cq.consumer_counter(), 4);
}

#[test]
fn sub_cq_wraps_and_phase() {
    for entry_size in [16u32, 32] {
        let mut r = rig(cfg(2, 4, entry_size, false), true);
        let (mut send_p, mut send) = WridPool::new(4, 0).unwrap();
        let (mut recv_p, mut recv) = WridPool::new(4, 0).unwrap();
        let mut wcs = [Completion::default(); 4];
        for k in 0..14u64 {
            let idx = (k % 4) as usize;
            // The device writes phase 1 on pass 0, 0 on pass 1, ...
            let phase = (k / 4) % 2 == 0;
            {
                let mut table = [QpEntry {
                    qp_num: 4,
                    send: Some(&mut send),
                    recv: Some(&mut recv),
                }];
                // Before the device writes, the stale entries of the previous pass (and the
                // zeroed ring on pass 0) must not be taken.
                assert_eq!(r.cq.poll(&mut wcs, &mut table[..]), Ok(0), "k={k}");
            }
            let s = post(&mut send_p, 100 + k);
            let v = post(&mut recv_p, 200 + k);
            r.put(0, idx, &tx_cqe(s, 4, 0, EFA_IO_SEND, phase));
            r.put(1, idx, &rx_cqe(v, 4, phase)[..entry_size as usize]);
            let mut table = [QpEntry {
                qp_num: 4,
                send: Some(&mut send),
                recv: Some(&mut recv),
            }];
            let n = r.cq.poll(&mut wcs, &mut table[..]).unwrap();
            assert_eq!(n, 2, "k={k} entry_size={entry_size}");
            let mut got = [wcs[0].wc.wr_id, wcs[1].wc.wr_id];
            got.sort();
            assert_eq!(got, [100 + k, 200 + k]);
            assert_eq!(
                wcs.iter()
                    .take(2)
                    .filter(|w| w.wc.opcode == WcOpcode::RECV)
                    .count(),
                1
            );
            // Doorbell: CQ-wide consumer counter after the poll, no arm, cmd_sn 0.
            let log = &r.cq.db.as_ref().unwrap().log;
            assert_eq!(log.last(), Some(&(2 * (k as u32 + 1))));
        }
        // Empty polls wrote no doorbell: one write per non-empty poll.
        assert_eq!(r.cq.db.as_ref().unwrap().log.len(), 14);
    }
}

#[test]
fn distrusts_cqe_contents() {
    let mut r = rig(cfg(1, 8, 32, false), true);
    let (mut send_p, mut send) = WridPool::new(3, 0).unwrap();
    let good = post(&mut send_p, 1);
    // 0: good; 1: slot 3 (mask has room, pool does not); 2: slot 1 never posted;
    // 3: unknown QP; 4: q_type 0; 5: generation bits set; 6: good id completed twice.
    r.put(0, 0, &tx_cqe(good, 9, 0, EFA_IO_SEND, true));
    r.put(0, 1, &tx_cqe(3, 9, 0, EFA_IO_SEND, true));
    r.put(0, 2, &tx_cqe(1, 9, 0, EFA_IO_SEND, true));
    r.put(0, 3, &tx_cqe(good, 10, 0, EFA_IO_SEND, true));
    let mut bad_type = tx_cqe(good, 9, 0, EFA_IO_SEND, true);
    bad_type[3] = 0x01; // phase only, q_type 0
    r.put(0, 4, &bad_type);
    r.put(0, 5, &tx_cqe(0x8000, 9, 0, EFA_IO_SEND, true));
    r.put(0, 6, &tx_cqe(good, 9, 0, EFA_IO_SEND, true));
    let mut table = [QpEntry {
        qp_num: 9,
        send: Some(&mut send),
        recv: None,
    }];
    let mut wcs = [Completion::default(); 8];
    let e = r.cq.poll(&mut wcs, &mut table[..]).unwrap_err();
    assert_eq!(
        e.polled, 1,
        "the good completion before the bad one is delivered"
    );
    assert_eq!(wcs[0].wc.wr_id, 1);
    let problem = |e: PollError| match e.error {
        EfaError::BadReqId { problem, .. } => Some(problem),
        _ => None,
    };
    assert_eq!(problem(e), Some(ReqIdProblem::OutOfRange));
    assert_eq!(e.error.errno(), EIO);
    let e = r.cq.poll(&mut wcs, &mut table[..]).unwrap_err();
    assert_eq!(
        (e.polled, problem(e)),
        (0, Some(ReqIdProblem::NotOutstanding))
    );
    let e = r.cq.poll(&mut wcs, &mut table[..]).unwrap_err();
    assert_eq!(
        e.error,
        EfaError::UnknownQp {
            cqn: 3,
            qpn: 10,
            queue: QueueKind::Send
        }
    );
    let e = r.cq.poll(&mut wcs, &mut table[..]).unwrap_err();
    assert!(matches!(e.error, EfaError::BadCqe { flags: 0x01, .. }));
    let e = r.cq.poll(&mut wcs, &mut table[..]).unwrap_err();
    assert_eq!(problem(e), Some(ReqIdProblem::StaleGeneration));
    let e = r.cq.poll(&mut wcs, &mut table[..]).unwrap_err();
    assert_eq!(
        problem(e),
        Some(ReqIdProblem::NotOutstanding),
        "double completion"
    );
    assert_eq!(r.cq.poll(&mut wcs, &mut table[..]), Ok(0));
    assert_eq!(r.cq.consumer_counter(), 7, "bad CQEs are consumed too");
    // A QP without a receive queue cannot take a (solicited) receive completion.
    r.put(0, 7, &rx_cqe(0, 9, true));
    let e = r.cq.poll(&mut wcs, &mut table[..]).unwrap_err();
    assert!(matches!(
        e.error,
        EfaError::UnknownQp {
            queue: QueueKind::Recv,
            ..
        }
    ));
}

#[test]
fn arm_and_events() {
    let mut r = rig(cfg(1, 4, 32, false), true);
    r.cq.req_notify(false).unwrap();
    r.cq.note_event();
    r.cq.note_event();
    r.cq.req_notify(false).unwrap();
    let e = r.cq.req_notify(true).unwrap_err();
    assert_eq!(e.errno(), EOPNOTSUPP);
    // arm BIT(31); cmd_sn 2 in bits 30:29 -> 0x4000_0000; consumer index 0
    assert_eq!(r.cq.db.as_ref().unwrap().log, [0x8000_0000, 0xc000_0000]);
    assert_eq!(r.db.word(), 0xc000_0000);

    let mut nodb = rig(cfg(1, 4, 32, false), false);
    assert_eq!(
        nodb.cq.req_notify(false),
        Err(EfaError::NoCqDoorbell { cqn: 3 })
    );
    // Polling without a doorbell works and writes nothing.
    let (mut send_p, mut send) = WridPool::new(2, 0).unwrap();
    let id = post(&mut send_p, 5);
    nodb.put(0, 0, &tx_cqe(id, 1, 0, EFA_IO_SEND, true));
    let mut table = [QpEntry {
        qp_num: 1,
        send: Some(&mut send),
        recv: None,
    }];
    let mut wcs = [Completion::default(); 2];
    assert_eq!(nodb.cq.poll(&mut wcs, &mut table[..]), Ok(1));
}

#[test]
fn bad_configs_refused() {
    let buf = Mem::new(256);
    let try_new = |c: CqConfig| {
        // SAFETY: the heap region outlives the queue, which is dropped at once.
        unsafe { CompletionQueue::new(c, buf.ptr(), 256, None) }.map(|_| ())
    };
    assert!(try_new(cfg(1, 8, 32, false)).is_ok());
    assert!(try_new(cfg(2, 8, 32, false)).is_err(), "buffer too small");
    assert!(
        try_new(cfg(1, 3, 32, false)).is_err(),
        "depth not a power of two"
    );
    assert!(
        try_new(cfg(1, 4, 16, true)).is_err(),
        "SGID needs 32-byte CQEs"
    );
    assert!(try_new(cfg(0, 4, 32, false)).is_err());
    assert!(try_new(cfg(1, 4, 24, false)).is_err());
}

/// One poll with room for everything gives the order the per-CQE round robin gives (polls of
/// one at a time): alternating while several sub-CQs have entries, then the rest of the last
/// one as a run; the next poll starts after the sub-CQ the last CQE came from.
#[test]
fn one_big_poll_keeps_the_round_robin_order() {
    let mut r = rig(cfg(3, 8, 32, false), true);
    let (mut p, mut c) = WridPool::new(16, 0).unwrap();
    // sub-CQ 0: WRs 0..4, sub-CQ 1: nothing, sub-CQ 2: WRs 10, 11.
    for i in 0..4u64 {
        let id = post(&mut p, i);
        r.put(0, i as usize, &tx_cqe(id, 9, 0, EFA_IO_SEND, true));
    }
    for i in 0..2u64 {
        let id = post(&mut p, 10 + i);
        r.put(2, i as usize, &tx_cqe(id, 9, 0, EFA_IO_SEND, true));
    }
    let mut wcs = [Completion::default(); 16];
    let mut table = [QpEntry {
        qp_num: 9,
        send: Some(&mut c),
        recv: None,
    }];
    assert_eq!(r.cq.poll(&mut wcs, &mut table[..]), Ok(6));
    let order: Vec<u64> = wcs[..6].iter().map(|w| w.wc.wr_id).collect();
    assert_eq!(order, [0, 10, 1, 11, 2, 3]);
    assert_eq!(r.cq.consumer_counter(), 6);
    assert_eq!(
        r.cq.db.as_ref().unwrap().log,
        [6],
        "one doorbell for the poll"
    );
    // The last CQE came from sub-CQ 0: the next poll tries sub-CQ 1 first, then 2, then 0.
    let a = post(&mut p, 20);
    let b = post(&mut p, 21);
    r.put(0, 4, &tx_cqe(a, 9, 0, EFA_IO_SEND, true));
    r.put(2, 2, &tx_cqe(b, 9, 0, EFA_IO_SEND, true));
    let mut table = [QpEntry {
        qp_num: 9,
        send: Some(&mut c),
        recv: None,
    }];
    assert_eq!(r.cq.poll(&mut wcs[..1], &mut table[..]), Ok(1));
    assert_eq!(wcs[0].wc.wr_id, 21);
    assert_eq!(r.cq.poll(&mut wcs[..1], &mut table[..]), Ok(1));
    assert_eq!(wcs[0].wc.wr_id, 20);
    assert_eq!(r.cq.poll(&mut wcs, &mut table[..]), Ok(0));
}

// ----- the extended poll cursor ----------------------------------------------------------------

/// A small deterministic generator (xorshift), so the mixed-CQE tests are repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One CQE of any kind, as 32 bytes (a 16-byte entry uses the first half).
#[allow(clippy::too_many_arguments)]
fn any_cqe(
    req_id: u16,
    qp: u16,
    recv: bool,
    status: u8,
    op: u8,
    has_imm: bool,
    unsolicited: bool,
    ah: u16,
    phase: bool,
    salt: u32,
) -> [u8; 32] {
    let mut c = EfaIoRxCdescEx::default();
    c.base.common.req_id.set(req_id);
    c.base.common.qp_num.set(qp);
    c.base.common.status = status;
    c.base.common.set_q_type(if recv {
        EFA_IO_RECV_QUEUE
    } else {
        EFA_IO_SEND_QUEUE
    });
    c.base.common.set_op_type(op);
    c.base.common.set_phase(phase);
    let mut out = [0u8; 32];
    out.copy_from_slice(c.as_bytes());
    if has_imm {
        out[3] |= EFA_IO_CDESC_COMMON_HAS_IMM_MASK;
    }
    if unsolicited {
        out[3] |= EFA_IO_CDESC_COMMON_UNSOLICITED_MASK;
    }
    // length, ah, src_qp_num, imm; then length_hi or the source GID.
    out[6..8].copy_from_slice(&(salt as u16).to_le_bytes());
    out[8..10].copy_from_slice(&ah.to_le_bytes());
    out[10..12].copy_from_slice(&((salt >> 8) as u16).to_le_bytes());
    out[12..16].copy_from_slice(&salt.wrapping_mul(0x9e37_79b9).to_le_bytes());
    for (i, b) in out[16..].iter_mut().enumerate() {
        *b = (salt as u8).wrapping_add(i as u8);
    }
    out
}

/// Two queues fed the very same CQEs, one drained by `poll`, the other by the cursor, must
/// give the same completions in the same order, consume the same and ring the same doorbell
/// values — over three sub-CQs (some rounds leaving some empty), more than three wraps of
/// each, both entry sizes, sends and every kind of receive.
#[test]
fn cursor_gives_what_poll_gives() {
    for (entry_size, with_sgid) in [(16u32, false), (32, false), (32, true)] {
        const DEPTH: u32 = 4;
        let c = cfg(3, DEPTH, entry_size, with_sgid);
        let (mut ra, mut rb) = (rig(c, true), rig(c, true));
        // Same posts into both sets of pools: the same req_ids.
        let (mut sp_a, mut sc_a) = WridPool::new(64, 0).unwrap();
        let (mut rp_a, mut rc_a) = WridPool::new(64, 0).unwrap();
        let (mut sp_b, mut sc_b) = WridPool::new(64, 0).unwrap();
        let (mut rp_b, mut rc_b) = WridPool::new(64, 0).unwrap();
        let mut produced = [0u32; 3];
        let mut rng = Rng(0x1234_5678_9abc_def1 ^ u64::from(entry_size));
        let mut total = 0;
        for round in 0..40u64 {
            // Each sub-CQ gets 0..=DEPTH new entries (never more than it holds, since every
            // round drains everything).
            let mut written = 0;
            for (sub, prod) in produced.iter_mut().enumerate() {
                for _ in 0..rng.below(u64::from(DEPTH) + 1) {
                    let wr_id = round << 16 | rng.below(1 << 16);
                    let recv = rng.below(2) == 0;
                    let unsolicited = recv && rng.below(5) == 0;
                    let op = if recv {
                        if rng.below(3) == 0 {
                            EFA_IO_RDMA_WRITE
                        } else {
                            EFA_IO_SEND
                        }
                    } else {
                        rng.below(3) as u8 // SEND, RDMA_READ, RDMA_WRITE
                    };
                    let req_id = if unsolicited {
                        rng.below(1 << 16) as u16
                    } else if recv {
                        let (a, b) = (post(&mut rp_a, wr_id), post(&mut rp_b, wr_id));
                        assert_eq!(a, b);
                        a
                    } else {
                        let (a, b) = (post(&mut sp_a, wr_id), post(&mut sp_b, wr_id));
                        assert_eq!(a, b);
                        a
                    };
                    let status = if rng.below(4) == 0 {
                        rng.below(20) as u8
                    } else {
                        0
                    };
                    let ah = if rng.below(2) == 0 {
                        EFA_IO_RX_CDESC_AH_UNKNOWN
                    } else {
                        rng.below(100) as u16
                    };
                    let phase = (*prod / DEPTH) % 2 == 0;
                    let bytes = any_cqe(
                        req_id,
                        7,
                        recv,
                        status,
                        op,
                        rng.below(2) == 0,
                        unsolicited,
                        ah,
                        phase,
                        rng.next() as u32,
                    );
                    let idx = (*prod % DEPTH) as usize;
                    ra.put(sub, idx, &bytes[..entry_size as usize]);
                    rb.put(sub, idx, &bytes[..entry_size as usize]);
                    *prod += 1;
                    written += 1;
                }
            }
            let mut ta = [QpEntry {
                qp_num: 7,
                send: Some(&mut sc_a),
                recv: Some(&mut rc_a),
            }];
            let mut wcs = [Completion::default(); 16];
            let n = ra.cq.poll(&mut wcs, &mut ta[..]).unwrap();
            assert_eq!(n, written, "round {round}");
            let mut tb = [QpEntry {
                qp_num: 7,
                send: Some(&mut sc_b),
                recv: Some(&mut rc_b),
            }];
            let mut got = Vec::new();
            if let Some(mut cur) = rb.cq.start_poll(&mut tb[..]).unwrap() {
                got.push(cur.completion());
                while cur.advance(&mut tb[..]).unwrap() {
                    assert_eq!(cur.wc(), cur.completion().wc);
                    got.push(cur.completion());
                }
                // Asked again after `false`: still nothing, still on the last completion.
                assert!(!cur.advance(&mut tb[..]).unwrap());
                assert_eq!(Some(&cur.completion()), got.last());
            }
            assert_eq!(got, wcs[..n], "round {round} entry_size {entry_size}");
            ra.assert_same_position(&rb, &format!("round {round}"));
            ra.assert_same_doorbells(&rb, "one doorbell per non-empty poll, same values");
            total += n;
        }
        assert!(
            produced.iter().all(|&p| p > 3 * DEPTH),
            "every sub-CQ wrapped more than three times: {produced:?}"
        );
        assert_eq!(rp_b.outstanding() + sp_b.outstanding(), 0);
        assert_eq!(u32::from(rb.cq.consumer_counter()), total as u32);
        // Every kind showed up (the generator is fixed; this guards against a change to it
        // silently testing less).
        assert!(total > 100, "{total}");
    }
}

#[test]
fn cursor_reads_each_field_from_the_slot() {
    let mut r = rig(cfg(1, 4, 32, true), true);
    let (mut send_p, mut send) = WridPool::new(4, 0).unwrap();
    let (mut recv_p, mut recv) = WridPool::new(4, 0).unwrap();
    let sid = post(&mut send_p, 0x51);
    let rid = post(&mut recv_p, 0x77);
    // A send that failed with REMOTE_ERROR_BAD_ADDRESS (7) on an RDMA write.
    let mut tx = tx_cqe(sid, 0x11, 7, EFA_IO_RDMA_WRITE, true);
    tx[3] |= EFA_IO_CDESC_COMMON_HAS_IMM_MASK; // ignored on sends, as poll ignores it
    r.put(0, 0, &tx);
    // An unsolicited RDMA write with immediate, 0x1_0010 bytes (length_hi 1), known AH 5.
    let mut unsol = any_cqe(
        0x1234,
        0x11,
        true,
        0,
        EFA_IO_RDMA_WRITE,
        true,
        true,
        5,
        true,
        0,
    );
    unsol[6..8].copy_from_slice(&0x0010u16.to_le_bytes());
    unsol[10..12].copy_from_slice(&0x22u16.to_le_bytes());
    unsol[12..16].copy_from_slice(&7u32.to_le_bytes());
    unsol[16..18].copy_from_slice(&1u16.to_le_bytes());
    r.put(0, 1, &unsol);
    // A receive from a sender without an AH: the GID is in words 4..8.
    let mut rx = any_cqe(
        rid,
        0x11,
        true,
        0,
        EFA_IO_SEND,
        false,
        false,
        0xffff,
        true,
        0,
    );
    rx[6..8].copy_from_slice(&64u16.to_le_bytes());
    let gid: [u8; 16] = core::array::from_fn(|i| 0xf0 + i as u8);
    rx[16..].copy_from_slice(&gid);
    r.put(0, 2, &rx);
    let mut table = [QpEntry {
        qp_num: 0x11,
        send: Some(&mut send),
        recv: Some(&mut recv),
    }];
    let mut cur = r.cq.start_poll(&mut table[..]).unwrap().unwrap();
    let send_wc = Wc {
        wr_id: 0x51,
        status: WcStatus::REM_ACCESS_ERR,
        vendor_err: 7,
        opcode: WcOpcode::RDMA_WRITE,
        qp_num: 0x11,
        ..Wc::default()
    };
    assert_eq!(cur.wc(), send_wc);
    assert_eq!(
        cur.completion(),
        Completion {
            wc: send_wc,
            sgid: None,
            is_unsolicited: false,
        }
    );
    assert_eq!(
        (cur.status(), cur.opcode(), cur.wc_flags()),
        (
            WcStatus::REM_ACCESS_ERR,
            WcOpcode::RDMA_WRITE,
            WcFlags::empty()
        )
    );
    assert!(cur.advance(&mut table[..]).unwrap());
    let write_wc = Wc {
        wr_id: 0,
        status: WcStatus::SUCCESS,
        vendor_err: 0,
        opcode: WcOpcode::RECV_RDMA_WITH_IMM,
        byte_len: 0x1_0010,
        imm_data: 7,
        qp_num: 0x11,
        src_qp: 0x22,
        slid: 5,
        wc_flags: WcFlags::WITH_IMM,
        ..Wc::default()
    };
    assert_eq!(cur.wc(), write_wc);
    assert_eq!(
        cur.completion(),
        Completion {
            wc: write_wc,
            sgid: None,
            is_unsolicited: true,
        }
    );
    assert_eq!(
        (cur.status(), cur.opcode(), cur.wc_flags(), cur.imm_data()),
        (
            WcStatus::SUCCESS,
            WcOpcode::RECV_RDMA_WITH_IMM,
            WcFlags::WITH_IMM,
            7
        )
    );
    assert!(cur.is_unsolicited());
    assert!(cur.advance(&mut table[..]).unwrap());
    assert_eq!(cur.wr_id(), 0x77);
    assert_eq!(cur.opcode(), WcOpcode::RECV);
    assert_eq!(cur.byte_len(), 64);
    assert_eq!(cur.slid(), 0xffff);
    assert_eq!(cur.sgid(), Some(gid));
    assert_eq!(
        (cur.wc_flags(), cur.imm_data()),
        (WcFlags::empty(), 0),
        "no immediate"
    );
    assert!(!cur.is_unsolicited());
    assert_eq!(cur.completion().sgid, Some(gid));
    assert!(!cur.advance(&mut table[..]).unwrap());
    assert_eq!(r.db.word(), 0, "nothing rung before end_poll");
    drop(cur);
    assert_eq!(
        r.cq.db.as_ref().unwrap().log,
        [3],
        "one doorbell at end_poll"
    );
    assert_eq!((send_p.outstanding(), recv_p.outstanding()), (0, 0));
}

/// Every bad CQE `poll` refuses the cursor refuses too, consumed, with the same error; the
/// cursor stays on the last good completion and carries on after the bad one.
#[test]
fn cursor_reports_and_consumes_bad_cqes() {
    let mut r = rig(cfg(1, 8, 32, false), true);
    let (mut send_p, mut send) = WridPool::new(3, 0).unwrap();
    let good = post(&mut send_p, 1);
    let again = post(&mut send_p, 2);
    // As in `distrusts_cqe_contents`: 1 slot out of the pool, 2 never posted, 3 unknown QP,
    // 4 q_type 0, 5 generation bits, 6 double completion; then 7 good again.
    r.put(0, 0, &tx_cqe(good, 9, 0, EFA_IO_SEND, true));
    r.put(0, 1, &tx_cqe(3, 9, 0, EFA_IO_SEND, true));
    r.put(0, 2, &tx_cqe(2, 9, 0, EFA_IO_SEND, true));
    r.put(0, 3, &tx_cqe(good, 10, 0, EFA_IO_SEND, true));
    let mut bad_type = tx_cqe(good, 9, 0, EFA_IO_SEND, true);
    bad_type[3] = 0x01;
    r.put(0, 4, &bad_type);
    r.put(0, 5, &tx_cqe(0x8000, 9, 0, EFA_IO_SEND, true));
    r.put(0, 6, &tx_cqe(good, 9, 0, EFA_IO_SEND, true));
    r.put(0, 7, &tx_cqe(again, 9, 0, EFA_IO_SEND, true));
    let mut table = [QpEntry {
        qp_num: 9,
        send: Some(&mut send),
        recv: None,
    }];
    let problem = |e: EfaError| match e {
        EfaError::BadReqId { problem, .. } => Some(problem),
        _ => None,
    };
    let mut cur = r.cq.start_poll(&mut table[..]).unwrap().unwrap();
    assert_eq!(cur.wr_id(), 1);
    let e = cur.advance(&mut table[..]).unwrap_err();
    assert_eq!(
        (problem(e), e.errno()),
        (Some(ReqIdProblem::OutOfRange), EIO)
    );
    assert_eq!(cur.wr_id(), 1, "still on the good completion");
    assert_eq!(cur.qp_num(), 9);
    let e = cur.advance(&mut table[..]).unwrap_err();
    assert_eq!(problem(e), Some(ReqIdProblem::NotOutstanding));
    assert_eq!(
        cur.advance(&mut table[..]),
        Err(EfaError::UnknownQp {
            cqn: 3,
            qpn: 10,
            queue: QueueKind::Send
        })
    );
    assert!(matches!(
        cur.advance(&mut table[..]),
        Err(EfaError::BadCqe {
            flags: 0x01,
            sub_cq: 0,
            ..
        })
    ));
    let e = cur.advance(&mut table[..]).unwrap_err();
    assert_eq!(problem(e), Some(ReqIdProblem::StaleGeneration));
    let e = cur.advance(&mut table[..]).unwrap_err();
    assert_eq!(problem(e), Some(ReqIdProblem::NotOutstanding), "double");
    assert_eq!(cur.advance(&mut table[..]), Ok(true));
    assert_eq!(cur.wr_id(), 2);
    assert_eq!(cur.advance(&mut table[..]), Ok(false));
    drop(cur);
    assert_eq!(r.cq.consumer_counter(), 8, "bad CQEs are consumed too");
    assert_eq!(r.cq.db.as_ref().unwrap().log, [8]);
    assert_eq!(send_p.outstanding(), 0);

    // A bad first CQE: start_poll fails, the CQE is consumed and the doorbell says so.
    r.put(0, 0, &tx_cqe(0x8000, 9, 0, EFA_IO_SEND, false));
    let e = r.cq.start_poll(&mut table[..]).unwrap_err();
    assert_eq!(problem(e), Some(ReqIdProblem::StaleGeneration));
    assert_eq!(r.cq.consumer_counter(), 9);
    assert_eq!(r.cq.db.as_ref().unwrap().log, [8, 9]);
    // A receive completion for a QP without a receive queue is an unknown QP.
    r.put(0, 1, &rx_cqe(0, 9, false));
    assert!(matches!(
        r.cq.start_poll(&mut table[..]),
        Err(EfaError::UnknownQp {
            queue: QueueKind::Recv,
            ..
        })
    ));
}

#[test]
fn cursor_doorbell_only_at_end_and_only_when_consumed() {
    let c4 = cfg(2, 4, 16, false);
    let mut r = rig(c4, true);
    let (mut p, mut c) = WridPool::new(8, 0).unwrap();
    let mut table = [QpEntry {
        qp_num: 4,
        send: Some(&mut c),
        recv: None,
    }];
    // Empty: no cursor, no doorbell; an unpositioned cursor dropped rings nothing either.
    assert!(r.cq.start_poll(&mut table[..]).unwrap().is_none());
    drop(r.cq.poll_cursor());
    assert!(r.cq.db.as_ref().unwrap().log.is_empty());
    // The doorbell carries the event count (cmd_sn) as `poll`'s does, never the arm bit.
    r.cq.note_event();
    for i in 0..3u64 {
        let id = post(&mut p, i);
        r.put(1, i as usize, &tx_cqe(id, 4, 0, EFA_IO_SEND, true));
    }
    {
        let mut cur = r.cq.start_poll(&mut table[..]).unwrap().unwrap();
        assert_eq!(cur.wr_id(), 0);
        assert!(cur.advance(&mut table[..]).unwrap());
        // A CQE the device writes into the sub-CQ the cursor is on is taken in this poll.
        let id = post(&mut p, 3);
        write_cqe(&r.buf, &c4, 1, 3, &tx_cqe(id, 4, 0, EFA_IO_SEND, true));
        let mut seen = vec![cur.wr_id()];
        while cur.advance(&mut table[..]).unwrap() {
            seen.push(cur.wr_id());
        }
        assert_eq!(seen, [1, 2, 3]);
        // After `false`, a CQE that arrives is found by the next advance (every sub-CQ is
        // looked at again), even in a sub-CQ found empty before.
        let id = post(&mut p, 4);
        write_cqe(&r.buf, &c4, 0, 0, &tx_cqe(id, 4, 0, EFA_IO_SEND, true));
        assert!(cur.advance(&mut table[..]).unwrap());
        assert_eq!(cur.wr_id(), 4);
    }
    // cmd_sn 1 in bits 30:29, consumer counter 5, no arm.
    assert_eq!(r.cq.db.as_ref().unwrap().log, [0x2000_0000 | 5]);
    assert_eq!(r.db.word(), 0x2000_0005);
}

/// `poll_one_each` is `poll_into` of one slot: two queues fed the very same CQEs (three
/// sub-CQs, some rounds leaving some empty, wraps, sends and receives, CQEs of an unknown QP
/// and with a bad req_id among them), one drained one completion at a time by `poll`, the
/// other by `poll_one_each`, give the same results call by call (completions, errors and
/// their counts, empty polls), leave the same round-robin position and consumer counter, and
/// ring the same doorbell values.
#[test]
fn poll_one_each_is_poll_of_one() {
    for entry_size in [16u32, 32] {
        const DEPTH: u32 = 4;
        let c = cfg(3, DEPTH, entry_size, false);
        let (mut ra, mut rb) = (rig(c, true), rig(c, true));
        let (mut sp_a, mut sc_a) = WridPool::new(64, 0).unwrap();
        let (mut rp_a, mut rc_a) = WridPool::new(64, 0).unwrap();
        let (mut sp_b, mut sc_b) = WridPool::new(64, 0).unwrap();
        let (mut rp_b, mut rc_b) = WridPool::new(64, 0).unwrap();
        let mut produced = [0u32; 3];
        let mut rng = Rng(0x0bad_cafe_f00d_1234 ^ u64::from(entry_size));
        let (mut good, mut bad, mut empty) = (0, 0, 0);
        for round in 0..60u64 {
            let mut written = 0;
            for (sub, prod) in produced.iter_mut().enumerate() {
                for _ in 0..rng.below(u64::from(DEPTH) + 1) {
                    let recv = rng.below(2) == 0;
                    let wr_id = round << 16 | rng.below(1 << 16);
                    let kind = rng.below(8);
                    let (qp, req_id) = match kind {
                        // A QP the table does not know.
                        0 => (9, 0),
                        // A req_id of another generation: never outstanding.
                        1 => (7, 0x4000 | rng.below(64) as u16),
                        _ if recv => {
                            let (a, b) = (post(&mut rp_a, wr_id), post(&mut rp_b, wr_id));
                            assert_eq!(a, b);
                            (7, a)
                        }
                        _ => {
                            let (a, b) = (post(&mut sp_a, wr_id), post(&mut sp_b, wr_id));
                            assert_eq!(a, b);
                            (7, a)
                        }
                    };
                    let phase = (*prod / DEPTH) % 2 == 0;
                    let status = if rng.below(4) == 0 { 3 } else { 0 };
                    let bytes = any_cqe(
                        req_id,
                        qp,
                        recv,
                        status,
                        EFA_IO_SEND,
                        false,
                        false,
                        5,
                        phase,
                        rng.next() as u32,
                    );
                    let idx = (*prod % DEPTH) as usize;
                    ra.put(sub, idx, &bytes[..entry_size as usize]);
                    rb.put(sub, idx, &bytes[..entry_size as usize]);
                    *prod += 1;
                    written += 1;
                }
            }
            // One call more than there are CQEs: the last one (at least) finds nothing.
            for call in 0..=written {
                let mut ta = [QpEntry {
                    qp_num: 7,
                    send: Some(&mut sc_a),
                    recv: Some(&mut rc_a),
                }];
                let mut wa = [Completion::default(); 1];
                let a = ra.cq.poll(&mut wa, &mut ta[..]);
                let mut tb = [QpEntry {
                    qp_num: 7,
                    send: Some(&mut sc_b),
                    recv: Some(&mut rc_b),
                }];
                let mut wb = None;
                let b = rb.cq.poll_one_each(&mut tb[..], |w| {
                    assert!(wb.is_none(), "at most one completion");
                    wb = Some(*w);
                });
                assert_eq!(a, b, "round {round} call {call}");
                match a {
                    Ok(1) => {
                        good += 1;
                        assert_eq!(Some(wa[0]), wb, "round {round} call {call}");
                    }
                    Ok(0) => {
                        empty += 1;
                        assert_eq!(wb, None);
                    }
                    Ok(n) => panic!("{n} completions from a poll of one"),
                    Err(e) => {
                        bad += 1;
                        assert_eq!(e.polled, 0);
                        assert_eq!(wb, None);
                    }
                }
                ra.assert_same_position(&rb, &format!("round {round}"));
            }
            ra.assert_same_doorbells(&rb, "one doorbell per non-empty poll, same values");
        }
        assert!(
            produced.iter().all(|&p| p > 3 * DEPTH),
            "every sub-CQ wrapped more than three times: {produced:?}"
        );
        assert_eq!(sp_b.outstanding() + rp_b.outstanding(), 0);
        assert_eq!(sp_a.outstanding() + rp_a.outstanding(), 0);
        assert!(
            good > 100 && bad > 20 && empty >= 60,
            "{good} {bad} {empty}"
        );
    }
}

/// A [`QpLookup`] over a slice that finds cheaply only the QP it found last, as the core's
/// table does: [`QpLookup::find_cached`] misses for any other QP.
struct LastOnly<'t, 'p> {
    table: &'t mut [QpEntry<'p>],
    last: Option<u16>,
    hits: usize,
}

impl QpLookup for LastOnly<'_, '_> {
    fn find(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        let found = self.table.find(qp_num)?;
        self.last = Some(qp_num);
        Some(found)
    }

    fn find_cached(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        if self.last != Some(qp_num) {
            return None;
        }
        self.hits += 1;
        self.table.find(qp_num)
    }
}

/// `try_take`, falling back to `advance` when it says so, is `advance`: two queues fed the
/// same CQEs — one sub-CQ or three, both entry sizes, wraps, two QPs taking turns (so the
/// cheap lookup misses), a QP whose sends do not complete here, an unknown QP, req_ids of
/// another generation, unsolicited receives and bad queue types — give the same result at
/// every step, the same completion, and leave the same round robin, counter and doorbell.
#[test]
fn try_take_then_advance_is_advance() {
    let (mut landed, mut errors, mut fell_back, mut hits) = (0, 0, 0, 0);
    for (subs, entry_size) in [(1u16, 16u32), (1, 32), (3, 16), (3, 32)] {
        const DEPTH: u32 = 4;
        let c = cfg(subs, DEPTH, entry_size, false);
        let (mut ra, mut rb) = (rig(c, true), rig(c, true));
        // QP 7 (sends and receives) and QP 8 (receives only) on both sides.
        let mut pools: Vec<_> = (0..6).map(|_| WridPool::new(64, 0).unwrap()).collect();
        let mut produced = vec![0u32; usize::from(subs)];
        let mut rng = Rng(0x7a4e_0011_d00d_5eed ^ u64::from(entry_size) ^ u64::from(subs));
        for round in 0..60u64 {
            for (sub, prod) in produced.iter_mut().enumerate() {
                for _ in 0..rng.below(u64::from(DEPTH) + 1) {
                    let recv = rng.below(2) == 0;
                    let qp = if recv && rng.below(2) == 0 { 8 } else { 7 };
                    let kind = rng.below(10);
                    let unsolicited = recv && kind == 2;
                    let wr_id = round << 16 | rng.below(1 << 16);
                    let (req_id, qp) = match kind {
                        0 => (0, 9),                              // an unknown QP
                        1 => (0x4000 | rng.below(64) as u16, qp), // another generation
                        2 if recv => (rng.below(1 << 16) as u16, qp),
                        3 if !recv => (0, 8), // QP 8's sends are elsewhere
                        _ => {
                            // (QP 7: pools 0 send, 1 recv; QP 8: pool 2 recv; +3 for b.)
                            let i = if !recv {
                                0
                            } else if qp == 7 {
                                1
                            } else {
                                2
                            };
                            let a = post(&mut pools[i].0, wr_id);
                            assert_eq!(post(&mut pools[i + 3].0, wr_id), a);
                            (a, qp)
                        }
                    };
                    let mut bytes = any_cqe(
                        req_id,
                        qp,
                        recv,
                        if rng.below(4) == 0 { 3 } else { 0 },
                        EFA_IO_SEND,
                        false,
                        unsolicited,
                        5,
                        (*prod / DEPTH) % 2 == 0,
                        rng.next() as u32,
                    );
                    if kind == 4 {
                        // Queue type 0: neither queue.
                        bytes[3] &= !EFA_IO_CDESC_COMMON_Q_TYPE_MASK;
                    }
                    let idx = (*prod % DEPTH) as usize;
                    ra.put(sub, idx, &bytes[..entry_size as usize]);
                    rb.put(sub, idx, &bytes[..entry_size as usize]);
                    *prod += 1;
                }
            }
            let [(_, s7a), (_, r7a), (_, r8a), (_, s7b), (_, r7b), (_, r8b)] = &mut pools[..]
            else {
                unreachable!()
            };
            let mut ta = [
                QpEntry {
                    qp_num: 7,
                    send: Some(s7a),
                    recv: Some(r7a),
                },
                QpEntry {
                    qp_num: 8,
                    send: None,
                    recv: Some(r8a),
                },
            ];
            let mut tb = [
                QpEntry {
                    qp_num: 7,
                    send: Some(s7b),
                    recv: Some(r7b),
                },
                QpEntry {
                    qp_num: 8,
                    send: None,
                    recv: Some(r8b),
                },
            ];
            let mut lb = LastOnly {
                table: &mut tb[..],
                last: None,
                hits: 0,
            };
            {
                let mut ca = ra.cq.poll_cursor();
                let mut cb = rb.cq.poll_cursor();
                for step in 0.. {
                    let a = ca.advance(&mut ta[..]);
                    let b = match cb.try_take(&mut lb) {
                        Step::Landed => Ok(true),
                        Step::Empty => Ok(false),
                        Step::Advance => {
                            fell_back += 1;
                            cb.advance(&mut lb)
                        }
                    };
                    assert_eq!(a, b, "round {round} step {step}");
                    match a {
                        Ok(true) => {
                            landed += 1;
                            assert_eq!(ca.wc(), cb.wc(), "round {round} step {step}");
                        }
                        Ok(false) => break,
                        Err(_) => errors += 1,
                    }
                }
            }
            hits += lb.hits;
            ra.assert_same_position(&rb, &format!("round {round}"));
            ra.assert_same_doorbells(&rb, "the same doorbell values");
        }
        for i in 0..3 {
            assert_eq!(pools[i].0.outstanding(), pools[i + 3].0.outstanding());
        }
        assert!(produced.iter().all(|&p| p > 3 * DEPTH), "{produced:?}");
    }
    // Every path was taken, many times (the generator is fixed; this guards against a
    // change to it silently testing less).
    assert!(
        landed > 400 && errors > 200 && fell_back > 300 && hits > 50,
        "{landed} {errors} {fell_back} {hits}"
    );
}

/// `try_take`'s run is settled into the queue whenever the cursor stops: two queues fed the
/// same send CQEs (one sub-CQ or two, both entry sizes, many wraps), each drained in turns
/// of a few completions by a cursor dropped mid-run — one through `advance` only, the other
/// through `try_take` with `advance` as its fall-back — and now and then by a plain `poll`
/// in between, give the same completions and leave the same consumer counter, doorbell
/// values and sub-CQ positions after every turn. Leaving the run's CQEs out of the sub-CQ's
/// consumer index or phase, or of the CQ's counter, fails it.
#[test]
fn try_take_run_dropped_mid_run_is_advance() {
    let mut taken_cheaply = 0;
    for (subs, entry_size) in [(1u16, 16u32), (1, 32), (2, 16), (2, 32)] {
        const DEPTH: u32 = 8;
        let c = cfg(subs, DEPTH, entry_size, false);
        let (mut ra, mut rb) = (rig(c, true), rig(c, true));
        let (mut pa, mut ca) = WridPool::new(64, 0).unwrap();
        let (mut pb, mut cb) = WridPool::new(64, 0).unwrap();
        let (mut produced, mut consumed) = (0u32, 0u32);
        for turn in 0..40u32 {
            // The device fills the free slots of sub-CQ 0 (sub-CQ 1, if any, stays empty).
            while produced - consumed < DEPTH {
                let wr_id = u64::from(produced) << 8 | u64::from(turn);
                let (a, b) = (post(&mut pa, wr_id), post(&mut pb, wr_id));
                assert_eq!(a, b);
                let cqe = tx_cqe(a, 7, 0, EFA_IO_SEND, (produced / DEPTH) % 2 == 0);
                let idx = (produced % DEPTH) as usize;
                ra.put(0, idx, &cqe);
                rb.put(0, idx, &cqe);
                produced += 1;
            }
            let mut ta = [QpEntry {
                qp_num: 7,
                send: Some(&mut ca),
                recv: None,
            }];
            let mut tb = [QpEntry {
                qp_num: 7,
                send: Some(&mut cb),
                recv: None,
            }];
            let mut lb = LastOnly {
                table: &mut tb[..],
                last: None,
                hits: 0,
            };
            // 1 to 7 completions, so turns stop at every position of the run and the wrap.
            let want = 1 + turn * 3 % 7;
            {
                let mut cur_a = ra.cq.poll_cursor();
                let mut cur_b = rb.cq.poll_cursor();
                for step in 0..want {
                    let a = cur_a.advance(&mut ta[..]);
                    let b = match cur_b.try_take(&mut lb) {
                        Step::Landed => {
                            taken_cheaply += 1;
                            Ok(true)
                        }
                        Step::Empty => Ok(false),
                        Step::Advance => cur_b.advance(&mut lb),
                    };
                    assert_eq!(a, b, "turn {turn} step {step}");
                    assert_eq!(a, Ok(true), "turn {turn} step {step}");
                    assert_eq!(cur_a.wr_id(), cur_b.wr_id(), "turn {turn} step {step}");
                    consumed += 1;
                }
            }
            if turn % 3 == 2 {
                // A plain poll in between starts where the cursors stopped.
                let (mut wa, mut wb) = ([Completion::default(); 2], [Completion::default(); 2]);
                let na = ra.cq.poll(&mut wa, &mut ta[..]).unwrap();
                let nb = rb.cq.poll(&mut wb, &mut tb[..]).unwrap();
                assert_eq!((na, wa), (nb, wb), "turn {turn}");
                // (At least one CQE is left: the turn took at most 7 of the 8.)
                assert_eq!(na as u32, (produced - consumed).min(2));
                consumed += na as u32;
            }
            assert_eq!(ra.cq.consumer_counter(), consumed as u16, "turn {turn}");
            assert_eq!(rb.cq.consumer_counter(), consumed as u16, "turn {turn}");
            for (sa, sb) in ra.cq.subs.iter().zip(rb.cq.subs.iter()) {
                assert_eq!(
                    (sa.consumed, sa.phase),
                    (sb.consumed, sb.phase),
                    "turn {turn}"
                );
            }
            ra.assert_same_doorbells(&rb, &format!("turn {turn}"));
        }
        assert!(consumed > 4 * DEPTH, "{consumed}: several wraps");
        assert_eq!(pa.outstanding(), pb.outstanding());
    }
    assert!(taken_cheaply > 100, "{taken_cheaply}");
}

/// `poll_one_fast`, finished by `poll_one_finish` when it leaves the CQE, is
/// `poll_one_each`: two queues fed the same CQEs — one sub-CQ or three, both entry sizes,
/// wraps, QPs taking turns (so the cheap lookup misses), a QP with 64-bit request ids, a QP
/// whose sends do not complete here, an unknown QP, req_ids of another generation, receives
/// (unsolicited too), bad queue types, error statuses — one polled by `poll_one_each`, the
/// other by the fast path, give the same result and completion call by call, and leave the
/// same round robin, consumer counter, doorbell log and outstanding requests.
#[test]
fn poll_one_fast_then_finish_is_poll_one_each() {
    let (mut took, mut finished, mut errors, mut empty) = (0, 0, 0, 0);
    for (subs, entry_size) in [(1u16, 16u32), (1, 32), (3, 16), (3, 32)] {
        const DEPTH: u32 = 4;
        let c = cfg(subs, DEPTH, entry_size, false);
        let (mut ra, mut rb) = (rig(c, true), rig(c, true));
        // QP 7 (sends and receives), QP 8 (receives only), QP 10 (sends, 64-bit ids), on
        // both sides: pools 0..4 for a, 4..8 for b.
        let mut pools: Vec<_> = (0..8)
            .map(|i| match i % 4 {
                3 => WridPool::new_64bit(64).unwrap(),
                _ => WridPool::new(64, 0).unwrap(),
            })
            .collect();
        let mut produced = vec![0u32; usize::from(subs)];
        let mut rng = Rng(0x51de_0ace_0f0e_beef ^ u64::from(entry_size) ^ u64::from(subs));
        for round in 0..60u64 {
            let mut written = 0;
            for (sub, prod) in produced.iter_mut().enumerate() {
                for _ in 0..rng.below(u64::from(DEPTH) + 1) {
                    let recv = rng.below(2) == 0;
                    let qp = match rng.below(3) {
                        0 if recv => 8,
                        0 => 10,
                        _ => 7,
                    };
                    let kind = rng.below(12);
                    let unsolicited = recv && kind == 2;
                    let wr_id = round << 16 | rng.below(1 << 16);
                    let (req_id, qp) = match kind {
                        0 => (0, 9),                              // an unknown QP
                        1 => (0x4000 | rng.below(64) as u16, qp), // another generation
                        2 if recv => (rng.below(1 << 16) as u16, qp),
                        3 if !recv => (0, 8), // QP 8's sends are elsewhere
                        _ => {
                            let i = match (recv, qp) {
                                (false, 7) => 0,
                                (true, 7) => 1,
                                (true, _) => 2,
                                (false, _) => 3,
                            };
                            let a = post(&mut pools[i].0, wr_id);
                            assert_eq!(post(&mut pools[i + 4].0, wr_id), a);
                            (a, qp)
                        }
                    };
                    let mut bytes = any_cqe(
                        req_id,
                        qp,
                        recv,
                        if rng.below(4) == 0 { 3 } else { 0 },
                        if rng.below(3) == 0 {
                            EFA_IO_RDMA_WRITE
                        } else {
                            EFA_IO_SEND
                        },
                        rng.below(2) == 0,
                        unsolicited,
                        5,
                        (*prod / DEPTH) % 2 == 0,
                        rng.next() as u32,
                    );
                    if kind == 4 {
                        // Queue type 0: neither queue.
                        bytes[3] &= !EFA_IO_CDESC_COMMON_Q_TYPE_MASK;
                    }
                    let idx = (*prod % DEPTH) as usize;
                    ra.put(sub, idx, &bytes[..entry_size as usize]);
                    rb.put(sub, idx, &bytes[..entry_size as usize]);
                    *prod += 1;
                    written += 1;
                }
            }
            let [(_, s7a), (_, r7a), (_, r8a), (_, s10a), (_, s7b), (_, r7b), (_, r8b), (_, s10b)] =
                &mut pools[..]
            else {
                unreachable!()
            };
            let mut ta = [
                QpEntry {
                    qp_num: 7,
                    send: Some(s7a),
                    recv: Some(r7a),
                },
                QpEntry {
                    qp_num: 8,
                    send: None,
                    recv: Some(r8a),
                },
                QpEntry {
                    qp_num: 10,
                    send: Some(s10a),
                    recv: None,
                },
            ];
            let mut tb = [
                QpEntry {
                    qp_num: 7,
                    send: Some(s7b),
                    recv: Some(r7b),
                },
                QpEntry {
                    qp_num: 8,
                    send: None,
                    recv: Some(r8b),
                },
                QpEntry {
                    qp_num: 10,
                    send: Some(s10b),
                    recv: None,
                },
            ];
            let mut la = LastOnly {
                table: &mut ta[..],
                last: None,
                hits: 0,
            };
            let mut lb = LastOnly {
                table: &mut tb[..],
                last: None,
                hits: 0,
            };
            // One call more than there are CQEs: the last one (at least) finds nothing.
            for call in 0..=written {
                let mut wa = None;
                let a = ra.cq.poll_one_each(&mut la, |w| {
                    assert!(wa.is_none(), "at most one completion");
                    wa = Some(*w);
                });
                let mut wb = None;
                let b = match rb.cq.poll_one_fast(&mut lb, |w| wb = Some(*w)) {
                    OneStep::Took => {
                        took += 1;
                        Ok(1)
                    }
                    OneStep::Empty => Ok(0),
                    OneStep::Slow(t) => {
                        assert_eq!(wb, None, "nothing handed out before the finish");
                        finished += 1;
                        rb.cq.poll_one_finish(t, &mut lb, |w| {
                            assert!(wb.is_none(), "at most one completion");
                            wb = Some(*w);
                        })
                    }
                };
                assert_eq!(a, b, "round {round} call {call}");
                assert_eq!(wa, wb, "round {round} call {call}");
                match a {
                    Ok(0) => empty += 1,
                    Ok(_) => {}
                    Err(_) => errors += 1,
                }
                assert_eq!(la.last, lb.last, "the same QP found last");
                ra.assert_same_position(&rb, &format!("round {round}"));
            }
            ra.assert_same_doorbells(&rb, "the same doorbell values");
        }
        for i in 0..4 {
            assert_eq!(pools[i].0.outstanding(), pools[i + 4].0.outstanding());
        }
        assert!(produced.iter().all(|&p| p > 3 * DEPTH), "{produced:?}");
    }
    // Every path was taken, many times (the generator is fixed; this guards against a
    // change to it silently testing less).
    assert!(
        took > 80 && finished > 600 && errors > 200 && empty >= 240,
        "{took} {finished} {errors} {empty}"
    );
}

/// A slice lookup that visits only the sub-CQs of `mask` and records those found empty.
struct Masked<'t, 'p> {
    t: &'t mut [QpEntry<'p>],
    mask: u64,
    empty: Vec<u16>,
}

impl QpLookup for Masked<'_, '_> {
    fn find(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        self.t.find(qp_num)
    }
    fn sub_cqs(&mut self) -> u64 {
        self.mask
    }
    fn sub_cq_empty(&mut self, idx: u16) {
        self.empty.push(idx);
    }
}

/// Every poll (`poll`, `poll_one_each`, the cursor) looks only at the sub-CQs the lookup
/// names (`QpLookup::sub_cqs`, libefa's `ref_cnt`): with CQEs in sub-CQs 1 and 2 and sub-CQ
/// 1 not named, it gives exactly what it gives when sub-CQ 1 is empty — the same
/// completions in the same order, the same round-robin position, consumer counter and
/// doorbell — and never consumes sub-CQ 1's CQEs. It reports the sub-CQs it found empty
/// (only named ones). A lookup that names none makes a poll that looks at nothing.
#[test]
fn a_poll_visits_only_the_lookups_sub_cqs() {
    for method in 0..3 {
        let c = cfg(3, 4, 16, false);
        let (mut ra, mut rb) = (rig(c, true), rig(c, true));
        let (mut sp_a, mut sc_a) = WridPool::new(16, 0).unwrap();
        let (mut sp_b, mut sc_b) = WridPool::new(16, 0).unwrap();
        for i in 0..3 {
            let (a, b) = (post(&mut sp_a, 10 + i), post(&mut sp_b, 10 + i));
            assert_eq!(a, b);
            let cqe = tx_cqe(a, 7, 0, EFA_IO_SEND, true);
            ra.put(2, i as usize, &cqe);
            rb.put(2, i as usize, &cqe);
            // Sub-CQ 1 of `ra` only: a CQE of an unknown QP, which a visit would consume.
            ra.put(1, i as usize, &tx_cqe(0, 9, 0, EFA_IO_SEND, true));
        }
        ra.cq.next_poll_idx = 1;
        rb.cq.next_poll_idx = 1;
        let mut ta = [QpEntry {
            qp_num: 7,
            send: Some(&mut sc_a),
            recv: None,
        }];
        let mut tb = [QpEntry {
            qp_num: 7,
            send: Some(&mut sc_b),
            recv: None,
        }];
        let mut la = Masked {
            t: &mut ta[..],
            mask: 0b101,
            empty: Vec::new(),
        };
        let mut lb = Masked {
            t: &mut tb[..],
            mask: u64::MAX,
            empty: Vec::new(),
        };
        let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            match method {
                0 => {
                    let (mut wa, mut wb) = ([Completion::default(); 2], [Completion::default(); 2]);
                    let (a, b) = (ra.cq.poll(&mut wa, &mut la), rb.cq.poll(&mut wb, &mut lb));
                    assert_eq!(a, b);
                    got_a.extend_from_slice(&wa[..a.unwrap()]);
                    got_b.extend_from_slice(&wb[..b.unwrap()]);
                }
                1 => {
                    let a = ra.cq.poll_one_each(&mut la, |w| got_a.push(*w));
                    let b = rb.cq.poll_one_each(&mut lb, |w| got_b.push(*w));
                    assert_eq!(a, b);
                }
                _ => {
                    for (cq, l, got) in [
                        (&mut ra.cq, &mut la, &mut got_a),
                        (&mut rb.cq, &mut lb, &mut got_b),
                    ] {
                        let mut k = cq.poll_cursor();
                        while k.advance(l).unwrap() {
                            got.push(k.completion());
                        }
                    }
                }
            }
            ra.assert_same_position(&rb, &format!("method {method}"));
            assert_eq!(ra.db.word(), rb.db.word());
        }
        assert_eq!(got_a, got_b, "method {method}");
        let ids: Vec<u64> = got_a.iter().map(|w| w.wc.wr_id).collect();
        assert_eq!(ids, [10, 11, 12], "method {method}");
        assert_eq!(ra.cq.subs[1].consumed, 0, "sub-CQ 1 was never visited");
        assert!(!la.empty.contains(&1), "method {method}: {:?}", la.empty);
        assert!(la.empty.contains(&2), "method {method}: {:?}", la.empty);
        assert!(lb.empty.contains(&1), "method {method}: {:?}", lb.empty);
        // Nothing named: nothing looked at, the round robin where it was.
        la.mask = 0;
        la.empty.clear();
        let at = ra.cq.next_poll_idx;
        let mut w = [Completion::default(); 2];
        assert_eq!(ra.cq.poll(&mut w, &mut la), Ok(0));
        assert_eq!(
            ra.cq.poll_one_each(&mut la, |_| panic!("a completion")),
            Ok(0)
        );
        assert!(!ra.cq.poll_cursor().advance(&mut la).unwrap());
        assert_eq!(ra.cq.next_poll_idx, at);
        assert!(la.empty.is_empty());
        assert_eq!(ra.cq.subs[1].consumed, 0);
    }
}
