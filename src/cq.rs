//! Completion queues (`ibv_create_cq`, `ibv_create_cq_ex`, `ibv_poll_cq`, `ibv_req_notify_cq`,
//! `ibv_resize_cq`, `ibv_destroy_cq`).
//!
//! A CQ is two things with different owners: the kernel object ([`CqShared`], shared by the
//! [`Cq`] and by every QP that completes into it, so the kernel never sees it destroyed under
//! a QP) and the ring ([`Cq`] alone, which polls with `&mut self` and no locks).

use std::sync::Arc;

use uverbs_uapi::cmds::{
    UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR,
    UVERBS_ATTR_CREATE_CQ_CQE, UVERBS_ATTR_CREATE_CQ_EVENT_FD, UVERBS_ATTR_CREATE_CQ_FLAGS,
    UVERBS_ATTR_CREATE_CQ_HANDLE, UVERBS_ATTR_CREATE_CQ_RESP_CQE,
    UVERBS_ATTR_CREATE_CQ_USER_HANDLE, UVERBS_ATTR_DESTROY_CQ_HANDLE, UVERBS_ATTR_DESTROY_CQ_RESP,
    UVERBS_METHOD_CQ_CREATE, UVERBS_METHOD_CQ_DESTROY, UVERBS_OBJECT_CQ,
};
use uverbs_uapi::rxe::{RxeCreateCqResp, RxeResizeCqResp};
use uverbs_uapi::write::{
    IbUverbsDestroyCqResp, IbUverbsReqNotifyCq, IbUverbsResizeCq, IbUverbsResizeCqResp,
    IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, IB_USER_VERBS_CMD_RESIZE_CQ,
};
use zerocopy::IntoBytes;

use crate::channel::{IoctlCmd, Mapping};
use crate::context::{legacy_cmd, Context, ProviderInfo};
use crate::error::{Errno, Error, Result};
use crate::event::{next_user_handle, CompChannel};
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject, Registration};
use crate::wc::Wc;

/// The kernel CQ object, shared by the [`Cq`] and the QPs that complete into it.
pub(crate) struct CqShared {
    obj: KernelObject,
    /// The context (the same as `obj`'s; QPs compare it when they are created).
    pub(crate) ctx: Context,
    pub(crate) user_handle: u64,
    pub(crate) channel: Option<CompChannel>,
    /// The CQ's entry in the event table: its `cq_context`.
    events: Registration,
}

/// `ibv_destroy_cq`: the `UVERBS_METHOD_CQ_DESTROY` ioctl, answering the two event counts.
static DESTROY_CQ: Destroy = Destroy {
    name: "cq",
    op: "destroy_cq",
    cmd: DestroyCmd::Ioctl {
        object: UVERBS_OBJECT_CQ,
        method: UVERBS_METHOD_CQ_DESTROY,
        handle_attr: UVERBS_ATTR_DESTROY_CQ_HANDLE,
        resp_attr: Some(UVERBS_ATTR_DESTROY_CQ_RESP),
        resp_len: std::mem::size_of::<IbUverbsDestroyCqResp>(),
    },
};

impl CqShared {
    pub(crate) fn label(&self) -> String {
        self.obj.label()
    }

    pub(crate) fn handle(&self) -> u32 {
        self.obj.handle()
    }
}

/// The CQs a QP completes into, each held once: a QP whose send and receive CQ are the same
/// CQ holds it once, so [`Cq::destroy`] counts QPs, not references.
pub(crate) struct QpCqs {
    _send: Option<Arc<CqShared>>,
    _recv: Option<Arc<CqShared>>,
}

impl QpCqs {
    pub(crate) fn new(send: Option<&Cq>, recv: Option<&Cq>) -> Self {
        let same = matches!((send, recv), (Some(s), Some(r)) if Arc::ptr_eq(&s.shared, &r.shared));
        QpCqs {
            _send: send.map(|c| c.shared.clone()),
            _recv: recv.filter(|_| !same).map(|c| c.shared.clone()),
        }
    }
}

/// The provider's ring, dispatched by `match` (no indirect calls on poll).
pub(crate) enum CqRing {
    Rxe {
        cq: uverbs_rxe::CompletionQueue,
        // Keeps the ring mapped for as long as `cq` points into it; dropped after it.
        _map: Mapping,
    },
    /// EFA: sub-CQs, the QP table for wr_id hand-off, and the mappings (see `crate::efa`).
    Efa(Box<crate::efa::EfaCqRing>),
}

/// Options for [`Context::create_cq_ex`] (`struct ibv_cq_init_attr_ex`).
#[doc(alias = "ibv_cq_init_attr_ex")]
#[derive(Debug, Clone, Default)]
pub struct CqInitAttr<'a> {
    /// Minimum number of entries.
    pub cqe: u32,
    /// Completion channel for notifications.
    pub channel: Option<&'a CompChannel>,
    /// Completion vector (`0..num_comp_vectors`).
    pub comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*` creation flags.
    pub flags: u32,
    /// The user's value for this CQ (`cq_context` of `ibv_create_cq`; a number, not a
    /// pointer): read back with [`Cq::cq_context`] and returned with the CQ's completion
    /// events ([`CqEvent::cq_context`](crate::CqEvent)) and async events
    /// ([`AsyncEvent::context`](crate::AsyncEvent)).
    pub cq_context: u64,
}

/// What the kernel reported when a CQ was destroyed (`struct ib_uverbs_destroy_cq_resp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqDestroyed {
    /// Completion events the kernel delivered for this CQ.
    pub comp_events_reported: u32,
    /// Async events the kernel delivered for this CQ.
    pub async_events_reported: u32,
}

/// A completion queue (`struct ibv_cq`): the ring and the right to poll it.
///
/// Created with [`Context::create_cq`] on any provider ([`Context::efadv_create_cq`] for EFA
/// extras); one or more QPs complete into it; [`Cq::poll`] reads the completions (no
/// syscall), and [`Cq::req_notify`] asks for an event on the CQ's [`CompChannel`] for the
/// next one:
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// use uverbs::{Wc, WcStatus};
///
/// let mut cq = ctx.create_cq(256, None, 0)?; // ibv_create_cq: 256 entries, no channel
/// assert!(cq.cqe() >= 256);
/// // ... create QPs on it, post work requests ...
/// let mut wcs = [Wc::default(); 16];
/// let n = cq.poll(&mut wcs)?;
/// for wc in &wcs[..n] {
///     if wc.status != WcStatus::SUCCESS {
///         eprintln!("wr {} failed: {}", wc.wr_id, wc.status);
///     }
/// }
/// assert_eq!(n, 0); // nothing was posted
/// cq.req_notify(false)?;  // an event for the next completion
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_cq")]
#[doc(alias = "ibv_cq_ex")]
pub struct Cq {
    pub(crate) shared: Arc<CqShared>,
    pub(crate) ring: CqRing,
    cqe: u32,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cq({}, cqe {})", self.shared.label(), self.cqe)
    }
}

impl Context {
    /// Creates a CQ with at least `cqe` entries (`ibv_create_cq`).
    #[doc(alias = "ibv_create_cq")]
    pub fn create_cq(
        &self,
        cqe: u32,
        channel: Option<&CompChannel>,
        comp_vector: u32,
    ) -> Result<Cq> {
        self.create_cq_ex(&CqInitAttr {
            cqe,
            channel,
            comp_vector,
            ..CqInitAttr::default()
        })
    }

    /// Creates a CQ (`ibv_create_cq_ex`) through the `UVERBS_METHOD_CQ_CREATE` ioctl.
    #[doc(alias = "ibv_create_cq_ex")]
    pub fn create_cq_ex(&self, attr: &CqInitAttr<'_>) -> Result<Cq> {
        let op = "create_cq";
        if attr.cqe == 0 {
            return Err(Error::invalid(
                op,
                self.label().to_string(),
                Errno::INVAL,
                "cqe is 0; a CQ needs at least one entry",
            ));
        }
        if let Some(ch) = attr.channel {
            if !ch.same_context(self) {
                return Err(Error::invalid(
                    op,
                    self.label().to_string(),
                    Errno::INVAL,
                    "the completion channel belongs to another device context",
                ));
            }
        }
        match self.provider() {
            ProviderInfo::Rxe => self.create_rxe_cq(attr),
            // libefa's efa_create_cq: efadv's create with no EFA attributes.
            ProviderInfo::Efa(_) => {
                self.efadv_create_cq(attr, &crate::efa::EfaCqInitAttr::default())
            }
        }
    }

    /// Issues `UVERBS_METHOD_CQ_CREATE` with the given driver data and returns the kernel
    /// object (destroyed again on drop if a later step fails) and the actual cqe count.
    pub(crate) fn create_cq_object(
        &self,
        attr: &CqInitAttr<'_>,
        driver_in: &[u8],
        driver_out: &mut [u8],
    ) -> Result<(Arc<CqShared>, u32)> {
        self.create_cq_object_with(attr, driver_in, driver_out, |_| {})
    }

    /// [`Context::create_cq_object`] with extra attributes added by `extra` (EFA's external
    /// CQ memory travels in `UVERBS_ATTR_CREATE_CQ_BUFFER_*`).
    pub(crate) fn create_cq_object_with(
        &self,
        attr: &CqInitAttr<'_>,
        driver_in: &[u8],
        driver_out: &mut [u8],
        extra: impl FnOnce(&mut IoctlCmd<'_>),
    ) -> Result<(Arc<CqShared>, u32)> {
        let op = "create_cq";
        let user_handle = next_user_handle();
        let mut resp_cqe = 0u32;
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
        cmd.idr_new(UVERBS_ATTR_CREATE_CQ_HANDLE)
            .ptr_out(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &mut resp_cqe)
            .u32_in(UVERBS_ATTR_CREATE_CQ_CQE, attr.cqe)
            .u64_in(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, user_handle);
        if let Some(ch) = attr.channel {
            cmd.fd(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, ch.fd());
        }
        cmd.u32_in(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, attr.comp_vector)
            .fd(UVERBS_ATTR_CREATE_CQ_EVENT_FD, self.async_fd())
            .optional();
        if attr.flags != 0 {
            cmd.u32_in(UVERBS_ATTR_CREATE_CQ_FLAGS, attr.flags);
        }
        extra(&mut cmd);
        cmd.driver_in(driver_in).driver_out(driver_out);
        let r = self.ioctl_cmd(op, &|| self.label().to_string(), &mut cmd);
        let handle = cmd.out_data(UVERBS_ATTR_CREATE_CQ_HANDLE).unwrap_or(0) as u32;
        r.map_err(|e| self.explain_cq_error(e, attr))?;
        Ok((
            Arc::new(CqShared {
                obj: KernelObject::new(self.clone(), handle, &DESTROY_CQ, handle),
                ctx: self.clone(),
                user_handle,
                channel: attr.channel.cloned(),
                events: Registration::new(user_handle, attr.cq_context),
            }),
            resp_cqe,
        ))
    }

    fn explain_cq_error(&self, e: Error, attr: &CqInitAttr<'_>) -> Error {
        if e.is(Errno::INVAL) {
            if attr.comp_vector >= self.num_comp_vectors() {
                return e.with_reason(format!(
                    "comp_vector {} is out of range (the device has {})",
                    attr.comp_vector,
                    self.num_comp_vectors()
                ));
            }
            return e.with_reason(format!(
                "cqe {} rejected (more than the device's max_cqe?)",
                attr.cqe
            ));
        }
        e
    }

    fn create_rxe_cq(&self, attr: &CqInitAttr<'_>) -> Result<Cq> {
        let mut resp = RxeCreateCqResp::default();
        let (shared, cqe) = self.create_cq_object(attr, &[], resp.as_mut_bytes())?;
        let ring = crate::rxe::cq_ring(
            self,
            &shared,
            resp.mi.offset,
            u64::from(resp.mi.size),
            "create_cq",
        )?;
        Ok(Cq { shared, ring, cqe })
    }
}

impl Cq {
    /// Polls up to `wcs.len()` completions into `wcs` (`ibv_poll_cq`); returns how many.
    ///
    /// No lock, no allocation, no syscall. An error means the ring itself is corrupt (an index
    /// the kernel could not have written); completions are never dropped silently.
    #[doc(alias = "ibv_poll_cq")]
    #[inline(always)]
    pub fn poll(&mut self, wcs: &mut [Wc]) -> Result<usize> {
        match &mut self.ring {
            // One load of the kernel's index (none when enough are known ready) inline in the
            // caller's loop; an empty poll ends here.
            CqRing::Rxe { cq, .. } => match cq.refresh(wcs.len()) {
                Ok(0) => Ok(0),
                // One to take (one asked for, or one ready): inline, no call.
                Ok(1) => Ok(match wcs.first_mut() {
                    Some(wc) => crate::rxe::take_one(cq, wc),
                    None => 0,
                }),
                Ok(_) => Ok(crate::rxe::take_cqes(cq, wcs)),
                Err(e) => Err(crate::rxe::cq_ring_error(&self.shared, e)),
            },
            // One completion asked for: a path of its own (most of such a call is per-call
            // cost, which the general walk's set-up would dominate).
            CqRing::Efa(r) => match wcs {
                [one] => poll_efa_one(&self.shared, r, one),
                _ => poll_efa(&self.shared, r, wcs),
            },
        }
    }

    /// Wraps an EFA ring made by `efadv_create_cq`.
    pub(crate) fn from_efa(shared: Arc<CqShared>, ring: crate::efa::EfaCqRing, cqe: u32) -> Cq {
        Cq {
            shared,
            ring: CqRing::Efa(Box::new(ring)),
            cqe,
        }
    }

    /// The EFA ring, if this is an EFA CQ.
    pub(crate) fn efa_ring(&self) -> Option<&crate::efa::EfaCqRing> {
        match &self.ring {
            CqRing::Efa(r) => Some(r),
            _ => None,
        }
    }

    /// The kernel object and the EFA ring (split borrows for labels while polling).
    pub(crate) fn efa_parts(&mut self) -> (&CqShared, Option<&mut crate::efa::EfaCqRing>) {
        match &mut self.ring {
            CqRing::Efa(r) => (&self.shared, Some(r)),
            _ => (&self.shared, None),
        }
    }

    /// Polls one completion.
    #[inline]
    pub fn poll_one(&mut self) -> Result<Option<Wc>> {
        let mut wc = [Wc::default()];
        Ok((self.poll(&mut wc)? == 1).then_some(wc[0]))
    }

    /// Requests a completion event on the CQ's channel for the next completion
    /// (`ibv_req_notify_cq`); with `solicited_only`, only for solicited ones.
    ///
    /// As in rdma-core, a CQ created without a completion channel is armed too (the kernel
    /// then has nowhere to deliver the event; nothing waits for it).
    ///
    /// EFA has no solicited events: on an EFA CQ `solicited_only = true` is refused with
    /// `EOPNOTSUPP` and the CQ is left unarmed (libefa's `efa_arm_cq` returns the same); arm
    /// it with `false`. An EFA CQ is armed through its CQ doorbell, not a kernel command, so
    /// one the kernel gave no doorbell cannot be armed either (`EOPNOTSUPP`).
    #[doc(alias = "ibv_req_notify_cq")]
    pub fn req_notify(&mut self, solicited_only: bool) -> Result<()> {
        let op = "req_notify_cq";
        if let CqRing::Efa(r) = &mut self.ring {
            // EFA arms through its CQ doorbell, not a kernel command (`efa_arm_cq`).
            r.req_notify(solicited_only, self.shared.label())?;
        } else {
            let req = IbUverbsReqNotifyCq {
                cq_handle: self.shared.handle(),
                solicited_only: u32::from(solicited_only),
            };
            let mut cmd = legacy_cmd(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &req, &[], 0, 0);
            self.shared
                .ctx
                .write_cmd(op, &|| self.shared.label(), &mut cmd)?;
        }
        if let Some(ch) = &self.shared.channel {
            ch.note_armed();
        }
        Ok(())
    }

    /// Resizes the CQ to at least `cqe` entries (`ibv_resize_cq`). Completions not yet polled
    /// are kept by the kernel.
    #[doc(alias = "ibv_resize_cq")]
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        let op = "resize_cq";
        if cqe == 0 {
            return Err(Error::invalid(
                op,
                self.shared.label(),
                Errno::INVAL,
                "cqe is 0",
            ));
        }
        match &self.ring {
            CqRing::Rxe { .. } => {
                let req = IbUverbsResizeCq {
                    cq_handle: self.shared.handle(),
                    cqe,
                    ..Default::default()
                };
                let mut cmd = legacy_cmd(
                    IB_USER_VERBS_CMD_RESIZE_CQ,
                    &req,
                    &[],
                    std::mem::size_of::<IbUverbsResizeCqResp>(),
                    std::mem::size_of::<RxeResizeCqResp>(),
                );
                self.shared
                    .ctx
                    .write_cmd(op, &|| self.shared.label(), &mut cmd)
                    .map_err(|e| {
                        if e.is(Errno::INVAL) {
                            e.with_reason(format!(
                                "cqe {cqe} rejected: above max_cqe or below the completions now queued"
                            ))
                        } else {
                            e
                        }
                    })?;
                let resp: IbUverbsResizeCqResp = cmd.response_as();
                let drv: RxeResizeCqResp = cmd.driver_response_as();
                // The kernel moved the queue to a new buffer; map it, then drop the old ring.
                self.ring = crate::rxe::cq_ring(
                    &self.shared.ctx,
                    &self.shared,
                    drv.mi.offset,
                    u64::from(drv.mi.size),
                    op,
                )?;
                self.cqe = resp.cqe;
                Ok(())
            }
            CqRing::Efa(_) => Err(Error::invalid(
                op,
                self.shared.label(),
                Errno::OPNOTSUPP,
                "EFA CQs cannot be resized",
            )),
        }
    }

    /// The number of entries the CQ holds (`ibv_cq.cqe`), at least what was asked for.
    pub fn cqe(&self) -> u32 {
        self.cqe
    }

    /// The value the kernel returns in completion events and async events for this CQ.
    pub fn user_handle(&self) -> u64 {
        self.shared.user_handle
    }

    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.shared.handle()
    }

    /// The user's value given at creation ([`CqInitAttr::cq_context`]) or last set.
    pub fn cq_context(&self) -> u64 {
        self.shared.events.context()
    }

    /// Replaces the user's value (`ibv_cq.cq_context = ...`); events read from now on carry
    /// the new one.
    #[doc(alias = "ibv_cq.cq_context")]
    pub fn set_cq_context(&mut self, cq_context: u64) {
        self.shared.events.set_context(cq_context);
    }

    /// The completion channel, if any.
    pub fn channel(&self) -> Option<&CompChannel> {
        self.shared.channel.as_ref()
    }

    #[allow(dead_code)] // used by QPs (rxe and EFA providers)
    pub(crate) fn shared(&self) -> &Arc<CqShared> {
        &self.shared
    }

    /// Destroys the CQ now (`ibv_destroy_cq`) and returns the event counts the kernel reports.
    ///
    /// On failure the CQ comes back in the error ([`DestroyError::into_inner`]), still
    /// usable: while QPs complete into it this fails with `EBUSY` (the kernel would refuse
    /// too); destroy them and call `destroy` again. Dropping the CQ instead leaves the kernel
    /// object to be destroyed with the last of them.
    #[doc(alias = "ibv_destroy_cq")]
    pub fn destroy(mut self) -> Result<CqDestroyed, DestroyError<Cq>> {
        let Some(shared) = Arc::get_mut(&mut self.shared) else {
            let users = Arc::strong_count(&self.shared) - 1;
            let e = Error::invalid(
                "destroy_cq",
                self.shared.label(),
                Errno::BUSY,
                format!(
                    "{users} QP(s) or XRC SRQ(s) still complete into this CQ; destroy them first"
                ),
            );
            return Err(DestroyError::new(self, e));
        };
        // The kernel object goes first, the ring (and any memory the device writes) after.
        match shared.obj.destroy() {
            Ok([comp, async_]) => Ok(CqDestroyed {
                comp_events_reported: comp,
                async_events_reported: async_,
            }),
            Err(e) => Err(DestroyError::new(self, e)),
        }
    }
}

/// The EFA arm of [`Cq::poll`], kept out of line (a direct call, not an indirect one) so the
/// rxe arm stays small enough to inline into the caller's loop.
#[inline(never)]
pub(crate) fn poll_efa(
    shared: &CqShared,
    r: &mut crate::efa::EfaCqRing,
    wcs: &mut [Wc],
) -> Result<usize> {
    r.poll_with(wcs, &|| shared.label(), |w| w.wc)
}

/// [`poll_efa`] of one completion (`wcs.len() == 1`), out of line for the same reason.
#[inline(never)]
pub(crate) fn poll_efa_one(
    shared: &CqShared,
    r: &mut crate::efa::EfaCqRing,
    wc: &mut Wc,
) -> Result<usize> {
    r.poll_one_with(shared, |w| *wc = w.wc)
}
