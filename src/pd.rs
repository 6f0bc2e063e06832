//! Protection domains (`ibv_alloc_pd`, `ibv_dealloc_pd`).

use std::sync::Arc;

use uverbs_uapi::write::{
    IbUverbsAllocPd, IbUverbsAllocPdResp, IbUverbsDeallocPd, IB_USER_VERBS_CMD_ALLOC_PD,
    IB_USER_VERBS_CMD_DEALLOC_PD,
};

use crate::context::{legacy_cmd, Context};
use crate::error::Result;

pub(crate) struct PdInner {
    pub(crate) ctx: Context,
    pub(crate) handle: u32,
}

/// A protection domain (`struct ibv_pd`). Cheap to clone; deallocated when the last clone and
/// the last MR, QP, SRQ and AH made in it are gone.
#[doc(alias = "ibv_pd")]
#[derive(Clone)]
pub struct Pd {
    pub(crate) inner: Arc<PdInner>,
}

impl std::fmt::Debug for Pd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pd({} on {})", self.inner.handle, self.inner.ctx.label())
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
                ctx: self.clone(),
                handle: resp.pd_handle,
            }),
        })
    }

    fn pd_driver_resp_len(&self) -> usize {
        match self.provider() {
            crate::ProviderInfo::Efa(_) => {
                std::mem::size_of::<uverbs_uapi::efa::EfaIbvAllocPdResp>()
            }
            _ => 0,
        }
    }
}

impl Pd {
    /// The kernel's handle of this PD.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The context the PD belongs to.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    pub(crate) fn label(&self) -> String {
        format!("pd {} on {}", self.inner.handle, self.inner.ctx.label())
    }
}

impl Drop for PdInner {
    fn drop(&mut self) {
        let cmd = IbUverbsDeallocPd {
            pd_handle: self.handle,
        };
        let mut cmd = legacy_cmd(IB_USER_VERBS_CMD_DEALLOC_PD, &cmd, &[], 0, 0);
        if let Err(e) = self.ctx.inner.channel.write(&mut cmd) {
            let label = format!("pd {} on {}", self.handle, self.ctx.label());
            crate::report_drop_error("dealloc_pd", &label, e);
        }
    }
}
