//! Address handles (`ibv_create_ah`, `ibv_destroy_ah`) and address vectors (`ibv_ah_attr`).
//!
//! An [`Ah`] is the kernel AH (`IB_USER_VERBS_CMD_CREATE_AH`) plus the number a UD send WQE
//! carries, which the provider reads from the driver response (`DeviceOps::ah_num`): on EFA
//! the device's AH number (`efa_ibv_create_ah_resp.efa_address_handle`, what libefa's
//! `efa_create_ah` keeps), on rxe the kernel's AH index (`rxe_create_ah_resp.ah_num`,
//! non-zero since kernel 5.10; older kernels are refused rather than sent a guessed MAC).
//!
//! `Ah` is a cheap clone of an `Arc`. A QP keeps a hold on it ([`AhHold`]) for every UD send
//! still in its queue, so the kernel AH can never be destroyed under a send that names it; such
//! holds do not make [`Ah::destroy`] fail (rdma-core's `ibv_destroy_ah` succeeds while sends
//! are queued), they only delay the kernel's DESTROY_AH until the QP lets them go.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use uverbs_uapi::write::{
    IbUverbsAhAttr, IbUverbsCreateAh, IbUverbsCreateAhResp, IbUverbsGlobalRoute,
    IB_USER_VERBS_CMD_CREATE_AH, IB_USER_VERBS_CMD_DESTROY_AH,
};

use crate::context::legacy_cmd;
use crate::error::{Errno, Error, Result};
use crate::event::next_user_handle;
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject};
use crate::pd::Pd;
use crate::provider::{dispatch, DeviceOps};
use crate::query::Gid;

/// The global route of an address vector (`struct ibv_global_route`): the GRH fields, which
/// RoCE always uses.
#[doc(alias = "ibv_global_route")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GlobalRoute {
    /// Destination GID.
    pub dgid: Gid,
    /// IPv6 flow label.
    pub flow_label: u32,
    /// Index of the source GID in the port's GID table (decides RoCE v1/v2, IPv4/IPv6).
    pub sgid_index: u8,
    /// Hop limit (IP TTL).
    pub hop_limit: u8,
    /// Traffic class (IP DSCP/ECN).
    pub traffic_class: u8,
}

/// An address vector (`struct ibv_ah_attr`), for [`Pd::create_ah`] and the QP's primary and
/// alternate paths ([`crate::QpAttr::ah_attr`]).
#[doc(alias = "ibv_ah_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AhAttr {
    /// GRH fields (valid when `is_global`).
    pub grh: GlobalRoute,
    /// Destination LID (0 on RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// Static rate (`enum ibv_rate`).
    pub static_rate: u8,
    /// Whether `grh` is valid: required on RoCE (rxe refuses an AH without it).
    pub is_global: bool,
    /// Port number (from 1).
    pub port_num: u8,
}

impl AhAttr {
    /// A RoCE address vector: destination GID, source GID index and port, hop limit 1.
    pub fn roce(dgid: Gid, sgid_index: u8, port_num: u8) -> Self {
        AhAttr {
            grh: GlobalRoute {
                dgid,
                sgid_index,
                hop_limit: 1,
                ..GlobalRoute::default()
            },
            is_global: true,
            port_num,
            ..AhAttr::default()
        }
    }

    pub(crate) fn to_uverbs(self) -> IbUverbsAhAttr {
        IbUverbsAhAttr {
            grh: IbUverbsGlobalRoute {
                dgid: self.grh.dgid.raw,
                flow_label: self.grh.flow_label,
                sgid_index: self.grh.sgid_index,
                hop_limit: self.grh.hop_limit,
                traffic_class: self.grh.traffic_class,
                reserved: 0,
            },
            dlid: self.dlid,
            sl: self.sl,
            src_path_bits: self.src_path_bits,
            static_rate: self.static_rate,
            is_global: u8::from(self.is_global),
            port_num: self.port_num,
            reserved: 0,
        }
    }
}

pub(crate) struct AhInner {
    // Destroyed before its parent (declared after it) is released.
    obj: KernelObject,
    pub(crate) pd: Pd,
    /// The number send WQEs carry: rxe's AH index (non-zero), EFA's device AH number.
    pub(crate) ah_num: u32,
    pub(crate) attr: AhAttr,
    /// How many [`Ah`] handles exist (clones the program holds), as opposed to the queue holds
    /// ([`AhHold`]) that the `Arc`'s count also includes.
    handles: AtomicUsize,
}

/// `ibv_destroy_ah`: `IB_USER_VERBS_CMD_DESTROY_AH` (as rdma-core, for rxe and EFA alike).
static DESTROY_AH: Destroy = Destroy {
    name: "ah",
    op: "destroy_ah",
    cmd: DestroyCmd::Write {
        command: IB_USER_VERBS_CMD_DESTROY_AH,
    },
};

impl AhInner {
    pub(crate) fn label(&self) -> String {
        self.obj.label()
    }
}

/// An address handle (`struct ibv_ah`). Cheap to clone; destroyed when the last clone is
/// dropped (or [`destroyed`](Ah::destroy)) and no queued UD send names it.
///
/// What a UD or SRD send needs to reach a peer: its GID (from the peer, over any channel),
/// with its QP number and Q_Key given per send:
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
/// # let (pd, _cq, mut qp, mr) = side(&ctx, false)?;
/// use uverbs::{AhAttr, GlobalRoute, SendWr};
///
/// let attr = AhAttr {
///     is_global: true,
///     port_num: 1,
///     grh: GlobalRoute { dgid: peer_gid, hop_limit: 64, ..Default::default() },
///     ..Default::default()
/// };
/// let ah = pd.create_ah(&attr)?;                         // ibv_create_ah
/// let sge = [mr.sge(0, 8)?];
/// qp.post_send(&[SendWr::send(1).sge(&sge).signaled().ud(&ah, peer_qpn, QKEY)])?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "ibv_ah")]
pub struct Ah {
    pub(crate) inner: Arc<AhInner>,
}

impl Clone for Ah {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::Relaxed);
        Ah {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        self.inner.handles.fetch_sub(1, Ordering::Release);
    }
}

/// A QP's hold on the AH of a UD send in its queue: keeps the kernel AH (and so its PD) alive
/// until the QP drops it, without counting as an [`Ah`] handle for [`Ah::destroy`].
pub(crate) struct AhHold(#[allow(dead_code)] Arc<AhInner>);

impl AhHold {
    pub(crate) fn new(ah: &Ah) -> Self {
        AhHold(Arc::clone(&ah.inner))
    }
}

impl std::fmt::Debug for Ah {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Ah({}, ah_num {})",
            self.inner.label(),
            self.inner.ah_num
        )
    }
}

/// Refuses an AH without a GRH on a device whose fabric routes by GID (`routing` says which:
/// "RoCE", "EFA"): for the providers' [`DeviceOps::check_create_ah`].
///
/// [`DeviceOps::check_create_ah`]: crate::provider::DeviceOps::check_create_ah
pub(crate) fn require_grh(pd: &Pd, attr: &AhAttr, routing: &str) -> Result<()> {
    if attr.is_global {
        return Ok(());
    }
    Err(Error::invalid(
        "create_ah",
        pd.label(),
        Errno::INVAL,
        format!(
            "{} address handles need a GRH (is_global, with the destination GID and the source \
             GID index): {routing} routes by GID",
            pd.context().device().name()
        ),
    ))
}

impl Pd {
    /// Creates an address handle for UD sends (`ibv_create_ah`).
    ///
    /// On RoCE the attribute must be global (`is_global` with a destination GID and a source
    /// GID index); the kernel resolves the route and the destination MAC.
    #[doc(alias = "ibv_create_ah")]
    pub fn create_ah(&self, attr: &AhAttr) -> Result<Ah> {
        let op = "create_ah";
        let ctx = self.context();
        let provider = &ctx.inner.provider_ctx;
        if attr.port_num == 0 {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::INVAL,
                "port_num 0: ports are numbered from 1",
            ));
        }
        dispatch!(ProviderCtx, provider, p => p.check_create_ah(self, attr))?;
        let req = IbUverbsCreateAh {
            user_handle: next_user_handle(),
            pd_handle: self.handle(),
            attr: attr.to_uverbs(),
            ..Default::default()
        };
        // No driver request (libefa's efa_create_ah, rdma-core's rxe); the driver response
        // carries the number send WQEs name.
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_CREATE_AH,
            &req,
            &[],
            std::mem::size_of::<IbUverbsCreateAhResp>(),
            dispatch!(ProviderCtx, provider, p => p.ah_udata_len()),
        );
        ctx.write_cmd(op, &|| self.label(), &mut cmd)
            .map_err(|e| explain_create_ah_error(e, attr))?;
        let resp: IbUverbsCreateAhResp = cmd.response_as();
        let obj = KernelObject::new(ctx.clone(), resp.ah_handle, &DESTROY_AH, resp.ah_handle);
        let driver_resp = cmd.driver_response();
        let ah_num = match dispatch!(ProviderCtx, provider, p => {
            p.ah_num(driver_resp, op, &obj.label())
        }) {
            Ok(n) => n,
            Err(e) => {
                // Destroy what the kernel made before refusing (a failure is reported).
                drop(obj);
                return Err(e);
            }
        };
        let inner = AhInner {
            obj,
            pd: self.clone(),
            ah_num,
            attr: *attr,
            handles: AtomicUsize::new(1),
        };
        Ok(Ah {
            inner: Arc::new(inner),
        })
    }
}

impl Ah {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.inner.obj.handle()
    }

    /// The number work queue entries carry: rxe's AH index, or EFA's device AH number
    /// (also `Ah::efadv_query_ah`).
    pub fn ah_num(&self) -> u32 {
        self.inner.ah_num
    }

    /// The attributes the AH was created with.
    pub fn attr(&self) -> &AhAttr {
        &self.inner.attr
    }

    /// The PD the AH belongs to.
    pub fn pd(&self) -> &Pd {
        &self.inner.pd
    }

    /// Destroys the AH (`ibv_destroy_ah`).
    ///
    /// Fails with `EBUSY` (and destroys nothing) while another clone of it exists. On any
    /// failure the AH comes back in the error ([`DestroyError::into_inner`]), still usable:
    /// drop the other clones and destroy it again, or drop it and it is destroyed with its
    /// last clone.
    ///
    /// A UD send a QP queued does not make it fail (as rdma-core's `ibv_destroy_ah`): the QP
    /// holds the kernel AH for as long as the send may be in its queue (until its queue slot
    /// is reused or the QP is destroyed), and the kernel AH is destroyed then, with no error
    /// to report. Only then is the AH's PD free of it.
    #[doc(alias = "ibv_destroy_ah")]
    pub fn destroy(mut self) -> std::result::Result<(), DestroyError<Ah>> {
        // Acquire pairs with the Release of the other handles' drops.
        let others = self.inner.handles.load(Ordering::Acquire) - 1;
        if others > 0 {
            let e = Error::invalid(
                "destroy_ah",
                self.inner.label(),
                Errno::BUSY,
                format!("{others} other clone(s) of it still exist"),
            );
            return Err(DestroyError::new(self, e));
        }
        let Some(inner) = Arc::get_mut(&mut self.inner) else {
            // Only queue holds are left (no clone can appear: this is the one handle): the
            // last of them destroys the kernel AH when its QP lets it go.
            return Ok(());
        };
        match inner.obj.destroy() {
            Ok(_) => Ok(()),
            Err(e) => Err(DestroyError::new(self, e)),
        }
    }
}

/// The reason for the kernel's refusal of a CREATE_AH, keeping its errno.
fn explain_create_ah_error(e: Error, attr: &AhAttr) -> Error {
    let (dgid, sgid_index, port) = (attr.grh.dgid, attr.grh.sgid_index, attr.port_num);
    if e.is(Errno::INVAL) || e.is(Errno::NOENT) || e.is(Errno::NODATA) {
        e.with_reason(format!(
            "sgid_index {sgid_index} on port {port} is not a usable GID, or dgid {dgid} has no \
             route"
        ))
    } else if e.is(Errno::TIMEDOUT) {
        // The kernel resolves the destination's MAC (RoCE) before answering, and gives up
        // when no neighbour answers: from an address that is not ready yet (a tentative
        // IPv6 address, for seconds after its link comes up), or towards a peer that is not
        // reachable.
        e.with_reason(format!(
            "the kernel could not resolve dgid {dgid} from sgid_index {sgid_index} on port \
             {port} in time (the neighbour lookup timed out): check that the source GID's \
             address is configured and no longer tentative (an IPv6 address is, for a few \
             seconds after its link comes up: Context::find_gid picks a ready one), and \
             that the peer's address is reachable from that interface"
        ))
    } else {
        e
    }
}
