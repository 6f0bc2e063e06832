//! Work completions (`struct ibv_wc`) and their status, opcode and flag types: what a provider
//! writes when it polls, and what a program reads.

use bitflags::bitflags;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A completion status (`enum ibv_wc_status`): a number with named values, so a value the
/// hardware invents is just a number, never undefined behaviour.
#[doc(alias = "ibv_wc_status")]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(transparent)]
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
    pub const TM_ERR: Self = Self(22);
    pub const TM_RNDV_INCOMPLETE: Self = Self(23);

    /// Whether this is `SUCCESS`.
    pub fn is_success(self) -> bool {
        self == Self::SUCCESS
    }

    /// The text `ibv_wc_status_str` gives.
    #[doc(alias = "ibv_wc_status_str")]
    pub fn as_str(self) -> &'static str {
        const S: [&str; 24] = [
            "success",
            "local length error",
            "local QP operation error",
            "local EE context operation error",
            "local protection error",
            "Work Request Flushed Error",
            "memory management operation error",
            "bad response error",
            "local access error",
            "remote invalid request error",
            "remote access error",
            "remote operation error",
            "transport retry counter exceeded",
            "RNR retry counter exceeded",
            "local RDD violation error",
            "remote invalid RD request",
            "aborted error",
            "invalid EE context number",
            "invalid EE context state",
            "fatal error",
            "response timeout error",
            "general error",
            "TM error",
            "TM software rendezvous",
        ];
        S.get(self.0 as usize).copied().unwrap_or("unknown")
    }

    /// Whether this is `WR_FLUSH_ERR`: the work request never ran because its queue was
    /// already in the error state. It is a consequence; the completion that moved the queue
    /// there (usually earlier, sometimes on another CQ) carries the cause.
    pub fn is_flush(self) -> bool {
        self == Self::WR_FLUSH_ERR
    }

    /// What the status usually means for a program, beyond its name: for the statuses a
    /// connected QP meets when its peer or the link fails, who did what. `None` for success
    /// and for the statuses that need no more words.
    pub fn meaning(self) -> Option<&'static str> {
        Some(match self {
            Self::WR_FLUSH_ERR => {
                "the queue was already in the error state, so this request never ran; an \
                 earlier error completion says why"
            }
            Self::RETRY_EXC_ERR => {
                "the peer stopped acknowledging: it is gone, its QP is no longer connected to \
                 this one, or the link is down (the QP's timeout and retry_cnt set how long \
                 that takes to notice)"
            }
            Self::RNR_RETRY_EXC_ERR => {
                "the peer had no receive posted each time this send was retried (rnr_retry)"
            }
            Self::REM_INV_REQ_ERR => {
                "the peer's responder refused the request: too long for its receive, an \
                 operation its QP does not allow, or a packet sequence it could not accept"
            }
            Self::REM_ACCESS_ERR => {
                "the peer refused the access: the rkey, the address range or the memory \
                 region's rights do not allow it"
            }
            Self::REM_OP_ERR => "the peer could not complete the operation at its end",
            Self::LOC_LEN_ERR => "the message does not fit the posted receive (or is too long)",
            Self::LOC_PROT_ERR | Self::LOC_ACCESS_ERR => {
                "a local buffer is not covered by its memory region, or the region's rights \
                 do not allow this use"
            }
            Self::LOC_QP_OP_ERR => "the work request is not valid for this QP",
            Self::BAD_RESP_ERR => "the peer answered with an unexpected response",
            Self::FATAL_ERR => "the device failed",
            _ => return None,
        })
    }
}

impl core::fmt::Display for WcStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.as_str(), self.0)
    }
}

/// A completion opcode (`enum ibv_wc_opcode`).
#[doc(alias = "ibv_wc_opcode")]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(transparent)]
pub struct WcOpcode(pub u32);

#[allow(missing_docs)]
impl WcOpcode {
    pub const SEND: Self = Self(0);
    pub const RDMA_WRITE: Self = Self(1);
    pub const RDMA_READ: Self = Self(2);
    pub const COMP_SWAP: Self = Self(3);
    pub const FETCH_ADD: Self = Self(4);
    pub const BIND_MW: Self = Self(5);
    pub const LOCAL_INV: Self = Self(6);
    pub const TSO: Self = Self(7);
    pub const FLUSH: Self = Self(8);
    pub const ATOMIC_WRITE: Self = Self(9);
    pub const RECV: Self = Self(1 << 7);
    pub const RECV_RDMA_WITH_IMM: Self = Self((1 << 7) + 1);

    /// Whether this completes a receive (`opcode & IBV_WC_RECV`).
    pub fn is_recv(self) -> bool {
        self.0 & Self::RECV.0 != 0
    }
}

/// Completion flags (`enum ibv_wc_flags`).
///
/// Declared outside `bitflags!` (which then only adds the flag methods) so it can be a
/// transparent `u32` with zerocopy's traits, as `Wc` needs to be filled by a whole copy.
#[doc(alias = "ibv_wc_flags")]
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, Default, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(transparent)]
pub struct WcFlags(u32);

bitflags! {
    impl WcFlags: u32 {
        /// A GRH is in the first 40 bytes of the receive buffer.
        const GRH = 1 << 0;
        /// `imm_data` is valid.
        const WITH_IMM = 1 << 1;
        /// IP checksum verified.
        const IP_CSUM_OK = 1 << 2;
        /// `invalidated_rkey` is valid.
        const WITH_INV = 1 << 3;
        /// Tag matching completion.
        const TM_SYNC_REQ = 1 << 4;
        /// Tag matching.
        const TM_MATCH = 1 << 5;
        /// Tag matching data valid.
        const TM_DATA_VALID = 1 << 6;
    }
}

/// Prints like a `bitflags!` type: `WcFlags(GRH | WITH_IMM)`, `WcFlags(0x0)` when empty.
impl core::fmt::Debug for WcFlags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("WcFlags(")?;
        if self.is_empty() {
            write!(f, "{:#x}", self.bits())?;
        } else {
            bitflags::parser::to_writer(self, &mut *f)?;
        }
        f.write_str(")")
    }
}

/// A work completion (`struct ibv_wc`): what a provider writes for each completion it polls.
///
/// ```
/// use uverbs_wr::{Wc, WcOpcode, WcStatus};
///
/// fn handle(wc: &Wc) -> Result<(), String> {
///     if !wc.status.is_success() {
///         return Err(format!("wr {}: {} (vendor error {})", wc.wr_id, wc.status, wc.vendor_err));
///     }
///     if wc.opcode == WcOpcode::RECV {
///         println!("received {} bytes from QP {}, immediate {:?}", wc.byte_len, wc.src_qp, wc.imm());
///     }
///     Ok(())
/// }
/// let wc = Wc { wr_id: 7, status: WcStatus::SUCCESS, opcode: WcOpcode::RECV, byte_len: 5,
///               ..Default::default() };
/// assert!(handle(&wc).is_ok());
/// assert!(handle(&Wc { status: WcStatus::REM_ACCESS_ERR, ..wc }).is_err());
/// ```
///
/// Laid out like `struct ibv_wc` (and the kernel's `struct ib_uverbs_wc`, which rxe writes into
/// its CQ ring), so one is filled from a ring slot with wide copies plus the flag translation.
///
/// `FromBytes` (every field is a plain number), so a ring slot can be copied into one whole;
/// not `IntoBytes`, because `struct ibv_wc` ends in two bytes of padding.
#[doc(alias = "ibv_wc")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, FromBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct Wc {
    /// The `wr_id` of the completed work request.
    pub wr_id: u64,
    /// Success or the error.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// The device's own error code.
    pub vendor_err: u32,
    /// Bytes transferred (receives, RDMA reads, atomics).
    pub byte_len: u32,
    /// With `WcFlags::WITH_IMM`: the immediate data, in host order on every provider: the
    /// value the sender passed (`WrOp::SendWithImm { imm_data }`, also host order), with no
    /// `ntohl` to apply. (C's `ibv_wc.imm_data` is `__be32`, network order, to be passed
    /// through `be32toh`; the providers do that conversion, as they do `htobe32` on the send
    /// side.) With `WcFlags::WITH_INV`: the invalidated rkey.
    #[doc(alias = "ibv_wc.imm_data")]
    pub imm_data: u32,
    /// The local QP number.
    pub qp_num: u32,
    /// The source QP number (UD, SRD).
    pub src_qp: u32,
    /// Flags.
    pub wc_flags: WcFlags,
    /// P_Key index (GSI QPs).
    pub pkey_index: u16,
    /// Source LID (IB UD; EFA: the sender's AH number, 0xffff when unknown).
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// Destination LID path bits.
    pub dlid_path_bits: u8,
}

const _: () = {
    assert!(core::mem::size_of::<Wc>() == 48);
    assert!(core::mem::offset_of!(Wc, imm_data) == 24);
    assert!(core::mem::offset_of!(Wc, wc_flags) == 36);
    assert!(core::mem::offset_of!(Wc, pkey_index) == 40);
    assert!(core::mem::offset_of!(Wc, dlid_path_bits) == 45);
};

impl Wc {
    /// The invalidated rkey when `wc_flags` has `WITH_INV`.
    pub fn invalidated_rkey(&self) -> Option<u32> {
        self.wc_flags
            .contains(WcFlags::WITH_INV)
            .then_some(self.imm_data)
    }

    /// The immediate data (host order, see [`Wc::imm_data`]) when `wc_flags` has `WITH_IMM`.
    pub fn imm(&self) -> Option<u32> {
        self.wc_flags
            .contains(WcFlags::WITH_IMM)
            .then_some(self.imm_data)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;

    #[test]
    fn flags_debug_reads_like_bitflags() {
        assert_eq!(format!("{:?}", WcFlags::empty()), "WcFlags(0x0)");
        assert_eq!(
            format!("{:?}", WcFlags::GRH | WcFlags::WITH_INV),
            "WcFlags(GRH | WITH_INV)"
        );
        assert_eq!(
            format!("{:?}", WcFlags::from_bits_retain(0x101)),
            "WcFlags(GRH | 0x100)"
        );
    }

    #[test]
    fn unknown_status_is_a_number_with_a_name() {
        assert_eq!(WcStatus(999).as_str(), "unknown");
        assert_eq!(
            WcStatus::WR_FLUSH_ERR.as_str(),
            "Work Request Flushed Error"
        );
        assert!(WcOpcode::RECV_RDMA_WITH_IMM.is_recv());
        assert!(!WcOpcode::RDMA_READ.is_recv());
    }

    #[test]
    fn the_statuses_of_a_failed_peer_say_what_they_mean() {
        let retry = WcStatus::RETRY_EXC_ERR.meaning().unwrap();
        assert!(retry.contains("the peer stopped acknowledging"), "{retry}");
        assert!(WcStatus::WR_FLUSH_ERR.is_flush());
        assert!(WcStatus::WR_FLUSH_ERR
            .meaning()
            .unwrap()
            .contains("never ran"));
        assert!(!WcStatus::RETRY_EXC_ERR.is_flush());
        assert_eq!(WcStatus::SUCCESS.meaning(), None);
        assert_eq!(WcStatus(999).meaning(), None);
    }
}
