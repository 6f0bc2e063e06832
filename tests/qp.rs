//! QPs on a real rxe device (soft-RoCE VM): the state machine and what `query` reports, a
//! send-only QP, multicast attach and detach, and a destroy the kernel refuses.

mod common;

use common::pair::{
    all_access, cap, mcast_gid, mr, pair, pair_with, pd_and_cq, set_state, to_init, to_rtr, to_rts,
    wait, Pair, PSN,
};
use uverbs::{
    Errno, Gid, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, WcStatus,
};

/// The QP state machine: posting in RESET is refused naming the state, RESET -> RTR is an
/// illegal transition, INIT takes receives but not sends, `query` reports what the modifies
/// set, RTS -> SQD -> ERR works, and ERR flushes the receive posted in INIT.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn qp_query_modify_states_and_illegal_transition() {
    let mut p = pair_with(QpType::Rc, cap(16, 2, 32), false, false);
    let dst = mr(&p.pd, 64);
    let sg = [dst.sge(0, 8).unwrap()];
    // RESET: no sends, no receives.
    let e = p.a.post_send(&[SendWr::send(1).sge(&sg)]).unwrap_err();
    assert_eq!(e.index, 0);
    assert!(
        e.error.is(Errno::INVAL) && e.error.reason().contains("Reset"),
        "{e}"
    );
    assert!(p.a.post_recv(&[RecvWr::new(1, &sg)]).is_err());
    // RESET -> RTR is illegal.
    let e = set_state(&mut p.a, QpState::Rtr).unwrap_err();
    assert!(e.is(Errno::INVAL), "{e}");
    assert!(e.reason().contains("legal transition"), "{e}");
    to_init(&mut p.a);
    let e = p.a.post_send(&[SendWr::send(1).sge(&sg)]).unwrap_err();
    assert!(e.error.reason().contains("Init"), "{e}");
    p.a.post_recv(&[RecvWr::new(1, &sg)])
        .expect("receives are allowed in INIT");
    let q = p.a.query(QpAttrMask::all()).unwrap();
    assert_eq!(q.attr.qp_state, QpState::Init);
    assert_eq!(q.attr.port_num, 1);
    assert_eq!(q.attr.qp_access_flags, all_access());
    assert!(
        q.cap.max_send_wr >= 16 && q.cap.max_inline_data >= 32,
        "{q:?}"
    );
    to_init(&mut p.b);
    let (an, bn) = (p.a.qp_num(), p.b.qp_num());
    to_rtr(&mut p.a, bn, p.gid_index, p.gid);
    to_rts(&mut p.a);
    let q = p.a.query(QpAttrMask::all()).unwrap();
    assert_eq!(q.attr.qp_state, QpState::Rts);
    assert_eq!(q.attr.dest_qp_num, bn);
    assert_eq!(q.attr.sq_psn, PSN);
    assert_eq!(q.attr.ah_attr.grh.dgid, p.gid);
    assert_eq!(q.attr.path_mtu, uverbs::Mtu::Mtu1024);
    // RTS -> SQD -> RTS, then ERR.
    set_state(&mut p.a, QpState::Sqd).expect("RTS -> SQD");
    set_state(&mut p.a, QpState::Err).expect("-> ERR");
    assert_eq!(
        p.a.query(QpAttrMask::STATE).unwrap().attr.qp_state,
        QpState::Err
    );
    // The receive posted in INIT is flushed.
    let w = wait(&mut p.cq_a, 1);
    assert_eq!(w[0].status, WcStatus::WR_FLUSH_ERR);
    let _ = an;
    let d = p.b.destroy().expect("destroy_qp");
    assert_eq!(d.events_reported, 0);
}

/// A send-only QP (no SRQ, `max_recv_wr` 0) is legal: the kernel gives it a one-slot receive
/// ring that never has room, and posting a receive is refused as a full queue.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn send_only_qp_with_no_receive_queue_depth() {
    let (_ctx, pd, cq) = pd_and_cq(16);
    let c = QpCap {
        max_recv_wr: 0,
        ..cap(8, 1, 0)
    };
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq, c))
        .expect("create a send-only QP");
    assert_eq!(qp.cap().max_recv_wr, 0);
    to_init(&mut qp);
    let m = mr(&pd, 64);
    let sg = [m.sge(0, 64).unwrap()];
    let e = qp.post_recv(&[RecvWr::new(1, &sg)]).unwrap_err();
    assert_eq!(e.index, 0, "{e:?}");
}

/// A UD [`Pair`] whose QP `a` is attached to the multicast group `ff0e::<last>`.
fn ud_pair_with_a_in_a_multicast_group(last: u8) -> (Pair, Gid) {
    let p = pair(QpType::Ud);
    let mgid = mcast_gid(last);
    p.a.attach_mcast(&mgid, 0).expect("attach_mcast");
    (p, mgid)
}

/// Multicast attach and detach on a UD QP succeed; detaching again, attaching a unicast GID
/// and attaching an RC QP are refused with `EINVAL`, as the kernel refuses them.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn multicast_attach_detach_as_the_kernel_says() {
    let (p, mgid) = ud_pair_with_a_in_a_multicast_group(0x42);
    p.a.detach_mcast(&mgid, 0).expect("detach_mcast");
    let e = p.a.detach_mcast(&mgid, 0).unwrap_err();
    assert!(e.is(Errno::INVAL), "{e}");
    let e = p.a.attach_mcast(&p.gid, 0).unwrap_err();
    assert!(e.is(Errno::INVAL), "unicast GID: {e}");
    let rc = pair_with(QpType::Rc, cap(4, 1, 0), false, false);
    let e = rc.a.attach_mcast(&mgid, 0).unwrap_err();
    assert!(e.is(Errno::INVAL), "RC QP: {e}");
}

/// Finding 1: a destroy the kernel refuses (EBUSY: still attached to a multicast group) hands
/// the QP back, so the caller can detach and destroy again (ibv_destroy_qp(3)).
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn failed_qp_destroy_returns_the_qp_for_a_retry() {
    let (p, mgid) = ud_pair_with_a_in_a_multicast_group(0x43);
    let qpn = p.a.qp_num();
    let e = p.a.destroy().expect_err("destroy while attached must fail");
    assert!(e.is(Errno::BUSY), "{e}");
    assert!(e.error().reason().contains("multicast"), "{e}");
    let qp = e.into_inner();
    assert_eq!(qp.qp_num(), qpn, "the same QP comes back");
    qp.detach_mcast(&mgid, 0)
        .expect("detach_mcast after the failed destroy");
    qp.destroy().expect("destroy after detaching");
}
