//! Completion counters: the `UVERBS_OBJECT_COMP_CNTR` create and destroy methods with EFA's
//! two buffer attributes, `UVERBS_METHOD_QP_ATTACH_COMP_CNTR`, and the device side: every
//! completion of an attached operation adds one to the counter's completion word, every
//! failed one to its error word, in the memory the create named (a user VA, or a dmabuf the
//! model maps), as the device writes them.
//!
//! The kernel's rules (RDMA/core completion-counter series, `uverbs_std_types_comp_cntr.c` and
//! `uverbs_std_types_qp.c`): the create is `EOPNOTSUPP` on a device without the ops (here:
//! without `EFA_QUERY_DEVICE_CAPS_COMP_CNTR`); an attach with an empty or unknown op mask is
//! `EINVAL`, one overlapping the ops the QP already counts `EBUSY`; destroying a counter a QP
//! is attached to is `EBUSY`; destroying the QP ends its attachments.

use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rustix::mm::{MapFlags, ProtFlags};
use uverbs::channel::{AttrKind, IoctlCmd};
use uverbs::Errno;
use uverbs_uapi::cmds::*;
use uverbs_uapi::efa::*;
use uverbs_uapi::verbs::*;
use zerocopy::FromBytes;

use crate::ioctl::{check_attrs, AttrSpec};
use crate::state::{page_align, Dev, Fabric, Region, PAGE};

/// Where the device writes one counter word.
pub(crate) enum CntrWord {
    /// A user virtual address in this process.
    Va(u64),
    /// The model's mapping of a dmabuf, and the word's offset in it.
    Dmabuf(Arc<Region>, usize),
}

impl CntrWord {
    fn add(&self, n: u64) {
        self.atomic().fetch_add(n, Ordering::Release);
    }

    fn set(&self, v: u64) {
        self.atomic().store(v, Ordering::Release);
    }

    fn atomic(&self) -> &AtomicU64 {
        let p = match self {
            CntrWord::Va(a) => *a as *mut u64,
            // SAFETY: the offset was checked to lie inside the mapping (8 bytes, aligned).
            CntrWord::Dmabuf(r, off) => unsafe { r.ptr.as_ptr().add(*off).cast::<u64>() },
        };
        // SAFETY: an 8-byte aligned word (checked at create) the client registered as counter
        // memory: the kernel pins it for the counter's life, and uverbs frees it only after
        // the counter is destroyed (leaks it otherwise). Atomic, as the client reads it
        // concurrently with an Acquire load.
        unsafe { AtomicU64::from_ptr(p) }
    }
}

pub(crate) struct CntrState {
    pub(crate) comp: CntrWord,
    pub(crate) err: CntrWord,
    /// QP attachments (the kernel's `usecnt`).
    pub(crate) users: u32,
}

const ALL_OPS: u32 = IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND
    | IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV
    | IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_READ
    | IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ
    | IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE
    | IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE;

fn word(cmd: &IoctlCmd<'_>, id: u16) -> Result<CntrWord, Errno> {
    let a = cmd.attrs().find(|a| a.id() == id).ok_or(Errno::INVAL)?;
    if a.kind() != AttrKind::PtrIn || a.len() != 32 {
        return Err(Errno::INVAL);
    }
    let d = IbUverbsBufferDesc::read_from_bytes(a.input().ok_or(Errno::INVAL)?)
        .map_err(|_| Errno::INVAL)?;
    if d.flags != 0 || d.length < 8 {
        return Err(Errno::INVAL);
    }
    match d.r#type {
        IB_UVERBS_BUFFER_TYPE_VA => {
            if d.addr == 0 || d.addr % 8 != 0 {
                return Err(Errno::INVAL);
            }
            Ok(CntrWord::Va(d.addr))
        }
        IB_UVERBS_BUFFER_TYPE_DMABUF => {
            if d.addr % 8 != 0 {
                return Err(Errno::INVAL);
            }
            // The kernel takes a reference on the dmabuf; the model dups the fd and maps it.
            // SAFETY: the fd number is live for the duration of this call (the caller's
            // BorrowedFd); we only borrow it to duplicate it.
            let bfd = unsafe { BorrowedFd::borrow_raw(d.fd) };
            let dup = rustix::io::fcntl_dupfd_cloexec(bfd, 0).map_err(|_| Errno::BADF)?;
            let skew = (d.addr as usize) % PAGE;
            let len = page_align(skew + 8);
            // SAFETY: a new shared mapping of the dup'd fd, owned by the Region built below.
            let p = unsafe {
                rustix::mm::mmap(
                    std::ptr::null_mut(),
                    len,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED,
                    &dup,
                    d.addr - skew as u64,
                )?
            };
            let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
            Ok(CntrWord::Dmabuf(
                Arc::new(Region { fd: dup, ptr, len }),
                skew,
            ))
        }
        _ => Err(Errno::INVAL),
    }
}

pub(crate) fn create(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let m = |id| AttrSpec {
        id,
        out_min: None,
        out_exact: false,
        mandatory: true,
    };
    check_attrs(
        cmd,
        &[
            m(UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE),
            m(EFA_IB_ATTR_CREATE_COMP_CNTR_COMP_BUFFER),
            m(EFA_IB_ATTR_CREATE_COMP_CNTR_ERR_BUFFER),
        ],
    )?;
    if dev.cfg.device_caps & EFA_QUERY_DEVICE_CAPS_COMP_CNTR == 0 {
        return Err(Errno::OPNOTSUPP);
    }
    if cmd
        .attrs()
        .any(|a| a.id() == UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE && a.kind() != AttrKind::IdrNew)
    {
        return Err(Errno::INVAL);
    }
    let comp = word(cmd, EFA_IB_ATTR_CREATE_COMP_CNTR_COMP_BUFFER)?;
    let err = word(cmd, EFA_IB_ATTR_CREATE_COMP_CNTR_ERR_BUFFER)?;
    let h = dev.handle();
    cmd.attr_mut(UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE)
        .ok_or(Errno::INVAL)?
        .set_new(u64::from(h))?;
    dev.cntrs.insert(
        h,
        CntrState {
            comp,
            err,
            users: 0,
        },
    );
    Ok(())
}

pub(crate) fn destroy(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let h = cmd
        .attrs()
        .find(|a| a.id() == UVERBS_ATTR_DESTROY_COMP_CNTR_HANDLE)
        .map(|a| a.data() as u32)
        .ok_or(Errno::INVAL)?;
    let c = dev.cntrs.get(&h).ok_or(Errno::INVAL)?;
    if c.users != 0 {
        return Err(Errno::BUSY);
    }
    dev.cntrs.remove(&h);
    Ok(())
}

/// `UVERBS_METHOD_COMP_CNTR_MODIFY`: set or add to one word (the kernel's
/// `uverbs_get_const` refuses an unknown entry or operation with EINVAL).
pub(crate) fn modify(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let m = |id| AttrSpec {
        id,
        out_min: None,
        out_exact: false,
        mandatory: true,
    };
    check_attrs(
        cmd,
        &[
            m(UVERBS_ATTR_MODIFY_COMP_CNTR_HANDLE),
            m(UVERBS_ATTR_MODIFY_COMP_CNTR_ENTRY),
            m(UVERBS_ATTR_MODIFY_COMP_CNTR_OP),
            m(UVERBS_ATTR_MODIFY_COMP_CNTR_VALUE),
        ],
    )?;
    let h = cmd
        .attrs()
        .find(|a| a.id() == UVERBS_ATTR_MODIFY_COMP_CNTR_HANDLE && a.kind() == AttrKind::Idr)
        .map(|a| a.data() as u32)
        .ok_or(Errno::INVAL)?;
    let entry = crate::ioctl::in_scalar(cmd, UVERBS_ATTR_MODIFY_COMP_CNTR_ENTRY);
    let op = crate::ioctl::in_scalar(cmd, UVERBS_ATTR_MODIFY_COMP_CNTR_OP);
    let v = crate::ioctl::in_u64(cmd, UVERBS_ATTR_MODIFY_COMP_CNTR_VALUE).ok_or(Errno::INVAL)?;
    let c = dev.cntrs.get(&h).ok_or(Errno::INVAL)?;
    let w = match entry.map(|e| e as u32) {
        Some(IB_UVERBS_COMP_CNTR_ENTRY_COMP) => &c.comp,
        Some(IB_UVERBS_COMP_CNTR_ENTRY_ERR) => &c.err,
        _ => return Err(Errno::INVAL),
    };
    match op.map(|o| o as u32) {
        Some(IB_UVERBS_COMP_CNTR_MODIFY_OP_SET) => w.set(v),
        Some(IB_UVERBS_COMP_CNTR_MODIFY_OP_INC) => w.add(v),
        _ => return Err(Errno::INVAL),
    }
    Ok(())
}

pub(crate) fn attach(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let idr = |id| {
        cmd.attrs()
            .find(|a| a.id() == id && a.kind() == AttrKind::Idr)
            .map(|a| a.data() as u32)
            .ok_or(Errno::INVAL)
    };
    let qh = idr(UVERBS_ATTR_QP_ATTACH_COMP_CNTR_HANDLE)?;
    let ch = idr(UVERBS_ATTR_QP_ATTACH_COMP_CNTR_CNTR_HANDLE)?;
    let mask = crate::ioctl::in_u32(cmd, UVERBS_ATTR_QP_ATTACH_COMP_CNTR_OP_MASK).unwrap_or(0);
    if !dev.cntrs.contains_key(&ch) {
        return Err(Errno::INVAL);
    }
    let q = dev.qps.get_mut(&qh).ok_or(Errno::INVAL)?;
    if mask == 0 || mask & !ALL_OPS != 0 {
        return Err(Errno::INVAL);
    }
    if mask & q.cntr_ops != 0 {
        return Err(Errno::BUSY);
    }
    q.cntr_ops |= mask;
    q.cntrs.push((mask, ch));
    dev.cntrs.get_mut(&ch).ok_or(Errno::INVAL)?.users += 1;
    Ok(())
}

/// A destroyed QP's attachments end (the kernel's `uverbs_free_qp`).
pub(crate) fn detach_all(dev: &mut Dev, cntrs: &[(u32, u32)]) {
    for &(_, ch) in cntrs {
        if let Some(c) = dev.cntrs.get_mut(&ch) {
            c.users -= 1;
        }
    }
}

/// One completion of `op` (an `IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_*` bit) on the QP with handle
/// `qp` of device `d`: counted into the counter attached for it, if any.
pub(crate) fn count(f: &mut Fabric, d: usize, qp: u32, op: u32, ok: bool) {
    let dev = &f.devs[d];
    let Some(q) = dev.qps.get(&qp) else {
        return;
    };
    for &(mask, ch) in &q.cntrs {
        if mask & op != 0 {
            if let Some(c) = dev.cntrs.get(&ch) {
                if ok {
                    c.comp.add(1);
                } else {
                    c.err.add(1);
                }
            }
        }
    }
}
