//! The completion queue: `num_sub_cqs` rings of CQEs in host memory the device writes.
//!
//! The CQ buffer (mapping of `q_mmap_key`, read-only) holds the sub-CQs back to back, each
//! `sub_cq_depth` entries of `entry_size` bytes (16: `efa_io_rx_cdesc`, 32: `efa_io_rx_cdesc_ex`).
//! A CQE is new when its phase bit equals the sub-CQ's expected phase, which starts at 1 and
//! flips every time the sub-CQ's consumer index wraps. Sub-CQs are polled round-robin like
//! rdma-core (`next_poll_idx` advances past every sub-CQ tried). After a poll that consumed
//! entries, the CQ-wide consumer counter is written to the CQ doorbell when the kernel gave one.
//!
//! Everything read from a CQE is distrusted: the QP number is looked up through the core's
//! [`QpLookup`], the req_id through the QP's [`WridPool`]; a CQE that fails either is consumed
//! and reported as an error, never used as an index.
//!
//! Owns: the sub-CQ consumer indices and phases, the CQ doorbell. Must not: write the CQ ring,
//! form references to it, or read a CQE before its phase says it is complete.
#![allow(unsafe_code)]

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use zerocopy::{transmute_ref, FromZeros, IntoBytes};

use crate::defs::*;
use crate::error::{EfaError, QueueKind};
use crate::mmio::{self, Doorbell};
use crate::status::{WcOpcode, WcStatus, IBV_WC_WITH_IMM};
use crate::wrid::WridCompleter;

/// CQE size without the SGID/length_hi extension (`sizeof(struct efa_io_rx_cdesc)`).
pub const EFA_CQE_SIZE: u32 = 16;
/// CQE size with the extension (`sizeof(struct efa_io_rx_cdesc_ex)`); rdma-core always uses it.
pub const EFA_CQE_SIZE_EX: u32 = 32;

/// Everything the CQ needs from the create-CQ exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqConfig {
    /// CQ number (`cq_idx`), for errors.
    pub cqn: u32,
    /// `sub_cqs_per_cq` from the ucontext response (what was sent as `num_sub_cqs`).
    pub num_sub_cqs: u16,
    /// Entries per sub-CQ: the `cqe` count the kernel returned (a power of two).
    pub sub_cq_depth: u32,
    /// `cq_entry_size` sent in the request: 16 or 32.
    pub entry_size: u32,
    /// The CQ was created with `EFA_CREATE_CQ_WITH_SGID` (needs 32-byte entries).
    pub with_sgid: bool,
}

impl CqConfig {
    /// Bytes of CQ buffer the configuration covers.
    pub fn buffer_size(&self) -> usize {
        self.num_sub_cqs as usize * self.sub_cq_depth as usize * self.entry_size as usize
    }
}

/// One work completion (`struct ibv_wc` plus the `efadv_wc_*` extras).
#[doc(alias = "ibv_wc")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wc {
    /// The WR's `wr_id` (0 for an unsolicited receive).
    pub wr_id: u64,
    /// Verbs status.
    pub status: WcStatus,
    /// The raw `efa_io_comp_status` (`ibv_wc_read_vendor_err`).
    pub vendor_err: u32,
    /// Verbs opcode.
    pub opcode: WcOpcode,
    /// Received bytes (receives only; 0 for send completions).
    pub byte_len: u32,
    /// Immediate data, host order, valid when `wc_flags & IBV_WC_WITH_IMM`.
    pub imm_data: u32,
    /// Local QP number.
    pub qp_num: u32,
    /// Source QP number (receives).
    pub src_qp: u32,
    /// Source address handle number (`ibv_wc_read_slid`); 0xFFFF = unknown sender.
    pub slid: u16,
    /// `IBV_WC_*` flags.
    pub wc_flags: u32,
    /// The sender's GID (`efadv_wc_read_sgid`): present on a receive of a CQ created with SGID
    /// when the sender has no AH here.
    pub sgid: Option<[u8; 16]>,
    /// `efadv_wc_is_unsolicited`: an RDMA write with immediate that consumed no receive.
    pub is_unsolicited: bool,
}

/// The wr_id pools of one QP, as found by a [`QpLookup`].
#[derive(Debug)]
pub struct QpPools<'a> {
    /// Send queue pool (None if the QP's sends do not complete here).
    pub send: Option<&'a mut WridCompleter>,
    /// Receive queue pool (None if the QP's receives do not complete here).
    pub recv: Option<&'a mut WridCompleter>,
}

/// How the CQ finds the QP a completion names. Supplied by the core at poll time (static
/// dispatch, no allocation); `qp_num` is the 16-bit number from the CQE.
pub trait QpLookup {
    /// The pools of QP `qp_num`, or `None` if no such QP is attached (destroyed or unknown).
    fn find(&mut self, qp_num: u16) -> Option<QpPools<'_>>;
}

/// One entry of a slice-based [`QpLookup`].
#[derive(Debug)]
pub struct QpEntry<'a> {
    /// The QP number.
    pub qp_num: u32,
    /// Its send queue pool.
    pub send: Option<&'a mut WridCompleter>,
    /// Its receive queue pool.
    pub recv: Option<&'a mut WridCompleter>,
}

impl QpLookup for [QpEntry<'_>] {
    fn find(&mut self, qp_num: u16) -> Option<QpPools<'_>> {
        let e = self.iter_mut().find(|e| e.qp_num == u32::from(qp_num))?;
        Some(QpPools {
            send: e.send.as_deref_mut(),
            recv: e.recv.as_deref_mut(),
        })
    }
}

/// `poll` stopped at a CQE it refused; `polled` good completions were written before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollError {
    /// Completions written to the output before the bad CQE.
    pub polled: usize,
    /// What was wrong with the CQE (which has been consumed).
    pub error: EfaError,
}

impl core::fmt::Display for PollError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} (after {} good completions)", self.error, self.polled)
    }
}

impl std::error::Error for PollError {}

#[derive(Clone, Copy, Debug)]
struct SubCq {
    /// Entries consumed (mod 2^32); the index is `consumed & mask`.
    consumed: u32,
    /// Phase a new entry carries at the current index.
    phase: bool,
}

/// A completion queue.
pub struct CompletionQueue {
    cfg: CqConfig,
    buf: NonNull<u8>,
    subs: Box<[SubCq]>,
    db: Option<Doorbell>,
    mask: u32,
    next_poll_idx: u16,
    /// CQ-wide consumer counter (mod 2^16), what the doorbell carries.
    cc: u16,
    /// Completion events acknowledged (mod 4 in the doorbell).
    cmd_sn: u8,
}

// SAFETY: the CQ buffer and doorbell are a process-wide mapping `new`'s caller keeps alive for
// our lifetime; we only read the buffer (atomics/volatile) and write the doorbell through
// `&mut self`.
unsafe impl Send for CompletionQueue {}

impl core::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("cfg", &self.cfg)
            .field("cc", &self.cc)
            .field("next_poll_idx", &self.next_poll_idx)
            .finish()
    }
}

impl CompletionQueue {
    /// Sets up the CQ over its buffer and optional doorbell (present when the response has
    /// `EFA_CREATE_CQ_RESP_DB_OFF`: mapping of `db_mmap_key` + `db_off`).
    ///
    /// # Safety
    /// For the whole life of the returned queue: `buf` must be valid for reads of `buf_len`
    /// bytes (the device may write it concurrently; we never write it and never form
    /// references to it), and `db`, if given, valid for volatile 32-bit writes; both usable
    /// from any thread.
    pub unsafe fn new(
        cfg: CqConfig,
        buf: NonNull<u8>,
        buf_len: usize,
        db: Option<NonNull<u32>>,
    ) -> Result<Self, EfaError> {
        let bad = |reason| Err(EfaError::BadConfig { ring: "cq", reason });
        if cfg.num_sub_cqs == 0 {
            return bad("num_sub_cqs must be >= 1");
        }
        if !cfg.sub_cq_depth.is_power_of_two() {
            return bad("sub_cq_depth must be a power of two");
        }
        if cfg.entry_size != EFA_CQE_SIZE && cfg.entry_size != EFA_CQE_SIZE_EX {
            return bad("entry_size must be 16 or 32");
        }
        if cfg.with_sgid && cfg.entry_size != EFA_CQE_SIZE_EX {
            return bad("SGID needs 32-byte entries");
        }
        if cfg.buffer_size() > buf_len {
            return bad("CQ mapping smaller than num_sub_cqs * depth * entry_size");
        }
        if buf.as_ptr() as usize % 4 != 0 {
            return bad("CQ buffer not 4-byte aligned");
        }
        if let Some(d) = db {
            if d.as_ptr() as usize % 4 != 0 {
                return bad("CQ doorbell not 4-byte aligned");
            }
        }
        Ok(CompletionQueue {
            cfg,
            buf,
            subs: vec![
                SubCq {
                    consumed: 0,
                    phase: true
                };
                cfg.num_sub_cqs as usize
            ]
            .into_boxed_slice(),
            // SAFETY: forwarded from our caller's contract on `db` (checked aligned above).
            db: db.map(|d| unsafe { Doorbell::new(d) }),
            mask: cfg.sub_cq_depth - 1,
            next_poll_idx: 0,
            cc: 0,
            cmd_sn: 0,
        })
    }

    /// The configuration this queue was built with.
    pub fn config(&self) -> &CqConfig {
        &self.cfg
    }

    /// CQ-wide consumer counter (mod 2^16).
    pub fn consumer_counter(&self) -> u16 {
        self.cc
    }

    /// `ibv_poll_cq`: fills `wcs` with up to `wcs.len()` completions, round-robin over the
    /// sub-CQs. Returns how many were written. A CQE naming an unknown QP or a req_id that is
    /// not outstanding is consumed and reported as a [`PollError`] carrying the count written
    /// before it. The CQ doorbell is updated whenever entries were consumed.
    #[doc(alias = "ibv_poll_cq")]
    pub fn poll<L: QpLookup + ?Sized>(
        &mut self,
        wcs: &mut [Wc],
        lookup: &mut L,
    ) -> Result<usize, PollError> {
        let mut n = 0;
        let mut result = Ok(0);
        let mut consumed_any = false;
        while n < wcs.len() {
            let Some((sub, cqe)) = self.next_cqe() else {
                break;
            };
            consumed_any = true;
            match self.process(sub, &cqe, lookup) {
                Ok(wc) => {
                    wcs[n] = wc;
                    n += 1;
                }
                Err(error) => {
                    result = Err(PollError { polled: n, error });
                    break;
                }
            }
        }
        if consumed_any {
            self.update_doorbell(false);
        }
        result.map(|_| n)
    }

    /// `ibv_req_notify_cq`: arms the CQ for the next completion event. Solicited-only is not
    /// supported by EFA; a CQ without a doorbell cannot be armed.
    #[doc(alias = "ibv_req_notify_cq")]
    pub fn req_notify(&mut self, solicited_only: bool) -> Result<(), EfaError> {
        if solicited_only {
            return Err(EfaError::SolicitedOnlyNotSupported { cqn: self.cfg.cqn });
        }
        if self.db.is_none() {
            return Err(EfaError::NoCqDoorbell { cqn: self.cfg.cqn });
        }
        self.update_doorbell(true);
        Ok(())
    }

    /// Records that a completion event was received for this CQ (`efa_cq_event`, called from
    /// `ibv_get_cq_event`): the next doorbell write carries the new command sequence number.
    pub fn note_event(&mut self) {
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
    }

    fn update_doorbell(&mut self, arm: bool) {
        let v = cq_doorbell_value(self.cc, self.cmd_sn, arm);
        if let Some(db) = self.db.as_mut() {
            // The doorbell only reports how far we consumed; no host writes need ordering
            // before it (we wrote nothing the device reads), so no barrier.
            db.ring(v);
        }
    }

    /// Takes the next new CQE, round-robin over the sub-CQs, copying it out of the ring.
    fn next_cqe(&mut self) -> Option<(u16, EfaIoRxCdescEx)> {
        let n = self.cfg.num_sub_cqs;
        for _ in 0..n {
            let sub_idx = self.next_poll_idx;
            self.next_poll_idx = (self.next_poll_idx + 1) % n;
            if let Some(cqe) = self.take_from(sub_idx) {
                self.cc = self.cc.wrapping_add(1);
                return Some((sub_idx, cqe));
            }
        }
        None
    }

    fn take_from(&mut self, sub_idx: u16) -> Option<EfaIoRxCdescEx> {
        let entry_size = self.cfg.entry_size as usize;
        let sub = self.subs.get_mut(usize::from(sub_idx))?;
        let index = (sub.consumed & self.mask) as usize;
        let off = (usize::from(sub_idx) * self.cfg.sub_cq_depth as usize + index) * entry_size;
        let entry = self.buf.as_ptr().wrapping_add(off).cast::<u32>();
        // The device writes this word concurrently: an atomic load through a raw pointer,
        // never a reference to plain memory. `off` is in bounds and 16-aligned because
        // sub_idx < num_sub_cqs, the index is masked by depth - 1 and `new` checked the size.
        // SAFETY: `off + entry_size <= buf_len`, the word is aligned, `buf` is live (`new`).
        let word0 = unsafe { AtomicU32::from_ptr(entry) }.load(Ordering::Acquire);
        // Word 0 is req_id (bytes 0-1), status (2), flags (3), little-endian: phase is bit 24.
        let flags = (u32::from_le(word0) >> 24) as u8;
        if (field_get8(EFA_IO_CDESC_COMMON_PHASE_MASK, flags) != 0) != sub.phase {
            return None;
        }
        // No other CQE field is read before the phase above said the entry is complete.
        mmio::dma_rmb();
        let mut cqe = EfaIoRxCdescEx::new_zeroed();
        let bytes = cqe.as_mut_bytes();
        bytes[..4].copy_from_slice(&word0.to_ne_bytes());
        for i in 1..entry_size / 4 {
            // SAFETY: as above: word `i` < entry_size / 4 lies inside this entry, aligned and
            // readable; a volatile read because the device may be writing other entries.
            let w = unsafe { entry.add(i).read_volatile() };
            bytes[4 * i..4 * i + 4].copy_from_slice(&w.to_ne_bytes());
        }
        sub.consumed = sub.consumed.wrapping_add(1);
        if sub.consumed & self.mask == 0 {
            sub.phase = !sub.phase;
        }
        Some(cqe)
    }

    /// Turns a consumed CQE into a completion, checking its QP and req_id.
    fn process<L: QpLookup + ?Sized>(
        &self,
        sub_cq: u16,
        cqe: &EfaIoRxCdescEx,
        lookup: &mut L,
    ) -> Result<Wc, EfaError> {
        let cqn = self.cfg.cqn;
        let common = &cqe.base.common;
        let qpn = common.qp_num.get();
        let queue = match common.q_type() {
            EFA_IO_SEND_QUEUE => QueueKind::Send,
            EFA_IO_RECV_QUEUE => QueueKind::Recv,
            _ => {
                return Err(EfaError::BadCqe {
                    cqn,
                    sub_cq,
                    flags: common.flags,
                })
            }
        };
        let unknown = EfaError::UnknownQp {
            cqn,
            qpn: u32::from(qpn),
            queue,
        };
        let Some(pools) = lookup.find(qpn) else {
            return Err(unknown);
        };
        let op_type = common.op_type();
        let mut wc = Wc {
            status: WcStatus::from_efa(common.status),
            vendor_err: u32::from(common.status),
            qp_num: u32::from(qpn),
            ..Wc::default()
        };
        let req_id = common.req_id.get();
        let bad_req = |problem| EfaError::BadReqId {
            cqn,
            qpn: u32::from(qpn),
            queue,
            req_id,
            problem,
        };
        match queue {
            QueueKind::Send => {
                let pool = pools.send.ok_or(unknown)?;
                wc.wr_id = pool.complete(req_id).map_err(bad_req)?;
                wc.opcode = if op_type == EFA_IO_RDMA_WRITE {
                    WcOpcode::RDMA_WRITE
                } else if op_type == EFA_IO_RDMA_READ {
                    WcOpcode::RDMA_READ
                } else {
                    WcOpcode::SEND
                };
            }
            QueueKind::Recv => {
                wc.is_unsolicited = common.unsolicited();
                if !wc.is_unsolicited {
                    let pool = pools.recv.ok_or(unknown)?;
                    wc.wr_id = pool.complete(req_id).map_err(bad_req)?;
                }
                let rx: &EfaIoRxCdesc = &cqe.base;
                wc.byte_len = u32::from(rx.length.get());
                if op_type == EFA_IO_RDMA_WRITE {
                    if self.cfg.entry_size == EFA_CQE_SIZE_EX {
                        wc.byte_len |= u32::from(cqe.rdma_write_length_hi()) << 16;
                    }
                    wc.opcode = WcOpcode::RECV_RDMA_WITH_IMM;
                } else {
                    wc.opcode = WcOpcode::RECV;
                }
                wc.src_qp = u32::from(rx.src_qp_num.get());
                wc.slid = rx.ah.get();
                if common.has_imm() {
                    wc.imm_data = rx.imm.get();
                    wc.wc_flags |= IBV_WC_WITH_IMM;
                }
                if self.cfg.with_sgid
                    && rx.ah.get() == EFA_IO_RX_CDESC_AH_UNKNOWN
                    && op_type != EFA_IO_RDMA_WRITE
                {
                    wc.sgid = Some(*cqe.src_addr());
                }
            }
        }
        Ok(wc)
    }
}

/// The send-completion view of a CQE (`struct efa_io_tx_cdesc`): the first 16 bytes.
pub fn tx_view(cqe: &EfaIoRxCdescEx) -> &EfaIoTxCdesc {
    transmute_ref!(&cqe.base)
}

#[cfg(test)]
#[path = "cq_tests.rs"]
mod tests;
