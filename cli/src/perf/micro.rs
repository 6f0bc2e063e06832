/// `uverbs perf micro`: the userspace cost of the data path, on one QP connected to a second
/// QP of the same device. Prints one `micro <name> <ns>` line per measurement (or JSON), the
/// same lines `xtask/bench-c/micro.c` prints for libibverbs.
use std::process::ExitCode;
use std::time::{Duration, Instant};

use uverbs::{Context, Cq, Qp, QpCap, QpInitAttr, QpType, SendWr, Wc, WcStatus, WrOp};

use super::fail;
use super::options::Settings;
use super::poll::poll_one;
use super::side::{close, connect_qp, local_dest, setup, Side};
use crate::Failure;

/// Work requests in the "many CQEs ready" poll measurement.
const READY: u32 = 1024;
/// The post measurements: WRs per round (the last one signaled), and the list length.
const ROUND: u32 = 64;
const LIST: usize = 32;
/// The empty-poll measurement is split into this many blocks; the fastest one counts.
const BLOCKS: u32 = 20;

/// `n` polls of an empty CQ, in ns per poll. One copy per `K`, each its own function at its
/// own code address (`K` makes their code differ, so they are not merged): under TCG a
/// loop whose code straddles a 4 KiB page boundary cannot chain its translation blocks
/// directly and runs 2-3x slower (measured: the same loop 14-20 ns in one build, 35-60 ns
/// in the next, whose code had moved across a page boundary). The caller takes the best
/// copy, so where the linker happened to put the loop does not decide the number; micro.c
/// does the same for rdma-core.
#[inline(never)]
fn empty_polls<const K: u32>(cq: &mut Cq, wcs: &mut [Wc], n: u32) -> Result<f64, Failure> {
    std::hint::black_box(K);
    let t = Instant::now();
    for _ in 0..n {
        let got = cq
            .poll(&mut wcs[..1])
            .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
        if got != 0 {
            return Err(Failure("the CQ was not empty".into()));
        }
    }
    Ok(t.elapsed().as_nanos() as f64 / f64::from(n.max(1)))
}

pub fn run(ctx: Context, set: &Settings, json: bool) -> Result<ExitCode, Failure> {
    let mset = Settings {
        tx_depth: READY,
        rx_depth: 1,
        size: 8,
        inline_size: 0,
        ..set.clone()
    };
    let mut a = setup(ctx.clone(), &mset)?;
    let mut b = setup(ctx, &mset)?;
    let da = local_dest(&a, &mset)?;
    let db = local_dest(&b, &mset)?;
    connect_qp(&mut a, &mset, &da, &db)?;
    connect_qp(&mut b, &mset, &db, &da)?;
    let iters = set.iters.max(100);

    // 1. Poll of an empty CQ: the best of BLOCKS blocks (a block that met an interrupt or
    // a preemption does not show the cost of a poll), each block timed in every copy of
    // the loop (see `empty_polls`).
    let mut wcs = vec![Wc::default(); 16];
    let mut empty = f64::INFINITY;
    let blk = iters / BLOCKS;
    for _ in 0..BLOCKS {
        for ns in [
            empty_polls::<0>(&mut a.send_cq, &mut wcs, blk)?,
            empty_polls::<1>(&mut a.send_cq, &mut wcs, blk)?,
            empty_polls::<2>(&mut a.send_cq, &mut wcs, blk)?,
            empty_polls::<3>(&mut a.send_cq, &mut wcs, blk)?,
        ] {
            empty = empty.min(ns);
        }
    }

    let sge = [a.mr.sge(0, 8).map_err(fail("SGE"))?];
    let op = WrOp::RdmaWrite {
        remote_addr: db.addr,
        rkey: db.rkey,
    };
    let one = SendWr::new(0, op).sge(&sge);

    // 2. Poll with READY completions waiting (per CQE), best of a few rounds: through
    // `Cq::poll` (16 at a time), then through the extended poll (`start_poll`/`next_poll`,
    // reading wr_id and status of each).
    let mut list = vec![one.signaled(); LIST];
    let per_cqe = per_cqe_best(&mut a, &list, &mut wcs, false)?;
    let per_cqe_ex = per_cqe_best(&mut a, &list, &mut wcs, true)?;

    // 3./4. Post one WR per call, and lists of LIST WRs (per WR). Only the posts are timed;
    // the round's last WR is signaled and waited for outside the timing.
    let rounds = (iters / ROUND).max(4);
    let mut post_one = Duration::ZERO;
    let mut post_list = Duration::ZERO;
    let mut wc1 = [Wc::default()];
    for r in 0..rounds {
        let t = Instant::now();
        for i in 0..ROUND {
            let wr = if i + 1 == ROUND { one.signaled() } else { one };
            a.qp.post_send(&[wr]).map_err(fail("Couldn't post send"))?;
        }
        post_one += t.elapsed();
        poll_one(&mut a.send_cq, None, &a.ctx, &mut a.idle, &mut wc1, "write")?;
        for (i, w) in list.iter_mut().enumerate() {
            *w = if i + 1 == LIST { one.signaled() } else { one };
        }
        let t = Instant::now();
        for _ in 0..ROUND as usize / LIST {
            a.qp.post_send(&list).map_err(fail("Couldn't post send"))?;
        }
        post_list += t.elapsed();
        for _ in 0..ROUND as usize / LIST {
            poll_one(&mut a.send_cq, None, &a.ctx, &mut a.idle, &mut wc1, "write")?;
        }
        let _ = r;
    }
    let n_posted = f64::from(rounds * ROUND);
    let post1 = post_one.as_nanos() as f64 / n_posted;
    let post32 = post_list.as_nanos() as f64 / n_posted;

    let mem = memory(&a)?;
    let rows = [
        ("poll_empty_ns", empty),
        ("poll_per_cqe_ns", per_cqe),
        ("poll_ex_per_cqe_ns", per_cqe_ex),
        ("post_one_ns", post1),
        ("post_list32_per_wr_ns", post32),
        ("cq_anon_bytes", mem.cq.anon),
        ("cq_rss_bytes", mem.cq.rss),
        ("cq_vm_bytes", mem.cq.vm),
        ("qp_anon_bytes", mem.qp.anon),
        ("qp_rss_bytes", mem.qp.rss),
        ("qp_vm_bytes", mem.qp.vm),
    ];
    if json {
        let mut v = serde_json::json!({ "test": "micro", "library": "uverbs" });
        for (k, x) in rows {
            v[k] = x.into();
        }
        println!("{v}");
    } else {
        for (k, x) in rows {
            println!("micro {k} {x:.1}");
        }
    }
    close(a)?;
    close(b)?;
    Ok(ExitCode::SUCCESS)
}

/// Per-CQE time of draining READY completions, best of a few rounds. The kernel must have
/// finished all of them before the timing starts: a round that meets an empty poll is
/// discarded and the next one waits twice as long. `ex` drains through the extended poll
/// (one `start_poll`, `next_poll` to the end, reading wr_id and status of each), otherwise
/// through `Cq::poll` 16 at a time.
fn per_cqe_best(
    a: &mut Side,
    list: &[SendWr<'_>],
    wcs: &mut [Wc],
    ex: bool,
) -> Result<f64, Failure> {
    let mut best = f64::INFINITY;
    let mut settle = Duration::from_millis(100);
    let mut clean = 0;
    for _round in 0..12 {
        if clean >= 4 {
            break;
        }
        let mut posted = 0;
        while posted < READY {
            let k = (READY - posted).min(LIST as u32) as usize;
            a.qp.post_send(&list[..k])
                .map_err(fail("Couldn't post send"))?;
            posted += k as u32;
        }
        std::thread::sleep(settle);
        let t = Instant::now();
        let (mut got, empty_seen) = if ex {
            drain_ex(&mut a.send_cq)?
        } else {
            drain(&mut a.send_cq, wcs)?
        };
        let dt = t.elapsed();
        if !empty_seen && got == READY {
            best = best.min(dt.as_nanos() as f64 / f64::from(READY));
            clean += 1;
            continue;
        }
        settle *= 2;
        let deadline = Instant::now() + Duration::from_secs(30);
        while got < READY {
            got += a
                .send_cq
                .poll(wcs)
                .map_err(|e| Failure(format!("poll CQ failed: {e}")))? as u32;
            if Instant::now() > deadline {
                return Err(Failure(format!(
                    "only {got} of {READY} completions arrived in 30 s"
                )));
            }
        }
    }
    if clean == 0 {
        return Err(Failure(
            "the kernel never finished 1024 writes before the poll timing started".into(),
        ));
    }
    Ok(best)
}

/// Polls until READY completions or an empty poll: `(taken, met an empty poll)`.
#[inline(never)]
fn drain(cq: &mut Cq, wcs: &mut [Wc]) -> Result<(u32, bool), Failure> {
    let mut got = 0u32;
    while got < READY {
        let n = cq
            .poll(wcs)
            .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
        if n == 0 {
            return Ok((got, true));
        }
        got += n as u32;
    }
    Ok((got, false))
}

/// [`drain`] through the extended poll, reading wr_id and status of every completion.
#[inline(never)]
fn drain_ex(cq: &mut Cq) -> Result<(u32, bool), Failure> {
    let mut got = 0u32;
    let mut ids = 0u64;
    while got < READY {
        let Some(mut g) = cq
            .start_poll()
            .map_err(|e| Failure(format!("start_poll failed: {e}")))?
        else {
            return Ok((got, true));
        };
        loop {
            ids = ids.wrapping_add(g.wr_id());
            if g.status() != WcStatus::SUCCESS {
                return Err(Failure(format!("completion error: {:?}", g.status())));
            }
            got += 1;
            // Like micro.c: no next_poll after the READY-th (see the note there).
            if got == READY
                || !g
                    .next_poll()
                    .map_err(|e| Failure(format!("next_poll failed: {e}")))?
            {
                break;
            }
        }
    }
    std::hint::black_box(ids);
    Ok((got, false))
}

/// Objects created for the memory measurement, and their queue depth (perftest's TX depth).
const MEM_OBJECTS: usize = 128;
const MEM_DEPTH: u32 = 128;

/// Growth per object of the process's private anonymous memory (heap: `RssAnon`), of its
/// resident set (`VmRSS`, which also counts the touched ring pages) and of its address space
/// (`VmSize`: the mapped rings and doorbells), in bytes. micro.c measures the same way.
#[derive(Default)]
struct PerObject {
    anon: f64,
    rss: f64,
    vm: f64,
}

struct Memory {
    cq: PerObject,
    qp: PerObject,
}

/// `(RssAnon, VmRSS, VmSize)` of this process in bytes, from /proc/self/status.
fn status() -> Result<[f64; 3], Failure> {
    let text = std::fs::read_to_string("/proc/self/status")
        .map_err(fail("Couldn't read /proc/self/status"))?;
    let mut out = [0.0; 3];
    for (i, key) in ["RssAnon:", "VmRSS:", "VmSize:"].iter().enumerate() {
        let kb = text
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .ok_or_else(|| Failure(format!("/proc/self/status has no {key} line")))?;
        out[i] = kb * 1024.0;
    }
    Ok(out)
}

fn per_object(before: [f64; 3], after: [f64; 3]) -> PerObject {
    let d = |i: usize| (after[i] - before[i]) / MEM_OBJECTS as f64;
    PerObject {
        anon: d(0),
        rss: d(1),
        vm: d(2),
    }
}

/// Creates MEM_OBJECTS CQs (MEM_DEPTH entries, each polled once, as a user would), then one
/// RC QP on each (MEM_DEPTH send and receive WRs, one SGE), measuring the growth per object.
fn memory(side: &Side) -> Result<Memory, Failure> {
    // Room for every object first, so the vectors do not grow inside the measurement.
    let mut cqs: Vec<Cq> = Vec::with_capacity(MEM_OBJECTS);
    let mut qps: Vec<Qp> = Vec::with_capacity(MEM_OBJECTS);
    let mut wc = [Wc::default()];
    status()?; // once first, so its own buffer is not counted as growth
    let s0 = status()?;
    for _ in 0..MEM_OBJECTS {
        let mut cq = side
            .ctx
            .create_cq(MEM_DEPTH, None, 0)
            .map_err(fail("Couldn't create CQ"))?;
        cq.poll(&mut wc)
            .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
        cqs.push(cq);
    }
    let s1 = status()?;
    let cap = QpCap {
        max_send_wr: MEM_DEPTH,
        max_recv_wr: MEM_DEPTH,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    for cq in &cqs {
        let qp = side
            .pd
            .create_qp(&QpInitAttr::new(QpType::Rc, cq, cq, cap))
            .map_err(fail("Couldn't create QP"))?;
        qps.push(qp);
    }
    let s2 = status()?;
    drop(qps);
    drop(cqs);
    Ok(Memory {
        cq: per_object(s0, s1),
        qp: per_object(s1, s2),
    })
}
