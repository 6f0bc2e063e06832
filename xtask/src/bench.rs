//! `cargo xtask bench`: uverbs against rdma-core, side by side, in one soft-RoCE VM run.
//!
//! One 6.12 VM; every row runs rdma-core's perftest (`ib_*`) and `uverbs perf` with identical
//! settings on the same rxe device (server and client in the VM, over 127.0.0.1), and
//! `uverbs perf` with its own defaults, alternating theirs/ours/ours-default in every
//! repetition so drift in the VM hits all of them alike. The table shows medians and ratios:
//! TCG makes absolute times meaningless, ratios within one run are what counts.
//!
//! A userspace microbenchmark follows (`uverbs perf micro` against `xtask/bench-c/micro.c`,
//! built here with gcc against libibverbs and copied in with its shared libraries).
//!
//! `cargo xtask bench --host` instead runs the host-side numbers: instruction counts per
//! posted WR and per polled CQE from `valgrind --tool=callgrind`, side by side: rdma-core 44
//! (Debian's libibverbs + libefa/librxe, driven by `xtask/bench-c/count.c` against the
//! stand-in kernel `xtask/bench-c/uvshim.c`), uverbs (`benches/ring_counts.rs`), and uverbs
//! through its C ABI (the same `count.c` built with `-DUVERBS_CAPI` and linked to
//! `libibverbs.so.1` of `cargo xtask capi --features standin`, on the stand-ins
//! `ring_counts` uses), failing if a C-ABI row is above rdma-core 44's; and the criterion
//! benches (`--host --criterion`).
//!
//! Not part of `cargo xtask test`: it takes minutes and asserts nothing about speed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::guest::{Net, Payload};
use crate::harness::{build_uverbs_cli, Harness};
use crate::kernel::Series;
use crate::util::{err, Result};
use crate::vm::Echo;

/// Which side of a comparison a run belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Impl {
    /// rdma-core: perftest, or micro.c.
    Theirs,
    /// uverbs with perftest's settings.
    Ours,
    /// uverbs with its own defaults.
    OursDefault,
}

impl Impl {
    fn tag(self) -> &'static str {
        match self {
            Impl::Theirs => "theirs",
            Impl::Ours => "ours",
            Impl::OursDefault => "ours-default",
        }
    }

    fn parse(s: &str) -> Option<Impl> {
        [Impl::Theirs, Impl::Ours, Impl::OursDefault]
            .into_iter()
            .find(|i| i.tag() == s)
    }
}

/// One row of the perftest comparison.
struct Row {
    /// `send-lat 2 B`, ...
    name: &'static str,
    /// perftest program.
    perftest: &'static str,
    /// `uverbs perf` test.
    ours: &'static str,
    size: u32,
    iters: u32,
}

impl Row {
    fn is_lat(&self) -> bool {
        self.ours.ends_with("-lat")
    }
}

/// Iteration counts are small: TCG runs rxe at about 40 k messages/s.
const ROWS: &[Row] = &[
    Row {
        name: "send-lat 2 B",
        perftest: "ib_send_lat",
        ours: "send-lat",
        size: 2,
        iters: 1000,
    },
    Row {
        name: "write-lat 64 B",
        perftest: "ib_write_lat",
        ours: "write-lat",
        size: 64,
        iters: 1000,
    },
    Row {
        name: "read-lat 64 B",
        perftest: "ib_read_lat",
        ours: "read-lat",
        size: 64,
        iters: 1000,
    },
    Row {
        name: "send-bw 64 B",
        perftest: "ib_send_bw",
        ours: "send-bw",
        size: 64,
        iters: 10000,
    },
    Row {
        name: "write-bw 64 B",
        perftest: "ib_write_bw",
        ours: "write-bw",
        size: 64,
        iters: 10000,
    },
    Row {
        name: "write-bw 64 KiB",
        perftest: "ib_write_bw",
        ours: "write-bw",
        size: 65536,
        iters: 1000,
    },
    Row {
        name: "read-bw 64 KiB",
        perftest: "ib_read_bw",
        ours: "read-bw",
        size: 65536,
        iters: 1000,
    },
];

const MICRO_KEYS: &[(&str, &str)] = &[
    ("poll_empty_ns", "poll, empty CQ (per call)"),
    ("poll_per_cqe_ns", "poll, 1024 CQEs ready (per CQE)"),
    ("poll_ex_per_cqe_ns", "start_poll, 1024 ready (per CQE)"),
    ("post_one_ns", "post_send, 1 WR (per call)"),
    ("post_list32_per_wr_ns", "post_send, 32-WR list (per WR)"),
    ("cq_anon_bytes", "memory per CQ: heap (RssAnon) [B]"),
    ("cq_rss_bytes", "memory per CQ: resident (VmRSS) [B]"),
    ("cq_vm_bytes", "memory per CQ: mapped (VmSize) [B]"),
    ("qp_anon_bytes", "memory per QP: heap (RssAnon) [B]"),
    ("qp_rss_bytes", "memory per QP: resident (VmRSS) [B]"),
    ("qp_vm_bytes", "memory per QP: mapped (VmSize) [B]"),
];

struct Options {
    reps: u32,
    host: bool,
    criterion: bool,
    /// Only the microbenchmark (and memory), `reps` times per library.
    micro_only: bool,
    /// Only the rows whose name contains one of these (all when empty); no microbenchmark
    /// unless `--micro` is also given.
    rows: Vec<String>,
    kernel: Series,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        reps: 5,
        host: false,
        criterion: false,
        micro_only: false,
        rows: Vec::new(),
        kernel: Series::V6_12,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--reps" => {
                let v = it.next().ok_or_else(|| err!("--reps needs a number"))?;
                o.reps = v
                    .parse()
                    .ok()
                    .filter(|&n: &u32| (1..=50).contains(&n))
                    .ok_or_else(|| err!("--reps {v}: a number from 1 to 50"))?;
            }
            "--host" => o.host = true,
            "--criterion" => o.criterion = true,
            "--micro" => o.micro_only = true,
            "--rows" => {
                let v = it.next().ok_or_else(|| err!("--rows needs a list"))?;
                o.rows = v.split(',').map(|r| r.trim().to_string()).collect();
                if let Some(bad) = o
                    .rows
                    .iter()
                    .find(|r| !ROWS.iter().any(|row| row.name.contains(r.as_str())))
                {
                    return Err(err!("--rows: no row is named like `{bad}`"));
                }
            }
            "--kernel" => {
                let v = it.next().ok_or_else(|| err!("--kernel needs 6.1 or 6.12"))?;
                o.kernel = Series::parse(v)?;
            }
            other => {
                return Err(err!(
                    "unknown option `{other}` (cargo xtask bench [--reps N] [--micro] [--rows NAME,...] [--kernel 6.1|6.12] | --host [--criterion])"
                ))
            }
        }
    }
    Ok(o)
}

pub fn run(args: &[String]) -> Result<bool> {
    let o = parse(args)?;
    if o.host {
        return host(o.criterion);
    }
    crate::prereq::ensure()?;
    vm(&o)
}

// ----- the VM run --------------------------------------------------------------------------

/// Builds `xtask/bench-c/micro.c` against the host's libibverbs.
fn build_micro_c() -> Result<PathBuf> {
    let src = crate::util::workspace_root().join("xtask/bench-c/micro.c");
    let out = crate::util::work_dir()?.join("uverbs-bench-micro");
    crate::util::run(
        Command::new("gcc")
            .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&out)
            .arg(&src)
            .arg("-libverbs"),
    )
    .map_err(|e| {
        err!(
            "building {} (needs gcc and libibverbs-dev): {e}",
            src.display()
        )
    })?;
    Ok(out)
}

/// The shared libraries `ldd` names for `bin` (absolute paths).
fn shared_libs(bin: &Path) -> Result<Vec<PathBuf>> {
    let out = crate::util::output(Command::new("ldd").arg(bin))?;
    let mut libs = Vec::new();
    for line in out.lines() {
        if line.contains("not found") {
            return Err(err!(
                "{} needs a library that is not installed: {}",
                bin.display(),
                line.trim()
            ));
        }
        let path = line.split_once("=>").map_or(line, |(_, r)| r).trim();
        let path = path.split(" (").next().unwrap_or("").trim();
        if path.starts_with('/') {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

/// The shell script the VM runs: every row, `reps` times, in the order theirs, ours,
/// ours-default; then the microbenchmark. Every run is framed by `UVBENCH` lines.
fn script(reps: u32, micro_only: bool, rows: &[String]) -> String {
    let mut s = String::from(
        r#". /lib/uverbs/lib.sh
gid=$(roce_v2_ipv4_gid rxe0) || exit 1
echo "rxe0 GID index $gid"
port=18600
# one ROW IMPL REP SERVER_CMD... -- CLIENT_ARGS: server in the background, client in front.
pair() {
    row=$1; impl=$2; rep=$3; prog=$4; shift 4
    port=$((port + 1))
    echo "UVBENCH-BEGIN $row $impl $rep"
    timeout -s KILL 60 $prog -p $port "$@" > /tmp/server.log 2>&1 &
    srv=$!
    wait_listening $port 30 || { kill $srv; cat /tmp/server.log; echo "UVBENCH-END 1"; return; }
    timeout -s KILL 60 $prog -p $port "$@" 127.0.0.1 2>&1
    rc=$?
    wait $srv
    src=$?
    [ $src -ne 0 ] && { echo "server failed ($src):"; cat /tmp/server.log; rc=$src; }
    echo "UVBENCH-END $rc"
}
"#,
    );
    for rep in 1..=if micro_only { 0 } else { reps } {
        for (i, r) in ROWS.iter().enumerate() {
            if !rows.is_empty() && !rows.iter().any(|n| r.name.contains(n.as_str())) {
                continue;
            }
            let common = format!("-d rxe0 -x $gid -s {} -n {}", r.size, r.iters);
            s += &format!("pair {i} theirs {rep} {} {common}\n", r.perftest);
            s += &format!(
                "pair {i} ours {rep} 'uverbs perf {} --perftest-defaults' {common}\n",
                r.ours
            );
            s += &format!(
                "pair {i} ours-default {rep} 'uverbs perf {}' {common}\n",
                r.ours
            );
        }
    }
    // `$prog` is word-split on purpose in pair(): `uverbs perf X` is three words.
    let micro_reps = match (micro_only, rows.is_empty()) {
        (true, _) => reps,
        (false, true) => reps.min(5),
        (false, false) => 0,
    };
    for rep in 1..=micro_reps {
        s += &format!(
            "echo 'UVBENCH-BEGIN micro theirs {rep}'; timeout -s KILL 300 /tests/uverbs-bench-micro -d rxe0 -x $gid -n 20000 2>&1; echo \"UVBENCH-END $?\"\n"
        );
        s += &format!(
            "echo 'UVBENCH-BEGIN micro ours {rep}'; timeout -s KILL 300 uverbs perf micro -d rxe0 -x $gid -n 20000 2>&1; echo \"UVBENCH-END $?\"\n"
        );
    }
    s
}

/// One framed run's output.
#[derive(Debug, Default)]
struct RunOut {
    key: String,
    imp: Option<Impl>,
    lines: Vec<String>,
    status: Option<i32>,
}

fn split_runs(lines: &[String]) -> Vec<RunOut> {
    let mut out = Vec::new();
    let mut cur: Option<RunOut> = None;
    for l in lines {
        if let Some(rest) = l.strip_prefix("UVBENCH-BEGIN ") {
            let f: Vec<&str> = rest.split_whitespace().collect();
            if let Some(c) = cur.take() {
                out.push(c);
            }
            cur = Some(RunOut {
                key: f.first().unwrap_or(&"").to_string(),
                imp: f.get(1).and_then(|s| Impl::parse(s)),
                ..RunOut::default()
            });
        } else if let Some(rest) = l.strip_prefix("UVBENCH-END ") {
            if let Some(mut c) = cur.take() {
                c.status = rest.trim().parse().ok();
                out.push(c);
            }
        } else if let Some(c) = cur.as_mut() {
            c.lines.push(l.clone());
        }
    }
    out.extend(cur);
    out
}

/// The number perftest's table (or ours) reports under `column` in the line after its header.
fn table_value(lines: &[String], header_has: &str, column: usize) -> Option<f64> {
    let i = lines.iter().position(|l| l.contains(header_has))?;
    // The first row that starts with a number (perftest may print a warning between its
    // header and its row, e.g. "Correlation coefficient r^2: 0.64 < 0.9").
    lines[i + 1..]
        .iter()
        .find(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u64>().is_ok())
        })?
        .split_whitespace()
        .nth(column)?
        .parse()
        .ok()
}

/// t_typical (latency rows) or MsgRate (bandwidth rows) of one run.
fn metric(row: &Row, lines: &[String]) -> Option<f64> {
    if row.is_lat() {
        table_value(lines, "t_typical", 4)
    } else {
        table_value(lines, "MsgRate", 4)
    }
}

fn micro_value(lines: &[String], key: &str) -> Option<f64> {
    lines.iter().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next() == Some("micro") && f.next() == Some(key))
            .then(|| f.next()?.parse().ok())
            .flatten()
    })
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn fmt(v: Option<f64>) -> String {
    v.map(|x| {
        if x < 0.1 {
            format!("{x:.5}")
        } else {
            format!("{x:.2}")
        }
    })
    .unwrap_or_else(|| "-".into())
}

fn vm(o: &Options) -> Result<bool> {
    let (reps, micro_only) = (o.reps, o.micro_only);
    let cli = build_uverbs_cli()?;
    let micro = build_micro_c()?;
    let mut files = vec![("tests/uverbs-bench-micro".to_string(), micro.clone())];
    // Its libraries are the ones perftest needs (already in the image); copied again so the
    // program never depends on that.
    for lib in shared_libs(&micro)? {
        let g = lib.to_string_lossy().trim_start_matches('/').to_string();
        files.push((g, lib));
    }
    let body = script(reps, micro_only, &o.rows);
    let payload = Payload {
        net: Net::Veth {
            addr: "10.99.0.1/24".into(),
        },
        script: format!("cat > /tmp/bench.sh <<'UVBENCH_EOF'\n{body}UVBENCH_EOF\nstep bench 0 sh /tmp/bench.sh\n"),
        files,
    };
    let mut h = Harness::new(Some(cli));
    println!(
        "xtask: bench: rows {} x 3 x {reps} runs + micro, one {} VM (several minutes under TCG)",
        if o.rows.is_empty() {
            "all".to_string()
        } else {
            o.rows.join(",")
        },
        o.kernel.label()
    );
    let run = h.run(
        o.kernel,
        &payload,
        // About 4 minutes per repetition under TCG, more on a busy host.
        Duration::from_secs(900 + 600 * u64::from(reps)),
        Echo {
            prefix: "[bench] ".into(),
            step_banners: false,
            boot_messages: false,
        },
    )?;
    let Some(step) = run.step("bench") else {
        println!("xtask: {}", run.describe());
        return Ok(false);
    };
    let runs = split_runs(&step.output);
    let mut ok = run.success();
    let mut vals: BTreeMap<(String, Impl), Vec<f64>> = BTreeMap::new();
    let mut micro_vals: BTreeMap<(&str, Impl), Vec<f64>> = BTreeMap::new();
    for r in &runs {
        let Some(imp) = r.imp else { continue };
        if r.status != Some(0) {
            ok = false;
            println!(
                "xtask: bench run {} {} failed (status {:?}):\n  {}",
                r.key,
                imp.tag(),
                r.status,
                r.lines.join("\n  ")
            );
            continue;
        }
        if r.key == "micro" {
            for (k, _) in MICRO_KEYS {
                if let Some(v) = micro_value(&r.lines, k) {
                    micro_vals.entry((k, imp)).or_default().push(v);
                }
            }
            continue;
        }
        let Some(row) = r.key.parse::<usize>().ok().and_then(|i| ROWS.get(i)) else {
            continue;
        };
        match metric(row, &r.lines) {
            Some(v) if v.is_finite() => vals.entry((r.key.clone(), imp)).or_default().push(v),
            // perftest converts cycles to time with a clock rate it estimates at start-up;
            // when the estimate fails under TCG it prints `inf`. Its failure to measure, not
            // the program's: left out of the median and said so.
            Some(_) => println!(
                "xtask: bench run {} {} left out: it printed no finite result (perftest's clock estimate failed?):\n  {}",
                row.name,
                imp.tag(),
                r.lines.join("\n  ")
            ),
            None => {
                ok = false;
                println!(
                    "xtask: bench run {} {}: no result in its output:\n  {}",
                    row.name,
                    imp.tag(),
                    r.lines.join("\n  ")
                );
            }
        }
    }
    let med = |k: String, i: Impl| vals.get(&(k, i)).and_then(|v| median(&mut v.clone()));
    println!();
    println!(
        "uverbs vs rdma-core on rxe (kernel {}), medians of {reps} runs, alternating",
        run.label
    );
    println!("latency rows: t_typical [usec], ratio = ours/theirs (target <= 1.0)");
    println!("rate rows: MsgRate [Mpps], ratio = ours/theirs (target >= 1.0; ours-default on write-bw 64 B: >= 1.5)");
    println!(
        "{:<18} {:<13} {:>11} {:>11} {:>7}   {:>13} {:>7}",
        "row", "metric", "theirs", "ours", "ratio", "ours-default", "ratio"
    );
    for (i, row) in ROWS.iter().enumerate() {
        let t = med(i.to_string(), Impl::Theirs);
        let o = med(i.to_string(), Impl::Ours);
        let d = med(i.to_string(), Impl::OursDefault);
        let ratio = |x: Option<f64>| match (x, t) {
            (Some(x), Some(t)) if t > 0.0 => format!("{:.2}", x / t),
            _ => "-".into(),
        };
        println!(
            "{:<18} {:<13} {:>11} {:>11} {:>7}   {:>13} {:>7}",
            row.name,
            if row.is_lat() { "t_typ usec" } else { "Mpps" },
            fmt(t),
            fmt(o),
            ratio(o),
            fmt(d),
            ratio(d)
        );
    }
    // Every run's value (in run order), so the spread behind each median is visible.
    println!();
    println!("every run, in order (the spread behind the medians):");
    for (i, row) in ROWS.iter().enumerate() {
        for imp in [Impl::Theirs, Impl::Ours, Impl::OursDefault] {
            if let Some(v) = vals.get(&(i.to_string(), imp)) {
                let list: Vec<String> = v.iter().map(|x| fmt(Some(*x))).collect();
                println!("  {:<18} {:<13} {}", row.name, imp.tag(), list.join(" "));
            }
        }
    }
    println!();
    println!(
        "userspace microbenchmark (ns per operation; ratio = ours/theirs, target <= 0.5 for polls)"
    );
    println!(
        "{:<34} {:>10} {:>10} {:>7}",
        "operation", "theirs", "ours", "ratio"
    );
    for (k, label) in MICRO_KEYS {
        let t = micro_vals
            .get_mut(&(k, Impl::Theirs))
            .and_then(|v| median(v));
        let o = micro_vals.get_mut(&(k, Impl::Ours)).and_then(|v| median(v));
        let r = match (o, t) {
            (Some(o), Some(t)) if t > 0.0 => format!("{:.2}", o / t),
            _ => "-".into(),
        };
        println!("{label:<34} {:>10} {:>10} {r:>7}", fmt(t), fmt(o));
    }
    for (k, label) in MICRO_KEYS {
        for imp in [Impl::Theirs, Impl::Ours] {
            if let Some(v) = micro_vals.get(&(k, imp)) {
                let list: Vec<String> = v.iter().map(|x| fmt(Some(*x))).collect();
                println!("  {label:<34} {:<7} {}", imp.tag(), list.join(" "));
            }
        }
    }
    println!();
    println!("xtask: {}", run.describe());
    Ok(ok)
}

// ----- host numbers ------------------------------------------------------------------------

/// One row of the host instruction counts: rdma-core 44's phase of `xtask/bench-c/count.c`
/// and, where uverbs has it, the same phase of `benches/ring_counts.rs`.
struct CountRow {
    label: &'static str,
    /// `count.c` phase (`efa-post`, ...); the prefix names the provider.
    theirs: &'static str,
    /// `ring_counts` phase, `None` where uverbs has no host count of this work yet.
    ours: Option<&'static str>,
    /// Whether `count.c`'s phase also runs on uverbs' C ABI (`-DUVERBS_CAPI`): every row
    /// whose work rdma-core 44 does (not the 64-bit id rows, a mode it lacks).
    capi: bool,
}

const COUNT_ROWS: &[CountRow] = &[
    CountRow {
        label: "EFA post_send, 1 WR per call",
        theirs: "efa-post",
        ours: Some("efa-post"),
        capi: true,
    },
    CountRow {
        label: "EFA post_send, 32-WR lists (per WR)",
        theirs: "efa-post-list",
        ours: Some("efa-post-list"),
        capi: true,
    },
    CountRow {
        label: "EFA poll, 16 per call (per CQE)",
        theirs: "efa-poll",
        ours: Some("efa-poll"),
        capi: true,
    },
    CountRow {
        label: "EFA poll, 1 per call",
        theirs: "efa-poll-one",
        ours: Some("efa-poll-one"),
        capi: true,
    },
    CountRow {
        label: "EFA start_poll/next_poll (per CQE)",
        theirs: "efa-start-poll",
        ours: Some("efa-start-poll"),
        capi: true,
    },
    // 64-bit request ids (no id pool): rdma-core 44's libefa has only the pool path, so these
    // rows compare with its pool-path rows of the same work.
    CountRow {
        label: "EFA post_send 64-bit ids, 1 WR/call",
        theirs: "efa-post",
        ours: Some("efa-post-64"),
        capi: false,
    },
    CountRow {
        label: "EFA poll 64-bit ids, 16/call (per CQE)",
        theirs: "efa-poll",
        ours: Some("efa-poll-64"),
        capi: false,
    },
    // uverbs' rxe rows run on the stand-in rxe kernel of testing/rxe-standin (behind the
    // Channel seam), rdma-core's on uvshim.c; how the work differs: docs/performance.md,
    // "What differs between the two sides' work".
    CountRow {
        label: "rxe post_send, 1 WR per call",
        theirs: "rxe-post",
        ours: Some("rxe-post"),
        capi: true,
    },
    CountRow {
        label: "rxe post_send, 32-WR lists (per WR)",
        theirs: "rxe-post-list",
        ours: Some("rxe-post-list"),
        capi: true,
    },
    CountRow {
        label: "rxe poll, 16 per call (per CQE)",
        theirs: "rxe-poll",
        ours: Some("rxe-poll"),
        capi: true,
    },
    CountRow {
        label: "rxe poll, 1 per call",
        theirs: "rxe-poll-one",
        ours: Some("rxe-poll-one"),
        capi: true,
    },
    CountRow {
        label: "rxe start_poll/next_poll (per CQE)",
        theirs: "rxe-start-poll",
        ours: Some("rxe-start-poll"),
        capi: true,
    },
];

fn host(criterion: bool) -> Result<bool> {
    let root = crate::util::workspace_root();
    crate::prereq::ensure_host_bench()?;
    crate::util::find_program("valgrind")
        .ok_or_else(|| err!("valgrind is not installed (apt-get install valgrind)"))?;
    let exe = build_ring_counts(&root)?;
    let (count, shim) = build_count_c()?;
    // count.c on uverbs' C ABI: the library built with the stand-in hooks. A tree whose
    // library cannot link count.c (or has no libefa.so.1 for the EFA rows) gets no C-ABI
    // number for those rows, said below the table.
    let capi = build_count_capi();
    let mut notes = Vec::new();
    if let Err(e) = &capi {
        notes.push(format!("no C-ABI column: {e}"));
    }
    // Each phase runs with n and 2n operations: the difference of the totals, over n, is one
    // operation's cost with set-up, teardown and the device model's own work cancelled out.
    let n: u64 = 1024;
    println!("xtask: instruction counts (valgrind --tool=callgrind, Ir), (count(2n) - count(n)) / n, n = {n}");
    println!("rdma-core 44: Debian's libibverbs + libefa/librxe against the stand-in kernel of xtask/bench-c (uvshim.c), driven by count.c");
    println!("uverbs: benches/ring_counts.rs (EFA device model, rxe stand-in kernel); ratio = uverbs / rdma-core 44 (target <= 1.0, goal 0.5)");
    println!("C ABI: the same count.c (-DUVERBS_CAPI) linked to uverbs' libibverbs.so.1 (cargo xtask capi --features standin), on the stand-ins ring_counts uses; C ratio = C ABI / rdma-core 44 (must be <= 1.0)");
    println!(
        "{:<38} {:>13} {:>9} {:>7} {:>9} {:>7}",
        "operation", "rdma-core 44", "uverbs", "ratio", "C ABI", "C ratio"
    );
    let mut above = Vec::new();
    for row in COUNT_ROWS {
        let per_op = |one: u64, two: u64| two.saturating_sub(one) as f64 / n as f64;
        let theirs = per_op(
            count_c(&count, &shim, row.theirs, n)?,
            count_c(&count, &shim, row.theirs, 2 * n)?,
        );
        let ours = match row.ours {
            Some(phase) => Some(per_op(
                callgrind(&exe, phase, n)?,
                callgrind(&exe, phase, 2 * n)?,
            )),
            None => None,
        };
        let c_abi = match &capi {
            Ok(c) if row.capi && c.runs(row.theirs) => Some(per_op(
                count_capi(c, row.theirs, n)?,
                count_capi(c, row.theirs, 2 * n)?,
            )),
            _ => None,
        };
        if c_abi.is_some_and(|c| c > theirs) {
            above.push(row.label);
        }
        let num = |v: Option<f64>| v.map_or("-".into(), |o| format!("{o:.1}"));
        let ratio = |v: Option<f64>| v.map_or("-".into(), |o| format!("{:.2}", o / theirs));
        println!(
            "{:<38} {:>13.1} {:>9} {:>7} {:>9} {:>7}",
            row.label,
            theirs,
            num(ours),
            ratio(ours),
            num(c_abi),
            ratio(c_abi),
        );
    }
    if let Ok(c) = &capi {
        if !c.efa {
            notes.push(format!(
                "no C-ABI EFA rows: {} has no libefa.so.1 (efadv_*), which this tree does not build",
                c.dir.display()
            ));
        }
    }
    for note in &notes {
        println!("xtask: bench: {note}");
    }
    if criterion {
        crate::util::run(
            Command::new(crate::util::cargo())
                .args(["bench", "--package", "uverbs", "--bench", "rings"])
                .current_dir(&root),
        )?;
    }
    if !above.is_empty() {
        println!(
            "xtask: bench: FAILED: through the C ABI above rdma-core 44: {}",
            above.join("; ")
        );
        return Ok(false);
    }
    Ok(true)
}

/// `count.c` built for uverbs' C ABI, and where its libraries are.
struct CapiCount {
    exe: PathBuf,
    /// `target/capi/release+standin`: LD_LIBRARY_PATH of its runs.
    dir: PathBuf,
    /// Whether uverbs' libefa.so.1 (efadv_*) is there, so the EFA phases run.
    efa: bool,
}

impl CapiCount {
    fn runs(&self, phase: &str) -> bool {
        self.efa || !phase.starts_with("efa-")
    }
}

/// Builds uverbs' libraries with the stand-in hooks (`cargo xtask capi --features standin`,
/// measuring equipment) and `count.c -DUVERBS_CAPI` against rdma-core's installed headers,
/// linked to them: `-libverbs`, and `-lefa` when uverbs' libefa.so.1 is built (else its
/// efadv_* stay weak and NULL, and the EFA phases are not run).
fn build_count_capi() -> Result<CapiCount> {
    let libs = crate::capi::build(&["standin"])?;
    let src = crate::util::workspace_root().join("xtask/bench-c/count.c");
    let exe = crate::util::work_dir()?.join("uverbs-count-capi");
    let efa = libs.libefa_so().is_file();
    let mut cmd = Command::new("gcc");
    cmd.args(["-O2", "-Wall", "-Wextra", "-Werror", "-DUVERBS_CAPI", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-L")
        .arg(&libs.dir)
        .arg("-libverbs");
    if efa {
        // count.c references efadv_* only weakly, which an --as-needed link (the toolchain's
        // default here) does not count as a use: libefa.so.1 would be dropped and the
        // functions stay NULL.
        cmd.args([
            "-Wl,--push-state,--no-as-needed",
            "-lefa",
            "-Wl,--pop-state",
        ]);
    }
    crate::util::run(&mut cmd).map_err(|e| {
        err!(
            "building {} against {} (needs gcc, libibverbs-dev, valgrind's headers): {e}",
            exe.display(),
            libs.dir.display()
        )
    })?;
    Ok(CapiCount {
        exe,
        dir: libs.dir,
        efa,
    })
}

/// Instructions `count PHASE N` on uverbs' C ABI collects under callgrind: exactly as
/// [`count_c`] runs rdma-core's (only the measured loop), with uverbs' libraries first on
/// the library path and the stand-in device named (no shim).
fn count_capi(c: &CapiCount, phase: &str, n: u64) -> Result<u64> {
    let provider = phase.split('-').next().unwrap_or("");
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=write",
            "--callgrind-out-file=/dev/null",
        ])
        .arg(&c.exe)
        .arg(phase)
        .arg(n.to_string())
        .env("UVERBS_CAPI_STANDIN", provider)
        .env("LD_LIBRARY_PATH", &c.dir)
        .env_remove("LD_PRELOAD")
        .output()
        .map_err(|e| err!("running valgrind: {e}"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(err!(
            "valgrind {} {phase} {n} failed ({}): {text}",
            c.exe.display(),
            out.status
        ));
    }
    collected(&text)
}

/// Builds rdma-core's side of the host counts: `xtask/bench-c/count.c` (against Debian's
/// libibverbs and libefa) and the stand-in kernel `uvshim.so` it runs under.
fn build_count_c() -> Result<(PathBuf, PathBuf)> {
    let dir = crate::util::workspace_root().join("xtask/bench-c");
    let work = crate::util::work_dir()?;
    let shim = work.join("uvshim.so");
    // The name matters: the shim acts only in a program called `uverbs-count`.
    let count = work.join("uverbs-count");
    let gcc = |what: &Path, args: &[&str], libs: &[&str]| -> Result<()> {
        crate::util::run(
            Command::new("gcc")
                .args(["-O2", "-Wall", "-Wextra", "-Werror"])
                .args(args)
                .arg("-o")
                .arg(what)
                .args(libs),
        )
        .map_err(|e| {
            err!(
                "building {} (needs gcc, libibverbs-dev, valgrind's headers): {e}",
                what.display()
            )
        })
    };
    let src = |f: &str| dir.join(f).to_string_lossy().into_owned();
    gcc(&shim, &["-shared", "-fPIC", &src("uvshim.c")], &["-ldl"])?;
    gcc(&count, &[&src("count.c")], &["-libverbs", "-lefa", "-ldl"])?;
    Ok((count, shim))
}

/// Instructions `count PHASE N` collects under callgrind with the stand-in kernel: only
/// its measured loop (client requests), without the shim's answers to write() (the
/// kernel's work) but with glibc's write wrapper, see xtask/bench-c/uvshim.c.
fn count_c(count: &Path, shim: &Path, phase: &str, n: u64) -> Result<u64> {
    let provider = phase.split('-').next().unwrap_or("");
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=write",
            "--callgrind-out-file=/dev/null",
        ])
        .arg(count)
        .arg(phase)
        .arg(n.to_string())
        .env("UVSHIM_PROVIDER", provider)
        .env("LD_PRELOAD", shim)
        .output()
        .map_err(|e| err!("running valgrind: {e}"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(err!(
            "valgrind {} {phase} {n} failed ({}): {text}",
            count.display(),
            out.status
        ));
    }
    collected(&text)
}

/// The total of callgrind's "==123== Collected : 456789" line.
fn collected(text: &str) -> Result<u64> {
    text.lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| err!("no `Collected :` line in callgrind's output:\n{text}"))
}

/// Builds the `ring_counts` bench target (release) and returns its executable.
fn build_ring_counts(root: &Path) -> Result<PathBuf> {
    let out = crate::util::output(
        Command::new(crate::util::cargo())
            .args([
                "bench",
                "--no-run",
                "--package",
                "uverbs",
                "--bench",
                "ring_counts",
                "--message-format=json",
            ])
            .current_dir(root),
    )?;
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == "ring_counts")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| err!("cargo built no ring_counts executable"))
}

/// Total instructions (`Ir`) of one run of `exe PHASE N` under callgrind.
fn callgrind(exe: &Path, phase: &str, n: u64) -> Result<u64> {
    let out_file = crate::util::work_dir()?.join(format!("callgrind.{phase}.out"));
    let out = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(exe)
        .arg(phase)
        .arg(n.to_string())
        .output()
        .map_err(|e| err!("running valgrind: {e}"))?;
    if !out.status.success() {
        return Err(err!(
            "valgrind {} {phase} failed: {}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let v = collected(&text)?;
    let _ = std::fs::remove_file(&out_file);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(String::from).collect()
    }

    #[test]
    fn perftest_tables_are_parsed() {
        let bw = lines(
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 64         20000            2.57               2.56  \t\t   0.042000\n",
        );
        assert_eq!(metric(&ROWS[4], &bw), Some(0.042));
        let lat = lines(
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n 2       1000          10.50          300.1        12.20            13.00          4.1             30.0                   200.0\n",
        );
        assert_eq!(metric(&ROWS[0], &lat), Some(12.2));
        assert_eq!(metric(&ROWS[0], &bw), None);
        let warned = lines(
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n Correlation coefficient r^2: 0.644182 < 0.9\n 2       1000          inf            inf          inf\n",
        );
        assert_eq!(metric(&ROWS[0], &warned), Some(f64::INFINITY));
    }

    #[test]
    fn runs_are_split_by_markers() {
        let out = lines("noise\nUVBENCH-BEGIN 3 ours 1\na\nb\nUVBENCH-END 0\nUVBENCH-BEGIN micro theirs 2\nmicro poll_empty_ns 12.5\nUVBENCH-END 1\n");
        let r = split_runs(&out);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].key, "3");
        assert_eq!(r[0].imp, Some(Impl::Ours));
        assert_eq!(r[0].lines, vec!["a", "b"]);
        assert_eq!(r[0].status, Some(0));
        assert_eq!(r[1].imp, Some(Impl::Theirs));
        assert_eq!(r[1].status, Some(1));
        assert_eq!(micro_value(&r[1].lines, "poll_empty_ns"), Some(12.5));
        assert_eq!(micro_value(&r[1].lines, "post_one_ns"), None);
    }

    #[test]
    fn callgrind_totals_are_parsed() {
        let text = "==42== Events    : Ir\n==42== Collected : 203550\n==42==\n";
        assert_eq!(collected(text).unwrap(), 203_550);
        assert!(collected("==42== no totals").is_err());
    }

    #[test]
    fn every_count_row_names_its_provider_and_uverbs_rows_match() {
        for r in COUNT_ROWS {
            let provider = r.theirs.split('-').next().unwrap();
            assert!(provider == "efa" || provider == "rxe", "{}", r.theirs);
            assert!(r.label.starts_with(&provider.to_uppercase()) || r.label.starts_with(provider));
            if let Some(o) = r.ours {
                // The same phase on both sides, or uverbs' 64-bit-id variant of it (rdma-core
                // 44 has only the pool path).
                assert!(
                    o == r.theirs || o.strip_suffix("-64") == Some(r.theirs),
                    "{o} vs {}",
                    r.theirs
                );
            }
        }
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn the_script_alternates_and_quotes_our_command() {
        let s = script(2, false, &[]);
        assert!(s.starts_with(". /lib/uverbs/lib.sh\n"));
        let a = s.find("pair 0 theirs 1 ib_send_lat").unwrap();
        let b = s
            .find("pair 0 ours 1 'uverbs perf send-lat --perftest-defaults'")
            .unwrap();
        let c = s
            .find("pair 0 ours-default 1 'uverbs perf send-lat'")
            .unwrap();
        let d = s.find("pair 0 theirs 2").unwrap();
        assert!(a < b && b < c && c < d);
        assert!(s.contains("micro ours 1"));
        let m = script(3, true, &[]);
        assert!(!m.contains("pair "));
        assert!(m.contains("micro theirs 3") && m.contains("micro ours 3"));
    }

    #[test]
    fn a_row_filter_keeps_only_those_rows_and_no_micro() {
        let s = script(2, false, &["read-lat".to_string()]);
        assert!(s.contains("pair 2 theirs 2 ib_read_lat"));
        assert!(!s.contains("pair 0 ") && !s.contains("pair 3 "));
        assert!(!s.contains("micro"));
        let m = script(2, true, &["read-lat".to_string()]);
        assert!(m.contains("micro ours 2"));
    }
}
