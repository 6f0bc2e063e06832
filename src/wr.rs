//! Work requests (`struct ibv_send_wr`, `struct ibv_recv_wr`) as the safe API takes them.
//!
//! These are plain borrowed descriptions: building one allocates nothing, and posting a slice
//! of them ([`crate::Qp::post_send`], [`crate::Qp::post_recv`], [`crate::Srq::post_recv`])
//! copies them into the provider's ring. There is no `next` pointer: a list is a slice, and a
//! failure names the index of the work request that failed (`bad_wr`).
//!
//! Memory is named by [`Sge`] (built by [`crate::Mr::sge`], bounds checked). A UD destination
//! borrows its [`Ah`], so the AH cannot be destroyed while a work request naming it exists; the
//! QP keeps a clone of it until the send queue slot is reused (see [`crate::Qp::post_send`]).

use crate::ah::Ah;
use crate::mr::Sge;

// The send flags and operations are the work-request vocabulary the providers share: a
// `SendWr`'s `op`, `flags` and SGE slice reach the provider's ring as they are.
#[doc(inline)]
pub use uverbs_wr::{SendFlags, WrOp};

/// The data of a send work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrData<'a> {
    /// Registered memory (`sg_list`, `num_sge`); may be empty.
    Sge(&'a [Sge]),
    /// Bytes copied into the work queue entry while posting (`IBV_SEND_INLINE`): the buffer is
    /// free again when `post_send` returns.
    Inline(&'a [u8]),
}

/// Where a UD send goes (`ibv_send_wr.wr.ud`, `ibv_wr_set_ud_addr`).
///
/// Made by [`UdDest::new`] (or [`SendWr::ud`]), which copies what posting needs of the AH
/// (its device number and which PD it belongs to) into the destination, so a post reads
/// plain fields instead of following the AH. The AH itself is private, so the copies always
/// describe the AH the destination names.
#[derive(Debug, Clone, Copy)]
pub struct UdDest<'a> {
    /// The address handle (borrowed: it outlives the work request).
    ah: &'a Ah,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
    /// `ah`'s number (`AhInner::ah_num`), copied by `new`.
    ah_num: u32,
    /// `ah`'s PD, as the address of its `PdInner` ([`pd_id`]), copied by `new`.
    pd_id: usize,
}

/// The identity of a PD while it lives: the address of its shared state. Two live PDs never
/// share it, and a PD lives as long as anything naming it (an [`Ah`] holds its PD, a QP
/// holds its PD), so comparing the ids of a borrowed AH's PD and a QP's PD is comparing
/// the PDs.
#[inline(always)]
pub(crate) fn pd_id(pd: &crate::Pd) -> usize {
    std::sync::Arc::as_ptr(&pd.inner) as usize
}

impl<'a> UdDest<'a> {
    /// A destination: `ah`, the remote QP number and Q_Key.
    #[inline]
    pub fn new(ah: &'a Ah, remote_qpn: u32, remote_qkey: u32) -> Self {
        UdDest {
            ah,
            remote_qpn,
            remote_qkey,
            ah_num: ah.inner.ah_num,
            pd_id: pd_id(&ah.inner.pd),
        }
    }

    /// The address handle.
    #[inline]
    pub fn ah(&self) -> &'a Ah {
        self.ah
    }

    /// The AH's number (rxe's AH index, EFA's device AH number).
    #[inline(always)]
    pub(crate) fn ah_num(&self) -> u32 {
        self.ah_num
    }

    /// The [`pd_id`] of the AH's PD.
    #[inline(always)]
    pub(crate) fn pd_id(&self) -> usize {
        self.pd_id
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
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: WrOp,
    /// Send flags.
    pub flags: SendFlags,
    /// The data.
    pub data: WrData<'a>,
    /// UD destination: required on UD QPs, refused on connected QPs.
    pub ud: Option<UdDest<'a>>,
}

impl<'a> SendWr<'a> {
    /// A work request for `op` with no flags, no data and no UD destination.
    pub fn new(wr_id: u64, op: WrOp) -> Self {
        SendWr {
            wr_id,
            op,
            flags: SendFlags::empty(),
            data: WrData::Sge(&[]),
            ud: None,
        }
    }

    /// `IBV_WR_SEND`.
    pub fn send(wr_id: u64) -> Self {
        Self::new(wr_id, WrOp::Send)
    }

    /// Sets the scatter/gather list.
    pub fn sge(mut self, sg_list: &'a [Sge]) -> Self {
        self.data = WrData::Sge(sg_list);
        self
    }

    /// Sets inline data (copied into the queue while posting).
    pub fn inline(mut self, data: &'a [u8]) -> Self {
        self.data = WrData::Inline(data);
        self
    }

    /// Sets the send flags.
    pub fn flags(mut self, flags: SendFlags) -> Self {
        self.flags = flags;
        self
    }

    /// Adds `IBV_SEND_SIGNALED`.
    pub fn signaled(mut self) -> Self {
        self.flags |= SendFlags::SIGNALED;
        self
    }

    /// Sets the UD destination.
    pub fn ud(mut self, ah: &'a Ah, remote_qpn: u32, remote_qkey: u32) -> Self {
        self.ud = Some(UdDest::new(ah, remote_qpn, remote_qkey));
        self
    }
}

/// One receive work request (`struct ibv_recv_wr` without `next`).
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
#[doc(inline)]
pub use uverbs_wr::RecvWr;

/// A failed `post_send`/`post_recv` of a list (`bad_wr`).
///
/// Work requests before `index` were posted (and for sends the doorbell was rung for them);
/// the one at `index` and everything after it were not. If the doorbell write itself fails,
/// `index` is the number of work requests that were queued: they stay queued and run on the
/// next successful post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostError {
    /// Index of the first work request that was not posted (`bad_wr`).
    pub index: usize,
    /// Why (operation `post_send`/`post_recv`, the QP, the check that failed).
    pub error: crate::Error,
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "work request {}: {}", self.index, self.error)
    }
}

impl std::error::Error for PostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// The errno that stands for a ring-layer refusal (rdma-core's rxe returns these).
pub(crate) fn post_errno(e: &uverbs_rxe::PostError) -> crate::Errno {
    use uverbs_rxe::PostError as P;
    match e {
        P::QueueFull { .. } => crate::Errno::NOMEM,
        P::Ring(_) => crate::Errno::IO,
        P::OpcodeNotSupported { .. } => crate::Errno::OPNOTSUPP,
        _ => crate::Errno::INVAL,
    }
}
