//! Queue pairs through the C entry points, on the rxe stand-in kernel (rings, doorbells,
//! `bad_wr`) and the EFA device model (query round-trip, a UD send end to end).
#![allow(clippy::missing_safety_doc)]

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, ManuallyDrop};
use core::ptr::null_mut;

use uverbs_capi::abi::*;
use uverbs_rxe_standin::RxeStandin;

extern "C" {
    fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
    fn ibv_create_cq(
        ctx: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut core::ffi::c_void,
        channel: *mut core::ffi::c_void,
        comp_vector: c_int,
    ) -> *mut ibv_cq;
    fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
    fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
    fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int;
    fn ibv_query_qp(
        qp: *mut ibv_qp,
        attr: *mut ibv_qp_attr,
        mask: c_int,
        init: *mut ibv_qp_init_attr,
    ) -> c_int;
    fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
    fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex;
    fn ibv_query_qp_data_in_order(qp: *mut ibv_qp, op: c_int, flags: u32) -> c_int;
    fn ibv_set_ece(qp: *mut ibv_qp, ece: *mut ibv_ece) -> c_int;
    fn ibv_query_ece(qp: *mut ibv_qp, ece: *mut ibv_ece) -> c_int;
    fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int;
}

// The wrappers' layouts (C struct, then the uverbs object), as the library's modules define
// them: the tests make AHs with the Rust API and hand them over as C pointers.
#[repr(C)]
struct TestPd {
    ibv: ibv_pd,
    pd: ManuallyDrop<uverbs::Pd>,
}

#[repr(C)]
struct TestAh {
    ibv: ibv_ah,
    ah: ManuallyDrop<uverbs::Ah>,
}

const IBV_QPT_RC: c_int = 2;
const IBV_QPT_UD: c_int = 4;
const IBV_WR_RDMA_WRITE: c_int = 0;
const IBV_WR_SEND: c_int = 2;
const IBV_SEND_SIGNALED: u32 = 2;
const IBV_SEND_INLINE: u32 = 8;
const IBV_QP_STATE: c_int = 1;
const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
const IBV_QP_PORT: c_int = 1 << 5;
const IBV_QP_QKEY: c_int = 1 << 6;
const IBV_QP_AV: c_int = 1 << 7;
const IBV_QP_PATH_MTU: c_int = 1 << 8;
const IBV_QP_TIMEOUT: c_int = 1 << 9;
const IBV_QP_RETRY_CNT: c_int = 1 << 10;
const IBV_QP_RNR_RETRY: c_int = 1 << 11;
const IBV_QP_RQ_PSN: c_int = 1 << 12;
const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
const IBV_QP_SQ_PSN: c_int = 1 << 16;
const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
const IBV_QP_CAP: c_int = 1 << 19;
const IBV_QP_DEST_QPN: c_int = 1 << 20;
const IBV_QP_INIT_ATTR_PD: u32 = 1;
const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
const IBV_QP_INIT_ATTR_RX_HASH: u32 = 1 << 5;
const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1;
const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;

fn state(qp: *mut ibv_qp) -> c_int {
    // SAFETY: the tests pass live QPs of the library.
    unsafe { (*qp).state }
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A CQ of `cqe` entries made through the C entry point.
fn cq_ptr(ctx: *mut ibv_context, cqe: c_int) -> *mut ibv_cq {
    // SAFETY: a live context; no channel, no user context.
    let cq = unsafe { ibv_create_cq(ctx, cqe, core::ptr::null_mut(), core::ptr::null_mut(), 0) };
    assert!(!cq.is_null(), "ibv_create_cq: errno {}", errno());
    cq
}

/// Polls `cq` through the context's `ops.poll_cq`, as the header's `ibv_poll_cq` does.
fn poll(cq: *mut ibv_cq, wcs: &mut [uverbs::Wc]) -> usize {
    // SAFETY: a live CQ of the library; its context's ops are filled.
    let n = unsafe {
        let poll_cq = (*(*cq).context).ops.poll_cq.expect("poll_cq");
        poll_cq(cq, wcs.len() as c_int, wcs.as_mut_ptr())
    };
    assert!(n >= 0, "poll_cq: {n}");
    n as usize
}

fn upd<'a>(p: *mut ibv_pd) -> &'a uverbs::Pd {
    // SAFETY: a PD of ibv_alloc_pd, whose layout TestPd repeats.
    unsafe { &(*(p as *mut TestPd)).pd }
}

fn vctx(ctx: *mut ibv_context) -> *mut verbs_context {
    // SAFETY: the library's contexts are verbs_contexts ending with the ibv_context.
    unsafe { (ctx as *mut u8).sub(offset_of!(verbs_context, context)) as *mut verbs_context }
}

fn cap(send: u32, recv: u32, sge: u32, inline: u32) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: send,
        max_recv_wr: recv,
        max_send_sge: sge,
        max_recv_sge: sge,
        max_inline_data: inline,
    }
}

fn init_attr(cq: *mut ibv_cq, qp_type: c_int, cap: ibv_qp_cap) -> ibv_qp_init_attr {
    ibv_qp_init_attr {
        qp_context: 0x1234 as *mut c_void,
        send_cq: cq,
        recv_cq: cq,
        srq: null_mut(),
        cap,
        qp_type,
        sq_sig_all: 0,
    }
}

fn init_attr_ex(pd: *mut ibv_pd, cq: *mut ibv_cq, qp_type: c_int) -> ibv_qp_init_attr_ex {
    let a = init_attr(cq, qp_type, cap(64, 64, 2, 0));
    ibv_qp_init_attr_ex {
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: null_mut(),
        cap: a.cap,
        qp_type,
        sq_sig_all: 0,
        comp_mask: IBV_QP_INIT_ATTR_PD,
        pd,
        xrcd: null_mut(),
        create_flags: 0,
        max_tso_header: 0,
        rwq_ind_tbl: null_mut(),
        rx_hash_conf: ibv_rx_hash_conf {
            rx_hash_function: 0,
            rx_hash_key_len: 0,
            rx_hash_key: null_mut(),
            rx_hash_fields_mask: 0,
        },
        source_qpn: 0,
        send_ops_flags: 0,
    }
}

fn zero_attr() -> ibv_qp_attr {
    // SAFETY: ibv_qp_attr is plain numbers and byte arrays.
    unsafe { core::mem::zeroed() }
}

/// RESET → INIT → RTR → RTS of an RC QP connected to itself, through ibv_modify_qp; checks
/// `ibv_qp.state` after each step.
fn rc_to_rts(qp: *mut ibv_qp) {
    // SAFETY: a live QP of the library.
    let qpn = unsafe { (*qp).qp_num };
    let mut a = zero_attr();
    a.qp_state = 1;
    a.port_num = 1;
    a.qp_access_flags = 0x7;
    let m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    // SAFETY: live QP, valid attr.
    assert_eq!(unsafe { ibv_modify_qp(qp, &mut a, m) }, 0);
    assert_eq!(state(qp), 1);
    let mut a = zero_attr();
    a.qp_state = 2;
    a.path_mtu = 3;
    a.dest_qp_num = qpn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 1;
    let m = IBV_QP_STATE
        | IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER;
    // SAFETY: as above.
    assert_eq!(unsafe { ibv_modify_qp(qp, &mut a, m) }, 0);
    assert_eq!(state(qp), 2);
    let mut a = zero_attr();
    a.qp_state = 3;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    let m = IBV_QP_STATE
        | IBV_QP_TIMEOUT
        | IBV_QP_RETRY_CNT
        | IBV_QP_RNR_RETRY
        | IBV_QP_SQ_PSN
        | IBV_QP_MAX_QP_RD_ATOMIC;
    // SAFETY: as above.
    assert_eq!(unsafe { ibv_modify_qp(qp, &mut a, m) }, 0);
    assert_eq!(state(qp), 3);
}

struct Rxe {
    st: RxeStandin,
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    cq: *mut ibv_cq,
}

fn rxe() -> Rxe {
    let st = RxeStandin::new().expect("stand-in");
    let uctx = st.open().expect("open");
    let ctx = uverbs_capi::wrap_context(uctx.device().clone(), uctx);
    // SAFETY: a context of the library.
    let pd = unsafe { ibv_alloc_pd(ctx) };
    assert!(!pd.is_null());
    let cq = cq_ptr(ctx, 512);
    Rxe { st, ctx, pd, cq }
}

impl Rxe {
    fn post_send(&self, qp: *mut ibv_qp, wr: *mut ibv_send_wr) -> (c_int, *mut ibv_send_wr) {
        let mut bad = core::ptr::dangling_mut::<ibv_send_wr>();
        // SAFETY: the context's table entry, called as the header's ibv_post_send does.
        let r = unsafe { (*self.ctx).ops.post_send.unwrap()(qp, wr, &mut bad) };
        (r, bad)
    }

    fn post_recv(&self, qp: *mut ibv_qp, wr: *mut ibv_recv_wr) -> (c_int, *mut ibv_recv_wr) {
        let mut bad = core::ptr::dangling_mut::<ibv_recv_wr>();
        // SAFETY: as above.
        let r = unsafe { (*self.ctx).ops.post_recv.unwrap()(qp, wr, &mut bad) };
        (r, bad)
    }

    fn sq_prod(&self, qp: *mut ibv_qp) -> u32 {
        // SAFETY: a live QP.
        self.st.sq_indices(unsafe { (*qp).qp_num }).unwrap().0
    }

    /// Completes every posted send and polls their completions: the wr_ids.
    fn complete(&self, qp: *mut ibv_qp) -> Vec<u64> {
        // SAFETY: a live QP.
        let n = self.st.complete_sends(unsafe { (*qp).qp_num }).unwrap();
        let mut wcs = vec![uverbs::Wc::default(); 64];
        let mut ids = Vec::new();
        loop {
            let got = poll(self.cq, &mut wcs);
            if got == 0 {
                break;
            }
            ids.extend(wcs[..got].iter().map(|w| w.wr_id));
        }
        assert!(ids.len() <= n);
        ids
    }

    fn rc_qp(&self, cap: ibv_qp_cap) -> *mut ibv_qp {
        let mut a = init_attr(self.cq, IBV_QPT_RC, cap);
        // SAFETY: live PD, valid attr.
        let qp = unsafe { ibv_create_qp(self.pd, &mut a) };
        assert!(!qp.is_null(), "create: errno {}", errno());
        rc_to_rts(qp);
        qp
    }
}

/// A chain of `n` signaled sends of one SGE each (wr_id = index), linked in place.
fn send_chain(sge: &mut ibv_sge, n: usize) -> Vec<ibv_send_wr> {
    let mut v: Vec<ibv_send_wr> = (0..n)
        .map(|i| {
            // SAFETY: ibv_send_wr is plain numbers, pointers and unions of them.
            let mut w: ibv_send_wr = unsafe { core::mem::zeroed() };
            w.wr_id = i as u64;
            w.sg_list = sge;
            w.num_sge = 1;
            w.opcode = IBV_WR_SEND;
            w.send_flags = IBV_SEND_SIGNALED;
            w
        })
        .collect();
    link_send(&mut v);
    v
}

fn link_send(v: &mut [ibv_send_wr]) {
    for i in 0..v.len() {
        let next = if i + 1 < v.len() {
            &mut v[i + 1] as *mut ibv_send_wr
        } else {
            null_mut()
        };
        v[i].next = next;
    }
}

#[test]
fn create_fills_back_caps_and_the_c_fields() {
    let r = rxe();
    let mut a = init_attr(r.cq, IBV_QPT_RC, cap(12, 20, 2, 0));
    // SAFETY: live PD, valid attr.
    let qp = unsafe { ibv_create_qp(r.pd, &mut a) };
    assert!(!qp.is_null());
    // The stand-in rounds the SQ up to 15 WRs (rxe_queue_init), the RQ to 31.
    assert_eq!((a.cap.max_send_wr, a.cap.max_recv_wr), (15, 31));
    assert_eq!((a.cap.max_send_sge, a.cap.max_inline_data), (2, 32));
    // SAFETY: a live QP.
    let q = unsafe { &*qp };
    assert_eq!(q.context, r.ctx);
    assert_eq!(q.qp_context, 0x1234 as *mut c_void);
    assert_eq!(
        (q.pd, q.send_cq, q.recv_cq, q.srq),
        (r.pd, r.cq, r.cq, null_mut())
    );
    assert_eq!((q.state, q.qp_type), (0, IBV_QPT_RC));
    assert!(q.qp_num >= 16);
    assert!(r.st.sq_indices(q.qp_num).is_some());
    // Not a QP of create_qp_ex: no ibv_qp_ex.
    // SAFETY: live QP.
    assert!(unsafe { ibv_qp_to_qp_ex(qp) }.is_null());
    // rxe keeps no data order (rdma-core's default answer), ECE is not there.
    // SAFETY: live QP.
    unsafe {
        assert_eq!(ibv_query_qp_data_in_order(qp, IBV_WR_SEND, 0), 0);
        assert_eq!(ibv_query_qp_data_in_order(qp, IBV_WR_SEND, 1), 0);
        let mut ece = ibv_ece::default();
        assert_eq!(ibv_query_ece(qp, &mut ece), libc::EOPNOTSUPP);
        assert_eq!(ibv_set_ece(qp, &mut ece), libc::EOPNOTSUPP);
    }
    let qpn = q.qp_num;
    // SAFETY: live QP, given up.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
    // The QP is gone from the kernel; the PD is free again.
    assert!(r.st.sq_indices(qpn).is_none());
    // SAFETY: live PD.
    assert_eq!(unsafe { ibv_dealloc_pd(r.pd) }, 0);
}

#[test]
fn null_and_inconsistent_arguments_are_einval() {
    let r = rxe();
    let mut a = init_attr(r.cq, IBV_QPT_RC, cap(8, 8, 1, 0));
    // SAFETY: NULL arguments, which the library checks.
    unsafe {
        assert!(ibv_create_qp(null_mut(), &mut a).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(ibv_create_qp(r.pd, null_mut()).is_null());
        assert_eq!(errno(), libc::EINVAL);
        let mut attr = zero_attr();
        assert_eq!(
            ibv_modify_qp(null_mut(), &mut attr, IBV_QP_STATE),
            libc::EINVAL
        );
        assert_eq!(
            ibv_query_qp(null_mut(), &mut attr, 0, null_mut()),
            libc::EINVAL
        );
        assert_eq!(ibv_destroy_qp(null_mut()), libc::EINVAL);
        assert!(ibv_qp_to_qp_ex(null_mut()).is_null());
        assert_eq!(ibv_attach_mcast(null_mut(), null_mut(), 0), libc::EINVAL);
    }
    // An unknown QP type; a UD QP without a CQ.
    let mut bad = init_attr(r.cq, 77, cap(8, 8, 1, 0));
    // SAFETY: live PD, valid attr.
    assert!(unsafe { ibv_create_qp(r.pd, &mut bad) }.is_null());
    assert_eq!(errno(), libc::EINVAL);
    let mut no_cq = init_attr(null_mut(), IBV_QPT_UD, cap(8, 8, 1, 0));
    // SAFETY: as above.
    assert!(unsafe { ibv_create_qp(r.pd, &mut no_cq) }.is_null());
    assert_eq!(errno(), libc::EINVAL);

    let qp = r.rc_qp(cap(8, 8, 1, 0));
    let mut sge = ibv_sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    };
    let mut wrs = send_chain(&mut sge, 1);
    // SAFETY: the table's entries with NULL arguments, which they check.
    unsafe {
        let post = (*r.ctx).ops.post_send.unwrap();
        assert_eq!(post(qp, wrs.as_mut_ptr(), null_mut()), libc::EINVAL);
        let mut badp = wrs.as_mut_ptr();
        assert_eq!(post(qp, null_mut(), &mut badp), libc::EINVAL);
        assert!(badp.is_null(), "bad_wr is cleared first, as rdma-core");
        assert_eq!(post(null_mut(), wrs.as_mut_ptr(), &mut badp), libc::EINVAL);
        let recv = (*r.ctx).ops.post_recv.unwrap();
        let mut badr = null_mut();
        assert_eq!(recv(qp, null_mut(), &mut badr), libc::EINVAL);
        // Masks from the rate limit on go through the extended query only.
        let mut attr = zero_attr();
        assert_eq!(
            ibv_query_qp(qp, &mut attr, 1 << 25, null_mut()),
            libc::EOPNOTSUPP
        );
        assert_eq!(ibv_modify_qp(qp, &mut attr, 1 << 26), libc::EOPNOTSUPP);
    }
    assert_eq!(r.sq_prod(qp), 0, "nothing was posted");
    // SAFETY: live QP.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

#[test]
fn post_send_lists_of_1_20_40_ring_and_complete() {
    let r = rxe();
    let qp = r.rc_qp(cap(64, 64, 2, 0));
    let mut sge = ibv_sge {
        addr: 0x1000,
        length: 64,
        lkey: 7,
    };
    let mut total = 0;
    for n in [1usize, 20, 40] {
        let mut wrs = send_chain(&mut sge, n);
        let (ret, bad) = r.post_send(qp, wrs.as_mut_ptr());
        assert_eq!((ret, bad), (0, null_mut()), "list of {n}");
        total += n as u32;
        assert_eq!(
            r.sq_prod(qp),
            total,
            "the producer index after a list of {n}"
        );
        let ids = r.complete(qp);
        assert_eq!(
            ids,
            (0..n as u64).collect::<Vec<_>>(),
            "completions in order"
        );
    }
    // SAFETY: live QP.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

#[test]
fn bad_wr_names_the_refused_wr_and_those_before_it_are_posted() {
    let r = rxe();
    // max_send_sge 2 on the stand-in.
    let qp = r.rc_qp(cap(64, 64, 2, 0));
    let mut sges = [ibv_sge {
        addr: 0x1000,
        length: 64,
        lkey: 7,
    }; 4];
    // The provider refuses WR 25 (too many SGEs): 25 posted, in two chunks.
    let mut wrs = send_chain(&mut sges[0], 30);
    wrs[25].num_sge = 4;
    let (ret, bad) = r.post_send(qp, wrs.as_mut_ptr());
    assert_eq!(ret, libc::EINVAL);
    assert_eq!(bad, &mut wrs[25] as *mut ibv_send_wr);
    assert_eq!(r.sq_prod(qp), 25);
    assert_eq!(r.complete(qp).len(), 25);
    // The conversion refuses WR 3 (an unknown opcode, then a negative num_sge): 3 posted.
    for spoil in [
        |w: &mut ibv_send_wr| w.opcode = 99,
        |w: &mut ibv_send_wr| w.num_sge = -1,
    ] {
        let before = r.sq_prod(qp);
        let mut wrs = send_chain(&mut sges[0], 6);
        spoil(&mut wrs[3]);
        let (ret, bad) = r.post_send(qp, wrs.as_mut_ptr());
        assert_eq!(ret, libc::EINVAL);
        assert_eq!(bad, &mut wrs[3] as *mut ibv_send_wr);
        assert_eq!(r.sq_prod(qp), before + 3);
        assert_eq!(r.complete(qp), vec![0, 1, 2]);
    }
    // Receives: the provider refuses WR 18 of 20.
    let mut rwrs: Vec<ibv_recv_wr> = (0..20)
        .map(|i| ibv_recv_wr {
            wr_id: i,
            next: null_mut(),
            sg_list: sges.as_mut_ptr(),
            num_sge: 1,
        })
        .collect();
    rwrs[18].num_sge = 4;
    for i in 0..19 {
        rwrs[i].next = &mut rwrs[i + 1];
    }
    let (ret, bad) = r.post_recv(qp, rwrs.as_mut_ptr());
    assert_eq!(ret, libc::EINVAL);
    assert_eq!(bad, &mut rwrs[18] as *mut ibv_recv_wr);
    // A list that fits.
    rwrs[18].num_sge = 2;
    let (ret, bad) = r.post_recv(qp, &mut rwrs[18]);
    assert_eq!((ret, bad), (0, null_mut()));
    // SAFETY: live QP.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

#[test]
fn inline_data_in_several_sges_is_gathered_up_to_max_inline_data() {
    let r = rxe();
    let qp = r.rc_qp(cap(64, 8, 1, 64));
    let a = [1u8; 40];
    let b = [2u8; 24];
    let mut sges = [
        ibv_sge {
            addr: a.as_ptr() as u64,
            length: 40,
            lkey: 0,
        },
        ibv_sge {
            addr: b.as_ptr() as u64,
            length: 24,
            lkey: 0,
        },
    ];
    // Three inline sends of two buffers each in one list (each gathered in turn), then one
    // of 65 bytes: refused, those before it posted.
    let mut wrs = send_chain(&mut sges[0], 4);
    for w in wrs.iter_mut() {
        w.num_sge = 2;
        w.send_flags |= IBV_SEND_INLINE;
    }
    sges[1].length = 24;
    let (ret, bad) = r.post_send(qp, wrs.as_mut_ptr());
    assert_eq!((ret, bad), (0, null_mut()));
    assert_eq!(r.sq_prod(qp), 4);
    assert_eq!(r.complete(qp).len(), 4);
    let big = [3u8; 25];
    let mut sges2 = [sges[0], sges[1]];
    sges2[1].addr = big.as_ptr() as u64;
    sges2[1].length = 25;
    let mut wrs = send_chain(&mut sges[0], 3);
    for w in wrs.iter_mut() {
        w.num_sge = 2;
        w.send_flags |= IBV_SEND_INLINE;
    }
    wrs[2].sg_list = sges2.as_mut_ptr();
    let (ret, bad) = r.post_send(qp, wrs.as_mut_ptr());
    assert_eq!(ret, libc::EINVAL);
    assert_eq!(bad, &mut wrs[2] as *mut ibv_send_wr);
    assert_eq!(r.sq_prod(qp), 6);
    // SAFETY: live QP.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

fn create_ex(r: &Rxe, a: &mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    // SAFETY: the context's verbs_context entry, as the header's ibv_create_qp_ex calls it.
    unsafe { (*vctx(r.ctx)).create_qp_ex.unwrap()(r.ctx, a) }
}

#[test]
fn create_qp_ex_checks_what_rxe_refuses() {
    let r = rxe();
    let cases: [(u32, u64, u32, c_int, c_int); 6] = [
        // (comp_mask beyond PD, send_ops, create_flags, qp type, errno)
        (IBV_QP_INIT_ATTR_RX_HASH, 0, 0, IBV_QPT_RC, libc::EOPNOTSUPP),
        (
            IBV_QP_INIT_ATTR_CREATE_FLAGS,
            0,
            1 << 1,
            IBV_QPT_RC,
            libc::EOPNOTSUPP,
        ),
        (
            IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
            0,
            IBV_QPT_UD,
            libc::EOPNOTSUPP,
        ),
        // Atomic write (1 << 12) is RC only; TSO (1 << 10) rxe has not.
        (
            IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            1 << 12,
            0,
            IBV_QPT_UD,
            libc::EOPNOTSUPP,
        ),
        (
            IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            1 << 10,
            0,
            IBV_QPT_RC,
            libc::EOPNOTSUPP,
        ),
        (
            IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            0,
            0,
            0xff,
            libc::EOPNOTSUPP,
        ),
    ];
    for (mask, ops, flags, t, want) in cases {
        let mut a = init_attr_ex(r.pd, r.cq, t);
        a.comp_mask |= mask;
        a.send_ops_flags = ops;
        a.create_flags = flags;
        assert!(create_ex(&r, &mut a).is_null());
        assert_eq!(
            errno(),
            want,
            "comp_mask {mask:#x} ops {ops:#x} flags {flags:#x}"
        );
    }
    // No PD.
    let mut a = init_attr_ex(null_mut(), r.cq, IBV_QPT_RC);
    a.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    assert!(create_ex(&r, &mut a).is_null());
    assert_eq!(errno(), libc::EINVAL);
    // With CREATE_FLAGS but none set: fine, and a qp_ex without builders.
    let mut a = init_attr_ex(r.pd, r.cq, IBV_QPT_RC);
    a.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
    let qp = create_ex(&r, &mut a);
    assert!(!qp.is_null());
    // SAFETY: live QP.
    let x = unsafe { ibv_qp_to_qp_ex(qp) };
    assert_eq!(x as *mut ibv_qp, qp);
    // SAFETY: live qp_ex.
    assert!(unsafe { (*x).wr_start.is_none() && (*x).wr_send.is_none() });
    assert!(a.cap.max_send_wr >= 64);
    // SAFETY: live QP.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

#[test]
fn wr_builders_post_one_batch_abort_and_report_errors_at_complete() {
    let r = rxe();
    let mut a = init_attr_ex(r.pd, r.cq, IBV_QPT_RC);
    a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
    let qp = create_ex(&r, &mut a);
    assert!(!qp.is_null(), "errno {}", errno());
    rc_to_rts(qp);
    // SAFETY: live QP of create_qp_ex.
    let x = unsafe { &mut *ibv_qp_to_qp_ex(qp) };
    // Only the operations asked for have builders.
    assert!(x.wr_send.is_some() && x.wr_rdma_write.is_some());
    assert!(x.wr_send_imm.is_none() && x.wr_atomic_cmp_swp.is_none() && x.wr_rdma_read.is_none());
    assert!(x.wr_set_xrc_srqn.is_none() && x.wr_send_tso.is_none());
    let sges = [
        ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        },
        ibv_sge {
            addr: 0x2000,
            length: 8,
            lkey: 1,
        },
    ];
    // SAFETY: the builders of a live qp_ex, called as the header's ibv_wr_* do.
    unsafe {
        (x.wr_start.unwrap())(x);
        x.wr_id = 11;
        x.wr_flags = IBV_SEND_SIGNALED;
        (x.wr_send.unwrap())(x);
        (x.wr_set_sge.unwrap())(x, 1, 0x1000, 8);
        x.wr_id = 12;
        (x.wr_rdma_write.unwrap())(x, 0x55, 0x9000);
        (x.wr_set_sge_list.unwrap())(x, 2, sges.as_ptr());
        assert_eq!(r.sq_prod(qp), 0, "nothing is visible before complete");
        assert_eq!((x.wr_complete.unwrap())(x), 0);
    }
    assert_eq!(r.sq_prod(qp), 2);
    assert_eq!(r.complete(qp), vec![11, 12]);
    // SAFETY: as above.
    unsafe {
        // Aborted: nothing posted.
        (x.wr_start.unwrap())(x);
        (x.wr_send.unwrap())(x);
        (x.wr_set_sge.unwrap())(x, 1, 0x1000, 8);
        (x.wr_abort.unwrap())(x);
        assert_eq!(r.sq_prod(qp), 2);
        // A refused setter (3 SGEs, max_send_sge 2): complete reports it, nothing posted.
        let three = [sges[0], sges[1], sges[0]];
        (x.wr_start.unwrap())(x);
        (x.wr_send.unwrap())(x);
        (x.wr_set_sge.unwrap())(x, 1, 0x1000, 8);
        (x.wr_send.unwrap())(x);
        (x.wr_set_sge_list.unwrap())(x, 3, three.as_ptr());
        assert_eq!((x.wr_complete.unwrap())(x), libc::EINVAL);
        assert_eq!(r.sq_prod(qp), 2);
        // A NULL AH: refused by this library, reported by complete.
        (x.wr_start.unwrap())(x);
        (x.wr_send.unwrap())(x);
        (x.wr_set_ud_addr.unwrap())(x, null_mut(), 1, 1);
        assert_eq!((x.wr_complete.unwrap())(x), libc::EINVAL);
        // Complete without start.
        assert_eq!((x.wr_complete.unwrap())(x), libc::EINVAL);
        // Inline data from a list of buffers (max_inline_data 32 on this QP).
        let (p, q) = ([1u8; 10], [2u8; 12]);
        let bufs = [
            ibv_data_buf {
                addr: p.as_ptr() as *mut c_void,
                length: 10,
            },
            ibv_data_buf {
                addr: q.as_ptr() as *mut c_void,
                length: 12,
            },
        ];
        (x.wr_start.unwrap())(x);
        x.wr_id = 21;
        (x.wr_send.unwrap())(x);
        (x.wr_set_inline_data_list.unwrap())(x, 2, bufs.as_ptr());
        x.wr_id = 22;
        (x.wr_send.unwrap())(x);
        (x.wr_set_inline_data.unwrap())(x, p.as_ptr() as *mut c_void, 10);
        assert_eq!((x.wr_complete.unwrap())(x), 0);
        assert_eq!(r.sq_prod(qp), 4);
        assert_eq!(r.complete(qp), vec![21, 22]);
    }
    // The legacy post still works on the same QP.
    let mut sge = sges[0];
    let mut wrs = send_chain(&mut sge, 2);
    wrs[1].opcode = IBV_WR_RDMA_WRITE;
    let (ret, bad) = r.post_send(qp, wrs.as_mut_ptr());
    assert_eq!((ret, bad), (0, null_mut()));
    assert_eq!(r.sq_prod(qp), 6);
    // SAFETY: live QP.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

struct EfaSide {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    cq: *mut ibv_cq,
    qp: *mut ibv_qp,
    gid: uverbs::Gid,
}

const QKEY: u32 = 0x11;

/// A UD QP of ibv_create_qp on an EFA model device, brought to RTS through ibv_modify_qp.
fn efa_side(fabric: &uverbs_efa_model::EfaFabric) -> EfaSide {
    let uctx = fabric.add_device(Default::default()).open().expect("open");
    let gid = uctx.query_gid(1, 0).expect("gid");
    let ctx = uverbs_capi::wrap_context(uctx.device().clone(), uctx);
    // SAFETY: a context of the library.
    let pd = unsafe { ibv_alloc_pd(ctx) };
    let cq = cq_ptr(ctx, 16);
    let mut a = init_attr(cq, IBV_QPT_UD, cap(8, 8, 1, 0));
    // SAFETY: live PD, valid attr.
    let qp = unsafe { ibv_create_qp(pd, &mut a) };
    assert!(!qp.is_null(), "errno {}", errno());
    let steps = [
        (
            1,
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
        ),
        (2, IBV_QP_STATE),
        (3, IBV_QP_STATE | IBV_QP_SQ_PSN),
    ];
    for (to, mask) in steps {
        let mut m = zero_attr();
        m.qp_state = to;
        m.qkey = QKEY;
        m.port_num = 1;
        m.sq_psn = 0x123;
        // SAFETY: live QP, valid attr.
        let got = unsafe { ibv_modify_qp(qp, &mut m, mask) };
        assert_eq!(got, 0, "to state {to}");
        assert_eq!(state(qp), to);
    }
    EfaSide {
        ctx,
        pd,
        cq,
        qp,
        gid,
    }
}

#[test]
fn efa_query_qp_round_trips_and_a_ud_send_arrives() {
    let fabric = uverbs_efa_model::EfaFabric::new(1);
    let a = efa_side(&fabric);
    let b = efa_side(&fabric);

    // Query: what the modifies set, the caps, and ibv_qp_init_attr as rdma-core fills it.
    let mut attr = zero_attr();
    attr.qp_state = 6;
    // SAFETY: ibv_qp_init_attr is plain numbers and pointers.
    let mut init: ibv_qp_init_attr = unsafe { core::mem::zeroed() };
    let mask = IBV_QP_STATE | IBV_QP_QKEY | IBV_QP_SQ_PSN | IBV_QP_CAP | IBV_QP_PORT;
    // SAFETY: live QP, valid out structs.
    assert_eq!(unsafe { ibv_query_qp(a.qp, &mut attr, mask, &mut init) }, 0);
    assert_eq!(
        (attr.qp_state, attr.qkey, attr.sq_psn, attr.port_num),
        (3, QKEY, 0x123, 1)
    );
    assert!(attr.cap.max_send_wr >= 8 && attr.cap.max_recv_wr >= 8);
    assert_eq!(init.qp_context, 0x1234 as *mut c_void);
    assert_eq!(
        (init.send_cq, init.recv_cq, init.qp_type),
        (a.cq, a.cq, IBV_QPT_UD)
    );
    assert_eq!(init.cap.max_send_wr, attr.cap.max_send_wr);
    // SAFETY: live QP.
    assert_eq!(unsafe { (*a.qp).state }, 3);
    // EFA answers 128-byte-aligned order or none, never whole messages.
    // SAFETY: live QP.
    let caps = unsafe { ibv_query_qp_data_in_order(a.qp, IBV_WR_SEND, 1) };
    assert!(caps == 0 || caps == 2, "{caps}");
    // SAFETY: live QP.
    let got = unsafe { ibv_query_qp_data_in_order(a.qp, IBV_WR_SEND, 0) };
    assert_eq!(got, 0);

    // B posts a receive through ops.post_recv.
    let mr_b = upd(b.pd)
        .reg_mr(4096, uverbs::AccessFlags::LOCAL_WRITE)
        .unwrap();
    let mut rsge = mr_b.sge(0, 1024).unwrap();
    let mut rwr = ibv_recv_wr {
        wr_id: 5,
        next: null_mut(),
        sg_list: &mut rsge,
        num_sge: 1,
    };
    let mut badr = null_mut();
    // SAFETY: the context's table entry.
    let got = unsafe { (*b.ctx).ops.post_recv.unwrap()(b.qp, &mut rwr, &mut badr) };
    assert_eq!(got, 0);

    // A sends to B through ops.post_send, its destination an AH of A's PD.
    let ah = upd(a.pd)
        .create_ah(&uverbs::AhAttr {
            is_global: true,
            port_num: 1,
            grh: uverbs::GlobalRoute {
                dgid: b.gid,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    let ah = Box::into_raw(Box::new(TestAh {
        ibv: ibv_ah {
            context: a.ctx,
            pd: a.pd,
            handle: ah.handle(),
        },
        ah: ManuallyDrop::new(ah),
    }));
    let mut mr_a = upd(a.pd)
        .reg_mr(4096, uverbs::AccessFlags::LOCAL_WRITE)
        .unwrap();
    mr_a.write(0, b"hello from C").unwrap();
    let mut ssge = mr_a.sge(0, 12).unwrap();
    let mut wrs = send_chain(&mut ssge, 1);
    wrs[0].wr_id = 9;
    wrs[0].wr.ud = ibv_send_wr_ud {
        ah: ah as *mut ibv_ah,
        // SAFETY: live QP.
        remote_qpn: unsafe { (*b.qp).qp_num },
        remote_qkey: QKEY,
    };
    let mut bad = null_mut();
    // SAFETY: the context's table entry.
    let got = unsafe { (*a.ctx).ops.post_send.unwrap()(a.qp, wrs.as_mut_ptr(), &mut bad) };
    assert_eq!(got, 0);
    // A send with no AH is refused by the conversion.
    wrs[0].wr.ud.ah = null_mut();
    // SAFETY: as above.
    let got = unsafe { (*a.ctx).ops.post_send.unwrap()(a.qp, wrs.as_mut_ptr(), &mut bad) };
    assert_eq!(got, libc::EINVAL);
    assert_eq!(bad, wrs.as_mut_ptr());
    fabric.process();
    let mut wc = [uverbs::Wc::default()];
    assert_eq!(poll(a.cq, &mut wc), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (9, uverbs::WcStatus::SUCCESS));
    assert_eq!(poll(b.cq, &mut wc), 1);
    assert_eq!((wc[0].wr_id, wc[0].byte_len), (5, 12));
    let mut got = [0u8; 12];
    mr_b.read(0, &mut got).unwrap();
    assert_eq!(&got, b"hello from C");
}
