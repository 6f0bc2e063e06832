//! The aarch64 (Graviton-class) steps of `cargo xtask test`:
//!
//! - **qemu-user**: the providers' tests (uverbs-rxe, uverbs-efa, uverbs-uapi unit tests) and
//!   the EFA tests against the device model (`tests/efa_*.rs`) built for
//!   `aarch64-unknown-linux-musl` and run by `qemu-aarch64-static` on the host (cargo's runner
//!   for that target, set for this step only).
//! - **VM**: Debian's arm64 6.12 kernel under `qemu-system-aarch64` (TCG, `-M virt`) with
//!   rxe on a veth, arm64 rdma-core tools and our aarch64 CLI; the harness self-test and the
//!   aarch64 device test executables run inside (`tests/pingpong_interop.rs` is the pingpong
//!   interop against rdma-core's arm64 `ibv_*_pingpong`, all modes, both roles).
//!
//! TCG on an x86-64 host keeps x86's strong memory order, so these runs show the code works
//! on arm64; the orderings themselves are argued in the providers' barrier comments and
//! checked by the ring tests under Miri (docs/testing.md).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::guest::{Net, Payload};
use crate::harness::{build_uverbs_cli_for, Harness};
use crate::kernel::{Arch, Series};
use crate::testrun::{Item, Report, State};
use crate::vm::Echo;

const ARCH: Arch = Arch::Aarch64;
/// The runner cargo uses for the aarch64 musl target in the qemu-user step.
const RUNNER_ENV: &str = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER";
const QEMU_USER: &str = "qemu-aarch64-static";
/// The kernel series the aarch64 VM step boots.
pub const SERIES: Series = Series::V6_12;
/// Hard limit for the aarch64 VM's whole test boot (arm64 TCG is slower than x86-64 TCG).
const VM_TIMEOUT: Duration = Duration::from_secs(2400);

/// The cargo arguments of the qemu-user step: unit tests of the providers and uapi (`--lib`:
/// uapi's integration tests compile C layout checks for the host), and the EFA tests that run
/// against the device model.
fn qemu_user_args() -> Vec<&'static str> {
    vec![
        "-p",
        "uverbs-wr",
        "-p",
        "uverbs-rxe",
        "-p",
        "uverbs-efa",
        "-p",
        "uverbs-uapi",
        "--lib",
        "-p",
        "uverbs",
        // The SRD pingpong's test moved with the CLI to the uverbs-cli package.
        "-p",
        "uverbs-cli",
        "--test",
        "efa_verbs",
        "--test",
        "efa_pingpong",
        "--test",
        "efa_objects",
        "--test",
        "efa_poll_ex",
        "--test",
        "efa_query",
    ]
}

/// Runs the qemu-user step into `report`, one item per test case with an ` [aarch64]` suffix.
pub fn qemu_user_tests(report: &mut Report) {
    const STEP: &str = "aarch64 tests under qemu-user";
    let t = Instant::now();
    let root = crate::util::workspace_root();
    let target = ARCH.musl_target();
    let runner = match crate::util::find_program(QEMU_USER) {
        Some(p) => p,
        None => {
            report.push(Item::fail(
                STEP,
                format!("{QEMU_USER} is not installed (package qemu-user-static)"),
            ));
            return;
        }
    };
    let mut build = Command::new(crate::util::cargo());
    build
        .args(["test", "--no-run", "--target", target])
        .args(qemu_user_args())
        .arg("--message-format=json-render-diagnostics")
        .current_dir(&root)
        .stderr(std::process::Stdio::inherit());
    println!("$ {}", crate::util::show(&build));
    let mut names = BTreeMap::new();
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
                let (pkg, tgt, kind) = crate::testrun::artifact_names(&v);
                let file = exe.rsplit('/').next().unwrap_or(exe).to_string();
                names.insert(file, format!("{pkg}::{tgt} ({kind})"));
            }
            if !out.status.success() {
                report.push(Item::fail(
                    STEP,
                    format!(
                        "the aarch64 test executables did not build ({}); see the compiler output above",
                        out.status
                    ),
                ));
                return;
            }
        }
        Err(e) => {
            report.push(Item::fail(
                STEP,
                format!("{}: {e}", crate::util::show(&build)),
            ));
            return;
        }
    }
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "exec \"$0\" test \"$@\" 2>&1"])
        .arg(crate::util::cargo())
        .args(["--target", target])
        .args(qemu_user_args())
        .env(RUNNER_ENV, &runner)
        .current_dir(&root);
    println!(
        "$ {RUNNER_ENV}={} cargo test --target {target} {} 2>&1",
        runner.display(),
        qemu_user_args().join(" ")
    );
    let (lines, status) = match crate::util::run_tee(&mut cmd) {
        Ok(r) => r,
        Err(e) => {
            report.push(Item::fail(STEP, e.to_string()));
            return;
        }
    };
    let mut mine = Report::new(STEP);
    crate::testrun::cargo_test_items(
        &crate::testrun::split_cargo_test_output(&lines, &names),
        &mut mine,
    );
    let failed_any = mine
        .items
        .iter()
        .any(|i| matches!(i.state, State::Failed(_)));
    if !status.success() && !failed_any {
        mine.push(Item::fail(
            STEP,
            format!("failed ({status}) without a failing test line; see its output above"),
        ));
    }
    if mine.items.is_empty() {
        mine.push(Item::fail(STEP, "no test results in its output"));
    }
    for mut i in mine.items {
        i.name.push_str(" [aarch64]");
        report.push(i);
    }
    println!("xtask: {STEP}: {:.0} s", t.elapsed().as_secs_f64());
}

/// The aarch64 VM section: builds the aarch64 CLI and test executables (into `host`'s
/// report), boots the arm64 kernel once with the self-test and every test executable, and
/// returns the section's report. `timings` gets the section's times.
pub fn vm_section(host: &mut Report, timings: &mut Vec<String>) -> Report {
    let t = Instant::now();
    let title = format!("aarch64 kernel {}", SERIES.label());
    let mut r = Report::new(&title);
    if let Err(e) = crate::prereq::ensure_arch(ARCH) {
        r.push(Item::fail("aarch64 prerequisites", e.to_string()));
        return r;
    }
    let cli = match build_uverbs_cli_for(ARCH) {
        Ok(p) => {
            host.push(Item::pass("build uverbs CLI (aarch64 musl, static)"));
            Some(p)
        }
        Err(e) => {
            host.push(Item::fail(
                "build uverbs CLI (aarch64 musl, static)",
                e.to_string(),
            ));
            None
        }
    };
    let exes = match crate::testrun::build_test_exes_for(ARCH) {
        Ok(b) => {
            match b.build_error {
                None => host.push(Item::pass("build test executables (aarch64 musl, static)")),
                Some(e) => host.push(Item::fail(
                    "build test executables (aarch64 musl, static)",
                    e,
                )),
            }
            b.exes
        }
        Err(e) => {
            host.push(Item::fail(
                "build test executables (aarch64 musl, static)",
                e.to_string(),
            ));
            Vec::new()
        }
    };
    let build_secs = t.elapsed().as_secs_f64();
    let mut h = Harness::for_arch(ARCH, cli);
    let files: Vec<(String, PathBuf)> = exes
        .iter()
        .filter(|e| !e.two_vm_target)
        .map(|e| (format!("tests/{}", e.guest_name), e.path.clone()))
        .collect();
    let payload = Payload {
        net: Net::Veth {
            addr: "10.99.0.1/24".into(),
        },
        script: format!(
            "rc=0\n{}{}exit $rc\n",
            crate::selftest::IN_VM_STEPS,
            crate::testrun::test_steps(&exes)
        ),
        files,
    };
    let echo = Echo {
        prefix: format!("[aarch64 {}] ", SERIES.label()),
        step_banners: true,
        boot_messages: false,
    };
    println!(
        "\nxtask: ==== {title}: self-test and {} aarch64 test executables in one VM boot ====",
        exes.len()
    );
    match h.run(SERIES, &payload, VM_TIMEOUT, echo) {
        Ok(run) => {
            println!("xtask: {}", run.describe());
            timings.push(format!(
                "{title}: builds {build_secs:.0} s, boot {} s, run {:.0} s",
                run.boot_secs
                    .map(|b| format!("{b:.1}"))
                    .unwrap_or_else(|| "-".into()),
                run.total_secs
            ));
            for i in crate::selftest::in_vm_items(&run) {
                r.push(i);
            }
            crate::testrun::test_items(&run, &exes, &mut r);
            if !run.success() && r.passed() {
                r.push(Item::fail("VM run", run.describe()));
            }
        }
        Err(e) => r.push(Item::fail("VM run", e.to_string())),
    }
    // Qualify the names so the summary keeps the x86-64 and aarch64 runs of a test apart.
    for i in &mut r.items {
        i.name.push_str(" [aarch64]");
    }
    r
}

/// `cargo xtask aarch64 [--qemu-user | --vm]`: the aarch64 steps alone, with a summary.
pub fn command(user: bool, vm: bool, pair: bool) -> crate::util::Result<bool> {
    let start = Instant::now();
    let mut host = Report::new("aarch64 host (qemu-user)");
    let mut timings = Vec::new();
    if user {
        let t = Instant::now();
        qemu_user_tests(&mut host);
        timings.push(format!(
            "qemu-user tests: {:.0} s",
            t.elapsed().as_secs_f64()
        ));
    }
    let mut reports = Vec::new();
    if vm {
        let r = vm_section(&mut host, &mut timings);
        host.print();
        r.print();
        reports.push(host);
        reports.push(r);
    } else if user {
        host.print();
        reports.push(host);
    }
    if pair {
        let mut h = Report::new("aarch64 two-VM builds");
        let r = mixed_pair(&mut h, &mut timings);
        r.print();
        reports.push(h);
        reports.push(r);
    }
    println!("\ntimings: {}", timings.join("; "));
    println!("total: {:.0} s", start.elapsed().as_secs_f64());
    Ok(crate::testrun::print_overall(&reports))
}

/// An x86-64 VM and an arm64 VM (both 6.12) joined by a link (`-netdev dgram`): our aarch64
/// `uverbs pingpong` against rdma-core's x86-64 `ibv_{rc,ud}_pingpong`, RC and UD, as client
/// (servers in the x86-64 VM A) and as server (servers in the arm64 VM B). Steps run in order
/// in each VM; a client retries until its server listens.
pub fn mixed_pair(host: &mut Report, timings: &mut Vec<String>) -> Report {
    let t = Instant::now();
    let title = "two VMs (x86_64 6.12 <-> aarch64 6.12)";
    let mut r = Report::new(title);
    let cli = |arch: Arch, host: &mut Report| match build_uverbs_cli_for(arch) {
        Ok(p) => Some(p),
        Err(e) => {
            host.push(Item::fail(
                &format!("build uverbs CLI ({} musl, static)", arch.label()),
                e.to_string(),
            ));
            None
        }
    };
    let (x86_cli, arm_cli) = (cli(Arch::X86_64, host), cli(ARCH, host));
    if x86_cli.is_none() || arm_cli.is_none() {
        r.push(Item::fail(title, "not run: a uverbs CLI did not build"));
        return r;
    }
    let mut h = Harness::new(x86_cli);
    h.add_arch(ARCH, arm_cli);
    const A: &str = "10.99.1.1";
    const B: &str = "10.99.1.2";
    let ours = |mode: &str| format!("/usr/bin/uverbs pingpong {mode}{}", size(mode));
    let theirs = |mode: &str| format!("/usr/bin/ibv_{mode}_pingpong{}", size(mode));
    // (mode, step name, server VM is A?)
    let runs = [
        ("rc", "rc-x86-ibv-server-arm-uverbs-client", true),
        ("ud", "ud-x86-ibv-server-arm-uverbs-client", true),
        ("rc", "rc-arm-uverbs-server-x86-ibv-client", false),
        ("ud", "ud-arm-uverbs-server-x86-ibv-client", false),
    ];
    let mut sa = String::from("rc=0\n");
    let mut sb = String::from("rc=0\n");
    for (mode, name, server_in_a) in runs {
        let (server_script, client_script, server_tool, client_tool, server_addr) = if server_in_a {
            (&mut sa, &mut sb, theirs(mode), ours(mode), A)
        } else {
            (&mut sb, &mut sa, ours(mode), theirs(mode), B)
        };
        server_script.push_str(&format!(
            "step {name} 240 /lib/uverbs/rc_pingpong_server.sh 200 {server_tool} || rc=1\n"
        ));
        client_script.push_str(&format!(
            "step {name} 240 /lib/uverbs/rc_pingpong_client.sh {server_addr} 200 {client_tool} || rc=1\n"
        ));
    }
    sa.push_str("exit $rc\n");
    sb.push_str("exit $rc\n");
    let payload = |addr: &str, script: String| Payload {
        net: Net::Nic {
            addr: format!("{addr}/24"),
        },
        script,
        files: Vec::new(),
    };
    let (pa, pb) = (payload(A, sa), payload(B, sb));
    println!(
        "\nxtask: ==== {title}: our aarch64 pingpong against rdma-core on x86-64, rc and ud, both roles ===="
    );
    let (a, b) = match h.run_pair_on(
        (Arch::X86_64, SERIES, &pa),
        (ARCH, SERIES, &pb),
        Duration::from_secs(900),
        None,
    ) {
        Ok(p) => p,
        Err(e) => {
            r.push(Item::fail(title, e.to_string()));
            return r;
        }
    };
    for run in [&a, &b] {
        println!("xtask: {}", run.describe());
    }
    for (_, name, server_in_a) in runs {
        let (server, client) = if server_in_a { (&a, &b) } else { (&b, &a) };
        for (run, role) in [(server, "server"), (client, "client")] {
            let item = format!("two_vm_mixed::{name}_{role}");
            match run.step(name) {
                None => r.push(Item::fail(
                    &item,
                    format!("did not run: {}", run.describe()),
                )),
                Some(s) => match (s.status, crate::selftest::check_pingpong(&s.output, &[""])) {
                    (Some(0), Ok(())) => r.push(Item::pass(&item)),
                    (status, check) => r.push(Item::fail(
                        &item,
                        format!(
                            "exit status {status:?}{}",
                            check.err().map(|e| format!(": {e}")).unwrap_or_default()
                        ),
                    )),
                },
            }
        }
    }
    timings.push(format!("{title}: {:.0} s", t.elapsed().as_secs_f64()));
    r
}

/// UD sends one packet per message: fit rxe's 1024-byte path MTU on a 1500-byte link.
fn size(mode: &str) -> &'static str {
    if mode == "ud" {
        " -s 1024"
    } else {
        ""
    }
}
