//! `examples/cm_rc.rs` (our rdma_cm RC client and server) against rdma-core's `ucmatose` and
//! `examples/cm_ud.rs` (UD over rdma_cm) against `udaddy`, both roles, on the VM's rxe0
//! (10.99.0.1); and each example alone (both sides ours). Each run has
//! its own port and a time limit; a run passes when our side returns `Ok` (every message of
//! the right size arrived, every completion succeeded, the connection came up and went down)
//! and the rdma-core tool exits 0 having printed its "data transfers complete".

#![allow(clippy::duplicate_mod)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[allow(dead_code)] // the example's `main` is not called here
#[path = "../examples/cm_rc.rs"]
mod cm_rc;

#[allow(dead_code)]
#[path = "../examples/cm_ud.rs"]
mod cm_ud;

const IP: &str = "10.99.0.1";
const LIMIT: Duration = Duration::from_secs(60);

fn ucmatose(args: &[&str]) -> std::process::Child {
    rdma_core("ucmatose", args)
}

fn rdma_core(tool: &str, args: &[&str]) -> std::process::Child {
    let p = std::path::Path::new("/usr/bin").join(tool);
    assert!(p.exists(), "rdma-core's {tool} is not in /usr/bin");
    Command::new(p)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {tool}: {e}"))
}

fn finish(mut child: std::process::Child) -> (Option<i32>, String) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (
                st.code(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            );
        }
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            return (None, String::from_utf8_lossy(&out.stdout).into_owned());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_rc_example_both_sides_ours() {
    cm_rc::run().unwrap_or_else(|e| panic!("cm_rc: {e}"));
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_rc_server_with_ucmatose_client() {
    let at = format!("{IP}:7481").parse().unwrap();
    let srv = std::thread::spawn(move || cm_rc::server(at));
    std::thread::sleep(Duration::from_millis(500));
    let (code, out) = finish(ucmatose(&["-s", IP, "-p", "7481"]));
    let ours = srv.join().expect("server thread");
    assert_eq!(code, Some(0), "ucmatose client:\n{out}");
    assert!(out.contains("data transfers complete"), "{out}");
    ours.unwrap_or_else(|e| panic!("our server: {e}\nucmatose:\n{out}"));
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_rc_client_with_ucmatose_server() {
    let srv = ucmatose(&["-b", IP, "-p", "7482"]);
    std::thread::sleep(Duration::from_millis(800));
    let ours = cm_rc::client(format!("{IP}:7482").parse().unwrap());
    let (code, out) = finish(srv);
    ours.unwrap_or_else(|e| panic!("our client: {e}\nucmatose:\n{out}"));
    assert_eq!(code, Some(0), "ucmatose server:\n{out}");
    assert!(out.contains("data transfers complete"), "{out}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_ud_example_both_sides_ours() {
    cm_ud::run().unwrap_or_else(|e| panic!("cm_ud: {e}"));
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_ud_server_with_udaddy_client() {
    // udaddy has no port option: its port is 7174 (`-p` is its old port-space option).
    let at = format!("{IP}:{}", cm_ud::PORT).parse().unwrap();
    let srv = std::thread::spawn(move || cm_ud::server(at));
    std::thread::sleep(Duration::from_millis(500));
    let (code, out) = finish(rdma_core("udaddy", &["-s", IP]));
    let ours = srv.join().expect("server thread");
    assert_eq!(code, Some(0), "udaddy client:\n{out}");
    assert!(out.contains("data transfers complete"), "{out}");
    ours.unwrap_or_else(|e| panic!("our server: {e}\nudaddy:\n{out}"));
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_ud_client_with_udaddy_server() {
    let srv = rdma_core("udaddy", &["-b", IP]);
    std::thread::sleep(Duration::from_millis(800));
    let ours = cm_ud::client(format!("{IP}:{}", cm_ud::PORT).parse().unwrap());
    let (code, out) = finish(srv);
    ours.unwrap_or_else(|e| panic!("our client: {e}\nudaddy:\n{out}"));
    assert_eq!(code, Some(0), "udaddy server:\n{out}");
    assert!(out.contains("data transfers complete"), "{out}");
}
