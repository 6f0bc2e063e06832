//! EFA helpers for tests against the device model: the generic verbs, spelled once.
#![allow(dead_code)]

use uverbs::{
    AccessFlags, AhAttr, Cq, CqInitAttr, EfaCqInitAttr, EfaQpInitAttr, EfaWcFlags, EfaWrExFlags,
    Gid, GlobalRoute, Mr, Pd, Qp, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType,
    SendOpsFlags, Sge, Wc,
};
use uverbs_efa_model::{EfaDevice, EfaFabric, ModelConfig};

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

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

/// An EFA CQ of `cqe` entries whose completions carry `wc_flags` (`efadv_create_cq`).
pub fn cq(ctx: &uverbs::Context, cqe: u32, wc_flags: EfaWcFlags) -> Cq {
    ctx.efadv_create_cq(
        &CqInitAttr {
            cqe,
            ..Default::default()
        },
        &EfaCqInitAttr {
            wc_flags,
            ..Default::default()
        },
    )
    .expect("efadv_create_cq")
}

/// What differs between the SRD hosts the model tests build (`srd_host`).
pub struct SrdHostSpec {
    /// Entries of each of the two CQs.
    pub cqe: u32,
    pub cap: QpCap,
    pub send_ops_flags: SendOpsFlags,
    pub wr_flags: EfaWrExFlags,
    /// Access of the one 64 KiB memory region.
    pub mr_access: AccessFlags,
}

impl Default for SrdHostSpec {
    fn default() -> Self {
        SrdHostSpec {
            cqe: 64,
            cap: QpCap {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 32,
            },
            send_ops_flags: SendOpsFlags::empty(),
            wr_flags: EfaWrExFlags::empty(),
            mr_access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_WRITE,
        }
    }
}

/// One model device with a PD, a send CQ, a receive CQ with `WITH_SGID`, an SRD QP in RTS
/// (`sq_sig_all`) and a 64 KiB memory region.
pub struct SrdHost {
    pub dev: EfaDevice,
    pub pd: Pd,
    pub scq: Cq,
    pub rcq: Cq,
    pub qp: Qp,
    pub mr: Mr,
    pub gid: [u8; 16],
}

/// Builds an `SrdHost` on a new device of `fab` with `cfg`, its QP brought to RTS with `qkey`.
pub fn srd_host(fab: &EfaFabric, cfg: ModelConfig, spec: &SrdHostSpec, qkey: u32) -> SrdHost {
    let dev = fab.add_device(cfg);
    let ctx = dev.open().expect("open model device");
    let pd = ctx.alloc_pd().expect("alloc_pd");
    let scq = cq(&ctx, spec.cqe, EfaWcFlags::empty());
    let rcq = cq(&ctx, spec.cqe, EfaWcFlags::WITH_SGID);
    let mut qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: spec.send_ops_flags,
                ..QpInitAttr::new(QpType::Srd, &scq, &rcq, spec.cap)
            },
            &EfaQpInitAttr {
                wr_flags: spec.wr_flags,
                ..Default::default()
            },
        )
        .expect("efadv_create_qp_ex");
    to_rts(&mut qp, qkey).expect("to RTS");
    let mr = pd.reg_mr(1 << 16, spec.mr_access).expect("reg_mr");
    SrdHost {
        gid: dev.gid(),
        dev,
        pd,
        scq,
        rcq,
        qp,
        mr,
    }
}

/// An SGE of `len` bytes of `mr` from offset `off`.
pub fn sge(mr: &Mr, off: usize, len: u32) -> Sge {
    mr.sge(off, len).expect("sge inside the memory region")
}

/// Exactly `n` completions of `cq`, polled 4 at a time (the model has written them once
/// `EfaFabric::process` returned; the polls are bounded); fails the test naming what came if
/// fewer are there.
pub fn poll_n(cq: &mut Cq, n: usize) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut buf = [Wc::default(); 4];
    for _ in 0..1000 {
        let k = cq.poll(&mut buf).expect("poll_cq");
        out.extend_from_slice(&buf[..k]);
        if out.len() >= n {
            break;
        }
    }
    assert_eq!(out.len(), n, "expected {n} completions, got {out:?}");
    out
}

/// Every completion `cq` holds now, through `ibv_poll_cq` 8 at a time.
pub fn drain(cq: &mut Cq) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut buf = [Wc::default(); 8];
    loop {
        let k = cq.poll(&mut buf).expect("poll_cq");
        if k == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..k]);
    }
}

/// How many commands a context sent through a [`CountingChannel`].
#[derive(Debug, Default)]
pub struct CommandCounts {
    ioctl: AtomicUsize,
    write: AtomicUsize,
    query_device: AtomicUsize,
}

impl CommandCounts {
    /// Every command: ioctls and `write()`s.
    pub fn commands(&self) -> usize {
        self.ioctl.load(Relaxed) + self.write.load(Relaxed)
    }

    /// QUERY_DEVICE commands, legacy and extended.
    pub fn query_device(&self) -> usize {
        self.query_device.load(Relaxed)
    }
}

/// A channel in front of a model device that counts the commands sent through it, to show
/// what a call costs in kernel commands. Mappings are not commands and are not counted.
#[derive(Debug)]
pub struct CountingChannel {
    dev: EfaDevice,
    counts: Arc<CommandCounts>,
}

impl CountingChannel {
    /// A context on `dev` (under the synthetic device name `name` and node GUID `guid`) whose
    /// commands are counted, creation's included.
    pub fn open(dev: &EfaDevice, name: &str, guid: u64) -> (uverbs::Context, Arc<CommandCounts>) {
        let counts = Arc::new(CommandCounts::default());
        let ctx = uverbs::Context::with_channel(
            uverbs::Device::synthetic(name, uverbs::Driver::Efa, guid),
            Box::new(CountingChannel {
                dev: dev.clone(),
                counts: counts.clone(),
            }),
        )
        .unwrap_or_else(|e| panic!("opening {name}: {e}"));
        (ctx, counts)
    }
}

// SAFETY: every command goes to `dev` (a `Channel`) unchanged and its answer comes back
// unchanged; `doorbell_fd` is `dev`'s, which stays open as long as `dev`, which we own.
#[allow(unsafe_code)]
unsafe impl uverbs::channel::Channel for CountingChannel {
    fn ioctl(&self, cmd: &mut uverbs::channel::IoctlCmd<'_>) -> Result<(), uverbs::Errno> {
        self.counts.ioctl.fetch_add(1, Relaxed);
        self.dev.ioctl(cmd)
    }
    fn write(&self, cmd: &mut uverbs::channel::WriteCmd) -> Result<(), uverbs::Errno> {
        use uverbs::uapi::write::IB_USER_VERBS_CMD_QUERY_DEVICE;
        self.counts.write.fetch_add(1, Relaxed);
        if cmd.command() == IB_USER_VERBS_CMD_QUERY_DEVICE {
            self.counts.query_device.fetch_add(1, Relaxed);
        }
        self.dev.write(cmd)
    }
    fn mmap(
        &self,
        offset: u64,
        len: usize,
        kind: uverbs::channel::MapKind,
    ) -> Result<uverbs::channel::Mapping, uverbs::Errno> {
        self.dev.mmap(offset, len, kind)
    }
    fn doorbell_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.dev.doorbell_fd()
    }
    fn driver_id(&self) -> u32 {
        self.dev.driver_id()
    }
}
