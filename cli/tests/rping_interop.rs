//! `uverbs rping` against rdma-core's `rping` (librdmacm) on the VM's rxe0 (10.99.0.1): ours
//! as server with theirs as client, the reverse, and ours with ours; each with data
//! verification (`-V`) and display (`-v`), a ping count, its own port, and a time limit after
//! which both processes are killed and the test fails.
//!
//! A run passes when both sides exit 0 and the client printed `ping data: rdma-ping-N: ...`
//! for every N with the rotating pattern rping puts after the prefix (so the server read the
//! client's buffer and wrote it back byte for byte, and `-V` compared it).
//!
//! Where our binary is: `UVERBS_BIN` if set, else `/usr/bin/uverbs` (where the VM harness
//! installs it) if it exists, else the one cargo built for this test.

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "common/proc.rs"]
mod proc;

use std::process::Command;
use std::time::{Duration, Instant};

use proc::{cm_listening, rdma_core_tool, uverbs_bin, Impl, Side};

const RUN_LIMIT: Duration = Duration::from_secs(120);
const LISTEN_LIMIT: Duration = Duration::from_secs(30);
const IP: &str = "10.99.0.1";
const COUNT: u32 = 20;

fn spawn(imp: Impl, args: &[String]) -> Side {
    let cmd = match imp {
        Impl::Ours => {
            let mut c = Command::new(uverbs_bin());
            c.arg("rping");
            c
        }
        Impl::RdmaCore => Command::new(rdma_core_tool("rping")),
    };
    Side::spawn(cmd, args, &format!("{imp:?}"))
}

/// (exit code or None if killed, stdout, stderr)
fn finish(s: Side, deadline: Instant) -> (Option<i32>, String, String) {
    let f = s.finish(deadline);
    (f.code(), f.stdout, f.stderr)
}

/// The ping lines rping's client prints with `-v` for `count` pings of `size` bytes.
fn expected_pings(count: u32, size: usize) -> Vec<String> {
    let mut start = 65u8;
    (0..count)
        .map(|ping| {
            let mut buf = format!("rdma-ping-{ping}: ").into_bytes();
            let mut c = start;
            while buf.len() < size - 1 {
                buf.push(c);
                c += 1;
                if c > 122 {
                    c = 65;
                }
            }
            start += 1;
            if start > 122 {
                start = 65;
            }
            format!("ping data: {}", String::from_utf8(buf).unwrap())
        })
        .collect()
}

fn run(server: Impl, client: Impl, port: u16, size: usize) {
    let _ = common::rxe_device();
    let p = port.to_string();
    let s = size.to_string();
    let srv = spawn(
        server,
        &["-s", "-a", IP, "-p", &p, "-S", &s, "-v"].map(String::from),
    );
    let t0 = Instant::now();
    while !cm_listening(port) {
        assert!(
            t0.elapsed() < LISTEN_LIMIT,
            "{server:?} server not listening on {port} after {LISTEN_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let cli = spawn(
        client,
        &[
            "-c",
            "-a",
            IP,
            "-p",
            &p,
            "-S",
            &s,
            "-C",
            &COUNT.to_string(),
            "-v",
            "-V",
        ]
        .map(String::from),
    );
    let deadline = Instant::now() + RUN_LIMIT;
    let (cst, cout, cerr) = finish(cli, deadline);
    let (sst, sout, serr) = finish(srv, deadline);
    let report = format!(
        "server {server:?} exit {sst:?}\n--- stdout\n{sout}--- stderr\n{serr}\n\
         client {client:?} exit {cst:?}\n--- stdout\n{cout}--- stderr\n{cerr}"
    );
    assert_eq!(cst, Some(0), "client failed:\n{report}");
    assert_eq!(sst, Some(0), "server failed:\n{report}");
    let got: Vec<&str> = cout
        .lines()
        .filter(|l| l.starts_with("ping data:"))
        .collect();
    assert_eq!(got, expected_pings(COUNT, size), "client pings:\n{report}");
    let served = sout
        .lines()
        .filter(|l| l.starts_with("server ping data: rdma-ping-"))
        .count();
    assert_eq!(served, COUNT as usize, "server pings:\n{report}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rping_ours_server_rdma_core_client() {
    run(Impl::Ours, Impl::RdmaCore, 7401, 64);
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rping_rdma_core_server_ours_client() {
    run(Impl::RdmaCore, Impl::Ours, 7402, 64);
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rping_ours_both_sides_large_buffer() {
    run(Impl::Ours, Impl::Ours, 7403, 4000);
}
