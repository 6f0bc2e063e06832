//! `cargo xtask fuzz [--seconds N] [TARGET...]`: runs the cargo-fuzz targets of `fuzz/` one
//! after another (libFuzzer with AddressSanitizer), each for N seconds, and prints executions
//! and coverage per target. `cargo xtask test` runs every target for [`CI_SECONDS`].
//!
//! Toolchain: cargo-fuzz builds with `-Zsanitizer=address`, a nightly flag. With a nightly
//! toolchain installed (`rustup toolchain list`) we use `cargo +nightly fuzz`. Without one
//! (a clean CI machine where rustup cannot download: the network reaches only crates.io,
//! Debian and PyPI) the stable toolchain builds the targets with `RUSTC_BOOTSTRAP=1`, which
//! unlocks the same `-Z` flags; the sanitizer runtime ships with the stable toolchain too.
//! cargo-fuzz itself is installed with `cargo install cargo-fuzz --locked` when missing.
//!
//! Runs are parallel-friendly: one target at a time, one libFuzzer job. New inputs go to
//! `fuzz/target/corpus/<target>` (not committed); the committed seeds in
//! `fuzz/corpus/<target>` are read too. A crash leaves its input in
//! `fuzz/target/artifacts/<target>/` and fails the run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::testrun::{Item, Report};
use crate::util::{err, Result};

/// Seconds each target runs in `cargo xtask test`.
pub const CI_SECONDS: u64 = 20;

/// The result of one target's run.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub target: String,
    pub seconds: u64,
    pub executions: u64,
    pub coverage: u64,
    pub features: u64,
    pub corpus: u64,
    pub exec_per_sec: u64,
    /// Why it failed (a crash, a leak, a timeout, a build error), with the artifact path.
    pub failure: Option<String>,
}

fn fuzz_dir() -> PathBuf {
    crate::util::workspace_root().join("fuzz")
}

/// The targets declared in fuzz/Cargo.toml (`[[bin]]` names), in file order.
pub fn targets() -> Result<Vec<String>> {
    let toml = fuzz_dir().join("Cargo.toml");
    let text =
        std::fs::read_to_string(&toml).map_err(|e| err!("reading {}: {e}", toml.display()))?;
    let mut out = Vec::new();
    let mut in_bin = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_bin = l == "[[bin]]";
            continue;
        }
        if in_bin {
            if let Some(v) = l.strip_prefix("name").map(str::trim) {
                if let Some(v) = v.strip_prefix('=') {
                    out.push(v.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    if out.is_empty() {
        return Err(err!("no [[bin]] fuzz targets in {}", toml.display()));
    }
    Ok(out)
}

/// How to invoke cargo for fuzzing: `cargo +nightly` or stable with `RUSTC_BOOTSTRAP=1`.
#[derive(Debug, Clone)]
struct Toolchain {
    nightly: bool,
}

impl Toolchain {
    fn cargo(&self) -> Command {
        let mut c = Command::new("cargo");
        if self.nightly {
            c.arg("+nightly");
        } else {
            // Stable rustc accepts -Z flags (cargo-fuzz's -Zsanitizer=address) when
            // RUSTC_BOOTSTRAP is set; see the module docs.
            c.env("RUSTC_BOOTSTRAP", "1");
        }
        c
    }
    fn describe(&self) -> &'static str {
        if self.nightly {
            "cargo +nightly fuzz"
        } else {
            "cargo fuzz on stable with RUSTC_BOOTSTRAP=1 (no nightly toolchain installed)"
        }
    }
}

fn has_nightly() -> bool {
    Command::new("rustup")
        .args(["toolchain", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.starts_with("nightly"))
        })
        .unwrap_or(false)
}

/// Makes sure `cargo fuzz` exists (installing it from crates.io if not) and picks the
/// toolchain.
fn ensure_tools() -> Result<Toolchain> {
    let works = |c: &mut Command| {
        c.args(["fuzz", "--version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !works(&mut Command::new("cargo")) {
        println!("xtask: cargo-fuzz is missing; installing it (cargo install cargo-fuzz --locked)");
        let mut c = Command::new("cargo");
        c.args(["install", "cargo-fuzz", "--locked"]);
        crate::util::run(&mut c).map_err(|e| {
            err!("cargo-fuzz is not installed and `cargo install cargo-fuzz --locked` failed: {e}")
        })?;
        if !works(&mut Command::new("cargo")) {
            return Err(err!(
                "cargo-fuzz was installed but `cargo fuzz --version` still fails; is ~/.cargo/bin on PATH?"
            ));
        }
    }
    Ok(Toolchain {
        nightly: has_nightly(),
    })
}

fn build(tc: &Toolchain, target: &str) -> Result<PathBuf> {
    let mut c = tc.cargo();
    // Always into fuzz/target, where the corpus and artifacts live and where we look for
    // the binary below: a CARGO_TARGET_DIR set for the workspace would send it elsewhere.
    c.args(["fuzz", "build", "-O", target])
        .env_remove("CARGO_TARGET_DIR")
        .current_dir(fuzz_dir());
    crate::util::run(&mut c)
        .map_err(|e| err!("building fuzz target {target} ({}): {e}", tc.describe()))?;
    let exe = fuzz_dir()
        .join("target/x86_64-unknown-linux-gnu/release")
        .join(target);
    if !exe.exists() {
        return Err(err!("cargo fuzz build {target} made no {}", exe.display()));
    }
    Ok(exe)
}

/// Pulls the numbers out of libFuzzer's output: the last status line
/// (`#N DONE cov: C ft: F corp: K/...b ... exec/s: E`) and the final stats
/// (`stat::number_of_executed_units: N`).
fn parse_stats(target: &str, seconds: u64, log: &str) -> Stats {
    let mut s = Stats {
        target: target.to_string(),
        seconds,
        ..Stats::default()
    };
    let num_after = |line: &str, key: &str| -> Option<u64> {
        let rest = &line[line.find(key)? + key.len()..];
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse().ok()
    };
    for line in log.lines() {
        if line.starts_with('#') && line.contains("cov:") {
            s.coverage = num_after(line, "cov:").unwrap_or(s.coverage);
            s.features = num_after(line, "ft:").unwrap_or(s.features);
            s.corpus = num_after(line, "corp:").unwrap_or(s.corpus);
            s.exec_per_sec = num_after(line, "exec/s:").unwrap_or(s.exec_per_sec);
            s.executions = num_after(line, "#").unwrap_or(s.executions);
        }
        if let Some(n) = num_after(line, "stat::number_of_executed_units:") {
            s.executions = n;
        }
    }
    s
}

/// Runs one built target for `seconds`.
fn run_one(exe: &Path, target: &str, seconds: u64) -> Result<Stats> {
    let dir = fuzz_dir();
    let work = dir.join("target/corpus").join(target);
    let seeds = dir.join("corpus").join(target);
    let artifacts = dir.join("target/artifacts").join(target);
    for d in [&work, &artifacts] {
        std::fs::create_dir_all(d).map_err(|e| err!("creating {}: {e}", d.display()))?;
    }
    let log_path = dir.join("target").join(format!("{target}.log"));
    let log = std::fs::File::create(&log_path)
        .map_err(|e| err!("creating {}: {e}", log_path.display()))?;
    println!(
        "xtask: fuzzing {target} for {seconds} s (log: {})",
        log_path.display()
    );
    let mut c = Command::new(exe);
    c.arg(format!("-max_total_time={seconds}"))
        .arg("-rss_limit_mb=4096")
        .arg("-timeout=10")
        .arg("-print_final_stats=1")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg(&work);
    if seeds.is_dir() {
        c.arg(&seeds);
    }
    let status = c
        .stdout(log.try_clone().map_err(|e| err!("{e}"))?)
        .stderr(log)
        .status()
        .map_err(|e| err!("running {}: {e}", exe.display()))?;
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut s = parse_stats(target, seconds, &text);
    if !status.success() {
        let artifact = text
            .lines()
            .find_map(|l| l.split("Test unit written to ").nth(1))
            .unwrap_or("(no artifact written)")
            .to_string();
        let what = text
            .lines()
            .find(|l| l.contains("panicked at") || l.contains("ERROR: ") || l.contains("SUMMARY"))
            .unwrap_or("")
            .trim()
            .to_string();
        s.failure = Some(format!(
            "{status}: {what}; input {artifact}; full log {}",
            log_path.display()
        ));
    }
    Ok(s)
}

fn print_stats(all: &[Stats]) {
    println!("\n== fuzz results ==");
    println!(
        "{:<18} {:>6} {:>12} {:>8} {:>7} {:>8} {:>7}  result",
        "target", "secs", "executions", "exec/s", "cov", "features", "corpus"
    );
    for s in all {
        println!(
            "{:<18} {:>6} {:>12} {:>8} {:>7} {:>8} {:>7}  {}",
            s.target,
            s.seconds,
            s.executions,
            s.exec_per_sec,
            s.coverage,
            s.features,
            s.corpus,
            s.failure.as_deref().unwrap_or("ok")
        );
    }
}

/// Builds and runs `targets` (all when empty) for `seconds` each.
fn run_targets(seconds: u64, wanted: &[String]) -> Result<Vec<Stats>> {
    let tc = ensure_tools()?;
    println!("xtask: fuzzing with {}", tc.describe());
    let all = targets()?;
    for w in wanted {
        if !all.contains(w) {
            return Err(err!("no fuzz target `{w}`; targets: {}", all.join(", ")));
        }
    }
    let list: Vec<String> = if wanted.is_empty() {
        all
    } else {
        wanted.to_vec()
    };
    let mut out = Vec::new();
    for t in &list {
        match build(&tc, t).and_then(|exe| run_one(&exe, t, seconds)) {
            Ok(s) => out.push(s),
            Err(e) => out.push(Stats {
                target: t.clone(),
                seconds,
                failure: Some(e.to_string()),
                ..Stats::default()
            }),
        }
    }
    Ok(out)
}

/// `cargo xtask fuzz [--seconds N] [TARGET...]`.
pub fn command(args: &[String]) -> Result<bool> {
    let mut seconds = 60u64;
    let mut wanted = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => {
                let v = it.next().ok_or_else(|| err!("--seconds needs a number"))?;
                seconds = v
                    .parse()
                    .map_err(|_| err!("--seconds {v}: not a number of seconds"))?;
            }
            "--list" => {
                for t in targets()? {
                    println!("{t}");
                }
                return Ok(true);
            }
            s if s.starts_with('-') => {
                return Err(err!("unknown option `{s}` for `cargo xtask fuzz`"))
            }
            t => wanted.push(t.to_string()),
        }
    }
    let start = Instant::now();
    let stats = run_targets(seconds, &wanted)?;
    print_stats(&stats);
    println!("xtask: fuzzing took {:.0} s", start.elapsed().as_secs_f64());
    Ok(stats.iter().all(|s| s.failure.is_none()))
}

/// The CI step of `cargo xtask test`: every target for [`CI_SECONDS`], one item each.
pub fn ci(report: &mut Report) {
    match run_targets(CI_SECONDS, &[]) {
        Ok(stats) => {
            print_stats(&stats);
            for s in stats {
                let name = format!("fuzz {} ({} s)", s.target, s.seconds);
                match &s.failure {
                    None => report.push(Item::pass(&format!(
                        "{name}: {} executions, cov {}",
                        s.executions, s.coverage
                    ))),
                    Some(why) => report.push(Item::fail(&name, why.clone())),
                }
            }
        }
        Err(e) => report.push(Item::fail("fuzz targets", e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_come_from_libfuzzer_output() {
        let log = "\
INFO: Seed: 1
#2\tINITED cov: 137 ft: 137 corp: 1/1b exec/s: 0 rss: 35Mb
#252885\tDONE   cov: 1563 ft: 7027 corp: 631/78Kb lim: 850 exec/s: 4145 rss: 382Mb
stat::number_of_executed_units: 252886
stat::average_exec_per_sec:     4145
";
        let s = parse_stats("t", 60, log);
        assert_eq!(
            (
                s.executions,
                s.coverage,
                s.features,
                s.corpus,
                s.exec_per_sec
            ),
            (252886, 1563, 7027, 631, 4145)
        );
    }

    #[test]
    fn targets_are_read_from_the_fuzz_manifest() {
        let t = targets().unwrap();
        assert!(t.contains(&"rxe_cq".to_string()), "{t:?}");
        assert!(t.len() >= 6, "{t:?}");
    }
}
