//! One UD program for every provider: the same code sends datagrams on soft-RoCE (rxe) and on
//! EFA.
//!
//! Nothing here names a provider. Both sides open a device, allocate a PD, create a CQ and a
//! UD QP (`ibv_create_qp`), bring it to RTS; the receiver posts its buffers; the sender
//! creates an address handle from the receiver's GID (`ibv_create_ah`) and sends `MESSAGES`
//! datagrams, each naming the AH, the receiver's QP number and the Q_Key; both poll their CQ.
//! A receive buffer has room for a 40-byte Global Route Header first: a completion with
//! `IBV_WC_GRH` says the provider wrote one there (rxe does), and the payload follows it.
//!
//! On an rxe device (e.g. in the project's soft-RoCE VM) both QPs live on the one device:
//!
//! ```sh
//! cargo build --release --target x86_64-unknown-linux-musl --example ud_any
//! cargo xtask vm --test-exe target/x86_64-unknown-linux-musl/release/examples/ud_any -- /tests/ud_any
//! ```
//!
//! Without an RDMA device, `cargo run --example ud_any -- model` runs the same [`exchange`]
//! between two devices of the EFA device model (`uverbs-efa-model`), which is what
//! `tests/efa_verbs.rs::ud_any_example_runs_on_the_efa_model` does.

mod common;

use common::{to_init, to_rts, Result, DEADLINE, QKEY};
use uverbs::{
    AccessFlags, AhAttr, Context, Cq, GidQuery, GlobalRoute, Mr, Qp, QpCap, QpInitAttr, QpType,
    RecvWr, SendWr, Wc, WcFlags, WcStatus,
};

/// The Global Route Header room at the start of every receive buffer.
const GRH: usize = 40;
/// One receive buffer: the GRH room and up to 88 bytes of payload.
const SLOT: usize = 128;
/// Datagrams sent.
pub const MESSAGES: usize = 5;

fn main() -> std::process::ExitCode {
    if std::env::args().nth(1).as_deref() == Some("model") {
        return common::exit("ud_any (EFA model)", run_on_model());
    }
    common::exit("ud_any", run())
}

/// On the first rxe device: both QPs on it.
pub fn run() -> Result<()> {
    let ctx = common::open_rxe()?;
    exchange(&ctx, &ctx, &mut || {})
}

/// On two devices of the EFA device model, the model's fabric driven between polls.
pub fn run_on_model() -> Result<()> {
    let fab = uverbs_efa_model::EfaFabric::new(7);
    let cfg = uverbs_efa_model::ModelConfig::default();
    let (a, b) = (fab.add_device(cfg), fab.add_device(cfg));
    let (ca, cb) = (a.open()?, b.open()?);
    exchange(&ca, &cb, &mut || {
        fab.process();
    })
}

/// The receiver's address as a sender's AH needs it: the GID `find_gid` picks on the
/// receiver's port 1 (on rxe a RoCE v2 GID whose address is ready, IPv4 first; on EFA index 0),
/// with the index of the sender's own pick as the source.
fn ah_attr(sender: &Context, receiver: &Context) -> Result<AhAttr> {
    let s = sender.find_gid(1, &GidQuery::Any)?;
    let r = receiver.find_gid(1, &GidQuery::Any)?;
    Ok(AhAttr {
        grh: GlobalRoute {
            dgid: r.gid,
            sgid_index: s.gid_index as u8,
            hop_limit: 1,
            ..GlobalRoute::default()
        },
        is_global: true,
        port_num: 1,
        ..AhAttr::default()
    })
}

/// One side: its CQ, UD QP and buffer.
struct Side {
    qp: Qp,
    cq: Cq,
    mr: Mr,
}

fn side(ctx: &Context) -> Result<(uverbs::Pd, Side)> {
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16, None, 0)?;
    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut qp = pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq, &cq, cap))?;
    to_init(&mut qp, AccessFlags::empty())?;
    common::to_rtr(&mut qp, 0, 0, Default::default())?;
    to_rts(&mut qp)?;
    let mr = pd.reg_mr(MESSAGES * SLOT, AccessFlags::LOCAL_WRITE)?;
    Ok((pd, Side { qp, cq, mr }))
}

/// Polls `cq` for `n` completions, calling `drive` between empty polls.
fn wait(cq: &mut Cq, n: usize, drive: &mut dyn FnMut()) -> Result<Vec<Wc>> {
    let start = std::time::Instant::now();
    let mut out = Vec::with_capacity(n);
    let mut buf = [Wc::default(); 8];
    while out.len() < n {
        let k = cq.poll(&mut buf)?;
        if k == 0 {
            if start.elapsed() > DEADLINE {
                return Err(format!("{} of {n} completions within {DEADLINE:?}", out.len()).into());
            }
            drive();
            continue;
        }
        for w in &buf[..k] {
            if w.status != WcStatus::SUCCESS {
                return Err(format!("completion failed: {w:?}").into());
            }
        }
        out.extend_from_slice(&buf[..k]);
    }
    Ok(out)
}

/// Sends `MESSAGES` datagrams from a QP on `a` to a QP on `b` (the same device is fine) and
/// checks every byte that arrives; `drive` runs between empty polls (a device model's fabric,
/// or nothing on a real device).
pub fn exchange(a: &Context, b: &Context, drive: &mut dyn FnMut()) -> Result<()> {
    let (pd_a, mut tx) = side(a)?;
    let (_pd_b, mut rx) = side(b)?;
    for i in 0..MESSAGES {
        let sge = [rx.mr.sge(i * SLOT, SLOT as u32)?];
        rx.qp.post_recv(&[RecvWr::new(i as u64, &sge)])?;
    }
    let ah = pd_a.create_ah(&ah_attr(a, b)?)?;
    for i in 0..MESSAGES {
        let msg = format!("datagram {i} from qp {}", tx.qp.qp_num());
        tx.mr.write(i * SLOT, msg.as_bytes())?;
        let sge = [tx.mr.sge(i * SLOT, msg.len() as u32)?];
        let wr = SendWr::send(100 + i as u64)
            .sge(&sge)
            .signaled()
            .ud(&ah, rx.qp.qp_num(), QKEY);
        tx.qp.post_send(&[wr])?;
    }
    let sent = wait(&mut tx.cq, MESSAGES, drive)?;
    let got = wait(&mut rx.cq, MESSAGES, drive)?;
    let mut ids: Vec<u64> = sent.iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    if ids != (100..100 + MESSAGES as u64).collect::<Vec<_>>() {
        return Err(format!("send completions {ids:?}").into());
    }
    for w in &got {
        let i = w.wr_id as usize;
        let skip = if w.wc_flags.contains(WcFlags::GRH) {
            GRH
        } else {
            0
        };
        let len = (w.byte_len as usize)
            .checked_sub(skip)
            .ok_or("a receive shorter than its GRH")?;
        let mut buf = vec![0u8; len];
        rx.mr.read(i * SLOT + skip, &mut buf)?;
        let want = format!("datagram {i} from qp {}", tx.qp.qp_num());
        if buf != want.as_bytes() {
            return Err(format!(
                "slot {i}: got {:?}, want {want:?}",
                String::from_utf8_lossy(&buf)
            )
            .into());
        }
        if w.src_qp != tx.qp.qp_num() {
            return Err(format!("slot {i}: src_qp {} is not the sender", w.src_qp).into());
        }
    }
    Ok(())
}
