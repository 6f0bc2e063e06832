//! `uverbs pingpong rc|uc|ud|srq`: the counterparts of rdma-core's `ibv_rc_pingpong`,
//! `ibv_uc_pingpong`, `ibv_ud_pingpong` and `ibv_srq_pingpong`
//! (`libibverbs/examples/*_pingpong.c`), interoperable with them; and `srd` (EFA only, no
//! rdma-core counterpart), which this module hands to [`crate::pingpong_srd`] after parsing.
//!
//! Same options and defaults, same TCP exchange (one or, for `srq`, 256 messages of 52 bytes
//! `"%04x:%06x:%06x:%s"` = LID:QPN:PSN:wire-GID with its NUL, then the client's `"done"`),
//! same QP set-up (INIT, RTR and RTS attributes), same message flow (the server posts
//! receives and waits; the client sends first; each side sends again once its last send and
//! a receive have completed, with wr_ids `PINGPONG_RECV_WRID` 1 and `PINGPONG_SEND_WRID` 2),
//! same refilling of receives and the same output lines.
//!
//! The loop posts and polls through the library's lock-free data path: `Qp::post_send`,
//! `Qp::post_recv`/`Srq::post_recv` and `Cq::poll` on objects this thread owns, with the work
//! requests, SGEs and completion array built before the loop (no allocation in it).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, Ah, AhAttr, CompChannel, Context, Cq, Gid, GlobalRoute, LinkLayer, Mr, Mtu, Pd,
    Qp, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Sge, Srq, SrqAttr,
    Wc,
};

use crate::{exchange, pingpong_srd, Failure};

const PINGPONG_RECV_WRID: u64 = 1;
const PINGPONG_SEND_WRID: u64 = 2;
/// `srq_pingpong.c`'s `MAX_QP`: both sides always exchange this many addresses.
const MAX_QP: usize = 256;
/// Bytes of one address message: `sizeof "0000:000000:000000:" + 32 hex digits` with the NUL.
const MSG_LEN: usize = 52;
/// The Q_Key `ud_pingpong.c` uses.
const UD_QKEY: u32 = 0x1111_1111;
/// The room a UD receive keeps for the GRH (`sizeof(struct ibv_grh)`).
const GRH_LEN: usize = 40;

/// Which of rdma-core's pingpong programs to behave as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Reliable connection (`ibv_rc_pingpong`).
    Rc,
    /// Unreliable connection (`ibv_uc_pingpong`).
    Uc,
    /// Unreliable datagram (`ibv_ud_pingpong`).
    Ud,
    /// RC QPs sharing one receive queue (`ibv_srq_pingpong`).
    Srq,
    /// EFA scalable reliable datagram (SRD QP through efadv; EFA devices only).
    Srd,
}

/// Options of `uverbs pingpong` (those of rdma-core's `ibv_*_pingpong`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Transport: rc, uc, ud, srq or srd (EFA).
    #[arg(value_enum)]
    mode: Mode,
    /// Listen on/connect to TCP port PORT.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    port: u16,
    /// Use IB device DEV (default: the first device found).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    ib_dev: Option<String>,
    /// Use port PORT of the IB device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..))]
    ib_port: u8,
    /// Size of message to exchange (default 4096; ud: 2048).
    #[arg(short = 's', long = "size")]
    size: Option<u32>,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (default 1024; not for ud).
    #[arg(short = 'm', long = "mtu")]
    mtu: Option<u32>,
    /// Number of receives to post at a time.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500,
          value_parser = clap::value_parser!(u32).range(1..))]
    rx_depth: u32,
    /// Number of exchanges.
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    iters: u32,
    /// Service level.
    #[arg(short = 'l', long = "sl", default_value_t = 0)]
    sl: u8,
    /// Sleep on CQ events (default: poll).
    #[arg(short = 'e', long = "events")]
    events: bool,
    /// Local port GID index.
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u8>,
    /// Number of QPs (srq only; default 16).
    #[arg(short = 'q', long = "num-qp")]
    num_qp: Option<u32>,
    /// Validate the received buffer.
    #[arg(short = 'c', long = "chk")]
    chk: bool,
    /// Give up after this many seconds with no completion (the peer is gone or the link is
    /// down); 0 waits for ever. A side with sends outstanding learns sooner, from the QP's
    /// retries.
    #[arg(long = "peer-timeout", value_name = "SECS",
          default_value_t = crate::cause::PEER_TIMEOUT_SECS)]
    peer_timeout: u64,
    /// Connect to the server at this host (default: be the server).
    servername: Option<String>,
}

/// One side's address as exchanged over TCP (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Dest {
    lid: u16,
    qpn: u32,
    psn: u32,
    gid: Gid,
}

impl Dest {
    /// The 52-byte message `sprintf(msg, "%04x:%06x:%06x:%s", ...)` writes, NUL-terminated.
    fn to_wire(self) -> [u8; MSG_LEN] {
        let text = format!(
            "{:04x}:{:06x}:{:06x}:{}",
            self.lid,
            self.qpn,
            self.psn,
            exchange::wire_gid(&self.gid.raw)
        );
        let mut msg = [0u8; MSG_LEN];
        let n = text.len().min(MSG_LEN - 1);
        msg[..n].copy_from_slice(&text.as_bytes()[..n]);
        msg
    }

    /// Parses a message as `sscanf(msg, "%x:%x:%x:%s")` + `wire_gid_to_gid` do.
    fn from_wire(msg: &[u8]) -> Result<Dest, String> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = std::str::from_utf8(&msg[..end])
            .map_err(|_| "the address message is not ASCII".to_string())?;
        let bad = || format!("malformed address message {text:?} (want LID:QPN:PSN:GID in hex)");
        let mut parts = text.splitn(4, ':');
        let mut hex = |max: u32| -> Result<u32, String> {
            let f = parts.next().ok_or_else(bad)?;
            let v = u32::from_str_radix(f, 16).map_err(|_| bad())?;
            if v > max {
                return Err(bad());
            }
            Ok(v)
        };
        let lid = hex(0xffff)? as u16;
        let qpn = hex(0xff_ffff)?;
        let psn = hex(0xff_ffff)?;
        let g = parts.next().ok_or_else(bad)?;
        let gid = Gid {
            raw: exchange::gid_from_wire(g).ok_or_else(bad)?,
        };
        Ok(Dest { lid, qpn, psn, gid })
    }
}

fn mtu_from_bytes(v: u32) -> Option<Mtu> {
    Some(match v {
        256 => Mtu::Mtu256,
        512 => Mtu::Mtu512,
        1024 => Mtu::Mtu1024,
        2048 => Mtu::Mtu2048,
        4096 => Mtu::Mtu4096,
        _ => return None,
    })
}

/// A PSN as `lrand48() & 0xffffff` after `srand48(getpid() * time(NULL))`: random enough to
/// tell runs apart, from a generator seeded by the process id and the clock.
struct Psn(u64);

impl Psn {
    fn seeded() -> Psn {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Psn(t ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// splitmix64, masked to 24 bits.
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) & 0xff_ffff) as u32
    }
}

/// Everything one run owns. Fields drop in order: QPs, SRQ, AH, CQ, MR, PD, channel, context.
struct Pingpong {
    qps: Vec<Qp>,
    srq: Option<Srq>,
    ah: Option<Ah>,
    cq: Cq,
    mr: Mr,
    pd: Pd,
    channel: Option<CompChannel>,
    ctx: Context,
}

/// The resolved settings of one run.
struct Settings {
    mode: Mode,
    size: usize,
    mtu: Mtu,
    rx_depth: u32,
    num_qp: usize,
    ib_port: u8,
    sl: u8,
    gid_idx: Option<u8>,
}

impl Settings {
    fn qp_type(&self) -> QpType {
        match self.mode {
            // Srd never gets here: `run` hands it to `pingpong_srd` before any Settings.
            Mode::Rc | Mode::Srq | Mode::Srd => QpType::Rc,
            Mode::Uc => QpType::Uc,
            Mode::Ud => QpType::Ud,
        }
    }

    /// Bytes of the work buffer (ud keeps room for the GRH in front).
    fn buf_len(&self) -> usize {
        match self.mode {
            Mode::Ud => self.size + GRH_LEN,
            _ => self.size,
        }
    }

    /// Offset of the bytes a send sends.
    fn send_offset(&self) -> usize {
        match self.mode {
            Mode::Ud => GRH_LEN,
            _ => 0,
        }
    }

    /// Refill the receive queue when this few receives are left (rdma-core: 1, srq: num_qp).
    fn refill_at(&self) -> u32 {
        match self.mode {
            Mode::Srq => self.num_qp as u32,
            _ => 1,
        }
    }
}

pub fn run(args: Args) -> Result<ExitCode, Failure> {
    let mode = args.mode;
    if mode == Mode::Srd {
        return run_srd(args);
    }
    if mode == Mode::Ud && args.mtu.is_some() {
        return Err(Failure(
            "-m/--mtu applies to rc, uc and srq (ud sends one packet per message)".into(),
        ));
    }
    if mode != Mode::Srq && args.num_qp.is_some() {
        return Err(Failure("-q/--num-qp applies to srq only".into()));
    }
    let mtu = match args.mtu {
        None => Mtu::Mtu1024,
        Some(v) => mtu_from_bytes(v).ok_or_else(|| {
            Failure(format!(
                "-m/--mtu {v} is not a path MTU: use 256, 512, 1024, 2048 or 4096"
            ))
        })?,
    };
    let num_qp = args.num_qp.unwrap_or(16);
    if mode == Mode::Srq {
        if num_qp == 0 {
            return Err(Failure("-q/--num-qp must be at least 1".into()));
        }
        if num_qp > args.rx_depth {
            return Err(Failure(format!(
                "rx_depth {} is too small for {num_qp} QPs -- must have at least one receive per QP.",
                args.rx_depth
            )));
        }
        if num_qp as usize >= MAX_QP {
            return Err(Failure(format!(
                "num_qp {num_qp} must be less than {}",
                MAX_QP - 1
            )));
        }
    }
    let size = args
        .size
        .unwrap_or(if mode == Mode::Ud { 2048 } else { 4096 }) as usize;
    if size == 0 {
        return Err(Failure("-s/--size must be at least 1 byte".into()));
    }
    let set = Settings {
        mode,
        size,
        mtu,
        rx_depth: args.rx_depth,
        num_qp: if mode == Mode::Srq {
            num_qp as usize
        } else {
            1
        },
        ib_port: args.ib_port,
        sl: args.sl,
        gid_idx: args.gid_idx,
    };

    let dev = match &args.ib_dev {
        Some(name) => uverbs::device_by_name(name)
            .map_err(|e| Failure(format!("IB device {name} not found: {e}")))?,
        None => uverbs::devices()?
            .into_iter()
            .next()
            .ok_or_else(|| Failure("No IB devices found".into()))?,
    };
    let ctx = Context::open(&dev)?;
    let watch = ctx.clone();
    let r = run_on(ctx, &args, set);
    // Everything `run_on` made is dropped by now; `watch` only keeps the context open until
    // this returns.
    crate::removal::explain(r, &watch)
}

/// The run proper, on an open context; every object it makes is dropped when it returns.
fn run_on(ctx: Context, args: &Args, set: Settings) -> Result<ExitCode, Failure> {
    let mode = set.mode;
    let mut pp = init(ctx, &set, args.events)?;

    // One SGE for every receive (the whole buffer) and one for every send.
    let recv_sge = [pp
        .mr
        .sge(0, set.buf_len() as u32)
        .map_err(|e| Failure(e.to_string()))?];
    let send_sge = [pp
        .mr
        .sge(set.send_offset(), set.size as u32)
        .map_err(|e| Failure(e.to_string()))?];
    let recv_wrs = vec![RecvWr::new(PINGPONG_RECV_WRID, &recv_sge); set.rx_depth as usize];
    let inline = pp
        .qps
        .iter()
        .all(|q| q.cap().max_inline_data as usize >= set.size);
    // Inline sends copy the bytes into the WQE: staged here, allocated once.
    let mut inline_buf = if inline {
        vec![0u8; set.size]
    } else {
        Vec::new()
    };

    let mut routs = post_recvs(&mut pp, &recv_wrs, set.rx_depth);
    if routs < set.rx_depth {
        return Err(Failure(format!("Couldn't post receive ({routs})")));
    }
    if args.events {
        pp.cq
            .req_notify(false)
            .map_err(|e| Failure(format!("Couldn't request CQ notification: {e}")))?;
    }

    let port = pp
        .ctx
        .query_port(set.ib_port)
        .map_err(|e| Failure(format!("Couldn't get port info: {e}")))?;
    let mut my = vec![Dest::default(); MAX_QP];
    let mut psn = Psn::seeded();
    let gid = match set.gid_idx {
        Some(i) => pp
            .ctx
            .query_gid(set.ib_port, u32::from(i))
            .map_err(|e| Failure(format!("can't read sgid of index {i}: {e}")))?,
        None => Gid::default(),
    };
    for (i, qp) in pp.qps.iter().enumerate() {
        my[i] = Dest {
            lid: port.lid,
            qpn: qp.qp_num(),
            psn: psn.next(),
            gid,
        };
        if port.link_layer != LinkLayer::Ethernet && port.lid == 0 {
            return Err(Failure("Couldn't get local LID".into()));
        }
        // ud_pingpong.c prints a colon before GID on its local line; kept for parity.
        let sep = if mode == Mode::Ud { ":" } else { "," };
        println!(
            "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{sep} GID {}",
            my[i].lid, my[i].qpn, my[i].psn, my[i].gid
        );
    }
    let n_msgs = if mode == Mode::Srq { MAX_QP } else { 1 };

    let rem = match &args.servername {
        Some(host) => client_exch(host, args.port, &my[..n_msgs])?,
        None => server_exch(&mut pp, &set, args.port, &my[..n_msgs])?,
    };
    for r in &rem[..set.num_qp] {
        println!(
            "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
            r.lid, r.qpn, r.psn, r.gid
        );
    }
    if args.servername.is_some() {
        connect(&mut pp, &set, &my, &rem)?;
    }
    let rem_ud_qpn = rem[0].qpn;

    let client = args.servername.is_some();
    let page = rustix::param::page_size();
    let mut pending = vec![0u64; set.num_qp];
    let post = |pp: &mut Pingpong, qi: usize, buf: &mut Vec<u8>| -> Result<(), Failure> {
        post_send(pp, &set, qi, &send_sge, buf, rem_ud_qpn)
            .map_err(|e| Failure(format!("Couldn't post send: {e}")))
    };
    if client {
        if args.chk {
            // rdma-core writes `i / page_size % sizeof(char)` (always 0) at each page start.
            for i in (0..set.size).step_by(page) {
                pp.mr
                    .write(set.send_offset() + i, &[0])
                    .map_err(|e| Failure(e.to_string()))?;
            }
        }
        for (qi, p) in pending.iter_mut().enumerate() {
            post(&mut pp, qi, &mut inline_buf)?;
            *p = PINGPONG_SEND_WRID | PINGPONG_RECV_WRID;
        }
    } else {
        pending.iter_mut().for_each(|p| *p = PINGPONG_RECV_WRID);
    }

    let iters = args.iters;
    let num_wc = if mode == Mode::Srq {
        set.num_qp + set.rx_depth as usize
    } else {
        2
    };
    let mut wcs = vec![Wc::default(); num_wc];
    let qpns: Vec<u32> = pp.qps.iter().map(|q| q.qp_num()).collect();
    let cq_handle = pp.cq.user_handle();
    let (mut rcnt, mut scnt) = (0u32, 0u32);
    let mut idle = crate::cause::Idle::new(args.peer_timeout);
    if matches!(mode, Mode::Uc | Mode::Ud) {
        idle = idle.unreliable();
    }
    let start = Instant::now();
    while rcnt < iters || scnt < iters {
        if let Some(ch) = &pp.channel {
            let ev = ch.get_cq_event(idle.remaining()).map_err(|e| {
                if e.errno() == Some(uverbs::Errno::TIMEDOUT) {
                    idle.failure()
                } else {
                    Failure(format!("Failed to get cq_event: {e}"))
                }
            })?;
            if ev.cq_user_handle != cq_handle {
                return Err(Failure(format!(
                    "CQ event for unknown CQ (user handle {})",
                    ev.cq_user_handle
                )));
            }
            pp.cq
                .req_notify(false)
                .map_err(|e| Failure(format!("Couldn't request CQ notification: {e}")))?;
        }
        let ne = loop {
            let ne = pp
                .cq
                .poll(&mut wcs)
                .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
            if ne > 0 || args.events {
                break ne;
            }
            // Nothing came: a removed device will not send anything more.
            crate::removal::check(&pp.ctx)?;
            idle.empty_poll()?;
        };
        if ne > 0 {
            idle.progress();
        }
        for (k, wc) in wcs[..ne].iter().enumerate() {
            if !wc.status.is_success() {
                // A flushed request is named only when nothing says why (crate::cause).
                let (c, flushed) = crate::cause::cause(wc, &wcs[k + 1..ne], &mut [&mut pp.cq]);
                return Err(Failure(format!(
                    "Failed status {} ({}) for wr_id {}{}",
                    c.status.as_str(),
                    c.status.0,
                    c.wr_id as i32,
                    crate::cause::explain(&c, flushed)
                )));
            }
            let qi = if mode == Mode::Srq {
                qpns.iter()
                    .position(|&n| n == wc.qp_num)
                    .ok_or_else(|| Failure(format!("Couldn't find QPN {:06x}", wc.qp_num)))?
            } else {
                0
            };
            match wc.wr_id {
                PINGPONG_SEND_WRID => scnt += 1,
                PINGPONG_RECV_WRID => {
                    routs -= 1;
                    if routs <= set.refill_at() {
                        routs += post_recvs(&mut pp, &recv_wrs, set.rx_depth - routs);
                        if routs < set.rx_depth {
                            return Err(Failure(format!("Couldn't post receive ({routs})")));
                        }
                    }
                    rcnt += 1;
                }
                other => {
                    return Err(Failure(format!(
                        "Completion for unknown wr_id {}",
                        other as i32
                    )))
                }
            }
            pending[qi] &= !wc.wr_id;
            if scnt < iters && pending[qi] == 0 {
                post(&mut pp, qi, &mut inline_buf)?;
                pending[qi] = PINGPONG_RECV_WRID | PINGPONG_SEND_WRID;
            }
        }
    }
    let elapsed = start.elapsed();

    // As rdma-core: microseconds in a float, rates from them.
    let usec = elapsed.as_micros() as f32;
    let bytes = set.size as i64 * i64::from(iters) * 2;
    println!(
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
        f64::from(usec) / 1_000_000.0,
        bytes as f64 * 8.0 / f64::from(usec)
    );
    println!(
        "{iters} iters in {:.2} seconds = {:.2} usec/iter",
        f64::from(usec) / 1_000_000.0,
        f64::from(usec) / f64::from(iters)
    );
    if client && args.chk {
        let mut b = [0u8];
        for i in (0..set.size).step_by(page) {
            pp.mr
                .read(set.send_offset() + i, &mut b)
                .map_err(|e| Failure(e.to_string()))?;
            if b[0] != 0 {
                println!("invalid data in page {}", i / page);
            }
        }
    }
    // The peer's last send may still wait for the acknowledgement our device sends when its
    // message arrives: on a lossy link that ACK can be lost, and a QP destroyed at once would
    // leave the peer's retransmission unanswered until its retries run out (RETRY_EXC_ERR
    // for a run that succeeded). Keep RC QPs one retry window longer; our device answers the
    // retransmission on its own.
    if matches!(mode, Mode::Rc | Mode::Srq) {
        std::thread::sleep(RC_LINGER);
    }
    close(pp)?;
    Ok(ExitCode::SUCCESS)
}

/// `uverbs pingpong srd`: checks the options and the device (before any TCP, so a device
/// that is not EFA is refused at once), connects or accepts like the other modes, then runs
/// [`pingpong_srd::run`] and prints rdma-core's summary lines.
fn run_srd(args: Args) -> Result<ExitCode, Failure> {
    if args.mtu.is_some() {
        return Err(Failure(
            "-m/--mtu applies to rc, uc and srq (srd sends one packet per message)".into(),
        ));
    }
    if args.num_qp.is_some() {
        return Err(Failure("-q/--num-qp applies to srq only".into()));
    }
    if args.events {
        return Err(Failure(
            "-e/--events is not supported by srd: it polls the EFA CQ".into(),
        ));
    }
    let dev = match &args.ib_dev {
        Some(name) => uverbs::device_by_name(name)
            .map_err(|e| Failure(format!("IB device {name} not found: {e}")))?,
        None => uverbs::devices()?
            .into_iter()
            .next()
            .ok_or_else(|| Failure("No IB devices found".into()))?,
    };
    let ctx = Context::open(&dev)?;
    pingpong_srd::check_device(&ctx).map_err(Failure)?;
    let opt = pingpong_srd::SrdOptions {
        size: args.size.unwrap_or(4096) as usize,
        rx_depth: args.rx_depth,
        iters: args.iters,
        ib_port: args.ib_port,
        gid_idx: args.gid_idx.unwrap_or(0),
        sl: args.sl,
        chk: args.chk,
        ..Default::default()
    };
    pingpong_srd::check_size(&ctx, opt.ib_port, opt.size).map_err(Failure)?;
    let (mut stream, role) = match &args.servername {
        Some(host) => (
            exchange::connect(host, args.port, Duration::ZERO).map_err(Failure)?,
            pingpong_srd::Role::Client,
        ),
        None => (
            exchange::accept(args.port).map_err(Failure)?,
            pingpong_srd::Role::Server,
        ),
    };
    let out = pingpong_srd::run(&ctx, &mut stream, role, &opt, &mut std::io::stdout())
        .map_err(Failure)?;
    for line in out.summary() {
        println!("{line}");
    }
    if opt.chk {
        println!("{} of {} received messages checked", out.checked, out.iters);
    }
    Ok(ExitCode::SUCCESS)
}

/// `pp_init_ctx`: channel, PD, MR, CQ, (SRQ,) QP(s), each QP moved to INIT.
fn init(ctx: Context, set: &Settings, events: bool) -> Result<Pingpong, Failure> {
    if set.mode == Mode::Ud {
        let port = ctx.query_port(set.ib_port).map_err(|e| {
            Failure(format!(
                "Unable to query port info for port {}: {e}",
                set.ib_port
            ))
        })?;
        let mtu = port.active_mtu.bytes().unwrap_or(0) as usize;
        if set.size > mtu {
            return Err(Failure(format!(
                "Requested size larger than port MTU ({mtu})"
            )));
        }
    }
    let channel = if events {
        Some(
            ctx.create_comp_channel()
                .map_err(|e| Failure(format!("Couldn't create completion channel: {e}")))?,
        )
    } else {
        None
    };
    let pd = ctx
        .alloc_pd()
        .map_err(|e| Failure(format!("Couldn't allocate PD: {e}")))?;
    let mut mr = pd
        .reg_mr(set.buf_len(), AccessFlags::LOCAL_WRITE)
        .map_err(|e| Failure(format!("Couldn't register MR: {e}")))?;
    // rc/uc/ud fill the buffer with 0x7b, srq with zeros (reg_mr's memory starts zeroed).
    if set.mode != Mode::Srq {
        mr.fill(0, set.buf_len(), 0x7b)
            .map_err(|e| Failure(e.to_string()))?;
    }
    // rc/uc/ud: rx_depth + 1 entries; srq: rx_depth + num_qp.
    let cqe = match set.mode {
        Mode::Srq => set.rx_depth + set.num_qp as u32,
        _ => set.rx_depth + 1,
    };
    let cq = ctx
        .create_cq(cqe, channel.as_ref(), 0)
        .map_err(|e| Failure(format!("Couldn't create CQ: {e}")))?;
    let srq = if set.mode == Mode::Srq {
        Some(
            pd.create_srq(&SrqAttr {
                max_wr: set.rx_depth,
                max_sge: 1,
                srq_limit: 0,
            })
            .map_err(|e| Failure(format!("Couldn't create SRQ: {e}")))?,
        )
    } else {
        None
    };
    let cap = QpCap {
        max_send_wr: 1,
        max_recv_wr: if srq.is_some() { 0 } else { set.rx_depth },
        max_send_sge: 1,
        max_recv_sge: if srq.is_some() { 0 } else { 1 },
        max_inline_data: 0,
    };
    let mut qps = Vec::with_capacity(set.num_qp);
    for i in 0..set.num_qp {
        let mut init = QpInitAttr::new(set.qp_type(), &cq, &cq, cap);
        init.srq = srq.as_ref();
        let qp = pd.create_qp(&init).map_err(|e| {
            Failure(if set.mode == Mode::Srq {
                format!("Couldn't create QP[{i}]: {e}")
            } else {
                format!("Couldn't create QP: {e}")
            })
        })?;
        qps.push(qp);
    }
    for (i, qp) in qps.iter_mut().enumerate() {
        let mut attr = QpAttr {
            qp_state: QpState::Init,
            pkey_index: 0,
            port_num: set.ib_port,
            ..QpAttr::default()
        };
        let mut mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
        if set.mode == Mode::Ud {
            attr.qkey = UD_QKEY;
            mask |= QpAttrMask::QKEY;
        } else {
            attr.qp_access_flags = AccessFlags::empty();
            mask |= QpAttrMask::ACCESS_FLAGS;
        }
        qp.modify(&attr, mask).map_err(|e| {
            Failure(if set.mode == Mode::Srq {
                format!("Failed to modify QP[{i}] to INIT: {e}")
            } else {
                format!("Failed to modify QP to INIT: {e}")
            })
        })?;
    }
    Ok(Pingpong {
        qps,
        srq,
        ah: None,
        cq,
        mr,
        pd,
        channel,
        ctx,
    })
}

/// `pp_post_recv(ctx, n)`: posts up to `n` receives; returns how many were posted.
fn post_recvs(pp: &mut Pingpong, wrs: &[RecvWr<'_>], n: u32) -> u32 {
    let wrs = &wrs[..(n as usize).min(wrs.len())];
    let r = match (&mut pp.srq, pp.qps.first_mut()) {
        (Some(srq), _) => srq.post_recv(wrs),
        (None, Some(qp)) => qp.post_recv(wrs),
        (None, None) => return 0,
    };
    match r {
        Ok(()) => wrs.len() as u32,
        Err(e) => e.index as u32,
    }
}

/// `pp_post_send`: one signaled SEND of the message bytes on QP `qi` (inline if it fits).
fn post_send(
    pp: &mut Pingpong,
    set: &Settings,
    qi: usize,
    sge: &[Sge; 1],
    inline_buf: &mut [u8],
    rem_qpn: u32,
) -> Result<(), String> {
    let mut wr = SendWr::send(PINGPONG_SEND_WRID).signaled().sge(sge);
    if !inline_buf.is_empty() {
        pp.mr
            .read(set.send_offset(), inline_buf)
            .map_err(|e| e.to_string())?;
        wr = wr.inline(inline_buf);
    }
    if let Some(ah) = &pp.ah {
        wr = wr.ud(ah, rem_qpn, UD_QKEY);
    }
    let qp = pp.qps.get_mut(qi).ok_or_else(|| format!("no QP {qi}"))?;
    qp.post_send(&[wr]).map_err(|e| e.to_string())
}

/// `pp_connect_ctx`: RTR and RTS (rc/uc/srq), or RTR, RTS and the AH (ud).
fn connect(pp: &mut Pingpong, set: &Settings, my: &[Dest], rem: &[Dest]) -> Result<(), Failure> {
    // rdma-core passes the int GID index (-1 when none) into a u8 field.
    let sgid_index = set.gid_idx.unwrap_or(0xff);
    let global = |dest: &Dest, hop_limit: u8| GlobalRoute {
        dgid: dest.gid,
        flow_label: 0,
        sgid_index,
        hop_limit,
        traffic_class: 0,
    };
    let mut ah_attr = AhAttr {
        dlid: rem[0].lid,
        sl: set.sl,
        src_path_bits: 0,
        is_global: false,
        port_num: set.ib_port,
        ..AhAttr::default()
    };
    if set.mode == Mode::Ud {
        let qp = &mut pp.qps[0];
        let attr = QpAttr {
            qp_state: QpState::Rtr,
            ..QpAttr::default()
        };
        qp.modify(&attr, QpAttrMask::STATE)
            .map_err(|e| Failure(format!("Failed to modify QP to RTR: {e}")))?;
        let attr = QpAttr {
            qp_state: QpState::Rts,
            sq_psn: my[0].psn,
            ..QpAttr::default()
        };
        qp.modify(&attr, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
            .map_err(|e| Failure(format!("Failed to modify QP to RTS: {e}")))?;
        if rem[0].gid.interface_id() != 0 {
            ah_attr.is_global = true;
            ah_attr.grh = global(&rem[0], 64);
        }
        pp.ah = Some(
            pp.pd
                .create_ah(&ah_attr)
                .map_err(|e| Failure(format!("Failed to create AH: {e}")))?,
        );
        return Ok(());
    }
    let srq = set.mode == Mode::Srq;
    let which = |i: usize| if srq { format!("QP[{i}]") } else { "QP".into() };
    for (i, qp) in pp.qps.iter_mut().enumerate() {
        let d = &rem[i];
        let mut attr = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: set.mtu,
            dest_qp_num: d.qpn,
            rq_psn: d.psn,
            ah_attr: AhAttr {
                dlid: d.lid,
                ..ah_attr
            },
            ..QpAttr::default()
        };
        // srq_pingpong.c looks at the first remote GID for every QP.
        if rem[0].gid.interface_id() != 0 {
            attr.ah_attr.is_global = true;
            attr.ah_attr.grh = global(&rem[0], 1);
        }
        let mut mask = QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN;
        if set.mode != Mode::Uc {
            attr.max_dest_rd_atomic = 1;
            attr.min_rnr_timer = 12;
            mask |= QpAttrMask::MAX_DEST_RD_ATOMIC | QpAttrMask::MIN_RNR_TIMER;
        }
        qp.modify(&attr, mask)
            .map_err(|e| Failure(format!("Failed to modify {} to RTR: {e}", which(i))))?;
        attr.qp_state = QpState::Rts;
        attr.sq_psn = my[i].psn;
        let mut mask = QpAttrMask::STATE | QpAttrMask::SQ_PSN;
        if set.mode != Mode::Uc {
            attr.timeout = 14;
            attr.retry_cnt = crate::cause::RETRY_CNT;
            attr.rnr_retry = 7;
            attr.max_rd_atomic = 1;
            mask |= QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::MAX_QP_RD_ATOMIC;
        }
        qp.modify(&attr, mask)
            .map_err(|e| Failure(format!("Failed to modify {} to RTS: {e}", which(i))))?;
    }
    Ok(())
}

/// `pp_client_exch_dest`: connect, send our address(es), read theirs, send `"done"`.
fn client_exch(host: &str, port: u16, my: &[Dest]) -> Result<Vec<Dest>, Failure> {
    let mut sock = exchange::connect(host, port, Duration::ZERO).map_err(Failure)?;
    for d in my {
        sock.write_all(&d.to_wire())
            .map_err(|e| Failure(format!("Couldn't send local address: {e}")))?;
    }
    let rem = read_dests(&mut sock, my.len())
        .map_err(|e| Failure(format!("Couldn't read/write remote address: {e}")))?;
    sock.write_all(exchange::DONE)
        .map_err(|e| Failure(format!("Couldn't read/write remote address: {e}")))?;
    Ok(rem)
}

/// `pp_server_exch_dest`: accept one client, read its address(es), connect our QPs to them,
/// send ours, wait for `"done"`.
fn server_exch(
    pp: &mut Pingpong,
    set: &Settings,
    port: u16,
    my: &[Dest],
) -> Result<Vec<Dest>, Failure> {
    let mut conn = exchange::accept(port).map_err(Failure)?;
    let rem = read_dests(&mut conn, my.len())
        .map_err(|e| Failure(format!("Couldn't read remote address: {e}")))?;
    connect(pp, set, my, &rem)
        .map_err(|Failure(e)| Failure(format!("Couldn't connect to remote QP: {e}")))?;
    for d in my {
        conn.write_all(&d.to_wire())
            .map_err(|e| Failure(format!("Couldn't send local address: {e}")))?;
    }
    exchange::wait_done(&mut conn).map_err(Failure)?;
    Ok(rem)
}

fn read_dests(sock: &mut TcpStream, n: usize) -> Result<Vec<Dest>, String> {
    let mut out = Vec::with_capacity(n);
    let mut msg = [0u8; MSG_LEN];
    for i in 0..n {
        sock.read_exact(&mut msg)
            .map_err(|e| format!("address {i} of {n}: {e}"))?;
        out.push(Dest::from_wire(&msg).map_err(|e| format!("address {i}: {e}"))?);
    }
    Ok(out)
}

/// `pp_close_ctx`: destroys in order, reporting the first failure.
/// How long an RC run keeps its QPs after its last completion: the peer's retry window
/// (`timeout` 14, about 67 ms per try, times `RETRY_CNT` + 1 tries).
const RC_LINGER: Duration = Duration::from_millis(500);

fn close(pp: Pingpong) -> Result<(), Failure> {
    let Pingpong {
        qps,
        srq,
        ah,
        cq,
        mr,
        pd,
        channel,
        ctx,
    } = pp;
    for qp in qps {
        qp.destroy()
            .map_err(|e| Failure(format!("Couldn't destroy QP: {e}")))?;
    }
    if let Some(s) = srq {
        s.destroy()
            .map_err(|e| Failure(format!("Couldn't destroy SRQ: {e}")))?;
    }
    if let Some(a) = ah {
        a.destroy()
            .map_err(|e| Failure(format!("Couldn't destroy AH: {e}")))?;
    }
    cq.destroy()
        .map_err(|e| Failure(format!("Couldn't destroy CQ: {e}")))?;
    mr.dereg()
        .map_err(|e| Failure(format!("Couldn't deregister MR: {e}")))?;
    drop(pd);
    drop(channel);
    drop(ctx);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_message_matches_rdma_core_layout() {
        let mut gid = Gid::default();
        gid.raw[10] = 0xff;
        gid.raw[11] = 0xff;
        gid.raw[12..].copy_from_slice(&[10, 99, 0, 1]);
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xabcdef,
            gid,
        };
        let m = d.to_wire();
        assert_eq!(
            &m[..MSG_LEN - 1],
            b"0000:000011:abcdef:00000000000000000000ffff0a630001"
        );
        assert_eq!(m[MSG_LEN - 1], 0);
        assert_eq!(Dest::from_wire(&m), Ok(d));
        assert_eq!(d.gid.to_ipv6_string(), "::ffff:10.99.0.1");
    }

    #[test]
    fn malformed_messages_are_refused() {
        assert!(Dest::from_wire(b"zz:1:1:00\0").is_err());
        assert!(Dest::from_wire(b"0000:000011:abcdef:0000\0").is_err());
        assert!(
            Dest::from_wire(b"0000:1000000:000000:00000000000000000000000000000000\0").is_err()
        );
        let zero = Dest::from_wire(b"0000:000000:000000:00000000000000000000000000000000\0");
        assert_eq!(zero, Ok(Dest::default()));
    }

    #[test]
    fn psns_are_24_bit_and_vary() {
        let mut p = Psn::seeded();
        let v: Vec<u32> = (0..8).map(|_| p.next()).collect();
        assert!(v.iter().all(|&x| x <= 0xff_ffff));
        assert!(v.windows(2).any(|w| w[0] != w[1]));
    }
}
