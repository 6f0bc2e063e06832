//! Creating QPs (`ibv_create_qp`, `ibv_create_qp_ex`): the kernel command for every type and
//! provider, the checks the kernel does not make, and the reasons given for its refusals. The
//! provider's rings are made by `crate::rxe::qp_ring` and `crate::efa::create_qp`.

use std::sync::Arc;

use uverbs_uapi::cmds::{
    UVERBS_ATTR_CREATE_QP_CAP, UVERBS_ATTR_CREATE_QP_EVENT_FD, UVERBS_ATTR_CREATE_QP_FLAGS,
    UVERBS_ATTR_CREATE_QP_HANDLE, UVERBS_ATTR_CREATE_QP_PD_HANDLE,
    UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, UVERBS_ATTR_CREATE_QP_RESP_CAP,
    UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE,
    UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, UVERBS_ATTR_CREATE_QP_TYPE,
    UVERBS_ATTR_CREATE_QP_USER_HANDLE, UVERBS_ATTR_CREATE_QP_XRCD_HANDLE, UVERBS_METHOD_QP_CREATE,
    UVERBS_OBJECT_QP,
};
use uverbs_uapi::rxe::RxeCreateQpResp;
use uverbs_uapi::verbs::{IbUverbsQpCap, IB_UVERBS_QP_CREATE_SQ_SIG_ALL};
use zerocopy::IntoBytes;

use super::{
    Qp, QpAttrMask, QpCap, QpInitAttr, QpInner, QpParts, QpRing, QpState, QpType, SendOpsFlags,
};
use crate::channel::IoctlCmd;
use crate::context::Context;
use crate::cq::QpCqs;
use crate::error::{Errno, Error, Result};
use crate::event::next_user_handle;
use crate::pd::Pd;
use crate::ProviderInfo;

impl Pd {
    /// Creates a QP (`ibv_create_qp`). The caps actually made are in [`Qp::cap`].
    ///
    /// Every type the device's kernel driver accepts: RC, UC and UD on rxe; UD on EFA (SRD
    /// through [`Pd::efadv_create_qp_ex`]). What the provider cannot do (an SRQ or a connected
    /// QP on EFA, SRD on rxe) is refused here with `EOPNOTSUPP` and the reason.
    #[doc(alias = "ibv_create_qp")]
    pub fn create_qp(&self, attr: &QpInitAttr<'_>) -> Result<Qp> {
        self.create_qp_inner(attr, None)
    }

    /// Creates a QP that also takes the `wr_*` API for the operations in
    /// `attr.send_ops_flags` (`ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`).
    #[doc(alias = "ibv_create_qp_ex")]
    pub fn create_qp_ex(&self, attr: &QpInitAttr<'_>) -> Result<Qp> {
        self.create_qp_inner(attr, Some(attr.send_ops_flags))
    }

    fn create_qp_inner(&self, attr: &QpInitAttr<'_>, send_ops: Option<SendOpsFlags>) -> Result<Qp> {
        let op = "create_qp";
        let ctx = self.context();
        let object = || self.label();
        let bad = |why: String| Error::invalid(op, self.label(), Errno::INVAL, why);
        let notsup = |why: String| Error::invalid(op, self.label(), Errno::OPNOTSUPP, why);
        if attr.qp_type == QpType::Srd {
            return Err(notsup(if matches!(ctx.provider(), ProviderInfo::Efa(_)) {
                "SRD QPs are created with efadv_create_qp_ex".into()
            } else {
                "SRD is an EFA transport; rxe has RC, UC and UD".into()
            }));
        }
        if let ProviderInfo::Efa(_) = ctx.provider() {
            return crate::efa::create_qp(
                self,
                op,
                attr,
                &crate::efa::EfaQpInitAttr::default(),
                send_ops,
            );
        }
        // ibv_create_qp(3): a QP with an SRQ must be RC or UD (XRC_RECV aside); the kernel
        // does not check it for rxe.
        if attr.srq.is_some() && !matches!(attr.qp_type, QpType::Rc | QpType::Ud) {
            return Err(bad(format!(
                "a {:?} QP cannot use an SRQ: only RC and UD QPs can (ibv_create_qp(3))",
                attr.qp_type
            )));
        }
        for cq in [attr.send_cq, attr.recv_cq].into_iter().flatten() {
            if !Arc::ptr_eq(&cq.shared().ctx.inner, &ctx.inner) {
                return Err(bad("a CQ belongs to another device context".into()));
            }
        }
        if let Some(srq) = attr.srq {
            if !Arc::ptr_eq(&srq.pd().inner, &self.inner) {
                return Err(bad("the SRQ belongs to another PD".into()));
            }
        }
        match attr.qp_type {
            QpType::XrcRecv => {
                if attr.xrcd.is_none() {
                    return Err(bad("an XRC_RECV QP needs an XRCD".into()));
                }
            }
            QpType::XrcSend => {
                if attr.send_cq.is_none() {
                    return Err(bad("an XRC_SEND QP needs a send CQ".into()));
                }
            }
            _ => {
                if attr.send_cq.is_none() || attr.recv_cq.is_none() {
                    return Err(bad(format!(
                        "a {:?} QP needs a send CQ and a receive CQ",
                        attr.qp_type
                    )));
                }
            }
        }

        // The kernel command, fully encoded for every type (as rdma-core's ibv_icmd_create_qp).
        let user_handle = next_user_handle();
        let cap_in = IbUverbsQpCap {
            max_send_wr: attr.cap.max_send_wr,
            max_recv_wr: attr.cap.max_recv_wr,
            max_send_sge: attr.cap.max_send_sge,
            max_recv_sge: attr.cap.max_recv_sge,
            max_inline_data: attr.cap.max_inline_data,
        };
        let mut cap_out = IbUverbsQpCap::default();
        let mut qp_num = 0u32;
        let mut drv = RxeCreateQpResp::default();
        let mut flags = attr.create_flags;
        if attr.sq_sig_all {
            flags |= IB_UVERBS_QP_CREATE_SQ_SIG_ALL;
        }
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
        cmd.idr_new(UVERBS_ATTR_CREATE_QP_HANDLE);
        match attr.qp_type {
            QpType::XrcRecv => {
                if let Some(x) = attr.xrcd {
                    cmd.idr(UVERBS_ATTR_CREATE_QP_XRCD_HANDLE, x.handle());
                }
            }
            _ => {
                cmd.idr(UVERBS_ATTR_CREATE_QP_PD_HANDLE, self.handle());
                if let Some(cq) = attr.send_cq {
                    cmd.idr(UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, cq.handle());
                }
                if attr.qp_type != QpType::XrcSend {
                    if let Some(cq) = attr.recv_cq {
                        cmd.idr(UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, cq.handle());
                    }
                }
            }
        }
        cmd.const_u64(UVERBS_ATTR_CREATE_QP_TYPE, u64::from(attr.qp_type.raw()))
            .u64_in(UVERBS_ATTR_CREATE_QP_USER_HANDLE, user_handle)
            .ptr_in(UVERBS_ATTR_CREATE_QP_CAP, &cap_in)
            .fd(UVERBS_ATTR_CREATE_QP_EVENT_FD, ctx.async_fd());
        if flags != 0 {
            cmd.u32_in(UVERBS_ATTR_CREATE_QP_FLAGS, flags);
        }
        if let Some(srq) = attr.srq {
            cmd.idr(UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, srq.handle());
        }
        cmd.ptr_out(UVERBS_ATTR_CREATE_QP_RESP_CAP, &mut cap_out)
            .ptr_out(UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &mut qp_num)
            .driver_out(drv.as_mut_bytes());
        let r = ctx.ioctl_cmd(op, &object, &mut cmd);
        let handle = cmd.out_data(UVERBS_ATTR_CREATE_QP_HANDLE).unwrap_or(0) as u32;
        r.map_err(|e| explain_create_error(e, attr, ctx))?;

        let inner = QpInner::new(QpParts {
            pd: self.clone(),
            cqs: QpCqs::new(attr.send_cq, attr.recv_cq),
            srq: attr.srq.map(|s| s.shared().clone()),
            handle,
            qp_num,
            user_handle,
            qp_context: attr.qp_context,
            legacy_destroy: false,
        });
        // From here `inner` destroys the kernel QP if anything fails.
        let mut cap = QpCap::from_uverbs(&cap_out);
        if attr.qp_type.rxe().is_some() {
            // What the kernel made, as `ibv_query_qp` reports it (finding 7): the create
            // response is not always that (6.1's rxe answers the 12 send WRs asked for while
            // its ring holds 15: rxe_queue_init rounds the ring up to a power of two, less
            // one, and query reports the ring's size). Other types are refused below.
            cap = super::modify::query_cap(&super::modify::query_resp(&inner, QpAttrMask::CAP)?);
        }
        if attr.srq.is_some() {
            // The QP has no receive queue: what was asked for it is ignored (QpCap docs).
            cap.max_recv_wr = 0;
            cap.max_recv_sge = 0;
        }
        let ring = crate::rxe::qp_ring(ctx, op, attr, &inner, &drv, &cap)?;
        Ok(Qp {
            ring: QpRing::Rxe(ring),
            qp_type: attr.qp_type,
            cap,
            state: QpState::Reset,
            sq_sig_all: attr.sq_sig_all,
            send_ops,
            inner,
        })
    }
}

fn explain_create_error(e: Error, attr: &QpInitAttr<'_>, ctx: &Context) -> Error {
    explain_create_errno(e, attr, matches!(ctx.provider(), ProviderInfo::Rxe))
}

/// A reason for the kernel's refusal of a create that keeps the kernel's errno: the
/// provider's "does not support" only for the errnos that mean it.
fn explain_create_errno(e: Error, attr: &QpInitAttr<'_>, rxe: bool) -> Error {
    if attr.qp_type == QpType::RawPacket && e.is(Errno::PERM) {
        return e.with_reason(
            "RAW_PACKET QPs need CAP_NET_RAW (the kernel checks it before asking the driver)",
        );
    }
    let unsupported = e.is(Errno::OPNOTSUPP) || e.is(Errno::INVAL) || e.is(Errno::NOSYS);
    if rxe && attr.qp_type.rxe().is_none() && unsupported {
        let why = match attr.qp_type {
            QpType::RawPacket => "rxe does not support RAW_PACKET QPs",
            _ => "rxe does not support XRC",
        };
        return e.with_reason(why);
    }
    if e.is(Errno::INVAL) {
        return e.with_reason(format!(
            "caps {:?} rejected (above the device's max_qp_wr/max_sge/max_inline?) or bad \
             attributes",
            attr.cap
        ));
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finding 3: the kernel's errno is kept, and the provider's "does not support" reason is
    /// given only for the errnos that mean it; EPERM (no CAP_NET_RAW) says so.
    #[test]
    fn raw_packet_refusal_keeps_the_kernel_errno_and_its_reason() {
        let cap = QpCap::default();
        let attr = QpInitAttr {
            qp_type: QpType::RawPacket,
            send_cq: None,
            recv_cq: None,
            srq: None,
            xrcd: None,
            cap,
            sq_sig_all: false,
            create_flags: 0,
            send_ops_flags: SendOpsFlags::empty(),
            qp_context: 0,
        };
        let e = explain_create_errno(Error::os("create_qp", "pd 1", Errno::PERM), &attr, true);
        assert!(e.is(Errno::PERM), "{e}");
        assert!(e.reason().contains("CAP_NET_RAW"), "{e}");
        assert!(!e.reason().contains("does not support"), "{e}");
        let e = explain_create_errno(
            Error::os("create_qp", "pd 1", Errno::OPNOTSUPP),
            &attr,
            true,
        );
        assert!(e.is(Errno::OPNOTSUPP), "{e}");
        assert!(
            e.reason().contains("rxe does not support RAW_PACKET"),
            "{e}"
        );
        // Another errno (the kernel ran out of memory) keeps the kernel's answer alone.
        let e = explain_create_errno(Error::os("create_qp", "pd 1", Errno::NOMEM), &attr, true);
        assert!(e.is(Errno::NOMEM) && e.reason().is_empty(), "{e}");
    }
}
