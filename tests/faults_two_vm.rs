//! Faults across a real link: two VMs joined by a virtio-net link (the two-VM section of
//! `cargo xtask test`, or `cargo xtask pingpong2`). Not run by the single-VM sections: the
//! harness starts this executable in both VMs with a role and the peer's address.
//!
//! `link_cut_mid_stream_gives_retry_exceeded`: an RC QP pair streams sends from VM A to VM B;
//! A prints the [`CUT_MARKER`] line, on which the harness sets B's link down from outside
//! (qemu's `set_link net0 off` over QMP). A's sender must then see `RETRY_EXC_ERR` as the
//! first error (nothing answers: not even a NAK), every later WR flushed, every posted WR
//! completed exactly once, within a bounded time, and exit cleanly. The QP's `timeout` and
//! `retry_cnt` are short so the retry phase takes about two seconds. B checks that what it
//! received arrived in order, once each, with the right bytes, and gives up waiting for more
//! after a quiet spell.
//!
//! Environment (set by the harness): `UVERBS_TWO_VM_ROLE` = `sender` | `receiver`,
//! `UVERBS_TWO_VM_PEER` = the other VM's IPv4 address.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::two_vm::{self, gid_hex, parse_gid, say};
use uverbs::{
    AccessFlags, Cq, Gid, Qp, QpAttrMask, QpInitAttr, QpState, QpType, RecvWr, SendWr, Wc,
    WcOpcode, WcStatus,
};

/// The line the sender prints when the harness should cut the link (xtask/src/vm.rs).
pub const CUT_MARKER: &str = "UVERBS-CUT-LINK";
/// TCP port for the out-of-band exchange of QP numbers and GIDs.
const PORT: u16 = 18_600;
const MSG: usize = 256;
const WINDOW: usize = 16;
/// Successful sends before the link is cut.
const BEFORE_CUT: u64 = 300;
/// The longest the sender waits for the error after asking for the cut.
const ERROR_DEADLINE: Duration = Duration::from_secs(60);
/// `timeout` 17: 4.096 µs × 2^17 ≈ 0.54 s per try; `retry_cnt` 3: the fourth timeout in a row
/// gives up, about 2 s after the last ACK.
const QP_TIMEOUT: u8 = 17;
const QP_RETRY_CNT: u8 = 3;

fn write_info(stream: &TcpStream, qpn: u32, gid: &Gid) {
    let mut w = stream;
    writeln!(w, "{qpn} {}", gid_hex(gid)).expect("send QP info to the peer");
}

fn read_info(stream: &TcpStream) -> (u32, Gid) {
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .expect("read the peer's QP info");
    let mut it = line.split_whitespace();
    let q = it.next().expect("peer QPN").parse().expect("peer QPN");
    (q, parse_gid(it.next().expect("peer GID")))
}

/// RC INIT -> RTR -> RTS towards the peer, with the short [`QP_TIMEOUT`] and
/// [`QP_RETRY_CNT`]; checks the kernel kept them, since the test's bound depends on them.
fn connect(qp: &mut Qp, remote_qpn: u32, remote_gid: Gid, gid_index: u8) {
    common::rc::rc_connect(
        qp,
        remote_qpn,
        gid_index,
        remote_gid,
        QP_TIMEOUT,
        QP_RETRY_CNT,
    );
    let q = qp
        .query(QpAttrMask::TIMEOUT | QpAttrMask::RETRY_CNT)
        .unwrap();
    assert_eq!(
        (q.attr.timeout, q.attr.retry_cnt),
        (QP_TIMEOUT, QP_RETRY_CNT),
        "the kernel kept other timeout/retry_cnt values"
    );
}

/// Byte `j` of message `seq`.
fn pattern(seq: u64, j: usize) -> u8 {
    (seq as u8).wrapping_mul(31).wrapping_add(j as u8)
}

#[test]
#[ignore = "needs two VMs joined by a link: runs in the two-VM section of cargo xtask test"]
fn link_cut_mid_stream_gives_retry_exceeded() {
    let (role, peer) =
        two_vm::role("the two-VM section of `cargo xtask test` (or `cargo xtask pingpong2`)");
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(256, None, 0).unwrap();
    let cap = common::rc::qp_cap(WINDOW as u32);
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq, cap))
        .unwrap();
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let mut mr = pd.reg_mr(WINDOW * MSG, AccessFlags::LOCAL_WRITE).unwrap();
    let sges: Vec<_> = (0..WINDOW)
        .map(|k| [mr.sge(k * MSG, MSG as u32).unwrap()])
        .collect();
    match role.as_str() {
        "receiver" => {
            eprintln!("receiver: waiting for the sender on port {PORT}");
            let stream = two_vm::control_stream(true, &peer, PORT);
            let (rq, rgid) = read_info(&stream);
            eprintln!("receiver: the sender has QP {rq}");
            connect(&mut qp, rq, rgid, gid_index);
            // Receives posted before the sender learns our QP number: no send meets an
            // empty RQ.
            for (k, sg) in sges.iter().enumerate() {
                qp.post_recv(&[RecvWr::new(k as u64, sg)]).unwrap();
            }
            write_info(&stream, qp.qp_num(), &gid);
            receive_until_quiet(&mut qp, &mut cq, &mr, &sges);
        }
        "sender" => {
            let stream = two_vm::control_stream(false, &peer, PORT);
            write_info(&stream, qp.qp_num(), &gid);
            let (rq, rgid) = read_info(&stream);
            connect(&mut qp, rq, rgid, gid_index);
            send_until_retry_exceeded(&mut qp, &mut cq, &mut mr, &sges);
        }
        other => panic!("UVERBS_TWO_VM_ROLE={other:?}: want sender or receiver"),
    }
    qp.destroy().expect("destroy_qp");
    cq.destroy().expect("destroy_cq");
    mr.dereg().expect("dereg_mr");
    assert_eq!(uverbs::drop_error_count(), 0);
}

fn send_until_retry_exceeded(
    qp: &mut Qp,
    cq: &mut Cq,
    mr: &mut uverbs::Mr,
    sges: &[[uverbs::Sge; 1]],
) {
    let mut next = 0u64;
    let mut free: Vec<usize> = (0..WINDOW).collect();
    let mut completed = vec![0u8; 0];
    let mut buf = [Wc::default(); 32];
    let mut cut_at: Option<Instant> = None;
    let mut first_error: Option<(Wc, Duration)> = None;
    let mut succeeded = 0u64;
    let started = Instant::now();
    loop {
        // Keep the window full until the first error; after it the QP is in ERR and posting
        // more would only produce flushes.
        while first_error.is_none() && !free.is_empty() {
            let k = free.pop().unwrap();
            let msg: Vec<u8> = (0..MSG)
                .map(|j| {
                    if j < 8 {
                        next.to_le_bytes()[j]
                    } else {
                        pattern(next, j)
                    }
                })
                .collect();
            mr.write(k * MSG, &msg).unwrap();
            qp.post_send(&[SendWr::send(next << 8 | k as u64).sge(&sges[k]).signaled()])
                .expect("post_send");
            completed.push(0);
            next += 1;
        }
        let n = cq.poll(&mut buf).expect("poll_cq");
        for w in &buf[..n] {
            let seq = (w.wr_id >> 8) as usize;
            assert!(
                seq < completed.len(),
                "completion for a WR never posted: {w:?}"
            );
            completed[seq] += 1;
            assert_eq!(completed[seq], 1, "WR {seq} completed twice: {w:?}");
            free.push((w.wr_id & 0xff) as usize);
            match (w.status, &first_error) {
                (WcStatus::SUCCESS, None) => {
                    assert_eq!(w.opcode, WcOpcode::SEND);
                    succeeded += 1;
                }
                (WcStatus::SUCCESS, Some(_)) => panic!("a success after the error: {w:?}"),
                (_, None) => {
                    let since = cut_at.map(|t| t.elapsed()).unwrap_or_default();
                    assert!(
                        cut_at.is_some(),
                        "error before the link was cut (after {succeeded} sends): {w:?}"
                    );
                    first_error = Some((*w, since));
                }
                (s, Some(_)) => {
                    assert_eq!(s, WcStatus::WR_FLUSH_ERR, "after the first error: {w:?}")
                }
            }
        }
        if cut_at.is_none() && succeeded >= BEFORE_CUT {
            say(&format!("{CUT_MARKER} after {succeeded} sends"));
            cut_at = Some(Instant::now());
        }
        if first_error.is_some() && free.len() == WINDOW {
            break; // every posted WR has completed
        }
        if let Some(t) = cut_at {
            assert!(
                t.elapsed() < ERROR_DEADLINE,
                "no error completion {ERROR_DEADLINE:?} after the cut ({succeeded} sends done): the QP hangs"
            );
        } else {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "only {succeeded} sends in 120 s before the cut"
            );
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let (w, after) = first_error.unwrap();
    say(&format!(
        "sender: {succeeded} sends succeeded, {} posted; first error {} {} s after the cut request, then {} flushed",
        next,
        w.status,
        after.as_secs_f64(),
        next - succeeded - 1
    ));
    assert_eq!(w.status, WcStatus::RETRY_EXC_ERR, "first error: {w:?}");
    assert!(
        completed.iter().all(|&c| c == 1),
        "a posted WR never completed"
    );
    assert_eq!(
        qp.query(QpAttrMask::STATE).unwrap().attr.qp_state,
        QpState::Err
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        cq.poll(&mut buf).unwrap(),
        0,
        "completions after all WRs completed"
    );
}

fn receive_until_quiet(qp: &mut Qp, cq: &mut Cq, mr: &uverbs::Mr, sges: &[[uverbs::Sge; 1]]) {
    const QUIET: Duration = Duration::from_secs(15);
    let mut expect = 0u64;
    let mut buf = [Wc::default(); 32];
    let mut last = Instant::now();
    let started = Instant::now();
    // The sender's traffic stops when the link is cut; the receiver cannot tell the cut from a
    // slow sender, so it stops after a quiet spell (bounded in any case).
    while last.elapsed() < QUIET || expect == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the receiver got {expect} messages and kept waiting"
        );
        let n = cq.poll(&mut buf).expect("poll_cq");
        for w in &buf[..n] {
            assert_eq!(w.status, WcStatus::SUCCESS, "receive {w:?}");
            assert_eq!(
                (w.opcode, w.byte_len),
                (WcOpcode::RECV, MSG as u32),
                "{w:?}"
            );
            let k = w.wr_id as usize;
            let mut msg = [0u8; MSG];
            mr.read(k * MSG, &mut msg).unwrap();
            let seq = u64::from_le_bytes(msg[..8].try_into().unwrap());
            assert_eq!(seq, expect, "lost, duplicated or reordered message");
            for (j, b) in msg.iter().enumerate().skip(8) {
                assert_eq!(*b, pattern(seq, j), "byte {j} of message {seq}");
            }
            expect += 1;
            qp.post_recv(&[RecvWr::new(k as u64, &sges[k])]).unwrap();
            last = Instant::now();
        }
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    say(&format!(
        "receiver: {expect} messages in order, then {QUIET:?} of silence"
    ));
    assert!(
        expect >= BEFORE_CUT,
        "only {expect} messages before the link went quiet"
    );
}
