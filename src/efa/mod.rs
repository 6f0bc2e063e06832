//! EFA direct verbs (`efadv_*`) and the EFA data path wired to the provider crate
//! ([`uverbs_efa`]).
//!
//! What this module owns: the EFA-specific control path (extended query device, create CQ with
//! `efa_ibv_create_cq` driver data and optional external dmabuf memory, create/modify/query/
//! destroy of SRD and UD QPs with `efa_ibv_create_qp`, address handles with their device AH
//! number), the mappings of every EFA ring and doorbell, and the hand-off of wr_id bookkeeping
//! between a QP (which posts) and its CQs (which poll). It must not: format WQEs or CQEs (the
//! provider does), take a lock, allocate or make an indirect call on post or poll.
//!
//! # wr_id bookkeeping: who may touch a QP's request-id pools, and when
//!
//! EFA completes work requests out of order, so each work queue keeps a pool that maps the
//! 16-bit `req_id` written into a descriptor back to the user's `wr_id`
//! ([`uverbs_efa::WridPool`]). Posting takes a slot (QP side), polling frees it (CQ side): both
//! mutate the same pool, and the QP and the CQ are separate owners that may live on different
//! threads. The design:
//!
//! * The queues of a QP (its [`SendQueue`](uverbs_efa::SendQueue) and
//!   [`RecvQueue`](uverbs_efa::RecvQueue), which own the pools) live in one heap cell
//!   (`QpData`) shared by the [`EfaQp`] and by the QP table of each CQ the QP completes into.
//! * One atomic word in the cell says who is inside it. Post (`&mut EfaQp`) and poll
//!   (`&mut Cq`) each take it with a `compare_exchange` (Acquire) and give it back with a
//!   Release store, so every pool write of one side happens-before the other side's reads. The
//!   word is held only inside one `post_send`/`post_recv`/`wr_complete` call or while the CQ
//!   decodes one CQE: never across user code, never across a syscall, and for a bounded number
//!   of steps (at most one SQ's worth of WQE copies). A side that finds it taken spins with
//!   `spin_loop` until the other side's bounded step ends; with one thread driving both (the
//!   usual EFA design, and what libfabric does) it is never contended. This is a hand-off, not
//!   a lock in the blocking sense: nobody can hold it while waiting for anything. A fully
//!   wait-free variant needs a split (SPSC) pool inside the provider crate.
//! * `ibv_wr_start` sessions stage WRs in a buffer the QP allocated at create time and touch
//!   the shared cell only in `wr_complete`, so an open session never holds the word (polling
//!   the CQ with a session open on the same thread cannot deadlock).
//! * Each CQ has a QP table: 65536 `AtomicPtr` slots indexed by the 16-bit EFA QP number
//!   (what a CQE carries), so lookup is one masked index, never a search, and a device-written
//!   number can never index out of bounds. A QP registers its cell in the tables of its send
//!   and receive CQs when it is created and unregisters when it is destroyed.
//! * A destroyed QP's cell must not be freed while a poller may still read it. Poll makes the
//!   CQ's epoch odd (SeqCst) before it reads any slot and even again (Release) when it is
//!   done; destroy clears the slot (SeqCst) and then waits (control path) until the epoch is
//!   even or has moved on, after which no poller can hold the old pointer. Only then is the
//!   table's reference dropped.
//! * A completion that arrives for a QP that is gone (the device may still write CQEs after a
//!   destroy) finds an empty slot: it is consumed, counted
//!   ([`Cq::efa_stale_completions`](crate::Cq::efa_stale_completions)) and skipped. A QP
//!   number reused by a new QP cannot complete the old QP's WRs: every QP's request ids carry a
//!   generation, and the pool refuses an id of another generation.

mod ah;
mod cq;
mod device;
mod qp;
mod table;

pub use ah::EfaAh;
pub(crate) use cq::EfaCqRing;
pub use cq::{EfaCqExtMem, EfaCqInitAttr, EfaCqInitFlags, EfaWc, EfaWcFlags};
pub use device::{EfaDeviceAttr, EfaDeviceCaps};
pub use qp::{
    EfaQp, EfaQpAttr, EfaQpCap, EfaQpFlags, EfaQpInitAttr, EfaQpQuery, EfaQpState, EfaQpType,
    EfaSendSession,
};
pub use uverbs_efa::{
    Payload as EfaPayload, RecvWr as EfaRecvWr, SendOp as EfaSendOp, SendWr as EfaSendWr,
    Sge as EfaSge, UdAddr as EfaUdAddr,
};

use crate::error::{Errno, Error};

/// Turns a provider error into ours: same errno, the provider's text as the reason.
pub(crate) fn provider_error(op: &'static str, object: String, e: &uverbs_efa::EfaError) -> Error {
    Error::invalid(
        op,
        object,
        Errno::from_raw_os_error(e.errno()),
        e.to_string(),
    )
}

impl From<crate::Sge> for uverbs_efa::Sge {
    fn from(s: crate::Sge) -> Self {
        uverbs_efa::Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }
}
