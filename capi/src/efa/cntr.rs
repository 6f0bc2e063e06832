//! `efadv_create_comp_cntr` (EFA_1.7): a completion counter as master's `struct
//! ibv_comp_cntr`, followed by the uverbs counter.
//!
//! The counter's other calls (`ibv_destroy_comp_cntr`, `ibv_read_comp_cntr`, `ibv_set_*`,
//! `ibv_inc_*`, `ibv_qp_attach_comp_cntr`) are libibverbs' and reach the uverbs counter
//! through [`comp_cntr`].
//!
//! A word placed in external memory by virtual address (`EFADV_MEMORY_LOCATION_VA` with
//! `EFADV_COMP_CNTR_INIT_WITH_*_EXTERNAL_MEM`) is refused with `EOPNOTSUPP`: uverbs keeps a
//! counter's words in memory it owns, or in a dmabuf (`EFADV_MEMORY_LOCATION_DMABUF`).

use core::mem::ManuallyDrop;
use core::ptr;
use std::os::fd::BorrowedFd;

use uverbs::{EfaCntrMem, EfaCompCntr, EfaCompCntrInitAttr};

use super::abi::*;
use super::{efa_context, read_in};
use crate::abi::ibv_context;
use crate::util::{einval, eopnotsupp, guard, ptr_or_errno, set_errno};

/// A completion counter as C sees it and the uverbs counter behind it.
#[repr(C)]
pub struct CompCntr {
    pub ibv: ibv_comp_cntr,
    pub cntr: ManuallyDrop<EfaCompCntr>,
}

/// The [`CompCntr`] of an `ibv_comp_cntr` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live counter from [`efadv_create_comp_cntr`].
#[allow(dead_code)] // for libibverbs' ibv_*_comp_cntr calls
pub(crate) unsafe fn comp_cntr<'a>(p: *mut ibv_comp_cntr) -> Option<&'a mut CompCntr> {
    // SAFETY: see above; ibv is the first field of the repr(C) CompCntr.
    unsafe { (p as *mut CompCntr).as_mut() }
}

/// Where one counter word lives, from its `struct efadv_memory_location` when `external`.
fn location(
    op: &'static str,
    external: bool,
    m: &efadv_memory_location,
) -> uverbs::Result<EfaCntrMem<'static>> {
    if m.type_ != EFADV_MEMORY_LOCATION_VA && m.type_ != EFADV_MEMORY_LOCATION_DMABUF {
        return Err(eopnotsupp(op, "unknown memory location type"));
    }
    if !external {
        return Ok(EfaCntrMem::Owned);
    }
    if m.type_ == EFADV_MEMORY_LOCATION_VA {
        return Err(eopnotsupp(
            op,
            "counter words at a caller's virtual address",
        ));
    }
    if m.dmabuf.fd < 0 {
        return Err(einval(op, "dmabuf.fd"));
    }
    Ok(EfaCntrMem::Dmabuf {
        // SAFETY: the program keeps its dmabuf open during the call; the kernel takes its own
        // reference when it creates the counter.
        fd: unsafe { BorrowedFd::borrow_raw(m.dmabuf.fd) },
        offset: m.dmabuf.offset,
    })
}

#[no_mangle]
pub unsafe extern "C" fn efadv_create_comp_cntr(
    ibvctx: *mut ibv_context,
    attr: *mut ibv_comp_cntr_init_attr,
    efa_attr: *mut efadv_comp_cntr_init_attr,
    inlen: u32,
) -> *mut ibv_comp_cntr {
    guard("efadv_create_comp_cntr", ptr::null_mut(), || {
        let op = "efadv_create_comp_cntr";
        // SAFETY: the program passes a context it opened.
        let c = match unsafe { efa_context(ibvctx) } {
            Ok(c) => c,
            Err(e) => {
                set_errno(e);
                return ptr::null_mut();
            }
        };
        let need = core::mem::offset_of!(efadv_comp_cntr_init_attr, err_cntr_ext_mem)
            + core::mem::size_of::<efadv_memory_location>();
        if attr.is_null() || efa_attr.is_null() || (inlen as usize) < need {
            return ptr_or_errno(Err(einval(op, "attr, efa_attr or inlen")));
        }
        // SAFETY: the caller's struct has `inlen` bytes.
        let Some(e) = (unsafe { read_in(efa_attr, inlen) }) else {
            return ptr_or_errno(Err(einval(op, "efa_attr has non-zero bytes past its end")));
        };
        // SAFETY: the program passes its generic attributes.
        let a = unsafe { *attr };
        let supported = EFADV_COMP_CNTR_INIT_WITH_COMP_EXTERNAL_MEM
            | EFADV_COMP_CNTR_INIT_WITH_ERR_EXTERNAL_MEM;
        if a.comp_mask != 0
            || a.flags != 0
            || a.type_ != IBV_COMP_CNTR_TYPE_WRS
            || e.comp_mask != 0
            || e.flags & !supported != 0
        {
            return ptr_or_errno(Err(eopnotsupp(op, "unsupported type or flag")));
        }
        let r = (|| {
            let comp = location(
                op,
                e.flags & EFADV_COMP_CNTR_INIT_WITH_COMP_EXTERNAL_MEM != 0,
                &e.comp_cntr_ext_mem,
            )?;
            let err = location(
                op,
                e.flags & EFADV_COMP_CNTR_INIT_WITH_ERR_EXTERNAL_MEM != 0,
                &e.err_cntr_ext_mem,
            )?;
            let cntr = c
                .ctx
                .efadv_create_comp_cntr(&EfaCompCntrInitAttr { comp, err })?;
            Ok(Box::into_raw(Box::new(CompCntr {
                ibv: ibv_comp_cntr {
                    context: ibvctx,
                    handle: cntr.handle(),
                },
                cntr: ManuallyDrop::new(cntr),
            })) as *mut ibv_comp_cntr)
        })();
        ptr_or_errno(r)
    })
}

/// `efadv_create_comp_cntr` under the name the `libefa.so.1` shim calls.
#[no_mangle]
pub unsafe extern "C" fn uverbs_efadv_create_comp_cntr(
    ibvctx: *mut ibv_context,
    attr: *mut ibv_comp_cntr_init_attr,
    efa_attr: *mut efadv_comp_cntr_init_attr,
    inlen: u32,
) -> *mut ibv_comp_cntr {
    // SAFETY: the caller's promises are the forwarded call's.
    unsafe { efadv_create_comp_cntr(ibvctx, attr, efa_attr, inlen) }
}
