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
//! let Some(device) = devices.first() else {
//!     eprintln!("no RDMA device on this host");
//!     return Ok(());
//! };
//! let ctx = uverbs::Context::open(device)?;             // ibv_open_device
//! let attr = ctx.query_device()?;                       // ibv_query_device
//! let pd = ctx.alloc_pd()?;                             // ibv_alloc_pd
//! println!("{} has {} ports, max_qp {}", ctx.device().name(), attr.phys_port_cnt, attr.max_qp);
//! # drop(pd); Ok(()) }
//! ```
//!
//! ## The five-minute path
//!
//! Open a device, register memory, bring up two queue pairs, send a message from one to the
//! other, poll both completion queues. UD works on both providers (EFA's reliable SRD is
//! the same code with `efadv_create_qp_ex` and `QpType::Srd`). This example runs for real in
//! `cargo test --doc`: its two devices are EFA device models (`uverbs-efa-model`), which is
//! what the hidden lines set up, and the model's devices run when `process` is called.
//!
//! ```
//! # let fabric = uverbs_efa_model::EfaFabric::new(1);
//! # let (model_a, model_b) = (fabric.add_device(Default::default()), fabric.add_device(Default::default()));
//! use uverbs::{AccessFlags, AhAttr, Context, Cq, GidQuery, GlobalRoute, Mr, Pd, Qp, QpAttr,
//!              QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Wc, WcFlags,
//!              WcStatus};
//! const QKEY: u32 = 0x1234;
//!
//! // 1. Open a device (each side its own; both may be the same device).
//! // let ctx_a = Context::open(uverbs::devices()?.first().ok_or("no RDMA device")?)?;
//! # let (ctx_a, ctx_b) = (model_a.open()?, model_b.open()?);
//!
//! // 2. On each side: a PD, registered memory, a CQ and a UD QP brought to RTS.
//! fn side(ctx: &Context) -> uverbs::Result<(Pd, Mr, Cq, Qp)> {
//!     let pd = ctx.alloc_pd()?;
//!     let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
//!     let cq = ctx.create_cq(16, None, 0)?;
//!     let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1,
//!                       max_inline_data: 0 };
//!     let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq, &cq, cap))?;
//!     let init = QpAttr { qp_state: QpState::Init, qkey: QKEY, port_num: 1, ..Default::default() };
//!     qp.modify(&init, QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::PKEY_INDEX
//!                      | QpAttrMask::PORT)?;
//!     qp.modify(&QpAttr { qp_state: QpState::Rtr, ..Default::default() }, QpAttrMask::STATE)?;
//!     qp.modify(&QpAttr { qp_state: QpState::Rts, ..Default::default() },
//!               QpAttrMask::STATE | QpAttrMask::SQ_PSN)?;
//!     Ok((pd, mr, cq, qp))
//! }
//! let (pd_a, mut mr_a, mut cq_a, mut qp_a) = side(&ctx_a)?;
//! let (_pd_b, mr_b, mut cq_b, mut qp_b) = side(&ctx_b)?;
//!
//! // 3. The receiver posts a buffer (with room for the 40-byte GRH rxe writes first).
//! qp_b.post_recv(&[RecvWr::new(1, &[mr_b.sge(0, 1024)?])])?;
//!
//! // 4. "Connect": each side finds the GID it is reached at (`find_gid`: on RoCE a RoCE v2 GID
//! //    whose address is ready, IPv4 first, or the one of the peer's address family with
//! //    `GidQuery::Peer(ip)`; on EFA index 0). The receiver's GID and QP number reach the
//! //    sender (over TCP, say), which makes an address handle from them and its own GID index.
//! let (gid_a, gid_b) = (ctx_a.find_gid(1, &GidQuery::Any)?, ctx_b.find_gid(1, &GidQuery::Any)?);
//! let qpn_b = qp_b.qp_num();
//! let ah = pd_a.create_ah(&AhAttr { is_global: true, port_num: 1,
//!     grh: GlobalRoute { dgid: gid_b.gid, sgid_index: gid_a.gid_index as u8, hop_limit: 1,
//!                        ..Default::default() }, ..Default::default() })?;
//!
//! // 5. Send.
//! mr_a.write(0, b"hello, verbs")?;
//! qp_a.post_send(&[SendWr::send(7).sge(&[mr_a.sge(0, 12)?]).signaled().ud(&ah, qpn_b, QKEY)])?;
//! # fabric.process();
//!
//! // 6. Poll: the send completes on A, the receive on B.
//! let mut wc = [Wc::default()];
//! while cq_a.poll(&mut wc)? == 0 {}
//! assert_eq!((wc[0].wr_id, wc[0].status), (7, WcStatus::SUCCESS));
//! while cq_b.poll(&mut wc)? == 0 {}
//! assert_eq!((wc[0].wr_id, wc[0].status, wc[0].src_qp), (1, WcStatus::SUCCESS, qp_a.qp_num()));
//! let at = if wc[0].wc_flags.contains(WcFlags::GRH) { 40 } else { 0 };
//! let mut got = [0u8; 12];
//! mr_b.read(at, &mut got)?;
//! assert_eq!(&got, b"hello, verbs");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! More, to copy: `examples/` (RC RDMA write/read, SRQ server, completion channel, tokio,
//! EFA SRD, one UD program for rxe and EFA). To test EFA code without EFA hardware, see the
//! `uverbs-efa-model` crate.
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
mod provider;
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
pub use context::Context;
pub use cq::{Cq, CqDestroyed, CqInitAttr};
pub use cq_ex::PollCq;
pub use device::{
    device_by_name, devices, devices_in, format_guid, format_guid_colon, Device, NodeType,
};
pub use efa::{
    CompCntrOps, EfaCntrMem, EfaCompCntr, EfaCompCntrInitAttr, EfaCqAttr, EfaCqExtMem,
    EfaCqInitAttr, EfaCqInitFlags, EfaDeviceAttr, EfaDeviceCaps, EfaMrAttr, EfaProcessingHints,
    EfaQpFlags, EfaQpInitAttr, EfaRqDepthAttr, EfaSqDepthAttr, EfaSqDepthFlags, EfaWc, EfaWcFlags,
    EfaWqAttr, EfaWqCaps, EfaWrExFlags,
};
pub use error::{errno_name, Errno, Error, ErrorKind, Result};
pub use event::{AsyncElement, AsyncEvent, AsyncEventType, CompChannel, CqEvent};
pub use mr::{AccessFlags, Mr, MrBuffer, Sge};
pub use mw::{Mw, MwType};
pub use object::DestroyError;
pub use pd::Pd;
pub use provider::{Driver, ProviderError, ProviderInfo};
pub use qp::{
    Qp, QpAttr, QpAttrMask, QpCap, QpDestroyed, QpInitAttr, QpQuery, QpState, QpType, SendOpsFlags,
    WrBatch,
};
pub use query::{
    format_fw_ver, speed_str, AtomicCap, CqModerationCaps, DeviceAttr, DeviceAttrEx,
    DeviceCapFlags, Gid, GidEntry, GidQuery, GidType, LinkLayer, Mtu, OdpCaps, OdpGeneralCaps,
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
