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
