//! Two QPs on one rxe device, connected to each other, and the steps the soft-RoCE data-path
//! tests share: state changes for every transport, memory regions with every access,
//! completion waits with a deadline. Both QPs of a pair live on the same device (loopback),
//! which rxe handles like a link.

use std::time::Duration;

use uverbs::{
    AccessFlags, AhAttr, Context, Cq, Gid, Mr, Pd, Qp, QpAttr, QpAttrMask, QpCap, QpInitAttr,
    QpState, QpType, SendOpsFlags, SendWr, Wc, WcStatus, WrOp,
};

/// How long a test waits for completions or an event before failing.
pub const DEADLINE: Duration = Duration::from_secs(20);
/// The Q_Key of UD QPs brought up by [`to_init`].
pub const QKEY: u32 = 0x1111_2222;
/// The PSN both sides of a pair start at (RTR's `rq_psn`, RTS's `sq_psn`).
pub const PSN: u32 = 100;

/// Local write and every remote access.
pub fn all_access() -> AccessFlags {
    AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
}

/// Polls `cq` until `n` completions arrived or [`DEADLINE`] passed (then panics naming them).
pub fn wait(cq: &mut Cq, n: usize) -> Vec<Wc> {
    super::rc::wait_completions::<16>(cq, n, DEADLINE)
}

/// Checks that no further completion arrives within a short time.
pub fn assert_quiet(cq: &mut Cq) {
    std::thread::sleep(Duration::from_millis(200));
    let mut buf = [Wc::default(); 4];
    let k = cq.poll(&mut buf).expect("poll_cq");
    assert_eq!(k, 0, "unexpected completions: {:?}", &buf[..k]);
}

/// Fails the test unless every completion succeeded.
pub fn ok(wcs: &[Wc]) {
    for w in wcs {
        assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
    }
}

/// RESET -> INIT on port 1: UD with [`QKEY`], UC with local and remote write, RC (and the
/// rest) with [`all_access`].
pub fn to_init(qp: &mut Qp) {
    let mut a = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        ..QpAttr::default()
    };
    let mut mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
    match qp.qp_type() {
        QpType::Ud => {
            a.qkey = QKEY;
            mask |= QpAttrMask::QKEY;
        }
        QpType::Uc => {
            a.qp_access_flags = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
            mask |= QpAttrMask::ACCESS_FLAGS;
        }
        _ => {
            a.qp_access_flags = all_access();
            mask |= QpAttrMask::ACCESS_FLAGS;
        }
    }
    qp.modify(&a, mask).expect("modify to INIT");
}

/// INIT -> RTR: connected QPs towards `remote_qpn` at `gid` (via local GID `gid_index`), MTU
/// 1024, PSN [`PSN`]; RC also with 4 incoming reads/atomics and the shortest RNR timer.
pub fn to_rtr(qp: &mut Qp, remote_qpn: u32, gid_index: u8, gid: Gid) {
    let mut a = QpAttr {
        qp_state: QpState::Rtr,
        ..QpAttr::default()
    };
    let mut mask = QpAttrMask::STATE;
    if qp.qp_type() != QpType::Ud {
        a.path_mtu = uverbs::Mtu::Mtu1024;
        a.dest_qp_num = remote_qpn;
        a.rq_psn = PSN;
        a.ah_attr = AhAttr::roce(gid, gid_index, 1);
        mask |= QpAttrMask::AV | QpAttrMask::PATH_MTU | QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN;
        if qp.qp_type() == QpType::Rc {
            a.max_dest_rd_atomic = 4;
            a.min_rnr_timer = 1;
            mask |= QpAttrMask::MAX_DEST_RD_ATOMIC | QpAttrMask::MIN_RNR_TIMER;
        }
    }
    qp.modify(&a, mask).expect("modify to RTR");
}

/// RTR -> RTS with SQ PSN [`PSN`]; RC also with transport timeout 14, retries 7, RNR retries
/// unlimited and 4 outgoing reads/atomics (the mask leaves those out for other types).
pub fn to_rts(qp: &mut Qp) {
    let a = QpAttr {
        qp_state: QpState::Rts,
        sq_psn: PSN,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 4,
        ..QpAttr::default()
    };
    let rc_only = QpAttrMask::TIMEOUT
        | QpAttrMask::RETRY_CNT
        | QpAttrMask::RNR_RETRY
        | QpAttrMask::MAX_QP_RD_ATOMIC;
    let mut mask = QpAttrMask::STATE | QpAttrMask::SQ_PSN;
    if qp.qp_type() == QpType::Rc {
        mask |= rc_only;
    }
    qp.modify(&a, mask).expect("modify to RTS");
}

/// Moves `qp` to `state` with nothing else changed (legal only from some states: RTS -> SQD,
/// any -> ERR or RESET).
pub fn set_state(qp: &mut Qp, state: QpState) -> uverbs::Result<()> {
    qp.modify(
        &QpAttr {
            qp_state: state,
            ..QpAttr::default()
        },
        QpAttrMask::STATE,
    )
}

/// Brings `a` and `b` (on the same device) to RTS, each towards the other.
pub fn connect(a: &mut Qp, b: &mut Qp, gid_index: u8, gid: Gid) {
    to_init(a);
    to_init(b);
    let (an, bn) = (a.qp_num(), b.qp_num());
    to_rtr(a, bn, gid_index, gid);
    to_rtr(b, an, gid_index, gid);
    to_rts(a);
    to_rts(b);
}

/// `wr` work requests and `sge` SGEs on each queue, `inline` bytes of inline data.
pub fn cap(wr: u32, sge: u32, inline: u32) -> QpCap {
    QpCap {
        max_send_wr: wr,
        max_recv_wr: wr,
        max_send_sge: sge,
        max_recv_sge: sge,
        max_inline_data: inline,
    }
}

/// A PD and a `cqe`-entry CQ on the first rxe device, with its context.
pub fn pd_and_cq(cqe: u32) -> (Context, Pd, Cq) {
    let ctx = super::rxe_context();
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let cq = ctx.create_cq(cqe, None, 0).expect("create_cq");
    (ctx, pd, cq)
}

/// Two QPs of one type on the first rxe device: `a` completes into `cq_a`, `b` into `cq_b`.
pub struct Pair {
    pub ctx: Context,
    pub pd: Pd,
    pub cq_a: Cq,
    pub cq_b: Cq,
    pub a: Qp,
    pub b: Qp,
    /// The local GID both QPs address each other through, and its index.
    pub gid_index: u8,
    pub gid: Gid,
}

/// A [`Pair`] of `qp_type` with queues of `c`, 256-entry CQs, every `wr_*` operation allowed;
/// made with `create_qp_ex` when `ex`, connected to each other when `connect`.
pub fn pair_with(qp_type: QpType, c: QpCap, ex: bool, connect: bool) -> Pair {
    pair_sized(qp_type, c, ex, connect, 256)
}

/// [`pair_with`] with `cqe_b` entries asked for in B's CQ.
pub fn pair_sized(qp_type: QpType, c: QpCap, ex: bool, connect: bool, cqe_b: u32) -> Pair {
    let ctx = super::rxe_context();
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let cq_a = ctx.create_cq(256, None, 0).expect("create_cq");
    let cq_b = ctx.create_cq(cqe_b, None, 0).expect("create_cq");
    let mk = |cq: &Cq| {
        let mut init = QpInitAttr::new(qp_type, cq, cq, c);
        init.send_ops_flags = SendOpsFlags::all();
        if ex {
            pd.create_qp_ex(&init)
        } else {
            pd.create_qp(&init)
        }
        .expect("create_qp")
    };
    let mut a = mk(&cq_a);
    let mut b = mk(&cq_b);
    let (gid_index, gid) = super::rc::roce_gid(&ctx);
    if connect {
        self::connect(&mut a, &mut b, gid_index, gid);
    }
    Pair {
        ctx,
        pd,
        cq_a,
        cq_b,
        a,
        b,
        gid_index,
        gid,
    }
}

/// A connected [`Pair`] of `qp_type`: 64 WRs and 4 SGEs a queue, 64 bytes inline.
pub fn pair(qp_type: QpType) -> Pair {
    pair_with(qp_type, cap(64, 4, 64), false, true)
}

/// A `len`-byte memory region in `pd` with [`all_access`].
pub fn mr(pd: &Pd, len: usize) -> Mr {
    pd.reg_mr(len, all_access()).expect("reg_mr")
}

/// `len` bytes of `m` from offset `off`.
pub fn read_mr(m: &Mr, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    m.read(off, &mut v).expect("mr read");
    v
}

/// An RC pair made to overrun a CQ: `a` completes its sends into the one-entry CQ `small`
/// (everything else into `big`), and more signaled RDMA writes than `small` holds are posted
/// on it. rxe drops the completions that do not fit and raises `CQ_ERR` naming `small`. The
/// QPs are declared (and so dropped) before the CQs.
pub struct CqOverrun {
    pub a: Qp,
    pub b: Qp,
    pub local: Mr,
    pub remote: Mr,
    pub big: Cq,
    pub small: Cq,
    pub pd: Pd,
}

/// Sets up a [`CqOverrun`] on `ctx` (an rxe device) and posts the writes that overrun it.
pub fn overrun_a_cq(ctx: &Context) -> CqOverrun {
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let small = ctx.create_cq(1, None, 0).expect("create a one-entry CQ");
    let big = ctx.create_cq(256, None, 0).expect("create_cq");
    let c = cap(16, 1, 0);
    let mut a = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &small, &big, c))
        .expect("create_qp");
    let mut b = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &big, &big, c))
        .expect("create_qp");
    let (gid_index, gid) = super::rc::roce_gid(ctx);
    connect(&mut a, &mut b, gid_index, gid);
    let local = mr(&pd, 4096);
    let remote = mr(&pd, 4096);
    let sg = [local.sge(0, 8).expect("sge")];
    let wrs: Vec<SendWr<'_>> = (0..u64::from(small.cqe()) + 4)
        .map(|i| {
            SendWr::new(
                i,
                WrOp::RdmaWrite {
                    remote_addr: remote.addr() + 8 * i,
                    rkey: remote.rkey(),
                },
            )
            .sge(&sg)
            .signaled()
        })
        .collect();
    a.post_send(&wrs).expect("post_send");
    drop(wrs);
    CqOverrun {
        a,
        b,
        local,
        remote,
        big,
        small,
        pd,
    }
}

/// A multicast GID (`ff0e::<last>`) for attach/detach tests.
pub fn mcast_gid(last: u8) -> Gid {
    let mut mgid = Gid::default();
    mgid.raw[0] = 0xff;
    mgid.raw[1] = 0x0e;
    mgid.raw[15] = last;
    mgid
}
