//! QP attribute types: transport type, state, caps, what to create
//! (`ibv_qp_init_attr_ex`), what to modify or query (`ibv_qp_attr`, `ibv_qp_attr_mask`) and
//! the address-vector conversions to and from the kernel's `ib_uverbs_qp_dest`.

use bitflags::bitflags;
use uverbs_uapi::verbs::IbUverbsQpCap;
use uverbs_uapi::write::IbUverbsQpDest;

use crate::ah::{AhAttr, GlobalRoute};
use crate::cq::Cq;
use crate::mr::AccessFlags;
use crate::query::{Gid, Mtu};
use crate::srq::Srq;
use crate::xrcd::Xrcd;

#[doc(inline)]
pub use uverbs_wr::{QpType, SendOpsFlags};

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
    pub(crate) fn from_uverbs(c: &IbUverbsQpCap) -> Self {
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
    /// Requested sizes; written back by create into [`Qp::cap`](crate::Qp::cap).
    pub cap: QpCap,
    /// Every send completes with a completion (`sq_sig_all`).
    pub sq_sig_all: bool,
    /// `IB_UVERBS_QP_CREATE_*` creation flags.
    pub create_flags: u32,
    /// Operations the `wr_*` API may use ([`Pd::create_qp_ex`](crate::Pd::create_qp_ex); ignored by `create_qp`).
    pub send_ops_flags: SendOpsFlags,
    /// The user's value for this QP (`qp_context` of `struct ibv_qp_init_attr`; a number,
    /// not a pointer): read back with [`Qp::qp_context`](crate::Qp::qp_context) and returned with the QP's async
    /// events ([`AsyncEvent::context`](crate::AsyncEvent)).
    pub qp_context: u64,
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
            qp_context: 0,
        }
    }
}

/// QP attributes (`struct ibv_qp_attr`) for [`Qp::modify`](crate::Qp::modify) and [`Qp::query`](crate::Qp::query): only the fields
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
    /// Local ACK timeout code: each try waits 4.096 µs × 2^`timeout` for an acknowledgement
    /// (0: wait for ever).
    pub timeout: u8,
    /// Retries on timeout (0..=7) before the send completes with `RETRY_EXC_ERR`. **rxe treats
    /// 7 as unlimited** (`rxe_comp.c` decrements the count only when it is not 7), so on rxe a
    /// peer that vanished is never reported by the transport with 7; use 6 or less
    /// (docs/reliability.md, "A vanished peer").
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

/// What [`Qp::query`](crate::Qp::query) returns: the attributes and the creation-time facts of
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

pub(crate) fn dest_to_uverbs(a: &AhAttr) -> IbUverbsQpDest {
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

pub(crate) fn dest_from_uverbs(d: &IbUverbsQpDest) -> AhAttr {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
