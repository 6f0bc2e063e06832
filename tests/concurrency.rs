//! The `Send`/`Sync` contract of the public API, at compile time and at run time.
//!
//! The contract (docs/architecture.md, "Single owner, no locks"): objects whose methods only
//! issue kernel commands (`Context`, `Pd`, `Mr`, `Ah`, `CompChannel`, `Xrcd`, `Mw`, `Ah`) are
//! `Send + Sync` and may be shared between threads (an `Mr`'s memory is written through
//! `&mut Mr`, so a shared `Mr` is read, not written); objects that own a ring and post or poll
//! through `&mut self` (`Cq`, `Qp`, `Srq`, and the borrows that post or poll through
//! them) are `Send` but not `Sync`: move each to the thread that uses it. Several QPs may
//! complete into one CQ (each QP holds the CQ's kernel object), while the `Cq` itself, the right
//! to poll, stays with one thread.
//!
//! * Compile time: `Send`/`Sync` asserted for each public type, and `!Sync` asserted for the
//!   single-owner ones, so a change that breaks the contract fails the build of this test.
//! * Run time, in the soft-RoCE VM: objects created on one thread, used and destroyed on others;
//!   four threads with one RC QP pair each, all completing into one send CQ and one receive
//!   CQ polled by a fifth thread, no completion lost or duplicated, data checked; the shared
//!   `Context`/`Pd` used by four threads at once; afterwards fds, device mappings and the
//!   kernel's objects are back where they started.
//! * Run time, on the host: the same four-thread shape against the EFA device model.

mod common;
use common::efa;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, Ah, AhAttr, CompChannel, Context, Cq, Device, Gid, Mr, MrBuffer, Mw, Pd, PollCq,
    Qp, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Srq, UdDest, Wc,
    WcOpcode, WcStatus, WrBatch, Xrcd,
};

// ----- compile time -------------------------------------------------------------------------

const fn send<T: Send + ?Sized>() {}
const fn sync<T: Sync + ?Sized>() {}

/// Fails to compile if `$t` implements `$tr`: with the impl, `AmbiguousIfImpl<_>` has two
/// candidate impls for `$t` and the type parameter cannot be inferred (the trick of the
/// `static_assertions` crate's `assert_not_impl_any!`, written out for one trait).
macro_rules! assert_not_impl {
    ($t:ty, $tr:path) => {
        const _: fn() = || {
            trait AmbiguousIfImpl<A> {
                fn some_item() {}
            }
            impl<T: ?Sized> AmbiguousIfImpl<()> for T {}
            #[allow(dead_code)]
            struct Invalid;
            impl<T: ?Sized + $tr> AmbiguousIfImpl<Invalid> for T {}
            let _ = <$t as AmbiguousIfImpl<_>>::some_item;
        };
    };
}

// Shared kernel objects: commands only, through `&self`; cheap clones of one `Arc`.
const _: () = {
    send::<Device>();
    sync::<Device>();
    send::<Context>();
    sync::<Context>();
    send::<Pd>();
    sync::<Pd>();
    send::<Mr>();
    sync::<Mr>();
    send::<MrBuffer>();
    sync::<MrBuffer>();
    send::<Ah>();
    sync::<Ah>();
    send::<CompChannel>();
    sync::<CompChannel>();
    send::<Xrcd>();
    sync::<Xrcd>();
    send::<Mw>();
    sync::<Mw>();
    send::<Ah>();
    sync::<Ah>();
    send::<uverbs::Error>();
    sync::<uverbs::Error>();
    // Single owners of a ring: movable to the thread that posts or polls.
    send::<Cq>();
    send::<Qp>();
    send::<Srq>();
    send::<WrBatch<'static>>();
    send::<PollCq<'static>>();
};

#[cfg(feature = "tokio")]
const _: () = {
    send::<uverbs::tokio::AsyncCompChannel>();
    sync::<uverbs::tokio::AsyncCompChannel>();
    send::<uverbs::tokio::AsyncEvents>();
};

// Post and poll take `&mut self` and touch the ring without locks: a shared `&Cq`/`&Qp` on two
// threads must not be possible.
assert_not_impl!(Cq, Sync);
assert_not_impl!(Qp, Sync);
assert_not_impl!(Srq, Sync);
assert_not_impl!(WrBatch<'static>, Sync);
assert_not_impl!(PollCq<'static>, Sync);

// ----- helpers for the VM tests -------------------------------------------------------------

const DEADLINE: Duration = Duration::from_secs(60);

const KINDS: [&str; 6] = ["ctx", "pd", "mr", "cq", "srq", "qp"];

/// (fds, device mappings, kernel objects per kind in `KINDS`).
fn snapshot() -> (usize, usize, Vec<usize>) {
    (
        common::open_fds(),
        common::leaks::device_mappings(),
        KINDS
            .iter()
            .map(|k| common::leaks::kernel_objects(k))
            .collect(),
    )
}

/// Checks the snapshot `start` taken before the test's objects existed is reached again, and
/// that no destroy failed while dropping.
fn assert_back_to(start: &(usize, usize, Vec<usize>), what: &str) {
    let now = snapshot();
    assert_eq!(
        &now, start,
        "{what}: (fds, device mappings, kernel objects {KINDS:?}) after the threads dropped everything"
    );
    assert_eq!(
        uverbs::drop_error_count(),
        0,
        "{what}: a destroy failed while dropping"
    );
}

/// RC: connected to `remote` (timeout 14, 7 retries); UD: to RTS with [`QKEY`].
fn to_rts(qp: &mut Qp, remote: u32, gid_index: u8, gid: Gid) {
    if qp.qp_type() == QpType::Rc {
        common::rc::rc_connect(qp, remote, gid_index, gid, 14, 7);
        return;
    }
    let init = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        qkey: QKEY,
        ..QpAttr::default()
    };
    qp.modify(
        &init,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY,
    )
    .expect("modify to INIT");
    let rtr = QpAttr {
        qp_state: QpState::Rtr,
        ..QpAttr::default()
    };
    qp.modify(&rtr, QpAttrMask::STATE).expect("modify to RTR");
    let rts = QpAttr {
        qp_state: QpState::Rts,
        ..QpAttr::default()
    };
    qp.modify(&rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
        .expect("modify to RTS");
}

const QKEY: u32 = 0x1111_2222;

fn cap(wr: u32) -> QpCap {
    common::rc::qp_cap(wr)
}

/// Polls `cq` until `n` completions came (panics after `DEADLINE`).
fn wait(cq: &mut Cq, n: usize) -> Vec<Wc> {
    common::rc::wait_completions::<8>(cq, n, DEADLINE)
}

// ----- run time, soft-RoCE VM ---------------------------------------------------------------

/// Every object kind is created on the test's thread and moved to another thread, which uses
/// it and destroys it: PD, MR, CQ with a completion channel, the channel (waited on by a third
/// thread), UD QPs, an SRQ and an AH. Then the context goes on yet another thread.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn objects_created_on_one_thread_are_used_and_destroyed_on_others() {
    let start = snapshot();
    let ctx = common::rxe_context();
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let ch = ctx.create_comp_channel().expect("create_comp_channel");
    let scq = ctx.create_cq(16, Some(&ch), 0).expect("create_cq");
    let rcq = ctx.create_cq(16, None, 0).expect("create_cq");
    let srq = common::srq(&pd, 16);
    let smr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).expect("reg_mr");
    let rmr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).expect("reg_mr");
    let mut a = pd
        .create_qp(&QpInitAttr::new(QpType::Ud, &scq, &scq, cap(8)))
        .expect("create_qp");
    let mut init = QpInitAttr::new(
        QpType::Ud,
        &rcq,
        &rcq,
        QpCap {
            max_recv_wr: 0,
            ..cap(8)
        },
    );
    init.srq = Some(&srq);
    let mut b = pd.create_qp(&init).expect("create_qp on srq");
    to_rts(&mut a, 0, gid_index, gid);
    to_rts(&mut b, 0, gid_index, gid);
    let ah = pd
        .create_ah(&AhAttr::roce(gid, gid_index, 1))
        .expect("create_ah");
    let b_qpn = b.qp_num();
    let scq_handle = scq.user_handle();
    let a_qpn = a.qp_num();
    // The objects exist and are counted before any thread runs.
    let during = snapshot();
    assert!(
        during.2[5] >= start.2[5] + 2,
        "rdma resource show qp misses ours"
    );

    let (posted_tx, posted_rx) = mpsc::channel::<()>();
    // Receiver: the SRQ, the receiving QP, its CQ and MR; destroys them all here.
    let receiver = std::thread::spawn(move || {
        let (mut srq, b, mut rcq, rmr) = (srq, b, rcq, rmr);
        let sg = [rmr.sge(0, 40 + 64).unwrap()];
        srq.post_recv(&[RecvWr::new(9, &sg)])
            .expect("post_srq_recv");
        posted_tx.send(()).unwrap();
        let w = wait(&mut rcq, 1);
        assert_eq!(
            (
                w[0].status,
                w[0].opcode,
                w[0].wr_id,
                w[0].byte_len,
                w[0].src_qp
            ),
            (WcStatus::SUCCESS, WcOpcode::RECV, 9, 40 + 11, a_qpn),
            "{w:?}"
        );
        let mut got = [0u8; 11];
        rmr.read(40, &mut got).unwrap();
        assert_eq!(&got, b"cross-threa");
        b.destroy().expect("destroy_qp on the receiving thread");
        srq.destroy().expect("destroy_srq on the receiving thread");
        rcq.destroy().expect("destroy_cq on the receiving thread");
        rmr.dereg().expect("dereg_mr on the receiving thread");
    });
    // Event waiter: a clone of the channel; the CQ armed by the sender fires it.
    // The kernel discards a CQ's unread events when the CQ is destroyed
    // (ib_uverbs_release_ucq), so the sender keeps its CQ until the waiter has the event.
    let (armed_tx, armed_rx) = mpsc::channel::<()>();
    let (got_event_tx, got_event_rx) = mpsc::channel::<()>();
    let waiter = {
        let ch = ch.clone();
        std::thread::spawn(move || {
            armed_rx.recv().unwrap();
            let ev = ch
                .get_cq_event(Some(Duration::from_secs(30)))
                .expect("get_cq_event on another thread");
            assert_eq!(ev.cq_user_handle, scq_handle);
            got_event_tx.send(()).unwrap();
            drop(ch);
        })
    };
    // Sender: the UD QP, its CQ (armed for an event), the AH and the MR.
    let sender = std::thread::spawn(move || {
        let (mut a, mut scq, ah, mut smr) = (a, scq, ah, smr);
        smr.write(0, b"cross-threa").unwrap();
        scq.req_notify(false).expect("req_notify_cq");
        armed_tx.send(()).unwrap();
        posted_rx.recv().unwrap();
        let sg = [smr.sge(0, 11).unwrap()];
        a.post_send(&[SendWr::send(4).sge(&sg).signaled().ud(&ah, b_qpn, QKEY)])
            .expect("post_send");
        let w = wait(&mut scq, 1);
        assert_eq!((w[0].status, w[0].wr_id), (WcStatus::SUCCESS, 4), "{w:?}");
        // An Err here means the waiter panicked; its join below reports why.
        let _ = got_event_rx.recv();
        a.destroy().expect("destroy_qp on the sending thread");
        ah.destroy().expect("destroy_ah on the sending thread");
        scq.destroy().expect("destroy_cq on the sending thread");
        smr.dereg().expect("dereg_mr on the sending thread");
    });
    for (name, t) in [
        ("receiver", receiver),
        ("event waiter", waiter),
        ("sender", sender),
    ] {
        t.join()
            .unwrap_or_else(|_| panic!("the {name} thread failed"));
    }
    // The PD: a registration made and dropped on another thread, then the PD itself.
    std::thread::spawn(move || {
        let mut mr = pd.reg_mr(8192, AccessFlags::LOCAL_WRITE).expect("reg_mr");
        mr.write(8191, &[1]).unwrap();
        drop(mr);
        drop(pd);
    })
    .join()
    .unwrap();
    // The last holders of the context: the channel, then the context, on two more threads.
    std::thread::spawn(move || drop(ch)).join().unwrap();
    std::thread::spawn(move || drop(ctx)).join().unwrap();
    assert_back_to(&start, "objects moved between threads");
}

/// Four threads, each with its own RC QP pair; every sender QP completes into one send CQ and
/// every receiver QP into one receive CQ. A `Cq` polls through `&mut self` (one poller; it is
/// `Send`, not `Sync`), so a fifth thread owns both CQs and hands each completion to the
/// thread whose QP it names. Each sender's messages carry (thread, sequence) and are checked on
/// arrival: in order, once each; each send completes once; nothing is left over at the end.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn four_threads_with_one_qp_each_share_one_cq_and_lose_nothing() {
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 2_000;
    const WINDOW: usize = 8; // sends (and receives) in flight per thread
    const MSG: usize = 64;

    let start = snapshot();
    let ctx = common::rxe_context();
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let pd = ctx.alloc_pd().unwrap();
    let cqe = (THREADS * WINDOW * 2) as u32;
    let scq = ctx.create_cq(cqe, None, 0).unwrap();
    let rcq = ctx.create_cq(cqe, None, 0).unwrap();

    struct Worker {
        s: Qp,
        r: Qp,
        smr: Mr,
        rmr: Mr,
    }
    let mut workers = Vec::new();
    let mut route = HashMap::new();
    let mut inboxes = Vec::new();
    let mut outboxes = Vec::new();
    for i in 0..THREADS {
        let mut s = pd
            .create_qp(&QpInitAttr::new(QpType::Rc, &scq, &scq, cap(WINDOW as u32)))
            .unwrap();
        let mut r = pd
            .create_qp(&QpInitAttr::new(QpType::Rc, &rcq, &rcq, cap(WINDOW as u32)))
            .unwrap();
        let (sn, rn) = (s.qp_num(), r.qp_num());
        to_rts(&mut s, rn, gid_index, gid);
        to_rts(&mut r, sn, gid_index, gid);
        route.insert(sn, i);
        route.insert(rn, i);
        let smr = pd.reg_mr(WINDOW * MSG, AccessFlags::LOCAL_WRITE).unwrap();
        let rmr = pd.reg_mr(WINDOW * MSG, AccessFlags::LOCAL_WRITE).unwrap();
        workers.push(Worker { s, r, smr, rmr });
        let (tx, rx) = mpsc::channel::<Wc>();
        outboxes.push(tx);
        inboxes.push(rx);
    }
    let all_done = Arc::new(AtomicBool::new(false));

    // The poller: owns both CQs; every completion goes to exactly one worker.
    let poller = {
        let all_done = all_done.clone();
        std::thread::spawn(move || {
            let (mut scq, mut rcq) = (scq, rcq);
            let mut buf = [Wc::default(); 16];
            let mut routed = 0u64;
            let mut last = Instant::now();
            while !all_done.load(Ordering::Acquire) {
                let mut n = 0;
                for cq in [&mut scq, &mut rcq] {
                    let k = cq.poll(&mut buf).expect("poll_cq");
                    for w in &buf[..k] {
                        let i = *route
                            .get(&w.qp_num)
                            .unwrap_or_else(|| panic!("completion for an unknown QP: {w:?}"));
                        // A worker that already finished would not take it: an extra completion.
                        outboxes[i].send(*w).unwrap_or_else(|_| {
                            panic!("completion after worker {i} finished: {w:?}")
                        });
                    }
                    n += k;
                }
                routed += n as u64;
                if n > 0 {
                    last = Instant::now();
                } else {
                    assert!(last.elapsed() < DEADLINE, "no completion for {DEADLINE:?}");
                    std::thread::yield_now();
                }
            }
            // Everyone got all they expected: nothing else may arrive.
            std::thread::sleep(Duration::from_millis(200));
            for cq in [&mut scq, &mut rcq] {
                let k = cq.poll(&mut buf).unwrap();
                assert_eq!(k, 0, "extra completions: {:?}", &buf[..k]);
            }
            drop(scq);
            drop(rcq);
            routed
        })
    };

    let threads: Vec<_> = workers
        .into_iter()
        .zip(inboxes)
        .enumerate()
        .map(|(i, (w, inbox))| {
            std::thread::spawn(move || {
                let Worker {
                    mut s,
                    mut r,
                    mut smr,
                    rmr,
                } = w;
                let ssg: Vec<_> = (0..WINDOW)
                    .map(|k| [smr.sge(k * MSG, MSG as u32).unwrap()])
                    .collect();
                let rsg: Vec<_> = (0..WINDOW)
                    .map(|k| [rmr.sge(k * MSG, MSG as u32).unwrap()])
                    .collect();
                for (k, sg) in rsg.iter().enumerate() {
                    r.post_recv(&[RecvWr::new(k as u64, sg)]).unwrap();
                }
                // Receives are posted only for messages still to come, so none is left
                // outstanding at the end (nothing to flush when the QP is destroyed).
                let mut recvs_posted = WINDOW as u64;
                let (mut next_send, mut next_send_done, mut next_recv) = (0u64, 0u64, 0u64);
                let mut free: Vec<usize> = (0..WINDOW).collect();
                while next_send_done < PER_THREAD || next_recv < PER_THREAD {
                    // Sent but not yet seen received stays below WINDOW: a receive is posted
                    // for every message on the wire.
                    while next_send < PER_THREAD
                        && next_send - next_recv < WINDOW as u64
                        && !free.is_empty()
                    {
                        let k = free.pop().unwrap();
                        let mut msg = [0u8; MSG];
                        msg[..8].copy_from_slice(&(i as u64).to_le_bytes());
                        msg[8..16].copy_from_slice(&next_send.to_le_bytes());
                        for (j, b) in msg[16..].iter_mut().enumerate() {
                            *b = (next_send as u8).wrapping_add(j as u8) ^ i as u8;
                        }
                        smr.write(k * MSG, &msg).unwrap();
                        // wr_id: the sequence number in the upper bits, the slot below.
                        let id = next_send << 8 | k as u64;
                        s.post_send(&[SendWr::send(id).sge(&ssg[k]).signaled()])
                            .unwrap();
                        next_send += 1;
                    }
                    let w = inbox
                        .recv_timeout(DEADLINE)
                        .unwrap_or_else(|_| panic!("worker {i}: no completion for {DEADLINE:?}"));
                    assert_eq!(w.status, WcStatus::SUCCESS, "worker {i}: {w:?}");
                    if w.qp_num == s.qp_num() {
                        assert_eq!(w.opcode, WcOpcode::SEND, "{w:?}");
                        // RC completes sends in order: anything else is a loss or a duplicate.
                        assert_eq!(w.wr_id >> 8, next_send_done, "worker {i}: send completion");
                        next_send_done += 1;
                        free.push((w.wr_id & 0xff) as usize);
                    } else {
                        assert_eq!(w.qp_num, r.qp_num(), "worker {i} got another's completion");
                        assert_eq!(
                            (w.opcode, w.byte_len),
                            (WcOpcode::RECV, MSG as u32),
                            "{w:?}"
                        );
                        let k = w.wr_id as usize;
                        let mut msg = [0u8; MSG];
                        rmr.read(k * MSG, &mut msg).unwrap();
                        let from = u64::from_le_bytes(msg[..8].try_into().unwrap());
                        let seq = u64::from_le_bytes(msg[8..16].try_into().unwrap());
                        assert_eq!(from, i as u64, "worker {i}: message from another pair");
                        assert_eq!(seq, next_recv, "worker {i}: lost or duplicated message");
                        for (j, b) in msg[16..].iter().enumerate() {
                            assert_eq!(
                                *b,
                                (seq as u8).wrapping_add(j as u8) ^ i as u8,
                                "byte {j} of {seq}"
                            );
                        }
                        next_recv += 1;
                        if recvs_posted < PER_THREAD {
                            r.post_recv(&[RecvWr::new(k as u64, &rsg[k])]).unwrap();
                            recvs_posted += 1;
                        }
                    }
                }
                // Destroyed here, on the worker thread.
                s.destroy().expect("destroy sender QP");
                r.destroy().expect("destroy receiver QP");
                smr.dereg().expect("dereg send MR");
                rmr.dereg().expect("dereg recv MR");
                (next_send_done, next_recv)
            })
        })
        .collect();
    let mut totals = Vec::new();
    for (i, t) in threads.into_iter().enumerate() {
        totals.push(t.join().unwrap_or_else(|_| panic!("worker {i} failed")));
    }
    all_done.store(true, Ordering::Release);
    let routed = poller.join().expect("poller failed");
    assert_eq!(totals, vec![(PER_THREAD, PER_THREAD); THREADS]);
    assert_eq!(
        routed,
        2 * PER_THREAD * THREADS as u64,
        "completions routed"
    );
    std::thread::spawn(move || drop((pd, ctx))).join().unwrap();
    assert_back_to(&start, "four threads sharing CQs");
}

/// The `Sync` objects shared by reference: four threads register MRs, create CQs, QPs and AHs
/// from one `&Pd`/`&Context` at the same time, and wait on one `&CompChannel`.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn one_context_and_pd_serve_four_threads_at_once() {
    const ROUNDS: usize = 25;
    let start = snapshot();
    let ctx = common::rxe_context();
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (ctx, pd, ch) = (&ctx, &pd, &ch);
            s.spawn(move || {
                for round in 0..ROUNDS {
                    let mut mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).expect("reg_mr");
                    mr.write(0, &t.to_le_bytes()).unwrap();
                    let mut cq = ctx.create_cq(8, Some(ch), 0).expect("create_cq");
                    let mut qp = pd
                        .create_qp(&QpInitAttr::new(QpType::Ud, &cq, &cq, cap(4)))
                        .expect("create_qp");
                    to_rts(&mut qp, 0, gid_index, gid);
                    let ah = pd
                        .create_ah(&AhAttr::roce(gid, gid_index, 1))
                        .expect("create_ah");
                    // A loopback UD send to itself completes on this thread's CQ.
                    let sg = [mr.sge(0, 8).unwrap()];
                    qp.post_send(&[SendWr::send(round as u64).sge(&sg).signaled().ud(
                        &ah,
                        qp.qp_num(),
                        QKEY,
                    )])
                    .unwrap();
                    let w = wait(&mut cq, 1);
                    assert_eq!((w[0].status, w[0].wr_id), (WcStatus::SUCCESS, round as u64));
                    let mut b = [0u8; 8];
                    mr.read(0, &mut b).unwrap();
                    assert_eq!(u64::from_le_bytes(b), t, "another thread's bytes in my MR");
                    let attr = ctx.query_device().expect("query_device");
                    assert!(attr.max_qp > 0);
                    qp.destroy().expect("destroy_qp");
                    ah.destroy().expect("destroy_ah");
                    cq.destroy().expect("destroy_cq");
                    mr.dereg().expect("dereg_mr");
                }
            });
        }
    });
    drop((ch, pd, ctx));
    assert_back_to(&start, "shared context and PD");
}

// ----- run time, EFA device model (host) ----------------------------------------------------

/// The four-thread shape against the EFA model: device A's four SRD QPs complete into one send
/// CQ, device B's four into one receive CQ; one thread per QP pair posts, one thread polls
/// both CQs and routes completions; the test's thread runs the model. SRD may reorder, so each
/// (thread, sequence) is checked to arrive exactly once rather than in order.
#[test]
fn four_threads_with_one_qp_each_share_one_cq_and_lose_nothing_on_the_efa_model() {
    use uverbs::{CqInitAttr, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr, QpCap, QpInitAttr, QpType};
    use uverbs::{EfaWcFlags, Errno, RecvWr, SendOpsFlags, SendWr};
    use uverbs_efa_model::{EfaFabric, ModelConfig};
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 1_500;
    const WINDOW: usize = 8;
    const MSG: usize = 16;

    let fds_start = common::open_fds();
    let fab = EfaFabric::new(23);
    let dev_a = fab.add_device(ModelConfig::default());
    let dev_b = fab.add_device(ModelConfig::default());
    let ctx_a = dev_a.open().expect("open model device A");
    let ctx_b = dev_b.open().expect("open model device B");
    let (pd_a, pd_b) = (ctx_a.alloc_pd().unwrap(), ctx_b.alloc_pd().unwrap());
    let efa_cq = |ctx: &Context| {
        ctx.efadv_create_cq(
            &CqInitAttr {
                cqe: (THREADS * WINDOW * 2) as u32,
                ..Default::default()
            },
            &EfaCqInitAttr {
                wc_flags: EfaWcFlags::empty(),
                ..Default::default()
            },
        )
        .expect("efadv_create_cq")
    };
    let (a_scq, a_rcq) = (efa_cq(&ctx_a), efa_cq(&ctx_a));
    let (b_scq, b_rcq) = (efa_cq(&ctx_b), efa_cq(&ctx_b));
    let cap = QpCap {
        max_send_wr: WINDOW as u32,
        max_recv_wr: WINDOW as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 32,
    };
    let qp = |pd: &Pd, scq: &Cq, rcq: &Cq| {
        let mut qp = pd
            .efadv_create_qp_ex(
                &QpInitAttr {
                    sq_sig_all: true,
                    send_ops_flags: SendOpsFlags::SEND,
                    ..QpInitAttr::new(QpType::Srd, scq, rcq, cap)
                },
                &EfaQpInitAttr {
                    flags: EfaQpFlags::empty(),
                    sl: 0,
                    wr_flags: Default::default(),
                },
            )
            .expect("efadv_create_qp");
        efa::to_rts(&mut qp, QKEY).expect("modify to RTS");
        qp
    };
    // `Ah` is `Sync`: one AH shared by the four posting threads.
    let ah = Arc::new(
        pd_a.create_ah(&efa::ah_attr(dev_b.gid()))
            .expect("efadv_create_ah"),
    );
    let mut route = HashMap::new();
    let mut workers = Vec::new();
    let mut inboxes = Vec::new();
    let mut outboxes = Vec::new();
    for i in 0..THREADS {
        let s = qp(&pd_a, &a_scq, &a_rcq);
        let r = qp(&pd_b, &b_scq, &b_rcq);
        // Completions are keyed by (device, QP number): the two devices number QPs alike.
        route.insert((0u8, s.qp_num()), i);
        route.insert((1u8, r.qp_num()), i);
        let rmr = pd_b.reg_mr(WINDOW * MSG, AccessFlags::LOCAL_WRITE).unwrap();
        workers.push((s, r, rmr, ah.clone()));
        let (tx, rx) = mpsc::channel::<Wc>();
        outboxes.push(tx);
        inboxes.push(rx);
    }
    let all_done = Arc::new(AtomicBool::new(false));
    let poller = {
        let all_done = all_done.clone();
        std::thread::spawn(move || {
            let (mut scq, mut rcq) = (a_scq, b_rcq);
            let mut buf = [Wc::default(); 8];
            let mut routed = 0u64;
            while !all_done.load(Ordering::Acquire) {
                let mut n = 0;
                for (dev, cq) in [(0u8, &mut scq), (1u8, &mut rcq)] {
                    let k = cq.poll(&mut buf).expect("poll_cq");
                    for w in &buf[..k] {
                        let i = route[&(dev, w.qp_num)];
                        outboxes[i].send(*w).unwrap_or_else(|_| {
                            panic!("completion after worker {i} finished: {w:?}")
                        });
                    }
                    n += k;
                }
                routed += n as u64;
                if n == 0 {
                    std::thread::yield_now();
                }
            }
            for cq in [&mut scq, &mut rcq] {
                let k = cq.poll(&mut buf).unwrap();
                assert_eq!(k, 0, "extra completions: {:?}", &buf[..k]);
            }
            routed
        })
    };
    let threads: Vec<_> = workers
        .into_iter()
        .zip(inboxes)
        .enumerate()
        .map(|(i, ((mut s, mut r, rmr, ah), inbox))| {
            std::thread::spawn(move || {
                let dest = UdDest::new(&ah, r.qp_num(), QKEY);
                let rsg: Vec<_> = (0..WINDOW)
                    .map(|k| [rmr.sge(k * MSG, MSG as u32).unwrap()])
                    .collect();
                for (k, sg) in rsg.iter().enumerate() {
                    r.post_recv(&[RecvWr {
                        wr_id: k as u64,
                        sg_list: sg,
                    }])
                    .unwrap();
                }
                let mut recvs_posted = WINDOW as u64;
                let mut sent_done = vec![false; PER_THREAD as usize];
                let mut received = vec![false; PER_THREAD as usize];
                let (mut next, mut ns, mut nr) = (0u64, 0u64, 0u64);
                let deadline = Instant::now() + DEADLINE;
                while ns < PER_THREAD || nr < PER_THREAD {
                    // Sent but not yet seen received stays below WINDOW: a receive is posted
                    // for every message on the wire.
                    while next < PER_THREAD && next - nr < WINDOW as u64 {
                        let mut msg = [0u8; MSG];
                        msg[..8].copy_from_slice(&(i as u64).to_le_bytes());
                        msg[8..].copy_from_slice(&next.to_le_bytes());
                        let bufs: [&[u8]; 1] = [&msg];
                        match s.post_send(&[SendWr::send(next)
                            .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
                            .inline(bufs[0])])
                        {
                            Ok(_) => next += 1,
                            Err(e) if e.error.is(Errno::NOMEM) => break,
                            Err(e) => panic!("worker {i}: post_send: {e}"),
                        }
                    }
                    let left = deadline.saturating_duration_since(Instant::now());
                    let w = inbox.recv_timeout(left).unwrap_or_else(|_| {
                        panic!("worker {i}: stuck at {ns} sends, {nr} receives")
                    });
                    assert_eq!(w.status, WcStatus::SUCCESS, "worker {i}: {w:?}");
                    if w.opcode == WcOpcode::SEND {
                        assert_eq!(w.qp_num, s.qp_num());
                        assert!(
                            !std::mem::replace(&mut sent_done[w.wr_id as usize], true),
                            "send {} twice",
                            w.wr_id
                        );
                        ns += 1;
                    } else {
                        assert_eq!(
                            (w.opcode, w.qp_num, w.byte_len),
                            (WcOpcode::RECV, r.qp_num(), MSG as u32)
                        );
                        let k = w.wr_id as usize;
                        let mut msg = [0u8; MSG];
                        rmr.read(k * MSG, &mut msg).unwrap();
                        let from = u64::from_le_bytes(msg[..8].try_into().unwrap());
                        let seq = u64::from_le_bytes(msg[8..].try_into().unwrap());
                        assert_eq!(from, i as u64, "worker {i}: message from another pair");
                        assert!(
                            !std::mem::replace(&mut received[seq as usize], true),
                            "message {seq} twice"
                        );
                        nr += 1;
                        if recvs_posted < PER_THREAD {
                            r.post_recv(&[RecvWr {
                                wr_id: k as u64,
                                sg_list: &rsg[k],
                            }])
                            .unwrap();
                            recvs_posted += 1;
                        }
                    }
                }
                assert!(sent_done.iter().chain(&received).all(|&b| b));
                s.destroy().expect("destroy sender QP on its thread");
                r.destroy().expect("destroy receiver QP on its thread");
                rmr.dereg().expect("dereg MR on its thread");
                drop(ah);
            })
        })
        .collect();
    // The test's thread is the network: it runs the model until every worker finished.
    let mut executed = 0;
    while threads.iter().any(|t| !t.is_finished()) {
        executed += fab.process();
        std::thread::yield_now();
    }
    for (i, t) in threads.into_iter().enumerate() {
        t.join().unwrap_or_else(|_| panic!("worker {i} failed"));
    }
    all_done.store(true, Ordering::Release);
    let routed = poller.join().expect("poller failed");
    assert_eq!(
        executed,
        THREADS * PER_THREAD as usize,
        "sends the model executed"
    );
    assert_eq!(
        routed,
        2 * PER_THREAD * THREADS as u64,
        "completions routed"
    );
    std::thread::spawn(move || drop((ah, a_rcq, b_scq, pd_a, pd_b, ctx_a, ctx_b)))
        .join()
        .unwrap();
    fab.assert_no_violations();
    assert_eq!(
        common::open_fds(),
        fds_start,
        "fds after every object was dropped"
    );
    assert_eq!(
        uverbs::drop_error_count(),
        0,
        "a destroy failed while dropping"
    );
}
