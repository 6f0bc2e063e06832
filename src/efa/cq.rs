//! The EFA half of a [`Cq`]: `efadv_create_cq` (and `ibv_create_cq`, which is it without EFA
//! attributes), completion polling (`ibv_poll_cq`, the extended poll, `efadv_wc_read_sgid`,
//! `efadv_wc_is_unsolicited`) and arming through the CQ doorbell.
#![allow(unsafe_code)]

use std::borrow::Borrow;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::Arc;

use bitflags::bitflags;
use uverbs_efa::cq::{
    Completion, CompletionQueue, CqConfig, OneStep, Step, Taken, EFA_CQE_SIZE_EX,
};
use uverbs_efa::table::{Lookup, QpTable, TablePoller};
use uverbs_efa::EfaError;
use uverbs_uapi::cmds::{
    UVERBS_ATTR_CREATE_CQ_BUFFER_FD, UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH,
    UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET,
};
use uverbs_uapi::efa::{
    EfaIbvCreateCq, EfaIbvCreateCqResp, EFA_CREATE_CQ_RESP_DB_OFF,
    EFA_CREATE_CQ_WITH_COMPLETION_CHANNEL, EFA_CREATE_CQ_WITH_SGID,
    EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID, EFA_QUERY_DEVICE_CAPS_CQ_NOTIFICATIONS,
    EFA_QUERY_DEVICE_CAPS_CQ_WITH_EXT_MEM, EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID,
    EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID,
};
use zerocopy::IntoBytes;

use crate::channel::{MapKind, Mapping};
use crate::context::Context;
use crate::cq::{Cq, CqInitAttr, CqShared};
use crate::cq_ex::PollCq;
use crate::error::{Errno, Error, Result};
use crate::provider::{CqOps, CqRing, CursorOps};
use crate::query::Gid;
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};

bitflags! {
    /// `EFADV_WC_EX_WITH_*`: extra completion fields to enable.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EfaWcFlags: u64 {
        /// `EFADV_WC_EX_WITH_SGID`: receives from senders without an AH here carry their GID.
        const WITH_SGID = 1 << 0;
        /// `EFADV_WC_EX_WITH_IS_UNSOLICITED`: report unsolicited RDMA-write-with-imm receives.
        const WITH_IS_UNSOLICITED = 1 << 1;
    }
}

bitflags! {
    /// `EFADV_CQ_INIT_FLAGS_*`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EfaCqInitFlags: u64 {
        /// `EFADV_CQ_INIT_FLAGS_EXT_MEM_DMABUF`: the CQ ring lives in [`EfaCqExtMem`].
        const EXT_MEM_DMABUF = 1 << 0;
    }
}

/// External CQ memory (`ext_mem_dmabuf` of `struct efadv_cq_init_attr`): `length` bytes at
/// `offset` of a dmabuf. uverbs maps the same range read-only for polling, so unlike rdma-core
/// no CPU pointer is taken from the caller.
#[derive(Debug, Clone, Copy)]
pub struct EfaCqExtMem<'a> {
    /// The dmabuf (any mmap-able fd the kernel accepts as one).
    pub fd: BorrowedFd<'a>,
    /// Byte offset of the ring in it.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
}

/// `struct efadv_cq_init_attr`.
#[doc(alias = "efadv_cq_init_attr")]
#[derive(Debug, Clone, Copy, Default)]
pub struct EfaCqInitAttr<'a> {
    /// Extra completion fields.
    pub wc_flags: EfaWcFlags,
    /// Creation flags.
    pub flags: EfaCqInitFlags,
    /// With [`EfaCqInitFlags::EXT_MEM_DMABUF`]: the memory.
    pub ext_mem: Option<EfaCqExtMem<'a>>,
}

/// A work completion with the EFA extras (`efadv_wc_read_sgid`, `efadv_wc_is_unsolicited`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EfaWc {
    /// The standard fields.
    pub wc: Wc,
    sgid: Option<[u8; 16]>,
    is_unsolicited: bool,
}

impl EfaWc {
    /// The sender's GID (`efadv_wc_read_sgid`): only for a receive on a CQ created with
    /// [`EfaWcFlags::WITH_SGID`] from a sender this side has no AH for; otherwise `ENOENT`
    /// (rdma-core returns -ENOENT when the AH is known).
    #[doc(alias = "efadv_wc_read_sgid")]
    pub fn read_sgid(&self) -> Result<[u8; 16]> {
        self.sgid.ok_or_else(|| {
            Error::invalid(
                "efadv_wc_read_sgid",
                format!("completion wr_id {} on qp {}", self.wc.wr_id, self.wc.qp_num),
                Errno::NOENT,
                "no source GID: the sender's AH is known here, or the CQ was created without WITH_SGID",
            )
        })
    }

    /// Whether this is an unsolicited RDMA-write-with-immediate receive, which consumed no
    /// receive WR (`efadv_wc_is_unsolicited`; its `wr_id` is 0).
    #[doc(alias = "efadv_wc_is_unsolicited")]
    pub fn is_unsolicited(&self) -> bool {
        self.is_unsolicited
    }
}

/// The EFA ring of a [`Cq`]: the provider's queue, the table of QPs completing into it (QPs
/// register through `table`; polls read it through `poller`, its one reader, which keeps the
/// last QP found across polls) and the mappings it reads (dropped after the queue).
pub(crate) struct EfaCq {
    cq: CompletionQueue,
    pub(crate) table: Arc<QpTable>,
    poller: TablePoller,
    stale: u64,
    _buf: Mapping,
    _db: Option<Mapping>,
    /// The CQ's completion events counted into the doorbell's `cmd_sn` so far (see
    /// [`CqOps::req_notify`]).
    events_noted: u32,
}

impl std::fmt::Debug for EfaCq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EfaCq").field("cq", &self.cq).finish()
    }
}

impl From<&Completion> for EfaWc {
    /// The provider's completion with its extras, as `efadv_wc_*` reads them.
    #[inline(always)]
    fn from(c: &Completion) -> Self {
        EfaWc {
            wc: c.wc,
            sgid: c.sgid,
            is_unsolicited: c.is_unsolicited,
        }
    }
}

impl EfaCq {
    /// Polls up to `out.len()` completions into `out`, each converted by `conv`; returns how
    /// many were written (from the first slot). Skips (and counts) completions of QPs that
    /// are gone. Each completion goes from the ring to its slot without an intermediate
    /// buffer; once inlined, fields `conv` ignores are never built.
    #[inline]
    pub(crate) fn poll_with<T, F: FnMut(&Completion) -> T>(
        &mut self,
        out: &mut [T],
        label: &dyn Fn() -> String,
        mut conv: F,
    ) -> Result<usize> {
        let mut n = 0;
        let mut lookup = self.poller.begin();
        loop {
            let rest = out.get_mut(n..).unwrap_or_default();
            let r = self.cq.poll_into(rest, &mut lookup, |c| conv(c));
            match r {
                Ok(k) => return Ok(n + k),
                // The device may still write completions for a QP destroyed since: consumed
                // and skipped (counted), never used to index anything.
                Err(e) if matches!(e.error, EfaError::UnknownQp { .. }) => {
                    n += e.polled;
                    self.stale += 1;
                }
                Err(e) => return Err(poll_error(label, n + e.polled, &e.error)),
            }
        }
    }

    /// [`poll_with`](Self::poll_with) of at most one completion, through the provider's
    /// one-CQE path (no run set-up); the same completion, skips and errors. The common
    /// case (a send completion of the QP found last) is the provider's `poll_one_fast`,
    /// inline; any other CQE goes to [`poll_one_slow`], out of line, which carries on in
    /// the same table poll. `shared` names the CQ in an error (read only then).
    #[inline(always)]
    pub(crate) fn poll_one_with<S: Borrow<CqShared> + ?Sized, F: FnMut(&Completion)>(
        &mut self,
        shared: &S,
        mut put: F,
    ) -> Result<usize> {
        let mut lookup = self.poller.begin_short();
        match self.cq.poll_one_fast(&mut lookup, &mut put) {
            OneStep::Took => Ok(1),
            OneStep::Empty => Ok(0),
            OneStep::Slow(t) => {
                poll_one_slow(shared, &mut self.cq, put, lookup, t, &mut self.stale)
            }
        }
    }

    pub(crate) fn stale(&self) -> u64 {
        self.stale
    }

    pub(crate) fn sub_cqs(&self) -> u16 {
        self.cq.config().num_sub_cqs
    }
}

/// An open extended poll of an EFA CQ: the provider's lazy cursor plus what resolves QP
/// numbers. The QP table is read only inside `advance` (one table poll per call, ended
/// before it returns), never while the application holds the cursor: a QP destroyed between
/// two `next_poll`s (even on this thread) must not wait for the poll to end. What carries
/// over between calls is only the poller's cached entry, revalidated by each table poll
/// (one generation compare) instead of probing the table again.
pub(crate) struct EfaCursor<'a> {
    cur: uverbs_efa::cq::PollCursor<'a>,
    poller: &'a mut TablePoller,
    stale: &'a mut u64,
    /// The CQ, which errors name.
    shared: &'a CqShared,
}

impl CqOps for EfaCq {
    type Cursor<'a> = EfaCursor<'a>;

    /// One completion asked for: a path of its own (most of such a call is per-call cost,
    /// which the general walk's set-up would dominate). Both out of line (a direct call), as
    /// a C program calls the provider's poll through `ibv_poll_cq`.
    #[inline]
    fn poll<const NET_IMM: bool>(&mut self, shared: &CqShared, wcs: &mut [Wc]) -> Result<usize> {
        match wcs {
            [one] => poll_efa_one::<NET_IMM>(shared, self, one),
            _ => poll_efa::<NET_IMM>(shared, self, wcs),
        }
    }

    /// EFA's every poll is a call (`poll`).
    #[inline(always)]
    fn poll_ready_one_net_imm(&mut self, _wc: &mut Wc) -> bool {
        false
    }

    /// `poll`, with [`poll_efa_one`] inline: the provider's `poll_one_fast` in the caller,
    /// the rest out of line as there; several completions [`poll_efa`], out of line.
    #[inline(always)]
    fn poll_net_imm_inline_one(&mut self, shared: &Arc<CqShared>, wcs: &mut [Wc]) -> Result<usize> {
        match wcs {
            [one] => self.poll_one_with(shared, |c| *one = wc_out::<true>(c)),
            _ => poll_efa::<true>(shared, self, wcs),
        }
    }

    /// A cursor on the first completion, or `None`. Completions of QPs that are gone are
    /// skipped and counted, as in `poll`.
    #[inline]
    fn start_poll<'a>(&'a mut self, shared: &'a CqShared) -> Result<Option<EfaCursor<'a>>> {
        let mut c = EfaCursor {
            cur: self.cq.poll_cursor(),
            poller: &mut self.poller,
            stale: &mut self.stale,
            shared,
        };
        match c.advance() {
            Ok(true) => Ok(Some(c)),
            Ok(false) => Ok(None),
            Err(e) => Err(cursor_error(shared, &e)),
        }
    }

    /// Arms through the CQ doorbell, not a kernel command (`efa_arm_cq`): refused for
    /// solicited-only (EFA has none) and on a CQ the kernel gave no doorbell.
    ///
    /// The arm carries the number of completion events read so far (`cmd_sn`, mod 4), which
    /// libefa counts in `efa_cq_event` when `ibv_get_cq_event` returns one: the events
    /// [`CompChannel::get_cq_event`](crate::CompChannel::get_cq_event) counted for this CQ
    /// since the last arm are noted first. (libefa counts at the event, so its poll doorbells
    /// between the event and the next arm carry the new count already; ours carry it from
    /// the arm on, which keeps the channel's read off the CQ's data path.)
    fn req_notify(&mut self, shared: &CqShared, solicited_only: bool) -> Result<()> {
        let events = shared.comp_events();
        // Only the count mod 4 reaches the doorbell.
        for _ in 0..(events.wrapping_sub(self.events_noted) & 3) {
            self.cq.note_event();
        }
        self.events_noted = events;
        self.cq
            .req_notify(solicited_only)
            .map_err(|e| Error::provider("req_notify_cq", shared.label(), e))
    }

    fn resize(&mut self, shared: &CqShared, _cqe: u32) -> Result<u32> {
        Err(Error::invalid(
            "resize_cq",
            shared.label(),
            Errno::OPNOTSUPP,
            "EFA CQs cannot be resized (libefa has no resize_cq either)",
        ))
    }
}

/// The `Wc` of a completion, with immediate data big-endian for `NET_IMM` (the C ABI's
/// poll), turned as it is copied out. Unconditionally: `imm_data` means something only with
/// `WITH_IMM` (EFA never sets `WITH_INV`, the other user of the field), so no test.
#[inline(always)]
fn wc_out<const NET_IMM: bool>(c: &Completion) -> Wc {
    let mut wc = c.wc;
    if NET_IMM {
        wc.imm_data = wc.imm_data.to_be();
    }
    wc
}

/// [`CqOps::poll`] of several completions, out of line.
#[inline(never)]
fn poll_efa<const NET_IMM: bool>(
    shared: &CqShared,
    r: &mut EfaCq,
    wcs: &mut [Wc],
) -> Result<usize> {
    r.poll_with(wcs, &|| shared.label(), wc_out::<NET_IMM>)
}

/// [`CqOps::poll`] of one completion (`wcs.len() == 1`), out of line.
#[inline(never)]
fn poll_efa_one<const NET_IMM: bool>(
    shared: &CqShared,
    r: &mut EfaCq,
    wc: &mut Wc,
) -> Result<usize> {
    r.poll_one_with(shared, |c| *wc = wc_out::<NET_IMM>(c))
}

impl EfaCursor<'_> {
    /// `ibv_next_poll`: `Ok(false)` when there is nothing more (the cursor stays where it
    /// was). Completions of QPs that are gone are consumed, counted and skipped.
    ///
    /// [`step`](Self::step), out of line, does the common case; the rest is
    /// [`advance_slow`](Self::advance_slow), out of line too.
    #[inline(always)]
    pub(crate) fn advance(&mut self) -> std::result::Result<bool, EfaError> {
        match self.step() {
            Step::Landed => Ok(true),
            step => self.advance_slow(step),
        }
    }

    /// The common case of [`advance`](Self::advance): the cursor's sub-CQ holds the next
    /// CQE, of the QP found last, and it passes every check
    /// ([`PollCursor::try_take`](uverbs_efa::cq::PollCursor::try_take)).
    ///
    /// Out of line on purpose: every extended-poll loop of a program calls this one copy (as
    /// every C program calls libefa's `next_poll` through `ibv_cq_ex`), so what the count
    /// measures is what any caller gets, however many poll loops it has. It makes no call
    /// and returns a byte (no `Result` written through memory); its slow paths are
    /// elsewhere, so it saves only the few callee-saved registers its common case uses.
    /// See docs/performance.md, "EFA poll of one completion, and the extended poll".
    #[inline(never)]
    pub(crate) fn step(&mut self) -> Step {
        // Ends (the epoch goes even) before `step` returns.
        let mut lookup = self.poller.begin_short();
        self.cur.try_take(&mut lookup)
    }

    /// [`advance`](Self::advance) after [`step`](Self::step) did not land (`step` is what
    /// it returned): `Ok(false)` for [`Step::Empty`]; otherwise the whole `advance`, with the
    /// work `step` left: the round robin, a QP not found last (probed in the table), a CQE
    /// that fails a check (`step` may have consumed it: the provider's cursor keeps it for
    /// this), completions of QPs that are gone (consumed, counted and skipped). Taking the
    /// empty case too leaves the caller's inline part one test of the byte `step` returns.
    #[inline(never)]
    pub(crate) fn advance_slow(&mut self, step: Step) -> std::result::Result<bool, EfaError> {
        if step == Step::Empty {
            return Ok(false);
        }
        // Ends (the epoch goes even) before `advance_slow` returns.
        let mut lookup = self.poller.begin();
        loop {
            match self.cur.advance(&mut lookup) {
                Err(EfaError::UnknownQp { .. }) => *self.stale += 1,
                r => return r,
            }
        }
    }

    /// `efadv_wc_read_sgid` of the current completion of the CQ `shared`.
    fn read_sgid(&self, shared: &CqShared) -> Result<[u8; 16]> {
        self.cur.sgid().ok_or_else(|| {
            Error::invalid(
                "efadv_wc_read_sgid",
                format!(
                    "completion wr_id {} of qp {} on {}",
                    self.cur.wr_id(),
                    self.cur.qp_num(),
                    shared.label(),
                ),
                Errno::NOENT,
                "no source GID: not a receive, the sender's AH is known here, or the CQ was created without WITH_SGID",
            )
        })
    }

    /// `efadv_wc_is_unsolicited` of the current completion.
    fn is_unsolicited(&self) -> bool {
        self.cur.is_unsolicited()
    }
}

impl CursorOps for EfaCursor<'_> {
    #[inline(always)]
    fn shared(&self) -> &CqShared {
        self.shared
    }
    /// As on rxe: the common step's `Ok(true)` returns from here, so the caller's loop goes
    /// from the step straight to its next reader, not through the slow path's `Result`; the
    /// step itself is the one out-of-line call, as a C program calls the provider's
    /// `next_poll` through `ibv_cq_ex`.
    #[inline(always)]
    fn next(&mut self) -> Result<bool> {
        let step = self.step();
        if step == Step::Landed {
            return Ok(true);
        }
        self.advance_slow(step)
            .map_err(|e| cursor_error(self.shared, &e))
    }
    /// EFA's every step is a call (`next`).
    #[inline(always)]
    fn next_ready(&mut self) -> bool {
        false
    }
    #[inline]
    fn wr_id(&self) -> u64 {
        self.cur.wr_id()
    }
    #[inline]
    fn status(&self) -> WcStatus {
        self.cur.status()
    }
    #[inline]
    fn opcode(&self) -> WcOpcode {
        self.cur.opcode()
    }
    #[inline]
    fn vendor_err(&self) -> u32 {
        self.cur.vendor_err()
    }
    #[inline]
    fn byte_len(&self) -> u32 {
        self.cur.byte_len()
    }
    /// The device writes immediate data in host order.
    #[inline]
    fn imm_data(&self) -> u32 {
        self.cur.imm_data()
    }
    /// EFA invalidates no rkeys: the field's value, which is the immediate word.
    #[inline]
    fn invalidated_rkey(&self) -> u32 {
        self.cur.imm_data()
    }
    #[inline]
    fn qp_num(&self) -> u32 {
        self.cur.qp_num()
    }
    #[inline]
    fn src_qp(&self) -> u32 {
        self.cur.src_qp()
    }
    #[inline]
    fn wc_flags(&self) -> WcFlags {
        self.cur.wc_flags()
    }
    #[inline]
    fn slid(&self) -> u16 {
        self.cur.slid()
    }
    /// EFA has no service levels in completions.
    #[inline]
    fn sl(&self) -> u8 {
        0
    }
    #[inline]
    fn dlid_path_bits(&self) -> u8 {
        0
    }
    #[inline]
    fn pkey_index(&self) -> u16 {
        0
    }
    #[inline]
    fn wc(&self) -> Wc {
        self.cur.wc()
    }
}

/// The error an extended poll reports for a bad CQE (which the provider consumed).
#[cold]
#[inline(never)]
fn cursor_error(shared: &CqShared, e: &EfaError) -> Error {
    Error::provider("poll_cq", shared.label(), *e)
        .with_reason(format!("bad completion from the device: {e}"))
}

/// The rest of a one-completion poll whose CQE `poll_one_fast` left (`t`): the provider's
/// full processing of it, then, while the CQEs found are of QPs that are gone (consumed,
/// counted and skipped, as in `poll_with`), the next one, all in the table poll `lookup`
/// (ended when it is dropped here).
#[cold]
#[inline(never)]
fn poll_one_slow<S: Borrow<CqShared> + ?Sized, F: FnMut(&Completion)>(
    shared: &S,
    cq: &mut CompletionQueue,
    mut put: F,
    mut lookup: Lookup<'_, true>,
    t: Taken,
    stale: &mut u64,
) -> Result<usize> {
    let mut r = cq.poll_one_finish(t, &mut lookup, &mut put);
    loop {
        match r {
            Ok(n) => return Ok(n),
            Err(e) if matches!(e.error, EfaError::UnknownQp { .. }) => *stale += 1,
            Err(e) => return Err(poll_error(&|| shared.borrow().label(), 0, &e.error)),
        }
        r = cq.poll_one_each(&mut lookup, &mut put);
    }
}

#[cold]
#[inline(never)]
fn poll_error(label: &dyn Fn() -> String, n: usize, e: &EfaError) -> Error {
    Error::provider("poll_cq", label(), *e).with_reason(format!(
        "bad completion from the device after {n} good ones: {e}"
    ))
}

impl Cq {
    /// Polls EFA completions with their extras (the `ibv_start_poll`/`efadv_wc_*` view);
    /// `EOPNOTSUPP` on a non-EFA CQ. Lock-free, allocation-free, no syscall.
    #[doc(alias = "efadv_wc_read_sgid")]
    #[doc(alias = "efadv_wc_is_unsolicited")]
    pub fn poll_efa(&mut self, wcs: &mut [EfaWc]) -> Result<usize> {
        let shared = &*self.shared;
        match self.ring.efa_mut() {
            Some(r) => match wcs {
                [one] => r.poll_one_with(shared, |c| *one = c.into()),
                _ => r.poll_with(wcs, &|| shared.label(), |c| EfaWc::from(c)),
            },
            None => Err(not_efa(shared, "poll_cq")),
        }
    }

    /// Completions consumed for QPs that no longer exist (skipped by poll); 0 on another
    /// provider's CQ.
    pub fn efa_stale_completions(&self) -> u64 {
        self.ring.efa().map_or(0, |r| r.stale())
    }

    /// Number of sub-CQs the EFA CQ is split into (0 for other CQs).
    pub fn efa_sub_cqs(&self) -> u16 {
        self.ring.efa().map_or(0, |r| r.sub_cqs())
    }
}

impl PollCq<'_> {
    /// `efadv_wc_read_sgid`: the sender's GID, for a receive on an EFA CQ created with
    /// `WITH_SGID` from a sender this side has no AH for; `ENOENT` otherwise (rdma-core
    /// returns -ENOENT when the AH is known), `EOPNOTSUPP` on a non-EFA CQ.
    #[doc(alias = "efadv_wc_read_sgid")]
    pub fn read_sgid(&self) -> Result<[u8; 16]> {
        match self.cur.efa() {
            Some(c) => c.read_sgid(c.shared),
            None => Err(not_efa(self.shared(), "efadv_wc_read_sgid")),
        }
    }

    /// The sender's GID as [`Self::read_sgid`] answers it, without its error: `None` where
    /// `read_sgid` fails (not a receive, the sender's AH is known here, a CQ created without
    /// `WITH_SGID`, or a non-EFA CQ). It builds no error, so it neither allocates nor formats:
    /// for a data-path caller that returns its own code for "no GID" (libefa's
    /// `efadv_wc_read_sgid` returns -ENOENT, and the C API's reader is this).
    #[doc(alias = "efadv_wc_read_sgid")]
    #[inline]
    pub fn sgid(&self) -> Option<Gid> {
        let raw = self.cur.efa()?.cur.sgid()?;
        Some(Gid { raw })
    }

    /// `efadv_wc_is_unsolicited`: an RDMA write with immediate that consumed no receive WR
    /// (its `wr_id` is 0); always `false` on a non-EFA CQ.
    #[doc(alias = "efadv_wc_is_unsolicited")]
    #[inline]
    pub fn is_unsolicited(&self) -> bool {
        self.cur.efa().is_some_and(|c| c.is_unsolicited())
    }
}

/// The refusal of the EFA call `op` on a CQ of another provider.
#[cold]
fn not_efa(shared: &CqShared, op: &'static str) -> Error {
    Error::invalid(
        op,
        shared.label(),
        Errno::OPNOTSUPP,
        format!(
            "{op} is EFA's, and this CQ is on an {} device, not an EFA one",
            shared.ctx.device().driver()
        ),
    )
}

impl Context {
    /// Creates an EFA CQ (`efadv_create_cq`): 32-byte CQEs in `sub_cqs_per_cq` sub-CQs,
    /// optionally with source GIDs, a completion channel or external (dmabuf) memory.
    ///
    /// ```
    /// # let fabric = uverbs_efa_model::EfaFabric::new(1);
    /// # let ctx = fabric.add_device(Default::default()).open()?;
    /// use uverbs::{CqInitAttr, EfaCqInitAttr, EfaWcFlags};
    ///
    /// let attr = CqInitAttr { cqe: 1024, ..Default::default() };
    /// // Completions carry the sender's GID (for receives from an unknown peer).
    /// let efa = EfaCqInitAttr { wc_flags: EfaWcFlags::WITH_SGID, ..Default::default() };
    /// let mut cq = ctx.efadv_create_cq(&attr, &efa)?;
    /// assert!(cq.cqe() >= 1024);
    /// // Poll with `poll`, or `start_poll` and `PollCq::read_sgid` for the GID.
    /// assert!(cq.start_poll()?.is_none());
    /// # Ok::<(), uverbs::Error>(())
    /// ```
    pub fn efadv_create_cq(&self, attr: &CqInitAttr<'_>, efa: &EfaCqInitAttr<'_>) -> Result<Cq> {
        self.efa_create_cq(attr, efa, "efadv_create_cq")
    }

    /// `efadv_create_cq` as the call `op` (`ibv_create_cq` on EFA is it without EFA
    /// attributes, as libefa's `efa_create_cq`).
    pub(crate) fn efa_create_cq(
        &self,
        attr: &CqInitAttr<'_>,
        efa: &EfaCqInitAttr<'_>,
        op: &'static str,
    ) -> Result<Cq> {
        let label = || self.label().to_string();
        let uctx = self.efa_ucontext(op)?;
        let caps = self.efa_query_raw(op)?.device_caps;
        let bad = |why: String| Error::invalid(op, label(), Errno::OPNOTSUPP, why);
        if attr.cqe == 0 {
            return Err(Error::invalid(op, label(), Errno::INVAL, "cqe is 0"));
        }
        let cqe = attr.cqe.checked_next_power_of_two().ok_or_else(|| {
            Error::invalid(
                op,
                label(),
                Errno::INVAL,
                format!("cqe {} too large", attr.cqe),
            )
        })?;
        let mut flags = 0u8;
        let with_sgid = efa.wc_flags.contains(EfaWcFlags::WITH_SGID);
        if with_sgid {
            if caps & EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID == 0 {
                return Err(bad(
                    "the device cannot report source GIDs (no CQ_WITH_SGID cap)".into(),
                ));
            }
            flags |= EFA_CREATE_CQ_WITH_SGID;
        }
        if let Some(ch) = attr.channel {
            if caps & EFA_QUERY_DEVICE_CAPS_CQ_NOTIFICATIONS == 0 {
                return Err(bad("the device has no CQ notifications".into()));
            }
            if !ch.same_context(self) {
                return Err(Error::invalid(
                    op,
                    label(),
                    Errno::INVAL,
                    "the completion channel belongs to another device context",
                ));
            }
            flags |= EFA_CREATE_CQ_WITH_COMPLETION_CHANNEL;
        }
        // As libefa (`efa_create_cq`): on a device with 64-bit request ids every CQ takes
        // them, so any QP of the device may complete its sends here.
        if caps & EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID != 0 {
            flags |= EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID;
        }
        let ext = efa.flags.contains(EfaCqInitFlags::EXT_MEM_DMABUF);
        let ext_mem = match (ext, efa.ext_mem) {
            (true, Some(m)) => {
                if caps & EFA_QUERY_DEVICE_CAPS_CQ_WITH_EXT_MEM == 0 {
                    return Err(bad("the device cannot place CQs in external memory".into()));
                }
                Some(m)
            }
            (true, None) => {
                return Err(Error::invalid(
                    op,
                    label(),
                    Errno::INVAL,
                    "EXT_MEM_DMABUF set but no ext_mem given",
                ))
            }
            (false, Some(_)) => {
                return Err(Error::invalid(
                    op,
                    label(),
                    Errno::INVAL,
                    "ext_mem given without the EXT_MEM_DMABUF flag",
                ))
            }
            (false, None) => None,
        };
        let num_sub_cqs = uctx.sub_cqs_per_cq;
        let needed = u64::from(cqe) * u64::from(num_sub_cqs) * u64::from(EFA_CQE_SIZE_EX);
        if let Some(m) = ext_mem {
            if m.length < needed {
                return Err(Error::invalid(
                    op,
                    label(),
                    Errno::INVAL,
                    format!(
                        "external memory of {} bytes is smaller than {cqe} entries x {num_sub_cqs} sub-CQs x 32 bytes = {needed}",
                        m.length
                    ),
                ));
            }
        }
        let cmd = EfaIbvCreateCq {
            cq_entry_size: EFA_CQE_SIZE_EX,
            num_sub_cqs,
            flags,
            ..Default::default()
        };
        let mut resp = EfaIbvCreateCqResp::default();
        let attr2 = CqInitAttr {
            cqe,
            ..attr.clone()
        };
        let (shared, got_cqe) =
            self.create_cq_object_with(&attr2, cmd.as_bytes(), resp.as_mut_bytes(), |c| {
                if let Some(m) = ext_mem {
                    c.u32_in(UVERBS_ATTR_CREATE_CQ_BUFFER_FD, m.fd.as_raw_fd() as u32)
                        .u64_in(UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET, m.offset)
                        .u64_in(UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH, m.length);
                }
            })?;
        let cfg = CqConfig {
            cqn: u32::from(resp.cq_idx),
            num_sub_cqs,
            sub_cq_depth: got_cqe,
            entry_size: EFA_CQE_SIZE_EX,
            with_sgid,
        };
        let slabel = || shared.label();
        let buf = match ext_mem {
            Some(m) => map_ext(m, op, &slabel)?,
            None => {
                let len = usize::try_from(resp.q_mmap_size).map_err(|_| {
                    Error::invalid(op, slabel(), Errno::INVAL, "q_mmap_size too large")
                })?;
                self.channel()
                    .mmap(resp.q_mmap_key, len, MapKind::ReadOnly)
                    .map_err(|e| {
                        Error::os(op, slabel(), e).with_reason("mmap of the CQ ring failed")
                    })?
            }
        };
        let (db_map, db_ptr) = if resp.comp_mask & EFA_CREATE_CQ_RESP_DB_OFF != 0 {
            let m = self
                .channel()
                .mmap(resp.db_mmap_key, 4096, MapKind::WriteOnly)
                .map_err(|e| {
                    Error::os(op, slabel(), e).with_reason("mmap of the CQ doorbell failed")
                })?;
            let p = m.ptr_at(resp.db_off as usize, 4).ok_or_else(|| {
                Error::invalid(
                    op,
                    slabel(),
                    Errno::IO,
                    format!("db_off {} outside the doorbell page", resp.db_off),
                )
            })?;
            (Some(m), Some(p.cast::<u32>()))
        } else {
            (None, None)
        };
        let (base, len) = match ext_mem {
            Some(m) => {
                let skew = (m.offset % page_size()) as usize;
                (buf.ptr_at(skew, 0), buf.len() - skew)
            }
            None => (Some(buf.as_ptr()), buf.len()),
        };
        let base =
            base.ok_or_else(|| Error::invalid(op, slabel(), Errno::IO, "empty CQ buffer"))?;
        // Nothing in this process writes the ring; the device (or model) does, and the queue
        // reads it only through raw pointers and atomics. `db_ptr`, if any, is 4 bytes inside
        // `db_map`, which the EfaCq keeps alive like `buf`.
        // SAFETY: `base..base+len` lies in `buf`, a live mapping the EfaCq outlives.
        let queue = unsafe { CompletionQueue::new(cfg, base, len, db_ptr) }
            .map_err(|e| Error::provider(op, slabel(), e))?;
        let (table, poller) = QpTable::new();
        let ring = EfaCq {
            cq: queue,
            table,
            poller,
            stale: 0,
            _buf: buf,
            _db: db_map,
            events_noted: 0,
        };
        Ok(Cq::assemble(shared, CqRing::Efa(Box::new(ring)), got_cqe))
    }
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// Maps the external CQ memory read-only (shared, so device writes are seen).
fn map_ext(m: EfaCqExtMem<'_>, op: &'static str, label: &dyn Fn() -> String) -> Result<Mapping> {
    let skew = m.offset % page_size();
    let start = m.offset - skew;
    let len = usize::try_from(m.length + skew)
        .map_err(|_| Error::invalid(op, label(), Errno::INVAL, "ext_mem length too large"))?;
    // SAFETY: a new shared read-only mapping of the caller's fd at an address the kernel
    // picks aliases nothing in this process; we own it through the Mapping made right after.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ,
            rustix::mm::MapFlags::SHARED,
            m.fd,
            start,
        )
    }
    .map_err(|e| Error::os(op, label(), e).with_reason("mmap of the external CQ memory failed"))?;
    let p = NonNull::new(p.cast::<u8>())
        .ok_or_else(|| Error::invalid(op, label(), Errno::NOMEM, "mmap returned null"))?;
    // SAFETY: `p..p+len` was mapped just above and nothing else owns it.
    Ok(unsafe { Mapping::from_raw(p, len) })
}

/// Introspection (`efadv_query_cq`, in `super::introspect`): the queue, read only.
impl EfaCq {
    pub(crate) fn queue(&self) -> &CompletionQueue {
        &self.cq
    }
}
