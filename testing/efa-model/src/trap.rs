//! Sees every store to a client's SQ doorbell, in order, without a hook in the driver.
//!
//! The model hands out the SQ doorbell page read-only. A store to it faults (SIGSEGV,
//! `SEGV_ACCERR`) and [`on_segv`] finds the page among the registered ones. Then, in one of
//! two ways, the store is done and recorded: the word stored, the LLQ WQEs present behind and
//! ahead of it, appended to the page's log. The model drains the log in `process()`, so it
//! sees each doorbell value the driver wrote, as a device sees each MMIO write.
//! - Emulated: a plain 32-bit `mov` to memory (`89 /r`, `C7 /0 id`, what an atomic Release
//!   store compiles to) whose decoded address is the fault address is done by the handler
//!   through the model's writable view of the page, and the instruction is skipped. One
//!   signal, no change to the mapping (changing it costs a TLB shootdown on every CPU running
//!   the process, which under an emulator like qemu TCG is slow).
//! - Single-stepped, for any other instruction: the handler makes the page writable, sets
//!   the trap flag (EFLAGS.TF) in the interrupted context and returns; the store runs and the
//!   CPU traps right after it (SIGTRAP); [`on_trap`] reads the word just stored, logs it,
//!   makes the page read-only again and clears the trap flag.
//!
//! The handlers are installed once per process and must be safe with other tests running in
//! other threads: they allocate nothing and take no locks (atomics, raw reads of model memory,
//! and the `mprotect`/`gettid`/`sched_yield` syscalls only). A fault or trap that is not ours
//! goes to the handler that was installed before (Rust's stack-overflow handler, or the
//! default action, so a real crash still crashes).
//!
//! Limits:
//! - Stores from several threads to one page are logged in order (a thread that faults while
//!   another one's store is being done waits for it), except in one window: while a store is
//!   single-stepped the page is writable, and another thread's store to it then does not
//!   fault and is not logged (the model reports a doorbell it never saw a store for, see
//!   `EfaFabric::assert_no_violations`). Emulated stores (the library's) open no such window.
//! - [`SLOTS`] trapped pages at once (QPs alive in the process); more is an mmap error.
//! - [`LOG`] doorbells per page between two drains; more is reported, never dropped silently.
//! - x86_64 Linux only (the trap flag and `ucontext_t` layout).
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use rustix::mm::MprotectFlags;
use uverbs::Errno;

use crate::state::Region;

/// Trapped pages that can exist at once in the process.
pub(crate) const SLOTS: usize = 256;
/// Doorbells logged per page between two drains.
pub(crate) const LOG: usize = 4096;

const PAGE: usize = 4096;
/// EFLAGS.TF: single-step (trap after the next instruction).
const EFLAGS_TF: i64 = 1 << 8;
/// `si_code` of a write to a page mapped without write permission.
const SEGV_ACCERR: i32 = 2;
/// `efa_io_tx_meta_desc`: byte 2 (`ctrl1`) bit 7 is `meta_desc`, byte 3 (`ctrl2`) bit 0 the
/// phase.
const META_CTRL1: usize = 2;
const META_DESC_BIT: u8 = 1 << 7;
const META_CTRL2: usize = 3;
const META_PHASE_BIT: u8 = 1 << 0;

/// One doorbell store, as the trap saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ring {
    /// Offset of the stored word in the doorbell page.
    pub offset: u32,
    /// The 32-bit word after the store.
    pub value: u32,
    /// WQEs between the previous doorbell and this one that carried the meta bit and the
    /// phase of their lap when this doorbell was written (at most the depth).
    pub fresh: u32,
    /// WQEs already written past this doorbell (the same test, from `value` on).
    pub ahead: u32,
}

struct Entry {
    /// `offset << 32 | value`.
    a: AtomicU64,
    /// `fresh << 32 | ahead`.
    b: AtomicU64,
}

struct Slot {
    /// Claimed by a [`Trap`] (its fields are being set or in use).
    used: AtomicBool,
    /// The client page trapped (0: none). Published last (Release) after the fields below.
    page: AtomicUsize,
    /// Offset of the SQ doorbell word in the page.
    db_off: AtomicUsize,
    /// Thread id between its fault and its trap (0: none): one store at a time.
    armed: AtomicU32,
    /// Address the armed thread faulted on.
    addr: AtomicUsize,
    /// The model's writable view of the page (for emulated stores).
    view: AtomicUsize,
    /// The model's view of LLQ slot 0, its depth (a power of two) and bytes per WQE.
    llq: AtomicUsize,
    depth: AtomicU32,
    wqe_size: AtomicU32,
    /// The doorbell value logged last (the driver's doorbell starts at 0).
    last: AtomicU32,
    /// Log ring: the trap handler appends at `head`, the model drains from `tail`.
    head: AtomicU32,
    tail: AtomicU32,
    overflow: AtomicBool,
    log: [Entry; LOG],
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            used: AtomicBool::new(false),
            page: AtomicUsize::new(0),
            db_off: AtomicUsize::new(0),
            armed: AtomicU32::new(0),
            addr: AtomicUsize::new(0),
            view: AtomicUsize::new(0),
            llq: AtomicUsize::new(0),
            depth: AtomicU32::new(1),
            wqe_size: AtomicU32::new(64),
            last: AtomicU32::new(0),
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            overflow: AtomicBool::new(false),
            log: [const {
                Entry {
                    a: AtomicU64::new(0),
                    b: AtomicU64::new(0),
                }
            }; LOG],
        }
    }
}

static SLOT: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
/// Stores done by emulation and by single-stepping, process-wide (for tests).
static EMULATED: AtomicU64 = AtomicU64::new(0);
static STEPPED: AtomicU64 = AtomicU64::new(0);

/// Doorbell stores seen so far in this process: (emulated, single-stepped).
pub(crate) fn stats() -> (u64, u64) {
    (
        EMULATED.load(Ordering::Relaxed),
        STEPPED.load(Ordering::Relaxed),
    )
}
static INSTALLED: OnceLock<Result<(), Errno>> = OnceLock::new();
static OLD_SEGV: OnceLock<SigAction> = OnceLock::new();
static OLD_TRAP: OnceLock<SigAction> = OnceLock::new();

/// A registered doorbell page; unregisters on drop.
pub(crate) struct Trap {
    idx: usize,
    page: usize,
    /// Keep the views the handler uses alive for as long as the slot points at them.
    _view: Arc<Region>,
    _llq: Arc<Region>,
}

impl std::fmt::Debug for Trap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Trap(slot {}, page {:#x})", self.idx, self.page)
    }
}

impl Trap {
    /// Traps stores to `page` (a client mapping of the SQ doorbell, already mapped read-only,
    /// `PAGE` bytes), whose memory `view` is the model's. `db_off` is the doorbell word's
    /// offset in it; `llq`/`llq_off` the model's view of the LLQ (slot 0 at `llq_off`) of
    /// `depth` WQEs of `wqe_size` bytes.
    pub(crate) fn register(
        page: *mut u8,
        view: Arc<Region>,
        db_off: usize,
        llq: Arc<Region>,
        llq_off: usize,
        depth: u32,
        wqe_size: u32,
    ) -> Result<Trap, Errno> {
        let page = page as usize;
        assert!(page != 0 && page % PAGE == 0 && db_off % 4 == 0 && db_off < PAGE);
        assert!(depth.is_power_of_two() && llq_off + (depth * wqe_size) as usize <= llq.len);
        assert!(view.len >= PAGE);
        (*INSTALLED.get_or_init(install))?;
        // A page still registered at this address belongs to a mapping the client has
        // unmapped (its QP not destroyed yet): the address is ours now.
        for s in &SLOT {
            let _ = s
                .page
                .compare_exchange(page, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
        let idx = SLOT
            .iter()
            .position(|s| {
                s.used
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(Errno::NOMEM)?;
        let s = &SLOT[idx];
        // Relaxed: all of these are published by the Release store of `page` below, which
        // the handlers Acquire-load before reading them.
        s.db_off.store(db_off, Ordering::Relaxed);
        s.armed.store(0, Ordering::Relaxed);
        s.view.store(view.ptr.as_ptr() as usize, Ordering::Relaxed);
        s.llq
            .store(llq.ptr.as_ptr() as usize + llq_off, Ordering::Relaxed);
        s.depth.store(depth, Ordering::Relaxed);
        s.wqe_size.store(wqe_size, Ordering::Relaxed);
        s.last.store(0, Ordering::Relaxed);
        s.head.store(0, Ordering::Relaxed);
        s.tail.store(0, Ordering::Relaxed);
        s.overflow.store(false, Ordering::Relaxed);
        s.page.store(page, Ordering::Release);
        Ok(Trap {
            idx,
            page,
            _view: view,
            _llq: llq,
        })
    }

    /// The trapped client page.
    pub(crate) fn page(&self) -> *mut u8 {
        self.page as *mut u8
    }

    /// The doorbell value the trap logged last.
    pub(crate) fn last(&self) -> u32 {
        // Acquire: pairs with the handler's Release store of `last`.
        SLOT[self.idx].last.load(Ordering::Acquire)
    }

    /// Takes the doorbells logged since the last call, oldest first, and whether some were
    /// lost because the log was full.
    pub(crate) fn drain(&self) -> (Vec<Ring>, bool) {
        let s = &SLOT[self.idx];
        // Acquire: pairs with the handler's Release store of `head`, so the entries below it
        // are complete.
        let head = s.head.load(Ordering::Acquire);
        let mut tail = s.tail.load(Ordering::Relaxed);
        let mut out = Vec::with_capacity(head.wrapping_sub(tail) as usize);
        while tail != head {
            let e = &s.log[tail as usize % LOG];
            let (a, b) = (e.a.load(Ordering::Relaxed), e.b.load(Ordering::Relaxed));
            out.push(Ring {
                offset: (a >> 32) as u32,
                value: a as u32,
                fresh: (b >> 32) as u32,
                ahead: b as u32,
            });
            tail = tail.wrapping_add(1);
        }
        // Release: the entries were read before the handler may reuse their places.
        s.tail.store(tail, Ordering::Release);
        (out, s.overflow.swap(false, Ordering::AcqRel))
    }
}

impl Drop for Trap {
    fn drop(&mut self) {
        let s = &SLOT[self.idx];
        // Only if still ours (a new mapping at the same address may have taken it over).
        let _ = s
            .page
            .compare_exchange(self.page, 0, Ordering::AcqRel, Ordering::Relaxed);
        // Release: the slot's fields are no longer read by us before another Trap claims it.
        s.used.store(false, Ordering::Release);
    }
}

fn install() -> Result<(), Errno> {
    let flags = SaFlags::SA_SIGINFO | SaFlags::SA_ONSTACK;
    let segv = SigAction::new(SigHandler::SigAction(on_segv), flags, SigSet::empty());
    let trap = SigAction::new(SigHandler::SigAction(on_trap), flags, SigSet::empty());
    // SAFETY: both handlers are async-signal-safe (no allocation, no locks: atomics, raw
    // reads of live model mappings, syscalls) and hand faults they do not own to the previous
    // action, which is saved right after.
    let old = unsafe { signal::sigaction(Signal::SIGTRAP, &trap) }.map_err(nix_errno)?;
    let _ = OLD_TRAP.set(old);
    // SAFETY: as above.
    let old = unsafe { signal::sigaction(Signal::SIGSEGV, &segv) }.map_err(nix_errno)?;
    let _ = OLD_SEGV.set(old);
    Ok(())
}

fn nix_errno(e: nix::Error) -> Errno {
    Errno::from_raw_os_error(e as i32)
}

fn tid() -> u32 {
    // Not rustix::thread::gettid: turning on rustix's `thread` feature in this test crate
    // changes how the library's rustix (unified features) starts up, and under valgrind the
    // callgrind benches then crash in `page_size()`. libc is here anyway for the signal context.
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// The `EFLAGS` slot of the interrupted context.
///
/// # Safety
/// `ctx` is the third argument of an `SA_SIGINFO` handler (a live `ucontext_t`).
unsafe fn eflags(ctx: *mut c_void) -> *mut i64 {
    let uc = ctx.cast::<libc::ucontext_t>();
    // SAFETY: the caller's contract: `uc` points to the kernel-written context for the
    // duration of the handler; `REG_EFL` indexes `gregs`.
    unsafe { &raw mut (*uc).uc_mcontext.gregs[libc::REG_EFL as usize] }
}

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo for SIGSEGV; `si_addr` is its fault address.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let page = addr & !(PAGE - 1);
    let slot = if code == SEGV_ACCERR && page != 0 {
        // Acquire: the slot's fields, stored before `page` was published, are visible.
        SLOT.iter().find(|s| s.page.load(Ordering::Acquire) == page)
    } else {
        None
    };
    let Some(s) = slot else {
        return chain(sig, &OLD_SEGV, info, ctx);
    };
    let me = tid();
    loop {
        // Acquire: the previous store's trap (another thread) finished with the log and
        // protection before we take the page.
        match s
            .armed
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => break,
            // Our own store faulting again: the page could not be made writable.
            Err(t) if t == me => return chain(sig, &OLD_SEGV, info, ctx),
            // Another thread's store is being single-stepped; its trap ends it.
            Err(_) => std::thread::yield_now(),
        }
    }
    // SAFETY: `ctx` is this SA_SIGINFO handler's context argument.
    if let Some((offset, value)) = unsafe { emulate(s, addr, ctx) } {
        record(s, offset, value);
        EMULATED.fetch_add(1, Ordering::Relaxed);
        // Release: the log is done before the next store takes the page.
        s.armed.store(0, Ordering::Release);
        return;
    }
    s.addr.store(addr, Ordering::Relaxed);
    // SAFETY: `page` is a live client mapping of one page (registered while mapped); making
    // it writable for the one store about to run changes no Rust-visible memory.
    let ok = unsafe {
        rustix::mm::mprotect(
            page as *mut c_void,
            PAGE,
            MprotectFlags::READ | MprotectFlags::WRITE,
        )
    };
    if ok.is_err() {
        s.armed.store(0, Ordering::Release);
        return chain(sig, &OLD_SEGV, info, ctx);
    }
    // SAFETY: `ctx` is this SA_SIGINFO handler's context argument.
    unsafe { *eflags(ctx) |= EFLAGS_TF };
}

extern "C" fn on_trap(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let me = tid();
    let Some(s) = SLOT.iter().find(|s| s.armed.load(Ordering::Acquire) == me) else {
        return chain(sig, &OLD_TRAP, info, ctx);
    };
    // SAFETY: `ctx` is this SA_SIGINFO handler's context argument.
    unsafe { *eflags(ctx) &= !EFLAGS_TF };
    let addr = s.addr.load(Ordering::Relaxed) & !3;
    let page = addr & !(PAGE - 1);
    let offset = addr - page;
    // SAFETY: `addr` is 4-byte aligned inside the registered page, which is mapped and
    // readable; the store just made to it was this thread's own.
    let value = unsafe { AtomicU32::from_ptr(addr as *mut u32) }.load(Ordering::Relaxed);
    record(s, offset, value);
    STEPPED.fetch_add(1, Ordering::Relaxed);
    // SAFETY: as in `on_segv`: the registered page is a live one-page client mapping.
    let _ = unsafe { rustix::mm::mprotect(page as *mut c_void, PAGE, MprotectFlags::READ) };
    // Release: the log and protection are done before the next store takes the page.
    s.armed.store(0, Ordering::Release);
}

/// Does the faulting store itself if it is a 32-bit `mov` to exactly `addr` (see the module
/// doc): writes it through the model's view, moves RIP past it, and returns the offset in the
/// page and the value. `None`: any other instruction (the caller single-steps it).
///
/// # Safety
/// `ctx` is the context argument of an `SA_SIGINFO` handler for a fault at `addr`, inside
/// `s`'s registered page.
unsafe fn emulate(s: &Slot, addr: usize, ctx: *mut c_void) -> Option<(usize, u32)> {
    let uc = ctx.cast::<libc::ucontext_t>();
    // SAFETY: the caller's contract: `uc` is the live kernel-written context.
    let gregs = unsafe { &raw mut (*uc).uc_mcontext.gregs };
    // SAFETY: as above; reading the saved registers.
    let reg = |n: u8| unsafe { (*gregs)[GREG_OF[usize::from(n)]] } as u64;
    // SAFETY: as above.
    let rip = unsafe { (*gregs)[libc::REG_RIP as usize] } as usize;
    // Bytes of the faulting instruction, read one at a time and only as far as decoding
    // goes: every byte read belongs to the instruction the CPU just fetched, so it is mapped.
    let byte = |i: usize| {
        // SAFETY: see above; at most 11 bytes (REX, opcode, ModRM, SIB, disp32, imm32).
        unsafe { ((rip + i) as *const u8).read_volatile() }
    };
    let mut i = 0;
    let mut rex = 0u8;
    if byte(0) & 0xf0 == 0x40 {
        rex = byte(0);
        i = 1;
    }
    if rex & 0x08 != 0 {
        return None; // REX.W: a 64-bit store
    }
    let op = byte(i);
    if op != 0x89 && op != 0xc7 {
        return None;
    }
    let modrm = byte(i + 1);
    i += 2;
    let (md, regf, rm) = (modrm >> 6, (modrm >> 3) & 7, modrm & 7);
    if md == 3 || (op == 0xc7 && regf != 0) {
        return None;
    }
    let mut ea: u64;
    if rm == 4 {
        let sib = byte(i);
        i += 1;
        let (scale, index, base) = (sib >> 6, ((sib >> 3) & 7) | (rex & 2) << 2, sib & 7);
        ea = if index == 4 { 0 } else { reg(index) << scale };
        if base == 5 && md == 0 {
            ea = ea.wrapping_add(disp32(&byte, i) as u64);
            i += 4;
        } else {
            ea = ea.wrapping_add(reg(base | (rex & 1) << 3));
        }
    } else if rm == 5 && md == 0 {
        return None; // RIP-relative: not how a doorbell pointer is reached
    } else {
        ea = reg(rm | (rex & 1) << 3);
    }
    match md {
        1 => {
            ea = ea.wrapping_add(byte(i) as i8 as i64 as u64);
            i += 1;
        }
        2 => {
            ea = ea.wrapping_add(disp32(&byte, i) as u64);
            i += 4;
        }
        _ => {}
    }
    let value = if op == 0x89 {
        reg(regf | (rex & 4) << 1) as u32
    } else {
        let v = disp32(&byte, i) as u32;
        i += 4;
        v
    };
    // A decoding mistake shows here: only a store to exactly the fault address is done.
    if ea as usize != addr || addr % 4 != 0 {
        return None;
    }
    let offset = addr & (PAGE - 1);
    let view = s.view.load(Ordering::Relaxed) + offset;
    // SAFETY: `view` is the model's writable mapping of the same page (kept alive by the
    // Trap), `offset` 4-byte aligned inside it; the store the client meant, as an atomic.
    unsafe { AtomicU32::from_ptr(view as *mut u32) }.store(value, Ordering::Release);
    // SAFETY: the caller's contract; the instruction is done, resume after it.
    unsafe { (*gregs)[libc::REG_RIP as usize] = (rip + i) as i64 };
    Some((offset, value))
}

/// `ucontext_t.gregs` index of each x86 register number (RAX, RCX, RDX, RBX, RSP, RBP, RSI,
/// RDI, R8..R15).
const GREG_OF: [usize; 16] = [
    libc::REG_RAX as usize,
    libc::REG_RCX as usize,
    libc::REG_RDX as usize,
    libc::REG_RBX as usize,
    libc::REG_RSP as usize,
    libc::REG_RBP as usize,
    libc::REG_RSI as usize,
    libc::REG_RDI as usize,
    libc::REG_R8 as usize,
    libc::REG_R9 as usize,
    libc::REG_R10 as usize,
    libc::REG_R11 as usize,
    libc::REG_R12 as usize,
    libc::REG_R13 as usize,
    libc::REG_R14 as usize,
    libc::REG_R15 as usize,
];

fn disp32(byte: &impl Fn(usize) -> u8, i: usize) -> i64 {
    i64::from(i32::from_le_bytes([
        byte(i),
        byte(i + 1),
        byte(i + 2),
        byte(i + 3),
    ]))
}

/// Appends one store at `offset` of `s`'s page to its log, with the LLQ WQEs present behind
/// and ahead of it when it is the doorbell word.
fn record(s: &Slot, offset: usize, value: u32) {
    let (mut fresh, mut ahead) = (0, 0);
    if offset == s.db_off.load(Ordering::Relaxed) {
        let last = s.last.load(Ordering::Relaxed) as u16;
        let depth = s.depth.load(Ordering::Relaxed);
        let step = u32::from((value as u16).wrapping_sub(last)).min(depth);
        fresh = (0..step)
            .filter(|&k| is_fresh(s, last.wrapping_add(k as u16)))
            .count() as u32;
        while ahead < depth && is_fresh(s, (value as u16).wrapping_add(ahead as u16)) {
            ahead += 1;
        }
        // Release: pairs with `Trap::last`'s Acquire.
        s.last.store(value, Ordering::Release);
    }
    let head = s.head.load(Ordering::Relaxed);
    // Acquire: the model finished reading the entries it released before we overwrite them.
    if head.wrapping_sub(s.tail.load(Ordering::Acquire)) as usize >= LOG {
        s.overflow.store(true, Ordering::Release);
    } else {
        let e = &s.log[head as usize % LOG];
        e.a.store((offset as u64) << 32 | u64::from(value), Ordering::Relaxed);
        e.b.store(u64::from(fresh) << 32 | u64::from(ahead), Ordering::Relaxed);
        // Release: the entry above is complete before the model sees the new head.
        s.head.store(head.wrapping_add(1), Ordering::Release);
    }
}

/// Whether the LLQ slot of producer position `pos` holds a WQE of `pos`'s lap: the meta bit
/// set and the phase `(pos / depth) % 2` (the depth divides 2^16, so the 16-bit counter
/// gives the lap's parity).
fn is_fresh(s: &Slot, pos: u16) -> bool {
    let depth = s.depth.load(Ordering::Relaxed);
    let size = s.wqe_size.load(Ordering::Relaxed) as usize;
    let at = s.llq.load(Ordering::Relaxed) + (u32::from(pos) & (depth - 1)) as usize * size;
    // SAFETY: `at` is the start of an LLQ slot inside the model's read-write view, which the
    // registered Trap keeps mapped (`register` checked depth × size fits); the client may
    // write it concurrently, hence volatile byte reads through the raw pointer.
    let (c1, c2) = unsafe {
        (
            ((at + META_CTRL1) as *const u8).read_volatile(),
            ((at + META_CTRL2) as *const u8).read_volatile(),
        )
    };
    let phase = (u32::from(pos) / depth) % 2 == 1;
    c1 & META_DESC_BIT != 0 && (c2 & META_PHASE_BIT != 0) == phase
}

/// Hands a signal that is not ours to the action installed before ours; with none (or the
/// default), restores the default and re-raises it, so the process dies as it would have.
fn chain(
    sig: libc::c_int,
    old: &OnceLock<SigAction>,
    info: *mut libc::siginfo_t,
    ctx: *mut c_void,
) {
    match old.get().map(SigAction::handler) {
        Some(SigHandler::SigAction(f)) => f(sig, info, ctx),
        Some(SigHandler::Handler(f)) => f(sig),
        Some(SigHandler::SigIgn) => {}
        None | Some(SigHandler::SigDfl) => {
            let Ok(signal) = Signal::try_from(sig) else {
                return;
            };
            let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
            // SAFETY: restoring the default action is always sound.
            let _ = unsafe { signal::sigaction(signal, &dfl) };
            // Pending until this handler returns (the signal is blocked while it runs), then
            // the default action: terminate (with a core dump).
            let _ = signal::raise(signal);
        }
    }
}
