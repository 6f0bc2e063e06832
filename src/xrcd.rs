//! XRC domains (`ibv_open_xrcd`, `ibv_close_xrcd`).
//!
//! Fully encoded (`IB_USER_VERBS_CMD_OPEN_XRCD` / `CLOSE_XRCD`) so that devices with XRC work;
//! rxe has none, and the kernel refuses the command (`EOPNOTSUPP`): the error says so.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;

use uverbs_uapi::write::{
    IbUverbsOpenXrcd, IbUverbsOpenXrcdResp, IB_USER_VERBS_CMD_CLOSE_XRCD,
    IB_USER_VERBS_CMD_OPEN_XRCD,
};

use crate::context::{legacy_cmd, Context};
use crate::error::{Errno, Error, Result};
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject};
use crate::provider::{dispatch, DeviceOps, Feature};

pub(crate) struct XrcdInner {
    obj: KernelObject,
}

/// `ibv_close_xrcd`: `IB_USER_VERBS_CMD_CLOSE_XRCD`.
static CLOSE_XRCD: Destroy = Destroy {
    name: "xrcd",
    op: "close_xrcd",
    cmd: DestroyCmd::Write {
        command: IB_USER_VERBS_CMD_CLOSE_XRCD,
    },
};

/// An XRC domain (`struct ibv_xrcd`). Cheap to clone; closed with its last user.
///
/// Processes that open the domain through the same file share it. Neither rxe nor EFA has
/// XRC ([`Context::open_xrcd`] on rxe fails with `EOPNOTSUPP`); on a device with XRC this is
/// the common use:
///
/// ```no_run
/// use uverbs::XRCD_O_CREAT;
///
/// let ctx = uverbs::Context::open(uverbs::devices()?.first().ok_or("no RDMA device")?)?;
/// let file = std::fs::File::create("/tmp/my-xrc-domain")?;
/// use std::os::fd::AsFd;
/// // Processes opening the same file share the domain.
/// let xrcd = ctx.open_xrcd(Some(file.as_fd()), XRCD_O_CREAT)?;
/// println!("xrcd handle {}", xrcd.handle());
/// xrcd.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "ibv_xrcd")]
#[derive(Clone)]
pub struct Xrcd {
    inner: Arc<XrcdInner>,
}

impl std::fmt::Debug for Xrcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Xrcd({})", self.inner.obj.label())
    }
}

/// `O_CREAT` for [`Context::open_xrcd`]: create the domain if the file has none.
pub const XRCD_O_CREAT: u32 = 0o100;
/// `O_EXCL` for [`Context::open_xrcd`]: fail if the domain exists.
pub const XRCD_O_EXCL: u32 = 0o200;

impl Context {
    /// Opens an XRC domain (`ibv_open_xrcd`): shared through the inode of `fd`, or private to
    /// this process with `fd = None`. `oflags` are [`XRCD_O_CREAT`] / [`XRCD_O_EXCL`].
    #[doc(alias = "ibv_open_xrcd")]
    pub fn open_xrcd(&self, fd: Option<BorrowedFd<'_>>, oflags: u32) -> Result<Xrcd> {
        let op = "open_xrcd";
        let req = IbUverbsOpenXrcd {
            response: 0,
            fd: fd.map_or(u32::MAX, |f| f.as_raw_fd() as u32),
            oflags,
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_OPEN_XRCD,
            &req,
            &[],
            std::mem::size_of::<IbUverbsOpenXrcdResp>(),
            0,
        );
        let lacks = dispatch!(ProviderCtx, &self.inner.provider_ctx, p => p.lacks(Feature::Xrc));
        self.write_cmd(op, &|| self.label().to_string(), &mut cmd)
            .map_err(|e| match lacks {
                Some(why) if e.is(Errno::OPNOTSUPP) || e.is(Errno::NOSYS) => e.with_reason(why),
                _ => e,
            })?;
        let resp: IbUverbsOpenXrcdResp = cmd.response_as();
        Ok(Xrcd {
            inner: Arc::new(XrcdInner {
                obj: KernelObject::new(
                    self.clone(),
                    resp.xrcd_handle,
                    &CLOSE_XRCD,
                    resp.xrcd_handle,
                ),
            }),
        })
    }
}

impl Xrcd {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.inner.obj.handle()
    }

    /// Closes the domain now (`ibv_close_xrcd`). While clones, SRQs or QPs hold it this
    /// fails with `EBUSY` and the domain comes back in the error
    /// ([`DestroyError::into_inner`]); release them and call `close` again.
    #[doc(alias = "ibv_close_xrcd")]
    pub fn close(mut self) -> Result<(), DestroyError<Xrcd>> {
        let Some(inner) = Arc::get_mut(&mut self.inner) else {
            let e = Error::invalid(
                "close_xrcd",
                self.inner.obj.label(),
                Errno::BUSY,
                "SRQs or QPs still use the domain",
            );
            return Err(DestroyError::new(self, e));
        };
        match inner.obj.destroy() {
            Ok(_) => Ok(()),
            Err(e) => Err(DestroyError::new(self, e)),
        }
    }
}
