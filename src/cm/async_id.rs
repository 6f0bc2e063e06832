//! Awaiting an id's rdma_cm events from a tokio runtime (feature `tokio`).

use std::os::fd::{AsFd, OwnedFd};

use ::tokio::io::unix::AsyncFd;

use super::{CmEvent, CmId};
use crate::error::Result;
use crate::tokio::{io_error, register};

/// A [`CmId`] whose events are awaited from tokio (`CmId::into_async`): its event channel is
/// registered with the runtime's reactor, so [`AsyncCmId::next`] sleeps in `epoll` like a
/// socket read. Everything else is the id's own synchronous API ([`AsyncCmId::id`],
/// [`AsyncCmId::id_mut`]).
///
/// ```no_run
/// # async fn demo() -> uverbs::Result<()> {
/// use uverbs::cm::{CmEvent, CmId, PortSpace};
/// let mut listen = CmId::new(PortSpace::Tcp)?;
/// listen.bind_addr(&"10.99.0.1:7000".parse().unwrap())?;
/// listen.listen(8)?;
/// let mut listen = listen.into_async()?;
/// while let CmEvent::ConnectRequest(req) = listen.next().await? {
///     let conn = req.id.into_async()?; // serve it in a task of its own
///     # drop(conn);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AsyncCmId {
    id: CmId,
    fd: AsyncFd<OwnedFd>,
}

impl CmId {
    /// Registers the id's event channel with the current tokio runtime.
    ///
    /// Fails outside a tokio runtime with I/O enabled.
    pub fn into_async(self) -> Result<AsyncCmId> {
        let fd = register(self.as_fd(), "rdma_get_cm_event", &self.label())?;
        Ok(AsyncCmId { id: self, fd })
    }
}

impl AsyncCmId {
    /// Waits, without blocking the thread, for the id's next event (`rdma_get_cm_event`),
    /// with the same handling as [`CmId::get_cm_event`]. Bound the wait with
    /// `tokio::time::timeout` where the peer may never answer.
    pub async fn next(&mut self) -> Result<CmEvent> {
        loop {
            let mut guard = self
                .fd
                .readable()
                .await
                .map_err(|e| io_error("rdma_get_cm_event", &self.id.label(), &e))?;
            match self.id.try_get_cm_event()? {
                Some(ev) => return Ok(ev),
                None => guard.clear_ready(),
            }
        }
    }

    /// The id.
    pub fn id(&self) -> &CmId {
        &self.id
    }

    /// The id, to connect, accept, post work requests...
    pub fn id_mut(&mut self) -> &mut CmId {
        &mut self.id
    }

    /// The id back, unregistered from the reactor.
    pub fn into_inner(self) -> CmId {
        self.id
    }
}
