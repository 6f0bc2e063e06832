//! SQ tests against heap memory standing in for the LLQ and the doorbell page.

use super::*;
use crate::error::{EINVAL, ENOMEM, EOPNOTSUPP};
use crate::testmem::Mem;
use crate::wrid::WridCompleter;

const DEST: UdAddr = UdAddr {
    ah: 0x0102,
    remote_qpn: 0x0304,
    remote_qkey: 0x0506_0708,
};

fn cfg(depth: u32, wqe_size: u32) -> SqConfig {
    SqConfig {
        qp_num: 7,
        qp_type: QpType::Srd,
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
const MIXED_DEST: UdAddr = UdAddr {
    ah: 0xfedc,
    remote_qpn: 0xffff,
    remote_qkey: 0x8765_4321,
};
const MIXED_INLINE: [u8; 9] = [0x5a; 9];

#[test]
fn golden_send_imm_64() {
    let mut r = rig(cfg(4, 64));
    let sg = [sge(0x1122_3344_5566_7788, 0x100, 0xab_cdef)];
    let wr = SendWr::send_imm(0xdead, DEST, 0x1122_3344)
        .sge_list(&sg)
        .signaled(true);
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
    let bufs: [&[u8]; 2] = [b"hello", b"!!"];
    let wr = SendWr::rdma_write(1, DEST, 0x99, 0x1_0000_0002)
        .inline_data(&bufs)
        .signaled(true);
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

#[test]
fn golden_rdma_read_64() {
    let mut r = rig(cfg(4, 64));
    let sg = [sge(0xaaaa_0000, 4096, 0x12)];
    let wr = SendWr::rdma_read(9, DEST, 0x77, 0x2000)
        .sge_list(&sg)
        .signaled(true)
        .processing_hints(EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE);
    r.sq.post_send(&[wr]).unwrap();
    let got = r.desc.read(0, 64);
    // ctrl1: op_type RDMA_READ (1) | meta_desc 0x80
    assert_eq!(got[2], 0x81);
    // ctrl3: processing_hints BURST_PPS_SENSITIVE (1) in 1:0
    assert_eq!(got[14], 0x01);
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
        let wr = SendWr::send(k, DEST).sge_list(&sg).signaled(true);
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
    let wrs: Vec<_> = (0..3)
        .map(|i| SendWr::send(i, DEST).sge_list(&sg).signaled(true))
        .collect();
    r.sq.post_send(&wrs).unwrap();
    for s in 0..3 {
        let (id, _) = wqe_at(&r, s, 64);
        r.done.complete(id).unwrap();
    }
    let wrs: Vec<_> = (10..13)
        .map(|i| SendWr::send(i, DEST).sge_list(&sg).signaled(true))
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
    let wrs: Vec<_> = (0..5)
        .map(|i| SendWr::send(i, DEST).sge_list(&sg).signaled(true))
        .collect();
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
    let wr = SendWr::send(1, DEST);
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
    let bufs: [&[u8]; 1] = [&long];
    let e =
        r.sq.post_send(&[SendWr::send(1, DEST).inline_data(&bufs).signaled(true)])
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
        r.sq.post_send(&[SendWr::send(1, DEST).sge_list(&sg).signaled(true)])
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
        r.sq.post_send(&[SendWr::rdma_write(1, DEST, 1, 0)
            .sge_list(&sg[..2])
            .signaled(true)])
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
    let ok: [&[u8]; 1] = [b"x"];
    let e =
        r.sq.post_send(&[SendWr::rdma_write(1, DEST, 1, 0)
            .inline_data(&ok)
            .signaled(true)])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::InlineNotSupported { .. }));
    let e =
        r.sq.post_send(&[SendWr::rdma_read(1, DEST, 1, 0)
            .inline_data(&ok)
            .signaled(true)])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::InlineNotSupported { .. }));
    let big = [sge(0, 2 << 20, 1)];
    let e =
        r.sq.post_send(&[SendWr::rdma_read(1, DEST, 1, 0)
            .sge_list(&big)
            .signaled(true)])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::RdmaTooLong { .. }));
    let e =
        r.sq.post_send(&[SendWr::send(
            1,
            UdAddr {
                remote_qpn: 0x1_0000,
                ..DEST
            },
        )
        .signaled(true)])
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
        r.sq.post_send(&[SendWr::rdma_write_imm(1, DEST, 1, 0, 5)
            .sge_list(&sg)
            .signaled(true)])
            .unwrap_err();
    assert!(matches!(e.error, EfaError::OpNotSupported { .. }));
    assert_eq!(e.error.errno(), EOPNOTSUPP);
    assert_eq!(
        r.sq.post_send(&[SendWr::rdma_read(1, DEST, 1, 0)
            .sge_list(&sg)
            .signaled(true)]),
        Ok(1)
    );

    let mut c = cfg(4, 64);
    c.qp_type = QpType::Ud;
    let mut r = rig(c);
    let e =
        r.sq.post_send(&[SendWr::rdma_read(1, DEST, 1, 0)
            .sge_list(&sg)
            .signaled(true)])
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
            r.sq.post_send(&[SendWr::new(1, op, DEST).sge_list(&eight).signaled(true)])
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
    let wrs: Vec<_> = (0..3)
        .map(|i| SendWr::send(i, DEST).signaled(true))
        .collect();
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
        s.post(&SendWr::send(1, DEST).signaled(true)).unwrap();
        s.post(&SendWr::send(2, DEST).signaled(true)).unwrap();
        assert_eq!(s.staged(), 2);
        s.abort();
    }
    {
        // dropping without complete is an abort too
        let mut s = r.sq.start();
        s.post(&SendWr::send(3, DEST).signaled(true)).unwrap();
    }
    assert_eq!(r.sq.producer_counter(), 0);
    assert_eq!(r.sq.pool().outstanding(), 0);
    assert!(r.sq.db.log.is_empty());
    assert!(r.desc.read(0, 256).iter().all(|&b| b == 0));
    let mut s = r.sq.start();
    s.post(&SendWr::send(4, DEST).signaled(true)).unwrap();
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
/// SGE count, hint, phase and both WQE sizes (inline payloads go through `build_wqe` itself).
#[test]
fn direct_wqe_words_equal_build_wqe() {
    let sg = [
        sge(0x1122_3344_5566_7788, 0x8000_0001, 0xffab_cdef),
        sge(0x99aa_bbcc_ddee_ff00, 7, 0x12_3456),
    ];
    let rdma_sg = [sge(0x0102_0304_0506_0708, 0xf_ffff, 0xff12_3456)];
    let dest = UdAddr {
        ah: 0xfedc,
        remote_qpn: 0xffff,
        remote_qkey: 0x8765_4321,
    };
    let data = [0x5au8; 20];
    let bufs: [&[u8]; 2] = [&data[..7], &data[7..]];
    for size in [64u32, 128] {
        let mut r = rig(cfg(4, size));
        let mut wrs = Vec::new();
        for n in 0..=2 {
            wrs.push(SendWr::send(1, dest).sge_list(&sg[..n]));
            wrs.push(SendWr::send_imm(2, dest, 0xdead_beef).sge_list(&sg[..n]));
        }
        for n in 0..=1 {
            wrs.push(
                SendWr::rdma_read(3, dest, 0x1234_5678, 0xaaaa_bbbb_cccc_dddd)
                    .sge_list(&rdma_sg[..n]),
            );
            wrs.push(SendWr::rdma_write(4, dest, 0x9abc, 0x1000).sge_list(&rdma_sg[..n]));
            wrs.push(SendWr::rdma_write_imm(5, dest, 0x9abc, 0x1000, 77).sge_list(&rdma_sg[..n]));
        }
        wrs.push(SendWr::send(6, dest).inline_data(&bufs));
        if size == 128 {
            wrs.push(SendWr::rdma_write(7, dest, 1, 2).inline_data(&bufs));
        }
        let n_wrs = wrs.len();
        for (k, wr) in wrs.iter_mut().enumerate() {
            *wr = wr.signaled(true).processing_hints(k as u8);
        }
        // Three passes over the 4-slot ring, so both phases are covered.
        for (k, wr) in wrs.iter().cycle().take(3 * n_wrs).enumerate() {
            assert_eq!(r.sq.post_send(std::slice::from_ref(wr)), Ok(1), "wr {k}");
            let slot = k % 4;
            let got = r.desc.read(slot * size as usize, size as usize);
            let req_id = u16::from_le_bytes([got[0], got[1]]);
            let phase = (k / 4) % 2 == 1;
            let want = build_wqe(wr, req_id, phase);
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
/// every req_id completes to its own wr_id. With and without `sq_sig_all`.
#[test]
fn plain_runs_and_general_wrs_in_one_list() {
    let sg = MIXED_SGES;
    let dest = MIXED_DEST;
    let bufs: [&[u8]; 1] = [&MIXED_INLINE];
    for size in [64u32, 128] {
        let mut c = cfg(8, size);
        // 3 WQEs per doorbell with 64-byte WQEs, 1 with 128-byte ones.
        c.max_tx_batch = if size == 64 { 3 } else { 2 };
        let batch = c.max_batch_wr() as u16;
        let mut r = rig(c);
        let mut pc = 0u16;
        let mut rung = Vec::new();
        for round in 0..6u64 {
            // 7 WRs per list: never more than the 8 free ids, and the ring end falls in a
            // different place of the list every round.
            let wrs: Vec<SendWr<'_>> = (0..7u64)
                .map(|k| {
                    let id = round * 10 + k;
                    let wr = match (round + k) % 5 {
                        0 => SendWr::send_imm(id, dest, 0xdead_beef).sge_list(&sg[..1]),
                        1 => SendWr::send(id, dest).sge_list(&sg),
                        2 => SendWr::send(id, dest).inline_data(&bufs),
                        3 if k % 2 == 0 => SendWr::send(id, dest),
                        _ => SendWr::send(id, dest).sge_list(&sg[1..]),
                    };
                    wr.signaled(true).processing_hints(k as u8)
                })
                .collect();
            // Every other list as on a QP with sq_sig_all (the WRs are signaled anyway).
            assert_eq!(
                r.sq.post_send_with(&wrs, round % 2 == 1),
                Ok(7),
                "round {round}"
            );
            for (k, wr) in wrs.iter().enumerate() {
                let n = pc.wrapping_add(k as u16);
                let slot = usize::from(n) % 8;
                let got = r.desc.read(slot * size as usize, size as usize);
                let req_id = u16::from_le_bytes([got[0], got[1]]);
                let phase = (n / 8) % 2 == 1;
                let want = build_wqe(wr, req_id, phase);
                assert_eq!(
                    got,
                    want.as_bytes()[..size as usize],
                    "size {size}, round {round}, wr {k}: {wr:?}"
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
        assert_eq!(r.sq.db.log, rung, "size {size}");
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
    let wrs: Vec<_> = (0..6)
        .map(|i| SendWr::send(i, DEST).sge_list(&sg).signaled(true))
        .collect();
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
    let good = SendWr::send(1, DEST).sge_list(&sg).signaled(true);
    let cases = [
        (
            SendWr::send(2, DEST).sge_list(&sg),
            EfaError::Unsignaled { qpn: 7 },
        ),
        (
            SendWr::send(
                2,
                UdAddr {
                    remote_qpn: 0x1_0000,
                    ..DEST
                },
            )
            .sge_list(&sg)
            .signaled(true),
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
    let mut r = rig(cfg(8, 64));
    let unsig = SendWr::send(3, DEST).sge_list(&sg);
    assert_eq!(r.sq.post_send_with(&[good, unsig], true), Ok(2));
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
/// free) are interleaved with lists, sessions (completed and aborted) and out-of-order
/// completions over many ring wraps, for both WQE sizes and several doorbell batch sizes.
/// After every step: each slot written holds exactly `build_wqe` of its WR with the phase of
/// its pass, no other slot changed, the doorbell log is exactly the expected producer
/// counters, a refused single WR took no id and wrote nothing, and every completion returns
/// its own wr_id (so no id was ever handed out twice).
#[test]
fn single_posts_interleaved_with_lists_sessions_and_completions() {
    let sg = MIXED_SGES;
    let dest = MIXED_DEST;
    let bufs: [&[u8]; 1] = [&MIXED_INLINE];
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
                0..=5 => SendWr::send(id, dest).sge_list(&sg[..1]),
                6 => SendWr::send_imm(id, dest, 0xdead_beef).sge_list(&sg[..1]),
                7 => SendWr::send(id, dest).sge_list(&sg),
                8 => SendWr::send(id, dest).inline_data(&bufs),
                _ => SendWr::send(id, dest),
            };
            wr.signaled(true).processing_hints(id as u8)
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
            let (wrs, posted): (Vec<SendWr<'_>>, usize) = match rng.below(10) {
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
                    let wr = SendWr::send(next_id, dest).sge_list(&sg[..1]);
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
                // A session of one or two, completed or aborted.
                _ => {
                    let n = rng.below(free.min(2) as u64 + 1);
                    let wrs: Vec<_> = (0..n).map(|k| wr_of(next_id + k, rng.below(9))).collect();
                    let mut s = r.sq.start();
                    for wr in &wrs {
                        s.post(wr).unwrap();
                    }
                    if rng.below(2) == 0 {
                        s.abort();
                        (vec![], 0)
                    } else {
                        assert_eq!(s.complete(), wrs.len());
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
                let want = build_wqe(wr, req_id, (usize::from(n) / DEPTH) % 2 == 1);
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
