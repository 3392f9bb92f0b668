//! The netlink layer's error: what was being done, to which object, and why.
use std::fmt;

/// Why an operation failed, in the terms callers decide on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The object does not exist (ENODEV, ENOENT, ESRCH, EADDRNOTAVAIL, or no such link).
    NotFound,
    /// The object already exists (EEXIST): a name clash, or an identical route/address.
    Exists,
    /// The object is in use (EBUSY).
    Busy,
    /// The kernel lacks a feature this request needs (EOPNOTSUPP and friends).
    Unsupported { feature: String },
    /// Any other kernel error number.
    Kernel,
    /// The socket itself failed (open, send, receive).
    Io,
    /// A message could not be encoded, or a reply could not be decoded.
    Protocol,
    /// The namespace to open a handle in, or to move a link to, is unusable.
    Netns,
    /// A wait gave up (e.g. addresses still tentative when the deadline passed).
    Timeout,
    /// IPv6 duplicate address detection found another host using this address.
    DadFailed { address: String },
}

/// A netlink failure, e.g. `create veth vethab12cd34: File exists`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    op: String,
    object: String,
    kind: ErrorKind,
    errno: Option<i32>,
    detail: Option<String>,
}

impl Error {
    pub(crate) fn new(op: impl Into<String>, object: impl Into<String>, kind: ErrorKind) -> Error {
        Error {
            op: op.into(),
            object: object.into(),
            kind,
            errno: None,
            detail: None,
        }
    }

    /// An error from the kernel's errno (positive), with the kernel's extended-ack text if any.
    pub(crate) fn from_errno(op: &str, object: &str, errno: i32, detail: Option<String>) -> Error {
        let kind = match errno {
            libc::ENODEV | libc::ENOENT | libc::ESRCH | libc::EADDRNOTAVAIL => ErrorKind::NotFound,
            libc::EEXIST => ErrorKind::Exists,
            libc::EBUSY => ErrorKind::Busy,
            _ => ErrorKind::Kernel,
        };
        Error {
            op: op.into(),
            object: object.into(),
            kind,
            errno: Some(errno),
            detail,
        }
    }

    pub(crate) fn with_errno(mut self, errno: i32) -> Error {
        self.errno = Some(errno);
        self
    }

    pub(crate) fn with_detail(mut self, detail: impl Into<String>) -> Error {
        self.detail = Some(detail.into());
        self
    }

    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The kernel's error number, when the kernel reported the failure.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }

    pub fn op(&self) -> &str {
        &self.op
    }

    pub fn object(&self) -> &str {
        &self.object
    }

    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }

    pub fn is_exists(&self) -> bool {
        self.kind == ErrorKind::Exists
    }

    pub fn is_unsupported(&self) -> bool {
        matches!(self.kind, ErrorKind::Unsupported { .. })
    }

    /// A conditional nf_tables batch refused because the ruleset changed since it was
    /// read (ERESTART; see `Transaction::only_if_generation`): read again and retry.
    pub fn is_generation_changed(&self) -> bool {
        self.errno == Some(libc::ERESTART)
    }

    /// An nf_tables commit refused because it was planned on a ruleset that has changed
    /// since: a rule or chain it deletes is gone (a concurrent change got there first), or
    /// [`is_generation_changed`](Self::is_generation_changed). Read and plan again.
    pub fn is_stale_plan(&self) -> bool {
        self.is_not_found() || self.is_generation_changed()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: ", self.op, self.object)?;
        let errno_text = self.errno.map(errno_text);
        match (&self.kind, errno_text, &self.detail) {
            (ErrorKind::Unsupported { feature }, Some(t), _) => {
                write!(f, "{feature} is not supported by this kernel ({t})")
            }
            (ErrorKind::Unsupported { feature }, None, _) => write!(f, "{feature} is not supported by this kernel"),
            (ErrorKind::NotFound, None, None) => write!(f, "not found"),
            (ErrorKind::DadFailed { address }, _, _) => {
                write!(f, "duplicate address detection failed for {address}")
            }
            (_, Some(t), Some(d)) => write!(f, "{t} ({d})"),
            (_, Some(t), None) => write!(f, "{t}"),
            (_, None, Some(d)) => write!(f, "{d}"),
            (kind, None, None) => write!(f, "{kind:?}"),
        }
    }
}

impl std::error::Error for Error {}

/// glibc's text for the errnos route netlink returns (what `ip` prints). Spelled out here
/// rather than asked of the C library, because musl words several of them differently
/// ("Not supported", "Resource busy") and the messages must not depend on the build.
const ERRNO_TEXT: &[(i32, &str)] = &[
    (libc::EPERM, "Operation not permitted"),
    (libc::ENOENT, "No such file or directory"),
    (libc::ESRCH, "No such process"),
    (libc::EINTR, "Interrupted system call"),
    (libc::EIO, "Input/output error"),
    (libc::ENXIO, "No such device or address"),
    (libc::E2BIG, "Argument list too long"),
    (libc::EBADF, "Bad file descriptor"),
    (libc::EAGAIN, "Resource temporarily unavailable"),
    (libc::ENOMEM, "Cannot allocate memory"),
    (libc::EACCES, "Permission denied"),
    (libc::EFAULT, "Bad address"),
    (libc::EBUSY, "Device or resource busy"),
    (libc::EEXIST, "File exists"),
    (libc::EXDEV, "Invalid cross-device link"),
    (libc::ENODEV, "No such device"),
    (libc::ENOTDIR, "Not a directory"),
    (libc::EINVAL, "Invalid argument"),
    (libc::ENFILE, "Too many open files in system"),
    (libc::EMFILE, "Too many open files"),
    (libc::ENOSPC, "No space left on device"),
    (libc::ERANGE, "Numerical result out of range"),
    (libc::ENAMETOOLONG, "File name too long"),
    (libc::ENOTEMPTY, "Directory not empty"),
    (libc::ELOOP, "Too many levels of symbolic links"),
    (libc::ENODATA, "No data available"),
    (libc::EPROTO, "Protocol error"),
    (libc::EOVERFLOW, "Value too large for defined data type"),
    (libc::EMSGSIZE, "Message too long"),
    (libc::EPROTONOSUPPORT, "Protocol not supported"),
    (libc::EOPNOTSUPP, "Operation not supported"),
    (libc::EAFNOSUPPORT, "Address family not supported by protocol"),
    (libc::EADDRINUSE, "Address already in use"),
    (libc::EADDRNOTAVAIL, "Cannot assign requested address"),
    (libc::ENETDOWN, "Network is down"),
    (libc::ENETUNREACH, "Network is unreachable"),
    (libc::ENOBUFS, "No buffer space available"),
    (libc::ETIMEDOUT, "Connection timed out"),
    (libc::EHOSTUNREACH, "No route to host"),
    (libc::EALREADY, "Operation already in progress"),
    (libc::EINPROGRESS, "Operation now in progress"),
];

/// The text for an errno, without Rust's " (os error N)" suffix.
pub fn errno_text(errno: i32) -> String {
    if let Some((_, text)) = ERRNO_TEXT.iter().find(|(n, _)| *n == errno) {
        return text.to_string();
    }
    let s = std::io::Error::from_raw_os_error(errno).to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod errno_tests {
    use super::errno_text;

    #[test]
    fn errno_texts_do_not_depend_on_the_c_library() {
        assert_eq!(errno_text(libc::EOPNOTSUPP), "Operation not supported");
        assert_eq!(errno_text(libc::EBUSY), "Device or resource busy");
        assert_eq!(errno_text(libc::ERANGE), "Numerical result out of range");
        assert_eq!(errno_text(libc::EEXIST), "File exists");
    }
}
