//! Request-id bookkeeping: which `wr_id` belongs to the 16-bit `req_id` a descriptor carries.
//!
//! EFA completes send WRs out of order (SRD is unordered), so a ring index cannot name a WR.
//! Like rdma-core (`wrid_idx_pool`), each queue owns a fixed pool of ids allocated when the
//! queue is created; posting takes a free id and writes it into the descriptor, completing
//! returns it. Nothing is allocated on post or poll.
//!
//! # Two owners, no lock
//!
//! Posting (the QP) and completing (the CQ the queue completes into) may run on different
//! threads at the same time, so the pool is split in two halves over one shared block of
//! atomics ([`WridPool::new`] returns both):
//!
//! * [`WridPool`] — the **poster**: pops free ids, writes their `wr_id`, publishes them as
//!   posted, and may roll back ids it popped but has not published (`ibv_wr_abort`).
//! * [`WridCompleter`] — the **completer**: checks a device-written `req_id`, reads the
//!   `wr_id`, and pushes the id back on the free ring.
//!
//! The free ring is a single-producer (completer) / single-consumer (poster) ring of
//! `AtomicU16` ids with one shared index, `tail` (ids ever pushed), written only by the
//! completer. The poster's `head` (ids ever popped) is private: the ring can never overflow,
//! because every push returns an id that was posted, and there are only `capacity` ids — so
//! `tail - head <= capacity` without the completer ever reading `head`. For the same reason
//! the ring cells the poster popped but has not published are never overwritten (a push needs
//! a posted id, and while `k` ids are staged at most `capacity - k` are posted or free), which
//! is what makes `rollback` a plain `head -= k`.
//!
//! Memory ordering, per id:
//! 1. poster: `wr_id[s].store(Relaxed)`, then `posted[s].store(true, Release)` in
//!    [`WridPool::publish`], which the caller runs before the doorbell that hands the
//!    descriptor to the device;
//! 2. completer: `posted[s].load(Acquire)` — it sees `true` only after the device wrote a CQE
//!    for the descriptor, so it synchronises with (1) and the `wr_id` load that follows reads
//!    the value of (1); then `posted[s].store(false, Relaxed)`;
//! 3. completer: `free[tail].store(s, Relaxed)`, then `tail.store(tail + 1, Release)`;
//! 4. poster: `tail.load(Acquire)` before it reads `free[head]`: it sees the id written in (3)
//!    and, through the Release/Acquire pair, the completer's reads in (2) are done before the
//!    poster overwrites `wr_id[s]` again.
//!
//! The poster keeps the last `tail` it loaded (`tail_seen`) and pops the ids before it without
//! loading `tail` again; it loads it only when those run out. That is sound because `tail`
//! only grows: every cell before `tail_seen` was published by the Release store that the
//! Acquire load of `tail_seen` read (or an earlier one), so (4) holds for each of them however
//! long ago that load was. `head <= tail_seen <= tail` (mod 2^32) always, so
//! `tail_seen - head` never exceeds the true free count.
//!
//! Each `posted` flag is set only by the poster (for an id it popped, which is not on the free
//! ring and not posted) and cleared only by the completer (for an id it saw posted, before it
//! pushes it), so the two sides never write it at the same time; every access is atomic, so a
//! device that lies (a `req_id` completed twice, never posted, or made up) yields an error,
//! never a data race, a double push or an out-of-bounds index.
//!
//! Orderings on aarch64: the pool is shared only between two threads of this process (poster
//! and completer), in ordinary cacheable memory, never with the device, so no `udma_*`
//! barrier belongs here. rdma-core has no counterpart: it serialises post and poll of a QP
//! with its spinlocks (`pthread_spin_lock`/`unlock`, acquire/release on aarch64). Ours are the
//! same pairs without the lock: each Release store (`posted`, `tail`; `stlr` on aarch64) is
//! read by an Acquire load (`ldar`) on the other thread, and the Relaxed accesses are to data
//! that pair already publishes (`wr_id` before `posted`, the free ring before `tail`).
//! `tests::poster_and_completer_on_two_threads` runs them under Miri's weak-memory emulation.
//!
//! The upper bits of the 16-bit `req_id` that the index does not need carry a generation
//! number supplied by the core (rdma-core bumps one per QP-number reuse), so a stale
//! completion for an earlier QP with the same number is refused instead of completing
//! somebody else's WR.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{EfaError, ReqIdProblem};
use crate::pow2::Pow2Ring;

/// What the pool keeps per id (one cache line holds four).
#[derive(Debug)]
struct Slot {
    /// The `wr_id` (meaningful while `posted`).
    wr_id: AtomicU64,
    /// Whether the id is posted (handed to the device) and not yet completed.
    posted: AtomicBool,
}

/// The block both halves share.
#[derive(Debug)]
struct Shared {
    /// Per id: its `wr_id` and whether it is posted.
    slots: Box<[Slot]>,
    /// Free ring: cell `i & mask` holds the `i`-th id ever pushed (one unused cell in a
    /// 64-bit pool).
    free: Pow2Ring<AtomicU16>,
    /// Ids ever pushed onto the free ring (mod 2^32); written only by the completer.
    tail: AtomicU32,
    capacity: u32,
    /// Mask of the index bits of a req_id (capacity rounded up to a power of two, minus one).
    idx_mask: u16,
    /// Generation bits, already shifted above the index bits.
    shifted_gen: u16,
    /// 64-bit request-id mode (`EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID`): the descriptor carries
    /// the whole `wr_id` and the CQE echoes it, so there are no slots and no free ring; the
    /// pool only counts, so the queue never holds more than `capacity` and a completion with
    /// nothing outstanding is refused.
    wide: bool,
    /// 64-bit mode: ids the poster has published (mod 2^32), stored with Release before the
    /// doorbell; the completer refuses a completion when its count of completed ids has
    /// reached this.
    posted: AtomicU32,
}

/// The posting half of a work queue's request-id pool.
#[derive(Debug)]
pub struct WridPool {
    shared: Arc<Shared>,
    /// Ids ever popped (mod 2^32); private to the poster.
    head: u32,
    /// The completer's `tail` as the poster last loaded it (Acquire): the ids at
    /// `head .. tail_seen` are free and safe to pop without loading `tail` again (module
    /// docs). `tail_seen - head <= capacity`.
    tail_seen: u32,
    /// Popped ids (the last `staged` before `head`) not yet published.
    staged: u32,
}

/// The completing half of a work queue's request-id pool (owned by the CQ side).
#[derive(Debug)]
pub struct WridCompleter {
    shared: Arc<Shared>,
    /// Private copy of `shared.tail` (only we write it).
    tail: u32,
    /// `shared.wide`, kept here so the pool path's test of it reads no shared line.
    wide: bool,
}

/// Largest pool: the `req_id` field is 16 bits.
pub const MAX_POOL_CAPACITY: u32 = 1 << 16;

impl WridPool {
    /// A pool of `capacity` ids (1..=65536) whose req_ids carry generation `gen` in the bits
    /// above the index (only as many low bits of `gen` as fit): the posting half and the
    /// completing half.
    pub fn new(capacity: u32, gen: u16) -> Result<(WridPool, WridCompleter), EfaError> {
        if capacity == 0 || capacity > MAX_POOL_CAPACITY {
            return Err(EfaError::BadConfig {
                ring: "wrid pool",
                reason: "capacity must be 1..=65536",
            });
        }
        let cap = capacity as usize;
        let ring = capacity.next_power_of_two();
        let idx_bits = ring.trailing_zeros();
        let idx_mask = (ring - 1) as u16;
        let shifted_gen = (u32::from(gen) << idx_bits) as u16;
        let shared = Arc::new(Shared {
            slots: (0..cap)
                .map(|_| Slot {
                    wr_id: AtomicU64::new(0),
                    posted: AtomicBool::new(false),
                })
                .collect(),
            // Every id starts on the free ring (cells >= capacity are never used).
            free: Pow2Ring::new(ring, |i| AtomicU16::new(i as u16)),
            tail: AtomicU32::new(capacity),
            capacity,
            idx_mask,
            shifted_gen,
            wide: false,
            posted: AtomicU32::new(0),
        });
        Ok((
            WridPool {
                shared: shared.clone(),
                head: 0,
                tail_seen: capacity,
                staged: 0,
            },
            WridCompleter {
                tail: capacity,
                wide: shared.wide,
                shared,
            },
        ))
    }

    /// A counting pool for a queue with 64-bit request ids (`EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID`):
    /// at most `capacity` (1..=65536) ids outstanding, no slots, no free ring, no generation.
    /// Posting returns the low 16 bits of the `wr_id` as the `req_id` (the caller writes bits
    /// 63:16 to `req_id_ex`); completing takes the bits back from the CQE
    /// ([`WridCompleter::complete_send`]).
    pub fn new_64bit(capacity: u32) -> Result<(WridPool, WridCompleter), EfaError> {
        if capacity == 0 || capacity > MAX_POOL_CAPACITY {
            return Err(EfaError::BadConfig {
                ring: "wrid pool",
                reason: "capacity must be 1..=65536",
            });
        }
        let shared = Arc::new(Shared {
            slots: Box::new([]),
            free: Pow2Ring::new(1, |_| AtomicU16::new(0)),
            tail: AtomicU32::new(capacity),
            capacity,
            idx_mask: u16::MAX,
            shifted_gen: 0,
            wide: true,
            posted: AtomicU32::new(0),
        });
        Ok((
            WridPool {
                shared: shared.clone(),
                head: 0,
                tail_seen: capacity,
                staged: 0,
            },
            WridCompleter {
                tail: capacity,
                wide: shared.wide,
                shared,
            },
        ))
    }

    /// Whether this is a 64-bit request-id pool ([`new_64bit`](Self::new_64bit)).
    pub fn is_64bit(&self) -> bool {
        self.shared.wide
    }

    /// Number of ids.
    pub fn capacity(&self) -> u32 {
        self.shared.capacity
    }

    /// Ids popped and not yet back on the free ring (posted or staged), as the poster sees
    /// it now (the completer may free more at any moment).
    pub fn outstanding(&self) -> u32 {
        // Acquire: as in `is_full`.
        let tail = self.shared.tail.load(Ordering::Acquire);
        self.shared.capacity - tail.wrapping_sub(self.head)
    }

    /// Whether no id is free (the queue is full until the completer frees one).
    pub fn is_full(&self) -> bool {
        // Acquire: pairs with the completer's Release store of `tail`, so a free id we then
        // pop is read after the completer wrote it (step 4 of the module docs).
        self.shared.tail.load(Ordering::Acquire) == self.head
    }

    /// How many ids may be popped now, at least `want` if that many are free: the count the
    /// last load of `tail` left (`tail_seen - head`), and only when that is below `want` a new
    /// Acquire load of `tail`.
    #[inline(always)]
    fn free_for(&mut self, want: u32) -> u32 {
        let known = self.tail_seen.wrapping_sub(self.head);
        if known >= want {
            return known;
        }
        self.reload_tail()
    }

    /// Loads the completer's `tail` into `tail_seen` and returns the free count.
    #[inline]
    fn reload_tail(&mut self) -> u32 {
        // Acquire: pairs with the completer's Release store of `tail` (step 4) and covers
        // every free-ring cell before it, so each id popped before `tail_seen` (now or in a
        // later call) and the completer's last use of it happen-before what we do with it.
        // `tail - head <= capacity` (module docs), so this is the free count.
        self.tail_seen = self.shared.tail.load(Ordering::Acquire);
        self.tail_seen.wrapping_sub(self.head)
    }

    /// Takes a free id for `wr_id` and returns the `req_id` to put in the descriptor, or
    /// `None` when the queue is full. The id is *staged*: the completer refuses it until
    /// [`publish`](Self::publish).
    pub fn alloc(&mut self, wr_id: u64) -> Option<u16> {
        // The cell at `head` and the completer's last use of that id happen-before what we do
        // next: `head < tail_seen`, loaded with Acquire (step 4).
        if self.free_for(1) == 0 {
            return None;
        }
        let s = &*self.shared;
        if s.wide {
            // Counted only; `publish` makes it visible to the completer.
            self.head = self.head.wrapping_add(1);
            self.staged += 1;
            return Some(wr_id as u16);
        }
        // Relaxed: ordered by the Acquire load of `tail_seen`.
        let id = s.free.at(self.head).load(Ordering::Relaxed);
        // Ids on the free ring are always < capacity (put there by `new`, or by `complete`
        // after its bounds check), so this lookup cannot fail; `get` keeps it a checked fact.
        let slot = s.slots.get(usize::from(id))?;
        // Relaxed: published by the Release store of `posted` in `publish` (step 1).
        slot.wr_id.store(wr_id, Ordering::Relaxed);
        self.head = self.head.wrapping_add(1);
        self.staged += 1;
        Some(id | s.shifted_gen)
    }

    /// [`alloc`](Self::alloc) and [`publish`](Self::publish) in one, for a post that writes
    /// its descriptor and rings the doorbell without a chance to abort: the id is posted at
    /// once (the caller's doorbell comes after). `None` when the queue is full, and always in
    /// a 64-bit pool (which has no slots: [`alloc_posted_64`](Self::alloc_posted_64)).
    #[inline(always)]
    pub fn alloc_posted(&mut self, wr_id: u64) -> Option<u16> {
        Some(self.alloc_posted_index(wr_id)? | self.shared.shifted_gen)
    }

    /// The generation bits of this pool's req_ids, in place above the index bits: a req_id is
    /// an index ([`alloc_posted_index`](Self::alloc_posted_index),
    /// [`PostRun::post_index`]) or-ed with these. Fixed for the pool's life (0 in a 64-bit
    /// pool), so a caller may keep them or-ed into a word it composes descriptors from.
    pub fn gen_bits(&self) -> u16 {
        self.shared.shifted_gen
    }

    /// [`alloc_posted`](Self::alloc_posted) without the generation bits: the id's index
    /// alone (below [`gen_bits`](Self::gen_bits)' lowest bit), for a caller that or-s them in
    /// itself.
    #[inline(always)]
    pub fn alloc_posted_index(&mut self, wr_id: u64) -> Option<u16> {
        // Mixing with staged ids would make `publish` mark the wrong cells; the queue never
        // does (a session holds the queue borrowed until it publishes or rolls back).
        debug_assert_eq!(self.staged, 0);
        // As in `alloc` (step 4).
        if self.free_for(1) == 0 {
            return None;
        }
        let s = &*self.shared;
        // Relaxed: ordered by the Acquire load of `tail_seen`.
        let id = s.free.at(self.head).load(Ordering::Relaxed);
        // Free ids are < capacity (see `alloc`); `get` keeps it a checked fact.
        let slot = s.slots.get(usize::from(id))?;
        // Relaxed: published by the Release store just below (step 1).
        slot.wr_id.store(wr_id, Ordering::Relaxed);
        // Release: the `wr_id` store happens-before a completer's Acquire load that sees
        // `true` (step 1).
        slot.posted.store(true, Ordering::Release);
        self.head = self.head.wrapping_add(1);
        Some(id)
    }

    /// [`alloc_posted_index`](Self::alloc_posted_index) or
    /// [`alloc_posted_64`](Self::alloc_posted_64), whichever this pool is for, without a test
    /// of its own of which: `Some((index, false))` from a pool with a free ring,
    /// `Some((wr_id as u16, true))` from a 64-bit pool, `None` when the queue is full. The
    /// free ring of a 64-bit pool is empty and every other pool's has a cell at every masked
    /// position (`new`, `new_64bit`), so the bounds check of the free-ring cell, which the
    /// pool path makes anyway, is what tells the two apart.
    #[inline(always)]
    pub fn alloc_posted_either(&mut self, wr_id: u64) -> Option<(u16, bool)> {
        debug_assert_eq!(self.staged, 0);
        // As in `alloc` (step 4); the same count in both kinds of pool.
        if self.free_for(1) == 0 {
            return None;
        }
        let s = &*self.shared;
        if s.wide {
            self.head = self.head.wrapping_add(1);
            // Release: as in `alloc_posted_64`.
            s.posted.store(self.head, Ordering::Release);
            return Some((wr_id as u16, true));
        }
        // From here as `alloc_posted_index`. Relaxed: ordered by the Acquire load of
        // `tail_seen`.
        let id = s.free.at(self.head).load(Ordering::Relaxed);
        // Free ids are < capacity (see `alloc`); `get` keeps it a checked fact.
        let slot = s.slots.get(usize::from(id))?;
        // Relaxed: published by the Release store just below (step 1).
        slot.wr_id.store(wr_id, Ordering::Relaxed);
        // Release: the `wr_id` store happens-before a completer's Acquire load that sees
        // `true` (step 1).
        slot.posted.store(true, Ordering::Release);
        self.head = self.head.wrapping_add(1);
        Some((id, false))
    }

    /// [`alloc_posted`](Self::alloc_posted) for a pool made by [`new_64bit`](Self::new_64bit)
    /// (`alloc_posted` finds no free slot in one): counts the id as posted and returns the low
    /// 16 bits of `wr_id` as the req_id; `None` when `capacity` are outstanding. The caller
    /// writes bits 63:16 to the descriptor's `req_id_ex`.
    #[inline(always)]
    pub fn alloc_posted_64(&mut self, wr_id: u64) -> Option<u16> {
        debug_assert!(self.shared.wide && self.staged == 0);
        if self.free_for(1) == 0 {
            return None;
        }
        self.head = self.head.wrapping_add(1);
        // Release: the completer's Acquire load that sees this count comes after the device
        // completed the descriptor, which the caller hands over after this.
        self.shared.posted.store(self.head, Ordering::Release);
        Some(wr_id as u16)
    }

    /// Starts a run of at most `want` posts (a pool made by [`new_64bit`](Self::new_64bit)
    /// has no free ring: its runs post nothing, so its queue posts one by one) that take their
    /// ids with [`PostRun::post`]: the free ids are counted once, from the last loaded `tail`
    /// and with a new Acquire load of it only when that count is below `want`, and the run
    /// takes them from the free ring's cells from `head`'s on up to the ring's end at most
    /// (one slice, no position to mask per id). Ids the completer frees while the run lasts,
    /// and free ids past the ring's end, wait for the next run; the run's position is written
    /// back when it drops.
    #[inline(always)]
    pub fn run(&mut self, want: u32) -> PostRun<'_> {
        // As in `alloc_posted`: posted ids are never mixed with staged ones.
        debug_assert_eq!(self.staged, 0);
        // Every id this run pops lies before `tail_seen`, loaded with Acquire (step 4).
        let free_now = self.free_for(want);
        let s = &*self.shared;
        // The cells at ring positions `head .. head + n` (n <= free), cut at the ring's end.
        let from = s.free.tail_from(self.head);
        let cells = from.get(..want.min(free_now) as usize).unwrap_or(from);
        PostRun {
            head: &mut self.head,
            cells,
            slots: &s.slots,
            posted: 0,
            shifted_gen: s.shifted_gen,
        }
    }

    /// Number of ids staged (allocated, not yet published).
    pub fn staged(&self) -> u32 {
        self.staged
    }

    /// Marks every staged id as posted, so the completer accepts it. Call it before the
    /// doorbell that hands their descriptors to the device.
    pub fn publish(&mut self) {
        let s = &*self.shared;
        if s.wide {
            // Release: as in `alloc_posted`.
            s.posted.store(self.head, Ordering::Release);
            self.staged = 0;
            return;
        }
        for k in 0..self.staged {
            let pos = self.head.wrapping_sub(self.staged - k);
            // Relaxed: we wrote nothing here, we re-read a cell we popped; the completer
            // cannot overwrite it while it is staged (module docs).
            let id = s.free.at(pos).load(Ordering::Relaxed);
            if let Some(slot) = s.slots.get(usize::from(id)) {
                // Release: the `wr_id` store of `alloc` happens-before a completer's Acquire
                // load that sees `true` (step 1).
                slot.posted.store(true, Ordering::Release);
            }
        }
        self.staged = 0;
    }

    /// Gives back the last `n` staged ids (a `wr_abort`); published ids are never rolled
    /// back.
    pub fn rollback(&mut self, n: u32) {
        let n = n.min(self.staged);
        self.head = self.head.wrapping_sub(n);
        self.staged -= n;
    }
}

/// A run of posts taking ids from a [`WridPool`] (from [`WridPool::run`]): each id is posted
/// at once (the caller's doorbell comes after), and the pool's position moves on when the run
/// drops.
#[derive(Debug)]
pub struct PostRun<'p> {
    /// The pool's `head`, moved on by `posted` on drop.
    head: &'p mut u32,
    /// The free-ring cells of the ids this run may take, in ring order from `head`'s: free
    /// when the run started (before `tail_seen`), at most what was asked for.
    cells: &'p [AtomicU16],
    slots: &'p [Slot],
    /// Ids this run has taken: those of `cells[..posted]`.
    posted: usize,
    shifted_gen: u16,
}

/// A free-ring cell of a [`PostRun`], the `k`-th of the run ([`PostRun::cells_for`]).
#[derive(Debug)]
pub struct FreeCell<'p> {
    cell: &'p AtomicU16,
    k: usize,
}

impl<'p> PostRun<'p> {
    /// The leading `items` that this run has ids for (all of them if it has enough): a loop
    /// over these that posts once per item never finds [`post`](Self::post) out of ids,
    /// which lets the compiler drop that check.
    #[inline(always)]
    pub fn limit<'a, T>(&self, items: &'a [T]) -> &'a [T] {
        items.get(..self.cells.len()).unwrap_or(items)
    }

    /// Takes a free id for `wr_id`, marks it posted and returns the `req_id` for the
    /// descriptor; `None` once the run has used up the ids that were free when it started.
    #[inline(always)]
    pub fn post(&mut self, wr_id: u64) -> Option<u16> {
        Some(self.post_index(wr_id)? | self.shifted_gen)
    }

    /// [`post`](Self::post) without the generation bits ([`WridPool::gen_bits`]): the id's
    /// index alone.
    #[inline(always)]
    pub fn post_index(&mut self, wr_id: u64) -> Option<u16> {
        self.post_index_at(self.posted, wr_id)
    }

    /// [`post_index`](Self::post_index) for a caller that counts the run's posts itself: `k`
    /// must be the number of posts this run has made so far. `None` for a `k` past the run's
    /// ids. A `k` that skipped a cell would leave that id popped and never posted (lost to the
    /// queue, never completed: the completer refuses it), so the poster never does that.
    #[inline(always)]
    pub fn post_index_at(&mut self, k: usize, wr_id: u64) -> Option<u16> {
        let cell = self.cells.get(k)?;
        self.post_cell(FreeCell { cell, k }, wr_id)
    }

    /// The leading `items` (those [`limit`](Self::limit) keeps) each paired with the free
    /// cell of the id it is to take, in order: a loop over these that posts each item with
    /// [`post_cell`](Self::post_cell) in turn has no count of ids to check.
    #[inline(always)]
    pub fn cells_for<'a, T>(
        &self,
        items: &'a [T],
    ) -> impl Iterator<Item = (FreeCell<'p>, &'a T)> + use<'a, 'p, T> {
        let cells: &'p [AtomicU16] = self.cells;
        cells
            .iter()
            .enumerate()
            .map(|(k, cell)| FreeCell { cell, k })
            .zip(items)
    }

    /// Takes the id of `c` (the run's cell number `c.k`, which must be the number of posts
    /// this run has made so far, as [`post_index_at`](Self::post_index_at)) for `wr_id`,
    /// marks it posted and returns its index.
    #[inline(always)]
    pub fn post_cell(&mut self, c: FreeCell<'p>, wr_id: u64) -> Option<u16> {
        debug_assert_eq!(c.k, self.posted);
        let (cell, k) = (c.cell, c.k);
        // Relaxed: ordered by the Acquire load of `tail` in `WridPool::run`.
        let id = cell.load(Ordering::Relaxed);
        // Free ids are < capacity (see `WridPool::alloc`); `get` keeps it a checked fact.
        let slot = self.slots.get(usize::from(id))?;
        // Relaxed: published by the Release store just below (step 1).
        slot.wr_id.store(wr_id, Ordering::Relaxed);
        // Release: the `wr_id` store happens-before a completer's Acquire load that sees
        // `true` (step 1).
        slot.posted.store(true, Ordering::Release);
        self.posted = k + 1;
        Some(id)
    }
}

impl Drop for PostRun<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // The ids of `cells[..posted]` were popped: `posted` <= the cells' count <= the
        // ring's length, so it fits a u32.
        *self.head = self.head.wrapping_add(self.posted as u32);
    }
}

impl WridCompleter {
    /// Number of ids.
    pub fn capacity(&self) -> u32 {
        self.shared.capacity
    }

    /// Whether the pool was made by [`WridPool::new_64bit`] (the wr_id travels in the WQE).
    #[inline(always)]
    pub fn is_64bit(&self) -> bool {
        self.wide
    }

    /// Completes the request named by a device-written `req_id`: checks generation, range and
    /// that it is posted, frees the id and returns its `wr_id`.
    #[inline(always)]
    pub fn complete(&mut self, req_id: u16) -> Result<u64, ReqIdProblem> {
        let s = &*self.shared;
        let (id, slot, wr_id) = check(s, req_id)?;
        // Relaxed: only we clear it, and the Release store of `tail` below orders this (and
        // our `wr_id` read) before the poster can pop and re-post the id. `slot` is the one
        // `check` found (no second bounds check).
        slot.posted.store(false, Ordering::Relaxed);
        let tail = self.tail;
        s.free.at(tail).store(id, Ordering::Relaxed);
        self.tail = tail.wrapping_add(1);
        // Release: publishes the free-ring cell written above, and our last reads of this id,
        // to the poster's Acquire load of `tail` (step 3).
        s.tail.store(self.tail, Ordering::Release);
        Ok(wr_id)
    }

    /// Completes a send request from its CQE: in a pool made by [`WridPool::new_64bit`], the
    /// `wr_id` is `hi()` (bits 63:16 from the CQE's `req_id_ex`, read only here) with
    /// `req_id` as bits 15:0, refused as [`ReqIdProblem::NotOutstanding`] when the queue has
    /// nothing outstanding; in any other pool, [`complete`](Self::complete).
    #[inline(always)]
    pub fn complete_send(
        &mut self,
        req_id: u16,
        hi: impl FnOnce() -> u64,
    ) -> Result<u64, ReqIdProblem> {
        if !self.wide {
            return self.complete(req_id);
        }
        let s = &*self.shared;
        // Acquire: pairs with the poster's Release store of `posted`. Completed so far:
        // `tail - capacity` (mod 2^32); the poster never publishes more than `capacity` ahead.
        let posted = s.posted.load(Ordering::Acquire);
        if posted == self.tail.wrapping_sub(s.capacity) {
            return Err(ReqIdProblem::NotOutstanding);
        }
        self.tail = self.tail.wrapping_add(1);
        // Release: the poster may reuse the slot once it sees this (step 3).
        s.tail.store(self.tail, Ordering::Release);
        Ok(hi() & !0xffff | u64::from(req_id))
    }

    /// The `wr_id` of a posted `req_id`, checked like [`complete`](Self::complete) but
    /// without freeing the id.
    pub fn lookup(&self, req_id: u16) -> Result<u64, ReqIdProblem> {
        check(&self.shared, req_id).map(|(_, _, w)| w)
    }
}

/// Checks a device-written `req_id` against `s`: its generation, its range and that it is
/// posted. Gives the id, its slot and its `wr_id`.
///
/// Generation and range are one comparison: `x = req_id ^ shifted_gen` is below
/// `slots.len()` (= `capacity`) exactly when both pass. `shifted_gen` has no index bit set
/// and `capacity <= idx_mask + 1`, so if the generation bits differ, `x` has a bit above
/// `idx_mask` and is at least `capacity`; if they match, `x` is the index `req_id &
/// idx_mask`, in range exactly when it is below `capacity`. The slice's own bounds check is
/// that comparison; which of the two failed is sorted out on the error path
/// (`check_matches_separate_generation_and_range_checks` compares every req_id with the
/// separate checks).
#[inline(always)]
fn check(s: &Shared, req_id: u16) -> Result<(u16, &Slot, u64), ReqIdProblem> {
    let id = req_id ^ s.shifted_gen;
    let Some(slot) = s.slots.get(usize::from(id)) else {
        return Err(if id & !s.idx_mask != 0 {
            ReqIdProblem::StaleGeneration
        } else {
            ReqIdProblem::OutOfRange
        });
    };
    // Acquire: pairs with `publish`'s Release store (step 2), so the `wr_id` read below
    // is the one written for this post.
    if !slot.posted.load(Ordering::Acquire) {
        return Err(ReqIdProblem::NotOutstanding);
    }
    Ok((id, slot, slot.wr_id.load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(p: &mut WridPool, wr_id: u64) -> u16 {
        let r = p.alloc(wr_id).unwrap();
        p.publish();
        r
    }

    #[test]
    fn alloc_complete_out_of_order_and_full() {
        let (mut p, mut c) = WridPool::new(3, 0).unwrap();
        let a = post(&mut p, 100);
        let b = post(&mut p, 200);
        let cc = post(&mut p, 300);
        assert!(p.is_full());
        assert_eq!(p.alloc(400), None);
        assert_eq!(c.complete(b), Ok(200));
        assert_eq!(c.complete(b), Err(ReqIdProblem::NotOutstanding));
        let d = post(&mut p, 400);
        assert_eq!(d, b, "the freed id is reused");
        assert_eq!(c.complete(cc), Ok(300));
        assert_eq!(c.complete(a), Ok(100));
        assert_eq!(c.complete(d), Ok(400));
        assert_eq!(p.outstanding(), 0);
    }

    #[test]
    fn distrusts_device_req_ids() {
        // capacity 3 -> 2 index bits (mask 0b11); id 3 exists in the mask but not the pool.
        let (_p, mut c) = WridPool::new(3, 0).unwrap();
        assert_eq!(c.complete(3), Err(ReqIdProblem::OutOfRange));
        assert_eq!(c.complete(0), Err(ReqIdProblem::NotOutstanding));
        // any bit above the index bits is a generation mismatch (generation 0 here)
        assert_eq!(c.complete(0x8000), Err(ReqIdProblem::StaleGeneration));
        assert_eq!(c.complete(0xffff), Err(ReqIdProblem::StaleGeneration));
    }

    /// `check`'s one comparison gives what the generation test, then the range test, then
    /// the posted test give, for every req_id and pools of several sizes and generations
    /// (an id posted, the others not).
    #[test]
    fn check_matches_separate_generation_and_range_checks() {
        for (cap, gen) in [
            (1, 0),
            (1, 5),
            (3, 0),
            (3, 0x3fff),
            (4, 5),
            (100, 77),
            (4096, 9),
        ]
        .into_iter()
        // The largest pools natively only: under Miri building their slots alone takes
        // minutes.
        .chain(
            [(65535, 0), (65536, 0), (65536, 3), (40000, 1)]
                .into_iter()
                .filter(|_| !cfg!(miri)),
        ) {
            let (mut p, c) = WridPool::new(cap, gen).unwrap();
            let posted = post(&mut p, 42);
            let s = &*c.shared;
            // Every req_id natively; under Miri (which checks the accesses, not the
            // arithmetic) a stride and the edges.
            let stride = if cfg!(miri) { 509 } else { 1 };
            let last = s.shifted_gen | (cap - 1) as u16;
            let edges = [
                posted,
                last,
                last.wrapping_add(1),
                s.shifted_gen | s.idx_mask,
            ];
            for req_id in (0..=u16::MAX).step_by(stride).chain(edges) {
                let want = if req_id & !s.idx_mask != s.shifted_gen {
                    Err(ReqIdProblem::StaleGeneration)
                } else if u32::from(req_id & s.idx_mask) >= cap {
                    Err(ReqIdProblem::OutOfRange)
                } else if req_id != posted {
                    Err(ReqIdProblem::NotOutstanding)
                } else {
                    Ok(42)
                };
                assert_eq!(
                    c.lookup(req_id),
                    want,
                    "capacity {cap} gen {gen} req_id {req_id:#x}"
                );
            }
        }
        // A 64-bit pool has no slots: every id is out of range for `complete`.
        let (_p, c) = WridPool::new_64bit(8).unwrap();
        assert_eq!(c.lookup(0), Err(ReqIdProblem::OutOfRange));
        assert_eq!(c.lookup(0xffff), Err(ReqIdProblem::OutOfRange));
    }

    #[test]
    fn staged_ids_are_refused_until_published() {
        let (mut p, mut c) = WridPool::new(4, 0).unwrap();
        let a = p.alloc(1).unwrap();
        // The device cannot complete what was never handed to it.
        assert_eq!(c.complete(a), Err(ReqIdProblem::NotOutstanding));
        assert_eq!(p.staged(), 1);
        p.publish();
        assert_eq!(p.staged(), 0);
        assert_eq!(c.lookup(a), Ok(1));
        assert_eq!(c.complete(a), Ok(1));
    }

    #[test]
    fn generation_bits() {
        // capacity 4 -> 2 index bits; gen 5 -> req_id bits 15:2 = 5 -> 0x14 | id.
        let (mut p, mut c) = WridPool::new(4, 5).unwrap();
        let r = post(&mut p, 7);
        assert_eq!(r, 0x14);
        let old = WridPool::new(4, 4).unwrap().0.shared.shifted_gen;
        assert_eq!(c.complete(old), Err(ReqIdProblem::StaleGeneration));
        assert_eq!(c.complete(r), Ok(7));
        // full 16-bit pool: no generation bits at all
        let (mut big, _) = WridPool::new(65536, 9).unwrap();
        assert_eq!(big.alloc(1), Some(0));
    }

    #[test]
    fn rollback_restores_state_and_only_staged_ids() {
        let (mut p, mut c) = WridPool::new(4, 0).unwrap();
        let a = post(&mut p, 1);
        let b = p.alloc(2).unwrap();
        p.alloc(3).unwrap();
        p.rollback(5); // more than staged: only the 2 staged go back
        assert_eq!(p.outstanding(), 1);
        assert_eq!(c.complete(b), Err(ReqIdProblem::NotOutstanding));
        assert_eq!(c.complete(a), Ok(1));
        // The rolled-back ids come out again, in the same order.
        assert_eq!(p.alloc(9), Some(b));
        assert!(WridPool::new(0, 0).is_err());
        assert!(WridPool::new(65537, 0).is_err());
    }

    #[test]
    fn rollback_after_completions_never_duplicates_an_id() {
        // Fill, complete everything out of order, stage two, roll them back, and check the
        // pool still hands out exactly `capacity` distinct ids.
        let (mut p, mut c) = WridPool::new(4, 0).unwrap();
        let ids: Vec<u16> = (0..4).map(|i| post(&mut p, i)).collect();
        for &i in ids.iter().rev() {
            c.complete(i).unwrap();
        }
        p.alloc(10).unwrap();
        p.alloc(11).unwrap();
        p.rollback(2);
        let mut got: Vec<u16> = (0..4).map(|i| post(&mut p, 20 + i)).collect();
        assert_eq!(p.alloc(99), None);
        got.sort_unstable();
        assert_eq!(got, vec![0, 1, 2, 3]);
    }

    #[test]
    fn run_takes_only_the_ids_free_at_its_start() {
        let (mut p, mut c) = WridPool::new(4, 2).unwrap();
        let mut run = p.run(10);
        let ids: Vec<u16> = (0..4).map(|i| run.post(100 + i).unwrap()).collect();
        assert_eq!(run.post(104), None, "4 ids, 4 posts");
        drop(run);
        assert_eq!(p.outstanding(), 4);
        // generation 2 above 2 index bits: 0b10_00 | id
        assert_eq!(ids, [8, 9, 10, 11]);
        // Posted at once: the completer accepts them.
        assert_eq!(c.complete(ids[2]), Ok(102));
        assert_eq!(c.complete(ids[0]), Ok(100));
        let mut run = p.run(1);
        assert_eq!(run.post(200), Some(ids[2]), "asked for one");
        assert_eq!(run.post(201), None);
        drop(run);
        let mut run = p.run(5);
        // One id is free now; one the completer frees during the run waits for the next.
        assert_eq!(run.post(300), Some(ids[0]));
        assert_eq!(c.complete(ids[1]), Ok(101));
        assert_eq!(run.post(301), None);
        drop(run);
        assert_eq!(p.alloc_posted(400), Some(ids[1]));
        assert_eq!(p.run(3).post(5), None, "full");
        for (id, w) in [(ids[2], 200), (ids[0], 300), (ids[1], 400), (ids[3], 103)] {
            assert_eq!(c.complete(id), Ok(w));
        }
        assert_eq!(p.outstanding(), 0);
    }

    /// A run takes its ids from one slice of the free ring: it stops at the ring's end even
    /// with more ids free, and the next run goes on from the ring's start.
    #[test]
    fn run_stops_at_the_free_rings_end() {
        let (mut p, mut c) = WridPool::new(4, 0).unwrap();
        let first: Vec<u16> = (0..3).map(|i| p.alloc_posted(i).unwrap()).collect();
        for (&id, w) in first.iter().zip(0..) {
            assert_eq!(c.complete(id), Ok(w));
        }
        // head 3, four ids free: the cell at position 3 is the ring's last.
        let mut run = p.run(4);
        let last = run.post(10).unwrap();
        assert_eq!(run.post(11), None, "the ring's end");
        drop(run);
        assert_eq!(p.outstanding(), 1);
        let mut run = p.run(4);
        let rest: Vec<u16> = (12..15).map(|w| run.post(w).unwrap()).collect();
        assert_eq!(run.post(15), None, "all four taken");
        drop(run);
        assert_eq!(rest, first, "freed in that order");
        assert_eq!(c.complete(last), Ok(10));
        for (&id, w) in rest.iter().zip(12..) {
            assert_eq!(c.complete(id), Ok(w));
        }
        assert_eq!(p.outstanding(), 0);
    }

    /// The poster pops ids up to the last `tail` it loaded without loading it again, and loads
    /// it when those run out (or a run wants more): freed ids are never missed once the cache
    /// is empty, never handed out before they are freed, and rollback keeps the count right.
    #[test]
    fn cached_tail_is_reloaded_only_when_it_runs_out() {
        let (mut p, mut c) = WridPool::new(4, 1).unwrap();
        let a = p.alloc_posted(10).unwrap();
        assert_eq!(c.complete(a), Ok(10));
        // Three ids left from the first load: they come out without a reload.
        let b: Vec<u16> = (11..14).map(|w| p.alloc_posted(w).unwrap()).collect();
        assert_eq!(p.tail_seen, 4, "no reload while the cached count lasted");
        assert!(!b.contains(&a));
        // The cache is empty: the next post loads `tail` and finds `a` free again.
        assert_eq!(p.alloc_posted(14), Some(a));
        assert_eq!(p.tail_seen, 5);
        assert_eq!(p.alloc_posted(15), None, "full after a fresh load");
        assert_eq!(p.run(1).post(15), None);
        // Two freed: a run of one takes one (reloading), a run wanting two reloads again and
        // gets only the one left.
        assert_eq!(c.complete(b[1]), Ok(12));
        assert_eq!(c.complete(b[0]), Ok(11));
        assert_eq!(p.run(1).post(20), Some(b[1]));
        assert_eq!(p.tail_seen, 7);
        let mut run = p.run(2);
        assert_eq!(run.post(21), Some(b[0]));
        assert_eq!(run.post(22), None);
        drop(run);
        // Staged ids rolled back count as free again without a reload.
        assert_eq!(c.complete(b[2]), Ok(13));
        assert_eq!(p.alloc(30), Some(b[2]));
        assert_eq!(p.tail_seen, 8);
        p.rollback(1);
        assert_eq!(p.outstanding(), 3);
        assert_eq!(p.alloc_posted(31), Some(b[2]));
        assert_eq!(p.tail_seen, 8);
        for (id, w) in [(a, 14), (b[1], 20), (b[0], 21), (b[2], 31)] {
            assert_eq!(c.complete(id), Ok(w));
        }
        assert_eq!(p.outstanding(), 0);
    }

    /// 64-bit ids: no slots, the wr_id's low 16 bits as the req_id, at most `capacity`
    /// outstanding, and a completion with nothing outstanding refused; staged ids count only
    /// once published, rolled-back ones never.
    #[test]
    fn sixty_four_bit_pool_counts_and_refuses() {
        let (mut p, mut c) = WridPool::new_64bit(4).unwrap();
        assert!(p.is_64bit());
        let hi = |w: u64| move || w;
        assert_eq!(c.complete_send(0, hi(0)), Err(ReqIdProblem::NotOutstanding));
        let w = 0x0123_4567_89ab_cdef_u64;
        assert_eq!(p.alloc_posted_64(w), Some(0xcdef));
        // The completer puts the CQE's bits 63:16 over the req_id (bits 15:0 of `hi` ignored).
        assert_eq!(c.complete_send(0xcdef, hi(w | 0xffff)), Ok(w));
        assert_eq!(
            c.complete_send(0xcdef, hi(w)),
            Err(ReqIdProblem::NotOutstanding)
        );
        for i in 0..4 {
            assert!(p.alloc_posted_64(i).is_some());
        }
        assert_eq!(p.alloc_posted_64(9), None, "full at capacity");
        assert_eq!(p.outstanding(), 4);
        assert_eq!(c.complete_send(1, hi(0)), Ok(1));
        // A staged id is not outstanding until published; rolled back, it never is.
        assert_eq!(p.alloc(0x7_0005), Some(5));
        assert_eq!(c.complete_send(0, hi(0)), Ok(0));
        assert_eq!(c.complete_send(0, hi(0)), Ok(0));
        assert_eq!(c.complete_send(0, hi(0)), Ok(0));
        assert_eq!(
            c.complete_send(5, hi(0x7_0000)),
            Err(ReqIdProblem::NotOutstanding),
            "staged, not published"
        );
        p.rollback(1);
        assert_eq!(p.alloc(6), Some(6));
        p.publish();
        assert_eq!(c.complete_send(6, hi(0)), Ok(6));
        assert_eq!(c.complete_send(6, hi(0)), Err(ReqIdProblem::NotOutstanding));
        // Many rounds of a full queue: the counters keep agreeing.
        for round in 0..10_000u64 {
            for k in 0..4 {
                assert_eq!(p.alloc_posted_64(round << 16 | k), Some(k as u16));
            }
            assert_eq!(p.alloc_posted_64(0), None);
            for k in 0..4 {
                assert_eq!(
                    c.complete_send(k as u16, hi(round << 16)),
                    Ok(round << 16 | k)
                );
            }
        }
        assert_eq!(p.outstanding(), 0);
    }

    /// Post on one thread, complete on another, out of order, wrapping the free ring many
    /// times (ids taken one by one and published, rolled back, or posted from a run): every
    /// wr_id comes back exactly once and with its own value.
    #[test]
    fn poster_and_completer_on_two_threads() {
        const CAP: u32 = 8;
        // Under Miri (about 10^4 times slower) a few hundred WRs still wrap the 8-entry free
        // ring dozens of times and interleave the two threads; 30 000 would take > 15 min.
        const N: u64 = if cfg!(miri) { 300 } else { 30_000 };
        let (mut p, mut c) = WridPool::new(CAP, 3).unwrap();
        // The "device": a channel of req_ids in posting order, which the completer takes
        // out of order (it keeps a few and completes them reversed).
        let (tx, rx) = std::sync::mpsc::sync_channel::<(u16, u64)>(CAP as usize);
        let poster = std::thread::spawn(move || {
            let mut next = 0u64;
            while next < N {
                let batch = (1 + next % 3).min(N - next);
                let mut got = Vec::new();
                if next % 4 == 1 {
                    // the post_send path: ids posted at once from a run
                    let mut run = p.run(batch as u32);
                    for k in 0..batch {
                        match run.post(next + k) {
                            Some(r) => got.push((r, next + k)),
                            None => break,
                        }
                    }
                    drop(run);
                    next += got.len() as u64;
                    for g in got {
                        tx.send(g).unwrap();
                    }
                    continue;
                }
                for k in 0..batch {
                    match p.alloc(next + k) {
                        Some(r) => got.push((r, next + k)),
                        None => break,
                    }
                }
                if got.is_empty() {
                    std::hint::spin_loop();
                    continue;
                }
                if next % 7 == 0 && got.len() > 1 {
                    // an aborted batch: nothing published, ids reused next round
                    p.rollback(got.len() as u32);
                    let again = p.alloc(next).unwrap();
                    assert_eq!(again, got[0].0, "rollback hands the same id out again");
                    got.truncate(1);
                }
                p.publish();
                next += got.len() as u64;
                for g in got {
                    tx.send(g).unwrap();
                }
            }
        });
        let mut seen = 0u64;
        let mut sum = 0u64;
        let mut held: Vec<(u16, u64)> = Vec::new();
        while let Ok(g) = rx.recv() {
            held.push(g);
            if held.len() >= 3 {
                while let Some((r, w)) = held.pop() {
                    assert_eq!(c.complete(r), Ok(w));
                    // Completed once: either still free, or already re-posted by the other
                    // thread for a later WR — never the old wr_id again.
                    match c.lookup(r) {
                        Err(ReqIdProblem::NotOutstanding) => {}
                        Ok(w2) => assert!(w2 > w, "id {r} re-posted with an older wr_id"),
                        Err(e) => panic!("{e:?}"),
                    }
                    seen += 1;
                    sum += w;
                }
            }
        }
        while let Some((r, w)) = held.pop() {
            assert_eq!(c.complete(r), Ok(w));
            seen += 1;
            sum += w;
        }
        poster.join().unwrap();
        assert_eq!(seen, N);
        assert_eq!(sum, N * (N - 1) / 2);
    }
}
