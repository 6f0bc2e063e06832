//! The per-CQ QP table: which QP a CQE's 16-bit `qp_num` names, and the completing halves of
//! that QP's wr_id pools (see the module docs of `crate::efa` for the protocol). This file
//! holds every `unsafe` of the EFA data path's sharing: the table's raw pointers and the
//! entries' `UnsafeCell`s.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use uverbs_efa::{QpLookup, QpPools, WridCompleter};

/// What one CQ keeps of one QP: the completing halves of the QP's queues that complete here.
pub(crate) struct CqEntry {
    qpn: u16,
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

/// Control-path bookkeeping (under the mutex): live entries and used cells (live + tombs).
struct Ctl {
    live: usize,
    used: usize,
}

/// The QPs completing into one CQ, keyed by QP number. Memory is sized by use: 8 cells to
/// start with, doubled (on the control path, in `register`) to keep at most half the cells
/// used, so a CQ with a few QPs costs a few hundred bytes.
pub(crate) struct QpTable {
    slots: AtomicPtr<Slots>,
    /// Odd while a poll may be reading the table.
    epoch: AtomicU64,
    /// Serialises register/unregister (control path only; poll never takes it).
    ctl: Mutex<Ctl>,
}

// SAFETY: the table is shared between the CQ's poller (through `begin_poll`, one at a time:
// the ring's `&mut`) and QPs registering and unregistering on any thread (under `ctl`). The
// entries' `UnsafeCell`s are touched only by the single poller, or by the registrar before
// the entry is published / after the epoch protocol proved no poller can reach it; every
// other shared field is atomic or behind the mutex. `WridCompleter` is `Send`.
unsafe impl Sync for QpTable {}
// SAFETY: as above; the raw pointers own heap allocations that can be freed on any thread.
unsafe impl Send for QpTable {}

impl QpTable {
    pub(crate) fn new() -> QpTable {
        QpTable {
            slots: AtomicPtr::new(Box::into_raw(Slots::new(MIN_SLOTS))),
            epoch: AtomicU64::new(0),
            ctl: Mutex::new(Ctl { live: 0, used: 0 }),
        }
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
    /// CQ. Fails (giving them back) if the number is taken: the device handed it out twice.
    pub(crate) fn register(
        &self,
        qpn: u16,
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
        let entry = Box::into_raw(Box::new(CqEntry {
            qpn,
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
    pub(crate) fn unregister(&self, qpn: u16) {
        let mut ctl = self.ctl();
        // SAFETY: under `ctl` the array is not replaced or freed.
        let cur = unsafe { &*self.slots.load(Ordering::Acquire) };
        let Some(i) = find_in(cur, qpn) else {
            return;
        };
        // SeqCst: in one total order with `wait_for_pollers`' SeqCst epoch load and the
        // poller's SeqCst epoch increment (see there).
        let old = cur.cells[i].swap(tomb(), Ordering::SeqCst);
        ctl.live -= 1;
        self.wait_for_pollers();
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
        // SeqCst: as in `unregister` (also publishes the new cells, written above, to the
        // poller's load of `slots`).
        let old = self.slots.swap(Box::into_raw(new), Ordering::SeqCst);
        self.wait_for_pollers();
        // SAFETY: `old` came from `Box::into_raw`; it is out of `slots` and no poll reads it
        // any more (epoch protocol); the entries it pointed to live on in the new array.
        drop(unsafe { Box::from_raw(old) });
    }

    /// Waits until any poll that could have read the table before our last SeqCst store has
    /// ended. The SeqCst store, this SeqCst load and the poller's SeqCst increment are in one
    /// total order: either the poll's increment came first (we see it odd and wait for it to
    /// move on) or it comes after our store (the poll reads the new state).
    fn wait_for_pollers(&self) {
        let e = self.epoch.load(Ordering::SeqCst);
        if e % 2 == 1 {
            while self.epoch.load(Ordering::Acquire) == e {
                std::thread::yield_now();
            }
        }
    }

    /// Starts a poll: the returned lookup reads the table until dropped.
    ///
    /// # Safety
    /// At most one [`Lookup`] of a table may exist at a time (the CQ ring that owns the table
    /// calls this through `&mut self`): the lookup hands out `&mut` to the entries'
    /// completing halves.
    #[inline]
    pub(crate) unsafe fn begin_poll(&self) -> Lookup<'_> {
        // SeqCst: orders this increment before the loads of the poll against `unregister`'s
        // and `rebuild`'s SeqCst stores (see `wait_for_pollers`).
        self.epoch.fetch_add(1, Ordering::SeqCst);
        // Acquire: the array's cells were written before `rebuild` published it.
        let slots = self.slots.load(Ordering::SeqCst);
        Lookup {
            table: self,
            slots,
            last_qpn: u32::MAX,
            last: ptr::null(),
        }
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

/// The [`QpLookup`] a poll hands the provider: resolves QP numbers through the table.
pub(crate) struct Lookup<'t> {
    table: &'t QpTable,
    slots: *mut Slots,
    /// The entry the last `find` returned and its QP number (`u32::MAX`: none yet): runs of
    /// completions of one QP skip the hash probe.
    last_qpn: u32,
    last: *const CqEntry,
}

impl Drop for Lookup<'_> {
    fn drop(&mut self) {
        // Release: our reads of the array and entries happen-before a control path that sees
        // the epoch move and frees them.
        self.table.epoch.fetch_add(1, Ordering::Release);
    }
}

impl QpLookup for Lookup<'_> {
    #[inline]
    fn find(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        if u32::from(qp_num) != self.last_qpn {
            // SAFETY: `slots` was the table's array when our epoch went odd; `rebuild` frees
            // a replaced array only after the epoch moves on, which happens when we are
            // dropped.
            let s = unsafe { &*self.slots };
            let i = find_in(s, qp_num)?;
            let p = s.cells[i].load(Ordering::Acquire);
            if p.is_null() || p == tomb() {
                return None;
            }
            self.last = p;
            self.last_qpn = u32::from(qp_num);
        }
        // A cached entry is as live as when it was found: an entry an `unregister` takes out
        // of the array during this lookup is freed only after we are dropped (epoch
        // protocol), and no QP can register the same number meanwhile (`unregister` holds
        // `ctl` until we are dropped), so using it for the rest of this poll is like having
        // polled just before the unregister. (Checking the cell on every hit would cost ~7
        // instructions per CQE for no different outcome.)
        // SAFETY: `last` is a live entry (see `find_in`) and stays live until this lookup is
        // dropped (epoch protocol). Its completing halves are touched only by the one lookup
        // of this table (the contract of `begin_poll`), and the returned borrows are tied to
        // `&mut self`, so no two `&mut` to them coexist.
        let e = unsafe { &*self.last };
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
    use uverbs_efa::WridPool;

    fn completer() -> WridCompleter {
        WridPool::new(4, 0).unwrap().1
    }

    #[test]
    fn grows_by_use_and_finds_every_qp() {
        let t = QpTable::new();
        assert_eq!(t.cells(), MIN_SLOTS, "an empty CQ costs 8 pointers");
        for q in 0..100u16 {
            t.register(q * 7, Some(completer()), None).unwrap();
        }
        assert!(t.cells() <= 512, "{} cells for 100 QPs", t.cells());
        assert!(t.register(7, None, None).is_err(), "duplicate QP number");
        // SAFETY: the only lookup of `t`.
        let mut l = unsafe { t.begin_poll() };
        for q in 0..100u16 {
            let p = l.find(q * 7).expect("registered");
            assert!(p.send.is_some() && p.recv.is_none());
        }
        assert!(l.find(1).is_none());
        drop(l);
        for q in 0..100u16 {
            t.unregister(q * 7);
        }
        // SAFETY: the only lookup of `t`.
        let mut l = unsafe { t.begin_poll() };
        assert!((0..100u16).all(|q| l.find(q * 7).is_none()));
        drop(l);
        // Tombstones are swept by the next growth: churn does not grow the table.
        for round in 0..50u16 {
            t.register(round, None, None).unwrap();
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
        let t = Arc::new(QpTable::new());
        t.register(5, Some(completer()), None).unwrap();
        // SAFETY: this thread runs the only lookup of `t`.
        let mut l = unsafe { t.begin_poll() };
        let cap = |l: &mut Lookup<'_>| l.find(5).and_then(|p| p.send.map(|c| c.capacity()));
        assert_eq!(cap(&mut l), Some(4));
        let done = Arc::new(AtomicBool::new(false));
        let remover = {
            let t = t.clone();
            std::thread::spawn(move || t.unregister(5))
        };
        // Wait until the unregister has taken the entry out of the array (it now waits for
        // this poll, holding `ctl`).
        // SAFETY: `l.slots` is alive while `l` is (epoch protocol).
        while find_in(unsafe { &*l.slots }, 5).is_some() {
            std::thread::yield_now();
        }
        let adder = {
            let (t, done) = (t.clone(), done.clone());
            std::thread::spawn(move || {
                let (_, new) = WridPool::new(8, 1).unwrap();
                let r = t.register(5, Some(new), None).is_ok();
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
        // SAFETY: as above.
        let mut l = unsafe { t.begin_poll() };
        assert_eq!(cap(&mut l), registered.then_some(8));
    }

    #[test]
    fn register_and_unregister_while_another_thread_polls() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let t = Arc::new(QpTable::new());
        let stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let (t, stop) = (t.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut found = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: this thread runs the only lookups of `t`.
                    let mut l = unsafe { t.begin_poll() };
                    for q in 0..64u16 {
                        if let Some(p) = l.find(q) {
                            // Touch the completer: a use-after-free would show under Miri/ASan
                            // and as garbage here.
                            assert_eq!(p.send.map(|c| c.capacity()), Some(4));
                            found += 1;
                        }
                    }
                }
                found
            })
        };
        for round in 0..300u16 {
            for q in 0..64u16 {
                if (q + round) % 3 == 0 {
                    let _ = t.register(q, Some(completer()), None);
                } else {
                    t.unregister(q);
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let found = poller.join().unwrap();
        assert!(found > 0);
    }
}
