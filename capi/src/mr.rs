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

// Minimal stand-in of this module's wrapper and accessor, which efa/mod.rs uses
// (`efadv_query_mr`): the real module defines the same names (merge: keep the real ones).
/// An MR as C sees it and the uverbs object behind it.
#[repr(C)]
pub struct Mr {
    pub ibv: ibv_mr,
    pub mr: core::mem::ManuallyDrop<uverbs::Mr>,
}

/// The [`Mr`] of a `ibv_mr` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live object of this library, not used elsewhere meanwhile.
pub unsafe fn mr<'a>(p: *mut ibv_mr) -> Option<&'a Mr> {
    // SAFETY: see above; ibv is the first field of the repr(C) wrapper.
    unsafe { (p as *mut Mr).as_ref() }
}
