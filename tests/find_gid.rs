//! `Context::find_gid` on a device whose link has just come up, in the soft-RoCE VM: the GID it
//! picks is one `create_ah` accepts at once, on both kernels.
//!
//! Right after a link comes up its IPv6 link-local address is tentative for a second or more
//! (duplicate address detection), and an AH from the GID of that address fails with
//! `ETIMEDOUT`; the IPv4-mapped GID works from the start. The test makes the fresh link itself
//! (a veth pair with an IPv4 address and an rxe device on one end, brought up last) instead of
//! relying on the VM's rxe0, whose link came up long before.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::{Duration, Instant};

use uverbs::{AhAttr, Context, Errno, GidQuery};

const RXE: &str = "rxegid0";
const VETH: &str = "gidveth0";
const VETH_PEER: &str = "gidveth1";
const ADDR: Ipv4Addr = Ipv4Addr::new(10, 98, 0, 1);

/// The first of `names` that exists (iproute2's tools, copied into the VM under /usr/bin).
fn tool(names: &[&'static str]) -> &'static str {
    names
        .iter()
        .copied()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or(names[0])
}

fn run(prog: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| format!("{prog} {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{prog} {args:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    run(
        tool(&["/usr/bin/ip", "/usr/sbin/ip", "/sbin/ip", "/bin/ip"]),
        args,
    )
}

fn rdma(args: &[&str]) -> Result<(), String> {
    run(
        tool(&["/usr/bin/rdma", "/usr/sbin/rdma", "/sbin/rdma"]),
        args,
    )
}

/// A veth pair and an rxe device on it, made for this test and removed when dropped (after
/// every object of the device is gone: rxe's removal waits for its open contexts).
struct FreshLink;

impl FreshLink {
    /// Makes the pair and the device with the link down, then brings it up: `Instant` is the
    /// moment the link came up.
    fn up() -> (FreshLink, Instant) {
        FreshLink::remove();
        let link = FreshLink;
        let set_up = || -> Result<Instant, String> {
            ip(&[
                "link", "add", VETH, "type", "veth", "peer", "name", VETH_PEER,
            ])?;
            ip(&["addr", "add", &format!("{ADDR}/24"), "dev", VETH])?;
            rdma(&["link", "add", RXE, "type", "rxe", "netdev", VETH])?;
            ip(&["link", "set", VETH_PEER, "up"])?;
            let t0 = Instant::now();
            ip(&["link", "set", VETH, "up"])?;
            Ok(t0)
        };
        let t0 = set_up().unwrap_or_else(|e| panic!("making the fresh link: {e}"));
        let state = format!("/sys/class/infiniband/{RXE}/ports/1/state");
        while !std::fs::read_to_string(&state)
            .unwrap_or_default()
            .contains("ACTIVE")
        {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{RXE} not ACTIVE 30 s after its link came up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        (link, t0)
    }

    fn remove() {
        let _ = rdma(&["link", "delete", RXE]);
        let _ = ip(&["link", "delete", VETH]);
    }
}

impl Drop for FreshLink {
    fn drop(&mut self) {
        FreshLink::remove();
    }
}

/// What the test saw, for the log when something fails.
fn table_and_addrs(ctx: &Context) -> String {
    format!(
        "GID table {:?}\n/proc/net/if_inet6:\n{}",
        ctx.query_gid_table(),
        std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default()
    )
}

/// Asks `find_gid` until it answers, allowing `ENOENT` (the GID is not in the table yet) and
/// `EAGAIN` (its address is tentative, which only an IPv6 GID may be) for 30 s after the link
/// came up. Returns the GID and how many `EAGAIN`s came first.
fn wait_for_gid(ctx: &Context, q: &GidQuery, t0: Instant) -> (uverbs::GidEntry, u32) {
    let mut tentative = 0u32;
    let mut last = None;
    loop {
        match ctx.find_gid(1, q) {
            Ok(e) => return (e, tentative),
            Err(e) if e.is(Errno::AGAIN) || e.is(Errno::NOENT) => {
                if e.is(Errno::AGAIN) {
                    assert!(e.reason().contains("tentative"), "{e}");
                    assert!(!matches!(q, GidQuery::Peer(IpAddr::V4(_))), "{e}");
                    tentative += 1;
                }
                if last != e.errno() {
                    last = e.errno();
                    eprintln!(
                        "{:.2} s after the link came up: {e}",
                        t0.elapsed().as_secs_f64()
                    );
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "find_gid({q:?}) still fails 30 s after the link came up: {e}\n{}",
                    table_and_addrs(ctx)
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("find_gid({q:?}): {e}\n{}", table_and_addrs(ctx)),
        }
    }
}

/// The pick for an IPv4 peer is the IPv4-mapped GID and `create_ah` takes it at once; a
/// link-local pick is refused with `EAGAIN` while its address is tentative and, once it is
/// given, `create_ah` takes it too.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn find_gid_picks_what_create_ah_accepts_right_after_the_link_comes_up() {
    let _ = common::NEEDS_DEVICE;
    let (_link, t0) = FreshLink::up();
    let dev = uverbs::device_by_name(RXE).unwrap_or_else(|e| panic!("{e}"));
    let ctx = Context::open(&dev).unwrap_or_else(|e| panic!("{e}"));
    let pd = ctx.alloc_pd().unwrap();
    let seen = table_and_addrs(&ctx);
    eprintln!(
        "{:.2} s after the link came up: {seen}",
        t0.elapsed().as_secs_f64()
    );

    // An IPv4 peer (here the device's own address: an AH towards ourselves resolves the same
    // way as one across the link). The kernel fills the GID table from a work queue after the
    // link comes up, so the GID may be missing (ENOENT) for a moment; never "not ready".
    let (v4, _) = wait_for_gid(&ctx, &GidQuery::Peer(IpAddr::V4(ADDR)), t0);
    assert_eq!(v4.gid.to_string(), format!("::ffff:{ADDR}"), "{seen}");
    assert_eq!(v4.netdev.as_deref(), Some(VETH), "{v4:?}");
    assert_eq!(
        ctx.find_gid(1, &GidQuery::Any).unwrap(),
        v4,
        "Any prefers IPv4"
    );
    let started = Instant::now();
    let ah = pd
        .create_ah(&AhAttr::roce(v4.gid, v4.gid_index as u8, 1))
        .unwrap_or_else(|e| {
            panic!(
                "create_ah from and to the picked GID {v4:?} failed {:.2} s after the link \
                 came up: {e}\n{}",
                t0.elapsed().as_secs_f64(),
                table_and_addrs(&ctx)
            )
        });
    eprintln!(
        "create_ah with the IPv4 pick (index {}) took {:.3} s",
        v4.gid_index,
        started.elapsed().as_secs_f64()
    );
    drop(ah);

    // A link-local peer: its GID only once the address is no longer tentative.
    let (ll, refused) = wait_for_gid(&ctx, &GidQuery::Peer("fe80::1".parse().unwrap()), t0);
    eprintln!(
        "link-local GID {} (index {}) given {:.2} s after the link came up, after {refused} \
         refusals",
        ll.gid,
        ll.gid_index,
        t0.elapsed().as_secs_f64()
    );
    assert!(ll.gid.to_string().starts_with("fe80:"), "{ll:?}");
    pd.create_ah(&AhAttr::roce(ll.gid, ll.gid_index as u8, 1))
        .unwrap_or_else(|e| {
            panic!(
                "create_ah with the ready link-local GID {ll:?}: {e}\n{}",
                table_and_addrs(&ctx)
            )
        });
}
