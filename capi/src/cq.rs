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
