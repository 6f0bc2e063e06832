//! Checks on a real EFA device (an AWS instance with an EFA interface). None can run on a
//! host without one: each is `#[ignore]`d with the reason, so `cargo test` lists them as not
//! run. On an EFA instance: `cargo test --release --test efa_hw -- --ignored --test-threads=1`.
//! All but `efa_hw_pingpong_srd` send nothing and need no peer. That one needs a second EFA
//! instance, because EFA silently drops same-node SRD traffic: start
//! `uverbs pingpong srd -c -n 1000` there and name it in `UVERBS_EFA_PEER`; without it the test
//! fails saying so (it never passes without having sent).

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

/// `uverbs pingpong srd -c` (the binary cargo built for this test, or `UVERBS_BIN`) as the
/// client of a server on a second EFA instance (`UVERBS_EFA_PEER`, where
/// `uverbs pingpong srd -c -n 1000` runs; EFA drops same-node SRD, so the peer must be another
/// host): the client must exit 0, print the summary for 1000 iterations and check every
/// received message. Without `UVERBS_EFA_PEER` it fails with the instruction.
#[test]
#[ignore = "needs two EFA instances (UVERBS_EFA_PEER=<host running `uverbs pingpong srd -c -n 1000`>, then cargo test --test efa_hw -- --ignored)"]
fn efa_hw_pingpong_srd() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const ITERS: &str = "1000";
    let peer = std::env::var("UVERBS_EFA_PEER").unwrap_or_else(|_| {
        panic!(
            "efa_hw_pingpong_srd needs a second EFA instance (EFA drops same-node SRD): run \
             `uverbs pingpong srd -c -n {ITERS}` there and set UVERBS_EFA_PEER=<its address>"
        )
    });
    let ctx = efa_context();
    let name = ctx.device().name().to_string();
    let bin = std::env::var_os("UVERBS_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_uverbs").into());
    let mut client = Command::new(&bin)
        .args(["pingpong", "srd", "-d", &name, "-n", ITERS, "-c", &peer])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {bin:?}: {e}"));
    let by = Instant::now() + Duration::from_secs(120);
    while client.try_wait().unwrap().is_none() {
        if Instant::now() > by {
            let _ = client.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = client.wait_with_output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "client: {}\n{out}\n{err}", o.status);
    assert!(out.contains(&format!("{ITERS} iters in ")), "{out}");
    assert!(
        out.contains(&format!("{ITERS} of {ITERS} received messages checked")),
        "{out}"
    );
    assert!(out.contains("remote address:"), "{out}");
}
