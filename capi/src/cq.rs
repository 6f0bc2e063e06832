//! (skeleton: cq)
use core::ffi::c_int;

use crate::abi::*;

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn poll_cq(_: *mut ibv_cq, _: c_int, _: *mut ibv_wc) -> c_int {
    libc::EOPNOTSUPP
}

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn req_notify_cq(_: *mut ibv_cq, _: c_int) -> c_int {
    libc::EOPNOTSUPP
}

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn create_cq_ex(
    _: *mut ibv_context,
    _: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    core::ptr::null_mut()
}

// ---- Stand-ins (branch capi-efa) for what the real cq.rs provides; replaced at merge. ----

use core::ffi::c_void;
use core::mem::ManuallyDrop;

use crate::device::Context;

/// STAND-IN: a CQ as C sees it and the uverbs CQ behind it (the real one has more fields).
#[repr(C)]
pub struct Cq {
    pub ibv: ibv_cq_ex,
    pub cq: ManuallyDrop<uverbs::Cq>,
}

impl Cq {
    /// STAND-IN: runs `f` on the open extended poll (between `ibv_start_poll` and
    /// `ibv_end_poll`) positioned on the current completion; None when no poll is open.
    pub(crate) fn with_cursor<R>(&self, _f: impl FnOnce(&uverbs::PollCq<'_>) -> R) -> Option<R> {
        None
    }
}

/// STAND-IN: boxes `cq` as the `ibv_cq_ex` of `ctx` (the real one fills the function table).
pub(crate) fn wrap_cq(
    ctx: &Context,
    cq: uverbs::Cq,
    user_cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _ex: bool,
) -> *mut ibv_cq_ex {
    // SAFETY: all-zero is a valid ibv_cq_ex: NULL pointers and function pointers, zeros.
    let mut ibv: ibv_cq_ex = unsafe { core::mem::zeroed() };
    ibv.context = ctx.ibv();
    ibv.channel = channel;
    ibv.cq_context = user_cq_context;
    ibv.handle = cq.handle();
    ibv.cqe = cq.cqe() as c_int;
    Box::into_raw(Box::new(Cq {
        ibv,
        cq: ManuallyDrop::new(cq),
    })) as *mut ibv_cq_ex
}

/// STAND-IN: the [`Cq`] of an `ibv_cq` (or `ibv_cq_ex`) this library returned.
///
/// # Safety
/// `p` is NULL or a live CQ of this library.
pub(crate) unsafe fn cq<'a>(p: *mut ibv_cq) -> Option<&'a mut Cq> {
    // SAFETY: see above; ibv is the first field of the repr(C) Cq.
    unsafe { (p as *mut Cq).as_mut() }
}
