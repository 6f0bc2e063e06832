//! The model sees every SQ doorbell store (the trap, see the crate doc) and holds each one to
//! the device's rules: at most `max_tx_batch` 64-byte lines of WQEs written between two
//! doorbells, each doorbell a step forward over WQEs already in the LLQ. The driver's own
//! posting passes; a raw driver that breaks a rule is reported.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

#[path = "../../../tests/common/efa.rs"]
mod efa;

use uverbs::{
    AccessFlags, Cq, CqInitAttr, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr, Mr, Pd, Qp, QpCap,
    QpInitAttr, QpType, RecvWr, SendFlags, SendWr, Sge, UdDest, Wc, WcStatus,
};
use uverbs_efa_model::{doorbell_trap_stats, send_wqe, EfaDevice, EfaFabric, ModelConfig};

const QKEY: u32 = 7;

struct Host {
    dev: EfaDevice,
    pd: Pd,
    cq: Cq,
    qp: Qp,
    mr: Mr,
}

fn host(fab: &EfaFabric, cfg: ModelConfig, cap: QpCap, flags: EfaQpFlags) -> Host {
    let dev = fab.add_device(cfg);
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 64,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    let mut qp = new_qp(&pd, &cq, cap, flags);
    efa::to_rts(&mut qp, QKEY).unwrap();
    let mr = pd
        .reg_mr(
            1 << 16,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        )
        .unwrap();
    Host {
        dev,
        pd,
        cq,
        qp,
        mr,
    }
}

fn new_qp(pd: &Pd, cq: &Cq, cap: QpCap, flags: EfaQpFlags) -> Qp {
    pd.efadv_create_qp_ex(
        &QpInitAttr {
            sq_sig_all: true,
            send_ops_flags: uverbs::SendOpsFlags::SEND | uverbs::SendOpsFlags::RDMA_WRITE,
            ..QpInitAttr::new(QpType::Srd, cq, cq, cap)
        },
        &EfaQpInitAttr {
            flags,
            sl: 0,
            wr_flags: Default::default(),
        },
    )
    .unwrap()
}

fn cap(wr: u32, inline: u32) -> QpCap {
    QpCap {
        max_send_wr: wr,
        max_recv_wr: wr,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: inline,
    }
}

fn poll(cq: &mut Cq, n: usize) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut buf = [Wc::default(); 16];
    for _ in 0..1000 {
        let k = cq.poll(&mut buf).unwrap();
        out.extend_from_slice(&buf[..k]);
        if out.len() >= n {
            break;
        }
    }
    assert_eq!(out.len(), n, "completions: {out:?}");
    out
}

fn sges(mr: &Mr, n: usize) -> Vec<[Sge; 1]> {
    (0..n).map(|i| [mr.sge(64 * i, 64).unwrap()]).collect()
}

/// A 32-WR list with `max_tx_batch` 8 (64-byte WQEs) needs four doorbells; two QPs on one
/// device and one QP with 128-byte WQEs (two lines each: one WQE per doorbell with
/// `max_tx_batch` 3) post through the library; the model sees every store and finds every
/// step within the limit.
#[test]
fn library_lists_ring_every_max_tx_batch_and_every_store_is_seen() {
    let (emulated0, _) = doorbell_trap_stats();
    let fab = EfaFabric::new(5);
    let cfg = ModelConfig::default();
    assert_eq!(cfg.max_tx_batch, 8);
    let mut a = host(&fab, cfg, cap(64, 0), EfaQpFlags::empty());
    let mut a2 = new_qp(&a.pd, &a.cq, cap(64, 0), EfaQpFlags::empty());
    efa::to_rts(&mut a2, QKEY).unwrap();
    let mut b = host(&fab, cfg, cap(128, 0), EfaQpFlags::empty());
    let rs = sges(&b.mr, 64);
    let recvs: Vec<RecvWr<'_>> = rs
        .iter()
        .enumerate()
        .map(|(i, r)| RecvWr {
            wr_id: i as u64,
            sg_list: r,
        })
        .collect();
    b.qp.post_recv(&recvs).unwrap();
    let ah = a.pd.create_ah(&efa::ah_attr(b.dev.gid())).unwrap();
    let dest = UdDest::new(&ah, b.qp.qp_num(), QKEY);
    let ss = sges(&a.mr, 32);
    let wrs: Vec<SendWr<'_>> = ss
        .iter()
        .enumerate()
        .map(|(i, s)| {
            SendWr::send(i as u64)
                .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
                .sge(s)
        })
        .collect();
    a.qp.post_send(&wrs).unwrap();
    a2.post_send(&wrs).unwrap();
    assert_eq!(fab.process(), 64);
    let want: Vec<u32> = vec![8, 16, 24, 32];
    assert_eq!(fab.sq_doorbells(&a.dev, a.qp.qp_num()), want);
    assert_eq!(fab.sq_doorbells(&a.dev, a2.qp_num()), want);
    assert!(poll(&mut a.cq, 64)
        .iter()
        .all(|w| w.status == WcStatus::SUCCESS));
    assert_eq!(poll(&mut b.cq, 64).len(), 64);
    // A second list continues the counter: 40, 48 (and a short last batch, 50).
    a.qp.post_send(&wrs[..18]).unwrap();
    assert_eq!(fab.process(), 18);
    assert_eq!(
        fab.sq_doorbells(&a.dev, a.qp.qp_num()),
        [8, 16, 24, 32, 40, 48, 50]
    );
    fab.assert_no_violations();

    // 128-byte WQEs are two lines: max_tx_batch 3 allows one per doorbell.
    let fab = EfaFabric::new(6);
    let cfg = ModelConfig {
        max_tx_batch: 3,
        inline_buf_size_ex: 80,
        ..Default::default()
    };
    let mut c = host(&fab, cfg, cap(16, 64), EfaQpFlags::empty());
    let text = [b'y'; 48];
    let self_ah = c.pd.create_ah(&efa::ah_attr(c.dev.gid())).unwrap();
    let me = UdDest::new(&self_ah, c.qp.qp_num(), QKEY);
    let mut s = c.qp.wr_start().unwrap();
    for i in 0..5 {
        s.send(i, SendFlags::SIGNALED)
            .set_inline_data(&text)
            .set_ud_addr(me.ah(), me.remote_qpn, me.remote_qkey);
    }
    s.complete().unwrap();
    assert_eq!(fab.process(), 5);
    assert_eq!(fab.sq_doorbells(&c.dev, c.qp.qp_num()), [1, 2, 3, 4, 5]);
    assert_eq!(poll(&mut c.cq, 5).len(), 5);
    fab.assert_no_violations();
    // The library's doorbell write is a plain `mov`: the trap emulated each of the 16 (other
    // tests in this process may add theirs).
    let (emulated, _) = doorbell_trap_stats();
    assert!(emulated - emulated0 >= 16, "{emulated0} -> {emulated}");
}

/// A QP driven through the model's raw interface: depth 8, `max_tx_batch` 2.
struct Raw {
    fab: EfaFabric,
    h: Host,
    ahn: u16,
    _ah: uverbs::Ah,
}

fn raw() -> Raw {
    let fab = EfaFabric::new(1);
    let cfg = ModelConfig {
        max_tx_batch: 2,
        ..Default::default()
    };
    let h = host(&fab, cfg, cap(8, 0), EfaQpFlags::empty());
    let ah = h.pd.create_ah(&efa::ah_attr(h.dev.gid())).unwrap();
    Raw {
        fab,
        ahn: ah.efadv_query_ah().unwrap(),
        _ah: ah,
        h,
    }
}

impl Raw {
    /// Writes well-formed SENDs at producer positions `from..to` (lap 0: phase 0).
    fn write(&self, from: u16, to: u16) {
        for pos in from..to {
            let w = send_wqe(
                pos,
                (self.ahn, self.h.qp.qp_num() as u16, QKEY),
                (self.h.mr.addr(), 64, self.h.mr.lkey()),
                false,
            );
            self.fab.raw_write(&self.h.dev, self.h.qp.qp_num(), pos, &w);
        }
    }
    fn ring(&self, v: u32) {
        self.fab.raw_ring(&self.h.dev, self.h.qp.qp_num(), v);
    }
    fn run(&self) -> Vec<String> {
        self.fab.process();
        self.fab.take_violations()
    }
    fn doorbells(&self) -> Vec<u32> {
        self.fab.sq_doorbells(&self.h.dev, self.h.qp.qp_num())
    }
}

fn expect(v: &[String], needle: &str) {
    assert!(
        v.iter().any(|s| s.contains(needle)),
        "expected a violation containing {needle:?}, got {v:?}"
    );
}

#[test]
fn more_wqes_than_max_tx_batch_before_one_doorbell_is_a_violation() {
    let r = raw();
    r.write(0, 3);
    r.ring(3);
    let v = r.run();
    expect(
        &v,
        "3 WQEs (3 64-byte lines) written to the LLQ between SQ doorbells 0 and 3, more than \
         max_tx_batch 2",
    );
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(r.doorbells(), [3]);
}

#[test]
fn doorbells_within_max_tx_batch_are_accepted() {
    let (_, stepped0) = doorbell_trap_stats();
    let r = raw();
    r.write(0, 2);
    r.ring(2);
    r.write(2, 4);
    r.ring(4);
    r.write(4, 5);
    r.ring(5);
    assert_eq!(r.run(), Vec::<String>::new());
    assert_eq!(r.doorbells(), [2, 4, 5]);
    let produced: u32 = r.fab.cq_produced(&r.h.dev, r.h.cq.handle()).iter().sum();
    assert_eq!(
        produced, 5,
        "five send completions (RNR: no receive posted)"
    );
    r.fab.assert_no_violations();
    // raw_ring's `xchg` is single-stepped, not emulated.
    let (_, stepped) = doorbell_trap_stats();
    assert!(stepped - stepped0 >= 3, "{stepped0} -> {stepped}");
}

/// Each doorbell moves by 2, but four WQEs went into the LLQ before the first one: the
/// device's batch buffer would have overflowed.
#[test]
fn wqes_written_ahead_of_the_doorbell_count_against_the_batch() {
    let r = raw();
    r.write(0, 4);
    r.ring(2);
    r.ring(4);
    let v = r.run();
    expect(
        &v,
        "4 WQEs (4 64-byte lines) written to the LLQ between SQ doorbells 0 and 2",
    );
    assert_eq!(v.len(), 1, "the second doorbell adds nothing new: {v:?}");
    assert_eq!(r.doorbells(), [2, 4]);
}

#[test]
fn doorbell_over_a_wqe_not_yet_written_is_a_violation() {
    let r = raw();
    r.write(0, 1);
    r.ring(2);
    expect(
        &r.run(),
        "covers 2 WQEs, but only 1 of them were in the LLQ when it was rung",
    );
}

#[test]
fn doorbell_rung_again_with_the_same_value_is_a_violation() {
    let r = raw();
    r.write(0, 1);
    r.ring(1);
    r.ring(1);
    let v = r.run();
    expect(&v, "SQ doorbell rung again with 1, no new WQE");
    assert_eq!(r.doorbells(), [1, 1]);
}

#[test]
fn doorbell_going_backwards_is_a_violation() {
    let r = raw();
    r.write(0, 2);
    r.ring(2);
    assert_eq!(r.run(), Vec::<String>::new());
    r.ring(1);
    expect(&r.run(), "more than the depth");
}

/// The SIGSEGV handler only takes faults on trapped doorbell pages: any other write to
/// read-only memory still kills the process (checked in a child: this test re-runs itself).
#[test]
fn a_fault_elsewhere_still_kills_the_process() {
    use std::os::unix::process::ExitStatusExt;
    const CHILD: &str = "UVERBS_EFA_MODEL_TRAP_CHILD";
    if std::env::var_os(CHILD).is_some() {
        // The trap is installed once a doorbell is mapped.
        let r = raw();
        r.write(0, 1);
        r.ring(1);
        assert_eq!(r.run(), Vec::<String>::new());
        // SAFETY: a new private anonymous mapping aliases nothing; it is never unmapped (the
        // child dies on the write below).
        let page = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                4096,
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap()
        .cast::<u8>();
        eprintln!("child: writing to a read-only page that is not a doorbell");
        // SAFETY: the page is mapped (read-only): this store faults before it writes anything,
        // and the fault is meant to kill this child process.
        unsafe { page.write_volatile(1) };
        eprintln!("child: survived the write");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_fault_elsewhere_still_kills_the_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("child: writing"), "the child ran: {err}");
    assert!(!err.contains("survived"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "killed by SIGSEGV: {:?}, stderr {err}",
        out.status
    );
}

/// With the trap off (for benchmarks) the model still runs the driver's lists, from the
/// doorbell word, but sees no individual store.
#[test]
fn with_the_trap_off_lists_still_run_but_no_store_is_seen() {
    let fab = EfaFabric::new(9);
    fab.set_doorbell_trap(false);
    let mut a = host(
        &fab,
        ModelConfig::default(),
        cap(64, 0),
        EfaQpFlags::empty(),
    );
    let ah = a.pd.create_ah(&efa::ah_attr(a.dev.gid())).unwrap();
    let dest = UdDest::new(&ah, a.qp.qp_num(), QKEY);
    let ss = sges(&a.mr, 32);
    let wrs: Vec<SendWr<'_>> = ss
        .iter()
        .enumerate()
        .map(|(i, s)| {
            SendWr::send(i as u64)
                .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
                .sge(s)
        })
        .collect();
    a.qp.post_send(&wrs).unwrap();
    assert_eq!(fab.process(), 32);
    assert_eq!(poll(&mut a.cq, 32).len(), 32);
    assert_eq!(fab.sq_doorbells(&a.dev, a.qp.qp_num()), Vec::<u32>::new());
    fab.assert_no_violations();
}
