//! Shared pieces of the uverbs fuzz targets.
//!
//! * [`Input`]: reads numbers and byte runs from the fuzzer's input, yielding zeros once it is
//!   used up, so every target is a total function of its input.
//! * [`HostileKernel`]: a [`Channel`] that answers every command the way a buggy or malicious
//!   kernel could: an arbitrary errno, or success with every response byte taken from the input
//!   (short, long, nonsense counts, indices, sizes and handles), and every mmap backed by
//!   memory filled from the input. The only thing it keeps honest is what the `Channel`
//!   contract (its `Safety` section) makes uverbs rely on: file descriptors. The async event fd
//!   and completion channel fds it returns are real pipes made for the call (their event
//!   records come from the input), the ioctl methods that return an fd are refused, and the
//!   doorbell fd is its own `/dev/null`, open for as long as it lives.
//! * [`check_error`]: the "typed, clearly worded error" property every target asserts.
#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::sync::Mutex;

use uverbs::channel::{anonymous, AttrKind, Channel, IoctlCmd, MapKind, Mapping, WriteCmd};
use uverbs::Errno;
use uverbs_uapi::cmds::{
    UVERBS_METHOD_ASYNC_EVENT_ALLOC, UVERBS_METHOD_DMABUF_ALLOC, UVERBS_OBJECT_ASYNC_EVENT,
    UVERBS_OBJECT_DMABUF,
};
use uverbs_uapi::write::{
    IB_USER_VERBS_CMD_CLOSE_XRCD, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL,
    IB_USER_VERBS_CMD_DEALLOC_MW, IB_USER_VERBS_CMD_DEALLOC_PD, IB_USER_VERBS_CMD_DEREG_MR,
    IB_USER_VERBS_CMD_DESTROY_AH, IB_USER_VERBS_CMD_DESTROY_CQ, IB_USER_VERBS_CMD_DESTROY_QP,
    IB_USER_VERBS_CMD_DESTROY_SRQ, IB_USER_VERBS_CMD_GET_CONTEXT, IB_USER_VERBS_CMD_POST_SEND,
};

/// A cursor over the fuzzer's bytes; reads past the end give zeros.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }
    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }
    /// Up to `n` bytes (fewer at the end of the input).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let end = self.pos.saturating_add(n).min(self.data.len());
        let s = &self.data[self.pos.min(end)..end];
        self.pos = end;
        s
    }
    /// One byte.
    pub fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }
    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        let mut b = [0u8; 2];
        let s = self.take(2);
        b[..s.len()].copy_from_slice(s);
        u16::from_le_bytes(b)
    }
    /// A little-endian u32.
    pub fn u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        let s = self.take(4);
        b[..s.len()].copy_from_slice(s);
        u32::from_le_bytes(b)
    }
    /// A little-endian u64.
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        let s = self.take(8);
        b[..s.len()].copy_from_slice(s);
        u64::from_le_bytes(b)
    }
    /// A boolean.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u32) -> u32 {
        if n == 0 {
            0
        } else {
            self.u32() % n
        }
    }
    /// A "size-like" number: usually small, sometimes an edge value, sometimes anything.
    pub fn size(&mut self) -> u32 {
        match self.u8() % 8 {
            0 => 0,
            1 => 1,
            2 => u32::MAX,
            3 => 1 << self.below(32),
            4 => (1u32 << self.below(32)).wrapping_sub(1),
            5 => self.u32(),
            _ => u32::from(self.u8()),
        }
    }
}

/// Errnos a kernel answers verbs commands with, including the "method missing" ones that make
/// uverbs fall back to older commands or sysfs.
pub const ERRNOS: [Errno; 12] = [
    Errno::INVAL,
    Errno::NOMEM,
    Errno::OPNOTSUPP,
    Errno::PROTONOSUPPORT,
    Errno::NOTTY,
    Errno::NOSYS,
    Errno::BUSY,
    Errno::IO,
    Errno::NOENT,
    Errno::FAULT,
    Errno::AGAIN,
    Errno::PERM,
];

/// Largest mapping the hostile kernel hands out (a real kernel refuses a size that does not
/// match the object; uverbs must then fail cleanly, which the errno path covers).
pub const MAX_MAP: usize = 1 << 20;

/// How the hostile kernel treats ioctls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoctlMode {
    /// Every ioctl fails with `EOPNOTSUPP`, as on a kernel without the method: uverbs falls
    /// back to write commands (and sysfs), whose responses are then all hostile.
    Missing,
    /// Ioctls answer with an arbitrary errno or with hostile output attributes.
    Hostile,
}

/// A [`Channel`] whose every answer comes from the fuzzer's input.
#[derive(Debug)]
pub struct HostileKernel {
    input: Mutex<(Vec<u8>, usize)>,
    ioctl: IoctlMode,
    driver_id: u32,
    doorbell: OwnedFd,
}

impl HostileKernel {
    /// A hostile kernel answering from `data`, for a device of driver `driver_id`.
    pub fn new(data: &[u8], ioctl: IoctlMode, driver_id: u32) -> Self {
        let doorbell = rustix::fs::open(
            "/dev/null",
            rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .expect("open /dev/null for the doorbell fd");
        HostileKernel {
            input: Mutex::new((data.to_vec(), 0)),
            ioctl,
            driver_id,
            doorbell,
        }
    }

    /// Runs `f` over the unread input and advances past what it read.
    pub fn with_input<R>(&self, f: impl FnOnce(&mut Input<'_>) -> R) -> R {
        let mut g = self.input.lock().unwrap_or_else(|p| p.into_inner());
        let (data, pos) = &mut *g;
        let mut inp = Input::new(&data[*pos..]);
        let r = f(&mut inp);
        *pos += inp.pos;
        r
    }

    /// An outcome: `None` = success, else an errno. Mostly success so responses get decoded.
    fn outcome(inp: &mut Input<'_>) -> Option<Errno> {
        let b = inp.u8();
        (b % 8 == 7).then(|| ERRNOS[usize::from(b / 8) % ERRNOS.len()])
    }
}

/// Whether an ioctl method returns a new fd (an attribute declared `UVERBS_ATTR_FD` with
/// `UVERBS_ACCESS_NEW`): the hostile kernel answers those as a kernel without them would, since
/// the fd it hands over must be real (the `Channel` contract) and uverbs uses neither.
fn returns_fd(object: u16, method: u16) -> bool {
    matches!(
        (object, method),
        (UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC)
            | (UVERBS_OBJECT_DMABUF, UVERBS_METHOD_DMABUF_ALLOC)
    )
}

/// A pipe whose read end holds `bytes` and whose write end is closed (so a read after them
/// sees end-of-file), standing in for an event fd the kernel creates.
pub fn event_fd_with(bytes: &[u8]) -> OwnedFd {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe");
    // A pipe holds 64 KiB; event records are a few bytes each.
    let bytes = &bytes[..bytes.len().min(4096)];
    let mut done = 0;
    while done < bytes.len() {
        match rustix::io::write(&w, &bytes[done..]) {
            Ok(n) => done += n,
            Err(_) => break,
        }
    }
    drop(w);
    r
}

// SAFETY: (1) the fd numbers it writes where a command returns a new fd — GET_CONTEXT's
// `async_fd`, CREATE_COMP_CHANNEL's `fd`, the first 4 bytes of their responses — are pipes made by
// `event_fd_with` in that call and given up (`into_raw_fd`) as the number is written, over
// whatever the input put there; the ioctl methods that return a new fd are refused before any
// output is written (`returns_fd`), and on other methods it sets only IDR-new data, which is a
// handle by the ABI. (2) `doorbell_fd` is `self.doorbell`, closed only when it drops.
unsafe impl Channel for HostileKernel {
    fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        if self.ioctl == IoctlMode::Missing || returns_fd(cmd.object_id(), cmd.method_id()) {
            return Err(Errno::OPNOTSUPP);
        }
        self.with_input(|inp| {
            if let Some(e) = Self::outcome(inp) {
                return Err(e);
            }
            let outs: Vec<(u16, AttrKind, usize)> =
                cmd.attrs().map(|a| (a.id(), a.kind(), a.len())).collect();
            for (id, kind, len) in outs {
                let Some(mut a) = cmd.attr_mut(id) else {
                    continue;
                };
                match kind {
                    // The kernel may write less than the buffer, or skip it (no VALID flag).
                    AttrKind::PtrOut if inp.u8() % 8 != 0 => {
                        let n = match inp.u8() % 4 {
                            0 => inp.below(len as u32 + 1) as usize,
                            _ => len,
                        };
                        let _ = a.write_output(inp.take(n));
                    }
                    // New object handles are opaque numbers (a method that returns a new fd
                    // never gets here, whatever kind the caller gave its attribute).
                    AttrKind::IdrNew => {
                        let _ = a.set_new(u64::from(inp.u32()));
                    }
                    _ => {}
                }
            }
            Ok(())
        })
    }

    fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
        let command = cmd.command();
        self.with_input(|inp| {
            let destroy = matches!(
                command,
                IB_USER_VERBS_CMD_DEALLOC_PD
                    | IB_USER_VERBS_CMD_DEREG_MR
                    | IB_USER_VERBS_CMD_DESTROY_CQ
                    | IB_USER_VERBS_CMD_DESTROY_QP
                    | IB_USER_VERBS_CMD_DESTROY_SRQ
                    | IB_USER_VERBS_CMD_DESTROY_AH
                    | IB_USER_VERBS_CMD_DEALLOC_MW
                    | IB_USER_VERBS_CMD_CLOSE_XRCD
            );
            if destroy || (command == IB_USER_VERBS_CMD_POST_SEND && !cmd.is_extended()) {
                // Destroys and the rxe doorbell mostly succeed (a failing destroy is reported on
                // stderr; keep the noise down), but sometimes do not.
                if inp.u16() == 0xdead {
                    return Err(Errno::INVAL);
                }
                let n = cmd.response_mut().len();
                let b = inp.take(n).to_vec();
                cmd.response_mut()[..b.len()].copy_from_slice(&b);
                return Ok(());
            }
            if let Some(e) = Self::outcome(inp) {
                return Err(e);
            }
            let n = cmd.response_mut().len();
            let b = inp.take(n).to_vec();
            cmd.response_mut()[..b.len()].copy_from_slice(&b);
            let n = cmd.driver_response_mut().len();
            let b = inp.take(n).to_vec();
            cmd.driver_response_mut()[..b.len()].copy_from_slice(&b);
            // The one thing kept honest: fds the kernel installs for the caller to own. Their
            // contents (event records) are hostile.
            if !cmd.is_extended()
                && matches!(
                    command,
                    IB_USER_VERBS_CMD_GET_CONTEXT | IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL
                )
                && cmd.response_mut().len() >= 4
            {
                let len = usize::from(inp.u8()) * 4;
                let fd = event_fd_with(inp.take(len)).into_raw_fd() as u32;
                cmd.response_mut()[..4].copy_from_slice(&fd.to_ne_bytes());
            }
            Ok(())
        })
    }

    fn mmap(&self, _offset: u64, len: usize, _kind: MapKind) -> Result<Mapping, Errno> {
        if len == 0 || len > MAX_MAP {
            return Err(Errno::INVAL);
        }
        self.with_input(|inp| {
            if let Some(e) = Self::outcome(inp) {
                return Err(e);
            }
            let m = anonymous(len).map_err(|_| Errno::NOMEM)?;
            let fill = inp.take(len.min(8192));
            // SAFETY: `m` is a fresh private mapping of `len >= fill.len()` bytes that nothing
            // else refers to yet.
            unsafe {
                std::ptr::copy_nonoverlapping(fill.as_ptr(), m.as_ptr().as_ptr(), fill.len())
            };
            Ok(m)
        })
    }

    fn doorbell_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.doorbell.as_fd())
    }

    fn driver_id(&self) -> u32 {
        self.driver_id
    }
}

/// Posts `wrs` to an rxe receive queue as one list and checks what a list post promises
/// whatever it refuses: a refusal names a WR of the list, its message formats, and the queue
/// is published (nothing pending). Returns how many WRs were posted.
pub fn post_recv_list_checked(
    rq: &mut uverbs_rxe::RecvQueue,
    wrs: &[uverbs_wr::RecvWr<'_>],
) -> usize {
    let posted = match rq.post_list(wrs) {
        Ok(()) => wrs.len(),
        Err(e) => {
            let _ = e.to_string();
            assert!(e.index < wrs.len());
            e.index
        }
    };
    assert_eq!(rq.pending(), 0, "post_list publishes");
    posted
}

/// The property every target asserts about an error: it names the operation and the object
/// and says something (never an empty message), and formatting it does not panic.
pub fn check_error(e: &uverbs::Error) {
    assert!(!e.op().is_empty(), "error without an operation: {e:?}");
    assert!(!e.object().is_empty(), "error without an object: {e:?}");
    let text = e.to_string();
    assert!(text.contains(e.op()), "error text lacks the op: {text}");
}

/// `check_error` on a result's error, passing the value through.
pub fn checked<T>(r: uverbs::Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            check_error(&e);
            None
        }
    }
}

/// Number of open fds of this process (targets check that a run leaks none).
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The raw fd number of a borrowed fd (for leak messages).
pub fn raw(fd: BorrowedFd<'_>) -> i32 {
    fd.as_raw_fd()
}

pub mod verbs;

/// The protection domain of the fuzzed queues ([`FuzzAh::domain`] of an AH of theirs).
pub const FUZZ_PD: usize = 0x5eed;

/// An address handle for the providers' queues: a number and a domain from the input (the
/// object model's `Ah` in the targets that drive a provider directly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FuzzAh {
    /// The number a WQE carries for it (rxe's AH index, EFA's AH number).
    pub num: u32,
    /// Its protection domain: [`FUZZ_PD`] or another.
    pub domain: usize,
}

impl FuzzAh {
    /// An AH read from the input: any number (0 included), mostly of [`FUZZ_PD`].
    pub fn from_input(inp: &mut Input<'_>) -> Self {
        let num = inp.u32();
        let domain = if inp.u8() % 4 == 0 {
            FUZZ_PD + 1
        } else {
            FUZZ_PD
        };
        FuzzAh { num, domain }
    }
}

impl uverbs_wr::AddressHandle for FuzzAh {
    fn ah_num(&self) -> u32 {
        self.num
    }
    fn domain(&self) -> usize {
        self.domain
    }
}

/// A zeroed, page-aligned heap region standing in for memory the kernel or device shares with
/// us. The fuzz target plays the other side through [`Shared::write`] / [`Shared::read_u32`],
/// raw-pointer accesses only, so the queue under test (which holds the same raw pointer) never
/// has a Rust reference aliased with our writes.
pub struct Shared {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl Shared {
    /// `len` zeroed bytes (at least 8), 4096-aligned.
    pub fn new(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(8), 4096).expect("layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        Shared {
            ptr: std::ptr::NonNull::new(p).expect("allocation"),
            layout,
        }
    }
    /// The base pointer handed to the queue under test.
    pub fn ptr(&self) -> std::ptr::NonNull<u8> {
        self.ptr
    }
    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }
    /// Whether the region is empty (never: at least 8 bytes).
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Writes as much of `bytes` at `off` as fits (the other side writing).
    pub fn write(&self, off: usize, bytes: &[u8]) {
        if off >= self.len() {
            return;
        }
        let n = bytes.len().min(self.len() - off);
        // SAFETY: `off + n <= len`, inside the allocation; the target is single-threaded and
        // the queue under test reaches this memory only through raw pointers between calls.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.as_ptr().add(off), n) };
    }
    /// Reads the little-endian u32 at `off` (0 if out of range).
    pub fn read_u32(&self, off: usize) -> u32 {
        if off.checked_add(4).is_none_or(|e| e > self.len()) {
            return 0;
        }
        let mut b = [0u8; 4];
        // SAFETY: `off + 4 <= len`, inside the allocation; see `write`.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), b.as_mut_ptr(), 4) };
        u32::from_le_bytes(b)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}
