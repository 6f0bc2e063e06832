//! Queue pairs (`ibv_create_qp`, `ibv_create_qp_ex`, `ibv_modify_qp`, `ibv_query_qp`,
//! `ibv_destroy_qp`, `ibv_post_send`, `ibv_post_recv`, the `ibv_wr_*` API,
//! `ibv_attach_mcast`, `ibv_detach_mcast`).
//!
//! A [`Qp`] owns its rings (the provider's half, `QpRing`, reached through `QpOps`) and the
//! kernel QP (`QpInner`, on a `KernelObject`). It holds its PD, its CQs'
//! kernel objects and its SRQ, so none of them can be destroyed under it. Posting takes
//! `&mut self`: one owner, no lock.
//!
//! The module is split by concern: `attr` (the attribute types), `create` (`Pd::create_qp*`),
//! `modify` (modify and query), `mcast`, `post` (the data path entry points) and `batch`
//! (`WrBatch`, the `wr_*` API).

mod attr;
mod batch;
mod create;
mod mcast;
mod modify;
mod post;

pub use attr::{
    QpAttr, QpAttrMask, QpCap, QpDestroyed, QpInitAttr, QpQuery, QpState, QpType, SendOpsFlags,
};
pub use batch::WrBatch;
pub(crate) use create::queried_cap;
pub(crate) use modify::modify_command;
pub(crate) use post::state_error;

use std::sync::Arc;

use uverbs_uapi::cmds::{
    UVERBS_ATTR_DESTROY_QP_HANDLE, UVERBS_ATTR_DESTROY_QP_RESP, UVERBS_METHOD_QP_DESTROY,
    UVERBS_OBJECT_QP,
};
use uverbs_uapi::write::{IbUverbsDestroyQpResp, IB_USER_VERBS_CMD_DESTROY_QP};

use crate::cq::QpCqs;
use crate::error::Errno;
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject, Registration};
use crate::pd::Pd;
use crate::provider::{dispatch, QpOps, QpRing};
use crate::srq::SrqShared;

/// The kernel QP and what keeps its parents alive.
pub(crate) struct QpInner {
    // Destroyed before its parents (declared after it) are released.
    pub(crate) obj: KernelObject,
    pub(crate) pd: Pd,
    pub(crate) _cqs: QpCqs,
    pub(crate) _srq: Option<Arc<SrqShared>>,
    pub(crate) qp_num: u32,
    pub(crate) user_handle: u64,
    /// The QP's entry in the event table: its `qp_context`.
    pub(crate) events: Registration,
}

/// `ibv_destroy_qp` by ioctl (`UVERBS_METHOD_QP_DESTROY`, as rdma-core), answering the async
/// event count.
static DESTROY_QP: Destroy = Destroy {
    name: "qp",
    op: "destroy_qp",
    cmd: DestroyCmd::Ioctl {
        object: UVERBS_OBJECT_QP,
        method: UVERBS_METHOD_QP_DESTROY,
        handle_attr: UVERBS_ATTR_DESTROY_QP_HANDLE,
        resp_attr: Some(UVERBS_ATTR_DESTROY_QP_RESP),
        resp_len: std::mem::size_of::<IbUverbsDestroyQpResp>(),
    },
};

/// `ibv_destroy_qp` by the legacy `write()` command (EFA, as libefa does).
static DESTROY_QP_WRITE: Destroy = Destroy {
    name: "qp",
    op: "destroy_qp",
    cmd: DestroyCmd::WriteWithResp {
        command: IB_USER_VERBS_CMD_DESTROY_QP,
        resp_len: std::mem::size_of::<IbUverbsDestroyQpResp>(),
    },
};

/// The parents a new QP holds (its PD, CQs and SRQ) and the numbers the kernel gave it.
pub(crate) struct QpParts {
    pub(crate) pd: Pd,
    pub(crate) cqs: QpCqs,
    pub(crate) srq: Option<Arc<SrqShared>>,
    pub(crate) handle: u32,
    pub(crate) qp_num: u32,
    pub(crate) user_handle: u64,
    pub(crate) qp_context: u64,
    /// Destroy with the legacy `write()` command (EFA, as libefa does) instead of the ioctl.
    pub(crate) legacy_destroy: bool,
}

impl QpInner {
    /// Takes ownership of the kernel QP just created: from here it is destroyed on drop.
    pub(crate) fn new(p: QpParts) -> Self {
        let ctx = p.pd.context().clone();
        let kind = if p.legacy_destroy {
            &DESTROY_QP_WRITE
        } else {
            &DESTROY_QP
        };
        QpInner {
            obj: KernelObject::new(ctx, p.handle, kind, p.qp_num),
            pd: p.pd,
            _cqs: p.cqs,
            _srq: p.srq,
            qp_num: p.qp_num,
            user_handle: p.user_handle,
            events: Registration::new(p.user_handle, p.qp_context),
        }
    }

    /// How errors name the QP. Error paths only: kept out of line so that the code it
    /// needs stays out of the posting loops that name it on failure.
    #[cold]
    #[inline(never)]
    pub(crate) fn label(&self) -> String {
        self.obj.label()
    }

    /// The kernel handle.
    pub(crate) fn handle(&self) -> u32 {
        self.obj.handle()
    }
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
// In declaration order (`repr(C)`), the rings first: a post reaches the provider's half at the
// QP's own address, which keeps one register free on the inline path.
#[repr(C)]
pub struct Qp {
    // Drop order (see `Drop for Qp`): the kernel QP is destroyed first, then the rings, the
    // AHs queued sends named and the mappings go (field order), then the parents (`inner`).
    pub(crate) ring: QpRing,
    pub(crate) inner: QpInner,
    /// The operations the `wr_*` API may build (empty without it).
    pub(crate) send_ops: SendOpsFlags,
    pub(crate) cap: QpCap,
    pub(crate) qp_type: QpType,
    pub(crate) sq_sig_all: bool,
    /// Created by `create_qp_ex` (or `efadv_create_qp_ex`): the `wr_*` API is open.
    pub(crate) wr_api: bool,
}

impl Drop for Qp {
    fn drop(&mut self) {
        // The kernel QP first (best effort, a failure reported), then what the provider adds,
        // then the rings (fields).
        self.inner.obj.release();
        dispatch!(QpRing, &mut self.ring, r => r.destroyed());
    }
}

impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qp")
            .field("qp", &self.inner.label())
            .field("qp_type", &self.qp_type)
            .field("state", &self.state())
            .field("cap", &self.cap)
            .finish()
    }
}

impl Qp {
    /// Records the QP's state (after a modify or a query): the one place it changes. The
    /// provider keeps it, for its rules of when the QP may post.
    pub(crate) fn set_state(&mut self, state: QpState) {
        dispatch!(QpRing, &mut self.ring, r => r.set_state(state));
    }

    /// The QP number (`ibv_qp.qp_num`).
    pub fn qp_num(&self) -> u32 {
        self.inner.qp_num
    }

    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle()
    }

    /// The value async events for this QP carry.
    pub fn user_handle(&self) -> u64 {
        self.inner.user_handle
    }

    /// The user's value given at creation ([`QpInitAttr::qp_context`]) or last set; the
    /// QP's async events carry it ([`AsyncEvent::context`](crate::AsyncEvent)).
    pub fn qp_context(&self) -> u64 {
        self.inner.events.context()
    }

    /// Replaces the user's value (`ibv_qp.qp_context = ...`); events read from now on carry
    /// the new one.
    #[doc(alias = "ibv_qp.qp_context")]
    pub fn set_qp_context(&mut self, qp_context: u64) {
        self.inner.events.set_context(qp_context);
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
        // The provider keeps it (its rules for posting read it).
        dispatch!(QpRing, &self.ring, r => r.state())
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
        match self.inner.obj.destroy() {
            Ok([events_reported, _]) => {
                // `Drop` adds what the provider's destroy needs.
                drop(self);
                Ok(QpDestroyed { events_reported })
            }
            Err(e) => {
                let e = if e.is(Errno::BUSY) {
                    e.with_reason(
                        "the QP is still attached to a multicast group: detach it and destroy again",
                    )
                } else {
                    e
                };
                Err(DestroyError::new(self, e))
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

    /// Every `Qp` is as large as the larger ring arm: the EFA arm keeps what posting never
    /// reads out of line so that it is no larger than the rxe arm, and a kernel object holds
    /// no label of its own (the micro's heap per QP equals rdma-core's with these sizes).
    #[test]
    fn qp_carries_no_cold_bytes_inline() {
        use crate::provider::{EfaQp, RxeQp};
        use std::mem::size_of;
        assert!(
            size_of::<EfaQp>() <= size_of::<RxeQp>(),
            "EFA arm {} B, rxe arm {} B",
            size_of::<EfaQp>(),
            size_of::<RxeQp>()
        );
        assert!(size_of::<crate::object::KernelObject>() <= 32);
        assert!(size_of::<Qp>() <= 416, "Qp is {} B", size_of::<Qp>());
    }
}
