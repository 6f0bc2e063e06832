//! The driver `cargo xtask bench --host` runs under `valgrind --tool=callgrind`: one phase,
//! `n` operations, nothing else variable. xtask runs each phase with `n` and `2n` operations;
//! the difference of the two instruction totals divided by `n` is the cost of one operation
//! with set-up, teardown and the device model's work cancelled out.
//!
//! Usage: `ring_counts PHASE N` with PHASE one of
//! - `efa-post`: N `post_send` calls of one SEND each (queue deep enough, nothing completes);
//! - `efa-post-list`: N SENDs posted in lists of 32;
//! - `efa-poll`: 2048 SENDs posted and moved by the model, then N completions polled 16 at a
//!   time (the post and model work is the same for every N);
//! - `efa-poll-one`: the same, one completion per `poll` call (what the extended poll on EFA
//!   cost before it had its own cursor: a `poll` of one per `start_poll`/`next_poll`);
//! - `efa-start-poll`: the same 2048, then N completions drained through the extended poll:
//!   one `start_poll`, `wr_id` and `status` read of each, `next_poll` to the N-th, `end_poll`;
//! - `efa-post-64`, `efa-poll-64`, `efa-poll-one-64`: `efa-post`, `efa-poll` and
//!   `efa-poll-one` on devices with `EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID` (the wr_id
//!   travels in the WQE, no id pool; `efa-poll-one-64` is not in `cargo xtask bench`'s
//!   table, rdma-core 44 having no such mode);
//! - `rxe-post`, `rxe-post-list`, `rxe-poll`, `rxe-poll-one`, `rxe-start-poll`: the same five
//!   on rxe, as `xtask/bench-c/count.c` does them with rdma-core: an RC QP 4096 deep
//!   (`sq_sig_all`), a signaled 8-byte RDMA WRITE with one SGE, CQs of 4096, on the stand-in
//!   rxe kernel of `testing/rxe-standin` (the send doorbell goes to `/dev/null`); for the poll
//!   phases the stand-in does the kernel's part (consumes the 2048 WQEs and writes their CQEs).

#[path = "common.rs"]
mod common;
#[path = "rxe_common.rs"]
mod rxe_common;

use uverbs::{Wc, WcStatus};

const DEPTH: u32 = 4096;
const POSTED: u32 = 2048;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (phase, n) = match args.as_slice() {
        [p, n] => (p.as_str(), n.parse::<u32>().expect("N is a number")),
        _ => {
            eprintln!(
                "usage: ring_counts {{efa,rxe}}-{{post,post-list,poll,poll-one,start-poll}} N | efa-{{post,poll,poll-one}}-64 N"
            );
            std::process::exit(2);
        }
    };
    assert!(n <= POSTED, "N at most {POSTED}");
    if let Some(rxe_phase) = phase.strip_prefix("rxe-") {
        return rxe(rxe_phase, n);
    }
    let (mut p, w) = match phase.strip_suffix("-64") {
        Some(_) => common::Pair::new_64bit_ids(DEPTH),
        None => common::Pair::new(DEPTH),
    };
    match phase {
        "efa-post" | "efa-post-64" => {
            let wr = [w.send()];
            for _ in 0..n {
                p.a.qp.post_send(std::hint::black_box(&wr)).unwrap();
            }
        }
        "efa-post-list" => {
            let wrs = [w.send(); 32];
            assert_eq!(n % 32, 0, "N a multiple of 32");
            for _ in 0..n / 32 {
                p.a.qp.post_send(std::hint::black_box(&wrs)).unwrap();
            }
        }
        "efa-poll" | "efa-poll-one" | "efa-poll-64" | "efa-poll-one-64" => {
            complete_all(&mut p, &w);
            let per_call = if phase.starts_with("efa-poll-one") {
                1
            } else {
                16
            };
            let mut wcs = [Wc::default(); 16];
            poll_loop(n, per_call, |wcs| p.a.scq.poll(wcs).unwrap(), &mut wcs);
        }
        "efa-start-poll" => {
            complete_all(&mut p, &w);
            let mut sum = 0u64;
            let mut bad = 0u32;
            let mut got = 0;
            if n > 0 {
                let mut g = p.a.scq.start_poll().unwrap().expect("completions ready");
                loop {
                    // As count.c's loop: plain reads summed, checked after the loop (every
                    // value is used, so no read can be left out; no `black_box`, whose store
                    // and reload count.c does not do).
                    sum = sum.wrapping_add(g.wr_id());
                    bad += u32::from(g.status() != WcStatus::SUCCESS);
                    got += 1;
                    if got == n {
                        break;
                    }
                    assert!(g.next_poll().unwrap(), "completions ready");
                }
                g.end_poll();
            }
            // Every send was posted with wr_id 1 and succeeded.
            assert_eq!((sum, bad), (u64::from(n), 0));
        }
        other => {
            eprintln!("unknown phase {other}");
            std::process::exit(2);
        }
    }
}

/// Posts 2048 receives on b and 2048 SENDs on a, and lets the model complete them all: the
/// same work for every N, so it cancels out of the count.
fn complete_all(p: &mut common::Pair, w: &common::Wrs) {
    let recvs = [w.recv(); 32];
    let sends = [w.send(); 32];
    for _ in 0..POSTED / 32 {
        p.b.qp.post_recv(&recvs).unwrap();
        p.a.qp.post_send(&sends).unwrap();
    }
    assert_eq!(p.fab.process(), POSTED as usize);
}

/// The rxe phases (`phase` without its `rxe-` prefix).
fn rxe(phase: &str, n: u32) {
    let (mut r, sge) = rxe_common::Rxe::new(DEPTH);
    let wr = r.write(&sge);
    match phase {
        "post" => {
            let wr = [wr];
            for _ in 0..n {
                r.qp.post_send(std::hint::black_box(&wr)).unwrap();
            }
        }
        "post-list" => {
            let wrs = [wr; 32];
            assert_eq!(n % 32, 0, "N a multiple of 32");
            for _ in 0..n / 32 {
                r.qp.post_send(std::hint::black_box(&wrs)).unwrap();
            }
        }
        "poll" | "poll-one" => {
            rxe_complete_all(&mut r, wr);
            let per_call = if phase == "poll" { 16 } else { 1 };
            let mut wcs = [Wc::default(); 16];
            poll_loop(n, per_call, |wcs| r.scq.poll(wcs).unwrap(), &mut wcs);
        }
        "start-poll" => {
            rxe_complete_all(&mut r, wr);
            let mut sum = 0u64;
            let mut bad = 0u32;
            let mut got = 0;
            if n > 0 {
                let mut g = r.scq.start_poll().unwrap().expect("completions ready");
                loop {
                    // As count.c's loop: plain reads summed, checked after the loop (every
                    // value is used, so no read can be left out; no `black_box`, whose store
                    // and reload count.c does not do).
                    sum = sum.wrapping_add(g.wr_id());
                    bad += u32::from(g.status() != WcStatus::SUCCESS);
                    got += 1;
                    if got == n {
                        break;
                    }
                    assert!(g.next_poll().unwrap(), "completions ready");
                }
                g.end_poll();
            }
            assert_eq!((sum, bad), (u64::from(n), 0));
        }
        other => {
            eprintln!("unknown phase rxe-{other}");
            std::process::exit(2);
        }
    }
}

/// Posts 2048 WRITEs in lists of 32 and lets the stand-in kernel consume them all and write
/// their CQEs, as count.c's `complete_all` does for rdma-core: the same for every N.
fn rxe_complete_all(r: &mut rxe_common::Rxe, wr: uverbs::SendWr<'_>) {
    let wrs = [wr; 32];
    for _ in 0..POSTED / 32 {
        r.qp.post_send(&wrs).unwrap();
    }
    let qpn = r.qp.qp_num();
    assert_eq!(r.kernel.complete_sends(qpn), Ok(POSTED as usize));
}

/// The counted loop of the `poll` phases, count.c's: `per_call` completions asked for in
/// every call (N is a multiple of it), into the same slots, the count tested, until N are
/// taken. `per_call` is hidden from the compiler once, before the loop (as count.c's is a
/// run-time value): the provider's dispatch on the slice length stays a test per call.
/// Afterwards (as count.c does) the last call's completions are checked.
#[inline(always)]
fn poll_loop(
    n: u32,
    per_call: usize,
    mut poll: impl FnMut(&mut [Wc]) -> usize,
    wcs: &mut [Wc; 16],
) {
    let per_call = std::hint::black_box(per_call);
    assert_eq!(n as usize % per_call, 0, "N a multiple of {per_call}");
    let wcs = &mut wcs[..per_call];
    let mut got = 0;
    while got < n as usize {
        let m = poll(wcs);
        assert!(m == per_call, "completions ready");
        got += m;
    }
    if n > 0 {
        for wc in wcs.iter() {
            assert_eq!((wc.wr_id, wc.status), (1, WcStatus::SUCCESS));
        }
    }
}
