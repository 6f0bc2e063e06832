//! Socket addresses in the C layout the rdma_cm ABI carries (`sockaddr_in`, `sockaddr_in6`
//! inside a `sockaddr_in6` or `__kernel_sockaddr_storage` buffer).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
/// `AF_IB` (`sockaddr_ib`): InfiniBand native addressing, not offered here.
#[cfg(test)]
const AF_IB: u16 = 27;

/// `sizeof(struct sockaddr_in)`.
pub(crate) const SOCKADDR_IN_LEN: usize = 16;
/// `sizeof(struct sockaddr_in6)`.
pub(crate) const SOCKADDR_IN6_LEN: usize = 28;

/// Writes `addr` at the start of `buf` (at least 28 bytes) and returns its C length.
pub(crate) fn encode(addr: &SocketAddr, buf: &mut [u8]) -> usize {
    buf.fill(0);
    match addr {
        SocketAddr::V4(a) => {
            buf[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
            buf[2..4].copy_from_slice(&a.port().to_be_bytes());
            buf[4..8].copy_from_slice(&a.ip().octets());
            SOCKADDR_IN_LEN
        }
        SocketAddr::V6(a) => {
            buf[0..2].copy_from_slice(&AF_INET6.to_ne_bytes());
            buf[2..4].copy_from_slice(&a.port().to_be_bytes());
            buf[4..8].copy_from_slice(&a.flowinfo().to_be_bytes());
            buf[8..24].copy_from_slice(&a.ip().octets());
            buf[24..28].copy_from_slice(&a.scope_id().to_ne_bytes());
            SOCKADDR_IN6_LEN
        }
    }
}

/// Reads a C socket address; `None` for an empty (family 0) or non-IP (`AF_IB`) address.
pub(crate) fn decode(buf: &[u8]) -> Option<SocketAddr> {
    if buf.len() < SOCKADDR_IN_LEN {
        return None;
    }
    let family = u16::from_ne_bytes([buf[0], buf[1]]);
    let port = u16::from_be_bytes([buf[2], buf[3]]);
    match family {
        AF_INET => {
            let ip = Ipv4Addr::new(buf[4], buf[5], buf[6], buf[7]);
            Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
        }
        AF_INET6 if buf.len() >= SOCKADDR_IN6_LEN => {
            let flow = u32::from_be_bytes(buf[4..8].try_into().ok()?);
            let ip: [u8; 16] = buf[8..24].try_into().ok()?;
            let scope = u32::from_ne_bytes(buf[24..28].try_into().ok()?);
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port,
                flow,
                scope,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_and_ipv6_round_trip_in_the_c_layout() {
        let mut buf = [0xffu8; 128];
        let a: SocketAddr = "10.99.0.1:7174".parse().unwrap();
        assert_eq!(encode(&a, &mut buf), 16);
        assert_eq!(&buf[..8], &[2, 0, 0x1c, 0x06, 10, 99, 0, 1]);
        assert!(buf[8..].iter().all(|&b| b == 0));
        assert_eq!(decode(&buf), Some(a));
        let b: SocketAddr = "[fe80::1%3]:18515".parse().unwrap();
        assert_eq!(encode(&b, &mut buf), 28);
        assert_eq!(decode(&buf), Some(b));
        assert_eq!(decode(&[0u8; 28]), None);
        let mut ib = [0u8; 28];
        ib[0..2].copy_from_slice(&AF_IB.to_ne_bytes());
        assert_eq!(decode(&ib), None);
    }
}
