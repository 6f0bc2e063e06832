//! `uverbs perf write-bw -n 50` server and client on the VM's rxe device complete, and the
//! client reports a result for the settings it was given (text table and `--json`). Speed is
//! never asserted: `cargo xtask bench` measures, this only proves the tool runs.
//!
//! Where our binary is: `UVERBS_BIN` if set, else `/usr/bin/uverbs` (where the VM harness
//! installs it) if it exists, else the one cargo built for this test.

// The root package's device-test support (rxe device, NEEDS_DEVICE, leak counts).
#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "common/proc.rs"]
mod proc;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use proc::uverbs_bin;

/// Time one side may take (TCG is slow; a run takes a few seconds).
const LIMIT: Duration = Duration::from_secs(120);

/// Waits for `child` up to `LIMIT`, killing it (and failing) past that.
fn wait(mut child: Child, what: &str) -> Output {
    let start = Instant::now();
    loop {
        match child.try_wait().expect("try_wait") {
            Some(_) => return child.wait_with_output().expect("collect output"),
            None if start.elapsed() > LIMIT => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("collect output");
                panic!(
                    "{what} did not finish in {LIMIT:?}; stdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The rxe device and its RoCE v2 IPv4-mapped GID index on port 1.
fn roce_v2_ipv4_gid_index() -> (String, u32) {
    let ctx = common::rxe_context();
    let (index, _) = common::rc::roce_gid(&ctx);
    (ctx.device().name().to_string(), u32::from(index))
}

fn run_pair(port: u16, extra: &[&str]) -> (String, String) {
    run_pair_sized(port, "64", extra)
}

fn run_pair_sized(port: u16, size: &str, extra: &[&str]) -> (String, String) {
    run_test(port, "write-bw", size, extra)
}

fn run_test(port: u16, test: &str, size: &str, extra: &[&str]) -> (String, String) {
    let (name, gid) = roce_v2_ipv4_gid_index();
    let args = |client: bool| {
        let mut a: Vec<String> = ["perf", test, "-n", "50", "-s", size, "-d", &name]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["-x".into(), gid.to_string(), "-p".into(), port.to_string()]);
        a.extend(extra.iter().map(|s| s.to_string()));
        if client {
            a.push("127.0.0.1".into());
        }
        a
    };
    let spawn = |client: bool| {
        Command::new(uverbs_bin())
            .args(args(client))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn uverbs perf")
    };
    let server = spawn(false);
    // The client retries a refused connection while the server starts.
    let client = spawn(true);
    let c = wait(client, "the client");
    let s = wait(server, "the server");
    let text = |o: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(c.status.success(), "client failed:\n{}", text(&c));
    assert!(s.status.success(), "server failed:\n{}", text(&s));
    (
        String::from_utf8_lossy(&c.stdout).into_owned(),
        String::from_utf8_lossy(&s.stdout).into_owned(),
    )
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn perf_write_bw_server_and_client_complete() {
    let (client, server) = run_pair(18710, &[]);
    let lines: Vec<&str> = client.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.contains("MsgRate[Mpps]"))
        .unwrap_or_else(|| panic!("no result table in the client's output:\n{client}"));
    let f: Vec<&str> = lines[i + 1].split_whitespace().collect();
    assert_eq!(&f[..2], ["64", "50"], "bytes and iterations: {client}");
    let rate: f64 = f[4].parse().expect("MsgRate is a number");
    assert!(rate > 0.0, "a positive message rate: {client}");
    assert!(server.contains("Role           : server"), "{server}");
    assert!(
        client.contains("Post List      : 32"),
        "our default post list: {client}"
    );
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn perf_write_bw_perftest_defaults_and_json() {
    let (client, _) = run_pair(18711, &["--perftest-defaults", "--json"]);
    let v: serde_json::Value = serde_json::from_str(client.trim())
        .unwrap_or_else(|e| panic!("client output is not one JSON object ({e}):\n{client}"));
    assert_eq!(v["test"], "write-bw");
    assert_eq!(v["role"], "client");
    assert_eq!(v["bytes"], 64);
    assert_eq!(v["iterations"], 50);
    assert_eq!(v["post_list"], 1);
    assert_eq!(v["tx_depth"], 128);
    assert_eq!(
        v["cq_mod"], 100,
        "perftest's CQ moderation for small messages"
    );
    assert_eq!(v["events"], false, "perftest busy-polls: {v}");
    assert!(v["msg_rate_mpps"].as_f64().unwrap() > 0.0, "{v}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn perf_perftest_defaults_signal_every_large_message() {
    // perftest 4.5 turns CQ moderation off above 8 KiB unless -Q is given.
    let (client, _) = run_pair_sized(18712, "65536", &["--perftest-defaults", "--json"]);
    let v: serde_json::Value = serde_json::from_str(client.trim())
        .unwrap_or_else(|e| panic!("client output is not one JSON object ({e}):\n{client}"));
    assert_eq!(v["bytes"], 65536);
    assert_eq!(v["cq_mod"], 1, "{v}");
    let (client, _) = run_pair_sized(
        18713,
        "65536",
        &["--perftest-defaults", "--json", "-Q", "10"],
    );
    let v: serde_json::Value = serde_json::from_str(client.trim())
        .unwrap_or_else(|e| panic!("client output is not one JSON object ({e}):\n{client}"));
    assert_eq!(v["cq_mod"], 10, "an explicit -Q wins: {v}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn perf_write_lat_completes_in_both_settings() {
    // write-lat spins on memory the peer's RDMA WRITE fills, the server writing first (as
    // perftest's): both roles finish the 50 round trips and report sane statistics, with our
    // defaults and with perftest's.
    for (i, extra) in [&["--json"][..], &["--json", "--perftest-defaults"][..]]
        .into_iter()
        .enumerate()
    {
        let (client, server) = run_test(18730 + i as u16, "write-lat", "64", extra);
        for (who, out) in [("client", &client), ("server", &server)] {
            let v: serde_json::Value = serde_json::from_str(out.trim())
                .unwrap_or_else(|e| panic!("{who} output is not one JSON object ({e}):\n{out}"));
            assert_eq!(v["test"], "write-lat", "{v}");
            assert_eq!(v["iterations"], 50, "{v}");
            let t = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
            assert!(t("t_min_usec") > 0.0, "{who}: {v}");
            assert!(
                t("t_min_usec") <= t("t_typical_usec") && t("t_typical_usec") <= t("t_max_usec"),
                "{who}: min <= typical <= max: {v}"
            );
        }
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn perf_events_mode_sleeps_on_the_channel_and_completes() {
    // -e (perftest's --events): an empty poll arms the CQ and waits on the completion
    // channel. Each test shape waits on a different CQ: the bandwidth client on its send CQ
    // with many WRs in flight, the send-bw server on its receive CQ, the latency client on
    // one completion at a time, both sides of send-lat on both CQs.
    for (i, (test, size)) in [
        ("write-bw", "64"),
        ("send-bw", "64"),
        ("read-lat", "64"),
        ("send-lat", "2"),
    ]
    .into_iter()
    .enumerate()
    {
        let (client, server) = run_test(18720 + i as u16, test, size, &["-e"]);
        for (who, out) in [("client", &client), ("server", &server)] {
            assert!(
                out.contains("CQ events       : ON"),
                "{test} {who} banner shows events mode:\n{out}"
            );
        }
        let row = client
            .lines()
            .find(|l| l.split_whitespace().take(2).eq([size, "50"]))
            .unwrap_or_else(|| panic!("{test}: no result row for {size} B x 50:\n{client}"));
        let f: Vec<f64> = row
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        assert!(
            f.len() >= 5 && f[2..].iter().all(|v| v.is_finite() && *v > 0.0),
            "{test}: every measured column positive: {row}"
        );
    }
    // The send-lat client waits for each reply, which the server's process sends after its
    // own receive: over 50 round trips it finds its receive CQ empty and sleeps. (A read-lat
    // client need not: on 6.1 rxe completes the read inside the doorbell `write()`.)
    let (client, _) = run_test(18725, "send-lat", "2", &["-e", "--json"]);
    let v: serde_json::Value = serde_json::from_str(client.trim())
        .unwrap_or_else(|e| panic!("client output is not one JSON object ({e}):\n{client}"));
    assert_eq!(v["events"], true, "{v}");
    assert!(
        v["cq_event_waits"].as_u64().is_some_and(|n| n > 0),
        "the client slept on the channel: {v}"
    );
    let (client, _) = run_test(18726, "send-lat", "2", &["--json"]);
    let v: serde_json::Value = serde_json::from_str(client.trim())
        .unwrap_or_else(|e| panic!("client output is not one JSON object ({e}):\n{client}"));
    assert_eq!(v["events"], false, "{v}");
    assert_eq!(v["cq_event_waits"], 0, "busy-polling never sleeps: {v}");
    // Our default on rxe for the bandwidth tests: sleep while the send queue is full (the
    // kernel's rxe work needs the CPU); --busy-poll spins like perftest.
    let (client, _) = run_test(18727, "write-bw", "64", &["--json"]);
    let v: serde_json::Value = serde_json::from_str(client.trim())
        .unwrap_or_else(|e| panic!("client output is not one JSON object ({e}):\n{client}"));
    assert_eq!(v["events"], true, "rxe bandwidth default: {v}");
    let (client, _) = run_test(18728, "write-bw", "64", &["--json", "--busy-poll"]);
    let v: serde_json::Value = serde_json::from_str(client.trim())
        .unwrap_or_else(|e| panic!("client output is not one JSON object ({e}):\n{client}"));
    assert_eq!(v["events"], false, "--busy-poll: {v}");
    assert_eq!(v["cq_event_waits"], 0, "--busy-poll: {v}");
}
