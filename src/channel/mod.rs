//! The command channel: how verbs reach the kernel (or a device model standing in for it).
//!
//! Every control-path verb is one of three things:
//! - an `RDMA_VERBS_IOCTL` call, built with [`IoctlCmd`] (object, method, attributes);
//! - a legacy or extended `write()` command, built with [`WriteCmd`];
//! - an `mmap` of kernel queue memory or a doorbell page, owned by a [`Mapping`].
//!
//! [`Channel`] is the seam between the object model and whatever answers these commands. The
//! real implementation is [`KernelChannel`] over an open `/dev/infiniband/uverbsN`. A test can
//! supply its own implementation (the EFA device model does) that sees exactly the bytes the
//! kernel would see: the ioctl header and attribute array as laid out for the syscall, and the
//! write command's request bytes.
//!
//! The channel is control path only. The data path never goes through it (no indirect call per
//! post or poll): rings and doorbells are reached through mappings made here, and rxe's send
//! doorbell is a `write()` on the raw fd that [`Channel::doorbell_fd`] hands out.
//!
//! Building a command needs no device; this is `UVERBS_METHOD_QUERY_PORT` for port 1, as
//! [`crate::Context::query_port`] sends it (a device model sees the same attributes):
//!
//! ```
//! use uverbs::channel::{AttrKind, IoctlCmd};
//! use uverbs::uapi::cmds::{
//!     UVERBS_ATTR_QUERY_PORT_PORT_NUM, UVERBS_ATTR_QUERY_PORT_RESP, UVERBS_METHOD_QUERY_PORT,
//!     UVERBS_OBJECT_DEVICE,
//! };
//!
//! let mut resp = [0u8; 64];
//! let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
//! cmd.u32_in(UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
//!     .ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp[..]);
//! let attrs: Vec<_> = cmd.attrs().map(|a| (a.id(), a.kind(), a.len())).collect();
//! assert_eq!(attrs.len(), 2);
//! assert_eq!(attrs[0].0, UVERBS_ATTR_QUERY_PORT_PORT_NUM);
//! assert_eq!(attrs[1], (UVERBS_ATTR_QUERY_PORT_RESP, AttrKind::PtrOut, 64));
//! ```

mod ioctl;
mod kernel;
mod mapping;
mod trace;
mod write;

use std::fmt;
use std::os::fd::BorrowedFd;

pub use ioctl::{AttrKind, AttrMut, AttrRef, IoctlCmd, MAX_ATTRS};
pub use kernel::KernelChannel;
pub use mapping::{anonymous, Mapping};
pub(crate) use trace::enabled as trace_enabled;
pub use trace::{describe_ioctl, describe_write, TraceChannel, TraceSetting, TRACE_VAR};
pub use write::WriteCmd;

pub use crate::error::Errno;

/// How a mapping will be used; decides protection and (for device memory) caching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    /// Queue memory both sides read and write (rings, index pages).
    ReadWrite,
    /// Memory we only read (e.g. a completion ring the device fills).
    ReadOnly,
    /// Device memory we only write: doorbells and write-combined queues (EFA LLQ).
    WriteOnly,
}

/// What answers verbs commands: the kernel, or a model of a device behind the same seam.
///
/// Implementations must behave as the kernel does: return the errno the kernel would, write
/// only the output buffers the command names, and hand out file descriptors (async event fd,
/// completion channel fd) that the caller then owns.
pub trait Channel: Send + Sync + fmt::Debug {
    /// Issues an `RDMA_VERBS_IOCTL` call. On success the command's outputs are filled.
    fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno>;

    /// Issues an `RDMA_VERBS_IOCTL` call with the header exactly as the caller left it
    /// (length, attribute count, reserved fields, driver id), for tests of what the kernel
    /// rejects. Channels that are not the kernel may treat it like [`Channel::ioctl`].
    fn ioctl_raw(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        self.ioctl(cmd)
    }

    /// Issues a legacy or extended `write()` command. On success its response is filled.
    fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno>;

    /// Maps `len` bytes of queue memory or a doorbell page at the kernel-given `offset`.
    fn mmap(&self, offset: u64, len: usize, kind: MapKind) -> Result<Mapping, Errno>;

    /// The fd a send doorbell `write()` goes to (rxe kicks the kernel this way after posting).
    /// `None` when the channel has no such fd (device models of devices with mmapped doorbells).
    fn doorbell_fd(&self) -> Option<BorrowedFd<'_>>;

    /// The driver id placed in every ioctl header (`enum rdma_driver_id`).
    fn driver_id(&self) -> u32;
}
