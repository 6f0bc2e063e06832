//! Completion counters (`efadv_create_comp_cntr`, `ibv_qp_attach_comp_cntr`,
//! `ibv_read_comp_cntr`, `ibv_destroy_comp_cntr`): the kernel's `UVERBS_OBJECT_COMP_CNTR`.
//!
//! A counter is a pair of 64-bit words in memory the *device* writes: one counts successful
//! completions, one failed ones, of the operations of every QP attached to it. They are created
//! with `UVERBS_METHOD_COMP_CNTR_CREATE`, whose two EFA driver attributes
//! (`EFA_IB_ATTR_CREATE_COMP_CNTR_{COMP,ERR}_BUFFER`) each carry a `struct
//! ib_uverbs_buffer_desc` naming the memory: a user virtual address (`IB_UVERBS_BUFFER_TYPE_VA`)
//! or an offset in a dmabuf (`IB_UVERBS_BUFFER_TYPE_DMABUF`), 8 bytes long, as libefa's
//! `efa_create_comp_cntr_impl` sends them. Reading a counter is a load of that word (libefa's
//! `efa_read_comp_cntr`), not a command.
//!
//! By default the counter words live in memory this object owns (by VA). A dmabuf location
//! puts a word in device- or accelerator-visible memory the caller owns; the library has no
//! mapping of it and refuses to read it (as libefa does without a CPU pointer).
//!
//! The kernel's rules (RDMA/core completion-counter series): a create on a device without
//! the ops is `EOPNOTSUPP`; an attach with an empty op mask `EINVAL`; an attach for an
//! operation the QP already counts into a counter `EBUSY`; destroying a counter some QP is
//! attached to `EBUSY` (the attachment ends when the QP is destroyed).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bitflags::bitflags;
use uverbs_uapi::cmds::{
    UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE, UVERBS_ATTR_DESTROY_COMP_CNTR_HANDLE,
    UVERBS_ATTR_MODIFY_COMP_CNTR_ENTRY, UVERBS_ATTR_MODIFY_COMP_CNTR_HANDLE,
    UVERBS_ATTR_MODIFY_COMP_CNTR_OP, UVERBS_ATTR_MODIFY_COMP_CNTR_VALUE,
    UVERBS_ATTR_QP_ATTACH_COMP_CNTR_CNTR_HANDLE, UVERBS_ATTR_QP_ATTACH_COMP_CNTR_HANDLE,
    UVERBS_ATTR_QP_ATTACH_COMP_CNTR_OP_MASK, UVERBS_METHOD_COMP_CNTR_CREATE,
    UVERBS_METHOD_COMP_CNTR_DESTROY, UVERBS_METHOD_COMP_CNTR_MODIFY,
    UVERBS_METHOD_QP_ATTACH_COMP_CNTR, UVERBS_OBJECT_COMP_CNTR, UVERBS_OBJECT_QP,
};
use uverbs_uapi::efa::{
    EFA_IB_ATTR_CREATE_COMP_CNTR_COMP_BUFFER, EFA_IB_ATTR_CREATE_COMP_CNTR_ERR_BUFFER,
    EFA_QUERY_DEVICE_CAPS_COMP_CNTR,
};
use uverbs_uapi::verbs::{
    IbUverbsBufferDesc, IB_UVERBS_BUFFER_TYPE_DMABUF, IB_UVERBS_BUFFER_TYPE_VA,
    IB_UVERBS_COMP_CNTR_ENTRY_COMP, IB_UVERBS_COMP_CNTR_ENTRY_ERR,
    IB_UVERBS_COMP_CNTR_MODIFY_OP_INC, IB_UVERBS_COMP_CNTR_MODIFY_OP_SET,
    IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_READ, IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE,
    IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV, IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ,
    IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE, IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND,
};

use crate::channel::IoctlCmd;
use crate::context::Context;
use crate::error::{Errno, Error, Result};
use crate::object::{Destroy, DestroyCmd, DestroyError, KernelObject};
use crate::qp::Qp;

static DESTROY_COMP_CNTR: Destroy = Destroy {
    name: "comp_cntr",
    op: "destroy_comp_cntr",
    cmd: DestroyCmd::Ioctl {
        object: UVERBS_OBJECT_COMP_CNTR,
        method: UVERBS_METHOD_COMP_CNTR_DESTROY,
        handle_attr: UVERBS_ATTR_DESTROY_COMP_CNTR_HANDLE,
        resp_attr: None,
        resp_len: 0,
    },
};

/// Where the device writes one counter word (`struct efadv_memory_location`).
#[doc(alias = "efadv_memory_location")]
#[derive(Debug, Clone, Copy, Default)]
pub enum EfaCntrMem<'a> {
    /// Memory the counter object owns (by virtual address): [`EfaCompCntr::read`] reads it.
    #[default]
    Owned,
    /// 8 bytes at `offset` in a dmabuf (`EFADV_MEMORY_LOCATION_DMABUF`): the device writes
    /// there; the library cannot read it (read it through your own mapping).
    Dmabuf {
        /// The dmabuf; the kernel takes its own reference during the create.
        fd: BorrowedFd<'a>,
        /// Byte offset of the counter word in it.
        offset: u64,
    },
}

/// `struct efadv_comp_cntr_init_attr` (with `ibv_comp_cntr_init_attr` of type
/// `IBV_COMP_CNTR_TYPE_WRS`, the only type EFA counts): where each word lives.
#[doc(alias = "efadv_comp_cntr_init_attr")]
#[derive(Debug, Clone, Copy, Default)]
pub struct EfaCompCntrInitAttr<'a> {
    /// The completion counter word (`comp_cntr_ext_mem`).
    pub comp: EfaCntrMem<'a>,
    /// The error counter word (`err_cntr_ext_mem`).
    pub err: EfaCntrMem<'a>,
}

bitflags! {
    /// `enum ibv_qp_attach_comp_cntr_op`: which operations of a QP a counter counts.
    #[doc(alias = "ibv_qp_attach_comp_cntr_op")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct CompCntrOps: u32 {
        /// Sends (`IBV_QP_ATTACH_COMP_CNTR_OP_SEND`).
        const SEND = IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_SEND;
        /// Receives (`IBV_QP_ATTACH_COMP_CNTR_OP_RECV`).
        const RECV = IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RECV;
        /// RDMA reads this QP issues.
        const RDMA_READ = IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_READ;
        /// RDMA reads of this QP's memory by a peer.
        const REMOTE_RDMA_READ = IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ;
        /// RDMA writes this QP issues.
        const RDMA_WRITE = IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE;
        /// RDMA writes into this QP's memory by a peer.
        const REMOTE_RDMA_WRITE = IB_UVERBS_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE;
    }
}

/// A completion counter (`struct ibv_comp_cntr` made by `efadv_create_comp_cntr`).
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let cfg = uverbs_efa_model::ModelConfig { device_caps: uverbs_uapi::efa::EFA_QUERY_DEVICE_CAPS_COMP_CNTR, ..Default::default() };
/// # let ctx = fabric.add_device(cfg).open()?;
/// let cntr = ctx.efadv_create_comp_cntr(&Default::default())?;
/// assert_eq!((cntr.read()?, cntr.read_err()?), (0, 0));
/// // qp.attach_comp_cntr(&cntr, CompCntrOps::SEND | CompCntrOps::RECV)?; then post, and
/// // watch cntr.read() advance instead of polling a CQ.
/// cntr.destroy()?;
/// // Without EFA_QUERY_DEVICE_CAPS_COMP_CNTR (or on rxe): EOPNOTSUPP naming the cap.
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_comp_cntr")]
pub struct EfaCompCntr {
    obj: KernelObject,
    /// The words the device writes when the location is [`EfaCntrMem::Owned`]: `[comp, err]`.
    /// Declared after `obj`: freed only once the kernel object is gone (and leaked when the
    /// kernel refused to destroy it, since the device may still write them).
    words: Option<Arc<[AtomicU64; 2]>>,
    comp_owned: bool,
    err_owned: bool,
}

impl std::fmt::Debug for EfaCompCntr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.obj.label())
    }
}

fn desc(mem: &EfaCntrMem<'_>, owned: &AtomicU64) -> (IbUverbsBufferDesc, bool /* owned */) {
    match mem {
        EfaCntrMem::Owned => (
            IbUverbsBufferDesc {
                r#type: IB_UVERBS_BUFFER_TYPE_VA,
                addr: owned as *const AtomicU64 as u64,
                length: 8,
                ..Default::default()
            },
            true,
        ),
        EfaCntrMem::Dmabuf { fd, offset } => (
            IbUverbsBufferDesc {
                r#type: IB_UVERBS_BUFFER_TYPE_DMABUF,
                fd: fd.as_raw_fd(),
                addr: *offset,
                length: 8,
                ..Default::default()
            },
            false,
        ),
    }
}

impl Context {
    /// Checks that this is an EFA device with completion counters, naming `op` and the cap.
    fn efa_comp_cntr_cap(&self, op: &'static str) -> Result<()> {
        let r = self.efa_query_raw(op)?;
        if r.device_caps & EFA_QUERY_DEVICE_CAPS_COMP_CNTR == 0 {
            return Err(Error::invalid(
                op,
                self.label().to_string(),
                Errno::OPNOTSUPP,
                format!(
                    "the device has no completion counters (EFA_QUERY_DEVICE_CAPS_COMP_CNTR \
                     not in device_caps {:#x})",
                    r.device_caps
                ),
            ));
        }
        Ok(())
    }

    /// Creates a completion counter (`efadv_create_comp_cntr`; `ibv_create_comp_cntr` is the
    /// same with both words [`EfaCntrMem::Owned`]). `EOPNOTSUPP` on a device that is not EFA
    /// or lacks `EFA_QUERY_DEVICE_CAPS_COMP_CNTR`.
    #[doc(alias = "ibv_create_comp_cntr")]
    pub fn efadv_create_comp_cntr(&self, attr: &EfaCompCntrInitAttr<'_>) -> Result<EfaCompCntr> {
        let op = "efadv_create_comp_cntr";
        self.efa_comp_cntr_cap(op)?;
        let words = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let (comp, comp_owned) = desc(&attr.comp, &words[0]);
        let (err, err_owned) = desc(&attr.err, &words[1]);
        let handle = {
            let mut cmd = IoctlCmd::new(UVERBS_OBJECT_COMP_CNTR, UVERBS_METHOD_COMP_CNTR_CREATE);
            cmd.idr_new(UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE)
                .ptr_in(EFA_IB_ATTR_CREATE_COMP_CNTR_COMP_BUFFER, &comp)
                .ptr_in(EFA_IB_ATTR_CREATE_COMP_CNTR_ERR_BUFFER, &err);
            self.ioctl_cmd(op, &|| self.label().to_string(), &mut cmd)?;
            cmd.out_data(UVERBS_ATTR_CREATE_COMP_CNTR_HANDLE)
                .unwrap_or_default() as u32
        };
        Ok(EfaCompCntr {
            obj: KernelObject::new(self.clone(), handle, &DESTROY_COMP_CNTR, handle),
            words: (comp_owned || err_owned).then_some(words),
            comp_owned,
            err_owned,
        })
    }
}

impl EfaCompCntr {
    /// The kernel's handle.
    pub fn handle(&self) -> u32 {
        self.obj.handle()
    }

    /// The context the counter belongs to.
    pub fn context(&self) -> &Context {
        self.obj.context()
    }

    fn word(&self, i: usize, owned: bool, op: &'static str) -> Result<u64> {
        match (&self.words, owned) {
            (Some(w), true) => Ok(w[i].load(Ordering::Acquire)),
            _ => Err(Error::invalid(
                op,
                self.obj.label(),
                Errno::OPNOTSUPP,
                "the counter word is in a dmabuf the library has no mapping of: read it \
                 through your own mapping",
            )),
        }
    }

    /// Successful completions counted so far (`ibv_read_comp_cntr`): a load of the word the
    /// device writes, no command.
    #[doc(alias = "ibv_read_comp_cntr")]
    pub fn read(&self) -> Result<u64> {
        self.word(0, self.comp_owned, "read_comp_cntr")
    }

    /// Failed completions counted so far (`ibv_read_err_comp_cntr`).
    #[doc(alias = "ibv_read_err_comp_cntr")]
    pub fn read_err(&self) -> Result<u64> {
        self.word(1, self.err_owned, "read_err_comp_cntr")
    }

    /// `UVERBS_METHOD_COMP_CNTR_MODIFY` of one word, as libibverbs' `ibv_icmd_modify_comp_cntr`
    /// sends it: the handle, the entry and the operation as constants, the value inline.
    fn modify(&self, op: &'static str, entry: u32, how: u32, value: u64) -> Result<()> {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_COMP_CNTR, UVERBS_METHOD_COMP_CNTR_MODIFY);
        cmd.idr(UVERBS_ATTR_MODIFY_COMP_CNTR_HANDLE, self.handle())
            .const_u64(UVERBS_ATTR_MODIFY_COMP_CNTR_ENTRY, u64::from(entry))
            .const_u64(UVERBS_ATTR_MODIFY_COMP_CNTR_OP, u64::from(how))
            .u64_in(UVERBS_ATTR_MODIFY_COMP_CNTR_VALUE, value);
        let ctx = self.obj.context();
        ctx.ioctl_cmd(op, &|| self.obj.label(), &mut cmd)
    }

    /// Sets the completion count (`ibv_set_comp_cntr`): the kernel writes the word.
    #[doc(alias = "ibv_set_comp_cntr")]
    pub fn set(&self, value: u64) -> Result<()> {
        self.modify(
            "set_comp_cntr",
            IB_UVERBS_COMP_CNTR_ENTRY_COMP,
            IB_UVERBS_COMP_CNTR_MODIFY_OP_SET,
            value,
        )
    }

    /// Sets the error count (`ibv_set_err_comp_cntr`).
    #[doc(alias = "ibv_set_err_comp_cntr")]
    pub fn set_err(&self, value: u64) -> Result<()> {
        self.modify(
            "set_err_comp_cntr",
            IB_UVERBS_COMP_CNTR_ENTRY_ERR,
            IB_UVERBS_COMP_CNTR_MODIFY_OP_SET,
            value,
        )
    }

    /// Adds `amount` to the completion count (`ibv_inc_comp_cntr`).
    #[doc(alias = "ibv_inc_comp_cntr")]
    pub fn inc(&self, amount: u64) -> Result<()> {
        self.modify(
            "inc_comp_cntr",
            IB_UVERBS_COMP_CNTR_ENTRY_COMP,
            IB_UVERBS_COMP_CNTR_MODIFY_OP_INC,
            amount,
        )
    }

    /// Adds `amount` to the error count (`ibv_inc_err_comp_cntr`).
    #[doc(alias = "ibv_inc_err_comp_cntr")]
    pub fn inc_err(&self, amount: u64) -> Result<()> {
        self.modify(
            "inc_err_comp_cntr",
            IB_UVERBS_COMP_CNTR_ENTRY_ERR,
            IB_UVERBS_COMP_CNTR_MODIFY_OP_INC,
            amount,
        )
    }

    /// Destroys the counter (`ibv_destroy_comp_cntr`). Refused with `EBUSY` while a QP is
    /// attached to it (destroy the QP first); the counter is then handed back, alive.
    #[doc(alias = "ibv_destroy_comp_cntr")]
    pub fn destroy(mut self) -> std::result::Result<(), DestroyError<Self>> {
        match self.obj.destroy() {
            Ok(_) => Ok(()),
            Err(e) => {
                let e = if e.is(Errno::BUSY) {
                    Error::invalid(
                        "destroy_comp_cntr",
                        self.obj.label(),
                        Errno::BUSY,
                        "a QP is still attached to the counter (the kernel keeps it until \
                         every attached QP is destroyed)",
                    )
                } else {
                    e
                };
                Err(DestroyError::new(self, e))
            }
        }
    }
}

impl Drop for EfaCompCntr {
    fn drop(&mut self) {
        if !self.obj.release() {
            // The kernel kept the counter: the device may still write its words.
            if let Some(w) = self.words.take() {
                std::mem::forget(w);
            }
        }
    }
}

impl Qp {
    /// Counts the completions of `ops` on this QP into `cntr` (`ibv_qp_attach_comp_cntr`).
    ///
    /// Refused: a QP or counter of another context (`EINVAL`), an empty `ops` (`EINVAL`),
    /// an operation this QP already counts into a counter (`EBUSY`, the kernel's rule: one
    /// counter per operation), a device without completion counters (`EOPNOTSUPP`).
    #[doc(alias = "ibv_qp_attach_comp_cntr")]
    pub fn attach_comp_cntr(&self, cntr: &EfaCompCntr, ops: CompCntrOps) -> Result<()> {
        let op = "qp_attach_comp_cntr";
        let ctx = self.pd().context();
        let object = || format!("qp {} and {}", self.qp_num(), cntr.obj.label());
        ctx.efa_comp_cntr_cap(op)?;
        if !Arc::ptr_eq(&ctx.inner, &cntr.context().inner) {
            return Err(Error::invalid(
                op,
                object(),
                Errno::INVAL,
                "the QP and the counter belong to different contexts",
            ));
        }
        if ops.is_empty() {
            return Err(Error::invalid(
                op,
                object(),
                Errno::INVAL,
                "no operation to count (empty op mask)",
            ));
        }
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_QP, UVERBS_METHOD_QP_ATTACH_COMP_CNTR);
        cmd.idr(UVERBS_ATTR_QP_ATTACH_COMP_CNTR_HANDLE, self.handle())
            .idr(UVERBS_ATTR_QP_ATTACH_COMP_CNTR_CNTR_HANDLE, cntr.handle())
            .u32_in(UVERBS_ATTR_QP_ATTACH_COMP_CNTR_OP_MASK, ops.bits());
        ctx.ioctl_cmd(op, &object, &mut cmd).map_err(|e| {
            if e.is(Errno::BUSY) {
                Error::invalid(
                    op,
                    object(),
                    Errno::BUSY,
                    format!(
                        "the QP already counts one of {ops:?} into a counter (one counter \
                         per operation)"
                    ),
                )
            } else {
                e
            }
        })
    }
}
