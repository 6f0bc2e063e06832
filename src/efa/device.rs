//! `efadv_query_device`: the EFA limits and capabilities libfabric sizes itself by.

use bitflags::bitflags;
use uverbs_uapi::efa::{self as abi, EfaIbvAllocUcontextResp, EfaIbvExQueryDeviceResp};

use crate::context::{Context, ProviderCtx, ProviderInfo};
use crate::error::{Errno, Error, Result};

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

/// What EFA keeps in a [`Context`] (its `ProviderCtx::Efa`).
#[derive(Default)]
pub(crate) struct EfaCtx {
    /// The device's limits, asked of the kernel when the context is created
    /// ([`Context::efa_cache_device`]), as libefa's `efa_alloc_context` does with
    /// `efa_query_device_ctx`: they never change, so `efadv_query_device`,
    /// `efadv_get_max_{sq,rq}_depth` and every QP, CQ and counter create read them here
    /// instead of sending a QUERY_DEVICE each.
    dev: std::sync::OnceLock<EfaDeviceLimits>,
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

impl Context {
    /// The EFA driver data of the context, or `EOPNOTSUPP` naming `op` for other devices.
    pub(crate) fn efa_ucontext(&self, op: &'static str) -> Result<EfaIbvAllocUcontextResp> {
        match self.provider() {
            ProviderInfo::Efa(r) => Ok(*r),
            _ => Err(Error::invalid(
                op,
                self.label().to_string(),
                Errno::OPNOTSUPP,
                "not an EFA device",
            )),
        }
    }

    /// Reads the device's limits into the context: called once as the context is created, so
    /// that no EFA call after that sends a QUERY_DEVICE for them. As in libefa, a context
    /// whose query fails is not made. Nothing to do for other providers.
    pub(crate) fn efa_cache_device(&self) -> Result<()> {
        let ProviderCtx::Efa(efa) = &self.inner.provider_ctx else {
            return Ok(());
        };
        let attr = self.query_device_ex()?;
        // Set once: the context is not shared yet, so nothing else can have set it.
        let _ = efa.dev.set(EfaDeviceLimits {
            drv: attr.efa,
            max_sge_rd: attr.orig_attr.max_sge_rd,
        });
        Ok(())
    }

    /// The limits cached at creation; `EOPNOTSUPP` naming `op` for a device that is not EFA.
    fn efa_limits(&self, op: &'static str) -> Result<EfaDeviceLimits> {
        self.efa_ucontext(op)?;
        let ProviderCtx::Efa(efa) = &self.inner.provider_ctx else {
            return Err(Error::invalid(
                op,
                self.label().to_string(),
                Errno::OPNOTSUPP,
                "not an EFA device",
            ));
        };
        if let Some(l) = efa.dev.get() {
            return Ok(*l);
        }
        // Only a context whose creation skipped `efa_cache_device` gets here: ask now.
        self.efa_cache_device()?;
        efa.dev.get().copied().ok_or_else(|| {
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
