//! Completion status and opcode as raw verbs numbers (`enum ibv_wc_status`,
//! `enum ibv_wc_opcode`), and the EFA status mapping rdma-core uses (`to_ibv_status` in
//! `providers/efa/verbs.c`).
//!
//! The provider hands out plain numbers; the named types (`uverbs::WcStatus`,
//! `uverbs::WcOpcode`) belong to the core, which wraps these numbers without translation.
//! Only the values this mapping produces are named here.

use crate::defs::*;

/// `IBV_WC_SUCCESS`.
pub const IBV_WC_SUCCESS: u32 = 0;
/// `IBV_WC_LOC_LEN_ERR`.
pub const IBV_WC_LOC_LEN_ERR: u32 = 1;
/// `IBV_WC_LOC_QP_OP_ERR`.
pub const IBV_WC_LOC_QP_OP_ERR: u32 = 2;
/// `IBV_WC_LOC_PROT_ERR`.
pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
/// `IBV_WC_WR_FLUSH_ERR`.
pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
/// `IBV_WC_BAD_RESP_ERR`.
pub const IBV_WC_BAD_RESP_ERR: u32 = 7;
/// `IBV_WC_REM_INV_REQ_ERR`.
pub const IBV_WC_REM_INV_REQ_ERR: u32 = 9;
/// `IBV_WC_REM_ACCESS_ERR`.
pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
/// `IBV_WC_REM_OP_ERR`.
pub const IBV_WC_REM_OP_ERR: u32 = 11;
/// `IBV_WC_RNR_RETRY_EXC_ERR`.
pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;
/// `IBV_WC_REM_INV_RD_REQ_ERR`.
pub const IBV_WC_REM_INV_RD_REQ_ERR: u32 = 15;
/// `IBV_WC_REM_ABORT_ERR`.
pub const IBV_WC_REM_ABORT_ERR: u32 = 16;
/// `IBV_WC_RESP_TIMEOUT_ERR`.
pub const IBV_WC_RESP_TIMEOUT_ERR: u32 = 20;
/// `IBV_WC_GENERAL_ERR`.
pub const IBV_WC_GENERAL_ERR: u32 = 21;

/// `IBV_WC_SEND`.
pub const IBV_WC_SEND: u32 = uverbs_uapi::write::IB_UVERBS_WC_SEND;
/// `IBV_WC_RDMA_WRITE`.
pub const IBV_WC_RDMA_WRITE: u32 = uverbs_uapi::write::IB_UVERBS_WC_RDMA_WRITE;
/// `IBV_WC_RDMA_READ`.
pub const IBV_WC_RDMA_READ: u32 = uverbs_uapi::write::IB_UVERBS_WC_RDMA_READ;
/// `IBV_WC_RECV`.
pub const IBV_WC_RECV: u32 = uverbs_uapi::verbs::IB_WC_RECV;
/// `IBV_WC_RECV_RDMA_WITH_IMM`.
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = uverbs_uapi::verbs::IB_WC_RECV_RDMA_WITH_IMM;

/// `IBV_WC_WITH_IMM`: `Wc::imm_data` is valid.
pub const IBV_WC_WITH_IMM: u32 = 1 << 1;

/// The verbs status of every `efa_io_comp_status` below 19 (a table: one load per CQE).
const STATUS: [u32; 19] = {
    let mut t = [IBV_WC_GENERAL_ERR; 19];
    t[EFA_IO_COMP_STATUS_OK as usize] = IBV_WC_SUCCESS;
    t[EFA_IO_COMP_STATUS_FLUSHED as usize] = IBV_WC_WR_FLUSH_ERR;
    t[EFA_IO_COMP_STATUS_LOCAL_ERROR_QP_INTERNAL_ERROR as usize] = IBV_WC_LOC_QP_OP_ERR;
    t[EFA_IO_COMP_STATUS_LOCAL_ERROR_UNSUPPORTED_OP as usize] = IBV_WC_LOC_QP_OP_ERR;
    t[EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH as usize] = IBV_WC_LOC_QP_OP_ERR;
    t[EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY as usize] = IBV_WC_LOC_PROT_ERR;
    t[EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH as usize] = IBV_WC_LOC_LEN_ERR;
    t[EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT as usize] = IBV_WC_REM_ABORT_ERR;
    t[EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR as usize] = IBV_WC_RNR_RETRY_EXC_ERR;
    t[EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN as usize] = IBV_WC_REM_INV_RD_REQ_ERR;
    t[EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_STATUS as usize] = IBV_WC_BAD_RESP_ERR;
    t[EFA_IO_COMP_STATUS_REMOTE_ERROR_FEATURE_MISMATCH as usize] = IBV_WC_REM_INV_REQ_ERR;
    t[EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_LENGTH as usize] = IBV_WC_REM_INV_REQ_ERR;
    t[EFA_IO_COMP_STATUS_LOCAL_ERROR_UNRESP_REMOTE as usize] = IBV_WC_RESP_TIMEOUT_ERR;
    t[EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE as usize] = IBV_WC_RESP_TIMEOUT_ERR;
    t[EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS as usize] = IBV_WC_REM_ACCESS_ERR;
    t[EFA_IO_COMP_STATUS_REMOTE_ERROR_UNKNOWN_PEER as usize] = IBV_WC_REM_OP_ERR;
    t
};

/// Maps an `efa_io_comp_status` to the `ibv_wc_status` number, exactly as rdma-core does;
/// unknown values become `IBV_WC_GENERAL_ERR` (the raw value stays available as the vendor
/// error).
#[inline]
pub fn wc_status_from_efa(status: u8) -> u32 {
    if status == EFA_IO_COMP_STATUS_OK {
        return IBV_WC_SUCCESS;
    }
    match STATUS.get(usize::from(status)) {
        Some(&s) => s,
        None => IBV_WC_GENERAL_ERR,
    }
}

/// [`wc_status_from_efa`] of every byte: a whole table, so the poll loop maps a CQE's status
/// byte with one load and no test.
const STATUS_BY_BYTE: [u32; 256] = {
    let mut t = [IBV_WC_GENERAL_ERR; 256];
    let mut i = 0;
    while i < STATUS.len() {
        t[i] = STATUS[i];
        i += 1;
    }
    t
};

/// [`wc_status_from_efa`] of the status byte of a CQE's word 0 (bits 23:16).
#[inline(always)]
pub fn wc_status_of_word0(w0: u32) -> u32 {
    STATUS_BY_BYTE[usize::from((w0 >> 16) as u8)]
}

/// The `ibv_wc_opcode` of a send completion by its `op_type` (3 bits): RDMA write and read
/// by name, everything else a send.
///
/// This departs from rdma-core on purpose: its `efa_wc_read_opcode` (and `efa_poll_one`)
/// name only RDMA write and report every other send-queue completion, an RDMA read's
/// included, as `IBV_WC_SEND`. ibv_poll_cq(3) says an RDMA read completes as
/// `IBV_WC_RDMA_READ`, which is what rxe reports too, so that is what we report.
const SEND_OPCODE: [u32; 8] = {
    let mut t = [IBV_WC_SEND; 8];
    t[EFA_IO_RDMA_WRITE as usize] = IBV_WC_RDMA_WRITE;
    t[EFA_IO_RDMA_READ as usize] = IBV_WC_RDMA_READ;
    t
};

/// The `ibv_wc_opcode` of a send completion with CQE `op_type` `op` (the 3-bit field; higher
/// bits are ignored).
#[inline]
pub fn send_wc_opcode(op: u8) -> u32 {
    SEND_OPCODE[usize::from(op & 7)]
}

/// [`send_wc_opcode`] by the top four bits of a CQE's word 0 (its flags are bits 31:24:
/// `op_type` bits 30:28, the unsolicited bit 31, which plays no part): one shift, one load.
const SEND_OPCODE_BY_TOP4: [u32; 16] = {
    let mut t = [IBV_WC_SEND; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = SEND_OPCODE[i & 7];
        i += 1;
    }
    t
};

/// [`send_wc_opcode`] of the `op_type` of a CQE's word 0.
#[inline(always)]
pub fn send_wc_opcode_of_word0(w0: u32) -> u32 {
    SEND_OPCODE_BY_TOP4[(w0 >> 28) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use uverbs_wr::{WcFlags, WcOpcode, WcStatus};

    /// The numbers this module hands out are wrapped into `uverbs_wr`'s `WcStatus`/`WcOpcode`
    /// untranslated (by the CQ here and the core above it): every number it can produce must
    /// be the shared vocabulary's name for it, and every status a device can report (all 256
    /// bytes), and every send op type, maps to one of those names. (Moved from the core's
    /// EFA CQ tests, where the numbers were wrapped before `Wc` was shared.)
    #[test]
    fn provider_numbers_are_the_shared_names() {
        let statuses = [
            (IBV_WC_SUCCESS, WcStatus::SUCCESS),
            (IBV_WC_LOC_LEN_ERR, WcStatus::LOC_LEN_ERR),
            (IBV_WC_LOC_QP_OP_ERR, WcStatus::LOC_QP_OP_ERR),
            (IBV_WC_LOC_PROT_ERR, WcStatus::LOC_PROT_ERR),
            (IBV_WC_WR_FLUSH_ERR, WcStatus::WR_FLUSH_ERR),
            (IBV_WC_BAD_RESP_ERR, WcStatus::BAD_RESP_ERR),
            (IBV_WC_REM_INV_REQ_ERR, WcStatus::REM_INV_REQ_ERR),
            (IBV_WC_REM_ACCESS_ERR, WcStatus::REM_ACCESS_ERR),
            (IBV_WC_REM_OP_ERR, WcStatus::REM_OP_ERR),
            (IBV_WC_RNR_RETRY_EXC_ERR, WcStatus::RNR_RETRY_EXC_ERR),
            (IBV_WC_REM_INV_RD_REQ_ERR, WcStatus::REM_INV_RD_REQ_ERR),
            (IBV_WC_REM_ABORT_ERR, WcStatus::REM_ABORT_ERR),
            (IBV_WC_RESP_TIMEOUT_ERR, WcStatus::RESP_TIMEOUT_ERR),
            (IBV_WC_GENERAL_ERR, WcStatus::GENERAL_ERR),
        ];
        for (n, s) in statuses {
            assert_eq!(WcStatus(n), s, "{}", s.as_str());
            assert_ne!(s.as_str(), "unknown", "{n}");
        }
        // Every EFA status, by byte and by CQE word 0, maps to one of the named numbers.
        for efa in 0..=u8::MAX {
            let n = wc_status_from_efa(efa);
            assert!(statuses.iter().any(|&(m, _)| m == n), "efa {efa} -> {n}");
            assert_eq!(wc_status_of_word0(u32::from(efa) << 16), n, "efa {efa}");
        }
        let opcodes = [
            (IBV_WC_SEND, WcOpcode::SEND),
            (IBV_WC_RDMA_WRITE, WcOpcode::RDMA_WRITE),
            (IBV_WC_RDMA_READ, WcOpcode::RDMA_READ),
            (IBV_WC_RECV, WcOpcode::RECV),
            (IBV_WC_RECV_RDMA_WITH_IMM, WcOpcode::RECV_RDMA_WITH_IMM),
        ];
        for (n, o) in opcodes {
            assert_eq!(WcOpcode(n), o);
        }
        assert!(WcOpcode(IBV_WC_RECV).is_recv() && WcOpcode(IBV_WC_RECV_RDMA_WITH_IMM).is_recv());
        // Every send op type (all 8 values of the 3-bit field) completes as a named send
        // opcode, never as a receive.
        for op in 0..8u8 {
            let n = send_wc_opcode(op);
            assert!(
                opcodes[..3].iter().any(|&(m, _)| m == n),
                "op_type {op} -> {n}"
            );
            assert!(!WcOpcode(n).is_recv(), "op_type {op}");
        }
        assert_eq!(WcFlags::WITH_IMM.bits(), IBV_WC_WITH_IMM);
    }

    /// The word-0 forms give what the byte forms give, for every status byte and flags byte.
    #[test]
    fn word0_forms_match_the_byte_forms() {
        for b in 0..=255u8 {
            let w0 = 0x1234 | u32::from(b) << 16 | u32::from(!b) << 24;
            assert_eq!(wc_status_of_word0(w0), wc_status_from_efa(b), "status {b}");
            let flags = b;
            let w0 = 0xabcd_ef01 & 0x00ff_ffff | u32::from(flags) << 24;
            let op = field_get8(EFA_IO_CDESC_COMMON_OP_TYPE_MASK, flags);
            assert_eq!(
                send_wc_opcode_of_word0(w0),
                send_wc_opcode(op),
                "flags {flags:#x}"
            );
        }
    }

    #[test]
    fn status_mapping_matches_rdma_core() {
        let table: [(u8, u32); 18] = [
            (0, IBV_WC_SUCCESS),
            (1, IBV_WC_WR_FLUSH_ERR),
            (2, IBV_WC_LOC_QP_OP_ERR),
            (3, IBV_WC_LOC_QP_OP_ERR),
            (4, IBV_WC_LOC_QP_OP_ERR),
            (5, IBV_WC_LOC_PROT_ERR),
            (6, IBV_WC_LOC_LEN_ERR),
            (7, IBV_WC_REM_ACCESS_ERR),
            (8, IBV_WC_REM_ABORT_ERR),
            (9, IBV_WC_REM_INV_RD_REQ_ERR),
            (10, IBV_WC_RNR_RETRY_EXC_ERR),
            (11, IBV_WC_REM_INV_REQ_ERR),
            (12, IBV_WC_BAD_RESP_ERR),
            (13, IBV_WC_RESP_TIMEOUT_ERR),
            (14, IBV_WC_REM_OP_ERR),
            (15, IBV_WC_RESP_TIMEOUT_ERR),
            (18, IBV_WC_REM_INV_REQ_ERR),
            (16, IBV_WC_GENERAL_ERR),
        ];
        for (efa, ibv) in table {
            assert_eq!(wc_status_from_efa(efa), ibv, "efa status {efa}");
        }
        for efa in [17, 19, 20, 0x7f, 0xff] {
            assert_eq!(
                wc_status_from_efa(efa),
                IBV_WC_GENERAL_ERR,
                "efa status {efa}"
            );
        }
        // ibv numbering spot checks against verbs.h order (the core checks every name
        // against its own types).
        assert_eq!(IBV_WC_GENERAL_ERR, 21);
        assert_eq!(IBV_WC_RESP_TIMEOUT_ERR, 20);
        assert_eq!(IBV_WC_RECV_RDMA_WITH_IMM, 129);
        assert_eq!(send_wc_opcode(EFA_IO_SEND), IBV_WC_SEND);
        // Not rdma-core's IBV_WC_SEND: the verbs value (see SEND_OPCODE).
        assert_eq!(send_wc_opcode(EFA_IO_RDMA_READ), IBV_WC_RDMA_READ);
        assert_eq!(send_wc_opcode(EFA_IO_RDMA_WRITE), IBV_WC_RDMA_WRITE);
        for op in 3..8 {
            assert_eq!(send_wc_opcode(op), IBV_WC_SEND, "op_type {op}");
        }
    }
}
