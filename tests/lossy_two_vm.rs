//! The library's RC, UC, UD and SRQ paths on a bad link: two VMs whose `eth0`s drop,
//! duplicate and reorder packets (`tc netem`, set up by `cargo xtask lossy`). A sender streams
//! numbered, patterned messages over each kind in turn; the receiver checks every delivered
//! byte and counts.
//!
//! - RC and RC with an SRQ deliver every message exactly once, in order, whole, and every
//!   send succeeds: the transport retries what the link loses.
//! - UC and UD may lose messages (and UD, which has no sequence numbers, may deliver a
//!   duplicated one twice), but a delivered message is never corrupted or partial: its length
//!   and every byte are checked.
//!
//! The counts are printed for docs/reliability.md. Environment (set by the harness):
//! `UVERBS_TWO_VM_ROLE` = `sender` | `receiver`, `UVERBS_TWO_VM_PEER` = the other VM's address.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::pair::{to_init, to_rtr, to_rts, QKEY};
use common::two_vm::{self, gid_hex, parse_gid, say};
use uverbs::{
    AccessFlags, AhAttr, Cq, Gid, Mr, Pd, Qp, QpInitAttr, QpType, RecvWr, SendWr, Sge, Srq, Wc,
    WcOpcode, WcStatus,
};

/// TCP port for the exchange and the per-kind handshakes.
const PORT: u16 = 18_650;
/// Messages per kind.
const COUNT: u64 = 400;
/// Sends in flight.
const WINDOW: usize = 16;
/// Receives posted per kind.
const RECVS: usize = 128;
/// Message sizes: three packets at MTU 1024 for the connected kinds (a lost middle packet
/// must not leave a partial message), one for UD.
const SIZE: usize = 3000;
const UD_SIZE: usize = 1000;
/// UD receives start with the 40-byte GRH.
const GRH: usize = 40;
/// How long the receiver waits, after the sender said it is done, for stragglers.
const QUIET: Duration = Duration::from_secs(3);
/// A bound on each kind's whole run.
const KIND_LIMIT: Duration = Duration::from_secs(240);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Rc,
    Uc,
    Ud,
    RcSrq,
}

const KINDS: [Kind; 4] = [Kind::Rc, Kind::Uc, Kind::Ud, Kind::RcSrq];

impl Kind {
    fn qp_type(self) -> QpType {
        match self {
            Kind::Rc | Kind::RcSrq => QpType::Rc,
            Kind::Uc => QpType::Uc,
            Kind::Ud => QpType::Ud,
        }
    }
    fn size(self) -> usize {
        if self == Kind::Ud {
            UD_SIZE
        } else {
            SIZE
        }
    }
    /// Whether the transport must deliver everything, once, in order.
    fn reliable(self) -> bool {
        matches!(self, Kind::Rc | Kind::RcSrq)
    }
}

/// Byte `j` (>= 8) of message `seq`.
fn pattern(seq: u64, j: usize) -> u8 {
    (seq as u8)
        .wrapping_mul(29)
        .wrapping_add((j as u8).wrapping_mul(7))
        ^ 0x5a
}

fn message(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| {
            if j < 8 {
                seq.to_le_bytes()[j]
            } else {
                pattern(seq, j)
            }
        })
        .collect()
}

fn read_line(r: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    r.read_line(&mut line).expect("read from the peer");
    assert!(!line.is_empty(), "the peer closed the connection");
    line.trim().to_string()
}

/// One kind's objects on one side.
struct End {
    kind: Kind,
    qp: Qp,
    cq: Cq,
    srq: Option<Srq>,
    mr: Mr,
}

impl End {
    fn new(pd: &Pd, kind: Kind, receiver: bool) -> End {
        let ctx = pd.context();
        let cq = ctx.create_cq(256, None, 0).expect("create_cq");
        let srq = (receiver && kind == Kind::RcSrq).then(|| common::srq(pd, RECVS as u32));
        let cap = common::pair::cap(RECVS as u32, 1, 0);
        let mut attr = QpInitAttr::new(kind.qp_type(), &cq, &cq, cap);
        if let Some(s) = &srq {
            attr.srq = Some(s);
            attr.cap.max_recv_wr = 0;
        }
        let mut qp = pd.create_qp(&attr).expect("create_qp");
        to_init(&mut qp);
        let slot = kind.size() + GRH;
        let slots = if receiver { RECVS } else { WINDOW };
        let mr = pd
            .reg_mr(slots * slot, AccessFlags::LOCAL_WRITE)
            .expect("reg_mr");
        End {
            kind,
            qp,
            cq,
            srq,
            mr,
        }
    }

    fn slot(&self) -> usize {
        self.kind.size() + GRH
    }

    fn sge(&self, k: usize, len: usize) -> Sge {
        self.mr.sge(k * self.slot(), len as u32).expect("sge")
    }

    fn post_recv(&mut self, k: usize) {
        let len = self.kind.size() + if self.kind == Kind::Ud { GRH } else { 0 };
        let sge = [self.sge(k, len)];
        let wr = [RecvWr::new(k as u64, &sge)];
        match &mut self.srq {
            Some(s) => s.post_recv(&wr).expect("post_srq_recv"),
            None => self.qp.post_recv(&wr).expect("post_recv"),
        }
    }

    fn connect(&mut self, remote_qpn: u32, gid_index: u8, gid: Gid) {
        to_rtr(&mut self.qp, remote_qpn, gid_index, gid);
        to_rts(&mut self.qp);
    }
}

/// What the receiver saw of one kind.
#[derive(Default, Debug)]
struct Counts {
    delivered: u64,
    duplicated: u64,
    /// Arrived after a message sent later.
    reordered: u64,
    corrupted: u64,
    partial: u64,
}

#[test]
#[ignore = "needs two VMs joined by a lossy link: runs in cargo xtask lossy (part of cargo xtask test)"]
fn lossy_link_rc_delivers_everything_once_and_uc_ud_never_a_partial_message() {
    let (role, peer) =
        two_vm::role("the lossy-link pair of `cargo xtask lossy` (part of `cargo xtask test`)");
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let receiver = role == "receiver";
    assert!(receiver || role == "sender", "UVERBS_TWO_VM_ROLE={role:?}");
    let mut ends: Vec<End> = KINDS.iter().map(|&k| End::new(&pd, k, receiver)).collect();
    let mine: Vec<String> = ends.iter().map(|e| e.qp.qp_num().to_string()).collect();
    let my_line = format!("{} {}\n", mine.join(" "), gid_hex(&gid));
    let stream = two_vm::control_stream(receiver, &peer, PORT);
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    if receiver {
        // Receives first, so no send meets an empty queue.
        for e in ends.iter_mut() {
            for k in 0..RECVS {
                e.post_recv(k);
            }
        }
    }
    w.write_all(my_line.as_bytes()).unwrap();
    let theirs = read_line(&mut r);
    let f: Vec<&str> = theirs.split_whitespace().collect();
    assert_eq!(f.len(), 5, "peer line {theirs:?}");
    let rgid = parse_gid(f[4]);
    let rqpns: Vec<u32> = f[..4].iter().map(|s| s.parse().unwrap()).collect();
    for (e, &q) in ends.iter_mut().zip(&rqpns) {
        e.connect(q, gid_index, rgid);
    }
    // Both sides connected before the first message.
    w.write_all(b"ready\n").unwrap();
    assert_eq!(read_line(&mut r), "ready");
    let mut failures = vec![];
    for (e, &rq) in ends.iter_mut().zip(&rqpns) {
        if receiver {
            let c = receive(e, &mut r);
            say(&format!(
                "lossy {:?}: {COUNT} sent, {} delivered ({} lost), {} duplicated, {} reordered, \
                 {} corrupted, {} partial",
                e.kind,
                c.delivered,
                COUNT.saturating_sub(c.delivered - c.duplicated),
                c.duplicated,
                c.reordered,
                c.corrupted,
                c.partial
            ));
            if c.corrupted != 0 || c.partial != 0 {
                failures.push(format!(
                    "{:?}: corrupted or partial messages: {c:?}",
                    e.kind
                ));
            }
            if e.kind.reliable() && (c.delivered != COUNT || c.duplicated != 0 || c.reordered != 0)
            {
                failures.push(format!("{:?} is reliable but: {c:?}", e.kind));
            }
            if c.delivered == 0 {
                failures.push(format!("{:?}: nothing delivered", e.kind));
            }
            w.write_all(b"next\n").unwrap();
        } else {
            let ah = (e.kind == Kind::Ud).then(|| {
                pd.create_ah(&AhAttr::roce(rgid, gid_index, 1))
                    .expect("create_ah")
            });
            send(e, ah.as_ref().map(|a| (a, rq)));
            writeln!(w, "sent {:?}", e.kind).unwrap();
            assert_eq!(read_line(&mut r), "next");
        }
    }
    drop(ends);
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(uverbs::drop_error_count(), 0);
}

/// Sends [`COUNT`] messages with [`WINDOW`] in flight; every send must succeed (UC and UD
/// complete locally; RC once acknowledged).
fn send(e: &mut End, ud: Option<(&uverbs::Ah, u32)>) {
    let len = e.kind.size();
    let mut free: Vec<usize> = (0..WINDOW).collect();
    let (mut next, mut done) = (0u64, 0u64);
    let mut wcs = [Wc::default(); 32];
    let t = Instant::now();
    while done < COUNT {
        while next < COUNT && !free.is_empty() {
            let k = free.pop().unwrap();
            e.mr.write(k * e.slot(), &message(next, len)).unwrap();
            let sge = [e.sge(k, len)];
            let mut wr = SendWr::send(k as u64).sge(&sge).signaled();
            if let Some((ah, qpn)) = ud {
                wr = wr.ud(ah, qpn, QKEY);
            }
            e.qp.post_send(&[wr]).expect("post_send");
            next += 1;
        }
        let n = e.cq.poll(&mut wcs).expect("poll_cq");
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WcStatus::SUCCESS, "{:?} send: {wc:?}", e.kind);
            free.push(wc.wr_id as usize);
            done += 1;
        }
        assert!(
            t.elapsed() < KIND_LIMIT,
            "{:?}: {done} of {COUNT} sends in {KIND_LIMIT:?}",
            e.kind
        );
        if n == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    say(&format!(
        "lossy {:?}: {COUNT} sent in {:.1} s",
        e.kind,
        t.elapsed().as_secs_f64()
    ));
}

/// Receives until the sender said it is done and [`QUIET`] passed with nothing more, checking
/// every message.
fn receive(e: &mut End, r: &mut BufReader<TcpStream>) -> Counts {
    let len = e.kind.size();
    let off = if e.kind == Kind::Ud { GRH } else { 0 };
    let mut c = Counts::default();
    let mut seen = vec![false; COUNT as usize];
    let mut highest: Option<u64> = None;
    let mut wcs = [Wc::default(); 32];
    let t = Instant::now();
    // The sender's "sent" line arrives on the TCP stream; read it without blocking the poll.
    let (tx, rx) = std::sync::mpsc::channel();
    let mut reader = r.get_ref().try_clone().unwrap();
    let th = std::thread::spawn(move || {
        let mut b = [0u8; 1];
        let mut line = Vec::new();
        while reader.read_exact_byte(&mut b) {
            if b[0] == b'\n' {
                break;
            }
            line.push(b[0]);
        }
        let _ = tx.send(String::from_utf8_lossy(&line).to_string());
    });
    let mut sent_at: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        if sent_at.is_none() {
            if let Ok(l) = rx.try_recv() {
                assert!(l.starts_with("sent"), "sender said {l:?}");
                sent_at = Some(Instant::now());
            }
        }
        let n = e.cq.poll(&mut wcs).expect("poll_cq");
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WcStatus::SUCCESS, "{:?} receive: {wc:?}", e.kind);
            assert_eq!(wc.opcode, WcOpcode::RECV);
            let k = wc.wr_id as usize;
            if wc.byte_len as usize != len + off {
                c.partial += 1;
            } else {
                let mut m = vec![0u8; len];
                e.mr.read(k * e.slot() + off, &mut m).unwrap();
                let seq = u64::from_le_bytes(m[..8].try_into().unwrap());
                let ok = seq < COUNT
                    && m[8..]
                        .iter()
                        .enumerate()
                        .all(|(j, &b)| b == pattern(seq, j + 8));
                if !ok {
                    c.corrupted += 1;
                } else {
                    c.delivered += 1;
                    if seen[seq as usize] {
                        c.duplicated += 1;
                    } else {
                        seen[seq as usize] = true;
                    }
                    if highest.is_some_and(|h| seq < h) {
                        c.reordered += 1;
                    }
                    highest = highest.max(Some(seq));
                }
            }
            e.post_recv(k);
            last = Instant::now();
        }
        if let Some(s) = sent_at {
            if s.elapsed() >= QUIET && last.elapsed() >= QUIET {
                break;
            }
        }
        assert!(
            t.elapsed() < KIND_LIMIT,
            "{:?}: receiving for {KIND_LIMIT:?}: {c:?}",
            e.kind
        );
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    th.join().unwrap();
    c
}

/// `read_exact` of one byte as a bool (false at EOF or on an error).
trait ReadByte {
    fn read_exact_byte(&mut self, b: &mut [u8; 1]) -> bool;
}

impl ReadByte for TcpStream {
    fn read_exact_byte(&mut self, b: &mut [u8; 1]) -> bool {
        use std::io::Read;
        self.read_exact(b).is_ok()
    }
}
