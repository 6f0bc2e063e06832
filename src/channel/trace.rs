//! `UVERBS_TRACE`: one line on standard error for every command a context sends, so a user can
//! see what the kernel (or a device model) was asked and why it said no.
//!
//! What it owns: [`TraceChannel`], a [`Channel`] that forwards to the real one and prints each
//! `RDMA_VERBS_IOCTL` (object and method by name, every attribute decoded: id, kind, length,
//! inline values), each `write()` command (by name, core and driver lengths) and each mmap
//! (offset, length, kind), then the outcome (`ok` or the errno by name and number).
//! [`Context::open`](crate::Context::open) and [`Context::with_channel`](crate::Context::with_channel)
//! wrap their channel in it when the variable asks for it. It must not be on the data path, and
//! is not: post and poll never go through a `Channel` (rxe's send doorbell is its own `write()`,
//! EFA's doorbells are stores), so tracing costs nothing there even when it is on.
//!
//! Values: unset, empty, `0`, `off`, `false` or `no`: off. `1`, `on`, `true`, `yes` or `all`:
//! on. Anything else: a one-time message on standard error naming the value and the accepted
//! ones, and tracing stays off (a typo must not turn a production program's stderr into a
//! firehose, nor be silently ignored).

use std::fmt::Write as _;
use std::os::fd::BorrowedFd;
use std::sync::OnceLock;

use uverbs_uapi::cmds::*;
use uverbs_uapi::write::*;

use super::{AttrKind, Channel, Errno, IoctlCmd, MapKind, Mapping, WriteCmd};
use crate::error::errno_name;

/// The environment variable that turns tracing on.
pub const TRACE_VAR: &str = "UVERBS_TRACE";

/// What a `UVERBS_TRACE` value means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceSetting {
    /// Trace every command.
    On,
    /// Do not trace.
    Off,
    /// A value we do not understand (kept for the message); tracing stays off.
    Unknown(String),
}

impl TraceSetting {
    /// Reads a value of [`TRACE_VAR`] (`None` when unset).
    pub fn parse(value: Option<&str>) -> TraceSetting {
        match value.map(|v| v.trim().to_ascii_lowercase()) {
            None => TraceSetting::Off,
            Some(v) => match v.as_str() {
                "" | "0" | "off" | "false" | "no" => TraceSetting::Off,
                "1" | "on" | "true" | "yes" | "all" => TraceSetting::On,
                _ => TraceSetting::Unknown(value.unwrap_or_default().to_string()),
            },
        }
    }
}

/// Whether this process traces, read from the environment once; an unknown value is reported
/// once on standard error.
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let raw = std::env::var_os(TRACE_VAR).map(|v| v.to_string_lossy().into_owned());
        match TraceSetting::parse(raw.as_deref()) {
            TraceSetting::On => true,
            TraceSetting::Off => false,
            TraceSetting::Unknown(v) => {
                eprintln!(
                    "uverbs: {TRACE_VAR}={v:?} is not understood, so commands are not traced; \
                     use {TRACE_VAR}=1 to trace every kernel command, or 0 (or unset) for none"
                );
                false
            }
        }
    })
}

/// A [`Channel`] that prints every command it forwards.
#[derive(Debug)]
pub struct TraceChannel {
    inner: Box<dyn Channel>,
    device: String,
}

impl TraceChannel {
    /// Wraps `inner`, naming `device` (e.g. `rxe0`) on each line.
    pub fn new(inner: Box<dyn Channel>, device: &str) -> TraceChannel {
        TraceChannel {
            inner,
            device: device.to_string(),
        }
    }

    fn emit(&self, what: &str, res: &Result<(), Errno>) {
        eprintln!("uverbs trace: {} {what} -> {}", self.device, outcome(res));
    }
}

fn outcome(res: &Result<(), Errno>) -> String {
    match res {
        Ok(()) => "ok".into(),
        Err(e) => format!("{} ({})", errno_name(*e), e.raw_os_error()),
    }
}

// SAFETY: every command goes to `inner` unchanged and its answer comes back unchanged (tracing
// only reads), so the fd numbers in responses are what `inner`, itself a `Channel`, handed
// over; `doorbell_fd` is `inner`'s, which stays open while `inner` lives, and we own `inner`.
#[allow(unsafe_code)]
unsafe impl Channel for TraceChannel {
    fn ioctl(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        let what = describe_ioctl(cmd);
        let res = self.inner.ioctl(cmd);
        self.emit(&what, &res);
        res
    }

    fn ioctl_raw(&self, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
        let what = format!("{} (raw)", describe_ioctl(cmd));
        let res = self.inner.ioctl_raw(cmd);
        self.emit(&what, &res);
        res
    }

    fn write(&self, cmd: &mut WriteCmd) -> Result<(), Errno> {
        let what = describe_write(cmd);
        let res = self.inner.write(cmd);
        self.emit(&what, &res);
        res
    }

    fn mmap(&self, offset: u64, len: usize, kind: MapKind) -> Result<Mapping, Errno> {
        let res = self.inner.mmap(offset, len, kind);
        let what = format!("mmap offset {offset:#x} len {len} {kind:?}");
        self.emit(&what, &res.as_ref().map(|_| ()).map_err(|e| *e));
        res
    }

    fn doorbell_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.doorbell_fd()
    }

    fn command_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.command_fd()
    }

    fn driver_id(&self) -> u32 {
        self.inner.driver_id()
    }
}

/// `ioctl CQ.CREATE [0x0 idr_new, 0x1 ptr_in 8 B = 0x10, ...]`.
pub fn describe_ioctl(cmd: &IoctlCmd<'_>) -> String {
    let (object, method) = (cmd.object_id(), cmd.method_id());
    let mut s = format!(
        "ioctl {}.{}",
        object_name(object),
        method_name(object, method)
    );
    s.push_str(" [");
    for (i, a) in cmd.attrs().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{:#x} {}", a.id(), kind_name(a.kind()));
        match a.kind() {
            AttrKind::Idr | AttrKind::Fd => {
                let _ = write!(s, " {}", a.data());
            }
            AttrKind::PtrIn | AttrKind::EnumIn => {
                let _ = write!(s, " {} B", a.len());
                if let Some(bytes) = a.input() {
                    if bytes.len() <= 8 {
                        let mut v = [0u8; 8];
                        v[..bytes.len()].copy_from_slice(bytes);
                        let _ = write!(s, " = {:#x}", u64::from_le_bytes(v));
                    }
                }
                if a.kind() == AttrKind::EnumIn {
                    let _ = write!(s, " elem {}", a.enum_elem());
                }
            }
            AttrKind::PtrOut => {
                let _ = write!(s, " {} B", a.len());
            }
            AttrKind::Const => {
                let _ = write!(s, " {:#x}", a.data());
            }
            AttrKind::IdrNew | AttrKind::FdNew => {}
        }
        if !a.is_mandatory() {
            s.push_str(" opt");
        }
    }
    s.push(']');
    s
}

/// `write CREATE_CQ (core 32 B, driver 8 B)`.
pub fn describe_write(cmd: &WriteCmd) -> String {
    format!(
        "write {}{} (core {} B, driver {} B)",
        if cmd.is_extended() { "EX_" } else { "" },
        write_name(cmd.command(), cmd.is_extended()),
        cmd.core_request().len(),
        cmd.driver_request().len()
    )
}

fn kind_name(kind: AttrKind) -> &'static str {
    match kind {
        AttrKind::Idr => "idr",
        AttrKind::IdrNew => "idr_new",
        AttrKind::Fd => "fd",
        AttrKind::FdNew => "fd_new",
        AttrKind::PtrIn => "ptr_in",
        AttrKind::PtrOut => "ptr_out",
        AttrKind::Const => "const",
        AttrKind::EnumIn => "enum_in",
    }
}

fn object_name(id: u16) -> String {
    let name = match id {
        UVERBS_OBJECT_DEVICE => "DEVICE",
        UVERBS_OBJECT_PD => "PD",
        UVERBS_OBJECT_COMP_CHANNEL => "COMP_CHANNEL",
        UVERBS_OBJECT_CQ => "CQ",
        UVERBS_OBJECT_QP => "QP",
        UVERBS_OBJECT_SRQ => "SRQ",
        UVERBS_OBJECT_AH => "AH",
        UVERBS_OBJECT_MR => "MR",
        UVERBS_OBJECT_MW => "MW",
        UVERBS_OBJECT_FLOW => "FLOW",
        UVERBS_OBJECT_XRCD => "XRCD",
        UVERBS_OBJECT_RWQ_IND_TBL => "RWQ_IND_TBL",
        UVERBS_OBJECT_WQ => "WQ",
        UVERBS_OBJECT_FLOW_ACTION => "FLOW_ACTION",
        UVERBS_OBJECT_DM => "DM",
        UVERBS_OBJECT_COUNTERS => "COUNTERS",
        UVERBS_OBJECT_ASYNC_EVENT => "ASYNC_EVENT",
        UVERBS_OBJECT_DMAH => "DMAH",
        UVERBS_OBJECT_DMABUF => "DMABUF",
        UVERBS_OBJECT_COMP_CNTR => "COMP_CNTR",
        _ => return format!("object{id:#x}"),
    };
    name.into()
}

fn method_name(object: u16, method: u16) -> String {
    let name = match (object, method) {
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE) => "INVOKE_WRITE",
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INFO_HANDLES) => "INFO_HANDLES",
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT) => "QUERY_PORT",
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT) => "GET_CONTEXT",
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_CONTEXT) => "QUERY_CONTEXT",
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE) => "QUERY_GID_TABLE",
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY) => "QUERY_GID_ENTRY",
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT_SPEED) => "QUERY_PORT_SPEED",
        (UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_COMP_CNTR_CAPS) => "QUERY_COMP_CNTR_CAPS",
        (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE) => "CREATE",
        (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_QP, UVERBS_METHOD_QP_ATTACH_COMP_CNTR) => "ATTACH_COMP_CNTR",
        (UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_CREATE) => "CREATE",
        (UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE) => "CREATE",
        (UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_WQ, UVERBS_METHOD_WQ_CREATE) => "CREATE",
        (UVERBS_OBJECT_WQ, UVERBS_METHOD_WQ_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC) => "ALLOC",
        (UVERBS_OBJECT_DM, UVERBS_METHOD_DM_FREE) => "FREE",
        (UVERBS_OBJECT_MR, UVERBS_METHOD_DM_MR_REG) => "DM_MR_REG",
        (UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_MR, UVERBS_METHOD_ADVISE_MR) => "ADVISE",
        (UVERBS_OBJECT_MR, UVERBS_METHOD_QUERY_MR) => "QUERY",
        (UVERBS_OBJECT_MR, UVERBS_METHOD_REG_DMABUF_MR) => "REG_DMABUF",
        (UVERBS_OBJECT_MR, UVERBS_METHOD_REG_MR) => "REG",
        (UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_MW, UVERBS_METHOD_MW_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_XRCD, UVERBS_METHOD_XRCD_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_AH, UVERBS_METHOD_AH_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC) => "ALLOC",
        (UVERBS_OBJECT_COMP_CNTR, UVERBS_METHOD_COMP_CNTR_CREATE) => "CREATE",
        (UVERBS_OBJECT_COMP_CNTR, UVERBS_METHOD_COMP_CNTR_DESTROY) => "DESTROY",
        (UVERBS_OBJECT_COMP_CNTR, UVERBS_METHOD_COMP_CNTR_MODIFY) => "MODIFY",
        (UVERBS_OBJECT_COMP_CNTR, UVERBS_METHOD_COMP_CNTR_READ) => "READ",
        _ if method >= UVERBS_ID_DRIVER_NS => return format!("driver_method{method:#x}"),
        _ => return format!("method{method:#x}"),
    };
    name.into()
}

fn write_name(command: u32, extended: bool) -> String {
    let name = if extended {
        match command {
            IB_USER_VERBS_EX_CMD_QUERY_DEVICE => "QUERY_DEVICE",
            IB_USER_VERBS_EX_CMD_CREATE_CQ => "CREATE_CQ",
            IB_USER_VERBS_EX_CMD_CREATE_QP => "CREATE_QP",
            IB_USER_VERBS_EX_CMD_MODIFY_QP => "MODIFY_QP",
            IB_USER_VERBS_EX_CMD_CREATE_FLOW => "CREATE_FLOW",
            IB_USER_VERBS_EX_CMD_DESTROY_FLOW => "DESTROY_FLOW",
            IB_USER_VERBS_EX_CMD_CREATE_WQ => "CREATE_WQ",
            IB_USER_VERBS_EX_CMD_MODIFY_WQ => "MODIFY_WQ",
            IB_USER_VERBS_EX_CMD_DESTROY_WQ => "DESTROY_WQ",
            IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL => "CREATE_RWQ_IND_TBL",
            IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL => "DESTROY_RWQ_IND_TBL",
            IB_USER_VERBS_EX_CMD_MODIFY_CQ => "MODIFY_CQ",
            _ => return format!("command{command}"),
        }
    } else {
        match command {
            IB_USER_VERBS_CMD_GET_CONTEXT => "GET_CONTEXT",
            IB_USER_VERBS_CMD_QUERY_DEVICE => "QUERY_DEVICE",
            IB_USER_VERBS_CMD_QUERY_PORT => "QUERY_PORT",
            IB_USER_VERBS_CMD_ALLOC_PD => "ALLOC_PD",
            IB_USER_VERBS_CMD_DEALLOC_PD => "DEALLOC_PD",
            IB_USER_VERBS_CMD_CREATE_AH => "CREATE_AH",
            IB_USER_VERBS_CMD_MODIFY_AH => "MODIFY_AH",
            IB_USER_VERBS_CMD_QUERY_AH => "QUERY_AH",
            IB_USER_VERBS_CMD_DESTROY_AH => "DESTROY_AH",
            IB_USER_VERBS_CMD_REG_MR => "REG_MR",
            IB_USER_VERBS_CMD_REG_SMR => "REG_SMR",
            IB_USER_VERBS_CMD_REREG_MR => "REREG_MR",
            IB_USER_VERBS_CMD_QUERY_MR => "QUERY_MR",
            IB_USER_VERBS_CMD_DEREG_MR => "DEREG_MR",
            IB_USER_VERBS_CMD_ALLOC_MW => "ALLOC_MW",
            IB_USER_VERBS_CMD_BIND_MW => "BIND_MW",
            IB_USER_VERBS_CMD_DEALLOC_MW => "DEALLOC_MW",
            IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL => "CREATE_COMP_CHANNEL",
            IB_USER_VERBS_CMD_CREATE_CQ => "CREATE_CQ",
            IB_USER_VERBS_CMD_RESIZE_CQ => "RESIZE_CQ",
            IB_USER_VERBS_CMD_DESTROY_CQ => "DESTROY_CQ",
            IB_USER_VERBS_CMD_POLL_CQ => "POLL_CQ",
            IB_USER_VERBS_CMD_PEEK_CQ => "PEEK_CQ",
            IB_USER_VERBS_CMD_REQ_NOTIFY_CQ => "REQ_NOTIFY_CQ",
            IB_USER_VERBS_CMD_CREATE_QP => "CREATE_QP",
            IB_USER_VERBS_CMD_QUERY_QP => "QUERY_QP",
            IB_USER_VERBS_CMD_MODIFY_QP => "MODIFY_QP",
            IB_USER_VERBS_CMD_DESTROY_QP => "DESTROY_QP",
            IB_USER_VERBS_CMD_POST_SEND => "POST_SEND",
            IB_USER_VERBS_CMD_POST_RECV => "POST_RECV",
            IB_USER_VERBS_CMD_ATTACH_MCAST => "ATTACH_MCAST",
            IB_USER_VERBS_CMD_DETACH_MCAST => "DETACH_MCAST",
            IB_USER_VERBS_CMD_CREATE_SRQ => "CREATE_SRQ",
            IB_USER_VERBS_CMD_MODIFY_SRQ => "MODIFY_SRQ",
            IB_USER_VERBS_CMD_QUERY_SRQ => "QUERY_SRQ",
            IB_USER_VERBS_CMD_DESTROY_SRQ => "DESTROY_SRQ",
            IB_USER_VERBS_CMD_POST_SRQ_RECV => "POST_SRQ_RECV",
            IB_USER_VERBS_CMD_OPEN_XRCD => "OPEN_XRCD",
            IB_USER_VERBS_CMD_CLOSE_XRCD => "CLOSE_XRCD",
            IB_USER_VERBS_CMD_CREATE_XSRQ => "CREATE_XSRQ",
            IB_USER_VERBS_CMD_OPEN_QP => "OPEN_QP",
            _ => return format!("command{command}"),
        }
    };
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse() {
        assert_eq!(TraceSetting::parse(None), TraceSetting::Off);
        for v in ["", "0", "off", "OFF", "false", "no"] {
            assert_eq!(TraceSetting::parse(Some(v)), TraceSetting::Off, "{v}");
        }
        for v in ["1", "on", "true", "Yes", "all"] {
            assert_eq!(TraceSetting::parse(Some(v)), TraceSetting::On, "{v}");
        }
        assert_eq!(
            TraceSetting::parse(Some("verbose")),
            TraceSetting::Unknown("verbose".into())
        );
    }

    #[test]
    fn ioctl_lines_name_object_method_and_attributes() {
        let resp = &mut [0u8; 16][..];
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY);
        cmd.idr(0, 7).ptr_out(1, resp);
        let line = describe_ioctl(&cmd);
        assert_eq!(line, "ioctl CQ.DESTROY [0x0 idr 7, 0x1 ptr_out 16 B]");

        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
        cmd.const_u64(0, 1);
        assert_eq!(
            describe_ioctl(&cmd),
            "ioctl DEVICE.QUERY_PORT [0x0 const 0x1]"
        );

        let cmd = IoctlCmd::new(0x77, 0x1003);
        assert_eq!(
            describe_ioctl(&cmd),
            "ioctl object0x77.driver_method0x1003 []"
        );
    }

    #[test]
    fn write_lines_name_the_command() {
        let cmd = WriteCmd::legacy(IB_USER_VERBS_CMD_DEALLOC_PD, &[0u8; 4][..], &[], 0, 0)
            .expect("a 4-byte command encodes");
        assert_eq!(
            describe_write(&cmd),
            "write DEALLOC_PD (core 4 B, driver 0 B)"
        );
    }
}
