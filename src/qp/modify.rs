//! Moving a QP through its states and asking the kernel about it (`ibv_modify_qp`,
//! `ibv_query_qp`).

use uverbs_uapi::write::{
    IbUverbsExModifyQp, IbUverbsExModifyQpResp, IbUverbsModifyQp, IbUverbsQueryQp,
    IbUverbsQueryQpResp, IB_USER_VERBS_CMD_MODIFY_QP, IB_USER_VERBS_CMD_QUERY_QP,
    IB_USER_VERBS_EX_CMD_MODIFY_QP,
};

use super::attr::{dest_from_uverbs, dest_to_uverbs};
use super::{Qp, QpAttr, QpAttrMask, QpCap, QpInner, QpQuery, QpState};
use crate::channel::WriteCmd;
use crate::context::legacy_cmd;
use crate::error::{Errno, Error, Result};
use crate::mr::AccessFlags;
use crate::provider::{dispatch, QpOps};
use crate::query::Mtu;

impl Qp {
    /// Modifies the QP (`ibv_modify_qp`): the fields of `attr` named by `mask`.
    ///
    /// The kernel checks the transition (`ib_modify_qp_is_ok`): RESET→INIT needs
    /// `STATE|PKEY_INDEX|PORT|ACCESS_FLAGS` (UD: `QKEY` instead of `ACCESS_FLAGS`), INIT→RTR
    /// on RC needs `AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER`, RTR→RTS on
    /// RC needs `SQ_PSN|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC`; any state may go to
    /// RESET or ERR. A refused transition is `EINVAL`.
    #[doc(alias = "ibv_modify_qp")]
    pub fn modify(&mut self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let op = "modify_qp";
        let base = IbUverbsModifyQp {
            dest: dest_to_uverbs(&attr.ah_attr),
            alt_dest: dest_to_uverbs(&attr.alt_ah_attr),
            qp_handle: self.inner.handle(),
            attr_mask: mask.bits(),
            qkey: attr.qkey,
            rq_psn: attr.rq_psn,
            sq_psn: attr.sq_psn,
            dest_qp_num: attr.dest_qp_num,
            qp_access_flags: attr.qp_access_flags.bits(),
            pkey_index: attr.pkey_index,
            alt_pkey_index: attr.alt_pkey_index,
            qp_state: attr.qp_state.raw(),
            cur_qp_state: attr.cur_qp_state.raw(),
            path_mtu: attr.path_mtu.raw(),
            path_mig_state: attr.path_mig_state,
            en_sqd_async_notify: u8::from(attr.en_sqd_async_notify),
            max_rd_atomic: attr.max_rd_atomic,
            max_dest_rd_atomic: attr.max_dest_rd_atomic,
            min_rnr_timer: attr.min_rnr_timer,
            port_num: attr.port_num,
            timeout: attr.timeout,
            retry_cnt: attr.retry_cnt,
            rnr_retry: attr.rnr_retry,
            alt_port_num: attr.alt_port_num,
            alt_timeout: attr.alt_timeout,
            reserved: [0; 2],
        };
        let mut cmd = dispatch!(QpRing, &self.ring, r => {
            r.modify_command(&base, mask, attr.rate_limit)
        })
        .map_err(|why| Error::invalid(op, self.label(), Errno::OPNOTSUPP, why))?;
        self.inner
            .pd
            .context()
            .write_cmd(op, &|| self.label(), &mut cmd)
            .map_err(|e| {
                if e.is(Errno::INVAL) && mask.contains(QpAttrMask::STATE) {
                    e.with_reason(format!(
                        "{:?} QP: {:?} -> {:?} with mask {:?} is not a legal transition, or an \
                         attribute is out of range",
                        self.qp_type,
                        self.state(),
                        attr.qp_state,
                        mask
                    ))
                } else {
                    e
                }
            })?;
        if mask.contains(QpAttrMask::STATE) {
            self.set_state(attr.qp_state);
        }
        Ok(())
    }

    /// Queries the QP (`ibv_query_qp`) for the attributes in `mask`; also refreshes
    /// [`Qp::state`].
    #[doc(alias = "ibv_query_qp")]
    pub fn query(&mut self, mask: QpAttrMask) -> Result<QpQuery> {
        let r = query_resp(&self.inner, mask)?;
        let cap = query_cap(&r);
        let attr = QpAttr {
            qp_state: QpState::from_raw(r.qp_state),
            cur_qp_state: QpState::from_raw(r.cur_qp_state),
            path_mtu: Mtu::from_raw(r.path_mtu),
            path_mig_state: r.path_mig_state,
            qkey: r.qkey,
            rq_psn: r.rq_psn,
            sq_psn: r.sq_psn,
            dest_qp_num: r.dest_qp_num,
            qp_access_flags: AccessFlags::from_bits_retain(r.qp_access_flags),
            cap,
            ah_attr: dest_from_uverbs(&r.dest),
            alt_ah_attr: dest_from_uverbs(&r.alt_dest),
            pkey_index: r.pkey_index,
            alt_pkey_index: r.alt_pkey_index,
            en_sqd_async_notify: false,
            sq_draining: r.sq_draining != 0,
            max_rd_atomic: r.max_rd_atomic,
            max_dest_rd_atomic: r.max_dest_rd_atomic,
            min_rnr_timer: r.min_rnr_timer,
            port_num: r.port_num,
            timeout: r.timeout,
            retry_cnt: r.retry_cnt,
            rnr_retry: r.rnr_retry,
            alt_port_num: r.alt_port_num,
            alt_timeout: r.alt_timeout,
            rate_limit: 0,
        };
        self.set_state(attr.qp_state);
        Ok(QpQuery {
            attr,
            cap,
            sq_sig_all: r.sq_sig_all != 0,
        })
    }
}

/// `IB_USER_VERBS_CMD_QUERY_QP` for the attributes in `mask`: the kernel's answer.
pub(super) fn query_resp(inner: &QpInner, mask: QpAttrMask) -> Result<IbUverbsQueryQpResp> {
    let op = "query_qp";
    let req = IbUverbsQueryQp {
        qp_handle: inner.handle(),
        attr_mask: mask.bits(),
        ..Default::default()
    };
    let mut cmd = legacy_cmd(
        IB_USER_VERBS_CMD_QUERY_QP,
        &req,
        &[],
        std::mem::size_of::<IbUverbsQueryQpResp>(),
        0,
    );
    inner
        .pd
        .context()
        .write_cmd(op, &|| inner.label(), &mut cmd)?;
    Ok(cmd.response_as())
}

/// The queue sizes of a query answer.
pub(super) fn query_cap(r: &IbUverbsQueryQpResp) -> QpCap {
    QpCap {
        max_send_wr: r.max_send_wr,
        max_recv_wr: r.max_recv_wr,
        max_send_sge: r.max_send_sge,
        max_recv_sge: r.max_recv_sge,
        max_inline_data: r.max_inline_data,
    }
}

/// The modify command of `base` (`mask` the fields that apply) as rdma-core's
/// `ibv_cmd_modify_qp` sends it: the legacy command with every field, or the extended one
/// when `mask` has `RATE_LIMIT` (with `rate_limit`). A provider with its own rules
/// (`QpOps::modify_command`) sends another.
pub(crate) fn modify_command(
    base: &IbUverbsModifyQp,
    mask: QpAttrMask,
    rate_limit: u32,
) -> std::result::Result<WriteCmd, String> {
    if mask.contains(QpAttrMask::RATE_LIMIT) {
        let ex = IbUverbsExModifyQp {
            base: *base,
            rate_limit,
            reserved: 0,
        };
        WriteCmd::extended(
            IB_USER_VERBS_EX_CMD_MODIFY_QP,
            &ex,
            &[],
            std::mem::size_of::<IbUverbsExModifyQpResp>(),
            0,
        )
        .map_err(|e| format!("the extended modify command could not be encoded ({e})"))
    } else {
        Ok(legacy_cmd(IB_USER_VERBS_CMD_MODIFY_QP, base, &[], 0, 0))
    }
}
