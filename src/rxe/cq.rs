//! The rxe half of a [`Cq`](crate::Cq): mapping the CQ ring the kernel made (at create and after a
//! resize) and turning its slots (the kernel's `struct ib_uverbs_wc`) into [`Wc`]s. The
//! generic `Cq` owns the kernel object and dispatches its rxe arm here.

use crate::channel::MapKind;
use crate::context::Context;
use crate::cq::{CqRing, CqShared};
use crate::error::{Errno, Error, Result};
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};

pub(crate) fn cq_ring(
    ctx: &Context,
    shared: &CqShared,
    offset: u64,
    size: u64,
    op: &'static str,
) -> Result<CqRing> {
    let len = usize::try_from(size).map_err(|_| {
        Error::invalid(
            op,
            shared.label(),
            Errno::INVAL,
            "ring size does not fit in memory",
        )
    })?;
    let map = ctx
        .channel()
        .mmap(offset, len, MapKind::ReadWrite)
        .map_err(|e| Error::os(op, shared.label(), e).with_reason("mmap of the CQ ring failed"))?;
    // `map` is exactly this CQ's ring (the kernel gave its offset and size for this CQ).
    #[allow(unsafe_code)]
    let queue =
        // SAFETY: the CqRing keeps `map` alive as long as the queue; nothing else accesses it.
        unsafe { uverbs_rxe::Queue::from_raw(map.as_ptr(), map.len(), None) }.map_err(|e| {
            Error::invalid(
                op,
                shared.label(),
                Errno::IO,
                format!("bad CQ ring from the kernel: {e}"),
            )
        })?;
    let cq = uverbs_rxe::CompletionQueue::new(queue).map_err(|e| {
        Error::invalid(
            op,
            shared.label(),
            Errno::IO,
            format!("bad CQ ring from the kernel: {e}"),
        )
    })?;
    Ok(CqRing::Rxe { cq, _map: map })
}

#[inline]
pub(crate) fn wc_from_rxe(c: &uverbs_rxe::Cqe) -> Wc {
    Wc {
        wr_id: c.wr_id,
        status: WcStatus(c.status),
        opcode: WcOpcode(c.opcode),
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        imm_data: imm_from_kernel(c.ex, c.wc_flags),
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: wc_flags_from_kernel(c.wc_flags),
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
    }
}

/// The kernel's `enum ib_wc_flags` (what rxe writes into its CQ ring) differs from libibverbs'
/// `enum ibv_wc_flags` in two bits: the kernel has WITH_INVALIDATE at bit 2 and IP_CSUM_OK at
/// bit 3, libibverbs the reverse. Translate so `WcFlags` always means the libibverbs bits.
#[inline]
pub(crate) fn wc_flags_from_kernel(k: u32) -> WcFlags {
    use uverbs_uapi::verbs::{IB_WC_GRH, IB_WC_IP_CSUM_OK, IB_WC_WITH_IMM, IB_WC_WITH_INVALIDATE};
    const {
        assert!(IB_WC_GRH == WcFlags::GRH.bits() && IB_WC_WITH_IMM == WcFlags::WITH_IMM.bits());
        assert!(IB_WC_WITH_INVALIDATE << 1 == WcFlags::WITH_INV.bits());
        assert!(IB_WC_IP_CSUM_OK >> 1 == WcFlags::IP_CSUM_OK.bits());
    }
    // Branch-free: GRH and WITH_IMM keep their bits, the other two swap; other bits dropped.
    WcFlags::from_bits_retain(
        (k & (IB_WC_GRH | IB_WC_WITH_IMM))
            | ((k & IB_WC_WITH_INVALIDATE) << 1)
            | ((k & IB_WC_IP_CSUM_OK) >> 1),
    )
}

// `Wc` (`struct ibv_wc`) and the kernel's `struct ib_uverbs_wc`, which rxe writes at the start
// of each CQ ring slot, have every field at the same offset with the same size; `take_cqes`
// copies a slot into a `Wc` whole and relies on it. Only `wc_flags` differs in meaning (fixed
// after the copy), and `ib_uverbs_wc`'s last two bytes (port_num, reserved) land in `Wc`'s
// trailing padding.
const _: () = {
    use std::mem::{offset_of, size_of};
    use uverbs_uapi::write::IbUverbsWc as K;
    const fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
        size_of::<F>()
    }
    macro_rules! same {
        ($w:ident, $k:ident) => {
            assert!(offset_of!(Wc, $w) == offset_of!(K, $k));
            assert!(field_size(|w: &Wc| &w.$w) == field_size(|k: &K| &k.$k));
        };
    }
    assert!(size_of::<Wc>() == size_of::<K>());
    assert!(size_of::<Wc>() == uverbs_rxe::CQE_MIN_SIZE);
    same!(wr_id, wr_id);
    same!(status, status);
    same!(opcode, opcode);
    same!(vendor_err, vendor_err);
    same!(byte_len, byte_len);
    same!(imm_data, ex);
    same!(qp_num, qp_num);
    same!(src_qp, src_qp);
    same!(wc_flags, wc_flags);
    same!(pkey_index, pkey_index);
    same!(slid, slid);
    same!(sl, sl);
    same!(dlid_path_bits, dlid_path_bits);
    assert!(offset_of!(K, port_num) == offset_of!(Wc, dlid_path_bits) + 1);
};

/// The rxe arm of [`Cq::poll`](crate::Cq::poll) once completions are known ready: each slot
/// copied whole into its `Wc` (same layout, asserted above: three 16-byte loads and stores),
/// one Release store of the consumer index, no second load of the kernel's index; then the
/// completions whose kernel flags need it (see [`needs_fix`]) fixed in place. Out of line (a
/// direct call) so `Cq::poll` itself stays small enough to inline.
#[inline(never)]
pub(crate) fn take_cqes(cq: &mut uverbs_rxe::CompletionQueue, wcs: &mut [Wc]) -> usize {
    let n = cq.take_raw(wcs, wc_as_copied);
    // `n <= wcs.len()` (`take_raw` fills a prefix of `wcs`): the empty default never applies.
    for wc in wcs.get_mut(..n).unwrap_or_default() {
        if needs_fix(wc) {
            fix_in_place(wc);
        }
    }
    n
}

/// The rxe arm of [`Cq::poll`](crate::Cq::poll) when it takes one completion (one asked for,
/// or one ready): inline in the caller, the slot copied into `wc` whole and the consumer
/// index stored; then, only if the copied flags need it, the fix-up, out of line.
#[inline(always)]
pub(crate) fn take_one(cq: &mut uverbs_rxe::CompletionQueue, wc: &mut Wc) -> usize {
    let n = cq.take_raw(std::slice::from_mut(wc), wc_as_copied);
    if n == 1 && needs_fix(wc) {
        fix_out_of_line(wc);
    }
    n
}

/// The first 48 bytes of an rxe CQ slot (`struct ib_uverbs_wc`), as a `Wc` of the same
/// layout (asserted above), moved as six words: every field is already what `struct
/// ibv_wc` says except, when [`needs_fix`] says so, the flags and the immediate data.
#[inline(always)]
fn wc_as_copied(words: [u64; 6]) -> Wc {
    zerocopy::transmute!(words)
}

/// Whether a `Wc` copied whole from a slot needs [`fix_in_place`]: its flags (the kernel's
/// `IB_WC_*` bits, as copied) hold something besides GRH. A send completion, and most
/// receives, have none (GRH has the same bit in both enums, and without `WITH_IMM` there is
/// no immediate to turn), so for them the copy is the whole conversion.
#[inline(always)]
fn needs_fix(wc: &Wc) -> bool {
    wc.wc_flags.bits() & !uverbs_uapi::verbs::IB_WC_GRH != 0
}

/// [`fix_in_place`] out of line (for the inline one-completion path).
#[inline(never)]
fn fix_out_of_line(wc: &mut Wc) {
    fix_in_place(wc)
}

/// Turns a `Wc` copied whole from a slot into the `Wc` it means: the kernel's flags
/// translated to libibverbs' bits, immediate data (stored big-endian) to host order.
#[inline(always)]
fn fix_in_place(wc: &mut Wc) {
    let kflags = wc.wc_flags.bits();
    wc.imm_data = imm_from_kernel(wc.imm_data, kflags);
    wc.wc_flags = wc_flags_from_kernel(kflags);
}

/// The `ex` union of an rxe completion as `Wc::imm_data` holds it: immediate data (stored
/// big-endian, as it travels) in host order, an invalidated rkey (stored host order) as it is.
#[inline(always)]
fn imm_from_kernel(ex: u32, kernel_flags: u32) -> u32 {
    if kernel_flags & uverbs_uapi::verbs::IB_WC_WITH_IMM != 0 {
        u32::from_be(ex)
    } else {
        ex
    }
}

#[cold]
#[inline(never)]
pub(crate) fn cq_ring_error(shared: &CqShared, e: uverbs_rxe::RingError) -> Error {
    Error::invalid(
        "poll_cq",
        shared.label(),
        Errno::IO,
        format!("CQ ring corrupt: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use uverbs_uapi::verbs::{IB_WC_GRH, IB_WC_IP_CSUM_OK, IB_WC_WITH_IMM, IB_WC_WITH_INVALIDATE};
    use zerocopy::IntoBytes;

    /// The whole-slot copy plus the fix-up, as `take_cqes` and `take_one` do it, gives the
    /// same `Wc` as the field-by-field conversion, for every field (the const layout
    /// assertions say where; this says what), and the plain copy is taken exactly when no
    /// flag but GRH is set.
    #[test]
    fn whole_slot_copy_matches_the_field_by_field_conversion() {
        use uverbs_uapi::write::IbUverbsWc;
        use zerocopy::FromBytes;
        // Each of the four kernel flags alone and together, without and with an unknown bit
        // (no flag but GRH takes the plain copy; everything else the translation).
        for flags in (0..16u32).flat_map(|f| [f, f | 0x100]) {
            let k = IbUverbsWc {
                wr_id: 0x0102_0304_0506_0708,
                status: 5,
                opcode: 0x81,
                vendor_err: 0x11,
                byte_len: 0x2222,
                ex: 0x3344_5566u32.to_ne_bytes(),
                qp_num: 0x77,
                src_qp: 0x88,
                wc_flags: flags,
                pkey_index: 0x99,
                slid: 0xaa,
                sl: 0xb,
                dlid_path_bits: 0xc,
                port_num: 1,
                reserved: 0xdd,
            };
            let c = uverbs_rxe::Cqe {
                wr_id: k.wr_id,
                status: k.status,
                opcode: k.opcode,
                vendor_err: k.vendor_err,
                byte_len: k.byte_len,
                ex: 0x3344_5566,
                qp_num: k.qp_num,
                src_qp: k.src_qp,
                wc_flags: k.wc_flags,
                pkey_index: k.pkey_index,
                slid: k.slid,
                sl: k.sl,
                dlid_path_bits: k.dlid_path_bits,
                port_num: k.port_num,
            };
            let mut w = wc_as_copied(<[u64; 6]>::read_from_bytes(k.as_bytes()).unwrap());
            assert_eq!(
                needs_fix(&w),
                flags & !IB_WC_GRH != 0,
                "kernel flags {flags:#x}"
            );
            if needs_fix(&w) {
                fix_in_place(&mut w);
            }
            assert_eq!(w, wc_from_rxe(&c), "kernel flags {flags:#x}");
            // Immediate data (stored big-endian) in host order; an rkey as stored.
            let want = if flags & IB_WC_WITH_IMM != 0 {
                u32::from_be(0x3344_5566)
            } else {
                0x3344_5566
            };
            assert_eq!(w.imm_data, want, "kernel flags {flags:#x}");
            assert_eq!(w.wc_flags, wc_flags_from_kernel(flags));
        }
    }

    /// `take_one` (inline, its fix-up out of line) and `take_cqes` (a run, fixed up after the
    /// copy) turn ring slots into the `Wc`s the field-by-field conversion gives, plain ones
    /// and ones with flags to translate alike, and free exactly the slots they took.
    #[test]
    #[allow(unsafe_code)]
    fn take_one_and_take_cqes_give_the_converted_completions() {
        use uverbs_uapi::rxe::{
            RxeQueueBuf, RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET, RXE_QUEUE_BUF_DATA_OFFSET,
            RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET,
        };
        use uverbs_uapi::write::IbUverbsWc;
        // 8 slots of 64 bytes behind the header, as the kernel lays out a CQ ring.
        let mut words = vec![0u64; (RXE_QUEUE_BUF_DATA_OFFSET + 8 * 64) / 8];
        let hdr = RxeQueueBuf {
            log2_elem_size: 6,
            index_mask: 7,
            ..Default::default()
        };
        words.as_mut_bytes()[..std::mem::size_of::<RxeQueueBuf>()].copy_from_slice(hdr.as_bytes());
        let cqes: Vec<IbUverbsWc> = [
            0,
            IB_WC_WITH_IMM,
            IB_WC_GRH,
            IB_WC_WITH_INVALIDATE | IB_WC_GRH,
        ]
        .iter()
        .cycle()
        .take(6)
        .enumerate()
        .map(|(i, &wc_flags)| IbUverbsWc {
            wr_id: 100 + i as u64,
            opcode: 0x80,
            byte_len: 8,
            ex: 0x1122_3344u32.to_ne_bytes(),
            qp_num: 5,
            wc_flags,
            ..Default::default()
        })
        .collect();
        let bytes = words.as_mut_bytes();
        for (i, c) in cqes.iter().enumerate() {
            let at = RXE_QUEUE_BUF_DATA_OFFSET + 64 * i;
            bytes[at..at + 48].copy_from_slice(c.as_bytes());
        }
        bytes[RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET..][..4].copy_from_slice(&6u32.to_ne_bytes());
        let len = bytes.len();
        let base = std::ptr::NonNull::new(bytes.as_mut_ptr()).unwrap();
        // SAFETY: `words` is `len` bytes, 8-aligned, with a valid queue header, and outlives
        // `cq` (dropped at the end of this block, before `words` is read again); nothing else
        // touches it meanwhile.
        let q = unsafe { uverbs_rxe::Queue::from_raw(base, len, None) }.unwrap();
        let want = |i: usize| {
            let k = &cqes[i];
            wc_from_rxe(&uverbs_rxe::Cqe {
                wr_id: k.wr_id,
                status: k.status,
                opcode: k.opcode,
                vendor_err: k.vendor_err,
                byte_len: k.byte_len,
                ex: u32::from_ne_bytes(k.ex),
                qp_num: k.qp_num,
                src_qp: k.src_qp,
                wc_flags: k.wc_flags,
                pkey_index: k.pkey_index,
                slid: k.slid,
                sl: k.sl,
                dlid_path_bits: k.dlid_path_bits,
                port_num: k.port_num,
            })
        };
        {
            let mut cq = uverbs_rxe::CompletionQueue::new(q).unwrap();
            let mut got = Vec::new();
            for _ in 0..2 {
                assert_eq!(cq.refresh(1), Ok(1));
                let mut wc = Wc::default();
                assert_eq!(take_one(&mut cq, &mut wc), 1);
                got.push(wc);
            }
            let mut wcs = [Wc::default(); 8];
            assert_eq!(cq.refresh(8), Ok(4));
            assert_eq!(take_cqes(&mut cq, &mut wcs), 4);
            got.extend_from_slice(&wcs[..4]);
            for (i, w) in got.iter().enumerate() {
                assert_eq!(*w, want(i), "completion {i}");
            }
            // With immediate data: host order; an invalidated rkey as stored.
            assert_eq!(got[1].imm_data, 0x1122_3344u32.to_be());
            assert_eq!(got[3].imm_data, 0x1122_3344);
            assert_eq!(got[3].wc_flags, WcFlags::WITH_INV | WcFlags::GRH);
            assert!(wcs[4..].iter().all(|w| *w == Wc::default()), "untouched");
            assert_eq!(cq.refresh(1), Ok(0));
        }
        let consumer = u32::from_ne_bytes(
            words.as_bytes()[RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET..][..4]
                .try_into()
                .unwrap(),
        );
        assert_eq!(consumer, 6);
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
}
