//! The extended poll API (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll` and the
//! `ibv_wc_read_*` readers of `struct ibv_cq_ex`), as a borrow of the [`Cq`].
//!
//! [`Cq::start_poll`] returns a [`PollCq`] guard positioned on the first completion; its
//! readers look at that completion, [`PollCq::next_poll`] moves to the next, and dropping the
//! guard (or [`PollCq::end_poll`]) ends the poll. The guard borrows the CQ mutably, so nothing
//! else can poll meanwhile — the same exclusion libibverbs gets from the CQ lock, checked by
//! the compiler instead. No lock, no allocation, no indirect call.

use crate::cq::Cq;
use crate::error::Result;
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};

/// An open extended poll on a CQ, positioned on one completion.
#[doc(alias = "ibv_cq_ex")]
#[derive(Debug)]
pub struct PollCq<'a> {
    cq: &'a mut Cq,
    cur: Wc,
}

impl Cq {
    /// Starts an extended poll (`ibv_start_poll`): `None` when the CQ is empty (libibverbs'
    /// `ENOENT`), otherwise a guard on the first completion.
    #[doc(alias = "ibv_start_poll")]
    #[inline]
    pub fn start_poll(&mut self) -> Result<Option<PollCq<'_>>> {
        Ok(self.poll_one()?.map(|cur| PollCq { cq: self, cur }))
    }
}

impl PollCq<'_> {
    /// Moves to the next completion (`ibv_next_poll`); `false` when there is none (the guard
    /// then still shows the last one).
    #[doc(alias = "ibv_next_poll")]
    #[inline]
    pub fn next_poll(&mut self) -> Result<bool> {
        match self.cq.poll_one()? {
            Some(wc) => {
                self.cur = wc;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Ends the poll (`ibv_end_poll`); dropping the guard does the same.
    #[doc(alias = "ibv_end_poll")]
    pub fn end_poll(self) {}

    /// `wr_id` of the current completion (`ibv_cq_ex.wr_id`).
    pub fn wr_id(&self) -> u64 {
        self.cur.wr_id
    }

    /// Status of the current completion (`ibv_cq_ex.status`).
    pub fn status(&self) -> WcStatus {
        self.cur.status
    }

    /// `ibv_wc_read_opcode`.
    #[doc(alias = "ibv_wc_read_opcode")]
    pub fn read_opcode(&self) -> WcOpcode {
        self.cur.opcode
    }

    /// `ibv_wc_read_vendor_err`.
    #[doc(alias = "ibv_wc_read_vendor_err")]
    pub fn read_vendor_err(&self) -> u32 {
        self.cur.vendor_err
    }

    /// `ibv_wc_read_byte_len`.
    #[doc(alias = "ibv_wc_read_byte_len")]
    pub fn read_byte_len(&self) -> u32 {
        self.cur.byte_len
    }

    /// `ibv_wc_read_imm_data`, converted to host order (libibverbs returns it big-endian);
    /// meaningful when [`Self::read_wc_flags`] has `WITH_IMM`.
    #[doc(alias = "ibv_wc_read_imm_data")]
    pub fn read_imm_data(&self) -> u32 {
        u32::from_be(self.cur.imm_data)
    }

    /// `ibv_wc_read_invalidated_rkey`; meaningful when [`Self::read_wc_flags`] has
    /// `WITH_INV`.
    #[doc(alias = "ibv_wc_read_invalidated_rkey")]
    pub fn read_invalidated_rkey(&self) -> u32 {
        self.cur.imm_data
    }

    /// `ibv_wc_read_qp_num`.
    #[doc(alias = "ibv_wc_read_qp_num")]
    pub fn read_qp_num(&self) -> u32 {
        self.cur.qp_num
    }

    /// `ibv_wc_read_src_qp`.
    #[doc(alias = "ibv_wc_read_src_qp")]
    pub fn read_src_qp(&self) -> u32 {
        self.cur.src_qp
    }

    /// `ibv_wc_read_wc_flags`.
    #[doc(alias = "ibv_wc_read_wc_flags")]
    pub fn read_wc_flags(&self) -> WcFlags {
        self.cur.wc_flags
    }

    /// `ibv_wc_read_slid`.
    #[doc(alias = "ibv_wc_read_slid")]
    pub fn read_slid(&self) -> u16 {
        self.cur.slid
    }

    /// `ibv_wc_read_sl`.
    #[doc(alias = "ibv_wc_read_sl")]
    pub fn read_sl(&self) -> u8 {
        self.cur.sl
    }

    /// `ibv_wc_read_dlid_path_bits`.
    #[doc(alias = "ibv_wc_read_dlid_path_bits")]
    pub fn read_dlid_path_bits(&self) -> u8 {
        self.cur.dlid_path_bits
    }

    /// `ibv_wc_read_pkey_index` (not in libibverbs' list but in `ibv_wc`).
    pub fn read_pkey_index(&self) -> u16 {
        self.cur.pkey_index
    }

    /// The whole current completion as a [`Wc`].
    pub fn wc(&self) -> Wc {
        self.cur
    }
}
