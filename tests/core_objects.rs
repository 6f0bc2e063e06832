//! PD, MR, CQ, completion channel and async events against a real rxe device (soft-RoCE VM).

mod common;

use std::time::Duration;

use common::*;
use uverbs::{AccessFlags, AsyncElement, AsyncEventType, Errno};

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn pd_alloc_and_drop_leave_no_fds_or_mappings() {
    // The first context of a process starts the device-removal watcher thread, whose stack
    // stays mapped (its fds do not): open one before counting, as the soak test does.
    drop(rxe_context());
    let fds0 = open_fds();
    let maps0 = settled_mappings();
    for _ in 0..50 {
        let ctx = rxe_context();
        let pd = ctx.alloc_pd().unwrap();
        let pd2 = ctx.alloc_pd().unwrap();
        assert_ne!(pd.handle(), pd2.handle());
        let mr = pd.reg_mr(8192, AccessFlags::LOCAL_WRITE).unwrap();
        let mut cq = ctx.create_cq(16, None, 0).unwrap();
        assert!(cq.poll_one().unwrap().is_none());
        drop((mr, cq, pd, pd2, ctx));
    }
    assert_eq!(open_fds(), fds0, "fds leaked");
    // A leak adds mappings every cycle; fewer than at the start is not one (a thread stack or
    // a heap arena of an earlier test in this process can be given back during the loop, as
    // seen in the full VM run).
    let maps = settled_mappings();
    assert!(
        maps <= maps0,
        "mappings leaked: {maps0} before 50 cycles, {maps} after"
    );
    assert_eq!(uverbs::drop_error_count(), 0);
}

/// The command fd of a kernel context is its `/dev/infiniband/uverbsN` file (what
/// `ibv_context.cmd_fd` shows; pyverbs dup()s it).
#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn command_fd_is_the_uverbs_device_file() {
    use std::os::fd::AsRawFd;
    let ctx = rxe_context();
    let fd = ctx.command_fd().expect("a kernel context has a command fd");
    let path = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
    assert!(
        path.to_string_lossy().starts_with("/dev/infiniband/uverbs"),
        "{}",
        path.display()
    );
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn mr_keys_bounds_and_contents() {
    let ctx = rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mut mr = pd.reg_mr(10_000, access).unwrap();
    assert_eq!(mr.len(), 10_000);
    assert_ne!(mr.lkey(), 0);
    assert_eq!(mr.access(), access);
    mr.write(9_990, b"0123456789").unwrap();
    let mut back = [0u8; 10];
    mr.read(9_990, &mut back).unwrap();
    assert_eq!(&back, b"0123456789");
    assert!(mr.write(9_991, b"0123456789").is_err());
    let sge = mr.sge(100, 200).unwrap();
    assert_eq!(
        (sge.addr, sge.length, sge.lkey),
        (mr.addr() + 100, 200, mr.lkey())
    );
    let e = mr.sge(9_900, 200).unwrap_err();
    assert!(e.to_string().contains("exceed the MR length"), "{e}");
    mr.dereg().unwrap();
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn mr_rereg_access_and_pd() {
    let ctx = rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let pd2 = ctx.alloc_pd().unwrap();
    let mut mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    match mr.rereg_access(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ) {
        Ok(()) => {
            assert!(mr.access().contains(AccessFlags::REMOTE_READ));
            mr.rereg_pd(&pd2).unwrap();
            assert_eq!(mr.pd().handle(), pd2.handle());
        }
        // A kernel without rxe rereg support must say so clearly.
        Err(e) => assert!(
            e.is(Errno::OPNOTSUPP) && e.reason().contains("re-registration"),
            "{e}"
        ),
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn mr_bad_input_is_refused_clearly() {
    let ctx = rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let e = pd.reg_mr(0, AccessFlags::LOCAL_WRITE).unwrap_err();
    assert!(
        e.is(Errno::INVAL) && e.reason().contains("length is zero"),
        "{e}"
    );
    let e = pd.reg_mr(4096, AccessFlags::REMOTE_WRITE).unwrap_err();
    assert!(
        e.is(Errno::INVAL) && e.reason().contains("LOCAL_WRITE"),
        "{e}"
    );
    assert_eq!(e.op(), "reg_mr");
    assert!(e.object().starts_with("pd "), "{e}");
    // An address range that is not mapped: the kernel cannot pin it.
    let bogus = 0x10usize as *mut u8;
    // SAFETY: registration of unmapped memory fails in the kernel; nothing is accessed.
    let e = unsafe { pd.reg_mr_raw(bogus, 4096, AccessFlags::LOCAL_WRITE) }.unwrap_err();
    assert!(e.is(Errno::FAULT) || e.is(Errno::INVAL), "{e}");
    assert!(e.to_string().contains("reg_mr"), "{e}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn dmabuf_mr_is_refused_clearly_by_rxe() {
    let ctx = rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let buf = dmabuf_or_memfd(1 << 16);
    use std::os::fd::AsFd;
    let e = pd
        .reg_dmabuf_mr(buf.as_fd(), 0, 1 << 16, 0, AccessFlags::LOCAL_WRITE)
        .unwrap_err();
    assert!(e.is(Errno::OPNOTSUPP) || e.is(Errno::PROTONOSUPPORT), "{e}");
    assert!(e.reason().contains("dmabuf"), "{e}");
}

/// A real dmabuf from `/dev/udmabuf` where the kernel has it (Debian's 6.12 does, 6.1 does
/// not), else a memfd: rxe refuses before it looks at the fd either way, which is what the test
/// checks. Under the VM on a kernel built with udmabuf, its absence is a failure.
fn dmabuf_or_memfd(len: u64) -> std::os::fd::OwnedFd {
    use rustix::fs::{memfd_create, MemfdFlags, SealFlags};
    let memfd = memfd_create(
        "uverbs-test",
        MemfdFlags::ALLOW_SEALING | MemfdFlags::CLOEXEC,
    )
    .unwrap();
    rustix::fs::ftruncate(&memfd, len).unwrap();
    let series = std::env::var("UVERBS_TEST_KERNEL_SERIES").unwrap_or_default();
    let Ok(udmabuf) = rustix::fs::open(
        "/dev/udmabuf",
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        assert!(
            !(under_vm() && series == "6.12"),
            "/dev/udmabuf missing on a 6.12 kernel built with CONFIG_UDMABUF=y"
        );
        eprintln!("note: no /dev/udmabuf on this kernel; a memfd stands in for the dmabuf");
        return memfd;
    };
    rustix::fs::fcntl_add_seals(&memfd, SealFlags::SHRINK).unwrap();
    let req = UdmabufCreate {
        memfd: std::os::fd::AsRawFd::as_raw_fd(&memfd) as u32,
        flags: 1, // UDMABUF_FLAGS_CLOEXEC
        offset: 0,
        size: len,
    };
    // SAFETY: UDMABUF_CREATE reads one `struct udmabuf_create` (mirrored below) and returns a
    // new fd, which we own on the next line.
    let fd =
        unsafe { rustix::ioctl::ioctl(&udmabuf, UdmabufCreateIoctl(req)) }.expect("UDMABUF_CREATE");
    // SAFETY: the kernel just installed this fd for us; nothing else owns it.
    unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
}

/// `struct udmabuf_create` from `linux/udmabuf.h`.
#[repr(C)]
struct UdmabufCreate {
    memfd: u32,
    flags: u32,
    offset: u64,
    size: u64,
}

struct UdmabufCreateIoctl(UdmabufCreate);

// SAFETY: UDMABUF_CREATE = _IOW('u', 0x42, struct udmabuf_create); the pointer we hand out is
// to our own struct of that layout, and the kernel only reads it. The return value is an fd.
unsafe impl rustix::ioctl::Ioctl for UdmabufCreateIoctl {
    type Output = i32;
    const IS_MUTATING: bool = false;
    fn opcode(&self) -> rustix::ioctl::Opcode {
        rustix::ioctl::opcode::write::<UdmabufCreate>(b'u', 0x42)
    }
    fn as_ptr(&mut self) -> *mut std::ffi::c_void {
        (&mut self.0 as *mut UdmabufCreate).cast()
    }
    unsafe fn output_from_ptr(
        out: rustix::ioctl::IoctlOutput,
        _: *mut std::ffi::c_void,
    ) -> rustix::io::Result<i32> {
        Ok(out)
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn cq_sizes_resize_and_destroy_counts() {
    let ctx = rxe_context();
    let cq = ctx.create_cq(100, None, 0).unwrap();
    assert!(cq.cqe() >= 100, "cqe {}", cq.cqe());
    let d = cq.destroy().unwrap();
    assert_eq!(d.comp_events_reported, 0);
    assert_eq!(d.async_events_reported, 0);

    let e = ctx.create_cq(0, None, 0).unwrap_err();
    assert!(e.is(Errno::INVAL) && e.reason().contains("cqe is 0"), "{e}");
    let e = ctx.create_cq(u32::MAX / 2, None, 0).unwrap_err();
    assert!(e.is(Errno::INVAL), "{e}");
    assert!(e.to_string().contains("create_cq on device rxe"), "{e}");
    let e = ctx.create_cq(10, None, 10_000).unwrap_err();
    assert!(e.reason().contains("comp_vector"), "{e}");

    let mut cq = ctx.create_cq(16, None, 0).unwrap();
    cq.resize(200).unwrap();
    assert!(cq.cqe() >= 200);
    assert!(cq.poll_one().unwrap().is_none());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn comp_channel_refuses_a_wait_that_could_never_end() {
    let ctx = rxe_context();
    let ch = ctx.create_comp_channel().unwrap();
    let e = ch.get_cq_event(None).unwrap_err();
    assert!(
        e.is(Errno::INVAL) && e.reason().contains("req_notify"),
        "{e}"
    );

    let mut cq = ctx.create_cq(16, Some(&ch), 0).unwrap();
    cq.req_notify(false).unwrap();
    // Armed but nothing completes: a bounded wait times out instead of hanging.
    let e = ch
        .get_cq_event(Some(Duration::from_millis(200)))
        .unwrap_err();
    assert!(e.is(Errno::TIMEDOUT), "{e}");
    assert!(ch.try_get_cq_event().unwrap().is_none());

    // A CQ without a channel is armed as rdma-core arms it (the event has nowhere to go),
    // and the channel's waiters are not told to expect one.
    let mut plain = ctx.create_cq(16, None, 0).unwrap();
    plain
        .req_notify(false)
        .expect("req_notify_cq without a channel");
    assert!(ch.try_get_cq_event().unwrap().is_none());
    assert!(plain.poll_one().unwrap().is_none());
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn port_down_and_up_raise_async_events() {
    let ctx = rxe_context();
    let netdev = std::fs::read_to_string(ctx.device().ibdev_path().join("parent"))
        .expect("rxe device has a parent netdev")
        .trim()
        .to_string();
    set_link(&netdev, "down");
    wait_port_event(&ctx, AsyncEventType::PORT_ERR);
    set_link(&netdev, "up");
    wait_port_event(&ctx, AsyncEventType::PORT_ACTIVE);
}

/// Reads async events until `want` arrives for port 1; GID-table changes that a link change
/// also causes are allowed in between, anything else fails the test.
fn wait_port_event(ctx: &uverbs::Context, want: AsyncEventType) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ev = ctx
            .get_async_event(Some(left))
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", want.as_str()));
        if ev.event_type == want {
            assert_eq!(ev.element, AsyncElement::Port(1), "{ev:?}");
            return;
        }
        assert_eq!(
            ev.event_type,
            AsyncEventType::GID_CHANGE,
            "unexpected event {ev:?}"
        );
    }
}

fn set_link(dev: &str, state: &str) {
    let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("ip");
    let st = std::process::Command::new(ip)
        .args(["link", "set", dev, state])
        .status()
        .expect("run ip");
    assert!(st.success(), "ip link set {dev} {state} failed");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn nonexistent_device_name_is_a_clear_error() {
    let e = uverbs::device_by_name("nosuchdev0").unwrap_err();
    assert!(e.is(Errno::NODEV));
    assert!(e.to_string().contains("nosuchdev0"), "{e}");
    assert!(e.reason().contains("present: rxe"), "{e}");
}
