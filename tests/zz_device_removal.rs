//! `rdma link delete rxe0` while another thread posts and polls, in its own test binary (its
//! own process), re-creating the device afterwards so test binaries that run later find it.
//!
//! rxe has no `disassociate_ucontext` (neither on 6.1 nor on 6.12), so the kernel cannot tear
//! our context down under us: unregistering the device waits until every process has closed
//! its uverbs fd. What the test shows, with every wait bounded:
//! - while we hold the device the removal does not complete, and our data path keeps working
//!   (no spinning on a dead ring, no error from a half-removed device);
//! - once we drop our objects, the removal completes within seconds, and the device is gone
//!   for new opens: discovery no longer lists it, and opening the stale `Device` fails with a
//!   clear error;
//! - had the kernel disassociated us instead (drivers that support it), the async event fd
//!   would carry `IB_EVENT_DEVICE_FATAL` and later commands would fail with `EIO`: the test
//!   checks that branch too if it ever happens.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, AsyncEventType, Context, Errno, GidType, QpInitAttr, QpType, RecvWr, SendWr, Wc,
    WcStatus,
};

const RDMA: &str = "/usr/bin/rdma";

fn rdma(args: &[&str]) -> Child {
    Command::new(RDMA)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn rdma {args:?}: {e}"))
}

/// Waits for `child` up to `limit`; `None` if it is still running.
fn wait_for(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Re-creates rxe0 on veth0 and waits until its port is ACTIVE (as the VM's /init does).
fn recreate_rxe0() {
    let mut c = rdma(&["link", "add", "rxe0", "type", "rxe", "netdev", "veth0"]);
    let s = wait_for(&mut c, Duration::from_secs(30)).expect("rdma link add hangs");
    assert!(s.success(), "rdma link add rxe0 failed: {s}");
    let state = "/sys/class/infiniband/rxe0/ports/1/state";
    let start = Instant::now();
    loop {
        let st = std::fs::read_to_string(state).unwrap_or_default();
        if st.contains("ACTIVE") && uverbs::devices().is_ok_and(|d| !d.is_empty()) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "rxe0 not ACTIVE after re-creating it: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rdma_link_delete_while_posting_and_polling_is_clean_and_bounded() {
    let dev = common::rxe_device();
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(256, None, 0).unwrap();
    let cap = common::rc::qp_cap(64);
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq, cap))
        .unwrap();
    let table = ctx.query_gid_table().unwrap();
    let g = table
        .iter()
        .find(|e| e.gid_type == GidType::RoceV2)
        .expect("a RoCE v2 GID");
    // A QP connected to itself: sends loop back into its own receives.
    let qpn = qp.qp_num();
    common::rc::rc_connect(&mut qp, qpn, g.gid_index as u8, g.gid, 12, 2);
    let mr = pd.reg_mr(64 * 64, AccessFlags::LOCAL_WRITE).unwrap();

    // The worker: posts a receive and a send, polls both completions, forever, until told to
    // stop or until a call fails (then it reports the error and stops: no spinning).
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let worker = {
        let (stop, rounds) = (stop.clone(), rounds.clone());
        let mut cq = cq;
        std::thread::spawn(move || -> Result<(), String> {
            let sg = [mr.sge(0, 64).unwrap()];
            let rsg = [mr.sge(64, 64).unwrap()];
            let mut buf = [Wc::default(); 4];
            while !stop.load(Ordering::Relaxed) {
                qp.post_recv(&[RecvWr::new(1, &rsg)])
                    .map_err(|e| format!("post_recv: {e}"))?;
                qp.post_send(&[SendWr::send(2).sge(&sg).signaled()])
                    .map_err(|e| format!("post_send: {e}"))?;
                let mut got = 0;
                let start = Instant::now();
                while got < 2 {
                    let k = cq.poll(&mut buf).map_err(|e| format!("poll_cq: {e}"))?;
                    for w in &buf[..k] {
                        if w.status != WcStatus::SUCCESS {
                            return Err(format!("completion {w:?}"));
                        }
                    }
                    got += k;
                    if start.elapsed() > Duration::from_secs(10) {
                        return Err(format!("only {got} of 2 completions in 10 s"));
                    }
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                }
                rounds.fetch_add(1, Ordering::Relaxed);
            }
            drop((qp, cq, mr));
            Ok(())
        })
    };
    let start = Instant::now();
    while rounds.load(Ordering::Relaxed) < 20 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the loopback data path is stuck"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    let mut del = rdma(&["link", "delete", "rxe0"]);
    // A driver that disassociates would raise DEVICE_FATAL on the async fd now.
    let ev = ctx.get_async_event(Some(Duration::from_secs(5)));
    match ev {
        Ok(ev) if ev.event_type == AsyncEventType::DEVICE_FATAL => {
            // Disassociated: every later command fails with EIO, the worker stops with an
            // error (or is stopped), and the removal has completed.
            stop.store(true, Ordering::Relaxed);
            let w = worker.join().expect("worker panicked");
            eprintln!("disassociated; worker ended with {w:?}");
            let e = ctx.alloc_pd().unwrap_err();
            assert!(e.is(Errno::IO), "{e}");
            assert!(wait_for(&mut del, Duration::from_secs(30)).is_some());
        }
        other => {
            // rxe: no disassociation. The removal waits for us; our data path is unaffected.
            let e = other.expect_err("an async event other than DEVICE_FATAL");
            assert!(e.is(Errno::TIMEDOUT), "{e}");
            assert!(
                del.try_wait().unwrap().is_none(),
                "the removal completed while we hold the device"
            );
            let before = rounds.load(Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(500));
            assert!(
                rounds.load(Ordering::Relaxed) > before,
                "the data path stopped during the pending removal"
            );
            let attr = ctx
                .query_device()
                .expect("commands still work until we close");
            assert!(attr.max_qp > 0);
            stop.store(true, Ordering::Relaxed);
            let w = worker.join().expect("worker panicked");
            assert_eq!(w, Ok(()), "the worker failed during the pending removal");
            assert!(
                del.try_wait().unwrap().is_none(),
                "removal done before we closed"
            );
            // Closing everything lets the removal finish.
            drop((pd, ctx));
            let s = wait_for(&mut del, Duration::from_secs(30))
                .expect("rdma link delete still blocked after we closed the device");
            assert!(s.success(), "rdma link delete failed: {s}");
        }
    }

    // The device is gone for new users, and saying so is a clear error.
    assert!(
        !uverbs::devices()
            .unwrap()
            .iter()
            .any(|d| d.name() == "rxe0"),
        "rxe0 still listed after removal"
    );
    let e = Context::open(&dev).unwrap_err();
    assert_eq!(e.op(), "open_device", "{e}");
    assert!(e.object().contains("rxe0"), "{e}");
    eprintln!("opening the removed device: {e}");

    recreate_rxe0();
    let ctx = common::rxe_context();
    assert!(ctx.alloc_pd().is_ok(), "the re-created device works");
}
