//! rxe's part of a device context: no driver data at GET_CONTEXT, ALLOC_PD or QUERY_DEVICE;
//! CQs, QPs and SRQs with the rings the kernel returns; the reasons rxe refuses what it lacks.

use uverbs_uapi::rxe::RxeCreateCqResp;
use zerocopy::IntoBytes;

use super::{ah, create_qp, create_srq, RxeCq};
use crate::ah::AhAttr;
use crate::context::Context;
use crate::cq::{Cq, CqInitAttr};
use crate::error::Result;
use crate::pd::Pd;
use crate::provider::{CqRing, DeviceOps, Feature, ProviderInfo};
use crate::qp::{Qp, QpInitAttr, SendOpsFlags};
use crate::srq::{Srq, SrqRequest};

/// What rxe keeps in a context: nothing (the kernel is the device).
pub(crate) struct RxeDevice;

impl DeviceOps for RxeDevice {
    fn context_udata() -> (Vec<u8>, usize) {
        (Vec::new(), 0)
    }

    fn from_context(_driver_resp: &[u8], _op: &'static str, _label: &str) -> Result<Self> {
        Ok(RxeDevice)
    }

    fn opened(&self, _ctx: &Context) -> Result<()> {
        Ok(())
    }

    fn info(&self) -> ProviderInfo {
        ProviderInfo::Rxe
    }

    fn pd_udata_len(&self) -> usize {
        0
    }

    fn query_device_udata_len(&self) -> usize {
        0
    }

    fn query_device_udata(&self, _driver_resp: &[u8]) {}

    /// The generic create, its answer's `rxe_create_cq_resp` saying where the ring is.
    fn create_cq(&self, ctx: &Context, attr: &CqInitAttr<'_>) -> Result<Cq> {
        let mut resp = RxeCreateCqResp::default();
        let (shared, cqe) = ctx.create_cq_object(attr, &[], resp.as_mut_bytes())?;
        let ring = RxeCq::map(
            ctx,
            &shared,
            resp.mi.offset,
            u64::from(resp.mi.size),
            "create_cq",
        )?;
        Ok(Cq::assemble(shared, CqRing::Rxe(ring), cqe))
    }

    fn create_qp(
        &self,
        pd: &Pd,
        attr: &QpInitAttr<'_>,
        send_ops: Option<SendOpsFlags>,
    ) -> Result<Qp> {
        create_qp(pd, attr, send_ops)
    }

    fn create_srq(&self, pd: &Pd, req: SrqRequest<'_>) -> Result<Srq> {
        create_srq(pd, req)
    }

    fn check_create_ah(&self, pd: &Pd, attr: &AhAttr) -> Result<()> {
        crate::ah::require_grh(pd, attr, "RoCE")
    }

    fn ah_udata_len(&self) -> usize {
        ah::CREATE_AH_RESP_LEN
    }

    fn ah_num(&self, driver_resp: &[u8], op: &'static str, label: &str) -> Result<u32> {
        ah::ah_num(driver_resp, op, label)
    }

    fn lacks(&self, feature: Feature) -> Option<&'static str> {
        Some(match feature {
            Feature::Xrc => "rxe does not support XRC (no XRC domains, XRC QPs or XRC SRQs)",
            Feature::RawPacket => "rxe does not support RAW_PACKET QPs",
        })
    }
}
