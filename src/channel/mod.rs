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
//! write command's request bytes. Implementing it is `unsafe`: uverbs owns the fd numbers a
//! channel returns (see the trait's `Safety` section).
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
/// Implementations should behave as the kernel does: return the errno the kernel would, and
/// write only the output buffers the command names. What uverbs must be able to rely on for
/// memory safety, whatever else the channel gets wrong, is in the `Safety` section; everything
/// else a channel answers (handles, keys, sizes, ring contents) uverbs checks, as it checks the
/// kernel's.
///
/// # Safety
///
/// uverbs takes ownership of file descriptor numbers a channel writes into a response, and
/// writes to the fd [`Channel::doorbell_fd`] returns for as long as the channel lives. So an
/// implementation must guarantee, for every call of its methods:
///
/// 1. **A new fd is new, and handed over.** Where the kernel ABI says a successful command
///    returns a new file descriptor — the `async_fd` of `IB_USER_VERBS_CMD_GET_CONTEXT`, the
///    `fd` of `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`, the data of an attribute its method
///    declares a new fd (`UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE`,
///    `UVERBS_ATTR_ALLOC_DMABUF_HANDLE`) — any number the channel writes there before returning
///    `Ok` is an open fd created for this call, whose ownership passes to the caller: nothing
///    else in the process refers to it, uses it or will close it. Leaving such a field
///    unwritten hands nothing over (uverbs puts an invalid number in the fields it reads before
///    the call), and so does failing the command.
/// 2. **The doorbell fd stays open.** Every fd `doorbell_fd` returns stays open, as the same
///    file, until the channel is dropped: an rxe QP writes its send doorbell to that fd number
///    for as long as it lives, and it keeps the context, hence the channel, alive.
///
/// A channel that breaks either would let uverbs close, or write to, an fd that belongs to
/// someone else (stdin, a socket, a file another `OwnedFd` owns). That is why implementing the
/// trait is `unsafe` while [`Context::with_channel`](crate::Context::with_channel) is not. A
/// channel that forwards to another one keeps both promises by forwarding every command
/// unchanged and returning the inner channel's doorbell fd.
///
/// A plain `impl` does not compile:
///
/// ```compile_fail,E0200
/// use std::os::fd::BorrowedFd;
/// use uverbs::channel::{Channel, IoctlCmd, MapKind, Mapping, WriteCmd};
/// use uverbs::Errno;
///
/// #[derive(Debug)]
/// struct Unchecked;
///
/// impl Channel for Unchecked {
///     fn ioctl(&self, _: &mut IoctlCmd<'_>) -> Result<(), Errno> { Ok(()) }
///     fn write(&self, _: &mut WriteCmd) -> Result<(), Errno> { Ok(()) }
///     fn mmap(&self, _: u64, _: usize, _: MapKind) -> Result<Mapping, Errno> {
///         Err(Errno::INVAL)
///     }
///     fn doorbell_fd(&self) -> Option<BorrowedFd<'_>> { None }
///     fn driver_id(&self) -> u32 { 0 }
/// }
/// ```
///
/// An implementation says why it keeps the contract. This one is enough to open a context (an
/// rxe device with no rings): GET_CONTEXT gets a fresh eventfd, every other command fails.
///
/// ```
/// use std::os::fd::IntoRawFd;
/// use uverbs::channel::{Channel, IoctlCmd, WriteCmd};
/// use uverbs::uapi::{ioctl::RDMA_DRIVER_RXE, write::IB_USER_VERBS_CMD_GET_CONTEXT};
/// use uverbs::{Context, Device, Driver, Errno};
///
/// #[derive(Debug)]
/// struct ContextOnly;
///
/// // SAFETY: the only fd number this channel writes is the `async_fd` of GET_CONTEXT, an
/// // eventfd it creates in that call and gives up (`into_raw_fd`) as it writes the number;
/// // it has no doorbell fd.
/// unsafe impl Channel for ContextOnly {
///     fn ioctl(&self, _: &mut IoctlCmd<'_>) -> Result<(), Errno> {
///         Err(Errno::OPNOTSUPP)
///     }
///     fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
///         if cmd.command() != IB_USER_VERBS_CMD_GET_CONTEXT || cmd.is_extended() {
///             return Err(Errno::OPNOTSUPP);
///         }
///         let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
///         let fd = fd.into_raw_fd() as u32;
///         cmd.response_mut()[..4].copy_from_slice(&fd.to_ne_bytes()); // async_fd
///         Ok(())
///     }
///     fn driver_id(&self) -> u32 {
///         RDMA_DRIVER_RXE
///     }
/// }
///
/// let ctx = Context::with_channel(Device::synthetic("rxe_doc", Driver::Rxe, 1),
///                                 Box::new(ContextOnly))?;
/// let e = ctx.alloc_pd().unwrap_err();
/// assert!(e.is(Errno::OPNOTSUPP), "{e}");
/// # Ok::<(), uverbs::Error>(())
/// ```
// The one `unsafe` declaration of this module: the contract above is what implementations
// prove.
#[allow(unsafe_code)]
pub unsafe trait Channel: Send + Sync + fmt::Debug {
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

    /// Maps `len` bytes of queue memory or a doorbell page at the kernel-given `offset`. By
    /// default `EOPNOTSUPP`: a channel that maps no device memory (a test double) need not
    /// say so.
    fn mmap(&self, offset: u64, len: usize, kind: MapKind) -> Result<Mapping, Errno> {
        let _ = (offset, len, kind);
        Err(Errno::OPNOTSUPP)
    }

    /// The fd a send doorbell `write()` goes to (rxe kicks the kernel this way after posting).
    /// `None` (the default) when the channel has no such fd (device models of devices with
    /// mmapped doorbells, test doubles). It must stay open until the channel is dropped (see
    /// the trait's `Safety` section).
    fn doorbell_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// The fd the commands go to, when there is one: the kernel channel's
    /// `/dev/infiniband/uverbsN` (what rdma-core calls `ibv_context.cmd_fd`). `None` (the
    /// default) for channels that are not a kernel device file (device models, test doubles).
    /// Only for showing it to others (`ibv_context.cmd_fd`); commands go through the channel.
    fn command_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// The driver id placed in every ioctl header (`enum rdma_driver_id`).
    fn driver_id(&self) -> u32;
}
