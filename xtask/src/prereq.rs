//! Installs what the harness needs when it is missing: Debian packages (apt-get), the rustup
//! musl target, and (for `cargo xtask test`) the toolchain components its steps use: rustfmt
//! and clippy on the default toolchain, a nightly toolchain with `miri` and `rust-src` (Miri),
//! which the fuzzers build with too. Says what it installs and why; a failure names the piece
//! and the command to run by hand.

use std::process::Command;
use std::sync::OnceLock;

use crate::kernel::Arch;
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
    (
        "libibverbs-dev",
        "rdma-core's <infiniband/verbs.h>: capi's layout test and C link checks compile against it",
    ),
    (
        "binutils",
        "ar, objdump, readelf: capi's libraries and their symbol checks",
    ),
    (
        "file",
        "capi's check that the static C program is statically linked",
    ),
    ("linux-libc-dev", "kernel uapi headers (layout checks)"),
    ("musl-tools", "musl-gcc for static test executables"),
    (
        "librdmacm-dev",
        "rdma/rdma_cma.h: librdmacm's event and port-space values (uapi ucma layout check)",
    ),
    (
        "rdmacm-utils",
        "rping, ucmatose, udaddy in the VM: the rdma_cm peers of uverbs::cm",
    ),
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
        .get_or_init(apt_update_inner)
        .clone()
        .map_err(crate::util::Error)
}

/// `apt-get update` now, even if it ran before in this run (a new architecture was added).
fn apt_update_now() -> Result<()> {
    let r = apt_update_inner();
    let _ = UPDATED.set(r.clone());
    r.map_err(crate::util::Error)
}

fn apt_update_inner() -> Result<(), String> {
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
}

/// Debian packages `cargo xtask bench --host` needs (it runs no VM), with the reason for each.
pub const HOST_BENCH_PACKAGES: &[(&str, &str)] = &[
    (
        "valgrind",
        "callgrind counts the instructions; its headers give the client requests of xtask/bench-c/count.c",
    ),
    (
        "libibverbs-dev",
        "rdma-core 44's headers and libibverbs/libefa to build xtask/bench-c/count.c against",
    ),
    (
        "ibverbs-providers",
        "libefa and librxe, the rdma-core providers whose data path bench --host counts",
    ),
    ("linux-libc-dev", "kernel uapi headers the stand-in kernel answers with"),
    ("gcc", "builds xtask/bench-c/count.c and the uvshim.so stand-in kernel"),
];

/// Install what `cargo xtask bench --host` needs when it is missing.
pub fn ensure_host_bench() -> Result<()> {
    install_missing(HOST_BENCH_PACKAGES)
}

/// Debian packages `cargo xtask capi` needs (it runs no VM), with the reason for each.
pub const CAPI_PACKAGES: &[(&str, &str)] = &[
    (
        "gcc",
        "links libibverbs.so.1 and libefa.so.1, compiles the C checks",
    ),
    (
        "libibverbs-dev",
        "rdma-core's <infiniband/verbs.h> the C checks compile against",
    ),
    ("binutils", "ar, objdump, readelf"),
    (
        "file",
        "says whether the static C program is statically linked",
    ),
    (
        "ibverbs-utils",
        "ibv_devices, an rdma-core program run on our libibverbs.so.1",
    ),
];

/// Install what `cargo xtask capi` needs when it is missing.
pub fn ensure_capi() -> Result<()> {
    install_missing(CAPI_PACKAGES)
}

/// Install missing apt packages and the rustup musl target.
pub fn ensure() -> Result<()> {
    install_missing(APT_PACKAGES)?;
    ensure_rust_target(MUSL_TARGET, "static executables for the VM")
}

/// Debian packages the aarch64 steps use on the host, with the reason for each. The arm64
/// guest's own userland (busybox, rdma-core, iproute2) is unpacked from arm64 packages, not
/// installed (xtask/src/userland.rs).
pub const AARCH64_APT_PACKAGES: &[(&str, &str)] = &[
    (
        "qemu-system-arm",
        "qemu-system-aarch64 runs the arm64 test kernels (TCG, -M virt)",
    ),
    (
        "qemu-user-static",
        "qemu-aarch64-static runs aarch64 test executables on the host (the providers' tests, `--list`)",
    ),
];

/// What the steps for `arch` need beyond [`ensure`]: for aarch64 the qemu system and user
/// emulators, Debian's arm64 package lists, and the Rust target.
pub fn ensure_arch(arch: Arch) -> Result<()> {
    ensure()?;
    if arch.is_host() {
        return Ok(());
    }
    install_missing(AARCH64_APT_PACKAGES)?;
    ensure_foreign_arch(arch)?;
    ensure_rust_target(
        arch.musl_target(),
        "static aarch64 executables (CLI, test executables) for the arm64 VM and qemu-user",
    )
}

/// Makes Debian's package lists for a foreign `arch` available (`dpkg --add-architecture`, then
/// `apt-get update`), so its kernels and userland packages can be downloaded. Nothing of that
/// architecture is installed.
pub fn ensure_foreign_arch(arch: Arch) -> Result<()> {
    if arch.is_host() {
        return Ok(());
    }
    let foreign = output(Command::new("dpkg").arg("--print-foreign-architectures"))?;
    if foreign.lines().any(|l| l.trim() == arch.debian()) {
        return Ok(());
    }
    println!(
        "xtask: adding the Debian architecture {} (`dpkg --add-architecture {}`): its kernel and \
         userland packages are downloaded and unpacked for the {} VM, not installed",
        arch.debian(),
        arch.debian(),
        arch.label()
    );
    let mut cmd = if crate::util::is_root() {
        Command::new("dpkg")
    } else {
        let mut c = Command::new("sudo");
        c.args(["-n", "dpkg"]);
        c
    };
    cmd.args(["--add-architecture", arch.debian()]);
    crate::util::run(&mut cmd).map_err(|e| {
        err!(
            "could not add the Debian architecture {}: {e}; run `dpkg --add-architecture {}` and \
             `apt-get update` as root",
            arch.debian(),
            arch.debian()
        )
    })?;
    // The lists may have been refreshed already in this run, without this architecture.
    apt_update_now()
}

/// Where `ensure_security_suite` writes the suite it adds.
const SECURITY_SOURCES: &str = "/etc/apt/sources.list.d/uverbs-debian-security.sources";

/// Makes sure apt knows Debian's security suite (`<codename>-security`), where Debian 12 ships
/// its newer kernel series (the 6.12 test kernel is only there). Every standard Debian 12
/// install and the `debian:12` container image list it; a debootstrap chroot does not. When
/// it is missing on a Debian host, adds the stanza those images have (deb822, signed by the
/// archive keyring `debian-archive-keyring` installs) as `SECURITY_SOURCES`, says so, and
/// refreshes the lists. Returns whether it added the suite.
pub fn ensure_security_suite() -> Result<bool> {
    let policy = output(Command::new("apt-cache").arg("policy"))?;
    if policy.lines().any(|l| l.contains("-security")) {
        return Ok(false);
    }
    let os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |k: &str| {
        os.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .map(|v| v.trim_matches('"').to_string())
    };
    let (Some(id), Some(codename)) = (field("ID"), field("VERSION_CODENAME")) else {
        return Ok(false);
    };
    if id != "debian" {
        return Ok(false);
    }
    let stanza = format!(
        "# Added by `cargo xtask` (uverbs): Debian's security suite, as a standard install has it.\n\
         Types: deb\n\
         URIs: http://deb.debian.org/debian-security\n\
         Suites: {codename}-security\n\
         Components: main\n\
         Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    );
    println!(
        "xtask: apt lists no {codename}-security suite (a debootstrap chroot has only {codename}); \
         Debian ships its newer kernel series there, so adding it as a standard Debian install has \
         it: {SECURITY_SOURCES}"
    );
    let written = if crate::util::is_root() {
        std::fs::write(SECURITY_SOURCES, &stanza).map_err(|e| e.to_string())
    } else {
        let mut c = Command::new("sudo");
        c.args(["-n", "tee", SECURITY_SOURCES])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null());
        c.spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child
                    .stdin
                    .take()
                    .expect("piped stdin")
                    .write_all(stanza.as_bytes())?;
                child.wait()
            })
            .map_err(|e| e.to_string())
            .and_then(|st| {
                if st.success() {
                    Ok(())
                } else {
                    Err(format!("sudo tee exited with {st}"))
                }
            })
    };
    written.map_err(|e| {
        err!(
            "could not add Debian's {codename}-security suite ({e}); as root, write to \
             {SECURITY_SOURCES}:\n{stanza}and run `apt-get update`"
        )
    })?;
    apt_update_now()?;
    Ok(true)
}

/// Install the packages of `list` that are missing, saying which and why.
fn install_missing(list: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<&(&str, &str)> = list.iter().filter(|(p, _)| !is_installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
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
    Ok(())
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

/// The workspace's `rust-version` (the MSRV every published crate declares), read from the
/// root Cargo.toml's `[workspace.package]`.
pub fn msrv() -> Result<String> {
    let toml = std::fs::read_to_string(crate::util::workspace_root().join("Cargo.toml"))
        .map_err(|e| err!("reading Cargo.toml: {e}"))?;
    parse_msrv(&toml).ok_or_else(|| err!("Cargo.toml has no rust-version = \"X.Y\" line"))
}

fn parse_msrv(toml: &str) -> Option<String> {
    toml.lines().find_map(|l| {
        let v = l
            .trim()
            .strip_prefix("rust-version")?
            .trim()
            .strip_prefix('=')?;
        Some(v.trim().trim_matches('"').to_string())
    })
}

/// Installs the MSRV toolchain (minimal profile) when rustup lacks it, saying why. Returns
/// its name, or why it cannot be had.
pub fn ensure_msrv_toolchain() -> Result<String> {
    let v = msrv()?;
    let list = output(Command::new("rustup").args(["toolchain", "list"]))
        .map_err(|e| err!("the rust-version check needs rustup ({e})"))?;
    if !list
        .lines()
        .any(|l| l.starts_with(&format!("{v}-")) || l.starts_with(&format!("{v}.")))
    {
        println!(
            "xtask: installing Rust {v} (the workspace's rust-version: the MSRV check builds with it)"
        );
        let mut cmd = Command::new("rustup");
        cmd.args(["toolchain", "install", &v, "--profile", "minimal"]);
        crate::util::run(&mut cmd)
            .map_err(|e| err!("could not install Rust {v} ({e}); run `{}`", show(&cmd)))?;
    }
    Ok(v)
}

/// Add the rustup target `target` if it is missing; `why` says what it is for.
pub fn ensure_rust_target(target: &str, why: &str) -> Result<()> {
    let installed = match output(Command::new("rustup").args(["target", "list", "--installed"])) {
        Ok(list) => list,
        Err(e) => {
            // Without rustup we cannot add a target; a toolchain that already has it still works.
            let sysroot =
                output(Command::new("rustc").args(["--print", "sysroot"])).unwrap_or_default();
            let lib = std::path::Path::new(sysroot.trim())
                .join("lib/rustlib")
                .join(target);
            if lib.is_dir() {
                return Ok(());
            }
            return Err(err!(
                "the Rust target {target} is needed for {why}, and rustup is not usable to add it ({e})"
            ));
        }
    };
    if installed.lines().any(|l| l.trim() == target) {
        return Ok(());
    }
    println!("xtask: installing the Rust target {target} ({why})");
    crate::util::run(Command::new("rustup").args(["target", "add", target]))
        .map_err(|e| err!("could not add the Rust target {target}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::{has_component, parse_msrv};

    #[test]
    fn msrv_is_read_from_the_workspace_package() {
        let toml = "[workspace.package]\nversion = \"0.1.0\"\nrust-version = \"1.85\"\n";
        assert_eq!(parse_msrv(toml).as_deref(), Some("1.85"));
        assert_eq!(parse_msrv("[package]\nname = \"x\"\n"), None);
        // The real file has one.
        assert!(super::msrv().is_ok());
    }

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
