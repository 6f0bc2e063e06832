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

/// The rxe arm of [`Cq::poll`](crate::Cq::poll) once completions are known ready: each slot copied whole into
/// its `Wc` (same layout, asserted above: a few wide loads and stores), the flags word
/// translated in place, one Release store of the consumer index, no second load of the
/// kernel's index. Out of line (a direct call) so `Cq::poll` itself stays small enough to
/// inline.
#[inline(never)]
pub(crate) fn take_cqes(
    shared: &CqShared,
    cq: &mut uverbs_rxe::CompletionQueue,
    wcs: &mut [Wc],
) -> Result<usize> {
    cq.take_raw(wcs, wc_from_slot)
        .map_err(|e| cq_ring_error(shared, e))
}

/// The 8-byte word of `Wc` (and of `ib_uverbs_wc`) that holds `src_qp` and `wc_flags`.
const FLAGS_WORD: usize = std::mem::offset_of!(Wc, wc_flags) / 8;
const _: () = assert!(
    std::mem::offset_of!(Wc, src_qp) == FLAGS_WORD * 8
        && std::mem::offset_of!(Wc, wc_flags) == FLAGS_WORD * 8 + 4
);

/// The 8-byte word of `Wc` (and of `ib_uverbs_wc`) that holds `imm_data` and `qp_num`.
const IMM_WORD: usize = std::mem::offset_of!(Wc, imm_data) / 8;
const _: () = assert!(
    std::mem::offset_of!(Wc, imm_data) == IMM_WORD * 8
        && std::mem::offset_of!(Wc, qp_num) == IMM_WORD * 8 + 4
);

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

/// A `Wc` from the first 48 bytes of an rxe CQ slot, taken as six words so that each moves
/// with one load and one store: every field but the flags and the immediate is already what
/// `struct ibv_wc` says (same layout, asserted above); the kernel's `IB_WC_*` flags are
/// translated inside their word, next to `src_qp`, which is kept as it is, and immediate data
/// turned to host order inside its word, next to `qp_num`.
#[inline(always)]
fn wc_from_slot(mut words: [u64; 6]) -> Wc {
    let (src_qp, kflags) = halves(words[FLAGS_WORD]);
    words[FLAGS_WORD] = join(src_qp, wc_flags_from_kernel(kflags).bits());
    let (ex, qp_num) = halves(words[IMM_WORD]);
    words[IMM_WORD] = join(imm_from_kernel(ex, kflags), qp_num);
    zerocopy::transmute!(words)
}

/// The two `u32`s an 8-byte word holds, in memory order (the one at the lower address
/// first): the same as splitting its native-endian bytes in two, as one shift and one
/// truncation.
#[inline(always)]
fn halves(w: u64) -> (u32, u32) {
    if cfg!(target_endian = "little") {
        (w as u32, (w >> 32) as u32)
    } else {
        ((w >> 32) as u32, w as u32)
    }
}

/// The inverse of [`halves`].
#[inline(always)]
fn join(first: u32, second: u32) -> u64 {
    if cfg!(target_endian = "little") {
        u64::from(first) | (u64::from(second) << 32)
    } else {
        (u64::from(first) << 32) | u64::from(second)
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

    /// `halves`/`join` split a word as its native-endian bytes split: the `u32` at the lower
    /// address first.
    #[test]
    fn halves_are_the_words_two_u32s_in_memory_order() {
        let bytes = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let w = u64::from_ne_bytes(bytes);
        let (a, b) = halves(w);
        assert_eq!(a, u32::from_ne_bytes([1, 2, 3, 4]));
        assert_eq!(b, u32::from_ne_bytes([5, 6, 7, 8]));
        assert_eq!(join(a, b), w);
    }

    /// The whole-slot copy plus the flags fix gives the same `Wc` as the field-by-field
    /// conversion, for every field (the const layout assertions say where; this says what).
    #[test]
    fn whole_slot_copy_matches_the_field_by_field_conversion() {
        use uverbs_uapi::write::IbUverbsWc;
        use zerocopy::FromBytes;
        for flags in 0..16u32 {
            let k = IbUverbsWc {
                wr_id: 0x0102_0304_0506_0708,
                status: 5,
                opcode: 0x81,
                vendor_err: 0x11,
                byte_len: 0x2222,
                ex: 0x3344_5566u32.to_ne_bytes(),
                qp_num: 0x77,
                src_qp: 0x88,
                wc_flags: flags | 0x100,
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
            let w = wc_from_slot(<[u64; 6]>::read_from_bytes(k.as_bytes()).unwrap());
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
