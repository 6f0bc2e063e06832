//! The work-request and completion vocabulary of uverbs: what a program builds to post and
//! reads when it polls, in one form that the object model (`uverbs`), the rxe provider
//! (`uverbs-rxe`) and the EFA provider (`uverbs-efa`) all take as it is.
//!
//! - [`Sge`] is `struct ibv_sge`, laid out as the C struct (and as the kernel's `rxe_sge`), so
//!   a caller's slice of them reaches a provider's ring unconverted: rxe copies its bytes into
//!   the WQE, EFA reads each element into a buffer descriptor.
//! - [`SendWr`] (`struct ibv_send_wr`): a [`WrOp`] (every send operation either provider or
//!   the verbs API has, with its operands), [`SendFlags`], its [`WrData`] and, for datagram
//!   QPs, a [`UdDest`]. Immediate data is a host-order value everywhere; a provider stores it
//!   big-endian where its wire format wants that. The numbers a provider writes for an
//!   operation (rxe's `IB_UVERBS_WR_*` opcode, EFA's descriptor op type) stay in that
//!   provider, as do its refusals of operations its device lacks.
//! - [`RecvWr`] (`struct ibv_recv_wr`), posted as a slice; [`PostError`] names the first work
//!   request of a list that was not posted (`bad_wr`).
//! - [`Wc`] (`struct ibv_wc`) with [`WcStatus`], [`WcOpcode`] and [`WcFlags`]: each provider
//!   writes it when it polls.
//! - [`QpType`] and [`SendOpsFlags`]; [`AccessFlags`] (`enum ibv_access_flags`, which an MR
//!   registration and a memory-window bind carry).
//!
//! `no_std`, no syscalls, no allocation, no `unsafe`.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod qp;
mod send;
mod wc;

pub use qp::{QpType, SendOpsFlags};
pub use send::{AddressHandle, PostError, RecvWr, SendWr, UdDest, WrData};
pub use wc::{Wc, WcFlags, WcOpcode, WcStatus};

use bitflags::bitflags;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A scatter/gather element (`struct ibv_sge`): `length` bytes at `addr` in the MR of `lkey`.
///
/// The layout is the C struct's (16 bytes: `u64`, `u32`, `u32`, 8-byte aligned), which is also
/// the kernel's `struct rxe_sge`, so a slice of these is written to a ring as bytes.
#[doc(alias = "ibv_sge")]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Sge {
    /// Start address (a virtual address inside the MR, or an offset for zero-based MRs).
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The local key of the MR.
    pub lkey: u32,
}

// The `struct ibv_sge` layout (infiniband/verbs.h): checked at compile time.
const _: () = {
    assert!(core::mem::size_of::<Sge>() == 16);
    assert!(core::mem::align_of::<Sge>() == 8);
    assert!(core::mem::offset_of!(Sge, addr) == 0);
    assert!(core::mem::offset_of!(Sge, length) == 8);
    assert!(core::mem::offset_of!(Sge, lkey) == 12);
};

bitflags! {
    /// Send flags (`enum ibv_send_flags`). `IBV_SEND_INLINE` is not a flag here: it follows
    /// from the data being inline.
    #[doc(alias = "ibv_send_flags")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct SendFlags: u32 {
        /// `IBV_SEND_FENCE`: wait for earlier RDMA reads and atomics to finish first.
        const FENCE = 1 << 0;
        /// `IBV_SEND_SIGNALED`: produce a completion (always, on a QP with `sq_sig_all`).
        const SIGNALED = 1 << 1;
        /// `IBV_SEND_SOLICITED`: set the solicited-event bit at the receiver.
        const SOLICITED = 1 << 2;
    }
}

bitflags! {
    /// Memory access rights of an MR or a memory window (`enum ibv_access_flags`).
    #[doc(alias = "ibv_access_flags")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct AccessFlags: u32 {
        /// `IBV_ACCESS_LOCAL_WRITE`: the local device may write (receives, RDMA read results).
        const LOCAL_WRITE = 1 << 0;
        /// `IBV_ACCESS_REMOTE_WRITE` (requires `LOCAL_WRITE`).
        const REMOTE_WRITE = 1 << 1;
        /// `IBV_ACCESS_REMOTE_READ`.
        const REMOTE_READ = 1 << 2;
        /// `IBV_ACCESS_REMOTE_ATOMIC` (requires `LOCAL_WRITE`).
        const REMOTE_ATOMIC = 1 << 3;
        /// `IBV_ACCESS_MW_BIND`.
        const MW_BIND = 1 << 4;
        /// `IBV_ACCESS_ZERO_BASED`.
        const ZERO_BASED = 1 << 5;
        /// `IBV_ACCESS_ON_DEMAND`.
        const ON_DEMAND = 1 << 6;
        /// `IBV_ACCESS_HUGETLB`.
        const HUGETLB = 1 << 7;
        /// `IBV_ACCESS_FLUSH_GLOBAL`.
        const FLUSH_GLOBAL = 1 << 8;
        /// `IBV_ACCESS_FLUSH_PERSISTENT`.
        const FLUSH_PERSISTENT = 1 << 9;
        /// `IBV_ACCESS_RELAXED_ORDERING` (optional: ignored by devices without it).
        const RELAXED_ORDERING = 1 << 20;
    }
}

/// The operation of a send work request and its operands (`ibv_send_wr.opcode` with the
/// matching part of `ibv_send_wr.wr`, `imm_data`, `invalidate_rkey`).
///
/// Immediate data is host order here; it travels big-endian, and the receiver's completion
/// gives back the same host-order value.
#[doc(alias = "ibv_wr_opcode")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrOp {
    /// `IBV_WR_SEND`.
    Send,
    /// `IBV_WR_SEND_WITH_IMM`.
    SendWithImm {
        /// Immediate data (host order).
        imm_data: u32,
    },
    /// `IBV_WR_SEND_WITH_INV`: send and invalidate `invalidate_rkey` at the responder.
    SendWithInv {
        /// The remote key to invalidate (a memory window's, on rxe).
        invalidate_rkey: u32,
    },
    /// `IBV_WR_RDMA_WRITE`.
    RdmaWrite {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`.
    RdmaWriteWithImm {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data (host order).
        imm_data: u32,
    },
    /// `IBV_WR_RDMA_READ`.
    RdmaRead {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`: the local SGE list must total exactly 8 bytes and the
    /// remote address be 8-byte aligned; the old remote value lands in the local buffer.
    AtomicCmpAndSwp {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Compared with the remote value.
        compare: u64,
        /// Stored if equal.
        swap: u64,
    },
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`: as for compare-and-swap, 8 bytes, aligned.
    AtomicFetchAndAdd {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Added to the remote value.
        add: u64,
    },
    /// `IBV_WR_BIND_MW`: bind a type-2 memory window to `length` bytes at `addr` of the MR
    /// with `mr_lkey`, giving it `new_rkey` (usually `ibv_inc_rkey` of its key).
    BindMw {
        /// The window's current rkey.
        mw_rkey: u32,
        /// The rkey after the bind.
        new_rkey: u32,
        /// lkey of the MR the window lies in (registered with `MW_BIND`).
        mr_lkey: u32,
        /// Start of the window.
        addr: u64,
        /// Length of the window.
        length: u64,
        /// Remote access the window grants.
        access: AccessFlags,
    },
    /// `IBV_WR_LOCAL_INV`: invalidate a local key.
    LocalInv {
        /// The key to invalidate.
        invalidate_rkey: u32,
    },
    /// `IBV_WR_ATOMIC_WRITE` (`ibv_wr_atomic_write`): write `value`, 8 bytes, to the remote
    /// address as one atomic (the responder's MR needs remote write access). The bytes
    /// travel in the work request (no SGE, no local buffer), in the order given.
    AtomicWrite {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// The bytes written.
        value: [u8; 8],
    },
}

impl WrOp {
    /// The operation's `IBV_WR_*` name without the prefix (`"SEND"`, `"RDMA_WRITE_WITH_IMM"`,
    /// ...), for messages.
    pub const fn name(&self) -> &'static str {
        match self {
            WrOp::Send => "SEND",
            WrOp::SendWithImm { .. } => "SEND_WITH_IMM",
            WrOp::SendWithInv { .. } => "SEND_WITH_INV",
            WrOp::RdmaWrite { .. } => "RDMA_WRITE",
            WrOp::RdmaWriteWithImm { .. } => "RDMA_WRITE_WITH_IMM",
            WrOp::RdmaRead { .. } => "RDMA_READ",
            WrOp::AtomicCmpAndSwp { .. } => "ATOMIC_CMP_AND_SWP",
            WrOp::AtomicFetchAndAdd { .. } => "ATOMIC_FETCH_AND_ADD",
            WrOp::BindMw { .. } => "BIND_MW",
            WrOp::LocalInv { .. } => "LOCAL_INV",
            WrOp::AtomicWrite { .. } => "ATOMIC_WRITE",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `struct ibv_sge { uint64_t addr; uint32_t length; uint32_t lkey; }` in native byte
    /// order: the bytes of an `Sge` are those a C caller's SGE array holds.
    #[test]
    fn sge_has_the_ibv_sge_layout() {
        let s = Sge {
            addr: 0x1122_3344_5566_7788,
            length: 0x99aa_bbcc,
            lkey: 0x0102_0304,
        };
        let b = s.as_bytes();
        assert_eq!(b.len(), 16);
        assert_eq!(b[0..8], 0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(b[8..12], 0x99aa_bbccu32.to_ne_bytes());
        assert_eq!(b[12..16], 0x0102_0304u32.to_ne_bytes());
        assert_eq!(Sge::read_from_bytes(b), Ok(s));
        // A slice is an array of 16-byte elements with no padding between them.
        let two = [s, Sge::default()];
        assert_eq!(two.as_bytes().len(), 32);
        assert_eq!(two.as_bytes()[16..], [0u8; 16]);
    }

    #[test]
    fn flags_have_the_verbs_values() {
        assert_eq!(SendFlags::FENCE.bits(), 1);
        assert_eq!(SendFlags::SIGNALED.bits(), 2);
        assert_eq!(SendFlags::SOLICITED.bits(), 4);
        assert_eq!(AccessFlags::ZERO_BASED.bits(), 0x20);
        assert_eq!(AccessFlags::RELAXED_ORDERING.bits(), 1 << 20);
    }

    #[test]
    fn names() {
        assert_eq!(WrOp::Send.name(), "SEND");
        let w = WrOp::RdmaWriteWithImm {
            remote_addr: 0,
            rkey: 0,
            imm_data: 0,
        };
        assert_eq!(w.name(), "RDMA_WRITE_WITH_IMM");
    }
}
