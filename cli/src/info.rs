//! `uverbs info`: device and port attributes, laid out as rdma-core's `ibv_devinfo` prints them
//! (`libibverbs/examples/devinfo.c`: same field names, values, tabs and order), or as JSON.
//!
//! Devices whose driver uverbs does not drive are listed with what sysfs says about them, not
//! treated as errors.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde_json::{json, Map, Value};
use uverbs::{
    Context, Device, DeviceAttrEx, DeviceCapFlags, GidEntry, GidType, LinkLayer, NodeType,
    OdpTransportCaps, PortAttr,
};

use crate::Failure;

/// Options of `uverbs info` (those of `ibv_devinfo`, plus `--json`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Use this RDMA device (default: all devices).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    dev: Option<String>,
    /// Show only this port (from 1; default: all ports).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT",
          value_parser = clap::value_parser!(u8).range(1..))]
    port: Option<u8>,
    /// Print only the device names.
    #[arg(short = 'l', long = "list")]
    list: bool,
    /// Print all attributes (as `ibv_devinfo -v`).
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Print the same fields as JSON.
    #[arg(long)]
    json: bool,
}

/// Everything shown for one device that uverbs can open.
struct Report {
    dev: Device,
    attr: DeviceAttrEx,
    num_comp_vectors: u32,
    board_id: Option<String>,
    /// `efadv_query_device`, for EFA devices.
    efa: Option<uverbs::EfaDeviceAttr>,
    ports: Vec<PortReport>,
}

struct PortReport {
    num: u8,
    attr: PortAttr,
    /// `ibv_query_port_speed` in 100 Mb/s units, when the kernel has it.
    speed: Option<u64>,
    gids: Vec<GidEntry>,
}

pub fn run(args: Args) -> Result<ExitCode, Failure> {
    let all = uverbs::devices()?;
    if args.list {
        if args.json {
            let names: Vec<&str> = all.iter().map(|d| d.name()).collect();
            println!("{}", json!({ "devices": names }));
        } else {
            let n = all.len();
            println!("{n} HCA{} found:", if n != 1 { "s" } else { "" });
            for d in &all {
                println!("\t{}", d.name());
            }
            println!();
        }
        return Ok(ExitCode::SUCCESS);
    }
    let selected: Vec<Device> = match &args.dev {
        Some(name) => vec![uverbs::device_by_name(name)?],
        None if all.is_empty() => return Err(Failure("No IB devices found".into())),
        None => all,
    };
    let mut text = String::new();
    let mut json_devs = Vec::new();
    for dev in selected {
        if !dev.is_supported() {
            if args.json {
                json_devs.push(unsupported_json(&dev));
            } else {
                text.push_str(&unsupported_text(&dev));
            }
            continue;
        }
        let r = gather(&dev, args.port, args.verbose)?;
        if args.json {
            json_devs.push(report_json(&r, args.verbose));
        } else {
            text.push_str(&report_text(&r, args.verbose));
        }
    }
    if args.json {
        let v = json!({ "devices": json_devs });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| Failure(e.to_string()))?
        );
    } else {
        print!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}

fn gather(dev: &Device, port: Option<u8>, verbose: bool) -> Result<Report, Failure> {
    let ctx = Context::open(dev)?;
    let attr = ctx.query_device_ex()?;
    let cnt = attr.orig_attr.phys_port_cnt;
    if let Some(p) = port {
        if p > cnt {
            return Err(Failure(format!(
                "info on port {p} of device {} failed: no such port: ports of this device are numbered 1..={cnt}",
                dev.name()
            )));
        }
    }
    let table = if verbose {
        ctx.query_gid_table()?
    } else {
        Vec::new()
    };
    let mut ports = Vec::new();
    for num in 1..=cnt {
        if port.is_some_and(|p| p != num) {
            continue;
        }
        let pattr = ctx.query_port(num)?;
        let speed = if verbose {
            ctx.query_port_speed(num).ok()
        } else {
            None
        };
        let mut gids: Vec<GidEntry> = table
            .iter()
            .filter(|g| g.port_num == u32::from(num))
            .cloned()
            .collect();
        gids.sort_by_key(|g| g.gid_index);
        ports.push(PortReport {
            num,
            attr: pattr,
            speed,
            gids,
        });
    }
    let board_id = std::fs::read_to_string(dev.ibdev_path().join("board_id"))
        .ok()
        .map(|s| s.trim_end_matches('\n').to_string())
        .filter(|s| !s.is_empty());
    Ok(Report {
        dev: dev.clone(),
        attr,
        num_comp_vectors: ctx.num_comp_vectors(),
        board_id,
        efa: efadv_attributes(&ctx)?,
        ports,
    })
}

/// `enum ibv_transport_type` of a node type, as libibverbs derives it.
fn transport_type(n: NodeType) -> i32 {
    match n {
        NodeType::Ca | NodeType::Switch | NodeType::Router => 0,
        NodeType::Rnic => 1,
        NodeType::Usnic => 2,
        NodeType::UsnicUdp => 3,
        NodeType::Unspecified => 4,
        NodeType::Unknown(_) => -1,
    }
}

fn guid_str(g: u64) -> String {
    uverbs::format_guid_colon(g)
}

// ---------------------------------------------------------------------------------------------
// Text, as devinfo.c prints it. `%d` of a C int is reproduced with `as i32`.
// ---------------------------------------------------------------------------------------------

const DEVICE_CAP_NAMES: &[(DeviceCapFlags, &str)] = &[
    (DeviceCapFlags::RESIZE_MAX_WR, "RESIZE_MAX_WR"),
    (DeviceCapFlags::BAD_PKEY_CNTR, "BAD_PKEY_CNTR"),
    (DeviceCapFlags::BAD_QKEY_CNTR, "BAD_QKEY_CNTR"),
    (DeviceCapFlags::RAW_MULTI, "RAW_MULTI"),
    (DeviceCapFlags::AUTO_PATH_MIG, "AUTO_PATH_MIG"),
    (DeviceCapFlags::CHANGE_PHY_PORT, "CHANGE_PHY_PORT"),
    (DeviceCapFlags::UD_AV_PORT_ENFORCE, "UD_AV_PORT_ENFORCE"),
    (DeviceCapFlags::CURR_QP_STATE_MOD, "CURR_QP_STATE_MOD"),
    (DeviceCapFlags::SHUTDOWN_PORT, "SHUTDOWN_PORT"),
    (DeviceCapFlags::INIT_TYPE, "INIT_TYPE"),
    (DeviceCapFlags::PORT_ACTIVE_EVENT, "PORT_ACTIVE_EVENT"),
    (DeviceCapFlags::SYS_IMAGE_GUID, "SYS_IMAGE_GUID"),
    (DeviceCapFlags::RC_RNR_NAK_GEN, "RC_RNR_NAK_GEN"),
    (DeviceCapFlags::SRQ_RESIZE, "SRQ_RESIZE"),
    (DeviceCapFlags::N_NOTIFY_CQ, "N_NOTIFY_CQ"),
    (DeviceCapFlags::MEM_WINDOW, "MEM_WINDOW"),
    (DeviceCapFlags::UD_IP_CSUM, "UD_IP_CSUM"),
    (DeviceCapFlags::XRC, "XRC"),
    (DeviceCapFlags::MEM_MGT_EXTENSIONS, "MEM_MGT_EXTENSIONS"),
    (DeviceCapFlags::MEM_WINDOW_TYPE_2A, "MEM_WINDOW_TYPE_2A"),
    (DeviceCapFlags::MEM_WINDOW_TYPE_2B, "MEM_WINDOW_TYPE_2B"),
    (DeviceCapFlags::RC_IP_CSUM, "RC_IP_CSUM"),
    (DeviceCapFlags::RAW_IP_CSUM, "RAW_IP_CSUM"),
    (
        DeviceCapFlags::MANAGED_FLOW_STEERING,
        "MANAGED_FLOW_STEERING",
    ),
];

const ODP_TRANSPORT_NAMES: &[(OdpTransportCaps, &str)] = &[
    (OdpTransportCaps::SEND, "SUPPORT_SEND"),
    (OdpTransportCaps::RECV, "SUPPORT_RECV"),
    (OdpTransportCaps::WRITE, "SUPPORT_WRITE"),
    (OdpTransportCaps::READ, "SUPPORT_READ"),
    (OdpTransportCaps::ATOMIC, "SUPPORT_ATOMIC"),
    (OdpTransportCaps::SRQ_RECV, "SUPPORT_SRQ"),
    (OdpTransportCaps::FLUSH, "SUPPORT_FLUSH"),
    (OdpTransportCaps::ATOMIC_WRITE, "SUPPORT_ATOMIC_WRITE"),
];

const DEVICE_CAP_EX_NAMES: &[(u64, &str)] = &[
    (uverbs::IBV_DEVICE_RAW_SCATTER_FCS, "RAW_SCATTER_FCS"),
    (
        uverbs::IBV_DEVICE_PCI_WRITE_END_PADDING,
        "PCI_WRITE_END_PADDING",
    ),
    (uverbs::IBV_DEVICE_CC_DMA_BOUNCE, "CC_DMA_BOUNCE"),
];

const RAW_PACKET_NAMES: &[(u32, &str)] = &[
    (1, "C-VLAN stripping offload"),
    (1 << 1, "Scatter FCS offload"),
    (1 << 2, "IP csum offload"),
    (1 << 3, "Delay drop"),
];

/// `IBV_QPT_*` numbers used in the `supported_qpts` bit masks.
const QPT_RC: u32 = 2;
const QPT_UD: u32 = 4;
const QPT_RAW_PACKET: u32 = 8;

const FLAG: &str = "\t\t\t\t\t";

fn odp_transport(s: &mut String, caps: OdpTransportCaps) {
    if caps.is_empty() {
        let _ = writeln!(s, "{FLAG}NO SUPPORT");
        return;
    }
    let mut known = 0;
    for (f, name) in ODP_TRANSPORT_NAMES {
        known |= f.bits();
        if caps.contains(*f) {
            let _ = writeln!(s, "{FLAG}{name}");
        }
    }
    if caps.bits() & !known != 0 {
        let _ = writeln!(s, "{FLAG}Unknown flags: 0x{:X}", caps.bits() & !known);
    }
}

fn supported_qpts(s: &mut String, qpts: u32, with_rc: bool) {
    let _ = writeln!(s, "\t\tsupported_qp:");
    let mut known = 1 << QPT_RAW_PACKET | 1 << QPT_UD;
    if qpts & (1 << QPT_RAW_PACKET) != 0 {
        let _ = writeln!(s, "{FLAG}SUPPORT_RAW_PACKET");
    }
    if qpts & (1 << QPT_UD) != 0 {
        let _ = writeln!(s, "{FLAG}SUPPORT_UD");
    }
    if with_rc {
        known |= 1 << QPT_RC;
        if qpts & (1 << QPT_RC) != 0 {
            let _ = writeln!(s, "{FLAG}SUPPORT_RC");
        }
    }
    if qpts & !known != 0 {
        let _ = writeln!(s, "{FLAG}Unknown flags: 0x{:X}", qpts & !known);
    }
}

fn report_text(r: &Report, verbose: bool) -> String {
    let mut s = String::new();
    let a = &r.attr.orig_attr;
    let x = &r.attr;
    let nt = r.dev.node_type();
    let _ = writeln!(s, "hca_id:\t{}", r.dev.name());
    let _ = writeln!(
        s,
        "\ttransport:\t\t\t{} ({})",
        nt.transport_str(),
        transport_type(nt)
    );
    if !a.fw_ver.is_empty() {
        let _ = writeln!(s, "\tfw_ver:\t\t\t\t{}", a.fw_ver);
    }
    let _ = writeln!(s, "\tnode_guid:\t\t\t{}", guid_str(a.node_guid));
    let _ = writeln!(s, "\tsys_image_guid:\t\t\t{}", guid_str(a.sys_image_guid));
    let _ = writeln!(s, "\tvendor_id:\t\t\t0x{:04x}", a.vendor_id);
    let _ = writeln!(s, "\tvendor_part_id:\t\t\t{}", a.vendor_part_id as i32);
    let _ = writeln!(s, "\thw_ver:\t\t\t\t0x{:X}", a.hw_ver);
    if let Some(b) = &r.board_id {
        let _ = writeln!(s, "\tboard_id:\t\t\t{b}");
    }
    let _ = writeln!(s, "\tphys_port_cnt:\t\t\t{}", a.phys_port_cnt);
    if verbose {
        let d = |v: u32| v as i32;
        let _ = writeln!(s, "\tmax_mr_size:\t\t\t0x{:x}", a.max_mr_size);
        let _ = writeln!(s, "\tpage_size_cap:\t\t\t0x{:x}", a.page_size_cap);
        let _ = writeln!(s, "\tmax_qp:\t\t\t\t{}", d(a.max_qp));
        let _ = writeln!(s, "\tmax_qp_wr:\t\t\t{}", d(a.max_qp_wr));
        let flags = a.device_cap_flags.bits();
        let _ = writeln!(s, "\tdevice_cap_flags:\t\t0x{flags:08x}");
        let mut known = 0;
        for (f, name) in DEVICE_CAP_NAMES {
            known |= f.bits();
            if a.device_cap_flags.contains(*f) {
                let _ = writeln!(s, "{FLAG}{name}");
            }
        }
        if flags & !known != 0 {
            let _ = writeln!(s, "{FLAG}Unknown flags: 0x{:X}", flags & !known);
        }
        let _ = writeln!(s, "\tmax_sge:\t\t\t{}", d(a.max_sge));
        let _ = writeln!(s, "\tmax_sge_rd:\t\t\t{}", d(a.max_sge_rd));
        let _ = writeln!(s, "\tmax_cq:\t\t\t\t{}", d(a.max_cq));
        let _ = writeln!(s, "\tmax_cqe:\t\t\t{}", d(a.max_cqe));
        let _ = writeln!(s, "\tmax_mr:\t\t\t\t{}", d(a.max_mr));
        let _ = writeln!(s, "\tmax_pd:\t\t\t\t{}", d(a.max_pd));
        let _ = writeln!(s, "\tmax_qp_rd_atom:\t\t\t{}", d(a.max_qp_rd_atom));
        let _ = writeln!(s, "\tmax_ee_rd_atom:\t\t\t{}", d(a.max_ee_rd_atom));
        let _ = writeln!(s, "\tmax_res_rd_atom:\t\t{}", d(a.max_res_rd_atom));
        let _ = writeln!(s, "\tmax_qp_init_rd_atom:\t\t{}", d(a.max_qp_init_rd_atom));
        let _ = writeln!(s, "\tmax_ee_init_rd_atom:\t\t{}", d(a.max_ee_init_rd_atom));
        let _ = writeln!(
            s,
            "\tatomic_cap:\t\t\t{} ({})",
            a.atomic_cap.as_str(),
            a.atomic_cap.raw() as i32
        );
        let _ = writeln!(s, "\tmax_ee:\t\t\t\t{}", d(a.max_ee));
        let _ = writeln!(s, "\tmax_rdd:\t\t\t{}", d(a.max_rdd));
        let _ = writeln!(s, "\tmax_mw:\t\t\t\t{}", d(a.max_mw));
        let _ = writeln!(s, "\tmax_raw_ipv6_qp:\t\t{}", d(a.max_raw_ipv6_qp));
        let _ = writeln!(s, "\tmax_raw_ethy_qp:\t\t{}", d(a.max_raw_ethy_qp));
        let _ = writeln!(s, "\tmax_mcast_grp:\t\t\t{}", d(a.max_mcast_grp));
        let _ = writeln!(s, "\tmax_mcast_qp_attach:\t\t{}", d(a.max_mcast_qp_attach));
        let _ = writeln!(
            s,
            "\tmax_total_mcast_qp_attach:\t{}",
            d(a.max_total_mcast_qp_attach)
        );
        let _ = writeln!(s, "\tmax_ah:\t\t\t\t{}", d(a.max_ah));
        let _ = writeln!(s, "\tmax_fmr:\t\t\t{}", d(a.max_fmr));
        if a.max_fmr != 0 {
            let _ = writeln!(s, "\tmax_map_per_fmr:\t\t{}", d(a.max_map_per_fmr));
        }
        let _ = writeln!(s, "\tmax_srq:\t\t\t{}", d(a.max_srq));
        if a.max_srq != 0 {
            let _ = writeln!(s, "\tmax_srq_wr:\t\t\t{}", d(a.max_srq_wr));
            let _ = writeln!(s, "\tmax_srq_sge:\t\t\t{}", d(a.max_srq_sge));
        }
        let _ = writeln!(s, "\tmax_pkeys:\t\t\t{}", a.max_pkeys);
        let _ = writeln!(s, "\tlocal_ca_ack_delay:\t\t{}", a.local_ca_ack_delay);

        // ODP
        let g = x.odp_caps.general_caps;
        let _ = writeln!(s, "\tgeneral_odp_caps:");
        if g.contains(uverbs::OdpGeneralCaps::SUPPORT) {
            let _ = writeln!(s, "{FLAG}ODP_SUPPORT");
        }
        if g.contains(uverbs::OdpGeneralCaps::SUPPORT_IMPLICIT) {
            let _ = writeln!(s, "{FLAG}ODP_SUPPORT_IMPLICIT");
        }
        if g.bits() & !3 != 0 {
            let _ = writeln!(s, "{FLAG}Unknown flags: 0x{:X}", g.bits() & !3);
        }
        let _ = writeln!(s, "\trc_odp_caps:");
        odp_transport(&mut s, x.odp_caps.rc_odp_caps);
        let _ = writeln!(s, "\tuc_odp_caps:");
        odp_transport(&mut s, x.odp_caps.uc_odp_caps);
        let _ = writeln!(s, "\tud_odp_caps:");
        odp_transport(&mut s, x.odp_caps.ud_odp_caps);
        let _ = writeln!(s, "\txrc_odp_caps:");
        odp_transport(&mut s, x.xrc_odp_caps);

        if x.completion_timestamp_mask != 0 {
            let _ = writeln!(
                s,
                "\tcompletion timestamp_mask:\t\t\t0x{:016x}",
                x.completion_timestamp_mask
            );
        } else {
            let _ = writeln!(s, "\tcompletion_timestamp_mask not supported");
        }
        if x.hca_core_clock != 0 {
            let _ = writeln!(s, "\thca_core_clock:\t\t\t{}kHZ", x.hca_core_clock);
        } else {
            let _ = writeln!(s, "\tcore clock not supported");
        }
        if x.raw_packet_caps != 0 {
            let _ = writeln!(s, "\traw packet caps:");
            for (f, name) in RAW_PACKET_NAMES {
                if x.raw_packet_caps & f != 0 {
                    let _ = writeln!(s, "{FLAG}{name}");
                }
            }
        }
        let _ = writeln!(s, "\tdevice_cap_flags_ex:\t\t0x{:X}", x.device_cap_flags_ex);
        let ex = x.device_cap_flags_ex & 0xffff_ffff_0000_0000;
        let mut known = 0;
        for (f, name) in DEVICE_CAP_EX_NAMES {
            known |= f;
            if ex & f != 0 {
                let _ = writeln!(s, "{FLAG}{name}");
            }
        }
        if ex & !known != 0 {
            let _ = writeln!(s, "{FLAG}Unknown flags: 0x{:X}", ex & !known);
        }
        let _ = writeln!(s, "\ttso_caps:");
        let _ = writeln!(s, "\t\tmax_tso:\t\t\t{}", x.tso_caps.max_tso as i32);
        if x.tso_caps.max_tso != 0 {
            supported_qpts(&mut s, x.tso_caps.supported_qpts, false);
        }
        let rss = &x.rss_caps;
        let _ = writeln!(s, "\trss_caps:");
        let _ = writeln!(
            s,
            "\t\tmax_rwq_indirection_tables:\t\t\t{}",
            rss.max_rwq_indirection_tables
        );
        let _ = writeln!(
            s,
            "\t\tmax_rwq_indirection_table_size:\t\t\t{}",
            rss.max_rwq_indirection_table_size
        );
        let _ = writeln!(
            s,
            "\t\trx_hash_function:\t\t\t\t0x{:x}",
            rss.rx_hash_function
        );
        let _ = writeln!(
            s,
            "\t\trx_hash_fields_mask:\t\t\t\t0x{:X}",
            rss.rx_hash_fields_mask
        );
        if rss.supported_qpts != 0 {
            supported_qpts(&mut s, rss.supported_qpts, false);
        }
        let _ = writeln!(s, "\tmax_wq_type_rq:\t\t\t{}", x.max_wq_type_rq);
        let pp = &x.packet_pacing_caps;
        let _ = writeln!(s, "\tpacket_pacing_caps:");
        let _ = writeln!(s, "\t\tqp_rate_limit_min:\t{}kbps", pp.qp_rate_limit_min);
        let _ = writeln!(s, "\t\tqp_rate_limit_max:\t{}kbps", pp.qp_rate_limit_max);
        if pp.qp_rate_limit_max != 0 {
            supported_qpts(&mut s, pp.supported_qpts, true);
        }
        let tm = &x.tm_caps;
        if tm.max_num_tags != 0 {
            let _ = writeln!(s, "\tmax_rndv_hdr_size:\t\t{}", tm.max_rndv_hdr_size);
            let _ = writeln!(s, "\tmax_num_tags:\t\t\t{}", tm.max_num_tags);
            let _ = writeln!(s, "\tmax_ops:\t\t\t{}", tm.max_ops);
            let _ = writeln!(s, "\tmax_sge:\t\t\t{}", tm.max_sge);
            let _ = writeln!(s, "\tflags:");
            if tm.flags & 1 != 0 {
                let _ = writeln!(s, "{FLAG}IBV_TM_CAP_RC");
            }
        } else {
            let _ = writeln!(s, "\ttag matching not supported");
        }
        let cq = &x.cq_mod_caps;
        if cq.max_cq_count != 0 && cq.max_cq_period != 0 {
            let _ = writeln!(s, "\n\tcq moderation caps:");
            let _ = writeln!(s, "\t\tmax_cq_count:\t{}", cq.max_cq_count);
            let _ = writeln!(s, "\t\tmax_cq_period:\t{} us\n", cq.max_cq_period);
        }
        if x.max_dm_size != 0 {
            let _ = writeln!(
                s,
                "\tmaximum available device memory:\t{}Bytes\n",
                x.max_dm_size
            );
        }
        let _ = writeln!(s, "\tnum_comp_vectors:\t\t{}", r.num_comp_vectors as i32);
    }
    if let Some(e) = &r.efa {
        efa_text(&mut s, e);
    }
    for p in &r.ports {
        port_text(&mut s, r, p, verbose);
    }
    s
}

/// `efadv_query_device` for an EFA device; `None` for others (their output stays exactly
/// `ibv_devinfo`'s).
fn efadv_attributes(ctx: &Context) -> Result<Option<uverbs::EfaDeviceAttr>, Failure> {
    Ok(match ctx.device().driver() {
        uverbs::Driver::Efa => Some(ctx.efadv_query_device()?),
        _ => None,
    })
}

/// The `efadv_query_device` attributes (no `ibv_devinfo` equivalent: rdma-core prints them
/// nowhere, so the names are those of `struct efadv_device_attr`).
fn efa_text(s: &mut String, e: &uverbs::EfaDeviceAttr) {
    let _ = writeln!(s, "	efadv attributes:");
    let _ = writeln!(s, "		comp_mask:		0x{:x}", e.comp_mask);
    let _ = writeln!(s, "		max_sq_wr:		{}", e.max_sq_wr);
    let _ = writeln!(s, "		max_rq_wr:		{}", e.max_rq_wr);
    let _ = writeln!(s, "		max_sq_sge:		{}", e.max_sq_sge);
    let _ = writeln!(s, "		max_rq_sge:		{}", e.max_rq_sge);
    let _ = writeln!(s, "		inline_buf_size:	{}", e.inline_buf_size);
    let _ = writeln!(s, "		inline_buf_size_ex:	{}", e.inline_buf_size_ex);
    let _ = writeln!(s, "		max_rdma_size:		{}", e.max_rdma_size);
    let _ = writeln!(s, "		device_caps:		0x{:08x}", e.device_caps.bits());
    for (name, _) in e.device_caps.iter_names() {
        let _ = writeln!(s, "					{name}");
    }
}

fn efa_json(e: &uverbs::EfaDeviceAttr) -> Value {
    json!({
        "comp_mask": e.comp_mask,
        "max_sq_wr": e.max_sq_wr,
        "max_rq_wr": e.max_rq_wr,
        "max_sq_sge": e.max_sq_sge,
        "max_rq_sge": e.max_rq_sge,
        "inline_buf_size": e.inline_buf_size,
        "inline_buf_size_ex": e.inline_buf_size_ex,
        "max_rdma_size": e.max_rdma_size,
        "device_caps": e.device_caps.bits(),
        "device_caps_names": e.device_caps.iter_names().map(|(n, _)| n).collect::<Vec<_>>(),
    })
}

fn port_text(s: &mut String, r: &Report, p: &PortReport, verbose: bool) {
    let a = &p.attr;
    let _ = writeln!(s, "\t\tport:\t{}", p.num);
    let _ = writeln!(
        s,
        "\t\t\tstate:\t\t\t{} ({})",
        a.state.as_str(),
        a.state.raw()
    );
    let _ = writeln!(
        s,
        "\t\t\tmax_mtu:\t\t{} ({})",
        a.max_mtu.as_str(),
        a.max_mtu.raw()
    );
    let _ = writeln!(
        s,
        "\t\t\tactive_mtu:\t\t{} ({})",
        a.active_mtu.as_str(),
        a.active_mtu.raw()
    );
    let _ = writeln!(s, "\t\t\tsm_lid:\t\t\t{}", a.sm_lid);
    let _ = writeln!(s, "\t\t\tport_lid:\t\t{}", a.lid);
    let _ = writeln!(s, "\t\t\tport_lmc:\t\t0x{:02x}", a.lmc);
    let _ = writeln!(s, "\t\t\tlink_layer:\t\t{}", a.link_layer.as_str());
    if verbose {
        let _ = writeln!(s, "\t\t\tmax_msg_sz:\t\t0x{:x}", a.max_msg_sz);
        let _ = writeln!(s, "\t\t\tport_cap_flags:\t\t0x{:08x}", a.port_cap_flags);
        let _ = writeln!(s, "\t\t\tport_cap_flags2:\t0x{:04x}", a.port_cap_flags2);
        let _ = writeln!(
            s,
            "\t\t\tmax_vl_num:\t\t{} ({})",
            a.max_vl_num_str(),
            a.max_vl_num
        );
        let _ = writeln!(s, "\t\t\tbad_pkey_cntr:\t\t0x{:x}", a.bad_pkey_cntr);
        let _ = writeln!(s, "\t\t\tqkey_viol_cntr:\t\t0x{:x}", a.qkey_viol_cntr);
        let _ = writeln!(s, "\t\t\tsm_sl:\t\t\t{}", a.sm_sl);
        let _ = writeln!(s, "\t\t\tpkey_tbl_len:\t\t{}", a.pkey_tbl_len);
        let _ = writeln!(s, "\t\t\tgid_tbl_len:\t\t{}", a.gid_tbl_len as i32);
        let _ = writeln!(s, "\t\t\tsubnet_timeout:\t\t{}", a.subnet_timeout);
        let _ = writeln!(s, "\t\t\tinit_type_reply:\t{}", a.init_type_reply);
        let _ = writeln!(
            s,
            "\t\t\tactive_width:\t\t{}X ({})",
            a.active_width_str(),
            a.active_width
        );
        let _ = writeln!(
            s,
            "\t\t\tactive_speed:\t\t{} ({})",
            a.active_speed_str(),
            a.effective_active_speed()
        );
        if let Some(sp) = p.speed {
            let _ = writeln!(s, "\t\t\teffective_speed:\t{:.1} Gbps", sp as f64 / 10.0);
        }
        if transport_type(r.dev.node_type()) == 0 {
            let _ = writeln!(
                s,
                "\t\t\tphys_state:\t\t{} ({})",
                a.phys_state_str(),
                a.phys_state
            );
        }
        for g in &p.gids {
            if let Some(line) = gid_line(g, a.link_layer) {
                let _ = writeln!(s, "{line}");
            }
        }
    }
    let _ = writeln!(s);
}

/// One `GID[  i]:` line as devinfo prints it, or `None` where devinfo prints nothing (a GID
/// whose interface id is zero, or a type it cannot name).
fn gid_line(g: &GidEntry, ll: LinkLayer) -> Option<String> {
    if g.gid.interface_id_is_zero() {
        return None;
    }
    let suffix = if ll == LinkLayer::Ethernet {
        format!(", {}", g.gid_type.as_str())
    } else {
        String::new()
    };
    let text = match g.gid_type {
        GidType::Ib | GidType::RoceV1 => g.gid.to_hex_string(),
        GidType::RoceV2 => g.gid.to_ipv6_string(),
        GidType::Unknown(_) => return None,
    };
    Some(format!("\t\t\tGID[{:3}]:\t\t{text}{suffix}", g.gid_index))
}

fn unsupported_text(dev: &Device) -> String {
    let nt = dev.node_type();
    format!(
        "hca_id:\t{}\n\ttransport:\t\t\t{} ({})\n\tnode_guid:\t\t\t{}\n\tdriver:\t\t\t\t{} (not opened)\n\n",
        dev.name(),
        nt.transport_str(),
        transport_type(nt),
        guid_str(dev.node_guid()),
        dev.driver()
    )
}

// ---------------------------------------------------------------------------------------------
// JSON: the same fields, numbers as numbers, enumerations by name, flags as name lists.
// ---------------------------------------------------------------------------------------------

fn unsupported_json(dev: &Device) -> Value {
    json!({
        "hca_id": dev.name(),
        "supported": false,
        "driver": dev.driver().to_string(),
        "transport": dev.node_type().transport_str(),
        "node_guid": guid_str(dev.node_guid()),
    })
}

fn names<F: Copy>(table: &[(F, &'static str)], has: impl Fn(F) -> bool) -> Vec<&'static str> {
    table
        .iter()
        .filter(|(f, _)| has(*f))
        .map(|(_, n)| *n)
        .collect()
}

fn report_json(r: &Report, verbose: bool) -> Value {
    let a = &r.attr.orig_attr;
    let x = &r.attr;
    let nt = r.dev.node_type();
    let mut m = Map::new();
    m.insert("hca_id".into(), json!(r.dev.name()));
    m.insert("supported".into(), json!(true));
    m.insert("transport".into(), json!(nt.transport_str()));
    m.insert("transport_type".into(), json!(transport_type(nt)));
    m.insert("fw_ver".into(), json!(a.fw_ver));
    m.insert("node_guid".into(), json!(guid_str(a.node_guid)));
    m.insert("sys_image_guid".into(), json!(guid_str(a.sys_image_guid)));
    m.insert("vendor_id".into(), json!(a.vendor_id));
    m.insert("vendor_part_id".into(), json!(a.vendor_part_id));
    m.insert("hw_ver".into(), json!(a.hw_ver));
    if let Some(b) = &r.board_id {
        m.insert("board_id".into(), json!(b));
    }
    m.insert("phys_port_cnt".into(), json!(a.phys_port_cnt));
    if verbose {
        let odp = |c: OdpTransportCaps| names(ODP_TRANSPORT_NAMES, |f| c.contains(f));
        let more = json!({
            "max_mr_size": a.max_mr_size,
            "page_size_cap": a.page_size_cap,
            "max_qp": a.max_qp,
            "max_qp_wr": a.max_qp_wr,
            "device_cap_flags": a.device_cap_flags.bits(),
            "device_cap_flags_names":
                names(DEVICE_CAP_NAMES, |f| a.device_cap_flags.contains(f)),
            "max_sge": a.max_sge,
            "max_sge_rd": a.max_sge_rd,
            "max_cq": a.max_cq,
            "max_cqe": a.max_cqe,
            "max_mr": a.max_mr,
            "max_pd": a.max_pd,
            "max_qp_rd_atom": a.max_qp_rd_atom,
            "max_ee_rd_atom": a.max_ee_rd_atom,
            "max_res_rd_atom": a.max_res_rd_atom,
            "max_qp_init_rd_atom": a.max_qp_init_rd_atom,
            "max_ee_init_rd_atom": a.max_ee_init_rd_atom,
            "atomic_cap": a.atomic_cap.as_str(),
            "max_ee": a.max_ee,
            "max_rdd": a.max_rdd,
            "max_mw": a.max_mw,
            "max_raw_ipv6_qp": a.max_raw_ipv6_qp,
            "max_raw_ethy_qp": a.max_raw_ethy_qp,
            "max_mcast_grp": a.max_mcast_grp,
            "max_mcast_qp_attach": a.max_mcast_qp_attach,
            "max_total_mcast_qp_attach": a.max_total_mcast_qp_attach,
            "max_ah": a.max_ah,
            "max_fmr": a.max_fmr,
            "max_map_per_fmr": a.max_map_per_fmr,
            "max_srq": a.max_srq,
            "max_srq_wr": a.max_srq_wr,
            "max_srq_sge": a.max_srq_sge,
            "max_pkeys": a.max_pkeys,
            "local_ca_ack_delay": a.local_ca_ack_delay,
            "general_odp_caps": x.odp_caps.general_caps.bits(),
            "rc_odp_caps": odp(x.odp_caps.rc_odp_caps),
            "uc_odp_caps": odp(x.odp_caps.uc_odp_caps),
            "ud_odp_caps": odp(x.odp_caps.ud_odp_caps),
            "xrc_odp_caps": odp(x.xrc_odp_caps),
            "completion_timestamp_mask": x.completion_timestamp_mask,
            "hca_core_clock": x.hca_core_clock,
            "raw_packet_caps": x.raw_packet_caps,
            "device_cap_flags_ex": x.device_cap_flags_ex,
            "tso_caps": { "max_tso": x.tso_caps.max_tso, "supported_qpts": x.tso_caps.supported_qpts },
            "rss_caps": {
                "supported_qpts": x.rss_caps.supported_qpts,
                "max_rwq_indirection_tables": x.rss_caps.max_rwq_indirection_tables,
                "max_rwq_indirection_table_size": x.rss_caps.max_rwq_indirection_table_size,
                "rx_hash_function": x.rss_caps.rx_hash_function,
                "rx_hash_fields_mask": x.rss_caps.rx_hash_fields_mask,
            },
            "max_wq_type_rq": x.max_wq_type_rq,
            "packet_pacing_caps": {
                "qp_rate_limit_min": x.packet_pacing_caps.qp_rate_limit_min,
                "qp_rate_limit_max": x.packet_pacing_caps.qp_rate_limit_max,
                "supported_qpts": x.packet_pacing_caps.supported_qpts,
            },
            "tm_caps": {
                "max_rndv_hdr_size": x.tm_caps.max_rndv_hdr_size,
                "max_num_tags": x.tm_caps.max_num_tags,
                "flags": x.tm_caps.flags,
                "max_ops": x.tm_caps.max_ops,
                "max_sge": x.tm_caps.max_sge,
            },
            "cq_mod_caps": {
                "max_cq_count": x.cq_mod_caps.max_cq_count,
                "max_cq_period": x.cq_mod_caps.max_cq_period,
            },
            "max_dm_size": x.max_dm_size,
            "num_comp_vectors": r.num_comp_vectors,
        });
        if let Value::Object(o) = more {
            m.extend(o);
        }
    }
    let ports: Vec<Value> = r
        .ports
        .iter()
        .map(|p| {
            let a = &p.attr;
            let mut pm = Map::new();
            pm.insert("port".into(), json!(p.num));
            pm.insert("state".into(), json!(a.state.as_str()));
            pm.insert("max_mtu".into(), json!(a.max_mtu.bytes()));
            pm.insert("active_mtu".into(), json!(a.active_mtu.bytes()));
            pm.insert("sm_lid".into(), json!(a.sm_lid));
            pm.insert("port_lid".into(), json!(a.lid));
            pm.insert("port_lmc".into(), json!(a.lmc));
            pm.insert("link_layer".into(), json!(a.link_layer.as_str()));
            if verbose {
                let more = json!({
                    "max_msg_sz": a.max_msg_sz,
                    "port_cap_flags": a.port_cap_flags,
                    "port_cap_flags2": a.port_cap_flags2,
                    "max_vl_num": a.max_vl_num_str(),
                    "bad_pkey_cntr": a.bad_pkey_cntr,
                    "qkey_viol_cntr": a.qkey_viol_cntr,
                    "sm_sl": a.sm_sl,
                    "pkey_tbl_len": a.pkey_tbl_len,
                    "gid_tbl_len": a.gid_tbl_len,
                    "subnet_timeout": a.subnet_timeout,
                    "init_type_reply": a.init_type_reply,
                    "active_width": format!("{}X", a.active_width_str()),
                    "active_speed": a.active_speed_str(),
                    "effective_speed_gbps": p.speed.map(|s| s as f64 / 10.0),
                    "phys_state": a.phys_state_str(),
                    "gids": p.gids.iter().map(|g| json!({
                        "index": g.gid_index,
                        "gid": g.gid.to_ipv6_string(),
                        "type": match g.gid_type {
                            GidType::Ib => "IB",
                            GidType::RoceV1 => "RoCE v1",
                            GidType::RoceV2 => "RoCE v2",
                            GidType::Unknown(_) => "unknown",
                        },
                        "netdev": g.netdev,
                        "ndev_ifindex": g.ndev_ifindex,
                    })).collect::<Vec<_>>(),
                });
                if let Value::Object(o) = more {
                    pm.extend(o);
                }
            }
            Value::Object(pm)
        })
        .collect();
    if let Some(e) = &r.efa {
        m.insert("efadv".into(), efa_json(e));
    }
    m.insert("ports".into(), Value::Array(ports));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use uverbs::Gid;

    fn entry(ip: &str, index: u32, t: GidType) -> GidEntry {
        let ip: std::net::Ipv6Addr = ip.parse().unwrap();
        GidEntry {
            gid: Gid::from(ip.octets()),
            gid_index: index,
            port_num: 1,
            gid_type: t,
            ndev_ifindex: 2,
            netdev: Some("veth0".into()),
        }
    }

    #[test]
    fn efadv_attributes_are_printed_with_cap_names() {
        let e = uverbs::EfaDeviceAttr {
            comp_mask: 0,
            inline_buf_size_ex: 80,
            max_sq_wr: 4096,
            max_rq_wr: 8192,
            max_sq_sge: 2,
            max_rq_sge: 3,
            inline_buf_size: 32,
            device_caps: uverbs::EfaDeviceCaps::RDMA_READ
                | uverbs::EfaDeviceCaps::RDMA_WRITE
                | uverbs::EfaDeviceCaps::COMP_CNTR,
            max_rdma_size: 1 << 30,
            kernel_caps: 0,
        };
        let mut s = String::new();
        efa_text(&mut s, &e);
        assert_eq!(
            s,
            "\tefadv attributes:\n\t\tcomp_mask:\t\t0x0\n\t\tmax_sq_wr:\t\t4096\n\t\tmax_rq_wr:\t\t8192\n\t\tmax_sq_sge:\t\t2\n\t\tmax_rq_sge:\t\t3\n\t\tinline_buf_size:\t32\n\t\tinline_buf_size_ex:\t80\n\t\tmax_rdma_size:\t\t1073741824\n\t\tdevice_caps:\t\t0x00000049\n\t\t\t\t\tRDMA_READ\n\t\t\t\t\tRDMA_WRITE\n\t\t\t\t\tCOMP_CNTR\n"
        );
        let j = efa_json(&e);
        assert_eq!(j["device_caps"], 0x49);
        assert_eq!(
            j["device_caps_names"],
            json!(["RDMA_READ", "RDMA_WRITE", "COMP_CNTR"])
        );
        assert_eq!(j["inline_buf_size_ex"], 80);
        assert_eq!(j["comp_mask"], 0);
        assert_eq!(j["max_rq_sge"], 3);
    }

    /// What `uverbs info` prints for an EFA device, read through a context of the EFA device
    /// model: the limits and caps the device reports, by name.
    #[test]
    fn efadv_attributes_of_an_efa_context_are_printed() {
        let fab = uverbs_efa_model::EfaFabric::new(1);
        let dev = fab.add_device(uverbs_efa_model::ModelConfig {
            max_sq_wr: 1234,
            max_rq_wr: 4321,
            max_sq_sge: 2,
            max_rq_sge: 3,
            inline_buf_size: 32,
            max_rdma_size: 1 << 20,
            ..Default::default()
        });
        let ctx = dev.open().unwrap();
        let e = efadv_attributes(&ctx)
            .unwrap()
            .expect("an EFA context has efadv attributes");
        let mut s = String::new();
        efa_text(&mut s, &e);
        for line in [
            "\tefadv attributes:\n",
            "\t\tmax_sq_wr:\t\t1234\n",
            "\t\tmax_rq_wr:\t\t4321\n",
            "\t\tmax_sq_sge:\t\t2\n",
            "\t\tmax_rq_sge:\t\t3\n",
            "\t\tinline_buf_size:\t32\n",
            "\t\tmax_rdma_size:\t\t1048576\n",
            "\t\t\t\t\tRDMA_READ\n",
            "\t\t\t\t\tRDMA_WRITE\n",
            "\t\t\t\t\tCQ_WITH_SGID\n",
        ] {
            assert!(s.contains(line), "{line:?} not in {s:?}");
        }
        assert_eq!(efa_json(&e)["max_sq_wr"], 1234);
        fab.assert_no_violations();
    }

    /// The port section `uverbs info -v` prints for an EFA device, from the port and GID
    /// queries of the EFA device model (answered as the kernel's EFA driver does).
    #[test]
    fn port_section_of_an_efa_context_is_printed() {
        let fab = uverbs_efa_model::EfaFabric::new(2);
        let dev = fab.add_device(uverbs_efa_model::ModelConfig {
            mtu: 8928,
            ..Default::default()
        });
        let ctx = dev.open().unwrap();
        let attr = ctx.query_device_ex().unwrap();
        assert_eq!(attr.orig_attr.phys_port_cnt, 1);
        let table = ctx.query_gid_table().unwrap();
        let report = Report {
            dev: ctx.device().clone(),
            attr,
            num_comp_vectors: ctx.num_comp_vectors(),
            board_id: None,
            efa: efadv_attributes(&ctx).unwrap(),
            ports: vec![PortReport {
                num: 1,
                attr: ctx.query_port(1).unwrap(),
                speed: ctx.query_port_speed(1).ok(),
                gids: table,
            }],
        };
        let s = report_text(&report, true);
        for line in [
            "\t\tport:\t1\n",
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
            "\t\t\tmax_mtu:\t\t4096 (5)\n",
            "\t\t\tactive_mtu:\t\t4096 (5)\n",
            "\t\t\tport_lid:\t\t0\n",
            "\t\t\tport_lmc:\t\t0x01\n",
            "\t\t\tlink_layer:\t\tUnspecified\n",
            "\t\t\tmax_msg_sz:\t\t0x22e0\n",
            "\t\t\tpkey_tbl_len:\t\t1\n",
            "\t\t\tgid_tbl_len:\t\t1\n",
            "\t\t\tactive_width:\t\t4X (2)\n",
            "\t\t\tactive_speed:\t\t25.0 Gbps (32)\n",
            "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0000:0000:0000:0001\n",
            "\tefadv attributes:\n",
        ] {
            assert!(s.contains(line), "{line:?} not in {s}");
        }
        let j = report_json(&report, true);
        let port = &j["ports"][0];
        assert_eq!(port["link_layer"], "Unspecified", "{j}");
        assert_eq!(port["max_msg_sz"], 8928, "{j}");
        assert_eq!(port["gids"][0]["gid"], "fe80::1", "{j}");
        assert_eq!(port["gids"][0]["type"], "IB", "{j}");
        fab.assert_no_violations();
    }

    #[test]
    fn gid_lines_match_devinfo() {
        let v2 = entry("::ffff:10.99.0.1", 1, GidType::RoceV2);
        assert_eq!(
            gid_line(&v2, LinkLayer::Ethernet).unwrap(),
            "\t\t\tGID[  1]:\t\t::ffff:10.99.0.1, RoCE v2"
        );
        let v1 = entry("fe80::5054:ff:fe12:3456", 0, GidType::RoceV1);
        assert_eq!(
            gid_line(&v1, LinkLayer::Ethernet).unwrap(),
            "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:5054:00ff:fe12:3456, RoCE v1"
        );
        let ib = entry("fe80::2", 100, GidType::Ib);
        assert_eq!(
            gid_line(&ib, LinkLayer::InfiniBand).unwrap(),
            "\t\t\tGID[100]:\t\tfe80:0000:0000:0000:0000:0000:0000:0002"
        );
        assert_eq!(
            gid_line(&entry("fe80::", 3, GidType::RoceV2), LinkLayer::Ethernet),
            None
        );
    }

    #[test]
    fn odp_lines_name_known_bits_and_show_unknown_ones() {
        let mut s = String::new();
        odp_transport(&mut s, OdpTransportCaps::empty());
        assert_eq!(s, "\t\t\t\t\tNO SUPPORT\n");
        let mut s = String::new();
        odp_transport(
            &mut s,
            OdpTransportCaps::from_bits_retain(0x1 | 0x20 | 0x100),
        );
        assert_eq!(
            s,
            "\t\t\t\t\tSUPPORT_SEND\n\t\t\t\t\tSUPPORT_SRQ\n\t\t\t\t\tUnknown flags: 0x100\n"
        );
    }
}
