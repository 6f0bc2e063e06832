//! Errors of the EFA data path: what was refused before anything reached the device, and what
//! the device wrote that we refuse to trust.
//!
//! Every variant names the operation and the object (QP or CQ number) and maps to the errno
//! rdma-core's EFA provider returns for the same condition, so the core can wrap it into its own
//! error type without losing anything.

use core::fmt;

/// Which work queue of a QP an error or completion concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// The send queue.
    Send,
    /// The receive queue.
    Recv,
}

impl QueueKind {
    fn name(self) -> &'static str {
        match self {
            QueueKind::Send => "sq",
            QueueKind::Recv => "rq",
        }
    }
}

/// Why a request id found in a completion was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReqIdProblem {
    /// The index part is beyond the queue's capacity.
    OutOfRange,
    /// The slot is not holding an outstanding request (already completed or never posted).
    NotOutstanding,
    /// The generation bits name an earlier incarnation of this QP number.
    StaleGeneration,
}

/// An error of the EFA provider's data path or ring set-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EfaError {
    /// A send WR without `IBV_SEND_SIGNALED` on a QP without `sq_sig_all`: EFA completes every
    /// send, so unsignaled sends are refused (EINVAL).
    Unsignaled {
        /// QP number.
        qpn: u32,
    },
    /// More scatter/gather entries than the queue allows (EINVAL).
    TooManySge {
        /// QP number.
        qpn: u32,
        /// Queue.
        queue: QueueKind,
        /// Entries in the WR.
        num_sge: usize,
        /// The queue's limit for this operation.
        max_sge: usize,
    },
    /// A receive WR with no scatter/gather entry: EFA needs one descriptor per receive (EINVAL).
    NoSge {
        /// QP number.
        qpn: u32,
    },
    /// Inline data longer than the QP's `max_inline_data` (EINVAL).
    InlineTooLong {
        /// QP number.
        qpn: u32,
        /// Total inline bytes in the WR.
        len: usize,
        /// The QP's limit.
        max: usize,
    },
    /// Inline data with an operation that cannot carry it (RDMA read; RDMA write without the
    /// 128-byte inline-write WQE) (EINVAL).
    InlineNotSupported {
        /// QP number.
        qpn: u32,
        /// The operation.
        op: &'static str,
    },
    /// The operation is not supported by this device or QP type (EOPNOTSUPP).
    OpNotSupported {
        /// QP number.
        qpn: u32,
        /// The operation.
        op: &'static str,
        /// Why (missing device capability, QP type).
        reason: &'static str,
    },
    /// An RDMA length above the device's `max_rdma_size` (EINVAL).
    RdmaTooLong {
        /// QP number.
        qpn: u32,
        /// Requested bytes.
        len: u64,
        /// Device limit.
        max: u32,
    },
    /// A remote QP number wider than the WQE's 16-bit `dest_qp_num` (EINVAL).
    BadRemoteQpn {
        /// QP number.
        qpn: u32,
        /// The refused remote QP number.
        remote_qpn: u32,
    },
    /// A length that does not fit the descriptor field (EINVAL).
    LengthTooLong {
        /// QP number.
        qpn: u32,
        /// Requested bytes.
        len: u64,
    },
    /// The queue has no free slot (ENOMEM, as rdma-core).
    QueueFull {
        /// QP number.
        qpn: u32,
        /// Queue.
        queue: QueueKind,
        /// Queue depth in WRs.
        depth: u32,
    },
    /// Ring set-up parameters the provider cannot work with (EINVAL).
    BadConfig {
        /// Which ring: "sq", "rq" or "cq".
        ring: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// A completion names a request id we did not hand out (EIO: the device or a stale CQE).
    BadReqId {
        /// CQ number.
        cqn: u32,
        /// QP number from the CQE.
        qpn: u32,
        /// Queue.
        queue: QueueKind,
        /// The raw request id.
        req_id: u16,
        /// What is wrong with it.
        problem: ReqIdProblem,
    },
    /// A completion names a QP the core does not know (destroyed or never created) (EIO).
    UnknownQp {
        /// CQ number.
        cqn: u32,
        /// QP number from the CQE.
        qpn: u32,
        /// Queue type from the CQE.
        queue: QueueKind,
    },
    /// A completion with a queue type that is neither send nor receive (EIO).
    BadCqe {
        /// CQ number.
        cqn: u32,
        /// Sub-CQ index.
        sub_cq: u16,
        /// The raw `flags` byte.
        flags: u8,
    },
    /// Solicited-only notification requested; EFA does not support it (EOPNOTSUPP).
    SolicitedOnlyNotSupported {
        /// CQ number.
        cqn: u32,
    },
    /// Arming a CQ that the kernel gave no doorbell for (EOPNOTSUPP).
    NoCqDoorbell {
        /// CQ number.
        cqn: u32,
    },
}

/// `EIO`.
pub const EIO: i32 = 5;
/// `ENOMEM`.
pub const ENOMEM: i32 = 12;
/// `EINVAL`.
pub const EINVAL: i32 = 22;
/// `EOPNOTSUPP`.
pub const EOPNOTSUPP: i32 = 95;

impl EfaError {
    /// The errno rdma-core's EFA provider uses for the same condition (Linux numbering).
    pub fn errno(&self) -> i32 {
        match self {
            EfaError::Unsignaled { .. }
            | EfaError::TooManySge { .. }
            | EfaError::NoSge { .. }
            | EfaError::InlineTooLong { .. }
            | EfaError::InlineNotSupported { .. }
            | EfaError::RdmaTooLong { .. }
            | EfaError::LengthTooLong { .. }
            | EfaError::BadRemoteQpn { .. }
            | EfaError::BadConfig { .. } => EINVAL,
            EfaError::OpNotSupported { .. }
            | EfaError::SolicitedOnlyNotSupported { .. }
            | EfaError::NoCqDoorbell { .. } => EOPNOTSUPP,
            EfaError::QueueFull { .. } => ENOMEM,
            EfaError::BadReqId { .. } | EfaError::UnknownQp { .. } | EfaError::BadCqe { .. } => EIO,
        }
    }

    /// The verbs operation that failed: `"post_send"`, `"post_recv"`, `"poll_cq"`, `"req_notify_cq"`
    /// or `"create"` (ring set-up).
    pub fn op(&self) -> &'static str {
        match self {
            EfaError::Unsignaled { .. }
            | EfaError::InlineTooLong { .. }
            | EfaError::InlineNotSupported { .. }
            | EfaError::OpNotSupported { .. }
            | EfaError::RdmaTooLong { .. }
            | EfaError::LengthTooLong { .. }
            | EfaError::BadRemoteQpn { .. } => "post_send",
            EfaError::NoSge { .. } => "post_recv",
            EfaError::TooManySge { queue, .. } | EfaError::QueueFull { queue, .. } => match queue {
                QueueKind::Send => "post_send",
                QueueKind::Recv => "post_recv",
            },
            EfaError::BadConfig { .. } => "create",
            EfaError::BadReqId { .. } | EfaError::UnknownQp { .. } | EfaError::BadCqe { .. } => {
                "poll_cq"
            }
            EfaError::SolicitedOnlyNotSupported { .. } | EfaError::NoCqDoorbell { .. } => {
                "req_notify_cq"
            }
        }
    }
}

impl fmt::Display for EfaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.op())?;
        match *self {
            EfaError::Unsignaled { qpn } => write!(
                f,
                "on qp {qpn}: unsignaled send refused, EFA completes every send (set IBV_SEND_SIGNALED or sq_sig_all)"
            ),
            EfaError::TooManySge { qpn, queue, num_sge, max_sge } => write!(
                f,
                "on qp {qpn} {}: {num_sge} SGEs exceed the limit of {max_sge}",
                queue.name()
            ),
            EfaError::NoSge { qpn } => {
                write!(f, "on qp {qpn} rq: a receive needs at least one SGE on EFA")
            }
            EfaError::InlineTooLong { qpn, len, max } => {
                write!(f, "on qp {qpn} sq: {len} inline bytes exceed max_inline_data {max}")
            }
            EfaError::InlineNotSupported { qpn, op } => {
                write!(f, "on qp {qpn} sq: {op} cannot carry inline data on this QP")
            }
            EfaError::OpNotSupported { qpn, op, reason } => {
                write!(f, "on qp {qpn} sq: {op} not supported: {reason}")
            }
            EfaError::RdmaTooLong { qpn, len, max } => {
                write!(f, "on qp {qpn} sq: RDMA of {len} bytes exceeds max_rdma_size {max}")
            }
            EfaError::LengthTooLong { qpn, len } => {
                write!(f, "on qp {qpn} sq: length {len} does not fit a 32-bit descriptor field")
            }
            EfaError::BadRemoteQpn { qpn, remote_qpn } => {
                write!(f, "on qp {qpn} sq: remote QP number {remote_qpn} exceeds 16 bits")
            }
            EfaError::QueueFull { qpn, queue, depth } => write!(
                f,
                "on qp {qpn} {}: queue full ({depth} WRs outstanding)",
                queue.name()
            ),
            EfaError::BadConfig { ring, reason } => write!(f, "of efa {ring} ring: {reason}"),
            EfaError::BadReqId { cqn, qpn, queue, req_id, problem } => write!(
                f,
                "on cq {cqn}: completion for qp {qpn} {} carries req_id {req_id:#x} that is {}",
                queue.name(),
                match problem {
                    ReqIdProblem::OutOfRange => "out of range",
                    ReqIdProblem::NotOutstanding => "not outstanding",
                    ReqIdProblem::StaleGeneration => "from an earlier QP with this number",
                }
            ),
            EfaError::UnknownQp { cqn, qpn, queue } => write!(
                f,
                "on cq {cqn}: completion for unknown or destroyed qp {qpn} {} (dropped)",
                queue.name()
            ),
            EfaError::BadCqe { cqn, sub_cq, flags } => write!(
                f,
                "on cq {cqn} sub-cq {sub_cq}: completion with invalid queue type (flags {flags:#04x})"
            ),
            EfaError::SolicitedOnlyNotSupported { cqn } => {
                write!(f, "on cq {cqn}: solicited-only notification is not supported by EFA")
            }
            EfaError::NoCqDoorbell { cqn } => {
                write!(f, "on cq {cqn}: the kernel gave this CQ no doorbell")
            }
        }
    }
}

impl std::error::Error for EfaError {}
