//! SRD on EFA: reliable, unordered datagrams between two hosts, with the efadv extras.
//!
//! Each side opens the EFA device, creates an EFA CQ (`efadv_create_cq`, with source GIDs when
//! the device can) and an SRD QP (`efadv_create_qp_ex`), brings it to RTS, and tells the other
//! side its GID and QP number over TCP. The client sends `MESSAGES` messages; the server
//! receives them (in any order: SRD does not keep it) and checks every byte, then answers with
//! one message so the client knows all arrived. Every SRD send must be signaled; a send that
//! finds no receive posted fails with "receiver not ready", so the server posts all its
//! receives before it tells the client its address.
//!
//! On two EFA instances (SRD traffic to the same node is dropped by EFA):
//!
//! ```sh
//! cargo run --release --example efa_srd -- server 18515          # on host A
//! cargo run --release --example efa_srd -- client <host A> 18515 # on host B
//! ```
//!
//! Without EFA hardware, `cargo run --example efa_srd -- model` runs both sides in this process
//! against the strict EFA device model (`uverbs-efa-model`), which is what the test
//! `tests/efa_verbs.rs::efa_srd_example_runs_against_the_model` does.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, Ah, AhAttr, Context, Cq, CqInitAttr, Driver, EfaCqInitAttr, EfaDeviceCaps,
    EfaQpFlags, EfaQpInitAttr, EfaWc, EfaWcFlags, Gid, GidQuery, GlobalRoute, Mr, Pd, Qp, QpAttr,
    QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendOpsFlags, SendWr, Sge, WcStatus,
};

type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// Messages the client sends.
pub const MESSAGES: usize = 16;
/// Bytes per message (SRD messages are at most the MTU).
pub const MSG: usize = 256;
const QKEY: u32 = 0x1111_2222;

/// What one side tells the other: its GID and QP number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addr {
    /// Port 1, GID index 0.
    pub gid: [u8; 16],
    /// The SRD QP's number.
    pub qpn: u32,
}

impl Addr {
    fn to_bytes(self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[..16].copy_from_slice(&self.gid);
        b[16..].copy_from_slice(&self.qpn.to_be_bytes());
        b
    }
    fn from_bytes(b: &[u8; 20]) -> Addr {
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[..16]);
        Addr {
            gid,
            qpn: u32::from_be_bytes([b[16], b[17], b[18], b[19]]),
        }
    }
}

/// One side: PD, CQ, SRD QP and a registered buffer of `MESSAGES` slots.
pub struct Endpoint {
    // Field order is drop order: QP before its CQ, MR and PD.
    qp: Qp,
    cq: Cq,
    mr: Mr,
    pd: Pd,
    ctx: Context,
}

impl Endpoint {
    /// Creates the resources on `ctx` and moves the QP to RTS.
    pub fn new(ctx: Context) -> Result<Endpoint> {
        let attr = ctx.efadv_query_device()?;
        println!(
            "efa: max_sq_wr {} max_rq_wr {} inline {} caps {:?}",
            attr.max_sq_wr, attr.max_rq_wr, attr.inline_buf_size, attr.device_caps
        );
        let wc_flags = if attr.device_caps.contains(EfaDeviceCaps::CQ_WITH_SGID) {
            EfaWcFlags::WITH_SGID
        } else {
            EfaWcFlags::empty()
        };
        let cq = ctx.efadv_create_cq(
            &CqInitAttr {
                cqe: 2 * MESSAGES as u32,
                ..Default::default()
            },
            &EfaCqInitAttr {
                wc_flags,
                ..Default::default()
            },
        )?;
        let pd = ctx.alloc_pd()?;
        let mut qp = pd.efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SendOpsFlags::SEND,
                ..QpInitAttr::new(
                    QpType::Srd,
                    &cq,
                    &cq,
                    QpCap {
                        max_send_wr: MESSAGES as u32,
                        max_recv_wr: MESSAGES as u32,
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
        // RESET -> INIT (Q_Key, P_Key index, port) -> RTR -> RTS (send PSN), as libfabric does.
        let attr = QpAttr {
            qp_state: QpState::Init,
            qkey: QKEY,
            pkey_index: 0,
            port_num: 1,
            ..Default::default()
        };
        qp.modify(
            &attr,
            QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT,
        )?;
        for (qp_state, mask) in [
            (QpState::Rtr, QpAttrMask::STATE),
            (QpState::Rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN),
        ] {
            let attr = QpAttr {
                qp_state,
                ..Default::default()
            };
            qp.modify(&attr, mask)?;
        }
        let mr = pd.reg_mr(MESSAGES * MSG, AccessFlags::LOCAL_WRITE)?;
        Ok(Endpoint {
            qp,
            cq,
            mr,
            pd,
            ctx,
        })
    }

    /// This side's address, given the GID of its port.
    pub fn addr(&self, gid: [u8; 16]) -> Addr {
        Addr {
            gid,
            qpn: self.qp.qp_num(),
        }
    }

    /// The GID of port 1 (`find_gid`: on EFA, index 0, what EFA AHs are made from).
    pub fn local_gid(&self) -> Result<[u8; 16]> {
        Ok(self.ctx.find_gid(1, &GidQuery::Any)?.gid.raw)
    }

    fn slot(&self, i: usize) -> Result<Sge> {
        Ok(self.mr.sge(i * MSG, MSG as u32)?)
    }

    /// Posts `n` receives, one per buffer slot (wr_id = slot).
    pub fn post_recvs(&mut self, n: usize) -> Result<()> {
        for i in 0..n {
            let s = [self.slot(i)?];
            self.qp.post_recv(&[RecvWr {
                wr_id: i as u64,
                sg_list: &s,
            }])?;
        }
        Ok(())
    }

    /// An address handle for the peer.
    pub fn ah(&self, peer: Addr) -> Result<Ah> {
        let attr = AhAttr {
            grh: GlobalRoute {
                dgid: Gid { raw: peer.gid },
                ..Default::default()
            },
            is_global: true,
            port_num: 1,
            ..Default::default()
        };
        Ok(self.pd.create_ah(&attr)?)
    }

    /// Sends `n` messages to `peer` through `ah`; message `i` is byte `i` repeated.
    pub fn send(&mut self, ah: &Ah, peer: Addr, n: usize) -> Result<()> {
        for i in 0..n {
            self.mr.fill(i * MSG, MSG, i as u8)?;
            let s = [self.slot(i)?];
            self.qp.post_send(&[SendWr::send(i as u64)
                .sge(&s)
                .signaled()
                .ud(ah, peer.qpn, QKEY)])?;
        }
        Ok(())
    }

    /// Polls until `sends` send and `recvs` receive completions arrived (all successful),
    /// calling `drive` between empty polls (the device model's `process`, or nothing).
    /// Checks each received message's bytes and returns the receive wr_ids in arrival order.
    pub fn wait(
        &mut self,
        sends: usize,
        recvs: usize,
        drive: &mut dyn FnMut(),
    ) -> Result<Vec<u64>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let (mut s, mut got) = (0, Vec::new());
        let mut wc = [EfaWc::default(); 8];
        while s < sends || got.len() < recvs {
            let n = self.cq.poll_efa(&mut wc)?;
            if n == 0 {
                if Instant::now() > deadline {
                    return Err(format!(
                        "timed out with {s}/{sends} sends and {}/{recvs} receives",
                        got.len()
                    )
                    .into());
                }
                drive();
                continue;
            }
            for w in &wc[..n] {
                if w.wc.status != WcStatus::SUCCESS {
                    return Err(format!("completion failed: {:?}", w.wc).into());
                }
                if w.wc.opcode.is_recv() {
                    let i = w.wc.wr_id as usize;
                    let mut b = vec![0u8; w.wc.byte_len as usize];
                    self.mr.read(i * MSG, &mut b)?;
                    // The sender wrote message k as byte k repeated: find k from the bytes.
                    let k = b.first().copied().unwrap_or(0);
                    if b.len() != MSG || b.iter().any(|&x| x != k) {
                        return Err(format!("message in slot {i} is corrupt").into());
                    }
                    got.push(u64::from(k));
                } else {
                    s += 1;
                }
            }
        }
        Ok(got)
    }
}

fn efa_context() -> Result<Context> {
    let devs = uverbs::devices()?;
    let dev = devs
        .iter()
        .find(|d| *d.driver() == Driver::Efa)
        .ok_or("no EFA device here (try `efa_srd model`)")?;
    Ok(Context::open(dev)?)
}

fn exchange(stream: &mut TcpStream, mine: Addr) -> Result<Addr> {
    stream.write_all(&mine.to_bytes())?;
    let mut b = [0u8; 20];
    stream.read_exact(&mut b)?;
    Ok(Addr::from_bytes(&b))
}

/// The server: posts its receives, exchanges addresses, receives `MESSAGES`, answers one.
pub fn server(port: u16) -> Result<()> {
    let mut ep = Endpoint::new(efa_context()?)?;
    ep.post_recvs(MESSAGES)?;
    let (mut stream, from) = TcpListener::bind(("0.0.0.0", port))?.accept()?;
    let peer = exchange(&mut stream, ep.addr(ep.local_gid()?))?;
    println!("server: peer {from} qpn {}", peer.qpn);
    let mut got = ep.wait(0, MESSAGES, &mut || {})?;
    let ah = ep.ah(peer)?;
    // Tell the client we are done (it has a receive posted for this).
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte)?;
    ep.send(&ah, peer, 1)?;
    ep.wait(1, 0, &mut || {})?;
    println!("server: received in order {got:?}");
    got.sort_unstable();
    if got != (0..MESSAGES as u64).collect::<Vec<_>>() {
        return Err("not every message arrived exactly once".into());
    }
    Ok(())
}

/// The client: exchanges addresses, sends `MESSAGES`, waits for the server's answer.
pub fn client(host: &str, port: u16) -> Result<()> {
    let mut ep = Endpoint::new(efa_context()?)?;
    ep.post_recvs(1)?;
    let mut stream = TcpStream::connect((host, port))?;
    let peer = exchange(&mut stream, ep.addr(ep.local_gid()?))?;
    let ah = ep.ah(peer)?;
    ep.send(&ah, peer, MESSAGES)?;
    ep.wait(MESSAGES, 0, &mut || {})?;
    stream.write_all(&[1])?;
    ep.wait(0, 1, &mut || {})?;
    println!("client: {MESSAGES} messages delivered");
    Ok(())
}

/// Both sides in one process on the EFA device model (`uverbs-efa-model`), which reorders
/// SRD deliveries on purpose. Returns the order the server saw.
pub fn model() -> Result<Vec<u64>> {
    let fab = uverbs_efa_model::EfaFabric::new(0xefa);
    let (da, db) = (
        fab.add_device(Default::default()),
        fab.add_device(Default::default()),
    );
    let mut srv = Endpoint::new(da.open()?)?;
    let mut cli = Endpoint::new(db.open()?)?;
    srv.post_recvs(MESSAGES)?;
    // A model device answers GID queries as an EFA device does: its address is at index 0.
    let sa = srv.addr(srv.local_gid()?);
    if sa.gid != da.gid() {
        return Err("the model's GID table does not hold the fabric's address".into());
    }
    let ah = cli.ah(sa)?;
    cli.send(&ah, sa, MESSAGES)?;
    let mut drive = || {
        fab.process();
    };
    cli.wait(MESSAGES, 0, &mut drive)?;
    let got = srv.wait(0, MESSAGES, &mut drive)?;
    let v = fab.violations();
    if !v.is_empty() {
        return Err(format!("device model violations: {v:?}").into());
    }
    Ok(got)
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port = |i: usize| args.get(i).and_then(|p| p.parse().ok()).unwrap_or(18515);
    let r = match args.first().map(String::as_str) {
        Some("server") => server(port(1)),
        Some("client") => match args.get(1) {
            Some(h) => client(h, port(2)),
            None => Err("usage: efa_srd client <host> [port]".into()),
        },
        Some("model") => model().map(|got| println!("model: received in order {got:?}")),
        _ => Err("usage: efa_srd server [port] | client <host> [port] | model".into()),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("efa_srd: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
