//! Noticing that an open context's device was removed (`rdma link delete`, a driver unbind, a
//! hot-unplug), and making commands after a disassociation fail or succeed cleanly.
//!
//! # What the kernel does
//!
//! `ib_uverbs_remove_one` (drivers/infiniband/core/uverbs_main.c) first deletes the character
//! device (`cdev_device_del`: a `remove` uevent for `infiniband_verbs/uverbsN`, its sysfs
//! directory and its `/dev/infiniband/uverbsN` node go away), then:
//! - for a driver with `disassociate_ucontext` (mlx5, EFA, ...) it frees the hardware objects,
//!   queues `IB_EVENT_DEVICE_FATAL` on every context's async fd and returns: every later command
//!   fails with `EIO`;
//! - for a driver without it (rxe, siw) it **waits until every open file of the device is
//!   closed**. Nothing is sent on the async fd and commands keep working; a program that does
//!   not let go hangs the removal for good.
//!
//! # What uverbs does
//!
//! Every context opened with [`crate::Context::open`] is watched by one thread per process
//! (started with the first such context, stopped with the last) that sleeps in `poll(2)` on:
//! - the kernel's uevent netlink socket (`NETLINK_KOBJECT_UEVENT`, group 1, kernel messages
//!   only): a `remove` of `infiniband_verbs/uverbsN` with the context's device number and a
//!   sequence number later than the context's registration;
//! - inotify on `/dev/infiniband`: the node being deleted (checked against the inode the
//!   context opened, so a re-created node is a removal and a stale event is not);
//! - a sysfs check once a second (`/sys/class/infiniband_verbs/uverbsN` gone, or its `dev` or
//!   its directory inode changed), for where the other two see nothing (a container whose
//!   `/dev` is a static copy and whose network namespace gets no uevents).
//!
//! The first that fires sets the context's flag ([`crate::Context::is_device_removed`], one
//! atomic load, nothing on the data path) and makes its wake fd readable, which the blocking
//! event waits and the tokio stream poll alongside their own fd. `DEVICE_FATAL` read from the
//! async fd and `EIO` from a command (confirmed by a probe) set the same flag.
//!
//! The watcher never touches the data path: posting and polling cost nothing more.
//!
//! `UVERBS_REMOVAL_DETECT` (a comma list of `uevent`, `devnode`, `sysfs`; default all) limits
//! the mechanisms, read when the watcher thread starts; for measuring which works where.

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::fs::{inotify, stat, Stat};
use uverbs_uapi::cmds::*;
use uverbs_uapi::verbs::IbUverbsQueryPortRespEx;
use uverbs_uapi::write::*;

use crate::channel::{Channel, IoctlCmd, MapKind, Mapping, WriteCmd};
use crate::error::Errno;

/// How uverbs learned that a context's device was removed ([`crate::Context::removal_source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RemovalSource {
    /// The kernel's `remove` uevent for the context's `uverbsN` (netlink).
    Uevent,
    /// `/dev/infiniband/uverbsN` was deleted or replaced (inotify).
    DevNode,
    /// `/sys/class/infiniband_verbs/uverbsN` is gone or is another device (periodic check).
    Sysfs,
    /// The kernel's `IB_EVENT_DEVICE_FATAL` was read from the async event fd.
    DeviceFatal,
    /// A command failed with `EIO` and a probe command failed with `EIO` too (disassociated).
    CommandEio,
    /// Found while opening: the device was removed between opening its fd and the check.
    AtOpen,
}

impl RemovalSource {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::Uevent,
            2 => Self::DevNode,
            3 => Self::Sysfs,
            4 => Self::DeviceFatal,
            5 => Self::CommandEio,
            6 => Self::AtOpen,
            _ => return None,
        })
    }
    fn as_u8(self) -> u8 {
        match self {
            Self::Uevent => 1,
            Self::DevNode => 2,
            Self::Sysfs => 3,
            Self::DeviceFatal => 4,
            Self::CommandEio => 5,
            Self::AtOpen => 6,
        }
    }
}

impl fmt::Display for RemovalSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Uevent => "the kernel's remove uevent",
            Self::DevNode => "its /dev/infiniband node being deleted",
            Self::Sysfs => "its sysfs entry being gone",
            Self::DeviceFatal => "the kernel's DEVICE_FATAL event",
            Self::CommandEio => "commands failing with EIO",
            Self::AtOpen => "a check while opening it",
        })
    }
}

/// Which detection mechanisms watch a context ([`crate::Context::removal_watch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RemovalWatch {
    /// The uevent netlink socket is bound.
    pub uevent: bool,
    /// inotify watches `/dev/infiniband`.
    pub dev_node: bool,
    /// The periodic sysfs check runs.
    pub sysfs: bool,
}

/// A context's removal state: the flag, and the wake fd the event waits poll.
#[derive(Debug)]
pub(crate) struct State {
    /// 0: present; otherwise a `RemovalSource`.
    source: AtomicU8,
    /// The `DeviceRemoved` event was handed out (or `DEVICE_FATAL` was, which says the same).
    delivered: AtomicBool,
    /// An eventfd made readable (and never read) once removed; only for watched contexts.
    wake: Option<OwnedFd>,
    /// The mechanisms watching this context (set at registration).
    watch: Mutex<RemovalWatch>,
}

impl State {
    pub(crate) fn new(watched: bool) -> Arc<State> {
        let wake = if watched {
            eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).ok()
        } else {
            None
        };
        Arc::new(State {
            source: AtomicU8::new(0),
            delivered: AtomicBool::new(false),
            wake,
            watch: Mutex::new(RemovalWatch::default()),
        })
    }

    /// Records the removal; returns whether this call was the first to learn of it.
    pub(crate) fn mark(&self, source: RemovalSource) -> bool {
        let first = self
            .source
            .compare_exchange(0, source.as_u8(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if first {
            if let Some(w) = &self.wake {
                // Readable from now on; nobody reads it, so it stays readable. A full counter
                // (EAGAIN) is readable too.
                let _ = rustix::io::write(w, &1u64.to_ne_bytes());
            }
        }
        first
    }

    pub(crate) fn is_removed(&self) -> bool {
        self.source.load(Ordering::Acquire) != 0
    }

    pub(crate) fn source(&self) -> Option<RemovalSource> {
        RemovalSource::from_u8(self.source.load(Ordering::Acquire))
    }

    /// Whether the `DeviceRemoved` event is due now (removed, not yet handed out); if so it
    /// counts as handed out.
    pub(crate) fn take_event(&self) -> bool {
        self.is_removed() && !self.delivered.swap(true, Ordering::AcqRel)
    }

    /// The application was told by the kernel's `DEVICE_FATAL`: our own event would repeat it.
    pub(crate) fn fatal_delivered(&self) {
        self.mark(RemovalSource::DeviceFatal);
        self.delivered.store(true, Ordering::Release);
    }

    /// The wake fd while the `DeviceRemoved` event is still to be handed out: a waiter polls it
    /// with its own fd. `None` once handed out (it stays readable; polling it would spin).
    pub(crate) fn pending_wake_fd(&self) -> Option<BorrowedFd<'_>> {
        if self.delivered.load(Ordering::Acquire) {
            return None;
        }
        self.wake.as_ref().map(|f| f.as_fd())
    }

    /// The wake fd, readable once the device is removed (`None` for unwatched contexts).
    pub(crate) fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        self.wake.as_ref().map(|f| f.as_fd())
    }

    pub(crate) fn watch(&self) -> RemovalWatch {
        *lock(&self.watch)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------------
// The command channel of a context: destroys after a disassociation count as done.

/// The context's channel: passes every command through and, once the device is known to be
/// disassociated, turns a destroy's `EIO` into success (as rdma-core does with
/// `RDMAV_ALLOW_DISASSOC_DESTROY`): the kernel already destroyed the object, so dropping it
/// must not report a leak.
pub(crate) struct CheckedChannel {
    chan: Box<dyn Channel>,
    pub(crate) state: Arc<State>,
}

impl fmt::Debug for CheckedChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.chan, f)
    }
}

impl CheckedChannel {
    pub(crate) fn new(chan: Box<dyn Channel>, state: Arc<State>) -> Self {
        CheckedChannel { chan, state }
    }

    /// After an `EIO`: whether the device is gone. Known already, or confirmed by a probe
    /// command that cannot fail with `EIO` on a live device (`QUERY_PORT` of port 1); the
    /// kernel answers every command of a disassociated file with `EIO`.
    pub(crate) fn confirm_removed(&self) -> bool {
        if self.state.is_removed() {
            return true;
        }
        let mut resp = IbUverbsQueryPortRespEx::default();
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
        cmd.const_u64(UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
            .ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp);
        if self.chan.ioctl(&mut cmd) == Err(Errno::IO) {
            self.state.mark(RemovalSource::CommandEio);
            return true;
        }
        false
    }

    fn settle(&self, r: Result<(), Errno>, destroy: bool) -> Result<(), Errno> {
        match r {
            Err(Errno::IO) if destroy && self.confirm_removed() => Ok(()),
            r => r,
        }
    }
}

/// Whether a legacy/extended write command destroys an object.
fn is_destroy_write(cmd: &WriteCmd) -> bool {
    if cmd.is_extended() {
        matches!(
            cmd.command(),
            IB_USER_VERBS_EX_CMD_DESTROY_FLOW
                | IB_USER_VERBS_EX_CMD_DESTROY_WQ
                | IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL
        )
    } else {
        matches!(
            cmd.command(),
            IB_USER_VERBS_CMD_DEALLOC_PD
                | IB_USER_VERBS_CMD_DESTROY_AH
                | IB_USER_VERBS_CMD_DEREG_MR
                | IB_USER_VERBS_CMD_DEALLOC_MW
                | IB_USER_VERBS_CMD_DESTROY_CQ
                | IB_USER_VERBS_CMD_DESTROY_QP
                | IB_USER_VERBS_CMD_DESTROY_SRQ
                | IB_USER_VERBS_CMD_CLOSE_XRCD
        )
    }
}

/// Whether an ioctl method destroys an object (`ib_user_ioctl_cmds.h`).
fn is_destroy_ioctl(object: u16, method: u16) -> bool {
    matches!(
        (object, method),
        (UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY)
            | (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY)
            | (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY)
            | (UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY)
            | (UVERBS_OBJECT_AH, UVERBS_METHOD_AH_DESTROY)
            | (UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY)
            | (UVERBS_OBJECT_MW, UVERBS_METHOD_MW_DESTROY)
            | (UVERBS_OBJECT_XRCD, UVERBS_METHOD_XRCD_DESTROY)
            | (UVERBS_OBJECT_WQ, UVERBS_METHOD_WQ_DESTROY)
            | (UVERBS_OBJECT_FLOW, UVERBS_METHOD_FLOW_DESTROY)
            | (UVERBS_OBJECT_FLOW_ACTION, UVERBS_METHOD_FLOW_ACTION_DESTROY)
            | (UVERBS_OBJECT_RWQ_IND_TBL, UVERBS_METHOD_RWQ_IND_TBL_DESTROY)
            | (UVERBS_OBJECT_DM, UVERBS_METHOD_DM_FREE)
            | (UVERBS_OBJECT_COUNTERS, UVERBS_METHOD_COUNTERS_DESTROY)
    )
}

// Inherent methods, so the object code calls them as it called `Box<dyn Channel>`'s without
// importing the trait; the trait impl (for `Context::channel`) forwards to them.
impl CheckedChannel {
    pub(crate) fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        let destroy = is_destroy_ioctl(cmd.object_id(), cmd.method_id());
        let r = self.chan.ioctl(cmd);
        self.settle(r, destroy)
    }

    pub(crate) fn ioctl_raw(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        self.chan.ioctl_raw(cmd)
    }

    pub(crate) fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
        let destroy = is_destroy_write(cmd);
        let r = self.chan.write(cmd);
        self.settle(r, destroy)
    }

    pub(crate) fn mmap(&self, offset: u64, len: usize, kind: MapKind) -> Result<Mapping, Errno> {
        self.chan.mmap(offset, len, kind)
    }

    pub(crate) fn doorbell_fd(&self) -> Option<BorrowedFd<'_>> {
        self.chan.doorbell_fd()
    }

    pub(crate) fn driver_id(&self) -> u32 {
        self.chan.driver_id()
    }
}

// SAFETY: every command goes to `chan` unchanged, and a response comes back unchanged (a
// destroy's `EIO` may become `Ok`, but a destroy returns no fd); the probe of
// `confirm_removed` is a QUERY_PORT, which returns none. So the fd numbers in responses are
// what `chan`, itself a `Channel`, handed over, and `doorbell_fd` is `chan`'s, which we own.
#[allow(unsafe_code)]
unsafe impl Channel for CheckedChannel {
    fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        CheckedChannel::ioctl(self, cmd)
    }

    fn ioctl_raw(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        CheckedChannel::ioctl_raw(self, cmd)
    }

    fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
        CheckedChannel::write(self, cmd)
    }

    fn mmap(&self, offset: u64, len: usize, kind: MapKind) -> Result<Mapping, Errno> {
        CheckedChannel::mmap(self, offset, len, kind)
    }

    fn doorbell_fd(&self) -> Option<BorrowedFd<'_>> {
        CheckedChannel::doorbell_fd(self)
    }

    fn command_fd(&self) -> Option<BorrowedFd<'_>> {
        self.chan.command_fd()
    }

    fn driver_id(&self) -> u32 {
        CheckedChannel::driver_id(self)
    }
}

// ---------------------------------------------------------------------------------------------
// Identity: which device a context's fd is on, so that a device re-added under the same name
// (or taking the same uverbsN and device number) is never taken for the old one.

/// Where the watcher looks (the real `/sys` and `/dev/infiniband`; a fake tree in unit tests).
#[derive(Debug, Clone)]
pub(crate) struct Roots {
    sys: PathBuf,
    dev: PathBuf,
}

impl Roots {
    pub(crate) fn system() -> Self {
        Roots {
            sys: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev/infiniband"),
        }
    }
    fn class_dir(&self, uverbs: &str) -> PathBuf {
        self.sys.join("class/infiniband_verbs").join(uverbs)
    }
}

/// What identifies the device behind a context's fd.
#[derive(Debug)]
pub(crate) struct Identity {
    /// `uverbs0`.
    uverbs: String,
    /// `rxe0`: the name the device had when opened.
    ibdev: String,
    /// The character device number (`st_rdev` of the fd).
    rdev: u64,
    /// The `/dev` node the fd was opened through.
    node_path: PathBuf,
    /// Its inode (device, number): a re-created node has another.
    node: (u64, u64),
    /// `/sys/kernel/uevent_seqnum` at registration: earlier uevents are not about this fd.
    seqnum: u64,
    /// The inode of `/sys/class/infiniband_verbs/uverbsN` (kernfs numbers are not reused
    /// soon): 0 until the check at open recorded it.
    sysfs_ino: AtomicU64,
}

impl Identity {
    /// The identity of `fd`, opened through `node_path` as `uverbs` of device `ibdev`.
    pub(crate) fn of(
        fd: BorrowedFd<'_>,
        uverbs: &str,
        ibdev: &str,
        node_path: &Path,
        roots: &Roots,
    ) -> Option<Self> {
        let st = rustix::fs::fstat(fd).ok()?;
        let seqnum = read_small(&roots.sys.join("kernel/uevent_seqnum"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        Some(Identity {
            uverbs: uverbs.to_string(),
            ibdev: ibdev.to_string(),
            node_path: node_path.to_path_buf(),
            rdev: st.st_rdev,
            node: (st.st_dev, st.st_ino),
            seqnum,
            sysfs_ino: AtomicU64::new(0),
        })
    }

    /// The check at open: the sysfs entry exists, has our device number and our device's name,
    /// and the `/dev` node is still the one we opened. Records the sysfs inode. `Err` says why
    /// the fd is not on a live device of that name.
    pub(crate) fn check_at_open(&self, roots: &Roots) -> Result<(), String> {
        let dir = roots.class_dir(&self.uverbs);
        let name = match read_small(&dir.join("ibdev")) {
            Ok(s) => s.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!("{} is gone from sysfs", self.uverbs))
            }
            // Cannot look (no sysfs, permissions): no evidence either way.
            Err(_) => return Ok(()),
        };
        if name != self.ibdev {
            return Err(format!("{} now belongs to device {name}", self.uverbs));
        }
        self.check(roots, true)?;
        if let Ok(st) = stat(&dir) {
            self.sysfs_ino.store(st.st_ino, Ordering::Release);
        }
        Ok(())
    }

    /// Whether the device is still there: sysfs entry present with our device number (and,
    /// once recorded, the same directory inode), and — when `node` — the `/dev` node not
    /// deleted or replaced. Renames do not count (the name is not compared).
    fn check(&self, roots: &Roots, node: bool) -> Result<(), String> {
        let dir = roots.class_dir(&self.uverbs);
        let dev = match read_small(&dir.join("dev")) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!("{} is gone from sysfs", self.uverbs))
            }
            Err(_) => return Ok(()),
        };
        if parse_dev(&dev) != Some(self.rdev) {
            return Err(format!(
                "{} has device number {} now",
                self.uverbs,
                dev.trim()
            ));
        }
        let ino = self.sysfs_ino.load(Ordering::Acquire);
        if ino != 0 {
            match stat(&dir) {
                Ok(st) if st.st_ino == ino => {}
                _ => return Err(format!("{} was re-created in sysfs", self.uverbs)),
            }
        }
        if node {
            self.check_node()?;
        }
        Ok(())
    }

    /// The `/dev` node: gone, or another inode, is a removal. (A node that never lived in a
    /// devtmpfs — a container's static copy — keeps its inode: then this sees nothing.)
    fn check_node(&self) -> Result<(), String> {
        let path = &self.node_path;
        match stat(path) {
            Ok(st) if same_node(&st, self.node) => Ok(()),
            Ok(_) => Err(format!("{} was re-created", path.display())),
            Err(Errno::NOENT) => Err(format!("{} was deleted", path.display())),
            // Cannot look (permissions): no evidence either way.
            Err(_) => Ok(()),
        }
    }
}

/// Reads a short sysfs file (a number, a name) through a stack buffer. `read_to_string` would
/// size a heap buffer by the 4 KiB sysfs reports for every attribute: on every context open,
/// that churn made musl's allocator map and unmap a region, and the process's mappings drift.
fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut buf = [0u8; 128];
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn same_node(st: &Stat, node: (u64, u64)) -> bool {
    (st.st_dev, st.st_ino) == node
}

/// Parses sysfs `dev`, `MAJOR:MINOR`, into a `dev_t`.
fn parse_dev(s: &str) -> Option<u64> {
    let (ma, mi) = s.trim().split_once(':')?;
    Some(rustix::fs::makedev(ma.parse().ok()?, mi.parse().ok()?))
}

/// A kernel uevent reporting that a uverbs character device was removed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UverbsRemove {
    pub(crate) uverbs: String,
    pub(crate) rdev: Option<u64>,
    pub(crate) seqnum: u64,
}

/// Parses a kernel uevent (`ACTION@DEVPATH\0KEY=VALUE\0...`); `Some` only for the removal of
/// an `infiniband_verbs` device.
pub(crate) fn parse_uevent(msg: &[u8]) -> Option<UverbsRemove> {
    let mut fields = msg.split(|&b| b == 0).filter(|f| !f.is_empty());
    let head = fields.next()?;
    if !head.starts_with(b"remove@") {
        return None;
    }
    let (mut action, mut subsystem, mut devpath) = (None, None, None);
    let (mut major, mut minor, mut seqnum) = (None::<u32>, None::<u32>, None::<u64>);
    for f in fields {
        let s = std::str::from_utf8(f).ok()?;
        let (k, v) = s.split_once('=')?;
        match k {
            "ACTION" => action = Some(v),
            "SUBSYSTEM" => subsystem = Some(v),
            "DEVPATH" => devpath = Some(v),
            "MAJOR" => major = v.parse().ok(),
            "MINOR" => minor = v.parse().ok(),
            "SEQNUM" => seqnum = v.parse().ok(),
            _ => {}
        }
    }
    if action != Some("remove") || subsystem != Some("infiniband_verbs") {
        return None;
    }
    let uverbs = devpath?.rsplit('/').next()?;
    if !uverbs.starts_with("uverbs") {
        return None;
    }
    Some(UverbsRemove {
        uverbs: uverbs.to_string(),
        rdev: major.zip(minor).map(|(a, b)| rustix::fs::makedev(a, b)),
        seqnum: seqnum?,
    })
}

// ---------------------------------------------------------------------------------------------
// The watcher: one thread per process, started with the first watched context. It holds its
// fds (uevent socket, inotify, a stop eventfd) only while watched contexts exist: with the
// last one gone they are closed before that context's drop returns, and the thread parks with
// no fd until the next context. It is not stopped and restarted each time: under musl a new
// thread stack per context moved other mappings around (the soak test saw the process's
// mapping count drift), while one parked thread keeps one stack mapped for good.

struct Watched {
    id: Identity,
    state: Arc<State>,
}

/// What watches during one active period (from a first watched context to the last).
struct Active {
    gen: u64,
    sources: Sources,
    /// Readable when the period ends.
    stop: OwnedFd,
    watch: RemovalWatch,
}

struct Registry {
    watched: Vec<Arc<Watched>>,
    active: Option<Arc<Active>>,
    /// The process the thread runs in (a forked child has no thread: it starts afresh).
    pid: Option<rustix::process::Pid>,
    thread: bool,
    next_gen: u64,
    /// The last period whose `Active` the thread let go of.
    released: u64,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    watched: Vec::new(),
    active: None,
    pid: None,
    thread: false,
    next_gen: 0,
    released: 0,
});

/// Signalled when a period starts (the thread wakes) or the thread lets one go.
static CHANGED: std::sync::Condvar = std::sync::Condvar::new();

fn registry() -> MutexGuard<'static, Registry> {
    let mut reg = lock(&REGISTRY);
    let me = rustix::process::getpid();
    if reg.pid != Some(me) {
        // First use, or a forked child: the thread (if any) is the parent's.
        *reg = Registry {
            watched: Vec::new(),
            active: None,
            pid: Some(me),
            thread: false,
            next_gen: reg.next_gen,
            released: reg.next_gen,
        };
    }
    reg
}

/// A context's place in the watcher; unregisters when the context is dropped.
pub(crate) struct Registration {
    watched: Arc<Watched>,
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Registration({})", self.watched.id.uverbs)
    }
}

impl Registration {
    /// Starts watching `id` for `state` (opening the watcher's fds, and starting its thread,
    /// if this is the first watched context).
    pub(crate) fn new(id: Identity, state: Arc<State>) -> Registration {
        let watched = Arc::new(Watched { id, state });
        let mut reg = registry();
        if reg.active.is_none() {
            reg.next_gen += 1;
            let gen = reg.next_gen;
            reg.active = activate(gen).map(Arc::new);
            if reg.active.is_some() && !reg.thread {
                let spawned = std::thread::Builder::new()
                    .name("uverbs-removal".into())
                    .stack_size(64 * 1024)
                    .spawn(run);
                reg.thread = spawned.is_ok();
                if !reg.thread {
                    reg.active = None;
                }
            }
            CHANGED.notify_all();
        }
        let watch = reg.active.as_ref().map(|a| a.watch).unwrap_or_default();
        *lock(&watched.state.watch) = watch;
        reg.watched.push(watched.clone());
        Registration { watched }
    }

    pub(crate) fn identity(&self) -> &Identity {
        &self.watched.id
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut reg = registry();
        reg.watched.retain(|w| !Arc::ptr_eq(w, &self.watched));
        if !reg.watched.is_empty() {
            return;
        }
        let Some(active) = reg.active.take() else {
            return;
        };
        let gen = active.gen;
        let _ = rustix::io::write(&active.stop, &1u64.to_ne_bytes());
        // Under the lock the count is exact: 1 means the thread never took this period.
        let thread_holds = Arc::strong_count(&active) > 1;
        drop(active);
        // The thread drops the last reference (closing the fds) and says so: the last
        // context's drop returns with the watcher's fds closed.
        while thread_holds && reg.thread && reg.released < gen {
            reg = CHANGED.wait(reg).unwrap_or_else(|e| e.into_inner());
        }
    }
}

struct Sources {
    uevent: Option<OwnedFd>,
    inotify: Option<OwnedFd>,
    sysfs: bool,
}

fn enabled(name: &str) -> bool {
    match std::env::var("UVERBS_REMOVAL_DETECT") {
        Ok(v) => v.split(',').any(|s| s.trim() == name),
        Err(_) => true,
    }
}

fn uevent_socket() -> Option<OwnedFd> {
    use rustix::net::netlink::{SocketAddrNetlink, KOBJECT_UEVENT};
    use rustix::net::{bind, socket_with, AddressFamily, SocketFlags, SocketType};
    let fd = socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        Some(KOBJECT_UEVENT),
    )
    .ok()?;
    // Group 1: the kernel's uevents (udev re-broadcasts on group 2; we do not want those).
    bind(&fd, &SocketAddrNetlink::new(0, 1)).ok()?;
    // Room for a burst of uevents; on overflow (ENOBUFS) every context is checked instead.
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&fd, 256 * 1024);
    Some(fd)
}

fn inotify_fd(roots: &Roots) -> Option<OwnedFd> {
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
    inotify::add_watch(
        &fd,
        &roots.dev,
        inotify::WatchFlags::DELETE
            | inotify::WatchFlags::CREATE
            | inotify::WatchFlags::MOVED_FROM
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::DELETE_SELF,
    )
    .ok()?;
    Some(fd)
}

fn activate(gen: u64) -> Option<Active> {
    let roots = Roots::system();
    let sources = Sources {
        uevent: enabled("uevent").then(uevent_socket).flatten(),
        inotify: enabled("devnode").then(|| inotify_fd(&roots)).flatten(),
        sysfs: enabled("sysfs"),
    };
    let watch = RemovalWatch {
        uevent: sources.uevent.is_some(),
        dev_node: sources.inotify.is_some(),
        sysfs: sources.sysfs,
    };
    let stop = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).ok()?;
    Some(Active {
        gen,
        sources,
        stop,
        watch,
    })
}

/// The thread: waits for a period, watches through it, lets it go, and so on.
fn run() {
    let roots = Roots::system();
    loop {
        let active = {
            let mut reg = lock(&REGISTRY);
            loop {
                if let Some(a) = &reg.active {
                    break a.clone();
                }
                reg = CHANGED.wait(reg).unwrap_or_else(|e| e.into_inner());
            }
        };
        watch(&active, &roots);
        let gen = active.gen;
        drop(active);
        let mut reg = lock(&REGISTRY);
        reg.released = reg.released.max(gen);
        CHANGED.notify_all();
    }
}

const SYSFS_PERIOD: Duration = Duration::from_secs(1);

/// Watches until `active.stop` is readable.
fn watch(active: &Active, roots: &Roots) {
    let (sources, stop) = (&active.sources, &active.stop);
    let mut buf = [0u8; 8 * 1024];
    let ts = Timespec {
        tv_sec: SYSFS_PERIOD.as_secs() as i64,
        tv_nsec: 0,
    };
    let mut last_sysfs = std::time::Instant::now();
    loop {
        let mut fds = vec![PollFd::new(stop, PollFlags::IN)];
        if let Some(u) = &sources.uevent {
            fds.push(PollFd::new(u, PollFlags::IN));
        }
        if let Some(i) = &sources.inotify {
            fds.push(PollFd::new(i, PollFlags::IN));
        }
        let timeout = sources.sysfs.then_some(&ts);
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(_) => {
                std::thread::sleep(SYSFS_PERIOD);
                continue;
            }
        }
        let ready: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
        drop(fds);
        if ready[0] {
            return;
        }
        let mut idx = 1;
        let mut removes = Vec::new();
        let mut check_all = false;
        let mut node_names: Vec<String> = Vec::new();
        if let Some(u) = &sources.uevent {
            if ready[idx] {
                check_all |= drain_uevents(u, &mut buf, &mut removes);
            }
            idx += 1;
        }
        if let Some(i) = &sources.inotify {
            if ready[idx] {
                check_all |= drain_inotify(i, &mut node_names);
            }
        }
        let periodic = last_sysfs.elapsed() >= SYSFS_PERIOD;
        if periodic {
            last_sysfs = std::time::Instant::now();
        }
        let reg = lock(&REGISTRY);
        for w in &reg.watched {
            if w.state.is_removed() {
                continue;
            }
            let id = &w.id;
            if removes.iter().any(|r| {
                r.uverbs == id.uverbs && r.rdev.is_none_or(|d| d == id.rdev) && r.seqnum > id.seqnum
            }) {
                w.state.mark(RemovalSource::Uevent);
            } else if (node_names.contains(&id.uverbs) || check_all) && id.check_node().is_err() {
                w.state.mark(RemovalSource::DevNode);
            }
            if !w.state.is_removed()
                && sources.sysfs
                && (periodic || check_all)
                && id.check(roots, false).is_err()
            {
                w.state.mark(RemovalSource::Sysfs);
            }
        }
    }
}

/// Reads every queued uevent; collects uverbs removals sent by the kernel. Returns whether
/// events were lost (then every context is checked).
fn drain_uevents(fd: &OwnedFd, buf: &mut [u8], out: &mut Vec<UverbsRemove>) -> bool {
    use rustix::net::netlink::SocketAddrNetlink;
    use rustix::net::{recvfrom, RecvFlags};
    let mut lost = false;
    loop {
        match recvfrom(fd, &mut *buf, RecvFlags::DONTWAIT) {
            Ok((n, _, from)) => {
                // Only the kernel (port id 0) sends on group 1; a user process would need
                // CAP_NET_ADMIN, but check anyway.
                let kernel = from
                    .and_then(|a| SocketAddrNetlink::try_from(a).ok())
                    .is_some_and(|a| a.pid() == 0);
                if kernel {
                    if let Some(r) = parse_uevent(&buf[..n]) {
                        out.push(r);
                    }
                }
            }
            Err(Errno::INTR) => continue,
            Err(Errno::NOBUFS) => lost = true,
            Err(_) => return lost,
        }
    }
}

/// Reads every queued inotify event; collects the names they are about. Returns whether
/// events were lost or the directory itself went away (then every context is checked).
fn drain_inotify(fd: &OwnedFd, out: &mut Vec<String>) -> bool {
    let mut lost = false;
    let mut raw = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut reader = inotify::Reader::new(fd, &mut raw);
    loop {
        match reader.next() {
            Ok(ev) => {
                let flags = ev.events();
                if flags.intersects(
                    inotify::ReadFlags::QUEUE_OVERFLOW
                        | inotify::ReadFlags::DELETE_SELF
                        | inotify::ReadFlags::IGNORED,
                ) {
                    lost = true;
                }
                if let Some(name) = ev.file_name() {
                    out.push(name.to_string_lossy().into_owned());
                }
            }
            Err(Errno::INTR) => continue,
            Err(_) => return lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uevent(parts: &[&str]) -> Vec<u8> {
        let mut v = Vec::new();
        for p in parts {
            v.extend_from_slice(p.as_bytes());
            v.push(0);
        }
        v
    }

    #[test]
    fn uverbs_remove_uevents_are_parsed_and_others_ignored() {
        let msg = uevent(&[
            "remove@/devices/virtual/infiniband_verbs/uverbs0",
            "ACTION=remove",
            "DEVPATH=/devices/virtual/infiniband_verbs/uverbs0",
            "SUBSYSTEM=infiniband_verbs",
            "MAJOR=231",
            "MINOR=192",
            "DEVNAME=infiniband/uverbs0",
            "SEQNUM=2417",
        ]);
        assert_eq!(
            parse_uevent(&msg),
            Some(UverbsRemove {
                uverbs: "uverbs0".into(),
                rdev: Some(rustix::fs::makedev(231, 192)),
                seqnum: 2417,
            })
        );
        // An add, another subsystem, a missing sequence number, garbage: nothing.
        let add = uevent(&[
            "add@/devices/virtual/infiniband_verbs/uverbs0",
            "ACTION=add",
            "DEVPATH=/devices/virtual/infiniband_verbs/uverbs0",
            "SUBSYSTEM=infiniband_verbs",
            "SEQNUM=2418",
        ]);
        assert_eq!(parse_uevent(&add), None);
        let ib = uevent(&[
            "remove@/devices/virtual/infiniband/rxe0",
            "ACTION=remove",
            "DEVPATH=/devices/virtual/infiniband/rxe0",
            "SUBSYSTEM=infiniband",
            "SEQNUM=2419",
        ]);
        assert_eq!(parse_uevent(&ib), None);
        let noseq = uevent(&[
            "remove@/devices/virtual/infiniband_verbs/uverbs0",
            "ACTION=remove",
            "DEVPATH=/devices/virtual/infiniband_verbs/uverbs0",
            "SUBSYSTEM=infiniband_verbs",
        ]);
        assert_eq!(parse_uevent(&noseq), None);
        assert_eq!(parse_uevent(b"\xff\xfe\0\0"), None);
        assert_eq!(parse_uevent(b""), None);
        // udev's own messages (group 2) start with "libudev": never a kernel uevent.
        assert_eq!(parse_uevent(b"libudev\0\xfe\xed\xca\xfe"), None);
    }

    #[test]
    fn device_numbers_parse() {
        assert_eq!(parse_dev("231:192\n"), Some(rustix::fs::makedev(231, 192)));
        assert_eq!(parse_dev("231"), None);
        assert_eq!(parse_dev("x:1"), None);
    }

    /// A fake /sys and /dev/infiniband with `uverbs0` of `rxe0`; the "node" is a regular file
    /// (its inode is what the identity compares).
    fn tree() -> (tempfile::TempDir, Roots) {
        let t = tempfile::tempdir().unwrap();
        let roots = Roots {
            sys: t.path().join("sys"),
            dev: t.path().join("dev"),
        };
        add(&roots, "uverbs0", "rxe0", "231:192");
        std::fs::write(roots.sys.join("kernel/uevent_seqnum"), "100\n").unwrap();
        (t, roots)
    }

    fn add(roots: &Roots, uverbs: &str, ibdev: &str, dev: &str) {
        let d = roots.class_dir(uverbs);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::create_dir_all(roots.sys.join("kernel")).unwrap();
        std::fs::create_dir_all(&roots.dev).unwrap();
        std::fs::write(d.join("ibdev"), format!("{ibdev}\n")).unwrap();
        std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
        std::fs::write(roots.dev.join(uverbs), b"").unwrap();
    }

    fn identity(roots: &Roots, ibdev: &str) -> Identity {
        let f = std::fs::File::open(roots.dev.join("uverbs0")).unwrap();
        let node = roots.dev.join("uverbs0");
        let mut id = Identity::of(f.as_fd(), "uverbs0", ibdev, &node, roots).unwrap();
        // A regular file has no st_rdev: stand in the device number sysfs shows.
        id.rdev = rustix::fs::makedev(231, 192);
        id
    }

    #[test]
    fn identity_tells_the_opened_device_from_a_re_added_one() {
        let (_t, roots) = tree();
        let id = identity(&roots, "rxe0");
        assert_eq!(id.seqnum, 100);
        id.check_at_open(&roots).unwrap();
        id.check(&roots, true).unwrap();
        // A stale Device: uverbs0 is another device now.
        let other = identity(&roots, "rxe1");
        assert!(other
            .check_at_open(&roots)
            .unwrap_err()
            .contains("now belongs to device rxe0"));
        // Removed, then re-added under the same name, uverbsN and device number: the sysfs
        // directory and the node are new inodes, so the old identity sees a removal...
        // (The new entries are made before the old ones go, as the kernel's are new inodes;
        // a host filesystem could otherwise hand the freed inode numbers straight back.)
        add(&roots, "uverbs0.new", "rxe0", "231:192");
        std::fs::remove_dir_all(roots.class_dir("uverbs0")).unwrap();
        std::fs::remove_file(roots.dev.join("uverbs0")).unwrap();
        assert!(id
            .check(&roots, false)
            .unwrap_err()
            .contains("gone from sysfs"));
        assert!(id.check_node().unwrap_err().contains("deleted"));
        let (class, dev) = (roots.class_dir("uverbs0"), roots.dev.join("uverbs0"));
        std::fs::rename(roots.class_dir("uverbs0.new"), &class).unwrap();
        std::fs::rename(roots.dev.join("uverbs0.new"), &dev).unwrap();
        assert!(id.check(&roots, false).unwrap_err().contains("re-created"));
        assert!(id.check_node().unwrap_err().contains("re-created"));
        // ...and a context opened on the new one sees it present.
        let new = identity(&roots, "rxe0");
        new.check_at_open(&roots).unwrap();
        new.check(&roots, true).unwrap();
        // Another device number under the same name is a removal too.
        std::fs::write(roots.class_dir("uverbs0").join("dev"), "231:193\n").unwrap();
        assert!(new
            .check(&roots, false)
            .unwrap_err()
            .contains("device number"));
    }

    #[test]
    fn state_hands_out_the_event_once_and_wakes() {
        let s = State::new(true);
        assert!(!s.is_removed());
        assert!(!s.take_event());
        let wake = s.wake_fd().unwrap();
        let mut fds = [PollFd::new(&wake, PollFlags::IN)];
        assert_eq!(poll(&mut fds, Some(&Timespec::default())).unwrap(), 0);
        assert!(s.mark(RemovalSource::Uevent));
        assert!(
            !s.mark(RemovalSource::Sysfs),
            "only the first source counts"
        );
        assert_eq!(s.source(), Some(RemovalSource::Uevent));
        let mut fds = [PollFd::new(&wake, PollFlags::IN)];
        assert_eq!(poll(&mut fds, Some(&Timespec::default())).unwrap(), 1);
        assert!(s.pending_wake_fd().is_some());
        assert!(s.take_event());
        assert!(!s.take_event(), "handed out once");
        assert!(s.pending_wake_fd().is_none());
        // DEVICE_FATAL read first: our own event would repeat it.
        let s = State::new(false);
        s.fatal_delivered();
        assert!(s.is_removed());
        assert!(!s.take_event());
    }

    #[test]
    fn destroys_are_recognised() {
        assert!(is_destroy_ioctl(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY));
        assert!(is_destroy_ioctl(UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY));
        assert!(!is_destroy_ioctl(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE));
        assert!(!is_destroy_ioctl(
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_QUERY_PORT
        ));
        let c = WriteCmd::legacy(IB_USER_VERBS_CMD_DEALLOC_PD, &[0u32; 2], &[], 0, 0).unwrap();
        assert!(is_destroy_write(&c));
        let c = WriteCmd::legacy(IB_USER_VERBS_CMD_ALLOC_PD, &[0u32; 2], &[], 8, 0).unwrap();
        assert!(!is_destroy_write(&c));
    }

    /// A channel that answers GET_CONTEXT and CREATE_COMP_CHANNEL with fresh eventfds (quiet
    /// async and completion fds) and nothing else: enough for the waits.
    #[derive(Debug)]
    struct Quiet;

    // SAFETY: the only fd numbers written are of eventfds made in that very call and given up
    // (`into_raw_fd`) as their number is written; there is no doorbell fd.
    #[allow(unsafe_code)]
    unsafe impl Channel for Quiet {
        fn ioctl(&self, _: &mut IoctlCmd<'_>) -> Result<(), Errno> {
            Err(Errno::PROTONOSUPPORT)
        }
        fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
            use std::os::fd::IntoRawFd;
            let fresh = || -> Result<[u8; 4], Errno> {
                let fd = eventfd(0, EventfdFlags::CLOEXEC)?;
                Ok((fd.into_raw_fd() as u32).to_ne_bytes())
            };
            match cmd.command() {
                IB_USER_VERBS_CMD_GET_CONTEXT => {
                    let fd = fresh()?;
                    cmd.response_mut()[..4].copy_from_slice(&fd);
                    cmd.response_mut()[4..8].copy_from_slice(&1u32.to_ne_bytes());
                }
                IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL => {
                    let fd = fresh()?;
                    cmd.response_mut()[..4].copy_from_slice(&fd);
                }
                _ => return Err(Errno::PROTONOSUPPORT),
            }
            Ok(())
        }
        fn driver_id(&self) -> u32 {
            uverbs_uapi::ioctl::RDMA_DRIVER_RXE
        }
    }

    /// A context as `Context::open` makes one (with a wake fd), over [`Quiet`]; the test marks
    /// the removal itself, as the watcher would.
    fn watched_context() -> (crate::Context, Arc<State>) {
        let state = State::new(true);
        let dev = crate::Device::synthetic("rxe9", crate::Driver::Rxe, 1);
        let ctx = crate::Context::build(dev, Box::new(Quiet), state.clone(), None).unwrap();
        (ctx, state)
    }

    #[test]
    fn blocking_waits_wake_for_the_removal() {
        use crate::{AsyncElement, AsyncEventType};
        let (ctx, state) = watched_context();
        let ch = ctx.create_comp_channel().unwrap();
        ch.note_armed(); // as req_notify on a CQ of this channel would
        let e = ctx
            .get_async_event(Some(Duration::from_millis(20)))
            .unwrap_err();
        assert!(e.is(Errno::TIMEDOUT), "{e}");
        let (events, cq_events) = {
            let (c1, c2) = (ctx.clone(), ch.clone());
            (
                std::thread::spawn(move || c1.get_async_event(Some(Duration::from_secs(20)))),
                std::thread::spawn(move || c2.get_cq_event(Some(Duration::from_secs(20)))),
            )
        };
        std::thread::sleep(Duration::from_millis(50));
        let t = std::time::Instant::now();
        assert!(!ctx.is_device_removed());
        state.mark(RemovalSource::Uevent);
        assert!(ctx.is_device_removed());
        let ev = events.join().unwrap().expect("the async event wait wakes");
        assert_eq!(ev.event_type, AsyncEventType::DEVICE_REMOVED);
        assert_eq!(ev.element, AsyncElement::Device);
        let e = cq_events.join().unwrap().unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(e.is_device_removed() && e.is(Errno::NODEV), "{e}");
        assert!(e.to_string().contains("device rxe9 was removed"), "{e}");
        assert_eq!(ctx.removal_source(), Some(RemovalSource::Uevent));
        // Once: the next wait times out instead of spinning on the readable wake fd.
        let e = ctx
            .get_async_event(Some(Duration::from_millis(20)))
            .unwrap_err();
        assert!(e.is(Errno::TIMEDOUT), "{e}");
        // A completion wait after the removal fails at once.
        let e = ch.get_cq_event(Some(Duration::from_secs(20))).unwrap_err();
        assert!(e.is_device_removed(), "{e}");
    }

    #[cfg(feature = "tokio")]
    #[test]
    fn the_tokio_stream_and_channel_wake_for_the_removal() {
        use crate::AsyncEventType;
        let rt = ::tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let (ctx, state) = watched_context();
            let mut events = ctx.async_events().unwrap();
            let ch = ctx.create_comp_channel().unwrap();
            ch.note_armed();
            let ch = ch.into_async().unwrap();
            let marker = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                state.mark(RemovalSource::DevNode);
            });
            let ev = ::tokio::time::timeout(Duration::from_secs(20), events.next())
                .await
                .expect("the stream wakes")
                .unwrap();
            assert_eq!(ev.event_type, AsyncEventType::DEVICE_REMOVED);
            let e = ::tokio::time::timeout(Duration::from_secs(20), ch.get_cq_event())
                .await
                .expect("the channel wakes")
                .unwrap_err();
            assert!(e.is_device_removed(), "{e}");
            marker.join().unwrap();
            // Given once: the stream then waits for the kernel's events only.
            let r = ::tokio::time::timeout(Duration::from_millis(100), events.next()).await;
            assert!(r.is_err(), "DEVICE_REMOVED twice: {r:?}");
        });
    }
}
