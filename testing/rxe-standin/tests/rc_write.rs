//! The stand-in serves the set-up `benches/ring_counts.rs` does for rxe, and its kernel side
//! of the rings gives uverbs what the rxe kernel would: consumed WQEs and send CQEs.

use uverbs::{
    AccessFlags, CqInitAttr, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, SendWr, Wc,
    WcOpcode, WcStatus, WrOp,
};
use uverbs_rxe_standin::RxeStandin;

/// RESET -> INIT -> RTR -> RTS (the stand-in takes any attributes).
fn rts(qp: &mut uverbs::Qp) {
    for (s, m) in [
        (QpState::Init, QpAttrMask::STATE | QpAttrMask::PORT),
        (QpState::Rtr, QpAttrMask::STATE),
        (QpState::Rts, QpAttrMask::STATE),
    ] {
        let a = QpAttr {
            qp_state: s,
            port_num: 1,
            ..Default::default()
        };
        qp.modify(&a, m).unwrap();
    }
}

#[test]
fn rc_writes_are_consumed_and_completed_as_the_kernel_does() {
    let k = RxeStandin::new().unwrap();
    let ctx = k.open().expect("open the stand-in rxe device");
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd
        .reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
        .unwrap();
    let attr = CqInitAttr {
        cqe: 8,
        ..Default::default()
    };
    let mut scq = ctx.create_cq_ex(&attr).unwrap();
    let rcq = ctx.create_cq_ex(&attr).unwrap();
    let cap = QpCap {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &scq, &rcq, cap))
        .unwrap();
    // rxe_queue_init: one more slot than asked for, rounded to a power of two.
    assert_eq!(qp.cap().max_send_wr, 7);
    rts(&mut qp);
    let sge = [mr.sge(0, 8).unwrap()];
    let op = WrOp::RdmaWrite {
        remote_addr: mr.addr() + 2048,
        rkey: mr.rkey(),
    };
    let qpn = qp.qp_num();
    // Two signaled, one not: the kernel consumes all three and completes two.
    qp.post_send(&[
        SendWr::new(1, op).sge(&sge).signaled(),
        SendWr::new(2, op).sge(&sge),
        SendWr::new(3, op).sge(&sge).signaled(),
    ])
    .unwrap();
    assert_eq!(k.sq_indices(qpn), Some((3, 0)));
    assert_eq!(k.complete_sends(qpn), Ok(3));
    assert_eq!(k.sq_indices(qpn), Some((3, 3)));
    assert_eq!(k.cq_indices()[0], (2, 0));
    let mut wcs = [Wc::default(); 4];
    assert_eq!(scq.poll(&mut wcs).unwrap(), 2);
    for (wc, id) in wcs.iter().zip([1, 3]) {
        assert_eq!(wc.wr_id, id);
        assert_eq!(wc.status, WcStatus::SUCCESS);
        assert_eq!(wc.opcode, WcOpcode::RDMA_WRITE);
        assert_eq!(wc.byte_len, 8);
        assert_eq!(wc.qp_num, qpn);
    }
    assert_eq!(k.cq_indices()[0], (2, 2));
    // The SQ holds 7: with 7 posted and none consumed a post is refused; the kernel's
    // consuming them frees the room.
    let wr = [SendWr::new(9, op).sge(&sge).signaled()];
    for _ in 0..7 {
        qp.post_send(&wr).unwrap();
    }
    assert!(qp.post_send(&wr).is_err(), "the SQ is full");
    // 7 signaled sends into a CQ asked for 8 (it holds 15): all fit.
    assert_eq!(k.complete_sends(qpn), Ok(7));
    qp.post_send(&wr).unwrap();
    drop(qp);
    drop((scq, rcq, mr, pd));
}

#[test]
fn a_full_cq_is_reported_not_overwritten() {
    let k = RxeStandin::new().unwrap();
    let ctx = k.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    // A CQ of 1 holds 1 (2 slots, one empty); an SQ of 4 holds 7.
    let cq = ctx.create_cq(1, None, 0).unwrap();
    let cap = QpCap {
        max_send_wr: 4,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut qp = pd
        .create_qp(&QpInitAttr {
            sq_sig_all: true,
            ..QpInitAttr::new(QpType::Rc, &cq, &cq, cap)
        })
        .unwrap();
    rts(&mut qp);
    let sge = [mr.sge(0, 8).unwrap()];
    let wr = SendWr::new(
        5,
        WrOp::RdmaWrite {
            remote_addr: mr.addr(),
            rkey: mr.rkey(),
        },
    )
    .sge(&sge);
    qp.post_send(&[wr, wr]).unwrap();
    let e = k.complete_sends(qp.qp_num()).unwrap_err();
    assert!(e.0.contains("CQ full"), "{e}");
    // The first was consumed and completed, the second waits.
    assert_eq!(k.sq_indices(qp.qp_num()), Some((2, 1)));
}

/// A list whose WRs take both post paths (the common ones straight into the ring, inline data
/// and refusals through the general path) posts every WR before the refused one, in order,
/// names the refused one, and rings once for what it posted; a refused single WR moves
/// nothing.
#[test]
fn a_list_mixing_both_post_paths_posts_up_to_the_refused_wr() {
    let k = RxeStandin::new().unwrap();
    let ctx = k.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd
        .reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
        .unwrap();
    let mut cq = ctx.create_cq(16, None, 0).unwrap();
    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 16,
    };
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq, cap))
        .unwrap();
    rts(&mut qp);
    let qpn = qp.qp_num();
    let sge = [mr.sge(0, 8).unwrap()];
    let two = [sge[0], mr.sge(8, 4).unwrap()];
    let op = WrOp::RdmaWrite {
        remote_addr: mr.addr() + 2048,
        rkey: mr.rkey(),
    };
    let e = qp
        .post_send(&[
            SendWr::new(1, op).sge(&sge).signaled(),
            SendWr::new(2, op).inline(b"12345").signaled(),
            SendWr::new(3, op).sge(&sge).signaled(),
            SendWr::new(4, op).sge(&two).signaled(), // 2 SGEs on a QP of 1
            SendWr::new(5, op).sge(&sge).signaled(),
        ])
        .unwrap_err();
    assert_eq!(e.index, 3, "{e}");
    assert_eq!(k.sq_indices(qpn), Some((3, 0)));
    let e = qp
        .post_send(&[SendWr::new(6, op).sge(&two).signaled()])
        .unwrap_err();
    assert_eq!(e.index, 0, "{e}");
    assert_eq!(k.sq_indices(qpn), Some((3, 0)));
    // After the refusals the queue takes the common path again.
    qp.post_send(&[
        SendWr::new(7, op).sge(&sge).signaled(),
        SendWr::new(8, WrOp::Send).sge(&sge).signaled(),
    ])
    .unwrap();
    assert_eq!(k.sq_indices(qpn), Some((5, 0)));
    assert_eq!(k.complete_sends(qpn), Ok(5));
    let mut wcs = [Wc::default(); 8];
    assert_eq!(cq.poll(&mut wcs).unwrap(), 5);
    let got: Vec<(u64, u32)> = wcs[..5].iter().map(|w| (w.wr_id, w.byte_len)).collect();
    assert_eq!(got, [(1, 8), (2, 5), (3, 8), (7, 8), (8, 8)]);
}
