//! Our `uverbs devices` / `uverbs info -v` against rdma-core's `ibv_devices` / `ibv_devinfo -v`
//! on the same device: every field rdma-core prints must appear in ours with the same value.
//!
//! Both outputs are parsed into `scope/key -> value` maps (scope: the device and port a line
//! belongs to; flag lines without a colon are collected, sorted, into the value of the field
//! above them), so a difference is reported by field name, not as a text diff.
//!
//! Where our binary is: `UVERBS_BIN` if set, else the one cargo built for this test, else
//! `/usr/bin/uverbs` (where the VM harness installs it).

// The root package's device-test support (rxe device, NEEDS_DEVICE, leak counts).
#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn uverbs_bin() -> PathBuf {
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os("UVERBS_BIN") {
        return PathBuf::from(p);
    }
    for p in [env!("CARGO_BIN_EXE_uverbs"), "/usr/bin/uverbs"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
        tried.push(p);
    }
    panic!("no uverbs binary: UVERBS_BIN is unset and none of {tried:?} exists");
}

fn rdma_core_tool(name: &str) -> PathBuf {
    let from_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.exists())
    });
    from_path
        .or_else(|| Some(Path::new("/usr/bin").join(name)).filter(|p| p.exists()))
        .unwrap_or_else(|| panic!("rdma-core's {name} is neither on PATH nor in /usr/bin"))
}

fn run(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {} {args:?}: {e}", bin.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        bin.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("output is UTF-8")
}

/// Parses `ibv_devinfo` layout into `hca/port/key -> value`.
fn parse_devinfo(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut scope = String::new();
    let mut hca = String::new();
    let mut last_key: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        match line.split_once(':') {
            Some((k, v)) => {
                let (k, v) = (k.trim(), v.trim());
                if k == "hca_id" {
                    hca = v.to_string();
                    scope = hca.clone();
                } else if k == "port" {
                    scope = format!("{hca}/port {v}");
                }
                let mut key = format!("{scope}/{k}");
                let mut n = 2;
                while map.contains_key(&key) {
                    key = format!("{scope}/{k}#{n}");
                    n += 1;
                }
                map.insert(key.clone(), v.to_string());
                last_key = Some(key);
            }
            None => {
                // A flag line: part of the value of the field above it.
                let key = last_key.clone().unwrap_or_else(|| format!("{scope}/"));
                let v = map.entry(key).or_default();
                let mut parts: Vec<&str> = v.split(" | ").filter(|s| !s.is_empty()).collect();
                parts.push(line);
                parts.sort_unstable();
                *v = parts.join(" | ");
            }
        }
    }
    map
}

/// Every field of `theirs` must be in `ours` with the same value; returns the differences.
fn differences(theirs: &BTreeMap<String, String>, ours: &BTreeMap<String, String>) -> Vec<String> {
    let mut diffs = Vec::new();
    for (k, v) in theirs {
        match ours.get(k) {
            None => diffs.push(format!("{k}: rdma-core {v:?}, uverbs: missing")),
            Some(o) if o != v => diffs.push(format!("{k}: rdma-core {v:?}, uverbs {o:?}")),
            Some(_) => {}
        }
    }
    diffs
}

#[test]
fn parser_keys_fields_by_device_and_port() {
    let text = "hca_id:\trxe0\n\tphys_port_cnt:\t\t\t1\n\tdevice_cap_flags:\t\t0x1\n\t\t\t\t\tB\n\t\t\t\t\tA\n\
                \t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tGID[  0]:\t\tfe80::1, RoCE v2\n\n";
    let m = parse_devinfo(text);
    assert_eq!(m["rxe0/phys_port_cnt"], "1");
    assert_eq!(m["rxe0/device_cap_flags"], "0x1 | A | B");
    assert_eq!(m["rxe0/port 1/state"], "PORT_ACTIVE (4)");
    assert_eq!(m["rxe0/port 1/GID[  0]"], "fe80::1, RoCE v2");
    let mut other = m.clone();
    other.insert("rxe0/port 1/state".into(), "PORT_DOWN (1)".into());
    other.remove("rxe0/phys_port_cnt");
    other.insert("rxe0/extra".into(), "only ours".into());
    let d = differences(&m, &other);
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(d
        .iter()
        .any(|s| s.contains("phys_port_cnt") && s.contains("missing")));
    assert!(d.iter().any(|s| s.contains("PORT_DOWN")));
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn devices_matches_ibv_devices() {
    let dev = common::rxe_device();
    let theirs = run(&rdma_core_tool("ibv_devices"), &[]);
    let ours = run(&uverbs_bin(), &["devices"]);
    assert!(
        theirs.contains(dev.name()),
        "ibv_devices does not list {}:\n{theirs}",
        dev.name()
    );
    // ibv_devices lists only devices with a libibverbs provider; in the VM that is every device.
    assert_eq!(ours, theirs, "uverbs devices differs from ibv_devices");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn info_verbose_matches_ibv_devinfo_verbose() {
    let dev = common::rxe_device();
    let name = dev.name();
    let theirs_text = run(&rdma_core_tool("ibv_devinfo"), &["-v", "-d", name]);
    let ours_text = run(&uverbs_bin(), &["info", "-v", "-d", name]);
    let theirs = parse_devinfo(&theirs_text);
    let ours = parse_devinfo(&ours_text);
    // The comparison must be about something: the fields every devinfo prints are there.
    for k in [
        "phys_port_cnt",
        "max_qp",
        "max_cqe",
        "port 1/state",
        "port 1/GID[  0]",
    ] {
        let key = format!("{name}/{k}");
        assert!(
            theirs.contains_key(&key),
            "ibv_devinfo did not print {key}:\n{theirs_text}"
        );
    }
    let diffs = differences(&theirs, &ours);
    assert!(
        diffs.is_empty(),
        "{} field(s) of ibv_devinfo -v differ in uverbs info -v:\n  {}\n\n--- ibv_devinfo -v ---\n{theirs_text}\n--- uverbs info -v ---\n{ours_text}",
        diffs.len(),
        diffs.join("\n  ")
    );
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn info_without_verbose_and_per_port_match_ibv_devinfo() {
    let dev = common::rxe_device();
    let name = dev.name();
    for args in [vec!["-d", name], vec!["-d", name, "-i", "1"]] {
        let theirs = run(&rdma_core_tool("ibv_devinfo"), &args);
        let mut ours_args = vec!["info"];
        ours_args.extend(&args);
        let ours = run(&uverbs_bin(), &ours_args);
        // Without -v the layout has no fields that could legitimately differ: compare bytes.
        assert_eq!(
            ours, theirs,
            "uverbs info {args:?} differs from ibv_devinfo {args:?}"
        );
    }
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn info_errors_and_json() {
    let dev = common::rxe_device();
    let bin = uverbs_bin();
    let out = Command::new(&bin)
        .args(["info", "-d", "no_such_dev0"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a missing device is exit status 1"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no_such_dev0") && err.contains(dev.name()),
        "{err}"
    );

    let out = Command::new(&bin)
        .args(["info", "-d", dev.name(), "-i", "9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1..=1"), "names the valid ports: {err}");

    let json = run(&bin, &["info", "-v", "--json", "-d", dev.name()]);
    for needle in [
        format!("\"hca_id\": \"{}\"", dev.name()),
        "\"state\": \"PORT_ACTIVE\"".to_string(),
        "\"link_layer\": \"Ethernet\"".to_string(),
        "\"type\": \"RoCE v2\"".to_string(),
    ] {
        assert!(json.contains(&needle), "{needle} not in:\n{json}");
    }
}
