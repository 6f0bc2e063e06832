//! Ring logic against a fake kernel: heap-backed queues with a valid `rxe_queue_buf` header, and
//! the kernel's side of each protocol (consume SQ/RQ elements, produce CQ elements) done with
//! the same atomics the real driver uses.
#![allow(unsafe_code)]

use std::vec::Vec;

use uverbs_uapi::rxe::{
    RxeAv, RxeRecvWqe, RxeSendWqe, RxeSendWrAtomic, RxeSendWrMw, RxeSendWrRdma,
    RXE_WQE_STATE_POSTED,
};
use uverbs_wr::{
    AccessFlags, AddressHandle, PostError, QpType, RecvWr, SendFlags, SendWr, Sge, UdDest, Wc,
    WcFlags, WcOpcode, WcStatus, WrData, WrOp,
};
use zerocopy::{FromBytes, IntoBytes};

use crate::cq::UverbsWc;
use crate::ring::fake::FakeMapping;
use crate::*;

const WQE: usize = core::mem::size_of::<RxeSendWqe>();

/// An address handle as the tests make them: a kernel AH index and the identity of the PD it
/// belongs to (the object model's `Ah` in the tests of this crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TestAh {
    pub(crate) num: u32,
    pub(crate) domain: usize,
}

impl AddressHandle for TestAh {
    fn ah_num(&self) -> u32 {
        self.num
    }
    fn domain(&self) -> usize {
        self.domain
    }
}

/// The protection domain of the test QPs.
pub(crate) const PD: usize = 0x5eed;

/// An AH of the test QPs' domain with kernel AH index `num`.
pub(crate) const fn ah(num: u32) -> TestAh {
    TestAh { num, domain: PD }
}

/// A send work request to [`TestAh`]s (the address-handle type fixed once, so a WR without a
/// destination needs no annotation).
pub(crate) type Wr<'a> = SendWr<'a, TestAh>;

pub(crate) fn open(m: &FakeMapping) -> Queue {
    // SAFETY: every test keeps the mapping alive longer than the queue (the rig structs below
    // declare the queue first so it is dropped first) and only the fake kernel touches it.
    unsafe { Queue::from_raw(m.base(), m.len(), None) }.unwrap()
}

struct SqRig {
    sq: SendQueue,
    m: FakeMapping,
}

fn rc_caps() -> SendQueueCaps {
    SendQueueCaps {
        qp_type: QpType::Rc,
        domain: PD,
        max_send_sge: 4,
        max_inline_data: 64,
    }
}

fn sq_rig(log2_slots: u32, caps: SendQueueCaps) -> SqRig {
    let m = FakeMapping::new(9, log2_slots); // 512-byte elements, like the kernel's rounding
    let sq = SendQueue::new(open(&m), caps).unwrap();
    SqRig { sq, m }
}

/// Kernel side: next published send WQE, split into the fixed part and the data area.
fn take_wqe(m: &FakeMapping) -> Option<(RxeSendWqe, Vec<u8>)> {
    let bytes = m.kernel_consume()?;
    let (wqe, _) = RxeSendWqe::read_from_prefix(&bytes).unwrap();
    Some((wqe, bytes[WQE..].to_vec()))
}

fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge { addr, length, lkey }
}

fn sges_in(data: &[u8], n: usize) -> Vec<Sge> {
    (0..n)
        .map(|i| Sge::read_from_bytes(&data[i * 16..(i + 1) * 16]).unwrap())
        .collect()
}

fn assert_dma(w: &RxeSendWqe, length: u32, num_sge: u32) {
    assert_eq!(w.dma.length, length);
    assert_eq!(w.dma.resid, length);
    assert_eq!(w.dma.num_sge, num_sge);
    assert_eq!(w.dma.cur_sge, 0);
    assert_eq!(w.dma.sge_offset, 0);
    assert_eq!(w.state, RXE_WQE_STATE_POSTED);
    assert_eq!(w.status, 0);
}

#[test]
fn queues_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<Queue>();
    assert_send::<SendQueue>();
    assert_send::<RecvQueue>();
    assert_send::<CompletionQueue>();
}

// ----- send WQE bytes, opcode by opcode ------------------------------------------------------

#[test]
fn every_opcode_writes_the_right_fields() {
    let mut r = sq_rig(4, rc_caps());
    let list = [sge(0x1000, 8, 0x11)];
    let bind = WrOp::BindMw {
        mw_rkey: 0x100,
        new_rkey: 0x101,
        mr_lkey: 0x55,
        addr: 0x7000,
        length: 0x800,
        access: AccessFlags::REMOTE_WRITE,
    };
    let wrs = [
        Wr::new(1, WrOp::Send).sge(&list).flags(SendFlags::SIGNALED),
        Wr::new(
            2,
            WrOp::SendWithImm {
                imm_data: 0xA1B2_C3D4,
            },
        )
        .sge(&list),
        Wr::new(
            3,
            WrOp::SendWithInv {
                invalidate_rkey: 0x77,
            },
        )
        .sge(&list),
        Wr::new(
            4,
            WrOp::RdmaWrite {
                remote_addr: 0xDEAD_0000,
                rkey: 0x99,
            },
        )
        .sge(&list),
        Wr::new(
            5,
            WrOp::RdmaWriteWithImm {
                remote_addr: 0xBEEF_0000,
                rkey: 0x98,
                imm_data: 7,
            },
        )
        .sge(&list),
        Wr::new(
            6,
            WrOp::RdmaRead {
                remote_addr: 0xCAFE_0000,
                rkey: 0x97,
            },
        )
        .sge(&list)
        .flags(SendFlags::FENCE),
        Wr::new(
            7,
            WrOp::AtomicCmpAndSwp {
                remote_addr: 0x8000,
                rkey: 0x96,
                compare: 10,
                swap: 20,
            },
        )
        .sge(&list),
        Wr::new(
            8,
            WrOp::AtomicFetchAndAdd {
                remote_addr: 0x8008,
                rkey: 0x95,
                add: 3,
            },
        )
        .sge(&list)
        .flags(SendFlags::SOLICITED | SendFlags::SIGNALED),
        Wr::new(
            9,
            WrOp::LocalInv {
                invalidate_rkey: 0x1234,
            },
        ),
        Wr::new(10, bind),
    ];
    for wr in &wrs {
        r.sq.post(wr).unwrap();
    }
    assert_eq!(r.sq.pending(), 10);
    assert!(take_wqe(&r.m).is_none(), "nothing visible before publish");
    assert_eq!(r.sq.publish(), 10);
    assert_eq!(r.sq.pending(), 0);

    let mut got = Vec::new();
    while let Some(w) = take_wqe(&r.m) {
        got.push(w);
    }
    assert_eq!(got.len(), 10);
    for (i, (w, _)) in got.iter().enumerate() {
        assert_eq!(w.wr.wr_id, i as u64 + 1);
        assert_eq!(w.wr.opcode, SendOpcode::of(&wrs[i].op) as u32);
        assert_eq!(w.wr.reserved, 0);
    }
    // IB_UVERBS_WR_* numbers.
    let ops: Vec<u32> = got.iter().map(|(w, _)| w.wr.opcode).collect();
    assert_eq!(ops, [2, 3, 9, 0, 1, 4, 5, 6, 7, 8]);

    let (w, d) = &got[0];
    assert_eq!(w.wr.send_flags, 2);
    assert_dma(w, 8, 1);
    assert_eq!(sges_in(d, 1), list);
    assert_eq!(w.iova, 0);

    let (w, _) = &got[1];
    assert_eq!(
        w.wr.ex,
        [0xA1, 0xB2, 0xC3, 0xD4],
        "imm_data stored big-endian"
    );
    assert_eq!(w.wr.imm_data(), 0xA1B2_C3D4);

    assert_eq!(got[2].0.wr.invalidate_rkey(), 0x77);

    let (w, _) = &got[3];
    assert_eq!(w.wr.rdma().remote_addr, 0xDEAD_0000);
    assert_eq!(w.wr.rdma().rkey, 0x99);
    assert_eq!(w.iova, 0xDEAD_0000);

    let (w, _) = &got[4];
    assert_eq!(w.wr.rdma().remote_addr, 0xBEEF_0000);
    assert_eq!(w.wr.rdma().rkey, 0x98);
    assert_eq!(w.wr.imm_data(), 7);

    let (w, _) = &got[5];
    assert_eq!(w.wr.rdma().rkey, 0x97);
    assert_eq!(w.wr.send_flags, 1);
    assert_eq!(w.iova, 0xCAFE_0000);

    let (w, d) = &got[6];
    let a = w.wr.atomic();
    assert_eq!(
        (a.remote_addr, a.rkey, a.compare_add, a.swap),
        (0x8000, 0x96, 10, 20)
    );
    assert_eq!(w.iova, 0x8000);
    assert_dma(w, 8, 1);
    assert_eq!(sges_in(d, 1), list);

    let (w, _) = &got[7];
    let a = w.wr.atomic();
    assert_eq!(
        (a.remote_addr, a.rkey, a.compare_add, a.swap),
        (0x8008, 0x95, 3, 0)
    );
    assert_eq!(w.wr.send_flags, 6);

    let (w, _) = &got[8];
    assert_eq!(w.wr.invalidate_rkey(), 0x1234);
    assert_dma(w, 0, 0);

    let (w, _) = &got[9];
    let mw = w.wr.mw();
    assert_eq!(
        (mw.addr, mw.length, mw.mr_lkey, mw.mw_rkey, mw.rkey, mw.access),
        (0x7000, 0x800, 0x55, 0x100, 0x101, 0x2)
    );
}

/// What a send WQE's fixed part must be: a zeroed `rxe_send_wqe` with the fields `wr` sets,
/// built through the uapi setters (how `post` built it before it wrote in place).
fn expected_header(wr: &Wr<'_>, length: u32, num_sge: u32) -> RxeSendWqe {
    let mut w = RxeSendWqe::default();
    w.wr.wr_id = wr.wr_id;
    w.wr.opcode = SendOpcode::of(&wr.op) as u32;
    let inline = !matches!(wr.data, WrData::Sge(_));
    w.wr.send_flags = wr.flags.bits() | if inline { 1 << 3 } else { 0 };
    w.state = RXE_WQE_STATE_POSTED;
    match wr.op {
        WrOp::Send => {}
        WrOp::SendWithImm { imm_data } => w.wr.set_imm_data(imm_data),
        WrOp::SendWithInv { invalidate_rkey } | WrOp::LocalInv { invalidate_rkey } => {
            w.wr.set_invalidate_rkey(invalidate_rkey)
        }
        WrOp::RdmaWrite { remote_addr, rkey }
        | WrOp::RdmaRead { remote_addr, rkey }
        | WrOp::AtomicWrite {
            remote_addr, rkey, ..
        } => {
            w.wr.set_rdma(&RxeSendWrRdma {
                remote_addr,
                rkey,
                reserved: 0,
            });
            w.iova = remote_addr;
        }
        WrOp::RdmaWriteWithImm {
            remote_addr,
            rkey,
            imm_data,
        } => {
            w.wr.set_rdma(&RxeSendWrRdma {
                remote_addr,
                rkey,
                reserved: 0,
            });
            w.wr.set_imm_data(imm_data);
            w.iova = remote_addr;
        }
        WrOp::AtomicCmpAndSwp {
            remote_addr,
            rkey,
            compare,
            swap,
        } => {
            w.wr.set_atomic(&RxeSendWrAtomic {
                remote_addr,
                compare_add: compare,
                swap,
                rkey,
                reserved: 0,
            });
            w.iova = remote_addr;
        }
        WrOp::AtomicFetchAndAdd {
            remote_addr,
            rkey,
            add,
        } => {
            w.wr.set_atomic(&RxeSendWrAtomic {
                remote_addr,
                compare_add: add,
                swap: 0,
                rkey,
                reserved: 0,
            });
            w.iova = remote_addr;
        }
        WrOp::BindMw {
            mw_rkey,
            new_rkey,
            mr_lkey,
            addr,
            length,
            access,
        } => w.wr.set_mw(&RxeSendWrMw {
            addr,
            length,
            mr_lkey,
            mw_rkey,
            rkey: new_rkey,
            access: access.bits(),
        }),
    }
    w.dma.length = length;
    w.dma.resid = length;
    w.dma.num_sge = num_sge;
    w
}

#[test]
fn wqe_written_in_place_is_exactly_a_zeroed_wqe_with_its_fields_over_stale_slots() {
    // Every slot full of stale bytes first (as a reused slot is), so a field the in-place
    // write forgot to zero shows up.
    let m = FakeMapping::new(9, 4);
    let stale = [0xa5u8; 512];
    while m.kernel_produce(&stale) {}
    m.set_consumer(8);
    while m.kernel_produce(&stale) {}
    m.set_producer(0);
    m.set_consumer(0);
    assert!((0..16).all(|i| m.peek_slot(i) == stale));
    let mut sq = SendQueue::new(open(&m), rc_caps()).unwrap();
    let list = [sge(0x1000, 8, 0x11), sge(0x2000, 16, 0x12)];
    let bind = WrOp::BindMw {
        mw_rkey: 0x100,
        new_rkey: 0x101,
        mr_lkey: 0x55,
        addr: 0x7000,
        length: 0x800,
        access: AccessFlags::REMOTE_WRITE,
    };
    let inline = [0x3cu8; 24];
    let wrs = [
        Wr::new(1, WrOp::Send).sge(&list[..1]),
        Wr::new(2, WrOp::SendWithImm { imm_data: 0xA1B2 }).inline(&inline),
        Wr::new(3, WrOp::SendWithInv { invalidate_rkey: 7 }).sge(&list),
        Wr::new(
            4,
            WrOp::RdmaWrite {
                remote_addr: 0xDEAD_0000,
                rkey: 0x99,
            },
        )
        .sge(&list)
        .flags(SendFlags::SIGNALED | SendFlags::FENCE),
        Wr::new(
            5,
            WrOp::RdmaWriteWithImm {
                remote_addr: 0xBEEF_0000,
                rkey: 0x98,
                imm_data: 7,
            },
        ),
        Wr::new(
            6,
            WrOp::RdmaRead {
                remote_addr: 0xCAFE_0000,
                rkey: 0x97,
            },
        )
        .sge(&list[..1]),
        Wr::new(
            7,
            WrOp::AtomicCmpAndSwp {
                remote_addr: 0x8000,
                rkey: 0x96,
                compare: 10,
                swap: 20,
            },
        )
        .sge(&list[..1]),
        Wr::new(
            8,
            WrOp::AtomicFetchAndAdd {
                remote_addr: 0x8008,
                rkey: 0x95,
                add: 3,
            },
        )
        .sge(&list[..1])
        .flags(SendFlags::SOLICITED),
        Wr::new(
            9,
            WrOp::LocalInv {
                invalidate_rkey: 0x1234,
            },
        ),
        Wr::new(10, bind),
    ];
    for wr in &wrs {
        sq.post(wr).unwrap();
    }
    sq.publish();
    for wr in &wrs {
        let bytes = m.kernel_consume().unwrap();
        let (length, num_sge, data): (u32, u32, &[u8]) = match wr.data {
            WrData::Sge(s) => (
                s.iter().map(|x| x.length).sum(),
                s.len() as u32,
                s.as_bytes(),
            ),
            WrData::Inline(d) => (d.len() as u32, 0, d),
        };
        let want = expected_header(wr, length, num_sge);
        assert_eq!(&bytes[..WQE], want.as_bytes(), "wr_id {}", wr.wr_id);
        assert_eq!(&bytes[WQE..WQE + data.len()], data, "wr_id {}", wr.wr_id);
        // Past the data the slot is not part of the WQE: left as it was.
        assert!(bytes[WQE + data.len()..].iter().all(|&b| b == 0xa5));
    }
}

#[test]
fn inline_and_multi_sge() {
    let mut r = sq_rig(3, rc_caps());
    let msg = b"hello rxe, inline";
    r.sq.post(&Wr::new(1, WrOp::Send).inline(msg)).unwrap();
    // A list of inline pieces is the `wr_*` builder's (`ibv_wr_set_inline_data_list`).
    let pieces: [&[u8]; 3] = [b"ab", b"", b"cdef"];
    r.sq.wr_start().unwrap();
    r.sq.wr_rdma_write(2, SendFlags::empty(), 1, 64).unwrap();
    r.sq.wr_set_inline_data_list(&pieces).unwrap();
    assert_eq!(r.sq.wr_complete(), Ok(1));
    let list = [
        sge(0x10, 100, 1),
        sge(0x2000, 28, 2),
        sge(0x3000, 0, 3),
        sge(0x4000, 1, 4),
    ];
    r.sq.post(&Wr::new(3, WrOp::Send).sge(&list)).unwrap();
    let max_inline = [0x5au8; 64];
    r.sq.post(&Wr::new(4, WrOp::Send).inline(&max_inline))
        .unwrap();
    r.sq.publish();

    let (w, d) = take_wqe(&r.m).unwrap();
    assert_eq!(w.wr.send_flags, 8, "IB_SEND_INLINE set");
    assert_dma(&w, msg.len() as u32, 0);
    assert_eq!(&d[..msg.len()], msg);

    let (w, d) = take_wqe(&r.m).unwrap();
    assert_eq!(w.wr.send_flags, 8);
    assert_dma(&w, 6, 0);
    assert_eq!(&d[..6], b"abcdef");

    let (w, d) = take_wqe(&r.m).unwrap();
    assert_eq!(w.wr.send_flags, 0);
    assert_dma(&w, 129, 4);
    assert_eq!(sges_in(&d, 4), list);

    let (w, d) = take_wqe(&r.m).unwrap();
    assert_dma(&w, 64, 0);
    assert_eq!(&d[..64], &max_inline);
}

/// A UD send names its destination by the kernel's AH index; the address vector of `wr.ud`
/// stays zero (the kernel takes it from the AH), even over a slot full of stale bytes.
/// (Sends by a full address vector, for kernels before 5.10 whose CREATE_AH returned no
/// index, are gone: such an AH is refused, see `ah_without_an_index_is_refused`.)
#[test]
fn ud_destination_by_ah_num() {
    let caps = SendQueueCaps {
        qp_type: QpType::Ud,
        ..rc_caps()
    };
    let mut r = stale_sq(caps);
    let (a17, a18) = (ah(17), ah(18));
    r.sq.post(
        &Wr::new(1, WrOp::Send)
            .inline(b"x")
            .ud(&a17, 0x12, 0x1111_1111),
    )
    .unwrap();
    r.sq.post(&Wr::new(2, WrOp::SendWithImm { imm_data: 5 }).ud(&a18, 0x13, 0x2222))
        .unwrap();
    r.sq.publish();

    let (w, _) = take_wqe(&r.m).unwrap();
    let ud = w.wr.ud();
    assert_eq!(
        (ud.remote_qpn, ud.remote_qkey, ud.ah_num),
        (0x12, 0x1111_1111, 17)
    );
    assert_eq!(ud.av, RxeAv::default());

    let (w, _) = take_wqe(&r.m).unwrap();
    let ud = w.wr.ud();
    assert_eq!(
        (ud.remote_qpn, ud.remote_qkey, ud.ah_num),
        (0x13, 0x2222, 18)
    );
    assert_eq!(ud.av, RxeAv::default());
    // imm shares `ex`, not the union: both survive.
    assert_eq!(w.wr.imm_data(), 5);
}

/// A UD send through an AH of another protection domain is refused, by `post` and by
/// `wr_set_ud_addr` (an error the batch keeps: `wr_complete` returns it and posts nothing);
/// nothing of it reaches the kernel. The same AH number in the QP's own domain goes.
#[test]
fn ud_send_through_an_ah_of_another_pd_is_refused() {
    let caps = SendQueueCaps {
        qp_type: QpType::Ud,
        ..rc_caps()
    };
    let mut r = sq_rig(3, caps);
    let foreign = TestAh {
        num: 5,
        domain: PD + 1,
    };
    assert_eq!(
        r.sq.post(&Wr::new(1, WrOp::Send).ud(&foreign, 9, 1)),
        Err(WrError::ForeignAh)
    );
    assert_eq!(r.sq.pending(), 0, "refused before anything was written");
    // The domain is checked before the index: a foreign AH without one is foreign.
    let foreign_no_index = TestAh {
        num: 0,
        domain: PD + 1,
    };
    assert_eq!(
        r.sq.post(&Wr::new(1, WrOp::Send).ud(&foreign_no_index, 9, 1)),
        Err(WrError::ForeignAh)
    );

    r.sq.wr_start().unwrap();
    r.sq.wr_send(2, SendFlags::empty()).unwrap();
    assert_eq!(
        r.sq.wr_set_ud_addr(UdDest::new(&foreign, 9, 1)),
        Err(WrError::ForeignAh)
    );
    // Sticky: a later good destination does not make the batch whole again.
    assert_eq!(
        r.sq.wr_set_ud_addr(UdDest::new(&ah(5), 9, 1)),
        Err(WrError::ForeignAh)
    );
    assert_eq!(r.sq.wr_complete(), Err(WrError::ForeignAh));
    assert_eq!(r.sq.publish(), 0);
    assert!(take_wqe(&r.m).is_none());

    // The same number in the QP's domain goes, both ways.
    let own = ah(5);
    r.sq.post(&Wr::new(3, WrOp::Send).ud(&own, 9, 1)).unwrap();
    r.sq.wr_start().unwrap();
    r.sq.wr_send(4, SendFlags::empty()).unwrap();
    r.sq.wr_set_ud_addr(UdDest::new(&own, 9, 1)).unwrap();
    assert_eq!(r.sq.wr_complete(), Ok(1));
    let ids: Vec<(u64, u32)> = core::iter::from_fn(|| take_wqe(&r.m))
        .map(|(w, _)| (w.wr.wr_id, w.wr.ud().ah_num))
        .collect();
    assert_eq!(ids, [(3, 5), (4, 5)]);
}

/// An AH without a kernel AH index (`ah_num` 0: CREATE_AH of a kernel before 5.10) cannot be
/// named by a WQE; `post` and `wr_set_ud_addr` refuse it, and nothing reaches the kernel.
#[test]
fn ah_without_an_index_is_refused() {
    let caps = SendQueueCaps {
        qp_type: QpType::Ud,
        ..rc_caps()
    };
    let mut r = sq_rig(3, caps);
    let none = ah(0);
    assert_eq!(
        r.sq.post(&Wr::new(1, WrOp::Send).ud(&none, 9, 1)),
        Err(WrError::AhWithoutIndex)
    );
    assert_eq!(r.sq.pending(), 0);
    r.sq.wr_start().unwrap();
    r.sq.wr_send(2, SendFlags::empty()).unwrap();
    assert_eq!(
        r.sq.wr_set_ud_addr(UdDest::new(&none, 9, 1)),
        Err(WrError::AhWithoutIndex)
    );
    assert_eq!(r.sq.wr_complete(), Err(WrError::AhWithoutIndex));
    assert_eq!(r.sq.publish(), 0);
    assert!(take_wqe(&r.m).is_none());
    // The refusals say why.
    assert!(WrError::AhWithoutIndex
        .to_string()
        .contains("no kernel AH index"));
    assert!(WrError::ForeignAh.to_string().contains("another PD"));
}

/// rxe has send queues of RC, UC and UD QPs only: `SendQueue::new` refuses every other type
/// (its opcode table has no column for them, so a queue of one could post nothing right).
#[test]
fn qp_types_rxe_lacks_have_no_send_queue() {
    for qp_type in [
        QpType::RawPacket,
        QpType::XrcSend,
        QpType::XrcRecv,
        QpType::Srd,
    ] {
        let m = FakeMapping::new(9, 3);
        let caps = SendQueueCaps {
            qp_type,
            ..rc_caps()
        };
        assert_eq!(
            SendQueue::new(open(&m), caps).unwrap_err(),
            RingError::UnsupportedQpType { qp_type },
            "{qp_type:?}"
        );
    }
    for qp_type in [QpType::Rc, QpType::Uc, QpType::Ud] {
        let m = FakeMapping::new(9, 3);
        let caps = SendQueueCaps {
            qp_type,
            ..rc_caps()
        };
        assert!(SendQueue::new(open(&m), caps).is_ok(), "{qp_type:?}");
    }
}

// ----- validation ----------------------------------------------------------------------------

#[test]
fn send_validation_names_the_failed_check() {
    let mut r = sq_rig(3, rc_caps());
    let eight = [sge(0x1000, 8, 1)];
    let five = [sge(0x1000, 5, 1); 5];
    let a1 = ah(1);
    let cases: Vec<(Wr<'_>, WrError)> = vec![
        (
            Wr::new(1, WrOp::Send).sge(&five),
            WrError::TooManySge {
                num_sge: 5,
                max_sge: 4,
            },
        ),
        (
            Wr::new(1, WrOp::Send).inline(&[0u8; 65]),
            WrError::InlineTooLong {
                len: 65,
                max_inline: 64,
            },
        ),
        (
            Wr::new(
                1,
                WrOp::RdmaRead {
                    remote_addr: 0,
                    rkey: 1,
                },
            )
            .inline(b"x"),
            WrError::InlineNotAllowed {
                opcode: SendOpcode::RdmaRead,
            },
        ),
        (
            Wr::new(
                1,
                WrOp::AtomicFetchAndAdd {
                    remote_addr: 8,
                    rkey: 1,
                    add: 1,
                },
            )
            .sge(&five[..1]),
            WrError::AtomicLength { length: 5 },
        ),
        (
            Wr::new(
                1,
                WrOp::AtomicFetchAndAdd {
                    remote_addr: 8,
                    rkey: 1,
                    add: 1,
                },
            ),
            WrError::AtomicLength { length: 0 },
        ),
        (
            Wr::new(
                1,
                WrOp::AtomicCmpAndSwp {
                    remote_addr: 0x1004,
                    rkey: 1,
                    compare: 0,
                    swap: 0,
                },
            )
            .sge(&eight),
            WrError::AtomicMisaligned {
                remote_addr: 0x1004,
            },
        ),
        (
            Wr::new(
                1,
                WrOp::AtomicCmpAndSwp {
                    remote_addr: 8,
                    rkey: 1,
                    compare: 0,
                    swap: 0,
                },
            )
            .inline(&[0; 8]),
            WrError::InlineNotAllowed {
                opcode: SendOpcode::AtomicCmpAndSwp,
            },
        ),
        (
            Wr::new(1, WrOp::LocalInv { invalidate_rkey: 1 }).sge(&eight),
            WrError::DataNotAllowed {
                opcode: SendOpcode::LocalInv,
            },
        ),
        (
            Wr::new(
                1,
                WrOp::BindMw {
                    mw_rkey: 0,
                    new_rkey: 0,
                    mr_lkey: 0,
                    addr: 0,
                    length: 0,
                    access: AccessFlags::ZERO_BASED,
                },
            ),
            WrError::BindMwZeroBased,
        ),
        (
            Wr::new(1, WrOp::Send).ud(&a1, 1, 1),
            WrError::UdAddressOnConnectedQp {
                qp_type: QpType::Rc,
            },
        ),
    ];
    for (wr, want) in &cases {
        assert_eq!(r.sq.post(wr), Err(*want), "{wr:?}");
    }
    assert_eq!(r.sq.pending(), 0, "refused WRs leave the ring untouched");

    // Lengths that overflow the WQE's u32.
    let huge = [sge(0, u32::MAX, 1), sge(0, 1, 1)];
    assert_eq!(
        r.sq.post(&Wr::new(1, WrOp::Send).sge(&huge)),
        Err(WrError::LengthOverflow { length: 1 << 32 })
    );

    // Opcode support per QP type.
    let mut ud = sq_rig(
        3,
        SendQueueCaps {
            qp_type: QpType::Ud,
            ..rc_caps()
        },
    );
    assert_eq!(
        ud.sq.post(&Wr::new(
            1,
            WrOp::RdmaWrite {
                remote_addr: 0,
                rkey: 0
            }
        )),
        Err(WrError::OpcodeNotSupported {
            opcode: SendOpcode::RdmaWrite,
            qp_type: QpType::Ud
        })
    );
    assert_eq!(
        ud.sq.post(&Wr::new(1, WrOp::Send)),
        Err(WrError::UdAddressMissing)
    );
    let mut uc = sq_rig(
        3,
        SendQueueCaps {
            qp_type: QpType::Uc,
            ..rc_caps()
        },
    );
    assert_eq!(
        uc.sq.post(&Wr::new(
            1,
            WrOp::RdmaRead {
                remote_addr: 0,
                rkey: 0
            }
        )),
        Err(WrError::OpcodeNotSupported {
            opcode: SendOpcode::RdmaRead,
            qp_type: QpType::Uc
        })
    );
    uc.sq
        .post(&Wr::new(
            1,
            WrOp::RdmaWrite {
                remote_addr: 0,
                rkey: 0,
            },
        ))
        .unwrap();
}

#[test]
fn caps_that_do_not_fit_the_element_are_refused() {
    let m = FakeMapping::new(8, 2); // 256-byte elements: 48 bytes of data room
    let err = SendQueue::new(
        open(&m),
        SendQueueCaps {
            max_send_sge: 4,
            ..rc_caps()
        },
    );
    assert_eq!(
        err.unwrap_err(),
        RingError::CapsExceedSlot {
            cap: "max_send_sge",
            requested: 4,
            fits: 3
        }
    );
    let err = SendQueue::new(
        open(&m),
        SendQueueCaps {
            max_send_sge: 3,
            max_inline_data: 49,
            ..rc_caps()
        },
    );
    assert!(matches!(
        err.unwrap_err(),
        RingError::CapsExceedSlot {
            cap: "max_inline_data",
            ..
        }
    ));

    let m = FakeMapping::new(7, 2); // 128 bytes < 208
    assert!(matches!(
        SendQueue::new(open(&m), rc_caps()).unwrap_err(),
        RingError::ElemTooSmall {
            need: 208,
            found: 128
        }
    ));
    let m = FakeMapping::new(6, 2); // 64 bytes: 40 + 1 SGE fits, 2 do not
    assert!(RecvQueue::new(open(&m), 1).is_ok());
    assert!(matches!(
        RecvQueue::new(open(&m), 2).unwrap_err(),
        RingError::CapsExceedSlot {
            cap: "max_recv_sge",
            requested: 2,
            fits: 1
        }
    ));
    let m = FakeMapping::new(5, 2); // 32 bytes < ib_uverbs_wc
    assert!(matches!(
        CompletionQueue::new(open(&m)).unwrap_err(),
        RingError::ElemTooSmall {
            need: 48,
            found: 32
        }
    ));
}

// ----- full queue, wraparound, distrust ----------------------------------------------------

#[test]
fn send_queue_full_then_drains_and_wraps() {
    let mut r = sq_rig(2, rc_caps()); // 4 slots, capacity 3
    let list = [sge(0x1000, 4, 1)];
    let mut next_id = 0u64;
    let mut expect_id = 0u64;
    for _round in 0..5 {
        for _ in 0..3 {
            r.sq.post(&Wr::new(next_id, WrOp::Send).sge(&list)).unwrap();
            next_id += 1;
        }
        assert_eq!(
            r.sq.post(&Wr::new(999, WrOp::Send)),
            Err(WrError::QueueFull { capacity: 3 })
        );
        r.sq.publish();
        assert_eq!(r.sq.outstanding().unwrap(), 3);
        // Still full while the kernel has not consumed anything.
        assert!(matches!(
            r.sq.post(&Wr::new(999, WrOp::Send)),
            Err(WrError::QueueFull { .. })
        ));
        while let Some((w, d)) = take_wqe(&r.m) {
            assert_eq!(w.wr.wr_id, expect_id);
            assert_eq!(sges_in(&d, 1), list);
            expect_id += 1;
        }
        assert_eq!(r.sq.outstanding().unwrap(), 0);
    }
    // 15 WQEs through a 4-slot ring: more than three full wraps.
    assert_eq!(expect_id, 15);
    assert_eq!(r.m.producer(), 15 % 4);
}

#[test]
fn kernel_consumer_past_published_is_corruption() {
    let mut r = sq_rig(3, rc_caps());
    r.sq.post(&Wr::new(1, WrOp::Send)).unwrap();
    r.sq.publish();
    // The kernel claims to have consumed 3 WQEs, but only 1 was published.
    r.m.set_consumer(3);
    assert!(matches!(
        r.sq.outstanding(),
        Err(RingError::IndexOutsideWindow {
            index: IndexKind::Consumer,
            value: 3,
            ..
        })
    ));
    r.m.set_consumer(8);
    assert!(matches!(
        r.sq.outstanding(),
        Err(RingError::IndexOutOfRange {
            index: IndexKind::Consumer,
            value: 8,
            index_mask: 7
        })
    ));
}

/// Both ways of finding room on a queue that looks full reload the kernel's consumer index
/// and distrust it: an index outside its window is not taken as room. The fast path
/// declines (nothing moved) and `post` names the corruption.
#[test]
fn full_queue_check_reloads_a_hostile_consumer() {
    let mut r = sq_rig(1, rc_caps()); // 2 slots, capacity 1
    let list = [sge(0x1000, 8, 0x11)];
    assert!(r
        .sq
        .post_fast(&Wr::new(1, WrOp::Send).flags(SendFlags::empty()).sge(&list)));
    r.sq.publish();
    r.m.set_consumer(0xffff);
    let index = r.sq.producer_index();
    assert!(!r
        .sq
        .post_fast(&Wr::new(2, WrOp::Send).flags(SendFlags::empty()).sge(&list)));
    assert_eq!(r.sq.producer_index(), index, "declined, not moved");
    assert_eq!(
        r.sq.post(&Wr::new(2, WrOp::Send)),
        Err(WrError::Ring(RingError::IndexOutOfRange {
            index: IndexKind::Consumer,
            value: 0xffff,
            index_mask: 1
        }))
    );
}

/// A queue of depth 1 (a latency test's): every post after the first finds the last seen
/// consumer index saying "full"; the fast path reloads it and takes the slot the kernel freed,
/// round after round, through the wrap.
#[test]
fn post_fast_on_a_queue_of_depth_one_takes_every_post() {
    let mut r = sq_rig(1, rc_caps()); // 2 slots, capacity 1
    let list = [sge(0x1000, 8, 0x11)];
    for n in 0..5u64 {
        assert!(
            r.sq.post_fast(&Wr::new(n, WrOp::Send).flags(SendFlags::SIGNALED).sge(&list)),
            "post {n}"
        );
        assert!(!r.sq.post_fast(
            &Wr::new(99, WrOp::Send)
                .flags(SendFlags::SIGNALED)
                .sge(&list)
        ));
        r.sq.publish();
        let (wqe, _) = take_wqe(&r.m).expect("the posted WQE");
        assert_eq!(wqe.wr.wr_id, n);
    }
}

#[test]
fn recv_queue_posts_wraps_and_validates() {
    let m = FakeMapping::new(7, 2); // 128-byte elements, 4 slots
    let mut rq = RecvQueue::new(open(&m), 5).unwrap();
    assert_eq!(
        rq.post(1, &[sge(0, 1, 1); 6]),
        Err(WrError::TooManySge {
            num_sge: 6,
            max_sge: 5
        })
    );
    let mut expect = 0u64;
    let mut id = 0u64;
    for round in 0..4u64 {
        let n = 1 + (round as usize % 3);
        for _ in 0..n {
            let list: Vec<Sge> = (0..=(id % 5))
                .map(|k| sge(0x100 * k, 10 + k as u32, 7))
                .collect();
            rq.post(id, &list).unwrap();
            id += 1;
        }
        if n == 3 {
            assert_eq!(rq.post(99, &[]), Err(WrError::QueueFull { capacity: 3 }));
        }
        assert_eq!(
            m.kernel_consume(),
            None,
            "unpublished receives are invisible"
        );
        assert_eq!(rq.publish(), n as u32);
        while let Some(bytes) = m.kernel_consume() {
            let (w, rest) = RxeRecvWqe::read_from_prefix(&bytes).unwrap();
            let k = (expect % 5) as usize + 1;
            assert_eq!(w.wr_id, expect);
            assert_eq!(w.dma.num_sge as usize, k);
            let want: Vec<Sge> = (0..k as u64)
                .map(|j| sge(0x100 * j, 10 + j as u32, 7))
                .collect();
            assert_eq!(sges_in(rest, k), want);
            assert_eq!(w.dma.length, want.iter().map(|s| s.length).sum::<u32>());
            assert_eq!(w.dma.resid, w.dma.length);
            expect += 1;
        }
    }
    for _ in 0..6 {
        rq.post(id, &[]).unwrap();
        rq.publish();
        m.kernel_consume().unwrap();
        id += 1;
    }
    assert_eq!(expect + 6, id);
    assert!(id > 3 * 4, "more than three wraps");
}

/// `post_list` posts the receives of a list in order and publishes them with one store; the
/// first refused one (too many SGEs, a length beyond 2^32-1, a full queue) stops the list and
/// is named by its index, and the receives before it are posted *and* published (the kernel
/// sees them), those from it on are not.
#[test]
fn recv_post_list_names_the_first_refused_wr_and_publishes_the_ones_before() {
    let m = FakeMapping::new(7, 3); // 128-byte elements, 8 slots: capacity 7
    let mut rq = RecvQueue::new(open(&m), 2).unwrap();
    let one = [sge(0x1000, 10, 7)];
    let two = [sge(0x2000, 20, 7), sge(0x3000, 30, 7)];
    let three = [sge(0, 1, 7); 3];
    let huge = [sge(0, u32::MAX, 7), sge(0, 1, 7)];

    // All good: all posted and published, nothing left pending.
    let wrs = [
        RecvWr::new(1, &one),
        RecvWr::new(2, &two),
        RecvWr::new(3, &[]),
    ];
    assert_eq!(rq.post_list(&wrs), Ok(()));
    assert_eq!(rq.pending(), 0, "published by the call");
    // An empty list is a no-op.
    assert_eq!(rq.post_list(&[]), Ok(()));
    let got = |m: &FakeMapping| -> Vec<(u64, u32, u32)> {
        core::iter::from_fn(|| m.kernel_consume())
            .map(|b| {
                let (w, _) = RxeRecvWqe::read_from_prefix(&b).unwrap();
                (w.wr_id, w.dma.num_sge, w.dma.length)
            })
            .collect()
    };
    assert_eq!(got(&m), [(1, 1, 10), (2, 2, 50), (3, 0, 0)]);

    // A refusal in the middle: index 2, the two before it visible to the kernel.
    let wrs = [
        RecvWr::new(10, &one),
        RecvWr::new(11, &two),
        RecvWr::new(12, &three),
        RecvWr::new(13, &one),
    ];
    assert_eq!(
        rq.post_list(&wrs),
        Err(PostError::new(
            2,
            WrError::TooManySge {
                num_sge: 3,
                max_sge: 2
            }
        ))
    );
    assert_eq!(rq.pending(), 0, "the ones before the refusal are published");
    assert_eq!(got(&m), [(10, 1, 10), (11, 2, 50)]);

    // The first one refused: nothing posted.
    let wrs = [RecvWr::new(20, &huge), RecvWr::new(21, &one)];
    assert_eq!(
        rq.post_list(&wrs),
        Err(PostError::new(
            0,
            WrError::LengthOverflow { length: 1 << 32 }
        ))
    );
    assert!(got(&m).is_empty());

    // A full queue mid-list: the 7 that fit go, the 8th is named.
    let ids: Vec<u64> = (30..40).collect();
    let wrs: Vec<RecvWr<'_>> = ids.iter().map(|&id| RecvWr::new(id, &one)).collect();
    let e = rq.post_list(&wrs).unwrap_err();
    assert_eq!(e, PostError::new(7, WrError::QueueFull { capacity: 7 }));
    assert_eq!(
        e.to_string(),
        "work request 7: queue full (7 work requests outstanding)"
    );
    assert_eq!(
        m.producer(),
        m.consumer().wrapping_add(7) & 7,
        "all 7 published"
    );
    let posted: Vec<u64> = got(&m).into_iter().map(|(id, _, _)| id).collect();
    assert_eq!(posted, ids[..7]);
}

/// A receive queue whose slots hold more than 64 SGEs (a device reporting `max_sge` > 64)
/// takes a list of 65 (SGEs are read in place, no stack buffer bounds them) and refuses one
/// longer than its slots with an error, no panic. (Moved from the core's rxe SRQ tests, now
/// against `RecvQueue::post_list` over the crate's `FakeMapping`.)
#[test]
fn sge_lists_are_bounded_by_the_queue_not_a_buffer() {
    // 2048-byte slots: over a hundred SGEs fit.
    let m = FakeMapping::new(11, 2);
    let mut rq = RecvQueue::new(open(&m), 100).unwrap();
    let max = rq.max_sge() as usize;
    assert!(max > 64, "{max}");
    let sges = [Sge::default(); 128];
    let wrs = [RecvWr::new(1, &sges[..max + 1])];
    let e = rq.post_list(&wrs).unwrap_err();
    assert_eq!(e.index, 0);
    assert!(
        matches!(e.error, WrError::TooManySge { num_sge, .. } if num_sge == max + 1),
        "{e}"
    );
    // 65 go.
    rq.post_list(&[RecvWr::new(2, &sges[..65])]).unwrap();
    let bytes = m.kernel_consume().expect("published");
    let (w, _) = RxeRecvWqe::read_from_prefix(&bytes).unwrap();
    assert_eq!((w.wr_id, w.dma.num_sge), (2, 65));
}

// ----- completion queue ----------------------------------------------------------------------

/// A completion as the kernel writes it into a slot: a receive with immediate data (kernel
/// flag `IB_WC_WITH_IMM`, the immediate stored big-endian).
pub(crate) fn wc(wr_id: u64) -> UverbsWc {
    UverbsWc {
        wr_id,
        status: (wr_id % 3) as u32,
        opcode: 128,
        vendor_err: 0,
        byte_len: wr_id as u32 * 10,
        ex: 0x0102_0304u32.to_be(),
        qp_num: 0x11,
        src_qp: 0x22,
        wc_flags: 2,
        pkey_index: 3,
        slid: 4,
        sl: 5,
        dlid_path_bits: 6,
        port_num: 1,
        reserved: 0,
    }
}

/// The `Wc` a poll must give for [`wc`]`(wr_id)`, written out: libibverbs' flag bits and the
/// immediate data in host order.
fn wc_polled(wr_id: u64) -> Wc {
    Wc {
        wr_id,
        status: WcStatus((wr_id % 3) as u32),
        opcode: WcOpcode::RECV,
        vendor_err: 0,
        byte_len: wr_id as u32 * 10,
        imm_data: 0x0102_0304,
        qp_num: 0x11,
        src_qp: 0x22,
        wc_flags: WcFlags::WITH_IMM,
        pkey_index: 3,
        slid: 4,
        sl: 5,
        dlid_path_bits: 6,
    }
}

/// Polls one completion (`poll` into a one-element slice).
fn poll_one(cq: &mut CompletionQueue) -> Result<Option<Wc>, RingError> {
    let mut one = [Wc::default()];
    Ok(match cq.poll(&mut one)? {
        0 => None,
        _ => Some(one[0]),
    })
}

/// The fake mapping handed to a "kernel" thread.
struct KernelSide<'a>(&'a FakeMapping);
// SAFETY: the kernel side touches the header only through atomics and a slot only while the
// ring protocol gives it to that side; that protocol is what the test checks, and a break in it
// is a data race Miri reports.
unsafe impl Send for KernelSide<'_> {}

/// The CQ's Acquire load of producer_index and Release store of consumer_index against a
/// kernel on another thread (slot bytes, then a Release store of producer_index; an Acquire
/// load of consumer_index before reusing a slot). Under Miri, whose weak-memory emulation lets
/// a load return any value the orderings allow, a Relaxed load or store on either side shows
/// up as a data race on the slot bytes or a stale CQE; on aarch64 these are the `ldar`/`stlr`
/// rdma-core's rxe provider uses.
#[test]
fn producer_and_consumer_threads_see_whole_slots() {
    let m = FakeMapping::new(7, 2); // 4 slots of 128 bytes: the ring wraps many times
    let n: u64 = if cfg!(miri) { 24 } else { 5000 };
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    let kernel = KernelSide(&m);
    std::thread::scope(|s| {
        s.spawn(move || {
            let k = kernel;
            let mut produced = 0u64;
            while produced < n {
                if k.0.kernel_produce(wc(produced).as_bytes()) {
                    produced += 1;
                } else {
                    std::thread::yield_now();
                }
            }
        });
        let mut polled = 0u64;
        // Polls of one and of several, so both the inline one-completion path and the run
        // see the kernel's stores.
        let mut wcs = [Wc::default(); 3];
        while polled < n {
            let want = 1 + (polled % 3) as usize;
            match cq.poll(&mut wcs[..want]).unwrap() {
                0 => std::thread::yield_now(),
                got => {
                    for c in &wcs[..got] {
                        assert_eq!(c.wr_id, polled, "CQEs in order, none lost or repeated");
                        assert_eq!(
                            c.byte_len,
                            polled as u32 * 10,
                            "a whole CQE, not a stale one"
                        );
                        assert_eq!(c.status, WcStatus((polled % 3) as u32));
                        polled += 1;
                    }
                }
            }
        }
    });
}

#[test]
fn cq_polls_field_by_field_and_wraps() {
    let m = FakeMapping::new(7, 2); // 4 slots of 128 bytes (kernel's rxe_cqe rounds up)
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    assert_eq!(poll_one(&mut cq).unwrap(), None);
    let mut produced = 0u64;
    let mut polled = 0u64;
    for _ in 0..5 {
        while m.kernel_produce(wc(produced).as_bytes()) {
            produced += 1;
        }
        assert_eq!(cq.ready().unwrap(), 3, "one slot stays empty");
        let peeked = cq.peek().unwrap().unwrap();
        let c = poll_one(&mut cq).unwrap().unwrap();
        assert_eq!(peeked, c);
        assert_eq!(c.wr_id, polled);
        assert_eq!(c.status, WcStatus((polled % 3) as u32));
        assert_eq!(c.opcode, WcOpcode::RECV);
        assert_eq!(c.byte_len, polled as u32 * 10);
        // Stored big-endian with the kernel's WITH_IMM: host order, and the flag in
        // libibverbs' bit.
        assert_eq!(c.imm_data, 0x0102_0304);
        assert_eq!(c.imm(), Some(0x0102_0304));
        assert_eq!(
            (c.qp_num, c.src_qp, c.wc_flags),
            (0x11, 0x22, WcFlags::WITH_IMM)
        );
        assert_eq!((c.pkey_index, c.slid, c.sl, c.dlid_path_bits), (3, 4, 5, 6));
        assert_eq!(c, wc_polled(polled));
        polled += 1;
        let mut out = [Wc::default(); 8];
        let n = cq.poll(&mut out).unwrap();
        assert_eq!(n, 2);
        for c in &out[..n] {
            assert_eq!(*c, wc_polled(polled));
            polled += 1;
        }
        assert!(out[n..].iter().all(|c| *c == Wc::default()), "untouched");
        assert_eq!(poll_one(&mut cq).unwrap(), None);
        assert_eq!(m.consumer(), (polled % 4) as u32, "consumer index released");
    }
    assert_eq!(polled, 15);
}

#[test]
fn cq_distrusts_the_producer_index() {
    let m = FakeMapping::new(6, 3); // 8 slots of 64 bytes
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    for i in 0..4 {
        assert!(m.kernel_produce(wc(i).as_bytes()));
    }
    assert_eq!(cq.ready().unwrap(), 4);
    // Producer far ahead of anything possible: out of range, never read out of bounds.
    m.set_producer(1000);
    let bad = RingError::IndexOutOfRange {
        index: IndexKind::Producer,
        value: 1000,
        index_mask: 7,
    };
    assert_eq!(cq.ready(), Err(bad));
    // A poll that needs more than the entries already validated reloads and fails too.
    let mut out = [Wc::default(); 8];
    assert_eq!(cq.poll(&mut out), Err(bad));
    assert_eq!(m.consumer(), 0, "nothing taken");
    // Producer moved backwards: fewer entries ready than already seen.
    m.set_producer(2);
    assert!(matches!(
        cq.ready(),
        Err(RingError::IndexOutsideWindow {
            index: IndexKind::Producer,
            value: 2,
            ..
        })
    ));
    m.set_producer(4);
    assert_eq!(poll_one(&mut cq).unwrap().unwrap().wr_id, 0);
}

#[test]
fn cq_poll_converts_from_the_slot_and_checks_a_moved_producer() {
    let m = FakeMapping::new(6, 3); // 8 slots of 64 bytes
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    let mut wcs = [Wc::default(); 4];
    // Empty: the unchanged producer index is only compared, and nothing is released.
    assert_eq!(cq.refresh(4), Ok(0));
    assert_eq!(cq.poll(&mut wcs), Ok(0));
    assert_eq!(m.consumer(), 0);
    // A moved, hostile producer index is validated even though the last poll was empty.
    m.set_producer(9);
    assert!(
        matches!(
            cq.refresh(4),
            Err(RingError::IndexOutOfRange { value: 9, .. })
        ),
        "a moved index is validated"
    );
    assert!(matches!(
        cq.poll(&mut wcs),
        Err(RingError::IndexOutOfRange { value: 9, .. })
    ));
    m.set_producer(0);
    assert_eq!(cq.poll(&mut wcs), Ok(0));
    for i in 0..6 {
        assert!(m.kernel_produce(wc(40 + i).as_bytes()));
    }
    assert_eq!(cq.refresh(4), Ok(4));
    assert_eq!(cq.refresh(8), Ok(6));
    // Known ready: a poll of no more than that needs no further load and takes what was
    // counted.
    m.set_producer(1000);
    let mut two = [Wc::default(); 2];
    assert_eq!(cq.poll(&mut two), Ok(2));
    assert_eq!(two.map(|c| c.wr_id), [40, 41]);
    m.set_producer(6);
    // Put the first two back so the rest of the test sees all six.
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    assert_eq!(cq.refresh(8), Ok(4));
    m.set_consumer(0);
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    // Converted straight from the slots; one consumer store per call.
    assert_eq!(cq.poll(&mut wcs), Ok(4));
    assert_eq!(wcs, [40, 41, 42, 43].map(wc_polled));
    assert_eq!(m.consumer(), 4);
    assert_eq!(cq.poll(&mut wcs), Ok(2));
    assert_eq!(wcs[..2], [44, 45].map(wc_polled));
    assert_eq!(m.consumer(), 6);
    assert_eq!(cq.refresh(4), Ok(0));
    // Entries counted by an earlier load are taken without another: a producer index moved
    // back meanwhile is not even looked at until they are used up.
    assert!(m.kernel_produce(wc(46).as_bytes()));
    assert!(m.kernel_produce(wc(47).as_bytes()));
    assert_eq!(cq.poll(&mut wcs[..1]), Ok(1));
    assert_eq!(wcs[0], wc_polled(46));
    m.set_producer(7);
    assert_eq!(cq.refresh(1), Ok(1), "one entry known ready");
}

#[test]
fn cq_cursor_reads_fields_in_place_wraps_and_publishes_once() {
    let m = FakeMapping::new(6, 2); // 4 slots of 64 bytes: 3 usable
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    assert!(cq.start_poll().unwrap().is_none());
    let mut produced = 0u64;
    let mut polled = 0u64;
    for _ in 0..6 {
        while m.kernel_produce(wc(produced).as_bytes()) {
            produced += 1;
        }
        let cons_before = m.consumer();
        let mut cur = cq.start_poll().unwrap().unwrap();
        loop {
            assert_eq!(cur.wr_id(), polled);
            assert_eq!(cur.status(), WcStatus((polled % 3) as u32));
            assert_eq!(cur.byte_len(), polled as u32 * 10);
            assert_eq!((cur.opcode(), cur.vendor_err()), (WcOpcode::RECV, 0));
            // The `ex` union: immediate data in host order, or (read as an invalidated rkey)
            // as stored.
            assert_eq!(cur.imm_data(), 0x0102_0304);
            assert_eq!(cur.invalidated_rkey(), 0x0102_0304u32.to_be());
            assert_eq!(
                (cur.qp_num(), cur.src_qp(), cur.wc_flags()),
                (0x11, 0x22, WcFlags::WITH_IMM)
            );
            assert_eq!(
                (cur.pkey_index(), cur.slid(), cur.sl(), cur.dlid_path_bits()),
                (3, 4, 5, 6)
            );
            assert_eq!(cur.wc(), wc_polled(polled));
            // Nothing is handed back while the cursor is open.
            assert_eq!(m.consumer(), cons_before);
            polled += 1;
            if !cur.advance().unwrap() {
                break;
            }
        }
        // No next: the cursor stays on the last one.
        assert_eq!(cur.wr_id(), polled - 1);
        drop(cur);
        assert_eq!(m.consumer(), (polled % 4) as u32, "one store on drop");
        assert!(poll_one(&mut cq).unwrap().is_none(), "nothing seen twice");
    }
    assert_eq!(polled, 18);

    // A producer index published while the cursor is open is picked up by `advance`.
    assert!(m.kernel_produce(wc(100).as_bytes()));
    let mut cur = cq.start_poll().unwrap().unwrap();
    assert!(m.kernel_produce(wc(101).as_bytes()));
    assert!(cur.advance().unwrap());
    assert_eq!(cur.wr_id(), 101);
    // A hostile producer index is an error, and the cursor stays on a valid slot.
    let real = m.producer();
    m.set_producer(1000);
    assert!(matches!(
        cur.advance(),
        Err(RingError::IndexOutOfRange { value: 1000, .. })
    ));
    assert_eq!(cur.wr_id(), 101);
    m.set_producer(real);
    drop(cur);
    assert_eq!(m.consumer(), real, "both freed by the one store");
    // A producer index moved back behind what the cursor has seen is an error too.
    assert!(m.kernel_produce(wc(102).as_bytes()));
    let mut cur = cq.start_poll().unwrap().unwrap();
    assert_eq!(cur.wr_id(), 102);
    m.set_producer(real);
    assert!(matches!(
        cur.advance(),
        Err(RingError::IndexOutsideWindow {
            index: IndexKind::Producer,
            ..
        })
    ));
    assert_eq!(cur.wr_id(), 102);
}

#[test]
fn cq_cursor_dropped_mid_run_hands_back_the_rest_at_every_wrap_position() {
    // 4 slots: start the poll at each consumer index, so the 3 ready completions wrap at
    // every place in the cursor's run; stop after the second, and the third must be the
    // next one seen (ready count written back right), by a new cursor and by `poll`.
    let m = FakeMapping::new(6, 2);
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    let mut next = 0u64;
    for round in 0..8 {
        for k in 0..3 {
            assert!(m.kernel_produce(wc(next + k).as_bytes()));
        }
        let mut cur = cq.start_poll().unwrap().unwrap();
        assert_eq!(cur.wr_id(), next);
        assert!(cur.advance().unwrap());
        assert_eq!(cur.wr_id(), next + 1);
        drop(cur);
        assert_eq!(m.consumer(), ((next + 2) % 4) as u32);
        // Known ready without a reload: hide the producer index, the count must do.
        let real = m.producer();
        m.set_producer(1000);
        if round % 2 == 0 {
            let cur = cq.start_poll().unwrap().unwrap();
            assert_eq!(cur.wr_id(), next + 2);
        } else {
            assert_eq!(poll_one(&mut cq).unwrap().unwrap().wr_id, next + 2);
        }
        m.set_producer(real);
        assert!(cq.start_poll().unwrap().is_none(), "nothing seen twice");
        next += 3;
    }
}

// ----- the ibv_wr_* API -----------------------------------------------------------------------

#[test]
fn wr_api_builds_publishes_and_rolls_back() {
    let mut r = sq_rig(3, rc_caps());
    assert_eq!(r.sq.wr_send(1, SendFlags::empty()), Err(WrError::NoBatch));
    assert_eq!(r.sq.wr_complete(), Err(WrError::NoBatch));

    // An ordinary post before the batch: publish() during the batch must publish only it.
    r.sq.post(&Wr::new(100, WrOp::Send)).unwrap();
    r.sq.wr_start().unwrap();
    assert_eq!(r.sq.wr_start(), Err(WrError::BatchInProgress));
    assert_eq!(
        r.sq.post(&Wr::new(5, WrOp::Send)),
        Err(WrError::BatchInProgress)
    );
    assert_eq!(r.sq.wr_set_sge(1, 2, 3), Err(WrError::NoCurrentWqe));
    // NoCurrentWqe is sticky: start over.
    r.sq.wr_abort();
    r.sq.wr_start().unwrap();
    r.sq.wr_send(1, SendFlags::SIGNALED).unwrap();
    r.sq.wr_set_sge(0x42, 0x1000, 16).unwrap();
    r.sq.wr_rdma_write_imm(2, SendFlags::empty(), 0x9, 0x2000, 0xfeed)
        .unwrap();
    r.sq.wr_set_inline_data_list(&[b"ab", b"cd"]).unwrap();
    r.sq.wr_atomic_fetch_add(3, SendFlags::empty(), 0x8, 0x3000, 5)
        .unwrap();
    r.sq.wr_set_sge_list(&[sge(0x4000, 8, 0x43)]).unwrap();
    assert_eq!(r.sq.publish(), 1, "only the WQE posted before wr_start");
    assert_eq!(take_wqe(&r.m).unwrap().0.wr.wr_id, 100);
    assert!(take_wqe(&r.m).is_none());
    assert_eq!(r.sq.wr_complete(), Ok(3));

    let (w, d) = take_wqe(&r.m).unwrap();
    assert_eq!((w.wr.wr_id, w.wr.opcode, w.wr.send_flags), (1, 2, 2));
    assert_dma(&w, 16, 1);
    assert_eq!(sges_in(&d, 1), [sge(0x1000, 16, 0x42)]);
    let (w, d) = take_wqe(&r.m).unwrap();
    assert_eq!((w.wr.wr_id, w.wr.opcode, w.wr.send_flags), (2, 1, 8));
    assert_eq!(w.wr.imm_data(), 0xfeed);
    assert_eq!(
        (w.wr.rdma().rkey, w.wr.rdma().remote_addr, w.iova),
        (0x9, 0x2000, 0x2000)
    );
    assert_dma(&w, 4, 0);
    assert_eq!(&d[..4], b"abcd");
    let (w, _) = take_wqe(&r.m).unwrap();
    assert_eq!((w.wr.atomic().compare_add, w.wr.atomic().rkey), (5, 0x8));
    assert_dma(&w, 8, 1);
    assert!(take_wqe(&r.m).is_none());

    // Abort: nothing published, and the next WQE reuses the slot.
    let prod_before = r.m.producer();
    r.sq.wr_start().unwrap();
    r.sq.wr_send(7, SendFlags::empty()).unwrap();
    r.sq.wr_send(8, SendFlags::empty()).unwrap();
    r.sq.wr_abort();
    assert_eq!(r.sq.pending(), 0);
    assert_eq!(r.m.producer(), prod_before);
    r.sq.post(&Wr::new(9, WrOp::Send)).unwrap();
    r.sq.publish();
    assert_eq!(take_wqe(&r.m).unwrap().0.wr.wr_id, 9);
    assert!(take_wqe(&r.m).is_none());
}

#[test]
fn wr_api_errors_are_sticky_and_roll_back() {
    let mut r = sq_rig(3, rc_caps());
    let prod_before = r.m.producer();
    r.sq.wr_start().unwrap();
    r.sq.wr_send(1, SendFlags::empty()).unwrap();
    let five = [sge(0, 1, 1); 5];
    assert_eq!(
        r.sq.wr_set_sge_list(&five),
        Err(WrError::TooManySge {
            num_sge: 5,
            max_sge: 4
        })
    );
    // Later calls report the first error and do nothing.
    assert_eq!(
        r.sq.wr_send(2, SendFlags::empty()),
        Err(WrError::TooManySge {
            num_sge: 5,
            max_sge: 4
        })
    );
    assert_eq!(
        r.sq.wr_complete(),
        Err(WrError::TooManySge {
            num_sge: 5,
            max_sge: 4
        })
    );
    assert_eq!(r.m.producer(), prod_before);
    assert_eq!(r.sq.pending(), 0);

    // Checks that need the finished WQE run at the next builder / at complete.
    r.sq.wr_start().unwrap();
    r.sq.wr_atomic_cmp_swp(1, SendFlags::empty(), 1, 0x10, 1, 2)
        .unwrap();
    assert_eq!(r.sq.wr_complete(), Err(WrError::AtomicLength { length: 0 }));
    r.sq.wr_start().unwrap();
    r.sq.wr_atomic_cmp_swp(1, SendFlags::empty(), 1, 0x10, 1, 2)
        .unwrap();
    assert_eq!(
        r.sq.wr_send(2, SendFlags::empty()),
        Err(WrError::AtomicLength { length: 0 })
    );
    r.sq.wr_abort();
    r.sq.wr_start().unwrap();
    assert_eq!(
        r.sq.wr_atomic_fetch_add(1, SendFlags::empty(), 1, 0x11, 1),
        Err(WrError::AtomicMisaligned { remote_addr: 0x11 })
    );
    r.sq.wr_abort();
    r.sq.wr_start().unwrap();
    r.sq.wr_rdma_read(1, SendFlags::empty(), 1, 0x10).unwrap();
    assert_eq!(
        r.sq.wr_set_inline_data(b"no"),
        Err(WrError::InlineNotAllowed {
            opcode: SendOpcode::RdmaRead
        })
    );
    r.sq.wr_abort();
    assert!(take_wqe(&r.m).is_none());
    assert_eq!(r.m.producer(), prod_before);

    // Queue full inside a batch.
    r.sq.wr_start().unwrap();
    for i in 0..7 {
        r.sq.wr_send(i, SendFlags::empty()).unwrap();
    }
    assert_eq!(
        r.sq.wr_send(7, SendFlags::empty()),
        Err(WrError::QueueFull { capacity: 7 })
    );
    assert!(r.sq.wr_complete().is_err());
    assert!(take_wqe(&r.m).is_none());
}

#[test]
fn wr_api_on_ud_needs_an_address() {
    let mut r = sq_rig(
        3,
        SendQueueCaps {
            qp_type: QpType::Ud,
            ..rc_caps()
        },
    );
    let a3 = ah(3);
    let dest = UdDest::new(&a3, 9, 1);
    r.sq.wr_start().unwrap();
    r.sq.wr_send(1, SendFlags::empty()).unwrap();
    r.sq.wr_set_ud_addr(dest).unwrap();
    r.sq.wr_set_inline_data(b"hi").unwrap();
    r.sq.wr_send_imm(2, SendFlags::empty(), 4).unwrap();
    assert_eq!(r.sq.wr_complete(), Err(WrError::UdAddressMissing));
    assert!(take_wqe(&r.m).is_none());

    r.sq.wr_start().unwrap();
    r.sq.wr_send_imm(2, SendFlags::SIGNALED, 4).unwrap();
    r.sq.wr_set_ud_addr(dest).unwrap();
    assert_eq!(r.sq.wr_complete(), Ok(1));
    let (w, _) = take_wqe(&r.m).unwrap();
    assert_eq!(
        (w.wr.ud().ah_num, w.wr.ud().remote_qpn, w.wr.imm_data()),
        (3, 9, 4)
    );

    let mut rc = sq_rig(3, rc_caps());
    rc.sq.wr_start().unwrap();
    rc.sq.wr_send(1, SendFlags::empty()).unwrap();
    assert_eq!(
        rc.sq.wr_set_ud_addr(dest),
        Err(WrError::UdAddressOnConnectedQp {
            qp_type: QpType::Rc
        })
    );
}

/// `wr_len` counts the WQEs of the open batch, the one being built included: 0 without a
/// batch, after `wr_complete` and after `wr_abort` (or a refused `wr_complete`); a builder
/// call refused before it took a slot does not count, one refused later (by a setter) does.
#[test]
fn wr_len_counts_the_open_batch() {
    let mut r = sq_rig(3, rc_caps());
    assert_eq!(r.sq.wr_len(), 0, "no batch");
    // WQEs posted outside the batch are not the batch's.
    r.sq.post(&Wr::new(1, WrOp::Send)).unwrap();
    r.sq.wr_start().unwrap();
    assert_eq!(r.sq.wr_len(), 0, "an empty batch");
    r.sq.wr_send(2, SendFlags::empty()).unwrap();
    assert_eq!(r.sq.wr_len(), 1, "the one being built counts");
    r.sq.wr_set_sge(1, 0x1000, 8).unwrap();
    assert_eq!(r.sq.wr_len(), 1, "setters add nothing");
    r.sq.wr_rdma_write(3, SendFlags::empty(), 1, 0x2000)
        .unwrap();
    r.sq.wr_send_imm(4, SendFlags::empty(), 9).unwrap();
    assert_eq!(r.sq.wr_len(), 3);
    assert_eq!(r.sq.wr_complete(), Ok(3));
    assert_eq!(r.sq.wr_len(), 0, "completed");

    r.sq.wr_start().unwrap();
    r.sq.wr_send(5, SendFlags::empty()).unwrap();
    r.sq.wr_send(6, SendFlags::empty()).unwrap();
    assert_eq!(r.sq.wr_len(), 2);
    r.sq.wr_abort();
    assert_eq!(r.sq.wr_len(), 0, "aborted");

    // A refused builder call takes no slot; a refused setter leaves its WQE counted until
    // the batch ends.
    let mut uc = sq_rig(
        3,
        SendQueueCaps {
            qp_type: QpType::Uc,
            ..rc_caps()
        },
    );
    uc.sq.wr_start().unwrap();
    uc.sq.wr_send(7, SendFlags::empty()).unwrap();
    assert!(uc.sq.wr_rdma_read(8, SendFlags::empty(), 1, 0).is_err());
    assert_eq!(uc.sq.wr_len(), 1, "the refused RDMA read took no slot");
    uc.sq.wr_abort();
    uc.sq.wr_start().unwrap();
    uc.sq.wr_send(9, SendFlags::empty()).unwrap();
    assert!(uc.sq.wr_set_sge_list(&[sge(0, 1, 1); 5]).is_err());
    assert_eq!(uc.sq.wr_len(), 1);
    assert!(uc.sq.wr_complete().is_err());
    assert_eq!(uc.sq.wr_len(), 0, "a refused complete ends the batch");
    assert_eq!(uc.sq.pending(), 0);
}

/// The opcode property table says what the rxe provider's send-ops lists say, for every opcode
/// and QP type (the lists written out as they were before the table).
#[test]
fn opcode_table_matches_the_send_ops_lists() {
    use SendOpcode::*;
    let all = [
        RdmaWrite,
        RdmaWriteWithImm,
        Send,
        SendWithImm,
        RdmaRead,
        AtomicCmpAndSwp,
        AtomicFetchAndAdd,
        LocalInv,
        BindMw,
        SendWithInv,
        AtomicWrite,
    ];
    for (i, op) in all.into_iter().enumerate() {
        // IBV_WR_ATOMIC_WRITE is 15 (10..=14 are opcodes rxe does not post).
        let index = if op == AtomicWrite { 15 } else { i };
        assert_eq!(
            op as usize, index,
            "{op:?}: the table is indexed by discriminant"
        );
        assert!(op.supported_on(QpType::Rc), "{op:?}");
        assert_eq!(
            op.supported_on(QpType::Uc),
            matches!(
                op,
                Send | SendWithImm | SendWithInv | RdmaWrite | RdmaWriteWithImm | LocalInv | BindMw
            ),
            "{op:?} on UC"
        );
        assert_eq!(
            op.supported_on(QpType::Ud),
            matches!(op, Send | SendWithImm),
            "{op:?} on UD"
        );
        assert_eq!(
            op.allows_inline(),
            matches!(
                op,
                Send | SendWithImm | SendWithInv | RdmaWrite | RdmaWriteWithImm
            ),
            "{op:?} inline"
        );
        assert_eq!(
            op.takes_data(),
            !matches!(op, LocalInv | BindMw | AtomicWrite),
            "{op:?}"
        );
        assert_eq!(
            op.is_atomic(),
            matches!(op, AtomicCmpAndSwp | AtomicFetchAndAdd),
            "{op:?}"
        );
    }
}

/// An atomic write's WQE, posted whole or built with `wr_atomic_write`, is what librxe's
/// `wr_atomic_write` writes: opcode 15 (`IBV_WR_ATOMIC_WRITE`), `wr.rdma` with the remote
/// address and rkey, `iova` the remote address, the 8 bytes in the data area
/// (`dma.atomic_wr`), `dma.length` and `resid` 8, no SGE, not inline. It takes no data, only
/// an RC QP, and an 8-byte aligned address.
#[test]
fn atomic_write_wqe_carries_its_eight_bytes() {
    let value = *b"atomic!!";
    let op = WrOp::AtomicWrite {
        remote_addr: 0x9000,
        rkey: 0x5a,
        value,
    };
    let check = |w: &RxeSendWqe, d: &[u8], wr_id: u64| {
        let wr = Wr::new(wr_id, op).flags(SendFlags::SIGNALED);
        let expected = expected_header(&wr, 8, 0);
        assert_eq!(w.as_bytes(), expected.as_bytes());
        assert_eq!(w.wr.opcode, 15);
        assert_eq!((w.wr.rdma().remote_addr, w.wr.rdma().rkey), (0x9000, 0x5a));
        assert_eq!(w.iova, 0x9000);
        assert_dma(w, 8, 0);
        assert_eq!(&d[..8], &value);
    };
    // Over stale slots, so a field left unwritten shows.
    let mut r = stale_sq(rc_caps());
    let wr = Wr::new(1, op).signaled();
    assert!(
        !r.sq.post_fast(&wr),
        "the fast path leaves atomic writes to post"
    );
    r.sq.post(&wr).unwrap();
    r.sq.wr_start().unwrap();
    r.sq.wr_atomic_write(2, SendFlags::SIGNALED, 0x5a, 0x9000, value)
        .unwrap();
    assert_eq!(r.sq.wr_complete(), Ok(1));
    r.sq.publish();
    let (w, d) = take_wqe(&r.m).unwrap();
    check(&w, &d, 1);
    let (w, d) = take_wqe(&r.m).unwrap();
    check(&w, &d, 2);

    // Refusals: data of any kind, a misaligned address, a QP other than RC.
    let list = [sge(0x1000, 8, 1)];
    assert_eq!(
        r.sq.post(&Wr::new(3, op).sge(&list)),
        Err(WrError::DataNotAllowed {
            opcode: SendOpcode::AtomicWrite
        })
    );
    assert_eq!(
        r.sq.post(&Wr::new(3, op).inline(b"12345678")),
        Err(WrError::InlineNotAllowed {
            opcode: SendOpcode::AtomicWrite
        })
    );
    let misaligned = WrOp::AtomicWrite {
        remote_addr: 0x9004,
        rkey: 0x5a,
        value,
    };
    assert_eq!(
        r.sq.post(&Wr::new(3, misaligned)),
        Err(WrError::AtomicMisaligned {
            remote_addr: 0x9004
        })
    );
    r.sq.wr_start().unwrap();
    r.sq.wr_atomic_write(4, SendFlags::empty(), 0x5a, 0x9000, value)
        .unwrap();
    assert_eq!(
        r.sq.wr_set_sge(1, 0x1000, 0),
        Err(WrError::DataNotAllowed {
            opcode: SendOpcode::AtomicWrite
        }),
        "even an empty SGE would overwrite the WQE's length"
    );
    r.sq.wr_abort();
    let mut uc = sq_rig(
        3,
        SendQueueCaps {
            qp_type: QpType::Uc,
            ..rc_caps()
        },
    );
    assert_eq!(
        uc.sq.post(&Wr::new(5, op)),
        Err(WrError::OpcodeNotSupported {
            opcode: SendOpcode::AtomicWrite,
            qp_type: QpType::Uc
        })
    );
}

// ----- the fast post path --------------------------------------------------------------------

/// A send queue over slots full of stale bytes (as reused slots are), for comparing the bytes
/// two ways of posting leave.
fn stale_sq(caps: SendQueueCaps) -> SqRig {
    let m = FakeMapping::new(9, 5);
    let stale = [0xa5u8; 512];
    while m.kernel_produce(&stale) {}
    m.set_consumer(16);
    while m.kernel_produce(&stale) {}
    m.set_producer(0);
    m.set_consumer(0);
    let sq = SendQueue::new(open(&m), caps).unwrap();
    SqRig { sq, m }
}

/// Every operation, with operands that pass their own rules (aligned atomics, a bind without
/// ZERO_BASED).
fn all_ops() -> [WrOp; 10] {
    [
        WrOp::Send,
        WrOp::SendWithImm {
            imm_data: 0xA1B2_C3D4,
        },
        WrOp::SendWithInv {
            invalidate_rkey: 0x77,
        },
        WrOp::RdmaWrite {
            remote_addr: 0xDEAD_0000,
            rkey: 0x99,
        },
        WrOp::RdmaWriteWithImm {
            remote_addr: 0xBEEF_0000,
            rkey: 0x98,
            imm_data: 7,
        },
        WrOp::RdmaRead {
            remote_addr: 0xCAFE_0000,
            rkey: 0x97,
        },
        WrOp::AtomicCmpAndSwp {
            remote_addr: 0x8000,
            rkey: 0x96,
            compare: 10,
            swap: 20,
        },
        WrOp::AtomicFetchAndAdd {
            remote_addr: 0x8008,
            rkey: 0x95,
            add: 3,
        },
        WrOp::LocalInv {
            invalidate_rkey: 0x1234,
        },
        WrOp::BindMw {
            mw_rkey: 0x100,
            new_rkey: 0x101,
            mr_lkey: 0x55,
            addr: 0x7000,
            length: 0x800,
            access: AccessFlags::REMOTE_WRITE,
        },
    ]
}

/// `post_fast` posts exactly what `post` posts (the same slot bytes over stale ones, the
/// producer index moved by one) for the WRs it takes, takes every WR of the common shape (so
/// the comparison is not vacuous), and for every other WR (inline data and a destination
/// included) moves nothing, after which `post` gives the same answer on that queue as on one
/// that never saw the fast path.
#[test]
fn post_fast_writes_what_post_writes_or_declines() {
    let list = [
        sge(0x1000, 8, 0x11),
        sge(0x2000, 16, 0x12),
        sge(0x3000, 24, 0x13),
        sge(0x4000, 32, 0x14),
        sge(0x5000, 40, 0x15),
    ];
    let overflow = [sge(0x1000, u32::MAX, 1), sge(0x2000, 2, 2)];
    let sge_lists: [&[Sge]; 7] = [
        &[],
        &list[..1],
        &list[..2],
        &list[..4],
        &list[..5], // more than max_send_sge (4)
        &overflow,  // total length beyond u32
        &list[3..4],
    ];
    let dest = ah(7);
    // Every SGE list without a destination, then what the fast path never takes: inline data,
    // and a destination (which only a UD QP accepts).
    let mut shapes: Vec<(WrData<'_>, Option<&TestAh>)> =
        sge_lists.iter().map(|s| (WrData::Sge(s), None)).collect();
    shapes.extend([
        (WrData::Inline(b"inline"), None),
        (WrData::Inline(&[]), None),
        (WrData::Sge(&list[..1]), Some(&dest)),
        (WrData::Inline(b"x"), Some(&dest)),
    ]);
    let flag_sets = [
        SendFlags::empty(),
        SendFlags::SIGNALED,
        SendFlags::FENCE | SendFlags::SOLICITED,
    ];
    let mut taken = 0;
    let mut ud_sent = 0;
    for qp_type in [QpType::Rc, QpType::Uc, QpType::Ud] {
        let caps = SendQueueCaps {
            qp_type,
            ..rc_caps()
        };
        let mut a = stale_sq(caps);
        let mut b = stale_sq(caps);
        let mut wr_id = 0;
        for op in all_ops() {
            for &(data, to) in &shapes {
                for flags in flag_sets {
                    wr_id += 1;
                    let index = a.sq.producer_index();
                    assert_eq!(index, b.sq.producer_index());
                    let opcode = SendOpcode::of(&op);
                    let sges = match data {
                        WrData::Sge(s) => s,
                        WrData::Inline(_) => &[],
                    };
                    let common = qp_type != QpType::Ud
                        && matches!(data, WrData::Sge(_))
                        && to.is_none()
                        && opcode.supported_on(qp_type)
                        && !opcode.is_atomic()
                        && opcode != SendOpcode::BindMw
                        && sges.len() <= 4
                        && (sges.is_empty() || opcode.takes_data())
                        && sges.iter().map(|s| u64::from(s.length)).sum::<u64>()
                            <= u64::from(u32::MAX);
                    let mut wr = Wr::new(wr_id, op).flags(flags);
                    wr.data = data;
                    if let Some(to) = to {
                        wr = wr.ud(to, 0x12, 0x34);
                    }
                    let fast = a.sq.post_fast(&wr);
                    let what = format!("{qp_type:?} {op:?} {data:?} to {to:?} {flags:?}");
                    assert_eq!(fast, common, "{what}");
                    let want = b.sq.post(&wr);
                    if fast {
                        taken += 1;
                        assert_eq!(want, Ok(()), "{what}");
                    } else {
                        assert_eq!(a.sq.producer_index(), index, "{what}: declined, not moved");
                        let got = a.sq.post(&wr);
                        assert_eq!(got, want, "{what}");
                    }
                    assert_eq!(a.sq.producer_index(), b.sq.producer_index(), "{what}");
                    if want.is_ok() {
                        assert_eq!(a.m.peek_slot(index), b.m.peek_slot(index), "{what}");
                        ud_sent += usize::from(qp_type == QpType::Ud);
                    }
                    // Keep the rings from filling: the kernel takes what was posted, and the
                    // queue reloads its index (the fast path does not).
                    for r in [&mut a, &mut b] {
                        r.sq.publish();
                        while r.m.kernel_consume().is_some() {}
                        assert_eq!(r.sq.outstanding(), Ok(0));
                    }
                }
            }
        }
    }
    // RC: Send, SendWithImm, SendWithInv, RdmaWrite, RdmaWriteWithImm, RdmaRead with 0, 1, 2,
    // 4 and the other 1 SGE (5 lists), LocalInv with none; UC: the same but RdmaRead; 3 flag
    // sets each.
    assert_eq!(taken, 3 * ((6 * 5 + 1) + (5 * 5 + 1)));
    // UD: SEND and SEND_WITH_IMM with a destination (one SGE, inline), 3 flag sets each, all
    // through `post`.
    assert_eq!(ud_sent, 2 * 2 * 3);
}

/// The fast path takes a free slot, reloading the kernel's index when the last one seen
/// says full; it declines a queue that is full and nothing moves while a `wr_*` batch is open.
#[test]
fn post_fast_declines_a_full_queue_and_an_open_batch() {
    let mut r = sq_rig(3, rc_caps());
    let list = [sge(0x1000, 8, 0x11)];
    let mut n = 0;
    while r
        .sq
        .post_fast(&Wr::new(n, WrOp::Send).flags(SendFlags::SIGNALED).sge(&list))
    {
        n += 1;
    }
    assert_eq!(n, 7, "a ring of 8 slots holds 7");
    assert_eq!(
        r.sq.post(&Wr::new(99, WrOp::Send).sge(&list)),
        Err(WrError::QueueFull { capacity: 7 })
    );
    assert!(
        !r.sq
            .post_fast(&Wr::new(99, WrOp::Send).flags(SendFlags::empty()).sge(&list)),
        "still full after the reload"
    );
    r.sq.publish();
    // The kernel frees three: the fast path reloads its index and takes exactly those.
    for _ in 0..3 {
        assert!(r.m.kernel_consume().is_some());
    }
    for n in 7..10 {
        assert!(r
            .sq
            .post_fast(&Wr::new(n, WrOp::Send).flags(SendFlags::empty()).sge(&list)));
    }
    assert!(!r
        .sq
        .post_fast(&Wr::new(10, WrOp::Send).flags(SendFlags::empty()).sge(&list)));
    r.sq.publish();
    while r.m.kernel_consume().is_some() {}
    r.sq.outstanding().unwrap();

    // An open batch: nothing goes past it, whichever way the batch ends.
    r.sq.wr_start().unwrap();
    assert!(!r
        .sq
        .post_fast(&Wr::new(20, WrOp::Send).flags(SendFlags::empty()).sge(&list)));
    r.sq.wr_abort();
    assert!(r
        .sq
        .post_fast(&Wr::new(21, WrOp::Send).flags(SendFlags::empty()).sge(&list)));
    r.sq.wr_start().unwrap();
    assert!(!r
        .sq
        .post_fast(&Wr::new(22, WrOp::Send).flags(SendFlags::empty()).sge(&list)));
    r.sq.wr_send(23, SendFlags::empty()).unwrap();
    r.sq.wr_set_sge_list(&list).unwrap();
    assert_eq!(r.sq.wr_complete(), Ok(1));
    assert!(r
        .sq
        .post_fast(&Wr::new(24, WrOp::Send).flags(SendFlags::empty()).sge(&list)));
    r.sq.wr_start().unwrap();
    r.sq.wr_send(25, SendFlags::empty()).unwrap(); // no data set: refused at complete
    r.sq.wr_set_ud_addr(UdDest::new(&ah(1), 1, 1)).unwrap_err();
    assert!(r.sq.wr_complete().is_err());
    assert!(r
        .sq
        .post_fast(&Wr::new(26, WrOp::Send).flags(SendFlags::empty()).sge(&list)));
    r.sq.publish();
    let ids: Vec<u64> = core::iter::from_fn(|| take_wqe(&r.m))
        .map(|(w, _)| w.wr.wr_id)
        .collect();
    assert_eq!(ids, [21, 23, 24, 26]);
}
