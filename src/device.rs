//! Device discovery from sysfs (`ibv_get_device_list`).
//!
//! Each uverbs character device appears as `/sys/class/infiniband_verbs/uverbsN` with the name
//! of its RDMA device (`ibdev`) and an ABI version; the RDMA device itself is described under
//! `/sys/class/infiniband/<ibdev>` (node GUID, node type, ports). Which provider drives it is
//! [`Driver::of_sysfs`]'s to say; devices of other drivers are listed as unsupported.
//!
//! Nothing here fails because RDMA is absent: no sysfs class directory means no devices.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Errno, Error, Result};
pub use crate::provider::Driver;

/// The node type of an RDMA device (`enum ibv_node_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    /// An InfiniBand channel adapter (also what rxe and EFA report).
    Ca,
    /// A switch.
    Switch,
    /// A router.
    Router,
    /// An iWARP RNIC.
    Rnic,
    /// usNIC.
    Usnic,
    /// usNIC over UDP.
    UsnicUdp,
    /// An unspecified node type (EFA on some kernels).
    Unspecified,
    /// A value this library does not know.
    Unknown(u32),
}

impl NodeType {
    /// From the kernel's number (the leading number of sysfs `node_type`).
    pub fn from_raw(n: u32) -> Self {
        match n {
            1 => NodeType::Ca,
            2 => NodeType::Switch,
            3 => NodeType::Router,
            4 => NodeType::Rnic,
            5 => NodeType::Usnic,
            6 => NodeType::UsnicUdp,
            7 => NodeType::Unspecified,
            x => NodeType::Unknown(x),
        }
    }

    /// The name `ibv_node_type_str` prints.
    pub fn as_str(&self) -> &'static str {
        match self {
            NodeType::Ca => "InfiniBand channel adapter",
            NodeType::Switch => "InfiniBand switch",
            NodeType::Router => "InfiniBand router",
            NodeType::Rnic => "iWARP NIC",
            NodeType::Usnic => "usNIC",
            NodeType::UsnicUdp => "usNIC UDP",
            NodeType::Unspecified => "unspecified",
            NodeType::Unknown(_) => "unknown",
        }
    }

    /// The transport (`ibv_transport_type`) name `ibv_devinfo` prints for this node type.
    pub fn transport_str(&self) -> &'static str {
        match self {
            NodeType::Ca | NodeType::Switch | NodeType::Router => "InfiniBand",
            NodeType::Rnic => "iWARP",
            NodeType::Usnic => "usNIC",
            NodeType::UsnicUdp => "usNIC UDP",
            NodeType::Unspecified => "unspecified",
            NodeType::Unknown(_) => "invalid transport",
        }
    }
}

/// An RDMA device found on this host (`struct ibv_device`).
///
/// Listed by [`devices`], found by [`device_by_name`], opened with
/// [`Context::open`](crate::Context::open):
///
/// ```no_run
/// // `uverbs devices` prints the same list.
/// for dev in uverbs::devices()? {
///     println!("{:10} {:6} {:16} node GUID {}", dev.name(), dev.driver().to_string(),
///              dev.uverbs_name(), uverbs::format_guid(dev.node_guid()));
/// }
/// let rxe = uverbs::device_by_name("rxe0")?;
/// let ctx = uverbs::Context::open(&rxe)?;
/// # drop(ctx);
/// # Ok::<(), uverbs::Error>(())
/// ```
#[doc(alias = "ibv_device")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    name: String,
    uverbs_name: String,
    dev_path: PathBuf,
    ibdev_path: PathBuf,
    abi_version: u32,
    node_guid: u64,
    node_type: NodeType,
    driver: Driver,
}

impl Device {
    /// The RDMA device name, e.g. `rxe0` (`ibv_get_device_name`).
    #[doc(alias = "ibv_get_device_name")]
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The uverbs character device name, e.g. `uverbs0`.
    pub fn uverbs_name(&self) -> &str {
        &self.uverbs_name
    }
    /// The character device to open, e.g. `/dev/infiniband/uverbs0`.
    pub fn dev_path(&self) -> &Path {
        &self.dev_path
    }
    /// The sysfs directory of the RDMA device, e.g. `/sys/class/infiniband/rxe0`.
    pub fn ibdev_path(&self) -> &Path {
        &self.ibdev_path
    }
    /// The uverbs ABI version of this device's driver.
    pub fn abi_version(&self) -> u32 {
        self.abi_version
    }
    /// The node GUID in host order (`ibv_get_device_guid` returns it big-endian).
    #[doc(alias = "ibv_get_device_guid")]
    pub fn node_guid(&self) -> u64 {
        self.node_guid
    }
    /// The node type.
    pub fn node_type(&self) -> NodeType {
        self.node_type
    }
    /// The driver family.
    pub fn driver(&self) -> &Driver {
        &self.driver
    }
    /// A device description not found in sysfs, for a [`crate::channel::Channel`] that is not
    /// the kernel (a device model in tests): `Context::with_channel(Device::synthetic(..), ..)`.
    pub fn synthetic(name: &str, driver: Driver, node_guid: u64) -> Device {
        Device {
            name: name.to_string(),
            uverbs_name: format!("model-{name}"),
            dev_path: PathBuf::new(),
            ibdev_path: PathBuf::new(),
            abi_version: 1,
            node_guid,
            node_type: NodeType::Unspecified,
            driver,
        }
    }

    /// Whether uverbs can open this device.
    pub fn is_supported(&self) -> bool {
        !matches!(self.driver, Driver::Unsupported(_))
    }
}

/// Formats a GUID as `ibv_devices` does: 16 hex digits.
pub fn format_guid(guid: u64) -> String {
    format!("{guid:016x}")
}

/// Formats a GUID as `ibv_devinfo` does: four groups of four hex digits.
pub fn format_guid_colon(guid: u64) -> String {
    let h = format!("{guid:016x}");
    format!("{}:{}:{}:{}", &h[0..4], &h[4..8], &h[8..12], &h[12..16])
}

/// Lists the RDMA devices on this host (`ibv_get_device_list`).
///
/// A host without RDMA gives an empty list. Devices of drivers uverbs does not drive are
/// listed with [`Driver::Unsupported`].
#[doc(alias = "ibv_get_device_list")]
pub fn devices() -> Result<Vec<Device>> {
    devices_in(Path::new("/sys"), Path::new("/dev/infiniband"))
}

/// Finds the device named `name` (e.g. `rxe0`).
pub fn device_by_name(name: &str) -> Result<Device> {
    let all = devices()?;
    let known: Vec<&str> = all.iter().map(|d| d.name()).collect();
    match all.iter().find(|d| d.name == name) {
        Some(d) => Ok(d.clone()),
        None => Err(Error::invalid(
            "open_device",
            format!("device {name}"),
            Errno::NODEV,
            if known.is_empty() {
                "no RDMA devices on this host".to_string()
            } else {
                format!("no such RDMA device; present: {}", known.join(", "))
            },
        )),
    }
}

/// Discovery against a sysfs root and a device directory (tests use a fake tree).
pub fn devices_in(sys: &Path, dev_dir: &Path) -> Result<Vec<Device>> {
    let class = sys.join("class/infiniband_verbs");
    let entries = match fs::read_dir(&class) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error("get_device_list", &class, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error("get_device_list", &class, e))?;
        let uverbs_name = entry.file_name().to_string_lossy().into_owned();
        if !uverbs_name.starts_with("uverbs") {
            continue; // e.g. the global `abi_version` file
        }
        let dir = class.join(&uverbs_name);
        // A device being removed while we look may vanish: skip it, as rdma-core does.
        let Some(name) = read_trimmed(&dir.join("ibdev")) else {
            continue;
        };
        let abi_version = read_trimmed(&dir.join("abi_version"))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let ibdev_path = sys.join("class/infiniband").join(&name);
        let node_guid = read_trimmed(&ibdev_path.join("node_guid"))
            .and_then(|s| parse_guid(&s))
            .unwrap_or(0);
        let node_type = read_trimmed(&ibdev_path.join("node_type"))
            .and_then(|s| parse_node_type(&s))
            .map(NodeType::from_raw)
            .unwrap_or(NodeType::Unknown(0));
        let driver = Driver::of_sysfs(&name, &ibdev_path);
        out.push(Device {
            dev_path: dev_dir.join(&uverbs_name),
            name,
            uverbs_name,
            ibdev_path,
            abi_version,
            node_guid,
            node_type,
            driver,
        });
    }
    out.sort_by_key(|d| natural_key(&d.uverbs_name));
    Ok(out)
}

fn natural_key(s: &str) -> (String, u64) {
    let digits = s.trim_start_matches(|c: char| !c.is_ascii_digit());
    let prefix = &s[..s.len() - digits.len()];
    (prefix.to_string(), digits.parse().unwrap_or(u64::MAX))
}

/// Parses sysfs `node_guid`, `xxxx:xxxx:xxxx:xxxx`.
pub fn parse_guid(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() != 4 || parts.iter().any(|p| p.is_empty() || p.len() > 4) {
        return None;
    }
    let mut v = 0u64;
    for p in parts {
        v = (v << 16) | u64::from(u16::from_str_radix(p, 16).ok()?);
    }
    Some(v)
}

/// Parses sysfs `node_type`, e.g. `1: CA`.
pub fn parse_node_type(s: &str) -> Option<u32> {
    s.trim().split(':').next()?.trim().parse().ok()
}

fn read_trimmed(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn io_error(op: &'static str, path: &Path, e: io::Error) -> Error {
    let errno = e
        .raw_os_error()
        .map(Errno::from_raw_os_error)
        .unwrap_or(Errno::IO);
    Error::os(op, path.display().to_string(), errno)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let sys = t.path().join("sys");
        let v = sys.join("class/infiniband_verbs");
        for (uv, ib) in [
            ("uverbs0", "rxe0"),
            ("uverbs1", "efa_0"),
            ("uverbs10", "mlx5_0"),
        ] {
            fs::create_dir_all(v.join(uv)).unwrap();
            fs::write(v.join(uv).join("ibdev"), format!("{ib}\n")).unwrap();
            fs::write(v.join(uv).join("abi_version"), "1\n").unwrap();
            let d = sys.join("class/infiniband").join(ib);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("node_guid"), "5054:00ff:fe12:3456\n").unwrap();
            fs::write(d.join("node_type"), "1: CA\n").unwrap();
        }
        fs::write(v.join("abi_version"), "6\n").unwrap();
        let drivers = sys.join("bus/pci/drivers");
        for (ib, drv) in [("efa_0", "efa"), ("mlx5_0", "mlx5_core")] {
            fs::create_dir_all(drivers.join(drv)).unwrap();
            let pci = sys.join("devices/pci0000:00").join(ib);
            fs::create_dir_all(&pci).unwrap();
            std::os::unix::fs::symlink(drivers.join(drv), pci.join("driver")).unwrap();
            std::os::unix::fs::symlink(&pci, sys.join("class/infiniband").join(ib).join("device"))
                .unwrap();
        }
        t
    }

    #[test]
    fn lists_devices_with_driver_guid_and_type() {
        let t = fake_tree();
        let devs = devices_in(&t.path().join("sys"), Path::new("/dev/infiniband")).unwrap();
        let names: Vec<_> = devs.iter().map(|d| (d.uverbs_name(), d.name())).collect();
        assert_eq!(
            names,
            [
                ("uverbs0", "rxe0"),
                ("uverbs1", "efa_0"),
                ("uverbs10", "mlx5_0")
            ]
        );
        assert_eq!(devs[0].driver(), &Driver::Rxe);
        assert_eq!(devs[1].driver(), &Driver::Efa);
        assert_eq!(devs[2].driver(), &Driver::Unsupported("mlx5_core".into()));
        assert!(!devs[2].is_supported());
        assert_eq!(devs[0].node_guid(), 0x5054_00ff_fe12_3456);
        assert_eq!(devs[0].node_type(), NodeType::Ca);
        assert_eq!(devs[0].dev_path(), Path::new("/dev/infiniband/uverbs0"));
        assert_eq!(devs[0].abi_version(), 1);
    }

    #[test]
    fn no_rdma_is_an_empty_list() {
        let t = tempfile::tempdir().unwrap();
        assert!(devices_in(t.path(), t.path()).unwrap().is_empty());
    }

    #[test]
    fn guid_and_node_type_parsing_rejects_garbage() {
        assert_eq!(
            parse_guid("0002:c903:0010:5c51"),
            Some(0x0002_c903_0010_5c51)
        );
        assert_eq!(parse_guid("0002:c903:0010"), None);
        assert_eq!(parse_guid("zzzz:c903:0010:5c51"), None);
        assert_eq!(parse_guid("00002:c903:0010:5c51"), None);
        assert_eq!(parse_node_type("1: CA"), Some(1));
        assert_eq!(parse_node_type("x: CA"), None);
        assert_eq!(
            format_guid_colon(0x0002_c903_0010_5c51),
            "0002:c903:0010:5c51"
        );
    }
}
