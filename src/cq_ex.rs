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

use crate::cq::{Cq, CqRing, CqShared};
use crate::efa::{cursor_error, EfaCursor};
use crate::error::{Errno, Error, Result};
use crate::rxe::{cq_ring_error, wc_flags_from_kernel, wc_from_rxe};
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};
use uverbs_efa::cq::Step;

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
    inner: Inner<'a>,
}

enum Inner<'a> {
    /// rxe: the ring slot itself, read field by field.
    Rxe {
        cur: uverbs_rxe::PollCursor<'a>,
        shared: &'a CqShared,
    },
    /// EFA: the ring slot itself, read field by field.
    Efa {
        cur: EfaCursor<'a>,
        shared: &'a CqShared,
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
                Err(e) => return Err(cq_ring_error(shared, e)),
            },
            CqRing::Efa(ring) => match ring.start_poll() {
                Ok(Some(cur)) => Inner::Efa { cur, shared },
                Ok(None) => return Ok(None),
                Err(e) => return Err(cursor_error(&|| shared.label(), &e)),
            },
        };
        Ok(Some(PollCq { inner }))
    }
}

/// Reads one field of the current completion from whichever path the guard is on.
macro_rules! field {
    ($self:ident, |$c:ident| $rxe:expr, |$e:ident| $efa:expr) => {
        match &$self.inner {
            Inner::Rxe { cur: $c, .. } => $rxe,
            Inner::Efa { cur, .. } => {
                let $e = &cur.cur;
                $efa
            }
        }
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
        match &mut self.inner {
            Inner::Rxe { cur, shared } => {
                if cur.step_in_run() {
                    return Ok(true);
                }
                cur.advance_slow().map_err(|e| cq_ring_error(shared, e))
            }
            Inner::Efa { cur, shared } => {
                // As on rxe: the common step's `Ok(true)` returns from here, so the caller's
                // loop goes from the step straight to its next reader, not through the slow
                // path's `Result`.
                let step = cur.step();
                if step == Step::Landed {
                    return Ok(true);
                }
                cur.advance_slow(step)
                    .map_err(|e| cursor_error(&|| shared.label(), &e))
            }
        }
    }

    fn shared(&self) -> &CqShared {
        match &self.inner {
            Inner::Rxe { shared, .. } | Inner::Efa { shared, .. } => shared,
        }
    }

    /// Ends the poll (`ibv_end_poll`); dropping the guard does the same.
    #[doc(alias = "ibv_end_poll")]
    pub fn end_poll(self) {}

    /// `wr_id` of the current completion (`ibv_cq_ex.wr_id`).
    #[inline]
    pub fn wr_id(&self) -> u64 {
        field!(self, |c| c.wr_id(), |e| e.wr_id())
    }

    /// Status of the current completion (`ibv_cq_ex.status`).
    #[inline]
    pub fn status(&self) -> WcStatus {
        WcStatus(field!(self, |c| c.status(), |e| e.status()))
    }

    /// `ibv_wc_read_opcode`.
    #[doc(alias = "ibv_wc_read_opcode")]
    #[inline]
    pub fn read_opcode(&self) -> WcOpcode {
        WcOpcode(field!(self, |c| c.opcode(), |e| e.opcode()))
    }

    /// `ibv_wc_read_vendor_err`.
    #[doc(alias = "ibv_wc_read_vendor_err")]
    #[inline]
    pub fn read_vendor_err(&self) -> u32 {
        field!(self, |c| c.vendor_err(), |e| e.vendor_err())
    }

    /// `ibv_wc_read_byte_len`.
    #[doc(alias = "ibv_wc_read_byte_len")]
    #[inline]
    pub fn read_byte_len(&self) -> u32 {
        field!(self, |c| c.byte_len(), |e| e.byte_len())
    }

    /// `ibv_wc_read_imm_data` in host order on every provider, the same value as
    /// [`Wc::imm_data`](crate::Wc::imm_data) and as the sender passed (libibverbs returns the
    /// `__be32` network-order value; rxe's kernel stores it so, EFA's device in host order:
    /// both are converted here); meaningful when [`Self::read_wc_flags`] has `WITH_IMM`.
    #[doc(alias = "ibv_wc_read_imm_data")]
    #[inline]
    pub fn read_imm_data(&self) -> u32 {
        field!(self, |c| u32::from_be(c.ex()), |e| e.imm_data())
    }

    /// `ibv_wc_read_invalidated_rkey`; meaningful when [`Self::read_wc_flags`] has
    /// `WITH_INV`.
    #[doc(alias = "ibv_wc_read_invalidated_rkey")]
    #[inline]
    pub fn read_invalidated_rkey(&self) -> u32 {
        field!(self, |c| c.ex(), |e| e.imm_data())
    }

    /// `ibv_wc_read_qp_num`.
    #[doc(alias = "ibv_wc_read_qp_num")]
    #[inline]
    pub fn read_qp_num(&self) -> u32 {
        field!(self, |c| c.qp_num(), |e| e.qp_num())
    }

    /// `ibv_wc_read_src_qp`.
    #[doc(alias = "ibv_wc_read_src_qp")]
    #[inline]
    pub fn read_src_qp(&self) -> u32 {
        field!(self, |c| c.src_qp(), |e| e.src_qp())
    }

    /// `ibv_wc_read_wc_flags`.
    #[doc(alias = "ibv_wc_read_wc_flags")]
    #[inline]
    pub fn read_wc_flags(&self) -> WcFlags {
        field!(self, |c| wc_flags_from_kernel(c.wc_flags()), |e| {
            WcFlags::from_bits_truncate(e.wc_flags())
        })
    }

    /// `ibv_wc_read_slid`.
    #[doc(alias = "ibv_wc_read_slid")]
    #[inline]
    pub fn read_slid(&self) -> u16 {
        field!(self, |c| c.slid(), |e| e.slid())
    }

    /// `ibv_wc_read_sl`.
    #[doc(alias = "ibv_wc_read_sl")]
    #[inline]
    pub fn read_sl(&self) -> u8 {
        field!(self, |c| c.sl(), |_e| 0)
    }

    /// `ibv_wc_read_dlid_path_bits`.
    #[doc(alias = "ibv_wc_read_dlid_path_bits")]
    #[inline]
    pub fn read_dlid_path_bits(&self) -> u8 {
        field!(self, |c| c.dlid_path_bits(), |_e| 0)
    }

    /// `ibv_wc_read_pkey_index` (not in libibverbs' list but in `ibv_wc`).
    #[inline]
    pub fn read_pkey_index(&self) -> u16 {
        field!(self, |c| c.pkey_index(), |_e| 0)
    }

    /// The whole current completion as a [`Wc`].
    #[inline]
    pub fn wc(&self) -> Wc {
        match &self.inner {
            Inner::Rxe { cur, .. } => wc_from_rxe(&cur.cqe()),
            Inner::Efa { cur, .. } => cur.wc(),
        }
    }

    /// `efadv_wc_read_sgid`: the sender's GID, for a receive on an EFA CQ created with
    /// `WITH_SGID` from a sender this side has no AH for; `ENOENT` otherwise (rdma-core
    /// returns -ENOENT when the AH is known), `EOPNOTSUPP` on a non-EFA CQ.
    #[doc(alias = "efadv_wc_read_sgid")]
    pub fn read_sgid(&self) -> Result<[u8; 16]> {
        match &self.inner {
            Inner::Efa { cur, shared } => cur.read_sgid(&|| shared.label()),
            Inner::Rxe { shared, .. } => Err(Error::invalid(
                "efadv_wc_read_sgid",
                shared.label(),
                Errno::OPNOTSUPP,
                "not an EFA CQ",
            )),
        }
    }

    /// `efadv_wc_is_unsolicited`: an RDMA write with immediate that consumed no receive WR
    /// (its `wr_id` is 0); always `false` on a non-EFA CQ.
    #[doc(alias = "efadv_wc_is_unsolicited")]
    #[inline]
    pub fn is_unsolicited(&self) -> bool {
        match &self.inner {
            Inner::Efa { cur, .. } => cur.cur.is_unsolicited(),
            Inner::Rxe { .. } => false,
        }
    }
}
