//! Device removal on a driver that disassociates (mlx5, EFA): the kernel frees the hardware
//! objects, queues `IB_EVENT_DEVICE_FATAL` on the async fd and answers every later command with
//! `EIO`. rxe cannot produce this (it has no `disassociate_ucontext`), so it runs on the host
//! against the EFA device model behind a channel that, once "removed", does what the kernel
//! does: `EIO` for every command, `DEVICE_FATAL` on the async fd.
//!
//! What must hold: one clear error kind for every later command ("device NAME was removed"),
//! destroys count as done (rdma-core's `RDMAV_ALLOW_DISASSOC_DESTROY`), so dropping the objects
//! reports no leak; a plain `EIO` from a live device is not taken for a removal.

mod common;
use common::efa;

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uverbs::channel::{Channel, IoctlCmd, MapKind, Mapping, WriteCmd};
use uverbs::uapi::write::{
    IbUverbsAsyncEventDesc, IbUverbsGetContextResp, IB_USER_VERBS_CMD_GET_CONTEXT,
};
use uverbs::{
    AccessFlags, AsyncElement, AsyncEventType, Context, CqInitAttr, Device, Driver, EfaCqInitAttr,
    EfaQpFlags, EfaQpInitAttr, Errno, ErrorKind, QpCap, QpInitAttr, QpType, RemovalSource,
    SendOpsFlags,
};
use uverbs_efa_model::{EfaDevice, EfaFabric, ModelConfig};
use zerocopy::{FromBytes, IntoBytes};

/// The knobs of a [`Removable`] channel, kept by the test.
#[derive(Debug, Default)]
struct Knobs {
    /// Removed: every command fails with `EIO`.
    removed: AtomicBool,
    /// Fail this many commands with `EIO` while present (a transient error, not a removal).
    eio: AtomicUsize,
    /// The write end of the context's async event pipe.
    async_tx: Mutex<Option<OwnedFd>>,
    /// Commands answered with `EIO` after the removal.
    refused: AtomicUsize,
}

impl Knobs {
    /// The device goes away: commands fail from now on, and `DEVICE_FATAL` is queued on the
    /// async fd if `fatal`.
    fn remove(&self, fatal: bool) {
        self.removed.store(true, Ordering::SeqCst);
        if fatal {
            let ev = IbUverbsAsyncEventDesc {
                element: 0,
                event_type: AsyncEventType::DEVICE_FATAL.0,
                ..Default::default()
            };
            let tx = self.async_tx.lock().unwrap();
            let n = rustix::io::write(tx.as_ref().expect("context opened"), ev.as_bytes()).unwrap();
            assert_eq!(n, std::mem::size_of::<IbUverbsAsyncEventDesc>());
        }
    }

    fn answer(&self) -> Result<(), Errno> {
        if self.removed.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(Errno::IO);
        }
        // One failure per count left (a compare-exchange loop: `fetch_update` is deprecated on
        // newer toolchains and its replacement is not in our MSRV).
        let mut n = self.eio.load(Ordering::SeqCst);
        while n > 0 {
            match self
                .eio
                .compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Err(Errno::IO),
                Err(now) => n = now,
            }
        }
        Ok(())
    }
}

/// The EFA model behind a channel that can be "removed" as a disassociating driver is.
#[derive(Debug)]
struct Removable {
    dev: EfaDevice,
    knobs: Arc<Knobs>,
}

// SAFETY: commands go to `dev` (a `Channel`) unchanged; the one fd number this channel writes
// itself is GET_CONTEXT's `async_fd`, the read end of a pipe made in that call and given up
// (`into_raw_fd`) as its number is written (the model's own fd, handed to us, is closed). No
// doorbell fd.
unsafe impl Channel for Removable {
    fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        self.knobs.answer()?;
        self.dev.ioctl(cmd)
    }

    fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
        self.knobs.answer()?;
        self.dev.write(cmd)?;
        if cmd.command() == IB_USER_VERBS_CMD_GET_CONTEXT && !cmd.is_extended() {
            // The model's async fd cannot carry event records: hand out a pipe instead.
            let mut resp = IbUverbsGetContextResp::read_from_prefix(cmd.response())
                .map_err(|_| Errno::INVAL)?
                .0;
            // SAFETY: the model created this fd for this GET_CONTEXT call and nothing else
            // refers to it (the library would have owned it; we answer with the pipe instead).
            drop(unsafe { OwnedFd::from_raw_fd(resp.async_fd as i32) });
            let (rx, tx) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
            *self.knobs.async_tx.lock().unwrap() = Some(tx);
            resp.async_fd = rx.into_raw_fd() as u32;
            cmd.response_mut()[..8].copy_from_slice(resp.as_bytes());
        }
        Ok(())
    }

    fn mmap(&self, offset: u64, len: usize, kind: MapKind) -> Result<Mapping, Errno> {
        self.knobs.answer()?;
        self.dev.mmap(offset, len, kind)
    }

    fn doorbell_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    fn driver_id(&self) -> u32 {
        self.dev.driver_id()
    }
}

/// The tests check the process-wide drop-error count: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn open(fab: &EfaFabric) -> (Context, Arc<Knobs>) {
    let dev = fab.add_device(ModelConfig::default());
    let knobs = Arc::new(Knobs::default());
    let ctx = Context::with_channel(
        Device::synthetic("efa_gone", Driver::Efa, 0x0200_0000_0000_0077),
        Box::new(Removable {
            dev,
            knobs: knobs.clone(),
        }),
    )
    .expect("open the model device");
    (ctx, knobs)
}

/// A PD, MR, CQ, comp channel, UD QP in RTS and an AH: one of each kind a removal must free.
struct Objects {
    pd: uverbs::Pd,
    mr: uverbs::Mr,
    cq: uverbs::Cq,
    qp: uverbs::Qp,
    ah: uverbs::Ah,
    ch: uverbs::CompChannel,
}

fn objects(ctx: &Context) -> Objects {
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(1 << 16, AccessFlags::LOCAL_WRITE).unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 64,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    let mut qp = pd
        .efadv_create_qp_ex(
            &QpInitAttr {
                sq_sig_all: true,
                send_ops_flags: SendOpsFlags::SEND,
                ..QpInitAttr::new(
                    QpType::Ud,
                    &cq,
                    &cq,
                    QpCap {
                        max_send_wr: 16,
                        max_recv_wr: 16,
                        max_send_sge: 1,
                        max_recv_sge: 1,
                        max_inline_data: 0,
                    },
                )
            },
            &EfaQpInitAttr {
                flags: EfaQpFlags::empty(),
                sl: 0,
                wr_flags: Default::default(),
            },
        )
        .unwrap();
    efa::to_rts(&mut qp, 0x1234).unwrap();
    let gid = match ctx.query_gid(1, 0) {
        Ok(g) => g.raw,
        Err(e) => panic!("query_gid: {e}"),
    };
    let ah = pd.create_ah(&efa::ah_attr(gid)).unwrap();
    Objects {
        pd,
        mr,
        cq,
        qp,
        ah,
        ch,
    }
}

#[test]
fn disassociation_is_one_error_kind_and_destroys_count_as_done() {
    let _serial = serial();
    let fds0 = common::open_fds();
    let fab = EfaFabric::default();
    let drop_errors0 = uverbs::drop_error_count();
    let (ctx, knobs) = open(&fab);
    let o = objects(&ctx);
    assert!(!ctx.is_device_removed());
    assert_eq!(ctx.removal_source(), None);
    // A model context is not watched (no device node): the kernel's word is all it gets.
    assert_eq!(ctx.removal_watch(), uverbs::RemovalWatch::default());
    assert!(ctx.removal_fd().is_none());

    // A thread blocked in get_async_event wakes for DEVICE_FATAL.
    let waiter = {
        let ctx = ctx.clone();
        std::thread::spawn(move || ctx.get_async_event(Some(Duration::from_secs(20))))
    };
    std::thread::sleep(Duration::from_millis(50));
    knobs.remove(true);
    let ev = waiter.join().unwrap().expect("DEVICE_FATAL");
    assert_eq!(ev.event_type, AsyncEventType::DEVICE_FATAL);
    assert_eq!(ev.element, AsyncElement::Device);
    assert!(ctx.is_device_removed());
    assert_eq!(ctx.removal_source(), Some(RemovalSource::DeviceFatal));
    // DEVICE_FATAL said it: uverbs' own DEVICE_REMOVED does not repeat it.
    let e = ctx
        .get_async_event(Some(Duration::from_millis(50)))
        .unwrap_err();
    assert!(e.is(Errno::TIMEDOUT), "{e}");

    // Every later command: one error kind, naming the operation and the device.
    let e = ctx.alloc_pd().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DeviceRemoved, "{e}");
    assert!(e.is(Errno::IO), "{e}");
    assert_eq!(e.op(), "alloc_pd");
    assert!(e.to_string().contains("device efa_gone was removed"), "{e}");
    let e = o.pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap_err();
    assert!(e.is_device_removed(), "{e}");
    let e = ctx.create_comp_channel().unwrap_err();
    assert!(e.is_device_removed(), "{e}");
    let refused = knobs.refused.load(Ordering::SeqCst);
    assert!(refused >= 3, "the commands reached the channel: {refused}");

    // Destroys count as done: explicitly (Ok) and by dropping (no drop error).
    let Objects {
        pd,
        mr,
        cq,
        qp,
        ah,
        ch,
    } = o;
    ah.destroy().expect("destroy_ah after removal");
    qp.destroy().expect("destroy_qp after removal");
    mr.dereg().expect("dereg_mr after removal");
    drop((cq, ch));
    drop(pd);
    assert_eq!(
        uverbs::drop_error_count(),
        drop_errors0,
        "a destroy after the removal was reported as a leak"
    );
    assert!(knobs.refused.load(Ordering::SeqCst) > refused + 4);
    drop(ctx);
    // The model still holds the memory of the objects it never saw destroyed, and the test
    // the pipe's write end: let them go too.
    drop((knobs, fab));
    assert_eq!(common::open_fds(), fds0, "fds leaked");
}

#[test]
fn removal_is_learned_from_eio_when_the_event_is_never_read() {
    let _serial = serial();
    let fab = EfaFabric::default();
    let drop_errors0 = uverbs::drop_error_count();
    let (ctx, knobs) = open(&fab);
    let o = objects(&ctx);
    knobs.remove(false);
    // Nobody read an event: the first EIO is confirmed by a probe (EIO too).
    let e = ctx.alloc_pd().unwrap_err();
    assert!(e.is_device_removed(), "{e}");
    assert!(ctx.is_device_removed());
    assert_eq!(ctx.removal_source(), Some(RemovalSource::CommandEio));
    // The event stream says so, once.
    let ev = ctx.get_async_event(Some(Duration::ZERO)).unwrap();
    assert_eq!(ev.event_type, AsyncEventType::DEVICE_REMOVED);
    assert_eq!(ev.element, AsyncElement::Device);
    assert_eq!(ev.event_type.as_str(), "device removed");
    let e = ctx.get_async_event(Some(Duration::ZERO)).unwrap_err();
    assert!(e.is(Errno::TIMEDOUT), "{e}");
    drop(o);
    assert_eq!(uverbs::drop_error_count(), drop_errors0);
}

#[test]
fn a_destroy_failing_with_eio_first_is_still_done() {
    let _serial = serial();
    // No command ran since the removal: the destroy's own EIO is what reveals it.
    let fab = EfaFabric::default();
    let drop_errors0 = uverbs::drop_error_count();
    let (ctx, knobs) = open(&fab);
    let pd = ctx.alloc_pd().unwrap();
    knobs.remove(false);
    drop(pd);
    assert_eq!(uverbs::drop_error_count(), drop_errors0);
    assert_eq!(ctx.removal_source(), Some(RemovalSource::CommandEio));
}

#[test]
fn eio_from_a_live_device_is_not_a_removal() {
    let _serial = serial();
    let fab = EfaFabric::default();
    let (ctx, knobs) = open(&fab);
    let _pd = ctx.alloc_pd().unwrap();
    knobs.eio.store(1, Ordering::SeqCst);
    let e = ctx.alloc_pd().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Other, "{e}");
    assert!(e.is(Errno::IO), "{e}");
    assert!(!ctx.is_device_removed());
    // A destroy failing with a transient EIO is a failure, not "done" (a CQ: its failure
    // leaves nothing that blocks the PD's dealloc at the end).
    let cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: 8,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .unwrap();
    knobs.eio.store(1, Ordering::SeqCst);
    let e = cq.destroy().unwrap_err();
    assert!(e.is(Errno::IO) && !e.error().is_device_removed(), "{e}");
    assert!(!ctx.is_device_removed());
    assert!(ctx.alloc_pd().is_ok());
}
