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
//!
//! One module per concern: [`options`] (the command line and the resolved settings),
//! [`side`] (the objects of one side, its address, connecting the QP), [`poll`] (what the loops
//! share), [`lat`] and [`bw`] (the measured loops), [`cycles`] (the latency loops' time
//! stamps), [`report`] (statistics and output) and [`micro`]; the TCP exchange is the CLI's [`crate::exchange`].

mod bw;
mod cycles;
mod lat;
mod micro;
mod options;
mod poll;
mod report;
mod side;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use uverbs::{Context, RecvWr};

use crate::{exchange, Failure};

use bw::run_bw;
use lat::{run_read_lat, run_send_lat, run_write_lat};
pub use options::Args;
use options::{resolve, Test};
use report::{print_banner, print_dest, report, Outcome};
use side::{close, connect_qp, local_dest, setup, Dest};

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
    let watch = ctx.clone();
    let r = run_on(ctx, &args);
    // Everything `run_on` made is dropped by now; `watch` only keeps the context open until
    // this returns.
    crate::removal::explain(r, &watch)
}

/// The run proper, on an open context; every object it makes is dropped when it returns.
fn run_on(ctx: Context, args: &Args) -> Result<ExitCode, Failure> {
    let set = resolve(args, &ctx)?;
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
    let sock = match &args.servername {
        // The server may still be setting up: retry a refused connection for a while.
        Some(host) => exchange::connect(host, args.port, Duration::from_secs(30)),
        None => exchange::accept(args.port),
    };
    let mut sock = sock.map_err(Failure)?;
    let _ = sock.set_nodelay(true);
    if args.peer_timeout > 0 {
        exchange::keepalive(&sock, args.peer_timeout).map_err(Failure)?;
    }
    side.idle = crate::cause::Idle::new(args.peer_timeout);
    sock.write_all(my.to_line().as_bytes())
        .map_err(fail("Couldn't send the local address"))?;
    let rem = Dest::from_line(
        &exchange::read_line(&mut sock).map_err(fail("Couldn't read the remote address"))?,
    )
    .map_err(Failure)?;
    if !args.json {
        print_dest("local", &my);
        print_dest("remote", &rem);
        println!("---------------------------------------------------------------------------------------");
    }
    connect_qp(&mut side, &set, &my, &rem)?;
    exchange::barrier(&mut sock).map_err(Failure)?;

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
    // The client tells the server it is done; the server waits for it (or for the removal
    // of its device: a server of an RDMA test does nothing else meanwhile).
    crate::removal::barrier(&mut sock, &side.ctx)?;
    report(&set, client, &result, args.json);
    close(side)?;
    Ok(ExitCode::SUCCESS)
}
