//! The device context (`ibv_open_device`, `ibv_close_device`): the root of the object tree.
//!
//! A [`Context`] owns the command channel (the uverbs fd), the async event fd and what the
//! provider learned at get-context time. Every object made from it holds a clone of the
//! context, so the fd stays open until the last object is gone and objects are always
//! destroyed before their parents.
//!
//! A context opened on a kernel device is watched for the device's removal (see
//! `src/removal.rs`): [`Context::is_device_removed`] is one atomic load, and the async event
//! stream carries [`crate::AsyncEventType::DEVICE_REMOVED`].

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use uverbs_uapi::write::{
    IbUverbsCreateCompChannelResp, IbUverbsGetContext, IbUverbsGetContextResp,
    IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, IB_USER_VERBS_CMD_GET_CONTEXT,
};
use zerocopy::IntoBytes;

use crate::channel::{Channel, IoctlCmd, KernelChannel, WriteCmd};
use crate::device::Device;
use crate::error::{Errno, Error, Result};
use crate::provider::{dispatch, DeviceOps, ProviderCtx, ProviderInfo};
use crate::removal::{
    CheckedChannel, Identity, Registration, RemovalSource, RemovalWatch, Roots, State,
};

pub(crate) struct ContextInner {
    /// The command channel; destroys after a disassociation count as done (`removal.rs`).
    pub(crate) channel: CheckedChannel,
    /// The removal watcher's hold on this context (`None`: not a kernel device, or the
    /// identity of its fd could not be read).
    pub(crate) registration: Option<Registration>,
    pub(crate) device: Device,
    pub(crate) async_fd: OwnedFd,
    pub(crate) num_comp_vectors: u32,
    pub(crate) provider: ProviderInfo,
    /// `"device rxe0"`, for error messages.
    pub(crate) label: String,
    /// The provider's half of the context (`crate::provider::DeviceOps`).
    pub(crate) provider_ctx: ProviderCtx,
}

/// An open RDMA device (`struct ibv_context`). Cheap to clone; the device closes when the
/// last clone and the last object made from it are dropped.
///
/// Open one from a [`Device`] with [`Context::open`]; then ask the device what it offers and
/// make the objects everything else hangs off (this one runs on the EFA device model of
/// `uverbs-efa-model`, which stands in for the `Context::open` line):
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// // let ctx = uverbs::Context::open(uverbs::devices()?.first().ok_or("no RDMA device")?)?;
/// let dev = ctx.query_device()?;                  // ibv_query_device
/// let port = ctx.query_port(1)?;                  // ibv_query_port
/// let gid = ctx.query_gid(1, 0)?;                 // ibv_query_gid
/// println!("{}: max_qp {}, port 1 {} {:?}, GID {gid}",
///          ctx.device().name(), dev.max_qp, port.state.as_str(), port.active_mtu);
/// assert!(port.gid_tbl_len >= 1 && !gid.is_zero());
/// let pd = ctx.alloc_pd()?;                       // ibv_alloc_pd
/// # drop(pd);
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_context")]
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.device.name())
            .field("provider", &self.inner.provider)
            .finish()
    }
}

impl Context {
    /// Opens `device` and creates a user context on it (`ibv_open_device`).
    ///
    /// The first device uverbs drives (rxe or EFA; [`uverbs::devices`](crate::devices) also
    /// lists the others, which [`Device::is_supported`] tells apart), or a message when there
    /// is none:
    ///
    /// ```no_run
    /// # fn main() -> uverbs::Result<()> {
    /// let devices = uverbs::devices()?;
    /// let Some(dev) = devices.iter().find(|d| d.is_supported()) else {
    ///     eprintln!("no rxe or EFA device on this host");
    ///     return Ok(());
    /// };
    /// let ctx = uverbs::Context::open(dev)?;
    /// println!("{} ({}): {} completion vectors", dev.name(), dev.driver(), ctx.num_comp_vectors());
    /// # Ok(()) }
    /// ```
    #[doc(alias = "ibv_open_device")]
    pub fn open(device: &Device) -> Result<Context> {
        let label = format!("device {}", device.name());
        // A driver uverbs does not drive is refused here, with the reason.
        ProviderCtx::context_udata(device.driver(), &label)?;
        let driver_id = device.driver().driver_id().ok_or_else(|| {
            Error::invalid(
                "open_device",
                label.clone(),
                Errno::OPNOTSUPP,
                "no driver id",
            )
        })?;
        let channel = KernelChannel::open(device.dev_path(), driver_id).map_err(|e| {
            let why = match e {
                Errno::NOENT => "the uverbs character device does not exist",
                Errno::ACCESS | Errno::PERM => "no permission to open the uverbs character device",
                // A node that outlived its device (a container's static /dev after a removal).
                Errno::NXIO | Errno::NODEV => {
                    "no device is behind the uverbs character device (removed?)"
                }
                _ => "cannot open the uverbs character device",
            };
            Error::os("open_device", label.clone(), e)
                .with_reason(format!("{why} {}", device.dev_path().display()))
        })?;
        // Watch before checking: a removal after the check is then seen by the watcher, one
        // before it by the check.
        let roots = Roots::system();
        let id = Identity::of(
            channel.fd(),
            device.uverbs_name(),
            device.name(),
            device.dev_path(),
            &roots,
        );
        let state = State::new(id.is_some());
        let registration = id.map(|id| Registration::new(id, state.clone()));
        let ctx = Context::build(device.clone(), Box::new(channel), state, registration)?;
        if let Some(r) = &ctx.inner.registration {
            if let Err(why) = r.identity().check_at_open(&roots) {
                ctx.inner.channel.state.mark(RemovalSource::AtOpen);
                return Err(Error::device_removed(
                    "open_device",
                    label,
                    device.name(),
                    Errno::NODEV,
                )
                .with_reason(format!("device {} was removed: {why}", device.name())));
            }
        }
        Ok(ctx)
    }

    /// Creates a context over any [`Channel`] (a device model in tests, or the kernel).
    ///
    /// Safe, because implementing [`Channel`] is not: the channel has promised that the fd
    /// numbers it returns are new and handed over, so the context may own and close them.
    ///
    /// Such a context is not watched for removal (there is no device node to watch); it
    /// still learns of one from `DEVICE_FATAL` and from commands failing with `EIO`.
    ///
    /// With `UVERBS_TRACE=1` in the environment, every command the context sends is printed on
    /// standard error ([`TraceChannel`](crate::channel::TraceChannel)).
    pub fn with_channel(device: Device, channel: Box<dyn Channel>) -> Result<Context> {
        Context::build(device, channel, State::new(false), None)
    }

    pub(crate) fn build(
        device: Device,
        channel: Box<dyn Channel>,
        state: std::sync::Arc<State>,
        registration: Option<Registration>,
    ) -> Result<Context> {
        let channel: Box<dyn Channel> = if crate::channel::trace_enabled() {
            Box::new(crate::channel::TraceChannel::new(channel, device.name()))
        } else {
            channel
        };
        let label = format!("device {}", device.name());
        let op = "get_context";
        let (driver_in, driver_resp_len) = ProviderCtx::context_udata(device.driver(), &label)?;
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_GET_CONTEXT,
            &IbUverbsGetContext::default(),
            &driver_in,
            std::mem::size_of::<IbUverbsGetContextResp>(),
            driver_resp_len,
        );
        // The kernel installs a new fd in our table: owned before anything can fail.
        let async_fd = write_new_fd(&*channel, &mut cmd)
            .map_err(|e| Error::os(op, label.clone(), e))?
            .ok_or_else(|| {
                Error::invalid(
                    op,
                    label.clone(),
                    Errno::BADF,
                    "kernel returned no async event fd",
                )
            })?;
        let resp: IbUverbsGetContextResp = cmd.response_as();
        let provider_ctx =
            ProviderCtx::from_context(device.driver(), cmd.driver_response(), op, &label)?;
        let ctx = Context {
            inner: Arc::new(ContextInner {
                channel: CheckedChannel::new(channel, state),
                registration,
                device,
                async_fd,
                num_comp_vectors: resp.num_comp_vectors,
                provider: dispatch!(ProviderCtx, &provider_ctx, p => p.info()),
                provider_ctx,
                label,
            }),
        };
        dispatch!(ProviderCtx, &ctx.inner.provider_ctx, p => p.opened(&ctx))?;
        Ok(ctx)
    }

    /// The device this context is open on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// What the provider learned at open time.
    pub fn provider(&self) -> &ProviderInfo {
        &self.inner.provider
    }

    /// Number of completion vectors (`ibv_context.num_comp_vectors`).
    pub fn num_comp_vectors(&self) -> u32 {
        self.inner.num_comp_vectors
    }

    /// The async event fd (`ibv_context.async_fd`), for `epoll`; read events with
    /// [`Context::get_async_event`].
    pub fn async_fd(&self) -> BorrowedFd<'_> {
        self.inner.async_fd.as_fd()
    }

    /// The command fd (`ibv_context.cmd_fd`): the `/dev/infiniband/uverbsN` file this context
    /// sends its commands on, or `None` when its channel is not a kernel device file (a
    /// device model). For passing to other programs or `fstat`; sending commands on it
    /// behind the context's back is the caller's risk.
    #[doc(alias = "cmd_fd")]
    pub fn command_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.channel.command_fd()
    }

    /// The command channel, for the raw API and tests of what the kernel rejects.
    pub fn channel(&self) -> &dyn Channel {
        &self.inner.channel
    }

    /// Whether this context's device is known to be removed: one atomic load, cheap enough
    /// for a busy poll loop to check every round.
    ///
    /// Set by the removal watcher (the kernel's uevent, the `/dev` node, sysfs), by reading
    /// `DEVICE_FATAL` from the async fd, or by a command failing with `EIO` on a disassociated
    /// device. Once set it stays set. What to do then: stop posting, destroy every object of
    /// this context and drop it — for drivers without disassociation (rxe) the kernel's
    /// removal waits until then.
    pub fn is_device_removed(&self) -> bool {
        self.inner.channel.state.is_removed()
    }

    /// How the removal was learned (`None` while the device is present).
    pub fn removal_source(&self) -> Option<RemovalSource> {
        self.inner.channel.state.source()
    }

    /// Which mechanisms watch this context for removal (all `false` for a context not on a
    /// kernel device, or when none could be set up).
    pub fn removal_watch(&self) -> RemovalWatch {
        self.inner.channel.state.watch()
    }

    /// An fd that becomes readable (and stays readable) once the device is known to be
    /// removed, for a program's own `epoll` set; never read it. `None` for a context that is
    /// not watched. [`Context::get_async_event`] and the completion-channel waits already
    /// poll it.
    pub fn removal_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.channel.state.wake_fd()
    }

    /// The error for a command that failed with `errno`: a removed device when the kernel
    /// says `EIO` and the device is confirmed gone, otherwise the errno as it is.
    pub(crate) fn command_error(&self, op: &'static str, object: String, errno: Errno) -> Error {
        if errno == Errno::IO && self.inner.channel.confirm_removed() {
            return Error::device_removed(op, object, self.device().name(), errno);
        }
        Error::os(op, object, errno)
    }

    pub(crate) fn label(&self) -> &str {
        &self.inner.label
    }

    /// Runs a write command, mapping failure to an error naming `op` and `object`.
    pub(crate) fn write_cmd(
        &self,
        op: &'static str,
        object: &dyn Fn() -> String,
        cmd: &mut WriteCmd,
    ) -> Result<()> {
        self.inner
            .channel
            .write(cmd)
            .map_err(|e| self.command_error(op, object(), e))
    }

    /// Runs an ioctl command, mapping failure to an error naming `op` and `object`.
    pub(crate) fn ioctl_cmd(
        &self,
        op: &'static str,
        object: &dyn Fn() -> String,
        cmd: &mut IoctlCmd<'_>,
    ) -> Result<()> {
        if let Some(why) = cmd.encoding_error() {
            return Err(Error::invalid(op, object(), Errno::INVAL, why));
        }
        self.inner
            .channel
            .ioctl(cmd)
            .map_err(|e| self.command_error(op, object(), e))
    }
}

/// Builds a legacy command whose sizes are fixed by the ABI structs (cannot fail).
pub(crate) fn legacy_cmd<T: IntoBytes + zerocopy::Immutable>(
    command: u32,
    core: &T,
    driver_in: &[u8],
    core_resp: usize,
    driver_resp: usize,
) -> WriteCmd {
    WriteCmd::legacy(command, core, driver_in, core_resp, driver_resp)
        .expect("ABI structs are multiples of 4 bytes")
}

/// What a response's new-fd field holds before the command is sent: no fd number (it is -1), so
/// a channel that answers without writing the field hands over nothing.
const NO_FD: u32 = u32::MAX;

/// Where the response of `cmd` carries the number of a new fd, for the commands that return
/// one (`ib_uverbs_get_context_resp.async_fd`, `ib_uverbs_create_comp_channel_resp.fd`).
fn new_fd_field(cmd: &WriteCmd) -> Option<std::ops::Range<usize>> {
    let at = match (cmd.command(), cmd.is_extended()) {
        (IB_USER_VERBS_CMD_GET_CONTEXT, false) => {
            std::mem::offset_of!(IbUverbsGetContextResp, async_fd)
        }
        (IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, false) => {
            std::mem::offset_of!(IbUverbsCreateCompChannelResp, fd)
        }
        _ => return None,
    };
    Some(at..at + 4)
}

/// Sends `cmd`, a command whose response carries a new fd (GET_CONTEXT, CREATE_COMP_CHANNEL),
/// through `channel`, and takes ownership of that fd. `Ok(None)`: the channel succeeded but
/// wrote no fd number there. `EINVAL` for a command that returns no fd (a bug of the caller).
#[allow(unsafe_code)]
pub(crate) fn write_new_fd(
    channel: &dyn Channel,
    cmd: &mut WriteCmd,
) -> std::result::Result<Option<OwnedFd>, Errno> {
    let field = new_fd_field(cmd).ok_or(Errno::INVAL)?;
    // Only a number the channel writes is covered by its contract; one it leaves (the zero the
    // buffer starts with would be stdin) must not be taken.
    cmd.response_mut()
        .get_mut(field.clone())
        .ok_or(Errno::INVAL)?
        .copy_from_slice(&NO_FD.to_ne_bytes());
    channel.write(cmd)?;
    let raw = u32::from_ne_bytes(cmd.response()[field].try_into().expect("a 4-byte range"));
    let Some(raw) = i32::try_from(raw).ok().filter(|&fd| fd >= 0) else {
        return Ok(None);
    };
    // `channel` answered `cmd` with `Ok`, and `raw` is a number it wrote (the field held NO_FD,
    // which the filter above refuses) where this command returns a new fd.
    // SAFETY: by the `Channel` contract (its `Safety` section, item 1) that number is an open fd
    // created for this call, handed to us, referred to by nothing else; owned here, at once.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(raw) }))
}

#[cfg(test)]
mod tests {

    use uverbs_uapi::write::{IbUverbsAllocPd, IbUverbsAllocPdResp, IB_USER_VERBS_CMD_ALLOC_PD};

    use super::*;

    /// Answers every write with a response of 7s: "fd 0x07070707" wherever it is read.
    #[derive(Debug)]
    struct Sevens;

    // SAFETY: it writes only the responses of commands that return no fd (on one that does it
    // panics before writing anything), and has no doorbell fd.
    #[allow(unsafe_code)]
    unsafe impl Channel for Sevens {
        fn ioctl(&self, _: &mut IoctlCmd<'_>) -> std::result::Result<(), Errno> {
            Err(Errno::OPNOTSUPP)
        }
        fn write(&self, cmd: &mut WriteCmd) -> std::result::Result<(), Errno> {
            assert!(
                new_fd_field(cmd).is_none(),
                "asked for a command that returns an fd"
            );
            cmd.response_mut().fill(7);
            Ok(())
        }
        fn driver_id(&self) -> u32 {
            uverbs_uapi::ioctl::RDMA_DRIVER_RXE
        }
    }

    /// Only the commands whose response carries a new fd have one taken from them: ALLOC_PD's
    /// first field is a handle, and asking for an fd there is refused before the channel sees
    /// the command.
    #[test]
    fn write_new_fd_refuses_a_command_that_returns_no_fd() {
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_ALLOC_PD,
            &IbUverbsAllocPd::default(),
            &[],
            std::mem::size_of::<IbUverbsAllocPdResp>(),
            0,
        );
        assert_eq!(write_new_fd(&Sevens, &mut cmd).unwrap_err(), Errno::INVAL);
        assert_eq!(cmd.response(), &[0; 4], "the channel was not asked");
    }
}
