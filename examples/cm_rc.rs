//! An RC client and server connected with rdma_cm (`uverbs::cm`), no TCP exchange of QP
//! numbers of our own: the connection manager resolves the address, moves the QPs through
//! INIT / RTR / RTS and tells each side when the connection is up or down.
//!
//! It speaks rdma-core's `ucmatose` protocol (10 SENDs of 100 bytes each way: the server
//! sends first, the client answers, the server disconnects), so either side can be
//! `ucmatose` (`ucmatose -b ADDR` / `ucmatose -s ADDR`, port 7471).
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-linux-musl --example cm_rc
//! cargo xtask vm --test-exe target/x86_64-unknown-linux-musl/release/examples/cm_rc -- \
//!     '/tests/cm_rc server 10.99.0.1 & sleep 1; /tests/cm_rc client 10.99.0.1'
//! ```
//! With no arguments it runs both sides in one process on 10.99.0.1 (the VM's rxe0).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{wait_completions, Result, DEADLINE};
use uverbs::cm::{CmEvent, CmId, ConnParam, PortSpace};
use uverbs::{AccessFlags, Cq, Mr, QpCap, QpInitAttr, QpType, RecvWr, SendWr};

/// ucmatose's defaults.
pub const PORT: u16 = 7471;
const MESSAGES: usize = 10;
const SIZE: usize = 100;

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
            Err(format!("usage: cm_rc [server|client ADDR [PORT]] (not {other:?})").into())
        }
    };
    common::exit("cm_rc", r)
}

/// Both sides in one process, on the VM's rxe0 address.
pub fn run() -> Result<()> {
    let at: SocketAddr = "10.99.0.1:7472".parse()?;
    let srv = std::thread::spawn(move || server(at));
    std::thread::sleep(Duration::from_millis(300));
    let c = client(at);
    let s = srv.join().map_err(|_| "server thread panicked")?;
    c.and(s)
}

/// The id's QP (RC, room for every message), its CQ and one buffer of `MESSAGES` slots.
fn setup(id: &mut CmId) -> Result<(Cq, Cq, Mr)> {
    let ctx = id.context().ok_or("the id has no device")?.clone();
    let pd = ctx.alloc_pd()?;
    // Send and receive completions apart, so each wait counts only its own kind.
    let scq = ctx.create_cq(2 * MESSAGES as u32, None, 0)?;
    let rcq = ctx.create_cq(2 * MESSAGES as u32, None, 0)?;
    let cap = QpCap {
        max_send_wr: 2 * MESSAGES as u32,
        max_recv_wr: 2 * MESSAGES as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    id.create_qp(&pd, &QpInitAttr::new(QpType::Rc, &scq, &rcq, cap))?;
    let mr = pd.reg_mr(2 * MESSAGES * SIZE, AccessFlags::LOCAL_WRITE)?;
    // Receives go first, before the peer can send.
    for i in 0..MESSAGES {
        let sge = [mr.sge(i * SIZE, SIZE as u32)?];
        id.qp_mut()
            .ok_or("no QP")?
            .post_recv(&[RecvWr::new(i as u64, &sge)])?;
    }
    Ok((scq, rcq, mr))
}

fn send_all(id: &mut CmId, cq: &mut Cq, mr: &mut Mr, who: &str) -> Result<()> {
    for i in 0..MESSAGES {
        let off = (MESSAGES + i) * SIZE;
        mr.write(off, format!("{who} message {i}").as_bytes())?;
        let sge = [mr.sge(off, SIZE as u32)?];
        let qp = id.qp_mut().ok_or("no QP")?;
        qp.post_send(&[SendWr::send(100 + i as u64).sge(&sge).signaled()])?;
    }
    wait_completions(cq, MESSAGES)?;
    Ok(())
}

fn receive_all(cq: &mut Cq) -> Result<()> {
    for wc in wait_completions(cq, MESSAGES)? {
        if wc.byte_len as usize != SIZE {
            return Err(format!("received {} bytes, expected {SIZE}", wc.byte_len).into());
        }
    }
    Ok(())
}

fn wait_event(id: &mut CmId, what: &str) -> Result<CmEvent> {
    Ok(id
        .get_cm_event(DEADLINE)
        .map_err(|e| format!("waiting for {what}: {e}"))?)
}

/// ucmatose's server: accept one connection, send, receive, disconnect.
pub fn server(at: SocketAddr) -> Result<()> {
    let mut listen = CmId::new(PortSpace::Tcp)?; // rdma_create_id
    listen.bind_addr(&at)?; // rdma_bind_addr
    listen.listen(0)?; // rdma_listen
    let mut id = match wait_event(&mut listen, "a connect request")? {
        CmEvent::ConnectRequest(req) => req.id,
        other => return Err(format!("server: expected a connect request, got {other}").into()),
    };
    let (mut scq, mut rcq, mut mr) = setup(&mut id)?;
    id.accept(&ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        ..ConnParam::default()
    })?; // rdma_accept: the QP is now RTS
    match wait_event(&mut id, "ESTABLISHED")? {
        CmEvent::Established { .. } => {}
        other => return Err(format!("server: expected ESTABLISHED, got {other}").into()),
    }
    send_all(&mut id, &mut scq, &mut mr, "server")?;
    receive_all(&mut rcq)?;
    id.disconnect()?; // rdma_disconnect
    match wait_event(&mut id, "DISCONNECTED")? {
        CmEvent::Disconnected => Ok(()),
        other => Err(format!("server: expected DISCONNECTED, got {other}").into()),
    }
}

/// ucmatose's client: connect, receive, reply, wait for the server's disconnect.
pub fn client(to: SocketAddr) -> Result<()> {
    let mut id = CmId::new(PortSpace::Tcp)?;
    id.resolve_addr(None, &to, Duration::from_secs(2))?; // rdma_resolve_addr
    match wait_event(&mut id, "ADDR_RESOLVED")? {
        CmEvent::AddrResolved => {}
        other => return Err(format!("client: {other}").into()),
    }
    id.resolve_route(Duration::from_secs(2))?; // rdma_resolve_route
    match wait_event(&mut id, "ROUTE_RESOLVED")? {
        CmEvent::RouteResolved => {}
        other => return Err(format!("client: {other}").into()),
    }
    let (mut scq, mut rcq, mut mr) = setup(&mut id)?; // rdma_create_qp: INIT
    id.connect(&ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 5,
        ..ConnParam::default()
    })?; // rdma_connect
    match wait_event(&mut id, "ESTABLISHED")? {
        CmEvent::Established { .. } => {} // the reply moved the QP to RTR and RTS
        other => return Err(format!("client: expected ESTABLISHED, got {other}").into()),
    }
    receive_all(&mut rcq)?;
    send_all(&mut id, &mut scq, &mut mr, "client")?;
    match wait_event(&mut id, "DISCONNECTED")? {
        CmEvent::Disconnected => {}
        other => return Err(format!("client: expected DISCONNECTED, got {other}").into()),
    }
    id.disconnect()?; // answer the server's disconnect request
    Ok(())
}
