//! Creating QPs (`ibv_create_qp`, `ibv_create_qp_ex`): the checks every provider shares, the
//! kernel commands a provider sends with its driver data (the `UVERBS_METHOD_QP_CREATE` ioctl,
//! and the legacy `IB_USER_VERBS_CMD_CREATE_QP` write some providers' libraries use), and the
//! reasons given for the kernel's refusals. The provider's part (its refusals, its driver
//! data, its rings) is [`DeviceOps::create_qp`].

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
use uverbs_uapi::verbs::{IbUverbsQpCap, IB_UVERBS_QP_CREATE_SQ_SIG_ALL};
use uverbs_uapi::write::{IbUverbsCreateQp, IbUverbsCreateQpResp, IB_USER_VERBS_CMD_CREATE_QP};

use super::{Qp, QpAttrMask, QpCap, QpInitAttr, QpInner, QpParts, QpType, SendOpsFlags};
use crate::channel::{IoctlCmd, WriteCmd};
use crate::context::legacy_cmd;
use crate::cq::QpCqs;
use crate::error::{Errno, Error, Result};
use crate::event::next_user_handle;
use crate::pd::Pd;
use crate::provider::{dispatch, DeviceOps, Feature, QpRing};

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
        self.check_qp_attr("create_qp", attr)?;
        let ctx = self.context();
        dispatch!(ProviderCtx, &ctx.inner.provider_ctx, p => p.create_qp(self, attr, send_ops))
    }

    /// The checks of a create every provider shares (ibv_create_qp(3)): CQs of this context,
    /// an SRQ of this PD and only on the types that take one, the CQs each type needs.
    pub(crate) fn check_qp_attr(&self, op: &'static str, attr: &QpInitAttr<'_>) -> Result<()> {
        let ctx = self.context();
        let bad = |why: String| Error::invalid(op, self.label(), Errno::INVAL, why);
        // A QP with an SRQ must be RC or UD (XRC_RECV takes its SRQ by XRC instead); not every
        // kernel driver checks it.
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
        Ok(())
    }

    /// `UVERBS_METHOD_QP_CREATE` for `attr` with a provider's driver data, fully encoded for
    /// every type (as rdma-core's `ibv_icmd_create_qp`): the kernel QP (destroyed again on drop
    /// if a later step fails, by the ioctl) and the caps the kernel answered. `driver_out` is
    /// filled with the driver response.
    pub(crate) fn create_qp_object(
        &self,
        attr: &QpInitAttr<'_>,
        driver_in: &[u8],
        driver_out: &mut [u8],
    ) -> Result<(QpInner, QpCap)> {
        let op = "create_qp";
        let ctx = self.context();
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
            .driver_in(driver_in)
            .driver_out(driver_out);
        let r = ctx.ioctl_cmd(op, &|| self.label(), &mut cmd);
        let handle = cmd.out_data(UVERBS_ATTR_CREATE_QP_HANDLE).unwrap_or(0) as u32;
        r.map_err(|e| self.explain_create_error(e, attr))?;
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
        Ok((inner, QpCap::from_uverbs(&cap_out)))
    }

    /// `IB_USER_VERBS_CMD_CREATE_QP` (the legacy write) of `req` with a provider's driver
    /// data, for providers whose rdma-core library creates QPs so (and destroys them with the
    /// legacy write too): the kernel QP (destroyed again on drop if a later step fails) and
    /// the command, holding the core and driver responses. `req`'s user handle is the QP's.
    pub(crate) fn create_qp_legacy(
        &self,
        op: &'static str,
        attr: &QpInitAttr<'_>,
        req: &IbUverbsCreateQp,
        driver_in: &[u8],
        driver_resp_len: usize,
    ) -> Result<(QpInner, WriteCmd)> {
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_CREATE_QP,
            req,
            driver_in,
            std::mem::size_of::<IbUverbsCreateQpResp>(),
            driver_resp_len,
        );
        self.context()
            .write_cmd(op, &|| self.label(), &mut cmd)
            .map_err(|e| self.explain_create_error(e, attr))?;
        let resp: IbUverbsCreateQpResp = cmd.response_as();
        let inner = QpInner::new(QpParts {
            pd: self.clone(),
            cqs: QpCqs::new(attr.send_cq, attr.recv_cq),
            srq: attr.srq.map(|s| s.shared().clone()),
            handle: resp.qp_handle,
            qp_num: resp.qpn,
            user_handle: req.user_handle,
            qp_context: attr.qp_context,
            legacy_destroy: true,
        });
        Ok((inner, cmd))
    }

    /// A reason for the kernel's refusal of a create that keeps the kernel's errno: the
    /// provider's "does not support" only for the errnos that mean it.
    fn explain_create_error(&self, e: Error, attr: &QpInitAttr<'_>) -> Error {
        let lacks = |f| dispatch!(ProviderCtx, &self.context().inner.provider_ctx, p => p.lacks(f));
        explain_create_errno(e, attr, lacks)
    }
}

/// [`Pd::explain_create_error`] with the provider's reasons given by `lacks`.
fn explain_create_errno(
    e: Error,
    attr: &QpInitAttr<'_>,
    lacks: impl Fn(Feature) -> Option<&'static str>,
) -> Error {
    if attr.qp_type == QpType::RawPacket && e.is(Errno::PERM) {
        return e.with_reason(
            "RAW_PACKET QPs need CAP_NET_RAW (the kernel checks it before asking the driver)",
        );
    }
    let unsupported = e.is(Errno::OPNOTSUPP) || e.is(Errno::INVAL) || e.is(Errno::NOSYS);
    let feature = match attr.qp_type {
        QpType::RawPacket => Some(Feature::RawPacket),
        QpType::XrcSend | QpType::XrcRecv => Some(Feature::Xrc),
        _ => None,
    };
    if let Some(why) = feature.filter(|_| unsupported).and_then(lacks) {
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

impl Qp {
    /// The QP a provider made: the kernel QP `inner`, the provider's rings (in RESET), what it
    /// was created with and the caps it has. A QP with an SRQ has no receive queue: what was
    /// asked for it is ignored.
    pub(crate) fn assemble(
        ring: QpRing,
        inner: QpInner,
        attr: &QpInitAttr<'_>,
        mut cap: QpCap,
        send_ops: Option<SendOpsFlags>,
    ) -> Qp {
        if attr.srq.is_some() {
            cap.max_recv_wr = 0;
            cap.max_recv_sge = 0;
        }
        Qp {
            ring,
            inner,
            send_ops: send_ops.unwrap_or_default(),
            cap,
            qp_type: attr.qp_type,
            sq_sig_all: attr.sq_sig_all,
            wr_api: send_ops.is_some(),
        }
    }
}

/// The caps the kernel made, as `ibv_query_qp` reports them: the create response is not
/// always that (6.1's rxe answers the 12 send WRs asked for while its ring holds 15:
/// `rxe_queue_init` rounds the ring up to a power of two, less one, and query reports the
/// ring's size).
pub(crate) fn queried_cap(inner: &QpInner) -> Result<QpCap> {
    Ok(super::modify::query_cap(&super::modify::query_resp(
        inner,
        QpAttrMask::CAP,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's errno is kept, and the provider's "does not support" reason is given only
    /// for the errnos that mean it; EPERM (no CAP_NET_RAW) says so.
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
        let lacks = |f| (f == Feature::RawPacket).then_some("no RAW_PACKET QPs here");
        let e = explain_create_errno(Error::os("create_qp", "pd 1", Errno::PERM), &attr, lacks);
        assert!(e.is(Errno::PERM), "{e}");
        assert!(e.reason().contains("CAP_NET_RAW"), "{e}");
        assert!(!e.reason().contains("no RAW_PACKET"), "{e}");
        let e = explain_create_errno(
            Error::os("create_qp", "pd 1", Errno::OPNOTSUPP),
            &attr,
            lacks,
        );
        assert!(e.is(Errno::OPNOTSUPP), "{e}");
        assert!(e.reason().contains("no RAW_PACKET QPs here"), "{e}");
        // Another errno (the kernel ran out of memory) keeps the kernel's answer alone.
        let e = explain_create_errno(Error::os("create_qp", "pd 1", Errno::NOMEM), &attr, lacks);
        assert!(e.is(Errno::NOMEM) && e.reason().is_empty(), "{e}");
    }
}
