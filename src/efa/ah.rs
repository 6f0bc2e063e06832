//! EFA's part of `ibv_create_ah` (libefa's `efa_create_ah`): the driver must return AH
//! numbers (`EFA_USER_CMDS_SUPP_UDATA_CREATE_AH`), there is no driver request, and the
//! driver response's `efa_address_handle` is the number send WQEs carry.

use uverbs_uapi::efa::{
    EfaIbvAllocUcontextResp, EfaIbvCreateAhResp, EFA_USER_CMDS_SUPP_UDATA_CREATE_AH,
};

use crate::channel::WriteCmd;
use crate::error::{Errno, Error, Result};

/// Length of the driver response of CREATE_AH.
pub(crate) const CREATE_AH_RESP_LEN: usize = std::mem::size_of::<EfaIbvCreateAhResp>();

/// Refuses `op` on `pd` when this EFA kernel driver does not hand out AH numbers.
pub(crate) fn check_create_ah(
    uctx: &EfaIbvAllocUcontextResp,
    op: &'static str,
    pd: String,
) -> Result<()> {
    if uctx.cmds_supp_udata_mask & EFA_USER_CMDS_SUPP_UDATA_CREATE_AH == 0 {
        return Err(Error::invalid(
            op,
            pd,
            Errno::OPNOTSUPP,
            "this EFA kernel driver does not return AH numbers, which sends need",
        ));
    }
    Ok(())
}

/// The device's AH number from a completed CREATE_AH.
pub(crate) fn ah_num(cmd: &WriteCmd) -> u32 {
    u32::from(
        cmd.driver_response_as::<EfaIbvCreateAhResp>()
            .efa_address_handle,
    )
}
