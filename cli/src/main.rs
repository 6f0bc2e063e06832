//! `uverbs`: command-line tools over the uverbs library, the counterparts of rdma-core's
//! `ibv_devices`, `ibv_devinfo`, ... built as one static binary with no libibverbs.
//!
//! One module per subcommand; add a subcommand by adding a variant to [`Command`] and a module
//! with an `Args` struct and a `run(Args) -> Result<ExitCode, Failure>` function.
#![deny(unsafe_code)]
#![recursion_limit = "256"]

mod cause;
mod devices;
mod exchange;
mod info;
mod perf;
mod pingpong;
mod pingpong_srd;
mod removal;
mod rping;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// RDMA verbs tools in pure Rust (soft-RoCE and EFA), without libibverbs.
#[derive(Debug, Parser)]
#[command(name = "uverbs", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List RDMA devices and their node GUIDs (as `ibv_devices`).
    Devices(devices::Args),
    /// Show device and port attributes (as `ibv_devinfo`).
    Info(info::Args),
    /// Ping-pong SENDs with a peer over RC, UC, UD or SRQ (as `ibv_{rc,uc,ud,srq}_pingpong`),
    /// or SRD on EFA.
    Pingpong(pingpong::Args),
    /// Latency and bandwidth tests (as perftest's `ib_{send,write,read}_{lat,bw}`), and `micro`.
    Perf(perf::Args),
    /// RDMA ping over rdma_cm (as librdmacm's `rping`, wire-compatible with it).
    Rping(rping::Args),
}

/// A failure a subcommand reports: printed as `uverbs: error: ...`, exit status 1.
#[derive(Debug)]
pub struct Failure(pub String);

impl From<uverbs::Error> for Failure {
    fn from(e: uverbs::Error) -> Self {
        Failure(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Devices(a) => devices::run(a),
        Command::Info(a) => info::run(a),
        Command::Pingpong(a) => pingpong::run(a),
        Command::Perf(a) => perf::run(a),
        Command::Rping(a) => rping::run(a),
    };
    match r {
        Ok(code) => code,
        Err(Failure(msg)) => {
            eprintln!("uverbs: error: {msg}");
            ExitCode::FAILURE
        }
    }
}
