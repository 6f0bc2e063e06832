//! Installs what the harness needs when it is missing: Debian packages (apt-get), the rustup
//! musl target, and (for `cargo xtask test`) the toolchain components its steps use: rustfmt
//! and clippy on the default toolchain, a nightly toolchain with `miri` and `rust-src` (Miri),
//! which the fuzzers build with too. Says what it installs and why; a failure names the piece
//! and the command to run by hand.

use std::process::Command;
use std::sync::OnceLock;

use crate::util::{err, output, show, Context, Result};

/// Debian packages the harness uses, with the reason for each.
pub const APT_PACKAGES: &[(&str, &str)] = &[
    (
        "qemu-system-x86",
        "qemu-system-x86_64 runs the test kernels (TCG)",
    ),
    ("busybox-static", "the VM's shell and core utilities"),
    (
        "ibverbs-utils",
        "ibv_devices, ibv_devinfo, ibv_*_pingpong in the VM",
    ),
    ("perftest", "ib_send_lat, ib_write_bw, ... in the VM"),
    (
        "rdma-core",
        "rdma-core itself (the reference implementation we compare against)",
    ),
    (
        "ibverbs-providers",
        "librxe, the rxe provider rdma-core's tools use in the VM",
    ),
    ("iproute2", "ip (veth) and rdma (rdma link add) in the VM"),
    ("xz-utils", "decompressing the 6.12 kernel's .ko.xz modules"),
    ("gcc", "the linker cargo uses"),
    ("linux-libc-dev", "kernel uapi headers (layout checks)"),
    ("musl-tools", "musl-gcc for static test executables"),
];

const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

fn is_installed(pkg: &str) -> bool {
    output(Command::new("dpkg-query").args(["-W", "-f=${Status}", pkg]))
        .map(|s| s.trim() == "install ok installed")
        .unwrap_or(false)
}

/// `apt-get`, through `sudo -n` when we are not root.
fn apt_get() -> Command {
    if crate::util::is_root() {
        let mut c = Command::new("apt-get");
        c.env("DEBIAN_FRONTEND", "noninteractive");
        c
    } else {
        let mut c = Command::new("sudo");
        c.args(["-n", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]);
        c
    }
}

static UPDATED: OnceLock<Result<(), String>> = OnceLock::new();

/// `apt-get update`, at most once per run. An unreachable archive is a clear error.
pub fn apt_update() -> Result<()> {
    UPDATED
        .get_or_init(|| {
            let mut cmd = apt_get();
            cmd.args(["update", "-q"]);
            println!("xtask: refreshing the Debian package lists: {}", show(&cmd));
            let out = cmd
                .stdin(std::process::Stdio::null())
                .output()
                .map_err(|e| format!("could not start `{}`: {e}", show(&cmd)))?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            // apt-get update exits 0 when a mirror is unreachable, printing "W: Failed to fetch".
            let unreachable: Vec<&str> = stderr
                .lines()
                .filter(|l| {
                    l.contains("Failed to fetch")
                        || l.contains("Could not resolve")
                        || l.contains("Temporary failure resolving")
                        || l.contains("Unable to connect")
                })
                .collect();
            if !out.status.success() || !unreachable.is_empty() {
                return Err(format!(
                    "the Debian package archive is unreachable or `apt-get update` failed ({}): {}",
                    out.status,
                    if unreachable.is_empty() {
                        stderr.trim().to_string()
                    } else {
                        unreachable.join("; ")
                    }
                ));
            }
            Ok(())
        })
        .clone()
        .map_err(crate::util::Error)
}

/// Install missing apt packages and the rustup musl target.
pub fn ensure() -> Result<()> {
    let missing: Vec<&(&str, &str)> = APT_PACKAGES
        .iter()
        .filter(|(p, _)| !is_installed(p))
        .collect();
    if !missing.is_empty() {
        println!("xtask: installing missing Debian packages:");
        for (p, why) in &missing {
            println!("  {p:<18} {why}");
        }
        if !crate::util::is_root() && crate::util::find_program("sudo").is_none() {
            return Err(err!(
                "packages {} are missing and we are not root (and there is no sudo): install them with \
                 `apt-get install {}` as root",
                missing.iter().map(|p| p.0).collect::<Vec<_>>().join(", "),
                missing.iter().map(|p| p.0).collect::<Vec<_>>().join(" ")
            ));
        }
        apt_update()?;
        let mut cmd = apt_get();
        cmd.args(["install", "-y", "-q", "--no-install-recommends"]);
        cmd.args(missing.iter().map(|p| p.0));
        println!("$ {}", show(&cmd));
        let out = cmd
            .stdin(std::process::Stdio::null())
            .output()
            .context(|| format!("starting `{}`", show(&cmd)))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("E:")).collect();
            return Err(err!(
                "could not install {}: {}",
                missing.iter().map(|p| p.0).collect::<Vec<_>>().join(", "),
                if errors.is_empty() {
                    stderr.trim().to_string()
                } else {
                    errors.join("; ")
                }
            ));
        }
        let still: Vec<&str> = missing
            .iter()
            .map(|p| p.0)
            .filter(|p| !is_installed(p))
            .collect();
        if !still.is_empty() {
            return Err(err!(
                "apt-get reported success but {} is still not installed",
                still.join(", ")
            ));
        }
    }
    ensure_musl_target()
}

/// A rustup component a `cargo xtask test` step needs, and why.
struct Component {
    toolchain: Option<&'static str>,
    name: &'static str,
    why: &'static str,
}

/// What `cargo xtask test` runs beyond a plain `cargo build`. `None` is the default toolchain
/// (the one `rust-toolchain`/rustup's default selects for this workspace).
const COMPONENTS: &[Component] = &[
    Component {
        toolchain: None,
        name: "rustfmt",
        why: "the `cargo fmt --all --check` step",
    },
    Component {
        toolchain: None,
        name: "clippy",
        why: "the `cargo clippy ... -D warnings` step",
    },
    Component {
        toolchain: Some("nightly"),
        name: "miri",
        why: "the providers' ring tests under Miri (`cargo xtask miri`)",
    },
    Component {
        toolchain: Some("nightly"),
        name: "rust-src",
        why: "Miri builds its own standard library from source",
    },
];

/// Whether `list` (`rustup component list --installed`, one per line such as
/// `clippy-x86_64-unknown-linux-gnu` or `rust-src`) has component `name`.
fn has_component(list: &str, name: &str) -> bool {
    list.lines()
        .map(str::trim)
        .any(|l| l == name || l.starts_with(&format!("{name}-")))
}

/// Installs the toolchains and components `cargo xtask test` needs, saying what and why.
///
/// A bare machine with only rustup's default profile lacks the nightly toolchain (or, if one is
/// there, its `miri` and `rust-src` components); `.ci/run` used to be the only place that added
/// them. This never fails the run: a piece that cannot be installed is reported with the command
/// to run, and the step that needs it then fails and names it.
pub fn ensure_toolchain_components() {
    let Ok(toolchains) = output(Command::new("rustup").args(["toolchain", "list"])) else {
        println!(
            "xtask: warning: rustup is not usable, so the components {} cannot be checked or \
             installed; the steps that need them fail if they are missing",
            COMPONENTS
                .iter()
                .map(|c| c.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
        return;
    };
    for toolchain in [None, Some("nightly")] {
        let wanted: Vec<&Component> = COMPONENTS
            .iter()
            .filter(|c| c.toolchain == toolchain)
            .collect();
        let names: Vec<&str> = wanted.iter().map(|c| c.name).collect();
        let label = toolchain.unwrap_or("the default toolchain");
        if let Some(tc) = toolchain {
            if !toolchains.lines().any(|l| l.starts_with(tc)) {
                println!(
                    "xtask: installing the {tc} toolchain with {}:",
                    names.join(", ")
                );
                for c in &wanted {
                    println!("  {:<10} {}", c.name, c.why);
                }
                let mut cmd = Command::new("rustup");
                cmd.args([
                    "toolchain",
                    "install",
                    tc,
                    "--profile",
                    "minimal",
                    "--component",
                ])
                .arg(names.join(","));
                if let Err(e) = crate::util::run(&mut cmd) {
                    println!(
                        "xtask: warning: could not install the {tc} toolchain ({e}); run `{}`",
                        show(&cmd)
                    );
                }
                continue;
            }
        }
        let mut list_cmd = Command::new("rustup");
        if let Some(tc) = toolchain {
            list_cmd.arg(format!("+{tc}"));
        }
        list_cmd.args(["component", "list", "--installed"]);
        let installed = output(&mut list_cmd).unwrap_or_default();
        let missing: Vec<&&Component> = wanted
            .iter()
            .filter(|c| !has_component(&installed, c.name))
            .collect();
        if missing.is_empty() {
            continue;
        }
        println!("xtask: adding rustup components to {label}:");
        for c in &missing {
            println!("  {:<10} {}", c.name, c.why);
        }
        let mut cmd = Command::new("rustup");
        cmd.args(["component", "add"]);
        if let Some(tc) = toolchain {
            cmd.args(["--toolchain", tc]);
        }
        cmd.args(missing.iter().map(|c| c.name));
        if let Err(e) = crate::util::run(&mut cmd) {
            println!(
                "xtask: warning: could not add them ({e}); run `{}`",
                show(&cmd)
            );
        }
    }
}

fn ensure_musl_target() -> Result<()> {
    let installed = match output(Command::new("rustup").args(["target", "list", "--installed"])) {
        Ok(list) => list,
        Err(e) => {
            // Without rustup we cannot add a target; a toolchain that already has it still works.
            let sysroot =
                output(Command::new("rustc").args(["--print", "sysroot"])).unwrap_or_default();
            let lib = std::path::Path::new(sysroot.trim())
                .join("lib/rustlib")
                .join(MUSL_TARGET);
            if lib.is_dir() {
                return Ok(());
            }
            return Err(err!(
                "the Rust target {MUSL_TARGET} is needed for static test executables, and rustup is not \
                 usable to add it ({e})"
            ));
        }
    };
    if installed.lines().any(|l| l.trim() == MUSL_TARGET) {
        return Ok(());
    }
    println!("xtask: installing the Rust target {MUSL_TARGET} (static executables for the VM)");
    crate::util::run(Command::new("rustup").args(["target", "add", MUSL_TARGET]))
        .map_err(|e| err!("could not add the Rust target {MUSL_TARGET}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::has_component;

    #[test]
    fn components_are_found_with_or_without_a_target_suffix() {
        let list = "cargo-x86_64-unknown-linux-gnu\nclippy-x86_64-unknown-linux-gnu\nrust-src\n";
        assert!(has_component(list, "clippy"));
        assert!(has_component(list, "rust-src"));
        assert!(!has_component(list, "miri"));
        assert!(!has_component(list, "rustfmt"));
        // `rust-std-...` is not `rust-src`.
        assert!(!has_component(
            "rust-std-x86_64-unknown-linux-gnu\n",
            "rust-src"
        ));
    }
}
