//! `UVERBS_TRACE`: with the variable set, every kernel command a context sends is printed on
//! standard error with its decoded attributes and outcome; an unknown value says so once.
//!
//! Each case runs this test executable again as a child (the variable is read once per
//! process), in which `child_opens_a_model_device` talks to the EFA device model, and checks
//! the child's standard error.

use std::process::Command;

use uverbs::channel::IoctlCmd;
use uverbs_efa_model::{EfaFabric, ModelConfig};

/// Set in the child: run the commands whose trace the parent reads.
const CHILD: &str = "UVERBS_TRACE_TEST_CHILD";

#[test]
fn child_opens_a_model_device() {
    if std::env::var_os(CHILD).is_none() {
        return; // only does something as the parent's child (below)
    }
    let fab = EfaFabric::new(1);
    let ctx = fab
        .add_device(ModelConfig::default())
        .open()
        .expect("open the model");
    let pd = ctx.alloc_pd().expect("alloc_pd");
    drop(pd);
    // An object id nobody knows: the model answers as the kernel does.
    let mut cmd = IoctlCmd::new(0x77, 0);
    let e = ctx.channel().ioctl(&mut cmd).unwrap_err();
    eprintln!("child: unknown object answered {e:?}");
}

fn run_child(value: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "child_opens_a_model_device",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("UVERBS_TRACE", value)
        .output()
        .expect("run this test executable again");
    assert!(out.status.success(), "child failed: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn trace_prints_each_command_with_its_outcome() {
    let err = run_child("1");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("uverbs trace: "))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("write GET_CONTEXT") && l.ends_with("-> ok")),
        "no GET_CONTEXT line in {err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("ALLOC_PD") && l.ends_with("-> ok")),
        "no ALLOC_PD line in {err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("PD") && l.contains("DEALLOC") || l.contains("PD.DESTROY")),
        "no PD destroy line in {err}"
    );
    let unknown = lines
        .iter()
        .find(|l| l.contains("ioctl object0x77.method0x0 []"))
        .unwrap_or_else(|| panic!("no line for the unknown object in {err}"));
    assert!(
        unknown.contains("-> E") && unknown.ends_with(')'),
        "the failure line names no errno: {unknown}"
    );
}

#[test]
fn trace_off_prints_nothing() {
    for value in ["0", ""] {
        let err = run_child(value);
        assert!(
            !err.contains("uverbs trace:"),
            "UVERBS_TRACE={value:?} traced: {err}"
        );
    }
}

#[test]
fn unknown_trace_value_is_named_once_and_traces_nothing() {
    let err = run_child("verbose");
    assert!(
        !err.contains("uverbs trace:"),
        "an unknown value traced: {err}"
    );
    let msgs: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("UVERBS_TRACE=\"verbose\" is not understood"))
        .collect();
    assert_eq!(msgs.len(), 1, "want the message once: {err}");
    assert!(
        msgs[0].contains("UVERBS_TRACE=1"),
        "the message says what to use: {}",
        msgs[0]
    );
}
