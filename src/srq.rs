//! Shared receive queues (`ibv_create_srq`, `ibv_create_srq_ex`, `ibv_modify_srq`,
//! `ibv_query_srq`, `ibv_post_srq_recv`, `ibv_destroy_srq`).
//!
//! Like a CQ, an SRQ is split: the kernel object ([`SrqShared`], held by the [`Srq`] and by
//! every QP that receives from it, so the kernel never sees it destroyed under a QP) and the
//! ring ([`Srq`] alone, which posts with `&mut self` and no lock). The ring is the provider's
//! ([`SrqOps`], created by [`DeviceOps::create_srq`]); this file has the kernel half.

use std::sync::Arc;

use crate::channel::WriteCmd;
use crate::context::legacy_cmd;
use crate::cq::{Cq, CqShared};
use crate::error::{Errno, Error, Result};
use crate::event::next_user_handle;
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject, Registration};
use crate::pd::Pd;
use crate::provider::{dispatch, DeviceOps, SrqOps, SrqRing};
use crate::wr::{PostError, RecvWr};
use crate::xrcd::Xrcd;
use uverbs_uapi::verbs::{IB_UVERBS_SRQT_BASIC, IB_UVERBS_SRQT_TM, IB_UVERBS_SRQT_XRC};
use uverbs_uapi::write::{
    IbUverbsCreateSrq, IbUverbsCreateSrqResp, IbUverbsCreateXsrq, IbUverbsDestroySrqResp,
    IbUverbsModifySrq, IbUverbsQuerySrq, IbUverbsQuerySrqResp, IB_USER_VERBS_CMD_CREATE_SRQ,
    IB_USER_VERBS_CMD_CREATE_XSRQ, IB_USER_VERBS_CMD_DESTROY_SRQ, IB_USER_VERBS_CMD_QUERY_SRQ,
};

/// Sizes and limit of an SRQ (`struct ibv_srq_attr`).
#[doc(alias = "ibv_srq_attr")]
#[doc(alias = "ibv_srq_init_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrqAttr {
    /// Receive work requests the SRQ holds.
    pub max_wr: u32,
    /// SGEs per receive work request.
    pub max_sge: u32,
    /// When fewer than this many receives are left, an `SRQ_LIMIT_REACHED` async event fires
    /// once (0: not armed).
    pub srq_limit: u32,
}

bitflags::bitflags! {
    /// What [`Srq::modify`] changes (`enum ibv_srq_attr_mask`).
    #[doc(alias = "ibv_srq_attr_mask")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct SrqAttrMask: u32 {
        /// `IBV_SRQ_MAX_WR`: resize.
        const MAX_WR = 1 << 0;
        /// `IBV_SRQ_LIMIT`: arm the limit event.
        const LIMIT = 1 << 1;
    }
}

/// The kind of SRQ (`enum ibv_srq_type`).
#[doc(alias = "ibv_srq_type")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SrqType {
    /// `IBV_SRQT_BASIC`.
    #[default]
    Basic,
    /// `IBV_SRQT_XRC` (needs an XRCD and a CQ; rxe has no XRC).
    Xrc,
    /// `IBV_SRQT_TM` (tag matching; rxe has none).
    Tm,
}

/// What [`Pd::create_srq_ex`] creates (`struct ibv_srq_init_attr_ex`).
#[doc(alias = "ibv_srq_init_attr_ex")]
#[derive(Debug, Clone, Copy, Default)]
pub struct SrqInitAttrEx<'a> {
    /// Sizes and limit.
    pub attr: SrqAttr,
    /// The type.
    pub srq_type: SrqType,
    /// XRC domain (XRC SRQs).
    pub xrcd: Option<&'a Xrcd>,
    /// Completion queue (XRC and TM SRQs).
    pub cq: Option<&'a Cq>,
    /// Tag list size (TM SRQs).
    pub max_num_tags: u32,
    /// The user's value for this SRQ (`srq_context` of `struct ibv_srq_init_attr`; a
    /// number, not a pointer): read back with [`Srq::srq_context`] and returned with the
    /// SRQ's async events ([`AsyncEvent::context`](crate::AsyncEvent)).
    pub srq_context: u64,
}

/// The kernel SRQ, shared by the [`Srq`] and the QPs that receive from it.
pub(crate) struct SrqShared {
    // Destroyed before its parents (declared after it) are released.
    obj: KernelObject,
    pd: Pd,
    user_handle: u64,
    /// The SRQ's entry in the event table: its `srq_context` and armed limit.
    events: Registration,
    _xrcd: Option<Xrcd>,
    _cq: Option<Arc<CqShared>>,
}

/// `ibv_destroy_srq`: `IB_USER_VERBS_CMD_DESTROY_SRQ`, answering the async event count.
static DESTROY_SRQ: Destroy = Destroy {
    name: "srq",
    op: "destroy_srq",
    cmd: DestroyCmd::WriteWithResp {
        command: IB_USER_VERBS_CMD_DESTROY_SRQ,
        resp_len: std::mem::size_of::<IbUverbsDestroySrqResp>(),
    },
};

impl SrqShared {
    fn label(&self) -> String {
        self.obj.label()
    }

    pub(crate) fn handle(&self) -> u32 {
        self.obj.handle()
    }
}

/// A shared receive queue (`struct ibv_srq`): the ring and the right to post to it.
///
/// One pool of receive buffers for many QPs (rxe; EFA has no SRQ):
///
/// ```no_run
/// // A whole server built on an SRQ, to copy: examples/srq_server.rs.
/// use uverbs::{AccessFlags, RecvWr, SrqAttr, SrqAttrMask};
///
/// let ctx = uverbs::Context::open(&uverbs::device_by_name("rxe0")?)?;
/// let pd = ctx.alloc_pd()?;
/// let mut srq = pd.create_srq(&SrqAttr { max_wr: 128, max_sge: 1, srq_limit: 0 })?;
/// let mr = pd.reg_mr(128 * 1024, AccessFlags::LOCAL_WRITE)?;
/// let sges = (0..128).map(|i| mr.sge(i * 1024, 1024)).collect::<uverbs::Result<Vec<_>>>()?;
/// let wrs: Vec<RecvWr<'_>> = sges.iter().enumerate()
///     .map(|(i, s)| RecvWr::new(i as u64, std::slice::from_ref(s)))
///     .collect();
/// srq.post_recv(&wrs)?;
/// // An SRQ_LIMIT_REACHED async event when fewer than 16 receives are left.
/// srq.modify(&SrqAttr { srq_limit: 16, ..srq.attr() }, SrqAttrMask::LIMIT)?;
/// assert_eq!(srq.query()?.srq_limit, 16);
/// // Create QPs with `srq: Some(&srq)` in their QpInitAttr: their receives come from it.
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "ibv_srq")]
pub struct Srq {
    // Drop order: the kernel object (if this was its last holder), then the ring.
    shared: Arc<SrqShared>,
    ring: SrqRing,
    attr: SrqAttr,
    srq_num: u32,
}

/// The generic part of a create-SRQ command, for [`DeviceOps::create_srq`]: the provider
/// refuses what it lacks, or sends it ([`Pd::create_srq_object`]) with its driver data.
pub(crate) struct SrqRequest<'a> {
    /// The type asked for.
    pub(crate) srq_type: SrqType,
    cmd: SrqCommand,
    user_handle: u64,
    attr: &'a SrqAttr,
    srq_context: u64,
    xrcd: Option<Xrcd>,
    cq: Option<Arc<CqShared>>,
}

/// The two create commands: `ibv_create_srq`'s and `ibv_create_srq_ex`'s.
enum SrqCommand {
    Basic(IbUverbsCreateSrq),
    Ex(IbUverbsCreateXsrq),
}

/// The SRQ the kernel made for a [`SrqRequest`], before its ring: the kernel object (destroyed
/// again on drop if a later step fails) and the sizes the kernel answered.
pub(crate) struct SrqObject {
    shared: Arc<SrqShared>,
    resp: IbUverbsCreateSrqResp,
}

impl SrqObject {
    /// How errors name the SRQ.
    pub(crate) fn label(&self) -> String {
        self.shared.label()
    }

    /// SGEs per receive the kernel made room for.
    pub(crate) fn max_sge(&self) -> u32 {
        self.resp.max_sge
    }
}

impl std::fmt::Debug for Srq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Srq({}, {:?})", self.shared.label(), self.attr())
    }
}

/// What the kernel reported when an SRQ was destroyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqDestroyed {
    /// Async events delivered for this SRQ.
    pub events_reported: u32,
}

impl Pd {
    /// Creates a basic SRQ (`ibv_create_srq`, `IB_USER_VERBS_CMD_CREATE_SRQ` as rdma-core's rxe
    /// does). `attr.max_wr`/`max_sge` are written back in [`Srq::attr`].
    #[doc(alias = "ibv_create_srq")]
    pub fn create_srq(&self, attr: &SrqAttr) -> Result<Srq> {
        let req = IbUverbsCreateSrq {
            user_handle: next_user_handle(),
            pd_handle: self.handle(),
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
            ..Default::default()
        };
        self.create_srq_request(SrqRequest {
            srq_type: SrqType::Basic,
            user_handle: req.user_handle,
            cmd: SrqCommand::Basic(req),
            attr,
            srq_context: 0,
            xrcd: None,
            cq: None,
        })
    }

    /// Creates an SRQ of any type (`ibv_create_srq_ex`, `IB_USER_VERBS_CMD_CREATE_XSRQ`).
    /// XRC SRQs are fully encoded, but rxe has no XRC: the request fails with `EOPNOTSUPP`.
    #[doc(alias = "ibv_create_srq_ex")]
    pub fn create_srq_ex(&self, init: &SrqInitAttrEx<'_>) -> Result<Srq> {
        let op = "create_srq";
        let (srq_type, xrcd, cq) = match init.srq_type {
            SrqType::Basic => (IB_UVERBS_SRQT_BASIC, None, None),
            SrqType::Xrc | SrqType::Tm => {
                let t = if init.srq_type == SrqType::Xrc {
                    IB_UVERBS_SRQT_XRC
                } else {
                    IB_UVERBS_SRQT_TM
                };
                let Some(cq) = init.cq else {
                    return Err(Error::invalid(
                        op,
                        self.label(),
                        Errno::INVAL,
                        format!("a {:?} SRQ needs a CQ", init.srq_type),
                    ));
                };
                if init.srq_type == SrqType::Xrc && init.xrcd.is_none() {
                    return Err(Error::invalid(
                        op,
                        self.label(),
                        Errno::INVAL,
                        "an XRC SRQ needs an XRCD",
                    ));
                }
                (t, init.xrcd, Some(cq))
            }
        };
        let req = IbUverbsCreateXsrq {
            user_handle: next_user_handle(),
            srq_type,
            pd_handle: self.handle(),
            max_wr: init.attr.max_wr,
            max_sge: init.attr.max_sge,
            srq_limit: init.attr.srq_limit,
            max_num_tags: init.max_num_tags,
            xrcd_handle: xrcd.map_or(0, |x| x.handle()),
            cq_handle: cq.map_or(0, |c| c.handle()),
            ..Default::default()
        };
        self.create_srq_request(SrqRequest {
            srq_type: init.srq_type,
            user_handle: req.user_handle,
            cmd: SrqCommand::Ex(req),
            attr: &init.attr,
            srq_context: init.srq_context,
            xrcd: xrcd.cloned(),
            cq: cq.map(|c| c.shared().clone()),
        })
    }

    fn create_srq_request(&self, req: SrqRequest<'_>) -> Result<Srq> {
        dispatch!(ProviderCtx, &self.context().inner.provider_ctx, p => p.create_srq(self, req))
    }

    /// Sends `req`'s create command with a provider's driver data: the kernel SRQ and the
    /// command, holding the driver response (`driver_resp_len` bytes).
    pub(crate) fn create_srq_object(
        &self,
        req: SrqRequest<'_>,
        driver_in: &[u8],
        driver_resp_len: usize,
    ) -> Result<(SrqObject, WriteCmd)> {
        let op = "create_srq";
        let ctx = self.context();
        let resp_len = std::mem::size_of::<IbUverbsCreateSrqResp>();
        let mut cmd = match &req.cmd {
            SrqCommand::Basic(c) => legacy_cmd(
                IB_USER_VERBS_CMD_CREATE_SRQ,
                c,
                driver_in,
                resp_len,
                driver_resp_len,
            ),
            SrqCommand::Ex(c) => legacy_cmd(
                IB_USER_VERBS_CMD_CREATE_XSRQ,
                c,
                driver_in,
                resp_len,
                driver_resp_len,
            ),
        };
        let attr = req.attr;
        ctx.write_cmd(op, &|| self.label(), &mut cmd).map_err(|e| {
            if e.is(Errno::INVAL) {
                e.with_reason(format!(
                    "max_wr {} / max_sge {} / srq_limit {} rejected (above the device's \
                     max_srq_wr / max_srq_sge, or limit above max_wr?)",
                    attr.max_wr, attr.max_sge, attr.srq_limit
                ))
            } else {
                e
            }
        })?;
        let resp: IbUverbsCreateSrqResp = cmd.response_as();
        let shared = Arc::new(SrqShared {
            obj: KernelObject::new(ctx.clone(), resp.srq_handle, &DESTROY_SRQ, resp.srq_handle),
            pd: self.clone(),
            user_handle: req.user_handle,
            events: Registration::new(req.user_handle, req.srq_context),
            _xrcd: req.xrcd,
            _cq: req.cq,
        });
        Ok((SrqObject { shared, resp }, cmd))
    }
}

impl Srq {
    /// The SRQ a provider made: the kernel SRQ, its ring and its number. Its sizes are
    /// what the kernel made, as `ibv_query_srq` reports them: the create response is not
    /// always that (6.1's rxe answers the max_wr asked for, 12, while its ring holds 15:
    /// `rxe_queue_init` rounds the ring up to a power of two and query reports its index
    /// mask).
    pub(crate) fn assemble(obj: SrqObject, ring: SrqRing, srq_num: u32) -> Result<Srq> {
        let mut srq = Srq {
            ring,
            attr: SrqAttr {
                max_wr: obj.resp.max_wr,
                max_sge: obj.resp.max_sge,
                srq_limit: 0,
            },
            srq_num,
            shared: obj.shared,
        };
        let q = srq.query()?;
        srq.attr.max_wr = q.max_wr;
        srq.attr.max_sge = q.max_sge;
        srq.shared.events.set_srq_limit(q.srq_limit);
        Ok(srq)
    }
}

impl Srq {
    pub(crate) fn shared(&self) -> &Arc<SrqShared> {
        &self.shared
    }

    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.shared.handle()
    }

    /// The PD.
    pub fn pd(&self) -> &Pd {
        &self.shared.pd
    }

    /// The value `SRQ_LIMIT_REACHED` / `SRQ_ERR` async events carry for this SRQ.
    pub fn user_handle(&self) -> u64 {
        self.shared.user_handle
    }

    /// Sizes as the kernel made them (what `ibv_query_srq` reported at create and resize)
    /// and the limit as armed: by `modify` with `LIMIT`, and disarmed (0) once the
    /// `SRQ_LIMIT_REACHED` event for this SRQ has been read (`Context::get_async_event`).
    /// The kernel disarms it when the event fires; [`Srq::query`] asks it directly.
    pub fn attr(&self) -> SrqAttr {
        SrqAttr {
            srq_limit: self.shared.events.srq_limit(),
            ..self.attr
        }
    }

    /// The user's value given at creation ([`SrqInitAttrEx::srq_context`]) or last set.
    pub fn srq_context(&self) -> u64 {
        self.shared.events.context()
    }

    /// Replaces the user's value (`ibv_srq.srq_context = ...`); events read from now on carry
    /// the new one.
    #[doc(alias = "ibv_srq.srq_context")]
    pub fn set_srq_context(&mut self, srq_context: u64) {
        self.shared.events.set_context(srq_context);
    }

    /// The SRQ number (`ibv_get_srq_num`).
    #[doc(alias = "ibv_get_srq_num")]
    pub fn srq_num(&self) -> u32 {
        self.srq_num
    }

    /// Posts receive work requests (`ibv_post_srq_recv`): ring writes and one publish, no
    /// syscall, no lock. Failure names the first WR not posted (those before it were).
    #[doc(alias = "ibv_post_srq_recv")]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let shared = &self.shared;
        dispatch!(SrqRing, &mut self.ring, r => r.post_recv(wrs, &|| shared.label()))
    }

    /// Modifies the SRQ (`ibv_modify_srq`): `MAX_WR` resizes it (the kernel moves the ring;
    /// posted receives are kept), `LIMIT` arms the limit event at `attr.srq_limit`.
    #[doc(alias = "ibv_modify_srq")]
    pub fn modify(&mut self, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        let req = IbUverbsModifySrq {
            srq_handle: self.shared.handle(),
            attr_mask: mask.bits(),
            max_wr: attr.max_wr,
            srq_limit: attr.srq_limit,
        };
        let ctx = self.shared.pd.context();
        let shared = &self.shared;
        let max_sge = self.attr.max_sge;
        dispatch!(SrqRing, &mut self.ring, r => {
            r.modify(ctx, &req, mask, max_sge, &|| shared.label())
        })
        .map_err(|e| {
            if e.is(Errno::INVAL) {
                e.with_reason(format!(
                    "max_wr {} / srq_limit {} rejected (limit must be below max_wr; a \
                     resize cannot shrink below the receives queued or exceed max_srq_wr)",
                    attr.max_wr, attr.srq_limit
                ))
            } else {
                e
            }
        })?;
        if mask.contains(SrqAttrMask::LIMIT) {
            self.shared.events.set_srq_limit(attr.srq_limit);
        }
        if mask.contains(SrqAttrMask::MAX_WR) {
            let q = self.query()?;
            self.attr.max_wr = q.max_wr;
            self.attr.max_sge = q.max_sge;
        }
        Ok(())
    }

    /// Queries the SRQ (`ibv_query_srq`).
    #[doc(alias = "ibv_query_srq")]
    pub fn query(&self) -> Result<SrqAttr> {
        let req = IbUverbsQuerySrq {
            srq_handle: self.shared.handle(),
            ..Default::default()
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_QUERY_SRQ,
            &req,
            &[],
            std::mem::size_of::<IbUverbsQuerySrqResp>(),
            0,
        );
        self.pd()
            .context()
            .write_cmd("query_srq", &|| self.shared.label(), &mut cmd)?;
        let r: IbUverbsQuerySrqResp = cmd.response_as();
        Ok(SrqAttr {
            max_wr: r.max_wr,
            max_sge: r.max_sge,
            srq_limit: r.srq_limit,
        })
    }

    /// Destroys the SRQ now (`ibv_destroy_srq`) and returns the async event count the kernel
    /// reports.
    ///
    /// On failure the SRQ comes back in the error ([`DestroyError::into_inner`]), still
    /// usable (receives can still be posted): while QPs receive from it this fails with
    /// `EBUSY` (the kernel would refuse too); destroy them and call `destroy` again.
    /// Dropping the SRQ instead leaves the kernel object to be destroyed with the last of them.
    #[doc(alias = "ibv_destroy_srq")]
    pub fn destroy(mut self) -> Result<SrqDestroyed, DestroyError<Srq>> {
        let Some(shared) = Arc::get_mut(&mut self.shared) else {
            let users = Arc::strong_count(&self.shared) - 1;
            let e = Error::invalid(
                "destroy_srq",
                self.shared.label(),
                Errno::BUSY,
                format!("{users} QP(s) still receive from this SRQ; destroy them first"),
            );
            return Err(DestroyError::new(self, e));
        };
        // The kernel object goes first; the ring mapping is released after it, with `self`.
        match shared.obj.destroy() {
            Ok([events, _]) => Ok(SrqDestroyed {
                events_reported: events,
            }),
            Err(e) => {
                let e = if e.is(Errno::BUSY) {
                    e.with_reason("the kernel reports QPs still attached to the SRQ")
                } else {
                    e
                };
                Err(DestroyError::new(self, e))
            }
        }
    }
}
