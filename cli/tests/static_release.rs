//! The release CLI is one static binary that needs nothing else on the machine.
//!
//! * On the host (`host_only`): `cargo build --release --target x86_64-unknown-linux-musl
//!   -p uverbs-cli` gives a `uverbs` executable with no `PT_INTERP` (no dynamic loader) and no
//!   dynamic section at all: `.cargo/config.toml` builds the musl target with `crt-static` and the
//!   static relocation model, so the result is a plain `ET_EXEC` (not static-PIE, which would
//!   keep a `PT_DYNAMIC` of self-relocations).
//! * In the VM: the harness installs that binary as `/usr/bin/uverbs`; the test copies it
//!   into an otherwise empty root (only `/dev` and `/sys` bound in: no libc, no loader, no
//!   rdma-core) and runs it there with `chroot`.

// The root package's device-test support (rxe device, NEEDS_DEVICE, leak counts).
#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const MUSL: &str = "x86_64-unknown-linux-musl";

const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_SONAME: u64 = 14;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// What the program headers say: (ELF type, has PT_INTERP, has PT_DYNAMIC, dynamic tags).
fn inspect(bytes: &[u8]) -> (u16, bool, bool, Vec<u64>) {
    assert_eq!(&bytes[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(
        (bytes[4], bytes[5]),
        (2, 1),
        "not a 64-bit little-endian ELF"
    );
    let e_type = u16_at(bytes, 0x10);
    let phoff = u64_at(bytes, 0x20) as usize;
    let phentsize = usize::from(u16_at(bytes, 0x36));
    let phnum = usize::from(u16_at(bytes, 0x38));
    let mut interp = false;
    let mut dynamic = false;
    let mut tags = Vec::new();
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        match u32_at(bytes, ph) {
            PT_INTERP => interp = true,
            PT_DYNAMIC => {
                dynamic = true;
                let (off, size) = (u64_at(bytes, ph + 0x08) as usize, u64_at(bytes, ph + 0x20));
                for k in 0..(size as usize / 16) {
                    let tag = u64_at(bytes, off + 16 * k);
                    if tag == DT_NULL {
                        break;
                    }
                    tags.push(tag);
                }
            }
            _ => {}
        }
    }
    (e_type, interp, dynamic, tags)
}

/// The workspace root (this package is `cli/` in it).
fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ is inside the workspace")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

#[test]
fn release_cli_is_a_static_binary_host_only() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(["build", "--release", "--target", MUSL, "-p", "uverbs-cli"])
        .current_dir(workspace_root())
        .output()
        .expect("running cargo build");
    assert!(
        out.status.success(),
        "cargo build --release --target {MUSL} -p uverbs-cli failed ({}); is the target \
         installed (rustup target add {MUSL})?\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = target_dir().join(MUSL).join("release/uverbs");
    let bytes = std::fs::read(&bin).unwrap_or_else(|e| panic!("reading {}: {e}", bin.display()));
    let (e_type, interp, dynamic, tags) = inspect(&bytes);
    assert!(
        !interp,
        "{} has a PT_INTERP: it needs a dynamic loader",
        bin.display()
    );
    for (tag, what) in [
        (DT_NEEDED, "needs a shared library (DT_NEEDED)"),
        (DT_SONAME, "is a shared library (DT_SONAME)"),
        (DT_RPATH, "has a library search path (DT_RPATH)"),
        (DT_RUNPATH, "has a library search path (DT_RUNPATH)"),
    ] {
        assert!(!tags.contains(&tag), "{} {what}", bin.display());
    }
    assert!(
        !dynamic,
        "{} has a dynamic section ({} tags)",
        bin.display(),
        tags.len()
    );
    assert_eq!(e_type, 2, "ELF type {e_type}: want ET_EXEC (2)");
    println!(
        "{}: static executable, no PT_INTERP, no dynamic section, {} bytes ({:.1} MiB)",
        bin.display(),
        bytes.len(),
        bytes.len() as f64 / (1024.0 * 1024.0),
    );
}

/// Removes the chroot and its bind mounts however the test ends.
struct Alone {
    root: PathBuf,
    mounts: Vec<PathBuf>,
}

impl Drop for Alone {
    fn drop(&mut self) {
        for m in self.mounts.iter().rev() {
            let _ = Command::new("/bin/umount").arg(m).status();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn sh(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{text}",
        out.status
    );
    text
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn release_cli_runs_alone_in_the_vm() {
    let _ = common::NEEDS_DEVICE;
    let cli = Path::new("/usr/bin/uverbs");
    assert!(
        cli.exists(),
        "/usr/bin/uverbs is missing: the harness installs the release CLI there"
    );
    let root = std::env::temp_dir().join(format!("uverbs-alone-{}", std::process::id()));
    let mut alone = Alone {
        root: root.clone(),
        mounts: Vec::new(),
    };
    for d in ["dev", "sys"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(cli, root.join("uverbs")).expect("copying /usr/bin/uverbs");
    for d in ["dev", "sys"] {
        let target = root.join(d);
        sh(Command::new("/bin/mount")
            .args(["-o", "bind", &format!("/{d}")])
            .arg(&target));
        alone.mounts.push(target);
    }
    // Nothing but the binary and the two kernel file systems is in the new root.
    let entries: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut sorted = entries.clone();
    sorted.sort();
    assert_eq!(sorted, ["dev", "sys", "uverbs"], "{entries:?}");

    let devices = sh(Command::new("/bin/chroot")
        .arg(&root)
        .args(["/uverbs", "devices"]));
    println!("{devices}");
    assert!(devices.contains("rxe0"), "uverbs devices: {devices}");
    // info opens the device: the command channel works without any library too.
    let info = sh(Command::new("/bin/chroot")
        .arg(&root)
        .args(["/uverbs", "info"]));
    println!("{info}");
    assert!(
        info.contains("rxe0") && info.contains("PORT_ACTIVE"),
        "uverbs info: {info}"
    );
}
