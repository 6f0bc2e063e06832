//! EFA 64-bit request ids and processing hints (issue 17 items 1 and 4) through the public API
//! against the strict device model.
//!
//! 64-bit ids: on a device with `EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID` every QP and CQ is created
//! with the 64-bit flags (as libefa: `efa_create_cq` and `efa_setup_qp` set them from the cap,
//! the caller has no say), the whole wr_id travels in the WQE and comes back in the CQE, and the
//! poll still refuses a completion it cannot account for. Golden bytes of the create commands,
//! the WQE and the CQE are derived by hand from rdma-core's `kernel-headers/rdma/efa-abi.h` and
//! `providers/efa/efa_io_defs.h` (master, 2026-08), the derivation beside each.
//!
//! Hints: `efadv_wr_set_processing_hints` (rdma-core v64) on a `wr_*` batch of a QP created
//! with `EFADV_WR_EX_WITH_PROCESSING_HINTS` lands in the WQE's `ctrl3`; refused on a QP
//! without that flag, for undefined bits, and on rxe.

#[path = "common/efa.rs"]
mod efa;

use efa::drain;
use uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID;
use uverbs::{
    AccessFlags, CqInitAttr, EfaProcessingHints, EfaWqCaps, EfaWrExFlags, Errno, QpCap, QpInitAttr,
    QpType, RecvWr, SendFlags, SendOpsFlags, SendWr, Sge, UdDest, Wc, WcStatus,
};
use uverbs_efa::defs::{EfaIoRxCdescEx, EFA_IO_SEND_QUEUE};
use uverbs_efa_model::{EfaFabric, ModelConfig};

const QKEY: u32 = 0x1234_5678;

fn cfg64() -> ModelConfig {
    let d = ModelConfig::default();
    ModelConfig {
        device_caps: d.device_caps | EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID,
        ..d
    }
}

type Host = efa::SrdHost;

fn host(fab: &EfaFabric, cfg: ModelConfig, depth: u32) -> Host {
    host_wr(fab, cfg, depth, EfaWrExFlags::empty())
}

fn host_wr(fab: &EfaFabric, cfg: ModelConfig, depth: u32, wr_flags: EfaWrExFlags) -> Host {
    let spec = efa::SrdHostSpec {
        cqe: 8,
        cap: QpCap {
            max_send_wr: depth,
            max_recv_wr: 64,
            ..efa::SrdHostSpec::default().cap
        },
        send_ops_flags: SendOpsFlags::SEND | SendOpsFlags::SEND_WITH_IMM,
        wr_flags,
        mr_access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
    };
    efa::srd_host(fab, cfg, &spec, QKEY)
}

fn recvs(b: &mut Host, n: u64) {
    let s = [b.mr.sge(0x8000, 64).unwrap()];
    for i in 0..n {
        b.qp.post_recv(&[RecvWr {
            wr_id: 7_000 + i,
            sg_list: &s,
        }])
        .unwrap();
    }
}

/// A wr_id that needs all 64 bits: distinct in every 16-bit word and never a pool index.
fn id(i: u64) -> u64 {
    0x8000_0000_0000_0000 | i.wrapping_mul(0x0001_0003_0007_000b)
}

/// 8-deep SQ and 8-entry sub-CQs: 120 sends (one at a time, in lists of three and through
/// `wr_start` batches of two) wrap the SQ fifteen times; every completion carries the exact
/// 64-bit wr_id posted, and the queue introspection says the SQ has 64-bit ids.
#[test]
fn efa_64bit_ids_wrap_the_sq_with_every_post_path() {
    let fab = EfaFabric::new(21);
    let mut a = host(&fab, cfg64(), 8);
    let mut b = host(&fab, cfg64(), 8);
    let (sq, rq) = a.qp.efadv_query_qp_wqs().unwrap();
    assert_eq!(sq.caps, EfaWqCaps::WITH_64_BIT_REQ_ID);
    assert_eq!(rq.caps, EfaWqCaps::empty(), "receive ids stay 16-bit");
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    let s: [Sge; 1] = [a.mr.sge(0, 16).unwrap()];
    let mut next = 0u64;
    let mut sent = Vec::new();
    for round in 0..40u64 {
        recvs(&mut b, 3);
        match round % 3 {
            0 => {
                for _ in 0..3 {
                    a.qp.post_send(&[SendWr::send(id(next))
                        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
                        .sge(&s)])
                        .unwrap();
                    sent.push(id(next));
                    next += 1;
                }
            }
            1 => {
                let wrs: Vec<SendWr<'_>> = (0..3)
                    .map(|k| {
                        SendWr::send(id(next + k))
                            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
                            .sge(&s)
                    })
                    .collect();
                a.qp.post_send(&wrs).unwrap();
                sent.extend((0..3).map(|k| id(next + k)));
                next += 3;
            }
            _ => {
                let mut batch = a.qp.wr_start().unwrap();
                for _ in 0..3 {
                    batch
                        .send(id(next), SendFlags::SIGNALED)
                        .set_ud_addr(&ah, dest.remote_qpn, QKEY)
                        .set_sge(s[0].lkey, s[0].addr, s[0].length);
                    sent.push(id(next));
                    next += 1;
                }
                batch.complete().unwrap();
            }
        }
        assert_eq!(fab.process(), 3, "round {round}");
        let got = drain(&mut a.scq);
        assert_eq!(got.len(), 3, "round {round}");
        let mut want = std::mem::take(&mut sent);
        let mut ids: Vec<u64> = got.iter().map(|w| w.wr_id).collect();
        ids.sort_unstable();
        want.sort_unstable();
        assert_eq!(ids, want, "round {round}");
        assert!(got.iter().all(|w| w.status == WcStatus::SUCCESS));
        assert_eq!(drain(&mut b.rcq).len(), 3);
    }
    let (_, consumed) = fab.sq_state(&a.dev, a.qp.qp_num());
    assert_eq!(consumed, 120);
    fab.assert_no_violations();
}

/// The SQ holds at most its depth: with 64-bit ids there is no pool, and the outstanding count
/// still refuses the ninth send on an 8-deep SQ until a completion is polled.
#[test]
fn efa_64bit_ids_full_sq_is_refused_until_polled() {
    let fab = EfaFabric::new(22);
    let mut a = host(&fab, cfg64(), 8);
    let mut b = host(&fab, cfg64(), 8);
    recvs(&mut b, 9);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let s: [Sge; 1] = [a.mr.sge(0, 16).unwrap()];
    let wr = |i| SendWr::send(id(i)).ud(&ah, b.qp.qp_num(), QKEY).sge(&s);
    for i in 0..8 {
        a.qp.post_send(&[wr(i)]).unwrap();
    }
    let e = a.qp.post_send(&[wr(8)]).unwrap_err();
    assert!(e.error.is(Errno::NOMEM), "{e}");
    assert_eq!(fab.process(), 8);
    assert_eq!(drain(&mut a.scq).len(), 8);
    a.qp.post_send(&[wr(8)]).unwrap();
    assert_eq!(fab.process(), 1);
    assert_eq!(drain(&mut a.scq)[0].wr_id, id(8));
    fab.assert_no_violations();
}

/// A send CQE for the 64-bit QP with nothing outstanding is refused (the poll does not make up
/// a wr_id from the device's bytes); one for a QP number nobody has is skipped and counted, as
/// on the pool path. The QP works afterwards.
#[test]
fn efa_64bit_ids_poll_distrusts_the_device() {
    let fab = EfaFabric::new(23);
    let mut a = host(&fab, cfg64(), 8);
    let mut b = host(&fab, cfg64(), 8);
    let qpn = a.qp.qp_num();
    let forged = |qpn: u32| {
        let mut c = EfaIoRxCdescEx::default();
        c.base.common.set_q_type(EFA_IO_SEND_QUEUE);
        c.base.common.qp_num.set(qpn as u16);
        c.base.common.req_id.set(0xbeef);
        c
    };
    fab.inject_cqe(&a.dev, a.scq.handle(), (qpn % 2) as u16, forged(qpn));
    let mut w = [Wc::default(); 2];
    let e = a.scq.poll(&mut w).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("not outstanding") || msg.contains("NotOutstanding"),
        "{msg}"
    );
    // No such QP: skipped and counted.
    let nobody = qpn ^ 0x40;
    fab.inject_cqe(&a.dev, a.scq.handle(), (nobody % 2) as u16, forged(nobody));
    assert_eq!(a.scq.poll(&mut w).unwrap(), 0);
    assert_eq!(a.scq.efa_stale_completions(), 1);
    // Still usable: one real send completes with its id.
    recvs(&mut b, 1);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let s: [Sge; 1] = [a.mr.sge(0, 16).unwrap()];
    a.qp.post_send(&[SendWr::send(u64::MAX).ud(&ah, b.qp.qp_num(), QKEY).sge(&s)])
        .unwrap();
    assert_eq!(fab.process(), 1);
    assert_eq!(drain(&mut a.scq)[0].wr_id, u64::MAX);
    // One completion, one outstanding send: a second forged CQE is refused again.
    fab.inject_cqe(&a.dev, a.scq.handle(), (qpn % 2) as u16, forged(qpn));
    assert!(a.scq.poll(&mut w).is_err());
    fab.assert_no_violations();
}

/// Golden bytes of the create commands, derived from `efa-abi.h`:
///
/// `struct efa_ibv_create_qp { __u32 comp_mask; __u32 rq_ring_size; __u32 sq_ring_size;
/// __u32 driver_qp_type; __u16 flags; __u8 sl; __u8 reserved_98[5]; }`: offsets 0, 4, 8, 12,
/// 16 (flags, little-endian), 18, 19..24. `EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID = 1 << 1`, so
/// bytes 16..18 are `02 00` with the cap and `00 00` without.
///
/// `struct efa_ibv_create_cq { __u32 comp_mask; __u32 cq_entry_size; __u16 num_sub_cqs;
/// __u8 flags; __u8 reserved_58[5]; }`: flags is byte 10. `EFA_CREATE_CQ_WITH_SGID = 1 << 1`,
/// `EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID = 1 << 2`: the send CQ (no SGID) has `0x04`, the
/// receive CQ (SGID) `0x06`; without the cap `0x00` and `0x02`.
#[test]
fn efa_golden_64bit_create_flags() {
    let fab = EfaFabric::new(24);
    let a = host(&fab, cfg64(), 8);
    let q = fab.qp_create_driver_bytes(&a.dev, a.qp.qp_num());
    assert_eq!(q.len(), 24);
    assert_eq!(q[16..18], [0x02, 0x00], "{q:02x?}");
    assert_eq!(q[18..24], [0; 6], "sl 0 and reserved");
    let sc = fab.cq_create_driver_bytes(&a.dev, a.scq.handle());
    let rc = fab.cq_create_driver_bytes(&a.dev, a.rcq.handle());
    assert_eq!(sc.len(), 16);
    assert_eq!((sc[10], rc[10]), (0x04, 0x06), "{sc:02x?} {rc:02x?}");
    assert_eq!(sc[11..16], [0; 5]);

    let p = host(&fab, ModelConfig::default(), 8);
    let q = fab.qp_create_driver_bytes(&p.dev, p.qp.qp_num());
    assert_eq!(q[16..18], [0x00, 0x00], "no cap: no flag");
    let sc = fab.cq_create_driver_bytes(&p.dev, p.scq.handle());
    let rc = fab.cq_create_driver_bytes(&p.dev, p.rcq.handle());
    assert_eq!((sc[10], rc[10]), (0x00, 0x02));
    let (sq, _) = p.qp.efadv_query_qp_wqs().unwrap();
    assert_eq!(sq.caps, EfaWqCaps::empty(), "the pool path without the cap");
}

/// Golden bytes of the WQE and the CQE of one send with wr_id `0x0123_4567_89ab_cdef`, from
/// `efa_io_defs.h`:
///
/// `struct efa_io_tx_meta_desc`: req_id u16 @0, ctrl1 @2, ctrl2 @3, dest_qp_num u16 @4,
/// length u16 @6, immediate_data u32 @8, ah u16 @12, ctrl3 @14, reserved @15, qkey u32 @16,
/// reserved2[6] @20, `struct efa_io_req_id_ex { u16 w[3]; }` @26. libefa's
/// `efa_set_sq_comp_wrid` writes `req_id = (u16)wr_id`, `w[0] = wr_id >> 16`,
/// `w[1] = wr_id >> 32`, `w[2] = wr_id >> 48`, each little-endian: bytes 0..2 `ef cd`, 20..26
/// zero, 26..32 `ab 89 67 45 23 01`.
///
/// `struct efa_io_tx_cdesc`: `efa_io_cdesc_common` (req_id u16 @0, status @2, flags @3,
/// qp_num u16 @4), req_id_ex @6, reserved[4] @12: the device echoes the same words, so bytes
/// 0..2 and 6..12 of the CQE are `ef cd` and `ab 89 67 45 23 01`; libefa's
/// `efa_get_sq_comp_wrid` reads them back as `req_id | w[0] << 16 | w[1] << 32 | w[2] << 48`.
#[test]
fn efa_golden_64bit_wqe_and_cqe() {
    const WR_ID: u64 = 0x0123_4567_89ab_cdef;
    let fab = EfaFabric::new(25);
    let mut a = host(&fab, cfg64(), 8);
    let mut b = host(&fab, cfg64(), 8);
    recvs(&mut b, 1);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let s: [Sge; 1] = [a.mr.sge(0, 16).unwrap()];
    a.qp.post_send(&[SendWr::send(WR_ID).ud(&ah, b.qp.qp_num(), QKEY).sge(&s)])
        .unwrap();
    let w = fab.llq_wqe(&a.dev, a.qp.qp_num(), 0);
    assert_eq!(w[0..2], [0xef, 0xcd], "req_id");
    assert_eq!(w[20..26], [0; 6], "reserved2");
    assert_eq!(w[26..32], [0xab, 0x89, 0x67, 0x45, 0x23, 0x01], "req_id_ex");
    assert_eq!(fab.process(), 1);
    // The model writes the CQE into the CQ ring; the poll reads it back to the same wr_id.
    let got = drain(&mut a.scq);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].wr_id, WR_ID);
    assert_eq!(got[0].status, WcStatus::SUCCESS);
    // Without the cap the same wr_id goes through the pool: req_id_ex stays zero.
    let mut p = host(&fab, ModelConfig::default(), 8);
    let ah = p.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    recvs(&mut b, 1);
    let s: [Sge; 1] = [p.mr.sge(0, 16).unwrap()];
    p.qp.post_send(&[SendWr::send(WR_ID).ud(&ah, b.qp.qp_num(), QKEY).sge(&s)])
        .unwrap();
    let w = fab.llq_wqe(&p.dev, p.qp.qp_num(), 0);
    assert_eq!(
        w[20..32],
        [0; 12],
        "pool path: reserved2 and req_id_ex zero"
    );
    assert_eq!(fab.process(), 1);
    assert_eq!(drain(&mut p.scq)[0].wr_id, WR_ID);
    fab.assert_no_violations();
}

/// Golden bytes of the hint, from `efa_io_defs.h`: `ctrl3` is byte 14 of
/// `struct efa_io_tx_meta_desc` (after req_id u16 @0, ctrl1 @2, ctrl2 @3, dest_qp_num u16 @4,
/// length u16 @6, immediate_data u32 @8, ah u16 @12); its bits 1:0 are `processing_hints`
/// (`EFA_IO_TX_META_DESC_PROCESSING_HINTS_MASK = GENMASK(1, 0)`), and libefa's
/// `efa_send_wr_set_processing_hints` maps `EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE`
/// (1 << 0) to `EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE` (1 << 0): byte 14 is `0x01` with
/// the hint and `0x00` without. The model records the hints of each WQE it executes.
#[test]
fn efa_processing_hints_reach_the_wqe() {
    let fab = EfaFabric::new(26);
    let mut a = host_wr(&fab, cfg64(), 8, EfaWrExFlags::WITH_PROCESSING_HINTS);
    let mut b = host(&fab, cfg64(), 8);
    recvs(&mut b, 2);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let s: [Sge; 1] = [a.mr.sge(0, 16).unwrap()];
    let mut batch = a.qp.wr_start().unwrap();
    batch
        .send(1, SendFlags::SIGNALED)
        .efadv_set_processing_hints(EfaProcessingHints::BURST_PPS_SENSITIVE)
        .set_ud_addr(&ah, b.qp.qp_num(), QKEY)
        .set_sge(s[0].lkey, s[0].addr, s[0].length);
    batch
        .send(2, SendFlags::SIGNALED)
        .set_ud_addr(&ah, b.qp.qp_num(), QKEY)
        .set_sge(s[0].lkey, s[0].addr, s[0].length);
    batch.complete().unwrap();
    let w0 = fab.llq_wqe(&a.dev, a.qp.qp_num(), 0);
    let w1 = fab.llq_wqe(&a.dev, a.qp.qp_num(), 1);
    assert_eq!((w0[14], w1[14]), (0x01, 0x00), "ctrl3 of the two WQEs");
    assert_eq!(fab.process(), 2);
    assert_eq!(fab.sq_hints(&a.dev, a.qp.qp_num()), [1, 0]);
    let mut ids: Vec<u64> = drain(&mut a.scq).iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2]);
    fab.assert_no_violations();
}

/// A hint on a QP created without `EFADV_WR_EX_WITH_PROCESSING_HINTS`, with bits EFA does not
/// define, or before any work request: the batch fails naming the call and the reason, and
/// nothing of it is posted.
#[test]
fn efa_processing_hints_refused() {
    let fab = EfaFabric::new(27);
    let mut plain = host(&fab, ModelConfig::default(), 8);
    let mut hinted = host_wr(
        &fab,
        ModelConfig::default(),
        8,
        EfaWrExFlags::WITH_PROCESSING_HINTS,
    );
    let b = host(&fab, ModelConfig::default(), 8);
    for (h, hints, errno, says) in [
        (
            &mut plain,
            EfaProcessingHints::BURST_PPS_SENSITIVE,
            Errno::OPNOTSUPP,
            "EFADV_WR_EX_WITH_PROCESSING_HINTS",
        ),
        (
            &mut hinted,
            EfaProcessingHints::from_bits_retain(0x6),
            Errno::INVAL,
            "hints 0x6",
        ),
    ] {
        let ah = h.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
        let s: [Sge; 1] = [h.mr.sge(0, 16).unwrap()];
        let mut batch = h.qp.wr_start().unwrap();
        batch
            .send(1, SendFlags::SIGNALED)
            .set_ud_addr(&ah, b.qp.qp_num(), QKEY)
            .set_sge(s[0].lkey, s[0].addr, s[0].length)
            .efadv_set_processing_hints(hints);
        let e = batch.complete().unwrap_err();
        assert!(e.is(errno), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("efadv_wr_set_processing_hints"), "{msg}");
        assert!(msg.contains(says), "{msg}");
        assert_eq!(fab.process(), 0, "nothing posted");
    }
    let mut batch = hinted.qp.wr_start().unwrap();
    batch.efadv_set_processing_hints(EfaProcessingHints::BURST_PPS_SENSITIVE);
    let e = batch.complete().unwrap_err();
    assert!(
        e.is(Errno::INVAL) && e.to_string().contains("no work request"),
        "{e}"
    );
    fab.assert_no_violations();
}

/// rxe has no processing hints: the batch fails with EOPNOTSUPP naming the call.
#[test]
fn rxe_processing_hints_refused() {
    let kernel = uverbs_rxe_standin::RxeStandin::new().expect("stand-in rxe kernel");
    let ctx = kernel.open().expect("open the stand-in rxe device");
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq_ex(&CqInitAttr {
        cqe: 16,
        ..Default::default()
    });
    let cq = cq.unwrap();
    let mut qp = pd
        .create_qp_ex(&QpInitAttr {
            send_ops_flags: SendOpsFlags::SEND,
            ..QpInitAttr::new(
                QpType::Rc,
                &cq,
                &cq,
                QpCap {
                    max_send_wr: 8,
                    max_recv_wr: 8,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
            )
        })
        .expect("create RC QP");
    // To RTS as benches/rxe_common.rs does (a loopback RC QP on the stand-in).
    uverbs_rxe_standin::RxeStandin::loopback_to_rts(&mut qp, AccessFlags::empty()).expect("to RTS");
    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let s = mr.sge(0, 8).unwrap();
    let mut batch = qp.wr_start().unwrap();
    batch
        .send(1, SendFlags::SIGNALED)
        .set_sge(s.lkey, s.addr, s.length)
        .efadv_set_processing_hints(EfaProcessingHints::BURST_PPS_SENSITIVE);
    let e = batch.complete().unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP), "{e}");
    assert!(
        e.to_string().contains("efadv_wr_set_processing_hints") && e.to_string().contains("rxe"),
        "{e}"
    );
}

/// The extended poll (`start_poll`/`next_poll`) reads the same 64-bit ids, and refuses a send
/// CQE with nothing outstanding as `poll` does.
#[test]
fn efa_64bit_ids_through_the_extended_poll() {
    let fab = EfaFabric::new(28);
    let mut a = host(&fab, cfg64(), 8);
    let mut b = host(&fab, cfg64(), 8);
    recvs(&mut b, 3);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let s: [Sge; 1] = [a.mr.sge(0, 16).unwrap()];
    for i in 0..3 {
        a.qp.post_send(&[SendWr::send(id(i)).ud(&ah, b.qp.qp_num(), QKEY).sge(&s)])
            .unwrap();
    }
    assert_eq!(fab.process(), 3);
    let mut got = Vec::new();
    {
        let mut g = a.scq.start_poll().unwrap().expect("completions ready");
        loop {
            got.push(g.wr_id());
            if !g.next_poll().unwrap() {
                break;
            }
        }
        g.end_poll();
    }
    got.sort_unstable();
    assert_eq!(got, [id(0), id(1), id(2)]);
    let qpn = a.qp.qp_num();
    let mut c = EfaIoRxCdescEx::default();
    c.base.common.set_q_type(EFA_IO_SEND_QUEUE);
    c.base.common.qp_num.set(qpn as u16);
    fab.inject_cqe(&a.dev, a.scq.handle(), (qpn % 2) as u16, c);
    let Err(e) = a.scq.start_poll() else {
        panic!("a send CQE with nothing outstanding was accepted");
    };
    assert!(e.to_string().contains("not outstanding"), "{e}");
    fab.assert_no_violations();
}
