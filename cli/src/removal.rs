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

/// `r` as the run ended; a failure after the device was removed says so (whatever step
/// noticed first: a wait, a command, the peer leaving).
pub fn explain<T>(r: Result<T, Failure>, ctx: &Context) -> Result<T, Failure> {
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
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                check(ctx)?;
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
