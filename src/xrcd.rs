//! XRC domains (`ibv_open_xrcd`, `ibv_close_xrcd`).
//!
//! Fully encoded (`IB_USER_VERBS_CMD_OPEN_XRCD` / `CLOSE_XRCD`) so that devices with XRC work;
//! rxe has none, and the kernel refuses the command (`EOPNOTSUPP`): the error says so.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;

use uverbs_uapi::write::{
    IbUverbsCloseXrcd, IbUverbsOpenXrcd, IbUverbsOpenXrcdResp, IB_USER_VERBS_CMD_CLOSE_XRCD,
    IB_USER_VERBS_CMD_OPEN_XRCD,
};

use crate::context::{legacy_cmd, Context};
use crate::error::{Errno, Error, Result};
use crate::ProviderInfo;

pub(crate) struct XrcdInner {
    ctx: Context,
    handle: u32,
    closed: bool,
}

impl XrcdInner {
    fn label(&self) -> String {
        format!("xrcd {} on {}", self.handle, self.ctx.label())
    }
}

impl Drop for XrcdInner {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_CLOSE_XRCD,
            &IbUverbsCloseXrcd {
                xrcd_handle: self.handle,
            },
            &[],
            0,
            0,
        );
        if let Err(e) = self.ctx.inner.channel.write(&mut cmd) {
            crate::report_drop_error("close_xrcd", &self.label(), e);
        }
    }
}

/// An XRC domain (`struct ibv_xrcd`). Cheap to clone; closed with its last user.
#[doc(alias = "ibv_xrcd")]
#[derive(Clone)]
pub struct Xrcd {
    inner: Arc<XrcdInner>,
}

impl std::fmt::Debug for Xrcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Xrcd({})", self.inner.label())
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
        let rxe = matches!(self.provider(), ProviderInfo::Rxe);
        self.write_cmd(op, &|| self.label().to_string(), &mut cmd)
            .map_err(|e| {
                if rxe && (e.is(Errno::OPNOTSUPP) || e.is(Errno::NOSYS)) {
                    e.with_reason("rxe does not support XRC (no XRC domains)")
                } else {
                    e
                }
            })?;
        let resp: IbUverbsOpenXrcdResp = cmd.response_as();
        Ok(Xrcd {
            inner: Arc::new(XrcdInner {
                ctx: self.clone(),
                handle: resp.xrcd_handle,
                closed: false,
            }),
        })
    }
}

impl Xrcd {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// Closes the domain now (`ibv_close_xrcd`); `EBUSY` while other users hold it.
    #[doc(alias = "ibv_close_xrcd")]
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.inner) {
            // Drop of the inner issues CLOSE_XRCD; do it here to return its error instead.
            Ok(mut inner) => {
                let mut cmd = legacy_cmd(
                    IB_USER_VERBS_CMD_CLOSE_XRCD,
                    &IbUverbsCloseXrcd {
                        xrcd_handle: inner.handle,
                    },
                    &[],
                    0,
                    0,
                );
                let r = inner.ctx.inner.channel.write(&mut cmd);
                // Closed, or failed and reported here: dropping must not try again.
                inner.closed = true;
                let label = inner.label();
                r.map_err(|e| Error::os("close_xrcd", label, e))
            }
            Err(inner) => Err(Error::invalid(
                "close_xrcd",
                inner.label(),
                Errno::BUSY,
                "SRQs or QPs still use the domain",
            )),
        }
    }
}
