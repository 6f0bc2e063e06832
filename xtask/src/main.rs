//! `cargo xtask` — developer tasks for uverbs around a soft-RoCE (rxe) test VM.
//!
//! The VM is a Debian kernel (6.1 and 6.12 series) under qemu TCG with a busybox initramfs;
//! see docs/testing.md for how it works and how to use it.

mod aarch64;
mod bench;
mod capi;
mod capi_vm;
mod cpio;
mod demo;
mod elf;
mod fuzz;
mod guest;
mod harness;
mod kernel;
mod libtest;
mod lossy;
mod miri;
mod prereq;
mod selftest;
mod testrun;
mod userland;
mod util;
mod vm;

use std::process::ExitCode;
use std::time::Duration;

use kernel::{Arch, Series};
use util::{err, Result};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test                 everything CI runs: prerequisites, fmt, clippy, host tests, then the
                       test executables and the harness self-test in a VM on each kernel
                       (6.1 and 6.12), the aarch64 steps (providers' tests under qemu-user,
                       the arm64 6.12 VM), a two-VM ibv_rc_pingpong, the lossy-link pair
                       (below), and capi-vm (below) on both kernels; prints a summary
  demo                 boot the 6.12 VM and show rdma-core's and our view of its rxe device
  selftest [--kernel K]
                       the harness self-test alone (rxe device, ibv_rc_pingpong, and that a
                       failing or hanging command is reported as such)
  vm [--kernel K] [--arch A] [--timeout S] [--boot-log] [--test-exe PATH]... -- <shell command>
                       run a shell command in the VM (default kernel 6.12, timeout 600 s);
                       exits with the command's status. --test-exe copies a static
                       executable in as /tests/<name> (cargo's -<hash> suffix dropped).
                       --arch aarch64 boots Debian's arm64 kernel under
                       qemu-system-aarch64 (TCG, -M virt) with arm64 rdma-core tools
                       and the aarch64 uverbs CLI; A is x86_64 (default) or aarch64
  pingpong2            two VMs (6.1 and 6.12) joined by a link; rc pingpong across it, then
                       the link cut under an RC stream (tests/faults_two_vm.rs)
                       (rdma-core both sides, then uverbs server, then uverbs client),
                       and rping over rdma_cm (uverbs server, then uverbs client)
  aarch64 [--qemu-user | --vm | --pair]
                       the aarch64 steps of `test` alone (default all three): the
                       providers' and EFA-model tests for aarch64 under qemu-aarch64-static;
                       the arm64 6.12 VM with the self-test and every aarch64 test
                       executable; an x86-64 and an arm64 VM (6.12) joined by a link, our
                       aarch64 pingpong against rdma-core on x86-64 (rc, ud, both roles)
  capi-vm [--kernel K]... [--no-pyverbs] [--no-programs] [--doc FILE] [--rdma-core-as-uverbs]
                       uverbs' C ABI (capi/) in the VM (default both kernels): rdma-core's
                       pyverbs suite on rdma-core and on uverbs, compared test by test;
                       rdma-core's C programs (pingpongs, perftest, rping/ucmatose/udaddy)
                       with uverbs as server and as client; a static C program on
                       libibverbs.a. Fails if a test passing on rdma-core fails on uverbs.
                       --rdma-core-as-uverbs checks the harness: rdma-core's own
                       libibverbs.so.1/libefa.so.1 stand in for ours
  lossy [--black-hole | --nak-repro] [--rdma-core-black-hole] [--rdma-core-pingpong]
        [--nak-hunt N [--data NETEM] [--acks NETEM] [--perftest]]
                       two VMs (6.1 and 6.12) with tc netem on the link (loss, duplication,
                       reordering): every tool both ways, ours and rdma-core's, data
                       checked; the library's RC/UC/UD/SRQ paths; then, in both pairings,
                       a black hole under pingpong rc, perf write-bw and rping, and a
                       flapping link (--black-hole: those alone): both
                       sides must end within 30 s naming the cause, a 100 ms outage must be
                       survived; then rxe's invalid request NAK reproduced both ways
                       (tests/nak_two_vm.rs; --nak-repro: that alone), and a new pair runs
                       after it all. --rdma-core-black-hole
                       also black-holes ibv_rc_pingpong (it retries for ever; killing it
                       then has crashed 6.12's rxe); --rdma-core-pingpong also runs
                       ibv_rc_pingpong on the lossy link (now and then its last ACK is
                       lost after its server left, and it too retries for ever).
                       --nak-hunt N instead runs perf
                       write-bw N times each way on a worse link with rxe traced, and
                       counts the runs ending on a remote invalid request NAK: --data
                       NETEM sets the link, --acks NETEM other settings for the RoCE
                       acknowledgements alone, --perftest runs ib_write_bw instead
  kernels              fetch both kernels into the cache and print them
  fuzz [--seconds N] [--list] [TARGET...]
                       run the cargo-fuzz targets (fuzz/) one at a time, N s each
                       (default 60), and print executions and coverage per target
  miri                 the unit tests of uverbs-wr, uverbs-rxe, uverbs-efa and uverbs-uapi under Miri
                       (needs the nightly miri and rust-src components; part of `test`)
  capi [--features F,...]
                       build uverbs' libibverbs.so.1, libibverbs.a, libefa.so.1, libefa.a
                       (capi/) into target/capi/, then check their symbols and run a C
                       program built against rdma-core's headers on them, linked
                       dynamically and statically (part of `test`)
  bench [--reps N]     uverbs vs rdma-core (perftest, post/poll micro) in one 6.12 VM;
                       prints medians and ratios (minutes; not part of `test`)
  bench --host [--criterion]
                       instruction counts per WR/CQE (callgrind), criterion ring benches

K is 6.1 or 6.12. `test` and `demo` install missing packages (apt-get) and the
x86_64-unknown-linux-musl Rust target first.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Options shared by the VM commands.
struct VmArgs {
    kernels: Vec<Series>,
    arch: Arch,
    test_exes: Vec<std::path::PathBuf>,
    timeout: Option<Duration>,
    boot_log: bool,
    command: Vec<String>,
}

fn parse_vm_args(args: &[String]) -> Result<VmArgs> {
    let mut out = VmArgs {
        kernels: Vec::new(),
        arch: Arch::X86_64,
        test_exes: Vec::new(),
        timeout: None,
        boot_log: false,
        command: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--kernel" => {
                let v = it
                    .next()
                    .ok_or_else(|| err!("--kernel needs a value (6.1 or 6.12)"))?;
                out.kernels.push(Series::parse(v)?);
            }
            "--arch" => {
                let v = it
                    .next()
                    .ok_or_else(|| err!("--arch needs a value (x86_64 or aarch64)"))?;
                out.arch = Arch::parse(v)?;
            }
            "--timeout" => {
                let v = it
                    .next()
                    .ok_or_else(|| err!("--timeout needs a number of seconds"))?;
                let secs: u64 = v
                    .parse()
                    .map_err(|_| err!("--timeout {v}: not a number of seconds"))?;
                out.timeout = Some(Duration::from_secs(secs));
            }
            "--boot-log" => out.boot_log = true,
            "--test-exe" => {
                let v = it
                    .next()
                    .ok_or_else(|| err!("--test-exe needs the path of a static executable"))?;
                out.test_exes.push(v.into());
            }
            "--" => {
                out.command = it.cloned().collect();
                break;
            }
            other => return Err(err!("unknown option `{other}`\n\n{USAGE}")),
        }
    }
    Ok(out)
}

fn dispatch(args: &[String]) -> Result<bool> {
    let Some(cmd) = args.first() else {
        println!("{USAGE}");
        return Ok(false);
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "test" => {
            if !rest.is_empty() {
                return Err(err!("`cargo xtask test` takes no arguments (got {rest:?})"));
            }
            testrun::full()
        }
        "demo" => {
            prereq::ensure()?;
            demo::run()
        }
        "selftest" => {
            let a = parse_vm_args(rest)?;
            if a.arch != Arch::X86_64 {
                return Err(err!(
                    "`cargo xtask selftest` runs on x86_64 VMs; the aarch64 VM runs its self-test \
                     as part of `cargo xtask test` (or `cargo xtask vm --arch aarch64 -- ...`)"
                ));
            }
            prereq::ensure()?;
            let kernels = if a.kernels.is_empty() {
                Series::ALL.to_vec()
            } else {
                a.kernels
            };
            selftest::standalone(&kernels)
        }
        "vm" => {
            let a = parse_vm_args(rest)?;
            if a.command.is_empty() {
                return Err(err!("`cargo xtask vm` needs a command after `--`, e.g. `cargo xtask vm -- ibv_devinfo`"));
            }
            if a.kernels.len() > 1 {
                return Err(err!("`cargo xtask vm` runs one kernel; give --kernel once"));
            }
            prereq::ensure_arch(a.arch)?;
            let series = a.kernels.first().copied().unwrap_or(Series::V6_12);
            testrun::vm_command(
                series,
                a.arch,
                &a.command.join(" "),
                a.timeout.unwrap_or(Duration::from_secs(600)),
                a.boot_log,
                &a.test_exes,
            )
        }
        "aarch64" => {
            let (user, vm, pair) = match rest.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                [] => (true, true, true),
                ["--qemu-user"] => (true, false, false),
                ["--vm"] => (false, true, false),
                ["--pair"] => (false, false, true),
                _ => {
                    return Err(err!(
                        "`cargo xtask aarch64` takes one of --qemu-user, --vm, --pair (or nothing: \
                         all three); got {rest:?}"
                    ))
                }
            };
            prereq::ensure_arch(Arch::Aarch64)?;
            aarch64::command(user, vm, pair)
        }
        "pingpong2" => {
            prereq::ensure()?;
            // The uverbs variants run our CLI from the base image.
            let mut h = harness::Harness::new(Some(harness::build_uverbs_cli()?));
            // The link-cut fault test runs last in both VMs (tests/faults_two_vm.rs).
            let exe = testrun::build_one_test_exe(selftest::LINK_CUT_EXE)?;
            selftest::two_vm_pingpong(&mut h, Some(&exe)).map(|r| r.passed())
        }
        "lossy" => {
            prereq::ensure()?;
            let mut h = harness::Harness::new(Some(harness::build_uverbs_cli()?));
            let mut scope = lossy::Scope {
                lossy: true,
                holes: true,
                rdma_core_black_hole: false,
                rdma_core_pingpong: false,
            };
            let mut hunt: Option<lossy::Hunt> = None;
            let (mut data, mut acks, mut perftest) = (None, None, false);
            let mut it = rest.iter();
            while let Some(o) = it.next() {
                match o.as_str() {
                    "--black-hole" => scope.lossy = false,
                    "--nak-repro" => {
                        scope.lossy = false;
                        scope.holes = false;
                    }
                    "--rdma-core-black-hole" => scope.rdma_core_black_hole = true,
                    "--rdma-core-pingpong" => scope.rdma_core_pingpong = true,
                    "--nak-hunt" => {
                        let runs = it
                            .next()
                            .and_then(|n| n.parse::<u32>().ok())
                            .ok_or_else(|| err!("--nak-hunt takes a number of runs"))?;
                        hunt = Some(lossy::Hunt {
                            runs,
                            data: lossy::HUNT.to_string(),
                            acks: None,
                            perftest: false,
                        });
                    }
                    "--data" => data = it.next().cloned(),
                    "--acks" => acks = it.next().cloned(),
                    "--perftest" => perftest = true,
                    _ => {
                        return Err(err!(
                            "`cargo xtask lossy` takes --black-hole, --nak-repro, \
                             --rdma-core-black-hole, --rdma-core-pingpong and --nak-hunt N \
                             [--data NETEM] \
                             [--acks NETEM] [--perftest]"
                        ))
                    }
                }
            }
            if let Some(mut hunt) = hunt {
                hunt.data = data.unwrap_or(hunt.data);
                hunt.acks = acks;
                hunt.perftest = perftest;
                return lossy::hunt(&mut h, &hunt).map(|r| r.passed());
            }
            if data.is_some() || acks.is_some() || perftest {
                return Err(err!("--data, --acks and --perftest go with --nak-hunt N"));
            }
            let library = testrun::build_one_test_exe(lossy::LIBRARY_EXE)?;
            let nak = testrun::build_one_test_exe(lossy::NAK_EXE)?;
            let exes = lossy::Exes {
                library: Some(&library),
                nak: Some(&nak),
            };
            lossy::run(&mut h, exes, scope).map(|r| r.passed())
        }
        "kernels" => {
            for s in Series::ALL {
                let k = kernel::fetch(s, Arch::X86_64)?;
                println!(
                    "{}: {} -> {} ({})",
                    s.label(),
                    k.package,
                    k.vmlinuz.display(),
                    k.release
                );
            }
            Ok(true)
        }
        "capi-vm" => capi_vm::command(rest),
        "bench" => bench::run(rest),
        "capi" => capi::command(rest),
        "fuzz" => fuzz::command(rest),
        "miri" => miri::command(rest),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(true)
        }
        other => Err(err!("unknown command `{other}`\n\n{USAGE}")),
    }
}
