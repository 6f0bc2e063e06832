//! A server that receives from many clients through one shared receive queue (SRQ).
//!
//! Without an SRQ, every connection needs its own receive buffers posted in advance, so memory
//! grows with the number of clients. With an SRQ, all of the server's QPs draw from one pool:
//! here 8 clients send 4 messages each (32 in all) into a pool of only 12 buffers, which the
//! server reposts as it consumes them. Each completion names the server QP it arrived on, so
//! the server knows which client spoke.
//!
//! Run it where there is an RDMA device, e.g. in the project's soft-RoCE VM:
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-linux-musl --example srq_server
//! cargo xtask vm --test-exe target/x86_64-unknown-linux-musl/release/examples/srq_server -- /tests/srq_server
//! ```

mod common;

use std::collections::BTreeMap;
use std::time::Instant;

use common::{connect_pair, read_mr, Result, DEADLINE};
use uverbs::{AccessFlags, QpCap, QpInitAttr, QpType, RecvWr, SendWr, SrqAttr, Wc};

const CLIENTS: usize = 8;
const MESSAGES_PER_CLIENT: usize = 4;
/// Buffers in the shared pool: fewer than the messages, so they must be reused.
const POOL: usize = 12;
const SLOT: usize = 64;

fn main() -> std::process::ExitCode {
    common::exit("srq_server", run())
}

/// The whole example; `Ok` when the server got every message of every client, in order per
/// client.
pub fn run() -> Result<()> {
    let ctx = common::open_rxe()?;
    let pd = ctx.alloc_pd()?;
    let mut server_cq = ctx.create_cq(64, None, 0)?;
    let mut client_cq = ctx.create_cq(64, None, 0)?;

    let mut srq = pd.create_srq(&SrqAttr {
        max_wr: POOL as u32,
        max_sge: 1,
        srq_limit: 0,
    })?;
    println!(
        "SRQ {} holds up to {} receives",
        srq.srq_num(),
        srq.attr().max_wr
    );

    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    };
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        // The server side has no receive queue of its own: it names the SRQ instead.
        let mut init = QpInitAttr::new(QpType::Rc, &server_cq, &server_cq, cap);
        init.srq = Some(&srq);
        let mut s = pd.create_qp(&init)?;
        let mut c = pd.create_qp(&QpInitAttr::new(QpType::Rc, &client_cq, &client_cq, cap))?;
        connect_pair(&ctx, &mut c, &mut s, AccessFlags::LOCAL_WRITE)?;
        servers.push(s);
        clients.push(c);
    }
    let client_of: BTreeMap<u32, usize> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| (s.qp_num(), i))
        .collect();
    println!("{CLIENTS} clients connected, each to its own server QP; all share the SRQ");

    // Fill the pool: buffer k is slot k of one region, and its wr_id is k.
    let pool = pd.reg_mr(POOL * SLOT, AccessFlags::LOCAL_WRITE)?;
    let slot = |k: usize| pool.sge(k * SLOT, SLOT as u32);
    for k in 0..POOL {
        let sg = [slot(k)?];
        srq.post_recv(&[RecvWr::new(k as u64, &sg)])?;
    }

    // Every client sends its messages (inline, so no client memory needs registering).
    for round in 0..MESSAGES_PER_CLIENT {
        for (i, c) in clients.iter_mut().enumerate() {
            let msg = format!("client {i} message {round}");
            c.post_send(&[SendWr::send((i * 100 + round) as u64)
                .inline(msg.as_bytes())
                .signaled()])?;
        }
    }

    // The server loop: take a completion, read the buffer, give the buffer back to the pool.
    let total = CLIENTS * MESSAGES_PER_CLIENT;
    let mut next_expected = [0usize; CLIENTS];
    let mut received = 0;
    let mut wcs = [Wc::default(); 16];
    let start = Instant::now();
    while received < total {
        let n = server_cq.poll(&mut wcs)?;
        if n == 0 {
            if start.elapsed() > DEADLINE {
                return Err(format!("only {received} of {total} messages in {DEADLINE:?}").into());
            }
            std::thread::yield_now();
            continue;
        }
        for wc in &wcs[..n] {
            common::check_success(wc)?;
            let k = wc.wr_id as usize;
            let client = *client_of
                .get(&wc.qp_num)
                .ok_or_else(|| format!("completion on unknown QP {}", wc.qp_num))?;
            let text = read_mr(&pool, k * SLOT, wc.byte_len as usize)?;
            let expect = format!("client {client} message {}", next_expected[client]);
            if text != expect.as_bytes() {
                return Err(format!(
                    "server QP {} (client {client}): got {:?}, expected {expect:?}",
                    wc.qp_num,
                    String::from_utf8_lossy(&text)
                )
                .into());
            }
            println!(
                "server QP {:>3} <- {:?} (pool buffer {k})",
                wc.qp_num,
                String::from_utf8_lossy(&text)
            );
            next_expected[client] += 1;
            received += 1;
            // Repost the buffer we just emptied.
            let sg = [slot(k)?];
            srq.post_recv(&[RecvWr::new(k as u64, &sg)])?;
        }
    }
    // All the clients' sends completed too (RC acknowledges each one).
    common::wait_completions(&mut client_cq, total)?;
    println!("{total} messages from {CLIENTS} clients through {POOL} shared buffers");
    Ok(())
}
