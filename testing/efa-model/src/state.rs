//! The model's device state: the memory it shares with the client ([`Region`]), the objects
//! each device holds (PDs, MRs, CQs, QPs, AHs) with the rings behind them, and the fabric of
//! devices with its record of driver violations.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use rustix::mm::{MapFlags, ProtFlags};
use uverbs::Errno;

use crate::{trap, EfaDevice, ModelConfig};

pub(crate) const PAGE: usize = 4096;
pub(crate) const LLQ_DESC_OFFSET: u32 = 0x100;
pub(crate) const SQ_DB_OFFSET: u32 = 0x8;
pub(crate) const RQ_DB_OFFSET: u32 = 0x10;
pub(crate) const CQ_DB_OFFSET: u32 = 0x40;

pub(crate) fn page_align(n: usize) -> usize {
    n.div_ceil(PAGE) * PAGE
}

/// Memory the model shares with the client: a memfd and the model's own read-write view.
pub(crate) struct Region {
    pub(crate) fd: OwnedFd,
    pub(crate) ptr: NonNull<u8>,
    pub(crate) len: usize,
}

impl Region {
    pub(crate) fn new(len: usize) -> Result<Region, Errno> {
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

    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) {
        assert!(off + dst.len() <= self.len);
        for (i, b) in dst.iter_mut().enumerate() {
            // SAFETY: in bounds (asserted); the client may write concurrently, so a volatile
            // byte read through the raw pointer, never a reference.
            *b = unsafe { self.ptr.as_ptr().add(off + i).read_volatile() };
        }
    }

    pub(crate) fn write(&self, off: usize, src: &[u8]) {
        assert!(off + src.len() <= self.len);
        for (i, b) in src.iter().enumerate() {
            // SAFETY: in bounds (asserted); raw volatile byte writes to shared memory.
            unsafe { self.ptr.as_ptr().add(off + i).write_volatile(*b) };
        }
    }

    pub(crate) fn load32(&self, off: usize) -> u32 {
        assert!(off % 4 == 0 && off + 4 <= self.len);
        // SAFETY: aligned and in bounds (asserted); the mapping is page aligned. Atomic load
        // (Acquire) because the client stores doorbells concurrently: everything it wrote
        // before the doorbell store is visible after.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast()) }.load(Ordering::Acquire)
    }

    pub(crate) fn store32(&self, off: usize, v: u32) {
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
pub(crate) struct MrState {
    pub(crate) pd: u32,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) access: u32,
}

#[allow(dead_code)] // idx: kept for debugging output of the model
pub(crate) struct CqState {
    pub(crate) idx: u16,
    pub(crate) depth: u32,
    pub(crate) nsub: u16,
    pub(crate) entry: u32,
    pub(crate) with_sgid: bool,
    /// `EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID`: send CQEs may carry `req_id_ex`.
    pub(crate) req_id_64: bool,
    /// The driver part of the create command as the kernel received it (`efa_ibv_create_cq`).
    pub(crate) create_drv: Vec<u8>,
    pub(crate) buf: Arc<Region>,
    pub(crate) buf_off: usize,
    pub(crate) produced: Vec<u32>,
    pub(crate) qp_refs: u32,
    pub(crate) key: u64,
    pub(crate) db_key: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpKind {
    Ud,
    Srd,
}

pub(crate) struct QpState {
    pub(crate) qpn: u16,
    pub(crate) pd: u32,
    pub(crate) kind: QpKind,
    pub(crate) send_cq: u32,
    pub(crate) recv_cq: u32,
    pub(crate) state: u8,
    pub(crate) qkey: u32,
    pub(crate) sq_psn: u32,
    pub(crate) depth: u32,
    /// Bytes per LLQ slot: 64 or 128 (`sq_ring_size / max_send_wr`).
    pub(crate) wqe_size: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline: u32,
    pub(crate) sq_sig_all: bool,
    pub(crate) unsolicited: bool,
    /// `EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID`: send CQEs echo the WQE's `req_id_ex`.
    pub(crate) req_id_64: bool,
    /// The driver part of the create command as the kernel received it (`efa_ibv_create_qp`).
    pub(crate) create_drv: Vec<u8>,
    /// `EFA_IO_TX_META_DESC_PROCESSING_HINTS` of every send WQE executed, in order.
    pub(crate) hints: Vec<u8>,
    pub(crate) llq: Arc<Region>,
    pub(crate) sq_db: Arc<Region>,
    /// Sees every store to the client's mapping of `sq_db` (set when the client maps it).
    pub(crate) db_trap: Option<trap::Trap>,
    /// The doorbell value the model acted on last (from the trap's log).
    pub(crate) db_seen: u16,
    /// WQEs found written past that doorbell when it was rung.
    pub(crate) db_ahead: u32,
    /// Every SQ doorbell value the trap saw, in order.
    pub(crate) db_history: Vec<u32>,
    pub(crate) rq: Arc<Region>,
    pub(crate) rq_db: Arc<Region>,
    pub(crate) rq_descs: u32,
    pub(crate) keys: [u64; 4],
    /// WQEs consumed (mod 2^16: what the doorbell counts).
    pub(crate) sq_pc: u16,
    /// WQEs consumed ever (phase = (sq_total / depth) % 2).
    pub(crate) sq_total: u64,
    /// RQ descriptors consumed (mod 2^16).
    pub(crate) rq_cc: u16,
    pub(crate) send_sub: u16,
    pub(crate) recv_sub: u16,
    /// `IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_*` bits counted into some counter.
    pub(crate) cntr_ops: u32,
    /// Attachments: (op mask, counter handle).
    pub(crate) cntrs: Vec<(u32, u32)>,
}

#[allow(dead_code)] // ahn: the number handed out, kept for debugging
pub(crate) struct AhState {
    pub(crate) pd: u32,
    pub(crate) gid: [u8; 16],
    pub(crate) ahn: u16,
}

pub(crate) struct Dev {
    pub(crate) cfg: ModelConfig,
    pub(crate) gid: [u8; 16],
    pub(crate) next_handle: u32,
    pub(crate) next_key: u64,
    pub(crate) next_qpn: u16,
    pub(crate) next_cqn: u16,
    pub(crate) next_mr: u32,
    pub(crate) pds: BTreeMap<u32, u16>,
    pub(crate) mrs: BTreeMap<u32, MrState>,
    pub(crate) cqs: BTreeMap<u32, CqState>,
    pub(crate) qps: BTreeMap<u32, QpState>,
    pub(crate) ahs: BTreeMap<u32, AhState>,
    pub(crate) cntrs: BTreeMap<u32, crate::cntr::CntrState>,
    /// gid -> (ahn, refs)
    pub(crate) ahns: HashMap<[u8; 16], (u16, u32)>,
    pub(crate) regions: HashMap<u64, Arc<Region>>,
}

impl Dev {
    pub(crate) fn handle(&mut self) -> u32 {
        self.next_handle += 1;
        self.next_handle
    }
    pub(crate) fn region(&mut self, len: usize) -> Result<(u64, Arc<Region>), Errno> {
        let r = Arc::new(Region::new(len)?);
        let key = self.next_key;
        self.next_key += page_align(r.len) as u64 + PAGE as u64;
        self.regions.insert(key, r.clone());
        Ok((key, r))
    }
    /// The AH number a receive on a QP of `pd` reports for a sender of `gid`: that of an AH
    /// of `pd` to `gid`, or none (the CQE then says unknown and carries the GID). Scoped by
    /// the PD, as the device does: rdma-core's `test_dv_cq_ex_with_sgid` sends between two
    /// PDs of one device and expects the receiver, whose PD has no AH, to read the sender's
    /// GID.
    pub(crate) fn ahn_for_gid_in_pd(&self, gid: &[u8; 16], pd: u32) -> Option<u16> {
        self.ahs
            .values()
            .find(|a| a.pd == pd && a.gid == *gid)
            .map(|a| a.ahn)
    }
    pub(crate) fn gid_for_ahn(&self, ahn: u16) -> Option<[u8; 16]> {
        self.ahns.iter().find(|(_, v)| v.0 == ahn).map(|(g, _)| *g)
    }
    pub(crate) fn qp_by_qpn(&self, qpn: u16) -> Option<u32> {
        self.qps.iter().find(|(_, q)| q.qpn == qpn).map(|(h, _)| *h)
    }
}

pub(crate) struct Fabric {
    pub(crate) devs: Vec<Dev>,
    pub(crate) violations: Vec<String>,
    pub(crate) rng: u64,
    pub(crate) reorder: bool,
    /// Trap the SQ doorbells mapped from now on (see the module doc).
    pub(crate) trap_doorbells: bool,
    /// Completion-counter commands as sent (for golden-byte tests).
    pub(crate) ioctl_log: Vec<crate::RecordedIoctl>,
}

impl Fabric {
    pub(crate) fn violation(&mut self, s: String) {
        self.violations.push(s);
    }
    pub(crate) fn qp(&self, dev: &EfaDevice, qpn: u32) -> &QpState {
        let d = &self.devs[dev.dev];
        &d.qps[&d.qp_by_qpn(qpn as u16).expect("no such QP")]
    }
    pub(crate) fn rand(&mut self) -> u64 {
        // xorshift64*: deterministic per seed, so a reordering failure reproduces.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}
