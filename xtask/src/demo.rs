//! `cargo xtask demo`: boot the 6.12 VM and show, for someone who has never used RDMA, what
//! the soft-RoCE device looks like to rdma-core and to our `uverbs` CLI, and an RDMA
//! ping-pong on it.
//!
//! The whole in-guest script is [`DEMO_SCRIPT`]: extend the demo by adding sections there
//! (`say` prints an explanation, `show CMD...` runs a command and reports its exit status
//! honestly, without stopping the demo).

use std::time::Duration;

use crate::guest::{Net, Payload};
use crate::harness::{build_uverbs_cli, Harness};
use crate::kernel::Series;
use crate::util::Result;
use crate::vm::Echo;

/// The demo, as run by the VM's busybox sh (after `/lib/uverbs/lib.sh`).
pub const DEMO_SCRIPT: &str = r###"
# say TEXT: an explanation line; section TEXT: starts a new part of the demo.
say() { echo "## $*"; }
section() { echo; echo "## ---- $* ----"; }
failures=0
show() {
    echo "\$ $*"
    "$@" 2>&1
    rc=$?
    [ $rc -ne 0 ] && echo "(exit status $rc)"
    return $rc
}

section "What is in this VM"
say "This VM runs Debian's $(uname -r) kernel under qemu. It has no RDMA hardware, so the"
say "kernel's soft-RoCE driver (rdma_rxe) provides an RDMA device, rxe0, on a virtual Ethernet"
say "link (veth0, 10.99.0.1). Programs reach it through /dev/infiniband/uverbs0:"
show ls -l /dev/infiniband

section "rdma-core lists devices"
say "rdma-core (the C library every RDMA program uses today) lists the devices it finds:"
show /usr/bin/ibv_devices || failures=$((failures + 1))

section "uverbs lists devices"
say "uverbs is a pure-Rust replacement for that library, here as one static binary."
say "Its view of the devices:"
if [ -x /usr/bin/uverbs ]; then
    show /usr/bin/uverbs devices || echo "(uverbs devices failed: this subcommand may not be implemented yet)"
    section "uverbs shows device details"
    show /usr/bin/uverbs info || echo "(uverbs info failed: this subcommand may not be implemented yet)"
else
    echo "(the uverbs CLI did not build, so it is not in this VM)"
fi

section "An RDMA ping-pong"
say "RDMA lets one program put data straight into another's memory. ibv_rc_pingpong (from"
say "rdma-core) sets up a reliable connection between two queue pairs and bounces 4 KiB"
say "messages back and forth 100 times; both sides report throughput and latency."
say "(Times are meaningless here: the CPU is emulated. Compare ratios, not absolutes.)"
show /lib/uverbs/rc_pingpong_local.sh 100 || failures=$((failures + 1))

section "Done"
say "To try things yourself: cargo xtask vm -- '<shell command>'  (see docs/testing.md)"
exit $failures
"###;

pub fn run() -> Result<bool> {
    let cli = match build_uverbs_cli() {
        Ok(p) => Some(p),
        Err(e) => {
            println!("xtask: note: the uverbs CLI did not build, the demo runs without it: {e}");
            None
        }
    };
    let mut h = Harness::new(cli);
    let payload = Payload {
        net: Net::Veth {
            addr: "10.99.0.1/24".into(),
        },
        script: DEMO_SCRIPT.to_string(),
        files: vec![],
    };
    println!("xtask: booting the 6.12 kernel under qemu (software CPU emulation: ~10-20 s) ...");
    let echo = Echo {
        prefix: String::new(),
        step_banners: false,
        boot_messages: false,
    };
    let run = h.run(Series::V6_12, &payload, Duration::from_secs(600), echo)?;
    println!();
    if run.success() {
        println!(
            "xtask: demo finished (VM booted in {:.1} s)",
            run.boot_secs.unwrap_or(0.0)
        );
    } else {
        println!("xtask: {}", run.describe());
    }
    Ok(run.success())
}
