//! (skeleton: srq)
use core::ffi::c_int;

use crate::abi::*;

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn post_srq_recv(
    _: *mut ibv_srq,
    _: *mut ibv_recv_wr,
    _: *mut *mut ibv_recv_wr,
) -> c_int {
    libc::EOPNOTSUPP
}

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn create_srq_ex(
    _: *mut ibv_context,
    _: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    core::ptr::null_mut()
}

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn get_srq_num(_: *mut ibv_srq, _: *mut u32) -> c_int {
    libc::EOPNOTSUPP
}
