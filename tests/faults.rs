//! Faults in the soft-RoCE VM: a QP forced into the error state, the peer process killed in
//! the middle of an RC transfer, and `fork()` after registration. Every wait has a deadline;
//! a fault must end in completions with error statuses or typed errors, never a hang.
//!
//! Device removal (`rdma link delete`) is in tests/device_removal.rs (its own process) and
//! the link going down and up in tests/core_objects.rs.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, AhAttr, Cq, Gid, Mr, Pd, Qp, QpAttr, QpAttrMask, QpInitAttr, QpState, QpType,
    RecvWr, SendWr, Wc, WcStatus, WrOp,
};

const DEADLINE: Duration = Duration::from_secs(30);

fn all_access() -> AccessFlags {
    AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ
}

fn rc_qp(pd: &Pd, cq: &Cq, depth: u32) -> Qp {
    let cap = common::rc::qp_cap(depth);
    pd.create_qp(&QpInitAttr::new(QpType::Rc, cq, cq, cap))
        .expect("create_qp")
}

/// INIT -> RTR -> RTS towards `remote_qpn`, with short transport timeouts so a dead peer is
/// noticed quickly (`timeout` 12 = 16.8 ms, 2 retries), and unlimited RNR retries.
fn connect(qp: &mut Qp, remote_qpn: u32, gid_index: u8, gid: Gid) {
    let a = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        qp_access_flags: all_access(),
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .expect("to INIT");
    let a = QpAttr {
        qp_state: QpState::Rtr,
        path_mtu: uverbs::Mtu::Mtu1024,
        dest_qp_num: remote_qpn,
        rq_psn: 0,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 1,
        ah_attr: AhAttr::roce(gid, gid_index, 1),
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER,
    )
    .expect("to RTR");
    let a = QpAttr {
        qp_state: QpState::Rts,
        sq_psn: 0,
        timeout: 12,
        retry_cnt: 2,
        rnr_retry: 7,
        max_rd_atomic: 1,
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        QpAttrMask::STATE
            | QpAttrMask::SQ_PSN
            | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::MAX_QP_RD_ATOMIC,
    )
    .expect("to RTS");
}

/// Polls until `n` completions arrived (panics naming what came at the deadline).
fn wait(cq: &mut Cq, n: usize, deadline: Duration) -> Vec<Wc> {
    common::rc::wait_completions::<32>(cq, n, deadline)
}

fn assert_quiet(cq: &mut Cq) {
    std::thread::sleep(Duration::from_millis(300));
    let mut buf = [Wc::default(); 8];
    let k = cq.poll(&mut buf).expect("poll_cq");
    assert_eq!(k, 0, "completions after the flush: {:?}", &buf[..k]);
}

/// Counts completions per wr_id.
fn tally(wcs: &[Wc]) -> BTreeMap<u64, usize> {
    let mut m = BTreeMap::new();
    for w in wcs {
        *m.entry(w.wr_id).or_insert(0) += 1;
    }
    m
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn qp_forced_into_error_flushes_every_outstanding_wr_exactly_once() {
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq_a = ctx.create_cq(256, None, 0).unwrap();
    let mut cq_b = ctx.create_cq(256, None, 0).unwrap();
    let mut a = rc_qp(&pd, &cq_a, 64);
    let mut b = rc_qp(&pd, &cq_b, 64);
    let (gi, gid) = common::rc::roce_gid(&ctx);
    let (an, bn) = (a.qp_num(), b.qp_num());
    connect(&mut a, bn, gi, gid);
    connect(&mut b, an, gi, gid);
    let mr = pd.reg_mr(64 * 256, all_access()).unwrap();

    // Outstanding on `a`: 32 receives that nothing will satisfy, and 16 sends that `b` cannot
    // accept (no receive posted there; unlimited RNR retries keep them outstanding).
    let sges: Vec<_> = (0..48).map(|i| [mr.sge(i * 256, 256).unwrap()]).collect();
    let recvs: Vec<_> = (0..32)
        .map(|i| RecvWr::new(1000 + i as u64, &sges[i]))
        .collect();
    a.post_recv(&recvs).expect("post_recv");
    let sends: Vec<_> = (32..48)
        .map(|i| SendWr::send(2000 + i as u64).sge(&sges[i]).signaled())
        .collect();
    a.post_send(&sends).expect("post_send");
    std::thread::sleep(Duration::from_millis(200));
    let mut early = [Wc::default(); 4];
    assert_eq!(
        cq_a.poll(&mut early).unwrap(),
        0,
        "nothing may complete before the error state: {early:?}"
    );

    a.modify(
        &QpAttr {
            qp_state: QpState::Err,
            ..QpAttr::default()
        },
        QpAttrMask::STATE,
    )
    .expect("modify to ERR");

    let wcs = wait(&mut cq_a, 48, DEADLINE);
    assert_quiet(&mut cq_a);
    for w in &wcs {
        assert_eq!(w.status, WcStatus::WR_FLUSH_ERR, "{w:?}");
        assert_eq!(w.qp_num, an, "{w:?}");
    }
    let t = tally(&wcs);
    let want: BTreeMap<u64, usize> = (1000..1032).chain(2032..2048).map(|id| (id, 1)).collect();
    assert_eq!(t, want, "every outstanding WR flushed exactly once");
    assert_eq!(
        a.query(QpAttrMask::STATE).unwrap().attr.qp_state,
        QpState::Err
    );

    // In ERR, a new send is flushed at once, exactly once. A new receive is flushed too on
    // 6.12; rxe on 6.1 leaves a receive posted in ERR on the queue (its responder flushes
    // only the receives that were there when the QP entered ERR) until the QP is destroyed.
    a.post_recv(&[RecvWr::new(3000, &sges[0])]).unwrap();
    a.post_send(&[SendWr::send(3001).sge(&sges[1]).signaled()])
        .unwrap();
    let old_kernel = std::env::var("UVERBS_TEST_KERNEL_SERIES").as_deref() == Ok("6.1");
    let want: BTreeMap<u64, usize> = if old_kernel {
        [(3001, 1)].into_iter().collect()
    } else {
        [(3000, 1), (3001, 1)].into_iter().collect()
    };
    let w = wait(&mut cq_a, want.len(), DEADLINE);
    assert_eq!(tally(&w), want);
    assert!(
        w.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR),
        "{w:?}"
    );
    assert_quiet(&mut cq_a);
    // Destroying the QP with that receive still posted is clean.
    a.destroy()
        .expect("destroy_qp in ERR with a receive posted");
    // The peer saw nothing.
    assert_quiet(&mut cq_b);
}

/// Environment variable that turns a re-executed copy of this test binary into the peer.
const PEER_ENV: &str = "UVERBS_FAULTS_PEER";

/// The peer process: an RC QP that keeps receiving until it is killed. It prints its QP
/// number, reads ours from stdin, connects, then re-posts receives forever (bounded: it gives
/// up after 120 s so an abandoned peer cannot linger).
fn peer_main() -> ! {
    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(512, None, 0).unwrap();
    let mut qp = rc_qp(&pd, &cq, 256);
    let mr = pd.reg_mr(256 * 4096, all_access()).unwrap();
    let sges: Vec<_> = (0..256)
        .map(|i| [mr.sge(i * 4096, 4096).unwrap()])
        .collect();
    println!("PEER-QPN {}", qp.qp_num());
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let remote: u32 = line.trim().parse().expect("parent qpn");
    let (gi, gid) = common::rc::roce_gid(&ctx);
    connect(&mut qp, remote, gi, gid);
    let wrs: Vec<_> = (0..256).map(|i| RecvWr::new(i as u64, &sges[i])).collect();
    qp.post_recv(&wrs).unwrap();
    println!("PEER-READY");
    std::io::stdout().flush().unwrap();
    let start = Instant::now();
    let mut buf = [Wc::default(); 32];
    while start.elapsed() < Duration::from_secs(120) {
        let k = cq.poll(&mut buf).unwrap();
        for w in &buf[..k] {
            let i = w.wr_id as usize;
            let _ = qp.post_recv(&[RecvWr::new(i as u64, &sges[i])]);
        }
        if k == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    std::process::exit(3)
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
#[allow(unsafe_code)]
fn peer_killed_mid_rc_transfer_gives_errors_and_flushes_not_a_hang() {
    if std::env::var_os(PEER_ENV).is_some() {
        peer_main();
    }
    // The peer: this test binary again, running only this test, in the peer role.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "peer_killed_mid_rc_transfer_gives_errors_and_flushes_not_a_hang",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PEER_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the peer process");
    // Watchdog: reads from the peer below block; a peer that hangs is killed after 90 s,
    // which ends those reads with end-of-file and fails the test instead of hanging it.
    let peer_pid = child.id() as libc::pid_t;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let done = done.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(90));
            if !done.load(std::sync::atomic::Ordering::Relaxed) {
                // SAFETY: sends SIGKILL to the peer we spawned (still our unreaped child, so
                // its pid cannot have been reused).
                unsafe { libc::kill(peer_pid, libc::SIGKILL) };
            }
        });
    }
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut read_tag = |tag: &str| -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = out.read_line(&mut line).expect("read from the peer");
            assert!(n > 0, "the peer exited before printing {tag}");
            // libtest may have printed `test NAME ... ` on the same line first.
            if let Some(at) = line.find(tag) {
                return line[at + tag.len()..].trim().to_string();
            }
        }
    };
    let peer_qpn: u32 = read_tag("PEER-QPN").parse().unwrap();

    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(1024, None, 0).unwrap();
    let mut qp = rc_qp(&pd, &cq, 128);
    let (gi, gid) = common::rc::roce_gid(&ctx);
    connect(&mut qp, peer_qpn, gi, gid);
    writeln!(child.stdin.as_mut().unwrap(), "{}", qp.qp_num()).unwrap();
    read_tag("PEER-READY");

    let mr = pd.reg_mr(4096, all_access()).unwrap();
    let sg = [mr.sge(0, 4096).unwrap()];
    let mut next = 0u64;
    let mut posted = 0usize;
    let mut wcs: Vec<Wc> = Vec::new();
    let mut buf = [Wc::default(); 32];
    let mut outstanding = 0usize;
    // Phase 1: a steady transfer; 200 sends complete successfully.
    let start = Instant::now();
    while wcs.len() < 200 {
        while outstanding < 32 {
            qp.post_send(&[SendWr::send(next).sge(&sg).signaled()])
                .expect("post_send while the peer lives");
            next += 1;
            posted += 1;
            outstanding += 1;
        }
        let k = cq.poll(&mut buf).unwrap();
        outstanding -= k;
        wcs.extend_from_slice(&buf[..k]);
        assert!(
            start.elapsed() < DEADLINE,
            "transfer stalled: {} done",
            wcs.len()
        );
    }
    assert!(
        wcs.iter().all(|w| w.status == WcStatus::SUCCESS),
        "{:?}",
        wcs.iter().find(|w| w.status != WcStatus::SUCCESS)
    );

    // Phase 2: kill the peer with WRs in flight, and keep posting.
    child.kill().expect("kill the peer");
    let status = child.wait().unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(!status.success(), "the peer was killed: {status}");
    let killed_at = Instant::now();
    let mut saw_error = None;
    while killed_at.elapsed() < DEADLINE {
        if outstanding < 32 {
            // Posting never blocks or fails because the peer is gone; the device reports it.
            match qp.post_send(&[SendWr::send(next).sge(&sg).signaled()]) {
                Ok(()) => {
                    next += 1;
                    posted += 1;
                    outstanding += 1;
                }
                Err(e) => panic!("post_send after the peer died: {e}"),
            }
        }
        let k = cq.poll(&mut buf).unwrap();
        outstanding -= k;
        for w in &buf[..k] {
            if w.status != WcStatus::SUCCESS && saw_error.is_none() {
                saw_error = Some((w.status, killed_at.elapsed()));
            }
        }
        wcs.extend_from_slice(&buf[..k]);
        if saw_error.is_some() && outstanding == 0 {
            break;
        }
        if k == 0 {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
    let (first_err, after) = saw_error.expect("no error completion within the deadline");
    assert_eq!(outstanding, 0, "WRs never completed: the QP hangs");
    eprintln!("peer killed: first error {first_err:?} after {after:?}");
    // The first failure is the transport giving up (retries exhausted), or, when the dead
    // peer's QP is torn down while its port still answers (rxe loopback on 6.12), the peer's
    // NAK for a request to a QP that no longer exists; everything after it is flushed.
    assert!(
        first_err == WcStatus::RETRY_EXC_ERR || first_err == WcStatus::REM_OP_ERR,
        "first error {first_err}: want retry exceeded or remote operation error"
    );
    let first_bad = wcs
        .iter()
        .position(|w| w.status != WcStatus::SUCCESS)
        .unwrap();
    for w in &wcs[first_bad + 1..] {
        assert_eq!(w.status, WcStatus::WR_FLUSH_ERR, "{w:?}");
    }
    let t = tally(&wcs);
    assert_eq!(t.len(), posted, "every posted WR completed");
    assert!(t.values().all(|&n| n == 1), "a WR completed twice");
    assert_eq!(
        qp.query(QpAttrMask::STATE).unwrap().attr.qp_state,
        QpState::Err
    );
    assert_quiet(&mut cq);
}

/// Whether the kernel reports copy-on-fork support (`rdma sys show`: `copy-on-fork on`).
fn kernel_copy_on_fork() -> bool {
    let out = Command::new("/usr/bin/rdma")
        .args(["sys", "show"])
        .output()
        .expect("rdma sys show");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("rdma sys show: {}", text.trim());
    text.contains("copy-on-fork on")
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
#[allow(unsafe_code)]
fn fork_after_registration_cannot_corrupt_the_parent() {
    // Both VM kernels (6.1, 6.12) are newer than 5.13 and pin registered pages with
    // copy-on-fork: the child gets copies, the parent keeps the pages the device uses.
    assert!(
        kernel_copy_on_fork(),
        "the kernel does not report copy-on-fork"
    );

    let ctx = common::rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq_a = ctx.create_cq(64, None, 0).unwrap();
    let mut cq_b = ctx.create_cq(64, None, 0).unwrap();
    let mut a = rc_qp(&pd, &cq_a, 16);
    let mut b = rc_qp(&pd, &cq_b, 16);
    let (gi, gid) = common::rc::roce_gid(&ctx);
    let (an, bn) = (a.qp_num(), b.qp_num());
    connect(&mut a, bn, gi, gid);
    connect(&mut b, an, gi, gid);
    let mut src: Mr = pd.reg_mr(8192, all_access()).unwrap();
    let mut dst: Mr = pd.reg_mr(8192, all_access()).unwrap();
    src.fill(0, 8192, 0xaa).unwrap();
    dst.fill(0, 8192, 0x00).unwrap();

    // SAFETY: the child only writes its copies of the registered buffers through raw pointers
    // and leaves with `_exit`, running no destructor (dropping its copies of our objects
    // would destroy *our* kernel objects through the shared uverbs fd) and no atexit handler.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        for m in [&src, &dst] {
            let p = m.as_ptr().expect("buffer").as_ptr();
            for i in 0..m.len() {
                // SAFETY: `i < len` of the child's private copy of the mapping.
                unsafe { p.add(i).write_volatile(0x55) };
            }
        }
        // SAFETY: ends the child at once, see above.
        unsafe { libc::_exit(0) };
    }
    let mut st = 0;
    // SAFETY: waits for the child we just forked.
    let r = unsafe { libc::waitpid(pid, &mut st, 0) };
    assert_eq!(r, pid);
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "child status {st:#x}"
    );

    // Our memory is untouched by the child's writes.
    let mut v = vec![0u8; 8192];
    src.read(0, &mut v).unwrap();
    assert!(
        v.iter().all(|&x| x == 0xaa),
        "the child's writes reached the parent"
    );

    // The device still reads and writes *our* pages: an RDMA write src -> dst and a send.
    let sg = [src.sge(0, 4096).unwrap()];
    a.post_send(&[SendWr::new(
        1,
        WrOp::RdmaWrite {
            remote_addr: dst.addr(),
            rkey: dst.rkey(),
        },
    )
    .sge(&sg)
    .signaled()])
        .unwrap();
    let w = wait(&mut cq_a, 1, DEADLINE);
    assert_eq!(w[0].status, WcStatus::SUCCESS, "{w:?}");
    dst.read(0, &mut v).unwrap();
    assert!(
        v[..4096].iter().all(|&x| x == 0xaa),
        "RDMA write missed the parent's pages"
    );
    assert!(
        v[4096..].iter().all(|&x| x == 0x00),
        "the child's writes reached the parent"
    );

    src.write(0, b"after fork").unwrap();
    let rsg = [dst.sge(4096, 64).unwrap()];
    b.post_recv(&[RecvWr::new(7, &rsg)]).unwrap();
    let ssg = [src.sge(0, 10).unwrap()];
    a.post_send(&[SendWr::send(2).sge(&ssg).signaled()])
        .unwrap();
    assert_eq!(wait(&mut cq_a, 1, DEADLINE)[0].status, WcStatus::SUCCESS);
    let r = wait(&mut cq_b, 1, DEADLINE);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len),
        (7, WcStatus::SUCCESS, 10)
    );
    let mut got = [0u8; 10];
    dst.read(4096, &mut got).unwrap();
    assert_eq!(&got, b"after fork");
}
