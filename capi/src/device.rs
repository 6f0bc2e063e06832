//! Devices and contexts: `ibv_get_device_list`, `ibv_open_device`, the queries, async events,
//! and the small helpers of libibverbs (strings, rates, fork, sysfs).

use core::ffi::{c_char, c_int};
use core::ptr;
use std::sync::Mutex;

use std::os::fd::AsRawFd;

use uverbs::NodeType;

use crate::abi::*;
use crate::util::{guard, ptr_or_errno, set_errno, MUTEX_INIT};

/// A device as C sees it (`struct ibv_device`) and the uverbs device behind it.
#[repr(C)]
pub struct Device {
    pub ibv: ibv_device,
    pub dev: uverbs::Device,
}

/// An open context: rdma-core's `struct verbs_context` (which ends with the `ibv_context`
/// programs hold), then the uverbs context.
#[repr(C)]
pub struct Context {
    pub vctx: verbs_context,
    pub ctx: uverbs::Context,
    pub device: *mut Device,
}

impl Context {
    /// The `ibv_context` the program holds.
    pub fn ibv(&self) -> *mut ibv_context {
        ptr::addr_of!(self.vctx.context) as *mut ibv_context
    }
}

/// The [`Context`] of an `ibv_context` this library returned (None for NULL).
///
/// # Safety
/// `p` is NULL or an `ibv_context` from [`ibv_open_device`] that is not yet closed.
pub unsafe fn context<'a>(p: *mut ibv_context) -> Option<&'a Context> {
    if p.is_null() {
        return None;
    }
    let off = core::mem::offset_of!(Context, vctx) + core::mem::offset_of!(verbs_context, context);
    // SAFETY: the caller passes an ibv_context inside a live Context (see above), at `off`.
    Some(unsafe { &*((p as *mut u8).sub(off) as *const Context) })
}

/// Every device ever listed, by name: devices live as long as the process, as a context
/// keeps pointing at its device after `ibv_free_device_list` (rdma-core refcounts them; a
/// device list is small and listed rarely).
static DEVICES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn copy_str(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    dst[n] = 0;
}

/// `enum ibv_node_type` of a node type.
pub fn node_type_raw(t: NodeType) -> c_int {
    match t {
        NodeType::Ca => 1,
        NodeType::Switch => 2,
        NodeType::Router => 3,
        NodeType::Rnic => 4,
        NodeType::Usnic => 5,
        NodeType::UsnicUdp => 6,
        NodeType::Unspecified => 7,
        NodeType::Unknown(_) => -1,
    }
}

fn device_entry(dev: uverbs::Device) -> *mut Device {
    let mut all = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    for &p in all.iter() {
        // SAFETY: every entry is a leaked, never freed Device.
        let d = unsafe { &*(p as *const Device) };
        if d.dev.name() == dev.name() && d.dev.uverbs_name() == dev.uverbs_name() {
            return p as *mut Device;
        }
    }
    let mut ibv = ibv_device {
        _ops: _ibv_device_ops {
            _dummy1: None,
            _dummy2: None,
        },
        node_type: node_type_raw(dev.node_type()),
        transport_type: match dev.node_type() {
            // IBV_TRANSPORT_IB (RoCE too), iWARP, usNIC, usNIC UDP, unspecified (EFA).
            NodeType::Ca | NodeType::Switch | NodeType::Router => 0,
            NodeType::Rnic => 1,
            NodeType::Usnic => 2,
            NodeType::UsnicUdp => 3,
            NodeType::Unspecified => 4,
            NodeType::Unknown(_) => -1,
        },
        name: [0; IBV_SYSFS_NAME_MAX],
        dev_name: [0; IBV_SYSFS_NAME_MAX],
        dev_path: [0; IBV_SYSFS_PATH_MAX],
        ibdev_path: [0; IBV_SYSFS_PATH_MAX],
    };
    copy_str(&mut ibv.name, dev.name());
    copy_str(&mut ibv.dev_name, dev.uverbs_name());
    copy_str(&mut ibv.dev_path, &dev.dev_path().to_string_lossy());
    copy_str(&mut ibv.ibdev_path, &dev.ibdev_path().to_string_lossy());
    let p = Box::into_raw(Box::new(Device { ibv, dev }));
    all.push(p as usize);
    p
}

/// The devices a program may open: uverbs' supported devices (rxe, EFA), plus the EFA model's
/// when built with the `efa-model` feature and `UVERBS_EFA_MODEL` is set; only the stand-in
/// device when built with the `standin` feature (measuring equipment) and
/// `UVERBS_CAPI_STANDIN` is set.
fn list() -> uverbs::Result<Vec<uverbs::Device>> {
    #[cfg(feature = "standin")]
    if let Some(only) = crate::standin::devices() {
        return Ok(only);
    }
    let mut v: Vec<uverbs::Device> = uverbs::devices()?
        .into_iter()
        .filter(|d| d.is_supported())
        .collect();
    v.extend(crate::efa::model_devices());
    Ok(v)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    guard("ibv_get_device_list", ptr::null_mut(), || {
        let devs = match list() {
            Ok(d) => d,
            Err(e) => {
                // rdma-core answers a machine without RDMA with an empty list, not an error.
                if e.is(uverbs::Errno::NOENT) {
                    Vec::new()
                } else {
                    return ptr_or_errno(Err(e));
                }
            }
        };
        let mut out: Vec<*mut ibv_device> = devs
            .into_iter()
            .map(|d| device_entry(d) as *mut ibv_device)
            .collect();
        if !num_devices.is_null() {
            // SAFETY: the caller passes NULL or a valid int to fill.
            unsafe { *num_devices = out.len() as c_int };
        }
        out.push(ptr::null_mut());
        let b = out.into_boxed_slice();
        Box::into_raw(b) as *mut *mut ibv_device
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    guard("ibv_free_device_list", (), || {
        if list.is_null() {
            return;
        }
        let mut n = 0;
        // SAFETY: `list` came from ibv_get_device_list: NULL-terminated, boxed slice of n+1.
        unsafe {
            while !(*list.add(n)).is_null() {
                n += 1;
            }
            drop(Box::from_raw(ptr::slice_from_raw_parts_mut(list, n + 1)));
        }
    })
}

/// The [`Device`] of an `ibv_device` from our list.
///
/// # Safety
/// `p` is NULL or a device from [`ibv_get_device_list`] (they are never freed).
pub unsafe fn device<'a>(p: *mut ibv_device) -> Option<&'a Device> {
    // SAFETY: see above; ibv is the first field of the repr(C) Device.
    unsafe { (p as *const Device).as_ref() }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    guard("ibv_get_device_name", ptr::null(), || {
        // SAFETY: the program passes a device of our list (or NULL).
        match unsafe { device(dev) } {
            Some(d) => d.ibv.name.as_ptr(),
            None => {
                set_errno(libc::EINVAL);
                ptr::null()
            }
        }
    })
}

/// The node GUID in network byte order (`__be64`), as the man page says.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    guard("ibv_get_device_guid", 0, || {
        // SAFETY: the program passes a device of our list (or NULL).
        let d = unsafe { device(dev) };
        d.map_or(0, |d| d.dev.node_guid().to_be())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    guard("ibv_get_device_index", -1, || {
        // SAFETY: the program passes a device of our list (or NULL).
        match unsafe { device(dev) } {
            Some(d) => std::fs::read_to_string(d.dev.ibdev_path().join("ibdev_index"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(-1),
            None => -1,
        }
    })
}

fn new_context(d: *mut Device, ctx: uverbs::Context) -> *mut ibv_context {
    // SAFETY: all-zero is a valid verbs_context: NULL function pointers, NULL pointers, 0.
    let mut vctx: verbs_context = unsafe { core::mem::zeroed() };
    vctx.sz = core::mem::size_of::<verbs_context>();
    vctx.context.device = d as *mut ibv_device;
    // The uverbs fd (pyverbs dup()s it for ibv_import_device); -1 for a device model.
    vctx.context.cmd_fd = ctx.command_fd().map_or(-1, |fd| fd.as_raw_fd());
    vctx.context.async_fd = ctx.async_fd().as_raw_fd();
    vctx.context.num_comp_vectors = ctx.num_comp_vectors() as c_int;
    vctx.context.mutex = MUTEX_INIT;
    vctx.context.abi_compat = VERBS_ABI_IS_EXTENDED;
    crate::ops::fill(
        &mut vctx,
        matches!(ctx.provider(), uverbs::ProviderInfo::Rxe),
    );
    let c = Box::into_raw(Box::new(Context {
        vctx,
        ctx,
        device: d,
    }));
    // SAFETY: c is a fresh, valid box.
    unsafe { (*c).ibv() }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    guard("ibv_open_device", ptr::null_mut(), || {
        // SAFETY: the program passes a device of our list (or NULL).
        let Some(d) = (unsafe { device(dev) }) else {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        };
        #[cfg(feature = "standin")]
        if let Some(ctx) = crate::standin::open(&d.dev) {
            return ptr_or_errno(ctx.map(|ctx| new_context(dev as *mut Device, ctx)));
        }
        let ctx = crate::efa::open_model(&d.dev).unwrap_or_else(|| uverbs::Context::open(&d.dev));
        ptr_or_errno(ctx.map(|ctx| new_context(dev as *mut Device, ctx)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    guard("ibv_close_device", libc::EIO, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { self::context(context) }) else {
            return libc::EINVAL;
        };
        // SAFETY: the Context was boxed by new_context; the program gives up the pointer.
        drop(unsafe { Box::from_raw(c as *const Context as *mut Context) });
        0
    })
}

/// Wraps a context uverbs opened some other way (the EFA model, a stand-in kernel in tests)
/// as the `ibv_context` of `dev`, listed like any other device.
#[doc(hidden)]
pub fn wrap_context(dev: uverbs::Device, ctx: uverbs::Context) -> *mut ibv_context {
    let d = device_entry(dev);
    new_context(d, ctx)
}
