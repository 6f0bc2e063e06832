//! Device attributes: `ibv_query_device` and `ibv_query_device_ex` (the legacy
//! `IB_USER_VERBS_CMD_QUERY_DEVICE` write, or the extended `IB_USER_VERBS_EX_CMD_QUERY_DEVICE`,
//! falling back to the legacy one on a kernel without it; a provider keeps what it wants of
//! the driver part of the extended response), the types they decode into, and the decoding.

use std::fs;
use std::path::Path;

use uverbs_uapi::write::{
    IbUverbsExQueryDevice, IbUverbsExQueryDeviceResp, IbUverbsQueryDevice, IbUverbsQueryDeviceResp,
    IB_USER_VERBS_CMD_QUERY_DEVICE, IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
};
use zerocopy::{FromBytes, IntoBytes};

use crate::channel::WriteCmd;
use crate::context::{legacy_cmd, Context};
use crate::error::{Errno, Result};
use crate::provider::{dispatch, DeviceOps, Driver};

/// How a device supports atomic operations (`enum ibv_atomic_cap`).
#[doc(alias = "ibv_atomic_cap")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicCap {
    /// `IBV_ATOMIC_NONE`: no atomics.
    None,
    /// `IBV_ATOMIC_HCA`: atomic within this device.
    Hca,
    /// `IBV_ATOMIC_GLOB`: atomic against the CPU and other devices too.
    Glob,
    /// A value this library does not know.
    Unknown(u32),
}

impl AtomicCap {
    /// From the kernel's number (`IB_ATOMIC_*`).
    pub fn from_raw(v: u32) -> Self {
        match v {
            0 => AtomicCap::None,
            1 => AtomicCap::Hca,
            2 => AtomicCap::Glob,
            x => AtomicCap::Unknown(x),
        }
    }
    /// The kernel's number.
    pub fn raw(self) -> u32 {
        match self {
            AtomicCap::None => 0,
            AtomicCap::Hca => 1,
            AtomicCap::Glob => 2,
            AtomicCap::Unknown(x) => x,
        }
    }
    /// The name `ibv_devinfo` prints (`ATOMIC_HCA`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AtomicCap::None => "ATOMIC_NONE",
            AtomicCap::Hca => "ATOMIC_HCA",
            AtomicCap::Glob => "ATOMIC_GLOB",
            AtomicCap::Unknown(_) => "invalid atomic capability",
        }
    }
}

bitflags::bitflags! {
    /// Device capabilities (`enum ibv_device_cap_flags`, the low 32 bits of
    /// `device_cap_flags_ex`). Bits this library does not name are kept.
    #[doc(alias = "ibv_device_cap_flags")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct DeviceCapFlags: u32 {
        /// `IBV_DEVICE_RESIZE_MAX_WR`.
        const RESIZE_MAX_WR = 1;
        /// `IBV_DEVICE_BAD_PKEY_CNTR`.
        const BAD_PKEY_CNTR = 1 << 1;
        /// `IBV_DEVICE_BAD_QKEY_CNTR`.
        const BAD_QKEY_CNTR = 1 << 2;
        /// `IBV_DEVICE_RAW_MULTI`.
        const RAW_MULTI = 1 << 3;
        /// `IBV_DEVICE_AUTO_PATH_MIG`.
        const AUTO_PATH_MIG = 1 << 4;
        /// `IBV_DEVICE_CHANGE_PHY_PORT`.
        const CHANGE_PHY_PORT = 1 << 5;
        /// `IBV_DEVICE_UD_AV_PORT_ENFORCE`.
        const UD_AV_PORT_ENFORCE = 1 << 6;
        /// `IBV_DEVICE_CURR_QP_STATE_MOD`.
        const CURR_QP_STATE_MOD = 1 << 7;
        /// `IBV_DEVICE_SHUTDOWN_PORT`.
        const SHUTDOWN_PORT = 1 << 8;
        /// `IBV_DEVICE_INIT_TYPE`.
        const INIT_TYPE = 1 << 9;
        /// `IBV_DEVICE_PORT_ACTIVE_EVENT`.
        const PORT_ACTIVE_EVENT = 1 << 10;
        /// `IBV_DEVICE_SYS_IMAGE_GUID`.
        const SYS_IMAGE_GUID = 1 << 11;
        /// `IBV_DEVICE_RC_RNR_NAK_GEN`.
        const RC_RNR_NAK_GEN = 1 << 12;
        /// `IBV_DEVICE_SRQ_RESIZE`.
        const SRQ_RESIZE = 1 << 13;
        /// `IBV_DEVICE_N_NOTIFY_CQ`.
        const N_NOTIFY_CQ = 1 << 14;
        /// `IBV_DEVICE_MEM_WINDOW`.
        const MEM_WINDOW = 1 << 17;
        /// `IBV_DEVICE_UD_IP_CSUM`.
        const UD_IP_CSUM = 1 << 18;
        /// `IBV_DEVICE_XRC`.
        const XRC = 1 << 20;
        /// `IBV_DEVICE_MEM_MGT_EXTENSIONS`.
        const MEM_MGT_EXTENSIONS = 1 << 21;
        /// `IBV_DEVICE_MEM_WINDOW_TYPE_2A`.
        const MEM_WINDOW_TYPE_2A = 1 << 23;
        /// `IBV_DEVICE_MEM_WINDOW_TYPE_2B`.
        const MEM_WINDOW_TYPE_2B = 1 << 24;
        /// `IBV_DEVICE_RC_IP_CSUM`.
        const RC_IP_CSUM = 1 << 25;
        /// `IBV_DEVICE_RAW_IP_CSUM`.
        const RAW_IP_CSUM = 1 << 26;
        /// `IBV_DEVICE_MANAGED_FLOW_STEERING`.
        const MANAGED_FLOW_STEERING = 1 << 29;
        const _ = !0;
    }
}

/// `IBV_DEVICE_RAW_SCATTER_FCS` (a bit of `device_cap_flags_ex`).
pub const IBV_DEVICE_RAW_SCATTER_FCS: u64 = 1 << 34;
/// `IBV_DEVICE_PCI_WRITE_END_PADDING` (a bit of `device_cap_flags_ex`).
pub const IBV_DEVICE_PCI_WRITE_END_PADDING: u64 = 1 << 36;
/// `IBV_DEVICE_CC_DMA_BOUNCE` (a bit of `device_cap_flags_ex`).
pub const IBV_DEVICE_CC_DMA_BOUNCE: u64 = 1 << 41;

bitflags::bitflags! {
    /// General on-demand-paging capabilities (`enum ibv_odp_general_caps`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct OdpGeneralCaps: u64 {
        /// `IBV_ODP_SUPPORT`.
        const SUPPORT = 1;
        /// `IBV_ODP_SUPPORT_IMPLICIT`.
        const SUPPORT_IMPLICIT = 1 << 1;
        const _ = !0;
    }
}

bitflags::bitflags! {
    /// Per-transport on-demand-paging capabilities (`enum ibv_odp_transport_cap_bits`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct OdpTransportCaps: u32 {
        /// `IBV_ODP_SUPPORT_SEND`.
        const SEND = 1;
        /// `IBV_ODP_SUPPORT_RECV`.
        const RECV = 1 << 1;
        /// `IBV_ODP_SUPPORT_WRITE`.
        const WRITE = 1 << 2;
        /// `IBV_ODP_SUPPORT_READ`.
        const READ = 1 << 3;
        /// `IBV_ODP_SUPPORT_ATOMIC`.
        const ATOMIC = 1 << 4;
        /// `IBV_ODP_SUPPORT_SRQ_RECV`.
        const SRQ_RECV = 1 << 5;
        /// `IBV_ODP_SUPPORT_FLUSH`.
        const FLUSH = 1 << 6;
        /// `IBV_ODP_SUPPORT_ATOMIC_WRITE`.
        const ATOMIC_WRITE = 1 << 7;
        const _ = !0;
    }
}

/// Device attributes (`struct ibv_device_attr`), from `ibv_query_device`.
#[doc(alias = "ibv_device_attr")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceAttr {
    /// Firmware version, formatted as the provider formats it (rxe: `major.minor.sub`, EFA:
    /// four dotted bytes).
    pub fw_ver: String,
    /// Node GUID, host order (the C struct holds it big-endian).
    pub node_guid: u64,
    /// System image GUID, host order.
    pub sys_image_guid: u64,
    /// Largest registrable memory region, in bytes.
    pub max_mr_size: u64,
    /// Supported page sizes (bit n set: 2^n bytes).
    pub page_size_cap: u64,
    /// IEEE vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Maximum number of QPs.
    pub max_qp: u32,
    /// Maximum outstanding work requests per queue.
    pub max_qp_wr: u32,
    /// Capability flags.
    pub device_cap_flags: DeviceCapFlags,
    /// Maximum scatter/gather entries per send or receive WR.
    pub max_sge: u32,
    /// Maximum scatter/gather entries per RDMA read WR.
    pub max_sge_rd: u32,
    /// Maximum number of CQs.
    pub max_cq: u32,
    /// Maximum entries per CQ.
    pub max_cqe: u32,
    /// Maximum number of MRs.
    pub max_mr: u32,
    /// Maximum number of PDs.
    pub max_pd: u32,
    /// Maximum outstanding RDMA read/atomic operations per QP as target.
    pub max_qp_rd_atom: u32,
    /// Same per EE context.
    pub max_ee_rd_atom: u32,
    /// Maximum RDMA read/atomic resources as target, device-wide.
    pub max_res_rd_atom: u32,
    /// Maximum outstanding RDMA read/atomic operations per QP as initiator.
    pub max_qp_init_rd_atom: u32,
    /// Same per EE context.
    pub max_ee_init_rd_atom: u32,
    /// Atomic operation support.
    pub atomic_cap: AtomicCap,
    /// Maximum EE contexts.
    pub max_ee: u32,
    /// Maximum RD domains.
    pub max_rdd: u32,
    /// Maximum memory windows.
    pub max_mw: u32,
    /// Maximum raw IPv6 datagram QPs.
    pub max_raw_ipv6_qp: u32,
    /// Maximum raw ethertype datagram QPs.
    pub max_raw_ethy_qp: u32,
    /// Maximum multicast groups.
    pub max_mcast_grp: u32,
    /// Maximum QPs per multicast group.
    pub max_mcast_qp_attach: u32,
    /// Maximum QPs attached to multicast groups, in total.
    pub max_total_mcast_qp_attach: u32,
    /// Maximum address handles.
    pub max_ah: u32,
    /// Maximum FMRs (obsolete, 0).
    pub max_fmr: u32,
    /// Maximum remaps per FMR (obsolete, 0).
    pub max_map_per_fmr: u32,
    /// Maximum SRQs.
    pub max_srq: u32,
    /// Maximum WRs per SRQ.
    pub max_srq_wr: u32,
    /// Maximum SGEs per SRQ WR.
    pub max_srq_sge: u32,
    /// Maximum P_Key table entries.
    pub max_pkeys: u16,
    /// Local CA ack delay.
    pub local_ca_ack_delay: u8,
    /// Number of physical ports.
    pub phys_port_cnt: u8,
}

/// On-demand-paging capabilities (`struct ibv_odp_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OdpCaps {
    /// General ODP support.
    pub general_caps: OdpGeneralCaps,
    /// RC transport.
    pub rc_odp_caps: OdpTransportCaps,
    /// UC transport.
    pub uc_odp_caps: OdpTransportCaps,
    /// UD transport.
    pub ud_odp_caps: OdpTransportCaps,
}

/// TCP segmentation offload capabilities (`struct ibv_tso_caps`). The kernel's core response
/// does not carry them (only mlx5's driver data does), so they are 0 for rxe and EFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TsoCaps {
    /// Maximum TSO payload.
    pub max_tso: u32,
    /// Bit `1 << qp_type` per QP type supporting TSO.
    pub supported_qpts: u32,
}

/// Receive-side scaling capabilities (`struct ibv_rss_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RssCaps {
    /// Bit `1 << qp_type` per QP type supporting RSS.
    pub supported_qpts: u32,
    /// Maximum receive WQ indirection tables.
    pub max_rwq_indirection_tables: u32,
    /// Maximum size of one indirection table.
    pub max_rwq_indirection_table_size: u32,
    /// Hash fields (provider data; 0 for rxe and EFA).
    pub rx_hash_fields_mask: u64,
    /// Hash function (provider data; 0 for rxe and EFA).
    pub rx_hash_function: u8,
}

/// Packet pacing capabilities (`struct ibv_packet_pacing_caps`); provider data, 0 for rxe/EFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketPacingCaps {
    /// Minimum rate limit, kbps.
    pub qp_rate_limit_min: u32,
    /// Maximum rate limit, kbps.
    pub qp_rate_limit_max: u32,
    /// Bit `1 << qp_type` per QP type supporting pacing.
    pub supported_qpts: u32,
}

/// Tag-matching capabilities (`struct ibv_tm_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TmCaps {
    /// Maximum rendezvous header size.
    pub max_rndv_hdr_size: u32,
    /// Maximum tags.
    pub max_num_tags: u32,
    /// `IBV_TM_CAP_*`.
    pub flags: u32,
    /// Maximum outstanding list operations.
    pub max_ops: u32,
    /// Maximum SGEs in a tagged buffer.
    pub max_sge: u32,
}

/// CQ moderation capabilities (`struct ibv_cq_moderation_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CqModerationCaps {
    /// Maximum completions per moderation event.
    pub max_cq_count: u16,
    /// Maximum moderation period, microseconds.
    pub max_cq_period: u16,
}

/// PCIe atomic capabilities (`struct ibv_pci_atomic_caps`); not in the kernel's core response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PciAtomicCaps {
    /// Supported fetch-and-add operand sizes.
    pub fetch_add: u16,
    /// Supported swap operand sizes.
    pub swap: u16,
    /// Supported compare-and-swap operand sizes.
    pub compare_swap: u16,
}

/// Extended device attributes (`struct ibv_device_attr_ex`), from `ibv_query_device_ex`.
#[doc(alias = "ibv_device_attr_ex")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceAttrEx {
    /// The attributes of [`Context::query_device`].
    pub orig_attr: DeviceAttr,
    /// Extension mask (none defined).
    pub comp_mask: u64,
    /// On-demand paging.
    pub odp_caps: OdpCaps,
    /// Bits of a completion timestamp that are valid (0: no timestamps).
    pub completion_timestamp_mask: u64,
    /// Device clock in kHz (0: not reported).
    pub hca_core_clock: u64,
    /// All 64 capability bits (`IBV_DEVICE_*`, see [`IBV_DEVICE_RAW_SCATTER_FCS`], ...).
    pub device_cap_flags_ex: u64,
    /// TSO (provider data, 0 here).
    pub tso_caps: TsoCaps,
    /// RSS.
    pub rss_caps: RssCaps,
    /// Maximum work queues of type RQ.
    pub max_wq_type_rq: u32,
    /// Packet pacing (provider data, 0 here).
    pub packet_pacing_caps: PacketPacingCaps,
    /// `IBV_RAW_PACKET_CAP_*`.
    pub raw_packet_caps: u32,
    /// Tag matching.
    pub tm_caps: TmCaps,
    /// CQ moderation.
    pub cq_mod_caps: CqModerationCaps,
    /// Device memory available for `ibv_alloc_dm`, bytes.
    pub max_dm_size: u64,
    /// PCIe atomics (provider data, 0 here).
    pub pci_atomic_caps: PciAtomicCaps,
    /// XRC on-demand paging.
    pub xrc_odp_caps: OdpTransportCaps,
    /// Number of ports (from sysfs, as rdma-core counts them; else `phys_port_cnt`).
    pub phys_port_cnt_ex: u32,
    /// How many bytes of the extended response the kernel filled (older kernels fill fewer;
    /// fields beyond are 0).
    pub response_length: u32,
}

impl Context {
    /// Queries the device's attributes (`ibv_query_device`).
    #[doc(alias = "ibv_query_device")]
    #[doc(alias = "IB_USER_VERBS_CMD_QUERY_DEVICE")]
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_QUERY_DEVICE,
            &IbUverbsQueryDevice::default(),
            &[],
            std::mem::size_of::<IbUverbsQueryDeviceResp>(),
            0,
        );
        self.write_cmd("query_device", &|| self.label().to_string(), &mut cmd)?;
        Ok(self.decode_device_attr(&cmd.response_as()))
    }

    /// Queries the device's extended attributes (`ibv_query_device_ex`) with the extended
    /// `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` command; on a kernel without it, the fields beyond
    /// [`DeviceAttr`] are 0.
    #[doc(alias = "ibv_query_device_ex")]
    #[doc(alias = "IB_USER_VERBS_EX_CMD_QUERY_DEVICE")]
    pub fn query_device_ex(&self) -> Result<DeviceAttrEx> {
        let provider = &self.inner.provider_ctx;
        let driver_len = dispatch!(ProviderCtx, provider, p => p.query_device_udata_len());
        let mut cmd = WriteCmd::extended(
            IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
            &IbUverbsExQueryDevice::default(),
            &[],
            std::mem::size_of::<IbUverbsExQueryDeviceResp>(),
            driver_len,
        )
        .expect("ABI structs are multiples of 8 bytes");
        let resp: IbUverbsExQueryDeviceResp =
            match self.write_cmd("query_device_ex", &|| self.label().to_string(), &mut cmd) {
                Ok(()) => cmd.response_as(),
                // As libibverbs: a kernel without the extended command answers the legacy one.
                Err(e) if e.is(Errno::OPNOTSUPP) || e.is(Errno::NOSYS) => {
                    let base = self.query_device_raw()?;
                    IbUverbsExQueryDeviceResp {
                        base,
                        response_length: std::mem::size_of::<IbUverbsQueryDeviceResp>() as u32,
                        ..Default::default()
                    }
                }
                Err(e) => return Err(e),
            };
        if driver_len > 0 {
            let driver_resp = cmd.driver_response();
            dispatch!(ProviderCtx, provider, p => p.query_device_udata(driver_resp));
        }
        Ok(self.decode_device_attr_ex(&resp))
    }

    pub(super) fn query_device_raw(&self) -> Result<IbUverbsQueryDeviceResp> {
        let mut cmd = legacy_cmd(
            IB_USER_VERBS_CMD_QUERY_DEVICE,
            &IbUverbsQueryDevice::default(),
            &[],
            std::mem::size_of::<IbUverbsQueryDeviceResp>(),
            0,
        );
        self.write_cmd("query_device", &|| self.label().to_string(), &mut cmd)?;
        Ok(cmd.response_as())
    }

    fn decode_device_attr(&self, r: &IbUverbsQueryDeviceResp) -> DeviceAttr {
        decode_device_attr(self.device().driver(), r)
    }

    fn decode_device_attr_ex(&self, r: &IbUverbsExQueryDeviceResp) -> DeviceAttrEx {
        let orig_attr = self.decode_device_attr(&r.base);
        let phys_port_cnt_ex = count_sysfs_ports(self.device().ibdev_path())
            .unwrap_or(u32::from(orig_attr.phys_port_cnt));
        decode_device_attr_ex(orig_attr, r, phys_port_cnt_ex)
    }
}

/// Formats the raw `fw_ver` of the query-device response as the provider does: rxe
/// (`rxe_query_device`) prints `major.minor.sub_minor` from bits 47..32, 31..16, 15..0; EFA
/// (`efa_query_device_ex`) prints the first four bytes of the value as it lies in memory.
pub fn format_fw_ver(driver: &Driver, raw: u64) -> String {
    driver.format_fw_ver(raw)
}

fn decode_device_attr(driver: &Driver, r: &IbUverbsQueryDeviceResp) -> DeviceAttr {
    DeviceAttr {
        fw_ver: format_fw_ver(driver, r.fw_ver),
        node_guid: r.node_guid.get(),
        sys_image_guid: r.sys_image_guid.get(),
        max_mr_size: r.max_mr_size,
        page_size_cap: r.page_size_cap,
        vendor_id: r.vendor_id,
        vendor_part_id: r.vendor_part_id,
        hw_ver: r.hw_ver,
        max_qp: r.max_qp,
        max_qp_wr: r.max_qp_wr,
        device_cap_flags: DeviceCapFlags::from_bits_retain(r.device_cap_flags),
        max_sge: r.max_sge,
        max_sge_rd: r.max_sge_rd,
        max_cq: r.max_cq,
        max_cqe: r.max_cqe,
        max_mr: r.max_mr,
        max_pd: r.max_pd,
        max_qp_rd_atom: r.max_qp_rd_atom,
        max_ee_rd_atom: r.max_ee_rd_atom,
        max_res_rd_atom: r.max_res_rd_atom,
        max_qp_init_rd_atom: r.max_qp_init_rd_atom,
        max_ee_init_rd_atom: r.max_ee_init_rd_atom,
        atomic_cap: AtomicCap::from_raw(r.atomic_cap),
        max_ee: r.max_ee,
        max_rdd: r.max_rdd,
        max_mw: r.max_mw,
        max_raw_ipv6_qp: r.max_raw_ipv6_qp,
        max_raw_ethy_qp: r.max_raw_ethy_qp,
        max_mcast_grp: r.max_mcast_grp,
        max_mcast_qp_attach: r.max_mcast_qp_attach,
        max_total_mcast_qp_attach: r.max_total_mcast_qp_attach,
        max_ah: r.max_ah,
        max_fmr: r.max_fmr,
        max_map_per_fmr: r.max_map_per_fmr,
        max_srq: r.max_srq,
        max_srq_wr: r.max_srq_wr,
        max_srq_sge: r.max_srq_sge,
        max_pkeys: r.max_pkeys,
        local_ca_ack_delay: r.local_ca_ack_delay,
        phys_port_cnt: r.phys_port_cnt,
    }
}

/// Copies the extended fields the kernel actually wrote (`response_length`), as libibverbs'
/// `CAN_COPY` does: a field the kernel did not reach stays 0 even if the buffer held garbage.
fn decode_device_attr_ex(
    orig_attr: DeviceAttr,
    r: &IbUverbsExQueryDeviceResp,
    phys_port_cnt_ex: u32,
) -> DeviceAttrEx {
    // Keep only the bytes the kernel says it wrote, zero the rest.
    let len = (r.response_length as usize).min(std::mem::size_of::<IbUverbsExQueryDeviceResp>());
    let mut bytes = [0u8; std::mem::size_of::<IbUverbsExQueryDeviceResp>()];
    bytes[..len].copy_from_slice(&r.as_bytes()[..len]);
    let r = IbUverbsExQueryDeviceResp::read_from_bytes(&bytes[..]).expect("exact size");
    DeviceAttrEx {
        orig_attr,
        comp_mask: 0,
        odp_caps: OdpCaps {
            general_caps: OdpGeneralCaps::from_bits_retain(r.odp_caps.general_caps),
            rc_odp_caps: OdpTransportCaps::from_bits_retain(
                r.odp_caps.per_transport_caps.rc_odp_caps,
            ),
            uc_odp_caps: OdpTransportCaps::from_bits_retain(
                r.odp_caps.per_transport_caps.uc_odp_caps,
            ),
            ud_odp_caps: OdpTransportCaps::from_bits_retain(
                r.odp_caps.per_transport_caps.ud_odp_caps,
            ),
        },
        completion_timestamp_mask: r.timestamp_mask,
        hca_core_clock: r.hca_core_clock,
        device_cap_flags_ex: r.device_cap_flags_ex,
        tso_caps: TsoCaps::default(),
        rss_caps: RssCaps {
            supported_qpts: r.rss_caps.supported_qpts,
            max_rwq_indirection_tables: r.rss_caps.max_rwq_indirection_tables,
            max_rwq_indirection_table_size: r.rss_caps.max_rwq_indirection_table_size,
            rx_hash_fields_mask: 0,
            rx_hash_function: 0,
        },
        max_wq_type_rq: r.max_wq_type_rq,
        packet_pacing_caps: PacketPacingCaps::default(),
        raw_packet_caps: r.raw_packet_caps,
        tm_caps: TmCaps {
            max_rndv_hdr_size: r.tm_caps.max_rndv_hdr_size,
            max_num_tags: r.tm_caps.max_num_tags,
            flags: r.tm_caps.flags,
            max_ops: r.tm_caps.max_ops,
            max_sge: r.tm_caps.max_sge,
        },
        cq_mod_caps: CqModerationCaps {
            max_cq_count: r.cq_moderation_caps.max_cq_moderation_count,
            max_cq_period: r.cq_moderation_caps.max_cq_moderation_period,
        },
        max_dm_size: r.max_dm_size,
        pci_atomic_caps: PciAtomicCaps::default(),
        xrc_odp_caps: OdpTransportCaps::from_bits_retain(r.xrc_odp_caps),
        phys_port_cnt_ex,
        response_length: len as u32,
    }
}

/// Number of ports under sysfs `<ibdev>/ports`, as libibverbs counts them.
pub(super) fn count_sysfs_ports(ibdev_path: &Path) -> Option<u32> {
    let n = fs::read_dir(ibdev_path.join("ports"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|s| s.parse::<u32>().is_ok())
        })
        .count();
    (n > 0).then_some(n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::byteorder::big_endian;

    #[test]
    fn device_attr_decodes_guids_and_ex_fields_up_to_response_length() {
        let base = IbUverbsQueryDeviceResp {
            fw_ver: 0,
            node_guid: big_endian::U64::new(0x5054_00ff_fe12_3456),
            sys_image_guid: big_endian::U64::new(0x5054_00ff_fe12_3456),
            max_cqe: 32767,
            device_cap_flags: 0x0122_3c76,
            atomic_cap: 1,
            phys_port_cnt: 1,
            max_pkeys: 64,
            ..Default::default()
        };
        let a = decode_device_attr(&Driver::Rxe, &base);
        assert_eq!(a.node_guid, 0x5054_00ff_fe12_3456);
        assert_eq!(a.fw_ver, "0.0.0");
        assert_eq!(a.max_cqe, 32767);
        assert_eq!(a.atomic_cap, AtomicCap::Hca);
        assert!(a.device_cap_flags.contains(DeviceCapFlags::MEM_WINDOW));
        assert!(!a.device_cap_flags.contains(DeviceCapFlags::XRC));

        let mut r = IbUverbsExQueryDeviceResp {
            base,
            odp_caps: uverbs_uapi::write::IbUverbsOdpCaps {
                general_caps: 1,
                ..Default::default()
            },
            timestamp_mask: 0xffff,
            max_dm_size: 4096,
            xrc_odp_caps: 3,
            ..Default::default()
        };
        // The kernel claims to have written only up to odp_caps: later fields are ignored.
        r.response_length = (176 + 8 + 24) as u32;
        let x = decode_device_attr_ex(a.clone(), &r, 1);
        assert_eq!(x.odp_caps.general_caps, OdpGeneralCaps::SUPPORT);
        assert_eq!(x.completion_timestamp_mask, 0);
        assert_eq!(x.max_dm_size, 0);
        assert_eq!(x.xrc_odp_caps, OdpTransportCaps::empty());
        r.response_length = std::mem::size_of::<IbUverbsExQueryDeviceResp>() as u32;
        let x = decode_device_attr_ex(a.clone(), &r, 1);
        assert_eq!(x.completion_timestamp_mask, 0xffff);
        assert_eq!(x.max_dm_size, 4096);
        assert_eq!(
            x.xrc_odp_caps,
            OdpTransportCaps::SEND | OdpTransportCaps::RECV
        );
        // A length beyond the struct is clamped, never read past.
        r.response_length = 100_000;
        assert_eq!(decode_device_attr_ex(a, &r, 1).response_length, 304);
    }
}
