//! How an RC QP reports a dead peer, and how a program should read it.
//!
//! Two QPs on one device are connected; a few messages go through. Then the peer vanishes:
//! its QP is destroyed, as the kernel does when a process dies, so the device drops what is
//! sent to it and acknowledges nothing. The sender has a short retry policy (`timeout` 12,
//! about 17 ms per try; `retry_cnt` 2), so its device gives up quickly.
//!
//! What comes out of the sender's CQ, and what the program does with it:
//! - the send whose retries ran out completes with `RETRY_EXC_ERR` ("transport retry counter
//!   exceeded"): **that** is the cause, and the QP is now in the error state;
//! - everything else posted on the QP (later sends, every receive) completes with
//!   `WR_FLUSH_ERR`: those requests never ran. A flush says *that* the QP failed, never *why*,
//!   and it can come out before the cause (another CQ, or the receive queue flushed first), so
//!   the program keeps polling for the error that is not a flush before it reports;
//! - the QP's state reads `ERR`; to talk to a new peer, reset it (or make a new one).
//!
//! Run it where there is an RDMA device, e.g. in the project's soft-RoCE VM:
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-linux-musl --example rc_dead_peer
//! cargo xtask vm --test-exe target/x86_64-unknown-linux-musl/release/examples/rc_dead_peer \
//!     -- /tests/rc_dead_peer
//! ```

mod common;

use std::time::{Duration, Instant};

use common::{wait_completions, Result};
use uverbs::{
    AccessFlags, GidQuery, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Wc,
    WcStatus,
};

fn main() -> std::process::ExitCode {
    common::exit("rc_dead_peer", run())
}

/// How long the sender waits for its device to give up on the dead peer.
const GIVE_UP: Duration = Duration::from_secs(20);

/// The whole example; `Ok` when the dead peer was reported by its cause.
pub fn run() -> Result<()> {
    let ctx = common::open_rxe()?;
    let pd = ctx.alloc_pd()?;
    let mut cq_a = ctx.create_cq(64, None, 0)?;
    let mut cq_b = ctx.create_cq(64, None, 0)?;
    let cap = QpCap {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a, &cq_a, cap))?;
    let mut b = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_b, &cq_b, cap))?;
    // Connected by hand: `a`'s move to RTS sets the retry policy, which decides how long a
    // dead peer takes to notice: each try waits 4.096 µs * 2^timeout, and the send fails
    // after retry_cnt retries (plus the first try). (The policy is set on the move to RTS;
    // RTS -> RTS may not change it.)
    let local = ctx.find_gid(1, &GidQuery::Any)?;
    let (gid_index, gid) = (local.gid_index as u8, local.gid);
    common::to_init(&mut a, AccessFlags::LOCAL_WRITE)?;
    common::to_init(&mut b, AccessFlags::LOCAL_WRITE)?;
    let (an, bn) = (a.qp_num(), b.qp_num());
    common::to_rtr(&mut a, bn, gid_index, gid)?;
    common::to_rtr(&mut b, an, gid_index, gid)?;
    common::to_rts_retrying(&mut a, 12, 2)?;
    common::to_rts(&mut b)?;
    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
    let sge = [mr.sge(0, 64)?];
    let rsge = [mr.sge(1024, 64)?];

    // While the peer lives: three messages.
    b.post_recv(&[
        RecvWr::new(0, &rsge),
        RecvWr::new(1, &rsge),
        RecvWr::new(2, &rsge),
    ])?;
    for i in 0..3 {
        a.post_send(&[SendWr::send(i).sge(&sge).signaled()])?;
    }
    wait_completions(&mut cq_a, 3)?;
    wait_completions(&mut cq_b, 3)?;
    println!("3 messages delivered; now the peer's QP goes away");

    // The peer vanishes.
    // (A failed destroy hands the QP back with the error; here only the error is kept.)
    b.destroy().map_err(|e| e.into_parts().1)?;

    // Four receives and four sends outstanding on `a` when it fails.
    a.post_recv(&[
        RecvWr::new(100, &rsge),
        RecvWr::new(101, &rsge),
        RecvWr::new(102, &rsge),
        RecvWr::new(103, &rsge),
    ])?;
    for i in 10..14 {
        a.post_send(&[SendWr::send(i).sge(&sge).signaled()])?;
    }

    // Poll until all eight completed; the cause is the first error that is not a flush.
    let start = Instant::now();
    let mut cause: Option<Wc> = None;
    let mut flushed = 0;
    let mut done = 0;
    let mut wcs = [Wc::default(); 16];
    while done < 8 {
        let n = cq_a.poll(&mut wcs)?;
        for wc in &wcs[..n] {
            done += 1;
            match wc.status {
                WcStatus::WR_FLUSH_ERR => flushed += 1,
                WcStatus::SUCCESS => {
                    return Err(format!("wr {} succeeded with no peer", wc.wr_id).into())
                }
                _ if cause.is_none() => cause = Some(*wc),
                _ => return Err(format!("a second error: wr {} {}", wc.wr_id, wc.status).into()),
            }
        }
        if n == 0 {
            if start.elapsed() > GIVE_UP {
                return Err(format!("only {done} of 8 completions within {GIVE_UP:?}").into());
            }
            std::thread::yield_now();
        }
    }
    let cause = cause.ok_or("every completion was a flush: nothing said why")?;
    println!(
        "the peer is gone: wr {} failed with {} after {:.2} s ({}); {flushed} more flushed",
        cause.wr_id,
        cause.status,
        start.elapsed().as_secs_f64(),
        cause.status.meaning().unwrap_or("")
    );
    if cause.status != WcStatus::RETRY_EXC_ERR || cause.wr_id != 10 {
        return Err(format!("expected wr 10 to fail with RETRY_EXC_ERR, got {cause:?}").into());
    }
    if flushed != 7 {
        return Err(format!("expected 7 flushed, got {flushed}").into());
    }
    let state = a.query(QpAttrMask::STATE)?.attr.qp_state;
    println!("the QP is now in state {state:?}");
    if state != QpState::Err {
        return Err(format!("the QP is in {state:?}, not ERR").into());
    }
    Ok(())
}
