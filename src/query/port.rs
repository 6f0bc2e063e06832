//! Port attributes: `ibv_query_port` (the `UVERBS_METHOD_QUERY_PORT` ioctl, falling back to
//! the legacy `IB_USER_VERBS_CMD_QUERY_PORT` write when the kernel lacks the method) and
//! `ibv_query_port_speed`, the types they decode into, and the errors for a port number out of
//! range that the other queries share.

use uverbs_uapi::cmds::{
    UVERBS_ATTR_QUERY_PORT_PORT_NUM, UVERBS_ATTR_QUERY_PORT_RESP,
    UVERBS_ATTR_QUERY_PORT_SPEED_PORT_NUM, UVERBS_ATTR_QUERY_PORT_SPEED_RESP,
    UVERBS_METHOD_QUERY_PORT, UVERBS_METHOD_QUERY_PORT_SPEED, UVERBS_OBJECT_DEVICE,
};
use uverbs_uapi::verbs::IbUverbsQueryPortRespEx;
use uverbs_uapi::write::{IbUverbsQueryPort, IbUverbsQueryPortResp, IB_USER_VERBS_CMD_QUERY_PORT};

use super::lacks_method;
use crate::channel::IoctlCmd;
use crate::context::{legacy_cmd, Context};
use crate::error::{Errno, Error, Result};

/// The logical state of a port (`enum ibv_port_state`).
#[doc(alias = "ibv_port_state")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortState {
    /// `IBV_PORT_NOP`.
    Nop,
    /// `IBV_PORT_DOWN`: the link is down.
    Down,
    /// `IBV_PORT_INIT`: the link is up, the port is not configured yet.
    Init,
    /// `IBV_PORT_ARMED`.
    Armed,
    /// `IBV_PORT_ACTIVE`: the port can send and receive.
    Active,
    /// `IBV_PORT_ACTIVE_DEFER`.
    ActiveDefer,
    /// A value this library does not know.
    Unknown(u8),
}

impl PortState {
    /// From the kernel's number (`IB_PORT_*`).
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => PortState::Nop,
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            5 => PortState::ActiveDefer,
            x => PortState::Unknown(x),
        }
    }
    /// The kernel's number.
    pub fn raw(self) -> u8 {
        match self {
            PortState::Nop => 0,
            PortState::Down => 1,
            PortState::Init => 2,
            PortState::Armed => 3,
            PortState::Active => 4,
            PortState::ActiveDefer => 5,
            PortState::Unknown(x) => x,
        }
    }
    /// The name `ibv_devinfo` prints (`PORT_ACTIVE`, ...; `invalid state` for others).
    pub fn as_str(self) -> &'static str {
        match self {
            PortState::Down => "PORT_DOWN",
            PortState::Init => "PORT_INIT",
            PortState::Armed => "PORT_ARMED",
            PortState::Active => "PORT_ACTIVE",
            _ => "invalid state",
        }
    }
}

/// A path MTU (`enum ibv_mtu`).
#[doc(alias = "ibv_mtu")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    /// `IBV_MTU_256`.
    Mtu256,
    /// `IBV_MTU_512`.
    Mtu512,
    /// `IBV_MTU_1024`.
    Mtu1024,
    /// `IBV_MTU_2048`.
    Mtu2048,
    /// `IBV_MTU_4096`.
    Mtu4096,
    /// A value this library does not know.
    Unknown(u8),
}

impl Mtu {
    /// From the kernel's number (`IB_MTU_*`).
    pub fn from_raw(v: u8) -> Self {
        match v {
            1 => Mtu::Mtu256,
            2 => Mtu::Mtu512,
            3 => Mtu::Mtu1024,
            4 => Mtu::Mtu2048,
            5 => Mtu::Mtu4096,
            x => Mtu::Unknown(x),
        }
    }
    /// The kernel's number.
    pub fn raw(self) -> u8 {
        match self {
            Mtu::Mtu256 => 1,
            Mtu::Mtu512 => 2,
            Mtu::Mtu1024 => 3,
            Mtu::Mtu2048 => 4,
            Mtu::Mtu4096 => 5,
            Mtu::Unknown(x) => x,
        }
    }
    /// The MTU in bytes (`None` for an unknown value).
    pub fn bytes(self) -> Option<u32> {
        match self {
            Mtu::Unknown(_) => None,
            m => Some(128 << m.raw()),
        }
    }
    /// The name `ibv_devinfo` prints (`1024`, ...; `invalid MTU` for others).
    pub fn as_str(self) -> &'static str {
        match self {
            Mtu::Mtu256 => "256",
            Mtu::Mtu512 => "512",
            Mtu::Mtu1024 => "1024",
            Mtu::Mtu2048 => "2048",
            Mtu::Mtu4096 => "4096",
            Mtu::Unknown(_) => "invalid MTU",
        }
    }
}

/// The link layer of a port (`IBV_LINK_LAYER_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    /// `IBV_LINK_LAYER_UNSPECIFIED` (EFA).
    Unspecified,
    /// `IBV_LINK_LAYER_INFINIBAND`.
    InfiniBand,
    /// `IBV_LINK_LAYER_ETHERNET` (RoCE: rxe). EFA reports `Unspecified`.
    Ethernet,
    /// A value this library does not know.
    Unknown(u8),
}

impl LinkLayer {
    /// From the kernel's number (`IB_LINK_LAYER_*`).
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => LinkLayer::Unspecified,
            1 => LinkLayer::InfiniBand,
            2 => LinkLayer::Ethernet,
            x => LinkLayer::Unknown(x),
        }
    }
    /// The kernel's number.
    pub fn raw(self) -> u8 {
        match self {
            LinkLayer::Unspecified => 0,
            LinkLayer::InfiniBand => 1,
            LinkLayer::Ethernet => 2,
            LinkLayer::Unknown(x) => x,
        }
    }
    /// The name `ibv_devinfo` prints (`Ethernet`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            LinkLayer::Unspecified => "Unspecified",
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
            LinkLayer::Unknown(_) => "Unknown",
        }
    }
}

/// Port attributes (`struct ibv_port_attr`), from `ibv_query_port`.
#[doc(alias = "ibv_port_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortAttr {
    /// Logical port state.
    pub state: PortState,
    /// Largest MTU the port supports.
    pub max_mtu: Mtu,
    /// The MTU in use.
    pub active_mtu: Mtu,
    /// GID table length.
    pub gid_tbl_len: u32,
    /// `IBV_PORT_*` capability bits.
    pub port_cap_flags: u32,
    /// Largest message size.
    pub max_msg_sz: u32,
    /// Bad P_Key counter.
    pub bad_pkey_cntr: u32,
    /// Q_Key violation counter.
    pub qkey_viol_cntr: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// Base LID.
    pub lid: u16,
    /// Subnet manager LID.
    pub sm_lid: u16,
    /// LID mask control.
    pub lmc: u8,
    /// Maximum virtual lanes (encoded: 1 -> 1, 2 -> 2, 3 -> 4, 4 -> 8, 5 -> 15).
    pub max_vl_num: u8,
    /// Subnet manager SL.
    pub sm_sl: u8,
    /// Subnet propagation delay (encoded).
    pub subnet_timeout: u8,
    /// InitTypeReply.
    pub init_type_reply: u8,
    /// Link width (encoded: 1 -> 1X, 2 -> 4X, 4 -> 8X, 8 -> 12X, 16 -> 2X).
    pub active_width: u8,
    /// Link speed (encoded, see [`PortAttr::active_speed_str`]).
    pub active_speed: u8,
    /// Physical port state (1 sleep ... 5 link up).
    pub phys_state: u8,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// `IBV_QPF_*` flags.
    pub flags: u8,
    /// `IBV_PORT_*2` capability bits (0 from the legacy command).
    pub port_cap_flags2: u16,
    /// Extended link speed (newer kernels; 0 otherwise).
    pub active_speed_ex: u32,
}

impl PortAttr {
    fn from_legacy(r: &IbUverbsQueryPortResp) -> Self {
        PortAttr {
            state: PortState::from_raw(r.state),
            max_mtu: Mtu::from_raw(r.max_mtu),
            active_mtu: Mtu::from_raw(r.active_mtu),
            gid_tbl_len: r.gid_tbl_len,
            port_cap_flags: r.port_cap_flags,
            max_msg_sz: r.max_msg_sz,
            bad_pkey_cntr: r.bad_pkey_cntr,
            qkey_viol_cntr: r.qkey_viol_cntr,
            pkey_tbl_len: r.pkey_tbl_len,
            lid: r.lid,
            sm_lid: r.sm_lid,
            lmc: r.lmc,
            max_vl_num: r.max_vl_num,
            sm_sl: r.sm_sl,
            subnet_timeout: r.subnet_timeout,
            init_type_reply: r.init_type_reply,
            active_width: r.active_width,
            active_speed: r.active_speed,
            phys_state: r.phys_state,
            link_layer: LinkLayer::from_raw(r.link_layer),
            flags: r.flags,
            port_cap_flags2: 0,
            active_speed_ex: 0,
        }
    }

    fn from_ex(r: &IbUverbsQueryPortRespEx) -> Self {
        PortAttr {
            port_cap_flags2: r.port_cap_flags2,
            active_speed_ex: r.active_speed_ex,
            ..PortAttr::from_legacy(&r.legacy_resp)
        }
    }

    /// The speed in use: `active_speed_ex` when the kernel reports it, else `active_speed`
    /// (what `ibv_devinfo` shows).
    pub fn effective_active_speed(&self) -> u32 {
        if self.active_speed_ex != 0 {
            self.active_speed_ex
        } else {
            u32::from(self.active_speed)
        }
    }

    /// The speed as `ibv_devinfo` prints it (`25.0 Gbps`, ...).
    pub fn active_speed_str(&self) -> &'static str {
        speed_str(self.effective_active_speed())
    }

    /// The width as `ibv_devinfo` prints it before the `X` (`4` for 4X, ...).
    pub fn active_width_str(&self) -> &'static str {
        match self.active_width {
            1 => "1",
            2 => "4",
            4 => "8",
            8 => "12",
            16 => "2",
            _ => "invalid width",
        }
    }

    /// The number of virtual lanes as `ibv_devinfo` prints it.
    pub fn max_vl_num_str(&self) -> &'static str {
        match self.max_vl_num {
            1 => "1",
            2 => "2",
            3 => "4",
            4 => "8",
            5 => "15",
            _ => "invalid value",
        }
    }

    /// The physical state as `ibv_devinfo` prints it (`LINK_UP`, ...).
    pub fn phys_state_str(&self) -> &'static str {
        match self.phys_state {
            1 => "SLEEP",
            2 => "POLLING",
            3 => "DISABLED",
            4 => "PORT_CONFIGURATION TRAINNING",
            5 => "LINK_UP",
            6 => "LINK_ERROR_RECOVERY",
            7 => "PHY TEST",
            _ => "invalid physical state",
        }
    }
}

/// A link speed code (`active_speed`/`active_speed_ex`) as `ibv_devinfo` prints it.
pub fn speed_str(speed: u32) -> &'static str {
    match speed {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        256 => "200.0 Gbps",
        _ => "invalid speed",
    }
}

impl Context {
    /// Queries port `port_num` (from 1) (`ibv_query_port`), with the `UVERBS_METHOD_QUERY_PORT`
    /// ioctl, or the legacy write on kernels without it.
    ///
    /// Port 0 and ports beyond the device's `phys_port_cnt` are refused with `EINVAL` and a
    /// message naming the valid range.
    #[doc(alias = "ibv_query_port")]
    #[doc(alias = "UVERBS_METHOD_QUERY_PORT")]
    pub fn query_port(&self, port_num: u8) -> Result<PortAttr> {
        let op = "query_port";
        let object = || format!("port {port_num} of {}", self.label());
        if port_num == 0 {
            return Err(self.port_range_error(op, u32::from(port_num)));
        }
        let mut resp = IbUverbsQueryPortRespEx::default();
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
        cmd.const_u64(UVERBS_ATTR_QUERY_PORT_PORT_NUM, u64::from(port_num))
            .ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp);
        let r = self.ioctl_cmd(op, &object, &mut cmd);
        match r {
            Ok(()) => Ok(PortAttr::from_ex(&resp)),
            Err(e) if lacks_method(&e) => {
                let req = IbUverbsQueryPort {
                    port_num,
                    ..Default::default()
                };
                let mut cmd = legacy_cmd(
                    IB_USER_VERBS_CMD_QUERY_PORT,
                    &req,
                    &[],
                    std::mem::size_of::<IbUverbsQueryPortResp>(),
                    0,
                );
                self.write_cmd(op, &object, &mut cmd)
                    .map_err(|e| self.explain_port_error(e, u32::from(port_num)))?;
                Ok(PortAttr::from_legacy(&cmd.response_as()))
            }
            Err(e) => Err(self.explain_port_error(e, u32::from(port_num))),
        }
    }

    /// The effective speed of a port in units of 100 Mb/s (`ibv_query_port_speed`), with the
    /// `UVERBS_METHOD_QUERY_PORT_SPEED` ioctl. Newer than Linux 6.12: older kernels answer
    /// `EPROTONOSUPPORT`.
    #[doc(alias = "ibv_query_port_speed")]
    #[doc(alias = "UVERBS_METHOD_QUERY_PORT_SPEED")]
    pub fn query_port_speed(&self, port_num: u8) -> Result<u64> {
        let op = "query_port_speed";
        if port_num == 0 {
            return Err(self.port_range_error(op, 0));
        }
        let mut speed = 0u64;
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT_SPEED);
        cmd.const_u64(UVERBS_ATTR_QUERY_PORT_SPEED_PORT_NUM, u64::from(port_num))
            .ptr_out(UVERBS_ATTR_QUERY_PORT_SPEED_RESP, &mut speed);
        let r = self.ioctl_cmd(
            op,
            &|| format!("port {port_num} of {}", self.label()),
            &mut cmd,
        );
        r.map_err(|e| {
            if e.is(Errno::PROTONOSUPPORT) {
                e.with_reason("the kernel does not have UVERBS_METHOD_QUERY_PORT_SPEED")
            } else {
                self.explain_port_error(e, u32::from(port_num))
            }
        })?;
        Ok(speed)
    }

    /// An error for a port number outside `1..=phys_port_cnt`, naming the range.
    pub(super) fn port_range_error(&self, op: &'static str, port: u32) -> Error {
        let range = match self.query_device_raw() {
            Ok(r) => format!("1..={}", r.phys_port_cnt),
            Err(_) => "from 1".to_string(),
        };
        Error::invalid(
            op,
            format!("port {port} of {}", self.label()),
            Errno::INVAL,
            format!("no such port: ports of this device are numbered {range}"),
        )
    }

    /// Adds the valid port range to a kernel `EINVAL` when the port is out of range.
    pub(super) fn explain_port_error(&self, e: Error, port: u32) -> Error {
        if !e.is(Errno::INVAL) {
            return e;
        }
        match self.query_device_raw() {
            Ok(r) if port == 0 || port > u32::from(r.phys_port_cnt) => e.with_reason(format!(
                "no such port: ports of this device are numbered 1..={}",
                r.phys_port_cnt
            )),
            _ => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy_port_resp() -> IbUverbsQueryPortResp {
        IbUverbsQueryPortResp {
            port_cap_flags: 0x0001_0000,
            max_msg_sz: 0x800000,
            gid_tbl_len: 1024,
            pkey_tbl_len: 1,
            state: 4,
            max_mtu: 5,
            active_mtu: 3,
            max_vl_num: 1,
            active_width: 2,
            active_speed: 32,
            phys_state: 5,
            link_layer: 2,
            ..Default::default()
        }
    }

    #[test]
    fn port_attr_decodes_ex_and_legacy_responses() {
        let ex = IbUverbsQueryPortRespEx {
            legacy_resp: legacy_port_resp(),
            port_cap_flags2: 0x30,
            active_speed_ex: 0,
            ..Default::default()
        };
        let a = PortAttr::from_ex(&ex);
        assert_eq!(a.state, PortState::Active);
        assert_eq!(a.max_mtu, Mtu::Mtu4096);
        assert_eq!(a.active_mtu, Mtu::Mtu1024);
        assert_eq!(a.link_layer, LinkLayer::Ethernet);
        assert_eq!(a.gid_tbl_len, 1024);
        assert_eq!(a.port_cap_flags2, 0x30);
        assert_eq!(a.active_speed_str(), "25.0 Gbps");
        assert_eq!(a.active_width_str(), "4");
        assert_eq!(a.phys_state_str(), "LINK_UP");
        assert_eq!(a.max_vl_num_str(), "1");
        let b = PortAttr::from_ex(&IbUverbsQueryPortRespEx {
            active_speed_ex: 256,
            ..ex
        });
        assert_eq!(b.active_speed_str(), "200.0 Gbps", "speed_ex wins when set");
        let l = PortAttr::from_legacy(&legacy_port_resp());
        assert_eq!(l.port_cap_flags2, 0);
        assert_eq!(l.state, a.state);
    }
}
