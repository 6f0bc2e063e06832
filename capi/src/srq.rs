//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//! `ibv_destroy_srq`, the `verbs_context` entries `create_srq_ex` and `get_srq_num`, and the
//! data-path op `post_srq_recv`.
//!
//! Each SRQ's uverbs context is the address of its C wrapper, so its async events
//! (`SRQ_LIMIT_REACHED`, `SRQ_ERR`) name the `ibv_srq *` the program holds; the program's own
//! `srq_context` is the C struct's field.

use core::ffi::c_int;
use core::mem::ManuallyDrop;
use core::ptr::{self, addr_of_mut};

use uverbs::{RecvWr, SrqAttr, SrqAttrMask, SrqInitAttrEx, SrqType};

use crate::abi::*;
use crate::device::context;
use crate::pd::pd;
use crate::util::{
    destroy_in_place, einval, eopnotsupp, guard, ptr_or_errno, report, ret, COND_INIT, MUTEX_INIT,
};

/// `enum ibv_srq_init_attr_mask`.
const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;
const IBV_SRQ_INIT_ATTR_XRCD: u32 = 1 << 2;
const IBV_SRQ_INIT_ATTR_CQ: u32 = 1 << 3;
const IBV_SRQ_INIT_ATTR_TM: u32 = 1 << 4;
const IBV_SRQ_INIT_ATTR_RESERVED: u32 = 1 << 5;
/// `enum ibv_srq_type`.
const IBV_SRQT_BASIC: c_int = 0;
const IBV_SRQT_XRC: c_int = 1;
const IBV_SRQT_TM: c_int = 2;

/// Receive work requests converted per post on the stack: a longer list is posted in chunks
/// of this many.
const CHUNK: usize = 16;

/// An SRQ as C sees it and the uverbs SRQ behind it.
#[repr(C)]
pub struct Srq {
    pub ibv: ibv_srq,
    pub srq: ManuallyDrop<uverbs::Srq>,
}

/// The [`Srq`] of an `ibv_srq` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live SRQ from [`ibv_create_srq`] or [`create_srq_ex`], which no other
/// call uses while the reference lives.
pub unsafe fn srq<'a>(p: *mut ibv_srq) -> Option<&'a mut Srq> {
    // SAFETY: see above; ibv is the first field of the repr(C) Srq.
    unsafe { (p as *mut Srq).as_mut() }
}

/// Boxes a new SRQ of the program's PD `p` and points its uverbs context at the wrapper.
fn boxed_srq(
    ctx: *mut ibv_context,
    p: *mut ibv_pd,
    srq_context: *mut core::ffi::c_void,
    s: uverbs::Srq,
) -> *mut ibv_srq {
    let ibv = ibv_srq {
        context: ctx,
        srq_context,
        pd: p,
        handle: s.handle(),
        mutex: MUTEX_INIT,
        cond: COND_INIT,
        events_completed: 0,
    };
    let w = Box::into_raw(Box::new(Srq {
        ibv,
        srq: ManuallyDrop::new(s),
    }));
    // SAFETY: w is the fresh box above; only its `srq` field is referenced.
    unsafe { (*w).srq.set_srq_context(w as u64) };
    w as *mut ibv_srq
}

/// Writes the sizes the SRQ was made with back into the program's attribute, as rdma-core
/// does (`max_wr` and `max_sge` at least what was asked for).
fn write_back(s: &uverbs::Srq, attr: &mut ibv_srq_attr) {
    let a = s.attr();
    attr.max_wr = a.max_wr;
    attr.max_sge = a.max_sge;
}

fn srq_attr(a: &ibv_srq_attr) -> SrqAttr {
    SrqAttr {
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        srq_limit: a.srq_limit,
    }
}

/// `ibv_create_srq` (a basic SRQ).
#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(
    p: *mut ibv_pd,
    init: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    guard("ibv_create_srq", ptr::null_mut(), || {
        // SAFETY: the program passes a PD it allocated and NULL or a valid attribute.
        let (Some(w), Some(init)) = (unsafe { pd(p) }, unsafe { init.as_mut() }) else {
            return ptr_or_errno(Err(einval("ibv_create_srq", "pd or srq_init_attr is NULL")));
        };
        ptr_or_errno(w.pd.create_srq(&srq_attr(&init.attr)).map(|s| {
            write_back(&s, &mut init.attr);
            boxed_srq(w.ibv.context, p, init.srq_context, s)
        }))
    })
}

/// `verbs_context.create_srq_ex` (`ibv_create_srq_ex` for what `ibv_create_srq` does not
/// make): basic, XRC (needs an XRCD and a CQ) and tag-matching SRQs (uverbs encodes them;
/// rxe and EFA refuse XRC and TM, and the kernel's errno is returned).
pub unsafe extern "C" fn create_srq_ex(
    ctx: *mut ibv_context,
    init: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    guard("ibv_create_srq_ex", ptr::null_mut(), || {
        let op = "ibv_create_srq_ex";
        // SAFETY: the program passes its context and NULL or a valid attribute.
        let (Some(_), Some(init)) = (unsafe { context(ctx) }, unsafe { init.as_mut() }) else {
            return ptr_or_errno(Err(einval(op, "context or srq_init_attr_ex is NULL")));
        };
        let mask = init.comp_mask;
        if mask & !(IBV_SRQ_INIT_ATTR_RESERVED - 1) != 0 {
            return ptr_or_errno(Err(eopnotsupp(op, "unknown comp_mask bits")));
        }
        // SAFETY: the program passes NULL or a PD it allocated.
        let w = (mask & IBV_SRQ_INIT_ATTR_PD != 0)
            .then(|| unsafe { pd(init.pd) })
            .flatten();
        let Some(w) = w else {
            return ptr_or_errno(Err(einval(op, "an SRQ needs a PD (IBV_SRQ_INIT_ATTR_PD)")));
        };
        let t = if mask & IBV_SRQ_INIT_ATTR_TYPE != 0 {
            init.srq_type
        } else {
            IBV_SRQT_BASIC
        };
        // SAFETY: with their mask bits, the program passes NULL or its live XRCD and CQ.
        let xrcd = (mask & IBV_SRQ_INIT_ATTR_XRCD != 0)
            .then(|| unsafe { crate::xrcd::xrcd(init.xrcd) })
            .flatten();
        // SAFETY: as above.
        let cq = (mask & IBV_SRQ_INIT_ATTR_CQ != 0)
            .then(|| unsafe { crate::cq::cq_ref(init.cq) })
            .flatten();
        let mut attr = SrqInitAttrEx {
            attr: srq_attr(&init.attr),
            ..Default::default()
        };
        match t {
            IBV_SRQT_BASIC => {}
            IBV_SRQT_XRC => {
                let (Some(x), Some(c)) = (xrcd, cq) else {
                    return ptr_or_errno(Err(einval(op, "an XRC SRQ needs an XRCD and a CQ")));
                };
                attr.srq_type = SrqType::Xrc;
                attr.xrcd = Some(&x.xrcd);
                attr.cq = Some(c);
            }
            IBV_SRQT_TM => {
                let Some(c) = cq else {
                    return ptr_or_errno(Err(einval(op, "a tag-matching SRQ needs a CQ")));
                };
                if mask & IBV_SRQ_INIT_ATTR_TM == 0 || init.tm_cap.max_num_tags == 0 {
                    return ptr_or_errno(Err(einval(op, "a tag-matching SRQ needs max_num_tags")));
                }
                attr.srq_type = SrqType::Tm;
                attr.cq = Some(c);
                attr.max_num_tags = init.tm_cap.max_num_tags;
            }
            _ => return ptr_or_errno(Err(einval(op, "unknown srq_type"))),
        }
        ptr_or_errno(w.pd.create_srq_ex(&attr).map(|s| {
            write_back(&s, &mut init.attr);
            boxed_srq(w.ibv.context, init.pd, init.srq_context, s)
        }))
    })
}

/// `ibv_modify_srq`: `IBV_SRQ_MAX_WR` resizes, `IBV_SRQ_LIMIT` arms the limit event.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_srq(
    s: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    guard("ibv_modify_srq", libc::EIO, || {
        // SAFETY: the program passes its SRQ, used by no other call meanwhile, and NULL or
        // a valid attribute.
        let (Some(w), Some(a)) = (unsafe { srq(s) }, unsafe { attr.as_ref() }) else {
            return libc::EINVAL;
        };
        let Some(mask) = SrqAttrMask::from_bits(mask as u32) else {
            return report(&einval("ibv_modify_srq", "unknown srq_attr_mask bits"));
        };
        ret(w.srq.modify(&srq_attr(a), mask))
    })
}

/// `ibv_query_srq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(s: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    guard("ibv_query_srq", libc::EIO, || {
        // SAFETY: the program passes its SRQ and NULL or an attribute to fill.
        let (Some(w), Some(out)) = (unsafe { srq(s) }, unsafe { attr.as_mut() }) else {
            return libc::EINVAL;
        };
        match w.srq.query() {
            Ok(a) => {
                *out = ibv_srq_attr {
                    max_wr: a.max_wr,
                    max_sge: a.max_sge,
                    srq_limit: a.srq_limit,
                };
                0
            }
            Err(e) => report(&e),
        }
    })
}

/// `ibv_destroy_srq`: destroys the kernel SRQ (`EBUSY` while QPs receive from it, the SRQ
/// then stays usable), then, as rdma-core, waits until the program has acknowledged every
/// async event the kernel delivered for it (`ibv_ack_async_event`).
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(s: *mut ibv_srq) -> c_int {
    guard("ibv_destroy_srq", libc::EIO, || {
        if s.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live SRQ the program gives up on success; the mutex, cond and count are
        // fields apart from `srq`, reached through the raw pointer while the wrapper is still
        // allocated (destroy_in_place frees it after the closure).
        unsafe {
            destroy_in_place(
                s as *mut Srq,
                |w| &mut w.srq,
                |q| {
                    let d = q.destroy()?;
                    let m = addr_of_mut!((*s).mutex);
                    libc::pthread_mutex_lock(m);
                    while (*s).events_completed != d.events_reported {
                        libc::pthread_cond_wait(addr_of_mut!((*s).cond), m);
                    }
                    libc::pthread_mutex_unlock(m);
                    Ok(d)
                },
            )
        }
    })
}

/// `verbs_context.get_srq_num` (`ibv_get_srq_num`).
pub unsafe extern "C" fn get_srq_num(s: *mut ibv_srq, srq_num: *mut u32) -> c_int {
    guard("ibv_get_srq_num", libc::EIO, || {
        // SAFETY: the program passes its SRQ and NULL or a number to fill.
        let (Some(w), Some(out)) = (unsafe { srq(s) }, unsafe { srq_num.as_mut() }) else {
            return libc::EINVAL;
        };
        *out = w.srq.srq_num();
        0
    })
}

/// `ops.post_srq_recv` (`ibv_post_srq_recv`): the C list is read in chunks of [`CHUNK`] work
/// requests into uverbs' form on the stack (the SGE lists are read in place: `ibv_sge` is
/// `uverbs::Sge`), each chunk posted with no lock and no allocation. On failure `*bad_wr` is
/// the first C work request not posted (those before it were) and the errno is returned.
pub unsafe extern "C" fn post_srq_recv(
    s: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    guard("ibv_post_srq_recv", libc::EIO, || {
        let fail = |at: *mut ibv_recv_wr, errno: c_int| {
            if !bad_wr.is_null() {
                // SAFETY: non-NULL: the program's slot for the failing WR.
                unsafe { *bad_wr = at };
            }
            errno
        };
        // SAFETY: the program passes its SRQ, posted to by no other thread meanwhile (the
        // header's rule for the data path).
        let Some(w) = (unsafe { srq(s) }) else {
            return fail(wr, libc::EINVAL);
        };
        let mut cur = wr;
        while !cur.is_null() {
            let mut wrs = [RecvWr::new(0, &[]); CHUNK];
            let mut from = [ptr::null_mut::<ibv_recv_wr>(); CHUNK];
            let mut n = 0;
            let mut invalid = false;
            while n < CHUNK && !cur.is_null() {
                // SAFETY: a node of the program's list, valid for the call.
                let c = unsafe { &*cur };
                let sg: &[ibv_sge] = match usize::try_from(c.num_sge) {
                    Ok(0) => &[],
                    Ok(k) if !c.sg_list.is_null() => {
                        // SAFETY: the program's list of num_sge SGEs (ibv_sge is
                        // uverbs::Sge), valid for the call.
                        unsafe { core::slice::from_raw_parts(c.sg_list, k) }
                    }
                    _ => {
                        invalid = true;
                        break;
                    }
                };
                wrs[n] = RecvWr::new(c.wr_id, sg);
                from[n] = cur;
                n += 1;
                cur = c.next;
            }
            if n > 0 {
                if let Err(e) = w.srq.post_recv(&wrs[..n]) {
                    return fail(from[e.index], report(&e.error));
                }
            }
            if invalid {
                return fail(cur, libc::EINVAL);
            }
        }
        0
    })
}
