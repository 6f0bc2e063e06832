//! uverbs behind rdma-core's C ABI.
//!
//! This crate exports the libibverbs API (`ibv_*`) and libefa's (`efadv_*`) with the structs
//! of rdma-core's `<infiniband/verbs.h>` and `<infiniband/efadv.h>`, so programs compiled
//! against rdma-core run on uverbs unchanged: `cargo xtask capi` links `libibverbs.so.1` and
//! `libefa.so.1` (rdma-core's symbol versions) and copies the static archives beside them.
//!
//! Every C object is its C struct followed by the uverbs object that owns the kernel object
//! (`#[repr(C)]`, C struct first), so a pointer the program holds is a pointer to ours. The
//! header's inline data-path functions (`ibv_post_send`, `ibv_poll_cq`, `ibv_start_poll`,
//! `ibv_wr_*`) call through the function tables we fill in; they reach uverbs' data path with
//! no lock and no allocation. As with `IBV_CREATE_CQ_ATTR_SINGLE_THREADED`, one QP (or CQ, or
//! SRQ) must not be posted to (or polled) from two threads at once.
//!
//! No Rust panic crosses into C: every exported function runs inside [`guard`], which turns
//! one into the call's error return (errno `EIO`) and says so on standard error.
#![allow(clippy::missing_safety_doc)]

pub mod abi;
mod ah;
mod cq;
mod device;
mod efa;
mod events;
mod misc;
mod mr;
mod ops;
mod pd;
mod qp;
mod query;
mod srq;
#[cfg(feature = "standin")]
mod standin;
mod util;
mod xrcd;

pub use device::wrap_context;
/// The structs of `<infiniband/efadv.h>` and their layout rows (`efa_layout`).
pub use efa::abi as efa_abi;
pub use util::guard;
