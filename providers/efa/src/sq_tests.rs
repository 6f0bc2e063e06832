//! SQ tests against heap memory standing in for the LLQ and the doorbell page.

use super::*;
use crate::error::{EINVAL, ENOMEM, EOPNOTSUPP};
use crate::testmem::{ah, Mem, TestAh, PD};
use crate::wrid::WridCompleter;

/// A send work request to [`TestAh`]s.
type TWr<'a> = SendWr<'a, TestAh>;

/// Where a test sends: an AH, the remote QP number and Q_Key.
#[derive(Clone, Copy, Debug)]
struct To {
    ah: TestAh,
    qpn: u32,
    qkey: u32,
}

const DEST: To = To {
    ah: ah(0x0102),
    qpn: 0x0304,
    qkey: 0x0506_0708,
};

/// A WR of `op` to `to`, no data, not signaled.
fn wr(wr_id: u64, op: WrOp, to: &To) -> TWr<'_> {
    SendWr::new(wr_id, op).ud(&to.ah, to.qpn, to.qkey)
}

/// `IBV_WR_SEND` to `to`.
fn send(wr_id: u64, to: &To) -> TWr<'_> {
    wr(wr_id, WrOp::Send, to)
}

/// `IBV_WR_SEND_WITH_IMM` to `to`.
fn send_imm(wr_id: u64, to: &To, imm_data: u32) -> TWr<'_> {
    wr(wr_id, WrOp::SendWithImm { imm_data }, to)
}

/// `IBV_WR_RDMA_READ` through `to`.
fn rdma_read(wr_id: u64, to: &To, rkey: u32, remote_addr: u64) -> TWr<'_> {
    wr(wr_id, WrOp::RdmaRead { rkey, remote_addr }, to)
}

/// `IBV_WR_RDMA_WRITE` through `to`.
fn rdma_write(wr_id: u64, to: &To, rkey: u32, remote_addr: u64) -> TWr<'_> {
    wr(wr_id, WrOp::RdmaWrite { rkey, remote_addr }, to)
}

/// `IBV_WR_RDMA_WRITE_WITH_IMM` through `to`.
fn rdma_write_imm(wr_id: u64, to: &To, rkey: u32, remote_addr: u64, imm_data: u32) -> TWr<'_> {
    let op = WrOp::RdmaWriteWithImm {
        rkey,
        remote_addr,
        imm_data,
    };
    wr(wr_id, op, to)
}

/// `wr` as `build_wqe` (the field-by-field reference layout) takes it: its destination as the
/// test's AH names it, its data as the WQE carries it, and `hints` (which only the `wr_*`
/// builder sets).
fn resolved<'w>(wr: &'w TWr<'_>, hints: u8) -> Wr<'w> {
    let ud = wr.ud.as_ref().expect("a test WR has a destination");
    Wr {
        wr_id: wr.wr_id,
        op: wr.op,
        dest: Dest {
            ah: ud.ah().num as u16,
            remote_qpn: ud.remote_qpn,
            remote_qkey: ud.remote_qkey,
        },
        payload: match &wr.data {
            WrData::Sge(s) => Payload::Sge(s),
            WrData::Inline(d) => Payload::Inline(core::slice::from_ref(d)),
        },
        signaled: wr.is_signaled(),
        processing_hints: hints,
    }
}

/// The WQE `post_send` must write for `wr` (no processing hints).
fn expected_wqe(wr: &TWr<'_>, req_id: u16, phase: bool) -> EfaIoTxWqe128 {
    build_wqe(&resolved(wr, 0), req_id, phase)
}

fn cfg(depth: u32, wqe_size: u32) -> SqConfig {
    SqConfig {
        qp_num: 7,
        qp_type: QpType::Srd,
        domain: PD,
        sq_sig_all: false,
        processing_hints: false,
        depth,
        wqe_size,
        max_send_sge: 2,
        max_rdma_sge: 1,
        max_inline_data: if wqe_size == 128 { 80 } else { 32 },
        inline_write: wqe_size == 128,
        max_tx_batch: 0,
        min_sq_wr: 0,
        caps: DeviceCaps {
            device_caps: EFA_QUERY_DEVICE_CAPS_RDMA_READ | EFA_QUERY_DEVICE_CAPS_RDMA_WRITE,
            max_rdma_size: 1 << 20,
        },
        gen: 0,
        req_id_64: false,
    }
}

/// Fields drop in declaration order: the queue goes before the memory it points into.
struct Rig {
    done: WridCompleter,
    sq: SendQueue,
    desc: Mem,
    db: Mem,
}

fn rig(c: SqConfig) -> Rig {
    let desc = Mem::new(c.sq_ring_size() as usize);
    let db = Mem::new(4);
    // SAFETY: both regions are heap allocations of the needed sizes that `Rig` keeps alive
    // until after the queue is dropped (field order); only this thread touches them.
    let mut sq = unsafe { SendQueue::new(c, desc.ptr(), desc.len(), db.u32_ptr()) }.unwrap();
    let done = sq.take_completer().unwrap();
    Rig { done, sq, desc, db }
}

fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge { addr, length, lkey }
}

/// What the mixed-list tests post: two SGEs (full-width fields, the top lkey byte set), a
/// UD address with every field non-zero, and 9 bytes of inline data.
const MIXED_SGES: [Sge; 2] = [
    Sge {
        addr: 0x1122_3344_5566_7788,
        length: 0x8000_0001,
        lkey: 0xffab_cdef,
    },
    Sge {
        addr: 0x99aa_bbcc_ddee_ff00,
        length: 7,
        lkey: 0x12_3456,
    },
];
const MIXED_DEST: To = To {
    ah: ah(0xfedc),
    qpn: 0xffff,
    qkey: 0x8765_4321,
};
const MIXED_INLINE: [u8; 9] = [0x5a; 9];

#[test]
fn golden_send_imm_64() {
    let mut r = rig(cfg(4, 64));
    let sg = [sge(0x1122_3344_5566_7788, 0x100, 0xab_cdef)];
    let wr = send_imm(0xdead, &DEST, 0x1122_3344).sge(&sg).signaled();
    assert_eq!(r.sq.post_send(&[wr]), Ok(1));
    #[rustfmt::skip]
    let expected: [u8; 64] = [
        // req_id: first slot of a generation-0 pool -> 0
        0x00, 0x00,
        // ctrl1: op_type SEND (0) in 3:0 | has_imm BIT(4)=0x10 | meta_desc BIT(7)=0x80
        0x90,
        // ctrl2: phase 0 | first BIT(2)=0x04 | last BIT(3)=0x08 | comp_req BIT(4)=0x10
        0x1c,
        // dest_qp_num 0x0304 LE
        0x04, 0x03,
        // length: 1 buffer descriptor
        0x01, 0x00,
        // immediate_data 0x11223344 LE
        0x44, 0x33, 0x22, 0x11,
        // ah 0x0102 LE, ctrl3 0, reserved 0
        0x02, 0x01, 0x00, 0x00,
        // qkey 0x05060708 LE
        0x08, 0x07, 0x06, 0x05,
        // reserved2[6], req_id_ex[3] = 0
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        // sgl[0].length 0x100
        0x00, 0x01, 0x00, 0x00,
        // sgl[0].lkey 0xabcdef in 23:0
        0xef, 0xcd, 0xab, 0x00,
        // buf_addr_lo 0x55667788, buf_addr_hi 0x11223344
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        // sgl[1] unused
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(r.desc.read(0, 64), expected);
    assert_eq!(r.sq.db.log, [1], "one doorbell carrying producer counter 1");
    assert_eq!(r.db.word(), 1);
    // The same bytes decode through the 64-byte WQE type a device model would use.
    let w = <EfaIoTxWqe as zerocopy::FromBytes>::read_from_bytes(&expected[..]).unwrap();
    assert_eq!(w.sgl()[0].buf_addr(), 0x1122_3344_5566_7788);
    assert_eq!(w.sgl()[0].lkey_value(), 0xab_cdef);
    assert!(w.meta.has_imm() && w.meta.meta_desc() && w.meta.comp_req());
}

#[test]
fn golden_inline_rdma_write_128() {
    let mut c = cfg(4, 128);
    c.gen = 3;
    let mut r = rig(c);
    let wr = rdma_write(1, &DEST, 0x99, 0x1_0000_0002)
        .inline(b"hello!!")
        .signaled();
    assert_eq!(r.sq.post_send(&[wr]), Ok(1));
    let got = r.desc.read(0, 128);
    #[rustfmt::skip]
    let meta: [u8; 32] = [
        // req_id: generation 3 above 2 index bits (depth 4) -> 3 << 2 | slot 0 = 0x0c
        0x0c, 0x00,
        // ctrl1: op_type RDMA_WRITE (2) | inline_msg BIT(5)=0x20 | meta_desc 0x80
        0xa2,
        // ctrl2: first | last | comp_req, phase 0
        0x1c,
        0x04, 0x03,
        // length: 7 inline bytes
        0x07, 0x00,
        0, 0, 0, 0,
        0x02, 0x01, 0x00, 0x00,
        0x08, 0x07, 0x06, 0x05,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(got[..32], meta);
    #[rustfmt::skip]
    let remote: [u8; 16] = [
        // remote_mem.length = inline length 7, rkey 0x99, addr lo 2, addr hi 1
        0x07, 0, 0, 0, 0x99, 0, 0, 0, 0x02, 0, 0, 0, 0x01, 0, 0, 0,
    ];
    assert_eq!(got[32..48], remote);
    // rdma_req_128.inline_data starts right after remote_mem
    assert_eq!(&got[48..55], b"hello!!");
    assert!(got[55..].iter().all(|&b| b == 0));
}

/// An RDMA read through `post_send`, then the same through the `wr_*` builder with the
/// processing hint BURST_PPS_SENSITIVE (which only the builder sets): the same bytes but
/// ctrl3.
#[test]
fn golden_rdma_read_64() {
    let mut c = cfg(4, 64);
    c.processing_hints = true;
    let mut r = rig(c);
    let sg = [sge(0xaaaa_0000, 4096, 0x12)];
    let wr = rdma_read(9, &DEST, 0x77, 0x2000).sge(&sg).signaled();
    r.sq.post_send(&[wr]).unwrap();
    let got = r.desc.read(0, 64);
    golden_rdma_read_bytes(&got, 0);

    r.sq.wr_start().unwrap();
    r.sq.wr_op(9, SendFlags::SIGNALED, wr.op).unwrap();
    r.sq.wr_set_sge_list(&sg).unwrap();
    r.sq.wr_set_ud_addr(UdDest::new(&DEST.ah, DEST.qpn, DEST.qkey))
        .unwrap();
    r.sq.wr_set_processing_hints(EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE)
        .unwrap();
    assert_eq!(r.sq.wr_complete(), Ok(1));
    let got = r.desc.read(64, 64);
    golden_rdma_read_bytes(&got, 1);
    assert_eq!(r.sq.db.log, [1, 2]);
}

/// The WQE of `golden_rdma_read_64` (`ctrl3`: the processing hints).
fn golden_rdma_read_bytes(got: &[u8], ctrl3: u8) {
    // ctrl1: op_type RDMA_READ (1) | meta_desc 0x80
    assert_eq!(got[2], 0x81);
    // ctrl3: processing_hints (BURST_PPS_SENSITIVE is 1) in 1:0
    assert_eq!(got[14], ctrl3);
    // length: 1 local buffer
    assert_eq!(got[6..8], [1, 0]);
    // remote_mem: length = sum of SGEs 4096 = 0x1000, rkey 0x77, addr 0x2000
    assert_eq!(
        got[32..48],
        [0, 0x10, 0, 0, 0x77, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0]
    );
    // local_mem[0]: length 0x1000, lkey 0x12, addr 0xaaaa0000
    assert_eq!(
        got[48..64],
        [0, 0x10, 0, 0, 0x12, 0, 0, 0, 0, 0, 0xaa, 0xaa, 0, 0, 0, 0]
    );
}

/// Reads the req_id and phase of the WQE in `slot`, as a device would.
fn wqe_at(r: &Rig, slot: usize, size: usize) -> (u16, bool) {
    let b = r.desc.read(slot * size, 4);
    (u16::from_le_bytes([b[0], b[1]]), b[3] & 1 == 1)
}

#[test]
fn wraps_flip_phase() {
    let mut r = rig(cfg(4, 64));
    let sg = [sge(0x1000, 8, 1)];
    for k in 0..14u64 {
        let wr = send(k, &DEST).sge(&sg).signaled();
        assert_eq!(r.sq.post_send(&[wr]), Ok(1), "post {k}");
        let slot = (k % 4) as usize;
        let (req_id, phase) = wqe_at(&r, slot, 64);
        assert_eq!(
            phase,
            (k / 4) % 2 == 1,
            "phase of post {k} (wrap {})",
            k / 4
        );
        assert_eq!(r.sq.db.log.last(), Some(&(k as u32 + 1)));
        // Complete it as the CQ would, with the req_id the device saw.
        assert_eq!(r.done.complete(req_id), Ok(k));
    }
    assert_eq!(r.sq.db.log.len(), 14);
}

#[test]
fn batch_wrapping_the_ring_end() {
    let mut r = rig(cfg(4, 64));
    let sg = [sge(0x1000, 8, 1)];
    let wrs: Vec<_> = (0..3).map(|i| send(i, &DEST).sge(&sg).signaled()).collect();
    r.sq.post_send(&wrs).unwrap();
    for s in 0..3 {
        let (id, _) = wqe_at(&r, s, 64);
        r.done.complete(id).unwrap();
    }
    let wrs: Vec<_> = (10..13)
        .map(|i| send(i, &DEST).sge(&sg).signaled())
        .collect();
    r.sq.post_send(&wrs).unwrap();
    // slot 3 is still in pass 0, slots 0 and 1 are pass 1
    assert!(!wqe_at(&r, 3, 64).1);
    assert!(wqe_at(&r, 0, 64).1);
    assert!(wqe_at(&r, 1, 64).1);
    assert!(!wqe_at(&r, 2, 64).1, "slot 2 untouched since pass 0");
    assert_eq!(r.sq.db.log, [3, 6]);
}

#[test]
fn doorbell_batching_limit() {
    // max_tx_batch 2 (x 64 bytes) with 64-byte WQEs: a doorbell every 2 WQEs.
    let mut c = cfg(16, 64);
    c.max_tx_batch = 2;
    let mut r = rig(c);
    let sg = [sge(0x1000, 8, 1)];
    let wrs: Vec<_> = (0..5).map(|i| send(i, &DEST).sge(&sg).signaled()).collect();
    assert_eq!(r.sq.post_send(&wrs), Ok(5));
    assert_eq!(r.sq.db.log, [2, 4, 5]);
    assert_eq!(
        r.db.word(),
        5,
        "the register holds the last producer counter"
    );

    // Same batch limit with 128-byte WQEs: one WQE per doorbell.
    let mut c = cfg(16, 128);
    c.max_tx_batch = 2;
    let mut r = rig(c);
    assert_eq!(r.sq.post_send(&wrs[..3]), Ok(3));
    assert_eq!(r.sq.db.log, [1, 2, 3]);

    // min_sq_wr set: never a doorbell for the whole SQ at once (batch <= depth - 1).
    let mut c = cfg(4, 64);
    c.min_sq_wr = 1;
    let mut r = rig(c);
    assert_eq!(r.sq.post_send(&wrs[..4]), Ok(4));
    assert_eq!(r.sq.db.log, [3, 4]);
}

#[test]
fn unsignaled_rejected_before_device() {
    let mut r = rig(cfg(4, 64));
    let wr = send(1, &DEST);
    let e = r.sq.post_send(&[wr]).unwrap_err();
    assert_eq!(e.index, 0);
    assert_eq!(e.error, EfaError::Unsignaled { qpn: 7 });
    assert_eq!(e.error.errno(), EINVAL);
    assert!(r.desc.read(0, 256).iter().all(|&b| b == 0));
    assert!(r.sq.db.log.is_empty());
    assert_eq!(r.sq.pool().outstanding(), 0);
}

#[test]
fn inline_and_sge_limits() {
    let mut r = rig(cfg(4, 64));
    let long = [0u8; 33];
    let e =
        r.sq.post_send(&[send(1, &DEST).inline(&long).signaled()])
            .unwrap_err();
    assert_eq!(
        e.error,
        EfaError::InlineTooLong {
            qpn: 7,
            len: 33,
            max: 32
        }
    );
    let sg = [sge(0, 1, 1); 3];
    let e =
        r.sq.post_send(&[send(1, &DEST).sge(&sg).signaled()])
            .unwrap_err();
    assert!(matches!(
        e.error,
        EfaError::TooManySge {
            num_sge: 3,
            max_sge: 2,
            ..
        }
    ));
    let e =
        r.sq.post_send(&[rdma_write(1, &DEST, 1, 0).sge(&sg[..2]).signaled()])
            .unwrap_err();
    assert!(matches!(
        e.error,
        EfaError::TooManySge {
            num_sge: 2,
            max_sge: 1,
            ..
        }
    ));
    // 64-byte WQEs have no inline RDMA write; RDMA read never carries inline data.
    let e =
        r.sq.post_send(&[rdma_write(1, &DEST, 1, 0).inline(b"x").signaled()])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::InlineNotSupported { .. }));
    let e =
        r.sq.post_send(&[rdma_read(1, &DEST, 1, 0).inline(b"x").signaled()])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::InlineNotSupported { .. }));
    let big = [sge(0, 2 << 20, 1)];
    let e =
        r.sq.post_send(&[rdma_read(1, &DEST, 1, 0).sge(&big).signaled()])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::RdmaTooLong { .. }));
    let e =
        r.sq.post_send(&[send(
            1,
            &To {
                qpn: 0x1_0000,
                ..DEST
            },
        )
        .signaled()])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::BadRemoteQpn { .. }));
    assert!(r.sq.db.log.is_empty());
    assert!(r.desc.read(0, 256).iter().all(|&b| b == 0));
}

#[test]
fn rdma_needs_caps_and_srd() {
    let mut c = cfg(4, 64);
    c.caps.device_caps = EFA_QUERY_DEVICE_CAPS_RDMA_READ;
    let mut r = rig(c);
    let sg = [sge(0, 8, 1)];
    let e =
        r.sq.post_send(&[rdma_write_imm(1, &DEST, 1, 0, 5).sge(&sg).signaled()])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::OpNotSupported { .. }));
    assert_eq!(e.error.errno(), EOPNOTSUPP);
    assert_eq!(
        r.sq.post_send(&[rdma_read(1, &DEST, 1, 0).sge(&sg).signaled()]),
        Ok(1)
    );

    let mut c = cfg(4, 64);
    c.qp_type = QpType::Ud;
    let mut r = rig(c);
    let e =
        r.sq.post_send(&[rdma_read(1, &DEST, 1, 0).sge(&sg).signaled()])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::OpNotSupported { .. }));
}

/// The shared vocabulary has operations EFA lacks (atomics, memory windows, invalidation):
/// each is refused by name before anything reaches the LLQ.
#[test]
fn operations_efa_lacks_are_refused() {
    let mut c = cfg(4, 64);
    c.caps.device_caps = EFA_QUERY_DEVICE_CAPS_RDMA_READ | EFA_QUERY_DEVICE_CAPS_RDMA_WRITE;
    let mut r = rig(c);
    let eight = [sge(0, 8, 1)];
    let ops = [
        (WrOp::SendWithInv { invalidate_rkey: 3 }, "SEND_WITH_INV"),
        (
            WrOp::AtomicCmpAndSwp {
                remote_addr: 0,
                rkey: 1,
                compare: 0,
                swap: 1,
            },
            "ATOMIC_CMP_AND_SWP",
        ),
        (
            WrOp::AtomicFetchAndAdd {
                remote_addr: 0,
                rkey: 1,
                add: 1,
            },
            "ATOMIC_FETCH_AND_ADD",
        ),
        (WrOp::LocalInv { invalidate_rkey: 3 }, "LOCAL_INV"),
        (
            WrOp::BindMw {
                mw_rkey: 1,
                new_rkey: 2,
                mr_lkey: 1,
                addr: 0,
                length: 8,
                access: uverbs_wr::AccessFlags::REMOTE_READ,
            },
            "BIND_MW",
        ),
    ];
    for (op, name) in ops {
        let e =
            r.sq.post_send(&[wr(1, op, &DEST).sge(&eight).signaled()])
                .unwrap_err();
        assert_eq!(e.index, 0);
        match e.error {
            EfaError::OpNotSupported { op, .. } => assert_eq!(op, name),
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(e.error.errno(), EOPNOTSUPP);
    }
    assert!(r.sq.db.log.is_empty());
    assert!(r.desc.read(0, 256).iter().all(|&b| b == 0));
}

#[test]
fn queue_full_posts_prefix() {
    let mut r = rig(cfg(2, 64));
    let wrs: Vec<_> = (0..3).map(|i| send(i, &DEST).signaled()).collect();
    let e = r.sq.post_send(&wrs).unwrap_err();
    assert_eq!(e.index, 2);
    assert_eq!(
        e.error,
        EfaError::QueueFull {
            qpn: 7,
            queue: QueueKind::Send,
            depth: 2
        }
    );
    assert_eq!(e.error.errno(), ENOMEM);
    assert_eq!(r.sq.db.log, [2], "the two valid WRs were published");
}

#[test]
fn session_abort_rolls_back() {
    let mut r = rig(cfg(4, 64));
    {
        let mut s = r.sq.start();
        s.post(&send(1, &DEST).signaled()).unwrap();
        s.post(&send(2, &DEST).signaled()).unwrap();
        assert_eq!(s.staged(), 2);
        s.abort();
    }
    {
        // dropping without complete is an abort too
        let mut s = r.sq.start();
        s.post(&send(3, &DEST).signaled()).unwrap();
    }
    assert_eq!(r.sq.producer_counter(), 0);
    assert_eq!(r.sq.pool().outstanding(), 0);
    assert!(r.sq.db.log.is_empty());
    assert!(r.desc.read(0, 256).iter().all(|&b| b == 0));
    let mut s = r.sq.start();
    s.post(&send(4, &DEST).signaled()).unwrap();
    assert_eq!(s.complete(), 1);
    let (id, phase) = wqe_at(&r, 0, 64);
    assert!(!phase);
    assert_eq!(r.done.complete(id), Ok(4));
}

#[test]
fn bad_configs_refused() {
    let desc = Mem::new(256);
    let db = Mem::new(4);
    let try_new = |c: SqConfig, len: usize| {
        // SAFETY: heap regions outlive the queue, which is dropped at once.
        unsafe { SendQueue::new(c, desc.ptr(), len, db.u32_ptr()) }.map(|_| ())
    };
    assert!(
        try_new(cfg(3, 64), 256).is_err(),
        "depth not a power of two"
    );
    assert!(try_new(cfg(8, 64), 256).is_err(), "mapping too small");
    let mut c = cfg(4, 64);
    c.max_inline_data = 33;
    assert!(try_new(c, 256).is_err());
    let mut c = cfg(2, 64);
    c.inline_write = true;
    assert!(try_new(c, 256).is_err());
    assert!(try_new(cfg(2, 128), 256).is_ok());
    assert_eq!(SqConfig::wqe_size_for(32, false), 64);
    assert_eq!(SqConfig::wqe_size_for(33, false), 128);
    assert_eq!(SqConfig::wqe_size_for(0, true), 128);
    assert_eq!(SqConfig::depth_for(100, 0), 128);
    assert_eq!(SqConfig::depth_for(1, 64), 64);
}

/// `post_send` composes WQE words in registers and stores them straight into the LLQ; the
/// bytes must be exactly what the field-by-field `build_wqe` lays out, for every operation,
/// SGE count, phase and both WQE sizes (inline payloads go through `build_wqe` itself).
/// (`post_send` sets no processing hints; the `wr_*` builder's hints are tested with it.)
#[test]
fn direct_wqe_words_equal_build_wqe() {
    let sg = [
        sge(0x1122_3344_5566_7788, 0x8000_0001, 0xffab_cdef),
        sge(0x99aa_bbcc_ddee_ff00, 7, 0x12_3456),
    ];
    let rdma_sg = [sge(0x0102_0304_0506_0708, 0xf_ffff, 0xff12_3456)];
    let dest = MIXED_DEST;
    let data = [0x5au8; 20];
    for size in [64u32, 128] {
        let mut r = rig(cfg(4, size));
        let mut wrs = Vec::new();
        for n in 0..=2 {
            wrs.push(send(1, &dest).sge(&sg[..n]));
            wrs.push(send_imm(2, &dest, 0xdead_beef).sge(&sg[..n]));
        }
        for n in 0..=1 {
            wrs.push(rdma_read(3, &dest, 0x1234_5678, 0xaaaa_bbbb_cccc_dddd).sge(&rdma_sg[..n]));
            wrs.push(rdma_write(4, &dest, 0x9abc, 0x1000).sge(&rdma_sg[..n]));
            wrs.push(rdma_write_imm(5, &dest, 0x9abc, 0x1000, 77).sge(&rdma_sg[..n]));
        }
        wrs.push(send(6, &dest).inline(&data));
        if size == 128 {
            wrs.push(rdma_write(7, &dest, 1, 2).inline(&data));
        }
        let n_wrs = wrs.len();
        for wr in wrs.iter_mut() {
            *wr = wr.signaled();
        }
        // Three passes over the 4-slot ring, so both phases are covered.
        for (k, wr) in wrs.iter().cycle().take(3 * n_wrs).enumerate() {
            assert_eq!(r.sq.post_send(std::slice::from_ref(wr)), Ok(1), "wr {k}");
            let slot = k % 4;
            let got = r.desc.read(slot * size as usize, size as usize);
            let req_id = u16::from_le_bytes([got[0], got[1]]);
            let phase = (k / 4) % 2 == 1;
            let want = expected_wqe(wr, req_id, phase);
            assert_eq!(
                got,
                want.as_bytes()[..size as usize],
                "size {size}, wr {k}: {wr:?}"
            );
            r.done.complete(req_id).unwrap();
        }
    }
}

/// Lists mixing plain SENDs (one SGE: the run path) with WRs that take the general path
/// (immediate, two SGEs, no SGE, inline), across ring wraps and doorbell batches, for both WQE
/// sizes: every slot holds exactly what `build_wqe` lays out for its WR, with the phase of its
/// pass; the doorbell carries the producer counter every `max_batch_wr` WQEs and at the end;
/// every req_id completes to its own wr_id. With and without `sq_sig_all` (with it, every
/// other WR is unsignaled, and is posted as signaled: EFA completes every send).
#[test]
fn plain_runs_and_general_wrs_in_one_list() {
    let sg = MIXED_SGES;
    let dest = MIXED_DEST;
    for (size, sig_all) in [(64u32, false), (64, true), (128, false), (128, true)] {
        let mut c = cfg(8, size);
        c.sq_sig_all = sig_all;
        // 3 WQEs per doorbell with 64-byte WQEs, 1 with 128-byte ones.
        c.max_tx_batch = if size == 64 { 3 } else { 2 };
        let batch = c.max_batch_wr() as u16;
        let mut r = rig(c);
        let mut pc = 0u16;
        let mut rung = Vec::new();
        for round in 0..6u64 {
            // 7 WRs per list: never more than the 8 free ids, and the ring end falls in a
            // different place of the list every round.
            let wrs: Vec<TWr<'_>> = (0..7u64)
                .map(|k| {
                    let id = round * 10 + k;
                    let wr = match (round + k) % 5 {
                        0 => send_imm(id, &dest, 0xdead_beef).sge(&sg[..1]),
                        1 => send(id, &dest).sge(&sg),
                        2 => send(id, &dest).inline(&MIXED_INLINE),
                        3 if k % 2 == 0 => send(id, &dest),
                        _ => send(id, &dest).sge(&sg[1..]),
                    };
                    if sig_all && k % 2 == 1 {
                        wr
                    } else {
                        wr.signaled()
                    }
                })
                .collect();
            assert_eq!(r.sq.post_send(&wrs), Ok(7), "round {round}");
            for (k, wr) in wrs.iter().enumerate() {
                let n = pc.wrapping_add(k as u16);
                let slot = usize::from(n) % 8;
                let got = r.desc.read(slot * size as usize, size as usize);
                let req_id = u16::from_le_bytes([got[0], got[1]]);
                let phase = (n / 8) % 2 == 1;
                let want = expected_wqe(wr, req_id, phase);
                assert_eq!(
                    got,
                    want.as_bytes()[..size as usize],
                    "size {size}, sq_sig_all {sig_all}, round {round}, wr {k}: {wr:?}"
                );
                assert_eq!(r.done.complete(req_id), Ok(wr.wr_id));
            }
            let end = pc.wrapping_add(7);
            let mut at = pc;
            while end.wrapping_sub(at) > batch {
                at = at.wrapping_add(batch);
                rung.push(u32::from(at));
            }
            rung.push(u32::from(end));
            pc = end;
            assert_eq!(r.sq.producer_counter(), pc);
        }
        assert_eq!(r.sq.db.log, rung, "size {size}, sq_sig_all {sig_all}");
        assert_eq!(r.sq.pool().outstanding(), 0);
    }
}

/// A list longer than the free ids: the run posts what was free, the general path finds the
/// queue full for the next WR, which is reported with its index after the prefix was rung;
/// nothing of the refused WR reaches the LLQ.
#[test]
fn plain_run_stops_when_ids_run_out() {
    let mut r = rig(cfg(4, 64));
    let sg = [sge(0x1000, 8, 1)];
    let wrs: Vec<_> = (0..6).map(|i| send(i, &DEST).sge(&sg).signaled()).collect();
    assert_eq!(r.sq.post_send(&wrs[..1]), Ok(1));
    let first = r.desc.read(0, 256);
    let e = r.sq.post_send(&wrs[1..]).unwrap_err();
    assert_eq!(e.index, 3);
    assert!(matches!(e.error, EfaError::QueueFull { depth: 4, .. }));
    assert_eq!(r.sq.db.log, [1, 4]);
    assert_eq!(r.sq.producer_counter(), 4);
    assert_eq!(r.sq.pool().outstanding(), 4);
    assert_eq!(&r.desc.read(0, 64), &first[..64], "slot 0 not rewritten");
    // Freeing one id lets the next list go on into slot 0 of pass 1.
    let (id, _) = wqe_at(&r, 2, 64);
    assert_eq!(r.done.complete(id), Ok(2));
    assert_eq!(r.sq.post_send(&wrs[5..]), Ok(1));
    assert_eq!(wqe_at(&r, 0, 64), (id, true));
    assert_eq!(r.done.complete(id), Ok(5));
}

/// Refusals of one-SGE SENDs (the run path's shape) inside a list: each is found by the full
/// validation with its reason and index, the WRs before it are posted and rung, and nothing
/// of it is written.
#[test]
fn plain_shaped_wrs_refused_with_reason() {
    let sg = [sge(0x1000, 8, 1)];
    let good = send(1, &DEST).sge(&sg).signaled();
    let foreign = To {
        ah: TestAh {
            num: 0x0102,
            domain: PD + 1,
        },
        ..DEST
    };
    let cases = [
        (send(2, &DEST).sge(&sg), EfaError::Unsignaled { qpn: 7 }),
        (
            send(2, &foreign).sge(&sg).signaled(),
            EfaError::ForeignAh { qpn: 7 },
        ),
        (
            SendWr::send(2).sge(&sg).signaled(),
            EfaError::NoDestination { qpn: 7 },
        ),
        (
            send(
                2,
                &To {
                    qpn: 0x1_0000,
                    ..DEST
                },
            )
            .sge(&sg)
            .signaled(),
            EfaError::BadRemoteQpn {
                qpn: 7,
                remote_qpn: 0x1_0000,
            },
        ),
    ];
    for (bad, want) in cases {
        let mut r = rig(cfg(8, 64));
        let e = r.sq.post_send(&[good, good, bad, good]).unwrap_err();
        assert_eq!((e.index, e.error), (2, want));
        assert_eq!(r.sq.db.log, [2]);
        assert_eq!(r.sq.pool().outstanding(), 2);
        assert!(r.desc.read(128, 128).iter().all(|&b| b == 0));
    }
    // With sq_sig_all an unsignaled WR counts as signaled.
    let mut c = cfg(8, 64);
    c.sq_sig_all = true;
    let mut r = rig(c);
    let unsig = send(3, &DEST).sge(&sg);
    assert_eq!(r.sq.post_send(&[good, unsig]), Ok(2));
    // A QP without send SGEs refuses the one-SGE SEND.
    let mut c = cfg(8, 64);
    c.max_send_sge = 0;
    let mut r = rig(c);
    let e = r.sq.post_send(&[good]).unwrap_err();
    assert!(matches!(
        e.error,
        EfaError::TooManySge {
            num_sge: 1,
            max_sge: 0,
            ..
        }
    ));
    assert!(r.sq.db.log.is_empty());
    assert!(r.desc.read(0, 512).iter().all(|&b| b == 0));
}

/// Builds `wr` in the open `wr_*` batch of `sq`: its operation, its data, its destination.
fn wr_build(sq: &mut SendQueue, wr: &TWr<'_>) -> Result<(), EfaError> {
    sq.wr_op(wr.wr_id, wr.flags, wr.op)?;
    match wr.data {
        WrData::Sge(s) => sq.wr_set_sge_list(s)?,
        WrData::Inline(d) => sq.wr_set_inline_data(d)?,
    }
    match wr.ud {
        Some(d) => sq.wr_set_ud_addr(d),
        None => Ok(()),
    }
}

/// A small deterministic generator for the interleaving test (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }
}

/// The single-WR path keeps state between calls (the pool's last-seen completer tail) and
/// writes its WQE on its own; here single posts (plain, general, refused, and with no id
/// free) are interleaved with lists, sessions and `wr_*` batches (completed and aborted) and
/// out-of-order completions over many ring wraps, for both WQE sizes and several doorbell
/// batch sizes.
/// After every step: each slot written holds exactly `build_wqe` of its WR with the phase of
/// its pass, no other slot changed, the doorbell log is exactly the expected producer
/// counters, a refused single WR took no id and wrote nothing, and every completion returns
/// its own wr_id (so no id was ever handed out twice).
#[test]
fn single_posts_interleaved_with_lists_sessions_and_completions() {
    let sg = MIXED_SGES;
    let dest = MIXED_DEST;
    // Under Miri (about 10^4 times slower) 80 steps per configuration still wrap the ring
    // twice and run out of ids; 600 would take many minutes.
    const STEPS: usize = if cfg!(miri) { 80 } else { 600 };
    let mut singles = 0;
    let mut full_singles = 0;
    for (size, tx_batch, seed) in [(64u32, 0u16, 1u64), (64, 3, 2), (128, 2, 3), (128, 0, 4)] {
        const DEPTH: usize = 8;
        let mut c = cfg(DEPTH as u32, size);
        c.gen = 5;
        c.max_tx_batch = tx_batch;
        let batch = c.max_batch_wr() as u16;
        let sz = size as usize;
        let mut r = rig(c);
        let mut rng = Rng(seed);
        let mut pc = 0u16;
        let mut rung: Vec<u32> = Vec::new();
        // (req_id, wr_id) posted and not completed, in posting order.
        let mut out: Vec<(u16, u64)> = Vec::new();
        let mut next_id = 0u64;
        let wr_of = |id: u64, kind: u64| {
            let wr = match kind {
                0..=5 => send(id, &dest).sge(&sg[..1]),
                6 => send_imm(id, &dest, 0xdead_beef).sge(&sg[..1]),
                7 => send(id, &dest).sge(&sg),
                8 => send(id, &dest).inline(&MIXED_INLINE),
                _ => send(id, &dest),
            };
            wr.signaled()
        };
        // Expected doorbells for `n` WQEs from `pc` (every `batch` and at the end).
        let expect_rings = |rung: &mut Vec<u32>, pc: u16, n: u16| {
            let end = pc.wrapping_add(n);
            let mut at = pc;
            while end.wrapping_sub(at) > batch {
                at = at.wrapping_add(batch);
                rung.push(u32::from(at));
            }
            if n != 0 {
                rung.push(u32::from(end));
            }
        };
        for step in 0..STEPS {
            let before = r.desc.read(0, DEPTH * sz);
            let free = DEPTH - out.len();
            let (wrs, posted): (Vec<TWr<'_>>, usize) = match rng.below(10) {
                // A single WR, most often plain.
                0..=4 => {
                    let wr = wr_of(next_id, rng.below(10));
                    singles += 1;
                    match r.sq.post_send(&[wr]) {
                        Ok(n) => {
                            assert_eq!((n, free > 0), (1, true), "step {step}");
                            (vec![wr], 1)
                        }
                        Err(e) => {
                            full_singles += 1;
                            assert_eq!((e.index, free), (0, 0), "step {step}: {e}");
                            assert!(matches!(e.error, EfaError::QueueFull { depth: 8, .. }));
                            (vec![], 0)
                        }
                    }
                }
                // A single WR refused for its own sake: nothing taken, written or rung.
                5 => {
                    let wr = send(next_id, &dest).sge(&sg[..1]);
                    let e = r.sq.post_send(&[wr]).unwrap_err();
                    assert_eq!((e.index, e.error), (0, EfaError::Unsignaled { qpn: 7 }));
                    (vec![], 0)
                }
                // A list that fits the free ids.
                6 | 7 => {
                    let n = rng.below(free as u64 + 1);
                    let wrs: Vec<_> = (0..n).map(|k| wr_of(next_id + k, rng.below(10))).collect();
                    assert_eq!(r.sq.post_send(&wrs), Ok(wrs.len()), "step {step}");
                    let n = wrs.len();
                    (wrs, n)
                }
                // A session or a `wr_*` batch (every other time) of one or two, completed
                // or aborted.
                _ => {
                    let n = rng.below(free.min(2) as u64 + 1);
                    let wrs: Vec<_> = (0..n).map(|k| wr_of(next_id + k, rng.below(9))).collect();
                    let abort = if step % 2 == 0 {
                        r.sq.wr_start().unwrap();
                        for wr in &wrs {
                            wr_build(&mut r.sq, wr).unwrap();
                        }
                        assert_eq!(r.sq.wr_len(), wrs.len(), "step {step}");
                        let abort = rng.below(2) == 0;
                        if abort {
                            r.sq.wr_abort();
                        } else {
                            assert_eq!(r.sq.wr_complete(), Ok(wrs.len()), "step {step}");
                        }
                        abort
                    } else {
                        let mut s = r.sq.start();
                        for wr in &wrs {
                            s.post(wr).unwrap();
                        }
                        let abort = rng.below(2) == 0;
                        if abort {
                            s.abort();
                        } else {
                            assert_eq!(s.complete(), wrs.len());
                        }
                        abort
                    };
                    if abort {
                        (vec![], 0)
                    } else {
                        let n = wrs.len();
                        (wrs, n)
                    }
                }
            };
            expect_rings(&mut rung, pc, posted as u16);
            let mut after = before.clone();
            for (k, wr) in wrs.iter().enumerate() {
                let n = pc.wrapping_add(k as u16);
                let slot = usize::from(n) % DEPTH;
                let got = r.desc.read(slot * sz, sz);
                let req_id = u16::from_le_bytes([got[0], got[1]]);
                let want = expected_wqe(wr, req_id, (usize::from(n) / DEPTH) % 2 == 1);
                assert_eq!(got, want.as_bytes()[..sz], "step {step}, wr {k}: {wr:?}");
                after[slot * sz..(slot + 1) * sz].copy_from_slice(&got);
                out.push((req_id, wr.wr_id));
            }
            assert_eq!(
                r.desc.read(0, DEPTH * sz),
                after,
                "step {step}: other slots"
            );
            pc = pc.wrapping_add(posted as u16);
            next_id += wrs.len() as u64;
            assert_eq!(r.sq.producer_counter(), pc, "step {step}");
            assert_eq!(r.sq.db.log, rung, "step {step}");
            assert_eq!(r.sq.pool().outstanding() as usize, out.len(), "step {step}");
            // Complete a few, out of order.
            for _ in 0..rng.below(4) {
                if out.is_empty() {
                    break;
                }
                let (req_id, wr_id) = out.swap_remove(rng.below(out.len() as u64) as usize);
                assert_eq!(r.done.complete(req_id), Ok(wr_id), "step {step}");
            }
        }
        assert!(
            pc as usize > STEPS / 40 * DEPTH,
            "wrapped the ring {pc} / 8 times"
        );
    }
    assert!(
        singles > STEPS && full_singles > STEPS / 60,
        "{singles} single posts, {full_singles} found no id"
    );
}

/// The one-load read of an SGE's length and lkey is the buffer descriptor's first word as the
/// field-by-field composition makes it: the length, then the lkey's low 24 bits (its top
/// byte dropped).
#[test]
fn sge_len_lkey_is_the_buf_desc_word() {
    for (length, lkey) in [
        (0, 0),
        (64, 0x1234),
        (u32::MAX, u32::MAX),
        (0x8000_0001, 0xab12_3456),
    ] {
        let s = Sge {
            addr: 0x1122_3344_5566_7788,
            length,
            lkey,
        };
        let want = u64::from(length) | u64::from(lkey & 0x00ff_ffff) << 32;
        assert_eq!(sge_len_lkey(&s), want, "{s:?}");
        assert_eq!(buf_desc_words(&s)[0], want, "{s:?}");
    }
}

// ----- destinations: none, or an AH of another PD --------------------------------------------

/// An AH of another protection domain than the QP's, with the number and remote QP of
/// [`DEST`].
const FOREIGN: To = To {
    ah: TestAh {
        num: 0x0102,
        domain: PD + 1,
    },
    ..DEST
};

/// What a refused post left: nothing written, no doorbell, no id taken, the producer counter
/// where it was.
fn assert_untouched(r: &Rig, pc: u16, log: &[u32]) {
    assert_eq!(r.sq.producer_counter(), pc);
    assert_eq!(r.sq.db.log, log);
    assert_eq!(r.sq.pool().outstanding(), u32::from(pc));
    let written = usize::from(pc) * 64;
    assert!(r.desc.read(written, 256 - written).iter().all(|&b| b == 0));
}

/// A send without a destination (EFA QPs are datagram QPs) is refused with its index on every
/// way in: `post_plain` declines it, `post_send` names it (alone, and after a good WR that is
/// posted and rung), a session refuses it.
#[test]
fn a_send_without_a_destination_is_refused() {
    let mut r = rig(cfg(4, 64));
    let sg = [sge(0x1000, 8, 1)];
    let none = TWr::send(1).sge(&sg).signaled();
    assert!(!r.sq.post_plain(&none), "the single-WR path declines it");
    assert_untouched(&r, 0, &[]);
    let e = r.sq.post_send(&[none]).unwrap_err();
    assert_eq!(e, PostError::new(0, EfaError::NoDestination { qpn: 7 }));
    assert_eq!(e.error.errno(), EINVAL);
    assert!(e.error.to_string().contains("datagram"), "{e}");
    assert_untouched(&r, 0, &[]);
    // Inline data and an immediate (the general path) are refused alike.
    let e =
        r.sq.post_send(&[TWr::new(2, WrOp::SendWithImm { imm_data: 1 })
            .inline(b"x")
            .signaled()]);
    assert_eq!(
        e,
        Err(PostError::new(0, EfaError::NoDestination { qpn: 7 }))
    );
    {
        let mut s = r.sq.start();
        assert_eq!(s.post(&none), Err(EfaError::NoDestination { qpn: 7 }));
        assert_eq!(s.staged(), 0);
    }
    assert_untouched(&r, 0, &[]);
    let good = send(3, &DEST).sge(&sg).signaled();
    let e = r.sq.post_send(&[good, none, good]).unwrap_err();
    assert_eq!(e, PostError::new(1, EfaError::NoDestination { qpn: 7 }));
    assert_eq!(r.sq.db.log, [1], "the WR before it was posted and rung");
    let (id, _) = wqe_at(&r, 0, 64);
    assert_eq!(r.done.complete(id), Ok(3));
}

/// A send through an AH of another PD than the QP's is never posted: `post_plain` declines it
/// (nothing written, no id taken), `post_send` refuses it by name alone and inside a list of
/// plain WRs (the run stops at it; the WRs before it are posted and rung), and so does a
/// session. The same AH number of the QP's own PD goes.
#[test]
fn a_send_through_an_ah_of_another_pd_is_refused() {
    for size in [64u32, 128] {
        let mut r = rig(cfg(8, size));
        let sg = [sge(0x1000, 8, 1)];
        let foreign = send(1, &FOREIGN).sge(&sg).signaled();
        assert!(!r.sq.post_plain(&foreign), "declined");
        assert_eq!(r.sq.producer_counter(), 0);
        assert_eq!(r.sq.pool().outstanding(), 0);
        assert!(r.sq.db.log.is_empty());
        assert!(r.desc.read(0, 8 * size as usize).iter().all(|&b| b == 0));
        let e = r.sq.post_send(&[foreign]).unwrap_err();
        assert_eq!(e, PostError::new(0, EfaError::ForeignAh { qpn: 7 }));
        assert_eq!(e.error.errno(), EINVAL);
        // The general path (an immediate, inline data) refuses it too.
        let imm = send_imm(2, &FOREIGN, 5).inline(b"abc").signaled();
        assert_eq!(
            r.sq.post_send(&[imm]),
            Err(PostError::new(0, EfaError::ForeignAh { qpn: 7 }))
        );
        {
            let mut s = r.sq.start();
            assert_eq!(s.post(&foreign), Err(EfaError::ForeignAh { qpn: 7 }));
        }
        assert_eq!(r.sq.pool().outstanding(), 0);
        assert!(r.sq.db.log.is_empty());
        assert!(r.desc.read(0, 8 * size as usize).iter().all(|&b| b == 0));
        // In a run of plain WRs: the two before it go.
        let good = send(3, &DEST).sge(&sg).signaled();
        let e = r.sq.post_send(&[good, good, foreign, good]).unwrap_err();
        assert_eq!(e, PostError::new(2, EfaError::ForeignAh { qpn: 7 }));
        assert_eq!(r.sq.db.log, [2]);
        assert_eq!(r.sq.pool().outstanding(), 2);
        assert!(r
            .desc
            .read(2 * size as usize, 6 * size as usize)
            .iter()
            .all(|&b| b == 0));
        // The same number in the QP's domain goes, by the single-WR path.
        assert!(r.sq.post_plain(&good));
        let (id, _) = wqe_at(&r, 2, size as usize);
        assert_eq!(r.done.complete(id), Ok(3));
    }
}

// ----- sq_sig_all ------------------------------------------------------------------------------

/// On a QP with `sq_sig_all` an unsignaled WR is posted (completion requested, as EFA does
/// for every send) by every path: the single-WR path, a list's runs and its general path, a
/// session; without it the same WR is refused (`Unsignaled`) and the single-WR path declines
/// it.
#[test]
fn post_send_with_sq_sig_all_posts_unsignaled_wrs() {
    let sg = [sge(0x1000, 8, 1)];
    let plain = send(1, &DEST).sge(&sg);
    let general = send_imm(2, &DEST, 0xfeed).sge(&sg);
    let inline = send(3, &DEST).inline(b"hi");
    assert!(!plain.is_signaled() && !general.is_signaled() && !inline.is_signaled());

    let mut r = rig(cfg(8, 64));
    assert!(!r.sq.post_plain(&plain));
    for wr in [plain, general, inline] {
        let e = r.sq.post_send(&[wr]).unwrap_err();
        assert_eq!(e, PostError::new(0, EfaError::Unsignaled { qpn: 7 }));
    }
    assert!(r.sq.db.log.is_empty());

    let mut c = cfg(8, 64);
    c.sq_sig_all = true;
    let mut r = rig(c);
    assert!(r.sq.post_plain(&plain), "the single-WR path takes it");
    assert_eq!(r.sq.post_send(&[plain]), Ok(1));
    assert_eq!(r.sq.post_send(&[general]), Ok(1));
    assert_eq!(r.sq.post_send(&[plain, plain, general, inline]), Ok(4));
    {
        let mut s = r.sq.start();
        s.post(&inline).unwrap();
        assert_eq!(s.complete(), 1);
    }
    let posted = [plain, plain, general, plain, plain, general, inline, inline];
    assert_eq!(r.sq.db.log, [1, 2, 3, 7, 8]);
    for (slot, wr) in posted.iter().enumerate() {
        let got = r.desc.read(slot * 64, 64);
        let req_id = u16::from_le_bytes([got[0], got[1]]);
        assert_eq!(
            got,
            expected_wqe(wr, req_id, false).as_bytes()[..64],
            "slot {slot}"
        );
        // ctrl2: comp_req: the device completes it.
        assert_ne!(got[3] & EFA_IO_TX_META_DESC_COMP_REQ_MASK, 0, "slot {slot}");
        assert_eq!(r.done.complete(req_id), Ok(wr.wr_id));
    }
}

// ----- the wr_* builder ------------------------------------------------------------------------

/// `wr` as the builder builds it: `wr_op`, its data, its destination, then `hints` if any.
fn wr_build_hinted(sq: &mut SendQueue, wr: &TWr<'_>, hints: u8) -> Result<(), EfaError> {
    wr_build(sq, wr)?;
    if hints != 0 {
        sq.wr_set_processing_hints(hints)?;
    }
    Ok(())
}

/// The WRs of `direct_wqe_words_equal_build_wqe` for a queue of `size`-byte WQEs: every
/// operation and SGE count, inline data.
fn assorted_wrs<'a>(
    size: u32,
    sg: &'a [Sge; 2],
    rdma_sg: &'a [Sge; 1],
    data: &'a [u8],
) -> Vec<TWr<'a>> {
    let dest = &MIXED_DEST;
    let mut wrs = Vec::new();
    for n in 0..=2 {
        wrs.push(send(1, dest).sge(&sg[..n]));
        wrs.push(send_imm(2, dest, 0xdead_beef).sge(&sg[..n]));
    }
    for n in 0..=1 {
        wrs.push(rdma_read(3, dest, 0x1234_5678, 0xaaaa_bbbb_cccc_dddd).sge(&rdma_sg[..n]));
        wrs.push(rdma_write(4, dest, 0x9abc, 0x1000).sge(&rdma_sg[..n]));
        wrs.push(rdma_write_imm(5, dest, 0x9abc, 0x1000, 77).sge(&rdma_sg[..n]));
    }
    wrs.push(send(6, dest).inline(data));
    if size == 128 {
        wrs.push(rdma_write(7, dest, 1, 2).inline(data));
    }
    wrs.iter().map(|wr| wr.signaled()).collect()
}

/// A `wr_*` batch writes, for each WR, exactly the WQE `post_send` writes for it on a twin
/// queue (the direct word stores against the builder's staging through `build_wqe`), plus
/// its processing hints; nothing reaches the LLQ or the doorbell before `wr_complete`, which
/// rings once for the whole batch (one doorbell batch here) and returns how many it posted;
/// `wr_len` counts the batch as it grows.
#[test]
fn wr_builder_writes_what_post_send_writes() {
    let sg = MIXED_SGES;
    let rdma_sg = [sge(0x0102_0304_0506_0708, 0xf_ffff, 0xff12_3456)];
    let data = [0x5au8; 20];
    for size in [64u32, 128] {
        let wrs = assorted_wrs(size, &sg, &rdma_sg, &data);
        let depth = wrs.len().next_power_of_two() as u32;
        let mut c = cfg(depth, size);
        c.processing_hints = true;
        let (mut a, mut b) = (rig(c), rig(c));
        assert_eq!(b.sq.wr_len(), 0, "no batch");
        b.sq.wr_start().unwrap();
        assert_eq!(b.sq.wr_len(), 0, "an empty batch");
        for (k, wr) in wrs.iter().enumerate() {
            assert_eq!(a.sq.post_send(std::slice::from_ref(wr)), Ok(1));
            let hints = (k % 2) as u8 * EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE;
            wr_build_hinted(&mut b.sq, wr, hints).unwrap();
            assert_eq!(b.sq.wr_len(), k + 1, "the WR being built counts");
        }
        assert!(b.sq.db.log.is_empty(), "nothing rung before wr_complete");
        let sz = size as usize;
        assert!(b.desc.read(0, depth as usize * sz).iter().all(|&x| x == 0));
        assert_eq!(b.sq.wr_complete(), Ok(wrs.len()));
        assert_eq!(b.sq.wr_len(), 0, "completed");
        assert_eq!(b.sq.db.log, [wrs.len() as u32]);
        assert_eq!(b.sq.producer_counter(), a.sq.producer_counter());
        for (k, wr) in wrs.iter().enumerate() {
            let hints = (k % 2) as u8;
            let mut got = b.desc.read(k * sz, sz);
            let req_id = u16::from_le_bytes([got[0], got[1]]);
            let want = build_wqe(&resolved(wr, hints), req_id, false);
            assert_eq!(got, want.as_bytes()[..sz], "size {size}, wr {k}: {wr:?}");
            // ctrl3 (byte 14) holds the hints; without them the WQE is post_send's.
            assert_eq!(got[14], hints, "wr {k}");
            got[14] = 0;
            assert_eq!(got, a.desc.read(k * sz, sz), "size {size}, wr {k}: {wr:?}");
            assert_eq!(b.done.complete(req_id), Ok(wr.wr_id));
        }
    }
}

/// A batch of more WRs than `max_tx_batch` allows per doorbell rings every `max_batch_wr`
/// WQEs and once at the end, like a list, also across the ring's end (phases by pass).
#[test]
fn wr_batch_larger_than_max_tx_batch_rings_the_doorbell_in_batches() {
    let sg = [sge(0x1000, 8, 1)];
    for (size, want) in [
        (64u32, vec![7u32, 9, 11, 12]),
        (128, vec![6, 7, 8, 9, 10, 11, 12]),
    ] {
        // max_tx_batch 2 (x 64 bytes): 2 WQEs per doorbell of 64 bytes, 1 of 128.
        let mut c = cfg(8, size);
        c.max_tx_batch = 2;
        let mut r = rig(c);
        let sz = size as usize;
        // Move the producer counter to 5 (a list of 5 rings too), then complete them.
        let first: Vec<_> = (0..5).map(|i| send(i, &DEST).sge(&sg).signaled()).collect();
        assert_eq!(r.sq.post_send(&first), Ok(5));
        for slot in 0..5 {
            let (id, _) = wqe_at(&r, slot, sz);
            r.done.complete(id).unwrap();
        }
        let rung = r.sq.db.log.len();
        r.sq.wr_start().unwrap();
        let wrs: Vec<_> = (10..17)
            .map(|i| send(i, &DEST).sge(&sg).signaled())
            .collect();
        for wr in &wrs {
            wr_build(&mut r.sq, wr).unwrap();
        }
        assert_eq!(r.sq.wr_len(), 7);
        assert_eq!(r.sq.db.log.len(), rung, "nothing rung while building");
        assert_eq!(r.sq.wr_complete(), Ok(7));
        assert_eq!(r.sq.db.log[rung..], want, "size {size}");
        for (k, wr) in wrs.iter().enumerate() {
            let n = 5 + k;
            let got = r.desc.read(n % 8 * sz, sz);
            let req_id = u16::from_le_bytes([got[0], got[1]]);
            let want = expected_wqe(wr, req_id, n >= 8);
            assert_eq!(got, want.as_bytes()[..sz], "size {size}, wr {k}");
            assert_eq!(r.done.complete(req_id), Ok(wr.wr_id));
        }
    }
}

/// The builder's errors: calls outside a batch, a second `wr_start`, a setter before any WR,
/// and refusals of a WR (by a setter, or when it is staged at the next `wr_op` or at
/// `wr_complete`). The first error is sticky: every later call of the batch returns it,
/// `wr_complete` returns it having posted nothing (the WRs staged before it included), and
/// the batch is over: a new one starts where the refused one did.
#[test]
fn wr_builder_errors_are_sticky_and_all_or_nothing() {
    let mut r = rig(cfg(8, 64));
    let sg = [sge(0x1000, 8, 1)];
    let to = UdDest::new(&DEST.ah, DEST.qpn, DEST.qkey);
    let qpn = 7;
    assert_eq!(
        r.sq.wr_op(1, SendFlags::SIGNALED, WrOp::Send),
        Err(EfaError::NoBatch { qpn })
    );
    assert_eq!(r.sq.wr_set_sge_list(&sg), Err(EfaError::NoBatch { qpn }));
    assert_eq!(r.sq.wr_complete(), Err(EfaError::NoBatch { qpn }));
    assert_eq!(r.sq.wr_len(), 0);
    r.sq.wr_abort(); // a no-op without a batch

    r.sq.wr_start().unwrap();
    assert_eq!(r.sq.wr_start(), Err(EfaError::BatchInProgress { qpn }));
    r.sq.wr_abort();
    r.sq.wr_start().unwrap();
    assert_eq!(r.sq.wr_set_ud_addr(to), Err(EfaError::NoCurrentWr { qpn }));
    assert_eq!(
        r.sq.wr_op(1, SendFlags::SIGNALED, WrOp::Send),
        Err(EfaError::NoCurrentWr { qpn }),
        "sticky"
    );
    r.sq.wr_abort();

    let too_many = EfaError::TooManySge {
        qpn,
        queue: QueueKind::Send,
        num_sge: 3,
        max_sge: 2,
    };
    // Each case: a refusal after two good WRs (so two are staged when it comes).
    type Case = fn(&mut SendQueue, &UdDest<'_, TestAh>) -> Result<(), EfaError>;
    let cases: [(Case, EfaError); 6] = [
        (|sq, _| sq.wr_set_sge_list(&[sge(0, 1, 1); 3]), too_many),
        (
            |sq, _| sq.wr_set_inline_data(&[0; 81]),
            EfaError::InlineTooLong {
                qpn,
                len: 81,
                max: 80,
            },
        ),
        (
            |sq, _| sq.wr_set_ud_addr(UdDest::new(&FOREIGN.ah, FOREIGN.qpn, FOREIGN.qkey)),
            EfaError::ForeignAh { qpn },
        ),
        (
            |sq, _| sq.wr_set_processing_hints(1),
            EfaError::HintsNotEnabled { qpn },
        ),
        // Refused when staged: unsignaled, at the next wr_op.
        (
            |sq, to| {
                sq.wr_op(9, SendFlags::empty(), WrOp::Send)?;
                sq.wr_set_ud_addr(*to)?;
                sq.wr_op(10, SendFlags::SIGNALED, WrOp::Send)
            },
            EfaError::Unsignaled { qpn },
        ),
        // Refused when staged at wr_complete: no destination.
        (
            |sq, _| sq.wr_op(9, SendFlags::SIGNALED, WrOp::Send),
            EfaError::NoDestination { qpn },
        ),
    ];
    for (k, (bad, err)) in cases.into_iter().enumerate() {
        let pc = r.sq.producer_counter();
        let log = r.sq.db.log.clone();
        let outstanding = r.sq.pool().outstanding();
        r.sq.wr_start().unwrap();
        for id in 0..2 {
            r.sq.wr_op(id, SendFlags::SIGNALED, WrOp::Send).unwrap();
            r.sq.wr_set_sge_list(&sg).unwrap();
            r.sq.wr_set_ud_addr(to).unwrap();
        }
        let got = bad(&mut r.sq, &to);
        if k == 5 {
            assert_eq!(got, Ok(()), "refused only when staged");
        } else {
            assert_eq!(got, Err(err), "case {k}");
            // Every later call returns the first error and does nothing.
            assert_eq!(r.sq.wr_op(11, SendFlags::SIGNALED, WrOp::Send), Err(err));
            assert_eq!(r.sq.wr_set_sge_list(&sg), Err(err));
            assert_eq!(r.sq.wr_set_ud_addr(to), Err(err));
        }
        assert_eq!(r.sq.wr_complete(), Err(err), "case {k}");
        // Nothing of the batch: no doorbell, no id kept, the producer counter back.
        assert_eq!(r.sq.db.log, log, "case {k}");
        assert_eq!(r.sq.producer_counter(), pc, "case {k}");
        assert_eq!(r.sq.pool().outstanding(), outstanding, "case {k}");
        assert!(r.desc.read(0, 8 * 64).iter().all(|&b| b == 0), "case {k}");
        // The batch is over: a new one can start (and posts into the same slots).
        assert_eq!(r.sq.wr_len(), 0, "case {k}");
        assert_eq!(
            r.sq.wr_complete(),
            Err(EfaError::NoBatch { qpn }),
            "case {k}"
        );
        r.sq.wr_start().unwrap();
        r.sq.wr_abort();
    }
    // After all that, a good batch lands in slot 0 with id 0.
    r.sq.wr_start().unwrap();
    wr_build(&mut r.sq, &send(42, &DEST).sge(&sg).signaled()).unwrap();
    assert_eq!(r.sq.wr_complete(), Ok(1));
    assert_eq!(r.sq.db.log, [1]);
    let (id, phase) = wqe_at(&r, 0, 64);
    assert!(!phase);
    assert_eq!(r.done.complete(id), Ok(42));
}

/// `wr_abort` (and an aborted batch across the ring's end) gives back everything the batch
/// took: the producer counter, the phase, the request ids; nothing reaches the LLQ or the
/// doorbell, and the next WRs go where the batch's would have, with the phase of their pass
/// and ids that complete to their own wr_ids.
#[test]
fn wr_abort_rolls_back_the_producer_counter_phase_and_ids() {
    let mut r = rig(cfg(4, 64));
    let sg = [sge(0x1000, 8, 1)];
    // Producer counter 3: the next batch crosses the ring's end (slots 3, 0, 1).
    let first: Vec<_> = (0..3).map(|i| send(i, &DEST).sge(&sg).signaled()).collect();
    assert_eq!(r.sq.post_send(&first), Ok(3));
    for slot in 0..3 {
        let (id, _) = wqe_at(&r, slot, 64);
        r.done.complete(id).unwrap();
    }
    let before = r.desc.read(0, 256);
    for _ in 0..3 {
        r.sq.wr_start().unwrap();
        for id in 10..13 {
            wr_build(&mut r.sq, &send(id, &DEST).sge(&sg).signaled()).unwrap();
        }
        // Staging the third (at the next wr_op) took ids and moved the counter past the end.
        r.sq.wr_op(13, SendFlags::SIGNALED, WrOp::Send).unwrap();
        assert_eq!(r.sq.wr_len(), 4);
        assert_eq!(r.sq.pool().outstanding(), 3, "the three staged hold ids");
        r.sq.wr_abort();
        assert_eq!(r.sq.wr_len(), 0);
        assert_eq!(r.sq.producer_counter(), 3);
        assert_eq!(r.sq.pool().outstanding(), 0);
        assert_eq!(r.sq.db.log, [3]);
        assert_eq!(r.desc.read(0, 256), before);
    }
    // The next WRs: slot 3 in pass 0, then slot 0 in pass 1.
    for (id, slot, phase) in [(20, 3, false), (21, 0, true)] {
        assert_eq!(
            r.sq.post_send(&[send(id, &DEST).sge(&sg).signaled()]),
            Ok(1)
        );
        let (req_id, p) = wqe_at(&r, slot, 64);
        assert_eq!(p, phase, "wr {id}");
        assert_eq!(r.done.complete(req_id), Ok(id));
    }
    assert_eq!(r.sq.db.log, [3, 4, 5]);
}

/// Processing hints: refused on a QP configured without them (EOPNOTSUPP) and for bits EFA
/// defines none for (EINVAL, also inside ctrl3's two bits); BURST_PPS_SENSITIVE lands in
/// ctrl3. Each refusal is the batch's error.
#[test]
fn wr_processing_hints_allowed_refused_and_unknown() {
    let sg = [sge(0x1000, 8, 1)];
    let wr = send(1, &DEST).sge(&sg).signaled();
    let mut r = rig(cfg(4, 64));
    r.sq.wr_start().unwrap();
    wr_build(&mut r.sq, &wr).unwrap();
    let e =
        r.sq.wr_set_processing_hints(EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE);
    assert_eq!(e, Err(EfaError::HintsNotEnabled { qpn: 7 }));
    assert_eq!(EfaError::HintsNotEnabled { qpn: 7 }.errno(), EOPNOTSUPP);
    assert_eq!(
        r.sq.wr_complete(),
        Err(EfaError::HintsNotEnabled { qpn: 7 })
    );
    assert!(r.sq.db.log.is_empty());

    let mut c = cfg(4, 64);
    c.processing_hints = true;
    let mut r = rig(c);
    for hints in [0x02u8, 0x03, 0x04, 0x80] {
        r.sq.wr_start().unwrap();
        wr_build(&mut r.sq, &wr).unwrap();
        let want = EfaError::UnknownHints { qpn: 7, hints };
        assert_eq!(r.sq.wr_set_processing_hints(hints), Err(want));
        assert_eq!(want.errno(), EINVAL);
        assert_eq!(r.sq.wr_complete(), Err(want));
    }
    assert!(r.sq.db.log.is_empty());
    for (id, hints) in [(1, EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE), (2, 0)] {
        r.sq.wr_start().unwrap();
        wr_build(&mut r.sq, &send(id, &DEST).sge(&sg).signaled()).unwrap();
        r.sq.wr_set_processing_hints(hints).unwrap();
        assert_eq!(r.sq.wr_complete(), Ok(1));
    }
    assert_eq!(r.sq.db.log, [1, 2]);
    // ctrl3 (byte 14): the hint, then none.
    assert_eq!(r.desc.read(14, 1), [1]);
    assert_eq!(r.desc.read(64 + 14, 1), [0]);
}

/// While a `wr_*` batch is open (WRs staged, not yet in the LLQ) nothing else may post: a
/// doorbell would cover the staged slots before their WQEs are written. `post_plain`
/// declines, `post_send` refuses (`BatchInProgress`, index 0) and a session refuses, all with
/// nothing written or taken; the batch then completes as if they had not been tried, and
/// posting goes on after it.
#[test]
fn nothing_else_posts_while_a_wr_batch_is_open() {
    let mut r = rig(cfg(8, 64));
    let sg = [sge(0x1000, 8, 1)];
    let good = send(9, &DEST).sge(&sg).signaled();
    r.sq.wr_start().unwrap();
    for id in 1..3 {
        wr_build(&mut r.sq, &send(id, &DEST).sge(&sg).signaled()).unwrap();
    }
    // Stage the second WR: two slots are now the batch's.
    r.sq.wr_op(3, SendFlags::SIGNALED, WrOp::Send).unwrap();
    r.sq.wr_set_sge_list(&sg).unwrap();
    r.sq.wr_set_ud_addr(UdDest::new(&DEST.ah, DEST.qpn, DEST.qkey))
        .unwrap();
    let pc = r.sq.producer_counter();
    let outstanding = r.sq.pool().outstanding();
    assert!(!r.sq.post_plain(&good));
    // Opening the single-WR path (the core does in RTS) does not open it inside the batch.
    r.sq.set_plain_open(true);
    assert!(!r.sq.post_plain(&good));
    let busy = EfaError::BatchInProgress { qpn: 7 };
    assert_eq!(r.sq.post_send(&[good]), Err(PostError::new(0, busy)));
    assert_eq!(r.sq.post_send(&[good, good]), Err(PostError::new(0, busy)));
    {
        let mut s = r.sq.start();
        assert_eq!(s.post(&good), Err(busy));
    }
    assert_eq!(r.sq.producer_counter(), pc);
    assert_eq!(r.sq.pool().outstanding(), outstanding);
    assert!(r.sq.db.log.is_empty());
    assert!(r.desc.read(0, 512).iter().all(|&b| b == 0));

    assert_eq!(r.sq.wr_complete(), Ok(3));
    assert_eq!(r.sq.db.log, [3]);
    for (slot, id) in [(0, 1), (1, 2), (2, 3)] {
        let (req_id, _) = wqe_at(&r, slot, 64);
        assert_eq!(r.done.complete(req_id), Ok(id));
    }
    // After the batch every way posts again.
    assert!(r.sq.post_plain(&good));
    assert_eq!(r.sq.post_send(&[good, good]), Ok(2));
    let mut s = r.sq.start();
    s.post(&good).unwrap();
    assert_eq!(s.complete(), 1);
    assert_eq!(r.sq.db.log, [3, 4, 6, 7]);

    // A path closed before the batch stays closed after it (completed or aborted).
    r.sq.set_plain_open(false);
    for complete in [true, false] {
        r.sq.wr_start().unwrap();
        if complete {
            assert_eq!(r.sq.wr_complete(), Ok(0));
        } else {
            r.sq.wr_abort();
        }
        assert!(!r.sq.post_plain(&good), "complete {complete}");
    }
    r.sq.set_plain_open(true);
    assert!(r.sq.post_plain(&good));
}
