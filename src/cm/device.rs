//! The verbs device of an id: the kernel names it by node GUID; we open it as our
//! [`Context`], once per device per process while anyone holds it.

use std::sync::{Mutex, Weak};

use crate::context::{Context, ContextInner};
use crate::error::{Errno, Error, Result};

/// Open contexts by node GUID (host order), held weakly: a device closes when its last user
/// lets go, as it would without rdma_cm.
static OPEN: Mutex<Vec<(u64, Weak<ContextInner>)>> = Mutex::new(Vec::new());

/// The context of the device with node GUID `guid_be` as the kernel wrote it (big-endian
/// bytes, as `ibv_get_device_guid` returns).
pub(crate) fn context_for_guid(op: &'static str, object: &str, guid_be: u64) -> Result<Context> {
    let guid = u64::from_be(guid_be);
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    open.retain(|(_, w)| w.strong_count() > 0);
    if let Some(inner) = open
        .iter()
        .find(|(g, _)| *g == guid)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(Context { inner });
    }
    let devices = crate::devices().map_err(|e| {
        Error::invalid(
            op,
            object.to_string(),
            e.errno().unwrap_or(Errno::NODEV),
            format!("listing verbs devices to find the id's device failed: {e}"),
        )
    })?;
    let Some(dev) = devices.iter().find(|d| d.node_guid() == guid) else {
        return Err(Error::invalid(
            op,
            object.to_string(),
            Errno::NODEV,
            format!(
                "the kernel put the id on the device with node GUID {}, which has no \
                 /dev/infiniband/uverbs device here",
                crate::format_guid(guid)
            ),
        ));
    };
    let ctx = Context::open(dev)?;
    open.push((guid, std::sync::Arc::downgrade(&ctx.inner)));
    Ok(ctx)
}
