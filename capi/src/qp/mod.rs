//! Queue pairs: `ibv_create_qp`, `verbs_context.create_qp_ex`, `ibv_modify_qp`,
//! `ibv_query_qp`, `ibv_destroy_qp`, `ibv_qp_to_qp_ex`, multicast, ECE and data-in-order
//! queries; the data path `ops.post_send` / `ops.post_recv`; and the `ibv_qp_ex` builders
//! (`wr_start` … `wr_complete`).
//!
//! Every QP is an `ibv_qp_ex` (whose first member is the `ibv_qp` programs hold) followed by
//! the uverbs QP. On a connected QP the plain send WRs (sends and RDMA operations with SGEs)
//! go from the program's structs straight into the send queue ([`uverbs::Qp::stage_send`],
//! one doorbell at the end); a single plain WR on a datagram QP is converted on the stack.
//! Otherwise the posts convert the program's linked list in place, up to [`SEND_CHUNK`] /
//! [`CHUNK`] work requests at a time, into a stack array of `uverbs::SendWr` / `RecvWr` (SGE
//! lists are read where they lie) and post each chunk with one call (one doorbell on rxe): no
//! lock, no heap allocation. As with rdma-core's providers, one QP must not be posted to from two threads at
//! once (rdma-core's per-QP spinlock is what this drops).

use core::ffi::{c_int, c_uint, c_void};
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ptr;

use uverbs::{
    AccessFlags, AhAttr, Gid, Mtu, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr,
    SendFlags, SendOpsFlags, SendWr, Sge, UdDest, WrData, WrOp,
};

mod modify;
mod post;
mod wr;

pub use post::{post_recv, post_send};
use wr::*;

use crate::abi::*;
use crate::ah::{ah_attr_from_c, gid_raw};
use crate::device::context;
use crate::util::{
    einval, eopnotsupp, guard, ptr_or_errno, report, set_errno, COND_INIT, MUTEX_INIT,
};

const IBV_QPT_RC: c_int = 2;
const IBV_QPT_UC: c_int = 3;
const IBV_QPT_UD: c_int = 4;
const IBV_QPT_RAW_PACKET: c_int = 8;
const IBV_QPT_XRC_SEND: c_int = 9;
const IBV_QPT_XRC_RECV: c_int = 10;
const IBV_QPT_DRIVER: c_int = 0xff;

const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
const IBV_QP_INIT_ATTR_XRCD: u32 = 1 << 1;
const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

const IBV_QP_STATE: c_int = 1 << 0;
const IBV_QP_RATE_LIMIT: c_int = 1 << 25;

const IBV_WR_RDMA_WRITE: c_int = 0;
const IBV_WR_RDMA_WRITE_WITH_IMM: c_int = 1;
const IBV_WR_SEND: c_int = 2;
const IBV_WR_SEND_WITH_IMM: c_int = 3;
const IBV_WR_RDMA_READ: c_int = 4;
const IBV_WR_ATOMIC_CMP_AND_SWP: c_int = 5;
const IBV_WR_ATOMIC_FETCH_AND_ADD: c_int = 6;
const IBV_WR_LOCAL_INV: c_int = 7;
const IBV_WR_BIND_MW: c_int = 8;
const IBV_WR_SEND_WITH_INV: c_int = 9;
const IBV_WR_TSO: c_int = 10;
const IBV_WR_FLUSH: c_int = 14;
const IBV_WR_ATOMIC_WRITE: c_int = 15;

/// `IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED`: the flags uverbs carries
/// (`IBV_SEND_INLINE` chooses the data's form; `IBV_SEND_IP_CSUM` neither provider uses).
const SEND_FLAGS_CARRIED: c_uint = 0x7;
const IBV_SEND_INLINE: c_uint = 1 << 3;

const IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS: u32 = 1 << 0;
const IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY: u32 = 1 << 1;
const IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG: c_int = 1 << 0;
const IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES: c_int = 1 << 1;

/// Receive work requests converted and posted at once.
pub const CHUNK: usize = 16;

/// Send work requests converted and posted at once (one doorbell on rxe): a 32-WR list, as
/// programs post them, is one post.
pub const SEND_CHUNK: usize = 32;

/// A QP as C sees it (`ibv_qp_ex`, whose first member is the `ibv_qp`) and the uverbs QP.
#[repr(C)]
pub struct Qp {
    pub ibv: ibv_qp_ex,
    pub qp: ManuallyDrop<uverbs::Qp>,
    /// Made by `create_qp_ex`: `ibv_qp_to_qp_ex` answers it (rdma-core's `VERBS_QP_EX`).
    ex: bool,
    /// A UD or SRD QP: its sends carry `wr.ud` (read once at creation for the posts).
    datagram: bool,
    /// An `ibv_wr_start` is open (until `ibv_wr_complete` or `ibv_wr_abort`).
    batch_open: bool,
    /// The open batch's first error, set aside between the `wr_*` calls.
    batch_err: Option<uverbs::Error>,
    /// `max_inline_data` bytes where inline data given as several buffers (an inline send
    /// WR's SGEs, `ibv_wr_set_inline_data_list`) is gathered into one, allocated at creation.
    gather: Box<[u8]>,
    /// EFA's `struct efadv_qp` of this QP, which `efadv_qp_from_ibv_qp_ex` returns.
    pub dv: DvQp,
}

/// `struct efadv_qp` (`<infiniband/efadv.h>`, rdma-core master; not in 44): EFA's setter of the
/// open `wr_*` batch, embedded in every QP (on a QP of another provider, or an EFA QP created
/// without `EFADV_WR_EX_WITH_PROCESSING_HINTS`, the setter fails the batch, which
/// `ibv_wr_complete` reports).
#[repr(C)]
pub struct DvQp {
    pub comp_mask: u64,
    pub wr_set_processing_hints: Option<unsafe extern "C" fn(*mut DvQp, u32)>,
}

/// The `struct efadv_qp` of a QP (`efadv_qp_from_ibv_qp_ex`), None for NULL.
///
/// # Safety
/// `p` is NULL or the `ibv_qp_ex` of a live QP of this library.
pub unsafe fn dv(p: *mut ibv_qp_ex) -> Option<*mut DvQp> {
    let w = p as *mut Qp;
    // SAFETY: NULL or a live wrapper (above); only the field's address is taken.
    (!w.is_null()).then(|| unsafe { ptr::addr_of_mut!((*w).dv) })
}

/// `efadv_wr_set_processing_hints`: the hints of the last work request of the open batch
/// (none open: nothing, as the other setters). No lock, no allocation on an EFA QP created
/// with the hints flag.
unsafe extern "C" fn dv_set_processing_hints(d: *mut DvQp, hints: u32) {
    guard("efadv_wr_set_processing_hints", (), || {
        if d.is_null() {
            return;
        }
        // SAFETY: `d` is the program's efadv_qp, the `dv` field of a live wrapper, which lies
        // `offset_of!(Qp, dv)` bytes into it; the header's setters are not called by two
        // threads on one QP at once.
        let w = unsafe {
            &mut *d
                .cast::<u8>()
                .sub(core::mem::offset_of!(Qp, dv))
                .cast::<Qp>()
        };
        w.step(|b, _| {
            b.efadv_set_processing_hints(uverbs::EfaProcessingHints::from_bits_retain(hints));
        });
    })
}

/// The [`Qp`] of an `ibv_qp` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or a live QP of this library, which no other thread uses meanwhile.
pub unsafe fn qp<'a>(p: *mut ibv_qp) -> Option<&'a mut Qp> {
    // SAFETY: see above; the ibv_qp is the first member of ibv_qp_ex, the first field of the
    // repr(C) Qp.
    unsafe { (p as *mut Qp).as_mut() }
}

/// What the program gave for a new QP that the C struct shows.
pub(crate) struct CFields {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub qp_type: c_int,
}

/// Wraps a new uverbs QP as the `ibv_qp` the program gets: `ex` for `ibv_qp_to_qp_ex`,
/// `send_ops` the `wr_*` builders to fill in (`None`: no `wr_*` API). For efa.rs too
/// (`efadv_create_qp_ex`).
pub(crate) fn wrap_qp(
    f: CFields,
    q: uverbs::Qp,
    ex: bool,
    send_ops: Option<SendOpsFlags>,
) -> *mut ibv_qp {
    // SAFETY: all-zero is a valid ibv_qp_ex: NULL pointers and function pointers, zero
    // numbers; the mutex and cond are set below.
    let mut ibv: ibv_qp_ex = unsafe { core::mem::zeroed() };
    let b = &mut ibv.qp_base;
    b.context = f.context;
    b.qp_context = f.qp_context;
    b.pd = f.pd;
    b.send_cq = f.send_cq;
    b.recv_cq = f.recv_cq;
    b.srq = f.srq;
    b.handle = q.handle();
    b.qp_num = q.qp_num();
    b.state = c_int::from(q.state().raw());
    b.qp_type = f.qp_type;
    b.mutex = MUTEX_INIT;
    b.cond = COND_INIT;
    if let Some(ops) = send_ops {
        fill_wr_ops(&mut ibv, ops);
    }
    let gather = vec![0u8; q.cap().max_inline_data as usize].into_boxed_slice();
    let datagram = q.qp_type().is_datagram();
    let w = Box::into_raw(Box::new(Qp {
        ibv,
        qp: ManuallyDrop::new(q),
        ex,
        datagram,
        batch_open: false,
        batch_err: None,
        gather,
        dv: DvQp {
            comp_mask: 0,
            wr_set_processing_hints: Some(dv_set_processing_hints),
        },
    }));
    // SAFETY: w is a fresh box; async events of the QP carry its address.
    unsafe { (*w).qp.set_qp_context(w as u64) };
    w as *mut ibv_qp
}

/// The `wr_*` builders of a QP created with `send_ops` (those rdma-core's rxe and EFA
/// providers set: the operations asked for, the setters, start/complete/abort).
fn fill_wr_ops(x: &mut ibv_qp_ex, ops: SendOpsFlags) {
    let has = |f| ops.contains(f);
    if has(SendOpsFlags::RDMA_WRITE) {
        x.wr_rdma_write = Some(wr_rdma_write);
    }
    if has(SendOpsFlags::RDMA_WRITE_WITH_IMM) {
        x.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    }
    if has(SendOpsFlags::SEND) {
        x.wr_send = Some(wr_send);
    }
    if has(SendOpsFlags::SEND_WITH_IMM) {
        x.wr_send_imm = Some(wr_send_imm);
    }
    if has(SendOpsFlags::RDMA_READ) {
        x.wr_rdma_read = Some(wr_rdma_read);
    }
    if has(SendOpsFlags::ATOMIC_CMP_AND_SWP) {
        x.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    }
    if has(SendOpsFlags::ATOMIC_FETCH_AND_ADD) {
        x.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    }
    if has(SendOpsFlags::LOCAL_INV) {
        x.wr_local_inv = Some(wr_local_inv);
    }
    if has(SendOpsFlags::BIND_MW) {
        x.wr_bind_mw = Some(wr_bind_mw);
    }
    if has(SendOpsFlags::SEND_WITH_INV) {
        x.wr_send_inv = Some(wr_send_inv);
    }
    if has(SendOpsFlags::ATOMIC_WRITE) {
        x.wr_atomic_write = Some(wr_atomic_write);
    }
    x.wr_set_ud_addr = Some(wr_set_ud_addr);
    x.wr_set_inline_data = Some(wr_set_inline_data);
    x.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    x.wr_set_sge = Some(wr_set_sge);
    x.wr_set_sge_list = Some(wr_set_sge_list);
    x.wr_start = Some(wr_start);
    x.wr_complete = Some(wr_complete);
    x.wr_abort = Some(wr_abort);
}

// ----- creating ---------------------------------------------------------------------------

fn qp_type_of(op: &'static str, t: c_int) -> uverbs::Result<QpType> {
    Ok(match t {
        IBV_QPT_RC => QpType::Rc,
        IBV_QPT_UC => QpType::Uc,
        IBV_QPT_UD => QpType::Ud,
        IBV_QPT_RAW_PACKET => QpType::RawPacket,
        IBV_QPT_XRC_SEND => QpType::XrcSend,
        IBV_QPT_XRC_RECV => QpType::XrcRecv,
        IBV_QPT_DRIVER => {
            return Err(eopnotsupp(
                op,
                "IBV_QPT_DRIVER QPs are made by the provider's direct verbs (efadv_create_qp_ex)",
            ))
        }
        _ => return Err(einval(op, "unknown qp_type")),
    })
}

/// The CQ behind a C CQ pointer (None for NULL).
///
/// # Safety
/// `p` is NULL or a live CQ of this library.
unsafe fn ucq<'a>(p: *mut ibv_cq) -> Option<&'a uverbs::Cq> {
    // SAFETY: see above.
    unsafe { crate::cq::cq_ref(p) }
}

/// Creates a QP from `ibv_qp_init_attr_ex` (the fields `comp_mask` names); `ex` for a QP of
/// `create_qp_ex`. Writes the caps made back into `a.cap`.
///
/// # Safety
/// `a` is valid; its pointers are NULL or live objects of this library.
unsafe fn create(
    op: &'static str,
    ctx: *mut ibv_context,
    a: &mut ibv_qp_init_attr_ex,
    ex: bool,
) -> uverbs::Result<*mut ibv_qp> {
    const SUPPORTED: u32 = IBV_QP_INIT_ATTR_PD
        | IBV_QP_INIT_ATTR_XRCD
        | IBV_QP_INIT_ATTR_CREATE_FLAGS
        | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if a.comp_mask & !SUPPORTED != 0 {
        return Err(eopnotsupp(
            op,
            "comp_mask asks for TSO, RSS or indirection tables, which uverbs does not have",
        ));
    }
    // rxe (RXE_QP_CREATE_FLAGS_SUP) and EFA take no creation flag.
    if a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0 {
        return Err(eopnotsupp(
            op,
            "create_flags: neither rxe nor EFA takes one",
        ));
    }
    let qp_type = qp_type_of(op, a.qp_type)?;
    // SAFETY: the program passes NULL or a live context.
    if unsafe { context(ctx) }.is_none() {
        return Err(einval(op, "NULL context"));
    }
    let pd_ptr = if a.comp_mask & IBV_QP_INIT_ATTR_PD != 0 {
        a.pd
    } else {
        ptr::null_mut()
    };
    // SAFETY: NULL or a live PD (above).
    let pd = unsafe { crate::pd::pd(pd_ptr) };
    let xrcd = if a.comp_mask & IBV_QP_INIT_ATTR_XRCD != 0 {
        // SAFETY: NULL or a live XRCD (above).
        unsafe { crate::xrcd::xrcd(a.xrcd) }.map(|x| &*x.xrcd)
    } else {
        None
    };
    let send_ops = if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        let ops = SendOpsFlags::from_bits(a.send_ops_flags)
            .ok_or_else(|| eopnotsupp(op, "send_ops_flags: TSO or flush"))?;
        Some(ops)
    } else {
        None
    };
    // SAFETY: NULL or live objects of this library (above).
    let (send_cq, recv_cq) = unsafe { (ucq(a.send_cq), ucq(a.recv_cq)) };
    // SAFETY: as above.
    let srq = unsafe { crate::srq::srq(a.srq) }.map(|s| &*s.srq);
    let attr = QpInitAttr {
        qp_type,
        send_cq,
        recv_cq,
        srq,
        xrcd,
        cap: QpCap {
            max_send_wr: a.cap.max_send_wr,
            max_recv_wr: a.cap.max_recv_wr,
            max_send_sge: a.cap.max_send_sge,
            max_recv_sge: a.cap.max_recv_sge,
            max_inline_data: a.cap.max_inline_data,
        },
        sq_sig_all: a.sq_sig_all != 0,
        create_flags: 0,
        send_ops_flags: send_ops.unwrap_or_default(),
        qp_context: 0,
    };
    let q = match (pd, qp_type) {
        (Some(pd), _) => {
            if ex {
                pd.pd.create_qp_ex(&attr)?
            } else {
                pd.pd.create_qp(&attr)?
            }
        }
        (None, QpType::XrcRecv) => {
            return Err(eopnotsupp(op, "XRC_RECV QPs: uverbs creates QPs in a PD"))
        }
        (None, _) => {
            return Err(einval(
                op,
                "no PD (IBV_QP_INIT_ATTR_PD and a PD are required)",
            ))
        }
    };
    let cap = q.cap();
    a.cap = ibv_qp_cap {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
    };
    let f = CFields {
        context: ctx,
        qp_context: a.qp_context,
        pd: pd_ptr,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        qp_type: a.qp_type,
    };
    Ok(wrap_qp(f, q, ex, send_ops))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    guard("ibv_create_qp", ptr::null_mut(), || {
        if pd.is_null() || attr.is_null() {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
        // SAFETY: the program passes a valid init attr; ibv_qp_init_attr is the prefix of
        // ibv_qp_init_attr_ex, whose other fields are read only as comp_mask names them.
        let a = unsafe { &mut *attr };
        let mut ex = ibv_qp_init_attr_ex {
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
            comp_mask: IBV_QP_INIT_ATTR_PD,
            pd,
            xrcd: ptr::null_mut(),
            create_flags: 0,
            max_tso_header: 0,
            rwq_ind_tbl: ptr::null_mut(),
            rx_hash_conf: ibv_rx_hash_conf {
                rx_hash_function: 0,
                rx_hash_key_len: 0,
                rx_hash_key: ptr::null_mut(),
                rx_hash_fields_mask: 0,
            },
            source_qpn: 0,
            send_ops_flags: 0,
        };
        // SAFETY: a live PD (the program's), so its context is live too.
        let ctx = unsafe { (*pd).context };
        // SAFETY: `ex` is valid and its pointers are the program's objects.
        let r = unsafe { create("ibv_create_qp", ctx, &mut ex, false) };
        if r.is_ok() {
            a.cap = ex.cap;
        }
        ptr_or_errno(r)
    })
}

/// `verbs_context.create_qp_ex` (the header's `ibv_create_qp_ex` with more than a PD).
pub unsafe extern "C" fn create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    guard("ibv_create_qp_ex", ptr::null_mut(), || {
        // SAFETY: the program passes NULL or a valid init attr.
        let Some(a) = (unsafe { attr.as_mut() }) else {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        };
        // SAFETY: `a` is valid, its pointers the program's objects.
        ptr_or_errno(unsafe { create("ibv_create_qp_ex", ctx, a, true) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(q: *mut ibv_qp) -> *mut ibv_qp_ex {
    guard("ibv_qp_to_qp_ex", ptr::null_mut(), || {
        // SAFETY: the program passes NULL or a live QP.
        match unsafe { qp(q) } {
            Some(w) if w.ex => &mut w.ibv,
            _ => {
                set_errno(libc::EOPNOTSUPP);
                ptr::null_mut()
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(q: *mut ibv_qp) -> c_int {
    guard("ibv_destroy_qp", libc::EIO, || {
        if q.is_null() {
            return libc::EINVAL;
        }
        let w = q as *mut Qp;
        // SAFETY: the program gives up a live QP (boxed by wrap_qp).
        let obj = unsafe { ManuallyDrop::take(&mut (*w).qp) };
        match obj.destroy() {
            Ok(d) => {
                // As rdma-core's ibv_cmd_destroy_qp: wait until the program has acked every
                // async event the kernel reported for the QP (ibv_ack_async_event counts
                // them in events_completed under the QP's mutex and signals its cond).
                // SAFETY: `w` is live; the mutex and cond were initialised by wrap_qp.
                unsafe {
                    let b = ptr::addr_of_mut!((*w).ibv.qp_base);
                    libc::pthread_mutex_lock(ptr::addr_of_mut!((*b).mutex));
                    while ptr::read_volatile(ptr::addr_of!((*b).events_completed))
                        != d.events_reported
                    {
                        libc::pthread_cond_wait(
                            ptr::addr_of_mut!((*b).cond),
                            ptr::addr_of_mut!((*b).mutex),
                        );
                    }
                    libc::pthread_mutex_unlock(ptr::addr_of_mut!((*b).mutex));
                }
                // SAFETY: boxed by wrap_qp; the uverbs QP was taken (ManuallyDrop).
                drop(unsafe { Box::from_raw(w) });
                0
            }
            Err(e) => {
                let (obj, err) = e.into_parts();
                // SAFETY: `w` is live; its slot is empty since the take above.
                unsafe { (*w).qp = ManuallyDrop::new(obj) };
                report(&err)
            }
        }
    })
}
