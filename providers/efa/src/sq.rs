//! The send queue: WQEs in the device's low-latency queue (LLQ).
//!
//! The LLQ is device memory mapped write-only and write-combined. Each WR (the shared
//! [`uverbs_wr::SendWr`], read in place) is validated in full before anything is written for
//! it. [`SendQueue::post_send`] then composes its WQE in registers and stores it straight into
//! its LLQ slot with whole-word volatile stores (as rdma-core's `efa_post_send`); the `wr_*`
//! builder ([`SendQueue::wr_start`] .. [`SendQueue::wr_complete`]) and a [`SendSession`],
//! which may still be aborted, build WQEs in a local staging area and copy them to the LLQ
//! when completed. Either way the WQEs are published by writing the producer counter
//! to the SQ doorbell, at most every `max_batch_wr` WQEs (the device's `max_tx_batch`, in
//! 64-byte units) and once at the end; the device reads a slot only once a doorbell covers it.
//! Nothing is ever read back from device memory.
//!
//! The meta descriptor's phase bit is the SQ's wrap count modulo two (0 on the first pass), so
//! the device can tell a fresh WQE from a stale one.
//!
//! Owns: the LLQ write cursor, the SQ doorbell, the SQ's wr_id pool. Must not: read the LLQ,
//! allocate on post, or write anything the validation refused.
#![allow(unsafe_code)]

use core::ptr::NonNull;

use uverbs_wr::{PostError, QpType, SendFlags, SendWr, Sge, UdDest, WrData, WrOp};
use zerocopy::IntoBytes;

use crate::defs::*;
use crate::error::{EfaError, QueueKind};
use crate::mmio::{self, Doorbell};
use crate::wrid::{WridCompleter, WridPool};
use uverbs_uapi::efa::{EFA_QUERY_DEVICE_CAPS_RDMA_READ, EFA_QUERY_DEVICE_CAPS_RDMA_WRITE};

/// 64-byte send WQE (`sizeof(struct efa_io_tx_wqe)`).
pub const EFA_IO_TX_DESC_SIZE_64: u32 = 64;
/// 128-byte send WQE (`sizeof(struct efa_io_tx_wqe_128)`).
pub const EFA_IO_TX_DESC_SIZE_128: u32 = 128;

/// What the device said it can do (`struct efa_ibv_ex_query_device_resp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCaps {
    /// `EFA_QUERY_DEVICE_CAPS_*`.
    pub device_caps: u32,
    /// Largest RDMA read/write in bytes.
    pub max_rdma_size: u32,
}

/// Everything the SQ needs from the create-QP exchange and the context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqConfig {
    /// QP number (for errors).
    pub qp_num: u32,
    /// Transport: [`QpType::Ud`] or [`QpType::Srd`].
    pub qp_type: QpType,
    /// The QP's protection domain ([`uverbs_wr::AddressHandle::domain`]): a send's address
    /// handle must be of it.
    pub domain: usize,
    /// `sq_sig_all`: every send counts as signaled, whatever its own flag says.
    pub sq_sig_all: bool,
    /// `EFADV_WR_EX_WITH_PROCESSING_HINTS`: the `wr_*` builder may set processing hints
    /// ([`SendQueue::wr_set_processing_hints`]).
    pub processing_hints: bool,
    /// Number of WQE slots: a power of two (what `sq_ring_size / wqe_size` was in the request).
    pub depth: u32,
    /// 64 or 128 (see [`SqConfig::wqe_size_for`]).
    pub wqe_size: u32,
    /// The QP's `max_send_sge` (at most 2).
    pub max_send_sge: u32,
    /// SGEs allowed for RDMA (`min(max_sge_rd, 1)`).
    pub max_rdma_sge: u32,
    /// The QP's `max_inline_data` (at most 32 with 64-byte WQEs, 80 with 128-byte).
    pub max_inline_data: u32,
    /// `EFADV_QP_FLAGS_INLINE_WRITE`: RDMA write may carry inline data (128-byte WQEs only).
    pub inline_write: bool,
    /// `max_tx_batch` from the ucontext response, in 64-byte units (0: unlimited).
    pub max_tx_batch: u16,
    /// `min_sq_wr` from the ucontext response (non-zero: never ring for the whole SQ at once).
    pub min_sq_wr: u16,
    /// Device capabilities.
    pub caps: DeviceCaps,
    /// Generation of this QP number, carried in the high bits of the req_id.
    pub gen: u16,
    /// `EFA_CREATE_QP_WITH_SQ_64_BIT_REQ_ID`: each WQE carries the whole `wr_id` (`req_id`
    /// and `req_id_ex`) and its CQE echoes it, so the SQ keeps no id pool (`gen` unused).
    pub req_id_64: bool,
}

impl SqConfig {
    /// WQE size rdma-core picks: 128 bytes when inline data exceeds 32 bytes or inline RDMA
    /// write is requested, otherwise 64.
    pub fn wqe_size_for(max_inline_data: u32, inline_write: bool) -> u32 {
        if max_inline_data > EFA_IO_TX_DESC_INLINE_MAX_SIZE as u32 || inline_write {
            EFA_IO_TX_DESC_SIZE_128
        } else {
            EFA_IO_TX_DESC_SIZE_64
        }
    }

    /// SQ depth rdma-core picks for a requested `max_send_wr`: at least `min_sq_wr`, rounded up
    /// to a power of two.
    pub fn depth_for(max_send_wr: u32, min_sq_wr: u16) -> u32 {
        max_send_wr
            .max(u32::from(min_sq_wr))
            .max(1)
            .next_power_of_two()
    }

    /// `sq_ring_size` for [`uverbs_uapi::efa::EfaIbvCreateQp`]: depth × WQE size.
    pub fn sq_ring_size(&self) -> u32 {
        self.depth.saturating_mul(self.wqe_size)
    }

    /// WQEs per doorbell: `max_tx_batch * 64 / wqe_size` (at least 1), unlimited when
    /// `max_tx_batch` is 0, and at most `depth - 1` when the device has a `min_sq_wr`.
    pub fn max_batch_wr(&self) -> u32 {
        let mut b = if self.max_tx_batch == 0 {
            u32::from(u16::MAX)
        } else {
            (u32::from(self.max_tx_batch) * 64 / self.wqe_size.max(1)).max(1)
        };
        if self.min_sq_wr != 0 {
            b = b.min(self.depth.saturating_sub(1)).max(1);
        }
        b
    }

    fn inline_capacity(&self) -> u32 {
        if self.wqe_size == EFA_IO_TX_DESC_SIZE_128 {
            EFA_IO_TX_DESC_INLINE_MAX_SIZE_128 as u32
        } else {
            EFA_IO_TX_DESC_INLINE_MAX_SIZE as u32
        }
    }

    fn check(&self) -> Result<(), EfaError> {
        let bad = |reason| Err(EfaError::BadConfig { ring: "sq", reason });
        if !matches!(self.qp_type, QpType::Ud | QpType::Srd) {
            return bad("EFA send queues are UD or SRD");
        }
        if !self.depth.is_power_of_two() || self.depth > 1 << 16 {
            return bad("depth must be a power of two <= 65536");
        }
        if self.wqe_size != EFA_IO_TX_DESC_SIZE_64 && self.wqe_size != EFA_IO_TX_DESC_SIZE_128 {
            return bad("wqe_size must be 64 or 128");
        }
        if self.max_send_sge as usize > EFA_IO_TX_DESC_NUM_BUFS {
            return bad("max_send_sge exceeds the 2 buffer descriptors of a WQE");
        }
        if self.max_rdma_sge as usize > EFA_IO_TX_DESC_NUM_RDMA_BUFS {
            return bad("max_rdma_sge exceeds the 1 local buffer of an RDMA WQE");
        }
        if self.max_inline_data > self.inline_capacity() {
            return bad("max_inline_data exceeds the WQE's inline room");
        }
        if self.inline_write && self.wqe_size != EFA_IO_TX_DESC_SIZE_128 {
            return bad("inline RDMA write needs 128-byte WQEs");
        }
        Ok(())
    }
}

/// Where a datagram goes, as a WQE names it (from a [`UdDest`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Dest {
    /// Device address handle number (`efa_address_handle` of the create-AH response).
    ah: u16,
    /// Remote QP number (16 bits in the WQE; a larger one is refused).
    remote_qpn: u32,
    /// Remote Q_Key.
    remote_qkey: u32,
}

/// Where a send's data comes from, as a WQE carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Payload<'a> {
    /// Buffers in registered memory.
    Sge(&'a [Sge]),
    /// Bytes copied into the WQE (`IBV_SEND_INLINE`, `ibv_wr_set_inline_data[_list]`).
    Inline(&'a [&'a [u8]]),
}

/// A send work request with its destination resolved: what validation and the WQE writers
/// read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Wr<'a> {
    wr_id: u64,
    op: WrOp,
    dest: Dest,
    payload: Payload<'a>,
    /// `IBV_SEND_SIGNALED` (the QP's `sq_sig_all` is added where it is checked).
    signaled: bool,
    /// `efadv_wr_set_processing_hints` (`EFA_IO_PROCESSING_HINT_*`).
    processing_hints: u8,
}

/// The destination of a send to an address handle of `domain` (else `ForeignAh`).
#[inline(always)]
fn dest_of<A>(d: &UdDest<'_, A>, qpn: u32, domain: usize) -> Result<Dest, EfaError> {
    if d.domain() != domain {
        return Err(EfaError::ForeignAh { qpn });
    }
    Ok(Dest {
        // EFA's AH numbers are 16-bit (the create-AH response's field).
        ah: d.ah_num() as u16,
        remote_qpn: d.remote_qpn,
        remote_qkey: d.remote_qkey,
    })
}

/// A plain WR (a SEND of exactly one SGE to an AH of the QP's domain) as the fast paths read
/// it: in place, each part where the WQE needs it, so none of it is held in registers across
/// the request id's allocation.
struct Plain<'w, 'a, A> {
    wr: &'w SendWr<'a, A>,
    dest: &'w UdDest<'a, A>,
    sge: &'w Sge,
}

impl<A> Plain<'_, '_, A> {
    #[inline(always)]
    fn signaled(&self) -> bool {
        self.wr.flags.contains(SendFlags::SIGNALED)
    }
}

/// `wr` as a [`Plain`] WR if it is one whose AH is of `domain`, `None` for any other.
#[inline(always)]
fn plain_of<'w, 'a, A>(wr: &'w SendWr<'a, A>, domain: usize) -> Option<Plain<'w, 'a, A>> {
    let dest = wr.ud.as_ref()?;
    if dest.domain() != domain {
        return None;
    }
    let (WrOp::Send, WrData::Sge([sge])) = (&wr.op, &wr.data) else {
        return None;
    };
    Some(Plain { wr, dest, sge })
}

/// The send queue of one QP.
pub struct SendQueue {
    cfg: SqConfig,
    /// First WQE slot in the LLQ (write-only device memory).
    desc: NonNull<u8>,
    db: Doorbell,
    pool: WridPool,
    /// The completing half of the pool, until the core hands it to the CQ side.
    completer: Option<WridCompleter>,
    /// Staging area for a session or a `wr_*` batch: `depth` WQEs, built here, copied to the
    /// LLQ on complete.
    staging: Box<[u8]>,
    /// The `wr_*` builder's state (boxed: read while posting only when the single-WR path is
    /// closed, see [`post_list`](Self::post_list)).
    builder: Box<Builder>,
    wqe_size: usize,
    mask: u32,
    max_batch: u32,
    /// Producer counter: WQEs ever published, modulo 2^16 (what the doorbell carries).
    pc: u16,
    /// Word 0 of a plain WR's WQE in the slot at `pc` but its req_id's index and dest_qp_num
    /// ([`plain_word0`] with the pool's generation bits, [`WridPool::gen_bits`], in the req_id
    /// field), kept so a post need not compose it: the pool hands out the index alone. Its
    /// phase bit is the phase of that slot (flips each time `pc` wraps the ring) and the only
    /// place the phase is kept: [`phase`](Self::phase), [`flip_phase`](Self::flip_phase).
    word0: u64,
    /// Bits of a `wr_id` that go to word 3 of the WQE (`req_id_ex`, bits 63:16 in place):
    /// all of them above bit 15 with 64-bit request ids, none otherwise.
    hi_mask: u64,
    /// [`post_plain`](Self::post_plain) takes a WR only if its remote QP number is below
    /// this: 2^16 (the WQE's `dest_qp_num` has 16 bits) while that path is open, 0 (no WR at
    /// all) while it is closed ([`set_plain_open`](Self::set_plain_open)) or the QP has
    /// `max_send_sge` 0 (a plain WR has one SGE): three conditions, one compare per post.
    /// Also closed while a `wr_*` batch is open ([`wr_start`](Self::wr_start)).
    plain_qpn_end: u32,
    /// Whether [`set_plain_open`](Self::set_plain_open) left the single-WR path open (it is
    /// closed anyway while a `wr_*` batch is open).
    plain_open: bool,
}

// SAFETY: the LLQ and doorbell pointers refer to a process-wide mapping that `new`'s caller
// keeps alive for our lifetime and that nobody else writes; every write goes through `&mut self`.
unsafe impl Send for SendQueue {}

impl core::fmt::Debug for SendQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SendQueue")
            .field("qp_num", &self.cfg.qp_num)
            .field("depth", &self.cfg.depth)
            .field("pc", &self.pc)
            .field("outstanding", &self.pool.outstanding())
            .finish()
    }
}

impl SendQueue {
    /// Sets up the SQ over the LLQ mapping and the SQ doorbell.
    ///
    /// `desc` is the first WQE slot (mapping of `llq_desc_mmap_key` + `llq_desc_offset`),
    /// `desc_len` the bytes usable from there; `db` is the SQ doorbell (mapping of
    /// `sq_db_mmap_key` + `sq_db_offset`).
    ///
    /// # Safety
    /// For the whole life of the returned queue: `desc` must be valid for writes of `desc_len`
    /// bytes and `db` for volatile 32-bit writes, both usable from any thread, and no one else
    /// may write them. They need not be readable (they are mapped write-only).
    pub unsafe fn new(
        cfg: SqConfig,
        desc: NonNull<u8>,
        desc_len: usize,
        db: NonNull<u32>,
    ) -> Result<Self, EfaError> {
        cfg.check()?;
        let bad = |reason| Err(EfaError::BadConfig { ring: "sq", reason });
        if (cfg.sq_ring_size() as usize) > desc_len {
            return bad("LLQ mapping smaller than depth * wqe_size");
        }
        if desc.as_ptr() as usize % 8 != 0 {
            return bad("LLQ descriptors not 8-byte aligned");
        }
        if db.as_ptr() as usize % 4 != 0 {
            return bad("SQ doorbell not 4-byte aligned");
        }
        let (pool, completer) = if cfg.req_id_64 {
            WridPool::new_64bit(cfg.depth)?
        } else {
            WridPool::new(cfg.depth, cfg.gen)?
        };
        let word0 = plain_word0(false) | u64::from(pool.gen_bits());
        Ok(SendQueue {
            cfg,
            desc,
            // SAFETY: forwarded from our caller's contract on `db` (checked aligned above).
            db: unsafe { Doorbell::new(db) },
            pool,
            completer: Some(completer),
            staging: vec![0u8; cfg.sq_ring_size() as usize].into_boxed_slice(),
            builder: Box::new(NO_BUILDER),
            wqe_size: cfg.wqe_size as usize,
            mask: cfg.depth - 1,
            max_batch: cfg.max_batch_wr(),
            pc: 0,
            word0,
            hi_mask: if cfg.req_id_64 { !0xffff } else { 0 },
            plain_qpn_end: plain_qpn_end(true, &cfg),
            plain_open: true,
        })
    }

    /// Opens or closes the single-WR path ([`post_plain`](Self::post_plain), which
    /// [`post_send`](Self::post_send) tries first for a list of one): closed, it declines every
    /// WR, and the list path of `post_send` decides instead. Open when the queue is made;
    /// the core keeps it open only while the QP is in RTS, so that path needs no test of the
    /// QP's state of its own. A `wr_*` batch closes it while it is open, whatever this says;
    /// the batch's end leaves it as this last set it.
    pub fn set_plain_open(&mut self, open: bool) {
        self.plain_open = open;
        self.plain_qpn_end = plain_qpn_end(open && !self.builder.open, &self.cfg);
    }

    /// Phase of the slot at the producer counter.
    #[inline(always)]
    fn phase(&self) -> bool {
        self.word0 & WORD0_PHASE != 0
    }

    /// The producer counter wrapped the ring.
    #[inline(always)]
    fn flip_phase(&mut self) {
        self.word0 ^= WORD0_PHASE;
    }

    /// The pool's generation bits ([`WridPool::gen_bits`]), which `word0` carries in its
    /// req_id field (bits 15:0) from `new` on.
    #[inline(always)]
    fn gen_bits(&self) -> u16 {
        self.word0 as u16
    }

    /// The configuration this queue was built with.
    pub fn config(&self) -> &SqConfig {
        &self.cfg
    }

    /// The posting half of the wr_id pool (what this queue allocates from).
    pub fn pool(&self) -> &WridPool {
        &self.pool
    }

    /// Takes the completing half of the wr_id pool (once): whoever polls the CQ this queue
    /// completes into owns it, and may run on another thread than the poster (see
    /// [`crate::wrid`]).
    pub fn take_completer(&mut self) -> Option<WridCompleter> {
        self.completer.take()
    }

    /// Producer counter (WQEs published, mod 2^16).
    pub fn producer_counter(&self) -> u16 {
        self.pc
    }

    /// Starts a batch of WRs staged for all-or-nothing posting. Dropping the session without
    /// [`complete`](SendSession::complete) discards the staged WRs like `ibv_wr_abort`.
    pub fn start(&mut self) -> SendSession<'_> {
        SendSession {
            pc0: self.pc,
            phase0: self.phase(),
            staged: 0,
            sq: self,
        }
    }

    /// `ibv_post_send`: posts `wrs` in order; the first refused WR stops the list and is
    /// reported with its index, the ones before it are posted (doorbell rung).
    ///
    /// Like rdma-core's `efa_post_send`, each WR is validated, then its WQE is written straight
    /// into its LLQ slot with whole-word stores (no staging copy), and the doorbell is rung
    /// every `max_batch_wr` WQEs and once at the end. The device reads a slot only once a
    /// doorbell's producer counter covers it, so a WQE written for a WR of this list is never
    /// seen before its doorbell; a refused WR writes nothing.
    ///
    /// The list goes in runs that end at the ring's end at the latest, so inside a run the slot
    /// address just steps and the phase is fixed. A run posts plain WRs (a signaled SEND of
    /// exactly one SGE to a 16-bit QP number, through an AH of the QP's domain: the common
    /// case) with the free request ids counted once per run, ringing the doorbell whenever a
    /// batch is full; it stops at the first WR that is not plain, finds no free id or meets
    /// the ring's end, and that WR takes the general path (full validation, which names the
    /// reason of a refusal, and an id taken with its own check).
    ///
    /// A list of one plain WR (the common case of a latency-bound poster) takes a path of its
    /// own, [`post_plain`](Self::post_plain), that posts it without the run's set-up; any
    /// other list, and a single WR that path declines, goes through the runs.
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send<A>(&mut self, wrs: &[SendWr<'_, A>]) -> Result<usize, PostError<EfaError>> {
        if let [wr] = wrs {
            if self.post_plain(wr) {
                return Ok(1);
            }
        }
        self.post_list(wrs)
    }

    /// Posts `wr` on its own if it is a plain WR (a signaled — or `sq_sig_all` — SEND of
    /// exactly one SGE to a 16-bit QP number through an AH of the QP's domain, on a QP that
    /// allows an SGE, with this path open) and a request id is free, and rings the doorbell
    /// for it: what [`post_send`](Self::post_send) does for a list of that one WR. Returns
    /// false, having written and taken nothing, for any other WR or when no id is free; the
    /// caller then hands the WR to `post_send`, which decides (and names the reason of a
    /// refusal).
    ///
    /// What makes it cheaper than a run of one: the free ids come from the count the pool kept
    /// from its last load of the completer's `tail` (no Acquire load while that count lasts),
    /// and there is no run to set up (no cut at the ring's end: one slot always fits; no batch
    /// count: one WQE, one doorbell, and `max_batch_wr` >= 1).
    #[inline(always)]
    pub fn post_plain<A>(&mut self, wr: &SendWr<'_, A>) -> bool {
        let Some(p) = plain_of(wr, self.cfg.domain) else {
            return false;
        };
        // The checks of a plain WR: signaled, a 16-bit QP number, and (the same compare) an
        // open path on a QP that allows an SGE (`plain_qpn_end`).
        if !(self.cfg.sq_sig_all || p.signaled()) || p.dest.remote_qpn >= self.plain_qpn_end {
            return false;
        }
        // Everything is checked: from here on the WR is posted.
        let Some((index, hi)) = self.take_id(p.wr.wr_id) else {
            return false;
        };
        // `word0` holds the generation bits: with the index they make the req_id.
        let w = plain_words(&p, index, self.word0, hi);
        let slot = (u32::from(self.pc) & self.mask) as usize * self.wqe_size;
        let dst = self.desc.as_ptr().wrapping_add(slot).cast::<u64>();
        // Orders the previous doorbell write before the WC stores below.
        mmio::wc_start();
        // SAFETY: `slot + wqe_size <= depth * wqe_size <= desc_len` (index masked by depth - 1,
        // size checked in `new`), so the slot's `wqe_size` bytes lie within `desc`, which
        // `new`'s caller made writable and 8-aligned (`desc`, `slot` multiples of 8).
        unsafe { store_slot(dst, &w, self.wqe_size == EFA_IO_TX_DESC_SIZE_128 as usize) };
        let pc = self.pc.wrapping_add(1);
        self.pc = pc;
        if u32::from(pc) & self.mask == 0 {
            self.flip_phase();
        }
        // Every WC store of this WQE reaches the device before the doorbell.
        mmio::wc_flush();
        self.db.ring(u32::from(pc));
        true
    }

    /// [`post_send`](Self::post_send) for every list but a single plain WR: the WRs in runs,
    /// with the general path between them.
    #[inline]
    fn post_list<A>(&mut self, wrs: &[SendWr<'_, A>]) -> Result<usize, PostError<EfaError>> {
        // An open `wr_*` batch has WQEs staged, not yet in the LLQ, on the slots a post would
        // ring past, and request ids staged in the pool: nothing posts until it ends. It
        // closes the single-WR path (`wr_start`), which sends every WR here, so a QP whose
        // path is open needs just this compare.
        if self.plain_qpn_end == 0 && self.builder.open {
            let qpn = self.cfg.qp_num;
            return Err(PostError::new(0, EfaError::BatchInProgress { qpn }));
        }
        // Orders the previous doorbell write before the WC stores below.
        mmio::wc_start();
        // A plain WR has one SGE, which a QP with `max_send_sge` 0 refuses: there every WR
        // takes the general path. So does every WR of an SQ with 64-bit request ids: the runs
        // take their ids from the pool's free ring (`WridPool::run`), which such an SQ has not,
        // and the pool path's runs stay free of any test for it.
        let plain_ok = self.cfg.max_send_sge != 0 && self.hi_mask == 0;
        let sig_all = self.cfg.sq_sig_all;
        let mut index = 0;
        // WQEs this batch may still take before its doorbell (>= 1 between WRs).
        let mut batch_left = self.max_batch;
        while let Some(rest) = wrs.get(index..).filter(|r| !r.is_empty()) {
            let done = match (plain_ok, self.wqe_size, sig_all) {
                (false, _, _) => 0,
                (true, 64, false) => self.post_plain_run::<64, false, A>(rest, &mut batch_left),
                (true, 64, true) => self.post_plain_run::<64, true, A>(rest, &mut batch_left),
                (true, _, false) => self.post_plain_run::<128, false, A>(rest, &mut batch_left),
                (true, _, true) => self.post_plain_run::<128, true, A>(rest, &mut batch_left),
            };
            index += done;
            if let Some(wr) = rest.get(done) {
                // Not a plain WR, no id was free when the run started, or the ring's end.
                let r = self.wr_of(wr).and_then(|wr| self.post_one(&wr));
                if let Err(error) = r {
                    self.ring_if(self.max_batch - batch_left);
                    return Err(PostError { index, error });
                }
                index += 1;
                batch_left -= 1;
                if batch_left == 0 {
                    self.ring_if(self.max_batch);
                    batch_left = self.max_batch;
                    // The doorbell above reaches the device before the next batch's WC stores.
                    mmio::wc_start();
                }
            }
        }
        self.ring_if(self.max_batch - batch_left);
        Ok(wrs.len())
    }

    /// Posts the leading plain WRs of `run` (see [`post_send`](Self::post_send)) into `W`-byte
    /// slots and returns how many (`SIG_ALL`: the QP's `sq_sig_all`); stops at the first WR
    /// that is not plain, when the ids free at the start are used up or the free ring's cells
    /// end ([`WridPool::run`]), and at the ring's end, so the phase is the same for all of
    /// them and the slot address just steps.
    /// Rings the doorbell each time `batch_left` (the WQEs the current batch may still take,
    /// >= 1) comes down to 0, and leaves it >= 1.
    #[inline(always)]
    fn post_plain_run<const W: usize, const SIG_ALL: bool, A>(
        &mut self,
        run: &[SendWr<'_, A>],
        batch_left: &mut u32,
    ) -> usize {
        let first = (u32::from(self.pc) & self.mask) as usize;
        let room = (self.cfg.depth as usize).saturating_sub(first);
        let run = run.get(..run.len().min(room)).unwrap_or_default();
        // The phase is that of slot `first`, the same for the whole run; the generation bits
        // are in it too.
        let word0 = self.word0;
        let domain = self.cfg.domain;
        let mut ids = self.pool.run(run.len() as u32);
        let run = ids.limit(run);
        // Slot `first`; the run writes slots `first .. first + run.len() <= depth`.
        let mut dst = self.desc.as_ptr().wrapping_add(first * W).cast::<u64>();
        let mut done = 0;
        let mut left = *batch_left;
        for (k, (cell, wr)) in ids.cells_for(run).enumerate() {
            let Some(p) = plain_of(wr, domain) else {
                break;
            };
            if !(SIG_ALL || p.signaled()) || p.dest.remote_qpn > u32::from(u16::MAX) {
                break;
            }
            // The run's `k`-th cell, and `k` posts so far (`done`).
            let Some(index) = ids.post_cell(cell, p.wr.wr_id) else {
                break;
            };
            // Pool path only (`post_list`): req_id_ex stays zero; `word0` has the generation.
            let w = plain_words(&p, index, word0, 0);
            // SAFETY: `dst` is slot `first + done` with `first + done < depth` (the run is cut
            // at the ring's end above), so its W bytes lie within `depth * W <= desc_len` bytes
            // of `desc`, which `new`'s caller made writable, 8-aligned (`desc` and W are
            // multiples of 8).
            unsafe { store_slot(dst, &w, W == 128) };
            dst = dst.wrapping_add(W / 8);
            done = k + 1;
            left -= 1;
            if left == 0 {
                // Every WC store of this batch reaches the device before the doorbell.
                mmio::wc_flush();
                self.db.ring(u32::from(self.pc.wrapping_add(done as u16)));
                left = self.max_batch;
                // The doorbell above reaches the device before the next batch's WC stores.
                mmio::wc_start();
            }
        }
        *batch_left = left;
        drop(ids);
        self.pc = self.pc.wrapping_add(done as u16);
        // The run ends at the ring's end at the latest, so `pc` wrapped iff it is now 0 there.
        if done != 0 && u32::from(self.pc) & self.mask == 0 {
            self.flip_phase();
        }
        done
    }

    /// Publishes the WQEs written since the last doorbell, if there are any.
    #[inline(always)]
    fn ring_if(&mut self, in_batch: u32) {
        if in_batch != 0 {
            // Every WC store of this batch reaches the device before the doorbell.
            mmio::wc_flush();
            self.db.ring(u32::from(self.pc));
        }
    }

    /// `wr` with its destination resolved: refused without one (EFA QPs are datagram QPs)
    /// and for an AH of another domain.
    #[inline(always)]
    fn wr_of<'w, A>(&self, wr: &'w SendWr<'_, A>) -> Result<Wr<'w>, EfaError> {
        let qpn = self.cfg.qp_num;
        let Some(d) = &wr.ud else {
            return Err(EfaError::NoDestination { qpn });
        };
        let payload = match &wr.data {
            WrData::Sge(s) => Payload::Sge(s),
            WrData::Inline(d) => Payload::Inline(core::slice::from_ref(d)),
        };
        Ok(Wr {
            wr_id: wr.wr_id,
            op: wr.op,
            dest: dest_of(d, qpn, self.cfg.domain)?,
            payload,
            signaled: wr.flags.contains(SendFlags::SIGNALED),
            processing_hints: 0,
        })
    }

    /// Validates `wr`, takes a request id (marked posted: the doorbell that hands it to the
    /// device comes after) and writes the WQE into the slot at the producer counter.
    #[inline(always)]
    fn post_one(&mut self, wr: &Wr<'_>) -> Result<(), EfaError> {
        // The common case (a signaled SEND of at most `max_send_sge` SGEs to a 16-bit QP
        // number) is decided by a few compares; everything else takes the full validation,
        // which names the reason.
        let plain = (wr.signaled | self.cfg.sq_sig_all)
            && wr.dest.remote_qpn >> 16 == 0
            && matches!(wr.op, WrOp::Send | WrOp::SendWithImm { .. })
            && match wr.payload {
                Payload::Sge(sges) => {
                    sges.len() <= self.cfg.max_send_sge as usize
                        && sge_total(sges) <= u64::from(u32::MAX)
                }
                Payload::Inline(_) => false,
            };
        if !plain {
            self.validate(wr)?;
        }
        let Some((index, hi)) = self.take_id(wr.wr_id) else {
            return Err(self.queue_full());
        };
        let req_id = index | self.gen_bits();
        let slot = (u32::from(self.pc) & self.mask) as usize * self.wqe_size;
        let phase = self.phase();
        // SAFETY: `slot + wqe_size <= depth * wqe_size <= desc_len` (index masked by
        // depth - 1, size checked in `new`), `desc` and `slot` are multiples of 8, and `new`'s
        // caller made `desc` writable for `desc_len` bytes for our lifetime.
        unsafe { write_wqe(self.desc.add(slot), self.wqe_size, wr, req_id, hi, phase) };
        self.pc = self.pc.wrapping_add(1);
        if u32::from(self.pc) & self.mask == 0 {
            self.flip_phase();
        }
        Ok(())
    }

    /// A request id for `wr_id`, marked posted: its `req_id` but the generation bits
    /// ([`gen_bits`](Self::gen_bits); none in a 64-bit pool, whose req_id is the low 16 bits
    /// of `wr_id`) and the word-3 bits of the WQE (`req_id_ex`: bits 63:16 of `wr_id` from a
    /// 64-bit pool, zero on the pool path); `None` when the SQ is full. The pool tells which
    /// it is by the bounds check its own path makes ([`WridPool::alloc_posted_either`]), so
    /// the pool path pays nothing for 64-bit ids existing.
    #[inline(always)]
    fn take_id(&mut self, wr_id: u64) -> Option<(u16, u64)> {
        let (index, wide) = self.pool.alloc_posted_either(wr_id)?;
        // A 64-bit pool is one of an SQ with `hi_mask` set (`new`).
        Some((index, if wide { wr_id & !0xffff } else { 0 }))
    }

    #[cold]
    fn queue_full(&self) -> EfaError {
        EfaError::QueueFull {
            qpn: self.cfg.qp_num,
            queue: QueueKind::Send,
            depth: self.cfg.depth,
        }
    }

    /// Full validation of a WR with the reason of a refusal (the pool-full check is the
    /// allocation's).
    #[inline(never)]
    fn validate(&self, wr: &Wr<'_>) -> Result<(), EfaError> {
        let qpn = self.cfg.qp_num;
        if !(wr.signaled | self.cfg.sq_sig_all) {
            return Err(EfaError::Unsignaled { qpn });
        }
        if wr.dest.remote_qpn > u32::from(u16::MAX) {
            return Err(EfaError::BadRemoteQpn {
                qpn,
                remote_qpn: wr.dest.remote_qpn,
            });
        }
        let (rdma, cap) = match wr.op {
            WrOp::Send | WrOp::SendWithImm { .. } => (false, 0),
            WrOp::RdmaRead { .. } => (true, EFA_QUERY_DEVICE_CAPS_RDMA_READ),
            WrOp::RdmaWrite { .. } | WrOp::RdmaWriteWithImm { .. } => {
                (true, EFA_QUERY_DEVICE_CAPS_RDMA_WRITE)
            }
            WrOp::SendWithInv { .. }
            | WrOp::AtomicCmpAndSwp { .. }
            | WrOp::AtomicFetchAndAdd { .. }
            | WrOp::BindMw { .. }
            | WrOp::LocalInv { .. }
            | WrOp::AtomicWrite { .. } => {
                return Err(EfaError::OpNotSupported {
                    qpn,
                    op: wr.op.name(),
                    reason: "EFA has SEND, SEND_WITH_IMM, RDMA_READ, RDMA_WRITE and \
                             RDMA_WRITE_WITH_IMM only",
                })
            }
        };
        if rdma {
            if self.cfg.qp_type != QpType::Srd {
                return Err(EfaError::OpNotSupported {
                    qpn,
                    op: wr.op.name(),
                    reason: "RDMA needs an SRD QP",
                });
            }
            if self.cfg.caps.device_caps & cap == 0 {
                return Err(EfaError::OpNotSupported {
                    qpn,
                    op: wr.op.name(),
                    reason: "device lacks the EFA_QUERY_DEVICE_CAPS bit for it",
                });
            }
        }
        let total: u64 = match wr.payload {
            Payload::Sge(sges) => {
                let max = if rdma {
                    self.cfg.max_rdma_sge
                } else {
                    self.cfg.max_send_sge
                };
                if sges.len() > max as usize {
                    return Err(EfaError::TooManySge {
                        qpn,
                        queue: QueueKind::Send,
                        num_sge: sges.len(),
                        max_sge: max as usize,
                    });
                }
                sges.iter().map(|s| u64::from(s.length)).sum()
            }
            Payload::Inline(bufs) => {
                let len: usize = bufs.iter().map(|b| b.len()).sum();
                match wr.op {
                    WrOp::RdmaRead { .. } => {
                        return Err(EfaError::InlineNotSupported {
                            qpn,
                            op: wr.op.name(),
                        })
                    }
                    WrOp::RdmaWrite { .. } | WrOp::RdmaWriteWithImm { .. }
                        if !self.cfg.inline_write =>
                    {
                        return Err(EfaError::InlineNotSupported {
                            qpn,
                            op: wr.op.name(),
                        })
                    }
                    _ => {}
                }
                if len > self.cfg.max_inline_data as usize {
                    return Err(EfaError::InlineTooLong {
                        qpn,
                        len,
                        max: self.cfg.max_inline_data as usize,
                    });
                }
                len as u64
            }
        };
        if rdma {
            if total > u64::from(self.cfg.caps.max_rdma_size) {
                return Err(EfaError::RdmaTooLong {
                    qpn,
                    len: total,
                    max: self.cfg.caps.max_rdma_size,
                });
            }
        } else if total > u64::from(u32::MAX) {
            return Err(EfaError::LengthTooLong { qpn, len: total });
        }
        Ok(())
    }
}

/// The phase bit in [`plain_word0`] (ctrl2 sits at bit 24).
const WORD0_PHASE: u64 = (EFA_IO_TX_META_DESC_PHASE_MASK as u64) << 24;

/// [`SendQueue::plain_qpn_end`] for a path that is `open` or not on a queue of `cfg`.
fn plain_qpn_end(open: bool, cfg: &SqConfig) -> u32 {
    if open && cfg.max_send_sge != 0 {
        1 << 16
    } else {
        0
    }
}

/// Word 0 of a plain WR's WQE (see [`SendQueue::post_send`]) but its req_id and
/// dest_qp_num: ctrl1 (op SEND, meta_desc), ctrl2 (`phase`, first, last, comp_req), length 1
/// (one buffer descriptor).
#[inline(always)]
fn plain_word0(phase: bool) -> u64 {
    let ctrl1 =
        (EFA_IO_SEND & EFA_IO_TX_META_DESC_OP_TYPE_MASK) | EFA_IO_TX_META_DESC_META_DESC_MASK;
    let ctrl2 = (u8::from(phase) * EFA_IO_TX_META_DESC_PHASE_MASK)
        | EFA_IO_TX_META_DESC_FIRST_MASK
        | EFA_IO_TX_META_DESC_LAST_MASK
        | EFA_IO_TX_META_DESC_COMP_REQ_MASK;
    u64::from(ctrl1) << 16 | u64::from(ctrl2) << 24 | 1 << 48
}

/// The eight words of the 64-byte WQE of a plain WR `wr` (checked: a SEND of the one SGE
/// `sge` to a QP number <= 0xffff) with `req_id`, given its [`plain_word0`]:
/// efa_io_tx_meta_desc as in `write_wqe` (no immediate, no processing hints), then
/// data.sgl[0] and a zero sgl[1].
#[inline(always)]
fn plain_words<A>(p: &Plain<'_, '_, A>, req_id: u16, word0: u64, hi: u64) -> [u64; 8] {
    let sge = p.sge;
    [
        u64::from(req_id) | word0 | u64::from(p.dest.remote_qpn) << 32,
        // The AH number (16 bits in the WQE); no processing hints on `post_send`.
        u64::from(p.dest.ah_num() as u16) << 32,
        u64::from(p.dest.remote_qkey),
        // reserved2[4..6] | req_id_ex: bits 63:16 of a 64-bit request id, in place.
        hi,
        // length, then the low 24 bits of lkey at bit 32.
        sge_len_lkey(sge),
        sge.addr,
        0,
        0,
    ]
}

/// Word 0 of a buffer descriptor (`struct efa_io_tx_buf_desc`) for `s`, in CPU order: its
/// length, then the low 24 bits of its lkey at bit 32. In `ibv_sge` (`Sge`, `#[repr(C)]`:
/// `addr`, `length`, `lkey`) the two fields are bytes 8..16, in that order, so on a
/// little-endian CPU they are that word as it lies in memory: one load and a mask instead of
/// two loads and their shifts.
#[inline(always)]
fn sge_len_lkey(s: &Sge) -> u64 {
    let mask = u64::from(EFA_IO_TX_BUF_DESC_LKEY_MASK) << 32 | 0xffff_ffff;
    if cfg!(target_endian = "little") {
        let b: &[u8; 16] = zerocopy::transmute_ref!(s);
        let [_, _, _, _, _, _, _, _, rest @ ..] = *b;
        u64::from_le_bytes(rest) & mask
    } else {
        (u64::from(s.length) | u64::from(s.lkey) << 32) & mask
    }
}

/// Sum of the SGE lengths of a WQE's (at most 2) SGEs; `u64::MAX` for more, which every
/// length check refuses.
#[inline(always)]
fn sge_total(sges: &[Sge]) -> u64 {
    match sges {
        [] => 0,
        [a] => u64::from(a.length),
        [a, b] => u64::from(a.length) + u64::from(b.length),
        _ => u64::MAX,
    }
}

/// A buffer descriptor (`struct efa_io_tx_buf_desc`) as its two little-endian words:
/// length, lkey (24 bits), then the address.
#[inline(always)]
fn buf_desc_words(s: &Sge) -> [u64; 2] {
    [
        u64::from(s.length) | u64::from(s.lkey & EFA_IO_TX_BUF_DESC_LKEY_MASK) << 32,
        s.addr,
    ]
}

/// A WR's opcode as the WQE carries it: the EFA op type, the immediate data if any, and the
/// remote (rkey, address) of an RDMA operation.
#[inline(always)]
fn op_fields(op: WrOp) -> (u8, Option<u32>, Option<(u32, u64)>) {
    match op {
        WrOp::Send => (EFA_IO_SEND, None, None),
        WrOp::SendWithImm { imm_data: imm } => (EFA_IO_SEND, Some(imm), None),
        WrOp::RdmaRead { rkey, remote_addr } => (EFA_IO_RDMA_READ, None, Some((rkey, remote_addr))),
        WrOp::RdmaWrite { rkey, remote_addr } => {
            (EFA_IO_RDMA_WRITE, None, Some((rkey, remote_addr)))
        }
        WrOp::RdmaWriteWithImm {
            rkey,
            remote_addr,
            imm_data,
        } => (EFA_IO_RDMA_WRITE, Some(imm_data), Some((rkey, remote_addr))),
        // Operations EFA lacks never get here: `validate` refuses them before a WQE is
        // written (the fast path takes SEND and SEND_WITH_IMM only).
        WrOp::SendWithInv { .. }
        | WrOp::AtomicCmpAndSwp { .. }
        | WrOp::AtomicFetchAndAdd { .. }
        | WrOp::BindMw { .. }
        | WrOp::LocalInv { .. }
        | WrOp::AtomicWrite { .. } => (EFA_IO_SEND, None, None),
    }
}

/// Writes the WQE of a validated `wr` to the LLQ slot at `dst`: for SGE payloads the words
/// are composed in registers and stored in ascending order (what [`build_wqe`] lays out, byte
/// for byte; a test checks both agree); inline payloads are built by [`build_wqe`] and copied.
///
/// # Safety
/// `dst` must be 8-byte aligned and valid for writes of `wqe_size` (64 or 128) bytes.
#[inline(always)]
unsafe fn write_wqe(
    dst: NonNull<u8>,
    wqe_size: usize,
    wr: &Wr<'_>,
    req_id: u16,
    hi: u64,
    phase: bool,
) {
    let sges = match wr.payload {
        Payload::Sge(s) => s,
        Payload::Inline(_) => {
            let mut w = build_wqe(wr, req_id, phase);
            set_req_id_ex(&mut w, hi);
            // SAFETY: forwarded from our caller (`wqe_size` <= 128 = the built WQE's size).
            unsafe { mmio::copy_to_wc(dst, &w.as_bytes()[..wqe_size]) };
            return;
        }
    };
    let (op_type, imm, remote) = op_fields(wr.op);
    let mut ctrl1 =
        (op_type & EFA_IO_TX_META_DESC_OP_TYPE_MASK) | EFA_IO_TX_META_DESC_META_DESC_MASK;
    if imm.is_some() {
        ctrl1 |= EFA_IO_TX_META_DESC_HAS_IMM_MASK;
    }
    let ctrl2 = (u8::from(phase) * EFA_IO_TX_META_DESC_PHASE_MASK)
        | EFA_IO_TX_META_DESC_FIRST_MASK
        | EFA_IO_TX_META_DESC_LAST_MASK
        | EFA_IO_TX_META_DESC_COMP_REQ_MASK;
    let ctrl3 = wr.processing_hints & EFA_IO_TX_META_DESC_PROCESSING_HINTS_MASK;
    let mut w = [0u64; 8];
    // efa_io_tx_meta_desc: req_id, ctrl1, ctrl2, dest_qp_num, length | immediate_data, ah,
    // ctrl3, reserved | qkey, reserved2 | req_id_ex (`hi`: bits 63:16 of a 64-bit id).
    w[0] = u64::from(req_id)
        | u64::from(ctrl1) << 16
        | u64::from(ctrl2) << 24
        | u64::from(wr.dest.remote_qpn as u16) << 32
        | (sges.len() as u64 & 0xffff) << 48;
    w[1] = u64::from(imm.unwrap_or(0)) | u64::from(wr.dest.ah) << 32 | u64::from(ctrl3) << 48;
    w[2] = u64::from(wr.dest.remote_qkey);
    w[3] = hi;
    match remote {
        None => {
            // data.sgl[0..2] (validation allows at most 2 SGEs)
            if let Some(s) = sges.first() {
                [w[4], w[5]] = buf_desc_words(s);
            }
            if let Some(s) = sges.get(1) {
                [w[6], w[7]] = buf_desc_words(s);
            }
        }
        Some((rkey, addr)) => {
            // data.rdma_req: remote_mem (length, rkey, address), local_mem[0].
            w[4] = (sge_total(sges) & 0xffff_ffff) | u64::from(rkey) << 32;
            w[5] = addr;
            if let Some(s) = sges.first() {
                [w[6], w[7]] = buf_desc_words(s);
            }
        }
    }
    // SAFETY: the caller made `dst` 8-aligned and writable for `wqe_size` (64 or 128) bytes.
    unsafe {
        store_slot(
            dst.as_ptr().cast::<u64>(),
            &w,
            wqe_size == EFA_IO_TX_DESC_SIZE_128 as usize,
        )
    };
}

/// Stores one composed WQE (`w`, in CPU byte order) into its slot at `dst` as whole 64-byte
/// blocks ([`mmio::store_block64`], rdma-core's `mmio_memcpy_x64`): the device must see whole
/// blocks on aarch64. A 128-byte slot (`wide`) gets a second, zero block: the WQE formats
/// that fit 64 bytes leave the upper half zero.
///
/// # Safety
/// `dst` must be 8-byte aligned and valid for writes of 64 bytes, 128 if `wide`.
#[inline(always)]
unsafe fn store_slot(dst: *mut u64, w: &[u64; 8], wide: bool) {
    let le = w.map(u64::to_le);
    // SAFETY: forwarded from our caller: 64 writable, 8-aligned bytes at `dst`.
    unsafe { mmio::store_block64(dst, &le) };
    if wide {
        // SAFETY: with `wide` the caller made 128 bytes writable: `dst + 8` words is the
        // second 64-byte block, 8-aligned.
        unsafe { mmio::store_block64(dst.wrapping_add(8), &[0; 8]) };
    }
}

/// Writes bits 63:16 of a 64-bit request id (`hi`, in place: bits 15:0 are ignored) to the
/// meta descriptor's `req_id_ex.w[0..3]` (zero `hi` leaves them zero, the pool path's WQE).
#[inline(always)]
pub fn set_req_id_ex(w: &mut EfaIoTxWqe128, hi: u64) {
    for (i, word) in w.meta.req_id_ex.w.iter_mut().enumerate() {
        word.set((hi >> (16 * (i + 1))) as u16);
    }
}

/// Builds the WQE for a validated WR. Always builds the 128-byte layout: its first 64 bytes
/// are exactly the 64-byte WQE for every payload that fits one (sgl, inline <= 32 bytes, and
/// `rdma_req` whose `remote_mem` + `local_mem[0]` sit at the same offsets), so the 64-byte
/// format is its prefix.
fn build_wqe(wr: &Wr<'_>, req_id: u16, phase: bool) -> EfaIoTxWqe128 {
    let mut w = EfaIoTxWqe128::default();
    let (op_type, imm, remote) = op_fields(wr.op);
    {
        let md = &mut w.meta;
        md.set_meta_desc(true);
        md.set_op_type(op_type);
        md.set_phase(phase);
        md.set_first(true);
        md.set_last(true);
        md.set_comp_req(true);
        md.req_id.set(req_id);
        md.dest_qp_num.set(wr.dest.remote_qpn as u16);
        md.ah.set(wr.dest.ah);
        md.qkey.set(wr.dest.remote_qkey);
        md.set_processing_hints(wr.processing_hints);
        if let Some(imm) = imm {
            md.immediate_data.set(imm);
            md.set_has_imm(true);
        }
    }
    match (wr.payload, remote) {
        (Payload::Sge(sges), None) => {
            w.meta.length.set(sges.len() as u16);
            for (d, s) in w.sgl_mut().iter_mut().zip(sges) {
                *d = EfaIoTxBufDesc::new(s.addr, s.lkey, s.length);
            }
        }
        (Payload::Inline(bufs), None) => {
            let len = copy_inline(w.inline_data_mut(), bufs);
            w.meta.set_inline_msg(true);
            w.meta.length.set(len as u16);
        }
        (Payload::Sge(sges), Some((rkey, addr))) => {
            w.meta.length.set(sges.len() as u16);
            let r = w.rdma_req_mut();
            r.remote_mem.rkey.set(rkey);
            r.remote_mem.set_buf_addr(addr);
            let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
            r.remote_mem.length.set(total as u32);
            for (d, s) in r.local_mem_mut().iter_mut().zip(sges) {
                *d = EfaIoTxBufDesc::new(s.addr, s.lkey, s.length);
            }
        }
        (Payload::Inline(bufs), Some((rkey, addr))) => {
            let r = w.rdma_req_mut();
            r.remote_mem.rkey.set(rkey);
            r.remote_mem.set_buf_addr(addr);
            let len = copy_inline(r.inline_data_mut(), bufs);
            r.remote_mem.length.set(len as u32);
            w.meta.set_inline_msg(true);
            w.meta.length.set(len as u16);
        }
    }
    w
}

/// Concatenates `bufs` into `dst` (validated to fit), returning the byte count.
fn copy_inline(dst: &mut [u8], bufs: &[&[u8]]) -> usize {
    let mut off = 0;
    for b in bufs {
        let end = (off + b.len()).min(dst.len());
        let n = end - off;
        dst[off..end].copy_from_slice(&b[..n]);
        off = end;
    }
    off
}

/// A batch of send WRs being staged, posted all together or not at all: the mechanism of the
/// `wr_*` builder, for a caller that has its WRs whole.
#[derive(Debug)]
pub struct SendSession<'q> {
    sq: &'q mut SendQueue,
    pc0: u16,
    phase0: bool,
    staged: u32,
}

impl SendSession<'_> {
    /// Validates `wr` and stages its WQE. A refused WR leaves nothing behind; WRs staged before
    /// it stay staged.
    pub fn post<A>(&mut self, wr: &SendWr<'_, A>) -> Result<(), EfaError> {
        // A `wr_*` batch's WQEs are staged in the same area (see `post_list`).
        if self.sq.builder.open {
            let qpn = self.sq.cfg.qp_num;
            return Err(EfaError::BatchInProgress { qpn });
        }
        let wr = self.sq.wr_of(wr)?;
        self.sq.stage(&wr, self.staged)?;
        self.staged += 1;
        Ok(())
    }

    /// Number of WRs staged so far.
    pub fn staged(&self) -> u32 {
        self.staged
    }

    /// Copies the staged WQEs to the LLQ and rings the doorbell every `max_batch_wr` WQEs and
    /// once at the end. Returns the number of WRs posted.
    pub fn complete(mut self) -> usize {
        let n = core::mem::take(&mut self.staged);
        self.sq.flush_staged(self.pc0, n)
    }

    /// Discards the staged WRs (their req_ids return to the pool, the producer counter and
    /// phase go back).
    pub fn abort(mut self) {
        self.rollback();
    }

    fn rollback(&mut self) {
        let n = core::mem::take(&mut self.staged);
        self.sq.unstage(n, self.pc0, self.phase0);
    }
}

impl Drop for SendSession<'_> {
    fn drop(&mut self) {
        self.rollback();
    }
}

/// The WR a `wr_*` batch builds: started by [`SendQueue::wr_op`], completed by the setters,
/// staged when the next one starts or the batch completes. Its data is copied, so the
/// caller's borrows end with each call.
#[derive(Clone, Copy, Debug)]
struct Pending {
    wr_id: u64,
    op: WrOp,
    signaled: bool,
    dest: Option<Dest>,
    data: PendingData,
    hints: u8,
}

/// The data of a [`Pending`] WR.
#[derive(Clone, Copy, Debug)]
enum PendingData {
    /// Up to the two buffer descriptors a WQE has.
    Sge {
        n: u8,
        sges: [Sge; EFA_IO_TX_DESC_NUM_BUFS],
    },
    /// Up to the 80 inline bytes a 128-byte WQE holds.
    Inline {
        len: u8,
        bytes: [u8; EFA_IO_TX_DESC_INLINE_MAX_SIZE_128],
    },
}

/// The state of the `wr_*` builder (`ibv_wr_start` .. `ibv_wr_complete`/`ibv_wr_abort`): a
/// session kept in the queue between calls, the WR being built, and the batch's first error,
/// which is sticky (as in libibverbs: `ibv_wr_complete` returns it and posts nothing).
#[derive(Debug)]
struct Builder {
    open: bool,
    pc0: u16,
    phase0: bool,
    staged: u32,
    cur: Option<Pending>,
    err: Option<EfaError>,
}

const NO_BUILDER: Builder = Builder {
    open: false,
    pc0: 0,
    phase0: false,
    staged: 0,
    cur: None,
    err: None,
};

/// The `ibv_wr_*` API: WRs built one call at a time, validated and staged as each is
/// finished, posted all together by [`SendQueue::wr_complete`] (the same all-or-nothing
/// staging as a [`SendSession`]). The first refused call makes the batch fail: later calls
/// return its error, and `wr_complete` returns it with nothing posted.
impl SendQueue {
    /// Opens a batch (`ibv_wr_start`).
    #[doc(alias = "ibv_wr_start")]
    pub fn wr_start(&mut self) -> Result<(), EfaError> {
        if self.builder.open {
            return Err(EfaError::BatchInProgress {
                qpn: self.cfg.qp_num,
            });
        }
        *self.builder = Builder {
            open: true,
            pc0: self.pc,
            phase0: self.phase(),
            ..NO_BUILDER
        };
        // Nothing else posts while the batch is open (see `post_list`).
        self.plain_qpn_end = 0;
        Ok(())
    }

    /// Ends the batch, whichever way, and reopens the single-WR path if it was open; returns
    /// the batch's state.
    fn end_batch(&mut self) -> Builder {
        self.plain_qpn_end = plain_qpn_end(self.plain_open, &self.cfg);
        core::mem::replace(&mut *self.builder, NO_BUILDER)
    }

    /// The error of a call while no batch is open, or the batch's sticky error.
    fn builder_ready(&self) -> Result<(), EfaError> {
        if !self.builder.open {
            return Err(EfaError::NoBatch {
                qpn: self.cfg.qp_num,
            });
        }
        match self.builder.err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Records `r`'s error as the batch's sticky error (the first one wins).
    fn sticky(&mut self, r: Result<(), EfaError>) -> Result<(), EfaError> {
        if let Err(e) = r {
            if self.builder.open && self.builder.err.is_none() {
                self.builder.err = Some(e);
            }
        }
        r
    }

    /// Stages the WR being built, if any.
    fn stage_pending(&mut self) -> Result<(), EfaError> {
        let Some(p) = self.builder.cur.take() else {
            return Ok(());
        };
        let qpn = self.cfg.qp_num;
        let Some(dest) = p.dest else {
            return Err(EfaError::NoDestination { qpn });
        };
        let inline: [&[u8]; 1];
        let payload = match &p.data {
            PendingData::Sge { n, sges } => Payload::Sge(&sges[..usize::from(*n)]),
            PendingData::Inline { len, bytes } => {
                inline = [&bytes[..usize::from(*len)]];
                Payload::Inline(&inline)
            }
        };
        let wr = Wr {
            wr_id: p.wr_id,
            op: p.op,
            dest,
            payload,
            signaled: p.signaled,
            processing_hints: p.hints,
        };
        self.stage(&wr, self.builder.staged)?;
        self.builder.staged += 1;
        Ok(())
    }

    /// Starts one WR of `op` in the open batch (the common body of `ibv_wr_send`,
    /// `ibv_wr_rdma_write`, ...); its data, destination and hints come from the setters.
    #[doc(alias = "ibv_wr_send")]
    #[doc(alias = "ibv_wr_send_imm")]
    #[doc(alias = "ibv_wr_rdma_read")]
    #[doc(alias = "ibv_wr_rdma_write")]
    #[doc(alias = "ibv_wr_rdma_write_imm")]
    pub fn wr_op(&mut self, wr_id: u64, flags: SendFlags, op: WrOp) -> Result<(), EfaError> {
        self.builder_ready()?;
        let r = self.stage_pending();
        self.sticky(r)?;
        self.builder.cur = Some(Pending {
            wr_id,
            op,
            signaled: flags.contains(SendFlags::SIGNALED),
            dest: None,
            data: PendingData::Sge {
                n: 0,
                sges: [Sge::default(); EFA_IO_TX_DESC_NUM_BUFS],
            },
            hints: 0,
        });
        Ok(())
    }

    /// The WR being built, for a setter.
    fn pending(&mut self) -> Result<&mut Pending, EfaError> {
        self.builder_ready()?;
        let qpn = self.cfg.qp_num;
        self.builder
            .cur
            .as_mut()
            .ok_or(EfaError::NoCurrentWr { qpn })
    }

    fn set_pending(
        &mut self,
        f: impl FnOnce(&mut Pending, u32) -> Result<(), EfaError>,
    ) -> Result<(), EfaError> {
        let qpn = self.cfg.qp_num;
        let r = self.pending().and_then(|p| f(p, qpn));
        self.sticky(r)
    }

    /// `ibv_wr_set_sge_list` (and `ibv_wr_set_sge`): the buffers of the WR being built.
    #[doc(alias = "ibv_wr_set_sge_list")]
    #[doc(alias = "ibv_wr_set_sge")]
    pub fn wr_set_sge_list(&mut self, list: &[Sge]) -> Result<(), EfaError> {
        self.set_pending(|p, qpn| {
            let mut sges = [Sge::default(); EFA_IO_TX_DESC_NUM_BUFS];
            let Some(dst) = sges.get_mut(..list.len()) else {
                return Err(EfaError::TooManySge {
                    qpn,
                    queue: QueueKind::Send,
                    num_sge: list.len(),
                    max_sge: EFA_IO_TX_DESC_NUM_BUFS,
                });
            };
            dst.copy_from_slice(list);
            p.data = PendingData::Sge {
                n: list.len() as u8,
                sges,
            };
            Ok(())
        })
    }

    /// `ibv_wr_set_inline_data`: bytes copied into the WR being built.
    #[doc(alias = "ibv_wr_set_inline_data")]
    pub fn wr_set_inline_data(&mut self, data: &[u8]) -> Result<(), EfaError> {
        self.set_pending(|p, qpn| {
            let mut bytes = [0u8; EFA_IO_TX_DESC_INLINE_MAX_SIZE_128];
            let Some(dst) = bytes.get_mut(..data.len()) else {
                return Err(EfaError::InlineTooLong {
                    qpn,
                    len: data.len(),
                    max: EFA_IO_TX_DESC_INLINE_MAX_SIZE_128,
                });
            };
            dst.copy_from_slice(data);
            p.data = PendingData::Inline {
                len: data.len() as u8,
                bytes,
            };
            Ok(())
        })
    }

    /// `ibv_wr_set_ud_addr`: the destination of the WR being built, through an AH of the QP's
    /// domain.
    #[doc(alias = "ibv_wr_set_ud_addr")]
    pub fn wr_set_ud_addr<A>(&mut self, dest: UdDest<'_, A>) -> Result<(), EfaError> {
        let domain = self.cfg.domain;
        self.set_pending(|p, qpn| {
            p.dest = Some(dest_of(&dest, qpn, domain)?);
            Ok(())
        })
    }

    /// `efadv_wr_set_processing_hints`: `EFA_IO_PROCESSING_HINT_*` bits for the WR being
    /// built, on a QP configured with [`SqConfig::processing_hints`]; refused otherwise, and
    /// for bits EFA defines none for.
    #[doc(alias = "efadv_wr_set_processing_hints")]
    pub fn wr_set_processing_hints(&mut self, hints: u8) -> Result<(), EfaError> {
        let allowed = self.cfg.processing_hints;
        self.set_pending(|p, qpn| {
            if !allowed {
                return Err(EfaError::HintsNotEnabled { qpn });
            }
            if hints & !EFA_IO_PROCESSING_HINT_BURST_PPS_SENSITIVE != 0 {
                return Err(EfaError::UnknownHints { qpn, hints });
            }
            p.hints = hints;
            Ok(())
        })
    }

    /// How many WRs the open batch holds (the one being built included); 0 without a batch.
    pub fn wr_len(&self) -> usize {
        if !self.builder.open {
            return 0;
        }
        self.builder.staged as usize + usize::from(self.builder.cur.is_some())
    }

    /// Posts the batch (`ibv_wr_complete`): stages the last WR, then copies every staged WQE
    /// to the LLQ and rings the doorbell every `max_batch_wr` WQEs and once at the end.
    /// Returns how many WRs were posted. If any call of the batch was refused, posts nothing,
    /// ends the batch as [`wr_abort`](Self::wr_abort) does and returns the first error (as
    /// rdma-core's `efa_send_wr_complete` rolls the SQ back).
    #[doc(alias = "ibv_wr_complete")]
    pub fn wr_complete(&mut self) -> Result<usize, EfaError> {
        if let Err(e) = self.builder_ready().and_then(|()| self.stage_pending()) {
            self.wr_abort();
            return Err(e);
        }
        let b = self.end_batch();
        Ok(self.flush_staged(b.pc0, b.staged))
    }

    /// Drops the batch (`ibv_wr_abort`): nothing of it reaches the device. A no-op without an
    /// open batch.
    #[doc(alias = "ibv_wr_abort")]
    pub fn wr_abort(&mut self) {
        let b = self.end_batch();
        if b.open {
            self.unstage(b.staged, b.pc0, b.phase0);
        }
    }

    /// Validates `wr` and stages its WQE as the `staged`-th of a batch started at the current
    /// producer counter less `staged`. A refused WR leaves nothing behind.
    fn stage(&mut self, wr: &Wr<'_>, staged: u32) -> Result<(), EfaError> {
        self.validate(wr)?;
        let Some(req_id) = self.pool.alloc(wr.wr_id) else {
            return Err(self.queue_full());
        };
        let mut wqe = build_wqe(wr, req_id, self.phase());
        set_req_id_ex(&mut wqe, wr.wr_id & self.hi_mask);
        let off = staged as usize * self.wqe_size;
        // The pool holds `depth` slots and each staged WR holds one, so `staged < depth` and
        // the staging slot exists.
        if let Some(slot) = self.staging.get_mut(off..off + self.wqe_size) {
            slot.copy_from_slice(&wqe.as_bytes()[..self.wqe_size]);
        }
        self.pc = self.pc.wrapping_add(1);
        if u32::from(self.pc) & self.mask == 0 {
            self.flip_phase();
        }
        Ok(())
    }

    /// Copies `n` staged WQEs, the first for producer counter `pc0`, to the LLQ and rings the
    /// doorbell every `max_batch_wr` WQEs and once at the end. Returns `n`.
    fn flush_staged(&mut self, pc0: u16, n: u32) -> usize {
        if n == 0 {
            return 0;
        }
        let mut pc = pc0;
        let mut in_batch = 0;
        // The completer accepts these req_ids from here on; this happens before the first
        // doorbell below, which is what lets the device complete them.
        self.pool.publish();
        // Orders the previous doorbell write before the WC stores below.
        mmio::wc_start();
        for i in 0..n as usize {
            let slot = (u32::from(pc) & self.mask) as usize * self.wqe_size;
            let src = &self.staging[i * self.wqe_size..(i + 1) * self.wqe_size];
            // SAFETY: `slot + wqe_size <= depth * wqe_size <= desc_len` (index masked by
            // depth - 1, size checked in `new`), `desc` and `wqe_size` are multiples of 8, and
            // `new`'s caller made `desc` writable for `desc_len` bytes for our lifetime.
            unsafe { mmio::copy_to_wc(self.desc.add(slot), src) };
            pc = pc.wrapping_add(1);
            in_batch += 1;
            if in_batch == self.max_batch {
                // Every WC store of this batch reaches the device before the doorbell.
                mmio::wc_flush();
                self.db.ring(u32::from(pc));
                in_batch = 0;
                // The doorbell above reaches the device before the next batch's WC stores.
                mmio::wc_start();
            }
        }
        if in_batch != 0 {
            // Every WC store since the last doorbell reaches the device before this one.
            mmio::wc_flush();
            self.db.ring(u32::from(pc));
        }
        n as usize
    }

    /// Discards `n` staged WRs: their req_ids return to the pool, the producer counter and
    /// phase go back to `pc0` and `phase0`.
    fn unstage(&mut self, n: u32, pc0: u16, phase0: bool) {
        if n != 0 {
            self.pool.rollback(n);
            self.pc = pc0;
            if self.phase() != phase0 {
                self.flip_phase();
            }
        }
    }
}

/// Introspection (`efadv_query_qp_wqs`): where the queue lives, for a caller that writes WQEs
/// itself. Nothing here touches the queue.
impl SendQueue {
    /// The first WQE slot in the LLQ.
    pub fn desc_ptr(&self) -> NonNull<u8> {
        self.desc
    }

    /// The SQ doorbell register.
    pub fn doorbell_ptr(&self) -> NonNull<u32> {
        self.db.as_ptr()
    }
}

#[cfg(test)]
#[path = "sq_tests.rs"]
mod tests;
