//! The per-CQ QP table: which QP a CQE's 16-bit `qp_num` names, and the completing halves of
//! that QP's wr_id pools (the [`QpLookup`] a [`CompletionQueue`](crate::CompletionQueue) poll
//! resolves through; the core's `efa` module docs say how CQs and QPs use it). No syscalls:
//! the core registers a QP's completers when it creates the QP and unregisters them when it
//! destroys it. This file holds every `unsafe` of the EFA data path's sharing: the table's raw
//! pointers and the entries' `UnsafeCell`s.
//!
//! # Reading the table without a lock: epoch and generation
//!
//! One poller reads the table (the [`TablePoller`] that [`QpTable::new`] hands out, owned by
//! the CQ ring); QPs register and unregister on any thread under `ctl`. Something a poll may
//! read (an entry, a replaced cell array) is freed only after three steps on the control
//! path: (a) take it out of the table, (b) bump `generation` (SeqCst), (c) load `epoch`
//! (SeqCst) and, if odd, wait until it changes (`retire_and_wait` does (b) and (c)). A poll
//! (d) stores an odd `epoch` (SeqCst), (e) loads `generation` (SeqCst), reads the table, and
//! stores an even `epoch` (Release) when done. (b), (c), (d) and (e) are in one total order S:
//! * (b) before (e): (e) reads (b) or a later bump (an RMW, so in (b)'s release sequence) and
//!   synchronizes with it, so (a) happens-before everything the poll reads: it cannot find
//!   what was taken out.
//! * (e) before (b): then (d) < (e) < (b) < (c) in S, so (c) sees the odd epoch of (d) (or a
//!   later value) and the control path waits until this poll's Release store of the even
//!   epoch, which its Acquire load then reads: the poll's reads happen-before the free.
//!
//! This is also what lets the poller keep the entry it found last *across* polls: it
//! remembers the generation read in the poll that found it, and a later poll whose (e) reads
//! the same value uses the entry without probing. The entry was in the table at the first
//! poll, so the bump of the unregister that takes it out comes after that value; reading the
//! same value again means that bump comes after this poll's (e) in S: the second case, in
//! which the unregister waits for this poll before freeing the entry.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{QpLookup, QpPools, WridCompleter};

/// What one CQ keeps of one QP: the completing halves of the QP's queues that complete here.
struct CqEntry {
    qpn: u16,
    /// The sub-CQs this QP's queues complete into on this CQ (a bit per sub-CQ, see
    /// [`QpTable::register`]).
    subs: u64,
    send: UnsafeCell<Option<WridCompleter>>,
    recv: UnsafeCell<Option<WridCompleter>>,
}

/// An open-addressed array of entry pointers (null = never used, `tomb()` = removed).
struct Slots {
    mask: usize,
    cells: Box<[AtomicPtr<CqEntry>]>,
}

/// Smallest table: 8 pointers (64 bytes).
const MIN_SLOTS: usize = 8;

/// The "removed" marker: an address no allocation of a `CqEntry` can have (the first aligned
/// non-null address lies in the never-mapped zero page). Compared, never dereferenced.
fn tomb() -> *mut CqEntry {
    NonNull::<CqEntry>::dangling().as_ptr()
}

impl Slots {
    fn new(n: usize) -> Box<Slots> {
        let n = n.max(MIN_SLOTS).next_power_of_two();
        Box::new(Slots {
            mask: n - 1,
            cells: (0..n).map(|_| AtomicPtr::new(ptr::null_mut())).collect(),
        })
    }

    /// Home cell of a QP number: a multiplicative hash, so consecutive numbers spread out.
    #[inline]
    fn home(&self, qpn: u16) -> usize {
        (usize::from(qpn).wrapping_mul(0x9e37_79b9)) >> 8 & self.mask
    }
}

/// Control-path bookkeeping (under the mutex): live entries and used cells (live + tombs),
/// and per sub-CQ the registered QPs whose completions land there (`refs[i]` > 0 is bit `i`
/// of [`QpTable::live_subs`]).
struct Ctl {
    live: usize,
    used: usize,
    refs: [u32; 64],
}

/// The bit of sub-CQ `idx` of a CQ of `num_sub_cqs` sub-CQs, as [`QpTable::register`] takes
/// it: an index the CQ does not have (the device said so; it never should) gives every bit,
/// so a poll then visits every sub-CQ, as if no sub-CQ were known unused.
pub fn sub_cq_bit(idx: u16, num_sub_cqs: u16) -> u64 {
    if idx < num_sub_cqs.min(64) {
        1 << idx
    } else {
        u64::MAX
    }
}

/// The QPs completing into one CQ, keyed by QP number. Memory is sized by use: 8 cells to
/// start with, doubled (on the control path, in `register`) to keep at most half the cells
/// used, so a CQ with a few QPs costs a few hundred bytes.
pub struct QpTable {
    slots: AtomicPtr<Slots>,
    /// Odd while a poll may be reading the table. Written only by the table's one
    /// [`TablePoller`] (plain stores: it is the only writer), read by the control path.
    epoch: AtomicU64,
    /// Bumped (SeqCst, under `ctl`) each time something a poll may read is taken out of the
    /// table to be freed: an entry (`unregister`) or the cell array (`rebuild`). See the
    /// module docs. 64 bits: never wraps.
    generation: AtomicU64,
    /// Sub-CQs some registered QP completes into (the union of the entries' `subs`), stored
    /// under `ctl`. A poll visits only these and the ones its poller is draining: libefa's
    /// `ref_cnt` (a sub-CQ no QP references holds no CQE).
    live_subs: AtomicU64,
    /// Sub-CQs of entries unregistered since the poller last looked (`fetch_or` under `ctl`
    /// before the generation bump; the poller takes them when it sees the bump): they may
    /// still hold CQEs of the QP that is gone, which the poller drains (consumes and counts
    /// as stale) before it stops visiting them.
    retired_subs: AtomicU64,
    /// Serialises register/unregister (control path only; poll never takes it).
    ctl: Mutex<Ctl>,
}

// SAFETY: the table is shared between the CQ's one poller (the `TablePoller` `new` made,
// through its `&mut`) and QPs registering and unregistering on any thread (under `ctl`). The
// entries' `UnsafeCell`s are touched only by the single poller, or by the registrar before
// the entry is published / after the epoch protocol proved no poller can reach it; every
// other shared field is atomic or behind the mutex. `WridCompleter` is `Send`.
unsafe impl Sync for QpTable {}
// SAFETY: as above; the raw pointers own heap allocations that can be freed on any thread.
unsafe impl Send for QpTable {}

impl QpTable {
    /// An empty table and its one poller (the only way to read the table: there is exactly
    /// one [`TablePoller`] per table, so at most one poll runs at a time).
    pub fn new() -> (Arc<QpTable>, TablePoller) {
        let table = Arc::new(QpTable {
            slots: AtomicPtr::new(Box::into_raw(Slots::new(MIN_SLOTS))),
            epoch: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            live_subs: AtomicU64::new(0),
            retired_subs: AtomicU64::new(0),
            ctl: Mutex::new(Ctl {
                live: 0,
                used: 0,
                refs: [0; 64],
            }),
        });
        let poller = TablePoller {
            table: table.clone(),
            generation: 0,
            draining: 0,
            last_qpn: NO_QP,
            last: NonNull::dangling(),
        };
        (table, poller)
    }

    fn ctl(&self) -> MutexGuard<'_, Ctl> {
        self.ctl.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes of the current cell array (for tests of the memory bound).
    #[cfg(test)]
    fn cells(&self) -> usize {
        let _g = self.ctl();
        // SAFETY: under `ctl`, nobody replaces or frees the array.
        unsafe { &*self.slots.load(Ordering::Acquire) }.cells.len()
    }

    /// Registers QP `qpn` with the completing halves of its queues that complete into this
    /// CQ, whose CQEs land in the sub-CQs of `subs` (a bit per sub-CQ, [`sub_cq_bit`] of the
    /// kernel's `send_sub_cq_idx`/`recv_sub_cq_idx`): polls visit them from now on. Fails
    /// (giving the halves back) if the number is taken: the device handed it out twice.
    pub fn register(
        &self,
        qpn: u16,
        subs: u64,
        send: Option<WridCompleter>,
        recv: Option<WridCompleter>,
    ) -> Result<(), (Option<WridCompleter>, Option<WridCompleter>)> {
        let mut ctl = self.ctl();
        // SAFETY: under `ctl` only we replace the array, so it stays live while we use it.
        let cur = unsafe { &*self.slots.load(Ordering::Acquire) };
        if find_in(cur, qpn).is_some() {
            return Err((send, recv));
        }
        if (ctl.used + 1) * 2 > cur.cells.len() {
            let want = ((ctl.live + 1) * 4).max(MIN_SLOTS);
            self.rebuild(want);
            ctl.used = ctl.live;
        }
        // Before the entry is published: a poll that finds it visits its sub-CQs (or, if it
        // loaded the mask first, sees its CQEs at the next poll).
        for (i, r) in ctl.refs.iter_mut().enumerate() {
            *r += u32::from(subs >> i & 1 == 1);
        }
        // Relaxed: the mask only says where to look; nothing read through it is guarded by
        // it (CQEs are read after their phase, entries through the table's cells).
        self.live_subs.store(
            self.live_subs.load(Ordering::Relaxed) | subs,
            Ordering::Relaxed,
        );
        let entry = Box::into_raw(Box::new(CqEntry {
            qpn,
            subs,
            send: UnsafeCell::new(send),
            recv: UnsafeCell::new(recv),
        }));
        // SAFETY: as above (the array may be the new one from `rebuild`).
        let cur = unsafe { &*self.slots.load(Ordering::Acquire) };
        let mut i = cur.home(qpn);
        loop {
            let c = &cur.cells[i];
            let p = c.load(Ordering::Relaxed);
            if p.is_null() || p == tomb() {
                if p.is_null() {
                    ctl.used += 1;
                }
                // Release: the entry was fully built before a poller's Acquire load sees it.
                c.store(entry, Ordering::Release);
                break;
            }
            // At most half the cells are used, so an empty one is found.
            i = (i + 1) & cur.mask;
        }
        ctl.live += 1;
        Ok(())
    }

    /// Removes QP `qpn`, waits until no poll can still reach its entry, and frees it (and the
    /// completing halves in it). Control path: may yield while a poll is running.
    pub fn unregister(&self, qpn: u16) {
        let mut ctl = self.ctl();
        // SAFETY: under `ctl` the array is not replaced or freed.
        let cur = unsafe { &*self.slots.load(Ordering::Acquire) };
        let Some(i) = find_in(cur, qpn) else {
            return;
        };
        // Relaxed: step (a) of the module docs; the SeqCst (so Release) bump just below
        // publishes it to every poll that reads the bumped generation.
        let old = cur.cells[i].swap(tomb(), Ordering::Relaxed);
        ctl.live -= 1;
        // SAFETY: `old` is a live entry (freed only below, by us, under `ctl`).
        let subs = unsafe { (*old).subs };
        let mut live = 0;
        for (i, r) in ctl.refs.iter_mut().enumerate() {
            *r -= u32::from(subs >> i & 1 == 1);
            live |= u64::from(*r != 0) << i;
        }
        // The QP's sub-CQs may still hold its CQEs: the poller drains them. Published by
        // the generation bump in `retire_and_wait` (a release the poller's load of the
        // generation synchronizes with before it takes these bits), so a poll that begins
        // after this returns visits them even if the live mask no longer has them.
        self.retired_subs.fetch_or(subs, Ordering::Relaxed);
        self.live_subs.store(live, Ordering::Relaxed);
        self.retire_and_wait();
        // SAFETY: `old` came from `Box::into_raw` in `register`; it is out of the table and
        // no poll can still hold it (epoch protocol), so we own it again.
        drop(unsafe { Box::from_raw(old) });
    }

    /// Replaces the array by one of `n` cells holding the live entries (control path, under
    /// `ctl`), and frees the old one once no poll can read it.
    fn rebuild(&self, n: usize) {
        let new = Slots::new(n);
        // SAFETY: under `ctl` (our caller holds it) the array is not replaced or freed.
        let cur = unsafe { &*self.slots.load(Ordering::Acquire) };
        for c in cur.cells.iter() {
            let p = c.load(Ordering::Relaxed);
            if p.is_null() || p == tomb() {
                continue;
            }
            // SAFETY: a live entry pointer: entries are freed only by `unregister`, under
            // `ctl`, after taking them out of the array.
            let qpn = unsafe { (*p).qpn };
            let mut i = new.home(qpn);
            while !new.cells[i].load(Ordering::Relaxed).is_null() {
                i = (i + 1) & new.mask;
            }
            new.cells[i].store(p, Ordering::Relaxed);
        }
        // Release: publishes the new cells, written above, to a poller's Acquire load of
        // `slots`; this is also step (a) of the module docs, published by the bump below.
        let old = self.slots.swap(Box::into_raw(new), Ordering::Release);
        self.retire_and_wait();
        // SAFETY: `old` came from `Box::into_raw`; it is out of `slots` and no poll reads it
        // any more (epoch protocol); the entries it pointed to live on in the new array.
        drop(unsafe { Box::from_raw(old) });
    }

    /// Steps (b) and (c) of the module docs, after the caller took something out of the
    /// table (step (a)): bumps the generation, then waits until any poll that could still
    /// hold what was taken out has ended. Afterwards the caller may free it.
    fn retire_and_wait(&self) {
        // SeqCst: (b), in the total order S with the poll's epoch store (d) and generation
        // load (e) and with the epoch load just below (c); also a release that (a) is
        // sequenced before, so a poll whose (e) reads this bump sees (a).
        self.generation.fetch_add(1, Ordering::SeqCst);
        // SeqCst: (c). Acquire too: if it reads a poll's Release store of an even epoch
        // (or a later store), that poll's reads happen-before our free.
        let e = self.epoch.load(Ordering::SeqCst);
        if e % 2 == 1 {
            // Acquire: the poll's Release store that moves the epoch on orders its reads of
            // the table before our free.
            while self.epoch.load(Ordering::Acquire) == e {
                std::thread::yield_now();
            }
        }
    }
}

/// `last_qpn` when no entry is cached (QP numbers are 16 bits).
const NO_QP: u32 = u32::MAX;

/// The one reader of a [`QpTable`] (made with it by [`QpTable::new`]; owned by the CQ
/// ring): starts polls and keeps, across them, the entry found last and the generation read
/// when it was found (see the module docs).
pub struct TablePoller {
    table: Arc<QpTable>,
    /// The generation read by the poll that found `last` (or by the last poll that found
    /// the cache stale).
    generation: u64,
    /// QP number of `last` (`NO_QP`: nothing cached).
    last_qpn: u32,
    /// Sub-CQs that may hold CQEs of unregistered QPs (taken from `retired_subs`), visited
    /// until a poll finds them empty ([`Lookup::sub_cq_empty`]).
    draining: u64,
    /// The entry of QP `last_qpn`, live while the table's generation is `generation`. May
    /// dangle between polls: it is only compared, or dereferenced inside a poll whose
    /// generation load returned `generation`. Never null (`NonNull::dangling()` until the
    /// first probe, with `last_qpn` `NO_QP`), which lets the compiler drop a null test per
    /// CQE where the cached entry's pools are taken.
    last: NonNull<CqEntry>,
}

// SAFETY: `last` is only dereferenced inside a poll, by the poller's owner through `&mut`,
// after proving the entry live (module docs); the entries' contents (`WridCompleter`s) are
// `Send`. Moving the poller to another thread moves the only reader of the table with it.
unsafe impl Send for TablePoller {}

impl TablePoller {
    /// Starts a poll: the returned lookup reads the table until dropped. Between polls the
    /// poller holds nothing of the table (a QP may be destroyed, even on this thread,
    /// without waiting).
    #[inline(always)]
    pub fn begin(&mut self) -> Lookup<'_> {
        // Relaxed: we are the epoch's only writer, so this reads our own last store (a move
        // of the poller to another thread happens-after it).
        let odd = self.table.epoch.load(Ordering::Relaxed).wrapping_add(1);
        // SeqCst: step (d) of the module docs, in the total order S with the control path's
        // generation bump and epoch load. A store, not an RMW: we are the only writer.
        self.table.epoch.store(odd, Ordering::SeqCst);
        // SeqCst: step (e), after (d) in S (program order). Acquire too: reading a bump
        // makes what it published (the removal) visible to this poll.
        let g = self.table.generation.load(Ordering::SeqCst);
        if g != self.generation {
            // Something was taken out of the table since `last` was found: it may be `last`
            // (freed meanwhile), so forget it and probe again.
            self.generation = g;
            self.last_qpn = NO_QP;
            // Sub-CQs of the QPs unregistered since (their bump is what we just read, or
            // one before it): visited until found empty. Relaxed: the generation load
            // above synchronized with the bump that published them.
            self.draining |= self.table.retired_subs.swap(0, Ordering::Relaxed);
        }
        Lookup { p: self, odd }
    }
}

/// Index of QP `qpn`'s cell in `s`, probing from its home cell past tombstones to the first
/// never-used cell (at most every cell once).
#[inline]
fn find_in(s: &Slots, qpn: u16) -> Option<usize> {
    let mut i = s.home(qpn);
    for _ in 0..s.cells.len() {
        // Acquire: an entry we find was fully built before `register` stored it.
        let p = s.cells[i].load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null, non-tomb cell points to a live entry: entries are freed only
        // after being replaced by a tomb and after every poll that could see them ended
        // (epoch protocol); the control path holds `ctl`, under which nothing is freed.
        if p != tomb() && unsafe { (*p).qpn } == qpn {
            return Some(i);
        }
        i = (i + 1) & s.mask;
    }
    None
}

impl Drop for QpTable {
    fn drop(&mut self) {
        let s = *self.slots.get_mut();
        // SAFETY: `&mut self`: no poll or registration runs; `s` came from `Box::into_raw`.
        let s = unsafe { Box::from_raw(s) };
        for c in s.cells.iter() {
            let p = c.load(Ordering::Relaxed);
            if !p.is_null() && p != tomb() {
                // SAFETY: a live entry made by `Box::into_raw` in `register`, reachable only
                // from this array, which is being dropped.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

/// The [`QpLookup`] a poll hands the provider: resolves QP numbers through the table (one
/// at a time: it borrows the table's one [`TablePoller`] mutably).
pub struct Lookup<'p> {
    p: &'p mut TablePoller,
    odd: u64,
}

impl Drop for Lookup<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let epoch = &self.p.table.epoch;
        // Relaxed: we are the epoch's only writer, so this reads the odd value `begin`
        // stored (loaded again rather than kept: one register fewer across the poll).
        let odd = self.odd;
        // Release: our reads of the array and entries happen-before a control path that
        // sees the epoch move on (its Acquire load) and frees them. A store, not an RMW: we
        // are the only writer.
        epoch.store(odd.wrapping_add(1), Ordering::Release);
    }
}

impl Lookup<'_> {
    /// Looks QP `qp_num` up in the table and caches its entry in the poller (`last`);
    /// `false` if it is not there. (Inline: out of line it cost `Cq::poll` of one CQE 13
    /// instructions, its loop keeping more in callee-saved registers around the call.)
    #[inline(always)]
    fn probe(&mut self, qp_num: u16) -> bool {
        let p = &mut *self.p;
        // Acquire: the array's cells were written before `rebuild` published it.
        let s = p.table.slots.load(Ordering::Acquire);
        // SAFETY: `s` was the table's array during this poll (our epoch is odd); a
        // `rebuild` that replaces it frees it only after our epoch moves on, which happens
        // when we are dropped (module docs).
        let s = unsafe { &*s };
        let Some(i) = find_in(s, qp_num) else {
            return false;
        };
        let e = s.cells[i].load(Ordering::Acquire);
        let Some(e) = NonNull::new(e) else {
            return false;
        };
        if e.as_ptr() == tomb() {
            return false;
        }
        p.last = e;
        p.last_qpn = u32::from(qp_num);
        // `p.generation` is this poll's (set in `begin`): the pair is what the next polls
        // check.
        true
    }
}

impl QpLookup for Lookup<'_> {
    /// The sub-CQs a registered QP completes into, and those being drained.
    #[inline(always)]
    fn sub_cqs(&mut self) -> u64 {
        // Relaxed: see `live_subs`. A QP registered during this poll is not behind any CQE
        // of this poll's; one registered before it (happens-before) is seen.
        self.p.table.live_subs.load(Ordering::Relaxed) | self.p.draining
    }

    /// Sub-CQ `idx` held nothing when this poll looked: any CQE of a QP gone before the poll
    /// began has been consumed, so it is no longer drained.
    #[inline(always)]
    fn sub_cq_empty(&mut self, idx: u16) {
        self.p.draining &= !(1u64 << (idx & 63));
    }

    #[inline]
    fn find(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        if u32::from(qp_num) != self.p.last_qpn && !self.probe(qp_num) {
            return None;
        }
        self.find_cached(qp_num)
    }

    /// The QP found last, if it is `qp_num`; no probe.
    #[inline(always)]
    fn find_cached(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        let p = &mut *self.p;
        if u32::from(qp_num) != p.last_qpn {
            // (Also when nothing is cached: `NO_QP` is no 16-bit number.)
            return None;
        }
        // A cached entry is live for this whole poll: it was in the table when found, in a
        // poll whose generation was `p.generation`, and this poll read the same generation
        // after its epoch went odd, so an `unregister` that took it out since waits for
        // this poll to end before freeing it (module docs). An entry an `unregister` takes
        // out during this poll is likewise freed only after we are dropped, and no QP can
        // register the same number meanwhile (`unregister` holds `ctl` until then), so
        // using it for the rest of this poll is like having polled just before the
        // unregister. (Checking the cell on every hit would cost ~7 instructions per CQE
        // for no different outcome.)
        // SAFETY: `last` is a live entry for this poll (above). Its completing halves are
        // touched only by the table's one poller, whose `&mut` we hold, and the returned
        // borrows are tied to `&mut self`, so no two `&mut` to them coexist.
        let e = unsafe { p.last.as_ref() };
        // SAFETY: as above; `send` and `recv` are distinct cells.
        let (send, recv) = unsafe { (&mut *e.send.get(), &mut *e.recv.get()) };
        Some(QpPools {
            send: send.as_mut(),
            recv: recv.as_mut(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WridPool;

    fn completer() -> WridCompleter {
        WridPool::new(4, 0).unwrap().1
    }

    /// The sub-CQs a poll visits: those a registered QP uses (counted: a sub-CQ two QPs use
    /// stays while one does), and those of an unregistered QP until a poll finds them empty.
    #[test]
    fn sub_cqs_follow_registrations_and_drain() {
        let (t, mut p) = QpTable::new();
        assert_eq!(p.begin().sub_cqs(), 0, "no QP: nothing to visit");
        t.register(1, 0b01, None, None).unwrap();
        t.register(2, 0b11, None, None).unwrap();
        assert_eq!(p.begin().sub_cqs(), 0b11);
        // A failed registration counts nothing.
        assert!(t.register(2, 0b100, None, None).is_err());
        assert_eq!(p.begin().sub_cqs(), 0b11);
        t.unregister(2);
        // Sub-CQ 1 is no QP's now, but may hold QP 2's CQEs: visited until found empty.
        let mut l = p.begin();
        assert_eq!(l.sub_cqs(), 0b11);
        l.sub_cq_empty(0);
        drop(l);
        assert_eq!(
            p.begin().sub_cqs(),
            0b11,
            "sub-CQ 0 is QP 1's; 1 not seen empty"
        );
        p.begin().sub_cq_empty(1);
        assert_eq!(p.begin().sub_cqs(), 0b01);
        t.unregister(1);
        assert_eq!(p.begin().sub_cqs(), 0b01, "draining QP 1's");
        p.begin().sub_cq_empty(0);
        assert_eq!(p.begin().sub_cqs(), 0);
        // Registered and gone between two polls: still drained.
        t.register(3, 0b10, None, None).unwrap();
        t.unregister(3);
        assert_eq!(p.begin().sub_cqs(), 0b10);
        assert_eq!(sub_cq_bit(1, 2), 0b10);
        assert_eq!(sub_cq_bit(63, 64), 1 << 63);
        assert_eq!(
            sub_cq_bit(2, 2),
            u64::MAX,
            "no such sub-CQ: visit every one"
        );
        assert_eq!(sub_cq_bit(64, 64), u64::MAX);
    }

    #[test]
    fn grows_by_use_and_finds_every_qp() {
        let (t, mut p) = QpTable::new();
        assert_eq!(t.cells(), MIN_SLOTS, "an empty CQ costs 8 pointers");
        for q in 0..100u16 {
            t.register(q * 7, 1, Some(completer()), None).unwrap();
        }
        assert!(t.cells() <= 512, "{} cells for 100 QPs", t.cells());
        assert!(t.register(7, 1, None, None).is_err(), "duplicate QP number");
        let mut l = p.begin();
        for q in 0..100u16 {
            let p = l.find(q * 7).expect("registered");
            assert!(p.send.is_some() && p.recv.is_none());
        }
        assert!(l.find(1).is_none());
        drop(l);
        for q in 0..100u16 {
            t.unregister(q * 7);
        }
        let mut l = p.begin();
        assert!((0..100u16).all(|q| l.find(q * 7).is_none()));
        drop(l);
        // Tombstones are swept by the next growth: churn does not grow the table.
        for round in 0..50u16 {
            t.register(round, 1, None, None).unwrap();
            t.unregister(round);
        }
        assert!(t.cells() <= 512);
    }

    /// What the lookup's one-entry cache relies on: while a poll runs, an `unregister` of a
    /// cached QP waits for it to end, and so does a `register` of the same number, so the
    /// cached entry is the QP's (alive, with its completers) for the whole poll.
    #[test]
    fn same_number_cannot_come_back_during_a_poll() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let (t, mut p) = QpTable::new();
        t.register(5, 1, Some(completer()), None).unwrap();
        let mut l = p.begin();
        let cap = |l: &mut Lookup<'_>| l.find(5).and_then(|p| p.send.map(|c| c.capacity()));
        assert_eq!(cap(&mut l), Some(4));
        let done = Arc::new(AtomicBool::new(false));
        let remover = {
            let t = t.clone();
            std::thread::spawn(move || t.unregister(5))
        };
        // Wait until the unregister has taken the entry out of the array (it now waits for
        // this poll, holding `ctl`).
        // SAFETY: the array is alive while `l` is (epoch protocol: `rebuild` would wait).
        while find_in(unsafe { &*t.slots.load(Ordering::Acquire) }, 5).is_some() {
            std::thread::yield_now();
        }
        let adder = {
            let (t, done) = (t.clone(), done.clone());
            std::thread::spawn(move || {
                let (_, new) = WridPool::new(8, 1).unwrap();
                let r = t.register(5, 1, Some(new), None).is_ok();
                done.store(true, Ordering::SeqCst);
                r
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            !done.load(Ordering::SeqCst),
            "a QP 5 registered during the poll"
        );
        assert_eq!(cap(&mut l), Some(4), "still the first QP 5 for this poll");
        drop(l);
        remover.join().unwrap();
        let registered = adder.join().unwrap();
        let mut l = p.begin();
        assert_eq!(cap(&mut l), registered.then_some(8));
    }

    #[test]
    fn register_and_unregister_while_another_thread_polls() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        let (t, mut p) = QpTable::new();
        let stop = Arc::new(AtomicBool::new(false));
        let found = Arc::new(AtomicU64::new(0));
        let poller = {
            let (stop, found) = (stop.clone(), found.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut l = p.begin();
                    for q in 0..64u16 {
                        if let Some(p) = l.find(q) {
                            // Touch the completer: a use-after-free would show under Miri/ASan
                            // and as garbage here.
                            assert_eq!(p.send.map(|c| c.capacity()), Some(4));
                            found.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        };
        // Fewer rounds under Miri, which interprets every step (the interleavings are still
        // varied: its scheduler preempts at random).
        let rounds: u16 = if cfg!(miri) { 8 } else { 300 };
        for round in 0..rounds {
            for q in 0..64u16 {
                if (q + round) % 3 == 0 {
                    let _ = t.register(q, 1, Some(completer()), None);
                } else {
                    t.unregister(q);
                }
            }
            // Now and then let the poller find something, so polls and changes interleave
            // even when the machine is busy.
            if round % 8 == 0 {
                let f = found.load(Ordering::Relaxed);
                while found.load(Ordering::Relaxed) == f && !poller.is_finished() {
                    std::thread::yield_now();
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        poller.join().unwrap();
    }

    /// The poller keeps the entry it found last across polls; an `unregister` between two
    /// polls (no poll open, so it does not wait) frees that entry, and another QP's entry may
    /// then sit at the same address (the allocator hands the freed block to the next entry
    /// of the same size) while a new QP takes the same number. The next poll must see the
    /// generation move and probe again: the new QP 5's completion comes from its own pool.
    #[test]
    fn cached_entry_is_not_used_after_its_qp_is_unregistered() {
        let (t, mut p) = QpTable::new();
        // Distinct generations: a req_id of one pool is refused by the others.
        let (mut old_pool, old) = WridPool::new(4, 1).unwrap();
        let (mut other_pool, other) = WridPool::new(4, 2).unwrap();
        let (mut new_pool, new) = WridPool::new(4, 3).unwrap();
        t.register(5, 1, Some(old), None).unwrap();
        let r = old_pool.alloc_posted(111).unwrap();
        let mut l = p.begin();
        assert_eq!(l.find(5).unwrap().send.unwrap().complete(r), Ok(111));
        drop(l);
        // QP 5's entry is cached. QP 5 goes (freeing its entry); QP 6 comes, then a new QP 5.
        t.unregister(5);
        t.register(6, 1, Some(other), None).unwrap();
        t.register(5, 1, Some(new), None).unwrap();
        let (r_other, r_new) = (
            other_pool.alloc_posted(666).unwrap(),
            new_pool.alloc_posted(222).unwrap(),
        );
        let mut l = p.begin();
        let got = l.find(5).unwrap().send.unwrap().complete(r_new);
        assert_eq!(got, Ok(222), "QP 5's completion from the new QP 5's pool");
        assert_eq!(l.find(6).unwrap().send.unwrap().complete(r_other), Ok(666));
        drop(l);
        // Unchanged table: the cache carries over (and stays right) from poll to poll.
        let r = new_pool.alloc_posted(333).unwrap();
        let mut l = p.begin();
        assert_eq!(l.find(5).unwrap().send.unwrap().complete(r), Ok(333));
    }

    /// The cache across polls under concurrency: one thread polls, each poll finding one QP
    /// (the same one for several polls in a row, so most finds use the entry cached by an
    /// earlier poll), while another thread unregisters and re-registers the same numbers
    /// (each time with a new entry and completer) and grows the table. Every entry found
    /// must be live (Miri: no use after free) and the QP's own (its capacity says whose).
    #[test]
    fn cached_entry_across_polls_while_another_thread_reregisters() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        const QPS: u16 = 4;
        let rounds: u16 = if cfg!(miri) { 40 } else { 2000 };
        let (t, mut p) = QpTable::new();
        let own = |q: u16| Some(WridPool::new(u32::from(q) + 1, q).unwrap().1);
        let stop = Arc::new(AtomicBool::new(false));
        let found = Arc::new(AtomicU64::new(0));
        let poller = {
            let (stop, found) = (stop.clone(), found.clone());
            std::thread::spawn(move || {
                let mut polls = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let q = (polls / 8 % u64::from(QPS)) as u16;
                    let mut l = p.begin();
                    if let Some(pools) = l.find(q) {
                        let cap = pools.send.map(|c| c.capacity());
                        assert_eq!(cap, Some(u32::from(q) + 1), "QP {q} found another's entry");
                        found.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(l);
                    polls += 1;
                }
            })
        };
        for round in 0..rounds {
            for q in 0..QPS {
                t.unregister(q);
                t.register(q, 1, own(q), None).unwrap();
            }
            if round % 16 == 0 {
                // A registration that grows the table (`rebuild` replaces the array).
                let extra = QPS + round;
                t.register(extra, 1, own(0), None).unwrap();
                t.unregister(extra);
            }
            // Now and then let the poller find something (so polls, most of them using an
            // entry cached by an earlier poll, interleave with the changes even when the
            // machine is busy).
            if round % 32 == 0 {
                let f = found.load(Ordering::Relaxed);
                while found.load(Ordering::Relaxed) == f && !poller.is_finished() {
                    std::thread::yield_now();
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        poller.join().unwrap();
    }
}
