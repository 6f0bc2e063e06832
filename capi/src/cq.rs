//! Completion queues and completion channels: `ibv_create_comp_channel`,
//! `ibv_destroy_comp_channel`, `ibv_create_cq`, `ibv_create_cq_ex` (the `verbs_context`
//! entry), `ibv_resize_cq`, `ibv_destroy_cq`, `ibv_get_cq_event`, `ibv_ack_cq_events`, the
//! `ops` entries `poll_cq` and `req_notify_cq`, and the extended poll of `struct ibv_cq_ex`
//! (`start_poll`, `next_poll`, `end_poll`, the `read_*` functions).
//!
//! One wrapper, [`Cq`], serves both creates: `struct ibv_cq` is a prefix of
//! `struct ibv_cq_ex`, so the pointer `ibv_create_cq` returns is the same object
//! `ibv_cq_ex_to_cq` casts to. The uverbs CQ's `cq_context` is the wrapper's address, so a
//! completion event (`uverbs::CqEvent::cq_context`) and an async event name the C pointer
//! directly; the program's own `cq_context` lives in the C struct, where it reads it.
//!
//! The extended poll is a borrowing cursor in uverbs ([`uverbs::PollCq`]); C opens and closes
//! it in separate calls, so the wrapper keeps the open cursor (`poll`) between them. The
//! cursor borrows the wrapper's `cq` field, and nothing else touches that field while it is
//! open: every other verb on the CQ (`poll_cq`, `req_notify_cq`, `resize_cq`, `destroy_cq`,
//! and [`cq_mut`]/[`cq_ref`], through which QPs and SRQs name it) ends an open extended poll
//! first, as `end_poll` would. In rdma-core, polling or resizing inside an extended poll
//! deadlocks (the providers hold the CQ lock from `start_poll` to `end_poll`); here it is
//! well defined. Fields are
//! reached through the raw wrapper pointer one at a time, never through a reference to the
//! whole wrapper, so the cursor's borrow of `cq` is never invalidated while it is open.

use core::ffi::{c_int, c_uint, c_void};
use core::mem::ManuallyDrop;
use core::ptr::{self, addr_of_mut};

use std::os::fd::AsRawFd;

use uverbs::{PollCq, WcFlags};

use crate::abi::*;
use crate::device::context;
use crate::util::{eopnotsupp, guard, report, set_errno, COND_INIT, MUTEX_INIT};

/// `enum ibv_wc_flags_ex`: the readers rxe and EFA provide (`IBV_WC_STANDARD_FLAGS`).
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7f;
/// `IBV_CQ_INIT_ATTR_MASK_FLAGS`, `IBV_CQ_INIT_ATTR_MASK_PD`.
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;
/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED`: always true of our CQs (no lock on the data path).
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1 << 0;
/// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`, passed to the kernel as
/// `IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN` (which decides), as libibverbs does.
pub const IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: u32 = 1 << 1;
const IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN: u32 = 1 << 1;

/// A completion channel as C sees it and the uverbs channel behind it.
#[repr(C)]
pub struct CompChannel {
    pub ibv: ibv_comp_channel,
    pub ch: uverbs::CompChannel,
}

/// The [`CompChannel`] of an `ibv_comp_channel` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live channel from [`ibv_create_comp_channel`].
pub unsafe fn comp_channel<'a>(p: *mut ibv_comp_channel) -> Option<&'a CompChannel> {
    // SAFETY: see above; ibv is the first field of the repr(C) CompChannel.
    unsafe { (p as *const CompChannel).as_ref() }
}

/// A CQ as C sees it (`ibv_cq_ex`, whose prefix is `ibv_cq`) and the uverbs CQ behind it.
#[repr(C)]
pub struct Cq {
    pub ibv: ibv_cq_ex,
    pub cq: ManuallyDrop<uverbs::Cq>,
    /// The extended poll between `start_poll` and `end_poll`: a cursor borrowing `cq` (its
    /// `'static` stands for "until taken"; see the module documentation).
    poll: Option<PollCq<'static>>,
    /// EFA's `struct efadv_cq` of this CQ, which `efadv_cq_from_ibv_cq_ex` returns.
    pub dv: DvCq,
}

/// `struct efadv_cq` (`<infiniband/efadv.h>`; rdma-core 44 has the first two fields, later
/// versions add `wc_is_unsolicited`): EFA's readers of the current completion, embedded in
/// every CQ (on a CQ of another provider `wc_read_sgid` answers `-EOPNOTSUPP`).
#[repr(C)]
pub struct DvCq {
    pub comp_mask: u64,
    pub wc_read_sgid: Option<unsafe extern "C" fn(*mut DvCq, *mut ibv_gid) -> c_int>,
    pub wc_is_unsolicited: Option<unsafe extern "C" fn(*mut DvCq) -> bool>,
}

/// The `struct efadv_cq` of a CQ (`efadv_cq_from_ibv_cq_ex`), None for NULL.
///
/// # Safety
/// `p` is NULL or a live CQ from `ibv_create_cq(_ex)`.
pub unsafe fn dv(p: *mut ibv_cq_ex) -> Option<*mut DvCq> {
    let w = p as *mut Cq;
    // SAFETY: NULL or a live wrapper (above); only the field's address is taken.
    (!w.is_null()).then(|| unsafe { addr_of_mut!((*w).dv) })
}

/// The CQ whose `dv` field `d` is.
///
/// # Safety
/// `d` is the `dv` field of a live wrapper.
unsafe fn from_dv(d: *mut DvCq) -> *mut ibv_cq_ex {
    // SAFETY: `d` lies `offset_of!(Cq, dv)` bytes into its wrapper (above).
    unsafe { d.cast::<u8>().sub(core::mem::offset_of!(Cq, dv)).cast() }
}

/// `efadv_wc_read_sgid`: the sender's GID of the current completion: 0, `-ENOENT` when it
/// carries none (the sender has an AH here, not a receive, a CQ without `WITH_SGID`) or no
/// poll is open, `-EOPNOTSUPP` on a CQ of another provider. No lock, no allocation
/// ([`PollCq::sgid`]).
unsafe extern "C" fn dv_read_sgid(d: *mut DvCq, sgid: *mut ibv_gid) -> c_int {
    guard("efadv_wc_read_sgid", -libc::EIO, || {
        if d.is_null() || sgid.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: the program's efadv_cq of a live CQ.
        let w = unsafe { from_dv(d) };
        // SAFETY: as above; only the `poll` field is referenced.
        let Some(p) = (unsafe { open_poll(w) }) else {
            return -libc::ENOENT;
        };
        // SAFETY: a live CQ (above): its `context` (of the `ibv` field, apart from `cq` and
        // `poll`) names the live context the CQ was created on.
        let ctx = unsafe { context((*w).context) };
        if !ctx.is_some_and(crate::efa::is_efa) {
            return -libc::EOPNOTSUPP;
        }
        match p.sgid() {
            Some(g) => {
                // SAFETY: the program's ibv_gid to fill.
                unsafe { (*sgid).raw = g.raw };
                0
            }
            None => -libc::ENOENT,
        }
    })
}

/// `efadv_wc_is_unsolicited`.
unsafe extern "C" fn dv_is_unsolicited(d: *mut DvCq) -> bool {
    guard("efadv_wc_is_unsolicited", false, || {
        if d.is_null() {
            return false;
        }
        // SAFETY: the program's efadv_cq of a live CQ.
        unsafe { open_poll(from_dv(d)) }.is_some_and(|p| p.is_unsolicited())
    })
}

/// `ibv_ack_async_event` of an event naming `cq` (`IBV_EVENT_CQ_ERR`): counts it, for
/// [`ibv_destroy_cq`]'s wait (under the CQ's mutex, as rdma-core).
///
/// # Safety
/// `cq` is NULL or a live CQ.
pub unsafe fn ack_async_event(cq: *mut ibv_cq) {
    if cq.is_null() {
        return;
    }
    // SAFETY: a live CQ; its mutex and cond were initialised at creation, and the count is
    // only changed under the mutex.
    unsafe {
        libc::pthread_mutex_lock(addr_of_mut!((*cq).mutex));
        (*cq).async_events_completed = (*cq).async_events_completed.wrapping_add(1);
        libc::pthread_cond_signal(addr_of_mut!((*cq).cond));
        libc::pthread_mutex_unlock(addr_of_mut!((*cq).mutex));
    }
}

/// Ends the open extended poll of `w`, if any (publishing what it consumed), so `cq` may be
/// used again.
///
/// # Safety
/// `w` is a live wrapper.
#[inline(always)]
unsafe fn end(w: *mut Cq) {
    // SAFETY: live (above); only the `poll` field is referenced.
    let poll = unsafe { &mut *addr_of_mut!((*w).poll) };
    if poll.is_some() {
        *poll = None;
    }
}

/// The uverbs CQ of an `ibv_cq` (or `ibv_cq_ex`) this library returned, for the verbs that
/// name CQs (QPs, SRQs): None for NULL. Ends an open extended poll on it first.
///
/// # Safety
/// `p` is NULL or a live CQ from `ibv_create_cq(_ex)`; the reference is used while it lives
/// and no extended poll is started on it meanwhile.
pub unsafe fn cq_mut<'a>(p: *mut ibv_cq) -> Option<&'a mut uverbs::Cq> {
    let w = p as *mut Cq;
    if w.is_null() {
        return None;
    }
    // SAFETY: a live wrapper (above): the poll ends, then only the `cq` field is referenced
    // (ManuallyDrop is repr(transparent)).
    unsafe {
        end(w);
        Some(&mut *addr_of_mut!((*w).cq).cast::<uverbs::Cq>())
    }
}

/// [`cq_mut`], shared (a QP whose send and receive CQ are one names it twice).
///
/// # Safety
/// As [`cq_mut`].
pub unsafe fn cq_ref<'a>(p: *mut ibv_cq) -> Option<&'a uverbs::Cq> {
    // SAFETY: as cq_mut.
    unsafe { cq_mut(p).map(|c| &*c) }
}

/// The open extended poll of a CQ (between `start_poll` and `end_poll`), for the provider
/// readers of other modules (`efadv_wc_read_sgid`); None when none is open.
///
/// # Safety
/// `p` is a live CQ from `ibv_create_cq(_ex)`; the reference is dropped before the next call
/// on the CQ.
pub unsafe fn open_poll<'a>(p: *mut ibv_cq_ex) -> Option<&'a PollCq<'static>> {
    // SAFETY: a live wrapper (above); only the `poll` field is referenced.
    unsafe { (*addr_of_mut!((*(p as *mut Cq)).poll)).as_ref() }
}

// ----- completion channels ------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    guard("ibv_create_comp_channel", ptr::null_mut(), || {
        // SAFETY: the program passes a context it opened.
        let Some(c) = (unsafe { context(ctx) }) else {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        };
        match c.ctx.create_comp_channel() {
            Ok(ch) => Box::into_raw(Box::new(CompChannel {
                ibv: ibv_comp_channel {
                    context: ctx,
                    fd: ch.fd().as_raw_fd(),
                    refcnt: 0,
                },
                ch,
            })) as *mut ibv_comp_channel,
            Err(e) => {
                set_errno(report(&e));
                ptr::null_mut()
            }
        }
    })
}

/// Runs `f` under the context's `mutex`, which guards the channels' `refcnt` (as in
/// rdma-core).
///
/// # Safety
/// `ctx` is a live context.
unsafe fn under_context_mutex<T>(ctx: *mut ibv_context, f: impl FnOnce() -> T) -> T {
    // SAFETY: a live context's mutex, initialised when it was opened.
    let m = unsafe { addr_of_mut!((*ctx).mutex) };
    // SAFETY: as above; locked and unlocked by this thread around `f`.
    unsafe { libc::pthread_mutex_lock(m) };
    let r = f();
    // SAFETY: locked above by this thread.
    unsafe { libc::pthread_mutex_unlock(m) };
    r
}

/// Adds `d` to the `refcnt` of channel `ch` (NULL: none).
///
/// # Safety
/// `ch` is NULL or a live channel.
unsafe fn channel_ref(ch: *mut ibv_comp_channel, d: c_int) {
    if ch.is_null() {
        return;
    }
    // SAFETY: a live channel (above), whose context outlives it.
    unsafe { under_context_mutex((*ch).context, || (*ch).refcnt += d) };
}

/// Destroys a channel; `EBUSY` while CQs use it (`refcnt`), as rdma-core.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    guard("ibv_destroy_comp_channel", libc::EIO, || {
        if channel.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live channel the program gives up unless it is in use; refcnt is read
        // and the channel freed under the context mutex, as CQ creation and destroy change
        // refcnt under it.
        unsafe {
            under_context_mutex((*channel).context, || {
                if (*channel).refcnt != 0 {
                    return libc::EBUSY;
                }
                drop(Box::from_raw(channel as *mut CompChannel));
                0
            })
        }
    })
}

/// `ibv_get_cq_event`: waits for the next completion event on `channel` (a blocking read, or
/// `EAGAIN` at once when the program made the fd non-blocking, as `read(2)` behaves), then
/// returns the CQ and its `cq_context`: 0, or -1 with errno set. A signal handler ends the
/// wait with `EINTR` unless it was installed with `SA_RESTART`, as it ends libibverbs' `read`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    guard("ibv_get_cq_event", -1, || {
        // SAFETY: NULL or a live channel the program created.
        let Some(ch) = (unsafe { comp_channel(channel) }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if cq.is_null() || cq_context.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // One read(2) of the channel's fd, as libibverbs: blocking unless the program made the
        // fd non-blocking (EAGAIN), ended by a signal handler as such a read is (EINTR unless
        // the handler was installed with SA_RESTART).
        loop {
            let ev = match ch.ch.read_cq_event() {
                Ok(ev) => ev,
                Err(e) => {
                    set_errno(report(&e));
                    return -1;
                }
            };
            let w = ev.cq_context as usize as *mut Cq;
            if w.is_null() {
                // The CQ is gone (the kernel drops a destroyed CQ's events; only a race leaves
                // one): no CQ to return, wait for the next.
                continue;
            }
            // SAFETY: the uverbs CQ's context is its live wrapper's address (set at creation);
            // the out pointers are the program's to fill.
            unsafe {
                *cq = w as *mut ibv_cq;
                *cq_context = (*w).ibv.cq_context;
            }
            return 0;
        }
    })
}

/// `ibv_ack_cq_events`: counts `nevents` events of `cq` acknowledged, which
/// [`ibv_destroy_cq`] waits for (under the CQ's mutex, as rdma-core).
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    guard("ibv_ack_cq_events", (), || {
        if cq.is_null() {
            return;
        }
        // SAFETY: a live CQ; its mutex and cond were initialised at creation, and
        // comp_events_completed is only changed under the mutex.
        unsafe {
            libc::pthread_mutex_lock(addr_of_mut!((*cq).mutex));
            (*cq).comp_events_completed = (*cq).comp_events_completed.wrapping_add(nevents);
            libc::pthread_cond_signal(addr_of_mut!((*cq).cond));
            libc::pthread_mutex_unlock(addr_of_mut!((*cq).mutex));
        }
    })
}

// ----- create, resize, destroy --------------------------------------------------------------

/// The checks of `ibv_create_cq_ex` (libibverbs' and its providers'): the kernel flags the
/// attributes ask for, or the refusal.
fn create_flags(attr: &ibv_cq_init_attr_ex) -> uverbs::Result<u32> {
    let op = "create_cq_ex";
    if attr.wc_flags & !IBV_WC_STANDARD_FLAGS != 0 {
        return Err(eopnotsupp(
            op,
            "wc_flags asks for a field uverbs does not read (completion timestamps, cvlan, \
             flow tag, tag matching): only IBV_WC_STANDARD_FLAGS",
        ));
    }
    if attr.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0 {
        return Err(eopnotsupp(op, "unknown comp_mask bits"));
    }
    if attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 {
        return Err(eopnotsupp(op, "parent domains are not supported"));
    }
    let mut flags = 0;
    if attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        if attr.flags & !(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)
            != 0
        {
            return Err(eopnotsupp(op, "unknown flags"));
        }
        if attr.flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN != 0 {
            flags |= IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN;
        }
    }
    Ok(flags)
}

/// Creates a CQ for `ibv_create_cq(_ex)` (and `efadv_create_cq`, whose `make` is EFA's
/// create): the generic checks of `attr`, the uverbs CQ `make` creates, its C wrapper.
/// Returns the `ibv_cq_ex`, or NULL with errno set.
///
/// # Safety
/// `ctx` is NULL or a live context; `attr` NULL or valid for reads, its `channel` NULL or a
/// live channel.
pub unsafe fn create_with(
    ctx: *mut ibv_context,
    attr: *const ibv_cq_init_attr_ex,
    make: impl FnOnce(&uverbs::Context, &uverbs::CqInitAttr<'_>) -> uverbs::Result<uverbs::Cq>,
) -> *mut ibv_cq_ex {
    // SAFETY: NULL or live (above).
    let Some(c) = (unsafe { context(ctx) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    // SAFETY: NULL or valid (above).
    let Some(attr) = (unsafe { attr.as_ref() }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    let flags = match create_flags(attr) {
        Ok(f) => f,
        Err(e) => {
            set_errno(report(&e));
            return ptr::null_mut();
        }
    };
    // SAFETY: NULL or a live channel (above).
    let ch = unsafe { comp_channel(attr.channel) };
    let uattr = uverbs::CqInitAttr {
        cqe: attr.cqe,
        channel: ch.map(|c| &c.ch),
        comp_vector: attr.comp_vector,
        flags,
        cq_context: 0,
    };
    // rxe's guard-free common steps, or the guarded entry points directly (EFA).
    let rxe = matches!(c.ctx.provider(), uverbs::ProviderInfo::Rxe);
    let cq = match make(&c.ctx, &uattr) {
        Ok(cq) => cq,
        Err(e) => {
            set_errno(report(&e));
            return ptr::null_mut();
        }
    };
    let ibv = ibv_cq_ex {
        context: ctx,
        channel: attr.channel,
        cq_context: attr.cq_context,
        handle: cq.handle(),
        cqe: cq.cqe() as c_int,
        mutex: MUTEX_INIT,
        cond: COND_INIT,
        comp_events_completed: 0,
        async_events_completed: 0,
        comp_mask: 0,
        status: 0,
        wr_id: 0,
        start_poll: Some(start_poll),
        next_poll: Some(if rxe { next_poll } else { next_poll_guarded }),
        end_poll: Some(end_poll),
        read_opcode: Some(read_opcode),
        read_vendor_err: Some(read_vendor_err),
        read_byte_len: Some(read_byte_len),
        read_imm_data: Some(read_imm_data),
        read_qp_num: Some(read_qp_num),
        read_src_qp: Some(read_src_qp),
        read_wc_flags: Some(read_wc_flags),
        read_slid: Some(read_slid),
        read_sl: Some(read_sl),
        read_dlid_path_bits: Some(read_dlid_path_bits),
        read_completion_ts: None,
        read_cvlan: None,
        read_flow_tag: None,
        read_tm_info: None,
        read_completion_wallclock_ns: None,
    };
    let w = Box::into_raw(Box::new(Cq {
        ibv,
        cq: ManuallyDrop::new(cq),
        poll: None,
        dv: DvCq {
            comp_mask: 0,
            wc_read_sgid: Some(dv_read_sgid),
            wc_is_unsolicited: Some(dv_is_unsolicited),
        },
    }));
    // SAFETY: `w` is the fresh box; events name it from now on. The channel is live (above).
    unsafe {
        (*w).cq.set_cq_context(w as usize as u64);
        channel_ref(attr.channel, 1);
    }
    w as *mut ibv_cq_ex
}

/// `verbs_context.create_cq_ex` (`ibv_create_cq_ex`). Every CQ has all the standard readers
/// (rdma-core's providers set those `wc_flags` asks for); the others stay NULL, and asking for
/// them is refused with `EOPNOTSUPP`, as rxe and EFA refuse them.
pub unsafe extern "C" fn create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    guard("ibv_create_cq_ex", ptr::null_mut(), || {
        // SAFETY: the program's context and attributes.
        unsafe { create_with(ctx, attr, |c, a| c.create_cq_ex(a)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    guard("ibv_create_cq", ptr::null_mut(), || {
        if cqe < 0 || comp_vector < 0 {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
        let attr = ibv_cq_init_attr_ex {
            cqe: cqe as u32,
            cq_context,
            channel,
            comp_vector: comp_vector as u32,
            wc_flags: 0,
            comp_mask: 0,
            flags: 0,
            parent_domain: ptr::null_mut(),
        };
        // SAFETY: the program's context and channel.
        unsafe { create_with(ctx, &attr, |c, a| c.create_cq_ex(a)) as *mut ibv_cq }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    guard("ibv_resize_cq", libc::EIO, || {
        if cqe <= 0 {
            return libc::EINVAL;
        }
        // SAFETY: NULL or a live CQ of the program's.
        let Some(c) = (unsafe { cq_mut(cq) }) else {
            return libc::EINVAL;
        };
        match c.resize(cqe as u32) {
            Ok(()) => {
                // SAFETY: a live CQ (above); `cqe` is a field apart from `cq`.
                unsafe { (*cq).cqe = c.cqe() as c_int };
                0
            }
            Err(e) => report(&e),
        }
    })
}

/// `ibv_destroy_cq`: destroys the kernel CQ (`EBUSY` while QPs use it, the CQ then stays
/// usable), then, as rdma-core, waits until the program has acknowledged every completion
/// and async event the kernel delivered for it (`ibv_ack_cq_events`, `ibv_ack_async_event`).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    guard("ibv_destroy_cq", libc::EIO, || {
        let w = cq as *mut Cq;
        if w.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live CQ the program gives up on success: the open poll ends before `cq`
        // is taken; the mutex, cond, counts and channel are fields apart from `cq`, reached
        // through the raw pointer while the wrapper is still allocated (destroy_in_place frees
        // it after the closure).
        unsafe {
            end(w);
            crate::util::destroy_in_place(
                w,
                |w| &mut w.cq,
                |c| {
                    let d = c.destroy()?;
                    let m = addr_of_mut!((*cq).mutex);
                    libc::pthread_mutex_lock(m);
                    while (*cq).comp_events_completed != d.comp_events_reported
                        || (*cq).async_events_completed != d.async_events_reported
                    {
                        libc::pthread_cond_wait(addr_of_mut!((*cq).cond), m);
                    }
                    libc::pthread_mutex_unlock(m);
                    channel_ref((*cq).channel, -1);
                    Ok(d)
                },
            )
        }
    })
}

// ----- the data path ------------------------------------------------------------------------

/// C's `ibv_wc.imm_data` is `__be32`; uverbs' is in host order.
#[inline(always)]
fn imm_to_c(wc_flags: WcFlags, imm: u32) -> u32 {
    if wc_flags.contains(WcFlags::WITH_IMM) {
        imm.to_be()
    } else {
        imm
    }
}

/// `ops.poll_cq` (`ibv_poll_cq`) of an rxe context: polls up to `num_entries` completions
/// straight into the caller's `wc` array (immediate data big-endian from the provider's own
/// decode, [`uverbs::Cq::poll_net_imm`]); returns how many, or a negative errno when the ring
/// is corrupt.
///
/// A poll of one that the provider answers without a load of the device's index or a call
/// (rxe: a completion already counted ready) is taken first, outside the panic guard: loads,
/// stores and compares that cannot panic, and no stack frame. Everything else is
/// [`poll_cq_guarded`], out of line.
pub unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    let w = cq as *mut Cq;
    if num_entries == 1 && !w.is_null() && !wc.is_null() {
        // SAFETY: a live CQ (the program's, through its context's ops); with no extended poll
        // open (checked), nothing borrows `cq`; `wc` is the caller's writable ibv_wc (=
        // uverbs::Wc, plain integers).
        unsafe {
            if (*addr_of_mut!((*w).poll)).is_none()
                && (*addr_of_mut!((*w).cq).cast::<uverbs::Cq>()).poll_ready_one_net_imm(&mut *wc)
            {
                return 1;
            }
        }
    }
    // SAFETY: as the caller's.
    unsafe { poll_cq_guarded(cq, num_entries, wc) }
}

/// `ops.poll_cq` (`ibv_poll_cq`) of an EFA context: [`poll_cq_guarded`] with EFA's poll of
/// one completion inline here, so that for one completion the entry point is the provider's
/// poll itself (one frame, as libefa's `efa_poll_cq`): no second call, no `Result` passed
/// back through a frame. Several completions are the provider's out-of-line poll, as there.
///
/// The guard costs nothing on this path: the common case makes no call, and the calls it can
/// make (the provider's out-of-line rest, the error report) only add unwind-table entries.
pub unsafe extern "C" fn poll_cq_efa(
    cq: *mut ibv_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    guard("ibv_poll_cq", -libc::EIO, || {
        // Every refused argument in one test, answered out of line: no answer (0, EINVAL) is
        // computed on the common path.
        if num_entries <= 0 || cq.is_null() || wc.is_null() {
            return poll_bad_args(num_entries);
        }
        // SAFETY: a live CQ (the program's, through its context's ops), not NULL (above).
        let Some(c) = (unsafe { cq_mut(cq) }) else {
            return poll_bad_args(num_entries);
        };
        // SAFETY: the caller passes an array of `num_entries` ibv_wc (= uverbs::Wc, plain
        // integers with no invalid values), written and not read by poll.
        let wcs = unsafe { core::slice::from_raw_parts_mut(wc, num_entries as usize) };
        match c.poll_net_imm_inline_one(wcs) {
            Ok(n) => n as c_int,
            Err(e) => poll_failed(e),
        }
    })
}

/// `ops.poll_cq` (`ibv_poll_cq`) past the common case of [`poll_cq`] (rxe): the whole poll
/// under the guard.
#[inline(never)]
pub unsafe extern "C" fn poll_cq_guarded(
    cq: *mut ibv_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    guard("ibv_poll_cq", -libc::EIO, || {
        if num_entries <= 0 {
            return 0;
        }
        // SAFETY: a live CQ (the program's, through its context's ops).
        let Some(c) = (unsafe { cq_mut(cq) }) else {
            return -libc::EINVAL;
        };
        if wc.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: the caller passes an array of `num_entries` ibv_wc (= uverbs::Wc, plain
        // integers with no invalid values), written and not read by poll.
        let wcs = unsafe { core::slice::from_raw_parts_mut(wc, num_entries as usize) };
        match c.poll_net_imm(wcs) {
            Ok(n) => n as c_int,
            Err(e) => poll_failed(e),
        }
    })
}

/// [`poll_cq_efa`]'s answer to refused arguments, out of line: 0 for no entries asked
/// (as rdma-core, before looking at the CQ), else EINVAL (a NULL CQ or array).
#[cold]
#[inline(never)]
fn poll_bad_args(num_entries: c_int) -> c_int {
    if num_entries <= 0 {
        0
    } else {
        -libc::EINVAL
    }
}

/// The negative errno of a failed poll (a corrupt ring), out of line.
#[cold]
#[inline(never)]
fn poll_failed(e: uverbs::Error) -> c_int {
    -failed(e)
}

/// `ops.req_notify_cq` (`ibv_req_notify_cq`).
pub unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    guard("ibv_req_notify_cq", libc::EIO, || {
        // SAFETY: a live CQ of the program's.
        match unsafe { cq_mut(cq) } {
            Some(c) => crate::util::ret(c.req_notify(solicited_only != 0)),
            None => libc::EINVAL,
        }
    })
}

/// Copies the current completion's `wr_id` and `status` into the C struct, where
/// `ibv_cq_ex` readers find them.
///
/// # Safety
/// `w` is a live wrapper.
#[inline(always)]
unsafe fn show(w: *mut Cq, p: &PollCq<'_>) {
    // SAFETY: live (above); `ibv` is a field apart from `cq` and `poll`.
    unsafe {
        (*w).ibv.wr_id = p.wr_id();
        (*w).ibv.status = p.status().0 as c_int;
    }
}

/// `ibv_cq_ex.start_poll`: 0 and the first completion, `ENOENT` when the CQ is empty, or the
/// errno of a corrupt ring. A poll left open is ended first.
unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    guard("ibv_start_poll", libc::EIO, || {
        let w = cq as *mut Cq;
        // SAFETY: NULL or the program's attributes.
        if w.is_null() || unsafe { attr.as_ref() }.is_some_and(|a| a.comp_mask != 0) {
            return libc::EINVAL;
        }
        // SAFETY: a live CQ. The cursor borrows only the `cq` field, for as long as it sits
        // in `poll`: every other use of `cq` ends it first (module documentation), and the
        // wrapper outlives it (destroy ends it before freeing).
        unsafe {
            end(w);
            let c: &'static mut uverbs::Cq = &mut *addr_of_mut!((*w).cq).cast::<uverbs::Cq>();
            match c.start_poll() {
                Ok(Some(p)) => {
                    show(w, &p);
                    *addr_of_mut!((*w).poll) = Some(p);
                    0
                }
                Ok(None) => libc::ENOENT,
                Err(e) => failed(e),
            }
        }
    })
}

/// `ibv_cq_ex.next_poll` of an rxe CQ: 0 and the next completion, or `ENOENT` when there is
/// none.
///
/// The common step (rxe: the next completion known ready) is taken first, outside the panic
/// guard: loads, stores and compares that cannot panic, with no call, so it needs no stack
/// frame. Everything else is [`next_poll_guarded`], one provider dispatch moving the cursor
/// and reading what the C struct shows.
unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    let w = cq as *mut Cq;
    // SAFETY: a live CQ; only the `poll` field is referenced, then `ibv`'s (fields apart
    // from `cq`, which the cursor borrows).
    unsafe {
        if let Some(p) = (*addr_of_mut!((*w).poll)).as_mut() {
            if let Some((wr_id, status)) = p.next_poll_ready() {
                (*w).ibv.wr_id = wr_id;
                (*w).ibv.status = status.0 as c_int;
                return 0;
            }
        }
    }
    // SAFETY: the program's live CQ (above).
    unsafe { next_poll_guarded(cq) }
}

/// `ibv_cq_ex.next_poll` of an EFA CQ (whose every step is a call into the provider), and
/// [`next_poll`] past its common step: the whole step under the guard.
#[inline(never)]
unsafe extern "C" fn next_poll_guarded(cq: *mut ibv_cq_ex) -> c_int {
    guard("ibv_next_poll", libc::EIO, || {
        let w = cq as *mut Cq;
        // SAFETY: a live CQ; only the `poll` field is referenced, then `ibv`'s.
        unsafe {
            let Some(p) = (*addr_of_mut!((*w).poll)).as_mut() else {
                return libc::ENOENT;
            };
            match p.next_poll_id() {
                Ok(Some((wr_id, status))) => {
                    (*w).ibv.wr_id = wr_id;
                    (*w).ibv.status = status.0 as c_int;
                    0
                }
                Ok(None) => libc::ENOENT,
                Err(e) => failed(e),
            }
        }
    })
}

/// The errno of a failed `start_poll`/`next_poll` (a corrupt ring), out of line.
#[cold]
#[inline(never)]
fn failed(e: uverbs::Error) -> c_int {
    report(&e)
}

/// `ibv_cq_ex.end_poll`.
unsafe extern "C" fn end_poll(cq: *mut ibv_cq_ex) {
    // SAFETY: a live CQ of the program's.
    guard("ibv_end_poll", (), || unsafe { end(cq as *mut Cq) })
}

/// Defines an `ibv_cq_ex.read_*` function: the field of the current completion (0 when no
/// poll is open).
macro_rules! reader {
    ($name:ident, $op:literal, $ty:ty, |$p:ident| $e:expr) => {
        #[doc = concat!("`", $op, "`.")]
        unsafe extern "C" fn $name(cq: *mut ibv_cq_ex) -> $ty {
            guard($op, 0, || {
                // SAFETY: a live CQ of the program's; only the `poll` field is referenced.
                match unsafe { open_poll(cq) } {
                    Some($p) => $e,
                    None => 0,
                }
            })
        }
    };
}

reader!(
    read_opcode,
    "ibv_wc_read_opcode",
    c_int,
    |p| p.read_opcode().0 as c_int
);
reader!(read_vendor_err, "ibv_wc_read_vendor_err", u32, |p| p
    .read_vendor_err());
reader!(read_byte_len, "ibv_wc_read_byte_len", u32, |p| p
    .read_byte_len());
reader!(read_imm_data, "ibv_wc_read_imm_data", u32, |p| imm_to_c(
    p.read_wc_flags(),
    p.read_imm_data()
));
reader!(read_qp_num, "ibv_wc_read_qp_num", u32, |p| p.read_qp_num());
reader!(read_src_qp, "ibv_wc_read_src_qp", u32, |p| p.read_src_qp());
reader!(read_wc_flags, "ibv_wc_read_wc_flags", c_uint, |p| p
    .read_wc_flags()
    .bits());
reader!(read_slid, "ibv_wc_read_slid", u32, |p| u32::from(
    p.read_slid()
));
reader!(read_sl, "ibv_wc_read_sl", u8, |p| p.read_sl());
reader!(read_dlid_path_bits, "ibv_wc_read_dlid_path_bits", u8, |p| p
    .read_dlid_path_bits());

#[cfg(test)]
mod tests;
