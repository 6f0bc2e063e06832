//! The `uverbs` CLI on a real EFA device (an AWS instance with an EFA interface), `#[ignore]`d
//! elsewhere like the library's `efa_hw` tests (`tests/efa_hw.rs`). On an EFA instance:
//! `cargo test --release --workspace --test efa_hw -- --ignored --test-threads=1`.
//! `efa_hw_pingpong_srd` needs a second EFA instance, because EFA silently drops same-node SRD
//! traffic: start `uverbs pingpong srd -c -n 1000` there and name it in `UVERBS_EFA_PEER`;
//! without it the test fails saying so (it never passes without having sent).

use uverbs::{Context, Driver};

fn efa_context() -> Context {
    let devs = uverbs::devices().expect("device discovery");
    let dev = devs
        .iter()
        .find(|d| *d.driver() == Driver::Efa)
        .unwrap_or_else(|| {
            panic!(
                "no EFA device among {:?}",
                devs.iter().map(|d| d.name()).collect::<Vec<_>>()
            )
        });
    Context::open(dev).expect("open the EFA device")
}

/// `uverbs pingpong srd -c` (the binary cargo built for this test, or `UVERBS_BIN`) as the
/// client of a server on a second EFA instance (`UVERBS_EFA_PEER`, where
/// `uverbs pingpong srd -c -n 1000` runs; EFA drops same-node SRD, so the peer must be another
/// host): the client must exit 0, print the summary for 1000 iterations and check every
/// received message. Without `UVERBS_EFA_PEER` it fails with the instruction.
#[test]
#[ignore = "needs two EFA instances (UVERBS_EFA_PEER=<host running `uverbs pingpong srd -c -n 1000`>, then cargo test --workspace --test efa_hw -- --ignored)"]
fn efa_hw_pingpong_srd() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const ITERS: &str = "1000";
    let peer = std::env::var("UVERBS_EFA_PEER").unwrap_or_else(|_| {
        panic!(
            "efa_hw_pingpong_srd needs a second EFA instance (EFA drops same-node SRD): run \
             `uverbs pingpong srd -c -n {ITERS}` there and set UVERBS_EFA_PEER=<its address>"
        )
    });
    let ctx = efa_context();
    let name = ctx.device().name().to_string();
    let bin = std::env::var_os("UVERBS_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_uverbs").into());
    let mut client = Command::new(&bin)
        .args(["pingpong", "srd", "-d", &name, "-n", ITERS, "-c", &peer])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {bin:?}: {e}"));
    let by = Instant::now() + Duration::from_secs(120);
    while client.try_wait().unwrap().is_none() {
        if Instant::now() > by {
            let _ = client.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = client.wait_with_output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "client: {}\n{out}\n{err}", o.status);
    assert!(out.contains(&format!("{ITERS} iters in ")), "{out}");
    assert!(
        out.contains(&format!("{ITERS} of {ITERS} received messages checked")),
        "{out}"
    );
    assert!(out.contains("remote address:"), "{out}");
}

/// `uverbs info` on the EFA device prints every `efadv_query_device` field, the newest
/// (`comp_mask`, `inline_buf_size_ex`) included.
#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --workspace --test efa_hw -- --ignored)"]
fn efa_hw_info_prints_every_efadv_field() {
    let ctx = efa_context();
    let name = ctx.device().name().to_string();
    let bin = std::env::var_os("UVERBS_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_uverbs").into());
    let o = std::process::Command::new(&bin)
        .args(["info", "-d", &name])
        .output()
        .unwrap_or_else(|e| panic!("starting {bin:?}: {e}"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}: {out}", o.status);
    for field in [
        "efadv attributes:",
        "comp_mask:",
        "max_sq_wr:",
        "max_rq_wr:",
        "max_sq_sge:",
        "max_rq_sge:",
        "inline_buf_size:",
        "inline_buf_size_ex:",
        "max_rdma_size:",
        "device_caps:",
    ] {
        assert!(out.contains(field), "no {field} in {out}");
    }
}
