//! The receive queue: receive descriptors in a host-memory ring, published by a 32-bit doorbell.
//!
//! A receive WR takes one `efa_io_rx_desc` per SGE (first/last flags mark the WQE; the first
//! carries the req_id). The ring is mapped write-only, so it is only ever written, with volatile
//! 32-bit stores; the doorbell carries the descriptor producer counter.
//!
//! Owns: the RQ write cursor, the RQ doorbell, the RQ's wr_id pool. Must not: read the ring,
//! allocate on post, or write anything the validation refused.
#![allow(unsafe_code)]

use core::ptr::NonNull;

use zerocopy::IntoBytes;

use crate::defs::EfaIoRxDesc;
use crate::error::{EfaError, QueueKind};
use crate::mmio::{self, Doorbell};
use crate::wrid::{WridCompleter, WridPool};
use uverbs_wr::PostError;
use uverbs_wr::RecvWr;

/// Size of one receive descriptor (`sizeof(struct efa_io_rx_desc)`).
pub const EFA_IO_RX_DESC_SIZE: u32 = 16;

/// Everything the RQ needs from the create-QP exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RqConfig {
    /// QP number (for errors).
    pub qp_num: u32,
    /// Descriptors in the ring: a power of two <= 65536 (`rq_ring_size / 16`).
    pub desc_count: u32,
    /// The QP's `max_recv_sge` (>= 1).
    pub max_sge: u32,
    /// Generation of this QP number, carried in the high bits of the req_id.
    pub gen: u16,
}

impl RqConfig {
    /// The ring rdma-core sizes for `max_recv_wr` WRs of `max_recv_sge` SGEs:
    /// `roundup_pow_of_two(max_recv_wr * max_recv_sge)` descriptors.
    pub fn for_caps(qp_num: u32, max_recv_wr: u32, max_recv_sge: u32, gen: u16) -> Self {
        let max_sge = max_recv_sge.max(1);
        RqConfig {
            qp_num,
            desc_count: max_recv_wr
                .max(1)
                .saturating_mul(max_sge)
                .checked_next_power_of_two()
                .unwrap_or(1 << 31),
            max_sge,
            gen,
        }
    }

    /// `rq_ring_size` for [`uverbs_uapi::efa::EfaIbvCreateQp`]: descriptors × 16.
    pub fn rq_ring_size(&self) -> u32 {
        self.desc_count.saturating_mul(EFA_IO_RX_DESC_SIZE)
    }

    /// WRs the queue holds (`desc_count / max_sge`): the `max_recv_wr` reported back.
    pub fn depth(&self) -> u32 {
        self.desc_count / self.max_sge.max(1)
    }
}

/// The receive queue of one QP.
pub struct RecvQueue {
    cfg: RqConfig,
    ring: NonNull<u8>,
    db: Doorbell,
    pool: WridPool,
    /// The completing half of the pool, until the core hands it to the CQ side.
    completer: Option<WridCompleter>,
    mask: u32,
    /// Descriptor producer counter (mod 2^16), what the doorbell carries.
    pc: u16,
}

// SAFETY: the ring and doorbell are a process-wide mapping `new`'s caller keeps alive for our
// lifetime and nobody else writes; all writes go through `&mut self`.
unsafe impl Send for RecvQueue {}

impl core::fmt::Debug for RecvQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RecvQueue")
            .field("qp_num", &self.cfg.qp_num)
            .field("desc_count", &self.cfg.desc_count)
            .field("pc", &self.pc)
            .field("outstanding", &self.pool.outstanding())
            .finish()
    }
}

impl RecvQueue {
    /// Sets up the RQ over its ring (mapping of `rq_mmap_key`, `ring_len` bytes) and doorbell
    /// (mapping of `rq_db_mmap_key` + `rq_db_offset`).
    ///
    /// # Safety
    /// For the whole life of the returned queue: `ring` must be valid for writes of `ring_len`
    /// bytes and `db` for volatile 32-bit writes, both usable from any thread, and no one else
    /// may write them. They need not be readable.
    pub unsafe fn new(
        cfg: RqConfig,
        ring: NonNull<u8>,
        ring_len: usize,
        db: NonNull<u32>,
    ) -> Result<Self, EfaError> {
        let bad = |reason| Err(EfaError::BadConfig { ring: "rq", reason });
        if !cfg.desc_count.is_power_of_two() || cfg.desc_count > 1 << 16 {
            return bad("desc_count must be a power of two <= 65536");
        }
        if cfg.max_sge == 0 || cfg.max_sge > cfg.desc_count {
            return bad("max_sge must be 1..=desc_count");
        }
        if cfg.rq_ring_size() as usize > ring_len {
            return bad("RQ mapping smaller than desc_count * 16");
        }
        if ring.as_ptr() as usize % 4 != 0 || db.as_ptr() as usize % 4 != 0 {
            return bad("RQ ring or doorbell not 4-byte aligned");
        }
        let (pool, completer) = WridPool::new(cfg.depth(), cfg.gen)?;
        Ok(RecvQueue {
            pool,
            completer: Some(completer),
            cfg,
            ring,
            // SAFETY: forwarded from our caller's contract on `db` (checked aligned above).
            db: unsafe { Doorbell::new(db) },
            mask: cfg.desc_count - 1,
            pc: 0,
        })
    }

    /// The configuration this queue was built with.
    pub fn config(&self) -> &RqConfig {
        &self.cfg
    }

    /// The posting half of the wr_id pool.
    pub fn pool(&self) -> &WridPool {
        &self.pool
    }

    /// Takes the completing half of the wr_id pool (once); see
    /// [`SendQueue::take_completer`](crate::SendQueue::take_completer).
    pub fn take_completer(&mut self) -> Option<WridCompleter> {
        self.completer.take()
    }

    /// Descriptor producer counter (mod 2^16).
    pub fn producer_counter(&self) -> u16 {
        self.pc
    }

    fn validate(&self, wr: &RecvWr<'_>) -> Result<(), EfaError> {
        let qpn = self.cfg.qp_num;
        if wr.sg_list.is_empty() {
            return Err(EfaError::NoSge { qpn });
        }
        if wr.sg_list.len() > self.cfg.max_sge as usize {
            return Err(EfaError::TooManySge {
                qpn,
                queue: QueueKind::Recv,
                num_sge: wr.sg_list.len(),
                max_sge: self.cfg.max_sge as usize,
            });
        }
        if self.pool.is_full() {
            return Err(EfaError::QueueFull {
                qpn,
                queue: QueueKind::Recv,
                depth: self.pool.capacity(),
            });
        }
        Ok(())
    }

    /// `ibv_post_recv`: posts `wrs` in order; the first refused WR stops the list and is
    /// reported with its index, the ones before it are posted. The doorbell is rung once if
    /// anything was posted. Each WR takes 1..=max_sge buffers; lengths above 65535 are
    /// clamped to 65535 as rdma-core does (EFA messages are MTU-sized, so a larger buffer
    /// cannot be filled anyway).
    #[doc(alias = "ibv_post_recv")]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<usize, PostError<EfaError>> {
        let mut result = Ok(wrs.len());
        for (index, wr) in wrs.iter().enumerate() {
            if let Err(error) = self.post_one(wr) {
                result = Err(PostError { index, error });
                break;
            }
        }
        let posted = match &result {
            Ok(n) => *n,
            Err(e) => e.index,
        };
        if posted != 0 {
            // The completer accepts the new req_ids before the device can see them.
            self.pool.publish();
            // The descriptor stores above are visible to the device's DMA before it sees the
            // doorbell that covers them: rdma-core's `efa_rq_ring_doorbell` is
            // `udma_to_device_barrier(); mmio_write32(db, pc)`, i.e. `dmb oshst` + `str` on
            // aarch64; ours is `dmb oshst` + `stlr` (providers/efa/src/mmio.rs).
            mmio::dma_wmb();
            self.db.ring(u32::from(self.pc));
        }
        result
    }

    fn post_one(&mut self, wr: &RecvWr<'_>) -> Result<(), EfaError> {
        self.validate(wr)?;
        let Some(req_id) = self.pool.alloc(wr.wr_id) else {
            return Err(EfaError::QueueFull {
                qpn: self.cfg.qp_num,
                queue: QueueKind::Recv,
                depth: self.pool.capacity(),
            });
        };
        let last = wr.sg_list.len() - 1;
        for (i, sge) in wr.sg_list.iter().enumerate() {
            let mut d = EfaIoRxDesc::default();
            if i == 0 {
                d.req_id.set(req_id);
                d.set_first(true);
            }
            d.set_last(i == last);
            d.length.set(sge.length.min(u32::from(u16::MAX)) as u16);
            d.set_lkey(sge.lkey);
            d.set_buf_addr(sge.addr);
            self.write_desc(&d);
            self.pc = self.pc.wrapping_add(1);
        }
        Ok(())
    }

    fn write_desc(&mut self, d: &EfaIoRxDesc) {
        let off = (u32::from(self.pc) & self.mask) as usize * EFA_IO_RX_DESC_SIZE as usize;
        let dst = self.ring.as_ptr().wrapping_add(off).cast::<u32>();
        for (i, chunk) in d.as_bytes().chunks_exact(4).enumerate() {
            let mut w = [0u8; 4];
            w.copy_from_slice(chunk);
            // SAFETY: `off + 16 <= desc_count * 16 <= ring_len` (index masked by desc_count - 1,
            // size checked in `new`); ring is 4-aligned and `off` a multiple of 16, so word `i`
            // (< 4) is aligned and inside the ring, which `new`'s caller made writable.
            unsafe { dst.add(i).write_volatile(u32::from_ne_bytes(w)) };
        }
    }
}

/// Introspection (`efadv_query_qp_wqs`). Nothing here touches the queue.
impl RecvQueue {
    /// The first receive descriptor of the ring.
    pub fn ring_ptr(&self) -> NonNull<u8> {
        self.ring
    }

    /// The RQ doorbell register.
    pub fn doorbell_ptr(&self) -> NonNull<u32> {
        self.db.as_ptr()
    }
}

#[cfg(test)]
#[path = "rq_tests.rs"]
mod tests;
