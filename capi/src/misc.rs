//! libibverbs' small helpers: the `*_str` names, the rate conversions, fork support and the
//! sysfs readers.

use core::ffi::{c_char, c_int, c_void, CStr};

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::util::guard;

/// A table of NUL-terminated names indexed by an enum, "unknown" outside it.
fn name(table: &[&'static CStr], i: c_int) -> *const c_char {
    usize::try_from(i)
        .ok()
        .and_then(|i| table.get(i))
        .copied()
        .filter(|s| !s.is_empty())
        .unwrap_or(c"unknown")
        .as_ptr()
}

#[no_mangle]
pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"",
        c"InfiniBand channel adapter",
        c"InfiniBand switch",
        c"InfiniBand router",
        c"iWARP NIC",
        c"usNIC",
        c"usNIC UDP",
        c"unspecified",
    ];
    name(T, node_type)
}

#[no_mangle]
pub extern "C" fn ibv_port_state_str(port_state: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"no state change (NOP)",
        c"down",
        c"init",
        c"armed",
        c"active",
        c"active defer",
    ];
    name(T, port_state)
}

#[no_mangle]
pub extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
        c"Device link speed change",
    ];
    name(T, event)
}

#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ];
    name(T, status)
}

/// `enum ibv_rate` → (multiple of 2.5 Gb/s or -1, Mb/s or -1).
const RATES: &[(c_int, c_int, c_int)] = &[
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, -1, 14062),
    (12, -1, 56250),
    (13, -1, 112500),
    (14, -1, 168750),
    (15, -1, 25781),
    (16, -1, 103125),
    (17, -1, 206250),
    (18, -1, 309375),
    (19, 11, 28125),
    (20, 20, 53125),
    (21, 160, 425000),
    (22, 240, 637500),
    (23, 320, 850000),
    (24, 480, 1275000),
];

/// `IBV_RATE_MAX`: what the inverse conversions answer for a value with no rate.
const IBV_RATE_MAX: c_int = 0;

#[no_mangle]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

#[no_mangle]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.1 == mult && mult > 0)
        .map_or(IBV_RATE_MAX, |r| r.0)
}

#[no_mangle]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

#[no_mangle]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.2 == mbps)
        .map_or(IBV_RATE_MAX, |r| r.0)
}

/// `ibv_fork_init`: uverbs registers memory the kernel keeps correct across fork() (kernels
/// since 5.13 copy pinned pages for the child; uverbs' own MR buffers are
/// `MADV_DONTFORK`), so there is nothing to set up; 0, as rdma-core answers on such a kernel.
#[no_mangle]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `enum ibv_fork_status`: `IBV_FORK_UNNEEDED` (2), the kernel handles fork itself.
#[no_mangle]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}

/// `ibv_dontfork_range`: marks the range `MADV_DONTFORK` (0 or errno).
#[no_mangle]
pub unsafe extern "C" fn ibv_dontfork_range(base: *mut c_void, size: usize) -> c_int {
    guard("ibv_dontfork_range", libc::EIO, || {
        madvise(base, size, libc::MADV_DONTFORK)
    })
}

/// `ibv_dofork_range`: undoes [`ibv_dontfork_range`].
#[no_mangle]
pub unsafe extern "C" fn ibv_dofork_range(base: *mut c_void, size: usize) -> c_int {
    guard("ibv_dofork_range", libc::EIO, || {
        madvise(base, size, libc::MADV_DOFORK)
    })
}

fn madvise(base: *mut c_void, size: usize, advice: c_int) -> c_int {
    if size == 0 {
        return 0;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let start = (base as usize) & !(page - 1);
    let end = (base as usize).saturating_add(size).next_multiple_of(page);
    // SAFETY: madvise only changes the fork behaviour of the caller's own pages; the kernel
    // checks the range (ENOMEM for unmapped parts).
    let r = unsafe { libc::madvise(start as *mut c_void, end - start, advice) };
    if r == 0 {
        0
    } else {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    }
}

/// `ibv_get_sysfs_path`: "/sys" (rdma-core honours `SYSFS_PATH`, without trailing slashes).
#[no_mangle]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    use std::sync::OnceLock;
    static PATH: OnceLock<std::ffi::CString> = OnceLock::new();
    PATH.get_or_init(|| {
        let p = std::env::var("SYSFS_PATH").unwrap_or_else(|_| "/sys".into());
        let p = p.trim_end_matches('/');
        std::ffi::CString::new(if p.is_empty() { "/sys" } else { p }).unwrap_or_default()
    })
    .as_ptr()
}

/// `ibv_read_sysfs_file(dir, file, buf, size)`: reads `dir/file` into `buf` (NUL-terminated,
/// a trailing newline removed) and returns the length, or -1.
#[no_mangle]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    guard("ibv_read_sysfs_file", -1, || {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            return -1;
        }
        // SAFETY: the caller passes NUL-terminated strings.
        let (d, f) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        let path = std::path::Path::new(OsStr::from_bytes(d.to_bytes()))
            .join(OsStr::from_bytes(f.to_bytes()));
        let Ok(mut data) = std::fs::read(&path) else {
            return -1;
        };
        data.truncate(size - 1);
        if data.last() == Some(&b'\n') {
            data.pop();
        }
        // SAFETY: buf has `size` bytes; we write data.len() + 1 <= size.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), buf as *mut u8, data.len());
            *buf.add(data.len()) = 0;
        }
        data.len() as c_int
    })
}

/// `ibv_register_driver` (IBVERBS_1.1): providers registered themselves with it; uverbs has
/// its providers built in, so it accepts and ignores the call.
#[no_mangle]
pub extern "C" fn ibv_register_driver(_name: *const c_char, _init: *mut c_void) {}
