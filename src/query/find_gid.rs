//! Choosing the GID a program uses towards a peer ([`Context::find_gid`]): on a RoCE port the
//! RoCE v2 GID of the peer's address family whose address is ready, on a port without RoCE
//! (EFA, InfiniBand) the GID at index 0.
//!
//! libibverbs has no such call: rdma-core's tools take a GID index on the command line, and
//! librdmacm derives the GID from the address it resolved. A verbs program that exchanges GIDs
//! itself must pick one, and the first RoCE v2 GID of a port is usually the IPv6 link-local one,
//! which is a poor default: right after the link comes up its address is *tentative* (IPv6
//! duplicate address detection, RFC 4862, takes a second or more) and the kernel cannot resolve
//! a route from it, so `create_ah` and the RTR transition fail with `ETIMEDOUT`.
//!
//! # Whether an address is ready
//!
//! The GID table does not say; the netdev's addresses do. IPv6 addresses and their flags are
//! read from `/proc/net/if_inet6` (one line per address: address, ifindex, prefix length,
//! scope, flags, netdev name, all hex but the name; the format is unchanged since Linux 2.6).
//! An address with `IFA_F_TENTATIVE` (0x40; optimistic addresses carry it too) or
//! `IFA_F_DADFAILED` (0x08) is not ready; one listed without them is. The file is plain text
//! in the caller's network namespace, read with `std::fs` (no C, no netlink socket): rtnetlink's
//! `RTM_GETADDR` dump would carry the same flags at the cost of a netlink client, for nothing
//! more. What cannot be known counts as ready, so that the helper never refuses a GID that may
//! well work: no `/proc` (or no IPv6 in the kernel), a GID whose address the netdev does not
//! list (the table can lag an address change), a GID without a netdev. IPv4 addresses have no
//! duplicate address detection in Linux and are ready once configured.

use std::fs;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};

use super::gid::{GidEntry, GidType};
use super::port::LinkLayer;
use crate::context::Context;
use crate::error::{Errno, Error, Result};

/// Where the kernel lists this network namespace's IPv6 addresses with their flags.
const IF_INET6: &str = "/proc/net/if_inet6";
/// `IFA_F_DADFAILED` (`include/uapi/linux/if_addr.h`): duplicate address detection found the
/// address in use elsewhere.
const IFA_F_DADFAILED: u32 = 0x08;
/// `IFA_F_TENTATIVE`: duplicate address detection has not finished.
const IFA_F_TENTATIVE: u32 = 0x40;
/// The RoCE v2 UDP port: a connect() towards it only asks the routing table for a source
/// address (a UDP connect sends nothing).
const ROCE_V2_PORT: u16 = 4791;

/// Which GID [`Context::find_gid`] looks for on a RoCE port. On a port without RoCE (EFA,
/// InfiniBand) every query finds the GID at index 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GidQuery {
    /// The GID to use towards a peer at this IP address: for an IPv4 peer (or an IPv4-mapped
    /// IPv6 one) an IPv4-mapped RoCE v2 GID (`::ffff:a.b.c.d`); for an IPv6 peer a RoCE v2
    /// GID of an IPv6 address, link-local only if the peer's address is link-local. Among
    /// several, the one with the source address the kernel's routing chooses towards the peer.
    Peer(IpAddr),
    /// An IPv4-mapped RoCE v2 GID.
    Ipv4,
    /// A RoCE v2 GID of an IPv6 address that is not link-local.
    Ipv6,
    /// Any usable RoCE v2 GID: IPv4-mapped first, then IPv6 not link-local, then IPv6
    /// link-local. What to advertise when the peer's address is not known.
    Any,
}

impl From<IpAddr> for GidQuery {
    fn from(peer: IpAddr) -> Self {
        GidQuery::Peer(peer)
    }
}

/// The kinds of address a RoCE v2 GID holds, in the order [`GidQuery::Any`] prefers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Ipv4,
    Ipv6,
    Ipv6LinkLocal,
}

impl Family {
    fn of(addr: Ipv6Addr) -> Family {
        if addr.to_ipv4_mapped().is_some() {
            Family::Ipv4
        } else if addr.is_unicast_link_local() {
            Family::Ipv6LinkLocal
        } else {
            Family::Ipv6
        }
    }

    fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6 (not link-local)",
            Family::Ipv6LinkLocal => "IPv6 link-local",
        }
    }

    /// What to check on the netdev when a port has no GID of this family.
    fn hint(self, netdev: &str) -> String {
        match self {
            Family::Ipv4 => format!("is an IPv4 address configured on {netdev}?"),
            Family::Ipv6 => format!("is a global IPv6 address configured on {netdev}?"),
            Family::Ipv6LinkLocal => format!("is IPv6 enabled on {netdev}?"),
        }
    }
}

impl GidQuery {
    /// The families that answer this query, best first.
    fn families(&self) -> &'static [Family] {
        match self {
            GidQuery::Ipv4 => &[Family::Ipv4],
            GidQuery::Ipv6 => &[Family::Ipv6],
            GidQuery::Any => &[Family::Ipv4, Family::Ipv6, Family::Ipv6LinkLocal],
            GidQuery::Peer(ip) => match ip.to_canonical() {
                IpAddr::V4(_) => &[Family::Ipv4],
                IpAddr::V6(v6) if v6.is_unicast_link_local() => &[Family::Ipv6LinkLocal],
                IpAddr::V6(_) => &[Family::Ipv6],
            },
        }
    }
}

/// Whether a GID's address can be used as a source now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AddrState {
    /// Configured and usable.
    Ready,
    /// Nothing says otherwise (see the module docs: counts as usable, after `Ready` ones).
    Unknown,
    /// Duplicate address detection still runs.
    Tentative,
    /// Duplicate address detection found another host with the address.
    DadFailed,
}

impl AddrState {
    fn usable(self) -> bool {
        matches!(self, AddrState::Ready | AddrState::Unknown)
    }
}

/// One line of `/proc/net/if_inet6`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Inet6Addr {
    addr: Ipv6Addr,
    ifindex: u32,
    flags: u32,
    netdev: String,
}

/// Parses `/proc/net/if_inet6` (`if6_seq_show` in `net/ipv6/addrconf.c`:
/// `"%pi6 %02x %02x %02x %02x %8s\n"` of address, ifindex, prefix length, scope, flags, name).
/// Lines that do not parse are skipped: they say nothing about readiness.
fn parse_if_inet6(text: &str) -> Vec<Inet6Addr> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [addr, ifindex, _prefix, _scope, flags, netdev] = f[..] else {
                return None;
            };
            if addr.len() != 32 {
                return None;
            }
            let addr = u128::from_str_radix(addr, 16).ok()?;
            Some(Inet6Addr {
                addr: Ipv6Addr::from(addr),
                ifindex: u32::from_str_radix(ifindex, 16).ok()?,
                flags: u32::from_str_radix(flags, 16).ok()?,
                netdev: netdev.to_string(),
            })
        })
        .collect()
}

/// The state of a GID's address, given this namespace's IPv6 addresses (`None`: not known).
fn addr_state(e: &GidEntry, addrs: Option<&[Inet6Addr]>) -> AddrState {
    let addr = Ipv6Addr::from(e.gid.raw);
    if Family::of(addr) == Family::Ipv4 {
        return AddrState::Ready;
    }
    let Some(addrs) = addrs else {
        return AddrState::Unknown;
    };
    let same_netdev = |a: &Inet6Addr| match (e.ndev_ifindex, e.netdev.as_deref()) {
        (0, Some(name)) => a.netdev == name,
        (0, None) => true,
        (i, _) => a.ifindex == i,
    };
    let mut rows = addrs.iter().filter(|a| a.addr == addr && same_netdev(a));
    let Some(first) = rows.next() else {
        return AddrState::Unknown;
    };
    let flags = rows.fold(first.flags, |f, a| f | a.flags);
    if flags & IFA_F_DADFAILED != 0 {
        AddrState::DadFailed
    } else if flags & IFA_F_TENTATIVE != 0 {
        AddrState::Tentative
    } else {
        AddrState::Ready
    }
}

/// Why no GID answers a query on a RoCE port.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NoGid {
    /// No RoCE v2 GID of the wanted families on the port.
    None,
    /// There are some, but the best of them is not ready.
    NotReady(GidEntry, AddrState),
}

/// The pure choice: among `table`'s RoCE v2 GIDs of `port`, the first family of `query` that
/// has a usable GID; within it the GID whose address is `source` (the kernel's source address
/// towards the peer), else a ready one before one of unknown state, else the lowest index.
fn pick(
    table: &[GidEntry],
    port: u32,
    query: &GidQuery,
    state: &dyn Fn(&GidEntry) -> AddrState,
    source: Option<IpAddr>,
) -> std::result::Result<GidEntry, NoGid> {
    let mut not_ready = None;
    for &family in query.families() {
        let mut candidates: Vec<(&GidEntry, AddrState)> = table
            .iter()
            .filter(|e| e.port_num == port && e.gid_type == GidType::RoceV2 && !e.gid.is_zero())
            .filter(|e| Family::of(Ipv6Addr::from(e.gid.raw)) == family)
            .map(|e| (e, state(e)))
            .collect();
        candidates.sort_by_key(|(e, _)| e.gid_index);
        let is_source =
            |e: &GidEntry| source == Some(IpAddr::V6(Ipv6Addr::from(e.gid.raw)).to_canonical());
        let best = candidates
            .iter()
            .filter(|(_, s)| s.usable())
            .min_by_key(|(e, s)| (!is_source(e), *s != AddrState::Ready, e.gid_index));
        if let Some((e, _)) = best {
            return Ok((*e).clone());
        }
        if not_ready.is_none() {
            not_ready = candidates.first().map(|(e, s)| ((*e).clone(), *s));
        }
    }
    Err(match not_ready {
        Some((e, s)) => NoGid::NotReady(e, s),
        None => NoGid::None,
    })
}

/// The source address the kernel's routing table chooses towards `peer`, asked the way a UDP
/// client learns it: `connect()` an unbound datagram socket (nothing is sent) and read its
/// local address. `None` when there is no route (or the peer is a link-local IPv6 address,
/// which needs a scope this query does not have).
fn route_source(peer: IpAddr) -> Option<IpAddr> {
    let peer = peer.to_canonical();
    let any: SocketAddr = match peer {
        IpAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(any).ok()?;
    sock.connect((peer, ROCE_V2_PORT)).ok()?;
    Some(sock.local_addr().ok()?.ip().to_canonical())
}

impl Context {
    /// Finds the GID a program uses on `port_num` towards a peer: the one to advertise to it,
    /// and whose index goes into an address handle's or a connected QP's `sgid_index`.
    ///
    /// - On a RoCE port (link layer Ethernet: rxe) it is a RoCE v2 GID of the address family
    ///   [`GidQuery`] asks for, whose address is **ready**: IPv4 addresses always are; an
    ///   IPv6 address is not while duplicate address detection runs (for a second or more
    ///   after the link comes up, when `create_ah` from or towards it fails with `ETIMEDOUT`)
    ///   or after it failed. Readiness is read from `/proc/net/if_inet6`; where it cannot be
    ///   known the GID counts as ready. RoCE v1 GIDs are never chosen.
    /// - On any other port (EFA, whose link layer is unspecified, and InfiniBand) it is the
    ///   GID at index 0, whatever the query: EFA has that one GID, and an InfiniBand port's
    ///   index 0 is its port GID.
    ///
    /// Errors: `ENOENT` when the port has no RoCE v2 GID of the family, with the GIDs it has
    /// and what to check (an address on the netdev); `EAGAIN` when it has one but its address
    /// is tentative (retry in a moment); `EADDRNOTAVAIL` when duplicate address detection
    /// failed; and the errors of [`Context::query_port`] and [`Context::query_gid_table`].
    ///
    /// ```
    /// # let fabric = uverbs_efa_model::EfaFabric::new(1);
    /// # let ctx = fabric.add_device(Default::default()).open()?;
    /// use std::net::Ipv4Addr;
    /// use uverbs::{AhAttr, GidQuery};
    ///
    /// // let ctx = uverbs::Context::open(&device)?;  (here: the EFA device model, so index 0)
    /// let peer_ip = Ipv4Addr::new(10, 99, 0, 2);            // the peer's address, from config
    /// let local = ctx.find_gid(1, &GidQuery::Peer(peer_ip.into()))?;
    /// // Send `local.gid` (and the QP number) to the peer; with the GID it sends back:
    /// # let peer_gid = local.gid;
    /// let pd = ctx.alloc_pd()?;
    /// let ah = pd.create_ah(&AhAttr::roce(peer_gid, local.gid_index as u8, 1))?;
    /// # drop(ah);
    /// # Ok::<(), uverbs::Error>(())
    /// ```
    #[doc(alias = "ibv_find_gid_index")]
    #[doc(alias = "rdma_find_gid")]
    #[doc(alias = "sgid_index")]
    pub fn find_gid(&self, port_num: u8, query: &GidQuery) -> Result<GidEntry> {
        let op = "find_gid";
        let port = self.query_port(port_num)?;
        if port.link_layer != LinkLayer::Ethernet {
            return self.query_gid_ex(port_num, 0);
        }
        let table = self.query_gid_table()?;
        let addrs = fs::read_to_string(IF_INET6)
            .ok()
            .map(|t| parse_if_inet6(&t));
        let source = match query {
            GidQuery::Peer(peer) => route_source(*peer),
            _ => None,
        };
        let state = |e: &GidEntry| addr_state(e, addrs.as_deref());
        pick(&table, u32::from(port_num), query, &state, source).map_err(|why| {
            let (errno, reason) = explain(
                &table,
                u32::from(port_num),
                query,
                why,
                self.device().name(),
            );
            Error::invalid(
                op,
                format!("port {port_num} of {}", self.label()),
                errno,
                reason,
            )
        })
    }
}

/// The errno and the reason of a failed [`Context::find_gid`]: what was wanted, what the port
/// has, and what to check.
fn explain(
    table: &[GidEntry],
    port: u32,
    query: &GidQuery,
    why: NoGid,
    device: &str,
) -> (Errno, String) {
    let on_port: Vec<&GidEntry> = table.iter().filter(|e| e.port_num == port).collect();
    let netdev = on_port
        .iter()
        .find_map(|e| e.netdev.clone())
        .unwrap_or_else(|| format!("the netdev of {device}"));
    match why {
        NoGid::NotReady(e, state) => {
            let what = format!(
                "the RoCE v2 {} GID {} (index {}) is not usable",
                Family::of(Ipv6Addr::from(e.gid.raw)).name(),
                e.gid,
                e.gid_index
            );
            let on = e.netdev.as_deref().unwrap_or(&netdev);
            match state {
                AddrState::DadFailed => (
                    Errno::ADDRNOTAVAIL,
                    format!(
                        "{what}: duplicate address detection failed for its address on {on} \
                         (another host has it)"
                    ),
                ),
                _ => (
                    Errno::AGAIN,
                    format!(
                        "{what} yet: its address on {on} is tentative (IPv6 duplicate address \
                         detection runs for a second or more after the link comes up); retry \
                         shortly"
                    ),
                ),
            }
        }
        NoGid::None => {
            let families = query.families();
            let wanted = match families {
                [one] => format!("no RoCE v2 {} GID", one.name()),
                _ => "no RoCE v2 GID".to_string(),
            };
            let hint = match families {
                [one] => one.hint(&netdev),
                _ => format!("is an IP address configured on {netdev}, and its link up?"),
            };
            let found = if on_port.is_empty() {
                "the port's GID table is empty".to_string()
            } else {
                let list: Vec<String> = on_port
                    .iter()
                    .map(|e| format!("[{}] {} {}", e.gid_index, e.gid, gid_type_name(e.gid_type)))
                    .collect();
                format!("the port has {}", list.join(", "))
            };
            (Errno::NOENT, format!("{wanted} ({found}): {hint}"))
        }
    }
}

fn gid_type_name(t: GidType) -> &'static str {
    match t {
        GidType::Ib => "IB",
        GidType::RoceV1 => "RoCE v1",
        GidType::RoceV2 => "RoCE v2",
        GidType::Unknown(_) => "of unknown type",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Gid;

    fn entry(ip: &str, index: u32, t: GidType, ifindex: u32, netdev: &str) -> GidEntry {
        let addr: IpAddr = ip.parse().unwrap();
        let raw = match addr {
            IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            IpAddr::V6(v6) => v6.octets(),
        };
        GidEntry {
            gid: Gid::from(raw),
            gid_index: index,
            port_num: 1,
            gid_type: t,
            ndev_ifindex: ifindex,
            netdev: Some(netdev.to_string()),
        }
    }

    /// rxe0 on veth0 (ifindex 3) as the 6.12 VM shows it right after boot: the link-local
    /// GID first, the IPv4 one second.
    fn rxe_table() -> Vec<GidEntry> {
        vec![
            entry("fe80::181a:4eff:fe0c:57b6", 0, GidType::RoceV2, 3, "veth0"),
            entry("10.99.0.1", 1, GidType::RoceV2, 3, "veth0"),
        ]
    }

    /// `/proc/net/if_inet6` of that VM, just after boot (veth0's link-local tentative: c0)
    /// and four seconds later (80).
    const IF_INET6_FRESH: &str = "\
fe80000000000000dc3657fffecda85c 02 40 20 c0    veth1
00000000000000000000000000000001 01 80 10 80       lo
fe80000000000000181a4efffe0c57b6 03 40 20 c0    veth0
";
    const IF_INET6_SETTLED: &str = "\
fe80000000000000dc3657fffecda85c 02 40 20 80    veth1
00000000000000000000000000000001 01 80 10 80       lo
fe80000000000000181a4efffe0c57b6 03 40 20 80    veth0
";

    fn pick_with(
        table: &[GidEntry],
        query: GidQuery,
        if_inet6: Option<&str>,
        source: Option<&str>,
    ) -> std::result::Result<GidEntry, NoGid> {
        let addrs = if_inet6.map(parse_if_inet6);
        let state = |e: &GidEntry| addr_state(e, addrs.as_deref());
        pick(table, 1, &query, &state, source.map(|s| s.parse().unwrap()))
    }

    #[test]
    fn if_inet6_lines_parse_and_garbage_is_skipped() {
        let a = parse_if_inet6(IF_INET6_FRESH);
        assert_eq!(a.len(), 3);
        assert_eq!(
            a[2],
            Inet6Addr {
                addr: "fe80::181a:4eff:fe0c:57b6".parse().unwrap(),
                ifindex: 3,
                flags: 0xc0,
                netdev: "veth0".into(),
            }
        );
        let bad = "fe80 03 40 20 c0 veth0\nzz80000000000000181a4efffe0c57b6 03 40 20 c0 veth0\n\
                   fe80000000000000181a4efffe0c57b6 03 40 20 c0\n";
        assert!(parse_if_inet6(bad).is_empty());
    }

    #[test]
    fn an_ipv4_peer_gets_the_ipv4_gid_even_while_the_link_local_is_tentative() {
        let t = rxe_table();
        for q in [
            GidQuery::Peer("10.99.0.2".parse().unwrap()),
            GidQuery::Peer("::ffff:10.99.0.2".parse().unwrap()),
            GidQuery::Ipv4,
            GidQuery::Any,
        ] {
            let e = pick_with(&t, q, Some(IF_INET6_FRESH), None).unwrap();
            assert_eq!(e.gid_index, 1, "{q:?}");
            assert_eq!(e.gid.to_string(), "::ffff:10.99.0.1");
        }
    }

    #[test]
    fn a_tentative_link_local_gid_is_refused_until_its_address_is_ready() {
        let t = rxe_table();
        let peer = GidQuery::Peer("fe80::1".parse().unwrap());
        match pick_with(&t, peer, Some(IF_INET6_FRESH), None) {
            Err(NoGid::NotReady(e, AddrState::Tentative)) => assert_eq!(e.gid_index, 0),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            pick_with(&t, peer, Some(IF_INET6_SETTLED), None)
                .unwrap()
                .gid_index,
            0
        );
        // Not knowing counts as ready.
        assert_eq!(pick_with(&t, peer, None, None).unwrap().gid_index, 0);
        // Without IPv4, Any falls through to the link-local GID only once it is ready.
        let v6_only = vec![t[0].clone()];
        assert!(matches!(
            pick_with(&v6_only, GidQuery::Any, Some(IF_INET6_FRESH), None),
            Err(NoGid::NotReady(_, AddrState::Tentative))
        ));
        assert_eq!(
            pick_with(&v6_only, GidQuery::Any, Some(IF_INET6_SETTLED), None)
                .unwrap()
                .gid_index,
            0
        );
    }

    #[test]
    fn flags_are_read_for_the_gids_own_netdev() {
        let t = rxe_table();
        // The same address tentative on another netdev (ifindex 9) says nothing about veth0's.
        let other = "fe80000000000000181a4efffe0c57b6 09 40 20 c0    eth9\n\
                     fe80000000000000181a4efffe0c57b6 03 40 20 80    veth0\n";
        assert_eq!(
            addr_state(&t[0], Some(&parse_if_inet6(other))),
            AddrState::Ready
        );
        // Without an ifindex the name decides.
        let by_name = GidEntry {
            ndev_ifindex: 0,
            ..t[0].clone()
        };
        assert_eq!(
            addr_state(&by_name, Some(&parse_if_inet6(other))),
            AddrState::Ready
        );
        let dad_failed = "fe80000000000000181a4efffe0c57b6 03 40 20 88    veth0\n";
        assert_eq!(
            addr_state(&t[0], Some(&parse_if_inet6(dad_failed))),
            AddrState::DadFailed
        );
        // An address the netdev does not list: unknown, which is usable.
        assert_eq!(addr_state(&t[0], Some(&[])), AddrState::Unknown);
    }

    #[test]
    fn an_ipv6_peer_gets_a_global_gid_and_never_a_link_local_one() {
        let mut t = rxe_table();
        t.push(entry("2001:db8::1", 2, GidType::RoceV2, 3, "veth0"));
        t.push(entry("2001:db8::2", 3, GidType::RoceV2, 3, "veth0"));
        let settled = format!(
            "{IF_INET6_SETTLED}20010db8000000000000000000000001 03 40 00 80    veth0\n\
             20010db8000000000000000000000002 03 40 00 80    veth0\n"
        );
        let peer = GidQuery::Peer("2001:db8::99".parse().unwrap());
        assert_eq!(
            pick_with(&t, peer, Some(&settled), None).unwrap().gid_index,
            2
        );
        // The kernel's source address towards the peer wins over the lower index.
        assert_eq!(
            pick_with(&t, peer, Some(&settled), Some("2001:db8::2"))
                .unwrap()
                .gid_index,
            3
        );
        assert_eq!(
            pick_with(&t, GidQuery::Ipv6, Some(&settled), None)
                .unwrap()
                .gid_index,
            2
        );
        // Only a link-local GID: an IPv6 peer that is not link-local finds none.
        assert_eq!(
            pick_with(&rxe_table()[..1], peer, Some(IF_INET6_SETTLED), None),
            Err(NoGid::None)
        );
        // A ready GID beats one whose state is unknown, even at a higher index.
        let only_second =
            format!("{IF_INET6_SETTLED}20010db8000000000000000000000002 03 40 00 80    veth0\n");
        assert_eq!(
            pick_with(&t, peer, Some(&only_second), None)
                .unwrap()
                .gid_index,
            3
        );
    }

    #[test]
    fn roce_v1_other_ports_and_empty_slots_are_never_picked() {
        let mut v1 = entry("10.99.0.1", 0, GidType::RoceV1, 3, "veth0");
        let mut port2 = entry("10.99.0.1", 1, GidType::RoceV2, 3, "veth0");
        port2.port_num = 2;
        let mut zero = entry("::", 2, GidType::RoceV2, 0, "veth0");
        zero.netdev = None;
        let t = vec![v1.clone(), port2, zero];
        assert_eq!(pick_with(&t, GidQuery::Any, None, None), Err(NoGid::None));
        v1.gid_type = GidType::RoceV2;
        assert_eq!(
            pick_with(&[v1], GidQuery::Ipv4, None, None)
                .unwrap()
                .gid_index,
            0
        );
    }

    #[test]
    fn errors_say_what_was_wanted_what_was_found_and_what_to_check() {
        let t = rxe_table();
        let v6_only = &t[..1];
        let (errno, why) = explain(v6_only, 1, &GidQuery::Ipv4, NoGid::None, "rxe0");
        assert_eq!(errno, Errno::NOENT);
        assert_eq!(
            why,
            "no RoCE v2 IPv4 GID (the port has [0] fe80::181a:4eff:fe0c:57b6 RoCE v2): \
             is an IPv4 address configured on veth0?"
        );
        let (_, why) = explain(&[], 1, &GidQuery::Any, NoGid::None, "rxe0");
        assert_eq!(
            why,
            "no RoCE v2 GID (the port's GID table is empty): is an IP address configured on \
             the netdev of rxe0, and its link up?"
        );
        let (errno, why) = explain(
            &t,
            1,
            &GidQuery::Any,
            NoGid::NotReady(t[0].clone(), AddrState::Tentative),
            "rxe0",
        );
        assert_eq!(errno, Errno::AGAIN);
        assert!(
            why.starts_with(
                "the RoCE v2 IPv6 link-local GID fe80::181a:4eff:fe0c:57b6 (index 0) is not \
                 usable yet: its address on veth0 is tentative"
            ),
            "{why}"
        );
        let (errno, why) = explain(
            &t,
            1,
            &GidQuery::Any,
            NoGid::NotReady(t[0].clone(), AddrState::DadFailed),
            "rxe0",
        );
        assert_eq!(errno, Errno::ADDRNOTAVAIL);
        assert!(why.contains("duplicate address detection failed"), "{why}");
    }

    #[test]
    fn the_route_source_towards_loopback_is_loopback() {
        // Any host running the tests has 127.0.0.1 on lo.
        assert_eq!(
            route_source("127.0.0.1".parse().unwrap()),
            Some("127.0.0.1".parse().unwrap())
        );
    }
}
