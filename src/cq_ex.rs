//! The extended poll API (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll` and the
//! `ibv_wc_read_*` readers of `struct ibv_cq_ex`), as a borrow of the [`Cq`].
//!
//! [`Cq::start_poll`] returns a [`PollCq`] guard positioned on the first completion; its
//! readers look at that completion, [`PollCq::next_poll`] moves to the next, and dropping the
//! guard (or [`PollCq::end_poll`]) ends the poll. The guard borrows the CQ mutably, so nothing
//! else can poll meanwhile — the same exclusion libibverbs gets from the CQ lock, checked by
//! the compiler instead. No lock, no allocation, no indirect call.
//!
//! On rxe the poll is lazy, as rdma-core's rxe `cq_ex` is: `start_poll` loads the kernel's
//! producer index once (`Acquire`, validated like [`Cq::poll`]), each reader loads just its
//! field from the current ring slot, `next_poll` moves a local consumer index (reloading the
//! producer index only when the completions known ready are used up), and `end_poll`/drop
//! publishes the consumer index once (`Release`), freeing the slots read. EFA CQs take the
//! copying path: each completion is polled into a [`Wc`] which the readers return from.

use crate::cq::{poll_efa, ring_error, wc_flags_from_kernel, wc_from_rxe, Cq, CqRing, CqShared};
use crate::error::Result;
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};

/// An open extended poll on a CQ, positioned on one completion.
#[doc(alias = "ibv_cq_ex")]
pub struct PollCq<'a> {
    inner: Inner<'a>,
}

enum Inner<'a> {
    /// rxe: the ring slot itself, read field by field.
    Rxe {
        cur: uverbs_rxe::PollCursor<'a>,
        shared: &'a CqShared,
    },
    /// EFA: each completion copied into a `Wc`.
    Copy {
        ring: &'a mut crate::efa::EfaCqRing,
        shared: &'a CqShared,
        cur: Wc,
    },
}

impl std::fmt::Debug for PollCq<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollCq")
            .field("cq", &self.shared().label())
            .field("current", &self.wc())
            .finish()
    }
}

impl Cq {
    /// Starts an extended poll (`ibv_start_poll`): `None` when the CQ is empty (libibverbs'
    /// `ENOENT`), otherwise a guard on the first completion.
    #[doc(alias = "ibv_start_poll")]
    #[inline]
    pub fn start_poll(&mut self) -> Result<Option<PollCq<'_>>> {
        let shared = &*self.shared;
        let inner = match &mut self.ring {
            CqRing::Rxe { cq, .. } => match cq.start_poll() {
                Ok(Some(cur)) => Inner::Rxe { cur, shared },
                Ok(None) => return Ok(None),
                Err(e) => return Err(ring_error(shared, e)),
            },
            CqRing::Efa(ring) => {
                let mut w = [Wc::default()];
                if poll_efa(shared, ring, &mut w)? == 0 {
                    return Ok(None);
                }
                Inner::Copy {
                    ring,
                    shared,
                    cur: w[0],
                }
            }
        };
        Ok(Some(PollCq { inner }))
    }
}

/// Reads one field of the current completion from whichever path the guard is on.
macro_rules! field {
    ($self:ident, |$c:ident| $rxe:expr, |$w:ident| $copy:expr) => {
        match &$self.inner {
            Inner::Rxe { cur: $c, .. } => $rxe,
            Inner::Copy { cur: $w, .. } => $copy,
        }
    };
}

impl PollCq<'_> {
    /// Moves to the next completion (`ibv_next_poll`); `false` when there is none (the guard
    /// then still shows the last one).
    #[doc(alias = "ibv_next_poll")]
    #[inline]
    pub fn next_poll(&mut self) -> Result<bool> {
        match &mut self.inner {
            Inner::Rxe { cur, shared } => cur.advance().map_err(|e| ring_error(shared, e)),
            Inner::Copy { ring, shared, cur } => {
                let mut w = [Wc::default()];
                if poll_efa(shared, ring, &mut w)? == 0 {
                    return Ok(false);
                }
                *cur = w[0];
                Ok(true)
            }
        }
    }

    fn shared(&self) -> &CqShared {
        match &self.inner {
            Inner::Rxe { shared, .. } | Inner::Copy { shared, .. } => shared,
        }
    }

    /// Ends the poll (`ibv_end_poll`); dropping the guard does the same.
    #[doc(alias = "ibv_end_poll")]
    pub fn end_poll(self) {}

    /// `wr_id` of the current completion (`ibv_cq_ex.wr_id`).
    #[inline]
    pub fn wr_id(&self) -> u64 {
        field!(self, |c| c.wr_id(), |w| w.wr_id)
    }

    /// Status of the current completion (`ibv_cq_ex.status`).
    #[inline]
    pub fn status(&self) -> WcStatus {
        field!(self, |c| WcStatus(c.status()), |w| w.status)
    }

    /// `ibv_wc_read_opcode`.
    #[doc(alias = "ibv_wc_read_opcode")]
    #[inline]
    pub fn read_opcode(&self) -> WcOpcode {
        field!(self, |c| WcOpcode(c.opcode()), |w| w.opcode)
    }

    /// `ibv_wc_read_vendor_err`.
    #[doc(alias = "ibv_wc_read_vendor_err")]
    #[inline]
    pub fn read_vendor_err(&self) -> u32 {
        field!(self, |c| c.vendor_err(), |w| w.vendor_err)
    }

    /// `ibv_wc_read_byte_len`.
    #[doc(alias = "ibv_wc_read_byte_len")]
    #[inline]
    pub fn read_byte_len(&self) -> u32 {
        field!(self, |c| c.byte_len(), |w| w.byte_len)
    }

    /// `ibv_wc_read_imm_data`, converted to host order (libibverbs returns it big-endian);
    /// meaningful when [`Self::read_wc_flags`] has `WITH_IMM`.
    #[doc(alias = "ibv_wc_read_imm_data")]
    #[inline]
    pub fn read_imm_data(&self) -> u32 {
        u32::from_be(field!(self, |c| c.ex(), |w| w.imm_data))
    }

    /// `ibv_wc_read_invalidated_rkey`; meaningful when [`Self::read_wc_flags`] has
    /// `WITH_INV`.
    #[doc(alias = "ibv_wc_read_invalidated_rkey")]
    #[inline]
    pub fn read_invalidated_rkey(&self) -> u32 {
        field!(self, |c| c.ex(), |w| w.imm_data)
    }

    /// `ibv_wc_read_qp_num`.
    #[doc(alias = "ibv_wc_read_qp_num")]
    #[inline]
    pub fn read_qp_num(&self) -> u32 {
        field!(self, |c| c.qp_num(), |w| w.qp_num)
    }

    /// `ibv_wc_read_src_qp`.
    #[doc(alias = "ibv_wc_read_src_qp")]
    #[inline]
    pub fn read_src_qp(&self) -> u32 {
        field!(self, |c| c.src_qp(), |w| w.src_qp)
    }

    /// `ibv_wc_read_wc_flags`.
    #[doc(alias = "ibv_wc_read_wc_flags")]
    #[inline]
    pub fn read_wc_flags(&self) -> WcFlags {
        field!(self, |c| wc_flags_from_kernel(c.wc_flags()), |w| w.wc_flags)
    }

    /// `ibv_wc_read_slid`.
    #[doc(alias = "ibv_wc_read_slid")]
    #[inline]
    pub fn read_slid(&self) -> u16 {
        field!(self, |c| c.slid(), |w| w.slid)
    }

    /// `ibv_wc_read_sl`.
    #[doc(alias = "ibv_wc_read_sl")]
    #[inline]
    pub fn read_sl(&self) -> u8 {
        field!(self, |c| c.sl(), |w| w.sl)
    }

    /// `ibv_wc_read_dlid_path_bits`.
    #[doc(alias = "ibv_wc_read_dlid_path_bits")]
    #[inline]
    pub fn read_dlid_path_bits(&self) -> u8 {
        field!(self, |c| c.dlid_path_bits(), |w| w.dlid_path_bits)
    }

    /// `ibv_wc_read_pkey_index` (not in libibverbs' list but in `ibv_wc`).
    #[inline]
    pub fn read_pkey_index(&self) -> u16 {
        field!(self, |c| c.pkey_index(), |w| w.pkey_index)
    }

    /// The whole current completion as a [`Wc`].
    #[inline]
    pub fn wc(&self) -> Wc {
        field!(self, |c| wc_from_rxe(&c.cqe()), |w| *w)
    }
}
