//! `CmId` (`struct rdma_cm_id`): one rdma_cm identifier, its event channel and its QP.

use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use uverbs_uapi::ucma::*;
use uverbs_uapi::write::IbUverbsQpAttr;
use zerocopy::{FromZeros, IntoBytes};

use super::addr;
use super::channel::{deadline, EventChannel};
use super::device::context_for_guid;
use super::event::{CmEvent, ConnectRequest};
use super::param::{ah_attr_from_kernel, private_data, ConnInfo, ConnParam, PortSpace, UdParam};
use crate::context::Context;
use crate::error::{Errno, Error, Result};
use crate::mr::AccessFlags;
use crate::pd::Pd;
use crate::qp::{Qp, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState};
use crate::query::{Gid, Mtu};

/// uids we hand the kernel: unique per process, never 0 (the kernel's "none").
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// Where an id is in its life, as far as our own checks need to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmState {
    /// Created, possibly bound.
    Idle,
    /// `resolve_addr` sent, no answer yet.
    AddrQuery,
    /// Address resolved: has a device.
    AddrResolved,
    /// `resolve_route` sent, no answer yet.
    RouteQuery,
    /// Route resolved: may connect.
    RouteResolved,
    /// `connect` sent.
    Connecting,
    /// Listening for connection requests.
    Listening,
    /// A connection request not yet accepted or rejected.
    ConnectRequest,
    /// Accepted (passive side), waiting for ESTABLISHED.
    Accepted,
    /// Connected (ESTABLISHED).
    Connected,
    /// Rejected, unreachable or failed.
    Failed,
    /// Disconnected.
    Disconnected,
}

/// What [`CmId::query`] reports (`rdma_cm_id.route` / `rdma_route`).
#[doc(alias = "rdma_route")]
#[doc(alias = "rdma_addr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmRoute {
    /// Local address (`None` before a bind or resolve).
    pub src_addr: Option<SocketAddr>,
    /// Remote address.
    pub dst_addr: Option<SocketAddr>,
    /// Node GUID of the device (host order; 0: none yet).
    pub node_guid: u64,
    /// Port on that device (from 1; 0: none yet).
    pub port_num: u8,
    /// P_Key.
    pub pkey: u16,
    /// Source GID (the local port's GID for `src_addr`).
    pub sgid: Gid,
    /// Destination GID.
    pub dgid: Gid,
    /// Path records resolved (0 before `resolve_route`).
    pub num_paths: u32,
    /// MTU of the first path (`IB_MTU_*`; 0 when there is none).
    pub path_mtu: u32,
}

/// An option for [`CmId::set_option`] (`rdma_set_option` level `RDMA_OPTION_ID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmOption {
    /// `RDMA_OPTION_ID_TOS`: IP type of service (traffic class) of the connection.
    Tos(u8),
    /// `RDMA_OPTION_ID_REUSEADDR`: let another id bind the same port.
    ReuseAddr(bool),
    /// `RDMA_OPTION_ID_AFONLY`: an IPv6 wildcard listener takes IPv6 only.
    AfOnly(bool),
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`: the QP's local ACK timeout code (4.096 µs × 2^n).
    AckTimeout(u8),
}

/// An rdma_cm identifier (`struct rdma_cm_id`): like a socket, it binds, resolves, listens,
/// connects and accepts; unlike one, the data moves through a verbs QP.
///
/// Each id owns its event channel ([`CmId::event_channel`], also [`AsFd`]); ids made from
/// connection requests are moved to a channel of their own too. The QP made by
/// [`CmId::create_qp`] belongs to the id and is destroyed before the id.
#[doc(alias = "rdma_cm_id")]
pub struct CmId {
    chan: EventChannel,
    handle: u32,
    uid: u64,
    ps: PortSpace,
    state: CmState,
    ctx: Option<Context>,
    port_num: u8,
    qp: Option<Qp>,
    qp_has_srq: bool,
    /// Passive side: the depths the request asked for (swapped by the kernel to our view).
    req_initiator_depth: u8,
    req_responder_resources: u8,
    /// Active side: what connect chose, for the RTR/RTS after the reply.
    initiator_depth: u8,
    responder_resources: u8,
    destroyed: bool,
}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId")
            .field("handle", &self.handle)
            .field("ps", &self.ps)
            .field("state", &self.state)
            .field(
                "device",
                &self.ctx.as_ref().map(|c| c.device().name().to_string()),
            )
            .field("qp", &self.qp.as_ref().map(|q| q.qp_num()))
            .finish()
    }
}

fn status_of(raw: u32) -> i32 {
    raw as i32
}

impl CmId {
    /// Creates an id in port space `ps` with its own event channel (`rdma_create_id`).
    #[doc(alias = "rdma_create_id")]
    pub fn new(ps: PortSpace) -> Result<CmId> {
        Self::with_channel(EventChannel::new()?, ps)
    }

    /// Creates an id whose events arrive on `chan` (`rdma_create_id` with a channel).
    pub fn with_channel(chan: EventChannel, ps: PortSpace) -> Result<CmId> {
        let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
        let mut resp = RdmaUcmCreateIdResp::new_zeroed();
        let req = RdmaUcmCreateId {
            uid,
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            ps: ps.raw(),
            qp_type: ps.qp_type().raw(),
            reserved: [0; 5],
        };
        chan.exec(RDMA_USER_CM_CMD_CREATE_ID, &req, resp.as_mut_bytes())
            .map_err(|e| {
                Error::os(
                    "rdma_create_id",
                    format!("rdma_cm channel fd {}", chan.as_fd().as_raw_fd()),
                    e,
                )
            })?;
        Ok(Self::from_handle(chan, resp.id, uid, ps, CmState::Idle))
    }

    fn from_handle(
        chan: EventChannel,
        handle: u32,
        uid: u64,
        ps: PortSpace,
        state: CmState,
    ) -> Self {
        CmId {
            chan,
            handle,
            uid,
            ps,
            state,
            ctx: None,
            port_num: 0,
            qp: None,
            qp_has_srq: false,
            req_initiator_depth: 0,
            req_responder_resources: 0,
            initiator_depth: 0,
            responder_resources: 0,
            destroyed: false,
        }
    }

    /// `"cm_id 3 (tcp)"`, for messages.
    pub fn label(&self) -> String {
        format!("cm_id {} ({})", self.handle, self.ps.as_str())
    }

    /// The kernel's handle of the id.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The port space.
    pub fn port_space(&self) -> PortSpace {
        self.ps
    }

    /// Where the id is in its life, as far as this library has seen.
    pub fn state(&self) -> CmState {
        self.state
    }

    /// The event channel.
    pub fn event_channel(&self) -> &EventChannel {
        &self.chan
    }

    /// The id's device, opened as a [`Context`] (`rdma_cm_id.verbs`): there once the id is
    /// bound to a device's address, has resolved an address, or came from a request.
    /// Contexts are shared by every id on the same device in this process.
    pub fn context(&self) -> Option<&Context> {
        self.ctx.as_ref()
    }

    /// The device port (from 1; `rdma_cm_id.port_num`), 0 before the id has a device.
    pub fn port_num(&self) -> u8 {
        self.port_num
    }

    /// The id's QP (`rdma_cm_id.qp`).
    pub fn qp(&self) -> Option<&Qp> {
        self.qp.as_ref()
    }

    /// The id's QP, to post work requests.
    pub fn qp_mut(&mut self) -> Option<&mut Qp> {
        self.qp.as_mut()
    }

    fn err(&self, op: &'static str, e: Errno) -> Error {
        Error::os(op, self.label(), e)
    }

    fn invalid(&self, op: &'static str, errno: Errno, why: impl Into<String>) -> Error {
        Error::invalid(op, self.label(), errno, why.into())
    }

    fn exec<T: IntoBytes + zerocopy::Immutable>(
        &self,
        op: &'static str,
        cmd: u32,
        req: &T,
        resp: &mut [u8],
    ) -> Result<()> {
        self.chan.exec(cmd, req, resp).map_err(|e| self.err(op, e))
    }

    /// Binds the id to a local address and port (`rdma_bind_addr`); port 0 picks one. An
    /// address that belongs to an RDMA device gives the id that device.
    #[doc(alias = "rdma_bind_addr")]
    pub fn bind_addr(&mut self, addr: &SocketAddr) -> Result<()> {
        let op = "rdma_bind_addr";
        let mut req = RdmaUcmBind {
            id: self.handle,
            ..Default::default()
        };
        req.addr_size = addr::encode(addr, &mut req.addr) as u16;
        self.exec(op, RDMA_USER_CM_CMD_BIND, &req, &mut []).map_err(|e| {
            match e.errno() {
                Some(Errno::ADDRINUSE) => e.with_reason(format!("{addr} is in use by another rdma_cm id")),
                Some(Errno::ADDRNOTAVAIL) => e.with_reason(format!("{addr} is not an address of this host")),
                Some(Errno::INVAL) => e.with_reason(format!(
                    "cannot bind to {addr} in state {:?} (already bound, or an address family the kernel refuses)",
                    self.state
                )),
                _ => e,
            }
        })?;
        self.refresh_device(op)
    }

    /// Resolves `dst` (and optionally the source) to an RDMA device and address
    /// (`rdma_resolve_addr`); the answer is [`CmEvent::AddrResolved`] or
    /// [`CmEvent::AddrError`] within `timeout`.
    #[doc(alias = "rdma_resolve_addr")]
    pub fn resolve_addr(
        &mut self,
        src: Option<&SocketAddr>,
        dst: &SocketAddr,
        timeout: Duration,
    ) -> Result<()> {
        let op = "rdma_resolve_addr";
        if let Some(s) = src {
            if s.is_ipv4() != dst.is_ipv4() {
                return Err(self.invalid(
                    op,
                    Errno::INVAL,
                    format!("source {s} and destination {dst} are of different address families"),
                ));
            }
        }
        let mut req = RdmaUcmResolveAddr {
            id: self.handle,
            timeout_ms: timeout_ms(timeout),
            ..Default::default()
        };
        if let Some(s) = src {
            req.src_size = addr::encode(s, &mut req.src_addr) as u16;
        }
        req.dst_size = addr::encode(dst, &mut req.dst_addr) as u16;
        self.exec(op, RDMA_USER_CM_CMD_RESOLVE_ADDR, &req, &mut [])
            .map_err(|e| {
                if e.is(Errno::INVAL) {
                    e.with_reason(format!(
                        "cannot resolve {dst} in state {:?} (an address family unlike the bound one, or already resolving)",
                        self.state
                    ))
                } else {
                    e
                }
            })?;
        self.state = CmState::AddrQuery;
        Ok(())
    }

    /// Resolves the route to the resolved address (`rdma_resolve_route`); the answer is
    /// [`CmEvent::RouteResolved`] or [`CmEvent::RouteError`] within `timeout`.
    #[doc(alias = "rdma_resolve_route")]
    pub fn resolve_route(&mut self, timeout: Duration) -> Result<()> {
        let op = "rdma_resolve_route";
        if self.state != CmState::AddrResolved {
            return Err(self.invalid(
                op,
                Errno::INVAL,
                format!("the address is not resolved (state {:?}): resolve_addr and wait for AddrResolved first", self.state),
            ));
        }
        let req = RdmaUcmResolveRoute {
            id: self.handle,
            timeout_ms: timeout_ms(timeout),
        };
        self.exec(op, RDMA_USER_CM_CMD_RESOLVE_ROUTE, &req, &mut [])?;
        self.state = CmState::RouteQuery;
        Ok(())
    }

    /// Listens for connection requests (`rdma_listen`); they arrive as
    /// [`CmEvent::ConnectRequest`]. Bind first (port 0 would listen on a random port).
    #[doc(alias = "rdma_listen")]
    pub fn listen(&mut self, backlog: u32) -> Result<()> {
        let op = "rdma_listen";
        let req = RdmaUcmListen {
            id: self.handle,
            backlog,
        };
        self.exec(op, RDMA_USER_CM_CMD_LISTEN, &req, &mut [])
            .map_err(|e| match e.errno() {
                Some(Errno::ADDRINUSE) => {
                    e.with_reason("another id listens on this address and port")
                }
                Some(Errno::INVAL) => {
                    e.with_reason(format!("cannot listen in state {:?}", self.state))
                }
                _ => e,
            })?;
        self.state = CmState::Listening;
        Ok(())
    }

    /// Queries the id's addresses, device, port and route (`rdma_cm_id.route` after
    /// `ucma_query_route`).
    pub fn query(&self) -> Result<CmRoute> {
        let op = "rdma_query_route";
        let mut a = RdmaUcmQueryAddrResp::new_zeroed();
        let req = RdmaUcmQuery {
            response: a.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            option: RDMA_USER_CM_QUERY_ADDR,
        };
        self.exec(op, RDMA_USER_CM_CMD_QUERY, &req, a.as_mut_bytes())?;
        let mut r = RdmaUcmQueryRouteResp::new_zeroed();
        let req = RdmaUcmQuery {
            response: r.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            option: 0,
        };
        self.exec(op, RDMA_USER_CM_CMD_QUERY_ROUTE, &req, r.as_mut_bytes())?;
        let src = usize::from(a.src_size).min(a.src_addr.len());
        let dst = usize::from(a.dst_size).min(a.dst_addr.len());
        let p = &r.ib_route[0];
        Ok(CmRoute {
            src_addr: addr::decode(&a.src_addr[..src]),
            dst_addr: addr::decode(&a.dst_addr[..dst]),
            node_guid: u64::from_be(a.node_guid),
            port_num: a.port_num,
            pkey: u16::from_be(a.pkey),
            sgid: Gid { raw: p.sgid },
            dgid: Gid { raw: p.dgid },
            num_paths: r.num_paths,
            path_mtu: if r.num_paths > 0 { p.mtu } else { 0 },
        })
    }

    /// Opens the id's device if the kernel has given it one and we have not opened it yet.
    fn refresh_device(&mut self, op: &'static str) -> Result<()> {
        if self.ctx.is_some() {
            return Ok(());
        }
        let mut a = RdmaUcmQueryAddrResp::new_zeroed();
        let req = RdmaUcmQuery {
            response: a.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            option: RDMA_USER_CM_QUERY_ADDR,
        };
        self.exec(op, RDMA_USER_CM_CMD_QUERY, &req, a.as_mut_bytes())?;
        if a.node_guid != 0 {
            self.ctx = Some(context_for_guid(op, &self.label(), a.node_guid)?);
            self.port_num = a.port_num;
        }
        Ok(())
    }

    /// Sets an option (`rdma_set_option`, level `RDMA_OPTION_ID`).
    #[doc(alias = "rdma_set_option")]
    pub fn set_option(&mut self, opt: CmOption) -> Result<()> {
        let op = "rdma_set_option";
        let (name, val): (u32, [u8; 4]) = match opt {
            CmOption::Tos(v) => (RDMA_OPTION_ID_TOS, [v, 0, 0, 0]),
            CmOption::ReuseAddr(b) => (RDMA_OPTION_ID_REUSEADDR, i32::from(b).to_ne_bytes()),
            CmOption::AfOnly(b) => (RDMA_OPTION_ID_AFONLY, i32::from(b).to_ne_bytes()),
            CmOption::AckTimeout(v) => (RDMA_OPTION_ID_ACK_TIMEOUT, [v, 0, 0, 0]),
        };
        let len = match opt {
            CmOption::Tos(_) | CmOption::AckTimeout(_) => 1,
            _ => 4,
        };
        let req = RdmaUcmSetOption {
            optval: val.as_ptr() as u64,
            id: self.handle,
            level: RDMA_OPTION_ID,
            optname: name,
            optlen: len,
        };
        self.exec(op, RDMA_USER_CM_CMD_SET_OPTION, &req, &mut [])
            .map_err(|e| {
                if e.is(Errno::INVAL) {
                    e.with_reason(format!(
                        "{opt:?} is not allowed in state {:?} (REUSEADDR/AFONLY only before bind)",
                        self.state
                    ))
                } else {
                    e
                }
            })
    }

    /// Asks the kernel for the QP attributes of `state` (`rdma_init_qp_attr`).
    #[doc(alias = "rdma_init_qp_attr")]
    pub fn init_qp_attr(&self, state: QpState) -> Result<(QpAttr, QpAttrMask)> {
        let op = "rdma_init_qp_attr";
        let mut r = IbUverbsQpAttr::new_zeroed();
        let req = RdmaUcmInitQpAttr {
            response: r.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            qp_state: u32::from(state.raw()),
        };
        self.exec(op, RDMA_USER_CM_CMD_INIT_QP_ATTR, &req, r.as_mut_bytes())
            .map_err(|e| {
                if e.is(Errno::INVAL) {
                    e.with_reason(format!("no {state:?} attributes in state {:?}", self.state))
                } else {
                    e
                }
            })?;
        Ok(qp_attr_from_kernel(&r))
    }

    fn modify_from_kernel(
        &mut self,
        op: &'static str,
        state: QpState,
        adjust: impl FnOnce(&mut QpAttr),
    ) -> Result<()> {
        let (mut attr, mask) = self.init_qp_attr(state)?;
        adjust(&mut attr);
        let label = self.label();
        let Some(qp) = self.qp.as_mut() else {
            return Ok(());
        };
        qp.modify(&attr, mask).map_err(|e| {
            let reason = format!("moving the QP to {state:?} with the kernel's attributes (mask {mask:?}) for {label}: {}", e.reason());
            Error::invalid(op, e.object().to_string(), e.errno().unwrap_or(Errno::INVAL), reason)
        })
    }

    fn qp_to_error(&mut self) {
        if let Some(qp) = self.qp.as_mut() {
            let attr = QpAttr {
                qp_state: QpState::Err,
                ..QpAttr::default()
            };
            // Best effort, as librdmacm's ucma_modify_qp_err: the QP is being abandoned.
            let _ = qp.modify(&attr, QpAttrMask::STATE);
        }
    }

    /// Creates the id's QP on its device in `pd` (`rdma_create_qp`) and moves it to INIT
    /// (RC) or to RTS (UD) with the attributes the kernel gives.
    ///
    /// `attr.qp_type` must be the port space's ([`PortSpace::qp_type`]); `pd` must be on the
    /// id's device (e.g. `id.context().unwrap().alloc_pd()`).
    #[doc(alias = "rdma_create_qp")]
    pub fn create_qp(&mut self, pd: &Pd, attr: &QpInitAttr<'_>) -> Result<()> {
        let op = "rdma_create_qp";
        let Some(ctx) = self.ctx.as_ref() else {
            return Err(self.invalid(op, Errno::INVAL, format!("the id has no device yet (state {:?}): bind to a device's address, resolve an address, or take an id from a connect request", self.state)));
        };
        if self.qp.is_some() {
            return Err(self.invalid(op, Errno::INVAL, "the id already has a QP"));
        }
        if pd.context().device().node_guid() != ctx.device().node_guid() {
            return Err(self.invalid(
                op,
                Errno::INVAL,
                format!(
                    "the PD is on {} but the id is on {}",
                    pd.context().device().name(),
                    ctx.device().name()
                ),
            ));
        }
        if attr.qp_type != self.ps.qp_type() {
            return Err(self.invalid(
                op,
                Errno::INVAL,
                format!(
                    "a {} id takes a {:?} QP, not {:?}",
                    self.ps.as_str(),
                    self.ps.qp_type(),
                    attr.qp_type
                ),
            ));
        }
        let qp = pd.create_qp(attr)?;
        self.qp = Some(qp);
        self.qp_has_srq = attr.srq.is_some();
        let r = match self.ps {
            PortSpace::Tcp => self.modify_from_kernel(op, QpState::Init, |_| ()),
            PortSpace::Udp => self.init_ud_qp(op),
        };
        if let Err(e) = r {
            self.qp = None;
            return Err(e);
        }
        Ok(())
    }

    fn init_ud_qp(&mut self, op: &'static str) -> Result<()> {
        self.modify_from_kernel(op, QpState::Init, |_| ())?;
        let Some(qp) = self.qp.as_mut() else {
            return Ok(());
        };
        let rtr = QpAttr {
            qp_state: QpState::Rtr,
            ..QpAttr::default()
        };
        qp.modify(&rtr, QpAttrMask::STATE)?;
        let rts = QpAttr {
            qp_state: QpState::Rts,
            sq_psn: 0,
            ..QpAttr::default()
        };
        qp.modify(&rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
    }

    /// Destroys the id's QP (`rdma_destroy_qp`). If the kernel refuses (e.g. `EBUSY` while
    /// the QP is attached to a multicast group), the QP stays with the id, usable, and the
    /// error is returned, so the cause can be removed and the call repeated.
    #[doc(alias = "rdma_destroy_qp")]
    pub fn destroy_qp(&mut self) -> Result<()> {
        match self.qp.take() {
            Some(qp) => qp.destroy().map(|_| ()).map_err(|e| {
                let (qp, err) = e.into_parts();
                self.qp = Some(qp);
                err
            }),
            None => Ok(()),
        }
    }

    fn device_limits(&self) -> (u8, u8) {
        // (max responder resources, max initiator depth) as librdmacm's cma_device keeps them.
        match self.ctx.as_ref().and_then(|c| c.query_device().ok()) {
            Some(a) => (
                u8::try_from(a.max_qp_rd_atom).unwrap_or(u8::MAX - 1),
                u8::try_from(a.max_qp_init_rd_atom).unwrap_or(u8::MAX - 1),
            ),
            None => (0, 0),
        }
    }

    fn kernel_conn_param(
        &self,
        op: &'static str,
        p: &ConnParam<'_>,
        max: usize,
    ) -> Result<RdmaUcmConnParam> {
        if p.private_data.len() > max {
            return Err(self.invalid(
                op,
                Errno::INVAL,
                format!(
                    "{} bytes of private data, but {} on a {} id carries at most {max}",
                    p.private_data.len(),
                    op,
                    self.ps.as_str()
                ),
            ));
        }
        let mut k = RdmaUcmConnParam {
            qp_num: self.qp.as_ref().map_or(p.qp_num, |q| q.qp_num()),
            srq: u8::from(if self.qp.is_some() {
                self.qp_has_srq
            } else {
                p.srq
            }),
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            flow_control: p.flow_control,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            valid: 1,
            private_data_len: p.private_data.len() as u8,
            ..Default::default()
        };
        k.private_data[..p.private_data.len()].copy_from_slice(p.private_data);
        Ok(k)
    }

    /// Connects to the resolved peer (`rdma_connect`): RC sends a CM REQ, UD a SIDR REQ. The
    /// answer is [`CmEvent::Established`] (with a QP: the QP has been moved to RTR and RTS),
    /// [`CmEvent::ConnectResponse`] (without a QP), [`CmEvent::Rejected`] or
    /// [`CmEvent::Unreachable`].
    #[doc(alias = "rdma_connect")]
    pub fn connect(&mut self, param: &ConnParam<'_>) -> Result<()> {
        let op = "rdma_connect";
        if self.state != CmState::RouteResolved {
            return Err(self.invalid(op, Errno::INVAL, format!(
                "the route is not resolved (state {:?}): resolve_addr, resolve_route and wait for RouteResolved first",
                self.state
            )));
        }
        if self.ps == PortSpace::Tcp && self.qp.is_none() && param.qp_num == 0 {
            return Err(self.invalid(
                op,
                Errno::INVAL,
                "the id has no QP and the ConnParam names none (qp_num 0)",
            ));
        }
        let (max_rr, max_id) = self.device_limits();
        if self.ps == PortSpace::Tcp {
            if param.responder_resources != ConnParam::DEVICE_MAX
                && param.responder_resources > max_rr
            {
                return Err(self.invalid(
                    op,
                    Errno::INVAL,
                    format!(
                        "responder_resources {} exceeds the device's {max_rr}",
                        param.responder_resources
                    ),
                ));
            }
            if param.initiator_depth != ConnParam::DEVICE_MAX && param.initiator_depth > max_id {
                return Err(self.invalid(
                    op,
                    Errno::INVAL,
                    format!(
                        "initiator_depth {} exceeds the device's {max_id}",
                        param.initiator_depth
                    ),
                ));
            }
        }
        self.initiator_depth = if param.initiator_depth == ConnParam::DEVICE_MAX {
            max_id
        } else {
            param.initiator_depth
        };
        self.responder_resources = if param.responder_resources == ConnParam::DEVICE_MAX {
            max_rr
        } else {
            param.responder_resources
        };
        let conn_param = self.kernel_conn_param(op, param, self.ps.max_connect_private_data())?;
        let req = RdmaUcmConnect {
            conn_param,
            id: self.handle,
            ..Default::default()
        };
        self.exec(op, RDMA_USER_CM_CMD_CONNECT, &req, &mut [])?;
        self.state = CmState::Connecting;
        Ok(())
    }

    /// Accepts the connection request this id came from (`rdma_accept`). RC: the QP moves
    /// to RTR and RTS first; [`CmEvent::Established`] follows when the peer's RTU arrives.
    #[doc(alias = "rdma_accept")]
    pub fn accept(&mut self, param: &ConnParam<'_>) -> Result<()> {
        let op = "rdma_accept";
        if self.state != CmState::ConnectRequest {
            return Err(self.invalid(op, Errno::INVAL, format!(
                "the id is not a pending connection request (state {:?}): accept the id of a ConnectRequest event",
                self.state
            )));
        }
        if self.ps == PortSpace::Tcp && self.qp.is_none() && param.qp_num == 0 {
            return Err(self.invalid(
                op,
                Errno::INVAL,
                "the id has no QP and the ConnParam names none (qp_num 0)",
            ));
        }
        if param.private_data.len() > self.ps.max_accept_private_data() {
            // Checked before the QP moves, so a refused accept leaves it untouched.
            self.kernel_conn_param(op, param, self.ps.max_accept_private_data())?;
        }
        let (max_rr, max_id) = self.device_limits();
        self.initiator_depth = if param.initiator_depth == ConnParam::DEVICE_MAX {
            self.req_initiator_depth.min(max_id)
        } else {
            param.initiator_depth
        };
        self.responder_resources = if param.responder_resources == ConnParam::DEVICE_MAX {
            self.req_responder_resources.min(max_rr)
        } else {
            param.responder_resources
        };
        if self.ps == PortSpace::Tcp {
            let rr = self.responder_resources;
            let id = self.initiator_depth;
            self.modify_from_kernel(op, QpState::Init, |_| ())?;
            self.modify_from_kernel(op, QpState::Rtr, |a| a.max_dest_rd_atomic = rr)?;
            self.modify_from_kernel(op, QpState::Rts, |a| a.max_rd_atomic = id)?;
        }
        let conn_param = self.kernel_conn_param(op, param, self.ps.max_accept_private_data())?;
        self.uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
        let req = RdmaUcmAccept {
            uid: self.uid,
            conn_param,
            id: self.handle,
            ..Default::default()
        };
        if let Err(e) = self.exec(op, RDMA_USER_CM_CMD_ACCEPT, &req, &mut []) {
            self.qp_to_error();
            self.state = CmState::Failed;
            return Err(e);
        }
        self.state = if self.ps == PortSpace::Udp {
            CmState::Connected
        } else {
            CmState::Accepted
        };
        Ok(())
    }

    /// Refuses the connection request this id came from (`rdma_reject`); the peer sees
    /// [`CmEvent::Rejected`] with `private_data`.
    #[doc(alias = "rdma_reject")]
    pub fn reject(&mut self, private_data: &[u8]) -> Result<()> {
        let op = "rdma_reject";
        if self.state != CmState::ConnectRequest {
            return Err(self.invalid(
                op,
                Errno::INVAL,
                format!(
                    "the id is not a pending connection request (state {:?})",
                    self.state
                ),
            ));
        }
        let max = self.ps.max_reject_private_data();
        if private_data.len() > max {
            return Err(self.invalid(
                op,
                Errno::INVAL,
                format!(
                    "{} bytes of private data, but a reject on a {} id carries at most {max}",
                    private_data.len(),
                    self.ps.as_str()
                ),
            ));
        }
        let mut req = RdmaUcmReject {
            id: self.handle,
            private_data_len: private_data.len() as u8,
            ..Default::default()
        };
        req.private_data[..private_data.len()].copy_from_slice(private_data);
        self.exec(op, RDMA_USER_CM_CMD_REJECT, &req, &mut [])?;
        self.state = CmState::Failed;
        Ok(())
    }

    /// Sends the RTU for an id without a QP after [`CmEvent::ConnectResponse`]
    /// (`rdma_establish`).
    #[doc(alias = "rdma_establish")]
    pub fn establish(&mut self) -> Result<()> {
        let op = "rdma_establish";
        if self.qp.is_some() {
            return Err(self.invalid(
                op,
                Errno::INVAL,
                "the id has a QP: its connection is established by get_cm_event",
            ));
        }
        self.send_rtu(op)?;
        self.state = CmState::Connected;
        Ok(())
    }

    fn send_rtu(&self, op: &'static str) -> Result<()> {
        let req = RdmaUcmAccept {
            id: self.handle,
            ..Default::default()
        };
        self.exec(op, RDMA_USER_CM_CMD_ACCEPT, &req, &mut [])
    }

    /// Tells the kernel about a QP event it cannot see (`rdma_notify`), e.g.
    /// `IB_EVENT_COMM_EST` (9) when data arrives before the RTU.
    #[doc(alias = "rdma_notify")]
    pub fn notify(&mut self, event: u32) -> Result<()> {
        let req = RdmaUcmNotify {
            id: self.handle,
            event,
        };
        self.exec("rdma_notify", RDMA_USER_CM_CMD_NOTIFY, &req, &mut [])
    }

    /// Disconnects (`rdma_disconnect`): the QP goes to the error state (its outstanding work
    /// requests flush) and both sides get [`CmEvent::Disconnected`].
    #[doc(alias = "rdma_disconnect")]
    pub fn disconnect(&mut self) -> Result<()> {
        let op = "rdma_disconnect";
        self.qp_to_error();
        let req = RdmaUcmDisconnect { id: self.handle };
        self.exec(op, RDMA_USER_CM_CMD_DISCONNECT, &req, &mut [])
            .map_err(|e| {
                if e.is(Errno::INVAL) {
                    e.with_reason(format!("the id is not connected (state {:?})", self.state))
                } else {
                    e
                }
            })
    }

    /// Joins the multicast group `addr` (`rdma_join_multicast`, full member); the answer is
    /// [`CmEvent::MulticastJoin`] with the group's address vector, then the QP is attached.
    /// Returns the membership handle for [`CmId::leave_multicast`].
    #[doc(alias = "rdma_join_multicast")]
    pub fn join_multicast(&mut self, addr: &SocketAddr) -> Result<u32> {
        let op = "rdma_join_multicast";
        if self.ps != PortSpace::Udp {
            return Err(self.invalid(op, Errno::INVAL, "multicast needs a udp id"));
        }
        let mut resp = RdmaUcmCreateIdResp::new_zeroed();
        let mut req = RdmaUcmJoinMcast {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            uid: self.uid,
            id: self.handle,
            join_flags: RDMA_MC_JOIN_FLAG_FULLMEMBER,
            ..Default::default()
        };
        req.addr_size = addr::encode(addr, &mut req.addr) as u16;
        self.exec(op, RDMA_USER_CM_CMD_JOIN_MCAST, &req, resp.as_mut_bytes())?;
        Ok(resp.id)
    }

    /// Leaves a multicast group joined with [`CmId::join_multicast`] (`rdma_leave_multicast`);
    /// detaches the QP first when `mgid`/`mlid` from the join event are given.
    #[doc(alias = "rdma_leave_multicast")]
    pub fn leave_multicast(&mut self, membership: u32, joined: Option<&UdParam>) -> Result<()> {
        let op = "rdma_leave_multicast";
        if let (Some(qp), Some(ud)) = (self.qp.as_ref(), joined) {
            qp.detach_mcast(&ud.ah_attr.grh.dgid, ud.ah_attr.dlid)?;
        }
        let mut resp = RdmaUcmDestroyIdResp::new_zeroed();
        let req = RdmaUcmDestroyId {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            id: membership,
            reserved: 0,
        };
        self.exec(op, RDMA_USER_CM_CMD_LEAVE_MCAST, &req, resp.as_mut_bytes())
    }

    /// Waits up to `timeout` for the id's next event and reads it (`rdma_get_cm_event`).
    ///
    /// Handles what librdmacm handles inside `rdma_get_cm_event`: a connection request
    /// becomes a new id on its own channel with its device open; a reply to our connect
    /// moves our QP to RTR and RTS and sends the RTU (reported as `Established`); a reject
    /// moves our QP to the error state; a multicast join attaches our QP to the group.
    ///
    /// No event within `timeout`: `ETIMEDOUT`.
    #[doc(alias = "rdma_get_cm_event")]
    pub fn get_cm_event(&mut self, timeout: Duration) -> Result<CmEvent> {
        let op = "rdma_get_cm_event";
        let dl = deadline(timeout);
        loop {
            match self.try_get_cm_event()? {
                Some(ev) => return Ok(ev),
                None => {
                    let ready = self.chan.wait_readable(dl).map_err(|e| self.err(op, e))?;
                    if !ready {
                        return Err(self.invalid(
                            op,
                            Errno::TIMEDOUT,
                            format!("no event within {timeout:?} (state {:?})", self.state),
                        ));
                    }
                }
            }
        }
    }

    /// Reads the id's next event if one is queued, without waiting.
    pub fn try_get_cm_event(&mut self) -> Result<Option<CmEvent>> {
        let op = "rdma_get_cm_event";
        let mut resp = RdmaUcmEventResp::new_zeroed();
        let req = RdmaUcmGetEvent {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
        };
        match self
            .chan
            .exec(RDMA_USER_CM_CMD_GET_EVENT, &req, resp.as_mut_bytes())
        {
            Ok(()) => self.process(resp).map(Some),
            Err(Errno::AGAIN) => Ok(None),
            Err(e) => Err(self.err(op, e)),
        }
    }

    fn process(&mut self, r: RdmaUcmEventResp) -> Result<CmEvent> {
        let op = "rdma_get_cm_event";
        let status = status_of(r.status);
        let conn = r.conn();
        let pd = || private_data(&conn.private_data, conn.private_data_len);
        Ok(match r.event {
            RDMA_CM_EVENT_ADDR_RESOLVED => {
                self.state = CmState::AddrResolved;
                self.refresh_device(op)?;
                CmEvent::AddrResolved
            }
            RDMA_CM_EVENT_ADDR_ERROR => {
                self.state = CmState::Idle;
                CmEvent::AddrError { status }
            }
            RDMA_CM_EVENT_ROUTE_RESOLVED => {
                self.state = CmState::RouteResolved;
                CmEvent::RouteResolved
            }
            RDMA_CM_EVENT_ROUTE_ERROR => {
                self.state = CmState::AddrResolved;
                CmEvent::RouteError { status }
            }
            RDMA_CM_EVENT_CONNECT_REQUEST => self.connect_request(&r)?,
            RDMA_CM_EVENT_CONNECT_RESPONSE => {
                let param = ConnInfo::from_kernel(&conn);
                if self.qp.is_none() {
                    CmEvent::ConnectResponse {
                        private_data: pd(),
                        param,
                    }
                } else {
                    match self.complete_connect() {
                        Ok(()) => {
                            self.state = CmState::Connected;
                            CmEvent::Established {
                                private_data: pd(),
                                param,
                                ud: None,
                            }
                        }
                        Err(e) => {
                            self.qp_to_error();
                            self.state = CmState::Failed;
                            CmEvent::ConnectError {
                                status: -e
                                    .errno()
                                    .map_or(Errno::INVAL.raw_os_error(), |n| n.raw_os_error()),
                            }
                        }
                    }
                }
            }
            RDMA_CM_EVENT_CONNECT_ERROR => {
                self.state = CmState::Failed;
                CmEvent::ConnectError { status }
            }
            RDMA_CM_EVENT_UNREACHABLE => {
                self.state = CmState::Failed;
                CmEvent::Unreachable { status }
            }
            RDMA_CM_EVENT_REJECTED => {
                self.qp_to_error();
                self.state = CmState::Failed;
                CmEvent::Rejected {
                    status,
                    private_data: pd(),
                }
            }
            RDMA_CM_EVENT_ESTABLISHED => {
                self.state = CmState::Connected;
                if self.ps == PortSpace::Udp {
                    let ud = r.ud();
                    CmEvent::Established {
                        private_data: private_data(&ud.private_data, ud.private_data_len),
                        param: ConnInfo::default(),
                        ud: Some(UdParam::from_kernel(&ud)),
                    }
                } else {
                    CmEvent::Established {
                        private_data: pd(),
                        param: ConnInfo::from_kernel(&conn),
                        ud: None,
                    }
                }
            }
            RDMA_CM_EVENT_DISCONNECTED => {
                self.state = CmState::Disconnected;
                CmEvent::Disconnected
            }
            RDMA_CM_EVENT_DEVICE_REMOVAL => CmEvent::DeviceRemoval,
            RDMA_CM_EVENT_MULTICAST_JOIN => {
                let ud = UdParam::from_kernel(&r.ud());
                if let Some(qp) = self.qp.as_ref() {
                    if let Err(e) = qp.attach_mcast(&ud.ah_attr.grh.dgid, ud.ah_attr.dlid) {
                        return Ok(CmEvent::MulticastError {
                            status: -e
                                .errno()
                                .map_or(Errno::INVAL.raw_os_error(), |n| n.raw_os_error()),
                        });
                    }
                }
                CmEvent::MulticastJoin { ud }
            }
            RDMA_CM_EVENT_MULTICAST_ERROR => CmEvent::MulticastError { status },
            RDMA_CM_EVENT_ADDR_CHANGE => CmEvent::AddrChange,
            RDMA_CM_EVENT_TIMEWAIT_EXIT => CmEvent::TimewaitExit,
            event => CmEvent::Other { event, status },
        })
    }

    /// Active side, reply received: INIT (again, now with the CM's access flags), RTR, RTS,
    /// then the RTU (librdmacm's `ucma_process_conn_resp`).
    fn complete_connect(&mut self) -> Result<()> {
        let op = "rdma_get_cm_event";
        self.modify_from_kernel(op, QpState::Init, |_| ())?;
        self.modify_from_kernel(op, QpState::Rtr, |_| ())?;
        self.modify_from_kernel(op, QpState::Rts, |_| ())?;
        self.send_rtu(op)
    }

    fn connect_request(&mut self, r: &RdmaUcmEventResp) -> Result<CmEvent> {
        let op = "rdma_get_cm_event";
        // The new id's events go to a channel of its own (librdmacm's rdma_migrate_id for
        // synchronous ids); until then it is on ours, so destroy it here if that fails.
        let destroy_new = |me: &CmId| {
            let mut resp = RdmaUcmDestroyIdResp::new_zeroed();
            let req = RdmaUcmDestroyId {
                response: resp.as_mut_bytes().as_mut_ptr() as u64,
                id: r.id,
                reserved: 0,
            };
            let _ = me
                .chan
                .exec(RDMA_USER_CM_CMD_DESTROY_ID, &req, resp.as_mut_bytes());
        };
        let chan = match EventChannel::new() {
            Ok(c) => c,
            Err(e) => {
                destroy_new(self);
                return Err(e);
            }
        };
        // MIGRATE_ID is written to the channel the id moves to and names the fd it is on now.
        let mut mresp = RdmaUcmMigrateResp::new_zeroed();
        let req = RdmaUcmMigrateId {
            response: mresp.as_mut_bytes().as_mut_ptr() as u64,
            id: r.id,
            fd: self.chan.as_fd().as_raw_fd() as u32,
        };
        if let Err(e) = chan.exec(RDMA_USER_CM_CMD_MIGRATE_ID, &req, mresp.as_mut_bytes()) {
            destroy_new(self);
            return Err(Error::os(op, self.label(), e)
                .with_reason(format!("moving the new id {} to its own channel", r.id)));
        }
        let mut id = CmId::from_handle(chan, r.id, 0, self.ps, CmState::ConnectRequest);
        let (private_data, param, ud) = if self.ps == PortSpace::Udp {
            let u = r.ud();
            (
                private_data(&u.private_data, u.private_data_len),
                ConnInfo::default(),
                Some(UdParam::from_kernel(&u)),
            )
        } else {
            let c = r.conn();
            id.req_initiator_depth = c.initiator_depth;
            id.req_responder_resources = c.responder_resources;
            (
                private_data(&c.private_data, c.private_data_len),
                ConnInfo::from_kernel(&c),
                None,
            )
        };
        id.refresh_device(op)?;
        Ok(CmEvent::ConnectRequest(Box::new(ConnectRequest {
            id,
            private_data,
            param,
            ud,
        })))
    }

    /// Destroys the id now (`rdma_destroy_id`), its QP first; returns how many events the
    /// kernel delivered for it.
    #[doc(alias = "rdma_destroy_id")]
    pub fn destroy(mut self) -> Result<u32> {
        self.destroy_qp()?;
        let r = self.destroy_kernel();
        self.destroyed = true;
        r
    }

    fn destroy_kernel(&self) -> Result<u32> {
        let mut resp = RdmaUcmDestroyIdResp::new_zeroed();
        let req = RdmaUcmDestroyId {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            reserved: 0,
        };
        self.exec(
            "rdma_destroy_id",
            RDMA_USER_CM_CMD_DESTROY_ID,
            &req,
            resp.as_mut_bytes(),
        )?;
        Ok(resp.events_reported)
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        if self.destroyed {
            return;
        }
        // The QP first (librdmacm requires rdma_destroy_qp before rdma_destroy_id).
        drop(self.qp.take());
        if let Err(e) = self.destroy_kernel() {
            crate::report_drop_error(
                "rdma_destroy_id",
                &self.label(),
                e.errno().unwrap_or(Errno::IO),
            );
        }
    }
}

impl AsFd for CmId {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.chan.as_fd()
    }
}

fn timeout_ms(t: Duration) -> u32 {
    u32::try_from(t.as_millis()).unwrap_or(u32::MAX)
}

/// `struct ib_uverbs_qp_attr` as `INIT_QP_ATTR` writes it → our attributes and mask (bits we
/// do not know are dropped, as librdmacm drops the RoCE-era bits 21-24 on IB).
pub(crate) fn qp_attr_from_kernel(r: &IbUverbsQpAttr) -> (QpAttr, QpAttrMask) {
    let attr = QpAttr {
        qp_state: QpState::from_raw(r.qp_state as u8),
        cur_qp_state: QpState::from_raw(r.cur_qp_state as u8),
        path_mtu: Mtu::from_raw(r.path_mtu as u8),
        path_mig_state: r.path_mig_state as u8,
        qkey: r.qkey,
        rq_psn: r.rq_psn,
        sq_psn: r.sq_psn,
        dest_qp_num: r.dest_qp_num,
        qp_access_flags: AccessFlags::from_bits_retain(r.qp_access_flags),
        cap: QpCap {
            max_send_wr: r.max_send_wr,
            max_recv_wr: r.max_recv_wr,
            max_send_sge: r.max_send_sge,
            max_recv_sge: r.max_recv_sge,
            max_inline_data: r.max_inline_data,
        },
        ah_attr: ah_attr_from_kernel(&r.ah_attr),
        alt_ah_attr: ah_attr_from_kernel(&r.alt_ah_attr),
        pkey_index: r.pkey_index,
        alt_pkey_index: r.alt_pkey_index,
        en_sqd_async_notify: r.en_sqd_async_notify != 0,
        sq_draining: r.sq_draining != 0,
        max_rd_atomic: r.max_rd_atomic,
        max_dest_rd_atomic: r.max_dest_rd_atomic,
        min_rnr_timer: r.min_rnr_timer,
        port_num: r.port_num,
        timeout: r.timeout,
        retry_cnt: r.retry_cnt,
        rnr_retry: r.rnr_retry,
        alt_port_num: r.alt_port_num,
        alt_timeout: r.alt_timeout,
        rate_limit: 0,
    };
    (attr, QpAttrMask::from_bits_truncate(r.qp_attr_mask))
}
