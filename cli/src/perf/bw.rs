//! The bandwidth tests (`ib_{send,write,read}_bw`): `tx_depth` work requests in flight, posted
//! in lists, completions moderated; the rate over the run and its best window.

use std::time::{Duration, Instant};

use uverbs::{RecvWr, SendFlags, Wc, WrOp};

use super::fail;
use super::options::{Settings, Test};
use super::poll::{data_wr, poll_or_wait};
use super::side::{Dest, Side};
use crate::cause::completion_failure;
use crate::Failure;

/// What a bandwidth run measured.
pub(super) struct BwResult {
    pub(super) elapsed: Duration,
    /// Best rate seen over any window of completions (perftest's "peak"), in messages/s.
    pub(super) peak_rate: f64,
    pub(super) messages: u32,
}

/// `ib_{send,write,read}_bw`: keep `tx_depth` work requests in flight, posted in lists of
/// `post_list`, one signaled every `cq_mod`; the server of a SEND test receives.
pub(super) fn run_bw(
    side: &mut Side,
    set: &Settings,
    client: bool,
    rem: &Dest,
    recv_wrs: &[RecvWr<'_>],
) -> Result<BwResult, Failure> {
    if !client {
        return run_bw_receiver(side, set, recv_wrs);
    }
    let sge = [side.mr.sge(0, set.size).map_err(fail("SGE"))?];
    let inline = vec![0u8; set.size as usize];
    let op = match set.test {
        Test::SendBw => WrOp::Send,
        Test::WriteBw => WrOp::RdmaWrite {
            remote_addr: rem.addr,
            rkey: rem.rkey,
        },
        _ => WrOp::RdmaRead {
            remote_addr: rem.addr,
            rkey: rem.rkey,
        },
    };
    let template = data_wr(set, op, &sge, &inline);
    let mut wrs = vec![template; set.post_list as usize];
    let mut wcs = vec![Wc::default(); set.tx_depth.min(64) as usize];
    // Completion times at up to 64 checkpoints, for the peak rate.
    let mut marks = vec![(0u32, Duration::ZERO); 65];
    let mut nmarks = 0usize;
    let step = (set.iters / 64).max(1);
    let iters = set.iters;
    let (mut scnt, mut ccnt) = (0u32, 0u32);
    let t0 = Instant::now();
    while ccnt < iters {
        while scnt < iters {
            let batch = set.post_list.min(iters - scnt);
            if scnt - ccnt + batch > set.tx_depth {
                break;
            }
            for (k, wr) in wrs.iter_mut().take(batch as usize).enumerate() {
                let i = scnt + k as u32;
                wr.wr_id = u64::from(i);
                wr.flags = if (i + 1) % set.cq_mod == 0 || i + 1 == iters {
                    SendFlags::SIGNALED
                } else {
                    SendFlags::empty()
                };
            }
            side.qp
                .post_send(&wrs[..batch as usize])
                .map_err(fail("Couldn't post send"))?;
            scnt += batch;
        }
        // Busy-poll, or with `-e` sleep until a completion arrives: the loop above stopped
        // because nothing more can be posted until completions free room, or all is posted.
        let n = poll_or_wait(
            &mut side.send_cq,
            side.channel.as_ref(),
            &side.ctx,
            &mut side.idle,
            &mut wcs,
        )?;
        for (k, wc) in wcs[..n].iter().enumerate() {
            if !wc.status.is_success() {
                return Err(completion_failure(
                    "completion",
                    wc,
                    &wcs[k + 1..n],
                    &mut [&mut side.send_cq, &mut side.recv_cq],
                ));
            }
            // RC completes in order: a signaled WR completes every WR before it.
            ccnt = wc.wr_id as u32 + 1;
        }
        if n > 0 && nmarks < marks.len() && ccnt >= marks[nmarks.saturating_sub(1)].0 + step {
            marks[nmarks] = (ccnt, t0.elapsed());
            nmarks += 1;
        }
    }
    let elapsed = t0.elapsed();
    Ok(BwResult {
        elapsed,
        peak_rate: peak(&marks[..nmarks]),
        messages: iters,
    })
}

pub(super) fn run_bw_receiver(
    side: &mut Side,
    set: &Settings,
    recv_wrs: &[RecvWr<'_>],
) -> Result<BwResult, Failure> {
    let mut wcs = vec![Wc::default(); 64];
    let mut rcnt = 0u32;
    let mut t0 = None;
    let mut marks = vec![(0u32, Duration::ZERO); 65];
    let mut nmarks = 0usize;
    let step = (set.iters / 64).max(1);
    let start = Instant::now();
    while rcnt < set.iters {
        let n = poll_or_wait(
            &mut side.recv_cq,
            side.channel.as_ref(),
            &side.ctx,
            &mut side.idle,
            &mut wcs,
        )?;
        if n == 0 {
            continue;
        }
        let t = *t0.get_or_insert_with(Instant::now);
        for (k, wc) in wcs[..n].iter().enumerate() {
            if !wc.status.is_success() {
                return Err(completion_failure(
                    "receive completion",
                    wc,
                    &wcs[k + 1..n],
                    &mut [&mut side.recv_cq, &mut side.send_cq],
                ));
            }
        }
        rcnt += n as u32;
        side.qp
            .post_recv(&recv_wrs[..n])
            .map_err(fail("Couldn't post receives"))?;
        if nmarks < marks.len() && rcnt >= marks[nmarks.saturating_sub(1)].0 + step {
            marks[nmarks] = (rcnt, t.elapsed());
            nmarks += 1;
        }
    }
    Ok(BwResult {
        elapsed: t0.map(|t| t.elapsed()).unwrap_or_else(|| start.elapsed()),
        peak_rate: peak(&marks[..nmarks]),
        messages: set.iters,
    })
}

/// The best rate between consecutive checkpoints (messages/s).
pub(super) fn peak(marks: &[(u32, Duration)]) -> f64 {
    let mut best = 0.0f64;
    let mut prev = (0u32, Duration::ZERO);
    for &(n, t) in marks {
        let dt = (t - prev.1).as_secs_f64();
        if dt > 0.0 {
            best = best.max(f64::from(n - prev.0) / dt);
        }
        prev = (n, t);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_is_the_best_window() {
        let ms = Duration::from_millis;
        assert_eq!(peak(&[(10, ms(10)), (30, ms(20)), (35, ms(40))]), 2000.0);
        assert_eq!(peak(&[]), 0.0);
    }
}
