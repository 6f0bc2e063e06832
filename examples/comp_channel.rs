//! Waiting for completions without burning a CPU: a completion channel.
//!
//! Busy polling a CQ gives the lowest latency but keeps a core at 100 %. The alternative is
//! the verbs event cycle, shown here for a receiver waiting for messages:
//!
//! 1. `req_notify` arms the CQ: "send an event on the channel for the next completion";
//! 2. poll once more — a completion may have arrived before the CQ was armed;
//! 3. `get_cq_event` sleeps in the kernel (`poll(2)` on the channel's fd) until the event;
//! 4. poll the CQ to take the completions, then re-arm (back to 1).
//!
//! The channel's fd can also go into your own `epoll` set or an async runtime (see
//! `tokio_echo.rs` with the `tokio` feature).
//!
//! Run it where there is an RDMA device, e.g. in the project's soft-RoCE VM:
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-linux-musl --example comp_channel
//! cargo xtask vm --test-exe target/x86_64-unknown-linux-musl/release/examples/comp_channel -- /tests/comp_channel
//! ```

mod common;

use std::time::Duration;

use common::{connect_pair, read_mr, Result, DEADLINE};
use uverbs::{AccessFlags, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Wc};

const MESSAGES: usize = 10;
const SLOT: usize = 64;

fn main() -> std::process::ExitCode {
    common::exit("comp_channel", run())
}

/// The whole example; `Ok` when every message was received by sleeping on the channel.
pub fn run() -> Result<()> {
    let ctx = common::open_rxe()?;
    let pd = ctx.alloc_pd()?;
    // The receiver's CQ reports through a completion channel; the sender's is busy-polled.
    let channel = ctx.create_comp_channel()?;
    let mut recv_cq = ctx.create_cq(32, Some(&channel), 0)?;
    let mut send_cq = ctx.create_cq(32, None, 0)?;
    let cap = QpCap {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    };
    let mut sender = pd.create_qp(&QpInitAttr::new(QpType::Rc, &send_cq, &send_cq, cap))?;
    let mut receiver = pd.create_qp(&QpInitAttr::new(QpType::Rc, &recv_cq, &recv_cq, cap))?;
    connect_pair(&ctx, &mut sender, &mut receiver, AccessFlags::LOCAL_WRITE)?;

    let buf = pd.reg_mr(SLOT * MESSAGES, AccessFlags::LOCAL_WRITE)?;
    let slots = (0..MESSAGES)
        .map(|i| buf.sge(i * SLOT, SLOT as u32))
        .collect::<uverbs::Result<Vec<_>>>()?;
    let recvs: Vec<RecvWr<'_>> = slots
        .iter()
        .enumerate()
        .map(|(i, sge)| RecvWr::new(i as u64, std::slice::from_ref(sge)))
        .collect();
    receiver.post_recv(&recvs)?;

    // The sender runs on another thread, pausing between messages, so the receiver really
    // has to wait for each one.
    let sender_thread = std::thread::spawn(move || -> Result<()> {
        for i in 0..MESSAGES {
            std::thread::sleep(Duration::from_millis(20));
            let msg = format!("message {i}");
            sender.post_send(&[SendWr::send(i as u64).inline(msg.as_bytes()).signaled()])?;
            common::wait_completions(&mut send_cq, 1)?;
        }
        Ok(())
    });

    let mut received = 0;
    let mut events = 0;
    let mut wcs = [Wc::default(); 8];
    recv_cq.req_notify(false)?; // 1. arm
    while received < MESSAGES {
        let mut n = recv_cq.poll(&mut wcs)?; // 2. anything already there?
        if n == 0 {
            // 3. sleep until the kernel signals the channel (bounded, so a bug cannot hang).
            let ev = channel.get_cq_event(Some(DEADLINE))?;
            if ev.cq_user_handle != recv_cq.user_handle() {
                return Err(format!("event for an unknown CQ: {ev:?}").into());
            }
            events += 1;
            // 4. re-arm before polling, so a completion arriving meanwhile is not missed.
            recv_cq.req_notify(false)?;
            n = recv_cq.poll(&mut wcs)?;
        }
        for wc in &wcs[..n] {
            common::check_success(wc)?;
            let i = wc.wr_id as usize;
            let text = read_mr(&buf, i * SLOT, wc.byte_len as usize)?;
            let expect = format!("message {i}");
            if text != expect.as_bytes() {
                return Err(format!("slot {i} holds {:?}", String::from_utf8_lossy(&text)).into());
            }
            println!(
                "woke up for {:?} (completion events so far: {})",
                expect, events
            );
            received += 1;
        }
    }
    sender_thread
        .join()
        .map_err(|_| "the sender thread panicked")??;
    if events == 0 {
        return Err("every message was found by polling; the channel was never used".into());
    }
    println!("{MESSAGES} messages received with {events} completion events and no busy polling");
    Ok(())
}
