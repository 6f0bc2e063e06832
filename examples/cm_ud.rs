//! A UD exchange over rdma_cm (`uverbs::cm`, port space UDP): the client "connects" with a
//! SIDR request, and the answer carries the server's QP number, Q_Key and an address vector
//! to make an AH from; no QP numbers are exchanged by hand.
//!
//! It speaks rdma-core's `udaddy` protocol (10 datagrams of 100 bytes, SEND with immediate =
//! the sender's QPN; the server answers each side's 10 after receiving), so either side can be
//! `udaddy` (`udaddy -b ADDR` / `udaddy -s ADDR`, port 7174).
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-linux-musl --example cm_ud
//! cargo xtask vm --test-exe target/x86_64-unknown-linux-musl/release/examples/cm_ud -- \
//!     '/tests/cm_ud server 10.99.0.1 & sleep 1; /tests/cm_ud client 10.99.0.1'
//! ```
//! With no arguments it runs both sides in one process on 10.99.0.1 (the VM's rxe0).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{wait_completions, Result, DEADLINE};
use uverbs::cm::{CmEvent, CmId, ConnParam, PortSpace};
use uverbs::{
    AccessFlags, Ah, AhAttr, Cq, Mr, QpCap, QpInitAttr, QpType, RecvWr, SendWr, WcFlags, WrOp,
};

/// udaddy's defaults.
pub const PORT: u16 = 7174;
const MESSAGES: usize = 10;
const SIZE: usize = 100;
/// Every UD receive starts with room for the 40-byte GRH.
const GRH: usize = 40;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port = |i: usize| args.get(i).and_then(|p| p.parse().ok()).unwrap_or(PORT);
    let addr = |i: usize, p: u16| -> Result<SocketAddr> {
        let ip = args
            .get(i)
            .ok_or("missing address")?
            .parse::<std::net::IpAddr>()?;
        Ok(SocketAddr::new(ip, p))
    };
    let r = match args.first().map(String::as_str) {
        None => run(),
        Some("server") => addr(1, port(2)).and_then(server),
        Some("client") => addr(1, port(2)).and_then(client),
        Some(other) => {
            Err(format!("usage: cm_ud [server|client ADDR [PORT]] (not {other:?})").into())
        }
    };
    common::exit("cm_ud", r)
}

/// Both sides in one process, on the VM's rxe0 address.
pub fn run() -> Result<()> {
    let at: SocketAddr = "10.99.0.1:7175".parse()?;
    let srv = std::thread::spawn(move || server(at));
    std::thread::sleep(Duration::from_millis(300));
    let c = client(at);
    let s = srv.join().map_err(|_| "server thread panicked")?;
    c.and(s)
}

/// The id's UD QP (ready to send at once), its CQ, and a buffer: receive slots, then send slots.
fn setup(id: &mut CmId) -> Result<(Cq, Cq, Mr)> {
    let ctx = id.context().ok_or("the id has no device")?.clone();
    let pd = ctx.alloc_pd()?;
    // Send and receive completions apart, so each wait counts only its own kind.
    let scq = ctx.create_cq(2 * MESSAGES as u32, None, 0)?;
    let rcq = ctx.create_cq(2 * MESSAGES as u32, None, 0)?;
    let cap = QpCap {
        max_send_wr: MESSAGES as u32,
        max_recv_wr: MESSAGES as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    id.create_qp(&pd, &QpInitAttr::new(QpType::Ud, &scq, &rcq, cap))?; // INIT, RTR, RTS
    let mr = pd.reg_mr(MESSAGES * (GRH + SIZE) + SIZE, AccessFlags::LOCAL_WRITE)?;
    for i in 0..MESSAGES {
        let sge = [mr.sge(i * (GRH + SIZE), (GRH + SIZE) as u32)?];
        id.qp_mut()
            .ok_or("no QP")?
            .post_recv(&[RecvWr::new(i as u64, &sge)])?;
    }
    Ok((scq, rcq, mr))
}

/// Sends `MESSAGES` datagrams (immediate data: our QPN, as udaddy) and waits for their
/// completions.
fn send_all(id: &mut CmId, cq: &mut Cq, mr: &mut Mr, ah: &Ah, qpn: u32, qkey: u32) -> Result<()> {
    let off = MESSAGES * (GRH + SIZE);
    mr.write(off, b"a datagram over rdma_cm")?;
    let sge = [mr.sge(off, SIZE as u32)?];
    let qp = id.qp_mut().ok_or("no QP")?;
    let me = qp.qp_num();
    for i in 0..MESSAGES {
        let wr = SendWr::new(100 + i as u64, WrOp::SendWithImm { imm_data: me })
            .sge(&sge)
            .ud(ah, qpn, qkey)
            .signaled();
        qp.post_send(&[wr])?;
    }
    wait_completions(cq, MESSAGES)?;
    Ok(())
}

/// Waits for `MESSAGES` datagrams of `SIZE` bytes; returns the sender's QPN.
fn receive_all(cq: &mut Cq) -> Result<u32> {
    let mut from = 0;
    for wc in wait_completions(cq, MESSAGES)? {
        if wc.byte_len as usize != GRH + SIZE {
            return Err(format!("received {} bytes, expected {}", wc.byte_len, GRH + SIZE).into());
        }
        // `Wc::imm_data` is in host order on every provider (udaddy sends htobe32(qpn)).
        if wc.wc_flags.contains(WcFlags::WITH_IMM) && wc.imm_data != wc.src_qp {
            return Err(format!(
                "immediate {:#x} is not the sender's QPN {:#x}",
                wc.imm_data, wc.src_qp
            )
            .into());
        }
        from = wc.src_qp;
    }
    Ok(from)
}

fn wait_event(id: &mut CmId, what: &str) -> Result<CmEvent> {
    Ok(id
        .get_cm_event(DEADLINE)
        .map_err(|e| format!("waiting for {what}: {e}"))?)
}

/// udaddy's server: answer one SIDR request, receive, reply to the sender.
pub fn server(at: SocketAddr) -> Result<()> {
    let mut listen = CmId::new(PortSpace::Udp)?;
    listen.bind_addr(&at)?;
    listen.listen(0)?;
    let mut id = match wait_event(&mut listen, "a connect request")? {
        CmEvent::ConnectRequest(req) => req.id,
        other => return Err(format!("server: expected a connect request, got {other}").into()),
    };
    let (mut scq, mut rcq, mut mr) = setup(&mut id)?;
    id.accept(&ConnParam::default())?; // the SIDR reply: our QPN and Q_Key
    let peer_qpn = receive_all(&mut rcq)?;
    // The reply goes to the sender's QPN through an AH towards the id's peer GID (udaddy
    // builds it from the GRH with ibv_create_ah_from_wc).
    let route = id.query()?;
    let ctx = id.context().ok_or("no device")?.clone();
    let sgid_index = ctx
        .query_gid_table()?
        .iter()
        .find(|e| e.port_num == u32::from(id.port_num()) && e.gid == route.sgid)
        .ok_or("the id's source GID is not in the GID table")?
        .gid_index as u8;
    let pd = id.qp().ok_or("no QP")?.pd().clone();
    let ah = pd.create_ah(&AhAttr::roce(route.dgid, sgid_index, id.port_num()))?;
    send_all(
        &mut id,
        &mut scq,
        &mut mr,
        &ah,
        peer_qpn,
        uverbs::uapi::ucma::RDMA_UDP_QKEY,
    )?;
    Ok(())
}

/// udaddy's client: resolve, SIDR "connect", send with the AH from the answer, receive the replies.
pub fn client(to: SocketAddr) -> Result<()> {
    let mut id = CmId::new(PortSpace::Udp)?;
    id.resolve_addr(None, &to, Duration::from_secs(2))?;
    match wait_event(&mut id, "ADDR_RESOLVED")? {
        CmEvent::AddrResolved => {}
        other => return Err(format!("client: {other}").into()),
    }
    id.resolve_route(Duration::from_secs(2))?;
    match wait_event(&mut id, "ROUTE_RESOLVED")? {
        CmEvent::RouteResolved => {}
        other => return Err(format!("client: {other}").into()),
    }
    let (mut scq, mut rcq, mut mr) = setup(&mut id)?;
    id.connect(&ConnParam::default())?;
    let ud = match wait_event(&mut id, "ESTABLISHED")? {
        CmEvent::Established { ud: Some(ud), .. } => ud,
        other => {
            return Err(
                format!("client: expected ESTABLISHED with UD parameters, got {other}").into(),
            )
        }
    };
    let pd = id.qp().ok_or("no QP")?.pd().clone();
    let ah = pd.create_ah(&ud.ah_attr)?;
    send_all(&mut id, &mut scq, &mut mr, &ah, ud.qp_num, ud.qkey)?;
    receive_all(&mut rcq)?;
    Ok(())
}
