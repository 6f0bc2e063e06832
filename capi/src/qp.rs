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

// ----- modify, query ------------------------------------------------------------------------

fn ah_attr_to_c(a: &AhAttr) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid {
                raw: a.grh.dgid.raw,
            },
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: u8::from(a.is_global),
        port_num: a.port_num,
    }
}

fn cap_to_c(c: &QpCap) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// `ibv_qp_attr` as uverbs takes it (every field; the mask says which apply).
pub(crate) fn attr_from_c(a: &ibv_qp_attr) -> QpAttr {
    QpAttr {
        qp_state: QpState::from_raw(a.qp_state as u8),
        cur_qp_state: QpState::from_raw(a.cur_qp_state as u8),
        path_mtu: Mtu::from_raw(a.path_mtu as u8),
        path_mig_state: a.path_mig_state as u8,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: AccessFlags::from_bits_retain(a.qp_access_flags),
        cap: QpCap {
            max_send_wr: a.cap.max_send_wr,
            max_recv_wr: a.cap.max_recv_wr,
            max_send_sge: a.cap.max_send_sge,
            max_recv_sge: a.cap.max_recv_sge,
            max_inline_data: a.cap.max_inline_data,
        },
        ah_attr: ah_attr_from_c(&a.ah_attr),
        alt_ah_attr: ah_attr_from_c(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify != 0,
        sq_draining: a.sq_draining != 0,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    }
}

/// Writes what `ibv_cmd_query_qp` writes of a query's answer (every field but
/// `en_sqd_async_notify` and `rate_limit`).
pub(crate) fn attr_to_c(q: &QpAttr, a: &mut ibv_qp_attr) {
    a.qp_state = c_int::from(q.qp_state.raw());
    a.cur_qp_state = c_int::from(q.cur_qp_state.raw());
    a.path_mtu = c_int::from(q.path_mtu.raw());
    a.path_mig_state = c_int::from(q.path_mig_state);
    a.qkey = q.qkey;
    a.rq_psn = q.rq_psn;
    a.sq_psn = q.sq_psn;
    a.dest_qp_num = q.dest_qp_num;
    a.qp_access_flags = q.qp_access_flags.bits();
    a.cap = cap_to_c(&q.cap);
    a.ah_attr = ah_attr_to_c(&q.ah_attr);
    a.alt_ah_attr = ah_attr_to_c(&q.alt_ah_attr);
    a.pkey_index = q.pkey_index;
    a.alt_pkey_index = q.alt_pkey_index;
    a.sq_draining = u8::from(q.sq_draining);
    a.max_rd_atomic = q.max_rd_atomic;
    a.max_dest_rd_atomic = q.max_dest_rd_atomic;
    a.min_rnr_timer = q.min_rnr_timer;
    a.port_num = q.port_num;
    a.timeout = q.timeout;
    a.retry_cnt = q.retry_cnt;
    a.rnr_retry = q.rnr_retry;
    a.alt_port_num = q.alt_port_num;
    a.alt_timeout = q.alt_timeout;
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    q: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    guard("ibv_modify_qp", libc::EIO, || {
        // SAFETY: the program passes NULL or a live QP, and NULL or a valid attr.
        let (Some(w), Some(a)) = (unsafe { qp(q) }, unsafe { attr.as_ref() }) else {
            return libc::EINVAL;
        };
        // The rate limit needs the extended modify, which uverbs sends for RATE_LIMIT; bits
        // above it rdma-core refuses.
        if attr_mask & !(IBV_QP_RATE_LIMIT | (IBV_QP_RATE_LIMIT - 1)) != 0 {
            return libc::EOPNOTSUPP;
        }
        let mask = QpAttrMask::from_bits_retain(attr_mask as u32);
        match w.qp.modify(&attr_from_c(a), mask) {
            Ok(()) => {
                if attr_mask & IBV_QP_STATE != 0 {
                    w.ibv.qp_base.state = a.qp_state;
                }
                0
            }
            Err(e) => report(&e),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    q: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard("ibv_query_qp", libc::EIO, || {
        // SAFETY: the program passes NULL or a live QP, and NULL or a valid attr.
        let (Some(w), Some(a)) = (unsafe { qp(q) }, unsafe { attr.as_mut() }) else {
            return libc::EINVAL;
        };
        // As ibv_cmd_query_qp: the rate limit and above go only through the extended path.
        if attr_mask & !(IBV_QP_RATE_LIMIT - 1) != 0 {
            return libc::EOPNOTSUPP;
        }
        let r = match w.qp.query(QpAttrMask::from_bits_retain(attr_mask as u32)) {
            Ok(r) => r,
            Err(e) => return report(&e),
        };
        attr_to_c(&r.attr, a);
        // SAFETY: the program passes NULL or a valid init attr.
        if let Some(i) = unsafe { init_attr.as_mut() } {
            let b = &w.ibv.qp_base;
            i.qp_context = b.qp_context;
            i.send_cq = b.send_cq;
            i.recv_cq = b.recv_cq;
            i.srq = b.srq;
            i.qp_type = b.qp_type;
            i.cap = cap_to_c(&r.cap);
            i.sq_sig_all = c_int::from(r.sq_sig_all);
        }
        if attr_mask & IBV_QP_STATE != 0 {
            w.ibv.qp_base.state = a.qp_state;
        }
        0
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(q: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    guard("ibv_attach_mcast", libc::EIO, || {
        // SAFETY: the program passes NULL or a live QP and NULL or a valid GID.
        let (Some(w), Some(g)) = (unsafe { qp(q) }, unsafe { gid.as_ref() }) else {
            return libc::EINVAL;
        };
        crate::util::ret(w.qp.attach_mcast(&Gid { raw: gid_raw(g) }, lid))
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(q: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    guard("ibv_detach_mcast", libc::EIO, || {
        // SAFETY: the program passes NULL or a live QP and NULL or a valid GID.
        let (Some(w), Some(g)) = (unsafe { qp(q) }, unsafe { gid.as_ref() }) else {
            return libc::EINVAL;
        };
        crate::util::ret(w.qp.detach_mcast(&Gid { raw: gid_raw(g) }, lid))
    })
}

/// rdma-core's semantics: the provider's answer (rxe: none, as rdma-core's default; EFA:
/// 128-byte-aligned in-order data when the device has `DATA_POLLING_128`), widened and
/// reduced as `flags` say. x86 only unless `DEVICE_ONLY`, as rdma-core.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp_data_in_order(
    q: *mut ibv_qp,
    _op: c_int,
    flags: u32,
) -> c_int {
    guard("ibv_query_qp_data_in_order", 0, || {
        let known = IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS | IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY;
        if flags & !known != 0 {
            return 0;
        }
        if !cfg!(any(target_arch = "x86", target_arch = "x86_64"))
            && flags & IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY == 0
        {
            return 0;
        }
        // SAFETY: the program passes NULL or a live QP.
        let Some(w) = (unsafe { qp(q) }) else {
            return 0;
        };
        let mut caps = 0;
        if let uverbs::ProviderInfo::Efa(_) = w.qp.pd().context().provider() {
            let polling_128 = uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_DATA_POLLING_128;
            if let Ok(d) = w.qp.pd().context().efadv_query_device() {
                if d.kernel_caps & polling_128 != 0 {
                    caps |= IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES;
                }
            }
        }
        if caps & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG != 0 {
            caps |= IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES;
        }
        if flags & IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS != 0 {
            caps
        } else {
            c_int::from(caps & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG != 0)
        }
    })
}

/// No ECE on rxe or EFA: EOPNOTSUPP, as rdma-core for a provider without it (errno set too
/// when `vendor_id` is 0, as rdma-core's check does).
#[no_mangle]
pub unsafe extern "C" fn ibv_set_ece(_q: *mut ibv_qp, ece: *mut ibv_ece) -> c_int {
    guard("ibv_set_ece", libc::EIO, || {
        // SAFETY: the program passes NULL or a valid ibv_ece.
        if unsafe { ece.as_ref() }.is_none_or(|e| e.vendor_id == 0) {
            set_errno(libc::EOPNOTSUPP);
        }
        libc::EOPNOTSUPP
    })
}

/// No ECE on rxe or EFA: EOPNOTSUPP.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_ece(_q: *mut ibv_qp, _ece: *mut ibv_ece) -> c_int {
    guard("ibv_query_ece", libc::EIO, || libc::EOPNOTSUPP)
}

// ----- the data path --------------------------------------------------------------------------

/// Why a C work request cannot be converted: its errno.
type Refused = c_int;

/// `len` elements at `p` (an empty slice for 0, whatever `p` is).
///
/// # Safety
/// For `len > 0`, `p` points to `len` valid elements that outlive `'a`.
unsafe fn slice<'a, T>(p: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: see above.
        unsafe { core::slice::from_raw_parts(p, len) }
    }
}

/// The SGE list of a C work request, read where it lies: one test for the common case (a
/// positive count and a list), EINVAL for a negative count or a NULL list.
///
/// # Safety
/// `sg_list` holds `num_sge` SGEs (if positive) that outlive `'a`.
#[inline(always)]
unsafe fn sges<'a>(sg_list: *const Sge, num_sge: c_int) -> Result<&'a [Sge], Refused> {
    match num_sge {
        1.. if !sg_list.is_null() => {
            // SAFETY: see above; `num_sge` is positive.
            Ok(unsafe { core::slice::from_raw_parts(sg_list, num_sge as usize) })
        }
        0 => Ok(&[]),
        _ => Err(libc::EINVAL),
    }
}

/// Writes the operation of a C send work request to `op`: the sends and RDMA operations
/// here, each stored straight into the WR the provider reads; the others out of line
/// ([`send_op_other`]).
///
/// # Safety
/// `c` is valid; for `IBV_WR_BIND_MW`, its `mw` and `mr` are NULL or the program's; `op` is
/// valid for writes.
#[inline(always)]
unsafe fn send_op_into(op: *mut WrOp, c: &ibv_send_wr) -> Result<(), Refused> {
    // SAFETY: the union members read below are plain numbers, any bytes valid; the opcode
    // says which the program filled in, and only those are used. `op` is writable (above).
    // A chain of compares, the plain send and write first: each costs two instructions,
    // against a jump table's bounds check, load and indirect jump.
    unsafe {
        let o = c.opcode;
        if o == IBV_WR_SEND {
            op.write(WrOp::Send);
        } else if o == IBV_WR_RDMA_WRITE {
            op.write(WrOp::RdmaWrite {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
            });
        } else if o == IBV_WR_SEND_WITH_IMM {
            op.write(WrOp::SendWithImm {
                imm_data: u32::from_be(c.imm_data),
            });
        } else if o == IBV_WR_RDMA_WRITE_WITH_IMM {
            op.write(WrOp::RdmaWriteWithImm {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
                imm_data: u32::from_be(c.imm_data),
            });
        } else if o == IBV_WR_RDMA_READ {
            op.write(WrOp::RdmaRead {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
            });
        } else {
            op.write(send_op_other(c)?);
        }
    }
    Ok(())
}

/// The operation of a C send work request other than those [`send_op_into`] writes itself:
/// atomics, invalidations, binds and what uverbs refuses.
///
/// # Safety
/// `c` is valid; for `IBV_WR_BIND_MW`, its `mw` and `mr` are NULL or the program's.
#[inline(never)]
unsafe fn send_op_other(c: &ibv_send_wr) -> Result<WrOp, Refused> {
    // SAFETY: the union members read below are plain numbers and pointers, any bytes valid;
    // the opcode says which the program filled in, and only those are used.
    Ok(unsafe {
        match c.opcode {
            IBV_WR_ATOMIC_CMP_AND_SWP => WrOp::AtomicCmpAndSwp {
                remote_addr: c.wr.atomic.remote_addr,
                rkey: c.wr.atomic.rkey,
                compare: c.wr.atomic.compare_add,
                swap: c.wr.atomic.swap,
            },
            IBV_WR_ATOMIC_FETCH_AND_ADD => WrOp::AtomicFetchAndAdd {
                remote_addr: c.wr.atomic.remote_addr,
                rkey: c.wr.atomic.rkey,
                add: c.wr.atomic.compare_add,
            },
            IBV_WR_ATOMIC_WRITE => {
                // verbs.h gives `ibv_send_wr` no field for an atomic write's 8 bytes (only
                // `ibv_wr_atomic_write` takes them); here they are read, as inline data is,
                // from the one 8-byte SGE, and travel in the WQE.
                let [s] = sges(c.sg_list, c.num_sge)? else {
                    return Err(libc::EINVAL);
                };
                if s.length != 8 || s.addr == 0 {
                    return Err(libc::EINVAL);
                }
                WrOp::AtomicWrite {
                    remote_addr: c.wr.rdma.remote_addr,
                    rkey: c.wr.rdma.rkey,
                    // The program's 8-byte buffer, read unaligned, as bytes.
                    value: core::ptr::read_unaligned(s.addr as usize as *const [u8; 8]),
                }
            }
            IBV_WR_LOCAL_INV => WrOp::LocalInv {
                invalidate_rkey: c.imm_data,
            },
            IBV_WR_SEND_WITH_INV => WrOp::SendWithInv {
                invalidate_rkey: c.imm_data,
            },
            IBV_WR_BIND_MW => {
                let b = &c.ext.bind_mw;
                bind_op(b.mw, b.rkey, &b.bind_info)?
            }
            IBV_WR_TSO | IBV_WR_FLUSH => return Err(libc::EOPNOTSUPP),
            _ => return Err(libc::EINVAL),
        }
    })
}

/// `IBV_WR_BIND_MW` / `ibv_wr_bind_mw` of window `mw` to `info` with the new key `rkey`.
///
/// # Safety
/// `mw` and `info.mr` are NULL or the program's live objects.
unsafe fn bind_op(mw: *mut ibv_mw, rkey: u32, info: &ibv_mw_bind_info) -> Result<WrOp, Refused> {
    // SAFETY: see above.
    let mw = unsafe { mw.as_ref() }.ok_or(libc::EINVAL)?;
    // An unbind (length 0) may name no MR.
    // SAFETY: see above.
    let mr_lkey = unsafe { info.mr.as_ref() }.map_or(0, |m| m.lkey);
    Ok(WrOp::BindMw {
        mw_rkey: mw.rkey,
        new_rkey: rkey,
        mr_lkey,
        addr: info.addr,
        length: info.length,
        access: AccessFlags::from_bits_retain(info.mw_access_flags),
    })
}

/// Gathers `parts` (address, length) into `buf`: the bytes, or EINVAL when they exceed it
/// (as rxe refuses inline data above `max_inline_data`).
///
/// # Safety
/// Each part is `length` readable bytes at `address`.
unsafe fn gather_into(
    buf: &mut [u8],
    parts: impl Iterator<Item = (u64, usize)>,
) -> Result<usize, Refused> {
    let mut at = 0usize;
    for (addr, len) in parts {
        let end = at
            .checked_add(len)
            .filter(|&e| e <= buf.len())
            .ok_or(libc::EINVAL)?;
        // SAFETY: see above.
        buf[at..end].copy_from_slice(unsafe { slice(addr as usize as *const u8, len) });
        at = end;
    }
    Ok(at)
}

/// The inline data of a C send work request (`IBV_SEND_INLINE`): one SGE (or none) read
/// where it lies; several gathered into `gather` (which the caller keeps unwritten until the
/// WR is posted).
///
/// # Safety
/// As [`send_wr_into`].
#[inline(never)]
unsafe fn inline_data<'a>(
    c: &ibv_send_wr,
    gather: *mut u8,
    gather_len: usize,
) -> Result<WrData<'a>, Refused> {
    // SAFETY: see above.
    let sg = unsafe { sges(c.sg_list, c.num_sge) }?;
    Ok(match sg {
        [s] => {
            let (addr, len) = (s.addr as usize as *const u8, s.length as usize);
            // SAFETY: the program's inline buffer (see above).
            WrData::Inline(unsafe { slice(addr, len) })
        }
        [] => WrData::Inline(&[]),
        _ => {
            // SAFETY: the caller's gather buffer, not read by anything else meanwhile.
            let buf = unsafe { core::slice::from_raw_parts_mut(gather, gather_len) };
            // SAFETY: the program's inline buffers.
            let n = unsafe { gather_into(buf, sg.iter().map(|s| (s.addr, s.length as usize))) }?;
            WrData::Inline(&buf[..n])
        }
    })
}

/// `IBV_WR_SEND`, `IBV_WR_SEND_WITH_IMM`, `IBV_WR_SEND_WITH_INV`: the opcodes that take a
/// datagram destination, as a bit set over the opcode.
const DATAGRAM_OPS: u32 = 1 << IBV_WR_SEND | 1 << IBV_WR_SEND_WITH_IMM | 1 << IBV_WR_SEND_WITH_INV;

/// One C send work request as uverbs posts it, written field by field into `out` (the slot
/// the provider reads: no temporary, no copy). Inline data in one SGE (or none) is read where
/// it lies; in several it is gathered into `gather` (which the caller keeps unwritten until
/// the WR is posted). On `Err`, `out` may hold some of the fields, and is not initialised.
///
/// # Safety
/// `c` is a valid work request whose buffers, SGEs and objects outlive `'a`; `gather` is
/// valid for `gather_len` bytes for `'a`.
#[inline(always)]
unsafe fn send_wr_into<'a>(
    out: &mut MaybeUninit<SendWr<'a>>,
    c: &ibv_send_wr,
    datagram: bool,
    gather: *mut u8,
    gather_len: usize,
) -> Result<(), Refused> {
    let p = out.as_mut_ptr();
    // SAFETY: see above; `p` is `out`'s, valid for writes, and the field pointers are in it.
    unsafe { send_op_into(ptr::addr_of_mut!((*p).op), c) }?;
    let data = if c.opcode == IBV_WR_ATOMIC_WRITE {
        // Its 8 bytes travel in the WQE (send_op_other read them from the one SGE).
        WrData::Sge(&[])
    } else if c.send_flags & IBV_SEND_INLINE == 0 {
        // SAFETY: see above.
        WrData::Sge(unsafe { sges(c.sg_list, c.num_sge) }?)
    } else {
        // SAFETY: see above.
        unsafe { inline_data(c, gather, gather_len) }?
    };
    // The shift is in range: the opcode is one send_op_into took (0 ..= 9).
    let ud = if datagram && DATAGRAM_OPS & (1 << (c.opcode as u32 & 31)) != 0 {
        // SAFETY: on a datagram QP a send's `wr` is `ud` (the program's AH, or NULL).
        let (ah, qpn, qkey) = unsafe { (c.wr.ud.ah, c.wr.ud.remote_qpn, c.wr.ud.remote_qkey) };
        // SAFETY: NULL or the program's live AH.
        let ah = unsafe { crate::ah::ah(ah) }.ok_or(libc::EINVAL)?;
        Some(UdDest::new(&*ah.ah, qpn, qkey))
    } else {
        None
    };
    // SAFETY: as above; with `op` written above, every field of `out` is now written.
    unsafe {
        ptr::addr_of_mut!((*p).wr_id).write(c.wr_id);
        ptr::addr_of_mut!((*p).flags).write(SendFlags::from_bits_truncate(
            c.send_flags & SEND_FLAGS_CARRIED,
        ));
        ptr::addr_of_mut!((*p).data).write(data);
        ptr::addr_of_mut!((*p).ud).write(ud);
    }
    Ok(())
}

/// [`send_wr_into`] of a plain WR (a send or RDMA operation with SGEs, and on a datagram QP
/// an AH): `true` with `out` written; `false` having decided nothing (`out` may hold some
/// fields), for [`post_send_list`] to convert with every check and errno. No call, so the
/// single-WR post around it stays small.
///
/// # Safety
/// As [`send_wr_into`].
#[inline(always)]
unsafe fn send_wr_plain_into<'a>(
    out: &mut MaybeUninit<SendWr<'a>>,
    c: &ibv_send_wr,
    datagram: bool,
) -> bool {
    if c.send_flags & IBV_SEND_INLINE != 0 || c.opcode > IBV_WR_RDMA_READ || c.opcode < 0 {
        return false;
    }
    let p = out.as_mut_ptr();
    // SAFETY: see above; the opcode is one send_op_into writes itself (0 ..= 4), so it
    // neither calls out nor fails.
    if unsafe { send_op_into(ptr::addr_of_mut!((*p).op), c) }.is_err() {
        return false;
    }
    // SAFETY: see above.
    let Ok(sg) = (unsafe { sges(c.sg_list, c.num_sge) }) else {
        return false;
    };
    // Each branch stores its own `ud` (a connected QP's None is one store, not the fields of
    // a destination it does not have).
    if datagram && DATAGRAM_OPS & (1 << (c.opcode as u32 & 31)) != 0 {
        // SAFETY: on a datagram QP a send's `wr` is `ud` (the program's AH, or NULL).
        let (ah, qpn, qkey) = unsafe { (c.wr.ud.ah, c.wr.ud.remote_qpn, c.wr.ud.remote_qkey) };
        // SAFETY: NULL or the program's live AH.
        let Some(ah) = (unsafe { crate::ah::ah(ah) }) else {
            return false;
        };
        // SAFETY: as above.
        unsafe { ptr::addr_of_mut!((*p).ud).write(Some(UdDest::new(&*ah.ah, qpn, qkey))) };
    } else {
        // SAFETY: as above.
        unsafe { ptr::addr_of_mut!((*p).ud).write(None) };
    }
    // SAFETY: as above; with `op` and `ud` written above, every field of `out` is now
    // written.
    unsafe {
        ptr::addr_of_mut!((*p).wr_id).write(c.wr_id);
        ptr::addr_of_mut!((*p).flags).write(SendFlags::from_bits_truncate(
            c.send_flags & SEND_FLAGS_CARRIED,
        ));
        ptr::addr_of_mut!((*p).data).write(WrData::Sge(sg));
    }
    true
}

/// The operation and SGEs of a plain WR for a connected QP (a send or RDMA operation with
/// SGEs), read in place for [`uverbs::Qp::stage_send`]: no `SendWr` is built. None for
/// anything else (inline data, other opcodes, a bad SGE list), which the chunked path
/// converts with every check and errno.
///
/// # Safety
/// `c` is a valid work request whose SGEs outlive `'a`.
#[inline(always)]
unsafe fn plain_parts<'a>(c: &ibv_send_wr) -> Option<(WrOp, &'a [Sge])> {
    if c.send_flags & IBV_SEND_INLINE != 0 {
        return None;
    }
    // SAFETY: the union members read below are plain numbers, any bytes valid; the opcode
    // says which the program filled in, and only those are used.
    let op = unsafe {
        match c.opcode {
            IBV_WR_RDMA_WRITE => WrOp::RdmaWrite {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
            },
            IBV_WR_SEND => WrOp::Send,
            IBV_WR_SEND_WITH_IMM => WrOp::SendWithImm {
                imm_data: u32::from_be(c.imm_data),
            },
            IBV_WR_RDMA_WRITE_WITH_IMM => WrOp::RdmaWriteWithImm {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
                imm_data: u32::from_be(c.imm_data),
            },
            IBV_WR_RDMA_READ => WrOp::RdmaRead {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
            },
            _ => return None,
        }
    };
    // SAFETY: see above.
    let sg = unsafe { sges(c.sg_list, c.num_sge) }.ok()?;
    Some((op, sg))
}

/// Stages the plain WRs at the head of the list from `wr` on a connected QP
/// ([`plain_parts`], [`uverbs::Qp::stage_send`]: each written into the send queue from the C
/// struct, no `SendWr` in between) and rings once for them. Returns the first WR not staged
/// (NULL: all were) for the chunked path, or `Err` with the errno of a failed doorbell.
///
/// # Safety
/// `wr` heads a valid list; `bad_wr` is valid for writes.
#[inline(always)]
unsafe fn stage_plain(
    q: &mut uverbs::Qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> Result<*mut ibv_send_wr, c_int> {
    let mut staged = 0usize;
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: an element of the program's list.
        let c = unsafe { &*cur };
        // SAFETY: as above.
        let Some((op, sg)) = (unsafe { plain_parts(c) }) else {
            break;
        };
        let flags = SendFlags::from_bits_truncate(c.send_flags & SEND_FLAGS_CARRIED);
        if !q.stage_send(c.wr_id, &op, flags, sg) {
            break;
        }
        staged += 1;
        cur = c.next;
    }
    match q.ring_staged(staged) {
        Ok(()) => Ok(cur),
        // SAFETY: `wr` heads the `staged` WRs; the doorbell's index (`staged`) names `cur`.
        Err(e) => Err(unsafe { refused(e, staged, wr, cur, bad_wr) }),
    }
}

/// The errno of a refused post, with `*bad_wr` the C work request uverbs names: the
/// `index`-th of the `n` posted from `first` on, or `after` (the first not converted) when the
/// index is past them (the doorbell failed for all of them). Out of line: the posts' error
/// path.
///
/// # Safety
/// `first` heads at least `n` valid WRs of the program's list; `bad_wr` is valid for writes.
#[cold]
#[inline(never)]
unsafe fn refused(
    e: uverbs::PostError,
    n: usize,
    first: *mut ibv_send_wr,
    after: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let bad = if e.index < n {
        let mut p = first;
        for _ in 0..e.index {
            // SAFETY: one of the first n WRs from `first` (see above), so `next` is the next.
            p = unsafe { (*p).next };
        }
        p
    } else {
        after
    };
    // SAFETY: see above.
    unsafe { *bad_wr = bad };
    report(&e.error)
}

/// Posts `wrs` (converted from the C list starting at `first`) on `q`; on refusal,
/// [`refused`] names the C work request in `*bad_wr` and the errno is returned.
///
/// # Safety
/// `first` heads the `wrs.len()` WRs converted; `bad_wr` is valid for writes.
#[inline(always)]
unsafe fn flush_send(
    q: &mut uverbs::Qp,
    wrs: &[SendWr<'_>],
    first: *mut ibv_send_wr,
    after: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    if wrs.is_empty() {
        return 0;
    }
    match q.post_send(wrs) {
        Ok(()) => 0,
        // SAFETY: see above.
        Err(e) => unsafe { refused(e, wrs.len(), first, after, bad_wr) },
    }
}

/// `ibv_context.ops.post_send` (the header's `ibv_post_send`). On a connected QP the plain
/// WRs at the head of the list are written into the send queue from the C structs and rung
/// once ([`stage_plain`]: rxe; no `SendWr` is built). On a datagram QP (every EFA QP) one
/// plain WR (`next` NULL, the latency case: [`send_wr_plain_into`]) is converted on the stack
/// and posted as a one-element slice. Everything else goes to [`post_send_list`].
pub unsafe extern "C" fn post_send(
    q: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    guard("ibv_post_send", libc::EIO, || {
        if bad_wr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: checked non-NULL; the program's pointer.
        unsafe { *bad_wr = ptr::null_mut() };
        // SAFETY: the program passes NULL or a live QP it alone posts to.
        let Some(w) = (unsafe { qp(q) }) else {
            return libc::EINVAL;
        };
        // SAFETY: the program passes NULL or a valid WR.
        let Some(c) = (unsafe { wr.as_ref() }) else {
            return libc::EINVAL;
        };
        if !w.datagram {
            // SAFETY: the program's list; `bad_wr` checked above.
            match unsafe { stage_plain(&mut w.qp, wr, bad_wr) } {
                Ok(rest) if rest.is_null() => return 0,
                // SAFETY: the rest of the program's list; `bad_wr` checked above.
                Ok(rest) => return unsafe { post_send_list(w, rest, bad_wr) },
                Err(errno) => return errno,
            }
        }
        if c.next.is_null() {
            let mut s = MaybeUninit::uninit();
            // SAFETY: the program's WR.
            if unsafe { send_wr_plain_into(&mut s, c, w.datagram) } {
                // SAFETY: `s` is written (true); `wr` is the one WR converted; `bad_wr`
                // checked above.
                return unsafe {
                    flush_send(
                        &mut w.qp,
                        core::slice::from_ref(s.assume_init_ref()),
                        wr,
                        ptr::null_mut(),
                        bad_wr,
                    )
                };
            }
        }
        // SAFETY: the program's list of valid WRs; `bad_wr` checked above.
        unsafe { post_send_list(w, wr, bad_wr) }
    })
}

/// [`post_send`] of a list: chunks of up to [`SEND_CHUNK`] converted WRs (stack slots written as
/// they are filled), each posted at once; a WR that cannot be converted is refused after
/// those before it are posted.
///
/// # Safety
/// `wr` heads a valid list; `bad_wr` is valid for writes.
#[inline(never)]
unsafe fn post_send_list(w: &mut Qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr) -> c_int {
    let datagram = w.datagram;
    let (gather, gather_len) = (w.gather.as_mut_ptr(), w.gather.len());
    let mut wrs: [MaybeUninit<SendWr<'_>>; SEND_CHUNK] =
        [const { MaybeUninit::uninit() }; SEND_CHUNK];
    let mut n = 0;
    // The C WR of wrs[0].
    let mut first = wr;
    // A WR of the unposted chunk holds inline data in `gather`.
    let mut gathered = false;
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: an element of the program's list.
        let c = unsafe { &*cur };
        let gathers = c.send_flags & IBV_SEND_INLINE != 0 && c.num_sge > 1;
        if n == SEND_CHUNK || (gathers && gathered) {
            // SAFETY: the first n elements are initialised; SendWr is Copy (no drop).
            let chunk = unsafe { slice(wrs.as_ptr() as *const SendWr<'_>, n) };
            // SAFETY: `first` heads the chunk's WRs; bad_wr valid (above).
            let r = unsafe { flush_send(&mut w.qp, chunk, first, cur, bad_wr) };
            if r != 0 {
                return r;
            }
            n = 0;
            first = cur;
            gathered = false;
        }
        // SAFETY: the program's WR; `gather` is not in use by an unposted WR (above).
        match unsafe { send_wr_into(&mut wrs[n], c, datagram, gather, gather_len) } {
            Ok(()) => {
                n += 1;
                gathered |= gathers;
            }
            Err(errno) => {
                // SAFETY: as above.
                let chunk = unsafe { slice(wrs.as_ptr() as *const SendWr<'_>, n) };
                // SAFETY: as above.
                let r = unsafe { flush_send(&mut w.qp, chunk, first, cur, bad_wr) };
                if r != 0 {
                    return r;
                }
                // SAFETY: bad_wr valid (above).
                unsafe { *bad_wr = cur };
                return errno;
            }
        }
        cur = c.next;
    }
    // SAFETY: as above.
    let chunk = unsafe { slice(wrs.as_ptr() as *const SendWr<'_>, n) };
    // SAFETY: as above.
    unsafe { flush_send(&mut w.qp, chunk, first, ptr::null_mut(), bad_wr) }
}

/// `ibv_context.ops.post_recv` (the header's `ibv_post_recv`).
pub unsafe extern "C" fn post_recv(
    q: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    guard("ibv_post_recv", libc::EIO, || {
        if bad_wr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: checked non-NULL; the program's pointer.
        unsafe { *bad_wr = ptr::null_mut() };
        // SAFETY: the program passes NULL or a live QP it alone posts to.
        let Some(w) = (unsafe { qp(q) }) else {
            return libc::EINVAL;
        };
        if wr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program's list of valid WRs; `bad_wr` checked above.
        unsafe { post_recv_list(&mut w.qp, wr, bad_wr) }
    })
}

/// Posts a C list of receive WRs on `q` in chunks of [`CHUNK`].
///
/// # Safety
/// `wr` heads a valid list; `bad_wr` is valid for writes.
unsafe fn post_recv_list(
    q: &mut uverbs::Qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let mut wrs: [MaybeUninit<RecvWr<'_>>; CHUNK] = [const { MaybeUninit::uninit() }; CHUNK];
    let mut src = [ptr::null_mut::<ibv_recv_wr>(); CHUNK];
    let mut n = 0;
    let mut cur = wr;
    let flush = |q: &mut uverbs::Qp, wrs: &[RecvWr<'_>], src: &[*mut ibv_recv_wr], after| {
        if wrs.is_empty() {
            return 0;
        }
        match q.post_recv(wrs) {
            Ok(()) => 0,
            Err(e) => {
                // SAFETY: bad_wr valid (above).
                unsafe { *bad_wr = src.get(e.index).copied().unwrap_or(after) };
                report(&e.error)
            }
        }
    };
    while !cur.is_null() {
        // SAFETY: an element of the program's list.
        let c = unsafe { &*cur };
        if n == CHUNK {
            // SAFETY: the first n elements are initialised; RecvWr is Copy (no drop).
            let chunk = unsafe { slice(wrs.as_ptr() as *const RecvWr<'_>, n) };
            let r = flush(q, chunk, &src[..n], cur);
            if r != 0 {
                return r;
            }
            n = 0;
        }
        // SAFETY: the program's SGE list of this WR.
        match unsafe { sges(c.sg_list, c.num_sge) } {
            Ok(sg) => {
                wrs[n].write(RecvWr::new(c.wr_id, sg));
                src[n] = cur;
                n += 1;
            }
            Err(errno) => {
                // SAFETY: as above.
                let chunk = unsafe { slice(wrs.as_ptr() as *const RecvWr<'_>, n) };
                let r = flush(q, chunk, &src[..n], cur);
                if r != 0 {
                    return r;
                }
                // SAFETY: bad_wr valid (above).
                unsafe { *bad_wr = cur };
                return errno;
            }
        }
        cur = c.next;
    }
    // SAFETY: as above.
    let chunk = unsafe { slice(wrs.as_ptr() as *const RecvWr<'_>, n) };
    flush(q, chunk, &src[..n], ptr::null_mut())
}

// ----- ibv_qp_ex: the wr_* builders ---------------------------------------------------------

impl Qp {
    /// Runs one builder or setter on the open batch (nothing without one: calling them
    /// outside `wr_start` … `wr_complete` is the program's error, as in rdma-core).
    fn step(&mut self, f: impl FnOnce(&mut uverbs::WrBatch<'_>, &mut [u8])) {
        if !self.batch_open {
            return;
        }
        let mut b = self.qp.wr_resume(self.batch_err.take());
        f(&mut b, &mut self.gather);
        self.batch_err = b.suspend();
    }

    /// The `wr_id` and flags the program set in the `ibv_qp_ex` for the next builder.
    fn wr_id_flags(&self) -> (u64, SendFlags) {
        (
            self.ibv.wr_id,
            SendFlags::from_bits_truncate(self.ibv.wr_flags & SEND_FLAGS_CARRIED),
        )
    }

    /// A refusal of this library's own in the open batch (the first error wins; `complete`
    /// reports it).
    fn refuse(&mut self, call: &'static str, why: &'static str) {
        if self.batch_open && self.batch_err.is_none() {
            self.batch_err = Some(einval(call, why));
        }
    }
}

/// The QP of an `ibv_qp_ex` (None for NULL).
///
/// # Safety
/// `p` is NULL or the `ibv_qp_ex` of a live QP of this library, used by no other thread.
unsafe fn qpx<'a>(p: *mut ibv_qp_ex) -> Option<&'a mut Qp> {
    // SAFETY: see above; the ibv_qp_ex is the first field of the repr(C) Qp.
    unsafe { (p as *mut Qp).as_mut() }
}

/// A builder: the operation `op` with the `wr_id` and flags the program set.
fn build(x: *mut ibv_qp_ex, call: &'static str, op: impl FnOnce() -> WrOp) {
    guard(call, (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        let (id, flags) = w.wr_id_flags();
        w.step(|b, _| {
            b.wr_op(id, flags, op());
        });
    })
}

unsafe extern "C" fn wr_start(x: *mut ibv_qp_ex) {
    guard("ibv_wr_start", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if w.batch_open {
            // A second start: the open batch fails (complete reports it).
            w.refuse(
                "wr_start",
                "ibv_wr_start called again before ibv_wr_complete",
            );
            return;
        }
        w.batch_open = true;
        w.batch_err = match w.qp.wr_start() {
            Ok(b) => b.suspend(),
            // The batch is open but refused: complete reports why.
            Err(e) => Some(e),
        };
    })
}

unsafe extern "C" fn wr_complete(x: *mut ibv_qp_ex) -> c_int {
    guard("ibv_wr_complete", libc::EIO, || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else {
            return libc::EINVAL;
        };
        if !w.batch_open {
            return libc::EINVAL;
        }
        w.batch_open = false;
        let b = w.qp.wr_resume(w.batch_err.take());
        crate::util::ret(b.complete())
    })
}

unsafe extern "C" fn wr_abort(x: *mut ibv_qp_ex) {
    guard("ibv_wr_abort", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if w.batch_open {
            w.batch_open = false;
            w.qp.wr_resume(w.batch_err.take()).abort();
        }
    })
}

unsafe extern "C" fn wr_send(x: *mut ibv_qp_ex) {
    build(x, "ibv_wr_send", || WrOp::Send);
}

unsafe extern "C" fn wr_send_imm(x: *mut ibv_qp_ex, imm_data: u32) {
    build(x, "ibv_wr_send_imm", || WrOp::SendWithImm {
        imm_data: u32::from_be(imm_data),
    });
}

unsafe extern "C" fn wr_send_inv(x: *mut ibv_qp_ex, invalidate_rkey: u32) {
    build(x, "ibv_wr_send_inv", || WrOp::SendWithInv {
        invalidate_rkey,
    });
}

unsafe extern "C" fn wr_rdma_write(x: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    build(x, "ibv_wr_rdma_write", || WrOp::RdmaWrite {
        remote_addr,
        rkey,
    });
}

unsafe extern "C" fn wr_rdma_write_imm(x: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm: u32) {
    build(x, "ibv_wr_rdma_write_imm", || WrOp::RdmaWriteWithImm {
        remote_addr,
        rkey,
        imm_data: u32::from_be(imm),
    });
}

unsafe extern "C" fn wr_rdma_read(x: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    build(x, "ibv_wr_rdma_read", || WrOp::RdmaRead {
        remote_addr,
        rkey,
    });
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    build(x, "ibv_wr_atomic_cmp_swp", || WrOp::AtomicCmpAndSwp {
        remote_addr,
        rkey,
        compare,
        swap,
    });
}

unsafe extern "C" fn wr_atomic_fetch_add(x: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64) {
    build(x, "ibv_wr_atomic_fetch_add", || WrOp::AtomicFetchAndAdd {
        remote_addr,
        rkey,
        add,
    });
}

/// `ibv_wr_atomic_write`: the 8 bytes at `atomic_wr` are copied into the work request now.
unsafe extern "C" fn wr_atomic_write(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    atomic_wr: *const c_void,
) {
    if atomic_wr.is_null() {
        guard("ibv_wr_atomic_write", (), || {
            // SAFETY: the header passes the program's live ibv_qp_ex.
            if let Some(w) = unsafe { qpx(x) } {
                w.refuse("wr_atomic_write", "NULL atomic_wr (the 8 bytes to write)");
            }
        });
        return;
    }
    // SAFETY: the program passes 8 readable bytes (verbs.h's contract); read as bytes.
    let value = unsafe { core::ptr::read_unaligned(atomic_wr as *const [u8; 8]) };
    build(x, "ibv_wr_atomic_write", || WrOp::AtomicWrite {
        remote_addr,
        rkey,
        value,
    });
}

unsafe extern "C" fn wr_local_inv(x: *mut ibv_qp_ex, invalidate_rkey: u32) {
    build(x, "ibv_wr_local_inv", || WrOp::LocalInv { invalidate_rkey });
}

unsafe extern "C" fn wr_bind_mw(
    x: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    guard("ibv_wr_bind_mw", (), || {
        // SAFETY: the program passes NULL or a valid bind info.
        let op = match unsafe { info.as_ref() } {
            // SAFETY: the program's MW and MR (or NULL).
            Some(i) => unsafe { bind_op(mw, rkey, i) },
            None => Err(libc::EINVAL),
        };
        match op {
            Ok(op) => build(x, "ibv_wr_bind_mw", || op),
            Err(_) => {
                // SAFETY: the header passes the program's live ibv_qp_ex.
                if let Some(w) = unsafe { qpx(x) } {
                    w.refuse("wr_bind_mw", "NULL memory window or bind info");
                }
            }
        }
    })
}

unsafe extern "C" fn wr_set_sge(x: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    guard("ibv_wr_set_sge", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        w.step(|b, _| {
            b.set_sge(lkey, addr, length);
        });
    })
}

unsafe extern "C" fn wr_set_sge_list(x: *mut ibv_qp_ex, num_sge: usize, sg_list: *const Sge) {
    guard("ibv_wr_set_sge_list", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if num_sge > 0 && sg_list.is_null() {
            return w.refuse("wr_set_sge_list", "NULL sg_list");
        }
        // SAFETY: the program's `num_sge` SGEs, read during this call.
        let sg = unsafe { slice(sg_list, num_sge) };
        w.step(|b, _| {
            b.set_sge_list(sg);
        });
    })
}

unsafe extern "C" fn wr_set_inline_data(x: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    guard("ibv_wr_set_inline_data", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if length > 0 && addr.is_null() {
            return w.refuse("wr_set_inline_data", "NULL inline data");
        }
        // SAFETY: the program's `length` bytes, copied during this call.
        let data = unsafe { slice(addr as *const u8, length) };
        w.step(|b, _| {
            b.set_inline_data(data);
        });
    })
}

unsafe extern "C" fn wr_set_inline_data_list(
    x: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) {
    guard("ibv_wr_set_inline_data_list", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if num_buf > 0 && buf_list.is_null() {
            return w.refuse("wr_set_inline_data_list", "NULL buf_list");
        }
        // SAFETY: the program's `num_buf` buffers, read during this call.
        let bufs = unsafe { slice(buf_list, num_buf) };
        let mut too_long = false;
        w.step(|b, gather| {
            let parts = bufs.iter().map(|d| (d.addr as usize as u64, d.length));
            // SAFETY: each buffer is the program's `length` readable bytes.
            match unsafe { gather_into(gather, parts) } {
                Ok(n) => {
                    b.set_inline_data(&gather[..n]);
                }
                Err(_) => too_long = true,
            }
        });
        if too_long {
            w.refuse(
                "wr_set_inline_data_list",
                "inline data longer than the QP's max_inline_data",
            );
        }
    })
}

unsafe extern "C" fn wr_set_ud_addr(x: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    guard("ibv_wr_set_ud_addr", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        // SAFETY: the program passes NULL or a live AH.
        match unsafe { crate::ah::ah(ah) } {
            Some(a) => w.step(|b, _| {
                b.set_ud_addr(&a.ah, qpn, qkey);
            }),
            None => w.refuse("wr_set_ud_addr", "NULL address handle"),
        }
    })
}
