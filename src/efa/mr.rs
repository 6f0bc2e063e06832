//! `efadv_query_mr`: the interconnects an EFA MR's traffic uses (the EFA driver method
//! `EFA_IB_METHOD_MR_QUERY` on the MR object).

use uverbs_uapi::cmds::UVERBS_OBJECT_MR;
use uverbs_uapi::efa::{
    EFA_IB_ATTR_QUERY_MR_HANDLE, EFA_IB_ATTR_QUERY_MR_RESP_IC_ID_VALIDITY,
    EFA_IB_ATTR_QUERY_MR_RESP_RDMA_READ_IC_ID, EFA_IB_ATTR_QUERY_MR_RESP_RDMA_RECV_IC_ID,
    EFA_IB_ATTR_QUERY_MR_RESP_RECV_IC_ID, EFA_IB_METHOD_MR_QUERY,
    EFA_QUERY_MR_VALIDITY_RDMA_READ_IC_ID, EFA_QUERY_MR_VALIDITY_RDMA_RECV_IC_ID,
    EFA_QUERY_MR_VALIDITY_RECV_IC_ID,
};

use crate::channel::IoctlCmd;
use crate::error::Result;
use crate::mr::Mr;

/// `struct efadv_mr_attr`: interconnect ids of an MR, each `None` when the device did not
/// report it (its `EFADV_MR_ATTR_VALIDITY_*` bit clear).
#[doc(alias = "efadv_mr_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EfaMrAttr {
    /// The raw `ic_id_validity` bits (`EFA_QUERY_MR_VALIDITY_*`).
    pub ic_id_validity: u16,
    /// Interconnect used by the device to reach the MR for receives.
    pub recv_ic_id: Option<u16>,
    /// Interconnect used for RDMA reads of the MR.
    pub rdma_read_ic_id: Option<u16>,
    /// Interconnect used for RDMA writes-with-receive into the MR.
    pub rdma_recv_ic_id: Option<u16>,
}

impl Mr {
    /// Queries which interconnects the device uses for this MR (`efadv_query_mr`). `EOPNOTSUPP`
    /// for a device that is not EFA, and from kernels without the method.
    ///
    /// ```
    /// # let fabric = uverbs_efa_model::EfaFabric::new(1);
    /// # let ctx = fabric.add_device(Default::default()).open()?;
    /// let pd = ctx.alloc_pd()?;
    /// let mr = pd.reg_mr(4096, uverbs::AccessFlags::LOCAL_WRITE)?;
    /// let ic = mr.efadv_query_mr()?;
    /// if let Some(id) = ic.recv_ic_id {
    ///     println!("receives into this MR use interconnect {id}");
    /// }
    /// # Ok::<(), uverbs::Error>(())
    /// ```
    #[doc(alias = "EFA_IB_METHOD_MR_QUERY")]
    pub fn efadv_query_mr(&self) -> Result<EfaMrAttr> {
        let op = "efadv_query_mr";
        let ctx = self.pd().context();
        ctx.efa_ucontext(op)?;
        let (mut validity, mut recv, mut read, mut rdma_recv) = (0u16, 0u16, 0u16, 0u16);
        {
            let mut cmd = IoctlCmd::new(UVERBS_OBJECT_MR, EFA_IB_METHOD_MR_QUERY);
            cmd.idr(EFA_IB_ATTR_QUERY_MR_HANDLE, self.handle())
                .ptr_out(EFA_IB_ATTR_QUERY_MR_RESP_IC_ID_VALIDITY, &mut validity)
                .ptr_out(EFA_IB_ATTR_QUERY_MR_RESP_RECV_IC_ID, &mut recv)
                .ptr_out(EFA_IB_ATTR_QUERY_MR_RESP_RDMA_READ_IC_ID, &mut read)
                .ptr_out(EFA_IB_ATTR_QUERY_MR_RESP_RDMA_RECV_IC_ID, &mut rdma_recv);
            ctx.ioctl_cmd(
                op,
                &|| format!("mr {} on {}", self.handle(), ctx.label()),
                &mut cmd,
            )?;
        }
        let valid = |bit: u16, v: u16| (validity & bit != 0).then_some(v);
        Ok(EfaMrAttr {
            ic_id_validity: validity,
            recv_ic_id: valid(EFA_QUERY_MR_VALIDITY_RECV_IC_ID, recv),
            rdma_read_ic_id: valid(EFA_QUERY_MR_VALIDITY_RDMA_READ_IC_ID, read),
            rdma_recv_ic_id: valid(EFA_QUERY_MR_VALIDITY_RDMA_RECV_IC_ID, rdma_recv),
        })
    }
}
