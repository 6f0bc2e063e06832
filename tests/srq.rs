//! Shared receive queues on a real rxe device (soft-RoCE VM): many QPs on one SRQ, its limit
//! event, resize, query and destroy, and which QPs may use one.

mod common;

use std::time::Duration;

use common::pair::{assert_quiet, cap, connect, mr, ok, pd_and_cq, read_mr, wait};
use uverbs::{
    AsyncElement, AsyncEventType, Context, Cq, Errno, Pd, QpInitAttr, QpType, RecvWr, SendWr, Srq,
    SrqAttr, SrqAttrMask, SrqInitAttrEx,
};

/// A PD, a 16-entry CQ and an 8-WR SRQ on the first rxe device, for QPs to be made on.
fn srq_and_cq() -> (Context, Pd, Cq, Srq) {
    let (ctx, pd, cq) = pd_and_cq(16);
    let srq = common::srq(&pd, 8);
    (ctx, pd, cq, srq)
}

/// One SRQ feeds 64 RC QPs: every message is received exactly once (none lost, none
/// duplicated, every QP completes once); the armed limit raises `SRQ_LIMIT_REACHED` naming the
/// SRQ; a resize keeps the posted receives; destroy is refused while QPs use the SRQ.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn srq_shared_by_64_rc_qps_no_loss_no_dup_and_limit_event() {
    const N: usize = 64;
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let mut scq = ctx.create_cq(4096, None, 0).unwrap();
    let mut rcq = ctx.create_cq(4096, None, 0).unwrap();
    let mut srq = common::srq(&pd, 256);
    assert!(srq.attr().max_wr >= 256);
    let rbuf = mr(&pd, 256 * 64);
    let mut sbuf = mr(&pd, N * 8);
    let sges: Vec<_> = (0..256).map(|i| [rbuf.sge(i * 64, 64).unwrap()]).collect();
    let wrs: Vec<_> = (0..256).map(|i| RecvWr::new(i as u64, &sges[i])).collect();
    srq.post_recv(&wrs[..128]).expect("post_srq_recv");
    // Arm the limit: fires when fewer than 100 receives remain.
    common::arm_srq_limit(&mut srq, 100);
    assert_eq!(srq.query().unwrap().srq_limit, 100);

    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..N {
        let s = pd
            .create_qp(&QpInitAttr::new(QpType::Rc, &scq, &scq, cap(4, 1, 0)))
            .unwrap();
        let mut ia = QpInitAttr::new(QpType::Rc, &rcq, &rcq, cap(4, 1, 0));
        ia.srq = Some(&srq);
        ia.cap.max_recv_wr = 0;
        let r = pd.create_qp(&ia).expect("create_qp with srq");
        senders.push(s);
        receivers.push(r);
    }
    for (s, r) in senders.iter_mut().zip(receivers.iter_mut()) {
        connect(s, r, gid_index, gid);
        // A QP on an SRQ has no receive queue of its own.
        assert!(r.post_recv(&wrs[..1]).is_err());
    }
    for (i, s) in senders.iter_mut().enumerate() {
        sbuf.write(i * 8, &(i as u64).to_ne_bytes()).unwrap();
        let sg = [sbuf.sge(i * 8, 8).unwrap()];
        s.post_send(&[SendWr::send(i as u64).sge(&sg).signaled()])
            .unwrap();
    }
    ok(&wait(&mut scq, N));
    let r = wait(&mut rcq, N);
    ok(&r);
    assert_quiet(&mut rcq);
    let mut payloads: Vec<u64> = r
        .iter()
        .map(|w| {
            assert_eq!(w.byte_len, 8);
            let b = read_mr(&rbuf, w.wr_id as usize * 64, 8);
            u64::from_ne_bytes(b.try_into().unwrap())
        })
        .collect();
    let mut ids: Vec<u64> = r.iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), N, "a receive was used twice");
    payloads.sort_unstable();
    assert_eq!(
        payloads,
        (0..N as u64).collect::<Vec<_>>(),
        "lost or duplicated"
    );
    let qpns: std::collections::HashSet<u32> = r.iter().map(|w| w.qp_num).collect();
    assert_eq!(qpns.len(), N, "every receiving QP completed once");

    // 128 - 64 = 64 < 100: the limit event fired, naming this SRQ.
    let ev = ctx
        .get_async_event(Some(Duration::from_secs(5)))
        .expect("SRQ limit event");
    assert_eq!(ev.event_type, AsyncEventType::SRQ_LIMIT_REACHED);
    assert_eq!(ev.element, AsyncElement::Srq(srq.user_handle()));

    // Resize keeps the posted receives and writes the size back.
    srq.modify(
        &SrqAttr {
            max_wr: 1024,
            ..SrqAttr::default()
        },
        SrqAttrMask::MAX_WR,
    )
    .expect("resize srq");
    assert!(srq.attr().max_wr >= 1024);
    srq.post_recv(&wrs[128..]).expect("post after resize");

    // Destroy refuses while QPs hold the SRQ.
    drop(senders);
    let e = srq.destroy().unwrap_err();
    assert!(e.is(Errno::BUSY), "{e}");
    drop(receivers);
    let _ = (&mut scq, &mut rcq);
}

/// An SRQ made with `create_srq_ex` reports at least the size asked for in `query`, and
/// destroys with no events reported.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn srq_ex_query_and_destroy() {
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let srq = pd
        .create_srq_ex(&SrqInitAttrEx {
            attr: SrqAttr {
                max_wr: 10,
                max_sge: 2,
                srq_limit: 0,
            },
            ..SrqInitAttrEx::default()
        })
        .expect("create_srq_ex basic");
    let q = srq.query().unwrap();
    assert!(q.max_wr >= 10 && q.max_sge >= 2, "{q:?}");
    let d = srq.destroy().expect("destroy_srq");
    assert_eq!(d.events_reported, 0);
}

/// Finding 2: ibv_create_qp(3): only RC and UD QPs (XRC aside) may use an SRQ.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn uc_qp_on_an_srq_is_refused() {
    let (ctx, pd, cq, srq) = srq_and_cq();
    let mut attr = QpInitAttr::new(QpType::Uc, &cq, &cq, cap(4, 1, 0));
    attr.srq = Some(&srq);
    let e = pd.create_qp(&attr).expect_err("UC with an SRQ");
    assert_eq!(e.op(), "create_qp");
    assert!(e.is(Errno::INVAL), "{e}");
    assert!(
        e.reason().contains("SRQ") && e.reason().contains("Uc"),
        "{e}"
    );
    assert!(e.object().contains(ctx.device().name()), "{e}");
    // RC and UD on the same SRQ are fine.
    for t in [QpType::Rc, QpType::Ud] {
        let mut a = QpInitAttr::new(t, &cq, &cq, cap(4, 1, 0));
        a.srq = Some(&srq);
        pd.create_qp(&a)
            .unwrap_or_else(|e| panic!("{t:?} on an SRQ: {e}"));
    }
}

/// Finding 6: a QP on an SRQ has no receive queue: `cap()` says 0 receive WRs and SGEs, not
/// the ignored request.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn qp_on_an_srq_reports_no_receive_capacity() {
    let (_ctx, pd, cq, srq) = srq_and_cq();
    let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(4, 1, 0));
    attr.cap.max_recv_wr = 16;
    attr.cap.max_recv_sge = 2;
    attr.srq = Some(&srq);
    let qp = pd.create_qp(&attr).unwrap();
    let c = qp.cap();
    assert_eq!((c.max_recv_wr, c.max_recv_sge), (0, 0), "{c:?}");
    assert!(c.max_send_wr >= 4, "{c:?}");
}
