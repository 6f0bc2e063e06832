//! EFA (AWS Elastic Fabric Adapter) provider: the device's WQE/CQE formats and the ring logic
//! of its send queue (LLQ in device memory), receive queue and completion queue.
//!
//! No syscalls: the core creates the objects through the kernel (with the driver structs of
//! [`uverbs_uapi::efa`]), maps the rings and doorbells, and hands the mappings to
//! [`SendQueue::new`], [`RecvQueue::new`] and [`CompletionQueue::new`] (the only `unsafe` entry
//! points: their contract is that the mappings outlive the queue). From there post and poll
//! are safe, lock-free, allocation-free and validate everything before it reaches the device.
//!
//! | module    | owns                                                                  |
//! |-----------|-----------------------------------------------------------------------|
//! | [`defs`]  | `efa_io_defs.h` descriptor formats (also for a device model)          |
//! | [`sq`]    | send WRs, LLQ write-combined copies, SQ doorbell batching             |
//! | [`rq`]    | receive WRs, RQ ring, RQ doorbell                                     |
//! | [`cq`]    | sub-CQ polling, phase bits, CQ doorbell, completion decoding          |
//! | [`wrid`]  | req_id <-> wr_id pools, distrust of device-written req_ids            |
//! | [`status`]| `ibv_wc_status`/`ibv_wc_opcode` numbers and the EFA status mapping    |
//! | `mmio`    | doorbell stores and barriers (private)                                |
//!
//! `unsafe` is denied here and allowed only in `mmio`, `sq`, `rq` and `cq`.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod cq;
pub mod defs;
pub mod error;
mod mmio;
pub mod rq;
pub mod sq;
pub mod status;
pub mod wrid;

pub use cq::{CompletionQueue, CqConfig, PollError, QpEntry, QpLookup, QpPools, Wc};
pub use error::{EfaError, QueueKind, ReqIdProblem};
pub use rq::{RecvQueue, RecvWr, RqConfig};
pub use sq::{
    DeviceCaps, Payload, PostError, QpType, SendOp, SendQueue, SendSession, SendWr, Sge, SqConfig,
    UdAddr,
};
pub use status::{WcOpcode, WcStatus};
pub use wrid::WridPool;

#[cfg(test)]
mod testmem;
