//! The rxe half of an [`Srq`](crate::Srq): the receive ring the kernel made (mapped at create
//! and again after a resize) and posting to it. The generic `Srq` owns the kernel SRQ and its
//! commands and dispatches its rxe arm here. No unsafe code: the ring's new place after a
//! resize is an ordinary read of what the kernel wrote (see [`RxeSrqRing::remap`]).

use uverbs_rxe::RecvQueue;
use uverbs_uapi::rxe::{Mminfo, RxeModifySrqCmd};

use super::{map_rxe_queue, post_recv_list};
use crate::channel::Mapping;
use crate::context::Context;
use crate::error::{Errno, Error, Result};
use crate::wr::{post_errno, PostError, RecvWr};

/// The SRQ's ring: the view, then the mapping it points into (field order: unmapped last).
pub(crate) struct RxeSrqRing {
    rq: RecvQueue,
    map: Mapping,
}

impl RxeSrqRing {
    /// Maps the ring the kernel described in `mi` (the create response's driver data).
    pub(crate) fn new(
        ctx: &Context,
        mi: &Mminfo,
        max_sge: u32,
        op: &'static str,
        label: &dyn Fn() -> String,
    ) -> Result<Self> {
        let (map, q) = map_rxe_queue(ctx, mi, op, label, "SRQ")?;
        let rq = RecvQueue::new(q, max_sge)
            .map_err(|e| Error::invalid(op, label(), Errno::IO, format!("SRQ ring: {e}")))?;
        Ok(RxeSrqRing { rq, map })
    }

    /// Posts receive work requests: ring writes and one publish, no syscall, no lock.
    #[inline]
    pub(crate) fn post_recv(
        &mut self,
        wrs: &[RecvWr<'_>],
        label: &dyn Fn() -> String,
    ) -> Result<(), PostError> {
        let r = post_recv_list(&mut self.rq, wrs);
        self.rq.publish();
        r.map_err(|(index, e)| PostError {
            index,
            error: Error::invalid("post_srq_recv", label(), post_errno(&e), e.to_string()),
        })
    }

    /// The driver data of `ib_uverbs_modify_srq` on rxe: where the kernel writes the ring's
    /// new place if the modify resizes it. `mi` must stay alive until [`Self::remap`].
    pub(crate) fn modify_udata(mi: &mut Mminfo) -> RxeModifySrqCmd {
        RxeModifySrqCmd {
            mmap_info_addr: (mi as *mut Mminfo) as u64,
        }
    }

    /// After a resize: maps the ring at the place the kernel wrote into `mi` (given to
    /// [`Self::modify_udata`] for the modify just made) and replaces the old one.
    pub(crate) fn remap(
        &mut self,
        ctx: &Context,
        mi: &Mminfo,
        max_sge: u32,
        op: &'static str,
        label: &dyn Fn() -> String,
    ) -> Result<()> {
        // A plain read is right: the kernel wrote `mi` during the modify's write(2), through
        // the address `modify_udata` exposed (`as u64` of a `*mut` from the caller's `&mut`),
        // and that write(2) is a call the compiler must assume may write exposed memory
        // (`KernelChannel::write` calls libc's `write`, not rustix's `readonly` asm; a device
        // model writes it in Rust through the same address). This `&Mminfo` was made after it.
        let (map, q) = map_rxe_queue(ctx, mi, op, label, "resized SRQ")?;
        let rq = RecvQueue::new(q, max_sge)
            .map_err(|e| Error::invalid(op, label(), Errno::IO, format!("SRQ ring: {e}")))?;
        // Replace the view first, then the mapping it pointed into (unmapped last).
        self.rq = rq;
        self.map = map;
        Ok(())
    }
}
