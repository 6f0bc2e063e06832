//! Measuring equipment, not product (feature `standin`): the stand-in kernels behind the C
//! ABI, so `xtask/bench-c/count.c` (built with `-DUVERBS_CAPI`) counts uverbs' instructions
//! through `libibverbs.so.1` on the same stand-ins `benches/ring_counts.rs` uses, and
//! `cargo xtask bench --host` puts them beside rdma-core 44's.
//!
//! With `UVERBS_CAPI_STANDIN=rxe` or `=efa` set, `ibv_get_device_list` lists exactly one
//! device and nothing else:
//! - `rxe`: the stand-in rxe kernel of `testing/rxe-standin` (one `rxe0`);
//! - `efa`: device 0 of a fabric of two EFA model devices (`testing/efa-model`, seed 1, no
//!   doorbell trap: as `benches/common.rs` sets up its pair). Device 1 is the peer, which the
//!   program reaches only through [`uverbs_standin_efa_peer`].
//!
//! No background thread (callgrind counts every thread): the device's part happens only when
//! the program calls [`uverbs_standin_complete`], outside its measured loop. The hooks are
//! exported by `libibverbs.so.1` under the version node `UVERBS_PRIVATE_STANDIN_1`, which
//! `cargo xtask capi --features standin` appends to the version script (and no other build).
//!
//! Nothing here is on the data path: the stand-in state is made once, under a `OnceLock`, and
//! the peer's objects live until the process ends.

use core::ffi::c_int;
use core::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use uverbs::{
    AccessFlags, Cq, CqInitAttr, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr, EfaWcFlags, Mr, Pd, Qp,
    QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendOpsFlags,
};
use uverbs_efa_model::{EfaDevice, EfaFabric, ModelConfig};
use uverbs_rxe_standin::RxeStandin;

use crate::util::guard;

/// The one stand-in `UVERBS_CAPI_STANDIN` names.
enum Standin {
    Rxe {
        kernel: RxeStandin,
        /// The device the kernel's contexts report (listed, and matched on open).
        dev: uverbs::Device,
    },
    Efa {
        fab: EfaFabric,
        /// Device 0, which the program opens, and what its contexts report.
        local: EfaDevice,
        dev: uverbs::Device,
        /// Device 1, the peer.
        peer: EfaDevice,
    },
}

static STANDIN: OnceLock<Option<Standin>> = OnceLock::new();

fn standin() -> Option<&'static Standin> {
    STANDIN
        .get_or_init(|| {
            let which = std::env::var("UVERBS_CAPI_STANDIN").ok()?;
            let made = match which.as_str() {
                "rxe" => RxeStandin::new()
                    .map_err(|e| e.to_string())
                    .and_then(|kernel| {
                        let dev = kernel.open().map_err(|e| e.to_string())?.device().clone();
                        Ok(Standin::Rxe { kernel, dev })
                    }),
                "efa" => {
                    // benches/common.rs: seed 1, no doorbell trap (its signal handlers' work
                    // would be counted, and valgrind cannot run it; the model reads the
                    // doorbell word in `process`).
                    let fab = EfaFabric::new(1);
                    fab.set_doorbell_trap(false);
                    let local = fab.add_device(ModelConfig::default());
                    let peer = fab.add_device(ModelConfig::default());
                    local
                        .open()
                        .map(|c| c.device().clone())
                        .map_err(|e| e.to_string())
                        .map(|dev| Standin::Efa {
                            fab,
                            local,
                            dev,
                            peer,
                        })
                }
                other => Err(format!("unknown stand-in `{other}` (rxe or efa)")),
            };
            match made {
                Ok(s) => Some(s),
                Err(e) => {
                    eprintln!("uverbs: UVERBS_CAPI_STANDIN={which}: {e}");
                    None
                }
            }
        })
        .as_ref()
}

/// The one stand-in device when `UVERBS_CAPI_STANDIN` names one (then only it is listed).
pub fn devices() -> Option<Vec<uverbs::Device>> {
    match standin()? {
        Standin::Rxe { dev, .. } | Standin::Efa { dev, .. } => Some(vec![dev.clone()]),
    }
}

/// A context on `dev` if it is the stand-in device (None for any other device).
pub fn open(dev: &uverbs::Device) -> Option<uverbs::Result<uverbs::Context>> {
    let s = STANDIN.get()?.as_ref()?;
    match s {
        Standin::Rxe { kernel, dev: d } if d.uverbs_name() == dev.uverbs_name() => {
            Some(kernel.open())
        }
        Standin::Efa { local, dev: d, .. } if d.uverbs_name() == dev.uverbs_name() => {
            Some(local.open())
        }
        _ => None,
    }
}

/// The device's part, outside the measured loop: rxe, the kernel consumes every send WQE of
/// QP `qp_num` posted so far and writes their CQEs (`RxeStandin::complete_sends`); EFA, the
/// fabric moves all posted traffic and writes its completions (`EfaFabric::process`, which
/// ignores `qp_num`). Returns the number of WQEs consumed (rxe) or moved (EFA), -1 on error
/// (said on standard error) or without a stand-in.
#[no_mangle]
pub extern "C" fn uverbs_standin_complete(qp_num: u32) -> c_int {
    guard("uverbs_standin_complete", -1, || match STANDIN.get() {
        Some(Some(Standin::Rxe { kernel, .. })) => match kernel.complete_sends(qp_num) {
            Ok(n) => n as c_int,
            Err(e) => {
                eprintln!("uverbs_standin_complete: {e}");
                -1
            }
        },
        Some(Some(Standin::Efa { fab, .. })) => {
            let n = fab.process();
            for v in fab.take_violations() {
                eprintln!("uverbs_standin_complete: EFA model violation: {v}");
            }
            n as c_int
        }
        _ => -1,
    })
}

/// The EFA peer's objects, made once, never freed (fields in drop order, were they dropped).
struct Peer {
    qp: Qp,
    _scq: Cq,
    _rcq: Cq,
    _mr: Mr,
    _pd: Pd,
    _ctx: uverbs::Context,
}

static PEER: AtomicPtr<Peer> = AtomicPtr::new(ptr::null_mut());

/// As `benches/common.rs` makes each side: CQs of `depth` (`efadv_create_cq`, no wc_flags),
/// an SRD QP `depth` deep (one SGE each way, `sq_sig_all`) brought to RTS with `qkey`, a
/// 4096-byte MR; then `recvs` receives of 64 bytes posted (in lists of 32 and a rest).
fn make_peer(dev: &EfaDevice, qkey: u32, depth: u32, recvs: u32) -> uverbs::Result<Peer> {
    let ctx = dev.open()?;
    let pd = ctx.alloc_pd()?;
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
    };
    let (scq, rcq) = (cq()?, cq()?);
    let mut qp = pd.efadv_create_qp_ex(
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
    )?;
    // tests/common/efa.rs's to_rts: INIT with the Q_Key, P_Key index 0, port 1; RTR; RTS.
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
    )?;
    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
    let sge = [mr.sge(0, 64)?];
    let wr = RecvWr {
        wr_id: 2,
        sg_list: &sge,
    };
    let list = [wr; 32];
    let mut left = recvs as usize;
    while left > 0 {
        let k = left.min(list.len());
        qp.post_recv(&list[..k]).map_err(|e| e.error)?;
        left -= k;
    }
    Ok(Peer {
        qp,
        _scq: scq,
        _rcq: rcq,
        _mr: mr,
        _pd: pd,
        _ctx: ctx,
    })
}

/// The EFA peer for the program's sends (`UVERBS_CAPI_STANDIN=efa` only): on its first call,
/// an SRD QP on device 1 as `benches/common.rs` makes its side `b` (CQs and QP `depth` deep,
/// Q_Key `qkey`, RTS) with `recvs` receives posted; every call writes device 1's GID (16
/// bytes, for the program's `ibv_create_ah`) to `gid` and the peer QP's number to `qpn`.
/// Returns 0, or -1 (said on standard error).
///
/// # Safety
/// `gid` points to 16 writable bytes, `qpn` to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn uverbs_standin_efa_peer(
    qkey: u32,
    depth: u32,
    recvs: u32,
    gid: *mut u8,
    qpn: *mut u32,
) -> c_int {
    guard("uverbs_standin_efa_peer", -1, || {
        let Some(Some(Standin::Efa { peer, .. })) = STANDIN.get() else {
            eprintln!(
                "uverbs_standin_efa_peer: UVERBS_CAPI_STANDIN is not efa (or no device was listed)"
            );
            return -1;
        };
        if gid.is_null() || qpn.is_null() {
            return -1;
        }
        let mut p = PEER.load(Ordering::Acquire);
        if p.is_null() {
            match make_peer(peer, qkey, depth, recvs) {
                Ok(made) => {
                    p = Box::into_raw(Box::new(made));
                    PEER.store(p, Ordering::Release);
                }
                Err(e) => {
                    eprintln!("uverbs_standin_efa_peer: {e}");
                    return -1;
                }
            }
        }
        // SAFETY: `p` is the leaked, never freed Peer stored above (made on the program's
        // set-up thread; the hooks are called from one thread, as count.c does).
        let n = unsafe { &*p }.qp.qp_num();
        // SAFETY: the caller passes 16 writable bytes at `gid` and a writable u32 at `qpn`.
        unsafe {
            ptr::copy_nonoverlapping(peer.gid().as_ptr(), gid, 16);
            *qpn = n;
        }
        0
    })
}
