//! Send and receive work requests as a program builds them and every provider reads them:
//! [`SendWr`] with its [`WrData`] and, for datagram QPs, its [`UdDest`]; [`RecvWr`]; and
//! [`PostError`], the refusal of a list.

use crate::{SendFlags, Sge, WrOp};

/// An address handle as the providers see it: the number a send work queue entry carries
/// for it, and the protection domain it belongs to. The object model's `Ah` implements it;
/// a [`UdDest`] copies both numbers when it is made, so posting reads plain fields.
pub trait AddressHandle {
    /// The number a send WQE carries for this handle (rxe's AH index, EFA's device AH
    /// number).
    fn ah_num(&self) -> u32;
    /// An identity of the protection domain the handle belongs to: equal for two handles of
    /// one live domain, different for handles of two live domains. A queue refuses a send
    /// whose destination's domain is not its own.
    fn domain(&self) -> usize;
}

/// Where a datagram send goes (`ibv_send_wr.wr.ud`, `ibv_wr_set_ud_addr`): an address handle
/// of type `A`, the remote QP number and Q_Key.
///
/// Made by [`UdDest::new`] (or [`SendWr::ud`]), which copies what posting needs of the
/// handle (its number and its domain) into the destination; the fields are private, so the
/// copies always describe the handle the destination borrows.
#[derive(Debug)]
pub struct UdDest<'a, A> {
    ah: &'a A,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
    ah_num: u32,
    domain: usize,
}

// Not derived: the derives would ask `A: Clone`/`A: Copy`, and a destination only borrows
// its handle.
impl<A> Clone for UdDest<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for UdDest<'_, A> {}

impl<'a, A: AddressHandle> UdDest<'a, A> {
    /// A destination: `ah`, the remote QP number and Q_Key.
    #[inline]
    pub fn new(ah: &'a A, remote_qpn: u32, remote_qkey: u32) -> Self {
        UdDest {
            ah,
            remote_qpn,
            remote_qkey,
            ah_num: ah.ah_num(),
            domain: ah.domain(),
        }
    }
}

impl<'a, A> UdDest<'a, A> {
    /// The address handle.
    #[inline]
    pub fn ah(&self) -> &'a A {
        self.ah
    }

    /// The handle's number ([`AddressHandle::ah_num`]), copied when the destination was made.
    #[inline(always)]
    pub fn ah_num(&self) -> u32 {
        self.ah_num
    }

    /// The handle's domain ([`AddressHandle::domain`]), copied when the destination was made.
    #[inline(always)]
    pub fn domain(&self) -> usize {
        self.domain
    }
}

/// The data of a send work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrData<'a> {
    /// Registered memory (`sg_list`, `num_sge`); may be empty.
    Sge(&'a [Sge]),
    /// Bytes copied into the work queue entry while posting (`IBV_SEND_INLINE`): the buffer is
    /// free again when the post returns.
    Inline(&'a [u8]),
}

/// One send work request (`struct ibv_send_wr` without `next`): a list is a slice, and a
/// refusal names the index of the first work request not posted (`bad_wr`).
///
/// Built with [`SendWr::send`] (or [`SendWr::new`] for any [`WrOp`]), then the data
/// ([`sge`](SendWr::sge) or [`inline`](SendWr::inline)), the flags and, for UD and SRD, the
/// destination ([`ud`](SendWr::ud)). `A` is the address-handle type of the destination (the
/// object model's `Ah`). Building one allocates nothing; the providers read it in place.
#[doc(alias = "ibv_send_wr")]
#[derive(Debug)]
pub struct SendWr<'a, A> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: WrOp,
    /// Send flags.
    pub flags: SendFlags,
    /// The data.
    pub data: WrData<'a>,
    /// Datagram destination: required on UD and SRD QPs, refused on connected QPs.
    pub ud: Option<UdDest<'a, A>>,
}

impl<A> Clone for SendWr<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for SendWr<'_, A> {}

impl<'a, A> SendWr<'a, A> {
    /// A work request for `op` with no flags, no data and no destination.
    #[inline]
    pub const fn new(wr_id: u64, op: WrOp) -> Self {
        SendWr {
            wr_id,
            op,
            flags: SendFlags::empty(),
            data: WrData::Sge(&[]),
            ud: None,
        }
    }

    /// `IBV_WR_SEND`.
    #[inline]
    pub const fn send(wr_id: u64) -> Self {
        Self::new(wr_id, WrOp::Send)
    }

    /// Sets the scatter/gather list.
    #[inline]
    pub const fn sge(mut self, sg_list: &'a [Sge]) -> Self {
        self.data = WrData::Sge(sg_list);
        self
    }

    /// Sets inline data (copied into the queue while posting).
    #[inline]
    pub const fn inline(mut self, data: &'a [u8]) -> Self {
        self.data = WrData::Inline(data);
        self
    }

    /// Sets the send flags.
    #[inline]
    pub const fn flags(mut self, flags: SendFlags) -> Self {
        self.flags = flags;
        self
    }

    /// Adds `IBV_SEND_SIGNALED`.
    #[inline]
    pub const fn signaled(mut self) -> Self {
        self.flags = self.flags.union(SendFlags::SIGNALED);
        self
    }

    /// Whether the work request asks for a completion (`IBV_SEND_SIGNALED`).
    #[inline(always)]
    pub const fn is_signaled(&self) -> bool {
        self.flags.contains(SendFlags::SIGNALED)
    }
}

impl<'a, A: AddressHandle> SendWr<'a, A> {
    /// Sets the datagram destination ([`UdDest::new`]).
    #[inline]
    pub fn ud(mut self, ah: &'a A, remote_qpn: u32, remote_qkey: u32) -> Self {
        self.ud = Some(UdDest::new(ah, remote_qpn, remote_qkey));
        self
    }
}

/// One receive work request (`struct ibv_recv_wr` without `next`): an id and the buffers the
/// message lands in. A list is a slice, and a refusal names the index of the first work
/// request not posted (`bad_wr`).
#[doc(alias = "ibv_recv_wr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the received bytes go.
    pub sg_list: &'a [Sge],
}

impl<'a> RecvWr<'a> {
    /// A receive into `sg_list`.
    pub const fn new(wr_id: u64, sg_list: &'a [Sge]) -> Self {
        RecvWr { wr_id, sg_list }
    }
}

/// A failed post of a list (`bad_wr`): the work requests before `index` were posted (and for
/// sends the device was told of them); the one at `index` and everything after it were not.
///
/// `E` says why: each provider's own error type in the provider crates, the object model's
/// error (which names the call and the QP, with the provider's error as its source) above
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostError<E> {
    /// Index of the first work request that was not posted (`bad_wr`).
    pub index: usize,
    /// Why.
    pub error: E,
}

impl<E> PostError<E> {
    /// The refusal of the work request at `index` for `error`.
    #[inline]
    pub const fn new(index: usize, error: E) -> Self {
        PostError { index, error }
    }

    /// The same refusal with its error turned into another type.
    #[inline]
    pub fn map<F>(self, f: impl FnOnce(E) -> F) -> PostError<F> {
        PostError {
            index: self.index,
            error: f(self.error),
        }
    }
}

impl<E: core::fmt::Display> core::fmt::Display for PostError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "work request {}: {}", self.index, self.error)
    }
}

impl<E: core::error::Error + 'static> core::error::Error for PostError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}
