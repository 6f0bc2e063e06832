//! Queue pairs (`ibv_create_qp`, `ibv_create_qp_ex`, `ibv_modify_qp`, `ibv_query_qp`,
//! `ibv_destroy_qp`, `ibv_post_send`, `ibv_post_recv`, the `ibv_wr_*` API,
//! `ibv_attach_mcast`, `ibv_detach_mcast`).
//!
//! A [`Qp`] owns its rings (the SQ and, without an SRQ, the RQ, mmapped from the uverbs fd) and
//! the kernel QP. It holds its PD, its CQs' kernel objects and its SRQ, so none of them can be
//! destroyed under it. Posting takes `&mut self`: one owner, no lock. The rxe send doorbell is
//! a `write()` of `IB_USER_VERBS_CMD_POST_SEND` with zero work requests, prebuilt at
//! creation (`crate::rxe`) (request bytes and response buffer) so a post allocates nothing and calls nothing
//! through a trait object.
//!
//! Unsafe code here: building the ring views over this QP's mappings, and borrowing the uverbs
//!
//! The module is split by concern: [`attr`] (the attribute types), `create` (`Pd::create_qp*`),
//! `modify` (modify and query), `mcast`, `post` (the data path entry points) and `batch`
//! (`WrBatch`, the `wr_*` API). The rxe rings live in `crate::rxe`, EFA's in `crate::efa`.

mod attr;
mod batch;
mod create;
mod mcast;
mod modify;
mod post;

use crate::rxe::RxeRing;
pub use attr::{
    QpAttr, QpAttrMask, QpCap, QpDestroyed, QpInitAttr, QpQuery, QpState, QpType, SendOpsFlags,
};
pub(crate) use batch::send_ops_flag;
pub use batch::WrBatch;
pub(crate) use post::check_ah_pd;

use std::sync::Arc;

use uverbs_uapi::cmds::{
    UVERBS_ATTR_DESTROY_QP_HANDLE, UVERBS_ATTR_DESTROY_QP_RESP, UVERBS_METHOD_QP_DESTROY,
    UVERBS_OBJECT_QP,
};
use uverbs_uapi::write::{IbUverbsDestroyQp, IbUverbsDestroyQpResp, IB_USER_VERBS_CMD_DESTROY_QP};

use crate::channel::IoctlCmd;
use crate::context::legacy_cmd;
use crate::cq::QpCqs;
use crate::error::{Errno, Error};
use crate::object::DestroyError;
use crate::pd::Pd;
use crate::srq::SrqShared;

/// The kernel QP and what keeps its parents alive.
pub(crate) struct QpInner {
    pub(crate) pd: Pd,
    pub(crate) _cqs: QpCqs,
    pub(crate) _srq: Option<Arc<SrqShared>>,
    pub(crate) handle: u32,
    pub(crate) qp_num: u32,
    pub(crate) user_handle: u64,
    /// Destroy with the legacy `write()` command (EFA, as libefa does) instead of the ioctl.
    pub(crate) legacy_destroy: bool,
    pub(crate) destroyed: bool,
}

impl QpInner {
    pub(crate) fn label(&self) -> String {
        format!("qp {} on {}", self.qp_num, self.pd.context().label())
    }

    pub(crate) fn destroy_cmd(&self) -> std::result::Result<IbUverbsDestroyQpResp, Errno> {
        if self.legacy_destroy {
            let mut cmd = legacy_cmd(
                IB_USER_VERBS_CMD_DESTROY_QP,
                &IbUverbsDestroyQp {
                    qp_handle: self.handle,
                    ..Default::default()
                },
                &[],
                std::mem::size_of::<IbUverbsDestroyQpResp>(),
                0,
            );
            self.pd.context().inner.channel.write(&mut cmd)?;
            return Ok(cmd.response_as::<IbUverbsDestroyQpResp>());
        }
        let mut resp = IbUverbsDestroyQpResp::default();
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY);
        cmd.idr(UVERBS_ATTR_DESTROY_QP_HANDLE, self.handle)
            .ptr_out(UVERBS_ATTR_DESTROY_QP_RESP, &mut resp);
        self.pd.context().inner.channel.ioctl(&mut cmd)?;
        Ok(resp)
    }
}

impl Drop for QpInner {
    fn drop(&mut self) {
        if self.destroyed {
            return;
        }
        self.destroyed = true;
        if let Err(e) = self.destroy_cmd() {
            crate::report_drop_error("destroy_qp", &self.label(), e);
        }
    }
}

/// The provider's rings, dispatched by `match` (no indirect calls on post).
pub(crate) enum QpRing {
    Rxe(RxeRing),
    /// EFA: LLQ SQ, RQ, the wr_id pools shared with the CQs (see `crate::efa`).
    Efa(crate::efa::EfaQpRing),
}

/// A queue pair (`struct ibv_qp`, `struct ibv_qp_ex`), on any provider.
///
/// `Send` (move it to the thread that posts) and not `Sync`: posting takes `&mut self`.
///
/// Created in a PD on one or two CQs, moved through its states with [`Qp::modify`]
/// (RESET → INIT → RTR → RTS; an RC QP also needs the peer's address and QP number at RTR),
/// then [`post_recv`](Qp::post_recv) and [`post_send`](Qp::post_send):
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// use uverbs::{QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType};
///
/// let pd = ctx.alloc_pd()?;
/// let cq = ctx.create_cq(64, None, 0)?;
/// let cap = QpCap { max_send_wr: 32, max_recv_wr: 32, max_send_sge: 1, max_recv_sge: 1,
///                   max_inline_data: 0 };
/// let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq, &cq, cap))?;
/// // EFA's SRD: pd.efadv_create_qp_ex(&QpInitAttr::new(QpType::Srd, ..), &Default::default())
/// let init = QpAttr { qp_state: QpState::Init, qkey: 0x1234, port_num: 1, ..Default::default() };
/// qp.modify(&init, QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::PKEY_INDEX
///                  | QpAttrMask::PORT)?;
/// qp.modify(&QpAttr { qp_state: QpState::Rtr, ..Default::default() }, QpAttrMask::STATE)?;
/// qp.modify(&QpAttr { qp_state: QpState::Rts, ..Default::default() },
///           QpAttrMask::STATE | QpAttrMask::SQ_PSN)?;
/// assert_eq!(qp.state(), QpState::Rts);
/// println!("QP {} ready, {} send WRs", qp.qp_num(), qp.cap().max_send_wr);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "ibv_qp")]
#[doc(alias = "ibv_qp_ex")]
pub struct Qp {
    // Drop order (see `Drop for Qp`): the kernel QP is destroyed first, then the rings, the
    // AHs queued sends named and the mappings go (field order), then the parents (`inner`).
    pub(crate) ring: QpRing,
    pub(crate) inner: QpInner,
    pub(crate) qp_type: QpType,
    pub(crate) cap: QpCap,
    pub(crate) state: QpState,
    pub(crate) sq_sig_all: bool,
    pub(crate) send_ops: Option<SendOpsFlags>,
}

impl Drop for Qp {
    fn drop(&mut self) {
        if !self.inner.destroyed {
            self.inner.destroyed = true;
            if let Err(e) = self.inner.destroy_cmd() {
                crate::report_drop_error("destroy_qp", &self.inner.label(), e);
            }
        }
        if let QpRing::Efa(r) = &self.ring {
            r.unregister();
        }
    }
}

impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qp")
            .field("qp", &self.inner.label())
            .field("qp_type", &self.qp_type)
            .field("state", &self.state)
            .field("cap", &self.cap)
            .finish()
    }
}

impl Qp {
    /// The QP number (`ibv_qp.qp_num`).
    pub fn qp_num(&self) -> u32 {
        self.inner.qp_num
    }

    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The value async events for this QP carry.
    pub fn user_handle(&self) -> u64 {
        self.inner.user_handle
    }

    /// The transport type.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The queue sizes the kernel made (at least what was asked for).
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// The state after the last successful modify or query (the QP can move to an error state
    /// on its own; [`Qp::query`] asks the kernel).
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Whether every send is signaled.
    pub fn sq_sig_all(&self) -> bool {
        self.sq_sig_all
    }

    /// The PD.
    pub fn pd(&self) -> &Pd {
        &self.inner.pd
    }

    pub(crate) fn label(&self) -> String {
        self.inner.label()
    }

    /// Destroys the QP now (`ibv_destroy_qp`) and returns how many async events the kernel
    /// delivered for it. Its CQs, SRQ and PD are released (destroyed if this was their last
    /// user); completions already in the CQs stay there.
    ///
    /// If the kernel refuses (`EBUSY` while the QP is attached to a multicast group), the QP
    /// comes back in the error, unchanged: detach it ([`Qp::detach_mcast`]) and destroy it
    /// again, as ibv_destroy_qp(3) says.
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy(mut self) -> std::result::Result<QpDestroyed, DestroyError<Qp>> {
        match self.inner.destroy_cmd() {
            Ok(resp) => {
                self.inner.destroyed = true;
                // `Drop` unregisters an EFA QP from its CQs' tables.
                drop(self);
                Ok(QpDestroyed {
                    events_reported: resp.events_reported,
                })
            }
            Err(e) => {
                let error =
                    Error::os("destroy_qp", self.label(), e).with_reason(if e == Errno::BUSY {
                        "the QP is still attached to a multicast group: detach it and destroy again"
                    } else {
                        ""
                    });
                Err(DestroyError::new(self, error))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}

    #[test]
    fn qp_is_send() {
        assert_send::<Qp>();
    }
}
