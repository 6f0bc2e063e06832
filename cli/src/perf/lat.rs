//! The latency tests (`ib_{send,write,read}_lat`): one message in flight, a time stamp per
//! iteration.

use uverbs::{RecvWr, SendWr, Wc, WrOp};

use super::cycles::CycleClock;
use super::fail;
use super::options::Settings;
use super::poll::{data_wr, poll_one};
use super::side::{Dest, Side};
use crate::Failure;

/// `ib_send_lat`: ping-pong SENDs; a sample is half a round trip.
pub(super) fn run_send_lat(
    side: &mut Side,
    set: &Settings,
    client: bool,
    recv_wrs: &[RecvWr<'_>],
) -> Result<Vec<u64>, Failure> {
    let sge = [side.mr.sge(0, set.size).map_err(fail("send SGE"))?];
    let inline = vec![0u8; set.size as usize];
    let wr = [data_wr(set, WrOp::Send, &sge, &inline).signaled()];
    let mut stamps = vec![0u64; set.iters as usize];
    let mut wc = [Wc::default()];
    let clock = CycleClock::start();
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    while scnt < set.iters || rcnt < set.iters {
        if rcnt < set.iters && !(scnt < 1 && client) {
            poll_one(
                &mut side.recv_cq,
                side.channel.as_ref(),
                &side.ctx,
                &mut side.idle,
                &mut wc,
                "receive",
            )?;
            rcnt += 1;
            side.qp
                .post_recv(&recv_wrs[..1])
                .map_err(fail("Couldn't post receive"))?;
        }
        if scnt < set.iters {
            stamps[scnt as usize] = clock.stamp();
            side.qp.post_send(&wr).map_err(fail("Couldn't post send"))?;
            scnt += 1;
            poll_one(
                &mut side.send_cq,
                side.channel.as_ref(),
                &side.ctx,
                &mut side.idle,
                &mut wc,
                "send",
            )?;
        }
    }
    Ok(samples(clock, stamps, 2))
}

/// `ib_write_lat`: ping-pong RDMA WRITEs; each side spins on the last byte of its buffer.
/// As in perftest's `run_iter_lat_write`, the server writes first (in `ib_send_lat` the
/// client sends first): the client, whose samples are reported, starts by waiting.
pub(super) fn run_write_lat(
    side: &mut Side,
    set: &Settings,
    client: bool,
    rem: &Dest,
) -> Result<Vec<u64>, Failure> {
    let size = set.size.max(1) as usize;
    // The peer writes into [0, size) and we spin on its last byte; our own message (and its
    // mark) is sent from [size, 2 * size), so we never see our own mark.
    let sge = [side.mr.sge(size, size as u32).map_err(fail("write SGE"))?];
    let mut inline = vec![0u8; size];
    let op = WrOp::RdmaWrite {
        remote_addr: rem.addr,
        rkey: rem.rkey,
    };
    let mut stamps = vec![0u64; set.iters as usize];
    let mut wc = [Wc::default()];
    let mut last = [0u8];
    let clock = CycleClock::start();
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    while scnt < set.iters || rcnt < set.iters {
        if rcnt < set.iters && (client || scnt >= 1) {
            rcnt += 1;
            let want = rcnt as u8;
            loop {
                // The peer's RDMA write lands behind the compiler's back: the fence keeps the
                // load in the loop (it orders this read after the previous iteration's).
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                side.mr
                    .read(size - 1, &mut last)
                    .map_err(fail("reading the buffer"))?;
                if last[0] == want {
                    side.idle.progress();
                    break;
                }
                crate::removal::check(&side.ctx)?;
                side.idle.empty_poll()?;
            }
        }
        if scnt < set.iters {
            stamps[scnt as usize] = clock.stamp();
            scnt += 1;
            let mark = [scnt as u8];
            // The byte the peer spins on: in the inline copy or in our MR.
            inline[size - 1] = mark[0];
            side.mr
                .write(2 * size - 1, &mark)
                .map_err(fail("writing the buffer"))?;
            let wr = [data_wr(set, op, &sge, &inline).signaled()];
            side.qp.post_send(&wr).map_err(fail("Couldn't post send"))?;
            poll_one(
                &mut side.send_cq,
                side.channel.as_ref(),
                &side.ctx,
                &mut side.idle,
                &mut wc,
                "RDMA write",
            )?;
        }
    }
    Ok(samples(clock, stamps, 2))
}

/// `ib_read_lat`: one RDMA READ at a time; a sample is the whole round trip.
pub(super) fn run_read_lat(
    side: &mut Side,
    set: &Settings,
    rem: &Dest,
) -> Result<Vec<u64>, Failure> {
    let sge = [side.mr.sge(0, set.size).map_err(fail("read SGE"))?];
    let wr = [SendWr::new(
        0,
        WrOp::RdmaRead {
            remote_addr: rem.addr,
            rkey: rem.rkey,
        },
    )
    .sge(&sge)
    .signaled()];
    let mut stamps = vec![0u64; set.iters as usize];
    let mut wc = [Wc::default()];
    let clock = CycleClock::start();
    for s in stamps.iter_mut() {
        *s = clock.stamp();
        side.qp.post_send(&wr).map_err(fail("Couldn't post send"))?;
        poll_one(
            &mut side.send_cq,
            side.channel.as_ref(),
            &side.ctx,
            &mut side.idle,
            &mut wc,
            "RDMA read",
        )?;
    }
    Ok(samples(clock, stamps, 1))
}

/// The loop's samples: its cycle-counter stamps in nanoseconds, then [`deltas`].
fn samples(clock: CycleClock, mut stamps: Vec<u64>, div: u64) -> Vec<u64> {
    clock.into_nanos(&mut stamps);
    deltas(&stamps, div)
}

/// Differences of consecutive stamps, divided by `div`, in nanoseconds.
pub(super) fn deltas(stamps: &[u64], div: u64) -> Vec<u64> {
    stamps
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]) / div)
        .collect()
}
