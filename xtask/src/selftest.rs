//! The harness self-test: inside the VM rdma-core sees the rxe device and an ibv_rc_pingpong
//! pair completes on it; a failing command makes the harness report failure; a hanging one is
//! killed at the timeout; two VMs run ibv_rc_pingpong across a link.

use std::path::Path;
use std::time::Duration;

use crate::guest::{Net, Payload};
use crate::harness::{command_payload, Harness};
use crate::kernel::Series;
use crate::testrun::{Item, Report};
use crate::util::Result;
use crate::vm::{Echo, Outcome, Run, Step};

/// Payload lines (for `/payload.sh`) running the in-VM self-test steps; `rc` collects failures.
pub const IN_VM_STEPS: &str = "\
step selftest-ibv_devinfo 60 /usr/bin/ibv_devinfo -d rxe0 || rc=1
step selftest-rc_pingpong 180 /lib/uverbs/rc_pingpong_local.sh 100 || rc=1
";

/// `ibv_devinfo` saw rxe0 with an active port.
pub fn check_devinfo(output: &[String]) -> Result<(), String> {
    let hca = output.iter().any(|l| {
        let mut w = l.split_whitespace();
        w.next() == Some("hca_id:") && w.next() == Some("rxe0")
    });
    let active = output
        .iter()
        .any(|l| l.contains("state:") && l.contains("PORT_ACTIVE"));
    match (hca, active) {
        (true, true) => Ok(()),
        (false, _) => Err("ibv_devinfo did not list `hca_id: rxe0`".into()),
        (true, false) => Err("ibv_devinfo did not show rxe0's port as PORT_ACTIVE".into()),
    }
}

/// Both sides of an ibv_rc_pingpong printed `N iters in S seconds`.
pub fn check_pingpong(output: &[String], sides: &[&str]) -> Result<(), String> {
    let done = |prefix: &str| {
        output.iter().any(|l| {
            let l = l
                .strip_prefix(prefix)
                .unwrap_or(if prefix.is_empty() { l } else { "" });
            l.contains(" iters in ") && l.contains(" seconds")
        })
    };
    let missing: Vec<&str> = sides.iter().copied().filter(|s| !done(s)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "no `... iters in ... seconds` line from {}",
            missing
                .iter()
                .map(|s| if s.is_empty() {
                    "the program"
                } else {
                    s.trim_end_matches(": ")
                })
                .collect::<Vec<_>>()
                .join(" and ")
        ))
    }
}

fn step_item(
    run: &Run,
    name: &str,
    item: &str,
    check: impl Fn(&Step) -> Result<(), String>,
) -> Item {
    match run.step(name) {
        None => Item::fail(item, format!("did not run: {}", run.describe())),
        Some(s) if s.timed_out => Item::fail(item, format!("timed out after {:.0} s", s.secs)),
        Some(s) => match (s.status, check(s)) {
            (Some(0), Ok(())) => Item::pass(item),
            (Some(0), Err(e)) => Item::fail(item, e),
            (status, Err(e)) => Item::fail(item, format!("exit status {status:?}: {e}")),
            (status, Ok(())) => Item::fail(item, format!("exit status {status:?}")),
        },
    }
}

/// Results of [`IN_VM_STEPS`] in `run`.
pub fn in_vm_items(run: &Run) -> Vec<Item> {
    vec![
        step_item(
            run,
            "selftest-ibv_devinfo",
            "selftest::ibv_devinfo_sees_rxe0",
            |s| check_devinfo(&s.output),
        ),
        step_item(
            run,
            "selftest-rc_pingpong",
            "selftest::ibv_rc_pingpong_local",
            |s| check_pingpong(&s.output, &["server: ", "client: "]),
        ),
    ]
}

/// A deliberately failing command is a test failure with its status, a hanging one is
/// killed at the timeout with a TIMEOUT outcome (two short boots of the 6.1 kernel), and a
/// stalled NIC or a dead guest in one VM of a pair stops both.
pub fn failure_and_timeout(h: &mut Harness) -> Result<Vec<Item>> {
    let quiet = || Echo {
        prefix: "[selftest] ".into(),
        step_banners: false,
        boot_messages: false,
    };
    let mut items = Vec::new();
    println!(
        "xtask: self-test: a command failing with status 3 must be reported as a test failure"
    );
    let mut fail = h.run(
        Series::V6_1,
        &command_payload("echo 'deliberate failure'; exit 3", vec![]),
        Duration::from_secs(300),
        quiet(),
    )?;
    let name = "selftest::failing_command_is_a_failure";
    if fail.outcome == Outcome::Exited(3)
        && !fail.success()
        && fail.describe().contains("TEST FAILURE")
    {
        items.push(Item::pass(name));
        fail.discard_log();
        println!("xtask: as expected, the harness says: {}", fail.describe());
    } else {
        items.push(Item::fail(
            name,
            format!(
                "expected a test failure with status 3, got: {}",
                fail.describe()
            ),
        ));
    }

    // Time the hang run so the timeout lands well after boot even on a slow machine.
    let limit = Duration::from_secs((fail.total_secs as u64 + 20).max(40));
    println!(
        "xtask: self-test: `sleep 1000` must be killed at the {} s timeout",
        limit.as_secs()
    );
    let mut hang = h.run(
        Series::V6_1,
        &command_payload("echo 'hanging now'; sleep 1000", vec![]),
        limit,
        quiet(),
    )?;
    let name = "selftest::hang_is_killed_at_timeout";
    let killed_in_time = hang.total_secs < limit.as_secs_f64() + 25.0;
    match &hang.outcome {
        Outcome::TimedOut { in_step, .. }
            if in_step.as_deref() == Some("cmd") && killed_in_time =>
        {
            items.push(Item::pass(name));
            hang.discard_log();
            println!("xtask: as expected, the harness says: {}", hang.describe());
        }
        _ => items.push(Item::fail(
            name,
            format!(
                "expected a TIMEOUT in step `cmd` within {} s, got: {} after {:.0} s",
                limit.as_secs(),
                hang.describe(),
                hang.total_secs
            ),
        )),
    }
    items.push(nic_stall_stops_the_pair(h, limit)?);
    items.push(dead_guest_stops_the_pair(h, limit)?);
    Ok(items)
}

/// A pair whose A's kernel crashes (`sysrq c`) while B hangs: A is a dead guest, and B must
/// be stopped within seconds rather than run out its steps.
fn dead_guest_stops_the_pair(h: &mut Harness, limit: Duration) -> Result<Item> {
    println!("xtask: self-test: a guest that dies in one VM of a pair must stop the other");
    fault_pair(
        h,
        limit,
        "echo c > /proc/sysrq-trigger",
        "selftest::dead_guest_stops_the_other_vm_of_a_pair",
        "A's guest dead and B stopped",
        |ra, rb| match (&ra.outcome, &rb.outcome) {
            (Outcome::Died(_), Outcome::Aborted(wb)) => {
                wb.contains("other VM") && rb.total_secs < limit.as_secs_f64()
            }
            _ => false,
        },
    )
}

/// A pair of VMs (A 6.1, B 6.12) for the fault self-tests: A runs `fault` 2 s in and then
/// hangs, B hangs; both should be stopped long before the pair's own limit (`limit` plus a
/// minute). The item `name` passes when `stopped_as_expected` (what it checks: `expected`).
fn fault_pair(
    h: &mut Harness,
    limit: Duration,
    fault: &str,
    name: &str,
    expected: &str,
    stopped_as_expected: impl Fn(&Run, &Run) -> bool,
) -> Result<Item> {
    let payload = |addr: &str, script: String| Payload {
        net: Net::Nic {
            addr: format!("{addr}/24"),
        },
        script,
        files: vec![],
    };
    let a = payload(
        "10.99.1.1",
        format!("step cmd 0 sh -c 'sleep 2; {fault}; sleep 1000'\n"),
    );
    let b = payload("10.99.1.2", "step cmd 0 sleep 1000\n".to_string());
    let (mut ra, mut rb) = h.run_pair(
        (Series::V6_1, &a),
        (Series::V6_12, &b),
        limit + Duration::from_secs(60),
        None,
    )?;
    if stopped_as_expected(&ra, &rb) {
        let first = ra.describe();
        println!(
            "xtask: as expected, the harness says: {}",
            first.lines().next().unwrap_or("")
        );
        println!("xtask: and: {}", rb.describe());
        ra.discard_log();
        rb.discard_log();
        return Ok(Item::pass(name));
    }
    Ok(Item::fail(
        name,
        format!(
            "expected {expected} within {} s, got: {} after {:.0} s; {} after {:.0} s",
            limit.as_secs(),
            ra.describe(),
            ra.total_secs,
            rb.describe(),
            rb.total_secs
        ),
    ))
}

/// A pair of VMs whose A prints the guest's stalled-NIC line ([`crate::vm::NIC_STALL`]) and
/// then hangs, as does B: both must stop within seconds, A naming the line and B following.
fn nic_stall_stops_the_pair(h: &mut Harness, limit: Duration) -> Result<Item> {
    println!("xtask: self-test: a stalled NIC in one VM of a pair must stop both at once");
    let quick = move |r: &Run| r.total_secs < limit.as_secs_f64();
    fault_pair(
        h,
        limit,
        "echo \"virtio_net virtio0 eth0: NETDEV WATCHDOG: (harness self-test)\"",
        "selftest::nic_stall_stops_both_vms_of_a_pair",
        "both VMs stopped on the fault",
        |ra, rb| match (&ra.outcome, &rb.outcome) {
            (Outcome::Aborted(wa), Outcome::Aborted(wb)) => {
                wa.starts_with("its console said")
                    && wb.contains("other VM")
                    && quick(ra)
                    && quick(rb)
            }
            _ => false,
        },
    )
}

/// VM A (6.1) runs the ibv_rc_pingpong server, VM B (6.12) the client, across a virtio-net
/// link (qemu `-netdev dgram` on 127.0.0.1), each with rxe0 on its eth0. Then the same with
/// our `uverbs pingpong rc` (from the base image's `/usr/bin/uverbs`): ours as server in A with
/// rdma-core's client in B, and rdma-core's server in A with ours as client in B.
/// rping across the two VMs: (step in A, server in A, step in B, client in B, report name).
const RPING_PAIRS: [(&str, &str, &str, &str, &str); 2] = [
    (
        "uverbs-rping-server",
        "/usr/bin/uverbs rping",
        "rping-client",
        "/usr/bin/rping",
        "uverbs_rping_server_rping_client",
    ),
    (
        "rping-server",
        "/usr/bin/rping",
        "uverbs-rping-client",
        "/usr/bin/uverbs rping",
        "rping_server_uverbs_rping_client",
    ),
];

pub fn two_vm_pingpong(h: &mut Harness, link_cut_exe: Option<&Path>) -> Result<Report> {
    const OURS: &str = "/usr/bin/uverbs pingpong rc";
    const RDMA_CORE: &str = "/usr/bin/ibv_rc_pingpong";
    // (step name in A, tool in A, step name in B, tool in B, report name)
    let pairs = [
        (
            "pingpong-server",
            RDMA_CORE,
            "pingpong-client",
            RDMA_CORE,
            "rc_pingpong",
        ),
        (
            "uverbs-server",
            OURS,
            "ibv-client",
            RDMA_CORE,
            "uverbs_server_ibv_client",
        ),
        (
            "ibv-server",
            RDMA_CORE,
            "uverbs-client",
            OURS,
            "ibv_server_uverbs_client",
        ),
    ];
    let mut sa = String::from("rc=0\n");
    let mut sb = String::from("rc=0\n");
    for (na, ta, nb, tb, _) in pairs {
        sa.push_str(&format!(
            "step {na} 240 /lib/uverbs/rc_pingpong_server.sh 200 {ta} || rc=1\n"
        ));
        sb.push_str(&format!(
            "step {nb} 240 /lib/uverbs/rc_pingpong_client.sh 10.99.1.1 200 {tb} || rc=1\n"
        ));
    }
    // rping over rdma_cm across the link, both ways: rdma-core's rping client in B against
    // our server in A, then ours in B against rdma-core's in A. The client retries until the
    // server listens (the VMs' steps are not otherwise synchronised).
    for (na, ta, nb, tb, _) in RPING_PAIRS {
        sa.push_str(&format!(
            "step {na} 240 {ta} -s -a 10.99.1.1 -p 7174 -v || rc=1\n"
        ));
        sb.push_str(&format!(
            "step {nb} 240 sh -c 'i=0; while [ $i -lt 120 ]; do {tb} -c -a 10.99.1.1 -p 7174 -C 20 -v -V && exit 0; i=$((i+1)); usleep 500000; done; exit 1' || rc=1\n"
        ));
    }
    // Last (they take the links down): the link-cut fault test, first with the sender in A
    // (6.1) and B's link cut, then B's link back up and the roles swapped (sender on 6.12,
    // A's link cut).
    let mut files = vec![];
    if let Some(exe) = link_cut_exe {
        files.push((format!("tests/{LINK_CUT_EXE}"), exe.to_path_buf()));
        let step = |name: &str, role: &str, peer: &str| {
            format!(
                "step {name} 240 env UVERBS_TWO_VM_ROLE={role} UVERBS_TWO_VM_PEER={peer} \
                 /tests/{LINK_CUT_EXE} --include-ignored --test-threads=1 {LINK_CUT_TEST} || rc=1\n"
            )
        };
        sa.push_str(&step(LINK_CUT_STEPS[0], "sender", "10.99.1.2"));
        sa.push_str(&step(LINK_CUT_STEPS[1], "receiver", "10.99.1.2"));
        sb.push_str(&step(LINK_CUT_STEPS[0], "receiver", "10.99.1.1"));
        sb.push_str(&format!("echo {LINK_UP_MARKER}\n"));
        sb.push_str(&step(LINK_CUT_STEPS[1], "sender", "10.99.1.1"));
    }
    sa.push_str("exit $rc\n");
    sb.push_str("exit $rc\n");
    let server = Payload {
        net: Net::Nic {
            addr: "10.99.1.1/24".into(),
        },
        script: sa,
        files: files.clone(),
    };
    let client = Payload {
        net: Net::Nic {
            addr: "10.99.1.2/24".into(),
        },
        script: sb,
        files,
    };
    println!("xtask: two VMs joined by a link: rc pingpong servers in A (6.1, 10.99.1.1), clients in B (6.12, 10.99.1.2): ibv<->ibv, uverbs<->ibv, ibv<->uverbs; then rping over rdma_cm: uverbs<->rping, rping<->uverbs");
    let (a, b) = h.run_pair(
        (Series::V6_1, &server),
        (Series::V6_12, &client),
        Duration::from_secs(600),
        link_cut_exe.map(|_| (LINK_CUT_MARKER, LINK_UP_MARKER)),
    )?;
    for r in [&a, &b] {
        if !r.success() {
            println!("xtask: {}", r.describe());
        }
    }
    let mut report = Report::new("two VMs (6.1 <-> 6.12)");
    for (na, _, nb, _, item) in pairs {
        report.push(step_item(&a, na, &format!("two_vm::{item}_server"), |s| {
            check_pingpong(&s.output, &[""])
        }));
        report.push(step_item(&b, nb, &format!("two_vm::{item}_client"), |s| {
            check_pingpong(&s.output, &[""])
        }));
    }
    for (na, _, nb, _, item) in RPING_PAIRS {
        report.push(step_item(&a, na, &format!("two_vm::{item}_server"), |s| {
            if s.output
                .iter()
                .any(|l| l.contains("server ping data: rdma-ping-19: "))
            {
                Ok(())
            } else {
                Err("the server did not show ping 19".into())
            }
        }));
        report.push(step_item(&b, nb, &format!("two_vm::{item}_client"), |s| {
            if s.output
                .iter()
                .any(|l| l.contains("ping data: rdma-ping-19: "))
            {
                Ok(())
            } else {
                Err("the client did not show ping 19 (-V verified)".into())
            }
        }));
    }
    // Named as the host section names the test, plus a `[...]` qualifier per run, so the
    // summary counts it as run (`crate::testrun::print_overall`).
    let cut_item = format!("uverbs::{LINK_CUT_EXE} (test)::{LINK_CUT_TEST}");
    match link_cut_exe {
        None => report.push(Item::fail(
            &cut_item,
            "not run: the test executable tests/faults_two_vm.rs did not build",
        )),
        Some(_) => {
            // (step, sender's run, receiver's run, sender's name)
            for (step, tx, rx, who) in [
                (LINK_CUT_STEPS[0], &a, &b, "sender A 6.1, receiver B 6.12"),
                (LINK_CUT_STEPS[1], &b, &a, "sender B 6.12, receiver A 6.1"),
            ] {
                let cut = tx
                    .link_actions
                    .iter()
                    .find(|(t, _)| t == LINK_CUT_MARKER)
                    .map(|(_, r)| r.clone());
                let up_first = step == LINK_CUT_STEPS[1];
                let up = b
                    .link_actions
                    .iter()
                    .find(|(t, _)| t == LINK_UP_MARKER)
                    .map(|(_, r)| r.clone());
                report.push(step_item(
                    tx,
                    step,
                    &format!("{cut_item} [{who}: sender]"),
                    |s| {
                        if up_first {
                            match &up {
                                None => {
                                    return Err(format!(
                                        "B never asked for its link back ({LINK_UP_MARKER})"
                                    ))
                                }
                                Some(Err(e)) => {
                                    return Err(format!("setting B's link up failed: {e}"))
                                }
                                Some(Ok(())) => {}
                            }
                        }
                        match &cut {
                            None => Err(format!(
                                "the sender never asked for the cut ({LINK_CUT_MARKER})"
                            )),
                            Some(Err(e)) => Err(format!("cutting the link failed: {e}")),
                            Some(Ok(())) => check_one_test_passed(&s.output),
                        }
                    },
                ));
                report.push(step_item(
                    rx,
                    step,
                    &format!("{cut_item} [{who}: receiver]"),
                    |s| check_one_test_passed(&s.output),
                ));
            }
        }
    }
    report.print();
    Ok(report)
}

/// The two-VM fault test (tests/faults_two_vm.rs): its test target, its test, the step
/// that runs it in each VM and the console line on which the harness cuts the link.
pub const LINK_CUT_EXE: &str = "faults_two_vm";
const LINK_CUT_TEST: &str = "link_cut_mid_stream_gives_retry_exceeded";
const LINK_CUT_STEPS: [&str; 2] = ["link-cut", "link-cut-reverse"];
const LINK_CUT_MARKER: &str = "UVERBS-CUT-LINK";
/// B prints this between the two link-cut steps: its link comes back up.
const LINK_UP_MARKER: &str = "UVERBS-LINK-UP";

/// libtest's `test result:` line says exactly one test ran and passed. (The per-test line
/// cannot be used: the sender's cut request is written straight to the console in the middle
/// of it.)
fn check_one_test_passed(output: &[String]) -> Result<(), String> {
    match crate::libtest::parse(output).summary {
        Some(s) if (s.passed, s.failed) == (1, 0) => Ok(()),
        Some(s) => Err(format!(
            "libtest: {} passed, {} failed, {} ignored (want 1 passed)",
            s.passed, s.failed, s.ignored
        )),
        None => Err("no `test result:` line (the test executable died?)".into()),
    }
}

/// `cargo xtask selftest`: the in-VM checks on each kernel, then failure/timeout handling.
pub fn standalone(kernels: &[Series]) -> Result<bool> {
    let mut h = Harness::new(None);
    let mut reports = Vec::new();
    for &k in kernels {
        let payload = Payload {
            net: Net::Veth {
                addr: "10.99.0.1/24".into(),
            },
            script: format!("rc=0\n{IN_VM_STEPS}exit $rc\n"),
            files: vec![],
        };
        let echo = Echo {
            prefix: format!("[{}] ", k.label()),
            step_banners: true,
            boot_messages: false,
        };
        let run = h.run(k, &payload, Duration::from_secs(600), echo)?;
        println!("xtask: {}", run.describe());
        let mut r = Report::new(&format!("kernel {}", h.kernel(k)?.release));
        for i in in_vm_items(&run) {
            r.push(i);
        }
        r.print();
        reports.push(r);
    }
    let mut r = Report::new("harness failure handling");
    for i in failure_and_timeout(&mut h)? {
        r.push(i);
    }
    r.print();
    reports.push(r);
    Ok(crate::testrun::print_overall(&reports))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn devinfo_check_needs_rxe0_and_an_active_port() {
        let good = lines("hca_id:\trxe0\n\ttransport:\t\t\tInfiniBand (0)\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n");
        assert_eq!(check_devinfo(&good), Ok(()));
        let down = lines("hca_id:\trxe0\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n");
        assert!(check_devinfo(&down).unwrap_err().contains("PORT_ACTIVE"));
        assert!(check_devinfo(&lines("No IB devices found"))
            .unwrap_err()
            .contains("rxe0"));
    }

    #[test]
    fn pingpong_check_needs_both_sides() {
        let out = lines(
            "server: 409600 bytes in 0.05 seconds = 65.54 Mbit/sec\n\
             server: 100 iters in 0.05 seconds = 500.00 usec/iter\n\
             client: 409600 bytes in 0.05 seconds = 65.54 Mbit/sec\n",
        );
        let e = check_pingpong(&out, &["server: ", "client: "]).unwrap_err();
        assert!(e.contains("client") && !e.contains("server"), "{e}");
        let mut out = out;
        out.push("client: 100 iters in 0.05 seconds = 500.00 usec/iter".into());
        assert_eq!(check_pingpong(&out, &["server: ", "client: "]), Ok(()));
        assert_eq!(
            check_pingpong(&lines("100 iters in 1.0 seconds = 1 usec/iter"), &[""]),
            Ok(())
        );
    }
}
