//! RDMA write and RDMA read over a reliable connection (RC).
//!
//! Two queue pairs on one device are connected to each other. QP `a` writes a message straight
//! into a memory region owned by `b` (RDMA WRITE), then reads another part of that region back
//! into its own memory (RDMA READ). Neither operation involves `b`'s CPU: `b` posts nothing and
//! sees no completion; it only handed out the region's address and rkey, as a real peer would
//! over TCP.
//!
//! Run it where there is an RDMA device, e.g. in the project's soft-RoCE VM:
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-linux-musl --example rc_write_read
//! cargo xtask vm --test-exe target/x86_64-unknown-linux-musl/release/examples/rc_write_read \
//!     -- /tests/rc_write_read
//! ```

mod common;

use common::{connect_pair, read_mr, wait_completions, Result};
use uverbs::{AccessFlags, QpCap, QpInitAttr, QpType, SendWr, WcOpcode, WrOp};

fn main() -> std::process::ExitCode {
    common::exit("rc_write_read", run())
}

/// The whole example; `Ok` when every byte arrived where it should.
pub fn run() -> Result<()> {
    let ctx = common::open_rxe()?;
    // A protection domain groups the QPs and the memory they may use.
    let pd = ctx.alloc_pd()?;
    // Each QP reports finished work requests on a completion queue.
    let mut cq_a = ctx.create_cq(16, None, 0)?;
    let cq_b = ctx.create_cq(16, None, 0)?;
    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut a = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_a, &cq_a, cap))?;
    let mut b = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq_b, &cq_b, cap))?;
    // b lets its peer write and read its memory; a only needs local write (for the read's target).
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    connect_pair(&ctx, &mut a, &mut b, access)?;
    println!("connected RC QP {} <-> QP {}", a.qp_num(), b.qp_num());

    // Registered memory: the device may only touch memory registered in the QP's PD.
    let mut local = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
    let mut remote = pd.reg_mr(4096, access)?;
    println!(
        "b's region: addr {:#x}, rkey {:#x} (what b would send to a real peer)",
        remote.addr(),
        remote.rkey()
    );

    // 1. RDMA WRITE: a's bytes at local[0..] land in b's region at offset 256.
    let message = b"written by QP a with RDMA WRITE";
    local.write(0, message)?;
    let sg = [local.sge(0, message.len() as u32)?];
    a.post_send(&[SendWr::new(
        1,
        WrOp::RdmaWrite {
            remote_addr: remote.addr() + 256,
            rkey: remote.rkey(),
        },
    )
    .sge(&sg)
    .signaled()])?;
    let wc = wait_completions(&mut cq_a, 1)?;
    if wc[0].opcode != WcOpcode::RDMA_WRITE {
        return Err(format!("expected an RDMA_WRITE completion, got {:?}", wc[0]).into());
    }
    let landed = read_mr(&remote, 256, message.len())?;
    if landed != message {
        return Err(format!("RDMA WRITE: b's memory holds {landed:?}").into());
    }
    println!(
        "RDMA WRITE of {} bytes: b's memory now holds {:?}",
        message.len(),
        String::from_utf8_lossy(&landed)
    );

    // 2. RDMA READ: b's bytes at offset 1024 are fetched into a's region at offset 2048.
    let secret = b"read back from QP b's memory by RDMA READ";
    remote.write(1024, secret)?;
    let sg = [local.sge(2048, secret.len() as u32)?];
    a.post_send(&[SendWr::new(
        2,
        WrOp::RdmaRead {
            remote_addr: remote.addr() + 1024,
            rkey: remote.rkey(),
        },
    )
    .sge(&sg)
    .signaled()])?;
    let wc = wait_completions(&mut cq_a, 1)?;
    if wc[0].opcode != WcOpcode::RDMA_READ || wc[0].byte_len as usize != secret.len() {
        return Err(format!("expected an RDMA_READ completion, got {:?}", wc[0]).into());
    }
    let fetched = read_mr(&local, 2048, secret.len())?;
    if fetched != secret {
        return Err(format!("RDMA READ: a's memory holds {fetched:?}").into());
    }
    println!(
        "RDMA READ of {} bytes: a's memory now holds {:?}",
        secret.len(),
        String::from_utf8_lossy(&fetched)
    );

    // b's CPU took no part: no completion on its CQ.
    let mut cq_b = cq_b;
    if let Some(wc) = cq_b.poll_one()? {
        return Err(format!("b got an unexpected completion: {wc:?}").into());
    }
    println!("b's completion queue is empty: one-sided operations need no receiver work");
    Ok(())
}
