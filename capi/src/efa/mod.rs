//! libefa's API (`efadv_*`, rdma-core master: EFA_1.0 to EFA_1.7) on uverbs' EFA direct verbs.
//!
//! Every call is exported twice: as `efadv_X`, its real name (it lands in `libibverbs.a`,
//! which also serves static links of `-lefa`), and as `uverbs_efadv_X` (exported from our
//! `libibverbs.so.1` under the private version node `UVERBS_PRIVATE_EFA_1`), which the
//! `libefa.so.1` shim (`capi/efa-shim`) forwards each `efadv_X` to.
//!
//! The compatibility rules are libefa's: a caller's struct may be shorter than master's
//! (`inlen`, e.g. compiled against rdma-core 44) down to the last field the call needs
//! (`EINVAL` below that); a longer one must be zero past master's end, and a non-zero
//! `comp_mask` or `reserved` the call does not know is `EINVAL`. On a device that is not EFA
//! each call answers as libefa does for one: `EOPNOTSUPP` (as the return value, as errno with
//! NULL, or negated for the two depth calls, which return the depth).
//!
//! `efadv_cq_from_ibv_cq_ex` and `efadv_qp_from_ibv_qp_ex` return the `struct efadv_cq` /
//! `struct efadv_qp` embedded in every CQ / QP wrapper (`crate::cq::DvCq`,
//! `crate::qp::DvQp`), as libefa embeds them in its `efa_cq` / `efa_qp`. Their readers and
//! setter live beside those wrappers and reach the CQ's open poll or the QP's open batch with
//! no lock and no allocation.

pub mod abi;
mod cntr;
#[cfg(feature = "efa-model")]
mod model;

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

use uverbs::{
    EfaCqExtMem, EfaCqInitAttr, EfaCqInitFlags, EfaQpFlags, EfaQpInitAttr, EfaRqDepthAttr,
    EfaSqDepthAttr, EfaSqDepthFlags, EfaWcFlags, EfaWrExFlags, QpCap, QpInitAttr, QpType,
    SendOpsFlags,
};

use self::abi::*;
use crate::abi::*;
use crate::device::{context, Context};
use crate::util::{einval, eopnotsupp, guard, ptr_or_errno, report, set_errno};

/// The EFA model's devices (feature `efa-model`, `UVERBS_EFA_MODEL` set); none otherwise.
pub fn model_devices() -> Vec<uverbs::Device> {
    #[cfg(feature = "efa-model")]
    {
        model::devices()
    }
    #[cfg(not(feature = "efa-model"))]
    {
        Vec::new()
    }
}

/// A context on a model device, or None for a real device.
pub fn open_model(dev: &uverbs::Device) -> Option<uverbs::Result<uverbs::Context>> {
    #[cfg(feature = "efa-model")]
    {
        model::open(dev)
    }
    #[cfg(not(feature = "efa-model"))]
    {
        let _ = dev;
        None
    }
}

/// `IBV_QPT_UD`, `IBV_QPT_DRIVER`.
const IBV_QPT_UD: c_int = 4;
const IBV_QPT_DRIVER: c_int = 0xff;
/// `IBV_QP_INIT_ATTR_PD`, `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// The byte just past `$field` of `$ty`: `inlen` must reach it for the field to be there
/// (rdma-core's `vext_field_avail`).
macro_rules! end_of {
    ($ty:ty, $field:ident) => {
        core::mem::offset_of!($ty, $field) + field_size(|s: &$ty| &s.$field)
    };
}

fn field_size<S, F>(_: impl Fn(&S) -> &F) -> usize {
    size_of::<F>()
}

/// Whether the context is an EFA device's (libefa's `is_efa_dev`).
pub(crate) fn is_efa(c: &Context) -> bool {
    matches!(c.ctx.device().driver(), uverbs::Driver::Efa)
}

/// The context of an object's `context` pointer, if it is EFA's: Err(errno) otherwise
/// (EINVAL for NULL, EOPNOTSUPP for another device).
///
/// # Safety
/// `p` is NULL or a live context of this library.
unsafe fn efa_context<'a>(p: *mut ibv_context) -> Result<&'a Context, c_int> {
    // SAFETY: the caller's promise.
    match unsafe { context(p) } {
        None => Err(libc::EINVAL),
        Some(c) if !is_efa(c) => Err(libc::EOPNOTSUPP),
        Some(c) => Ok(c),
    }
}

/// Reads a caller's struct of `inlen` bytes into a whole `T` (the bytes past `inlen` zero),
/// after checking that the bytes past `T`'s end, if any, are zero (`is_ext_cleared`).
///
/// # Safety
/// `p` points to `inlen` readable bytes; `T` is valid all-zero and for any bytes.
unsafe fn read_in<T: Copy>(p: *const T, inlen: u32) -> Option<T> {
    let inlen = inlen as usize;
    // SAFETY: all-zero is valid for T (the caller's promise).
    let mut v: T = unsafe { core::mem::zeroed() };
    let n = inlen.min(size_of::<T>());
    // SAFETY: `p` has `inlen` >= n readable bytes; `v` is a distinct local of size_of::<T>().
    unsafe { ptr::copy_nonoverlapping(p as *const u8, &mut v as *mut T as *mut u8, n) };
    if inlen > size_of::<T>() {
        // SAFETY: the bytes from size_of::<T>() to inlen are the caller's (above).
        let ext =
            unsafe { core::slice::from_raw_parts((p as *const u8).add(size_of::<T>()), inlen - n) };
        if ext.iter().any(|&b| b != 0) {
            return None;
        }
    }
    Some(v)
}

/// Writes the first `inlen` bytes of `v` to the caller's struct, zeroing any bytes past `T`
/// (libefa's `memset(attr, 0, inlen)` before it fills the fields).
///
/// # Safety
/// `p` points to `inlen` writable bytes.
unsafe fn write_out<T: Copy>(p: *mut T, v: &T, inlen: u32) {
    let inlen = inlen as usize;
    let n = inlen.min(size_of::<T>());
    // SAFETY: `p` has `inlen` >= n writable bytes; `v` is a distinct value of size_of::<T>().
    unsafe {
        ptr::write_bytes(p as *mut u8, 0, inlen);
        ptr::copy_nonoverlapping(v as *const T as *const u8, p as *mut u8, n);
    }
}

// ---- EFA_1.1: efadv_query_device ----

#[no_mangle]
pub unsafe extern "C" fn efadv_query_device(
    ibvctx: *mut ibv_context,
    attr: *mut efadv_device_attr,
    inlen: u32,
) -> c_int {
    guard("efadv_query_device", libc::EIO, || {
        // SAFETY: the program passes a context it opened.
        let c = match unsafe { efa_context(ibvctx) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        if attr.is_null() || (inlen as usize) < end_of!(efadv_device_attr, inline_buf_size_ex) {
            return libc::EINVAL;
        }
        let a = match c.ctx.efadv_query_device() {
            Ok(a) => a,
            Err(e) => return report(&e),
        };
        let mut caps = a.device_caps.bits();
        // libefa reports the RDMA caps only to a caller whose struct has max_rdma_size.
        if (inlen as usize) < end_of!(efadv_device_attr, max_rdma_size) {
            caps &= !(EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE);
        }
        let out = efadv_device_attr {
            comp_mask: 0,
            max_sq_wr: a.max_sq_wr,
            max_rq_wr: a.max_rq_wr,
            max_sq_sge: a.max_sq_sge,
            max_rq_sge: a.max_rq_sge,
            inline_buf_size: a.inline_buf_size,
            inline_buf_size_ex: a.inline_buf_size_ex,
            device_caps: caps,
            max_rdma_size: a.max_rdma_size,
        };
        // SAFETY: the caller's struct has `inlen` bytes.
        unsafe { write_out(attr, &out, inlen) };
        0
    })
}

// ---- EFA_1.5: efadv_get_max_sq_depth, efadv_get_max_rq_depth ----

/// The deepest SQ for `attr`, or a negative errno (libefa's convention for this call).
#[no_mangle]
pub unsafe extern "C" fn efadv_get_max_sq_depth(
    ibvctx: *mut ibv_context,
    attr: *mut efadv_sq_depth_attr,
    inlen: u32,
) -> c_int {
    guard("efadv_get_max_sq_depth", -libc::EIO, || {
        // SAFETY: the program passes a context it opened.
        let c = match unsafe { efa_context(ibvctx) } {
            Ok(c) => c,
            Err(e) => return -e,
        };
        if attr.is_null() || (inlen as usize) < end_of!(efadv_sq_depth_attr, max_inline_data) {
            return -libc::EINVAL;
        }
        // SAFETY: the caller's struct has `inlen` bytes, at least the whole struct (above).
        let a = unsafe { *attr };
        if a.comp_mask != 0 {
            return -libc::EINVAL;
        }
        let r = c.ctx.efadv_get_max_sq_depth(&EfaSqDepthAttr {
            flags: EfaSqDepthFlags::from_bits_retain(a.flags),
            max_send_sge: a.max_send_sge,
            max_rdma_sge: a.max_rdma_sge,
            max_inline_data: a.max_inline_data,
        });
        match r {
            Ok(d) => d as c_int,
            Err(e) => -report(&e),
        }
    })
}

/// The deepest RQ for `attr`, or a negative errno (libefa's convention for this call).
#[no_mangle]
pub unsafe extern "C" fn efadv_get_max_rq_depth(
    ibvctx: *mut ibv_context,
    attr: *mut efadv_rq_depth_attr,
    inlen: u32,
) -> c_int {
    guard("efadv_get_max_rq_depth", -libc::EIO, || {
        // SAFETY: the program passes a context it opened.
        let c = match unsafe { efa_context(ibvctx) } {
            Ok(c) => c,
            Err(e) => return -e,
        };
        if attr.is_null() || (inlen as usize) < end_of!(efadv_rq_depth_attr, max_recv_sge) {
            return -libc::EINVAL;
        }
        // SAFETY: the caller's struct has at least the fields read (above).
        let (mask, sge) = unsafe { ((*attr).comp_mask, (*attr).max_recv_sge) };
        if mask != 0 {
            return -libc::EINVAL;
        }
        match c
            .ctx
            .efadv_get_max_rq_depth(&EfaRqDepthAttr { max_recv_sge: sge })
        {
            Ok(d) => d as c_int,
            Err(e) => -report(&e),
        }
    })
}

// ---- EFA_1.1: efadv_query_ah ----

#[no_mangle]
pub unsafe extern "C" fn efadv_query_ah(
    ibvah: *mut ibv_ah,
    attr: *mut efadv_ah_attr,
    inlen: u32,
) -> c_int {
    guard("efadv_query_ah", libc::EIO, || {
        if ibvah.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program passes an AH it created, whose context is live.
        if let Err(e) = unsafe { efa_context((*ibvah).context) } {
            return e;
        }
        if attr.is_null() || (inlen as usize) < end_of!(efadv_ah_attr, ahn) {
            return libc::EINVAL;
        }
        // SAFETY: an AH of this library (above).
        let Some(ah) = (unsafe { crate::ah::ah(ibvah) }) else {
            return libc::EINVAL;
        };
        match ah.ah.efadv_query_ah() {
            Ok(ahn) => {
                let out = efadv_ah_attr {
                    ahn,
                    ..Default::default()
                };
                // SAFETY: the caller's struct has `inlen` bytes.
                unsafe { write_out(attr, &out, inlen) };
                0
            }
            Err(e) => report(&e),
        }
    })
}

// ---- EFA_1.3: efadv_query_mr ----

#[no_mangle]
pub unsafe extern "C" fn efadv_query_mr(
    ibvmr: *mut ibv_mr,
    attr: *mut efadv_mr_attr,
    inlen: u32,
) -> c_int {
    guard("efadv_query_mr", libc::EIO, || {
        if ibvmr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program passes an MR it registered, whose context is live.
        if let Err(e) = unsafe { efa_context((*ibvmr).context) } {
            return e;
        }
        if attr.is_null() || (inlen as usize) < end_of!(efadv_mr_attr, rdma_recv_ic_id) {
            return libc::EINVAL;
        }
        // SAFETY: an MR of this library (above).
        let Some(mr) = (unsafe { crate::mr::mr(ibvmr) }) else {
            return libc::EINVAL;
        };
        match mr.mr.efadv_query_mr() {
            Ok(m) => {
                let mut out = efadv_mr_attr::default();
                if let Some(id) = m.recv_ic_id {
                    out.recv_ic_id = id;
                    out.ic_id_validity |= 1 << 0;
                }
                if let Some(id) = m.rdma_read_ic_id {
                    out.rdma_read_ic_id = id;
                    out.ic_id_validity |= 1 << 1;
                }
                if let Some(id) = m.rdma_recv_ic_id {
                    out.rdma_recv_ic_id = id;
                    out.ic_id_validity |= 1 << 2;
                }
                // SAFETY: the caller's struct has `inlen` bytes.
                unsafe { write_out(attr, &out, inlen) };
                0
            }
            Err(e) => report(&e),
        }
    })
}

// ---- EFA_1.2: efadv_create_cq, efadv_cq_from_ibv_cq_ex; EFA_1.4: efadv_query_cq ----

#[no_mangle]
pub unsafe extern "C" fn efadv_create_cq(
    ibvctx: *mut ibv_context,
    attr_ex: *mut ibv_cq_init_attr_ex,
    efa_attr: *mut efadv_cq_init_attr,
    inlen: u32,
) -> *mut ibv_cq_ex {
    guard("efadv_create_cq", ptr::null_mut(), || {
        let op = "efadv_create_cq";
        // SAFETY: the program passes a context it opened.
        let c = match unsafe { efa_context(ibvctx) } {
            Ok(c) => c,
            Err(e) => {
                set_errno(e);
                return ptr::null_mut();
            }
        };
        if attr_ex.is_null()
            || efa_attr.is_null()
            || (inlen as usize) < end_of!(efadv_cq_init_attr, wc_flags)
        {
            return ptr_or_errno(Err(einval(op, "attr_ex, efa_attr or inlen")));
        }
        // SAFETY: the caller's struct has `inlen` bytes.
        let Some(e) = (unsafe { read_in(efa_attr, inlen) }) else {
            return ptr_or_errno(Err(einval(op, "efa_attr has non-zero bytes past its end")));
        };
        if e.comp_mask != 0 {
            return ptr_or_errno(Err(einval(op, "efa_attr.comp_mask")));
        }
        // SAFETY: the program passes its attributes (the rounded cqe written back) and a
        // NULL or live channel in them.
        unsafe { create_cq(c, ibvctx, attr_ex, &e) }
    })
}

/// libefa's checks of the EFA attributes (and of the generic ones EFA takes fewer of than
/// `ibv_create_cq_ex`), then the CQ through [`crate::cq::create_with`], which checks the
/// generic attributes, turns the completion channel into uverbs' and wraps the CQ (with the
/// `struct efadv_cq` every CQ embeds). NULL with errno set on failure.
///
/// # Safety
/// `ibvctx` is `c`'s `ibv_context`; `a` is valid for reads and writes, its `channel` NULL or
/// a live channel.
unsafe fn create_cq(
    c: &Context,
    ibvctx: *mut ibv_context,
    a: *mut ibv_cq_init_attr_ex,
    e: &efadv_cq_init_attr,
) -> *mut ibv_cq_ex {
    let op = "efadv_create_cq";
    let ext = match efa_cq_checks(c, op, e) {
        Ok(ext) => ext,
        Err(err) => return ptr_or_errno(Err(err)),
    };
    // SAFETY: valid (above).
    let (mask, flags) = unsafe { ((*a).comp_mask, (*a).flags) };
    // EFA CQs take no creation flag but SINGLE_THREADED (no IGNORE_OVERRUN).
    if mask & crate::cq::IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
        && flags & !crate::cq::IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        return ptr_or_errno(Err(eopnotsupp(op, "attr_ex.flags")));
    }
    let efa = EfaCqInitAttr {
        wc_flags: EfaWcFlags::from_bits_retain(e.wc_flags),
        flags: EfaCqInitFlags::from_bits_retain(e.flags),
        ext_mem: ext,
    };
    // SAFETY: the caller's context, attributes and channel (above).
    let cq = unsafe { crate::cq::create_with(ibvctx, a, |ctx, u| ctx.efadv_create_cq(u, &efa)) };
    if !cq.is_null() {
        // libefa writes the rounded size back.
        // SAFETY: valid for writes (above).
        unsafe { (*a).cqe = (*a).cqe.next_power_of_two() };
    }
    cq
}

/// The checks of `efa_attr` against the device (`wc_flags` it has, known `flags`), and the
/// external ring memory it names, if any.
fn efa_cq_checks(
    c: &Context,
    op: &'static str,
    e: &efadv_cq_init_attr,
) -> uverbs::Result<Option<EfaCqExtMem<'static>>> {
    let caps = c.ctx.efadv_query_device()?.device_caps.bits();
    let mut supp_wc = 0;
    if caps & EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID != 0 {
        supp_wc |= EFADV_WC_EX_WITH_SGID;
    }
    if caps & EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV != 0 {
        supp_wc |= EFADV_WC_EX_WITH_IS_UNSOLICITED;
    }
    if e.wc_flags & !supp_wc != 0 {
        return Err(eopnotsupp(op, "efa_attr.wc_flags the device does not have"));
    }
    if e.flags & !EFADV_CQ_INIT_FLAGS_EXT_MEM_DMABUF != 0 {
        return Err(eopnotsupp(op, "unknown efa_attr.flags"));
    }
    if e.flags & EFADV_CQ_INIT_FLAGS_EXT_MEM_DMABUF == 0 {
        return Ok(None);
    }
    let m = e.ext_mem_dmabuf;
    if m.fd < 0 {
        return Err(einval(op, "ext_mem_dmabuf.fd"));
    }
    Ok(Some(EfaCqExtMem {
        // SAFETY: the program keeps its dmabuf open during the call; the kernel takes its own
        // reference.
        fd: unsafe { std::os::fd::BorrowedFd::borrow_raw(m.fd) },
        offset: m.offset,
        length: m.length,
    }))
}

#[no_mangle]
pub unsafe extern "C" fn efadv_query_cq(
    ibvcq: *mut ibv_cq,
    attr: *mut efadv_cq_attr,
    inlen: u32,
) -> c_int {
    guard("efadv_query_cq", libc::EIO, || {
        if ibvcq.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program passes a CQ it created, whose context is live.
        if let Err(e) = unsafe { efa_context((*ibvcq).context) } {
            return e;
        }
        if attr.is_null() || (inlen as usize) < end_of!(efadv_cq_attr, num_entries) {
            return libc::EINVAL;
        }
        // SAFETY: a CQ of this library (above); an open extended poll on it ends.
        let Some(cq) = (unsafe { crate::cq::cq_ref(ibvcq) }) else {
            return libc::EINVAL;
        };
        match cq.efadv_query_cq() {
            Ok(q) => {
                // SAFETY: the caller's struct has `inlen` bytes: at least up to num_entries,
                // and the doorbell only when it reaches it; no reference to the whole struct.
                unsafe {
                    (*attr).comp_mask = 0;
                    (*attr).buffer = q.buffer.as_ptr();
                    (*attr).entry_size = q.entry_size;
                    (*attr).num_entries = q.num_entries;
                    if inlen as usize >= end_of!(efadv_cq_attr, doorbell) {
                        (*attr).doorbell = q.doorbell.map_or(ptr::null_mut(), |d| d.as_ptr());
                    }
                }
                0
            }
            Err(e) => report(&e),
        }
    })
}

/// `efadv_cq_from_ibv_cq_ex`: the `struct efadv_cq` embedded in the CQ (NULL with
/// `EOPNOTSUPP` on another provider's CQ, as libefa).
#[no_mangle]
pub unsafe extern "C" fn efadv_cq_from_ibv_cq_ex(ibvcqx: *mut ibv_cq_ex) -> *mut efadv_cq {
    guard("efadv_cq_from_ibv_cq_ex", ptr::null_mut(), || {
        if ibvcqx.is_null() {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
        // SAFETY: the program passes a CQ it created, whose context is live.
        if let Err(e) = unsafe { efa_context((*ibvcqx).context) } {
            set_errno(e);
            return ptr::null_mut();
        }
        // SAFETY: a live CQ of this library (above).
        unsafe { crate::cq::dv(ibvcqx) }.unwrap_or(ptr::null_mut())
    })
}

// ---- EFA_1.0: efadv_create_driver_qp; EFA_1.1: efadv_create_qp_ex ----

#[no_mangle]
pub unsafe extern "C" fn efadv_create_driver_qp(
    ibvpd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
    driver_qp_type: u32,
) -> *mut ibv_qp {
    guard("efadv_create_driver_qp", ptr::null_mut(), || {
        let op = "efadv_create_driver_qp";
        if ibvpd.is_null() || attr.is_null() {
            return ptr_or_errno(Err(einval(op, "pd or attr")));
        }
        // SAFETY: the program passes a PD it allocated.
        let ibvctx = unsafe { (*ibvpd).context };
        // SAFETY: the PD's context is live.
        if let Err(e) = unsafe { efa_context(ibvctx) } {
            set_errno(e);
            return ptr::null_mut();
        }
        // SAFETY: the program passes its attributes (written back on success, as libefa).
        let a = unsafe { &mut *attr };
        if a.qp_type != IBV_QPT_DRIVER {
            return ptr_or_errno(Err(einval(op, "qp_type is not IBV_QPT_DRIVER")));
        }
        // SAFETY: all-zero is a valid ibv_qp_init_attr_ex (NULL pointers, zeros).
        let mut ex: ibv_qp_init_attr_ex = unsafe { core::mem::zeroed() };
        ex.qp_context = a.qp_context;
        ex.send_cq = a.send_cq;
        ex.recv_cq = a.recv_cq;
        ex.srq = a.srq;
        ex.cap = a.cap;
        ex.qp_type = a.qp_type;
        ex.sq_sig_all = a.sq_sig_all;
        ex.comp_mask = IBV_QP_INIT_ATTR_PD;
        ex.pd = ibvpd;
        let efa = efadv_qp_init_attr {
            driver_qp_type,
            ..Default::default()
        };
        let r = create_qp(ibvctx, op, &mut ex, &efa);
        if r.is_ok() {
            a.cap = ex.cap;
        }
        ptr_or_errno(r)
    })
}

#[no_mangle]
pub unsafe extern "C" fn efadv_create_qp_ex(
    ibvctx: *mut ibv_context,
    attr_ex: *mut ibv_qp_init_attr_ex,
    efa_attr: *mut efadv_qp_init_attr,
    inlen: u32,
) -> *mut ibv_qp {
    guard("efadv_create_qp_ex", ptr::null_mut(), || {
        let op = "efadv_create_qp_ex";
        // SAFETY: the program passes a context it opened.
        if let Err(e) = unsafe { efa_context(ibvctx) } {
            set_errno(e);
            return ptr::null_mut();
        }
        if attr_ex.is_null()
            || efa_attr.is_null()
            || (inlen as usize) < end_of!(efadv_qp_init_attr, driver_qp_type)
        {
            return ptr_or_errno(Err(einval(op, "attr_ex, efa_attr or inlen")));
        }
        // SAFETY: the program passes its attributes (cap written back on success).
        let a = unsafe { &mut *attr_ex };
        // SAFETY: the caller's struct has `inlen` bytes.
        let e = unsafe { read_in(efa_attr, inlen) };
        match e {
            Some(e) if a.qp_type == IBV_QPT_DRIVER && e.comp_mask == 0 && e.reserved == 0 => {
                ptr_or_errno(create_qp(ibvctx, op, a, &e))
            }
            _ => ptr_or_errno(Err(einval(
                op,
                "qp_type not IBV_QPT_DRIVER, or a comp_mask, reserved or extension byte set",
            ))),
        }
    })
}

/// libefa's `create_qp`: its checks of the attributes, then the uverbs QP, wrapped.
fn create_qp(
    ibvctx: *mut ibv_context,
    op: &'static str,
    a: &mut ibv_qp_init_attr_ex,
    e: &efadv_qp_init_attr,
) -> uverbs::Result<*mut ibv_qp> {
    let qp_type = match a.qp_type {
        IBV_QPT_DRIVER if e.driver_qp_type == EFADV_QP_DRIVER_TYPE_SRD => QpType::Srd,
        IBV_QPT_DRIVER => return Err(eopnotsupp(op, "driver QP type must be SRD")),
        IBV_QPT_UD => QpType::Ud,
        _ => return Err(eopnotsupp(op, "EFA QPs are SRD or UD")),
    };
    let flags = EfaQpFlags::from_bits(u32::from(e.flags))
        .ok_or_else(|| eopnotsupp(op, "unknown efa_attr.flags"))?;
    let wr_flags = EfaWrExFlags::from_bits(e.wr_flags)
        .ok_or_else(|| eopnotsupp(op, "unknown efa_attr.wr_flags"))?;
    if a.comp_mask & !(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0 {
        return Err(eopnotsupp(op, "attr_ex.comp_mask"));
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
        return Err(einval(op, "no PD (IBV_QP_INIT_ATTR_PD)"));
    }
    let send_ops = if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        Some(
            SendOpsFlags::from_bits(a.send_ops_flags)
                .ok_or_else(|| eopnotsupp(op, "unknown send_ops_flags"))?,
        )
    } else {
        None
    };
    if a.send_cq.is_null() || a.recv_cq.is_null() {
        return Err(einval(op, "send or receive CQ not given"));
    }
    if !a.srq.is_null() {
        return Err(einval(op, "EFA QPs take no SRQ"));
    }
    // SAFETY: the program passes a PD it allocated.
    let pd = unsafe { crate::pd::pd(a.pd) }.ok_or_else(|| einval(op, "pd"))?;
    // SAFETY: the program passes CQs it created (open extended polls on them end); shared
    // references, so one CQ may be both.
    let (scq, rcq) = unsafe { (crate::cq::cq_ref(a.send_cq), crate::cq::cq_ref(a.recv_cq)) };
    let scq = scq.ok_or_else(|| einval(op, "send_cq"))?;
    let rcq = rcq.ok_or_else(|| einval(op, "recv_cq"))?;
    let cap = QpCap {
        max_send_wr: a.cap.max_send_wr,
        max_recv_wr: a.cap.max_recv_wr,
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: a.cap.max_recv_sge,
        max_inline_data: a.cap.max_inline_data,
    };
    let mut init = QpInitAttr::new(qp_type, scq, rcq, cap);
    init.sq_sig_all = a.sq_sig_all != 0;
    init.send_ops_flags = send_ops.unwrap_or_default();
    init.qp_context = a.qp_context as u64;
    let qp = pd.pd.efadv_create_qp_ex(
        &init,
        &EfaQpInitAttr {
            flags,
            sl: e.sl,
            wr_flags,
        },
    )?;
    let got = qp.cap();
    a.cap = ibv_qp_cap {
        max_send_wr: got.max_send_wr,
        max_recv_wr: got.max_recv_wr,
        max_send_sge: got.max_send_sge,
        max_recv_sge: got.max_recv_sge,
        max_inline_data: got.max_inline_data,
    };
    let f = crate::qp::CFields {
        context: ibvctx,
        qp_context: a.qp_context,
        pd: a.pd,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: ptr::null_mut(),
        qp_type: a.qp_type,
    };
    // As libefa, a QP is an ibv_qp_ex (ibv_qp_to_qp_ex answers it, with the wr_* builders)
    // when it was created with send_ops_flags.
    Ok(crate::qp::wrap_qp(f, qp, send_ops.is_some(), send_ops))
}

// ---- EFA_1.4: efadv_query_qp_wqs; EFA_1.6: efadv_qp_from_ibv_qp_ex ----

#[no_mangle]
pub unsafe extern "C" fn efadv_query_qp_wqs(
    ibvqp: *mut ibv_qp,
    sq_attr: *mut efadv_wq_attr,
    rq_attr: *mut efadv_wq_attr,
    inlen: u32,
) -> c_int {
    guard("efadv_query_qp_wqs", libc::EIO, || {
        if ibvqp.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program passes a QP it created, whose context is live.
        if let Err(e) = unsafe { efa_context((*ibvqp).context) } {
            return e;
        }
        if sq_attr.is_null()
            || rq_attr.is_null()
            || (inlen as usize) < end_of!(efadv_wq_attr, max_batch)
        {
            return libc::EINVAL;
        }
        // SAFETY: a QP of this library (above).
        let Some(qp) = (unsafe { crate::qp::qp(ibvqp) }) else {
            return libc::EINVAL;
        };
        let (sq, rq) = match qp.qp.efadv_query_qp_wqs() {
            Ok(q) => q,
            Err(e) => return report(&e),
        };
        let with_caps = inlen as usize >= end_of!(efadv_wq_attr, reserved);
        for (p, q) in [(sq_attr, sq), (rq_attr, rq)] {
            // SAFETY: each caller's struct has `inlen` bytes: up to max_batch, and caps and
            // reserved only when it reaches them; no reference to the whole struct.
            unsafe {
                (*p).comp_mask = 0;
                (*p).buffer = q.buffer.as_ptr();
                (*p).entry_size = q.entry_size;
                (*p).num_entries = q.num_entries;
                (*p).doorbell = q.doorbell.as_ptr();
                (*p).max_batch = q.max_batch;
                if with_caps {
                    (*p).caps = q.caps.bits();
                    (*p).reserved = [0; 2];
                }
            }
        }
        0
    })
}

/// `efadv_qp_from_ibv_qp_ex`: the `struct efadv_qp` embedded in the QP (NULL with
/// `EOPNOTSUPP` on another provider's QP, as libefa).
#[no_mangle]
pub unsafe extern "C" fn efadv_qp_from_ibv_qp_ex(ibvqpx: *mut ibv_qp_ex) -> *mut efadv_qp {
    guard("efadv_qp_from_ibv_qp_ex", ptr::null_mut(), || {
        if ibvqpx.is_null() {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
        // SAFETY: the program passes a QP it created, whose context is live.
        if let Err(e) = unsafe { efa_context((*ibvqpx).qp_base.context) } {
            set_errno(e);
            return ptr::null_mut();
        }
        // SAFETY: a live QP of this library (above).
        unsafe { crate::qp::dv(ibvqpx) }.unwrap_or(ptr::null_mut())
    })
}

// ---- The uverbs_efadv_* names, which the libefa.so.1 shim calls. ----

macro_rules! forward {
    ($( $name:ident => $real:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        $(
            /// The same as the `efadv_` call of this name, under the name the `libefa.so.1`
            /// shim calls (version node `UVERBS_PRIVATE_EFA_1` of `libibverbs.so.1`).
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                // SAFETY: the caller's promises are the forwarded call's.
                unsafe { $real($($arg),*) }
            }
        )*
    };
}

forward! {
    uverbs_efadv_query_device => efadv_query_device(c: *mut ibv_context, a: *mut efadv_device_attr, inlen: u32) -> c_int;
    uverbs_efadv_get_max_sq_depth => efadv_get_max_sq_depth(c: *mut ibv_context, a: *mut efadv_sq_depth_attr, inlen: u32) -> c_int;
    uverbs_efadv_get_max_rq_depth => efadv_get_max_rq_depth(c: *mut ibv_context, a: *mut efadv_rq_depth_attr, inlen: u32) -> c_int;
    uverbs_efadv_query_ah => efadv_query_ah(ah: *mut ibv_ah, a: *mut efadv_ah_attr, inlen: u32) -> c_int;
    uverbs_efadv_query_mr => efadv_query_mr(mr: *mut ibv_mr, a: *mut efadv_mr_attr, inlen: u32) -> c_int;
    uverbs_efadv_create_cq => efadv_create_cq(c: *mut ibv_context, a: *mut ibv_cq_init_attr_ex, e: *mut efadv_cq_init_attr, inlen: u32) -> *mut ibv_cq_ex;
    uverbs_efadv_query_cq => efadv_query_cq(cq: *mut ibv_cq, a: *mut efadv_cq_attr, inlen: u32) -> c_int;
    uverbs_efadv_cq_from_ibv_cq_ex => efadv_cq_from_ibv_cq_ex(cq: *mut ibv_cq_ex) -> *mut efadv_cq;
    uverbs_efadv_create_driver_qp => efadv_create_driver_qp(pd: *mut ibv_pd, a: *mut ibv_qp_init_attr, t: u32) -> *mut ibv_qp;
    uverbs_efadv_create_qp_ex => efadv_create_qp_ex(c: *mut ibv_context, a: *mut ibv_qp_init_attr_ex, e: *mut efadv_qp_init_attr, inlen: u32) -> *mut ibv_qp;
    uverbs_efadv_query_qp_wqs => efadv_query_qp_wqs(qp: *mut ibv_qp, s: *mut efadv_wq_attr, r: *mut efadv_wq_attr, inlen: u32) -> c_int;
    uverbs_efadv_qp_from_ibv_qp_ex => efadv_qp_from_ibv_qp_ex(qp: *mut ibv_qp_ex) -> *mut efadv_qp;
}

#[cfg(all(test, feature = "efa-model"))]
mod tests;
