//! Completion status and opcode as verbs numbers (`enum ibv_wc_status`, `enum ibv_wc_opcode`),
//! and the EFA status mapping rdma-core uses (`to_ibv_status` in `providers/efa/verbs.c`).

use crate::defs::*;

/// A completion status: the number of `enum ibv_wc_status`. A newtype, not an enum, so a value
/// we have not named is still representable.
#[doc(alias = "ibv_wc_status")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WcStatus(pub u32);

#[allow(missing_docs)]
impl WcStatus {
    pub const SUCCESS: Self = Self(0);
    pub const LOC_LEN_ERR: Self = Self(1);
    pub const LOC_QP_OP_ERR: Self = Self(2);
    pub const LOC_EEC_OP_ERR: Self = Self(3);
    pub const LOC_PROT_ERR: Self = Self(4);
    pub const WR_FLUSH_ERR: Self = Self(5);
    pub const MW_BIND_ERR: Self = Self(6);
    pub const BAD_RESP_ERR: Self = Self(7);
    pub const LOC_ACCESS_ERR: Self = Self(8);
    pub const REM_INV_REQ_ERR: Self = Self(9);
    pub const REM_ACCESS_ERR: Self = Self(10);
    pub const REM_OP_ERR: Self = Self(11);
    pub const RETRY_EXC_ERR: Self = Self(12);
    pub const RNR_RETRY_EXC_ERR: Self = Self(13);
    pub const LOC_RDD_VIOL_ERR: Self = Self(14);
    pub const REM_INV_RD_REQ_ERR: Self = Self(15);
    pub const REM_ABORT_ERR: Self = Self(16);
    pub const INV_EECN_ERR: Self = Self(17);
    pub const INV_EEC_STATE_ERR: Self = Self(18);
    pub const FATAL_ERR: Self = Self(19);
    pub const RESP_TIMEOUT_ERR: Self = Self(20);
    pub const GENERAL_ERR: Self = Self(21);
}

impl WcStatus {
    /// Maps an `efa_io_comp_status` to the verbs status, exactly as rdma-core does; unknown
    /// values become `GENERAL_ERR` (the raw value stays available as the vendor error).
    pub fn from_efa(status: u8) -> Self {
        match status {
            EFA_IO_COMP_STATUS_OK => Self::SUCCESS,
            EFA_IO_COMP_STATUS_FLUSHED => Self::WR_FLUSH_ERR,
            EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR
            | EFA_IO_COMP_STATUS_LOCAL_ERROR_UNSUPPORTED_OP
            | EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH => Self::LOC_QP_OP_ERR,
            EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY => Self::LOC_PROT_ERR,
            EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH => Self::LOC_LEN_ERR,
            EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT => Self::REM_ABORT_ERR,
            EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR => Self::RNR_RETRY_EXC_ERR,
            EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN => Self::REM_INV_RD_REQ_ERR,
            EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_STATUS => Self::BAD_RESP_ERR,
            EFA_IO_COMP_STATUS_REMOTE_ERROR_FEATURE_MISMATCH
            | EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_LENGTH => Self::REM_INV_REQ_ERR,
            EFA_IO_COMP_STATUS_LOCAL_ERROR_UNRESP_REMOTE
            | EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE => Self::RESP_TIMEOUT_ERR,
            EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS => Self::REM_ACCESS_ERR,
            EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER => Self::REM_OP_ERR,
            _ => Self::GENERAL_ERR,
        }
    }

    /// Whether this is `IBV_WC_SUCCESS`.
    pub fn is_success(self) -> bool {
        self == Self::SUCCESS
    }
}

/// A completion opcode: the number of `enum ibv_wc_opcode`.
#[doc(alias = "ibv_wc_opcode")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WcOpcode(pub u32);

impl WcOpcode {
    /// `IBV_WC_SEND`.
    pub const SEND: Self = Self(0);
    /// `IBV_WC_RDMA_WRITE`.
    pub const RDMA_WRITE: Self = Self(1);
    /// `IBV_WC_RDMA_READ`.
    pub const RDMA_READ: Self = Self(2);
    /// `IBV_WC_RECV`.
    pub const RECV: Self = Self(1 << 7);
    /// `IBV_WC_RECV_RDMA_WITH_IMM`.
    pub const RECV_RDMA_WITH_IMM: Self = Self((1 << 7) + 1);
}

/// `IBV_WC_WITH_IMM`: `Wc::imm_data` is valid.
pub const IBV_WC_WITH_IMM: u32 = 1 << 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_mapping_matches_rdma_core() {
        let table: [(u8, WcStatus); 18] = [
            (0, WcStatus::SUCCESS),
            (1, WcStatus::WR_FLUSH_ERR),
            (2, WcStatus::LOC_QP_OP_ERR),
            (3, WcStatus::LOC_QP_OP_ERR),
            (4, WcStatus::LOC_QP_OP_ERR),
            (5, WcStatus::LOC_PROT_ERR),
            (6, WcStatus::LOC_LEN_ERR),
            (7, WcStatus::REM_ACCESS_ERR),
            (8, WcStatus::REM_ABORT_ERR),
            (9, WcStatus::REM_INV_RD_REQ_ERR),
            (10, WcStatus::RNR_RETRY_EXC_ERR),
            (11, WcStatus::REM_INV_REQ_ERR),
            (12, WcStatus::BAD_RESP_ERR),
            (13, WcStatus::RESP_TIMEOUT_ERR),
            (14, WcStatus::REM_OP_ERR),
            (15, WcStatus::RESP_TIMEOUT_ERR),
            (18, WcStatus::REM_INV_REQ_ERR),
            (16, WcStatus::GENERAL_ERR),
        ];
        for (efa, ibv) in table {
            assert_eq!(WcStatus::from_efa(efa), ibv, "efa status {efa}");
        }
        assert_eq!(WcStatus::from_efa(0xff), WcStatus::GENERAL_ERR);
        // ibv numbering spot checks against verbs.h order.
        assert_eq!(WcStatus::GENERAL_ERR.0, 21);
        assert_eq!(WcStatus::RESP_TIMEOUT_ERR.0, 20);
        assert_eq!(WcOpcode::RECV_RDMA_WITH_IMM.0, 129);
    }
}
