#![doc = include_str!("../README.md")]
//! # How the model works
//!
//! A strict model of EFA devices on one fabric, behind uverbs' [`Channel`] seam.
//!
//! Each [`EfaDevice`] answers the commands the kernel's EFA driver answers (get context,
//! query device, query port (ioctl and legacy write), GID entry and GID table ioctls, PD, MR,
//! CQ create/destroy by ioctl, QP create/modify/query/destroy, AH, completion counters:
//! create, modify, QP attach, destroy, counted per completion and per error in the memory the
//! create named) with the errnos the kernel uses, and backs every mmap with memfd pages shared
//! between the model and the client, so the client's rings and doorbells are real shared
//! memory.
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
//!
//! Source layout: this file holds the public API ([`ModelConfig`], [`EfaFabric`],
//! [`EfaDevice`] and its [`Channel`] implementation); `state` the device state and shared
//! memory; `write` and `ioctl` the command dispatch, with the handlers by object in `qp`, `cq`,
//! `mr` and `query` (port and GID); `sq` the LLQ and doorbell checks; `exec` the data path;
//! `trap` the doorbell trap.
#![allow(unsafe_code)]
#![warn(missing_docs)]

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
use std::os::fd::{BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rustix::mm::{MapFlags, ProtFlags};
use uverbs::channel::{Channel, IoctlCmd, MapKind, Mapping, WriteCmd};
use uverbs::{Context, Device, Driver, Errno};
use uverbs_efa::defs::*;
use uverbs_uapi::efa::*;
use uverbs_uapi::ioctl::RDMA_DRIVER_EFA;
use zerocopy::IntoBytes;

mod cntr;
mod cq;
mod exec;
mod ioctl;
mod mr;
mod qp;
mod query;
mod sq;
mod state;
mod write;

use exec::{execute, push_cqe};
pub use mr::{MODEL_RDMA_READ_IC_ID, MODEL_RDMA_RECV_IC_ID, MODEL_RECV_IC_ID};
use sq::{collect_wqes, Msg};
use state::{Dev, Fabric, QpKind, QpState, CQ_DB_OFFSET, LLQ_DESC_OFFSET, SQ_DB_OFFSET};
use write::write_cmd;

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

/// A [`ModelConfig`] value no EFA device reports: the field, its value and the rule it breaks.
///
/// Returned by [`ModelConfig::validate`] and [`EfaFabric::try_add_device`]; the same text is
/// the reason of the error [`EfaDevice::open`] returns for such a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The [`ModelConfig`] field.
    pub field: &'static str,
    /// Its value.
    pub value: u64,
    /// What a real device guarantees about it.
    pub rule: &'static str,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "impossible EFA model device: {} = {}: {}",
            self.field, self.value, self.rule
        )
    }
}

impl std::error::Error for ConfigError {}

/// The most receive SGEs a model device may report ([`ModelConfig::validate`]).
const MAX_RQ_SGE: u16 = 16;

impl ModelConfig {
    /// Checks that a real EFA device could report these values.
    ///
    /// Refused: a zero queue depth, SGE count, CQ size, LLQ size, MTU or sub-CQ count (no
    /// device has a queue that holds nothing); more inline bytes than the WQE has room for
    /// (32 in a 64-byte WQE, 80 in a 128-byte one: `efa_io_defs.h`); more send SGEs than a
    /// WQE has buffer descriptors (2); more than 16 receive SGEs (the receive descriptors
    /// chain without a count field, so the format sets no limit: EFA devices report a few,
    /// and 16 is the model's bound, which a value copied from another device's `max_sge`
    /// such as rxe's 32 exceeds); more than 64 sub-CQs (what uverbs' EFA CQ tracks);
    /// `min_sq_wr` above `max_sq_wr`; a `max_tx_batch` of one 64-byte line on a device with
    /// 128-byte WQEs (such a WQE could never be rung); RDMA capabilities with a
    /// `max_rdma_size` of 0.
    ///
    /// ```
    /// use uverbs_efa_model::ModelConfig;
    ///
    /// assert!(ModelConfig::default().validate().is_ok());
    /// let e = ModelConfig { inline_buf_size: 64, ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(e.field, "inline_buf_size");
    /// println!("{e}"); // impossible EFA model device: inline_buf_size = 64: ...
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let rdma = EFA_QUERY_DEVICE_CAPS_RDMA_READ | EFA_QUERY_DEVICE_CAPS_RDMA_WRITE;
        let checks: [(&'static str, u64, bool, &'static str); 14] = [
            (
                "sub_cqs_per_cq",
                self.sub_cqs_per_cq.into(),
                (1..=64).contains(&self.sub_cqs_per_cq),
                "a CQ has 1 to 64 sub-CQs",
            ),
            (
                "inline_buf_size",
                self.inline_buf_size.into(),
                usize::from(self.inline_buf_size) <= EFA_IO_TX_DESC_INLINE_MAX_SIZE,
                "a 64-byte WQE has room for at most 32 inline bytes",
            ),
            (
                "inline_buf_size_ex",
                self.inline_buf_size_ex.into(),
                usize::from(self.inline_buf_size_ex) <= EFA_IO_TX_DESC_INLINE_MAX_SIZE_128,
                "a 128-byte WQE has room for at most 80 inline bytes",
            ),
            (
                "max_llq_size",
                self.max_llq_size.into(),
                self.max_llq_size >= 64,
                "the LLQ holds at least one 64-byte WQE",
            ),
            (
                "max_tx_batch",
                self.max_tx_batch.into(),
                !(self.max_tx_batch == 1 && self.inline_buf_size_ex != 0),
                "with 128-byte WQEs (inline_buf_size_ex > 0) a batch must hold 2 lines \
                 (0 means no limit)",
            ),
            (
                "min_sq_wr",
                self.min_sq_wr.into(),
                u32::from(self.min_sq_wr) <= self.max_sq_wr,
                "min_sq_wr cannot exceed max_sq_wr",
            ),
            (
                "max_sq_wr",
                self.max_sq_wr.into(),
                self.max_sq_wr >= 1,
                "an SQ holds at least one WR",
            ),
            (
                "max_rq_wr",
                self.max_rq_wr.into(),
                self.max_rq_wr >= 1,
                "an RQ holds at least one WR",
            ),
            (
                "max_sq_sge",
                self.max_sq_sge.into(),
                (1..=EFA_IO_TX_DESC_NUM_BUFS).contains(&usize::from(self.max_sq_sge)),
                "a send WQE has 1 to 2 buffer descriptors",
            ),
            (
                "max_rq_sge",
                self.max_rq_sge.into(),
                (1..=MAX_RQ_SGE).contains(&self.max_rq_sge),
                "a receive takes 1 to 16 SGEs (EFA devices report a few)",
            ),
            (
                "max_cqe",
                self.max_cqe.into(),
                self.max_cqe >= 1,
                "a CQ holds at least one entry",
            ),
            (
                "mtu",
                self.mtu.into(),
                self.mtu >= 256,
                "the smallest MTU a port reports is 256 bytes",
            ),
            (
                "max_rdma_size",
                self.max_rdma_size.into(),
                self.device_caps & rdma == 0 || self.max_rdma_size >= 1,
                "a device with RDMA read or write capabilities moves at least one byte",
            ),
            (
                "max_llq_size",
                self.max_llq_size.into(),
                u64::from(self.max_llq_size) >= 64 * u64::from(self.min_sq_wr),
                "the LLQ holds min_sq_wr 64-byte WQEs",
            ),
        ];
        match checks.into_iter().find(|c| !c.2) {
            Some((field, value, _, rule)) => Err(ConfigError { field, value, rule }),
            None => Ok(()),
        }
    }
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
                ioctl_log: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Fabric> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a device reporting `cfg` (GID `fe80::<n>` for the `n`-th device, from 1), or says
    /// why no real EFA device could report it ([`ModelConfig::validate`]).
    ///
    /// ```
    /// use uverbs_efa_model::{EfaFabric, ModelConfig};
    ///
    /// let fab = EfaFabric::new(1);
    /// let dev = fab.try_add_device(ModelConfig { min_sq_wr: 32, ..Default::default() })?;
    /// assert_eq!(dev.gid()[15], 1);
    /// let bad = ModelConfig { max_sq_wr: 0, ..Default::default() };
    /// assert_eq!(fab.try_add_device(bad).unwrap_err().field, "max_sq_wr");
    /// # Ok::<(), uverbs_efa_model::ConfigError>(())
    /// ```
    pub fn try_add_device(&self, cfg: ModelConfig) -> Result<EfaDevice, ConfigError> {
        cfg.validate()?;
        Ok(self.add_device(cfg))
    }

    /// Adds a device reporting `cfg` (GID `fe80::<n>` for the `n`-th device, from 1).
    ///
    /// A `cfg` no real device reports is kept, and [`EfaDevice::open`] then fails with the
    /// reason; [`try_add_device`](Self::try_add_device) says so at once.
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
            cntrs: BTreeMap::new(),
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

    /// The value last stored to the doorbell of the CQ with kernel handle `cq_handle` on
    /// `dev` (consumer index, command sequence number, arm bit: `efa_io_regs_cq_db`); `None`
    /// for a CQ without a doorbell (`ModelConfig::cq_doorbell` off) or no such CQ.
    pub fn cq_doorbell(&self, dev: &EfaDevice, cq_handle: u32) -> Option<u32> {
        let f = self.lock();
        let d = &f.devs[dev.dev];
        let key = d.cqs.get(&cq_handle)?.db_key?;
        Some(d.regions.get(&key)?.load32(CQ_DB_OFFSET as usize))
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

    /// The driver part (`struct efa_ibv_create_qp`) of the create command of QP `qpn` on
    /// `dev`, as the kernel received it.
    pub fn qp_create_driver_bytes(&self, dev: &EfaDevice, qpn: u32) -> Vec<u8> {
        self.lock().qp(dev, qpn).create_drv.clone()
    }

    /// The driver part (`struct efa_ibv_create_cq`) of the create command of the CQ with
    /// handle `cq_handle` on `dev`, as the kernel received it.
    pub fn cq_create_driver_bytes(&self, dev: &EfaDevice, cq_handle: u32) -> Vec<u8> {
        let f = self.lock();
        f.devs[dev.dev].cqs[&cq_handle].create_drv.clone()
    }

    /// The processing hints (`ctrl3` bits 1:0) of every send WQE QP `qpn` on `dev` executed,
    /// oldest first.
    pub fn sq_hints(&self, dev: &EfaDevice, qpn: u32) -> Vec<u8> {
        self.lock().qp(dev, qpn).hints.clone()
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

    /// Opens a uverbs [`Context`] over this device, as [`Context::open`] opens a real one.
    ///
    /// Fails with `EINVAL` and the [`ConfigError`] as the reason if the device was added with
    /// a [`ModelConfig`] no real EFA device reports.
    pub fn open(&self) -> uverbs::Result<Context> {
        if let Err(e) = self.with(|f, d| f.devs[d].cfg.validate()) {
            return Err(uverbs::Error::invalid(
                "open_device",
                format!("EFA model device {}", self.name),
                Errno::INVAL,
                e.to_string(),
            ));
        }
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

// SAFETY: the only fd numbers written are GET_CONTEXT's `async_fd` and CREATE_COMP_CHANNEL's
// `fd` (`write::write_cmd`), each an eventfd made by `write::eventfd` for that call and given up
// (`into_raw_fd`) as its number is written; no FD-new attribute is ever set. No doorbell fd.
unsafe impl Channel for EfaDevice {
    fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        self.with(|f, d| ioctl::ioctl(f, d, cmd))
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

/// One ioctl as the library sent it (completion-counter commands are kept, for golden-byte
/// tests): the wire bytes (header and 16-byte attributes, pointers included) and, for each
/// attribute whose input travels behind a pointer, those bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedIoctl {
    /// `ib_uverbs_ioctl_hdr.object_id`.
    pub object_id: u16,
    /// `ib_uverbs_ioctl_hdr.method_id`.
    pub method_id: u16,
    /// `struct ib_uverbs_attr` of each attribute, as sent (16 bytes each, in order).
    pub attrs: Vec<[u8; 16]>,
    /// (attribute id, the bytes behind its pointer) for inputs longer than 8 bytes.
    pub pointed: Vec<(u16, Vec<u8>)>,
}

impl RecordedIoctl {
    fn of(cmd: &IoctlCmd<'_>) -> Self {
        let wire = cmd.wire_bytes();
        // The header is 24 bytes (`struct ib_uverbs_ioctl_hdr`), then 16 per attribute.
        let attrs = wire[24..]
            .chunks_exact(16)
            .map(|c| c.try_into().expect("16 bytes"))
            .collect();
        let pointed = cmd
            .attrs()
            .filter(|a| a.len() > 8)
            .filter_map(|a| a.input().map(|b| (a.id(), b.to_vec())))
            .collect();
        RecordedIoctl {
            object_id: cmd.object_id(),
            method_id: cmd.method_id(),
            attrs,
            pointed,
        }
    }
}

impl EfaFabric {
    /// The completion-counter ioctls sent so far (create, destroy, QP attach), oldest first.
    pub fn ioctl_log(&self) -> Vec<RecordedIoctl> {
        self.lock().ioctl_log.clone()
    }
}
