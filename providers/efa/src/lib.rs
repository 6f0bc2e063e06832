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
//! | [`status`]| raw `ibv_wc_status`/`ibv_wc_opcode` numbers, the EFA status mapping  |
//! | [`table`] | per-CQ QP table (QP number -> completers), lock-free epoch reclamation |
//! | `mmio`    | doorbell stores and barriers (private)                                |
//!
//! `unsafe` is denied here and allowed only in `mmio`, `sq`, `rq`, `cq` and `table`.
//!
//! What the core has to know when wiring this up:
//! - SQ: mmap `llq_desc_mmap_key` write-only (write-combined, device memory), WQEs start at
//!   `llq_desc_offset`; SQ doorbell = page of `sq_db_mmap_key` + `sq_db_offset` (write-only).
//! - RQ: mmap `rq_mmap_key` (`rq_mmap_size` bytes) write-only; doorbell = page of
//!   `rq_db_mmap_key` + `rq_db_offset`.
//! - CQ: mmap `q_mmap_key` (`q_mmap_size` bytes) read-only; sub-CQ `i` starts at
//!   `i * cqe * entry_size`; doorbell (only with `EFA_CREATE_CQ_RESP_DB_OFF`) = page of
//!   `db_mmap_key` + `db_off`. Send/receive completions of a QP land in sub-CQ
//!   `send_sub_cq_idx`/`recv_sub_cq_idx`; polling visits round-robin only the sub-CQs a QP
//!   registered in the CQ's [`QpTable`] uses (libefa's `ref_cnt`), and those
//!   of a QP unregistered since until a poll finds them empty ([`QpLookup::sub_cqs`]).
//! - Request ids: 16-bit pool ids (slot | generation) by default; on a send queue created with
//!   `EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID` (devices with `SQ_64_BIT_REQ_ID`, as libefa does)
//!   the wr_id itself travels in the WQE and comes back in the CQE, with no id pool.
//! - Post and poll of one QP touch its wr_id pools from two owners: each queue's pool is split
//!   into a posting half (kept by the queue) and a completing half
//!   ([`SendQueue::take_completer`], [`RecvQueue::take_completer`]) that the core gives to the
//!   CQ side; the two halves share only atomics (see [`wrid`]), so post and poll may run on
//!   different threads without a lock.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod cq;
pub mod defs;
pub mod error;
mod mmio;
mod pow2;
pub mod rq;
pub mod sq;
pub mod status;
pub mod table;
pub mod wrid;

pub use cq::{
    Completion, CompletionQueue, CqConfig, OneStep, PollError, QpEntry, QpLookup, QpPools,
};
pub use error::{EfaError, QueueKind, ReqIdProblem};
pub use rq::{RecvQueue, RqConfig};
pub use sq::{DeviceCaps, SendQueue, SendSession, SqConfig};
pub use table::{QpTable, TablePoller};
pub use wrid::{WridCompleter, WridPool};

#[cfg(test)]
mod testmem;
