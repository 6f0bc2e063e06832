//! rxe (soft-RoCE) wiring: the rxe provider's half of each object, between the generic objects
//! (which own the kernel objects and commands) and `uverbs_rxe` (the ring logic, no syscalls),
//! as `crate::efa` is EFA's: the context ([`RxeDevice`]), the CQ ring ([`RxeCq`], its cursor
//! [`RxeCursor`]), the QP's rings and send doorbell ([`RxeQp`]), the SRQ ring ([`RxeSrq`]), the
//! AH's number, and the queue mapping they share. Each implements its trait of
//! `crate::provider`.

mod ah;
mod cq;
mod device;
mod qp;
mod queue;
mod srq;

pub(crate) use cq::{RxeCq, RxeCursor};
pub(crate) use device::RxeDevice;
pub(crate) use qp::{create_qp, post_errno, RxeQp};
pub(crate) use queue::map_rxe_queue;
pub(crate) use srq::{create_srq, RxeSrq};
