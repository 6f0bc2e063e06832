//! The rxe half of a [`Qp`](crate::Qp): creating it (the generic create ioctl, no driver
//! request, the `rxe_create_qp_resp` rings in the answer), its rings (the SQ and, without an
//! SRQ, the RQ, mmapped from the uverbs fd), the AHs queued UD sends name, the send doorbell
//! (a `write()` of `IB_USER_VERBS_CMD_POST_SEND` with zero work requests, prebuilt at creation
//! so a post allocates nothing and calls nothing through a trait object), and rxe's rules for
//! the QP's state. The generic `Qp` owns the kernel QP and dispatches here.
//!
//! Unsafe code here: borrowing the uverbs fd number for the doorbell write.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

use uverbs_rxe::{RecvQueue, SendQueue, SendQueueCaps, WrError};
use uverbs_uapi::rxe::RxeCreateQpResp;
use uverbs_uapi::write::{
    IbUverbsCmdHdr, IbUverbsModifyQp, IbUverbsPostSend, IbUverbsPostSendResp, IbUverbsSendWr,
    IB_USER_VERBS_CMD_POST_SEND,
};
use zerocopy::IntoBytes;

use super::map_rxe_queue;
use crate::ah::{Ah, AhHold};
use crate::channel::{Mapping, WriteCmd};
use crate::context::Context;
use crate::error::{Errno, Error, Result};
use crate::pd::Pd;
use crate::provider::{Fast, QpOps, QpRing, Step};
use crate::qp::{
    modify_command, queried_cap, state_error, Qp, QpAttrMask, QpCap, QpInitAttr, QpInner, QpState,
    QpType, SendOpsFlags,
};
use crate::wr::{PostError, RecvWr, SendFlags, SendWr, UdDest, WrOp};

/// `ibv_create_qp(_ex)` on rxe: RC, UC and UD (the kernel answers for RAW_PACKET and XRC, which
/// rxe refuses; SRD is refused here).
pub(crate) fn create_qp(
    pd: &Pd,
    attr: &QpInitAttr<'_>,
    send_ops: Option<SendOpsFlags>,
) -> Result<Qp> {
    let op = "create_qp";
    if attr.qp_type == QpType::Srd {
        return Err(Error::invalid(
            op,
            pd.label(),
            Errno::OPNOTSUPP,
            "SRD is an EFA transport; rxe has RC, UC and UD",
        ));
    }
    if let Some(ops) = send_ops {
        if !wr_ops_of(attr.qp_type).contains(ops) {
            return Err(Error::invalid(
                op,
                pd.label(),
                Errno::OPNOTSUPP,
                format!(
                    "send_ops_flags {:?} has an operation rxe does not post on a {:?} QP",
                    ops - wr_ops_of(attr.qp_type),
                    attr.qp_type
                ),
            ));
        }
    }
    let mut drv = RxeCreateQpResp::default();
    let (inner, mut cap) = pd.create_qp_object(attr, &[], drv.as_mut_bytes())?;
    // From here `inner` destroys the kernel QP if anything fails.
    if matches!(attr.qp_type, QpType::Rc | QpType::Uc | QpType::Ud) {
        cap = queried_cap(&inner)?;
    }
    let ring = qp_ring(pd.context(), op, attr, &inner, &drv, &cap)?;
    Ok(Qp::assemble(QpRing::Rxe(ring), inner, attr, cap, send_ops))
}

/// The `wr_*` operations rxe posts on a QP type (rdma-core's rxe `check_qp_init_attr` has the
/// same sets; none on other types).
fn wr_ops_of(t: QpType) -> SendOpsFlags {
    use SendOpsFlags as F;
    match t {
        QpType::Rc => F::all(),
        QpType::Uc => {
            F::RDMA_WRITE
                | F::RDMA_WRITE_WITH_IMM
                | F::SEND
                | F::SEND_WITH_IMM
                | F::BIND_MW
                | F::SEND_WITH_INV
        }
        QpType::Ud => F::SEND | F::SEND_WITH_IMM,
        _ => F::empty(),
    }
}

/// Maps the rings of the rxe QP `inner` just created (`drv` is the driver's part of the
/// create response, `cap` the caps it was made with) and prebuilds its doorbell.
fn qp_ring(
    ctx: &Context,
    op: &'static str,
    attr: &QpInitAttr<'_>,
    inner: &QpInner,
    drv: &RxeCreateQpResp,
    cap: &QpCap,
) -> Result<RxeQp> {
    let qlabel = || inner.label();
    let (sq_map, sq_q) = map_rxe_queue(ctx, &drv.sq_mi, op, &qlabel, "send queue")?;
    let sq = SendQueue::new(
        sq_q,
        SendQueueCaps {
            qp_type: attr.qp_type,
            domain: crate::wr::pd_id(&inner.pd),
            max_send_sge: cap.max_send_sge,
            max_inline_data: cap.max_inline_data,
        },
    )
    .map_err(|e| Error::provider(op, inner.label(), e).with_reason(format!("send queue: {e}")))?;
    let (rq, rq_map) = if attr.srq.is_none() {
        let (m, q) = map_rxe_queue(ctx, &drv.rq_mi, op, &qlabel, "receive queue")?;
        let rq = RecvQueue::new(q, cap.max_recv_sge).map_err(|e| {
            Error::provider(op, inner.label(), e).with_reason(format!("receive queue: {e}"))
        })?;
        (Some(rq), Some(m))
    } else {
        (None, None)
    };
    let Some(dbfd) = ctx.channel().doorbell_fd() else {
        return Err(Error::invalid(
            op,
            inner.label(),
            Errno::OPNOTSUPP,
            "the command channel has no fd for the rxe send doorbell",
        ));
    };
    let slots = sq.queue().num_slots() as usize;
    // SAFETY: `dbfd` is the doorbell fd of the channel of `ctx`, which the `Channel` contract
    // (its `Safety` section, item 2) keeps open until the channel is dropped; the QP whose ring
    // this is holds a clone of `ctx` (through its PD and its kernel object), hence the channel,
    // for as long as the ring, and so the doorbell, exists (the ring never leaves its QP).
    let db = unsafe { Doorbell::new(dbfd, inner.handle()) };
    Ok(RxeQp {
        db,
        state: QpState::Reset,
        sq,
        rq,
        // Only UD sends carry an AH (the ring refuses one on other QP types): other
        // QPs keep no per-slot table, so an RC QP costs no more heap than rdma-core's.
        ah_slots: if attr.qp_type == QpType::Ud {
            (0..slots).map(|_| None).collect()
        } else {
            Box::default()
        },
        _sq_map: sq_map,
        _rq_map: rq_map,
    })
}

/// The prebuilt rxe send doorbell: `IB_USER_VERBS_CMD_POST_SEND` with zero WRs.
struct Doorbell {
    /// The uverbs fd. Not `'static` in truth: it stays open for as long as this doorbell exists
    /// (the contract of `new`; for a QP, the doorbell fd of the channel of the Context the QP
    /// holds); private, and used only by `ring`. Kept borrowed (validated once, in `new`) so
    /// that a post does not re-check the raw number.
    fd: BorrowedFd<'static>,
    req: [u8; DB_LEN],
    /// Where the kernel writes `bad_wr` (`response` inside `req` holds this address). Never
    /// read: with zero WRs there is nothing to report.
    ///
    /// A heap block owned through this raw pointer (from `Box::into_raw`, freed in `Drop`),
    /// not a `Box`: a `Box` asserts unique access whenever it is moved, which would
    /// invalidate the address the kernel writes through (`req`) each time the QP moves. A raw
    /// pointer asserts nothing, and the block itself never moves.
    resp: NonNull<IbUverbsPostSendResp>,
}

// SAFETY: `resp` is owned by this Doorbell alone (allocated in `new`, freed in `drop`); Rust
// code never reads or writes it, only the kernel does, during a `write()` made by `ring`,
// which needs `&self` of the QP that owns the Doorbell: whichever thread has the QP is the one
// whose syscall writes it. Nothing about it is tied to the creating thread.
unsafe impl Send for Doorbell {}

const DB_LEN: usize =
    std::mem::size_of::<IbUverbsCmdHdr>() + std::mem::size_of::<IbUverbsPostSend>();

impl Doorbell {
    /// The doorbell of the QP with kernel handle `qp_handle`: [`Doorbell::ring`] writes its
    /// prebuilt POST_SEND to `fd`.
    ///
    /// # Safety
    /// `fd` must stay open, as the same file, for as long as the returned `Doorbell` exists:
    /// `ring` writes to its number long after this borrow ends, and a number closed meanwhile
    /// may have been reused for another file. For a QP, `fd` is the doorbell fd of the channel
    /// of a context the QP holds.
    unsafe fn new(fd: BorrowedFd<'_>, qp_handle: u32) -> Self {
        // SAFETY: `fd` is open now (it is borrowed) and stays open, as the same file, for as
        // long as this doorbell exists (the caller's contract). The `'static` borrow never
        // leaves this struct, which writes to it only in `ring`.
        let fd = unsafe { BorrowedFd::borrow_raw(fd.as_raw_fd()) };
        let resp = NonNull::from(Box::leak(Box::new(IbUverbsPostSendResp::default())));
        let hdr = IbUverbsCmdHdr {
            command: IB_USER_VERBS_CMD_POST_SEND,
            in_words: (DB_LEN / 4) as u16,
            out_words: (std::mem::size_of::<IbUverbsPostSendResp>() / 4) as u16,
        };
        let cmd = IbUverbsPostSend {
            response: resp.as_ptr() as u64,
            qp_handle,
            wr_count: 0,
            sge_count: 0,
            wqe_size: std::mem::size_of::<IbUverbsSendWr>() as u32,
        };
        let mut req = [0u8; DB_LEN];
        req[..8].copy_from_slice(hdr.as_bytes());
        req[8..].copy_from_slice(cmd.as_bytes());
        Doorbell { fd, req, resp }
    }

    /// One `write()`: the kernel runs the SQ (rdma-core's `post_send_db`).
    #[inline]
    fn ring(&self) -> std::result::Result<(), Errno> {
        loop {
            match rustix::io::write(self.fd, &self.req) {
                Ok(n) if n == DB_LEN => return Ok(()),
                Ok(_) => return Err(Errno::IO),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // SAFETY: `resp` came from `Box::into_raw` (via `Box::leak`) in `new` and is freed
        // only here, once; the kernel writes it only during `ring`, which cannot run any more
        // (we have `&mut self`).
        drop(unsafe { Box::from_raw(self.resp.as_ptr()) });
    }
}

/// The rxe rings of a QP, the doorbell, and the QP's state (for rxe's rules of when it may
/// post).
pub(crate) struct RxeQp {
    sq: SendQueue,
    rq: Option<RecvQueue>,
    db: Doorbell,
    state: QpState,
    /// For each SQ slot, the AH of the UD send last written there: kept until the slot is
    /// reused, which the ring allows only after the kernel consumed that send.
    ah_slots: Box<[Option<AhHold>]>,
    _sq_map: Mapping,
    _rq_map: Option<Mapping>,
}

/// The doorbell `write()` after `posted` WQEs were published failed with `e`.
#[cold]
#[inline(never)]
fn doorbell_error(inner: &QpInner, posted: usize, e: Errno) -> PostError {
    PostError {
        index: posted,
        error: Error::os("post_send", inner.label(), e).with_reason(format!(
            "the doorbell write failed; {posted} work request(s) are queued and run on the \
             next successful post"
        )),
    }
}

/// The errno that stands for a ring-layer refusal (rdma-core's rxe returns these).
pub(crate) fn post_errno(e: &WrError) -> Errno {
    match e {
        WrError::QueueFull { .. } => Errno::NOMEM,
        WrError::Ring(_) => Errno::IO,
        WrError::OpcodeNotSupported { .. } => Errno::OPNOTSUPP,
        _ => Errno::INVAL,
    }
}

#[cold]
fn ring_error(inner: &QpInner, op: &'static str, e: WrError) -> Error {
    Error::provider(op, inner.label(), e)
}

impl RxeQp {
    /// Posts `wrs` (the rxe arm of [`Qp::post_send`](crate::Qp::post_send), after its state
    /// check). One WR that [`SendQueue::post_fast`] takes (SGEs on a connected QP, the
    /// latency case) is posted, published and rung here with nothing else live; anything
    /// else goes to [`Self::post_send_list`] (a tail call).
    ///
    /// `wrs` comes before `inner` so that [`Qp::post_send`](crate::Qp::post_send)'s own
    /// arguments (the slice) stay in the registers they arrived in for the tail call.
    #[inline(never)]
    fn post_send_ready(&mut self, wrs: &[SendWr<'_>], inner: &QpInner) -> Result<(), PostError> {
        if let [wr] = wrs {
            if self.post_fast(wr) {
                self.sq.publish();
                return match self.db.ring() {
                    Ok(()) => Ok(()),
                    Err(e) => Err(doorbell_error(inner, 1, e)),
                };
            }
        }
        self.post_send_list(inner, wrs)
    }

    /// [`QpOps::ring_staged`] of at least one staged WQE: publish, doorbell.
    #[inline(never)]
    fn ring_staged_now(&mut self, inner: &QpInner, staged: usize) -> Result<(), PostError> {
        self.sq.publish();
        match self.db.ring() {
            Ok(()) => Ok(()),
            Err(e) => Err(doorbell_error(inner, staged, e)),
        }
    }

    /// Posts `wrs`: the WRs [`SendQueue::post_fast`] takes straight into the ring, and from
    /// the first one it does not, the rest through [`Self::post_send_general`], which posts or
    /// refuses each with its error. One publish and one doorbell per call.
    #[inline(never)]
    fn post_send_list(&mut self, inner: &QpInner, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        let mut posted = 0usize;
        for wr in wrs {
            if !self.post_fast(wr) {
                break;
            }
            posted += 1;
        }
        if posted != wrs.len() {
            return self.post_send_general(inner, wrs, posted);
        }
        if posted == 0 {
            return Ok(());
        }
        self.sq.publish();
        match self.db.ring() {
            Ok(()) => Ok(()),
            Err(e) => Err(doorbell_error(inner, posted, e)),
        }
    }

    /// [`SendQueue::post_fast`] of `wr`: `true` if posted. A WR with a destination (refused on
    /// a connected QP, and a UD QP takes no fast post) or inline data is left to the general
    /// path, which also keeps the AH slots of a UD QP.
    #[inline(always)]
    fn post_fast(&mut self, wr: &SendWr<'_>) -> bool {
        self.sq.post_fast(wr)
    }

    /// Posts `wrs[posted..]` one by one with every check of [`SendQueue::post_parts`], after
    /// `wrs[..posted]` were written by the fast path; then publishes all of them and rings the
    /// doorbell once.
    #[inline(never)]
    fn post_send_general(
        &mut self,
        inner: &QpInner,
        wrs: &[SendWr<'_>],
        mut posted: usize,
    ) -> Result<(), PostError> {
        // The WRs before the first refused one are posted: `posted` is also the index of the
        // refused one (`bad_wr`).
        let mut failed = None;
        for wr in wrs.iter().skip(posted) {
            if let Err(e) = self.post_one(inner, wr) {
                failed = Some(e);
                break;
            }
            posted += 1;
        }
        if posted > 0 {
            self.sq.publish();
            if let Err(e) = self.db.ring() {
                return Err(doorbell_error(inner, posted, e));
            }
        }
        match failed {
            None => Ok(()),
            Some(error) => Err(PostError {
                index: posted,
                error,
            }),
        }
    }

    /// Posts one WR: the provider reads it where it is (the shared `uverbs_wr` vocabulary,
    /// `Sge` in the `ibv_sge` layout the WQE holds) and checks it against the QP's caps, type
    /// and PD.
    #[inline(always)]
    fn post_one(&mut self, inner: &QpInner, wr: &SendWr<'_>) -> Result<()> {
        let slot = self.sq.producer_index();
        self.sq
            .post(wr)
            .map_err(|e| ring_error(inner, "post_send", e))?;
        // Only a UD QP has a per-slot table (the ring refuses a destination on any other QP),
        // so on RC and UC this is one test.
        if !self.ah_slots.is_empty() {
            self.note_ah(slot, wr.ud.as_ref().map(|d| d.ah()));
        }
        Ok(())
    }

    /// Records the AH (or none) of the WQE just written, the one in the slot behind the
    /// producer index (the `wr_*` builders' WQE).
    #[inline]
    fn note_slot_behind(&mut self, ah: Option<&Ah>) {
        if !self.ah_slots.is_empty() {
            self.note_ah(self.sq.producer_index().wrapping_sub(1), ah);
        }
    }

    /// Keeps a clone of `ah` (or none) in the entry of SQ slot `index & index_mask` until the
    /// slot is reused, which the ring allows only after the kernel consumed that send.
    #[inline]
    fn note_ah(&mut self, index: u32, ah: Option<&Ah>) {
        let slot = (index & self.sq.queue().index_mask()) as usize;
        if let Some(s) = self.ah_slots.get_mut(slot) {
            // Replacing the old value drops the AH of a send the kernel already consumed (the
            // ring let us reuse its slot).
            *s = ah.map(AhHold::new);
        }
    }

    fn post_recv_list(&mut self, inner: &QpInner, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let op = "post_recv";
        let Some(rq) = self.rq.as_mut() else {
            return Err(PostError {
                index: 0,
                error: Error::invalid(
                    op,
                    inner.label(),
                    Errno::INVAL,
                    "the QP uses an SRQ (or has no receive queue): post to the SRQ",
                ),
            });
        };
        rq.post_list(wrs)
            .map_err(|e| e.map(|e| Error::provider(op, inner.label(), e)))
    }

    /// The refusal of a send on an rxe QP before RTS (out of line: no register of the
    /// posting path is kept for it).
    #[cold]
    #[inline(never)]
    fn post_send_not_ready(&self, inner: &QpInner) -> Result<(), PostError> {
        Err(PostError {
            index: 0,
            error: state_error(
                inner,
                self.state,
                "post_send",
                "sends need RTS (or SQD/SQE/ERR)",
            ),
        })
    }

    /// Whether rxe lets the QP send in its state: RTS, SQD, SQE, ERR (whose sends are flushed).
    #[inline(always)]
    fn may_send(&self) -> bool {
        !matches!(self.state, QpState::Reset | QpState::Init | QpState::Rtr)
    }
}

impl QpOps for RxeQp {
    /// rxe has no inline path: a post ends in a doorbell `write()`, whose registers would
    /// crowd the inline paths of the caller; its whole post is one tail call away.
    #[inline(always)]
    fn post_send_fast(&mut self, _wrs: &[SendWr<'_>]) -> Fast {
        Fast::Direct
    }

    /// The state check; the post ([`RxeQp::post_send_ready`]: one WR that
    /// [`SendQueue::post_fast`] takes posted, published and rung, else the list).
    #[inline(always)]
    fn post_send(&mut self, wrs: &[SendWr<'_>], inner: &QpInner) -> Result<(), PostError> {
        if !self.may_send() {
            return self.post_send_not_ready(inner);
        }
        self.post_send_ready(wrs, inner)
    }

    /// [`SendQueue::post_fast_parts`] on a QP that may send: the WQE written, not published.
    #[inline(always)]
    fn stage_send(&mut self, wr_id: u64, op: &WrOp, flags: SendFlags, sges: &[crate::Sge]) -> bool {
        self.may_send() && self.sq.post_fast_parts(wr_id, op, flags, sges)
    }

    /// One publish and one doorbell for the staged WQEs, out of line (as
    /// [`RxeQp::post_send_ready`]'s): nothing for none.
    #[inline(always)]
    fn ring_staged(&mut self, inner: &QpInner, staged: usize) -> Result<(), PostError> {
        if staged == 0 {
            return Ok(());
        }
        self.ring_staged_now(inner, staged)
    }

    #[inline]
    fn post_recv(&mut self, wrs: &[RecvWr<'_>], inner: &QpInner) -> Result<(), PostError> {
        if self.state == QpState::Reset {
            return Err(PostError {
                index: 0,
                error: state_error(
                    inner,
                    self.state,
                    "post_recv",
                    "receives need INIT or later",
                ),
            });
        }
        self.post_recv_list(inner, wrs)
    }

    fn state(&self) -> QpState {
        self.state
    }

    fn set_state(&mut self, state: QpState) {
        self.state = state;
    }

    fn modify_command(
        &self,
        base: &IbUverbsModifyQp,
        mask: QpAttrMask,
        rate_limit: u32,
    ) -> std::result::Result<WriteCmd, String> {
        modify_command(base, mask, rate_limit)
    }

    fn wr_start(&mut self, inner: &QpInner) -> Result<()> {
        let op = "wr_start";
        if !self.may_send() {
            return Err(state_error(
                inner,
                self.state,
                op,
                "sends need RTS (or SQD/SQE/ERR)",
            ));
        }
        self.sq.wr_start().map_err(|e| ring_error(inner, op, e))
    }

    /// A WQE built in the open batch, its slot's AH forgotten (the destination, if any,
    /// comes with `wr_set_ud_addr`).
    fn wr_op(&mut self, wr_id: u64, flags: SendFlags, op: WrOp) -> Step {
        self.sq.wr_op(wr_id, flags, op)?;
        self.note_slot_behind(None);
        Ok(())
    }

    fn wr_set_sge(&mut self, lkey: u32, addr: u64, length: u32) -> Step {
        Ok(self.sq.wr_set_sge(lkey, addr, length)?)
    }

    fn wr_set_sge_list(&mut self, sges: &[crate::Sge]) -> Step {
        Ok(self.sq.wr_set_sge_list(sges)?)
    }

    fn wr_set_inline_data(&mut self, data: &[u8]) -> Step {
        Ok(self.sq.wr_set_inline_data(data)?)
    }

    /// The destination of the WQE just built, which sits one slot behind the producer index;
    /// the QP keeps the AH while the send is queued.
    fn wr_set_ud_addr(&mut self, ah: &Ah, remote_qpn: u32, remote_qkey: u32) -> Step {
        self.sq
            .wr_set_ud_addr(UdDest::new(ah, remote_qpn, remote_qkey))?;
        self.note_slot_behind(Some(ah));
        Ok(())
    }

    fn wr_len(&self) -> usize {
        self.sq.wr_len()
    }

    /// Publishes the batch and rings the doorbell once.
    fn wr_complete(&mut self, inner: &QpInner) -> Result<()> {
        let op = "wr_complete";
        match self.sq.wr_complete() {
            Ok(0) => Ok(()),
            Ok(_) => self.db.ring().map_err(|e| Error::os(op, inner.label(), e)),
            Err(e) => Err(ring_error(inner, op, e)),
        }
    }

    fn wr_abort(&mut self) {
        self.sq.wr_abort();
    }

    fn destroyed(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// An fd for a test's doorbell (an eventfd: Miri has them), which outlives the doorbell.
    fn null() -> std::os::fd::OwnedFd {
        rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).expect("eventfd")
    }

    #[test]
    fn doorbell_bytes_match_post_send_with_zero_wrs() {
        let null = null();
        // SAFETY: `null` is open until the end of the test, after `db` is dropped (declared
        // later, dropped first); the doorbell is never rung.
        let db = unsafe { Doorbell::new(null.as_fd(), 77) };
        let hdr = u32::from_ne_bytes(db.req[0..4].try_into().unwrap());
        assert_eq!(hdr, IB_USER_VERBS_CMD_POST_SEND);
        assert_eq!(u16::from_ne_bytes(db.req[4..6].try_into().unwrap()), 8);
        assert_eq!(u16::from_ne_bytes(db.req[6..8].try_into().unwrap()), 1);
        let resp = u64::from_ne_bytes(db.req[8..16].try_into().unwrap());
        assert_eq!(resp, db.resp.as_ptr() as u64);
        assert_eq!(u32::from_ne_bytes(db.req[16..20].try_into().unwrap()), 77);
        assert_eq!(u32::from_ne_bytes(db.req[20..24].try_into().unwrap()), 0);
        assert_eq!(u32::from_ne_bytes(db.req[28..32].try_into().unwrap()), 56);
    }

    /// Finding 12: the doorbell's response block must stay writable through the address in
    /// the prebuilt request after the Doorbell (and so the QP) moves. The write below stands
    /// in for the kernel's; under Miri (`cargo +nightly miri test -p uverbs --lib doorbell`)
    /// the earlier `Box` field made it undefined behaviour (a moved `Box` asserts unique
    /// access, invalidating the address taken before).
    #[test]
    fn doorbell_response_survives_moves() {
        let null = null();
        // SAFETY: `null` is open until the end of the test, after the doorbell is dropped
        // (`drop(boxed)` below); the doorbell is never rung.
        let db = unsafe { Doorbell::new(null.as_fd(), 77) };
        let moved = vec![db];
        let db = moved.into_iter().next().unwrap();
        let boxed = Box::new(db);
        let resp = u64::from_ne_bytes(boxed.req[8..16].try_into().unwrap());
        let p = resp as usize as *mut IbUverbsPostSendResp;
        // SAFETY: `p` is the response block the Doorbell owns (its address is in `req`, which
        // the test just read), alive until `boxed` drops; nothing else accesses it now. This is
        // exactly what the kernel does during the doorbell `write()`.
        unsafe { p.write(IbUverbsPostSendResp { bad_wr: 9 }) };
        // SAFETY: as above; reading back what was written.
        assert_eq!(unsafe { p.read() }.bad_wr, 9);
        assert_eq!(boxed.resp.as_ptr(), p);
        drop(boxed);
    }
}
