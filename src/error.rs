//! Errors: every failure names the operation, the object and the reason.
//!
//! A verbs call can fail in the kernel (an errno), in our own checks before anything reaches the
//! kernel or the device (a reason and usually an errno that matches what the kernel would say),
//! in a provider's checks (its typed reason, [`ProviderError`], is the error's source), or
//! because the kernel or device wrote something we refuse to trust. All carry the same three
//! facts (the call, the object once, the reason) so that a log line is enough to find the
//! cause.

use std::borrow::Cow;
use std::fmt;

use crate::provider::ProviderError;

pub use rustix::io::Errno;

/// The result type of every fallible uverbs call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failed verbs operation: which operation, on which object, and why.
///
/// One pointer wide (the facts live in a box made only when an error is), like
/// `std::io::Error`: a `Result<usize>` is two words, returned in registers, so the data
/// path (`poll`, `post_send`) pays nothing for its error type until it fails.
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<Facts>);

/// What an [`Error`] says.
#[derive(Clone, PartialEq, Eq)]
struct Facts {
    op: &'static str,
    object: Cow<'static, str>,
    errno: Option<Errno>,
    reason: Cow<'static, str>,
    kind: ErrorKind,
    /// The provider's typed reason, when a provider refused (its text is `reason`).
    source: Option<ProviderError>,
}

/// What kind of failure an [`Error`] is, for the cases a program handles differently from
/// "this call failed" ([`Error::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The context's device was removed (`rdma link delete`, driver unbind, hot-unplug): the
    /// kernel answers `EIO` to every command of a disassociated context, or uverbs learned of
    /// the removal itself. Nothing on this context will work again: free everything (destroys
    /// after a removal succeed) and close it, so the removal can finish.
    DeviceRemoved,
    /// Any other failure: see [`Error::errno`] and [`Error::reason`].
    Other,
}

impl Error {
    /// An error reported by the kernel: `errno` is what the syscall returned.
    #[cold]
    pub fn os(op: &'static str, object: impl Into<Cow<'static, str>>, errno: Errno) -> Self {
        Error::new(
            op,
            object.into(),
            Some(errno),
            Cow::Borrowed(""),
            ErrorKind::Other,
        )
    }

    /// An error found by our own checks, with the errno the kernel would have used.
    #[cold]
    pub fn invalid(
        op: &'static str,
        object: impl Into<Cow<'static, str>>,
        errno: Errno,
        reason: impl Into<Cow<'static, str>>,
    ) -> Self {
        Error::new(
            op,
            object.into(),
            Some(errno),
            reason.into(),
            ErrorKind::Other,
        )
    }

    /// A provider refused `op` on `object`: its errno, its reason as the text, and the typed
    /// reason as the [`source`](std::error::Error::source) ([`Error::provider_error`]).
    #[cold]
    pub fn provider(
        op: &'static str,
        object: impl Into<Cow<'static, str>>,
        e: impl Into<ProviderError>,
    ) -> Self {
        let e = e.into();
        let mut err = Error::new(
            op,
            object.into(),
            Some(e.errno()),
            e.to_string().into(),
            ErrorKind::Other,
        );
        err.0.source = Some(e);
        err
    }

    /// The device of the context was removed: `op` on `object` failed with `errno` (the
    /// kernel's `EIO`, or `ENODEV` when uverbs found out itself). The reason says
    /// "device NAME was removed".
    pub fn device_removed(
        op: &'static str,
        object: impl Into<Cow<'static, str>>,
        device: &str,
        errno: Errno,
    ) -> Self {
        Error::new(
            op,
            object.into(),
            Some(errno),
            format!("device {device} was removed").into(),
            ErrorKind::DeviceRemoved,
        )
    }

    /// The one place the box is made (out of line: every constructor's caller is an error
    /// path, which stays small in the data path's functions).
    #[cold]
    #[inline(never)]
    fn new(
        op: &'static str,
        object: Cow<'static, str>,
        errno: Option<Errno>,
        reason: Cow<'static, str>,
        kind: ErrorKind,
    ) -> Self {
        Error(Box::new(Facts {
            op,
            object,
            errno,
            reason,
            kind,
            source: None,
        }))
    }

    /// Adds an explanation of what we know about the failure (kept with the errno).
    pub fn with_reason(mut self, reason: impl Into<Cow<'static, str>>) -> Self {
        self.0.reason = reason.into();
        self
    }

    /// The verbs operation that failed, e.g. `"create_cq"`.
    pub fn op(&self) -> &'static str {
        self.0.op
    }

    /// The object the operation was applied to, e.g. `"device rxe0"`, `"qp 17"`.
    pub fn object(&self) -> &str {
        &self.0.object
    }

    /// The errno (from the kernel, or the one our check stands in for).
    pub fn errno(&self) -> Option<Errno> {
        self.0.errno
    }

    /// What we know about the cause beyond the errno (may be empty).
    pub fn reason(&self) -> &str {
        &self.0.reason
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Whether the failure is that the context's device was removed
    /// ([`ErrorKind::DeviceRemoved`]).
    pub fn is_device_removed(&self) -> bool {
        self.0.kind == ErrorKind::DeviceRemoved
    }

    /// Whether this error carries `errno`.
    pub fn is(&self, errno: Errno) -> bool {
        self.0.errno == Some(errno)
    }

    /// The provider's typed reason, when a provider refused (also the error's
    /// [`source`](std::error::Error::source)).
    pub fn provider_error(&self) -> Option<&ProviderError> {
        self.0.source.as_ref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {} failed", self.0.op, self.0.object)?;
        if !self.0.reason.is_empty() {
            write!(f, ": {}", self.0.reason)?;
        }
        if let Some(e) = self.0.errno {
            write!(f, " ({}: {})", errno_name(e), e)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The text says everything (the call, the object and the reason, the provider's included);
/// the source is the provider's typed reason, for a program that tells reasons apart.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        let kind =
            e.0.errno
                .map(|n| std::io::Error::from_raw_os_error(n.raw_os_error()).kind())
                .unwrap_or(std::io::ErrorKind::Other);
        std::io::Error::new(kind, e)
    }
}

/// The symbolic name of the errnos a verbs user meets, for messages (`EINVAL`, not just the text).
pub fn errno_name(e: Errno) -> &'static str {
    match e {
        Errno::PERM => "EPERM",
        Errno::NOENT => "ENOENT",
        Errno::INTR => "EINTR",
        Errno::IO => "EIO",
        Errno::NXIO => "ENXIO",
        Errno::TOOBIG => "E2BIG",
        Errno::BADF => "EBADF",
        Errno::AGAIN => "EAGAIN",
        Errno::NOMEM => "ENOMEM",
        Errno::ACCESS => "EACCES",
        Errno::FAULT => "EFAULT",
        Errno::BUSY => "EBUSY",
        Errno::EXIST => "EEXIST",
        Errno::NODEV => "ENODEV",
        Errno::INVAL => "EINVAL",
        Errno::NFILE => "ENFILE",
        Errno::MFILE => "EMFILE",
        Errno::NOSPC => "ENOSPC",
        Errno::RANGE => "ERANGE",
        Errno::NOSYS => "ENOSYS",
        Errno::PROTONOSUPPORT => "EPROTONOSUPPORT",
        Errno::OPNOTSUPP => "EOPNOTSUPP",
        Errno::OVERFLOW => "EOVERFLOW",
        Errno::MSGSIZE => "EMSGSIZE",
        Errno::TIMEDOUT => "ETIMEDOUT",
        Errno::NOTCONN => "ENOTCONN",
        Errno::CONNREFUSED => "ECONNREFUSED",
        Errno::NETDOWN => "ENETDOWN",
        Errno::ADDRINUSE => "EADDRINUSE",
        Errno::ADDRNOTAVAIL => "EADDRNOTAVAIL",
        Errno::NETUNREACH => "ENETUNREACH",
        Errno::HOSTUNREACH => "EHOSTUNREACH",
        Errno::CONNRESET => "ECONNRESET",
        Errno::AFNOSUPPORT => "EAFNOSUPPORT",
        Errno::NODATA => "ENODATA",
        _ => "errno",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_operation_object_reason_and_errno() {
        let e = Error::invalid(
            "create_cq",
            "device rxe0",
            Errno::INVAL,
            "cqe 0 is out of range 1..=32767",
        );
        assert_eq!(
            e.to_string(),
            format!(
                "create_cq on device rxe0 failed: cqe 0 is out of range 1..=32767 (EINVAL: {})",
                Errno::INVAL
            )
        );
        assert!(e.is(Errno::INVAL));
        let io: std::io::Error = e.into();
        assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    }

    #[test]
    fn device_removed_is_its_own_kind_and_says_so() {
        let e = Error::device_removed("alloc_pd", "device rxe0", "rxe0", Errno::IO);
        assert_eq!(e.kind(), ErrorKind::DeviceRemoved);
        assert!(e.is_device_removed() && e.is(Errno::IO));
        assert_eq!(
            e.to_string(),
            format!(
                "alloc_pd on device rxe0 failed: device rxe0 was removed (EIO: {})",
                Errno::IO
            )
        );
        assert_eq!(
            Error::os("alloc_pd", "device rxe0", Errno::IO).kind(),
            ErrorKind::Other
        );
    }

    #[test]
    fn a_result_of_a_count_is_two_words() {
        // The data path's `Result<usize>` comes back in two registers (not through memory)
        // only while `Error` is one pointer.
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
        assert_eq!(
            std::mem::size_of::<Result<usize>>(),
            2 * std::mem::size_of::<usize>()
        );
        let e = Error::invalid("poll_cq", "cq 3", Errno::IO, "bad").with_reason("worse");
        assert_eq!(
            (e.op(), e.object(), e.errno(), e.reason(), e.kind()),
            (
                "poll_cq",
                "cq 3",
                Some(Errno::IO),
                "worse",
                ErrorKind::Other
            )
        );
        assert_eq!(e.clone(), e);
    }

    #[test]
    fn os_error_without_reason() {
        let e = Error::os("alloc_pd", "device rxe0", Errno::NOMEM);
        assert_eq!(e.reason(), "");
        assert!(e
            .to_string()
            .starts_with("alloc_pd on device rxe0 failed (ENOMEM"));
    }
}
