//! A signal handler ends `ibv_get_cq_event`'s and `ibv_get_async_event`'s wait as it ends
//! libibverbs' `read` of the fd: with `EINTR` when the handler was installed without
//! `SA_RESTART`, and not at all when it was installed with it.
//!
//! On the EFA device model a channel's fd and the async fd are eventfds: a wait blocks until
//! the test writes one. After the signals the test makes the fd non-blocking and writes 1:
//! read as a completion event that names no CQ, `ibv_get_cq_event` skips it and reads again
//! (`EAGAIN`); read as an async event it is a short record (`EIO`). Either proves the wait
//! went on past the signals. Its own test binary: the handler of `SIGUSR1` is process-wide.

use core::ffi::{c_int, c_void};
use core::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use uverbs_capi::abi::*;
use uverbs_capi::wrap_context;
use uverbs_efa_model::EfaFabric;

extern "C" {
    fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel;
    fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int;
    fn ibv_get_cq_event(
        channel: *mut ibv_comp_channel,
        cq: *mut *mut ibv_cq,
        cq_context: *mut *mut c_void,
    ) -> c_int;
    fn ibv_get_async_event(ctx: *mut ibv_context, event: *mut ibv_async_event) -> c_int;
    fn ibv_close_device(ctx: *mut ibv_context) -> c_int;
}

static HANDLED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_usr1(_: c_int) {
    HANDLED.fetch_add(1, Ordering::SeqCst);
}

fn install_usr1(restart: bool) {
    // SAFETY: a zeroed sigaction with a plain handler and an empty mask is valid; the handler
    // only touches an atomic (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, ptr::null_mut()), 0);
    }
}

/// Runs `wait` (returning the call's result and errno) on a thread and sends that thread
/// SIGUSR1 every 10 ms; with `restart`, once the handler has run 20 times, makes `fd`
/// non-blocking and writes 1 to it. Returns what `wait` returned.
fn interrupt(
    restart: bool,
    fd: c_int,
    wait: fn(usize) -> (c_int, c_int),
    arg: usize,
) -> (c_int, c_int) {
    install_usr1(restart);
    HANDLED.store(0, Ordering::SeqCst);
    let (tx, rx) = mpsc::channel();
    let (tid_tx, tid_rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        // SAFETY: pthread_self has no preconditions. (An integer on glibc, a pointer on
        // musl, which is not Send: passed as its bits.)
        tid_tx
            .send(unsafe { libc::pthread_self() } as usize)
            .unwrap();
        tx.send(wait(arg)).unwrap();
    });
    let tid = tid_rx.recv().unwrap() as libc::pthread_t;
    let mut wrote = false;
    let got = loop {
        if let Ok(r) = rx.recv_timeout(Duration::from_millis(10)) {
            break r;
        }
        if restart && HANDLED.load(Ordering::SeqCst) >= 20 && !wrote {
            let one = 1u64.to_ne_bytes();
            // SAFETY: fcntl on a live fd; an 8-byte write of a count to the eventfd.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFL);
                assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK), 0);
                assert_eq!(libc::write(fd, one.as_ptr().cast(), 8), 8);
            }
            wrote = true;
        } else if !wrote {
            // SAFETY: the thread is alive until it sends its result (joined below).
            assert_eq!(unsafe { libc::pthread_kill(tid, libc::SIGUSR1) }, 0);
        }
    };
    t.join().unwrap();
    got
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn get_cq_event(channel: usize) -> (c_int, c_int) {
    let (mut cq, mut cq_ctx) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: a live channel; two out pointers.
    let r = unsafe { ibv_get_cq_event(channel as *mut ibv_comp_channel, &mut cq, &mut cq_ctx) };
    (r, errno())
}

fn get_async_event(ctx: usize) -> (c_int, c_int) {
    // SAFETY: ibv_async_event is plain data; zeroed is a valid out-parameter.
    let mut ev: ibv_async_event = unsafe { core::mem::zeroed() };
    // SAFETY: a live context; a writable event.
    let r = unsafe { ibv_get_async_event(ctx as *mut ibv_context, &mut ev) };
    (r, errno())
}

#[test]
fn a_handler_ends_a_wait_unless_installed_with_sa_restart() {
    let fabric = EfaFabric::new(1);
    let dev = fabric.add_device(Default::default());
    let c = dev.open().expect("open the model");
    let ctx = wrap_context(c.device().clone(), c);
    // SAFETY: a live context.
    let channel = unsafe { ibv_create_comp_channel(ctx) };
    assert!(
        !channel.is_null(),
        "ibv_create_comp_channel: errno {}",
        errno()
    );
    // SAFETY: both live.
    let (ch_fd, async_fd) = unsafe { ((*channel).fd, (*ctx).async_fd) };

    for (name, fd, wait, arg, woken) in [
        (
            "ibv_get_cq_event",
            ch_fd,
            get_cq_event as fn(usize) -> _,
            channel as usize,
            libc::EAGAIN,
        ),
        (
            "ibv_get_async_event",
            async_fd,
            get_async_event,
            ctx as usize,
            libc::EIO,
        ),
    ] {
        let (r, e) = interrupt(false, fd, wait, arg);
        assert_eq!(
            (r, e),
            (-1, libc::EINTR),
            "{name}: a handler without SA_RESTART must end the wait with EINTR"
        );
        let (r, e) = interrupt(true, fd, wait, arg);
        assert!(
            HANDLED.load(Ordering::SeqCst) >= 20,
            "{name}: the handler ran only {} times",
            HANDLED.load(Ordering::SeqCst)
        );
        assert_eq!(
            (r, e),
            (-1, woken),
            "{name}: with SA_RESTART the wait must go on past 20 signals and end on the \
             eventfd's write"
        );
    }
    // SAFETY: live objects, destroyed once.
    unsafe {
        assert_eq!(ibv_destroy_comp_channel(channel), 0);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}
