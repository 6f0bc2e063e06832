//! Checks that a binary is fully static, so it runs in the VM's bare initramfs.
//!
//! Static means: no `PT_INTERP` (no dynamic loader) and no `DT_NEEDED` (no shared libraries).
//! `.cargo/config.toml` builds plain static executables (no dynamic section at all); a
//! static-PIE build would keep a `PT_DYNAMIC` of self-relocations, which is accepted here
//! because what matters for the VM is that nothing needs loading.

use std::path::Path;

use crate::kernel::Arch;
use crate::util::{err, Context, Result};

const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// Why `bytes` is not a static x86-64 ELF executable, or `None` if it is.
pub fn not_static_reason(bytes: &[u8]) -> Option<String> {
    if bytes.get(..4) != Some(b"\x7fELF") {
        return Some("not an ELF file".into());
    }
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Some("not a little-endian 64-bit ELF file".into());
    }
    let truncated = || Some("truncated ELF headers".to_string());
    let Some(phoff) = u64_at(bytes, 0x20) else {
        return truncated();
    };
    let Some(phentsize) = u16_at(bytes, 0x36) else {
        return truncated();
    };
    let Some(phnum) = u16_at(bytes, 0x38) else {
        return truncated();
    };
    let mut dynamic = None;
    for i in 0..usize::from(phnum) {
        let Some(ph) = usize::try_from(phoff)
            .ok()
            .and_then(|o| o.checked_add(i * usize::from(phentsize)))
        else {
            return truncated();
        };
        let Some(p_type) = u32_at(bytes, ph) else {
            return truncated();
        };
        match p_type {
            PT_INTERP => return Some("it has a PT_INTERP segment (needs a dynamic loader)".into()),
            PT_DYNAMIC => {
                let (Some(off), Some(size)) = (u64_at(bytes, ph + 0x08), u64_at(bytes, ph + 0x20))
                else {
                    return truncated();
                };
                dynamic = Some((off, size));
            }
            _ => {}
        }
    }
    if let Some((off, size)) = dynamic {
        let mut pos = off;
        while pos + 16 <= off + size {
            let Some(tag) = usize::try_from(pos).ok().and_then(|p| u64_at(bytes, p)) else {
                return truncated();
            };
            match tag {
                DT_NULL => break,
                DT_NEEDED => {
                    return Some(
                        "its dynamic section lists needed shared libraries (DT_NEEDED)".into(),
                    )
                }
                _ => pos += 16,
            }
        }
    }
    None
}

/// The `key=value` strings of a kernel module's `.modinfo` section (what `modinfo` shows;
/// `depends=` is what depmod writes to modules.dep).
pub fn modinfo(bytes: &[u8]) -> Option<Vec<(String, String)>> {
    if bytes.get(..4) != Some(b"\x7fELF") || bytes.get(4) != Some(&2) {
        return None;
    }
    let shoff = usize::try_from(u64_at(bytes, 0x28)?).ok()?;
    let shentsize = usize::from(u16_at(bytes, 0x3a)?);
    let shnum = usize::from(u16_at(bytes, 0x3c)?);
    let shstrndx = usize::from(u16_at(bytes, 0x3e)?);
    let section = |i: usize| -> Option<(u32, usize, usize)> {
        let sh = shoff.checked_add(i.checked_mul(shentsize)?)?;
        let off = usize::try_from(u64_at(bytes, sh + 0x18)?).ok()?;
        let size = usize::try_from(u64_at(bytes, sh + 0x20)?).ok()?;
        Some((u32_at(bytes, sh)?, off, size))
    };
    let (_, str_off, str_size) = section(shstrndx)?;
    let names = bytes.get(str_off..str_off.checked_add(str_size)?)?;
    for i in 0..shnum {
        let (name, off, size) = section(i)?;
        let name = names.get(usize::try_from(name).ok()?..)?;
        if name.split(|&b| b == 0).next() == Some(b".modinfo") {
            let data = bytes.get(off..off.checked_add(size)?)?;
            return Some(
                data.split(|&b| b == 0)
                    .filter_map(|kv| std::str::from_utf8(kv).ok()?.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
        }
    }
    None
}

/// `e_machine` of x86-64 and aarch64 ELF files.
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;

/// Why `bytes` is not code for `arch` (its ELF `e_machine`), or `None` if it is.
pub fn wrong_machine_reason(bytes: &[u8], arch: Arch) -> Option<String> {
    let want = match arch {
        Arch::X86_64 => EM_X86_64,
        Arch::Aarch64 => EM_AARCH64,
    };
    let got = u16_at(bytes, 0x12)?;
    (got != want).then(|| {
        let name = match got {
            EM_X86_64 => "x86_64".to_string(),
            EM_AARCH64 => "aarch64".to_string(),
            other => format!("ELF machine {other}"),
        };
        format!("it is {name} code, not {}", arch.label())
    })
}

/// Fail with a clear message unless `path` is a static x86-64 executable.
pub fn ensure_static(path: &Path, what: &str) -> Result<()> {
    ensure_static_for(path, what, Arch::X86_64)
}

/// Fail with a clear message unless `path` is a static executable for `arch`.
pub fn ensure_static_for(path: &Path, what: &str, arch: Arch) -> Result<()> {
    let bytes = std::fs::read(path).context(|| format!("reading {what} {}", path.display()))?;
    match not_static_reason(&bytes).or_else(|| wrong_machine_reason(&bytes, arch)) {
        None => Ok(()),
        Some(reason) => Err(err!(
            "{what} {} is not a static {} executable: {reason}. The {} VM has no shared \
             libraries for it; build it with `--target {}` (static via .cargo/config.toml)",
            path.display(),
            arch.label(),
            arch.label(),
            arch.musl_target()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_dynamic_binary_is_rejected() {
        // /bin/ls on any glibc system is dynamically linked.
        let bytes = std::fs::read("/bin/ls").unwrap();
        let reason = not_static_reason(&bytes).expect("/bin/ls is dynamic");
        assert!(reason.contains("PT_INTERP"), "{reason}");
        let e = ensure_static(Path::new("/bin/ls"), "test binary")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a static x86_64 executable"), "{e}");
    }

    #[test]
    fn busybox_static_is_accepted_if_present() {
        // busybox-static is a prerequisite of the harness; skip loudly when absent.
        match std::fs::read("/bin/busybox") {
            Ok(bytes) => assert_eq!(not_static_reason(&bytes), None),
            Err(e) => panic!("/bin/busybox (busybox-static) is a prerequisite: {e}"),
        }
    }

    #[test]
    fn the_machine_must_match_the_vm() {
        let bytes = std::fs::read("/bin/busybox").unwrap();
        assert_eq!(wrong_machine_reason(&bytes, Arch::X86_64), None);
        let e = wrong_machine_reason(&bytes, Arch::Aarch64).unwrap();
        assert!(e.contains("x86_64 code, not aarch64"), "{e}");
        let e = ensure_static_for(Path::new("/bin/busybox"), "busybox", Arch::Aarch64)
            .unwrap_err()
            .to_string();
        assert!(e.contains("aarch64-unknown-linux-musl"), "{e}");
    }

    #[test]
    fn garbage_is_rejected() {
        assert_eq!(
            not_static_reason(b"#!/bin/sh\n").as_deref(),
            Some("not an ELF file")
        );
        assert_eq!(
            not_static_reason(b"\x7fELF\x02\x01").as_deref(),
            Some("truncated ELF headers")
        );
    }
}
