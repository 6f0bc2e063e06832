//! sysfs parsing: device discovery (`devices_in` over a fake `/sys` whose `ibdev`,
//! `abi_version`, `node_guid` and `node_type` files hold the input), the GID table read from
//! sysfs on kernels without the GID-table ioctl (`gids/N`, `gid_attrs/types/N`,
//! `gid_attrs/ndevs/N`), and P_Keys (`pkeys/N`).
//!
//! Property: values or typed errors naming the file and what it held, never a panic; a GUID
//! read from `node_guid` prints back (`format_guid_colon`) as the same 64-bit value.
#![no_main]

use std::fs;
use std::os::fd::IntoRawFd;

use libfuzzer_sys::fuzz_target;
use uverbs::channel::{Channel, IoctlCmd, WriteCmd};
use uverbs::{devices_in, format_guid_colon, Context, Driver, Errno};
use uverbs_fuzz::{checked, event_fd_with, Input};
use uverbs_uapi::ioctl::RDMA_DRIVER_RXE;
use uverbs_uapi::write::{
    IbUverbsQueryDeviceResp, IbUverbsQueryPortResp, IB_USER_VERBS_CMD_GET_CONTEXT,
    IB_USER_VERBS_CMD_QUERY_DEVICE, IB_USER_VERBS_CMD_QUERY_PORT,
};
use zerocopy::IntoBytes;

/// A kernel without the GID-table and query-GID ioctls (as Linux before 5.15 is), so the GID
/// table comes from sysfs; one port with `gid_tbl_len` entries.
#[derive(Debug)]
struct OldKernel {
    gid_tbl_len: u32,
    link_layer: u8,
}

// SAFETY: the only fd number written is GET_CONTEXT's `async_fd`, a pipe made by `event_fd_with`
// in that call and given up (`into_raw_fd`) as its number is written. No doorbell fd.
unsafe impl Channel for OldKernel {
    fn ioctl(&self, _cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        Err(Errno::OPNOTSUPP)
    }
    fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
        match cmd.command() {
            IB_USER_VERBS_CMD_GET_CONTEXT => {
                let fd = event_fd_with(&[]).into_raw_fd() as u32;
                cmd.response_mut()[..4].copy_from_slice(&fd.to_ne_bytes());
            }
            IB_USER_VERBS_CMD_QUERY_DEVICE => {
                let r = IbUverbsQueryDeviceResp {
                    phys_port_cnt: 1,
                    ..Default::default()
                };
                let n = cmd.response_mut().len().min(r.as_bytes().len());
                cmd.response_mut()[..n].copy_from_slice(&r.as_bytes()[..n]);
            }
            IB_USER_VERBS_CMD_QUERY_PORT => {
                let r = IbUverbsQueryPortResp {
                    gid_tbl_len: self.gid_tbl_len,
                    link_layer: self.link_layer,
                    state: 4,
                    ..Default::default()
                };
                let n = cmd.response_mut().len().min(r.as_bytes().len());
                cmd.response_mut()[..n].copy_from_slice(&r.as_bytes()[..n]);
            }
            _ => return Err(Errno::INVAL),
        }
        Ok(())
    }
    fn driver_id(&self) -> u32 {
        RDMA_DRIVER_RXE
    }
}

/// A short string from the input (sysfs files are a line or so).
fn text<'a>(inp: &mut Input<'a>) -> &'a [u8] {
    let n = inp.below(48) as usize;
    inp.take(n)
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);

    // A fake sysfs tree holding the input.
    // On tmpfs when there is one: a tree per input is many small files.
    let t = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir());
    let Ok(t) = t else { return };
    let sys = t.path().join("sys");
    let verbs = sys.join("class/infiniband_verbs/uverbs0");
    let ib = sys.join("class/infiniband/rxe0");
    let port = ib.join("ports/1");
    for d in [
        &verbs,
        &port.join("gids"),
        &port.join("gid_attrs/types"),
        &port.join("gid_attrs/ndevs"),
        &port.join("pkeys"),
    ] {
        if fs::create_dir_all(d).is_err() {
            return;
        }
    }
    // `ibdev` is mostly the real name (so the rest of the tree is found), sometimes anything.
    let ibdev: Vec<u8> = if inp.u8() % 4 == 0 {
        text(&mut inp).to_vec()
    } else {
        b"rxe0\n".to_vec()
    };
    let _ = fs::write(verbs.join("ibdev"), &ibdev);
    let _ = fs::write(verbs.join("abi_version"), text(&mut inp));
    let guid_text = text(&mut inp).to_vec();
    let _ = fs::write(ib.join("node_guid"), &guid_text);
    let _ = fs::write(ib.join("node_type"), text(&mut inp));
    let n = inp.below(6);
    for i in 0..n {
        let _ = fs::write(port.join(format!("gids/{i}")), text(&mut inp));
        if inp.bool() {
            let _ = fs::write(port.join(format!("gid_attrs/types/{i}")), text(&mut inp));
        }
        if inp.bool() {
            let _ = fs::write(port.join(format!("gid_attrs/ndevs/{i}")), text(&mut inp));
        }
        let _ = fs::write(port.join(format!("pkeys/{i}")), text(&mut inp));
    }

    let devs = match devices_in(&sys, &t.path().join("dev")) {
        Ok(d) => d,
        Err(e) => {
            uverbs_fuzz::check_error(&e);
            return;
        }
    };
    for d in devs {
        let _ = (
            d.node_type().as_str(),
            uverbs::format_guid(d.node_guid()),
            d.abi_version(),
        );
        if d.node_guid() != 0 {
            // Accepted: four groups of 1..=4 hex digits; printed back they parse the same.
            let printed = format_guid_colon(d.node_guid());
            let parse = |s: &str| -> Option<u64> {
                let v: Vec<_> = s.trim().split(':').collect();
                (v.len() == 4).then_some(())?;
                v.iter().try_fold(0u64, |acc, p| {
                    Some((acc << 16) | u64::from(u16::from_str_radix(p, 16).ok()?))
                })
            };
            assert_eq!(
                parse(&printed),
                Some(d.node_guid()),
                "{guid_text:?} -> {printed}"
            );
        }
        if *d.driver() != Driver::Rxe {
            continue;
        }
        let ch = OldKernel {
            gid_tbl_len: n + inp.below(3),
            link_layer: inp.u8() % 3,
        };
        let Some(ctx) = checked(Context::with_channel(d, Box::new(ch))) else {
            continue;
        };
        if let Some(table) = checked(ctx.query_gid_table()) {
            for e in table {
                assert!(!e.gid.is_zero(), "empty GID slots are left out");
                let _ = (e.gid.to_ipv6_string(), e.gid_type.as_str());
            }
        }
        for i in 0..n + 1 {
            let _ = checked(ctx.query_gid_ex(1, i));
            let _ = checked(ctx.query_pkey(1, i as u16));
        }
    }
});
