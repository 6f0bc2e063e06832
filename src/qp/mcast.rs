//! Multicast groups of a UD QP (`ibv_attach_mcast`, `ibv_detach_mcast`).

use uverbs_uapi::write::{
    IbUverbsAttachMcast, IbUverbsDetachMcast, IB_USER_VERBS_CMD_ATTACH_MCAST,
    IB_USER_VERBS_CMD_DETACH_MCAST,
};

use super::{Qp, QpType};
use crate::channel::WriteCmd;
use crate::context::legacy_cmd;
use crate::error::{Errno, Result};
use crate::query::Gid;

impl Qp {
    /// Joins multicast group `gid` (`ibv_attach_mcast`; UD QPs; `lid` 0 on RoCE).
    #[doc(alias = "ibv_attach_mcast")]
    pub fn attach_mcast(&self, gid: &Gid, lid: u16) -> Result<()> {
        let req = IbUverbsAttachMcast {
            gid: gid.raw,
            qp_handle: self.inner.handle(),
            mlid: lid,
            reserved: 0,
        };
        let mut cmd = legacy_cmd(IB_USER_VERBS_CMD_ATTACH_MCAST, &req, &[], 0, 0);
        self.mcast_cmd("attach_mcast", gid, &mut cmd)
    }

    /// Leaves multicast group `gid` (`ibv_detach_mcast`).
    #[doc(alias = "ibv_detach_mcast")]
    pub fn detach_mcast(&self, gid: &Gid, lid: u16) -> Result<()> {
        let req = IbUverbsDetachMcast {
            gid: gid.raw,
            qp_handle: self.inner.handle(),
            mlid: lid,
            reserved: 0,
        };
        let mut cmd = legacy_cmd(IB_USER_VERBS_CMD_DETACH_MCAST, &req, &[], 0, 0);
        self.mcast_cmd("detach_mcast", gid, &mut cmd)
    }

    fn mcast_cmd(&self, op: &'static str, gid: &Gid, cmd: &mut WriteCmd) -> Result<()> {
        let qp_type = self.qp_type;
        self.inner
            .pd
            .context()
            .write_cmd(op, &|| self.label(), cmd)
            .map_err(|e| {
                if !e.is(Errno::INVAL) {
                    return e;
                }
                let why = if qp_type != QpType::Ud {
                    format!("multicast needs a UD QP, this one is {qp_type:?}")
                } else if gid.raw[0] != 0xff {
                    format!("{gid} is not a multicast GID (first byte must be 0xff)")
                } else if op == "detach_mcast" {
                    format!("the QP is not attached to {gid}")
                } else {
                    format!("the kernel refused group {gid}")
                };
                e.with_reason(why)
            })
    }
}
