//! The `ibv_qp_ex` builders (`wr_start` … `wr_complete`) on the QP's open batch.

use super::post::{bind_op, gather_into, slice};
use super::*;

impl Qp {
    /// Runs one builder or setter on the open batch (nothing without one: calling them
    /// outside `wr_start` … `wr_complete` is the program's error, as in rdma-core).
    pub(super) fn step(&mut self, f: impl FnOnce(&mut uverbs::WrBatch<'_>, &mut [u8])) {
        if !self.batch_open {
            return;
        }
        let mut b = self.qp.wr_resume(self.batch_err.take());
        f(&mut b, &mut self.gather);
        self.batch_err = b.suspend();
    }

    /// The `wr_id` and flags the program set in the `ibv_qp_ex` for the next builder.
    fn wr_id_flags(&self) -> (u64, SendFlags) {
        (
            self.ibv.wr_id,
            SendFlags::from_bits_truncate(self.ibv.wr_flags & SEND_FLAGS_CARRIED),
        )
    }

    /// A refusal of this library's own in the open batch (the first error wins; `complete`
    /// reports it).
    fn refuse(&mut self, call: &'static str, why: &'static str) {
        if self.batch_open && self.batch_err.is_none() {
            self.batch_err = Some(einval(call, why));
        }
    }
}

/// The QP of an `ibv_qp_ex` (None for NULL).
///
/// # Safety
/// `p` is NULL or the `ibv_qp_ex` of a live QP of this library, used by no other thread.
unsafe fn qpx<'a>(p: *mut ibv_qp_ex) -> Option<&'a mut Qp> {
    // SAFETY: see above; the ibv_qp_ex is the first field of the repr(C) Qp.
    unsafe { (p as *mut Qp).as_mut() }
}

/// A builder: the operation `op` with the `wr_id` and flags the program set.
fn build(x: *mut ibv_qp_ex, call: &'static str, op: impl FnOnce() -> WrOp) {
    guard(call, (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        let (id, flags) = w.wr_id_flags();
        w.step(|b, _| {
            b.wr_op(id, flags, op());
        });
    })
}

pub(super) unsafe extern "C" fn wr_start(x: *mut ibv_qp_ex) {
    guard("ibv_wr_start", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if w.batch_open {
            // A second start: the open batch fails (complete reports it).
            w.refuse(
                "wr_start",
                "ibv_wr_start called again before ibv_wr_complete",
            );
            return;
        }
        w.batch_open = true;
        w.batch_err = match w.qp.wr_start() {
            Ok(b) => b.suspend(),
            // The batch is open but refused: complete reports why.
            Err(e) => Some(e),
        };
    })
}

pub(super) unsafe extern "C" fn wr_complete(x: *mut ibv_qp_ex) -> c_int {
    guard("ibv_wr_complete", libc::EIO, || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else {
            return libc::EINVAL;
        };
        if !w.batch_open {
            return libc::EINVAL;
        }
        w.batch_open = false;
        let b = w.qp.wr_resume(w.batch_err.take());
        crate::util::ret(b.complete())
    })
}

pub(super) unsafe extern "C" fn wr_abort(x: *mut ibv_qp_ex) {
    guard("ibv_wr_abort", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if w.batch_open {
            w.batch_open = false;
            w.qp.wr_resume(w.batch_err.take()).abort();
        }
    })
}

pub(super) unsafe extern "C" fn wr_send(x: *mut ibv_qp_ex) {
    build(x, "ibv_wr_send", || WrOp::Send);
}

pub(super) unsafe extern "C" fn wr_send_imm(x: *mut ibv_qp_ex, imm_data: u32) {
    build(x, "ibv_wr_send_imm", || WrOp::SendWithImm {
        imm_data: u32::from_be(imm_data),
    });
}

pub(super) unsafe extern "C" fn wr_send_inv(x: *mut ibv_qp_ex, invalidate_rkey: u32) {
    build(x, "ibv_wr_send_inv", || WrOp::SendWithInv {
        invalidate_rkey,
    });
}

pub(super) unsafe extern "C" fn wr_rdma_write(x: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    build(x, "ibv_wr_rdma_write", || WrOp::RdmaWrite {
        remote_addr,
        rkey,
    });
}

pub(super) unsafe extern "C" fn wr_rdma_write_imm(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm: u32,
) {
    build(x, "ibv_wr_rdma_write_imm", || WrOp::RdmaWriteWithImm {
        remote_addr,
        rkey,
        imm_data: u32::from_be(imm),
    });
}

pub(super) unsafe extern "C" fn wr_rdma_read(x: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    build(x, "ibv_wr_rdma_read", || WrOp::RdmaRead {
        remote_addr,
        rkey,
    });
}

pub(super) unsafe extern "C" fn wr_atomic_cmp_swp(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    build(x, "ibv_wr_atomic_cmp_swp", || WrOp::AtomicCmpAndSwp {
        remote_addr,
        rkey,
        compare,
        swap,
    });
}

pub(super) unsafe extern "C" fn wr_atomic_fetch_add(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    build(x, "ibv_wr_atomic_fetch_add", || WrOp::AtomicFetchAndAdd {
        remote_addr,
        rkey,
        add,
    });
}

/// `ibv_wr_atomic_write`: the 8 bytes at `atomic_wr` are copied into the work request now.
pub(super) unsafe extern "C" fn wr_atomic_write(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    atomic_wr: *const c_void,
) {
    if atomic_wr.is_null() {
        guard("ibv_wr_atomic_write", (), || {
            // SAFETY: the header passes the program's live ibv_qp_ex.
            if let Some(w) = unsafe { qpx(x) } {
                w.refuse("wr_atomic_write", "NULL atomic_wr (the 8 bytes to write)");
            }
        });
        return;
    }
    // SAFETY: the program passes 8 readable bytes (verbs.h's contract); read as bytes.
    let value = unsafe { core::ptr::read_unaligned(atomic_wr as *const [u8; 8]) };
    build(x, "ibv_wr_atomic_write", || WrOp::AtomicWrite {
        remote_addr,
        rkey,
        value,
    });
}

pub(super) unsafe extern "C" fn wr_local_inv(x: *mut ibv_qp_ex, invalidate_rkey: u32) {
    build(x, "ibv_wr_local_inv", || WrOp::LocalInv { invalidate_rkey });
}

pub(super) unsafe extern "C" fn wr_bind_mw(
    x: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    guard("ibv_wr_bind_mw", (), || {
        // SAFETY: the program passes NULL or a valid bind info.
        let op = match unsafe { info.as_ref() } {
            // SAFETY: the program's MW and MR (or NULL).
            Some(i) => unsafe { bind_op(mw, rkey, i) },
            None => Err(libc::EINVAL),
        };
        match op {
            Ok(op) => build(x, "ibv_wr_bind_mw", || op),
            Err(_) => {
                // SAFETY: the header passes the program's live ibv_qp_ex.
                if let Some(w) = unsafe { qpx(x) } {
                    w.refuse("wr_bind_mw", "NULL memory window or bind info");
                }
            }
        }
    })
}

pub(super) unsafe extern "C" fn wr_set_sge(x: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    guard("ibv_wr_set_sge", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        w.step(|b, _| {
            b.set_sge(lkey, addr, length);
        });
    })
}

pub(super) unsafe extern "C" fn wr_set_sge_list(
    x: *mut ibv_qp_ex,
    num_sge: usize,
    sg_list: *const Sge,
) {
    guard("ibv_wr_set_sge_list", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if num_sge > 0 && sg_list.is_null() {
            return w.refuse("wr_set_sge_list", "NULL sg_list");
        }
        // SAFETY: the program's `num_sge` SGEs, read during this call.
        let sg = unsafe { slice(sg_list, num_sge) };
        w.step(|b, _| {
            b.set_sge_list(sg);
        });
    })
}

pub(super) unsafe extern "C" fn wr_set_inline_data(
    x: *mut ibv_qp_ex,
    addr: *mut c_void,
    length: usize,
) {
    guard("ibv_wr_set_inline_data", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if length > 0 && addr.is_null() {
            return w.refuse("wr_set_inline_data", "NULL inline data");
        }
        // SAFETY: the program's `length` bytes, copied during this call.
        let data = unsafe { slice(addr as *const u8, length) };
        w.step(|b, _| {
            b.set_inline_data(data);
        });
    })
}

pub(super) unsafe extern "C" fn wr_set_inline_data_list(
    x: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) {
    guard("ibv_wr_set_inline_data_list", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        if num_buf > 0 && buf_list.is_null() {
            return w.refuse("wr_set_inline_data_list", "NULL buf_list");
        }
        // SAFETY: the program's `num_buf` buffers, read during this call.
        let bufs = unsafe { slice(buf_list, num_buf) };
        let mut too_long = false;
        w.step(|b, gather| {
            let parts = bufs.iter().map(|d| (d.addr as usize as u64, d.length));
            // SAFETY: each buffer is the program's `length` readable bytes.
            match unsafe { gather_into(gather, parts) } {
                Ok(n) => {
                    b.set_inline_data(&gather[..n]);
                }
                Err(_) => too_long = true,
            }
        });
        if too_long {
            w.refuse(
                "wr_set_inline_data_list",
                "inline data longer than the QP's max_inline_data",
            );
        }
    })
}

pub(super) unsafe extern "C" fn wr_set_ud_addr(
    x: *mut ibv_qp_ex,
    ah: *mut ibv_ah,
    qpn: u32,
    qkey: u32,
) {
    guard("ibv_wr_set_ud_addr", (), || {
        // SAFETY: the header passes the program's live ibv_qp_ex.
        let Some(w) = (unsafe { qpx(x) }) else { return };
        // SAFETY: the program passes NULL or a live AH.
        match unsafe { crate::ah::ah(ah) } {
            Some(a) => w.step(|b, _| {
                b.set_ud_addr(&a.ah, qpn, qkey);
            }),
            None => w.refuse("wr_set_ud_addr", "NULL address handle"),
        }
    })
}
