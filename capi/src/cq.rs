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

// Minimal stand-in of this module's wrapper and accessor, which qp.rs uses: the real module
// defines the same names (merge: keep the real ones).
/// A CQ as C sees it and the uverbs object behind it.
#[repr(C)]
pub struct Cq {
    pub ibv: ibv_cq_ex,
    pub cq: core::mem::ManuallyDrop<uverbs::Cq>,
}

/// The [`Cq`] of a `ibv_cq` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live object of this library, not used elsewhere meanwhile.
pub unsafe fn cq<'a>(p: *mut ibv_cq) -> Option<&'a mut Cq> {
    // SAFETY: see above; ibv is the first field of the repr(C) wrapper.
    unsafe { (p as *mut Cq).as_mut() }
}
