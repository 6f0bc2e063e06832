//! Owning kernel objects on EFA, against the device model (host): a refused `Cq::destroy`
//! hands the CQ back, still polling; immediate data arrives as the value sent; CQ
//! notification without a channel; the user context of a CQ.

#[path = "common/efa.rs"]
mod efa;

use efa::{poll_n, sge, SrdHost, SrdHostSpec};

use uverbs::{
    AccessFlags, Context, Cq, CqInitAttr, EfaCqInitAttr, EfaQpInitAttr, Errno, Mr, Qp, QpCap,
    QpInitAttr, QpType, RecvWr, SendOpsFlags, SendWr, UdDest, Wc, WcFlags, WcOpcode, WcStatus,
    WrOp,
};
use uverbs_efa_model::{EfaFabric, ModelConfig};

const QKEY: u32 = 0x1234_5678;

fn efa_cq(ctx: &Context) -> Cq {
    ctx.efadv_create_cq(
        &CqInitAttr {
            cqe: 64,
            ..Default::default()
        },
        &EfaCqInitAttr::default(),
    )
    .expect("efadv_create_cq")
}

/// An SRD host on a new default model device of `fab`: 16-deep queues of one SGE, SEND and
/// SEND_WITH_IMM through the `wr_*` API, a local-write memory region.
fn host(fab: &EfaFabric) -> SrdHost {
    let spec = SrdHostSpec {
        cap: QpCap {
            max_inline_data: 0,
            ..SrdHostSpec::default().cap
        },
        send_ops_flags: SendOpsFlags::SEND | SendOpsFlags::SEND_WITH_IMM,
        mr_access: AccessFlags::LOCAL_WRITE,
        ..SrdHostSpec::default()
    };
    efa::srd_host(fab, ModelConfig::default(), &spec, QKEY)
}

/// `a` sends 7 bytes with immediate `imm` to `bqp` (at `bgid`), which posted one receive
/// (wr_id 9, into `bmr`); returns its receive completion, polled from `rcq`.
fn send_imm(
    fab: &EfaFabric,
    a: &mut SrdHost,
    (bqp, bmr, bgid): (&mut Qp, &Mr, [u8; 16]),
    rcq: &mut Cq,
    imm: u32,
) -> Wc {
    let ah = a.pd.create_ah(&efa::ah_attr(bgid)).unwrap();
    let rsge = [sge(bmr, 4096, 64)];
    bqp.post_recv(&[RecvWr {
        wr_id: 9,
        sg_list: &rsge,
    }])
    .unwrap();
    a.mr.write(0, b"efa imm").unwrap();
    let ssge = [sge(&a.mr, 0, 7)];
    let dest = UdDest::new(&ah, bqp.qp_num(), QKEY);
    a.qp.post_send(&[SendWr::new(3, WrOp::SendWithImm { imm_data: imm })
        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
        .sge(&ssge)])
        .unwrap();
    assert_eq!(fab.process(), 1);
    let s = poll_n(&mut a.scq, 1);
    assert_eq!((s[0].wr_id, s[0].status), (3, WcStatus::SUCCESS));
    let r = poll_n(rcq, 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].opcode),
        (9, WcStatus::SUCCESS, WcOpcode::RECV)
    );
    r[0]
}

/// Finding 1 (issue 13), EFA: a CQ refused while a QP completes into it comes back, still
/// polls (a completion arriving after the refusal is read from it), and destroys once the
/// QP is gone.
#[test]
fn refused_cq_destroy_hands_it_back_for_a_retry() {
    let fab = EfaFabric::new(7);
    let mut a = host(&fab);
    let mut b = host(&fab);
    let e = b.rcq.destroy().expect_err("destroy_cq with a QP on it");
    assert!(e.is(Errno::BUSY), "{e}");
    assert!(e.error().reason().starts_with("1 QP(s)"), "{e}");
    let mut rcq = e.into_inner();
    let w = send_imm(&fab, &mut a, (&mut b.qp, &b.mr, b.gid), &mut rcq, 1);
    assert_eq!(w.byte_len, 7);
    drop(b.qp);
    let d = rcq.destroy().expect("destroy_cq after its QP is gone");
    assert_eq!(d.async_events_reported, 0);
    fab.assert_no_violations();
    let _ = (&b.dev, &b.scq);
}

/// The immediate every provider test sends: its bytes differ, so a byte-order slip shows.
const IMM: u32 = 0x1122_3344;

/// Finding 8 (issue 13), EFA: the immediate arrives as the host-order value the sender
/// passed, in `Wc::imm_data` as through `PollCq::read_imm_data` (the same value the rxe VM
/// test `objects::send_imm_arrives_as_sent` checks there).
#[test]
fn send_imm_arrives_as_sent() {
    let fab = EfaFabric::new(8);
    let mut a = host(&fab);
    let mut b = host(&fab);
    let w = send_imm(&fab, &mut a, (&mut b.qp, &b.mr, b.gid), &mut b.rcq, IMM);
    assert!(w.wc_flags.contains(WcFlags::WITH_IMM), "{w:?}");
    assert_eq!(w.imm_data, IMM);
    assert_eq!(w.imm(), Some(IMM));
    // The same through the extended poll.
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let rsge = [sge(&b.mr, 4096, 64)];
    b.qp.post_recv(&[RecvWr {
        wr_id: 10,
        sg_list: &rsge,
    }])
    .unwrap();
    let ssge = [sge(&a.mr, 0, 7)];
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    a.qp.post_send(&[SendWr::new(4, WrOp::SendWithImm { imm_data: IMM })
        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
        .sge(&ssge)])
        .unwrap();
    assert_eq!(fab.process(), 1);
    let g = b.rcq.start_poll().unwrap().expect("the receive");
    assert_eq!(g.wr_id(), 10);
    assert_eq!(g.read_imm_data(), IMM);
    g.end_poll();
    // The C ABI's poll (uverbs' libibverbs): the same completion, the immediate big-endian as
    // `struct ibv_wc` has it; one at a time and two in a call.
    poll_n(&mut a.scq, 1);
    for (n, wr_id) in [(1usize, 11u64), (2, 12)] {
        let mut recvs = Vec::new();
        for k in 0..n as u64 {
            let rsge = [sge(&b.mr, 4096 + 64 * k as usize, 64)];
            b.qp.post_recv(&[RecvWr {
                wr_id: wr_id + 10 * k,
                sg_list: &rsge,
            }])
            .unwrap();
            a.qp.post_send(&[SendWr::new(5, WrOp::SendWithImm { imm_data: IMM })
                .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
                .sge(&ssge)])
                .unwrap();
            recvs.push(wr_id + 10 * k);
        }
        assert_eq!(fab.process(), n);
        let mut wcs = [Wc::default(); 2];
        let mut got = 0;
        while got < n {
            got += b.rcq.poll_net_imm(&mut wcs[got..n]).unwrap();
        }
        for (w, id) in wcs[..n].iter().zip(&recvs) {
            assert_eq!(w.wr_id, *id);
            assert!(w.wc_flags.contains(WcFlags::WITH_IMM), "{w:?}");
            assert_eq!(w.imm_data, IMM.to_be(), "{w:?}");
        }
        poll_n(&mut a.scq, n);
    }
    fab.assert_no_violations();
}

/// Finding 10 (issue 13): as rdma-core's `efa_arm_cq`, `req_notify` arms an EFA CQ created
/// without a completion channel (it was refused with `EINVAL`); solicited-only stays
/// unsupported, as there.
/// A device model's context has no command fd (`ibv_context.cmd_fd` is -1 in the C ABI):
/// its channel is not a kernel device file.
#[test]
fn a_model_context_has_no_command_fd() {
    let fab = EfaFabric::new(10);
    let ctx = fab.add_device(Default::default()).open().expect("open");
    assert!(ctx.command_fd().is_none());
    assert!(ctx.channel().command_fd().is_none());
}

#[test]
fn req_notify_arms_a_cq_without_a_channel() {
    let fab = EfaFabric::new(9);
    let mut h = host(&fab);
    assert!(h.scq.channel().is_none());
    h.scq
        .req_notify(false)
        .expect("req_notify_cq without a channel");
    let e = h.scq.req_notify(true).unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP), "{e}");
    fab.assert_no_violations();
}

/// Each completion event read from the channel is counted into the next arm's command
/// sequence number (`cmd_sn`, bits 30:29 of the CQ doorbell), as libefa's `efa_cq_event` does
/// from `ibv_get_cq_event`. (The model delivers no events itself: the test writes the CQ's
/// handle to the channel, an eventfd in the model, where the kernel would queue the event.)
#[test]
fn efa_arm_after_an_event_carries_the_next_cmd_sn() {
    const ARM: u32 = 1 << 31;
    let fab = EfaFabric::new(12);
    let base = ModelConfig::default();
    let dev = fab.add_device(ModelConfig {
        device_caps: base.device_caps | uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_CQ_NOTIFICATIONS,
        ..base
    });
    let ctx = dev.open().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let mut cq = ctx.create_cq(8, Some(&ch), 0).unwrap();
    for n in 0..6u32 {
        cq.req_notify(false).unwrap();
        let db = fab.cq_doorbell(&dev, cq.handle()).expect("a CQ doorbell");
        assert_eq!((db & ARM, (db >> 29) & 3), (ARM, n & 3), "arm {n}: {db:#x}");
        rustix::io::write(ch.fd(), &cq.user_handle().to_ne_bytes()).unwrap();
        let ev = ch
            .get_cq_event(Some(std::time::Duration::from_secs(1)))
            .unwrap();
        assert_eq!(ev.cq_user_handle, cq.user_handle());
    }
    fab.assert_no_violations();
}

/// Build item 5 on EFA: `cq_context` given to `efadv_create_cq` (and `create_cq_ex`'s
/// attributes in general) is readable from the CQ, and can be replaced.
#[test]
fn cq_context_is_kept() {
    let fab = EfaFabric::new(10);
    let dev = fab.add_device(ModelConfig::default());
    let ctx = dev.open().unwrap();
    let mut cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 8,
                cq_context: 0xEFA0,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    assert_eq!(cq.cq_context(), 0xEFA0);
    cq.set_cq_context(7);
    assert_eq!(cq.cq_context(), 7);
    assert_eq!(efa_cq(&ctx).cq_context(), 0, "not given: 0");
}

/// Build item 5 on EFA: `qp_context` given to `efadv_create_qp_ex` and to `create_qp` (the
/// same `QpInitAttr` as on rxe) is readable from the QP, and can be replaced.
#[test]
fn qp_context_is_kept() {
    let fab = EfaFabric::new(11);
    let dev = fab.add_device(ModelConfig::default());
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = efa_cq(&ctx);
    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut srd = pd
        .efadv_create_qp_ex(
            &QpInitAttr {
                qp_context: 0x5D5D,
                ..QpInitAttr::new(QpType::Srd, &cq, &cq, cap)
            },
            &EfaQpInitAttr::default(),
        )
        .unwrap();
    assert_eq!(srd.qp_context(), 0x5D5D);
    srd.set_qp_context(9);
    assert_eq!(srd.qp_context(), 9);
    let ud = pd
        .create_qp(&QpInitAttr {
            qp_context: 0x0D0D,
            ..QpInitAttr::new(QpType::Ud, &cq, &cq, cap)
        })
        .unwrap();
    assert_eq!(ud.qp_context(), 0x0D0D);
    let plain = pd
        .create_qp(&QpInitAttr::new(QpType::Ud, &cq, &cq, cap))
        .unwrap();
    assert_eq!(plain.qp_context(), 0, "not given: 0");
}
