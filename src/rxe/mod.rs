//! rxe (soft-RoCE) wiring: what the core does for the rxe provider between the generic
//! objects (which own the kernel objects and commands) and `uverbs_rxe` (the ring logic, no
//! syscalls), as `crate::efa` does for EFA. Today: the CQ ring (mapping, completion
//! conversion); the QP and SRQ queue mapping (`crate::qp::map_rxe_queue`) is still in
//! `src/qp.rs`.

mod cq;

pub(crate) use cq::{cq_ring, cq_ring_error, take_cqes, wc_flags_from_kernel, wc_from_rxe};
