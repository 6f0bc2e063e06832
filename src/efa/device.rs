//! EFA's part of a device context ([`EfaDevice`]: the driver data of GET_CONTEXT, ALLOC_PD,
//! QUERY_DEVICE and CREATE_AH; creating CQs, QPs and SRQs; the reasons EFA refuses what it
//! lacks) and `efadv_query_device`: the EFA limits and capabilities libfabric sizes itself
//! by.

use std::sync::OnceLock;

use bitflags::bitflags;
use uverbs_uapi::efa::{
    self as abi, EfaIbvAllocPdResp, EfaIbvAllocUcontextCmd, EfaIbvAllocUcontextResp,
    EfaIbvExQueryDeviceResp,
};
use zerocopy::{FromBytes, IntoBytes};

use crate::ah::AhAttr;
use crate::context::Context;
use crate::cq::{Cq, CqInitAttr};
use crate::error::{Errno, Error, Result};
use crate::pd::Pd;
use crate::provider::{DeviceOps, Feature, ProviderInfo};
use crate::qp::{Qp, QpInitAttr, QpType, SendOpsFlags};
use crate::srq::{Srq, SrqRequest};

bitflags! {
    /// `EFADV_DEVICE_ATTR_CAPS_*` (efadv.h), translated from the kernel's
    /// `EFA_QUERY_DEVICE_CAPS_*` exactly as rdma-core does.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EfaDeviceCaps: u32 {
        /// `EFADV_DEVICE_ATTR_CAPS_RDMA_READ`.
        const RDMA_READ = 1 << 0;
        /// `EFADV_DEVICE_ATTR_CAPS_RNR_RETRY`.
        const RNR_RETRY = 1 << 1;
        /// `EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID`.
        const CQ_WITH_SGID = 1 << 2;
        /// `EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE`.
        const RDMA_WRITE = 1 << 3;
        /// `EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV`.
        const UNSOLICITED_WRITE_RECV = 1 << 4;
        /// `EFADV_DEVICE_ATTR_CAPS_CQ_WITH_EXT_MEM_DMABUF`.
        const CQ_WITH_EXT_MEM_DMABUF = 1 << 5;
        /// `EFADV_DEVICE_ATTR_CAPS_COMP_CNTR`: completion counters
        /// ([`Context::efadv_create_comp_cntr`]).
        const COMP_CNTR = 1 << 6;
    }
}

impl EfaDeviceCaps {
    /// Translates the kernel's `EFA_QUERY_DEVICE_CAPS_*` bits.
    pub fn from_kernel(k: u32) -> Self {
        let mut c = Self::empty();
        c.set(
            Self::RDMA_READ,
            k & abi::EFA_QUERY_DEVICE_CAPS_RDMA_READ != 0,
        );
        c.set(
            Self::RNR_RETRY,
            k & abi::EFA_QUERY_DEVICE_CAPS_RNR_RETRY != 0,
        );
        c.set(
            Self::CQ_WITH_SGID,
            k & abi::EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID != 0,
        );
        c.set(
            Self::RDMA_WRITE,
            k & abi::EFA_QUERY_DEVICE_CAPS_RDMA_WRITE != 0,
        );
        c.set(
            Self::UNSOLICITED_WRITE_RECV,
            k & abi::EFA_QUERY_DEVICE_CAPS_UNSOLICITED_WRITE_RECV != 0,
        );
        c.set(
            Self::CQ_WITH_EXT_MEM_DMABUF,
            k & abi::EFA_QUERY_DEVICE_CAPS_CQ_WITH_EXT_MEM != 0,
        );
        c.set(
            Self::COMP_CNTR,
            k & abi::EFA_QUERY_DEVICE_CAPS_COMP_CNTR != 0,
        );
        c
    }
}

/// `struct efadv_device_attr`.
#[doc(alias = "efadv_device_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EfaDeviceAttr {
    /// Extension mask of the answer: no extension is defined, so 0 (libefa sets none).
    pub comp_mask: u64,
    /// Largest SQ depth.
    pub max_sq_wr: u32,
    /// Largest RQ depth.
    pub max_rq_wr: u32,
    /// SGEs per send WR.
    pub max_sq_sge: u16,
    /// SGEs per receive WR.
    pub max_rq_sge: u16,
    /// Inline bytes a send WQE carries (`inline_buf_size` of the context).
    pub inline_buf_size: u16,
    /// Inline bytes a 128-byte send WQE carries (`inline_buf_size_ex` of the context; a
    /// kernel too old to report it: `inline_buf_size`, as libefa substitutes).
    pub inline_buf_size_ex: u16,
    /// Capabilities.
    pub device_caps: EfaDeviceCaps,
    /// Largest RDMA read/write in bytes.
    pub max_rdma_size: u32,
    /// The kernel's raw `EFA_QUERY_DEVICE_CAPS_*` bits (what the data path checks).
    pub kernel_caps: u32,
}

/// What EFA keeps in a [`Context`]: the driver's answer to GET_CONTEXT, and the device's
/// limits, asked of the kernel when the context is created (`DeviceOps::opened`), as libefa's
/// `efa_alloc_context` does with `efa_query_device_ctx`: they never change, so
/// `efadv_query_device`, `efadv_get_max_{sq,rq}_depth` and every QP, CQ and counter create read
/// them here instead of sending a QUERY_DEVICE each.
pub(crate) struct EfaDevice {
    uctx: EfaIbvAllocUcontextResp,
    /// The driver part of the extended QUERY_DEVICE, as its answer arrives
    /// (`DeviceOps::query_device_udata`).
    drv: OnceLock<EfaIbvExQueryDeviceResp>,
    limits: OnceLock<EfaDeviceLimits>,
}

/// The query-device values the EFA calls read (libefa keeps the same in `struct efa_context`).
#[derive(Debug, Clone, Copy)]
struct EfaDeviceLimits {
    /// The driver part of the extended QUERY_DEVICE (`device_caps`, `max_sq_wr`, `max_rq_wr`,
    /// `max_sq_sge`, `max_rq_sge`, `max_rdma_size`); `None` from a kernel that does not
    /// return it.
    drv: Option<EfaIbvExQueryDeviceResp>,
    /// The generic response's `max_sge_rd` (libefa's `max_wr_rdma_sge`).
    max_sge_rd: u32,
}

impl DeviceOps for EfaDevice {
    /// libefa's `efa_alloc_context`: the caps this library understands (TX batching, the SQ's
    /// minimum depth).
    fn context_udata() -> (Vec<u8>, usize) {
        let cmd = EfaIbvAllocUcontextCmd {
            supported_caps: abi::EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_TX_BATCH
                | abi::EFA_ALLOC_UCONTEXT_CMD_SUPP_CAPS_MIN_SQ_WR,
            ..Default::default()
        };
        (
            cmd.as_bytes().to_vec(),
            std::mem::size_of::<EfaIbvAllocUcontextResp>(),
        )
    }

    /// Refuses a driver that does not return AH numbers (sends name their destination by
    /// it).
    fn from_context(driver_resp: &[u8], op: &'static str, label: &str) -> Result<Self> {
        let uctx = EfaIbvAllocUcontextResp::read_from_prefix(driver_resp)
            .map(|(r, _)| r)
            .unwrap_or_default();
        if uctx.cmds_supp_udata_mask & abi::EFA_USER_CMDS_SUPP_UDATA_CREATE_AH == 0 {
            return Err(Error::invalid(
                op,
                label.to_owned(),
                Errno::OPNOTSUPP,
                "the EFA kernel driver does not return AH numbers (too old)",
            ));
        }
        Ok(EfaDevice {
            uctx,
            drv: OnceLock::new(),
            limits: OnceLock::new(),
        })
    }

    /// Reads the device's limits into the context, as libefa does at context creation: a
    /// context whose query fails is not made.
    fn opened(&self, ctx: &Context) -> Result<()> {
        let attr = ctx.query_device_ex()?;
        // Set once: the context is not shared yet, so nothing else can have set it.
        let _ = self.limits.set(EfaDeviceLimits {
            drv: self.drv.get().copied(),
            max_sge_rd: attr.orig_attr.max_sge_rd,
        });
        Ok(())
    }

    fn info(&self) -> ProviderInfo {
        ProviderInfo::Efa(self.uctx)
    }

    fn pd_udata_len(&self) -> usize {
        std::mem::size_of::<EfaIbvAllocPdResp>()
    }

    fn query_device_udata_len(&self) -> usize {
        if self.uctx.cmds_supp_udata_mask & abi::EFA_USER_CMDS_SUPP_UDATA_QUERY_DEVICE != 0 {
            std::mem::size_of::<EfaIbvExQueryDeviceResp>()
        } else {
            0
        }
    }

    fn query_device_udata(&self, driver_resp: &[u8]) {
        if let Ok((r, _)) = EfaIbvExQueryDeviceResp::read_from_prefix(driver_resp) {
            self.drv.get_or_init(|| r);
        }
    }

    /// libefa's `efa_create_cq`: `efadv_create_cq` with no EFA attributes.
    fn create_cq(&self, ctx: &Context, attr: &CqInitAttr<'_>) -> Result<Cq> {
        ctx.efa_create_cq(attr, &super::EfaCqInitAttr::default(), "create_cq")
    }

    /// libefa's `efa_create_qp`: a UD QP with no EFA attributes (SRD is `efadv_create_qp_ex`'s).
    fn create_qp(
        &self,
        pd: &Pd,
        attr: &QpInitAttr<'_>,
        send_ops: Option<SendOpsFlags>,
    ) -> Result<Qp> {
        if attr.qp_type == QpType::Srd {
            return Err(Error::invalid(
                "create_qp",
                pd.label(),
                Errno::OPNOTSUPP,
                "SRD QPs are created with efadv_create_qp_ex",
            ));
        }
        super::create_qp(
            pd,
            "create_qp",
            attr,
            &super::EfaQpInitAttr::default(),
            send_ops,
        )
    }

    fn create_srq(&self, pd: &Pd, _req: SrqRequest<'_>) -> Result<Srq> {
        Err(Error::invalid(
            "create_srq",
            pd.label(),
            Errno::OPNOTSUPP,
            "EFA has no shared receive queues: each QP has its own receive queue (up to \
             efadv_query_device's max_rq_wr); post receives to the QP",
        ))
    }

    fn check_create_ah(&self, pd: &Pd, attr: &AhAttr) -> Result<()> {
        super::check_create_ah(&self.uctx, "create_ah", pd.label())?;
        crate::ah::require_grh(pd, attr, "EFA")
    }

    fn ah_udata_len(&self) -> usize {
        super::CREATE_AH_RESP_LEN
    }

    fn ah_num(&self, driver_resp: &[u8], _op: &'static str, _label: &str) -> Result<u32> {
        Ok(super::ah_num(driver_resp))
    }

    fn lacks(&self, feature: Feature) -> Option<&'static str> {
        Some(match feature {
            Feature::Xrc => "EFA has no XRC (its QPs are UD and SRD)",
            Feature::RawPacket => "EFA has no RAW_PACKET QPs (its QPs are UD and SRD)",
        })
    }
}

impl Context {
    /// The EFA half of the context, or `EOPNOTSUPP` naming `op` for other devices.
    pub(crate) fn efa_device(&self, op: &'static str) -> Result<&EfaDevice> {
        self.inner.provider_ctx.efa().ok_or_else(|| {
            Error::invalid(
                op,
                self.label().to_string(),
                Errno::OPNOTSUPP,
                format!(
                    "{op} is EFA's, and {} is an {} device, not an EFA one",
                    self.device().name(),
                    self.device().driver()
                ),
            )
        })
    }

    /// The EFA driver data of the context, or `EOPNOTSUPP` naming `op` for other devices.
    pub(crate) fn efa_ucontext(&self, op: &'static str) -> Result<EfaIbvAllocUcontextResp> {
        Ok(self.efa_device(op)?.uctx)
    }

    /// The limits cached at creation; `EOPNOTSUPP` naming `op` for a device that is not EFA.
    fn efa_limits(&self, op: &'static str) -> Result<EfaDeviceLimits> {
        let efa = self.efa_device(op)?;
        if let Some(l) = efa.limits.get() {
            return Ok(*l);
        }
        // Only a context whose creation skipped `opened` gets here: ask now.
        efa.opened(self)?;
        efa.limits.get().copied().ok_or_else(|| {
            Error::invalid(
                op,
                self.label().to_string(),
                Errno::INVAL,
                "the EFA device limits could not be cached",
            )
        })
    }

    /// The driver part of the extended query-device response, as cached when the context was
    /// created (the device's limits and caps never change), so creating QPs and CQs costs no
    /// QUERY_DEVICE each.
    pub(crate) fn efa_query_raw(&self, op: &'static str) -> Result<EfaIbvExQueryDeviceResp> {
        self.efa_limits(op)?.drv.ok_or_else(|| {
            Error::invalid(
                op,
                self.label().to_string(),
                Errno::OPNOTSUPP,
                "the EFA kernel driver does not return its query-device data (too old)",
            )
        })
    }

    /// The device's `max_sge_rd`, as cached when the context was created.
    pub(crate) fn efa_max_sge_rd(&self, op: &'static str) -> Result<u32> {
        Ok(self.efa_limits(op)?.max_sge_rd)
    }

    /// EFA limits and capabilities (`efadv_query_device`): the driver part of the extended
    /// QUERY_DEVICE command plus the context's inline buffer size.
    ///
    /// ```
    /// # let fabric = uverbs_efa_model::EfaFabric::new(1);
    /// # let ctx = fabric.add_device(Default::default()).open()?;
    /// use uverbs::EfaDeviceCaps;
    ///
    /// let efa = ctx.efadv_query_device()?;
    /// println!("SQ depth {}, {} send SGEs, {} inline bytes, RDMA up to {} bytes",
    ///          efa.max_sq_wr, efa.max_sq_sge, efa.inline_buf_size, efa.max_rdma_size);
    /// if efa.device_caps.contains(EfaDeviceCaps::RDMA_READ) {
    ///     // post RDMA reads; otherwise fall back to sends
    /// }
    /// // Not an EFA device (rxe): EOPNOTSUPP, naming the call.
    /// # Ok::<(), uverbs::Error>(())
    /// ```
    pub fn efadv_query_device(&self) -> Result<EfaDeviceAttr> {
        let op = "efadv_query_device";
        let uctx = self.efa_ucontext(op)?;
        let r = self.efa_query_raw(op)?;
        Ok(EfaDeviceAttr {
            comp_mask: 0,
            inline_buf_size_ex: inline_buf_size_ex(&uctx),
            max_sq_wr: r.max_sq_wr,
            max_rq_wr: r.max_rq_wr,
            max_sq_sge: r.max_sq_sge,
            max_rq_sge: r.max_rq_sge,
            inline_buf_size: uctx.inline_buf_size,
            device_caps: EfaDeviceCaps::from_kernel(r.device_caps),
            max_rdma_size: r.max_rdma_size,
            kernel_caps: r.device_caps,
        })
    }
}

/// libefa's `ctx->inline_buf_size_ex`: the response's value, or `inline_buf_size` when the
/// kernel left it 0 (kernels before the field).
pub(crate) fn inline_buf_size_ex(u: &EfaIbvAllocUcontextResp) -> u16 {
    if u.inline_buf_size_ex == 0 {
        u.inline_buf_size
    } else {
        u.inline_buf_size_ex
    }
}
