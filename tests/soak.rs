//! Soak and leaks in the soft-RoCE VM.
//!
//! * Create/destroy cycles of context, PD, MR, CQ, SRQ, QP and AH: the process's fds, its
//!   mappings (`/proc/self/maps`) and the kernel's objects (`rdma resource show`) come back to
//!   their starting counts.
//! * Messages through an SRQ shared by 64 RC QPs: none lost, none duplicated, each sender's
//!   messages in order.
//!
//! Sizes: CI runs 1,000 cycles and 20,000 messages (TCG is slow); `UVERBS_SOAK_FULL=1` runs
//! 10,000 cycles and 1,000,000 messages (see docs/reliability.md for measured times).

mod common;

use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, AhAttr, Cq, Gid, Pd, Qp, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Wc, WcStatus,
};

fn full() -> bool {
    std::env::var("UVERBS_SOAK_FULL").as_deref() == Ok("1")
}

const KINDS: [&str; 6] = ["ctx", "pd", "mr", "cq", "srq", "qp"];

/// (fds, device mappings, kernel objects per kind). All mappings are checked separately:
/// the allocator may keep a region mapped between cycles, so their count may step once but
/// must not grow with the number of cycles.
fn snapshot(tid: &str) -> (usize, usize, Vec<usize>) {
    (
        common::open_fds(),
        common::leaks::device_mappings(),
        KINDS
            .iter()
            .map(|k| common::leaks::kernel_objects_of_task(k, tid))
            .collect(),
    )
}

/// One cycle: every object kind created (the QP on the SRQ, plus one with its own RQ) and
/// destroyed again, children before parents.
fn one_cycle(gid_index: u8, gid: Gid) {
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let mr = pd.reg_mr(8192, AccessFlags::LOCAL_WRITE).expect("reg_mr");
    let ch = ctx.create_comp_channel().expect("create_comp_channel");
    let cq = ctx.create_cq(16, Some(&ch), 0).expect("create_cq");
    let srq = common::srq(&pd, 16);
    let cap = common::rc::qp_cap(8);
    let qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq, cap))
        .expect("create_qp");
    let mut init = QpInitAttr::new(
        QpType::Rc,
        &cq,
        &cq,
        QpCap {
            max_recv_wr: 0,
            ..cap
        },
    );
    init.srq = Some(&srq);
    let qp_srq = pd.create_qp(&init).expect("create_qp on srq");
    let ah = pd
        .create_ah(&AhAttr::roce(gid, gid_index, 1))
        .expect("create_ah");
    // Explicit destroys where the API offers them (they return errors Drop cannot).
    qp.destroy().expect("destroy_qp");
    qp_srq.destroy().expect("destroy_qp");
    drop(ah);
    srq.destroy().expect("destroy_srq");
    cq.destroy().expect("destroy_cq");
    drop(ch);
    mr.dereg().expect("dereg_mr");
    drop(pd);
    drop(ctx);
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn create_destroy_cycles_return_fds_mappings_and_kernel_objects() {
    let cycles = if full() { 10_000 } else { 1_000 };
    let tid = common::leaks::thread_id();
    let probe = common::rxe_context();
    let (gid_index, gid) = common::rc::roce_gid(&probe);
    drop(probe);
    // One warm-up cycle: first-use allocations (e.g. the libtest thread's buffers) settle.
    one_cycle(gid_index, gid);
    let start = snapshot(&tid);
    // The counts must see our objects, or the comparison proves nothing.
    {
        let ctx = common::rxe_context();
        let _pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(4, None, 0).unwrap();
        let (fds, maps, objs) = snapshot(&tid);
        assert!(fds > start.0, "the fd count misses an open context");
        assert!(maps > start.1, "the mapping count misses a CQ ring");
        drop(cq);
        assert_eq!(
            objs[0],
            start.2[0] + 1,
            "rdma resource show ctx misses ours"
        );
        assert_eq!(objs[1], start.2[1] + 1, "rdma resource show pd misses ours");
    }
    let all_maps_start = common::settled_mappings();
    let mut all_maps_settled = None;
    let t = Instant::now();
    for i in 0..cycles {
        one_cycle(gid_index, gid);
        if i % 250 == 249 {
            let now = snapshot(&tid);
            assert_eq!(
                now,
                start,
                "after {} cycles (fds, device maps, {KINDS:?})",
                i + 1
            );
            let all = common::settled_mappings();
            let settled = *all_maps_settled.get_or_insert(all);
            assert_eq!(
                all, settled,
                "mappings grow with cycles (start {all_maps_start})"
            );
        }
    }
    let all_maps_end = common::settled_mappings();
    assert!(
        all_maps_end <= all_maps_start + 2,
        "mappings {all_maps_start} -> {all_maps_end}"
    );
    let end = snapshot(&tid);
    eprintln!(
        "{cycles} cycles in {:.1} s; fds {} device maps {} all maps {all_maps_start}->{all_maps_end} kernel objects {:?} (start {:?})",
        t.elapsed().as_secs_f64(),
        end.0,
        end.1,
        end.2,
        start
    );
    assert_eq!(end, start, "(fds, maps, kernel objects {KINDS:?})");
    assert_eq!(
        uverbs::drop_error_count(),
        0,
        "a destroy failed while dropping"
    );
}

/// RC INIT -> RTR -> RTS towards `remote` (timeout 14, 7 retries).
fn to_rts(qp: &mut Qp, remote: u32, gid_index: u8, gid: Gid) {
    common::rc::rc_connect(qp, remote, gid_index, gid, 14, 7);
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn srq_shared_by_64_qps_loses_and_duplicates_no_message() {
    const QPS: usize = 64;
    const PER_QP: usize = 8; // sends in flight per sender
    const SRQ_DEPTH: usize = 1024; // > QPS * PER_QP: the SRQ never runs dry
    const MSG: usize = 16; // bytes: sender index and sequence number
    let total: u64 = if full() { 1_000_000 } else { 20_000 };

    let ctx = common::rxe_context();
    let pd: Pd = ctx.alloc_pd().unwrap();
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let mut scq: Cq = ctx.create_cq(4096, None, 0).unwrap();
    let mut rcq: Cq = ctx.create_cq(4096, None, 0).unwrap();
    let mut srq = common::srq(&pd, SRQ_DEPTH as u32);
    let rbuf = pd
        .reg_mr(SRQ_DEPTH * MSG, AccessFlags::LOCAL_WRITE)
        .unwrap();
    let mut sbuf = pd
        .reg_mr(QPS * PER_QP * MSG, AccessFlags::LOCAL_WRITE)
        .unwrap();
    let rsges: Vec<_> = (0..SRQ_DEPTH)
        .map(|i| [rbuf.sge(i * MSG, MSG as u32).unwrap()])
        .collect();
    let wrs: Vec<_> = (0..SRQ_DEPTH)
        .map(|i| RecvWr::new(i as u64, &rsges[i]))
        .collect();
    srq.post_recv(&wrs).unwrap();

    // Send-only QPs: no receive queue depth (a one-slot ring on rxe, finding F2).
    let cap = QpCap {
        max_send_wr: PER_QP as u32,
        max_recv_wr: 0,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..QPS {
        let s = pd
            .create_qp(&QpInitAttr::new(QpType::Rc, &scq, &scq, cap))
            .unwrap();
        let mut ia = QpInitAttr::new(
            QpType::Rc,
            &rcq,
            &rcq,
            QpCap {
                max_recv_wr: 0,
                ..cap
            },
        );
        ia.srq = Some(&srq);
        senders.push(s);
        receivers.push(pd.create_qp(&ia).unwrap());
    }
    let mut qpn_to_sender = std::collections::HashMap::new();
    for (i, (s, r)) in senders.iter_mut().zip(receivers.iter_mut()).enumerate() {
        let (sn, rn) = (s.qp_num(), r.qp_num());
        to_rts(s, rn, gid_index, gid);
        to_rts(r, sn, gid_index, gid);
        qpn_to_sender.insert(rn, i);
    }

    let ssges: Vec<_> = (0..QPS * PER_QP)
        .map(|i| [sbuf.sge(i * MSG, MSG as u32).unwrap()])
        .collect();
    let mut next_seq = vec![0u64; QPS]; // next sequence number each sender posts
    let mut expect_seq = vec![0u64; QPS]; // next sequence number expected from each sender
    let mut in_flight = vec![0usize; QPS];
    let mut free_slots: Vec<Vec<usize>> = (0..QPS).map(|_| (0..PER_QP).collect()).collect();
    let mut posted = 0u64;
    let mut received = 0u64;
    let mut buf = [Wc::default(); 64];
    let started = Instant::now();
    let mut last_progress = Instant::now();
    while received < total {
        // Post: round-robin over senders while messages remain.
        for q in 0..QPS {
            while posted < total && in_flight[q] < PER_QP {
                let slot = free_slots[q].pop().unwrap();
                let idx = q * PER_QP + slot;
                let mut msg = [0u8; MSG];
                msg[..8].copy_from_slice(&(q as u64).to_le_bytes());
                msg[8..].copy_from_slice(&next_seq[q].to_le_bytes());
                sbuf.write(idx * MSG, &msg).unwrap();
                senders[q]
                    .post_send(&[SendWr::send(idx as u64).sge(&ssges[idx]).signaled()])
                    .unwrap();
                next_seq[q] += 1;
                in_flight[q] += 1;
                posted += 1;
            }
        }
        // Send completions free buffer slots.
        let k = scq.poll(&mut buf).unwrap();
        for w in &buf[..k] {
            assert_eq!(w.status, WcStatus::SUCCESS, "send {w:?}");
            let idx = w.wr_id as usize;
            let q = idx / PER_QP;
            in_flight[q] -= 1;
            free_slots[q].push(idx % PER_QP);
        }
        // Receive completions: check, count, re-post the receive.
        let r = rcq.poll(&mut buf).unwrap();
        for w in &buf[..r] {
            assert_eq!(w.status, WcStatus::SUCCESS, "recv {w:?}");
            assert_eq!(w.byte_len as usize, MSG);
            let slot = w.wr_id as usize;
            let mut msg = [0u8; MSG];
            rbuf.read(slot * MSG, &mut msg).unwrap();
            let q = u64::from_le_bytes(msg[..8].try_into().unwrap()) as usize;
            let seq = u64::from_le_bytes(msg[8..].try_into().unwrap());
            assert!(q < QPS, "garbage sender {q} in slot {slot}");
            assert_eq!(
                qpn_to_sender[&w.qp_num], q,
                "message of sender {q} arrived on another QP's receiver"
            );
            // RC delivers in order per QP: anything else is a loss or a duplicate.
            assert_eq!(seq, expect_seq[q], "sender {q}: lost or duplicated message");
            expect_seq[q] += 1;
            received += 1;
            srq.post_recv(&[RecvWr::new(slot as u64, &rsges[slot])])
                .unwrap();
        }
        if k + r > 0 {
            last_progress = Instant::now();
        } else {
            assert!(
                last_progress.elapsed() < Duration::from_secs(30),
                "no progress for 30 s: {received} of {total} received"
            );
            std::thread::yield_now();
        }
    }
    // Drain the last send completions, then nothing more may arrive.
    let deadline = Instant::now();
    while in_flight.iter().sum::<usize>() > 0 {
        let k = scq.poll(&mut buf).unwrap();
        for w in &buf[..k] {
            assert_eq!(w.status, WcStatus::SUCCESS);
            in_flight[w.wr_id as usize / PER_QP] -= 1;
        }
        assert!(
            deadline.elapsed() < Duration::from_secs(30),
            "sends never completed"
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        rcq.poll(&mut buf).unwrap(),
        0,
        "an extra (duplicated) receive"
    );
    assert_eq!(expect_seq, next_seq, "every sender's messages all arrived");
    eprintln!(
        "{total} messages through one SRQ shared by {QPS} QPs in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    drop((senders, receivers));
}
