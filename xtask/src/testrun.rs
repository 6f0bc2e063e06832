//! `cargo xtask test` and `cargo xtask vm`: host checks, the musl test executables, one VM
//! boot per kernel running the self-test and every test executable, the two-VM pingpong,
//! and a summary in the form `N passed, N failed, N skipped`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::guest::{safe_name, Net, Payload};
use crate::harness::{
    build_uverbs_cli, build_uverbs_cli_for, command_payload, Harness, MUSL_TARGET,
};
use crate::kernel::{Arch, Series};
use crate::libtest::{self, Verdict};
use crate::util::{err, Context, Result};
use crate::vm::{Echo, Run};

/// Tests (or test targets) with this in their name need the host (a C compiler, headers):
/// `cargo test --workspace` runs them there; the VM reports them as not run, by name.
const HOST_ONLY: &str = "host_only";
/// Tests (or the test target) with this in their name need EFA hardware: the VM runs them
/// without `--include-ignored`, so their `#[ignore]` reports them as not run, by name.
const EFA_HW: &str = "efa_hw";
/// Test targets with this in their name run in two VMs joined by a link, started by the
/// two-VM section with a role each (`crate::selftest::two_vm_pingpong`); the single-VM
/// sections leave them out (they are counted in the two-VM section).
const TWO_VM: &str = "two_vm";

/// Test targets that run after every other test executable of a VM boot, in this order.
/// `device_removal` deletes rxe0 (`rdma link delete`) and re-creates it: a test executable
/// after it would run on a device that was just removed and re-added (a new uverbs number,
/// a GID table being refilled), so it goes last.
const RUNS_LAST: &[&str] = &["device_removal"];

/// Time limit for one test executable inside the VM.
const PER_BINARY_LIMIT_SECS: u32 = 600;
/// Hard limit for one kernel's whole test boot.
const TEST_BOOT_TIMEOUT: Duration = Duration::from_secs(1500);

/// One reported result.
#[derive(Debug, Clone)]
pub struct Item {
    pub name: String,
    pub state: State,
}

#[derive(Debug, Clone)]
pub enum State {
    Passed,
    Failed(String),
    /// Not run, with the reason (e.g. needs EFA hardware).
    Skipped(String),
}

impl Item {
    pub fn pass(name: &str) -> Item {
        Item {
            name: name.into(),
            state: State::Passed,
        }
    }
    pub fn fail(name: &str, why: impl Into<String>) -> Item {
        Item {
            name: name.into(),
            state: State::Failed(why.into()),
        }
    }
    pub fn skip(name: &str, why: impl Into<String>) -> Item {
        Item {
            name: name.into(),
            state: State::Skipped(why.into()),
        }
    }
}

/// Results of one section (host, a kernel, the two-VM run).
#[derive(Debug)]
pub struct Report {
    pub title: String,
    pub items: Vec<Item>,
}

impl Report {
    pub fn new(title: &str) -> Report {
        Report {
            title: title.into(),
            items: Vec::new(),
        }
    }

    pub fn push(&mut self, item: Item) {
        self.items.push(item);
    }

    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for i in &self.items {
            match i.state {
                State::Passed => c.0 += 1,
                State::Failed(_) => c.1 += 1,
                State::Skipped(_) => c.2 += 1,
            }
        }
        c
    }

    pub fn passed(&self) -> bool {
        self.counts().1 == 0
    }

    /// Failures and skips by name, then the `N passed, N failed, N skipped` line.
    pub fn print(&self) {
        println!("\n== {} ==", self.title);
        for i in &self.items {
            match &i.state {
                State::Passed => {}
                State::Failed(why) => println!("  FAILED   {}: {why}", i.name),
                State::Skipped(why) => println!("  not run  {}: {why}", i.name),
            }
        }
        let (p, f, s) = self.counts();
        println!("{}: {p} passed, {f} failed, {s} skipped", self.title);
    }
}

/// Print the overall line; true if nothing failed.
pub fn print_overall(reports: &[Report]) -> bool {
    print_overall_inner(reports).0
}

/// [`print_overall`], also returning the names listed as not run anywhere.
fn print_overall_inner(reports: &[Report]) -> (bool, Vec<String>) {
    let (mut p, mut f, mut s) = (0, 0, 0);
    println!("\n== summary ==");
    for r in reports {
        let c = r.counts();
        println!(
            "  {:<40} {} passed, {} failed, {} skipped",
            r.title, c.0, c.1, c.2
        );
        p += c.0;
        f += c.1;
        s += c.2;
    }
    // Tests not run anywhere: a device test the host skips but a VM ran is not listed. An
    // item name may end in a ` [...]` qualifier (which step or run); the test is its name
    // before it.
    let base = |n: &str| n.split_once(" [").map_or(n, |(b, _)| b).to_string();
    let ran: BTreeSet<String> = reports
        .iter()
        .flat_map(|r| r.items.iter())
        .filter(|i| !matches!(i.state, State::Skipped(_)))
        .map(|i| base(&i.name))
        .collect();
    let not_run: Vec<&str> = reports
        .iter()
        .flat_map(|r| r.items.iter())
        .filter(|i| matches!(i.state, State::Skipped(_)) && !ran.contains(&base(&i.name)))
        .map(|i| i.name.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !not_run.is_empty() {
        println!("not run anywhere: {}", not_run.join(", "));
    }
    // The failures again, a line each, last: a log's tail then says what failed.
    for r in reports {
        for i in &r.items {
            if let State::Failed(why) = &i.state {
                let first = why.lines().next().unwrap_or("");
                let short: String = first.chars().take(160).collect();
                println!("failed: {} ({}): {short}", i.name, r.title);
            }
        }
    }
    println!("overall: {p} passed, {f} failed, {s} skipped");
    (f == 0, not_run.into_iter().map(str::to_string).collect())
}

/// A musl test executable found by cargo.
#[derive(Debug, Clone)]
pub struct TestExe {
    /// `package::target (kind)`.
    pub display: String,
    /// The cargo target's name (`device_removal` for tests/device_removal.rs).
    pub target: String,
    pub path: PathBuf,
    /// Shell-safe unique file name in the VM (`/tests/<guest_name>`).
    pub guest_name: String,
    /// The `efa_hw` test target: run without `--include-ignored`.
    pub efa_hw_target: bool,
    /// A test target whose name contains `host_only`: not run in the VM at all.
    pub host_only_target: bool,
    /// A test target whose name contains `two_vm`: run by the two-VM section only.
    pub two_vm_target: bool,
    /// Test names from `--list`.
    pub names: Vec<String>,
}

/// The musl test executables that built, and the build error if some did not.
pub struct TestBuild {
    pub exes: Vec<TestExe>,
    pub build_error: Option<String>,
}

/// Build the workspace's test executables for musl and check each is static. With
/// `--no-fail-fast` cargo keeps building the other targets when one fails to compile, so
/// what did build still runs in the VM while the failure is reported.
pub fn build_test_exes() -> Result<TestBuild> {
    build_test_exes_for(Arch::X86_64)
}

/// [`build_test_exes`] for a VM of `arch`; a foreign architecture's executables are listed
/// through `qemu-<arch>-static`.
pub fn build_test_exes_for(arch: Arch) -> Result<TestBuild> {
    let root = crate::util::workspace_root();
    let mut cmd = Command::new(crate::util::cargo());
    // xtask is host tooling (it drives qemu); its own tests run on the host.
    cmd.args([
        "test",
        "--workspace",
        "--exclude",
        "xtask",
        "--no-run",
        "--no-fail-fast",
        // The tokio layer's tests (tests/examples.rs) need a device too.
        "--features",
        "uverbs/tokio",
    ])
    .args([
        "--target",
        arch.musl_target(),
        "--message-format=json-render-diagnostics",
    ])
    // Line tables only: panics and backtraces still name file and line, and the executables
    // shrink to about a quarter. With full debug info the 41 of them came to 1.1 GB, more than
    // the guest could unpack ("Initramfs unpacking failed: write error", executables
    // missing in /tests).
    .env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only")
    .env("CARGO_PROFILE_TEST_DEBUG", "line-tables-only")
    .current_dir(&root)
    .stderr(std::process::Stdio::inherit());
    println!("$ {}", crate::util::show(&cmd));
    let out = cmd
        .output()
        .context(|| "running cargo test --no-run".to_string())?;
    let build_error = (!out.status.success()).then(|| {
        format!(
            "some musl test executables did not build ({}); see the compiler output above",
            out.status
        )
    });
    let mut exes = Vec::new();
    let mut taken = BTreeSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" || v["profile"]["test"] != true {
            continue;
        }
        let Some(exe) = v["executable"].as_str() else {
            continue;
        };
        let (pkg_name, target, kind) = artifact_names(&v);
        let display = format!("{pkg_name}::{target} ({kind})");
        let path = PathBuf::from(exe);
        crate::elf::ensure_static_for(&path, &format!("test executable {display}"), arch)?;
        let mut list_cmd = if arch.is_host() {
            Command::new(&path)
        } else {
            let mut c = Command::new(format!("qemu-{}-static", arch.label()));
            c.arg(&path);
            c
        };
        let list = crate::util::output(list_cmd.arg("--list"))
            .map_err(|e| err!("listing the tests of {display}: {e}"))?;
        exes.push(TestExe {
            guest_name: safe_name(&format!("{pkg_name}-{kind}-{target}"), &mut taken),
            target: target.to_string(),
            display,
            path,
            efa_hw_target: kind == "test" && target == "efa_hw",
            host_only_target: target.contains(HOST_ONLY),
            two_vm_target: kind == "test" && target.contains(TWO_VM),
            names: libtest::parse_list(&list),
        });
    }
    in_vm_order(&mut exes);
    Ok(TestBuild { exes, build_error })
}

/// Puts test executables in the order a VM boot runs them (see [`vm_order_key`]), so the
/// files, the steps and the reports of a run all follow it.
pub(crate) fn in_vm_order(exes: &mut [TestExe]) {
    exes.sort_by(|a, b| vm_order_key(a).cmp(&vm_order_key(b)));
}

/// Where a test executable runs in a VM boot: by name (cargo reports executables in the
/// order they finished building, which changes from build to build), except the
/// [`RUNS_LAST`] targets, which come after all others in the order that list gives.
fn vm_order_key(e: &TestExe) -> (usize, &str) {
    let last = RUNS_LAST
        .iter()
        .position(|t| *t == e.target)
        .map_or(0, |i| i + 1);
    (last, &e.display)
}

/// (package, target, kind) of a `compiler-artifact` message of cargo's JSON output.
pub(crate) fn artifact_names(v: &serde_json::Value) -> (&str, &str, &str) {
    let target = v["target"]["name"].as_str().unwrap_or("?");
    let kind = v["target"]["kind"][0].as_str().unwrap_or("?");
    let pkg = v["package_id"].as_str().unwrap_or("?");
    // package_id is "path+file:///...#name@version" (or "name version (...)" on old cargo)
    let pkg_name = pkg
        .rsplit_once('#')
        .map(|(_, t)| t.split('@').next().unwrap_or(t))
        .unwrap_or_else(|| pkg.split(' ').next().unwrap_or(pkg));
    let pkg_name = pkg_name.rsplit('/').next().unwrap_or(pkg_name);
    (pkg_name, target, kind)
}

/// Splits the output of `cargo test` into one part per test executable: cargo announces each
/// with `Running <source> (<executable>)` (named here as the VM sections name it, through
/// `names`: executable file name -> `package::target (kind)`) or `Doc-tests <crate>`.
pub(crate) fn split_cargo_test_output(
    lines: &[String],
    names: &std::collections::BTreeMap<String, String>,
) -> Vec<(String, Vec<String>)> {
    let mut parts: Vec<(String, Vec<String>)> = Vec::new();
    for line in lines {
        let t = line.trim();
        let head = if let Some(rest) = t.strip_prefix("Running ") {
            let exe = rest
                .rsplit_once('(')
                .map(|(_, p)| p.trim_end_matches(')'))
                .unwrap_or(rest);
            let file = exe.rsplit('/').next().unwrap_or(exe);
            Some(names.get(file).cloned().unwrap_or_else(|| rest.to_string()))
        } else {
            t.strip_prefix("Doc-tests ")
                .map(|c| format!("{c}::doc-tests"))
        };
        match head {
            Some(h) => parts.push((h, Vec::new())),
            None => {
                if let Some((_, out)) = parts.last_mut() {
                    out.push(line.clone());
                }
            }
        }
    }
    parts
}

/// Per-test items from the parts of [`split_cargo_test_output`]; a part whose executable
/// ended without a `test result:` line (a crash) is a failure of its own.
pub(crate) fn cargo_test_items(parts: &[(String, Vec<String>)], report: &mut Report) {
    for (exe, out) in parts {
        let parsed = libtest::parse(out);
        for t in &parsed.tests {
            let name = format!("{exe}::{}", t.name);
            match &t.verdict {
                Verdict::Passed => report.push(Item::pass(&name)),
                Verdict::Failed => report.push(Item::fail(&name, "FAILED (see its output above)")),
                Verdict::Ignored(reason) => report.push(Item::skip(
                    &name,
                    reason.clone().unwrap_or_else(|| "ignored".into()),
                )),
            }
        }
        if parsed.summary.is_none() {
            let in_test = parsed
                .unfinished
                .map(|t| format!(" in test `{t}`"))
                .unwrap_or_default();
            report.push(Item::fail(
                exe,
                format!("ended without a `test result:` line{in_test} (crashed?)"),
            ));
        }
    }
}

/// `cargo test --workspace` on the host, each test case a reported item named like the VM
/// sections' items (`package::target (kind)::test`); ignored tests are listed by name as not
/// run on the host (device tests: the VM sections run them).
fn host_tests(report: &mut Report) {
    const STEP: &str = "cargo test --workspace";
    let t = Instant::now();
    let root = crate::util::workspace_root();
    // Executable file name -> display name, from the build (the run's `Running` lines name
    // only the source file and the executable).
    let mut build = Command::new(crate::util::cargo());
    build
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(&root)
        .stderr(std::process::Stdio::inherit());
    println!("$ {}", crate::util::show(&build));
    let mut names = std::collections::BTreeMap::new();
    match build.output() {
        Ok(out) => {
            for v in String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| v["reason"] == "compiler-artifact" && v["profile"]["test"] == true)
            {
                let Some(exe) = v["executable"].as_str() else {
                    continue;
                };
                let (pkg, target, kind) = artifact_names(&v);
                let file = exe.rsplit('/').next().unwrap_or(exe).to_string();
                names.insert(file, format!("{pkg}::{target} ({kind})"));
            }
        }
        Err(e) => println!("xtask: warning: {}: {e}", crate::util::show(&build)),
    }
    // One pipe for both streams (the shell's `2>&1`), so cargo's `Running` lines (stderr)
    // stay in order with the test binaries' output (stdout); two pipes read by two threads
    // can hand a binary's last lines over after the next `Running` line.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "exec \"$0\" test --workspace 2>&1"])
        .arg(crate::util::cargo())
        .current_dir(&root);
    println!("$ cargo test --workspace 2>&1");
    let (lines, status) = match crate::util::run_tee(&mut cmd) {
        Ok(r) => r,
        Err(e) => {
            report.push(Item::fail(STEP, e.to_string()));
            return;
        }
    };
    let before = report.items.len();
    cargo_test_items(&split_cargo_test_output(&lines, &names), report);
    let failed_any = report.items[before..]
        .iter()
        .any(|i| matches!(i.state, State::Failed(_)));
    if !status.success() && !failed_any {
        // E.g. a test target that did not compile: no test line says so.
        report.push(Item::fail(
            STEP,
            format!("failed ({status}) without a failing test line; see its output above"),
        ));
    }
    if report.items.len() == before {
        report.push(Item::fail(STEP, "no test results in its output"));
    }
    println!("xtask: {STEP}: {:.0} s", t.elapsed().as_secs_f64());
}

/// Build one integration test target of the `uverbs` package for musl (static) and return
/// the executable's path.
pub fn build_one_test_exe(target: &str) -> Result<PathBuf> {
    let mut cmd = Command::new(crate::util::cargo());
    cmd.args(["test", "-p", "uverbs", "--no-run", "--test", target])
        .args([
            "--target",
            MUSL_TARGET,
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(crate::util::workspace_root())
        .stderr(std::process::Stdio::inherit());
    println!("$ {}", crate::util::show(&cmd));
    let out = cmd
        .output()
        .context(|| format!("running cargo test --no-run --test {target}"))?;
    if !out.status.success() {
        return Err(err!(
            "the test executable {target} did not build ({})",
            out.status
        ));
    }
    let exe = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == target)
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| err!("cargo reported no executable for the test target {target}"))?;
    crate::elf::ensure_static(&exe, &format!("test executable {target}"))?;
    Ok(exe)
}

/// Payload lines running every test executable as its own step, in [`vm_order_key`]'s order
/// whatever the order of `exes`.
pub(crate) fn test_steps(exes: &[TestExe]) -> String {
    let mut ordered: Vec<&TestExe> = exes.iter().collect();
    ordered.sort_by_key(|e| vm_order_key(e));
    let mut s = String::new();
    for e in ordered {
        if e.host_only_target || e.two_vm_target {
            continue;
        }
        let bin = format!("/tests/{}", e.guest_name);
        let limit = PER_BINARY_LIMIT_SECS;
        let name = &e.guest_name;
        if e.efa_hw_target {
            // EFA hardware tests: a plain run, so their #[ignore] keeps them out.
            let _ = writeln!(
                s,
                "step test:{name} {limit} {bin} --skip {HOST_ONLY} --test-threads=1 || rc=1"
            );
            continue;
        }
        let _ = writeln!(
            s,
            "step test:{name} {limit} {bin} --include-ignored --skip {EFA_HW} --skip {HOST_ONLY} --test-threads=1 || rc=1"
        );
        if e.names.iter().any(|n| n.contains(EFA_HW)) {
            let _ = writeln!(
                s,
                "step test:{name}:{EFA_HW} {limit} {bin} {EFA_HW} --skip {HOST_ONLY} --test-threads=1 || rc=1"
            );
        }
    }
    s
}

/// Turn the test steps of a run into per-test items.
pub(crate) fn test_items(run: &Run, exes: &[TestExe], report: &mut Report) {
    for e in exes.iter().filter(|e| !e.two_vm_target) {
        for n in e
            .names
            .iter()
            .filter(|n| e.host_only_target || n.contains(HOST_ONLY))
        {
            report.push(Item::skip(
                &format!("{}::{n}", e.display),
                "host-only test: runs in `cargo test --workspace` on the host",
            ));
        }
        if e.host_only_target {
            continue;
        }
        let mut steps = vec![format!("test:{}", e.guest_name)];
        if !e.efa_hw_target && e.names.iter().any(|n| n.contains(EFA_HW)) {
            steps.push(format!("test:{}:{EFA_HW}", e.guest_name));
        }
        for step_name in steps {
            let Some(step) = run.step(&step_name) else {
                report.push(Item::fail(
                    &e.display,
                    format!("did not run: {}", run.describe()),
                ));
                continue;
            };
            let parsed = libtest::parse(&step.output);
            let mut failed_any = false;
            for t in &parsed.tests {
                let name = format!("{}::{}", e.display, t.name);
                match &t.verdict {
                    Verdict::Passed => report.push(Item::pass(&name)),
                    Verdict::Failed => {
                        failed_any = true;
                        report.push(Item::fail(&name, "FAILED (see its output above)"));
                    }
                    Verdict::Ignored(reason) => report.push(Item::skip(
                        &name,
                        reason.clone().unwrap_or_else(|| "ignored".into()),
                    )),
                }
            }
            if let Some(sum) = parsed.summary {
                let seen = parsed.tests.len() as u32;
                if seen != sum.passed + sum.failed + sum.ignored {
                    println!(
                        "xtask: warning: {}: read {seen} per-test lines but libtest counted {} (output garbled?)",
                        e.display,
                        sum.passed + sum.failed + sum.ignored
                    );
                }
            }
            if step.status != Some(0) && !failed_any {
                let why = if step.timed_out {
                    format!("killed after the {PER_BINARY_LIMIT_SECS} s limit")
                } else {
                    match step.status {
                        Some(s) => format!("exited with status {s} without a failing test line"),
                        None => "never finished (the VM stopped)".into(),
                    }
                };
                let in_test = parsed
                    .unfinished
                    .map(|t| format!(" in test `{t}`"))
                    .unwrap_or_default();
                report.push(Item::fail(
                    &format!("{} [{step_name}]", e.display),
                    format!("{why}{in_test}"),
                ));
            }
        }
    }
}

/// The crates users build (the libraries, the EFA model and the CLI, with `tokio`) must build
/// with the `rust-version` they declare: `cargo check` on that toolchain, in its own target
/// directory so the normal build stays warm.
fn msrv_check(report: &mut Report) {
    let t = Instant::now();
    let name = "rust-version: cargo check with the declared MSRV";
    let v = match crate::prereq::ensure_msrv_toolchain() {
        Ok(v) => v,
        Err(e) => return report.push(Item::fail(name, e.to_string())),
    };
    let name = format!("rust-version: cargo +{v} check (libraries, EFA model, CLI, C ABI)");
    let root = crate::util::workspace_root();
    let mut cmd = Command::new("rustup");
    cmd.args(["run", &v, "cargo", "check", "--features", "uverbs/tokio"])
        .args([
            "-p",
            "uverbs",
            "-p",
            "uverbs-uapi",
            "-p",
            "uverbs-wr",
            "-p",
            "uverbs-rxe",
            "-p",
            "uverbs-efa",
        ])
        .args(["-p", "uverbs-efa-model", "-p", "uverbs-cli"])
        .args([
            "-p",
            "uverbs-capi",
            "-p",
            "uverbs-capi-efa-shim",
            "-p",
            "uverbs-capi-mlx5-stub",
        ])
        .args(["--features", "uverbs-capi/efa-model", "--target-dir"])
        .arg(root.join("target/msrv"))
        // rustup run puts that toolchain first; a CARGO/RUSTC from the outer cargo would not.
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC")
        .current_dir(&root);
    match crate::util::run(&mut cmd) {
        Ok(()) => report.push(Item::pass(&name)),
        Err(e) => report.push(Item::fail(&name, format!("{e}; see its output above"))),
    }
    println!("xtask: {name}: {:.0} s", t.elapsed().as_secs_f64());
}

/// Run one host command as a reported item.
fn host_check(report: &mut Report, name: &str, args: &[&str]) {
    let t = Instant::now();
    let mut cmd = Command::new(crate::util::cargo());
    cmd.args(args).current_dir(crate::util::workspace_root());
    match crate::util::run(&mut cmd) {
        Ok(()) => report.push(Item::pass(name)),
        Err(e) => report.push(Item::fail(name, format!("{e}; see its output above"))),
    }
    println!("xtask: {name}: {:.0} s", t.elapsed().as_secs_f64());
}

/// `cargo xtask test`.
pub fn full() -> Result<bool> {
    let start = Instant::now();
    crate::prereq::ensure()?;
    crate::prereq::ensure_toolchain_components();

    let mut host = Report::new("host");
    host_check(
        &mut host,
        "cargo fmt --all --check",
        &["fmt", "--all", "--check"],
    );
    host_check(
        &mut host,
        "cargo clippy --workspace --all-targets --features uverbs/tokio -- -D warnings",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--features",
            "uverbs/tokio",
            "--",
            "-D",
            "warnings",
        ],
    );
    // The rustdoc of every crate, broken intra-doc links and other rustdoc warnings included.
    host_check(
        &mut host,
        "cargo doc --no-deps --workspace (rustdoc warnings denied)",
        &[
            "--config",
            "build.rustdocflags=[\"-D\", \"warnings\"]",
            "doc",
            "--no-deps",
            "--workspace",
        ],
    );
    msrv_check(&mut host);
    host_tests(&mut host);
    // uverbs as rdma-core's libibverbs/libefa (xtask/src/capi.rs): the libraries, their
    // symbols, and C programs linked against them.
    crate::capi::step(&mut host, &[]);
    // The providers' and uapi's unit tests again under Miri (xtask/src/miri.rs).
    crate::miri::run(&mut host);

    // Every fuzz target for a short time (xtask/src/fuzz.rs), one at a time.
    let t = Instant::now();
    crate::fuzz::ci(&mut host);
    println!("xtask: fuzz: {:.0} s", t.elapsed().as_secs_f64());

    let t = Instant::now();
    let cli = match build_uverbs_cli() {
        Ok(p) => {
            host.push(Item::pass("build uverbs CLI (musl, static)"));
            Some(p)
        }
        Err(e) => {
            host.push(Item::fail("build uverbs CLI (musl, static)", e.to_string()));
            None
        }
    };
    let exes = match build_test_exes() {
        Ok(TestBuild {
            exes,
            build_error: None,
        }) => {
            host.push(Item::pass("build test executables (musl, static)"));
            exes
        }
        Ok(TestBuild {
            exes,
            build_error: Some(e),
        }) => {
            host.push(Item::fail("build test executables (musl, static)", e));
            exes
        }
        Err(e) => {
            host.push(Item::fail(
                "build test executables (musl, static)",
                e.to_string(),
            ));
            Vec::new()
        }
    };
    println!(
        "xtask: musl builds: {:.0} s; {} test executables",
        t.elapsed().as_secs_f64(),
        exes.len()
    );
    host.print();

    let mut reports = vec![host];
    let mut h = Harness::new(cli);
    let files: Vec<(String, PathBuf)> = exes
        .iter()
        .filter(|e| !e.two_vm_target)
        .map(|e| (format!("tests/{}", e.guest_name), e.path.clone()))
        .collect();
    let script = format!(
        "rc=0\n{}{}exit $rc\n",
        crate::selftest::IN_VM_STEPS,
        test_steps(&exes)
    );
    let mut timings = Vec::new();
    for series in Series::ALL {
        let payload = Payload {
            net: Net::Veth {
                addr: "10.99.0.1/24".into(),
            },
            script: script.clone(),
            files: files.clone(),
        };
        let echo = Echo {
            prefix: format!("[{}] ", series.label()),
            step_banners: true,
            boot_messages: false,
        };
        let title = format!("kernel {}", h.kernel(series)?.release);
        println!(
            "\nxtask: ==== {title}: self-test and {} test executables in one VM boot ====",
            exes.len()
        );
        let run = h.run(series, &payload, TEST_BOOT_TIMEOUT, echo)?;
        println!("xtask: {}", run.describe());
        timings.push(format!(
            "{title}: boot {} s, run {:.0} s",
            run.boot_secs
                .map(|b| format!("{b:.1}"))
                .unwrap_or_else(|| "-".into()),
            run.total_secs
        ));
        let mut r = Report::new(&title);
        for i in crate::selftest::in_vm_items(&run) {
            r.push(i);
        }
        test_items(&run, &exes, &mut r);
        if !run.success() && r.passed() {
            r.push(Item::fail("VM run", run.describe()));
        }
        r.print();
        reports.push(r);
    }

    // aarch64: the host tests under qemu-user, then the arm64 VM (xtask/src/aarch64.rs).
    let t = Instant::now();
    let mut arm = Report::new("aarch64 host (qemu-user)");
    match crate::prereq::ensure_arch(Arch::Aarch64) {
        Ok(()) => crate::aarch64::qemu_user_tests(&mut arm),
        Err(e) => arm.push(Item::fail("aarch64 prerequisites", e.to_string())),
    }
    timings.push(format!(
        "aarch64 qemu-user tests: {:.0} s",
        t.elapsed().as_secs_f64()
    ));
    let r = crate::aarch64::vm_section(&mut arm, &mut timings);
    let pair = crate::aarch64::mixed_pair(&mut arm, &mut timings);
    arm.print();
    r.print();
    pair.print();
    reports.push(arm);
    reports.push(r);
    reports.push(pair);

    let t = Instant::now();
    let two_vm_exe = exes
        .iter()
        .find(|e| e.two_vm_target && e.display.contains(crate::selftest::LINK_CUT_EXE))
        .map(|e| e.path.clone());
    reports.push(crate::selftest::two_vm_pingpong(
        &mut h,
        two_vm_exe.as_deref(),
    )?);
    timings.push(format!(
        "two-VM pingpong: {:.0} s",
        t.elapsed().as_secs_f64()
    ));

    let t = Instant::now();
    let pair_exe = |name: &str| {
        exes.iter()
            .find(|e| e.two_vm_target && e.display.contains(name))
            .map(|e| e.path.clone())
    };
    let (library, nak) = (
        pair_exe(crate::lossy::LIBRARY_EXE),
        pair_exe(crate::lossy::NAK_EXE),
    );
    reports.push(crate::lossy::run(
        &mut h,
        crate::lossy::Exes {
            library: library.as_deref(),
            nak: nak.as_deref(),
        },
        crate::lossy::Scope {
            lossy: true,
            holes: true,
            rdma_core_black_hole: false,
            rdma_core_pingpong: false,
        },
    )?);
    timings.push(format!(
        "lossy link and black hole: {:.0} s",
        t.elapsed().as_secs_f64()
    ));

    // uverbs' C ABI under rdma-core's own tests and programs (xtask/src/capi_vm.rs).
    let opts = crate::capi_vm::Options {
        kernels: Series::ALL.to_vec(),
        pyverbs: true,
        programs: true,
        doc: None,
        rdma_core_as_uverbs: false,
    };
    match crate::prereq::ensure_capi()
        .and_then(|()| crate::capi_vm::sections(&mut h, &opts, &mut timings))
    {
        Ok(rs) => {
            for r in rs {
                r.print();
                reports.push(r);
            }
        }
        Err(e) => {
            let mut r = Report::new("uverbs C ABI");
            r.push(Item::fail("cargo xtask capi-vm", e.to_string()));
            r.print();
            reports.push(r);
        }
    }

    // The newcomer's demo (README's first command) must keep working: run it as CI does.
    let t = Instant::now();
    let mut r = Report::new("demo");
    match crate::demo::run() {
        Ok(true) => r.push(Item::pass("cargo xtask demo")),
        Ok(false) => r.push(Item::fail(
            "cargo xtask demo",
            "the demo script failed in the VM",
        )),
        Err(e) => r.push(Item::fail("cargo xtask demo", e.to_string())),
    }
    r.print();
    reports.push(r);
    timings.push(format!("demo: {:.0} s", t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let mut r = Report::new("harness failure handling");
    for i in crate::selftest::failure_and_timeout(&mut h)? {
        r.push(i);
    }
    r.print();
    reports.push(r);
    timings.push(format!(
        "failure/timeout self-test: {:.0} s",
        t.elapsed().as_secs_f64()
    ));

    println!("\ntimings: {}", timings.join("; "));
    println!("total: {:.0} s", start.elapsed().as_secs_f64());
    Ok(print_overall(&reports))
}

/// The name a test executable gets in the VM: its file name without cargo's `-<hash>`.
fn exe_guest_name(path: &std::path::Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    match file.rsplit_once('-') {
        Some((stem, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            stem.to_string()
        }
        _ => file,
    }
}

/// `cargo xtask vm -- <command>`.
pub fn vm_command(
    series: Series,
    arch: Arch,
    command: &str,
    timeout: Duration,
    boot_log: bool,
    test_exes: &[PathBuf],
) -> Result<bool> {
    let mut files = Vec::new();
    for exe in test_exes {
        crate::elf::ensure_static_for(exe, "--test-exe", arch)?;
        let name = exe_guest_name(exe);
        println!("xtask: {} -> /tests/{name}", exe.display());
        files.push((format!("tests/{name}"), exe.clone()));
    }
    // Our CLI is in the VM as /usr/bin/uverbs when it builds; a VM without it is still useful.
    let cli = match build_uverbs_cli_for(arch) {
        Ok(p) => Some(p),
        Err(e) => {
            println!("xtask: note: the uverbs CLI is not in this VM: {e}");
            None
        }
    };
    let mut h = Harness::for_arch(arch, cli);
    let echo = Echo {
        prefix: String::new(),
        step_banners: false,
        boot_messages: boot_log,
    };
    println!(
        "xtask: running in the {} {} VM: {command}",
        arch.label(),
        series.label()
    );
    let payload = command_payload(command, files);
    let run = h.run(series, &payload, timeout, echo)?;
    println!("xtask: {}", run.describe());
    if let Some(code) = run.step("cmd").and_then(|s| s.status) {
        if !run.success() {
            println!("xtask: the command's exit status: {code}");
        }
    }
    Ok(run.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_names_drop_the_cargo_hash() {
        let p = |s: &str| exe_guest_name(std::path::Path::new(s));
        assert_eq!(
            p("target/x/debug/deps/core_objects-1b78c3de3b21379b"),
            "core_objects"
        );
        assert_eq!(
            p("target/x/debug/deps/uverbs_uapi-c529f8c32789b6aa"),
            "uverbs_uapi"
        );
        assert_eq!(p("/tmp/my-tool"), "my-tool");
    }

    #[test]
    fn host_cargo_test_output_becomes_per_test_items() {
        let out: Vec<String> = "\
   Compiling uverbs v0.1.0 (/w)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 1.00s
     Running unittests src/lib.rs (/t/debug/deps/uverbs-0123456789abcdef)

running 2 tests
test a ... ok
test b ... ignored, needs an RDMA device
test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/faults.rs (/t/debug/deps/faults-fedcba9876543210)

running 1 test
test f ... FAILED
test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/crash.rs (/t/debug/deps/crash-00000000000000aa)

running 1 test
test c ... 
   Doc-tests uverbs

running 1 test
test src/lib.rs - (line 12) - compile ... ok
test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s
"
        .lines()
        .map(str::to_string)
        .collect();
        let names = [
            ("uverbs-0123456789abcdef", "uverbs::uverbs (lib)"),
            ("faults-fedcba9876543210", "uverbs::faults (test)"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let parts = split_cargo_test_output(&out, &names);
        assert_eq!(parts.len(), 4, "{parts:?}");
        let mut r = Report::new("host");
        cargo_test_items(&parts, &mut r);
        assert_eq!(
            item_states(&r),
            vec![
                ("uverbs::uverbs (lib)::a".to_string(), "pass"),
                ("uverbs::uverbs (lib)::b".to_string(), "skip"),
                ("uverbs::faults (test)::f".to_string(), "fail"),
                (
                    "tests/crash.rs (/t/debug/deps/crash-00000000000000aa)".to_string(),
                    "fail"
                ),
                (
                    "uverbs::doc-tests::src/lib.rs - (line 12) - compile".to_string(),
                    "pass"
                ),
            ]
        );
        assert_eq!(r.counts(), (2, 2, 1));
    }

    #[test]
    fn not_run_anywhere_leaves_out_tests_another_section_ran() {
        let mut host = Report::new("host");
        host.push(Item::skip("x::dev", "needs a device"));
        host.push(Item::skip("x::efa_hw_only", "needs EFA hardware"));
        host.push(Item::skip("x::two_vm", "needs two VMs"));
        let mut vm = Report::new("vm");
        vm.push(Item::pass("x::dev"));
        vm.push(Item::skip("x::efa_hw_only", "needs EFA hardware"));
        vm.push(Item::pass("x::two_vm [sender]"));
        let (ok, not_run) = print_overall_inner(&[host, vm]);
        assert!(ok);
        assert_eq!(not_run, ["x::efa_hw_only"]);
    }

    fn item_states(r: &Report) -> Vec<(String, &'static str)> {
        r.items
            .iter()
            .map(|i| {
                let s = match i.state {
                    State::Passed => "pass",
                    State::Failed(_) => "fail",
                    State::Skipped(_) => "skip",
                };
                (i.name.clone(), s)
            })
            .collect()
    }

    #[test]
    fn steps_become_per_test_items_and_crashes_are_failures() {
        use crate::vm::{Outcome, Step};
        let exe = |name: &str, names: &[&str], efa: bool| TestExe {
            display: name.into(),
            target: name.into(),
            path: PathBuf::from("/x"),
            guest_name: name.into(),
            efa_hw_target: efa,
            host_only_target: name.contains("host_only"),
            two_vm_target: name.contains("two_vm"),
            names: names.iter().map(|s| s.to_string()).collect(),
        };
        let exes = vec![
            exe("a", &["t1", "dev_efa_hw", "layout_host_only"], false),
            exe("c_layout_host_only", &["l1"], false),
            exe("efa_hw", &["x"], true),
            exe("crash", &["c1"], false),
            exe("faults_two_vm", &["cut"], false),
        ];
        let step = |name: &str, status: i32, out: &str| Step {
            name: name.into(),
            status: Some(status),
            timed_out: false,
            output: out.lines().map(str::to_string).collect(),
            secs: 0.1,
        };
        let run = Run {
            label: "k".into(),
            outcome: Outcome::Exited(1),
            steps: vec![
                step(
                    "test:a",
                    0,
                    "test t1 ... ok\ntest result: ok. 1 passed; 0 failed; 0 ignored",
                ),
                step(
                    "test:a:efa_hw",
                    0,
                    "test dev_efa_hw ... ignored, needs EFA hardware",
                ),
                step("test:efa_hw", 0, "test x ... ignored"),
                step("test:crash", 139, "test c1 ... "),
            ],
            boot_secs: Some(1.0),
            total_secs: 2.0,
            log: None,
            link_actions: Vec::new(),
        };
        let script = test_steps(&exes);
        assert!(
            script.contains(
                "step test:a 600 /tests/a --include-ignored --skip efa_hw --skip host_only --test-threads=1"
            ),
            "{script}"
        );
        assert!(
            script.contains(
                "step test:a:efa_hw 600 /tests/a efa_hw --skip host_only --test-threads=1"
            ),
            "{script}"
        );
        assert!(
            script.contains("step test:efa_hw 600 /tests/efa_hw --skip host_only --test-threads=1"),
            "{script}"
        );
        assert!(!script.contains("test:crash:efa_hw"), "{script}");
        assert!(!script.contains("/tests/c_layout_host_only"), "{script}");
        // The two-VM target runs only in the two-VM section.
        assert!(!script.contains("faults_two_vm"), "{script}");
        let mut r = Report::new("k");
        test_items(&run, &exes, &mut r);
        assert_eq!(
            item_states(&r),
            vec![
                ("a::layout_host_only".to_string(), "skip"),
                ("a::t1".to_string(), "pass"),
                ("a::dev_efa_hw".to_string(), "skip"),
                ("c_layout_host_only::l1".to_string(), "skip"),
                ("efa_hw::x".to_string(), "skip"),
                ("crash [test:crash]".to_string(), "fail"),
            ]
        );
        assert_eq!(r.counts(), (1, 1, 4));
        let State::Failed(why) = &r.items[5].state else {
            unreachable!()
        };
        assert!(why.contains("status 139") && why.contains("`c1`"), "{why}");
    }

    #[test]
    fn device_removal_runs_after_every_other_executable() {
        let exe = |pkg: &str, target: &str| TestExe {
            display: format!("{pkg}::{target} (test)"),
            target: target.into(),
            path: PathBuf::from("/x"),
            guest_name: format!("{pkg}-test-{target}"),
            efa_hw_target: false,
            host_only_target: false,
            two_vm_target: false,
            names: vec!["t".into()],
        };
        // Cargo's build order: device_removal finished building first.
        let mut exes = vec![
            exe("uverbs", "device_removal"),
            exe("uverbs", "srq"),
            exe("uverbs-cli", "perf_smoke"),
            exe("uverbs", "core_objects"),
        ];
        let steps = |exes: &[TestExe]| -> Vec<String> {
            test_steps(exes)
                .lines()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
                .collect()
        };
        let want = [
            "test:uverbs-cli-test-perf_smoke",
            "test:uverbs-test-core_objects",
            "test:uverbs-test-srq",
            "test:uverbs-test-device_removal",
        ];
        // test_steps orders whatever it is given ...
        assert_eq!(steps(&exes), want);
        // ... and the executables themselves are put in the same order, for the reports.
        in_vm_order(&mut exes);
        let order: Vec<&str> = exes.iter().map(|e| e.target.as_str()).collect();
        assert_eq!(
            order,
            ["perf_smoke", "core_objects", "srq", "device_removal"]
        );
        assert_eq!(steps(&exes), want);
        // Every name in RUNS_LAST is a test target of this workspace.
        let root = crate::util::workspace_root();
        for t in RUNS_LAST {
            assert!(
                root.join("tests").join(format!("{t}.rs")).is_file(),
                "RUNS_LAST names {t}, which is not tests/{t}.rs"
            );
        }
    }
}
