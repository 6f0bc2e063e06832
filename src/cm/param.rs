//! Connection parameters, UD parameters and the port spaces of rdma_cm ids.

use uverbs_uapi::ucma::{
    RdmaUcmConnParam, RdmaUcmUdParam, CMA_HDR_SIZE, IB_CM_REJ_PRIVATE_DATA_SIZE,
    IB_CM_REP_PRIVATE_DATA_SIZE, IB_CM_REQ_PRIVATE_DATA_SIZE, IB_CM_SIDR_REP_PRIVATE_DATA_SIZE,
    IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE, RDMA_MAX_INIT_DEPTH, RDMA_MAX_RESP_RES, RDMA_PS_TCP,
    RDMA_PS_UDP,
};
use uverbs_uapi::write::IbUverbsAhAttr;

use crate::ah::{AhAttr, GlobalRoute};
use crate::qp::QpType;
use crate::query::Gid;

/// The service an id offers (`enum rdma_port_space`): decides its QP type and how the
/// kernel connects it.
#[doc(alias = "rdma_port_space")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortSpace {
    /// `RDMA_PS_TCP`: reliable connected (RC) QPs, connected with the IB CM REQ/REP/RTU.
    Tcp,
    /// `RDMA_PS_UDP`: unreliable datagram (UD) QPs, "connected" with SIDR REQ/REP, Q_Key
    /// `RDMA_UDP_QKEY`; also multicast.
    Udp,
}

impl PortSpace {
    /// The kernel's number (`RDMA_PS_*`).
    pub fn raw(self) -> u16 {
        match self {
            PortSpace::Tcp => RDMA_PS_TCP,
            PortSpace::Udp => RDMA_PS_UDP,
        }
    }

    /// The QP type of ids in this port space (`RC` for TCP, `UD` for UDP).
    pub fn qp_type(self) -> QpType {
        match self {
            PortSpace::Tcp => QpType::Rc,
            PortSpace::Udp => QpType::Ud,
        }
    }

    /// `"tcp"` / `"udp"`, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            PortSpace::Tcp => "tcp",
            PortSpace::Udp => "udp",
        }
    }

    /// Most private-data bytes `connect` can carry: the REQ (SIDR REQ) private data less the
    /// rdma_cm header the kernel puts in front of it (56 for TCP, 180 for UDP on IB/RoCE).
    pub fn max_connect_private_data(self) -> usize {
        match self {
            PortSpace::Tcp => IB_CM_REQ_PRIVATE_DATA_SIZE - CMA_HDR_SIZE,
            PortSpace::Udp => IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE - CMA_HDR_SIZE,
        }
    }

    /// Most private-data bytes `accept` can carry: the REP (SIDR REP) private data (196 / 136).
    pub fn max_accept_private_data(self) -> usize {
        match self {
            PortSpace::Tcp => IB_CM_REP_PRIVATE_DATA_SIZE,
            PortSpace::Udp => IB_CM_SIDR_REP_PRIVATE_DATA_SIZE,
        }
    }

    /// Most private-data bytes `reject` can carry: the REJ (SIDR REP) private data (148 / 136).
    pub fn max_reject_private_data(self) -> usize {
        match self {
            PortSpace::Tcp => IB_CM_REJ_PRIVATE_DATA_SIZE,
            PortSpace::Udp => IB_CM_SIDR_REP_PRIVATE_DATA_SIZE,
        }
    }
}

/// What [`super::CmId::connect`] and [`super::CmId::accept`] send (`struct rdma_conn_param`).
#[doc(alias = "rdma_conn_param")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnParam<'a> {
    /// Bytes for the peer (see [`PortSpace::max_connect_private_data`] and friends).
    pub private_data: &'a [u8],
    /// RDMA reads / atomics the peer may have outstanding to us
    /// ([`ConnParam::DEVICE_MAX`]: as many as the device allows).
    pub responder_resources: u8,
    /// RDMA reads / atomics we may have outstanding to the peer
    /// ([`ConnParam::DEVICE_MAX`]: as many as the device allows).
    pub initiator_depth: u8,
    /// Whether the hardware does end-to-end flow control.
    pub flow_control: u8,
    /// Retries after a transport timeout (0..=7; connect only). rxe treats 7 as unlimited: a
    /// vanished peer is then never reported by the transport (see [`crate::QpAttr::retry_cnt`]).
    pub retry_count: u8,
    /// Retries after an RNR NAK (7: infinite; connect only).
    pub rnr_retry_count: u8,
    /// Whether the QP uses an SRQ (only when the id has no QP of its own).
    pub srq: bool,
    /// The QP number to announce (only when the id has no QP of its own).
    pub qp_num: u32,
}

impl ConnParam<'_> {
    /// `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH`: "the device's maximum".
    pub const DEVICE_MAX: u8 = RDMA_MAX_RESP_RES;
}

impl Default for ConnParam<'_> {
    /// No private data, the device's maximum RDMA read depth both ways, 7 retries, infinite
    /// RNR retries (what librdmacm uses for a null `conn_param`).
    fn default() -> Self {
        ConnParam {
            private_data: &[],
            responder_resources: RDMA_MAX_RESP_RES,
            initiator_depth: RDMA_MAX_INIT_DEPTH,
            flow_control: 0,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: false,
            qp_num: 0,
        }
    }
}

/// The peer's connection parameters as an event reports them (private data apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConnInfo {
    /// The peer's QP number.
    pub qp_num: u32,
    /// Whether the peer's QP uses an SRQ.
    pub srq: bool,
    /// Responder resources (on a connect request: already swapped to our point of view).
    pub responder_resources: u8,
    /// Initiator depth (on a connect request: already swapped to our point of view).
    pub initiator_depth: u8,
    /// Flow control.
    pub flow_control: u8,
    /// Retry count.
    pub retry_count: u8,
    /// RNR retry count.
    pub rnr_retry_count: u8,
}

impl ConnInfo {
    pub(crate) fn from_kernel(c: &RdmaUcmConnParam) -> Self {
        ConnInfo {
            qp_num: c.qp_num,
            srq: c.srq != 0,
            responder_resources: c.responder_resources,
            initiator_depth: c.initiator_depth,
            flow_control: c.flow_control,
            retry_count: c.retry_count,
            rnr_retry_count: c.rnr_retry_count,
        }
    }
}

/// Where a UD peer (or a multicast group) is (`struct rdma_ud_param`): make an AH from
/// `ah_attr` ([`crate::Pd::create_ah`]) and send to `qp_num` with `qkey`.
#[doc(alias = "rdma_ud_param")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdParam {
    /// Remote QP number (`0xffffff` for multicast).
    pub qp_num: u32,
    /// Remote Q_Key.
    pub qkey: u32,
    /// Address vector to the peer.
    pub ah_attr: AhAttr,
}

impl UdParam {
    pub(crate) fn from_kernel(u: &RdmaUcmUdParam) -> Self {
        UdParam {
            qp_num: u.qp_num,
            qkey: u.qkey,
            ah_attr: ah_attr_from_kernel(&u.ah_attr),
        }
    }
}

pub(crate) fn ah_attr_from_kernel(a: &IbUverbsAhAttr) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            dgid: Gid { raw: a.grh.dgid },
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: a.is_global != 0,
        port_num: a.port_num,
    }
}

/// Private data of an event: the first `private_data_len` bytes (bounded by the array).
///
/// On IB/RoCE the length is the whole private-data field of the CM message (56 bytes for a
/// TCP connect request, 196 for a reply, 148 for a reject), not what the sender gave: the
/// sender's bytes come first, zeros after them.
pub(crate) fn private_data(bytes: &[u8; 256], len: u8) -> Vec<u8> {
    bytes[..usize::from(len)].to_vec()
}
