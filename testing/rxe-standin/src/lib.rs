//! A stand-in rxe (soft-RoCE) kernel behind uverbs' [`Channel`] seam: measuring equipment
//! for the host instruction counts of `benches/ring_counts.rs` (`cargo xtask bench --host`),
//! the uverbs counterpart of `xtask/bench-c/uvshim.c`, which plays the same part for
//! rdma-core (an `LD_PRELOAD` shim cannot serve uverbs: rustix makes raw syscalls).
//!
//! It is not a model of rxe: it answers the commands uverbs sends to open an rxe context,
//! allocate a PD, register an MR, create and destroy CQs and QPs (RC, UC, UD) and modify a
//! QP, with the sizes and `Mminfo` the kernel's rxe driver returns (`rxe_queue_init`: a
//! power-of-two number of slots, one more than asked for, and power-of-two elements), and it
//! backs every ring with shared memory (a memfd the stand-in maps too). Everything the kernel
//! does on the data path is left to the caller, through two calls that do what the rxe kernel
//! does to the rings:
//! - [`RxeStandin::complete_sends`]: the requester and completer of one QP in one step:
//!   consume every posted send WQE (advance the SQ consumer index), and write a send CQE
//!   (`struct ib_uverbs_wc` as `make_send_cqe` fills it) into the send CQ for each signaled
//!   one (or each one with `sq_sig_all`), publishing the CQ producer index (`rxe_cq_post`);
//! - [`RxeStandin::sq_indices`] and [`RxeStandin::cq_indices`]: the ring indices, to check.
//!
//! The send doorbell (a `write()` of POST_SEND with no WRs) goes to `/dev/null`: the kernel's
//! work on it is not userspace work, and the stand-in does the requester's work in
//! `complete_sends` instead. Nothing is checked beyond what the rings need: data is not moved,
//! keys are not validated, QP states are not tracked.
#![allow(unsafe_code)]
#![warn(missing_docs)]

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rustix::mm::{MapFlags, ProtFlags};
use uverbs::channel::{AttrKind, Channel, IoctlCmd, MapKind, Mapping, WriteCmd};
use uverbs::{
    AccessFlags, AhAttr, Context, Device, Driver, Errno, Gid, Mtu, Qp, QpAttr, QpAttrMask,
};
use uverbs_uapi::cmds::*;
use uverbs_uapi::ioctl::RDMA_DRIVER_RXE;
use uverbs_uapi::rxe::*;
use uverbs_uapi::verbs::{
    IbUverbsQpCap, IB_SEND_SIGNALED, IB_UVERBS_QP_CREATE_SQ_SIG_ALL, IB_WC_SUCCESS,
};
use uverbs_uapi::write::*;
use zerocopy::{FromBytes, IntoBytes};

const PAGE: usize = 4096;
/// The kernel's `sizeof(struct rxe_cqe)` (a union of `ib_wc` and `ib_uverbs_wc`), rounded to
/// a power of two by `rxe_queue_init`: 64 bytes per CQ element (as uvshim.c uses).
const CQE_SIZE: usize = 64;
/// `RXE_MAX_CQE`, `RXE_MAX_QP_WR` of the kernel's rxe_param.h.
const MAX_CQE: u32 = 32767;
const MAX_QP_WR: u32 = 0x100000;

/// Memory shared with the client: a memfd and the stand-in's own read-write view of it.
struct Region {
    fd: OwnedFd,
    ptr: NonNull<u8>,
    len: usize,
}

impl Region {
    fn new(len: usize) -> Result<Region, Errno> {
        let len = len.max(1).div_ceil(PAGE) * PAGE;
        let fd = rustix::fs::memfd_create("rxe-standin", rustix::fs::MemfdFlags::CLOEXEC)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        // SAFETY: a new shared mapping of our own memfd at a kernel-chosen address aliases no
        // Rust object; it is unmapped in Drop.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )?
        };
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
        Ok(Region { fd, ptr, len })
    }

    fn atomic(&self, off: usize) -> &AtomicU32 {
        assert!(
            off % 4 == 0 && off + 4 <= self.len,
            "index word out of the region"
        );
        // SAFETY: aligned (the mapping is page aligned, `off` a multiple of 4) and in bounds
        // (asserted); the word lives as long as `self`, and both sides reach it only through
        // atomics.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast()) }
    }

    fn load(&self, off: usize, order: Ordering) -> u32 {
        self.atomic(off).load(order)
    }

    fn store(&self, off: usize, v: u32, order: Ordering) {
        self.atomic(off).store(v, order)
    }

    fn read(&self, off: usize, dst: &mut [u8]) {
        assert!(off + dst.len() <= self.len, "read out of the region");
        for (i, b) in dst.iter_mut().enumerate() {
            // SAFETY: in bounds (asserted); the client may write concurrently, so volatile
            // byte reads through the raw pointer, never a reference.
            *b = unsafe { self.ptr.as_ptr().add(off + i).read_volatile() };
        }
    }

    fn write(&self, off: usize, src: &[u8]) {
        assert!(off + src.len() <= self.len, "write out of the region");
        for (i, b) in src.iter().enumerate() {
            // SAFETY: in bounds (asserted); volatile byte writes to shared memory.
            unsafe { self.ptr.as_ptr().add(off + i).write_volatile(*b) };
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: we mapped exactly this range in `new` and nothing else unmaps it.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: a Region is an owned mapping reached only through raw pointers with volatile or
// atomic accesses; moving or sharing it between threads is as valid as using it in one.
unsafe impl Send for Region {}
// SAFETY: `&Region` only offers volatile/atomic accesses through the raw pointer.
unsafe impl Sync for Region {}

/// One rxe queue as `rxe_queue_init` lays it out: the `rxe_queue_buf` header, then the slots.
#[derive(Clone)]
struct RxeQueue {
    mem: Arc<Region>,
    log2_elem: u32,
    mask: u32,
}

const PROD: usize = RXE_QUEUE_BUF_PRODUCER_INDEX_OFFSET;
const CONS: usize = RXE_QUEUE_BUF_CONSUMER_INDEX_OFFSET;

impl RxeQueue {
    /// `rxe_queue_init(rxe, &num_elem, elem_size, type)`: returns the queue and the number of
    /// elements it holds (one slot stays empty).
    fn new(num_elem: u32, elem_size: usize) -> Result<(RxeQueue, u32), Errno> {
        let slots = (num_elem.checked_add(1).ok_or(Errno::INVAL)?).next_power_of_two();
        let elem = elem_size.next_power_of_two();
        let log2_elem = elem.trailing_zeros();
        let mem = Region::new(RXE_QUEUE_BUF_DATA_OFFSET + slots as usize * elem)?;
        mem.store(
            RXE_QUEUE_BUF_LOG2_ELEM_SIZE_OFFSET,
            log2_elem,
            Ordering::Relaxed,
        );
        mem.store(
            RXE_QUEUE_BUF_INDEX_MASK_OFFSET,
            slots - 1,
            Ordering::Relaxed,
        );
        let q = RxeQueue {
            mem: Arc::new(mem),
            log2_elem,
            mask: slots - 1,
        };
        Ok((q, slots - 1))
    }

    fn slot(&self, index: u32) -> usize {
        RXE_QUEUE_BUF_DATA_OFFSET + (((index & self.mask) as usize) << self.log2_elem)
    }

    /// The `Mminfo` the kernel returns: where and how much to map.
    fn mminfo(&self, key: u64) -> Mminfo {
        Mminfo {
            offset: key,
            size: self.mem.len as u32,
            pad: 0,
        }
    }
}

struct CqState {
    key: u64,
    q: RxeQueue,
}

struct QpState {
    handle: u32,
    keys: [u64; 2],
    sq: RxeQueue,
    rq: RxeQueue,
    send_cq: u32,
    sq_sig_all: bool,
    /// The queue sizes the create answered (QUERY_QP reports them again).
    cap: IbUverbsQpCap,
    /// The kernel's private SQ consumer index (`q->index`).
    sq_cons: u32,
}

#[derive(Default)]
struct State {
    next_handle: u32,
    next_key: u64,
    next_qpn: u32,
    regions: HashMap<u64, Arc<Region>>,
    pds: Vec<u32>,
    mrs: Vec<u32>,
    cqs: HashMap<u32, CqState>,
    /// By QP number.
    qps: HashMap<u32, QpState>,
}

impl State {
    fn handle(&mut self) -> u32 {
        self.next_handle += 1;
        self.next_handle
    }

    fn key(&mut self, r: &Arc<Region>) -> u64 {
        self.next_key += 1;
        let key = self.next_key * PAGE as u64;
        self.regions.insert(key, r.clone());
        key
    }
}

/// The stand-in kernel with one rxe device (see the crate documentation).
#[derive(Clone)]
pub struct RxeStandin {
    state: Arc<Mutex<State>>,
    doorbell: Arc<OwnedFd>,
}

impl std::fmt::Debug for RxeStandin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RxeStandin")
    }
}

/// A failure of the kernel's side of the rings: what the rxe kernel would report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelError(pub String);

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KernelError {}

impl RxeStandin {
    /// A stand-in kernel with one rxe device.
    pub fn new() -> std::io::Result<RxeStandin> {
        let doorbell = rustix::fs::open(
            "/dev/null",
            rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        Ok(RxeStandin {
            state: Arc::new(Mutex::new(State {
                next_qpn: 16,
                ..Default::default()
            })),
            doorbell: Arc::new(doorbell),
        })
    }

    /// Opens a context on the device (`rxe0`), as `ibv_open_device` does on a host with rxe.
    pub fn open(&self) -> uverbs::Result<Context> {
        let dev = Device::synthetic("rxe0", Driver::Rxe, 0x0200_00ff_fe00_0001);
        Context::with_channel(dev, Box::new(self.clone()))
    }

    /// Brings an RC QP of this device to RTS connected to itself (its own QP number as the
    /// destination, port 1, a zero GID), with `access` as its remote access: INIT -> RTR ->
    /// RTS with the attributes `xtask/bench-c/count.c` gives rdma-core's QP (MTU 1024, one
    /// outstanding read each way, RNR timer 12, timeout 14, retry and RNR retry 7, PSNs 0).
    pub fn loopback_to_rts(qp: &mut Qp, access: AccessFlags) -> uverbs::Result<()> {
        let qpn = qp.qp_num();
        qp.modify(
            &QpAttr {
                qp_state: uverbs::QpState::Init,
                port_num: 1,
                qp_access_flags: access,
                ..Default::default()
            },
            QpAttrMask::STATE
                | QpAttrMask::PKEY_INDEX
                | QpAttrMask::PORT
                | QpAttrMask::ACCESS_FLAGS,
        )?;
        qp.modify(
            &QpAttr {
                qp_state: uverbs::QpState::Rtr,
                path_mtu: Mtu::Mtu1024,
                dest_qp_num: qpn,
                max_dest_rd_atomic: 1,
                min_rnr_timer: 12,
                // count.c: is_global, port 1, hop limit 1, a zero GID.
                ah_attr: AhAttr::roce(Gid::default(), 0, 1),
                ..Default::default()
            },
            QpAttrMask::STATE
                | QpAttrMask::AV
                | QpAttrMask::PATH_MTU
                | QpAttrMask::DEST_QPN
                | QpAttrMask::RQ_PSN
                | QpAttrMask::MAX_DEST_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER,
        )?;
        qp.modify(
            &QpAttr {
                qp_state: uverbs::QpState::Rts,
                timeout: 14,
                retry_cnt: 7,
                rnr_retry: 7,
                max_rd_atomic: 1,
                ..Default::default()
            },
            QpAttrMask::STATE
                | QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::SQ_PSN
                | QpAttrMask::MAX_QP_RD_ATOMIC,
        )
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kernel's requester and completer for QP `qpn`, as one step: every send WQE posted
    /// (between the kernel's consumer index and the producer index userspace published) is
    /// consumed in order; for each signaled one (`IB_SEND_SIGNALED`, or every one with
    /// `sq_sig_all`) a successful send CQE is written to the QP's send CQ as `make_send_cqe`
    /// writes it (the whole element zeroed, then `wr_id`, `status`, `opcode` from the WR's
    /// opcode, `byte_len` = `dma.length`, `qp_num`, `IB_WC_WITH_IMM` for the `_WITH_IMM`
    /// opcodes) and published (`rxe_cq_post`: release store of the producer index); then the
    /// SQ consumer index is advanced (`queue_advance_consumer`, release store). Returns the
    /// number of WQEs consumed. Fails as the kernel would on a full CQ (it would raise
    /// `IB_EVENT_CQ_ERR`), leaving the WQE that did not fit unconsumed.
    pub fn complete_sends(&self, qpn: u32) -> Result<usize, KernelError> {
        let mut g = self.lock();
        let st = &mut *g;
        let qp = st
            .qps
            .get_mut(&qpn)
            .ok_or_else(|| KernelError(format!("no QP {qpn}")))?;
        let cq = st
            .cqs
            .get(&qp.send_cq)
            .ok_or_else(|| KernelError(format!("QP {qpn}: its send CQ is gone")))?;
        let sq = &qp.sq;
        let mut done = 0;
        loop {
            // queue_get_producer (QUEUE_TYPE_FROM_CLIENT): acquire; the kernel masks it.
            let prod = sq.mem.load(PROD, Ordering::Acquire) & sq.mask;
            if qp.sq_cons == prod {
                return Ok(done);
            }
            let mut wqe = RxeSendWqe::default();
            sq.mem.read(sq.slot(qp.sq_cons), wqe.as_mut_bytes());
            if qp.sq_sig_all || wqe.wr.send_flags & IB_SEND_SIGNALED != 0 {
                let cprod = cq.q.mem.load(PROD, Ordering::Relaxed) & cq.q.mask;
                let ccons = cq.q.mem.load(CONS, Ordering::Acquire) & cq.q.mask;
                if (cprod + 1) & cq.q.mask == ccons {
                    return Err(KernelError(format!(
                        "QP {qpn}: send CQ full (producer {cprod}, consumer {ccons}): CQ overflow"
                    )));
                }
                let (opcode, with_imm) = wc_opcode(wqe.wr.opcode);
                let wc = IbUverbsWc {
                    wr_id: wqe.wr.wr_id,
                    status: IB_WC_SUCCESS,
                    opcode,
                    byte_len: wqe.dma.length,
                    qp_num: qpn,
                    wc_flags: if with_imm { IB_WC_WITH_IMM } else { 0 },
                    ..Default::default()
                };
                let mut elem = [0u8; CQE_SIZE];
                elem[..wc.as_bytes().len()].copy_from_slice(wc.as_bytes());
                cq.q.mem.write(cq.q.slot(cprod), &elem);
                cq.q.mem
                    .store(PROD, (cprod + 1) & cq.q.mask, Ordering::Release);
            }
            qp.sq_cons = (qp.sq_cons + 1) & sq.mask;
            sq.mem.store(CONS, qp.sq_cons, Ordering::Release);
            done += 1;
        }
    }

    /// The SQ ring of QP `qpn`: (producer index userspace published, consumer index), raw.
    pub fn sq_indices(&self, qpn: u32) -> Option<(u32, u32)> {
        let g = self.lock();
        let qp = g.qps.get(&qpn)?;
        Some((
            qp.sq.mem.load(PROD, Ordering::Acquire),
            qp.sq.mem.load(CONS, Ordering::Acquire),
        ))
    }

    /// The CQ ring of every CQ in creation order: (producer index, consumer index), raw.
    pub fn cq_indices(&self) -> Vec<(u32, u32)> {
        let g = self.lock();
        let mut cqs: Vec<_> = g.cqs.iter().collect();
        cqs.sort_by_key(|(h, _)| **h);
        cqs.iter()
            .map(|(_, c)| {
                (
                    c.q.mem.load(PROD, Ordering::Acquire),
                    c.q.mem.load(CONS, Ordering::Acquire),
                )
            })
            .collect()
    }
}

/// `IB_WC_WITH_IMM` (kernel `enum ib_wc_flags`).
const IB_WC_WITH_IMM: u32 = 1 << 1;

/// The rxe completer's `wr_to_wc_opcode`, and whether `make_send_cqe` sets `IB_WC_WITH_IMM`.
fn wc_opcode(wr: u32) -> (u32, bool) {
    match wr {
        IB_UVERBS_WR_RDMA_WRITE => (IB_UVERBS_WC_RDMA_WRITE, false),
        IB_UVERBS_WR_RDMA_WRITE_WITH_IMM => (IB_UVERBS_WC_RDMA_WRITE, true),
        IB_UVERBS_WR_SEND | IB_UVERBS_WR_SEND_WITH_INV => (IB_UVERBS_WC_SEND, false),
        IB_UVERBS_WR_SEND_WITH_IMM => (IB_UVERBS_WC_SEND, true),
        IB_UVERBS_WR_RDMA_READ => (IB_UVERBS_WC_RDMA_READ, false),
        IB_UVERBS_WR_ATOMIC_CMP_AND_SWP => (IB_UVERBS_WC_COMP_SWAP, false),
        IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD => (IB_UVERBS_WC_FETCH_ADD, false),
        IB_UVERBS_WR_LOCAL_INV => (IB_UVERBS_WC_LOCAL_INV, false),
        IB_UVERBS_WR_BIND_MW => (IB_UVERBS_WC_BIND_MW, false),
        IB_UVERBS_WR_FLUSH => (IB_UVERBS_WC_FLUSH, false),
        IB_UVERBS_WR_ATOMIC_WRITE => (IB_UVERBS_WC_ATOMIC_WRITE, false),
        _ => (0xff, false),
    }
}

fn in_bytes(cmd: &IoctlCmd<'_>, id: u16) -> Option<Vec<u8>> {
    Some(cmd.attrs().find(|a| a.id() == id)?.input()?.to_vec())
}

fn in_u32(cmd: &IoctlCmd<'_>, id: u16) -> Option<u32> {
    Some(u32::from_ne_bytes(
        in_bytes(cmd, id)?.get(..4)?.try_into().ok()?,
    ))
}

/// The handle an IDR attribute names.
fn idr(cmd: &IoctlCmd<'_>, id: u16) -> Option<u32> {
    let a = cmd.attrs().find(|a| a.id() == id)?;
    (a.kind() == AttrKind::Idr).then(|| a.data() as u32)
}

fn out(cmd: &mut IoctlCmd<'_>, id: u16, bytes: &[u8]) -> Result<(), Errno> {
    cmd.attr_mut(id).ok_or(Errno::INVAL)?.write_output(bytes)?;
    Ok(())
}

fn put<T: IntoBytes + zerocopy::Immutable>(dst: &mut [u8], v: &T) {
    let b = v.as_bytes();
    let n = b.len().min(dst.len());
    dst[..n].copy_from_slice(&b[..n]);
}

fn create_cq(st: &mut State, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let cqe = in_u32(cmd, UVERBS_ATTR_CREATE_CQ_CQE).ok_or(Errno::INVAL)?;
    if cqe == 0 || cqe > MAX_CQE {
        return Err(Errno::INVAL);
    }
    // rxe_cq_from_init: a queue of `cqe` CQEs; the CQ reports what it holds.
    let (q, cqe) = RxeQueue::new(cqe, CQE_SIZE)?;
    let key = st.key(&q.mem);
    let handle = st.handle();
    out(cmd, UVERBS_ATTR_CREATE_CQ_RESP_CQE, &cqe.to_ne_bytes())?;
    let resp = RxeCreateCqResp { mi: q.mminfo(key) };
    out(cmd, UVERBS_ATTR_UHW_OUT, resp.as_bytes())?;
    cmd.attr_mut(UVERBS_ATTR_CREATE_CQ_HANDLE)
        .ok_or(Errno::INVAL)?
        .set_new(u64::from(handle))?;
    st.cqs.insert(handle, CqState { key, q });
    Ok(())
}

fn create_qp(st: &mut State, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let pd = idr(cmd, UVERBS_ATTR_CREATE_QP_PD_HANDLE).ok_or(Errno::INVAL)?;
    let scq = idr(cmd, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE).ok_or(Errno::INVAL)?;
    let rcq = idr(cmd, UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE).ok_or(Errno::INVAL)?;
    if !st.pds.contains(&pd) || !st.cqs.contains_key(&scq) || !st.cqs.contains_key(&rcq) {
        return Err(Errno::INVAL);
    }
    if idr(cmd, UVERBS_ATTR_CREATE_QP_SRQ_HANDLE).is_some() {
        return Err(Errno::OPNOTSUPP); // not needed by the counts
    }
    let cap = in_bytes(cmd, UVERBS_ATTR_CREATE_QP_CAP)
        .and_then(|b| IbUverbsQpCap::read_from_prefix(&b).ok().map(|(c, _)| c))
        .ok_or(Errno::INVAL)?;
    if cap.max_send_wr == 0
        || cap.max_send_wr > MAX_QP_WR
        || cap.max_recv_wr > MAX_QP_WR
        || cap.max_send_sge > 32
        || cap.max_recv_sge > 32
    {
        return Err(Errno::INVAL);
    }
    let flags = in_u32(cmd, UVERBS_ATTR_CREATE_QP_FLAGS).unwrap_or(0);
    // rxe_init_sq: room for max(SGEs, inline) after the fixed WQE; the caps grow to fill it.
    let sq_room =
        (cap.max_send_sge as usize * size_of::<RxeSge>()).max(cap.max_inline_data as usize);
    let (sq, max_send_wr) = RxeQueue::new(cap.max_send_wr, size_of::<RxeSendWqe>() + sq_room)?;
    // rxe_init_rq: room for the SGEs after the fixed WQE.
    let rq_room = cap.max_recv_sge as usize * size_of::<RxeSge>();
    let (rq, max_recv_wr) =
        RxeQueue::new(cap.max_recv_wr.max(1), size_of::<RxeRecvWqe>() + rq_room)?;
    let cap_out = IbUverbsQpCap {
        max_send_wr,
        max_recv_wr,
        max_send_sge: (sq_room / size_of::<RxeSge>()) as u32,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: sq_room as u32,
    };
    let keys = [st.key(&sq.mem), st.key(&rq.mem)];
    let drv = RxeCreateQpResp {
        rq_mi: rq.mminfo(keys[1]),
        sq_mi: sq.mminfo(keys[0]),
    };
    let handle = st.handle();
    let qpn = st.next_qpn;
    st.next_qpn += 1;
    out(cmd, UVERBS_ATTR_CREATE_QP_RESP_CAP, cap_out.as_bytes())?;
    out(cmd, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &qpn.to_ne_bytes())?;
    out(cmd, UVERBS_ATTR_UHW_OUT, drv.as_bytes())?;
    cmd.attr_mut(UVERBS_ATTR_CREATE_QP_HANDLE)
        .ok_or(Errno::INVAL)?
        .set_new(u64::from(handle))?;
    st.qps.insert(
        qpn,
        QpState {
            handle,
            keys,
            sq,
            rq,
            send_cq: scq,
            sq_sig_all: flags & IB_UVERBS_QP_CREATE_SQ_SIG_ALL != 0,
            cap: cap_out,
            sq_cons: 0,
        },
    );
    Ok(())
}

fn destroy_qp(st: &mut State, handle: u32) -> Result<(), Errno> {
    let qpn = st
        .qps
        .iter()
        .find(|(_, q)| q.handle == handle)
        .map(|(n, _)| *n)
        .ok_or(Errno::INVAL)?;
    if let Some(q) = st.qps.remove(&qpn) {
        for k in q.keys {
            st.regions.remove(&k);
        }
        drop((q.sq, q.rq));
    }
    Ok(())
}

// SAFETY: the only fd number written is GET_CONTEXT's `async_fd`, an eventfd made in that call
// and given up (`into_raw_fd`) as its number is written. `doorbell_fd` is `/dev/null`, opened by
// `new` and held (`Arc<OwnedFd>`) by every clone of the stand-in, so it stays open while this
// channel lives.
unsafe impl Channel for RxeStandin {
    fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        let mut g = self.lock();
        let st = &mut *g;
        match (cmd.object_id(), cmd.method_id()) {
            (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE) => create_cq(st, cmd),
            (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY) => {
                let h = idr(cmd, UVERBS_ATTR_DESTROY_CQ_HANDLE).ok_or(Errno::INVAL)?;
                if st.qps.values().any(|q| q.send_cq == h) {
                    return Err(Errno::BUSY);
                }
                let c = st.cqs.remove(&h).ok_or(Errno::INVAL)?;
                st.regions.remove(&c.key);
                if cmd.attr_mut(UVERBS_ATTR_DESTROY_CQ_RESP).is_some() {
                    out(
                        cmd,
                        UVERBS_ATTR_DESTROY_CQ_RESP,
                        IbUverbsDestroyCqResp::default().as_bytes(),
                    )?;
                }
                Ok(())
            }
            (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE) => create_qp(st, cmd),
            (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY) => {
                let h = idr(cmd, UVERBS_ATTR_DESTROY_QP_HANDLE).ok_or(Errno::INVAL)?;
                destroy_qp(st, h)?;
                if cmd.attr_mut(UVERBS_ATTR_DESTROY_QP_RESP).is_some() {
                    out(
                        cmd,
                        UVERBS_ATTR_DESTROY_QP_RESP,
                        IbUverbsDestroyQpResp::default().as_bytes(),
                    )?;
                }
                Ok(())
            }
            // Everything else as on a kernel without the method: uverbs falls back to the
            // write command where one exists.
            _ => Err(Errno::PROTONOSUPPORT),
        }
    }

    fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
        let mut g = self.lock();
        let st = &mut *g;
        match (cmd.command(), cmd.is_extended()) {
            (IB_USER_VERBS_CMD_GET_CONTEXT, false) => {
                let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
                let resp = IbUverbsGetContextResp {
                    async_fd: fd.into_raw_fd() as u32,
                    num_comp_vectors: 1,
                };
                put(cmd.response_mut(), &resp);
                Ok(())
            }
            (IB_USER_VERBS_CMD_ALLOC_PD, false) => {
                let h = st.handle();
                st.pds.push(h);
                put(cmd.response_mut(), &IbUverbsAllocPdResp { pd_handle: h });
                Ok(())
            }
            (IB_USER_VERBS_CMD_DEALLOC_PD, false) => {
                let r: IbUverbsDeallocPd = cmd.core_request_as().ok_or(Errno::INVAL)?;
                let i = st.pds.iter().position(|&p| p == r.pd_handle);
                st.pds.swap_remove(i.ok_or(Errno::INVAL)?);
                Ok(())
            }
            (IB_USER_VERBS_CMD_REG_MR, false) => {
                let r: IbUverbsRegMr = cmd.core_request_as().ok_or(Errno::INVAL)?;
                if !st.pds.contains(&r.pd_handle) || r.length == 0 {
                    return Err(Errno::INVAL);
                }
                let h = st.handle();
                st.mrs.push(h);
                let resp = IbUverbsRegMrResp {
                    mr_handle: h,
                    lkey: h << 8,
                    rkey: h << 8 | 1,
                };
                put(cmd.response_mut(), &resp);
                Ok(())
            }
            (IB_USER_VERBS_CMD_DEREG_MR, false) => {
                let r: IbUverbsDeregMr = cmd.core_request_as().ok_or(Errno::INVAL)?;
                let i = st.mrs.iter().position(|&m| m == r.mr_handle);
                st.mrs.swap_remove(i.ok_or(Errno::INVAL)?);
                Ok(())
            }
            (IB_USER_VERBS_CMD_MODIFY_QP, _) => {
                let r: IbUverbsModifyQp = cmd.core_request_as().ok_or(Errno::INVAL)?;
                if !st.qps.values().any(|q| q.handle == r.qp_handle) {
                    return Err(Errno::INVAL);
                }
                Ok(())
            }
            (IB_USER_VERBS_CMD_QUERY_QP, false) => {
                // uverbs asks right after create for the sizes the kernel applied; the
                // stand-in answers those (and the state fields stay zero).
                let r: IbUverbsQueryQp = cmd.core_request_as().ok_or(Errno::INVAL)?;
                let q = st.qps.values().find(|q| q.handle == r.qp_handle);
                let cap = q.ok_or(Errno::INVAL)?.cap;
                let resp = IbUverbsQueryQpResp {
                    max_send_wr: cap.max_send_wr,
                    max_recv_wr: cap.max_recv_wr,
                    max_send_sge: cap.max_send_sge,
                    max_recv_sge: cap.max_recv_sge,
                    max_inline_data: cap.max_inline_data,
                    ..Default::default()
                };
                put(cmd.response_mut(), &resp);
                Ok(())
            }
            (IB_USER_VERBS_CMD_DESTROY_QP, false) => {
                let r: IbUverbsDestroyQp = cmd.core_request_as().ok_or(Errno::INVAL)?;
                destroy_qp(st, r.qp_handle)
            }
            _ => Err(Errno::OPNOTSUPP),
        }
    }

    fn mmap(&self, offset: u64, len: usize, kind: MapKind) -> Result<Mapping, Errno> {
        let g = self.lock();
        let r = g.regions.get(&offset).ok_or(Errno::INVAL)?;
        if len == 0 || len > r.len {
            return Err(Errno::INVAL);
        }
        let prot = match kind {
            MapKind::ReadOnly => ProtFlags::READ,
            MapKind::WriteOnly => ProtFlags::WRITE,
            MapKind::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
        };
        // SAFETY: a new shared mapping of the stand-in's memfd at a kernel-chosen address;
        // the Mapping made below owns and unmaps it.
        let p = unsafe {
            rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, &r.fd, 0)?
        };
        let p = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
        // SAFETY: mapped just above, owned by nobody else.
        Ok(unsafe { Mapping::from_raw(p, len) })
    }

    fn doorbell_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.doorbell.as_fd())
    }

    fn driver_id(&self) -> u32 {
        RDMA_DRIVER_RXE
    }
}
