//! Memory regions (`ibv_reg_mr`, `ibv_reg_dmabuf_mr`, `ibv_rereg_mr`, `ibv_dereg_mr`).
//!
//! # Soundness
//! A registered buffer may be read or written by the device at any time while a work request
//! that names it is outstanding, and by a remote peer at any time for as long as its rkey is
//! valid. Safe code must therefore never hold a `&[u8]`/`&mut [u8]` over it and must never free
//! it while it is registered. [`Mr`] owns its memory for that reason: `Pd::reg_mr` allocates
//! page-aligned memory, the memory is reached through copies ([`Mr::read`], [`Mr::write`]) and
//! raw pointers, and dropping the `Mr` deregisters first (after which the kernel guarantees the
//! device no longer touches it) and unmaps second. Registering memory the caller owns is
//! `unsafe` ([`Pd::reg_mr_raw`]): the caller promises it stays mapped until the MR is dropped.
//!
//! Between threads of this process the copies are plain memory accesses, so Rust's rules hold:
//! reading takes `&self`, writing (`Mr::write`, `Mr::fill`) takes `&mut self`, and a program
//! that writes from several threads synchronises them itself (see [`Mr`], "Threads"). Volatile
//! copies would not make a shared `&Mr` writer sound (two volatile writes from two threads are
//! still a data race; Miri says so), and relaxed atomic copies would cost every byte of every
//! copy on every user for a pattern that needs a lock anyway.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

use uverbs_uapi::cmds::{
    UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, UVERBS_ATTR_REG_DMABUF_MR_FD,
    UVERBS_ATTR_REG_DMABUF_MR_HANDLE, UVERBS_ATTR_REG_DMABUF_MR_IOVA,
    UVERBS_ATTR_REG_DMABUF_MR_LENGTH, UVERBS_ATTR_REG_DMABUF_MR_OFFSET,
    UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY,
    UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, UVERBS_METHOD_REG_DMABUF_MR, UVERBS_OBJECT_MR,
};
use uverbs_uapi::write::{
    IbUverbsRegMr, IbUverbsRegMrResp, IbUverbsReregMr, IbUverbsReregMrResp,
    IB_USER_VERBS_CMD_DEREG_MR, IB_USER_VERBS_CMD_REG_MR, IB_USER_VERBS_CMD_REREG_MR,
};

use crate::channel::{self, Mapping};
use crate::context::legacy_cmd;
use crate::error::{Errno, Error, Result};
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject};
use crate::pd::Pd;

// The access flags and `struct ibv_sge` are the work-request vocabulary the providers share.
#[doc(inline)]
pub use uverbs_wr::{AccessFlags, Sge};

/// Page-aligned memory owned by an [`Mr`].
#[derive(Debug)]
pub struct MrBuffer {
    map: Mapping,
    len: usize,
}

impl MrBuffer {
    /// Allocates `len` zeroed bytes, rounded up to whole pages in the mapping.
    pub fn new(len: usize) -> std::result::Result<Self, Errno> {
        let page = rustix::param::page_size();
        let rounded = len
            .max(1)
            .checked_next_multiple_of(page)
            .ok_or(Errno::NOMEM)?;
        Ok(MrBuffer {
            map: channel::anonymous(rounded)?,
            len,
        })
    }
}

enum Memory {
    Owned(MrBuffer),
    /// The caller's memory, from this address (which work requests may name by another
    /// address, the iova).
    Borrowed(u64),
    Dmabuf,
}

/// A registered memory region (`struct ibv_mr`).
///
/// [`Pd::reg_mr`] allocates page-aligned memory and registers it; the MR owns the memory,
/// so no device can write to freed memory. Fill and read it with [`Mr::write`] and
/// [`Mr::read`], and describe parts of it to work requests with [`Mr::sge`]:
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// use uverbs::AccessFlags;
///
/// let pd = ctx.alloc_pd()?;
/// let mut mr = pd.reg_mr(8192, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
/// mr.write(0, b"hello")?;
/// let mut back = [0u8; 5];
/// mr.read(0, &mut back)?;
/// assert_eq!(&back, b"hello");
/// // The first 5 bytes, as a scatter/gather element for a send or receive.
/// let sge = mr.sge(0, 5)?;
/// assert_eq!((sge.addr, sge.length, sge.lkey), (mr.addr(), 5, mr.lkey()));
/// // A peer writes into it with this rkey at this address.
/// println!("rkey {:#x} addr {:#x}", mr.rkey(), mr.addr());
/// assert!(mr.sge(8190, 5).is_err()); // past the end: a clear error, not a fault
/// # Ok::<(), uverbs::Error>(())
/// ```
///
/// # Threads
///
/// An `Mr` is `Send` and `Sync`. What it does through `&self` — keys, SGEs, [`Mr::read`],
/// kernel commands — any number of threads may do at once. Writing its memory ([`Mr::write`],
/// [`Mr::fill`]) takes `&mut self`, because these are plain copies: two threads copying into
/// the same bytes at once, or one copying in while another copies out, is a data race, which
/// Rust makes undefined behaviour. So to write from several threads, give the `Mr` your own
/// synchronisation (a `Mutex<Mr>`, an `RwLock<Mr>`, or one writer at a time handing it on),
/// as for a `Qp` or a `Cq`. Writes through [`Mr::as_ptr`] are yours to synchronise the same
/// way. The device and remote peers are outside this rule: they write by DMA, which Rust's
/// memory model does not see, so a read while they may be writing returns unspecified bytes,
/// never undefined behaviour (see the module's `Soundness`).
///
/// Two threads writing through a shared `&Mr` do not compile:
///
/// ```compile_fail,E0596
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// let mr = ctx.alloc_pd()?.reg_mr(4096, uverbs::AccessFlags::LOCAL_WRITE)?;
/// let shared: &uverbs::Mr = &mr;
/// std::thread::scope(|s| {
///     s.spawn(|| shared.write(0, b"one"));
///     s.spawn(|| shared.write(0, b"two"));
/// });
/// # Ok::<(), uverbs::Error>(())
/// ```
///
/// Behind a lock they do; once nobody writes, readers share it:
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// use std::sync::Mutex;
///
/// let mr = Mutex::new(ctx.alloc_pd()?.reg_mr(4096, uverbs::AccessFlags::LOCAL_WRITE)?);
/// std::thread::scope(|s| {
///     for t in 0..2u8 {
///         let mr = &mr;
///         s.spawn(move || mr.lock().unwrap().write(usize::from(t), &[t + 1]));
///     }
/// });
/// let mr = mr.into_inner().unwrap();
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| {
///             let mut back = [0u8; 2];
///             mr.read(0, &mut back).unwrap();
///             assert_eq!(back, [1, 2]);
///         });
///     }
/// });
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_mr")]
pub struct Mr {
    // Deregistered (by `Drop for Mr`) before the PD and the memory are released.
    obj: KernelObject,
    pd: Pd,
    lkey: u32,
    rkey: u32,
    addr: u64,
    len: usize,
    access: AccessFlags,
    memory: Memory,
}

/// `ibv_dereg_mr`: `IB_USER_VERBS_CMD_DEREG_MR`.
static DEREG_MR: Destroy = Destroy {
    name: "mr",
    op: "dereg_mr",
    cmd: DestroyCmd::Write {
        command: IB_USER_VERBS_CMD_DEREG_MR,
    },
};

fn mr_object(pd: &Pd, handle: u32) -> KernelObject {
    KernelObject::new(pd.context().clone(), handle, &DEREG_MR, handle)
}

impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mr")
            .field("handle", &self.obj.handle())
            .field("lkey", &self.lkey)
            .field("rkey", &self.rkey)
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .field("access", &self.access)
            .finish()
    }
}

fn check_access(op: &'static str, object: &str, access: AccessFlags) -> Result<()> {
    let needs_local = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
    if access.intersects(needs_local) && !access.contains(AccessFlags::LOCAL_WRITE) {
        return Err(Error::invalid(
            op,
            object.to_string(),
            Errno::INVAL,
            "REMOTE_WRITE and REMOTE_ATOMIC access require LOCAL_WRITE",
        ));
    }
    Ok(())
}

impl Pd {
    /// Allocates `len` bytes of page-aligned memory and registers it (`ibv_reg_mr`).
    #[doc(alias = "ibv_reg_mr")]
    pub fn reg_mr(&self, len: usize, access: AccessFlags) -> Result<Mr> {
        let op = "reg_mr";
        if len == 0 {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::INVAL,
                "length is zero",
            ));
        }
        check_access(op, &self.label(), access)?;
        let buf = MrBuffer::new(len).map_err(|e| {
            Error::os(op, self.label(), e).with_reason(format!("cannot allocate {len} bytes"))
        })?;
        let addr = buf.map.as_ptr().as_ptr() as u64;
        self.register(addr, len, addr, access, Memory::Owned(buf))
    }

    /// Registers memory the caller owns (`ibv_reg_mr` on an existing buffer).
    ///
    /// # Safety
    /// `addr..addr+len` must stay mapped until the returned `Mr` is dropped, and the caller
    /// must not form Rust references to it while the device or a peer may write it.
    #[doc(alias = "ibv_reg_mr")]
    #[allow(unsafe_code)]
    pub unsafe fn reg_mr_raw(&self, addr: *mut u8, len: usize, access: AccessFlags) -> Result<Mr> {
        // SAFETY: the caller's promise (above) is the one reg_mr_iova_raw asks for.
        unsafe { self.reg_mr_iova_raw(addr, len, addr as u64, access) }
    }

    /// Registers memory the caller owns, which work requests address from `iova` on
    /// (`ibv_reg_mr_iova`): `iova` names the byte at `addr`. [`Mr::addr`] is `iova`.
    ///
    /// # Safety
    /// As [`Pd::reg_mr_raw`]: `addr..addr+len` must stay mapped until the returned `Mr` is
    /// dropped, and the caller must not form Rust references to it while the device or a
    /// peer may write it.
    #[doc(alias = "ibv_reg_mr_iova")]
    #[doc(alias = "ibv_reg_mr_iova2")]
    #[allow(unsafe_code)]
    pub unsafe fn reg_mr_iova_raw(
        &self,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = "reg_mr";
        if len == 0 {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::INVAL,
                "length is zero",
            ));
        }
        check_access(op, &self.label(), access)?;
        let start = addr as u64;
        self.register(start, len, iova, access, Memory::Borrowed(start))
    }

    /// Registers `len` bytes at `offset` of a dmabuf (`ibv_reg_dmabuf_mr`). `iova` is the
    /// address work requests use for its first byte.
    #[doc(alias = "ibv_reg_dmabuf_mr")]
    pub fn reg_dmabuf_mr(
        &self,
        dmabuf: BorrowedFd<'_>,
        offset: u64,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = "reg_dmabuf_mr";
        if len == 0 {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::INVAL,
                "length is zero",
            ));
        }
        check_access(op, &self.label(), access)?;
        let mut lkey = 0u32;
        let mut rkey = 0u32;
        let access_bits = access.bits();
        let mut cmd = channel::IoctlCmd::new(UVERBS_OBJECT_MR, UVERBS_METHOD_REG_DMABUF_MR);
        cmd.idr_new(UVERBS_ATTR_REG_DMABUF_MR_HANDLE)
            .idr(UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, self.handle())
            .u64_in(UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset)
            .u64_in(UVERBS_ATTR_REG_DMABUF_MR_LENGTH, len as u64)
            .u64_in(UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova)
            .u32_in(UVERBS_ATTR_REG_DMABUF_MR_FD, dmabuf.as_raw_fd() as u32)
            .u32_in(UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, access_bits)
            .ptr_out(UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, &mut lkey)
            .ptr_out(UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, &mut rkey);
        let r = self.context().ioctl_cmd(op, &|| self.label(), &mut cmd);
        let handle = cmd.out_data(UVERBS_ATTR_REG_DMABUF_MR_HANDLE).unwrap_or(0) as u32;
        if let Err(e) = r {
            return Err(if e.is(Errno::OPNOTSUPP) || e.is(Errno::PROTONOSUPPORT) {
                e.with_reason("the device does not support dmabuf memory regions")
            } else {
                e
            });
        }
        Ok(Mr {
            obj: mr_object(self, handle),
            pd: self.clone(),
            lkey,
            rkey,
            addr: iova,
            len,
            access,
            memory: Memory::Dmabuf,
        })
    }

    fn register(
        &self,
        start: u64,
        len: usize,
        hca_va: u64,
        access: AccessFlags,
        memory: Memory,
    ) -> Result<Mr> {
        let req = IbUverbsRegMr {
            start,
            length: len as u64,
            hca_va,
            pd_handle: self.handle(),
            access_flags: access.bits(),
            ..Default::default()
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_REG_MR,
            &req,
            &[],
            std::mem::size_of::<IbUverbsRegMrResp>(),
            0,
        );
        self.context()
            .write_cmd("reg_mr", &|| self.label(), &mut cmd)
            .map_err(|e| {
                let why = match e.errno() {
                    Some(Errno::FAULT) => "the address range is not mapped in this process",
                    Some(Errno::NOMEM) => "cannot pin the pages (check RLIMIT_MEMLOCK)",
                    Some(Errno::INVAL) => "the kernel rejected the address, length or access flags",
                    _ => "",
                };
                e.with_reason(format!("{len} bytes at {start:#x}: {why}"))
            })?;
        let resp: IbUverbsRegMrResp = cmd.response_as();
        Ok(Mr {
            obj: mr_object(self, resp.mr_handle),
            pd: self.clone(),
            lkey: resp.lkey,
            rkey: resp.rkey,
            addr: hca_va,
            len,
            access,
            memory,
        })
    }
}

impl Mr {
    /// The local key, for SGEs.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
    /// The remote key, for a peer's RDMA and atomic operations.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// The address work requests use for the first byte.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// The registered length.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the MR is empty (never: zero-length registrations are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The access rights.
    pub fn access(&self) -> AccessFlags {
        self.access
    }
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.obj.handle()
    }
    /// The protection domain.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    fn label(&self) -> String {
        self.obj.label()
    }

    /// An SGE for `len` bytes at `offset`, checked to lie inside the MR.
    pub fn sge(&self, offset: usize, len: u32) -> Result<Sge> {
        let end = offset.checked_add(len as usize);
        if end.is_none_or(|e| e > self.len) {
            return Err(Error::invalid(
                "sge",
                self.label(),
                Errno::INVAL,
                format!(
                    "{len} bytes at offset {offset} exceed the MR length {}",
                    self.len
                ),
            ));
        }
        Ok(Sge {
            addr: self.addr + offset as u64,
            length: len,
            lkey: self.lkey,
        })
    }

    /// An SGE covering the whole MR (for MRs up to 4 GiB - 1).
    pub fn sge_all(&self) -> Sge {
        Sge {
            addr: self.addr,
            length: u32::try_from(self.len).unwrap_or(u32::MAX),
            lkey: self.lkey,
        }
    }

    fn owned_ptr(&self, op: &'static str, offset: usize, n: usize) -> Result<NonNull<u8>> {
        let Memory::Owned(buf) = &self.memory else {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::INVAL,
                "only memory allocated by reg_mr can be accessed through the MR",
            ));
        };
        if offset.checked_add(n).is_none_or(|e| e > buf.len) {
            return Err(Error::invalid(
                op,
                self.label(),
                Errno::INVAL,
                format!(
                    "{n} bytes at offset {offset} exceed the MR length {}",
                    buf.len
                ),
            ));
        }
        buf.map.ptr_at(offset, n).ok_or_else(|| {
            Error::invalid(op, self.label(), Errno::INVAL, "range outside the mapping")
        })
    }

    /// Copies `dst.len()` bytes from `offset` of the MR's memory into `dst`.
    ///
    /// The device or a peer may be writing the same bytes; the copy then sees some mix of old
    /// and new bytes, never undefined behaviour (the memory is only reached by raw copies).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        let src = self.owned_ptr("mr_read", offset, dst.len())?;
        raw_copy(src.as_ptr(), dst.as_mut_ptr(), dst.len());
        Ok(())
    }

    /// Copies `src` into the MR's memory at `offset`.
    ///
    /// Takes `&mut self`: two threads writing through a shared `&Mr` would race (see
    /// [`Mr`], "Threads").
    pub fn write(&mut self, offset: usize, src: &[u8]) -> Result<()> {
        let dst = self.owned_ptr("mr_write", offset, src.len())?;
        raw_copy(src.as_ptr(), dst.as_ptr(), src.len());
        Ok(())
    }

    /// Fills `len` bytes at `offset` with `byte`. Takes `&mut self`, as [`Mr::write`] does.
    pub fn fill(&mut self, offset: usize, len: usize, byte: u8) -> Result<()> {
        let dst = self.owned_ptr("mr_fill", offset, len)?;
        raw_fill(dst.as_ptr(), byte, len);
        Ok(())
    }

    /// The start of the MR's memory as a raw pointer (`ibv_mr.addr`): the memory
    /// [`Pd::reg_mr`] allocated, or the caller's (`addr` of [`Pd::reg_mr_raw`] and
    /// [`Pd::reg_mr_iova_raw`]); for a dmabuf MR, the iova.
    pub fn as_ptr(&self) -> Option<NonNull<u8>> {
        match &self.memory {
            Memory::Owned(b) => Some(b.map.as_ptr()),
            Memory::Borrowed(start) => NonNull::new(*start as *mut u8),
            Memory::Dmabuf => NonNull::new(self.addr as *mut u8),
        }
    }

    /// Changes the access rights of the MR (`ibv_rereg_mr` with `IBV_REREG_MR_CHANGE_ACCESS`).
    /// The keys may change.
    #[doc(alias = "ibv_rereg_mr")]
    pub fn rereg_access(&mut self, access: AccessFlags) -> Result<()> {
        check_access("rereg_mr", &self.label(), access)?;
        self.rereg(IB_MR_REREG_ACCESS, None, access)
    }

    /// Moves the MR to another protection domain of the same context (`ibv_rereg_mr` with
    /// `IBV_REREG_MR_CHANGE_PD`).
    #[doc(alias = "ibv_rereg_mr")]
    pub fn rereg_pd(&mut self, pd: &Pd) -> Result<()> {
        if !std::sync::Arc::ptr_eq(&pd.context().inner, &self.pd.context().inner) {
            return Err(Error::invalid(
                "rereg_mr",
                self.label(),
                Errno::INVAL,
                "the new PD belongs to another device context",
            ));
        }
        self.rereg(IB_MR_REREG_PD, Some(pd), self.access)?;
        self.pd = pd.clone();
        Ok(())
    }

    fn rereg(&mut self, flags: u32, pd: Option<&Pd>, access: AccessFlags) -> Result<()> {
        let req = IbUverbsReregMr {
            mr_handle: self.obj.handle(),
            flags,
            start: 0,
            length: 0,
            hca_va: 0,
            pd_handle: pd.map_or(0, |p| p.handle()),
            access_flags: access.bits(),
            ..Default::default()
        };
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_REREG_MR,
            &req,
            &[],
            std::mem::size_of::<IbUverbsReregMrResp>(),
            0,
        );
        let label = self.label();
        self.pd
            .context()
            .write_cmd("rereg_mr", &|| label.clone(), &mut cmd)
            .map_err(|e| {
                if e.is(Errno::OPNOTSUPP) {
                    e.with_reason("the device does not support re-registration")
                } else {
                    e
                }
            })?;
        let resp: IbUverbsReregMrResp = cmd.response_as();
        self.lkey = resp.lkey;
        self.rkey = resp.rkey;
        self.access = access;
        Ok(())
    }

    /// Deregisters the MR now (`ibv_dereg_mr`).
    ///
    /// On failure (`EBUSY` while a memory window is bound to it, say) the MR comes back in
    /// the error ([`DestroyError::into_inner`]), still registered and usable; remove the cause
    /// and call `dereg` again. Dropping does the same as `dereg`, reports a failure on standard
    /// error and then leaks the memory rather than free pages the device may still write.
    #[doc(alias = "ibv_dereg_mr")]
    pub fn dereg(mut self) -> Result<(), DestroyError<Mr>> {
        match self.obj.destroy() {
            Ok(_) => Ok(()),
            Err(e) => Err(DestroyError::new(self, e)),
        }
    }

    fn leak_memory(&mut self) {
        if let Memory::Owned(buf) = std::mem::replace(&mut self.memory, Memory::Borrowed(self.addr))
        {
            std::mem::forget(buf);
        }
    }
}

/// `IB_MR_REREG_PD` (kernel `enum ib_mr_rereg_flags`).
const IB_MR_REREG_PD: u32 = 1 << 1;
/// `IB_MR_REREG_ACCESS`.
const IB_MR_REREG_ACCESS: u32 = 1 << 2;

impl Drop for Mr {
    fn drop(&mut self) {
        if !self.obj.release() {
            // The registration may outlive us: leak the memory rather than free pages the
            // device may still write.
            self.leak_memory();
        }
    }
}

#[allow(unsafe_code)]
fn raw_copy(src: *const u8, dst: *mut u8, n: usize) {
    // No other thread of this process copies into the mapping meanwhile: a copy into it
    // (`Mr::write`) holds `&mut Mr`, a copy out of it (`Mr::read`) `&Mr`, so the borrow rules
    // keep a writer alone. The device and peers write by DMA, outside Rust's memory model:
    // concurrent device writes make the bytes unspecified, not the behaviour.
    // SAFETY: callers pass a range checked to lie inside a live mapping owned by the MR and a
    // distinct Rust slice of `n` bytes, which cannot overlap it (the mapping is never a slice);
    // no Rust write races the copy (above).
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) }
}

#[allow(unsafe_code)]
fn raw_fill(dst: *mut u8, byte: u8, n: usize) {
    // SAFETY: `dst..dst+n` was checked to lie inside a live mapping owned by the MR, and the
    // caller (`Mr::fill`) holds `&mut Mr`, so no other thread copies into or out of it meanwhile.
    unsafe { std::ptr::write_bytes(dst, byte, n) }
}

/// The thread rules of `Mr` (see [`Mr`], "Threads"), on memory no device touches, so Miri
/// checks them for data races: `cargo xtask miri` runs this module. (Two threads writing
/// through a shared `&Mr`, which Miri reported as a data race when `write` took `&self`, is the
/// `compile_fail` example on [`Mr`] now.)
#[cfg(test)]
mod tests {
    use std::os::fd::IntoRawFd;
    use std::sync::{Barrier, Mutex};

    use rustix::event::{eventfd, EventfdFlags};
    use uverbs_uapi::write::IB_USER_VERBS_CMD_GET_CONTEXT;

    use super::*;
    use crate::channel::{Channel, IoctlCmd, WriteCmd};
    use crate::{Context, Device, Driver};

    /// Just enough of a kernel for a PD and its MRs, with no device: every write command
    /// succeeds with handles and keys 0, and GET_CONTEXT hands over a fresh eventfd. It makes
    /// no mapping and no ioctl, so it runs under Miri.
    #[derive(Debug)]
    struct MrOnly;

    // SAFETY: the only fd number written is GET_CONTEXT's `async_fd`, an eventfd made in that
    // call and given up (`into_raw_fd`) as its number is written. No doorbell fd.
    #[allow(unsafe_code)]
    unsafe impl Channel for MrOnly {
        fn ioctl(&self, _: &mut IoctlCmd<'_>) -> std::result::Result<(), Errno> {
            Err(Errno::PROTONOSUPPORT)
        }
        fn write(&self, cmd: &mut WriteCmd) -> std::result::Result<(), Errno> {
            if cmd.command() == IB_USER_VERBS_CMD_GET_CONTEXT && !cmd.is_extended() {
                let fd = eventfd(0, EventfdFlags::CLOEXEC)?.into_raw_fd() as u32;
                cmd.response_mut()[..4].copy_from_slice(&fd.to_ne_bytes());
            }
            Ok(())
        }
        fn driver_id(&self) -> u32 {
            uverbs_uapi::ioctl::RDMA_DRIVER_RXE
        }
    }

    fn mr(len: usize) -> Mr {
        let dev = Device::synthetic("rxe_mr", Driver::Rxe, 1);
        let ctx = Context::with_channel(dev, Box::new(MrOnly)).unwrap();
        ctx.alloc_pd()
            .unwrap()
            .reg_mr(len, AccessFlags::LOCAL_WRITE)
            .unwrap()
    }

    const THREADS: usize = 3;

    /// One writer through `&mut`, then readers on several threads at once through `&Mr`.
    #[test]
    fn written_through_mut_then_read_from_several_threads() {
        let mut mr = mr(64);
        mr.write(0, b"written once").unwrap();
        mr.fill(12, 4, b'!').unwrap();
        let go = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    go.wait(); // all read at once
                    let mut back = [0u8; 16];
                    mr.read(0, &mut back).unwrap();
                    assert_eq!(&back, b"written once!!!!");
                });
            }
        });
    }

    /// Writers on several threads at once, each holding the `Mr` through a lock: the user's
    /// own synchronisation, which is what writing from several threads takes.
    #[test]
    fn writers_on_several_threads_behind_a_lock() {
        let mr = Mutex::new(mr(64));
        let go = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (mr, go) = (&mr, &go);
                s.spawn(move || {
                    go.wait(); // all write at once: the same bytes, then each its own
                    let mut mr = mr.lock().unwrap();
                    mr.write(0, &[0xee; 8]).unwrap();
                    mr.fill(8 + t, 1, t as u8 + 1).unwrap();
                });
            }
        });
        let mr = mr.into_inner().unwrap();
        let mut back = [0u8; 8 + THREADS];
        mr.read(0, &mut back).unwrap();
        assert_eq!(
            back,
            [0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 1, 2, 3]
        );
    }
}
