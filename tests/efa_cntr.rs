//! EFA completion counters, queue introspection and depth limits (issue 17) through the public
//! API against the strict device model: counters advance per completion and per error, the
//! kernel's refusals (attach twice, destroy while attached, no cap), and golden bytes of every
//! new command derived by hand from `ib_user_ioctl_cmds.h` / `efa-abi.h`.

#[path = "common/efa.rs"]
mod efa;

use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use efa::drain;
use uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_COMP_CNTR;
use uverbs::{
    CompCntrOps, EfaCntrMem, EfaCompCntr, EfaCompCntrInitAttr, EfaDeviceCaps, EfaQpInitAttr,
    EfaRqDepthAttr, EfaSqDepthAttr, EfaSqDepthFlags, Errno, QpCap, QpInitAttr, QpType, RecvWr,
    SendWr, Sge, UdDest, WcStatus, WrOp,
};
use uverbs_efa_model::{EfaFabric, ModelConfig};

const QKEY: u32 = 0x1234_5678;

fn cfg_cntr() -> ModelConfig {
    let d = ModelConfig::default();
    ModelConfig {
        device_caps: d.device_caps | EFA_QUERY_DEVICE_CAPS_COMP_CNTR,
        ..d
    }
}

type Host = efa::SrdHost;

fn cap() -> QpCap {
    efa::SrdHostSpec::default().cap
}

fn host(fab: &EfaFabric, cfg: ModelConfig) -> Host {
    efa::srd_host(fab, cfg, &efa::SrdHostSpec::default(), QKEY)
}

fn send(a: &mut Host, dest: &UdDest, wr_id: u64, len: u32) {
    let s: [Sge; 1] = [a.mr.sge(0, len).unwrap()];
    a.qp.post_send(&[SendWr::new(wr_id, WrOp::Send)
        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
        .sge(&s)])
        .unwrap();
}

fn recv(b: &mut Host, wr_id: u64, len: u32) {
    let s = [b.mr.sge(0x8000, len).unwrap()];
    b.qp.post_recv(&[RecvWr { wr_id, sg_list: &s }]).unwrap();
}

fn counts(c: &EfaCompCntr) -> (u64, u64) {
    (c.read().unwrap(), c.read_err().unwrap())
}

/// Sends and receives are counted into the counters attached for them, each completion once,
/// successes and failures apart, exactly as the CQEs say.
#[test]
fn efa_comp_cntr_counts_completions_and_errors() {
    let fab = EfaFabric::new(3);
    let mut a = host(&fab, cfg_cntr());
    let mut b = host(&fab, cfg_cntr());
    let actx = a.pd.context().clone();
    let bctx = b.pd.context().clone();
    assert!(actx
        .efadv_query_device()
        .unwrap()
        .device_caps
        .contains(EfaDeviceCaps::COMP_CNTR));
    let tx = actx.efadv_create_comp_cntr(&Default::default()).unwrap();
    let rx = bctx.efadv_create_comp_cntr(&Default::default()).unwrap();
    a.qp.attach_comp_cntr(&tx, CompCntrOps::SEND).unwrap();
    b.qp.attach_comp_cntr(&rx, CompCntrOps::RECV).unwrap();
    assert_eq!(counts(&tx), (0, 0));
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);

    // 5 good sends, each with a receive waiting.
    for i in 0..5 {
        recv(&mut b, 100 + i, 256);
        send(&mut a, &dest, i, 64);
    }
    assert_eq!(fab.process(), 5);
    assert_eq!(counts(&tx), (5, 0));
    assert_eq!(counts(&rx), (5, 0));
    let s = drain(&mut a.scq);
    assert_eq!(s.len(), 5);
    assert!(s.iter().all(|w| w.status == WcStatus::SUCCESS));
    assert_eq!(drain(&mut b.rcq).len(), 5);

    // 2 sends with no receive posted: SRD answers RNR, an error on the sender only.
    send(&mut a, &dest, 10, 64);
    send(&mut a, &dest, 11, 64);
    assert_eq!(fab.process(), 2);
    assert_eq!(counts(&tx), (5, 2));
    assert_eq!(counts(&rx), (5, 0));
    let s = drain(&mut a.scq);
    assert_eq!(s.len(), 2);
    assert!(s.iter().all(|w| w.status != WcStatus::SUCCESS));

    // A message longer than the receive buffer: an error on both sides.
    recv(&mut b, 200, 16);
    send(&mut a, &dest, 12, 64);
    assert_eq!(fab.process(), 1);
    assert_eq!(counts(&tx), (5, 3));
    assert_eq!(counts(&rx), (5, 1));
    let r = drain(&mut b.rcq);
    assert_eq!(r.len(), 1);
    assert_ne!(r[0].status, WcStatus::SUCCESS);
    drain(&mut a.scq);

    fab.assert_no_violations();
    drop(ah);
    // The QPs go first (their attachments end), then the counters can be destroyed.
    drop(a.qp);
    drop(b.qp);
    tx.destroy().unwrap();
    rx.destroy().unwrap();
}

/// RDMA write and read are counted on both sides under their own operation bits.
#[test]
fn efa_comp_cntr_counts_rdma_on_both_sides() {
    let fab = EfaFabric::new(4);
    let mut a = host(&fab, cfg_cntr());
    let b = host(&fab, cfg_cntr());
    let tx =
        a.pd.context()
            .efadv_create_comp_cntr(&Default::default())
            .unwrap();
    let remote =
        b.pd.context()
            .efadv_create_comp_cntr(&Default::default())
            .unwrap();
    a.qp.attach_comp_cntr(&tx, CompCntrOps::RDMA_WRITE | CompCntrOps::RDMA_READ)
        .unwrap();
    b.qp.attach_comp_cntr(
        &remote,
        CompCntrOps::REMOTE_RDMA_WRITE | CompCntrOps::REMOTE_RDMA_READ,
    )
    .unwrap();
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    let s = [a.mr.sge(0, 64).unwrap()];
    for (i, op) in [
        WrOp::RdmaWrite {
            remote_addr: b.mr.addr(),
            rkey: b.mr.rkey(),
        },
        WrOp::RdmaRead {
            remote_addr: b.mr.addr(),
            rkey: b.mr.rkey(),
        },
        // A bad rkey: an error for the issuer, nothing for the target.
        WrOp::RdmaWrite {
            remote_addr: b.mr.addr(),
            rkey: b.mr.rkey() ^ 0x100,
        },
    ]
    .into_iter()
    .enumerate()
    {
        a.qp.post_send(&[SendWr::new(i as u64, op)
            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
            .sge(&s)])
            .unwrap();
    }
    assert_eq!(fab.process(), 3);
    assert_eq!(counts(&tx), (2, 1));
    assert_eq!(counts(&remote), (2, 0));
    assert_eq!(drain(&mut a.scq).len(), 3);
    fab.assert_no_violations();
}

/// The kernel's refusals, each a clear error, and nothing leaked: an operation counted twice,
/// an empty op mask, a counter destroyed while a QP is attached (handed back, alive), a
/// counter of another context.
#[test]
fn efa_comp_cntr_refusals() {
    let fab = EfaFabric::new(5);
    let a = host(&fab, cfg_cntr());
    let b = host(&fab, cfg_cntr());
    let ctx = a.pd.context().clone();
    let c1 = ctx.efadv_create_comp_cntr(&Default::default()).unwrap();
    let c2 = ctx.efadv_create_comp_cntr(&Default::default()).unwrap();
    a.qp.attach_comp_cntr(&c1, CompCntrOps::SEND).unwrap();

    // The same counter again for SEND, or another one: one counter per operation (EBUSY).
    for c in [&c1, &c2] {
        let e =
            a.qp.attach_comp_cntr(c, CompCntrOps::SEND | CompCntrOps::RECV)
                .unwrap_err();
        assert!(e.is(Errno::BUSY), "{e}");
        assert!(e.to_string().contains("qp_attach_comp_cntr"), "{e}");
        assert!(e.to_string().contains("one counter per operation"), "{e}");
    }
    // Another operation into the same counter is fine.
    a.qp.attach_comp_cntr(&c1, CompCntrOps::RECV).unwrap();

    let e =
        a.qp.attach_comp_cntr(&c2, CompCntrOps::empty())
            .unwrap_err();
    assert!(e.is(Errno::INVAL), "{e}");
    assert!(e.to_string().contains("empty op mask"), "{e}");

    // A counter of another context.
    let other =
        b.pd.context()
            .efadv_create_comp_cntr(&Default::default())
            .unwrap();
    let e =
        a.qp.attach_comp_cntr(&other, CompCntrOps::RDMA_READ)
            .unwrap_err();
    assert!(e.is(Errno::INVAL), "{e}");
    assert!(e.to_string().contains("different contexts"), "{e}");

    // Destroy while attached: EBUSY with the reason, the counter handed back and still read.
    let e = c1.destroy().unwrap_err();
    assert!(e.is(Errno::BUSY), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("destroy_comp_cntr") && msg.contains("still attached"),
        "{msg}"
    );
    let c1 = e.into_inner();
    assert_eq!(counts(&c1), (0, 0));
    // The unattached one goes at once.
    c2.destroy().unwrap();
    // Destroying the QP ends its attachments: now the counter goes.
    drop(a.qp);
    c1.destroy().unwrap();
    other.destroy().unwrap();
    fab.assert_no_violations();
}

/// A device without `EFA_QUERY_DEVICE_CAPS_COMP_CNTR`: create and attach refused with
/// EOPNOTSUPP naming the cap (the model, like the kernel, would refuse the create too).
#[test]
fn efa_comp_cntr_needs_the_cap() {
    let fab = EfaFabric::new(6);
    let a = host(&fab, ModelConfig::default());
    let ctx = a.pd.context().clone();
    assert!(!ctx
        .efadv_query_device()
        .unwrap()
        .device_caps
        .contains(EfaDeviceCaps::COMP_CNTR));
    let e = ctx.efadv_create_comp_cntr(&Default::default()).unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("efadv_create_comp_cntr")
            && msg.contains("EFA_QUERY_DEVICE_CAPS_COMP_CNTR")
            && msg.contains("efa_"),
        "{msg}"
    );
    // Attach on such a device is refused before the counter is even looked at: build one on
    // a device that has them.
    let b = host(&fab, cfg_cntr());
    let c =
        b.pd.context()
            .efadv_create_comp_cntr(&Default::default())
            .unwrap();
    let e = a.qp.attach_comp_cntr(&c, CompCntrOps::SEND).unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP), "{e}");
    assert!(
        e.to_string().contains("EFA_QUERY_DEVICE_CAPS_COMP_CNTR"),
        "{e}"
    );
}

/// Counter words in a dmabuf: the device writes them there (the model maps the dmabuf as the
/// kernel would), the library refuses to read what it has no mapping of.
#[test]
fn efa_comp_cntr_in_a_dmabuf() {
    let fab = EfaFabric::new(7);
    let mut a = host(&fab, cfg_cntr());
    let mut b = host(&fab, cfg_cntr());
    let buf = uverbs_efa_model::memfd(4096);
    let c =
        a.pd.context()
            .efadv_create_comp_cntr(&EfaCompCntrInitAttr {
                comp: EfaCntrMem::Dmabuf {
                    fd: buf.as_fd(),
                    offset: 0x100,
                },
                err: EfaCntrMem::Owned,
            })
            .unwrap();
    a.qp.attach_comp_cntr(&c, CompCntrOps::SEND).unwrap();
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    recv(&mut b, 1, 256);
    send(&mut a, &dest, 1, 8);
    send(&mut a, &dest, 2, 8); // RNR: an error
    assert_eq!(fab.process(), 2);
    let e = c.read().unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP), "{e}");
    assert!(e.to_string().contains("dmabuf"), "{e}");
    assert_eq!(c.read_err().unwrap(), 1);
    let f = std::fs::File::from(buf.try_clone().unwrap());
    let mut w = [0u8; 8];
    f.read_exact_at(&mut w, 0x100).unwrap();
    assert_eq!(
        u64::from_ne_bytes(w),
        1,
        "the completion word in the dmabuf"
    );
    drain(&mut a.scq);
    drain(&mut b.rcq);
    fab.assert_no_violations();
}

/// Golden bytes of the three new commands, derived by hand from the published headers:
///
/// `ib_user_ioctl_cmds.h`: `UVERBS_OBJECT_COMP_CNTR` = 19 (20th of `enum
/// uverbs_default_objects`), `UVERBS_METHOD_COMP_CNTR_CREATE` = 0, `_DESTROY` = 1,
/// `UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE` = 0, `UVERBS_ATTR_DESTROY_COMP_CNTR_HANDLE` = 0;
/// `UVERBS_OBJECT_QP` = 4, `UVERBS_METHOD_QP_ATTACH_COMP_CNTR` = 2, its attrs `_HANDLE` = 0,
/// `_CNTR_HANDLE` = 1, `_OP_MASK` = 2. `efa-abi.h`: `EFA_IB_ATTR_CREATE_COMP_CNTR_COMP_BUFFER`
/// = `1 << UVERBS_ID_NS_SHIFT` = 0x1000, `_ERR_BUFFER` = 0x1001.
/// `ib_user_ioctl_verbs.h`: `struct ib_uverbs_buffer_desc` { u32 type @0; s32 fd @4; u32 flags
/// @8; u32 optional_flags @12; u64 addr @16; u64 length @24 } = 32 bytes,
/// `IB_UVERBS_BUFFER_TYPE_DMABUF` = 0, `_VA` = 1; `IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND` = 1,
/// `_RECV` = 2.
/// `rdma/rdma_user_ioctl_cmds.h`: `struct ib_uverbs_attr` { u16 attr_id @0; u16 len @2; u16
/// flags @4; u16 attr_data @6; u64 data @8 }, `UVERBS_ATTR_F_MANDATORY` = 1.
/// So the create is three attributes: [id 0, len 0, flags 1, data 0] (new handle), and
/// [id 0x1000 / 0x1001, len 32, flags 1, data -> the desc]; each desc for memory the counter
/// owns is type 1 (VA), fd 0, flags 0, addr = the word's address (8-aligned), length 8. A
/// dmabuf desc is type 0, fd = the dmabuf, addr = the offset. The attach: [id 0, len 0, flags
/// 1, data = QP handle], [id 1, len 0, flags 1, data = counter handle], [id 2, len 4, flags 1,
/// data = op mask inline]. The destroy: [id 0, len 0, flags 1, data = counter handle].
#[test]
fn efa_golden_comp_cntr_commands() {
    let fab = EfaFabric::new(8);
    let a = host(&fab, cfg_cntr());
    let ctx = a.pd.context().clone();
    let dmabuf = uverbs_efa_model::memfd(4096);
    let c = ctx
        .efadv_create_comp_cntr(&EfaCompCntrInitAttr {
            comp: EfaCntrMem::Owned,
            err: EfaCntrMem::Dmabuf {
                fd: dmabuf.as_fd(),
                offset: 0x40,
            },
        })
        .unwrap();
    a.qp.attach_comp_cntr(&c, CompCntrOps::SEND | CompCntrOps::RECV)
        .unwrap();
    let qp_handle = a.qp.handle();
    let cntr_handle = c.handle();
    drop(a.qp);
    c.destroy().unwrap();

    let attr = |id: u16, len: u16, data: u64| {
        let mut v = [0u8; 16];
        v[0..2].copy_from_slice(&id.to_le_bytes());
        v[2..4].copy_from_slice(&len.to_le_bytes());
        v[4..6].copy_from_slice(&1u16.to_le_bytes()); // UVERBS_ATTR_F_MANDATORY
        v[8..16].copy_from_slice(&data.to_le_bytes());
        v
    };
    let log = fab.ioctl_log();
    assert_eq!(log.len(), 3, "{log:?}");

    // Create: object 19, method 0.
    let cr = &log[0];
    assert_eq!((cr.object_id, cr.method_id), (19, 0));
    assert_eq!(cr.attrs.len(), 3);
    assert_eq!(cr.attrs[0], attr(0, 0, 0));
    assert_eq!(cr.attrs[1][..8], attr(0x1000, 32, 0)[..8]);
    assert_eq!(cr.attrs[2][..8], attr(0x1001, 32, 0)[..8]);
    assert_eq!(cr.pointed.len(), 2);
    let (id, comp) = &cr.pointed[0];
    assert_eq!(*id, 0x1000);
    let addr = u64::from_le_bytes(comp[16..24].try_into().unwrap());
    assert_eq!(addr % 8, 0, "the counter word is 8-aligned");
    assert_ne!(addr, 0);
    let mut want = [0u8; 32];
    want[0..4].copy_from_slice(&1u32.to_le_bytes()); // IB_UVERBS_BUFFER_TYPE_VA
    want[16..24].copy_from_slice(&addr.to_le_bytes());
    want[24..32].copy_from_slice(&8u64.to_le_bytes());
    assert_eq!(comp[..], want[..]);
    // The attribute's data word is the pointer to this desc.
    let (id, err) = &cr.pointed[1];
    assert_eq!(*id, 0x1001);
    let mut want = [0u8; 32];
    // type 0 = IB_UVERBS_BUFFER_TYPE_DMABUF
    use std::os::fd::AsRawFd;
    want[4..8].copy_from_slice(&dmabuf.as_raw_fd().to_le_bytes());
    want[16..24].copy_from_slice(&0x40u64.to_le_bytes());
    want[24..32].copy_from_slice(&8u64.to_le_bytes());
    assert_eq!(err[..], want[..]);

    // Attach: object 4 (QP), method 2.
    let at = &log[1];
    assert_eq!((at.object_id, at.method_id), (4, 2));
    assert_eq!(
        at.attrs,
        vec![
            attr(0, 0, u64::from(qp_handle)),
            attr(1, 0, u64::from(cntr_handle)),
            attr(2, 4, 3), // SEND | RECV, inline
        ]
    );

    // Destroy: object 19, method 1.
    let de = &log[2];
    assert_eq!((de.object_id, de.method_id), (19, 1));
    assert_eq!(de.attrs, vec![attr(0, 0, u64::from(cntr_handle))]);
}

/// `efadv_query_device`'s newest fields: `inline_buf_size_ex` (libefa substitutes
/// `inline_buf_size` when the kernel reports 0) and `comp_mask` (0).
#[test]
fn efa_query_device_inline_ex_and_comp_mask() {
    let fab = EfaFabric::new(9);
    let old = fab.add_device(ModelConfig::default()).open().unwrap();
    let a = old.efadv_query_device().unwrap();
    assert_eq!(
        (a.inline_buf_size, a.inline_buf_size_ex, a.comp_mask),
        (32, 32, 0)
    );
    let new = fab
        .add_device(ModelConfig {
            inline_buf_size_ex: 80,
            ..Default::default()
        })
        .open()
        .unwrap();
    let a = new.efadv_query_device().unwrap();
    assert_eq!((a.inline_buf_size, a.inline_buf_size_ex), (32, 80));
}

/// `efadv_get_max_sq_depth` / `efadv_get_max_rq_depth`: libefa's formulas over the same driver
/// data, and its refusals, answered from what the context cached when it was created (as
/// libefa does): no call sends a command, refusals included.
#[test]
fn efa_max_queue_depths() {
    let fab = EfaFabric::new(10);
    let cfg = ModelConfig {
        inline_buf_size_ex: 80,
        max_llq_size: 3 << 16, // 196608: not a power of two once divided
        max_rq_wr: 8192,
        ..Default::default()
    };
    let (ctx, counts) =
        efa::CountingChannel::open(&fab.add_device(cfg), "efa_depths", 0x0200_0000_0000_00ac);
    let after_open = counts.commands();
    assert_eq!(counts.query_device(), 1, "opening asks the device once");
    let sq = |flags, sge, rdma, inline| {
        ctx.efadv_get_max_sq_depth(&EfaSqDepthAttr {
            flags,
            max_send_sge: sge,
            max_rdma_sge: rdma,
            max_inline_data: inline,
        })
    };
    // 64-byte WQEs: 196608 / 64 = 3072 -> 2048; 128-byte: 1536 -> 1024.
    assert_eq!(sq(EfaSqDepthFlags::empty(), 2, 1, 32).unwrap(), 2048);
    assert_eq!(sq(EfaSqDepthFlags::empty(), 1, 0, 33).unwrap(), 1024);
    assert_eq!(sq(EfaSqDepthFlags::INLINE_WRITE, 1, 1, 0).unwrap(), 1024);
    for (args, what) in [
        ((3, 1, 0), "max_send_sge 3 > the device's max_sq_sge 2"),
        ((1, 2, 0), "max_rdma_sge 2 > the device's max_sge_rd 1"),
        (
            (1, 1, 81),
            "max_inline_data 81 > the device's inline_buf_size_ex 80",
        ),
    ] {
        let e = sq(EfaSqDepthFlags::empty(), args.0, args.1, args.2).unwrap_err();
        assert!(e.is(Errno::INVAL), "{e}");
        assert!(e.to_string().contains(what), "{e}");
    }
    let rq = |n| ctx.efadv_get_max_rq_depth(&EfaRqDepthAttr { max_recv_sge: n });
    assert_eq!(rq(1).unwrap(), 8192);
    assert_eq!(rq(2).unwrap(), 4096);
    for n in [0, 3] {
        let e = rq(n).unwrap_err();
        assert!(e.is(Errno::INVAL), "{e}");
        assert!(e.to_string().contains("max_rq_sge"), "{e}");
    }
    // Ten more of each: still nothing sent.
    for _ in 0..10 {
        assert_eq!(sq(EfaSqDepthFlags::empty(), 2, 1, 32).unwrap(), 2048);
        assert_eq!(rq(2).unwrap(), 4096);
    }
    assert_eq!(
        counts.commands(),
        after_open,
        "efadv_get_max_*_depth sent commands"
    );
}

/// `efadv_query_qp_wqs` and `efadv_query_cq`: what libefa returns for the same QP and CQ.
#[test]
fn efa_query_qp_wqs_and_cq() {
    let fab = EfaFabric::new(11);
    let cfg = ModelConfig {
        min_sq_wr: 8,
        max_tx_batch: 4,
        inline_buf_size_ex: 80,
        ..Default::default()
    };
    let a = host(&fab, cfg);
    let (sq, rq) = a.qp.efadv_query_qp_wqs().unwrap();
    // SQ: 16 WRs of 64 bytes; max_batch = max_tx_batch * 64 / 64 = 4 (below depth - 1 = 15).
    assert_eq!(
        (sq.comp_mask, sq.entry_size, sq.num_entries, sq.max_batch),
        (0, 64, 16, 4)
    );
    assert!(sq.caps.is_empty());
    // RQ: 16 WRs of 1 SGE = 16 descriptors of 16 bytes; one doorbell may cover them all.
    assert_eq!(
        (rq.comp_mask, rq.entry_size, rq.num_entries, rq.max_batch),
        (0, 16, 16, 16)
    );
    assert_ne!(sq.buffer, rq.buffer);
    assert_ne!(sq.doorbell, rq.doorbell);
    // Stable: the same rings every time.
    assert_eq!(a.qp.efadv_query_qp_wqs().unwrap(), (sq, rq));

    // Both CQs have 32-byte entries (libefa creates every CQ with `ex_cqe_size`, SGID or not),
    // 64 entries per sub-CQ, and a doorbell (the model gives CQs one).
    let s = a.scq.efadv_query_cq().unwrap();
    let r = a.rcq.efadv_query_cq().unwrap();
    assert_eq!((s.comp_mask, s.entry_size, s.num_entries), (0, 32, 64));
    assert_eq!((r.entry_size, r.num_entries), (32, 64));
    assert!(s.doorbell.is_some() && r.doorbell.is_some());
    assert_ne!(s.buffer, r.buffer);

    // A device without CQ doorbells: none reported (libefa's NULL).
    let b = host(
        &fab,
        ModelConfig {
            cq_doorbell: false,
            ..Default::default()
        },
    );
    assert_eq!(b.scq.efadv_query_cq().unwrap().doorbell, None);

    // 128-byte WQEs when the QP asks for more inline data than 32 bytes.
    let ctx = a.pd.context();
    let qp =
        a.pd.efadv_create_qp_ex(
            &QpInitAttr::new(
                QpType::Srd,
                &a.scq,
                &a.rcq,
                QpCap {
                    max_inline_data: 64,
                    max_send_wr: 4,
                    ..cap()
                },
            ),
            &EfaQpInitAttr::default(),
        )
        .unwrap();
    let (sq, _) = qp.efadv_query_qp_wqs().unwrap();
    // depth max(4, min_sq_wr 8) = 8; batch 4 * 64 / 128 = 2.
    assert_eq!((sq.entry_size, sq.num_entries, sq.max_batch), (128, 8, 2));
    let _ = ctx;
}

/// `ibv_set_comp_cntr` / `_inc_` (and the error twins): the kernel writes the words, reads see
/// it, the device keeps counting from there. Golden bytes of the modify, from
/// `ib_user_ioctl_cmds.h`: `UVERBS_METHOD_COMP_CNTR_MODIFY` = 2 on object 19; attrs
/// `_HANDLE` = 0 (IDR, len 0, data = handle), `_ENTRY` = 1 and `_OP` = 2 (constants: libibverbs'
/// `fill_attr_const_in` is `fill_attr_in_uint64`, len 8 inline), `_VALUE` = 3 (u64, len 8
/// inline); `IB_UVERBS_COMP_CNTR_ENTRY_COMP` = 0, `_ERR` = 1, `IB_UVERBS_COMP_CNTR_MODIFY_OP_SET`
/// = 0, `_INC` = 1 (`ib_user_ioctl_verbs.h`).
#[test]
fn efa_comp_cntr_set_and_inc() {
    let fab = EfaFabric::new(12);
    let mut a = host(&fab, cfg_cntr());
    let mut b = host(&fab, cfg_cntr());
    let c =
        a.pd.context()
            .efadv_create_comp_cntr(&Default::default())
            .unwrap();
    c.set(1000).unwrap();
    c.set_err(7).unwrap();
    assert_eq!(counts(&c), (1000, 7));
    c.inc(5).unwrap();
    c.inc_err(1).unwrap();
    assert_eq!(counts(&c), (1005, 8));
    a.qp.attach_comp_cntr(&c, CompCntrOps::SEND).unwrap();
    let ah = a.pd.create_ah(&efa::ah_attr(b.gid)).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    recv(&mut b, 1, 64);
    send(&mut a, &dest, 1, 8);
    assert_eq!(fab.process(), 1);
    assert_eq!(
        counts(&c),
        (1006, 8),
        "the device counts on from the value set"
    );
    drain(&mut a.scq);
    drain(&mut b.rcq);

    let attr = |id: u16, len: u16, data: u64| {
        let mut v = [0u8; 16];
        v[0..2].copy_from_slice(&id.to_le_bytes());
        v[2..4].copy_from_slice(&len.to_le_bytes());
        v[4..6].copy_from_slice(&1u16.to_le_bytes()); // UVERBS_ATTR_F_MANDATORY
        v[8..16].copy_from_slice(&data.to_le_bytes());
        v
    };
    let h = u64::from(c.handle());
    let log = fab.ioctl_log();
    let modifies: Vec<_> = log
        .iter()
        .filter(|r| (r.object_id, r.method_id) == (19, 2))
        .collect();
    assert_eq!(modifies.len(), 4);
    for (r, (entry, op, value)) in
        modifies
            .iter()
            .zip([(0, 0, 1000), (1, 0, 7), (0, 1, 5), (1, 1, 1)])
    {
        assert_eq!(
            r.attrs,
            vec![
                attr(0, 0, h),
                attr(1, 8, entry),
                attr(2, 8, op),
                attr(3, 8, value)
            ]
        );
    }
    fab.assert_no_violations();
}
