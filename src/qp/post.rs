//! The QP's data path entry points (`ibv_post_send`, `ibv_post_recv`, `ibv_wr_start`): one
//! dispatch to the provider's half, which applies its rules for the QP's state. No lock, no
//! allocation, no indirect call.

use super::{Qp, QpInner, QpState, WrBatch};
use crate::error::{Errno, Error, Result};
use crate::mr::Sge;
use crate::provider::{dispatch, Fast, QpOps};
use crate::wr::{PostError, RecvWr, SendFlags, SendWr, WrOp};

impl Qp {
    /// Posts a list of send work requests (`ibv_post_send`).
    ///
    /// Every work request is checked (opcode for the QP type and provider, SGE count, inline
    /// size, atomic length and alignment, UD destination, queue space) and written into the
    /// send queue; then the device is told with one doorbell per batch (rxe: one `write()`;
    /// EFA: an MMIO store every `max_tx_batch` WQEs and at the end). No lock, no allocation.
    ///
    /// On failure the error names the index of the first work request that was not posted
    /// (`bad_wr`): the ones before it *were* posted and the doorbell rung for them; it and
    /// all after it were not. If the rxe doorbell write itself fails, `index` is the number
    /// of work requests that were queued (they run on the next successful post).
    ///
    /// A datagram send (UD, SRD) names its destination with [`SendWr::ud`]: an [`Ah`](crate::Ah) of this
    /// QP's PD, the remote QPN and Q_Key. On rxe the QP keeps a clone of the AH until the
    /// queue slot is reused, so the AH can never be destroyed while the kernel may read it.
    /// On EFA every send must be signaled (`IBV_SEND_SIGNALED` or `sq_sig_all`).
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        // The provider's inline path (the latency case) names nothing; the rest, out of line,
        // names the QP in an error. Kept apart, the inline path holds no pointer to the QP's
        // name, so it keeps no register for it.
        dispatch!(QpRing, &mut self.ring, r => match r.post_send_fast(wrs) {
            Fast::Posted => Ok(()),
            Fast::Direct => r.post_send(wrs, &self.inner),
            Fast::Declined => self.post_send_slow(wrs),
        })
    }

    /// [`Qp::post_send`] of what the provider's inline path does not take.
    #[inline(never)]
    fn post_send_slow(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        dispatch!(QpRing, &mut self.ring, r => r.post_send(wrs, &self.inner))
    }

    /// Writes one work request, given as its parts (SGEs, no destination), into the send
    /// queue without telling the device, when the provider's fast path takes it (rxe, on a
    /// QP that may send): `true` if written, `false` having done nothing visible (post it
    /// with [`Qp::post_send`], after [`Qp::ring_staged`] for those staged before). For uverbs'
    /// libibverbs, which reads the parts from C's `ibv_send_wr` in place. What is staged
    /// reaches the device at the next `ring_staged` or `post_send`; until then it is queued.
    #[doc(hidden)]
    #[inline(always)]
    pub fn stage_send(&mut self, wr_id: u64, op: &WrOp, flags: SendFlags, sges: &[Sge]) -> bool {
        dispatch!(QpRing, &mut self.ring, r => r.stage_send(wr_id, op, flags, sges))
    }

    /// Tells the device of the `staged` work requests [`Qp::stage_send`] wrote (one doorbell);
    /// a failed doorbell names `staged` as the index (all are queued and run at the next
    /// successful post).
    #[doc(hidden)]
    #[inline(always)]
    pub fn ring_staged(&mut self, staged: usize) -> Result<(), PostError> {
        dispatch!(QpRing, &mut self.ring, r => r.ring_staged(&self.inner, staged))
    }

    /// Posts a list of receive work requests (`ibv_post_recv`): written into the RQ and
    /// published with one store (rxe) or doorbell (EFA); no syscall. Failure names the first
    /// WR not posted (those before it were posted).
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        dispatch!(QpRing, &mut self.ring, r => r.post_recv(wrs, &self.inner))
    }

    /// Opens a batch of `wr_*` calls (`ibv_wr_start`); only on a QP made by
    /// [`Pd::create_qp_ex`](crate::Pd::create_qp_ex) or [`Pd::efadv_create_qp_ex`](crate::Pd::efadv_create_qp_ex). Nothing reaches the queue until
    /// [`WrBatch::complete`]; dropping the batch without completing it aborts it
    /// (`ibv_wr_abort`).
    #[doc(alias = "ibv_wr_start")]
    pub fn wr_start(&mut self) -> Result<WrBatch<'_>> {
        let op = "wr_start";
        if !self.wr_api {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::OPNOTSUPP,
                "the wr_* API needs a QP created with create_qp_ex and send_ops_flags",
            ));
        }
        dispatch!(QpRing, &mut self.ring, r => r.wr_start(&self.inner))?;
        Ok(WrBatch {
            qp: self,
            err: None,
            open: true,
        })
    }
}

impl Qp {
    /// Takes up a batch set aside with [`WrBatch::suspend`] (with the error it returned), for
    /// a caller whose `ibv_wr_*` calls are separate calls (the C API). Without an open batch
    /// (no [`Qp::wr_start`] before) the provider refuses every step and `complete`.
    #[doc(hidden)]
    pub fn wr_resume(&mut self, err: Option<Error>) -> WrBatch<'_> {
        WrBatch {
            qp: self,
            err,
            open: true,
        }
    }
}

#[cold]
pub(crate) fn state_error(inner: &QpInner, state: QpState, op: &'static str, need: &str) -> Error {
    Error::invalid(
        op,
        inner.label(),
        Errno::INVAL,
        format!("the QP is in state {state:?}; {need}"),
    )
}
