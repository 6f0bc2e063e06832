//! Set-up of the rxe host counts: one RC QP on the stand-in rxe kernel of
//! `testing/rxe-standin`, made as `xtask/bench-c/count.c` makes rdma-core's (depth 4096,
//! `sq_sig_all`, one SGE each way, CQs of 4096, INIT -> RTR -> RTS with the same attributes),
//! and the work request count.c posts: a signaled 8-byte RDMA WRITE with one SGE, to the
//! second half of the same MR.
#![allow(dead_code)]

use uverbs::{
    AccessFlags, Cq, CqInitAttr, Mr, Pd, Qp, QpCap, QpInitAttr, QpType, SendWr, Sge, WrOp,
};
use uverbs_rxe_standin::RxeStandin;

/// Fields drop in order (QP before CQs, MR before PD), then the stand-in kernel.
pub struct Rxe {
    pub qp: Qp,
    pub scq: Cq,
    pub rcq: Cq,
    pub mr: Mr,
    pub pd: Pd,
    pub kernel: RxeStandin,
}

impl Rxe {
    pub fn new(depth: u32) -> (Rxe, [Sge; 1]) {
        let kernel = RxeStandin::new().expect("stand-in rxe kernel");
        let ctx = kernel.open().expect("open the stand-in rxe device");
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd
            .reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
            .unwrap();
        // count.c: ibv_create_cq_ex with cqe 4096 and no wc_flags.
        let cq = || {
            ctx.create_cq_ex(&CqInitAttr {
                cqe: depth,
                ..Default::default()
            })
            .expect("create_cq_ex")
        };
        let (scq, rcq) = (cq(), cq());
        let mut qp = pd
            .create_qp(&QpInitAttr {
                sq_sig_all: true,
                ..QpInitAttr::new(
                    QpType::Rc,
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
            })
            .expect("create RC QP");
        RxeStandin::loopback_to_rts(&mut qp, AccessFlags::REMOTE_WRITE).expect("to RTS");
        let sge = [mr.sge(0, 8).unwrap()];
        (
            Rxe {
                qp,
                scq,
                rcq,
                mr,
                pd,
                kernel,
            },
            sge,
        )
    }

    /// count.c's rxe WR: wr_id 1, RDMA WRITE of the SGE to offset 2048 of the MR, signaled.
    pub fn write<'a>(&self, sge: &'a [Sge; 1]) -> SendWr<'a> {
        SendWr::new(
            1,
            WrOp::RdmaWrite {
                remote_addr: self.mr.addr() + 2048,
                rkey: self.mr.rkey(),
            },
        )
        .sge(sge)
        .signaled()
    }
}
