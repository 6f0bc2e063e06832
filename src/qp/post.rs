//! The QP's data path entry points (`ibv_post_send`, `ibv_post_recv`, `ibv_wr_start`):
//! the state checks and the `match` on the provider's ring. No lock, no allocation, no
//! indirect call.

use std::sync::Arc;

use super::{Qp, QpInner, QpRing, QpState, WrBatch};
use crate::ah::Ah;
use crate::error::{Errno, Error, Result};
use crate::rxe::ring_error;
use crate::wr::{PostError, RecvWr, SendWr};

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
    /// A datagram send (UD, SRD) names its destination with [`SendWr::ud`]: an [`Ah`] of this
    /// QP's PD, the remote QPN and Q_Key. On rxe the QP keeps a clone of the AH until the
    /// queue slot is reused, so the AH can never be destroyed while the kernel may read it.
    /// On EFA every send must be signaled (`IBV_SEND_SIGNALED` or `sq_sig_all`).
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        match &mut self.ring {
            QpRing::Efa(r) => {
                // One plain WR (a signaled SEND of one SGE on an RTS QP) is posted here;
                // everything else, and whatever that path declines (it then has done
                // nothing), goes out of line: this path keeps no callee-saved register, and
                // the other is a tail call.
                if let [wr] = wrs {
                    if r.post_plain_one(wr) {
                        return Ok(());
                    }
                    // The same list: its length a constant, not a register kept.
                    return r.post_send_general(std::slice::from_ref(wr), &self.inner);
                }
                r.post_send_general(wrs, &self.inner)
            }
            QpRing::Rxe(r) => {
                if matches!(self.state, QpState::Reset | QpState::Init | QpState::Rtr) {
                    return self.post_send_not_ready();
                }
                r.post_send(wrs, &self.inner)
            }
        }
    }

    /// The refusal of a send on an rxe QP before RTS (out of line: no register of the
    /// posting path is kept for it).
    #[cold]
    #[inline(never)]
    fn post_send_not_ready(&self) -> Result<(), PostError> {
        Err(PostError {
            index: 0,
            error: state_error(
                &self.inner,
                self.state,
                "post_send",
                "sends need RTS (or SQD/SQE/ERR)",
            ),
        })
    }

    /// Posts a list of receive work requests (`ibv_post_recv`): written into the RQ and
    /// published with one store (rxe) or doorbell (EFA); no syscall. Failure names the first
    /// WR not posted (those before it were posted).
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let op = "post_recv";
        match &mut self.ring {
            QpRing::Efa(r) => r.post_recv(wrs, self.state, &self.inner),
            QpRing::Rxe(r) => {
                if self.state == QpState::Reset {
                    return Err(PostError {
                        index: 0,
                        error: state_error(
                            &self.inner,
                            self.state,
                            op,
                            "receives need INIT or later",
                        ),
                    });
                }
                r.post_recv(&self.inner, wrs)
            }
        }
    }

    /// Opens a batch of `wr_*` calls (`ibv_wr_start`); only on a QP made by
    /// [`Pd::create_qp_ex`](crate::Pd::create_qp_ex) or [`Pd::efadv_create_qp_ex`](crate::Pd::efadv_create_qp_ex). Nothing reaches the queue until
    /// [`WrBatch::complete`]; dropping the batch without completing it aborts it
    /// (`ibv_wr_abort`).
    #[doc(alias = "ibv_wr_start")]
    pub fn wr_start(&mut self) -> Result<WrBatch<'_>> {
        let op = "wr_start";
        if self.send_ops.is_none() {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::OPNOTSUPP,
                "the wr_* API needs a QP created with create_qp_ex (or efadv_create_qp_ex)",
            ));
        }
        let start = match &mut self.ring {
            QpRing::Rxe(r) => {
                if matches!(self.state, QpState::Reset | QpState::Init | QpState::Rtr) {
                    return Err(state_error(
                        &self.inner,
                        self.state,
                        op,
                        "sends need RTS (or SQD/SQE/ERR)",
                    ));
                }
                r.sq.wr_start()
                    .map_err(|e| ring_error(&self.inner, op, e))?;
                r.sq.producer_index()
            }
            QpRing::Efa(_) => {
                if self.state != QpState::Rts {
                    return Err(state_error(&self.inner, self.state, op, "sends need RTS"));
                }
                0
            }
        };
        Ok(WrBatch {
            qp: self,
            start,
            n: 0,
            err: None,
            open: true,
        })
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

/// Checks that `d`'s AH belongs to the QP's PD (and so to its device).
#[inline]
pub(crate) fn check_ah_pd(inner: &QpInner, op: &'static str, ah: &Ah) -> Result<()> {
    if !Arc::ptr_eq(&ah.inner.pd.inner, &inner.pd.inner) {
        return Err(Error::invalid(
            op,
            inner.label(),
            Errno::INVAL,
            "the AH belongs to another PD",
        ));
    }
    Ok(())
}
