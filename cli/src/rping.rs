//! `uverbs rping`: the counterpart of rdma-core's `rping` (`librdmacm/examples/rping.c`),
//! connected with our own rdma_cm (`uverbs::cm`) and wire-compatible with it.
//!
//! The protocol, per ping: the client fills its start buffer with `"rdma-ping-%d: "` and a
//! rotating `A..z` pattern (NUL at the end) and SENDs a `struct rping_rdma_info` (buffer
//! address as big-endian u64, rkey and size as big-endian u32: 16 bytes) naming it; the server
//! RDMA READs it, SENDs "go on" (16 bytes), the client SENDs the info of its sink buffer, the
//! server RDMA WRITEs the string back there and SENDs "done"; the client compares (`-V`).
//! Connection parameters as rping: responder resources and initiator depth 1, retry count 6
//! (rping's 7 means unlimited on rxe: `crate::cause::RETRY_CNT`), RNR retry 7; QP with 16 send and 2 receive work requests.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use uverbs::cm::{CmEvent, CmId, CmOption, ConnParam, PortSpace};
use uverbs::{
    AccessFlags, Cq, Mr, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Wc, WcOpcode, WcStatus, WrOp,
};

use crate::Failure;

const RPING_SQ_DEPTH: u32 = 16;
const RPING_BUFSIZE: usize = 64 * 1024;
/// `sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT)` = 11 + 15.
const RPING_MIN_BUFSIZE: usize = 26;
/// `sizeof(struct rping_rdma_info)`.
const INFO_LEN: usize = 16;
/// How long one protocol step may take before we give up (rping waits forever).
const STEP: Duration = Duration::from_secs(10);
/// How long a disconnect waits for signs of a device removal before it counts as the peer
/// leaving (`Conn::after_disconnect`): a server's normal end, a client's failure.
const DISCONNECT_SETTLE: Duration = Duration::from_millis(500);

/// Options of `uverbs rping` (rping's).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Server side.
    #[arg(short = 's', conflicts_with = "client")]
    server: bool,
    /// Client side.
    #[arg(short = 'c')]
    client: bool,
    /// Address to bind to (server) or connect to (client).
    #[arg(short = 'a', value_name = "ADDR")]
    addr: Option<String>,
    /// Source address to connect from (client).
    #[arg(short = 'I', value_name = "ADDR")]
    src: Option<String>,
    /// Port.
    #[arg(short = 'p', default_value_t = 7174)]
    port: u16,
    /// Ping count (0: forever).
    #[arg(short = 'C', default_value_t = 0)]
    count: u32,
    /// Ping data size.
    #[arg(short = 'S', default_value_t = 64)]
    size: usize,
    /// Type of service.
    #[arg(short = 't', value_name = "TOS")]
    tos: Option<u8>,
    /// Display ping data.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    verbose: u8,
    /// Validate ping data.
    #[arg(short = 'V', action = clap::ArgAction::Count)]
    validate: u8,
    /// Debug prints.
    #[arg(short = 'd', action = clap::ArgAction::Count)]
    debug: u8,
}

fn parse_addr(s: &str, port: u16) -> Result<SocketAddr, Failure> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (s, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            Failure(format!(
                "getaddrinfo failed ({s}) - invalid hostname or IP address"
            ))
        })
}

/// Runs `uverbs rping`.
pub fn run(a: Args) -> Result<ExitCode, Failure> {
    if a.server == a.client {
        return Err(Failure(
            "rping: give exactly one of -s (server) and -c (client)".into(),
        ));
    }
    if a.size < RPING_MIN_BUFSIZE || a.size > RPING_BUFSIZE - 1 {
        return Err(Failure(format!(
            "Invalid size {} (valid range is {RPING_MIN_BUFSIZE} to {RPING_BUFSIZE})",
            a.size
        )));
    }
    if a.server {
        server(&a)
    } else {
        client(&a)
    }
}

/// The memory and queues of one side.
struct Conn {
    id: CmId,
    cq: Cq,
    recv_mr: Mr,
    send_mr: Mr,
    rdma_mr: Mr,
    /// Client only: the buffer the server reads.
    start_mr: Option<Mr>,
    debug: bool,
}

/// What the next wait produced.
enum Step {
    Recv([u8; INFO_LEN]),
    Done(WcOpcode),
    Disconnected,
}

impl Conn {
    fn new(mut id: CmId, size: usize, client: bool, debug: bool) -> Result<Conn, Failure> {
        let ctx = id
            .context()
            .cloned()
            .ok_or_else(|| Failure(format!("{}: no device", id.label())))?;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(RPING_SQ_DEPTH * 2, None, 0)?;
        let cap = QpCap {
            max_send_wr: RPING_SQ_DEPTH,
            max_recv_wr: 2,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        id.create_qp(&pd, &QpInitAttr::new(QpType::Rc, &cq, &cq, cap))?;
        let remote =
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
        let recv_mr = pd.reg_mr(INFO_LEN, AccessFlags::LOCAL_WRITE)?;
        let send_mr = pd.reg_mr(INFO_LEN, AccessFlags::empty())?;
        let rdma_mr = pd.reg_mr(size, remote)?;
        let start_mr = if client {
            Some(pd.reg_mr(size, remote)?)
        } else {
            None
        };
        let mut c = Conn {
            id,
            cq,
            recv_mr,
            send_mr,
            rdma_mr,
            start_mr,
            debug,
        };
        c.post_recv()?;
        Ok(c)
    }

    fn post_recv(&mut self) -> Result<(), Failure> {
        let sge = [self.recv_mr.sge_all()];
        let qp = self.id.qp_mut().expect("the id has its QP");
        qp.post_recv(&[RecvWr::new(1, &sge)])
            .map_err(|e| Failure(format!("post recv error: {e}")))
    }

    fn post(&mut self, wr: SendWr<'_>) -> Result<(), Failure> {
        let qp = self.id.qp_mut().expect("the id has its QP");
        qp.post_send(&[wr])
            .map_err(|e| Failure(format!("post send error {e}")))
    }

    /// SENDs `info` (the 16-byte `rping_rdma_info`, or zeros for "go on").
    fn send_info(&mut self, info: &[u8; INFO_LEN]) -> Result<(), Failure> {
        self.send_mr.write(0, info)?;
        let sge = [self.send_mr.sge_all()];
        self.post(SendWr::send(2).sge(&sge).signaled())
    }

    /// The peer left (a DISCONNECTED event, or our receives flushed). That may be the first
    /// sign of a device removal: a peer on the same device learns of it, exits, and its
    /// disconnect can reach us before rdma_cm's DEVICE_REMOVAL for our own id or the
    /// context's removal flag. So look for either for `DISCONNECT_SETTLE` before calling it
    /// the peer leaving; a removal fails the run naming the device.
    /// A completion error other than a flush in that time (the send whose retries ran out,
    /// which can come after the receives' flush) is the cause and fails the run.
    fn after_disconnect(&mut self) -> Result<Step, Failure> {
        let until = Instant::now() + DISCONNECT_SETTLE;
        let mut wc = [Wc::default(); 1];
        let mut flushed = 1;
        loop {
            if let Some(ctx) = self.id.context() {
                crate::removal::check(ctx)?;
            }
            while self.cq.poll(&mut wc).unwrap_or(0) == 1 {
                match wc[0].status {
                    WcStatus::WR_FLUSH_ERR => flushed += 1,
                    WcStatus::SUCCESS => {}
                    _ => return Err(completion_failed(&wc[0], flushed)),
                }
            }
            if let Some(CmEvent::DeviceRemoval) = self.id.try_get_cm_event()? {
                return Err(cm_removed(&self.id));
            }
            if Instant::now() >= until {
                return Ok(Step::Disconnected);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for a receive (reposting it), an RDMA completion, or the peer's disconnect.
    /// SEND completions are skipped, as rping's CQ handler does.
    fn wait(&mut self) -> Result<Step, Failure> {
        let start = Instant::now();
        let mut wc = [Wc::default(); 1];
        let mut spins = 0u32;
        loop {
            if self.cq.poll(&mut wc)? == 1 {
                let w = wc[0];
                if w.status != WcStatus::SUCCESS {
                    // A flush after the peer's disconnect is its normal end; one whose QP
                    // failed first (retries exhausted) is named by that failure
                    // (`after_disconnect` looks for it).
                    if w.status == WcStatus::WR_FLUSH_ERR {
                        return self.after_disconnect();
                    }
                    return Err(completion_failed(&w, 0));
                }
                match w.opcode {
                    WcOpcode::SEND => continue,
                    WcOpcode::RECV => {
                        if w.byte_len as usize != INFO_LEN {
                            return Err(Failure(format!(
                                "Received bogus data, size {}",
                                w.byte_len
                            )));
                        }
                        let mut info = [0u8; INFO_LEN];
                        self.recv_mr.read(0, &mut info)?;
                        self.post_recv()?;
                        return Ok(Step::Recv(info));
                    }
                    op => return Ok(Step::Done(op)),
                }
            }
            spins += 1;
            if spins % 64 == 0 {
                if let Some(ctx) = self.id.context() {
                    crate::removal::check(ctx)?;
                }
                if let Some(ev) = self.id.try_get_cm_event()? {
                    if self.debug {
                        println!("cma_event type {}", ev.name());
                    }
                    match ev {
                        CmEvent::Disconnected => return self.after_disconnect(),
                        CmEvent::DeviceRemoval => return Err(cm_removed(&self.id)),
                        CmEvent::Established { .. } => {}
                        other => return Err(Failure(format!("unexpected event {other}"))),
                    }
                }
                if start.elapsed() > STEP {
                    return Err(Failure(format!(
                        "no completion or event within {STEP:?}: the peer stopped answering \
                         (it is gone, or the link is down)"
                    )));
                }
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

/// rping's message for a failed completion, with what the status means.
fn completion_failed(wc: &Wc, flushed: usize) -> Failure {
    Failure(format!(
        "cq completion failed status {} ({}{})",
        wc.status.0,
        wc.status.as_str(),
        crate::cause::explain(wc, flushed)
    ))
}

/// The failure for an id whose device rdma_cm reports removed (`RDMA_CM_EVENT_DEVICE_REMOVAL`):
/// the caller returns it, dropping every object on the device, so the removal can complete.
fn cm_removed(id: &CmId) -> Failure {
    match id.context() {
        Some(ctx) => crate::removal::removed(ctx),
        None => Failure(format!(
            "{}: its device was removed (RDMA_CM_EVENT_DEVICE_REMOVAL): exiting",
            id.label()
        )),
    }
}

/// `r` as a run on `id` ended: a failure after its device was removed says so.
fn explained<T>(r: Result<T, Failure>, id: &CmId) -> Result<T, Failure> {
    match id.context().cloned() {
        Some(ctx) => crate::removal::explain(r, &ctx),
        None => r,
    }
}

fn info_of(addr: u64, rkey: u32, size: u32) -> [u8; INFO_LEN] {
    let mut b = [0u8; INFO_LEN];
    b[..8].copy_from_slice(&addr.to_be_bytes());
    b[8..12].copy_from_slice(&rkey.to_be_bytes());
    b[12..].copy_from_slice(&size.to_be_bytes());
    b
}

fn parse_info(b: &[u8; INFO_LEN]) -> (u64, u32, u32) {
    (
        u64::from_be_bytes(b[..8].try_into().unwrap_or_default()),
        u32::from_be_bytes(b[8..12].try_into().unwrap_or_default()),
        u32::from_be_bytes(b[12..].try_into().unwrap_or_default()),
    )
}

fn rping_conn_param() -> ConnParam<'static> {
    ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: crate::cause::RETRY_CNT,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn wait_event(id: &mut CmId, what: &str, timeout: Duration) -> Result<CmEvent, Failure> {
    id.get_cm_event(timeout)
        .map_err(|e| Failure(format!("waiting for {what}: {e}")))
}

fn client(a: &Args) -> Result<ExitCode, Failure> {
    let dst = parse_addr(
        a.addr
            .as_deref()
            .ok_or_else(|| Failure("rping client needs -a ADDR".into()))?,
        a.port,
    )?;
    let src = a.src.as_deref().map(|s| parse_addr(s, 0)).transpose()?;
    let mut id = CmId::new(PortSpace::Tcp)?;
    if let Some(t) = a.tos {
        id.set_option(CmOption::Tos(t))?;
    }
    id.resolve_addr(src.as_ref(), &dst, Duration::from_millis(2000))?;
    match wait_event(&mut id, "ADDR_RESOLVED", Duration::from_secs(5))? {
        CmEvent::AddrResolved => {}
        other => return Err(Failure(format!("cma event {other}, error -1"))),
    }
    id.resolve_route(Duration::from_millis(2000))?;
    match wait_event(&mut id, "ROUTE_RESOLVED", Duration::from_secs(5))? {
        CmEvent::RouteResolved => {}
        other => return Err(Failure(format!("cma event {other}, error -1"))),
    }
    let mut c = Conn::new(id, a.size, true, a.debug > 0)?;
    c.id.connect(&rping_conn_param())?;
    match wait_event(&mut c.id, "ESTABLISHED", STEP)? {
        CmEvent::Established { .. } => {}
        other => return Err(Failure(format!("connect error: cma event {other}"))),
    }
    let r = explained(client_loop(&mut c, a), &c.id);
    if r.is_ok() {
        let _ = c.id.disconnect();
        // Wait for DISCONNECTED (the server's DREP) before the id goes: destroying it stops
        // the kernel resending our DREQ, so a DREQ lost on a bad link would leave the server
        // waiting for it (rdma-core's rping does not wait, and its server then waits for
        // ever). On RoCE the kernel resends the DREQ after twice the packet lifetime plus the
        // CM response timeout: 4.6 s on 6.12, 6.1 s on 6.1; inside one step on both sides.
        let deadline = std::time::Instant::now() + STEP;
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match c.id.get_cm_event(left) {
                Ok(CmEvent::Disconnected) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
    r.map(|()| ExitCode::SUCCESS)
}

fn client_loop(c: &mut Conn, a: &Args) -> Result<(), Failure> {
    let size = a.size;
    let mut start: u8 = 65;
    let mut buf = vec![0u8; size];
    let mut got = vec![0u8; size];
    let mut ping: u64 = 0;
    while a.count == 0 || ping < u64::from(a.count) {
        let head = format!("rdma-ping-{ping}: ");
        let hb = head.as_bytes();
        let cc = hb.len().min(size - 1);
        buf[..cc].copy_from_slice(&hb[..cc]);
        let mut ch = start;
        for b in buf.iter_mut().skip(cc) {
            *b = ch;
            ch += 1;
            if ch > 122 {
                ch = 65;
            }
        }
        start += 1;
        if start > 122 {
            start = 65;
        }
        buf[size - 1] = 0;
        let start_mr = c.start_mr.as_mut().expect("client has a start buffer");
        start_mr.write(0, &buf)?;
        let info = info_of(start_mr.addr(), start_mr.rkey(), size as u32);
        c.send_info(&info)?;
        match c.wait()? {
            Step::Recv(_) => {}
            Step::Disconnected => return Err(server_left(ping)),
            Step::Done(op) => return Err(Failure(format!("wait for RDMA_WRITE_ADV: got {op:?}"))),
        }
        let info = info_of(c.rdma_mr.addr(), c.rdma_mr.rkey(), size as u32);
        c.send_info(&info)?;
        match c.wait()? {
            Step::Recv(_) => {}
            Step::Disconnected => return Err(server_left(ping)),
            Step::Done(op) => {
                return Err(Failure(format!("wait for RDMA_WRITE_COMPLETE: got {op:?}")))
            }
        }
        c.rdma_mr.read(0, &mut got)?;
        if a.validate > 0 && got != buf {
            return Err(Failure("data mismatch!".into()));
        }
        if a.verbose > 0 {
            println!("ping data: {}", c_string(&got));
        }
        ping += 1;
    }
    Ok(())
}

/// The server disconnected before the client's last ping: rping's server never ends a run
/// itself, so it failed or was stopped (rping's client fails the same way, "wait for
/// RDMA_WRITE_ADV state 10").
fn server_left(ping: u64) -> Failure {
    Failure(format!(
        "the server disconnected during ping {ping}: it failed or was stopped (its own \
         output names why), or the link to it is down"
    ))
}

fn server(a: &Args) -> Result<ExitCode, Failure> {
    let ip: IpAddr = match a.addr.as_deref() {
        Some(s) => parse_addr(s, a.port)?.ip(),
        None => IpAddr::from([0, 0, 0, 0]),
    };
    let mut listen = CmId::new(PortSpace::Tcp)?;
    if let Some(t) = a.tos {
        listen.set_option(CmOption::Tos(t))?;
    }
    listen.bind_addr(&SocketAddr::new(ip, a.port))?;
    listen.listen(3)?;
    // rping's server waits for its client without a limit; so do we, a second at a time.
    let req = loop {
        if let Some(ctx) = listen.context() {
            crate::removal::check(ctx)?;
        }
        match listen.get_cm_event(Duration::from_secs(1)) {
            Ok(CmEvent::ConnectRequest(r)) => break r,
            Ok(CmEvent::DeviceRemoval) => return Err(cm_removed(&listen)),
            Ok(other) => return Err(Failure(format!("wait for CONNECT_REQUEST: got {other}"))),
            Err(e) if e.is(uverbs::Errno::TIMEDOUT) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let mut c = Conn::new(req.id, a.size, false, a.debug > 0)?;
    c.id.accept(&rping_conn_param())?;
    let r = explained(server_loop(&mut c, a), &c.id);
    let _ = c.id.disconnect();
    drop(listen);
    r.map(|()| ExitCode::SUCCESS)
}

fn server_loop(c: &mut Conn, a: &Args) -> Result<(), Failure> {
    let size = a.size;
    let mut data = vec![0u8; size];
    loop {
        // The client's start buffer.
        let (addr, rkey, len) = match c.wait()? {
            Step::Recv(info) => parse_info(&info),
            Step::Disconnected => return Ok(()),
            Step::Done(op) => return Err(Failure(format!("wait for RDMA_READ_ADV: got {op:?}"))),
        };
        if len as usize > size {
            return Err(Failure(format!(
                "the client's buffer ({len} bytes) is larger than ours ({size}); use the same -S"
            )));
        }
        let sge = [c.rdma_mr.sge(0, len)?];
        c.post(
            SendWr::new(
                3,
                WrOp::RdmaRead {
                    remote_addr: addr,
                    rkey,
                },
            )
            .sge(&sge)
            .signaled(),
        )?;
        match c.wait()? {
            Step::Done(WcOpcode::RDMA_READ) => {}
            Step::Disconnected => return Ok(()),
            _ => return Err(Failure("wait for RDMA_READ_COMPLETE".into())),
        }
        c.rdma_mr.read(0, &mut data)?;
        if a.verbose > 0 {
            println!("server ping data: {}", c_string(&data));
        }
        c.send_info(&[0; INFO_LEN])?;
        let (addr, rkey, _) = match c.wait()? {
            Step::Recv(info) => parse_info(&info),
            Step::Disconnected => return Ok(()),
            Step::Done(op) => return Err(Failure(format!("wait for RDMA_WRITE_ADV: got {op:?}"))),
        };
        let n = data.iter().position(|&b| b == 0).unwrap_or(size - 1) + 1;
        let sge = [c.rdma_mr.sge(0, n as u32)?];
        c.post(
            SendWr::new(
                4,
                WrOp::RdmaWrite {
                    remote_addr: addr,
                    rkey,
                },
            )
            .sge(&sge)
            .signaled(),
        )?;
        match c.wait()? {
            Step::Done(WcOpcode::RDMA_WRITE) => {}
            Step::Disconnected => return Ok(()),
            _ => return Err(Failure("wait for RDMA_WRITE_COMPLETE".into())),
        }
        c.send_info(&[0; INFO_LEN])?;
    }
}
