//! Waiting for completions and async events from a tokio runtime (feature `tokio`).
//!
//! A completion channel and a context's async event queue are file descriptors the kernel
//! makes readable when it has an event. This module registers them with tokio's reactor
//! ([`AsyncFd`]), so a task that waits sleeps in `epoll` like any socket read: no busy polling,
//! no thread per channel.
//!
//! * [`AsyncCompChannel`] — `CompChannel::into_async()`: await the next completion event
//!   ([`AsyncCompChannel::get_cq_event`]) or, the usual loop, await completions on a CQ
//!   ([`AsyncCompChannel::poll_cq`]: poll, arm, poll again, sleep until the event).
//! * [`AsyncEvents`] — `Context::async_events()`: await the next async event (`next`).
//!
//! Both make the underlying fd non-blocking (the blocking calls on [`CompChannel`] and
//! [`Context`] wait with `poll(2)` before they read, so they keep working). They register a
//! duplicate of the fd, so several of them for one fd can live in one runtime. They must be
//! created inside a tokio runtime: outside one they return an error; in a runtime built
//! without I/O (`enable_io`) tokio panics, as it does for its own sockets.
//!
//! The data path is untouched: posting and polling stay synchronous, lock-free calls on
//! `&mut Qp` / `&mut Cq`; only the *waiting* is async.
//!
//! ```no_run
//! # async fn demo(ctx: uverbs::Context) -> uverbs::Result<()> {
//! let channel = ctx.create_comp_channel()?;
//! let mut cq = ctx.create_cq(64, Some(&channel), 0)?;
//! let channel = channel.into_async()?;
//! let mut wcs = [uverbs::Wc::default(); 16];
//! // ... create QPs on `cq`, post work ...
//! let n = channel.poll_cq(&mut cq, &mut wcs).await?; // sleeps until a completion arrives
//! for wc in &wcs[..n] {
//!     println!("wr {} finished: {:?}", wc.wr_id, wc.status);
//! }
//! let mut events = ctx.async_events()?;
//! let ev = events.next().await?; // e.g. a QP went to the error state
//! println!("async event: {} on {:?}", ev.event_type.as_str(), ev.element);
//! # Ok(()) }
//! ```

#![allow(unsafe_code)] // one call: registering an fd we own with tokio's reactor (`register`)

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};

use crate::error::{Errno, Error, Result};
use crate::{AsyncEvent, CompChannel, Context, Cq, CqEvent, Wc};

/// Makes `fd` non-blocking and registers a duplicate of it with the current tokio runtime.
pub(crate) fn register(
    fd: BorrowedFd<'_>,
    op: &'static str,
    label: &str,
) -> Result<AsyncFd<OwnedFd>> {
    if ::tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::invalid(
            op,
            label.to_string(),
            Errno::INVAL,
            "not inside a tokio runtime (create it from a task, or inside Runtime::enter)",
        ));
    }
    let flags = fcntl_getfl(fd).map_err(|e| Error::os(op, label.to_string(), e))?;
    fcntl_setfl(fd, flags | OFlags::NONBLOCK).map_err(|e| Error::os(op, label.to_string(), e))?;
    // epoll registers (fd number, open file); a duplicate lets several AsyncFds share the file.
    let dup =
        rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(|e| Error::os(op, label.to_string(), e))?;
    // SAFETY: `dup` is an open fd that the AsyncFd owns from here on; `OwnedFd::as_raw_fd`
    // always returns that same fd, and it is closed only when the AsyncFd drops it, so it
    // stays open and names the same file description for the AsyncFd's whole life.
    unsafe { AsyncFd::register_with_interest(dup, Interest::READABLE) }
        .map_err(|e| io_error(op, label, &e.into()))
}

pub(crate) fn io_error(op: &'static str, label: &str, e: &std::io::Error) -> Error {
    let errno = Errno::from_io_error(e).unwrap_or(Errno::IO);
    Error::os(op, label.to_string(), errno).with_reason(format!("tokio reactor: {e}"))
}

/// A completion channel whose events are awaited from tokio (`CompChannel::into_async`).
/// Cheap to share: methods take `&self`, so one can be used from several tasks.
#[doc(alias = "ibv_comp_channel")]
#[derive(Debug)]
pub struct AsyncCompChannel {
    channel: CompChannel,
    fd: AsyncFd<OwnedFd>,
    /// The context's removal wake fd (a duplicate), while the context is watched.
    removal: Option<AsyncFd<OwnedFd>>,
}

impl CompChannel {
    /// Registers the channel with the current tokio runtime, for awaiting its events.
    ///
    /// Fails outside a tokio runtime with I/O enabled. The channel's fd becomes non-blocking.
    pub fn into_async(self) -> Result<AsyncCompChannel> {
        AsyncCompChannel::new(self)
    }
}

impl AsyncCompChannel {
    /// See [`CompChannel::into_async`].
    pub fn new(channel: CompChannel) -> Result<Self> {
        let fd = register(
            channel.fd(),
            "comp_channel_into_async",
            &channel_label(&channel),
        )?;
        let removal = register_removal(&channel.inner.ctx, "comp_channel_into_async")?;
        Ok(AsyncCompChannel {
            channel,
            fd,
            removal,
        })
    }

    /// The channel, for creating CQs on it and for the blocking calls.
    pub fn channel(&self) -> &CompChannel {
        &self.channel
    }

    /// Waits, without blocking the thread, for the next completion event
    /// (`ibv_get_cq_event`).
    ///
    /// Like the blocking call, it fails with `EINVAL` when no CQ on the channel has requested
    /// a notification since its last event, because such a wait could never end, and with
    /// [`crate::ErrorKind::DeviceRemoved`] when the device is removed while it waits.
    #[doc(alias = "ibv_get_cq_event")]
    pub async fn get_cq_event(&self) -> Result<CqEvent> {
        let op = "get_cq_event";
        loop {
            if self.channel.inner.armed.load(Ordering::Acquire) == 0 {
                // Nothing armed: only an event already queued can end the wait.
                return match self.channel.try_get_cq_event()? {
                    Some(ev) => Ok(ev),
                    None => Err(Error::invalid(
                        op,
                        channel_label(&self.channel),
                        Errno::INVAL,
                        "no CQ on this channel has requested notification (call req_notify first)",
                    )),
                };
            }
            let (fd, removal) = (&self.fd, self.removal.as_ref());
            let woke = std::future::poll_fn(|cx| {
                if let std::task::Poll::Ready(g) = fd.poll_read_ready(cx) {
                    return std::task::Poll::Ready(g.map(Some));
                }
                match removal.map(|r| r.poll_read_ready(cx)) {
                    Some(std::task::Poll::Ready(g)) => std::task::Poll::Ready(g.map(|_| None)),
                    _ => std::task::Poll::Pending,
                }
            })
            .await
            .map_err(|e| io_error(op, &channel_label(&self.channel), &e))?;
            let Some(mut guard) = woke else {
                // Removed: an event already queued still comes first.
                if let Some(ev) = self.channel.try_get_cq_event()? {
                    return Ok(ev);
                }
                let ctx = &self.channel.inner.ctx;
                return Err(Error::device_removed(
                    op,
                    channel_label(&self.channel),
                    ctx.device().name(),
                    Errno::NODEV,
                ));
            };
            match self.channel.try_get_cq_event()? {
                Some(ev) => return Ok(ev),
                // Another task took the event, or the readiness was stale: wait again.
                None => guard.clear_ready(),
            }
        }
    }

    /// Waits until `cq` has completions and polls them into `wcs`; returns how many (at least
    /// one, unless `wcs` is empty).
    ///
    /// This is the verbs event loop: poll; if empty, arm the CQ (`req_notify`), poll again
    /// (a completion may have arrived before the arming), then sleep until the channel's
    /// event and start over. `cq` must have been created on this channel. If several CQs
    /// share the channel, an event for another CQ is consumed here (the loop just polls
    /// again); use one channel per CQ, or [`get_cq_event`](Self::get_cq_event) and dispatch
    /// by `cq_user_handle`, when several tasks wait on one channel.
    pub async fn poll_cq(&self, cq: &mut Cq, wcs: &mut [Wc]) -> Result<usize> {
        let same = cq
            .channel()
            .is_some_and(|c| Arc::ptr_eq(&c.inner, &self.channel.inner));
        if !same {
            return Err(Error::invalid(
                "poll_cq",
                format!("cq {}", cq.handle()),
                Errno::INVAL,
                "the CQ was not created on this completion channel",
            ));
        }
        if wcs.is_empty() {
            return Ok(0);
        }
        loop {
            let n = cq.poll(wcs)?;
            if n > 0 {
                return Ok(n);
            }
            cq.req_notify(false)?;
            let n = cq.poll(wcs)?;
            if n > 0 {
                return Ok(n);
            }
            self.get_cq_event().await?;
        }
    }
}

fn channel_label(c: &CompChannel) -> String {
    format!("completion channel on {}", c.inner.ctx.label())
}

/// A context's async events, awaited from tokio (`Context::async_events`): QP and CQ errors,
/// port changes, device removal (`ibv_get_async_event`), and uverbs' own
/// [`AsyncEventType::DEVICE_REMOVED`](crate::AsyncEventType::DEVICE_REMOVED).
#[derive(Debug)]
pub struct AsyncEvents {
    ctx: Context,
    fd: AsyncFd<OwnedFd>,
    /// The context's removal wake fd (a duplicate), while the context is watched.
    removal: Option<AsyncFd<OwnedFd>>,
}

/// Registers a duplicate of the context's removal wake fd (readable once removed), if any.
fn register_removal(ctx: &Context, op: &'static str) -> Result<Option<AsyncFd<OwnedFd>>> {
    ctx.removal_fd()
        .map(|fd| register(fd, op, ctx.label()))
        .transpose()
}

impl Context {
    /// Registers the context's async event fd with the current tokio runtime.
    ///
    /// Fails outside a tokio runtime with I/O enabled. The fd becomes non-blocking; the
    /// blocking [`Context::get_async_event`] keeps working.
    #[doc(alias = "ibv_get_async_event")]
    pub fn async_events(&self) -> Result<AsyncEvents> {
        let fd = register(self.async_fd(), "async_events", self.label())?;
        let removal = register_removal(self, "async_events")?;
        Ok(AsyncEvents {
            ctx: self.clone(),
            fd,
            removal,
        })
    }
}

impl AsyncEvents {
    /// Waits, without blocking the thread, for the next async event. The stream never ends:
    /// after `DEVICE_FATAL` or `DEVICE_REMOVED` the device is gone and no more events come.
    pub async fn next(&mut self) -> Result<AsyncEvent> {
        let op = "get_async_event";
        loop {
            if let Some(ev) = self.ctx.take_removed_event() {
                return Ok(ev);
            }
            // The removal fd only while our event is still due: once handed out it stays
            // readable and would wake us for nothing.
            let removal = self
                .removal
                .as_ref()
                .filter(|_| self.ctx.inner.channel.state.pending_wake_fd().is_some());
            let fd = &self.fd;
            let woke = std::future::poll_fn(|cx| {
                if let Some(r) = removal {
                    if let std::task::Poll::Ready(g) = r.poll_read_ready(cx) {
                        return std::task::Poll::Ready(g.map(|_| None));
                    }
                }
                fd.poll_read_ready(cx).map(|g| g.map(Some))
            })
            .await
            .map_err(|e| io_error(op, self.ctx.label(), &e))?;
            let Some(mut guard) = woke else {
                continue; // the removal: handed out at the top of the loop
            };
            match self.ctx.get_async_event(Some(Duration::ZERO)) {
                Ok(ev) => return Ok(ev),
                // Nothing there after all (another reader took it): wait again.
                Err(e) if e.is(Errno::TIMEDOUT) || e.is(Errno::AGAIN) => guard.clear_ready(),
                Err(e) => return Err(e),
            }
        }
    }

    /// The context the events come from.
    pub fn context(&self) -> &Context {
        &self.ctx
    }
}

impl AsFd for AsyncEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }
}
