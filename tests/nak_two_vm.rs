//! rxe's remote invalid request NAK on a lossy link, reproduced on purpose: the requester's
//! retry resends a write it has not completed as a zero-length WRITE_ONLY, every later packet
//! moves up one PSN, and the responder, meeting a WRITE_LAST where a new message must start,
//! answers with the NAK (docs/reliability.md, "The remote invalid request NAK under loss").
//!
//! Two VMs (`cargo xtask lossy`): the requester posts W1 (an RDMA write of [`W1_PKTS`] packets
//! at MTU 1024) and W2 (four packets) with fixed PSNs. The link is shaped so that one
//! acknowledgement comes at the moment the loss of many would have brought it:
//! - the requester's egress runs at 20 Mbit/s ([`SHAPER`]), so that sending W1 takes about
//!   50 ms;
//! - on the responder's egress (`tc` u32 filters on the BTH opcode, PSN and AETH syndrome), the
//!   ACK of W1's last PSN (l1) is delayed by `D` ms and every other positive ACK is dropped.
//!   NAKs pass.
//!
//! What rxe does then, in the 6.1 and 6.12 sources (`rxe_comp.c`, `rxe_req.c`):
//! 1. No ACK comes back, so the retransmit timer (`timeout` 14: about 67 ms) fires and the
//!    requester resends from W1's first PSN (when it fires differs between the kernels:
//!    [`DELAYS_MS`]).
//! 2. While W1 is mid-resend (state `processing`), the delayed ACK of l1 arrives: the
//!    completer moves its expected PSN to l1 + 1 (`COMPST_UPDATE_COMP`) without completing W1,
//!    which completes only on an ACK of l1 while it is `pending`.
//! 3. Nothing else comes back, so the timer fires again; `req_retry` restarts W1 at
//!    `comp.psn - first_psn` packets in, which is all of it: W1 goes out as a zero-length
//!    WRITE_ONLY at l1 + 1 and W2 at l1 + 2 ..= l1 + 5, one PSN later than before.
//! 4. The responder, which had W1 and W2 whole, takes l1 + 1 ..= l1 + 4 as duplicates and
//!    then meets W2's WRITE_LAST at l1 + 5, a new PSN where a new message must start
//!    (`ERR_MISSING_OPCODE_FIRST`): it NAKs with "invalid request". W1 completes successfully,
//!    W2 with `REM_INV_REQ_ERR`, and both QPs are in the error state.
//!
//! Step 2 needs the ACK inside W1's resend, so the test runs several delays `D` and passes if
//! the NAK comes in at least one and every other attempt missed that window cleanly (W1
//! completed by the ACK of l1, W2 waiting for an ACK); each attempt's outcome is printed. On a lossy link the same
//! thing happens when loss, duplication and reordering line up the same way, which is rare.
//!
//! Environment (set by the harness): `UVERBS_TWO_VM_ROLE` = `requester` | `responder`,
//! `UVERBS_TWO_VM_PEER` = the other VM's address.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::pair::{all_access, cap};
use common::rc::{rc_connect_on, RcPath};
use common::two_vm::{self, gid_hex, parse_gid, say};
use uverbs::{AccessFlags, Cq, Mr, Pd, Qp, QpInitAttr, QpType, SendWr, Wc, WcStatus, WrOp};

/// TCP port of the exchange.
const PORT: u16 = 18_660;
/// Packets of W1 and W2 (1 KiB each at MTU 1024): together within rxe's 128 unacknowledged
/// PSNs, so the requester sends both with no ACK.
const W1_PKTS: u32 = 120;
const W2_PKTS: u32 = 4;
const MTU: u32 = 1024;
/// The requester's egress: a token bucket at 20 Mbit/s, so that W1 (about 130 KB on the wire)
/// takes about 52 ms, inside the 64..68 ms retransmit timeout. A token bucket, not netem's
/// rate: netem orphans a delayed packet, which frees rxe's count of packets in flight, while
/// packets held in a token bucket still count, and rxe's requester stops at 64 of them. It is
/// 16 to 64 packets ahead of the wire, so W1's resend stays `processing` for 24 ms or more.
const SHAPER: &str = "tbf rate 20mbit burst 4kb limit 300kb";
/// The delays tried for the ACK of l1, in ms. It leaves the responder about 53 ms after W1's
/// first packet, and must arrive while the first resend is under way. The requester sends in
/// three bursts (65 packets, 49 more once the token bucket has let 50 out, then the last 10),
/// about 0, 22 and 43 ms after it starts, so W1 is `processing` for about 43 ms from the
/// retry. When the timer fires differs:
/// - 6.1 arms it at a send when it is not pending and pushes it only when an ACK comes, so it
///   fires 64..68 ms after W1's first packet: the ACK must come about 72..107 ms after it
///   (a delay of 19..54 ms);
/// - 6.12 runs the completer after every run of the requester (one send task) and each run
///   pushes the timer, so it fires 64..68 ms after the last burst, about 110 ms after the
///   first packet: the ACK must come about 115..150 ms after it (a delay of 62..97 ms).
///
/// 6.12's window moves with the bursts' timing from run to run, so it gets more tries.
const DELAYS_MS: [u32; 10] = [30, 40, 50, 55, 60, 65, 70, 75, 80, 90];
/// How long the requester waits for W2's completion (the NAK comes within about 300 ms).
const WAIT: Duration = Duration::from_secs(1);

fn tc(args: &str) {
    let out = Command::new("/usr/bin/tc")
        .args(args.split_whitespace())
        .output()
        .expect("running tc");
    assert!(
        out.status.success(),
        "tc {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The responder's egress: the positive ACK of PSN `l1` through `netem delay D`, every other
/// positive ACK dropped, the rest (NAKs, TCP, ARP) as it is.
fn shape_responder(l1: u32, delay_ms: u32) {
    tc("qdisc replace dev eth0 root handle 1: prio bands 3 priomap 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2");
    tc(&format!(
        "qdisc add dev eth0 parent 1:1 handle 10: netem delay {delay_ms}ms"
    ));
    tc("qdisc add dev eth0 parent 1:2 handle 20: netem loss 100%");
    // RoCE v2: UDP port 4791; the BTH starts at byte 28 of the IP packet (opcode 0x11 is the
    // RC ACKNOWLEDGE, the PSN its bytes 9..12), the AETH at byte 40 (syndrome 000xxxxx: ACK).
    let ack = "protocol ip u32 match ip protocol 17 0xff match ip dport 4791 0xffff \
               match u8 0x11 0xff at 28 match u8 0x00 0xe0 at 40";
    tc(&format!(
        "filter add dev eth0 parent 1: prio 1 {ack} match u32 {l1:#x} 0x00ffffff at 36 flowid 1:1"
    ));
    tc(&format!(
        "filter add dev eth0 parent 1: prio 2 {ack} flowid 1:2"
    ));
}

fn unshape() {
    tc("qdisc del dev eth0 root");
}

fn read_line(r: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    r.read_line(&mut line).expect("read from the peer");
    assert!(!line.is_empty(), "the peer closed the connection");
    line.trim().to_string()
}

fn send_line(s: &mut TcpStream, line: &str) {
    s.write_all(format!("{line}\n").as_bytes())
        .expect("write to the peer");
}

/// One attempt's objects (the QP first, so it is destroyed before its CQ).
struct End {
    qp: Qp,
    cq: Cq,
    mr: Mr,
}

impl End {
    fn new(pd: &Pd) -> End {
        let ctx = pd.context();
        let cq = ctx.create_cq(16, None, 0).expect("create_cq");
        let qp = pd
            .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq, cap(4, 1, 0)))
            .expect("create_qp");
        let len = ((W1_PKTS + W2_PKTS) * MTU) as usize;
        let access = all_access() | AccessFlags::REMOTE_WRITE;
        let mr = pd.reg_mr(len, access).expect("reg_mr");
        End { qp, cq, mr }
    }
}

/// What one attempt came to, on the requester.
enum Outcome {
    /// W1 completed successfully and W2 with the NAK (ms after the post).
    Reproduced { w1_ms: u128, w2_ms: u128 },
    /// W1 completed successfully, W2 not within [`WAIT`]: the ACK of l1 came before or after
    /// W1's resend, and completed W1 as it should.
    Missed { w1_ms: Option<u128> },
    /// Anything else.
    Other(String),
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::Reproduced { w1_ms, w2_ms } => format!(
                "reproduced: W1 completed successfully at {w1_ms} ms, W2 with the remote \
                 invalid request NAK at {w2_ms} ms"
            ),
            Outcome::Missed { w1_ms: Some(t) } => format!(
                "missed: W1 completed at {t} ms (the ACK came outside W1's resend), W2 not \
                 within {WAIT:?}"
            ),
            Outcome::Missed { w1_ms: None } => format!("missed: no completion within {WAIT:?}"),
            Outcome::Other(s) => format!("unexpected completions: {s}"),
        }
    }
}

fn requester_attempt(e: &mut End, rkey: u32, raddr: u64) -> Outcome {
    let w1 = [e.mr.sge(0, W1_PKTS * MTU).unwrap()];
    let w2 = [e.mr.sge((W1_PKTS * MTU) as usize, W2_PKTS * MTU).unwrap()];
    let write = |id: u64, off: u64| {
        SendWr::new(
            id,
            WrOp::RdmaWrite {
                remote_addr: raddr + off,
                rkey,
            },
        )
    };
    let t = Instant::now();
    e.qp.post_send(&[
        write(1, 0).sge(&w1).signaled(),
        write(2, u64::from(W1_PKTS * MTU)).sge(&w2).signaled(),
    ])
    .expect("post W1 and W2");
    let mut got: Vec<(Wc, u128)> = vec![];
    let mut wc = [Wc::default(); 2];
    while got.len() < 2 && t.elapsed() < WAIT {
        let n = e.cq.poll(&mut wc).expect("poll");
        for w in &wc[..n] {
            got.push((*w, t.elapsed().as_millis()));
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let find = |id: u64| got.iter().find(|(w, _)| w.wr_id == id);
    match (find(1), find(2)) {
        (Some((a, ta)), Some((b, tb)))
            if a.status == WcStatus::SUCCESS && b.status == WcStatus::REM_INV_REQ_ERR =>
        {
            Outcome::Reproduced {
                w1_ms: *ta,
                w2_ms: *tb,
            }
        }
        (Some((a, ta)), None) if a.status == WcStatus::SUCCESS => {
            Outcome::Missed { w1_ms: Some(*ta) }
        }
        (None, None) => Outcome::Missed { w1_ms: None },
        _ => Outcome::Other(
            got.iter()
                .map(|(w, t)| format!("wr {} {} at {t} ms", w.wr_id, w.status))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// Polls `cq` until `n` completions came or 3 s passed.
fn drain(cq: &mut Cq, n: usize) {
    let t = Instant::now();
    let mut seen = 0;
    let mut wc = [Wc::default(); 4];
    while seen < n && t.elapsed() < Duration::from_secs(3) {
        seen += cq.poll(&mut wc).expect("poll");
    }
}

/// Whether rxe's responder trace (dynamic debug, switched on by the harness) shows the state
/// that answers a WRITE_LAST without a first packet: `None` when there is no trace.
fn responder_traced_missing_first() -> Option<bool> {
    // Read and cleared at once (busybox's dmesg has -c, not -C).
    let out = Command::new("dmesg").arg("-c").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !text.contains("state = ") {
        return None;
    }
    Some(text.contains("ERR_MISSING_OPCODE_FIRST"))
}

#[test]
#[ignore = "needs two VMs: runs in cargo xtask lossy (part of cargo xtask test)"]
fn rxe_requester_resends_an_uncompleted_write_as_zero_length_and_draws_the_invalid_request_nak() {
    let (role, peer) =
        two_vm::role("the lossy-link pair of `cargo xtask lossy` (part of `cargo xtask test`)");
    let requester = role == "requester";
    assert!(
        requester || role == "responder",
        "UVERBS_TWO_VM_ROLE={role:?}"
    );
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let mut stream = two_vm::control_stream(!requester, &peer, PORT);
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut outcomes = vec![];
    for (k, &delay) in DELAYS_MS.iter().enumerate() {
        // A PSN range of its own per attempt: a late packet of the one before cannot match.
        let psn = 0x10_000 * (k as u32 + 1);
        let l1 = psn + W1_PKTS - 1;
        let mut e = End::new(&pd);
        send_line(
            &mut stream,
            &format!(
                "{} {} {} {}",
                e.qp.qp_num(),
                gid_hex(&gid),
                e.mr.rkey(),
                e.mr.addr()
            ),
        );
        let line = read_line(&mut r);
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 4, "peer line {line:?}");
        let (rqpn, rgid) = (f[0].parse().unwrap(), parse_gid(f[1]));
        let (rkey, raddr): (u32, u64) = (f[2].parse().unwrap(), f[3].parse().unwrap());
        // Timeout 14 (about 67 ms) and retry_cnt 7, unlimited on rxe: the timer retries until
        // something answers.
        let path = RcPath {
            timeout: 14,
            retry_cnt: 7,
            psn,
            access: all_access(),
        };
        rc_connect_on(&mut e.qp, rqpn, gid_index, rgid, &path);
        if requester {
            assert_eq!(read_line(&mut r), "shaped");
            tc(&format!("qdisc replace dev eth0 root {SHAPER}"));
            let outcome = requester_attempt(&mut e, rkey, raddr);
            unshape();
            send_line(&mut stream, "done");
            assert_eq!(read_line(&mut r), "unshaped");
            // A missed attempt's W2 completes once the responder's ACKs pass again.
            if matches!(outcome, Outcome::Missed { w1_ms: Some(_) }) {
                drain(&mut e.cq, 1);
            }
            let traced = read_line(&mut r);
            say(&format!(
                "nak-repro: ACK of l1 = {l1:#x} delayed {delay} ms: {}; responder: {traced}",
                outcome.describe()
            ));
            outcomes.push((delay, outcome));
        } else {
            shape_responder(l1, delay);
            send_line(&mut stream, "shaped");
            assert_eq!(read_line(&mut r), "done");
            unshape();
            send_line(&mut stream, "unshaped");
            let traced = match responder_traced_missing_first() {
                None => "not traced".to_string(),
                Some(true) => "rxe's responder went through ERR_MISSING_OPCODE_FIRST".to_string(),
                Some(false) => "no ERR_MISSING_OPCODE_FIRST in rxe's trace".to_string(),
            };
            send_line(&mut stream, &traced);
        }
        send_line(&mut stream, "next");
        assert_eq!(read_line(&mut r), "next");
    }
    if requester {
        let hits = outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Reproduced { .. }))
            .count();
        let odd: Vec<String> = outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Other(_)))
            .map(|(d, o)| format!("{d} ms: {}", o.describe()))
            .collect();
        assert!(odd.is_empty(), "attempts outside the model: {odd:?}");
        say(&format!(
            "nak-repro: {hits} of {} attempts drew the remote invalid request NAK",
            outcomes.len()
        ));
        assert!(
            hits > 0,
            "rxe's requester did not draw the invalid request NAK in any attempt: {}. \
             If the kernel's retry no longer resends an uncompleted write from past its end \
             (rxe_req.c, req_retry), docs/reliability.md must say so.",
            outcomes
                .iter()
                .map(|(d, o)| format!("{d} ms: {}", o.describe()))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}
