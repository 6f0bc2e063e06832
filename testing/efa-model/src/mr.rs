//! `EFA_IB_METHOD_MR_QUERY`: the interconnect ids of an MR.

use uverbs::channel::{AttrKind, IoctlCmd};
use uverbs::Errno;
use uverbs_uapi::efa::*;

use crate::state::Dev;

/// Interconnect ids the model reports for every MR (`EFA_IB_METHOD_MR_QUERY`).
pub const MODEL_RECV_IC_ID: u16 = 3;
/// See [`MODEL_RECV_IC_ID`].
pub const MODEL_RDMA_READ_IC_ID: u16 = 5;
/// See [`MODEL_RECV_IC_ID`].
pub const MODEL_RDMA_RECV_IC_ID: u16 = 7;

/// `EFA_IB_METHOD_MR_QUERY`: like the kernel, every attribute is mandatory; the handle must be
/// a live MR; the RDMA ids are valid only when the device has the matching cap.
pub(crate) fn query_mr(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let outs = [
        EFA_IB_ATTR_QUERY_MR_RESP_IC_ID_VALIDITY,
        EFA_IB_ATTR_QUERY_MR_RESP_RECV_IC_ID,
        EFA_IB_ATTR_QUERY_MR_RESP_RDMA_READ_IC_ID,
        EFA_IB_ATTR_QUERY_MR_RESP_RDMA_RECV_IC_ID,
    ];
    let mut seen = Vec::new();
    for a in cmd.attrs() {
        if seen.contains(&a.id()) {
            return Err(Errno::INVAL);
        }
        seen.push(a.id());
        match a.id() {
            EFA_IB_ATTR_QUERY_MR_HANDLE if a.kind() == AttrKind::Idr => {}
            EFA_IB_ATTR_QUERY_MR_HANDLE => return Err(Errno::INVAL),
            id if outs.contains(&id) && (a.kind() != AttrKind::PtrOut || a.len() != 2) => {
                return Err(Errno::INVAL)
            }
            id if outs.contains(&id) => {}
            _ if a.is_mandatory() => return Err(Errno::PROTONOSUPPORT),
            _ => {}
        }
    }
    if seen.len() != 5 {
        return Err(Errno::INVAL);
    }
    let h = cmd
        .attrs()
        .find(|a| a.id() == EFA_IB_ATTR_QUERY_MR_HANDLE)
        .map(|a| a.data() as u32)
        .ok_or(Errno::INVAL)?;
    if !dev.mrs.contains_key(&h) {
        return Err(Errno::INVAL);
    }
    let caps = dev.cfg.device_caps;
    let mut validity = EFA_QUERY_MR_VALIDITY_RECV_IC_ID;
    if caps & EFA_QUERY_DEVICE_CAPS_RDMA_READ != 0 {
        validity |= EFA_QUERY_MR_VALIDITY_RDMA_READ_IC_ID;
    }
    if caps & EFA_QUERY_DEVICE_CAPS_RDMA_WRITE != 0 {
        validity |= EFA_QUERY_MR_VALIDITY_RDMA_RECV_IC_ID;
    }
    for (id, v) in outs.into_iter().zip([
        validity,
        MODEL_RECV_IC_ID,
        MODEL_RDMA_READ_IC_ID,
        MODEL_RDMA_RECV_IC_ID,
    ]) {
        cmd.attr_mut(id)
            .ok_or(Errno::INVAL)?
            .write_output(&v.to_ne_bytes())?;
    }
    Ok(())
}
