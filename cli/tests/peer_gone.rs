//! A peer that vanishes mid-run ends every `uverbs` tool: killed with SIGKILL (its QP is
//! destroyed by the kernel, so rxe drops what is sent to it and acknowledges nothing), the
//! surviving side exits non-zero within a bounded time naming the cause: the send whose
//! retries ran out ("transport retry counter exceeded ... the peer stopped acknowledging"),
//! the control connection closing, or, for a side with nothing outstanding, the
//! `--peer-timeout` limit. Never a flushed work request as the cause.
//!
//! On the same rxe device over 127.0.0.1, with rdma-core's tools as the killed peer too.
//! Where our binary is: as `pingpong_interop.rs` says.

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "common/proc.rs"]
mod proc;

use std::process::Command;
use std::time::{Duration, Instant};

use proc::{cm_listening, listening, rdma_core_tool, uverbs_bin, Finished, Side};

/// How long the survivor may take to exit after its peer is killed (the bound).
const EXIT_LIMIT: Duration = Duration::from_secs(30);
/// How long the server may take to start listening.
const LISTEN_LIMIT: Duration = Duration::from_secs(30);
/// How long both run before the kill (traffic is flowing by then).
const RUN_BEFORE_KILL: Duration = Duration::from_secs(3);
/// The survivors' `--peer-timeout` (short, so the test is quick; the default is 15 s).
const PEER_TIMEOUT: &str = "5";

fn dev_and_gid() -> (String, String) {
    let ctx = common::rxe_context();
    let (index, _) = common::rc::roce_gid(&ctx);
    (ctx.device().name().to_string(), index.to_string())
}

fn ours(sub: &[&str]) -> Command {
    let mut c = Command::new(uverbs_bin());
    c.args(sub);
    c
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Starts the server, waits until it listens on `port` (`cm`: an rdma_cm port, else TCP),
/// starts the client, lets them run,
/// kills the side `kill_server` names, and returns the survivor after it exited (or was
/// killed at [`EXIT_LIMIT`]) with the time it took.
fn run_and_kill(
    server: (Command, Vec<String>),
    client: (Command, Vec<String>),
    port: u16,
    cm: bool,
    kill_server: bool,
) -> (Finished, Duration, Finished) {
    let listening = |port| {
        if cm {
            cm_listening(port)
        } else {
            listening(port)
        }
    };
    assert!(!listening(port), "port {port} is already in use");
    let mut s = Side::spawn(server.0, &server.1, "server");
    let t0 = Instant::now();
    while !listening(port) {
        if let Ok(Some(_)) = s.child.try_wait() {
            panic!(
                "the server exited before listening: {}",
                s.finish(Instant::now()).describe()
            );
        }
        assert!(t0.elapsed() < LISTEN_LIMIT, "the server never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut c = Side::spawn(client.0, &client.1, "client");
    std::thread::sleep(RUN_BEFORE_KILL);
    for side in [&mut s, &mut c] {
        if let Ok(Some(st)) = side.child.try_wait() {
            panic!("{} ended before the kill ({st})", side.what);
        }
    }
    let (victim, survivor) = if kill_server { (s, c) } else { (c, s) };
    let killed = victim.kill();
    let t = Instant::now();
    let f = survivor.finish(t + EXIT_LIMIT);
    (f, t.elapsed(), killed)
}

/// The survivor exited (not killed at the limit) non-zero, within the limit, and its error
/// names one of `causes`, never a flushed request as the cause.
fn check_survivor(f: &Finished, took: Duration, killed: &Finished, causes: &[&str]) {
    let all = format!("{}\n(the killed peer: {})", f.describe(), killed.describe());
    let st = f
        .status
        .unwrap_or_else(|| panic!("still running {EXIT_LIMIT:?} after its peer was killed\n{all}"));
    assert!(!st.success(), "exited 0 after its peer was killed\n{all}");
    assert!(took < EXIT_LIMIT, "took {took:?}\n{all}");
    assert!(
        causes.iter().any(|c| f.stderr.contains(c)),
        "the error names none of {causes:?}\n{all}"
    );
    assert!(
        !f.stderr
            .contains("Failed status Work Request Flushed Error"),
        "a flushed request was named as the cause\n{all}"
    );
    println!(
        "survivor exited ({st}) {:.1} s after the kill: {}",
        took.as_secs_f64(),
        f.stderr.trim()
    );
}

const RETRY: &str = "transport retry counter exceeded (12)";
const QUIET: &str = "no completion and no word from the peer for 5 s";

fn pingpong_args(dev: &str, gid: &str, port: u16, client: bool) -> Vec<String> {
    let mut v = strings(&[
        "-d",
        dev,
        "-g",
        gid,
        "-p",
        &port.to_string(),
        "-n",
        "100000000",
    ]);
    if client {
        v.push("127.0.0.1".into());
    }
    v
}

/// Runs our `pingpong rc` (with `extra` options and `--peer-timeout`) as the server or the
/// client against `peer` (ours, or rdma-core's `ibv_rc_pingpong`) on `port`, kills the peer,
/// and checks that ours ends naming the retries or the peer timeout. Returns how it ended.
fn pingpong_survives(
    port: u16,
    peer_is_ours: bool,
    ours_is_server: bool,
    extra: &[&str],
) -> Finished {
    let (dev, gid) = dev_and_gid();
    let mut ours_args = strings(extra);
    ours_args.extend(strings(&["--peer-timeout", PEER_TIMEOUT]));
    ours_args.extend(pingpong_args(&dev, &gid, port, !ours_is_server));
    let survivor = (ours(&["pingpong", "rc"]), ours_args);
    let peer_cmd = if peer_is_ours {
        ours(&["pingpong", "rc"])
    } else {
        Command::new(rdma_core_tool("ibv_rc_pingpong"))
    };
    let peer = (peer_cmd, pingpong_args(&dev, &gid, port, ours_is_server));
    let (server, client) = if ours_is_server {
        (survivor, peer)
    } else {
        (peer, survivor)
    };
    let (f, took, killed) = run_and_kill(server, client, port, false, !ours_is_server);
    check_survivor(&f, took, &killed, &[RETRY, QUIET]);
    f
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn pingpong_rc_client_ends_naming_the_cause_when_its_server_is_killed() {
    let f = pingpong_survives(18_701, true, false, &[]);
    if f.stderr.contains(RETRY) {
        assert!(
            f.stderr.contains("the peer stopped acknowledging"),
            "{}",
            f.stderr
        );
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn pingpong_rc_server_ends_naming_the_cause_when_its_rdma_core_client_is_killed() {
    pingpong_survives(18_702, false, true, &[]);
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn pingpong_rc_with_events_ends_on_its_peer_timeout_or_retries() {
    pingpong_survives(18_703, false, false, &["-e"]);
}

fn perf_args(dev: &str, gid: &str, port: u16, client: bool) -> Vec<String> {
    let mut v = strings(&[
        "write-bw",
        "-d",
        dev,
        "-x",
        gid,
        "-p",
        &port.to_string(),
        "-s",
        "4096",
        "-n",
        "100000000",
        "--peer-timeout",
        PEER_TIMEOUT,
    ]);
    if client {
        v.push("127.0.0.1".into());
    }
    v
}

/// Runs our `perf write-bw` on both sides on `port`, kills the server (`kill_server`) or the
/// client, and checks that the survivor ends naming one of `causes`. Returns how it ended.
fn write_bw_survives(port: u16, kill_server: bool, causes: &[&str]) -> Finished {
    let (dev, gid) = dev_and_gid();
    let (f, took, killed) = run_and_kill(
        (ours(&["perf"]), perf_args(&dev, &gid, port, false)),
        (ours(&["perf"]), perf_args(&dev, &gid, port, true)),
        port,
        false,
        kill_server,
    );
    check_survivor(&f, took, &killed, causes);
    f
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn perf_write_bw_client_names_retry_exceeded_when_its_server_is_killed() {
    // The writes in flight lose their responder: the first error is the retries running out.
    let f = write_bw_survives(18_704, true, &[RETRY]);
    assert!(
        f.stderr.contains("the peer stopped acknowledging"),
        "{}",
        f.stderr
    );
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn perf_write_bw_server_ends_when_its_client_is_killed() {
    // The server of an RDMA write test has nothing outstanding: its control connection
    // closes with the killed client.
    write_bw_survives(
        18_705,
        false,
        &[
            "Couldn't sync with the peer: it closed the connection",
            "Connection reset by peer",
        ],
    );
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rping_client_fails_naming_the_disconnect_when_its_server_is_killed() {
    // rping's server never ends a run itself: a disconnect mid-run is a failure for the
    // client (rdma-core's rping client says "wait for RDMA_WRITE_ADV state 10" and fails).
    let port = 7_192;
    let args = |side: &str| {
        strings(&[
            side,
            "-a",
            "10.99.0.1",
            "-p",
            &port.to_string(),
            "-C",
            "100000000",
            "-V",
        ])
    };
    let (f, took, killed) = run_and_kill(
        (ours(&["rping"]), args("-s")),
        (ours(&["rping"]), args("-c")),
        port,
        true,
        true,
    );
    check_survivor(
        &f,
        took,
        &killed,
        &[
            "the server disconnected during ping",
            RETRY,
            "no completion or event within",
        ],
    );
}
