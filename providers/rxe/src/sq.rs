//! Send queue: builds `struct rxe_send_wqe` elements in the mmapped SQ ring.
//!
//! Two ways to post, mirroring libibverbs:
//! - [`SendQueue::post`] takes one complete [`SendWr`] (`ibv_post_send` for one WR); call it per
//!   WR of a list, then [`SendQueue::publish`] once.
//! - The `wr_*` methods mirror the `ibv_wr_*` extended API: [`SendQueue::wr_start`], one builder
//!   per WQE ([`SendQueue::wr_send`], [`SendQueue::wr_rdma_write`], …), setters that complete the
//!   last WQE ([`SendQueue::wr_set_sge_list`], [`SendQueue::wr_set_inline_data`],
//!   [`SendQueue::wr_set_ud_addr`]), then [`SendQueue::wr_complete`] or [`SendQueue::wr_abort`].
//!
//! Everything is validated before the producer index moves (what bounds a slot write, before
//! the slot is written; the total length and an atomic's 8 bytes as the SGEs are copied into
//! the still-unpublished slot); nothing here makes a syscall. After a
//! publish the caller must kick the kernel: a legacy `write()` of `IB_USER_VERBS_CMD_POST_SEND`
//! with `wr_count = 0` for this QP (rdma-core's `post_send_db`).

use core::mem::{offset_of, size_of};

use uverbs_uapi::rxe::{
    RxeSendWqe, RxeSendWr, RxeSendWrAtomic, RxeSendWrMw, RxeSendWrRdma, RxeSendWrUd,
    RXE_WQE_STATE_POSTED,
};
use uverbs_wr::{AccessFlags, QpType, SendFlags, SendWr, Sge, UdDest, WrData, WrOp};
use zerocopy::IntoBytes;

use crate::error::{RingError, WrError};
use crate::producer::Producer;
use crate::ring::{Queue, SlotMut};

/// The bytes an atomic write moves (`dma.length` of its WQE).
const ATOMIC_WRITE_LEN: u32 = 8;
/// `IB_SEND_INLINE`: set in `send_flags` when the data is inline in the WQE.
const IB_SEND_INLINE: u32 = 1 << 3;
/// Offset of the data area (SGE array / inline bytes) in a send WQE slot.
const SQ_DATA_OFFSET: usize = size_of::<RxeSendWqe>();
const SQ_DMA_OFFSET: usize = offset_of!(RxeSendWqe, dma);
const SQ_WR_ID_OFFSET: usize = offset_of!(RxeSendWr, wr_id);
const SQ_OPCODE_OFFSET: usize = offset_of!(RxeSendWr, opcode);
const SQ_FLAGS_OFFSET: usize = offset_of!(RxeSendWr, send_flags);
const SQ_EX_OFFSET: usize = offset_of!(RxeSendWr, ex);
const SQ_WR_UNION_OFFSET: usize = offset_of!(RxeSendWr, wr);
const SQ_STATE_OFFSET: usize = offset_of!(RxeSendWqe, state);
const SQ_IOVA_OFFSET: usize = offset_of!(RxeSendWqe, iova);
// The `RxeSendWr` offsets above are slot offsets because `wr` starts the WQE.
const _: () = assert!(offset_of!(RxeSendWqe, wr) == 0);
// `dma` ends the fixed WQE: zeroing up to it and writing all of `dma` covers every byte.
const _: () = assert!(SQ_DMA_OFFSET + size_of::<uverbs_uapi::rxe::RxeDmaInfo>() == SQ_DATA_OFFSET);

/// Send opcode, numbered as `IB_UVERBS_WR_*` / `IBV_WR_*` (the value written to the WQE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SendOpcode {
    /// `IBV_WR_RDMA_WRITE`.
    RdmaWrite = 0,
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`.
    RdmaWriteWithImm = 1,
    /// `IBV_WR_SEND`.
    Send = 2,
    /// `IBV_WR_SEND_WITH_IMM`.
    SendWithImm = 3,
    /// `IBV_WR_RDMA_READ`.
    RdmaRead = 4,
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`.
    AtomicCmpAndSwp = 5,
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`.
    AtomicFetchAndAdd = 6,
    /// `IBV_WR_LOCAL_INV`.
    LocalInv = 7,
    /// `IBV_WR_BIND_MW`.
    BindMw = 8,
    /// `IBV_WR_SEND_WITH_INV`.
    SendWithInv = 9,
    /// `IBV_WR_ATOMIC_WRITE` (kernels 6.2 and later; older ones fail the WQE).
    AtomicWrite = 15,
}

/// What each opcode may do, one byte per `SendOpcode` value: the checks on the post path are
/// a table load and a bit test instead of a `match` each.
const OP_RC: u8 = 1 << 0;
const OP_UC: u8 = 1 << 1;
const OP_UD: u8 = 1 << 2;
const OP_DATA: u8 = 1 << 3;
const OP_INLINE: u8 = 1 << 4;
const OP_ATOMIC: u8 = 1 << 5;
/// Operands with a rule of their own (an atomic's aligned address, a bind without
/// `ZERO_BASED`): one bit test sends only these to the operand checks.
const OP_OPERANDS: u8 = 1 << 6;
const OP_PROPS: [u8; 16] = [
    // RdmaWrite
    OP_RC | OP_UC | OP_DATA | OP_INLINE,
    // RdmaWriteWithImm
    OP_RC | OP_UC | OP_DATA | OP_INLINE,
    // Send
    OP_RC | OP_UC | OP_UD | OP_DATA | OP_INLINE,
    // SendWithImm
    OP_RC | OP_UC | OP_UD | OP_DATA | OP_INLINE,
    // RdmaRead
    OP_RC | OP_DATA,
    // AtomicCmpAndSwp
    OP_RC | OP_DATA | OP_ATOMIC | OP_OPERANDS,
    // AtomicFetchAndAdd
    OP_RC | OP_DATA | OP_ATOMIC | OP_OPERANDS,
    // LocalInv
    OP_RC | OP_UC,
    // BindMw
    OP_RC | OP_UC | OP_OPERANDS,
    // SendWithInv
    OP_RC | OP_UC | OP_DATA | OP_INLINE,
    // 10..=14: IBV_WR_TSO, IBV_WR_DRIVER1, IBV_WR_FLUSH and two unused numbers, which rxe
    // does not post (no `WrOp` has them).
    0,
    0,
    0,
    0,
    0,
    // AtomicWrite: the 8 bytes are in the WQE (no SGE, not inline); an operand rule of its
    // own (the aligned address, and the WQE's `dma` written from the operand), so never on
    // the fast path.
    OP_RC | OP_OPERANDS,
];

/// The opcode value of `op` (`SendOpcode::of(op) as u32`) and its [`OP_PROPS`] entry, from
/// one table load: each arm is a constant (opcode in the low byte, properties above), which
/// the compiler turns into a lookup by `op`'s variant instead of two dependent lookups.
#[inline(always)]
fn opcode_props(op: &WrOp) -> (u32, u8) {
    const fn e(o: SendOpcode) -> u16 {
        (o as u16) | ((OP_PROPS[o as usize] as u16) << 8)
    }
    let v = match op {
        WrOp::Send => const { e(SendOpcode::Send) },
        WrOp::SendWithImm { .. } => const { e(SendOpcode::SendWithImm) },
        WrOp::SendWithInv { .. } => const { e(SendOpcode::SendWithInv) },
        WrOp::RdmaWrite { .. } => const { e(SendOpcode::RdmaWrite) },
        WrOp::RdmaWriteWithImm { .. } => const { e(SendOpcode::RdmaWriteWithImm) },
        WrOp::RdmaRead { .. } => const { e(SendOpcode::RdmaRead) },
        WrOp::AtomicCmpAndSwp { .. } => const { e(SendOpcode::AtomicCmpAndSwp) },
        WrOp::AtomicFetchAndAdd { .. } => const { e(SendOpcode::AtomicFetchAndAdd) },
        WrOp::LocalInv { .. } => const { e(SendOpcode::LocalInv) },
        WrOp::BindMw { .. } => const { e(SendOpcode::BindMw) },
        WrOp::AtomicWrite { .. } => const { e(SendOpcode::AtomicWrite) },
    };
    (u32::from(v & 0xff), (v >> 8) as u8)
}

/// `qp_type`'s bit in [`OP_PROPS`]; 0 for a type rxe has no send queue of.
const fn qp_type_bit(qp_type: QpType) -> u8 {
    match qp_type {
        QpType::Rc => OP_RC,
        QpType::Uc => OP_UC,
        QpType::Ud => OP_UD,
        QpType::RawPacket | QpType::XrcSend | QpType::XrcRecv | QpType::Srd => 0,
    }
}

impl SendOpcode {
    /// The opcode written to the WQE for `op`.
    pub fn of(op: &WrOp) -> Self {
        match op {
            WrOp::Send => SendOpcode::Send,
            WrOp::SendWithImm { .. } => SendOpcode::SendWithImm,
            WrOp::SendWithInv { .. } => SendOpcode::SendWithInv,
            WrOp::RdmaWrite { .. } => SendOpcode::RdmaWrite,
            WrOp::RdmaWriteWithImm { .. } => SendOpcode::RdmaWriteWithImm,
            WrOp::RdmaRead { .. } => SendOpcode::RdmaRead,
            WrOp::AtomicCmpAndSwp { .. } => SendOpcode::AtomicCmpAndSwp,
            WrOp::AtomicFetchAndAdd { .. } => SendOpcode::AtomicFetchAndAdd,
            WrOp::LocalInv { .. } => SendOpcode::LocalInv,
            WrOp::BindMw { .. } => SendOpcode::BindMw,
            WrOp::AtomicWrite { .. } => SendOpcode::AtomicWrite,
        }
    }

    #[inline(always)]
    fn props(self) -> u8 {
        // The discriminants are 0..=9 and 15, indices of the table (asserted in the tests).
        OP_PROPS[self as usize]
    }

    /// Whether a QP of `qp_type` accepts this opcode (the rxe provider's send-ops lists).
    #[inline]
    pub fn supported_on(self, qp_type: QpType) -> bool {
        self.props() & qp_type_bit(qp_type) != 0
    }

    /// Whether the data may be inline (sends and RDMA writes).
    #[inline]
    pub fn allows_inline(self) -> bool {
        self.props() & OP_INLINE != 0
    }

    /// Whether the opcode moves data at all (local invalidate and MW bind do not).
    #[inline]
    pub fn takes_data(self) -> bool {
        self.props() & OP_DATA != 0
    }

    /// Whether the opcode is an 8-byte atomic that returns the old value into its SGE
    /// (compare-and-swap, fetch-and-add; not atomic write, whose 8 bytes are in the WQE).
    #[inline]
    pub fn is_atomic(self) -> bool {
        self.props() & OP_ATOMIC != 0
    }
}

/// Data of a WQE as the queue writes it: a work request's [`WrData`], or the pieces
/// `ibv_wr_set_inline_data_list` copies back to back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Payload<'a> {
    /// Scatter/gather list of registered memory (`sg_list`/`num_sge`); may be empty.
    Sge(&'a [Sge]),
    /// Bytes copied into the WQE now (`IBV_SEND_INLINE`); the buffer is free on return.
    Inline(&'a [u8]),
    /// Several pieces copied back to back into the WQE (`ibv_wr_set_inline_data_list`).
    InlineList(&'a [&'a [u8]]),
}

impl<'a> From<WrData<'a>> for Payload<'a> {
    #[inline(always)]
    fn from(d: WrData<'a>) -> Self {
        match d {
            WrData::Sge(s) => Payload::Sge(s),
            WrData::Inline(d) => Payload::Inline(d),
        }
    }
}

/// Limits of a send queue, as the kernel returned them in the CREATE_QP response
/// (`ib_uverbs_create_qp_resp.max_send_sge` / `max_inline_data`), and the QP's domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendQueueCaps {
    /// QP transport type (RC, UC or UD).
    pub qp_type: QpType,
    /// The QP's protection domain ([`uverbs_wr::AddressHandle::domain`]): a UD send's address
    /// handle must be of it.
    pub domain: usize,
    /// Maximum SGEs per send WQE.
    pub max_send_sge: u32,
    /// Maximum inline bytes per send WQE.
    pub max_inline_data: u32,
}

/// [`SendQueueCaps`] but the domain.
#[derive(Clone, Copy, Debug)]
struct Limits {
    qp_type: QpType,
    max_send_sge: u32,
    max_inline_data: u32,
}

/// Shadow of the WQE the `wr_*` API built last, so setters and the final checks need not read
/// ring memory back.
#[derive(Clone, Copy, Debug)]
struct Current {
    index: u32,
    opcode: SendOpcode,
    flags: u32,
    length: u32,
    has_ud: bool,
}

#[derive(Clone, Copy, Debug)]
struct Batch {
    start: u32,
    err: Option<WrError>,
    cur: Option<Current>,
}

/// The send queue of an rxe QP over its mmapped SQ ring.
///
/// Not `Sync`; take `&mut` to post. One owner (or a lock around it) per QP, as in rdma-core,
/// which holds the SQ spinlock across a post.
#[doc(alias = "rxe_wq")]
#[doc(alias = "ibv_qp_ex")]
#[derive(Debug)]
pub struct SendQueue {
    p: Producer,
    /// The caps but the domain (kept apart: the limits' padding then takes `qp_bit` and
    /// `fast`).
    caps: Limits,
    /// [`SendQueueCaps::domain`].
    domain: usize,
    /// `caps.qp_type`'s bit in [`OP_PROPS`], computed once.
    qp_bit: u8,
    /// What [`SendQueue::post_fast`] takes: `qp_bit` on a connected QP with no `wr_*` batch
    /// open, [`FAST_OFF`] otherwise (a UD QP, an open batch). Kept by [`SendQueue::set_batch`],
    /// the one place `batch` changes.
    fast: u8,
    batch: Option<Batch>,
}

/// [`SendQueue::fast`] when the fast path takes nothing: a bit no entry of [`OP_PROPS`] has, so
/// `props & (FAST_OFF | OP_OPERANDS) == FAST_OFF` never holds.
const FAST_OFF: u8 = 1 << 7;
const _: () = {
    let mut i = 0;
    while i < OP_PROPS.len() {
        assert!(OP_PROPS[i] & FAST_OFF == 0);
        i += 1;
    }
};

/// Length check: total fits the WQE's `u32` length.
fn check_len(total: u64) -> Result<u32, WrError> {
    u32::try_from(total).map_err(|_| WrError::LengthOverflow { length: total })
}

/// Writes `bytes` at `offset` of `slot`; the range was proven to fit by validation against
/// caps that [`SendQueue::new`] checked against the element size, and is checked again here.
#[inline(always)]
fn put_in(slot: &mut SlotMut<'_>, offset: usize, bytes: &[u8]) -> Result<(), WrError> {
    if slot.write(offset, bytes) {
        Ok(())
    } else {
        Err(WrError::Ring(RingError::ElemTooSmall {
            need: offset.saturating_add(bytes.len()),
            found: slot.len(),
        }))
    }
}

/// Writes the fixed part of a send WQE for `op` (whose opcode is `opcode`) into `slot`: the
/// whole `rxe_send_wqe` zeroed, then the fields `op` sets (the data area and `dma` are the
/// caller's). The bytes are those of a zeroed [`RxeSendWqe`] with these fields set, without
/// building one on the stack and copying it into the slot.
#[inline(always)]
fn write_header(
    slot: &mut SlotMut<'_>,
    wr_id: u64,
    opcode: SendOpcode,
    flags: u32,
    op: &WrOp,
) -> Result<(), WrError> {
    write_header_zeroed(slot, SQ_DATA_OFFSET, wr_id, opcode as u32, flags, op)
}

/// [`write_header`] zeroing only the first `zero` bytes of the WQE: a caller that writes the
/// rest itself (all of `dma`, with [`write_dma`]) passes [`SQ_DMA_OFFSET`].
#[inline(always)]
fn write_header_zeroed(
    slot: &mut SlotMut<'_>,
    zero: usize,
    wr_id: u64,
    opcode: u32,
    flags: u32,
    op: &WrOp,
) -> Result<(), WrError> {
    if !slot.zero(0, zero) {
        return Err(WrError::Ring(RingError::ElemTooSmall {
            need: SQ_DATA_OFFSET,
            found: slot.len(),
        }));
    }
    put_in(slot, SQ_WR_ID_OFFSET, &wr_id.to_ne_bytes())?;
    put_in(slot, SQ_OPCODE_OFFSET, &opcode.to_ne_bytes())?;
    put_in(slot, SQ_FLAGS_OFFSET, &flags.to_ne_bytes())?;
    put_in(slot, SQ_STATE_OFFSET, &RXE_WQE_STATE_POSTED.to_ne_bytes())?;
    match *op {
        WrOp::Send => Ok(()),
        WrOp::SendWithImm { imm_data } => {
            // Big-endian, as `RxeSendWr::set_imm_data` stores it.
            put_in(slot, SQ_EX_OFFSET, &imm_data.to_be_bytes())
        }
        WrOp::SendWithInv { invalidate_rkey } | WrOp::LocalInv { invalidate_rkey } => {
            put_in(slot, SQ_EX_OFFSET, &invalidate_rkey.to_ne_bytes())
        }
        WrOp::RdmaWrite { remote_addr, rkey } | WrOp::RdmaRead { remote_addr, rkey } => {
            put_rdma(slot, remote_addr, rkey)
        }
        WrOp::RdmaWriteWithImm {
            remote_addr,
            rkey,
            imm_data,
        } => {
            put_rdma(slot, remote_addr, rkey)?;
            put_in(slot, SQ_EX_OFFSET, &imm_data.to_be_bytes())
        }
        WrOp::AtomicCmpAndSwp {
            remote_addr,
            rkey,
            compare,
            swap,
        } => put_atomic(
            slot,
            &RxeSendWrAtomic {
                remote_addr,
                compare_add: compare,
                swap,
                rkey,
                reserved: 0,
            },
        ),
        WrOp::AtomicFetchAndAdd {
            remote_addr,
            rkey,
            add,
        } => put_atomic(
            slot,
            &RxeSendWrAtomic {
                remote_addr,
                compare_add: add,
                swap: 0,
                rkey,
                reserved: 0,
            },
        ),
        WrOp::AtomicWrite {
            remote_addr,
            rkey,
            value,
        } => {
            // As `wr.rdma`, with the 8 bytes in the data area (`dma.atomic_wr`, which shares
            // its offset with the SGE array and inline data); the caller writes `dma` with
            // length 8 and no SGE.
            put_rdma(slot, remote_addr, rkey)?;
            put_in(slot, SQ_DATA_OFFSET, &value)
        }
        WrOp::BindMw {
            mw_rkey,
            new_rkey,
            mr_lkey,
            addr,
            length,
            access,
        } => put_in(
            slot,
            SQ_WR_UNION_OFFSET,
            RxeSendWrMw {
                addr,
                length,
                mr_lkey,
                mw_rkey,
                rkey: new_rkey,
                access: access.bits(),
            }
            .as_bytes(),
        ),
    }
}

/// `wr.rdma` and its copy in `iova`.
#[inline(always)]
fn put_rdma(slot: &mut SlotMut<'_>, remote_addr: u64, rkey: u32) -> Result<(), WrError> {
    let rdma = RxeSendWrRdma {
        remote_addr,
        rkey,
        reserved: 0,
    };
    put_in(slot, SQ_WR_UNION_OFFSET, rdma.as_bytes())?;
    put_in(slot, SQ_IOVA_OFFSET, &remote_addr.to_ne_bytes())
}

/// `wr.atomic` and its remote address in `iova`.
#[inline(always)]
fn put_atomic(slot: &mut SlotMut<'_>, atomic: &RxeSendWrAtomic) -> Result<(), WrError> {
    put_in(slot, SQ_WR_UNION_OFFSET, atomic.as_bytes())?;
    put_in(slot, SQ_IOVA_OFFSET, &atomic.remote_addr.to_ne_bytes())
}

/// Writes the data area for `payload`; returns `num_sge`. SGEs go one by one, each a
/// fixed-size 16-byte copy (a call to `memcpy` of a run-time length costs more than the one
/// or few SGEs a WR has).
#[inline(always)]
fn write_payload(slot: &mut SlotMut<'_>, payload: &Payload<'_>) -> Result<u32, WrError> {
    match payload {
        Payload::Sge(sges) => {
            let mut off = SQ_DATA_OFFSET;
            for sge in sges.iter() {
                put_in(slot, off, sge.as_bytes())?;
                off += size_of::<Sge>();
            }
            // sges.len() <= max_send_sge (a u32) was checked.
            Ok(sges.len() as u32)
        }
        Payload::Inline(data) => {
            put_in(slot, SQ_DATA_OFFSET, data)?;
            Ok(0)
        }
        Payload::InlineList(list) => {
            let mut off = SQ_DATA_OFFSET;
            for d in list.iter() {
                put_in(slot, off, d)?;
                off += d.len();
            }
            Ok(0)
        }
    }
}

/// `dma`: the length to move, all of it still to go, `num_sge` SGEs, from the first.
#[inline(always)]
fn write_dma(slot: &mut SlotMut<'_>, length: u32, num_sge: u32) -> Result<(), WrError> {
    let dma = uverbs_uapi::rxe::RxeDmaInfo {
        length,
        resid: length,
        cur_sge: 0,
        num_sge,
        sge_offset: 0,
        reserved: 0,
    };
    put_in(slot, SQ_DMA_OFFSET, dma.as_bytes())
}

impl SendQueue {
    /// Wraps a mapped SQ ring. Fails if the element size cannot hold a send WQE with
    /// `caps.max_send_sge` SGEs or `caps.max_inline_data` inline bytes, or if the ring's indices
    /// are out of range.
    pub fn new(queue: Queue, caps: SendQueueCaps) -> Result<Self, RingError> {
        if qp_type_bit(caps.qp_type) == 0 {
            return Err(RingError::UnsupportedQpType {
                qp_type: caps.qp_type,
            });
        }
        let elem = queue.elem_size();
        if elem < SQ_DATA_OFFSET {
            return Err(RingError::ElemTooSmall {
                need: SQ_DATA_OFFSET,
                found: elem,
            });
        }
        let room = elem - SQ_DATA_OFFSET;
        let fits_sge = u32::try_from(room / size_of::<Sge>()).unwrap_or(u32::MAX);
        let fits_inline = u32::try_from(room).unwrap_or(u32::MAX);
        if caps.max_send_sge > fits_sge {
            return Err(RingError::CapsExceedSlot {
                cap: "max_send_sge",
                requested: caps.max_send_sge,
                fits: fits_sge,
            });
        }
        if caps.max_inline_data > fits_inline {
            return Err(RingError::CapsExceedSlot {
                cap: "max_inline_data",
                requested: caps.max_inline_data,
                fits: fits_inline,
            });
        }
        let qp_bit = qp_type_bit(caps.qp_type);
        Ok(SendQueue {
            p: Producer::new(queue)?,
            caps: Limits {
                qp_type: caps.qp_type,
                max_send_sge: caps.max_send_sge,
                max_inline_data: caps.max_inline_data,
            },
            domain: caps.domain,
            qp_bit,
            fast: Self::fast_bit(caps.qp_type, false),
            batch: None,
        })
    }

    /// [`SendQueue::fast`] for a QP of `qp_type`, with or without a batch open.
    const fn fast_bit(qp_type: QpType, batch_open: bool) -> u8 {
        match qp_type {
            QpType::Ud => FAST_OFF,
            _ if batch_open => FAST_OFF,
            t => qp_type_bit(t),
        }
    }

    /// Opens or closes a `wr_*` batch, keeping [`SendQueue::fast`] in step with it.
    #[inline]
    fn set_batch(&mut self, batch: Option<Batch>) {
        self.fast = Self::fast_bit(self.caps.qp_type, batch.is_some());
        self.batch = batch;
    }

    /// The limits this queue enforces.
    pub fn caps(&self) -> SendQueueCaps {
        SendQueueCaps {
            qp_type: self.caps.qp_type,
            domain: self.domain,
            max_send_sge: self.caps.max_send_sge,
            max_inline_data: self.caps.max_inline_data,
        }
    }

    /// The private producer index: the slot (`& index_mask`) the next WQE is written to.
    /// Moves with each WQE posted (or built in a `wr_*` batch) and back to the batch's start
    /// when a batch is aborted or refused.
    #[inline]
    pub fn producer_index(&self) -> u32 {
        self.p.prod
    }

    /// The underlying ring.
    pub fn queue(&self) -> &Queue {
        &self.p.q
    }

    /// WQEs written by [`Self::post`] (or a completed batch) but not yet published.
    pub fn pending(&self) -> u32 {
        self.p.pending()
    }

    /// WQEs the kernel has not consumed yet (published or not), after reloading its consumer
    /// index.
    pub fn outstanding(&mut self) -> Result<u32, RingError> {
        self.p.refresh()?;
        Ok(self.p.outstanding())
    }

    // ----- validation ------------------------------------------------------------------------

    #[inline]
    fn check_opcode(&self, op: &WrOp) -> Result<SendOpcode, WrError> {
        let opcode = SendOpcode::of(op);
        let props = opcode.props();
        if props & self.qp_bit == 0 {
            return Err(WrError::OpcodeNotSupported {
                opcode,
                qp_type: self.caps.qp_type,
            });
        }
        if props & OP_OPERANDS == 0 {
            return Ok(opcode);
        }
        Self::check_operands(op).map(|()| opcode)
    }

    /// The operand rules of the opcodes marked [`OP_OPERANDS`].
    fn check_operands(op: &WrOp) -> Result<(), WrError> {
        match *op {
            WrOp::AtomicCmpAndSwp { remote_addr, .. }
            | WrOp::AtomicFetchAndAdd { remote_addr, .. }
            | WrOp::AtomicWrite { remote_addr, .. }
                if remote_addr % 8 != 0 =>
            {
                Err(WrError::AtomicMisaligned { remote_addr })
            }
            WrOp::BindMw { access, .. } if access.contains(AccessFlags::ZERO_BASED) => {
                Err(WrError::BindMwZeroBased)
            }
            _ => Ok(()),
        }
    }

    #[inline]
    fn check_ud<A>(&self, ud: Option<&UdDest<'_, A>>) -> Result<(), WrError> {
        match (self.caps.qp_type, ud) {
            (QpType::Ud, None) => Err(WrError::UdAddressMissing),
            (QpType::Ud, Some(d)) => self.check_dest(d),
            (_, None) => Ok(()),
            (qp_type, Some(_)) => Err(WrError::UdAddressOnConnectedQp { qp_type }),
        }
    }

    /// A destination's own rules: an AH of this QP's domain, with a kernel AH index.
    #[inline]
    fn check_dest<A>(&self, d: &UdDest<'_, A>) -> Result<(), WrError> {
        if d.domain() != self.domain {
            return Err(WrError::ForeignAh);
        }
        if d.ah_num() == 0 {
            return Err(WrError::AhWithoutIndex);
        }
        Ok(())
    }

    #[inline]
    fn check_sges(&self, opcode: SendOpcode, sges: &[Sge]) -> Result<u32, WrError> {
        if !sges.is_empty() && !opcode.takes_data() {
            return Err(WrError::DataNotAllowed { opcode });
        }
        if sges.len() > self.caps.max_send_sge as usize {
            return Err(WrError::TooManySge {
                num_sge: sges.len(),
                max_sge: self.caps.max_send_sge,
            });
        }
        check_len(sges.iter().map(|s| u64::from(s.length)).sum())
    }

    #[inline]
    fn check_inline(&self, opcode: SendOpcode, total: usize) -> Result<u32, WrError> {
        if !opcode.allows_inline() {
            return Err(WrError::InlineNotAllowed { opcode });
        }
        if total > self.caps.max_inline_data as usize {
            return Err(WrError::InlineTooLong {
                len: total,
                max_inline: self.caps.max_inline_data,
            });
        }
        check_len(total as u64)
    }

    #[inline]
    fn check_payload(&self, opcode: SendOpcode, payload: &Payload<'_>) -> Result<u32, WrError> {
        match payload {
            Payload::Sge(sges) => self.check_sges(opcode, sges),
            Payload::Inline(data) => self.check_inline(opcode, data.len()),
            Payload::InlineList(list) => {
                let total = list
                    .iter()
                    .fold(0usize, |acc, d| acc.saturating_add(d.len()));
                self.check_inline(opcode, total)
            }
        }
    }

    fn check_final(&self, opcode: SendOpcode, length: u64, has_ud: bool) -> Result<(), WrError> {
        if self.caps.qp_type == QpType::Ud && !has_ud {
            return Err(WrError::UdAddressMissing);
        }
        if opcode.is_atomic() && length != 8 {
            return Err(WrError::AtomicLength { length });
        }
        Ok(())
    }

    // ----- WQE writing -----------------------------------------------------------------------

    /// Writes the fixed part of a send WQE for `op` straight into slot `index` (see
    /// [`write_header`]).
    #[inline]
    fn put_header(&self, index: u32, wr_id: u64, flags: u32, op: &WrOp) -> Result<(), WrError> {
        let mut slot = self.slot(index)?;
        write_header(&mut slot, wr_id, SendOpcode::of(op), flags, op)
    }

    /// Slot `index` for writing a WQE: its element holds at least the fixed `rxe_send_wqe`
    /// (`new` checked that; this re-checks it against the ring's own geometry, so the
    /// fixed-offset writes into it need no further check).
    #[inline(always)]
    fn slot(&self, index: u32) -> Result<SlotMut<'_>, WrError> {
        self.p
            .q
            .slot_mut(index, SQ_DATA_OFFSET)
            .ok_or(WrError::Ring(RingError::ElemTooSmall {
                need: SQ_DATA_OFFSET,
                found: self.p.q.elem_size(),
            }))
    }

    /// `wr.ud` of a destination checked by [`Self::check_dest`]: the kernel's AH index
    /// (the address vector stays zero: the kernel takes it from the AH).
    fn ud_bytes<A>(dest: &UdDest<'_, A>) -> RxeSendWrUd {
        RxeSendWrUd {
            remote_qpn: dest.remote_qpn,
            remote_qkey: dest.remote_qkey,
            ah_num: dest.ah_num(),
            ..RxeSendWrUd::default()
        }
    }

    /// Writes `bytes` at `offset` of slot `index`; the range was proven to fit by validation
    /// against caps that [`Self::new`] checked against the element size.
    #[inline]
    fn put(&self, index: u32, offset: usize, bytes: &[u8]) -> Result<(), WrError> {
        if self.p.q.write_slot(index, offset, bytes) {
            Ok(())
        } else {
            Err(WrError::Ring(RingError::ElemTooSmall {
                need: offset.saturating_add(bytes.len()),
                found: self.p.q.elem_size(),
            }))
        }
    }

    /// Writes the data area for `payload` into slot `index`; returns `num_sge`.
    #[inline]
    fn put_payload(&self, index: u32, payload: &Payload<'_>) -> Result<u32, WrError> {
        write_payload(&mut self.slot(index)?, payload)
    }

    #[inline]
    fn put_dma(&self, index: u32, length: u32, num_sge: u32) -> Result<(), WrError> {
        write_dma(&mut self.slot(index)?, length, num_sge)
    }

    // ----- ibv_post_send ---------------------------------------------------------------------

    /// Validates `wr`, writes it into the next free SQ slot and advances the private producer
    /// index. Nothing is visible to the kernel until [`Self::publish`].
    ///
    /// On error nothing is posted: the producer index has not moved, so the slot (which may
    /// hold some of the refused WR's bytes) stays unpublished and free; for a WR list, publish
    /// the WRs that succeeded before the failing one, kick the kernel, and report the failing
    /// one as `bad_wr`.
    ///
    /// The checks, in order: no `wr_*` batch open; the opcode on this QP type (and an
    /// atomic's remote address aligned, a bind without `ZERO_BASED`); a destination exactly on
    /// UD QPs, whose AH is of the QP's domain and has a kernel AH index; data only for
    /// opcodes that move it, at most `max_send_sge` SGEs, inline only where allowed and at
    /// most `max_inline_data` bytes; a free slot. Then the WQE is written into that free,
    /// unpublished slot, and before the producer index moves: the total length fits the WQE's
    /// `u32` and an atomic's is 8 (summed while the SGEs are copied, so a full queue is
    /// reported before these two).
    #[doc(alias = "ibv_post_send")]
    #[doc(alias = "post_one_send")]
    #[doc(alias = "init_send_wqe")]
    #[inline(always)]
    pub fn post<A>(&mut self, wr: &SendWr<'_, A>) -> Result<(), WrError> {
        self.post_parts(wr.wr_id, &wr.op, wr.flags, wr.data.into(), wr.ud.as_ref())
    }

    /// [`Self::post`] of a WR given as its parts.
    #[inline(always)]
    fn post_parts<A>(
        &mut self,
        wr_id: u64,
        op: &WrOp,
        flags: SendFlags,
        payload: Payload<'_>,
        ud: Option<&UdDest<'_, A>>,
    ) -> Result<(), WrError> {
        if self.batch.is_some() {
            return Err(WrError::BatchInProgress);
        }
        let opcode = self.check_opcode(op)?;
        self.check_ud(ud)?;
        // The payload's own limits (the ones that bound what is written into the slot).
        let inline = match payload {
            Payload::Sge(sges) => {
                if !sges.is_empty() && !opcode.takes_data() {
                    return Err(WrError::DataNotAllowed { opcode });
                }
                if sges.len() > self.caps.max_send_sge as usize {
                    return Err(WrError::TooManySge {
                        num_sge: sges.len(),
                        max_sge: self.caps.max_send_sge,
                    });
                }
                false
            }
            Payload::Inline(_) | Payload::InlineList(_) => true,
        };
        let inline_len = match payload {
            Payload::Sge(_) => 0,
            Payload::Inline(data) => self.check_inline(opcode, data.len())?,
            Payload::InlineList(list) => {
                let total = list
                    .iter()
                    .fold(0usize, |acc, d| acc.saturating_add(d.len()));
                self.check_inline(opcode, total)?
            }
        };
        self.p.reserve()?;

        let flags = flags.bits() | if inline { IB_SEND_INLINE } else { 0 };
        // Written in place in the free slot at our private producer index: the kernel does not
        // look at it before `publish`, and a WR that fails here leaves it unpublished. One
        // slot view for the whole WQE: its address computed once, its fixed-offset writes
        // bounded by the one check that the element holds the fixed WQE.
        let mut slot = self.slot(self.p.prod)?;
        // `dma`, the rest of the fixed WQE, is written whole by `write_dma` below.
        write_header_zeroed(&mut slot, SQ_DMA_OFFSET, wr_id, opcode as u32, flags, op)?;
        if let Some(dest) = ud {
            put_in(
                &mut slot,
                SQ_WR_UNION_OFFSET,
                Self::ud_bytes(dest).as_bytes(),
            )?;
        }
        let (length, num_sge) = match payload {
            Payload::Sge(sges) => {
                let Some(total) = slot.write_sges(SQ_DATA_OFFSET, sges) else {
                    return Err(WrError::Ring(RingError::ElemTooSmall {
                        need: SQ_DATA_OFFSET.saturating_add(core::mem::size_of_val(sges)),
                        found: slot.len(),
                    }));
                };
                // sges.len() <= max_send_sge (a u32) was checked.
                (check_len(total)?, sges.len() as u32)
            }
            _ => (inline_len, write_payload(&mut slot, &payload)?),
        };
        // An atomic write moves the 8 bytes `write_header_zeroed` put in the data area (the
        // payload was refused unless empty: the opcode takes no data).
        let length = if opcode == SendOpcode::AtomicWrite {
            ATOMIC_WRITE_LEN
        } else {
            length
        };
        // `check_final` for a whole WR: its UD rule is `check_ud`'s (a UD QP without a
        // destination was refused above), which leaves the atomic length.
        if opcode.is_atomic() && length != 8 {
            return Err(WrError::AtomicLength {
                length: u64::from(length),
            });
        }
        write_dma(&mut slot, length, num_sge)?;
        self.p.advance();
        Ok(())
    }

    /// [`Self::post`] for the common work request, or nothing: posts a WR of SGEs (not
    /// inline, no destination) on a connected QP (RC, UC) with no `wr_*` batch open, whose opcode that QP
    /// takes and has no operand rule of its own (not an atomic, not a bind), with at most
    /// `max_send_sge` SGEs (none for an opcode without data) of a total length that fits the
    /// WQE's `u32`, into a free slot (the kernel's consumer index is reloaded only when the
    /// last one seen says the queue is full, as it does at every post on a queue of depth 1).
    /// Returns `true` if it posted the WR, exactly as `post` would have (the same WQE
    /// bytes, the producer index moved by one).
    ///
    /// Anything else returns `false` with nothing posted: the producer index has not moved,
    /// so the kernel sees nothing (the free slot may hold some of the WR's bytes, as after a
    /// refusal by `post`). The caller then posts the WR with `post`, which posts it or
    /// refuses it with its error. A UD QP or an open batch declines every WR.
    ///
    /// Every check that bounds a write is made here too: the slot and the SGE run inside the
    /// element, the producer index in the ring; the checks it leaves to `post` are refusals
    /// of WRs it does not take.
    #[inline(always)]
    pub fn post_fast<A>(&mut self, wr: &SendWr<'_, A>) -> bool {
        match wr.data {
            WrData::Sge(sges) if wr.ud.is_none() => {
                self.post_fast_parts(wr.wr_id, &wr.op, wr.flags, sges)
            }
            _ => false,
        }
    }

    /// [`Self::post_fast`] of a WR of SGEs without a destination, given as its parts (for a
    /// caller that holds the WR in another form, e.g. C's `ibv_send_wr`, and reads the parts
    /// from it in place). Writes the WQE without publishing it: `true` if written (then
    /// [`Self::publish`] and the doorbell), `false` having done nothing visible (post the WR
    /// with [`Self::post`], which posts or refuses it).
    #[inline(always)]
    pub fn post_fast_parts(
        &mut self,
        wr_id: u64,
        op: &WrOp,
        flags: SendFlags,
        sges: &[Sge],
    ) -> bool {
        let (opcode, props) = opcode_props(op);
        // The opcode on this QP type, no operand rule; never on a UD QP or in a batch.
        if props & (self.fast | OP_OPERANDS) != self.fast {
            return false;
        }
        if sges.len() > self.caps.max_send_sge as usize
            || (!sges.is_empty() && props & OP_DATA == 0)
        {
            return false;
        }
        if !self.p.make_room() {
            return false;
        }
        // The slot at the private producer index is free and unpublished: the kernel does not
        // look at it before `publish`. One bounds check for the fixed WQE and the SGE run
        // (`sges` is a Rust slice, so its byte size cannot overflow the addition).
        let mut slot = match self
            .p
            .q
            .slot_mut(self.p.prod, SQ_DATA_OFFSET + core::mem::size_of_val(sges))
        {
            Some(slot) => slot,
            None => return false,
        };
        let Some(total) = slot.write_sges(SQ_DATA_OFFSET, sges) else {
            return false;
        };
        let Ok(length) = u32::try_from(total) else {
            return false;
        };
        // Within the element (checked above), so neither write can be refused.
        if write_header_zeroed(&mut slot, SQ_DMA_OFFSET, wr_id, opcode, flags.bits(), op).is_err()
            || write_dma(&mut slot, length, sges.len() as u32).is_err()
        {
            return false;
        }
        self.p.advance();
        true
    }

    /// Makes every WQE written so far visible to the kernel with one `Release` store of
    /// `producer_index`; returns how many were published. During an open `wr_start` batch only
    /// the WQEs before the batch are published.
    ///
    /// Afterwards the caller must kick the kernel (POST_SEND with zero WRs).
    #[inline]
    pub fn publish(&mut self) -> u32 {
        let upto = self.batch.map_or(self.p.prod, |b| b.start);
        self.p.publish_upto(upto)
    }

    // ----- ibv_wr_* ----------------------------------------------------------------------------

    /// Opens a batch of `wr_*` calls (`ibv_wr_start`).
    #[doc(alias = "ibv_wr_start")]
    pub fn wr_start(&mut self) -> Result<(), WrError> {
        if self.batch.is_some() {
            return Err(WrError::BatchInProgress);
        }
        self.set_batch(Some(Batch {
            start: self.p.prod,
            err: None,
            cur: None,
        }));
        Ok(())
    }

    /// Records `r`'s error as the batch's sticky error (the first one wins).
    fn sticky<T>(&mut self, r: Result<T, WrError>) -> Result<T, WrError> {
        if let (Err(e), Some(b)) = (&r, self.batch.as_mut()) {
            if b.err.is_none() {
                b.err = Some(*e);
            }
        }
        r
    }

    fn open_batch(&self) -> Result<Batch, WrError> {
        let b = self.batch.ok_or(WrError::NoBatch)?;
        match b.err {
            Some(e) => Err(e),
            None => Ok(b),
        }
    }

    fn finish_current(&self, b: &Batch) -> Result<(), WrError> {
        match b.cur {
            Some(c) => self.check_final(c.opcode, u64::from(c.length), c.has_ud),
            None => Ok(()),
        }
    }

    fn wr_op_inner(&mut self, wr_id: u64, flags: SendFlags, op: WrOp) -> Result<(), WrError> {
        let b = self.open_batch()?;
        self.finish_current(&b)?;
        let opcode = self.check_opcode(&op)?;
        self.p.reserve()?;
        let index = self.p.prod;
        self.put_header(index, wr_id, flags.bits(), &op)?;
        // An atomic write's 8 bytes are in the WQE already: `dma` says so.
        let length = if opcode == SendOpcode::AtomicWrite {
            self.put_dma(index, ATOMIC_WRITE_LEN, 0)?;
            ATOMIC_WRITE_LEN
        } else {
            0
        };
        self.p.advance();
        if let Some(b) = self.batch.as_mut() {
            b.cur = Some(Current {
                index,
                opcode,
                flags: flags.bits(),
                length,
                has_ud: false,
            });
        }
        Ok(())
    }

    /// Builds one WQE for `op` in the open batch (the common body of the `wr_*` builders).
    /// Data and UD address are added by the `wr_set_*` setters. `ibv_wr_bind_mw` is this
    /// with [`WrOp::BindMw`].
    #[doc(alias = "ibv_wr_bind_mw")]
    pub fn wr_op(&mut self, wr_id: u64, flags: SendFlags, op: WrOp) -> Result<(), WrError> {
        let r = self.wr_op_inner(wr_id, flags, op);
        self.sticky(r)
    }

    /// `ibv_wr_send`.
    #[doc(alias = "ibv_wr_send")]
    pub fn wr_send(&mut self, wr_id: u64, flags: SendFlags) -> Result<(), WrError> {
        self.wr_op(wr_id, flags, WrOp::Send)
    }

    /// `ibv_wr_send_imm` (`imm_data` host order).
    #[doc(alias = "ibv_wr_send_imm")]
    pub fn wr_send_imm(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        imm_data: u32,
    ) -> Result<(), WrError> {
        self.wr_op(wr_id, flags, WrOp::SendWithImm { imm_data })
    }

    /// `ibv_wr_send_inv`.
    #[doc(alias = "ibv_wr_send_inv")]
    pub fn wr_send_inv(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        invalidate_rkey: u32,
    ) -> Result<(), WrError> {
        self.wr_op(wr_id, flags, WrOp::SendWithInv { invalidate_rkey })
    }

    /// `ibv_wr_rdma_write`.
    #[doc(alias = "ibv_wr_rdma_write")]
    pub fn wr_rdma_write(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
    ) -> Result<(), WrError> {
        self.wr_op(wr_id, flags, WrOp::RdmaWrite { remote_addr, rkey })
    }

    /// `ibv_wr_rdma_write_imm` (`imm_data` host order).
    #[doc(alias = "ibv_wr_rdma_write_imm")]
    pub fn wr_rdma_write_imm(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        imm_data: u32,
    ) -> Result<(), WrError> {
        self.wr_op(
            wr_id,
            flags,
            WrOp::RdmaWriteWithImm {
                remote_addr,
                rkey,
                imm_data,
            },
        )
    }

    /// `ibv_wr_rdma_read`.
    #[doc(alias = "ibv_wr_rdma_read")]
    pub fn wr_rdma_read(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
    ) -> Result<(), WrError> {
        self.wr_op(wr_id, flags, WrOp::RdmaRead { remote_addr, rkey })
    }

    /// `ibv_wr_atomic_cmp_swp`; follow with an 8-byte [`Self::wr_set_sge`].
    #[doc(alias = "ibv_wr_atomic_cmp_swp")]
    pub fn wr_atomic_cmp_swp(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        compare: u64,
        swap: u64,
    ) -> Result<(), WrError> {
        self.wr_op(
            wr_id,
            flags,
            WrOp::AtomicCmpAndSwp {
                remote_addr,
                rkey,
                compare,
                swap,
            },
        )
    }

    /// `ibv_wr_atomic_fetch_add`; follow with an 8-byte [`Self::wr_set_sge`].
    #[doc(alias = "ibv_wr_atomic_fetch_add")]
    pub fn wr_atomic_fetch_add(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        add: u64,
    ) -> Result<(), WrError> {
        self.wr_op(
            wr_id,
            flags,
            WrOp::AtomicFetchAndAdd {
                remote_addr,
                rkey,
                add,
            },
        )
    }

    /// `ibv_wr_atomic_write`: writes the 8 bytes of `value` at `remote_addr` (8-byte
    /// aligned) as one atomic; no SGE follows (the bytes are in the WQE).
    #[doc(alias = "ibv_wr_atomic_write")]
    pub fn wr_atomic_write(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        rkey: u32,
        remote_addr: u64,
        value: [u8; 8],
    ) -> Result<(), WrError> {
        self.wr_op(
            wr_id,
            flags,
            WrOp::AtomicWrite {
                remote_addr,
                rkey,
                value,
            },
        )
    }

    /// `ibv_wr_local_inv`.
    #[doc(alias = "ibv_wr_local_inv")]
    pub fn wr_local_inv(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        invalidate_rkey: u32,
    ) -> Result<(), WrError> {
        self.wr_op(wr_id, flags, WrOp::LocalInv { invalidate_rkey })
    }

    fn current(&self) -> Result<Current, WrError> {
        self.open_batch()?.cur.ok_or(WrError::NoCurrentWqe)
    }

    fn set_current(&mut self, c: Current) {
        if let Some(b) = self.batch.as_mut() {
            b.cur = Some(c);
        }
    }

    fn set_data_inner(&mut self, payload: Payload<'_>) -> Result<(), WrError> {
        let mut c = self.current()?;
        // Even an empty list would overwrite the `dma` that carries an atomic write's bytes.
        if c.opcode == SendOpcode::AtomicWrite {
            return Err(WrError::DataNotAllowed { opcode: c.opcode });
        }
        let length = self.check_payload(c.opcode, &payload)?;
        let inline = !matches!(payload, Payload::Sge(_));
        let num_sge = self.put_payload(c.index, &payload)?;
        self.put_dma(c.index, length, num_sge)?;
        let flags = if inline {
            c.flags | IB_SEND_INLINE
        } else {
            c.flags & !IB_SEND_INLINE
        };
        self.put(c.index, SQ_FLAGS_OFFSET, &flags.to_ne_bytes())?;
        c.flags = flags;
        c.length = length;
        self.set_current(c);
        Ok(())
    }

    /// `ibv_wr_set_sge`: one SGE for the last built WQE (a zero `length` means no data, as in
    /// rdma-core).
    #[doc(alias = "ibv_wr_set_sge")]
    pub fn wr_set_sge(&mut self, lkey: u32, addr: u64, length: u32) -> Result<(), WrError> {
        let sge = [Sge { addr, length, lkey }];
        let list: &[Sge] = if length == 0 { &[] } else { &sge };
        let r = self.set_data_inner(Payload::Sge(list));
        self.sticky(r)
    }

    /// `ibv_wr_set_sge_list`: the SGE list of the last built WQE.
    #[doc(alias = "ibv_wr_set_sge_list")]
    pub fn wr_set_sge_list(&mut self, sges: &[Sge]) -> Result<(), WrError> {
        let r = self.set_data_inner(Payload::Sge(sges));
        self.sticky(r)
    }

    /// `ibv_wr_set_inline_data`: copies `data` into the last built WQE and marks it inline.
    #[doc(alias = "ibv_wr_set_inline_data")]
    pub fn wr_set_inline_data(&mut self, data: &[u8]) -> Result<(), WrError> {
        let r = self.set_data_inner(Payload::Inline(data));
        self.sticky(r)
    }

    /// `ibv_wr_set_inline_data_list`: copies the pieces back to back into the last built WQE.
    #[doc(alias = "ibv_wr_set_inline_data_list")]
    pub fn wr_set_inline_data_list(&mut self, list: &[&[u8]]) -> Result<(), WrError> {
        let r = self.set_data_inner(Payload::InlineList(list));
        self.sticky(r)
    }

    fn set_ud_inner<A>(&mut self, dest: &UdDest<'_, A>) -> Result<(), WrError> {
        let mut c = self.current()?;
        if self.caps.qp_type != QpType::Ud {
            return Err(WrError::UdAddressOnConnectedQp {
                qp_type: self.caps.qp_type,
            });
        }
        self.check_dest(dest)?;
        self.put(c.index, SQ_WR_UNION_OFFSET, Self::ud_bytes(dest).as_bytes())?;
        c.has_ud = true;
        self.set_current(c);
        Ok(())
    }

    /// `ibv_wr_set_ud_addr`: the destination of the last built WQE (UD QPs only).
    #[doc(alias = "ibv_wr_set_ud_addr")]
    pub fn wr_set_ud_addr<A>(&mut self, dest: UdDest<'_, A>) -> Result<(), WrError> {
        let r = self.set_ud_inner(&dest);
        self.sticky(r)
    }

    /// Closes the batch (`ibv_wr_complete`). If every call succeeded and the last WQE is
    /// complete, publishes the batch (and any earlier unpublished WQEs) with one `Release` store
    /// and returns how many WQEs the batch held; the caller then kicks the kernel. Otherwise
    /// rolls the batch back and returns the first error.
    #[doc(alias = "ibv_wr_complete")]
    pub fn wr_complete(&mut self) -> Result<u32, WrError> {
        let b = self.batch.ok_or(WrError::NoBatch)?;
        let checked = match b.err {
            Some(e) => Err(e),
            None => self.finish_current(&b),
        };
        self.set_batch(None);
        if let Err(e) = checked {
            self.p.prod = b.start;
            return Err(e);
        }
        let n = self.p.q.distance(b.start, self.p.prod);
        self.p.publish_upto(self.p.prod);
        Ok(n)
    }

    /// How many WQEs the open batch holds (the one being built included); 0 without a batch.
    pub fn wr_len(&self) -> usize {
        self.batch
            .map_or(0, |b| self.p.q.distance(b.start, self.p.prod) as usize)
    }

    /// Drops every WQE built since [`Self::wr_start`] (`ibv_wr_abort`); nothing was visible to
    /// the kernel. A no-op without an open batch.
    #[doc(alias = "ibv_wr_abort")]
    pub fn wr_abort(&mut self) {
        if let Some(b) = self.batch {
            self.set_batch(None);
            self.p.prod = b.start;
        }
    }
}
