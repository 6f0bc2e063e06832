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

use std::fmt;
use std::fs;
use std::path::Path;

use uverbs_uapi::cmds::{
    UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX,
    UVERBS_ATTR_QUERY_GID_ENTRY_PORT, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
    UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS,
    UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
    UVERBS_ATTR_QUERY_PORT_PORT_NUM, UVERBS_ATTR_QUERY_PORT_RESP,
    UVERBS_ATTR_QUERY_PORT_SPEED_PORT_NUM, UVERBS_ATTR_QUERY_PORT_SPEED_RESP,
    UVERBS_METHOD_QUERY_GID_ENTRY, UVERBS_METHOD_QUERY_GID_TABLE, UVERBS_METHOD_QUERY_PORT,
    UVERBS_METHOD_QUERY_PORT_SPEED, UVERBS_OBJECT_DEVICE,
};
use uverbs_uapi::efa::{EfaIbvExQueryDeviceResp, EFA_USER_CMDS_SUPP_UDATA_QUERY_DEVICE};
use uverbs_uapi::verbs::{
    IbUverbsGidEntry, IbUverbsQueryPortRespEx, IB_UVERBS_GID_TYPE_IB, IB_UVERBS_GID_TYPE_ROCE_V1,
    IB_UVERBS_GID_TYPE_ROCE_V2,
};
use uverbs_uapi::write::{
    IbUverbsExQueryDevice, IbUverbsExQueryDeviceResp, IbUverbsQueryDevice, IbUverbsQueryDeviceResp,
    IbUverbsQueryPort, IbUverbsQueryPortResp, IB_USER_VERBS_CMD_QUERY_DEVICE,
    IB_USER_VERBS_CMD_QUERY_PORT, IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
};
use zerocopy::{FromBytes, IntoBytes};

use crate::channel::{IoctlCmd, WriteCmd};
use crate::context::{legacy_cmd, Context};
use crate::device::Driver;
use crate::error::{Errno, Error, Result};
use crate::ProviderInfo;

// ---------------------------------------------------------------------------------------------
// Enums of ibv_device_attr / ibv_port_attr / ibv_gid_entry
// ---------------------------------------------------------------------------------------------

/// How a device supports atomic operations (`enum ibv_atomic_cap`).
#[doc(alias = "ibv_atomic_cap")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicCap {
    /// `IBV_ATOMIC_NONE`: no atomics.
    None,
    /// `IBV_ATOMIC_HCA`: atomic within this device.
    Hca,
    /// `IBV_ATOMIC_GLOB`: atomic against the CPU and other devices too.
    Glob,
    /// A value this library does not know.
    Unknown(u32),
}

impl AtomicCap {
    /// From the kernel's number (`IB_ATOMIC_*`).
    pub fn from_raw(v: u32) -> Self {
        match v {
            0 => AtomicCap::None,
            1 => AtomicCap::Hca,
            2 => AtomicCap::Glob,
            x => AtomicCap::Unknown(x),
        }
    }
    /// The kernel's number.
    pub fn raw(self) -> u32 {
        match self {
            AtomicCap::None => 0,
            AtomicCap::Hca => 1,
            AtomicCap::Glob => 2,
            AtomicCap::Unknown(x) => x,
        }
    }
    /// The name `ibv_devinfo` prints (`ATOMIC_HCA`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AtomicCap::None => "ATOMIC_NONE",
            AtomicCap::Hca => "ATOMIC_HCA",
            AtomicCap::Glob => "ATOMIC_GLOB",
            AtomicCap::Unknown(_) => "invalid atomic capability",
        }
    }
}

/// The logical state of a port (`enum ibv_port_state`).
#[doc(alias = "ibv_port_state")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortState {
    /// `IBV_PORT_NOP`.
    Nop,
    /// `IBV_PORT_DOWN`: the link is down.
    Down,
    /// `IBV_PORT_INIT`: the link is up, the port is not configured yet.
    Init,
    /// `IBV_PORT_ARMED`.
    Armed,
    /// `IBV_PORT_ACTIVE`: the port can send and receive.
    Active,
    /// `IBV_PORT_ACTIVE_DEFER`.
    ActiveDefer,
    /// A value this library does not know.
    Unknown(u8),
}

impl PortState {
    /// From the kernel's number (`IB_PORT_*`).
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => PortState::Nop,
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            5 => PortState::ActiveDefer,
            x => PortState::Unknown(x),
        }
    }
    /// The kernel's number.
    pub fn raw(self) -> u8 {
        match self {
            PortState::Nop => 0,
            PortState::Down => 1,
            PortState::Init => 2,
            PortState::Armed => 3,
            PortState::Active => 4,
            PortState::ActiveDefer => 5,
            PortState::Unknown(x) => x,
        }
    }
    /// The name `ibv_devinfo` prints (`PORT_ACTIVE`, ...; `invalid state` for others).
    pub fn as_str(self) -> &'static str {
        match self {
            PortState::Down => "PORT_DOWN",
            PortState::Init => "PORT_INIT",
            PortState::Armed => "PORT_ARMED",
            PortState::Active => "PORT_ACTIVE",
            _ => "invalid state",
        }
    }
}

/// A path MTU (`enum ibv_mtu`).
#[doc(alias = "ibv_mtu")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    /// `IBV_MTU_256`.
    Mtu256,
    /// `IBV_MTU_512`.
    Mtu512,
    /// `IBV_MTU_1024`.
    Mtu1024,
    /// `IBV_MTU_2048`.
    Mtu2048,
    /// `IBV_MTU_4096`.
    Mtu4096,
    /// A value this library does not know.
    Unknown(u8),
}

impl Mtu {
    /// From the kernel's number (`IB_MTU_*`).
    pub fn from_raw(v: u8) -> Self {
        match v {
            1 => Mtu::Mtu256,
            2 => Mtu::Mtu512,
            3 => Mtu::Mtu1024,
            4 => Mtu::Mtu2048,
            5 => Mtu::Mtu4096,
            x => Mtu::Unknown(x),
        }
    }
    /// The kernel's number.
    pub fn raw(self) -> u8 {
        match self {
            Mtu::Mtu256 => 1,
            Mtu::Mtu512 => 2,
            Mtu::Mtu1024 => 3,
            Mtu::Mtu2048 => 4,
            Mtu::Mtu4096 => 5,
            Mtu::Unknown(x) => x,
        }
    }
    /// The MTU in bytes (`None` for an unknown value).
    pub fn bytes(self) -> Option<u32> {
        match self {
            Mtu::Unknown(_) => None,
            m => Some(128 << m.raw()),
        }
    }
    /// The name `ibv_devinfo` prints (`1024`, ...; `invalid MTU` for others).
    pub fn as_str(self) -> &'static str {
        match self {
            Mtu::Mtu256 => "256",
            Mtu::Mtu512 => "512",
            Mtu::Mtu1024 => "1024",
            Mtu::Mtu2048 => "2048",
            Mtu::Mtu4096 => "4096",
            Mtu::Unknown(_) => "invalid MTU",
        }
    }
}

/// The link layer of a port (`IBV_LINK_LAYER_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    /// `IBV_LINK_LAYER_UNSPECIFIED` (EFA).
    Unspecified,
    /// `IBV_LINK_LAYER_INFINIBAND`.
    InfiniBand,
    /// `IBV_LINK_LAYER_ETHERNET` (RoCE: rxe). EFA reports `Unspecified`.
    Ethernet,
    /// A value this library does not know.
    Unknown(u8),
}

impl LinkLayer {
    /// From the kernel's number (`IB_LINK_LAYER_*`).
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => LinkLayer::Unspecified,
            1 => LinkLayer::InfiniBand,
            2 => LinkLayer::Ethernet,
            x => LinkLayer::Unknown(x),
        }
    }
    /// The kernel's number.
    pub fn raw(self) -> u8 {
        match self {
            LinkLayer::Unspecified => 0,
            LinkLayer::InfiniBand => 1,
            LinkLayer::Ethernet => 2,
            LinkLayer::Unknown(x) => x,
        }
    }
    /// The name `ibv_devinfo` prints (`Ethernet`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            LinkLayer::Unspecified => "Unspecified",
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
            LinkLayer::Unknown(_) => "Unknown",
        }
    }
}

/// The type of a GID table entry (`enum ibv_gid_type`).
#[doc(alias = "ibv_gid_type")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GidType {
    /// `IBV_GID_TYPE_IB`: an InfiniBand GID.
    Ib,
    /// `IBV_GID_TYPE_ROCE_V1`: RoCE v1 (Ethernet frames, ethertype 0x8915).
    RoceV1,
    /// `IBV_GID_TYPE_ROCE_V2`: RoCE v2 (UDP/IP, port 4791).
    RoceV2,
    /// A value this library does not know.
    Unknown(u32),
}

impl GidType {
    /// From the kernel's number (`IB_UVERBS_GID_TYPE_*`).
    pub fn from_raw(v: u32) -> Self {
        match v {
            IB_UVERBS_GID_TYPE_IB => GidType::Ib,
            IB_UVERBS_GID_TYPE_ROCE_V1 => GidType::RoceV1,
            IB_UVERBS_GID_TYPE_ROCE_V2 => GidType::RoceV2,
            x => GidType::Unknown(x),
        }
    }
    /// The kernel's number.
    pub fn raw(self) -> u32 {
        match self {
            GidType::Ib => IB_UVERBS_GID_TYPE_IB,
            GidType::RoceV1 => IB_UVERBS_GID_TYPE_ROCE_V1,
            GidType::RoceV2 => IB_UVERBS_GID_TYPE_ROCE_V2,
            GidType::Unknown(x) => x,
        }
    }
    /// The name `ibv_devinfo` prints after a GID on an Ethernet port. rdma-core reports IB and
    /// RoCE v1 GIDs alike as `IBV_GID_TYPE_SYSFS_IB_ROCE_V1`, printed `RoCE v1`.
    pub fn as_str(self) -> &'static str {
        match self {
            GidType::Ib | GidType::RoceV1 => "RoCE v1",
            GidType::RoceV2 => "RoCE v2",
            GidType::Unknown(_) => "Invalid gid type",
        }
    }
}

bitflags::bitflags! {
    /// Device capabilities (`enum ibv_device_cap_flags`, the low 32 bits of
    /// `device_cap_flags_ex`). Bits this library does not name are kept.
    #[doc(alias = "ibv_device_cap_flags")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct DeviceCapFlags: u32 {
        /// `IBV_DEVICE_RESIZE_MAX_WR`.
        const RESIZE_MAX_WR = 1;
        /// `IBV_DEVICE_BAD_PKEY_CNTR`.
        const BAD_PKEY_CNTR = 1 << 1;
        /// `IBV_DEVICE_BAD_QKEY_CNTR`.
        const BAD_QKEY_CNTR = 1 << 2;
        /// `IBV_DEVICE_RAW_MULTI`.
        const RAW_MULTI = 1 << 3;
        /// `IBV_DEVICE_AUTO_PATH_MIG`.
        const AUTO_PATH_MIG = 1 << 4;
        /// `IBV_DEVICE_CHANGE_PHY_PORT`.
        const CHANGE_PHY_PORT = 1 << 5;
        /// `IBV_DEVICE_UD_AV_PORT_ENFORCE`.
        const UD_AV_PORT_ENFORCE = 1 << 6;
        /// `IBV_DEVICE_CURR_QP_STATE_MOD`.
        const CURR_QP_STATE_MOD = 1 << 7;
        /// `IBV_DEVICE_SHUTDOWN_PORT`.
        const SHUTDOWN_PORT = 1 << 8;
        /// `IBV_DEVICE_INIT_TYPE`.
        const INIT_TYPE = 1 << 9;
        /// `IBV_DEVICE_PORT_ACTIVE_EVENT`.
        const PORT_ACTIVE_EVENT = 1 << 10;
        /// `IBV_DEVICE_SYS_IMAGE_GUID`.
        const SYS_IMAGE_GUID = 1 << 11;
        /// `IBV_DEVICE_RC_RNR_NAK_GEN`.
        const RC_RNR_NAK_GEN = 1 << 12;
        /// `IBV_DEVICE_SRQ_RESIZE`.
        const SRQ_RESIZE = 1 << 13;
        /// `IBV_DEVICE_N_NOTIFY_CQ`.
        const N_NOTIFY_CQ = 1 << 14;
        /// `IBV_DEVICE_MEM_WINDOW`.
        const MEM_WINDOW = 1 << 17;
        /// `IBV_DEVICE_UD_IP_CSUM`.
        const UD_IP_CSUM = 1 << 18;
        /// `IBV_DEVICE_XRC`.
        const XRC = 1 << 20;
        /// `IBV_DEVICE_MEM_MGT_EXTENSIONS`.
        const MEM_MGT_EXTENSIONS = 1 << 21;
        /// `IBV_DEVICE_MEM_WINDOW_TYPE_2A`.
        const MEM_WINDOW_TYPE_2A = 1 << 23;
        /// `IBV_DEVICE_MEM_WINDOW_TYPE_2B`.
        const MEM_WINDOW_TYPE_2B = 1 << 24;
        /// `IBV_DEVICE_RC_IP_CSUM`.
        const RC_IP_CSUM = 1 << 25;
        /// `IBV_DEVICE_RAW_IP_CSUM`.
        const RAW_IP_CSUM = 1 << 26;
        /// `IBV_DEVICE_MANAGED_FLOW_STEERING`.
        const MANAGED_FLOW_STEERING = 1 << 29;
        const _ = !0;
    }
}

/// `IBV_DEVICE_RAW_SCATTER_FCS` (a bit of `device_cap_flags_ex`).
pub const IBV_DEVICE_RAW_SCATTER_FCS: u64 = 1 << 34;
/// `IBV_DEVICE_PCI_WRITE_END_PADDING` (a bit of `device_cap_flags_ex`).
pub const IBV_DEVICE_PCI_WRITE_END_PADDING: u64 = 1 << 36;
/// `IBV_DEVICE_CC_DMA_BOUNCE` (a bit of `device_cap_flags_ex`).
pub const IBV_DEVICE_CC_DMA_BOUNCE: u64 = 1 << 41;

bitflags::bitflags! {
    /// General on-demand-paging capabilities (`enum ibv_odp_general_caps`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct OdpGeneralCaps: u64 {
        /// `IBV_ODP_SUPPORT`.
        const SUPPORT = 1;
        /// `IBV_ODP_SUPPORT_IMPLICIT`.
        const SUPPORT_IMPLICIT = 1 << 1;
        const _ = !0;
    }
}

bitflags::bitflags! {
    /// Per-transport on-demand-paging capabilities (`enum ibv_odp_transport_cap_bits`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct OdpTransportCaps: u32 {
        /// `IBV_ODP_SUPPORT_SEND`.
        const SEND = 1;
        /// `IBV_ODP_SUPPORT_RECV`.
        const RECV = 1 << 1;
        /// `IBV_ODP_SUPPORT_WRITE`.
        const WRITE = 1 << 2;
        /// `IBV_ODP_SUPPORT_READ`.
        const READ = 1 << 3;
        /// `IBV_ODP_SUPPORT_ATOMIC`.
        const ATOMIC = 1 << 4;
        /// `IBV_ODP_SUPPORT_SRQ_RECV`.
        const SRQ_RECV = 1 << 5;
        /// `IBV_ODP_SUPPORT_FLUSH`.
        const FLUSH = 1 << 6;
        /// `IBV_ODP_SUPPORT_ATOMIC_WRITE`.
        const ATOMIC_WRITE = 1 << 7;
        const _ = !0;
    }
}

// ---------------------------------------------------------------------------------------------
// GIDs
// ---------------------------------------------------------------------------------------------

/// A 128-bit global identifier (`union ibv_gid`), bytes in network order.
#[doc(alias = "ibv_gid")]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid {
    /// The 16 bytes, network order (`ibv_gid.raw`).
    pub raw: [u8; 16],
}

impl Gid {
    /// All zero: an unused table slot.
    pub fn is_zero(&self) -> bool {
        self.raw == [0; 16]
    }

    /// The interface id (the low 64 bits) is zero; `ibv_devinfo` skips such entries.
    pub fn interface_id_is_zero(&self) -> bool {
        self.raw[8..] == [0; 8]
    }

    /// The subnet prefix (`ibv_gid.global.subnet_prefix`, host order).
    pub fn subnet_prefix(&self) -> u64 {
        u64::from_be_bytes(self.raw[..8].try_into().expect("8 bytes"))
    }

    /// The interface id (`ibv_gid.global.interface_id`, host order).
    pub fn interface_id(&self) -> u64 {
        u64::from_be_bytes(self.raw[8..].try_into().expect("8 bytes"))
    }

    /// Eight groups of four hex digits, `fe80:0000:0000:0000:5054:00ff:fe12:3456`: how
    /// `ibv_devinfo` prints IB and RoCE v1 GIDs.
    pub fn to_hex_string(&self) -> String {
        let g: Vec<String> = self
            .raw
            .chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect();
        g.join(":")
    }

    /// The IPv6 text form exactly as glibc's `inet_ntop(AF_INET6)` writes it (how
    /// `ibv_devinfo` prints RoCE v2 GIDs): the longest run of two or more zero groups becomes
    /// `::`, and IPv4-mapped (`::ffff:a.b.c.d`) and IPv4-compatible (`::a.b.c.d`) addresses end
    /// in dotted decimal.
    pub fn to_ipv6_string(&self) -> String {
        let words: Vec<u16> = self
            .raw
            .chunks(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        // Longest run of zero words (first one wins on a tie), only if at least 2 long.
        let (mut best, mut cur): ((usize, usize), Option<(usize, usize)>) = ((0, 0), None);
        for (i, &w) in words.iter().enumerate() {
            if w == 0 {
                let c = cur.map_or((i, 1), |(b, l)| (b, l + 1));
                cur = Some(c);
                if c.1 > best.1 {
                    best = c;
                }
            } else {
                cur = None;
            }
        }
        let best = (best.1 >= 2).then_some(best);
        let mut s = String::new();
        let mut i = 0;
        while i < 8 {
            if let Some((b, l)) = best {
                if i == b {
                    if i == 0 {
                        s.push(':');
                    }
                    s.push(':');
                    i += l;
                    continue;
                }
            }
            if i == 6 {
                if let Some((0, l)) = best {
                    if l == 6 || (l == 5 && words[5] == 0xffff) {
                        let r = &self.raw;
                        s.push_str(&format!("{}.{}.{}.{}", r[12], r[13], r[14], r[15]));
                        break;
                    }
                }
            }
            s.push_str(&format!("{:x}", words[i]));
            if i < 7 {
                s.push(':');
            }
            i += 1;
        }
        s
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_ipv6_string())
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({})", self.to_ipv6_string())
    }
}

impl From<[u8; 16]> for Gid {
    fn from(raw: [u8; 16]) -> Self {
        Gid { raw }
    }
}

/// One entry of a port's GID table (`struct ibv_gid_entry`), plus the name of its netdev.
#[doc(alias = "ibv_gid_entry")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// The GID.
    pub gid: Gid,
    /// Its index in the port's table.
    pub gid_index: u32,
    /// The port (from 1).
    pub port_num: u32,
    /// IB, RoCE v1 or RoCE v2.
    pub gid_type: GidType,
    /// The ifindex of the netdev the GID belongs to, 0 if none (`ndev_ifindex`; the kernel's
    /// `netdev_ifindex`).
    pub ndev_ifindex: u32,
    /// The netdev's name (resolved from `ndev_ifindex` in this network namespace), if any.
    pub netdev: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Device attributes
// ---------------------------------------------------------------------------------------------

/// Device attributes (`struct ibv_device_attr`), from `ibv_query_device`.
#[doc(alias = "ibv_device_attr")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceAttr {
    /// Firmware version, formatted as the provider formats it (rxe: `major.minor.sub`, EFA:
    /// four dotted bytes).
    pub fw_ver: String,
    /// Node GUID, host order (the C struct holds it big-endian).
    pub node_guid: u64,
    /// System image GUID, host order.
    pub sys_image_guid: u64,
    /// Largest registrable memory region, in bytes.
    pub max_mr_size: u64,
    /// Supported page sizes (bit n set: 2^n bytes).
    pub page_size_cap: u64,
    /// IEEE vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Maximum number of QPs.
    pub max_qp: u32,
    /// Maximum outstanding work requests per queue.
    pub max_qp_wr: u32,
    /// Capability flags.
    pub device_cap_flags: DeviceCapFlags,
    /// Maximum scatter/gather entries per send or receive WR.
    pub max_sge: u32,
    /// Maximum scatter/gather entries per RDMA read WR.
    pub max_sge_rd: u32,
    /// Maximum number of CQs.
    pub max_cq: u32,
    /// Maximum entries per CQ.
    pub max_cqe: u32,
    /// Maximum number of MRs.
    pub max_mr: u32,
    /// Maximum number of PDs.
    pub max_pd: u32,
    /// Maximum outstanding RDMA read/atomic operations per QP as target.
    pub max_qp_rd_atom: u32,
    /// Same per EE context.
    pub max_ee_rd_atom: u32,
    /// Maximum RDMA read/atomic resources as target, device-wide.
    pub max_res_rd_atom: u32,
    /// Maximum outstanding RDMA read/atomic operations per QP as initiator.
    pub max_qp_init_rd_atom: u32,
    /// Same per EE context.
    pub max_ee_init_rd_atom: u32,
    /// Atomic operation support.
    pub atomic_cap: AtomicCap,
    /// Maximum EE contexts.
    pub max_ee: u32,
    /// Maximum RD domains.
    pub max_rdd: u32,
    /// Maximum memory windows.
    pub max_mw: u32,
    /// Maximum raw IPv6 datagram QPs.
    pub max_raw_ipv6_qp: u32,
    /// Maximum raw ethertype datagram QPs.
    pub max_raw_ethy_qp: u32,
    /// Maximum multicast groups.
    pub max_mcast_grp: u32,
    /// Maximum QPs per multicast group.
    pub max_mcast_qp_attach: u32,
    /// Maximum QPs attached to multicast groups, in total.
    pub max_total_mcast_qp_attach: u32,
    /// Maximum address handles.
    pub max_ah: u32,
    /// Maximum FMRs (obsolete, 0).
    pub max_fmr: u32,
    /// Maximum remaps per FMR (obsolete, 0).
    pub max_map_per_fmr: u32,
    /// Maximum SRQs.
    pub max_srq: u32,
    /// Maximum WRs per SRQ.
    pub max_srq_wr: u32,
    /// Maximum SGEs per SRQ WR.
    pub max_srq_sge: u32,
    /// Maximum P_Key table entries.
    pub max_pkeys: u16,
    /// Local CA ack delay.
    pub local_ca_ack_delay: u8,
    /// Number of physical ports.
    pub phys_port_cnt: u8,
}

/// On-demand-paging capabilities (`struct ibv_odp_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OdpCaps {
    /// General ODP support.
    pub general_caps: OdpGeneralCaps,
    /// RC transport.
    pub rc_odp_caps: OdpTransportCaps,
    /// UC transport.
    pub uc_odp_caps: OdpTransportCaps,
    /// UD transport.
    pub ud_odp_caps: OdpTransportCaps,
}

/// TCP segmentation offload capabilities (`struct ibv_tso_caps`). The kernel's core response
/// does not carry them (only mlx5's driver data does), so they are 0 for rxe and EFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TsoCaps {
    /// Maximum TSO payload.
    pub max_tso: u32,
    /// Bit `1 << qp_type` per QP type supporting TSO.
    pub supported_qpts: u32,
}

/// Receive-side scaling capabilities (`struct ibv_rss_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RssCaps {
    /// Bit `1 << qp_type` per QP type supporting RSS.
    pub supported_qpts: u32,
    /// Maximum receive WQ indirection tables.
    pub max_rwq_indirection_tables: u32,
    /// Maximum size of one indirection table.
    pub max_rwq_indirection_table_size: u32,
    /// Hash fields (provider data; 0 for rxe and EFA).
    pub rx_hash_fields_mask: u64,
    /// Hash function (provider data; 0 for rxe and EFA).
    pub rx_hash_function: u8,
}

/// Packet pacing capabilities (`struct ibv_packet_pacing_caps`); provider data, 0 for rxe/EFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketPacingCaps {
    /// Minimum rate limit, kbps.
    pub qp_rate_limit_min: u32,
    /// Maximum rate limit, kbps.
    pub qp_rate_limit_max: u32,
    /// Bit `1 << qp_type` per QP type supporting pacing.
    pub supported_qpts: u32,
}

/// Tag-matching capabilities (`struct ibv_tm_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TmCaps {
    /// Maximum rendezvous header size.
    pub max_rndv_hdr_size: u32,
    /// Maximum tags.
    pub max_num_tags: u32,
    /// `IBV_TM_CAP_*`.
    pub flags: u32,
    /// Maximum outstanding list operations.
    pub max_ops: u32,
    /// Maximum SGEs in a tagged buffer.
    pub max_sge: u32,
}

/// CQ moderation capabilities (`struct ibv_cq_moderation_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CqModerationCaps {
    /// Maximum completions per moderation event.
    pub max_cq_count: u16,
    /// Maximum moderation period, microseconds.
    pub max_cq_period: u16,
}

/// PCIe atomic capabilities (`struct ibv_pci_atomic_caps`); not in the kernel's core response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PciAtomicCaps {
    /// Supported fetch-and-add operand sizes.
    pub fetch_add: u16,
    /// Supported swap operand sizes.
    pub swap: u16,
    /// Supported compare-and-swap operand sizes.
    pub compare_swap: u16,
}

/// Extended device attributes (`struct ibv_device_attr_ex`), from `ibv_query_device_ex`.
#[doc(alias = "ibv_device_attr_ex")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceAttrEx {
    /// The attributes of [`Context::query_device`].
    pub orig_attr: DeviceAttr,
    /// Extension mask (none defined).
    pub comp_mask: u64,
    /// On-demand paging.
    pub odp_caps: OdpCaps,
    /// Bits of a completion timestamp that are valid (0: no timestamps).
    pub completion_timestamp_mask: u64,
    /// Device clock in kHz (0: not reported).
    pub hca_core_clock: u64,
    /// All 64 capability bits (`IBV_DEVICE_*`, see [`IBV_DEVICE_RAW_SCATTER_FCS`], ...).
    pub device_cap_flags_ex: u64,
    /// TSO (provider data, 0 here).
    pub tso_caps: TsoCaps,
    /// RSS.
    pub rss_caps: RssCaps,
    /// Maximum work queues of type RQ.
    pub max_wq_type_rq: u32,
    /// Packet pacing (provider data, 0 here).
    pub packet_pacing_caps: PacketPacingCaps,
    /// `IBV_RAW_PACKET_CAP_*`.
    pub raw_packet_caps: u32,
    /// Tag matching.
    pub tm_caps: TmCaps,
    /// CQ moderation.
    pub cq_mod_caps: CqModerationCaps,
    /// Device memory available for `ibv_alloc_dm`, bytes.
    pub max_dm_size: u64,
    /// PCIe atomics (provider data, 0 here).
    pub pci_atomic_caps: PciAtomicCaps,
    /// XRC on-demand paging.
    pub xrc_odp_caps: OdpTransportCaps,
    /// Number of ports (from sysfs, as rdma-core counts them; else `phys_port_cnt`).
    pub phys_port_cnt_ex: u32,
    /// How many bytes of the extended response the kernel filled (older kernels fill fewer;
    /// fields beyond are 0).
    pub response_length: u32,
    /// EFA's driver part of the response (`struct efa_ibv_ex_query_device_resp`), for
    /// `efadv_query_device`. `None` for rxe, and for an EFA kernel driver too old to send it.
    pub efa: Option<EfaIbvExQueryDeviceResp>,
}

// ---------------------------------------------------------------------------------------------
// Port attributes
// ---------------------------------------------------------------------------------------------

/// Port attributes (`struct ibv_port_attr`), from `ibv_query_port`.
#[doc(alias = "ibv_port_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortAttr {
    /// Logical port state.
    pub state: PortState,
    /// Largest MTU the port supports.
    pub max_mtu: Mtu,
    /// The MTU in use.
    pub active_mtu: Mtu,
    /// GID table length.
    pub gid_tbl_len: u32,
    /// `IBV_PORT_*` capability bits.
    pub port_cap_flags: u32,
    /// Largest message size.
    pub max_msg_sz: u32,
    /// Bad P_Key counter.
    pub bad_pkey_cntr: u32,
    /// Q_Key violation counter.
    pub qkey_viol_cntr: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// Base LID.
    pub lid: u16,
    /// Subnet manager LID.
    pub sm_lid: u16,
    /// LID mask control.
    pub lmc: u8,
    /// Maximum virtual lanes (encoded: 1 -> 1, 2 -> 2, 3 -> 4, 4 -> 8, 5 -> 15).
    pub max_vl_num: u8,
    /// Subnet manager SL.
    pub sm_sl: u8,
    /// Subnet propagation delay (encoded).
    pub subnet_timeout: u8,
    /// InitTypeReply.
    pub init_type_reply: u8,
    /// Link width (encoded: 1 -> 1X, 2 -> 4X, 4 -> 8X, 8 -> 12X, 16 -> 2X).
    pub active_width: u8,
    /// Link speed (encoded, see [`PortAttr::active_speed_str`]).
    pub active_speed: u8,
    /// Physical port state (1 sleep ... 5 link up).
    pub phys_state: u8,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// `IBV_QPF_*` flags.
    pub flags: u8,
    /// `IBV_PORT_*2` capability bits (0 from the legacy command).
    pub port_cap_flags2: u16,
    /// Extended link speed (newer kernels; 0 otherwise).
    pub active_speed_ex: u32,
}

impl PortAttr {
    fn from_legacy(r: &IbUverbsQueryPortResp) -> Self {
        PortAttr {
            state: PortState::from_raw(r.state),
            max_mtu: Mtu::from_raw(r.max_mtu),
            active_mtu: Mtu::from_raw(r.active_mtu),
            gid_tbl_len: r.gid_tbl_len,
            port_cap_flags: r.port_cap_flags,
            max_msg_sz: r.max_msg_sz,
            bad_pkey_cntr: r.bad_pkey_cntr,
            qkey_viol_cntr: r.qkey_viol_cntr,
            pkey_tbl_len: r.pkey_tbl_len,
            lid: r.lid,
            sm_lid: r.sm_lid,
            lmc: r.lmc,
            max_vl_num: r.max_vl_num,
            sm_sl: r.sm_sl,
            subnet_timeout: r.subnet_timeout,
            init_type_reply: r.init_type_reply,
            active_width: r.active_width,
            active_speed: r.active_speed,
            phys_state: r.phys_state,
            link_layer: LinkLayer::from_raw(r.link_layer),
            flags: r.flags,
            port_cap_flags2: 0,
            active_speed_ex: 0,
        }
    }

    fn from_ex(r: &IbUverbsQueryPortRespEx) -> Self {
        PortAttr {
            port_cap_flags2: r.port_cap_flags2,
            active_speed_ex: r.active_speed_ex,
            ..PortAttr::from_legacy(&r.legacy_resp)
        }
    }

    /// The speed in use: `active_speed_ex` when the kernel reports it, else `active_speed`
    /// (what `ibv_devinfo` shows).
    pub fn effective_active_speed(&self) -> u32 {
        if self.active_speed_ex != 0 {
            self.active_speed_ex
        } else {
            u32::from(self.active_speed)
        }
    }

    /// The speed as `ibv_devinfo` prints it (`25.0 Gbps`, ...).
    pub fn active_speed_str(&self) -> &'static str {
        speed_str(self.effective_active_speed())
    }

    /// The width as `ibv_devinfo` prints it before the `X` (`4` for 4X, ...).
    pub fn active_width_str(&self) -> &'static str {
        match self.active_width {
            1 => "1",
            2 => "4",
            4 => "8",
            8 => "12",
            16 => "2",
            _ => "invalid width",
        }
    }

    /// The number of virtual lanes as `ibv_devinfo` prints it.
    pub fn max_vl_num_str(&self) -> &'static str {
        match self.max_vl_num {
            1 => "1",
            2 => "2",
            3 => "4",
            4 => "8",
            5 => "15",
            _ => "invalid value",
        }
    }

    /// The physical state as `ibv_devinfo` prints it (`LINK_UP`, ...).
    pub fn phys_state_str(&self) -> &'static str {
        match self.phys_state {
            1 => "SLEEP",
            2 => "POLLING",
            3 => "DISABLED",
            4 => "PORT_CONFIGURATION TRAINNING",
            5 => "LINK_UP",
            6 => "LINK_ERROR_RECOVERY",
            7 => "PHY TEST",
            _ => "invalid physical state",
        }
    }
}

/// A link speed code (`active_speed`/`active_speed_ex`) as `ibv_devinfo` prints it.
pub fn speed_str(speed: u32) -> &'static str {
    match speed {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        256 => "200.0 Gbps",
        _ => "invalid speed",
    }
}

// ---------------------------------------------------------------------------------------------
// The queries
// ---------------------------------------------------------------------------------------------

/// Errnos with which a kernel says it lacks an ioctl method: use the older command instead
/// (rdma-core's `execute_ioctl_fallback` does the same).
fn lacks_method(e: &Error) -> bool {
    e.is(Errno::PROTONOSUPPORT) || e.is(Errno::OPNOTSUPP) || e.is(Errno::NOTTY)
}

impl Context {
    /// Queries the device's attributes (`ibv_query_device`).
    #[doc(alias = "ibv_query_device")]
    #[doc(alias = "IB_USER_VERBS_CMD_QUERY_DEVICE")]
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_QUERY_DEVICE,
            &IbUverbsQueryDevice::default(),
            &[],
            std::mem::size_of::<IbUverbsQueryDeviceResp>(),
            0,
        );
        self.write_cmd("query_device", &|| self.label().to_string(), &mut cmd)?;
        Ok(self.decode_device_attr(&cmd.response_as()))
    }

    /// Queries the device's extended attributes (`ibv_query_device_ex`) with the extended
    /// `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` command; on a kernel without it, the fields beyond
    /// [`DeviceAttr`] are 0.
    #[doc(alias = "ibv_query_device_ex")]
    #[doc(alias = "IB_USER_VERBS_EX_CMD_QUERY_DEVICE")]
    pub fn query_device_ex(&self) -> Result<DeviceAttrEx> {
        let driver_len = match self.provider() {
            ProviderInfo::Efa(r)
                if r.cmds_supp_udata_mask & EFA_USER_CMDS_SUPP_UDATA_QUERY_DEVICE != 0 =>
            {
                std::mem::size_of::<EfaIbvExQueryDeviceResp>()
            }
            _ => 0,
        };
        let mut cmd = WriteCmd::extended(
            IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
            &IbUverbsExQueryDevice::default(),
            &[],
            std::mem::size_of::<IbUverbsExQueryDeviceResp>(),
            driver_len,
        )
        .expect("ABI structs are multiples of 8 bytes");
        let resp: IbUverbsExQueryDeviceResp =
            match self.write_cmd("query_device_ex", &|| self.label().to_string(), &mut cmd) {
                Ok(()) => cmd.response_as(),
                // As libibverbs: a kernel without the extended command answers the legacy one.
                Err(e) if e.is(Errno::OPNOTSUPP) || e.is(Errno::NOSYS) => {
                    let base = self.query_device_raw()?;
                    IbUverbsExQueryDeviceResp {
                        base,
                        response_length: std::mem::size_of::<IbUverbsQueryDeviceResp>() as u32,
                        ..Default::default()
                    }
                }
                Err(e) => return Err(e),
            };
        let efa = (driver_len > 0).then(|| cmd.driver_response_as::<EfaIbvExQueryDeviceResp>());
        Ok(self.decode_device_attr_ex(&resp, efa))
    }

    fn query_device_raw(&self) -> Result<IbUverbsQueryDeviceResp> {
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_QUERY_DEVICE,
            &IbUverbsQueryDevice::default(),
            &[],
            std::mem::size_of::<IbUverbsQueryDeviceResp>(),
            0,
        );
        self.write_cmd("query_device", &|| self.label().to_string(), &mut cmd)?;
        Ok(cmd.response_as())
    }

    fn decode_device_attr(&self, r: &IbUverbsQueryDeviceResp) -> DeviceAttr {
        decode_device_attr(self.device().driver(), r)
    }

    fn decode_device_attr_ex(
        &self,
        r: &IbUverbsExQueryDeviceResp,
        efa: Option<EfaIbvExQueryDeviceResp>,
    ) -> DeviceAttrEx {
        let orig_attr = self.decode_device_attr(&r.base);
        let phys_port_cnt_ex = count_sysfs_ports(self.device().ibdev_path())
            .unwrap_or(u32::from(orig_attr.phys_port_cnt));
        decode_device_attr_ex(orig_attr, r, efa, phys_port_cnt_ex)
    }

    /// Queries port `port_num` (from 1) (`ibv_query_port`), with the `UVERBS_METHOD_QUERY_PORT`
    /// ioctl, or the legacy write on kernels without it.
    ///
    /// Port 0 and ports beyond the device's `phys_port_cnt` are refused with `EINVAL` and a
    /// message naming the valid range.
    #[doc(alias = "ibv_query_port")]
    #[doc(alias = "UVERBS_METHOD_QUERY_PORT")]
    pub fn query_port(&self, port_num: u8) -> Result<PortAttr> {
        let op = "query_port";
        let object = || format!("port {port_num} of {}", self.label());
        if port_num == 0 {
            return Err(self.port_range_error(op, u32::from(port_num)));
        }
        let mut resp = IbUverbsQueryPortRespEx::default();
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
        cmd.const_u64(UVERBS_ATTR_QUERY_PORT_PORT_NUM, u64::from(port_num))
            .ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp);
        let r = self.ioctl_cmd(op, &object, &mut cmd);
        match r {
            Ok(()) => Ok(PortAttr::from_ex(&resp)),
            Err(e) if lacks_method(&e) => {
                let req = IbUverbsQueryPort {
                    port_num,
                    ..Default::default()
                };
                let mut cmd = legacy_cmd(
                    IB_USER_VERBS_CMD_QUERY_PORT,
                    &req,
                    &[],
                    std::mem::size_of::<IbUverbsQueryPortResp>(),
                    0,
                );
                self.write_cmd(op, &object, &mut cmd)
                    .map_err(|e| self.explain_port_error(e, u32::from(port_num)))?;
                Ok(PortAttr::from_legacy(&cmd.response_as()))
            }
            Err(e) => Err(self.explain_port_error(e, u32::from(port_num))),
        }
    }

    /// The effective speed of a port in units of 100 Mb/s (`ibv_query_port_speed`), with the
    /// `UVERBS_METHOD_QUERY_PORT_SPEED` ioctl. Newer than Linux 6.12: older kernels answer
    /// `EPROTONOSUPPORT`.
    #[doc(alias = "ibv_query_port_speed")]
    #[doc(alias = "UVERBS_METHOD_QUERY_PORT_SPEED")]
    pub fn query_port_speed(&self, port_num: u8) -> Result<u64> {
        let op = "query_port_speed";
        if port_num == 0 {
            return Err(self.port_range_error(op, 0));
        }
        let mut speed = 0u64;
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT_SPEED);
        cmd.const_u64(UVERBS_ATTR_QUERY_PORT_SPEED_PORT_NUM, u64::from(port_num))
            .ptr_out(UVERBS_ATTR_QUERY_PORT_SPEED_RESP, &mut speed);
        let r = self.ioctl_cmd(
            op,
            &|| format!("port {port_num} of {}", self.label()),
            &mut cmd,
        );
        r.map_err(|e| {
            if e.is(Errno::PROTONOSUPPORT) {
                e.with_reason("the kernel does not have UVERBS_METHOD_QUERY_PORT_SPEED")
            } else {
                self.explain_port_error(e, u32::from(port_num))
            }
        })?;
        Ok(speed)
    }

    /// An error for a port number outside `1..=phys_port_cnt`, naming the range.
    fn port_range_error(&self, op: &'static str, port: u32) -> Error {
        let range = match self.query_device_raw() {
            Ok(r) => format!("1..={}", r.phys_port_cnt),
            Err(_) => "from 1".to_string(),
        };
        Error::invalid(
            op,
            format!("port {port} of {}", self.label()),
            Errno::INVAL,
            format!("no such port: ports of this device are numbered {range}"),
        )
    }

    /// Adds the valid port range to a kernel `EINVAL` when the port is out of range.
    fn explain_port_error(&self, e: Error, port: u32) -> Error {
        if !e.is(Errno::INVAL) {
            return e;
        }
        match self.query_device_raw() {
            Ok(r) if port == 0 || port > u32::from(r.phys_port_cnt) => e.with_reason(format!(
                "no such port: ports of this device are numbered 1..={}",
                r.phys_port_cnt
            )),
            _ => e,
        }
    }

    /// Lists every valid GID of every port (`ibv_query_gid_table`), with the
    /// `UVERBS_METHOD_QUERY_GID_TABLE` ioctl, or from sysfs on kernels without it.
    #[doc(alias = "ibv_query_gid_table")]
    #[doc(alias = "UVERBS_METHOD_QUERY_GID_TABLE")]
    pub fn query_gid_table(&self) -> Result<Vec<GidEntry>> {
        let op = "query_gid_table";
        let dev = self.query_device_raw()?;
        let mut ports = Vec::with_capacity(usize::from(dev.phys_port_cnt));
        for p in 1..=dev.phys_port_cnt {
            ports.push((p, self.query_port(p)?));
        }
        // The kernel reports each port's table length; distrust it for sizing: the response
        // buffer of one ioctl attribute holds at most 65535 bytes anyway, so a larger sum can
        // only be a bogus value (fuzzing found a hostile length that asked for gigabytes).
        const MAX_ENTRIES: usize = u16::MAX as usize / std::mem::size_of::<IbUverbsGidEntry>();
        let capacity: usize = ports
            .iter()
            .map(|(_, a)| a.gid_tbl_len as usize)
            .fold(0usize, usize::saturating_add)
            .clamp(1, MAX_ENTRIES);
        let mut entries = vec![IbUverbsGidEntry::default(); capacity];
        let mut num_entries = 0u64;
        let entry_size = std::mem::size_of::<IbUverbsGidEntry>() as u64;
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE);
        cmd.const_u64(UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, entry_size)
            .u32_in(UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0)
            .ptr_out(UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, &mut entries[..])
            .ptr_out(
                UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
                &mut num_entries,
            );
        let r = self.ioctl_cmd(op, &|| self.label().to_string(), &mut cmd);
        let nets = NetDevs::read(Path::new("/sys/class/net"));
        match r {
            Ok(()) => {
                // Distrust the count: never read past the buffer we gave.
                if num_entries > entries.len() as u64 {
                    return Err(Error::invalid(
                        op,
                        self.label().to_string(),
                        Errno::OVERFLOW,
                        format!(
                            "the kernel reported {num_entries} entries for a buffer of {}",
                            entries.len()
                        ),
                    ));
                }
                Ok(entries[..num_entries as usize]
                    .iter()
                    .map(|e| decode_gid_entry(e, &nets))
                    .collect())
            }
            Err(e) if lacks_method(&e) => {
                let mut out = Vec::new();
                for (p, attr) in &ports {
                    for i in 0..attr.gid_tbl_len {
                        let e = sysfs_gid_entry(
                            self.device().ibdev_path(),
                            u32::from(*p),
                            i,
                            attr.link_layer,
                            &nets,
                        )
                        .map_err(|why| {
                            Error::invalid(
                                op,
                                format!("gid {i} of port {p} of {}", self.label()),
                                Errno::INVAL,
                                why,
                            )
                        })?;
                        if !e.gid.is_zero() {
                            out.push(e);
                        }
                    }
                }
                Ok(out)
            }
            Err(e) => Err(e),
        }
    }

    /// Queries one GID table entry (`ibv_query_gid_ex`), with the
    /// `UVERBS_METHOD_QUERY_GID_ENTRY` ioctl, or from sysfs on kernels without it. An empty
    /// slot is an error with `ENODATA`.
    #[doc(alias = "ibv_query_gid_ex")]
    #[doc(alias = "UVERBS_METHOD_QUERY_GID_ENTRY")]
    pub fn query_gid_ex(&self, port_num: u8, gid_index: u32) -> Result<GidEntry> {
        let op = "query_gid";
        let object = || format!("gid {gid_index} of port {port_num} of {}", self.label());
        if port_num == 0 {
            return Err(self.port_range_error(op, 0));
        }
        let mut resp = IbUverbsGidEntry::default();
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY);
        cmd.const_u64(UVERBS_ATTR_QUERY_GID_ENTRY_PORT, u64::from(port_num))
            .const_u64(UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, u64::from(gid_index))
            .u32_in(UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0)
            .ptr_out(UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, &mut resp);
        let r = self.ioctl_cmd(op, &object, &mut cmd);
        let nets = NetDevs::read(Path::new("/sys/class/net"));
        match r {
            Ok(()) => Ok(decode_gid_entry(&resp, &nets)),
            Err(e) if e.is(Errno::NODATA) => Err(e.with_reason("the GID table slot is empty")),
            Err(e) if lacks_method(&e) => {
                let attr = self.query_port(port_num)?;
                if gid_index >= attr.gid_tbl_len {
                    return Err(Error::invalid(
                        op,
                        object(),
                        Errno::INVAL,
                        format!(
                            "gid index out of range 0..{} (the port's gid_tbl_len)",
                            attr.gid_tbl_len
                        ),
                    ));
                }
                let e = sysfs_gid_entry(
                    self.device().ibdev_path(),
                    u32::from(port_num),
                    gid_index,
                    attr.link_layer,
                    &nets,
                )
                .map_err(|why| Error::invalid(op, object(), Errno::INVAL, why))?;
                if e.gid.is_zero() {
                    return Err(Error::invalid(
                        op,
                        object(),
                        Errno::NODATA,
                        "the GID table slot is empty",
                    ));
                }
                Ok(e)
            }
            Err(e) => Err(self.explain_port_error(e, u32::from(port_num))),
        }
    }

    /// Queries one GID (`ibv_query_gid`). An empty table slot reads as the zero GID, as in
    /// libibverbs.
    #[doc(alias = "ibv_query_gid")]
    pub fn query_gid(&self, port_num: u8, gid_index: u32) -> Result<Gid> {
        match self.query_gid_ex(port_num, gid_index) {
            Ok(e) => Ok(e.gid),
            Err(e) if e.is(Errno::NODATA) => Ok(Gid::default()),
            Err(e) => Err(e),
        }
    }

    /// Reads one P_Key (`ibv_query_pkey`) from sysfs `ports/N/pkeys/I`, as libibverbs does.
    /// Returned in host order (the C call returns it big-endian).
    #[doc(alias = "ibv_query_pkey")]
    pub fn query_pkey(&self, port_num: u8, index: u16) -> Result<u16> {
        let op = "query_pkey";
        let object = || format!("pkey {index} of port {port_num} of {}", self.label());
        if port_num == 0 {
            return Err(self.port_range_error(op, 0));
        }
        let dir = self.device().ibdev_path();
        if dir.as_os_str().is_empty() {
            // A synthetic device (a device model behind the channel seam) has no sysfs
            // directory; joining onto an empty path would read relative to the working
            // directory.
            return Err(Error::invalid(
                op,
                object(),
                Errno::OPNOTSUPP,
                "P_Keys are read from sysfs and this device has no sysfs directory (a synthetic device)",
            ));
        }
        let path = dir.join(format!("ports/{port_num}/pkeys/{index}"));
        read_pkey(&path).map_err(|(errno, why)| {
            let e = Error::invalid(op, object(), errno, why);
            if errno == Errno::NOENT || errno == Errno::INVAL {
                self.explain_port_error(e.clone(), u32::from(port_num))
                    .with_reason(format!("{} ({})", e.reason(), path.display()))
            } else {
                e
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding (pure functions, unit-tested below)
// ---------------------------------------------------------------------------------------------

/// Formats the raw `fw_ver` of the query-device response as the provider does: rxe
/// (`rxe_query_device`) prints `major.minor.sub_minor` from bits 47..32, 31..16, 15..0; EFA
/// (`efa_query_device_ex`) prints the first four bytes of the value as it lies in memory.
pub fn format_fw_ver(driver: &Driver, raw: u64) -> String {
    match driver {
        Driver::Efa => {
            let b = raw.to_ne_bytes();
            format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
        }
        _ => format!(
            "{}.{}.{}",
            (raw >> 32) & 0xffff,
            (raw >> 16) & 0xffff,
            raw & 0xffff
        ),
    }
}

fn decode_device_attr(driver: &Driver, r: &IbUverbsQueryDeviceResp) -> DeviceAttr {
    DeviceAttr {
        fw_ver: format_fw_ver(driver, r.fw_ver),
        node_guid: r.node_guid.get(),
        sys_image_guid: r.sys_image_guid.get(),
        max_mr_size: r.max_mr_size,
        page_size_cap: r.page_size_cap,
        vendor_id: r.vendor_id,
        vendor_part_id: r.vendor_part_id,
        hw_ver: r.hw_ver,
        max_qp: r.max_qp,
        max_qp_wr: r.max_qp_wr,
        device_cap_flags: DeviceCapFlags::from_bits_retain(r.device_cap_flags),
        max_sge: r.max_sge,
        max_sge_rd: r.max_sge_rd,
        max_cq: r.max_cq,
        max_cqe: r.max_cqe,
        max_mr: r.max_mr,
        max_pd: r.max_pd,
        max_qp_rd_atom: r.max_qp_rd_atom,
        max_ee_rd_atom: r.max_ee_rd_atom,
        max_res_rd_atom: r.max_res_rd_atom,
        max_qp_init_rd_atom: r.max_qp_init_rd_atom,
        max_ee_init_rd_atom: r.max_ee_init_rd_atom,
        atomic_cap: AtomicCap::from_raw(r.atomic_cap),
        max_ee: r.max_ee,
        max_rdd: r.max_rdd,
        max_mw: r.max_mw,
        max_raw_ipv6_qp: r.max_raw_ipv6_qp,
        max_raw_ethy_qp: r.max_raw_ethy_qp,
        max_mcast_grp: r.max_mcast_grp,
        max_mcast_qp_attach: r.max_mcast_qp_attach,
        max_total_mcast_qp_attach: r.max_total_mcast_qp_attach,
        max_ah: r.max_ah,
        max_fmr: r.max_fmr,
        max_map_per_fmr: r.max_map_per_fmr,
        max_srq: r.max_srq,
        max_srq_wr: r.max_srq_wr,
        max_srq_sge: r.max_srq_sge,
        max_pkeys: r.max_pkeys,
        local_ca_ack_delay: r.local_ca_ack_delay,
        phys_port_cnt: r.phys_port_cnt,
    }
}

/// Copies the extended fields the kernel actually wrote (`response_length`), as libibverbs'
/// `CAN_COPY` does: a field the kernel did not reach stays 0 even if the buffer held garbage.
fn decode_device_attr_ex(
    orig_attr: DeviceAttr,
    r: &IbUverbsExQueryDeviceResp,
    efa: Option<EfaIbvExQueryDeviceResp>,
    phys_port_cnt_ex: u32,
) -> DeviceAttrEx {
    // Keep only the bytes the kernel says it wrote, zero the rest.
    let len = (r.response_length as usize).min(std::mem::size_of::<IbUverbsExQueryDeviceResp>());
    let mut bytes = [0u8; std::mem::size_of::<IbUverbsExQueryDeviceResp>()];
    bytes[..len].copy_from_slice(&r.as_bytes()[..len]);
    let r = IbUverbsExQueryDeviceResp::read_from_bytes(&bytes[..]).expect("exact size");
    DeviceAttrEx {
        orig_attr,
        comp_mask: 0,
        odp_caps: OdpCaps {
            general_caps: OdpGeneralCaps::from_bits_retain(r.odp_caps.general_caps),
            rc_odp_caps: OdpTransportCaps::from_bits_retain(
                r.odp_caps.per_transport_caps.rc_odp_caps,
            ),
            uc_odp_caps: OdpTransportCaps::from_bits_retain(
                r.odp_caps.per_transport_caps.uc_odp_caps,
            ),
            ud_odp_caps: OdpTransportCaps::from_bits_retain(
                r.odp_caps.per_transport_caps.ud_odp_caps,
            ),
        },
        completion_timestamp_mask: r.timestamp_mask,
        hca_core_clock: r.hca_core_clock,
        device_cap_flags_ex: r.device_cap_flags_ex,
        tso_caps: TsoCaps::default(),
        rss_caps: RssCaps {
            supported_qpts: r.rss_caps.supported_qpts,
            max_rwq_indirection_tables: r.rss_caps.max_rwq_indirection_tables,
            max_rwq_indirection_table_size: r.rss_caps.max_rwq_indirection_table_size,
            rx_hash_fields_mask: 0,
            rx_hash_function: 0,
        },
        max_wq_type_rq: r.max_wq_type_rq,
        packet_pacing_caps: PacketPacingCaps::default(),
        raw_packet_caps: r.raw_packet_caps,
        tm_caps: TmCaps {
            max_rndv_hdr_size: r.tm_caps.max_rndv_hdr_size,
            max_num_tags: r.tm_caps.max_num_tags,
            flags: r.tm_caps.flags,
            max_ops: r.tm_caps.max_ops,
            max_sge: r.tm_caps.max_sge,
        },
        cq_mod_caps: CqModerationCaps {
            max_cq_count: r.cq_moderation_caps.max_cq_moderation_count,
            max_cq_period: r.cq_moderation_caps.max_cq_moderation_period,
        },
        max_dm_size: r.max_dm_size,
        pci_atomic_caps: PciAtomicCaps::default(),
        xrc_odp_caps: OdpTransportCaps::from_bits_retain(r.xrc_odp_caps),
        phys_port_cnt_ex,
        response_length: len as u32,
        efa,
    }
}

fn decode_gid_entry(e: &IbUverbsGidEntry, nets: &NetDevs) -> GidEntry {
    let mut raw = [0u8; 16];
    raw.copy_from_slice(e.gid.as_bytes());
    GidEntry {
        gid: Gid { raw },
        gid_index: e.gid_index,
        port_num: e.port_num,
        gid_type: GidType::from_raw(e.gid_type),
        ndev_ifindex: e.netdev_ifindex,
        netdev: nets.name_of(e.netdev_ifindex),
    }
}

/// Number of ports under sysfs `<ibdev>/ports`, as libibverbs counts them.
fn count_sysfs_ports(ibdev_path: &Path) -> Option<u32> {
    let n = fs::read_dir(ibdev_path.join("ports"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|s| s.parse::<u32>().is_ok())
        })
        .count();
    (n > 0).then_some(n as u32)
}

/// The netdevs of this network namespace: ifindex -> name, from `/sys/class/net/*/ifindex`.
#[derive(Debug, Default)]
struct NetDevs(Vec<(u32, String)>);

impl NetDevs {
    fn read(class_net: &Path) -> NetDevs {
        let mut v = Vec::new();
        if let Ok(dir) = fs::read_dir(class_net) {
            for e in dir.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(idx) = fs::read_to_string(e.path().join("ifindex"))
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                {
                    v.push((idx, name));
                }
            }
        }
        NetDevs(v)
    }

    fn name_of(&self, ifindex: u32) -> Option<String> {
        if ifindex == 0 {
            return None;
        }
        self.0
            .iter()
            .find(|(i, _)| *i == ifindex)
            .map(|(_, n)| n.clone())
    }

    fn index_of(&self, name: &str) -> Option<u32> {
        self.0.iter().find(|(_, n)| n == name).map(|(i, _)| *i)
    }
}

/// Parses sysfs `ports/N/gids/I`: eight colon-separated groups of four hex digits.
fn parse_sysfs_gid(s: &str) -> Option<Gid> {
    let groups: Vec<&str> = s.trim().split(':').collect();
    if groups.len() != 8 {
        return None;
    }
    let mut raw = [0u8; 16];
    for (i, g) in groups.iter().enumerate() {
        if g.is_empty() || g.len() > 4 {
            return None;
        }
        let v = u16::from_str_radix(g, 16).ok()?;
        raw[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
    }
    Some(Gid { raw })
}

/// Reads one GID entry from sysfs as libibverbs' `query_sysfs_gid_entry` does: the GID from
/// `gids/I`, the type from `gid_attrs/types/I` (`IB/RoCE v1` or `RoCE v2`; absent on IB ports:
/// IB or RoCE v1 by the link layer), the netdev from `gid_attrs/ndevs/I`.
fn sysfs_gid_entry(
    ibdev_path: &Path,
    port: u32,
    index: u32,
    link_layer: LinkLayer,
    nets: &NetDevs,
) -> std::result::Result<GidEntry, String> {
    let port_dir = ibdev_path.join(format!("ports/{port}"));
    let gid_path = port_dir.join(format!("gids/{index}"));
    let text = fs::read_to_string(&gid_path)
        .map_err(|e| format!("cannot read {}: {e}", gid_path.display()))?;
    let gid = parse_sysfs_gid(&text)
        .ok_or_else(|| format!("{} holds no GID: {:?}", gid_path.display(), text.trim()))?;
    let v1 = match link_layer {
        LinkLayer::Ethernet => GidType::RoceV1,
        _ => GidType::Ib,
    };
    let type_path = port_dir.join(format!("gid_attrs/types/{index}"));
    // The kernel fails the read (EINVAL) for empty slots and on IB ports.
    let gid_type = match fs::read_to_string(&type_path) {
        Ok(t) => match t.trim() {
            "IB/RoCE v1" => v1,
            "RoCE v2" => GidType::RoceV2,
            other => {
                return Err(format!(
                    "{} holds an unknown GID type {other:?}",
                    type_path.display()
                ))
            }
        },
        Err(_) => v1,
    };
    let ndev_path = port_dir.join(format!("gid_attrs/ndevs/{index}"));
    let netdev = fs::read_to_string(&ndev_path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let ndev_ifindex = netdev
        .as_deref()
        .and_then(|n| nets.index_of(n))
        .unwrap_or(0);
    Ok(GidEntry {
        gid,
        gid_index: index,
        port_num: port,
        gid_type,
        ndev_ifindex,
        netdev,
    })
}

/// Reads a sysfs P_Key file (`0xffff`).
fn read_pkey(path: &Path) -> std::result::Result<u16, (Errno, String)> {
    let text = fs::read_to_string(path).map_err(|e| {
        let errno = e
            .raw_os_error()
            .map(Errno::from_raw_os_error)
            .unwrap_or(Errno::IO);
        (errno, format!("cannot read {}", path.display()))
    })?;
    let t = text.trim();
    let hex = t.strip_prefix("0x").unwrap_or(t);
    u16::from_str_radix(hex, 16).map_err(|_| {
        (
            Errno::INVAL,
            format!("{} holds no P_Key: {t:?}", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::byteorder::big_endian;

    fn gid(s: &str) -> Gid {
        let ip: std::net::Ipv6Addr = s.parse().unwrap();
        Gid { raw: ip.octets() }
    }

    #[test]
    fn gid_text_matches_inet_ntop() {
        // Expected strings are what glibc's inet_ntop writes.
        assert_eq!(
            gid("fe80::5054:ff:fe12:3456").to_ipv6_string(),
            "fe80::5054:ff:fe12:3456"
        );
        assert_eq!(gid("::ffff:10.0.2.15").to_ipv6_string(), "::ffff:10.0.2.15");
        // IPv4-compatible: glibc prints dotted decimal (Rust's Ipv6Addr does not).
        assert_eq!(gid("::10.0.2.15").to_ipv6_string(), "::10.0.2.15");
        assert_eq!(gid("::1").to_ipv6_string(), "::1");
        assert_eq!(gid("::ffff:0:1.2.3.4").to_ipv6_string(), "::ffff:0:102:304");
        assert_eq!(gid("0:0:0:0:0:1:0:0").to_ipv6_string(), "::1:0:0");
        assert_eq!(gid("::").to_ipv6_string(), "::");
        // A single zero group is not compressed; the first of two equal runs is.
        assert_eq!(gid("1:0:2:3:4:5:6:7").to_ipv6_string(), "1:0:2:3:4:5:6:7");
        assert_eq!(gid("1:0:0:2:0:0:3:4").to_ipv6_string(), "1::2:0:0:3:4");
        assert_eq!(gid("1:0:0:2:0:0:0:4").to_ipv6_string(), "1:0:0:2::4");
        assert_eq!(gid("1:2:3:4:5:6:7:0").to_ipv6_string(), "1:2:3:4:5:6:7:0");
        assert_eq!(gid("1:2:3:4:5:6:0:0").to_ipv6_string(), "1:2:3:4:5:6::");
        assert_eq!(
            gid("fe80::5054:ff:fe12:3456").to_hex_string(),
            "fe80:0000:0000:0000:5054:00ff:fe12:3456"
        );
        let g = gid("fe80::5054:ff:fe12:3456");
        assert_eq!(g.subnet_prefix(), 0xfe80_0000_0000_0000);
        assert_eq!(g.interface_id(), 0x5054_00ff_fe12_3456);
        assert!(gid("fe80::").interface_id_is_zero());
        assert!(!g.interface_id_is_zero());
    }

    #[test]
    fn fw_ver_is_formatted_per_provider() {
        assert_eq!(format_fw_ver(&Driver::Rxe, 0), "0.0.0");
        assert_eq!(format_fw_ver(&Driver::Rxe, 0x0001_0002_0003_0004), "2.3.4");
        let efa = u64::from_ne_bytes([1, 2, 3, 4, 9, 9, 9, 9]);
        assert_eq!(format_fw_ver(&Driver::Efa, efa), "1.2.3.4");
    }

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

    fn legacy_port_resp() -> IbUverbsQueryPortResp {
        IbUverbsQueryPortResp {
            port_cap_flags: 0x0001_0000,
            max_msg_sz: 0x800000,
            gid_tbl_len: 1024,
            pkey_tbl_len: 1,
            state: 4,
            max_mtu: 5,
            active_mtu: 3,
            max_vl_num: 1,
            active_width: 2,
            active_speed: 32,
            phys_state: 5,
            link_layer: 2,
            ..Default::default()
        }
    }

    #[test]
    fn port_attr_decodes_ex_and_legacy_responses() {
        let ex = IbUverbsQueryPortRespEx {
            legacy_resp: legacy_port_resp(),
            port_cap_flags2: 0x30,
            active_speed_ex: 0,
            ..Default::default()
        };
        let a = PortAttr::from_ex(&ex);
        assert_eq!(a.state, PortState::Active);
        assert_eq!(a.max_mtu, Mtu::Mtu4096);
        assert_eq!(a.active_mtu, Mtu::Mtu1024);
        assert_eq!(a.link_layer, LinkLayer::Ethernet);
        assert_eq!(a.gid_tbl_len, 1024);
        assert_eq!(a.port_cap_flags2, 0x30);
        assert_eq!(a.active_speed_str(), "25.0 Gbps");
        assert_eq!(a.active_width_str(), "4");
        assert_eq!(a.phys_state_str(), "LINK_UP");
        assert_eq!(a.max_vl_num_str(), "1");
        let b = PortAttr::from_ex(&IbUverbsQueryPortRespEx {
            active_speed_ex: 256,
            ..ex
        });
        assert_eq!(b.active_speed_str(), "200.0 Gbps", "speed_ex wins when set");
        let l = PortAttr::from_legacy(&legacy_port_resp());
        assert_eq!(l.port_cap_flags2, 0);
        assert_eq!(l.state, a.state);
    }

    #[test]
    fn device_attr_decodes_guids_and_ex_fields_up_to_response_length() {
        let base = IbUverbsQueryDeviceResp {
            fw_ver: 0,
            node_guid: big_endian::U64::new(0x5054_00ff_fe12_3456),
            sys_image_guid: big_endian::U64::new(0x5054_00ff_fe12_3456),
            max_cqe: 32767,
            device_cap_flags: 0x0122_3c76,
            atomic_cap: 1,
            phys_port_cnt: 1,
            max_pkeys: 64,
            ..Default::default()
        };
        let a = decode_device_attr(&Driver::Rxe, &base);
        assert_eq!(a.node_guid, 0x5054_00ff_fe12_3456);
        assert_eq!(a.fw_ver, "0.0.0");
        assert_eq!(a.max_cqe, 32767);
        assert_eq!(a.atomic_cap, AtomicCap::Hca);
        assert!(a.device_cap_flags.contains(DeviceCapFlags::MEM_WINDOW));
        assert!(!a.device_cap_flags.contains(DeviceCapFlags::XRC));

        let mut r = IbUverbsExQueryDeviceResp {
            base,
            odp_caps: uverbs_uapi::write::IbUverbsOdpCaps {
                general_caps: 1,
                ..Default::default()
            },
            timestamp_mask: 0xffff,
            max_dm_size: 4096,
            xrc_odp_caps: 3,
            ..Default::default()
        };
        // The kernel claims to have written only up to odp_caps: later fields are ignored.
        r.response_length = (176 + 8 + 24) as u32;
        let x = decode_device_attr_ex(a.clone(), &r, None, 1);
        assert_eq!(x.odp_caps.general_caps, OdpGeneralCaps::SUPPORT);
        assert_eq!(x.completion_timestamp_mask, 0);
        assert_eq!(x.max_dm_size, 0);
        assert_eq!(x.xrc_odp_caps, OdpTransportCaps::empty());
        r.response_length = std::mem::size_of::<IbUverbsExQueryDeviceResp>() as u32;
        let x = decode_device_attr_ex(a.clone(), &r, None, 1);
        assert_eq!(x.completion_timestamp_mask, 0xffff);
        assert_eq!(x.max_dm_size, 4096);
        assert_eq!(
            x.xrc_odp_caps,
            OdpTransportCaps::SEND | OdpTransportCaps::RECV
        );
        // A length beyond the struct is clamped, never read past.
        r.response_length = 100_000;
        assert_eq!(decode_device_attr_ex(a, &r, None, 1).response_length, 304);
    }

    #[test]
    fn gid_entries_decode_with_netdev_names() {
        let t = tempfile::tempdir().unwrap();
        let net = t.path().join("net");
        fs::create_dir_all(net.join("eth0")).unwrap();
        fs::write(net.join("eth0/ifindex"), "2\n").unwrap();
        let nets = NetDevs::read(&net);
        let ip: std::net::Ipv6Addr = "::ffff:10.0.2.15".parse().unwrap();
        let o = ip.octets();
        let e = IbUverbsGidEntry {
            gid: [
                u64::from_ne_bytes(o[..8].try_into().unwrap()),
                u64::from_ne_bytes(o[8..].try_into().unwrap()),
            ],
            gid_index: 3,
            port_num: 1,
            gid_type: IB_UVERBS_GID_TYPE_ROCE_V2,
            netdev_ifindex: 2,
        };
        let g = decode_gid_entry(&e, &nets);
        assert_eq!(g.gid.to_ipv6_string(), "::ffff:10.0.2.15");
        assert_eq!(g.gid_type, GidType::RoceV2);
        assert_eq!(g.netdev.as_deref(), Some("eth0"));
        let none = decode_gid_entry(
            &IbUverbsGidEntry {
                netdev_ifindex: 0,
                ..e
            },
            &nets,
        );
        assert_eq!(none.netdev, None);
        let gone = decode_gid_entry(
            &IbUverbsGidEntry {
                netdev_ifindex: 77,
                ..e
            },
            &nets,
        );
        assert_eq!(gone.netdev, None);
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

    #[test]
    fn sysfs_gid_parser_rejects_garbage() {
        assert!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:3456").is_some());
        assert!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12").is_none());
        assert!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:zzzz").is_none());
        assert!(parse_sysfs_gid("fe80:00000:0000:0000:5054:00ff:fe12:3456").is_none());
    }
}
