//! The data path allocates nothing: a counting global allocator watches `post_send`,
//! `post_recv` and `poll` on rxe (in the soft-RoCE VM) and on EFA (against the device model,
//! anywhere).
//!
//! The counter is per thread and only counts while a test has switched it on around the data
//! path calls, so set-up, the device model's own work and other test threads do not count.

mod common;
use common::efa;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use uverbs::{
    AccessFlags, Cq, CqInitAttr, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr, EfaWcFlags, QpCap,
    QpInitAttr, QpType, RecvWr, SendOpsFlags, SendWr, Sge, UdDest, Wc, WrOp,
};
use uverbs_efa_model::{EfaFabric, ModelConfig};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // try_with: the thread-local may be gone while a thread exits.
    let _ = COUNTING.try_with(|c| {
        if c.get() {
            let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        }
    });
}

// SAFETY: every method forwards to the system allocator unchanged; counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded with the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: ptr was allocated by System (every allocation goes there) with layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr was allocated by System with layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with counting on; returns its result and the allocations it made.
fn counted<T>(f: impl FnOnce() -> T) -> (T, u64) {
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, ALLOCS.with(|a| a.get()))
}

/// Drains `cq` through `start_poll`/`next_poll`, reading every field; how many it took.
fn poll_ex(cq: &mut Cq) -> uverbs::Result<usize> {
    let mut n = 0;
    if let Some(mut g) = cq.start_poll()? {
        loop {
            assert_eq!(g.status(), uverbs::WcStatus::SUCCESS, "{g:?}");
            std::hint::black_box((g.wr_id(), g.read_opcode(), g.read_byte_len()));
            std::hint::black_box((g.read_wc_flags(), g.read_imm_data(), g.read_qp_num()));
            n += 1;
            if !g.next_poll()? {
                break;
            }
        }
    }
    Ok(n)
}

#[test]
fn counting_allocator_sees_an_allocation() {
    let (v, n) = counted(|| vec![1u8; 100]);
    assert_eq!(v.len(), 100);
    assert!(n >= 1, "the counter must see a Vec allocation, saw {n}");
    let (_, n) = counted(|| 1 + 1);
    assert_eq!(n, 0);
}

const QKEY: u32 = 0x1234_5678;

fn efa_cq(ctx: &uverbs::Context) -> Cq {
    ctx.efadv_create_cq(
        &CqInitAttr {
            cqe: 256,
            ..Default::default()
        },
        &EfaCqInitAttr {
            wc_flags: EfaWcFlags::empty(),
            ..Default::default()
        },
    )
    .expect("efadv_create_cq")
}

/// On the EFA model: `post_recv`, `post_send` and the polls (`poll` and `poll_efa`, many
/// completions a call and one, and an empty poll) make no heap allocation over 20 rounds
/// that wrap every ring.
#[test]
fn post_send_post_recv_and_poll_allocate_nothing_on_the_efa_model() {
    /// Eight polls of one completion each: the completions they took.
    fn one_by_one(mut poll: impl FnMut() -> uverbs::Result<usize>) -> uverbs::Result<usize> {
        let mut n = 0;
        for _ in 0..8 {
            n += poll()?;
        }
        Ok(n)
    }

    let fab = EfaFabric::new(1);
    let da = fab.add_device(ModelConfig::default());
    let db = fab.add_device(ModelConfig::default());
    let (ca, cb) = (da.open().unwrap(), db.open().unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (mut sa, ra) = (efa_cq(&ca), efa_cq(&ca));
    let (sb, mut rb) = (efa_cq(&cb), efa_cq(&cb));
    let cap = QpCap {
        max_send_wr: 64,
        max_recv_wr: 64,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qp = |pd: &uverbs::Pd, s: &Cq, r: &Cq| {
        let mut q = pd
            .efadv_create_qp_ex(
                &QpInitAttr {
                    sq_sig_all: true,
                    send_ops_flags: SendOpsFlags::SEND,
                    ..QpInitAttr::new(QpType::Srd, s, r, cap)
                },
                &EfaQpInitAttr {
                    flags: EfaQpFlags::empty(),
                    sl: 0,
                    wr_flags: Default::default(),
                },
            )
            .expect("efadv_create_qp");
        efa::to_rts(&mut q, QKEY).expect("modify to RTS");
        q
    };
    let mut qa = qp(&pa, &sa, &ra);
    let mut qb = qp(&pb, &sb, &rb);
    let ma = pa.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let mb = pb.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let ah = pa.create_ah(&efa::ah_attr(db.gid())).unwrap();
    let dest = UdDest::new(&ah, qb.qp_num(), QKEY);
    let ssge: [Sge; 1] = [ma.sge(0, 64).unwrap()];
    let rsge: [Sge; 1] = [mb.sge(0, 64).unwrap()];
    let sends = [SendWr::send(7)
        .ud(dest.ah(), dest.remote_qpn, dest.remote_qkey)
        .sge(&ssge)
        .signaled(); 8];
    let recvs = [RecvWr {
        wr_id: 9,
        sg_list: &rsge,
    }; 8];
    let mut wcs = [Wc::default(); 8];
    let mut efa_wcs = [uverbs::EfaWc::default(); 8];
    // Several rounds, so the rings wrap (64 deep, 8 per round, 20 rounds); odd rounds poll
    // the receives through the EFA view (`poll_efa`, with the efadv extras); rounds 2 and 3
    // of every 4 poll one completion per call (the one-CQE path: the sends take its inline
    // fast path, the receives its out-of-line rest).
    let mut total = (0u64, 0u64, 0u64, 0u64);
    for round in 0..20 {
        let (r, n) = counted(|| qb.post_recv(&recvs));
        r.unwrap_or_else(|e| panic!("round {round}: post_recv: {e}"));
        total.0 += n;
        let (r, n) = counted(|| qa.post_send(&sends));
        r.unwrap_or_else(|e| panic!("round {round}: post_send: {e}"));
        total.1 += n;
        assert_eq!(fab.process(), 8, "round {round}: the model moved 8 sends");
        let one = round % 4 >= 2;
        let ((s, r), n) = counted(|| {
            let s = match one {
                false => sa.poll(&mut wcs),
                true => one_by_one(|| sa.poll(&mut wcs[..1])),
            };
            let r = match (one, round % 2 == 0) {
                (false, true) => rb.poll(&mut wcs),
                (false, false) => rb.poll_efa(&mut efa_wcs),
                (true, true) => one_by_one(|| rb.poll(&mut wcs[..1])),
                (true, false) => one_by_one(|| rb.poll_efa(&mut efa_wcs[..1])),
            };
            (s, r)
        });
        assert_eq!(s.unwrap(), 8, "round {round}: 8 send completions");
        assert_eq!(r.unwrap(), 8, "round {round}: 8 receive completions");
        total.2 += n;
        let (r, n) = counted(|| sa.poll(&mut wcs));
        assert_eq!(r.unwrap(), 0, "round {round}: the CQ is empty again");
        total.3 += n;
    }
    assert_eq!(
        total,
        (0, 0, 0, 0),
        "allocations in (post_recv, post_send, poll, empty poll)"
    );
    fab.assert_no_violations();
}

/// On rxe: `post_recv`, `post_send` (sends and RDMA writes), `poll` (many completions a call
/// and one) and the extended poll make no heap allocation over 20 rounds.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn post_send_post_recv_and_poll_allocate_nothing() {
    let ctx = uverbs::Context::open(&common::rxe_device()).expect("open rxe");
    let pd = ctx.alloc_pd().unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let mr = pd.reg_mr(4096, access).unwrap();
    let mut scq = ctx.create_cq(256, None, 0).unwrap();
    let mut rcq = ctx.create_cq(256, None, 0).unwrap();
    let cap = common::rc::qp_cap(64);
    let (gid_index, gid) = common::rc::roce_gid(&ctx);
    let mut a = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &scq, &rcq, cap))
        .unwrap();
    let mut b = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &scq, &rcq, cap))
        .unwrap();
    common::pair::connect(&mut a, &mut b, gid_index, gid);
    let sge = [mr.sge(0, 64).unwrap()];
    let rsge = [mr.sge(1024, 64).unwrap()];
    let recvs = [RecvWr::new(2, &rsge); 8];
    let write = SendWr::new(
        1,
        WrOp::RdmaWrite {
            remote_addr: mr.addr() + 2048,
            rkey: mr.rkey(),
        },
    )
    .sge(&sge)
    .signaled();
    let sends = [SendWr::send(3).sge(&sge).signaled(); 8];
    let writes = [write; 8];
    let mut wcs = [Wc::default(); 16];
    let mut total = (0u64, 0u64, 0u64);
    for round in 0..20 {
        let (r, n) = counted(|| b.post_recv(&recvs));
        r.unwrap_or_else(|e| panic!("round {round}: post_recv: {e}"));
        total.0 += n;
        let (r, n) = counted(|| (a.post_send(&sends), a.post_send(&writes)));
        r.0.unwrap_or_else(|e| panic!("round {round}: post_send: {e}"));
        r.1.unwrap_or_else(|e| panic!("round {round}: post_send: {e}"));
        total.1 += n;
        // 16 send-side and 8 receive completions; poll (counted) until they are all in. On odd
        // rounds the receive CQ is drained through the extended poll instead; every third
        // round the send CQ one completion per call (`Cq::poll`'s one-CQE path).
        let mut got = (0usize, 0usize);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while got != (16, 8) {
            let (r, n) = counted(|| {
                let recv = if round % 2 == 1 {
                    poll_ex(&mut rcq)
                } else {
                    rcq.poll(&mut wcs[..8])
                };
                let send = if round % 3 == 2 {
                    scq.poll(&mut wcs[..1])
                } else {
                    scq.poll(&mut wcs)
                };
                (send, recv)
            });
            total.2 += n;
            let (s, rr) = (r.0.unwrap(), r.1.unwrap());
            got.0 += s;
            got.1 += rr;
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: completions {got:?} of (16, 8) after 30 s"
            );
        }
    }
    assert_eq!(
        total,
        (0, 0, 0),
        "allocations in (post_recv, post_send, poll and extended poll)"
    );
    a.destroy().unwrap();
    b.destroy().unwrap();
    scq.destroy().unwrap();
    rcq.destroy().unwrap();
    mr.dereg().unwrap();
}
