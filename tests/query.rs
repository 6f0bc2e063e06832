//! Device, port and GID queries against the soft-RoCE device, checked against sysfs (which the
//! kernel fills from the same driver data by another path) and against what rxe must report.

mod common;

use std::fs;
use std::path::Path;

use uverbs::{Errno, GidType, LinkLayer, Mtu, PortState};

fn sysfs(dev: &uverbs::Device, rel: &str) -> String {
    let p = dev.ibdev_path().join(rel);
    fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
        .trim()
        .to_string()
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn query_device_matches_sysfs_and_rxe_limits() {
    let ctx = common::rxe_context();
    let dev = ctx.device().clone();
    let a = ctx.query_device().expect("query_device");
    assert!(a.phys_port_cnt >= 1, "phys_port_cnt {}", a.phys_port_cnt);
    assert!(
        a.max_cqe > 0 && a.max_qp > 0 && a.max_qp_wr > 0 && a.max_sge > 0,
        "{a:?}"
    );
    assert!(a.max_mr_size > 0 && a.max_pd > 0, "{a:?}");
    // rxe reports firmware 0 as "0.0.0" (rxe_query_device).
    assert_eq!(a.fw_ver, "0.0.0");
    // The node GUID in the response is the one sysfs shows.
    assert_eq!(
        uverbs::format_guid_colon(a.node_guid),
        sysfs(&dev, "node_guid")
    );
    assert_eq!(a.node_guid, dev.node_guid());
    assert_eq!(
        uverbs::format_guid_colon(a.sys_image_guid),
        sysfs(&dev, "sys_image_guid")
    );
    // rxe has no XRC (facts: an XRC SRQ is refused).
    assert!(!a.device_cap_flags.contains(uverbs::DeviceCapFlags::XRC));
    assert!(a
        .device_cap_flags
        .contains(uverbs::DeviceCapFlags::MEM_WINDOW));
    let ports = fs::read_dir(dev.ibdev_path().join("ports"))
        .unwrap()
        .count();
    assert_eq!(usize::from(a.phys_port_cnt), ports);

    let x = ctx.query_device_ex().expect("query_device_ex");
    assert_eq!(
        x.orig_attr, a,
        "the extended query repeats the base attributes"
    );
    assert!(
        x.response_length as usize > 176,
        "the kernel filled only {} bytes of the extended response",
        x.response_length
    );
    assert_eq!(x.phys_port_cnt_ex, u32::from(a.phys_port_cnt));
    assert_eq!(
        x.device_cap_flags_ex & 0xffff_ffff,
        u64::from(a.device_cap_flags.bits())
    );
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn port_1_is_active_ethernet_and_matches_sysfs() {
    let ctx = common::rxe_context();
    let dev = ctx.device().clone();
    let p = ctx.query_port(1).expect("query_port(1)");
    assert_eq!(p.state, PortState::Active);
    assert_eq!(sysfs(&dev, "ports/1/state"), "4: ACTIVE");
    assert_eq!(p.link_layer, LinkLayer::Ethernet);
    assert_eq!(sysfs(&dev, "ports/1/link_layer"), "Ethernet");
    assert_eq!(p.max_mtu, Mtu::Mtu4096, "rxe's max MTU");
    assert!(
        p.active_mtu <= p.max_mtu && p.active_mtu.bytes().is_some(),
        "{p:?}"
    );
    assert!(p.gid_tbl_len > 0 && p.pkey_tbl_len > 0, "{p:?}");
    assert_eq!(p.phys_state, 5, "LINK_UP");
    assert_eq!(sysfs(&dev, "ports/1/phys_state"), "5: LinkUp");
    // sysfs cap_mask is the same port_cap_flags, printed as 0x%08x.
    assert_eq!(
        sysfs(&dev, "ports/1/cap_mask"),
        format!("0x{:08x}", p.port_cap_flags)
    );
    assert_eq!(sysfs(&dev, "ports/1/lid"), format!("0x{:x}", p.lid));
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn ports_out_of_range_are_clear_errors() {
    let ctx = common::rxe_context();
    let n = ctx.query_device().unwrap().phys_port_cnt;
    for bad in [0u8, n + 1, 255] {
        let e = ctx.query_port(bad).expect_err("an invalid port must fail");
        assert!(e.is(Errno::INVAL), "port {bad}: {e}");
        let msg = e.to_string();
        assert!(msg.contains("query_port"), "{msg}");
        assert!(msg.contains(&format!("port {bad}")), "{msg}");
        assert!(
            msg.contains(&format!("1..={n}")),
            "names the valid range: {msg}"
        );
    }
    let e = ctx.query_gid(0, 0).expect_err("port 0");
    assert!(e.to_string().contains("1..="), "{e}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn gid_table_has_a_roce_v2_entry_on_an_existing_netdev_and_matches_sysfs() {
    let ctx = common::rxe_context();
    let dev = ctx.device().clone();
    let table = ctx.query_gid_table().expect("query_gid_table");
    assert!(
        !table.is_empty(),
        "an active RoCE port has at least its link-local GIDs"
    );
    let parent = sysfs(&dev, "parent");
    let mut v2 = 0;
    for e in &table {
        assert_eq!(e.port_num, 1);
        assert!(!e.gid.is_zero(), "empty slots are not listed: {e:?}");
        let port = format!("ports/1/gids/{}", e.gid_index);
        // sysfs shows the same GID and type for the same slot.
        assert_eq!(
            sysfs(&dev, &port),
            e.gid.to_hex_string(),
            "slot {}",
            e.gid_index
        );
        let t = sysfs(&dev, &format!("ports/1/gid_attrs/types/{}", e.gid_index));
        let expect = match e.gid_type {
            GidType::RoceV2 => "RoCE v2",
            GidType::RoceV1 | GidType::Ib => "IB/RoCE v1",
            GidType::Unknown(x) => panic!("unknown gid type {x}"),
        };
        assert_eq!(t, expect, "slot {}", e.gid_index);
        let ndev = e
            .netdev
            .as_deref()
            .unwrap_or_else(|| panic!("no netdev: {e:?}"));
        assert!(Path::new("/sys/class/net").join(ndev).exists(), "{ndev}");
        assert_eq!(ndev, parent, "rxe GIDs belong to its parent netdev");
        assert_eq!(
            sysfs(&dev, &format!("ports/1/gid_attrs/ndevs/{}", e.gid_index)),
            ndev
        );
        let idx: u32 = fs::read_to_string(format!("/sys/class/net/{ndev}/ifindex"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(e.ndev_ifindex, idx);
        if e.gid_type == GidType::RoceV2 {
            v2 += 1;
        }
        // The single-entry query agrees with the table.
        let one = ctx.query_gid_ex(1, e.gid_index).expect("query_gid_ex");
        assert_eq!(&one, e);
        assert_eq!(ctx.query_gid(1, e.gid_index).unwrap(), e.gid);
    }
    assert!(v2 > 0, "no RoCE v2 GID in {table:?}");
    // GID 0 of a RoCE port is the link-local fe80:: address.
    assert_eq!(
        ctx.query_gid(1, 0).unwrap().subnet_prefix(),
        0xfe80_0000_0000_0000
    );
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn empty_gid_slots_and_pkeys_behave_as_libibverbs() {
    let ctx = common::rxe_context();
    let p = ctx.query_port(1).unwrap();
    let used: Vec<u32> = ctx
        .query_gid_table()
        .unwrap()
        .iter()
        .map(|e| e.gid_index)
        .collect();
    let empty = (0..p.gid_tbl_len)
        .find(|i| !used.contains(i))
        .expect("rxe has 1024 slots, a few used");
    // ibv_query_gid: an empty slot reads as zero; ibv_query_gid_ex: ENODATA.
    assert!(ctx.query_gid(1, empty).unwrap().is_zero());
    let e = ctx.query_gid_ex(1, empty).unwrap_err();
    assert!(e.is(Errno::NODATA), "{e}");
    let e = ctx.query_gid_ex(1, p.gid_tbl_len).unwrap_err();
    assert!(e.to_string().contains("query_gid"), "{e}");

    assert_eq!(
        ctx.query_pkey(1, 0).expect("pkey 0"),
        0xffff,
        "default P_Key"
    );
    let e = ctx.query_pkey(1, p.pkey_tbl_len).unwrap_err();
    assert!(e.to_string().contains("query_pkey"), "{e}");
    let e = ctx.query_pkey(0, 0).unwrap_err();
    assert!(e.is(Errno::INVAL), "{e}");
}
