//! Producer side of an rxe work queue (SQ, RQ, SRQ): userspace owns `producer_index`, the
//! kernel owns `consumer_index`.
//!
//! Keeps a private producer index (slots written but not yet published), the last published
//! value, and the last consumer index seen, so a batch of work requests costs one `Acquire` load
//! only when the queue looks full, and one `Release` store when published.

use core::sync::atomic::Ordering;

use crate::error::{IndexKind, RingError, WrError};
use crate::ring::Queue;

#[derive(Debug)]
pub(crate) struct Producer {
    pub(crate) q: Queue,
    /// Next slot to write (private until published).
    pub(crate) prod: u32,
    /// Value of `producer_index` we last stored.
    published: u32,
    /// Last `consumer_index` loaded from the kernel (validated).
    cons_seen: u32,
}

impl Producer {
    pub(crate) fn new(q: Queue) -> Result<Self, RingError> {
        // Relaxed: our own index; only this process writes it.
        let prod = q.load_index(IndexKind::Producer, Ordering::Relaxed)?;
        // Acquire: pairs with the kernel's release store of the consumer index.
        let cons = q.load_index(IndexKind::Consumer, Ordering::Acquire)?;
        Ok(Producer {
            q,
            prod,
            published: prod,
            cons_seen: cons,
        })
    }

    /// Reloads the kernel's consumer index and checks it only moved forward through slots we
    /// published (the kernel cannot consume what it was never given).
    fn refresh_consumer(&mut self) -> Result<(), RingError> {
        // Acquire: pairs with the kernel's release store after it finished reading the slots it
        // consumed, so our later writes into those slots cannot race with its reads. rdma-core's
        // `check_queue_full`/`queue_full` load consumer_index with memory_order_acquire too
        // (`ldar` on aarch64); the kernel stores it with smp_store_release.
        let cons = self.q.load_index(IndexKind::Consumer, Ordering::Acquire)?;
        let moved = self.q.distance(self.cons_seen, cons);
        let allowed = self.q.distance(self.cons_seen, self.published);
        if moved > allowed {
            return Err(RingError::IndexOutsideWindow {
                index: IndexKind::Consumer,
                value: cons,
                last: self.cons_seen,
                ours: self.published,
            });
        }
        self.cons_seen = cons;
        Ok(())
    }

    /// Ok if the slot at `prod` is free (the queue is not full). The common case (room known
    /// from the last consumer index seen) is a compare inline in the caller; only a queue that
    /// looks full goes out of line to reload the kernel's index.
    #[inline(always)]
    pub(crate) fn reserve(&mut self) -> Result<(), WrError> {
        let next = self.q.next(self.prod);
        if next != self.cons_seen {
            return Ok(());
        }
        self.reserve_slow(next)
    }

    /// Whether the slot at `prod` is known free from the last consumer index seen (no reload:
    /// `false` may mean the kernel has freed slots since; [`Self::make_room`] finds out).
    #[inline(always)]
    pub(crate) fn has_room(&self) -> bool {
        self.q.next(self.prod) != self.cons_seen
    }

    /// Whether the slot at `prod` is free, reloading the kernel's consumer index only when
    /// the last one seen says the queue is full. That is rare on a deep queue and the rule on a
    /// queue of depth 1 (a latency test): its one slot still looks taken by the previous WR,
    /// which the kernel has long consumed. `false`: full, or the reloaded index is outside
    /// its window (nothing changed; [`Self::reserve`] reports which).
    #[inline(always)]
    pub(crate) fn make_room(&mut self) -> bool {
        self.has_room() || self.room_after_reload()
    }

    /// The reload of [`Self::make_room`], out of line so the inline check stays one compare.
    #[inline(never)]
    fn room_after_reload(&mut self) -> bool {
        self.refresh_consumer().is_ok() && self.has_room()
    }

    #[cold]
    #[inline(never)]
    fn reserve_slow(&mut self, next: u32) -> Result<(), WrError> {
        self.refresh_consumer()?;
        if next == self.cons_seen {
            return Err(WrError::QueueFull {
                capacity: self.q.capacity(),
            });
        }
        Ok(())
    }

    /// Marks the slot at `prod` written.
    pub(crate) fn advance(&mut self) {
        self.prod = self.q.next(self.prod);
    }

    /// Slots written but not yet published.
    pub(crate) fn pending(&self) -> u32 {
        self.q.distance(self.published, self.prod)
    }

    /// Publishes everything written up to (not including) `upto`; returns how many slots.
    #[inline]
    pub(crate) fn publish_upto(&mut self, upto: u32) -> u32 {
        let n = self.q.distance(self.published, upto);
        // Release (inside store_index): orders all slot writes above before the kernel's
        // acquire load of producer_index that observes `upto`. On aarch64 an `stlr`, as
        // rdma-core's `advance_producer` (memory_order_release); on x86_64 a plain `mov`.
        // Stored even when nothing is new (`n == 0`): the kernel then sees the value it saw,
        // and the post path, which always has something new, tests nothing.
        self.q.store_index(IndexKind::Producer, upto);
        self.published = upto;
        n
    }

    /// Elements the kernel has not consumed yet, counting unpublished ones (uses the last seen
    /// consumer index; call [`Self::refresh`] for a fresh value).
    pub(crate) fn outstanding(&self) -> u32 {
        self.q.distance(self.cons_seen, self.prod)
    }

    /// Reloads the consumer index (for [`Self::outstanding`]).
    pub(crate) fn refresh(&mut self) -> Result<(), RingError> {
        self.refresh_consumer()
    }
}
