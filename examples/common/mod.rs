//! Set-up shared by the examples: open the soft-RoCE device, walk queue pairs through
//! RESET → INIT → RTR → RTS, and wait for completions with a deadline.
//!
//! Everything here is plain uverbs API; an application would do the same with addresses it
//! exchanged over TCP instead of reading them from the other QP in the same process.
#![allow(dead_code)] // each example uses a different part of this module

use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, AhAttr, Context, Cq, Driver, Gid, GidQuery, Mtu, Qp, QpAttr, QpAttrMask, QpState,
    QpType, Wc, WcStatus,
};

/// What the examples return: any error, printed by [`exit`].
pub type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// How long any wait in the examples may take before it counts as a failure.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The Q_Key the UD examples use on both sides.
pub const QKEY: u32 = 0x1111_2222;

/// Turns an example's result into its exit status (0 on success), printing the error.
pub fn exit(name: &str, r: Result<()>) -> std::process::ExitCode {
    match r {
        Ok(()) => {
            println!("{name}: OK");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: FAILED: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Opens the first soft-RoCE (rxe) device (`ibv_get_device_list` + `ibv_open_device`).
pub fn open_rxe() -> Result<Context> {
    let devices = uverbs::devices()?;
    let dev = devices
        .iter()
        .find(|d| *d.driver() == Driver::Rxe)
        .ok_or_else(|| {
            let names: Vec<_> = devices.iter().map(|d| d.name().to_string()).collect();
            format!(
                "no soft-RoCE (rxe) device found (devices: {names:?}); \
                 run the examples in the VM: cargo xtask vm -- ..."
            )
        })?;
    let ctx = Context::open(dev)?;
    println!("opened {} ({})", dev.name(), dev.driver());
    Ok(ctx)
}

/// RESET → INIT: bind the QP to port 1 and say what remote peers may do to our memory.
pub fn to_init(qp: &mut Qp, access: AccessFlags) -> Result<()> {
    let mut attr = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        ..QpAttr::default()
    };
    let mut mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
    if qp.qp_type() == QpType::Ud {
        attr.qkey = QKEY;
        mask |= QpAttrMask::QKEY;
    } else {
        attr.qp_access_flags = access;
        mask |= QpAttrMask::ACCESS_FLAGS;
    }
    qp.modify(&attr, mask)?;
    Ok(())
}

/// INIT → RTR ("ready to receive"). A connected QP learns its peer here: the peer's QP number,
/// its GID (the path), and the packet sequence number it will start from.
pub fn to_rtr(qp: &mut Qp, remote_qpn: u32, gid_index: u8, remote_gid: Gid) -> Result<()> {
    let mut attr = QpAttr {
        qp_state: QpState::Rtr,
        ..QpAttr::default()
    };
    let mut mask = QpAttrMask::STATE;
    if qp.qp_type() != QpType::Ud {
        attr.path_mtu = Mtu::Mtu1024;
        attr.dest_qp_num = remote_qpn;
        attr.rq_psn = 0;
        attr.ah_attr = AhAttr::roce(remote_gid, gid_index, 1);
        attr.max_dest_rd_atomic = 1;
        attr.min_rnr_timer = 1;
        mask |= QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER;
    }
    qp.modify(&attr, mask)?;
    Ok(())
}

/// RTR → RTS ("ready to send"): the send side's sequence number and retry policy.
pub fn to_rts(qp: &mut Qp) -> Result<()> {
    to_rts_retrying(qp, 14, 7)
}

/// [`to_rts`] with the RC retry policy given: each try waits 4.096 µs × 2^`timeout` for an
/// acknowledgement, and a send fails after `retry_cnt` retries (rxe treats 7 as unlimited).
pub fn to_rts_retrying(qp: &mut Qp, timeout: u8, retry_cnt: u8) -> Result<()> {
    let mut attr = QpAttr {
        qp_state: QpState::Rts,
        sq_psn: 0,
        ..QpAttr::default()
    };
    let mut mask = QpAttrMask::STATE | QpAttrMask::SQ_PSN;
    if qp.qp_type() == QpType::Rc {
        attr.timeout = timeout;
        attr.retry_cnt = retry_cnt;
        attr.rnr_retry = 7; // 7 = retry forever while the receiver has no buffer posted
        attr.max_rd_atomic = 1;
        mask |= QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::MAX_QP_RD_ATOMIC;
    }
    qp.modify(&attr, mask)?;
    Ok(())
}

/// Connects two RC (or UC) QPs of the same device to each other and moves both to RTS.
pub fn connect_pair(ctx: &Context, a: &mut Qp, b: &mut Qp, access: AccessFlags) -> Result<()> {
    // The device's GID for port 1 (a RoCE v2 one whose address is ready, IPv4 first): both
    // QPs' path, since both live here.
    let local = ctx.find_gid(1, &GidQuery::Any)?;
    let (gid_index, gid) = (local.gid_index as u8, local.gid);
    to_init(a, access)?;
    to_init(b, access)?;
    let (an, bn) = (a.qp_num(), b.qp_num());
    to_rtr(a, bn, gid_index, gid)?;
    to_rtr(b, an, gid_index, gid)?;
    to_rts(a)?;
    to_rts(b)?;
    Ok(())
}

/// Polls `cq` until `n` completions arrived, each of them successful, or [`DEADLINE`] passed.
/// (Busy polling is the lowest-latency way to wait; `comp_channel.rs` shows the sleeping one.)
pub fn wait_completions(cq: &mut Cq, n: usize) -> Result<Vec<Wc>> {
    let start = Instant::now();
    let mut out = Vec::with_capacity(n);
    let mut buf = [Wc::default(); 16];
    while out.len() < n {
        let want = (n - out.len()).min(buf.len());
        let k = cq.poll(&mut buf[..want])?;
        for wc in &buf[..k] {
            check_success(wc)?;
        }
        out.extend_from_slice(&buf[..k]);
        if k == 0 {
            if start.elapsed() > DEADLINE {
                return Err(format!(
                    "only {} of {n} completions arrived within {DEADLINE:?}",
                    out.len()
                )
                .into());
            }
            std::thread::yield_now();
        }
    }
    Ok(out)
}

/// An error naming the work request if its completion is not a success.
pub fn check_success(wc: &Wc) -> Result<()> {
    if wc.status != WcStatus::SUCCESS {
        return Err(format!(
            "work request {} completed with status {:?} (vendor error {:#x})",
            wc.wr_id, wc.status, wc.vendor_err
        )
        .into());
    }
    Ok(())
}

/// Reads `len` bytes at `offset` of a memory region.
pub fn read_mr(mr: &uverbs::Mr, offset: usize, len: usize) -> Result<Vec<u8>> {
    let mut v = vec![0u8; len];
    mr.read(offset, &mut v)?;
    Ok(v)
}
