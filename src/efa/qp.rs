//! EFA QPs: the rings behind a [`Qp`] on an EFA device — UD (`ibv_create_qp`) and SRD
//! (`efadv_create_qp_ex` with `EFADV_QP_DRIVER_TYPE_SRD`) — and their data path
//! (`ibv_post_send`, `ibv_post_recv`, the `ibv_wr_*` API) through the generic work requests.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use bitflags::bitflags;
use uverbs_efa::rq::{RecvQueue, RqConfig};
use uverbs_efa::sq::{DeviceCaps, SendQueue, SqConfig};
use uverbs_efa::table::{sub_cq_bit, QpTable};
use uverbs_efa::EfaError;
use uverbs_uapi::efa::{
    EfaIbvCreateQp, EfaIbvCreateQpResp, EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID,
    EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV, EFA_QP_DRIVER_TYPE_SRD,
    EFA_QUERY_DEVICE_CAPS_RDMA_READ, EFA_QUERY_DEVICE_CAPS_RDMA_WRITE,
    EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID, EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV,
};
use uverbs_uapi::verbs::IB_UVERBS_QPT_UD;
use uverbs_uapi::write::{
    IbUverbsCreateQp, IbUverbsCreateQpResp, IbUverbsModifyQp, IB_USER_VERBS_CMD_MODIFY_QP,
};
use zerocopy::IntoBytes;

use crate::ah::Ah;
use crate::channel::{MapKind, Mapping, WriteCmd};
use crate::context::legacy_cmd;
use crate::error::{Errno, Error, Result};
use crate::event::next_user_handle;
use crate::mr::Sge;
use crate::pd::Pd;
use crate::provider::{Fast, QpOps, QpRing, Step};
use crate::qp::{
    Qp, QpAttrMask, QpCap, QpInitAttr, QpInner, QpState, QpType, SendOpsFlags, WrBatch,
};
use crate::wr::{PostError, RecvWr, SendFlags, SendWr, UdDest, WrOp};

/// `IBV_QPT_DRIVER`: the generic type of driver-defined QPs (SRD).
const IB_QPT_DRIVER: u8 = 0xff;

/// Generation of QP numbers: bumped per QP so a stale CQE for an earlier QP with the same
/// number cannot complete a new QP's WR (the pools refuse ids of another generation).
static QP_GEN: AtomicU16 = AtomicU16::new(0);

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

bitflags! {
    /// `EFADV_WR_EX_WITH_*`: the `efadv_wr_*` setters a QP's [`crate::WrBatch`] may use.
    #[doc(alias = "efadv_qp_init_attr.wr_flags")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EfaWrExFlags: u64 {
        /// `EFADV_WR_EX_WITH_PROCESSING_HINTS`: [`crate::WrBatch::efadv_set_processing_hints`]
        /// (`efadv_wr_set_processing_hints`, rdma-core v64).
        const WITH_PROCESSING_HINTS = 1 << 0;
    }
}

bitflags! {
    /// `EFADV_WR_PROCESSING_HINT_*`: how the device should treat one send WR.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EfaProcessingHints: u32 {
        /// `EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE` (WQE: `EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE`).
        const BURST_PPS_SENSITIVE = 1 << 0;
    }
}

/// The EFA part of [`Pd::efadv_create_qp_ex`] (`struct efadv_qp_init_attr`): what an EFA QP
/// has beyond [`QpInitAttr`]. The driver QP type is [`QpType::Srd`] in the `QpInitAttr`.
#[doc(alias = "efadv_qp_init_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EfaQpInitAttr {
    /// `EFADV_QP_FLAGS_*`.
    pub flags: EfaQpFlags,
    /// Service level.
    pub sl: u8,
    /// `EFADV_WR_EX_WITH_*`: the `efadv_wr_*` setters the QP's `wr_*` batches may use (as
    /// libefa, no device cap gates them).
    pub wr_flags: EfaWrExFlags,
}

/// The rings of an EFA QP. Posts through `&mut` without locks, allocation or syscalls; see
/// `crate::efa` for how it shares wr_id bookkeeping with its CQs.
pub(crate) struct EfaQp {
    // The queues own the posting halves of the wr_id pools; the completing halves live in
    // the tables of the CQs (see `crate::efa`). Declared before `cold` (its mappings), so
    // they are dropped before the memory they point into is unmapped.
    sq: SendQueue,
    rq: RecvQueue,
    qpn16: u16,
    /// The QP's state (kept by `QpOps::set_state`): EFA sends in RTS only, receives in INIT,
    /// RTR and RTS.
    state: QpState,
    cold: Box<EfaQpCold>,
}

/// What an EFA QP keeps but never reads while posting: the CQ tables it is registered in
/// (for [`EfaQp::unregister`]) and the mappings its queues point into. Out of line, so
/// that a [`Qp`] (and a `Vec` of them) holds inline only what the data path reads: the EFA
/// arm of the QP's ring is then no larger than the rxe arm.
struct EfaQpCold {
    send_table: Arc<QpTable>,
    recv_table: Arc<QpTable>,
    _maps: [Mapping; 4],
}

fn page_align(n: usize) -> usize {
    let p = rustix::param::page_size();
    n.div_ceil(p) * p
}

/// Checks the generic attributes against what the EFA kernel driver and rdma-core's
/// `efa_check_qp_attr` accept.
fn check_attr(pd: &Pd, op: &'static str, attr: &QpInitAttr<'_>) -> Result<()> {
    let notsup = |why: String| Error::invalid(op, pd.label(), Errno::OPNOTSUPP, why);
    match attr.qp_type {
        QpType::Ud | QpType::Srd => {}
        t => {
            return Err(notsup(format!(
                "EFA has UD and SRD QPs only, not {t:?} (the EFA kernel driver refuses it)"
            )))
        }
    }
    if attr.srq.is_some() {
        return Err(Error::invalid(
            op,
            pd.label(),
            Errno::INVAL,
            "EFA has no shared receive queues: a QP has its own RQ",
        ));
    }
    if attr.create_flags != 0 {
        return Err(notsup(format!(
            "create_flags {:#x}: EFA QPs take none",
            attr.create_flags
        )));
    }
    Ok(())
}

/// Creates the kernel QP and maps its rings: `Pd::create_qp[_ex]` (UD, no EFA attributes,
/// as libefa's `efa_create_qp`) and `Pd::efadv_create_qp_ex`.
pub(crate) fn create_qp(
    pd: &Pd,
    op: &'static str,
    attr: &QpInitAttr<'_>,
    efa: &EfaQpInitAttr,
    send_ops: Option<SendOpsFlags>,
) -> Result<Qp> {
    let ctx = pd.context();
    let label = || pd.label();
    let inval = |why: String| Error::invalid(op, label(), Errno::INVAL, why);
    let uctx = ctx.efa_ucontext(op)?;
    check_attr(pd, op, attr)?;
    let srd = attr.qp_type == QpType::Srd;
    let (Some(send_cq), Some(recv_cq)) = (attr.send_cq, attr.recv_cq) else {
        return Err(inval("an EFA QP needs a send CQ and a receive CQ".into()));
    };
    let dev = ctx.efa_query_raw(op)?;
    let (Some(scq), Some(rcq)) = (send_cq.ring.efa(), recv_cq.ring.efa()) else {
        return Err(inval(
            "send_cq and recv_cq must be CQs of this EFA device".into(),
        ));
    };
    if !Arc::ptr_eq(&send_cq.shared().ctx.inner, &ctx.inner)
        || !Arc::ptr_eq(&recv_cq.shared().ctx.inner, &ctx.inner)
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
    if srd {
        if has(EFA_QUERY_DEVICE_CAPS_RDMA_READ) {
            supp_ops |= SendOpsFlags::RDMA_READ;
        }
        if has(EFA_QUERY_DEVICE_CAPS_RDMA_WRITE) {
            supp_ops |= SendOpsFlags::RDMA_WRITE | SendOpsFlags::RDMA_WRITE_WITH_IMM;
        }
    }
    if let Some(ops) = send_ops {
        if !supp_ops.contains(ops) {
            return Err(notsup(format!(
                "send_ops_flags {:?} include operations this {:?} QP cannot post on this device (supported: {supp_ops:?})",
                ops - supp_ops,
                attr.qp_type
            )));
        }
    }
    let inline_write = efa.flags.contains(EfaQpFlags::INLINE_WRITE);
    if inline_write && !has(EFA_QUERY_DEVICE_CAPS_RDMA_WRITE) {
        return Err(notsup(
            "INLINE_WRITE needs the device's RDMA_WRITE cap".into(),
        ));
    }
    if inline_write && !srd {
        return Err(notsup("INLINE_WRITE needs an SRD QP".into()));
    }
    let mut flags = 0u16;
    if efa.flags.contains(EfaQpFlags::UNSOLICITED_WRITE_RECV) {
        if !srd {
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

    // As libefa (`efa_setup_qp`): on a device with the cap every QP's SQ carries 64-bit
    // request ids (no id pool); the CQs of such a device are all created with
    // EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID (`Context::efadv_create_cq`).
    let req_id_64 = has(EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID);
    if req_id_64 {
        flags |= EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID;
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
    let qp_type = if srd { IB_QPT_DRIVER } else { IB_UVERBS_QPT_UD };
    let req = IbUverbsCreateQp {
        user_handle: next_user_handle(),
        pd_handle: pd.handle(),
        send_cq_handle: send_cq.handle(),
        recv_cq_handle: recv_cq.handle(),
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
        driver_qp_type: if srd { EFA_QP_DRIVER_TYPE_SRD } else { 0 },
        flags,
        sl: efa.sl,
        ..Default::default()
    };
    // As libefa: the legacy write, with `efa_ibv_create_qp` (and destroyed with the legacy
    // write too).
    let (inner, cmd) = pd.create_qp_legacy(
        op,
        attr,
        &req,
        drv.as_bytes(),
        std::mem::size_of::<EfaIbvCreateQpResp>(),
    )?;
    // From here `inner` destroys the kernel QP if anything fails.
    let resp: IbUverbsCreateQpResp = cmd.response_as();
    let dresp: EfaIbvCreateQpResp = cmd.driver_response_as();
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
    if !srd {
        caps.device_caps &= !(EFA_QUERY_DEVICE_CAPS_RDMA_READ | EFA_QUERY_DEVICE_CAPS_RDMA_WRITE);
    }
    let sq_cfg = SqConfig {
        qp_num: resp.qpn,
        qp_type: attr.qp_type,
        domain: crate::wr::pd_id(pd),
        sq_sig_all: attr.sq_sig_all,
        processing_hints: efa.wr_flags.contains(EfaWrExFlags::WITH_PROCESSING_HINTS),
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
        req_id_64,
    };
    let rq_cfg = RqConfig {
        qp_num: resp.qpn,
        ..rq_cfg
    };
    // SAFETY: `desc` has `sq_ring_size` writable bytes inside `llq`, `sq_dbp` 4 bytes
    // inside `sq_db`; both mappings move into the EfaQp that owns the queue and are
    // dropped after it (field order). Only this queue writes them.
    let mut sq = unsafe { SendQueue::new(sq_cfg, desc, sq_ring_size as usize, sq_dbp.cast()) }
        .map_err(|e| Error::provider(op, qlabel(), e))?;
    // The QP starts in RESET: no send until `set_rts` (the ring's `rts` below).
    sq.set_plain_open(false);
    // SAFETY: `rq_ring` is the whole RQ ring mapping (`rq_len` bytes), `rq_dbp` 4 bytes of
    // `rq_db`; both move into the same EfaQp and outlive the queue.
    let mut rq = unsafe { RecvQueue::new(rq_cfg, rq_ring.as_ptr(), rq_len, rq_dbp.cast()) }
        .map_err(|e| Error::provider(op, qlabel(), e))?;
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
    // Where the kernel says this QP's CQEs land: each CQ's polls visit those sub-CQs (and
    // no sub-CQ no QP of theirs uses, as libefa's `ref_cnt`).
    let send_sub = sub_cq_bit(dresp.send_sub_cq_idx, scq.sub_cqs());
    let recv_sub = sub_cq_bit(dresp.recv_sub_cq_idx, rcq.sub_cqs());
    if Arc::ptr_eq(&send_table, &recv_table) {
        send_table
            .register(qpn16, send_sub | recv_sub, Some(sc), Some(rc))
            .map_err(|_| in_use("send/receive"))?;
    } else {
        send_table
            .register(qpn16, send_sub, Some(sc), None)
            .map_err(|_| in_use("send"))?;
        if recv_table
            .register(qpn16, recv_sub, None, Some(rc))
            .is_err()
        {
            send_table.unregister(qpn16);
            return Err(in_use("receive"));
        }
    }
    let qp_cap = QpCap {
        max_send_wr: depth,
        max_recv_wr: rq_cfg.depth(),
        max_send_sge: cap.max_send_sge.max(1),
        max_recv_sge: rq_cfg.max_sge,
        max_inline_data: cap.max_inline_data,
    };
    let ring = QpRing::Efa(EfaQp {
        sq,
        rq,
        qpn16,
        state: QpState::Reset,
        cold: Box::new(EfaQpCold {
            send_table,
            recv_table,
            _maps: [llq, sq_db, rq_ring, rq_db],
        }),
    });
    Ok(Qp::assemble(ring, inner, attr, qp_cap, send_ops))
}

impl Pd {
    /// Creates an EFA QP with the EFA attributes (`efadv_create_qp_ex`): a UD QP, or an SRD
    /// one with `attr.qp_type` [`QpType::Srd`] (`IBV_QPT_DRIVER` with
    /// `EFADV_QP_DRIVER_TYPE_SRD`). The generic CREATE_QP command with `efa_ibv_create_qp`
    /// driver data, then the LLQ (write-combined device memory), the SQ and RQ doorbells and
    /// the RQ ring are mapped. The `wr_*` API takes `attr.send_ops_flags` (checked against the
    /// QP type and the device's caps: `EOPNOTSUPP`).
    ///
    /// Refused on other devices, and for what EFA cannot do (connected QPs, an SRQ).
    ///
    /// ```
    /// # let fabric = uverbs_efa_model::EfaFabric::new(1);
    /// # let ctx = fabric.add_device(Default::default()).open()?;
    /// use uverbs::{EfaQpInitAttr, QpCap, QpInitAttr, QpState, QpType};
    ///
    /// let pd = ctx.alloc_pd()?;
    /// let cq = ctx.create_cq(256, None, 0)?;
    /// let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    /// let mut attr = QpInitAttr::new(QpType::Srd, &cq, &cq, cap);
    /// attr.sq_sig_all = true;
    /// let qp = pd.efadv_create_qp_ex(&attr, &EfaQpInitAttr::default())?;
    /// assert_eq!((qp.qp_type(), qp.state()), (QpType::Srd, QpState::Reset));
    /// // Then modify to INIT / RTR / RTS with a Q_Key, and post with `SendWr::ud`.
    /// # Ok::<(), uverbs::Error>(())
    /// ```
    #[doc(alias = "efadv_create_driver_qp")]
    pub fn efadv_create_qp_ex(&self, attr: &QpInitAttr<'_>, efa: &EfaQpInitAttr) -> Result<Qp> {
        let op = "efadv_create_qp_ex";
        self.context().efa_device(op)?;
        self.check_qp_attr(op, attr)?;
        create_qp(
            self,
            "efadv_create_qp_ex",
            attr,
            efa,
            Some(attr.send_ops_flags),
        )
    }
}

/// The modify command an EFA QP takes: only the fields `mask` names (the rest zero, as libefa
/// sends through `ibv_cmd_modify_qp`), or the reason EFA cannot modify what it names.
fn modify_req(
    full: &IbUverbsModifyQp,
    mask: QpAttrMask,
) -> std::result::Result<IbUverbsModifyQp, String> {
    let supported = QpAttrMask::STATE
        | QpAttrMask::CUR_STATE
        | QpAttrMask::EN_SQD_ASYNC_NOTIFY
        | QpAttrMask::PKEY_INDEX
        | QpAttrMask::PORT
        | QpAttrMask::QKEY
        | QpAttrMask::SQ_PSN
        | QpAttrMask::RNR_RETRY;
    if !supported.contains(mask) {
        return Err(format!(
            "EFA QPs modify {supported:?} only, not {:?}",
            mask - supported
        ));
    }
    let mut req = IbUverbsModifyQp {
        qp_handle: full.qp_handle,
        attr_mask: mask.bits(),
        ..Default::default()
    };
    if mask.contains(QpAttrMask::STATE) {
        req.qp_state = full.qp_state;
    }
    if mask.contains(QpAttrMask::CUR_STATE) {
        req.cur_qp_state = full.cur_qp_state;
    }
    if mask.contains(QpAttrMask::EN_SQD_ASYNC_NOTIFY) {
        req.en_sqd_async_notify = full.en_sqd_async_notify;
    }
    if mask.contains(QpAttrMask::PKEY_INDEX) {
        req.pkey_index = full.pkey_index;
    }
    if mask.contains(QpAttrMask::PORT) {
        req.port_num = full.port_num;
    }
    if mask.contains(QpAttrMask::QKEY) {
        req.qkey = full.qkey;
    }
    if mask.contains(QpAttrMask::SQ_PSN) {
        req.sq_psn = full.sq_psn;
    }
    if mask.contains(QpAttrMask::RNR_RETRY) {
        req.rnr_retry = full.rnr_retry;
    }
    Ok(req)
}

impl QpOps for EfaQp {
    /// One plain WR (a signaled SEND of one SGE to an AH of the QP's PD) on an RTS QP: the
    /// provider's single-WR path. Outside RTS that path is closed (`set_state`) and declines.
    #[inline(always)]
    fn post_send_fast(&mut self, wrs: &[SendWr<'_>]) -> Fast {
        match wrs {
            [wr] if self.sq.post_plain(wr) => Fast::Posted,
            _ => Fast::Declined,
        }
    }

    /// Every list but a single plain WR: to the provider as it is, which checks and posts
    /// each WR and names the reason of a refusal. Out of line (the generic dispatch reaches
    /// it and rxe's post by tail calls).
    #[inline(never)]
    fn post_send(
        &mut self,
        wrs: &[SendWr<'_>],
        inner: &QpInner,
    ) -> std::result::Result<(), PostError> {
        if self.state != QpState::Rts {
            return Err(PostError {
                index: 0,
                error: not_rts(inner, "post_send"),
            });
        }
        match self.sq.post_send(wrs) {
            Ok(_) => Ok(()),
            Err(e) => Err(post_error(inner, "post_send", e)),
        }
    }

    /// EFA's single-WR path needs a destination; lists take its runs (`post_send`).
    #[inline(always)]
    fn stage_send(&mut self, _: u64, _: &WrOp, _: SendFlags, _: &[Sge]) -> bool {
        false
    }

    /// Nothing is staged (`stage_send`).
    #[inline(always)]
    fn ring_staged(&mut self, _: &QpInner, _: usize) -> std::result::Result<(), PostError> {
        Ok(())
    }

    /// In INIT, RTR or RTS.
    #[inline]
    fn post_recv(
        &mut self,
        wrs: &[RecvWr<'_>],
        inner: &QpInner,
    ) -> std::result::Result<(), PostError> {
        let state = self.state;
        if matches!(state, QpState::Reset | QpState::Err) {
            return Err(PostError {
                index: 0,
                error: Error::invalid(
                    "post_recv",
                    inner.label(),
                    Errno::INVAL,
                    format!("the QP is in {state:?}; receives need INIT, RTR or RTS"),
                ),
            });
        }
        // The generic WRs are the provider's (`uverbs_wr::RecvWr`): posted as they are.
        match self.rq.post_recv(wrs) {
            Ok(_) => Ok(()),
            Err(e) => Err(post_error(inner, "post_recv", e)),
        }
    }

    fn state(&self) -> QpState {
        self.state
    }

    fn set_state(&mut self, state: QpState) {
        self.state = state;
        // The provider's single-WR path posts only in RTS: `post_send` relies on it.
        self.sq.set_plain_open(state == QpState::Rts);
    }

    /// Only the fields `mask` names (the rest zero, as libefa sends through
    /// `ibv_cmd_modify_qp`), and only what EFA can modify.
    fn modify_command(
        &self,
        base: &IbUverbsModifyQp,
        mask: QpAttrMask,
        _rate_limit: u32,
    ) -> std::result::Result<WriteCmd, String> {
        let req = modify_req(base, mask)?;
        Ok(legacy_cmd(IB_USER_VERBS_CMD_MODIFY_QP, &req, &[], 0, 0))
    }

    fn wr_start(&mut self, inner: &QpInner) -> Result<()> {
        if self.state != QpState::Rts {
            return Err(not_rts(inner, "wr_start"));
        }
        self.sq
            .wr_start()
            .map_err(|e| Error::provider("wr_start", inner.label(), e))
    }

    fn wr_op(&mut self, wr_id: u64, flags: SendFlags, op: WrOp) -> Step {
        Ok(self.sq.wr_op(wr_id, flags, op)?)
    }

    fn wr_set_sge(&mut self, lkey: u32, addr: u64, length: u32) -> Step {
        Ok(self.sq.wr_set_sge_list(&[Sge { addr, length, lkey }])?)
    }

    fn wr_set_sge_list(&mut self, sges: &[Sge]) -> Step {
        Ok(self.sq.wr_set_sge_list(sges)?)
    }

    fn wr_set_inline_data(&mut self, data: &[u8]) -> Step {
        Ok(self.sq.wr_set_inline_data(data)?)
    }

    fn wr_set_ud_addr(&mut self, ah: &Ah, remote_qpn: u32, remote_qkey: u32) -> Step {
        Ok(self
            .sq
            .wr_set_ud_addr(UdDest::new(ah, remote_qpn, remote_qkey))?)
    }

    fn wr_len(&self) -> usize {
        self.sq.wr_len()
    }

    /// Posts every WR of the batch, or none and the first refusal.
    fn wr_complete(&mut self, inner: &QpInner) -> Result<()> {
        match self.sq.wr_complete() {
            Ok(_) => Ok(()),
            Err(e) => Err(Error::provider("wr_complete", inner.label(), e)
                .with_reason(format!("the batch was refused, nothing of it posted: {e}"))),
        }
    }

    fn wr_abort(&mut self) {
        self.sq.wr_abort();
    }

    /// Takes the QP out of its CQs' tables (after the kernel QP is gone).
    fn destroyed(&mut self) {
        let c = &self.cold;
        c.send_table.unregister(self.qpn16);
        if !Arc::ptr_eq(&c.send_table, &c.recv_table) {
            c.recv_table.unregister(self.qpn16);
        }
    }
}

impl WrBatch<'_> {
    /// `efadv_wr_set_processing_hints`: processing hints for the last work request, on an EFA
    /// QP created with [`EfaWrExFlags::WITH_PROCESSING_HINTS`]. Refused (the batch then fails
    /// in `complete`) on other providers' QPs, on an EFA QP created without the flag, and for
    /// hint bits EFA does not define.
    #[doc(alias = "efadv_wr_set_processing_hints")]
    pub fn efadv_set_processing_hints(&mut self, hints: EfaProcessingHints) -> &mut Self {
        let call = "efadv_wr_set_processing_hints";
        if self.err.is_some() {
            return self;
        }
        if self.qp.ring.efa().is_none() {
            let n = self.len().saturating_sub(1);
            let driver = self.qp.pd().context().device().driver().to_string();
            self.err = Some(Error::invalid(
                "wr_complete",
                self.qp.label(),
                Errno::OPNOTSUPP,
                format!(
                    "work request {n} ({call}) refused, nothing of the batch posted: \
                     processing hints are EFA's (efadv), and this is an {driver} QP"
                ),
            ));
            return self;
        }
        // Undefined bits are the provider's to refuse: they reach it as they are (any bit
        // past the byte the WQE field lives in makes the value one it refuses).
        let bits = u8::try_from(hints.bits()).unwrap_or(u8::MAX);
        self.step(call, |ring| match ring.efa_mut() {
            Some(r) => Ok(r.sq.wr_set_processing_hints(bits)?),
            None => Ok(()),
        })
    }
}

/// A provider refusal of a list as the core's: the same index, the error naming `op` and the
/// QP with the provider's reason.
#[cold]
#[inline(never)]
fn post_error(inner: &QpInner, op: &'static str, e: uverbs_wr::PostError<EfaError>) -> PostError {
    e.map(|e| Error::provider(op, inner.label(), e))
}

#[cold]
#[inline(never)]
fn not_rts(inner: &QpInner, op: &'static str) -> Error {
    Error::invalid(
        op,
        inner.label(),
        Errno::INVAL,
        "the QP is not in RTS: EFA sends need RTS",
    )
}

/// Introspection (`efadv_query_qp_wqs`, in `super::introspect`): the queues, read only.
impl EfaQp {
    pub(crate) fn queues(&self) -> (&SendQueue, &RecvQueue) {
        (&self.sq, &self.rq)
    }
}
