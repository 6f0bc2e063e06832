//! `rdma link delete rxe0` while another thread posts and polls, in its own test binary (its
//! own process), re-creating the device afterwards. The VM harness runs this binary after all
//! the others (`RUNS_LAST` in xtask/src/testrun.rs), so none of them meets a device that was
//! just removed and re-added.
//!
//! rxe has no `disassociate_ucontext` (neither on 6.1 nor on 6.12), so the kernel cannot tear
//! our context down under us: unregistering the device waits until every process has closed
//! its uverbs fd. It deletes the character device first, though, and uverbs' removal watcher
//! sees that. What the tests show, with every wait bounded:
//! - a thread blocked in `get_async_event` wakes with uverbs' own `DEVICE_REMOVED` within
//!   seconds of `rdma link delete`, and `Context::is_device_removed` is set;
//! - a program that ignores it keeps the removal waiting: the data path and commands keep
//!   working and the deletion does not complete while we hold the device;
//! - once we drop our objects, the removal completes within seconds; fds, device mappings
//!   and kernel objects are back to their start; the device is gone for new opens: discovery
//!   no longer lists it, and opening the stale `Device` fails with a clear error;
//! - had the kernel disassociated us instead (drivers that support it), the async event fd
//!   would carry `IB_EVENT_DEVICE_FATAL` and later commands would fail with `EIO`: the test
//!   checks that branch too if it ever happens (and tests/removal_disassociate.rs on the host);
//! - bad input: two contexts on one device both get the event; a context opened on a device
//!   whose char device is already gone fails cleanly; another device taking the removed one's
//!   `uverbsN` and device number is never taken for it (no false `DEVICE_REMOVED` for a
//!   context on the new device, and a stale `Device` is refused); a device re-added under the
//!   same name after the removal gives a context that is not reported removed.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, AsyncElement, AsyncEventType, Context, Errno, QpInitAttr, QpType, RecvWr, SendWr,
    Wc, WcStatus,
};

/// How long uverbs may take to report a removal (the sysfs fallback checks once a second; the
/// uevent and inotify are immediate; TCG is slow).
const REPORT_LIMIT: Duration = Duration::from_secs(10);

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

/// Runs `rdma args` to completion (bounded); fails the test with its output if it fails.
fn rdma_ok(args: &[&str]) {
    let mut c = rdma(args);
    let s =
        wait_for(&mut c, Duration::from_secs(30)).unwrap_or_else(|| panic!("rdma {args:?} hangs"));
    if !s.success() {
        let mut err = String::new();
        use std::io::Read;
        let _ = c.stderr.take().unwrap().read_to_string(&mut err);
        panic!("rdma {args:?} failed: {s}: {err}");
    }
}

/// (fds, device mappings, kernel ctx/pd/mr/cq/qp objects of every task).
fn snapshot() -> (usize, usize, Vec<usize>) {
    (
        common::open_fds(),
        common::leaks::device_mappings(),
        ["ctx", "pd", "mr", "cq", "qp"]
            .iter()
            .map(|k| common::leaks::kernel_objects(k))
            .collect(),
    )
}

/// Re-creates rxe0 on veth0 and waits until its port is ACTIVE (as the VM's /init does).
fn recreate_rxe0() {
    add_rxe("rxe0", "veth0");
}

/// Held by every test that deletes rxe0: if the test fails (panics) after the deletion and
/// before its own `recreate_rxe0`, the drop brings rxe0 back, so the failure stays one failure
/// instead of "no RDMA device" for every later test of this binary (the VM harness does the
/// same between test binaries). Best effort and bounded: it waits up to 30 s for a deletion
/// that is still finishing (the unwinding test has dropped its objects by then), removes the
/// second device some tests add, re-adds rxe0; it reports what it did and never panics.
struct Rxe0Back;

impl Drop for Rxe0Back {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // A passing test re-created rxe0 itself, and asserted that it works.
            return;
        }
        let run = |args: &[&str]| {
            let mut c = rdma(args);
            match wait_for(&mut c, Duration::from_secs(30)) {
                Some(s) if s.success() => true,
                other => {
                    let _ = c.kill();
                    eprintln!("Rxe0Back: rdma {args:?}: {other:?}");
                    false
                }
            }
        };
        let dir = |name: &str| std::path::Path::new("/sys/class/infiniband").join(name);
        if dir("rxe1").exists() {
            run(&["link", "delete", "rxe1"]);
        }
        let start = Instant::now();
        while dir("rxe0").exists() && start.elapsed() < Duration::from_secs(30) {
            let st = std::fs::read_to_string(dir("rxe0").join("ports/1/state")).unwrap_or_default();
            if st.contains("ACTIVE") {
                eprintln!("Rxe0Back: rxe0 is still there");
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if dir("rxe0").exists() {
            eprintln!("Rxe0Back: rxe0's deletion did not finish within 30 s; not re-created");
            return;
        }
        if !run(&["link", "add", "rxe0", "type", "rxe", "netdev", "veth0"]) {
            return;
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            let st = std::fs::read_to_string(dir("rxe0").join("ports/1/state")).unwrap_or_default();
            if st.contains("ACTIVE") {
                eprintln!("Rxe0Back: the failed test's rxe0 was re-created");
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("Rxe0Back: rxe0 re-created but not ACTIVE within 30 s");
    }
}

/// Creates rxe device `name` on `netdev` and waits until its port is ACTIVE and uverbs lists it.
fn add_rxe(name: &str, netdev: &str) {
    rdma_ok(&["link", "add", name, "type", "rxe", "netdev", netdev]);
    let state = format!("/sys/class/infiniband/{name}/ports/1/state");
    let start = Instant::now();
    loop {
        let st = std::fs::read_to_string(&state).unwrap_or_default();
        if st.contains("ACTIVE")
            && uverbs::devices().is_ok_and(|d| d.iter().any(|d| d.name() == name))
        {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{name} not ACTIVE after creating it: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rdma_link_delete_while_posting_and_polling_is_clean_and_bounded() {
    let _rxe0_back = Rxe0Back;
    let start_state = snapshot();
    let dev = common::rxe_device();
    let ctx = common::rxe_context();
    let watch = ctx.removal_watch();
    eprintln!("removal watch: {watch:?}");
    assert!(
        watch.uevent || watch.dev_node || watch.sysfs,
        "no removal detection at all: {watch:?}"
    );
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(256, None, 0).unwrap();
    let cap = common::rc::qp_cap(64);
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq, cap))
        .unwrap();
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    // A QP connected to itself: sends loop back into its own receives.
    let qpn = qp.qp_num();
    common::rc::rc_connect(&mut qp, qpn, gid_index, gid, 12, 2);
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

    // A thread blocked in get_async_event, as a program's event loop would be.
    let waiter = {
        let ctx = ctx.clone();
        std::thread::spawn(move || {
            let r = ctx.get_async_event(Some(Duration::from_secs(60)));
            (r, Instant::now())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    let mut del = rdma(&["link", "delete", "rxe0"]);
    let (ev, woke) = waiter.join().expect("waiter panicked");
    let ev = ev.expect("get_async_event after rdma link delete");
    let reported = woke - asked;
    eprintln!(
        "event {:?} ({}) {:.3} s after rdma link delete was started, via {:?}",
        ev.event_type,
        ev.event_type.as_str(),
        reported.as_secs_f64(),
        ctx.removal_source()
    );
    assert!(
        reported < REPORT_LIMIT,
        "removal reported after {reported:?}"
    );
    assert!(ctx.is_device_removed());
    assert_eq!(ev.element, AsyncElement::Device);
    match ev.event_type {
        AsyncEventType::DEVICE_FATAL => {
            // Disassociated: every later command fails with EIO, the worker stops with an
            // error (or is stopped), and the removal has completed.
            stop.store(true, Ordering::Relaxed);
            let w = worker.join().expect("worker panicked");
            eprintln!("disassociated; worker ended with {w:?}");
            let e = ctx.alloc_pd().unwrap_err();
            assert!(e.is(Errno::IO) && e.is_device_removed(), "{e}");
            assert!(wait_for(&mut del, Duration::from_secs(30)).is_some());
            drop((pd, ctx));
        }
        AsyncEventType::DEVICE_REMOVED => {
            // rxe: no disassociation. The removal waits for us; a program that ignores the
            // event (we do, for 3 s) keeps it waiting, and its data path is unaffected.
            assert!(
                del.try_wait().unwrap().is_none(),
                "the removal completed while we hold the device"
            );
            let e = ctx
                .get_async_event(Some(Duration::from_millis(100)))
                .unwrap_err();
            assert!(e.is(Errno::TIMEDOUT), "DEVICE_REMOVED is given once: {e}");
            let before = rounds.load(Ordering::Relaxed);
            std::thread::sleep(Duration::from_secs(3));
            assert!(
                rounds.load(Ordering::Relaxed) > before,
                "the data path stopped during the pending removal"
            );
            let attr = ctx
                .query_device()
                .expect("commands still work until we close");
            assert!(attr.max_qp > 0);
            assert!(
                del.try_wait().unwrap().is_none(),
                "removal done before we closed"
            );
            // What a program must do on the event: stop, free everything, close.
            stop.store(true, Ordering::Relaxed);
            let w = worker.join().expect("worker panicked");
            assert_eq!(w, Ok(()), "the worker failed during the pending removal");
            let closing = Instant::now();
            drop((pd, ctx));
            let s = wait_for(&mut del, Duration::from_secs(30))
                .expect("rdma link delete still blocked after we closed the device");
            assert!(s.success(), "rdma link delete failed: {s}");
            eprintln!(
                "removal done {:.3} s after we closed ({:.3} s after it was started)",
                closing.elapsed().as_secs_f64(),
                asked.elapsed().as_secs_f64()
            );
        }
        other => panic!("unexpected event {other:?} after rdma link delete"),
    }
    drop(del);
    // Our fds (the context's, the watcher's) and mappings are gone with the device.
    let (fds, maps, _) = snapshot();
    assert_eq!(
        (fds, maps),
        (start_state.0, start_state.1),
        "fds or device mappings left after the removal"
    );

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
    assert_eq!(
        snapshot(),
        start_state,
        "not back to the start after re-creating rxe0"
    );
    let ctx = common::rxe_context();
    assert!(ctx.alloc_pd().is_ok(), "the re-created device works");
    // The re-created device (same name, same uverbsN, same device number) is not taken for the
    // removed one: after two sysfs periods it is still not reported removed.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!ctx.is_device_removed(), "{:?}", ctx.removal_source());
    let e = ctx
        .get_async_event(Some(Duration::from_millis(100)))
        .unwrap_err();
    assert!(e.is(Errno::TIMEDOUT), "{e}");
}

/// Bad input around a removal: two contexts on one device, opening a device whose char device
/// is gone, another device taking the removed one's `uverbsN` while the old contexts are open.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn removal_with_two_contexts_a_stale_device_and_a_reused_uverbs_number() {
    let _rxe0_back = Rxe0Back;
    let fds0 = common::open_fds();
    let dev0 = common::rxe_device();
    let a = common::rxe_context();
    let b = common::rxe_context();
    let _pd_a = a.alloc_pd().unwrap();
    let _pd_b = b.alloc_pd().unwrap();
    let asked = Instant::now();
    let mut del = rdma(&["link", "delete", "rxe0"]);
    // Both contexts are told, each once.
    for (name, ctx) in [("a", &a), ("b", &b)] {
        let ev = ctx
            .get_async_event(Some(REPORT_LIMIT))
            .unwrap_or_else(|e| panic!("context {name}: {e}"));
        assert_eq!(
            ev.event_type,
            AsyncEventType::DEVICE_REMOVED,
            "context {name}"
        );
        assert!(ctx.is_device_removed());
        eprintln!(
            "context {name}: DEVICE_REMOVED after {:.3} s via {:?}",
            asked.elapsed().as_secs_f64(),
            ctx.removal_source()
        );
    }
    assert!(del.try_wait().unwrap().is_none(), "removal done while held");

    // Opening the removed device: its char device is gone, so a clear error, no context.
    let e = Context::open(&dev0).unwrap_err();
    eprintln!("opening the removed device while its removal waits: {e}");
    assert_eq!(e.op(), "open_device", "{e}");
    assert!(e.object().contains("rxe0"), "{e}");

    // Another device now: the kernel freed rxe0's uverbs number when it deleted the char
    // device, so rxe1 may take the same uverbsN and device number while a and b still hold
    // the old one.
    add_rxe("rxe1", "veth1");
    let dev1 = uverbs::device_by_name("rxe1").unwrap();
    eprintln!(
        "rxe1 is {} (rxe0 was {})",
        dev1.uverbs_name(),
        dev0.uverbs_name()
    );
    // The stale Device names rxe0's uverbsN: never a context on rxe1 under rxe0's name.
    let e = Context::open(&dev0).unwrap_err();
    eprintln!("opening the stale rxe0 after rxe1 was added: {e}");
    if dev1.uverbs_name() == dev0.uverbs_name() {
        assert!(e.is_device_removed(), "{e}");
        assert!(e.to_string().contains("now belongs to device rxe1"), "{e}");
    }
    // A context on the new device is not told of the old one's removal (its uevent, its
    // node's deletion and its sysfs entry were all about rxe0), after two sysfs periods.
    let c = Context::open(&dev1).expect("open rxe1");
    c.alloc_pd().expect("rxe1 works");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        !c.is_device_removed(),
        "false removal of rxe1 via {:?}",
        c.removal_source()
    );
    let e = c
        .get_async_event(Some(Duration::from_millis(100)))
        .unwrap_err();
    assert!(e.is(Errno::TIMEDOUT), "{e}");
    drop(c);
    rdma_ok(&["link", "delete", "rxe1"]);

    // Letting go of the old contexts lets rxe0's removal finish.
    drop((_pd_a, _pd_b, a, b));
    let s = wait_for(&mut del, Duration::from_secs(30)).expect("rdma link delete still blocked");
    assert!(s.success(), "rdma link delete rxe0: {s}");
    drop(del);
    assert_eq!(common::open_fds(), fds0, "fds left");
    recreate_rxe0();
    assert!(common::rxe_context().alloc_pd().is_ok());
}

/// The uverbs CLI: `UVERBS_BIN`, else `/usr/bin/uverbs` (where the VM harness installs it).
fn uverbs_bin() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("UVERBS_BIN") {
        return p.into();
    }
    let p = std::path::PathBuf::from("/usr/bin/uverbs");
    assert!(p.exists(), "the uverbs CLI is not at {}", p.display());
    p
}

/// Starts `uverbs args...` with its output collected.
fn spawn_cli(args: &[String]) -> Child {
    Command::new(uverbs_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn uverbs {args:?}: {e}"))
}

fn output_of(mut c: Child) -> (String, String) {
    use std::io::Read;
    let (mut out, mut err) = (String::new(), String::new());
    let _ = c.stdout.take().unwrap().read_to_string(&mut out);
    let _ = c.stderr.take().unwrap().read_to_string(&mut err);
    (out, err)
}

/// A server and a client of a long-running CLI command on rxe0; `rdma link delete rxe0`
/// while they run: both exit non-zero within 10 s naming the device, and the deletion then
/// completes. rxe0 is re-created afterwards. `server` and `client` are the command lines
/// after `uverbs`, words split on spaces, `GID` standing for rxe0's RoCE v2 GID index.
fn cli_pair_exits_on_removal(what: &str, server: &str, client: &str) {
    let _rxe0_back = Rxe0Back;
    let gid = {
        let ctx = common::rxe_context();
        common::rc::roce_gid(&ctx).0.to_string()
    };
    let fill = |line: &str| -> Vec<String> {
        line.split_whitespace()
            .map(|s| if s == "GID" { gid.clone() } else { s.into() })
            .collect()
    };
    let mut sides = vec![("server", spawn_cli(&fill(server)))];
    std::thread::sleep(Duration::from_millis(1500));
    sides.push(("client", spawn_cli(&fill(client))));
    // Let them get into their loop (a few seconds under TCG), then check both still run.
    std::thread::sleep(Duration::from_secs(4));
    if sides
        .iter_mut()
        .any(|(_, c)| c.try_wait().unwrap().is_some())
    {
        let mut report = String::new();
        for (name, mut c) in sides {
            let _ = c.kill();
            let s = c.wait().unwrap();
            let (o, e) = output_of(c);
            report += &format!("{name} ({s}):\n{o}\n{e}\n");
        }
        panic!("{what}: a side ended before the removal\n{report}");
    }
    let asked = Instant::now();
    let mut del = rdma(&["link", "delete", "rxe0"]);
    for (name, mut c) in sides {
        let s = wait_for(&mut c, Duration::from_secs(10));
        let t = asked.elapsed();
        if s.is_none() {
            let _ = c.kill();
        }
        let (o, e) = output_of(c);
        let s = s.unwrap_or_else(|| {
            panic!("{what}: the {name} still runs 10 s after rdma link delete\n{o}\n{e}")
        });
        eprintln!(
            "{what}: {name} exited ({s}) {:.3} s after rdma link delete: {}",
            t.as_secs_f64(),
            e.trim()
        );
        assert!(!s.success(), "{what}: the {name} exited 0\n{o}\n{e}");
        assert!(
            e.contains("device rxe0 was removed"),
            "{what}: the {name} does not say why\n{o}\n{e}"
        );
    }
    let s = wait_for(&mut del, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("{what}: rdma link delete still blocked after both exited"));
    assert!(s.success(), "{what}: rdma link delete failed: {s}");
    eprintln!(
        "{what}: removal done {:.3} s after it was started",
        asked.elapsed().as_secs_f64()
    );
    drop(del);
    recreate_rxe0();
}

/// [`cli_pair_exits_on_removal`] for a command whose client is the server's command line
/// followed by the server's address, 127.0.0.1; the command's first words name it.
fn cli_pair_on_loopback_exits_on_removal(server: &str) {
    let what = server.split(" -").next().unwrap_or(server);
    cli_pair_exits_on_removal(what, server, &format!("{server} 127.0.0.1"));
}

/// `uverbs pingpong rc` server and client on rxe0: both exit naming the removal.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cli_pingpong_rc_pair_exits_when_the_device_is_removed() {
    cli_pair_on_loopback_exits_on_removal("pingpong rc -d rxe0 -g GID -n 100000000 -p 18601");
}

/// `uverbs pingpong ud -e` (completion events) server and client on rxe0: both exit naming
/// the removal.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cli_pingpong_ud_pair_with_events_exits_when_the_device_is_removed() {
    cli_pair_on_loopback_exits_on_removal(
        "pingpong ud -e -d rxe0 -g GID -s 512 -n 100000000 -p 18602",
    );
}

/// `uverbs perf write-bw` server and client on rxe0: both exit naming the removal.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cli_perf_write_bw_pair_exits_when_the_device_is_removed() {
    cli_pair_on_loopback_exits_on_removal("perf write-bw -d rxe0 -x GID -n 100000000 -p 18603");
}

/// `uverbs rping` server and client on rxe0: both exit naming the removal.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cli_rping_pair_exits_when_the_device_is_removed() {
    // rping learns of the removal twice: rdma_cm's DEVICE_REMOVAL event on its id, and the
    // context's removal flag; either way both sides drop everything and exit 1.
    cli_pair_exits_on_removal(
        "rping",
        "rping -s -a 10.99.0.1 -p 18604 -C 0",
        "rping -c -a 10.99.0.1 -p 18604 -C 0",
    );
}
