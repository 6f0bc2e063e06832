//! `uverbs perf`: perftest's latency and bandwidth tests (`ib_{send,write,read}_{lat,bw}`)
//! over uverbs, plus `uverbs perf micro`, a userspace microbenchmark of post and poll.
//!
//! The knobs are perftest's (`-s -n -t -Q -l -x -d -i -p -e`, server/client with the server's
//! name last) and so is the result table, so a run reads like perftest's. The TCP exchange
//! between client and server is our own (a text line with QPN, PSN, rkey, address and GID, and
//! one-byte barriers): `uverbs perf` talks to `uverbs perf`, not to perftest's binaries.
//!
//! Defaults: without `--perftest-defaults`, the bandwidth tests post lists of 32 work requests
//! and ask for a completion every 64 (one doorbell and one CQE per batch), and on a software
//! device (rxe) sleep on completion events while the send queue is full instead of spinning
//! (`-e`; `--busy-poll` turns it off); with it, every
//! setting is perftest 4.5's (post list 1, CQ moderation 100, TX depth 128, no inline on
//! bandwidth tests, and on latency tests inline only where perftest enables it: not on rxe).
//! Latency tests otherwise run the same either way (one message in flight).
//!
//! The measured loops post and poll through the library's lock-free data path with work
//! requests, SGEs and completion arrays built before the loop: nothing is allocated in them.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, AhAttr, CompChannel, Context, Cq, Gid, GidType, GlobalRoute, Mr, Mtu, Pd, Qp,
    QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendFlags, SendWr, Sge, Wc,
    WcStatus, WrOp,
};

use crate::Failure;

/// Which test to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Test {
    /// SEND ping-pong latency (`ib_send_lat`).
    SendLat,
    /// RDMA WRITE ping-pong latency (`ib_write_lat`).
    WriteLat,
    /// RDMA READ latency (`ib_read_lat`).
    ReadLat,
    /// SEND bandwidth and message rate (`ib_send_bw`).
    SendBw,
    /// RDMA WRITE bandwidth and message rate (`ib_write_bw`).
    WriteBw,
    /// RDMA READ bandwidth and message rate (`ib_read_bw`).
    ReadBw,
    /// Userspace cost of post and poll on one local QP pair (no peer; see the module docs).
    Micro,
}

impl Test {
    fn name(self) -> &'static str {
        match self {
            Test::SendLat => "send-lat",
            Test::WriteLat => "write-lat",
            Test::ReadLat => "read-lat",
            Test::SendBw => "send-bw",
            Test::WriteBw => "write-bw",
            Test::ReadBw => "read-bw",
            Test::Micro => "micro",
        }
    }

    fn is_lat(self) -> bool {
        matches!(self, Test::SendLat | Test::WriteLat | Test::ReadLat)
    }

    fn is_send(self) -> bool {
        matches!(self, Test::SendLat | Test::SendBw)
    }

    fn title(self) -> &'static str {
        match self {
            Test::SendLat => "Send Latency Test",
            Test::WriteLat => "RDMA_Write Latency Test",
            Test::ReadLat => "RDMA_Read Latency Test",
            Test::SendBw => "Send BW Test",
            Test::WriteBw => "RDMA_Write BW Test",
            Test::ReadBw => "RDMA_Read BW Test",
            Test::Micro => "post/poll microbenchmark",
        }
    }
}

/// Options of `uverbs perf` (perftest's names and letters).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The test.
    #[arg(value_enum)]
    test: Test,
    /// Use IB device DEV (default: the first device found).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    ib_dev: Option<String>,
    /// Use port PORT of the IB device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..))]
    ib_port: u8,
    /// Listen on/connect to TCP port PORT.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    port: u16,
    /// Message size in bytes (default: 2 for latency, 65536 for bandwidth tests).
    #[arg(short = 's', long = "size")]
    size: Option<u32>,
    /// Iterations (default: 1000 for latency, 5000 for bandwidth tests; micro: 10000).
    #[arg(short = 'n', long = "iters")]
    iters: Option<u32>,
    /// Send queue depth (default: 1 for latency tests; 128 with --perftest-defaults, else 256).
    #[arg(short = 't', long = "tx-depth")]
    tx_depth: Option<u32>,
    /// Receive queue depth for SEND tests (default 512).
    #[arg(short = 'r', long = "rx-depth")]
    rx_depth: Option<u32>,
    /// Ask for a completion every N work requests (default: 100 with --perftest-defaults, else 64).
    #[arg(short = 'Q', long = "cq-mod")]
    cq_mod: Option<u32>,
    /// Post lists of N work requests with one doorbell (default: 1 with --perftest-defaults, else 32).
    #[arg(short = 'l', long = "post-list")]
    post_list: Option<u32>,
    /// Local GID index (default: the port's RoCE v2 IPv4 GID on Ethernet, else 0; perftest: 0).
    #[arg(short = 'x', long = "gid-index")]
    gid_index: Option<u32>,
    /// Inline size limit (default: 236 for send-lat, 220 for write-lat, 64 for send-bw and
    /// write-bw of up to 64 B, 0 otherwise; with --perftest-defaults perftest's, 0 on rxe).
    #[arg(short = 'I', long = "inline-size")]
    inline_size: Option<u32>,
    /// Outstanding RDMA reads (default: the device's max_qp_init_rd_atom).
    #[arg(short = 'o', long = "outs")]
    outs: Option<u32>,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (default: the port's active MTU).
    #[arg(short = 'm', long = "mtu")]
    mtu: Option<u32>,
    /// Use exactly perftest 4.5's default settings for everything not given.
    #[arg(long = "perftest-defaults")]
    perftest_defaults: bool,
    /// Sleep on completion events instead of busy-polling (perftest's `-e`): when a poll
    /// finds nothing, arm the CQ, poll once more, then wait on the completion channel.
    /// Default: on for the bandwidth tests on a software device (rxe), where the kernel does
    /// the device's work on the CPUs a busy poll would take; off otherwise.
    #[arg(short = 'e', long = "events", conflicts_with = "busy_poll")]
    events: bool,
    /// Always busy-poll (perftest's default), also where `-e` is our default.
    #[arg(long = "busy-poll")]
    busy_poll: bool,
    /// Print the result as one JSON object instead of the table.
    #[arg(long = "json")]
    json: bool,
    /// Connect to the server at this host (default: be the server).
    servername: Option<String>,
}

/// The resolved settings of one run.
#[derive(Debug, Clone)]
struct Settings {
    test: Test,
    size: u32,
    iters: u32,
    tx_depth: u32,
    rx_depth: u32,
    cq_mod: u32,
    post_list: u32,
    inline_size: u32,
    outs: u32,
    ib_port: u8,
    gid_index: u32,
    mtu: Mtu,
    events: bool,
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

/// Everything one side owns. Fields drop in order: QP, CQs, MR, PD, context.
struct Side {
    qp: Qp,
    send_cq: Cq,
    recv_cq: Cq,
    /// The completion channel of both CQs with `-e`.
    channel: Option<CompChannel>,
    mr: Mr,
    pd: Pd,
    ctx: Context,
}

/// One side's address as exchanged over TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Dest {
    lid: u16,
    qpn: u32,
    psn: u32,
    rkey: u32,
    addr: u64,
    gid: Gid,
}

impl Dest {
    fn to_line(self) -> String {
        let gid: String = self.gid.raw.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "UVPERF1 {:x} {:x} {:x} {:x} {:x} {gid}\n",
            self.lid, self.qpn, self.psn, self.rkey, self.addr
        )
    }

    fn from_line(line: &str) -> Result<Dest, String> {
        let bad = || format!("malformed address line {line:?} from the peer (is it uverbs perf?)");
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 7 || f[0] != "UVPERF1" {
            return Err(bad());
        }
        let h = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad());
        let g = f[6];
        if g.len() != 32 {
            return Err(bad());
        }
        let mut gid = Gid::default();
        for (i, b) in gid.raw.iter_mut().enumerate() {
            *b = u8::from_str_radix(&g[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Dest {
            lid: u16::try_from(h(f[1])?).map_err(|_| bad())?,
            qpn: u32::try_from(h(f[2])?).map_err(|_| bad())?,
            psn: u32::try_from(h(f[3])?).map_err(|_| bad())?,
            rkey: u32::try_from(h(f[4])?).map_err(|_| bad())?,
            addr: h(f[5])?,
            gid,
        })
    }
}

fn fail<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> Failure + '_ {
    move |e| Failure(format!("{what}: {e}"))
}

pub fn run(args: Args) -> Result<ExitCode, Failure> {
    let dev = match &args.ib_dev {
        Some(name) => uverbs::device_by_name(name)
            .map_err(|e| Failure(format!("IB device {name} not found: {e}")))?,
        None => uverbs::devices()?
            .into_iter()
            .next()
            .ok_or_else(|| Failure("No IB devices found".into()))?,
    };
    let ctx = Context::open(&dev)?;
    let set = resolve(&args, &ctx)?;
    if set.test == Test::Micro {
        if args.servername.is_some() {
            return Err(Failure(
                "`perf micro` runs on one machine: it takes no server name".into(),
            ));
        }
        return micro::run(ctx, &set, args.json);
    }
    let mut side = setup(ctx, &set)?;
    let my = local_dest(&side, &set)?;
    let client = args.servername.is_some();
    if !args.json {
        print_banner(&set, &side, client);
    }
    // Receives first, so the peer's first SEND finds one.
    let recv_sge = [side
        .mr
        .sge(0, set.size.max(1))
        .map_err(fail("receive SGE"))?];
    let recv_wrs = vec![RecvWr::new(0, &recv_sge); set.rx_depth as usize];
    if set.test.is_send() {
        side.qp
            .post_recv(&recv_wrs)
            .map_err(fail("Couldn't post receives"))?;
    }
    let mut sock = match &args.servername {
        Some(host) => connect_tcp(host, args.port)?,
        None => accept_tcp(args.port)?,
    };
    sock.write_all(my.to_line().as_bytes())
        .map_err(fail("Couldn't send the local address"))?;
    let rem =
        Dest::from_line(&read_line(&mut sock).map_err(fail("Couldn't read the remote address"))?)
            .map_err(Failure)?;
    if !args.json {
        print_dest("local", &my);
        print_dest("remote", &rem);
        println!("---------------------------------------------------------------------------------------");
    }
    connect_qp(&mut side, &set, &my, &rem)?;
    barrier(&mut sock)?;

    let result = if set.test.is_lat() {
        let samples = match set.test {
            Test::SendLat => run_send_lat(&mut side, &set, client, &recv_wrs)?,
            Test::WriteLat => run_write_lat(&mut side, &set, client, &rem)?,
            _ => {
                if client {
                    run_read_lat(&mut side, &set, &rem)?
                } else {
                    Vec::new()
                }
            }
        };
        Outcome::Lat(samples)
    } else if client || set.test == Test::SendBw {
        Outcome::Bw(run_bw(&mut side, &set, client, &rem, &recv_wrs)?)
    } else {
        Outcome::None
    };
    // The client tells the server it is done; the server waits for it.
    barrier(&mut sock)?;
    report(&set, client, &result, args.json);
    close(side)?;
    Ok(ExitCode::SUCCESS)
}

/// perftest turns CQ moderation off (a completion per WR) for messages larger than this, unless
/// `-Q` is given.
const PERFTEST_CQ_MOD_SIZE_LIMIT: u32 = 8192;

fn resolve(args: &Args, ctx: &Context) -> Result<Settings, Failure> {
    let test = args.test;
    let pt = args.perftest_defaults;
    let lat = test.is_lat();
    let size = args
        .size
        .unwrap_or(if lat || test == Test::Micro { 2 } else { 65536 });
    let iters = args.iters.unwrap_or(match test {
        Test::Micro => 10000,
        _ if lat => 1000,
        _ => 5000,
    });
    if iters < 5 && test != Test::Micro {
        return Err(Failure(format!("-n/--iters {iters}: at least 5")));
    }
    let tx_depth = args.tx_depth.unwrap_or(match () {
        _ if lat => 1,
        _ if pt => 128,
        _ => 256,
    });
    if tx_depth == 0 {
        return Err(Failure("-t/--tx-depth must be at least 1".into()));
    }
    let post_list = args.post_list.unwrap_or(if pt || lat { 1 } else { 32 });
    if post_list == 0 || post_list > tx_depth {
        return Err(Failure(format!(
            "-l/--post-list {post_list} must be between 1 and the TX depth {tx_depth}"
        )));
    }
    let mut cq_mod = args.cq_mod.unwrap_or(match () {
        _ if lat => 1,
        // perftest signals every WR of messages above 8 KiB unless -Q is given (its
        // MSG_SIZE_CQ_MOD_LIMIT): ib_write_bw -s 65536 prints "CQ Moderation : 1".
        _ if pt && size > PERFTEST_CQ_MOD_SIZE_LIMIT => 1,
        _ if pt => 100,
        _ => 64,
    });
    if cq_mod == 0 {
        return Err(Failure("-Q/--cq-mod must be at least 1".into()));
    }
    // A batch must always find room once every signaled WR has completed: at most cq_mod - 1
    // unsignaled WRs can be left outstanding, plus one list.
    if cq_mod - 1 + post_list > tx_depth {
        let fixed = tx_depth - post_list + 1;
        if args.cq_mod.is_some() {
            eprintln!(
                "uverbs perf: -Q {cq_mod} with -t {tx_depth} and -l {post_list} could stall; using -Q {fixed}"
            );
        }
        cq_mod = fixed;
    }
    let dev = ctx.query_device()?;
    let inline_size = args.inline_size.unwrap_or(match test {
        Test::SendLat | Test::WriteLat if pt => perftest_lat_inline(test, dev.vendor_part_id),
        Test::SendLat => 236,
        Test::WriteLat => 220,
        Test::WriteBw | Test::SendBw if !pt && size <= 64 => 64,
        _ => 0,
    });
    let outs = args.outs.unwrap_or(dev.max_qp_init_rd_atom).clamp(1, 255);
    let port = ctx.query_port(args.ib_port)?;
    let mtu = match args.mtu {
        None => port.active_mtu,
        Some(v) => mtu_from_bytes(v).ok_or_else(|| {
            Failure(format!(
                "-m/--mtu {v} is not a path MTU: use 256, 512, 1024, 2048 or 4096"
            ))
        })?,
    };
    let gid_index = match args.gid_index {
        Some(i) => i,
        None if pt => 0,
        None => default_gid(ctx, args.ib_port),
    };
    Ok(Settings {
        test,
        size,
        iters,
        tx_depth,
        rx_depth: args.rx_depth.unwrap_or(512).max(1),
        cq_mod,
        post_list,
        inline_size,
        outs,
        ib_port: args.ib_port,
        gid_index,
        mtu,
        // On rxe the "device" is the kernel's rxe work on this machine's CPUs: a bandwidth
        // client spinning on its CQ while its send queue is full takes a CPU that work needs
        // (measured: write-bw 64 B 1.73x perftest's rate sleeping, 1.09x spinning, same
        // run). Latency tests spin: a sleep and wake-up per message costs more than it frees.
        events: args.events
            || (!args.busy_poll
                && !pt
                && !lat
                && matches!(ctx.provider(), uverbs::ProviderInfo::Rxe)),
    })
}

/// The inline size perftest 4.5 uses on a latency test (its `ctx_set_max_inline`): inline only
/// on devices its `ib_dev_name` table knows. Of the devices uverbs drives, that is EFA with PCI
/// device id 0xefa0 or 0xefa1 (32 bytes); on any other, rxe included, perftest prints "Device
/// not recognized to implement inline feature. Disabling it" and uses 0.
fn perftest_lat_inline(test: Test, vendor_part_id: u32) -> u32 {
    const PERFTEST_EFA_PART_IDS: [u32; 2] = [0xefa0, 0xefa1];
    match test {
        Test::SendLat | Test::WriteLat if PERFTEST_EFA_PART_IDS.contains(&vendor_part_id) => 32,
        _ => 0,
    }
}

/// The first RoCE v2 GID with an IPv4-mapped address, else index 0.
fn default_gid(ctx: &Context, port: u8) -> u32 {
    let Ok(table) = ctx.query_gid_table() else {
        return 0;
    };
    table
        .iter()
        .find(|e| {
            e.port_num == u32::from(port)
                && e.gid_type == GidType::RoceV2
                && e.gid.raw[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
        })
        .map(|e| e.gid_index)
        .unwrap_or(0)
}

fn setup(ctx: Context, set: &Settings) -> Result<Side, Failure> {
    let pd = ctx.alloc_pd().map_err(fail("Couldn't allocate PD"))?;
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mr = pd
        // Two halves: the peer writes into the first, our RDMA writes and sends come from the
        // second (write-lat spins on the first while its own mark sits in the second).
        .reg_mr(2 * set.size.max(1) as usize, access)
        .map_err(fail("Couldn't register MR"))?;
    let channel = if set.events {
        Some(
            ctx.create_comp_channel()
                .map_err(fail("Couldn't create the completion channel"))?,
        )
    } else {
        None
    };
    let send_cq = ctx
        .create_cq(set.tx_depth.max(2), channel.as_ref(), 0)
        .map_err(fail("Couldn't create the send CQ"))?;
    let recv_cq = ctx
        .create_cq(set.rx_depth.max(2), channel.as_ref(), 0)
        .map_err(fail("Couldn't create the receive CQ"))?;
    let inline = if set.size <= set.inline_size {
        set.inline_size
    } else {
        0
    };
    let cap = QpCap {
        max_send_wr: set.tx_depth,
        max_recv_wr: set.rx_depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: inline,
    };
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &send_cq, &recv_cq, cap))
        .map_err(fail("Couldn't create QP"))?;
    let attr = QpAttr {
        qp_state: QpState::Init,
        pkey_index: 0,
        port_num: set.ib_port,
        qp_access_flags: access,
        ..QpAttr::default()
    };
    qp.modify(
        &attr,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .map_err(fail("Failed to modify QP to INIT"))?;
    Ok(Side {
        qp,
        send_cq,
        recv_cq,
        channel,
        mr,
        pd,
        ctx,
    })
}

fn local_dest(side: &Side, set: &Settings) -> Result<Dest, Failure> {
    let port = side.ctx.query_port(set.ib_port)?;
    let gid = side
        .ctx
        .query_gid(set.ib_port, set.gid_index)
        .map_err(fail("Couldn't read the local GID"))?;
    let psn = (std::process::id().wrapping_mul(2_654_435_761) ^ side.qp.qp_num()) & 0xff_ffff;
    Ok(Dest {
        lid: port.lid,
        qpn: side.qp.qp_num(),
        psn,
        rkey: side.mr.rkey(),
        addr: side.mr.addr(),
        gid,
    })
}

fn connect_qp(side: &mut Side, set: &Settings, my: &Dest, rem: &Dest) -> Result<(), Failure> {
    let mut attr = QpAttr {
        qp_state: QpState::Rtr,
        path_mtu: set.mtu,
        dest_qp_num: rem.qpn,
        rq_psn: rem.psn,
        max_dest_rd_atomic: set.outs as u8,
        min_rnr_timer: 12,
        ah_attr: AhAttr {
            dlid: rem.lid,
            port_num: set.ib_port,
            is_global: rem.gid.raw != [0; 16],
            grh: GlobalRoute {
                dgid: rem.gid,
                flow_label: 0,
                sgid_index: set.gid_index as u8,
                hop_limit: 64,
                traffic_class: 0,
            },
            ..AhAttr::default()
        },
        ..QpAttr::default()
    };
    side.qp
        .modify(
            &attr,
            QpAttrMask::STATE
                | QpAttrMask::AV
                | QpAttrMask::PATH_MTU
                | QpAttrMask::DEST_QPN
                | QpAttrMask::RQ_PSN
                | QpAttrMask::MAX_DEST_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER,
        )
        .map_err(fail("Failed to modify QP to RTR"))?;
    attr.qp_state = QpState::Rts;
    attr.sq_psn = my.psn;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = set.outs as u8;
    side.qp
        .modify(
            &attr,
            QpAttrMask::STATE
                | QpAttrMask::SQ_PSN
                | QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::MAX_QP_RD_ATOMIC,
        )
        .map_err(fail("Failed to modify QP to RTS"))
}

// ----- TCP exchange ----------------------------------------------------------------------

fn connect_tcp(host: &str, port: u16) -> Result<TcpStream, Failure> {
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| Failure(format!("{e} for {host}:{port}")))?
        .collect();
    // The server may still be setting up: retry a refused connection for a while.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut last = String::from("no address");
        for a in &addrs {
            match TcpStream::connect(a) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = e.to_string(),
            }
        }
        if Instant::now() > deadline {
            return Err(Failure(format!(
                "Couldn't connect to {host}:{port}: {last}"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn accept_tcp(port: u16) -> Result<TcpStream, Failure> {
    let listener = TcpListener::bind(("::", port))
        .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
        .map_err(|e| Failure(format!("Couldn't listen to port {port}: {e}")))?;
    let (s, _) = listener
        .accept()
        .map_err(|e| Failure(format!("accept() failed: {e}")))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

fn read_line(s: &mut TcpStream) -> std::io::Result<String> {
    let mut out = Vec::new();
    let mut b = [0u8];
    while out.len() < 256 {
        s.read_exact(&mut b)?;
        if b[0] == b'\n' {
            break;
        }
        out.push(b[0]);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Both sides write one byte and read the other's.
fn barrier(s: &mut TcpStream) -> Result<(), Failure> {
    s.write_all(b"B")
        .map_err(fail("Couldn't sync with the peer"))?;
    let mut b = [0u8];
    s.read_exact(&mut b)
        .map_err(fail("Couldn't sync with the peer"))?;
    if b[0] != b'B' {
        return Err(Failure(format!(
            "the peer sent {:#04x} where a sync byte belongs",
            b[0]
        )));
    }
    Ok(())
}

// ----- the measured loops ----------------------------------------------------------------

/// How long a `-e` wait may take before the run is declared stuck.
const EVENT_WAIT: Duration = Duration::from_secs(30);

/// How many times `-e` slept on the completion channel (reported in `--json`).
static EVENT_WAITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One poll of `cq`; with a completion channel (`-e`) an empty poll sleeps instead of
/// returning: arm the CQ, poll again (a completion that arrived before the arming raises no
/// event), and only then wait for the event. Returns the completions taken (0 after a
/// spurious wake-up: an event left from an earlier arming).
#[inline]
fn poll_or_wait(cq: &mut Cq, ch: Option<&CompChannel>, wcs: &mut [Wc]) -> Result<usize, Failure> {
    let n = cq
        .poll(wcs)
        .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
    let Some(ch) = ch else { return Ok(n) };
    if n > 0 {
        return Ok(n);
    }
    cq.req_notify(false)
        .map_err(fail("Couldn't request CQ notification"))?;
    let n = cq
        .poll(wcs)
        .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
    if n > 0 {
        return Ok(n);
    }
    ch.get_cq_event(Some(EVENT_WAIT))
        .map_err(fail("Failed to get a CQ event"))?;
    EVENT_WAITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    cq.poll(wcs)
        .map_err(|e| Failure(format!("poll CQ failed: {e}")))
}

/// Polls until one completion arrives; a failed one is an error naming its status.
#[inline]
fn poll_one(
    cq: &mut Cq,
    ch: Option<&CompChannel>,
    wc: &mut [Wc; 1],
    what: &str,
) -> Result<(), Failure> {
    loop {
        let n = poll_or_wait(cq, ch, wc)?;
        if n == 1 {
            if !wc[0].status.is_success() {
                return Err(Failure(format!(
                    "{what} completion with error: {} (wr_id {}, vendor_err {:#x})",
                    wc[0].status, wc[0].wr_id, wc[0].vendor_err
                )));
            }
            return Ok(());
        }
    }
}

fn data_wr<'a>(set: &Settings, op: WrOp, sge: &'a [Sge], inline: &'a [u8]) -> SendWr<'a> {
    let wr = SendWr::new(0, op);
    if set.size <= set.inline_size && !matches!(op, WrOp::RdmaRead { .. }) {
        wr.inline(inline)
    } else {
        wr.sge(sge)
    }
}

/// `ib_send_lat`: ping-pong SENDs; a sample is half a round trip.
fn run_send_lat(
    side: &mut Side,
    set: &Settings,
    client: bool,
    recv_wrs: &[RecvWr<'_>],
) -> Result<Vec<u64>, Failure> {
    let sge = [side.mr.sge(0, set.size).map_err(fail("send SGE"))?];
    let inline = vec![0u8; set.size as usize];
    let wr = [data_wr(set, WrOp::Send, &sge, &inline).signaled()];
    let mut stamps = vec![0u64; set.iters as usize];
    let mut wc = [Wc::default()];
    let t0 = Instant::now();
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    while scnt < set.iters || rcnt < set.iters {
        if rcnt < set.iters && !(scnt < 1 && client) {
            poll_one(&mut side.recv_cq, side.channel.as_ref(), &mut wc, "receive")?;
            rcnt += 1;
            side.qp
                .post_recv(&recv_wrs[..1])
                .map_err(fail("Couldn't post receive"))?;
        }
        if scnt < set.iters {
            stamps[scnt as usize] = t0.elapsed().as_nanos() as u64;
            side.qp.post_send(&wr).map_err(fail("Couldn't post send"))?;
            scnt += 1;
            poll_one(&mut side.send_cq, side.channel.as_ref(), &mut wc, "send")?;
        }
    }
    Ok(deltas(&stamps, 2))
}

/// `ib_write_lat`: ping-pong RDMA WRITEs; each side spins on the last byte of its buffer.
fn run_write_lat(
    side: &mut Side,
    set: &Settings,
    client: bool,
    rem: &Dest,
) -> Result<Vec<u64>, Failure> {
    let size = set.size.max(1) as usize;
    // The peer writes into [0, size) and we spin on its last byte; our own message (and its
    // mark) is sent from [size, 2 * size), so we never see our own mark.
    let sge = [side.mr.sge(size, size as u32).map_err(fail("write SGE"))?];
    let mut inline = vec![0u8; size];
    let op = WrOp::RdmaWrite {
        remote_addr: rem.addr,
        rkey: rem.rkey,
    };
    let mut stamps = vec![0u64; set.iters as usize];
    let mut wc = [Wc::default()];
    let mut last = [0u8];
    let t0 = Instant::now();
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    while scnt < set.iters || rcnt < set.iters {
        if rcnt < set.iters && !(scnt < 1 && client) {
            rcnt += 1;
            let want = rcnt as u8;
            loop {
                // The peer's RDMA write lands behind the compiler's back: the fence keeps the
                // load in the loop (it orders this read after the previous iteration's).
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                side.mr
                    .read(size - 1, &mut last)
                    .map_err(fail("reading the buffer"))?;
                if last[0] == want {
                    break;
                }
            }
        }
        if scnt < set.iters {
            stamps[scnt as usize] = t0.elapsed().as_nanos() as u64;
            scnt += 1;
            let mark = [scnt as u8];
            // The byte the peer spins on: in the inline copy or in our MR.
            inline[size - 1] = mark[0];
            side.mr
                .write(2 * size - 1, &mark)
                .map_err(fail("writing the buffer"))?;
            let wr = [data_wr(set, op, &sge, &inline).signaled()];
            side.qp.post_send(&wr).map_err(fail("Couldn't post send"))?;
            poll_one(
                &mut side.send_cq,
                side.channel.as_ref(),
                &mut wc,
                "RDMA write",
            )?;
        }
    }
    Ok(deltas(&stamps, 2))
}

/// `ib_read_lat`: one RDMA READ at a time; a sample is the whole round trip.
fn run_read_lat(side: &mut Side, set: &Settings, rem: &Dest) -> Result<Vec<u64>, Failure> {
    let sge = [side.mr.sge(0, set.size).map_err(fail("read SGE"))?];
    let wr = [SendWr::new(
        0,
        WrOp::RdmaRead {
            remote_addr: rem.addr,
            rkey: rem.rkey,
        },
    )
    .sge(&sge)
    .signaled()];
    let mut stamps = vec![0u64; set.iters as usize];
    let mut wc = [Wc::default()];
    let t0 = Instant::now();
    for s in stamps.iter_mut() {
        *s = t0.elapsed().as_nanos() as u64;
        side.qp.post_send(&wr).map_err(fail("Couldn't post send"))?;
        poll_one(
            &mut side.send_cq,
            side.channel.as_ref(),
            &mut wc,
            "RDMA read",
        )?;
    }
    Ok(deltas(&stamps, 1))
}

/// Differences of consecutive stamps, divided by `div`, in nanoseconds.
fn deltas(stamps: &[u64], div: u64) -> Vec<u64> {
    stamps
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]) / div)
        .collect()
}

/// What a bandwidth run measured.
struct BwResult {
    elapsed: Duration,
    /// Best rate seen over any window of completions (perftest's "peak"), in messages/s.
    peak_rate: f64,
    messages: u32,
}

/// `ib_{send,write,read}_bw`: keep `tx_depth` work requests in flight, posted in lists of
/// `post_list`, one signaled every `cq_mod`; the server of a SEND test receives.
fn run_bw(
    side: &mut Side,
    set: &Settings,
    client: bool,
    rem: &Dest,
    recv_wrs: &[RecvWr<'_>],
) -> Result<BwResult, Failure> {
    if !client {
        return run_bw_receiver(side, set, recv_wrs);
    }
    let sge = [side.mr.sge(0, set.size).map_err(fail("SGE"))?];
    let inline = vec![0u8; set.size as usize];
    let op = match set.test {
        Test::SendBw => WrOp::Send,
        Test::WriteBw => WrOp::RdmaWrite {
            remote_addr: rem.addr,
            rkey: rem.rkey,
        },
        _ => WrOp::RdmaRead {
            remote_addr: rem.addr,
            rkey: rem.rkey,
        },
    };
    let template = data_wr(set, op, &sge, &inline);
    let mut wrs = vec![template; set.post_list as usize];
    let mut wcs = vec![Wc::default(); set.tx_depth.min(64) as usize];
    // Completion times at up to 64 checkpoints, for the peak rate.
    let mut marks = vec![(0u32, Duration::ZERO); 65];
    let mut nmarks = 0usize;
    let step = (set.iters / 64).max(1);
    let iters = set.iters;
    let (mut scnt, mut ccnt) = (0u32, 0u32);
    let t0 = Instant::now();
    while ccnt < iters {
        while scnt < iters {
            let batch = set.post_list.min(iters - scnt);
            if scnt - ccnt + batch > set.tx_depth {
                break;
            }
            for (k, wr) in wrs.iter_mut().take(batch as usize).enumerate() {
                let i = scnt + k as u32;
                wr.wr_id = u64::from(i);
                wr.flags = if (i + 1) % set.cq_mod == 0 || i + 1 == iters {
                    SendFlags::SIGNALED
                } else {
                    SendFlags::empty()
                };
            }
            side.qp
                .post_send(&wrs[..batch as usize])
                .map_err(fail("Couldn't post send"))?;
            scnt += batch;
        }
        // Busy-poll, or with `-e` sleep until a completion arrives: the loop above stopped
        // because nothing more can be posted until completions free room, or all is posted.
        let n = poll_or_wait(&mut side.send_cq, side.channel.as_ref(), &mut wcs)?;
        for wc in &wcs[..n] {
            if !wc.status.is_success() {
                return Err(Failure(format!(
                    "completion with error: {} (wr_id {}, vendor_err {:#x})",
                    wc.status, wc.wr_id, wc.vendor_err
                )));
            }
            // RC completes in order: a signaled WR completes every WR before it.
            ccnt = wc.wr_id as u32 + 1;
        }
        if n > 0 && nmarks < marks.len() && ccnt >= marks[nmarks.saturating_sub(1)].0 + step {
            marks[nmarks] = (ccnt, t0.elapsed());
            nmarks += 1;
        }
    }
    let elapsed = t0.elapsed();
    Ok(BwResult {
        elapsed,
        peak_rate: peak(&marks[..nmarks]),
        messages: iters,
    })
}

fn run_bw_receiver(
    side: &mut Side,
    set: &Settings,
    recv_wrs: &[RecvWr<'_>],
) -> Result<BwResult, Failure> {
    let mut wcs = vec![Wc::default(); 64];
    let mut rcnt = 0u32;
    let mut t0 = None;
    let mut marks = vec![(0u32, Duration::ZERO); 65];
    let mut nmarks = 0usize;
    let step = (set.iters / 64).max(1);
    let start = Instant::now();
    while rcnt < set.iters {
        let n = poll_or_wait(&mut side.recv_cq, side.channel.as_ref(), &mut wcs)?;
        if n == 0 {
            continue;
        }
        let t = *t0.get_or_insert_with(Instant::now);
        for wc in &wcs[..n] {
            if !wc.status.is_success() {
                return Err(Failure(format!(
                    "receive completion with error: {} (vendor_err {:#x})",
                    wc.status, wc.vendor_err
                )));
            }
        }
        rcnt += n as u32;
        side.qp
            .post_recv(&recv_wrs[..n])
            .map_err(fail("Couldn't post receives"))?;
        if nmarks < marks.len() && rcnt >= marks[nmarks.saturating_sub(1)].0 + step {
            marks[nmarks] = (rcnt, t.elapsed());
            nmarks += 1;
        }
    }
    Ok(BwResult {
        elapsed: t0.map(|t| t.elapsed()).unwrap_or_else(|| start.elapsed()),
        peak_rate: peak(&marks[..nmarks]),
        messages: set.iters,
    })
}

/// The best rate between consecutive checkpoints (messages/s).
fn peak(marks: &[(u32, Duration)]) -> f64 {
    let mut best = 0.0f64;
    let mut prev = (0u32, Duration::ZERO);
    for &(n, t) in marks {
        let dt = (t - prev.1).as_secs_f64();
        if dt > 0.0 {
            best = best.max(f64::from(n - prev.0) / dt);
        }
        prev = (n, t);
    }
    best
}

// ----- reporting -------------------------------------------------------------------------

enum Outcome {
    Lat(Vec<u64>),
    Bw(BwResult),
    None,
}

/// Latency statistics in microseconds, as perftest reports them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LatStats {
    min: f64,
    max: f64,
    typical: f64,
    avg: f64,
    stdev: f64,
    p99: f64,
    p999: f64,
}

/// perftest leaves the largest samples out of every statistic (its `LAT_MEASURE_TAIL`).
const PERFTEST_LAT_MEASURE_TAIL: usize = 2;

/// perftest's `print_report_lat`: sort the samples, leave out the [`PERFTEST_LAT_MEASURE_TAIL`]
/// largest, and take `t_typical` as the median of the rest (`get_median`: the middle one, or the
/// mean of the two middle ones); t_min, the average and the standard deviation are over the
/// same samples, and t_max and the percentiles index the sorted array as perftest does (its
/// t_max is the first sample left out).
fn lat_stats(samples: &[u64]) -> Option<LatStats> {
    if samples.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = samples.iter().map(|&ns| ns as f64 / 1000.0).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // perftest needs more samples than the tail; with fewer, keep them all.
    let m = if n > PERFTEST_LAT_MEASURE_TAIL {
        n - PERFTEST_LAT_MEASURE_TAIL
    } else {
        n
    };
    let kept = &v[..m];
    let avg = kept.iter().sum::<f64>() / m as f64;
    let var = kept.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / m as f64;
    let at = |i: usize| v[i.min(n - 1)];
    let typical = if (m - 1) % 2 == 1 {
        (v[m / 2] + v[m / 2 - 1]) / 2.0
    } else {
        v[m / 2]
    };
    Some(LatStats {
        min: v[0],
        max: at(m),
        typical,
        avg,
        stdev: var.sqrt(),
        p99: at(((m as f64) * 0.99).ceil() as usize),
        p999: at(((m as f64) * 0.999).ceil() as usize),
    })
}

fn print_banner(set: &Settings, side: &Side, client: bool) {
    let line =
        "---------------------------------------------------------------------------------------";
    println!("{line}");
    println!("                    {} (uverbs)", set.test.title());
    println!(
        " Dual-port       : OFF\t\tDevice         : {}",
        side.ctx.device().name()
    );
    println!(" Number of qps   : 1\t\tTransport type : IB");
    println!(" Connection type : RC\t\tUsing SRQ      : OFF");
    println!(
        " TX depth        : {}\t\tPost List      : {}",
        set.tx_depth, set.post_list
    );
    if set.test.is_send() {
        println!(" RX depth        : {}", set.rx_depth);
    }
    println!(
        " CQ Moderation   : {}\t\tMtu            : {}[B]",
        set.cq_mod,
        set.mtu.bytes().unwrap_or(0)
    );
    println!(
        " Link type       : Ethernet\tGID index      : {}",
        set.gid_index
    );
    if matches!(set.test, Test::ReadLat | Test::ReadBw) {
        println!(" Outstand reads  : {}", set.outs);
    }
    if set.events {
        println!(" CQ events       : ON (sleep when a poll finds nothing)");
    }
    let inl = if set.size <= set.inline_size {
        set.inline_size
    } else {
        0
    };
    println!(
        " Max inline data : {inl}[B]\tRole           : {}",
        if client { "client" } else { "server" }
    );
    println!("{line}");
}

fn print_dest(which: &str, d: &Dest) {
    let g: Vec<String> = d.gid.raw.iter().map(|b| format!("{b:02}")).collect();
    println!(
        " {which} address: LID {:#06x} QPN {:#06x} PSN {:#08x} RKey {:#010x} VAddr {:#018x}\n GID: {}",
        d.lid,
        d.qpn,
        d.psn,
        d.rkey,
        d.addr,
        g.join(":")
    );
}

fn report(set: &Settings, client: bool, out: &Outcome, json: bool) {
    let line =
        "---------------------------------------------------------------------------------------";
    let common = serde_json::json!({
        "test": set.test.name(),
        "role": if client { "client" } else { "server" },
        "bytes": set.size,
        "iterations": set.iters,
        "tx_depth": set.tx_depth,
        "rx_depth": set.rx_depth,
        "cq_mod": set.cq_mod,
        "post_list": set.post_list,
        "events": set.events,
        "cq_event_waits": EVENT_WAITS.load(std::sync::atomic::Ordering::Relaxed),
        "inline_size": if set.size <= set.inline_size { set.inline_size } else { 0 },
        "gid_index": set.gid_index,
    });
    match out {
        Outcome::Lat(samples) => {
            let Some(s) = lat_stats(samples) else {
                if json {
                    println!("{common}");
                } else {
                    println!("{line}");
                }
                return;
            };
            if json {
                let mut v = common;
                v["t_min_usec"] = s.min.into();
                v["t_max_usec"] = s.max.into();
                v["t_typical_usec"] = s.typical.into();
                v["t_avg_usec"] = s.avg.into();
                v["t_stdev_usec"] = s.stdev.into();
                v["p99_usec"] = s.p99.into();
                v["p99_9_usec"] = s.p999.into();
                println!("{v}");
            } else {
                println!(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ");
                println!(
                    " {:<7}{:<10}    {:<7.2}        {:<7.2}      {:<7.2}          {:<7.2}        {:<7.2}          {:<7.2}                {:<7.2}",
                    set.size, set.iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
                );
                println!("{line}");
            }
        }
        Outcome::Bw(r) => {
            let secs = r.elapsed.as_secs_f64().max(1e-9);
            let rate = f64::from(r.messages) / secs;
            let mib = |msgs_per_s: f64| msgs_per_s * f64::from(set.size) / (1024.0 * 1024.0);
            let peak = r.peak_rate.max(rate);
            if json {
                let mut v = common;
                v["bw_peak_mib_s"] = mib(peak).into();
                v["bw_avg_mib_s"] = mib(rate).into();
                v["msg_rate_mpps"] = (rate / 1e6).into();
                v["seconds"] = secs.into();
                println!("{v}");
            } else {
                println!(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
                println!(
                    " {:<10} {:<10}       {:.2}              {:.2}  \t\t   {:.6}",
                    set.size,
                    set.iters,
                    mib(peak),
                    mib(rate),
                    rate / 1e6
                );
                println!("{line}");
            }
        }
        Outcome::None => {
            if json {
                println!("{common}");
            } else {
                println!(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
                println!(" (the client reports)");
                println!("{line}");
            }
        }
    }
}

fn close(side: Side) -> Result<(), Failure> {
    let Side {
        qp,
        send_cq,
        recv_cq,
        channel,
        mr,
        pd,
        ctx,
    } = side;
    qp.destroy().map_err(fail("Couldn't destroy QP"))?;
    send_cq.destroy().map_err(fail("Couldn't destroy CQ"))?;
    recv_cq.destroy().map_err(fail("Couldn't destroy CQ"))?;
    drop(channel);
    mr.dereg().map_err(fail("Couldn't deregister MR"))?;
    drop(pd);
    drop(ctx);
    Ok(())
}

/// `uverbs perf micro`: the userspace cost of the data path, on one QP connected to a second
/// QP of the same device. Prints one `micro <name> <ns>` line per measurement (or JSON), the
/// same lines `xtask/bench-c/micro.c` prints for libibverbs.
mod micro {
    use super::*;

    /// Work requests in the "many CQEs ready" poll measurement.
    const READY: u32 = 1024;
    /// The post measurements: WRs per round (the last one signaled), and the list length.
    const ROUND: u32 = 64;
    const LIST: usize = 32;
    /// The empty-poll measurement is split into this many blocks; the fastest one counts.
    const BLOCKS: u32 = 20;

    /// `n` polls of an empty CQ, in ns per poll. One copy per `K`, each its own function at its
    /// own code address (`K` makes their code differ, so they are not merged): under TCG a
    /// loop whose code straddles a 4 KiB page boundary cannot chain its translation blocks
    /// directly and runs 2-3x slower (measured: the same loop 14-20 ns in one build, 35-60 ns
    /// in the next, whose code had moved across a page boundary). The caller takes the best
    /// copy, so where the linker happened to put the loop does not decide the number; micro.c
    /// does the same for rdma-core.
    #[inline(never)]
    fn empty_polls<const K: u32>(cq: &mut Cq, wcs: &mut [Wc], n: u32) -> Result<f64, Failure> {
        std::hint::black_box(K);
        let t = Instant::now();
        for _ in 0..n {
            let got = cq
                .poll(&mut wcs[..1])
                .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
            if got != 0 {
                return Err(Failure("the CQ was not empty".into()));
            }
        }
        Ok(t.elapsed().as_nanos() as f64 / f64::from(n.max(1)))
    }

    pub fn run(ctx: Context, set: &Settings, json: bool) -> Result<ExitCode, Failure> {
        let mset = Settings {
            tx_depth: READY,
            rx_depth: 1,
            size: 8,
            inline_size: 0,
            ..set.clone()
        };
        let mut a = setup(ctx.clone(), &mset)?;
        let mut b = setup(ctx, &mset)?;
        let da = local_dest(&a, &mset)?;
        let db = local_dest(&b, &mset)?;
        connect_qp(&mut a, &mset, &da, &db)?;
        connect_qp(&mut b, &mset, &db, &da)?;
        let iters = set.iters.max(100);

        // 1. Poll of an empty CQ: the best of BLOCKS blocks (a block that met an interrupt or
        // a preemption does not show the cost of a poll), each block timed in every copy of
        // the loop (see `empty_polls`).
        let mut wcs = vec![Wc::default(); 16];
        let mut empty = f64::INFINITY;
        let blk = iters / BLOCKS;
        for _ in 0..BLOCKS {
            for ns in [
                empty_polls::<0>(&mut a.send_cq, &mut wcs, blk)?,
                empty_polls::<1>(&mut a.send_cq, &mut wcs, blk)?,
                empty_polls::<2>(&mut a.send_cq, &mut wcs, blk)?,
                empty_polls::<3>(&mut a.send_cq, &mut wcs, blk)?,
            ] {
                empty = empty.min(ns);
            }
        }

        let sge = [a.mr.sge(0, 8).map_err(fail("SGE"))?];
        let op = WrOp::RdmaWrite {
            remote_addr: db.addr,
            rkey: db.rkey,
        };
        let one = SendWr::new(0, op).sge(&sge);

        // 2. Poll with READY completions waiting (per CQE), best of a few rounds: through
        // `Cq::poll` (16 at a time), then through the extended poll (`start_poll`/`next_poll`,
        // reading wr_id and status of each).
        let mut list = vec![one.signaled(); LIST];
        let per_cqe = per_cqe_best(&mut a, &list, &mut wcs, false)?;
        let per_cqe_ex = per_cqe_best(&mut a, &list, &mut wcs, true)?;

        // 3./4. Post one WR per call, and lists of LIST WRs (per WR). Only the posts are timed;
        // the round's last WR is signaled and waited for outside the timing.
        let rounds = (iters / ROUND).max(4);
        let mut post_one = Duration::ZERO;
        let mut post_list = Duration::ZERO;
        let mut wc1 = [Wc::default()];
        for r in 0..rounds {
            let t = Instant::now();
            for i in 0..ROUND {
                let wr = if i + 1 == ROUND { one.signaled() } else { one };
                a.qp.post_send(&[wr]).map_err(fail("Couldn't post send"))?;
            }
            post_one += t.elapsed();
            poll_one(&mut a.send_cq, None, &mut wc1, "write")?;
            for (i, w) in list.iter_mut().enumerate() {
                *w = if i + 1 == LIST { one.signaled() } else { one };
            }
            let t = Instant::now();
            for _ in 0..ROUND as usize / LIST {
                a.qp.post_send(&list).map_err(fail("Couldn't post send"))?;
            }
            post_list += t.elapsed();
            for _ in 0..ROUND as usize / LIST {
                poll_one(&mut a.send_cq, None, &mut wc1, "write")?;
            }
            let _ = r;
        }
        let n_posted = f64::from(rounds * ROUND);
        let post1 = post_one.as_nanos() as f64 / n_posted;
        let post32 = post_list.as_nanos() as f64 / n_posted;

        let mem = memory(&a)?;
        let rows = [
            ("poll_empty_ns", empty),
            ("poll_per_cqe_ns", per_cqe),
            ("poll_ex_per_cqe_ns", per_cqe_ex),
            ("post_one_ns", post1),
            ("post_list32_per_wr_ns", post32),
            ("cq_anon_bytes", mem.cq.anon),
            ("cq_rss_bytes", mem.cq.rss),
            ("cq_vm_bytes", mem.cq.vm),
            ("qp_anon_bytes", mem.qp.anon),
            ("qp_rss_bytes", mem.qp.rss),
            ("qp_vm_bytes", mem.qp.vm),
        ];
        if json {
            let mut v = serde_json::json!({ "test": "micro", "library": "uverbs" });
            for (k, x) in rows {
                v[k] = x.into();
            }
            println!("{v}");
        } else {
            for (k, x) in rows {
                println!("micro {k} {x:.1}");
            }
        }
        close(a)?;
        close(b)?;
        Ok(ExitCode::SUCCESS)
    }

    /// Per-CQE time of draining READY completions, best of a few rounds. The kernel must have
    /// finished all of them before the timing starts: a round that meets an empty poll is
    /// discarded and the next one waits twice as long. `ex` drains through the extended poll
    /// (one `start_poll`, `next_poll` to the end, reading wr_id and status of each), otherwise
    /// through `Cq::poll` 16 at a time.
    fn per_cqe_best(
        a: &mut Side,
        list: &[SendWr<'_>],
        wcs: &mut [Wc],
        ex: bool,
    ) -> Result<f64, Failure> {
        let mut best = f64::INFINITY;
        let mut settle = Duration::from_millis(100);
        let mut clean = 0;
        for _round in 0..12 {
            if clean >= 4 {
                break;
            }
            let mut posted = 0;
            while posted < READY {
                let k = (READY - posted).min(LIST as u32) as usize;
                a.qp.post_send(&list[..k])
                    .map_err(fail("Couldn't post send"))?;
                posted += k as u32;
            }
            std::thread::sleep(settle);
            let t = Instant::now();
            let (mut got, empty_seen) = if ex {
                drain_ex(&mut a.send_cq)?
            } else {
                drain(&mut a.send_cq, wcs)?
            };
            let dt = t.elapsed();
            if !empty_seen && got == READY {
                best = best.min(dt.as_nanos() as f64 / f64::from(READY));
                clean += 1;
                continue;
            }
            settle *= 2;
            let deadline = Instant::now() + Duration::from_secs(30);
            while got < READY {
                got += a
                    .send_cq
                    .poll(wcs)
                    .map_err(|e| Failure(format!("poll CQ failed: {e}")))?
                    as u32;
                if Instant::now() > deadline {
                    return Err(Failure(format!(
                        "only {got} of {READY} completions arrived in 30 s"
                    )));
                }
            }
        }
        if clean == 0 {
            return Err(Failure(
                "the kernel never finished 1024 writes before the poll timing started".into(),
            ));
        }
        Ok(best)
    }

    /// Polls until READY completions or an empty poll: `(taken, met an empty poll)`.
    #[inline(never)]
    fn drain(cq: &mut Cq, wcs: &mut [Wc]) -> Result<(u32, bool), Failure> {
        let mut got = 0u32;
        while got < READY {
            let n = cq
                .poll(wcs)
                .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
            if n == 0 {
                return Ok((got, true));
            }
            got += n as u32;
        }
        Ok((got, false))
    }

    /// [`drain`] through the extended poll, reading wr_id and status of every completion.
    #[inline(never)]
    fn drain_ex(cq: &mut Cq) -> Result<(u32, bool), Failure> {
        let mut got = 0u32;
        let mut ids = 0u64;
        while got < READY {
            let Some(mut g) = cq
                .start_poll()
                .map_err(|e| Failure(format!("start_poll failed: {e}")))?
            else {
                return Ok((got, true));
            };
            loop {
                ids = ids.wrapping_add(g.wr_id());
                if g.status() != WcStatus::SUCCESS {
                    return Err(Failure(format!("completion error: {:?}", g.status())));
                }
                got += 1;
                // Like micro.c: no next_poll after the READY-th (see the note there).
                if got == READY
                    || !g
                        .next_poll()
                        .map_err(|e| Failure(format!("next_poll failed: {e}")))?
                {
                    break;
                }
            }
        }
        std::hint::black_box(ids);
        Ok((got, false))
    }

    /// Objects created for the memory measurement, and their queue depth (perftest's TX depth).
    const MEM_OBJECTS: usize = 128;
    const MEM_DEPTH: u32 = 128;

    /// Growth per object of the process's private anonymous memory (heap: `RssAnon`), of its
    /// resident set (`VmRSS`, which also counts the touched ring pages) and of its address space
    /// (`VmSize`: the mapped rings and doorbells), in bytes. micro.c measures the same way.
    #[derive(Default)]
    struct PerObject {
        anon: f64,
        rss: f64,
        vm: f64,
    }

    struct Memory {
        cq: PerObject,
        qp: PerObject,
    }

    /// `(RssAnon, VmRSS, VmSize)` of this process in bytes, from /proc/self/status.
    fn status() -> Result<[f64; 3], Failure> {
        let text = std::fs::read_to_string("/proc/self/status")
            .map_err(fail("Couldn't read /proc/self/status"))?;
        let mut out = [0.0; 3];
        for (i, key) in ["RssAnon:", "VmRSS:", "VmSize:"].iter().enumerate() {
            let kb = text
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .ok_or_else(|| Failure(format!("/proc/self/status has no {key} line")))?;
            out[i] = kb * 1024.0;
        }
        Ok(out)
    }

    fn per_object(before: [f64; 3], after: [f64; 3]) -> PerObject {
        let d = |i: usize| (after[i] - before[i]) / MEM_OBJECTS as f64;
        PerObject {
            anon: d(0),
            rss: d(1),
            vm: d(2),
        }
    }

    /// Creates MEM_OBJECTS CQs (MEM_DEPTH entries, each polled once, as a user would), then one
    /// RC QP on each (MEM_DEPTH send and receive WRs, one SGE), measuring the growth per object.
    fn memory(side: &Side) -> Result<Memory, Failure> {
        // Room for every object first, so the vectors do not grow inside the measurement.
        let mut cqs: Vec<Cq> = Vec::with_capacity(MEM_OBJECTS);
        let mut qps: Vec<Qp> = Vec::with_capacity(MEM_OBJECTS);
        let mut wc = [Wc::default()];
        status()?; // once first, so its own buffer is not counted as growth
        let s0 = status()?;
        for _ in 0..MEM_OBJECTS {
            let mut cq = side
                .ctx
                .create_cq(MEM_DEPTH, None, 0)
                .map_err(fail("Couldn't create CQ"))?;
            cq.poll(&mut wc)
                .map_err(|e| Failure(format!("poll CQ failed: {e}")))?;
            cqs.push(cq);
        }
        let s1 = status()?;
        let cap = QpCap {
            max_send_wr: MEM_DEPTH,
            max_recv_wr: MEM_DEPTH,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        for cq in &cqs {
            let qp = side
                .pd
                .create_qp(&QpInitAttr::new(QpType::Rc, cq, cq, cap))
                .map_err(fail("Couldn't create QP"))?;
            qps.push(qp);
        }
        let s2 = status()?;
        drop(qps);
        drop(cqs);
        Ok(Memory {
            cq: per_object(s0, s1),
            qp: per_object(s1, s2),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_lines_round_trip_and_bad_ones_are_refused() {
        let mut gid = Gid::default();
        gid.raw[10] = 0xff;
        gid.raw[11] = 0xff;
        gid.raw[12..].copy_from_slice(&[10, 99, 0, 1]);
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234,
            addr: 0x7f00_0000_1000,
            gid,
        };
        let line = d.to_line();
        assert!(line.ends_with('\n'));
        assert_eq!(Dest::from_line(line.trim_end()), Ok(d));
        assert!(Dest::from_line("0000:000011:abcdef:00").is_err());
        assert!(Dest::from_line("UVPERF1 0 11 1 1 1 00").is_err());
        assert!(
            Dest::from_line("UVPERF1 10000 11 1 1 1 00000000000000000000000000000000").is_err()
        );
    }

    #[test]
    fn latency_stats_follow_perftest() {
        // Sorted 1..5 us; perftest leaves out the two largest and takes the median of 1, 2, 3.
        let s = lat_stats(&[4000, 1000, 3000, 2000, 5000]).unwrap();
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 4.0);
        assert_eq!(s.typical, 2.0);
        assert_eq!(s.avg, 2.0);
        assert!((s.stdev - (2.0f64 / 3.0).sqrt()).abs() < 1e-9);
        assert_eq!(s.p99, 4.0);
        assert_eq!(s.p999, 4.0);
        // An even count left (1, 2, 3, 4 of 1..6): the mean of the two middle ones.
        let s = lat_stats(&[6000, 5000, 4000, 3000, 2000, 1000]).unwrap();
        assert_eq!(s.typical, 2.5);
        assert_eq!(s.max, 5.0);
        // 999 samples as in a 1000-iteration run: the median of the 997 smallest is the 499th.
        let many: Vec<u64> = (1..=999).map(|i| i * 1000).collect();
        assert_eq!(lat_stats(&many).unwrap().typical, 499.0);
        assert_eq!(lat_stats(&[7000]).unwrap().typical, 7.0);
        assert!(lat_stats(&[]).is_none());
        assert_eq!(deltas(&[0, 10, 30], 2), vec![5, 10]);
    }

    #[test]
    fn perftest_inlines_only_on_devices_it_knows() {
        // rxe reports vendor_part_id 0: perftest disables inline there.
        assert_eq!(perftest_lat_inline(Test::SendLat, 0), 0);
        assert_eq!(perftest_lat_inline(Test::WriteLat, 0), 0);
        assert_eq!(perftest_lat_inline(Test::SendLat, 0xefa0), 32);
        assert_eq!(perftest_lat_inline(Test::WriteLat, 0xefa1), 32);
        assert_eq!(perftest_lat_inline(Test::ReadLat, 0xefa0), 0);
        assert_eq!(perftest_lat_inline(Test::WriteLat, 0xefa2), 0);
    }

    #[test]
    fn peak_is_the_best_window() {
        let ms = Duration::from_millis;
        assert_eq!(peak(&[(10, ms(10)), (30, ms(20)), (35, ms(40))]), 2000.0);
        assert_eq!(peak(&[]), 0.0);
    }
}
