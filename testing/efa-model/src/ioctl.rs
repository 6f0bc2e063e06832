//! The `RDMA_VERBS_IOCTL` methods the EFA driver answers, dispatched by object and method,
//! and the kernel's attribute parsing they share.

use uverbs::channel::{AttrKind, IoctlCmd};
use uverbs::Errno;
use uverbs_uapi::cmds::*;
use uverbs_uapi::efa::*;
use uverbs_uapi::write::*;
use zerocopy::IntoBytes;

use crate::cq::create_cq;
use crate::mr::query_mr;
use crate::query::{query_gid_entry, query_gid_table, query_port_ioctl};
use crate::state::Fabric;

pub(crate) fn in_u32(cmd: &IoctlCmd<'_>, id: u16) -> Option<u32> {
    let a = cmd.attrs().find(|a| a.id() == id)?;
    let b = a.input()?;
    Some(u32::from_ne_bytes(b.get(..4)?.try_into().ok()?))
}

pub(crate) fn in_u64(cmd: &IoctlCmd<'_>, id: u16) -> Option<u64> {
    let a = cmd.attrs().find(|a| a.id() == id)?;
    let b = a.input()?;
    Some(u64::from_ne_bytes(b.get(..8)?.try_into().ok()?))
}

pub(crate) fn ioctl(f: &mut Fabric, d: usize, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    if cmd.object_id() == UVERBS_OBJECT_COMP_CNTR
        || (cmd.object_id(), cmd.method_id())
            == (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_ATTACH_COMP_CNTR)
    {
        f.ioctl_log.push(crate::RecordedIoctl::of(cmd));
    }
    let dev = &mut f.devs[d];
    match (cmd.object_id(), cmd.method_id()) {
        (UVERBS_OBJECT_COMP_CNTR, UVERBS_METHOD_COMP_CNTR_CREATE) => crate::cntr::create(dev, cmd),
        (UVERBS_OBJECT_COMP_CNTR, UVERBS_METHOD_COMP_CNTR_DESTROY) => {
            crate::cntr::destroy(dev, cmd)
        }
        (UVERBS_OBJECT_COMP_CNTR, UVERBS_METHOD_COMP_CNTR_MODIFY) => crate::cntr::modify(dev, cmd),
        (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_ATTACH_COMP_CNTR) => crate::cntr::attach(dev, cmd),
        (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE) => create_cq(dev, cmd),
        (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY) => {
            let h = cmd
                .attrs()
                .find(|a| a.id() == UVERBS_ATTR_DESTROY_CQ_HANDLE)
                .map(|a| a.data() as u32)
                .ok_or(Errno::INVAL)?;
            let c = dev.cqs.get(&h).ok_or(Errno::INVAL)?;
            if c.qp_refs != 0 {
                return Err(Errno::BUSY);
            }
            let c = dev.cqs.remove(&h).ok_or(Errno::INVAL)?;
            dev.regions.remove(&c.key);
            if let Some(k) = c.db_key {
                dev.regions.remove(&k);
            }
            if let Some(mut a) = cmd.attr_mut(UVERBS_ATTR_DESTROY_CQ_RESP) {
                a.write_output(IbUverbsDestroyCqResp::default().as_bytes())?;
            }
            Ok(())
        }
        (UVERBS_OBJECT_MR, EFA_IB_METHOD_MR_QUERY) => query_mr(dev, cmd),
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT) => query_port_ioctl(dev, cmd),
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY) => query_gid_entry(dev, cmd),
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE) => query_gid_table(dev, cmd),
        _ => Err(Errno::PROTONOSUPPORT),
    }
}

/// The attributes of a method, as the kernel's method spec declares them: id, mandatory, and
/// for a PTR_OUT its minimum length and whether a longer buffer is allowed (zero-filled).
pub(crate) struct AttrSpec {
    pub(crate) id: u16,
    pub(crate) out_min: Option<usize>,
    /// For an output of a fixed type (`UVERBS_ATTR_TYPE`): the exact length.
    pub(crate) out_exact: bool,
    pub(crate) mandatory: bool,
}

/// The kernel's attribute parsing for one method: an unknown attribute marked mandatory is
/// EPROTONOSUPPORT, a missing mandatory one or an output of the wrong size EINVAL.
pub(crate) fn check_attrs(cmd: &IoctlCmd<'_>, spec: &[AttrSpec]) -> Result<(), Errno> {
    for a in cmd.attrs() {
        match spec.iter().find(|s| s.id == a.id()) {
            None if a.is_mandatory() => return Err(Errno::PROTONOSUPPORT),
            None => {}
            Some(s) => {
                if let Some(min) = s.out_min {
                    if a.kind() != AttrKind::PtrOut
                        || a.len() < min
                        || (s.out_exact && a.len() != min)
                    {
                        return Err(Errno::INVAL);
                    }
                }
            }
        }
    }
    for s in spec.iter().filter(|s| s.mandatory) {
        if !cmd.attrs().any(|a| a.id() == s.id) {
            return Err(Errno::INVAL);
        }
    }
    Ok(())
}

/// A constant (`UVERBS_ATTR_CONST_IN`) or small PTR_IN scalar, zero-extended.
pub(crate) fn in_scalar(cmd: &IoctlCmd<'_>, id: u16) -> Option<u64> {
    let a = cmd.attrs().find(|a| a.id() == id)?;
    let b = a.input()?;
    if b.len() > 8 {
        return None;
    }
    let mut v = [0u8; 8];
    v[..b.len()].copy_from_slice(b);
    Some(u64::from_ne_bytes(v))
}

/// `uverbs_get_flags32(..., 0)`: an absent flags attribute is 0; any bit set is EINVAL.
pub(crate) fn check_no_flags(cmd: &IoctlCmd<'_>, id: u16) -> Result<(), Errno> {
    match cmd.attrs().find(|a| a.id() == id) {
        None => Ok(()),
        Some(_) => match in_scalar(cmd, id) {
            Some(0) => Ok(()),
            _ => Err(Errno::INVAL),
        },
    }
}

/// `uverbs_copy_to_struct_or_zero`: the struct, cut to the buffer, zero past its end.
pub(crate) fn copy_struct_or_zero(
    cmd: &mut IoctlCmd<'_>,
    id: u16,
    bytes: &[u8],
) -> Result<(), Errno> {
    let mut a = cmd.attr_mut(id).ok_or(Errno::INVAL)?;
    let len = a.as_ref().len();
    let mut buf = vec![0u8; len.max(bytes.len())];
    buf[..bytes.len()].copy_from_slice(bytes);
    a.write_output(&buf[..len])?;
    Ok(())
}
