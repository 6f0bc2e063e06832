//! Checks on a real EFA device (an AWS instance with an EFA interface). None can run on a
//! host without one: each is `#[ignore]`d with the reason, so `cargo test` lists them as not
//! run. On an EFA instance: `cargo test --test efa_hw -- --ignored`. They need no peer.
//! All but `efa_hw_pingpong_srd` send nothing; that one runs `uverbs pingpong srd` server and
//! client on the one local device, so it needs the device to deliver same-node SRD (AWS's own
//! installer check runs its pingpong over EFA on one node; some reports say same-node traffic
//! is dropped on some generations: then it fails after 30 s with "no completion", and the
//! two-instance run in docs/testing.md is the check).

use uverbs::{
    Context, CqInitAttr, Driver, EfaCqInitAttr, EfaQpCap, EfaQpFlags, EfaQpInitAttr, EfaQpState,
    EfaQpType, EfaWcFlags,
};

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

#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_query_device() {
    let ctx = efa_context();
    let a = ctx.efadv_query_device().unwrap();
    assert!(a.max_sq_wr > 0 && a.max_rq_wr > 0, "{a:?}");
    assert!(a.max_sq_sge >= 1 && a.max_rq_sge >= 1, "{a:?}");
    assert!(a.inline_buf_size >= 32, "{a:?}");
}

#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_create_cq_qp_and_modify_to_rts() {
    let ctx = efa_context();
    let a = ctx.efadv_query_device().unwrap();
    let wc = if a.device_caps.contains(uverbs::EfaDeviceCaps::CQ_WITH_SGID) {
        EfaWcFlags::WITH_SGID
    } else {
        EfaWcFlags::empty()
    };
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 256,
                ..Default::default()
            },
            &EfaCqInitAttr {
                wc_flags: wc,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(cq.cqe() >= 256);
    let pd = ctx.alloc_pd().unwrap();
    for ty in [EfaQpType::Srd, EfaQpType::Ud] {
        let mut qp = pd
            .efadv_create_qp(&EfaQpInitAttr {
                qp_type: ty,
                send_cq: &cq,
                recv_cq: &cq,
                cap: EfaQpCap {
                    max_send_wr: 64,
                    max_recv_wr: 64,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
                sq_sig_all: true,
                flags: EfaQpFlags::empty(),
                sl: 0,
                send_ops_flags: uverbs::SendOpsFlags::SEND,
            })
            .unwrap();
        qp.modify_to_rts(0x1111_2222).unwrap();
        let q = qp.query().unwrap();
        assert_eq!(q.state, EfaQpState::Rts);
        assert_eq!(q.qkey, 0x1111_2222);
        qp.destroy().unwrap();
    }
    let mut w = [uverbs::Wc::default(); 4];
    let mut cq = cq;
    assert_eq!(cq.poll(&mut w).unwrap(), 0, "nothing was posted");
}

/// `uverbs pingpong srd` server and client (the binary cargo built for this test, or
/// `UVERBS_BIN`) on the local EFA device over 127.0.0.1: both must exit 0, print the summary
/// lines for the iteration count, check every received message (`-c`) and name each other's
/// QPN and Q_Key. This is the one test here that sends: it needs same-node SRD delivery. If
/// the device drops it, both sides fail after the pingpong's idle limit (30 s) with "no
/// completion", and the run across two instances in docs/testing.md is the check instead.
#[test]
#[ignore = "needs an EFA device (run on an EFA instance: cargo test --test efa_hw -- --ignored)"]
fn efa_hw_pingpong_srd() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const ITERS: &str = "1000";
    let ctx = efa_context();
    let name = ctx.device().name().to_string();
    let bin = std::env::var_os("UVERBS_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_uverbs").into());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free TCP port");
    let spawn = |extra: &[&str]| {
        Command::new(&bin)
            .args(["pingpong", "srd", "-d", &name, "-n", ITERS, "-c"])
            .args(["-p", &port.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin:?}: {e}"))
    };
    let mut server = spawn(&[]);
    // The client connects once: wait until the server listens (a probe connection would be
    // taken as the client).
    let listen_by = Instant::now() + Duration::from_secs(30);
    while !listening(port) {
        if server.try_wait().unwrap().is_some() || Instant::now() > listen_by {
            let _ = server.kill();
            let o = server.wait_with_output().unwrap();
            panic!(
                "the server did not listen on port {port}: {}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = spawn(&["127.0.0.1"]);
    let finish = |mut c: std::process::Child, who: &str| {
        let by = Instant::now() + Duration::from_secs(120);
        while c.try_wait().unwrap().is_none() {
            if Instant::now() > by {
                let _ = c.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let o = c.wait_with_output().unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        );
        assert!(o.status.success(), "{who}: {}\n{out}\n{err}", o.status);
        out
    };
    let c = finish(client, "client");
    let s = finish(server, "server");
    let line = |out: &str, which: &str| -> String {
        out.lines()
            .find_map(|l| l.trim_start().strip_prefix(which))
            .unwrap_or_else(|| panic!("no {which:?} line in {out}"))
            .trim()
            .to_string()
    };
    for out in [&s, &c] {
        assert!(out.contains(&format!("{ITERS} iters in ")), "{out}");
        assert!(
            out.contains(&format!("{ITERS} of {ITERS} received messages checked")),
            "{out}"
        );
    }
    assert_eq!(line(&s, "remote address:"), line(&c, "local address:"));
    assert_eq!(line(&c, "remote address:"), line(&s, "local address:"));
}

/// Whether a TCP socket listens on `port` (from /proc/net/tcp and tcp6; state 0A = LISTEN).
fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|s| {
            s.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
        })
    })
}
