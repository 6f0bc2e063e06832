//! Queue pairs (`ibv_create_qp`, `ibv_create_qp_ex`, `ibv_modify_qp`, `ibv_query_qp`,
//! `ibv_destroy_qp`, `ibv_post_send`, `ibv_post_recv`, the `ibv_wr_*` API,
//! `ibv_attach_mcast`, `ibv_detach_mcast`).
//!
//! A [`Qp`] owns its rings (the SQ and, without an SRQ, the RQ, mmapped from the uverbs fd) and
//! the kernel QP. It holds its PD, its CQs' kernel objects and its SRQ, so none of them can be
//! destroyed under it. Posting takes `&mut self`: one owner, no lock. The rxe send doorbell is
//! a `write()` of `IB_USER_VERBS_CMD_POST_SEND` with zero work requests, prebuilt here at
//! creation (request bytes and response buffer) so a post allocates nothing and calls nothing
//! through a trait object.
//!
//! Unsafe code here: building the ring views over this QP's mappings, and borrowing the uverbs
//! fd number for the doorbell write.
#![allow(unsafe_code)]

use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;

use bitflags::bitflags;
use uverbs_rxe::{Payload, QpType as RxeQpType, RecvQueue, SendQueue, SendQueueCaps, UdAh};
use uverbs_uapi::cmds::{
    UVERBS_ATTR_CREATE_QP_CAP, UVERBS_ATTR_CREATE_QP_EVENT_FD, UVERBS_ATTR_CREATE_QP_FLAGS,
    UVERBS_ATTR_CREATE_QP_HANDLE, UVERBS_ATTR_CREATE_QP_PD_HANDLE,
    UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, UVERBS_ATTR_CREATE_QP_RESP_CAP,
    UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE,
    UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, UVERBS_ATTR_CREATE_QP_TYPE,
    UVERBS_ATTR_CREATE_QP_USER_HANDLE, UVERBS_ATTR_CREATE_QP_XRCD_HANDLE,
    UVERBS_ATTR_DESTROY_QP_HANDLE, UVERBS_ATTR_DESTROY_QP_RESP, UVERBS_METHOD_QP_CREATE,
    UVERBS_METHOD_QP_DESTROY, UVERBS_OBJECT_QP,
};
use uverbs_uapi::rxe::{Mminfo, RxeCreateQpResp};
use uverbs_uapi::verbs::{IbUverbsQpCap, IB_UVERBS_QP_CREATE_SQ_SIG_ALL};
use uverbs_uapi::write::{
    IbUverbsAttachMcast, IbUverbsCmdHdr, IbUverbsDestroyQp, IbUverbsDestroyQpResp,
    IbUverbsDetachMcast, IbUverbsExModifyQp, IbUverbsExModifyQpResp, IbUverbsModifyQp,
    IbUverbsPostSend, IbUverbsPostSendResp, IbUverbsQpDest, IbUverbsQueryQp, IbUverbsQueryQpResp,
    IbUverbsSendWr, IB_USER_VERBS_CMD_ATTACH_MCAST, IB_USER_VERBS_CMD_DESTROY_QP,
    IB_USER_VERBS_CMD_DETACH_MCAST, IB_USER_VERBS_CMD_MODIFY_QP, IB_USER_VERBS_CMD_POST_SEND,
    IB_USER_VERBS_CMD_QUERY_QP, IB_USER_VERBS_EX_CMD_MODIFY_QP,
};
use zerocopy::IntoBytes;

use crate::ah::{Ah, AhAttr, GlobalRoute};
use crate::channel::{IoctlCmd, MapKind, Mapping, WriteCmd};
use crate::context::{legacy_cmd, Context};
use crate::cq::{Cq, QpCqs};
use crate::error::{Errno, Error, Result};
use crate::event::next_user_handle;
use crate::mr::{AccessFlags, Sge};
use crate::object::DestroyError;
use crate::pd::Pd;
use crate::query::{Gid, Mtu};
use crate::srq::{Srq, SrqShared};
use crate::wr::{post_errno, PostError, RecvWr, SendFlags, SendWr, WrData, WrOp};
use crate::xrcd::Xrcd;
use crate::ProviderInfo;

/// Transport type of a QP (`enum ibv_qp_type`).
#[doc(alias = "ibv_qp_type")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// `IBV_QPT_RC`: reliable connected.
    Rc,
    /// `IBV_QPT_UC`: unreliable connected.
    Uc,
    /// `IBV_QPT_UD`: unreliable datagram.
    Ud,
    /// `IBV_QPT_RAW_PACKET` (needs `CAP_NET_RAW`; rxe has none).
    RawPacket,
    /// `IBV_QPT_XRC_SEND` (XRC initiator; rxe has no XRC).
    XrcSend,
    /// `IBV_QPT_XRC_RECV` (XRC target, created in an XRCD; rxe has no XRC).
    XrcRecv,
    /// EFA's SRD (`IBV_QPT_DRIVER` with `EFADV_QP_DRIVER_TYPE_SRD`): reliable, unordered
    /// datagrams. Created only by [`Pd::efadv_create_qp_ex`]; addressed like UD (an [`Ah`], a
    /// remote QPN and a Q_Key per send).
    #[doc(alias = "EFADV_QP_DRIVER_TYPE_SRD")]
    Srd,
}

impl QpType {
    /// The kernel's number (`IB_UVERBS_QPT_*`, equal to `IBV_QPT_*`).
    pub fn raw(self) -> u8 {
        match self {
            QpType::Rc => 2,
            QpType::Uc => 3,
            QpType::Ud => 4,
            QpType::RawPacket => 8,
            QpType::XrcSend => 9,
            QpType::XrcRecv => 10,
            QpType::Srd => 0xff,
        }
    }

    /// Whether sends name a destination (UD and SRD).
    pub fn is_datagram(self) -> bool {
        matches!(self, QpType::Ud | QpType::Srd)
    }

    fn rxe(self) -> Option<RxeQpType> {
        match self {
            QpType::Rc => Some(RxeQpType::Rc),
            QpType::Uc => Some(RxeQpType::Uc),
            QpType::Ud => Some(RxeQpType::Ud),
            _ => None,
        }
    }
}

/// QP state (`enum ibv_qp_state`).
#[doc(alias = "ibv_qp_state")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QpState {
    /// `IBV_QPS_RESET`.
    #[default]
    Reset,
    /// `IBV_QPS_INIT`.
    Init,
    /// `IBV_QPS_RTR`: ready to receive.
    Rtr,
    /// `IBV_QPS_RTS`: ready to send.
    Rts,
    /// `IBV_QPS_SQD`: send queue drain(ed/ing).
    Sqd,
    /// `IBV_QPS_SQE`: send queue error.
    Sqe,
    /// `IBV_QPS_ERR`.
    Err,
    /// A value this library does not know.
    Unknown(u8),
}

impl QpState {
    /// From the kernel's number (`IB_QPS_*`).
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            x => QpState::Unknown(x),
        }
    }

    /// The kernel's number.
    pub fn raw(self) -> u8 {
        match self {
            QpState::Reset => 0,
            QpState::Init => 1,
            QpState::Rtr => 2,
            QpState::Rts => 3,
            QpState::Sqd => 4,
            QpState::Sqe => 5,
            QpState::Err => 6,
            QpState::Unknown(x) => x,
        }
    }
}

bitflags! {
    /// Which [`QpAttr`] fields a modify applies or a query asks for (`enum ibv_qp_attr_mask`).
    #[doc(alias = "ibv_qp_attr_mask")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct QpAttrMask: u32 {
        /// `IBV_QP_STATE`.
        const STATE = 1 << 0;
        /// `IBV_QP_CUR_STATE`.
        const CUR_STATE = 1 << 1;
        /// `IBV_QP_EN_SQD_ASYNC_NOTIFY`.
        const EN_SQD_ASYNC_NOTIFY = 1 << 2;
        /// `IBV_QP_ACCESS_FLAGS`.
        const ACCESS_FLAGS = 1 << 3;
        /// `IBV_QP_PKEY_INDEX`.
        const PKEY_INDEX = 1 << 4;
        /// `IBV_QP_PORT`.
        const PORT = 1 << 5;
        /// `IBV_QP_QKEY`.
        const QKEY = 1 << 6;
        /// `IBV_QP_AV`.
        const AV = 1 << 7;
        /// `IBV_QP_PATH_MTU`.
        const PATH_MTU = 1 << 8;
        /// `IBV_QP_TIMEOUT`.
        const TIMEOUT = 1 << 9;
        /// `IBV_QP_RETRY_CNT`.
        const RETRY_CNT = 1 << 10;
        /// `IBV_QP_RNR_RETRY`.
        const RNR_RETRY = 1 << 11;
        /// `IBV_QP_RQ_PSN`.
        const RQ_PSN = 1 << 12;
        /// `IBV_QP_MAX_QP_RD_ATOMIC`.
        const MAX_QP_RD_ATOMIC = 1 << 13;
        /// `IBV_QP_ALT_PATH`.
        const ALT_PATH = 1 << 14;
        /// `IBV_QP_MIN_RNR_TIMER`.
        const MIN_RNR_TIMER = 1 << 15;
        /// `IBV_QP_SQ_PSN`.
        const SQ_PSN = 1 << 16;
        /// `IBV_QP_MAX_DEST_RD_ATOMIC`.
        const MAX_DEST_RD_ATOMIC = 1 << 17;
        /// `IBV_QP_PATH_MIG_STATE`.
        const PATH_MIG_STATE = 1 << 18;
        /// `IBV_QP_CAP`.
        const CAP = 1 << 19;
        /// `IBV_QP_DEST_QPN`.
        const DEST_QPN = 1 << 20;
        /// `IBV_QP_RATE_LIMIT` (sent with the extended modify command).
        const RATE_LIMIT = 1 << 25;
    }
}

bitflags! {
    /// Operations the `wr_*` API may build on a QP made by [`Pd::create_qp_ex`]
    /// (`enum ibv_qp_create_send_ops_flags`).
    #[doc(alias = "ibv_qp_create_send_ops_flags")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct SendOpsFlags: u64 {
        /// `IBV_QP_EX_WITH_RDMA_WRITE`.
        const RDMA_WRITE = 1 << 0;
        /// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
        const RDMA_WRITE_WITH_IMM = 1 << 1;
        /// `IBV_QP_EX_WITH_SEND`.
        const SEND = 1 << 2;
        /// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
        const SEND_WITH_IMM = 1 << 3;
        /// `IBV_QP_EX_WITH_RDMA_READ`.
        const RDMA_READ = 1 << 4;
        /// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
        const ATOMIC_CMP_AND_SWP = 1 << 5;
        /// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
        const ATOMIC_FETCH_AND_ADD = 1 << 6;
        /// `IBV_QP_EX_WITH_LOCAL_INV`.
        const LOCAL_INV = 1 << 7;
        /// `IBV_QP_EX_WITH_BIND_MW`.
        const BIND_MW = 1 << 8;
        /// `IBV_QP_EX_WITH_SEND_WITH_INV`.
        const SEND_WITH_INV = 1 << 9;
    }
}

/// Queue sizes of a QP (`struct ibv_qp_cap`): asked for at creation, written back with what
/// the kernel made (at least what was asked).
#[doc(alias = "ibv_qp_cap")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpCap {
    /// Send work requests the SQ holds.
    pub max_send_wr: u32,
    /// Receive work requests the RQ holds (0 with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Inline bytes per send work request.
    pub max_inline_data: u32,
}

impl QpCap {
    fn from_uverbs(c: &IbUverbsQpCap) -> Self {
        QpCap {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }
}

/// What to create (`struct ibv_qp_init_attr_ex`).
#[doc(alias = "ibv_qp_init_attr")]
#[doc(alias = "ibv_qp_init_attr_ex")]
#[derive(Debug, Clone, Copy)]
pub struct QpInitAttr<'a> {
    /// Transport type.
    pub qp_type: QpType,
    /// CQ for send completions (not for `XrcRecv`).
    pub send_cq: Option<&'a Cq>,
    /// CQ for receive completions (not for `XrcSend`/`XrcRecv`).
    pub recv_cq: Option<&'a Cq>,
    /// Shared receive queue; the QP then has no RQ of its own.
    pub srq: Option<&'a Srq>,
    /// XRC domain (`XrcRecv` only).
    pub xrcd: Option<&'a Xrcd>,
    /// Requested sizes; written back by create into [`Qp::cap`].
    pub cap: QpCap,
    /// Every send completes with a completion (`sq_sig_all`).
    pub sq_sig_all: bool,
    /// `IB_UVERBS_QP_CREATE_*` creation flags.
    pub create_flags: u32,
    /// Operations the `wr_*` API may use ([`Pd::create_qp_ex`]; ignored by `create_qp`).
    pub send_ops_flags: SendOpsFlags,
}

impl<'a> QpInitAttr<'a> {
    /// A QP of `qp_type` completing into `send_cq` and `recv_cq`, with `cap` queue sizes.
    pub fn new(qp_type: QpType, send_cq: &'a Cq, recv_cq: &'a Cq, cap: QpCap) -> Self {
        QpInitAttr {
            qp_type,
            send_cq: Some(send_cq),
            recv_cq: Some(recv_cq),
            srq: None,
            xrcd: None,
            cap,
            sq_sig_all: false,
            create_flags: 0,
            send_ops_flags: SendOpsFlags::empty(),
        }
    }
}

/// QP attributes (`struct ibv_qp_attr`) for [`Qp::modify`] and [`Qp::query`]: only the fields
/// named by the [`QpAttrMask`] matter.
#[doc(alias = "ibv_qp_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    /// `qp_state`: the state to move to.
    pub qp_state: QpState,
    /// `cur_qp_state`: the state the caller believes the QP is in.
    pub cur_qp_state: QpState,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Path migration state (`IBV_MIG_*`: 0 migrated, 1 rearm, 2 armed).
    pub path_mig_state: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Receive PSN.
    pub rq_psn: u32,
    /// Send PSN.
    pub sq_psn: u32,
    /// Remote QP number (RC/UC).
    pub dest_qp_num: u32,
    /// What remote peers may do (RDMA read/write, atomics).
    pub qp_access_flags: AccessFlags,
    /// Queue sizes (with `CAP`; query reports them).
    pub cap: QpCap,
    /// Primary path.
    pub ah_attr: AhAttr,
    /// Alternate path.
    pub alt_ah_attr: AhAttr,
    /// P_Key index.
    pub pkey_index: u16,
    /// Alternate P_Key index.
    pub alt_pkey_index: u16,
    /// Ask for an `SQ_DRAINED` event when moving to SQD.
    pub en_sqd_async_notify: bool,
    /// (Query) the SQ is draining.
    pub sq_draining: bool,
    /// RDMA reads and atomics this QP may have outstanding as initiator.
    pub max_rd_atomic: u8,
    /// RDMA reads and atomics this QP accepts as responder.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Port (from 1).
    pub port_num: u8,
    /// Local ACK timeout code.
    pub timeout: u8,
    /// Retries on timeout.
    pub retry_cnt: u8,
    /// Retries on RNR NAK (7: infinite).
    pub rnr_retry: u8,
    /// Alternate port.
    pub alt_port_num: u8,
    /// Alternate path ACK timeout.
    pub alt_timeout: u8,
    /// Rate limit in kbps (with `RATE_LIMIT`).
    pub rate_limit: u32,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            path_mtu: Mtu::Mtu1024,
            path_mig_state: 0,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            qp_access_flags: AccessFlags::empty(),
            cap: QpCap::default(),
            ah_attr: AhAttr::default(),
            alt_ah_attr: AhAttr::default(),
            pkey_index: 0,
            alt_pkey_index: 0,
            en_sqd_async_notify: false,
            sq_draining: false,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            port_num: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            alt_port_num: 0,
            alt_timeout: 0,
            rate_limit: 0,
        }
    }
}

/// What [`Qp::query`] returns: the attributes and the creation-time facts of
/// `ibv_qp_init_attr` that the kernel reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpQuery {
    /// The attributes asked for (others are zero).
    pub attr: QpAttr,
    /// Queue sizes.
    pub cap: QpCap,
    /// Whether every send is signaled.
    pub sq_sig_all: bool,
}

/// What the kernel reported when a QP was destroyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpDestroyed {
    /// Async events the kernel delivered for this QP (`events_reported`).
    pub events_reported: u32,
}

fn dest_to_uverbs(a: &AhAttr) -> IbUverbsQpDest {
    IbUverbsQpDest {
        dgid: a.grh.dgid.raw,
        flow_label: a.grh.flow_label,
        dlid: a.dlid,
        reserved: 0,
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: u8::from(a.is_global),
        port_num: a.port_num,
    }
}

fn dest_from_uverbs(d: &IbUverbsQpDest) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            dgid: Gid { raw: d.dgid },
            flow_label: d.flow_label,
            sgid_index: d.sgid_index,
            hop_limit: d.hop_limit,
            traffic_class: d.traffic_class,
        },
        dlid: d.dlid,
        sl: d.sl,
        src_path_bits: d.src_path_bits,
        static_rate: d.static_rate,
        is_global: d.is_global != 0,
        port_num: d.port_num,
    }
}

/// Maps one rxe queue from the uverbs fd and validates its header.
pub(crate) fn map_rxe_queue(
    ctx: &Context,
    mi: &Mminfo,
    op: &'static str,
    object: &dyn Fn() -> String,
    what: &str,
) -> Result<(Mapping, uverbs_rxe::Queue)> {
    let len = usize::try_from(mi.size).map_err(|_| {
        Error::invalid(
            op,
            object(),
            Errno::INVAL,
            format!("{what} ring size does not fit"),
        )
    })?;
    let map = ctx
        .channel()
        .mmap(mi.offset, len, MapKind::ReadWrite)
        .map_err(|e| {
            Error::os(op, object(), e).with_reason(format!("mmap of the {what} failed"))
        })?;
    // SAFETY: `map` is a live mapping of exactly this queue (offset and size come from the
    // kernel's create response for it); the caller keeps `map` alive, declared after the typed
    // queue built from this view so it is unmapped only after that queue is gone, and nothing
    // else in the process touches this memory.
    let q = unsafe { uverbs_rxe::Queue::from_raw(map.as_ptr(), map.len(), None) }.map_err(|e| {
        Error::invalid(
            op,
            object(),
            Errno::IO,
            format!("bad {what} ring from the kernel: {e}"),
        )
    })?;
    Ok((map, q))
}

/// The prebuilt rxe send doorbell: `IB_USER_VERBS_CMD_POST_SEND` with zero WRs.
pub(crate) struct Doorbell {
    fd: RawFd,
    req: [u8; DB_LEN],
    /// Where the kernel writes `bad_wr` (`response` inside `req` holds this address). Never
    /// read: with zero WRs there is nothing to report.
    ///
    /// A heap block owned through this raw pointer (from `Box::into_raw`, freed in `Drop`),
    /// not a `Box`: a `Box` asserts unique access whenever it is moved, which would
    /// invalidate the address the kernel writes through (`req`) each time the QP moves. A raw
    /// pointer asserts nothing, and the block itself never moves.
    resp: NonNull<IbUverbsPostSendResp>,
}

// SAFETY: `resp` is owned by this Doorbell alone (allocated in `new`, freed in `drop`); Rust
// code never reads or writes it, only the kernel does, during a `write()` made by `ring`,
// which needs `&self` of the QP that owns the Doorbell: whichever thread has the QP is the one
// whose syscall writes it. Nothing about it is tied to the creating thread.
unsafe impl Send for Doorbell {}

const DB_LEN: usize =
    std::mem::size_of::<IbUverbsCmdHdr>() + std::mem::size_of::<IbUverbsPostSend>();

impl Doorbell {
    fn new(fd: RawFd, qp_handle: u32) -> Self {
        let resp = NonNull::from(Box::leak(Box::new(IbUverbsPostSendResp::default())));
        let hdr = IbUverbsCmdHdr {
            command: IB_USER_VERBS_CMD_POST_SEND,
            in_words: (DB_LEN / 4) as u16,
            out_words: (std::mem::size_of::<IbUverbsPostSendResp>() / 4) as u16,
        };
        let cmd = IbUverbsPostSend {
            response: resp.as_ptr() as u64,
            qp_handle,
            wr_count: 0,
            sge_count: 0,
            wqe_size: std::mem::size_of::<IbUverbsSendWr>() as u32,
        };
        let mut req = [0u8; DB_LEN];
        req[..8].copy_from_slice(hdr.as_bytes());
        req[8..].copy_from_slice(cmd.as_bytes());
        Doorbell { fd, req, resp }
    }

    /// One `write()`: the kernel runs the SQ (rdma-core's `post_send_db`).
    #[inline]
    fn ring(&self) -> std::result::Result<(), Errno> {
        // SAFETY: `fd` is the uverbs fd of the channel of the Context this QP holds a clone of
        // (through its PD), so it stays open for as long as the QP and this doorbell exist.
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        loop {
            match rustix::io::write(fd, &self.req) {
                Ok(n) if n == DB_LEN => return Ok(()),
                Ok(_) => return Err(Errno::IO),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // SAFETY: `resp` came from `Box::into_raw` (via `Box::leak`) in `new` and is freed
        // only here, once; the kernel writes it only during `ring`, which cannot run any more
        // (we have `&mut self`).
        drop(unsafe { Box::from_raw(self.resp.as_ptr()) });
    }
}

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

    fn destroy_cmd(&self) -> std::result::Result<IbUverbsDestroyQpResp, Errno> {
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

/// The rxe rings of a QP and the doorbell.
pub(crate) struct RxeRing {
    sq: SendQueue,
    rq: Option<RecvQueue>,
    db: Doorbell,
    /// For each SQ slot, the AH of the UD send last written there: kept until the slot is
    /// reused, which the ring allows only after the kernel consumed that send.
    ah_slots: Box<[Option<Ah>]>,
    /// Counts posted WQEs modulo the ring size (same period as the ring's producer index).
    sq_shadow: u32,
    _sq_map: Mapping,
    _rq_map: Option<Mapping>,
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

impl Pd {
    /// Creates a QP (`ibv_create_qp`). The caps actually made are in [`Qp::cap`].
    ///
    /// Every type the device's kernel driver accepts: RC, UC and UD on rxe; UD on EFA (SRD
    /// through [`Pd::efadv_create_qp_ex`]). What the provider cannot do (an SRQ or a connected
    /// QP on EFA, SRD on rxe) is refused here with `EOPNOTSUPP` and the reason.
    #[doc(alias = "ibv_create_qp")]
    pub fn create_qp(&self, attr: &QpInitAttr<'_>) -> Result<Qp> {
        self.create_qp_inner(attr, None)
    }

    /// Creates a QP that also takes the `wr_*` API for the operations in
    /// `attr.send_ops_flags` (`ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`).
    #[doc(alias = "ibv_create_qp_ex")]
    pub fn create_qp_ex(&self, attr: &QpInitAttr<'_>) -> Result<Qp> {
        self.create_qp_inner(attr, Some(attr.send_ops_flags))
    }

    fn create_qp_inner(&self, attr: &QpInitAttr<'_>, send_ops: Option<SendOpsFlags>) -> Result<Qp> {
        let op = "create_qp";
        let ctx = self.context();
        let object = || self.label();
        let bad = |why: String| Error::invalid(op, self.label(), Errno::INVAL, why);
        let notsup = |why: String| Error::invalid(op, self.label(), Errno::OPNOTSUPP, why);
        if attr.qp_type == QpType::Srd {
            return Err(notsup(if matches!(ctx.provider(), ProviderInfo::Efa(_)) {
                "SRD QPs are created with efadv_create_qp_ex".into()
            } else {
                "SRD is an EFA transport; rxe has RC, UC and UD".into()
            }));
        }
        if let ProviderInfo::Efa(_) = ctx.provider() {
            return crate::efa::create_qp(
                self,
                op,
                attr,
                &crate::efa::EfaQpInitAttr::default(),
                send_ops,
            );
        }
        // ibv_create_qp(3): a QP with an SRQ must be RC or UD (XRC_RECV aside); the kernel
        // does not check it for rxe.
        if attr.srq.is_some() && !matches!(attr.qp_type, QpType::Rc | QpType::Ud) {
            return Err(bad(format!(
                "a {:?} QP cannot use an SRQ: only RC and UD QPs can (ibv_create_qp(3))",
                attr.qp_type
            )));
        }
        for cq in [attr.send_cq, attr.recv_cq].into_iter().flatten() {
            if !Arc::ptr_eq(&cq.shared().ctx.inner, &ctx.inner) {
                return Err(bad("a CQ belongs to another device context".into()));
            }
        }
        if let Some(srq) = attr.srq {
            if !Arc::ptr_eq(&srq.pd().inner, &self.inner) {
                return Err(bad("the SRQ belongs to another PD".into()));
            }
        }
        match attr.qp_type {
            QpType::XrcRecv => {
                if attr.xrcd.is_none() {
                    return Err(bad("an XRC_RECV QP needs an XRCD".into()));
                }
            }
            QpType::XrcSend => {
                if attr.send_cq.is_none() {
                    return Err(bad("an XRC_SEND QP needs a send CQ".into()));
                }
            }
            _ => {
                if attr.send_cq.is_none() || attr.recv_cq.is_none() {
                    return Err(bad(format!(
                        "a {:?} QP needs a send CQ and a receive CQ",
                        attr.qp_type
                    )));
                }
            }
        }

        // The kernel command, fully encoded for every type (as rdma-core's ibv_icmd_create_qp).
        let user_handle = next_user_handle();
        let cap_in = IbUverbsQpCap {
            max_send_wr: attr.cap.max_send_wr,
            max_recv_wr: attr.cap.max_recv_wr,
            max_send_sge: attr.cap.max_send_sge,
            max_recv_sge: attr.cap.max_recv_sge,
            max_inline_data: attr.cap.max_inline_data,
        };
        let mut cap_out = IbUverbsQpCap::default();
        let mut qp_num = 0u32;
        let mut drv = RxeCreateQpResp::default();
        let mut flags = attr.create_flags;
        if attr.sq_sig_all {
            flags |= IB_UVERBS_QP_CREATE_SQ_SIG_ALL;
        }
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
        cmd.idr_new(UVERBS_ATTR_CREATE_QP_HANDLE);
        match attr.qp_type {
            QpType::XrcRecv => {
                if let Some(x) = attr.xrcd {
                    cmd.idr(UVERBS_ATTR_CREATE_QP_XRCD_HANDLE, x.handle());
                }
            }
            _ => {
                cmd.idr(UVERBS_ATTR_CREATE_QP_PD_HANDLE, self.handle());
                if let Some(cq) = attr.send_cq {
                    cmd.idr(UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, cq.handle());
                }
                if attr.qp_type != QpType::XrcSend {
                    if let Some(cq) = attr.recv_cq {
                        cmd.idr(UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, cq.handle());
                    }
                }
            }
        }
        cmd.const_u64(UVERBS_ATTR_CREATE_QP_TYPE, u64::from(attr.qp_type.raw()))
            .u64_in(UVERBS_ATTR_CREATE_QP_USER_HANDLE, user_handle)
            .ptr_in(UVERBS_ATTR_CREATE_QP_CAP, &cap_in)
            .fd(UVERBS_ATTR_CREATE_QP_EVENT_FD, ctx.async_fd());
        if flags != 0 {
            cmd.u32_in(UVERBS_ATTR_CREATE_QP_FLAGS, flags);
        }
        if let Some(srq) = attr.srq {
            cmd.idr(UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, srq.handle());
        }
        cmd.ptr_out(UVERBS_ATTR_CREATE_QP_RESP_CAP, &mut cap_out)
            .ptr_out(UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &mut qp_num)
            .driver_out(drv.as_mut_bytes());
        let r = ctx.ioctl_cmd(op, &object, &mut cmd);
        let handle = cmd.out_data(UVERBS_ATTR_CREATE_QP_HANDLE).unwrap_or(0) as u32;
        r.map_err(|e| explain_create_error(e, attr, ctx))?;

        let inner = QpInner {
            pd: self.clone(),
            _cqs: QpCqs::new(attr.send_cq, attr.recv_cq),
            _srq: attr.srq.map(|s| s.shared().clone()),
            handle,
            qp_num,
            user_handle,
            legacy_destroy: false,
            destroyed: false,
        };
        // From here `inner` destroys the kernel QP if anything fails.
        let Some(rxe_type) = attr.qp_type.rxe() else {
            return Err(Error::invalid(
                op,
                inner.label(),
                Errno::OPNOTSUPP,
                format!("{:?} QPs have no rxe rings", attr.qp_type),
            ));
        };
        let mut cap = QpCap::from_uverbs(&cap_out);
        if attr.srq.is_some() {
            // The QP has no receive queue: what was asked for it is ignored (QpCap docs).
            cap.max_recv_wr = 0;
            cap.max_recv_sge = 0;
        }
        let qlabel = || inner.label();
        let (sq_map, sq_q) = map_rxe_queue(ctx, &drv.sq_mi, op, &qlabel, "send queue")?;
        let sq = SendQueue::new(
            sq_q,
            SendQueueCaps {
                qp_type: rxe_type,
                max_send_sge: cap.max_send_sge,
                max_inline_data: cap.max_inline_data,
            },
        )
        .map_err(|e| Error::invalid(op, inner.label(), Errno::IO, format!("send queue: {e}")))?;
        let (rq, rq_map) = if attr.srq.is_none() {
            let (m, q) = map_rxe_queue(ctx, &drv.rq_mi, op, &qlabel, "receive queue")?;
            let rq = RecvQueue::new(q, cap.max_recv_sge).map_err(|e| {
                Error::invalid(op, inner.label(), Errno::IO, format!("receive queue: {e}"))
            })?;
            (Some(rq), Some(m))
        } else {
            (None, None)
        };
        let Some(dbfd) = ctx.channel().doorbell_fd().map(|f| f.as_raw_fd()) else {
            return Err(Error::invalid(
                op,
                inner.label(),
                Errno::OPNOTSUPP,
                "the command channel has no fd for the rxe send doorbell",
            ));
        };
        let slots = sq.queue().num_slots() as usize;
        Ok(Qp {
            ring: QpRing::Rxe(RxeRing {
                db: Doorbell::new(dbfd, handle),
                sq,
                rq,
                // Only UD sends carry an AH (the ring refuses one on other QP types): other
                // QPs keep no per-slot table, so an RC QP costs no more heap than rdma-core's.
                ah_slots: if attr.qp_type == QpType::Ud {
                    (0..slots).map(|_| None).collect()
                } else {
                    Box::default()
                },
                sq_shadow: 0,
                _sq_map: sq_map,
                _rq_map: rq_map,
            }),
            qp_type: attr.qp_type,
            cap,
            state: QpState::Reset,
            sq_sig_all: attr.sq_sig_all,
            send_ops,
            inner,
        })
    }
}

fn explain_create_error(e: Error, attr: &QpInitAttr<'_>, ctx: &Context) -> Error {
    explain_create_errno(e, attr, matches!(ctx.provider(), ProviderInfo::Rxe))
}

/// A reason for the kernel's refusal of a create that keeps the kernel's errno: the
/// provider's "does not support" only for the errnos that mean it.
fn explain_create_errno(e: Error, attr: &QpInitAttr<'_>, rxe: bool) -> Error {
    if attr.qp_type == QpType::RawPacket && e.is(Errno::PERM) {
        return e.with_reason(
            "RAW_PACKET QPs need CAP_NET_RAW (the kernel checks it before asking the driver)",
        );
    }
    let unsupported = e.is(Errno::OPNOTSUPP) || e.is(Errno::INVAL) || e.is(Errno::NOSYS);
    if rxe && attr.qp_type.rxe().is_none() && unsupported {
        let why = match attr.qp_type {
            QpType::RawPacket => "rxe does not support RAW_PACKET QPs",
            _ => "rxe does not support XRC",
        };
        return e.with_reason(why);
    }
    if e.is(Errno::INVAL) {
        return e.with_reason(format!(
            "caps {:?} rejected (above the device's max_qp_wr/max_sge/max_inline?) or bad \
             attributes",
            attr.cap
        ));
    }
    e
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

    fn label(&self) -> String {
        self.inner.label()
    }

    /// Modifies the QP (`ibv_modify_qp`): the fields of `attr` named by `mask`.
    ///
    /// The kernel checks the transition (`ib_modify_qp_is_ok`): RESET→INIT needs
    /// `STATE|PKEY_INDEX|PORT|ACCESS_FLAGS` (UD: `QKEY` instead of `ACCESS_FLAGS`), INIT→RTR
    /// on RC needs `AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER`, RTR→RTS on
    /// RC needs `SQ_PSN|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC`; any state may go to
    /// RESET or ERR. A refused transition is `EINVAL`.
    #[doc(alias = "ibv_modify_qp")]
    pub fn modify(&mut self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let op = "modify_qp";
        let base = IbUverbsModifyQp {
            dest: dest_to_uverbs(&attr.ah_attr),
            alt_dest: dest_to_uverbs(&attr.alt_ah_attr),
            qp_handle: self.inner.handle,
            attr_mask: mask.bits(),
            qkey: attr.qkey,
            rq_psn: attr.rq_psn,
            sq_psn: attr.sq_psn,
            dest_qp_num: attr.dest_qp_num,
            qp_access_flags: attr.qp_access_flags.bits(),
            pkey_index: attr.pkey_index,
            alt_pkey_index: attr.alt_pkey_index,
            qp_state: attr.qp_state.raw(),
            cur_qp_state: attr.cur_qp_state.raw(),
            path_mtu: attr.path_mtu.raw(),
            path_mig_state: attr.path_mig_state,
            en_sqd_async_notify: u8::from(attr.en_sqd_async_notify),
            max_rd_atomic: attr.max_rd_atomic,
            max_dest_rd_atomic: attr.max_dest_rd_atomic,
            min_rnr_timer: attr.min_rnr_timer,
            port_num: attr.port_num,
            timeout: attr.timeout,
            retry_cnt: attr.retry_cnt,
            rnr_retry: attr.rnr_retry,
            alt_port_num: attr.alt_port_num,
            alt_timeout: attr.alt_timeout,
            reserved: [0; 2],
        };
        let mut cmd = if matches!(self.ring, QpRing::Efa(_)) {
            let req = crate::efa::modify_req(&base, mask)
                .map_err(|why| Error::invalid(op, self.label(), Errno::OPNOTSUPP, why))?;
            legacy_cmd(IB_USER_VERBS_CMD_MODIFY_QP, &req, &[], 0, 0)
        } else if mask.contains(QpAttrMask::RATE_LIMIT) {
            let ex = IbUverbsExModifyQp {
                base,
                rate_limit: attr.rate_limit,
                reserved: 0,
            };
            WriteCmd::extended(
                IB_USER_VERBS_EX_CMD_MODIFY_QP,
                &ex,
                &[],
                std::mem::size_of::<IbUverbsExModifyQpResp>(),
                0,
            )
            .map_err(|e| Error::os(op, self.label(), e))?
        } else {
            legacy_cmd(IB_USER_VERBS_CMD_MODIFY_QP, &base, &[], 0, 0)
        };
        self.inner
            .pd
            .context()
            .write_cmd(op, &|| self.label(), &mut cmd)
            .map_err(|e| {
                if e.is(Errno::INVAL) && mask.contains(QpAttrMask::STATE) {
                    e.with_reason(format!(
                        "{:?} QP: {:?} -> {:?} with mask {:?} is not a legal transition, or an \
                         attribute is out of range",
                        self.qp_type, self.state, attr.qp_state, mask
                    ))
                } else {
                    e
                }
            })?;
        if mask.contains(QpAttrMask::STATE) {
            self.state = attr.qp_state;
        }
        Ok(())
    }

    /// Queries the QP (`ibv_query_qp`) for the attributes in `mask`; also refreshes
    /// [`Qp::state`].
    #[doc(alias = "ibv_query_qp")]
    pub fn query(&mut self, mask: QpAttrMask) -> Result<QpQuery> {
        let op = "query_qp";
        let req = IbUverbsQueryQp {
            qp_handle: self.inner.handle,
            attr_mask: mask.bits(),
            ..Default::default()
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_QUERY_QP,
            &req,
            &[],
            std::mem::size_of::<IbUverbsQueryQpResp>(),
            0,
        );
        self.inner
            .pd
            .context()
            .write_cmd(op, &|| self.label(), &mut cmd)?;
        let r: IbUverbsQueryQpResp = cmd.response_as();
        let cap = QpCap {
            max_send_wr: r.max_send_wr,
            max_recv_wr: r.max_recv_wr,
            max_send_sge: r.max_send_sge,
            max_recv_sge: r.max_recv_sge,
            max_inline_data: r.max_inline_data,
        };
        let attr = QpAttr {
            qp_state: QpState::from_raw(r.qp_state),
            cur_qp_state: QpState::from_raw(r.cur_qp_state),
            path_mtu: Mtu::from_raw(r.path_mtu),
            path_mig_state: r.path_mig_state,
            qkey: r.qkey,
            rq_psn: r.rq_psn,
            sq_psn: r.sq_psn,
            dest_qp_num: r.dest_qp_num,
            qp_access_flags: AccessFlags::from_bits_retain(r.qp_access_flags),
            cap,
            ah_attr: dest_from_uverbs(&r.dest),
            alt_ah_attr: dest_from_uverbs(&r.alt_dest),
            pkey_index: r.pkey_index,
            alt_pkey_index: r.alt_pkey_index,
            en_sqd_async_notify: false,
            sq_draining: r.sq_draining != 0,
            max_rd_atomic: r.max_rd_atomic,
            max_dest_rd_atomic: r.max_dest_rd_atomic,
            min_rnr_timer: r.min_rnr_timer,
            port_num: r.port_num,
            timeout: r.timeout,
            retry_cnt: r.retry_cnt,
            rnr_retry: r.rnr_retry,
            alt_port_num: r.alt_port_num,
            alt_timeout: r.alt_timeout,
            rate_limit: 0,
        };
        self.state = attr.qp_state;
        Ok(QpQuery {
            attr,
            cap,
            sq_sig_all: r.sq_sig_all != 0,
        })
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

    /// Joins multicast group `gid` (`ibv_attach_mcast`; UD QPs; `lid` 0 on RoCE).
    #[doc(alias = "ibv_attach_mcast")]
    pub fn attach_mcast(&self, gid: &Gid, lid: u16) -> Result<()> {
        let req = IbUverbsAttachMcast {
            gid: gid.raw,
            qp_handle: self.inner.handle,
            mlid: lid,
            reserved: 0,
        };
        let mut cmd = legacy_cmd(IB_USER_VERBS_CMD_ATTACH_MCAST, &req, &[], 0, 0);
        self.mcast_cmd("attach_mcast", gid, &mut cmd)
    }

    /// Leaves multicast group `gid` (`ibv_detach_mcast`).
    #[doc(alias = "ibv_detach_mcast")]
    pub fn detach_mcast(&self, gid: &Gid, lid: u16) -> Result<()> {
        let req = IbUverbsDetachMcast {
            gid: gid.raw,
            qp_handle: self.inner.handle,
            mlid: lid,
            reserved: 0,
        };
        let mut cmd = legacy_cmd(IB_USER_VERBS_CMD_DETACH_MCAST, &req, &[], 0, 0);
        self.mcast_cmd("detach_mcast", gid, &mut cmd)
    }

    fn mcast_cmd(&self, op: &'static str, gid: &Gid, cmd: &mut WriteCmd) -> Result<()> {
        let qp_type = self.qp_type;
        self.inner
            .pd
            .context()
            .write_cmd(op, &|| self.label(), cmd)
            .map_err(|e| {
                if !e.is(Errno::INVAL) {
                    return e;
                }
                let why = if qp_type != QpType::Ud {
                    format!("multicast needs a UD QP, this one is {qp_type:?}")
                } else if gid.raw[0] != 0xff {
                    format!("{gid} is not a multicast GID (first byte must be 0xff)")
                } else if op == "detach_mcast" {
                    format!("the QP is not attached to {gid}")
                } else {
                    format!("the kernel refused group {gid}")
                };
                e.with_reason(why)
            })
    }

    // ----- data path ---------------------------------------------------------------------

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
            QpRing::Efa(r) => r.post_send(
                wrs,
                matches!(self.state, QpState::Rts),
                self.sq_sig_all,
                &self.inner,
            ),
            QpRing::Rxe(r) => {
                if matches!(self.state, QpState::Reset | QpState::Init | QpState::Rtr) {
                    return Err(PostError {
                        index: 0,
                        error: state_error(
                            &self.inner,
                            self.state,
                            "post_send",
                            "sends need RTS (or SQD/SQE/ERR)",
                        ),
                    });
                }
                r.post_send(&self.inner, self.cap.max_send_sge, wrs)
            }
        }
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
    /// [`Pd::create_qp_ex`] or [`Pd::efadv_create_qp_ex`]. Nothing reaches the queue until
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
                r.sq_shadow
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
fn state_error(inner: &QpInner, state: QpState, op: &'static str, need: &str) -> Error {
    Error::invalid(
        op,
        inner.label(),
        Errno::INVAL,
        format!("the QP is in state {state:?}; {need}"),
    )
}

#[cold]
fn ring_error(inner: &QpInner, op: &'static str, e: uverbs_rxe::PostError) -> Error {
    Error::invalid(op, inner.label(), post_errno(&e), e.to_string())
}

impl RxeRing {
    fn post_send(
        &mut self,
        inner: &QpInner,
        max_send_sge: u32,
        wrs: &[SendWr<'_>],
    ) -> Result<(), PostError> {
        let mut failed = None;
        let mut posted = 0usize;
        for (i, wr) in wrs.iter().enumerate() {
            if let Err(e) = self.post_one(inner, max_send_sge, wr) {
                failed = Some((i, e));
                break;
            }
            posted += 1;
        }
        if posted > 0 {
            self.sq.publish();
            if let Err(e) = self.db.ring() {
                return Err(PostError {
                    index: posted,
                    error: Error::os("post_send", inner.label(), e).with_reason(format!(
                        "the doorbell write failed; {posted} work request(s) are queued and run \
                         on the next successful post"
                    )),
                });
            }
        }
        match failed {
            None => Ok(()),
            Some((index, error)) => Err(PostError { index, error }),
        }
    }

    #[inline]
    fn post_one(&mut self, inner: &QpInner, max_send_sge: u32, wr: &SendWr<'_>) -> Result<()> {
        let payload = match wr.data {
            WrData::Sge(s) => {
                if s.len() > max_send_sge as usize {
                    return Err(ring_error(
                        inner,
                        "post_send",
                        uverbs_rxe::PostError::TooManySge {
                            num_sge: s.len(),
                            max_sge: max_send_sge,
                        },
                    ));
                }
                Payload::Sge(s)
            }
            WrData::Inline(d) => Payload::Inline(d),
        };
        let ud = match &wr.ud {
            Some(d) => Some(ud_dest(inner, "post_send", d)?),
            None => None,
        };
        let rwr = uverbs_rxe::SendWr {
            wr_id: wr.wr_id,
            op: wr.op,
            flags: wr.flags,
            payload,
            ud,
        };
        self.sq
            .post(&rwr)
            .map_err(|e| ring_error(inner, "post_send", e))?;
        self.note_slot(wr.ud.as_ref().map(|d| d.ah()));
        Ok(())
    }

    /// Records the AH (or none) of the WQE just written and advances the shadow index.
    #[inline]
    fn note_slot(&mut self, ah: Option<&Ah>) {
        let mask = self.sq.queue().index_mask();
        let slot = (self.sq_shadow & mask) as usize;
        if let Some(s) = self.ah_slots.get_mut(slot) {
            // Replacing the old value drops the AH of a send the kernel already consumed (the
            // ring let us reuse its slot).
            *s = ah.cloned();
        }
        self.sq_shadow = self.sq_shadow.wrapping_add(1) & mask;
    }

    fn post_recv(&mut self, inner: &QpInner, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let op = "post_recv";
        let Some(rq) = self.rq.as_mut() else {
            return Err(PostError {
                index: 0,
                error: Error::invalid(
                    op,
                    inner.label(),
                    Errno::INVAL,
                    "the QP uses an SRQ (or has no receive queue): post to the SRQ",
                ),
            });
        };
        let r = post_recv_list(rq, wrs);
        rq.publish();
        r.map_err(|(index, e)| PostError {
            index,
            error: Error::invalid(op, inner.label(), post_errno(&e), e.to_string()),
        })
    }
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

#[inline]
fn ud_dest<'b>(
    inner: &QpInner,
    op: &'static str,
    d: &crate::wr::UdDest<'b>,
) -> Result<uverbs_rxe::UdDest<'b>> {
    check_ah_pd(inner, op, d.ah())?;
    let Some(n) = NonZeroU32::new(d.ah_num()) else {
        // create_ah refuses ah_num 0, so this is unreachable for an Ah made by uverbs.
        return Err(Error::invalid(
            op,
            inner.label(),
            Errno::INVAL,
            "the AH has no rxe AH index",
        ));
    };
    Ok(uverbs_rxe::UdDest {
        ah: UdAh::Num(n),
        remote_qpn: d.remote_qpn,
        remote_qkey: d.remote_qkey,
    })
}

/// Writes `wrs` into `rq`; on failure returns the index of the first not written.
pub(crate) fn post_recv_list(
    rq: &mut RecvQueue,
    wrs: &[RecvWr<'_>],
) -> std::result::Result<(), (usize, uverbs_rxe::PostError)> {
    for (i, wr) in wrs.iter().enumerate() {
        if wr.sg_list.len() > rq.max_sge() as usize {
            return Err((
                i,
                uverbs_rxe::PostError::TooManySge {
                    num_sge: wr.sg_list.len(),
                    max_sge: rq.max_sge(),
                },
            ));
        }
        rq.post(wr.wr_id, wr.sg_list).map_err(|e| (i, e))?;
    }
    Ok(())
}

pub(crate) fn send_ops_flag(op: &WrOp) -> SendOpsFlags {
    match op {
        WrOp::Send => SendOpsFlags::SEND,
        WrOp::SendWithImm { .. } => SendOpsFlags::SEND_WITH_IMM,
        WrOp::SendWithInv { .. } => SendOpsFlags::SEND_WITH_INV,
        WrOp::RdmaWrite { .. } => SendOpsFlags::RDMA_WRITE,
        WrOp::RdmaWriteWithImm { .. } => SendOpsFlags::RDMA_WRITE_WITH_IMM,
        WrOp::RdmaRead { .. } => SendOpsFlags::RDMA_READ,
        WrOp::AtomicCmpAndSwp { .. } => SendOpsFlags::ATOMIC_CMP_AND_SWP,
        WrOp::AtomicFetchAndAdd { .. } => SendOpsFlags::ATOMIC_FETCH_AND_ADD,
        WrOp::LocalInv { .. } => SendOpsFlags::LOCAL_INV,
        WrOp::BindMw { .. } => SendOpsFlags::BIND_MW,
    }
}

/// An open `ibv_wr_*` batch on a QP (`ibv_qp_ex` between `ibv_wr_start` and
/// `ibv_wr_complete`/`ibv_wr_abort`), on any provider.
///
/// Each builder (`send`, `rdma_write`, …) starts one work request; the setters (`set_sge`,
/// `set_sge_list`, `set_inline_data`, `set_ud_addr`) complete the last one. As in libibverbs,
/// errors are sticky: the first one is returned by [`WrBatch::complete`], which then posts
/// nothing. Dropping the batch without `complete` aborts it. An operation the provider cannot
/// do (atomics, memory windows or invalidation on EFA; RDMA on an EFA UD QP) is refused by the
/// builder and reported by `complete`.
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
/// # let (pd, mut cq, mut qp, mr) = side(&ctx, true)?; // a QP from create_qp_ex
/// # peer_qp.post_recv(&[uverbs::RecvWr::new(1, &[peer_mr.sge(0, 64)?])])?;
/// use uverbs::{AhAttr, GlobalRoute, SendFlags};
///
/// let ah = pd.create_ah(&AhAttr { is_global: true, port_num: 1,
///     grh: GlobalRoute { dgid: peer_gid, ..Default::default() }, ..Default::default() })?;
/// mr.write(0, b"one batch")?;
/// let mut batch = qp.wr_start()?;                        // ibv_wr_start
/// batch
///     .send(7, SendFlags::SIGNALED)                      // ibv_wr_send
///     .set_sge(mr.lkey(), mr.addr(), 9)                  // ibv_wr_set_sge
///     .set_ud_addr(&ah, peer_qpn, QKEY);                 // ibv_wr_set_ud_addr
/// batch.complete()?;                                     // ibv_wr_complete: one doorbell
/// # fabric.process();
/// let wc = loop { if let Some(wc) = cq.poll_one()? { break wc } };
/// assert_eq!((wc.wr_id, wc.status), (7, uverbs::WcStatus::SUCCESS));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "ibv_qp_ex")]
pub struct WrBatch<'q> {
    qp: &'q mut Qp,
    /// rxe: the SQ shadow index at `wr_start`.
    start: u32,
    /// EFA: work requests staged so far.
    n: usize,
    err: Option<Error>,
    open: bool,
}

impl std::fmt::Debug for WrBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrBatch")
            .field("qp", &self.qp.label())
            .field("err", &self.err)
            .finish()
    }
}

impl WrBatch<'_> {
    fn op(&mut self, wr_id: u64, flags: SendFlags, op: WrOp) -> &mut Self {
        if self.err.is_some() {
            return self;
        }
        let allowed = self.qp.send_ops.unwrap_or_default();
        let need = send_ops_flag(&op);
        if !allowed.contains(need) {
            self.err = Some(Error::invalid(
                "wr_start",
                self.qp.label(),
                Errno::OPNOTSUPP,
                format!(
                    "work request {}: {need:?} is not in the QP's send_ops_flags {allowed:?}",
                    self.len()
                ),
            ));
            return self;
        }
        let inner = &self.qp.inner;
        let r = match &mut self.qp.ring {
            QpRing::Rxe(r) => match r.sq.wr_op(wr_id, flags, op) {
                Ok(()) => {
                    r.note_slot(None);
                    Ok(())
                }
                Err(e) => Err(ring_error(inner, "wr_start", e)),
            },
            QpRing::Efa(r) => r.wr_op(&mut self.n, wr_id, flags, op, inner),
        };
        if let Err(e) = r {
            self.err = Some(e);
        }
        self
    }

    fn set(&mut self, r: Result<()>) -> &mut Self {
        if let (Err(e), None) = (r, &self.err) {
            self.err = Some(e);
        }
        self
    }

    /// `ibv_wr_send`.
    #[doc(alias = "ibv_wr_send")]
    pub fn send(&mut self, wr_id: u64, flags: SendFlags) -> &mut Self {
        self.op(wr_id, flags, WrOp::Send)
    }

    /// `ibv_wr_send_imm` (`imm_data` host order).
    #[doc(alias = "ibv_wr_send_imm")]
    pub fn send_imm(&mut self, wr_id: u64, flags: SendFlags, imm_data: u32) -> &mut Self {
        self.op(wr_id, flags, WrOp::SendWithImm { imm_data })
    }

    /// `ibv_wr_send_inv`.
    #[doc(alias = "ibv_wr_send_inv")]
    pub fn send_inv(&mut self, wr_id: u64, flags: SendFlags, invalidate_rkey: u32) -> &mut Self {
        self.op(wr_id, flags, WrOp::SendWithInv { invalidate_rkey })
    }

    /// `ibv_wr_rdma_write`.
    #[doc(alias = "ibv_wr_rdma_write")]
    pub fn rdma_write(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
    ) -> &mut Self {
        self.op(wr_id, flags, WrOp::RdmaWrite { remote_addr, rkey })
    }

    /// `ibv_wr_rdma_write_imm`.
    #[doc(alias = "ibv_wr_rdma_write_imm")]
    pub fn rdma_write_imm(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        imm_data: u32,
    ) -> &mut Self {
        self.op(
            wr_id,
            flags,
            WrOp::RdmaWriteWithImm {
                remote_addr,
                rkey,
                imm_data,
            },
        )
    }

    /// `ibv_wr_rdma_read`.
    #[doc(alias = "ibv_wr_rdma_read")]
    pub fn rdma_read(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
    ) -> &mut Self {
        self.op(wr_id, flags, WrOp::RdmaRead { remote_addr, rkey })
    }

    /// `ibv_wr_atomic_cmp_swp`; follow with an 8-byte [`Self::set_sge`].
    #[doc(alias = "ibv_wr_atomic_cmp_swp")]
    pub fn atomic_cmp_swp(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        compare: u64,
        swap: u64,
    ) -> &mut Self {
        self.op(
            wr_id,
            flags,
            WrOp::AtomicCmpAndSwp {
                remote_addr,
                rkey,
                compare,
                swap,
            },
        )
    }

    /// `ibv_wr_atomic_fetch_add`; follow with an 8-byte [`Self::set_sge`].
    #[doc(alias = "ibv_wr_atomic_fetch_add")]
    pub fn atomic_fetch_add(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        add: u64,
    ) -> &mut Self {
        self.op(
            wr_id,
            flags,
            WrOp::AtomicFetchAndAdd {
                remote_addr,
                rkey,
                add,
            },
        )
    }

    /// `ibv_wr_set_sge`: one SGE for the last work request.
    #[doc(alias = "ibv_wr_set_sge")]
    pub fn set_sge(&mut self, lkey: u32, addr: u64, length: u32) -> &mut Self {
        if self.err.is_some() {
            return self;
        }
        let inner = &self.qp.inner;
        let r = match &mut self.qp.ring {
            QpRing::Rxe(r) => {
                r.sq.wr_set_sge(lkey, addr, length)
                    .map_err(|e| ring_error(inner, "wr_start", e))
            }
            QpRing::Efa(r) => r.wr_set_sges(self.n, &[Sge { addr, length, lkey }], inner),
        };
        self.set(r)
    }

    /// `ibv_wr_set_sge_list`.
    #[doc(alias = "ibv_wr_set_sge_list")]
    pub fn set_sge_list(&mut self, sges: &[Sge]) -> &mut Self {
        if self.err.is_some() {
            return self;
        }
        let inner = &self.qp.inner;
        let max = self.qp.cap.max_send_sge;
        let r = match &mut self.qp.ring {
            QpRing::Rxe(r) => {
                if sges.len() > max as usize {
                    Err(ring_error(
                        inner,
                        "wr_start",
                        uverbs_rxe::PostError::TooManySge {
                            num_sge: sges.len(),
                            max_sge: max,
                        },
                    ))
                } else {
                    r.sq.wr_set_sge_list(sges)
                        .map_err(|e| ring_error(inner, "wr_start", e))
                }
            }
            QpRing::Efa(r) => r.wr_set_sges(self.n, sges, inner),
        };
        self.set(r)
    }

    /// `ibv_wr_set_inline_data`.
    #[doc(alias = "ibv_wr_set_inline_data")]
    pub fn set_inline_data(&mut self, data: &[u8]) -> &mut Self {
        if self.err.is_some() {
            return self;
        }
        let inner = &self.qp.inner;
        let r = match &mut self.qp.ring {
            QpRing::Rxe(r) => {
                r.sq.wr_set_inline_data(data)
                    .map_err(|e| ring_error(inner, "wr_start", e))
            }
            QpRing::Efa(r) => r.wr_set_inline(self.n, data, inner),
        };
        self.set(r)
    }

    /// `ibv_wr_set_ud_addr` (UD and SRD QPs): the destination of the last work request. On
    /// rxe the AH is kept by the QP while the send is queued.
    #[doc(alias = "ibv_wr_set_ud_addr")]
    pub fn set_ud_addr(&mut self, ah: &Ah, remote_qpn: u32, remote_qkey: u32) -> &mut Self {
        if self.err.is_some() {
            return self;
        }
        let inner = &self.qp.inner;
        let r = match &mut self.qp.ring {
            QpRing::Rxe(r) => {
                let dest = crate::wr::UdDest::new(ah, remote_qpn, remote_qkey);
                ud_dest(inner, "wr_start", &dest).and_then(|d| {
                    r.sq.wr_set_ud_addr(d)
                        .map_err(|e| ring_error(inner, "wr_start", e))?;
                    // The WQE just built sits one slot behind the shadow index.
                    let mask = r.sq.queue().index_mask();
                    let slot = (r.sq_shadow.wrapping_sub(1) & mask) as usize;
                    if let Some(s) = r.ah_slots.get_mut(slot) {
                        *s = Some(ah.clone());
                    }
                    Ok(())
                })
            }
            QpRing::Efa(r) => check_ah_pd(inner, "wr_start", ah)
                .and_then(|()| r.wr_set_ud(self.n, ah, remote_qpn, remote_qkey, inner)),
        };
        self.set(r)
    }

    /// `efadv_wr_set_processing_hints`: processing hints for the last work request, on an EFA
    /// QP created with [`crate::EfaWrExFlags::WITH_PROCESSING_HINTS`]. Refused (the batch then
    /// fails in `complete`) on rxe, on an EFA QP created without the flag, and for hint bits
    /// EFA does not define.
    #[doc(alias = "efadv_wr_set_processing_hints")]
    pub fn efadv_set_processing_hints(&mut self, hints: crate::EfaProcessingHints) -> &mut Self {
        if self.err.is_some() {
            return self;
        }
        let inner = &self.qp.inner;
        let r = match &mut self.qp.ring {
            QpRing::Rxe(_) => Err(Error::invalid(
                "efadv_wr_set_processing_hints",
                inner.label(),
                Errno::OPNOTSUPP,
                "processing hints are EFA's (efadv); this is an rxe QP",
            )),
            QpRing::Efa(r) => r.wr_set_hints(self.n, hints, inner),
        };
        self.set(r)
    }

    /// Posts the batch (`ibv_wr_complete`): every work request or none. On any error in the
    /// batch nothing is posted and the first error is returned.
    #[doc(alias = "ibv_wr_complete")]
    pub fn complete(mut self) -> Result<()> {
        self.open = false;
        let err = self.err.take();
        let n = self.n;
        let start = self.start;
        let qp = &mut *self.qp;
        let inner = &qp.inner;
        match &mut qp.ring {
            QpRing::Rxe(r) => {
                if let Some(e) = err {
                    r.sq.wr_abort();
                    r.sq_shadow = start;
                    return Err(e);
                }
                match r.sq.wr_complete() {
                    Ok(0) => Ok(()),
                    Ok(_) => {
                        r.db.ring()
                            .map_err(|e| Error::os("wr_complete", inner.label(), e))
                    }
                    Err(e) => {
                        r.sq_shadow = start;
                        Err(ring_error(inner, "wr_complete", e))
                    }
                }
            }
            QpRing::Efa(r) => match err {
                Some(e) => Err(e),
                None => r.wr_complete(n, qp.sq_sig_all, inner),
            },
        }
    }

    /// How many work requests the batch holds so far (including a refused one, which makes
    /// [`WrBatch::complete`] fail).
    pub fn len(&self) -> usize {
        match &self.qp.ring {
            QpRing::Rxe(r) => {
                let mask = r.sq.queue().index_mask();
                (r.sq_shadow.wrapping_sub(self.start) & mask) as usize
            }
            QpRing::Efa(_) => self.n,
        }
    }

    /// Whether the batch holds no work request.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every work request of the batch (`ibv_wr_abort`).
    #[doc(alias = "ibv_wr_abort")]
    pub fn abort(mut self) {
        self.discard();
    }

    fn discard(&mut self) {
        self.open = false;
        if let QpRing::Rxe(r) = &mut self.qp.ring {
            r.sq.wr_abort();
            r.sq_shadow = self.start;
        }
        // EFA: staged work requests live in the QP's staging area and are simply forgotten.
    }
}

impl Drop for WrBatch<'_> {
    fn drop(&mut self) {
        if self.open {
            self.discard();
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

    #[test]
    fn doorbell_bytes_match_post_send_with_zero_wrs() {
        let db = Doorbell::new(3, 77);
        let hdr = u32::from_ne_bytes(db.req[0..4].try_into().unwrap());
        assert_eq!(hdr, IB_USER_VERBS_CMD_POST_SEND);
        assert_eq!(u16::from_ne_bytes(db.req[4..6].try_into().unwrap()), 8);
        assert_eq!(u16::from_ne_bytes(db.req[6..8].try_into().unwrap()), 1);
        let resp = u64::from_ne_bytes(db.req[8..16].try_into().unwrap());
        assert_eq!(resp, db.resp.as_ptr() as u64);
        assert_eq!(u32::from_ne_bytes(db.req[16..20].try_into().unwrap()), 77);
        assert_eq!(u32::from_ne_bytes(db.req[20..24].try_into().unwrap()), 0);
        assert_eq!(u32::from_ne_bytes(db.req[28..32].try_into().unwrap()), 56);
    }

    #[test]
    fn qp_state_and_type_numbers() {
        for v in 0..7u8 {
            assert_eq!(QpState::from_raw(v).raw(), v);
        }
        assert_eq!(QpType::Ud.raw(), uverbs_uapi::verbs::IB_UVERBS_QPT_UD);
        assert_eq!(
            QpType::XrcRecv.raw(),
            uverbs_uapi::verbs::IB_UVERBS_QPT_XRC_TGT
        );
        assert_eq!(
            QpAttrMask::RATE_LIMIT.bits(),
            uverbs_uapi::verbs::IB_QP_RATE_LIMIT
        );
        assert_eq!(
            QpAttrMask::DEST_QPN.bits(),
            uverbs_uapi::verbs::IB_QP_DEST_QPN
        );
    }

    /// Finding 12: the doorbell's response block must stay writable through the address in
    /// the prebuilt request after the Doorbell (and so the QP) moves. The write below stands
    /// in for the kernel's; under Miri (`cargo +nightly miri test -p uverbs --lib doorbell`)
    /// the earlier `Box` field made it undefined behaviour (a moved `Box` asserts unique
    /// access, invalidating the address taken before).
    #[test]
    fn doorbell_response_survives_moves() {
        let db = Doorbell::new(3, 77);
        let moved = vec![db];
        let db = moved.into_iter().next().unwrap();
        let boxed = Box::new(db);
        let resp = u64::from_ne_bytes(boxed.req[8..16].try_into().unwrap());
        let p = resp as usize as *mut IbUverbsPostSendResp;
        // SAFETY: `p` is the response block the Doorbell owns (its address is in `req`, which
        // the test just read), alive until `boxed` drops; nothing else accesses it now. This is
        // exactly what the kernel does during the doorbell `write()`.
        unsafe { p.write(IbUverbsPostSendResp { bad_wr: 9 }) };
        // SAFETY: as above; reading back what was written.
        assert_eq!(unsafe { p.read() }.bad_wr, 9);
        assert_eq!(boxed.resp.as_ptr(), p);
        drop(boxed);
    }

    /// Finding 3: the kernel's errno is kept, and the provider's "does not support" reason is
    /// given only for the errnos that mean it; EPERM (no CAP_NET_RAW) says so.
    #[test]
    fn raw_packet_refusal_keeps_the_kernel_errno_and_its_reason() {
        let cap = QpCap::default();
        let attr = QpInitAttr {
            qp_type: QpType::RawPacket,
            send_cq: None,
            recv_cq: None,
            srq: None,
            xrcd: None,
            cap,
            sq_sig_all: false,
            create_flags: 0,
            send_ops_flags: SendOpsFlags::empty(),
        };
        let e = explain_create_errno(Error::os("create_qp", "pd 1", Errno::PERM), &attr, true);
        assert!(e.is(Errno::PERM), "{e}");
        assert!(e.reason().contains("CAP_NET_RAW"), "{e}");
        assert!(!e.reason().contains("does not support"), "{e}");
        let e = explain_create_errno(
            Error::os("create_qp", "pd 1", Errno::OPNOTSUPP),
            &attr,
            true,
        );
        assert!(e.is(Errno::OPNOTSUPP), "{e}");
        assert!(
            e.reason().contains("rxe does not support RAW_PACKET"),
            "{e}"
        );
        // Another errno (the kernel ran out of memory) keeps the kernel's answer alone.
        let e = explain_create_errno(Error::os("create_qp", "pd 1", Errno::NOMEM), &attr, true);
        assert!(e.is(Errno::NOMEM) && e.reason().is_empty(), "{e}");
    }

    /// A heap block laid out as an rxe queue (`rxe_queue_buf` header, then the slots), for
    /// ring views without a kernel.
    struct HeapQueue {
        words: Vec<u64>,
    }

    impl HeapQueue {
        fn new(log2_elem: u32, log2_slots: u32) -> Self {
            use uverbs_uapi::rxe::{RxeQueueBuf, RXE_QUEUE_BUF_DATA_OFFSET};
            let len = RXE_QUEUE_BUF_DATA_OFFSET + (1usize << (log2_elem + log2_slots));
            let mut words = vec![0u64; len.div_ceil(8)];
            let hdr = RxeQueueBuf {
                log2_elem_size: log2_elem,
                index_mask: (1 << log2_slots) - 1,
                ..Default::default()
            };
            words.as_mut_bytes()[..std::mem::size_of::<RxeQueueBuf>()]
                .copy_from_slice(hdr.as_bytes());
            HeapQueue { words }
        }
    }

    /// Finding 9: a receive queue whose slots hold more than 64 SGEs (a device reporting
    /// max_sge > 64) takes a list of 65 (SGEs are read in place, no stack buffer bounds them)
    /// and refuses one longer than its slots with an error, no panic.
    #[test]
    fn sge_lists_are_bounded_by_the_queue_not_a_buffer() {
        let mut mem = HeapQueue::new(11, 2);
        let len = mem.words.len() * 8;
        // SAFETY: `mem.words` is `len` bytes, 8-aligned, zeroed past an initialised queue
        // header, outliving `rq` (dropped first, below); nothing else touches it.
        let q = unsafe {
            uverbs_rxe::Queue::from_raw(
                NonNull::new(mem.words.as_mut_ptr().cast::<u8>()).unwrap(),
                len,
                None,
            )
        }
        .unwrap();
        let mut rq = RecvQueue::new(q, 100).unwrap();
        let max = rq.max_sge() as usize;
        assert!(max > 64, "{max}");
        let sges = [Sge::default(); 128];
        let wrs = [RecvWr::new(1, &sges[..max + 1])];
        let (index, e) = post_recv_list(&mut rq, &wrs).unwrap_err();
        assert_eq!(index, 0);
        assert!(
            matches!(e, uverbs_rxe::PostError::TooManySge { num_sge, .. } if num_sge == max + 1),
            "{e}"
        );
        // 65 go.
        post_recv_list(&mut rq, &[RecvWr::new(2, &sges[..65])]).unwrap();
        // `rq` points into `mem`: it must not be used after `mem` goes.
        let _rq = rq;
        let _mem = mem;
    }
}
