//! The rxe half of an [`Srq`](crate::Srq): creating it (basic SRQs only: rxe has no XRC and
//! no tag matching), the receive ring the kernel made (mapped at create and again after a
//! resize) and posting to it. The generic `Srq` owns the kernel SRQ and its commands and
//! dispatches here. No unsafe code: the ring's new place after a resize is an ordinary read of
//! what the kernel wrote (see [`RxeSrq::modify`](SrqOps::modify)).

use uverbs_rxe::RecvQueue;
use uverbs_uapi::rxe::{Mminfo, RxeCreateSrqResp, RxeModifySrqCmd};
use uverbs_uapi::write::{IbUverbsModifySrq, IB_USER_VERBS_CMD_MODIFY_SRQ};
use zerocopy::IntoBytes;

use super::map_rxe_queue;
use crate::channel::Mapping;
use crate::context::{legacy_cmd, Context};
use crate::error::{Errno, Error, Result};
use crate::pd::Pd;
use crate::provider::{SrqOps, SrqRing};
use crate::srq::{Srq, SrqAttrMask, SrqRequest, SrqType};
use crate::wr::{PostError, RecvWr};

/// `ibv_create_srq(_ex)` on rxe: a basic SRQ, its ring in the driver response.
pub(crate) fn create_srq(pd: &Pd, req: SrqRequest<'_>) -> Result<Srq> {
    let op = "create_srq";
    if req.srq_type != SrqType::Basic {
        return Err(Error::invalid(
            op,
            pd.label(),
            Errno::OPNOTSUPP,
            format!(
                "rxe does not support {:?} SRQs (it has basic SRQs only: no XRC, no tag matching)",
                req.srq_type
            ),
        ));
    }
    let (obj, cmd) = pd.create_srq_object(req, &[], std::mem::size_of::<RxeCreateSrqResp>())?;
    let drv: RxeCreateSrqResp = cmd.driver_response_as();
    let ring = RxeSrq::new(pd.context(), &drv.mi, obj.max_sge(), op, &|| obj.label())?;
    Srq::assemble(obj, SrqRing::Rxe(ring), drv.srq_num)
}

/// The SRQ's ring: the view, then the mapping it points into (field order: unmapped last).
pub(crate) struct RxeSrq {
    rq: RecvQueue,
    map: Mapping,
}

impl RxeSrq {
    /// Maps the ring the kernel described in `mi` (the create response's driver data).
    fn new(
        ctx: &Context,
        mi: &Mminfo,
        max_sge: u32,
        op: &'static str,
        label: &dyn Fn() -> String,
    ) -> Result<Self> {
        let (map, q) = map_rxe_queue(ctx, mi, op, label, "SRQ")?;
        let rq = RecvQueue::new(q, max_sge)
            .map_err(|e| Error::provider(op, label(), e).with_reason(format!("SRQ ring: {e}")))?;
        Ok(RxeSrq { rq, map })
    }
}

impl SrqOps for RxeSrq {
    /// Ring writes and one publish, no syscall, no lock.
    #[inline]
    fn post_recv(
        &mut self,
        wrs: &[RecvWr<'_>],
        label: &dyn Fn() -> String,
    ) -> Result<(), PostError> {
        self.rq
            .post_list(wrs)
            .map_err(|e| e.map(|e| Error::provider("post_srq_recv", label(), e)))
    }

    /// MODIFY_SRQ with rxe's driver data, the address of an `rxe_mmap_info` where the kernel
    /// writes the ring's new place if the modify resizes it; then, on a resize, the ring is
    /// mapped there and replaces the old one.
    fn modify(
        &mut self,
        ctx: &Context,
        req: &IbUverbsModifySrq,
        mask: SrqAttrMask,
        max_sge: u32,
        label: &dyn Fn() -> String,
    ) -> Result<()> {
        let op = "modify_srq";
        let mut mi = Mminfo::default();
        let drv = RxeModifySrqCmd {
            mmap_info_addr: (&mut mi as *mut Mminfo) as u64,
        };
        let mut cmd = legacy_cmd(IB_USER_VERBS_CMD_MODIFY_SRQ, req, drv.as_bytes(), 0, 0);
        ctx.write_cmd(op, label, &mut cmd)?;
        if !mask.contains(SrqAttrMask::MAX_WR) {
            return Ok(());
        }
        // A plain read is right: the kernel wrote `mi` during the write(2) above, through the
        // address exposed in `drv` (`as u64` of a `*mut` from a `&mut`), and that write(2) is a
        // call the compiler must assume may write exposed memory (`KernelChannel::write` calls
        // libc's `write`, not rustix's `readonly` asm; a device model writes it in Rust through
        // the same address).
        let (map, q) = map_rxe_queue(ctx, &mi, op, label, "resized SRQ")?;
        let rq = RecvQueue::new(q, max_sge)
            .map_err(|e| Error::provider(op, label(), e).with_reason(format!("SRQ ring: {e}")))?;
        // Replace the view first, then the mapping it pointed into (unmapped last).
        self.rq = rq;
        self.map = map;
        Ok(())
    }
}
