//! RDMA connection management without librdmacm: the kernel's rdma_cm through
//! `/dev/infiniband/rdma_cm` (module `rdma_ucm`), spoken directly.
//!
//! An id ([`CmId`]) is created in a port space ([`PortSpace::Tcp`] for RC,
//! [`PortSpace::Udp`] for UD), binds / resolves like a socket, and connects, listens,
//! accepts, rejects and disconnects with IB CM messages the kernel sends. Its QP is an
//! ordinary [`crate::Qp`] on the id's device, moved through INIT / RTR / RTS with the
//! attributes the kernel computes (`INIT_QP_ATTR`), at the points librdmacm moves it. Events
//! are [`CmEvent`] values read with [`CmId::get_cm_event`] (bounded by a timeout).
//!
//! ```no_run
//! # fn main() -> uverbs::Result<()> {
//! use std::time::Duration;
//! use uverbs::cm::{CmEvent, CmId, ConnParam, PortSpace};
//! let t = Duration::from_secs(2);
//! let mut id = CmId::new(PortSpace::Tcp)?;                          // rdma_create_id
//! id.resolve_addr(None, &"10.99.0.1:7174".parse().unwrap(), t)?;   // rdma_resolve_addr
//! assert!(matches!(id.get_cm_event(t)?, CmEvent::AddrResolved));   // rdma_get_cm_event
//! id.resolve_route(t)?;                                             // rdma_resolve_route
//! assert!(matches!(id.get_cm_event(t)?, CmEvent::RouteResolved));
//! let ctx = id.context().unwrap().clone();
//! let pd = ctx.alloc_pd()?;
//! let cq = ctx.create_cq(16, None, 0)?;
//! let cap = uverbs::QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
//! id.create_qp(&pd, &uverbs::QpInitAttr::new(uverbs::QpType::Rc, &cq, &cq, cap))?; // rdma_create_qp
//! id.connect(&ConnParam::default())?;                               // rdma_connect
//! assert!(matches!(id.get_cm_event(t)?, CmEvent::Established { .. }));
//! # Ok(()) }
//! ```
//!
//! With the `tokio` feature, `CmId::into_async` gives an `AsyncCmId` whose
//! events are awaited (`AsyncCmId::next`).
//!
//! See `docs/cm.md` for the mapping to librdmacm and what is left out.

mod addr;
#[cfg(feature = "tokio")]
mod async_id;
mod channel;
mod device;
mod event;
mod id;
mod param;

#[cfg(feature = "tokio")]
pub use async_id::AsyncCmId;
pub use channel::{EventChannel, RDMA_CM_DEVICE};
pub use event::{CmEvent, ConnectRequest};
pub use id::{CmId, CmOption, CmRoute, CmState};
pub use param::{ConnInfo, ConnParam, PortSpace, UdParam};
