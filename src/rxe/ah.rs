//! rxe's part of `ibv_create_ah` (rdma-core's `rxe_create_ah`): no driver request; the
//! driver response's `ah_num` is the kernel's AH index that UD send WQEs carry. Kernels
//! before 5.10 return 0 and expect a full `struct rxe_av` (with the destination MAC resolved
//! from the neighbour table) in every WQE; uverbs refuses those rather than guess a MAC.

use uverbs_uapi::rxe::RxeCreateAhResp;
use zerocopy::FromBytes;

use crate::error::{Errno, Error, Result};

/// Length of the driver response of CREATE_AH.
pub(crate) const CREATE_AH_RESP_LEN: usize = std::mem::size_of::<RxeCreateAhResp>();

/// The kernel's AH index from CREATE_AH's driver response, or the refusal of `op` on the AH
/// `label` when the kernel returned none.
pub(crate) fn ah_num(driver_resp: &[u8], op: &'static str, label: &str) -> Result<u32> {
    let resp = RxeCreateAhResp::read_from_prefix(driver_resp)
        .map(|(r, _)| r)
        .unwrap_or_default();
    match resp.ah_num {
        0 => Err(Error::invalid(
            op,
            label.to_owned(),
            Errno::OPNOTSUPP,
            "this kernel's rxe returns no AH index (ah_num 0, kernels before 5.10): UD sends \
             would need a userspace address vector with a resolved MAC, which uverbs does not \
             build",
        )),
        n => Ok(n),
    }
}
