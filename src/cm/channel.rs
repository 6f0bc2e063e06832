//! The rdma_cm character device (`/dev/infiniband/rdma_cm`) and its `write()` commands.
//!
//! Every command is one `write()` of [`RdmaUcmCmdHdr`] and the command struct. A command with
//! a response carries the address of the response buffer in the command; the kernel writes
//! the response there before `write()` returns. The fd is opened non-blocking: `GET_EVENT`
//! then fails with `EAGAIN` instead of sleeping, and every wait is a `poll()` with a timeout.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::{Mode, OFlags};
use uverbs_uapi::ucma::RdmaUcmCmdHdr;
use zerocopy::{Immutable, IntoBytes};

use crate::error::{Errno, Error, Result};

/// Where the rdma_cm device lives (created by the `rdma_ucm` module).
pub const RDMA_CM_DEVICE: &str = "/dev/infiniband/rdma_cm";

/// An rdma_cm event channel (`struct rdma_event_channel`): one open `/dev/infiniband/rdma_cm`.
///
/// Each [`crate::cm::CmId`] owns its own channel (librdmacm's "synchronous" ids), so its
/// events can be waited for on its fd ([`AsFd`]: poll, epoll or an async reactor) and read
/// with [`crate::cm::CmId::get_cm_event`]. The fd is readable while an event is queued.
#[doc(alias = "rdma_event_channel")]
#[derive(Debug)]
pub struct EventChannel {
    fd: OwnedFd,
}

impl EventChannel {
    /// Opens a new event channel (`rdma_create_event_channel`).
    ///
    /// Fails with `ENOENT` when the `rdma_ucm` module is not loaded (no
    /// `/dev/infiniband/rdma_cm`).
    #[doc(alias = "rdma_create_event_channel")]
    pub fn new() -> Result<EventChannel> {
        Self::open(Path::new(RDMA_CM_DEVICE))
    }

    /// Opens the rdma_cm device at `path` (tests use this for a path that does not exist).
    pub fn open(path: &Path) -> Result<EventChannel> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| {
            let err = Error::os("rdma_create_event_channel", path.display().to_string(), e);
            if e == Errno::NOENT {
                err.with_reason(
                    "no rdma_cm device: load the rdma_ucm module (with rdma_cm, ib_cm, iw_cm)",
                )
            } else {
                err
            }
        })?;
        Ok(EventChannel { fd })
    }

    /// Sends one command: `hdr` + `req`, whose response pointer (if any) the caller has set
    /// to `resp`; `resp` is what the kernel may write.
    pub(crate) fn exec<T: IntoBytes + Immutable>(
        &self,
        cmd: u32,
        req: &T,
        resp: &mut [u8],
    ) -> std::result::Result<(), Errno> {
        let body = req.as_bytes();
        let hdr = RdmaUcmCmdHdr {
            cmd,
            r#in: u16::try_from(body.len()).map_err(|_| Errno::INVAL)?,
            out: u16::try_from(resp.len()).map_err(|_| Errno::INVAL)?,
        };
        let mut buf = Vec::with_capacity(8 + body.len());
        buf.extend_from_slice(hdr.as_bytes());
        buf.extend_from_slice(body);
        let n = rustix::io::write(&self.fd, &buf)?;
        // rustix issues write(2) as a "readonly" syscall: the compiler may assume it leaves
        // memory alone, but the kernel wrote the response through the pointer in `req`.
        // `black_box` makes the response buffer opaque again, so it is read back from memory.
        std::hint::black_box(&mut *resp);
        if n != buf.len() {
            // The ucma write handler consumes a command whole or fails.
            return Err(Errno::IO);
        }
        Ok(())
    }

    /// Waits until an event is queued or `timeout` passes; `Ok(false)` on timeout.
    pub(crate) fn wait_readable(&self, deadline: Instant) -> std::result::Result<bool, Errno> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
            let ts = Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            match rustix::event::poll(&mut fds, Some(&ts)) {
                Ok(0) => return Ok(false),
                Ok(_) => return Ok(true),
                Err(Errno::INTR) => {
                    if Instant::now() >= deadline {
                        return Ok(false);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A deadline `timeout` from now (saturating: `Duration::MAX` means "never").
pub(crate) fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(86400 * 365))
}
