//! The RDMA connection manager's userspace ABI: `/dev/infiniband/rdma_cm` (module `rdma_ucm`).
//!
//! Mirrors `rdma/rdma_user_cm.h` (ABI version 4). Every command is one `write()` of
//! [`RdmaUcmCmdHdr`] followed by the command struct; `in` is the size of the command struct
//! (the header excluded), `out` the size of the response the kernel writes to the command's
//! `response` pointer (0 for commands without one). The kernel returns the written length on
//! success.
//!
//! The values of `enum rdma_cm_event_type`, `RDMA_UDP_QKEY` and `RDMA_MAX_RESP_RES` /
//! `RDMA_MAX_INIT_DEPTH` live in librdmacm's `rdma/rdma_cma.h`, not in the uapi header, but
//! the kernel sends the same event numbers; they are here because the ABI carries them. The
//! private-data limits at the end come from the kernel's `include/rdma/ib_cm.h` and
//! `drivers/infiniband/core/cma.c` (no uapi header has them).
//!
//! Socket addresses (`struct sockaddr_in6`, `struct __kernel_sockaddr_storage`) are byte
//! arrays here: the ABI only passes them through, and their contents are the C socket
//! address layout (family in host order, port and address in network order).

use crate::write::IbUverbsAhAttr;

/// `RDMA_USER_CM_ABI_VERSION`: the ABI this module mirrors (`/sys/class/misc/rdma_cm/abi_version`).
pub const RDMA_USER_CM_ABI_VERSION: u32 = 4;
/// `RDMA_MAX_PRIVATE_DATA`: the size of the private-data arrays of the command structs (what
/// a given port space and message really carries is smaller, see the `*_PRIVATE_DATA_SIZE`
/// constants).
pub const RDMA_MAX_PRIVATE_DATA: usize = 256;

// Command numbers (anonymous enum), `rdma_ucm_cmd_hdr.cmd`.
/// `RDMA_USER_CM_CMD_CREATE_ID`.
pub const RDMA_USER_CM_CMD_CREATE_ID: u32 = 0;
/// `RDMA_USER_CM_CMD_DESTROY_ID`.
pub const RDMA_USER_CM_CMD_DESTROY_ID: u32 = 1;
/// `RDMA_USER_CM_CMD_BIND_IP` (IPv4/IPv6 only; superseded by `BIND`).
pub const RDMA_USER_CM_CMD_BIND_IP: u32 = 2;
/// `RDMA_USER_CM_CMD_RESOLVE_IP` (superseded by `RESOLVE_ADDR`).
pub const RDMA_USER_CM_CMD_RESOLVE_IP: u32 = 3;
/// `RDMA_USER_CM_CMD_RESOLVE_ROUTE`.
pub const RDMA_USER_CM_CMD_RESOLVE_ROUTE: u32 = 4;
/// `RDMA_USER_CM_CMD_QUERY_ROUTE`.
pub const RDMA_USER_CM_CMD_QUERY_ROUTE: u32 = 5;
/// `RDMA_USER_CM_CMD_CONNECT`.
pub const RDMA_USER_CM_CMD_CONNECT: u32 = 6;
/// `RDMA_USER_CM_CMD_LISTEN`.
pub const RDMA_USER_CM_CMD_LISTEN: u32 = 7;
/// `RDMA_USER_CM_CMD_ACCEPT`.
pub const RDMA_USER_CM_CMD_ACCEPT: u32 = 8;
/// `RDMA_USER_CM_CMD_REJECT`.
pub const RDMA_USER_CM_CMD_REJECT: u32 = 9;
/// `RDMA_USER_CM_CMD_DISCONNECT`.
pub const RDMA_USER_CM_CMD_DISCONNECT: u32 = 10;
/// `RDMA_USER_CM_CMD_INIT_QP_ATTR`.
pub const RDMA_USER_CM_CMD_INIT_QP_ATTR: u32 = 11;
/// `RDMA_USER_CM_CMD_GET_EVENT`.
pub const RDMA_USER_CM_CMD_GET_EVENT: u32 = 12;
/// `RDMA_USER_CM_CMD_GET_OPTION` (not implemented by the kernel: `ENOSYS`).
pub const RDMA_USER_CM_CMD_GET_OPTION: u32 = 13;
/// `RDMA_USER_CM_CMD_SET_OPTION`.
pub const RDMA_USER_CM_CMD_SET_OPTION: u32 = 14;
/// `RDMA_USER_CM_CMD_NOTIFY`.
pub const RDMA_USER_CM_CMD_NOTIFY: u32 = 15;
/// `RDMA_USER_CM_CMD_JOIN_IP_MCAST` (superseded by `JOIN_MCAST`).
pub const RDMA_USER_CM_CMD_JOIN_IP_MCAST: u32 = 16;
/// `RDMA_USER_CM_CMD_LEAVE_MCAST`.
pub const RDMA_USER_CM_CMD_LEAVE_MCAST: u32 = 17;
/// `RDMA_USER_CM_CMD_MIGRATE_ID`.
pub const RDMA_USER_CM_CMD_MIGRATE_ID: u32 = 18;
/// `RDMA_USER_CM_CMD_QUERY`.
pub const RDMA_USER_CM_CMD_QUERY: u32 = 19;
/// `RDMA_USER_CM_CMD_BIND`.
pub const RDMA_USER_CM_CMD_BIND: u32 = 20;
/// `RDMA_USER_CM_CMD_RESOLVE_ADDR`.
pub const RDMA_USER_CM_CMD_RESOLVE_ADDR: u32 = 21;
/// `RDMA_USER_CM_CMD_JOIN_MCAST`.
pub const RDMA_USER_CM_CMD_JOIN_MCAST: u32 = 22;

// enum rdma_ucm_port_space (rdma_ucm_create_id.ps)
/// `RDMA_PS_IPOIB`.
pub const RDMA_PS_IPOIB: u16 = 0x0002;
/// `RDMA_PS_IB`.
pub const RDMA_PS_IB: u16 = 0x013F;
/// `RDMA_PS_TCP`: reliable connected (RC) service.
pub const RDMA_PS_TCP: u16 = 0x0106;
/// `RDMA_PS_UDP`: unreliable datagram (UD) service.
pub const RDMA_PS_UDP: u16 = 0x0111;

// rdma_ucm_query.option
/// `RDMA_USER_CM_QUERY_ADDR`: answer is [`RdmaUcmQueryAddrResp`].
pub const RDMA_USER_CM_QUERY_ADDR: u32 = 0;
/// `RDMA_USER_CM_QUERY_PATH`: answer is [`RdmaUcmQueryPathResp`] + path records.
pub const RDMA_USER_CM_QUERY_PATH: u32 = 1;
/// `RDMA_USER_CM_QUERY_GID`: answer is [`RdmaUcmQueryAddrResp`] with `sockaddr_ib` GIDs.
pub const RDMA_USER_CM_QUERY_GID: u32 = 2;

// Multicast join flags (rdma_ucm_join_mcast.join_flags)
/// `RDMA_MC_JOIN_FLAG_FULLMEMBER`.
pub const RDMA_MC_JOIN_FLAG_FULLMEMBER: u16 = 0;
/// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`.
pub const RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: u16 = 1;
/// `RDMA_MC_JOIN_FLAG_RESERVED`: first invalid value.
pub const RDMA_MC_JOIN_FLAG_RESERVED: u16 = 2;

// Option levels and names (rdma_ucm_set_option.level / optname)
/// `RDMA_OPTION_ID`: options of the id itself.
pub const RDMA_OPTION_ID: u32 = 0;
/// `RDMA_OPTION_IB`: InfiniBand options.
pub const RDMA_OPTION_IB: u32 = 1;
/// `RDMA_OPTION_ID_TOS`: type of service (`u8`).
pub const RDMA_OPTION_ID_TOS: u32 = 0;
/// `RDMA_OPTION_ID_REUSEADDR`: allow reusing a bound port (`int`).
pub const RDMA_OPTION_ID_REUSEADDR: u32 = 1;
/// `RDMA_OPTION_ID_AFONLY`: an IPv6 listener takes IPv6 only (`int`).
pub const RDMA_OPTION_ID_AFONLY: u32 = 2;
/// `RDMA_OPTION_ID_ACK_TIMEOUT`: QP local ACK timeout code (`u8`).
pub const RDMA_OPTION_ID_ACK_TIMEOUT: u32 = 3;
/// `RDMA_OPTION_IB_PATH`: set the path records (`struct ib_path_rec_data[]`).
pub const RDMA_OPTION_IB_PATH: u32 = 1;

// enum rdma_cm_event_type (librdmacm rdma/rdma_cma.h; the kernel's enum has the same numbers)
/// `RDMA_CM_EVENT_ADDR_RESOLVED`.
pub const RDMA_CM_EVENT_ADDR_RESOLVED: u32 = 0;
/// `RDMA_CM_EVENT_ADDR_ERROR`.
pub const RDMA_CM_EVENT_ADDR_ERROR: u32 = 1;
/// `RDMA_CM_EVENT_ROUTE_RESOLVED`.
pub const RDMA_CM_EVENT_ROUTE_RESOLVED: u32 = 2;
/// `RDMA_CM_EVENT_ROUTE_ERROR`.
pub const RDMA_CM_EVENT_ROUTE_ERROR: u32 = 3;
/// `RDMA_CM_EVENT_CONNECT_REQUEST`.
pub const RDMA_CM_EVENT_CONNECT_REQUEST: u32 = 4;
/// `RDMA_CM_EVENT_CONNECT_RESPONSE`.
pub const RDMA_CM_EVENT_CONNECT_RESPONSE: u32 = 5;
/// `RDMA_CM_EVENT_CONNECT_ERROR`.
pub const RDMA_CM_EVENT_CONNECT_ERROR: u32 = 6;
/// `RDMA_CM_EVENT_UNREACHABLE`.
pub const RDMA_CM_EVENT_UNREACHABLE: u32 = 7;
/// `RDMA_CM_EVENT_REJECTED`.
pub const RDMA_CM_EVENT_REJECTED: u32 = 8;
/// `RDMA_CM_EVENT_ESTABLISHED`.
pub const RDMA_CM_EVENT_ESTABLISHED: u32 = 9;
/// `RDMA_CM_EVENT_DISCONNECTED`.
pub const RDMA_CM_EVENT_DISCONNECTED: u32 = 10;
/// `RDMA_CM_EVENT_DEVICE_REMOVAL`.
pub const RDMA_CM_EVENT_DEVICE_REMOVAL: u32 = 11;
/// `RDMA_CM_EVENT_MULTICAST_JOIN`.
pub const RDMA_CM_EVENT_MULTICAST_JOIN: u32 = 12;
/// `RDMA_CM_EVENT_MULTICAST_ERROR`.
pub const RDMA_CM_EVENT_MULTICAST_ERROR: u32 = 13;
/// `RDMA_CM_EVENT_ADDR_CHANGE`.
pub const RDMA_CM_EVENT_ADDR_CHANGE: u32 = 14;
/// `RDMA_CM_EVENT_TIMEWAIT_EXIT`.
pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: u32 = 15;

/// `RDMA_UDP_QKEY` (librdmacm): the Q_Key of `RDMA_PS_UDP` ids.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;
/// `RDMA_MAX_RESP_RES` (librdmacm): "as many responder resources as the device allows".
pub const RDMA_MAX_RESP_RES: u8 = 0xFF;
/// `RDMA_MAX_INIT_DEPTH` (librdmacm): "as deep an initiator depth as the device allows".
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xFF;

// Private-data sizes of the IB CM messages (kernel include/rdma/ib_cm.h) and the rdma_cm
// header the kernel puts in front of a REQ / SIDR REQ (cma.c `struct cma_hdr`). Not in uapi.
/// `IB_CM_REQ_PRIVATE_DATA_SIZE`.
pub const IB_CM_REQ_PRIVATE_DATA_SIZE: usize = 92;
/// `IB_CM_REP_PRIVATE_DATA_SIZE`.
pub const IB_CM_REP_PRIVATE_DATA_SIZE: usize = 196;
/// `IB_CM_REJ_PRIVATE_DATA_SIZE`.
pub const IB_CM_REJ_PRIVATE_DATA_SIZE: usize = 148;
/// `IB_CM_DREQ_PRIVATE_DATA_SIZE`.
pub const IB_CM_DREQ_PRIVATE_DATA_SIZE: usize = 220;
/// `IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE`.
pub const IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE: usize = 216;
/// `IB_CM_SIDR_REP_PRIVATE_DATA_SIZE`.
pub const IB_CM_SIDR_REP_PRIVATE_DATA_SIZE: usize = 136;
/// `sizeof(struct cma_hdr)` (cma.c): what the kernel prepends to REQ / SIDR REQ private data.
pub const CMA_HDR_SIZE: usize = 36;

uapi_struct! {
    /// Header of every rdma_cm command.
    pub struct RdmaUcmCmdHdr = "rdma_ucm_cmd_hdr", size 8 {
        /// `RDMA_USER_CM_CMD_*`.
        pub cmd: u32,
        /// Size of the command struct after this header.
        pub r#in: u16,
        /// Size of the response.
        pub out: u16,
    }

    /// `RDMA_USER_CM_CMD_CREATE_ID`. Response: [`RdmaUcmCreateIdResp`].
    pub struct RdmaUcmCreateId = "rdma_ucm_create_id", size 24 {
        /// Echoed in every event of the id ([`RdmaUcmEventResp::uid`]).
        pub uid: u64,
        pub response: u64,
        /// `RDMA_PS_*`.
        pub ps: u16,
        /// `IB_UVERBS_QPT_*`.
        pub qp_type: u8,
        pub reserved: [u8; 5],
    }

    /// Response of `CREATE_ID`.
    pub struct RdmaUcmCreateIdResp = "rdma_ucm_create_id_resp", size 4 {
        /// The kernel's handle of the id.
        pub id: u32,
    }

    /// `RDMA_USER_CM_CMD_DESTROY_ID` (also `LEAVE_MCAST`). Response: [`RdmaUcmDestroyIdResp`].
    pub struct RdmaUcmDestroyId = "rdma_ucm_destroy_id", size 16 {
        pub response: u64,
        pub id: u32,
        pub reserved: u32,
    }

    /// Response of `DESTROY_ID` / `LEAVE_MCAST`.
    pub struct RdmaUcmDestroyIdResp = "rdma_ucm_destroy_id_resp", size 4 {
        /// Events the kernel delivered for the id.
        pub events_reported: u32,
    }

    /// `RDMA_USER_CM_CMD_BIND_IP`.
    pub struct RdmaUcmBindIp = "rdma_ucm_bind_ip", size 40 {
        /// Unused by the kernel.
        pub response: u64,
        /// `struct sockaddr_in6` (or a `sockaddr_in` in its first 16 bytes).
        pub addr: [u8; 28],
        pub id: u32,
    }

    /// `RDMA_USER_CM_CMD_BIND`.
    #[repr(align(8))]
    pub struct RdmaUcmBind = "rdma_ucm_bind", size 136 {
        pub id: u32,
        /// Bytes of `addr` that hold the address.
        pub addr_size: u16,
        pub reserved: u16,
        /// `struct __kernel_sockaddr_storage`.
        pub addr: [u8; 128],
    }

    /// `RDMA_USER_CM_CMD_RESOLVE_IP`.
    pub struct RdmaUcmResolveIp = "rdma_ucm_resolve_ip", size 64 {
        /// `struct sockaddr_in6`; all zero: any.
        pub src_addr: [u8; 28],
        /// `struct sockaddr_in6`.
        pub dst_addr: [u8; 28],
        pub id: u32,
        pub timeout_ms: u32,
    }

    /// `RDMA_USER_CM_CMD_RESOLVE_ADDR`.
    #[repr(align(8))]
    pub struct RdmaUcmResolveAddr = "rdma_ucm_resolve_addr", size 272 {
        pub id: u32,
        pub timeout_ms: u32,
        /// Bytes of `src_addr` used (0: any source).
        pub src_size: u16,
        /// Bytes of `dst_addr` used.
        pub dst_size: u16,
        pub reserved: u32,
        /// `struct __kernel_sockaddr_storage`.
        pub src_addr: [u8; 128],
        /// `struct __kernel_sockaddr_storage`.
        pub dst_addr: [u8; 128],
    }

    /// `RDMA_USER_CM_CMD_RESOLVE_ROUTE`.
    pub struct RdmaUcmResolveRoute = "rdma_ucm_resolve_route", size 8 {
        pub id: u32,
        pub timeout_ms: u32,
    }

    /// `RDMA_USER_CM_CMD_QUERY` and `QUERY_ROUTE`.
    pub struct RdmaUcmQuery = "rdma_ucm_query", size 16 {
        pub response: u64,
        pub id: u32,
        /// `RDMA_USER_CM_QUERY_*` (ignored by `QUERY_ROUTE`).
        pub option: u32,
    }

    /// A path record as the SA ABI writes it (`rdma/ib_user_sa.h`).
    pub struct IbUserPathRec = "ib_user_path_rec", size 64 {
        pub dgid: [u8; 16],
        pub sgid: [u8; 16],
        /// Big-endian.
        pub dlid: u16,
        /// Big-endian.
        pub slid: u16,
        pub raw_traffic: u32,
        /// Big-endian.
        pub flow_label: u32,
        pub reversible: u32,
        pub mtu: u32,
        /// Big-endian.
        pub pkey: u16,
        pub hop_limit: u8,
        pub traffic_class: u8,
        pub numb_path: u8,
        pub sl: u8,
        pub mtu_selector: u8,
        pub rate_selector: u8,
        pub rate: u8,
        pub packet_life_time_selector: u8,
        pub packet_life_time: u8,
        pub preference: u8,
    }

    /// A path record in wire format with flags (`rdma/ib_user_sa.h`).
    pub struct IbPathRecData = "ib_path_rec_data", size 72 {
        pub flags: u32,
        pub reserved: u32,
        /// The 64-byte SA path record, big-endian words.
        pub path_rec: [u32; 16],
    }

    /// Response of `QUERY_ROUTE`.
    pub struct RdmaUcmQueryRouteResp = "rdma_ucm_query_route_resp", size 208 {
        /// Node GUID of the id's device, big-endian (0: no device yet).
        pub node_guid: u64,
        pub ib_route: [IbUserPathRec; 2],
        /// `struct sockaddr_in6`.
        pub src_addr: [u8; 28],
        /// `struct sockaddr_in6`.
        pub dst_addr: [u8; 28],
        pub num_paths: u32,
        pub port_num: u8,
        pub reserved: [u8; 3],
        /// The device's index (kernel 5.x and later; left as written by older ones).
        pub ibdev_index: u32,
        pub reserved1: u32,
    }

    /// Response of `QUERY` with `RDMA_USER_CM_QUERY_ADDR` / `_GID`.
    pub struct RdmaUcmQueryAddrResp = "rdma_ucm_query_addr_resp", size 280 {
        /// Node GUID of the id's device, big-endian (0: no device yet).
        pub node_guid: u64,
        pub port_num: u8,
        pub reserved: u8,
        /// Big-endian.
        pub pkey: u16,
        pub src_size: u16,
        pub dst_size: u16,
        /// `struct __kernel_sockaddr_storage`.
        pub src_addr: [u8; 128],
        /// `struct __kernel_sockaddr_storage`.
        pub dst_addr: [u8; 128],
        pub ibdev_index: u32,
        pub reserved1: u32,
    }

    /// Response of `QUERY` with `RDMA_USER_CM_QUERY_PATH`: followed by `num_paths`
    /// [`IbPathRecData`] (`path_data[]`).
    pub struct RdmaUcmQueryPathResp = "rdma_ucm_query_path_resp", size 8 {
        pub num_paths: u32,
        pub reserved: u32,
    }

    /// Connection parameters of `CONNECT` / `ACCEPT` and of connection events.
    pub struct RdmaUcmConnParam = "rdma_ucm_conn_param", size 272 {
        pub qp_num: u32,
        pub qkey: u32,
        pub private_data: [u8; 256],
        pub private_data_len: u8,
        pub srq: u8,
        pub responder_resources: u8,
        pub initiator_depth: u8,
        pub flow_control: u8,
        pub retry_count: u8,
        pub rnr_retry_count: u8,
        /// Non-zero: these parameters are given (an `ACCEPT` without them only sends the RTU).
        pub valid: u8,
    }

    /// UD parameters of UD connection and multicast events.
    pub struct RdmaUcmUdParam = "rdma_ucm_ud_param", size 304 {
        pub qp_num: u32,
        pub qkey: u32,
        pub ah_attr: IbUverbsAhAttr,
        pub private_data: [u8; 256],
        pub private_data_len: u8,
        pub reserved: [u8; 7],
    }

    /// Enhanced connection establishment options (vendor, attribute modifier).
    pub struct RdmaUcmEce = "rdma_ucm_ece", size 8 {
        pub vendor_id: u32,
        pub attr_mod: u32,
    }

    /// `RDMA_USER_CM_CMD_CONNECT`.
    pub struct RdmaUcmConnect = "rdma_ucm_connect", size 288 {
        pub conn_param: RdmaUcmConnParam,
        pub id: u32,
        pub reserved: u32,
        pub ece: RdmaUcmEce,
    }

    /// `RDMA_USER_CM_CMD_LISTEN`.
    pub struct RdmaUcmListen = "rdma_ucm_listen", size 8 {
        pub id: u32,
        pub backlog: u32,
    }

    /// `RDMA_USER_CM_CMD_ACCEPT`.
    pub struct RdmaUcmAccept = "rdma_ucm_accept", size 296 {
        /// The uid the accepted id's later events carry.
        pub uid: u64,
        pub conn_param: RdmaUcmConnParam,
        pub id: u32,
        pub reserved: u32,
        pub ece: RdmaUcmEce,
    }

    /// `RDMA_USER_CM_CMD_REJECT`.
    pub struct RdmaUcmReject = "rdma_ucm_reject", size 264 {
        pub id: u32,
        pub private_data_len: u8,
        /// IB CM reject reason (0: the kernel's default, consumer defined).
        pub reason: u8,
        pub reserved: [u8; 2],
        pub private_data: [u8; 256],
    }

    /// `RDMA_USER_CM_CMD_DISCONNECT`.
    pub struct RdmaUcmDisconnect = "rdma_ucm_disconnect", size 4 {
        pub id: u32,
    }

    /// `RDMA_USER_CM_CMD_INIT_QP_ATTR`. Response: [`crate::write::IbUverbsQpAttr`].
    pub struct RdmaUcmInitQpAttr = "rdma_ucm_init_qp_attr", size 16 {
        pub response: u64,
        pub id: u32,
        /// The state to get the attributes for (`IB_QPS_*`).
        pub qp_state: u32,
    }

    /// `RDMA_USER_CM_CMD_NOTIFY`.
    pub struct RdmaUcmNotify = "rdma_ucm_notify", size 8 {
        pub id: u32,
        /// An `IB_EVENT_*` async event type.
        pub event: u32,
    }

    /// `RDMA_USER_CM_CMD_JOIN_IP_MCAST`. Response: [`RdmaUcmCreateIdResp`].
    pub struct RdmaUcmJoinIpMcast = "rdma_ucm_join_ip_mcast", size 48 {
        pub response: u64,
        /// Echoed in the multicast events.
        pub uid: u64,
        /// `struct sockaddr_in6`.
        pub addr: [u8; 28],
        pub id: u32,
    }

    /// `RDMA_USER_CM_CMD_JOIN_MCAST`. Response: [`RdmaUcmCreateIdResp`] (the membership's handle).
    pub struct RdmaUcmJoinMcast = "rdma_ucm_join_mcast", size 152 {
        pub response: u64,
        /// Echoed in the multicast events.
        pub uid: u64,
        pub id: u32,
        pub addr_size: u16,
        /// `RDMA_MC_JOIN_FLAG_*`.
        pub join_flags: u16,
        /// `struct __kernel_sockaddr_storage`.
        pub addr: [u8; 128],
    }

    /// `RDMA_USER_CM_CMD_GET_EVENT`. Response: [`RdmaUcmEventResp`].
    pub struct RdmaUcmGetEvent = "rdma_ucm_get_event", size 8 {
        pub response: u64,
    }

    /// One event, as `GET_EVENT` writes it.
    pub struct RdmaUcmEventResp = "rdma_ucm_event_resp", size 336 {
        /// The id's uid (`CONNECT_REQUEST`: the listener's; a multicast event: the join's).
        pub uid: u64,
        /// The id's handle (`CONNECT_REQUEST`: the handle of the new id).
        pub id: u32,
        /// `RDMA_CM_EVENT_*`.
        pub event: u32,
        /// 0, a negative errno, or (`REJECTED`) the IB CM reject reason.
        pub status: u32,
        /// `union { struct rdma_ucm_conn_param conn; struct rdma_ucm_ud_param ud; }`: see
        /// [`RdmaUcmEventResp::conn`] and [`RdmaUcmEventResp::ud`].
        pub param: [u8; 304],
        pub reserved: u32,
        pub ece: RdmaUcmEce,
    }

    /// `RDMA_USER_CM_CMD_SET_OPTION`.
    pub struct RdmaUcmSetOption = "rdma_ucm_set_option", size 24 {
        /// User address of the value, read by the kernel.
        pub optval: u64,
        pub id: u32,
        /// `RDMA_OPTION_ID` / `RDMA_OPTION_IB`.
        pub level: u32,
        /// `RDMA_OPTION_*`.
        pub optname: u32,
        pub optlen: u32,
    }

    /// `RDMA_USER_CM_CMD_MIGRATE_ID`. Response: [`RdmaUcmMigrateResp`].
    pub struct RdmaUcmMigrateId = "rdma_ucm_migrate_id", size 16 {
        pub response: u64,
        pub id: u32,
        /// The rdma_cm fd to move the id (and its pending events) to.
        pub fd: u32,
    }

    /// Response of `MIGRATE_ID`.
    pub struct RdmaUcmMigrateResp = "rdma_ucm_migrate_resp", size 4 {
        /// Events delivered for the id on its old fd.
        pub events_reported: u32,
    }
}

impl RdmaUcmEventResp {
    /// The `param.conn` member (connection events of `RDMA_PS_TCP`/`RDMA_PS_IB` ids).
    pub fn conn(&self) -> RdmaUcmConnParam {
        let mut c = RdmaUcmConnParam::default();
        let n = core::mem::size_of::<RdmaUcmConnParam>();
        zerocopy::IntoBytes::as_mut_bytes(&mut c).copy_from_slice(&self.param[..n]);
        c
    }

    /// The `param.ud` member (events of `RDMA_PS_UDP`/`RDMA_PS_IPOIB` ids, multicast events).
    pub fn ud(&self) -> RdmaUcmUdParam {
        let mut u = RdmaUcmUdParam::default();
        zerocopy::IntoBytes::as_mut_bytes(&mut u).copy_from_slice(&self.param);
        u
    }
}
