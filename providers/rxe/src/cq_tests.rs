//! Tests of the CQ's conversion of a ring slot (the kernel's `struct ib_uverbs_wc`) into a
//! [`Wc`] (`struct ibv_wc`): the whole-slot copy and its fix-up against the field-by-field
//! conversion, the one-completion and run paths, and the flag translation. A child of `cq`,
//! so it reaches the private steps (`wc_as_copied`, `needs_fix`, `fix_in_place`,
//! `take_one`, `take_wcs`, `take_with`); the public polling is tested in `crate::tests`.
//!
//! The kernel's flag bits are taken from `uverbs_uapi::verbs` (the kernel's own numbers), not
//! from the provider's private copies of them.

use std::vec::Vec;

use uverbs_uapi::verbs::{IB_WC_GRH, IB_WC_IP_CSUM_OK, IB_WC_WITH_IMM, IB_WC_WITH_INVALIDATE};
use zerocopy::{FromBytes, IntoBytes};

use super::*;
use crate::ring::fake::FakeMapping;
use crate::tests::{open, wc};

/// A slot's completion with every field non-zero and distinct and kernel flags `flags`.
fn kernel_wc(flags: u32) -> UverbsWc {
    UverbsWc {
        wr_id: 0x0102_0304_0506_0708,
        status: 5,
        opcode: 0x81,
        vendor_err: 0x11,
        byte_len: 0x2222,
        ex: 0x3344_5566,
        qp_num: 0x77,
        src_qp: 0x88,
        wc_flags: flags,
        pkey_index: 0x99,
        slid: 0xaa,
        sl: 0xb,
        dlid_path_bits: 0xc,
        port_num: 1,
        reserved: 0xdd,
    }
}

/// The whole-slot copy plus the fix-up, as `take_wcs` and `take_one` do it, gives the same
/// `Wc` as the field-by-field conversion, for every field (the const layout assertions say
/// where; this says what), and the plain copy is taken exactly when no flag but GRH is set.
#[test]
fn whole_slot_copy_matches_the_field_by_field_conversion() {
    // Each of the four kernel flags alone and together, without and with an unknown bit
    // (no flag but GRH takes the plain copy; everything else the translation).
    for flags in (0..16u32).flat_map(|f| [f, f | 0x100]) {
        let k = kernel_wc(flags);
        let mut w = wc_as_copied(<[u64; 6]>::read_from_bytes(k.as_bytes()).unwrap());
        assert_eq!(
            needs_fix::<false>(&w),
            flags & !IB_WC_GRH != 0,
            "kernel flags {flags:#x}"
        );
        // The C ABI's variant: the same but for the immediate data, left as stored.
        let mut net = w;
        if needs_fix::<true>(&net) {
            fix_in_place::<true>(&mut net);
        }
        assert_eq!(
            needs_fix::<true>(&w),
            flags & !(IB_WC_GRH | IB_WC_WITH_IMM) != 0,
            "kernel flags {flags:#x}"
        );
        if needs_fix::<false>(&w) {
            fix_in_place::<false>(&mut w);
        }
        assert_eq!(w, wc_from_kernel(&k), "kernel flags {flags:#x}");
        assert_eq!(net.imm_data, 0x3344_5566, "kernel flags {flags:#x}");
        assert_eq!(
            Wc {
                imm_data: w.imm_data,
                ..net
            },
            w,
            "kernel flags {flags:#x}"
        );
        // Immediate data (stored big-endian) in host order; an rkey as stored.
        let want = if flags & IB_WC_WITH_IMM != 0 {
            u32::from_be(0x3344_5566)
        } else {
            0x3344_5566
        };
        assert_eq!(w.imm_data, want, "kernel flags {flags:#x}");
        assert_eq!(w.wc_flags, wc_flags_from_kernel(flags));
        // The fields the kernel stores as libibverbs does, as they were.
        assert_eq!(
            (w.wr_id, w.status, w.opcode, w.vendor_err, w.byte_len),
            (
                0x0102_0304_0506_0708,
                WcStatus(5),
                WcOpcode(0x81),
                0x11,
                0x2222
            )
        );
        assert_eq!(
            (
                w.qp_num,
                w.src_qp,
                w.pkey_index,
                w.slid,
                w.sl,
                w.dlid_path_bits
            ),
            (0x77, 0x88, 0x99, 0xaa, 0xb, 0xc)
        );
    }
}

/// `take_one` (inline, its fix-up out of line) and `take_wcs` (a run, fixed up after the
/// copy) turn ring slots into the `Wc`s the field-by-field conversion gives, plain ones and
/// ones with flags to translate alike, and free exactly the slots they took.
#[test]
fn take_one_and_take_wcs_give_the_converted_completions() {
    // 8 slots of 64 bytes behind the header, as the kernel lays out a CQ ring.
    let m = FakeMapping::new(6, 3);
    let cqes: Vec<UverbsWc> = [
        0,
        IB_WC_WITH_IMM,
        IB_WC_GRH,
        IB_WC_WITH_INVALIDATE | IB_WC_GRH,
    ]
    .iter()
    .cycle()
    .take(6)
    .enumerate()
    .map(|(i, &wc_flags)| UverbsWc {
        wr_id: 100 + i as u64,
        opcode: 0x80,
        byte_len: 8,
        ex: 0x1122_3344,
        qp_num: 5,
        wc_flags,
        ..Default::default()
    })
    .collect();
    for c in &cqes {
        assert!(m.kernel_produce(c.as_bytes()));
    }
    let want = |i: usize| wc_from_kernel(&cqes[i]);
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    let mut got = Vec::new();
    for _ in 0..2 {
        assert_eq!(cq.refresh(1), Ok(1));
        let mut wc = Wc::default();
        assert_eq!(cq.take_one::<false>(&mut wc), 1);
        got.push(wc);
    }
    assert_eq!(m.consumer(), 2, "each take_one frees its slot");
    let mut wcs = [Wc::default(); 8];
    assert_eq!(cq.refresh(8), Ok(4));
    assert_eq!(cq.take_wcs::<false>(&mut wcs), 4);
    got.extend_from_slice(&wcs[..4]);
    for (i, w) in got.iter().enumerate() {
        assert_eq!(*w, want(i), "completion {i}");
    }
    // With immediate data: host order; an invalidated rkey as stored.
    assert_eq!(got[1].imm_data, u32::from_be(0x1122_3344));
    assert_eq!(got[1].wc_flags, WcFlags::WITH_IMM);
    assert_eq!(got[3].imm_data, 0x1122_3344);
    assert_eq!(got[3].wc_flags, WcFlags::WITH_INV | WcFlags::GRH);
    assert_eq!(got[3].invalidated_rkey(), Some(0x1122_3344));
    assert!(wcs[4..].iter().all(|w| *w == Wc::default()), "untouched");
    assert_eq!(cq.refresh(1), Ok(0));
    assert_eq!(m.consumer(), 6);
}

#[test]
fn kernel_wc_flags_become_libibverbs_bits() {
    assert_eq!(wc_flags_from_kernel(0), WcFlags::empty());
    assert_eq!(wc_flags_from_kernel(IB_WC_GRH), WcFlags::GRH);
    assert_eq!(wc_flags_from_kernel(IB_WC_WITH_IMM), WcFlags::WITH_IMM);
    assert_eq!(
        wc_flags_from_kernel(IB_WC_WITH_INVALIDATE),
        WcFlags::WITH_INV
    );
    assert_eq!(wc_flags_from_kernel(IB_WC_IP_CSUM_OK), WcFlags::IP_CSUM_OK);
    // Every combination of the four, and unknown kernel bits are dropped.
    for k in 0..16u32 {
        let f = wc_flags_from_kernel(k | 0xffff_fff0);
        assert_eq!(f.contains(WcFlags::GRH), k & IB_WC_GRH != 0);
        assert_eq!(f.contains(WcFlags::WITH_IMM), k & IB_WC_WITH_IMM != 0);
        assert_eq!(
            f.contains(WcFlags::WITH_INV),
            k & IB_WC_WITH_INVALIDATE != 0
        );
        assert_eq!(f.contains(WcFlags::IP_CSUM_OK), k & IB_WC_IP_CSUM_OK != 0);
        assert_eq!(f.bits() & !0xf, 0);
    }
}

/// `take_with` takes only completions already counted ready (none before `refresh`), copies
/// each slot's first bytes whole (the last two of the 48 included) across the ring's wrap,
/// and frees them with one store of the consumer index.
#[test]
fn take_with_copies_slots_whole_across_the_wrap() {
    let m = FakeMapping::new(6, 2); // 4 slots of 64 bytes
    let mut cq = CompletionQueue::new(open(&m)).unwrap();
    // Move the ring to slot 2 so the next three completions wrap after one.
    for i in 0..2 {
        assert!(m.kernel_produce(wc(i).as_bytes()));
    }
    assert_eq!(cq.poll(&mut [Wc::default(); 2]), Ok(2));
    for i in 0..3 {
        let mut w = wc(10 + i);
        w.port_num = 7 + i as u8;
        assert!(m.kernel_produce(w.as_bytes()));
    }
    // Known ready is all `take_with` takes; nothing is copied before `refresh` counted it.
    let mut out = [UverbsWc::default(); 4];
    assert_eq!(cq.take_with(&mut out, |w: UverbsWc| w), 0);
    assert_eq!(cq.refresh(4), Ok(3));
    let mut fixed = 0;
    let n = cq.take_with(&mut out, |mut w: UverbsWc| {
        fixed += 1;
        w.wc_flags ^= 0x8000_0000;
        w
    });
    assert_eq!((n, fixed), (3, 3));
    for (i, w) in out[..3].iter().enumerate() {
        let mut want = wc(10 + i as u64);
        want.port_num = 7 + i as u8;
        want.wc_flags ^= 0x8000_0000;
        // Every byte of the 48, the last two included, came from its own slot.
        assert_eq!(w.as_bytes(), want.as_bytes(), "completion {i}");
    }
    assert_eq!(
        out[3].as_bytes(),
        UverbsWc::default().as_bytes(),
        "untouched"
    );
    assert_eq!(m.consumer(), 1, "one release store, after the wrap");
    assert_eq!(cq.refresh(1), Ok(0));
}

/// `poll_net_imm` (the C ABI's poll) gives what `poll` gives but immediate data as stored
/// (big-endian), one completion at a time and in a run; an invalidated rkey is as stored in
/// both.
#[test]
fn poll_net_imm_leaves_immediate_data_big_endian() {
    let m = FakeMapping::new(6, 4); // 16 slots of 64 bytes
    let flags = [
        IB_WC_WITH_IMM,
        IB_WC_WITH_IMM | IB_WC_GRH,
        IB_WC_WITH_INVALIDATE,
        0,
    ];
    let cqes: Vec<UverbsWc> = flags
        .iter()
        .cycle()
        .take(8)
        .enumerate()
        .map(|(i, &wc_flags)| UverbsWc {
            wr_id: i as u64,
            ex: 0x1122_3344,
            wc_flags,
            ..Default::default()
        })
        .collect();
    let mut net = CompletionQueue::new(open(&m)).unwrap();
    let mut got = Vec::new();
    for round in 0..2 {
        for c in &cqes[round * 4..round * 4 + 4] {
            assert!(m.kernel_produce(c.as_bytes()));
        }
        let mut one = [Wc::default()];
        assert_eq!(net.poll_net_imm(&mut one), Ok(1));
        got.push(one[0]);
        let mut three = [Wc::default(); 3];
        assert_eq!(net.poll_net_imm(&mut three), Ok(3));
        got.extend_from_slice(&three);
    }
    for (i, w) in got.iter().enumerate() {
        let host = wc_from_kernel(&cqes[i]);
        assert_eq!(w.imm_data, 0x1122_3344, "completion {i}: as stored");
        assert_eq!(
            Wc {
                imm_data: host.imm_data,
                ..*w
            },
            host,
            "completion {i}"
        );
    }
}
