//! Checks on a real EFA device (an AWS instance with an EFA interface). None can run on a
//! host without one: each is `#[ignore]`d with the reason, so `cargo test` lists them as not
//! run. On an EFA instance:
//! `cargo test --release --workspace --test efa_hw -- --ignored --test-threads=1` (with
//! `--workspace`, the CLI's `efa_hw` target too: `cli/tests/efa_hw.rs`).
//! These send nothing and need no peer.

#[path = "common/efa.rs"]
mod efa;

use uverbs::{
    Context, CqInitAttr, Driver, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr, EfaWcFlags, QpAttrMask,
    QpCap, QpInitAttr, QpState, QpType,
};

fn efa_context() -> Context {
    let devs = uverbs::devices().expect("device discovery");
    let dev = devs
        .iter()
        .find(|d| *d.driver() == Driver::Efa)
        .unwrap_or_else(|| {
            panic!(
                "no EFA device among {:?}",
                devs.iter().map(|d| d.name()).collect::<Vec<_>>()
            )
        });
    Context::open(dev).expect("open the EFA device")
}

#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_query_device() {
    let ctx = efa_context();
    let a = ctx.efadv_query_device().unwrap();
    assert!(a.max_sq_wr > 0 && a.max_rq_wr > 0, "{a:?}");
    assert!(a.max_sq_sge >= 1 && a.max_rq_sge >= 1, "{a:?}");
    assert!(a.inline_buf_size >= 32, "{a:?}");
}

#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_create_cq_qp_and_modify_to_rts() {
    let ctx = efa_context();
    let a = ctx.efadv_query_device().unwrap();
    let wc = if a.device_caps.contains(uverbs::EfaDeviceCaps::CQ_WITH_SGID) {
        EfaWcFlags::WITH_SGID
    } else {
        EfaWcFlags::empty()
    };
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 256,
                ..Default::default()
            },
            &EfaCqInitAttr {
                wc_flags: wc,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(cq.cqe() >= 256);
    let pd = ctx.alloc_pd().unwrap();
    for ty in [QpType::Srd, QpType::Ud] {
        let mut qp = pd
            .efadv_create_qp_ex(
                &QpInitAttr {
                    sq_sig_all: true,
                    send_ops_flags: uverbs::SendOpsFlags::SEND,
                    ..QpInitAttr::new(
                        ty,
                        &cq,
                        &cq,
                        QpCap {
                            max_send_wr: 64,
                            max_recv_wr: 64,
                            max_send_sge: 1,
                            max_recv_sge: 1,
                            max_inline_data: 0,
                        },
                    )
                },
                &EfaQpInitAttr {
                    flags: EfaQpFlags::empty(),
                    sl: 0,
                    wr_flags: Default::default(),
                },
            )
            .unwrap();
        efa::to_rts(&mut qp, 0x1111_2222).unwrap();
        let q = qp
            .query(QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::SQ_PSN | QpAttrMask::CAP)
            .unwrap();
        assert_eq!(q.attr.qp_state, QpState::Rts);
        assert_eq!(q.attr.qkey, 0x1111_2222);
        qp.destroy().unwrap();
    }
    let mut w = [uverbs::Wc::default(); 4];
    let mut cq = cq;
    assert_eq!(cq.poll(&mut w).unwrap(), 0, "nothing was posted");
}

/// `efadv_query_device`'s newest fields on the real device: `inline_buf_size_ex` is at least
/// `inline_buf_size` (libefa substitutes the latter when the kernel reports 0), `comp_mask` 0.
#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_query_device_inline_ex_and_comp_mask() {
    let ctx = efa_context();
    let a = ctx.efadv_query_device().unwrap();
    eprintln!("{a:?}");
    assert!(a.inline_buf_size_ex >= a.inline_buf_size, "{a:?}");
    assert_eq!(a.comp_mask, 0);
}

/// `efadv_get_max_sq_depth` / `efadv_get_max_rq_depth` on the real device, and a QP of exactly
/// those depths is accepted by the kernel.
#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_max_depths_are_creatable() {
    let ctx = efa_context();
    let sq = ctx
        .efadv_get_max_sq_depth(&uverbs::EfaSqDepthAttr {
            max_send_sge: 1,
            ..Default::default()
        })
        .unwrap();
    let rq = ctx
        .efadv_get_max_rq_depth(&uverbs::EfaRqDepthAttr { max_recv_sge: 1 })
        .unwrap();
    eprintln!("max SQ depth {sq}, max RQ depth {rq}");
    assert!(sq.is_power_of_two() && rq > 0);
    let a = ctx.efadv_query_device().unwrap();
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 256,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cap = QpCap {
        max_send_wr: sq.min(a.max_sq_wr),
        max_recv_wr: rq.min(a.max_rq_wr),
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr::new(QpType::Srd, &cq, &cq, cap),
            &EfaQpInitAttr::default(),
        )
        .unwrap();
    qp.destroy().unwrap();
}

/// `efadv_query_qp_wqs` and `efadv_query_cq` on the real device: libefa's values (entry sizes,
/// counts at least what was asked, a doorbell per queue).
#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_query_qp_wqs_and_cq() {
    let ctx = efa_context();
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 256,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    let c = cq.efadv_query_cq().unwrap();
    eprintln!("{c:?}");
    assert_eq!(c.entry_size, 32);
    assert_eq!(c.num_entries, cq.cqe());
    let pd = ctx.alloc_pd().unwrap();
    let qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr::new(
                QpType::Srd,
                &cq,
                &cq,
                QpCap {
                    max_send_wr: 64,
                    max_recv_wr: 64,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
            ),
            &EfaQpInitAttr::default(),
        )
        .unwrap();
    let (sq, rq) = qp.efadv_query_qp_wqs().unwrap();
    eprintln!("{sq:?}\n{rq:?}");
    assert_eq!(sq.entry_size, 64);
    assert!(sq.num_entries >= 64 && sq.num_entries.is_power_of_two());
    assert!(sq.max_batch >= 1);
    assert_eq!(rq.entry_size, 16);
    assert!(rq.num_entries >= 64);
    assert_ne!(sq.doorbell, rq.doorbell);
}

/// Completion counters on the real device: with `EFA_QUERY_DEVICE_CAPS_COMP_CNTR`, create,
/// attach (twice for the same op: EBUSY), read 0, destroy while attached (EBUSY), then after
/// the QP; without it, the create is refused with EOPNOTSUPP naming the cap. Sends nothing
/// (EFA drops same-node SRD), so the counts stay 0.
#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_comp_cntr_lifecycle() {
    use uverbs::{CompCntrOps, EfaDeviceCaps, Errno};
    let ctx = efa_context();
    let a = ctx.efadv_query_device().unwrap();
    if !a.device_caps.contains(EfaDeviceCaps::COMP_CNTR) {
        let e = ctx.efadv_create_comp_cntr(&Default::default()).unwrap_err();
        eprintln!("no completion counters on this device: {e}");
        assert!(e.is(Errno::OPNOTSUPP));
        assert!(
            e.to_string().contains("EFA_QUERY_DEVICE_CAPS_COMP_CNTR"),
            "{e}"
        );
        return;
    }
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 64,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr::new(
                QpType::Srd,
                &cq,
                &cq,
                QpCap {
                    max_send_wr: 16,
                    max_recv_wr: 16,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
            ),
            &EfaQpInitAttr::default(),
        )
        .unwrap();
    let c = ctx.efadv_create_comp_cntr(&Default::default()).unwrap();
    qp.attach_comp_cntr(&c, CompCntrOps::SEND | CompCntrOps::RECV)
        .unwrap();
    let e = qp.attach_comp_cntr(&c, CompCntrOps::SEND).unwrap_err();
    assert!(e.is(Errno::BUSY), "{e}");
    assert_eq!((c.read().unwrap(), c.read_err().unwrap()), (0, 0));
    let e = c.destroy().unwrap_err();
    assert!(e.is(Errno::BUSY), "{e}");
    let c = e.into_inner();
    qp.destroy().unwrap();
    c.destroy().unwrap();
}

/// 64-bit request ids and processing hints on the real device. Whether the device has
/// `EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID` (libefa's `efadv_device_attr` does not report it)
/// shows in the SQ's `EFADV_WQ_CAPS_64_BIT_REQ_ID`, printed. A QP created with `EFADV_WR_EX_WITH_PROCESSING_HINTS` posts a hinted SEND
/// whose wr_id needs all 64 bits to the device's own SRD QP (same-node SRD may be dropped or
/// fail: the test does not ask for delivery) and a plain one; every completion that arrives
/// within a second must carry one of the two wr_ids exactly, on the 64-bit path and on the
/// pool path alike.
#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_64bit_ids_and_processing_hints() {
    use uverbs::{AccessFlags, EfaProcessingHints, EfaWqCaps, EfaWrExFlags};
    let ctx = efa_context();
    let mut cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 64,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: uverbs::SendOpsFlags::SEND,
                ..QpInitAttr::new(
                    QpType::Srd,
                    &cq,
                    &cq,
                    QpCap {
                        max_send_wr: 16,
                        max_recv_wr: 16,
                        max_send_sge: 1,
                        max_recv_sge: 1,
                        max_inline_data: 0,
                    },
                )
            },
            &EfaQpInitAttr {
                wr_flags: EfaWrExFlags::WITH_PROCESSING_HINTS,
                ..Default::default()
            },
        )
        .unwrap();
    let (sq, _) = qp.efadv_query_qp_wqs().unwrap();
    let wide = sq.caps.contains(EfaWqCaps::WITH_64_BIT_REQ_ID);
    eprintln!("64-bit request ids: {wide} ({sq:?})");
    efa::to_rts(&mut qp, 0x1111_2222).unwrap();
    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let s = mr.sge(0, 64).unwrap();
    let gid = ctx.query_gid(1, 0).unwrap();
    assert!(!wide || sq.caps == EfaWqCaps::WITH_64_BIT_REQ_ID);
    let ah = pd.create_ah(&efa::ah_attr(gid.raw)).unwrap();
    const IDS: [u64; 2] = [0xfedc_ba98_7654_3210, 0x0123_4567_89ab_cdef];
    let own = qp.qp_num();
    let mut batch = qp.wr_start().unwrap();
    batch
        .send(IDS[0], uverbs::SendFlags::SIGNALED)
        .efadv_set_processing_hints(EfaProcessingHints::BURST_PPS_SENSITIVE)
        .set_ud_addr(&ah, own, 0x1111_2222)
        .set_sge(s.lkey, s.addr, s.length);
    batch
        .send(IDS[1], uverbs::SendFlags::SIGNALED)
        .set_ud_addr(&ah, own, 0x1111_2222)
        .set_sge(s.lkey, s.addr, s.length);
    batch.complete().unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut w = [uverbs::Wc::default(); 4];
    let mut seen = Vec::new();
    while std::time::Instant::now() < until && seen.len() < 2 {
        let k = cq.poll(&mut w).unwrap();
        seen.extend(w[..k].iter().map(|c| (c.wr_id, c.status)));
    }
    eprintln!("completions: {seen:x?}");
    assert!(seen.iter().all(|(id, _)| IDS.contains(id)), "{seen:x?}");
}
