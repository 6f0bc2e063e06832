//! What the long-running commands (`pingpong`, `perf`) do when their device is removed.
//!
//! On a driver without disassociation (rxe) the kernel's removal waits until every open file
//! of the device is closed: a run that kept going would hang `rdma link delete` for good. So
//! the waits check [`Context::is_device_removed`] (one atomic load, only after an empty poll or
//! while spinning), a completion-channel wait ends with the removal, and the run stops: every
//! object is dropped on the way out, the message names the device, the exit status is 1.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use uverbs::Context;

use crate::Failure;

/// The failure for a run whose device was removed.
pub fn removed(ctx: &Context) -> Failure {
    let how = ctx
        .removal_source()
        .map(|s| s.to_string())
        .unwrap_or_else(|| "an error".into());
    Failure(format!(
        "device {} was removed (learned from {how}): stopped, freed every resource on it and \
         exiting so the removal can complete",
        ctx.device().name()
    ))
}

/// How long a failed run waits for a removal notice before reporting its own failure: the
/// peer on the same device may learn of the removal first and close the control connection
/// before this process's watcher has read the same uevent.
const REMOVAL_GRACE: Duration = Duration::from_secs(1);

/// `r` as the run ended; a failure after the device was removed says so (whatever step
/// noticed first: a wait, a command, the peer leaving).
pub fn explain<T>(r: Result<T, Failure>, ctx: &Context) -> Result<T, Failure> {
    if r.is_err() && !ctx.is_device_removed() {
        await_removal_notice(ctx, REMOVAL_GRACE);
    }
    match r {
        Err(Failure(msg)) if ctx.is_device_removed() => {
            let Failure(head) = removed(ctx);
            if msg == head {
                return Err(Failure(msg));
            }
            Err(Failure(format!("{head} ({msg})")))
        }
        r => r,
    }
}

/// Waits up to `limit` for the context's removal fd to become readable (nothing when the
/// context is not watched).
fn await_removal_notice(ctx: &Context, limit: Duration) {
    let Some(fd) = ctx.removal_fd() else { return };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let Ok(limit) = Timespec::try_from(limit) else {
        return;
    };
    // An error or a signal only shortens the grace: the failure is reported either way.
    let _ = poll(&mut fds, Some(&limit));
}

/// `ETIMEDOUT` as the OS numbers it.
fn libc_etimedout() -> i32 {
    rustix::io::Errno::TIMEDOUT.raw_os_error()
}

/// Fails with [`removed`] once the device is removed: for the loops that spin.
#[inline]
pub fn check(ctx: &Context) -> Result<(), Failure> {
    if ctx.is_device_removed() {
        return Err(removed(ctx));
    }
    Ok(())
}

/// `exchange::barrier` that also ends when the device is removed while the peer is silent
/// (a server waiting for its client to finish).
pub fn barrier(s: &mut TcpStream, ctx: &Context) -> Result<(), Failure> {
    let fail = |e: std::io::Error| Failure(format!("Couldn't sync with the peer: {e}"));
    s.write_all(b"B").map_err(fail)?;
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(fail)?;
    let mut b = [0u8];
    let r = loop {
        match s.read(&mut b) {
            Ok(1) => break Ok(()),
            Ok(_) => {
                break Err(Failure(
                    "Couldn't sync with the peer: it closed the connection".into(),
                ))
            }
            // The read timeout above is EAGAIN; ETIMEDOUT is the keepalive giving up.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                check(ctx)?;
            }
            Err(e) if e.raw_os_error() == Some(libc_etimedout()) => {
                break Err(Failure(
                    "Couldn't sync with the peer: it stopped answering on the control \
                     connection (TCP keepalive probes unanswered: it is gone, or the link is \
                     down); --peer-timeout sets how long that takes"
                        .into(),
                ))
            }
            Err(e) => break Err(fail(e)),
        }
    };
    r?;
    s.set_read_timeout(None).map_err(fail)?;
    if b[0] != b'B' {
        return Err(Failure(format!(
            "the peer sent {:#04x} where a sync byte belongs",
            b[0]
        )));
    }
    Ok(())
}
