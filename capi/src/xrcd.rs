//! XRC domains: the `verbs_context` entries `open_xrcd` and `close_xrcd` (`ibv_open_xrcd`,
//! `ibv_close_xrcd`). rxe and EFA have no XRC: the kernel refuses and its errno is returned.

use core::ffi::c_int;
use core::mem::ManuallyDrop;
use core::ptr;
use std::os::fd::BorrowedFd;

use crate::abi::*;
use crate::device::context;
use crate::util::{destroy_in_place, einval, eopnotsupp, guard, ptr_or_errno};

/// `enum ibv_xrcd_init_attr_mask`.
const IBV_XRCD_INIT_ATTR_FD: u32 = 1 << 0;
const IBV_XRCD_INIT_ATTR_OFLAGS: u32 = 1 << 1;
const IBV_XRCD_INIT_ATTR_RESERVED: u32 = 1 << 2;

/// An XRCD as C sees it and the uverbs XRCD behind it.
#[repr(C)]
pub struct Xrcd {
    pub ibv: ibv_xrcd,
    pub xrcd: ManuallyDrop<uverbs::Xrcd>,
}

/// The [`Xrcd`] of an `ibv_xrcd` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live XRCD from [`open_xrcd`].
pub unsafe fn xrcd<'a>(p: *mut ibv_xrcd) -> Option<&'a Xrcd> {
    // SAFETY: see above; ibv is the first field of the repr(C) Xrcd.
    unsafe { (p as *const Xrcd).as_ref() }
}

/// `verbs_context.open_xrcd`: with rdma-core's checks (`ibv_cmd_open_xrcd`): an unknown
/// mask bit is EOPNOTSUPP, and both the fd and the oflags must be given (fd -1: a domain
/// private to this process).
pub unsafe extern "C" fn open_xrcd(
    ctx: *mut ibv_context,
    attr: *mut ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    guard("ibv_open_xrcd", ptr::null_mut(), || {
        // SAFETY: the program passes its context and NULL or a valid attribute.
        let (Some(c), Some(a)) = (unsafe { context(ctx) }, unsafe { attr.as_ref() }) else {
            return ptr_or_errno(Err(einval("ibv_open_xrcd", "context or attr is NULL")));
        };
        if a.comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED {
            return ptr_or_errno(Err(eopnotsupp("ibv_open_xrcd", "unknown comp_mask bits")));
        }
        let both = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        if a.comp_mask & both != both {
            return ptr_or_errno(Err(einval(
                "ibv_open_xrcd",
                "comp_mask must name both the fd and the oflags",
            )));
        }
        let fd = if a.fd == -1 {
            None
        } else {
            // SAFETY: not -1 (checked); the kernel only reads it during the call, while the
            // program holds it open (a closed one makes the kernel answer EBADF).
            Some(unsafe { BorrowedFd::borrow_raw(a.fd) })
        };
        ptr_or_errno(c.ctx.open_xrcd(fd, a.oflags as u32).map(|x| {
            Box::into_raw(Box::new(Xrcd {
                ibv: ibv_xrcd { context: ctx },
                xrcd: ManuallyDrop::new(x),
            })) as *mut ibv_xrcd
        }))
    })
}

/// `verbs_context.close_xrcd`: EBUSY (and the domain stays open) while SRQs or QPs use it.
pub unsafe extern "C" fn close_xrcd(x: *mut ibv_xrcd) -> c_int {
    guard("ibv_close_xrcd", libc::EIO, || {
        if x.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program gives up a domain it opened (boxed by open_xrcd).
        unsafe { destroy_in_place(x as *mut Xrcd, |w| &mut w.xrcd, uverbs::Xrcd::close) }
    })
}
