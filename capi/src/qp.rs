//! (skeleton: qp)
use core::ffi::c_int;

use crate::abi::*;

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn post_send(
    _: *mut ibv_qp,
    _: *mut ibv_send_wr,
    _: *mut *mut ibv_send_wr,
) -> c_int {
    libc::EOPNOTSUPP
}

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn post_recv(
    _: *mut ibv_qp,
    _: *mut ibv_recv_wr,
    _: *mut *mut ibv_recv_wr,
) -> c_int {
    libc::EOPNOTSUPP
}

/// Not yet implemented: EOPNOTSUPP.
pub unsafe extern "C" fn create_qp_ex(
    _: *mut ibv_context,
    _: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    core::ptr::null_mut()
}
