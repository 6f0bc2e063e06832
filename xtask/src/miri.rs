//! `cargo xtask miri`: the library unit tests of the crates with no syscalls (the providers' ring
//! logic and the uapi structs) under Miri, which checks every step for undefined behaviour
//! (out-of-bounds or misaligned access, use after free, data races, invalid values).
//! `cargo xtask test` runs it as a host step.
//!
//! Miri is a nightly component: `cargo xtask test` and `cargo xtask miri` install the nightly
//! toolchain and its `miri` and `rust-src` components first when they are missing
//! (`prereq::ensure_toolchain_components`); if that cannot be done, the run fails and says how
//! to install them. `cargo miri` builds into its own directory, `target/miri`,
//! so it never invalidates the normal build.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::testrun::{Item, Report, State};
use crate::util::{err, Result};

/// The packages whose tests run under Miri: no syscalls, no kernel, no device. `uverbs-efa`
/// includes the EFA QP table's lock-free epoch/generation protocol
/// (`providers/efa/src/table.rs`), whose threaded tests are where Miri finds a use after free
/// or a data race if the protocol is broken.
pub const PACKAGES: &[&str] = &["uverbs-wr", "uverbs-rxe", "uverbs-efa", "uverbs-uapi"];

/// Unit tests of the `uverbs` crate itself that run under Miri: they answer commands with an
/// in-process channel (no device, no mapping from the kernel), and the rest of the crate's
/// tests need syscalls Miri lacks. `mr::tests::` checks the `Mr` thread rules (writes through
/// `&mut`, reads shared) for data races; `rxe::qp::tests::doorbell` that the rxe doorbell's
/// response block stays valid for the kernel's write however the QP moves.
pub const CORE_TESTS: &[&str] = &["mr::tests::", "rxe::qp::tests::doorbell"];

/// The step's name in the report.
const STEP: &str = "cargo +nightly miri test";

/// What installs the toolchain pieces Miri needs.
const INSTALL: &str =
    "rustup toolchain install nightly --profile minimal --component miri,rust-src";

/// `cargo +nightly` through the rustup proxy (the `cargo` on PATH, not `$CARGO`, which is the
/// stable toolchain's own binary and does not understand `+nightly`).
fn nightly_cargo() -> Command {
    let mut c = Command::new("cargo");
    c.arg("+nightly").current_dir(crate::util::workspace_root());
    c
}

/// Checks that the nightly toolchain has the `miri` and `rust-src` components.
fn ensure_installed() -> Result<()> {
    let out = Command::new("rustup")
        .args(["+nightly", "component", "list", "--installed"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            err!("Miri needs rustup (running `rustup` failed: {e}); install it, then `{INSTALL}`")
        })?;
    if !out.status.success() {
        return Err(err!(
            "Miri needs a nightly toolchain, and `rustup +nightly component list` failed ({}): {}; install it with `{INSTALL}`",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let missing = missing_components(&String::from_utf8_lossy(&out.stdout));
    if !missing.is_empty() {
        return Err(err!(
            "the nightly toolchain lacks the component(s) {}; install them with `{INSTALL}`",
            missing.join(", ")
        ));
    }
    Ok(())
}

/// The components Miri needs that `rustup component list --installed` (one per line, e.g.
/// `miri-x86_64-unknown-linux-gnu`, `rust-src`) does not list.
fn missing_components(list: &str) -> Vec<&'static str> {
    ["miri", "rust-src"]
        .into_iter()
        .filter(|c| {
            !list
                .lines()
                .any(|l| l == *c || l.starts_with(&format!("{c}-")))
        })
        .collect()
}

/// Executable file name -> `package::target (kind)`, as the host section names its tests.
fn exe_names(pkgs: &[String]) -> Result<BTreeMap<String, String>> {
    let mut cmd = nightly_cargo();
    cmd.args([
        "miri",
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ])
    .args(pkgs)
    .stderr(Stdio::inherit());
    println!("$ {}", crate::util::show(&cmd));
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| err!("running {}: {e}", crate::util::show(&cmd)))?;
    if !out.status.success() {
        return Err(err!(
            "`{}` failed ({}); see the compiler output above",
            crate::util::show(&cmd),
            out.status
        ));
    }
    let mut names = BTreeMap::new();
    for v in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["profile"]["test"] == true)
    {
        let Some(exe) = v["executable"].as_str() else {
            continue;
        };
        let (pkg, target, kind) = crate::testrun::artifact_names(&v);
        let file = exe.rsplit('/').next().unwrap_or(exe).to_string();
        names.insert(file, format!("{pkg}::{target} ({kind})"));
    }
    Ok(names)
}

/// Runs the tests of [`PACKAGES`] under Miri, one item per test case, named like the host
/// section's with a ` [miri]` suffix (so a test Miri cannot run but the host ran is not
/// listed as "not run anywhere").
pub fn run(report: &mut Report) {
    let t = Instant::now();
    if let Err(e) = ensure_installed() {
        report.push(Item::fail(STEP, e.to_string()));
        return;
    }
    // `--lib`: the unit tests. The packages' integration tests (uapi's `*_host_only` C layout
    // checks) compile and run C programs, which Miri cannot.
    let pkgs: Vec<String> = PACKAGES
        .iter()
        .flat_map(|p| ["-p".to_string(), p.to_string()])
        .chain(["--lib".to_string()])
        .collect();
    run_pass(report, &pkgs, &[]);
    let core: Vec<String> = ["-p", "uverbs", "--lib"].map(String::from).into();
    let filters: Vec<String> = CORE_TESTS.iter().map(|f| f.to_string()).collect();
    run_pass(report, &core, &filters);
    println!("xtask: {STEP}: {:.0} s", t.elapsed().as_secs_f64());
}

/// One `cargo miri test` over `pkgs` (cargo's arguments), running the tests whose names
/// contain one of `filters` (all when empty).
fn run_pass(report: &mut Report, pkgs: &[String], filters: &[String]) {
    let names = match exe_names(pkgs) {
        Ok(n) => n,
        Err(e) => {
            report.push(Item::fail(STEP, e.to_string()));
            return;
        }
    };
    // One pipe for both streams, as in the host tests: cargo's `Running` lines (stderr) stay
    // in order with the tests' output (stdout).
    let mut args = pkgs.to_vec();
    if !filters.is_empty() {
        args.push("--".to_string());
        args.extend(filters.iter().cloned());
    }
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "exec cargo +nightly miri test \"$@\" 2>&1", "sh"])
        .args(&args)
        .current_dir(crate::util::workspace_root());
    println!("$ cargo +nightly miri test {} 2>&1", args.join(" "));
    let (lines, status) = match crate::util::run_tee(&mut cmd) {
        Ok(r) => r,
        Err(e) => {
            report.push(Item::fail(STEP, e.to_string()));
            return;
        }
    };
    for i in items(&lines, &names, status) {
        report.push(i);
    }
}

/// One item per test case in the output of `cargo miri test`, named with a ` [miri]` suffix;
/// a run that failed without a failing test line, or printed no test at all, is a failure.
fn items(
    lines: &[String],
    names: &BTreeMap<String, String>,
    status: std::process::ExitStatus,
) -> Vec<Item> {
    let mut mine = Report::new("miri");
    crate::testrun::cargo_test_items(
        &crate::testrun::split_cargo_test_output(lines, names),
        &mut mine,
    );
    let failed_any = mine
        .items
        .iter()
        .any(|i| matches!(i.state, State::Failed(_)));
    if !status.success() && !failed_any {
        // E.g. a compile error, or Miri stopping on undefined behaviour outside a test.
        mine.push(Item::fail(
            STEP,
            format!("failed ({status}) without a failing test line; see its output above"),
        ));
    }
    if mine.items.is_empty() {
        mine.push(Item::fail(STEP, "no test results in its output"));
    }
    for i in &mut mine.items {
        i.name.push_str(" [miri]");
    }
    mine.items
}

/// `cargo xtask miri`: [`run`] alone, with its summary line.
pub fn command(args: &[String]) -> Result<bool> {
    if !args.is_empty() {
        return Err(err!("`cargo xtask miri` takes no arguments (got {args:?})"));
    }
    crate::prereq::ensure_toolchain_components();
    let mut report = Report::new("miri");
    run(&mut report);
    report.print();
    Ok(report.passed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn missing_components_are_named() {
        let all = "cargo-x86_64-unknown-linux-gnu\nmiri-x86_64-unknown-linux-gnu\nrust-src\n";
        assert!(missing_components(all).is_empty());
        assert_eq!(
            missing_components("cargo-x86_64-unknown-linux-gnu\nrust-src\n"),
            vec!["miri"]
        );
        assert_eq!(missing_components(""), vec!["miri", "rust-src"]);
    }

    #[test]
    fn items_are_named_like_the_host_tests_and_ub_is_a_failure() {
        let names: BTreeMap<String, String> = [(
            "uverbs_efa-0123".to_string(),
            "uverbs-efa::uverbs_efa (lib)".to_string(),
        )]
        .into();
        // Miri stopping on undefined behaviour inside a test: no `test result:` line.
        let out: Vec<String> = "\
     Running unittests src/lib.rs (target/miri/x86_64-unknown-linux-gnu/debug/deps/uverbs_efa-0123)

running 2 tests
test wrid::tests::generation_bits ... ok
test sq::tests::ring ... error: Undefined Behavior: out-of-bounds pointer use
error: aborting due to 1 previous error
"
        .lines()
        .map(str::to_string)
        .collect();
        let got = items(&out, &names, std::process::ExitStatus::from_raw(1 << 8));
        let named: Vec<(&str, bool)> = got
            .iter()
            .map(|i| (i.name.as_str(), matches!(i.state, State::Passed)))
            .collect();
        assert_eq!(
            named,
            vec![
                (
                    "uverbs-efa::uverbs_efa (lib)::wrid::tests::generation_bits [miri]",
                    true
                ),
                ("uverbs-efa::uverbs_efa (lib) [miri]", false),
            ]
        );
        match &got[1].state {
            State::Failed(why) => assert!(why.contains("sq::tests::ring"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A run that printed no test at all fails too.
        let none = items(&[], &names, std::process::ExitStatus::from_raw(0));
        assert_eq!(none.len(), 1);
        assert!(matches!(none[0].state, State::Failed(_)));
    }
}
