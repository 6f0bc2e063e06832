//! The rxe half of a [`Cq`](crate::Cq): the CQ ring the kernel made, mapped at create and
//! again after a resize, which the provider's queue polls into [`Wc`]s; arming is the kernel's
//! REQ_NOTIFY_CQ command. The generic `Cq` owns the kernel object and dispatches here.

use uverbs_rxe::{CompletionQueue, PollCursor};
use uverbs_uapi::rxe::RxeResizeCqResp;
use zerocopy::FromBytes;

use crate::channel::{MapKind, Mapping};
use crate::context::Context;
use crate::cq::CqShared;
use crate::error::{Errno, Error, Result};
use crate::provider::{CqOps, CursorOps};
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};

/// The CQ ring: the provider's queue, then the mapping it points into (field order: unmapped
/// after the queue is gone).
pub(crate) struct RxeCq {
    cq: CompletionQueue,
    _map: Mapping,
}

impl RxeCq {
    /// Maps the ring the kernel described (`offset`, `size`: the `rxe_mmap_info` of the create
    /// or resize response) for `op` on the CQ `shared`.
    pub(crate) fn map(
        ctx: &Context,
        shared: &CqShared,
        offset: u64,
        size: u64,
        op: &'static str,
    ) -> Result<RxeCq> {
        let len = usize::try_from(size).map_err(|_| {
            Error::invalid(
                op,
                shared.label(),
                Errno::INVAL,
                "ring size does not fit in memory",
            )
        })?;
        let map = ctx
            .channel()
            .mmap(offset, len, MapKind::ReadWrite)
            .map_err(|e| {
                Error::os(op, shared.label(), e).with_reason("mmap of the CQ ring failed")
            })?;
        let bad = |e: uverbs_rxe::RingError| {
            Error::provider(op, shared.label(), e)
                .with_reason(format!("bad CQ ring from the kernel: {e}"))
        };
        #[allow(unsafe_code)]
        // SAFETY: `map` is exactly this CQ's ring (the kernel gave its offset and size for this
        // CQ); the RxeCq keeps `map` alive as long as the queue (field order), and nothing else
        // in the process accesses it.
        let queue =
            unsafe { uverbs_rxe::Queue::from_raw(map.as_ptr(), map.len(), None) }.map_err(bad)?;
        let cq = CompletionQueue::new(queue).map_err(bad)?;
        Ok(RxeCq { cq, _map: map })
    }
}

impl CqOps for RxeCq {
    type Cursor<'a> = RxeCursor<'a>;

    /// The provider's poll, inline in the caller's loop (one load of the kernel's index, none
    /// when enough are known ready; one completion taken inline, more out of line).
    #[inline(always)]
    fn poll<const NET_IMM: bool>(&mut self, shared: &CqShared, wcs: &mut [Wc]) -> Result<usize> {
        let r = if NET_IMM {
            self.cq.poll_net_imm(wcs)
        } else {
            self.cq.poll(wcs)
        };
        match r {
            Ok(n) => Ok(n),
            Err(e) => Err(ring_error(shared, e)),
        }
    }

    #[inline(always)]
    fn poll_ready_one_net_imm(&mut self, wc: &mut Wc) -> bool {
        self.cq.poll_ready_one_net_imm(wc)
    }

    /// Not rxe's C entry (its `poll_cq` takes `poll_ready_one_net_imm`, then `poll`): out
    /// of line, so the EFA entry that inlines this dispatch carries none of rxe's poll.
    #[inline(never)]
    fn poll_net_imm_inline_one(
        &mut self,
        shared: &std::sync::Arc<CqShared>,
        wcs: &mut [Wc],
    ) -> Result<usize> {
        self.poll::<true>(shared, wcs)
    }

    #[inline]
    fn start_poll<'a>(&'a mut self, shared: &'a CqShared) -> Result<Option<RxeCursor<'a>>> {
        match self.cq.start_poll() {
            Ok(Some(cur)) => Ok(Some(RxeCursor { cur, shared })),
            Ok(None) => Ok(None),
            Err(e) => Err(ring_error(shared, e)),
        }
    }

    /// The kernel's REQ_NOTIFY_CQ (rxe writes the event when it next adds a CQE).
    fn req_notify(&mut self, shared: &CqShared, solicited_only: bool) -> Result<()> {
        shared.req_notify_command(solicited_only)
    }

    /// RESIZE_CQ: the kernel moves the queue to a new buffer and says where in the driver
    /// response; the new ring is mapped, then the old one dropped.
    fn resize(&mut self, shared: &CqShared, cqe: u32) -> Result<u32> {
        let op = "resize_cq";
        let (got, cmd) = shared.resize_command(cqe, std::mem::size_of::<RxeResizeCqResp>())?;
        let drv = RxeResizeCqResp::read_from_prefix(cmd.driver_response())
            .map(|(r, _)| r)
            .unwrap_or_default();
        *self = RxeCq::map(
            &shared.ctx,
            shared,
            drv.mi.offset,
            u64::from(drv.mi.size),
            op,
        )?;
        Ok(got)
    }
}

/// The error of a CQ ring whose producer index the kernel could not have written.
#[cold]
#[inline(never)]
fn ring_error(shared: &CqShared, e: uverbs_rxe::RingError) -> Error {
    Error::provider("poll_cq", shared.label(), e).with_reason(format!("CQ ring corrupt: {e}"))
}

/// An open extended poll of an rxe CQ: the provider's lazy cursor (each reader loads just its
/// field from the ring slot), and the CQ it names in an error.
pub(crate) struct RxeCursor<'a> {
    cur: PollCursor<'a>,
    shared: &'a CqShared,
}

impl CursorOps for RxeCursor<'_> {
    #[inline(always)]
    fn shared(&self) -> &CqShared {
        self.shared
    }
    /// Inline, and small: when the next completion is known ready before the wrap, a pointer
    /// add and a count; the rest out of line.
    #[inline(always)]
    fn next(&mut self) -> Result<bool> {
        if self.cur.step_in_run() {
            return Ok(true);
        }
        self.cur
            .advance_slow()
            .map_err(|e| ring_error(self.shared, e))
    }
    /// A pointer add and a count.
    #[inline(always)]
    fn next_ready(&mut self) -> bool {
        self.cur.step_in_run()
    }
    #[inline(always)]
    fn wr_id(&self) -> u64 {
        self.cur.wr_id()
    }
    #[inline(always)]
    fn status(&self) -> WcStatus {
        self.cur.status()
    }
    #[inline(always)]
    fn opcode(&self) -> WcOpcode {
        self.cur.opcode()
    }
    #[inline(always)]
    fn vendor_err(&self) -> u32 {
        self.cur.vendor_err()
    }
    #[inline(always)]
    fn byte_len(&self) -> u32 {
        self.cur.byte_len()
    }
    #[inline(always)]
    fn imm_data(&self) -> u32 {
        self.cur.imm_data()
    }
    #[inline(always)]
    fn invalidated_rkey(&self) -> u32 {
        self.cur.invalidated_rkey()
    }
    #[inline(always)]
    fn qp_num(&self) -> u32 {
        self.cur.qp_num()
    }
    #[inline(always)]
    fn src_qp(&self) -> u32 {
        self.cur.src_qp()
    }
    #[inline(always)]
    fn wc_flags(&self) -> WcFlags {
        self.cur.wc_flags()
    }
    #[inline(always)]
    fn slid(&self) -> u16 {
        self.cur.slid()
    }
    #[inline(always)]
    fn sl(&self) -> u8 {
        self.cur.sl()
    }
    #[inline(always)]
    fn dlid_path_bits(&self) -> u8 {
        self.cur.dlid_path_bits()
    }
    #[inline(always)]
    fn pkey_index(&self) -> u16 {
        self.cur.pkey_index()
    }
    #[inline]
    fn wc(&self) -> Wc {
        self.cur.wc()
    }
}
