//! The data path against a real rxe device (soft-RoCE VM): every transport's operations (RC
//! send and receive, immediate data, inline data, RDMA write and read, atomics, memory-window
//! invalidation; UC writes; UD sends through an AH), the `wr_*` batch API, the extended poll,
//! and what goes wrong there (bad work requests, a wrong rkey, an overrun CQ). Every test
//! checks the bytes or values that arrive, not just a status; every wait has a deadline.

mod common;

use std::time::{Duration, Instant};

use common::pair::{
    all_access, assert_quiet, cap, mr, ok, overrun_a_cq, pair, pair_sized, pair_with, read_mr,
    wait, DEADLINE, QKEY,
};
use uverbs::{
    AccessFlags, Ah, AhAttr, AsyncElement, AsyncEventType, Errno, QpAttrMask, QpState, QpType,
    RecvWr, SendFlags, SendWr, Wc, WcFlags, WcOpcode, WcStatus, WrOp,
};

/// An RC send gathered from two SGEs lands scattered over two receive SGEs: the completions
/// name the WRs, opcodes, byte count and QP, and the bytes land where the receive SGEs point.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_send_recv_multi_sge_bytes_arrive() {
    let mut p = pair(QpType::Rc);
    assert!(p.a.cap().max_send_sge >= 4 && p.a.cap().max_send_wr >= 64);
    let mut src = mr(&p.pd, 4096);
    let dst = mr(&p.pd, 4096);
    src.write(0, b"hello, ").unwrap();
    src.write(100, b"soft-RoCE!").unwrap();
    // Receive into two pieces: 5 bytes at 0, the rest at 1000.
    let rsg = [dst.sge(0, 5).unwrap(), dst.sge(1000, 64).unwrap()];
    p.b.post_recv(&[RecvWr::new(7, &rsg)]).expect("post_recv");
    let ssg = [src.sge(0, 7).unwrap(), src.sge(100, 10).unwrap()];
    p.a.post_send(&[SendWr::send(9).sge(&ssg).signaled()])
        .expect("post_send");
    let s = wait(&mut p.cq_a, 1);
    ok(&s);
    assert_eq!((s[0].wr_id, s[0].opcode), (9, WcOpcode::SEND));
    let r = wait(&mut p.cq_b, 1);
    ok(&r);
    assert_eq!(r[0].wr_id, 7);
    assert_eq!(r[0].opcode, WcOpcode::RECV);
    assert_eq!(r[0].byte_len, 17);
    assert_eq!(r[0].qp_num, p.b.qp_num());
    assert_eq!(read_mr(&dst, 0, 5), b"hello");
    assert_eq!(read_mr(&dst, 1000, 12), b", soft-RoCE!");
}

/// An unsignaled inline send, then a signaled send with immediate: only the signaled one
/// completes on the sender, both arrive, the inline bytes land and the immediate arrives as
/// sent.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_send_with_imm_and_inline_and_unsignaled() {
    let mut p = pair(QpType::Rc);
    let dst = mr(&p.pd, 4096);
    let sg0 = [dst.sge(0, 64).unwrap()];
    let sg1 = [dst.sge(64, 64).unwrap()];
    p.b.post_recv(&[RecvWr::new(1, &sg0), RecvWr::new(2, &sg1)])
        .unwrap();
    // Unsignaled inline send, then a signaled send-with-imm: one send completion only.
    let data = *b"inline bytes";
    p.a.post_send(&[
        SendWr::send(10).inline(&data),
        SendWr::new(
            11,
            WrOp::SendWithImm {
                imm_data: 0xdead_beef,
            },
        )
        .inline(b"imm")
        .signaled(),
    ])
    .unwrap();
    let s = wait(&mut p.cq_a, 1);
    ok(&s);
    assert_eq!(s[0].wr_id, 11, "the unsignaled send must not complete");
    assert_quiet(&mut p.cq_a);
    let r = wait(&mut p.cq_b, 2);
    ok(&r);
    assert_eq!(r[0].byte_len, 12);
    assert_eq!(read_mr(&dst, 0, 12), b"inline bytes");
    assert!(r[1].wc_flags.contains(WcFlags::WITH_IMM), "{:?}", r[1]);
    assert_eq!(r[1].imm_data, 0xdead_beef);
    assert_eq!(read_mr(&dst, 64, 3), b"imm");
}

/// RDMA write, RDMA read and write with immediate in one list: each completes in order with
/// its opcode, the written bytes land remotely and the read ones locally, and the immediate
/// consumes a receive on the target (`RECV_RDMA_WITH_IMM`).
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_rdma_write_read_and_write_with_imm() {
    let mut p = pair(QpType::Rc);
    let mut local = mr(&p.pd, 4096);
    let mut remote = mr(&p.pd, 4096);
    local.write(0, b"written by RDMA").unwrap();
    remote.write(2000, b"read me back").unwrap();
    let sg_w = [local.sge(0, 15).unwrap()];
    let sg_r = [local.sge(500, 12).unwrap()];
    let rsg = [remote.sge(3000, 4).unwrap()];
    p.b.post_recv(&[RecvWr::new(5, &rsg)]).unwrap();
    p.a.post_send(&[
        SendWr::new(
            1,
            WrOp::RdmaWrite {
                remote_addr: remote.addr() + 100,
                rkey: remote.rkey(),
            },
        )
        .sge(&sg_w)
        .signaled(),
        SendWr::new(
            2,
            WrOp::RdmaRead {
                remote_addr: remote.addr() + 2000,
                rkey: remote.rkey(),
            },
        )
        .sge(&sg_r)
        .signaled(),
        SendWr::new(
            3,
            WrOp::RdmaWriteWithImm {
                remote_addr: remote.addr() + 200,
                rkey: remote.rkey(),
                imm_data: 77,
            },
        )
        .inline(b"imm!")
        .signaled(),
    ])
    .unwrap();
    let s = wait(&mut p.cq_a, 3);
    ok(&s);
    assert_eq!(
        s.iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(),
        vec![
            (1, WcOpcode::RDMA_WRITE),
            (2, WcOpcode::RDMA_READ),
            (3, WcOpcode::RDMA_WRITE)
        ]
    );
    assert_eq!(read_mr(&remote, 100, 15), b"written by RDMA");
    assert_eq!(read_mr(&local, 500, 12), b"read me back");
    assert_eq!(read_mr(&remote, 200, 4), b"imm!");
    let r = wait(&mut p.cq_b, 1);
    ok(&r);
    assert_eq!(r[0].opcode, WcOpcode::RECV_RDMA_WITH_IMM);
    assert_eq!(r[0].imm_data, 77);
}

/// Fetch-and-add and compare-and-swap (one compare matching, one not) return the old value
/// into the local buffer and change the remote one only when they should.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_atomics_return_old_value_and_change_remote() {
    let mut p = pair(QpType::Rc);
    let local = mr(&p.pd, 4096);
    let mut remote = mr(&p.pd, 4096);
    remote.write(64, &40u64.to_ne_bytes()).unwrap();
    let sg1 = [local.sge(0, 8).unwrap()];
    let sg2 = [local.sge(8, 8).unwrap()];
    let sg3 = [local.sge(16, 8).unwrap()];
    let addr = remote.addr() + 64;
    let rkey = remote.rkey();
    p.a.post_send(&[
        SendWr::new(
            1,
            WrOp::AtomicFetchAndAdd {
                remote_addr: addr,
                rkey,
                add: 2,
            },
        )
        .sge(&sg1)
        .signaled(),
        SendWr::new(
            2,
            WrOp::AtomicCmpAndSwp {
                remote_addr: addr,
                rkey,
                compare: 42,
                swap: 1000,
            },
        )
        .sge(&sg2)
        .signaled(),
        // Compare fails (remote is now 1000): value unchanged, old value returned.
        SendWr::new(
            3,
            WrOp::AtomicCmpAndSwp {
                remote_addr: addr,
                rkey,
                compare: 1,
                swap: 5,
            },
        )
        .sge(&sg3)
        .signaled(),
    ])
    .unwrap();
    let s = wait(&mut p.cq_a, 3);
    ok(&s);
    assert_eq!(s[0].opcode, WcOpcode::FETCH_ADD);
    assert_eq!(s[1].opcode, WcOpcode::COMP_SWAP);
    let u = |b: Vec<u8>| u64::from_ne_bytes(b.try_into().unwrap());
    assert_eq!(u(read_mr(&local, 0, 8)), 40);
    assert_eq!(u(read_mr(&local, 8, 8)), 42);
    assert_eq!(u(read_mr(&local, 16, 8)), 1000);
    assert_eq!(u(read_mr(&remote, 64, 8)), 1000);
}

/// Whether the running kernel's rxe has RDMA atomic write (added in Linux 6.2).
fn kernel_has_atomic_write() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    (major, minor) >= (6, 2)
}

/// An RDMA atomic write, posted whole and built with `wr_*`, writes its 8 bytes into the
/// remote MR and completes as `ATOMIC_WRITE`; a misaligned one is refused before the ring
/// (kernels with rxe atomic write only: 6.2 and later).
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn rc_atomic_write_lands_eight_bytes() {
    if !kernel_has_atomic_write() {
        eprintln!("skipped: this kernel's rxe has no atomic write (6.2 and later)");
        return;
    }
    let mut p = pair_with(QpType::Rc, cap(16, 1, 0), true, true);
    let remote = mr(&p.pd, 4096);
    let (addr, rkey) = (remote.addr(), remote.rkey());
    p.a.post_send(&[SendWr::new(
        1,
        WrOp::AtomicWrite {
            remote_addr: addr + 64,
            rkey,
            value: *b"posted!!",
        },
    )
    .signaled()])
        .expect("post atomic write");
    let mut b = p.a.wr_start().expect("wr_start");
    b.atomic_write(2, SendFlags::SIGNALED, rkey, addr + 128, *b"built!!!");
    b.complete().expect("wr_complete");
    let s = wait(&mut p.cq_a, 2);
    ok(&s);
    assert_eq!(s[0].opcode, WcOpcode::ATOMIC_WRITE);
    assert_eq!(read_mr(&remote, 64, 8), b"posted!!");
    assert_eq!(read_mr(&remote, 128, 8), b"built!!!");
    let e =
        p.a.post_send(&[SendWr::new(
            3,
            WrOp::AtomicWrite {
                remote_addr: addr + 4,
                rkey,
                value: [0; 8],
            },
        )])
        .unwrap_err();
    assert!(e.error.is(Errno::INVAL), "{e}");
    let _ = &p.cq_b;
}

/// A UC RDMA write lands in the remote region; an RDMA read on UC is refused (`EOPNOTSUPP`,
/// WR 0) before it reaches the ring.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn uc_rdma_write_lands() {
    let mut p = pair(QpType::Uc);
    let mut local = mr(&p.pd, 4096);
    let remote = mr(&p.pd, 4096);
    local.write(0, b"UC write").unwrap();
    let sg = [local.sge(0, 8).unwrap()];
    p.a.post_send(&[SendWr::new(
        1,
        WrOp::RdmaWrite {
            remote_addr: remote.addr() + 8,
            rkey: remote.rkey(),
        },
    )
    .sge(&sg)
    .signaled()])
        .unwrap();
    ok(&wait(&mut p.cq_a, 1));
    let start = Instant::now();
    while read_mr(&remote, 8, 8) != b"UC write" {
        assert!(start.elapsed() < DEADLINE, "UC write did not land");
        std::thread::sleep(Duration::from_millis(1));
    }
    // UC refuses RDMA read before anything reaches the ring.
    let e =
        p.a.post_send(&[SendWr::new(
            2,
            WrOp::RdmaRead {
                remote_addr: remote.addr(),
                rkey: remote.rkey(),
            },
        )
        .sge(&sg)])
            .unwrap_err();
    assert_eq!(e.index, 0);
    assert!(e.error.is(Errno::OPNOTSUPP), "{e}");
}

/// A UD send through an AH arrives with the GRH in front, the sender's QP number and the byte
/// count; a UD send without a destination is refused; an AH with another clone is not
/// destroyed (`EBUSY`, handed back alive), one a posted send named is (the QP keeps the
/// kernel AH until it is gone, then the PD can be deallocated).
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn ud_send_with_grh_and_src_qp() {
    let mut p = pair(QpType::Ud);
    let ah =
        p.pd.create_ah(&AhAttr::roce(p.gid, p.gid_index, 1))
            .expect("create_ah");
    assert_ne!(ah.ah_num(), 0);
    let mut src = mr(&p.pd, 4096);
    let dst = mr(&p.pd, 4096);
    src.write(0, b"datagram").unwrap();
    // UD receives start with the 40-byte GRH.
    let rsg = [dst.sge(0, 40 + 64).unwrap()];
    p.b.post_recv(&[RecvWr::new(3, &rsg)]).unwrap();
    let ssg = [src.sge(0, 8).unwrap()];
    p.a.post_send(&[SendWr::send(4)
        .sge(&ssg)
        .signaled()
        .ud(&ah, p.b.qp_num(), QKEY)])
        .unwrap();
    ok(&wait(&mut p.cq_a, 1));
    let r = wait(&mut p.cq_b, 1);
    ok(&r);
    assert_eq!(r[0].src_qp, p.a.qp_num());
    assert!(r[0].wc_flags.contains(WcFlags::GRH), "{:?}", r[0]);
    assert_eq!(r[0].byte_len, 48);
    assert_eq!(read_mr(&dst, 40, 8), b"datagram");
    // A UD send without a destination is refused before the ring.
    let e = p.a.post_send(&[SendWr::send(5).sge(&ssg)]).unwrap_err();
    assert!(e.error.is(Errno::INVAL), "{e}");
    // Another clone of the AH makes destroy say EBUSY.
    let clone = ah.clone();
    let busy = clone.destroy().unwrap_err();
    assert!(busy.is(Errno::BUSY), "{busy}");
    // The AH comes back with the error, alive (issue 13, build item 4); dropping it leaves
    // the others' references.
    let clone = busy.into_inner();
    assert_eq!(clone.handle(), ah.handle());
    drop(clone);
    // The send that named it is done, but its queue slot still holds the kernel AH: destroy
    // succeeds anyway (as rdma-core's, which pyverbs' UD tests rely on), and the kernel AH
    // goes with the QP; then the PD is free (pyverbs' order: QPs, AHs, MRs, then the PD).
    ah.destroy()
        .expect("destroy_ah while a completed send's slot names it");
    drop((src, dst));
    drop(p.a);
    drop(p.b);
    p.pd.dealloc()
        .expect("dealloc_pd once the QP that held the AH is gone");
    let _ = &p.ctx;
}

/// A type-2 memory window bound on the receiver grants RDMA writes through its rkey;
/// `SEND_WITH_INV` invalidates it (the receive completion names the rkey), after which a
/// write through it fails with `REM_ACCESS_ERR`.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn send_with_inv_invalidates_a_bound_memory_window() {
    // rxe can remotely invalidate only memory windows, so bind a type-2 MW on the receiver.
    let mut p = pair(QpType::Rc);
    let mut local = mr(&p.pd, 4096);
    let remote =
        p.pd.reg_mr(4096, all_access() | AccessFlags::MW_BIND)
            .expect("reg_mr with MW_BIND");
    let mw = p.pd.alloc_mw(uverbs::MwType::Type2).expect("alloc_mw");
    let new_rkey = uverbs::Mw::inc_rkey(mw.rkey());
    p.b.post_send(&[SendWr::new(
        1,
        WrOp::BindMw {
            mw_rkey: mw.rkey(),
            new_rkey,
            mr_lkey: remote.lkey(),
            addr: remote.addr(),
            length: 4096,
            access: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
        },
    )
    .signaled()])
        .expect("post bind_mw");
    let w = wait(&mut p.cq_b, 1);
    ok(&w);
    assert_eq!(w[0].opcode, WcOpcode::BIND_MW);
    // The window works: an RDMA write through its rkey lands.
    local.write(0, b"via mw").unwrap();
    let sg = [local.sge(0, 6).unwrap()];
    let write_through_the_window = |id| {
        SendWr::new(
            id,
            WrOp::RdmaWrite {
                remote_addr: remote.addr() + 16,
                rkey: new_rkey,
            },
        )
        .sge(&sg)
        .signaled()
    };
    p.a.post_send(&[write_through_the_window(2)]).unwrap();
    ok(&wait(&mut p.cq_a, 1));
    assert_eq!(read_mr(&remote, 16, 6), b"via mw");
    // SEND_WITH_INV: the receiver's completion names the invalidated rkey.
    let rsg = [remote.sge(1000, 64).unwrap()];
    p.b.post_recv(&[RecvWr::new(3, &rsg)]).unwrap();
    p.a.post_send(&[SendWr::new(
        4,
        WrOp::SendWithInv {
            invalidate_rkey: new_rkey,
        },
    )
    .inline(b"inv")
    .signaled()])
        .unwrap();
    ok(&wait(&mut p.cq_a, 1));
    let r = wait(&mut p.cq_b, 1);
    ok(&r);
    assert_eq!(r[0].invalidated_rkey(), Some(new_rkey), "{:?}", r[0]);
    assert_eq!(read_mr(&remote, 1000, 3), b"inv");
    // The window no longer grants access: a write through it fails.
    p.a.post_send(&[write_through_the_window(5)]).unwrap();
    let w = wait(&mut p.cq_a, 1);
    assert_eq!(w[0].status, WcStatus::REM_ACCESS_ERR, "{w:?}");
    drop(p);
    mw.dealloc().expect("dealloc_mw");
}

/// Bad work requests are refused before the ring, naming the WR and the reason (too many
/// SGEs, too much inline data, an atomic of the wrong length or alignment); a list longer than
/// the send queue posts the WRs before the first that does not fit, names it, and none after.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn post_send_bad_input_names_the_failing_wr() {
    let mut p = pair_with(QpType::Rc, cap(8, 2, 16), false, true);
    let sq_room = p.a.cap().max_send_wr as usize;
    let local = mr(&p.pd, 4096);
    let remote = mr(&p.pd, 4096);
    let one = [local.sge(0, 8).unwrap()];
    let three = [
        local.sge(0, 1).unwrap(),
        local.sge(1, 1).unwrap(),
        local.sge(2, 1).unwrap(),
    ];
    let too_many = p.a.cap().max_send_sge as usize + 1;
    let sges: Vec<_> = (0..too_many).map(|i| local.sge(i, 1).unwrap()).collect();
    let e = p.a.post_send(&[SendWr::send(1).sge(&sges)]).unwrap_err();
    assert_eq!(e.index, 0);
    assert!(e.error.is(Errno::INVAL), "{e}");
    assert!(e.error.reason().contains("scatter/gather"), "{e}");
    let _ = three;
    let big = vec![0u8; p.a.cap().max_inline_data as usize + 1];
    let e = p.a.post_send(&[SendWr::send(1).inline(&big)]).unwrap_err();
    assert!(e.error.reason().contains("inline"), "{e}");
    let bad_len = [local.sge(0, 4).unwrap()];
    let e =
        p.a.post_send(&[SendWr::new(
            1,
            WrOp::AtomicFetchAndAdd {
                remote_addr: remote.addr(),
                rkey: remote.rkey(),
                add: 1,
            },
        )
        .sge(&bad_len)])
            .unwrap_err();
    assert!(e.error.reason().contains("8"), "{e}");
    let e =
        p.a.post_send(&[SendWr::new(
            1,
            WrOp::AtomicCmpAndSwp {
                remote_addr: remote.addr() + 4,
                rkey: remote.rkey(),
                compare: 0,
                swap: 0,
            },
        )
        .sge(&one)])
            .unwrap_err();
    assert!(e.error.reason().contains("aligned"), "{e}");
    assert_quiet(&mut p.cq_a);

    // More WRs than the queue holds: the first that does not fit is named, the ones before it
    // are posted (and complete), none after it.
    let n = sq_room + 64;
    let list: Vec<_> = (0..n)
        .map(|i| {
            SendWr::new(
                i as u64,
                WrOp::RdmaWrite {
                    remote_addr: remote.addr(),
                    rkey: remote.rkey(),
                },
            )
            .sge(&one)
            .signaled()
        })
        .collect();
    let e = p.a.post_send(&list).unwrap_err();
    assert!(
        e.index >= sq_room && e.index < n,
        "index {} (room {sq_room})",
        e.index
    );
    assert!(e.error.is(Errno::NOMEM), "{e}");
    let done = wait(&mut p.cq_a, e.index);
    ok(&done);
    assert_eq!(
        done.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        (0..e.index as u64).collect::<Vec<_>>()
    );
    assert_quiet(&mut p.cq_a);
    let _ = &mut p.cq_b;
}

/// An RDMA write with a wrong rkey completes with `REM_ACCESS_ERR`, the WRs after it are
/// flushed once each, the QP goes to ERR, and a WR posted in ERR is flushed too.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn wrong_rkey_gives_remote_access_error_and_flushes_rest_once() {
    let mut p = pair(QpType::Rc);
    let local = mr(&p.pd, 4096);
    let remote = mr(&p.pd, 4096);
    let sg = [local.sge(0, 8).unwrap()];
    let wr = |id, rkey| {
        SendWr::new(
            id,
            WrOp::RdmaWrite {
                remote_addr: remote.addr(),
                rkey,
            },
        )
        .sge(&sg)
        .signaled()
    };
    p.a.post_send(&[
        wr(1, remote.rkey() ^ 0x5a00),
        wr(2, remote.rkey()),
        wr(3, remote.rkey()),
    ])
    .unwrap();
    let w = wait(&mut p.cq_a, 3);
    assert_eq!(w[0].wr_id, 1);
    assert_eq!(w[0].status, WcStatus::REM_ACCESS_ERR, "{w:?}");
    assert_eq!(
        w[1..]
            .iter()
            .map(|x| (x.wr_id, x.status))
            .collect::<Vec<_>>(),
        vec![(2, WcStatus::WR_FLUSH_ERR), (3, WcStatus::WR_FLUSH_ERR)]
    );
    assert_quiet(&mut p.cq_a);
    assert_eq!(
        p.a.query(QpAttrMask::STATE).unwrap().attr.qp_state,
        QpState::Err
    );
    // Posting in ERR is allowed and flushes.
    p.a.post_send(&[wr(4, remote.rkey())]).unwrap();
    let w = wait(&mut p.cq_a, 1);
    assert_eq!((w[0].wr_id, w[0].status), (4, WcStatus::WR_FLUSH_ERR));
    let _ = (&p.cq_b, Ah::handle);
}

/// The `wr_*` batch API posts a send, an RDMA write, a fetch-and-add and a send with immediate
/// in one batch; an aborted batch posts nothing; a failing batch posts nothing and names the
/// first error; the extended poll reads every field of what completes; a QP made with
/// `create_qp` has no `wr_*` API.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn wr_api_and_extended_poll() {
    let mut p = pair_with(QpType::Rc, cap(64, 4, 64), true, true);
    let mut local = mr(&p.pd, 4096);
    let mut remote = mr(&p.pd, 4096);
    local.write(0, b"wr api send").unwrap();
    local.write(100, b"wr api write").unwrap();
    remote.write(64, &5u64.to_ne_bytes()).unwrap();
    let rsg = [remote.sge(1000, 64).unwrap()];
    p.b.post_recv(&[RecvWr::new(50, &rsg), RecvWr::new(51, &rsg)])
        .unwrap();
    let sig = SendFlags::SIGNALED;
    let mut b = p.a.wr_start().expect("wr_start");
    b.send(1, sig).set_sge(local.lkey(), local.addr(), 11);
    b.rdma_write(2, sig, remote.rkey(), remote.addr() + 200)
        .set_sge_list(&[local.sge(100, 12).unwrap()]);
    b.atomic_fetch_add(3, sig, remote.rkey(), remote.addr() + 64, 10)
        .set_sge(local.lkey(), local.addr() + 512, 8);
    b.send_imm(4, sig, 0x0102_0304).set_inline_data(b"x");
    b.complete().expect("wr_complete");

    // An aborted batch posts nothing.
    let mut b = p.a.wr_start().unwrap();
    b.send(99, sig).set_inline_data(b"never");
    b.abort();
    // A failing batch posts nothing and reports the first error.
    let mut b = p.a.wr_start().unwrap();
    b.send(98, sig).set_inline_data(b"ok");
    b.atomic_cmp_swp(97, sig, remote.rkey(), remote.addr() + 3, 0, 1)
        .set_sge(local.lkey(), local.addr(), 8);
    let e = b.complete().unwrap_err();
    assert!(e.reason().contains("aligned"), "{e}");

    // Extended poll over the sender's CQ.
    let start = Instant::now();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        assert!(start.elapsed() < DEADLINE, "completions: {seen:?}");
        if let Some(mut g) = p.cq_a.start_poll().unwrap() {
            loop {
                assert_eq!(g.status(), WcStatus::SUCCESS);
                assert_eq!(g.read_qp_num(), p.a.qp_num());
                assert_eq!(g.read_vendor_err(), 0);
                seen.push((g.wr_id(), g.read_opcode(), g.read_byte_len()));
                if !g.next_poll().unwrap() {
                    break;
                }
            }
            g.end_poll();
        }
    }
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(seen[2].1, WcOpcode::FETCH_ADD);
    assert_quiet(&mut p.cq_a);
    assert_eq!(read_mr(&remote, 200, 12), b"wr api write");
    assert_eq!(read_mr(&local, 512, 8), 5u64.to_ne_bytes());
    assert_eq!(read_mr(&remote, 64, 8), 15u64.to_ne_bytes());

    let start = Instant::now();
    let mut recv = Vec::new();
    while recv.len() < 2 {
        assert!(start.elapsed() < DEADLINE);
        if let Some(mut g) = p.cq_b.start_poll().unwrap() {
            loop {
                recv.push((
                    g.wr_id(),
                    g.read_wc_flags(),
                    g.read_imm_data(),
                    g.read_src_qp(),
                    g.read_slid(),
                    g.read_sl(),
                    g.read_dlid_path_bits(),
                    g.read_invalidated_rkey(),
                ));
                if !g.next_poll().unwrap() {
                    break;
                }
            }
        }
    }
    assert_eq!(recv[0].0, 50);
    assert!(!recv[0].1.contains(WcFlags::WITH_IMM));
    assert_eq!(recv[1].0, 51);
    assert!(recv[1].1.contains(WcFlags::WITH_IMM));
    assert_eq!(recv[1].2, 0x0102_0304);

    // A QP made with create_qp has no wr_* API.
    let mut plain = pair_with(QpType::Rc, cap(4, 1, 0), false, true);
    let e = plain.a.wr_start().unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP), "{e}");
    let _ = &mut plain.b;
}

/// The lazy extended poll over more completions than the ring holds: each round's receive
/// completions are read in one `start_poll`/`next_poll` run straight from the ring slots, runs
/// cross the ring's wrap, every field matches what was posted, and a `Cq::poll` after
/// `end_poll` sees none of them again.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn extended_poll_runs_across_the_ring_wrap() {
    const ROUND: usize = 50;
    const ROUNDS: usize = 6;
    let mut p = pair_sized(QpType::Rc, cap(64, 1, 0), false, true, 63);
    // rxe rounds the ring up to a power of two and reports all but one slot as the depth.
    let slots = p.cq_b.cqe() as usize + 1;
    assert!(slots.is_power_of_two(), "cqe {}", p.cq_b.cqe());
    assert!(
        ROUND < slots && ROUND * ROUNDS > 2 * slots,
        "ring of {slots}"
    );
    let src = mr(&p.pd, 4096);
    let dst = mr(&p.pd, 4096);
    let len = |id: usize| (id * 7 % 300 + 1) as u32;
    let with_imm = |id: usize| id % 3 == 0;
    let rsg = [dst.sge(0, 4096).unwrap()];
    let mut crossed = 0;
    for round in 0..ROUNDS {
        let first = round * ROUND;
        let recvs: Vec<_> = (first..first + ROUND)
            .map(|id| RecvWr::new(1000 + id as u64, &rsg))
            .collect();
        p.b.post_recv(&recvs).expect("post_recv");
        let sges: Vec<_> = (first..first + ROUND)
            .map(|id| [src.sge(0, len(id)).unwrap()])
            .collect();
        let sends: Vec<_> = (first..first + ROUND)
            .zip(&sges)
            .map(|(id, sg)| {
                let op = if with_imm(id) {
                    WrOp::SendWithImm {
                        imm_data: id as u32,
                    }
                } else {
                    WrOp::Send
                };
                SendWr::new(id as u64, op).sge(sg).signaled()
            })
            .collect();
        p.a.post_send(&sends).expect("post_send");
        // rxe completes a receive before it acknowledges the send, so once every send has
        // completed all of this round's receive completions are in B's ring.
        let s = wait(&mut p.cq_a, ROUND);
        ok(&s);
        let mut g = p.cq_b.start_poll().unwrap().expect("receive completions");
        let mut n = 0;
        loop {
            let id = first + n;
            assert!(n < ROUND, "more completions than receives posted");
            assert_eq!(g.wr_id(), 1000 + id as u64);
            assert_eq!(g.status(), WcStatus::SUCCESS);
            assert_eq!(g.read_opcode(), WcOpcode::RECV);
            assert_eq!(g.read_byte_len(), len(id), "completion {id}");
            assert_eq!(g.read_qp_num(), p.b.qp_num());
            assert_eq!(g.read_wc_flags().contains(WcFlags::WITH_IMM), with_imm(id));
            if with_imm(id) {
                assert_eq!(g.read_imm_data(), id as u32);
            }
            assert_eq!(g.wc().wr_id, 1000 + id as u64);
            n += 1;
            if !g.next_poll().unwrap() {
                break;
            }
        }
        g.end_poll();
        assert_eq!(n, ROUND, "round {round} read in one run");
        // A fresh CQ's consumer index starts at slot 0.
        if first / slots != (first + ROUND - 1) / slots {
            crossed += 1;
        }
        let mut wcs = [Wc::default(); 4];
        assert_eq!(p.cq_b.poll(&mut wcs).unwrap(), 0, "nothing seen twice");
    }
    assert!(crossed >= 2, "runs across the wrap: {crossed}");
    assert_quiet(&mut p.cq_b);
}

/// rxe cannot write a completion into a full CQ: it drops it and raises `IB_EVENT_CQ_ERR` on
/// the async fd. The overrun must reach the user as that event, naming the CQ — never vanish.
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cq_overrun_is_reported_as_an_async_event_naming_the_cq() {
    let ctx = common::rxe_context();
    let mut o = overrun_a_cq(&ctx);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = ctx
            .get_async_event(Some(left))
            .unwrap_or_else(|e| panic!("no CQ error event after overrunning the CQ: {e}"));
        if ev.event_type == AsyncEventType::CQ_ERR {
            assert_eq!(
                ev.element,
                AsyncElement::Cq(o.small.user_handle()),
                "{ev:?}"
            );
            break;
        }
    }
    // The ring itself stays sound: polling it works and never yields more than it holds.
    let mut buf = [Wc::default(); 64];
    let k = o.small.poll(&mut buf).expect("poll_cq");
    assert!(
        k <= o.small.cqe() as usize,
        "polled {k}, cqe {}",
        o.small.cqe()
    );
}
