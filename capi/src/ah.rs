//! (skeleton: ah)
use crate::abi::*;

// Minimal stand-in of this module's wrapper and accessor, which qp.rs uses: the real module
// defines the same names (merge: keep the real ones).
/// An AH as C sees it and the uverbs object behind it.
#[repr(C)]
pub struct Ah {
    pub ibv: ibv_ah,
    pub ah: core::mem::ManuallyDrop<uverbs::Ah>,
}

/// The [`Ah`] of a `ibv_ah` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live object of this library, not used elsewhere meanwhile.
pub unsafe fn ah<'a>(p: *mut ibv_ah) -> Option<&'a Ah> {
    // SAFETY: see above; ibv is the first field of the repr(C) wrapper.
    unsafe { (p as *mut Ah).as_ref() }
}
