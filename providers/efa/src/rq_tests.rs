//! RQ tests against heap memory standing in for the RQ ring and doorbell page.

use super::*;
use crate::error::{EINVAL, ENOMEM};
use crate::testmem::Mem;
use crate::wrid::WridCompleter;
use uverbs_wr::Sge;

/// Fields drop in declaration order: the queue goes before the memory it points into.
struct Rig {
    done: WridCompleter,
    rq: RecvQueue,
    ring: Mem,
    db: Mem,
}

fn rig(c: RqConfig) -> Rig {
    let ring = Mem::new(c.rq_ring_size() as usize);
    let db = Mem::new(4);
    // SAFETY: heap regions of the needed sizes, kept alive by `Rig` until after the queue is
    // dropped (field order); only this thread touches them.
    let mut rq = unsafe { RecvQueue::new(c, ring.ptr(), ring.len(), db.u32_ptr()) }.unwrap();
    let done = rq.take_completer().unwrap();
    Rig { done, rq, ring, db }
}

fn desc(r: &Rig, i: usize) -> EfaIoRxDesc {
    let b = r.ring.read(i * 16, 16);
    <EfaIoRxDesc as zerocopy::FromBytes>::read_from_bytes(&b[..]).unwrap()
}

#[test]
fn sizing_like_rdma_core() {
    let c = RqConfig::for_caps(5, 4, 2, 0);
    assert_eq!(c.desc_count, 8);
    assert_eq!(c.depth(), 4);
    assert_eq!(c.rq_ring_size(), 128);
    let c = RqConfig::for_caps(5, 5, 1, 0);
    assert_eq!((c.desc_count, c.depth()), (8, 8));
}

#[test]
fn golden_two_sge_recv() {
    let mut r = rig(RqConfig::for_caps(5, 4, 2, 0));
    let sg = [
        Sge {
            addr: 0x1_2345_6789,
            length: 0x2_0000,
            lkey: 0xfedc_ba98,
        },
        Sge {
            addr: 0x10,
            length: 8,
            lkey: 3,
        },
    ];
    assert_eq!(
        r.rq.post_recv(&[RecvWr {
            wr_id: 0x77,
            sg_list: &sg
        }]),
        Ok(1)
    );
    #[rustfmt::skip]
    let expected: [u8; 32] = [
        // desc 0: buf_addr_lo 0x23456789, buf_addr_hi 0x1
        0x89, 0x67, 0x45, 0x23, 0x01, 0x00, 0x00, 0x00,
        // req_id 0 (first slot, generation 0); length 0x20000 clamped to 0xffff
        0x00, 0x00, 0xff, 0xff,
        // lkey 0xfedcba98 masked to 23:0 = 0xdcba98 | first BIT(30) = 0x40dcba98
        0x98, 0xba, 0xdc, 0x40,
        // desc 1: buf_addr 0x10
        0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        // req_id only in the first descriptor; length 8
        0x00, 0x00, 0x08, 0x00,
        // lkey 3 | last BIT(31) = 0x80000003
        0x03, 0x00, 0x00, 0x80,
    ];
    assert_eq!(r.ring.read(0, 32), expected);
    assert_eq!(
        r.rq.db.log,
        [2],
        "doorbell carries the descriptor producer counter"
    );
}

#[test]
fn wraps_and_doorbell_positions() {
    let mut r = rig(RqConfig::for_caps(5, 4, 1, 9));
    let sg = [Sge {
        addr: 0x1000,
        length: 64,
        lkey: 1,
    }];
    for k in 0..14u64 {
        let addr = 0x1000 + k;
        let s = [Sge { addr, ..sg[0] }];
        assert_eq!(
            r.rq.post_recv(&[RecvWr {
                wr_id: k,
                sg_list: &s
            }]),
            Ok(1)
        );
        let d = desc(&r, (k % 4) as usize);
        assert_eq!(d.buf_addr(), addr, "post {k} landed in slot {}", k % 4);
        assert!(d.first() && d.last());
        assert_eq!(r.rq.db.log.last(), Some(&(k as u32 + 1)));
        assert_eq!(r.done.complete(d.req_id.get()), Ok(k));
    }

    // A two-descriptor WQE across the ring end (desc_count 4, max_sge 2).
    let mut r = rig(RqConfig::for_caps(5, 2, 2, 0));
    r.rq.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: &sg,
    }])
    .unwrap();
    let id = desc(&r, 0).req_id.get();
    r.done.complete(id).unwrap();
    let two = [
        sg[0],
        Sge {
            addr: 0x2000,
            ..sg[0]
        },
    ];
    let wrs = [
        RecvWr {
            wr_id: 2,
            sg_list: &two,
        },
        RecvWr {
            wr_id: 3,
            sg_list: &two,
        },
    ];
    assert_eq!(r.rq.post_recv(&wrs), Ok(2));
    // WR 3 occupies descriptors 3 and 0 (wrapped).
    assert!(desc(&r, 3).first() && !desc(&r, 3).last());
    assert!(!desc(&r, 0).first() && desc(&r, 0).last());
    assert_eq!(desc(&r, 0).buf_addr(), 0x2000);
    assert_eq!(r.rq.db.log, [1, 5]);
    assert_eq!(r.db.word(), 5);
}

#[test]
fn refusals_leave_ring_untouched() {
    let mut r = rig(RqConfig::for_caps(5, 2, 1, 0));
    let e =
        r.rq.post_recv(&[RecvWr {
            wr_id: 1,
            sg_list: &[],
        }])
        .unwrap_err();
    assert_eq!(e.error, EfaError::NoSge { qpn: 5 });
    assert_eq!(e.error.errno(), EINVAL);
    let sg = [Sge::default(); 2];
    let e =
        r.rq.post_recv(&[RecvWr {
            wr_id: 1,
            sg_list: &sg,
        }])
        .unwrap_err();
    assert!(matches!(
        e.error,
        EfaError::TooManySge {
            queue: QueueKind::Recv,
            num_sge: 2,
            max_sge: 1,
            ..
        }
    ));
    assert!(r.rq.db.log.is_empty(), "nothing posted, no doorbell");
    assert!(r.ring.read(0, 32).iter().all(|&b| b == 0));

    let wrs: Vec<_> = (0..3)
        .map(|i| RecvWr {
            wr_id: i,
            sg_list: &sg[..1],
        })
        .collect();
    let e = r.rq.post_recv(&wrs).unwrap_err();
    assert_eq!(e.index, 2);
    assert_eq!(e.error.errno(), ENOMEM);
    assert_eq!(r.rq.db.log, [2]);
}
