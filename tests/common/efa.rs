//! EFA helpers for tests against the device model: the generic verbs, spelled once.
#![allow(dead_code)]

use uverbs::{AhAttr, Gid, GlobalRoute, Qp, QpAttr, QpAttrMask, QpState};

/// RESET→INIT→RTR→RTS with `qkey`, P_Key index 0, port 1 and SQ PSN 0, as libfabric brings
/// up SRD and UD QPs (`ibv_modify_qp` three times).
pub fn to_rts(qp: &mut Qp, qkey: u32) -> uverbs::Result<()> {
    qp.modify(
        &QpAttr {
            qp_state: QpState::Init,
            qkey,
            pkey_index: 0,
            port_num: 1,
            ..Default::default()
        },
        QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT,
    )?;
    qp.modify(
        &QpAttr {
            qp_state: QpState::Rtr,
            ..Default::default()
        },
        QpAttrMask::STATE,
    )?;
    qp.modify(
        &QpAttr {
            qp_state: QpState::Rts,
            sq_psn: 0,
            ..Default::default()
        },
        QpAttrMask::STATE | QpAttrMask::SQ_PSN,
    )
}

/// The address vector of an EFA peer: its GID on port 1 (`ibv_create_ah` as libfabric calls
/// it: GRH with the destination GID, everything else zero).
pub fn ah_attr(gid: [u8; 16]) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            dgid: Gid { raw: gid },
            ..Default::default()
        },
        is_global: true,
        port_num: 1,
        ..Default::default()
    }
}
