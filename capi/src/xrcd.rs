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

// Minimal stand-in of this module's wrapper and accessor, which qp.rs uses: the real module
// defines the same names (merge: keep the real ones).
/// A XRCD as C sees it and the uverbs object behind it.
#[repr(C)]
pub struct Xrcd {
    pub ibv: ibv_xrcd,
    pub xrcd: core::mem::ManuallyDrop<uverbs::Xrcd>,
}

/// The [`Xrcd`] of a `ibv_xrcd` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live object of this library, not used elsewhere meanwhile.
pub unsafe fn xrcd<'a>(p: *mut ibv_xrcd) -> Option<&'a Xrcd> {
    // SAFETY: see above; ibv is the first field of the repr(C) wrapper.
    unsafe { (p as *mut Xrcd).as_ref() }
}
