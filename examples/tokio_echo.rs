//! An RDMA echo server on tokio (feature `tokio`): tasks await completions instead of
//! spinning.
//!
//! A server task and a client task share one single-threaded tokio runtime. Each owns a QP
//! and a CQ created on its own completion channel, registered with the runtime
//! (`CompChannel::into_async`). The client sends `MESSAGES` messages one at a time and awaits
//! each reply; the server awaits each message and sends it back in upper case.
//! `AsyncCompChannel::poll_cq` arms the CQ and sleeps in the reactor until the kernel signals
//! a completion, so while one task waits the other runs — on one thread, with no busy polling.
//! A third task watches the device's async events (`Context::async_events`).
//!
//! Run it where there is an RDMA device, e.g. in the project's soft-RoCE VM:
//!
//! ```sh
//! cargo build --release --features tokio --target x86_64-unknown-linux-musl --example tokio_echo
//! cargo xtask vm --test-exe target/x86_64-unknown-linux-musl/release/examples/tokio_echo -- /tests/tokio_echo
//! ```

mod common;

use common::{connect_pair, read_mr, Result, DEADLINE};
use uverbs::tokio::AsyncCompChannel;
use uverbs::{AccessFlags, Cq, Mr, Qp, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Wc, WcOpcode};

const MESSAGES: usize = 16;
const SLOT: usize = 64;

fn main() -> std::process::ExitCode {
    common::exit("tokio_echo", run())
}

/// The whole example; `Ok` when every message came back, upper-cased, within the deadline.
pub fn run() -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    rt.block_on(async {
        tokio::time::timeout(DEADLINE, echo())
            .await
            .map_err(|_| format!("the echo did not finish within {DEADLINE:?}"))?
    })
}

/// One side of the connection: a QP, its CQ, the CQ's channel, and receive buffers.
struct Side {
    qp: Qp,
    cq: Cq,
    channel: AsyncCompChannel,
    buf: Mr,
}

impl Side {
    /// Posts a receive into every slot of `buf`; slot `i` has wr_id `i`.
    fn post_all_receives(&mut self) -> Result<()> {
        for i in 0..MESSAGES {
            let sg = [self.buf.sge(i * SLOT, SLOT as u32)?];
            self.qp.post_recv(&[RecvWr::new(i as u64, &sg)])?;
        }
        Ok(())
    }

    /// Awaits the next completions (any opcode) and returns them.
    async fn next_completions(&mut self) -> Result<Vec<Wc>> {
        let mut wcs = [Wc::default(); 8];
        let n = self.channel.poll_cq(&mut self.cq, &mut wcs).await?;
        for wc in &wcs[..n] {
            common::check_success(wc)?;
        }
        Ok(wcs[..n].to_vec())
    }
}

async fn echo() -> Result<()> {
    let ctx = common::open_rxe()?;
    let pd = ctx.alloc_pd()?;
    let mut events = ctx.async_events()?;
    let cap = QpCap {
        max_send_wr: MESSAGES as u32,
        max_recv_wr: MESSAGES as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: SLOT as u32,
    };
    let make_side = || -> Result<Side> {
        let channel = ctx.create_comp_channel()?;
        let cq = ctx.create_cq(2 * MESSAGES as u32, Some(&channel), 0)?;
        let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq, cap))?;
        let buf = pd.reg_mr(MESSAGES * SLOT, AccessFlags::LOCAL_WRITE)?;
        Ok(Side {
            qp,
            cq,
            channel: channel.into_async()?,
            buf,
        })
    };
    let mut server = make_side()?;
    let mut client = make_side()?;
    connect_pair(
        &ctx,
        &mut server.qp,
        &mut client.qp,
        AccessFlags::LOCAL_WRITE,
    )?;
    println!(
        "server QP {} <-> client QP {}",
        server.qp.qp_num(),
        client.qp.qp_num()
    );
    server.post_all_receives()?;
    client.post_all_receives()?;

    // Any async event (a QP or CQ error, the port going down) is printed as it happens.
    let watcher = tokio::spawn(async move {
        loop {
            match events.next().await {
                Ok(ev) => println!(
                    "async event: {} on {:?}",
                    ev.event_type.as_str(),
                    ev.element
                ),
                Err(e) => {
                    println!("async events: {e}");
                    break;
                }
            }
        }
    });

    let server_task = tokio::spawn(serve(server));
    let client_result = talk(&mut client).await;
    let server_result = server_task
        .await
        .map_err(|e| format!("the server task failed: {e}"))?;
    watcher.abort();
    client_result?;
    let served = server_result?;
    println!("server echoed {served} messages; client checked every reply");
    Ok(())
}

/// The server: await a message, send it back upper-cased, until `MESSAGES` went out.
async fn serve(mut s: Side) -> Result<usize> {
    let (mut received, mut sent) = (0, 0);
    while sent < MESSAGES {
        for wc in s.next_completions().await? {
            if wc.opcode == WcOpcode::RECV {
                let text = read_mr(&s.buf, wc.wr_id as usize * SLOT, wc.byte_len as usize)?;
                let reply = text.to_ascii_uppercase();
                s.qp.post_send(&[SendWr::send(wc.wr_id).inline(&reply).signaled()])?;
                received += 1;
            } else if wc.opcode == WcOpcode::SEND {
                sent += 1;
            }
        }
    }
    if received != MESSAGES {
        return Err(format!("server received {received} messages, expected {MESSAGES}").into());
    }
    Ok(sent)
}

/// The client: send each message and await its reply before sending the next.
async fn talk(c: &mut Side) -> Result<()> {
    for i in 0..MESSAGES {
        let msg = format!("hello #{i} from the client");
        c.qp.post_send(&[SendWr::send(1000 + i as u64)
            .inline(msg.as_bytes())
            .signaled()])?;
        let (mut send_done, mut reply) = (false, None);
        while !send_done || reply.is_none() {
            for wc in c.next_completions().await? {
                match wc.opcode {
                    WcOpcode::SEND => send_done = true,
                    WcOpcode::RECV => {
                        let text = read_mr(&c.buf, wc.wr_id as usize * SLOT, wc.byte_len as usize)?;
                        reply = Some(text);
                    }
                    other => return Err(format!("unexpected completion {other:?}").into()),
                }
            }
        }
        let reply = reply.unwrap_or_default();
        if reply != msg.to_ascii_uppercase().as_bytes() {
            return Err(format!(
                "message {i}: sent {msg:?}, got back {:?}",
                String::from_utf8_lossy(&reply)
            )
            .into());
        }
        println!("client: {msg:?} -> {:?}", String::from_utf8_lossy(&reply));
    }
    Ok(())
}
