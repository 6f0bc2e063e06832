//! (skeleton: mr)
use core::ffi::c_int;

use crate::abi::*;

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn alloc_mw(_: *mut ibv_pd, _: c_int) -> *mut ibv_mw {
    core::ptr::null_mut()
}

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn dealloc_mw(_: *mut ibv_mw) -> c_int {
    libc::EOPNOTSUPP
}

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn bind_mw(_: *mut ibv_qp, _: *mut ibv_mw, _: *mut ibv_mw_bind) -> c_int {
    libc::EOPNOTSUPP
}

// ---- Stand-ins (branch capi-efa) for what the real mr.rs provides; replaced at merge. ----

use core::mem::ManuallyDrop;

/// STAND-IN: an MR as C sees it and the uverbs MR behind it.
#[repr(C)]
pub struct Mr {
    pub ibv: ibv_mr,
    pub mr: ManuallyDrop<uverbs::Mr>,
}

/// STAND-IN: the [`Mr`] of an `ibv_mr` this library returned.
///
/// # Safety
/// `p` is NULL or a live MR of this library.
pub(crate) unsafe fn mr<'a>(p: *mut ibv_mr) -> Option<&'a Mr> {
    // SAFETY: see above; ibv is the first field of the repr(C) Mr.
    unsafe { (p as *const Mr).as_ref() }
}
