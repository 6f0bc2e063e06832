//! `uverbs devices`: the device list, byte for byte as rdma-core's `ibv_devices` prints it.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::Failure;

/// Options of `uverbs devices` (none yet).
#[derive(Debug, clap::Args)]
pub struct Args {}

/// The table `ibv_devices` prints: a header and one line per device, name padded to 16.
pub fn render(devs: &[uverbs::Device]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "    {:<16}\t   node GUID", "device");
    let _ = writeln!(s, "    {:<16}\t----------------", "------");
    for d in devs {
        let _ = writeln!(
            s,
            "    {:<16}\t{}",
            d.name(),
            uverbs::format_guid(d.node_guid())
        );
    }
    s
}

pub fn run(_args: Args) -> Result<ExitCode, Failure> {
    let devs = uverbs::devices()?;
    print!("{}", render(&devs));
    Ok(ExitCode::SUCCESS)
}
