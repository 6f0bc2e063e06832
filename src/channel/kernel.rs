//! The real channel: an open `/dev/infiniband/uverbsN`.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::ptr::NonNull;

use rustix::fs::{Mode, OFlags};
use rustix::ioctl::{Ioctl, IoctlOutput, Opcode};
use rustix::mm::{MapFlags, ProtFlags};
use uverbs_uapi::ioctl::{IbUverbsIoctlHdr, RDMA_VERBS_IOCTL};

use super::{Channel, Errno, IoctlCmd, MapKind, Mapping, WriteCmd};

/// A channel to the kernel through one uverbs character device.
#[derive(Debug)]
pub struct KernelChannel {
    /// The uverbs fd, as a `File` for its `write` (see `Channel::write` below).
    file: File,
    driver_id: u32,
}

impl KernelChannel {
    /// Opens `path` (e.g. `/dev/infiniband/uverbs0`) for a device driven by `driver_id`.
    ///
    /// Fails with `ENOTTY` if `path` is not a uverbs character device: only the uverbs driver
    /// answers a command with a new fd, and another file's `write()` could succeed without
    /// (`/dev/null`'s does), or write something else where the fd number belongs.
    pub fn open(path: &Path, driver_id: u32) -> Result<Self, Errno> {
        let fd = rustix::fs::open(path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())?;
        if !is_uverbs_device(&rustix::fs::fstat(&fd)?) {
            return Err(Errno::NOTTY);
        }
        Ok(KernelChannel {
            file: File::from(fd),
            driver_id,
        })
    }

    /// The uverbs fd.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// `IB_UVERBS_MAJOR` and the fixed minors `IB_UVERBS_BASE_MINOR..+IB_UVERBS_NUM_FIXED_MINOR`
/// (`drivers/infiniband/core/uverbs_main.c`): where the first 32 uverbs devices live.
const UVERBS_MAJOR: u32 = 231;
const UVERBS_FIXED_MINORS: std::ops::Range<u32> = 192..192 + 32;

/// Whether `st` is a uverbs character device: its sysfs class is `infiniband_verbs`
/// (`/sys/dev/char/MAJOR:MINOR/subsystem`), or, with no sysfs to ask, it is one of the fixed
/// uverbs device numbers (devices past the 32nd get a dynamic major, which only sysfs names).
fn is_uverbs_device(st: &rustix::fs::Stat) -> bool {
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::CharacterDevice {
        return false;
    }
    let (major, minor) = (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev));
    match std::fs::read_link(format!("/sys/dev/char/{major}:{minor}/subsystem")) {
        Ok(class) => class.file_name() == Some("infiniband_verbs".as_ref()),
        Err(_) => major == UVERBS_MAJOR && UVERBS_FIXED_MINORS.contains(&minor),
    }
}

/// `RDMA_VERBS_IOCTL` with a pointer to a prepared header and attribute array.
struct VerbsIoctl(*mut IbUverbsIoctlHdr);

// SAFETY: the opcode is RDMA_VERBS_IOCTL, whose argument is a pointer to
// `struct ib_uverbs_ioctl_hdr` followed by `num_attrs` attributes; `IoctlCmd::prepare` returns
// exactly that, with `length`/`num_attrs` matching the array it owns. The kernel writes the
// attributes back (output flags, new handles), hence IS_MUTATING.
unsafe impl Ioctl for VerbsIoctl {
    type Output = ();
    const IS_MUTATING: bool = true;

    fn opcode(&self) -> Opcode {
        RDMA_VERBS_IOCTL as Opcode
    }

    fn as_ptr(&mut self) -> *mut c_void {
        self.0.cast()
    }

    unsafe fn output_from_ptr(_: IoctlOutput, _: *mut c_void) -> rustix::io::Result<()> {
        Ok(())
    }
}

// SAFETY: (1) `open` made sure the fd is a uverbs character device, and every command goes to
// it as a syscall, so only the kernel's uverbs code writes the responses: the fd numbers in them
// (GET_CONTEXT's `async_fd`, CREATE_COMP_CHANNEL's `fd`, an FD-new attribute) are of files it
// installed in this process's table for this very call (`fd_install` on success; on failure the
// number is released and we return the errno), known to nothing else here. (2) `doorbell_fd`
// is `self.file`'s fd, owned by the channel and closed only when it drops.
unsafe impl Channel for KernelChannel {
    fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        let hdr = cmd.prepare(self.driver_id)?;
        // SAFETY: `hdr` points into `cmd`, which we borrow mutably for the duration of the call;
        // every PTR attribute points at a buffer `cmd` borrows for its lifetime 'a (see
        // IoctlCmd), so the kernel reads and writes only live memory of the right length.
        unsafe { rustix::ioctl::ioctl(&self.file, VerbsIoctl(hdr)) }
    }

    fn ioctl_raw(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        let hdr = cmd.prepare_unchecked()?;
        // SAFETY: as in `ioctl`; `prepare_unchecked` guarantees `num_attrs` does not exceed
        // the attribute array `cmd` owns, and the kernel refuses a `length` that does not
        // match `num_attrs`, so it reads and writes only inside `cmd`.
        unsafe { rustix::ioctl::ioctl(&self.file, VerbsIoctl(hdr)) }
    }

    fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
        use std::io::Write as _;
        let bytes = cmd.wire();
        let len = bytes.len();
        // write(2) through std, that is libc's `write`, a function the compiler cannot see
        // into, rather than `rustix::io::write`: rustix issues write as an asm block declared
        // `readonly` (it promises the compiler the syscall writes no memory), and the uverbs
        // driver writes the response, and for some commands driver data such as rxe's
        // `mmap_info_addr`, through pointers inside the command. An unknown function may write
        // any memory whose address was exposed, as these were (`WriteCmd::wire`, the callers'
        // `as u64`), so what the kernel wrote is then read back by ordinary reads.
        let n = (&self.file)
            .write(bytes)
            .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
        if n != len {
            // The uverbs write handler consumes a command whole or fails; a short write would
            // mean the kernel saw a different command than we built.
            return Err(Errno::IO);
        }
        Ok(())
    }

    fn mmap(&self, offset: u64, len: usize, kind: MapKind) -> Result<Mapping, Errno> {
        if len == 0 {
            return Err(Errno::INVAL);
        }
        let prot = match kind {
            MapKind::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
            MapKind::ReadOnly => ProtFlags::READ,
            MapKind::WriteOnly => ProtFlags::WRITE,
        };
        // SAFETY: a new shared mapping of the uverbs fd at an address the kernel picks; it
        // aliases no Rust object. The Mapping takes ownership on the next line.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                MapFlags::SHARED,
                &self.file,
                offset,
            )?
        };
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
        // SAFETY: we just made this mapping of `len` bytes and nothing else knows of it.
        Ok(unsafe { Mapping::from_raw(ptr, len) })
    }

    fn doorbell_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.file.as_fd())
    }

    fn command_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.file.as_fd())
    }

    fn driver_id(&self) -> u32 {
        self.driver_id
    }
}
