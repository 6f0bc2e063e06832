//! `uverbs pingpong rc|uc|ud|srq` against rdma-core's `ibv_{rc,uc,ud,srq}_pingpong` on the
//! same rxe device over 127.0.0.1: ours as server with theirs as client, the reverse, and ours
//! with ours. Each run uses the RoCE v2 IPv4-mapped GID (found through
//! `Context::query_gid_table`), a small iteration count, its own TCP port, and a time limit
//! after which both processes are killed and the test fails.
//!
//! A run passes when both sides exit 0, both print the two summary lines for the right byte
//! and iteration counts, and each side's `remote address` lines name exactly the QPNs and
//! PSNs the other side printed as its `local address` (so the TCP exchange was parsed right).
//!
//! Where our binary is: `UVERBS_BIN` if set, else `/usr/bin/uverbs` (where the VM harness
//! installs it) if it exists, else the one cargo built for this test.

// The root package's device-test support (rxe device, NEEDS_DEVICE, leak counts).
#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "common/proc.rs"]
mod proc;

use std::process::Command;
use std::time::{Duration, Instant};

use proc::{listening, rdma_core_tool, uverbs_bin, Impl, Side};

/// Time one side may take from start to exit (TCG is slow; a run takes a few seconds).
const RUN_LIMIT: Duration = Duration::from_secs(120);
/// Time the server may take to start listening.
const LISTEN_LIMIT: Duration = Duration::from_secs(30);
const ITERS: u32 = 100;

/// The rxe device and the index of its RoCE v2 IPv4-mapped GID on port 1.
fn roce_v2_ipv4_gid_index() -> (String, u32) {
    let ctx = common::rxe_context();
    let (index, _) = common::rc::roce_gid(&ctx);
    (ctx.device().name().to_string(), u32::from(index))
}

fn spawn(imp: Impl, mode: &str, args: &[String], role: &str) -> Side {
    let cmd = match imp {
        Impl::Ours => {
            let mut c = Command::new(uverbs_bin());
            c.args(["pingpong", mode]);
            c
        }
        Impl::RdmaCore => Command::new(rdma_core_tool(&format!("ibv_{mode}_pingpong"))),
    };
    Side::spawn(cmd, args, &format!("{role} {imp:?}"))
}

/// `(qpn, psn)` of each `local address:` or `remote address:` line, in order.
fn addresses(stdout: &str, which: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(which))
        .map(|l| {
            let field = |name: &str| {
                l.split(name)
                    .nth(1)
                    .and_then(|r| r.split([',', ':']).next())
                    .unwrap_or_else(|| panic!("no {name} in {l:?}"))
                    .trim()
                    .to_string()
            };
            (field("QPN "), field("PSN "))
        })
        .collect()
}

struct Run {
    mode: &'static str,
    server: Impl,
    client: Impl,
    port: u16,
    /// Extra options for the server and for the client.
    server_opts: &'static [&'static str],
    client_opts: &'static [&'static str],
    /// Message size (passed as -s).
    size: u32,
    /// QPs each side reports (srq: -q).
    num_qp: usize,
}

impl Run {
    fn new(mode: &'static str, server: Impl, client: Impl, port: u16) -> Run {
        Run {
            mode,
            server,
            client,
            port,
            server_opts: &[],
            client_opts: &[],
            // ud sends one packet per message: fit rxe's 1024-byte path MTU on a 1500 link.
            size: if mode == "ud" { 1024 } else { 4096 },
            num_qp: 1,
        }
    }

    fn go(self) {
        let (dev, gid) = roce_v2_ipv4_gid_index();
        let common = |extra: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = [
                "-d",
                &dev,
                "-g",
                &gid.to_string(),
                "-n",
                &ITERS.to_string(),
                "-p",
                &self.port.to_string(),
                "-s",
                &self.size.to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        assert!(
            !listening(self.port),
            "TCP port {} is already in use",
            self.port
        );
        let server = spawn(self.server, self.mode, &common(self.server_opts), "server");
        let t0 = Instant::now();
        let mut server = Some(server);
        while !listening(self.port) {
            let s = server.as_mut().expect("server");
            if let Ok(Some(_)) = s.child.try_wait() {
                let f = server.take().expect("server").finish(Instant::now());
                panic!("the server exited before listening: {}", f.describe());
            }
            if t0.elapsed() > LISTEN_LIMIT {
                let f = server.take().expect("server").kill();
                panic!(
                    "the server did not listen on TCP port {} within {} s: {}",
                    self.port,
                    LISTEN_LIMIT.as_secs(),
                    f.describe()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut cargs = common(self.client_opts);
        cargs.push("127.0.0.1".into());
        let client = spawn(self.client, self.mode, &cargs, "client");
        let deadline = Instant::now() + RUN_LIMIT;
        let c = client.finish(deadline);
        let s = server.take().expect("server").finish(deadline);
        let both = format!("{}\n{}", s.describe(), c.describe());
        println!("{both}");
        for f in [&s, &c] {
            assert!(
                f.status.is_some_and(|st| st.success()),
                "{} did not exit 0\n{both}",
                f.what
            );
            let bytes = u64::from(self.size) * u64::from(ITERS) * 2;
            for want in [format!("{bytes} bytes in "), format!("{ITERS} iters in ")] {
                assert!(
                    f.stdout.lines().any(|l| l.starts_with(&want)),
                    "{} printed no line starting {want:?}\n{both}",
                    f.what
                );
            }
            assert!(
                !f.stdout.contains("invalid data"),
                "{} found invalid data\n{both}",
                f.what
            );
        }
        for (a, b) in [(&s, &c), (&c, &s)] {
            let local = addresses(&a.stdout, "local address:");
            let remote = addresses(&b.stdout, "remote address:");
            assert_eq!(
                local.len(),
                self.num_qp,
                "{} printed {} local addresses, want {}\n{both}",
                a.what,
                local.len(),
                self.num_qp
            );
            assert_eq!(
                local, remote,
                "{}'s local addresses differ from the remote addresses {} printed\n{both}",
                a.what, b.what
            );
        }
    }
}

fn srq(server: Impl, client: Impl, port: u16) -> Run {
    Run {
        // 16 QPs by default on both sides: say so explicitly for our count check.
        server_opts: &["-q", "16"],
        client_opts: &["-q", "16"],
        num_qp: 16,
        ..Run::new("srq", server, client, port)
    }
}

use Impl::{Ours, RdmaCore};

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_ours_server_rdma_core_client() {
    Run::new("rc", Ours, RdmaCore, 18601).go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_rdma_core_server_ours_client() {
    Run::new("rc", RdmaCore, Ours, 18602).go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_ours_both_sides_events_and_chk() {
    Run {
        server_opts: &["-e"],
        client_opts: &["-c"],
        ..Run::new("rc", Ours, Ours, 18603)
    }
    .go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_ours_events_with_rdma_core_events() {
    Run {
        server_opts: &["-e"],
        client_opts: &["-e"],
        ..Run::new("rc", RdmaCore, Ours, 18604)
    }
    .go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_small_inline_messages_both_ways() {
    // 8 bytes fit rxe's inline space: our sends go inline, rdma-core's too.
    Run {
        size: 8,
        ..Run::new("rc", Ours, RdmaCore, 18605)
    }
    .go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn uc_ours_server_rdma_core_client() {
    Run::new("uc", Ours, RdmaCore, 18611).go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn uc_rdma_core_server_ours_client() {
    Run::new("uc", RdmaCore, Ours, 18612).go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn uc_ours_both_sides() {
    Run {
        client_opts: &["-e", "-m", "512"],
        server_opts: &["-m", "512"],
        ..Run::new("uc", Ours, Ours, 18613)
    }
    .go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn ud_ours_server_rdma_core_client() {
    Run::new("ud", Ours, RdmaCore, 18621).go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn ud_rdma_core_server_ours_client() {
    Run {
        client_opts: &["-c"],
        ..Run::new("ud", RdmaCore, Ours, 18622)
    }
    .go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn ud_ours_both_sides() {
    Run {
        server_opts: &["-e"],
        client_opts: &["-r", "10"],
        ..Run::new("ud", Ours, Ours, 18623)
    }
    .go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn srq_ours_server_rdma_core_client() {
    srq(Ours, RdmaCore, 18631).go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn srq_rdma_core_server_ours_client() {
    srq(RdmaCore, Ours, 18632).go();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn srq_ours_both_sides() {
    Run {
        server_opts: &["-q", "4", "-e"],
        client_opts: &["-q", "4", "-r", "20"],
        num_qp: 4,
        ..Run::new("srq", Ours, Ours, 18633)
    }
    .go();
}

#[test]
fn address_lines_parse_like_both_tools_print_them() {
    let out = "  local address:  LID 0x0000, QPN 0x000011, PSN 0xb225c0, GID ::ffff:10.99.0.1\n\
               \x20 local address:  LID 0x0000, QPN 0x00001d, PSN 0x7e493c: GID ::ffff:10.99.0.1\n\
               \x20 remote address: LID 0x0000, QPN 0x000012, PSN 0xb84b2f, GID ::ffff:10.99.0.1\n";
    assert_eq!(
        addresses(out, "local address:"),
        vec![
            ("0x000011".to_string(), "0xb225c0".to_string()),
            ("0x00001d".to_string(), "0x7e493c".to_string())
        ]
    );
    assert_eq!(
        addresses(out, "remote address:"),
        vec![("0x000012".to_string(), "0xb84b2f".to_string())]
    );
}
