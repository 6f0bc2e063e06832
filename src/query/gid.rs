//! GIDs: `ibv_query_gid_table`, `ibv_query_gid_ex` and `ibv_query_gid` (the
//! `UVERBS_METHOD_QUERY_GID_TABLE` / `UVERBS_METHOD_QUERY_GID_ENTRY` ioctls, falling back to
//! sysfs `ports/N/gids/I`, `gid_attrs/types/I`, `gid_attrs/ndevs/I` on older kernels), the GID
//! and GID-entry types, and the decoding of both sources.

use std::fmt;
use std::fs;
use std::path::Path;

use uverbs_uapi::cmds::{
    UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX,
    UVERBS_ATTR_QUERY_GID_ENTRY_PORT, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
    UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS,
    UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
    UVERBS_METHOD_QUERY_GID_ENTRY, UVERBS_METHOD_QUERY_GID_TABLE, UVERBS_OBJECT_DEVICE,
};
use uverbs_uapi::verbs::{
    IbUverbsGidEntry, IB_UVERBS_GID_TYPE_IB, IB_UVERBS_GID_TYPE_ROCE_V1, IB_UVERBS_GID_TYPE_ROCE_V2,
};
use zerocopy::IntoBytes;

use super::lacks_method;
use super::port::LinkLayer;
use crate::channel::IoctlCmd;
use crate::context::Context;
use crate::error::{Errno, Error, Result};

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

impl Context {
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
}

pub(super) fn decode_gid_entry(e: &IbUverbsGidEntry, nets: &NetDevs) -> GidEntry {
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

/// The netdevs of this network namespace: ifindex -> name, from `/sys/class/net/*/ifindex`.
#[derive(Debug, Default)]
pub(super) struct NetDevs(Vec<(u32, String)>);

impl NetDevs {
    pub(super) fn read(class_net: &Path) -> NetDevs {
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

    pub(super) fn name_of(&self, ifindex: u32) -> Option<String> {
        if ifindex == 0 {
            return None;
        }
        self.0
            .iter()
            .find(|(i, _)| *i == ifindex)
            .map(|(_, n)| n.clone())
    }

    pub(super) fn index_of(&self, name: &str) -> Option<u32> {
        self.0.iter().find(|(_, n)| n == name).map(|(i, _)| *i)
    }
}

/// Parses sysfs `ports/N/gids/I`: eight colon-separated groups of four hex digits.
pub(super) fn parse_sysfs_gid(s: &str) -> Option<Gid> {
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
pub(super) fn sysfs_gid_entry(
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn sysfs_gid_parser_rejects_garbage() {
        assert!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:3456").is_some());
        assert!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12").is_none());
        assert!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:zzzz").is_none());
        assert!(parse_sysfs_gid("fe80:00000:0000:0000:5054:00ff:fe12:3456").is_none());
    }
}
