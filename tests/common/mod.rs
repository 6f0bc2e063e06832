//! Shared support for integration tests that need a real RDMA device.
//!
//! Convention: a test that needs a device is marked
//! `#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]`, so a plain
//! `cargo test` on a machine without RDMA lists it by name as not run. The VM harness runs every
//! test binary with `--include-ignored` and sets `UVERBS_TEST_VM=1`; there a missing device is a
//! failure, never a skip.
#![allow(dead_code)]

pub mod efa;
pub mod leaks;
pub mod pair;
pub mod rc;
pub mod two_vm;

use uverbs::{Context, Device, Driver, Pd, Srq, SrqAttr, SrqAttrMask};

/// The `#[ignore]` reason every device test uses.
pub const NEEDS_DEVICE: &str = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)";

/// Whether the test runs inside the harness's VM.
pub fn under_vm() -> bool {
    std::env::var("UVERBS_TEST_VM").as_deref() == Ok("1")
}

/// The first rxe device; fails the test (with what was found) if there is none.
pub fn rxe_device() -> Device {
    let devs = uverbs::devices().expect("device discovery failed");
    devs.iter()
        .find(|d| *d.driver() == Driver::Rxe)
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no rxe device found (UVERBS_TEST_VM={:?}); devices: {:?}",
                std::env::var("UVERBS_TEST_VM").ok(),
                devs.iter()
                    .map(|d| d.name().to_string())
                    .collect::<Vec<_>>()
            )
        })
}

/// Opens the first rxe device.
pub fn rxe_context() -> Context {
    let dev = rxe_device();
    Context::open(&dev).unwrap_or_else(|e| panic!("opening {}: {e}", dev.name()))
}

/// An SRQ in `pd` for `max_wr` receives of one SGE each, its limit not armed; fails the test
/// if the device refuses it.
pub fn srq(pd: &Pd, max_wr: u32) -> Srq {
    pd.create_srq(&SrqAttr {
        max_wr,
        max_sge: 1,
        srq_limit: 0,
    })
    .unwrap_or_else(|e| panic!("create_srq of {max_wr} receives: {e}"))
}

/// Arms `srq`'s limit: `SRQ_LIMIT_REACHED` fires (once) when fewer than `limit` receives
/// are left on it.
pub fn arm_srq_limit(srq: &mut Srq, limit: u32) {
    srq.modify(
        &SrqAttr {
            srq_limit: limit,
            ..SrqAttr::default()
        },
        SrqAttrMask::LIMIT,
    )
    .unwrap_or_else(|e| panic!("arming the SRQ limit at {limit}: {e}"));
}

/// Number of open fds of this process (for leak checks).
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Number of mappings of this process (for leak checks).
pub fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// [`mappings`] once it has stopped changing: the same count three reads in a row, 100 ms
/// apart (at most 3 s). Work that finishes on another thread after the last drop (the
/// device-removal watcher parking when its last context closes, a thread of an earlier test
/// exiting) maps or unmaps on its own time; a leak grows with every cycle and still shows.
#[allow(dead_code)]
pub fn settled_mappings() -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut last = mappings();
    let mut same = 0;
    while same < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = mappings();
        if now == last {
            same += 1;
        } else {
            same = 0;
            last = now;
        }
    }
    last
}
