//! rxe (soft-RoCE) ring formats and ring logic for uverbs: no syscalls, no allocation, no locks.
//!
//! The rxe kernel driver shares four kinds of queues with userspace, each a power-of-two ring
//! that starts with a `struct rxe_queue_buf` header ([`uverbs_uapi::rxe::RxeQueueBuf`]):
//!
//! | queue   | type here            | producer  | consumer  | element                 |
//! |---------|----------------------|-----------|-----------|-------------------------|
//! | SQ      | [`SendQueue`]        | userspace | kernel    | `struct rxe_send_wqe`   |
//! | RQ, SRQ | [`RecvQueue`]        | userspace | kernel    | `struct rxe_recv_wqe`   |
//! | CQ      | [`CompletionQueue`]  | kernel    | userspace | `struct ib_uverbs_wc`   |
//!
//! Indices always lie in `0..=index_mask` and one slot stays empty. Each side `Acquire`-loads
//! the other's index and `Release`-stores its own. The core maps a queue (the `Mminfo` of a
//! create response), builds a [`Queue`] with the `unsafe` [`Queue::from_raw`], wraps it in the
//! typed queue, and after [`SendQueue::publish`] kicks the kernel with a POST_SEND command that
//! carries zero work requests. Receives and polls need no syscall.
//!
//! Wiring, per queue (what rdma-core's rxe provider does):
//! - CQ: CREATE_CQ response driver data is [`uverbs_uapi::rxe::RxeCreateCqResp`]; mmap
//!   `mi.size` bytes at offset `mi.offset` of the uverbs fd (`PROT_READ|PROT_WRITE`,
//!   `MAP_SHARED`), then `CompletionQueue::new(Queue::from_raw(..)?)`. RESIZE_CQ returns a new
//!   `Mminfo`: drop the old `CompletionQueue`, unmap, map the new one and build a new one.
//! - QP: CREATE_QP returns [`uverbs_uapi::rxe::RxeCreateQpResp`] with `sq_mi` and `rq_mi`
//!   (no RQ mapping when the QP uses an SRQ). Pass the caps the kernel returned
//!   (`max_send_sge`, `max_inline_data`, `max_recv_sge`) to [`SendQueue::new`] /
//!   [`RecvQueue::new`].
//! - SRQ: CREATE_SRQ returns [`uverbs_uapi::rxe::RxeCreateSrqResp`]; MODIFY_SRQ with a new
//!   `max_wr` writes a new `Mminfo` to the address in [`uverbs_uapi::rxe::RxeModifySrqCmd`].
//!
//! All `unsafe` code lives in the `ring` module.
#![cfg_attr(not(any(feature = "std", test)), no_std)]
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod cq;
mod error;
mod producer;
mod ring;
mod rq;
mod sq;

#[cfg(test)]
mod tests;

pub use cq::{wc_flags_from_kernel, CompletionQueue, PollCursor, CQE_MIN_SIZE};
pub use error::{IndexKind, RingError, WrError};
pub use ring::Queue;
pub use rq::RecvQueue;
pub use sq::{SendOpcode, SendQueue, SendQueueCaps};

// The rings take the shared `uverbs_wr::Sge` (`struct ibv_sge`) and copy its bytes into the
// WQE's SGE array, whose elements are the kernel's `struct rxe_sge`: the two layouts must be
// one.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    use uverbs_uapi::rxe::RxeSge;
    use uverbs_wr::Sge;
    assert!(size_of::<Sge>() == size_of::<RxeSge>());
    assert!(align_of::<Sge>() == align_of::<RxeSge>());
    assert!(offset_of!(Sge, addr) == offset_of!(RxeSge, addr));
    assert!(offset_of!(Sge, length) == offset_of!(RxeSge, length));
    assert!(offset_of!(Sge, lkey) == offset_of!(RxeSge, lkey));
};
