//! The device context (`ibv_open_device`, `ibv_close_device`): the root of the object tree.
//!
//! A [`Context`] owns the command channel (the uverbs fd), the async event fd and what the
//! provider learned at get-context time. Every object made from it holds a clone of the
//! context, so the fd stays open until the last object is gone and objects are always
//! destroyed before their parents.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use uverbs_uapi::efa::{
    EfaIbvAllocUcontextCmd, EfaIbvAllocUcontextResp, EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_MIN_SQ_WR,
    EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_TX_BATCH,
};
use uverbs_uapi::write::{
    IbUverbsGetContext, IbUverbsGetContextResp, IB_USER_VERBS_CMD_GET_CONTEXT,
};
use zerocopy::IntoBytes;

use crate::channel::{Channel, IoctlCmd, KernelChannel, WriteCmd};
use crate::device::{Device, Driver};
use crate::error::{Errno, Error, Result};

/// What the provider learned when the context was created.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderInfo {
    /// Soft-RoCE: no driver data at get-context time.
    Rxe,
    /// EFA: the driver's `efa_ibv_alloc_ucontext_resp`.
    Efa(EfaIbvAllocUcontextResp),
}

pub(crate) struct ContextInner {
    pub(crate) channel: Box<dyn Channel>,
    pub(crate) device: Device,
    pub(crate) async_fd: OwnedFd,
    pub(crate) num_comp_vectors: u32,
    pub(crate) provider: ProviderInfo,
    /// `"device rxe0"`, for error messages.
    pub(crate) label: String,
    /// EFA: the driver part of the extended QUERY_DEVICE, queried once on first use (the
    /// device's limits never change) by `crate::efa`.
    pub(crate) efa_dev: std::sync::OnceLock<uverbs_uapi::efa::EfaIbvExQueryDeviceResp>,
}

/// An open RDMA device (`struct ibv_context`). Cheap to clone; the device closes when the
/// last clone and the last object made from it are dropped.
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
    #[doc(alias = "ibv_open_device")]
    pub fn open(device: &Device) -> Result<Context> {
        let label = format!("device {}", device.name());
        let Some(driver_id) = device.driver().driver_id() else {
            return Err(Error::invalid(
                "open_device",
                label,
                Errno::OPNOTSUPP,
                format!(
                    "driver {} is not supported by uverbs (rxe and efa are)",
                    device.driver()
                ),
            ));
        };
        let channel = KernelChannel::open(device.dev_path(), driver_id).map_err(|e| {
            let why = match e {
                Errno::NOENT => "the uverbs character device does not exist",
                Errno::ACCESS | Errno::PERM => "no permission to open the uverbs character device",
                _ => "cannot open the uverbs character device",
            };
            Error::os("open_device", label.clone(), e)
                .with_reason(format!("{why} {}", device.dev_path().display()))
        })?;
        Context::with_channel(device.clone(), Box::new(channel))
    }

    /// Creates a context over any [`Channel`] (a device model in tests, or the kernel).
    ///
    /// With `UVERBS_TRACE=1` in the environment, every command the context sends is printed on
    /// standard error ([`TraceChannel`](crate::channel::TraceChannel)).
    pub fn with_channel(device: Device, channel: Box<dyn Channel>) -> Result<Context> {
        let channel: Box<dyn Channel> = if crate::channel::trace_enabled() {
            Box::new(crate::channel::TraceChannel::new(channel, device.name()))
        } else {
            channel
        };
        let label = format!("device {}", device.name());
        let op = "get_context";
        let (mut cmd, efa) = match device.driver() {
            Driver::Efa => {
                let drv = EfaIbvAllocUcontextCmd {
                    supported_caps: EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_TX_BATCH
                        | EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_MIN_SQ_WR,
                    ..Default::default()
                };
                let resp_len = std::mem::size_of::<EfaIbvAllocUcontextResp>();
                (
                    legacy_cmd(
                        IB_USER_VERBS_CMD_GET_CONTEXT,
                        &IbUverbsGetContext::default(),
                        drv.as_bytes(),
                        std::mem::size_of::<IbUverbsGetContextResp>(),
                        resp_len,
                    ),
                    true,
                )
            }
            Driver::Rxe => (
                legacy_cmd(
                    IB_USER_VERBS_CMD_GET_CONTEXT,
                    &IbUverbsGetContext::default(),
                    &[],
                    std::mem::size_of::<IbUverbsGetContextResp>(),
                    0,
                ),
                false,
            ),
            Driver::Unsupported(name) => {
                return Err(Error::invalid(
                    "open_device",
                    label,
                    Errno::OPNOTSUPP,
                    format!("driver {name} is not supported"),
                ))
            }
        };
        channel
            .write(&mut cmd)
            .map_err(|e| Error::os(op, label.clone(), e))?;
        let resp: IbUverbsGetContextResp = cmd.response_as();
        // The kernel installed a new fd in our table: own it before anything can fail.
        let async_fd = own_fd(resp.async_fd).ok_or_else(|| {
            Error::invalid(
                op,
                label.clone(),
                Errno::BADF,
                "kernel returned no async event fd",
            )
        })?;
        let provider = if efa {
            let r: EfaIbvAllocUcontextResp = cmd.driver_response_as();
            if r.cmds_supp_udata_mask & uverbs_uapi::efa::EFA_USER_CMDS_SUPP_UDATA_CREATE_AH == 0 {
                return Err(Error::invalid(
                    op,
                    label,
                    Errno::OPNOTSUPP,
                    "the EFA kernel driver does not return AH numbers (too old)",
                ));
            }
            ProviderInfo::Efa(r)
        } else {
            ProviderInfo::Rxe
        };
        Ok(Context {
            inner: Arc::new(ContextInner {
                channel,
                device,
                async_fd,
                num_comp_vectors: resp.num_comp_vectors,
                provider,
                label,
                efa_dev: std::sync::OnceLock::new(),
            }),
        })
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

    /// The command channel, for the raw API and tests of what the kernel rejects.
    pub fn channel(&self) -> &dyn Channel {
        &*self.inner.channel
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
            .map_err(|e| Error::os(op, object(), e))
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
            .map_err(|e| Error::os(op, object(), e))
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

/// Takes ownership of an fd number the kernel just installed for us.
#[allow(unsafe_code)]
pub(crate) fn own_fd(raw: u32) -> Option<OwnedFd> {
    let raw = i32::try_from(raw).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: the kernel (or a device model behaving like it) created this fd for us in this
    // call and nothing else in the process refers to it; we take sole ownership here.
    Some(unsafe { OwnedFd::from_raw_fd(raw) })
}
