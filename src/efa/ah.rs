//! EFA's part of `ibv_create_ah` (libefa's `efa_create_ah`): the driver must return AH
//! numbers (`EFA_USER_CMDS_SUPP_UDATA_CREATE_AH`), there is no driver request, and the
//! driver response's `efa_address_handle` is the number send WQEs carry.

use uverbs_uapi::efa::{
    EfaIbvAllocUcontextResp, EfaIbvCreateAhResp, EFA_USER_CMDS_SUPP_UDATA_CREATE_AH,
};

use zerocopy::FromBytes;

use crate::ah::Ah;
use crate::error::{Errno, Error, Result};

/// Length of the driver response of CREATE_AH.
pub(crate) const CREATE_AH_RESP_LEN: usize = std::mem::size_of::<EfaIbvCreateAhResp>();

/// Refuses `op` on `pd` when this EFA kernel driver does not hand out AH numbers.
pub(crate) fn check_create_ah(
    uctx: &EfaIbvAllocUcontextResp,
    op: &'static str,
    pd: String,
) -> Result<()> {
    if uctx.cmds_supp_udata_mask & EFA_USER_CMDS_SUPP_UDATA_CREATE_AH == 0 {
        return Err(Error::invalid(
            op,
            pd,
            Errno::OPNOTSUPP,
            "this EFA kernel driver does not return AH numbers, which sends need",
        ));
    }
    Ok(())
}

/// The device's AH number from CREATE_AH's driver response.
pub(crate) fn ah_num(driver_resp: &[u8]) -> u32 {
    let resp = EfaIbvCreateAhResp::read_from_prefix(driver_resp)
        .map(|(r, _)| r)
        .unwrap_or_default();
    u32::from(resp.efa_address_handle)
}

impl Ah {
    /// The device's AH number of an AH on an EFA device (`efadv_query_ah`'s `ahn`), which
    /// EFA peers use to name this destination. Refused (`EOPNOTSUPP`) on other devices.
    ///
    /// ```
    /// # let fabric = uverbs_efa_model::EfaFabric::new(1);
    /// # let ctx = fabric.add_device(Default::default()).open()?;
    /// use uverbs::{AhAttr, Gid, GlobalRoute};
    ///
    /// let pd = ctx.alloc_pd()?;
    /// // An EFA destination is named by its GID (here our own: a loopback AH).
    /// let gid = ctx.query_gid(1, 0)?;
    /// let attr = AhAttr {
    ///     grh: GlobalRoute { dgid: gid, ..Default::default() },
    ///     is_global: true,
    ///     port_num: 1,
    ///     ..Default::default()
    /// };
    /// let ah = pd.create_ah(&attr)?;
    /// let ahn = ah.efadv_query_ah()?;
    /// assert_eq!(u32::from(ahn), ah.ah_num());
    /// # let _: Gid = gid;
    /// # Ok::<(), uverbs::Error>(())
    /// ```
    pub fn efadv_query_ah(&self) -> Result<u16> {
        let op = "efadv_query_ah";
        let ctx = self.pd().context();
        if ctx.inner.provider_ctx.efa().is_none() {
            return Err(Error::invalid(
                op,
                self.inner.label(),
                Errno::OPNOTSUPP,
                format!(
                    "{op} is EFA's, and this AH is on an {} device, not an EFA one",
                    ctx.device().driver()
                ),
            ));
        }
        Ok(self.inner.ah_num as u16)
    }
}
