//! `uverbs pingpong srd` without EFA hardware.
//!
//! The SRD pingpong logic (`cli/src/pingpong_srd.rs`, public uverbs API and std only)
//! runs here as server and client on two threads, against two devices of one strict EFA
//! device model fabric (`uverbs-efa-model`) that a third thread drives with
//! `EfaFabric::process` until both sides are done. The sides talk over a real TCP connection
//! on 127.0.0.1, exactly as the CLI does. Checked: every iteration completes, every received
//! message carries its sender's bytes (`chk`), each side's remote address is the other's local
//! one (Q_Key included), the model saw no driver violation, and a peer that advertises a
//! Q_Key its QP does not accept makes the run fail with the completion error, not hang.
//!
//! The refusal on a device that is not EFA is checked in the soft-RoCE VM
//! (`srd_on_rxe_is_refused_naming_the_device`): the built CLI must fail at once, naming rxe0
//! and saying SRD needs EFA.

// The root package's device-test support (rxe device, NEEDS_DEVICE, leak counts).
#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "common/proc.rs"]
mod proc;
use common::efa;

#[allow(dead_code)]
#[path = "../src/pingpong_srd.rs"]
mod srd;

// What srd.rs reaches as `crate::exchange`: the CLI's TCP address exchange.
#[allow(dead_code)]
#[path = "../src/exchange.rs"]
mod exchange;

use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proc::uverbs_bin;

use uverbs_efa_model::{EfaDevice, EfaFabric, ModelConfig};

/// Drives the model on its own thread until dropped (or a hard time limit passes, so a test
/// that fails in between cannot leave it spinning).
struct Pump {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Pump {
    fn start(fab: &EfaFabric) -> Pump {
        let stop = Arc::new(AtomicBool::new(false));
        let fab = fab.clone();
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let limit = Instant::now() + Duration::from_secs(300);
            let mut sends = 0;
            // Acquire pairs with the Release store in `finish`: nothing else is ordered by it.
            while !s.load(Ordering::Acquire) && Instant::now() < limit {
                let n = fab.process();
                sends += n;
                if n == 0 {
                    std::thread::yield_now();
                }
            }
            sends
        });
        Pump {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the pump; returns the number of send WQEs the model executed.
    fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Release);
        self.thread
            .take()
            .map_or(0, |t| t.join().expect("pump thread"))
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Side {
    result: Result<srd::SrdOutcome, String>,
    out: String,
}

fn side(
    dev: EfaDevice,
    role: srd::Role,
    conn: impl FnOnce() -> TcpStream + Send + 'static,
    opt: srd::SrdOptions,
) -> std::thread::JoinHandle<Side> {
    std::thread::spawn(move || {
        // LID and GID come from the port and GID queries, as on hardware.
        let ctx = dev.open().expect("open the model device");
        let mut stream = conn();
        let mut out = Vec::new();
        let result = srd::run(&ctx, &mut stream, role, &opt, &mut out);
        Side {
            result,
            out: String::from_utf8(out).expect("ASCII output"),
        }
    })
}

/// Server on device 0, client on device 1 of a fresh fabric; returns (server, client, sends
/// the model executed).
fn pair(seed: u64, opt: srd::SrdOptions) -> (Side, Side, usize, EfaFabric) {
    let fab = EfaFabric::new(seed);
    let (da, db) = (
        fab.add_device(ModelConfig::default()),
        fab.add_device(ModelConfig::default()),
    );
    let pump = Pump::start(&fab);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = side(
        da,
        srd::Role::Server,
        move || listener.accept().expect("accept").0,
        opt.clone(),
    );
    let client = side(
        db,
        srd::Role::Client,
        move || TcpStream::connect(addr).expect("connect"),
        opt,
    );
    let (s, c) = (
        server.join().expect("server thread"),
        client.join().expect("client thread"),
    );
    let sends = pump.finish();
    (s, c, sends, fab)
}

/// The text after `which` on the line that starts with it.
fn address<'a>(out: &'a str, which: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(which))
        .unwrap_or_else(|| panic!("no {which:?} line in {out:?}"))
        .trim()
}

#[test]
fn srd_pingpong_runs_between_two_model_devices() {
    const ITERS: u32 = 300;
    const SIZE: usize = 1500;
    let opt = srd::SrdOptions {
        size: SIZE,
        rx_depth: 64,
        iters: ITERS,
        chk: true,
        idle_limit: Duration::from_secs(20),
        ..Default::default()
    };
    let (s, c, sends, fab) = pair(0xefa5, opt);
    let so = s
        .result
        .unwrap_or_else(|e| panic!("server: {e}\n{}", s.out));
    let co = c
        .result
        .unwrap_or_else(|e| panic!("client: {e}\n{}", c.out));
    for (o, who) in [(&so, "server"), (&co, "client")] {
        assert_eq!(o.iters, ITERS, "{who}");
        assert_eq!(o.checked, ITERS, "{who}: every received message checked");
        assert_eq!(o.bytes, SIZE as u64 * u64::from(ITERS) * 2, "{who}");
        let [bytes, iters] = o.summary();
        assert!(
            bytes.starts_with(&format!("{} bytes in ", o.bytes)) && bytes.ends_with(" Mbit/sec"),
            "{bytes}"
        );
        assert!(
            iters.starts_with(&format!("{ITERS} iters in ")) && iters.ends_with(" usec/iter"),
            "{iters}"
        );
    }
    // Each side sent exactly ITERS messages through the model.
    assert_eq!(sends, 2 * ITERS as usize);
    // The exchange was parsed right: each side's remote line is the other's local line.
    assert_eq!(
        address(&s.out, "remote address:"),
        address(&c.out, "local address:")
    );
    assert_eq!(
        address(&c.out, "remote address:"),
        address(&s.out, "local address:")
    );
    // LID and GID as the port and GID queries of each device answer them.
    for out in [&s.out, &c.out] {
        assert!(
            address(out, "local address:").starts_with("LID 0x0000,"),
            "{out}"
        );
    }
    assert!(
        address(&s.out, "local address:").contains("GID fe80::1"),
        "{}",
        s.out
    );
    assert!(
        address(&c.out, "local address:").contains("GID fe80::2"),
        "{}",
        c.out
    );
    assert_ne!(
        address(&s.out, "local address:"),
        address(&c.out, "local address:")
    );
    fab.assert_no_violations();
}

#[test]
fn srd_pingpong_without_chk_still_counts_every_exchange() {
    let opt = srd::SrdOptions {
        size: 64,
        rx_depth: 1,
        iters: 50,
        idle_limit: Duration::from_secs(20),
        ..Default::default()
    };
    let (s, c, sends, fab) = pair(7, opt);
    let so = s
        .result
        .unwrap_or_else(|e| panic!("server: {e}\n{}", s.out));
    let co = c
        .result
        .unwrap_or_else(|e| panic!("client: {e}\n{}", c.out));
    assert_eq!((so.iters, co.iters, so.checked, co.checked), (50, 50, 0, 0));
    assert_eq!(sends, 100);
    fab.assert_no_violations();
}

/// A "server" that brings up its own SRD QP but tells the client a Q_Key one off: the
/// client's first send must complete in error (the model answers like the device, bad
/// destination), and the client must report it rather than wait.
#[test]
fn srd_pingpong_uses_the_exchanged_qkey() {
    use uverbs::{CqInitAttr, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr, QpCap, QpInitAttr, QpType};
    use uverbs::{QpAttrMask, QpState, SendOpsFlags};
    let fab = EfaFabric::new(3);
    let (da, db) = (
        fab.add_device(ModelConfig::default()),
        fab.add_device(ModelConfig::default()),
    );
    let pump = Pump::start(&fab);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let ctx = da.open().unwrap();
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 8,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SendOpsFlags::empty(),
                ..QpInitAttr::new(
                    QpType::Srd,
                    &cq,
                    &cq,
                    QpCap {
                        max_send_wr: 1,
                        max_recv_wr: 4,
                        max_send_sge: 1,
                        max_recv_sge: 1,
                        max_inline_data: 0,
                    },
                )
            },
            &EfaQpInitAttr {
                flags: EfaQpFlags::empty(),
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .unwrap();
    efa::to_rts(&mut qp, 0x1234).unwrap();
    assert_eq!(
        qp.query(QpAttrMask::STATE).unwrap().attr.qp_state,
        QpState::Rts
    );
    let client = side(
        db,
        srd::Role::Client,
        move || TcpStream::connect(addr).expect("connect"),
        srd::SrdOptions {
            size: 64,
            rx_depth: 4,
            iters: 10,
            idle_limit: Duration::from_secs(20),
            ..Default::default()
        },
    );
    let (mut conn, _) = listener.accept().unwrap();
    use std::io::{Read, Write};
    let mut msg = [0u8; srd::SRD_MSG_LEN];
    conn.read_exact(&mut msg).unwrap();
    let theirs = srd::SrdDest::from_wire(&msg).unwrap();
    assert!(theirs.qkey != 0 && theirs.qkey < 1 << 31, "{theirs:?}");
    let lie = srd::SrdDest {
        lid: 0,
        qpn: qp.qp_num(),
        psn: 0,
        qkey: 0x1235,
        gid: da.gid(),
    };
    conn.write_all(&lie.to_wire()).unwrap();
    let mut done = [0u8; 5];
    conn.read_exact(&mut done).unwrap();
    assert_eq!(&done, b"done\0");
    let c = client.join().expect("client thread");
    pump.finish();
    let err = match c.result {
        Ok(o) => panic!("a wrong Q_Key went unnoticed: {o:?}"),
        Err(e) => e,
    };
    assert!(err.starts_with("Failed status"), "{err}");
    assert!(err.contains("wr_id 18446744073709551615"), "{err}");
    fab.assert_no_violations();
}

/// The address each side tells the other is what the port and GID queries answer: LID 0 and
/// the device's GID at the chosen index; an index past the EFA table (one entry) is refused
/// with the query's error before anything is sent. The size check reads `max_msg_sz` from
/// the port query (the device MTU) and refuses a port the device lacks.
#[test]
fn srd_pingpong_reads_its_address_from_the_port_and_gid_queries() {
    let fab = EfaFabric::new(11);
    let dev = fab.add_device(ModelConfig {
        mtu: 8928,
        ..Default::default()
    });
    let ctx = dev.open().unwrap();
    assert_eq!(ctx.query_gid(1, 0).unwrap().raw, dev.gid());
    srd::check_size(&ctx, 1, 8928).unwrap();
    let e = srd::check_size(&ctx, 1, 8929).unwrap_err();
    assert!(e.contains("carries 1 to 8928 bytes (max_msg_sz)"), "{e}");
    let e = srd::check_size(&ctx, 2, 64).unwrap_err();
    assert!(
        e.contains("Unable to query port info for port 2") && e.contains("EINVAL"),
        "{e}"
    );
    let opt = srd::SrdOptions {
        gid_idx: 1,
        ..Default::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    let mut out = Vec::new();
    let err = srd::run(&ctx, &mut stream, srd::Role::Client, &opt, &mut out)
        .expect_err("a GID index past the table must be refused");
    assert!(err.contains("can't read sgid of index 1"), "{err}");
    assert!(err.contains("EINVAL"), "the kernel's errno: {err}");
    // Nothing went to the peer.
    drop(stream);
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut peer, &mut got).unwrap();
    assert!(got.is_empty(), "{got:?}");
    fab.assert_no_violations();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn srd_on_rxe_is_refused_naming_the_device() {
    let dev = common::rxe_device();
    let name = dev.name().to_string();
    let start = Instant::now();
    // As a server: without the check it would wait for a client forever; the run is bounded.
    let mut child = Command::new(uverbs_bin())
        .args(["pingpong", "srd", "-d", &name, "-p", "18790"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start uverbs");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("uverbs pingpong srd on {name} did not fail at once (killed after 30 s)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        status.code(),
        Some(1),
        "stdout {stdout:?} stderr {stderr:?}"
    );
    assert!(stdout.is_empty(), "{stdout:?}");
    assert!(
        stderr.starts_with(&format!("uverbs: error: device {name} (driver rxe)")),
        "{stderr:?}"
    );
    assert!(stderr.contains("SRD needs an EFA device"), "{stderr:?}");

    // The pingpong function refuses an opened rxe context the same way, before it creates
    // anything or touches the (connected) stream.
    let ctx = common::rxe_context();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let mut out = Vec::new();
    let e = srd::run(
        &ctx,
        &mut stream,
        srd::Role::Client,
        &srd::SrdOptions::default(),
        &mut out,
    )
    .unwrap_err();
    assert!(
        e.starts_with(&format!("device {name} (driver rxe)"))
            && e.contains("SRD needs an EFA device"),
        "{e}"
    );
    assert!(out.is_empty());
}
