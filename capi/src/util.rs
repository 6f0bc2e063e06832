//! What every exported function shares: the panic guard, errno, and turning uverbs' errors
//! into the C convention (a positive errno return, or NULL with errno set).

use std::panic::{catch_unwind, AssertUnwindSafe};

use core::ffi::c_int;

/// Runs `f`, the body of an exported function; a panic becomes `on_panic` (after setting
/// errno to EIO and printing what panicked), so no unwind ever reaches C.
///
/// The non-panicking path costs nothing beyond `f`: the report is out of line, so `op` is
/// only an argument of that call (no stack slot written on every entry, which also lets the
/// compiler keep a call-free fast path free of the frame set-up).
#[inline(always)]
pub fn guard<T>(op: &'static str, on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            panicked(op);
            on_panic
        }
    }
}

/// [`guard`]'s report of a panic: printed, errno EIO.
#[cold]
#[inline(never)]
fn panicked(op: &'static str) {
    eprintln!("uverbs: {op}: internal error (a Rust panic), answered with EIO");
    set_errno(libc::EIO);
}

/// Sets the calling thread's errno.
pub fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The errno of a uverbs error (EIO when the error carries none).
pub fn errno_of(e: &uverbs::Error) -> c_int {
    e.errno().map(|e| e.raw_os_error()).unwrap_or(libc::EIO)
}

/// Prints a failed call's full uverbs error when `UVERBS_TRACE` or `UVERBS_CAPI_VERBOSE` is
/// set (C callers see only errno), and returns its errno.
pub fn report(e: &uverbs::Error) -> c_int {
    if verbose() {
        eprintln!("uverbs: {e}");
    }
    errno_of(e)
}

fn verbose() -> bool {
    use std::sync::OnceLock;
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| {
        std::env::var_os("UVERBS_CAPI_VERBOSE").is_some()
            || std::env::var_os("UVERBS_TRACE").is_some()
    })
}

/// The C convention for calls returning an int: 0, or the positive errno.
pub fn ret(r: uverbs::Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => report(&e),
    }
}

/// The C convention for calls returning a pointer: the object, or NULL with errno set.
pub fn ptr_or_errno<T>(r: uverbs::Result<*mut T>) -> *mut T {
    match r {
        Ok(p) => p,
        Err(e) => {
            set_errno(report(&e));
            core::ptr::null_mut()
        }
    }
}

/// An error for a NULL or inconsistent argument (EINVAL), as rdma-core checks them.
pub fn einval(op: &'static str, what: &'static str) -> uverbs::Error {
    uverbs::Error::invalid(op, "argument", uverbs::Errno::INVAL, what)
}

/// An error for a verb uverbs does not have (EOPNOTSUPP), as rdma-core answers for a
/// provider without it.
pub fn eopnotsupp(op: &'static str, what: &'static str) -> uverbs::Error {
    uverbs::Error::invalid(op, "device", uverbs::Errno::OPNOTSUPP, what)
}

/// A mutex/cond pair as the header's structs embed them (initialised, never used by us).
pub const MUTEX_INIT: libc::pthread_mutex_t = libc::PTHREAD_MUTEX_INITIALIZER;
pub const COND_INIT: libc::pthread_cond_t = libc::PTHREAD_COND_INITIALIZER;

/// Destroys the uverbs object inside a C wrapper (`ibv_dealloc_pd`, `ibv_destroy_qp`, ...):
/// on success frees the wrapper and returns 0; when the kernel refuses (EBUSY: objects still
/// use it), puts the object back so the program's pointer stays valid, as with rdma-core,
/// and returns the errno.
///
/// # Safety
/// `w` is a live wrapper this library boxed, which the program gives up on success.
pub unsafe fn destroy_in_place<W, T, R>(
    w: *mut W,
    slot: impl Fn(&mut W) -> &mut core::mem::ManuallyDrop<T>,
    destroy: impl FnOnce(T) -> Result<R, uverbs::DestroyError<T>>,
) -> c_int {
    // SAFETY: `w` is live and ours (above).
    let obj = unsafe { core::mem::ManuallyDrop::take(slot(&mut *w)) };
    match destroy(obj) {
        Ok(_) => {
            // SAFETY: boxed by this library; the object inside was taken (ManuallyDrop
            // does not drop it again).
            drop(unsafe { Box::from_raw(w) });
            0
        }
        Err(e) => {
            let (obj, err) = e.into_parts();
            // SAFETY: `w` is still live; its slot holds nothing since the take above.
            unsafe { *slot(&mut *w) = core::mem::ManuallyDrop::new(obj) };
            report(&err)
        }
    }
}
