//! The CQ and channel entry points, called as a C program calls them (the exported
//! functions, the context's `ops` and `verbs_context` entries, the `ibv_cq_ex` function
//! pointers), on the stand-in rxe kernel (completions written by its `complete_sends`) and on
//! the EFA device model (completion channels).

use super::*;

use uverbs::{AccessFlags, QpCap, QpInitAttr, QpType, SendWr, Sge, Wc, WcOpcode, WcStatus, WrOp};
use uverbs_rxe_standin::RxeStandin;

/// A context on the stand-in rxe kernel, as C sees it.
struct Rxe {
    ctx: *mut ibv_context,
    kernel: RxeStandin,
}

impl Rxe {
    fn new() -> Rxe {
        let kernel = RxeStandin::new().expect("stand-in rxe kernel");
        let uctx = kernel.open().expect("open the stand-in rxe device");
        let ctx = crate::wrap_context(uctx.device().clone(), uctx);
        Rxe { ctx, kernel }
    }

    fn uctx(&self) -> &uverbs::Context {
        // SAFETY: the context wrapped in `new`, open until drop.
        &unsafe { context(self.ctx) }.unwrap().ctx
    }

    fn vctx(&self) -> &verbs_context {
        // SAFETY: as above.
        &unsafe { context(self.ctx) }.unwrap().vctx
    }

    /// `ibv_create_cq_ex` as the header's inline function calls it.
    fn create_cq_ex(&self, attr: &mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex {
        let f = self.vctx().create_cq_ex.expect("create_cq_ex entry");
        // SAFETY: our context, valid attributes.
        unsafe { f(self.ctx, attr) }
    }

    /// `ibv_poll_cq` as the header's inline function calls it.
    fn poll(&self, cq: *mut ibv_cq, wcs: &mut [Wc]) -> c_int {
        let f = self.vctx().context.ops.poll_cq.expect("poll_cq entry");
        // SAFETY: a live CQ, an array of wcs.len() entries.
        unsafe { f(cq, wcs.len() as c_int, wcs.as_mut_ptr()) }
    }
}

impl Drop for Rxe {
    fn drop(&mut self) {
        // SAFETY: opened in `new`, every object on it destroyed by the test.
        assert_eq!(unsafe { crate::device::ibv_close_device(self.ctx) }, 0);
    }
}

fn attr(cqe: u32, wc_flags: u64) -> ibv_cq_init_attr_ex {
    ibv_cq_init_attr_ex {
        cqe,
        cq_context: 0x5eed as *mut c_void,
        channel: ptr::null_mut(),
        comp_vector: 0,
        wc_flags,
        comp_mask: 0,
        flags: 0,
        parent_domain: ptr::null_mut(),
    }
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

/// Posts `n` signaled SENDs (wr_id 100, 101, ...) on an RC QP completing into `scq` and has
/// the stand-in kernel complete them; returns the QP (destroy it before the CQ).
fn post_sends(r: &Rxe, scq: *mut ibv_cq, rcq: *mut ibv_cq, n: u64) -> (uverbs::Qp, uverbs::Pd) {
    let pd = r.uctx().alloc_pd().unwrap();
    let cap = QpCap {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    // SAFETY: live CQs of this context; no extended poll is started while the refs live.
    let (s, rc) = unsafe { (cq_ref(scq).unwrap(), cq_ref(rcq).unwrap()) };
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, s, rc, cap))
        .unwrap();
    RxeStandin::loopback_to_rts(&mut qp, AccessFlags::empty()).unwrap();
    let sge: [Sge; 0] = [];
    let wrs: Vec<SendWr<'_>> = (0..n)
        .map(|i| SendWr::new(100 + i, WrOp::Send).sge(&sge).signaled())
        .collect();
    qp.post_send(&wrs).unwrap();
    assert_eq!(r.kernel.complete_sends(qp.qp_num()), Ok(n as usize));
    (qp, pd)
}

#[test]
fn create_cq_ex_fills_the_c_struct_and_refuses_what_it_lacks() {
    let r = Rxe::new();
    let cq = r.create_cq_ex(&mut attr(100, IBV_WC_STANDARD_FLAGS));
    assert!(!cq.is_null(), "errno {}", errno());
    // SAFETY: the live CQ just created.
    let c = unsafe { &*cq };
    assert_eq!(c.context, r.ctx);
    assert_eq!(c.cq_context, 0x5eed as *mut c_void);
    assert!(c.cqe >= 100, "cqe {}", c.cqe);
    assert!(c.channel.is_null());
    assert!(c.start_poll.is_some() && c.read_byte_len.is_some() && c.read_sl.is_some());
    assert!(c.read_completion_ts.is_none() && c.read_tm_info.is_none());
    // The uverbs CQ names the wrapper, so events map back to this pointer.
    // SAFETY: the live CQ.
    let ucq = unsafe { cq_ref(cq.cast()) }.unwrap();
    assert_eq!(ucq.cq_context(), cq as u64);

    // A completion timestamp, a parent domain, unknown comp_mask or flags: EOPNOTSUPP.
    let with_ts = IBV_WC_STANDARD_FLAGS | 1 << 7;
    assert!(r.create_cq_ex(&mut attr(8, with_ts)).is_null());
    assert_eq!(errno(), libc::EOPNOTSUPP);
    let mut a = attr(8, 0);
    a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
    assert!(r.create_cq_ex(&mut a).is_null());
    assert_eq!(errno(), libc::EOPNOTSUPP);
    a.comp_mask = 1 << 5;
    assert!(r.create_cq_ex(&mut a).is_null());
    assert_eq!(errno(), libc::EOPNOTSUPP);
    a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
    a.flags = 1 << 7;
    assert!(r.create_cq_ex(&mut a).is_null());
    assert_eq!(errno(), libc::EOPNOTSUPP);
    // Single-threaded is what every CQ here is.
    a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
    let st = r.create_cq_ex(&mut a);
    assert!(!st.is_null(), "errno {}", errno());

    // SAFETY: live CQs, given up.
    unsafe {
        assert_eq!(ibv_destroy_cq(st.cast()), 0);
        assert_eq!(ibv_destroy_cq(cq.cast()), 0);
    }
}

#[test]
fn null_and_bad_arguments_are_einval() {
    let r = Rxe::new();
    // SAFETY: every call below is given NULL or a value it must refuse.
    unsafe {
        assert!(ibv_create_cq(ptr::null_mut(), 8, ptr::null_mut(), ptr::null_mut(), 0).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(ibv_create_cq(r.ctx, -1, ptr::null_mut(), ptr::null_mut(), 0).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(ibv_create_cq(r.ctx, 0, ptr::null_mut(), ptr::null_mut(), 0).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(create_cq_ex(r.ctx, ptr::null_mut()).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(ibv_destroy_cq(ptr::null_mut()), libc::EINVAL);
        assert_eq!(ibv_resize_cq(ptr::null_mut(), 8), libc::EINVAL);
        assert_eq!(req_notify_cq(ptr::null_mut(), 0), libc::EINVAL);
        assert_eq!(poll_cq(ptr::null_mut(), 1, ptr::null_mut()), -libc::EINVAL);
        assert!(ibv_create_comp_channel(ptr::null_mut()).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(ibv_destroy_comp_channel(ptr::null_mut()), libc::EINVAL);
        let (mut cq, mut cctx) = (ptr::null_mut(), ptr::null_mut());
        assert_eq!(ibv_get_cq_event(ptr::null_mut(), &mut cq, &mut cctx), -1);
        assert_eq!(errno(), libc::EINVAL);
        ibv_ack_cq_events(ptr::null_mut(), 1); // nothing to count, no crash

        let cq = ibv_create_cq(r.ctx, 8, ptr::null_mut(), ptr::null_mut(), 0);
        assert!(!cq.is_null());
        assert_eq!(ibv_resize_cq(cq, 0), libc::EINVAL);
        assert_eq!(poll_cq(cq, 1, ptr::null_mut()), -libc::EINVAL);
        assert_eq!(poll_cq(cq, 0, ptr::null_mut()), 0);
        let mut pa = ibv_poll_cq_attr { comp_mask: 1 };
        let start = (*cq.cast::<ibv_cq_ex>()).start_poll.unwrap();
        assert_eq!(start(cq.cast(), &mut pa), libc::EINVAL);
        assert_eq!(ibv_destroy_cq(cq), 0);
    }
}

#[test]
fn poll_cq_writes_the_callers_array() {
    let r = Rxe::new();
    // SAFETY: our context.
    let new = || unsafe { ibv_create_cq(r.ctx, 16, ptr::null_mut(), ptr::null_mut(), 0) };
    let (scq, rcq) = (new(), new());
    assert!(!scq.is_null() && !rcq.is_null());
    let (qp, pd) = post_sends(&r, scq, rcq, 3);

    let mut wcs = [Wc {
        wr_id: 0xdead,
        ..Wc::default()
    }; 2];
    assert_eq!(r.poll(scq, &mut wcs), 2);
    assert_eq!(wcs.map(|w| w.wr_id), [100, 101]);
    for w in &wcs {
        assert_eq!(w.status, WcStatus::SUCCESS);
        assert_eq!(w.opcode, WcOpcode::SEND);
        assert_eq!(w.qp_num, qp.qp_num());
    }
    assert_eq!(r.poll(scq, &mut wcs), 1);
    assert_eq!(wcs[0].wr_id, 102);
    assert_eq!(r.poll(scq, &mut wcs), 0);
    assert_eq!(r.poll(rcq, &mut wcs), 0);

    // The CQs are in use: EBUSY, and they stay usable.
    // SAFETY: live CQs; destroyed once the QP is gone.
    unsafe {
        assert_eq!(ibv_destroy_cq(scq), libc::EBUSY);
        assert_eq!(r.poll(scq, &mut wcs), 0);
        qp.destroy().unwrap();
        pd.dealloc().unwrap();
        assert_eq!(ibv_destroy_cq(scq), 0);
        assert_eq!(ibv_destroy_cq(rcq), 0);
    }
}

#[test]
fn extended_poll_reads_each_completion() {
    let r = Rxe::new();
    let cq = r.create_cq_ex(&mut attr(16, IBV_WC_STANDARD_FLAGS));
    assert!(!cq.is_null());
    // SAFETY: the live CQ; its function pointers are ours.
    let c = unsafe { &*cq };
    let (start, next, end) = (
        c.start_poll.unwrap(),
        c.next_poll.unwrap(),
        c.end_poll.unwrap(),
    );
    let mut pa = ibv_poll_cq_attr { comp_mask: 0 };
    // SAFETY: the live CQ throughout.
    unsafe {
        // Empty: ENOENT, and no poll to end (end_poll after ENOENT is not called in C, but
        // is harmless here).
        assert_eq!(start(cq, &mut pa), libc::ENOENT);
        assert_eq!(next(cq), libc::ENOENT);

        let (qp, pd) = post_sends(&r, cq.cast(), cq.cast(), 3);
        assert_eq!(start(cq, &mut pa), 0);
        let mut seen = Vec::new();
        loop {
            seen.push(((*cq).wr_id, (*cq).status));
            assert_eq!((c.read_opcode.unwrap())(cq), WcOpcode::SEND.0 as c_int);
            assert_eq!((c.read_qp_num.unwrap())(cq), qp.qp_num());
            assert_eq!((c.read_vendor_err.unwrap())(cq), 0);
            assert_eq!((c.read_wc_flags.unwrap())(cq), 0);
            match next(cq) {
                0 => {}
                e => {
                    assert_eq!(e, libc::ENOENT);
                    break;
                }
            }
        }
        end(cq);
        assert_eq!(seen, [(100, 0), (101, 0), (102, 0)]);
        // Consumed: the ring is empty for either poll.
        assert_eq!(start(cq, &mut pa), libc::ENOENT);
        let mut wcs = [Wc::default(); 4];
        assert_eq!(r.poll(cq.cast(), &mut wcs), 0);

        // A poll left open ends when the CQ is polled another way: what start_poll showed is
        // consumed, the rest is polled.
        assert_eq!(r.kernel.complete_sends(qp.qp_num()), Ok(0));
        let mut qp = qp;
        let sge: [Sge; 0] = [];
        let wrs = [
            SendWr::new(7, WrOp::Send).sge(&sge).signaled(),
            SendWr::new(8, WrOp::Send).sge(&sge).signaled(),
        ];
        qp.post_send(&wrs).unwrap();
        assert_eq!(r.kernel.complete_sends(qp.qp_num()), Ok(2));
        assert_eq!(start(cq, &mut pa), 0);
        assert_eq!((*cq).wr_id, 7);
        assert_eq!(r.poll(cq.cast(), &mut wcs), 1);
        assert_eq!(wcs[0].wr_id, 8);
        // Readers with no open poll read 0.
        assert_eq!((c.read_qp_num.unwrap())(cq), 0);

        qp.destroy().unwrap();
        pd.dealloc().unwrap();
        assert_eq!(ibv_destroy_cq(cq.cast()), 0);
    }
}

#[test]
fn imm_data_is_network_order_in_c() {
    assert_eq!(
        imm_to_c(WcFlags::WITH_IMM, 0x0102_0304),
        0x0102_0304u32.to_be()
    );
    // An invalidated rkey (the other member of the union) is in host order.
    assert_eq!(imm_to_c(WcFlags::WITH_INV, 0x0102_0304), 0x0102_0304);
}

/// An EFA model context whose device has CQ notifications (completion channels).
fn efa() -> (uverbs_efa_model::EfaFabric, *mut ibv_context) {
    let fabric = uverbs_efa_model::EfaFabric::new(1);
    let cfg = uverbs_efa_model::ModelConfig {
        device_caps: uverbs_efa_model::ModelConfig::default().device_caps
            | uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_CQ_NOTIFICATIONS,
        ..Default::default()
    };
    let uctx = fabric.add_device(cfg).open().expect("open the EFA model");
    let ctx = crate::wrap_context(uctx.device().clone(), uctx);
    (fabric, ctx)
}

#[test]
fn comp_channel_is_busy_while_a_cq_uses_it() {
    let (_fabric, ctx) = efa();
    // SAFETY: our context and the objects made on it, destroyed in order.
    unsafe {
        let ch = ibv_create_comp_channel(ctx);
        assert!(!ch.is_null(), "errno {}", errno());
        assert_eq!((*ch).context, ctx);
        assert!((*ch).fd >= 0);
        assert_eq!((*ch).refcnt, 0);
        let a = ibv_create_cq(ctx, 8, ptr::null_mut(), ch, 0);
        assert!(!a.is_null(), "errno {}", errno());
        let mut ax = attr(8, 0);
        ax.channel = ch;
        let b = create_cq_ex(ctx, &mut ax);
        assert!(!b.is_null(), "errno {}", errno());
        assert_eq!((*ch).refcnt, 2);
        assert_eq!((*a).channel, ch);
        assert_eq!(ibv_destroy_comp_channel(ch), libc::EBUSY);
        assert_eq!(ibv_destroy_cq(a), 0);
        assert_eq!(ibv_destroy_comp_channel(ch), libc::EBUSY);
        assert_eq!(ibv_destroy_cq(b.cast()), 0);
        assert_eq!((*ch).refcnt, 0);
        assert_eq!(ibv_destroy_comp_channel(ch), 0);
        assert_eq!(crate::device::ibv_close_device(ctx), 0);
    }
}

/// Delivers a completion event for `cq` on its channel as the kernel does: the model's
/// channel is an eventfd, whose 8-byte read is the event record (`cq_handle`, the CQ's
/// user handle).
///
/// # Safety
/// `cq` is a live CQ with a channel.
unsafe fn deliver_event(cq: *mut ibv_cq) {
    // SAFETY: live (above).
    let (fd, handle) = unsafe { ((*(*cq).channel).fd, cq_ref(cq).unwrap().user_handle()) };
    // SAFETY: 8 bytes from a live u64 to the channel's eventfd.
    let n = unsafe { libc::write(fd, (&handle as *const u64).cast(), 8) };
    assert_eq!(n, 8);
}

#[test]
fn get_cq_event_returns_the_c_cq_and_acks_are_counted() {
    let (_fabric, ctx) = efa();
    // SAFETY: our context and the objects made on it, destroyed in order.
    unsafe {
        let ch = ibv_create_comp_channel(ctx);
        assert!(!ch.is_null(), "errno {}", errno());
        let cq = ibv_create_cq(ctx, 8, 0x5eed as *mut c_void, ch, 0);
        assert!(!cq.is_null(), "errno {}", errno());
        // The program may change its cq_context after creation; the event returns it.
        (*cq).cq_context = 0xbeef as *mut c_void;
        assert_eq!(req_notify_cq(cq, 0), 0);
        // EFA has no solicited-only events.
        assert_eq!(req_notify_cq(cq, 1), libc::EOPNOTSUPP);

        deliver_event(cq);
        let (mut got, mut got_ctx) = (ptr::null_mut(), ptr::null_mut());
        assert_eq!(ibv_get_cq_event(ch, &mut got, &mut got_ctx), 0);
        assert_eq!(got, cq);
        assert_eq!(got_ctx, 0xbeef as *mut c_void);

        // A blocking wait ends when the event arrives.
        let c = cq as usize;
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            deliver_event(c as *mut ibv_cq);
        });
        assert_eq!(req_notify_cq(cq, 0), 0);
        got = ptr::null_mut();
        assert_eq!(ibv_get_cq_event(ch, &mut got, &mut got_ctx), 0);
        assert_eq!(got, cq);
        t.join().unwrap();

        // A non-blocking channel answers EAGAIN when no event is there.
        let fl = libc::fcntl((*ch).fd, libc::F_GETFL);
        assert_eq!(
            libc::fcntl((*ch).fd, libc::F_SETFL, fl | libc::O_NONBLOCK),
            0
        );
        assert_eq!(ibv_get_cq_event(ch, &mut got, &mut got_ctx), -1);
        assert_eq!(errno(), libc::EAGAIN);

        ibv_ack_cq_events(cq, 2);
        assert_eq!((*cq).comp_events_completed, 2);
        // The model's destroy reports no events delivered (a kernel reports the 2 read), and
        // destroy waits until the acks match the report: match the model.
        (*cq).comp_events_completed = 0;
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_destroy_comp_channel(ch), 0);
        assert_eq!(crate::device::ibv_close_device(ctx), 0);
    }
}

#[test]
fn efadv_cq_is_embedded_and_answers_for_its_cq() {
    let r = Rxe::new();
    let cq = r.create_cq_ex(&mut attr(16, 0));
    assert!(!cq.is_null());
    // SAFETY: the live CQ throughout.
    unsafe {
        let d = dv(cq).unwrap();
        assert_eq!(from_dv(d), cq);
        let (read_sgid, unsolicited) =
            ((*d).wc_read_sgid.unwrap(), (*d).wc_is_unsolicited.unwrap());
        let mut gid = ibv_gid { raw: [0; 16] };
        // No poll open: nothing to read.
        assert_eq!(read_sgid(d, &mut gid), -libc::ENOENT);
        let (qp, pd) = post_sends(&r, cq.cast(), cq.cast(), 1);
        let mut pa = ibv_poll_cq_attr { comp_mask: 0 };
        assert_eq!(((*cq).start_poll.unwrap())(cq, &mut pa), 0);
        // An rxe CQ has no source GIDs.
        assert_eq!(read_sgid(d, &mut gid), -libc::EOPNOTSUPP);
        assert!(!unsolicited(d));
        ((*cq).end_poll.unwrap())(cq);
        assert!(dv(ptr::null_mut()).is_none());

        // Async events acknowledged are counted for destroy, as completion events are.
        ack_async_event(cq.cast());
        assert_eq!((*cq).async_events_completed, 1);
        (*cq).async_events_completed = 0; // the stand-in reports none delivered
        qp.destroy().unwrap();
        pd.dealloc().unwrap();
        assert_eq!(ibv_destroy_cq(cq.cast()), 0);
    }
}

#[test]
fn resize_is_refused_where_the_provider_cannot() {
    let (_fabric, ctx) = efa();
    // SAFETY: our context and the CQ made on it.
    unsafe {
        let cq = ibv_create_cq(ctx, 8, ptr::null_mut(), ptr::null_mut(), 0);
        assert!(!cq.is_null(), "errno {}", errno());
        let cqe = (*cq).cqe;
        assert_eq!(ibv_resize_cq(cq, 64), libc::EOPNOTSUPP);
        assert_eq!((*cq).cqe, cqe);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(crate::device::ibv_close_device(ctx), 0);
    }
}
