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
//! publishes the consumer index once (`Release`), freeing the slots read. EFA is lazy too, as
//! rdma-core's EFA `cq_ex` is: positioning on a CQE checks its phase, consumes it and completes
//! its req_id (which yields `wr_id`, with every check of [`Cq::poll`]); the other readers read
//! their words from the ring slot on demand, and `end_poll`/drop writes the CQ doorbell once.

use crate::cq::{Cq, CqShared};
use crate::error::Result;
use crate::provider::{dispatch, CqOps, Cursor, CursorOps};
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};

/// An open extended poll on a CQ, positioned on one completion.
///
/// Reads only the fields asked for, straight from the ring slot:
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// # let attr = uverbs::CqInitAttr { cqe: 16, ..Default::default() };
/// # let mut cq = ctx.efadv_create_cq(&attr, &Default::default())?;
/// use uverbs::WcStatus;
///
/// if let Some(mut p) = cq.start_poll()? {     // ibv_start_poll; None: the CQ is empty
///     loop {
///         match p.status() {
///             WcStatus::SUCCESS => println!("wr {}: {} bytes", p.wr_id(), p.read_byte_len()),
///             s => eprintln!("wr {} failed: {s}", p.wr_id()),
///         }
///         if !p.next_poll()? {                // ibv_next_poll; false: no more
///             break;
///         }
///     }
/// }                                           // ibv_end_poll when the guard drops
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_cq_ex")]
pub struct PollCq<'a> {
    /// The provider's cursor: the ring slot itself, read field by field.
    pub(crate) cur: Cursor<'a>,
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
        let cur = dispatch!(CqRing, &mut self.ring, r => {
            match r.start_poll(shared)? {
                Some(c) => c.into(),
                None => return Ok(None),
            }
        });
        Ok(Some(PollCq { cur }))
    }
}

/// Reads one field of the current completion through the provider's cursor.
macro_rules! field {
    ($self:ident, $read:ident) => {
        dispatch!(Cursor, &$self.cur, c => c.$read())
    };
}

impl PollCq<'_> {
    /// Moves to the next completion (`ibv_next_poll`); `false` when there is none (the guard
    /// then still shows the last one).
    ///
    /// Inline, and small: on rxe it moves the cursor itself (a few loads and stores while
    /// completions are known ready); on EFA it calls the one out-of-line EFA step, as a C
    /// program calls the provider's `next_poll` through `ibv_cq_ex`.
    #[doc(alias = "ibv_next_poll")]
    #[inline(always)]
    pub fn next_poll(&mut self) -> Result<bool> {
        dispatch!(Cursor, &mut self.cur, c => c.next())
    }

    /// [`Self::next_poll_id`] of the step that needs no load of the device's index and no
    /// call (rxe: the next completion known ready before the wrap): the new completion's
    /// `wr_id` and status, or `None` having done nothing (then call `next_poll_id`). For
    /// uverbs' libibverbs, whose `next_poll` takes this step without setting up a frame.
    #[doc(hidden)]
    #[inline(always)]
    pub fn next_poll_ready(&mut self) -> Option<(u64, WcStatus)> {
        dispatch!(Cursor, &mut self.cur, c => c.next_ready().then(|| (c.wr_id(), c.status())))
    }

    /// [`Self::next_poll`] with the new completion's `wr_id` and status (what `struct
    /// ibv_cq_ex` shows in its fields), read in the same provider arm: `None` when there is
    /// none. For uverbs' libibverbs, whose `next_poll` copies both into the C struct.
    #[doc(hidden)]
    #[inline(always)]
    pub fn next_poll_id(&mut self) -> Result<Option<(u64, WcStatus)>> {
        dispatch!(Cursor, &mut self.cur, c => match c.next() {
            Ok(true) => Ok(Some((c.wr_id(), c.status()))),
            Ok(false) => Ok(None),
            Err(e) => Err(e),
        })
    }

    pub(crate) fn shared(&self) -> &CqShared {
        dispatch!(Cursor, &self.cur, c => c.shared())
    }

    /// Ends the poll (`ibv_end_poll`); dropping the guard does the same.
    #[doc(alias = "ibv_end_poll")]
    pub fn end_poll(self) {}

    /// `wr_id` of the current completion (`ibv_cq_ex.wr_id`).
    #[inline]
    pub fn wr_id(&self) -> u64 {
        field!(self, wr_id)
    }

    /// Status of the current completion (`ibv_cq_ex.status`).
    #[inline]
    pub fn status(&self) -> WcStatus {
        field!(self, status)
    }

    /// `ibv_wc_read_opcode`.
    #[doc(alias = "ibv_wc_read_opcode")]
    #[inline]
    pub fn read_opcode(&self) -> WcOpcode {
        field!(self, opcode)
    }

    /// `ibv_wc_read_vendor_err`.
    #[doc(alias = "ibv_wc_read_vendor_err")]
    #[inline]
    pub fn read_vendor_err(&self) -> u32 {
        field!(self, vendor_err)
    }

    /// `ibv_wc_read_byte_len`.
    #[doc(alias = "ibv_wc_read_byte_len")]
    #[inline]
    pub fn read_byte_len(&self) -> u32 {
        field!(self, byte_len)
    }

    /// `ibv_wc_read_imm_data` in host order on every provider, the same value as
    /// [`Wc::imm_data`](crate::Wc::imm_data) and as the sender passed (libibverbs returns the
    /// `__be32` network-order value; rxe's kernel stores it so, EFA's device in host order:
    /// both are converted here); meaningful when [`Self::read_wc_flags`] has `WITH_IMM`.
    #[doc(alias = "ibv_wc_read_imm_data")]
    #[inline]
    pub fn read_imm_data(&self) -> u32 {
        field!(self, imm_data)
    }

    /// `ibv_wc_read_invalidated_rkey`; meaningful when [`Self::read_wc_flags`] has
    /// `WITH_INV`.
    #[doc(alias = "ibv_wc_read_invalidated_rkey")]
    #[inline]
    pub fn read_invalidated_rkey(&self) -> u32 {
        field!(self, invalidated_rkey)
    }

    /// `ibv_wc_read_qp_num`.
    #[doc(alias = "ibv_wc_read_qp_num")]
    #[inline]
    pub fn read_qp_num(&self) -> u32 {
        field!(self, qp_num)
    }

    /// `ibv_wc_read_src_qp`.
    #[doc(alias = "ibv_wc_read_src_qp")]
    #[inline]
    pub fn read_src_qp(&self) -> u32 {
        field!(self, src_qp)
    }

    /// `ibv_wc_read_wc_flags`.
    #[doc(alias = "ibv_wc_read_wc_flags")]
    #[inline]
    pub fn read_wc_flags(&self) -> WcFlags {
        field!(self, wc_flags)
    }

    /// `ibv_wc_read_slid`.
    #[doc(alias = "ibv_wc_read_slid")]
    #[inline]
    pub fn read_slid(&self) -> u16 {
        field!(self, slid)
    }

    /// `ibv_wc_read_sl`.
    #[doc(alias = "ibv_wc_read_sl")]
    #[inline]
    pub fn read_sl(&self) -> u8 {
        field!(self, sl)
    }

    /// `ibv_wc_read_dlid_path_bits`.
    #[doc(alias = "ibv_wc_read_dlid_path_bits")]
    #[inline]
    pub fn read_dlid_path_bits(&self) -> u8 {
        field!(self, dlid_path_bits)
    }

    /// `ibv_wc_read_pkey_index` (not in libibverbs' list but in `ibv_wc`).
    #[inline]
    pub fn read_pkey_index(&self) -> u16 {
        field!(self, pkey_index)
    }

    /// The whole current completion as a [`Wc`].
    #[inline]
    pub fn wc(&self) -> Wc {
        field!(self, wc)
    }
}
