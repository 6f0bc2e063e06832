//! Device, port and GID queries: `ibv_query_device`, `ibv_query_device_ex`, `ibv_query_port`,
//! `ibv_query_gid`, `ibv_query_gid_ex`, `ibv_query_gid_table`, `ibv_query_pkey`.
//!
//! Each query is one kernel command, encoded as libibverbs does (`libibverbs/cmd_device.c`):
//! - device attributes: the legacy `IB_USER_VERBS_CMD_QUERY_DEVICE` write, or the extended
//!   `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` (falling back to the legacy one on a kernel without it);
//!   EFA's driver part of the extended response is kept for `efadv_query_device`;
//! - port attributes: the `UVERBS_METHOD_QUERY_PORT` ioctl, falling back to the legacy
//!   `IB_USER_VERBS_CMD_QUERY_PORT` write when the kernel lacks the method;
//! - GIDs: the `UVERBS_METHOD_QUERY_GID_TABLE` / `UVERBS_METHOD_QUERY_GID_ENTRY` ioctls, falling
//!   back to sysfs (`ports/N/gids/I`, `gid_attrs/types/I`, `gid_attrs/ndevs/I`) on older kernels;
//! - P_Keys: sysfs `ports/N/pkeys/I` (rdma-core has no kernel command for them either).
//!
//! The kernel's answers are decoded into Rust types named after the `ibv_*` structs and enums.
//! Values the kernel may add in the future decode to an `Unknown(n)` variant, never to an error
//! or undefined behaviour. The strings `ibv_devinfo` prints for each value are available through
//! `as_str()` so that tools print exactly what rdma-core's tools print.
//!
//! One module per concern, each with its query, its types and their decoding: [`device`]
//! (device attributes), [`port`] (port attributes and the port-range errors), [`gid`] (GIDs,
//! with the sysfs fallback), [`find_gid`] (choosing the GID for a peer, with whether its
//! address is ready), [`pkey`] (P_Keys).

mod device;
mod find_gid;
mod gid;
mod pkey;
mod port;

pub use device::{
    format_fw_ver, AtomicCap, CqModerationCaps, DeviceAttr, DeviceAttrEx, DeviceCapFlags, OdpCaps,
    OdpGeneralCaps, OdpTransportCaps, PacketPacingCaps, PciAtomicCaps, RssCaps, TmCaps, TsoCaps,
    IBV_DEVICE_CC_DMA_BOUNCE, IBV_DEVICE_PCI_WRITE_END_PADDING, IBV_DEVICE_RAW_SCATTER_FCS,
};
pub use find_gid::GidQuery;
pub use gid::{Gid, GidEntry, GidType};
pub use port::{speed_str, LinkLayer, Mtu, PortAttr, PortState};

use crate::error::{Errno, Error};

/// Errnos with which a kernel says it lacks an ioctl method: use the older command instead
/// (rdma-core's `execute_ioctl_fallback` does the same).
fn lacks_method(e: &Error) -> bool {
    e.is(Errno::PROTONOSUPPORT) || e.is(Errno::OPNOTSUPP) || e.is(Errno::NOTTY)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::device::count_sysfs_ports;
    use super::gid::{sysfs_gid_entry, NetDevs};
    use super::pkey::read_pkey;
    use super::*;

    #[test]
    fn enums_decode_known_and_unknown_values() {
        assert_eq!(PortState::from_raw(4), PortState::Active);
        assert_eq!(PortState::from_raw(4).as_str(), "PORT_ACTIVE");
        assert_eq!(PortState::from_raw(9).as_str(), "invalid state");
        assert_eq!(PortState::from_raw(9).raw(), 9);
        assert_eq!(Mtu::from_raw(3).bytes(), Some(1024));
        assert_eq!(Mtu::from_raw(5).bytes(), Some(4096));
        assert_eq!(Mtu::from_raw(1).bytes(), Some(256));
        assert_eq!(Mtu::from_raw(3).as_str(), "1024");
        assert_eq!(Mtu::from_raw(0).bytes(), None);
        assert_eq!(Mtu::from_raw(0).as_str(), "invalid MTU");
        assert_eq!(LinkLayer::from_raw(2).as_str(), "Ethernet");
        assert_eq!(LinkLayer::from_raw(7).as_str(), "Unknown");
        assert_eq!(AtomicCap::from_raw(1).as_str(), "ATOMIC_HCA");
        assert_eq!(AtomicCap::from_raw(3), AtomicCap::Unknown(3));
        assert_eq!(GidType::from_raw(2), GidType::RoceV2);
        assert_eq!(GidType::from_raw(0).as_str(), "RoCE v1");
        assert_eq!(GidType::from_raw(5).as_str(), "Invalid gid type");
        assert_eq!(speed_str(8), "10.0 Gbps");
        assert_eq!(speed_str(3), "invalid speed");
        let f = DeviceCapFlags::from_bits_retain(0x8000_0001);
        assert!(f.contains(DeviceCapFlags::RESIZE_MAX_WR));
        assert_eq!(f.bits(), 0x8000_0001, "unknown bits are kept");
    }

    #[test]
    fn sysfs_fallback_reads_gid_type_netdev_and_pkey() {
        let t = tempfile::tempdir().unwrap();
        let net = t.path().join("net");
        fs::create_dir_all(net.join("veth0")).unwrap();
        fs::write(net.join("veth0/ifindex"), "5\n").unwrap();
        let nets = NetDevs::read(&net);
        let ib = t.path().join("rxe0");
        let p = ib.join("ports/1");
        for d in ["gids", "gid_attrs/types", "gid_attrs/ndevs", "pkeys"] {
            fs::create_dir_all(p.join(d)).unwrap();
        }
        fs::write(
            p.join("gids/0"),
            "fe80:0000:0000:0000:5054:00ff:fe12:3456\n",
        )
        .unwrap();
        fs::write(p.join("gid_attrs/types/0"), "IB/RoCE v1\n").unwrap();
        fs::write(p.join("gid_attrs/ndevs/0"), "veth0\n").unwrap();
        fs::write(
            p.join("gids/1"),
            "fe80:0000:0000:0000:5054:00ff:fe12:3456\n",
        )
        .unwrap();
        fs::write(p.join("gid_attrs/types/1"), "RoCE v2\n").unwrap();
        fs::write(
            p.join("gids/2"),
            "0000:0000:0000:0000:0000:0000:0000:0000\n",
        )
        .unwrap();
        fs::write(p.join("gids/3"), "fe80::1\n").unwrap();
        fs::write(p.join("pkeys/0"), "0xffff\n").unwrap();
        fs::write(p.join("pkeys/1"), "junk\n").unwrap();

        let e0 = sysfs_gid_entry(&ib, 1, 0, LinkLayer::Ethernet, &nets).unwrap();
        assert_eq!(e0.gid_type, GidType::RoceV1);
        assert_eq!(e0.netdev.as_deref(), Some("veth0"));
        assert_eq!(e0.ndev_ifindex, 5);
        assert_eq!(e0.gid.to_ipv6_string(), "fe80::5054:ff:fe12:3456");
        let e0ib = sysfs_gid_entry(&ib, 1, 0, LinkLayer::InfiniBand, &nets).unwrap();
        assert_eq!(e0ib.gid_type, GidType::Ib);
        let e1 = sysfs_gid_entry(&ib, 1, 1, LinkLayer::Ethernet, &nets).unwrap();
        assert_eq!(e1.gid_type, GidType::RoceV2);
        assert_eq!((e1.netdev, e1.ndev_ifindex), (None, 0));
        let e2 = sysfs_gid_entry(&ib, 1, 2, LinkLayer::Ethernet, &nets).unwrap();
        assert!(e2.gid.is_zero());
        let bad = sysfs_gid_entry(&ib, 1, 3, LinkLayer::Ethernet, &nets).unwrap_err();
        assert!(bad.contains("holds no GID"), "{bad}");
        let missing = sysfs_gid_entry(&ib, 1, 9, LinkLayer::Ethernet, &nets).unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");

        assert_eq!(read_pkey(&p.join("pkeys/0")), Ok(0xffff));
        assert_eq!(read_pkey(&p.join("pkeys/1")).unwrap_err().0, Errno::INVAL);
        assert_eq!(read_pkey(&p.join("pkeys/7")).unwrap_err().0, Errno::NOENT);
        assert_eq!(count_sysfs_ports(&ib), Some(1));
        assert_eq!(count_sysfs_ports(t.path()), None);
    }
}
