//! Request-id bookkeeping: which `wr_id` belongs to the 16-bit `req_id` a descriptor carries.
//!
//! EFA completes send WRs out of order (SRD is unordered), so a ring index cannot name a WR.
//! Like rdma-core (`wrid_idx_pool`), each queue owns a fixed pool of slots allocated when the
//! queue is created; posting takes a free slot and writes its number into the descriptor,
//! completing returns it. Nothing is allocated on post or poll.
//!
//! The upper bits of the 16-bit `req_id` that the slot index does not need carry a generation
//! number supplied by the core (rdma-core bumps one per QP-number reuse), so a stale completion
//! for an earlier QP with the same number is recognised and refused instead of completing
//! somebody else's WR.
//!
//! Every `req_id` read back from a CQE is distrusted: out of range, not outstanding, or of the
//! wrong generation is an error, never an out-of-bounds access or a double completion.

use crate::error::{EfaError, ReqIdProblem};

/// A fixed-capacity pool of request ids for one work queue.
#[derive(Debug)]
pub struct WridPool {
    /// `wr_id` of each slot (meaningful while `outstanding[slot]`).
    wr_id: Box<[u64]>,
    /// Whether each slot is holding a posted, not yet completed request.
    outstanding: Box<[bool]>,
    /// Stack of slot numbers: `free[next..]` are free, `free[..next]` were handed out (in order).
    free: Box<[u16]>,
    next: usize,
    /// Mask of the index bits of a req_id (capacity rounded up to a power of two, minus one).
    idx_mask: u16,
    /// Generation bits, already shifted above the index bits.
    shifted_gen: u16,
}

/// Largest pool: the `req_id` field is 16 bits.
pub const MAX_POOL_CAPACITY: u32 = 1 << 16;

impl WridPool {
    /// A pool of `capacity` slots (1..=65536) whose req_ids carry generation `gen` in the bits
    /// above the index (only as many low bits of `gen` as fit).
    pub fn new(capacity: u32, gen: u16) -> Result<Self, EfaError> {
        if capacity == 0 || capacity > MAX_POOL_CAPACITY {
            return Err(EfaError::BadConfig {
                ring: "wrid pool",
                reason: "capacity must be 1..=65536",
            });
        }
        let cap = capacity as usize;
        let idx_bits = capacity.next_power_of_two().trailing_zeros();
        let idx_mask = ((1u32 << idx_bits) - 1) as u16;
        let shifted_gen = (u32::from(gen) << idx_bits) as u16;
        Ok(WridPool {
            wr_id: vec![0; cap].into_boxed_slice(),
            outstanding: vec![false; cap].into_boxed_slice(),
            free: (0..capacity).map(|i| i as u16).collect(),
            next: 0,
            idx_mask,
            shifted_gen,
        })
    }

    /// Number of slots.
    pub fn capacity(&self) -> u32 {
        self.free.len() as u32
    }

    /// Number of requests posted and not yet completed.
    pub fn outstanding(&self) -> u32 {
        self.next as u32
    }

    /// Whether every slot is in use (the queue is full).
    pub fn is_full(&self) -> bool {
        self.next == self.free.len()
    }

    /// Takes a free slot for `wr_id` and returns the `req_id` to put in the descriptor, or
    /// `None` when the queue is full.
    pub fn alloc(&mut self, wr_id: u64) -> Option<u16> {
        let slot = *self.free.get(self.next)?;
        let s = usize::from(slot);
        // Slots in `free[next..]` are always < capacity (they were put there by `new` or by
        // `complete` after its bounds check), so these index operations cannot fail; `get_mut`
        // keeps that a checked fact rather than an assumption.
        let (Some(w), Some(o)) = (self.wr_id.get_mut(s), self.outstanding.get_mut(s)) else {
            return None;
        };
        *w = wr_id;
        *o = true;
        self.next += 1;
        Some(slot | self.shifted_gen)
    }

    /// Undoes the last `n` [`alloc`](Self::alloc)s (a `wr_abort`). Only valid when no
    /// completion was taken in between, which holding `&mut` of the queue guarantees.
    pub fn rollback(&mut self, n: usize) {
        for _ in 0..n.min(self.next) {
            self.next -= 1;
            if let Some(o) = self
                .free
                .get(self.next)
                .and_then(|&s| self.outstanding.get_mut(usize::from(s)))
            {
                *o = false;
            }
        }
    }

    /// Completes the request named by a device-written `req_id`: checks generation, range and
    /// that it is outstanding, frees the slot and returns its `wr_id`.
    pub fn complete(&mut self, req_id: u16) -> Result<u64, ReqIdProblem> {
        let wr_id = self.lookup(req_id)?;
        let slot = req_id & self.idx_mask;
        // `lookup` proved slot < capacity and outstanding, so one slot was handed out and
        // `next >= 1`.
        self.next -= 1;
        self.free[self.next] = slot;
        self.outstanding[usize::from(slot)] = false;
        Ok(wr_id)
    }

    /// The `wr_id` of an outstanding `req_id`, checked like [`complete`](Self::complete) but
    /// without freeing the slot.
    pub fn lookup(&self, req_id: u16) -> Result<u64, ReqIdProblem> {
        if req_id & !self.idx_mask != self.shifted_gen {
            return Err(ReqIdProblem::StaleGeneration);
        }
        let slot = usize::from(req_id & self.idx_mask);
        match self.outstanding.get(slot) {
            None => Err(ReqIdProblem::OutOfRange),
            Some(false) => Err(ReqIdProblem::NotOutstanding),
            Some(true) => Ok(self.wr_id[slot]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_complete_out_of_order_and_full() {
        let mut p = WridPool::new(3, 0).unwrap();
        let a = p.alloc(100).unwrap();
        let b = p.alloc(200).unwrap();
        let c = p.alloc(300).unwrap();
        assert!(p.is_full());
        assert_eq!(p.alloc(400), None);
        assert_eq!(p.complete(b), Ok(200));
        assert_eq!(p.complete(b), Err(ReqIdProblem::NotOutstanding));
        let d = p.alloc(400).unwrap();
        assert_eq!(d, b, "the freed slot is reused");
        assert_eq!(p.complete(c), Ok(300));
        assert_eq!(p.complete(a), Ok(100));
        assert_eq!(p.complete(d), Ok(400));
        assert_eq!(p.outstanding(), 0);
    }

    #[test]
    fn distrusts_device_req_ids() {
        // capacity 3 -> 2 index bits (mask 0b11); slot 3 exists in the mask but not the pool.
        let mut p = WridPool::new(3, 0).unwrap();
        assert_eq!(p.complete(3), Err(ReqIdProblem::OutOfRange));
        assert_eq!(p.complete(0), Err(ReqIdProblem::NotOutstanding));
        // any bit above the index bits is a generation mismatch (generation 0 here)
        assert_eq!(p.complete(0x8000), Err(ReqIdProblem::StaleGeneration));
        assert_eq!(p.complete(0xffff), Err(ReqIdProblem::StaleGeneration));
    }

    #[test]
    fn generation_bits() {
        // capacity 4 -> 2 index bits; gen 5 -> req_id bits 15:2 = 5 -> 0x14 | slot.
        let mut p = WridPool::new(4, 5).unwrap();
        let r = p.alloc(7).unwrap();
        assert_eq!(r, 0x14);
        let old = WridPool::new(4, 4).unwrap().shifted_gen;
        assert_eq!(p.complete(old), Err(ReqIdProblem::StaleGeneration));
        assert_eq!(p.complete(r), Ok(7));
        // full 16-bit pool: no generation bits at all
        let mut big = WridPool::new(65536, 9).unwrap();
        assert_eq!(big.alloc(1), Some(0));
    }

    #[test]
    fn rollback_restores_state() {
        let mut p = WridPool::new(4, 0).unwrap();
        let a = p.alloc(1).unwrap();
        p.alloc(2).unwrap();
        p.alloc(3).unwrap();
        p.rollback(2);
        assert_eq!(p.outstanding(), 1);
        assert_eq!(p.complete(1), Err(ReqIdProblem::NotOutstanding));
        assert_eq!(p.complete(a), Ok(1));
        assert!(WridPool::new(0, 0).is_err());
        assert!(WridPool::new(65537, 0).is_err());
    }
}
