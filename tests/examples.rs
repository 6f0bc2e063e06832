//! Runs every example in the soft-RoCE VM.
//!
//! The harness copies test executables into the VM, not examples, so each example keeps its
//! logic in a `pub fn run()` that its `main` calls, and this file compiles the example source
//! as a module and calls that same function: what runs here is exactly the example's code.
//! An example that returns an error (a byte that did not arrive, a completion that failed, a
//! wait past its deadline) fails its test with the example's own message.

mod common;

use common::NEEDS_DEVICE;

#[allow(dead_code)] // the example's `main` is not called here
#[path = "../examples/rc_write_read.rs"]
mod rc_write_read;

#[allow(dead_code)]
#[path = "../examples/ud_send.rs"]
mod ud_send;

#[allow(dead_code)]
#[path = "../examples/srq_server.rs"]
mod srq_server;

#[allow(dead_code)]
#[path = "../examples/comp_channel.rs"]
mod comp_channel;

fn check(name: &str, r: Result<(), Box<dyn std::error::Error + Send + Sync>>) {
    let _ = NEEDS_DEVICE;
    if let Err(e) = r {
        panic!("example {name} failed: {e}");
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_rc_write_read() {
    check("rc_write_read", rc_write_read::run());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_ud_send() {
    check("ud_send", ud_send::run());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_srq_server() {
    check("srq_server", srq_server::run());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn example_comp_channel() {
    check("comp_channel", comp_channel::run());
}
