//! How a user tests their own EFA code with this crate: the example of its README, complete.
//!
//! `app` below stands for the code under test — a program's messaging layer. It knows nothing
//! of the model: it takes a [`Context`], as it does on an EC2 instance. The tests open that
//! context on model devices, call the code, let the devices run ([`EfaFabric::process`]) and
//! check what arrived, what the device saw, and that the code did nothing a real EFA device
//! would refuse ([`EfaFabric::assert_no_violations`]). CI runs them with `cargo test`.

use uverbs::{Context, WcStatus};
use uverbs_efa_model::{EfaDevice, EfaFabric, ModelConfig};

/// The code under test: SRD or UD endpoints that send messages to each other.
mod app {
    use uverbs::{
        AccessFlags, Ah, AhAttr, Context, Cq, EfaQpInitAttr, GlobalRoute, Mr, Pd, Qp, QpAttr,
        QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Wc,
    };

    pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

    pub const QKEY: u32 = 0x0bad_cafe;
    /// Bytes per message slot.
    pub const SLOT: usize = 256;
    /// Slots per endpoint (receive and send each).
    pub const SLOTS: usize = 16;

    /// One QP, its CQ and its message buffers (receive slots first, then send slots).
    pub struct Endpoint {
        pub qp: Qp,
        pub cq: Cq,
        pub mr: Mr,
        pub pd: Pd,
    }

    impl Endpoint {
        /// An SRD (`srd`) or UD QP in RTS.
        pub fn new(ctx: &Context, srd: bool) -> Result<Endpoint> {
            let pd = ctx.alloc_pd()?;
            let cq = ctx.create_cq(2 * SLOTS as u32, None, 0)?;
            let cap = QpCap {
                max_send_wr: SLOTS as u32,
                max_recv_wr: SLOTS as u32,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            };
            let mut qp = if srd {
                let init = QpInitAttr::new(QpType::Srd, &cq, &cq, cap);
                pd.efadv_create_qp_ex(&init, &EfaQpInitAttr::default())?
            } else {
                pd.create_qp(&QpInitAttr::new(QpType::Ud, &cq, &cq, cap))?
            };
            let init = QpAttr {
                qp_state: QpState::Init,
                qkey: QKEY,
                port_num: 1,
                ..Default::default()
            };
            let mask = QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::PKEY_INDEX;
            qp.modify(&init, mask | QpAttrMask::PORT)?;
            let rtr = QpAttr {
                qp_state: QpState::Rtr,
                ..Default::default()
            };
            qp.modify(&rtr, QpAttrMask::STATE)?;
            let rts = QpAttr {
                qp_state: QpState::Rts,
                ..Default::default()
            };
            qp.modify(&rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)?;
            let mr = pd.reg_mr(2 * SLOTS * SLOT, AccessFlags::LOCAL_WRITE)?;
            Ok(Endpoint { qp, cq, mr, pd })
        }

        /// Posts a receive into each of the `n` first slots.
        pub fn post_receives(&mut self, n: usize) -> Result<()> {
            for i in 0..n {
                let sge = [self.mr.sge(i * SLOT, SLOT as u32)?];
                self.qp.post_recv(&[RecvWr::new(i as u64, &sge)])?;
            }
            Ok(())
        }

        /// An address handle for the peer with this GID.
        pub fn ah_to(&self, gid: uverbs::Gid) -> Result<Ah> {
            let attr = AhAttr {
                grh: GlobalRoute {
                    dgid: gid,
                    ..Default::default()
                },
                is_global: true,
                port_num: 1,
                ..Default::default()
            };
            Ok(self.pd.create_ah(&attr)?)
        }

        /// Sends each message (wr_id = its index) to QP `qpn` behind `ah`, in one post.
        pub fn send_all(&mut self, ah: &Ah, qpn: u32, msgs: &[&[u8]]) -> Result<()> {
            let mut sges = Vec::with_capacity(msgs.len());
            for (i, m) in msgs.iter().enumerate() {
                let off = (SLOTS + i) * SLOT;
                self.mr.write(off, m)?;
                sges.push([self.mr.sge(off, m.len() as u32)?]);
            }
            let wrs: Vec<SendWr<'_>> = sges
                .iter()
                .enumerate()
                .map(|(i, s)| SendWr::send(i as u64).sge(s).signaled().ud(ah, qpn, QKEY))
                .collect();
            self.qp.post_send(&wrs)?;
            Ok(())
        }

        /// Polls until `n` completions are in (calling `drive` between empty polls).
        pub fn wait(&mut self, n: usize, mut drive: impl FnMut()) -> Result<Vec<Wc>> {
            let mut out = Vec::new();
            let mut wcs = [Wc::default(); 8];
            for _ in 0..1000 {
                let k = self.cq.poll(&mut wcs)?;
                out.extend_from_slice(&wcs[..k]);
                if out.len() >= n {
                    return Ok(out);
                }
                if k == 0 {
                    drive();
                }
            }
            Err(format!("{} of {n} completions", out.len()).into())
        }

        /// The message received into slot `i` (`len` bytes).
        pub fn received(&self, i: usize, len: usize) -> Result<Vec<u8>> {
            let mut b = vec![0; len];
            self.mr.read(i * SLOT, &mut b)?;
            Ok(b)
        }
    }
}

use app::Endpoint;

/// Two model devices on one fabric, and a context on each.
fn two_devices(fab: &EfaFabric, cfg: ModelConfig) -> [(EfaDevice, Context); 2] {
    [(); 2].map(|()| {
        let dev = fab
            .try_add_device(cfg)
            .expect("a config a real device reports");
        let ctx = dev.open().expect("open the model device");
        (dev, ctx)
    })
}

/// Runs the exchange: `tx` sends `msgs` to `rx`, which posted a receive per message.
/// Returns the receive completions in the order they arrived.
fn exchange(
    fab: &EfaFabric,
    tx: &mut Endpoint,
    rx: &mut Endpoint,
    rx_gid: uverbs::Gid,
    msgs: &[&[u8]],
) -> Vec<uverbs::Wc> {
    rx.post_receives(msgs.len()).unwrap();
    let ah = tx.ah_to(rx_gid).unwrap();
    tx.send_all(&ah, rx.qp.qp_num(), msgs).unwrap();
    let sent = tx
        .wait(msgs.len(), || {
            fab.process();
        })
        .unwrap();
    assert!(
        sent.iter().all(|w| w.status == WcStatus::SUCCESS),
        "{sent:?}"
    );
    rx.wait(msgs.len(), || {
        fab.process();
    })
    .unwrap()
}

const MSGS: [&[u8]; 6] = [b"zero", b"one", b"two", b"three", b"four", b"five"];

/// SRD is reliable but unordered: every message arrives once, intact, in some order — the
/// code must not depend on the order, and the model (reordering by default) makes sure.
#[test]
fn srd_every_message_arrives_once_in_any_order() {
    let fab = EfaFabric::new(3);
    let [(_, ca), (_, cb)] = two_devices(&fab, ModelConfig::default());
    let (mut a, mut b) = (
        Endpoint::new(&ca, true).unwrap(),
        Endpoint::new(&cb, true).unwrap(),
    );
    let got = exchange(&fab, &mut a, &mut b, cb.query_gid(1, 0).unwrap(), &MSGS);
    let mut seen = vec![false; MSGS.len()];
    let mut order = Vec::new();
    for w in &got {
        assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
        // The receive slot says where it landed, the content says which message it was.
        let body = b.received(w.wr_id as usize, w.byte_len as usize).unwrap();
        let m = MSGS
            .iter()
            .position(|m| *m == &body[..])
            .expect("a message that was sent");
        assert!(!seen[m], "message {m} arrived twice");
        seen[m] = true;
        order.push(m);
        assert_eq!(w.src_qp, a.qp.qp_num());
    }
    assert!(seen.iter().all(|s| *s));
    // This seed shuffles them, as SRD may (`set_reorder(false)` would keep the order).
    assert_ne!(order, [0, 1, 2, 3, 4, 5]);
    fab.assert_no_violations();
}

/// UD delivers in the order sent on the model (a real network may drop or reorder).
#[test]
fn ud_messages_arrive_in_order() {
    let fab = EfaFabric::new(4);
    let [(_, ca), (_, cb)] = two_devices(&fab, ModelConfig::default());
    let (mut a, mut b) = (
        Endpoint::new(&ca, false).unwrap(),
        Endpoint::new(&cb, false).unwrap(),
    );
    let got = exchange(&fab, &mut a, &mut b, cb.query_gid(1, 0).unwrap(), &MSGS);
    for (i, w) in got.iter().enumerate() {
        assert_eq!((w.wr_id, w.status), (i as u64, WcStatus::SUCCESS));
        assert_eq!(b.received(i, w.byte_len as usize).unwrap(), MSGS[i]);
    }
    fab.assert_no_violations();
}

/// An SRD send to a peer that posted no receive fails with RNR: the model lets a test reach
/// the error path that is hard to provoke on real hardware.
#[test]
fn srd_send_without_a_receive_completes_with_rnr() {
    let fab = EfaFabric::new(5);
    let [(_, ca), (_, cb)] = two_devices(&fab, ModelConfig::default());
    let (mut a, b) = (
        Endpoint::new(&ca, true).unwrap(),
        Endpoint::new(&cb, true).unwrap(),
    );
    let ah = a.ah_to(cb.query_gid(1, 0).unwrap()).unwrap();
    a.send_all(&ah, b.qp.qp_num(), &[b"nobody listens"])
        .unwrap();
    assert_eq!(fab.process(), 1);
    let w = a.wait(1, || {}).unwrap();
    assert_eq!(w[0].status, WcStatus::RNR_RETRY_EXC_ERR, "{w:?}");
    fab.assert_no_violations();
}

/// The device's limits are the test's to choose: with a `max_tx_batch` of 2 lines, the six
/// sends of one post must reach the device in several doorbells of at most 2 WQEs — the
/// model traps every doorbell store and would record a violation otherwise.
#[test]
fn a_small_max_tx_batch_is_honoured_and_every_doorbell_is_seen() {
    let fab = EfaFabric::new(6);
    let cfg = ModelConfig {
        max_tx_batch: 2,
        ..Default::default()
    };
    let [(da, ca), (_, cb)] = two_devices(&fab, cfg);
    let (mut a, mut b) = (
        Endpoint::new(&ca, true).unwrap(),
        Endpoint::new(&cb, true).unwrap(),
    );
    let got = exchange(&fab, &mut a, &mut b, cb.query_gid(1, 0).unwrap(), &MSGS);
    assert_eq!(got.len(), MSGS.len());
    fab.assert_no_violations();
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        // Each doorbell moved the producer index by at most 2.
        let dbs = fab.sq_doorbells(&da, a.qp.qp_num());
        assert_eq!(dbs.last().copied(), Some(MSGS.len() as u32), "{dbs:?}");
        assert!(
            dbs.windows(2).all(|w| w[1] - w[0] <= 2) && dbs[0] <= 2,
            "{dbs:?}"
        );
    }
}
