//! Completion channels (`ibv_create_comp_channel`, `ibv_get_cq_event`) and async events
//! (`ibv_get_async_event`).
//!
//! Both are file descriptors the kernel writes small records to. They work with `epoll` and
//! async runtimes: the fds are exposed, and reads can be made non-blocking.
//!
//! Events carry the `user_handle` we gave the kernel when creating the object, never a
//! pointer, so an event for an object that is already gone is harmless: it names a handle no
//! live object has. That is why acknowledging events is bookkeeping only (`ibv_ack_cq_events`
//! exists in C to keep pointers valid; here the counts are kept for the destroy report).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use uverbs_uapi::write::{
    IbUverbsAsyncEventDesc, IbUverbsCompEventDesc, IbUverbsCreateCompChannel,
    IbUverbsCreateCompChannelResp, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL,
};
use zerocopy::FromBytes;

use crate::context::{legacy_cmd, write_new_fd, Context};
use crate::error::{Errno, Error, Result};

static NEXT_USER_HANDLE: AtomicU64 = AtomicU64::new(1);

/// A process-unique value to give the kernel as an object's `user_handle`.
pub(crate) fn next_user_handle() -> u64 {
    NEXT_USER_HANDLE.fetch_add(1, Ordering::Relaxed)
}

pub(crate) struct CompChannelInner {
    pub(crate) ctx: Context,
    pub(crate) fd: OwnedFd,
    /// Notification requests not yet answered by an event (see [`CompChannel::get_cq_event`]).
    pub(crate) armed: AtomicUsize,
}

/// A completion event channel (`struct ibv_comp_channel`). Cheap to clone.
///
/// Wait for completions instead of spinning on [`Cq::poll`](crate::Cq::poll): arm the CQ,
/// wait for its event, poll everything, re-arm. The kernel answers one event per
/// [`req_notify`](crate::Cq::req_notify); the event is acknowledged as it is read.
/// (`examples/comp_channel.rs` runs this loop with real completions in the VM tests.)
///
/// ```
/// # use uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_CQ_NOTIFICATIONS as NOTIFY;
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let mut cfg = uverbs_efa_model::ModelConfig::default();
/// # cfg.device_caps |= NOTIFY;
/// # let ctx = fabric.add_device(cfg).open()?;
/// use std::time::Duration;
/// use uverbs::{CqInitAttr, Wc};
///
/// let channel = ctx.create_comp_channel()?;
/// // Or just ctx.create_cq(64, Some(&channel), 0)?; cq_context comes back with each event.
/// let attr = CqInitAttr { cqe: 64, channel: Some(&channel), cq_context: 42, ..Default::default() };
/// let mut cq = ctx.create_cq_ex(&attr)?;
/// cq.req_notify(false)?;                                   // 1. arm
/// // 2. wait (here: just look; `get_cq_event(None)` blocks until a completion arrives)
/// match channel.try_get_cq_event()? {
///     Some(ev) => {
///         assert_eq!(ev.cq_context, 42);                   // which CQ
///         cq.req_notify(false)?;                           // 3. re-arm before polling
///         let mut wcs = [Wc::default(); 16];
///         while cq.poll(&mut wcs)? > 0 { /* 4. handle them */ }
///     }
///     None => println!("no completion yet"),
/// }
/// // A bounded wait times out with a clear error.
/// let e = channel.get_cq_event(Some(Duration::from_millis(1))).unwrap_err();
/// assert!(e.is(uverbs::Errno::TIMEDOUT));
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_comp_channel")]
#[derive(Clone)]
pub struct CompChannel {
    pub(crate) inner: Arc<CompChannelInner>,
}

impl std::fmt::Debug for CompChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CompChannel(fd {:?} on {})",
            self.inner.fd,
            self.inner.ctx.label()
        )
    }
}

/// A completion event: the CQ with this `user_handle` has a new completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqEvent {
    /// The `user_handle` of the CQ ([`crate::Cq::user_handle`]).
    pub cq_user_handle: u64,
    /// The CQ's `cq_context` ([`crate::Cq::cq_context`]) when the event was read; 0 if the
    /// CQ is already gone. (`ibv_get_cq_event` returns it through its `cq_context` argument.)
    pub cq_context: u64,
}

impl Context {
    /// Creates a completion event channel (`ibv_create_comp_channel`).
    #[doc(alias = "ibv_create_comp_channel")]
    pub fn create_comp_channel(&self) -> Result<CompChannel> {
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL,
            &IbUverbsCreateCompChannel::default(),
            &[],
            std::mem::size_of::<IbUverbsCreateCompChannelResp>(),
            0,
        );
        // The kernel installs a new fd in our table: owned before anything can fail.
        let fd = write_new_fd(self.channel(), &mut cmd)
            .map_err(|e| self.command_error("create_comp_channel", self.label().to_string(), e))?
            .ok_or_else(|| {
                Error::invalid(
                    "create_comp_channel",
                    self.label().to_string(),
                    Errno::BADF,
                    "kernel returned an invalid fd",
                )
            })?;
        Ok(CompChannel {
            inner: Arc::new(CompChannelInner {
                ctx: self.clone(),
                fd,
                armed: AtomicUsize::new(0),
            }),
        })
    }
}

impl CompChannel {
    /// The channel's fd (`ibv_comp_channel.fd`), for `epoll` or an async runtime.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    fn label(&self) -> String {
        format!("completion channel on {}", self.inner.ctx.label())
    }

    /// Waits for the next completion event (`ibv_get_cq_event`), up to `timeout` (`None`:
    /// no limit).
    ///
    /// Fails with `EINVAL` when no CQ on this channel has requested a notification since its
    /// last event — such a wait could never end — and with `ETIMEDOUT` when the time runs out.
    ///
    /// An event not yet read when its CQ is destroyed is discarded by the kernel
    /// (`ib_uverbs_release_ucq`): destroy a CQ only after its waiter has the event it expects.
    ///
    /// The wait also ends when the context's device is removed: with no event ready it then
    /// fails with [`crate::ErrorKind::DeviceRemoved`] (`ENODEV`), so a program blocked here
    /// learns of the removal and can let go of the device.
    #[doc(alias = "ibv_get_cq_event")]
    pub fn get_cq_event(&self, timeout: Option<Duration>) -> Result<CqEvent> {
        let op = "get_cq_event";
        if self.inner.armed.load(Ordering::Acquire) == 0 && !self.readable(Some(Duration::ZERO))? {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::INVAL,
                "no CQ on this channel has requested notification (call req_notify_cq first)",
            ));
        }
        let ctx = &self.inner.ctx;
        let removal = ctx.inner.channel.state.wake_fd();
        let [event, removed] = wait_either(
            self.fd(),
            removal,
            timeout,
            op,
            &self.label(),
            OnSignal::Restart,
        )?;
        if !event {
            if removed {
                return Err(Error::device_removed(
                    op,
                    self.label(),
                    ctx.device().name(),
                    Errno::NODEV,
                ));
            }
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::TIMEDOUT,
                "no completion event arrived in time",
            ));
        }
        let desc: IbUverbsCompEventDesc =
            read_record(self.fd(), op, &self.label(), OnSignal::Restart)?;
        Ok(self.took_cq_event(&desc))
    }

    /// Reads the next event with one `read(2)` of the channel's fd, as libibverbs'
    /// `ibv_get_cq_event` does: it blocks unless the fd was made non-blocking (`EAGAIN`), a
    /// signal handler interrupts it as it interrupts `read` (`EINTR` unless the handler was
    /// installed with `SA_RESTART`), and neither the armed check nor the device-removal wake
    /// of [`CompChannel::get_cq_event`] applies. For uverbs' libibverbs.
    #[doc(hidden)]
    pub fn read_cq_event(&self) -> Result<CqEvent> {
        let desc: IbUverbsCompEventDesc = read_record(
            self.fd(),
            "get_cq_event",
            &self.label(),
            OnSignal::Interrupt,
        )?;
        Ok(self.took_cq_event(&desc))
    }

    /// The bookkeeping of an event read from the channel.
    fn took_cq_event(&self, desc: &IbUverbsCompEventDesc) -> CqEvent {
        // One armed request is answered per event (the kernel delivers at most one event per
        // request_notify); saturate in case events were requested through the raw API.
        // (A compare-exchange loop rather than `fetch_update`, which newer toolchains deprecate in
        // favour of `try_update`, absent from our MSRV.)
        let armed = &self.inner.armed;
        let mut n = armed.load(Ordering::Acquire);
        while n > 0 {
            match armed.compare_exchange_weak(n, n - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(now) => n = now,
            }
        }
        let target = crate::object::event_target(desc.cq_handle);
        if let Some(t) = &target {
            t.note_comp_event();
        }
        CqEvent {
            cq_user_handle: desc.cq_handle,
            cq_context: target.map_or(0, |t| t.context()),
        }
    }

    /// Reads an event if one is ready, without waiting.
    pub fn try_get_cq_event(&self) -> Result<Option<CqEvent>> {
        if !self.readable(Some(Duration::ZERO))? {
            return Ok(None);
        }
        self.get_cq_event(Some(Duration::ZERO)).map(Some)
    }

    fn readable(&self, timeout: Option<Duration>) -> Result<bool> {
        wait_readable(self.fd(), timeout, "get_cq_event", &self.label())
    }

    pub(crate) fn note_armed(&self) {
        self.inner.armed.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn same_context(&self, ctx: &Context) -> bool {
        Arc::ptr_eq(&self.inner.ctx.inner, &ctx.inner)
    }
}

/// The kind of an asynchronous event (`enum ibv_event_type`).
#[doc(alias = "ibv_event_type")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AsyncEventType(pub u32);

#[allow(missing_docs)]
impl AsyncEventType {
    pub const CQ_ERR: Self = Self(0);
    pub const QP_FATAL: Self = Self(1);
    pub const QP_REQ_ERR: Self = Self(2);
    pub const QP_ACCESS_ERR: Self = Self(3);
    pub const COMM_EST: Self = Self(4);
    pub const SQ_DRAINED: Self = Self(5);
    pub const PATH_MIG: Self = Self(6);
    pub const PATH_MIG_ERR: Self = Self(7);
    pub const DEVICE_FATAL: Self = Self(8);
    pub const PORT_ACTIVE: Self = Self(9);
    pub const PORT_ERR: Self = Self(10);
    pub const LID_CHANGE: Self = Self(11);
    pub const PKEY_CHANGE: Self = Self(12);
    pub const SM_CHANGE: Self = Self(13);
    pub const SRQ_ERR: Self = Self(14);
    pub const SRQ_LIMIT_REACHED: Self = Self(15);
    pub const QP_LAST_WQE_REACHED: Self = Self(16);
    pub const CLIENT_REREGISTER: Self = Self(17);
    pub const GID_CHANGE: Self = Self(18);
    pub const WQ_FATAL: Self = Self(19);
    /// **uverbs' own event, never sent by the kernel**: the context's device was removed
    /// (`rdma link delete`, driver unbind, hot-unplug). Its element is
    /// [`AsyncElement::Device`]. Delivered once per context, unless the kernel's
    /// `DEVICE_FATAL` was read first (which says the same). For drivers without
    /// disassociation (rxe, siw) the kernel sends nothing and waits, with the removal
    /// blocked, until every object and the context are dropped: do that on this event.
    /// Disassociating drivers also send `DEVICE_FATAL`, so both may arrive.
    /// The value lies outside `enum ibv_event_type`.
    pub const DEVICE_REMOVED: Self = Self(0x8000_0000);

    /// The name `ibv_event_type_str` gives.
    pub fn as_str(&self) -> &'static str {
        const NAMES: [&str; 20] = [
            "CQ error",
            "local work queue catastrophic error",
            "invalid request local work queue error",
            "local access violation work queue error",
            "communication established",
            "send queue drained",
            "path migrated",
            "path migration request error",
            "local catastrophic error",
            "port active",
            "port error",
            "LID change",
            "P_Key change",
            "SM change",
            "SRQ catastrophic error",
            "SRQ limit reached",
            "last WQE reached",
            "client reregistration",
            "GID table change",
            "WQ fatal",
        ];
        if *self == Self::DEVICE_REMOVED {
            return "device removed";
        }
        NAMES.get(self.0 as usize).copied().unwrap_or("unknown")
    }
}

/// What an async event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncElement {
    /// A CQ, by its `user_handle`.
    Cq(u64),
    /// A QP, by its `user_handle`.
    Qp(u64),
    /// An SRQ, by its `user_handle`.
    Srq(u64),
    /// A WQ, by its `user_handle`.
    Wq(u64),
    /// A port, by number.
    Port(u32),
    /// The whole device.
    Device,
}

/// An asynchronous event (`struct ibv_async_event`).
///
/// Read from the context with [`Context::get_async_event`]: port state changes, a CQ overrun,
/// an SRQ limit, a fatal QP error, the device going away. To see some on rxe: take its netdev
/// down and up (`PORT_ERR`, `PORT_ACTIVE`), let more completions arrive on a CQ than it holds
/// without polling it (`CQ_ERR`), or arm an SRQ limit and let receives consume the SRQ below
/// it (`SRQ_LIMIT_REACHED`).
///
/// A program usually reads them on a thread of its own (or with `uverbs::tokio`):
///
/// ```no_run
/// use uverbs::{AsyncElement, AsyncEventType};
///
/// let ctx = uverbs::Context::open(&uverbs::device_by_name("rxe0")?)?;
/// loop {
///     let ev = ctx.get_async_event(None)?;                // ibv_get_async_event
///     match (ev.event_type, ev.element) {
///         (AsyncEventType::PORT_ERR, AsyncElement::Port(p)) => eprintln!("port {p} went down"),
///         (AsyncEventType::CQ_ERR, AsyncElement::Cq(_)) => eprintln!("CQ {:?} overran", ev.context),
///         (AsyncEventType::DEVICE_REMOVED, _) => break,   // free everything and close
///         (t, e) => eprintln!("{}: {e:?}", t.as_str()),
///     }
/// }
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_async_event")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncEvent {
    /// The event type.
    pub event_type: AsyncEventType,
    /// The object it concerns.
    pub element: AsyncElement,
    /// The user's context value of that object (`cq_context`, `srq_context`, `qp_context`
    /// given at its creation, as `ibv_async_event.element.cq->cq_context` reaches it in C);
    /// `None` for port and device events, or if the object is already gone.
    pub context: Option<u64>,
}

impl AsyncEvent {
    /// Decodes the kernel's record.
    pub fn from_desc(d: &IbUverbsAsyncEventDesc) -> Self {
        let t = AsyncEventType(d.event_type);
        let element = match t {
            AsyncEventType::CQ_ERR => AsyncElement::Cq(d.element),
            AsyncEventType::SRQ_ERR | AsyncEventType::SRQ_LIMIT_REACHED => {
                AsyncElement::Srq(d.element)
            }
            AsyncEventType::WQ_FATAL => AsyncElement::Wq(d.element),
            AsyncEventType::DEVICE_FATAL => AsyncElement::Device,
            AsyncEventType::PORT_ACTIVE
            | AsyncEventType::PORT_ERR
            | AsyncEventType::LID_CHANGE
            | AsyncEventType::PKEY_CHANGE
            | AsyncEventType::SM_CHANGE
            | AsyncEventType::CLIENT_REREGISTER
            | AsyncEventType::GID_CHANGE => AsyncElement::Port(d.element as u32),
            _ => AsyncElement::Qp(d.element),
        };
        let context = match element {
            AsyncElement::Cq(h)
            | AsyncElement::Qp(h)
            | AsyncElement::Srq(h)
            | AsyncElement::Wq(h) => crate::object::event_target(h).map(|t| t.context()),
            AsyncElement::Port(_) | AsyncElement::Device => None,
        };
        AsyncEvent {
            event_type: t,
            element,
            context,
        }
    }
}

impl AsyncEvent {
    /// uverbs' own [`AsyncEventType::DEVICE_REMOVED`] event.
    pub(crate) fn device_removed() -> Self {
        AsyncEvent {
            event_type: AsyncEventType::DEVICE_REMOVED,
            element: AsyncElement::Device,
            context: None,
        }
    }
}

impl Context {
    /// Waits for the next async event (`ibv_get_async_event`).
    ///
    /// - `None`: blocks until an event arrives, as `ibv_get_async_event` does; never times out.
    /// - `Some(t)`: waits at most `t`; if no event arrived by then, fails with `ETIMEDOUT`.
    ///   `Some(Duration::ZERO)` only checks for an event already queued.
    ///
    /// Besides the kernel's events it returns, once, uverbs' own
    /// [`AsyncEventType::DEVICE_REMOVED`] when the device is removed: the wait wakes for it.
    #[doc(alias = "ibv_get_async_event")]
    pub fn get_async_event(&self, timeout: Option<Duration>) -> Result<AsyncEvent> {
        self.async_event(timeout, OnSignal::Restart)
    }

    /// [`Context::get_async_event`], but a signal handler that runs while it waits ends the
    /// wait with `EINTR` (as it ends libibverbs' blocking `read` of the async fd; unlike that
    /// `read`, also when the handler was installed with `SA_RESTART`, since the wait is a
    /// `poll(2)` that also watches for the device's removal). For uverbs' libibverbs.
    #[doc(hidden)]
    pub fn get_async_event_interruptible(&self, timeout: Option<Duration>) -> Result<AsyncEvent> {
        self.async_event(timeout, OnSignal::Interrupt)
    }

    fn async_event(&self, timeout: Option<Duration>, on_signal: OnSignal) -> Result<AsyncEvent> {
        let op = "get_async_event";
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            if let Some(ev) = self.take_removed_event() {
                return Ok(ev);
            }
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            let removal = self.inner.channel.state.pending_wake_fd();
            let [kernel, _] =
                wait_either(self.async_fd(), removal, left, op, self.label(), on_signal)?;
            if kernel {
                return self.read_async_event(op);
            }
            if removal.is_none() || deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                if let Some(ev) = self.take_removed_event() {
                    return Ok(ev);
                }
                return Err(Error::invalid(
                    op,
                    self.label().to_string(),
                    Errno::TIMEDOUT,
                    "no async event arrived in time",
                ));
            }
        }
    }

    /// The `DEVICE_REMOVED` event, if it is due (then it counts as delivered).
    pub(crate) fn take_removed_event(&self) -> Option<AsyncEvent> {
        self.inner
            .channel
            .state
            .take_event()
            .then(AsyncEvent::device_removed)
    }

    /// Reads one kernel record (the fd is readable, or non-blocking).
    pub(crate) fn read_async_event(&self, op: &'static str) -> Result<AsyncEvent> {
        let d: IbUverbsAsyncEventDesc =
            read_record(self.async_fd(), op, self.label(), OnSignal::Restart)?;
        let ev = AsyncEvent::from_desc(&d);
        if let (AsyncEventType::SRQ_LIMIT_REACHED, AsyncElement::Srq(h)) =
            (ev.event_type, ev.element)
        {
            // The kernel disarmed the limit when it fired: so does `Srq::attr`.
            if let Some(t) = crate::object::event_target(h) {
                t.set_srq_limit(0);
            }
        }
        if ev.event_type == AsyncEventType::DEVICE_FATAL {
            self.inner.channel.state.fatal_delivered();
        }
        Ok(ev)
    }
}

fn wait_readable(
    fd: BorrowedFd<'_>,
    timeout: Option<Duration>,
    op: &'static str,
    label: &str,
) -> Result<bool> {
    Ok(wait_either(fd, None, timeout, op, label, OnSignal::Restart)?[0])
}

/// What a wait or a read does when a signal handler interrupts it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnSignal {
    /// Carry on (the Rust API: a handler never ends a wait).
    Restart,
    /// Fail with `EINTR` (libibverbs' calls, which a handler may end).
    Interrupt,
}

/// Waits until `fd` or `other` is readable, up to `timeout`; says which are.
fn wait_either(
    fd: BorrowedFd<'_>,
    other: Option<BorrowedFd<'_>>,
    timeout: Option<Duration>,
    op: &'static str,
    label: &str,
    on_signal: OnSignal,
) -> Result<[bool; 2]> {
    let ts = timeout.map(|t| Timespec {
        tv_sec: t.as_secs() as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    let mut fds = [
        PollFd::new(&fd, PollFlags::IN),
        PollFd::new(&fd, PollFlags::IN),
    ];
    let n = match &other {
        Some(o) => {
            fds[1] = PollFd::new(o, PollFlags::IN);
            2
        }
        None => 1,
    };
    loop {
        match poll(&mut fds[..n], ts.as_ref()) {
            Ok(0) => return Ok([false, false]),
            Ok(_) => {
                return Ok([
                    !fds[0].revents().is_empty(),
                    n == 2 && !fds[1].revents().is_empty(),
                ])
            }
            Err(Errno::INTR) if on_signal == OnSignal::Restart => continue,
            Err(e) => return Err(Error::os(op, label.to_string(), e)),
        }
    }
}

fn read_record<T: FromBytes + zerocopy::IntoBytes>(
    fd: BorrowedFd<'_>,
    op: &'static str,
    label: &str,
    on_signal: OnSignal,
) -> Result<T> {
    let mut t = T::new_zeroed();
    let buf = t.as_mut_bytes();
    let n = loop {
        match rustix::io::read(fd, &mut *buf) {
            Ok(n) => break n,
            // A handler installed with SA_RESTART never gets here: the kernel restarts the read.
            Err(Errno::INTR) if on_signal == OnSignal::Restart => continue,
            Err(e) => return Err(Error::os(op, label.to_string(), e)),
        }
    };
    if n != std::mem::size_of::<T>() {
        return Err(Error::invalid(
            op,
            label.to_string(),
            Errno::IO,
            format!(
                "short event record: {n} of {} bytes",
                std::mem::size_of::<T>()
            ),
        ));
    }
    Ok(t)
}
