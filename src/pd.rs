//! Protection domains (`ibv_alloc_pd`, `ibv_dealloc_pd`).

use std::sync::Arc;

use uverbs_uapi::write::{
    IbUverbsAllocPd, IbUverbsAllocPdResp, IB_USER_VERBS_CMD_ALLOC_PD, IB_USER_VERBS_CMD_DEALLOC_PD,
};

use crate::context::{legacy_cmd, Context};
use crate::error::{Errno, Error, Result};
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject};
use crate::provider::{dispatch, DeviceOps};

pub(crate) struct PdInner {
    obj: KernelObject,
}

/// `ibv_dealloc_pd`: `IB_USER_VERBS_CMD_DEALLOC_PD`.
static DEALLOC_PD: Destroy = Destroy {
    name: "pd",
    op: "dealloc_pd",
    cmd: DestroyCmd::Write {
        command: IB_USER_VERBS_CMD_DEALLOC_PD,
    },
};

/// A protection domain (`struct ibv_pd`). Cheap to clone; deallocated when the last clone and
/// the last MR, QP, SRQ and AH made in it are gone.
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// let pd = ctx.alloc_pd()?;
/// let mr = pd.reg_mr(4096, uverbs::AccessFlags::LOCAL_WRITE)?; // holds the PD
/// drop(mr);
/// pd.dealloc().map_err(uverbs::Error::from)?;   // or just drop it
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_pd")]
#[derive(Clone)]
pub struct Pd {
    pub(crate) inner: Arc<PdInner>,
}

impl std::fmt::Debug for Pd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pd({})", self.inner.obj.label())
    }
}

impl Context {
    /// Allocates a protection domain (`ibv_alloc_pd`).
    #[doc(alias = "ibv_alloc_pd")]
    pub fn alloc_pd(&self) -> Result<Pd> {
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_ALLOC_PD,
            &IbUverbsAllocPd::default(),
            &[],
            std::mem::size_of::<IbUverbsAllocPdResp>(),
            self.pd_driver_resp_len(),
        );
        self.write_cmd("alloc_pd", &|| self.label().to_string(), &mut cmd)?;
        let resp: IbUverbsAllocPdResp = cmd.response_as();
        Ok(Pd {
            inner: Arc::new(PdInner {
                obj: KernelObject::new(self.clone(), resp.pd_handle, &DEALLOC_PD, resp.pd_handle),
            }),
        })
    }

    fn pd_driver_resp_len(&self) -> usize {
        dispatch!(ProviderCtx, &self.inner.provider_ctx, p => p.pd_udata_len())
    }
}

impl Pd {
    /// The kernel's handle of this PD.
    pub fn handle(&self) -> u32 {
        self.inner.obj.handle()
    }

    /// The context the PD belongs to.
    pub fn context(&self) -> &Context {
        self.inner.obj.context()
    }

    pub(crate) fn label(&self) -> String {
        self.inner.obj.label()
    }

    /// Deallocates the PD now (`ibv_dealloc_pd`).
    ///
    /// The MRs, MWs, SRQs, QPs and AHs made in the PD hold it, as do its clones: while one
    /// exists this fails with `EBUSY` (the kernel would refuse too) and the PD comes back in
    /// the error ([`DestroyError::into_inner`]); release them and call `dealloc` again.
    /// Dropping the last holder deallocates it anyway.
    #[doc(alias = "ibv_dealloc_pd")]
    pub fn dealloc(mut self) -> Result<(), DestroyError<Pd>> {
        let Some(inner) = Arc::get_mut(&mut self.inner) else {
            let users = Arc::strong_count(&self.inner) - 1;
            let e = Error::invalid(
                "dealloc_pd",
                self.label(),
                Errno::BUSY,
                format!("{users} object(s) made in this PD, or clones of it, still hold it"),
            );
            return Err(DestroyError::new(self, e));
        };
        match inner.obj.destroy() {
            Ok(_) => Ok(()),
            Err(e) => Err(DestroyError::new(self, e)),
        }
    }
}
