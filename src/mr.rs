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
    Borrowed,
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
/// let mr = pd.reg_mr(8192, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
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
        self.register(addr as u64, len, addr as u64, access, Memory::Borrowed)
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
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        let dst = self.owned_ptr("mr_write", offset, src.len())?;
        raw_copy(src.as_ptr(), dst.as_ptr(), src.len());
        Ok(())
    }

    /// Fills `len` bytes at `offset` with `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        let dst = self.owned_ptr("mr_fill", offset, len)?;
        raw_fill(dst.as_ptr(), byte, len);
        Ok(())
    }

    /// The start of the MR's memory as a raw pointer (`ibv_mr.addr`), for owned memory.
    pub fn as_ptr(&self) -> Option<NonNull<u8>> {
        match &self.memory {
            Memory::Owned(b) => Some(b.map.as_ptr()),
            _ => NonNull::new(self.addr as *mut u8),
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
        if let Memory::Owned(buf) = std::mem::replace(&mut self.memory, Memory::Borrowed) {
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
    // SAFETY: callers pass a range checked to lie inside a live mapping owned by the MR and a
    // distinct Rust slice of `n` bytes; the two cannot overlap (the mapping is never exposed
    // as a slice). Concurrent device writes make the bytes unspecified, not the behaviour.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) }
}

#[allow(unsafe_code)]
fn raw_fill(dst: *mut u8, byte: u8, n: usize) {
    // SAFETY: `dst..dst+n` was checked to lie inside a live mapping owned by the MR.
    unsafe { std::ptr::write_bytes(dst, byte, n) }
}
