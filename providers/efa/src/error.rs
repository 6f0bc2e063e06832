//! Errors of the EFA data path: what was refused before anything reached the device, and what
//! the device wrote that we refuse to trust.
//!
//! Every variant carries the object's number (QP or CQ) and maps to the errno rdma-core's EFA
//! provider returns for the same condition; its text is the reason alone, so the core wraps it
//! into its own error (which names the call and the object once, with this error as its
//! source) without saying anything twice.

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
    /// A send without a destination: EFA QPs are datagram QPs (EINVAL).
    NoDestination {
        /// QP number.
        qpn: u32,
    },
    /// A send through an address handle of another protection domain than the QP's
    /// (EINVAL).
    ForeignAh {
        /// QP number.
        qpn: u32,
    },
    /// `wr_start` while a `wr_*` batch is open (EINVAL).
    BatchInProgress {
        /// QP number.
        qpn: u32,
    },
    /// A `wr_*` call without an open batch (EINVAL).
    NoBatch {
        /// QP number.
        qpn: u32,
    },
    /// A `wr_set_*` call before any WR of the batch was started (EINVAL).
    NoCurrentWr {
        /// QP number.
        qpn: u32,
    },
    /// Processing hints on a QP created without `EFADV_WR_EX_WITH_PROCESSING_HINTS`
    /// (EOPNOTSUPP).
    HintsNotEnabled {
        /// QP number.
        qpn: u32,
    },
    /// Processing-hint bits EFA defines none for (EINVAL).
    UnknownHints {
        /// QP number.
        qpn: u32,
        /// The hint bits given.
        hints: u8,
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
            | EfaError::BadConfig { .. }
            | EfaError::NoDestination { .. }
            | EfaError::ForeignAh { .. }
            | EfaError::BatchInProgress { .. }
            | EfaError::NoBatch { .. }
            | EfaError::NoCurrentWr { .. }
            | EfaError::UnknownHints { .. } => EINVAL,
            EfaError::OpNotSupported { .. }
            | EfaError::SolicitedOnlyNotSupported { .. }
            | EfaError::NoCqDoorbell { .. }
            | EfaError::HintsNotEnabled { .. } => EOPNOTSUPP,
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
            | EfaError::BadRemoteQpn { .. }
            | EfaError::NoDestination { .. }
            | EfaError::ForeignAh { .. } => "post_send",
            EfaError::BatchInProgress { .. } => "wr_start",
            EfaError::NoBatch { .. } | EfaError::NoCurrentWr { .. } => "wr_complete",
            EfaError::HintsNotEnabled { .. } | EfaError::UnknownHints { .. } => {
                "efadv_wr_set_processing_hints"
            }
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

/// The reason alone: the operation and the object (the QP or CQ the caller acted on) are the
/// caller's to name (the object model's error does), so a message never says them twice.
/// Numbers of *other* objects (the QP a completion names) are part of the reason.
impl fmt::Display for EfaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EfaError::Unsignaled { .. } => f.write_str(
                "unsignaled send refused: EFA completes every send (set IBV_SEND_SIGNALED or sq_sig_all)",
            ),
            EfaError::TooManySge { queue, num_sge, max_sge, .. } => write!(
                f,
                "{num_sge} SGEs exceed the {} limit of {max_sge}",
                queue.name()
            ),
            EfaError::NoSge { .. } => f.write_str("a receive needs at least one SGE on EFA"),
            EfaError::InlineTooLong { len, max, .. } => {
                write!(f, "{len} inline bytes exceed max_inline_data {max}")
            }
            EfaError::InlineNotSupported { op, .. } => {
                write!(f, "{op} cannot carry inline data on this QP")
            }
            EfaError::OpNotSupported { op, reason, .. } => {
                write!(f, "{op} not supported: {reason}")
            }
            EfaError::RdmaTooLong { len, max, .. } => {
                write!(f, "RDMA of {len} bytes exceeds max_rdma_size {max}")
            }
            EfaError::LengthTooLong { len, .. } => {
                write!(f, "length {len} does not fit a 32-bit descriptor field")
            }
            EfaError::BadRemoteQpn { remote_qpn, .. } => {
                write!(f, "remote QP number {remote_qpn} exceeds 16 bits")
            }
            EfaError::QueueFull { queue, depth, .. } => write!(
                f,
                "{} full ({depth} WRs outstanding): poll the CQ and retry",
                queue.name()
            ),
            EfaError::BadConfig { ring, reason } => {
                write!(f, "bad {ring} configuration: {reason}")
            }
            EfaError::BadReqId { qpn, queue, req_id, problem, .. } => write!(
                f,
                "completion for qp {qpn} {} carries req_id {req_id:#x} that is {}",
                queue.name(),
                match problem {
                    ReqIdProblem::OutOfRange => "out of range",
                    ReqIdProblem::NotOutstanding => "not outstanding",
                    ReqIdProblem::StaleGeneration => "from an earlier QP with this number",
                }
            ),
            EfaError::UnknownQp { qpn, queue, .. } => write!(
                f,
                "completion for unknown or destroyed qp {qpn} {} (dropped)",
                queue.name()
            ),
            EfaError::BadCqe { sub_cq, flags, .. } => write!(
                f,
                "completion with invalid queue type in sub-CQ {sub_cq} (flags {flags:#04x})"
            ),
            EfaError::SolicitedOnlyNotSupported { .. } => f.write_str(
                "EFA has no solicited-only notification: arm with solicited_only = false",
            ),
            EfaError::NoCqDoorbell { .. } => f.write_str(
                "the kernel gave this CQ no doorbell (created without a completion channel?)",
            ),
            EfaError::NoDestination { .. } => f.write_str(
                "EFA QPs are datagram QPs: every send needs a destination (an AH, the remote QPN \
                 and Q_Key: SendWr::ud or WrBatch::set_ud_addr)",
            ),
            EfaError::ForeignAh { .. } => f.write_str("the AH belongs to another PD than the QP"),
            EfaError::BatchInProgress { .. } => f.write_str("a wr_* batch is already open"),
            EfaError::NoBatch { .. } => f.write_str("no wr_* batch is open (wr_start first)"),
            EfaError::NoCurrentWr { .. } => f.write_str(
                "no work request to set: start one (send, rdma_write, ...) first",
            ),
            EfaError::HintsNotEnabled { .. } => f.write_str(
                "the QP was not created with EFADV_WR_EX_WITH_PROCESSING_HINTS in wr_flags",
            ),
            EfaError::UnknownHints { hints, .. } => write!(
                f,
                "hints {hints:#x} include bits EFA defines none for (known: {:#x})",
                crate::defs::EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE
            ),
        }
    }
}

impl std::error::Error for EfaError {}
