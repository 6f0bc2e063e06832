//! P_Keys: `ibv_query_pkey`, read from sysfs `ports/N/pkeys/I` (rdma-core has no kernel
//! command for them either).

use std::fs;
use std::path::Path;

use crate::context::Context;
use crate::error::{Errno, Error, Result};

impl Context {
    /// Reads one P_Key (`ibv_query_pkey`) from sysfs `ports/N/pkeys/I`, as libibverbs does.
    /// Returned in host order (the C call returns it big-endian).
    #[doc(alias = "ibv_query_pkey")]
    pub fn query_pkey(&self, port_num: u8, index: u16) -> Result<u16> {
        let op = "query_pkey";
        let object = || format!("pkey {index} of port {port_num} of {}", self.label());
        if port_num == 0 {
            return Err(self.port_range_error(op, 0));
        }
        let dir = self.device().ibdev_path();
        if dir.as_os_str().is_empty() {
            // A synthetic device (a device model behind the channel seam) has no sysfs
            // directory; joining onto an empty path would read relative to the working
            // directory.
            return Err(Error::invalid(
                op,
                object(),
                Errno::OPNOTSUPP,
                "P_Keys are read from sysfs and this device has no sysfs directory (a synthetic device)",
            ));
        }
        let path = dir.join(format!("ports/{port_num}/pkeys/{index}"));
        read_pkey(&path).map_err(|(errno, why)| {
            let e = Error::invalid(op, object(), errno, why);
            if errno == Errno::NOENT || errno == Errno::INVAL {
                self.explain_port_error(e.clone(), u32::from(port_num))
                    .with_reason(format!("{} ({})", e.reason(), path.display()))
            } else {
                e
            }
        })
    }
}

/// Reads a sysfs P_Key file (`0xffff`).
pub(super) fn read_pkey(path: &Path) -> std::result::Result<u16, (Errno, String)> {
    let text = fs::read_to_string(path).map_err(|e| {
        let errno = e
            .raw_os_error()
            .map(Errno::from_raw_os_error)
            .unwrap_or(Errno::IO);
        (errno, format!("cannot read {}", path.display()))
    })?;
    let t = text.trim();
    let hex = t.strip_prefix("0x").unwrap_or(t);
    u16::from_str_radix(hex, 16).map_err(|_| {
        (
            Errno::INVAL,
            format!("{} holds no P_Key: {t:?}", path.display()),
        )
    })
}
