//! Port and GID queries: the port attributes the EFA driver reports (legacy write and
//! ioctl), its one-entry GID table, and the GID entry and table ioctls.

use uverbs::channel::IoctlCmd;
use uverbs::Errno;
use uverbs_uapi::cmds::*;
use uverbs_uapi::verbs::*;
use uverbs_uapi::write::*;
use zerocopy::IntoBytes;

use crate::ioctl::{check_attrs, check_no_flags, copy_struct_or_zero, in_scalar, AttrSpec};
use crate::state::Dev;
use crate::ModelConfig;

// ---------------------------------------------------------------------------------------------
// Port and GID queries
//
// Facts (kernel drivers/infiniband/hw/efa/efa_verbs.c, core/uverbs_std_types_device.c,
// core/uverbs_cmd.c, core/cache.c):
// - one port, numbered 1 (`rdma_is_port_valid`: any other number is EINVAL);
// - `efa_query_port` fills, after the core zeroed the attributes: state ACTIVE, phys_state
//   LINK_UP, gid_tbl_len 1, pkey_tbl_len 1, active_speed EDR, active_width 4X, max and active
//   MTU `ib_mtu_int_to_enum(mtu)`, max_msg_sz = the device MTU, max_vl_num 1, lmc 1; LID,
//   SM LID, counters and capability flags stay 0;
// - `efa_port_link_layer` answers IB_LINK_LAYER_UNSPECIFIED; no GRH-required flag;
// - the ioctl answer (`ib_uverbs_query_port_resp_ex`) adds `active_speed_ex` = active_speed;
// - the GID table (`config_non_roce_gid_cache` over `efa_query_gid`) holds one entry, index 0,
//   the device address, type IB, no netdev; since Linux 5.10 the GID ioctls serve non-IB/RoCE ports
//   (Gal Pressman's fixes), so index 1 and up are EINVAL (`rdma_get_gid_attr`);
// - `efa_query_pkey`: index 0 is 0xffff, any other EINVAL (sysfs `ports/1/pkeys/0`; no
//   uverbs command reads P_Keys).
// ---------------------------------------------------------------------------------------------

/// `IB_PORT_PHYS_STATE_LINK_UP`.
pub(crate) const PHYS_STATE_LINK_UP: u8 = 5;
/// `IB_SPEED_EDR` (25 Gb/s per lane).
pub(crate) const SPEED_EDR: u8 = 32;
/// `IB_WIDTH_4X`.
pub(crate) const WIDTH_4X: u8 = 2;

/// `ib_mtu_int_to_enum`: the largest IB MTU not above `mtu` (256 at least).
pub(crate) fn ib_mtu_int_to_enum(mtu: u32) -> u8 {
    match mtu {
        4096.. => IB_MTU_4096,
        2048..=4095 => IB_MTU_2048,
        1024..=2047 => IB_MTU_1024,
        512..=1023 => IB_MTU_512,
        _ => IB_MTU_256,
    }
}

/// What `efa_query_port` + `copy_port_attr_to_resp` report for port 1.
pub(crate) fn port_resp(cfg: &ModelConfig) -> IbUverbsQueryPortResp {
    let mtu = ib_mtu_int_to_enum(cfg.mtu);
    IbUverbsQueryPortResp {
        state: IB_PORT_ACTIVE,
        max_mtu: mtu,
        active_mtu: mtu,
        gid_tbl_len: 1,
        pkey_tbl_len: 1,
        max_msg_sz: cfg.mtu,
        lmc: 1,
        max_vl_num: 1,
        active_width: WIDTH_4X,
        active_speed: SPEED_EDR,
        phys_state: PHYS_STATE_LINK_UP,
        link_layer: IB_LINK_LAYER_UNSPECIFIED,
        ..Default::default()
    }
}

/// `rdma_is_port_valid` on a one-port device; a const above the attribute's type is EINVAL
/// too (`uverbs_get_const`).
pub(crate) fn check_port(port: u64) -> Result<(), Errno> {
    if port == 1 {
        Ok(())
    } else {
        Err(Errno::INVAL)
    }
}

/// `UVERBS_METHOD_QUERY_PORT`: the port number is a mandatory const, the response at least
/// `offsetofend(ib_uverbs_query_port_resp_ex, active_speed_ex)` bytes.
pub(crate) fn query_port_ioctl(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    check_attrs(
        cmd,
        &[
            AttrSpec {
                id: UVERBS_ATTR_QUERY_PORT_PORT_NUM,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_PORT_RESP,
                out_min: Some(std::mem::size_of::<IbUverbsQueryPortRespEx>()),
                out_exact: false,
                mandatory: true,
            },
        ],
    )?;
    let port = in_scalar(cmd, UVERBS_ATTR_QUERY_PORT_PORT_NUM).ok_or(Errno::INVAL)?;
    check_port(port)?;
    let legacy_resp = port_resp(&dev.cfg);
    let resp = IbUverbsQueryPortRespEx {
        active_speed_ex: u32::from(legacy_resp.active_speed),
        legacy_resp,
        ..Default::default()
    };
    copy_struct_or_zero(cmd, UVERBS_ATTR_QUERY_PORT_RESP, resp.as_bytes())
}

/// The one GID table entry (port 1, index 0).
pub(crate) fn gid_entry(dev: &Dev) -> IbUverbsGidEntry {
    let mut e = IbUverbsGidEntry {
        gid_index: 0,
        port_num: 1,
        gid_type: IB_UVERBS_GID_TYPE_IB,
        netdev_ifindex: 0,
        ..Default::default()
    };
    e.gid.as_mut_bytes().copy_from_slice(&dev.gid);
    e
}

/// `UVERBS_METHOD_QUERY_GID_ENTRY`: flags must be 0, port 1, index 0 (`rdma_get_gid_attr`:
/// an index past the table is EINVAL).
pub(crate) fn query_gid_entry(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    check_attrs(
        cmd,
        &[
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_ENTRY_PORT,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
                out_min: Some(std::mem::size_of::<IbUverbsGidEntry>()),
                out_exact: false,
                mandatory: true,
            },
        ],
    )?;
    check_no_flags(cmd, UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS)?;
    let port = in_scalar(cmd, UVERBS_ATTR_QUERY_GID_ENTRY_PORT).ok_or(Errno::INVAL)?;
    let index = in_scalar(cmd, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX).ok_or(Errno::INVAL)?;
    check_port(port)?;
    if index != 0 {
        return Err(Errno::INVAL);
    }
    let e = gid_entry(dev);
    copy_struct_or_zero(cmd, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, e.as_bytes())
}

/// `UVERBS_METHOD_QUERY_GID_TABLE`: entries of `entry_size` bytes each (cut or zero-padded
/// from the kernel's 32), a buffer that is not a whole number of them or holds none is
/// EINVAL, as is a table larger than the buffer; the count is a u64.
pub(crate) fn query_gid_table(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    check_attrs(
        cmd,
        &[
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE,
                out_min: None,
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_TABLE_FLAGS,
                out_min: None,
                out_exact: false,
                mandatory: false,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES,
                out_min: Some(0),
                out_exact: false,
                mandatory: true,
            },
            AttrSpec {
                id: UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
                out_min: Some(8),
                out_exact: true,
                mandatory: true,
            },
        ],
    )?;
    check_no_flags(cmd, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS)?;
    let entry_size =
        in_scalar(cmd, UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE).ok_or(Errno::INVAL)? as usize;
    if entry_size == 0 {
        return Err(Errno::INVAL);
    }
    let buf_len = cmd
        .attrs()
        .find(|a| a.id() == UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES)
        .map(|a| a.len())
        .ok_or(Errno::INVAL)?;
    if buf_len % entry_size != 0 || buf_len / entry_size == 0 {
        return Err(Errno::INVAL);
    }
    let table = [gid_entry(dev)];
    if table.len() > buf_len / entry_size {
        return Err(Errno::INVAL);
    }
    let mut out = vec![0u8; table.len() * entry_size];
    for (e, dst) in table.iter().zip(out.chunks_exact_mut(entry_size)) {
        let b = e.as_bytes();
        let n = b.len().min(entry_size);
        dst[..n].copy_from_slice(&b[..n]);
    }
    cmd.attr_mut(UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES)
        .ok_or(Errno::INVAL)?
        .write_output(&out)?;
    let n = table.len() as u64;
    cmd.attr_mut(UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES)
        .ok_or(Errno::INVAL)?
        .write_output(n.as_bytes())?;
    Ok(())
}
