//! The send queue: WQEs in the device's low-latency queue (LLQ).
//!
//! The LLQ is device memory mapped write-only and write-combined. Each WR is validated in full
//! before anything is written for it. [`SendQueue::post_send`] then composes its WQE in
//! registers and stores it straight into its LLQ slot with whole-word volatile stores (as
//! rdma-core's `efa_post_send`); a [`SendSession`] (`ibv_wr_*`, which may still be aborted)
//! builds WQEs in a local staging area and copies them to the LLQ on
//! [`SendSession::complete`]. Either way the WQEs are published by writing the producer counter
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

use uverbs_wr::{Sge, WrOp};
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

/// QP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// `IBV_QPT_UD`: unreliable datagram; SEND and SEND_WITH_IMM only.
    Ud,
    /// SRD (`IBV_QPT_DRIVER` + `EFA_QP_DRIVER_TYPE_SRD`): reliable unordered datagrams; RDMA
    /// read/write as the device caps allow.
    Srd,
}

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
    /// Transport.
    pub qp_type: QpType,
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

/// Destination of a datagram (`ibv_wr_set_ud_addr`; `wr.ud` of `ibv_send_wr`).
#[doc(alias = "ibv_wr_set_ud_addr")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdAddr {
    /// Device address handle number (`efa_address_handle` of the create-AH response).
    pub ah: u16,
    /// Remote QP number (EFA QP numbers are 16-bit).
    pub remote_qpn: u32,
    /// Remote Q_Key.
    pub remote_qkey: u32,
}

/// Where a send WR's data comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// `ibv_wr_set_sge_list`: buffers in registered memory.
    Sge(&'a [Sge]),
    /// `ibv_wr_set_inline_data_list` (or `IBV_SEND_INLINE`): bytes copied into the WQE.
    Inline(&'a [&'a [u8]]),
}

/// A send work request: required fields in the constructors, the rest by setters.
#[doc(alias = "ibv_send_wr")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub op: WrOp,
    /// Destination.
    pub dest: UdAddr,
    /// Data.
    pub payload: Payload<'a>,
    /// `IBV_SEND_SIGNALED` (or the QP's `sq_sig_all`); EFA refuses unsignaled sends.
    pub signaled: bool,
    /// `efadv_wr_set_processing_hints` (`EFA_IO_PROCESSING_HINT_*`).
    pub processing_hints: u8,
}

impl<'a> SendWr<'a> {
    /// A WR with operation `op` to `dest`, no data, not yet signaled.
    pub fn new(wr_id: u64, op: WrOp, dest: UdAddr) -> Self {
        SendWr {
            wr_id,
            op,
            dest,
            payload: Payload::Sge(&[]),
            signaled: false,
            processing_hints: 0,
        }
    }
    /// `ibv_wr_send`.
    #[doc(alias = "ibv_wr_send")]
    pub fn send(wr_id: u64, dest: UdAddr) -> Self {
        Self::new(wr_id, WrOp::Send, dest)
    }
    /// `ibv_wr_send_imm`.
    #[doc(alias = "ibv_wr_send_imm")]
    pub fn send_imm(wr_id: u64, dest: UdAddr, imm: u32) -> Self {
        Self::new(wr_id, WrOp::SendWithImm { imm_data: imm }, dest)
    }
    /// `ibv_wr_rdma_read`.
    #[doc(alias = "ibv_wr_rdma_read")]
    pub fn rdma_read(wr_id: u64, dest: UdAddr, rkey: u32, remote_addr: u64) -> Self {
        Self::new(wr_id, WrOp::RdmaRead { rkey, remote_addr }, dest)
    }
    /// `ibv_wr_rdma_write`.
    #[doc(alias = "ibv_wr_rdma_write")]
    pub fn rdma_write(wr_id: u64, dest: UdAddr, rkey: u32, remote_addr: u64) -> Self {
        Self::new(wr_id, WrOp::RdmaWrite { rkey, remote_addr }, dest)
    }
    /// `ibv_wr_rdma_write_imm`.
    #[doc(alias = "ibv_wr_rdma_write_imm")]
    pub fn rdma_write_imm(wr_id: u64, dest: UdAddr, rkey: u32, remote_addr: u64, imm: u32) -> Self {
        Self::new(
            wr_id,
            WrOp::RdmaWriteWithImm {
                rkey,
                remote_addr,
                imm_data: imm,
            },
            dest,
        )
    }
    /// `ibv_wr_set_sge_list`.
    #[doc(alias = "ibv_wr_set_sge_list")]
    pub fn sge_list(mut self, sges: &'a [Sge]) -> Self {
        self.payload = Payload::Sge(sges);
        self
    }
    /// `ibv_wr_set_inline_data_list`.
    #[doc(alias = "ibv_wr_set_inline_data_list")]
    pub fn inline_data(mut self, bufs: &'a [&'a [u8]]) -> Self {
        self.payload = Payload::Inline(bufs);
        self
    }
    /// `IBV_SEND_SIGNALED`.
    pub fn signaled(mut self, on: bool) -> Self {
        self.signaled = on;
        self
    }
    /// `efadv_wr_set_processing_hints`.
    #[doc(alias = "efadv_wr_set_processing_hints")]
    pub fn processing_hints(mut self, hints: u8) -> Self {
        self.processing_hints = hints;
        self
    }
}

/// The parts of a *plain* WR (a SEND of exactly one SGE): what the fast paths of
/// [`SendQueue::post_send_with`] read, whatever type the caller's WRs are.
#[derive(Clone, Copy, Debug)]
pub struct PlainWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Destination.
    pub dest: UdAddr,
    /// The one SGE.
    pub sge: &'a Sge,
    /// `IBV_SEND_SIGNALED`.
    pub signaled: bool,
    /// `efadv_wr_set_processing_hints`.
    pub processing_hints: u8,
}

/// What [`SendQueue::post_plain`] reads of a plain WR (a SEND of exactly one SGE), each part
/// where it is needed: the checks first, then the request id, then the WQE. A caller's own
/// WR type is read in place and none of it is held in registers across the request id's
/// allocation.
pub trait PlainSource {
    /// `IBV_SEND_SIGNALED` (or the QP's `sq_sig_all`, if the caller folds it in).
    fn signaled(&self) -> bool;
    /// The destination QP number.
    fn remote_qpn(&self) -> u32;
    /// Returned in the completion.
    fn wr_id(&self) -> u64;
    /// The destination's AH number and Q_Key.
    fn ah_qkey(&self) -> (u16, u32);
    /// The one SGE.
    fn sge(&self) -> &Sge;
    /// `efadv_wr_set_processing_hints`.
    fn processing_hints(&self) -> u8;
}

impl PlainSource for PlainWr<'_> {
    #[inline(always)]
    fn signaled(&self) -> bool {
        self.signaled
    }
    #[inline(always)]
    fn remote_qpn(&self) -> u32 {
        self.dest.remote_qpn
    }
    #[inline(always)]
    fn wr_id(&self) -> u64 {
        self.wr_id
    }
    #[inline(always)]
    fn ah_qkey(&self) -> (u16, u32) {
        (self.dest.ah, self.dest.remote_qkey)
    }
    #[inline(always)]
    fn sge(&self) -> &Sge {
        self.sge
    }
    #[inline(always)]
    fn processing_hints(&self) -> u8 {
        self.processing_hints
    }
}

/// A send WR the queue can post: this crate's [`SendWr`], or a caller's own type (the core's
/// generic work request), read in place so a list is never copied into another form first.
///
/// A caller with checks of its own that the queue cannot make (the core: the destination's
/// AH belongs to the QP's PD) makes them in these two methods, with what they need passed
/// as `ctx` ([`SendQueue::post_send_in`]): a WR either method declines is never posted, and
/// the list stops there. So the caller needs no pass of its own over the list.
pub trait SendWrSource {
    /// What the source's own checks need besides the WR (`()` for none).
    type Ctx: Copy;
    /// The WR's parts if it is a plain SEND of one SGE that passes the source's own checks
    /// (those of signaling and the QP number stay the queue's); `None` for every other WR.
    fn plain(&self, ctx: Self::Ctx) -> Option<PlainWr<'_>>;
    /// The whole WR, for full validation; `None` if it is not one this provider can express
    /// or the source's own checks refuse it (the queue then refuses it as an operation it
    /// does not support; a caller with checks of its own names the reason itself).
    fn send_wr(&self, ctx: Self::Ctx) -> Option<SendWr<'_>>;
}

impl SendWrSource for SendWr<'_> {
    type Ctx = ();

    #[inline(always)]
    fn plain(&self, _: ()) -> Option<PlainWr<'_>> {
        match (self.op, self.payload) {
            (WrOp::Send, Payload::Sge([sge])) => Some(PlainWr {
                wr_id: self.wr_id,
                dest: self.dest,
                sge,
                signaled: self.signaled,
                processing_hints: self.processing_hints,
            }),
            _ => None,
        }
    }

    #[inline(always)]
    fn send_wr(&self, _: ()) -> Option<SendWr<'_>> {
        Some(*self)
    }
}

/// A WR of a list was refused: the ones before it were posted, it and the rest were not
/// (`bad_wr` of `ibv_post_send`/`ibv_post_recv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostError {
    /// Index of the refused WR in the list (= number of WRs posted).
    pub index: usize,
    /// Why.
    pub error: EfaError,
}

impl core::fmt::Display for PostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "work request {} of the list: {}", self.index, self.error)
    }
}

impl std::error::Error for PostError {}

/// The send queue of one QP.
pub struct SendQueue {
    cfg: SqConfig,
    /// First WQE slot in the LLQ (write-only device memory).
    desc: NonNull<u8>,
    db: Doorbell,
    pool: WridPool,
    /// The completing half of the pool, until the core hands it to the CQ side.
    completer: Option<WridCompleter>,
    /// Staging area for a session: `depth` WQEs, built here, copied to the LLQ on complete.
    staging: Box<[u8]>,
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
    plain_qpn_end: u32,
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
            wqe_size: cfg.wqe_size as usize,
            mask: cfg.depth - 1,
            max_batch: cfg.max_batch_wr(),
            pc: 0,
            word0,
            hi_mask: if cfg.req_id_64 { !0xffff } else { 0 },
            plain_qpn_end: plain_qpn_end(true, &cfg),
        })
    }

    /// Opens or closes the single-WR path ([`post_plain`](Self::post_plain), and so
    /// [`post_single`](Self::post_single)): closed, it declines every WR, and the list path of
    /// [`post_send_with`](Self::post_send_with) decides instead. Open when the queue is made;
    /// the core keeps it open only while the QP is in RTS, so that path needs no test of the
    /// QP's state of its own.
    pub fn set_plain_open(&mut self, open: bool) {
        self.plain_qpn_end = plain_qpn_end(open, &self.cfg);
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

    /// Starts a batch of WRs (`ibv_wr_start`). Dropping the session without
    /// [`complete`](SendSession::complete) discards the staged WRs like `ibv_wr_abort`.
    #[doc(alias = "ibv_wr_start")]
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
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<usize, PostError> {
        self.post_send_with(wrs, false)
    }

    /// [`post_send`](Self::post_send) for a QP created with `sq_sig_all` = `sig_all`: then
    /// every WR counts as signaled whatever its own flag says.
    ///
    /// Like rdma-core's `efa_post_send`, each WR is validated, then its WQE is written straight
    /// into its LLQ slot with whole-word stores (no staging copy), and the doorbell is rung
    /// every `max_batch_wr` WQEs and once at the end. The device reads a slot only once a
    /// doorbell's producer counter covers it, so a WQE written for a WR of this list is never
    /// seen before its doorbell; a refused WR writes nothing.
    ///
    /// The list goes in runs that end at the ring's end at the latest, so inside a run the slot
    /// address just steps and the phase is fixed. A run posts plain WRs (a signaled SEND of
    /// exactly one SGE to a 16-bit QP number: the common case) with the free request ids
    /// counted once per run, ringing the doorbell whenever a batch is full; it stops at the
    /// first WR that is not plain, finds no free id or meets the ring's end, and that WR takes
    /// the general path (full validation, which names the reason of a refusal, and an id taken
    /// with its own check).
    ///
    /// A list of one plain WR (the common case of a latency-bound poster) takes a path of its
    /// own, [`post_single`](Self::post_single), that posts it without the run's set-up; any
    /// other list, and a single WR that path declines, goes through the runs.
    #[inline]
    pub fn post_send_with<W: SendWrSource<Ctx = ()>>(
        &mut self,
        wrs: &[W],
        sig_all: bool,
    ) -> Result<usize, PostError> {
        self.post_send_in(wrs, (), sig_all)
    }

    /// [`post_send_with`](Self::post_send_with) of WRs whose source makes checks of its own
    /// with `ctx` ([`SendWrSource`]): a WR they refuse stops the list, refused as an
    /// operation this queue does not support, with nothing written for it.
    #[inline]
    pub fn post_send_in<W: SendWrSource>(
        &mut self,
        wrs: &[W],
        ctx: W::Ctx,
        sig_all: bool,
    ) -> Result<usize, PostError> {
        if let [wr] = wrs {
            if self.post_single(wr, ctx, sig_all) {
                return Ok(1);
            }
        }
        self.post_list(wrs, ctx, sig_all)
    }

    /// Posts `wr` on its own if it is a plain WR (a signaled — or `sig_all` — SEND of exactly
    /// one SGE to a 16-bit QP number, on a QP that allows an SGE) and a request id is free,
    /// and rings the doorbell for it: what [`post_send_with`](Self::post_send_with) does for a
    /// list of that one WR. Returns false, having written and taken nothing, for any other WR
    /// or when no id is free; the caller then hands the WR to `post_send_with`, which decides
    /// (and names the reason of a refusal). Callers that can skip their own set-up for this
    /// case (the core's `EfaQp::post_send`) call it first.
    ///
    /// What makes it cheaper than a run of one: the free ids come from the count the pool kept
    /// from its last load of the completer's `tail` (no Acquire load while that count lasts),
    /// and there is no run to set up (no cut at the ring's end: one slot always fits; no batch
    /// count: one WQE, one doorbell, and `max_batch_wr` >= 1).
    #[inline(always)]
    pub fn post_single<W: SendWrSource>(&mut self, wr: &W, ctx: W::Ctx, sig_all: bool) -> bool {
        let Some(p) = wr.plain(ctx) else {
            return false;
        };
        self.post_plain(&p, sig_all)
    }

    /// [`post_single`](Self::post_single) of a plain WR's parts ([`PlainWr`], or a caller's
    /// own type that is a plain WR).
    #[inline(always)]
    pub fn post_plain<P: PlainSource + ?Sized>(&mut self, wr: &P, sig_all: bool) -> bool {
        // The checks of a plain WR: signaled, a 16-bit QP number, and (the same compare) an
        // open path on a QP that allows an SGE (`plain_qpn_end`).
        if !(sig_all || wr.signaled()) || wr.remote_qpn() >= self.plain_qpn_end {
            return false;
        }
        // Everything is checked: from here on the WR is posted.
        let Some((index, hi)) = self.take_id(wr.wr_id()) else {
            return false;
        };
        // `word0` holds the generation bits: with the index they make the req_id.
        let w = plain_words(wr, index, self.word0, hi);
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

    /// [`post_send_with`](Self::post_send_with) for every list but a single plain WR: the WRs
    /// in runs, with the general path between them.
    #[inline]
    fn post_list<W: SendWrSource>(
        &mut self,
        wrs: &[W],
        ctx: W::Ctx,
        sig_all: bool,
    ) -> Result<usize, PostError> {
        // Orders the previous doorbell write before the WC stores below.
        mmio::wc_start();
        // A plain WR has one SGE, which a QP with `max_send_sge` 0 refuses: there every WR
        // takes the general path. So does every WR of an SQ with 64-bit request ids: the runs
        // take their ids from the pool's free ring (`WridPool::run`), which such an SQ has not,
        // and the pool path's runs stay free of any test for it.
        let plain_ok = self.cfg.max_send_sge != 0 && self.hi_mask == 0;
        let mut index = 0;
        // WQEs this batch may still take before its doorbell (>= 1 between WRs).
        let mut batch_left = self.max_batch;
        while let Some(rest) = wrs.get(index..).filter(|r| !r.is_empty()) {
            let done = match (plain_ok, self.wqe_size, sig_all) {
                (false, _, _) => 0,
                (true, 64, false) => {
                    self.post_plain_run::<64, false, W>(rest, ctx, &mut batch_left)
                }
                (true, 64, true) => self.post_plain_run::<64, true, W>(rest, ctx, &mut batch_left),
                (true, _, false) => {
                    self.post_plain_run::<128, false, W>(rest, ctx, &mut batch_left)
                }
                (true, _, true) => self.post_plain_run::<128, true, W>(rest, ctx, &mut batch_left),
            };
            index += done;
            if let Some(wr) = rest.get(done) {
                // Not a plain WR, no id was free when the run started, or the ring's end.
                let r = match wr.send_wr(ctx) {
                    Some(wr) => self.post_one(&wr, sig_all),
                    None => Err(EfaError::OpNotSupported {
                        qpn: self.cfg.qp_num,
                        op: "this operation",
                        reason:
                            "EFA posts SEND, SEND_WITH_IMM, RDMA_READ and RDMA_WRITE[_WITH_IMM]",
                    }),
                };
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

    /// Posts the leading plain WRs of `run` (see [`post_send_with`](Self::post_send_with)) into
    /// `W`-byte slots and returns how many (`SIG_ALL`: the QP's `sq_sig_all`); stops at the
    /// first WR that is not plain, when the ids free at the start are used up or the free
    /// ring's cells end ([`WridPool::run`]), and at the ring's end, so the phase is the same
    /// for all of them and the slot address just steps.
    /// Rings the doorbell each time `batch_left` (the WQEs the current batch may still take,
    /// >= 1) comes down to 0, and leaves it >= 1.
    #[inline(always)]
    fn post_plain_run<const W: usize, const SIG_ALL: bool, R: SendWrSource>(
        &mut self,
        run: &[R],
        ctx: R::Ctx,
        batch_left: &mut u32,
    ) -> usize {
        let first = (u32::from(self.pc) & self.mask) as usize;
        let room = (self.cfg.depth as usize).saturating_sub(first);
        let run = run.get(..run.len().min(room)).unwrap_or_default();
        // The phase is that of slot `first`, the same for the whole run; the generation bits
        // are in it too.
        let word0 = self.word0;
        let mut ids = self.pool.run(run.len() as u32);
        let run = ids.limit(run);
        // Slot `first`; the run writes slots `first .. first + run.len() <= depth`.
        let mut dst = self.desc.as_ptr().wrapping_add(first * W).cast::<u64>();
        let mut done = 0;
        let mut left = *batch_left;
        for (k, (cell, wr)) in ids.cells_for(run).enumerate() {
            let Some(wr) = wr.plain(ctx) else {
                break;
            };
            if !(SIG_ALL || wr.signaled) || wr.dest.remote_qpn > u32::from(u16::MAX) {
                break;
            }
            // The run's `k`-th cell, and `k` posts so far (`done`).
            let Some(index) = ids.post_cell(cell, wr.wr_id) else {
                break;
            };
            // Pool path only (`post_list`): req_id_ex stays zero; `word0` has the generation.
            let w = plain_words(&wr, index, word0, 0);
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

    /// Validates `wr`, takes a request id (marked posted: the doorbell that hands it to the
    /// device comes after) and writes the WQE into the slot at the producer counter.
    #[inline(always)]
    fn post_one(&mut self, wr: &SendWr<'_>, sig_all: bool) -> Result<(), EfaError> {
        // The common case (a signaled SEND of at most `max_send_sge` SGEs to a 16-bit QP
        // number) is decided by a few compares; everything else takes the full validation,
        // which names the reason.
        let plain = (wr.signaled | sig_all)
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
            self.validate(wr, sig_all)?;
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
    fn validate(&self, wr: &SendWr<'_>, sig_all: bool) -> Result<(), EfaError> {
        let qpn = self.cfg.qp_num;
        if !(wr.signaled | sig_all) {
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
            | WrOp::LocalInv { .. } => {
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

/// Word 0 of a plain WR's WQE (see [`SendQueue::post_send_with`]) but its req_id and
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
/// efa_io_tx_meta_desc as in `write_wqe` (no immediate, ctrl3 = the hints), then data.sgl[0]
/// and a zero sgl[1].
#[inline(always)]
fn plain_words<P: PlainSource + ?Sized>(wr: &P, req_id: u16, word0: u64, hi: u64) -> [u64; 8] {
    let sge = wr.sge();
    let (ah, qkey) = wr.ah_qkey();
    [
        u64::from(req_id) | word0 | u64::from(wr.remote_qpn()) << 32,
        u64::from(ah) << 32
            | u64::from(wr.processing_hints() & EFA_IO_TX_META_DESC_PROCESSING_HINTS_MASK) << 48,
        u64::from(qkey),
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
        | WrOp::LocalInv { .. } => (EFA_IO_SEND, None, None),
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
    wr: &SendWr<'_>,
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
pub fn build_wqe(wr: &SendWr<'_>, req_id: u16, phase: bool) -> EfaIoTxWqe128 {
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

/// A batch of send WRs being staged (`ibv_wr_start` .. `ibv_wr_complete`/`ibv_wr_abort`).
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
    pub fn post(&mut self, wr: &SendWr<'_>) -> Result<(), EfaError> {
        self.sq.validate(wr, false)?;
        let sq = &mut *self.sq;
        let Some(req_id) = sq.pool.alloc(wr.wr_id) else {
            return Err(sq.queue_full());
        };
        let mut wqe = build_wqe(wr, req_id, sq.phase());
        set_req_id_ex(&mut wqe, wr.wr_id & sq.hi_mask);
        let off = self.staged as usize * sq.wqe_size;
        // The pool holds `depth` slots and each staged WR holds one, so `staged < depth` and
        // the staging slot exists.
        if let Some(slot) = sq.staging.get_mut(off..off + sq.wqe_size) {
            slot.copy_from_slice(&wqe.as_bytes()[..sq.wqe_size]);
        }
        self.staged += 1;
        sq.pc = sq.pc.wrapping_add(1);
        if u32::from(sq.pc) & sq.mask == 0 {
            sq.flip_phase();
        }
        Ok(())
    }

    /// Number of WRs staged so far.
    pub fn staged(&self) -> u32 {
        self.staged
    }

    /// `ibv_wr_complete`: copies the staged WQEs to the LLQ and rings the doorbell every
    /// `max_batch_wr` WQEs and once at the end. Returns the number of WRs posted.
    #[doc(alias = "ibv_wr_complete")]
    pub fn complete(mut self) -> usize {
        let n = core::mem::take(&mut self.staged);
        let sq = &mut *self.sq;
        if n == 0 {
            return 0;
        }
        let mut pc = self.pc0;
        let mut in_batch = 0;
        // The completer accepts these req_ids from here on; this happens before the first
        // doorbell below, which is what lets the device complete them.
        sq.pool.publish();
        // Orders the previous doorbell write before the WC stores below.
        mmio::wc_start();
        for i in 0..n as usize {
            let slot = (u32::from(pc) & sq.mask) as usize * sq.wqe_size;
            let src = &sq.staging[i * sq.wqe_size..(i + 1) * sq.wqe_size];
            // SAFETY: `slot + wqe_size <= depth * wqe_size <= desc_len` (index masked by
            // depth - 1, size checked in `new`), `desc` and `wqe_size` are multiples of 8, and
            // `new`'s caller made `desc` writable for `desc_len` bytes for our lifetime.
            unsafe { mmio::copy_to_wc(sq.desc.add(slot), src) };
            pc = pc.wrapping_add(1);
            in_batch += 1;
            if in_batch == sq.max_batch {
                // Every WC store of this batch reaches the device before the doorbell.
                mmio::wc_flush();
                sq.db.ring(u32::from(pc));
                in_batch = 0;
                // The doorbell above reaches the device before the next batch's WC stores.
                mmio::wc_start();
            }
        }
        if in_batch != 0 {
            // Every WC store since the last doorbell reaches the device before this one.
            mmio::wc_flush();
            sq.db.ring(u32::from(pc));
        }
        n as usize
    }

    /// `ibv_wr_abort`: discards the staged WRs (their req_ids return to the pool, the producer
    /// counter and phase go back).
    #[doc(alias = "ibv_wr_abort")]
    pub fn abort(mut self) {
        self.rollback();
    }

    fn rollback(&mut self) {
        let n = core::mem::take(&mut self.staged);
        if n != 0 {
            self.sq.pool.rollback(n);
            self.sq.pc = self.pc0;
            if self.sq.phase() != self.phase0 {
                self.sq.flip_phase();
            }
        }
    }
}

impl Drop for SendSession<'_> {
    fn drop(&mut self) {
        self.rollback();
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
