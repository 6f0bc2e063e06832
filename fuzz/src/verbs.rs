//! Verbs driven against a [`HostileKernel`]: every response the object model decodes (write
//! responses, ioctl outputs, mmapped rings, event records) is hostile, and every call must
//! end in a value or a typed error, never a panic, a hang or an out-of-bounds access.

use std::time::Duration;

use uverbs::{
    AccessFlags, AhAttr, CompChannel, Context, Cq, Device, Driver, EfaCqInitAttr, EfaQpInitAttr,
    Gid, GlobalRoute, Mr, Pd, Qp, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr,
    SendWr, Srq, SrqAttr, SrqAttrMask, Wc,
};
use uverbs_uapi::ioctl::{RDMA_DRIVER_EFA, RDMA_DRIVER_RXE};

use crate::{check_error, checked, HostileKernel, IoctlMode};

/// Most verbs one input drives (keeps each run short).
const MAX_OPS: usize = 48;

/// Runs a sequence of verbs chosen by `data` against a hostile kernel answering from the same
/// bytes. The first byte picks the device's driver (rxe or EFA).
pub fn run(data: &[u8], mode: IoctlMode) {
    let (driver, driver_id) = if data.first().copied().unwrap_or(0) & 1 == 0 {
        (Driver::Rxe, RDMA_DRIVER_RXE)
    } else {
        (Driver::Efa, RDMA_DRIVER_EFA)
    };
    // The op stream and the kernel's answers interleave in one input: the kernel takes bytes
    // as commands arrive, the scenario takes one byte per op choice.
    let kernel = HostileKernel::new(data.get(1..).unwrap_or(&[]), mode, driver_id);
    let kernel = Box::new(kernel);
    let kref: *const HostileKernel = &*kernel;
    let name = if driver == Driver::Rxe {
        "rxe0"
    } else {
        "efa0"
    };
    let dev = Device::synthetic(name, driver, 0x0002_c9ff_fe00_0001);
    let Some(ctx) = checked(Context::with_channel(dev, kernel)) else {
        return;
    };
    // SAFETY: the channel is owned by `ctx` (boxed, never moved out of its box) and `ctx` lives
    // until the end of this function; `HostileKernel` is `Sync` and only used through `&`.
    let kernel: &HostileKernel = unsafe { &*kref };
    let mut w = World {
        ctx,
        pds: Vec::new(),
        mrs: Vec::new(),
        cqs: Vec::new(),
        chans: Vec::new(),
        qps: Vec::new(),
        srqs: Vec::new(),
    };
    for _ in 0..MAX_OPS {
        let (op, arg) = kernel.with_input(|i| (i.u8(), i.u32()));
        if kernel.with_input(|i| i.is_empty()) {
            break;
        }
        w.step(op, arg);
    }
}

struct World {
    ctx: Context,
    pds: Vec<Pd>,
    mrs: Vec<Mr>,
    cqs: Vec<Cq>,
    chans: Vec<CompChannel>,
    qps: Vec<Qp>,
    srqs: Vec<Srq>,
}

fn pick<T>(v: &mut [T], arg: u32) -> Option<&mut T> {
    let n = v.len();
    (n > 0).then(|| &mut v[arg as usize % n])
}

impl World {
    fn step(&mut self, op: u8, arg: u32) {
        let small = |x: u32| x % 300;
        match op % 24 {
            0 => {
                if let Some(d) = checked(self.ctx.query_device()) {
                    let _ = format!("{d:?}");
                }
            }
            1 => {
                let _ = checked(self.ctx.query_device_ex());
            }
            2 => {
                let _ = checked(self.ctx.query_port((arg % 3) as u8));
            }
            3 => {
                let _ = checked(self.ctx.query_port_speed((arg % 3) as u8));
            }
            4 => {
                // The table size comes from the port's gid_tbl_len: hostile.
                if let Some(t) = checked(self.ctx.query_gid_table()) {
                    for e in &t {
                        let _ = (e.gid.to_ipv6_string(), e.gid_type.as_str());
                    }
                }
            }
            5 => {
                let _ = checked(self.ctx.query_gid_ex((arg % 3) as u8, arg >> 8));
            }
            6 => {
                let _ = checked(self.ctx.query_pkey((arg % 3) as u8, (arg >> 8) as u16));
            }
            7 => {
                if let Some(pd) = checked(self.ctx.alloc_pd()) {
                    self.pds.push(pd);
                }
            }
            8 => {
                if let Some(pd) = pick(&mut self.pds, arg) {
                    let len = 1 + (arg as usize >> 20) * 512;
                    if let Some(mr) = checked(pd.reg_mr(len, AccessFlags::LOCAL_WRITE)) {
                        let _ = (
                            mr.lkey(),
                            mr.rkey(),
                            mr.sge(0, 8).map_err(|e| check_error(&e)),
                        );
                        self.mrs.push(mr);
                    }
                }
            }
            9 => {
                let ch = if arg & 1 == 1 {
                    self.chans.first()
                } else {
                    None
                };
                if let Some(cq) = checked(self.ctx.create_cq(small(arg >> 1).max(1), ch, 0)) {
                    self.cqs.push(cq);
                }
            }
            10 | 11 => {
                if let Some(cq) = pick(&mut self.cqs, arg) {
                    let mut wcs = [Wc::default(); 8];
                    for _ in 0..4 {
                        match cq.poll(&mut wcs) {
                            Ok(n) => assert!(n <= wcs.len()),
                            Err(e) => {
                                check_error(&e);
                                break;
                            }
                        }
                    }
                }
            }
            12 => {
                if let Some(cq) = pick(&mut self.cqs, arg) {
                    let _ = checked(cq.req_notify(arg & 2 != 0));
                }
            }
            13 => {
                if let Some(cq) = pick(&mut self.cqs, arg) {
                    let _ = checked(cq.resize(small(arg >> 4).max(1)));
                }
            }
            14 => {
                if let Some(ch) = checked(self.ctx.create_comp_channel()) {
                    self.chans.push(ch);
                }
            }
            15 => {
                if let Some(ch) = pick(&mut self.chans, arg) {
                    let _ = checked(ch.try_get_cq_event());
                }
                let _ = checked(self.ctx.get_async_event(Some(Duration::ZERO)));
            }
            16 => self.create_qp(arg),
            17 => {
                if let Some(qp) = pick(&mut self.qps, arg) {
                    let st = [QpState::Init, QpState::Rtr, QpState::Rts, QpState::Err];
                    let attr = QpAttr {
                        qp_state: st[(arg >> 8) as usize % 4],
                        port_num: 1,
                        ah_attr: AhAttr::roce(Gid::from([0u8; 16]), 1, 1),
                        ..QpAttr::default()
                    };
                    let _ = checked(qp.modify(&attr, QpAttrMask::STATE));
                    let _ = checked(qp.query(QpAttrMask::all()));
                }
            }
            18 => {
                let Some(mr) = self.mrs.first() else { return };
                let Ok(sge) = mr.sge(0, (arg >> 8) % 64) else {
                    return;
                };
                if let Some(qp) = pick(&mut self.qps, arg) {
                    let sg = [sge];
                    let wr = SendWr::send(u64::from(arg)).sge(&sg).signaled();
                    if let Err(e) = qp.post_send(&[wr, wr]) {
                        let _ = e.to_string();
                    }
                    let rw = RecvWr::new(7, &sg);
                    if let Err(e) = qp.post_recv(&[rw]) {
                        let _ = e.to_string();
                    }
                }
            }
            19 => {
                if let Some(pd) = pick(&mut self.pds, arg) {
                    let attr = SrqAttr {
                        max_wr: small(arg >> 8).max(1),
                        max_sge: 1 + (arg >> 24) % 3,
                        srq_limit: 0,
                    };
                    if let Some(srq) = checked(pd.create_srq(&attr)) {
                        self.srqs.push(srq);
                    }
                }
            }
            20 => {
                if let Some(srq) = pick(&mut self.srqs, arg) {
                    let _ = checked(srq.query());
                    let attr = SrqAttr {
                        max_wr: small(arg >> 8),
                        srq_limit: arg >> 20,
                        max_sge: 0,
                    };
                    let _ = checked(srq.modify(&attr, SrqAttrMask::from_bits_truncate(arg)));
                    if let Some(mr) = self.mrs.first() {
                        if let Ok(sge) = mr.sge(0, 8) {
                            let sg = [sge];
                            if let Err(e) = srq.post_recv(&[RecvWr::new(1, &sg)]) {
                                let _ = e.to_string();
                            }
                        }
                    }
                }
            }
            21 => {
                if let Some(pd) = pick(&mut self.pds, arg) {
                    let mut gid = [0u8; 16];
                    gid[..4].copy_from_slice(&arg.to_le_bytes());
                    let _ =
                        checked(pd.create_ah(&AhAttr::roce(Gid::from(gid), (arg >> 8) as u8, 1)));
                    // As an EFA program makes it: the destination GID on port 1.
                    let efa_attr = AhAttr {
                        grh: GlobalRoute {
                            dgid: Gid::from(gid),
                            ..GlobalRoute::default()
                        },
                        is_global: true,
                        port_num: 1,
                        ..AhAttr::default()
                    };
                    let _ = checked(pd.create_ah(&efa_attr));
                }
            }
            22 => {
                let _ = checked(self.ctx.efadv_query_device());
                let efa = EfaCqInitAttr::default();
                let attr = uverbs::CqInitAttr {
                    cqe: small(arg).max(1),
                    ..uverbs::CqInitAttr::default()
                };
                if let Some(cq) = checked(self.ctx.efadv_create_cq(&attr, &efa)) {
                    self.cqs.push(cq);
                }
            }
            _ => {
                // Drop something: destroy paths decode responses too, and order matters.
                match arg % 6 {
                    0 => drop(self.qps.pop()),
                    1 => drop(self.cqs.pop()),
                    2 => drop(self.srqs.pop()),
                    3 => drop(self.mrs.pop()),
                    4 => drop(self.pds.pop()),
                    _ => drop(self.chans.pop()),
                }
            }
        }
    }

    fn create_qp(&mut self, arg: u32) {
        let n = self.cqs.len();
        if n == 0 || self.pds.is_empty() {
            return;
        }
        let pd = &self.pds[arg as usize % self.pds.len()];
        let cq = &self.cqs[(arg >> 4) as usize % n];
        if arg & 0x100 != 0 {
            let qp_type = if arg & 0x200 != 0 {
                QpType::Srd
            } else {
                QpType::Ud
            };
            let cap = QpCap {
                max_send_wr: (arg >> 10) % 64,
                max_recv_wr: (arg >> 16) % 64,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: (arg >> 22) % 64,
            };
            let mut attr = QpInitAttr::new(qp_type, cq, cq, cap);
            attr.sq_sig_all = true;
            attr.send_ops_flags = uverbs::SendOpsFlags::all();
            if let Some(qp) = checked(pd.efadv_create_qp_ex(&attr, &EfaQpInitAttr::default())) {
                drop(qp);
            }
            return;
        }
        let types = [QpType::Rc, QpType::Uc, QpType::Ud];
        let mut init = QpInitAttr::new(
            types[(arg >> 10) as usize % 3],
            cq,
            cq,
            QpCap {
                max_send_wr: (arg >> 12) % 64,
                max_recv_wr: (arg >> 18) % 64,
                max_send_sge: 1 + (arg >> 24) % 4,
                max_recv_sge: 1,
                max_inline_data: (arg >> 26) * 8,
            },
        );
        let srq = if arg & 0x200 != 0 {
            self.srqs.first()
        } else {
            None
        };
        init.srq = srq;
        if let Some(qp) = checked(pd.create_qp(&init)) {
            let _ = (qp.qp_num(), qp.cap(), qp.state());
            self.qps.push(qp);
        }
    }
}
