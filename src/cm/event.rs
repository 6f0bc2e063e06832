//! rdma_cm events (`struct rdma_cm_event`) as a Rust enum carrying their data.

use super::param::{ConnInfo, UdParam};
use super::CmId;

/// One rdma_cm event of an id (`struct rdma_cm_event`), read with
/// [`CmId::get_cm_event`].
///
/// An event is an owned value: there is nothing to acknowledge and nothing an event points
/// to that could go away, so librdmacm's "acknowledge every event exactly once before
/// destroying the id" cannot be got wrong. [`CmEvent::ack`] exists for readers of C code; it
/// takes the event by value, so acknowledging one twice does not compile.
///
/// `status` values are what the kernel reports: 0, a negative errno (`-ETIMEDOUT`, ...), or
/// for [`CmEvent::Rejected`] the IB CM reject reason (e.g. 8 "invalid service ID": nobody
/// listens on that port; 28 "consumer reject": the peer called reject).
#[doc(alias = "rdma_cm_event")]
#[doc(alias = "rdma_cm_event_type")]
#[derive(Debug)]
#[non_exhaustive]
pub enum CmEvent {
    /// `RDMA_CM_EVENT_ADDR_RESOLVED`: the id now has a device ([`CmId::context`]).
    AddrResolved,
    /// `RDMA_CM_EVENT_ADDR_ERROR`: no device reaches the address.
    AddrError {
        /// Negative errno.
        status: i32,
    },
    /// `RDMA_CM_EVENT_ROUTE_RESOLVED`: [`CmId::connect`] may follow.
    RouteResolved,
    /// `RDMA_CM_EVENT_ROUTE_ERROR`.
    RouteError {
        /// Negative errno.
        status: i32,
    },
    /// `RDMA_CM_EVENT_CONNECT_REQUEST` on a listening id: a new id for the connection.
    ConnectRequest(Box<ConnectRequest>),
    /// `RDMA_CM_EVENT_CONNECT_RESPONSE`: the peer accepted, and this id has no QP of its own
    /// (with one, the QP is moved to RTR and RTS and the event is [`CmEvent::Established`]).
    /// Call [`CmId::establish`] once your QP is ready.
    ConnectResponse {
        /// The peer's private data.
        private_data: Vec<u8>,
        /// The peer's parameters.
        param: ConnInfo,
    },
    /// `RDMA_CM_EVENT_CONNECT_ERROR`: the connection failed after the reply (including our
    /// own failure to move the QP to RTR/RTS).
    ConnectError {
        /// Negative errno.
        status: i32,
    },
    /// `RDMA_CM_EVENT_UNREACHABLE`: the peer did not answer (or a UD peer refused).
    Unreachable {
        /// Negative errno or SIDR status.
        status: i32,
    },
    /// `RDMA_CM_EVENT_REJECTED`: the peer (or its CM) refused.
    Rejected {
        /// IB CM reject reason.
        status: i32,
        /// The peer's private data.
        private_data: Vec<u8>,
    },
    /// `RDMA_CM_EVENT_ESTABLISHED`: the connection is up (RC), or the UD peer answered.
    Established {
        /// The peer's private data.
        private_data: Vec<u8>,
        /// The peer's parameters (RC).
        param: ConnInfo,
        /// Where the UD peer is (UDP port space).
        ud: Option<UdParam>,
    },
    /// `RDMA_CM_EVENT_DISCONNECTED`: either side disconnected.
    Disconnected,
    /// `RDMA_CM_EVENT_DEVICE_REMOVAL`: the id's device is going away; destroy the id.
    DeviceRemoval,
    /// `RDMA_CM_EVENT_MULTICAST_JOIN`: joined; send to the group with `ud`.
    MulticastJoin {
        /// The group's address vector, QPN `0xffffff` and Q_Key.
        ud: UdParam,
    },
    /// `RDMA_CM_EVENT_MULTICAST_ERROR`.
    MulticastError {
        /// Negative errno.
        status: i32,
    },
    /// `RDMA_CM_EVENT_ADDR_CHANGE`: the id's network address changed.
    AddrChange,
    /// `RDMA_CM_EVENT_TIMEWAIT_EXIT`: the QP may be reused.
    TimewaitExit,
    /// An event number this library does not know.
    Other {
        /// `RDMA_CM_EVENT_*`.
        event: u32,
        /// Status.
        status: i32,
    },
}

/// A connection request: the new id (already on its own event channel and device) and
/// what the peer sent. Accept with [`CmId::accept`] or refuse with [`CmId::reject`]; drop
/// the id to refuse without an answer.
#[derive(Debug)]
pub struct ConnectRequest {
    /// The new id.
    pub id: CmId,
    /// The peer's private data.
    pub private_data: Vec<u8>,
    /// The peer's parameters (TCP).
    pub param: ConnInfo,
    /// Where the UD peer is (UDP).
    pub ud: Option<UdParam>,
}

impl CmEvent {
    /// Acknowledges the event (`rdma_ack_cm_event`): consumes it. Nothing is sent to the
    /// kernel (librdmacm's acknowledgement is bookkeeping of its own); dropping the event is
    /// the same. Acknowledging an event twice does not compile:
    ///
    /// ```compile_fail
    /// # fn f(id: &mut uverbs::cm::CmId) -> uverbs::Result<()> {
    /// let ev = id.get_cm_event(std::time::Duration::from_secs(1))?;
    /// ev.ack();
    /// ev.ack(); // error[E0382]: use of moved value: `ev`
    /// # Ok(()) }
    /// ```
    #[doc(alias = "rdma_ack_cm_event")]
    pub fn ack(self) {}

    /// librdmacm's name of the event (`rdma_event_str`).
    #[doc(alias = "rdma_event_str")]
    pub fn name(&self) -> &'static str {
        match self {
            CmEvent::AddrResolved => "RDMA_CM_EVENT_ADDR_RESOLVED",
            CmEvent::AddrError { .. } => "RDMA_CM_EVENT_ADDR_ERROR",
            CmEvent::RouteResolved => "RDMA_CM_EVENT_ROUTE_RESOLVED",
            CmEvent::RouteError { .. } => "RDMA_CM_EVENT_ROUTE_ERROR",
            CmEvent::ConnectRequest(_) => "RDMA_CM_EVENT_CONNECT_REQUEST",
            CmEvent::ConnectResponse { .. } => "RDMA_CM_EVENT_CONNECT_RESPONSE",
            CmEvent::ConnectError { .. } => "RDMA_CM_EVENT_CONNECT_ERROR",
            CmEvent::Unreachable { .. } => "RDMA_CM_EVENT_UNREACHABLE",
            CmEvent::Rejected { .. } => "RDMA_CM_EVENT_REJECTED",
            CmEvent::Established { .. } => "RDMA_CM_EVENT_ESTABLISHED",
            CmEvent::Disconnected => "RDMA_CM_EVENT_DISCONNECTED",
            CmEvent::DeviceRemoval => "RDMA_CM_EVENT_DEVICE_REMOVAL",
            CmEvent::MulticastJoin { .. } => "RDMA_CM_EVENT_MULTICAST_JOIN",
            CmEvent::MulticastError { .. } => "RDMA_CM_EVENT_MULTICAST_ERROR",
            CmEvent::AddrChange => "RDMA_CM_EVENT_ADDR_CHANGE",
            CmEvent::TimewaitExit => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
            CmEvent::Other { .. } => "UNKNOWN EVENT",
        }
    }
}

impl std::fmt::Display for CmEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())?;
        match self {
            CmEvent::AddrError { status }
            | CmEvent::RouteError { status }
            | CmEvent::ConnectError { status }
            | CmEvent::Unreachable { status }
            | CmEvent::Rejected { status, .. }
            | CmEvent::MulticastError { status }
            | CmEvent::Other { status, .. } => write!(f, " (status {status})"),
            _ => Ok(()),
        }
    }
}
