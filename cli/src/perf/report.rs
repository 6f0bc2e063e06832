//! What `uverbs perf` prints: perftest's banner and address lines, its latency statistics and
//! result tables, or one JSON object (`--json`).

use super::bw::BwResult;
use super::options::{Settings, Test};
use super::poll::EVENT_WAITS;
use super::side::{Dest, Side};

pub(super) enum Outcome {
    Lat(Vec<u64>),
    Bw(BwResult),
    None,
}

/// Latency statistics in microseconds, as perftest reports them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LatStats {
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) typical: f64,
    pub(super) avg: f64,
    pub(super) stdev: f64,
    pub(super) p99: f64,
    pub(super) p999: f64,
}

/// perftest leaves the largest samples out of every statistic (its `LAT_MEASURE_TAIL`).
pub(super) const PERFTEST_LAT_MEASURE_TAIL: usize = 2;

/// perftest's `print_report_lat`: sort the samples, leave out the [`PERFTEST_LAT_MEASURE_TAIL`]
/// largest, and take `t_typical` as the median of the rest (`get_median`: the middle one, or the
/// mean of the two middle ones); t_min, the average and the standard deviation are over the
/// same samples, and t_max and the percentiles index the sorted array as perftest does (its
/// t_max is the first sample left out).
pub(super) fn lat_stats(samples: &[u64]) -> Option<LatStats> {
    if samples.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = samples.iter().map(|&ns| ns as f64 / 1000.0).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // perftest needs more samples than the tail; with fewer, keep them all.
    let m = if n > PERFTEST_LAT_MEASURE_TAIL {
        n - PERFTEST_LAT_MEASURE_TAIL
    } else {
        n
    };
    let kept = &v[..m];
    let avg = kept.iter().sum::<f64>() / m as f64;
    let var = kept.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / m as f64;
    let at = |i: usize| v[i.min(n - 1)];
    let typical = if (m - 1) % 2 == 1 {
        (v[m / 2] + v[m / 2 - 1]) / 2.0
    } else {
        v[m / 2]
    };
    Some(LatStats {
        min: v[0],
        max: at(m),
        typical,
        avg,
        stdev: var.sqrt(),
        p99: at(((m as f64) * 0.99).ceil() as usize),
        p999: at(((m as f64) * 0.999).ceil() as usize),
    })
}

pub(super) fn print_banner(set: &Settings, side: &Side, client: bool) {
    let line =
        "---------------------------------------------------------------------------------------";
    println!("{line}");
    println!("                    {} (uverbs)", set.test.title());
    println!(
        " Dual-port       : OFF\t\tDevice         : {}",
        side.ctx.device().name()
    );
    println!(" Number of qps   : 1\t\tTransport type : IB");
    println!(" Connection type : RC\t\tUsing SRQ      : OFF");
    println!(
        " TX depth        : {}\t\tPost List      : {}",
        set.tx_depth, set.post_list
    );
    if set.test.is_send() {
        println!(" RX depth        : {}", set.rx_depth);
    }
    println!(
        " CQ Moderation   : {}\t\tMtu            : {}[B]",
        set.cq_mod,
        set.mtu.bytes().unwrap_or(0)
    );
    println!(
        " Link type       : Ethernet\tGID index      : {}",
        set.gid_index
    );
    if matches!(set.test, Test::ReadLat | Test::ReadBw) {
        println!(" Outstand reads  : {}", set.outs);
    }
    if set.events {
        println!(" CQ events       : ON (sleep when a poll finds nothing)");
    }
    let inl = if set.size <= set.inline_size {
        set.inline_size
    } else {
        0
    };
    println!(
        " Max inline data : {inl}[B]\tRole           : {}",
        if client { "client" } else { "server" }
    );
    println!("{line}");
}

pub(super) fn print_dest(which: &str, d: &Dest) {
    let g: Vec<String> = d.gid.raw.iter().map(|b| format!("{b:02}")).collect();
    println!(
        " {which} address: LID {:#06x} QPN {:#06x} PSN {:#08x} RKey {:#010x} VAddr {:#018x}\n GID: {}",
        d.lid,
        d.qpn,
        d.psn,
        d.rkey,
        d.addr,
        g.join(":")
    );
}

pub(super) fn report(set: &Settings, client: bool, out: &Outcome, json: bool) {
    let line =
        "---------------------------------------------------------------------------------------";
    let common = serde_json::json!({
        "test": set.test.name(),
        "role": if client { "client" } else { "server" },
        "bytes": set.size,
        "iterations": set.iters,
        "tx_depth": set.tx_depth,
        "rx_depth": set.rx_depth,
        "cq_mod": set.cq_mod,
        "post_list": set.post_list,
        "events": set.events,
        "cq_event_waits": EVENT_WAITS.load(std::sync::atomic::Ordering::Relaxed),
        "inline_size": if set.size <= set.inline_size { set.inline_size } else { 0 },
        "gid_index": set.gid_index,
    });
    match out {
        Outcome::Lat(samples) => {
            let Some(s) = lat_stats(samples) else {
                if json {
                    println!("{common}");
                } else {
                    println!("{line}");
                }
                return;
            };
            if json {
                let mut v = common;
                v["t_min_usec"] = s.min.into();
                v["t_max_usec"] = s.max.into();
                v["t_typical_usec"] = s.typical.into();
                v["t_avg_usec"] = s.avg.into();
                v["t_stdev_usec"] = s.stdev.into();
                v["p99_usec"] = s.p99.into();
                v["p99_9_usec"] = s.p999.into();
                println!("{v}");
            } else {
                println!(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ");
                println!(
                    " {:<7}{:<10}    {:<7.2}        {:<7.2}      {:<7.2}          {:<7.2}        {:<7.2}          {:<7.2}                {:<7.2}",
                    set.size, set.iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
                );
                println!("{line}");
            }
        }
        Outcome::Bw(r) => {
            let secs = r.elapsed.as_secs_f64().max(1e-9);
            let rate = f64::from(r.messages) / secs;
            let mib = |msgs_per_s: f64| msgs_per_s * f64::from(set.size) / (1024.0 * 1024.0);
            let peak = r.peak_rate.max(rate);
            if json {
                let mut v = common;
                v["bw_peak_mib_s"] = mib(peak).into();
                v["bw_avg_mib_s"] = mib(rate).into();
                v["msg_rate_mpps"] = (rate / 1e6).into();
                v["seconds"] = secs.into();
                println!("{v}");
            } else {
                println!(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
                println!(
                    " {:<10} {:<10}       {:.2}              {:.2}  \t\t   {:.6}",
                    set.size,
                    set.iters,
                    mib(peak),
                    mib(rate),
                    rate / 1e6
                );
                println!("{line}");
            }
        }
        Outcome::None => {
            if json {
                println!("{common}");
            } else {
                println!(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
                println!(" (the client reports)");
                println!("{line}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::lat::deltas;

    #[test]
    fn latency_stats_follow_perftest() {
        // Sorted 1..5 us; perftest leaves out the two largest and takes the median of 1, 2, 3.
        let s = lat_stats(&[4000, 1000, 3000, 2000, 5000]).unwrap();
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 4.0);
        assert_eq!(s.typical, 2.0);
        assert_eq!(s.avg, 2.0);
        assert!((s.stdev - (2.0f64 / 3.0).sqrt()).abs() < 1e-9);
        assert_eq!(s.p99, 4.0);
        assert_eq!(s.p999, 4.0);
        // An even count left (1, 2, 3, 4 of 1..6): the mean of the two middle ones.
        let s = lat_stats(&[6000, 5000, 4000, 3000, 2000, 1000]).unwrap();
        assert_eq!(s.typical, 2.5);
        assert_eq!(s.max, 5.0);
        // 999 samples as in a 1000-iteration run: the median of the 997 smallest is the 499th.
        let many: Vec<u64> = (1..=999).map(|i| i * 1000).collect();
        assert_eq!(lat_stats(&many).unwrap().typical, 499.0);
        assert_eq!(lat_stats(&[7000]).unwrap().typical, 7.0);
        assert!(lat_stats(&[]).is_none());
        assert_eq!(deltas(&[0, 10, 30], 2), vec![5, 10]);
    }
}
