//! The model refuses what a correct driver never writes: each broken input below is recorded
//! as a violation (and the well-formed control case is not).

#[path = "../../../tests/common/efa.rs"]
mod efa;

use uverbs::channel::IoctlCmd;
use uverbs::uapi::cmds::*;
use uverbs::uapi::efa::{
    EfaIbvCreateCq, EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID, EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID,
    EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID,
};
use uverbs::{
    AccessFlags, Cq, CqInitAttr, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr, Errno, Mr, Pd, Qp,
    QpCap, QpInitAttr, QpType,
};
use uverbs_efa_model::{send_wqe, EfaDevice, EfaFabric, ModelConfig};
use zerocopy::IntoBytes;

const QKEY: u32 = 7;

struct Rig {
    fab: EfaFabric,
    dev: EfaDevice,
    _pd: Pd,
    cq: Cq,
    qp: Qp,
    mr: Mr,
    ahn: u16,
    _ah: uverbs::Ah,
}

fn rig(cfg: ModelConfig, rts: bool) -> Rig {
    let fab = EfaFabric::new(1);
    let dev = fab.add_device(cfg);
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 16,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    let mut qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: uverbs::SendOpsFlags::SEND,
                ..QpInitAttr::new(
                    QpType::Srd,
                    &cq,
                    &cq,
                    QpCap {
                        max_send_wr: 8,
                        max_recv_wr: 8,
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
        .unwrap();
    if rts {
        efa::to_rts(&mut qp, QKEY).unwrap();
    }
    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let ah = pd.create_ah(&efa::ah_attr(dev.gid())).unwrap();
    Rig {
        fab,
        dev,
        _pd: pd,
        cq,
        qp,
        mr,
        ahn: ah.efadv_query_ah().unwrap(),
        _ah: ah,
    }
}

impl Rig {
    fn good(&self) -> [u8; 64] {
        send_wqe(
            0,
            (self.ahn, self.qp.qp_num() as u16, QKEY),
            (self.mr.addr(), 64, self.mr.lkey()),
            false,
        )
    }
    fn run(&self, wqe: [u8; 64], ring: u16) -> Vec<String> {
        self.fab.raw_post(&self.dev, self.qp.qp_num(), &wqe, ring);
        self.fab.process();
        self.fab.take_violations()
    }
}

fn expect(v: Vec<String>, needle: &str) {
    assert!(
        v.iter().any(|s| s.contains(needle)),
        "expected a violation containing {needle:?}, got {v:?}"
    );
}

#[test]
fn well_formed_wqe_is_accepted_and_completes() {
    let r = rig(ModelConfig::default(), true);
    assert_eq!(r.run(r.good(), 1), Vec::<String>::new());
    let produced: u32 = r.fab.cq_produced(&r.dev, r.cq.handle()).iter().sum();
    assert_eq!(
        produced, 1,
        "a send completion (RNR: no receive posted) was written"
    );
}

#[test]
fn meta_desc_bit_clear_is_a_violation() {
    let r = rig(ModelConfig::default(), true);
    let mut w = r.good();
    w[2] &= !0x80; // ctrl1 bit 7: meta_desc
    expect(r.run(w, 1), "meta_desc");
}

#[test]
fn wrong_phase_is_a_violation() {
    let r = rig(ModelConfig::default(), true);
    let mut w = r.good();
    w[3] |= 0x01; // ctrl2 bit 0: phase 1 on the first pass
    expect(r.run(w, 1), "phase");
}

#[test]
fn unsignaled_send_is_a_violation() {
    let r = rig(ModelConfig::default(), true);
    let mut w = r.good();
    w[3] &= !0x10; // ctrl2 bit 4: comp_req
    expect(r.run(w, 1), "unsignaled");
}

#[test]
fn reserved_bits_are_a_violation() {
    let r = rig(ModelConfig::default(), true);
    let mut w = r.good();
    w[15] = 1; // meta.reserved
    expect(r.run(w, 1), "reserved");
}

#[test]
fn bad_lkey_is_a_violation() {
    let r = rig(ModelConfig::default(), true);
    let w = send_wqe(
        0,
        (r.ahn, r.qp.qp_num() as u16, QKEY),
        (r.mr.addr(), 64, 0xdead),
        false,
    );
    expect(r.run(w, 1), "not registered");
}

#[test]
fn sge_outside_its_mr_is_a_violation() {
    let r = rig(ModelConfig::default(), true);
    let w = send_wqe(
        0,
        (r.ahn, r.qp.qp_num() as u16, QKEY),
        (r.mr.addr() + 4000, 200, r.mr.lkey()),
        false,
    );
    expect(r.run(w, 1), "outside MR");
}

#[test]
fn more_sges_than_max_send_sge_is_a_violation() {
    let r = rig(ModelConfig::default(), true);
    let mut w = r.good();
    w[6] = 2; // meta.length: 2 buffers on a QP with max_send_sge 1
    expect(r.run(w, 1), "SGEs");
}

#[test]
fn rdma_op_not_in_caps_is_a_violation() {
    let r = rig(
        ModelConfig {
            device_caps: EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID,
            ..Default::default()
        },
        true,
    );
    let mut w = r.good();
    w[2] = (w[2] & !0x0f) | 2; // op_type RDMA_WRITE
    expect(r.run(w, 1), "not in the device caps");
}

#[test]
fn inline_rdma_write_in_a_64_byte_wqe_is_a_violation() {
    let r = rig(ModelConfig::default(), true);
    let mut w = r.good();
    w[2] = (w[2] & !0x0f) | 2 | 0x20; // op_type RDMA_WRITE, inline_msg BIT(5)
    w[6] = 4; // meta.length: 4 inline bytes
    expect(r.run(w, 1), "inline RDMA write in a 64-byte WQE");
}

#[test]
fn inline_send_longer_than_max_inline_is_a_violation() {
    let r = rig(ModelConfig::default(), true);
    let mut w = r.good();
    w[2] |= 0x20; // inline_msg
    w[6] = 33; // 33 inline bytes: over the 64-byte WQE's 32 (and the QP's max_inline_data)
    expect(r.run(w, 1), "inline length 33");
}

#[test]
fn doorbell_past_the_ring_is_a_violation() {
    let r = rig(ModelConfig::default(), true);
    expect(r.run(r.good(), 9), "more than the depth");
}

#[test]
fn doorbell_on_a_qp_not_in_rts_is_a_violation() {
    let r = rig(ModelConfig::default(), false);
    expect(r.run(r.good(), 1), "not RTS");
}

#[test]
fn cq_create_checks_attributes_like_the_kernel() {
    let fab = EfaFabric::new(1);
    let dev = fab.add_device(ModelConfig::default());
    let ctx = dev.open().unwrap();
    let ch = ctx.channel();
    let drv = EfaIbvCreateCq {
        cq_entry_size: 32,
        num_sub_cqs: 2,
        ..Default::default()
    };
    let mut out = [0u8; 32];
    let mut cqe_out = 0u32;
    // Missing mandatory CQE: EINVAL.
    let mut c = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
    c.idr_new(UVERBS_ATTR_CREATE_CQ_HANDLE)
        .ptr_out(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &mut cqe_out)
        .u64_in(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 1)
        .u32_in(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 0)
        .driver_in(drv.as_bytes())
        .driver_out(&mut out);
    assert_eq!(ch.ioctl(&mut c), Err(Errno::INVAL));
    // Unknown mandatory attribute: EPROTONOSUPPORT.
    let mut c = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
    c.idr_new(UVERBS_ATTR_CREATE_CQ_HANDLE)
        .ptr_out(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &mut cqe_out)
        .u32_in(UVERBS_ATTR_CREATE_CQ_CQE, 8)
        .u64_in(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 1)
        .u32_in(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 0)
        .u32_in(99, 0)
        .driver_in(drv.as_bytes())
        .driver_out(&mut out);
    assert_eq!(ch.ioctl(&mut c), Err(Errno::PROTONOSUPPORT));
    // Wrong num_sub_cqs in the driver data: EINVAL.
    let bad = EfaIbvCreateCq {
        num_sub_cqs: 3,
        ..drv
    };
    let mut c = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
    c.idr_new(UVERBS_ATTR_CREATE_CQ_HANDLE)
        .ptr_out(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &mut cqe_out)
        .u32_in(UVERBS_ATTR_CREATE_CQ_CQE, 8)
        .u64_in(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 1)
        .u32_in(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 0)
        .driver_in(bad.as_bytes())
        .driver_out(&mut out);
    assert_eq!(ch.ioctl(&mut c), Err(Errno::INVAL));
    // Wrong length of a known attribute (CQE as 8 bytes): EINVAL.
    let mut c = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
    c.idr_new(UVERBS_ATTR_CREATE_CQ_HANDLE)
        .ptr_out(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &mut cqe_out)
        .u64_in(UVERBS_ATTR_CREATE_CQ_CQE, 8)
        .u64_in(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 1)
        .u32_in(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 0)
        .driver_in(drv.as_bytes())
        .driver_out(&mut out);
    assert_eq!(ch.ioctl(&mut c), Err(Errno::INVAL));
    // The 64-bit request id flag on a device without EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID
    // (the default model): EOPNOTSUPP; on one with it, accepted.
    let wide = EfaIbvCreateCq {
        flags: EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID,
        ..drv
    };
    let create = |ch: &dyn uverbs::channel::Channel| {
        let (mut out, mut cqe_out) = ([0u8; 40], 0u32);
        let mut c = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
        c.idr_new(UVERBS_ATTR_CREATE_CQ_HANDLE)
            .ptr_out(UVERBS_ATTR_CREATE_CQ_RESP_CQE, &mut cqe_out)
            .u32_in(UVERBS_ATTR_CREATE_CQ_CQE, 8)
            .u64_in(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 1)
            .u32_in(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 0)
            .driver_in(wide.as_bytes())
            .driver_out(&mut out);
        ch.ioctl(&mut c)
    };
    assert_eq!(create(ch), Err(Errno::OPNOTSUPP));
    let d = ModelConfig::default();
    let ctx64 = fab
        .add_device(ModelConfig {
            device_caps: d.device_caps | EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID,
            ..d
        })
        .open()
        .unwrap();
    assert_eq!(create(ctx64.channel()), Ok(()));
    fab.assert_no_violations();
}
