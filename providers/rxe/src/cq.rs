//! Completion queue: reads `struct ib_uverbs_wc` elements the kernel writes into the mmapped
//! CQ ring, as plain copies.
//!
//! The kernel owns `producer_index`, we own `consumer_index`. When the ring is full the kernel
//! drops the completion and raises `IB_EVENT_CQ_ERR` on the async event fd; nothing in the ring
//! shows an overrun, so the core must watch async events. What the ring *can* show is a corrupt
//! producer index (out of range, or moving backwards), which is reported as [`RingError`].

use core::sync::atomic::Ordering;

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

/// One completion, copied out of the ring (`struct ibv_wc` / `struct ib_uverbs_wc`).
///
/// Numbers are passed through as the kernel wrote them: `status` is `IBV_WC_*` status,
/// `opcode` is `IBV_WC_*` opcode (receive opcodes have bit 7 set), `wc_flags` are the kernel's
/// `IB_WC_*` bits as rdma-core's rxe provider hands them to applications unchanged.
#[doc(alias = "ibv_wc")]
#[doc(alias = "ib_uverbs_wc")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// `wr_id` of the completed work request.
    pub wr_id: u64,
    /// Completion status (`IBV_WC_SUCCESS` = 0).
    pub status: u32,
    /// Completion opcode.
    pub opcode: u32,
    /// Vendor error (rxe: 0).
    pub vendor_err: u32,
    /// Bytes transferred (receives, RDMA read, atomics).
    pub byte_len: u32,
    /// The `ex` union as stored: big-endian immediate data or an invalidated rkey.
    pub ex: u32,
    /// Local QP number.
    pub qp_num: u32,
    /// Source QP (UD receives).
    pub src_qp: u32,
    /// Completion flags.
    pub wc_flags: u32,
    /// P_Key index.
    pub pkey_index: u16,
    /// Source LID (0 on RoCE).
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// DLID path bits.
    pub dlid_path_bits: u8,
    /// Port number.
    pub port_num: u8,
}

impl Cqe {
    /// Immediate data as a host-order value (`ntohl(wc.imm_data)`), meaningful when the
    /// completion carries immediate data.
    pub fn imm_data(&self) -> u32 {
        u32::from_be(self.ex)
    }

    /// The invalidated rkey, meaningful when the completion reports one.
    pub fn invalidated_rkey(&self) -> u32 {
        self.ex
    }

    #[inline]
    fn from_wc(wc: &UverbsWc) -> Self {
        Cqe {
            wr_id: wc.wr_id,
            status: wc.status,
            opcode: wc.opcode,
            vendor_err: wc.vendor_err,
            byte_len: wc.byte_len,
            ex: wc.ex,
            qp_num: wc.qp_num,
            src_qp: wc.src_qp,
            wc_flags: wc.wc_flags,
            pkey_index: wc.pkey_index,
            slid: wc.slid,
            sl: wc.sl,
            dlid_path_bits: wc.dlid_path_bits,
            port_num: wc.port_num,
        }
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

    fn read_at(&self, index: u32) -> Result<Cqe, RingError> {
        let mut wc = UverbsWc::default();
        if !self.q.read_slot(index, 0, wc.as_mut_bytes()) {
            // Unreachable: `new` checked the element holds a UverbsWc.
            return Err(RingError::ElemTooSmall {
                need: CQE_MIN_SIZE,
                found: self.q.elem_size(),
            });
        }
        Ok(Cqe::from_wc(&wc))
    }

    /// Copies the next completion without consuming it.
    pub fn peek(&mut self) -> Result<Option<Cqe>, RingError> {
        if self.ready_seen == 0 && self.ready()? == 0 {
            return Ok(None);
        }
        self.read_at(self.cons).map(Some)
    }

    /// Takes one completion: copies it out and frees its slot with a `Release` store of
    /// `consumer_index`.
    #[doc(alias = "ibv_poll_cq")]
    #[doc(alias = "rxe_poll_cq")]
    pub fn poll(&mut self) -> Result<Option<Cqe>, RingError> {
        let mut one = [Cqe::default()];
        Ok(match self.poll_batch(&mut one)? {
            0 => None,
            _ => Some(one[0]),
        })
    }

    /// Takes up to `out.len()` completions, then frees their slots with a single `Release` store
    /// of `consumer_index`. Returns how many were written to `out`.
    #[doc(alias = "ibv_poll_cq")]
    pub fn poll_batch(&mut self, out: &mut [Cqe]) -> Result<usize, RingError> {
        self.poll_map(out, |c| *c)
    }

    /// Brings the count of ready completions up to date for a poll that wants `want` of them
    /// and returns how many can be taken now (`min(want, ready)`), with at most one `Acquire`
    /// load of the kernel's producer index: none when enough are already known ready. A moved
    /// index is validated (in range, not behind what was already seen) before it counts; an
    /// unchanged one was validated when first seen, so an empty poll is a load and a compare.
    ///
    /// Small enough to inline into a caller's poll loop; [`CompletionQueue::take`] does the rest.
    #[inline(always)]
    pub fn refresh(&mut self, want: usize) -> Result<usize, RingError> {
        refresh(&self.q, self.cons, &mut self.ready_seen, want)
    }

    /// Takes up to `out.len()` of the completions already known ready (see
    /// [`CompletionQueue::refresh`]; no load of the kernel's index here), storing `f(cqe)` for
    /// each into `out` straight from its ring slot, then frees their slots with one `Release`
    /// store of `consumer_index`. Returns how many were taken. Cannot fail: the completions
    /// were validated when counted ready, and an element holds what is read (checked once,
    /// in `new`).
    #[inline]
    pub fn take<T>(&mut self, out: &mut [T], mut f: impl FnMut(&Cqe) -> T) -> usize {
        self.take_with(out, |wc: UverbsWc| f(&Cqe::from_wc(&wc)))
    }

    /// [`CompletionQueue::take`] without the [`Cqe`] step: the first `size_of::<U>()` bytes
    /// of each slot (the kernel writes a `struct ib_uverbs_wc` there) are copied whole into a
    /// `U`, and `f(u)` is stored into `out`. With `U` a plain word array and `T` laid out like
    /// `ib_uverbs_wc`, a completion costs a few wide loads and stores instead of one per field.
    /// `U` must fit in `struct ib_uverbs_wc` (checked at compile time): the rest of a slot is
    /// the kernel's private `ib_wc`, not ABI.
    ///
    /// Same contract as `take`: only completions already known ready, one `Release` store of
    /// `consumer_index` for the whole call; returns how many were taken.
    #[inline]
    pub fn take_raw<U: FromBytes, T>(&mut self, out: &mut [T], f: impl FnMut(U) -> T) -> usize {
        self.take_with(out, f)
    }

    /// The body of `take` and `take_raw`: copies a `U` out of each ready slot, stores `f(u)`.
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

    /// Takes up to `out.len()` completions and stores `f(cqe)` for each into `out`, straight
    /// from its ring slot: [`CompletionQueue::refresh`] then [`CompletionQueue::take`], so one
    /// `Acquire` load of the kernel's producer index (none when enough are known ready) and
    /// one `Release` store of ours per call, not per completion. `f` is a generic parameter,
    /// so the conversion is inlined, not called through a pointer.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll_map<T>(
        &mut self,
        out: &mut [T],
        f: impl FnMut(&Cqe) -> T,
    ) -> Result<usize, RingError> {
        self.refresh(out.len())?;
        Ok(self.take(out, f))
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
    ($(#[$m:meta])* $name:ident: $ty:ty) => {
        $(#[$m])*
        #[inline(always)]
        pub fn $name(&self) -> $ty {
            // Inside the slot's `UverbsWc` (checked at compile time): no run-time check.
            self.slot
                .read::<$ty, { core::mem::offset_of!(UverbsWc, $name) }>()
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

    /// The current completion copied whole.
    pub fn cqe(&self) -> Cqe {
        Cqe::from_wc(&self.slot.read::<UverbsWc, 0>())
    }

    cursor_field!(
        /// `wr_id` of the current completion.
        wr_id: u64
    );
    cursor_field!(
        /// Status (`IBV_WC_*`).
        status: u32
    );
    cursor_field!(
        /// Opcode (`IBV_WC_*`).
        opcode: u32
    );
    cursor_field!(
        /// Vendor error.
        vendor_err: u32
    );
    cursor_field!(
        /// Bytes transferred.
        byte_len: u32
    );
    cursor_field!(
        /// The `ex` union as stored (big-endian immediate data or an invalidated rkey).
        ex: u32
    );
    cursor_field!(
        /// Local QP number.
        qp_num: u32
    );
    cursor_field!(
        /// Source QP.
        src_qp: u32
    );
    cursor_field!(
        /// The kernel's `IB_WC_*` flags, as stored.
        wc_flags: u32
    );
    cursor_field!(
        /// P_Key index.
        pkey_index: u16
    );
    cursor_field!(
        /// Source LID.
        slid: u16
    );
    cursor_field!(
        /// Service level.
        sl: u8
    );
    cursor_field!(
        /// DLID path bits.
        dlid_path_bits: u8
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
