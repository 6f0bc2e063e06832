//! Mapping an rxe queue (QP send and receive queues, SRQ) from the uverbs fd.
#![allow(unsafe_code)]

use uverbs_uapi::rxe::Mminfo;

use crate::channel::{MapKind, Mapping};
use crate::context::Context;
use crate::error::{Errno, Error, Result};

/// Maps one rxe queue from the uverbs fd and validates its header.
pub(crate) fn map_rxe_queue(
    ctx: &Context,
    mi: &Mminfo,
    op: &'static str,
    object: &dyn Fn() -> String,
    what: &str,
) -> Result<(Mapping, uverbs_rxe::Queue)> {
    let len = usize::try_from(mi.size).map_err(|_| {
        Error::invalid(
            op,
            object(),
            Errno::INVAL,
            format!("{what} ring size does not fit"),
        )
    })?;
    let map = ctx
        .channel()
        .mmap(mi.offset, len, MapKind::ReadWrite)
        .map_err(|e| {
            Error::os(op, object(), e).with_reason(format!("mmap of the {what} failed"))
        })?;
    // SAFETY: `map` is a live mapping of exactly this queue (offset and size come from the
    // kernel's create response for it); the caller keeps `map` alive, declared after the typed
    // queue built from this view so it is unmapped only after that queue is gone, and nothing
    // else in the process touches this memory.
    let q = unsafe { uverbs_rxe::Queue::from_raw(map.as_ptr(), map.len(), None) }.map_err(|e| {
        Error::invalid(
            op,
            object(),
            Errno::IO,
            format!("bad {what} ring from the kernel: {e}"),
        )
    })?;
    Ok((map, q))
}
