//! What rxe refuses that another provider or the verbs API offers (soft-RoCE VM): EFA's SRD
//! QPs and efadv calls, XRC, tag-matching SRQs and RAW_PACKET QPs. Each is refused before the
//! kernel or by it, naming the call, the device and the reason.

mod common;

use common::pair::{cap, pd_and_cq};
use uverbs::{AhAttr, Errno, QpInitAttr, QpType, SrqAttr, SrqInitAttrEx, SrqType};

/// SRD is EFA's: refused on rxe before the kernel, naming the device and the reason.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn srd_qp_on_rxe_is_refused() {
    let (ctx, pd, cq) = pd_and_cq(16);
    let attr = QpInitAttr::new(QpType::Srd, &cq, &cq, cap(4, 1, 0));
    for r in [pd.create_qp(&attr), pd.create_qp_ex(&attr)] {
        let e = r.expect_err("SRD on rxe");
        assert!(e.is(Errno::OPNOTSUPP), "{e}");
        assert!(e.reason().contains("EFA"), "{e}");
        assert!(e.object().contains(ctx.device().name()), "{e}");
    }
    let e = pd
        .efadv_create_qp_ex(&attr, &uverbs::EfaQpInitAttr::default())
        .expect_err("efadv on rxe");
    assert!(e.is(Errno::OPNOTSUPP), "{e}");
    // efadv_query_ah on an rxe AH is refused too.
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let ah = pd.create_ah(&AhAttr::roce(gid, gid_index, 1)).unwrap();
    let e = ah.efadv_query_ah().expect_err("efadv_query_ah on rxe");
    assert!(e.is(Errno::OPNOTSUPP) && e.reason().contains("EFA"), "{e}");
}

/// The efadv calls of issue 17 on rxe: each refused before the kernel with EOPNOTSUPP, naming
/// the call, the device and the reason ("not an EFA ...").
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn efadv_introspection_and_counters_on_rxe_are_refused() {
    let ctx = common::rxe_context();
    let dev = ctx.device().name().to_string();
    let check = |e: uverbs::Error, op: &str| {
        assert!(e.is(Errno::OPNOTSUPP), "{op}: {e}");
        assert!(e.reason().contains("not an EFA"), "{op}: {e}");
        assert!(e.object().contains(&dev), "{op}: {e}");
        assert!(e.to_string().contains(op), "{op}: {e}");
        eprintln!("refused as expected: {e}");
    };
    check(ctx.efadv_query_device().unwrap_err(), "efadv_query_device");
    check(
        ctx.efadv_create_comp_cntr(&Default::default()).unwrap_err(),
        "efadv_create_comp_cntr",
    );
    check(
        ctx.efadv_get_max_sq_depth(&uverbs::EfaSqDepthAttr {
            max_send_sge: 1,
            ..Default::default()
        })
        .unwrap_err(),
        "efadv_get_max_sq_depth",
    );
    check(
        ctx.efadv_get_max_rq_depth(&uverbs::EfaRqDepthAttr { max_recv_sge: 1 })
            .unwrap_err(),
        "efadv_get_max_rq_depth",
    );
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, None, 0).unwrap();
    check(cq.efadv_query_cq().unwrap_err(), "efadv_query_cq");
    let qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq, cap(4, 1, 0)))
        .unwrap();
    check(qp.efadv_query_qp_wqs().unwrap_err(), "efadv_query_qp_wqs");
}

/// What rxe does not implement is refused naming it: XRC domains ("rxe does not support
/// XRC"), tag-matching SRQs, RAW_PACKET and XRC QPs.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn xrc_tag_matching_and_raw_packet_are_refused_on_rxe() {
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let e = ctx.open_xrcd(None, uverbs::XRCD_O_CREAT).unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP), "{e}");
    assert!(e.to_string().contains("rxe does not support XRC"), "{e}");
    let cq = ctx.create_cq(8, None, 0).unwrap();
    let e = pd
        .create_srq_ex(&SrqInitAttrEx {
            srq_type: SrqType::Tm,
            cq: Some(&cq),
            attr: SrqAttr {
                max_wr: 4,
                max_sge: 1,
                srq_limit: 0,
            },
            ..SrqInitAttrEx::default()
        })
        .unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP), "{e}");
    let e = pd
        .create_qp(&QpInitAttr::new(QpType::RawPacket, &cq, &cq, cap(4, 1, 0)))
        .unwrap_err();
    assert!(e.to_string().contains("RAW_PACKET"), "{e}");
    let e = pd
        .create_qp(&QpInitAttr::new(QpType::XrcSend, &cq, &cq, cap(4, 1, 0)))
        .unwrap_err();
    assert!(e.to_string().contains("XRC"), "{e}");
}
