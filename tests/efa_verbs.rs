//! EFA verbs through the public API against the strict device model (uverbs-efa-model): every
//! command the kernel would see, every ring the device would read, data checked byte by byte.

#[path = "common/efa.rs"]
mod efa;

use efa::{cq, sge};

use uverbs::{
    AccessFlags, Cq, CqInitAttr, EfaCqExtMem, EfaCqInitAttr, EfaCqInitFlags, EfaDeviceCaps,
    EfaQpFlags, EfaQpInitAttr, EfaWc, EfaWcFlags, Errno, Mr, Pd, Qp, QpAttr, QpAttrMask, QpCap,
    QpInitAttr, QpState, QpType, RecvWr, SendFlags, SendOpsFlags, SendWr, Sge, UdDest, Wc,
    WcOpcode, WcStatus, WrOp,
};
use uverbs_efa_model::{EfaFabric, ModelConfig};

const QKEY: u32 = 0x1234_5678;

/// The `wr_*` operations every EFA QP can post.
const SEND_OPS: SendOpsFlags = SendOpsFlags::SEND.union(SendOpsFlags::SEND_WITH_IMM);

/// Every `wr_*` operation a QP of type `ty` can post on a device with `caps`.
fn ops_for(ty: QpType, caps: u32) -> SendOpsFlags {
    use uverbs::uapi::efa::{EFA_QUERY_DEVICE_CAPS_RDMA_READ, EFA_QUERY_DEVICE_CAPS_RDMA_WRITE};
    let mut f = SEND_OPS;
    if ty == QpType::Srd && caps & EFA_QUERY_DEVICE_CAPS_RDMA_READ != 0 {
        f |= SendOpsFlags::RDMA_READ;
    }
    if ty == QpType::Srd && caps & EFA_QUERY_DEVICE_CAPS_RDMA_WRITE != 0 {
        f |= SendOpsFlags::RDMA_WRITE | SendOpsFlags::RDMA_WRITE_WITH_IMM;
    }
    f
}

struct Host {
    dev: uverbs_efa_model::EfaDevice,
    pd: Pd,
    scq: Cq,
    rcq: Cq,
    qp: Qp,
    mr: Mr,
    gid: [u8; 16],
}

fn host(fab: &EfaFabric, cfg: ModelConfig, cap: QpCap, flags: EfaQpFlags, ty: QpType) -> Host {
    host_cqe(fab, cfg, cap, flags, ty, 64)
}

fn host_cqe(
    fab: &EfaFabric,
    cfg: ModelConfig,
    cap: QpCap,
    flags: EfaQpFlags,
    ty: QpType,
    cqe: u32,
) -> Host {
    let dev = fab.add_device(cfg);
    let ctx = dev.open().expect("open model device");
    let pd = ctx.alloc_pd().unwrap();
    let scq = cq(&ctx, cqe, EfaWcFlags::empty());
    let rcq = cq(&ctx, cqe, EfaWcFlags::WITH_SGID);
    let mut qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: ops_for(ty, cfg.device_caps),
                ..QpInitAttr::new(ty, &scq, &rcq, cap)
            },
            &EfaQpInitAttr {
                flags,
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .expect("efadv_create_qp");
    efa::to_rts(&mut qp, QKEY).expect("modify to RTS");
    let mr = pd
        .reg_mr(
            1 << 16,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
        )
        .unwrap();
    Host {
        dev: dev.clone(),
        pd,
        scq,
        rcq,
        qp,
        mr,
        gid: dev.gid(),
    }
}

fn cap(wr: u32) -> QpCap {
    QpCap {
        max_send_wr: wr,
        max_recv_wr: wr,
        max_send_sge: 2,
        max_recv_sge: 1,
        max_inline_data: 32,
    }
}

/// Exactly `n` completions of `cq`, and no more.
fn poll_all(cq: &mut Cq, n: usize) -> Vec<Wc> {
    let out = efa::poll_n(cq, n);
    let mut extra = [Wc::default(); 1];
    assert_eq!(
        cq.poll(&mut extra).unwrap(),
        0,
        "unexpected extra completion"
    );
    out
}

#[test]
fn efa_query_device_reports_caps_and_inline() {
    let fab = EfaFabric::default();
    let dev = fab.add_device(ModelConfig::default());
    let ctx = dev.open().unwrap();
    let a = ctx.efadv_query_device().unwrap();
    assert_eq!(a.max_sq_wr, 4096);
    assert_eq!(a.max_rq_wr, 8192);
    assert_eq!(a.max_sq_sge, 2);
    assert_eq!(a.inline_buf_size, 32);
    assert_eq!(a.max_rdma_size, 1 << 30);
    assert!(a.device_caps.contains(
        EfaDeviceCaps::RDMA_READ
            | EfaDeviceCaps::RDMA_WRITE
            | EfaDeviceCaps::CQ_WITH_SGID
            | EfaDeviceCaps::RNR_RETRY
            | EfaDeviceCaps::UNSOLICITED_WRITE_RECV
            | EfaDeviceCaps::CQ_WITH_EXT_MEM_DMABUF
    ));
    let no_rdma = fab.add_device(ModelConfig {
        device_caps: 0,
        ..Default::default()
    });
    let a = no_rdma.open().unwrap().efadv_query_device().unwrap();
    assert_eq!(a.device_caps, EfaDeviceCaps::empty());
}

/// The efadv device attributes are asked of the kernel once per context, when it is created
/// (as libefa's `efa_alloc_context` does), not once per QP and CQ create (they never change).
#[test]
fn efa_query_device_is_issued_once_per_context() {
    use uverbs::channel::Channel;
    let fab = EfaFabric::default();
    let dev = fab.add_device(ModelConfig::default());
    let (ctx, count) = efa::CountingChannel::open(&dev, "efa_counted", 0x0200_0000_0000_00aa);
    assert_eq!(ctx.channel().driver_id(), dev.driver_id());
    assert_eq!(count.query_device(), 1, "opening asks once");
    let pd = ctx.alloc_pd().unwrap();
    let mut qps = Vec::new();
    let mut cqs = Vec::new();
    for _ in 0..3 {
        cqs.push((
            cq(&ctx, 16, EfaWcFlags::empty()),
            cq(&ctx, 16, EfaWcFlags::WITH_SGID),
        ));
    }
    assert_eq!(count.query_device(), 1, "six CQ creates, no QUERY_DEVICE");
    for (s, r) in &cqs {
        qps.push(
            pd.efadv_create_qp_ex(
                &QpInitAttr {
                    sq_sig_all: true,
                    send_ops_flags: SEND_OPS,
                    ..QpInitAttr::new(QpType::Srd, s, r, cap(8))
                },
                &EfaQpInitAttr {
                    flags: EfaQpFlags::empty(),
                    sl: 0,
                    wr_flags: Default::default(),
                },
            )
            .unwrap(),
        );
    }
    let a = ctx.efadv_query_device().unwrap();
    assert_eq!(a.max_sq_wr, 4096);
    assert_eq!(
        count.query_device(),
        1,
        "three QP creates and a query: still the one of opening"
    );
    // The cache is per context: a second context asks again, once, when it opens.
    let (ctx2, count2) = efa::CountingChannel::open(&dev, "efa_counted2", 0x0200_0000_0000_00ab);
    let _c = cq(&ctx2, 16, EfaWcFlags::empty());
    let _d = cq(&ctx2, 16, EfaWcFlags::empty());
    assert_eq!((count.query_device(), count2.query_device()), (1, 1));
    // The generic ibv_query_device_ex is not cached: it still reaches the device.
    ctx.query_device_ex().unwrap();
    assert_eq!(count.query_device(), 2);
    drop(qps);
}

#[test]
fn efa_srd_send_recv_moves_data_between_hosts() {
    let fab = EfaFabric::new(7);
    let mut a = host(
        &fab,
        ModelConfig::default(),
        cap(16),
        EfaQpFlags::empty(),
        QpType::Srd,
    );
    let mut b = host(
        &fab,
        ModelConfig::default(),
        cap(16),
        EfaQpFlags::empty(),
        QpType::Srd,
    );
    let ah_ab = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let ah_ba = b.pd.create_ah(&efa::ah_attr(a.gid)).unwrap();
    assert_ne!(ah_ab.efadv_query_ah().unwrap(), 0xffff);
    let q =
        a.qp.query(QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::SQ_PSN | QpAttrMask::CAP)
            .unwrap();
    assert_eq!(q.attr.qp_state, QpState::Rts);
    assert_eq!(q.attr.qkey, QKEY);
    assert!(q.sq_sig_all);

    a.mr.write(0, b"hello, efa srd!!").unwrap();
    a.mr.write(100, b"second-sge").unwrap();
    let rsge = [sge(&b.mr, 4096, 64)];
    b.qp.post_recv(&[RecvWr {
        wr_id: 77,
        sg_list: &rsge,
    }])
    .unwrap();
    let sges = [sge(&a.mr, 0, 16), sge(&a.mr, 100, 10)];
    let dest = UdDest::new(&ah_ab, b.qp.qp_num(), QKEY);
    a.qp.post_send(&[SendWr::new(5, WrOp::SendWithImm { imm_data: 0xabcd })
        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
        .sge(&sges)])
        .unwrap();
    assert_eq!(fab.process(), 1);

    let s = poll_all(&mut a.scq, 1);
    assert_eq!(
        (s[0].wr_id, s[0].status, s[0].opcode),
        (5, WcStatus::SUCCESS, WcOpcode::SEND)
    );
    let mut r = [EfaWc::default(); 2];
    assert_eq!(b.rcq.poll_efa(&mut r).unwrap(), 1);
    let w = r[0].wc;
    assert_eq!(
        (w.wr_id, w.status, w.opcode),
        (77, WcStatus::SUCCESS, WcOpcode::RECV)
    );
    assert_eq!(w.byte_len, 26);
    assert_eq!(w.imm(), Some(0xabcd));
    assert_eq!(w.src_qp, a.qp.qp_num());
    assert_eq!(w.qp_num, b.qp.qp_num());
    assert_eq!(
        w.slid,
        ah_ba.efadv_query_ah().unwrap(),
        "the receiver knows the sender's AH"
    );
    assert!(
        r[0].read_sgid().unwrap_err().is(Errno::NOENT),
        "SGID only for unknown senders"
    );
    let mut got = [0u8; 26];
    b.mr.read(4096, &mut got).unwrap();
    assert_eq!(&got, b"hello, efa srd!!second-sge");
    fab.assert_no_violations();
}

fn pair(
    fab: &EfaFabric,
    cfg: ModelConfig,
    cap: QpCap,
    flags: EfaQpFlags,
    cqe: u32,
) -> (Host, Host) {
    let a = host_cqe(fab, cfg, cap, EfaQpFlags::empty(), QpType::Srd, cqe);
    let b = host_cqe(fab, cfg, cap, flags, QpType::Srd, cqe);
    (a, b)
}

/// [`pair`] with the default device model, no QP flags, `wr`-deep queues and `cqe`-entry CQs:
/// what most tests here start from.
fn plain_pair(fab: &EfaFabric, wr: u32, cqe: u32) -> (Host, Host) {
    pair(
        fab,
        ModelConfig::default(),
        cap(wr),
        EfaQpFlags::empty(),
        cqe,
    )
}

#[test]
fn efa_rings_wrap_three_times_on_sq_rq_and_cq() {
    let fab = EfaFabric::new(3);
    let (mut a, mut b) = plain_pair(&fab, 8, 8);
    assert_eq!(a.qp.cap().max_send_wr, 8);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    // 8-deep SQ and RQ, 8-entry sub-CQs: 40 round trips wrap each ring five times.
    for i in 0..40u32 {
        let payload = i.to_le_bytes();
        a.mr.write(0, &payload).unwrap();
        let r = [sge(&b.mr, 512, 4)];
        b.qp.post_recv(&[RecvWr {
            wr_id: 1000 + u64::from(i),
            sg_list: &r,
        }])
        .unwrap();
        let s = [sge(&a.mr, 0, 4)];
        a.qp.post_send(&[SendWr::send(u64::from(i))
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&s)])
            .unwrap();
        assert_eq!(fab.process(), 1);
        let sw = poll_all(&mut a.scq, 1);
        assert_eq!(sw[0].wr_id, u64::from(i));
        let rw = poll_all(&mut b.rcq, 1);
        assert_eq!(rw[0].wr_id, 1000 + u64::from(i));
        assert_eq!(rw[0].status, WcStatus::SUCCESS);
        let mut got = [0u8; 4];
        b.mr.read(512, &mut got).unwrap();
        assert_eq!(got, payload, "round {i}");
    }
    let (phase, consumed) = fab.sq_state(&a.dev, a.qp.qp_num());
    assert_eq!(consumed, 40);
    assert!(phase, "40 WQEs in an 8-deep SQ: fifth pass, phase 1");
    fab.assert_no_violations();
}

#[test]
fn efa_multiple_sub_cqs_are_polled() {
    let fab = EfaFabric::new(5);
    let (mut a, mut b) = plain_pair(&fab, 16, 16);
    // A second QP on a's CQs gets the next QP number and so the other sub-CQ.
    let mut qp2 =
        a.pd.efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SEND_OPS,
                ..QpInitAttr::new(QpType::Srd, &a.scq, &a.rcq, cap(16))
            },
            &EfaQpInitAttr {
                flags: EfaQpFlags::empty(),
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .unwrap();
    efa::to_rts(&mut qp2, QKEY).unwrap();
    assert_eq!(a.scq.efa_sub_cqs(), 2);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    let r = [sge(&b.mr, 0, 64)];
    let recvs: Vec<_> = (0..6)
        .map(|i| RecvWr {
            wr_id: 100 + i,
            sg_list: &r,
        })
        .collect();
    b.qp.post_recv(&recvs).unwrap();
    let s = [sge(&a.mr, 0, 8)];
    a.qp.post_send(&[
        SendWr::send(1)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&s),
        SendWr::send(2)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&s),
    ])
    .unwrap();
    qp2.post_send(&[
        SendWr::send(11)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&s),
        SendWr::send(12)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&s),
        SendWr::send(13)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&s),
    ])
    .unwrap();
    assert_eq!(fab.process(), 5);
    let produced = fab.cq_produced(&a.dev, a.scq.handle());
    assert_eq!(produced.len(), 2);
    assert!(
        produced.iter().all(|&n| n > 0),
        "both sub-CQs used: {produced:?}"
    );
    let mut ids: Vec<u64> = poll_all(&mut a.scq, 5).iter().map(|w| w.wr_id).collect();
    ids.sort();
    assert_eq!(ids, [1, 2, 11, 12, 13]);
    assert_eq!(poll_all(&mut b.rcq, 5).len(), 5);
    fab.assert_no_violations();
}

#[test]
fn efa_srd_delivery_is_reordered_and_every_wr_id_completes_once() {
    let fab = EfaFabric::new(11);
    let (mut a, mut b) = plain_pair(&fab, 32, 64);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    let rs: Vec<[Sge; 1]> = (0..20).map(|i| [sge(&b.mr, 64 * i, 64)]).collect();
    let recvs: Vec<_> = rs
        .iter()
        .enumerate()
        .map(|(i, r)| RecvWr {
            wr_id: i as u64,
            sg_list: r,
        })
        .collect();
    b.qp.post_recv(&recvs).unwrap();
    for i in 0..20u8 {
        a.mr.fill(usize::from(i) * 64, 64, i).unwrap();
    }
    let ss: Vec<[Sge; 1]> = (0..20).map(|i| [sge(&a.mr, 64 * i, 64)]).collect();
    let sends: Vec<_> = ss
        .iter()
        .enumerate()
        .map(|(i, s)| {
            SendWr::send(500 + i as u64)
                .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
                .sge(s)
        })
        .collect();
    // 20 WRs with max_tx_batch 8: the SQ rings the doorbell three times in one post.
    a.qp.post_send(&sends).unwrap();
    assert_eq!(fab.process(), 20);
    let sw: Vec<u64> = poll_all(&mut a.scq, 20).iter().map(|w| w.wr_id).collect();
    let mut sorted = sw.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        (500..520).collect::<Vec<_>>(),
        "each send completes exactly once"
    );
    assert_ne!(sw, sorted, "SRD completions arrive out of order");
    // Receive buffers are consumed in RQ order, so out-of-order arrival shows in the data.
    let rw = poll_all(&mut b.rcq, 20);
    let mut firsts = Vec::new();
    for w in &rw {
        let mut byte = [0u8; 1];
        b.mr.read(64 * w.wr_id as usize, &mut byte).unwrap();
        firsts.push(byte[0]);
    }
    let mut fs = firsts.clone();
    fs.sort();
    assert_eq!(fs, (0..20).collect::<Vec<u8>>());
    assert_ne!(firsts, fs, "messages landed out of order");
    fab.assert_no_violations();
}

#[test]
fn efa_bad_input_is_refused_before_the_device() {
    let fab = EfaFabric::new(1);
    let cfg = ModelConfig {
        device_caps: uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID,
        ..Default::default()
    };
    let mut a = host(
        &fab,
        cfg,
        QpCap {
            max_send_sge: 1,
            ..cap(8)
        },
        EfaQpFlags::empty(),
        QpType::Srd,
    );
    let b = host(&fab, cfg, cap(8), EfaQpFlags::empty(), QpType::Srd);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    // An AH of another PD (same device) is refused, alone (the single-WR path) and at the
    // head of a list (the list path), and nothing reaches the device.
    let pd2 = a.pd.context().alloc_pd().unwrap();
    let ah2 = pd2.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let one = [sge(&a.mr, 0, 8)];
    let foreign = SendWr::send(7)
        .signaled()
        .ud(&ah2, b.qp.qp_num(), QKEY)
        .sge(&one);
    let good = SendWr::send(8)
        .signaled()
        .ud(&ah, b.qp.qp_num(), QKEY)
        .sge(&one);
    for (wrs, index) in [
        (&[foreign][..], 0),
        (&[foreign, good][..], 0),
        (&[good, foreign][..], 1),
    ] {
        let e = a.qp.post_send(wrs).unwrap_err();
        assert_eq!(e.index, index, "{e}");
        assert!(e.error.is(Errno::INVAL), "{e}");
        assert!(e.to_string().contains("another PD"), "{e}");
    }
    // Only the good WR before the foreign one in the last list was posted.
    assert_eq!(fab.process(), 1);
    let c = poll_all(&mut a.scq, 1);
    assert_eq!(c[0].wr_id, 8);
    // The list path judges the core's conditions (destination, operation, PD) in the
    // provider's own pass over the list: a WR failing one stops the list there, with the
    // core's reason, the WRs before it posted and nothing after it.
    let no_dest = SendWr::send(9).signaled().sge(&one);
    let atomic = SendWr::new(
        10,
        WrOp::AtomicFetchAndAdd {
            remote_addr: 0x1000,
            rkey: 0x8001,
            add: 1,
        },
    )
    .signaled()
    .ud(&ah, b.qp.qp_num(), QKEY)
    .sge(&one);
    for (bad, errno, why) in [
        (no_dest, Errno::INVAL, "destination"),
        (
            atomic,
            Errno::OPNOTSUPP,
            "ATOMIC_FETCH_AND_ADD not supported",
        ),
        (foreign, Errno::INVAL, "another PD"),
    ] {
        let e = a.qp.post_send(&[good, good, bad, good]).unwrap_err();
        assert_eq!(e.index, 2, "{e}");
        assert!(e.error.is(errno), "{e}");
        assert!(e.to_string().contains(why), "{e}");
        assert_eq!(fab.process(), 2, "the two WRs before {why}");
        let c = poll_all(&mut a.scq, 2);
        assert!(c.iter().all(|c| c.wr_id == 8), "{c:?}");
    }
    let two = [sge(&a.mr, 0, 8), sge(&a.mr, 8, 8)];
    let e =
        a.qp.post_send(&[SendWr::send(1)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&two)])
            .unwrap_err();
    assert!(e.error.is(Errno::INVAL), "{e}");
    assert!(e.to_string().contains("work request 0"), "{e}");
    let one = [sge(&a.mr, 0, 8)];
    let e =
        a.qp.post_send(&[SendWr::new(
            2,
            WrOp::RdmaRead {
                remote_addr: 0x1000,
                rkey: 0x8001,
            },
        )
        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
        .sge(&one)])
            .unwrap_err();
    assert!(
        e.error.is(Errno::OPNOTSUPP),
        "RDMA read without the cap: {e}"
    );
    let big = [0u8; 33];
    let bufs: [&[u8]; 1] = [&big];
    let e =
        a.qp.post_send(&[SendWr::send(3)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .inline(bufs[0])])
            .unwrap_err();
    assert!(e.error.is(Errno::INVAL), "33 inline bytes: {e}");
    let e =
        a.pd.efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SEND_OPS,
                ..QpInitAttr::new(
                    QpType::Srd,
                    &a.scq,
                    &a.rcq,
                    QpCap {
                        max_inline_data: 64,
                        ..cap(8)
                    },
                )
            },
            &EfaQpInitAttr {
                flags: EfaQpFlags::empty(),
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .unwrap_err();
    assert!(
        e.is(Errno::INVAL),
        "max_inline_data over inline_buf_size: {e}"
    );
    let e =
        a.pd.efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SEND_OPS,
                ..QpInitAttr::new(QpType::Srd, &a.scq, &a.rcq, cap(8))
            },
            &EfaQpInitAttr {
                flags: EfaQpFlags::UNSOLICITED_WRITE_RECV,
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP), "unsolicited without the cap: {e}");
    assert_eq!(fab.process(), 0, "nothing refused reached the device");

    // Full SQ: 8 slots, the 9th WR of a list is refused, the 8 before it posted.
    let wrs: Vec<_> = (0..9)
        .map(|i| {
            SendWr::send(i)
                .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
                .sge(&one)
        })
        .collect();
    let e = a.qp.post_send(&wrs).unwrap_err();
    assert!(e.error.is(Errno::NOMEM), "{e}");
    assert!(e.to_string().contains("work request 8"), "{e}");
    assert_eq!(fab.process(), 8);

    // Unsignaled send on a QP without sq_sig_all; and a QP not in RTS.
    let mut c =
        b.pd.efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: false,
                send_ops_flags: SEND_OPS,
                ..QpInitAttr::new(QpType::Srd, &b.scq, &b.rcq, cap(8))
            },
            &EfaQpInitAttr {
                flags: EfaQpFlags::empty(),
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .unwrap();
    let bone = [sge(&b.mr, 0, 8)];
    // An AH is made in the PD of the QP that sends through it.
    let ah_b = b.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let e = c
        .post_send(&[SendWr::send(1)
            .ud(&ah_b, dest.remote_qpn, dest.remote_qkey)
            .sge(&bone)])
        .unwrap_err();
    assert!(
        e.error.is(Errno::INVAL) && e.to_string().contains("RTS"),
        "{e}"
    );
    // A plain WR (signaled, one SGE: what the single-WR fast path takes) is refused too,
    // alone and in a list.
    let plain = SendWr::send(1)
        .ud(&ah_b, dest.remote_qpn, dest.remote_qkey)
        .sge(&bone)
        .signaled();
    for wrs in [&[plain][..], &[plain, plain][..]] {
        let e = c.post_send(wrs).unwrap_err();
        assert!(
            e.index == 0 && e.error.is(Errno::INVAL) && e.to_string().contains("RTS"),
            "{e}"
        );
    }
    efa::to_rts(&mut c, QKEY).unwrap();
    let e = c
        .post_send(&[SendWr::send(1)
            .ud(&ah_b, dest.remote_qpn, dest.remote_qkey)
            .sge(&bone)])
        .unwrap_err();
    assert!(
        e.error.is(Errno::INVAL) && e.error.reason().contains("signaled"),
        "{e}"
    );
    // Out of RTS again (ERR): the plain WR the fast path would take is refused.
    c.modify(
        &QpAttr {
            qp_state: QpState::Err,
            ..Default::default()
        },
        QpAttrMask::STATE,
    )
    .unwrap();
    let e = c.post_send(&[plain]).unwrap_err();
    assert!(
        e.index == 0 && e.error.is(Errno::INVAL) && e.to_string().contains("RTS"),
        "{e}"
    );
    assert_eq!(fab.process(), 0);
    fab.assert_no_violations();
}

#[test]
fn efa_wr_api_rdma_read_write_and_unsolicited_write_imm() {
    let fab = EfaFabric::new(9);
    let (mut a, mut b) = pair(
        &fab,
        ModelConfig::default(),
        cap(16),
        EfaQpFlags::UNSOLICITED_WRITE_RECV,
        16,
    );
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    a.mr.write(0, b"written-by-rdma!").unwrap();
    b.mr.write(8192, b"read-back-by-rdma").unwrap();
    let w = [sge(&a.mr, 0, 16)];
    let r = [sge(&a.mr, 1024, 17)];
    let wi = [sge(&a.mr, 0, 8)];
    let mut s = a.qp.wr_start().unwrap();
    s.rdma_write(1, SendFlags::SIGNALED, b.mr.rkey(), b.mr.addr() + 4096)
        .set_sge_list(&w)
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    s.rdma_read(2, SendFlags::SIGNALED, b.mr.rkey(), b.mr.addr() + 8192)
        .set_sge_list(&r)
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    s.rdma_write_imm(
        3,
        SendFlags::SIGNALED,
        b.mr.rkey(),
        b.mr.addr() + 12288,
        0xfeed,
    )
    .set_sge_list(&wi)
    .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    s.send(4, SendFlags::SIGNALED)
        .set_inline_data(b"inline!")
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    assert_eq!(s.len(), 4);
    assert_eq!(fab.process(), 0, "nothing before wr_complete");
    let rr = [sge(&b.mr, 0, 64)];
    b.qp.post_recv(&[RecvWr {
        wr_id: 90,
        sg_list: &rr,
    }])
    .unwrap();
    s.complete().unwrap();
    fab.set_reorder(false);
    assert_eq!(fab.process(), 4);
    let sw = poll_all(&mut a.scq, 4);
    for w in &sw {
        // In posting order (reorder off) the write-with-imm took the one receive, so the
        // inline send finds none: SRD reports receiver-not-ready.
        let want = if w.wr_id == 4 {
            WcStatus::RNR_RETRY_EXC_ERR
        } else {
            WcStatus::SUCCESS
        };
        assert_eq!(w.status, want, "{w:?}");
    }
    let ops: Vec<(u64, WcOpcode)> = sw.iter().map(|w| (w.wr_id, w.opcode)).collect();
    assert!(ops.contains(&(1, WcOpcode::RDMA_WRITE)) && ops.contains(&(2, WcOpcode::RDMA_READ)));
    let mut got = [0u8; 16];
    b.mr.read(4096, &mut got).unwrap();
    assert_eq!(&got, b"written-by-rdma!");
    let mut got = [0u8; 17];
    a.mr.read(1024, &mut got).unwrap();
    assert_eq!(&got, b"read-back-by-rdma");
    let mut rw = [EfaWc::default(); 4];
    let n = b.rcq.poll_efa(&mut rw).unwrap();
    assert_eq!(n, 1);
    let wimm = rw[..n]
        .iter()
        .find(|w| w.wc.opcode == WcOpcode::RECV_RDMA_WITH_IMM)
        .unwrap();
    assert_eq!(wimm.wc.imm(), Some(0xfeed));
    assert_eq!(wimm.wc.byte_len, 8);
    assert!(!wimm.is_unsolicited());
    assert_eq!(wimm.wc.wr_id, 90);

    // Now no receive is posted: the next write-with-imm is unsolicited.
    let mut s = a.qp.wr_start().unwrap();
    s.rdma_write_imm(
        5,
        SendFlags::SIGNALED,
        b.mr.rkey(),
        b.mr.addr() + 12288,
        0xbeef,
    )
    .set_sge_list(&wi)
    .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    s.complete().unwrap();
    assert_eq!(fab.process(), 1);
    poll_all(&mut a.scq, 1);
    let n = b.rcq.poll_efa(&mut rw).unwrap();
    assert_eq!(n, 1);
    assert!(rw[0].is_unsolicited());
    assert_eq!(rw[0].wc.wr_id, 0);
    assert_eq!(rw[0].wc.imm(), Some(0xbeef));
    fab.assert_no_violations();
}

#[test]
fn efa_sgid_is_reported_for_senders_without_an_ah() {
    let fab = EfaFabric::new(2);
    let (mut a, mut b) = plain_pair(&fab, 8, 8);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    let r = [sge(&b.mr, 0, 64)];
    b.qp.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: &r,
    }])
    .unwrap();
    let s = [sge(&a.mr, 0, 8)];
    a.qp.post_send(&[SendWr::send(1)
        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
        .sge(&s)])
        .unwrap();
    fab.process();
    poll_all(&mut a.scq, 1);
    let mut w = [EfaWc::default(); 1];
    assert_eq!(b.rcq.poll_efa(&mut w).unwrap(), 1);
    assert_eq!(w[0].wc.slid, 0xffff, "b has no AH for a");
    assert_eq!(w[0].read_sgid().unwrap(), a.gid);
    fab.assert_no_violations();
}

#[test]
fn efa_cq_in_external_memory() {
    let fab = EfaFabric::new(4);
    let dev = fab.add_device(ModelConfig::default());
    let ctx = dev.open().unwrap();
    let buf = uverbs_efa_model::memfd(1 << 16);
    use std::os::fd::AsFd;
    let small = EfaCqInitAttr {
        flags: EfaCqInitFlags::EXT_MEM_DMABUF,
        ext_mem: Some(EfaCqExtMem {
            fd: buf.as_fd(),
            offset: 0,
            length: 64,
        }),
        ..Default::default()
    };
    let attr = CqInitAttr {
        cqe: 16,
        ..Default::default()
    };
    let e = ctx.efadv_create_cq(&attr, &small).unwrap_err();
    assert!(e.is(Errno::INVAL), "{e}");
    let ext = EfaCqInitAttr {
        flags: EfaCqInitFlags::EXT_MEM_DMABUF,
        ext_mem: Some(EfaCqExtMem {
            fd: buf.as_fd(),
            offset: 8192,
            length: 16 * 2 * 32,
        }),
        ..Default::default()
    };
    let mut ecq = ctx.efadv_create_cq(&attr, &ext).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SEND_OPS,
                ..QpInitAttr::new(QpType::Srd, &ecq, &ecq, cap(8))
            },
            &EfaQpInitAttr {
                flags: EfaQpFlags::empty(),
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .unwrap();
    efa::to_rts(&mut qp, QKEY).unwrap();
    let mut mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let ah = pd.create_ah(&efa::ah_attr(dev.gid())).unwrap();
    let r = [sge(&mr, 2048, 64)];
    qp.post_recv(&[RecvWr {
        wr_id: 8,
        sg_list: &r,
    }])
    .unwrap();
    mr.write(0, b"loop").unwrap();
    let s = [sge(&mr, 0, 4)];
    let qpn = qp.qp_num();
    qp.post_send(&[SendWr::send(7).sge(&s).ud(&ah, qpn, QKEY)])
        .unwrap();
    assert_eq!(fab.process(), 1);
    let mut ids: Vec<u64> = poll_all(&mut ecq, 2).iter().map(|w| w.wr_id).collect();
    ids.sort();
    assert_eq!(ids, [7, 8]);
    // The CQEs really are in the memfd, at the offset given.
    let mut page = vec![0u8; 1024];
    rustix::io::pread(&buf, &mut page, 8192).unwrap();
    assert!(
        page.iter().any(|&b| b != 0),
        "CQEs written into the external memory"
    );
    fab.assert_no_violations();
}

#[test]
fn efa_completions_for_destroyed_qps_are_skipped() {
    let fab = EfaFabric::new(6);
    let mut a = host(
        &fab,
        ModelConfig::default(),
        cap(8),
        EfaQpFlags::empty(),
        QpType::Srd,
    );
    let qp2 =
        a.pd.efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SEND_OPS,
                ..QpInitAttr::new(QpType::Srd, &a.scq, &a.rcq, cap(8))
            },
            &EfaQpInitAttr {
                flags: EfaQpFlags::empty(),
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .unwrap();
    let qpn = qp2.qp_num();
    qp2.destroy().unwrap();
    let mut cqe = uverbs_efa::defs::EfaIoRxCdescEx::default();
    cqe.base
        .common
        .set_q_type(uverbs_efa::defs::EFA_IO_SEND_QUEUE);
    cqe.base.common.qp_num.set(qpn as u16);
    fab.inject_cqe(&a.dev, a.scq.handle(), (qpn % 2) as u16, cqe);
    let mut w = [Wc::default(); 2];
    assert_eq!(a.scq.poll(&mut w).unwrap(), 0);
    assert_eq!(a.scq.efa_stale_completions(), 1);
    // The live QP still works after it.
    assert_eq!(a.qp.state(), QpState::Rts);
    fab.assert_no_violations();
}

#[test]
fn efa_golden_send_imm_wqe_bytes_from_post_send() {
    let fab = EfaFabric::new(8);
    let (mut a, b) = plain_pair(&fab, 8, 8);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    let s = [sge(&a.mr, 0x40, 16)];
    a.qp.post_send(&[SendWr::new(1, WrOp::SendWithImm { imm_data: 0xabcd })
        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
        .sge(&s)])
        .unwrap();
    let w = fab.llq_wqe(&a.dev, a.qp.qp_num(), 0);
    let addr = a.mr.addr() + 0x40;
    let mut want = [0u8; 64];
    want[2] = 0x90; // ctrl1: meta_desc | has_imm | op SEND
    want[3] = 0x1c; // ctrl2: first | last | comp_req, phase 0 on the first pass
    want[4..6].copy_from_slice(&(b.qp.qp_num() as u16).to_le_bytes());
    want[6..8].copy_from_slice(&1u16.to_le_bytes()); // one buffer
    want[8..12].copy_from_slice(&0xabcdu32.to_le_bytes());
    want[12..14].copy_from_slice(&ah.efadv_query_ah().unwrap().to_le_bytes());
    want[16..20].copy_from_slice(&QKEY.to_le_bytes());
    want[32..36].copy_from_slice(&16u32.to_le_bytes());
    want[36..40].copy_from_slice(&a.mr.lkey().to_le_bytes());
    want[40..44].copy_from_slice(&(addr as u32).to_le_bytes());
    want[44..48].copy_from_slice(&((addr >> 32) as u32).to_le_bytes());
    // req_id (bytes 0-1) is a pool slot plus the QP's generation: check it separately.
    let req_id = u16::from_le_bytes([w[0], w[1]]);
    assert_eq!(req_id & 0x7, 0, "first slot of the 8-entry pool");
    want[..2].copy_from_slice(&w[..2]);
    assert_eq!(
        w, want,
        "LLQ bytes differ from efa_io_tx_wqe for SEND_WITH_IMM"
    );
    assert_eq!(fab.process(), 1);
    fab.assert_no_violations();
}

/// Post on one thread, poll on another, the device model on a third: the wr_id hand-off
/// between a QP and its CQs takes no lock and loses nothing. 8-deep queues and 8-entry
/// sub-CQs, 4000 send/receive pairs: every ring wraps 500 times, every request id is reused
/// 500 times while the other side may be completing its neighbours.
#[test]
fn efa_post_and_poll_on_different_threads() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const N: u64 = 4000;
    let fab = EfaFabric::new(11);
    let (a, b) = plain_pair(&fab, 8, 8);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest_qpn = b.qp.qp_num();
    let rsge = [sge(&b.mr, 0, 64)];
    let Host {
        qp: mut aqp,
        scq: mut ascq,
        ..
    } = a;
    let Host {
        qp: mut bqp,
        rcq: mut brcq,
        ..
    } = b;
    let done = Arc::new(AtomicBool::new(false));
    // The poster sends through a clone; `ah` outlives every send (EFA QPs keep no AH alive).
    let ah_poster = ah.clone();
    let poster = std::thread::spawn(move || {
        let ah = ah_poster;
        let mut full = 0u64;
        for i in 0..N {
            // A receive before its send, so no send ever finds the RQ empty (no RNR).
            let r = [RecvWr {
                wr_id: 1_000_000 + i,
                sg_list: &rsge,
            }];
            while let Err(e) = bqp.post_recv(&r) {
                assert!(e.error.is(Errno::NOMEM), "{e}");
                full += 1;
                std::thread::yield_now();
            }
            let data = i.to_le_bytes();
            let bufs: [&[u8]; 1] = [&data];
            let s = [SendWr::send(i).ud(&ah, dest_qpn, QKEY).inline(bufs[0])];
            while let Err(e) = aqp.post_send(&s) {
                assert!(e.error.is(Errno::NOMEM), "{e}");
                full += 1;
                std::thread::yield_now();
            }
        }
        (aqp, bqp, full)
    });
    let poller = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut sends = vec![false; N as usize];
            let mut recvs = vec![false; N as usize];
            let (mut ns, mut nr) = (0u64, 0u64);
            let mut wc = [Wc::default(); 4];
            while ns < N || nr < N {
                let k = ascq.poll(&mut wc).unwrap();
                for w in &wc[..k] {
                    assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
                    assert!(!std::mem::replace(&mut sends[w.wr_id as usize], true));
                    ns += 1;
                }
                let k = brcq.poll(&mut wc).unwrap();
                for w in &wc[..k] {
                    assert_eq!((w.status, w.byte_len), (WcStatus::SUCCESS, 8), "{w:?}");
                    let i = (w.wr_id - 1_000_000) as usize;
                    assert!(!std::mem::replace(&mut recvs[i], true));
                    nr += 1;
                }
                if k == 0 {
                    std::thread::yield_now();
                }
            }
            done.store(true, Ordering::Release);
            (ascq, brcq)
        })
    };
    let mut executed = 0;
    while !done.load(Ordering::Acquire) {
        executed += fab.process();
        std::thread::yield_now();
    }
    let (_aqp, _bqp, full) = poster.join().unwrap();
    let _cqs = poller.join().unwrap();
    assert_eq!(executed, N as usize);
    fab.assert_no_violations();
    // Not asserted (timing-dependent), but shows the queues really ran full at times.
    eprintln!("post found a full queue {full} times");
}

/// `EFADV_QP_FLAGS_INLINE_WRITE` and inline data over 32 bytes switch the SQ to 128-byte
/// WQEs; the model reads 128-byte slots and moves the inline bytes; `send_ops_flags` gate the
/// `wr_*` API.
#[test]
fn efa_128_byte_wqes_inline_write_and_send_ops_flags() {
    let fab = EfaFabric::new(21);
    let cfg = ModelConfig {
        inline_buf_size_ex: 80,
        ..Default::default()
    };
    let big = QpCap {
        max_inline_data: 80,
        ..cap(8)
    };
    let a = host_cqe(&fab, cfg, big, EfaQpFlags::INLINE_WRITE, QpType::Srd, 16);
    let mut b = host_cqe(&fab, cfg, cap(8), EfaQpFlags::empty(), QpType::Srd, 16);
    let Host {
        qp: mut aqp,
        scq: mut ascq,
        pd: apd,
        dev: adev,
        ..
    } = a;
    assert_eq!(aqp.cap().max_inline_data, 80);
    let ah = apd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);

    // 80 bytes written inline into remote memory, and a 60-byte inline send.
    let payload: Vec<u8> = (0..80u8).collect();
    let text = [b'x'; 60];
    let rr = [sge(&b.mr, 0, 128)];
    b.qp.post_recv(&[RecvWr {
        wr_id: 7,
        sg_list: &rr,
    }])
    .unwrap();
    let mut s = aqp.wr_start().unwrap();
    s.rdma_write(1, SendFlags::SIGNALED, b.mr.rkey(), b.mr.addr() + 1000)
        .set_inline_data(&payload)
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    s.send(2, SendFlags::SIGNALED)
        .set_inline_data(&text)
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    s.complete().unwrap();
    // Golden bytes of slot 0, derived from efa_io_defs.h (128-byte efa_io_tx_wqe_128):
    // ctrl1 = op_type RDMA_WRITE (2) | inline_msg BIT(5) | meta_desc BIT(7) = 0xa2;
    // ctrl2 = first|last|comp_req = 0x1c; length = 80 inline bytes; rdma_req_128 at 32:
    // remote_mem { length 80, rkey, buf_addr lo/hi }, inline_data[80] at 48.
    let slot = fab.llq_slot(&adev, aqp.qp_num(), 0);
    assert_eq!(slot.len(), 128);
    assert_eq!((slot[2], slot[3]), (0xa2, 0x1c));
    assert_eq!(&slot[6..8], &80u16.to_le_bytes());
    assert_eq!(&slot[32..36], &80u32.to_le_bytes());
    assert_eq!(&slot[36..40], &b.mr.rkey().to_le_bytes());
    let addr = b.mr.addr() + 1000;
    assert_eq!(&slot[40..44], &(addr as u32).to_le_bytes());
    assert_eq!(&slot[44..48], &((addr >> 32) as u32).to_le_bytes());
    assert_eq!(&slot[48..128], &payload[..]);
    fab.set_reorder(false);
    assert_eq!(fab.process(), 2);
    let sw = poll_all(&mut ascq, 2);
    assert!(sw.iter().all(|w| w.status == WcStatus::SUCCESS), "{sw:?}");
    let mut got = [0u8; 80];
    b.mr.read(1000, &mut got).unwrap();
    assert_eq!(&got[..], &payload[..]);
    let rw = poll_all(&mut b.rcq, 1);
    assert_eq!((rw[0].wr_id, rw[0].byte_len), (7, 60));
    let mut got = [0u8; 60];
    b.mr.read(0, &mut got).unwrap();
    assert_eq!(got, text);

    // Inline RDMA write without INLINE_WRITE (b's SQ has 64-byte WQEs): refused.
    let mut s = b.qp.wr_start().unwrap();
    s.rdma_write(3, SendFlags::SIGNALED, 1, 0)
        .set_inline_data(b"no")
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    let e = s.complete().unwrap_err();
    assert!(e.is(Errno::INVAL), "{e}");
    // A wr_* op outside send_ops_flags is refused before anything reaches the device.
    let ops = ops_for(QpType::Srd, cfg.device_caps);
    let mut c =
        b.pd.efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SEND_OPS,
                ..QpInitAttr::new(QpType::Srd, &b.scq, &b.rcq, cap(8))
            },
            &EfaQpInitAttr {
                flags: EfaQpFlags::empty(),
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .unwrap();
    efa::to_rts(&mut c, QKEY).unwrap();
    let w = [sge(&b.mr, 0, 8)];
    let ah_b = b.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let mut s = c.wr_start().unwrap();
    s.send(4, SendFlags::SIGNALED).set_sge_list(&w).set_ud_addr(
        &ah_b,
        dest.remote_qpn,
        dest.remote_qkey,
    );
    s.rdma_write(5, SendFlags::SIGNALED, 1, 0)
        .set_sge_list(&w)
        .set_ud_addr(&ah_b, dest.remote_qpn, dest.remote_qkey);
    let e = s.complete().unwrap_err();
    assert!(
        e.is(Errno::OPNOTSUPP) && e.reason().contains("work request 1"),
        "{e}"
    );
    // send_ops_flags a UD QP cannot have, and INLINE_WRITE on UD: EOPNOTSUPP at create.
    for (flags, ops) in [
        (EfaQpFlags::empty(), ops),
        (EfaQpFlags::INLINE_WRITE, SEND_OPS),
    ] {
        let e =
            b.pd.efadv_create_qp_ex(
                &QpInitAttr {
                    sq_sig_all: true,
                    send_ops_flags: ops,
                    ..QpInitAttr::new(QpType::Ud, &b.scq, &b.rcq, cap(8))
                },
                &EfaQpInitAttr {
                    flags,
                    sl: 0,
                    wr_flags: Default::default(),
                },
            )
            .unwrap_err();
        assert!(e.is(Errno::OPNOTSUPP), "{e}");
    }
    assert_eq!(fab.process(), 0);
    fab.assert_no_violations();
}

/// `efadv_query_mr` through the EFA driver method: the model answers with fixed interconnect
/// ids, and marks the RDMA ones valid only when the device has the RDMA caps.
#[test]
fn efa_query_mr_reports_interconnect_ids() {
    use uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID;
    use uverbs_efa_model::{MODEL_RDMA_READ_IC_ID, MODEL_RDMA_RECV_IC_ID, MODEL_RECV_IC_ID};
    let fab = EfaFabric::new(5);
    let a = host(
        &fab,
        ModelConfig::default(),
        cap(8),
        EfaQpFlags::empty(),
        QpType::Srd,
    );
    let m = a.mr.efadv_query_mr().unwrap();
    assert_eq!(m.ic_id_validity, 0b111);
    assert_eq!(m.recv_ic_id, Some(MODEL_RECV_IC_ID));
    assert_eq!(m.rdma_read_ic_id, Some(MODEL_RDMA_READ_IC_ID));
    assert_eq!(m.rdma_recv_ic_id, Some(MODEL_RDMA_RECV_IC_ID));
    let cfg = ModelConfig {
        device_caps: EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID,
        ..Default::default()
    };
    let b = host(&fab, cfg, cap(8), EfaQpFlags::empty(), QpType::Srd);
    let m = b.mr.efadv_query_mr().unwrap();
    assert_eq!(
        (
            m.ic_id_validity,
            m.recv_ic_id,
            m.rdma_read_ic_id,
            m.rdma_recv_ic_id
        ),
        (0b001, Some(MODEL_RECV_IC_ID), None, None)
    );
}

#[allow(dead_code)] // the example's `main`, `server` and `client` need EFA hardware
#[path = "../examples/efa_srd.rs"]
mod efa_srd;

/// The example's own code, both sides on the device model: every message arrives once, intact,
/// and (the model reorders SRD on purpose) not in posting order.
#[test]
fn efa_srd_example_runs_against_the_model() {
    let got = efa_srd::model().unwrap();
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..efa_srd::MESSAGES as u64).collect::<Vec<_>>());
    assert_ne!(got, sorted, "SRD delivery was reordered by the model");
}

#[allow(dead_code)] // the example's `main` is not called here
#[path = "../examples/ud_any.rs"]
mod ud_any;

/// The one-program example (also run on rxe in the VM by tests/examples.rs) on two devices of
/// the EFA model: `Context::create_cq`, `Pd::create_qp(UD)` (finding 5: it was a bare
/// EPROTONOSUPPORT on EFA), `Pd::create_ah(&AhAttr)`, post and poll, unchanged.
#[test]
fn ud_any_example_runs_on_the_efa_model() {
    if let Err(e) = ud_any::run_on_model() {
        panic!("example ud_any on the EFA model failed: {e}");
    }
}

/// Finding 5 and the refusals of what EFA cannot do: `create_qp` makes a UD QP on EFA (its
/// type, caps and state as asked); RC, UC, an SRQ and SRD through `create_qp` are refused with
/// the operation, the device and the reason.
#[test]
fn efa_create_qp_makes_ud_and_refuses_what_efa_cannot_do() {
    let fab = EfaFabric::new(5);
    let dev = fab.add_device(ModelConfig::default());
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, None, 0).expect("create_cq on EFA");
    let c = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Ud, &cq, &cq, c))
        .expect("create_qp(UD) on EFA");
    assert_eq!(qp.qp_type(), QpType::Ud);
    assert_eq!(qp.state(), QpState::Reset);
    assert!(
        qp.cap().max_send_wr >= 8 && qp.cap().max_recv_wr >= 8,
        "{:?}",
        qp.cap()
    );
    efa::to_rts(&mut qp, QKEY).unwrap();
    assert_eq!(qp.state(), QpState::Rts);
    let q = qp.query(QpAttrMask::STATE | QpAttrMask::QKEY).unwrap();
    assert_eq!((q.attr.qp_state, q.attr.qkey), (QpState::Rts, QKEY));
    let name = ctx.device().name().to_string();
    for t in [QpType::Rc, QpType::Uc, QpType::Srd] {
        let e = pd
            .create_qp(&QpInitAttr::new(t, &cq, &cq, c))
            .expect_err("refused on EFA");
        assert_eq!(e.op(), "create_qp");
        assert!(e.is(Errno::OPNOTSUPP), "{t:?}: {e}");
        assert!(e.object().contains(&name), "{e}");
        assert!(!e.reason().is_empty(), "{e}");
    }
    let srq_err = pd
        .create_srq(&uverbs::SrqAttr {
            max_wr: 4,
            max_sge: 1,
            srq_limit: 0,
        })
        .map(|_| ());
    // EFA has no SRQs at all; if one could be made, a QP on it is refused just the same.
    if let Ok(()) = srq_err {
        panic!("create_srq on EFA succeeded");
    }
    let e = pd
        .efadv_create_qp_ex(
            &QpInitAttr::new(QpType::Rc, &cq, &cq, c),
            &EfaQpInitAttr::default(),
        )
        .expect_err("RC through efadv");
    assert!(
        e.is(Errno::OPNOTSUPP) && e.reason().contains("UD and SRD"),
        "{e}"
    );
    fab.assert_no_violations();
}

/// A CQ's polls look only at the sub-CQs its QPs use (libefa's `ref_cnt`): a CQE in a
/// sub-CQ no QP of the CQ completes into is left there, and consumed (as stale: no such QP)
/// once a QP that uses that sub-CQ exists.
#[test]
fn efa_poll_looks_only_at_sub_cqs_a_qp_uses() {
    let fab = EfaFabric::new(31);
    let mut a = host(
        &fab,
        ModelConfig::default(),
        cap(8),
        EfaQpFlags::empty(),
        QpType::Srd,
    );
    assert_eq!(a.scq.efa_sub_cqs(), 2);
    // The model puts a QP's CQEs in sub-CQ qpn % 2.
    let other = (a.qp.qp_num() + 1) % 2;
    let mut cqe = uverbs_efa::defs::EfaIoRxCdescEx::default();
    cqe.base
        .common
        .set_q_type(uverbs_efa::defs::EFA_IO_SEND_QUEUE);
    cqe.base.common.qp_num.set(0x7777);
    fab.inject_cqe(&a.dev, a.scq.handle(), other as u16, cqe);
    let mut w = [Wc::default(); 2];
    assert_eq!(a.scq.poll(&mut w).unwrap(), 0);
    assert_eq!(a.scq.poll(&mut w[..1]).unwrap(), 0);
    assert!(a.scq.start_poll().unwrap().is_none());
    assert_eq!(
        a.scq.efa_stale_completions(),
        0,
        "sub-CQ {other} not looked at"
    );
    // A QP completing into that sub-CQ (its receives elsewhere): now it is.
    let mut qps = Vec::new();
    loop {
        let q =
            a.pd.efadv_create_qp_ex(
                &QpInitAttr {
                    sq_sig_all: true,
                    send_ops_flags: SEND_OPS,
                    ..QpInitAttr::new(QpType::Srd, &a.scq, &a.rcq, cap(8))
                },
                &EfaQpInitAttr {
                    flags: EfaQpFlags::empty(),
                    sl: 0,
                    wr_flags: Default::default(),
                },
            )
            .unwrap();
        let hit = q.qp_num() % 2 == other;
        qps.push(q);
        if hit {
            break;
        }
        assert!(qps.len() < 4, "the model gives QP numbers in sequence");
    }
    assert_eq!(a.scq.poll(&mut w).unwrap(), 0);
    assert_eq!(a.scq.efa_stale_completions(), 1);
    fab.assert_no_violations();
}
