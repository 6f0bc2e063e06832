//! The `ibv_wr_*` API: [`WrBatch`], a batch of work requests built by the provider's builder
//! (`QpOps::wr_*`: in place in the send queue on rxe, staged on EFA) and posted with one
//! doorbell.

use super::{Qp, SendOpsFlags};
use crate::ah::Ah;
use crate::error::{Errno, Error, Result};
use crate::mr::Sge;
use crate::provider::{dispatch, ProviderError, QpOps, QpRing, Step};
use crate::wr::{SendFlags, WrOp};

/// An open `ibv_wr_*` batch on a QP (`ibv_qp_ex` between `ibv_wr_start` and
/// `ibv_wr_complete`/`ibv_wr_abort`), on any provider.
///
/// Each builder (`send`, `rdma_write`, …) starts one work request; the setters (`set_sge`,
/// `set_sge_list`, `set_inline_data`, `set_ud_addr`) complete the last one. As in libibverbs,
/// errors are sticky: the first one is returned by [`WrBatch::complete`], which then posts
/// nothing. Dropping the batch without `complete` aborts it. An operation the provider cannot
/// do (atomics, memory windows or invalidation on EFA; RDMA on an EFA UD QP) is refused by the
/// builder and reported by `complete`.
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
/// # let (pd, mut cq, mut qp, mut mr) = side(&ctx, true)?; // a QP from create_qp_ex
/// # peer_qp.post_recv(&[uverbs::RecvWr::new(1, &[peer_mr.sge(0, 64)?])])?;
/// use uverbs::{AhAttr, GlobalRoute, SendFlags};
///
/// let ah = pd.create_ah(&AhAttr { is_global: true, port_num: 1,
///     grh: GlobalRoute { dgid: peer_gid, ..Default::default() }, ..Default::default() })?;
/// mr.write(0, b"one batch")?;
/// let mut batch = qp.wr_start()?;                        // ibv_wr_start
/// batch
///     .send(7, SendFlags::SIGNALED)                      // ibv_wr_send
///     .set_sge(mr.lkey(), mr.addr(), 9)                  // ibv_wr_set_sge
///     .set_ud_addr(&ah, peer_qpn, QKEY);                 // ibv_wr_set_ud_addr
/// batch.complete()?;                                     // ibv_wr_complete: one doorbell
/// # fabric.process();
/// let wc = loop { if let Some(wc) = cq.poll_one()? { break wc } };
/// assert_eq!((wc.wr_id, wc.status), (7, uverbs::WcStatus::SUCCESS));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "ibv_qp_ex")]
pub struct WrBatch<'q> {
    pub(crate) qp: &'q mut Qp,
    /// The batch's first refusal: `complete` returns it and posts nothing.
    pub(crate) err: Option<Error>,
    pub(super) open: bool,
}

impl std::fmt::Debug for WrBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrBatch")
            .field("qp", &self.qp.label())
            .field("err", &self.err)
            .finish()
    }
}

impl WrBatch<'_> {
    /// Runs one `wr_*` call (`call` names it) on the provider's builder, unless the batch
    /// already failed; a refusal becomes the batch's error, which `complete` returns.
    pub(crate) fn step(
        &mut self,
        call: &'static str,
        f: impl FnOnce(&mut QpRing) -> Step,
    ) -> &mut Self {
        if self.err.is_some() {
            return self;
        }
        if let Err(e) = f(&mut self.qp.ring) {
            self.fail(call, e);
        }
        self
    }

    /// Records the batch's error: the call `complete` reports, the QP, which work request and
    /// which `wr_*` call was refused, and why (the provider's reason is its source).
    #[cold]
    pub(crate) fn fail(&mut self, call: &'static str, e: ProviderError) {
        let n = self.len().saturating_sub(1);
        self.err = Some(
            Error::provider("wr_complete", self.qp.label(), e).with_reason(format!(
                "work request {n} ({call}) refused, nothing of the batch posted: {e}"
            )),
        );
    }

    fn op(&mut self, call: &'static str, wr_id: u64, flags: SendFlags, op: WrOp) -> &mut Self {
        if self.err.is_some() {
            return self;
        }
        let allowed = self.qp.send_ops;
        let need = SendOpsFlags::of(&op);
        if !allowed.contains(need) {
            // Counted as a work request of the batch (it makes `complete` fail).
            let n = self.len();
            self.err = Some(Error::invalid(
                "wr_complete",
                self.qp.label(),
                Errno::OPNOTSUPP,
                format!(
                    "work request {n} ({call}) refused, nothing of the batch posted: {need:?} is \
                     not in the QP's send_ops_flags {allowed:?}"
                ),
            ));
            return self;
        }
        self.step(
            call,
            |ring| dispatch!(QpRing, ring, r => r.wr_op(wr_id, flags, op)),
        )
    }

    /// Starts one work request for any operation (`ibv_wr_local_inv`, `ibv_wr_bind_mw`, or
    /// any of the builders below, which are this with their [`WrOp`]).
    #[doc(alias = "ibv_wr_local_inv")]
    #[doc(alias = "ibv_wr_bind_mw")]
    pub fn wr_op(&mut self, wr_id: u64, flags: SendFlags, op: WrOp) -> &mut Self {
        let call = match op {
            WrOp::Send => "wr_send",
            WrOp::SendWithImm { .. } => "wr_send_imm",
            WrOp::SendWithInv { .. } => "wr_send_inv",
            WrOp::RdmaWrite { .. } => "wr_rdma_write",
            WrOp::RdmaWriteWithImm { .. } => "wr_rdma_write_imm",
            WrOp::RdmaRead { .. } => "wr_rdma_read",
            WrOp::AtomicCmpAndSwp { .. } => "wr_atomic_cmp_swp",
            WrOp::AtomicFetchAndAdd { .. } => "wr_atomic_fetch_add",
            WrOp::BindMw { .. } => "wr_bind_mw",
            WrOp::LocalInv { .. } => "wr_local_inv",
            WrOp::AtomicWrite { .. } => "wr_atomic_write",
        };
        self.op(call, wr_id, flags, op)
    }

    /// `ibv_wr_send`.
    #[doc(alias = "ibv_wr_send")]
    pub fn send(&mut self, wr_id: u64, flags: SendFlags) -> &mut Self {
        self.op("wr_send", wr_id, flags, WrOp::Send)
    }

    /// `ibv_wr_send_imm` (`imm_data` host order).
    #[doc(alias = "ibv_wr_send_imm")]
    pub fn send_imm(&mut self, wr_id: u64, flags: SendFlags, imm_data: u32) -> &mut Self {
        self.op("wr_send_imm", wr_id, flags, WrOp::SendWithImm { imm_data })
    }

    /// `ibv_wr_send_inv`.
    #[doc(alias = "ibv_wr_send_inv")]
    pub fn send_inv(&mut self, wr_id: u64, flags: SendFlags, invalidate_rkey: u32) -> &mut Self {
        self.op(
            "wr_send_inv",
            wr_id,
            flags,
            WrOp::SendWithInv { invalidate_rkey },
        )
    }

    /// `ibv_wr_rdma_write`.
    #[doc(alias = "ibv_wr_rdma_write")]
    pub fn rdma_write(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
    ) -> &mut Self {
        self.op(
            "wr_rdma_write",
            wr_id,
            flags,
            WrOp::RdmaWrite { remote_addr, rkey },
        )
    }

    /// `ibv_wr_rdma_write_imm`.
    #[doc(alias = "ibv_wr_rdma_write_imm")]
    pub fn rdma_write_imm(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        imm_data: u32,
    ) -> &mut Self {
        self.op(
            "wr_rdma_write_imm",
            wr_id,
            flags,
            WrOp::RdmaWriteWithImm {
                remote_addr,
                rkey,
                imm_data,
            },
        )
    }

    /// `ibv_wr_rdma_read`.
    #[doc(alias = "ibv_wr_rdma_read")]
    pub fn rdma_read(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
    ) -> &mut Self {
        self.op(
            "wr_rdma_read",
            wr_id,
            flags,
            WrOp::RdmaRead { remote_addr, rkey },
        )
    }

    /// `ibv_wr_atomic_cmp_swp`; follow with an 8-byte [`Self::set_sge`].
    #[doc(alias = "ibv_wr_atomic_cmp_swp")]
    pub fn atomic_cmp_swp(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        compare: u64,
        swap: u64,
    ) -> &mut Self {
        self.op(
            "wr_atomic_cmp_swp",
            wr_id,
            flags,
            WrOp::AtomicCmpAndSwp {
                remote_addr,
                rkey,
                compare,
                swap,
            },
        )
    }

    /// `ibv_wr_atomic_fetch_add`; follow with an 8-byte [`Self::set_sge`].
    #[doc(alias = "ibv_wr_atomic_fetch_add")]
    pub fn atomic_fetch_add(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        add: u64,
    ) -> &mut Self {
        self.op(
            "wr_atomic_fetch_add",
            wr_id,
            flags,
            WrOp::AtomicFetchAndAdd {
                remote_addr,
                rkey,
                add,
            },
        )
    }

    /// `ibv_wr_atomic_write`: writes the 8 bytes of `value` to `remote_addr` as one atomic
    /// (RC; rxe on kernels with atomic write, 6.2 and later). No SGE follows: the bytes are
    /// in the work request.
    #[doc(alias = "ibv_wr_atomic_write")]
    pub fn atomic_write(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        value: [u8; 8],
    ) -> &mut Self {
        self.op(
            "wr_atomic_write",
            wr_id,
            flags,
            WrOp::AtomicWrite {
                remote_addr,
                rkey,
                value,
            },
        )
    }

    /// `ibv_wr_set_sge`: one SGE for the last work request.
    #[doc(alias = "ibv_wr_set_sge")]
    pub fn set_sge(&mut self, lkey: u32, addr: u64, length: u32) -> &mut Self {
        self.step(
            "wr_set_sge",
            |ring| dispatch!(QpRing, ring, r => r.wr_set_sge(lkey, addr, length)),
        )
    }

    /// `ibv_wr_set_sge_list`.
    #[doc(alias = "ibv_wr_set_sge_list")]
    pub fn set_sge_list(&mut self, sges: &[Sge]) -> &mut Self {
        self.step(
            "wr_set_sge_list",
            |ring| dispatch!(QpRing, ring, r => r.wr_set_sge_list(sges)),
        )
    }

    /// `ibv_wr_set_inline_data`.
    #[doc(alias = "ibv_wr_set_inline_data")]
    pub fn set_inline_data(&mut self, data: &[u8]) -> &mut Self {
        self.step(
            "wr_set_inline_data",
            |ring| dispatch!(QpRing, ring, r => r.wr_set_inline_data(data)),
        )
    }

    /// `ibv_wr_set_ud_addr` (UD and SRD QPs): the destination of the last work request, an
    /// AH of the QP's PD. On rxe the AH is kept by the QP while the send is queued.
    #[doc(alias = "ibv_wr_set_ud_addr")]
    pub fn set_ud_addr(&mut self, ah: &Ah, remote_qpn: u32, remote_qkey: u32) -> &mut Self {
        self.step(
            "wr_set_ud_addr",
            |ring| dispatch!(QpRing, ring, r => r.wr_set_ud_addr(ah, remote_qpn, remote_qkey)),
        )
    }

    /// Posts the batch (`ibv_wr_complete`): every work request or none. On any error in the
    /// batch nothing is posted and the first error is returned.
    #[doc(alias = "ibv_wr_complete")]
    pub fn complete(mut self) -> Result<()> {
        self.open = false;
        let err = self.err.take();
        let qp = &mut *self.qp;
        if let Some(e) = err {
            dispatch!(QpRing, &mut qp.ring, r => r.wr_abort());
            return Err(e);
        }
        dispatch!(QpRing, &mut qp.ring, r => r.wr_complete(&qp.inner))
    }

    /// How many work requests the batch holds so far (including a refused one, which makes
    /// [`WrBatch::complete`] fail).
    pub fn len(&self) -> usize {
        dispatch!(QpRing, &self.qp.ring, r => r.wr_len())
    }

    /// Whether the batch holds no work request.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets the batch aside without ending it, for a caller whose `ibv_wr_*` calls are
    /// separate calls (the C API): returns the batch's first error, which
    /// [`Qp::wr_resume`] takes back. The provider keeps the batch open meanwhile; nothing is
    /// posted or aborted.
    #[doc(hidden)]
    pub fn suspend(mut self) -> Option<Error> {
        self.open = false;
        self.err.take()
    }

    /// Drops every work request of the batch (`ibv_wr_abort`).
    #[doc(alias = "ibv_wr_abort")]
    pub fn abort(mut self) {
        self.discard();
    }

    fn discard(&mut self) {
        self.open = false;
        dispatch!(QpRing, &mut self.qp.ring, r => r.wr_abort());
    }
}

impl Drop for WrBatch<'_> {
    fn drop(&mut self) {
        if self.open {
            self.discard();
        }
    }
}
