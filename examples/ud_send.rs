//! Unreliable datagrams (UD): one QP sends messages to another through an address handle.
//!
//! A UD QP is not connected to anyone. Each send names its destination: an address handle
//! (AH, the route to the peer's port: here its RoCE v2 GID) plus the peer's QP number and
//! Q_Key. Every received datagram starts with a 40-byte Global Route Header (GRH) slot, so
//! receive buffers are 40 bytes longer than the largest message.
//!
//! Run it where there is an RDMA device, e.g. in the project's soft-RoCE VM:
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-linux-musl --example ud_send
//! cargo xtask vm --test-exe target/x86_64-unknown-linux-musl/release/examples/ud_send -- /tests/ud_send
//! ```

mod common;

use common::{read_mr, to_init, to_rtr, to_rts, wait_completions, Result, QKEY};
use uverbs::{AccessFlags, AhAttr, GidQuery, QpCap, QpInitAttr, QpType, RecvWr, SendWr, WcFlags};

/// The Global Route Header every UD receive buffer starts with.
const GRH: usize = 40;
/// Room for one datagram (its GRH and up to 200 bytes of payload).
const SLOT: usize = 256;
const MESSAGES: usize = 5;

fn main() -> std::process::ExitCode {
    common::exit("ud_send", run())
}

/// The whole example; `Ok` when every datagram arrived intact from the right sender.
pub fn run() -> Result<()> {
    let ctx = common::open_rxe()?;
    let pd = ctx.alloc_pd()?;
    let mut send_cq = ctx.create_cq(16, None, 0)?;
    let mut recv_cq = ctx.create_cq(16, None, 0)?;
    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    };
    let mut sender = pd.create_qp(&QpInitAttr::new(QpType::Ud, &send_cq, &send_cq, cap))?;
    let mut receiver = pd.create_qp(&QpInitAttr::new(QpType::Ud, &recv_cq, &recv_cq, cap))?;
    // UD QPs need no peer to reach RTS: INIT (port, Q_Key), RTR, RTS.
    for qp in [&mut sender, &mut receiver] {
        to_init(qp, AccessFlags::empty())?;
        to_rtr(qp, 0, 0, Default::default())?;
        to_rts(qp)?;
    }
    println!(
        "UD QP {} (sender) and UD QP {} (receiver) are ready, Q_Key {QKEY:#x}",
        sender.qp_num(),
        receiver.qp_num()
    );

    // The receiver's address: the GID of our own port (both QPs share the device here), as
    // `find_gid` picks it: a RoCE v2 GID whose address is ready, IPv4 first.
    let local = ctx.find_gid(1, &GidQuery::Any)?;
    let (gid_index, gid) = (local.gid_index as u8, local.gid);
    let ah = pd.create_ah(&AhAttr::roce(gid, gid_index, 1))?;
    println!("address handle to GID {gid} (sgid index {gid_index})");

    // One receive buffer per message, each in its own slot of one region.
    let rbuf = pd.reg_mr(SLOT * MESSAGES, AccessFlags::LOCAL_WRITE)?;
    let slots = (0..MESSAGES)
        .map(|i| rbuf.sge(i * SLOT, SLOT as u32))
        .collect::<uverbs::Result<Vec<_>>>()?;
    let recvs: Vec<RecvWr<'_>> = slots
        .iter()
        .enumerate()
        .map(|(i, sge)| RecvWr::new(i as u64, std::slice::from_ref(sge)))
        .collect();
    receiver.post_recv(&recvs)?;

    // Send each message inline (copied into the work request), addressed through the AH.
    let messages: Vec<String> = (0..MESSAGES)
        .map(|i| format!("datagram #{i} over UD"))
        .collect();
    for (i, m) in messages.iter().enumerate() {
        sender.post_send(&[SendWr::send(100 + i as u64)
            .inline(m.as_bytes())
            .signaled()
            .ud(&ah, receiver.qp_num(), QKEY)])?;
    }
    wait_completions(&mut send_cq, MESSAGES)?;
    println!("{MESSAGES} sends completed");

    let wcs = wait_completions(&mut recv_cq, MESSAGES)?;
    for wc in &wcs {
        let i = wc.wr_id as usize;
        let expect = messages[i].as_bytes();
        if wc.src_qp != sender.qp_num() {
            return Err(format!("datagram {i} came from QP {}", wc.src_qp).into());
        }
        if !wc.wc_flags.contains(WcFlags::GRH) || wc.byte_len as usize != GRH + expect.len() {
            return Err(format!("datagram {i}: unexpected completion {wc:?}").into());
        }
        let got = read_mr(&rbuf, i * SLOT + GRH, expect.len())?;
        if got != expect {
            return Err(format!("datagram {i}: received {got:?}").into());
        }
        println!(
            "received {:?} from QP {} ({} bytes incl. the {GRH}-byte GRH)",
            String::from_utf8_lossy(&got),
            wc.src_qp,
            wc.byte_len
        );
    }
    Ok(())
}
