//! Shared set-up of the host ring benchmarks: two EFA devices of the device model, an SRD QP
//! on each, and the work requests to post. Everything goes through the public API, so a
//! measured post or poll is exactly what an application's costs (minus the hardware).
#![allow(dead_code)]

#[path = "../tests/common/efa.rs"]
mod efa;

use uverbs::{
    AccessFlags, Cq, CqInitAttr, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr, EfaWcFlags, Mr, Pd, Qp,
    QpCap, QpInitAttr, QpType, RecvWr, SendOpsFlags, SendWr, Sge,
};
use uverbs_efa_model::{EfaFabric, ModelConfig};

pub const QKEY: u32 = 0x1234_5678;

/// One side; fields drop in order (QP before CQs, MR before PD).
pub struct Side {
    pub qp: Qp,
    pub scq: Cq,
    pub rcq: Cq,
    pub mr: Mr,
    pub pd: Pd,
}

pub struct Pair {
    pub a: Side,
    pub b: Side,
    _ah: uverbs::Ah,
    pub fab: EfaFabric,
}

/// What the work requests name (kept apart from the QPs so both can be borrowed at once).
pub struct Wrs {
    /// The destination: an AH to `b`, `b`'s QP number (the Q_Key is [`QKEY`]).
    pub ah: uverbs::Ah,
    pub remote_qpn: u32,
    pub ssge: [Sge; 1],
    pub rsge: [Sge; 1],
}

impl Pair {
    /// Two SRD QPs `depth` deep with `depth`-entry CQs.
    pub fn new(depth: u32) -> (Pair, Wrs) {
        Pair::with_config(depth, ModelConfig::default())
    }

    /// [`new`](Self::new) on devices with `EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID`: the QPs
    /// carry 64-bit request ids (no id pool).
    pub fn new_64bit_ids(depth: u32) -> (Pair, Wrs) {
        let d = ModelConfig::default();
        Pair::with_config(
            depth,
            ModelConfig {
                device_caps: d.device_caps
                    | uverbs::uapi::efa::EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID,
                ..d
            },
        )
    }

    fn with_config(depth: u32, cfg: ModelConfig) -> (Pair, Wrs) {
        let fab = EfaFabric::new(1);
        // No doorbell trap: it costs two signals per SQ doorbell (whose handler instructions
        // callgrind would count as ours) and valgrind cannot run it; the model then reads the
        // doorbell word in `process`, which is all these benchmarks need.
        fab.set_doorbell_trap(false);
        let da = fab.add_device(cfg);
        let db = fab.add_device(cfg);
        let side = |dev: &uverbs_efa_model::EfaDevice| {
            let ctx = dev.open().expect("open model device");
            let pd = ctx.alloc_pd().unwrap();
            let cq = || {
                ctx.efadv_create_cq(
                    &CqInitAttr {
                        cqe: depth,
                        ..Default::default()
                    },
                    &EfaCqInitAttr {
                        wc_flags: EfaWcFlags::empty(),
                        ..Default::default()
                    },
                )
                .expect("efadv_create_cq")
            };
            let (scq, rcq) = (cq(), cq());
            let mut qp = pd
                .efadv_create_qp_ex(
                    &QpInitAttr {
                        sq_sig_all: true,
                        send_ops_flags: SendOpsFlags::SEND,
                        ..QpInitAttr::new(
                            QpType::Srd,
                            &scq,
                            &rcq,
                            QpCap {
                                max_send_wr: depth,
                                max_recv_wr: depth,
                                max_send_sge: 1,
                                max_recv_sge: 1,
                                max_inline_data: 0,
                            },
                        )
                    },
                    &EfaQpInitAttr {
                        flags: EfaQpFlags::empty(),
                        sl: 0,
                        wr_flags: Default::default(),
                    },
                )
                .expect("efadv_create_qp");
            efa::to_rts(&mut qp, QKEY).expect("modify to RTS");
            let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
            Side {
                qp,
                scq,
                rcq,
                mr,
                pd,
            }
        };
        let a = side(&da);
        let b = side(&db);
        let ah = a.pd.create_ah(&efa::ah_attr(db.gid())).unwrap();
        let remote_qpn = b.qp.qp_num();
        let ssge = [a.mr.sge(0, 64).unwrap()];
        let rsge = [b.mr.sge(0, 64).unwrap()];
        let wrs = Wrs {
            ah: ah.clone(),
            remote_qpn,
            ssge,
            rsge,
        };
        (Pair { a, b, _ah: ah, fab }, wrs)
    }
}

impl Wrs {
    pub fn send(&self) -> SendWr<'_> {
        SendWr::send(1)
            .ud(&self.ah, self.remote_qpn, QKEY)
            .sge(&self.ssge)
            .signaled()
    }

    pub fn recv(&self) -> RecvWr<'_> {
        RecvWr {
            wr_id: 2,
            sg_list: &self.rsge,
        }
    }
}
