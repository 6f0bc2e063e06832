//! EFA QPs: the rings behind a [`Qp`] on an EFA device — UD (`ibv_create_qp`) and SRD
//! (`efadv_create_qp_ex` with `EFADV_QP_DRIVER_TYPE_SRD`) — and their data path
//! (`ibv_post_send`, `ibv_post_recv`, the `ibv_wr_*` API) through the generic work requests.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use bitflags::bitflags;
use uverbs_efa::rq::{RecvQueue, RqConfig};
use uverbs_efa::sq::{
    DeviceCaps, Payload, PlainWr, QpType as EfaType, SendQueue, SendWr as EfaWr, SqConfig, UdAddr,
};
use uverbs_efa::table::{sub_cq_bit, QpTable};
use uverbs_uapi::efa::{
    EfaIbvCreateQp, EfaIbvCreateQpResp, EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID,
    EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV, EFA_QP_DRIVER_TYPE_SRD,
    EFA_QUERY_DEVICE_CAPS_RDMA_READ, EFA_QUERY_DEVICE_CAPS_RDMA_WRITE,
    EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID, EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV,
};
use uverbs_uapi::verbs::IB_UVERBS_QPT_UD;
use uverbs_uapi::write::{
    IbUverbsCreateQp, IbUverbsCreateQpResp, IbUverbsModifyQp, IB_USER_VERBS_CMD_CREATE_QP,
};
use zerocopy::IntoBytes;

use crate::ah::Ah;
use crate::channel::{MapKind, Mapping};
use crate::context::legacy_cmd;
use crate::cq::QpCqs;
use crate::error::{Errno, Error, Result};
use crate::event::next_user_handle;
use crate::mr::Sge;
use crate::pd::Pd;
use crate::qp::{
    Qp, QpAttrMask, QpCap, QpInitAttr, QpInner, QpParts, QpRing, QpState, QpType, SendOpsFlags,
};
use crate::wr::{PostError, RecvWr, SendFlags, SendWr, WrData, WrOp};

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

/// A WR staged by a [`crate::WrBatch`] on an EFA QP: copied out of the caller's borrows so
/// the batch touches the shared queues only in `complete`.
#[derive(Clone, Copy)]
struct Staged {
    wr_id: u64,
    op: WrOp,
    dest: UdAddr,
    has_dest: bool,
    signaled: bool,
    inline: bool,
    n: u8,
    sges: [Sge; 2],
    inline_len: u8,
    inline_data: [u8; 80],
    /// `EFA_IO_PROCESSING_HINT_*` for the WQE's `ctrl3`.
    hints: u8,
}

const EMPTY_STAGED: Staged = Staged {
    wr_id: 0,
    op: WrOp::Send,
    dest: UdAddr {
        ah: 0,
        remote_qpn: 0,
        remote_qkey: 0,
    },
    has_dest: false,
    signaled: false,
    inline: false,
    n: 0,
    sges: [Sge {
        addr: 0,
        length: 0,
        lkey: 0,
    }; 2],
    inline_len: 0,
    inline_data: [0; 80],
    hints: 0,
};

/// The rings of an EFA QP. Posts through `&mut` without locks, allocation or syscalls; see
/// `crate::efa` for how it shares wr_id bookkeeping with its CQs.
pub(crate) struct EfaQpRing {
    // The queues own the posting halves of the wr_id pools; the completing halves live in
    // the tables of the CQs (see `crate::efa`). Declared before `cold` (its mappings), so
    // they are dropped before the memory they point into is unmapped.
    sq: SendQueue,
    rq: RecvQueue,
    qpn16: u16,
    /// The QP's PD ([`crate::wr::pd_id`]): a send's AH must be of it. The QP holds its PD,
    /// so the id stays this PD's while the ring exists.
    pd_id: usize,
    /// The QP's `sq_sig_all` (fixed at creation) as the flag it stands for: SIGNALED with
    /// it, empty without, or-ed into a WR's own flags where the single-WR path reads them.
    sig_all: SendFlags,
    /// Whether the QP is in RTS, the one state EFA sends in: kept by [`Qp::set_state`]
    /// (`crate::Qp`), the only place the QP's state changes, through [`Self::set_rts`].
    rts: bool,
    staging: Box<[Staged]>,
    /// Created with `EFADV_WR_EX_WITH_PROCESSING_HINTS`.
    hints_allowed: bool,
    cold: Box<EfaQpCold>,
}

/// What an EFA QP keeps but never reads while posting: the CQ tables it is registered in
/// (for [`EfaQpRing::unregister`]) and the mappings its queues point into. Out of line, so
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
    let (Some(scq), Some(rcq)) = (send_cq.efa_ring(), recv_cq.efa_ring()) else {
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
    let user_handle = req.user_handle;
    // From here `inner` destroys the kernel QP if anything fails.
    let inner = QpInner::new(QpParts {
        pd: pd.clone(),
        cqs: QpCqs::new(Some(send_cq), Some(recv_cq)),
        srq: None,
        handle: resp.qp_handle,
        qp_num: resp.qpn,
        user_handle,
        qp_context: attr.qp_context,
        legacy_destroy: true,
    });
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
        qp_type: if srd { EfaType::Srd } else { EfaType::Ud },
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
    // inside `sq_db`; both mappings move into the EfaQpRing that owns the queue and are
    // dropped after it (field order). Only this queue writes them.
    let mut sq = unsafe { SendQueue::new(sq_cfg, desc, sq_ring_size as usize, sq_dbp.cast()) }
        .map_err(|e| super::provider_error(op, qlabel(), &e))?;
    // The QP starts in RESET: no send until `set_rts` (the ring's `rts` below).
    sq.set_plain_open(false);
    // SAFETY: `rq_ring` is the whole RQ ring mapping (`rq_len` bytes), `rq_dbp` 4 bytes of
    // `rq_db`; both move into the same EfaQpRing and outlive the queue.
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
    Ok(Qp {
        ring: QpRing::Efa(EfaQpRing {
            sq,
            rq,
            qpn16,
            pd_id: crate::wr::pd_id(pd),
            sig_all: if attr.sq_sig_all {
                SendFlags::SIGNALED
            } else {
                SendFlags::empty()
            },
            rts: false,
            staging: vec![EMPTY_STAGED; depth as usize].into_boxed_slice(),
            hints_allowed: efa.wr_flags.contains(EfaWrExFlags::WITH_PROCESSING_HINTS),
            cold: Box::new(EfaQpCold {
                send_table,
                recv_table,
                _maps: [llq, sq_db, rq_ring, rq_db],
            }),
        }),
        inner,
        qp_type: attr.qp_type,
        cap: qp_cap,
        state: QpState::Reset,
        sq_sig_all: attr.sq_sig_all,
        send_ops,
    })
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
pub(crate) fn modify_req(
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

/// Whether EFA has the operation `op` (rdma-core's EFA provider: SEND, SEND_WITH_IMM and,
/// on SRD with the device caps, the RDMA ones; the provider checks those caps).
#[inline(always)]
fn efa_has(op: &WrOp) -> bool {
    matches!(
        op,
        WrOp::Send
            | WrOp::SendWithImm { .. }
            | WrOp::RdmaRead { .. }
            | WrOp::RdmaWrite { .. }
            | WrOp::RdmaWriteWithImm { .. }
    )
}

#[cold]
#[inline(never)]
fn op_error(inner: &QpInner, op: &'static str, wr_op: WrOp) -> Error {
    Error::invalid(
        op,
        inner.label(),
        Errno::OPNOTSUPP,
        format!(
            "EFA cannot post {:?}: it has SEND, SEND_WITH_IMM, RDMA_READ, RDMA_WRITE and \
             RDMA_WRITE_WITH_IMM",
            crate::qp::send_ops_flag(&wr_op)
        ),
    )
}

#[cold]
#[inline(never)]
fn no_dest(inner: &QpInner, op: &'static str) -> Error {
    Error::invalid(
        op,
        inner.label(),
        Errno::INVAL,
        "EFA QPs are datagram QPs: every send needs a destination (an AH, the remote QPN and \
         Q_Key: SendWr::ud or WrBatch::set_ud_addr)",
    )
}

/// The device AH number of a destination (EFA's are 16-bit; the create response says so).
#[inline(always)]
fn ahn(d: &crate::wr::UdDest<'_>) -> u16 {
    d.ah_num() as u16
}

/// What the provider cannot check of a generic send WR: an operation EFA has, a destination,
/// an AH of the QP's PD (`pd_id`, the QP's [`crate::wr::pd_id`]).
#[inline(always)]
fn check_wr(wr: &SendWr<'_>, inner: &QpInner, pd_id: usize) -> Result<()> {
    if !efa_has(&wr.op) {
        return Err(op_error(inner, "post_send", wr.op));
    }
    let Some(d) = &wr.ud else {
        return Err(no_dest(inner, "post_send"));
    };
    if d.pd_id() != pd_id {
        // Names the reason (the same test, on the AH itself).
        crate::qp::check_ah_pd(inner, "post_send", d.ah())?;
    }
    Ok(())
}

/// The generic send WR, read in place by the provider's send queue, with what the provider
/// cannot check made here (`check_wr`'s conditions: an operation EFA has, a destination, an
/// AH of the QP's PD, whose identity, `crate::wr::pd_id`, is the context): a WR that fails them is
/// declined by both methods, so the queue never posts it.
impl uverbs_efa::SendWrSource for SendWr<'_> {
    /// The identity of the QP's PD (`crate::wr::pd_id`).
    type Ctx = usize;

    #[inline(always)]
    fn plain(&self, pd_id: usize) -> Option<PlainWr<'_>> {
        match (&self.op, &self.data, &self.ud) {
            (WrOp::Send, WrData::Sge([sge]), Some(d)) if d.pd_id() == pd_id => Some(PlainWr {
                wr_id: self.wr_id,
                dest: UdAddr {
                    ah: ahn(d),
                    remote_qpn: d.remote_qpn,
                    remote_qkey: d.remote_qkey,
                },
                sge,
                signaled: self.flags.contains(SendFlags::SIGNALED),
                processing_hints: 0,
            }),
            _ => None,
        }
    }

    #[inline(always)]
    fn send_wr(&self, pd_id: usize) -> Option<EfaWr<'_>> {
        let d = self.ud.as_ref()?;
        if !efa_has(&self.op) || d.pd_id() != pd_id {
            return None;
        }
        let payload = match &self.data {
            WrData::Sge(s) => Payload::Sge(s),
            WrData::Inline(d) => Payload::Inline(std::slice::from_ref(d)),
        };
        Some(EfaWr {
            wr_id: self.wr_id,
            op: self.op,
            dest: UdAddr {
                ah: ahn(d),
                remote_qpn: d.remote_qpn,
                remote_qkey: d.remote_qkey,
            },
            payload,
            signaled: self.flags.contains(SendFlags::SIGNALED),
            processing_hints: 0,
        })
    }
}

/// A generic send WR that [`EfaQpRing::post_plain_one`] found plain (a SEND of the one SGE
/// `sge` to the destination `d`), read in place by the provider's single-WR path: each part
/// where the WQE needs it.
struct Plain<'w, 'a> {
    wr: &'w SendWr<'a>,
    d: &'w crate::wr::UdDest<'a>,
    sge: &'w Sge,
    /// [`EfaQpRing::sig_all`].
    sig_all: SendFlags,
}

impl uverbs_efa::PlainSource for Plain<'_, '_> {
    #[inline(always)]
    fn signaled(&self) -> bool {
        (self.wr.flags | self.sig_all).contains(SendFlags::SIGNALED)
    }
    #[inline(always)]
    fn remote_qpn(&self) -> u32 {
        self.d.remote_qpn
    }
    #[inline(always)]
    fn wr_id(&self) -> u64 {
        self.wr.wr_id
    }
    #[inline(always)]
    fn ah_qkey(&self) -> (u16, u32) {
        (ahn(self.d), self.d.remote_qkey)
    }
    #[inline(always)]
    fn sge(&self) -> &Sge {
        self.sge
    }
    #[inline(always)]
    fn processing_hints(&self) -> u8 {
        0
    }
}

impl EfaQpRing {
    /// Takes the QP out of its CQs' tables (after the kernel QP is gone).
    pub(crate) fn unregister(&self) {
        let c = &self.cold;
        c.send_table.unregister(self.qpn16);
        if !Arc::ptr_eq(&c.send_table, &c.recv_table) {
            c.recv_table.unregister(self.qpn16);
        }
    }

    /// The QP's state changed: whether it is now RTS (see [`Self::rts`]).
    pub(crate) fn set_rts(&mut self, rts: bool) {
        self.rts = rts;
        // The provider's single-WR path posts only in RTS: `post_plain_one` relies on it.
        self.sq.set_plain_open(rts);
    }

    /// `ibv_post_send` of one WR if it is plain (a signaled SEND of one SGE to an AH of the
    /// QP's PD) and the QP is in RTS: the common case of a latency-bound poster, straight to
    /// the provider's single-WR path. False, having posted nothing, for any other WR or when
    /// the provider declines it; the caller then hands the list to
    /// [`post_send_general`](Self::post_send_general), which decides (and names the reason of
    /// a refusal). The provider reads the generic WR in place ([`uverbs_efa::PlainSource`]).
    #[inline(always)]
    pub(crate) fn post_plain_one(&mut self, wr: &SendWr<'_>) -> bool {
        // Outside RTS the provider's path is closed (`set_rts`) and declines the WR.
        let Some(d) = &wr.ud else {
            return false;
        };
        if d.pd_id() != self.pd_id {
            return false;
        }
        let (WrOp::Send, WrData::Sge([sge])) = (&wr.op, &wr.data) else {
            return false;
        };
        // `sq_sig_all` is in `Plain::signaled`.
        self.sq.post_plain(
            &Plain {
                wr,
                d,
                sge,
                sig_all: self.sig_all,
            },
            false,
        )
    }

    /// `ibv_post_send` of every list but a single plain WR (see
    /// [`post_plain_one`](Self::post_plain_one)): the list goes to the provider as it is,
    /// which reads each WR in place with the checks it cannot make itself (an operation EFA
    /// has, a destination, an AH of the QP's PD: the [`uverbs_efa::SendWrSource`] of
    /// [`SendWr`]) folded into its own test of each WR, so the list is walked once. Out of
    /// line, with few arguments: the caller's fast path reaches it by a tail call and keeps no
    /// register for it.
    #[inline(never)]
    pub(crate) fn post_send_general(
        &mut self,
        wrs: &[SendWr<'_>],
        inner: &QpInner,
    ) -> std::result::Result<(), PostError> {
        if !self.rts {
            return Err(PostError {
                index: 0,
                error: not_rts(inner, "post_send"),
            });
        }
        let sig_all = !self.sig_all.is_empty();
        match self.sq.post_send_in(wrs, self.pd_id, sig_all) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.post_error(wrs, e, inner)),
        }
    }

    /// The error of a list the provider stopped at `e.index`: the core's reason if the WR
    /// fails [`check_wr`] (the provider declined it for that), else the provider's.
    #[cold]
    #[inline(never)]
    fn post_error(
        &self,
        wrs: &[SendWr<'_>],
        e: uverbs_efa::PostError,
        inner: &QpInner,
    ) -> PostError {
        if let Some(Err(error)) = wrs.get(e.index).map(|wr| check_wr(wr, inner, self.pd_id)) {
            return PostError {
                index: e.index,
                error,
            };
        }
        PostError {
            index: e.index,
            error: Error::invalid(
                "post_send",
                inner.label(),
                Errno::from_raw_os_error(e.error.errno()),
                e.error.to_string(),
            ),
        }
    }

    /// `ibv_post_recv` (in INIT, RTR or RTS).
    #[inline]
    pub(crate) fn post_recv(
        &mut self,
        wrs: &[RecvWr<'_>],
        state: QpState,
        inner: &QpInner,
    ) -> std::result::Result<(), PostError> {
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
        self.rq.post_recv(wrs).map(drop).map_err(|e| PostError {
            index: e.index,
            error: Error::invalid(
                "post_recv",
                inner.label(),
                Errno::from_raw_os_error(e.error.errno()),
                e.to_string(),
            ),
        })
    }

    // ----- the wr_* API: staged in the QP's staging area, posted by wr_complete ----------

    pub(crate) fn wr_op(
        &mut self,
        n: &mut usize,
        wr_id: u64,
        flags: SendFlags,
        op: WrOp,
        inner: &QpInner,
    ) -> Result<()> {
        if !efa_has(&op) {
            return Err(op_error(inner, "wr_start", op));
        }
        let depth = self.staging.len();
        let Some(st) = self.staging.get_mut(*n) else {
            return Err(Error::invalid(
                "wr_start",
                inner.label(),
                Errno::NOMEM,
                format!("work request {n}: the SQ holds {depth} WRs"),
            ));
        };
        *st = EMPTY_STAGED;
        st.wr_id = wr_id;
        st.op = op;
        st.signaled = flags.contains(SendFlags::SIGNALED);
        *n += 1;
        Ok(())
    }

    fn last(&mut self, n: usize, inner: &QpInner) -> Result<&mut Staged> {
        match n.checked_sub(1).and_then(|i| self.staging.get_mut(i)) {
            Some(s) => Ok(s),
            None => Err(Error::invalid(
                "wr_start",
                inner.label(),
                Errno::INVAL,
                "no work request to set: start one (send, rdma_write, ...) first",
            )),
        }
    }

    /// `efadv_wr_set_processing_hints` on the last staged WR.
    pub(crate) fn wr_set_hints(
        &mut self,
        n: usize,
        hints: EfaProcessingHints,
        inner: &QpInner,
    ) -> Result<()> {
        let allowed = self.hints_allowed;
        let st = self.last(n, inner)?;
        if !allowed {
            return Err(Error::invalid(
                "efadv_wr_set_processing_hints",
                inner.label(),
                Errno::OPNOTSUPP,
                "the QP was not created with EFADV_WR_EX_WITH_PROCESSING_HINTS in wr_flags",
            ));
        }
        let known = EfaProcessingHints::BURST_PPS_SENSITIVE;
        if !known.contains(hints) {
            return Err(Error::invalid(
                "efadv_wr_set_processing_hints",
                inner.label(),
                Errno::INVAL,
                format!(
                    "work request {}: hints {:#x} include bits EFA defines none for (known: {:#x})",
                    n - 1,
                    hints.bits(),
                    known.bits()
                ),
            ));
        }
        st.hints = if hints.contains(EfaProcessingHints::BURST_PPS_SENSITIVE) {
            uverbs_efa::defs::EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE
        } else {
            0
        };
        Ok(())
    }

    pub(crate) fn wr_set_sges(&mut self, n: usize, sges: &[Sge], inner: &QpInner) -> Result<()> {
        let st = self.last(n, inner)?;
        if sges.len() > st.sges.len() {
            return Err(Error::invalid(
                "wr_start",
                inner.label(),
                Errno::INVAL,
                format!(
                    "work request {}: {} SGEs, an EFA WQE holds at most 2",
                    n - 1,
                    sges.len()
                ),
            ));
        }
        st.sges[..sges.len()].copy_from_slice(sges);
        st.n = sges.len() as u8;
        st.inline = false;
        Ok(())
    }

    pub(crate) fn wr_set_inline(&mut self, n: usize, data: &[u8], inner: &QpInner) -> Result<()> {
        let st = self.last(n, inner)?;
        if data.len() > st.inline_data.len() {
            return Err(Error::invalid(
                "wr_start",
                inner.label(),
                Errno::INVAL,
                format!(
                    "work request {}: {} inline bytes, an EFA WQE holds at most 80",
                    n - 1,
                    data.len()
                ),
            ));
        }
        st.inline_data[..data.len()].copy_from_slice(data);
        st.inline_len = data.len() as u8;
        st.inline = true;
        Ok(())
    }

    pub(crate) fn wr_set_ud(
        &mut self,
        n: usize,
        ah: &Ah,
        remote_qpn: u32,
        remote_qkey: u32,
        inner: &QpInner,
    ) -> Result<()> {
        let st = self.last(n, inner)?;
        st.dest = UdAddr {
            ah: ah.inner.ah_num as u16,
            remote_qpn,
            remote_qkey,
        };
        st.has_dest = true;
        Ok(())
    }

    /// `ibv_wr_complete`: validates every staged WR and posts them all with one doorbell per
    /// `max_tx_batch`, or — if any is refused — posts none and names it.
    pub(crate) fn wr_complete(&mut self, n: usize, sig_all: bool, inner: &QpInner) -> Result<()> {
        let mut s = self.sq.start();
        for (i, st) in self.staging[..n].iter().enumerate() {
            if !st.has_dest {
                s.abort();
                return Err(Error::invalid(
                    "wr_complete",
                    inner.label(),
                    Errno::INVAL,
                    format!(
                        "work request {i} has no destination (set_ud_addr); none of the {n} posted"
                    ),
                ));
            }
            let one: [&[u8]; 1] = [&st.inline_data[..usize::from(st.inline_len)]];
            let payload = if st.inline {
                Payload::Inline(&one)
            } else {
                Payload::Sge(&st.sges[..usize::from(st.n)])
            };
            let wr = EfaWr {
                wr_id: st.wr_id,
                op: st.op,
                dest: st.dest,
                payload,
                signaled: st.signaled || sig_all,
                processing_hints: st.hints,
            };
            if let Err(e) = s.post(&wr) {
                s.abort();
                return Err(Error::invalid(
                    "wr_complete",
                    inner.label(),
                    Errno::from_raw_os_error(e.errno()),
                    format!("work request {i} refused, none of the {n} posted: {e}"),
                ));
            }
        }
        s.complete();
        Ok(())
    }
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
impl EfaQpRing {
    pub(crate) fn queues(&self) -> (&SendQueue, &RecvQueue) {
        (&self.sq, &self.rq)
    }
}
