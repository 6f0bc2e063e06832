//! Criterion benchmarks of the EFA data path against the device model: post_send of one WR,
//! of a 32-WR list, post_recv, and poll with completions ready. The model's own work
//! (`EfaFabric::process`) runs outside the timed part (outside the `iter_custom` timings).

#[path = "common.rs"]
mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use uverbs::Wc;

fn efa(c: &mut Criterion) {
    let mut g = c.benchmark_group("efa");
    let (mut p, w) = common::Pair::new(4096);
    let mut wcs = [Wc::default(); 32];

    g.throughput(Throughput::Elements(32));
    // post 32 (one per call), then drain outside the timing.
    g.bench_function("post_send x32 (1 WR per call)", |b| {
        b.iter_custom(|iters| {
            let wr = [w.send()];
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                let t = std::time::Instant::now();
                for _ in 0..32 {
                    p.a.qp.post_send(&wr).unwrap();
                }
                total += t.elapsed();
                drain(&mut p, &w, &mut wcs);
            }
            total
        })
    });
    g.bench_function("post_send 32-WR list", |b| {
        b.iter_custom(|iters| {
            let wrs = [w.send(); 32];
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                let t = std::time::Instant::now();
                p.a.qp.post_send(&wrs).unwrap();
                total += t.elapsed();
                drain(&mut p, &w, &mut wcs);
            }
            total
        })
    });
    g.bench_function("poll 32 ready CQEs", |b| {
        b.iter_custom(|iters| {
            let wrs = [w.send(); 32];
            let recvs = [w.recv(); 32];
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                p.b.qp.post_recv(&recvs).unwrap();
                p.a.qp.post_send(&wrs).unwrap();
                p.fab.process();
                let t = std::time::Instant::now();
                let mut got = 0;
                while got < 32 {
                    got += p.a.scq.poll(&mut wcs[got..]).unwrap();
                }
                total += t.elapsed();
                while p.b.rcq.poll(&mut wcs).unwrap() > 0 {}
            }
            total
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("poll empty CQ", |b| {
        b.iter(|| p.a.scq.poll(std::hint::black_box(&mut wcs[..1])).unwrap())
    });
    g.finish();
}

/// Lets the model complete what was posted (receives first) and polls both CQs empty.
fn drain(p: &mut common::Pair, w: &common::Wrs, wcs: &mut [Wc; 32]) {
    let recvs = [w.recv(); 32];
    p.b.qp.post_recv(&recvs).unwrap();
    p.fab.process();
    while p.a.scq.poll(wcs).unwrap() > 0 {}
    while p.b.rcq.poll(wcs).unwrap() > 0 {}
}

criterion_group!(benches, efa);
criterion_main!(benches);
