//! What `uverbs perf` is asked to do: the test kinds, the command line (perftest's names and
//! letters), and the settings of one run resolved from both and from the device (our defaults
//! or perftest's, `--perftest-defaults`).

use uverbs::{Context, GidQuery, Mtu};

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
    pub(super) fn name(self) -> &'static str {
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

    pub(super) fn is_lat(self) -> bool {
        matches!(self, Test::SendLat | Test::WriteLat | Test::ReadLat)
    }

    pub(super) fn is_send(self) -> bool {
        matches!(self, Test::SendLat | Test::SendBw)
    }

    pub(super) fn title(self) -> &'static str {
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
    pub(super) test: Test,
    /// Use IB device DEV (default: the first device found).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub(super) ib_dev: Option<String>,
    /// Use port PORT of the IB device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..))]
    pub(super) ib_port: u8,
    /// Listen on/connect to TCP port PORT.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub(super) port: u16,
    /// Message size in bytes (default: 2 for latency, 65536 for bandwidth tests).
    #[arg(short = 's', long = "size")]
    pub(super) size: Option<u32>,
    /// Iterations (default: 1000 for latency, 5000 for bandwidth tests; micro: 10000).
    #[arg(short = 'n', long = "iters")]
    pub(super) iters: Option<u32>,
    /// Send queue depth (default: 1 for latency tests; 128 with --perftest-defaults, else 256).
    #[arg(short = 't', long = "tx-depth")]
    pub(super) tx_depth: Option<u32>,
    /// Receive queue depth for SEND tests (default 512).
    #[arg(short = 'r', long = "rx-depth")]
    pub(super) rx_depth: Option<u32>,
    /// Ask for a completion every N work requests (default: 100 with --perftest-defaults, else 64).
    #[arg(short = 'Q', long = "cq-mod")]
    pub(super) cq_mod: Option<u32>,
    /// Post lists of N work requests with one doorbell (default: 1 with --perftest-defaults, else 32).
    #[arg(short = 'l', long = "post-list")]
    pub(super) post_list: Option<u32>,
    /// Local GID index (default: the port's RoCE v2 IPv4 GID on Ethernet, else 0; perftest: 0).
    #[arg(short = 'x', long = "gid-index")]
    pub(super) gid_index: Option<u32>,
    /// Inline size limit (default: 236 for send-lat, 220 for write-lat, 64 for send-bw and
    /// write-bw of up to 64 B, 0 otherwise; with --perftest-defaults perftest's, 0 on rxe).
    #[arg(short = 'I', long = "inline-size")]
    pub(super) inline_size: Option<u32>,
    /// Outstanding RDMA reads (default: the device's max_qp_init_rd_atom).
    #[arg(short = 'o', long = "outs")]
    pub(super) outs: Option<u32>,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (default: the port's active MTU).
    #[arg(short = 'm', long = "mtu")]
    pub(super) mtu: Option<u32>,
    /// Use exactly perftest 4.5's default settings for everything not given.
    #[arg(long = "perftest-defaults")]
    pub(super) perftest_defaults: bool,
    /// Sleep on completion events instead of busy-polling (perftest's `-e`): when a poll
    /// finds nothing, arm the CQ, poll once more, then wait on the completion channel.
    /// Default: on for the bandwidth tests on a software device (rxe), where the kernel does
    /// the device's work on the CPUs a busy poll would take; off otherwise.
    #[arg(short = 'e', long = "events", conflicts_with = "busy_poll")]
    pub(super) events: bool,
    /// Always busy-poll (perftest's default), also where `-e` is our default.
    #[arg(long = "busy-poll")]
    pub(super) busy_poll: bool,
    /// Give up after this many seconds with no completion and no word from the peer (it is
    /// gone or the link is down); 0 waits for ever. The control connection is watched with TCP
    /// keepalives over the same time.
    #[arg(long = "peer-timeout", value_name = "SECS",
          default_value_t = crate::cause::PEER_TIMEOUT_SECS)]
    pub(super) peer_timeout: u64,
    /// Print the result as one JSON object instead of the table.
    #[arg(long = "json")]
    pub(super) json: bool,
    /// Connect to the server at this host (default: be the server).
    pub(super) servername: Option<String>,
}

/// The resolved settings of one run.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub(super) test: Test,
    pub(super) size: u32,
    pub(super) iters: u32,
    pub(super) tx_depth: u32,
    pub(super) rx_depth: u32,
    pub(super) cq_mod: u32,
    pub(super) post_list: u32,
    pub(super) inline_size: u32,
    pub(super) outs: u32,
    pub(super) ib_port: u8,
    pub(super) gid_index: u32,
    pub(super) mtu: Mtu,
    pub(super) events: bool,
}

pub(super) fn mtu_from_bytes(v: u32) -> Option<Mtu> {
    Some(match v {
        256 => Mtu::Mtu256,
        512 => Mtu::Mtu512,
        1024 => Mtu::Mtu1024,
        2048 => Mtu::Mtu2048,
        4096 => Mtu::Mtu4096,
        _ => return None,
    })
}

/// perftest turns CQ moderation off (a completion per WR) for messages larger than this, unless
/// `-Q` is given.
pub(super) const PERFTEST_CQ_MOD_SIZE_LIMIT: u32 = 8192;

pub(super) fn resolve(args: &Args, ctx: &Context) -> Result<Settings, Failure> {
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
pub(super) fn perftest_lat_inline(test: Test, vendor_part_id: u32) -> u32 {
    const PERFTEST_EFA_PART_IDS: [u32; 2] = [0xefa0, 0xefa1];
    match test {
        Test::SendLat | Test::WriteLat if PERFTEST_EFA_PART_IDS.contains(&vendor_part_id) => 32,
        _ => 0,
    }
}

/// The port's RoCE v2 IPv4 GID as `find_gid` picks it, else index 0 (EFA, where `find_gid`
/// answers index 0, and a RoCE port without an IPv4 address).
pub(super) fn default_gid(ctx: &Context, port: u8) -> u32 {
    ctx.find_gid(port, &GidQuery::Ipv4)
        .map_or(0, |e| e.gid_index)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
