//! rxe (soft-RoCE) wiring: what the core does for the rxe provider between the generic
//! objects (which own the kernel objects and commands) and `uverbs_rxe` (the ring logic, no
//! syscalls), as `crate::efa` does for EFA: the AH's number, the CQ ring (mapping, completion conversion), the
//! QP's rings and send doorbell, the SRQ ring, and the queue mapping they share.

mod ah;
mod cq;
mod qp;
mod queue;
mod srq;

pub(crate) use ah::{ah_num, CREATE_AH_RESP_LEN};
pub(crate) use cq::{
    cq_ring, cq_ring_error, take_cqes, take_one, wc_flags_from_kernel, wc_from_rxe,
};
pub(crate) use qp::{post_recv_list, qp_ring, ring_error, ud_dest, RxeRing};
pub(crate) use queue::map_rxe_queue;
pub(crate) use srq::RxeSrqRing;
