//! The shared cell of a QP's queues and the per-CQ QP table (see the module docs of
//! `crate::efa` for the protocol). This file holds every `unsafe` of the EFA data path's
//! sharing: the `UnsafeCell` accesses under the hand-off word and the table's raw pointers.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use uverbs_efa::{QpLookup, QpPools, RecvQueue, SendQueue, WridPool};

use crate::channel::Mapping;

/// Nobody is inside the cell.
const FREE: u8 = 0;
/// Post or poll is inside the cell.
const HELD: u8 = 1;

/// A QP's queues, shared by the [`EfaQp`](super::EfaQp) and the tables of its CQs.
pub(crate) struct QpData {
    /// The 16-bit device QP number (a CQE's `qp_num`).
    pub(crate) qpn: u16,
    hand: AtomicU8,
    sq: UnsafeCell<SendQueue>,
    rq: UnsafeCell<RecvQueue>,
    /// Table identities (addresses) this QP's sends / receives complete into.
    send_table: usize,
    recv_table: usize,
    // The queues above point into these mappings; declared after them so they are unmapped
    // after the queues are dropped.
    _maps: Vec<Mapping>,
}

// SAFETY: the queues are `Send`; every access to them goes through `Held`, which the hand-off
// word makes exclusive (compare_exchange Acquire / store Release), so sharing `&QpData`
// between threads never gives two threads the queues at once.
unsafe impl Sync for QpData {}

impl QpData {
    pub(crate) fn new(
        qpn: u16,
        sq: SendQueue,
        rq: RecvQueue,
        send_table: &Arc<QpTable>,
        recv_table: &Arc<QpTable>,
        maps: Vec<Mapping>,
    ) -> Self {
        QpData {
            qpn,
            hand: AtomicU8::new(FREE),
            sq: UnsafeCell::new(sq),
            rq: UnsafeCell::new(rq),
            send_table: Arc::as_ptr(send_table) as usize,
            recv_table: Arc::as_ptr(recv_table) as usize,
            _maps: maps,
        }
    }

    /// Takes the hand-off word, spinning while the other side is inside a bounded step.
    #[inline]
    pub(crate) fn hold(&self) -> Held<'_> {
        // Acquire: everything the previous holder wrote to the queues (pool slots, producer
        // counters) is visible to us before we touch them.
        while self
            .hand
            .compare_exchange_weak(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin_loop();
        }
        Held { data: self }
    }
}

/// Exclusive access to a QP's queues; gives the hand-off word back on drop.
pub(crate) struct Held<'a> {
    data: &'a QpData,
}

impl Held<'_> {
    #[inline]
    pub(crate) fn sq(&mut self) -> &mut SendQueue {
        // SAFETY: we hold the hand-off word (taken in `hold`, released only in our Drop), so
        // no other `Held` exists and this is the only reference to the queue; `&mut self`
        // keeps the two accessors from overlapping.
        unsafe { &mut *self.data.sq.get() }
    }
    #[inline]
    pub(crate) fn rq(&mut self) -> &mut RecvQueue {
        // SAFETY: as in `sq`.
        unsafe { &mut *self.data.rq.get() }
    }
}

impl Drop for Held<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: our writes to the queues happen-before the next holder's Acquire.
        self.data.hand.store(FREE, Ordering::Release);
    }
}

/// Slots of a CQ's QP table: one per 16-bit EFA QP number.
const SLOTS: usize = 1 << 16;

/// The QPs completing into one CQ, indexed by QP number.
pub(crate) struct QpTable {
    slots: Box<[AtomicPtr<QpData>]>,
    /// Odd while a poll may be reading slots.
    epoch: AtomicU64,
}

impl QpTable {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(QpTable {
            slots: (0..SLOTS)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            epoch: AtomicU64::new(0),
        })
    }

    /// Registers `qp` (the table keeps a strong reference until `unregister`).
    /// Fails if the slot is taken (the device handed out a QP number twice).
    pub(crate) fn register(&self, qp: &Arc<QpData>) -> bool {
        let raw = Arc::into_raw(qp.clone()).cast_mut();
        // SeqCst pairs with the poller's epoch protocol; Release would do for publication
        // (the cell was fully built before), SeqCst keeps all slot writes in one order.
        match self.slots[usize::from(qp.qpn)].compare_exchange(
            std::ptr::null_mut(),
            raw,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => true,
            Err(_) => {
                // SAFETY: `raw` came from `Arc::into_raw` just above and was not stored.
                drop(unsafe { Arc::from_raw(raw) });
                false
            }
        }
    }

    /// Removes `qp`, waits until no poll can still hold its pointer, and drops the table's
    /// reference. Control path: may spin-yield while a poll is running.
    pub(crate) fn unregister(&self, qp: &Arc<QpData>) {
        let want = Arc::as_ptr(qp).cast_mut();
        let slot = &self.slots[usize::from(qp.qpn)];
        if slot
            .compare_exchange(
                want,
                std::ptr::null_mut(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_err()
        {
            return;
        }
        // SeqCst: the slot clear above and this load are in one total order with the poller's
        // SeqCst epoch increment, so either the poller's increment came first (we see an odd
        // epoch and wait) or it comes after our clear (its slot loads see null).
        let e = self.epoch.load(Ordering::SeqCst);
        if e % 2 == 1 {
            while self.epoch.load(Ordering::Acquire) == e {
                std::thread::yield_now();
            }
        }
        // SAFETY: the pointer was stored by `register` from `Arc::into_raw`; it is out of the
        // table and no poll can still use it (epoch protocol above), so we own that reference.
        drop(unsafe { Arc::from_raw(want) });
    }

    /// Starts a poll: the returned lookup reads slots until dropped.
    #[inline]
    pub(crate) fn begin_poll(&self) -> Lookup<'_> {
        // SeqCst: orders this increment before every slot load of the poll against
        // `unregister`'s SeqCst clear and load (see there).
        self.epoch.fetch_add(1, Ordering::SeqCst);
        Lookup {
            table: self,
            held: None,
        }
    }
}

impl Drop for QpTable {
    fn drop(&mut self) {
        for s in self.slots.iter() {
            let p = s.swap(std::ptr::null_mut(), Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: a non-null slot holds one strong reference made by `register`; the
                // table is being dropped (`&mut self`), so no poll reads it.
                drop(unsafe { Arc::from_raw(p) });
            }
        }
    }
}

/// The [`QpLookup`] a poll hands the provider: resolves QP numbers through the table and holds
/// the hand-off word of the QP whose CQE is being decoded.
pub(crate) struct Lookup<'t> {
    table: &'t QpTable,
    held: Option<&'t QpData>,
}

impl Lookup<'_> {
    fn release(&mut self) {
        if let Some(d) = self.held.take() {
            // Release: the pool writes of the CQE we decoded happen-before the next holder.
            d.hand.store(FREE, Ordering::Release);
        }
    }
}

impl Drop for Lookup<'_> {
    fn drop(&mut self) {
        self.release();
        // Release: our reads of any slot's cell happen-before an `unregister` that sees the
        // epoch move and frees the cell.
        self.table.epoch.fetch_add(1, Ordering::Release);
    }
}

impl QpLookup for Lookup<'_> {
    #[inline]
    fn find(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        self.release();
        // Acquire: the cell a slot points to was fully built before `register` stored it.
        let p = self.table.slots[usize::from(qp_num)].load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null slot points to a live `QpData`: the table holds a strong
        // reference, and `unregister` frees it only after our epoch (odd since `begin_poll`)
        // moves on, which happens when this lookup is dropped.
        let data: &QpData = unsafe { &*p };
        if data.qpn != qp_num {
            return None;
        }
        let me = self.table as *const QpTable as usize;
        // Acquire: pairs with the Release of post's `Held::drop`.
        while data
            .hand
            .compare_exchange_weak(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin_loop();
        }
        // Stored at the reborrowed lifetime below; released in the next `find` or on drop.
        // SAFETY: `data` outlives this lookup (see above), so extending the borrow to `'t` is
        // sound; the reference is only used while the hand-off word is held.
        self.held = Some(unsafe { &*p });
        // SAFETY: we hold the hand-off word, so these are the only references to the queues
        // until `release`, which cannot run while the returned `QpPools` borrows `self`.
        let send: Option<&mut WridPool> =
            (data.send_table == me).then(|| unsafe { (*data.sq.get()).pool_mut() });
        // SAFETY: as above; the receive queue is a different field from the send queue.
        let recv: Option<&mut WridPool> =
            (data.recv_table == me).then(|| unsafe { (*data.rq.get()).pool_mut() });
        Some(QpPools { send, recv })
    }
}
