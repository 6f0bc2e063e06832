//! Queue introspection and depth limits.
//!
//! `efadv_query_qp_wqs` and `efadv_query_cq` hand out where a QP's work queues and a CQ's
//! buffer live (buffer, entry size and count, doorbell, doorbell batch), for a caller that
//! writes WQEs or reads CQEs itself (libfabric's efa-direct): the same values libefa returns,
//! taken from the same driver data (the rings this library mapped from the create responses).
//! The pointers stay valid while the QP or CQ lives; `destroy` consumes the object, so a query
//! after it does not compile. Using them is the caller's `unsafe` business: posting through
//! them behind the library's back desynchronises its own producer counters.
//!
//! `efadv_get_max_sq_depth` and `efadv_get_max_rq_depth`: the deepest SQ or RQ a QP with given
//! attributes can have, computed from the context's driver data exactly as libefa does
//! (`efa_calc_sq_max_depth`, `efa_calc_rq_max_depth`), so a caller sizes its QP before creating
//! it. Like libefa's, they read only what the context cached when it was created (the
//! get-context response and one QUERY_DEVICE): a call sends no command.

use bitflags::bitflags;
use uverbs_efa::defs::EFA_IO_TX_DESC_INLINE_MAX_SIZE;

/// Bytes of a send WQE without and with the extended inline buffer (`efa_io_tx_wqe`,
/// `efa_io_tx_wqe_128`).
const EFA_IO_TX_DESC_SIZE_64: u32 = 64;
const EFA_IO_TX_DESC_SIZE_128: u32 = 128;

use std::ptr::NonNull;

use crate::context::Context;
use crate::cq::Cq;
use crate::efa::device::inline_buf_size_ex;
use crate::error::{Errno, Error, Result};
use crate::qp::Qp;

bitflags! {
    /// `EFADV_SQ_DEPTH_ATTR_*`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EfaSqDepthFlags: u32 {
        /// `EFADV_SQ_DEPTH_ATTR_INLINE_WRITE`: the QP will post inline RDMA writes (128-byte
        /// WQEs).
        const INLINE_WRITE = 1 << 0;
    }
}

bitflags! {
    /// `EFADV_WQ_CAPS_*`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EfaWqCaps: u16 {
        /// `EFADV_WQ_CAPS_64_BIT_REQ_ID`: the queue carries 64-bit request ids (the SQ of a
        /// QP on a device with `EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID`, as libefa).
        const WITH_64_BIT_REQ_ID = 1 << 0;
    }
}

/// `struct efadv_wq_attr`: one work queue of a QP.
#[doc(alias = "efadv_wq_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EfaWqAttr {
    /// Extension mask (none defined: 0).
    pub comp_mask: u64,
    /// The first entry: the SQ's first WQE slot in the LLQ (device memory, write-only,
    /// write-combined), or the RQ's first descriptor.
    pub buffer: NonNull<u8>,
    /// Bytes per entry: 64 or 128 for the SQ, 16 (`efa_io_rx_desc`) for the RQ.
    pub entry_size: u32,
    /// Entries in the ring: SQ WQE slots, or RQ descriptors.
    pub num_entries: u32,
    /// The queue's 32-bit doorbell register (write-only).
    pub doorbell: NonNull<u32>,
    /// Most entries one doorbell may cover (SQ: `max_tx_batch` in WQEs, at most depth - 1
    /// when the device has a `min_sq_wr`; RQ: the whole ring).
    pub max_batch: u32,
    /// `EFADV_WQ_CAPS_*`.
    pub caps: EfaWqCaps,
}

/// `struct efadv_cq_attr`.
#[doc(alias = "efadv_cq_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EfaCqAttr {
    /// Extension mask (none defined: 0).
    pub comp_mask: u64,
    /// The first CQE (sub-CQ 0; the sub-CQs follow each other).
    pub buffer: NonNull<u8>,
    /// Bytes per CQE: 16, or 32 with `EFA_CREATE_CQ_WITH_SGID` / extended entries.
    pub entry_size: u32,
    /// Entries per sub-CQ (the `cqe` the kernel returned, libefa's `ibvcq->cqe`).
    pub num_entries: u32,
    /// The CQ doorbell (arm and consumer index), `None` when the device gives CQs none.
    pub doorbell: Option<NonNull<u32>>,
}

impl Qp {
    /// Where this QP's send and receive queues live (`efadv_query_qp_wqs`): `(sq, rq)`.
    ///
    /// `EOPNOTSUPP` for a QP that is not EFA's.
    ///
    /// ```
    /// # let fabric = uverbs_efa_model::EfaFabric::new(1);
    /// # let ctx = fabric.add_device(Default::default()).open()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(16, None, 0)?;
    /// # let cap = uverbs::QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    /// # let qp = pd.efadv_create_qp_ex(&uverbs::QpInitAttr::new(uverbs::QpType::Srd, &cq, &cq, cap), &Default::default())?;
    /// let (sq, rq) = qp.efadv_query_qp_wqs()?;
    /// assert_eq!((sq.entry_size, sq.num_entries), (64, 8));
    /// assert_eq!((rq.entry_size, rq.num_entries), (16, 8));
    /// # Ok::<(), uverbs::Error>(())
    /// ```
    pub fn efadv_query_qp_wqs(&self) -> Result<(EfaWqAttr, EfaWqAttr)> {
        let Some(r) = self.ring.efa() else {
            return Err(Error::invalid(
                "efadv_query_qp_wqs",
                format!("qp {} on {}", self.qp_num(), self.pd().context().label()),
                Errno::OPNOTSUPP,
                "not an EFA QP",
            ));
        };
        let (sq, rq) = r.queues();
        let sc = sq.config();
        let rc = rq.config();
        Ok((
            EfaWqAttr {
                comp_mask: 0,
                buffer: sq.desc_ptr(),
                entry_size: sc.wqe_size,
                num_entries: sc.depth,
                doorbell: sq.doorbell_ptr(),
                max_batch: sc.max_batch_wr(),
                caps: if sc.req_id_64 {
                    EfaWqCaps::WITH_64_BIT_REQ_ID
                } else {
                    EfaWqCaps::empty()
                },
            },
            EfaWqAttr {
                comp_mask: 0,
                buffer: rq.ring_ptr(),
                entry_size: 16,
                num_entries: rc.desc_count,
                doorbell: rq.doorbell_ptr(),
                max_batch: rc.desc_count,
                caps: EfaWqCaps::empty(),
            },
        ))
    }
}

impl Cq {
    /// Where this CQ's entries live (`efadv_query_cq`). `EOPNOTSUPP` for a CQ that is not
    /// EFA's.
    pub fn efadv_query_cq(&self) -> Result<EfaCqAttr> {
        let Some(r) = self.ring.efa() else {
            return Err(Error::invalid(
                "efadv_query_cq",
                self.shared.label(),
                Errno::OPNOTSUPP,
                "not an EFA CQ",
            ));
        };
        let q = r.queue();
        let c = q.config();
        Ok(EfaCqAttr {
            comp_mask: 0,
            buffer: q.buf_ptr(),
            entry_size: c.entry_size,
            num_entries: c.sub_cq_depth,
            doorbell: q.doorbell_ptr(),
        })
    }
}

/// `struct efadv_sq_depth_attr`: the send queue attributes the depth depends on.
#[doc(alias = "efadv_sq_depth_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EfaSqDepthAttr {
    /// `EFADV_SQ_DEPTH_ATTR_*`.
    pub flags: EfaSqDepthFlags,
    /// SGEs per send WR (at most `max_sq_sge`).
    pub max_send_sge: u32,
    /// SGEs per RDMA WR (at most the device's `max_sge_rd`).
    pub max_rdma_sge: u32,
    /// Inline bytes per WR (at most `inline_buf_size_ex`).
    pub max_inline_data: u32,
}

/// `struct efadv_rq_depth_attr`.
#[doc(alias = "efadv_rq_depth_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EfaRqDepthAttr {
    /// SGEs per receive WR (1 to `max_rq_sge`).
    pub max_recv_sge: u32,
}

/// `rounddown_pow_of_two` of rdma-core's util (0 stays 0).
fn rounddown_pow_of_two(n: u32) -> u32 {
    if n == 0 {
        0
    } else {
        1 << (31 - n.leading_zeros())
    }
}

impl Context {
    /// The deepest SQ a QP with `attr` can have (`efadv_get_max_sq_depth`): the LLQ size over
    /// the WQE size the attributes need (128 bytes for more than 32 inline bytes or inline
    /// writes, else 64), rounded down to a power of two.
    ///
    /// `EINVAL` naming the limit when an attribute exceeds the device's; `EOPNOTSUPP` for a
    /// device that is not EFA.
    ///
    /// ```
    /// # let fabric = uverbs_efa_model::EfaFabric::new(1);
    /// # let ctx = fabric.add_device(Default::default()).open()?;
    /// use uverbs::EfaSqDepthAttr;
    /// let depth = ctx.efadv_get_max_sq_depth(&EfaSqDepthAttr { max_send_sge: 1, ..Default::default() })?;
    /// assert!(depth.is_power_of_two());
    /// # Ok::<(), uverbs::Error>(())
    /// ```
    pub fn efadv_get_max_sq_depth(&self, attr: &EfaSqDepthAttr) -> Result<u32> {
        let op = "efadv_get_max_sq_depth";
        let uctx = self.efa_ucontext(op)?;
        let dev = self.efa_query_raw(op)?;
        let max_sge_rd = self.efa_max_sge_rd(op)?;
        let inline_ex = u32::from(inline_buf_size_ex(&uctx));
        let bad = |why: String| {
            Err(Error::invalid(
                op,
                self.label().to_string(),
                Errno::INVAL,
                why,
            ))
        };
        if attr.max_send_sge > u32::from(dev.max_sq_sge) {
            return bad(format!(
                "max_send_sge {} > the device's max_sq_sge {}",
                attr.max_send_sge, dev.max_sq_sge
            ));
        }
        if attr.max_rdma_sge > max_sge_rd {
            return bad(format!(
                "max_rdma_sge {} > the device's max_sge_rd {}",
                attr.max_rdma_sge, max_sge_rd
            ));
        }
        if attr.max_inline_data > inline_ex {
            return bad(format!(
                "max_inline_data {} > the device's inline_buf_size_ex {}",
                attr.max_inline_data, inline_ex
            ));
        }
        let wqe = if attr.max_inline_data > EFA_IO_TX_DESC_INLINE_MAX_SIZE as u32
            || attr.flags.contains(EfaSqDepthFlags::INLINE_WRITE)
        {
            EFA_IO_TX_DESC_SIZE_128
        } else {
            EFA_IO_TX_DESC_SIZE_64
        };
        Ok(rounddown_pow_of_two(uctx.max_llq_size / wqe))
    }

    /// The deepest RQ a QP with `attr` can have (`efadv_get_max_rq_depth`): the device's
    /// `max_rq_wr` over `max_recv_sge` (each SGE takes one descriptor).
    ///
    /// `EINVAL` for `max_recv_sge` above `max_rq_sge`, or 0 (libefa would divide by it);
    /// `EOPNOTSUPP` for a device that is not EFA.
    pub fn efadv_get_max_rq_depth(&self, attr: &EfaRqDepthAttr) -> Result<u32> {
        let op = "efadv_get_max_rq_depth";
        self.efa_ucontext(op)?;
        let dev = self.efa_query_raw(op)?;
        if attr.max_recv_sge == 0 || attr.max_recv_sge > u32::from(dev.max_rq_sge) {
            return Err(Error::invalid(
                op,
                self.label().to_string(),
                Errno::INVAL,
                format!(
                    "max_recv_sge {} outside 1..={} (the device's max_rq_sge)",
                    attr.max_recv_sge, dev.max_rq_sge
                ),
            ));
        }
        Ok(dev.max_rq_wr / attr.max_recv_sge)
    }
}
