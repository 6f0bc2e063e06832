//! Async events: `ibv_get_async_event`, `ibv_ack_async_event`.
//!
//! Every object this library creates carries the address of its C wrapper as its uverbs
//! context (`set_qp_context` and the like), so an event's [`uverbs::AsyncEvent::context`] is
//! the `ibv_qp *` (or CQ, SRQ) the program knows.

use core::ffi::c_int;
use std::time::Duration;

use uverbs::{AsyncElement, AsyncEventType};

use crate::abi::*;
use crate::device::context;
use crate::util::{guard, report, set_errno};

const IBV_EVENT_DEVICE_FATAL: c_int = 8;

/// `ibv_get_async_event`: blocks for the next event, unless the program made the async fd
/// non-blocking (then -1 with EAGAIN when none is queued, as a read of the fd would). A signal
/// handler ends the wait with `EINTR`: libibverbs' `read` ends so unless the handler was
/// installed with `SA_RESTART`; this wait, a `poll(2)` that also watches for the device's
/// removal, is never restarted by the kernel: it goes on when every installed handler has
/// `SA_RESTART` ([`handlers_restart`]) and ends with `EINTR` otherwise.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    guard("ibv_get_async_event", -1, || {
        // SAFETY: the program passes a context it opened (or NULL).
        let Some(c) = (unsafe { context(ctx) }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if event.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: fcntl(F_GETFL) on the context's async fd, which it owns and keeps open.
        let flags = unsafe { libc::fcntl(c.vctx.context.async_fd, libc::F_GETFL) };
        let nonblocking = flags >= 0 && flags & libc::O_NONBLOCK != 0;
        let timeout = nonblocking.then_some(Duration::ZERO);
        let ev = match loop {
            match c.ctx.get_async_event_interruptible(timeout) {
                Err(e) if e.is(uverbs::Errno::INTR) && handlers_restart() => continue,
                r => break r,
            }
        } {
            Ok(ev) => ev,
            Err(e) if nonblocking && e.is(uverbs::Errno::TIMEDOUT) => {
                set_errno(libc::EAGAIN);
                return -1;
            }
            Err(e) => {
                set_errno(report(&e));
                return -1;
            }
        };
        let obj = ev.context.unwrap_or(0) as usize;
        let (element, event_type) = match ev.element {
            AsyncElement::Cq(_) => (
                ibv_async_event_element {
                    cq: obj as *mut ibv_cq,
                },
                ev.event_type.0 as c_int,
            ),
            AsyncElement::Qp(_) => (
                ibv_async_event_element {
                    qp: obj as *mut ibv_qp,
                },
                ev.event_type.0 as c_int,
            ),
            AsyncElement::Srq(_) => (
                ibv_async_event_element {
                    srq: obj as *mut ibv_srq,
                },
                ev.event_type.0 as c_int,
            ),
            AsyncElement::Wq(_) => (
                ibv_async_event_element {
                    wq: obj as *mut core::ffi::c_void,
                },
                ev.event_type.0 as c_int,
            ),
            AsyncElement::Port(n) => (
                ibv_async_event_element {
                    port_num: n as c_int,
                },
                ev.event_type.0 as c_int,
            ),
            // uverbs' DEVICE_REMOVED is the C API's DEVICE_FATAL (which the kernel sends
            // on a device that supports disassociation; rxe's removal is seen by uverbs).
            AsyncElement::Device => (
                ibv_async_event_element { port_num: 0 },
                if ev.event_type == AsyncEventType::DEVICE_REMOVED {
                    IBV_EVENT_DEVICE_FATAL
                } else {
                    ev.event_type.0 as c_int
                },
            ),
        };
        // SAFETY: non-NULL, points at the caller's struct ibv_async_event.
        unsafe {
            event.write(ibv_async_event {
                element,
                event_type,
            })
        };
        0
    })
}

/// Whether libibverbs' `read` would have gone on after the signal handler that just
/// interrupted a wait: the kernel restarts a read after a handler installed with `SA_RESTART`.
/// Which signal ran is not known, so this says yes only when every installed handler has it.
/// The fault signals are left out: they are raised by an instruction, never while a thread
/// sleeps in a wait, and runtimes install them without `SA_RESTART` (Rust's `std` does, for
/// its stack-overflow report).
fn handlers_restart() -> bool {
    const FAULTS: [c_int; 5] = [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGTRAP,
    ];
    (1..=libc::SIGRTMAX())
        .filter(|s| !FAULTS.contains(s))
        .all(|sig| {
            // SAFETY: a zeroed sigaction is a valid out-parameter; a NULL new action only reads
            // the signal's disposition.
            let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
            // SAFETY: as above; `old` is a live, writable sigaction.
            if unsafe { libc::sigaction(sig, core::ptr::null(), &mut old) } != 0 {
                return true; // not a signal a program can handle (glibc's own, SIGKILL, SIGSTOP)
            }
            old.sa_sigaction == libc::SIG_DFL
                || old.sa_sigaction == libc::SIG_IGN
                || old.sa_flags & libc::SA_RESTART != 0
        })
}

/// `ibv_ack_async_event`: counts the acknowledgement on the event's object, in the header's
/// fields, under the object's mutex (as rdma-core does).
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    guard("ibv_ack_async_event", (), || {
        if event.is_null() {
            return;
        }
        // SAFETY: the program passes an event ibv_get_async_event filled.
        let ev = unsafe { &*event };
        // SAFETY: reading the union as the member the event type says was written; the
        // pointers are live objects (an object is destroyed only after its events are acked).
        unsafe {
            match AsyncEventType(ev.event_type as u32) {
                AsyncEventType::CQ_ERR => crate::cq::ack_async_event(ev.element.cq),
                AsyncEventType::SRQ_ERR | AsyncEventType::SRQ_LIMIT_REACHED => {
                    let srq = ev.element.srq;
                    if !srq.is_null() {
                        count(
                            &mut (*srq).mutex,
                            &mut (*srq).cond,
                            &mut (*srq).events_completed,
                        );
                    }
                }
                AsyncEventType::QP_FATAL
                | AsyncEventType::QP_REQ_ERR
                | AsyncEventType::QP_ACCESS_ERR
                | AsyncEventType::COMM_EST
                | AsyncEventType::SQ_DRAINED
                | AsyncEventType::PATH_MIG
                | AsyncEventType::PATH_MIG_ERR
                | AsyncEventType::QP_LAST_WQE_REACHED => {
                    let qp = ev.element.qp;
                    if !qp.is_null() {
                        count(
                            &mut (*qp).mutex,
                            &mut (*qp).cond,
                            &mut (*qp).events_completed,
                        );
                    }
                }
                _ => {}
            }
        }
    })
}

/// One more acknowledged event, under the object's mutex, waking a destroy that waits.
///
/// # Safety
/// The three fields belong to one live object whose mutex and cond were initialised.
unsafe fn count(m: &mut libc::pthread_mutex_t, c: &mut libc::pthread_cond_t, n: &mut u32) {
    // SAFETY: initialised pthread objects of a live object (above).
    unsafe {
        libc::pthread_mutex_lock(m);
        *n += 1;
        libc::pthread_cond_signal(c);
        libc::pthread_mutex_unlock(m);
    }
}
