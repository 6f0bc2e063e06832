//! What the measured loops share: polling (spinning, or sleeping on the completion channel
//! with `-e`) and the data work request of a run.

use std::time::Duration;

use uverbs::{CompChannel, Context, Cq, SendWr, Sge, Wc, WrOp};

use super::fail;
use super::options::Settings;
use crate::cause::{completion_failure, Idle};
use crate::Failure;

/// How long a `-e` wait may take before the run is declared stuck.
pub(super) const EVENT_WAIT: Duration = Duration::from_secs(30);

/// How many times `-e` slept on the completion channel (reported in `--json`).
pub(super) static EVENT_WAITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One poll of `cq`; with a completion channel (`-e`) an empty poll sleeps instead of
/// returning: arm the CQ, poll again (a completion that arrived before the arming raises no
/// event), and only then wait for the event. Returns the completions taken (0 after a
/// spurious wake-up: an event left from an earlier arming). An empty poll after the
/// device was removed, or a wait the removal ended, fails naming the device.
#[inline]
pub(super) fn poll_or_wait(
    cq: &mut Cq,
    ch: Option<&CompChannel>,
    ctx: &Context,
    idle: &mut Idle,
    wcs: &mut [Wc],
) -> Result<usize, Failure> {
    let n = cq
        .poll(wcs)
        .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
    if n > 0 {
        idle.progress();
        return Ok(n);
    }
    let Some(ch) = ch else {
        crate::removal::check(ctx)?;
        idle.empty_poll()?;
        return Ok(0);
    };
    cq.req_notify(false)
        .map_err(fail("Couldn't request CQ notification"))?;
    let n = cq
        .poll(wcs)
        .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
    if n > 0 {
        idle.progress();
        return Ok(n);
    }
    // With `--peer-timeout`, the wait lasts what is left of it; without, EVENT_WAIT.
    let limited = idle.remaining();
    ch.get_cq_event(Some(limited.unwrap_or(EVENT_WAIT)))
        .map_err(|e| {
            if e.is_device_removed() {
                crate::removal::removed(ctx)
            } else if limited.is_some() && e.errno() == Some(uverbs::Errno::TIMEDOUT) {
                idle.failure()
            } else {
                Failure(format!("Failed to get a CQ event: {e}"))
            }
        })?;
    EVENT_WAITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let n = cq
        .poll(wcs)
        .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
    if n > 0 {
        idle.progress();
    }
    Ok(n)
}

/// Polls until one completion arrives; a failed one is an error naming its status.
#[inline]
pub(super) fn poll_one(
    cq: &mut Cq,
    ch: Option<&CompChannel>,
    ctx: &Context,
    idle: &mut Idle,
    wc: &mut [Wc; 1],
    what: &str,
) -> Result<(), Failure> {
    loop {
        let n = poll_or_wait(cq, ch, ctx, idle, wc)?;
        if n == 1 {
            if !wc[0].status.is_success() {
                let first = wc[0];
                return Err(completion_failure(
                    &format!("{what} completion"),
                    &first,
                    &[],
                    &mut [cq],
                ));
            }
            return Ok(());
        }
    }
}

pub(super) fn data_wr<'a>(
    set: &Settings,
    op: WrOp,
    sge: &'a [Sge],
    inline: &'a [u8],
) -> SendWr<'a> {
    let wr = SendWr::new(0, op);
    if set.size <= set.inline_size && !matches!(op, WrOp::RdmaRead { .. }) {
        wr.inline(inline)
    } else {
        wr.sge(sge)
    }
}
