//! What kind of QP a work request is posted to ([`QpType`]) and which operations the `wr_*`
//! API may build on it ([`SendOpsFlags`]).

use bitflags::bitflags;

use crate::WrOp;

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
    /// `IBV_QPT_RAW_PACKET` (needs `CAP_NET_RAW`).
    RawPacket,
    /// `IBV_QPT_XRC_SEND` (XRC initiator).
    XrcSend,
    /// `IBV_QPT_XRC_RECV` (XRC target, created in an XRC domain).
    XrcRecv,
    /// SRD, EFA's reliable, unordered datagrams (`IBV_QPT_DRIVER` with
    /// `EFADV_QP_DRIVER_TYPE_SRD`): addressed like UD (an address handle, a remote QPN and a
    /// Q_Key per send).
    #[doc(alias = "EFADV_QP_DRIVER_TYPE_SRD")]
    Srd,
}

impl QpType {
    /// The kernel's number (`IB_UVERBS_QPT_*`, equal to `IBV_QPT_*`; `IBV_QPT_DRIVER` for
    /// SRD).
    pub const fn raw(self) -> u8 {
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
    pub const fn is_datagram(self) -> bool {
        matches!(self, QpType::Ud | QpType::Srd)
    }
}

bitflags! {
    /// Operations the `wr_*` API may build on a QP (`enum ibv_qp_create_send_ops_flags`),
    /// chosen when the QP is created.
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
        /// `IBV_QP_EX_WITH_ATOMIC_WRITE`.
        const ATOMIC_WRITE = 1 << 12;
    }
}

impl SendOpsFlags {
    /// The flag that allows `op` in a `wr_*` batch.
    pub const fn of(op: &WrOp) -> Self {
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
            WrOp::AtomicWrite { .. } => SendOpsFlags::ATOMIC_WRITE,
        }
    }
}
