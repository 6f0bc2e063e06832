//! (skeleton: ah)

// ---- Stand-ins (branch capi-efa) for what the real ah.rs provides; replaced at merge. ----

use core::mem::ManuallyDrop;

use crate::abi::ibv_ah;

/// STAND-IN: an AH as C sees it and the uverbs AH behind it.
#[repr(C)]
pub struct Ah {
    pub ibv: ibv_ah,
    pub ah: ManuallyDrop<uverbs::Ah>,
}

/// STAND-IN: the [`Ah`] of an `ibv_ah` this library returned.
///
/// # Safety
/// `p` is NULL or a live AH of this library.
pub(crate) unsafe fn ah<'a>(p: *mut ibv_ah) -> Option<&'a Ah> {
    // SAFETY: see above; ibv is the first field of the repr(C) Ah.
    unsafe { (p as *const Ah).as_ref() }
}
