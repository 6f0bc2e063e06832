//! Protection domains: `ibv_alloc_pd`, `ibv_dealloc_pd`.

use core::ffi::c_int;
use core::mem::ManuallyDrop;
use core::ptr;

use crate::abi::*;
use crate::device::context;
use crate::util::{destroy_in_place, guard, ptr_or_errno, set_errno};

/// A PD as C sees it and the uverbs PD behind it.
#[repr(C)]
pub struct Pd {
    pub ibv: ibv_pd,
    pub pd: ManuallyDrop<uverbs::Pd>,
}

/// The [`Pd`] of an `ibv_pd` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live PD from [`ibv_alloc_pd`].
pub unsafe fn pd<'a>(p: *mut ibv_pd) -> Option<&'a Pd> {
    // SAFETY: see above; ibv is the first field of the repr(C) Pd.
    unsafe { (p as *const Pd).as_ref() }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    guard("ibv_alloc_pd", ptr::null_mut(), || {
        // SAFETY: the program passes a context it opened.
        let Some(c) = (unsafe { context(ctx) }) else {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        };
        ptr_or_errno(c.ctx.alloc_pd().map(|pd| {
            let handle = pd.handle();
            Box::into_raw(Box::new(Pd {
                ibv: ibv_pd {
                    context: ctx,
                    handle,
                },
                pd: ManuallyDrop::new(pd),
            })) as *mut ibv_pd
        }))
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(p: *mut ibv_pd) -> c_int {
    guard("ibv_dealloc_pd", libc::EIO, || {
        if p.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program gives up a PD it allocated (boxed by ibv_alloc_pd).
        unsafe { destroy_in_place(p as *mut Pd, |w| &mut w.pd, uverbs::Pd::dealloc) }
    })
}
