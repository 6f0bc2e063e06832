//! Queue depth limits (`efadv_get_max_sq_depth`, `efadv_get_max_rq_depth`): the deepest SQ or
//! RQ a QP with given attributes can have, computed from the context's driver data exactly as
//! libefa does (`efa_calc_sq_max_depth`, `efa_calc_rq_max_depth`), so a caller sizes its QP
//! before creating it.

use bitflags::bitflags;
use uverbs_efa::defs::EFA_IO_TX_DESC_INLINE_MAX_SIZE;

/// Bytes of a send WQE without and with the extended inline buffer (`efa_io_tx_wqe`,
/// `efa_io_tx_wqe_128`).
const EFA_IO_TX_DESC_SIZE_64: u32 = 64;
const EFA_IO_TX_DESC_SIZE_128: u32 = 128;

use crate::context::Context;
use crate::efa::device::inline_buf_size_ex;
use crate::error::{Errno, Error, Result};

bitflags! {
    /// `EFADV_SQ_DEPTH_ATTR_*`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EfaSqDepthFlags: u32 {
        /// `EFADV_SQ_DEPTH_ATTR_INLINE_WRITE`: the QP will post inline RDMA writes (128-byte
        /// WQEs).
        const INLINE_WRITE = 1 << 0;
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
        let max_sge_rd = self.query_device_ex()?.orig_attr.max_sge_rd;
        let inline_ex = u32::from(inline_buf_size_ex(&uctx));
        let bad = |why: String| Err(Error::invalid(op, self.label().to_string(), Errno::INVAL, why));
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
