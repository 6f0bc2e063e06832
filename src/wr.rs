//! Work requests (`struct ibv_send_wr`, `struct ibv_recv_wr`) as the safe API takes them.
//!
//! These are plain borrowed descriptions: building one allocates nothing, and posting a slice
//! of them ([`crate::Qp::post_send`], [`crate::Qp::post_recv`], [`crate::Srq::post_recv`])
//! copies them into the provider's ring. There is no `next` pointer: a list is a slice, and a
//! failure names the index of the work request that failed (`bad_wr`).
//!
//! Memory is named by [`Sge`] (built by [`crate::Mr::sge`], bounds checked). A UD destination
//! borrows its [`Ah`], so the AH cannot be destroyed while a work request naming it exists; on
//! rxe, whose kernel reads the AH when it sends, the QP also keeps a clone of it until the send
//! queue slot is reused (see [`crate::Qp::post_send`]); an EFA WQE carries the AH's number.

use crate::ah::Ah;
use crate::error::Error;

// The work-request vocabulary is the one the providers take (`uverbs_wr`): a `SendWr` reaches
// the provider's ring as it is.
#[doc(inline)]
pub use uverbs_wr::{SendFlags, WrData, WrOp};

/// Where a UD or SRD send goes (`ibv_send_wr.wr.ud`, `ibv_wr_set_ud_addr`): an [`Ah`], the
/// remote QP number and Q_Key.
///
/// Made by [`UdDest::new`](uverbs_wr::UdDest::new) (or [`SendWr::ud`](uverbs_wr::SendWr::ud)),
/// which copies what posting needs of the AH (its device number and which PD it belongs to)
/// into the destination, so a post reads plain fields instead of following the AH.
pub type UdDest<'a> = uverbs_wr::UdDest<'a, Ah>;

/// The identity of a PD while it lives: the address of its shared state. Two live PDs never
/// share it, and a PD lives as long as anything naming it (an [`Ah`] holds its PD, a QP holds
/// its PD), so comparing the ids of a borrowed AH's PD and a QP's PD is comparing the PDs.
#[inline(always)]
pub(crate) fn pd_id(pd: &crate::Pd) -> usize {
    std::sync::Arc::as_ptr(&pd.inner) as usize
}

/// What a destination copies of an [`Ah`]: its number and its PD's identity.
impl uverbs_wr::AddressHandle for Ah {
    #[inline(always)]
    fn ah_num(&self) -> u32 {
        self.inner.ah_num
    }

    #[inline(always)]
    fn domain(&self) -> usize {
        pd_id(&self.inner.pd)
    }
}

/// One send work request (`struct ibv_send_wr` without `next`).
///
/// Built with [`SendWr::send`] (or [`SendWr::new`] for any [`WrOp`]), then the data
/// ([`sge`](SendWr::sge) or [`inline`](SendWr::inline)), the flags and, for UD and SRD,
/// the destination; a slice of them is posted at once by [`Qp::post_send`](crate::Qp::post_send):
///
/// ```
/// # use uverbs::{AccessFlags, Context, Cq, Mr, Pd, Qp, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType};
/// # fn rts(qp: &mut Qp) -> uverbs::Result<()> {
/// #     let init = QpAttr { qp_state: QpState::Init, qkey: 0x11, port_num: 1, ..Default::default() };
/// #     qp.modify(&init, QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT)?;
/// #     qp.modify(&QpAttr { qp_state: QpState::Rtr, ..Default::default() }, QpAttrMask::STATE)?;
/// #     qp.modify(&QpAttr { qp_state: QpState::Rts, ..Default::default() }, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
/// # }
/// # fn side(ctx: &Context, ex: bool) -> uverbs::Result<(Pd, Cq, Qp, Mr)> {
/// #     let pd = ctx.alloc_pd()?;
/// #     let cq = ctx.create_cq(32, None, 0)?;
/// #     let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
/// #     let mut attr = QpInitAttr::new(QpType::Ud, &cq, &cq, cap);
/// #     attr.send_ops_flags = uverbs::SendOpsFlags::SEND;
/// #     let mut qp = if ex { pd.create_qp_ex(&attr)? } else { pd.create_qp(&attr)? };
/// #     rts(&mut qp)?;
/// #     let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
/// #     Ok((pd, cq, qp, mr))
/// # }
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// # let peer_ctx = fabric.add_device(Default::default()).open()?;
/// # let (peer_pd, mut peer_cq, mut peer_qp, peer_mr) = side(&peer_ctx, false)?;
/// # let peer_gid = peer_ctx.query_gid(1, 0)?;
/// # let peer_qpn = peer_qp.qp_num();
/// # const QKEY: u32 = 0x11;
/// # let (pd, mut cq, mut qp, mut mr) = side(&ctx, false)?;
/// # for i in 0..2 { peer_qp.post_recv(&[uverbs::RecvWr::new(i, &[peer_mr.sge(64 * i as usize, 64)?])])?; }
/// use uverbs::{AhAttr, GlobalRoute, SendWr};
///
/// let ah = pd.create_ah(&AhAttr { is_global: true, port_num: 1,
///     grh: GlobalRoute { dgid: peer_gid, ..Default::default() }, ..Default::default() })?;
/// mr.write(0, b"first")?;
/// mr.write(64, b"second")?;
/// let (a, b) = ([mr.sge(0, 5)?], [mr.sge(64, 6)?]);
/// // Signaled: each gets a completion (EFA completes every send and refuses unsignaled
/// // ones; on rxe an unsignaled send completes silently, freeing its slot with the next).
/// qp.post_send(&[
///     SendWr::send(1).sge(&a).signaled().ud(&ah, peer_qpn, QKEY),
///     SendWr::send(2).sge(&b).signaled().ud(&ah, peer_qpn, QKEY),
/// ])?;
/// # fabric.process();
/// let mut wcs = [uverbs::Wc::default(); 2];
/// let mut n = 0;
/// while n < 2 { n += cq.poll(&mut wcs[n..])?; }
/// assert_eq!((wcs[0].wr_id, wcs[1].wr_id), (1, 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "ibv_send_wr")]
pub type SendWr<'a> = uverbs_wr::SendWr<'a, Ah>;

// rustdoc shows the docs below first and the definition's own (`uverbs_wr::RecvWr`, which
// says what a receive work request is) after the example: say here only what those do not.
/// Where one incoming message goes, and the id its completion carries: posted with
/// [`Qp::post_recv`](crate::Qp::post_recv) or [`Srq::post_recv`](crate::Srq::post_recv).
///
/// ```
/// # use uverbs::{AccessFlags, Context, Cq, Mr, Pd, Qp, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType};
/// # fn rts(qp: &mut Qp) -> uverbs::Result<()> {
/// #     let init = QpAttr { qp_state: QpState::Init, qkey: 0x11, port_num: 1, ..Default::default() };
/// #     qp.modify(&init, QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT)?;
/// #     qp.modify(&QpAttr { qp_state: QpState::Rtr, ..Default::default() }, QpAttrMask::STATE)?;
/// #     qp.modify(&QpAttr { qp_state: QpState::Rts, ..Default::default() }, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
/// # }
/// # fn side(ctx: &Context, ex: bool) -> uverbs::Result<(Pd, Cq, Qp, Mr)> {
/// #     let pd = ctx.alloc_pd()?;
/// #     let cq = ctx.create_cq(32, None, 0)?;
/// #     let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
/// #     let mut attr = QpInitAttr::new(QpType::Ud, &cq, &cq, cap);
/// #     attr.send_ops_flags = uverbs::SendOpsFlags::SEND;
/// #     let mut qp = if ex { pd.create_qp_ex(&attr)? } else { pd.create_qp(&attr)? };
/// #     rts(&mut qp)?;
/// #     let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
/// #     Ok((pd, cq, qp, mr))
/// # }
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// # let peer_ctx = fabric.add_device(Default::default()).open()?;
/// # let (peer_pd, mut peer_cq, mut peer_qp, peer_mr) = side(&peer_ctx, false)?;
/// # let peer_gid = peer_ctx.query_gid(1, 0)?;
/// # let peer_qpn = peer_qp.qp_num();
/// # const QKEY: u32 = 0x11;
/// let (pd, mut cq, mut qp, mr) = (&peer_pd, &mut peer_cq, &mut peer_qp, &peer_mr);
/// use uverbs::RecvWr;
///
/// // Four 1 KiB buffers of one MR, each its own receive (wr_id = its index).
/// let sges = (0..4).map(|i| mr.sge(i * 1024, 1024)).collect::<uverbs::Result<Vec<_>>>()?;
/// let wrs: Vec<RecvWr<'_>> = sges.iter().enumerate()
///     .map(|(i, s)| RecvWr::new(i as u64, std::slice::from_ref(s)))
///     .collect();
/// qp.post_recv(&wrs)?;
/// // A completion's wr_id then says which buffer the message is in.
/// # let _ = (pd, cq);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
#[doc(inline)]
pub use uverbs_wr::RecvWr;

/// A failed `post_send`/`post_recv` of a list (`bad_wr`).
///
/// Work requests before `index` were posted (and for sends the doorbell was rung for them);
/// the one at `index` and everything after it were not. If the doorbell write itself fails,
/// `index` is the number of work requests that were queued: they stay queued and run on the
/// next successful post. `error` names the call, the QP and the reason (the provider's own
/// error is its [`source`](std::error::Error::source)).
pub type PostError = uverbs_wr::PostError<Error>;
