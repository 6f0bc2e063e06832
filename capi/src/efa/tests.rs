//! What the host tests (`capi/tests/efa.rs`) cannot reach through C entry points alone:
//! `efadv_query_ah` and `efadv_query_mr` on wrapped objects (capi has no `ibv_create_ah` /
//! `ibv_reg_mr` yet), the efadv data path (the `efadv_cq` readers inside an extended poll, the
//! `efadv_qp` setter inside a `wr_*` batch) with AHs and MRs made in uverbs, and the model
//! devices `UVERBS_EFA_MODEL` lists, with the background thread moving their traffic.

use core::mem::ManuallyDrop;
use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, AhAttr, CqInitAttr, EfaQpInitAttr, Gid, GlobalRoute, QpAttr, QpAttrMask, QpCap,
    QpInitAttr, QpState, QpType, RecvWr, SendWr, Wc, WcStatus, WrOp,
};

use super::*;

fn model_ctx() -> (uverbs_efa_model::EfaFabric, *mut ibv_context) {
    let f = uverbs_efa_model::EfaFabric::new(3);
    let ctx = f.add_device(Default::default()).open().expect("open");
    let dev = uverbs::Device::synthetic("efa_unit", uverbs::Driver::Efa, 0x0200_0000_0000_0099);
    (f, crate::device::wrap_context(dev, ctx))
}

fn ah_attr(gid: [u8; 16]) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            dgid: Gid { raw: gid },
            ..Default::default()
        },
        is_global: true,
        port_num: 1,
        ..Default::default()
    }
}

#[test]
fn query_ah_and_query_mr_answer_for_wrapped_objects() {
    let (_f, ibvctx) = model_ctx();
    // SAFETY: a context wrap_context just made.
    let c = unsafe { context(ibvctx) }.expect("context");
    let pd = c.ctx.alloc_pd().expect("pd");
    let gid = c.ctx.query_gid(1, 0).expect("gid");
    let ah = pd.create_ah(&ah_attr(gid.raw)).expect("ah");
    let want_ahn = ah.ah_num() as u16;
    let ah = Box::into_raw(Box::new(crate::ah::Ah {
        ibv: ibv_ah {
            context: ibvctx,
            pd: ptr::null_mut(),
            handle: ah.handle(),
        },
        ah: ManuallyDrop::new(ah),
    })) as *mut ibv_ah;
    let mut a = efadv_ah_attr {
        reserved: [9; 6],
        ..Default::default()
    };
    // SAFETY: a live AH and a whole struct.
    assert_eq!(unsafe { efadv_query_ah(ah, &mut a, 16) }, 0);
    assert_eq!(a.ahn, want_ahn);
    assert_eq!(a.reserved, [0; 6], "memset to inlen, as libefa");
    // SAFETY: as above; shorter than ahn.
    assert_eq!(unsafe { efadv_query_ah(ah, &mut a, 9) }, libc::EINVAL);

    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).expect("mr");
    let m = mr.efadv_query_mr().expect("uverbs query_mr");
    let mr = Box::into_raw(Box::new(crate::mr::Mr {
        // SAFETY: all-zero is a valid ibv_mr (NULL pointers, zeros).
        ibv: unsafe { core::mem::zeroed() },
        mr: ManuallyDrop::new(mr),
        dmabuf: false,
    }));
    // SAFETY: `mr` was just boxed.
    unsafe { (*mr).ibv.context = ibvctx };
    let mr = mr as *mut ibv_mr;
    let mut out = efadv_mr_attr::default();
    // SAFETY: a live MR and a whole struct.
    assert_eq!(unsafe { efadv_query_mr(mr, &mut out, 16) }, 0);
    assert_eq!(out.recv_ic_id, m.recv_ic_id.unwrap_or(0));
    assert_eq!(out.rdma_read_ic_id, m.rdma_read_ic_id.unwrap_or(0));
    assert_eq!(out.ic_id_validity & 1 != 0, m.recv_ic_id.is_some());
    assert_ne!(out.ic_id_validity, 0, "the model reports interconnects");
    // SAFETY: as above; shorter than rdma_recv_ic_id.
    assert_eq!(unsafe { efadv_query_mr(mr, &mut out, 14) }, libc::EINVAL);
}

fn to_rts(qp: &mut uverbs::Qp) {
    let init = QpAttr {
        qp_state: QpState::Init,
        qkey: 0x1111,
        port_num: 1,
        ..Default::default()
    };
    let m = QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
    qp.modify(&init, m).expect("INIT");
    let rtr = QpAttr {
        qp_state: QpState::Rtr,
        ..Default::default()
    };
    qp.modify(&rtr, QpAttrMask::STATE).expect("RTR");
    let rts = QpAttr {
        qp_state: QpState::Rts,
        ..Default::default()
    };
    qp.modify(&rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
        .expect("RTS");
}

/// UVERBS_EFA_MODEL=2 lists efa_model0 and efa_model1 on one fabric, and a send between them
/// completes on both sides without anyone calling `process()`: the background thread does.
#[test]
fn model_devices_move_traffic_by_themselves() {
    // Only this test reads the variable (the model is made once per process).
    std::env::set_var("UVERBS_EFA_MODEL", "2");
    let devs = model_devices();
    let names: Vec<&str> = devs.iter().map(|d| d.name()).collect();
    assert_eq!(names, ["efa_model0", "efa_model1"]);
    assert!(open_model(&uverbs::Device::synthetic("rxe0", uverbs::Driver::Rxe, 1)).is_none());
    let a = open_model(&devs[0]).expect("a model device").expect("open");
    let b = open_model(&devs[1]).expect("a model device").expect("open");
    assert_ne!(
        a.query_gid(1, 0).unwrap().raw,
        b.query_gid(1, 0).unwrap().raw
    );

    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let attr = CqInitAttr {
        cqe: 16,
        ..Default::default()
    };
    let (apd, bpd) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let mut acq = a.efadv_create_cq(&attr, &Default::default()).unwrap();
    let mut bcq = b.efadv_create_cq(&attr, &Default::default()).unwrap();
    let mut ainit = QpInitAttr::new(QpType::Srd, &acq, &acq, cap);
    ainit.sq_sig_all = true;
    let mut aqp = apd
        .efadv_create_qp_ex(&ainit, &EfaQpInitAttr::default())
        .unwrap();
    let mut bqp = bpd
        .efadv_create_qp_ex(
            &QpInitAttr::new(QpType::Srd, &bcq, &bcq, cap),
            &EfaQpInitAttr::default(),
        )
        .unwrap();
    to_rts(&mut aqp);
    to_rts(&mut bqp);
    let amr = apd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let bmr = bpd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let ah = apd
        .create_ah(&ah_attr(b.query_gid(1, 0).unwrap().raw))
        .unwrap();
    let rs = [bmr.sge(0, 64).unwrap()];
    bqp.post_recv(&[RecvWr {
        wr_id: 7,
        sg_list: &rs,
    }])
    .unwrap();
    let ss = [amr.sge(0, 64).unwrap()];
    aqp.post_send(&[SendWr::new(9, WrOp::Send)
        .ud(&ah, bqp.qp_num(), 0x1111)
        .sge(&ss)])
        .unwrap();

    let poll = |cq: &mut uverbs::Cq| -> Wc {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut wc = [Wc::default()];
        loop {
            if cq.poll(&mut wc).unwrap() == 1 {
                return wc[0];
            }
            assert!(
                Instant::now() < deadline,
                "no completion: the model thread is not running"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let s = poll(&mut acq);
    assert_eq!((s.wr_id, s.status), (9, WcStatus::SUCCESS));
    let r = poll(&mut bcq);
    assert_eq!((r.wr_id, r.status, r.byte_len), (7, WcStatus::SUCCESS, 64));
}

/// One side of the data-path test: a model context wrapped for C, its PD, an efadv CQ with
/// source GIDs (and a completion channel), an SRD QP from `efadv_create_qp_ex` with the
/// `wr_*` send builder (and processing hints when `hints`), in RTS.
struct Side {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    ch: *mut ibv_comp_channel,
    cq: *mut ibv_cq_ex,
    qp: *mut ibv_qp,
    gid: [u8; 16],
}

fn side(f: &uverbs_efa_model::EfaFabric, hints: bool) -> Side {
    // Completion channels need CQ notifications (the model's default device has none).
    let cfg = uverbs_efa_model::ModelConfig {
        device_caps: uverbs_efa_model::ModelConfig::default().device_caps
            | uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_CQ_NOTIFICATIONS,
        ..Default::default()
    };
    let uctx = f.add_device(cfg).open().expect("open");
    let gid = uctx.query_gid(1, 0).expect("gid").raw;
    let dev = uverbs::Device::synthetic("efa_dp", uverbs::Driver::Efa, 0x0200_0000_0000_00a0);
    let ctx = crate::device::wrap_context(dev, uctx);
    // SAFETY: the context just wrapped, and the objects made on it below.
    unsafe {
        let pd = crate::pd::ibv_alloc_pd(ctx);
        assert!(!pd.is_null());
        let ch = crate::cq::ibv_create_comp_channel(ctx);
        assert!(!ch.is_null());
        let mut a: ibv_cq_init_attr_ex = core::mem::zeroed();
        a.cqe = 16;
        a.channel = ch;
        a.cq_context = 0x77 as *mut core::ffi::c_void;
        let mut e: efadv_cq_init_attr = core::mem::zeroed();
        e.wc_flags = EFADV_WC_EX_WITH_SGID;
        let cq = efadv_create_cq(ctx, &mut a, &mut e, 16);
        assert!(
            !cq.is_null(),
            "efadv_create_cq with a channel: errno {}",
            errno()
        );
        let mut qa: ibv_qp_init_attr_ex = core::mem::zeroed();
        qa.send_cq = cq as *mut ibv_cq;
        qa.recv_cq = cq as *mut ibv_cq;
        qa.cap = ibv_qp_cap {
            max_send_wr: 8,
            max_recv_wr: 8,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        qa.qp_type = IBV_QPT_DRIVER;
        qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        qa.pd = pd;
        qa.send_ops_flags = uverbs::SendOpsFlags::SEND.bits();
        let mut ea = efadv_qp_init_attr {
            driver_qp_type: EFADV_QP_DRIVER_TYPE_SRD,
            wr_flags: if hints {
                EFADV_WR_EX_WITH_PROCESSING_HINTS
            } else {
                0
            },
            ..Default::default()
        };
        let qp = efadv_create_qp_ex(ctx, &mut qa, &mut ea, 24);
        assert!(!qp.is_null(), "efadv_create_qp_ex: errno {}", errno());
        to_rts(&mut crate::qp::qp(qp).expect("qp").qp);
        Side {
            ctx,
            pd,
            ch,
            cq,
            qp,
            gid,
        }
    }
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Polls `cq` through its `ibv_cq_ex` functions until a completion is there (processing the
/// fabric meanwhile) and leaves the poll open on it.
///
/// # Safety
/// `cq` is a live CQ of this library.
unsafe fn start_poll_on(f: &uverbs_efa_model::EfaFabric, cq: *mut ibv_cq_ex) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut pa = ibv_poll_cq_attr { comp_mask: 0 };
    loop {
        f.process();
        // SAFETY: the caller's live CQ.
        match unsafe { ((*cq).start_poll.expect("start_poll"))(cq, &mut pa) } {
            0 => return,
            r => assert_eq!(r, libc::ENOENT),
        }
        assert!(Instant::now() < deadline, "no completion");
    }
}

/// The efadv data path through the C structs: a send built with `ibv_wr_*` and
/// `efadv_wr_set_processing_hints` (on a QP created with the hints flag it posts; on one
/// without, the setter fails the batch), received on a CQ made with a completion channel,
/// whose `efadv_cq` reads the sender's GID (B has no AH for A) and `-ENOENT` on a send
/// completion.
#[test]
fn efadv_readers_and_setter_work_inside_poll_and_batch() {
    let f = uverbs_efa_model::EfaFabric::new(11);
    let a = side(&f, true);
    let b = side(&f, false);
    // SAFETY: the live objects of `a` and `b`, each used by this thread only.
    unsafe {
        // The channel is cq.rs's: the CQ names it and holds a reference (EBUSY on destroy).
        assert_eq!((*b.cq).channel, b.ch);
        assert_eq!((*b.ch).refcnt, 1);
        assert_eq!(crate::cq::ibv_destroy_comp_channel(b.ch), libc::EBUSY);

        let bqp = &mut crate::qp::qp(b.qp).expect("qp").qp;
        let bmr = crate::pd::pd(b.pd)
            .unwrap()
            .pd
            .reg_mr(4096, AccessFlags::LOCAL_WRITE)
            .unwrap();
        let rs = [bmr.sge(0, 64).unwrap()];
        bqp.post_recv(&[RecvWr {
            wr_id: 7,
            sg_list: &rs,
        }])
        .unwrap();

        let apd = &crate::pd::pd(a.pd).unwrap().pd;
        let amr = apd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
        let ah = apd.create_ah(&ah_attr(b.gid)).unwrap();
        let ah = Box::into_raw(Box::new(crate::ah::Ah {
            ibv: ibv_ah {
                context: a.ctx,
                pd: a.pd,
                handle: ah.handle(),
            },
            ah: ManuallyDrop::new(ah),
        })) as *mut ibv_ah;
        let bqpn = (*b.qp).qp_num;

        // A batch on A's QP: the builder, the hints, the SGE and the destination.
        let x = a.qp as *mut ibv_qp_ex;
        let dv = efadv_qp_from_ibv_qp_ex(x);
        assert!(!dv.is_null());
        assert_eq!(efadv_qp_from_ibv_qp_ex(x), dv, "the one embedded in the QP");
        let hint = (*dv).wr_set_processing_hints.expect("setter");
        ((*x).wr_start.unwrap())(x);
        (*x).wr_id = 9;
        (*x).wr_flags = 2; // IBV_SEND_SIGNALED
        ((*x).wr_send.unwrap())(x);
        hint(dv, EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE);
        ((*x).wr_set_sge.unwrap())(x, amr.lkey(), amr.addr(), 64);
        ((*x).wr_set_ud_addr.unwrap())(x, ah, bqpn, 0x1111);
        assert_eq!(((*x).wr_complete.unwrap())(x), 0);

        // B's QP has no hints flag: the same setter fails its batch at complete.
        let y = b.qp as *mut ibv_qp_ex;
        let ydv = efadv_qp_from_ibv_qp_ex(y);
        ((*y).wr_start.unwrap())(y);
        ((*y).wr_send.unwrap())(y);
        ((*ydv).wr_set_processing_hints.unwrap())(
            ydv,
            EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE,
        );
        assert_ne!(
            ((*y).wr_complete.unwrap())(y),
            0,
            "hints refused on a QP without the flag"
        );

        // B's receive: the efadv_cq reads A's GID inside the poll.
        start_poll_on(&f, b.cq);
        assert_eq!(((*b.cq).status, (*b.cq).wr_id), (0, 7));
        let bdv = efadv_cq_from_ibv_cq_ex(b.cq);
        assert!(!bdv.is_null());
        assert_eq!(
            efadv_cq_from_ibv_cq_ex(b.cq),
            bdv,
            "the one embedded in the CQ"
        );
        let mut gid = ibv_gid { raw: [0; 16] };
        assert_eq!(((*bdv).wc_read_sgid.unwrap())(bdv, &mut gid), 0);
        assert_eq!(gid.raw, a.gid, "the sender's GID: B has no AH for A");
        assert!(!((*bdv).wc_is_unsolicited.unwrap())(bdv));
        ((*b.cq).end_poll.unwrap())(b.cq);

        // A's send completion carries no GID.
        start_poll_on(&f, a.cq);
        assert_eq!(((*a.cq).status, (*a.cq).wr_id), (0, 9));
        let adv = efadv_cq_from_ibv_cq_ex(a.cq);
        assert_eq!(((*adv).wc_read_sgid.unwrap())(adv, &mut gid), -libc::ENOENT);
        ((*a.cq).end_poll.unwrap())(a.cq);

        for s in [&a, &b] {
            assert_eq!(crate::qp::ibv_destroy_qp(s.qp), 0);
            assert_eq!(crate::cq::ibv_destroy_cq(s.cq as *mut ibv_cq), 0);
            assert_eq!(crate::cq::ibv_destroy_comp_channel(s.ch), 0);
        }
    }
}
