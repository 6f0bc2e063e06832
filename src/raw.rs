//! The raw API: kernel commands by handle, outside the ownership model.
//!
//! The safe API makes it impossible to destroy a parent before its children or to send a
//! malformed command. Tests of what the kernel rejects, and programs that manage handles
//! themselves, need to do exactly that; this module lets them, and reports what the kernel
//! says clearly. Nothing here is `unsafe`: the kernel validates every handle. But an object
//! destroyed here is gone for the safe wrapper that still holds its handle, whose own destroy
//! will then fail (and be reported, see [`crate::drop_error_count`]).
//!
//! ```no_run
//! # fn main() -> uverbs::Result<()> {
//! let ctx = uverbs::Context::open(&uverbs::device_by_name("rxe0")?)?;
//! let pd = ctx.alloc_pd()?;
//! let mr = pd.reg_mr(4096, uverbs::AccessFlags::LOCAL_WRITE)?;
//! // The kernel refuses to free a PD that still has an MR: EBUSY, named as such.
//! let e = uverbs::raw::dealloc_pd(&ctx, pd.handle()).unwrap_err();
//! assert!(e.is(uverbs::Errno::BUSY), "{e}");
//! # drop(mr); Ok(()) }
//! ```

use uverbs_uapi::write::{
    IbUverbsDeallocPd, IbUverbsDeregMr, IB_USER_VERBS_CMD_DEALLOC_PD, IB_USER_VERBS_CMD_DEREG_MR,
};

use crate::channel::{IoctlCmd, WriteCmd};
use crate::context::{legacy_cmd, Context};
use crate::error::{Errno, Error, Result};

/// Why the kernel refuses to destroy a parent object (`EBUSY`).
const CHILDREN_ALIVE: &str =
    "the kernel refuses to destroy an object while objects made from it still exist";

/// Deallocates a PD by handle (`IB_USER_VERBS_CMD_DEALLOC_PD`).
#[doc(alias = "ibv_dealloc_pd")]
pub fn dealloc_pd(ctx: &Context, pd_handle: u32) -> Result<()> {
    let mut cmd = legacy_cmd(
        IB_USER_VERBS_CMD_DEALLOC_PD,
        &IbUverbsDeallocPd { pd_handle },
        &[],
        0,
        0,
    );
    let label = format!("pd {pd_handle} on {}", ctx.label());
    ctx.write_cmd("dealloc_pd", &|| label.clone(), &mut cmd)
        .map_err(|e| explain_destroy(e, "it still has MRs, QPs, SRQs, AHs or MWs"))
}

/// Deregisters an MR by handle (`IB_USER_VERBS_CMD_DEREG_MR`).
#[doc(alias = "ibv_dereg_mr")]
pub fn dereg_mr(ctx: &Context, mr_handle: u32) -> Result<()> {
    let mut cmd = legacy_cmd(
        IB_USER_VERBS_CMD_DEREG_MR,
        &IbUverbsDeregMr { mr_handle },
        &[],
        0,
        0,
    );
    let label = format!("mr {mr_handle} on {}", ctx.label());
    ctx.write_cmd("dereg_mr", &|| label.clone(), &mut cmd)
        .map_err(|e| explain_destroy(e, "memory windows are still bound to it"))
}

/// Destroys a CQ by handle (`UVERBS_METHOD_CQ_DESTROY`).
#[doc(alias = "ibv_destroy_cq")]
pub fn destroy_cq(ctx: &Context, cq_handle: u32) -> Result<()> {
    use uverbs_uapi::cmds::{
        UVERBS_ATTR_DESTROY_CQ_HANDLE, UVERBS_ATTR_DESTROY_CQ_RESP, UVERBS_METHOD_CQ_DESTROY,
        UVERBS_OBJECT_CQ,
    };
    let mut resp = uverbs_uapi::write::IbUverbsDestroyCqResp::default();
    let mut cmd = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY);
    cmd.idr(UVERBS_ATTR_DESTROY_CQ_HANDLE, cq_handle)
        .ptr_out(UVERBS_ATTR_DESTROY_CQ_RESP, &mut resp);
    let label = format!("cq {cq_handle} on {}", ctx.label());
    ctx.ioctl_cmd("destroy_cq", &|| label.clone(), &mut cmd)
        .map_err(|e| explain_destroy(e, "QPs or WQs still complete into it"))
}

/// Sends any ioctl command as built (the header is completed with length, attribute count
/// and the device's driver id). For tests of what the kernel rejects.
pub fn ioctl(ctx: &Context, op: &'static str, cmd: &mut IoctlCmd<'_>) -> Result<()> {
    let label = ctx.label().to_string();
    ctx.ioctl_cmd(op, &|| label.clone(), cmd)
}

/// Sends an ioctl command exactly as built, header included: nothing is corrected, so the
/// kernel's own checks (length, reserved fields, driver id) can be exercised.
pub fn ioctl_unchecked(ctx: &Context, op: &'static str, cmd: &mut IoctlCmd<'_>) -> Result<()> {
    ctx.channel()
        .ioctl_raw(cmd)
        .map_err(|e| Error::os(op, ctx.label().to_string(), e))
}

/// Sends a write command as built.
pub fn write(ctx: &Context, op: &'static str, cmd: &mut WriteCmd) -> Result<()> {
    let label = ctx.label().to_string();
    ctx.write_cmd(op, &|| label.clone(), cmd)
}

fn explain_destroy(e: Error, children: &'static str) -> Error {
    match e.errno() {
        Some(Errno::BUSY) => e.with_reason(format!("{CHILDREN_ALIVE}: {children}")),
        Some(Errno::INVAL) | Some(Errno::NOENT) => {
            e.with_reason("no such object: the handle is unknown or already destroyed")
        }
        _ => e,
    }
}
