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

// ---- Stand-ins (branch capi-efa) for what the real qp.rs provides; replaced at merge. ----

use core::mem::ManuallyDrop;

use crate::device::Context;

/// STAND-IN: a QP as C sees it and the uverbs QP behind it (the real one has more fields).
#[repr(C)]
pub struct Qp {
    pub ibv: ibv_qp_ex,
    pub qp: ManuallyDrop<uverbs::Qp>,
}

impl Qp {
    /// STAND-IN: runs `f` on the open `ibv_wr_start` batch; None when no batch is open.
    pub(crate) fn with_batch<R>(
        &mut self,
        _f: impl FnOnce(&mut uverbs::WrBatch<'_>) -> R,
    ) -> Option<R> {
        None
    }
}

/// STAND-IN: boxes `qp` as the `ibv_qp` of `ctx` created with `init` (the real one fills the
/// function table).
pub(crate) fn wrap_qp(ctx: &Context, qp: uverbs::Qp, init: &ibv_qp_init_attr_ex) -> *mut ibv_qp {
    // SAFETY: all-zero is a valid ibv_qp_ex: NULL pointers and function pointers, zeros.
    let mut ibv: ibv_qp_ex = unsafe { core::mem::zeroed() };
    ibv.qp_base.context = ctx.ibv();
    ibv.qp_base.qp_context = init.qp_context;
    ibv.qp_base.pd = init.pd;
    ibv.qp_base.send_cq = init.send_cq;
    ibv.qp_base.recv_cq = init.recv_cq;
    ibv.qp_base.handle = qp.handle();
    ibv.qp_base.qp_num = qp.qp_num();
    ibv.qp_base.qp_type = init.qp_type;
    Box::into_raw(Box::new(Qp {
        ibv,
        qp: ManuallyDrop::new(qp),
    })) as *mut ibv_qp
}

/// STAND-IN: the [`Qp`] of an `ibv_qp` (or `ibv_qp_ex`) this library returned.
///
/// # Safety
/// `p` is NULL or a live QP of this library.
pub(crate) unsafe fn qp<'a>(p: *mut ibv_qp) -> Option<&'a mut Qp> {
    // SAFETY: see above; ibv (whose first field is the ibv_qp) is the first field.
    unsafe { (p as *mut Qp).as_mut() }
}
