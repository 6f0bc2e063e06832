//! Receive queue (a QP's RQ or an SRQ): builds `struct rxe_recv_wqe` elements in the mmapped
//! ring. Receives need no kick: the kernel looks at the ring when a packet arrives.

use core::mem::size_of;

use uverbs_uapi::rxe::{RxeDmaInfo, RxeRecvWqe};
use uverbs_wr::{PostError, RecvWr, Sge};
use zerocopy::IntoBytes;

use crate::error::{RingError, WrError};
use crate::producer::Producer;
use crate::ring::Queue;

/// Offset of the SGE array in a receive WQE slot.
const RQ_DATA_OFFSET: usize = size_of::<RxeRecvWqe>();

/// The receive queue of an rxe QP, or an SRQ, over its mmapped ring.
///
/// Not `Sync`; take `&mut` to post (rdma-core holds the RQ spinlock across a post).
#[doc(alias = "rxe_wq")]
#[doc(alias = "ibv_srq")]
#[derive(Debug)]
pub struct RecvQueue {
    p: Producer,
    max_sge: u32,
}

impl RecvQueue {
    /// Wraps a mapped RQ/SRQ ring. `max_recv_sge` is what the kernel returned in the CREATE_QP
    /// or CREATE_SRQ response; fails if an element cannot hold that many SGEs.
    pub fn new(queue: Queue, max_recv_sge: u32) -> Result<Self, RingError> {
        let elem = queue.elem_size();
        if elem < RQ_DATA_OFFSET {
            return Err(RingError::ElemTooSmall {
                need: RQ_DATA_OFFSET,
                found: elem,
            });
        }
        let fits = u32::try_from((elem - RQ_DATA_OFFSET) / size_of::<Sge>()).unwrap_or(u32::MAX);
        if max_recv_sge > fits {
            return Err(RingError::CapsExceedSlot {
                cap: "max_recv_sge",
                requested: max_recv_sge,
                fits,
            });
        }
        Ok(RecvQueue {
            p: Producer::new(queue)?,
            max_sge: max_recv_sge,
        })
    }

    /// Maximum SGEs per receive.
    pub fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// The underlying ring.
    pub fn queue(&self) -> &Queue {
        &self.p.q
    }

    /// Receives written but not yet published.
    pub fn pending(&self) -> u32 {
        self.p.pending()
    }

    /// Receives the kernel has not consumed yet (published or not), after reloading its
    /// consumer index.
    pub fn outstanding(&mut self) -> Result<u32, RingError> {
        self.p.refresh()?;
        Ok(self.p.outstanding())
    }

    /// Validates and writes one receive into the next free slot, advancing the private producer
    /// index; visible to the kernel after [`Self::publish`]. On error the ring is unchanged.
    #[doc(alias = "ibv_post_recv")]
    #[doc(alias = "ibv_post_srq_recv")]
    #[doc(alias = "rxe_post_one_recv")]
    pub fn post(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), WrError> {
        if sges.len() > self.max_sge as usize {
            return Err(WrError::TooManySge {
                num_sge: sges.len(),
                max_sge: self.max_sge,
            });
        }
        let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
        let length = u32::try_from(total).map_err(|_| WrError::LengthOverflow { length: total })?;
        self.p.reserve()?;
        let wqe = RxeRecvWqe {
            wr_id,
            reserved: 0,
            padding: 0,
            dma: RxeDmaInfo {
                length,
                resid: length,
                cur_sge: 0,
                // sges.len() <= max_sge, a u32.
                num_sge: sges.len() as u32,
                sge_offset: 0,
                reserved: 0,
            },
        };
        let index = self.p.prod;
        let fits = self.p.q.write_slot(index, RQ_DATA_OFFSET, sges.as_bytes())
            && self.p.q.write_slot(index, 0, wqe.as_bytes());
        if !fits {
            // Unreachable: `new` proved max_sge SGEs fit one element.
            return Err(WrError::Ring(RingError::ElemTooSmall {
                need: RQ_DATA_OFFSET + core::mem::size_of_val(sges),
                found: self.p.q.elem_size(),
            }));
        }
        self.p.advance();
        Ok(())
    }

    /// Writes the receives of `wrs` in order ([`Self::post`] each) and publishes them with one
    /// `Release` store (`ibv_post_recv` of a list). The first refused work request stops the
    /// list and is named by its index; those before it are posted and published.
    #[doc(alias = "ibv_post_recv")]
    #[doc(alias = "ibv_post_srq_recv")]
    #[inline]
    pub fn post_list(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError<WrError>> {
        let mut r = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            if let Err(e) = self.post(wr.wr_id, wr.sg_list) {
                r = Err(PostError::new(i, e));
                break;
            }
        }
        self.publish();
        r
    }

    /// Makes every receive written so far visible to the kernel with one `Release` store of
    /// `producer_index`; returns how many were published. No syscall is needed afterwards.
    pub fn publish(&mut self) -> u32 {
        let upto = self.p.prod;
        self.p.publish_upto(upto)
    }
}
