//! Memory windows (`ibv_alloc_mw`, `ibv_dealloc_mw`), minimal: type-2 windows bound with a
//! `BIND_MW` send work request ([`crate::WrOp::BindMw`]). rxe can remotely invalidate only
//! windows (not user MRs), so `SEND_WITH_INV` needs one.

use uverbs_uapi::verbs::{IB_MW_TYPE_1, IB_MW_TYPE_2};
use uverbs_uapi::write::{
    IbUverbsAllocMw, IbUverbsAllocMwResp, IB_USER_VERBS_CMD_ALLOC_MW, IB_USER_VERBS_CMD_DEALLOC_MW,
};

use crate::context::legacy_cmd;
use crate::error::Result;
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject};
use crate::pd::Pd;

/// The type of a memory window (`enum ibv_mw_type`).
#[doc(alias = "ibv_mw_type")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MwType {
    /// `IBV_MW_TYPE_1`: bound with `ibv_bind_mw`.
    Type1,
    /// `IBV_MW_TYPE_2`: bound with a `BIND_MW` work request on a QP.
    Type2,
}

/// A memory window (`struct ibv_mw`).
///
/// Allocated on a PD, bound to part of an MR, and handed to a peer instead of the MR's rkey,
/// so the peer's access can be narrowed or revoked without re-registering. rxe has memory
/// windows; EFA has none.
///
/// ```no_run
/// use uverbs::MwType;
///
/// let ctx = uverbs::Context::open(&uverbs::device_by_name("rxe0")?)?;
/// let pd = ctx.alloc_pd()?;
/// let mw = pd.alloc_mw(MwType::Type2)?;       // ibv_alloc_mw
/// // Bind it to part of an MR with a BIND_MW work request on a QP of this PD; then give
/// // the peer mw.rkey() instead of the MR's rkey.
/// println!("rkey {:#x}", mw.rkey());
/// mw.dealloc()?;                                // ibv_dealloc_mw
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_mw")]
pub struct Mw {
    // Deallocated before the PD is released.
    obj: KernelObject,
    _pd: Pd,
    rkey: u32,
}

/// `ibv_dealloc_mw`: `IB_USER_VERBS_CMD_DEALLOC_MW`.
static DEALLOC_MW: Destroy = Destroy {
    name: "mw",
    op: "dealloc_mw",
    cmd: DestroyCmd::Write {
        command: IB_USER_VERBS_CMD_DEALLOC_MW,
    },
};

impl std::fmt::Debug for Mw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mw({}, rkey {:#x})", self.obj.handle(), self.rkey)
    }
}

impl Pd {
    /// Allocates a memory window (`ibv_alloc_mw`).
    #[doc(alias = "ibv_alloc_mw")]
    pub fn alloc_mw(&self, mw_type: MwType) -> Result<Mw> {
        let req = IbUverbsAllocMw {
            pd_handle: self.handle(),
            mw_type: match mw_type {
                MwType::Type1 => IB_MW_TYPE_1,
                MwType::Type2 => IB_MW_TYPE_2,
            },
            ..Default::default()
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_ALLOC_MW,
            &req,
            &[],
            std::mem::size_of::<IbUverbsAllocMwResp>(),
            0,
        );
        self.context()
            .write_cmd("alloc_mw", &|| self.label(), &mut cmd)?;
        let r: IbUverbsAllocMwResp = cmd.response_as();
        Ok(Mw {
            obj: KernelObject::new(
                self.context().clone(),
                r.mw_handle,
                &DEALLOC_MW,
                r.mw_handle,
            ),
            _pd: self.clone(),
            rkey: r.rkey,
        })
    }
}

impl Mw {
    /// The rkey the window was allocated with (`ibv_mw.rkey`).
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.obj.handle()
    }

    /// `ibv_inc_rkey`: the next rkey of a key (low 8 bits incremented), the new rkey a bind
    /// gives the window.
    #[doc(alias = "ibv_inc_rkey")]
    pub fn inc_rkey(rkey: u32) -> u32 {
        (rkey & 0xffff_ff00) | (rkey.wrapping_add(1) & 0xff)
    }

    /// Deallocates the window now (`ibv_dealloc_mw`).
    ///
    /// On failure the window comes back in the error ([`DestroyError::into_inner`]), still
    /// allocated, to retry; dropping it deallocates best-effort and reports a failure.
    #[doc(alias = "ibv_dealloc_mw")]
    pub fn dealloc(mut self) -> Result<(), DestroyError<Mw>> {
        match self.obj.destroy() {
            Ok(_) => Ok(()),
            Err(e) => Err(DestroyError::new(self, e)),
        }
    }
}
