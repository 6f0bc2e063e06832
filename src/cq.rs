//! Completion queues (`ibv_create_cq`, `ibv_create_cq_ex`, `ibv_poll_cq`, `ibv_req_notify_cq`,
//! `ibv_resize_cq`, `ibv_destroy_cq`).
//!
//! A CQ is two things with different owners: the kernel object ([`CqShared`], shared by the
//! [`Cq`] and by every QP that completes into it, so the kernel never sees it destroyed under
//! a QP) and the ring ([`Cq`] alone, which polls with `&mut self` and no locks). The ring is
//! the provider's (`CqOps`, made by `DeviceOps::create_cq`); this file has the kernel half:
//! the create, notify and resize commands a provider sends, and destroy.

use std::sync::Arc;

use crate::channel::{IoctlCmd, WriteCmd};
use crate::context::{legacy_cmd, Context};
use crate::error::{Errno, Error, Result};
use crate::event::{next_user_handle, CompChannel};
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject, Registration};
use crate::provider::{dispatch, CqOps, CqRing, DeviceOps};
use crate::wc::Wc;
use uverbs_uapi::cmds::{
    UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR,
    UVERBS_ATTR_CREATE_CQ_CQE, UVERBS_ATTR_CREATE_CQ_EVENT_FD, UVERBS_ATTR_CREATE_CQ_FLAGS,
    UVERBS_ATTR_CREATE_CQ_HANDLE, UVERBS_ATTR_CREATE_CQ_RESP_CQE,
    UVERBS_ATTR_CREATE_CQ_USER_HANDLE, UVERBS_ATTR_DESTROY_CQ_HANDLE, UVERBS_ATTR_DESTROY_CQ_RESP,
    UVERBS_METHOD_CQ_CREATE, UVERBS_METHOD_CQ_DESTROY, UVERBS_OBJECT_CQ,
};
use uverbs_uapi::write::{
    IbUverbsDestroyCqResp, IbUverbsReqNotifyCq, IbUverbsResizeCq, IbUverbsResizeCqResp,
    IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, IB_USER_VERBS_CMD_RESIZE_CQ,
};

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
    /// Completion events read for this CQ from its channel so far (wrapping).
    pub(crate) fn comp_events(&self) -> u32 {
        self.events.comp_events()
    }

    pub(crate) fn label(&self) -> String {
        self.obj.label()
    }

    pub(crate) fn handle(&self) -> u32 {
        self.obj.handle()
    }

    /// The kernel's `REQ_NOTIFY_CQ` (for providers that arm through the kernel).
    pub(crate) fn req_notify_command(&self, solicited_only: bool) -> Result<()> {
        let req = IbUverbsReqNotifyCq {
            cq_handle: self.handle(),
            solicited_only: u32::from(solicited_only),
        };
        let mut cmd = legacy_cmd(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &req, &[], 0, 0);
        self.ctx
            .write_cmd("req_notify_cq", &|| self.label(), &mut cmd)
    }

    /// The kernel's `RESIZE_CQ` to at least `cqe` entries, with a driver response of
    /// `driver_resp_len` bytes: the entries the CQ now has, and the command holding the
    /// driver response (where a provider's ring moved).
    pub(crate) fn resize_command(
        &self,
        cqe: u32,
        driver_resp_len: usize,
    ) -> Result<(u32, WriteCmd)> {
        let op = "resize_cq";
        let req = IbUverbsResizeCq {
            cq_handle: self.handle(),
            cqe,
            ..Default::default()
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_RESIZE_CQ,
            &req,
            &[],
            std::mem::size_of::<IbUverbsResizeCqResp>(),
            driver_resp_len,
        );
        self.ctx
            .write_cmd(op, &|| self.label(), &mut cmd)
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
        Ok((resp.cqe, cmd))
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
        dispatch!(ProviderCtx, &self.inner.provider_ctx, p => p.create_cq(self, attr))
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
}

impl Cq {
    /// Polls up to `wcs.len()` completions into `wcs` (`ibv_poll_cq`); returns how many.
    ///
    /// No lock, no allocation, no syscall. An error means the ring itself is corrupt (an index
    /// the kernel could not have written); completions are never dropped silently.
    #[doc(alias = "ibv_poll_cq")]
    #[inline(always)]
    pub fn poll(&mut self, wcs: &mut [Wc]) -> Result<usize> {
        // rxe's poll inline in the caller's loop; EFA's out of line (a direct call).
        dispatch!(CqRing, &mut self.ring, r => r.poll::<false>(&self.shared, wcs))
    }

    /// [`Cq::poll`] for a C caller (uverbs' libibverbs): the same completions, but immediate
    /// data in network byte order (`__be32`, as `struct ibv_wc` has it) instead of host order,
    /// chosen at compile time in the provider's own decode (no second pass, no test per
    /// completion).
    #[doc(hidden)]
    #[inline(always)]
    pub fn poll_net_imm(&mut self, wcs: &mut [Wc]) -> Result<usize> {
        dispatch!(CqRing, &mut self.ring, r => r.poll::<true>(&self.shared, wcs))
    }

    /// [`Cq::poll_net_imm`] of one completion when the provider has it without a load of the
    /// device's index or a call (rxe: one already counted ready): `true` with it in `wc`,
    /// `false` having done nothing (then `poll_net_imm`). No panic, no call: uverbs'
    /// libibverbs takes it before setting up its guarded path.
    #[doc(hidden)]
    #[inline(always)]
    pub fn poll_ready_one_net_imm(&mut self, wc: &mut Wc) -> bool {
        dispatch!(CqRing, &mut self.ring, r => r.poll_ready_one_net_imm(wc))
    }

    /// [`Cq::poll_net_imm`] with the provider's poll of one completion inline in the caller
    /// (on EFA its common case then makes no call; several completions are a call either
    /// way). For uverbs' libibverbs' EFA `poll_cq` entry, itself the one out-of-line copy
    /// every C program calls.
    #[doc(hidden)]
    #[inline(always)]
    pub fn poll_net_imm_inline_one(&mut self, wcs: &mut [Wc]) -> Result<usize> {
        dispatch!(CqRing, &mut self.ring, r => r.poll_net_imm_inline_one(&self.shared, wcs))
    }

    /// The CQ a provider made: the kernel object, the provider's ring, its entries.
    pub(crate) fn assemble(shared: Arc<CqShared>, ring: CqRing, cqe: u32) -> Cq {
        Cq { shared, ring, cqe }
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
        dispatch!(CqRing, &mut self.ring, r => r.req_notify(&self.shared, solicited_only))?;
        if let Some(ch) = &self.shared.channel {
            ch.note_armed();
        }
        Ok(())
    }

    /// Resizes the CQ to at least `cqe` entries (`ibv_resize_cq`). Completions not yet polled
    /// are kept by the kernel. Refused (`EOPNOTSUPP`) by providers whose CQs cannot be resized
    /// (EFA).
    #[doc(alias = "ibv_resize_cq")]
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        if cqe == 0 {
            return Err(Error::invalid(
                "resize_cq",
                self.shared.label(),
                Errno::INVAL,
                "cqe is 0",
            ));
        }
        self.cqe = dispatch!(CqRing, &mut self.ring, r => r.resize(&self.shared, cqe))?;
        Ok(())
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
