//! What the host tests (`capi/tests/efa.rs`) cannot reach through C entry points in this
//! branch: `efadv_query_ah` and `efadv_query_mr` on wrapped objects, and the model devices
//! `UVERBS_EFA_MODEL` lists, with the background thread moving their traffic.

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
