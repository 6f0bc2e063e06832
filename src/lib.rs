//! # uverbs — RDMA verbs in pure Rust
//!
//! uverbs talks to the Linux kernel's uverbs interface (`/dev/infiniband/uverbsN`) directly:
//! it encodes the `RDMA_VERBS_IOCTL` and `write()` commands itself, maps queue rings and
//! doorbells itself, and implements the work-queue and completion formats of soft-RoCE (rxe)
//! and AWS EFA. It links no C: no libibverbs, no rdma-core, no bindgen, so a program using it
//! builds as one fully static musl binary.
//!
//! The API follows the verbs man pages. Each call is where an `ibv_*` or `efadv_*` programmer
//! looks for it, under a Rust name with a doc alias of the C name:
//!
//! ```no_run
//! # fn main() -> uverbs::Result<()> {
//! let devices = uverbs::devices()?;                    // ibv_get_device_list
//! let ctx = uverbs::Context::open(&devices[0])?;        // ibv_open_device
//! let attr = ctx.query_device()?;                       // ibv_query_device
//! let pd = ctx.alloc_pd()?;                             // ibv_alloc_pd
//! println!("{} has {} ports, max_qp {}", ctx.device().name(), attr.phys_port_cnt, attr.max_qp);
//! # drop(pd); Ok(()) }
//! ```
//!
//! See `docs/architecture.md` for the layers, the command-channel seam and the ownership model.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod ah;
pub mod channel;
pub mod cm;
mod context;
mod cq;
mod cq_ex;
mod device;
mod efa;
mod error;
mod event;
mod mr;
mod mw;
mod object;
mod pd;
mod qp;
mod query;
pub mod raw;
mod removal;
mod rxe;
mod srq;
#[cfg(feature = "tokio")]
pub mod tokio;
mod wc;
mod wr;
mod xrcd;

pub use ah::{Ah, AhAttr, GlobalRoute};
pub use context::{Context, ProviderInfo};
pub use cq::{Cq, CqDestroyed, CqInitAttr};
pub use cq_ex::PollCq;
pub use device::{
    device_by_name, devices, devices_in, format_guid, format_guid_colon, Device, Driver, NodeType,
};
pub use efa::{
    EfaCqExtMem, EfaCqInitAttr, EfaCqInitFlags, EfaDeviceAttr, EfaDeviceCaps, EfaMrAttr,
    EfaQpFlags, EfaQpInitAttr, EfaWc, EfaWcFlags,
};
pub use error::{errno_name, Errno, Error, ErrorKind, Result};
pub use event::{AsyncElement, AsyncEvent, AsyncEventType, CompChannel, CqEvent};
pub use mr::{AccessFlags, Mr, MrBuffer, Sge};
pub use mw::{Mw, MwType};
pub use object::DestroyError;
pub use pd::Pd;
pub use qp::{
    Qp, QpAttr, QpAttrMask, QpCap, QpDestroyed, QpInitAttr, QpQuery, QpState, QpType, SendOpsFlags,
    WrBatch,
};
pub use query::{
    format_fw_ver, speed_str, AtomicCap, CqModerationCaps, DeviceAttr, DeviceAttrEx,
    DeviceCapFlags, Gid, GidEntry, GidType, LinkLayer, Mtu, OdpCaps, OdpGeneralCaps,
    OdpTransportCaps, PacketPacingCaps, PciAtomicCaps, PortAttr, PortState, RssCaps, TmCaps,
    TsoCaps, IBV_DEVICE_CC_DMA_BOUNCE, IBV_DEVICE_PCI_WRITE_END_PADDING,
    IBV_DEVICE_RAW_SCATTER_FCS,
};
pub use removal::{RemovalSource, RemovalWatch};
pub use srq::{Srq, SrqAttr, SrqAttrMask, SrqDestroyed, SrqInitAttrEx, SrqType};
pub use wc::{Wc, WcFlags, WcOpcode, WcStatus};
pub use wr::{PostError, RecvWr, SendFlags, SendWr, UdDest, WrData, WrOp};
pub use xrcd::{Xrcd, XRCD_O_CREAT, XRCD_O_EXCL};

/// The ABI structs this crate speaks, re-exported for the raw API and device models.
pub use uverbs_uapi as uapi;

use std::sync::atomic::{AtomicUsize, Ordering};

static DROP_ERRORS: AtomicUsize = AtomicUsize::new(0);

/// Reports a failure to destroy a kernel object or mapping during `drop`.
///
/// `Drop` cannot return an error, and ignoring one would hide a leak, so it is written to
/// standard error and counted ([`drop_error_count`]). Objects that can fail to close offer an
/// explicit `destroy()` returning the error instead.
pub(crate) fn report_drop_error(op: &'static str, object: &str, errno: Errno) {
    DROP_ERRORS.fetch_add(1, Ordering::Relaxed);
    eprintln!(
        "uverbs: {op} on {object} failed while dropping it ({}: {errno}); the kernel object may leak",
        errno_name(errno)
    );
}

/// How many destroy calls made while dropping objects have failed in this process.
pub fn drop_error_count() -> usize {
    DROP_ERRORS.load(Ordering::Relaxed)
}
