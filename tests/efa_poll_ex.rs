//! The extended poll (`Cq::start_poll`, `PollCq::next_poll`, the `ibv_wc_read_*` and
//! `efadv_wc_*` readers) on EFA CQs against the device model: it reads the ring lazily, so it
//! is checked completion by completion against `Cq::poll_efa` on a twin fabric that ran the
//! very same work; and a QP destroyed while a poll is open (on the same thread) neither hangs
//! nor confuses the poll.

#[path = "common/efa.rs"]
mod efa;

use efa::sge;

use uverbs::{
    AccessFlags, Ah, Cq, CqInitAttr, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr, EfaWc, EfaWcFlags,
    Mr, Pd, Qp, QpCap, QpInitAttr, QpType, RecvWr, SendFlags, SendOpsFlags, SendWr, UdDest, Wc,
    WcFlags, WcOpcode, WcStatus, WrOp,
};
use uverbs_efa_model::{EfaFabric, ModelConfig};

const QKEY: u32 = 0x1234_5678;

/// One side; fields drop in order (QP before CQs, MR before PD).
struct Side {
    qp: Qp,
    scq: Cq,
    rcq: Cq,
    mr: Mr,
    pd: Pd,
    gid: [u8; 16],
}

struct World {
    a: Side,
    b: Side,
    ah: Ah,
    fab: EfaFabric,
}

fn side(fab: &EfaFabric, flags: EfaQpFlags) -> Side {
    let dev = fab.add_device(ModelConfig::default());
    let ctx = dev.open().expect("open model device");
    let pd = ctx.alloc_pd().unwrap();
    let scq = efa::cq(&ctx, 16, EfaWcFlags::empty());
    let rcq = efa::cq(
        &ctx,
        16,
        EfaWcFlags::WITH_SGID | EfaWcFlags::WITH_IS_UNSOLICITED,
    );
    let qp = srd_qp(&pd, &scq, &rcq, flags);
    let mr = pd
        .reg_mr(
            1 << 16,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
        )
        .unwrap();
    Side {
        gid: dev.gid(),
        qp,
        scq,
        rcq,
        mr,
        pd,
    }
}

/// An SRD QP on `pd` completing into `scq`/`rcq`, in RTS.
fn srd_qp(pd: &Pd, scq: &Cq, rcq: &Cq, flags: EfaQpFlags) -> Qp {
    let mut qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SendOpsFlags::SEND
                    | SendOpsFlags::SEND_WITH_IMM
                    | SendOpsFlags::RDMA_READ
                    | SendOpsFlags::RDMA_WRITE
                    | SendOpsFlags::RDMA_WRITE_WITH_IMM,
                ..QpInitAttr::new(
                    QpType::Srd,
                    scq,
                    rcq,
                    QpCap {
                        max_send_wr: 16,
                        max_recv_wr: 16,
                        max_send_sge: 1,
                        max_recv_sge: 1,
                        max_inline_data: 32,
                    },
                )
            },
            &EfaQpInitAttr {
                flags,
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .expect("efadv_create_qp");
    efa::to_rts(&mut qp, QKEY).expect("modify to RTS");
    qp
}

/// a sends to b; b has no AH for a (so its receives carry a's GID) and takes unsolicited
/// RDMA writes with immediate.
fn world(seed: u64) -> World {
    let fab = EfaFabric::new(seed);
    let a = side(&fab, EfaQpFlags::empty());
    let b = side(&fab, EfaQpFlags::UNSOLICITED_WRITE_RECV);
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    World { a, b, ah, fab }
}

/// Round `r` of the work: a few receives, then sends with and without immediate, RDMA
/// writes with and without immediate (some finding no receive: unsolicited), an RDMA read,
/// and more sends than receives (receiver-not-ready errors).
fn work(w: &mut World, r: u64) {
    let dest = UdDest::new(&w.ah, w.b.qp.qp_num(), QKEY);
    let rr = [sge(&w.b.mr, 0, 64)];
    let recvs = (r % 3) as usize + 1;
    for i in 0..recvs {
        w.b.qp
            .post_recv(&[RecvWr {
                wr_id: 1000 * r + i as u64,
                sg_list: &rr,
            }])
            .unwrap();
    }
    let s = [sge(&w.a.mr, 0, 16)];
    let (rkey, base) = (w.b.mr.rkey(), w.b.mr.addr());
    let mut x = w.a.qp.wr_start().unwrap();
    x.send_imm(10 * r, SendFlags::SIGNALED, 0xab00 + r as u32)
        .set_sge_list(&s)
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    x.rdma_write_imm(
        10 * r + 1,
        SendFlags::SIGNALED,
        rkey,
        base + 4096,
        0xfeed_0000 + r as u32,
    )
    .set_sge_list(&s)
    .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    x.rdma_write(10 * r + 2, SendFlags::SIGNALED, rkey, base + 8192)
        .set_sge_list(&s)
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    x.rdma_read(10 * r + 3, SendFlags::SIGNALED, rkey, base + 8192)
        .set_sge_list(&[sge(&w.a.mr, 1024, 16)])
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    x.send(10 * r + 4, SendFlags::SIGNALED)
        .set_sge_list(&s)
        .set_ud_addr(dest.ah(), dest.remote_qpn, dest.remote_qkey);
    x.complete().unwrap();
    w.a.qp
        .post_send(&[SendWr::send(10 * r + 5)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&s)])
        .unwrap();
    assert_eq!(w.fab.process(), 6);
}

/// What the extended poll shows of one completion, every reader.
#[derive(Debug, PartialEq)]
struct Seen {
    wc: Wc,
    sgid: Option<[u8; 16]>,
    unsolicited: bool,
    imm: Option<u32>,
}

fn drain_ex(cq: &mut Cq) -> Vec<Seen> {
    let mut out = Vec::new();
    let Some(mut g) = cq.start_poll().unwrap() else {
        return out;
    };
    loop {
        let wc = Wc {
            wr_id: g.wr_id(),
            status: g.status(),
            opcode: g.read_opcode(),
            vendor_err: g.read_vendor_err(),
            byte_len: g.read_byte_len(),
            imm_data: if g.read_wc_flags().contains(WcFlags::WITH_IMM) {
                g.read_imm_data()
            } else {
                0
            },
            qp_num: g.read_qp_num(),
            src_qp: g.read_src_qp(),
            wc_flags: g.read_wc_flags(),
            pkey_index: g.read_pkey_index(),
            slid: g.read_slid(),
            sl: g.read_sl(),
            dlid_path_bits: g.read_dlid_path_bits(),
        };
        assert_eq!(wc, g.wc(), "the readers and wc() agree");
        out.push(Seen {
            imm: wc.imm(),
            wc,
            sgid: g.read_sgid().ok(),
            unsolicited: g.is_unsolicited(),
        });
        if !g.next_poll().unwrap() {
            break;
        }
    }
    g.end_poll();
    out
}

fn drain_poll(cq: &mut Cq) -> Vec<Seen> {
    let mut out = Vec::new();
    let mut buf = [EfaWc::default(); 4];
    loop {
        let n = cq.poll_efa(&mut buf).unwrap();
        out.extend(buf[..n].iter().map(|w| Seen {
            wc: w.wc,
            sgid: w.read_sgid().ok(),
            unsolicited: w.is_unsolicited(),
            imm: w.wc.imm(),
        }));
        if n == 0 {
            return out;
        }
    }
}

/// Twelve rounds of the same work on two fabrics: the extended poll of one hands out, field by
/// field, what `poll_efa` hands out on the other, over every completion kind the work makes
/// (sends, RDMA writes and reads, an RNR failure, receives, unsolicited writes with immediate)
/// and across ring wraps.
#[test]
fn extended_poll_gives_what_poll_gives() {
    let (mut x, mut y) = (world(11), world(11));
    let mut kinds = std::collections::HashSet::new();
    for r in 0..12 {
        work(&mut x, r);
        work(&mut y, r);
        for (cx, cy) in [(&mut x.a.scq, &mut y.a.scq), (&mut x.b.rcq, &mut y.b.rcq)] {
            let want = drain_poll(cx);
            let got = drain_ex(cy);
            assert_eq!(got, want, "round {r}");
            for s in &got {
                kinds.insert((s.wc.opcode, s.wc.status, s.unsolicited, s.sgid.is_some()));
            }
        }
    }
    // 12 rounds of 6 sends on 16-entry sub-CQs wrapped every ring several times; the
    // completions came in every kind the work makes.
    for k in [
        (WcOpcode::SEND, WcStatus::SUCCESS),
        (WcOpcode::RDMA_WRITE, WcStatus::SUCCESS),
        (WcOpcode::RDMA_READ, WcStatus::SUCCESS),
        (WcOpcode::SEND, WcStatus::RNR_RETRY_EXC_ERR),
        (WcOpcode::RECV, WcStatus::SUCCESS),
        (WcOpcode::RECV_RDMA_WITH_IMM, WcStatus::SUCCESS),
    ] {
        assert!(
            kinds.iter().any(|&(o, s, _, _)| (o, s) == k),
            "no {k:?} completion in {kinds:?}"
        );
    }
    assert!(kinds.iter().any(|&(_, _, unsol, _)| unsol), "unsolicited");
    assert!(kinds.iter().any(|&(_, _, _, sgid)| sgid), "with a GID");
    x.fab.assert_no_violations();
    y.fab.assert_no_violations();
}

/// A send with immediate read through the extended poll: the immediate in host order as sent,
/// the opcode, flags, length, source QP and GID; a send completion has no source GID.
#[test]
fn extended_poll_reads_immediate_data_in_host_order() {
    let mut w = world(5);
    let dest = UdDest::new(&w.ah, w.b.qp.qp_num(), QKEY);
    let rr = [sge(&w.b.mr, 0, 64)];
    w.b.qp
        .post_recv(&[RecvWr {
            wr_id: 7,
            sg_list: &rr,
        }])
        .unwrap();
    let s = [sge(&w.a.mr, 0, 16)];
    w.a.qp
        .post_send(&[SendWr::new(
            1,
            WrOp::SendWithImm {
                imm_data: 0x1234_abcd,
            },
        )
        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
        .sge(&s)])
        .unwrap();
    assert_eq!(w.fab.process(), 1);
    let mut g = w.b.rcq.start_poll().unwrap().expect("the receive");
    assert_eq!(g.wr_id(), 7);
    assert_eq!(g.read_opcode(), WcOpcode::RECV);
    assert!(g.read_wc_flags().contains(WcFlags::WITH_IMM));
    assert_eq!(g.read_imm_data(), 0x1234_abcd);
    assert_eq!(g.read_byte_len(), 16);
    assert_eq!(g.read_src_qp(), w.a.qp.qp_num());
    assert_eq!(g.read_slid(), 0xffff, "b has no AH for a");
    assert_eq!(g.read_sgid().unwrap(), w.a.gid);
    assert_eq!(
        g.sgid().map(|x| x.raw),
        Some(w.a.gid),
        "sgid() is read_sgid() without the error"
    );
    assert!(!g.is_unsolicited());
    assert!(!g.next_poll().unwrap());
    drop(g);
    assert!(w.b.rcq.start_poll().unwrap().is_none(), "consumed");
    // A send completion has no source GID: ENOENT, as rdma-core.
    let g = w.a.scq.start_poll().unwrap().expect("the send");
    assert!(g.read_sgid().unwrap_err().is(uverbs::Errno::NOENT));
    assert_eq!(g.sgid(), None);
}

/// A QP destroyed while a poll of its CQ is open on the same thread: the destroy does not
/// wait for the poll (the poll holds nothing of the QP table between calls), and the poll then
/// skips the QP's completions as stale instead of handing them out.
#[test]
fn qp_destroyed_during_an_open_poll() {
    let mut w = world(7);
    let dest = UdDest::new(&w.ah, w.b.qp.qp_num(), QKEY);
    let rr = [sge(&w.b.mr, 0, 64)];
    for i in 0..4 {
        w.b.qp
            .post_recv(&[RecvWr {
                wr_id: i,
                sg_list: &rr,
            }])
            .unwrap();
    }
    let s = [sge(&w.a.mr, 0, 16)];
    for i in 0..4 {
        w.a.qp
            .post_send(&[SendWr::send(100 + i)
                .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
                .sge(&s)])
            .unwrap();
    }
    assert_eq!(w.fab.process(), 4);
    let World { a, b, ah, fab } = w;
    let Side {
        qp: bqp,
        mut rcq,
        scq: bscq,
        mr: bmr,
        pd: bpd,
        ..
    } = b;
    assert_eq!(rcq.efa_stale_completions(), 0);
    let mut g = rcq.start_poll().unwrap().expect("receives");
    let first = g.wr_id();
    // Destroy the QP whose receives are still in the CQ, with the poll open.
    drop(bqp);
    assert!(
        !g.next_poll().unwrap(),
        "the rest belonged to the destroyed QP"
    );
    assert!(first < 4);
    assert_eq!(g.wr_id(), first, "still on the last good completion");
    g.end_poll();
    assert_eq!(rcq.efa_stale_completions(), 3);
    fab.assert_no_violations();
    drop((ah, a, rcq, bscq, bmr, bpd));
}

/// A CQ's poller keeps the QP it found last across polls (revalidated per call by the QP
/// table's generation). Here that QP is destroyed between two polls with completions of it
/// still in the CQ, and a new QP is created on the same CQ: the next polls must count the
/// old QP's completions as stale (never resolve them through the remembered entry, which is
/// freed) and hand out the new QP's completion with the wr_id posted to it. Both pollers:
/// `poll_efa` on a's CQ, the extended poll on b's. Each side's QP sends and receives on one
/// CQ, so every table entry holds both wr_id pools: a remembered entry whose memory went to
/// a new QP's entry would complete the old QP's req_ids against the new QP's pools (refused:
/// another generation), and one whose memory was not reused would read freed pools.
#[test]
fn efa_poll_after_the_remembered_qp_is_destroyed_and_another_created() {
    let fab = EfaFabric::new(9);
    let one_cq_side = || {
        let dev = fab.add_device(ModelConfig::default());
        let ctx = dev.open().expect("open model device");
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx
            .efadv_create_cq(
                &CqInitAttr {
                    cqe: 16,
                    ..Default::default()
                },
                &EfaCqInitAttr::default(),
            )
            .expect("efadv_create_cq");
        let qp = srd_qp(&pd, &cq, &cq, EfaQpFlags::empty());
        let mr = pd.reg_mr(1 << 16, AccessFlags::LOCAL_WRITE).unwrap();
        (qp, cq, mr, pd, dev.gid())
    };
    let (mut aqp, mut acq, amr, apd, _) = one_cq_side();
    let (mut bqp, mut bcq, bmr, bpd, bgid) = one_cq_side();
    let ah = apd.create_ah(&efa::ah_attr(bgid)).unwrap();
    let (rr, s) = ([sge(&bmr, 0, 64)], [sge(&amr, 0, 16)]);
    for i in 0..4 {
        bqp.post_recv(&[RecvWr {
            wr_id: i,
            sg_list: &rr,
        }])
        .unwrap();
        let dest = UdDest::new(&ah, bqp.qp_num(), QKEY);
        aqp.post_send(&[SendWr::send(100 + i)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&s)])
            .unwrap();
    }
    assert_eq!(fab.process(), 4);
    // One completion of each old QP: each CQ's poller now remembers that QP's entry.
    let g = bcq.start_poll().unwrap().expect("receives");
    assert!(g.wr_id() < 4);
    g.end_poll();
    let mut one = [EfaWc::default(); 1];
    assert_eq!(acq.poll_efa(&mut one).unwrap(), 1);
    assert!((100..104).contains(&one[0].wc.wr_id));
    let (old_a, old_b) = (aqp.qp_num(), bqp.qp_num());
    // Both QPs go, three completions of each still queued; new QPs take their places.
    drop((aqp, bqp));
    aqp = srd_qp(&apd, &acq, &acq, EfaQpFlags::empty());
    bqp = srd_qp(&bpd, &bcq, &bcq, EfaQpFlags::empty());
    // The old QPs' completions come first (the new QPs have none yet): all stale.
    assert!(bcq.start_poll().unwrap().is_none(), "old b QP {old_b}");
    assert_eq!(bcq.efa_stale_completions(), 3);
    assert_eq!(acq.poll_efa(&mut one).unwrap(), 0, "old a QP {old_a}");
    assert_eq!(acq.efa_stale_completions(), 3);
    bqp.post_recv(&[RecvWr {
        wr_id: 77,
        sg_list: &rr,
    }])
    .unwrap();
    aqp.post_send(&[SendWr::send(200).ud(&ah, bqp.qp_num(), QKEY).sge(&s)])
        .unwrap();
    assert_eq!(fab.process(), 1);

    let mut got = Vec::new();
    if let Some(mut g) = bcq.start_poll().unwrap() {
        loop {
            got.push((g.wr_id(), g.read_qp_num(), g.status()));
            if !g.next_poll().unwrap() {
                break;
            }
        }
    }
    assert_eq!(
        got,
        [(77, bqp.qp_num(), WcStatus::SUCCESS)],
        "old b QP {old_b}"
    );
    assert_eq!(bcq.efa_stale_completions(), 3);

    let mut wcs = [EfaWc::default(); 8];
    let n = acq.poll_efa(&mut wcs).unwrap();
    let got: Vec<_> = wcs[..n]
        .iter()
        .map(|w| (w.wc.wr_id, w.wc.qp_num, w.wc.status))
        .collect();
    assert_eq!(
        got,
        [(200, aqp.qp_num(), WcStatus::SUCCESS)],
        "old a QP {old_a}"
    );
    assert_eq!(acq.efa_stale_completions(), 3);
    fab.assert_no_violations();
    drop((aqp, bqp, ah));
    drop((acq, amr, apd, bcq, bmr, bpd));
}
