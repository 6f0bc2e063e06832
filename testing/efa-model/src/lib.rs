//! A strict model of EFA devices on one fabric, behind uverbs' [`Channel`] seam.
//!
//! Each [`EfaDevice`] answers the commands the kernel's EFA driver answers (get context,
//! query device, query port (ioctl and legacy write), GID entry and GID table ioctls, PD, MR,
//! CQ create/destroy by ioctl, QP create/modify/query/destroy, AH) with the errnos the kernel
//! uses, and backs every mmap with memfd pages shared between the model
//! and the client, so the client's rings and doorbells are real shared memory.
//!
//! The device runs on demand: [`EfaFabric::process`] takes every SQ doorbell the driver wrote,
//! consumes the WQEs from the LLQ, moves data between registered memory of QPs on any device
//! of the fabric (SRD: reliable and deliberately reordered; UD: in order), consumes receive
//! descriptors and writes CQEs with phase bits into the QP's sub-CQ.
//!
//! Strict: anything a correct driver never produces — a malformed or stale WQE (meta bit,
//! first/last, phase, reserved bits), an unsignaled send, a bad lkey or an SGE outside its MR,
//! an RDMA op the device did not advertise, inline data longer than the WQE (64 or 128 bytes,
//! as the QP was created) or the QP allows, an inline RDMA write in a 64-byte WQE, a doorbell
//! past the posted WQEs, a doorbell on a QP not in RTS — is recorded as a violation; tests end
//! with [`EfaFabric::assert_no_violations`].
//!
//! Every SQ doorbell store, as a device sees every MMIO write (x86_64 Linux): the client's
//! SQ doorbell page is mapped read-only, so each store faults; a process-wide SIGSEGV handler
//! does that one store (a plain 32-bit `mov` is emulated through the model's view of the page;
//! any other instruction is single-stepped with the trap flag and seen from the SIGTRAP after
//! it) and logs the value, with the LLQ WQEs present behind and ahead of it, in a lock-free
//! per-page log (module `trap`; no hook in the library, which writes its doorbell as it does
//! on hardware). [`EfaFabric::process`] replays the log in order and holds each doorbell to
//! the device's rules, recording a violation for:
//! - more than `max_tx_batch` 64-byte lines of WQEs (a WQE is 64 or 128 bytes) written to the
//!   LLQ between two doorbells — counting WQEs written ahead of a doorbell, not only its step;
//! - a doorbell over WQEs not yet in the LLQ when it was rung, a doorbell rung again with the
//!   same value, one going backwards or past the ring, a store elsewhere in the page;
//! - with `min_sq_wr`, a doorbell for the whole SQ at once;
//! - a doorbell value no store was seen for ([`EfaFabric::assert_no_violations`]).
//!
//! [`EfaFabric::sq_doorbells`] lists the values seen. Limits of the trap: while a store that
//! is not a plain `mov` is single-stepped, another thread's store to the same doorbell is
//! missed (and then reported as above); at most 256 QPs with a mapped doorbell at
//! once in the process; 4096 doorbells per QP between two `process` calls (more is a
//! violation). On other targets, or after [`EfaFabric::set_doorbell_trap`]`(false)` (for
//! benchmarks), the model reads the doorbell word when `process` runs and cannot check the
//! batch limit; the provider's `doorbell_batching_limit` unit test records every value there.
#![allow(unsafe_code)]

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod trap;
/// Without the trap (not x86_64 Linux) no QP has one: the model reads the doorbell word.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod trap {
    /// The trap's log size, named in a message only a trap can cause (none exists here).
    pub(crate) const LOG: usize = 0;
    /// Never constructed.
    pub(crate) enum Trap {}
    /// Never constructed.
    pub(crate) struct Ring {
        pub offset: u32,
        pub value: u32,
        pub fresh: u32,
        pub ahead: u32,
    }
    impl Trap {
        pub(crate) fn page(&self) -> *mut u8 {
            match *self {}
        }
        pub(crate) fn last(&self) -> u32 {
            match *self {}
        }
        pub(crate) fn drain(&self) -> (Vec<Ring>, bool) {
            match *self {}
        }
    }
}

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{BorrowedFd, IntoRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rustix::mm::{MapFlags, ProtFlags};
use uverbs::channel::{AttrKind, Channel, IoctlCmd, MapKind, Mapping, WriteCmd};
use uverbs::{Context, Device, Driver, Errno};
use uverbs_efa::defs::*;
use uverbs_uapi::cmds::*;
use uverbs_uapi::efa::*;
use uverbs_uapi::ioctl::RDMA_DRIVER_EFA;
use uverbs_uapi::verbs::*;
use uverbs_uapi::write::*;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// What a model device reports and enforces.
#[derive(Debug, Clone, Copy)]
pub struct ModelConfig {
    /// `sub_cqs_per_cq`.
    pub sub_cqs_per_cq: u16,
    /// `inline_buf_size` (64-byte WQEs: at most 32).
    pub inline_buf_size: u16,
    /// `inline_buf_size_ex`: inline bytes with 128-byte WQEs (0: the device has none, as
    /// older kernels report).
    pub inline_buf_size_ex: u16,
    /// `max_llq_size` in bytes.
    pub max_llq_size: u32,
    /// `max_tx_batch` in 64-byte units.
    pub max_tx_batch: u16,
    /// `min_sq_wr`.
    pub min_sq_wr: u16,
    /// `EFA_QUERY_DEVICE_CAPS_*`.
    pub device_caps: u32,
    /// Largest SQ depth.
    pub max_sq_wr: u32,
    /// Largest RQ depth.
    pub max_rq_wr: u32,
    /// SGEs per send WR.
    pub max_sq_sge: u16,
    /// SGEs per receive WR.
    pub max_rq_sge: u16,
    /// Largest RDMA transfer.
    pub max_rdma_size: u32,
    /// Largest CQ (entries per sub-CQ).
    pub max_cqe: u32,
    /// CQs get a doorbell (`EFA_CREATE_CQ_RESP_DB_OFF`).
    pub cq_doorbell: bool,
    /// Largest message (the MTU).
    pub mtu: u32,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            sub_cqs_per_cq: 2,
            inline_buf_size: 32,
            inline_buf_size_ex: 0,
            max_llq_size: 1 << 20,
            max_tx_batch: 8,
            min_sq_wr: 0,
            device_caps: EFA_QUERY_DEVICE_CAPS_RDMA_READ
                | EFA_QUERY_DEVICE_CAPS_RDMA_WRITE
                | EFA_QUERY_DEVICE_CAPS_RNR_RETRY
                | EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID
                | EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV
                | EFA_QUERY_DEVICE_CAPS_CQ_WITH_EXT_MEM,
            max_sq_wr: 4096,
            max_rq_wr: 8192,
            max_sq_sge: 2,
            max_rq_sge: 2,
            max_rdma_size: 1 << 30,
            max_cqe: 1 << 16,
            cq_doorbell: true,
            mtu: 8192,
        }
    }
}

const PAGE: usize = 4096;
const LLQ_DESC_OFFSET: u32 = 0x100;
const SQ_DB_OFFSET: u32 = 0x8;
const RQ_DB_OFFSET: u32 = 0x10;
const CQ_DB_OFFSET: u32 = 0x40;

fn page_align(n: usize) -> usize {
    n.div_ceil(PAGE) * PAGE
}

/// Memory the model shares with the client: a memfd and the model's own read-write view.
struct Region {
    fd: OwnedFd,
    ptr: NonNull<u8>,
    len: usize,
}

impl Region {
    fn new(len: usize) -> Result<Region, Errno> {
        let len = page_align(len.max(1));
        let fd = rustix::fs::memfd_create("efa-model", rustix::fs::MemfdFlags::CLOEXEC)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        // SAFETY: a new shared mapping of our own memfd at a kernel-chosen address aliases no
        // Rust object; it is unmapped in Drop.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )?
        };
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
        Ok(Region { fd, ptr, len })
    }

    fn read(&self, off: usize, dst: &mut [u8]) {
        assert!(off + dst.len() <= self.len);
        for (i, b) in dst.iter_mut().enumerate() {
            // SAFETY: in bounds (asserted); the client may write concurrently, so a volatile
            // byte read through the raw pointer, never a reference.
            *b = unsafe { self.ptr.as_ptr().add(off + i).read_volatile() };
        }
    }

    fn write(&self, off: usize, src: &[u8]) {
        assert!(off + src.len() <= self.len);
        for (i, b) in src.iter().enumerate() {
            // SAFETY: in bounds (asserted); raw volatile byte writes to shared memory.
            unsafe { self.ptr.as_ptr().add(off + i).write_volatile(*b) };
        }
    }

    fn load32(&self, off: usize) -> u32 {
        assert!(off % 4 == 0 && off + 4 <= self.len);
        // SAFETY: aligned and in bounds (asserted); the mapping is page aligned. Atomic load
        // (Acquire) because the client stores doorbells concurrently: everything it wrote
        // before the doorbell store is visible after.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast()) }.load(Ordering::Acquire)
    }

    fn store32(&self, off: usize, v: u32) {
        assert!(off % 4 == 0 && off + 4 <= self.len);
        // SAFETY: as in `load32`; Release publishes the bytes of a CQE written before its
        // first word (which carries the phase) to the client's Acquire load.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast()) }
            .store(v, Ordering::Release)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: we mapped exactly this range in `new` and nothing else unmaps it.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: a Region is an owned mapping reached only through raw pointers with volatile or
// atomic accesses; moving or sharing it between threads is as valid as using it in one.
unsafe impl Send for Region {}
// SAFETY: `&Region` only offers volatile/atomic accesses through the raw pointer, which are
// valid from any thread (the memory is a process-wide shared mapping).
unsafe impl Sync for Region {}

#[derive(Clone, Copy, Debug)]
struct MrState {
    pd: u32,
    lkey: u32,
    rkey: u32,
    addr: u64,
    len: u64,
    access: u32,
}

#[allow(dead_code)] // idx: kept for debugging output of the model
struct CqState {
    idx: u16,
    depth: u32,
    nsub: u16,
    entry: u32,
    with_sgid: bool,
    buf: Arc<Region>,
    buf_off: usize,
    produced: Vec<u32>,
    qp_refs: u32,
    key: u64,
    db_key: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QpKind {
    Ud,
    Srd,
}

struct QpState {
    qpn: u16,
    pd: u32,
    kind: QpKind,
    send_cq: u32,
    recv_cq: u32,
    state: u8,
    qkey: u32,
    sq_psn: u32,
    depth: u32,
    /// Bytes per LLQ slot: 64 or 128 (`sq_ring_size / max_send_wr`).
    wqe_size: u32,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline: u32,
    sq_sig_all: bool,
    unsolicited: bool,
    llq: Arc<Region>,
    sq_db: Arc<Region>,
    /// Sees every store to the client's mapping of `sq_db` (set when the client maps it).
    db_trap: Option<trap::Trap>,
    /// The doorbell value the model acted on last (from the trap's log).
    db_seen: u16,
    /// WQEs found written past that doorbell when it was rung.
    db_ahead: u32,
    /// Every SQ doorbell value the trap saw, in order.
    db_history: Vec<u32>,
    rq: Arc<Region>,
    rq_db: Arc<Region>,
    rq_descs: u32,
    keys: [u64; 4],
    /// WQEs consumed (mod 2^16: what the doorbell counts).
    sq_pc: u16,
    /// WQEs consumed ever (phase = (sq_total / depth) % 2).
    sq_total: u64,
    /// RQ descriptors consumed (mod 2^16).
    rq_cc: u16,
    send_sub: u16,
    recv_sub: u16,
}

#[allow(dead_code)] // ahn: the number handed out, kept for debugging
struct AhState {
    pd: u32,
    gid: [u8; 16],
    ahn: u16,
}

struct Dev {
    cfg: ModelConfig,
    gid: [u8; 16],
    next_handle: u32,
    next_key: u64,
    next_qpn: u16,
    next_cqn: u16,
    next_mr: u32,
    pds: BTreeMap<u32, u16>,
    mrs: BTreeMap<u32, MrState>,
    cqs: BTreeMap<u32, CqState>,
    qps: BTreeMap<u32, QpState>,
    ahs: BTreeMap<u32, AhState>,
    /// gid -> (ahn, refs)
    ahns: HashMap<[u8; 16], (u16, u32)>,
    regions: HashMap<u64, Arc<Region>>,
}

impl Dev {
    fn handle(&mut self) -> u32 {
        self.next_handle += 1;
        self.next_handle
    }
    fn region(&mut self, len: usize) -> Result<(u64, Arc<Region>), Errno> {
        let r = Arc::new(Region::new(len)?);
        let key = self.next_key;
        self.next_key += page_align(r.len) as u64 + PAGE as u64;
        self.regions.insert(key, r.clone());
        Ok((key, r))
    }
    fn ahn_for_gid(&self, gid: &[u8; 16]) -> Option<u16> {
        self.ahns.get(gid).map(|a| a.0)
    }
    fn gid_for_ahn(&self, ahn: u16) -> Option<[u8; 16]> {
        self.ahns.iter().find(|(_, v)| v.0 == ahn).map(|(g, _)| *g)
    }
    fn qp_by_qpn(&self, qpn: u16) -> Option<u32> {
        self.qps.iter().find(|(_, q)| q.qpn == qpn).map(|(h, _)| *h)
    }
}

struct Fabric {
    devs: Vec<Dev>,
    violations: Vec<String>,
    rng: u64,
    reorder: bool,
    /// Trap the SQ doorbells mapped from now on (see the module doc).
    trap_doorbells: bool,
}

impl Fabric {
    fn violation(&mut self, s: String) {
        self.violations.push(s);
    }
    fn qp(&self, dev: &EfaDevice, qpn: u32) -> &QpState {
        let d = &self.devs[dev.dev];
        &d.qps[&d.qp_by_qpn(qpn as u16).expect("no such QP")]
    }
    fn rand(&mut self) -> u64 {
        // xorshift64*: deterministic per seed, so a reordering failure reproduces.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A fabric of model EFA devices; data moves between any of their QPs.
#[derive(Clone)]
pub struct EfaFabric {
    inner: Arc<Mutex<Fabric>>,
}

impl std::fmt::Debug for EfaFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EfaFabric")
    }
}

/// One model device: implements [`Channel`].
#[derive(Clone)]
pub struct EfaDevice {
    fab: Arc<Mutex<Fabric>>,
    dev: usize,
    name: String,
}

impl std::fmt::Debug for EfaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EfaDevice({})", self.name)
    }
}

impl Default for EfaFabric {
    fn default() -> Self {
        Self::new(0x5eed)
    }
}

impl EfaFabric {
    /// An empty fabric; `seed` fixes the SRD reordering.
    pub fn new(seed: u64) -> Self {
        EfaFabric {
            inner: Arc::new(Mutex::new(Fabric {
                devs: Vec::new(),
                violations: Vec::new(),
                rng: seed | 1,
                reorder: true,
                trap_doorbells: TRAP,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Fabric> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a device (GID `fe80::<n>`).
    pub fn add_device(&self, cfg: ModelConfig) -> EfaDevice {
        let mut f = self.lock();
        let n = f.devs.len();
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[1] = 0x80;
        gid[15] = n as u8 + 1;
        f.devs.push(Dev {
            cfg,
            gid,
            next_handle: 0,
            next_key: 0x1000_0000 * (n as u64 + 1),
            next_qpn: 1,
            next_cqn: 0,
            next_mr: 0,
            pds: BTreeMap::new(),
            mrs: BTreeMap::new(),
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            ahs: BTreeMap::new(),
            ahns: HashMap::new(),
            regions: HashMap::new(),
        });
        EfaDevice {
            fab: self.inner.clone(),
            dev: n,
            name: format!("efa_{n}"),
        }
    }

    /// Whether SRD deliveries are shuffled (default on).
    pub fn set_reorder(&self, on: bool) {
        self.lock().reorder = on;
    }

    /// Whether SQ doorbells mapped from now on are trapped (default: on where the trap exists,
    /// x86_64 Linux). Off, the model reads each doorbell word when [`process`](Self::process)
    /// runs and cannot check `max_tx_batch`: for benchmarks, since the trap costs two signals
    /// per doorbell and valgrind does not emulate the trap flag it relies on.
    pub fn set_doorbell_trap(&self, on: bool) {
        self.lock().trap_doorbells = on && TRAP;
    }

    /// Violations recorded so far.
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// Takes (and clears) the violations recorded so far.
    pub fn take_violations(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().violations)
    }

    /// Panics, listing them, if any violation was recorded. Call it when no thread is
    /// posting: it also checks that each SQ doorbell word holds the value the trap saw stored
    /// last, i.e. that no store got past the trap (another thread storing to the same page
    /// while one store is single-stepped, see the module doc).
    #[track_caller]
    pub fn assert_no_violations(&self) {
        {
            let mut f = self.lock();
            let mut missed = Vec::new();
            for q in f.devs.iter().flat_map(|d| d.qps.values()) {
                if let Some(t) = &q.db_trap {
                    let (word, last) = (q.sq_db.load32(SQ_DB_OFFSET as usize), t.last());
                    if word != last {
                        missed.push(format!(
                            "qp {}: SQ doorbell holds {word:#x}, but the last store the model \
                             saw was {last:#x}",
                            q.qpn
                        ));
                    }
                }
            }
            f.violations.extend(missed);
        }
        let v = self.violations();
        assert!(v.is_empty(), "EFA model violations:\n  {}", v.join("\n  "));
    }

    /// Runs the device(s): consumes every doorbelled WQE, moves data, writes CQEs. Returns
    /// the number of send WQEs executed.
    pub fn process(&self) -> usize {
        let mut f = self.lock();
        let mut msgs = Vec::new();
        for d in 0..f.devs.len() {
            let handles: Vec<u32> = f.devs[d].qps.keys().copied().collect();
            for h in handles {
                collect_wqes(&mut f, d, h, &mut msgs);
            }
        }
        // UD in posting order first; SRD shuffled: reliable, unordered.
        let (ud, mut srd): (Vec<Msg>, Vec<Msg>) =
            msgs.into_iter().partition(|m| m.kind == QpKind::Ud);
        if f.reorder {
            for i in (1..srd.len()).rev() {
                let j = (f.rand() % (i as u64 + 1)) as usize;
                srd.swap(i, j);
            }
        }
        let n = ud.len() + srd.len();
        for m in ud.into_iter().chain(srd) {
            execute(&mut f, m);
        }
        n
    }

    /// Writes a CQE (any content; the phase bit is set by the model) into sub-CQ `sub` of the
    /// CQ with kernel handle `cq_handle` on `dev` — e.g. a late completion for a destroyed QP.
    pub fn inject_cqe(&self, dev: &EfaDevice, cq_handle: u32, sub: u16, cqe: EfaIoRxCdescEx) {
        let mut f = self.lock();
        push_cqe(&mut f, dev.dev, cq_handle, sub, cqe);
    }

    /// CQEs written so far into each sub-CQ of the CQ with kernel handle `cq_handle`.
    pub fn cq_produced(&self, dev: &EfaDevice, cq_handle: u32) -> Vec<u32> {
        let f = self.lock();
        f.devs[dev.dev]
            .cqs
            .get(&cq_handle)
            .map(|c| c.produced.clone())
            .unwrap_or_default()
    }

    /// The first 64 bytes in LLQ slot `slot` of QP `qpn` on `dev`, as the driver wrote them.
    pub fn llq_wqe(&self, dev: &EfaDevice, qpn: u32, slot: u32) -> [u8; 64] {
        let mut b = [0u8; 64];
        b.copy_from_slice(&self.llq_slot(dev, qpn, slot)[..64]);
        b
    }

    /// The whole LLQ slot `slot` (64 or 128 bytes) of QP `qpn` on `dev`.
    pub fn llq_slot(&self, dev: &EfaDevice, qpn: u32, slot: u32) -> Vec<u8> {
        let f = self.lock();
        let d = &f.devs[dev.dev];
        let q = &d.qps[&d.qp_by_qpn(qpn as u16).expect("no such QP")];
        let mut b = vec![0u8; q.wqe_size as usize];
        let slot = (slot & (q.depth - 1)) as usize;
        q.llq.read(
            LLQ_DESC_OFFSET as usize + slot * q.wqe_size as usize,
            &mut b,
        );
        b
    }

    /// Writes `wqe` into the next LLQ slot of QP `qpn` on `dev` and moves the SQ doorbell past
    /// it, as a (possibly broken) driver would: for tests of the model's strictness.
    pub fn raw_post(&self, dev: &EfaDevice, qpn: u32, wqe: &[u8; 64], ring: u16) {
        let db = self.lock().qp(dev, qpn).sq_db.load32(SQ_DB_OFFSET as usize) as u16;
        self.raw_write(dev, qpn, db, wqe);
        self.raw_ring(dev, qpn, u32::from(db.wrapping_add(ring)));
    }

    /// Writes `wqe` into the LLQ slot of producer position `pos` (mod the depth) of QP `qpn`
    /// on `dev`, ringing nothing: for tests of the model's strictness.
    pub fn raw_write(&self, dev: &EfaDevice, qpn: u32, pos: u16, wqe: &[u8; 64]) {
        let f = self.lock();
        let q = f.qp(dev, qpn);
        let slot = (u32::from(pos) & (q.depth - 1)) as usize;
        q.llq
            .write(LLQ_DESC_OFFSET as usize + slot * q.wqe_size as usize, wqe);
    }

    /// Stores `value` to the SQ doorbell of QP `qpn` on `dev` the way the driver does: through
    /// the client's (trapped) mapping, so the model sees it as it sees the driver's stores.
    pub fn raw_ring(&self, dev: &EfaDevice, qpn: u32, value: u32) {
        let f = self.lock();
        let q = f.qp(dev, qpn);
        let Some(t) = &q.db_trap else {
            return q.sq_db.store32(SQ_DB_OFFSET as usize, value);
        };
        // SAFETY: the trapped page is the client's live mapping of this QP's doorbell page: it
        // is registered from the client's mmap until the QP is destroyed in the model, and the
        // library destroys the QP before it unmaps. The offset is 4-byte aligned inside it.
        // The store faults and is let through (and logged) by the trap handlers.
        let reg = unsafe { AtomicU32::from_ptr(t.page().add(SQ_DB_OFFSET as usize).cast()) };
        // A swap (`xchg`), not the library's `mov`: the trap single-steps it instead of
        // emulating it, so the strictness tests exercise that path. SeqCst: the WQE bytes
        // written before it are visible to whoever Acquires the value.
        reg.swap(value, Ordering::SeqCst);
    }

    /// Every SQ doorbell value the model has seen stored for QP `qpn` on `dev` (up to the last
    /// [`process`](Self::process)), in order. Empty without the trap (not x86_64 Linux).
    pub fn sq_doorbells(&self, dev: &EfaDevice, qpn: u32) -> Vec<u32> {
        self.lock().qp(dev, qpn).db_history.clone()
    }

    /// The phase the next WQE of QP `qpn` must carry, and the number of WQEs it consumed.
    pub fn sq_state(&self, dev: &EfaDevice, qpn: u32) -> (bool, u64) {
        let f = self.lock();
        let q = f.qp(dev, qpn);
        let db = q.sq_db.load32(SQ_DB_OFFSET as usize) as u16;
        let total = q.sq_total + u64::from(db.wrapping_sub(q.sq_pc));
        ((total / u64::from(q.depth)) % 2 == 1, q.sq_total)
    }
}

impl EfaDevice {
    /// The device's GID (port 1, index 0).
    pub fn gid(&self) -> [u8; 16] {
        let f = self.fab.lock().unwrap_or_else(|e| e.into_inner());
        f.devs[self.dev].gid
    }

    /// Opens a uverbs context over this device.
    pub fn open(&self) -> uverbs::Result<Context> {
        let dev = Device::synthetic(
            &self.name,
            Driver::Efa,
            0x0200_0000_0000_0000 | self.dev as u64,
        );
        Context::with_channel(dev, Box::new(self.clone()))
    }

    fn with<R>(&self, f: impl FnOnce(&mut Fabric, usize) -> R) -> R {
        let mut g = self.fab.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g, self.dev)
    }
}

fn eventfd() -> Result<u32, Errno> {
    let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
    Ok(fd.into_raw_fd() as u32)
}

fn req<T: FromBytes>(cmd: &WriteCmd) -> Result<T, Errno> {
    cmd.core_request_as::<T>().ok_or(Errno::INVAL)
}

fn drv<T: FromBytes>(cmd: &WriteCmd) -> Result<T, Errno> {
    T::read_from_prefix(cmd.driver_request())
        .map(|(t, _)| t)
        .map_err(|_| Errno::INVAL)
}

fn put<T: IntoBytes + zerocopy::Immutable>(dst: &mut [u8], v: &T) {
    let b = v.as_bytes();
    let n = b.len().min(dst.len());
    dst[..n].copy_from_slice(&b[..n]);
}

impl Channel for EfaDevice {
    fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        self.with(|f, d| ioctl(f, d, cmd))
    }

    fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
        self.with(|f, d| write_cmd(f, d, cmd))
    }

    fn mmap(&self, offset: u64, len: usize, kind: MapKind) -> Result<Mapping, Errno> {
        self.with(|f, d| {
            let trap_on = f.trap_doorbells;
            let dev = &mut f.devs[d];
            let r = dev.regions.get(&offset).cloned().ok_or(Errno::INVAL)?;
            if len == 0 || len > r.len {
                return Err(Errno::INVAL);
            }
            let mut prot = match kind {
                MapKind::ReadOnly => ProtFlags::READ,
                MapKind::WriteOnly => ProtFlags::WRITE,
                MapKind::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
            };
            // An SQ doorbell is handed out read-only, so that each store to it traps.
            let sq_db = dev
                .qps
                .values_mut()
                .find(|q| q.keys[1] == offset)
                .filter(|_| trap_on);
            if sq_db.is_some() {
                prot = ProtFlags::READ;
            }
            // SAFETY: a new shared mapping of the model's memfd at a kernel-chosen address;
            // the Mapping made below owns and unmaps it.
            let p = unsafe {
                rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, &r.fd, 0)?
            };
            let p = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
            // SAFETY: mapped just above, owned by nobody else.
            let m = unsafe { Mapping::from_raw(p, len) };
            if let Some(q) = sq_db {
                trap_doorbell(q, p.as_ptr())?;
            }
            Ok(m)
        })
    }

    fn doorbell_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn driver_id(&self) -> u32 {
        RDMA_DRIVER_EFA
    }
}

/// Whether SQ doorbell stores are trapped (see the module doc).
const TRAP: bool = cfg!(all(target_os = "linux", target_arch = "x86_64"));

/// Registers the client's mapping `page` of `q`'s SQ doorbell with the trap. One at a time:
/// the model keeps one log per QP, so a second mapping while the first is registered is
/// refused (the library maps it once).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn trap_doorbell(q: &mut QpState, page: *mut u8) -> Result<(), Errno> {
    if q.db_trap.is_some() {
        return Err(Errno::BUSY);
    }
    q.db_trap = Some(trap::Trap::register(
        page,
        q.sq_db.clone(),
        SQ_DB_OFFSET as usize,
        q.llq.clone(),
        LLQ_DESC_OFFSET as usize,
        q.depth,
        q.wqe_size,
    )?);
    Ok(())
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn trap_doorbell(_: &mut QpState, _: *mut u8) -> Result<(), Errno> {
    Ok(())
}

fn write_cmd(f: &mut Fabric, d: usize, cmd: &mut WriteCmd) -> Result<(), Errno> {
    let dev = &mut f.devs[d];
    let cfg = dev.cfg;
    match (cmd.command(), cmd.is_extended()) {
        (IB_USER_VERBS_CMD_GET_CONTEXT, false) => {
            let c: EfaIbvAllocUcontextCmd = drv(cmd)?;
            if c.reserved_20 != [0; 4] {
                return Err(Errno::INVAL);
            }
            let resp = IbUverbsGetContextResp {
                async_fd: eventfd()?,
                num_comp_vectors: 1,
            };
            put(cmd.response_mut(), &resp);
            let r = EfaIbvAllocUcontextResp {
                cmds_supp_udata_mask: EFA_USER_CMDS_SUPP_UDATA_QUERY_DEVICE
                    | EFA_USER_CMDS_SUPP_UDATA_CREATE_AH,
                sub_cqs_per_cq: cfg.sub_cqs_per_cq,
                inline_buf_size: cfg.inline_buf_size,
                max_llq_size: cfg.max_llq_size,
                max_tx_batch: cfg.max_tx_batch,
                min_sq_wr: cfg.min_sq_wr,
                inline_buf_size_ex: cfg.inline_buf_size_ex,
                ..Default::default()
            };
            put(cmd.driver_response_mut(), &r);
            Ok(())
        }
        (IB_USER_VERBS_CMD_QUERY_DEVICE, ext) => {
            let base = IbUverbsQueryDeviceResp {
                fw_ver: 0x0001_0002_0003,
                vendor_id: 0x1d0f,
                vendor_part_id: 0xefa1,
                max_mr_size: 1 << 40,
                page_size_cap: 0xffff_f000,
                max_qp: 1024,
                max_qp_wr: cfg.max_sq_wr,
                max_sge: u32::from(cfg.max_sq_sge),
                max_sge_rd: 1,
                max_cq: 1024,
                max_cqe: cfg.max_cqe,
                max_mr: 1 << 16,
                max_pd: 1 << 16,
                max_ah: 1 << 16,
                max_pkeys: 1,
                phys_port_cnt: 1,
                ..Default::default()
            };
            if ext {
                let r = IbUverbsExQueryDeviceResp {
                    base,
                    response_length: std::mem::size_of::<IbUverbsExQueryDeviceResp>() as u32,
                    ..Default::default()
                };
                put(cmd.response_mut(), &r);
                let e = EfaIbvExQueryDeviceResp {
                    max_sq_wr: cfg.max_sq_wr,
                    max_rq_wr: cfg.max_rq_wr,
                    max_sq_sge: cfg.max_sq_sge,
                    max_rq_sge: cfg.max_rq_sge,
                    max_rdma_size: cfg.max_rdma_size,
                    device_caps: cfg.device_caps,
                    ..Default::default()
                };
                put(cmd.driver_response_mut(), &e);
            } else {
                put(cmd.response_mut(), &base);
            }
            Ok(())
        }
        (IB_USER_VERBS_CMD_QUERY_PORT, false) => {
            // ib_uverbs_query_port: the same attributes, legacy layout.
            let r: IbUverbsQueryPort = req(cmd)?;
            check_port(u64::from(r.port_num))?;
            put(cmd.response_mut(), &port_resp(&cfg));
            Ok(())
        }
        (IB_USER_VERBS_CMD_ALLOC_PD, false) => {
            let h = dev.handle();
            let pdn = h as u16;
            dev.pds.insert(h, pdn);
            put(cmd.response_mut(), &IbUverbsAllocPdResp { pd_handle: h });
            put(
                cmd.driver_response_mut(),
                &EfaIbvAllocPdResp {
                    pdn,
                    ..Default::default()
                },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_DEALLOC_PD, false) => {
            let r: IbUverbsDeallocPd = req(cmd)?;
            if !dev.pds.contains_key(&r.pd_handle) {
                return Err(Errno::INVAL);
            }
            let busy = dev.mrs.values().any(|m| m.pd == r.pd_handle)
                || dev.qps.values().any(|q| q.pd == r.pd_handle)
                || dev.ahs.values().any(|a| a.pd == r.pd_handle);
            if busy {
                return Err(Errno::BUSY);
            }
            dev.pds.remove(&r.pd_handle);
            Ok(())
        }
        (IB_USER_VERBS_CMD_REG_MR, false) => {
            let r: IbUverbsRegMr = req(cmd)?;
            if !dev.pds.contains_key(&r.pd_handle) || r.length == 0 {
                return Err(Errno::INVAL);
            }
            if r.start != r.hca_va {
                // The model moves data by CPU address: only identity-mapped MRs.
                return Err(Errno::OPNOTSUPP);
            }
            let h = dev.handle();
            dev.next_mr += 1;
            let n = dev.next_mr;
            let m = MrState {
                pd: r.pd_handle,
                lkey: 0x100 + n,
                rkey: 0x8000 + n,
                addr: r.start,
                len: r.length,
                access: r.access_flags,
            };
            dev.mrs.insert(h, m);
            put(
                cmd.response_mut(),
                &IbUverbsRegMrResp {
                    mr_handle: h,
                    lkey: m.lkey,
                    rkey: m.rkey,
                },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_DEREG_MR, false) => {
            let r: IbUverbsDeregMr = req(cmd)?;
            dev.mrs.remove(&r.mr_handle).map(|_| ()).ok_or(Errno::INVAL)
        }
        (IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, false) => {
            put(
                cmd.response_mut(),
                &IbUverbsCreateCompChannelResp { fd: eventfd()? },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_CREATE_QP, false) => create_qp(dev, cmd),
        (IB_USER_VERBS_CMD_MODIFY_QP, false) => modify_qp(dev, cmd),
        (IB_USER_VERBS_CMD_QUERY_QP, false) => {
            let r: IbUverbsQueryQp = req(cmd)?;
            let q = dev.qps.get(&r.qp_handle).ok_or(Errno::INVAL)?;
            let resp = IbUverbsQueryQpResp {
                qp_state: q.state,
                cur_qp_state: q.state,
                qkey: q.qkey,
                sq_psn: q.sq_psn,
                max_send_wr: q.depth,
                max_recv_wr: q.rq_descs / q.max_recv_sge.max(1),
                max_send_sge: q.max_send_sge,
                max_recv_sge: q.max_recv_sge,
                max_inline_data: q.max_inline,
                sq_sig_all: u8::from(q.sq_sig_all),
                port_num: 1,
                ..Default::default()
            };
            put(cmd.response_mut(), &resp);
            Ok(())
        }
        (IB_USER_VERBS_CMD_DESTROY_QP, false) => {
            let r: IbUverbsDestroyQp = req(cmd)?;
            let q = dev.qps.remove(&r.qp_handle).ok_or(Errno::INVAL)?;
            for k in q.keys {
                dev.regions.remove(&k);
            }
            for c in [q.send_cq, q.recv_cq] {
                if let Some(c) = dev.cqs.get_mut(&c) {
                    c.qp_refs -= 1;
                }
            }
            put(
                cmd.response_mut(),
                &IbUverbsDestroyQpResp { events_reported: 0 },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_CREATE_AH, false) => {
            let r: IbUverbsCreateAh = req(cmd)?;
            if !dev.pds.contains_key(&r.pd_handle) || r.attr.is_global != 1 || r.attr.port_num != 1
            {
                return Err(Errno::INVAL);
            }
            let gid = r.attr.grh.dgid;
            let next = dev.ahns.len() as u16 + 1;
            let e = dev.ahns.entry(gid).or_insert((next, 0));
            e.1 += 1;
            let ahn = e.0;
            let h = dev.handle();
            dev.ahs.insert(
                h,
                AhState {
                    pd: r.pd_handle,
                    gid,
                    ahn,
                },
            );
            put(cmd.response_mut(), &IbUverbsCreateAhResp { ah_handle: h });
            put(
                cmd.driver_response_mut(),
                &EfaIbvCreateAhResp {
                    efa_address_handle: ahn,
                    ..Default::default()
                },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_DESTROY_AH, false) => {
            let r: IbUverbsDestroyAh = req(cmd)?;
            let a = dev.ahs.remove(&r.ah_handle).ok_or(Errno::INVAL)?;
            if let Some(e) = dev.ahns.get_mut(&a.gid) {
                e.1 -= 1;
                if e.1 == 0 {
                    dev.ahns.remove(&a.gid);
                }
            }
            Ok(())
        }
        _ => Err(Errno::OPNOTSUPP),
    }
}

fn create_qp(dev: &mut Dev, cmd: &mut WriteCmd) -> Result<(), Errno> {
    let cfg = dev.cfg;
    let r: IbUverbsCreateQp = req(cmd)?;
    let e: EfaIbvCreateQp = drv(cmd)?;
    if e.comp_mask != 0 || e.reserved_98 != [0; 5] {
        return Err(Errno::INVAL);
    }
    if !dev.pds.contains_key(&r.pd_handle)
        || !dev.cqs.contains_key(&r.send_cq_handle)
        || !dev.cqs.contains_key(&r.recv_cq_handle)
    {
        return Err(Errno::INVAL);
    }
    if r.is_srq != 0 {
        return Err(Errno::OPNOTSUPP);
    }
    let kind = match r.qp_type {
        IB_UVERBS_QPT_UD => QpKind::Ud,
        0xff if e.driver_qp_type == EFA_QP_DRIVER_TYPE_SRD => QpKind::Srd,
        _ => return Err(Errno::OPNOTSUPP),
    };
    let known = EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV | EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID;
    if e.flags & !known != 0 {
        return Err(Errno::INVAL);
    }
    let unsolicited = e.flags & EFA_CREATE_QP_WITH_UNSOLICITED_WRITE_RECV != 0;
    if unsolicited && cfg.device_caps & EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV == 0 {
        return Err(Errno::OPNOTSUPP);
    }
    // The WQE size is what the ring holds per requested WR: 64, or 128 for the extended
    // format (inline data over 32 bytes, inline RDMA write).
    let wqe_size = e.sq_ring_size.checked_div(r.max_send_wr).unwrap_or(0);
    if wqe_size != 64 && wqe_size != 128 {
        return Err(Errno::INVAL);
    }
    let depth = e.sq_ring_size / wqe_size;
    let inline_max = if wqe_size == 128 {
        cfg.inline_buf_size_ex
    } else {
        cfg.inline_buf_size
    };
    if e.sq_ring_size == 0
        || e.sq_ring_size % wqe_size != 0
        || !depth.is_power_of_two()
        || e.sq_ring_size > cfg.max_llq_size
        || depth < u32::from(cfg.min_sq_wr)
        || depth > cfg.max_sq_wr
    {
        return Err(Errno::INVAL);
    }
    let rq_descs = e.rq_ring_size / 16;
    if e.rq_ring_size % 16 != 0 || !rq_descs.is_power_of_two() {
        return Err(Errno::INVAL);
    }
    if r.max_send_sge > u32::from(cfg.max_sq_sge)
        || r.max_recv_sge > u32::from(cfg.max_rq_sge)
        || r.max_inline_data > u32::from(inline_max)
    {
        return Err(Errno::INVAL);
    }
    let (k0, llq) = dev.region(LLQ_DESC_OFFSET as usize + e.sq_ring_size as usize)?;
    let (k1, sq_db) = dev.region(PAGE)?;
    let (k2, rq) = dev.region(e.rq_ring_size.max(16) as usize)?;
    let (k3, rq_db) = dev.region(PAGE)?;
    let qpn = dev.next_qpn;
    dev.next_qpn += 1;
    let h = dev.handle();
    let nsub = dev.cqs[&r.send_cq_handle].nsub;
    let rnsub = dev.cqs[&r.recv_cq_handle].nsub;
    let send_sub = qpn % nsub;
    let recv_sub = qpn % rnsub;
    for c in [r.send_cq_handle, r.recv_cq_handle] {
        if let Some(c) = dev.cqs.get_mut(&c) {
            c.qp_refs += 1;
        }
    }
    dev.qps.insert(
        h,
        QpState {
            qpn,
            pd: r.pd_handle,
            kind,
            send_cq: r.send_cq_handle,
            recv_cq: r.recv_cq_handle,
            state: IB_QPS_RESET,
            qkey: 0,
            sq_psn: 0,
            depth,
            wqe_size,
            max_send_sge: r.max_send_sge,
            max_recv_sge: r.max_recv_sge,
            max_inline: r.max_inline_data,
            sq_sig_all: r.sq_sig_all != 0,
            unsolicited,
            rq_descs,
            keys: [k0, k1, k2, k3],
            llq,
            sq_db,
            db_trap: None,
            db_seen: 0,
            db_ahead: 0,
            db_history: Vec::new(),
            rq,
            rq_db,
            sq_pc: 0,
            sq_total: 0,
            rq_cc: 0,
            send_sub,
            recv_sub,
        },
    );
    let resp = IbUverbsCreateQpResp {
        qp_handle: h,
        qpn: u32::from(qpn),
        max_send_wr: depth,
        max_recv_wr: r.max_recv_wr,
        max_send_sge: r.max_send_sge,
        max_recv_sge: r.max_recv_sge,
        max_inline_data: r.max_inline_data,
        ..Default::default()
    };
    put(cmd.response_mut(), &resp);
    let d = EfaIbvCreateQpResp {
        rq_db_offset: RQ_DB_OFFSET,
        sq_db_offset: SQ_DB_OFFSET,
        llq_desc_offset: LLQ_DESC_OFFSET,
        rq_mmap_key: k2,
        rq_mmap_size: page_align(e.rq_ring_size.max(16) as usize) as u64,
        rq_db_mmap_key: k3,
        sq_db_mmap_key: k1,
        llq_desc_mmap_key: k0,
        send_sub_cq_idx: send_sub,
        recv_sub_cq_idx: recv_sub,
        ..Default::default()
    };
    put(cmd.driver_response_mut(), &d);
    Ok(())
}

fn modify_qp(dev: &mut Dev, cmd: &mut WriteCmd) -> Result<(), Errno> {
    let caps = dev.cfg.device_caps;
    let r: IbUverbsModifyQp = req(cmd)?;
    let q = dev.qps.get_mut(&r.qp_handle).ok_or(Errno::INVAL)?;
    let mask = r.attr_mask;
    let cur = q.state;
    let new = if mask & IB_QP_STATE != 0 {
        r.qp_state
    } else {
        cur
    };
    // ib_modify_qp_is_ok for UD-like QPs (SRD follows UD), plus EFA's RNR retry on RTR->RTS.
    let (required, optional) = match (cur, new) {
        (IB_QPS_RESET, IB_QPS_INIT) => (IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY, 0),
        (IB_QPS_INIT, IB_QPS_INIT) => (0, IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY),
        (IB_QPS_INIT, IB_QPS_RTR) => (0, IB_QP_PKEY_INDEX | IB_QP_QKEY),
        (IB_QPS_RTR, IB_QPS_RTS) => (IB_QP_SQ_PSN, IB_QP_CUR_STATE | IB_QP_QKEY | IB_QP_RNR_RETRY),
        (IB_QPS_RTS, IB_QPS_RTS) => (0, IB_QP_CUR_STATE | IB_QP_QKEY),
        (_, IB_QPS_ERR) | (_, IB_QPS_RESET) => (0, 0),
        _ => return Err(Errno::INVAL),
    };
    let given = mask & !IB_QP_STATE;
    if given & required != required || given & !(required | optional) != 0 {
        return Err(Errno::INVAL);
    }
    if mask & IB_QP_RNR_RETRY != 0 && caps & EFA_QUERY_DEVICE_CAPS_RNR_RETRY == 0 {
        return Err(Errno::OPNOTSUPP);
    }
    if mask & IB_QP_PORT != 0 && r.port_num != 1 {
        return Err(Errno::INVAL);
    }
    if mask & IB_QP_QKEY != 0 {
        q.qkey = r.qkey;
    }
    if mask & IB_QP_SQ_PSN != 0 {
        q.sq_psn = r.sq_psn;
    }
    q.state = new;
    Ok(())
}

/// Which CQ-create attributes the kernel knows, and their lengths (0 = IDR/FD, no length).
fn cq_attr_len(id: u16) -> Option<Option<usize>> {
    Some(match id {
        UVERBS_ATTR_CREATE_CQ_HANDLE | UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL => Some(0),
        UVERBS_ATTR_CREATE_CQ_EVENT_FD => Some(0),
        UVERBS_ATTR_CREATE_CQ_CQE | UVERBS_ATTR_CREATE_CQ_COMP_VECTOR => Some(4),
        UVERBS_ATTR_CREATE_CQ_FLAGS | UVERBS_ATTR_CREATE_CQ_RESP_CQE => Some(4),
        UVERBS_ATTR_CREATE_CQ_BUFFER_FD => Some(4),
        UVERBS_ATTR_CREATE_CQ_USER_HANDLE
        | UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH
        | UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET
        | UVERBS_ATTR_CREATE_CQ_BUFFER_VA => Some(8),
        UVERBS_ATTR_UHW_IN | UVERBS_ATTR_UHW_OUT => None,
        _ => return None,
    })
}

fn in_u32(cmd: &IoctlCmd<'_>, id: u16) -> Option<u32> {
    let a = cmd.attrs().find(|a| a.id() == id)?;
    let b = a.input()?;
    Some(u32::from_ne_bytes(b.get(..4)?.try_into().ok()?))
}

fn in_u64(cmd: &IoctlCmd<'_>, id: u16) -> Option<u64> {
    let a = cmd.attrs().find(|a| a.id() == id)?;
    let b = a.input()?;
    Some(u64::from_ne_bytes(b.get(..8)?.try_into().ok()?))
}

fn ioctl(f: &mut Fabric, d: usize, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let dev = &mut f.devs[d];
    match (cmd.object_id(), cmd.method_id()) {
        (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE) => create_cq(dev, cmd),
        (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY) => {
            let h = cmd
                .attrs()
                .find(|a| a.id() == UVERBS_ATTR_DESTROY_CQ_HANDLE)
                .map(|a| a.data() as u32)
                .ok_or(Errno::INVAL)?;
            let c = dev.cqs.get(&h).ok_or(Errno::INVAL)?;
            if c.qp_refs != 0 {
                return Err(Errno::BUSY);
            }
            let c = dev.cqs.remove(&h).ok_or(Errno::INVAL)?;
            dev.regions.remove(&c.key);
            if let Some(k) = c.db_key {
                dev.regions.remove(&k);
            }
            if let Some(mut a) = cmd.attr_mut(UVERBS_ATTR_DESTROY_CQ_RESP) {
                a.write_output(IbUverbsDestroyCqResp::default().as_bytes())?;
            }
            Ok(())
        }
        (UVERBS_OBJECT_MR, EFA_IB_METHOD_MR_QUERY) => query_mr(dev, cmd),
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT) => query_port_ioctl(dev, cmd),
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY) => query_gid_entry(dev, cmd),
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE) => query_gid_table(dev, cmd),
        _ => Err(Errno::PROTONOSUPPORT),
    }
}

// ---------------------------------------------------------------------------------------------
// Port and GID queries
//
// Facts (kernel drivers/infiniband/hw/efa/efa_verbs.c, core/uverbs_std_types_device.c,
// core/uverbs_cmd.c, core/cache.c):
// - one port, numbered 1 (`rdma_is_port_valid`: any other number is EINVAL);
// - `efa_query_port` fills, after the core zeroed the attributes: state ACTIVE, phys_state
//   LINK_UP, gid_tbl_len 1, pkey_tbl_len 1, active_speed EDR, active_width 4X, max and active
//   MTU `ib_mtu_int_to_enum(mtu)`, max_msg_sz = the device MTU, max_vl_num 1, lmc 1; LID,
//   SM LID, counters and capability flags stay 0;
// - `efa_port_link_layer` answers IB_LINK_LAYER_UNSPECIFIED; no GRH-required flag;
// - the ioctl answer (`ib_uverbs_query_port_resp_ex`) adds `active_speed_ex` = active_speed;
// - the GID table (`config_non_roce_gid_cache` over `efa_query_gid`) holds one entry, index 0,
//   the device address, type IB, no netdev; since Linux 5.10 the GID ioctls serve non-IB/RoCE ports
//   (Gal Pressman's fixes), so index 1 and up are EINVAL (`rdma_get_gid_attr`);
// - `efa_query_pkey`: index 0 is 0xffff, any other EINVAL (sysfs `ports/1/pkeys/0`; no
//   uverbs command reads P_Keys).
// ---------------------------------------------------------------------------------------------

/// `IB_PORT_PHYS_STATE_LINK_UP`.
const PHYS_STATE_LINK_UP: u8 = 5;
/// `IB_SPEED_EDR` (25 Gb/s per lane).
const SPEED_EDR: u8 = 32;
/// `IB_WIDTH_4X`.
const WIDTH_4X: u8 = 2;

/// `ib_mtu_int_to_enum`: the largest IB MTU not above `mtu` (256 at least).
fn ib_mtu_int_to_enum(mtu: u32) -> u8 {
    match mtu {
        4096.. => IB_MTU_4096,
        2048..=4095 => IB_MTU_2048,
        1024..=2047 => IB_MTU_1024,
        512..=1023 => IB_MTU_512,
        _ => IB_MTU_256,
    }
}

/// What `efa_query_port` + `copy_port_attr_to_resp` report for port 1.
fn port_resp(cfg: &ModelConfig) -> IbUverbsQueryPortResp {
    let mtu = ib_mtu_int_to_enum(cfg.mtu);
    IbUverbsQueryPortResp {
        state: IB_PORT_ACTIVE,
        max_mtu: mtu,
        active_mtu: mtu,
        gid_tbl_len: 1,
        pkey_tbl_len: 1,
        max_msg_sz: cfg.mtu,
        lmc: 1,
        max_vl_num: 1,
        active_width: WIDTH_4X,
        active_speed: SPEED_EDR,
        phys_state: PHYS_STATE_LINK_UP,
        link_layer: IB_LINK_LAYER_UNSPECIFIED,
        ..Default::default()
    }
}

/// `rdma_is_port_valid` on a one-port device; a const above the attribute's type is EINVAL
/// too (`uverbs_get_const`).
fn check_port(port: u64) -> Result<(), Errno> {
    if port == 1 {
        Ok(())
    } else {
        Err(Errno::INVAL)
    }
}

/// The attributes of a method, as the kernel's method spec declares them: id, mandatory, and
/// for a PTR_OUT its minimum length and whether a longer buffer is allowed (zero-filled).
struct AttrSpec {
    id: u16,
    out_min: Option<usize>,
    /// For an output of a fixed type (`UVERBS_ATTR_TYPE`): the exact length.
    out_exact: bool,
    mandatory: bool,
}

/// The kernel's attribute parsing for one method: an unknown attribute marked mandatory is
/// EPROTONOSUPPORT, a missing mandatory one or an output of the wrong size EINVAL.
fn check_attrs(cmd: &IoctlCmd<'_>, spec: &[AttrSpec]) -> Result<(), Errno> {
    for a in cmd.attrs() {
        match spec.iter().find(|s| s.id == a.id()) {
            None if a.is_mandatory() => return Err(Errno::PROTONOSUPPORT),
            None => {}
            Some(s) => {
                if let Some(min) = s.out_min {
                    if a.kind() != AttrKind::PtrOut
                        || a.len() < min
                        || (s.out_exact && a.len() != min)
                    {
                        return Err(Errno::INVAL);
                    }
                }
            }
        }
    }
    for s in spec.iter().filter(|s| s.mandatory) {
        if !cmd.attrs().any(|a| a.id() == s.id) {
            return Err(Errno::INVAL);
        }
    }
    Ok(())
}

/// A constant (`UVERBS_ATTR_CONST_IN`) or small PTR_IN scalar, zero-extended.
fn in_scalar(cmd: &IoctlCmd<'_>, id: u16) -> Option<u64> {
    let a = cmd.attrs().find(|a| a.id() == id)?;
    let b = a.input()?;
    if b.len() > 8 {
        return None;
    }
    let mut v = [0u8; 8];
    v[..b.len()].copy_from_slice(b);
    Some(u64::from_ne_bytes(v))
}

/// `uverbs_get_flags32(..., 0)`: an absent flags attribute is 0; any bit set is EINVAL.
fn check_no_flags(cmd: &IoctlCmd<'_>, id: u16) -> Result<(), Errno> {
    match cmd.attrs().find(|a| a.id() == id) {
        None => Ok(()),
        Some(_) => match in_scalar(cmd, id) {
            Some(0) => Ok(()),
            _ => Err(Errno::INVAL),
        },
    }
}

/// `uverbs_copy_to_struct_or_zero`: the struct, cut to the buffer, zero past its end.
fn copy_struct_or_zero(cmd: &mut IoctlCmd<'_>, id: u16, bytes: &[u8]) -> Result<(), Errno> {
    let mut a = cmd.attr_mut(id).ok_or(Errno::INVAL)?;
    let len = a.as_ref().len();
    let mut buf = vec![0u8; len.max(bytes.len())];
    buf[..bytes.len()].copy_from_slice(bytes);
    a.write_output(&buf[..len])?;
    Ok(())
}

/// `UVERBS_METHOD_QUERY_PORT`: the port number is a mandatory const, the response at least
/// `offsetofend(ib_uverbs_query_port_resp_ex, active_speed_ex)` bytes.
fn query_port_ioctl(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    check_attrs(
        cmd,
        &[
            AttrSpec {
                id: UVERBS_ATTR_QUERY_PORT_PORT_NUM,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_PORT_RESP,
                out_min: Some(std::mem::size_of::<IbUverbsQueryPortRespEx>()),
                out_exact: false,
                mandatory: true,
            },
        ],
    )?;
    let port = in_scalar(cmd, UVERBS_ATTR_QUERY_PORT_PORT_NUM).ok_or(Errno::INVAL)?;
    check_port(port)?;
    let legacy_resp = port_resp(&dev.cfg);
    let resp = IbUverbsQueryPortRespEx {
        active_speed_ex: u32::from(legacy_resp.active_speed),
        legacy_resp,
        ..Default::default()
    };
    copy_struct_or_zero(cmd, UVERBS_ATTR_QUERY_PORT_RESP, resp.as_bytes())
}

/// The one GID table entry (port 1, index 0).
fn gid_entry(dev: &Dev) -> IbUverbsGidEntry {
    let mut e = IbUverbsGidEntry {
        gid_index: 0,
        port_num: 1,
        gid_type: IB_UVERBS_GID_TYPE_IB,
        netdev_ifindex: 0,
        ..Default::default()
    };
    e.gid.as_mut_bytes().copy_from_slice(&dev.gid);
    e
}

/// `UVERBS_METHOD_QUERY_GID_ENTRY`: flags must be 0, port 1, index 0 (`rdma_get_gid_attr`:
/// an index past the table is EINVAL).
fn query_gid_entry(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    check_attrs(
        cmd,
        &[
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_ENTRY_PORT,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
                out_min: Some(std::mem::size_of::<IbUverbsGidEntry>()),
                out_exact: false,
                mandatory: true,
            },
        ],
    )?;
    check_no_flags(cmd, UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS)?;
    let port = in_scalar(cmd, UVERBS_ATTR_QUERY_GID_ENTRY_PORT).ok_or(Errno::INVAL)?;
    let index = in_scalar(cmd, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX).ok_or(Errno::INVAL)?;
    check_port(port)?;
    if index != 0 {
        return Err(Errno::INVAL);
    }
    let e = gid_entry(dev);
    copy_struct_or_zero(cmd, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, e.as_bytes())
}

/// `UVERBS_METHOD_QUERY_GID_TABLE`: entries of `entry_size` bytes each (cut or zero-padded
/// from the kernel's 32), a buffer that is not a whole number of them or holds none is
/// EINVAL, as is a table larger than the buffer; the count is a u64.
fn query_gid_table(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    check_attrs(
        cmd,
        &[
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_TABLE_FLAGS,
                out_min: None,
                out_exact: false,
                mandatory: false,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES,
                out_min: Some(0),
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
                out_min: Some(8),
                out_exact: true,
                mandatory: true,
            },
        ],
    )?;
    check_no_flags(cmd, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS)?;
    let entry_size =
        in_scalar(cmd, UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE).ok_or(Errno::INVAL)? as usize;
    if entry_size == 0 {
        return Err(Errno::INVAL);
    }
    let buf_len = cmd
        .attrs()
        .find(|a| a.id() == UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES)
        .map(|a| a.len())
        .ok_or(Errno::INVAL)?;
    if buf_len % entry_size != 0 || buf_len / entry_size == 0 {
        return Err(Errno::INVAL);
    }
    let table = [gid_entry(dev)];
    if table.len() > buf_len / entry_size {
        return Err(Errno::INVAL);
    }
    let mut out = vec![0u8; table.len() * entry_size];
    for (e, dst) in table.iter().zip(out.chunks_exact_mut(entry_size)) {
        let b = e.as_bytes();
        let n = b.len().min(entry_size);
        dst[..n].copy_from_slice(&b[..n]);
    }
    cmd.attr_mut(UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES)
        .ok_or(Errno::INVAL)?
        .write_output(&out)?;
    let n = table.len() as u64;
    cmd.attr_mut(UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES)
        .ok_or(Errno::INVAL)?
        .write_output(n.as_bytes())?;
    Ok(())
}

/// Interconnect ids the model reports for every MR (`EFA_IB_METHOD_MR_QUERY`).
pub const MODEL_RECV_IC_ID: u16 = 3;
/// See [`MODEL_RECV_IC_ID`].
pub const MODEL_RDMA_READ_IC_ID: u16 = 5;
/// See [`MODEL_RECV_IC_ID`].
pub const MODEL_RDMA_RECV_IC_ID: u16 = 7;

/// `EFA_IB_METHOD_MR_QUERY`: like the kernel, every attribute is mandatory; the handle must be
/// a live MR; the RDMA ids are valid only when the device has the matching cap.
fn query_mr(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let outs = [
        EFA_IB_ATTR_QUERY_MR_RESP_IC_ID_VALIDITY,
        EFA_IB_ATTR_QUERY_MR_RESP_RECV_IC_ID,
        EFA_IB_ATTR_QUERY_MR_RESP_RDMA_READ_IC_ID,
        EFA_IB_ATTR_QUERY_MR_RESP_RDMA_RECV_IC_ID,
    ];
    let mut seen = Vec::new();
    for a in cmd.attrs() {
        if seen.contains(&a.id()) {
            return Err(Errno::INVAL);
        }
        seen.push(a.id());
        match a.id() {
            EFA_IB_ATTR_QUERY_MR_HANDLE if a.kind() == AttrKind::Idr => {}
            EFA_IB_ATTR_QUERY_MR_HANDLE => return Err(Errno::INVAL),
            id if outs.contains(&id) && (a.kind() != AttrKind::PtrOut || a.len() != 2) => {
                return Err(Errno::INVAL)
            }
            id if outs.contains(&id) => {}
            _ if a.is_mandatory() => return Err(Errno::PROTONOSUPPORT),
            _ => {}
        }
    }
    if seen.len() != 5 {
        return Err(Errno::INVAL);
    }
    let h = cmd
        .attrs()
        .find(|a| a.id() == EFA_IB_ATTR_QUERY_MR_HANDLE)
        .map(|a| a.data() as u32)
        .ok_or(Errno::INVAL)?;
    if !dev.mrs.contains_key(&h) {
        return Err(Errno::INVAL);
    }
    let caps = dev.cfg.device_caps;
    let mut validity = EFA_QUERY_MR_VALIDITY_RECV_IC_ID;
    if caps & EFA_QUERY_DEVICE_CAPS_RDMA_READ != 0 {
        validity |= EFA_QUERY_MR_VALIDITY_RDMA_READ_IC_ID;
    }
    if caps & EFA_QUERY_DEVICE_CAPS_RDMA_WRITE != 0 {
        validity |= EFA_QUERY_MR_VALIDITY_RDMA_RECV_IC_ID;
    }
    for (id, v) in outs.into_iter().zip([
        validity,
        MODEL_RECV_IC_ID,
        MODEL_RDMA_READ_IC_ID,
        MODEL_RDMA_RECV_IC_ID,
    ]) {
        cmd.attr_mut(id)
            .ok_or(Errno::INVAL)?
            .write_output(&v.to_ne_bytes())?;
    }
    Ok(())
}

fn create_cq(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let cfg = dev.cfg;
    let mut seen = Vec::new();
    for a in cmd.attrs() {
        if seen.contains(&a.id()) {
            return Err(Errno::INVAL);
        }
        seen.push(a.id());
        match cq_attr_len(a.id()) {
            None if a.is_mandatory() => return Err(Errno::PROTONOSUPPORT),
            None => continue,
            Some(Some(0)) => {
                if !a.is_empty() {
                    return Err(Errno::INVAL);
                }
            }
            Some(Some(n)) => {
                if a.len() != n {
                    return Err(Errno::INVAL);
                }
            }
            Some(None) => {}
        }
    }
    for m in [
        UVERBS_ATTR_CREATE_CQ_HANDLE,
        UVERBS_ATTR_CREATE_CQ_CQE,
        UVERBS_ATTR_CREATE_CQ_USER_HANDLE,
        UVERBS_ATTR_CREATE_CQ_COMP_VECTOR,
        UVERBS_ATTR_CREATE_CQ_RESP_CQE,
    ] {
        if !seen.contains(&m) {
            return Err(Errno::INVAL);
        }
    }
    if cmd
        .attrs()
        .any(|a| a.id() == UVERBS_ATTR_CREATE_CQ_HANDLE && a.kind() != AttrKind::IdrNew)
    {
        return Err(Errno::INVAL);
    }
    let cqe = in_u32(cmd, UVERBS_ATTR_CREATE_CQ_CQE).ok_or(Errno::INVAL)?;
    if cqe == 0 || cqe > cfg.max_cqe {
        return Err(Errno::INVAL);
    }
    if in_u32(cmd, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR) != Some(0) {
        return Err(Errno::INVAL);
    }
    let uhw = cmd
        .attrs()
        .find(|a| a.id() == UVERBS_ATTR_UHW_IN)
        .and_then(|a| a.input().map(|b| b.to_vec()))
        .ok_or(Errno::INVAL)?;
    let (c, _) = EfaIbvCreateCq::read_from_prefix(&uhw).map_err(|_| Errno::INVAL)?;
    if c.comp_mask != 0
        || c.reserved_58 != [0; 5]
        || uhw[24.min(uhw.len())..].iter().any(|&b| b != 0)
    {
        return Err(Errno::INVAL);
    }
    let known = EFA_CREATE_CQ_WITH_COMPLETION_CHANNEL
        | EFA_CREATE_CQ_WITH_SGID
        | EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID;
    if c.flags & !known != 0
        || (c.cq_entry_size != 16 && c.cq_entry_size != 32)
        || c.num_sub_cqs != cfg.sub_cqs_per_cq
    {
        return Err(Errno::INVAL);
    }
    let with_sgid = c.flags & EFA_CREATE_CQ_WITH_SGID != 0;
    if with_sgid && cfg.device_caps & EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID == 0 {
        return Err(Errno::OPNOTSUPP);
    }
    if with_sgid && c.cq_entry_size != 32 {
        return Err(Errno::INVAL);
    }
    let out_len = cmd
        .attrs()
        .find(|a| a.id() == UVERBS_ATTR_UHW_OUT)
        .map(|a| a.len())
        .ok_or(Errno::INVAL)?;
    if out_len < std::mem::size_of::<EfaIbvCreateCqResp>() {
        return Err(Errno::INVAL);
    }
    let depth = cqe.next_power_of_two();
    let size = depth as usize * usize::from(c.num_sub_cqs) * c.cq_entry_size as usize;
    let buf_fd = in_u32(cmd, UVERBS_ATTR_CREATE_CQ_BUFFER_FD);
    let buf_len = in_u64(cmd, UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH);
    let buf_off = in_u64(cmd, UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET).unwrap_or(0);
    let (key, buf, off) = match (buf_fd, buf_len) {
        (None, None) => {
            let (k, r) = dev.region(size)?;
            (k, r, 0)
        }
        (Some(fd), Some(len)) => {
            if cfg.device_caps & EFA_QUERY_DEVICE_CAPS_CQ_WITH_EXT_MEM == 0 {
                return Err(Errno::OPNOTSUPP);
            }
            if (len as usize) < size {
                return Err(Errno::INVAL);
            }
            // The kernel takes a reference on the dmabuf; the model dups the fd and maps it.
            // SAFETY: the fd number is live for the duration of this call (the caller's
            // BorrowedFd); we only borrow it to duplicate it.
            let bfd = unsafe { BorrowedFd::borrow_raw(fd as i32) };
            let dup = rustix::io::fcntl_dupfd_cloexec(bfd, 0)?;
            let skew = (buf_off as usize) % PAGE;
            let maplen = page_align(skew + len as usize);
            // SAFETY: a new shared mapping of the dup'd fd, owned by the Region built below.
            let p = unsafe {
                rustix::mm::mmap(
                    std::ptr::null_mut(),
                    maplen,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED,
                    &dup,
                    buf_off - skew as u64,
                )?
            };
            let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
            (
                0,
                Arc::new(Region {
                    fd: dup,
                    ptr,
                    len: maplen,
                }),
                skew,
            )
        }
        _ => return Err(Errno::INVAL),
    };
    let db_key = if cfg.cq_doorbell {
        Some(dev.region(PAGE)?.0)
    } else {
        None
    };
    let h = dev.handle();
    let idx = dev.next_cqn;
    dev.next_cqn += 1;
    dev.cqs.insert(
        h,
        CqState {
            idx,
            depth,
            nsub: c.num_sub_cqs,
            entry: c.cq_entry_size,
            with_sgid,
            buf: buf.clone(),
            buf_off: off,
            produced: vec![0; usize::from(c.num_sub_cqs)],
            qp_refs: 0,
            key,
            db_key,
        },
    );
    let resp = EfaIbvCreateCqResp {
        comp_mask: if db_key.is_some() {
            EFA_CREATE_CQ_RESP_DB_OFF
        } else {
            0
        },
        q_mmap_key: key,
        q_mmap_size: if key == 0 { 0 } else { buf.len as u64 },
        cq_idx: idx,
        db_off: CQ_DB_OFFSET,
        db_mmap_key: db_key.unwrap_or(0),
        ..Default::default()
    };
    cmd.attr_mut(UVERBS_ATTR_CREATE_CQ_HANDLE)
        .ok_or(Errno::INVAL)?
        .set_new(u64::from(h))?;
    cmd.attr_mut(UVERBS_ATTR_CREATE_CQ_RESP_CQE)
        .ok_or(Errno::INVAL)?
        .write_output(&depth.to_ne_bytes())?;
    cmd.attr_mut(UVERBS_ATTR_UHW_OUT)
        .ok_or(Errno::INVAL)?
        .write_output(resp.as_bytes())?;
    Ok(())
}

/// A send WQE taken from an LLQ, ready to execute.
struct Msg {
    dev: usize,
    qp: u32,
    kind: QpKind,
    /// The slot's bytes in the 128-byte layout (a 64-byte WQE is its prefix, zero after).
    wqe: EfaIoTxWqe128,
}

/// Takes the WQEs of QP `h` the driver rang the SQ doorbell for: each doorbell store the trap
/// logged, in order, checked by [`check_ring`]; without a trap, the doorbell word as it is now.
fn collect_wqes(f: &mut Fabric, d: usize, h: u32, out: &mut Vec<Msg>) {
    let q = &f.devs[d].qps[&h];
    let Some((rings, lost)) = q.db_trap.as_ref().map(trap::Trap::drain) else {
        let db = q.sq_db.load32(SQ_DB_OFFSET as usize);
        return consume_wqes(f, d, h, db, out);
    };
    if lost {
        let qpn = q.qpn;
        f.violation(format!(
            "qp {qpn}: the model's SQ doorbell log overflowed (over {} doorbells between two \
             process() calls): doorbells were lost, call process() more often",
            trap::LOG
        ));
    }
    for r in rings {
        if check_ring(f, d, h, &r) {
            consume_wqes(f, d, h, r.value, out);
        }
    }
}

/// Checks one SQ doorbell store against the previous one: the right word, a step forward of at
/// most `max_tx_batch` 64-byte lines of WQEs written since the previous doorbell, over WQEs
/// already in the LLQ. Returns whether it is a doorbell value the device acts on.
fn check_ring(f: &mut Fabric, d: usize, h: u32, r: &trap::Ring) -> bool {
    let cfg = f.devs[d].cfg;
    let q = f.devs[d].qps.get_mut(&h).expect("qp");
    let qpn = q.qpn;
    if r.offset != SQ_DB_OFFSET {
        let (v, o) = (r.value, r.offset);
        f.violation(format!(
            "qp {qpn}: store of {v:#x} at offset {o:#x} of the SQ doorbell page, not at the \
             doorbell ({SQ_DB_OFFSET:#x})"
        ));
        return false;
    }
    q.db_history.push(r.value);
    let (seen, ahead0, depth) = (q.db_seen, q.db_ahead, q.depth);
    let v = r.value as u16;
    let step = u32::from(v.wrapping_sub(seen));
    q.db_seen = v;
    q.db_ahead = r.ahead;
    // Written to the LLQ between the two doorbells: the step, plus what is already written
    // past this doorbell, minus what was already written past the previous one.
    let written = (step + r.ahead).saturating_sub(ahead0);
    let lines = written * q.wqe_size / 64;
    let mut bad = Vec::new();
    if step == 0 {
        bad.push(format!(
            "qp {qpn}: SQ doorbell rung again with {v}, no new WQE"
        ));
    } else if step > depth {
        // Backwards, or past the ring: `consume_wqes` reports it.
        return true;
    }
    if cfg.max_tx_batch != 0 && lines > u32::from(cfg.max_tx_batch) {
        let m = cfg.max_tx_batch;
        bad.push(format!(
            "qp {qpn}: {written} WQEs ({lines} 64-byte lines) written to the LLQ between SQ \
             doorbells {seen} and {v}, more than max_tx_batch {m}"
        ));
    }
    if cfg.min_sq_wr != 0 && step >= depth {
        bad.push(format!(
            "qp {qpn}: SQ doorbell {v} rings the whole SQ ({depth} WQEs) at once, which a \
             device with min_sq_wr cannot take"
        ));
    }
    if r.fresh != step {
        let fresh = r.fresh;
        bad.push(format!(
            "qp {qpn}: SQ doorbell {v} covers {step} WQEs, but only {fresh} of them were in \
             the LLQ when it was rung"
        ));
    }
    for b in bad {
        f.violation(b);
    }
    true
}

/// Consumes the WQEs between the device's producer counter and doorbell value `db`.
fn consume_wqes(f: &mut Fabric, d: usize, h: u32, db: u32, out: &mut Vec<Msg>) {
    let (pc, depth, state, qpn) = {
        let q = &f.devs[d].qps[&h];
        (q.sq_pc, q.depth, q.state, q.qpn)
    };
    let db16 = db as u16;
    let new = u32::from(db16.wrapping_sub(pc));
    if new == 0 {
        return;
    }
    if db >> 16 != 0 {
        f.violation(format!("qp {qpn}: SQ doorbell {db:#x} has bits above 15"));
    }
    if state != IB_QPS_RTS {
        f.violation(format!(
            "qp {qpn}: SQ doorbell rung in state {state}, not RTS"
        ));
    }
    if new > depth {
        f.violation(format!(
            "qp {qpn}: SQ doorbell {db16} is {new} WQEs past the device's {pc}, more than the depth {depth}"
        ));
        let q = f.devs[d].qps.get_mut(&h).expect("qp");
        q.sq_pc = db16;
        return;
    }
    for _ in 0..new {
        let q = f.devs[d].qps.get_mut(&h).expect("qp");
        let slot = (u32::from(q.sq_pc) & (depth - 1)) as usize;
        let mut bytes = [0u8; 128];
        let size = q.wqe_size as usize;
        q.llq
            .read(LLQ_DESC_OFFSET as usize + slot * size, &mut bytes[..size]);
        let phase = (q.sq_total / u64::from(depth)) % 2 == 1;
        q.sq_pc = q.sq_pc.wrapping_add(1);
        q.sq_total += 1;
        let kind = q.kind;
        let wqe = EfaIoTxWqe128::read_from_bytes(&bytes).expect("128 bytes");
        if let Some(why) = check_wqe(&f.devs[d], h, &wqe, phase) {
            f.violation(format!("qp {qpn} slot {slot}: {why}"));
            continue;
        }
        out.push(Msg {
            dev: d,
            qp: h,
            kind,
            wqe,
        });
    }
}

/// What a correct driver never writes. `None` = the WQE is well formed.
fn check_wqe(dev: &Dev, h: u32, w: &EfaIoTxWqe128, phase: bool) -> Option<String> {
    let q = &dev.qps[&h];
    let m = &w.meta;
    if !m.meta_desc() {
        return Some("meta_desc bit clear".into());
    }
    if m.meta_extension() {
        return Some("meta_extension set".into());
    }
    if !m.first() || !m.last() {
        return Some("first/last not both set (EFA WQEs are one descriptor)".into());
    }
    if m.phase() != phase {
        return Some(format!(
            "phase {} but the device expects {} (stale or wrapped wrong)",
            m.phase(),
            phase
        ));
    }
    if !m.comp_req() {
        return Some("unsignaled send (comp_req clear): EFA requires every send signaled".into());
    }
    if m.ctrl2
        & !(EFA_IO_TX_META_DESC_PHASE_MASK
            | EFA_IO_TX_META_DESC_FIRST_MASK
            | EFA_IO_TX_META_DESC_LAST_MASK
            | EFA_IO_TX_META_DESC_COMP_REQ_MASK)
        != 0
        || m.ctrl3 & !EFA_IO_TX_META_DESC_PROCESSING_HINTS_MASK != 0
        || m.reserved != 0
        || m.reserved2 != [0; 6]
    {
        return Some(format!(
            "reserved bits set (ctrl2 {:#x}, ctrl3 {:#x})",
            m.ctrl2, m.ctrl3
        ));
    }
    let op = m.op_type();
    let caps = dev.cfg.device_caps;
    match op {
        EFA_IO_SEND => {}
        EFA_IO_RDMA_READ | EFA_IO_RDMA_WRITE => {
            if q.kind != QpKind::Srd {
                return Some("RDMA on a UD QP".into());
            }
            let need = if op == EFA_IO_RDMA_READ {
                EFA_QUERY_DEVICE_CAPS_RDMA_READ
            } else {
                EFA_QUERY_DEVICE_CAPS_RDMA_WRITE
            };
            if caps & need == 0 {
                return Some(format!("op {op} not in the device caps"));
            }
            if op == EFA_IO_RDMA_READ && m.has_imm() {
                return Some("RDMA read with immediate".into());
            }
        }
        _ => return Some(format!("unknown op_type {op}")),
    }
    let len = u32::from(m.length.get());
    let big = q.wqe_size == 128;
    if m.inline_msg() {
        if op == EFA_IO_RDMA_READ {
            return Some("inline RDMA read".into());
        }
        if op == EFA_IO_RDMA_WRITE && !big {
            return Some("inline RDMA write in a 64-byte WQE".into());
        }
        let room = if big {
            EFA_IO_TX_DESC_INLINE_MAX_SIZE_128 as u32
        } else {
            EFA_IO_TX_DESC_INLINE_MAX_SIZE as u32
        };
        if len > room || len > q.max_inline {
            return Some(format!(
                "inline length {len} over the QP's max_inline_data {} or the {}-byte WQE's room {room}",
                q.max_inline, q.wqe_size
            ));
        }
        if op == EFA_IO_RDMA_WRITE && w.rdma_req().remote_mem.length.get() != len {
            return Some("inline RDMA write: remote length differs from the inline length".into());
        }
    } else if op == EFA_IO_SEND {
        if len > q.max_send_sge.max(1) {
            return Some(format!(
                "{len} SGEs, the QP has max_send_sge {}",
                q.max_send_sge
            ));
        }
        for b in &w.sgl()[..len as usize] {
            if let Some(why) = check_sge(dev, q.pd, b.buf_addr(), b.length.get(), b.lkey_value()) {
                return Some(why);
            }
        }
    } else {
        if len != 1 {
            return Some(format!("RDMA WQE with {len} local buffers (must be 1)"));
        }
        let r = w.rdma_req();
        let b = &r.local_mem()[0];
        if let Some(why) = check_sge(dev, q.pd, b.buf_addr(), b.length.get(), b.lkey_value()) {
            return Some(why);
        }
        if r.remote_mem.length.get() != b.length.get() {
            return Some("remote length differs from the local buffer length".into());
        }
        if r.remote_mem.length.get() > dev.cfg.max_rdma_size {
            return Some("RDMA longer than max_rdma_size".into());
        }
    }
    None
}

fn find_lkey(dev: &Dev, lkey: u32) -> Option<MrState> {
    dev.mrs.values().find(|m| m.lkey == lkey).copied()
}

fn check_sge(dev: &Dev, pd: u32, addr: u64, len: u32, lkey: u32) -> Option<String> {
    let Some(m) = find_lkey(dev, lkey) else {
        return Some(format!("lkey {lkey:#x} is not registered"));
    };
    if m.pd != pd {
        return Some(format!("lkey {lkey:#x} belongs to another PD"));
    }
    let end = addr.checked_add(u64::from(len));
    if addr < m.addr || end.is_none_or(|e| e > m.addr + m.len) {
        return Some(format!(
            "SGE {addr:#x}+{len} outside MR {:#x}+{} of lkey {lkey:#x}",
            m.addr, m.len
        ));
    }
    None
}

/// Copies between registered memory (addresses checked against live MRs by the caller).
fn mem_read(addr: u64, dst: &mut [u8]) {
    for (i, b) in dst.iter_mut().enumerate() {
        // SAFETY: `addr..addr+len` lies in a memory region registered in this process and
        // still registered (checked against the model's MR table under its lock); the client
        // keeps registered memory mapped until it deregisters. Volatile, through raw
        // pointers: the client may touch it concurrently, as with a real device.
        *b = unsafe { (addr as *const u8).add(i).read_volatile() };
    }
}

fn mem_write(addr: u64, src: &[u8]) {
    for (i, b) in src.iter().enumerate() {
        // SAFETY: as in `mem_read`.
        unsafe { (addr as *mut u8).add(i).write_volatile(*b) };
    }
}

fn find_dev_by_gid(f: &Fabric, gid: &[u8; 16]) -> Option<usize> {
    f.devs.iter().position(|d| &d.gid == gid)
}

fn push_cqe(f: &mut Fabric, d: usize, cq_h: u32, sub: u16, mut cqe: EfaIoRxCdescEx) {
    let Some(cq) = f.devs[d].cqs.get_mut(&cq_h) else {
        return;
    };
    let s = usize::from(sub);
    let p = cq.produced[s];
    let idx = p & (cq.depth - 1);
    let phase = (p / cq.depth) % 2 == 0;
    cq.produced[s] = p.wrapping_add(1);
    cqe.base.common.set_phase(phase);
    let entry = cq.entry as usize;
    let off = cq.buf_off + (s * cq.depth as usize + idx as usize) * entry;
    let bytes = cqe.as_bytes();
    cq.buf.write(off + 4, &bytes[4..entry]);
    cq.buf.store32(
        off,
        u32::from_ne_bytes(bytes[..4].try_into().expect("4 bytes")),
    );
}

fn tx_cqe(qpn: u16, req_id: u16, status: u8, op: u8) -> EfaIoRxCdescEx {
    let mut c = EfaIoRxCdescEx::new_zeroed();
    c.base.common.req_id.set(req_id);
    c.base.common.status = status;
    c.base.common.set_q_type(EFA_IO_SEND_QUEUE);
    c.base.common.set_op_type(op);
    c.base.common.qp_num.set(qpn);
    c
}

/// A receive WQE taken from an RQ: req_id and buffers.
struct RecvWqe {
    req_id: u16,
    bufs: Vec<(u64, u32, u32)>,
}

fn take_recv(f: &mut Fabric, d: usize, h: u32) -> Result<Option<RecvWqe>, String> {
    let q = f.devs[d].qps.get_mut(&h).expect("qp");
    let db = q.rq_db.load32(RQ_DB_OFFSET as usize) as u16;
    if db == q.rq_cc {
        return Ok(None);
    }
    let mut bufs = Vec::new();
    let mut req_id = 0;
    loop {
        if db == q.rq_cc {
            return Err("receive WQE without a last descriptor before the doorbell".into());
        }
        let slot = (u32::from(q.rq_cc) & (q.rq_descs - 1)) as usize;
        let mut b = [0u8; 16];
        q.rq.read(slot * 16, &mut b);
        q.rq_cc = q.rq_cc.wrapping_add(1);
        let desc = EfaIoRxDesc::read_from_bytes(&b).expect("16 bytes");
        if bufs.is_empty() {
            if !desc.first() {
                return Err("receive descriptor without first set starts a WQE".into());
            }
            req_id = desc.req_id.get();
        } else if desc.first() {
            return Err("first set in the middle of a receive WQE".into());
        }
        if desc.lkey_ctrl.get() & 0x3f00_0000 != 0 {
            return Err("reserved bits set in a receive descriptor".into());
        }
        bufs.push((desc.buf_addr(), u32::from(desc.length.get()), desc.lkey()));
        if desc.last() {
            break;
        }
    }
    if bufs.len() > q.max_recv_sge.max(1) as usize {
        return Err(format!(
            "receive WQE with {} descriptors, max_recv_sge {}",
            bufs.len(),
            q.max_recv_sge
        ));
    }
    Ok(Some(RecvWqe { req_id, bufs }))
}

fn execute(f: &mut Fabric, m: Msg) {
    let w = m.wqe;
    let meta = w.meta;
    let (sqpn, s_pd, s_cq, s_sub, s_kind) = {
        let q = &f.devs[m.dev].qps[&m.qp];
        (q.qpn, q.pd, q.send_cq, q.send_sub, q.kind)
    };
    let req_id = meta.req_id.get();
    let op = meta.op_type();
    let complete = |f: &mut Fabric, status: u8| {
        push_cqe(f, m.dev, s_cq, s_sub, tx_cqe(sqpn, req_id, status, op));
    };
    // Resolve the destination through the sender's AH table.
    let Some(dgid) = f.devs[m.dev].gid_for_ahn(meta.ah.get()) else {
        return complete(f, EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_AH);
    };
    let Some(dd) = find_dev_by_gid(f, &dgid) else {
        return complete(f, EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE);
    };
    let Some(dh) = f.devs[dd].qp_by_qpn(meta.dest_qp_num.get()) else {
        return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN);
    };
    let (dqpn, d_pd, d_kind, d_state, d_qkey, d_cq, d_sub, d_unsol) = {
        let q = &f.devs[dd].qps[&dh];
        (
            q.qpn,
            q.pd,
            q.kind,
            q.state,
            q.qkey,
            q.recv_cq,
            q.recv_sub,
            q.unsolicited,
        )
    };
    if d_kind != s_kind
        || !(d_state == IB_QPS_RTR || d_state == IB_QPS_RTS)
        || d_qkey != meta.qkey.get()
    {
        return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_DEST_QPN);
    }
    let sgid = f.devs[m.dev].gid;
    let recv_ah = f.devs[dd].ahn_for_gid(&sgid);
    let len = usize::from(meta.length.get());
    // Local data of a send or write.
    let mut data = Vec::new();
    if op != EFA_IO_RDMA_READ {
        if meta.inline_msg() && op == EFA_IO_RDMA_WRITE {
            data.extend_from_slice(&w.rdma_req().inline_data()[..len]);
        } else if meta.inline_msg() {
            data.extend_from_slice(&w.inline_data()[..len]);
        } else if op == EFA_IO_SEND {
            for b in &w.sgl()[..len] {
                let mut v = vec![0u8; b.length.get() as usize];
                mem_read(b.buf_addr(), &mut v);
                data.extend_from_slice(&v);
            }
        } else {
            let b = &w.rdma_req().local_mem()[0];
            let mut v = vec![0u8; b.length.get() as usize];
            mem_read(b.buf_addr(), &mut v);
            data = v;
        }
    }
    let _ = s_pd;
    let mut rx = EfaIoRxCdescEx::new_zeroed();
    rx.base.common.set_q_type(EFA_IO_RECV_QUEUE);
    rx.base.common.qp_num.set(dqpn);
    rx.base.src_qp_num.set(sqpn);
    rx.base
        .ah
        .set(recv_ah.unwrap_or(EFA_IO_RX_CDESC_AH_UNKNOWN));
    if meta.has_imm() {
        rx.base.common.set_has_imm(true);
        rx.base.imm.set(meta.immediate_data.get());
    }
    let with_sgid = f.devs[dd].cqs.get(&d_cq).is_some_and(|c| c.with_sgid);
    if recv_ah.is_none() && with_sgid && op == EFA_IO_SEND {
        *rx.src_addr_mut() = sgid;
    }
    match op {
        EFA_IO_SEND => {
            if data.len() > f.devs[dd].cfg.mtu as usize {
                return complete(f, EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH);
            }
            let rwqe = match take_recv(f, dd, dh) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    // SRD: receiver not ready; UD: dropped silently.
                    let st = if s_kind == QpKind::Srd {
                        EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR
                    } else {
                        EFA_IO_COMP_STATUS_OK
                    };
                    return complete(f, st);
                }
                Err(why) => {
                    f.violation(format!("qp {dqpn} RQ: {why}"));
                    return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT);
                }
            };
            rx.base.common.req_id.set(rwqe.req_id);
            rx.base.common.set_op_type(EFA_IO_SEND);
            let room: u64 = rwqe.bufs.iter().map(|b| u64::from(b.1)).sum();
            for &(a, l, k) in &rwqe.bufs {
                if let Some(why) = check_sge(&f.devs[dd], d_pd, a, l, k) {
                    f.violation(format!("qp {dqpn} RQ: {why}"));
                    rx.base.common.status = EFA_IO_COMP_STATUS_LOCAL_ERROR_INVALID_LKEY;
                    push_cqe(f, dd, d_cq, d_sub, rx);
                    return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT);
                }
            }
            if data.len() as u64 > room {
                rx.base.common.status = EFA_IO_COMP_STATUS_LOCAL_ERROR_BAD_LENGTH;
                push_cqe(f, dd, d_cq, d_sub, rx);
                return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_LENGTH);
            }
            let mut off = 0;
            for &(a, l, _) in &rwqe.bufs {
                let n = (data.len() - off).min(l as usize);
                mem_write(a, &data[off..off + n]);
                off += n;
            }
            rx.base.length.set(data.len() as u16);
            push_cqe(f, dd, d_cq, d_sub, rx);
            complete(f, EFA_IO_COMP_STATUS_OK)
        }
        _ => {
            let r = w.rdma_req();
            let rkey = r.remote_mem.rkey.get();
            let raddr = r.remote_mem.buf_addr();
            let rlen = r.remote_mem.length.get();
            let need = if op == EFA_IO_RDMA_READ {
                IB_UVERBS_ACCESS_REMOTE_READ
            } else {
                IB_UVERBS_ACCESS_REMOTE_WRITE
            };
            let ok = f.devs[dd].mrs.values().any(|mr| {
                mr.rkey == rkey
                    && mr.pd == d_pd
                    && mr.access & need != 0
                    && raddr >= mr.addr
                    && raddr + u64::from(rlen) <= mr.addr + mr.len
            });
            if !ok {
                return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_BAD_ADDRESS);
            }
            if op == EFA_IO_RDMA_READ {
                let mut v = vec![0u8; rlen as usize];
                mem_read(raddr, &mut v);
                mem_write(r.local_mem()[0].buf_addr(), &v);
                return complete(f, EFA_IO_COMP_STATUS_OK);
            }
            mem_write(raddr, &data);
            if meta.has_imm() {
                rx.base.common.set_op_type(EFA_IO_RDMA_WRITE);
                rx.base.length.set(data.len() as u16);
                rx.set_rdma_write_length_hi((data.len() >> 16) as u16);
                match take_recv(f, dd, dh) {
                    Ok(Some(rw)) => rx.base.common.req_id.set(rw.req_id),
                    Ok(None) if d_unsol => rx.base.common.set_unsolicited(true),
                    Ok(None) => return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_RNR),
                    Err(why) => {
                        f.violation(format!("qp {dqpn} RQ: {why}"));
                        return complete(f, EFA_IO_COMP_STATUS_REMOTE_ERROR_ABORT);
                    }
                }
                push_cqe(f, dd, d_cq, d_sub, rx);
            }
            complete(f, EFA_IO_COMP_STATUS_OK)
        }
    }
}

/// SQ doorbell stores the trap has seen in this process so far: (emulated, single-stepped).
/// A plain 32-bit `mov` (the library's doorbell write) is emulated, anything else
/// single-stepped (see the crate doc). Zero without the trap.
pub fn doorbell_trap_stats() -> (u64, u64) {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    return trap::stats();
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    return (0, 0);
}

/// Builds a well-formed 64-byte SEND WQE (for strictness tests that then break one field).
pub fn send_wqe(req_id: u16, dest: (u16, u16, u32), sge: (u64, u32, u32), phase: bool) -> [u8; 64] {
    let mut w = EfaIoTxWqe::default();
    w.meta.set_meta_desc(true);
    w.meta.set_op_type(EFA_IO_SEND);
    w.meta.set_first(true);
    w.meta.set_last(true);
    w.meta.set_comp_req(true);
    w.meta.set_phase(phase);
    w.meta.req_id.set(req_id);
    w.meta.ah.set(dest.0);
    w.meta.dest_qp_num.set(dest.1);
    w.meta.qkey.set(dest.2);
    w.meta.length.set(1);
    w.sgl_mut()[0] = EfaIoTxBufDesc::new(sge.0, sge.2, sge.1);
    let mut out = [0u8; 64];
    out.copy_from_slice(w.as_bytes());
    out
}

/// Owned fd helper for tests: a memfd of `len` bytes standing in for a dmabuf.
pub fn memfd(len: usize) -> OwnedFd {
    let fd = rustix::fs::memfd_create("efa-model-dmabuf", rustix::fs::MemfdFlags::CLOEXEC)
        .expect("memfd_create");
    rustix::fs::ftruncate(&fd, len as u64).expect("ftruncate");
    fd
}
