//! Memory regions and windows: `ibv_reg_mr` (and its iova and dmabuf forms), `ibv_rereg_mr`,
//! `ibv_dereg_mr`, the import verbs, and the context ops `alloc_mw`, `dealloc_mw`, `bind_mw`.

use core::ffi::{c_int, c_uint, c_void};
use core::mem::ManuallyDrop;
use core::ptr;
use std::os::fd::BorrowedFd;

use uverbs::{AccessFlags, MwType};

use crate::abi::*;
use crate::device::context;
use crate::pd::pd;
use crate::util::{destroy_in_place, einval, eopnotsupp, guard, ptr_or_errno, report, set_errno};

/// `IBV_ACCESS_OPTIONAL_RANGE`: access bits a device may ignore.
const IBV_ACCESS_OPTIONAL_RANGE: c_uint = 0x3ff0_0000;
/// `IBV_ACCESS_ZERO_BASED`.
const IBV_ACCESS_ZERO_BASED: c_uint = 1 << 5;

/// `enum ibv_rereg_mr_flags`.
const IBV_REREG_MR_CHANGE_TRANSLATION: c_int = 1 << 0;
const IBV_REREG_MR_CHANGE_PD: c_int = 1 << 1;
const IBV_REREG_MR_CHANGE_ACCESS: c_int = 1 << 2;
const IBV_REREG_MR_FLAGS_SUPPORTED: c_int = (IBV_REREG_MR_CHANGE_ACCESS << 1) - 1;
/// `enum ibv_rereg_mr_err_code`: what `ibv_rereg_mr` returns (errno says more).
const IBV_REREG_MR_ERR_INPUT: c_int = -1;
const IBV_REREG_MR_ERR_CMD: c_int = -4;

/// `IBV_WR_BIND_MW` of `enum ibv_wr_opcode`.
const IBV_WR_BIND_MW: c_int = 8;

/// An MR as C sees it and the uverbs MR behind it.
#[repr(C)]
pub struct Mr {
    pub ibv: ibv_mr,
    pub mr: ManuallyDrop<uverbs::Mr>,
    /// Registered from a dmabuf (`ibv_reg_dmabuf_mr`), which `ibv_rereg_mr` refuses.
    pub dmabuf: bool,
}

/// The [`Mr`] of an `ibv_mr` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live MR from one of the `ibv_reg_*mr*` functions here.
pub unsafe fn mr<'a>(p: *mut ibv_mr) -> Option<&'a Mr> {
    // SAFETY: see above; ibv is the first field of the repr(C) Mr.
    unsafe { (p as *const Mr).as_ref() }
}

/// A memory window as C sees it and the uverbs window behind it.
#[repr(C)]
pub struct Mw {
    pub ibv: ibv_mw,
    pub mw: ManuallyDrop<uverbs::Mw>,
}

/// The [`Mw`] of an `ibv_mw` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live window from [`alloc_mw`].
pub unsafe fn mw<'a>(p: *mut ibv_mw) -> Option<&'a Mw> {
    // SAFETY: see above; ibv is the first field of the repr(C) Mw.
    unsafe { (p as *const Mw).as_ref() }
}

/// Boxes a new MR of `pd` (the program's pointer) as the `ibv_mr` the program gets.
fn boxed_mr(
    p: *mut ibv_pd,
    pd: &crate::pd::Pd,
    m: uverbs::Mr,
    addr: *mut c_void,
    dmabuf: bool,
) -> *mut ibv_mr {
    let ibv = ibv_mr {
        context: pd.ibv.context,
        pd: p,
        addr,
        length: m.len(),
        handle: m.handle(),
        lkey: m.lkey(),
        rkey: m.rkey(),
    };
    Box::into_raw(Box::new(Mr {
        ibv,
        mr: ManuallyDrop::new(m),
        dmabuf,
    })) as *mut ibv_mr
}

/// `ibv_reg_mr_iova2`: registers `length` bytes at `addr`, addressed by work requests from
/// `iova` on. Optional access bits (`IBV_ACCESS_OPTIONAL_RANGE`, relaxed ordering) are
/// dropped: rdma-core drops them for a kernel without optional access support, and the
/// devices uverbs drives (rxe, EFA) implement none of them, so the registration is the one
/// those devices make when asked with them.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    guard("ibv_reg_mr", ptr::null_mut(), || {
        // SAFETY: the program passes a PD it allocated.
        let Some(w) = (unsafe { pd(p) }) else {
            return ptr_or_errno(Err(einval("ibv_reg_mr", "pd is NULL")));
        };
        let access = AccessFlags::from_bits_retain(access & !IBV_ACCESS_OPTIONAL_RANGE);
        // SAFETY: as with rdma-core, the program keeps `addr..addr+length` mapped while the
        // MR is registered and gives up the MR (ibv_dereg_mr) before unmapping it; this
        // library forms no Rust reference to the memory.
        let r = unsafe { w.pd.reg_mr_iova_raw(addr as *mut u8, length, iova, access) };
        ptr_or_errno(r.map(|m| boxed_mr(p, w, m, addr, false)))
    })
}

/// `ibv_reg_mr` (IBVERBS_1.1): `ibv_reg_mr_iova2` with `iova = addr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the same contract, passed on.
    unsafe { ibv_reg_mr_iova2(p, addr, length, addr as u64, access as c_uint) }
}

/// `ibv_reg_mr_iova` (IBVERBS_1.7).
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the same contract, passed on.
    unsafe { ibv_reg_mr_iova2(p, addr, length, iova, access as c_uint) }
}

/// `ibv_reg_dmabuf_mr` (IBVERBS_1.12): `ibv_mr.addr` is `offset`, as rdma-core sets it.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    p: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr {
    guard("ibv_reg_dmabuf_mr", ptr::null_mut(), || {
        // SAFETY: the program passes a PD it allocated.
        let Some(w) = (unsafe { pd(p) }) else {
            return ptr_or_errno(Err(einval("ibv_reg_dmabuf_mr", "pd is NULL")));
        };
        if fd < 0 {
            // What the kernel answers for a descriptor that is not open.
            set_errno(libc::EBADF);
            return ptr::null_mut();
        }
        // SAFETY: fd is not -1 (checked); the kernel only reads it during the call, while the
        // program holds it open (a closed fd makes the kernel answer EBADF).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let access = AccessFlags::from_bits_retain(access as c_uint);
        let r = w.pd.reg_dmabuf_mr(fd, offset, length, iova, access);
        ptr_or_errno(r.map(|m| boxed_mr(p, w, m, offset as usize as *mut c_void, true)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(m: *mut ibv_mr) -> c_int {
    guard("ibv_dereg_mr", libc::EIO, || {
        // SAFETY: the program passes NULL or an MR it registered.
        if unsafe { mr(m) }.is_none() {
            return libc::EINVAL;
        }
        // SAFETY: the program gives up an MR it registered (boxed by boxed_mr).
        unsafe { destroy_in_place(m as *mut Mr, |w| &mut w.mr, uverbs::Mr::dereg) }
    })
}

/// `ibv_rereg_mr` (IBVERBS_1.1): 0, or an `enum ibv_rereg_mr_err_code` (negative) with errno
/// set, as rdma-core returns. uverbs re-registers the PD and the access rights; a new
/// translation (`IBV_REREG_MR_CHANGE_TRANSLATION`) is `IBV_REREG_MR_ERR_CMD` with errno
/// `EOPNOTSUPP`. With both `CHANGE_PD` and `CHANGE_ACCESS` the PD moves first: when the
/// access change then fails, `ibv_mr.pd` is the new PD.
#[no_mangle]
pub unsafe extern "C" fn ibv_rereg_mr(
    m: *mut ibv_mr,
    flags: c_int,
    new_pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    guard("ibv_rereg_mr", IBV_REREG_MR_ERR_CMD, || {
        let input = |what: &'static str| {
            set_errno(report(&einval("ibv_rereg_mr", what)));
            IBV_REREG_MR_ERR_INPUT
        };
        if m.is_null() {
            return input("mr is NULL");
        }
        // SAFETY: the program passes a live MR it registered, used by no other call now
        // (rdma-core's rule for ibv_rereg_mr too).
        let w = unsafe { &mut *(m as *mut Mr) };
        if w.dmabuf {
            return input("a dmabuf MR cannot be re-registered");
        }
        if flags & !IBV_REREG_MR_FLAGS_SUPPORTED != 0 {
            return input("unknown flags");
        }
        if flags & IBV_REREG_MR_CHANGE_TRANSLATION != 0 && (length == 0 || addr.is_null()) {
            return input("a new translation needs an address and a length");
        }
        if access != 0 && flags & IBV_REREG_MR_CHANGE_ACCESS == 0 {
            return input("access flags without IBV_REREG_MR_CHANGE_ACCESS");
        }
        let cmd_err = |errno: c_int| {
            set_errno(errno);
            IBV_REREG_MR_ERR_CMD
        };
        if flags == 0 {
            // The kernel refuses a re-registration that changes nothing.
            return cmd_err(libc::EINVAL);
        }
        if flags & IBV_REREG_MR_CHANGE_TRANSLATION != 0 {
            return cmd_err(report(&eopnotsupp(
                "ibv_rereg_mr",
                "uverbs re-registers the PD and the access rights, not the translation",
            )));
        }
        if flags & IBV_REREG_MR_CHANGE_PD != 0 {
            // SAFETY: the program passes NULL or a PD it allocated.
            let Some(np) = (unsafe { pd(new_pd) }) else {
                return input("IBV_REREG_MR_CHANGE_PD with a NULL pd");
            };
            if let Err(e) = w.mr.rereg_pd(&np.pd) {
                return cmd_err(report(&e));
            }
            w.ibv.pd = new_pd;
        }
        if flags & IBV_REREG_MR_CHANGE_ACCESS != 0 {
            let a = AccessFlags::from_bits_retain(access as c_uint & !IBV_ACCESS_OPTIONAL_RANGE);
            let r = w.mr.rereg_access(a);
            w.ibv.lkey = w.mr.lkey();
            w.ibv.rkey = w.mr.rkey();
            if let Err(e) = r {
                return cmd_err(report(&e));
            }
        }
        w.ibv.lkey = w.mr.lkey();
        w.ibv.rkey = w.mr.rkey();
        0
    })
}

/// `ibv_import_pd`: uverbs does not import objects of another process's context; NULL with
/// errno `EOPNOTSUPP`, as rdma-core answers for a provider without it.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_pd(_ctx: *mut ibv_context, _pd_handle: u32) -> *mut ibv_pd {
    guard("ibv_import_pd", ptr::null_mut(), || {
        ptr_or_errno(Err(eopnotsupp(
            "ibv_import_pd",
            "uverbs does not import objects",
        )))
    })
}

/// `ibv_unimport_pd`: nothing was imported, so nothing to release.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_pd(_pd: *mut ibv_pd) {}

/// `ibv_import_mr`: NULL with errno `EOPNOTSUPP` (see [`ibv_import_pd`]).
#[no_mangle]
pub unsafe extern "C" fn ibv_import_mr(_pd: *mut ibv_pd, _mr_handle: u32) -> *mut ibv_mr {
    guard("ibv_import_mr", ptr::null_mut(), || {
        ptr_or_errno(Err(eopnotsupp(
            "ibv_import_mr",
            "uverbs does not import objects",
        )))
    })
}

/// `ibv_unimport_mr`: nothing was imported, so nothing to release.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_mr(_mr: *mut ibv_mr) {}

/// `ibv_import_dm` (`struct ibv_dm *`, opaque here): NULL with errno `EOPNOTSUPP`.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_dm(_ctx: *mut ibv_context, _dm_handle: u32) -> *mut c_void {
    guard("ibv_import_dm", ptr::null_mut(), || {
        ptr_or_errno(Err(eopnotsupp(
            "ibv_import_dm",
            "uverbs has no device memory",
        )))
    })
}

/// `ibv_unimport_dm`: nothing was imported, so nothing to release.
#[no_mangle]
pub unsafe extern "C" fn ibv_unimport_dm(_dm: *mut c_void) {}

/// `ibv_import_device`: a context from another process's command fd. NULL with errno
/// `EOPNOTSUPP`: uverbs opens its contexts itself.
#[no_mangle]
pub unsafe extern "C" fn ibv_import_device(_cmd_fd: c_int) -> *mut ibv_context {
    guard("ibv_import_device", ptr::null_mut(), || {
        ptr_or_errno(Err(eopnotsupp(
            "ibv_import_device",
            "uverbs does not import contexts",
        )))
    })
}

/// `ibv_context_ops.alloc_mw` (`ibv_alloc_mw`).
pub unsafe extern "C" fn alloc_mw(p: *mut ibv_pd, mw_type: c_int) -> *mut ibv_mw {
    guard("ibv_alloc_mw", ptr::null_mut(), || {
        // SAFETY: the header's ibv_alloc_mw passes the program's PD.
        let Some(w) = (unsafe { pd(p) }) else {
            return ptr_or_errno(Err(einval("ibv_alloc_mw", "pd is NULL")));
        };
        let t = match mw_type {
            1 => MwType::Type1,
            2 => MwType::Type2,
            _ => return ptr_or_errno(Err(einval("ibv_alloc_mw", "unknown memory window type"))),
        };
        ptr_or_errno(w.pd.alloc_mw(t).map(|m| {
            let ibv = ibv_mw {
                context: w.ibv.context,
                pd: p,
                rkey: m.rkey(),
                handle: m.handle(),
                type_: mw_type,
            };
            Box::into_raw(Box::new(Mw {
                ibv,
                mw: ManuallyDrop::new(m),
            })) as *mut ibv_mw
        }))
    })
}

/// `ibv_context_ops.dealloc_mw` (`ibv_dealloc_mw`).
pub unsafe extern "C" fn dealloc_mw(m: *mut ibv_mw) -> c_int {
    guard("ibv_dealloc_mw", libc::EIO, || {
        // SAFETY: the program passes NULL or a window it allocated.
        if unsafe { mw(m) }.is_none() {
            return libc::EINVAL;
        }
        // SAFETY: the program gives up a window it allocated (boxed by alloc_mw).
        unsafe { destroy_in_place(m as *mut Mw, |w| &mut w.mw, uverbs::Mw::dealloc) }
    })
}

/// `ibv_context_ops.bind_mw` (`ibv_bind_mw`, type 1 windows; the header checked the type and
/// the MR's PD): as rdma-core's rxe, a `IBV_WR_BIND_MW` send work request with the next rkey
/// (`ibv_inc_rkey`), posted through the QP's `post_send`; once posted, `mw->rkey` is that
/// rkey (a failed completion leaves undoing it to the program, as with rdma-core).
pub unsafe extern "C" fn bind_mw(qp: *mut ibv_qp, m: *mut ibv_mw, bind: *mut ibv_mw_bind) -> c_int {
    guard("ibv_bind_mw", libc::EIO, || {
        if qp.is_null() || m.is_null() || bind.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program passes its live QP, window and bind request; the window is
        // used by no other call meanwhile (rdma-core's rule too).
        let (q, win, b) = unsafe { (&*qp, &mut *m, &*bind) };
        if b.bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED != 0 {
            return libc::EINVAL;
        }
        // SAFETY: a QP's context is the live context it was created in.
        let Some(c) = (unsafe { context(q.context) }) else {
            return libc::EINVAL;
        };
        let Some(post_send) = c.vctx.context.ops.post_send else {
            return libc::EOPNOTSUPP;
        };
        let rkey = uverbs::Mw::inc_rkey(win.rkey);
        // SAFETY: all-zero is a valid ibv_send_wr (NULL pointers, zero numbers).
        let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
        wr.wr_id = b.wr_id;
        wr.opcode = IBV_WR_BIND_MW;
        wr.send_flags = b.send_flags;
        wr.ext.bind_mw = ibv_send_wr_bind_mw {
            mw: m,
            rkey,
            bind_info: b.bind_info,
        };
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: post_send is this library's, called as the header's ibv_post_send calls it,
        // with the program's QP and a one-WR list that outlives the call.
        let r = unsafe { post_send(qp, &mut wr, &mut bad) };
        if r != 0 {
            set_errno(r);
            return r;
        }
        win.rkey = rkey;
        0
    })
}
