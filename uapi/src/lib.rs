//! Kernel ABI of the Linux RDMA uverbs interface, mirrored as `#[repr(C)]` zerocopy structs.
//!
//! This crate holds only what the kernel headers define: structs, ids, flags. No logic.
#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cmds;
pub mod efa;
pub mod ioctl;
pub mod rxe;
pub mod verbs;
pub mod write;
