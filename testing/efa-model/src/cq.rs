//! CQ creation by ioctl (`UVERBS_METHOD_CQ_CREATE` with EFA's driver data): the attributes
//! the kernel accepts, the sub-CQs and the optional external (dmabuf) memory.

use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::Arc;

use rustix::mm::{MapFlags, ProtFlags};
use uverbs::channel::{AttrKind, IoctlCmd};
use uverbs::Errno;
use uverbs_uapi::cmds::*;
use uverbs_uapi::efa::*;
use zerocopy::{FromBytes, IntoBytes};

use crate::ioctl::{in_u32, in_u64};
use crate::state::{page_align, CqState, Dev, Region, CQ_DB_OFFSET, PAGE};

/// Which CQ-create attributes the kernel knows, and their lengths (0 = IDR/FD, no length).
pub(crate) fn cq_attr_len(id: u16) -> Option<Option<usize>> {
    Some(match id {
        UVERBS_ATTR_CREATE_CQ_HANDLE | UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL => Some(0),
        UVERBS_ATTR_CREATE_CQ_EVENT_FD => Some(0),
        UVERBS_ATTR_CREATE_CQ_CQE | UVERBS_ATTR_CREATE_CQ_COMP_VECTOR => Some(4),
        UVERBS_ATTR_CREATE_CQ_FLAGS | UVERBS_ATTR_CREATE_CQ_RESP_CQE => Some(4),
        UVERBS_ATTR_CREATE_CQ_BUFFER_FD => Some(4),
        UVERBS_ATTR_CREATE_CQ_USER_HANDLE
        | UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH
        | UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET
        | UVERBS_ATTR_CREATE_CQ_BUFFER_VA => Some(8),
        UVERBS_ATTR_UHW_IN | UVERBS_ATTR_UHW_OUT => None,
        _ => return None,
    })
}

pub(crate) fn create_cq(dev: &mut Dev, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let cfg = dev.cfg;
    let mut seen = Vec::new();
    for a in cmd.attrs() {
        if seen.contains(&a.id()) {
            return Err(Errno::INVAL);
        }
        seen.push(a.id());
        match cq_attr_len(a.id()) {
            None if a.is_mandatory() => return Err(Errno::PROTONOSUPPORT),
            None => continue,
            Some(Some(0)) => {
                if !a.is_empty() {
                    return Err(Errno::INVAL);
                }
            }
            Some(Some(n)) => {
                if a.len() != n {
                    return Err(Errno::INVAL);
                }
            }
            Some(None) => {}
        }
    }
    for m in [
        UVERBS_ATTR_CREATE_CQ_HANDLE,
        UVERBS_ATTR_CREATE_CQ_CQE,
        UVERBS_ATTR_CREATE_CQ_USER_HANDLE,
        UVERBS_ATTR_CREATE_CQ_COMP_VECTOR,
        UVERBS_ATTR_CREATE_CQ_RESP_CQE,
    ] {
        if !seen.contains(&m) {
            return Err(Errno::INVAL);
        }
    }
    if cmd
        .attrs()
        .any(|a| a.id() == UVERBS_ATTR_CREATE_CQ_HANDLE && a.kind() != AttrKind::IdrNew)
    {
        return Err(Errno::INVAL);
    }
    let cqe = in_u32(cmd, UVERBS_ATTR_CREATE_CQ_CQE).ok_or(Errno::INVAL)?;
    if cqe == 0 || cqe > cfg.max_cqe {
        return Err(Errno::INVAL);
    }
    if in_u32(cmd, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR) != Some(0) {
        return Err(Errno::INVAL);
    }
    let uhw = cmd
        .attrs()
        .find(|a| a.id() == UVERBS_ATTR_UHW_IN)
        .and_then(|a| a.input().map(|b| b.to_vec()))
        .ok_or(Errno::INVAL)?;
    let (c, _) = EfaIbvCreateCq::read_from_prefix(&uhw).map_err(|_| Errno::INVAL)?;
    if c.comp_mask != 0
        || c.reserved_58 != [0; 5]
        || uhw[24.min(uhw.len())..].iter().any(|&b| b != 0)
    {
        return Err(Errno::INVAL);
    }
    let known = EFA_CREATE_CQ_WITH_COMPLETION_CHANNEL
        | EFA_CREATE_CQ_WITH_SGID
        | EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID;
    if c.flags & !known != 0
        || (c.cq_entry_size != 16 && c.cq_entry_size != 32)
        || c.num_sub_cqs != cfg.sub_cqs_per_cq
    {
        return Err(Errno::INVAL);
    }
    let with_sgid = c.flags & EFA_CREATE_CQ_WITH_SGID != 0;
    if with_sgid && cfg.device_caps & EFA_QUERY_DEVICE_CAPS_CQ_WITH_SGID == 0 {
        return Err(Errno::OPNOTSUPP);
    }
    if with_sgid && c.cq_entry_size != 32 {
        return Err(Errno::INVAL);
    }
    // 64-bit request ids in send CQEs only where the device has them.
    if c.flags & EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID != 0
        && cfg.device_caps & EFA_QUERY_DEVICE_CAPS_SQ_64_BIT_REQ_ID == 0
    {
        return Err(Errno::OPNOTSUPP);
    }
    let out_len = cmd
        .attrs()
        .find(|a| a.id() == UVERBS_ATTR_UHW_OUT)
        .map(|a| a.len())
        .ok_or(Errno::INVAL)?;
    if out_len < std::mem::size_of::<EfaIbvCreateCqResp>() {
        return Err(Errno::INVAL);
    }
    let depth = cqe.next_power_of_two();
    let size = depth as usize * usize::from(c.num_sub_cqs) * c.cq_entry_size as usize;
    let buf_fd = in_u32(cmd, UVERBS_ATTR_CREATE_CQ_BUFFER_FD);
    let buf_len = in_u64(cmd, UVERBS_ATTR_CREATE_CQ_BUFFER_LENGTH);
    let buf_off = in_u64(cmd, UVERBS_ATTR_CREATE_CQ_BUFFER_OFFSET).unwrap_or(0);
    let (key, buf, off) = match (buf_fd, buf_len) {
        (None, None) => {
            let (k, r) = dev.region(size)?;
            (k, r, 0)
        }
        (Some(fd), Some(len)) => {
            if cfg.device_caps & EFA_QUERY_DEVICE_CAPS_CQ_WITH_EXT_MEM == 0 {
                return Err(Errno::OPNOTSUPP);
            }
            if (len as usize) < size {
                return Err(Errno::INVAL);
            }
            // The kernel takes a reference on the dmabuf; the model dups the fd and maps it.
            // SAFETY: the fd number is live for the duration of this call (the caller's
            // BorrowedFd); we only borrow it to duplicate it.
            let bfd = unsafe { BorrowedFd::borrow_raw(fd as i32) };
            let dup = rustix::io::fcntl_dupfd_cloexec(bfd, 0)?;
            let skew = (buf_off as usize) % PAGE;
            let maplen = page_align(skew + len as usize);
            // SAFETY: a new shared mapping of the dup'd fd, owned by the Region built below.
            let p = unsafe {
                rustix::mm::mmap(
                    std::ptr::null_mut(),
                    maplen,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED,
                    &dup,
                    buf_off - skew as u64,
                )?
            };
            let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
            (
                0,
                Arc::new(Region {
                    fd: dup,
                    ptr,
                    len: maplen,
                }),
                skew,
            )
        }
        _ => return Err(Errno::INVAL),
    };
    let db_key = if cfg.cq_doorbell {
        Some(dev.region(PAGE)?.0)
    } else {
        None
    };
    let h = dev.handle();
    let idx = dev.next_cqn;
    dev.next_cqn += 1;
    dev.cqs.insert(
        h,
        CqState {
            idx,
            depth,
            nsub: c.num_sub_cqs,
            entry: c.cq_entry_size,
            with_sgid,
            req_id_64: c.flags & EFA_CREATE_CQ_WITH_SQ_COMP_64_BIT_REQ_ID != 0,
            create_drv: c.as_bytes().to_vec(),
            buf: buf.clone(),
            buf_off: off,
            produced: vec![0; usize::from(c.num_sub_cqs)],
            qp_refs: 0,
            key,
            db_key,
        },
    );
    let resp = EfaIbvCreateCqResp {
        comp_mask: if db_key.is_some() {
            EFA_CREATE_CQ_RESP_DB_OFF
        } else {
            0
        },
        q_mmap_key: key,
        q_mmap_size: if key == 0 { 0 } else { buf.len as u64 },
        cq_idx: idx,
        db_off: CQ_DB_OFFSET,
        db_mmap_key: db_key.unwrap_or(0),
        ..Default::default()
    };
    cmd.attr_mut(UVERBS_ATTR_CREATE_CQ_HANDLE)
        .ok_or(Errno::INVAL)?
        .set_new(u64::from(h))?;
    cmd.attr_mut(UVERBS_ATTR_CREATE_CQ_RESP_CQE)
        .ok_or(Errno::INVAL)?
        .write_output(&depth.to_ne_bytes())?;
    cmd.attr_mut(UVERBS_ATTR_UHW_OUT)
        .ok_or(Errno::INVAL)?
        .write_output(resp.as_bytes())?;
    Ok(())
}
