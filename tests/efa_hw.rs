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
