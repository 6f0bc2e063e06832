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

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const RUN_LIMIT: Duration = Duration::from_secs(120);
const LISTEN_LIMIT: Duration = Duration::from_secs(30);
const IP: &str = "10.99.0.1";
const COUNT: u32 = 20;

fn uverbs_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("UVERBS_BIN") {
        return PathBuf::from(p);
    }
    if Path::new("/usr/bin/uverbs").exists() {
        return PathBuf::from("/usr/bin/uverbs");
    }
    PathBuf::from(env!("CARGO_BIN_EXE_uverbs"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Impl {
    Ours,
    RdmaCore,
}

struct Side {
    what: String,
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

fn spawn(imp: Impl, args: &[String]) -> Side {
    let mut cmd = match imp {
        Impl::Ours => {
            let mut c = Command::new(uverbs_bin());
            c.arg("rping");
            c
        }
        Impl::RdmaCore => {
            let p = Path::new("/usr/bin/rping");
            assert!(p.exists(), "rdma-core's rping is not in /usr/bin");
            Command::new(p)
        }
    };
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!("{imp:?} {cmd:?}");
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("starting {what}: {e}"));
    let out = child.stdout.take().map(collect);
    let err = child.stderr.take().map(collect);
    Side {
        what,
        child,
        out,
        err,
    }
}

/// (exit status or None if killed, stdout, stderr, description)
fn finish(mut s: Side, deadline: Instant) -> (Option<i32>, String, String) {
    let status = loop {
        match s.child.try_wait() {
            Ok(Some(st)) => break st.code(),
            Ok(None) if Instant::now() >= deadline => {
                let _ = s.child.kill();
                let _ = s.child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("waiting for {}: {e}", s.what),
        }
    };
    let join = |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    (status, join(s.out.take()), join(s.err.take()))
}

/// Whether an rdma_cm id listens on `port` (`rdma resource show cm_id`).
fn cm_listening(port: u16) -> bool {
    Command::new("/usr/bin/rdma")
        .args(["resource", "show", "cm_id"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.contains("LISTEN") && l.contains(&format!(":{port} ")))
        })
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
