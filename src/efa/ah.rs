//! EFA address handles (`ibv_create_ah` with the device AH number, `efadv_query_ah`).

use uverbs_uapi::efa::EfaIbvCreateAhResp;
use uverbs_uapi::write::{
    IbUverbsAhAttr, IbUverbsCreateAh, IbUverbsCreateAhResp, IbUverbsDestroyAh, IbUverbsGlobalRoute,
    IB_USER_VERBS_CMD_CREATE_AH, IB_USER_VERBS_CMD_DESTROY_AH,
};
use zerocopy::IntoBytes;

use crate::context::legacy_cmd;
use crate::error::{Errno, Error, Result};
use crate::event::next_user_handle;
use crate::pd::Pd;

/// An address handle on an EFA device: the remote GID and the device's AH number, which send
/// WQEs carry (`efa_address_handle` of the create-AH response).
#[doc(alias = "ibv_ah")]
pub struct EfaAh {
    pd: Pd,
    handle: u32,
    ahn: u16,
    gid: [u8; 16],
    destroyed: bool,
}

impl std::fmt::Debug for EfaAh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "EfaAh(handle {}, ahn {} on {:?})",
            self.handle, self.ahn, self.pd
        )
    }
}

impl Pd {
    /// Creates an address handle for `gid` (port 1, GID index 0: the only ones EFA has) and
    /// learns its device AH number (`ibv_create_ah` + `efa_ibv_create_ah_resp`).
    #[doc(alias = "ibv_create_ah")]
    pub fn efadv_create_ah(&self, gid: [u8; 16]) -> Result<EfaAh> {
        let op = "create_ah";
        let uctx = self.context().efa_ucontext(op)?;
        if uctx.cmds_supp_udata_mask & uverbs_uapi::efa::EFA_USER_CMDS_SUPP_UDATA_CREATE_AH == 0 {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::OPNOTSUPP,
                "the kernel does not return AH numbers",
            ));
        }
        let req = IbUverbsCreateAh {
            user_handle: next_user_handle(),
            pd_handle: self.handle(),
            attr: IbUverbsAhAttr {
                grh: IbUverbsGlobalRoute {
                    dgid: gid,
                    ..Default::default()
                },
                is_global: 1,
                port_num: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_CREATE_AH,
            &req,
            &[],
            std::mem::size_of::<IbUverbsCreateAhResp>(),
            std::mem::size_of::<EfaIbvCreateAhResp>(),
        );
        self.context().write_cmd(op, &|| self.label(), &mut cmd)?;
        let resp: IbUverbsCreateAhResp = cmd.response_as();
        let drv: EfaIbvCreateAhResp = cmd.driver_response_as();
        let _ = drv.as_bytes();
        Ok(EfaAh {
            pd: self.clone(),
            handle: resp.ah_handle,
            ahn: drv.efa_address_handle,
            gid,
            destroyed: false,
        })
    }
}

impl EfaAh {
    /// The device AH number (`efadv_query_ah`'s `ahn`).
    pub fn efadv_query_ah(&self) -> u16 {
        self.ahn
    }

    /// The destination GID.
    pub fn gid(&self) -> [u8; 16] {
        self.gid
    }

    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The destination of a send through this AH (`ibv_wr_set_ud_addr`).
    #[doc(alias = "ibv_wr_set_ud_addr")]
    pub fn ud_addr(&self, remote_qpn: u32, remote_qkey: u32) -> super::EfaUdAddr {
        super::EfaUdAddr {
            ah: self.ahn,
            remote_qpn,
            remote_qkey,
        }
    }

    fn label(&self) -> String {
        format!("ah {} on {}", self.handle, self.pd.context().label())
    }

    fn destroy_inner(&self) -> std::result::Result<(), Errno> {
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_DESTROY_AH,
            &IbUverbsDestroyAh {
                ah_handle: self.handle,
            },
            &[],
            0,
            0,
        );
        self.pd.context().inner.channel.write(&mut cmd)
    }

    /// Destroys the AH now (`ibv_destroy_ah`).
    #[doc(alias = "ibv_destroy_ah")]
    pub fn destroy(mut self) -> Result<()> {
        self.destroyed = true;
        self.destroy_inner()
            .map_err(|e| Error::os("destroy_ah", self.label(), e))
    }
}

impl Drop for EfaAh {
    fn drop(&mut self) {
        if self.destroyed {
            return;
        }
        if let Err(e) = self.destroy_inner() {
            crate::report_drop_error("destroy_ah", &self.label(), e);
        }
    }
}
