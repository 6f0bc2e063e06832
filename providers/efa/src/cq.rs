//! The completion queue: `num_sub_cqs` rings of CQEs in host memory the device writes.
//!
//! The CQ buffer (mapping of `q_mmap_key`, read-only) holds the sub-CQs back to back, each
//! `sub_cq_depth` entries of `entry_size` bytes (16: `efa_io_rx_cdesc`, 32: `efa_io_rx_cdesc_ex`).
//! A CQE is new when its phase bit equals the sub-CQ's expected phase, which starts at 1 and
//! flips every time the sub-CQ's consumer index wraps. Sub-CQs are polled round-robin like
//! rdma-core (`next_poll_idx` advances past every sub-CQ tried; within one poll a sub-CQ found
//! empty is skipped for the rest of the call, see [`CompletionQueue::poll_into`]); a sub-CQ
//! the lookup says holds no CQE ([`QpLookup::sub_cqs`]: no QP uses it, as libefa's `ref_cnt`)
//! is passed over as if empty. After a poll that consumed
//! entries, the CQ-wide consumer counter is written to the CQ doorbell when the kernel gave one.
//!
//! Everything read from a CQE is distrusted: the QP number is looked up through the core's
//! [`QpLookup`], the req_id through the QP's [`WridPool`](crate::wrid::WridPool); a CQE that fails either is consumed
//! and reported as an error, never used as an index.
//!
//! Owns: the sub-CQ consumer indices and phases, the CQ doorbell. Must not: write the CQ ring,
//! form references to it, or read a CQE before its phase says it is complete.
#![allow(unsafe_code)]

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use zerocopy::transmute_ref;

use crate::defs::*;
use crate::error::{EfaError, QueueKind, ReqIdProblem};
use crate::mmio::{self, Doorbell};
use crate::status::{
    send_wc_opcode, send_wc_opcode_of_word0, wc_status_from_efa, wc_status_of_word0, IBV_WC_RECV,
    IBV_WC_RECV_RDMA_WITH_IMM,
};
use crate::wrid::WridCompleter;
use uverbs_wr::{Wc, WcFlags, WcOpcode, WcStatus};

/// Bit 24 of a CQE's first word (little-endian): the phase.
const PHASE_BIT: u32 = (EFA_IO_CDESC_COMMON_PHASE_MASK as u32) << 24;

/// The queue type's bits of a CQE's first word, and their value for each queue.
const Q_TYPE_BITS: u32 = (EFA_IO_CDESC_COMMON_Q_TYPE_MASK as u32) << 24;
const SEND_QUEUE_BITS: u32 =
    (EFA_IO_SEND_QUEUE as u32) << (24 + EFA_IO_CDESC_COMMON_Q_TYPE_MASK.trailing_zeros());
const RECV_QUEUE_BITS: u32 =
    (EFA_IO_RECV_QUEUE as u32) << (24 + EFA_IO_CDESC_COMMON_Q_TYPE_MASK.trailing_zeros());
/// The unsolicited flag's bit of a CQE's first word.
const UNSOLICITED_BIT: u32 = (EFA_IO_CDESC_COMMON_UNSOLICITED_MASK as u32) << 24;

/// CQE size without the SGID/length_hi extension (`sizeof(struct efa_io_rx_cdesc)`).
pub const EFA_CQE_SIZE: u32 = 16;
/// CQE size with the extension (`sizeof(struct efa_io_rx_cdesc_ex)`); rdma-core always uses it.
pub const EFA_CQE_SIZE_EX: u32 = 32;

/// Everything the CQ needs from the create-CQ exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqConfig {
    /// CQ number (`cq_idx`), for errors.
    pub cqn: u32,
    /// `sub_cqs_per_cq` from the ucontext response (what was sent as `num_sub_cqs`).
    pub num_sub_cqs: u16,
    /// Entries per sub-CQ: the `cqe` count the kernel returned (a power of two).
    pub sub_cq_depth: u32,
    /// `cq_entry_size` sent in the request: 16 or 32.
    pub entry_size: u32,
    /// The CQ was created with `EFA_CREATE_CQ_WITH_SGID` (needs 32-byte entries).
    pub with_sgid: bool,
}

impl CqConfig {
    /// Bytes of CQ buffer the configuration covers.
    pub fn buffer_size(&self) -> usize {
        self.num_sub_cqs as usize * self.sub_cq_depth as usize * self.entry_size as usize
    }
}

/// One work completion: the [`Wc`] (`struct ibv_wc`) with the `efadv_wc_*` extras.
#[doc(alias = "ibv_wc")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// The standard fields. `wr_id` is 0 for an unsolicited receive; `vendor_err` is the raw
    /// `efa_io_comp_status`; `byte_len` is 0 for a send completion; `slid` is the sender's
    /// AH number (0xffff: unknown sender).
    pub wc: Wc,
    /// The sender's GID (`efadv_wc_read_sgid`): present on a receive of a CQ created with SGID
    /// when the sender has no AH here.
    pub sgid: Option<[u8; 16]>,
    /// `efadv_wc_is_unsolicited`: an RDMA write with immediate that consumed no receive.
    pub is_unsolicited: bool,
}

/// The wr_id pools of one QP, as found by a [`QpLookup`].
#[derive(Debug)]
pub struct QpPools<'a> {
    /// Send queue pool (None if the QP's sends do not complete here).
    pub send: Option<&'a mut WridCompleter>,
    /// Receive queue pool (None if the QP's receives do not complete here).
    pub recv: Option<&'a mut WridCompleter>,
}

/// How the CQ finds the QP a completion names. Supplied by the core at poll time (static
/// dispatch, no allocation); `qp_num` is the 16-bit number from the CQE.
pub trait QpLookup {
    /// The pools of QP `qp_num`, or `None` if no such QP is attached (destroyed or unknown).
    fn find(&mut self, qp_num: u16) -> Option<QpPools<'_>>;

    /// [`find`](Self::find) where it is cheap (a lookup that keeps the QP found last: that
    /// QP), `None` where it is not; a `None` here says nothing about the QP, the caller then
    /// asks `find`. For [`PollCursor::try_take`], which leaves the rest to its caller's
    /// slow path.
    #[inline(always)]
    fn find_cached(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        self.find(qp_num)
    }

    /// The sub-CQs that may hold CQEs (bit `i`: sub-CQ `i`); a poll visits no other (as
    /// libefa skips a sub-CQ whose `ref_cnt` is 0). Asked once per poll call, before the
    /// first visit. Default: every sub-CQ.
    #[inline(always)]
    fn sub_cqs(&mut self) -> u64 {
        u64::MAX
    }

    /// A poll found sub-CQ `idx` (one of [`sub_cqs`](Self::sub_cqs)) empty. Default: nothing.
    #[inline(always)]
    fn sub_cq_empty(&mut self, idx: u16) {
        let _ = idx;
    }
}

/// One entry of a slice-based [`QpLookup`].
#[derive(Debug)]
pub struct QpEntry<'a> {
    /// The QP number.
    pub qp_num: u32,
    /// Its send queue pool.
    pub send: Option<&'a mut WridCompleter>,
    /// Its receive queue pool.
    pub recv: Option<&'a mut WridCompleter>,
}

impl QpLookup for [QpEntry<'_>] {
    fn find(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        let e = self.iter_mut().find(|e| e.qp_num == u32::from(qp_num))?;
        Some(QpPools {
            send: e.send.as_deref_mut(),
            recv: e.recv.as_deref_mut(),
        })
    }
}

/// `poll` stopped at a CQE it refused; `polled` good completions were written before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollError {
    /// Completions written to the output before the bad CQE.
    pub polled: usize,
    /// What was wrong with the CQE (which has been consumed).
    pub error: EfaError,
}

impl core::fmt::Display for PollError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} (after {} good completions)", self.error, self.polled)
    }
}

impl std::error::Error for PollError {}

#[derive(Clone, Copy, Debug)]
struct SubCq {
    /// Byte offset of the sub-CQ's first entry in the buffer.
    base: usize,
    /// Entries consumed (mod 2^32); the index is `consumed & mask`.
    consumed: u32,
    /// Phase a new entry carries at the current index, in place in word 0: [`PHASE_BIT`]
    /// or 0 (a shorter test than a flag: no shift of the loaded word).
    phase: u32,
}

/// A completion queue.
pub struct CompletionQueue {
    cfg: CqConfig,
    buf: NonNull<u8>,
    subs: Box<[SubCq]>,
    db: Option<Doorbell>,
    mask: u32,
    /// log2 of `entry_size` (16 or 32).
    entry_shift: u32,
    next_poll_idx: u16,
    /// One bit per sub-CQ (`num_sub_cqs` low bits set): "every sub-CQ found empty".
    all_subs: u64,
    /// CQ-wide consumer counter (mod 2^16), what the doorbell carries.
    cc: u16,
    /// Completion events acknowledged (mod 4 in the doorbell).
    cmd_sn: u8,
    /// The doorbell's bits but the consumer index and arm: `cmd_sn`'s field, kept
    /// ready by `note_event` (a doorbell write is then an OR).
    db_sn_bits: u32,
}

// SAFETY: the CQ buffer and doorbell are a process-wide mapping `new`'s caller keeps alive for
// our lifetime; we only read the buffer (atomics/volatile) and write the doorbell through
// `&mut self`.
unsafe impl Send for CompletionQueue {}

impl core::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("cfg", &self.cfg)
            .field("cc", &self.cc)
            .field("next_poll_idx", &self.next_poll_idx)
            .finish()
    }
}

impl CompletionQueue {
    /// Sets up the CQ over its buffer and optional doorbell (present when the response has
    /// `EFA_CREATE_CQ_RESP_DB_OFF`: mapping of `db_mmap_key` + `db_off`).
    ///
    /// # Safety
    /// For the whole life of the returned queue: `buf` must be valid for reads of `buf_len`
    /// bytes (the device may write it concurrently; we never write it and never form
    /// references to it), and `db`, if given, valid for volatile 32-bit writes; both usable
    /// from any thread.
    pub unsafe fn new(
        cfg: CqConfig,
        buf: NonNull<u8>,
        buf_len: usize,
        db: Option<NonNull<u32>>,
    ) -> Result<Self, EfaError> {
        let bad = |reason| Err(EfaError::BadConfig { ring: "cq", reason });
        if cfg.num_sub_cqs == 0 || cfg.num_sub_cqs > 64 {
            // (rdma-core's devices report a handful; poll keeps a bit per sub-CQ)
            return bad("num_sub_cqs must be 1..=64");
        }
        if !cfg.sub_cq_depth.is_power_of_two() {
            return bad("sub_cq_depth must be a power of two");
        }
        if cfg.entry_size != EFA_CQE_SIZE && cfg.entry_size != EFA_CQE_SIZE_EX {
            return bad("entry_size must be 16 or 32");
        }
        if cfg.with_sgid && cfg.entry_size != EFA_CQE_SIZE_EX {
            return bad("SGID needs 32-byte entries");
        }
        if cfg.buffer_size() > buf_len {
            return bad("CQ mapping smaller than num_sub_cqs * depth * entry_size");
        }
        if buf.as_ptr() as usize % 4 != 0 {
            return bad("CQ buffer not 4-byte aligned");
        }
        if let Some(d) = db {
            if d.as_ptr() as usize % 4 != 0 {
                return bad("CQ doorbell not 4-byte aligned");
            }
        }
        Ok(CompletionQueue {
            cfg,
            buf,
            subs: (0..cfg.num_sub_cqs as usize)
                .map(|i| SubCq {
                    base: i * cfg.sub_cq_depth as usize * cfg.entry_size as usize,
                    consumed: 0,
                    phase: PHASE_BIT,
                })
                .collect(),
            entry_shift: cfg.entry_size.trailing_zeros(),
            // SAFETY: forwarded from our caller's contract on `db` (checked aligned above).
            db: db.map(|d| unsafe { Doorbell::new(d) }),
            mask: cfg.sub_cq_depth - 1,
            next_poll_idx: 0,
            // `num_sub_cqs` is 1..=64 (checked above).
            all_subs: u64::MAX >> (64 - u32::from(cfg.num_sub_cqs)),
            cc: 0,
            cmd_sn: 0,
            db_sn_bits: cq_doorbell_value(0, 0, false),
        })
    }

    /// The configuration this queue was built with.
    pub fn config(&self) -> &CqConfig {
        &self.cfg
    }

    /// CQ-wide consumer counter (mod 2^16).
    pub fn consumer_counter(&self) -> u16 {
        self.cc
    }

    /// `ibv_poll_cq`: fills `wcs` with up to `wcs.len()` completions, round-robin over the
    /// sub-CQs. Returns how many were written. A CQE naming an unknown QP or a req_id that is
    /// not outstanding is consumed and reported as a [`PollError`] carrying the count written
    /// before it. The CQ doorbell is updated whenever entries were consumed.
    #[doc(alias = "ibv_poll_cq")]
    pub fn poll<L: QpLookup + ?Sized>(
        &mut self,
        wcs: &mut [Completion],
        lookup: &mut L,
    ) -> Result<usize, PollError> {
        self.poll_into(wcs, lookup, |wc| *wc)
    }

    /// [`poll`](Self::poll) into a slice of the caller's own completion type: each completion
    /// is `conv` of the provider's, written to the next slot of `out` (at most `out.len()`),
    /// so once `conv` is inlined the fields it never reads are never computed. Returns how
    /// many slots were written, from the first; a [`PollError`]'s `polled` counts them too.
    ///
    /// Order is rdma-core's round robin: each CQE is taken from the sub-CQ after the one the
    /// previous CQE came from, skipping empty ones. A sub-CQ found empty stays empty for the
    /// rest of this call (entries the device writes meanwhile are left for the next poll, as
    /// if they had arrived just after it); once every other sub-CQ is empty, the CQEs of the
    /// last one are taken as a run, which is the order the round robin would give them in.
    #[inline]
    pub fn poll_into<L: QpLookup + ?Sized, T, C: FnMut(&Completion) -> T>(
        &mut self,
        out: &mut [T],
        lookup: &mut L,
        mut conv: C,
    ) -> Result<usize, PollError> {
        let subs = self.cfg.num_sub_cqs;
        let max = out.len();
        // `new` refused more than 64 sub-CQs, so a bit per sub-CQ fits.
        let all = self.all_subs;
        // A sub-CQ the lookup says holds no CQE is never visited: as if found empty.
        let mut empty = all & !lookup.sub_cqs();
        let mut n = 0;
        let mut consumed = false;
        let mut error = None;
        while n < max && empty != all {
            // The next sub-CQ not found empty in round-robin order from `next_poll_idx`: the
            // lowest such bit at or above it, else the lowest. `next_poll_idx` moves past it,
            // as stepping through the empty ones before it would have moved it.
            let left = all & !empty;
            // `next_poll_idx` < `num_sub_cqs` <= 64.
            let on = left & (u64::MAX << (self.next_poll_idx & 63));
            let idx = (if on != 0 { on } else { left }).trailing_zeros() as u16;
            self.next_poll_idx = if idx + 1 >= subs { 0 } else { idx + 1 };
            let bit = 1u64 << (idx & 63);
            let last = empty | bit == all;
            // While other sub-CQs may still hold CQEs, a look at the next slot's phase
            // before the run: an empty sub-CQ costs a load and a compare, not the run's
            // set-up and tear-down (with 2 sub-CQs and all CQEs in one, every call passes
            // the empty one). The last candidate goes straight to its run.
            if !last && !self.has_cqe(idx) {
                empty |= bit;
                lookup.sub_cq_empty(idx);
                continue;
            }
            // The slots this run may fill: the rest of `out`, or one while other sub-CQs
            // may hold CQEs (`n < max`, so neither is empty).
            let rest = out.get_mut(n..).unwrap_or_default();
            let slots = if last {
                rest
            } else {
                rest.get_mut(..1).unwrap_or_default()
            };
            let r = self.run(idx, slots, lookup, &mut conv);
            n += r.taken - usize::from(r.error.is_some());
            consumed |= r.taken != 0;
            if r.emptied {
                empty |= bit;
                lookup.sub_cq_empty(idx);
            }
            if r.error.is_some() {
                error = r.error;
                break;
            }
        }
        if consumed {
            self.update_doorbell(false);
        }
        match error {
            None => Ok(n),
            Some(error) => Err(PollError { polled: n, error }),
        }
    }

    /// [`poll_into`](Self::poll_into) of one slot: the round robin from `next_poll_idx` to
    /// the first sub-CQ holding a CQE, that CQE, the doorbell. The same order, checks and
    /// results, without the general walk's per-call set-up (the empty-set bookkeeping, the
    /// run's state), which is most of a one-CQE call.
    #[inline]
    pub fn poll_one_each<L: QpLookup + ?Sized, F: FnMut(&Completion)>(
        &mut self,
        lookup: &mut L,
        mut put: F,
    ) -> Result<usize, PollError> {
        // The sub-CQs to look at, in round-robin order from `next_poll_idx`: the lowest bit
        // at or above it, else the lowest. A sub-CQ the lookup says holds no CQE is passed
        // over as if found empty (the round robin moves past it either way).
        let mut left = self.all_subs & lookup.sub_cqs();
        // `next_poll_idx` < `num_sub_cqs` <= 64.
        let from = u64::MAX << (self.next_poll_idx & 63);
        while left != 0 {
            let on = left & from;
            let idx = (if on != 0 { on } else { left }).trailing_zeros() as u16;
            if let Some((entry, w0)) = self.take_entry(idx) {
                self.next_poll_idx = if idx + 1 >= self.cfg.num_sub_cqs {
                    0
                } else {
                    idx + 1
                };
                let r = process(&self.cfg, idx, w0, entry, lookup, &mut put);
                self.update_doorbell(false);
                return match r {
                    Ok(()) => Ok(1),
                    Err(error) => Err(PollError { polled: 0, error }),
                };
            }
            lookup.sub_cq_empty(idx);
            left &= !(1u64 << idx);
        }
        // Every sub-CQ was empty: the round robin went all the way round, back to where it
        // started (`next_poll_idx` unchanged).
        Ok(0)
    }

    /// [`poll_one_each`](Self::poll_one_each)'s common case, small enough to inline in the
    /// caller: the same round robin to the first sub-CQ holding a CQE, which it consumes;
    /// if that is a send completion of the QP the lookup found last (`find_cached`) and its
    /// req_id passes every check of `poll` (generation, range, posted; for 64-bit ids the
    /// outstanding count), it completes it, hands it to `put` and writes the doorbell
    /// ([`OneStep::Took`]). Any other CQE is left, consumed but unprocessed, to
    /// [`poll_one_finish`](Self::poll_one_finish) ([`OneStep::Slow`]), which must be called
    /// with the same lookup (the same table poll) before it is dropped: none of the checks
    /// tried changes anything when it fails, so the finish gives what `poll_one_each` alone
    /// gives, with the same round-robin position, consumer counter and doorbell.
    #[inline(always)]
    pub fn poll_one_fast<L: QpLookup + ?Sized, F: FnOnce(&Completion)>(
        &mut self,
        lookup: &mut L,
        put: F,
    ) -> OneStep {
        // As in `poll_one_each`. The first turn's index is computed in line, not from a
        // round-robin mask kept across the loop: the common case (the first sub-CQ visited
        // holds the CQE) then keeps no set-up for later turns.
        let mut left = self.all_subs & lookup.sub_cqs();
        if left == 0 {
            return OneStep::Empty;
        }
        let mut idx = next_sub(left, self.next_poll_idx);
        loop {
            // `idx` is a set bit of `left` (`next_sub`, `left` not 0), a subset of
            // `all_subs`, whose set bits are exactly 0..num_sub_cqs (`new`), so it indexes
            // `subs`.
            // SAFETY: `idx` < `num_sub_cqs` (above).
            let taken = unsafe { self.take_entry_unchecked(idx) };
            if let Some((entry, w0)) = taken {
                self.next_poll_idx = if idx + 1 >= self.cfg.num_sub_cqs {
                    0
                } else {
                    idx + 1
                };
                let Some(wc) = take_cached_send(w0, entry, lookup) else {
                    return OneStep::Slow(Taken::new(idx, w0));
                };
                put(&wc);
                self.update_doorbell(false);
                return OneStep::Took;
            }
            lookup.sub_cq_empty(idx);
            left &= !(1u64 << idx);
            if left == 0 {
                return OneStep::Empty;
            }
            idx = next_sub(left, self.next_poll_idx);
        }
    }

    /// Finishes a [`poll_one_fast`](Self::poll_one_fast) that returned
    /// [`OneStep::Slow`]: processes the CQE it took (queue type, QP lookup with a probe,
    /// req_id checks; for a receive the whole completion) and writes the doorbell, as
    /// `poll_one_each` does after its `take_entry`.
    #[cold]
    #[inline(never)]
    pub fn poll_one_finish<L: QpLookup + ?Sized, F: FnMut(&Completion)>(
        &mut self,
        taken: Taken,
        lookup: &mut L,
        mut put: F,
    ) -> Result<usize, PollError> {
        let (idx, w0) = taken.parts();
        // The entry `poll_one_fast` took: the one before sub-CQ `idx`'s consumer index
        // (found again rather than carried, so that no `Taken` holds a pointer: one of
        // another queue, a misuse, then reads nothing outside this queue's buffer).
        let Some(sub) = self.subs.get(usize::from(idx)) else {
            return Ok(0);
        };
        // In bounds and aligned as in `take_entry`.
        let entry = self
            .buf
            .as_ptr()
            .wrapping_add(
                sub.base
                    + (((sub.consumed.wrapping_sub(1) & self.mask) as usize) << self.entry_shift),
            )
            .cast::<u32>();
        let r = process(&self.cfg, idx, w0, entry, lookup, &mut put);
        self.update_doorbell(false);
        match r {
            Ok(()) => Ok(1),
            Err(error) => Err(PollError { polled: 0, error }),
        }
    }

    /// Whether sub-CQ `idx`'s next slot holds a CQE (its phase is the expected one). Only
    /// a hint: [`run`](Self::run) loads the word again, with Acquire, before reading more.
    #[inline(always)]
    fn has_cqe(&self, idx: u16) -> bool {
        let Some(sub) = self.subs.get(usize::from(idx)) else {
            return false;
        };
        // In bounds and aligned as in `run`.
        let entry = self
            .buf
            .as_ptr()
            .wrapping_add(sub.base)
            .wrapping_add(((sub.consumed & self.mask) as usize) << self.entry_shift)
            .cast::<u32>();
        // SAFETY: `entry` is an aligned word inside the live buffer (`run`, `new`); the
        // device writes it concurrently, hence an atomic load through the raw pointer.
        let w0 = u32::from_le(unsafe { AtomicU32::from_ptr(entry) }.load(Ordering::Relaxed));
        w0 & PHASE_BIT == sub.phase
    }

    /// Takes CQEs in a row from sub-CQ `idx` (`< num_sub_cqs`) into `out`, one slot each,
    /// at most `out.len()`; stops at an empty slot (phase not yet the expected one) or at the
    /// first bad CQE (consumed and returned; its slot is left as it was).
    #[inline(never)]
    fn run<L: QpLookup + ?Sized, T, C: FnMut(&Completion) -> T>(
        &mut self,
        idx: u16,
        out: &mut [T],
        lookup: &mut L,
        conv: &mut C,
    ) -> Run {
        let mut r = Run {
            taken: 0,
            emptied: false,
            error: None,
        };
        let Some(sub) = self.subs.get_mut(usize::from(idx)) else {
            r.emptied = true;
            return r;
        };
        let shift = self.entry_shift;
        let phase_bit = u32::from(EFA_IO_CDESC_COMMON_PHASE_MASK) << 24;
        // The entry is stepped as a pointer: `entry` is always `base + k * step` for a
        // k < depth (it starts at the consumer index's slot and goes back to `base` on
        // reaching `end`, one past the last slot), so it is in bounds and aligned: `base` is
        // sub-CQ `idx` (< num_sub_cqs), and `new` checked that the buffer holds every sub-CQ
        // and is 4-byte aligned.
        let base = self.buf.as_ptr().wrapping_add(sub.base);
        let step = 1usize << shift;
        let end = base.wrapping_add((self.mask as usize + 1) << shift);
        let mut entry = base.wrapping_add(((sub.consumed & self.mask) as usize) << shift);
        // The phase bit a new entry carries, in place in word 0.
        let mut expect = sub.phase;
        // The output slots bound the run: no count of its own, no index into `out`.
        let len = out.len();
        let mut slots = out.iter_mut();
        // `while let`, not `for .. in slots.by_ref()`: the same loop, but LLVM allocated the
        // `for` form's registers worse (poll16 84.5 -> 88.5 per CQE).
        #[allow(clippy::while_let_on_iterator)]
        while let Some(slot) = slots.next() {
            // The device writes this word concurrently: an atomic load through a raw
            // pointer, never a reference to plain memory.
            // SAFETY: `entry` is an aligned word inside the live buffer (above).
            let w0 = u32::from_le(
                unsafe { AtomicU32::from_ptr(entry.cast::<u32>()) }.load(Ordering::Acquire),
            );
            // Word 0 is req_id (bytes 0-1), status (2), flags (3), little-endian: the phase
            // is bit 24.
            if w0 & phase_bit != expect {
                r.emptied = true;
                break;
            }
            // No other CQE field is read before the phase above said the entry is complete:
            // rdma-core's `cq_next_sub_cqe_get` issues `udma_from_device_barrier()` here
            // (`dmb oshld` on aarch64, `lfence` on x86_64); ours is that after an Acquire load
            // (`ldar` / `mov`), so at least as strong (providers/efa/src/mmio.rs).
            mmio::dma_rmb();
            let put = &mut |wc: &Completion| *slot = conv(wc);
            let done = process(&self.cfg, idx, w0, entry.cast::<u32>(), lookup, put);
            entry = entry.wrapping_add(step);
            if let Err(e) = done {
                // Consumed too: the phase flips if it was the sub-CQ's last slot.
                if entry == end {
                    expect ^= phase_bit;
                }
                r.error = Some(e);
                break;
            }
            if entry == end {
                entry = base;
                expect ^= phase_bit;
                // Stored here too (the run's end stores it again): a store keeps the wrap a
                // branch taken once per `depth` CQEs instead of two selects on every CQE.
                sub.phase = expect;
            }
        }
        // One CQE consumed per slot visited (the last maybe a bad one, whose slot is left),
        // but for the one where the run found the sub-CQ empty.
        r.taken = len - slots.len() - usize::from(r.emptied);
        sub.consumed = sub.consumed.wrapping_add(r.taken as u32);
        sub.phase = expect;
        self.cc = self.cc.wrapping_add(r.taken as u16);
        r
    }

    /// `ibv_req_notify_cq`: arms the CQ for the next completion event. Solicited-only is not
    /// supported by EFA; a CQ without a doorbell cannot be armed.
    #[doc(alias = "ibv_req_notify_cq")]
    pub fn req_notify(&mut self, solicited_only: bool) -> Result<(), EfaError> {
        if solicited_only {
            return Err(EfaError::SolicitedOnlyNotSupported { cqn: self.cfg.cqn });
        }
        if self.db.is_none() {
            return Err(EfaError::NoCqDoorbell { cqn: self.cfg.cqn });
        }
        self.update_doorbell(true);
        Ok(())
    }

    /// Records that a completion event was received for this CQ (`efa_cq_event`, called from
    /// `ibv_get_cq_event`): the next doorbell write carries the new command sequence number.
    pub fn note_event(&mut self) {
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        self.db_sn_bits = cq_doorbell_value(0, self.cmd_sn, false);
    }

    #[inline]
    fn update_doorbell(&mut self, arm: bool) {
        // `cq_doorbell_value(self.cc, self.cmd_sn, arm)`: the consumer index is the low 16
        // bits, `db_sn_bits` holds the command sequence number's field.
        let arm = if arm { EFA_IO_REGS_CQ_DB_ARM_MASK } else { 0 };
        let v = u32::from(self.cc) | self.db_sn_bits | arm;
        debug_assert_eq!(v, cq_doorbell_value(self.cc, self.cmd_sn, arm != 0));
        if let Some(db) = self.db.as_mut() {
            // The doorbell only reports how far we consumed; no host writes need ordering
            // before it (we wrote nothing the device reads), so no barrier: rdma-core's
            // `efa_update_cq_doorbell` is a bare `mmio_write32` too (`str` on aarch64). Ours is
            // an `stlr`, which also keeps the CQE loads above before it.
            db.ring(v);
        }
    }
}

/// The sub-CQ a round robin at `next_poll_idx` visits next among `left` (not 0): the first
/// set bit at or above `next_poll_idx`, else the lowest.
#[inline(always)]
fn next_sub(left: u64, next_poll_idx: u16) -> u16 {
    let on = left & (u64::MAX << (next_poll_idx & 63));
    (if on != 0 { on } else { left }).trailing_zeros() as u16
}

/// What [`CompletionQueue::poll_one_fast`] did.
#[derive(Debug)]
#[must_use = "a `Slow` step holds a consumed CQE: finish it with `poll_one_finish`"]
pub enum OneStep {
    /// No sub-CQ holds a CQE (`poll_one_each`'s `Ok(0)`).
    Empty,
    /// One completion handed to `put`, the doorbell written (`Ok(1)`).
    Took,
    /// A CQE consumed and left to [`CompletionQueue::poll_one_finish`].
    Slow(Taken),
}

/// A CQE [`CompletionQueue::poll_one_fast`] consumed but did not process: its sub-CQ and
/// its first word. Only [`CompletionQueue::poll_one_finish`] takes it.
#[derive(Debug)]
pub struct Taken {
    /// The sub-CQ (bits 47:32) and the CQE's word 0 (bits 31:0), in one word: a caller that
    /// hands a `Taken` on passes one register.
    packed: u64,
}

impl Taken {
    #[inline(always)]
    fn new(idx: u16, w0: u32) -> Self {
        Taken {
            packed: u64::from(idx) << 32 | u64::from(w0),
        }
    }

    #[inline(always)]
    fn parts(&self) -> (u16, u32) {
        ((self.packed >> 32) as u16, self.packed as u32)
    }
}

/// The completion of a consumed send CQE (first word `w0`, the rest at `entry`) of the QP
/// the lookup found last (no probe), its req_id completed with every check of [`process`]
/// (generation, range, posted; for 64-bit ids the outstanding count), or `None` when the CQE
/// is anything else or a check fails. `None` changes nothing (a failed check completes
/// nothing), so [`process`] on the same CQE then gives what it gives alone.
#[inline(always)]
fn take_cached_send<L: QpLookup + ?Sized>(
    w0: u32,
    entry: *const u32,
    lookup: &mut L,
) -> Option<Completion> {
    let flags = (w0 >> 24) as u8;
    if field_get8(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, flags) != EFA_IO_SEND_QUEUE {
        return None;
    }
    // SAFETY: word 1 of a consumed entry (entries are >= 16 bytes).
    let w1 = unsafe { read_word(entry, 1) };
    let qpn = w1 as u16;
    let pool = lookup.find_cached(qpn)?.send?;
    let wr_id = if pool.is_64bit() {
        // Word 2 is read before the checks (the entry is dead after it): fewer registers
        // live across them.
        // SAFETY: word 2 of a consumed entry of >= 16 bytes.
        let hi = req_id_hi(w1, unsafe { read_word(entry, 2) });
        pool.complete_send(w0 as u16, || hi)
    } else {
        pool.complete(w0 as u16)
    }
    .ok()?;
    let status = (w0 >> 16) as u8;
    Some(Completion {
        wc: Wc {
            wr_id,
            status: WcStatus(wc_status_from_efa(status)),
            vendor_err: u32::from(status),
            opcode: WcOpcode(send_wc_opcode(field_get8(
                EFA_IO_CDESC_COMMON_OP_TYPE_MASK,
                flags,
            ))),
            qp_num: u32::from(qpn),
            ..Wc::default()
        },
        sgid: None,
        is_unsolicited: false,
    })
}

/// What [`CompletionQueue::run`] did.
struct Run {
    /// CQEs consumed: handed to `put`, and the bad one if `error`.
    taken: usize,
    /// Stopped at an empty slot.
    emptied: bool,
    /// The bad CQE it stopped at.
    error: Option<EfaError>,
}

/// Turns a consumed CQE (first word `w0`, the rest at `entry`) into a completion, checking
/// its queue type, QP and req_id, and hands it to `put`. Each queue type calls `put` on its
/// own, so once inlined each fills only what its kind of completion has. A CQE that fails a
/// check becomes its error in [`cqe_error`], out of line, from the words already read: the
/// loop keeps no error's fields live.
#[inline(always)]
fn process<L: QpLookup + ?Sized, F: FnMut(&Completion)>(
    cfg: &CqConfig,
    sub_cq: u16,
    w0: u32,
    entry: *const u32,
    lookup: &mut L,
    put: &mut F,
) -> Result<(), EfaError> {
    let req_id = w0 as u16;
    let status = (w0 >> 16) as u8;
    let flags = (w0 >> 24) as u8;
    // SAFETY: word 1 of an entry `run` found complete (entries are >= 16 bytes).
    let w1 = unsafe { read_word(entry, 1) };
    let qpn = w1 as u16;
    let op_type = field_get8(EFA_IO_CDESC_COMMON_OP_TYPE_MASK, flags);
    let fail = |why| Err(cqe_error(cfg, sub_cq, w0, w1, why));
    // The queue type in place in word 0 (flags bits 2:1 are word bits 26:25): no shift.
    match w0 & Q_TYPE_IN_W0 {
        SEND_Q_IN_W0 => {
            let Some(QpPools {
                send: Some(pool), ..
            }) = lookup.find(qpn)
            else {
                return fail(Fail::UnknownQp);
            };
            // With 64-bit request ids, bits 63:16 come from req_id_ex (words 1 and 2).
            // SAFETY: word 2 of a complete entry of >= 16 bytes.
            let hi = || req_id_hi(w1, unsafe { read_word(entry, 2) });
            let wr_id = match pool.complete_send(req_id, hi) {
                Ok(w) => w,
                Err(problem) => return fail(Fail::BadReqId(problem)),
            };
            put(&Completion {
                wc: Wc {
                    wr_id,
                    status: WcStatus(wc_status_of_word0(w0)),
                    vendor_err: u32::from(status),
                    opcode: WcOpcode(send_wc_opcode_of_word0(w0)),
                    qp_num: u32::from(qpn),
                    ..Wc::default()
                },
                sgid: None,
                is_unsolicited: false,
            });
        }
        RECV_Q_IN_W0 => {
            let Some(pools) = lookup.find(qpn) else {
                return fail(Fail::UnknownQp);
            };
            let mut c = Completion {
                wc: Wc {
                    status: WcStatus(wc_status_from_efa(status)),
                    vendor_err: u32::from(status),
                    qp_num: u32::from(qpn),
                    ..Wc::default()
                },
                sgid: None,
                is_unsolicited: flags & EFA_IO_CDESC_COMMON_UNSOLICITED_MASK != 0,
            };
            let wc = &mut c.wc;
            if !c.is_unsolicited {
                let Some(pool) = pools.recv else {
                    return fail(Fail::UnknownQp);
                };
                wc.wr_id = match pool.complete(req_id) {
                    Ok(w) => w,
                    Err(problem) => return fail(Fail::BadReqId(problem)),
                };
            }
            // Word 1: qp_num, length; word 2: ah, src_qp_num; word 3: imm.
            // SAFETY: words 2 and 3 of a complete entry of >= 16 bytes.
            let (w2, w3) = unsafe { (read_word(entry, 2), read_word(entry, 3)) };
            wc.byte_len = w1 >> 16;
            let ah = w2 as u16;
            if op_type == EFA_IO_RDMA_WRITE {
                if cfg.entry_size == EFA_CQE_SIZE_EX {
                    // SAFETY: word 4 (`rdma_write.length_hi`) of a 32-byte entry.
                    let hi = unsafe { read_word(entry, 4) } as u16;
                    wc.byte_len |= u32::from(hi) << 16;
                }
                wc.opcode = WcOpcode(IBV_WC_RECV_RDMA_WITH_IMM);
            } else {
                wc.opcode = WcOpcode(IBV_WC_RECV);
            }
            wc.src_qp = w2 >> 16;
            wc.slid = ah;
            if flags & EFA_IO_CDESC_COMMON_HAS_IMM_MASK != 0 {
                wc.imm_data = w3;
                wc.wc_flags = WcFlags::WITH_IMM;
            }
            if cfg.with_sgid && ah == EFA_IO_RX_CDESC_AH_UNKNOWN && op_type != EFA_IO_RDMA_WRITE {
                // `with_sgid` needs 32-byte entries (`new`): words 4..8 are `src_addr`.
                let mut gid = [0u8; 16];
                for (i, c) in gid.chunks_exact_mut(4).enumerate() {
                    // SAFETY: word 4 + i < 8 of a complete 32-byte entry.
                    let w = unsafe { read_word(entry, 4 + i) };
                    c.copy_from_slice(&w.to_le_bytes());
                }
                c.sgid = Some(gid);
            }
            put(&c);
        }
        _ => return fail(Fail::BadCqe),
    }
    Ok(())
}

/// The queue-type field of a CQE's flags, in place in its word 0 (flags are bits 31:24).
const Q_TYPE_IN_W0: u32 = (EFA_IO_CDESC_COMMON_Q_TYPE_MASK as u32) << 24;
/// `EFA_IO_SEND_QUEUE` in that field.
const SEND_Q_IN_W0: u32 =
    (EFA_IO_SEND_QUEUE as u32) << (24 + EFA_IO_CDESC_COMMON_Q_TYPE_MASK.trailing_zeros());
/// `EFA_IO_RECV_QUEUE` in that field.
const RECV_Q_IN_W0: u32 =
    (EFA_IO_RECV_QUEUE as u32) << (24 + EFA_IO_CDESC_COMMON_Q_TYPE_MASK.trailing_zeros());

/// Which check a CQE failed in [`process`].
#[derive(Clone, Copy)]
enum Fail {
    /// The queue type is neither send nor receive.
    BadCqe,
    /// No such QP, or it has no pool for the CQE's queue here.
    UnknownQp,
    /// The req_id failed the pool's checks.
    BadReqId(ReqIdProblem),
}

/// The error of a CQE (words 0 and 1: `w0`, `w1`) of sub-CQ `sub_cq` that failed `why`:
/// everything it names is in those words and the configuration.
#[cold]
#[inline(never)]
fn cqe_error(cfg: &CqConfig, sub_cq: u16, w0: u32, w1: u32, why: Fail) -> EfaError {
    let cqn = cfg.cqn;
    let flags = (w0 >> 24) as u8;
    let qpn = u32::from(w1 as u16);
    let queue = match field_get8(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, flags) {
        EFA_IO_SEND_QUEUE => QueueKind::Send,
        EFA_IO_RECV_QUEUE => QueueKind::Recv,
        _ => return EfaError::BadCqe { cqn, sub_cq, flags },
    };
    match why {
        Fail::BadCqe => EfaError::BadCqe { cqn, sub_cq, flags },
        Fail::UnknownQp => EfaError::UnknownQp { cqn, qpn, queue },
        Fail::BadReqId(problem) => EfaError::BadReqId {
            cqn,
            qpn,
            queue,
            req_id: w0 as u16,
            problem,
        },
    }
}

/// An open extended poll of a [`CompletionQueue`] (`ibv_start_poll`, `ibv_next_poll`,
/// `ibv_end_poll` and the `ibv_wc_read_*`/`efadv_wc_*` readers of rdma-core's EFA `cq_ex`),
/// positioned on one completion once [`advance`](Self::advance) returned `true`.
///
/// Positioning does only what must happen per CQE: the phase check, the read barrier, the
/// sub-CQ's consumer index and phase, the QP lookup and the req_id completion that yields
/// `wr_id` (every check of [`CompletionQueue::poll`]: an unknown QP, a bad queue type or a bad
/// req_id is an error and the CQE is consumed). Everything else is read from the ring slot
/// when a reader asks for it (volatile reads; no reference into the ring). The slot stays
/// readable while the cursor lives: the consumer counter goes to the CQ doorbell only when
/// the cursor is dropped (`ibv_end_poll`), once, and only if a CQE was consumed.
///
/// Order is [`CompletionQueue::poll`]'s: the round robin over the sub-CQs, a sub-CQ found
/// empty skipped until an `advance` finds nothing at all (then the next one looks at every
/// sub-CQ again), and once every other sub-CQ is empty the cursor stays on the last one
/// without walking the round robin.
#[doc(alias = "ibv_cq_ex")]
pub struct PollCursor<'a> {
    cq: &'a mut CompletionQueue,
    /// The current CQE (before the first successful `advance`: the buffer's first entry,
    /// which the readers may read but which means nothing).
    entry: *const u32,
    /// `wr_id` of the current completion (0 for an unsolicited receive).
    wr_id: u64,
    /// Sub-CQs found empty since the cursor opened or an `advance` last found nothing.
    empty: u64,
    /// The sub-CQ the current CQE came from.
    sub: u16,
    /// Every sub-CQ but `sub` was found empty (or there is only one): take from `sub`
    /// without walking the round robin.
    stay: bool,
    /// Some CQE (good or bad) was consumed: the drop writes the doorbell.
    consumed: bool,
    /// A CQE of sub-CQ `sub` that [`try_take`](Self::try_take) consumed but left to the
    /// next [`advance`](Self::advance) (its entry and first word). While there is one,
    /// `stay` is false; `advance` sets it again.
    pending: Option<(*const u32, u32)>,
    /// [`try_take`](Self::try_take)'s run on sub-CQ `sub`: `next` is its next slot, `end`
    /// the end of the sub-CQ's ring (the wrap). Live while `next != end`, which only
    /// [`set_run`](Self::set_run) makes so (on a cursor that stays on `sub`, no CQE
    /// pending); every slot from `next` up to `end` then carries the phase `run_phase`
    /// (bit 24 of word 0 when new), and both are slot starts of that sub-CQ, `end - next`
    /// a multiple of `stride`. Both null before the first run.
    next: *mut u32,
    end: *mut u32,
    /// The slot `next` was at when the sub-CQ's consumer index and phase, and the CQ's
    /// consumer counter, were last brought up to date ([`settle`](Self::settle)): the CQEs
    /// from here to `next` were consumed by `try_take` and are not counted there yet.
    settled: *mut u32,
    /// Phase bit (bit 24 of word 0) of a new CQE in the run: `1 << 24` or 0.
    run_phase: u32,
    /// `entry_size` in bytes.
    stride: usize,
}

/// What [`PollCursor::try_take`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    /// No CQE anywhere (`advance`'s `Ok(false)`).
    Empty = 0,
    /// Positioned on the next completion (`advance`'s `Ok(true)`).
    Landed = 1,
    /// Not done: the cursor does not stay on one sub-CQ, or it consumed a CQE it left to the
    /// full checks. Call [`PollCursor::advance`], which gives `advance`'s result as if
    /// `try_take` had not been called.
    Advance,
}

// SAFETY: `entry` points into the CQ buffer the `CompletionQueue` (which is `Send`) reads; the
// cursor holds that queue's `&mut`, so moving the cursor moves the only user of both. Not
// `Sync` (raw pointer): the readers are not meant to be shared.
unsafe impl Send for PollCursor<'_> {}

impl core::fmt::Debug for PollCursor<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PollCursor")
            .field("cqn", &self.cq.cfg.cqn)
            .field("sub", &self.sub)
            .field("wr_id", &self.wr_id)
            .finish()
    }
}

impl CompletionQueue {
    /// Opens an extended poll: a cursor not yet on any completion; its first
    /// [`advance`](PollCursor::advance) is `ibv_start_poll`. Nothing is read yet.
    #[inline]
    pub fn poll_cursor(&mut self) -> PollCursor<'_> {
        PollCursor {
            entry: self.buf.as_ptr().cast::<u32>(),
            stay: self.cfg.num_sub_cqs == 1,
            stride: self.cfg.entry_size as usize,
            cq: self,
            wr_id: 0,
            empty: 0,
            sub: 0,
            consumed: false,
            pending: None,
            next: core::ptr::null_mut(),
            end: core::ptr::null_mut(),
            settled: core::ptr::null_mut(),
            run_phase: 0,
        }
    }

    /// `ibv_start_poll`: a cursor on the first completion, `None` when there is none. A bad
    /// CQE is consumed (and the doorbell written) and reported.
    #[doc(alias = "ibv_start_poll")]
    pub fn start_poll<L: QpLookup + ?Sized>(
        &mut self,
        lookup: &mut L,
    ) -> Result<Option<PollCursor<'_>>, EfaError> {
        let mut c = self.poll_cursor();
        Ok(if c.advance(lookup)? { Some(c) } else { None })
    }

    /// Consumes the next CQE of sub-CQ `idx` if the device finished writing it: its first
    /// word (loaded `Acquire` and checked for the phase) and where it is.
    #[inline(always)]
    fn take_entry(&mut self, idx: u16) -> Option<(*const u32, u32)> {
        if usize::from(idx) >= self.subs.len() {
            return None;
        }
        // SAFETY: `idx` < `subs.len()` (just checked).
        unsafe { self.take_entry_unchecked(idx) }
    }

    /// [`take_entry`](Self::take_entry) of a sub-CQ index the caller knows exists.
    ///
    /// # Safety
    ///
    /// `idx < num_sub_cqs` (the length of `subs`).
    #[inline(always)]
    unsafe fn take_entry_unchecked(&mut self, idx: u16) -> Option<(*const u32, u32)> {
        debug_assert!(usize::from(idx) < self.subs.len());
        // SAFETY: `idx` < `subs.len()` (the caller's promise).
        let sub = unsafe { self.subs.get_unchecked_mut(usize::from(idx)) };
        // In bounds and aligned: `sub.base` is a sub-CQ's start, the index is masked by
        // depth - 1, and `new` checked that the buffer holds every sub-CQ.
        let entry = self
            .buf
            .as_ptr()
            .wrapping_add(sub.base + (((sub.consumed & self.mask) as usize) << self.entry_shift))
            .cast::<u32>();
        // The device writes this word concurrently: an atomic load through a raw pointer.
        // SAFETY: `entry` is an aligned word inside the live buffer (above, `new`).
        let w0 = u32::from_le(unsafe { AtomicU32::from_ptr(entry) }.load(Ordering::Acquire));
        // Word 0 is req_id (bytes 0-1), status (2), flags (3): the phase is bit 24.
        if w0 & PHASE_BIT != sub.phase {
            return None;
        }
        // No other CQE field is read before the phase above said the entry is complete
        // (rdma-core: `udma_from_device_barrier()`, `dmb oshld` on aarch64; see above).
        mmio::dma_rmb();
        sub.consumed = sub.consumed.wrapping_add(1);
        if sub.consumed & self.mask == 0 {
            sub.phase ^= PHASE_BIT;
        }
        self.cc = self.cc.wrapping_add(1);
        Some((entry, w0))
    }
}

impl PollCursor<'_> {
    /// Moves to the next completion (`ibv_start_poll` the first time, then `ibv_next_poll`):
    /// `Ok(false)` when there is none (the cursor stays where it was). A bad CQE is consumed
    /// and returned as the error; the cursor stays where it was, and the next `advance`
    /// carries on after it.
    ///
    /// The common case inline: the cursor stays on one sub-CQ (every other one was found
    /// empty, or there is only one) and takes its next CQE; the round robin is
    /// `walk`, out of line.
    #[doc(alias = "ibv_next_poll")]
    #[inline(always)]
    pub fn advance<L: QpLookup + ?Sized>(&mut self, lookup: &mut L) -> Result<bool, EfaError> {
        // What `try_take` consumed is counted in the sub-CQ and the CQ before anything reads
        // them; its run ends (`land` starts a new one where the cursor stays).
        self.settle();
        self.end = self.next;
        if !self.stay {
            // (Also when a CQE is pending.)
            return self.walk(lookup);
        }
        // Every other sub-CQ was found empty: the round robin would come back here, and
        // `next_poll_idx` already points past it.
        let idx = self.sub;
        match self.cq.take_entry(idx) {
            Some((entry, w0)) => self.land(idx, entry, w0, lookup),
            None => {
                // `sub` was the only sub-CQ not found empty, and now it is empty too:
                // nothing anywhere (what `walk` concludes in the same case), and the next
                // call looks at every sub-CQ again.
                lookup.sub_cq_empty(idx);
                self.empty = 0;
                self.stay = self.cq.all_subs == 1;
                Ok(false)
            }
        }
    }

    /// [`advance`](Self::advance) along the round robin: from `next_poll_idx`, skipping the
    /// sub-CQs found empty, until a CQE or until every sub-CQ was found empty.
    #[inline(never)]
    fn walk<L: QpLookup + ?Sized>(&mut self, lookup: &mut L) -> Result<bool, EfaError> {
        if let Some((entry, w0)) = self.pending.take() {
            // Consumed by `try_take` from the sub-CQ the cursor stays on (it cleared `stay`
            // to send us here); the round robin is where that left it.
            self.stay = true;
            return self.land(self.sub, entry, w0, lookup);
        }
        let all = self.cq.all_subs;
        // Sub-CQs the lookup says hold no CQE: passed over as if found empty.
        let skip = all & !lookup.sub_cqs();
        if !self.stay && self.empty | skip == all {
            // Nothing to visit.
            self.empty = 0;
            self.stay = all == 1;
            return Ok(false);
        }
        loop {
            let idx = if self.stay {
                self.sub
            } else {
                let subs = self.cq.cfg.num_sub_cqs;
                let idx = self.cq.next_poll_idx;
                self.cq.next_poll_idx = if idx + 1 >= subs { 0 } else { idx + 1 };
                let bit = 1u64 << (idx & 63);
                if (self.empty | skip) & bit != 0 {
                    continue;
                }
                if self.empty | skip | bit == all {
                    // The only sub-CQ not found empty: stay on it from here on.
                    self.stay = true;
                    self.sub = idx;
                }
                idx
            };
            let Some((entry, w0)) = self.cq.take_entry(idx) else {
                lookup.sub_cq_empty(idx);
                self.empty |= 1u64 << (idx & 63);
                if self.empty | skip == all {
                    // Nothing anywhere: the next call looks at every sub-CQ again.
                    self.empty = 0;
                    self.stay = all == 1;
                    return Ok(false);
                }
                continue;
            };
            return self.land(idx, entry, w0, lookup);
        }
    }

    /// [`advance`](Self::advance)'s common case, for a caller that keeps the rest out of
    /// line: on a cursor that stays on one sub-CQ (every other one was found empty, or there
    /// is only one) and has a run there (`advance` starts one whenever it lands on that
    /// sub-CQ), takes the run's next CQE, and if its QP is the one `lookup` finds cheaply
    /// ([`QpLookup::find_cached`]) and its queue type, pool and req_id pass every check of
    /// `advance`, positions the cursor on it ([`Step::Landed`]). [`Step::Empty`]: no CQE,
    /// `advance`'s `Ok(false)`. [`Step::Advance`]: call `advance`, whose result is then the
    /// one this call would have had (a CQE consumed here but not positioned on, for another
    /// QP or because a check failed — a failed check changes nothing — is kept in the
    /// cursor, and `advance` runs its full checks on it first). After [`Step::Advance`] call
    /// `advance` before dropping the cursor: a pending CQE is completed only there (dropped
    /// with the cursor, its request would stay outstanding).
    ///
    /// The run is the cursor's own: a pointer to the next slot, stepped by the entry size up
    /// to the sub-CQ's wrap, and the phase its CQEs carry. What it consumes is added to the
    /// sub-CQ's consumer index and the CQ's counter when `advance` runs or the cursor drops
    /// (`settle`); nothing else reads them meanwhile (the cursor holds the queue's `&mut`).
    #[inline(always)]
    pub fn try_take<L: QpLookup + ?Sized>(&mut self, lookup: &mut L) -> Step {
        let entry = self.next;
        if entry == self.end {
            // No run: the round robin, a pending CQE, the wrap, or no `advance` yet.
            return Step::Advance;
        }
        // The device writes this word concurrently: an atomic load through a raw pointer.
        // `entry` != `end`, so it is a slot of the run: `set_run` made `next` a slot start
        // of sub-CQ `sub` (in bounds and aligned as in `take_entry`) and `end` that
        // sub-CQ's end, and `next` only moves one slot at a time while below `end`.
        // SAFETY: `entry` is an aligned word inside the live buffer (above).
        let w0 = u32::from_le(unsafe { AtomicU32::from_ptr(entry) }.load(Ordering::Acquire));
        if w0 & PHASE_BIT != self.run_phase {
            // As in `advance`: `sub` was the only sub-CQ not found empty, and now it is
            // empty too: nothing anywhere, and the next call looks at every sub-CQ again.
            // (Not reported to `sub_cq_empty`: kept out of this path, whose caller is a
            // small function; the next `walk` that finds the sub-CQ empty reports it.)
            // With one sub-CQ the cursor stays, and so does its run (the next call looks
            // at this slot again); otherwise the run ends with the stay.
            self.empty = 0;
            if self.cq.all_subs != 1 {
                self.stay = false;
                self.end = entry;
            }
            return Step::Empty;
        }
        // No other CQE field is read before the phase above said the entry is complete
        // (rdma-core: `udma_from_device_barrier()`; see `run`).
        mmio::dma_rmb();
        // `entry` < `end`, both slot starts of the sub-CQ, so the next slot is at most `end`.
        self.next = entry.wrapping_byte_add(self.stride);
        // SAFETY: word 1 of an entry found complete above (entries are >= 16 bytes).
        let w1 = unsafe { read_word(entry, 1) };
        let req_id = w0 as u16;
        // The queue type in place (bits 26:25 of word 0), compared with each type's bits:
        // one mask and compare for a send.
        let q_type = w0 & Q_TYPE_BITS;
        let done = match lookup.find_cached(w1 as u16) {
            // The checks of `complete_wr_id`, in its order; none changes anything when it
            // fails.
            Some(pools) => {
                if q_type == SEND_QUEUE_BITS {
                    pools.send.map(|pool| {
                        pool.complete_send(req_id, || {
                            // SAFETY: word 2 of a consumed entry of >= 16 bytes.
                            req_id_hi(w1, unsafe { read_word(entry, 2) })
                        })
                    })
                } else if q_type != RECV_QUEUE_BITS {
                    None
                } else if w0 & UNSOLICITED_BIT != 0 {
                    Some(Ok(0))
                } else {
                    pools.recv.map(|pool| pool.complete(req_id))
                }
            }
            None => None,
        };
        match done {
            Some(Ok(wr_id)) => {
                self.wr_id = wr_id;
                self.entry = entry;
                Step::Landed
            }
            _ => {
                // Consumed (counted by the next `settle`), left to `advance`; the run ends.
                self.pending = Some((entry.cast_const(), w0));
                self.stay = false;
                self.end = self.next;
                Step::Advance
            }
        }
    }

    /// Counts the CQEs `try_take`'s run consumed since the last call (from `settled` to
    /// `next`) in sub-CQ `sub`'s consumer index and phase and in the CQ's consumer counter.
    #[inline(always)]
    fn settle(&mut self) {
        if self.next == self.settled {
            return;
        }
        // Both are slot starts of sub-CQ `sub`, `settled` <= `next` (`set_run`, `try_take`),
        // at most the sub-CQ's depth apart (< 2^32 slots).
        let taken = ((self.next as usize - self.settled as usize) >> self.cq.entry_shift) as u32;
        self.settled = self.next;
        self.consumed = true;
        self.cq.cc = self.cq.cc.wrapping_add(taken as u16);
        let mask = self.cq.mask;
        if let Some(sub) = self.cq.subs.get_mut(usize::from(self.sub)) {
            sub.consumed = sub.consumed.wrapping_add(taken);
            // The run ends at the wrap: the phase flips when its last slot was taken.
            if sub.consumed & mask == 0 {
                sub.phase ^= PHASE_BIT;
            }
        }
    }

    /// Starts `try_take`'s run at sub-CQ `sub`'s next slot, up to its wrap. Called with
    /// nothing left to settle and no CQE pending, on a cursor that stays on `sub`.
    #[inline(always)]
    fn set_run(&mut self) {
        let cq = &*self.cq;
        let Some(sub) = cq.subs.get(usize::from(self.sub)) else {
            return;
        };
        // In bounds and aligned as in `take_entry`; `end` is one past the sub-CQ's last
        // slot (the buffer holds every sub-CQ, `new`).
        let base = cq.buf.as_ptr().wrapping_add(sub.base);
        let next = base
            .wrapping_add(((sub.consumed & cq.mask) as usize) << cq.entry_shift)
            .cast::<u32>();
        self.next = next;
        self.settled = next;
        self.end = base
            .wrapping_add((cq.mask as usize + 1) << cq.entry_shift)
            .cast::<u32>();
        self.run_phase = sub.phase;
    }

    /// Positions the cursor on the CQE just taken from sub-CQ `idx` (first word `w0`):
    /// checks it and completes its request ([`complete_wr_id`]).
    #[inline(always)]
    fn land<L: QpLookup + ?Sized>(
        &mut self,
        idx: u16,
        entry: *const u32,
        w0: u32,
        lookup: &mut L,
    ) -> Result<bool, EfaError> {
        self.consumed = true;
        if self.stay {
            // Staying on `idx` (== `sub`): `try_take` goes on from the slot after this one.
            self.set_run();
        }
        // SAFETY: word 1 of an entry `take_entry` found complete (entries are >= 16 B).
        let qpn = unsafe { read_word(entry, 1) } as u16;
        self.wr_id = complete_wr_id(&self.cq.cfg, idx, w0, qpn, entry, lookup)?;
        self.entry = entry;
        self.sub = idx;
        Ok(true)
    }

    /// Word `i` of the current CQE.
    #[inline(always)]
    fn word(&self, i: usize) -> u32 {
        debug_assert!(i < self.cq.cfg.entry_size as usize / 4);
        // SAFETY: `entry` is an entry of the live buffer (a taken CQE, or the first entry
        // before any), and every caller passes `i < entry_size / 4` (words 0..4 exist in
        // every entry, words 4..8 are read only with 32-byte entries).
        unsafe { read_word(self.entry, i) }
    }

    #[inline(always)]
    fn flags(&self) -> u8 {
        (self.word(0) >> 24) as u8
    }

    #[inline(always)]
    fn is_recv(&self) -> bool {
        field_get8(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, self.flags()) == EFA_IO_RECV_QUEUE
    }

    #[inline(always)]
    fn op_type(&self) -> u8 {
        field_get8(EFA_IO_CDESC_COMMON_OP_TYPE_MASK, self.flags())
    }

    /// `wr_id` of the current completion (0 for an unsolicited receive).
    #[inline]
    pub fn wr_id(&self) -> u64 {
        self.wr_id
    }

    /// `ibv_wc_read_status`.
    #[inline]
    pub fn status(&self) -> WcStatus {
        WcStatus(wc_status_from_efa((self.word(0) >> 16) as u8))
    }

    /// `ibv_wc_read_vendor_err`: the raw `efa_io_comp_status`.
    #[inline]
    pub fn vendor_err(&self) -> u32 {
        (self.word(0) >> 16) & 0xff
    }

    /// `ibv_wc_read_opcode`.
    #[inline]
    pub fn opcode(&self) -> WcOpcode {
        let op = self.op_type();
        WcOpcode(match (self.is_recv(), op == EFA_IO_RDMA_WRITE) {
            (false, _) => send_wc_opcode(op),
            (true, true) => IBV_WC_RECV_RDMA_WITH_IMM,
            (true, false) => IBV_WC_RECV,
        })
    }

    /// `ibv_wc_read_byte_len`: received bytes (with `length_hi` for an RDMA write with
    /// immediate on 32-byte entries); 0 for a send completion.
    #[inline]
    pub fn byte_len(&self) -> u32 {
        if !self.is_recv() {
            return 0;
        }
        let len = self.word(1) >> 16;
        if self.op_type() == EFA_IO_RDMA_WRITE && self.cq.cfg.entry_size == EFA_CQE_SIZE_EX {
            // Word 4 of a 32-byte entry: `rdma_write.length_hi`.
            len | (self.word(4) & 0xffff) << 16
        } else {
            len
        }
    }

    /// `ibv_wc_read_imm_data` in host order, when [`wc_flags`](Self::wc_flags) has
    /// `WITH_IMM` (0 otherwise).
    #[inline]
    pub fn imm_data(&self) -> u32 {
        if !self.wc_flags().is_empty() {
            self.word(3)
        } else {
            0
        }
    }

    /// `ibv_wc_read_qp_num`.
    #[inline]
    pub fn qp_num(&self) -> u32 {
        self.word(1) & 0xffff
    }

    /// `ibv_wc_read_src_qp` (receives; 0 for a send completion).
    #[inline]
    pub fn src_qp(&self) -> u32 {
        if self.is_recv() {
            self.word(2) >> 16
        } else {
            0
        }
    }

    /// `ibv_wc_read_slid`: the sender's AH number, 0xFFFF when unknown (receives; 0 for a
    /// send completion).
    #[inline]
    pub fn slid(&self) -> u16 {
        if self.is_recv() {
            self.word(2) as u16
        } else {
            0
        }
    }

    /// `ibv_wc_read_wc_flags`: `WITH_IMM` for a receive with immediate data.
    #[inline]
    pub fn wc_flags(&self) -> WcFlags {
        if self.is_recv() && self.flags() & EFA_IO_CDESC_COMMON_HAS_IMM_MASK != 0 {
            WcFlags::WITH_IMM
        } else {
            WcFlags::empty()
        }
    }

    /// `efadv_wc_read_sgid`: the sender's GID, for a receive on a CQ created with SGID from a
    /// sender without an AH here (not for RDMA writes, whose entry holds `length_hi` there).
    #[doc(alias = "efadv_wc_read_sgid")]
    pub fn sgid(&self) -> Option<[u8; 16]> {
        if !(self.cq.cfg.with_sgid
            && self.is_recv()
            && self.word(2) as u16 == EFA_IO_RX_CDESC_AH_UNKNOWN
            && self.op_type() != EFA_IO_RDMA_WRITE)
        {
            return None;
        }
        // `with_sgid` needs 32-byte entries (`new`): words 4..8 are `src_addr`.
        let mut gid = [0u8; 16];
        for (i, c) in gid.chunks_exact_mut(4).enumerate() {
            c.copy_from_slice(&self.word(4 + i).to_le_bytes());
        }
        Some(gid)
    }

    /// `efadv_wc_is_unsolicited`: an RDMA write with immediate that consumed no receive.
    #[doc(alias = "efadv_wc_is_unsolicited")]
    #[inline]
    pub fn is_unsolicited(&self) -> bool {
        self.is_recv() && self.flags() & EFA_IO_CDESC_COMMON_UNSOLICITED_MASK != 0
    }

    /// The current completion with its extras, exactly as [`CompletionQueue::poll`] gives
    /// it.
    pub fn completion(&self) -> Completion {
        Completion {
            wc: self.wc(),
            sgid: self.sgid(),
            is_unsolicited: self.is_unsolicited(),
        }
    }

    /// The current completion's standard fields: reads each CQE word it needs once, so a
    /// caller converting every completion pays only for the words of its kind (1 and 2 for a
    /// send, 1 to 4, and word 4 for an RDMA write with immediate on 32-byte entries, for a
    /// receive).
    #[inline]
    pub fn wc(&self) -> Wc {
        let w0 = self.word(0);
        let w1 = self.word(1);
        let status = (w0 >> 16) as u8;
        let flags = (w0 >> 24) as u8;
        let op = field_get8(EFA_IO_CDESC_COMMON_OP_TYPE_MASK, flags);
        let mut wc = Wc {
            wr_id: self.wr_id,
            status: WcStatus(wc_status_from_efa(status)),
            vendor_err: u32::from(status),
            qp_num: w1 & 0xffff,
            ..Wc::default()
        };
        if field_get8(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, flags) != EFA_IO_RECV_QUEUE {
            wc.opcode = WcOpcode(send_wc_opcode(op));
            return wc;
        }
        let w2 = self.word(2);
        wc.byte_len = w1 >> 16;
        if op == EFA_IO_RDMA_WRITE {
            if self.cq.cfg.entry_size == EFA_CQE_SIZE_EX {
                // Word 4 of a 32-byte entry: `rdma_write.length_hi`.
                wc.byte_len |= (self.word(4) & 0xffff) << 16;
            }
            wc.opcode = WcOpcode(IBV_WC_RECV_RDMA_WITH_IMM);
        } else {
            wc.opcode = WcOpcode(IBV_WC_RECV);
        }
        wc.src_qp = w2 >> 16;
        wc.slid = w2 as u16;
        if flags & EFA_IO_CDESC_COMMON_HAS_IMM_MASK != 0 {
            wc.imm_data = self.word(3);
            wc.wc_flags = WcFlags::WITH_IMM;
        }
        wc
    }
}

impl Drop for PollCursor<'_> {
    /// `ibv_end_poll`: one doorbell write of the consumer counter, if anything was consumed.
    #[inline]
    fn drop(&mut self) {
        self.settle();
        if self.consumed {
            self.cq.update_doorbell(false);
        }
    }
}

/// Checks a consumed CQE's queue type, QP and req_id (first word `w0`, QP number `qpn`) and
/// completes the request: its `wr_id`, or 0 for an unsolicited receive (which consumed no
/// receive WR). The checks and their order are [`process`]'s. `process` keeps its own copy on
/// purpose: built on this function, `Cq::poll` cost 170 instructions per CQE instead of 156
/// (`cargo xtask bench --host`), the queue type then being decoded twice.
#[inline(always)]
fn complete_wr_id<L: QpLookup + ?Sized>(
    cfg: &CqConfig,
    sub_cq: u16,
    w0: u32,
    qpn: u16,
    entry: *const u32,
    lookup: &mut L,
) -> Result<u64, EfaError> {
    let cqn = cfg.cqn;
    let flags = (w0 >> 24) as u8;
    let queue = match field_get8(EFA_IO_CDESC_COMMON_Q_TYPE_MASK, flags) {
        EFA_IO_SEND_QUEUE => QueueKind::Send,
        EFA_IO_RECV_QUEUE => QueueKind::Recv,
        _ => return Err(EfaError::BadCqe { cqn, sub_cq, flags }),
    };
    let unknown = || EfaError::UnknownQp {
        cqn,
        qpn: u32::from(qpn),
        queue,
    };
    let Some(pools) = lookup.find(qpn) else {
        return Err(unknown());
    };
    let pool = match queue {
        QueueKind::Send => pools.send,
        QueueKind::Recv if flags & EFA_IO_CDESC_COMMON_UNSOLICITED_MASK != 0 => return Ok(0),
        QueueKind::Recv => pools.recv,
    };
    let Some(pool) = pool else {
        return Err(unknown());
    };
    let req_id = w0 as u16;
    let done = if queue == QueueKind::Send {
        // SAFETY: words 1 and 2 of a consumed entry of >= 16 bytes (`entry` is its start).
        let hi = || unsafe { req_id_hi(read_word(entry, 1), read_word(entry, 2)) };
        pool.complete_send(req_id, hi)
    } else {
        pool.complete(req_id)
    };
    done.map_err(|problem| EfaError::BadReqId {
        cqn,
        qpn: u32::from(qpn),
        queue,
        req_id,
        problem,
    })
}

/// Bits 63:16 of a 64-bit request id from words 1 and 2 of a send CQE (`efa_io_tx_cdesc`):
/// `req_id_ex.w[0]` is the high half of word 1 (above `qp_num`), `w[1]` and `w[2]` are word 2.
#[inline(always)]
fn req_id_hi(w1: u32, w2: u32) -> u64 {
    u64::from(w1 & 0xffff_0000) | u64::from(w2) << 32
}

/// Word `i` of a CQE (host order): a volatile read, because the device may write the ring at
/// any time and no reference to it may exist.
///
/// # Safety
/// `entry` is an entry `take_from` returned (in bounds, 4-aligned, of `entry_size` bytes,
/// inside the live buffer) and `i < entry_size / 4`.
#[inline(always)]
unsafe fn read_word(entry: *const u32, i: usize) -> u32 {
    // SAFETY: the caller's contract.
    u32::from_le(unsafe { entry.add(i).read_volatile() })
}

/// The send-completion view of a CQE (`struct efa_io_tx_cdesc`): the first 16 bytes.
pub fn tx_view(cqe: &EfaIoRxCdescEx) -> &EfaIoTxCdesc {
    transmute_ref!(&cqe.base)
}

/// Introspection (`efadv_query_cq`). Nothing here touches the queue.
impl CompletionQueue {
    /// The first CQE of the buffer (sub-CQ 0).
    pub fn buf_ptr(&self) -> NonNull<u8> {
        self.buf
    }

    /// The CQ doorbell register, if the CQ has one (`EFA_CREATE_CQ_RESP_DB_OFF`).
    pub fn doorbell_ptr(&self) -> Option<NonNull<u32>> {
        self.db.as_ref().map(|d| d.as_ptr())
    }
}

#[cfg(test)]
#[path = "cq_tests.rs"]
mod tests;
