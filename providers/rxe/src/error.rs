//! Errors of the rxe ring layer: a mapped queue that fails validation ([`RingError`]) and a work
//! request that fails a check before anything is written to the ring ([`WrError`]; a list's
//! refusal is a [`uverbs_wr::PostError`] of it).
//!
//! Each variant names the check that failed and carries the numbers involved, so the caller
//! (which knows the QP/CQ) can report operation, object and reason.

use core::fmt;

use uverbs_wr::QpType;

use crate::sq::SendOpcode;

/// Which index of an rxe queue header a [`RingError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexKind {
    /// `producer_index` (written by userspace for SQ/RQ/SRQ, by the kernel for the CQ).
    Producer,
    /// `consumer_index` (written by the kernel for SQ/RQ/SRQ, by userspace for the CQ).
    Consumer,
}

impl fmt::Display for IndexKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IndexKind::Producer => "producer_index",
            IndexKind::Consumer => "consumer_index",
        })
    }
}

/// A mapped rxe queue is unusable: its header or an index the kernel wrote is not sane, or the
/// caller's parameters do not fit it. Never retried: the ring must be treated as dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RingError {
    /// The mapping's base address is not 8-byte aligned.
    Misaligned {
        /// The base address.
        addr: usize,
    },
    /// The mapping is shorter than the header plus `num_slots << log2_elem_size` bytes.
    MappingTooSmall {
        /// Length of the mapping.
        len: usize,
        /// Bytes the header claims.
        need: u64,
    },
    /// `log2_elem_size` is outside the range this crate accepts (3..=20).
    BadElemSize {
        /// The value in the header.
        log2_elem_size: u32,
    },
    /// The element size differs from the one the caller expected.
    ElemSizeMismatch {
        /// Expected element size in bytes.
        expected: usize,
        /// Element size from the header.
        found: usize,
    },
    /// The element size is too small for what the queue must hold.
    ElemTooSmall {
        /// Bytes one element must hold.
        need: usize,
        /// Element size from the header.
        found: usize,
    },
    /// `index_mask + 1` is not a power of two in `1..=2^31`.
    BadIndexMask {
        /// The value in the header.
        index_mask: u32,
    },
    /// An index in the header is larger than `index_mask` (ring corrupted).
    IndexOutOfRange {
        /// Which index.
        index: IndexKind,
        /// The value read.
        value: u32,
        /// The queue's `index_mask`.
        index_mask: u32,
    },
    /// The other side's index moved to where it cannot legally be (ring corrupted): a consumer
    /// past what was published, or a producer that went backwards.
    IndexOutsideWindow {
        /// Which index.
        index: IndexKind,
        /// The value read.
        value: u32,
        /// The last value seen.
        last: u32,
        /// Our own index at that time.
        ours: u32,
    },
    /// rxe has no send queue of this QP type (it has RC, UC and UD).
    UnsupportedQpType {
        /// The QP type.
        qp_type: QpType,
    },
    /// The queue capabilities passed by the caller do not fit into one element.
    CapsExceedSlot {
        /// Which capability (`"max_send_sge"`, `"max_inline_data"`, `"max_recv_sge"`).
        cap: &'static str,
        /// The requested value.
        requested: u32,
        /// The largest value one element can hold.
        fits: u32,
    },
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RingError::Misaligned { addr } => {
                write!(f, "rxe queue mapping at {addr:#x} is not 8-byte aligned")
            }
            RingError::MappingTooSmall { len, need } => write!(
                f,
                "rxe queue header describes {need} bytes but the mapping has only {len}"
            ),
            RingError::BadElemSize { log2_elem_size } => write!(
                f,
                "rxe queue header has log2_elem_size {log2_elem_size} (accepted: 3..=20)"
            ),
            RingError::ElemSizeMismatch { expected, found } => write!(
                f,
                "rxe queue element size is {found} bytes, expected {expected}"
            ),
            RingError::ElemTooSmall { need, found } => write!(
                f,
                "rxe queue element size is {found} bytes, need at least {need}"
            ),
            RingError::BadIndexMask { index_mask } => write!(
                f,
                "rxe queue header has index_mask {index_mask:#x} (index_mask + 1 must be a power of two in 1..=2^31)"
            ),
            RingError::IndexOutOfRange { index, value, index_mask } => write!(
                f,
                "rxe ring corrupted: {index} {value} exceeds index_mask {index_mask}"
            ),
            RingError::IndexOutsideWindow { index, value, last, ours } => write!(
                f,
                "rxe ring corrupted: {index} moved from {last} to {value}, impossible with our index at {ours}"
            ),
            RingError::UnsupportedQpType { qp_type } => {
                write!(f, "rxe has no {qp_type:?} QPs (it has RC, UC and UD)")
            }
            RingError::CapsExceedSlot { cap, requested, fits } => write!(
                f,
                "rxe queue: {cap} {requested} does not fit one element (at most {fits})"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for RingError {}

/// Why a work request was refused before anything was written to the ring. The ring is unchanged
/// (except [`WrError::Ring`], after which the ring must be treated as dead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WrError {
    /// The queue holds `capacity` unconsumed elements already.
    QueueFull {
        /// Usable slots of the queue (`index_mask`).
        capacity: u32,
    },
    /// More scatter/gather entries than the queue allows.
    TooManySge {
        /// Entries given.
        num_sge: usize,
        /// The queue's limit.
        max_sge: u32,
    },
    /// Inline data longer than the queue allows.
    InlineTooLong {
        /// Bytes given.
        len: usize,
        /// The queue's limit.
        max_inline: u32,
    },
    /// The opcode cannot carry inline data (RDMA read, atomics, local operations).
    InlineNotAllowed {
        /// The opcode.
        opcode: SendOpcode,
    },
    /// The opcode takes no data segments (local invalidate, bind MW).
    DataNotAllowed {
        /// The opcode.
        opcode: SendOpcode,
    },
    /// An atomic's local buffer is not exactly 8 bytes.
    AtomicLength {
        /// Total length of the SGEs given.
        length: u64,
    },
    /// An atomic's remote address is not 8-byte aligned.
    AtomicMisaligned {
        /// The remote address.
        remote_addr: u64,
    },
    /// The total message length does not fit the WQE's 32-bit length.
    LengthOverflow {
        /// Total length of the SGEs / inline data.
        length: u64,
    },
    /// The QP type does not support this opcode.
    OpcodeNotSupported {
        /// The opcode.
        opcode: SendOpcode,
        /// The QP type.
        qp_type: QpType,
    },
    /// A UD send without a destination address (`wr.ud` / `ibv_wr_set_ud_addr`).
    UdAddressMissing,
    /// The destination's address handle belongs to another protection domain than the QP.
    ForeignAh,
    /// The destination's address handle has no kernel AH index (kernels before 5.10 return
    /// none; their WQEs would need a full address vector with a resolved MAC).
    AhWithoutIndex,
    /// A destination address on a connected (RC/UC) QP.
    UdAddressOnConnectedQp {
        /// The QP type.
        qp_type: QpType,
    },
    /// A memory-window bind with `IBV_ACCESS_ZERO_BASED`, which rxe does not support.
    BindMwZeroBased,
    /// A `wr_*` call without a preceding `wr_start`.
    NoBatch,
    /// `wr_start` (or `post`) while a `wr_start` batch is open.
    BatchInProgress,
    /// A `wr_set_*` call before any WQE was built in the batch.
    NoCurrentWqe,
    /// The ring failed validation.
    Ring(RingError),
}

impl From<RingError> for WrError {
    fn from(e: RingError) -> Self {
        WrError::Ring(e)
    }
}

impl fmt::Display for WrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WrError::QueueFull { capacity } => {
                write!(f, "queue full ({capacity} work requests outstanding)")
            }
            WrError::TooManySge { num_sge, max_sge } => {
                write!(
                    f,
                    "{num_sge} scatter/gather entries, the queue allows {max_sge}"
                )
            }
            WrError::InlineTooLong { len, max_inline } => {
                write!(
                    f,
                    "{len} bytes of inline data, the queue allows {max_inline}"
                )
            }
            WrError::InlineNotAllowed { opcode } => {
                write!(f, "{opcode:?} cannot carry inline data")
            }
            WrError::DataNotAllowed { opcode } => {
                write!(f, "{opcode:?} takes no data segments")
            }
            WrError::AtomicLength { length } => {
                write!(f, "atomic local buffer is {length} bytes, must be 8")
            }
            WrError::AtomicMisaligned { remote_addr } => {
                write!(
                    f,
                    "atomic remote address {remote_addr:#x} is not 8-byte aligned"
                )
            }
            WrError::LengthOverflow { length } => {
                write!(f, "message length {length} exceeds 2^32-1")
            }
            WrError::OpcodeNotSupported { opcode, qp_type } => {
                write!(f, "{opcode:?} is not supported on a {qp_type:?} QP")
            }
            WrError::UdAddressMissing => f.write_str("UD send without a destination address"),
            WrError::ForeignAh => {
                f.write_str("the destination's AH belongs to another PD than the QP")
            }
            WrError::AhWithoutIndex => f.write_str(
                "the destination's AH has no kernel AH index (kernels before 5.10 return none)",
            ),
            WrError::UdAddressOnConnectedQp { qp_type } => {
                write!(f, "destination address given on a {qp_type:?} QP")
            }
            WrError::BindMwZeroBased => {
                f.write_str("memory-window bind with IBV_ACCESS_ZERO_BASED (not supported by rxe)")
            }
            WrError::NoBatch => f.write_str("wr_* call without wr_start"),
            WrError::BatchInProgress => f.write_str("a wr_start batch is open"),
            WrError::NoCurrentWqe => f.write_str("wr_set_* call before any wr_* builder"),
            WrError::Ring(e) => fmt::Display::fmt(&e, f),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for WrError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WrError::Ring(e) => Some(e),
            _ => None,
        }
    }
}
