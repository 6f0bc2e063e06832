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

// Minimal stand-in of this module's wrapper and accessor, which qp.rs uses: the real module
// defines the same names (merge: keep the real ones).
/// A SRQ as C sees it and the uverbs object behind it.
#[repr(C)]
pub struct Srq {
    pub ibv: ibv_srq,
    pub srq: core::mem::ManuallyDrop<uverbs::Srq>,
}

/// The [`Srq`] of a `ibv_srq` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live object of this library, not used elsewhere meanwhile.
pub unsafe fn srq<'a>(p: *mut ibv_srq) -> Option<&'a mut Srq> {
    // SAFETY: see above; ibv is the first field of the repr(C) wrapper.
    unsafe { (p as *mut Srq).as_mut() }
}
