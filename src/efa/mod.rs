//! EFA direct verbs (`efadv_*`) and the EFA data path wired to the provider crate
//! ([`uverbs_efa`]).
//!
//! What this module owns: the EFA-specific control path (extended query device, create CQ with
//! `efa_ibv_create_cq` driver data and optional external dmabuf memory, create/modify/query/
//! destroy of SRD and UD QPs with `efa_ibv_create_qp`; address handles with their device AH
//! number are created by the generic `Pd::create_ah`), the mappings of every EFA ring and doorbell, and the hand-off of wr_id bookkeeping
//! between a QP (which posts) and its CQs (which poll). It must not: format WQEs or CQEs (the
//! provider does), take a lock, allocate or make an indirect call on post or poll.
//!
//! # wr_id bookkeeping: post and poll of one QP, on any two threads, without a lock
//!
//! EFA completes work requests out of order, so each work queue keeps a pool that maps the
//! 16-bit `req_id` written into a descriptor back to the user's `wr_id`. Posting takes an id
//! (QP side), polling frees it (CQ side), and the [`Qp`](crate::Qp) and the [`Cq`](crate::Cq) are
//! separate owners (`&mut` each, both `Send`) that may run on different threads at once. The
//! design is wait-free on both sides:
//!
//! * **Split pools.** Each queue's pool is two halves over one block of atomics
//!   ([`uverbs_efa::wrid`]): the posting half ([`uverbs_efa::WridPool`]) stays in the
//!   queue the QP owns; the completing half ([`uverbs_efa::WridCompleter`]) moves, at QP
//!   creation, into the QP table of the CQ the queue completes into. Free ids travel from
//!   completer to poster through a single-producer/single-consumer ring with one shared index
//!   (`tail`, Release by the completer / Acquire by the poster); the poster's own index never
//!   needs sharing because the ring cannot overflow (there are only `capacity` ids).
//! * **Memory ordering.** A `wr_id` is stored (Relaxed) when the id is taken and published by
//!   a Release store of the id's `posted` flag *before* the doorbell (`publish` in the
//!   provider's `complete`/`post_recv`). The device can only complete a descriptor after that
//!   doorbell, so a CQE for it is read after the flag was set; the completer's Acquire load
//!   of the flag then makes the `wr_id` visible. The completer clears the flag and pushes the
//!   id with a Release store of `tail`; the poster's Acquire load of `tail` orders the
//!   completer's last read of that id before the poster overwrites it. Doorbells are Release
//!   stores too, so a device model on another thread that Acquire-loads a doorbell sees the
//!   published flags (on hardware the write-combining flush and DMA ordering do that).
//! * **No waiting.** Neither side ever waits for the other: a full queue is reported to the
//!   poster (`ENOMEM`, poll and retry), a CQE whose id is not posted is refused
//!   (`NotOutstanding`), never waited for. An `ibv_wr_start` batch stages ids without
//!   publishing them; `wr_abort` gives them back (the poster's index steps back; the
//!   completer cannot have touched unpublished ids).
//! * **Per-CQ QP tables sized by use.** A CQE names its QP by a 16-bit number. Each CQ keeps
//!   an open-addressed table ([`uverbs_efa::QpTable`]) of the QPs completing into it: 8 pointers to
//!   start, doubled on the control path (QP create) to stay at most half full, so poll finds
//!   an entry in expected O(1) probes (bounded by the table size: a device-written number
//!   can never loop or index out of bounds), without allocating or locking. Registration and
//!   removal take a mutex, on the control path only.
//! * **Reclamation.** A destroyed QP's entry (or a replaced table array) must not be freed
//!   while a poll may still read it. A poll stores an odd epoch (SeqCst), then loads the
//!   table's generation (SeqCst), reads the table, and stores an even epoch (Release) when
//!   done. The control path takes the entry or array out, bumps the generation (SeqCst), then
//!   loads the epoch (SeqCst) and, if it is odd, waits (control path only, yielding) until it
//!   moves on; after that no poll can hold what was taken out, and it is freed. The CQ's one
//!   poller keeps the entry it found last *across* polls and uses it again without probing
//!   while the generation it reads is the one it found it under: an unregister that took the
//!   entry out since would have bumped it, or waits for this poll (`uverbs_efa::table` has the
//!   argument in full).
//! * **Late completions.** A completion that arrives for a QP that is gone (the device may
//!   still write CQEs after a destroy) finds no entry: it is consumed, counted
//!   ([`Cq::efa_stale_completions`](crate::Cq::efa_stale_completions)) and skipped. A QP
//!   number reused by a new QP cannot complete the old QP's WRs: every QP's request ids carry
//!   a generation, and the completer refuses an id of another generation.
//!
//! Proofs: the unit tests of `uverbs_efa::wrid` (two threads, 30k ids through an 8-id pool,
//! aborts included) and of `uverbs_efa::table` (register/unregister while another thread
//! polls), which also run under Miri, and an integration test that posts, polls and runs the
//! EFA device model on three threads through 500 wraps of every ring.

mod ah;
mod cntr;
mod cq;
mod device;
mod introspect;
mod mr;
mod qp;

pub(crate) use ah::{ah_num, check_create_ah, CREATE_AH_RESP_LEN};
pub use cntr::{CompCntrOps, EfaCntrMem, EfaCompCntr, EfaCompCntrInitAttr};
pub(crate) use cq::{EfaCq, EfaCursor};
pub use cq::{EfaCqExtMem, EfaCqInitAttr, EfaCqInitFlags, EfaWc, EfaWcFlags};
pub(crate) use device::EfaDevice;
pub use device::{EfaDeviceAttr, EfaDeviceCaps};
pub use introspect::{
    EfaCqAttr, EfaRqDepthAttr, EfaSqDepthAttr, EfaSqDepthFlags, EfaWqAttr, EfaWqCaps,
};
pub use mr::EfaMrAttr;
pub(crate) use qp::{create_qp, EfaQp};
pub use qp::{EfaProcessingHints, EfaQpFlags, EfaQpInitAttr, EfaWrExFlags};
