//! Port and GID queries of an EFA device through the public API, against the EFA device model
//! (uverbs-efa-model), which answers them as the kernel's EFA driver does (`efa_query_port`,
//! `efa_query_gid`, the core's GID cache): one port, ACTIVE, link layer unspecified, one GID
//! (the device address, type IB), one P_Key, LID 0, `max_msg_sz` the device MTU. Bad input is
//! refused with the kernel's errno, through the library and on the raw command channel.

use uverbs::channel::{Channel, IoctlCmd, WriteCmd};
use uverbs::uapi::cmds::{
    UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX,
    UVERBS_ATTR_QUERY_GID_ENTRY_PORT, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
    UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS,
    UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
    UVERBS_ATTR_QUERY_PORT_PORT_NUM, UVERBS_ATTR_QUERY_PORT_RESP, UVERBS_METHOD_QUERY_GID_ENTRY,
    UVERBS_METHOD_QUERY_GID_TABLE, UVERBS_METHOD_QUERY_PORT, UVERBS_OBJECT_DEVICE,
};
use uverbs::uapi::verbs::{IbUverbsGidEntry, IbUverbsQueryPortRespEx};
use uverbs::uapi::write::{IbUverbsQueryPort, IbUverbsQueryPortResp, IB_USER_VERBS_CMD_QUERY_PORT};
use uverbs::{Errno, GidType, LinkLayer, Mtu, PortState};
use uverbs_efa_model::{EfaDevice, EfaFabric, ModelConfig};

fn device(mtu: u32) -> (EfaFabric, EfaDevice) {
    let fab = EfaFabric::new(7);
    // A second device first, so the one under test has GID fe80::2, not the first one's.
    let _other = fab.add_device(ModelConfig::default());
    let dev = fab.add_device(ModelConfig {
        mtu,
        ..Default::default()
    });
    (fab, dev)
}

#[test]
fn port_1_reports_what_efa_query_port_fills_in() {
    let (fab, dev) = device(8928);
    let ctx = dev.open().unwrap();
    let p = ctx.query_port(1).unwrap();
    assert_eq!(p.state, PortState::Active);
    assert_eq!(p.phys_state, 5, "LINK_UP");
    assert_eq!(p.phys_state_str(), "LINK_UP");
    assert_eq!(p.link_layer, LinkLayer::Unspecified);
    // 8928 is not an IB MTU: ib_mtu_int_to_enum rounds down to 4096.
    assert_eq!(p.max_mtu, Mtu::Mtu4096);
    assert_eq!(p.active_mtu, Mtu::Mtu4096);
    assert_eq!(p.max_msg_sz, 8928, "max_msg_sz is the device MTU");
    assert_eq!(p.gid_tbl_len, 1);
    assert_eq!(p.pkey_tbl_len, 1);
    assert_eq!((p.lid, p.sm_lid, p.sm_sl), (0, 0, 0));
    assert_eq!(p.lmc, 1, "efa_query_port sets lmc 1");
    assert_eq!(p.max_vl_num, 1);
    assert_eq!(p.active_width, 2, "IB_WIDTH_4X");
    assert_eq!(p.active_width_str(), "4");
    assert_eq!(p.active_speed, 32, "IB_SPEED_EDR");
    assert_eq!(p.active_speed_ex, 32, "the ioctl copies active_speed");
    assert_eq!(p.active_speed_str(), "25.0 Gbps");
    assert_eq!((p.port_cap_flags, p.port_cap_flags2, p.flags), (0, 0, 0));
    assert_eq!((p.bad_pkey_cntr, p.qkey_viol_cntr), (0, 0));
    // The device agrees: one port, one P_Key.
    let d = ctx.query_device().unwrap();
    assert_eq!((d.phys_port_cnt, d.max_pkeys), (1, 1));
    fab.assert_no_violations();
}

#[test]
fn small_mtus_map_to_the_ib_mtu_below_them() {
    for (mtu, want) in [
        (4096, Mtu::Mtu4096),
        (4095, Mtu::Mtu2048),
        (2048, Mtu::Mtu2048),
        (1500, Mtu::Mtu1024),
        (600, Mtu::Mtu512),
        (300, Mtu::Mtu256),
    ] {
        let (_fab, dev) = device(mtu);
        let p = dev.open().unwrap().query_port(1).unwrap();
        assert_eq!(
            (p.active_mtu, p.max_msg_sz),
            (want, mtu),
            "device MTU {mtu}"
        );
    }
}

#[test]
fn gid_index_0_is_the_device_address() {
    let (fab, dev) = device(8192);
    let ctx = dev.open().unwrap();
    let want = dev.gid();
    assert_eq!(want[15], 2, "the second device of the fabric");
    assert_eq!(ctx.query_gid(1, 0).unwrap().raw, want);
    let e = ctx.query_gid_ex(1, 0).unwrap();
    assert_eq!(e.gid.raw, want);
    assert_eq!((e.gid_index, e.port_num), (0, 1));
    assert_eq!(e.gid_type, GidType::Ib);
    assert_eq!((e.ndev_ifindex, e.netdev.as_deref()), (0, None));
    let t = ctx.query_gid_table().unwrap();
    assert_eq!(t, vec![e], "the table holds exactly that entry");
    fab.assert_no_violations();
}

/// EFA has no RoCE: whatever a program asks `find_gid` for (an IPv4 or IPv6 peer, a family,
/// anything), the answer is index 0's GID, the one EFA AHs are made from; a port that does
/// not exist is the same error as `query_port`'s.
#[test]
fn find_gid_on_efa_is_index_0_for_every_query() {
    let (fab, dev) = device(8192);
    let ctx = dev.open().unwrap();
    let index0 = ctx.query_gid_ex(1, 0).unwrap();
    for q in [
        uverbs::GidQuery::Peer("10.0.0.2".parse().unwrap()),
        uverbs::GidQuery::Peer("fe80::2".parse().unwrap()),
        uverbs::GidQuery::Peer("2001:db8::2".parse().unwrap()),
        uverbs::GidQuery::Ipv4,
        uverbs::GidQuery::Ipv6,
        uverbs::GidQuery::Any,
    ] {
        assert_eq!(ctx.find_gid(1, &q).unwrap(), index0, "{q:?}");
    }
    let e = ctx.find_gid(2, &uverbs::GidQuery::Any).unwrap_err();
    assert!(e.is(Errno::INVAL) && e.to_string().contains("1..=1"), "{e}");
    fab.assert_no_violations();
}

#[test]
fn bad_port_and_gid_index_are_refused_with_einval() {
    let (_fab, dev) = device(8192);
    let ctx = dev.open().unwrap();
    for port in [2u8, 255] {
        let e = ctx.query_port(port).unwrap_err();
        assert!(e.is(Errno::INVAL), "port {port}: {e}");
        assert!(e.to_string().contains("1..=1"), "names the range: {e}");
        let e = ctx.query_gid(port, 0).unwrap_err();
        assert!(e.is(Errno::INVAL), "gid of port {port}: {e}");
    }
    let e = ctx.query_port(0).unwrap_err();
    assert!(e.is(Errno::INVAL), "{e}");
    for index in [1u32, 2, u32::MAX] {
        let e = ctx.query_gid_ex(1, index).unwrap_err();
        assert!(e.is(Errno::INVAL), "gid index {index}: {e}");
        let e = ctx.query_gid(1, index).unwrap_err();
        assert!(e.is(Errno::INVAL), "gid index {index}: {e}");
    }
}

/// The model sees the commands as the kernel would; hand it what the library never sends.
#[test]
fn raw_commands_are_checked_as_the_kernel_checks_them() {
    let (_fab, dev) = device(8192);
    let _ctx = dev.open().unwrap();

    // QUERY_PORT: a response shorter than ib_uverbs_query_port_resp_ex is EINVAL; a longer
    // one is zero-filled past the struct.
    let mut short = [0u8; 44];
    let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
    cmd.const_u64(UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
        .ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut short[..]);
    assert_eq!(dev.ioctl(&mut cmd), Err(Errno::INVAL));
    let mut long = [0xa5u8; 56];
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
        cmd.const_u64(UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
            .ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut long[..]);
        assert_eq!(dev.ioctl(&mut cmd), Ok(()));
    }
    let sz = std::mem::size_of::<IbUverbsQueryPortRespEx>();
    assert_eq!(sz, 48);
    assert!(long[sz..].iter().all(|&b| b == 0), "{long:?}");
    let (r, _) =
        <IbUverbsQueryPortRespEx as zerocopy::FromBytes>::read_from_prefix(&long[..]).unwrap();
    assert_eq!((r.legacy_resp.state, r.legacy_resp.gid_tbl_len), (4, 1));
    // The port number is mandatory.
    let mut resp = IbUverbsQueryPortRespEx::default();
    let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
    cmd.ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp);
    assert_eq!(dev.ioctl(&mut cmd), Err(Errno::INVAL));

    // The legacy write: port 1 answered, port 2 EINVAL.
    for (port, want) in [
        (1u8, Ok(())),
        (2, Err(Errno::INVAL)),
        (0, Err(Errno::INVAL)),
    ] {
        let req = IbUverbsQueryPort {
            port_num: port,
            ..Default::default()
        };
        let mut cmd = WriteCmd::legacy(
            IB_USER_VERBS_CMD_QUERY_PORT,
            &req,
            &[],
            std::mem::size_of::<IbUverbsQueryPortResp>(),
            0,
        )
        .unwrap();
        assert_eq!(dev.write(&mut cmd), want, "legacy port {port}");
        if want.is_ok() {
            let r: IbUverbsQueryPortResp = cmd.response_as();
            assert_eq!(
                (r.state, r.max_msg_sz, r.lmc, r.link_layer),
                (4, 8192, 1, 0)
            );
        }
    }

    // QUERY_GID_ENTRY: flags other than 0 are EINVAL, a short entry buffer too.
    let gid_entry = |port: u64, index: u64, flags: u32, out: &mut [u8]| {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY);
        cmd.const_u64(UVERBS_ATTR_QUERY_GID_ENTRY_PORT, port)
            .const_u64(UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, index)
            .u32_in(UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, flags)
            .ptr_out(UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, out);
        dev.ioctl(&mut cmd)
    };
    let mut e = [0u8; 32];
    assert_eq!(gid_entry(1, 0, 0, &mut e), Ok(()));
    assert_eq!(e[..16], dev.gid());
    assert_eq!(gid_entry(1, 0, 1, &mut e), Err(Errno::INVAL), "flags");
    assert_eq!(gid_entry(1, 0, 0, &mut e[..31]), Err(Errno::INVAL), "short");
    assert_eq!(gid_entry(2, 0, 0, &mut e), Err(Errno::INVAL), "port 2");
    assert_eq!(gid_entry(1, 1, 0, &mut e), Err(Errno::INVAL), "index 1");

    // QUERY_GID_TABLE: entry sizes other than 32 cut or pad each entry; a buffer that is not a
    // whole number of entries, or holds none, is EINVAL; so are flags.
    let table = |entry_size: u64, flags: u32, out: &mut [u8], n: &mut u64| {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE);
        cmd.const_u64(UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, entry_size)
            .u32_in(UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, flags)
            .ptr_out(UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, out)
            .ptr_out(UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, n);
        dev.ioctl(&mut cmd)
    };
    let mut n = 0u64;
    let mut buf = [0xffu8; 80];
    assert_eq!(table(40, 0, &mut buf, &mut n), Ok(()));
    assert_eq!(n, 1);
    assert_eq!(buf[..16], dev.gid());
    let (g, _) = <IbUverbsGidEntry as zerocopy::FromBytes>::read_from_prefix(&buf[..]).unwrap();
    assert_eq!(
        (g.gid_index, g.port_num, g.gid_type, g.netdev_ifindex),
        (0, 1, 0, 0)
    );
    assert!(
        buf[32..40].iter().all(|&b| b == 0),
        "padding zeroed: {buf:?}"
    );
    assert!(
        buf[40..].iter().all(|&b| b == 0xff),
        "second slot untouched"
    );
    let mut small = [0u8; 16];
    assert_eq!(table(16, 0, &mut small, &mut n), Ok(()), "cut entries");
    assert_eq!(small, dev.gid());
    assert_eq!(
        table(32, 0, &mut buf[..48], &mut n),
        Err(Errno::INVAL),
        "not whole"
    );
    assert_eq!(
        table(32, 0, &mut buf[..0], &mut n),
        Err(Errno::INVAL),
        "no room"
    );
    assert_eq!(
        table(0, 0, &mut buf[..32], &mut n),
        Err(Errno::INVAL),
        "entry size 0"
    );
    assert_eq!(
        table(32, 2, &mut buf[..32], &mut n),
        Err(Errno::INVAL),
        "flags"
    );
}

/// P_Keys come from sysfs (as in libibverbs); a model device has no sysfs directory, so the
/// query is refused naming that, instead of reading `ports/1/pkeys/0` relative to the working
/// directory.
#[test]
fn pkey_of_a_device_without_sysfs_is_refused_not_read_from_the_working_directory() {
    let (fab, dev) = device(8928);
    let ctx = dev.open().unwrap();
    // A decoy in the working directory that a relative read would find.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ports/1/pkeys")).unwrap();
    std::fs::write(dir.path().join("ports/1/pkeys/0"), "0xffff\n").unwrap();
    let cwd = std::env::current_dir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let r = ctx.query_pkey(1, 0);
    std::env::set_current_dir(cwd).unwrap();
    let e = r.expect_err("a device without sysfs has no P_Key files");
    assert_eq!(e.errno(), Some(Errno::OPNOTSUPP), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("query_pkey") && text.contains("sysfs"),
        "{text}"
    );
    fab.assert_no_violations();
}
