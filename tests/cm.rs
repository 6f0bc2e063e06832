//! rdma_cm (`uverbs::cm`) between two of our own ids on the VM's rxe0 (10.99.0.1): connect,
//! accept, reject, disconnect, the failures a peer or the network produces, and bad input.
//! Device tests: `#[ignore]` on the host, run in the VM (docs/testing.md).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::NEEDS_DEVICE;
use uverbs::cm::{CmEvent, CmId, CmOption, CmState, ConnParam, PortSpace};
use uverbs::{AccessFlags, Cq, Mr, QpInitAttr, RecvWr, SendWr, WcOpcode, WcStatus};

/// The VM's rxe0 address (docs/testing.md).
const IP: &str = "10.99.0.1";
const T: Duration = Duration::from_secs(5);

fn addr(port: u16) -> SocketAddr {
    format!("{IP}:{port}").parse().unwrap()
}

/// One side of a connection: the id (owning the QP), its CQ and a registered buffer.
struct End {
    id: CmId,
    cq: Cq,
    mr: Mr,
}

fn attach_qp(id: &mut CmId) -> (Cq, Mr) {
    let ctx = id.context().expect("the id has a device").clone();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, None, 0).unwrap();
    let mr = pd
        .reg_mr(
            4096,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
        )
        .unwrap();
    id.create_qp(
        &pd,
        &QpInitAttr::new(id.port_space().qp_type(), &cq, &cq, common::rc::qp_cap(8)),
    )
    .unwrap_or_else(|e| panic!("create_qp: {e}"));
    (cq, mr)
}

fn expect(id: &mut CmId, what: &str) -> CmEvent {
    id.get_cm_event(T)
        .unwrap_or_else(|e| panic!("waiting for {what}: {e}"))
}

/// A client id with a resolved route to `port`.
fn resolved_client(port: u16) -> CmId {
    let mut c = CmId::new(PortSpace::Tcp).unwrap();
    c.resolve_addr(None, &addr(port), T).unwrap();
    let ev = expect(&mut c, "AddrResolved");
    assert!(matches!(ev, CmEvent::AddrResolved), "got {ev}");
    c.resolve_route(T).unwrap();
    let ev = expect(&mut c, "RouteResolved");
    assert!(matches!(ev, CmEvent::RouteResolved), "got {ev}");
    c
}

fn listener(port: u16) -> CmId {
    let mut l = CmId::new(PortSpace::Tcp).unwrap();
    l.bind_addr(&addr(port)).unwrap();
    l.listen(8).unwrap();
    l
}

/// Connects a client to `listener` (port `port`) with private data each way; returns
/// (client, server) ends, both ESTABLISHED.
fn connect_pair(listener: &mut CmId, port: u16) -> (End, End) {
    let mut c = resolved_client(port);
    let (ccq, cmr) = attach_qp(&mut c);
    c.connect(&ConnParam {
        private_data: b"hello from the client",
        ..ConnParam::default()
    })
    .unwrap();
    let req = match expect(listener, "ConnectRequest") {
        CmEvent::ConnectRequest(r) => r,
        other => panic!("expected a connect request, got {other}"),
    };
    assert_eq!(&req.private_data[..21], b"hello from the client");
    let c_qpn = c.qp().unwrap().qp_num();
    assert_eq!(req.param.qp_num, c_qpn, "the request names the client's QP");
    let mut s = req.id;
    assert_eq!(s.state(), CmState::ConnectRequest);
    let (scq, smr) = attach_qp(&mut s);
    s.accept(&ConnParam {
        private_data: b"welcome",
        ..ConnParam::default()
    })
    .unwrap();
    match expect(&mut c, "client Established") {
        CmEvent::Established {
            private_data,
            param,
            ..
        } => {
            assert_eq!(&private_data[..7], b"welcome");
            assert_eq!(param.qp_num, s.qp().unwrap().qp_num());
        }
        other => panic!("client: expected Established, got {other}"),
    }
    let ev = expect(&mut s, "server Established");
    assert!(matches!(ev, CmEvent::Established { .. }), "server got {ev}");
    (
        End {
            id: c,
            cq: ccq,
            mr: cmr,
        },
        End {
            id: s,
            cq: scq,
            mr: smr,
        },
    )
}

fn poll_one(cq: &mut Cq) -> uverbs::Wc {
    common::rc::wait_completions::<4>(cq, 1, T)[0]
}

/// `from` SENDs `msg` to `to`, which has a receive posted; checks both completions and bytes.
fn send(from: &mut End, to: &mut End, msg: &[u8]) {
    let rsge = [to.mr.sge(0, 4096).unwrap()];
    to.id
        .qp_mut()
        .unwrap()
        .post_recv(&[RecvWr::new(7, &rsge)])
        .unwrap();
    from.mr.write(0, msg).unwrap();
    let sge = [from.mr.sge(0, msg.len() as u32).unwrap()];
    from.id
        .qp_mut()
        .unwrap()
        .post_send(&[SendWr::send(9).sge(&sge).signaled()])
        .unwrap();
    let wc = poll_one(&mut from.cq);
    assert_eq!((wc.status, wc.opcode), (WcStatus::SUCCESS, WcOpcode::SEND));
    let wc = poll_one(&mut to.cq);
    assert_eq!(wc.status, WcStatus::SUCCESS);
    assert_eq!(wc.byte_len as usize, msg.len());
    let mut got = vec![0u8; msg.len()];
    to.mr.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_rc_connect_send_both_ways_client_disconnects() {
    let _ = NEEDS_DEVICE;
    let mut l = listener(7301);
    let (mut c, mut s) = connect_pair(&mut l, 7301);
    send(&mut c, &mut s, b"client to server over rdma_cm");
    send(&mut s, &mut c, b"and back");
    c.id.disconnect().unwrap();
    let ev = expect(&mut s.id, "server Disconnected");
    assert!(matches!(ev, CmEvent::Disconnected), "server got {ev}");
    // The passive side answers with a disconnect of its own (the DREP), as rping does.
    s.id.disconnect().unwrap();
    let ev = expect(&mut c.id, "client Disconnected");
    assert!(matches!(ev, CmEvent::Disconnected), "client got {ev}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_server_disconnect_reaches_client() {
    let mut l = listener(7302);
    let (mut c, mut s) = connect_pair(&mut l, 7302);
    s.id.disconnect().unwrap();
    let ev = expect(&mut c.id, "client Disconnected");
    assert!(matches!(ev, CmEvent::Disconnected), "client got {ev}");
    c.id.disconnect().unwrap();
    let ev = expect(&mut s.id, "server Disconnected");
    assert!(matches!(ev, CmEvent::Disconnected), "server got {ev}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_reject_with_private_data_reaches_the_client() {
    let mut l = listener(7303);
    let mut c = resolved_client(7303);
    let _res = attach_qp(&mut c);
    c.connect(&ConnParam::default()).unwrap();
    let mut req = match expect(&mut l, "ConnectRequest") {
        CmEvent::ConnectRequest(r) => r,
        other => panic!("expected a connect request, got {other}"),
    };
    let why = b"go away: server full (code 42)";
    req.id.reject(why).unwrap();
    match expect(&mut c, "Rejected") {
        CmEvent::Rejected {
            status,
            private_data,
        } => {
            assert_eq!(status, 28, "IB_CM_REJ_CONSUMER_DEFINED");
            assert_eq!(&private_data[..why.len()], why);
        }
        other => panic!("expected Rejected, got {other}"),
    }
    // A rejected request cannot be accepted afterwards.
    let e = req.id.accept(&ConnParam::default()).unwrap_err();
    assert_eq!(e.op(), "rdma_accept");
    assert!(
        e.reason().contains("not a pending connection request"),
        "{e}"
    );
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_connect_to_a_port_nobody_listens_on_is_rejected_or_unreachable() {
    let mut c = resolved_client(7399);
    let _res = attach_qp(&mut c);
    c.connect(&ConnParam::default()).unwrap();
    let t0 = Instant::now();
    let ev = c
        .get_cm_event(Duration::from_secs(30))
        .expect("an answer within 30 s");
    assert!(
        matches!(ev, CmEvent::Rejected { .. } | CmEvent::Unreachable { .. }),
        "got {ev} after {:?}",
        t0.elapsed()
    );
    assert_eq!(c.state(), CmState::Failed);
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_resolving_an_unreachable_address_fails_within_the_timeout() {
    // A neighbour on rxe0's subnet that does not exist: ARP gets no answer.
    let mut c = CmId::new(PortSpace::Tcp).unwrap();
    let t0 = Instant::now();
    c.resolve_addr(
        None,
        &"10.99.0.77:7000".parse().unwrap(),
        Duration::from_millis(1500),
    )
    .unwrap();
    let ev = c.get_cm_event(Duration::from_secs(10)).expect("an answer");
    assert!(matches!(ev, CmEvent::AddrError { .. }), "got {ev}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    // An address with no route at all: refused at once or by an AddrError event.
    let mut d = CmId::new(PortSpace::Tcp).unwrap();
    match d.resolve_addr(
        None,
        &"192.0.2.1:7000".parse().unwrap(),
        Duration::from_millis(1500),
    ) {
        Err(e) => {
            assert_eq!(e.op(), "rdma_resolve_addr");
            assert!(e.errno().is_some(), "{e}");
        }
        Ok(()) => {
            let ev = d.get_cm_event(Duration::from_secs(10)).expect("an answer");
            assert!(matches!(ev, CmEvent::AddrError { .. }), "got {ev}");
        }
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_bad_input_is_a_clear_error() {
    // connect before the route is resolved
    let mut c = CmId::new(PortSpace::Tcp).unwrap();
    let e = c.connect(&ConnParam::default()).unwrap_err();
    assert_eq!(e.op(), "rdma_connect");
    assert!(e.object().starts_with("cm_id "), "{e}");
    assert!(e.reason().contains("route is not resolved"), "{e}");
    // resolve_route before the address
    let e = c.resolve_route(T).unwrap_err();
    assert!(e.reason().contains("address is not resolved"), "{e}");
    // accept / reject on an id that is not a connection request
    let e = c.accept(&ConnParam::default()).unwrap_err();
    assert_eq!(e.op(), "rdma_accept");
    assert!(
        e.reason().contains("not a pending connection request"),
        "{e}"
    );
    let e = c.reject(b"no").unwrap_err();
    assert_eq!(e.op(), "rdma_reject");
    // address families that do not match
    let e = c
        .resolve_addr(Some(&addr(0)), &"[::1]:7000".parse().unwrap(), T)
        .unwrap_err();
    assert!(e.reason().contains("different address families"), "{e}");
    // a port in use
    let mut a = CmId::new(PortSpace::Tcp).unwrap();
    a.bind_addr(&addr(7310)).unwrap();
    a.listen(1).unwrap();
    let mut b = CmId::new(PortSpace::Tcp).unwrap();
    let e = b.bind_addr(&addr(7310)).unwrap_err();
    assert_eq!(e.op(), "rdma_bind_addr");
    assert!(e.is(uverbs::Errno::ADDRINUSE), "{e}");
    assert!(e.to_string().contains("in use"), "{e}");
    // private data longer than a TCP connect carries (56 bytes)
    let mut c = resolved_client(7310);
    let _res = attach_qp(&mut c);
    let long = [7u8; 57];
    let e = c
        .connect(&ConnParam {
            private_data: &long,
            ..ConnParam::default()
        })
        .unwrap_err();
    assert_eq!(e.op(), "rdma_connect");
    assert!(e.reason().contains("at most 56"), "{e}");
    // a waiting call is bounded
    let t0 = Instant::now();
    let e = a.get_cm_event(Duration::from_millis(200)).unwrap_err();
    assert!(e.is(uverbs::Errno::TIMEDOUT), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(2));
    // options: REUSEADDR before bind, TOS, ACK_TIMEOUT
    let mut o = CmId::new(PortSpace::Tcp).unwrap();
    o.set_option(CmOption::ReuseAddr(true)).unwrap();
    o.set_option(CmOption::Tos(32)).unwrap();
    o.set_option(CmOption::AckTimeout(14)).unwrap();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_query_reports_addresses_device_and_route() {
    let mut l = listener(7304);
    let (c, s) = connect_pair(&mut l, 7304);
    let r = c.id.query().unwrap();
    assert_eq!(r.dst_addr, Some(addr(7304)));
    assert_eq!(r.src_addr.map(|a| a.ip()), Some(IP.parse().unwrap()));
    assert_eq!(r.port_num, 1);
    assert_eq!(r.node_guid, c.id.context().unwrap().device().node_guid());
    assert!(r.num_paths >= 1, "{r:?}");
    assert_eq!(&r.dgid.raw[12..], &[10, 99, 0, 1]);
    let q = s.id.query().unwrap();
    assert_eq!(q.src_addr, Some(addr(7304)));
    assert_eq!(q.dst_addr, r.src_addr);
}

/// The lines of `rdma resource show KIND` about this thread (`pid N`), so leftovers of ours
/// show up and nobody else's do.
fn rdma_res(kind: &str) -> Vec<String> {
    let out = std::process::Command::new("/usr/bin/rdma")
        .args(["resource", "show", kind])
        .output()
        .unwrap_or_else(|e| panic!("running rdma resource show {kind}: {e}"));
    assert!(out.status.success(), "rdma resource show {kind}: {out:?}");
    // The kernel records the creating task: the test thread's id, not the process id.
    let me = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| std::process::id().to_string());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            t.windows(2).any(|w| w[0] == "pid" && w[1] == me)
        })
        .map(|l| l.to_string())
        .collect()
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_connect_transfer_disconnect_cycles_leave_no_fds_ids_or_qps() {
    let cycles: usize = std::env::var("UVERBS_CM_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let mut l = listener(7305);
    // Warm up once (the device context opens on first use and stays while the listener's
    // device is in use by someone).
    {
        let (mut c, mut s) = connect_pair(&mut l, 7305);
        send(&mut c, &mut s, b"warm-up");
    }
    let fds0 = common::open_fds();
    let (ids0, qps0) = (rdma_res("cm_id"), rdma_res("qp"));
    assert!(
        ids0.iter().any(|l| l.contains("LISTEN")),
        "our listener is not in `rdma resource show cm_id`: {ids0:?}"
    );
    for i in 0..cycles {
        let (mut c, mut s) = connect_pair(&mut l, 7305);
        send(&mut c, &mut s, format!("cycle {i}").as_bytes());
        c.id.disconnect().unwrap();
        let ev = expect(&mut s.id, "server Disconnected");
        assert!(matches!(ev, CmEvent::Disconnected), "cycle {i}: {ev}");
        s.id.disconnect().unwrap();
        let ev = expect(&mut c.id, "client Disconnected");
        assert!(matches!(ev, CmEvent::Disconnected), "cycle {i}: {ev}");
    }
    assert_eq!(common::open_fds(), fds0, "fds after {cycles} cycles");
    assert_eq!(rdma_res("cm_id"), ids0, "rdma_cm ids after {cycles} cycles");
    assert_eq!(rdma_res("qp"), qps0, "QPs after {cycles} cycles");
    println!(
        "{cycles} cycles: {fds0} fds, {} cm_ids, {} qps before and after",
        ids0.len(),
        qps0.len()
    );
    assert_eq!(uverbs::drop_error_count(), 0);
}

/// The GID table index of `gid` on port 1 of `ctx`.
fn gid_index(ctx: &uverbs::Context, gid: &uverbs::Gid) -> u8 {
    let table = ctx.query_gid_table().unwrap();
    table
        .iter()
        .find(|e| e.port_num == 1 && e.gid == *gid)
        .unwrap_or_else(|| panic!("{gid:?} not in {table:?}"))
        .gid_index as u8
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_ud_connect_then_datagrams_both_ways() {
    const QKEY: u32 = uverbs::uapi::ucma::RDMA_UDP_QKEY;
    let mut l = CmId::new(PortSpace::Udp).unwrap();
    l.bind_addr(&addr(7320)).unwrap();
    l.listen(4).unwrap();
    let mut c = CmId::new(PortSpace::Udp).unwrap();
    c.resolve_addr(None, &addr(7320), T).unwrap();
    assert!(matches!(
        expect(&mut c, "AddrResolved"),
        CmEvent::AddrResolved
    ));
    c.resolve_route(T).unwrap();
    assert!(matches!(
        expect(&mut c, "RouteResolved"),
        CmEvent::RouteResolved
    ));
    let (mut ccq, mut cmr) = attach_qp(&mut c);
    assert_eq!(
        c.qp().unwrap().state(),
        uverbs::QpState::Rts,
        "a UD QP is ready at once"
    );
    c.connect(&ConnParam {
        private_data: b"udp hello",
        ..ConnParam::default()
    })
    .unwrap();
    let req = match expect(&mut l, "ConnectRequest") {
        CmEvent::ConnectRequest(r) => r,
        other => panic!("expected a connect request, got {other}"),
    };
    assert_eq!(&req.private_data[..9], b"udp hello");
    assert!(req.ud.is_some());
    let mut s = req.id;
    let (mut scq, mut smr) = attach_qp(&mut s);
    let s_qpn = s.qp().unwrap().qp_num();
    // Receives first: the datagram may come as soon as the client hears the answer.
    let rsge = [smr.sge(0, 1024).unwrap()];
    s.qp_mut()
        .unwrap()
        .post_recv(&[RecvWr::new(1, &rsge)])
        .unwrap();
    s.accept(&ConnParam::default()).unwrap();
    let ud = match expect(&mut c, "Established") {
        CmEvent::Established { ud: Some(ud), .. } => ud,
        other => panic!("expected Established with UD parameters, got {other}"),
    };
    assert_eq!(ud.qp_num, s_qpn);
    assert_eq!(ud.qkey, QKEY);
    // Client -> server with the AH from the event.
    let cpd = c.qp().unwrap().pd().clone();
    let ah = cpd.create_ah(&ud.ah_attr).unwrap();
    let msg = b"a datagram over rdma_cm";
    cmr.write(0, msg).unwrap();
    let sge = [cmr.sge(0, msg.len() as u32).unwrap()];
    c.qp_mut()
        .unwrap()
        .post_send(&[SendWr::send(2)
            .sge(&sge)
            .ud(&ah, ud.qp_num, ud.qkey)
            .signaled()])
        .unwrap();
    assert_eq!(poll_one(&mut ccq).status, WcStatus::SUCCESS);
    let wc = poll_one(&mut scq);
    assert_eq!(wc.status, WcStatus::SUCCESS);
    assert_eq!(wc.byte_len as usize, 40 + msg.len(), "GRH + payload");
    let mut got = vec![0u8; msg.len()];
    smr.read(40, &mut got).unwrap();
    assert_eq!(got, msg);
    let c_qpn = c.qp().unwrap().qp_num();
    assert_eq!(wc.src_qp, c_qpn);
    // Server -> client: to the sender's QPN, through an AH towards the id's peer GID.
    let route = s.query().unwrap();
    let sctx = s.context().unwrap().clone();
    let back = uverbs::AhAttr::roce(route.dgid, gid_index(&sctx, &route.sgid), 1);
    let sah = s.qp().unwrap().pd().create_ah(&back).unwrap();
    let rsge = [cmr.sge(0, 1024).unwrap()];
    c.qp_mut()
        .unwrap()
        .post_recv(&[RecvWr::new(3, &rsge)])
        .unwrap();
    smr.write(2048, b"reply").unwrap();
    let sge = [smr.sge(2048, 5).unwrap()];
    s.qp_mut()
        .unwrap()
        .post_send(&[SendWr::send(4)
            .sge(&sge)
            .ud(&sah, wc.src_qp, QKEY)
            .signaled()])
        .unwrap();
    assert_eq!(poll_one(&mut scq).status, WcStatus::SUCCESS);
    let wc = poll_one(&mut ccq);
    assert_eq!((wc.status, wc.byte_len), (WcStatus::SUCCESS, 45));
    let mut got = [0u8; 5];
    cmr.read(40, &mut got).unwrap();
    assert_eq!(&got, b"reply");
}

#[cfg(feature = "tokio")]
fn limit<F: std::future::Future>(f: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(T, f)
}

#[cfg(feature = "tokio")]
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_async_ids_connect_and_disconnect_from_tokio() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut l = listener(7330).into_async().unwrap();
        let mut c = resolved_client(7330);
        let _res = attach_qp(&mut c);
        c.connect(&ConnParam::default()).unwrap();
        let mut c = c.into_async().unwrap();
        let req = match limit(l.next()).await.expect("a request in time").unwrap() {
            CmEvent::ConnectRequest(r) => r,
            other => panic!("expected a connect request, got {other}"),
        };
        let mut s = req.id;
        let _sres = attach_qp(&mut s);
        s.accept(&ConnParam::default()).unwrap();
        let mut s = s.into_async().unwrap();
        let ce = limit(c.next())
            .await
            .expect("client event in time")
            .unwrap();
        assert!(matches!(ce, CmEvent::Established { .. }), "client got {ce}");
        let se = limit(s.next())
            .await
            .expect("server event in time")
            .unwrap();
        assert!(matches!(se, CmEvent::Established { .. }), "server got {se}");
        c.id_mut().disconnect().unwrap();
        let ev = limit(s.next()).await.unwrap().unwrap();
        assert!(matches!(ev, CmEvent::Disconnected), "server got {ev}");
        s.id_mut().disconnect().unwrap();
        let ev = limit(c.next()).await.unwrap().unwrap();
        assert!(matches!(ev, CmEvent::Disconnected), "client got {ev}");
        // Outside a runtime the registration fails with a clear error instead.
        let plain = s.into_inner();
        let e = std::thread::spawn(move || plain.into_async().map(|_| ()))
            .join()
            .unwrap()
            .unwrap_err();
        assert!(e.reason().contains("not inside a tokio runtime"), "{e}");
    });
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cm_ud_multicast_join_and_leave() {
    let mut id = CmId::new(PortSpace::Udp).unwrap();
    id.bind_addr(&addr(0)).unwrap();
    let (_cq, _mr) = attach_qp(&mut id);
    let group: SocketAddr = "239.1.2.3:0".parse().unwrap();
    let membership = id.join_multicast(&group).unwrap();
    let ud = match expect(&mut id, "MulticastJoin") {
        CmEvent::MulticastJoin { ud } => ud,
        other => panic!("expected MulticastJoin, got {other}"),
    };
    assert_eq!(ud.qp_num, 0xff_ffff, "multicast QPN");
    assert_eq!(ud.qkey, uverbs::uapi::ucma::RDMA_UDP_QKEY);
    assert!(ud.ah_attr.is_global);
    assert_eq!(
        &ud.ah_attr.grh.dgid.raw[10..],
        &[0xff, 0xff, 239, 1, 2, 3],
        "the group's IPv4-mapped GID: {ud:?}"
    );
    // The join attached the QP; leaving detaches it and ends the membership.
    id.leave_multicast(membership, Some(&ud)).unwrap();
    // A multicast join on a TCP id is refused before the kernel.
    let mut t = CmId::new(PortSpace::Tcp).unwrap();
    let e = t.join_multicast(&group).unwrap_err();
    assert_eq!(e.op(), "rdma_join_multicast");
    assert!(e.reason().contains("udp"), "{e}");
}
