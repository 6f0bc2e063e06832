//! The efadv calls through their C entry points, on a context of the EFA device model (and on
//! a stand-in rxe context, which must be refused as libefa refuses a non-EFA device).

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

use uverbs_capi::abi::*;
use uverbs_capi::efa_abi::*;
use uverbs_efa_model::{EfaFabric, ModelConfig};

extern "C" {
    fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
    fn efadv_query_device(c: *mut ibv_context, a: *mut efadv_device_attr, inlen: u32) -> c_int;
    fn uverbs_efadv_query_device(
        c: *mut ibv_context,
        a: *mut efadv_device_attr,
        inlen: u32,
    ) -> c_int;
    fn efadv_get_max_sq_depth(
        c: *mut ibv_context,
        a: *mut efadv_sq_depth_attr,
        inlen: u32,
    ) -> c_int;
    fn efadv_get_max_rq_depth(
        c: *mut ibv_context,
        a: *mut efadv_rq_depth_attr,
        inlen: u32,
    ) -> c_int;
    fn efadv_create_cq(
        c: *mut ibv_context,
        a: *mut ibv_cq_init_attr_ex,
        e: *mut efadv_cq_init_attr,
        inlen: u32,
    ) -> *mut ibv_cq_ex;
    fn efadv_query_cq(cq: *mut ibv_cq, a: *mut efadv_cq_attr, inlen: u32) -> c_int;
    fn efadv_cq_from_ibv_cq_ex(cq: *mut ibv_cq_ex) -> *mut efadv_cq;
    fn efadv_create_qp_ex(
        c: *mut ibv_context,
        a: *mut ibv_qp_init_attr_ex,
        e: *mut efadv_qp_init_attr,
        inlen: u32,
    ) -> *mut ibv_qp;
    fn efadv_create_driver_qp(pd: *mut ibv_pd, a: *mut ibv_qp_init_attr, t: u32) -> *mut ibv_qp;
    fn efadv_query_qp_wqs(
        qp: *mut ibv_qp,
        s: *mut efadv_wq_attr,
        r: *mut efadv_wq_attr,
        inlen: u32,
    ) -> c_int;
    fn efadv_qp_from_ibv_qp_ex(qp: *mut ibv_qp_ex) -> *mut efadv_qp;
    fn ibv_get_device_list(n: *mut c_int) -> *mut *mut ibv_device;
    fn ibv_free_device_list(l: *mut *mut ibv_device);
    fn ibv_get_device_name(d: *mut ibv_device) -> *const core::ffi::c_char;
    fn ibv_get_device_guid(d: *mut ibv_device) -> u64;
    fn ibv_open_device(d: *mut ibv_device) -> *mut ibv_context;
    fn ibv_close_device(c: *mut ibv_context) -> c_int;
    fn ibv_query_device(c: *mut ibv_context, a: *mut ibv_device_attr) -> c_int;
    fn ibv_query_port(c: *mut ibv_context, port: u8, a: *mut ibv_port_attr) -> c_int;
    fn ibv_query_gid(c: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid) -> c_int;
    fn efadv_create_comp_cntr(
        c: *mut ibv_context,
        a: *mut ibv_comp_cntr_init_attr,
        e: *mut efadv_comp_cntr_init_attr,
        inlen: u32,
    ) -> *mut ibv_comp_cntr;
}

const IBV_QPT_UD: c_int = 4;
const IBV_QPT_DRIVER: c_int = 0xff;
const IBV_QP_INIT_ATTR_PD: u32 = 1;

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A context of a fresh model device with the default config plus completion counters; the
/// fabric is returned too, to keep it alive.
fn model_ctx() -> (EfaFabric, *mut ibv_context) {
    let fabric = EfaFabric::new(7);
    let cfg = ModelConfig {
        device_caps: ModelConfig::default().device_caps
            | uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_COMP_CNTR,
        ..Default::default()
    };
    let ctx = fabric.add_device(cfg).open().expect("open model device");
    let dev =
        uverbs::Device::synthetic("efa_capi_test", uverbs::Driver::Efa, 0x0200_0000_0000_0042);
    (fabric, uverbs_capi::wrap_context(dev, ctx))
}

fn rxe_ctx() -> (uverbs_rxe_standin::RxeStandin, *mut ibv_context) {
    let k = uverbs_rxe_standin::RxeStandin::new().expect("rxe stand-in");
    let ctx = k.open().expect("open stand-in rxe");
    let dev = ctx.device().clone();
    (k, uverbs_capi::wrap_context(dev, ctx))
}

fn zeroed<T>() -> T {
    // SAFETY: only used for the C structs of these tests, for which all-zero is valid.
    unsafe { core::mem::zeroed() }
}

#[test]
fn query_device_reports_the_model_and_honours_inlen() {
    let (_f, ctx) = model_ctx();
    let mut a = efadv_device_attr::default();
    // SAFETY: a live context and a whole struct.
    let r = unsafe { efadv_query_device(ctx, &mut a, size_of::<efadv_device_attr>() as u32) };
    assert_eq!(r, 0);
    assert_eq!((a.max_sq_wr, a.max_rq_wr), (4096, 8192));
    assert_eq!((a.max_sq_sge, a.max_rq_sge), (2, 2));
    // The model reports no inline_buf_size_ex: libefa substitutes inline_buf_size.
    assert_eq!((a.inline_buf_size, a.inline_buf_size_ex), (32, 32));
    assert_eq!(a.max_rdma_size, 1 << 30);
    let want = EFADV_DEVICE_ATTR_CAPS_RDMA_READ
        | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY
        | EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID
        | EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE
        | EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV
        | EFADV_DEVICE_ATTR_CAPS_CQ_WITH_EXT_MEM_DMABUF
        | EFADV_DEVICE_ATTR_CAPS_COMP_CNTR;
    assert_eq!(a.device_caps, want);
    assert_eq!(a.comp_mask, 0);

    // A caller struct ending at device_caps: the RDMA caps are left out (they go with
    // max_rdma_size), and nothing past inlen is written.
    let mut short = efadv_device_attr {
        max_rdma_size: 0xdead_beef,
        ..Default::default()
    };
    // SAFETY: a live context; the struct is longer than inlen.
    let r = unsafe { efadv_query_device(ctx, &mut short, 28) };
    assert_eq!(r, 0);
    assert_eq!(
        short.device_caps,
        want & !(EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE)
    );
    assert_eq!(short.max_rdma_size, 0xdead_beef);

    // Shorter than inline_buf_size_ex: EINVAL, as libefa.
    // SAFETY: as above.
    assert_eq!(unsafe { efadv_query_device(ctx, &mut a, 16) }, libc::EINVAL);
    // The private name is the same call.
    let mut b = efadv_device_attr::default();
    // SAFETY: as above.
    assert_eq!(unsafe { uverbs_efadv_query_device(ctx, &mut b, 32) }, 0);
    assert_eq!(b.max_sq_wr, 4096);
}

#[test]
fn depth_calls_answer_depths_or_negative_errnos() {
    let (_f, ctx) = model_ctx();
    let mut sq = efadv_sq_depth_attr {
        max_send_sge: 1,
        ..Default::default()
    };
    // SAFETY: a live context and whole structs.
    let d =
        unsafe { efadv_get_max_sq_depth(ctx, &mut sq, size_of::<efadv_sq_depth_attr>() as u32) };
    // 1 MiB of LLQ in 64-byte WQEs.
    assert_eq!(d, (1 << 20) / 64);
    sq.flags = EFADV_SQ_DEPTH_ATTR_INLINE_WRITE;
    // SAFETY: as above.
    let d =
        unsafe { efadv_get_max_sq_depth(ctx, &mut sq, size_of::<efadv_sq_depth_attr>() as u32) };
    assert_eq!(d, (1 << 20) / 128);
    sq.max_send_sge = 3;
    // SAFETY: as above.
    let d =
        unsafe { efadv_get_max_sq_depth(ctx, &mut sq, size_of::<efadv_sq_depth_attr>() as u32) };
    assert_eq!(d, -libc::EINVAL);
    let mut rq = efadv_rq_depth_attr {
        comp_mask: 0,
        max_recv_sge: 2,
    };
    // SAFETY: as above.
    let d =
        unsafe { efadv_get_max_rq_depth(ctx, &mut rq, size_of::<efadv_rq_depth_attr>() as u32) };
    assert_eq!(d, 8192 / 2);
    rq.comp_mask = 1;
    // SAFETY: as above.
    let d =
        unsafe { efadv_get_max_rq_depth(ctx, &mut rq, size_of::<efadv_rq_depth_attr>() as u32) };
    assert_eq!(d, -libc::EINVAL);
}

fn create_cq(
    ctx: *mut ibv_context,
    cqe: u32,
    inlen: u32,
    e: *mut efadv_cq_init_attr,
) -> *mut ibv_cq_ex {
    let mut a: ibv_cq_init_attr_ex = zeroed();
    a.cqe = cqe;
    // SAFETY: a live context; `e` has at least `inlen` bytes (callers pass a struct and at
    // most its size, or a larger buffer they own).
    unsafe { efadv_create_cq(ctx, &mut a, e, inlen) }
}

#[test]
fn create_cq_checks_its_attributes_and_query_cq_describes_the_ring() {
    let (_f, ctx) = model_ctx();
    let mut e: efadv_cq_init_attr = zeroed();
    e.wc_flags = EFADV_WC_EX_WITH_SGID;
    // rdma-core 44's struct: 16 bytes.
    let cq = create_cq(ctx, 100, 16, &mut e);
    assert!(!cq.is_null(), "efadv_create_cq: errno {}", errno());
    let mut q: efadv_cq_attr = zeroed();
    // SAFETY: a live CQ and a whole struct.
    let r = unsafe { efadv_query_cq(cq as *mut ibv_cq, &mut q, size_of::<efadv_cq_attr>() as u32) };
    assert_eq!(r, 0);
    assert!(!q.buffer.is_null());
    assert_eq!(q.entry_size, 32);
    assert_eq!(q.num_entries, 128);
    assert!(!q.doorbell.is_null(), "the model gives CQs a doorbell");
    // Too short for num_entries.
    // SAFETY: as above.
    let r = unsafe { efadv_query_cq(cq as *mut ibv_cq, &mut q, 16) };
    assert_eq!(r, libc::EINVAL);

    // The struct efadv_cq embedded in the CQ, with both readers; outside a poll they have no
    // completion (-ENOENT, as for one without a GID).
    // SAFETY: a live CQ.
    let dv = unsafe { efadv_cq_from_ibv_cq_ex(cq) };
    assert!(!dv.is_null());
    // SAFETY: as above.
    assert_eq!(unsafe { efadv_cq_from_ibv_cq_ex(cq) }, dv);
    // SAFETY: `dv` is live; its readers take it and a gid.
    unsafe {
        let mut gid: ibv_gid = zeroed();
        let read = (*dv).wc_read_sgid.expect("wc_read_sgid");
        assert_eq!(read(dv, &mut gid), -libc::ENOENT);
        let uns = (*dv).wc_is_unsolicited.expect("wc_is_unsolicited");
        assert!(!uns(dv));
    }

    // A comp_mask: EINVAL; a non-zero byte past master's struct: EINVAL; an unknown wc flag:
    // EOPNOTSUPP.
    e.comp_mask = 1;
    assert!(create_cq(ctx, 8, 16, &mut e).is_null());
    assert_eq!(errno(), libc::EINVAL);
    e.comp_mask = 0;
    let mut big = [0u8; 128];
    big[8] = EFADV_WC_EX_WITH_SGID as u8;
    big[100] = 1;
    assert!(create_cq(ctx, 8, 128, big.as_mut_ptr() as *mut efadv_cq_init_attr).is_null());
    assert_eq!(errno(), libc::EINVAL);
    big[100] = 0;
    assert!(!create_cq(ctx, 8, 128, big.as_mut_ptr() as *mut efadv_cq_init_attr).is_null());
    e.wc_flags = 1 << 5;
    assert!(create_cq(ctx, 8, 16, &mut e).is_null());
    assert_eq!(errno(), libc::EOPNOTSUPP);
}

fn qp_attr(cq: *mut ibv_cq_ex, pd: *mut ibv_pd, qp_type: c_int) -> ibv_qp_init_attr_ex {
    let mut a: ibv_qp_init_attr_ex = zeroed();
    a.send_cq = cq as *mut ibv_cq;
    a.recv_cq = cq as *mut ibv_cq;
    a.cap = ibv_qp_cap {
        max_send_wr: 10,
        max_recv_wr: 10,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    a.qp_type = qp_type;
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    a.pd = pd;
    a
}

#[test]
fn create_qp_ex_makes_srd_qps_and_query_qp_wqs_describes_them() {
    let (_f, ctx) = model_ctx();
    let mut e: efadv_cq_init_attr = zeroed();
    let cq = create_cq(ctx, 64, 16, &mut e);
    assert!(!cq.is_null());
    // SAFETY: a live context.
    let pd = unsafe { ibv_alloc_pd(ctx) };
    assert!(!pd.is_null());

    let mut a = qp_attr(cq, pd, IBV_QPT_DRIVER);
    let mut efa = efadv_qp_init_attr {
        driver_qp_type: EFADV_QP_DRIVER_TYPE_SRD,
        ..Default::default()
    };
    // rdma-core 44's struct: 16 bytes.
    // SAFETY: live objects, whole structs.
    let qp = unsafe { efadv_create_qp_ex(ctx, &mut a, &mut efa, 16) };
    assert!(!qp.is_null(), "efadv_create_qp_ex: errno {}", errno());
    // The capacities are written back (the SQ rounded up to a power of two).
    assert_eq!(a.cap.max_send_wr, 16);
    // SAFETY: a live QP of this library.
    assert_eq!(unsafe { (*qp).qp_type }, IBV_QPT_DRIVER);

    let mut s: efadv_wq_attr = zeroed();
    let mut r: efadv_wq_attr = zeroed();
    s.caps = 0xffff;
    // SAFETY: a live QP and whole structs.
    let rc = unsafe { efadv_query_qp_wqs(qp, &mut s, &mut r, size_of::<efadv_wq_attr>() as u32) };
    assert_eq!(rc, 0);
    assert_eq!((s.entry_size, s.num_entries), (64, 16));
    assert_eq!(r.entry_size, 16);
    assert!(r.num_entries >= 10);
    assert_eq!(r.max_batch, r.num_entries);
    assert!(!s.buffer.is_null() && !s.doorbell.is_null());
    assert!(!r.buffer.is_null() && !r.doorbell.is_null());
    assert_eq!(s.caps & !EFADV_WQ_CAPS_64_BIT_REQ_ID, 0, "caps written");
    // Too short for max_batch.
    // SAFETY: as above.
    let rc = unsafe { efadv_query_qp_wqs(qp, &mut s, &mut r, 32) };
    assert_eq!(rc, libc::EINVAL);

    // SAFETY: a live QP (ibv_qp_ex starts with its ibv_qp).
    let dv = unsafe { efadv_qp_from_ibv_qp_ex(qp as *mut ibv_qp_ex) };
    assert!(!dv.is_null());
    // SAFETY: live; outside a batch the setter has nothing to act on.
    unsafe { (*dv).wr_set_processing_hints.expect("setter")(dv, 1) };

    // efadv_create_qp_ex takes IBV_QPT_DRIVER only; another driver QP type: EOPNOTSUPP; a
    // reserved byte: EINVAL.
    let mut ud = qp_attr(cq, pd, IBV_QPT_UD);
    // SAFETY: as above.
    assert!(unsafe { efadv_create_qp_ex(ctx, &mut ud, &mut efa, 16) }.is_null());
    assert_eq!(errno(), libc::EINVAL);
    let mut a2 = qp_attr(cq, pd, IBV_QPT_DRIVER);
    efa.driver_qp_type = 1;
    // SAFETY: as above.
    assert!(unsafe { efadv_create_qp_ex(ctx, &mut a2, &mut efa, 16) }.is_null());
    assert_eq!(errno(), libc::EOPNOTSUPP);
    efa.driver_qp_type = 0;
    efa.reserved = 1;
    // SAFETY: as above.
    assert!(unsafe { efadv_create_qp_ex(ctx, &mut a2, &mut efa, 24) }.is_null());
    assert_eq!(errno(), libc::EINVAL);

    // efadv_create_driver_qp: the EFA_1.0 way to an SRD QP.
    let mut init = ibv_qp_init_attr {
        qp_context: ptr::null_mut(),
        send_cq: cq as *mut ibv_cq,
        recv_cq: cq as *mut ibv_cq,
        srq: ptr::null_mut(),
        cap: a.cap,
        qp_type: IBV_QPT_DRIVER,
        sq_sig_all: 0,
    };
    init.cap.max_send_wr = 5;
    // SAFETY: live objects, a whole struct.
    let qp2 = unsafe { efadv_create_driver_qp(pd, &mut init, EFADV_QP_DRIVER_TYPE_SRD) };
    assert!(!qp2.is_null(), "efadv_create_driver_qp: errno {}", errno());
    assert_eq!(init.cap.max_send_wr, 8);
    init.qp_type = IBV_QPT_UD;
    // SAFETY: as above.
    assert!(unsafe { efadv_create_driver_qp(pd, &mut init, 0) }.is_null());
    assert_eq!(errno(), libc::EINVAL);
}

#[test]
fn comp_cntr_is_created_with_libefa_checks() {
    let (_f, ctx) = model_ctx();
    let mut a = ibv_comp_cntr_init_attr::default();
    let mut e: efadv_comp_cntr_init_attr = zeroed();
    let inlen = size_of::<efadv_comp_cntr_init_attr>() as u32;
    // SAFETY: a live context and whole structs.
    let c = unsafe { efadv_create_comp_cntr(ctx, &mut a, &mut e, inlen) };
    assert!(!c.is_null(), "efadv_create_comp_cntr: errno {}", errno());
    // SAFETY: a live counter.
    assert_eq!(unsafe { (*c).context }, ctx);
    // A counter of bytes: EOPNOTSUPP; a short struct: EINVAL.
    a.type_ = 1;
    // SAFETY: as above.
    assert!(unsafe { efadv_create_comp_cntr(ctx, &mut a, &mut e, inlen) }.is_null());
    assert_eq!(errno(), libc::EOPNOTSUPP);
    a.type_ = 0;
    // SAFETY: as above.
    assert!(unsafe { efadv_create_comp_cntr(ctx, &mut a, &mut e, 40) }.is_null());
    assert_eq!(errno(), libc::EINVAL);
}

#[test]
fn a_non_efa_context_is_refused_as_libefa_refuses_it() {
    let (_k, ctx) = rxe_ctx();
    let mut a = efadv_device_attr::default();
    // SAFETY: a live context and whole structs, for every call below.
    unsafe {
        assert_eq!(efadv_query_device(ctx, &mut a, 32), libc::EOPNOTSUPP);
        let mut sq = efadv_sq_depth_attr::default();
        assert_eq!(efadv_get_max_sq_depth(ctx, &mut sq, 24), -libc::EOPNOTSUPP);
        let mut rq = efadv_rq_depth_attr::default();
        assert_eq!(efadv_get_max_rq_depth(ctx, &mut rq, 16), -libc::EOPNOTSUPP);
        let mut e: efadv_cq_init_attr = zeroed();
        assert!(create_cq(ctx, 8, 16, &mut e).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        let pd = ibv_alloc_pd(ctx);
        assert!(!pd.is_null());
        let mut qa = qp_attr(ptr::null_mut(), pd, IBV_QPT_DRIVER);
        let mut efa = efadv_qp_init_attr::default();
        assert!(efadv_create_qp_ex(ctx, &mut qa, &mut efa, 24).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        let mut init: ibv_qp_init_attr = zeroed();
        init.qp_type = IBV_QPT_DRIVER;
        assert!(efadv_create_driver_qp(pd, &mut init, 0).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        let mut ca = ibv_comp_cntr_init_attr::default();
        let mut ce: efadv_comp_cntr_init_attr = zeroed();
        assert!(efadv_create_comp_cntr(ctx, &mut ca, &mut ce, 80).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
    }
}

#[test]
fn layout_rows_are_consistent() {
    // Every 44 row is a master row with the same offset and size.
    let master = efa_layout_master();
    for row in efa_layout() {
        assert!(master.contains(&row), "{row:?} differs from master's");
    }
    assert!(master.contains(&("efadv_qp_init_attr", "", 0, 24)));
    assert!(master.contains(&("efadv_cq_init_attr", "", 0, 56)));
    assert!(master.contains(&("efadv_device_attr", "", 0, 32)));
}

/// What pyverbs' EFA tests check of a device before they run on it (`efa_base.py`'s
/// `is_efa_dev`: `ibv_query_device`'s vendor_id is Amazon's 0x1d0f; `RDMATestCase` then
/// wants an active port with a GID), on the model devices `UVERBS_EFA_MODEL` lists: the
/// values come from the model's QUERY_DEVICE / QUERY_PORT answers through capi's queries.
#[test]
fn model_devices_in_the_device_list_look_like_efa_to_pyverbs() {
    // Only this test of this binary lists devices (the model is made once per process).
    std::env::set_var("UVERBS_EFA_MODEL", "1");
    let mut n: c_int = 0;
    // SAFETY: a valid out pointer; the list is freed below.
    let list = unsafe { ibv_get_device_list(&mut n) };
    assert!(!list.is_null(), "errno {}", errno());
    // SAFETY: `list` has `n` entries.
    let devs = unsafe { core::slice::from_raw_parts(list, n as usize) };
    let dev = devs
        .iter()
        .copied()
        .find(|&d| {
            // SAFETY: a device of the list, whose name is a C string.
            let name = unsafe { std::ffi::CStr::from_ptr(ibv_get_device_name(d)) };
            name.to_bytes() == b"efa_model0"
        })
        .expect("efa_model0 listed");
    // SAFETY: a listed device, opened and closed here.
    unsafe {
        let ctx = ibv_open_device(dev);
        assert!(!ctx.is_null(), "ibv_open_device: errno {}", errno());
        let mut a: ibv_device_attr = zeroed();
        assert_eq!(ibv_query_device(ctx, &mut a), 0);
        assert_eq!(
            a.vendor_id, 0x1d0f,
            "Amazon's vendor id: pyverbs' is_efa_dev"
        );
        assert_eq!(a.vendor_part_id, 0xefa1, "an EFA part id (efa1)");
        assert_eq!(a.phys_port_cnt, 1);
        assert_ne!(ibv_get_device_guid(dev), 0);
        let mut p: ibv_port_attr = zeroed();
        assert_eq!(ibv_query_port(ctx, 1, &mut p), 0);
        assert_eq!(p.state, 4, "IBV_PORT_ACTIVE");
        assert!(p.gid_tbl_len >= 1);
        let mut gid: ibv_gid = zeroed();
        assert_eq!(ibv_query_gid(ctx, 1, 0, &mut gid), 0);
        assert_ne!(gid.raw, [0; 16]);
        // efadv calls take the listed device's context as an EFA one.
        let mut e = efadv_device_attr::default();
        assert_eq!(efadv_query_device(ctx, &mut e, 32), 0);
        assert_eq!(ibv_close_device(ctx), 0);
        ibv_free_device_list(list);
    }
}
