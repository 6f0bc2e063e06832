//! (skeleton: xrcd)
use core::ffi::c_int;

use crate::abi::*;

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn open_xrcd(
    _: *mut ibv_context,
    _: *mut ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    core::ptr::null_mut()
}

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn close_xrcd(_: *mut ibv_xrcd) -> c_int {
    libc::EOPNOTSUPP
}
