//! EFA QPs: SRD (`efadv_create_qp` with `EFADV_QP_DRIVER_TYPE_SRD`) and UD, their state
//! changes, and the data path (`ibv_post_send`, `ibv_post_recv`, the `ibv_wr_*` API).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use bitflags::bitflags;
use uverbs_efa::rq::{RecvQueue, RqConfig};
use uverbs_efa::sq::{
    DeviceCaps, Payload, QpType, SendOp, SendQueue, SendWr, Sge, SqConfig, UdAddr,
};
use uverbs_efa::RecvWr;
use uverbs_uapi::efa::{
    EfaIbvCreateQp, EfaIbvCreateQpResp, EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV,
    EFA_QP_DRIVER_TYPE_SRD, EFA_QUERY_DEVICE_CAPS_RDMA_READ, EFA_QUERY_DEVICE_CAPS_RDMA_WRITE,
    EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV,
};
use uverbs_uapi::verbs::{
    IB_QPS_ERR, IB_QPS_INIT, IB_QPS_RESET, IB_QPS_RTR, IB_QPS_RTS, IB_QP_CAP, IB_QP_PKEY_INDEX,
    IB_QP_PORT, IB_QP_QKEY, IB_QP_RNR_RETRY, IB_QP_SQ_PSN, IB_QP_STATE, IB_UVERBS_QPT_UD,
};
use uverbs_uapi::write::{
    IbUverbsCreateQp, IbUverbsCreateQpResp, IbUverbsDestroyQp, IbUverbsDestroyQpResp,
    IbUverbsModifyQp, IbUverbsQueryQp, IbUverbsQueryQpResp, IB_USER_VERBS_CMD_CREATE_QP,
    IB_USER_VERBS_CMD_DESTROY_QP, IB_USER_VERBS_CMD_MODIFY_QP, IB_USER_VERBS_CMD_QUERY_QP,
};
use zerocopy::IntoBytes;

use super::table::QpTable;
use crate::channel::{MapKind, Mapping};
use crate::context::{legacy_cmd, Context};
use crate::cq::{Cq, QpCqs};
use crate::error::{Errno, Error, Result};
use crate::event::next_user_handle;
use crate::pd::Pd;
use crate::qp::SendOpsFlags;

/// `IBV_QPT_DRIVER`: the generic type of driver-defined QPs (SRD).
const IB_QPT_DRIVER: u8 = 0xff;

/// Generation of QP numbers: bumped per QP so a stale CQE for an earlier QP with the same
/// number cannot complete a new QP's WR (the pools refuse ids of another generation).
static QP_GEN: AtomicU16 = AtomicU16::new(0);

/// EFA transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EfaQpType {
    /// SRD: reliable, unordered datagrams (`EFADV_QP_DRIVER_TYPE_SRD`).
    Srd,
    /// UD: unreliable datagrams (`IBV_QPT_UD`).
    Ud,
}

bitflags! {
    /// `EFADV_QP_FLAGS_*`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EfaQpFlags: u32 {
        /// `EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV`: RDMA write with immediate may complete
        /// at the receiver without consuming a receive WR.
        const UNSOLICITED_WRITE_RECV = 1 << 0;
        /// `EFADV_QP_FLAGS_INLINE_WRITE`: RDMA writes may carry inline data (needs the
        /// RDMA_WRITE cap; makes the SQ use 128-byte WQEs).
        const INLINE_WRITE = 1 << 1;
    }
}

/// `struct ibv_qp_cap` for an EFA QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EfaQpCap {
    /// Send WRs outstanding at once.
    pub max_send_wr: u32,
    /// Receive WRs outstanding at once.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline bytes per send WR.
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr_ex` + `struct efadv_qp_init_attr` for [`Pd::efadv_create_qp`].
#[doc(alias = "efadv_qp_init_attr")]
#[derive(Debug, Clone, Copy)]
pub struct EfaQpInitAttr<'a> {
    /// Transport.
    pub qp_type: EfaQpType,
    /// CQ of send completions (an EFA CQ of the same context).
    pub send_cq: &'a Cq,
    /// CQ of receive completions.
    pub recv_cq: &'a Cq,
    /// Queue sizes.
    pub cap: EfaQpCap,
    /// Every send is signaled (`sq_sig_all`). Without it each send WR must be signaled: EFA
    /// cannot post unsignaled sends and refuses them.
    pub sq_sig_all: bool,
    /// `EFADV_QP_FLAGS_*`.
    pub flags: EfaQpFlags,
    /// Service level.
    pub sl: u8,
    /// The operations the `ibv_wr_*` API ([`EfaQp::wr_start`]) may post
    /// (`send_ops_flags` with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`): checked against the QP type
    /// and device caps at create (`EOPNOTSUPP`), and a `wr_*` call of an operation not in it
    /// is refused by `wr_complete`. Empty: the `wr_*` API posts nothing (like rdma-core,
    /// which leaves the `wr_*` entry points unset). [`EfaQp::post_send`] does not look at it.
    pub send_ops_flags: SendOpsFlags,
}

/// QP states (`enum ibv_qp_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EfaQpState {
    /// `IBV_QPS_RESET`.
    Reset,
    /// `IBV_QPS_INIT`.
    Init,
    /// `IBV_QPS_RTR`.
    Rtr,
    /// `IBV_QPS_RTS`.
    Rts,
    /// `IBV_QPS_ERR`.
    Err,
    /// Another state number the kernel reported.
    Other(u8),
}

impl EfaQpState {
    fn raw(self) -> u8 {
        match self {
            EfaQpState::Reset => IB_QPS_RESET,
            EfaQpState::Init => IB_QPS_INIT,
            EfaQpState::Rtr => IB_QPS_RTR,
            EfaQpState::Rts => IB_QPS_RTS,
            EfaQpState::Err => IB_QPS_ERR,
            EfaQpState::Other(v) => v,
        }
    }
    fn from_raw(v: u8) -> Self {
        match v {
            IB_QPS_RESET => EfaQpState::Reset,
            IB_QPS_INIT => EfaQpState::Init,
            IB_QPS_RTR => EfaQpState::Rtr,
            IB_QPS_RTS => EfaQpState::Rts,
            IB_QPS_ERR => EfaQpState::Err,
            v => EfaQpState::Other(v),
        }
    }
}

/// Attributes for [`EfaQp::modify`] (`struct ibv_qp_attr` + mask: `Some` fields are applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EfaQpAttr {
    /// `IBV_QP_STATE`.
    pub qp_state: Option<EfaQpState>,
    /// `IBV_QP_QKEY`.
    pub qkey: Option<u32>,
    /// `IBV_QP_SQ_PSN`.
    pub sq_psn: Option<u32>,
    /// `IBV_QP_PKEY_INDEX`.
    pub pkey_index: Option<u16>,
    /// `IBV_QP_PORT`.
    pub port_num: Option<u8>,
    /// `IBV_QP_RNR_RETRY` (needs the RNR_RETRY cap).
    pub rnr_retry: Option<u8>,
}

/// What [`EfaQp::query`] reports (`ibv_query_qp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EfaQpQuery {
    /// Current state.
    pub state: EfaQpState,
    /// Q_Key.
    pub qkey: u32,
    /// Send PSN.
    pub sq_psn: u32,
    /// Capacities the kernel reports.
    pub cap: EfaQpCap,
    /// Whether every send is signaled.
    pub sq_sig_all: bool,
}

/// A WR staged by an [`EfaSendSession`]: copied out of the caller's borrows so the session
/// touches the shared queues only in `complete`.
#[derive(Clone, Copy)]
struct Staged {
    wr_id: u64,
    op: SendOp,
    dest: UdAddr,
    signaled: bool,
    hints: u8,
    inline: bool,
    n: u8,
    sges: [Sge; 2],
    inline_len: u8,
    inline_data: [u8; 80],
}

const EMPTY_STAGED: Staged = Staged {
    wr_id: 0,
    op: SendOp::Send,
    dest: UdAddr {
        ah: 0,
        remote_qpn: 0,
        remote_qkey: 0,
    },
    signaled: false,
    hints: 0,
    inline: false,
    n: 0,
    sges: [Sge {
        addr: 0,
        length: 0,
        lkey: 0,
    }; 2],
    inline_len: 0,
    inline_data: [0; 80],
};

/// An EFA QP (`struct ibv_qp` of type SRD or UD). Posts through `&mut self` without locks,
/// allocation or syscalls; see `crate::efa` for how it shares wr_id bookkeeping with its CQs.
pub struct EfaQp {
    pd: Pd,
    handle: u32,
    qpn: u32,
    qp_type: EfaQpType,
    state: EfaQpState,
    sq_sig_all: bool,
    cap: EfaQpCap,
    send_ops: SendOpsFlags,
    qpn16: u16,
    // The queues own the posting halves of the wr_id pools; the completing halves live in
    // the tables of the CQs (see `crate::efa`). Declared before `_maps`, so they are dropped
    // before the memory they point into is unmapped.
    sq: SendQueue,
    rq: RecvQueue,
    send_table: Arc<QpTable>,
    recv_table: Arc<QpTable>,
    staging: Box<[Staged]>,
    destroyed: bool,
    _maps: [Mapping; 4],
    // Keep the kernel CQs alive while the QP completes into them.
    _cqs: QpCqs,
}

impl std::fmt::Debug for EfaQp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "EfaQp({}, {:?}, {:?})",
            self.label(),
            self.qp_type,
            self.state
        )
    }
}

/// Destroys a kernel QP on drop unless disarmed (failure paths of create).
struct KernelQp<'a> {
    ctx: &'a Context,
    handle: u32,
    armed: bool,
}

impl Drop for KernelQp<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Err(e) = destroy_qp_cmd(self.ctx, self.handle) {
                crate::report_drop_error("destroy_qp", &format!("qp handle {}", self.handle), e);
            }
        }
    }
}

fn destroy_qp_cmd(ctx: &Context, handle: u32) -> std::result::Result<u32, Errno> {
    let mut cmd = legacy_cmd(
        IB_USER_VERBS_CMD_DESTROY_QP,
        &IbUverbsDestroyQp {
            qp_handle: handle,
            ..Default::default()
        },
        &[],
        std::mem::size_of::<IbUverbsDestroyQpResp>(),
        0,
    );
    ctx.inner.channel.write(&mut cmd)?;
    Ok(cmd.response_as::<IbUverbsDestroyQpResp>().events_reported)
}

fn page_align(n: usize) -> usize {
    let p = rustix::param::page_size();
    n.div_ceil(p) * p
}

impl Pd {
    /// Creates an EFA QP (`efadv_create_qp_ex`): the generic CREATE_QP command with
    /// `efa_ibv_create_qp` driver data, then maps the LLQ (write-combined device memory), the
    /// SQ and RQ doorbells and the RQ ring.
    #[doc(alias = "efadv_create_qp_ex")]
    #[doc(alias = "efadv_create_driver_qp")]
    pub fn efadv_create_qp(&self, attr: &EfaQpInitAttr<'_>) -> Result<EfaQp> {
        let op = "efadv_create_qp";
        let ctx = self.context();
        let label = || self.label();
        let inval = |why: String| Error::invalid(op, label(), Errno::INVAL, why);
        let uctx = ctx.efa_ucontext(op)?;
        let dev = ctx.efa_query_raw(op)?;
        let (Some(scq), Some(rcq)) = (attr.send_cq.efa_ring(), attr.recv_cq.efa_ring()) else {
            return Err(inval(
                "send_cq and recv_cq must be EFA CQs (efadv_create_cq)".into(),
            ));
        };
        if !Arc::ptr_eq(&attr.send_cq.shared().ctx.inner, &ctx.inner)
            || !Arc::ptr_eq(&attr.recv_cq.shared().ctx.inner, &ctx.inner)
        {
            return Err(inval("the CQs belong to another device context".into()));
        }
        let cap = attr.cap;
        let max_send_sge = u32::from(dev.max_sq_sge).min(2);
        if cap.max_send_sge > max_send_sge {
            return Err(inval(format!(
                "max_send_sge {} exceeds the device's {max_send_sge}",
                cap.max_send_sge
            )));
        }
        if cap.max_recv_sge > u32::from(dev.max_rq_sge) {
            return Err(inval(format!(
                "max_recv_sge {} exceeds the device's {}",
                cap.max_recv_sge, dev.max_rq_sge
            )));
        }
        if cap.max_send_wr > dev.max_sq_wr || cap.max_recv_wr > dev.max_rq_wr {
            return Err(inval(format!(
                "max_send_wr {} / max_recv_wr {} exceed the device's {} / {}",
                cap.max_send_wr, cap.max_recv_wr, dev.max_sq_wr, dev.max_rq_wr
            )));
        }
        // Like rdma-core: the extended inline size when the kernel reports one.
        let inline_max = if uctx.inline_buf_size_ex != 0 {
            uctx.inline_buf_size_ex
        } else {
            uctx.inline_buf_size
        };
        if cap.max_inline_data > u32::from(inline_max) {
            return Err(inval(format!(
                "max_inline_data {} exceeds the device's inline_buf_size {inline_max}",
                cap.max_inline_data
            )));
        }
        let notsup = |why: String| Error::invalid(op, label(), Errno::OPNOTSUPP, why);
        let has = |c: u32| dev.device_caps & c != 0;
        let mut supp_ops = SendOpsFlags::SEND | SendOpsFlags::SEND_WITH_IMM;
        if attr.qp_type == EfaQpType::Srd {
            if has(EFA_QUERY_DEVICE_CAPS_RDMA_READ) {
                supp_ops |= SendOpsFlags::RDMA_READ;
            }
            if has(EFA_QUERY_DEVICE_CAPS_RDMA_WRITE) {
                supp_ops |= SendOpsFlags::RDMA_WRITE | SendOpsFlags::RDMA_WRITE_WITH_IMM;
            }
        }
        if !supp_ops.contains(attr.send_ops_flags) {
            return Err(notsup(format!(
                "send_ops_flags {:?} include operations this {:?} QP cannot post on this device (supported: {supp_ops:?})",
                attr.send_ops_flags - supp_ops,
                attr.qp_type
            )));
        }
        let inline_write = attr.flags.contains(EfaQpFlags::INLINE_WRITE);
        if inline_write && !has(EFA_QUERY_DEVICE_CAPS_RDMA_WRITE) {
            return Err(notsup(
                "INLINE_WRITE needs the device's RDMA_WRITE cap".into(),
            ));
        }
        if inline_write && attr.qp_type != EfaQpType::Srd {
            return Err(notsup("INLINE_WRITE needs an SRD QP".into()));
        }
        let mut flags = 0u16;
        if attr.flags.contains(EfaQpFlags::UNSOLICITED_WRITE_RECV) {
            if attr.qp_type != EfaQpType::Srd {
                return Err(inval("unsolicited write receive needs an SRD QP".into()));
            }
            if dev.device_caps & EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV == 0 {
                return Err(Error::invalid(
                    op,
                    label(),
                    Errno::OPNOTSUPP,
                    "the device lacks UNSOLICITED_WRITE_RECV",
                ));
            }
            flags |= EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV;
        }
        let gen = QP_GEN.fetch_add(1, Ordering::Relaxed);
        let wqe_size = SqConfig::wqe_size_for(cap.max_inline_data, inline_write);
        let depth = SqConfig::depth_for(cap.max_send_wr, uctx.min_sq_wr);
        let sq_ring_size = depth * wqe_size;
        if sq_ring_size > uctx.max_llq_size {
            return Err(inval(format!(
                "SQ of {depth} x {wqe_size} bytes exceeds the device's LLQ of {} bytes",
                uctx.max_llq_size
            )));
        }
        let rq_cfg = RqConfig::for_caps(0, cap.max_recv_wr, cap.max_recv_sge, gen);
        let qp_type = match attr.qp_type {
            EfaQpType::Srd => IB_QPT_DRIVER,
            EfaQpType::Ud => IB_UVERBS_QPT_UD,
        };
        let req = IbUverbsCreateQp {
            user_handle: next_user_handle(),
            pd_handle: self.handle(),
            send_cq_handle: attr.send_cq.handle(),
            recv_cq_handle: attr.recv_cq.handle(),
            max_send_wr: depth,
            max_recv_wr: rq_cfg.depth(),
            max_send_sge: cap.max_send_sge,
            max_recv_sge: rq_cfg.max_sge,
            max_inline_data: cap.max_inline_data,
            sq_sig_all: u8::from(attr.sq_sig_all),
            qp_type,
            ..Default::default()
        };
        let drv = EfaIbvCreateQp {
            rq_ring_size: rq_cfg.rq_ring_size(),
            sq_ring_size,
            // Only read by the kernel for IB_QPT_DRIVER; zero for UD, as rdma-core sends.
            driver_qp_type: if attr.qp_type == EfaQpType::Srd {
                EFA_QP_DRIVER_TYPE_SRD
            } else {
                0
            },
            flags,
            sl: attr.sl,
            ..Default::default()
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_CREATE_QP,
            &req,
            drv.as_bytes(),
            std::mem::size_of::<IbUverbsCreateQpResp>(),
            std::mem::size_of::<EfaIbvCreateQpResp>(),
        );
        ctx.write_cmd(op, &label, &mut cmd)?;
        let resp: IbUverbsCreateQpResp = cmd.response_as();
        let dresp: EfaIbvCreateQpResp = cmd.driver_response_as();
        let guard = KernelQp {
            ctx,
            handle: resp.qp_handle,
            armed: true,
        };
        let qlabel = || format!("qp {} on {}", resp.qpn, ctx.label());
        let qpn16 = u16::try_from(resp.qpn).map_err(|_| {
            Error::invalid(
                op,
                qlabel(),
                Errno::IO,
                "the device returned a QP number above 16 bits",
            )
        })?;
        let map = |key: u64, len: usize, what: &str| -> Result<Mapping> {
            ctx.channel()
                .mmap(key, len, MapKind::WriteOnly)
                .map_err(|e| {
                    Error::os(op, qlabel(), e).with_reason(format!("mmap of the {what} failed"))
                })
        };
        let llq = map(
            dresp.llq_desc_mmap_key,
            page_align(dresp.llq_desc_offset as usize + sq_ring_size as usize),
            "LLQ (SQ descriptors)",
        )?;
        let sq_db = map(dresp.sq_db_mmap_key, page_align(4), "SQ doorbell")?;
        let rq_len = usize::try_from(dresp.rq_mmap_size)
            .map_err(|_| Error::invalid(op, qlabel(), Errno::IO, "rq_mmap_size too large"))?;
        let rq_ring = map(dresp.rq_mmap_key, rq_len, "RQ ring")?;
        let rq_db = map(dresp.rq_db_mmap_key, page_align(4), "RQ doorbell")?;
        let outside = |what: &str| {
            Error::invalid(
                op,
                qlabel(),
                Errno::IO,
                format!("{what} lies outside its mapping"),
            )
        };
        let desc = llq
            .ptr_at(dresp.llq_desc_offset as usize, sq_ring_size as usize)
            .ok_or_else(|| outside("llq_desc_offset"))?;
        let sq_dbp = sq_db
            .ptr_at(dresp.sq_db_offset as usize, 4)
            .ok_or_else(|| outside("sq_db_offset"))?;
        let rq_dbp = rq_db
            .ptr_at(dresp.rq_db_offset as usize, 4)
            .ok_or_else(|| outside("rq_db_offset"))?;
        let mut caps = DeviceCaps {
            device_caps: dev.device_caps,
            max_rdma_size: dev.max_rdma_size,
        };
        if attr.qp_type == EfaQpType::Ud {
            caps.device_caps &=
                !(EFA_QUERY_DEVICE_CAPS_RDMA_READ | EFA_QUERY_DEVICE_CAPS_RDMA_WRITE);
        }
        let sq_cfg = SqConfig {
            qp_num: resp.qpn,
            qp_type: match attr.qp_type {
                EfaQpType::Srd => QpType::Srd,
                EfaQpType::Ud => QpType::Ud,
            },
            depth,
            wqe_size,
            max_send_sge: cap.max_send_sge.max(1),
            max_rdma_sge: 1,
            max_inline_data: cap.max_inline_data,
            inline_write,
            max_tx_batch: uctx.max_tx_batch,
            min_sq_wr: uctx.min_sq_wr,
            caps,
            gen,
        };
        let rq_cfg = RqConfig {
            qp_num: resp.qpn,
            ..rq_cfg
        };
        // SAFETY: `desc` has `sq_ring_size` writable bytes inside `llq`, `sq_dbp` 4 bytes
        // inside `sq_db`; both mappings move into the EfaQp that owns the queue and are
        // dropped after it (field order). Only this queue writes them.
        let mut sq = unsafe { SendQueue::new(sq_cfg, desc, sq_ring_size as usize, sq_dbp.cast()) }
            .map_err(|e| super::provider_error(op, qlabel(), &e))?;
        // SAFETY: `rq_ring` is the whole RQ ring mapping (`rq_len` bytes), `rq_dbp` 4 bytes of
        // `rq_db`; both move into the same EfaQp and outlive the queue.
        let mut rq = unsafe { RecvQueue::new(rq_cfg, rq_ring.as_ptr(), rq_len, rq_dbp.cast()) }
            .map_err(|e| super::provider_error(op, qlabel(), &e))?;
        let send_table = scq.table.clone();
        let recv_table = rcq.table.clone();
        let taken = || Error::invalid(op, qlabel(), Errno::EXIST, "wr_id completer taken twice");
        let sc = sq.take_completer().ok_or_else(taken)?;
        let rc = rq.take_completer().ok_or_else(taken)?;
        let in_use = |which: &str| {
            Error::invalid(
                op,
                qlabel(),
                Errno::EXIST,
                format!("QP number already in use on the {which} CQ"),
            )
        };
        if Arc::ptr_eq(&send_table, &recv_table) {
            send_table
                .register(qpn16, Some(sc), Some(rc))
                .map_err(|_| in_use("send/receive"))?;
        } else {
            send_table
                .register(qpn16, Some(sc), None)
                .map_err(|_| in_use("send"))?;
            if recv_table.register(qpn16, None, Some(rc)).is_err() {
                send_table.unregister(qpn16);
                return Err(in_use("receive"));
            }
        }
        let mut guard = guard;
        guard.armed = false;
        Ok(EfaQp {
            pd: self.clone(),
            handle: resp.qp_handle,
            qpn: resp.qpn,
            qp_type: attr.qp_type,
            state: EfaQpState::Reset,
            sq_sig_all: attr.sq_sig_all,
            cap: EfaQpCap {
                max_send_wr: depth,
                max_recv_wr: rq_cfg.depth(),
                max_send_sge: cap.max_send_sge.max(1),
                max_recv_sge: rq_cfg.max_sge,
                max_inline_data: cap.max_inline_data,
            },
            send_ops: attr.send_ops_flags,
            qpn16,
            sq,
            rq,
            send_table,
            recv_table,
            staging: vec![EMPTY_STAGED; depth as usize].into_boxed_slice(),
            destroyed: false,
            _maps: [llq, sq_db, rq_ring, rq_db],
            _cqs: QpCqs::new(Some(attr.send_cq), Some(attr.recv_cq)),
        })
    }
}

impl EfaQp {
    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        self.qpn
    }
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
    /// The transport.
    pub fn qp_type(&self) -> EfaQpType {
        self.qp_type
    }
    /// The state as last set through [`EfaQp::modify`].
    pub fn state(&self) -> EfaQpState {
        self.state
    }
    /// The capacities the QP was created with (depths rounded up as the device needs).
    pub fn cap(&self) -> EfaQpCap {
        self.cap
    }
    /// The PD.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    fn label(&self) -> String {
        format!("qp {} on {}", self.qpn, self.pd.context().label())
    }

    /// Changes QP attributes (`ibv_modify_qp`): for EFA, RESET→INIT with pkey index, port and
    /// qkey; INIT→RTR; RTR→RTS with sq_psn (and rnr_retry).
    #[doc(alias = "ibv_modify_qp")]
    pub fn modify(&mut self, attr: &EfaQpAttr) -> Result<()> {
        let op = "modify_qp";
        let mut req = IbUverbsModifyQp {
            qp_handle: self.handle,
            ..Default::default()
        };
        let mut mask = 0;
        if let Some(s) = attr.qp_state {
            mask |= IB_QP_STATE;
            req.qp_state = s.raw();
        }
        if let Some(q) = attr.qkey {
            mask |= IB_QP_QKEY;
            req.qkey = q;
        }
        if let Some(p) = attr.sq_psn {
            mask |= IB_QP_SQ_PSN;
            req.sq_psn = p;
        }
        if let Some(p) = attr.pkey_index {
            mask |= IB_QP_PKEY_INDEX;
            req.pkey_index = p;
        }
        if let Some(p) = attr.port_num {
            mask |= IB_QP_PORT;
            req.port_num = p;
        }
        if let Some(r) = attr.rnr_retry {
            mask |= IB_QP_RNR_RETRY;
            req.rnr_retry = r;
        }
        req.attr_mask = mask;
        let mut cmd = legacy_cmd(IB_USER_VERBS_CMD_MODIFY_QP, &req, &[], 0, 0);
        self.pd
            .context()
            .write_cmd(op, &|| self.label(), &mut cmd)
            .map_err(|e| {
                if e.is(Errno::INVAL) {
                    e.with_reason(format!(
                        "the kernel refused {:?} from {:?} with mask {mask:#x}",
                        attr.qp_state, self.state
                    ))
                } else {
                    e
                }
            })?;
        if let Some(s) = attr.qp_state {
            self.state = s;
        }
        Ok(())
    }

    /// RESET→INIT→RTR→RTS with `qkey` and `sq_psn` 0, as libfabric brings up SRD and UD QPs.
    pub fn modify_to_rts(&mut self, qkey: u32) -> Result<()> {
        self.modify(&EfaQpAttr {
            qp_state: Some(EfaQpState::Init),
            qkey: Some(qkey),
            pkey_index: Some(0),
            port_num: Some(1),
            ..Default::default()
        })?;
        self.modify(&EfaQpAttr {
            qp_state: Some(EfaQpState::Rtr),
            ..Default::default()
        })?;
        self.modify(&EfaQpAttr {
            qp_state: Some(EfaQpState::Rts),
            sq_psn: Some(0),
            ..Default::default()
        })
    }

    /// Queries the QP (`ibv_query_qp`).
    #[doc(alias = "ibv_query_qp")]
    pub fn query(&self) -> Result<EfaQpQuery> {
        let req = IbUverbsQueryQp {
            qp_handle: self.handle,
            attr_mask: IB_QP_STATE | IB_QP_QKEY | IB_QP_SQ_PSN | IB_QP_CAP,
            ..Default::default()
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_QUERY_QP,
            &req,
            &[],
            std::mem::size_of::<IbUverbsQueryQpResp>(),
            0,
        );
        self.pd
            .context()
            .write_cmd("query_qp", &|| self.label(), &mut cmd)?;
        let r: IbUverbsQueryQpResp = cmd.response_as();
        Ok(EfaQpQuery {
            state: EfaQpState::from_raw(r.qp_state),
            qkey: r.qkey,
            sq_psn: r.sq_psn,
            cap: EfaQpCap {
                max_send_wr: r.max_send_wr,
                max_recv_wr: r.max_recv_wr,
                max_send_sge: r.max_send_sge,
                max_recv_sge: r.max_recv_sge,
                max_inline_data: r.max_inline_data,
            },
            sq_sig_all: r.sq_sig_all != 0,
        })
    }

    #[inline]
    fn check_rts(&self, op: &'static str) -> Result<()> {
        if self.state != EfaQpState::Rts {
            return Err(self.not_rts(op));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn not_rts(&self, op: &'static str) -> Error {
        Error::invalid(
            op,
            self.label(),
            Errno::INVAL,
            format!("the QP is in {:?}, sends need RTS", self.state),
        )
    }

    /// Posts send WRs (`ibv_post_send`). Every WR is validated (signaled or `sq_sig_all`, SGE
    /// count, inline size, operation allowed by QP type and device caps, queue space) before a
    /// byte reaches the device; the first refused WR ends the list and is named by index in
    /// the error, the ones before it are posted. Returns the number posted.
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<usize> {
        // One plain WR on an RTS QP (the common case of a latency-bound poster) is posted
        // here without a stack frame; everything else, and whatever `post_single` declines
        // (it then has done nothing), goes the general way.
        if let [wr] = wrs {
            if self.state == EfaQpState::Rts && self.sq.post_single(wr, self.sq_sig_all) {
                return Ok(1);
            }
        }
        self.post_send_general(wrs)
    }

    /// [`post_send`](Self::post_send) for every list but a single plain WR; out of line so the
    /// single-WR path does not pay for its registers and error handling.
    #[inline(never)]
    fn post_send_general(&mut self, wrs: &[SendWr<'_>]) -> Result<usize> {
        self.check_rts("post_send")?;
        match self.sq.post_send_with(wrs, self.sq_sig_all) {
            Ok(n) => Ok(n),
            Err(e) => Err(self.post_send_error(e)),
        }
    }

    #[cold]
    #[inline(never)]
    fn post_send_error(&self, e: uverbs_efa::PostError) -> Error {
        Error::invalid(
            "post_send",
            self.label(),
            Errno::from_raw_os_error(e.error.errno()),
            format!(
                "work request {} refused ({} before it posted): {}",
                e.index, e.index, e.error
            ),
        )
    }

    /// Posts receive WRs (`ibv_post_recv`); same list semantics as [`EfaQp::post_send`].
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<usize> {
        if matches!(self.state, EfaQpState::Reset | EfaQpState::Err) {
            return Err(Error::invalid(
                "post_recv",
                self.label(),
                Errno::INVAL,
                format!(
                    "the QP is in {:?}; receives need INIT, RTR or RTS",
                    self.state
                ),
            ));
        }
        self.rq.post_recv(wrs).map_err(|e| {
            Error::invalid(
                "post_recv",
                self.label(),
                Errno::from_raw_os_error(e.error.errno()),
                e.to_string(),
            )
        })
    }

    /// Starts a batch of send WRs (`ibv_wr_start`). Nothing reaches the device until
    /// [`EfaSendSession::complete`]; dropping the session discards the batch (`ibv_wr_abort`).
    #[doc(alias = "ibv_wr_start")]
    pub fn wr_start(&mut self) -> Result<EfaSendSession<'_>> {
        self.check_rts("wr_start")?;
        Ok(EfaSendSession {
            qp: self,
            n: 0,
            err: None,
        })
    }

    /// Destroys the QP now (`ibv_destroy_qp`) and returns the events the kernel reported.
    /// Completions the device still writes for it are skipped by the CQ's poll.
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy(mut self) -> Result<u32> {
        self.destroyed = true;
        let r = destroy_qp_cmd(self.pd.context(), self.handle)
            .map_err(|e| Error::os("destroy_qp", self.label(), e));
        self.unregister();
        r
    }

    fn unregister(&self) {
        self.send_table.unregister(self.qpn16);
        if !Arc::ptr_eq(&self.send_table, &self.recv_table) {
            self.recv_table.unregister(self.qpn16);
        }
    }
}

impl Drop for EfaQp {
    fn drop(&mut self) {
        if self.destroyed {
            return;
        }
        if let Err(e) = destroy_qp_cmd(self.pd.context(), self.handle) {
            crate::report_drop_error("destroy_qp", &self.label(), e);
        }
        self.unregister();
    }
}

/// A batch of send WRs (`ibv_wr_start` … `ibv_wr_complete`). WRs are copied into the QP's
/// staging area (allocated at create time); [`complete`](Self::complete) validates and posts
/// them all, or none.
pub struct EfaSendSession<'q> {
    qp: &'q mut EfaQp,
    n: usize,
    err: Option<Error>,
}

impl std::fmt::Debug for EfaSendSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EfaSendSession({}, {} staged)", self.qp.label(), self.n)
    }
}

impl EfaSendSession<'_> {
    fn stage(&mut self, wr_id: u64, op: SendOp, dest: UdAddr, payload: Payload<'_>) {
        if self.err.is_some() {
            return;
        }
        let needed = match op {
            SendOp::Send => SendOpsFlags::SEND,
            SendOp::SendImm { .. } => SendOpsFlags::SEND_WITH_IMM,
            SendOp::RdmaRead { .. } => SendOpsFlags::RDMA_READ,
            SendOp::RdmaWrite { .. } => SendOpsFlags::RDMA_WRITE,
            SendOp::RdmaWriteImm { .. } => SendOpsFlags::RDMA_WRITE_WITH_IMM,
        };
        if !self.qp.send_ops.contains(needed) {
            let n = self.n;
            self.err = Some(Error::invalid(
                "wr_complete",
                self.qp.label(),
                Errno::OPNOTSUPP,
                format!(
                    "work request {n}: {needed:?} is not in the QP's send_ops_flags {:?}",
                    self.qp.send_ops
                ),
            ));
            return;
        }
        let depth = self.qp.staging.len();
        if self.n >= depth {
            self.err = Some(Error::invalid(
                "wr_complete",
                self.qp.label(),
                Errno::NOMEM,
                format!("work request {}: the SQ holds {depth} WRs", self.n),
            ));
            return;
        }
        let mut st = EMPTY_STAGED;
        st.wr_id = wr_id;
        st.op = op;
        st.dest = dest;
        st.signaled = true;
        match payload {
            Payload::Sge(s) => {
                if s.len() > 2 {
                    let n = self.n;
                    self.err = Some(Error::invalid(
                        "wr_complete",
                        self.qp.label(),
                        Errno::INVAL,
                        format!("work request {n}: {} SGEs, a WQE holds at most 2", s.len()),
                    ));
                    return;
                }
                st.n = s.len() as u8;
                st.sges[..s.len()].copy_from_slice(s);
            }
            Payload::Inline(bufs) => {
                let len: usize = bufs.iter().map(|b| b.len()).sum();
                if len > st.inline_data.len() {
                    let n = self.n;
                    self.err = Some(Error::invalid(
                        "wr_complete",
                        self.qp.label(),
                        Errno::INVAL,
                        format!("work request {n}: {len} inline bytes, a WQE holds at most 80"),
                    ));
                    return;
                }
                let mut off = 0;
                for b in bufs {
                    st.inline_data[off..off + b.len()].copy_from_slice(b);
                    off += b.len();
                }
                st.inline = true;
                st.inline_len = len as u8;
            }
        }
        self.qp.staging[self.n] = st;
        self.n += 1;
    }

    /// `ibv_wr_send` with `ibv_wr_set_ud_addr` and `ibv_wr_set_sge_list`.
    #[doc(alias = "ibv_wr_send")]
    pub fn send(&mut self, wr_id: u64, dest: UdAddr, sges: &[Sge]) {
        self.stage(wr_id, SendOp::Send, dest, Payload::Sge(sges));
    }
    /// `ibv_wr_send` with `ibv_wr_set_inline_data`.
    #[doc(alias = "ibv_wr_set_inline_data")]
    pub fn send_inline(&mut self, wr_id: u64, dest: UdAddr, data: &[u8]) {
        self.stage(wr_id, SendOp::Send, dest, Payload::Inline(&[data]));
    }
    /// `ibv_wr_send_imm`.
    #[doc(alias = "ibv_wr_send_imm")]
    pub fn send_imm(&mut self, wr_id: u64, dest: UdAddr, imm: u32, sges: &[Sge]) {
        self.stage(wr_id, SendOp::SendImm { imm }, dest, Payload::Sge(sges));
    }
    /// `ibv_wr_rdma_read` (into the local `sges`).
    #[doc(alias = "ibv_wr_rdma_read")]
    pub fn rdma_read(
        &mut self,
        wr_id: u64,
        dest: UdAddr,
        rkey: u32,
        remote_addr: u64,
        sges: &[Sge],
    ) {
        self.stage(
            wr_id,
            SendOp::RdmaRead { rkey, remote_addr },
            dest,
            Payload::Sge(sges),
        );
    }
    /// `ibv_wr_rdma_write`.
    #[doc(alias = "ibv_wr_rdma_write")]
    pub fn rdma_write(
        &mut self,
        wr_id: u64,
        dest: UdAddr,
        rkey: u32,
        remote_addr: u64,
        sges: &[Sge],
    ) {
        self.stage(
            wr_id,
            SendOp::RdmaWrite { rkey, remote_addr },
            dest,
            Payload::Sge(sges),
        );
    }
    /// `ibv_wr_rdma_write` with `ibv_wr_set_inline_data`: the bytes travel in the WQE (needs
    /// [`EfaQpFlags::INLINE_WRITE`]; at most `max_inline_data` bytes).
    pub fn rdma_write_inline(
        &mut self,
        wr_id: u64,
        dest: UdAddr,
        rkey: u32,
        remote_addr: u64,
        data: &[u8],
    ) {
        self.stage(
            wr_id,
            SendOp::RdmaWrite { rkey, remote_addr },
            dest,
            Payload::Inline(&[data]),
        );
    }
    /// `ibv_wr_rdma_write_imm`.
    #[doc(alias = "ibv_wr_rdma_write_imm")]
    pub fn rdma_write_imm(
        &mut self,
        wr_id: u64,
        dest: UdAddr,
        rkey: u32,
        remote_addr: u64,
        imm: u32,
        sges: &[Sge],
    ) {
        let op = SendOp::RdmaWriteImm {
            rkey,
            remote_addr,
            imm,
        };
        self.stage(wr_id, op, dest, Payload::Sge(sges));
    }

    /// Number of WRs staged.
    pub fn staged(&self) -> usize {
        self.n
    }

    /// `ibv_wr_complete`: validates every staged WR and posts them all with one doorbell per
    /// `max_tx_batch`, or — if any is refused — posts none and names it.
    #[doc(alias = "ibv_wr_complete")]
    pub fn complete(self) -> Result<usize> {
        if let Some(e) = self.err {
            return Err(e);
        }
        let qp = self.qp;
        let label = || format!("qp {} on {}", qp.qpn, qp.pd.context().label());
        let mut s = qp.sq.start();
        for (i, st) in qp.staging[..self.n].iter().enumerate() {
            let one: [&[u8]; 1] = [&st.inline_data[..usize::from(st.inline_len)]];
            let payload = if st.inline {
                Payload::Inline(&one)
            } else {
                Payload::Sge(&st.sges[..usize::from(st.n)])
            };
            let wr = SendWr {
                wr_id: st.wr_id,
                op: st.op,
                dest: st.dest,
                payload,
                signaled: st.signaled,
                processing_hints: st.hints,
            };
            if let Err(e) = s.post(&wr) {
                s.abort();
                return Err(Error::invalid(
                    "wr_complete",
                    label(),
                    Errno::from_raw_os_error(e.errno()),
                    format!(
                        "work request {i} refused, none of the {} posted: {e}",
                        self.n
                    ),
                ));
            }
        }
        Ok(s.complete())
    }

    /// `ibv_wr_abort`: discards the staged WRs.
    #[doc(alias = "ibv_wr_abort")]
    pub fn abort(self) {}
}
