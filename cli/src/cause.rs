//! Why a run failed, as a program on a bad link or with a vanished peer needs to hear it: the
//! completion that carries the cause rather than the flushed ones that followed it, and a
//! limit on how long a side with nothing outstanding waits for a silent peer.
//!
//! When an RC QP's retries run out, the kernel completes the send with
//! `RETRY_EXC_ERR`, moves the QP to the error state and flushes everything else on it
//! (`WR_FLUSH_ERR`). Those completions can come out in either order (rxe flushes the receive
//! queue from its responder while the requester writes the send's error), and on two CQs.
//! A flushed completion is therefore never reported as the cause while another error may
//! still arrive: [`completion_failure`] keeps polling for up to [`CAUSE_WAIT`].

use std::time::{Duration, Instant};

use uverbs::{Cq, Wc};

use crate::Failure;

/// How long a run that met a flushed completion polls for the error completion that explains
/// it.
pub const CAUSE_WAIT: Duration = Duration::from_secs(2);

/// The `retry_cnt` of the tools' RC QPs: 6, not rdma-core's 7, because rxe treats 7 as
/// unlimited retries, and then a vanished peer is never reported by the transport. With
/// `timeout` 14 (about 67 ms per try) the seventh unanswered try fails the send with
/// `RETRY_EXC_ERR` about half a second after the peer went silent.
pub const RETRY_CNT: u8 = 6;

/// The default of `--peer-timeout`: how long a side waits with no completion and no word from
/// its peer before it gives up.
pub const PEER_TIMEOUT_SECS: u64 = 15;

/// The error completion among `first`, then `rest` (the completions polled with it), then
/// whatever `cqs` give within [`CAUSE_WAIT`], that explains the failure: the first one that
/// is not a flush, or `first` when none comes. Also returns how many flushed completions were
/// seen before it.
pub fn cause(first: &Wc, rest: &[Wc], cqs: &mut [&mut Cq]) -> (Wc, usize) {
    if !first.status.is_flush() {
        return (*first, 0);
    }
    let mut flushed = 1;
    for wc in rest {
        if wc.status.is_flush() {
            flushed += 1;
        } else if !wc.status.is_success() {
            return (*wc, flushed);
        }
    }
    let until = Instant::now() + CAUSE_WAIT;
    let mut wcs = [Wc::default(); 16];
    while Instant::now() < until {
        let mut any = false;
        for cq in cqs.iter_mut() {
            // A CQ that cannot be polled any more has nothing to add.
            let n = cq.poll(&mut wcs).unwrap_or(0);
            any |= n > 0;
            for wc in &wcs[..n] {
                if wc.status.is_flush() {
                    flushed += 1;
                } else if !wc.status.is_success() {
                    return (*wc, flushed);
                }
            }
        }
        if !any {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    (*first, flushed)
}

/// The text after a status: its meaning, and for a cause found behind flushed completions,
/// how many there were.
pub fn explain(wc: &Wc, flushed: usize) -> String {
    let mut s = String::new();
    if let Some(m) = wc.status.meaning() {
        s.push_str(": ");
        s.push_str(m);
    }
    if wc.status.is_flush() {
        s.push_str(&format!(
            " (no other error completion came within {} s: the kernel gave no cause. rxe on \
             6.x reports a send that its network interface refused, when the link went down or \
             its queueing discipline was replaced, with flushed completions only)",
            CAUSE_WAIT.as_secs()
        ));
    } else if flushed > 0 {
        s.push_str(&format!(
            " ({flushed} flushed work request{} polled before this one)",
            if flushed == 1 { " was" } else { "s were" }
        ));
    }
    s
}

/// The failure for a run whose completion `first` failed: the status of the completion that
/// carries the cause ([`cause`]), its `wr_id` and vendor error, and what it means. `what`
/// names the work ("send completion", "completion").
pub fn completion_failure(what: &str, first: &Wc, rest: &[Wc], cqs: &mut [&mut Cq]) -> Failure {
    let (wc, flushed) = cause(first, rest, cqs);
    Failure(format!(
        "{what} with error: {} (wr_id {}, vendor_err {:#x}){}",
        wc.status,
        wc.wr_id,
        wc.vendor_err,
        explain(&wc, flushed)
    ))
}

/// A limit on how long a side may see nothing: no completion and no word from its peer.
/// Cheap enough for the measured loops: a completion costs one store, an empty poll an
/// increment, and only every 1024th empty poll in a row reads the clock.
#[derive(Debug)]
pub struct Idle {
    limit: Option<Duration>,
    /// When the current quiet spell was first noticed (by a clock read).
    since: Option<Instant>,
    empty: u32,
    /// The QPs are UC or UD: a lost message is never resent, and the quiet is most likely
    /// that rather than a vanished peer.
    unreliable: bool,
}

impl Idle {
    /// A limit of `secs` seconds; 0 means none.
    pub fn new(secs: u64) -> Idle {
        Idle {
            limit: (secs > 0).then(|| Duration::from_secs(secs)),
            since: None,
            empty: 0,
            unreliable: false,
        }
    }

    /// The same limit for UC or UD QPs: its failure names a lost message first.
    pub fn unreliable(self) -> Idle {
        Idle {
            unreliable: true,
            ..self
        }
    }

    /// Something happened (a completion, a message from the peer).
    #[inline(always)]
    pub fn progress(&mut self) {
        self.since = None;
        self.empty = 0;
    }

    /// An empty poll: fails once the quiet has lasted the limit.
    #[inline(always)]
    pub fn empty_poll(&mut self) -> Result<(), Failure> {
        self.empty = self.empty.wrapping_add(1);
        if self.empty % 1024 != 0 {
            return Ok(());
        }
        self.check()
    }

    /// Reads the clock: fails once the quiet has lasted the limit.
    #[cold]
    pub fn check(&mut self) -> Result<(), Failure> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) >= limit {
            return Err(self.failure());
        }
        Ok(())
    }

    /// How long a blocking wait may take before the limit is up (`None`: no limit).
    pub fn remaining(&mut self) -> Option<Duration> {
        let limit = self.limit?;
        let since = *self.since.get_or_insert_with(Instant::now);
        Some(limit.saturating_sub(since.elapsed()))
    }

    /// The failure for a quiet spell that lasted the limit.
    pub fn failure(&self) -> Failure {
        let secs = self.limit.map_or(0, |l| l.as_secs());
        let why = if self.unreliable {
            "a message or its answer was lost (UC and UD never resend one), or the peer \
             is gone, or the link is down"
        } else {
            "the peer stopped answering (it is gone, or the link is down)"
        };
        Failure(format!(
            "no completion and no word from the peer for {secs} s: {why}; --peer-timeout \
             sets this limit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uverbs::WcStatus;

    fn wc(wr_id: u64, status: WcStatus) -> Wc {
        Wc {
            wr_id,
            status,
            ..Wc::default()
        }
    }

    #[test]
    fn the_cause_behind_flushed_completions_is_named() {
        let first = wc(2, WcStatus::WR_FLUSH_ERR);
        let rest = [
            wc(3, WcStatus::WR_FLUSH_ERR),
            wc(1, WcStatus::RETRY_EXC_ERR),
            wc(4, WcStatus::WR_FLUSH_ERR),
        ];
        let (c, flushed) = cause(&first, &rest, &mut []);
        assert_eq!(
            (c.wr_id, c.status, flushed),
            (1, WcStatus::RETRY_EXC_ERR, 2)
        );
        let text = explain(&c, flushed);
        assert!(text.contains("the peer stopped acknowledging"), "{text}");
        assert!(
            text.contains("2 flushed work requests were polled"),
            "{text}"
        );
    }

    #[test]
    fn a_first_error_that_is_not_a_flush_is_the_cause() {
        let first = wc(7, WcStatus::REM_ACCESS_ERR);
        let (c, flushed) = cause(&first, &[wc(1, WcStatus::RETRY_EXC_ERR)], &mut []);
        assert_eq!((c.wr_id, flushed), (7, 0));
    }

    #[test]
    fn a_lone_flush_says_nothing_else_came() {
        let first = wc(2, WcStatus::WR_FLUSH_ERR);
        let t = Instant::now();
        let (c, flushed) = cause(&first, &[], &mut []);
        assert!(t.elapsed() >= CAUSE_WAIT);
        assert_eq!((c.wr_id, flushed), (2, 1));
        assert!(explain(&c, flushed).contains("no other error completion came"));
    }

    #[test]
    fn idle_fails_only_after_its_limit_and_progress_resets_it() {
        let mut never = Idle::new(0);
        for _ in 0..5000 {
            never.empty_poll().unwrap();
        }
        assert_eq!(never.remaining(), None);
        let mut idle = Idle::new(1);
        idle.check().unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let e = idle.check().unwrap_err();
        assert!(
            e.0.contains("for 1 s: the peer stopped answering"),
            "{}",
            e.0
        );
        idle.progress();
        idle.check().unwrap();
        assert!(idle.remaining().unwrap() > Duration::from_millis(900));
        let mut uc = Idle::new(1).unreliable();
        uc.check().unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let e = uc.check().unwrap_err();
        assert!(
            e.0.contains("for 1 s: a message or its answer was lost"),
            "{}",
            e.0
        );
    }
}
