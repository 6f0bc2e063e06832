//! The rxe half of a [`Qp`](crate::Qp): its rings (the SQ and, without an SRQ, the RQ,
//! mmapped from the uverbs fd), the AHs queued UD sends name, and the send doorbell, a
//! `write()` of `IB_USER_VERBS_CMD_POST_SEND` with zero work requests prebuilt at creation
//! (request bytes and response buffer) so a post allocates nothing and calls nothing through a
//! trait object. The generic `Qp` owns the kernel QP and dispatches its rxe arm here.
//!
//! Unsafe code here: reading the caller's SGEs as rxe's, and borrowing the uverbs fd number
//! for the doorbell write.
#![allow(unsafe_code)]

use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

use uverbs_rxe::{Payload, RecvQueue, SendQueue, SendQueueCaps, UdAh};
use uverbs_uapi::rxe::RxeCreateQpResp;
use uverbs_uapi::write::{
    IbUverbsCmdHdr, IbUverbsPostSend, IbUverbsPostSendResp, IbUverbsSendWr,
    IB_USER_VERBS_CMD_POST_SEND,
};
use zerocopy::IntoBytes;

use super::map_rxe_queue;
use crate::ah::Ah;
use crate::channel::Mapping;
use crate::context::Context;
use crate::error::{Errno, Error, Result};
use crate::qp::{check_ah_pd, QpCap, QpInitAttr, QpInner, QpType};
use crate::wr::{post_errno, PostError, RecvWr, SendWr, WrData};

/// Maps the rings of the rxe QP `inner` just created (`drv` is the driver's part of the
/// create response, `cap` the caps it was made with) and prebuilds its doorbell.
pub(crate) fn qp_ring(
    ctx: &Context,
    op: &'static str,
    attr: &QpInitAttr<'_>,
    inner: &QpInner,
    drv: &RxeCreateQpResp,
    cap: &QpCap,
) -> Result<RxeRing> {
    let Some(rxe_type) = attr.qp_type.rxe() else {
        return Err(Error::invalid(
            op,
            inner.label(),
            Errno::OPNOTSUPP,
            format!("{:?} QPs have no rxe rings", attr.qp_type),
        ));
    };
    let qlabel = || inner.label();
    let (sq_map, sq_q) = map_rxe_queue(ctx, &drv.sq_mi, op, &qlabel, "send queue")?;
    let sq = SendQueue::new(
        sq_q,
        SendQueueCaps {
            qp_type: rxe_type,
            max_send_sge: cap.max_send_sge,
            max_inline_data: cap.max_inline_data,
        },
    )
    .map_err(|e| Error::invalid(op, inner.label(), Errno::IO, format!("send queue: {e}")))?;
    let (rq, rq_map) = if attr.srq.is_none() {
        let (m, q) = map_rxe_queue(ctx, &drv.rq_mi, op, &qlabel, "receive queue")?;
        let rq = RecvQueue::new(q, cap.max_recv_sge).map_err(|e| {
            Error::invalid(op, inner.label(), Errno::IO, format!("receive queue: {e}"))
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
    Ok(RxeRing {
        db,
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
pub(crate) struct Doorbell {
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
    pub(crate) fn ring(&self) -> std::result::Result<(), Errno> {
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

/// The rxe rings of a QP and the doorbell.
pub(crate) struct RxeRing {
    pub(crate) sq: SendQueue,
    pub(crate) rq: Option<RecvQueue>,
    pub(crate) db: Doorbell,
    /// For each SQ slot, the AH of the UD send last written there: kept until the slot is
    /// reused, which the ring allows only after the kernel consumed that send.
    pub(crate) ah_slots: Box<[Option<Ah>]>,
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

#[cold]
pub(crate) fn ring_error(inner: &QpInner, op: &'static str, e: uverbs_rxe::PostError) -> Error {
    Error::invalid(op, inner.label(), post_errno(&e), e.to_string())
}

impl RxeRing {
    /// Posts `wrs` (the rxe arm of [`Qp::post_send`](crate::Qp::post_send), after its state
    /// check). One WR that [`SendQueue::post_fast`] takes (SGEs on a connected QP, the
    /// latency case) is posted, published and rung here with nothing else live; anything
    /// else goes to [`Self::post_send_list`] (a tail call).
    ///
    /// `wrs` comes before `inner` so that [`Qp::post_send`](crate::Qp::post_send)'s own
    /// arguments (the slice) stay in the registers they arrived in for the tail call.
    #[inline(never)]
    pub(crate) fn post_send(
        &mut self,
        wrs: &[SendWr<'_>],
        inner: &QpInner,
    ) -> Result<(), PostError> {
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
        match wr.data {
            WrData::Sge(sges) if wr.ud.is_none() => {
                self.sq.post_fast(wr.wr_id, &wr.op, wr.flags, sges)
            }
            _ => false,
        }
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

    /// Posts one WR: the provider reads its parts where they are (the operation and the SGE
    /// slice are the shared `uverbs_wr` vocabulary, `Sge` in the `ibv_sge` layout the WQE
    /// holds), so nothing is converted but the UD destination. The provider checks the SGE
    /// count against the QP's `max_send_sge` (the caps it was made with).
    #[inline(always)]
    fn post_one(&mut self, inner: &QpInner, wr: &SendWr<'_>) -> Result<()> {
        let payload = match wr.data {
            WrData::Sge(s) => Payload::Sge(s),
            WrData::Inline(d) => Payload::Inline(d),
        };
        let dest = match &wr.ud {
            None => None,
            Some(d) => Some(ud_dest(inner, "post_send", d)?),
        };
        let slot = self.sq.producer_index();
        self.sq
            .post_parts(wr.wr_id, &wr.op, wr.flags, payload, dest.as_ref())
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
    pub(crate) fn note_slot_behind(&mut self, ah: Option<&Ah>) {
        if !self.ah_slots.is_empty() {
            self.note_ah(self.sq.producer_index().wrapping_sub(1), ah);
        }
    }

    /// Keeps a clone of `ah` (or none) in the entry of SQ slot `index & index_mask` until the
    /// slot is reused, which the ring allows only after the kernel consumed that send.
    #[inline]
    pub(crate) fn note_ah(&mut self, index: u32, ah: Option<&Ah>) {
        let slot = (index & self.sq.queue().index_mask()) as usize;
        if let Some(s) = self.ah_slots.get_mut(slot) {
            // Replacing the old value drops the AH of a send the kernel already consumed (the
            // ring let us reuse its slot).
            *s = ah.cloned();
        }
    }

    pub(crate) fn post_recv(
        &mut self,
        inner: &QpInner,
        wrs: &[RecvWr<'_>],
    ) -> Result<(), PostError> {
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
        let r = post_recv_list(rq, wrs);
        rq.publish();
        r.map_err(|(index, e)| PostError {
            index,
            error: Error::invalid(op, inner.label(), post_errno(&e), e.to_string()),
        })
    }
}

#[inline]
pub(crate) fn ud_dest<'b>(
    inner: &QpInner,
    op: &'static str,
    d: &crate::wr::UdDest<'b>,
) -> Result<uverbs_rxe::UdDest<'b>> {
    check_ah_pd(inner, op, d.ah())?;
    let Some(n) = NonZeroU32::new(d.ah_num()) else {
        // create_ah refuses ah_num 0, so this is unreachable for an Ah made by uverbs.
        return Err(Error::invalid(
            op,
            inner.label(),
            Errno::INVAL,
            "the AH has no rxe AH index",
        ));
    };
    Ok(uverbs_rxe::UdDest {
        ah: UdAh::Num(n),
        remote_qpn: d.remote_qpn,
        remote_qkey: d.remote_qkey,
    })
}

/// Writes `wrs` into `rq`; on failure returns the index of the first not written.
pub(crate) fn post_recv_list(
    rq: &mut RecvQueue,
    wrs: &[RecvWr<'_>],
) -> std::result::Result<(), (usize, uverbs_rxe::PostError)> {
    for (i, wr) in wrs.iter().enumerate() {
        if wr.sg_list.len() > rq.max_sge() as usize {
            return Err((
                i,
                uverbs_rxe::PostError::TooManySge {
                    num_sge: wr.sg_list.len(),
                    max_sge: rq.max_sge(),
                },
            ));
        }
        rq.post(wr.wr_id, wr.sg_list).map_err(|e| (i, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::Sge;
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

    /// A heap block laid out as an rxe queue (`rxe_queue_buf` header, then the slots), for
    /// ring views without a kernel.
    struct HeapQueue {
        words: Vec<u64>,
    }

    impl HeapQueue {
        fn new(log2_elem: u32, log2_slots: u32) -> Self {
            use uverbs_uapi::rxe::{RxeQueueBuf, RXE_QUEUE_BUF_DATA_OFFSET};
            let len = RXE_QUEUE_BUF_DATA_OFFSET + (1usize << (log2_elem + log2_slots));
            let mut words = vec![0u64; len.div_ceil(8)];
            let hdr = RxeQueueBuf {
                log2_elem_size: log2_elem,
                index_mask: (1 << log2_slots) - 1,
                ..Default::default()
            };
            words.as_mut_bytes()[..std::mem::size_of::<RxeQueueBuf>()]
                .copy_from_slice(hdr.as_bytes());
            HeapQueue { words }
        }
    }

    /// Finding 9: a receive queue whose slots hold more than 64 SGEs (a device reporting
    /// max_sge > 64) takes a list of 65 (SGEs are read in place, no stack buffer bounds them)
    /// and refuses one longer than its slots with an error, no panic.
    #[test]
    fn sge_lists_are_bounded_by_the_queue_not_a_buffer() {
        let mut mem = HeapQueue::new(11, 2);
        let len = mem.words.len() * 8;
        // SAFETY: `mem.words` is `len` bytes, 8-aligned, zeroed past an initialised queue
        // header, outliving `rq` (dropped first, below); nothing else touches it.
        let q = unsafe {
            uverbs_rxe::Queue::from_raw(
                NonNull::new(mem.words.as_mut_ptr().cast::<u8>()).unwrap(),
                len,
                None,
            )
        }
        .unwrap();
        let mut rq = RecvQueue::new(q, 100).unwrap();
        let max = rq.max_sge() as usize;
        assert!(max > 64, "{max}");
        let sges = [Sge::default(); 128];
        let wrs = [RecvWr::new(1, &sges[..max + 1])];
        let (index, e) = post_recv_list(&mut rq, &wrs).unwrap_err();
        assert_eq!(index, 0);
        assert!(
            matches!(e, uverbs_rxe::PostError::TooManySge { num_sge, .. } if num_sge == max + 1),
            "{e}"
        );
        // 65 go.
        post_recv_list(&mut rq, &[RecvWr::new(2, &sges[..65])]).unwrap();
        // `rq` points into `mem`: it must not be used after `mem` goes.
        let _rq = rq;
        let _mem = mem;
    }
}
