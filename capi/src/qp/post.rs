//! The data path: `ops.post_send` and `ops.post_recv`, from the program's linked lists
//! into the send and receive queues.

use super::*;

/// Why a C work request cannot be converted: its errno.
type Refused = c_int;

/// `len` elements at `p` (an empty slice for 0, whatever `p` is).
///
/// # Safety
/// For `len > 0`, `p` points to `len` valid elements that outlive `'a`.
pub(super) unsafe fn slice<'a, T>(p: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: see above.
        unsafe { core::slice::from_raw_parts(p, len) }
    }
}

/// The SGE list of a C work request, read where it lies: one test for the common case (a
/// positive count and a list), EINVAL for a negative count or a NULL list.
///
/// # Safety
/// `sg_list` holds `num_sge` SGEs (if positive) that outlive `'a`.
#[inline(always)]
pub(super) unsafe fn sges<'a>(sg_list: *const Sge, num_sge: c_int) -> Result<&'a [Sge], Refused> {
    match num_sge {
        1.. if !sg_list.is_null() => {
            // SAFETY: see above; `num_sge` is positive.
            Ok(unsafe { core::slice::from_raw_parts(sg_list, num_sge as usize) })
        }
        0 => Ok(&[]),
        _ => Err(libc::EINVAL),
    }
}

/// Writes the operation of a C send work request to `op`: the sends and RDMA operations
/// here, each stored straight into the WR the provider reads; the others out of line
/// ([`send_op_other`]).
///
/// # Safety
/// `c` is valid; for `IBV_WR_BIND_MW`, its `mw` and `mr` are NULL or the program's; `op` is
/// valid for writes.
#[inline(always)]
unsafe fn send_op_into(op: *mut WrOp, c: &ibv_send_wr) -> Result<(), Refused> {
    // SAFETY: the union members read below are plain numbers, any bytes valid; the opcode
    // says which the program filled in, and only those are used. `op` is writable (above).
    // A chain of compares, the plain send and write first: each costs two instructions,
    // against a jump table's bounds check, load and indirect jump.
    unsafe {
        let o = c.opcode;
        if o == IBV_WR_SEND {
            op.write(WrOp::Send);
        } else if o == IBV_WR_RDMA_WRITE {
            op.write(WrOp::RdmaWrite {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
            });
        } else if o == IBV_WR_SEND_WITH_IMM {
            op.write(WrOp::SendWithImm {
                imm_data: u32::from_be(c.imm_data),
            });
        } else if o == IBV_WR_RDMA_WRITE_WITH_IMM {
            op.write(WrOp::RdmaWriteWithImm {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
                imm_data: u32::from_be(c.imm_data),
            });
        } else if o == IBV_WR_RDMA_READ {
            op.write(WrOp::RdmaRead {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
            });
        } else {
            op.write(send_op_other(c)?);
        }
    }
    Ok(())
}

/// The operation of a C send work request other than those [`send_op_into`] writes itself:
/// atomics, invalidations, binds and what uverbs refuses.
///
/// # Safety
/// `c` is valid; for `IBV_WR_BIND_MW`, its `mw` and `mr` are NULL or the program's.
#[inline(never)]
unsafe fn send_op_other(c: &ibv_send_wr) -> Result<WrOp, Refused> {
    // SAFETY: the union members read below are plain numbers and pointers, any bytes valid;
    // the opcode says which the program filled in, and only those are used.
    Ok(unsafe {
        match c.opcode {
            IBV_WR_ATOMIC_CMP_AND_SWP => WrOp::AtomicCmpAndSwp {
                remote_addr: c.wr.atomic.remote_addr,
                rkey: c.wr.atomic.rkey,
                compare: c.wr.atomic.compare_add,
                swap: c.wr.atomic.swap,
            },
            IBV_WR_ATOMIC_FETCH_AND_ADD => WrOp::AtomicFetchAndAdd {
                remote_addr: c.wr.atomic.remote_addr,
                rkey: c.wr.atomic.rkey,
                add: c.wr.atomic.compare_add,
            },
            IBV_WR_ATOMIC_WRITE => {
                // verbs.h gives `ibv_send_wr` no field for an atomic write's 8 bytes (only
                // `ibv_wr_atomic_write` takes them); here they are read, as inline data is,
                // from the one 8-byte SGE, and travel in the WQE.
                let [s] = sges(c.sg_list, c.num_sge)? else {
                    return Err(libc::EINVAL);
                };
                if s.length != 8 || s.addr == 0 {
                    return Err(libc::EINVAL);
                }
                WrOp::AtomicWrite {
                    remote_addr: c.wr.rdma.remote_addr,
                    rkey: c.wr.rdma.rkey,
                    // The program's 8-byte buffer, read unaligned, as bytes.
                    value: core::ptr::read_unaligned(s.addr as usize as *const [u8; 8]),
                }
            }
            IBV_WR_LOCAL_INV => WrOp::LocalInv {
                invalidate_rkey: c.imm_data,
            },
            IBV_WR_SEND_WITH_INV => WrOp::SendWithInv {
                invalidate_rkey: c.imm_data,
            },
            IBV_WR_BIND_MW => {
                let b = &c.ext.bind_mw;
                bind_op(b.mw, b.rkey, &b.bind_info)?
            }
            IBV_WR_TSO | IBV_WR_FLUSH => return Err(libc::EOPNOTSUPP),
            _ => return Err(libc::EINVAL),
        }
    })
}

/// `IBV_WR_BIND_MW` / `ibv_wr_bind_mw` of window `mw` to `info` with the new key `rkey`.
///
/// # Safety
/// `mw` and `info.mr` are NULL or the program's live objects.
pub(super) unsafe fn bind_op(
    mw: *mut ibv_mw,
    rkey: u32,
    info: &ibv_mw_bind_info,
) -> Result<WrOp, Refused> {
    // SAFETY: see above.
    let mw = unsafe { mw.as_ref() }.ok_or(libc::EINVAL)?;
    // An unbind (length 0) may name no MR.
    // SAFETY: see above.
    let mr_lkey = unsafe { info.mr.as_ref() }.map_or(0, |m| m.lkey);
    Ok(WrOp::BindMw {
        mw_rkey: mw.rkey,
        new_rkey: rkey,
        mr_lkey,
        addr: info.addr,
        length: info.length,
        access: AccessFlags::from_bits_retain(info.mw_access_flags),
    })
}

/// Gathers `parts` (address, length) into `buf`: the bytes, or EINVAL when they exceed it
/// (as rxe refuses inline data above `max_inline_data`).
///
/// # Safety
/// Each part is `length` readable bytes at `address`.
pub(super) unsafe fn gather_into(
    buf: &mut [u8],
    parts: impl Iterator<Item = (u64, usize)>,
) -> Result<usize, Refused> {
    let mut at = 0usize;
    for (addr, len) in parts {
        let end = at
            .checked_add(len)
            .filter(|&e| e <= buf.len())
            .ok_or(libc::EINVAL)?;
        // SAFETY: see above.
        buf[at..end].copy_from_slice(unsafe { slice(addr as usize as *const u8, len) });
        at = end;
    }
    Ok(at)
}

/// The inline data of a C send work request (`IBV_SEND_INLINE`): one SGE (or none) read
/// where it lies; several gathered into `gather` (which the caller keeps unwritten until the
/// WR is posted).
///
/// # Safety
/// As [`send_wr_into`].
#[inline(never)]
unsafe fn inline_data<'a>(
    c: &ibv_send_wr,
    gather: *mut u8,
    gather_len: usize,
) -> Result<WrData<'a>, Refused> {
    // SAFETY: see above.
    let sg = unsafe { sges(c.sg_list, c.num_sge) }?;
    Ok(match sg {
        [s] => {
            let (addr, len) = (s.addr as usize as *const u8, s.length as usize);
            // SAFETY: the program's inline buffer (see above).
            WrData::Inline(unsafe { slice(addr, len) })
        }
        [] => WrData::Inline(&[]),
        _ => {
            // SAFETY: the caller's gather buffer, not read by anything else meanwhile.
            let buf = unsafe { core::slice::from_raw_parts_mut(gather, gather_len) };
            // SAFETY: the program's inline buffers.
            let n = unsafe { gather_into(buf, sg.iter().map(|s| (s.addr, s.length as usize))) }?;
            WrData::Inline(&buf[..n])
        }
    })
}

/// `IBV_WR_SEND`, `IBV_WR_SEND_WITH_IMM`, `IBV_WR_SEND_WITH_INV`: the opcodes that take a
/// datagram destination, as a bit set over the opcode.
const DATAGRAM_OPS: u32 = 1 << IBV_WR_SEND | 1 << IBV_WR_SEND_WITH_IMM | 1 << IBV_WR_SEND_WITH_INV;

/// One C send work request as uverbs posts it, written field by field into `out` (the slot
/// the provider reads: no temporary, no copy). Inline data in one SGE (or none) is read where
/// it lies; in several it is gathered into `gather` (which the caller keeps unwritten until
/// the WR is posted). On `Err`, `out` may hold some of the fields, and is not initialised.
///
/// # Safety
/// `c` is a valid work request whose buffers, SGEs and objects outlive `'a`; `gather` is
/// valid for `gather_len` bytes for `'a`.
#[inline(always)]
unsafe fn send_wr_into<'a>(
    out: &mut MaybeUninit<SendWr<'a>>,
    c: &ibv_send_wr,
    datagram: bool,
    gather: *mut u8,
    gather_len: usize,
) -> Result<(), Refused> {
    let p = out.as_mut_ptr();
    // SAFETY: see above; `p` is `out`'s, valid for writes, and the field pointers are in it.
    unsafe { send_op_into(ptr::addr_of_mut!((*p).op), c) }?;
    let data = if c.opcode == IBV_WR_ATOMIC_WRITE {
        // Its 8 bytes travel in the WQE (send_op_other read them from the one SGE).
        WrData::Sge(&[])
    } else if c.send_flags & IBV_SEND_INLINE == 0 {
        // SAFETY: see above.
        WrData::Sge(unsafe { sges(c.sg_list, c.num_sge) }?)
    } else {
        // SAFETY: see above.
        unsafe { inline_data(c, gather, gather_len) }?
    };
    // The shift is in range: the opcode is one send_op_into took (0 ..= 9).
    let ud = if datagram && DATAGRAM_OPS & (1 << (c.opcode as u32 & 31)) != 0 {
        // SAFETY: on a datagram QP a send's `wr` is `ud` (the program's AH, or NULL).
        let (ah, qpn, qkey) = unsafe { (c.wr.ud.ah, c.wr.ud.remote_qpn, c.wr.ud.remote_qkey) };
        // SAFETY: NULL or the program's live AH.
        let ah = unsafe { crate::ah::ah(ah) }.ok_or(libc::EINVAL)?;
        Some(UdDest::new(&*ah.ah, qpn, qkey))
    } else {
        None
    };
    // SAFETY: as above; with `op` written above, every field of `out` is now written.
    unsafe {
        ptr::addr_of_mut!((*p).wr_id).write(c.wr_id);
        ptr::addr_of_mut!((*p).flags).write(SendFlags::from_bits_truncate(
            c.send_flags & SEND_FLAGS_CARRIED,
        ));
        ptr::addr_of_mut!((*p).data).write(data);
        ptr::addr_of_mut!((*p).ud).write(ud);
    }
    Ok(())
}

/// [`send_wr_into`] of a plain WR (a send or RDMA operation with SGEs, and on a datagram QP
/// an AH): `true` with `out` written; `false` having decided nothing (`out` may hold some
/// fields), for [`post_send_list`] to convert with every check and errno. No call, so the
/// single-WR post around it stays small.
///
/// # Safety
/// As [`send_wr_into`].
#[inline(always)]
unsafe fn send_wr_plain_into<'a>(
    out: &mut MaybeUninit<SendWr<'a>>,
    c: &ibv_send_wr,
    datagram: bool,
) -> bool {
    if c.send_flags & IBV_SEND_INLINE != 0 || c.opcode > IBV_WR_RDMA_READ || c.opcode < 0 {
        return false;
    }
    let p = out.as_mut_ptr();
    // SAFETY: see above; the opcode is one send_op_into writes itself (0 ..= 4), so it
    // neither calls out nor fails.
    if unsafe { send_op_into(ptr::addr_of_mut!((*p).op), c) }.is_err() {
        return false;
    }
    // SAFETY: see above.
    let Ok(sg) = (unsafe { sges(c.sg_list, c.num_sge) }) else {
        return false;
    };
    // Each branch stores its own `ud` (a connected QP's None is one store, not the fields of
    // a destination it does not have).
    if datagram && DATAGRAM_OPS & (1 << (c.opcode as u32 & 31)) != 0 {
        // SAFETY: on a datagram QP a send's `wr` is `ud` (the program's AH, or NULL).
        let (ah, qpn, qkey) = unsafe { (c.wr.ud.ah, c.wr.ud.remote_qpn, c.wr.ud.remote_qkey) };
        // SAFETY: NULL or the program's live AH.
        let Some(ah) = (unsafe { crate::ah::ah(ah) }) else {
            return false;
        };
        // SAFETY: as above.
        unsafe { ptr::addr_of_mut!((*p).ud).write(Some(UdDest::new(&*ah.ah, qpn, qkey))) };
    } else {
        // SAFETY: as above.
        unsafe { ptr::addr_of_mut!((*p).ud).write(None) };
    }
    // SAFETY: as above; with `op` and `ud` written above, every field of `out` is now
    // written.
    unsafe {
        ptr::addr_of_mut!((*p).wr_id).write(c.wr_id);
        ptr::addr_of_mut!((*p).flags).write(SendFlags::from_bits_truncate(
            c.send_flags & SEND_FLAGS_CARRIED,
        ));
        ptr::addr_of_mut!((*p).data).write(WrData::Sge(sg));
    }
    true
}

/// The operation and SGEs of a plain WR for a connected QP (a send or RDMA operation with
/// SGEs), read in place for [`uverbs::Qp::stage_send`]: no `SendWr` is built. None for
/// anything else (inline data, other opcodes, a bad SGE list), which the chunked path
/// converts with every check and errno.
///
/// # Safety
/// `c` is a valid work request whose SGEs outlive `'a`.
#[inline(always)]
unsafe fn plain_parts<'a>(c: &ibv_send_wr) -> Option<(WrOp, &'a [Sge])> {
    if c.send_flags & IBV_SEND_INLINE != 0 {
        return None;
    }
    // SAFETY: the union members read below are plain numbers, any bytes valid; the opcode
    // says which the program filled in, and only those are used.
    let op = unsafe {
        match c.opcode {
            IBV_WR_RDMA_WRITE => WrOp::RdmaWrite {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
            },
            IBV_WR_SEND => WrOp::Send,
            IBV_WR_SEND_WITH_IMM => WrOp::SendWithImm {
                imm_data: u32::from_be(c.imm_data),
            },
            IBV_WR_RDMA_WRITE_WITH_IMM => WrOp::RdmaWriteWithImm {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
                imm_data: u32::from_be(c.imm_data),
            },
            IBV_WR_RDMA_READ => WrOp::RdmaRead {
                remote_addr: c.wr.rdma.remote_addr,
                rkey: c.wr.rdma.rkey,
            },
            _ => return None,
        }
    };
    // SAFETY: see above.
    let sg = unsafe { sges(c.sg_list, c.num_sge) }.ok()?;
    Some((op, sg))
}

/// Stages the plain WRs at the head of the list from `wr` on a connected QP
/// ([`plain_parts`], [`uverbs::Qp::stage_send`]: each written into the send queue from the C
/// struct, no `SendWr` in between) and rings once for them. Returns the first WR not staged
/// (NULL: all were) for the chunked path, or `Err` with the errno of a failed doorbell.
///
/// # Safety
/// `wr` heads a valid list; `bad_wr` is valid for writes.
#[inline(always)]
unsafe fn stage_plain(
    q: &mut uverbs::Qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> Result<*mut ibv_send_wr, c_int> {
    let mut staged = 0usize;
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: an element of the program's list.
        let c = unsafe { &*cur };
        // SAFETY: as above.
        let Some((op, sg)) = (unsafe { plain_parts(c) }) else {
            break;
        };
        let flags = SendFlags::from_bits_truncate(c.send_flags & SEND_FLAGS_CARRIED);
        if !q.stage_send(c.wr_id, &op, flags, sg) {
            break;
        }
        staged += 1;
        cur = c.next;
    }
    match q.ring_staged(staged) {
        Ok(()) => Ok(cur),
        // SAFETY: `wr` heads the `staged` WRs; the doorbell's index (`staged`) names `cur`.
        Err(e) => Err(unsafe { refused(e, staged, wr, cur, bad_wr) }),
    }
}

/// The errno of a refused post, with `*bad_wr` the C work request uverbs names: the
/// `index`-th of the `n` posted from `first` on, or `after` (the first not converted) when the
/// index is past them (the doorbell failed for all of them). Out of line: the posts' error
/// path.
///
/// # Safety
/// `first` heads at least `n` valid WRs of the program's list; `bad_wr` is valid for writes.
#[cold]
#[inline(never)]
unsafe fn refused(
    e: uverbs::PostError,
    n: usize,
    first: *mut ibv_send_wr,
    after: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let bad = if e.index < n {
        let mut p = first;
        for _ in 0..e.index {
            // SAFETY: one of the first n WRs from `first` (see above), so `next` is the next.
            p = unsafe { (*p).next };
        }
        p
    } else {
        after
    };
    // SAFETY: see above.
    unsafe { *bad_wr = bad };
    report(&e.error)
}

/// Posts `wrs` (converted from the C list starting at `first`) on `q`; on refusal,
/// [`refused`] names the C work request in `*bad_wr` and the errno is returned.
///
/// # Safety
/// `first` heads the `wrs.len()` WRs converted; `bad_wr` is valid for writes.
#[inline(always)]
unsafe fn flush_send(
    q: &mut uverbs::Qp,
    wrs: &[SendWr<'_>],
    first: *mut ibv_send_wr,
    after: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    if wrs.is_empty() {
        return 0;
    }
    match q.post_send(wrs) {
        Ok(()) => 0,
        // SAFETY: see above.
        Err(e) => unsafe { refused(e, wrs.len(), first, after, bad_wr) },
    }
}

/// `ibv_context.ops.post_send` (the header's `ibv_post_send`). On a connected QP the plain
/// WRs at the head of the list are written into the send queue from the C structs and rung
/// once ([`stage_plain`]: rxe; no `SendWr` is built). On a datagram QP (every EFA QP) one
/// plain WR (`next` NULL, the latency case: [`send_wr_plain_into`]) is converted on the stack
/// and posted as a one-element slice. Everything else goes to [`post_send_list`].
pub unsafe extern "C" fn post_send(
    q: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    guard("ibv_post_send", libc::EIO, || {
        if bad_wr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: checked non-NULL; the program's pointer.
        unsafe { *bad_wr = ptr::null_mut() };
        // SAFETY: the program passes NULL or a live QP it alone posts to.
        let Some(w) = (unsafe { qp(q) }) else {
            return libc::EINVAL;
        };
        // SAFETY: the program passes NULL or a valid WR.
        let Some(c) = (unsafe { wr.as_ref() }) else {
            return libc::EINVAL;
        };
        if !w.datagram {
            // SAFETY: the program's list; `bad_wr` checked above.
            match unsafe { stage_plain(&mut w.qp, wr, bad_wr) } {
                Ok(rest) if rest.is_null() => return 0,
                // SAFETY: the rest of the program's list; `bad_wr` checked above.
                Ok(rest) => return unsafe { post_send_list(w, rest, bad_wr) },
                Err(errno) => return errno,
            }
        }
        if c.next.is_null() {
            let mut s = MaybeUninit::uninit();
            // SAFETY: the program's WR.
            if unsafe { send_wr_plain_into(&mut s, c, w.datagram) } {
                // SAFETY: `s` is written (true); `wr` is the one WR converted; `bad_wr`
                // checked above.
                return unsafe {
                    flush_send(
                        &mut w.qp,
                        core::slice::from_ref(s.assume_init_ref()),
                        wr,
                        ptr::null_mut(),
                        bad_wr,
                    )
                };
            }
        }
        // SAFETY: the program's list of valid WRs; `bad_wr` checked above.
        unsafe { post_send_list(w, wr, bad_wr) }
    })
}

/// [`post_send`] of a list: chunks of up to [`SEND_CHUNK`] converted WRs (stack slots written as
/// they are filled), each posted at once; a WR that cannot be converted is refused after
/// those before it are posted.
///
/// # Safety
/// `wr` heads a valid list; `bad_wr` is valid for writes.
#[inline(never)]
unsafe fn post_send_list(w: &mut Qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr) -> c_int {
    let datagram = w.datagram;
    let (gather, gather_len) = (w.gather.as_mut_ptr(), w.gather.len());
    let mut wrs: [MaybeUninit<SendWr<'_>>; SEND_CHUNK] =
        [const { MaybeUninit::uninit() }; SEND_CHUNK];
    let mut n = 0;
    // The C WR of wrs[0].
    let mut first = wr;
    // A WR of the unposted chunk holds inline data in `gather`.
    let mut gathered = false;
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: an element of the program's list.
        let c = unsafe { &*cur };
        let gathers = c.send_flags & IBV_SEND_INLINE != 0 && c.num_sge > 1;
        if n == SEND_CHUNK || (gathers && gathered) {
            // SAFETY: the first n elements are initialised; SendWr is Copy (no drop).
            let chunk = unsafe { slice(wrs.as_ptr() as *const SendWr<'_>, n) };
            // SAFETY: `first` heads the chunk's WRs; bad_wr valid (above).
            let r = unsafe { flush_send(&mut w.qp, chunk, first, cur, bad_wr) };
            if r != 0 {
                return r;
            }
            n = 0;
            first = cur;
            gathered = false;
        }
        // SAFETY: the program's WR; `gather` is not in use by an unposted WR (above).
        match unsafe { send_wr_into(&mut wrs[n], c, datagram, gather, gather_len) } {
            Ok(()) => {
                n += 1;
                gathered |= gathers;
            }
            Err(errno) => {
                // SAFETY: as above.
                let chunk = unsafe { slice(wrs.as_ptr() as *const SendWr<'_>, n) };
                // SAFETY: as above.
                let r = unsafe { flush_send(&mut w.qp, chunk, first, cur, bad_wr) };
                if r != 0 {
                    return r;
                }
                // SAFETY: bad_wr valid (above).
                unsafe { *bad_wr = cur };
                return errno;
            }
        }
        cur = c.next;
    }
    // SAFETY: as above.
    let chunk = unsafe { slice(wrs.as_ptr() as *const SendWr<'_>, n) };
    // SAFETY: as above.
    unsafe { flush_send(&mut w.qp, chunk, first, ptr::null_mut(), bad_wr) }
}

/// `ibv_context.ops.post_recv` (the header's `ibv_post_recv`).
pub unsafe extern "C" fn post_recv(
    q: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    guard("ibv_post_recv", libc::EIO, || {
        if bad_wr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: checked non-NULL; the program's pointer.
        unsafe { *bad_wr = ptr::null_mut() };
        // SAFETY: the program passes NULL or a live QP it alone posts to.
        let Some(w) = (unsafe { qp(q) }) else {
            return libc::EINVAL;
        };
        if wr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program's list of valid WRs; `bad_wr` checked above.
        unsafe { post_recv_list(&mut w.qp, wr, bad_wr) }
    })
}

/// Posts a C list of receive WRs on `q` in chunks of [`CHUNK`].
///
/// # Safety
/// `wr` heads a valid list; `bad_wr` is valid for writes.
unsafe fn post_recv_list(
    q: &mut uverbs::Qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let mut wrs: [MaybeUninit<RecvWr<'_>>; CHUNK] = [const { MaybeUninit::uninit() }; CHUNK];
    let mut src = [ptr::null_mut::<ibv_recv_wr>(); CHUNK];
    let mut n = 0;
    let mut cur = wr;
    let flush = |q: &mut uverbs::Qp, wrs: &[RecvWr<'_>], src: &[*mut ibv_recv_wr], after| {
        if wrs.is_empty() {
            return 0;
        }
        match q.post_recv(wrs) {
            Ok(()) => 0,
            Err(e) => {
                // SAFETY: bad_wr valid (above).
                unsafe { *bad_wr = src.get(e.index).copied().unwrap_or(after) };
                report(&e.error)
            }
        }
    };
    while !cur.is_null() {
        // SAFETY: an element of the program's list.
        let c = unsafe { &*cur };
        if n == CHUNK {
            // SAFETY: the first n elements are initialised; RecvWr is Copy (no drop).
            let chunk = unsafe { slice(wrs.as_ptr() as *const RecvWr<'_>, n) };
            let r = flush(q, chunk, &src[..n], cur);
            if r != 0 {
                return r;
            }
            n = 0;
        }
        // SAFETY: the program's SGE list of this WR.
        match unsafe { sges(c.sg_list, c.num_sge) } {
            Ok(sg) => {
                wrs[n].write(RecvWr::new(c.wr_id, sg));
                src[n] = cur;
                n += 1;
            }
            Err(errno) => {
                // SAFETY: as above.
                let chunk = unsafe { slice(wrs.as_ptr() as *const RecvWr<'_>, n) };
                let r = flush(q, chunk, &src[..n], cur);
                if r != 0 {
                    return r;
                }
                // SAFETY: bad_wr valid (above).
                unsafe { *bad_wr = cur };
                return errno;
            }
        }
        cur = c.next;
    }
    // SAFETY: as above.
    let chunk = unsafe { slice(wrs.as_ptr() as *const RecvWr<'_>, n) };
    flush(q, chunk, &src[..n], ptr::null_mut())
}
