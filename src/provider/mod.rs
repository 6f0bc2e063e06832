//! The provider seam: what a device family (rxe, EFA) supplies to the generic objects, and the
//! enums through which the generic objects reach it.
//!
//! A provider fills in one trait per object with a provider half, as virtio-drivers' transports
//! fill in `Transport`:
//!
//! | trait          | implemented by (rxe / EFA)         | what it supplies                                   |
//! |----------------|------------------------------------|----------------------------------------------------|
//! | [`DeviceOps`]  | `RxeDevice` / `EfaDevice`          | the driver data of GET_CONTEXT, ALLOC_PD, QUERY_DEVICE and CREATE_AH; creating CQs, QPs and SRQs (the driver data of each create command, and its rings from the answer); the reasons it refuses what it lacks |
//! | [`CqOps`]      | `RxeCq` / `EfaCq`                  | poll, the extended poll's cursor, arming, resizing |
//! | [`CursorOps`]  | the two cursors                    | the `ibv_wc_read_*` readers and `next_poll`        |
//! | [`QpOps`]      | `RxeQp` / `EfaQp`                  | post send and receive (with its state rules), the `wr_*` steps, the modify command, what destroy adds |
//! | [`SrqOps`]     | `RxeSrq` / none ([`Unsupported`])  | post receive, the modify command and its resize    |
//!
//! Each generic object holds an enum with one variant per provider ([`ProviderCtx`],
//! [`CqRing`], [`QpRing`], [`SrqRing`], [`Cursor`]) and calls it through [`dispatch!`]: one
//! exhaustive `match` whose arms call the same trait method, so there is no `dyn` and no
//! indirect call on post or poll, and a provider that lacks a method, or an enum that lacks a
//! provider's variant, does not compile. The public enums [`Driver`] and [`ProviderInfo`] and
//! the typed reasons of [`ProviderError`] live here too.
//!
//! Adding a provider (mlx5, say) means: its wiring module beside `src/rxe` and `src/efa`
//! implementing these traits, its provider crate under `providers/`, one variant in each enum
//! of this file (with its arm in the few `match`es here: `Driver`, `ProviderError`, the
//! accessors) and one line in [`dispatch!`]; docs/providers.md, "Adding a provider", lists
//! every line. Nothing else in the generic files names a provider (`generic_lint` checks).

use std::fmt;
use std::path::Path;

use uverbs_uapi::efa::EfaIbvAllocUcontextResp;
use uverbs_uapi::write::IbUverbsModifyQp;

use crate::ah::AhAttr;
use crate::channel::WriteCmd;
use crate::context::Context;
use crate::cq::{Cq, CqInitAttr, CqShared};
use crate::error::{Errno, Error, Result};
use crate::pd::Pd;
use crate::qp::{Qp, QpAttrMask, QpInitAttr, QpInner, QpState, SendOpsFlags};
use crate::srq::{Srq, SrqAttrMask, SrqRequest};
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};
use crate::wr::{PostError, RecvWr, SendFlags, SendWr, WrOp};
use crate::Ah;

pub(crate) use crate::efa::{EfaCq, EfaCursor, EfaDevice, EfaQp};
pub(crate) use crate::rxe::{RxeCq, RxeCursor, RxeDevice, RxeQp, RxeSrq};

/// Runs `$body` with `$p` bound to the provider half inside `$e`, an `$enum` of this module
/// (by value, `&` or `&mut`): one exhaustive `match`, one arm per provider, each calling the
/// same code on its own type (a trait method of that type, so no indirect call).
macro_rules! dispatch {
    ($enum:ident, $e:expr, $p:pat => $body:expr) => {
        match $e {
            $crate::provider::$enum::Rxe($p) => $body,
            $crate::provider::$enum::Efa($p) => $body,
        }
    };
}
pub(crate) use dispatch;

// ----- the device families ----------------------------------------------------------------

/// The device families uverbs drives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Driver {
    /// Soft-RoCE (`rdma_rxe`).
    Rxe,
    /// AWS Elastic Fabric Adapter.
    Efa,
    /// Another driver (named by its kernel driver or device name); listed, not opened.
    Unsupported(String),
}

impl Driver {
    /// The kernel's `enum rdma_driver_id` value placed in every ioctl header.
    pub fn driver_id(&self) -> Option<u32> {
        match self {
            Driver::Rxe => Some(uverbs_uapi::ioctl::RDMA_DRIVER_RXE),
            Driver::Efa => Some(uverbs_uapi::ioctl::RDMA_DRIVER_EFA),
            Driver::Unsupported(_) => None,
        }
    }

    /// The family of the RDMA device `name` whose sysfs directory is `ibdev_path`: EFA is a
    /// PCI device bound to the `efa` driver; soft-RoCE devices have no parent device and are
    /// recognised by their name, as rdma-core's rxe provider matches them (with their
    /// `parent` netdev attribute); anything else is listed as unsupported.
    pub(crate) fn of_sysfs(name: &str, ibdev_path: &Path) -> Driver {
        if let Ok(target) = std::fs::read_link(ibdev_path.join("device/driver")) {
            if let Some(drv) = target.file_name().map(|n| n.to_string_lossy().into_owned()) {
                return match drv.as_str() {
                    "efa" => Driver::Efa,
                    _ => Driver::Unsupported(drv),
                };
            }
        }
        if name.starts_with("rxe") || ibdev_path.join("parent").exists() && name.contains("rxe") {
            return Driver::Rxe;
        }
        Driver::Unsupported(name.to_string())
    }

    /// The raw `fw_ver` of the query-device response as the provider prints it: rxe
    /// (`rxe_query_device`) `major.minor.sub_minor` from bits 47..32, 31..16, 15..0; EFA
    /// (`efa_query_device_ex`) the first four bytes of the value as it lies in memory.
    pub(crate) fn format_fw_ver(&self, raw: u64) -> String {
        match self {
            Driver::Efa => {
                let b = raw.to_ne_bytes();
                format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
            }
            Driver::Rxe | Driver::Unsupported(_) => format!(
                "{}.{}.{}",
                (raw >> 32) & 0xffff,
                (raw >> 16) & 0xffff,
                raw & 0xffff
            ),
        }
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Driver::Rxe => f.write_str("rxe"),
            Driver::Efa => f.write_str("efa"),
            Driver::Unsupported(n) => write!(f, "{n} (unsupported)"),
        }
    }
}

/// What the provider learned when the context was created.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderInfo {
    /// Soft-RoCE: no driver data at get-context time.
    Rxe,
    /// EFA: the driver's `efa_ibv_alloc_ucontext_resp`.
    Efa(EfaIbvAllocUcontextResp),
}

/// A provider's own reason for refusing something, typed: what
/// [`Error::source`](std::error::Error::source) returns for an error a provider raised, for a
/// program that handles one reason differently from the others. The error's text already
/// says it.
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// use uverbs::ProviderError;
///
/// let mut cq = ctx.create_cq(16, None, 0)?;
/// let e = cq.req_notify(true).unwrap_err(); // EFA has no solicited-only events
/// match e.provider_error() {
///     Some(ProviderError::Efa(uverbs_efa::EfaError::SolicitedOnlyNotSupported { .. })) => {}
///     other => panic!("{other:?}"),
/// }
/// // The same value, as the standard error chain gives it.
/// let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<ProviderError>());
/// assert_eq!(source, e.provider_error());
/// # Ok::<(), uverbs::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderError {
    /// rxe refused a work request ([`uverbs_rxe::WrError`]).
    Rxe(uverbs_rxe::WrError),
    /// An rxe ring failed validation ([`uverbs_rxe::RingError`]): the kernel wrote what it
    /// could not have.
    RxeRing(uverbs_rxe::RingError),
    /// EFA refused a work request or a completion ([`uverbs_efa::EfaError`]).
    Efa(uverbs_efa::EfaError),
}

impl ProviderError {
    /// The errno rdma-core's provider returns for the same condition.
    pub fn errno(&self) -> Errno {
        match self {
            ProviderError::Rxe(e) => crate::rxe::post_errno(e),
            ProviderError::RxeRing(_) => Errno::IO,
            ProviderError::Efa(e) => Errno::from_raw_os_error(e.errno()),
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderError::Rxe(e) => fmt::Display::fmt(e, f),
            ProviderError::RxeRing(e) => fmt::Display::fmt(e, f),
            ProviderError::Efa(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for ProviderError {}

impl From<uverbs_rxe::WrError> for ProviderError {
    fn from(e: uverbs_rxe::WrError) -> Self {
        ProviderError::Rxe(e)
    }
}

impl From<uverbs_rxe::RingError> for ProviderError {
    fn from(e: uverbs_rxe::RingError) -> Self {
        ProviderError::RxeRing(e)
    }
}

impl From<uverbs_efa::EfaError> for ProviderError {
    fn from(e: uverbs_efa::EfaError) -> Self {
        ProviderError::Efa(e)
    }
}

// ----- what a provider supplies -------------------------------------------------------------

/// Something a provider may lack, for the reasons it gives when the kernel refuses it (or
/// when it refuses it first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feature {
    /// XRC: XRC domains, XRC QPs and XRC SRQs.
    Xrc,
    /// RAW_PACKET QPs.
    RawPacket,
}

/// The provider half of a device context: what it says to the kernel when a context and its
/// objects are made, and what it makes of the answers. Control path only.
pub(crate) trait DeviceOps: Sized {
    /// GET_CONTEXT's driver request and the length of the driver response it expects.
    fn context_udata() -> (Vec<u8>, usize);
    /// The provider's state from the driver response to GET_CONTEXT, or why it cannot drive
    /// this device (`op` on `label`).
    fn from_context(driver_resp: &[u8], op: &'static str, label: &str) -> Result<Self>;
    /// What the provider does once the context exists (EFA reads the device's limits, as
    /// libefa's context creation does); an error fails the open.
    fn opened(&self, ctx: &Context) -> Result<()>;
    /// What the provider learned at open time ([`crate::Context::provider`]).
    fn info(&self) -> ProviderInfo;
    /// Length of ALLOC_PD's driver response.
    fn pd_udata_len(&self) -> usize;
    /// Length of the extended QUERY_DEVICE's driver response.
    fn query_device_udata_len(&self) -> usize;
    /// Keeps what the provider needs of the extended QUERY_DEVICE's driver response (its
    /// `query_device_udata_len()` bytes): the device's limits never change.
    fn query_device_udata(&self, driver_resp: &[u8]);
    /// `ibv_create_cq(_ex)`, after the generic checks: the driver data of the create, the
    /// ring from the answer.
    fn create_cq(&self, ctx: &Context, attr: &CqInitAttr<'_>) -> Result<Cq>;
    /// `ibv_create_qp(_ex)`, after the generic checks (`send_ops`: the `wr_*` operations, for
    /// `create_qp_ex`): refuses what the provider lacks, else the create command with its
    /// driver data and the rings from the answer.
    fn create_qp(
        &self,
        pd: &Pd,
        attr: &QpInitAttr<'_>,
        send_ops: Option<SendOpsFlags>,
    ) -> Result<Qp>;
    /// `ibv_create_srq(_ex)`: refuses what the provider lacks, else the create command (its
    /// generic part in `req`) with the driver data and the ring from the answer.
    fn create_srq(&self, pd: &Pd, req: SrqRequest<'_>) -> Result<Srq>;
    /// What the provider checks of `ibv_create_ah` before the command.
    fn check_create_ah(&self, pd: &Pd, attr: &AhAttr) -> Result<()>;
    /// Length of CREATE_AH's driver response.
    fn ah_udata_len(&self) -> usize;
    /// The number send WQEs carry for the AH, from CREATE_AH's driver response, or why this
    /// kernel's AHs cannot be used (`op` on the AH `label`).
    fn ah_num(&self, driver_resp: &[u8], op: &'static str, label: &str) -> Result<u32>;
    /// Why the device cannot do `feature`, if it cannot.
    fn lacks(&self, feature: Feature) -> Option<&'static str>;
}

/// What a provider's inline post path did ([`QpOps::post_send_fast`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fast {
    /// Posted, and the device told.
    Posted,
    /// The inline path declined (having done nothing): the work requests go to the
    /// provider's full post, reached out of line, so that the inline path holds no pointer to
    /// the QP's name.
    Declined,
    /// The provider has no inline path (a constant answer): the work requests go straight to
    /// its full post, a tail call from the caller.
    Direct,
}

/// What a [`WrBatch`](crate::WrBatch) step of a provider gives: nothing, or its refusal (the
/// batch keeps the first, and `complete` reports it).
pub(crate) type Step = std::result::Result<(), ProviderError>;

/// The provider half of a CQ: its rings and polling. `poll` and the cursor are the data path:
/// no lock, no allocation, no indirect call.
pub(crate) trait CqOps {
    /// The extended poll's cursor.
    type Cursor<'a>: CursorOps
    where
        Self: 'a;
    /// `ibv_poll_cq`: up to `wcs.len()` completions into `wcs`; how many. `shared` names the
    /// CQ in an error. `NET_IMM` (the C ABI's poll, [`Cq::poll_net_imm`](crate::Cq::poll_net_imm))
    /// leaves immediate data big-endian, as C's `ibv_wc` has it.
    fn poll<const NET_IMM: bool>(&mut self, shared: &CqShared, wcs: &mut [Wc]) -> Result<usize>;
    /// `poll::<true>` of one completion when the provider has it without a load of the
    /// device's index or a call (rxe: one already counted ready): `true` with it in `wc`,
    /// `false` having done nothing (then `poll`).
    fn poll_ready_one_net_imm(&mut self, wc: &mut Wc) -> bool;
    /// `poll::<true>`, its poll of one completion inline in the caller (EFA: the whole
    /// common case, no call), for a caller that is itself one provider's out-of-line entry
    /// point (uverbs' libibverbs' EFA `poll_cq`). `shared` as the `Arc`: dereferenced only
    /// where used (an error, several completions), not ahead of the common case.
    fn poll_net_imm_inline_one(
        &mut self,
        shared: &std::sync::Arc<CqShared>,
        wcs: &mut [Wc],
    ) -> Result<usize>;
    /// `ibv_start_poll`: a cursor on the first completion, or `None`.
    fn start_poll<'a>(&'a mut self, shared: &'a CqShared) -> Result<Option<Self::Cursor<'a>>>;
    /// `ibv_req_notify_cq`.
    fn req_notify(&mut self, shared: &CqShared, solicited_only: bool) -> Result<()>;
    /// `ibv_resize_cq`: the new number of entries.
    fn resize(&mut self, shared: &CqShared, cqe: u32) -> Result<u32>;
}

/// An open extended poll, positioned on one completion: the `ibv_wc_read_*` readers read
/// its fields where they lie.
pub(crate) trait CursorOps {
    /// The CQ polled (which errors name).
    fn shared(&self) -> &CqShared;
    /// `ibv_next_poll`: `false` when there is none (the cursor stays where it is).
    fn next(&mut self) -> Result<bool>;
    /// The step of [`next`](Self::next) that needs no load of the device's index and no call
    /// (rxe: the next completion is known ready before the wrap): `true` when it moved the
    /// cursor; `false` when it did nothing, and `next` must be called.
    fn next_ready(&mut self) -> bool;
    /// `wr_id`.
    fn wr_id(&self) -> u64;
    /// `ibv_wc_read_status`.
    fn status(&self) -> WcStatus;
    /// `ibv_wc_read_opcode`.
    fn opcode(&self) -> WcOpcode;
    /// `ibv_wc_read_vendor_err`.
    fn vendor_err(&self) -> u32;
    /// `ibv_wc_read_byte_len`.
    fn byte_len(&self) -> u32;
    /// `ibv_wc_read_imm_data`, host order.
    fn imm_data(&self) -> u32;
    /// `ibv_wc_read_invalidated_rkey`.
    fn invalidated_rkey(&self) -> u32;
    /// `ibv_wc_read_qp_num`.
    fn qp_num(&self) -> u32;
    /// `ibv_wc_read_src_qp`.
    fn src_qp(&self) -> u32;
    /// `ibv_wc_read_wc_flags`.
    fn wc_flags(&self) -> WcFlags;
    /// `ibv_wc_read_slid`.
    fn slid(&self) -> u16;
    /// `ibv_wc_read_sl`.
    fn sl(&self) -> u8;
    /// `ibv_wc_read_dlid_path_bits`.
    fn dlid_path_bits(&self) -> u8;
    /// `pkey_index`.
    fn pkey_index(&self) -> u16;
    /// The whole completion.
    fn wc(&self) -> Wc;
}

/// The provider half of a QP: its rings, the data path and the `wr_*` steps. Post is the
/// data path: no lock, no allocation, no indirect call.
pub(crate) trait QpOps {
    /// `ibv_post_send` on the provider's inline path, if it has one and it takes `wrs` (the
    /// latency case: one plain work request on a QP that may send); otherwise (having done
    /// nothing) where the rest goes ([`Fast`]). It needs no name of the QP: it cannot refuse.
    fn post_send_fast(&mut self, wrs: &[SendWr<'_>]) -> Fast;
    /// `ibv_post_send`, with the provider's rules for the QP's state (out of line: `inner`
    /// names the QP in an error).
    fn post_send(&mut self, wrs: &[SendWr<'_>], inner: &QpInner) -> Result<(), PostError>;
    /// Writes one work request given as its parts (SGEs, no destination) into the send queue
    /// without telling the device, when the provider's fast path takes it on a QP that may
    /// send: `true` if written (until [`ring_staged`](Self::ring_staged)), `false` having
    /// done nothing visible. A provider without such a path answers `false`.
    fn stage_send(&mut self, wr_id: u64, op: &WrOp, flags: SendFlags, sges: &[crate::Sge]) -> bool;
    /// Tells the device of the `staged` work requests [`stage_send`](Self::stage_send) wrote
    /// (publish and doorbell); a failed doorbell names `staged` as the index.
    fn ring_staged(&mut self, inner: &QpInner, staged: usize) -> Result<(), PostError>;
    /// `ibv_post_recv`, with the provider's rules for the QP's state.
    fn post_recv(&mut self, wrs: &[RecvWr<'_>], inner: &QpInner) -> Result<(), PostError>;
    /// The QP's state after the last modify or query (the provider keeps it: its rules of
    /// when the QP may post read it).
    fn state(&self) -> QpState;
    /// The QP's state changed (a modify or a query said so).
    fn set_state(&mut self, state: QpState);
    /// The modify command for `base` (every field of the attributes, `mask` the ones that
    /// apply; `rate_limit` for the extended command), or the reason the provider cannot
    /// modify what `mask` names.
    fn modify_command(
        &self,
        base: &IbUverbsModifyQp,
        mask: QpAttrMask,
        rate_limit: u32,
    ) -> std::result::Result<WriteCmd, String>;
    /// `ibv_wr_start`.
    fn wr_start(&mut self, inner: &QpInner) -> Result<()>;
    /// `ibv_wr_send`, `ibv_wr_rdma_write`, ...: starts one work request.
    fn wr_op(&mut self, wr_id: u64, flags: SendFlags, op: WrOp) -> Step;
    /// `ibv_wr_set_sge` (`lkey`, `addr`, `length`).
    fn wr_set_sge(&mut self, lkey: u32, addr: u64, length: u32) -> Step;
    /// `ibv_wr_set_sge_list`.
    fn wr_set_sge_list(&mut self, sges: &[crate::Sge]) -> Step;
    /// `ibv_wr_set_inline_data`.
    fn wr_set_inline_data(&mut self, data: &[u8]) -> Step;
    /// `ibv_wr_set_ud_addr`.
    fn wr_set_ud_addr(&mut self, ah: &Ah, remote_qpn: u32, remote_qkey: u32) -> Step;
    /// Work requests in the open batch.
    fn wr_len(&self) -> usize;
    /// `ibv_wr_complete` of a batch no step refused.
    fn wr_complete(&mut self, inner: &QpInner) -> Result<()>;
    /// `ibv_wr_abort`.
    fn wr_abort(&mut self);
    /// What the destroy of the kernel QP must be followed by (EFA: leaving its CQs' tables).
    fn destroyed(&mut self);
}

/// The provider half of an SRQ: its ring.
pub(crate) trait SrqOps {
    /// `ibv_post_srq_recv`; `label` names the SRQ in an error.
    fn post_recv(
        &mut self,
        wrs: &[RecvWr<'_>],
        label: &dyn Fn() -> String,
    ) -> Result<(), PostError>;
    /// `ibv_modify_srq`: sends `cmd` (the generic MODIFY_SRQ, its driver data added here) and,
    /// on a resize (`MAX_WR` in `mask`), follows the ring to its new place.
    fn modify(
        &mut self,
        ctx: &Context,
        req: &uverbs_uapi::write::IbUverbsModifySrq,
        mask: SrqAttrMask,
        max_sge: u32,
        label: &dyn Fn() -> String,
    ) -> Result<()>;
}

/// The half of an object a provider does not have (EFA's SRQ): no value of it exists, so
/// its variant is never built, and its methods are the empty match.
pub(crate) enum Unsupported {}

impl SrqOps for Unsupported {
    fn post_recv(&mut self, _: &[RecvWr<'_>], _: &dyn Fn() -> String) -> Result<(), PostError> {
        match *self {}
    }
    fn modify(
        &mut self,
        _: &Context,
        _: &uverbs_uapi::write::IbUverbsModifySrq,
        _: SrqAttrMask,
        _: u32,
        _: &dyn Fn() -> String,
    ) -> Result<()> {
        match *self {}
    }
}

// ----- the enums the generic objects hold ----------------------------------------------------

/// The provider half of a context.
pub(crate) enum ProviderCtx {
    Rxe(RxeDevice),
    Efa(EfaDevice),
}

impl ProviderCtx {
    /// GET_CONTEXT's driver request and driver response length for `driver`, or the refusal
    /// of a driver uverbs does not drive.
    pub(crate) fn context_udata(driver: &Driver, label: &str) -> Result<(Vec<u8>, usize)> {
        match driver {
            Driver::Rxe => Ok(RxeDevice::context_udata()),
            Driver::Efa => Ok(EfaDevice::context_udata()),
            Driver::Unsupported(name) => Err(Error::invalid(
                "open_device",
                label.to_owned(),
                Errno::OPNOTSUPP,
                format!("driver {name} is not supported by uverbs (rxe and efa are)"),
            )),
        }
    }

    /// The provider half of a context of `driver` from GET_CONTEXT's driver response.
    pub(crate) fn from_context(
        driver: &Driver,
        driver_resp: &[u8],
        op: &'static str,
        label: &str,
    ) -> Result<Self> {
        match driver {
            Driver::Rxe => RxeDevice::from_context(driver_resp, op, label).map(ProviderCtx::Rxe),
            Driver::Efa => EfaDevice::from_context(driver_resp, op, label).map(ProviderCtx::Efa),
            Driver::Unsupported(name) => Err(Error::invalid(
                op,
                label.to_owned(),
                Errno::OPNOTSUPP,
                format!("driver {name} is not supported"),
            )),
        }
    }

    /// The EFA half, if this is an EFA context (for the `efadv_*` calls).
    pub(crate) fn efa(&self) -> Option<&EfaDevice> {
        match self {
            ProviderCtx::Efa(d) => Some(d),
            ProviderCtx::Rxe(_) => None,
        }
    }
}

/// The provider half of a CQ: its rings (EFA's boxed: the QP table and mappings it keeps).
pub(crate) enum CqRing {
    Rxe(RxeCq),
    Efa(Box<EfaCq>),
}

impl CqRing {
    /// The EFA ring, if this is an EFA CQ (for the `efadv_*` calls and EFA QPs).
    pub(crate) fn efa(&self) -> Option<&EfaCq> {
        match self {
            CqRing::Efa(r) => Some(r),
            CqRing::Rxe(_) => None,
        }
    }

    /// [`Self::efa`], mutable.
    pub(crate) fn efa_mut(&mut self) -> Option<&mut EfaCq> {
        match self {
            CqRing::Efa(r) => Some(r),
            CqRing::Rxe(_) => None,
        }
    }
}

/// An open extended poll of a CQ, by provider.
pub(crate) enum Cursor<'a> {
    Rxe(RxeCursor<'a>),
    Efa(EfaCursor<'a>),
}

impl<'a> From<RxeCursor<'a>> for Cursor<'a> {
    fn from(c: RxeCursor<'a>) -> Self {
        Cursor::Rxe(c)
    }
}

impl<'a> From<EfaCursor<'a>> for Cursor<'a> {
    fn from(c: EfaCursor<'a>) -> Self {
        Cursor::Efa(c)
    }
}

impl<'a> Cursor<'a> {
    /// The EFA cursor, if this is an EFA CQ (for the `efadv_wc_*` readers).
    pub(crate) fn efa(&self) -> Option<&EfaCursor<'a>> {
        match self {
            Cursor::Efa(c) => Some(c),
            Cursor::Rxe(_) => None,
        }
    }
}

/// The provider half of a QP: its rings, inline (no `Box`, the data path reads them).
pub(crate) enum QpRing {
    Rxe(RxeQp),
    Efa(EfaQp),
}

impl QpRing {
    /// The EFA rings, if this is an EFA QP (for the `efadv_*` calls).
    pub(crate) fn efa(&self) -> Option<&EfaQp> {
        match self {
            QpRing::Efa(r) => Some(r),
            QpRing::Rxe(_) => None,
        }
    }

    /// [`Self::efa`], mutable.
    pub(crate) fn efa_mut(&mut self) -> Option<&mut EfaQp> {
        match self {
            QpRing::Efa(r) => Some(r),
            QpRing::Rxe(_) => None,
        }
    }
}

/// The provider half of an SRQ (EFA has none).
pub(crate) enum SrqRing {
    Rxe(RxeSrq),
    // Never built: `Unsupported` has no value (EFA refuses `create_srq`); the variant keeps
    // the one shape `dispatch!` matches.
    #[allow(dead_code)]
    Efa(Unsupported),
}

#[cfg(test)]
mod generic_lint;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fw_ver_is_formatted_per_provider() {
        assert_eq!(Driver::Rxe.format_fw_ver(0), "0.0.0");
        assert_eq!(Driver::Rxe.format_fw_ver(0x0001_0002_0003_0004), "2.3.4");
        let efa = u64::from_ne_bytes([1, 2, 3, 4, 9, 9, 9, 9]);
        assert_eq!(Driver::Efa.format_fw_ver(efa), "1.2.3.4");
    }
}
