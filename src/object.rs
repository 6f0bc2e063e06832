//! One owning type for a kernel object: [`KernelObject`] holds the context, the handle, the
//! command that destroys it and the label errors name it by; it destroys the object on `Drop`
//! (best effort, a failure reported by [`crate::report_drop_error`]) or on an explicit
//! [`KernelObject::destroy`], which leaves the object alive when the kernel refuses so that
//! the caller can hand it back ([`DestroyError`]) and retry.
//!
//! Every verbs object that owns a kernel object embeds one (`CqShared`, `SrqShared`, `Pd`,
//! `Mr`, `Mw`, `Xrcd`, the QP's `QpInner`, the AH's inner part). What it must not do: know
//! anything about rings or mappings (those belong to the object that embeds it and are
//! released after it), or parent objects (the embedding object holds its parents, declared
//! after the `KernelObject` so that they are dropped after the child is destroyed).
//!
//! # Using it for a new kind of object
//! 1. Describe the kernel command once, as a `const` [`Destroy`] next to the object (see
//!    `DESTROY_CQ` in `src/cq.rs` for an ioctl method, `DESTROY_AH` in `src/ah.rs` for a
//!    `write()` command).
//! 2. Right after the create command succeeds (before any `?`), wrap the handle with
//!    [`KernelObject::new`]; from then on a later failure destroys it on drop.
//! 3. The explicit `destroy(self)` calls [`KernelObject::destroy`] and on `Err` returns
//!    `Err(DestroyError::new(self, e))`: the object, still alive, goes back to the caller.
//!    The response words ([`DestroyResp`]) carry the kernel's event counts.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use uverbs_uapi::write::IbUverbsDestroySrq;

use crate::channel::IoctlCmd;
use crate::context::{legacy_cmd, Context};
use crate::error::{Errno, Error};

/// How the kernel destroys one kind of object.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DestroyCmd {
    /// An ioctl method (`UVERBS_METHOD_*_DESTROY`) taking the handle in `handle_attr` and,
    /// with `resp_attr`, writing `resp_len` (at most 8) bytes of response.
    Ioctl {
        object: u16,
        method: u16,
        handle_attr: u16,
        resp_attr: Option<u16>,
        resp_len: usize,
    },
    /// A legacy `write()` command whose request is the bare 32-bit handle
    /// (`ib_uverbs_dealloc_pd`, `_dereg_mr`, `_dealloc_mw`, `_close_xrcd`, `_destroy_ah`).
    Write { command: u32 },
    /// A legacy `write()` command laid out as `{ response: u64, handle: u32, reserved: u32 }`
    /// (`ib_uverbs_destroy_srq`, `_destroy_cq`, `_destroy_qp`) with `resp_len` (at most 8)
    /// bytes of response.
    WriteWithResp { command: u32, resp_len: usize },
}

/// A kind of kernel object's destroy: the verbs operation named in errors and the command.
#[derive(Debug)]
pub(crate) struct Destroy {
    /// How errors name an object of this kind, before its number: `"cq"` in `"cq 3 on device
    /// rxe0"`.
    pub(crate) name: &'static str,
    /// The verbs operation, e.g. `"destroy_cq"`, `"dealloc_pd"`.
    pub(crate) op: &'static str,
    pub(crate) cmd: DestroyCmd,
}

/// The response of a destroy command as 32-bit words (zeros where the command has none):
/// `[comp_events_reported, async_events_reported]` for a CQ, `[events_reported, 0]` for a QP,
/// SRQ or WQ.
pub(crate) type DestroyResp = [u32; 2];

/// The owner of one kernel object (see the module documentation).
pub(crate) struct KernelObject {
    ctx: Context,
    handle: u32,
    kind: &'static Destroy,
    /// The number errors name it by (the handle; a QP's number for a QP).
    id: u32,
    /// Set once the kernel has destroyed the object; `Drop` then has nothing to do.
    destroyed: bool,
}

impl fmt::Debug for KernelObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl KernelObject {
    /// Takes ownership of the kernel object `handle` just created on `ctx`; errors name it by
    /// `kind.name` and `id` (`"cq 3 on device rxe0"`).
    pub(crate) fn new(ctx: Context, handle: u32, kind: &'static Destroy, id: u32) -> Self {
        KernelObject {
            ctx,
            handle,
            kind,
            id,
            destroyed: false,
        }
    }

    /// The kernel's handle.
    pub(crate) fn handle(&self) -> u32 {
        self.handle
    }

    /// The context the object belongs to.
    pub(crate) fn context(&self) -> &Context {
        &self.ctx
    }

    /// How errors name the object: `"cq 3 on device rxe0"`. Made when an error needs it
    /// (error paths only), so no object carries a string of its own.
    #[cold]
    pub(crate) fn label(&self) -> String {
        format!("{} {} on {}", self.kind.name, self.id, self.ctx.label())
    }

    /// Destroys the kernel object now and returns the kernel's response words.
    ///
    /// On failure the object is still owned (and alive, as far as the kernel said): the
    /// caller hands it back, and a later `destroy` or `Drop` tries again.
    pub(crate) fn destroy(&mut self) -> Result<DestroyResp, Error> {
        let r = self.destroy_cmd();
        match r {
            Ok(resp) => {
                self.destroyed = true;
                Ok(resp)
            }
            Err(e) => Err(Error::os(self.kind.op, self.label(), e)),
        }
    }

    /// Destroys the kernel object now if it is still alive, best effort: a failure is
    /// reported ([`crate::report_drop_error`]) and not retried. Returns whether the object is
    /// gone (false: the kernel refused, it may outlive us). `Drop` does this; an owner whose
    /// own teardown depends on the answer (an MR leaks its memory rather than free pages the
    /// device may still write) calls it first.
    pub(crate) fn release(&mut self) -> bool {
        if self.destroyed {
            return true;
        }
        // Tried once: whatever the kernel says, nobody tries again.
        self.destroyed = true;
        match self.destroy_cmd() {
            Ok(_) => true,
            Err(e) => {
                crate::report_drop_error(self.kind.op, &self.label(), e);
                false
            }
        }
    }

    fn destroy_cmd(&self) -> Result<DestroyResp, Errno> {
        let mut resp = [0u32; 2];
        match self.kind.cmd {
            DestroyCmd::Ioctl {
                object,
                method,
                handle_attr,
                resp_attr,
                resp_len,
            } => {
                let mut cmd = IoctlCmd::new(object, method);
                cmd.idr(handle_attr, self.handle);
                if let Some(id) = resp_attr {
                    cmd.ptr_out(id, &mut resp[..resp_len.div_ceil(4).min(2)]);
                }
                self.ctx.inner.channel.ioctl(&mut cmd)?;
            }
            DestroyCmd::Write { command } => {
                let mut cmd = legacy_cmd(command, &self.handle, &[], 0, 0);
                self.ctx.inner.channel.write(&mut cmd)?;
            }
            DestroyCmd::WriteWithResp { command, resp_len } => {
                // The three commands of this shape share `ib_uverbs_destroy_srq`'s layout.
                let req = IbUverbsDestroySrq {
                    srq_handle: self.handle,
                    ..Default::default()
                };
                let n = resp_len.min(8);
                let mut cmd = legacy_cmd(command, &req, &[], n, 0);
                self.ctx.inner.channel.write(&mut cmd)?;
                let bytes = cmd.response();
                for (w, c) in resp.iter_mut().zip(bytes.chunks_exact(4)) {
                    *w = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
        }
        Ok(resp)
    }
}

impl Drop for KernelObject {
    fn drop(&mut self) {
        self.release();
    }
}

/// A failed explicit destroy (`Cq::destroy`, `Srq::destroy`, `Mr::dereg`, ...): the error, and
/// the object, handed back alive so the caller can remove the cause (destroy the QP still
/// using a CQ, say) and destroy it again.
///
/// ```
/// # let fabric = uverbs_efa_model::EfaFabric::new(1);
/// # let ctx = fabric.add_device(Default::default()).open()?;
/// use uverbs::{AccessFlags, Errno};
///
/// let pd = ctx.alloc_pd()?;
/// let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE)?;
/// // The MR still holds the PD: the dealloc is refused and the PD handed back, alive.
/// let e = pd.dealloc().unwrap_err();
/// assert!(e.is(Errno::BUSY));
/// eprintln!("{e}"); // dealloc_pd on pd 0 on device efa_0: EBUSY ... 1 object(s) ... hold it
/// let pd = e.into_inner();
/// drop(mr);                 // remove the cause,
/// pd.dealloc().map_err(|e| e.into_parts().1)?; // and retry
/// # Ok::<(), uverbs::Error>(())
/// ```
///
/// Like [`std::io::IntoInnerError`] (what `BufWriter::into_inner` returns) or the `Arc` that
/// `Arc::try_unwrap` gives back: [`DestroyError::into_inner`] recovers the object,
/// [`DestroyError::error`] says why. It converts into [`Error`], so `?` still works where the
/// object is not wanted back; the object is then dropped, which tries once more and reports a
/// failure on standard error.
pub struct DestroyError<T> {
    // Boxed (one allocation, on failure only) so that a `Result` of a destroy stays small.
    object: Box<T>,
    error: Error,
}

impl<T> DestroyError<T> {
    pub(crate) fn new(object: T, error: Error) -> Self {
        DestroyError {
            object: Box::new(object),
            error,
        }
    }

    /// Why the destroy failed.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The object, still alive and usable.
    pub fn into_inner(self) -> T {
        *self.object
    }

    /// The object and the error.
    pub fn into_parts(self) -> (T, Error) {
        (*self.object, self.error)
    }

    /// Whether the error carries `errno` (shorthand for `error().is(errno)`).
    pub fn is(&self, errno: Errno) -> bool {
        self.error.is(errno)
    }
}

impl<T> fmt::Debug for DestroyError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> fmt::Display for DestroyError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> std::error::Error for DestroyError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<T> From<DestroyError<T>> for Error {
    fn from(e: DestroyError<T>) -> Error {
        e.error
    }
}

/// What the events of one object (found by the `user_handle` the kernel returns in them)
/// need from it: the user's context value (`cq_context`, `srq_context`, `qp_context`) and,
/// for an SRQ, its armed limit, which the limit event disarms.
///
/// Registered in a process-wide table keyed by `user_handle` (process-unique, see
/// `crate::event::next_user_handle`) for as long as the object lives; read only when an
/// event is read (a syscall anyway), never on post or poll. A QP adopts it the same way as
/// a CQ: `register(user_handle, qp_context)` into a field of its kernel half, and its
/// events carry the value.
#[derive(Debug)]
pub(crate) struct EventTarget {
    user_handle: u64,
    context: AtomicU64,
    srq_limit: AtomicU32,
    /// Completion events read for this object (a CQ) from its channel, wrapping.
    comp_events: AtomicU32,
}

impl EventTarget {
    /// The user's context value.
    pub(crate) fn context(&self) -> u64 {
        self.context.load(Ordering::Relaxed)
    }

    pub(crate) fn set_context(&self, v: u64) {
        self.context.store(v, Ordering::Relaxed);
    }

    /// The SRQ limit as last armed (0: not armed).
    pub(crate) fn srq_limit(&self) -> u32 {
        self.srq_limit.load(Ordering::Relaxed)
    }

    pub(crate) fn set_srq_limit(&self, v: u32) {
        self.srq_limit.store(v, Ordering::Relaxed);
    }

    /// Completion events read for this CQ so far (wrapping): `get_cq_event` counts them, a
    /// provider whose arming carries the count reads it (EFA's `cmd_sn`, as libefa's
    /// `efa_cq_event` counts them).
    pub(crate) fn comp_events(&self) -> u32 {
        self.comp_events.load(Ordering::Relaxed)
    }

    pub(crate) fn note_comp_event(&self) {
        self.comp_events.fetch_add(1, Ordering::Relaxed);
    }
}

type Targets = BTreeMap<u64, Weak<EventTarget>>;

static TARGETS: Mutex<Targets> = Mutex::new(BTreeMap::new());

fn targets() -> std::sync::MutexGuard<'static, Targets> {
    // The table stays consistent whatever a panicking holder did (each access is one
    // insert, remove or lookup), so a poisoned lock is still usable.
    TARGETS.lock().unwrap_or_else(|e| e.into_inner())
}

/// An object's entry in the event table; removed when dropped.
#[derive(Debug)]
pub(crate) struct Registration(Arc<EventTarget>);

impl Registration {
    /// Registers the object whose events carry `user_handle`, with the user's `context`.
    pub(crate) fn new(user_handle: u64, context: u64) -> Self {
        let t = Arc::new(EventTarget {
            user_handle,
            context: AtomicU64::new(context),
            srq_limit: AtomicU32::new(0),
            comp_events: AtomicU32::new(0),
        });
        targets().insert(user_handle, Arc::downgrade(&t));
        Registration(t)
    }
}

impl std::ops::Deref for Registration {
    type Target = EventTarget;
    fn deref(&self) -> &EventTarget {
        &self.0
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        targets().remove(&self.0.user_handle);
    }
}

/// The live object whose events carry `user_handle`, if any (`None`: never registered, or
/// already destroyed).
pub(crate) fn event_target(user_handle: u64) -> Option<Arc<EventTarget>> {
    targets().get(&user_handle).and_then(Weak::upgrade)
}
