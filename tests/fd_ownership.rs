//! uverbs owns (and closes) only file descriptors created for it (issue 27, item 3).
//!
//! The GET_CONTEXT response carries the number of the async event fd the kernel just made, and
//! uverbs takes it as an `OwnedFd`, which closes it on drop. Nothing reachable from safe code
//! may put another number there: a channel answering "success" without writing the field, or a
//! `KernelChannel` over a file that is not a uverbs device (whose `write()` succeeds and writes
//! nothing back, as `/dev/null`'s does), would otherwise hand uverbs fd 0, the program's stdin,
//! and dropping the context would close it.
//!
//! Each test checks that fd 0 is the same open file afterwards. Host only, no device.

use std::os::fd::{AsFd, IntoRawFd};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use uverbs::channel::{Channel, IoctlCmd, KernelChannel, WriteCmd};
use uverbs::uapi::ioctl::RDMA_DRIVER_RXE;
use uverbs::{Context, Device, Driver, Errno};

/// The tests watch fd 0 of the whole process: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which open file fd 0 is (device and inode), `None` if it is closed.
fn fd0() -> Option<(u64, u64)> {
    let st = rustix::fs::fstat(std::io::stdin().as_fd()).ok()?;
    Some((st.st_dev, st.st_ino))
}

/// Makes sure fd 0 is open (a harness may start the tests with stdin closed), and says which
/// file it is.
fn stdin_open() -> (u64, u64) {
    if let Some(id) = fd0() {
        return id;
    }
    // The lowest free number is 0: the open lands there, and stays open for the process.
    let f = std::fs::File::open("/dev/null").expect("open /dev/null");
    assert_eq!(
        f.into_raw_fd(),
        0,
        "fd 0 was closed, so /dev/null should have landed there"
    );
    fd0().expect("fd 0 just opened")
}

fn rxe() -> Device {
    Device::synthetic("rxe_fd", Driver::Rxe, 1)
}

/// A `KernelChannel` over a file that is not a uverbs device is refused, so no context over
/// it can take the (unwritten, zero) async fd field as fd 0.
#[test]
fn a_kernel_channel_over_a_file_that_is_not_uverbs_is_refused() {
    let _g = serial();
    let before = stdin_open();
    let outcome = match KernelChannel::open(Path::new("/dev/null"), RDMA_DRIVER_RXE) {
        Err(e) => Err(e),
        Ok(ch) => match Context::with_channel(rxe(), Box::new(ch)) {
            Ok(ctx) => {
                drop(ctx);
                Ok("a context was made over /dev/null and dropped")
            }
            Err(_) => Ok("a channel over /dev/null was made; GET_CONTEXT failed"),
        },
    };
    assert_eq!(fd0(), Some(before), "fd 0 after: {outcome:?}");
    assert_eq!(
        outcome,
        Err(Errno::NOTTY),
        "/dev/null is not a uverbs device"
    );
}

/// A channel that succeeds without writing the fd field: the context is refused (the field
/// still holds the invalid number uverbs put there), and fd 0 stays open.
#[test]
fn an_unwritten_async_fd_is_refused_not_taken_as_fd_0() {
    /// Answers every command with success and writes nothing, as `/dev/null` does.
    #[derive(Debug)]
    struct Silent;

    // SAFETY: it writes no fd number, and has no doorbell fd.
    unsafe impl Channel for Silent {
        fn ioctl(&self, _: &mut IoctlCmd<'_>) -> Result<(), Errno> {
            Ok(())
        }
        fn write(&self, _: &mut WriteCmd) -> Result<(), Errno> {
            Ok(())
        }
        fn driver_id(&self) -> u32 {
            RDMA_DRIVER_RXE
        }
    }

    let _g = serial();
    let before = stdin_open();
    let r = Context::with_channel(rxe(), Box::new(Silent));
    let made = r.is_ok();
    drop(r);
    assert_eq!(
        fd0(),
        Some(before),
        "fd 0 after with_channel (context made: {made})"
    );
    let e = Context::with_channel(rxe(), Box::new(Silent)).unwrap_err();
    assert!(e.is(Errno::BADF), "{e}");
}
