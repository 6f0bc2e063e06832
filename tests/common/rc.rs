//! RoCE addressing, QP sizes, RC connection set-up and completion waiting for the soft-RoCE VM
//! tests.

use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, AhAttr, Context, Cq, Gid, GidQuery, Qp, QpAttr, QpAttrMask, QpCap, QpState, Wc,
};

/// The port-1 IPv4-mapped RoCE v2 GID and its index, as `Context::find_gid` picks it: the one
/// that routes over the VM's IPv4 link (rxe also lists link-local IPv6 GIDs, tentative for a
/// moment after the link comes up). Fails the test with `find_gid`'s reason if there is none.
pub fn roce_gid(ctx: &Context) -> (u8, Gid) {
    let e = ctx
        .find_gid(1, &GidQuery::Ipv4)
        .unwrap_or_else(|e| panic!("{e}"));
    (e.gid_index as u8, e.gid)
}

/// Takes an RC QP through INIT (local write only) -> RTR (towards `remote_qpn` at `gid`, via
/// local GID `gid_index`, MTU 1024, PSN 0) -> RTS (PSN 0, RNR retries unlimited), with the
/// transport `timeout` and `retry_cnt` the caller wants: long for plain traffic, short where
/// a dead peer must be noticed quickly. Panics naming the transition that failed.
pub fn rc_connect(
    qp: &mut Qp,
    remote_qpn: u32,
    gid_index: u8,
    gid: Gid,
    timeout: u8,
    retry_cnt: u8,
) {
    let path = RcPath {
        timeout,
        retry_cnt,
        psn: 0,
        access: AccessFlags::LOCAL_WRITE,
    };
    rc_connect_on(qp, remote_qpn, gid_index, gid, &path);
}

/// What [`rc_connect_on`] sets beyond the peer's address.
#[derive(Clone, Copy)]
pub struct RcPath {
    /// Transport timeout code and retries.
    pub timeout: u8,
    pub retry_cnt: u8,
    /// The PSN both directions start at (SQ and RQ).
    pub psn: u32,
    /// The QP's access flags (remote writes need `REMOTE_WRITE`).
    pub access: AccessFlags,
}

/// [`rc_connect`] with the PSN and access flags chosen too.
pub fn rc_connect_on(qp: &mut Qp, remote_qpn: u32, gid_index: u8, gid: Gid, path: &RcPath) {
    let RcPath {
        timeout,
        retry_cnt,
        psn,
        access,
    } = *path;
    qp.modify(
        &QpAttr {
            qp_state: QpState::Init,
            port_num: 1,
            qp_access_flags: access,
            ..QpAttr::default()
        },
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .expect("modify to INIT");
    qp.modify(
        &QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: uverbs::Mtu::Mtu1024,
            dest_qp_num: remote_qpn,
            rq_psn: psn,
            min_rnr_timer: 1,
            ah_attr: AhAttr::roce(gid, gid_index, 1),
            ..QpAttr::default()
        },
        QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER,
    )
    .expect("modify to RTR");
    qp.modify(
        &QpAttr {
            qp_state: QpState::Rts,
            sq_psn: psn,
            timeout,
            retry_cnt,
            rnr_retry: 7,
            ..QpAttr::default()
        },
        QpAttrMask::STATE
            | QpAttrMask::SQ_PSN
            | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::MAX_QP_RD_ATOMIC,
    )
    .expect("modify to RTS");
}

/// Polls `cq` until `n` completions arrived and returns them; panics naming what came if
/// `deadline` passes first, so a lost completion fails the test instead of hanging it.
/// `BATCH` is the most completions one poll takes: when more than `n` are ready, up to
/// `BATCH - 1` extra ones come back too, for the caller's assertions to see.
pub fn wait_completions<const BATCH: usize>(cq: &mut Cq, n: usize, deadline: Duration) -> Vec<Wc> {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [Wc::default(); BATCH];
    while out.len() < n {
        let k = cq.poll(&mut buf).expect("poll_cq");
        out.extend_from_slice(&buf[..k]);
        assert!(
            start.elapsed() < deadline,
            "only {} of {n} completions in {deadline:?}: {out:?}",
            out.len()
        );
        if k == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    out
}

/// Queue sizes of `wr` work requests on both the send and the receive queue, one SGE each,
/// no inline data: the plain QP most of these tests need.
pub fn qp_cap(wr: u32) -> QpCap {
    QpCap {
        max_send_wr: wr,
        max_recv_wr: wr,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}
