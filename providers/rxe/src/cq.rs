//! Completion queue: reads `struct ib_uverbs_wc` elements the kernel writes into the mmapped
//! CQ ring into [`Wc`]s (`struct ibv_wc`, the same layout: a slot is copied whole, then the
//! two things the kernel stores differently are fixed: its flag bits and big-endian
//! immediate data).
//!
//! The kernel owns `producer_index`, we own `consumer_index`. When the ring is full the kernel
//! drops the completion and raises `IB_EVENT_CQ_ERR` on the async event fd; nothing in the ring
//! shows an overrun, so the core must watch async events. What the ring *can* show is a corrupt
//! producer index (out of range, or moving backwards), which is reported as [`RingError`].

use core::sync::atomic::Ordering;

use uverbs_wr::{Wc, WcFlags, WcOpcode, WcStatus};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::error::{IndexKind, RingError};
use crate::ring::{ElemQueue, Queue, SlotRef};

/// Mirror of `struct ib_uverbs_wc` (`rdma/ib_user_verbs.h`), the first bytes of every rxe CQ
/// element (kernel `struct rxe_cqe` is a union of it and the kernel's `ib_wc`).
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub(crate) struct UverbsWc {
    pub(crate) wr_id: u64,
    pub(crate) status: u32,
    pub(crate) opcode: u32,
    pub(crate) vendor_err: u32,
    pub(crate) byte_len: u32,
    pub(crate) ex: u32,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    pub(crate) wc_flags: u32,
    pub(crate) pkey_index: u16,
    pub(crate) slid: u16,
    pub(crate) sl: u8,
    pub(crate) dlid_path_bits: u8,
    pub(crate) port_num: u8,
    pub(crate) reserved: u8,
}

const _: () = {
    assert!(core::mem::size_of::<UverbsWc>() == 48);
    assert!(core::mem::offset_of!(UverbsWc, ex) == 24);
    assert!(core::mem::offset_of!(UverbsWc, pkey_index) == 40);
    assert!(core::mem::offset_of!(UverbsWc, port_num) == 46);
};

/// Size of `struct ib_uverbs_wc`: the least a CQ element must hold.
pub const CQE_MIN_SIZE: usize = core::mem::size_of::<UverbsWc>();

// `Wc` (`struct ibv_wc`) and the kernel's `struct ib_uverbs_wc`, which rxe writes at the start
// of each CQ ring slot, have every field at the same offset with the same size; a slot is
// copied into a `Wc` whole and relies on it. Only `wc_flags` differs in meaning (fixed after
// the copy), and `ib_uverbs_wc`'s last two bytes (port_num, reserved) land in `Wc`'s trailing
// padding.
const _: () = {
    use core::mem::{offset_of, size_of};
    const fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
        size_of::<F>()
    }
    macro_rules! same {
        ($w:ident, $k:ident) => {
            assert!(offset_of!(Wc, $w) == offset_of!(UverbsWc, $k));
            assert!(field_size(|w: &Wc| &w.$w) == field_size(|k: &UverbsWc| &k.$k));
        };
    }
    assert!(size_of::<Wc>() == size_of::<UverbsWc>());
    same!(wr_id, wr_id);
    same!(status, status);
    same!(opcode, opcode);
    same!(vendor_err, vendor_err);
    same!(byte_len, byte_len);
    same!(imm_data, ex);
    same!(qp_num, qp_num);
    same!(src_qp, src_qp);
    same!(wc_flags, wc_flags);
    same!(pkey_index, pkey_index);
    same!(slid, slid);
    same!(sl, sl);
    same!(dlid_path_bits, dlid_path_bits);
    assert!(offset_of!(UverbsWc, port_num) == offset_of!(Wc, dlid_path_bits) + 1);
};

/// The kernel's `enum ib_wc_flags` bits (what rxe writes into its CQ ring): they differ from
/// libibverbs' `enum ibv_wc_flags` ([`WcFlags`]) in two bits: the kernel has WITH_INVALIDATE
/// at bit 2 and IP_CSUM_OK at bit 3, libibverbs the reverse.
const IB_WC_GRH: u32 = 1 << 0;
const IB_WC_WITH_IMM: u32 = 1 << 1;
const IB_WC_WITH_INVALIDATE: u32 = 1 << 2;
const IB_WC_IP_CSUM_OK: u32 = 1 << 3;

/// The kernel's completion flags as [`WcFlags`] (libibverbs' bits).
#[inline]
pub fn wc_flags_from_kernel(k: u32) -> WcFlags {
    const {
        assert!(IB_WC_GRH == WcFlags::GRH.bits() && IB_WC_WITH_IMM == WcFlags::WITH_IMM.bits());
        assert!(IB_WC_WITH_INVALIDATE << 1 == WcFlags::WITH_INV.bits());
        assert!(IB_WC_IP_CSUM_OK >> 1 == WcFlags::IP_CSUM_OK.bits());
    }
    // Branch-free: GRH and WITH_IMM keep their bits, the other two swap; other bits dropped.
    WcFlags::from_bits_retain(
        (k & (IB_WC_GRH | IB_WC_WITH_IMM))
            | ((k & IB_WC_WITH_INVALIDATE) << 1)
            | ((k & IB_WC_IP_CSUM_OK) >> 1),
    )
}

/// The `ex` union of an rxe completion as [`Wc::imm_data`] holds it: immediate data (stored
/// big-endian, as it travels) in host order, an invalidated rkey (stored host order) as it is.
#[inline(always)]
fn imm_from_kernel(ex: u32, kernel_flags: u32) -> u32 {
    if kernel_flags & IB_WC_WITH_IMM != 0 {
        u32::from_be(ex)
    } else {
        ex
    }
}

/// The first 48 bytes of a CQ slot (`struct ib_uverbs_wc`), as a `Wc` of the same layout
/// (asserted above), moved as six words: every field is already what `struct ibv_wc` says
/// except, when [`needs_fix`] says so, the flags and the immediate data.
#[inline(always)]
fn wc_as_copied(words: [u64; 6]) -> Wc {
    zerocopy::transmute!(words)
}

/// Whether a `Wc` copied whole from a slot needs [`fix_in_place`]: its flags (the kernel's
/// `IB_WC_*` bits, as copied) hold something besides GRH. A send completion, and most
/// receives, have none (GRH has the same bit in both enums, and without `WITH_IMM` there is
/// no immediate to turn), so for them the copy is the whole conversion.
///
/// `NET_IMM` (the C ABI's poll, [`CompletionQueue::poll_net_imm`]) keeps immediate data
/// big-endian as stored, so `WITH_IMM` (the same bit in both enums) needs no fix either.
#[inline(always)]
fn needs_fix<const NET_IMM: bool>(wc: &Wc) -> bool {
    let kept = if NET_IMM {
        IB_WC_GRH | IB_WC_WITH_IMM
    } else {
        IB_WC_GRH
    };
    wc.wc_flags.bits() & !kept != 0
}

/// [`fix_in_place`] out of line (for the inline one-completion path).
#[inline(never)]
fn fix_out_of_line<const NET_IMM: bool>(wc: &mut Wc) {
    fix_in_place::<NET_IMM>(wc)
}

/// Turns a `Wc` copied whole from a slot into the `Wc` it means: the kernel's flags
/// translated to libibverbs' bits, immediate data (stored big-endian) to host order (left
/// big-endian with `NET_IMM`).
#[inline(always)]
fn fix_in_place<const NET_IMM: bool>(wc: &mut Wc) {
    let kflags = wc.wc_flags.bits();
    if !NET_IMM {
        wc.imm_data = imm_from_kernel(wc.imm_data, kflags);
    }
    wc.wc_flags = wc_flags_from_kernel(kflags);
}

/// The `Wc` a slot's `ib_uverbs_wc` means, field by field (the reference the whole-slot copy
/// is tested against, and the lazy cursor's whole-completion read).
#[inline]
fn wc_from_kernel(k: &UverbsWc) -> Wc {
    Wc {
        wr_id: k.wr_id,
        status: WcStatus(k.status),
        opcode: WcOpcode(k.opcode),
        vendor_err: k.vendor_err,
        byte_len: k.byte_len,
        imm_data: imm_from_kernel(k.ex, k.wc_flags),
        qp_num: k.qp_num,
        src_qp: k.src_qp,
        wc_flags: wc_flags_from_kernel(k.wc_flags),
        pkey_index: k.pkey_index,
        slid: k.slid,
        sl: k.sl,
        dlid_path_bits: k.dlid_path_bits,
    }
}

/// An rxe completion queue over its mmapped ring.
///
/// Not `Sync`; take `&mut` to poll (rdma-core holds the CQ spinlock across a poll).
#[doc(alias = "rxe_cq")]
#[doc(alias = "ibv_cq")]
#[derive(Debug)]
pub struct CompletionQueue {
    /// The ring, its elements known to hold a `struct ib_uverbs_wc` (checked once, in `new`).
    q: ElemQueue<CQE_MIN_SIZE>,
    /// Our consumer index (the value last stored, plus what we consumed since).
    cons: u32,
    /// Ready entries at the last producer load, counted from `cons`.
    ready_seen: u32,
}

impl CompletionQueue {
    /// Wraps a mapped CQ ring; fails if an element is smaller than `struct ib_uverbs_wc`.
    pub fn new(queue: Queue) -> Result<Self, RingError> {
        let queue = ElemQueue::new(queue)?;
        // Relaxed: our own index; only this process writes it.
        let cons = queue.load_index(IndexKind::Consumer, Ordering::Relaxed)?;
        let mut cq = CompletionQueue {
            q: queue,
            cons,
            ready_seen: 0,
        };
        cq.ready()?;
        Ok(cq)
    }

    /// The underlying ring.
    pub fn queue(&self) -> &Queue {
        &self.q
    }

    /// Number of completions ready to poll (reloads the kernel's producer index).
    ///
    /// Fails if the producer index is out of range or went backwards (fewer entries ready than
    /// already seen, which the kernel cannot do since only we free entries).
    pub fn ready(&mut self) -> Result<u32, RingError> {
        // Acquire: pairs with the kernel's release store of producer_index, so the CQEs it wrote
        // before are visible to the reads in `poll`.
        let prod = self
            .q
            .load_index_raw(IndexKind::Producer, Ordering::Acquire);
        self.take_producer(prod)
    }

    /// Validates a producer index the kernel published and records how many entries it makes
    /// ready. Out of range, or fewer entries than already seen, is an error.
    #[inline]
    fn take_producer(&mut self, prod: u32) -> Result<u32, RingError> {
        take_producer(&self.q, self.cons, &mut self.ready_seen, prod)
    }

    fn read_at(&self, index: u32) -> Result<Wc, RingError> {
        let mut wc = UverbsWc::default();
        if !self.q.read_slot(index, 0, wc.as_mut_bytes()) {
            // Unreachable: `new` checked the element holds a UverbsWc.
            return Err(RingError::ElemTooSmall {
                need: CQE_MIN_SIZE,
                found: self.q.elem_size(),
            });
        }
        Ok(wc_from_kernel(&wc))
    }

    /// Copies the next completion without consuming it.
    pub fn peek(&mut self) -> Result<Option<Wc>, RingError> {
        if self.ready_seen == 0 && self.ready()? == 0 {
            return Ok(None);
        }
        self.read_at(self.cons).map(Some)
    }

    /// Polls up to `wcs.len()` completions into `wcs` (`ibv_poll_cq`) and returns how many:
    /// [`CompletionQueue::refresh`], then each slot copied whole into its `Wc` (same layout:
    /// three 16-byte loads and stores), one `Release` store of the consumer index, and the
    /// completions whose kernel flags need it fixed in place. One completion (one asked for,
    /// or one ready) is taken inline, its fix-up out of line; more go through an out-of-line
    /// run. An error means the producer index is corrupt (out of range or moved backwards).
    #[doc(alias = "ibv_poll_cq")]
    #[doc(alias = "rxe_poll_cq")]
    #[inline(always)]
    pub fn poll(&mut self, wcs: &mut [Wc]) -> Result<usize, RingError> {
        self.poll_as::<false>(wcs)
    }

    /// [`Self::poll`] for a caller that hands the completions to C (`struct ibv_wc`, whose
    /// `imm_data` is `__be32`): immediate data is left big-endian as the slot stores it, the
    /// rest is as `poll` gives it. No second pass over the completions to turn it back.
    #[inline(always)]
    pub fn poll_net_imm(&mut self, wcs: &mut [Wc]) -> Result<usize, RingError> {
        self.poll_as::<true>(wcs)
    }

    /// [`Self::poll_net_imm`] of one completion already counted ready: no load of the
    /// kernel's index, no call (the fix-up inline). `true` with the completion in `wc`;
    /// `false` having done nothing (none counted ready: call `poll_net_imm`).
    #[inline(always)]
    pub fn poll_ready_one_net_imm(&mut self, wc: &mut Wc) -> bool {
        if self.ready_seen == 0 {
            return false;
        }
        // One counted ready: `take_with` takes it.
        self.take_with(core::slice::from_mut(wc), wc_as_copied);
        if needs_fix::<true>(wc) {
            fix_in_place::<true>(wc);
        }
        true
    }

    /// [`Self::poll`] (`NET_IMM` false) and [`Self::poll_net_imm`] (true).
    #[inline(always)]
    fn poll_as<const NET_IMM: bool>(&mut self, wcs: &mut [Wc]) -> Result<usize, RingError> {
        // One load of the kernel's index (none when enough are known ready) inline in the
        // caller's loop; an empty poll ends here.
        Ok(match self.refresh(wcs.len())? {
            0 => 0,
            // One to take (one asked for, or one ready): inline, no call.
            1 => match wcs.first_mut() {
                Some(wc) => self.take_one::<NET_IMM>(wc),
                None => 0,
            },
            _ => self.take_wcs::<NET_IMM>(wcs),
        })
    }

    /// [`Self::poll`] of more than one ready completion: each slot copied whole into its
    /// `Wc`, one `Release` store of the consumer index, no second load of the kernel's index;
    /// then the completions whose kernel flags need it (see [`needs_fix`]) fixed in place.
    /// Out of line (a direct call) so `poll` itself stays small enough to inline.
    #[inline(never)]
    fn take_wcs<const NET_IMM: bool>(&mut self, wcs: &mut [Wc]) -> usize {
        let n = self.take_with(wcs, wc_as_copied);
        // `n <= wcs.len()` (`take_with` fills a prefix of `wcs`): the empty default never
        // applies.
        for wc in wcs.get_mut(..n).unwrap_or_default() {
            if needs_fix::<NET_IMM>(wc) {
                fix_in_place::<NET_IMM>(wc);
            }
        }
        n
    }

    /// [`Self::poll`] of one ready completion: inline in the caller, the slot copied into `wc`
    /// whole and the consumer index stored; then, only if the copied flags need it, the
    /// fix-up, out of line.
    #[inline(always)]
    fn take_one<const NET_IMM: bool>(&mut self, wc: &mut Wc) -> usize {
        let n = self.take_with(core::slice::from_mut(wc), wc_as_copied);
        if n == 1 && needs_fix::<NET_IMM>(wc) {
            fix_out_of_line::<NET_IMM>(wc);
        }
        n
    }

    /// Brings the count of ready completions up to date for a poll that wants `want` of them
    /// and returns how many can be taken now (`min(want, ready)`), with at most one `Acquire`
    /// load of the kernel's producer index: none when enough are already known ready. A moved
    /// index is validated (in range, not behind what was already seen) before it counts; an
    /// unchanged one was validated when first seen, so an empty poll is a load and a compare.
    ///
    /// Small enough to inline into a caller's poll loop; [`CompletionQueue::poll`] begins with
    /// it, then takes what it counted.
    #[inline(always)]
    pub fn refresh(&mut self, want: usize) -> Result<usize, RingError> {
        refresh(&self.q, self.cons, &mut self.ready_seen, want)
    }

    /// Takes up to `out.len()` of the completions already known ready (see
    /// [`CompletionQueue::refresh`]; no load of the kernel's index here): the first
    /// `size_of::<U>()` bytes of each slot (the kernel writes a `struct ib_uverbs_wc` there) are
    /// copied whole into a `U`, `f(u)` is stored into `out`, then their slots are freed with one
    /// `Release` store of `consumer_index`. Returns how many were taken; cannot fail (the
    /// completions were validated when counted ready).
    /// A `U` fits an element by type (`ElemQueue<CQE_MIN_SIZE>`, and `read_head`/`read_run`
    /// assert `size_of::<U>() <= CQE_MIN_SIZE` at compile time), so no read can be refused.
    #[inline(always)]
    fn take_with<U: FromBytes, T>(&mut self, out: &mut [T], mut f: impl FnMut(U) -> T) -> usize {
        let n = out.len().min(self.ready_seen as usize);
        let n = match n {
            0 => return 0,
            // One completion (a poll of one, the common case of a latency loop): one read of
            // its slot, without the set-up of two runs around the wrap.
            1 => {
                out[0] = f(self.q.read_head(self.cons));
                1
            }
            // n <= ready_seen <= index_mask, so the run fits the ring and `read_run` takes all
            // n; it says how many it took, which is what is consumed below either way.
            _ => self.q.read_run(self.cons, &mut out[..n], f),
        };
        self.cons = self.cons.wrapping_add(n as u32) & self.q.index_mask();
        self.ready_seen -= n as u32;
        // Release (inside store_index): our reads of the consumed CQEs happen-before the
        // kernel's acquire load that sees the slots free and overwrites them.
        self.q.store_index(IndexKind::Consumer, self.cons);
        n
    }
}

/// [`CompletionQueue::refresh`] on the queue's parts (the ring `q`, the consumer index `cons`
/// and the ready count), for the cursor, which borrows them apart.
#[inline(always)]
fn refresh(q: &Queue, cons: u32, ready_seen: &mut u32, want: usize) -> Result<usize, RingError> {
    if (*ready_seen as usize) < want {
        // Acquire: pairs with the kernel's release store of producer_index, so the CQEs it
        // wrote before it are visible to the slot reads in `take`.
        let prod = q.load_index_raw(IndexKind::Producer, Ordering::Acquire);
        // Where the producer was at the last load (already validated).
        let seen = cons.wrapping_add(*ready_seen) & q.index_mask();
        if prod != seen {
            take_producer_slow(q, cons, ready_seen, prod)?;
        }
    }
    Ok(want.min(*ready_seen as usize))
}

#[inline(never)]
fn take_producer_slow(
    q: &Queue,
    cons: u32,
    ready_seen: &mut u32,
    prod: u32,
) -> Result<u32, RingError> {
    take_producer(q, cons, ready_seen, prod)
}

/// [`CompletionQueue::take_producer`] on the queue's parts: validates a producer index the
/// kernel published and records how many entries it makes ready. Out of range, or fewer
/// entries than already seen, is an error.
#[inline]
fn take_producer(q: &Queue, cons: u32, ready_seen: &mut u32, prod: u32) -> Result<u32, RingError> {
    let prod = q.check_index(IndexKind::Producer, prod)?;
    let ready = q.distance(cons, prod);
    if ready < *ready_seen {
        return Err(RingError::IndexOutsideWindow {
            index: IndexKind::Producer,
            value: prod,
            last: cons.wrapping_add(*ready_seen) & q.index_mask(),
            ours: cons,
        });
    }
    *ready_seen = ready;
    Ok(ready)
}

/// An open lazy poll of a [`CompletionQueue`] (rdma-core's rxe `cq_ex` path: `ibv_start_poll`,
/// `ibv_next_poll`, `ibv_end_poll`), positioned on one ready completion.
///
/// Nothing is copied: each reader loads just its field from the current ring slot. The slot
/// stays ours while the cursor lives, because the consumer index is published only when the
/// cursor is dropped (one `Release` store, which also frees the current completion). A cursor
/// exists only on a slot the kernel has published (`ready_seen >= 1`), so the readers never
/// look at a slot the kernel may be writing.
#[doc(alias = "ibv_cq_ex")]
#[derive(Debug)]
pub struct PollCursor<'a> {
    /// The current slot (of the queue's ring, whose elements hold a `UverbsWc`: checked once,
    /// so the readers check nothing).
    slot: SlotRef<'a, CQE_MIN_SIZE>,
    /// Completions known ready after the current one beyond the slot's run (`slot.run()`,
    /// those before the wrap). While the cursor lives the consumer index is `slot.index()`
    /// and the ready count `1 + slot.run() + beyond`, so moving on within the run touches the
    /// run count and the pointer only; the drop writes them back to `cq_cons`/`cq_ready_seen`
    /// (the queue's own fields, borrowed apart from its ring).
    beyond: u32,
    cq_cons: &'a mut u32,
    cq_ready_seen: &'a mut u32,
}

impl CompletionQueue {
    /// Starts a lazy poll (`ibv_start_poll`): `None` when no completion is ready. One
    /// `Acquire` load of the kernel's producer index (none when completions are already known
    /// ready), validated as in [`CompletionQueue::refresh`].
    #[doc(alias = "ibv_start_poll")]
    #[inline]
    pub fn start_poll(&mut self) -> Result<Option<PollCursor<'_>>, RingError> {
        if self.refresh(1)? == 0 {
            return Ok(None);
        }
        let CompletionQueue {
            q,
            cons,
            ready_seen,
        } = self;
        // An element holds a UverbsWc: `ElemQueue::new` checked it, once, in `new`.
        let mut slot = q.slot_ref(*cons);
        // `refresh` returned non-zero: `ready_seen >= 1` counts the current slot.
        let after = *ready_seen - 1;
        let beyond = after - slot.set_run(after);
        Ok(Some(PollCursor {
            slot,
            beyond,
            cq_cons: cons,
            cq_ready_seen: ready_seen,
        }))
    }
}

macro_rules! cursor_field {
    ($(#[$m:meta])* $vis:vis $name:ident = $field:ident: $ty:ty) => {
        $(#[$m])*
        #[inline(always)]
        $vis fn $name(&self) -> $ty {
            // Inside the slot's `UverbsWc` (checked at compile time): no run-time check.
            self.slot
                .read::<$ty, { core::mem::offset_of!(UverbsWc, $field) }>()
        }
    };
}

impl PollCursor<'_> {
    /// Moves to the next completion (`ibv_next_poll`); `false` when there is none, and the
    /// cursor then stays on the current one. Reloads the producer index (`Acquire`, validated)
    /// only when the completions known ready are used up; publishes nothing.
    ///
    /// Small enough to inline into every poll loop: when a next completion is already known
    /// ready before the wrap, a pointer add and a count; the rest is `advance_slow`, out of
    /// line.
    #[doc(alias = "ibv_next_poll")]
    #[inline(always)]
    pub fn advance(&mut self) -> Result<bool, RingError> {
        if self.step_in_run() {
            return Ok(true);
        }
        self.advance_slow()
    }

    /// The inline half of [`Self::advance`]: moves to the next completion if it is known
    /// ready and before the wrap (`true`); otherwise (`false`) does nothing, and
    /// [`Self::advance_slow`] does the rest. For a caller that maps the slow path's result
    /// out of line.
    #[inline(always)]
    pub fn step_in_run(&mut self) -> bool {
        self.slot.step_in_run()
    }

    /// [`Self::advance`] when [`Self::step_in_run`] returned `false`: at the wrap (the next slot is slot 0), or
    /// when the completions known ready are used up, reloads the producer index (`Acquire`,
    /// validated as in [`CompletionQueue::refresh`]).
    #[inline(never)]
    pub fn advance_slow(&mut self) -> Result<bool, RingError> {
        let cons = self.slot.index();
        // `slot.run()` is 0 here: the current one and those beyond the run.
        let mut ready_seen = 1 + self.beyond;
        refresh(self.slot.queue(), cons, &mut ready_seen, 2)?;
        if ready_seen < 2 {
            self.beyond = ready_seen - 1;
            return Ok(false);
        }
        // Consumed locally only: the slot is not handed back until the drop.
        let next = self.slot.queue().next(cons);
        self.slot.move_to(next);
        let after = ready_seen - 2;
        self.beyond = after - self.slot.set_run(after);
        Ok(true)
    }

    /// The current completion as a whole [`Wc`] (what [`CompletionQueue::poll`] gives for
    /// it).
    #[inline]
    pub fn wc(&self) -> Wc {
        wc_from_kernel(&self.slot.read::<UverbsWc, 0>())
    }

    /// Status.
    #[inline(always)]
    pub fn status(&self) -> WcStatus {
        WcStatus(self.raw_status())
    }

    /// Opcode.
    #[inline(always)]
    pub fn opcode(&self) -> WcOpcode {
        WcOpcode(self.raw_opcode())
    }

    /// Immediate data in host order (stored big-endian); meaningful with
    /// [`WcFlags::WITH_IMM`].
    #[inline(always)]
    pub fn imm_data(&self) -> u32 {
        u32::from_be(self.ex())
    }

    /// The invalidated rkey (stored host order); meaningful with [`WcFlags::WITH_INV`].
    #[inline(always)]
    pub fn invalidated_rkey(&self) -> u32 {
        self.ex()
    }

    /// The completion flags, in libibverbs' bits.
    #[inline(always)]
    pub fn wc_flags(&self) -> WcFlags {
        wc_flags_from_kernel(self.raw_wc_flags())
    }

    cursor_field!(
        /// `wr_id` of the current completion.
        pub wr_id = wr_id: u64
    );
    cursor_field!(
        /// Status as stored (`IBV_WC_*`).
        raw_status = status: u32
    );
    cursor_field!(
        /// Opcode as stored (`IBV_WC_*`).
        raw_opcode = opcode: u32
    );
    cursor_field!(
        /// Vendor error.
        pub vendor_err = vendor_err: u32
    );
    cursor_field!(
        /// Bytes transferred.
        pub byte_len = byte_len: u32
    );
    cursor_field!(
        /// The `ex` union as stored (big-endian immediate data or an invalidated rkey).
        ex = ex: u32
    );
    cursor_field!(
        /// Local QP number.
        pub qp_num = qp_num: u32
    );
    cursor_field!(
        /// Source QP.
        pub src_qp = src_qp: u32
    );
    cursor_field!(
        /// The kernel's `IB_WC_*` flags, as stored.
        raw_wc_flags = wc_flags: u32
    );
    cursor_field!(
        /// P_Key index.
        pub pkey_index = pkey_index: u16
    );
    cursor_field!(
        /// Source LID.
        pub slid = slid: u16
    );
    cursor_field!(
        /// Service level.
        pub sl = sl: u8
    );
    cursor_field!(
        /// DLID path bits.
        pub dlid_path_bits = dlid_path_bits: u8
    );
}

impl Drop for PollCursor<'_> {
    /// Ends the poll (`ibv_end_poll`): frees every completion moved past and the current one
    /// with one `Release` store of the consumer index.
    #[inline]
    fn drop(&mut self) {
        let cons = self.slot.index();
        let q = self.slot.queue();
        *self.cq_cons = q.next(cons);
        // The ready count less the current completion, now freed.
        *self.cq_ready_seen = self.slot.run() + self.beyond;
        // Release (inside store_index): our field reads happen-before the kernel's acquire
        // load that sees the slots free and overwrites them.
        q.store_index(IndexKind::Consumer, *self.cq_cons);
    }
}

#[cfg(test)]
#[path = "cq_tests.rs"]
mod tests;
