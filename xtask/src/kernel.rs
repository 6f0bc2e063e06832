//! Test kernels from Debian's package archive: resolve the newest package of a series with
//! `apt-cache`, fetch it with `apt-get download`, unpack it with `dpkg-deb -x` into the cache,
//! and find modules (with their dependencies, from `modules.dep`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{err, output, Context, Result};

/// The machine a test kernel, its VM and everything in its image are built for. The host is
/// x86-64; an aarch64 VM runs under `qemu-system-aarch64` (TCG) with Debian's arm64 packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    pub fn parse(s: &str) -> Result<Arch> {
        match s {
            "x86_64" | "x86-64" | "amd64" => Ok(Arch::X86_64),
            "aarch64" | "arm64" => Ok(Arch::Aarch64),
            other => Err(err!(
                "unknown architecture `{other}`: expected x86_64 (amd64) or aarch64 (arm64)"
            )),
        }
    }

    /// Rust's (and qemu's) name.
    pub fn label(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// Debian's architecture name (package suffix and `:arch` qualifier).
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// The Rust target of the static executables that run in this architecture's VM.
    pub fn musl_target(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-linux-musl",
            Arch::Aarch64 => "aarch64-unknown-linux-musl",
        }
    }

    /// Debian's multiarch library directory name.
    pub fn multiarch(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-linux-gnu",
            Arch::Aarch64 => "aarch64-linux-gnu",
        }
    }

    /// Whether this is the host's own architecture (its packages are installed, not unpacked).
    pub fn is_host(self) -> bool {
        self == Arch::X86_64
    }

    /// A package name as apt wants it for this architecture (`name:arm64` for a foreign one).
    pub fn apt_name(self, pkg: &str) -> String {
        if self.is_host() {
            pkg.to_string()
        } else {
            format!("{pkg}:{}", self.debian())
        }
    }
}

/// A kernel series we test on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    /// Debian 12's own kernel: `linux-image-6.1.0-N-amd64`, plain `.ko` modules.
    V6_1,
    /// The bookworm backport line: `linux-image-6.12.N+debNN-amd64`, `.ko.xz` modules.
    V6_12,
}

impl Series {
    pub const ALL: [Series; 2] = [Series::V6_1, Series::V6_12];

    pub fn label(self) -> &'static str {
        match self {
            Series::V6_1 => "6.1",
            Series::V6_12 => "6.12",
        }
    }

    pub fn parse(s: &str) -> Result<Series> {
        match s {
            "6.1" => Ok(Series::V6_1),
            "6.12" => Ok(Series::V6_12),
            other => Err(err!(
                "unknown kernel series `{other}`: expected 6.1 or 6.12"
            )),
        }
    }

    fn pattern(self, arch: Arch) -> String {
        match self {
            Series::V6_1 => format!("linux-image-6.1.0-N-{}", arch.debian()),
            Series::V6_12 => format!("linux-image-6.12.N+debNN-{}", arch.debian()),
        }
    }

    /// The sort key of a package name of this series (higher = newer), or `None` if the name
    /// is not a plain image of the series for `arch` (cloud, rt, dbg, unsigned, 16k-page
    /// variants are not).
    pub fn version_key(self, arch: Arch, pkg: &str) -> Option<Vec<u64>> {
        let suffix = format!("-{}", arch.debian());
        let num = |s: &str| -> Option<u64> {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        };
        match self {
            Series::V6_1 => {
                let abi = pkg
                    .strip_prefix("linux-image-6.1.0-")?
                    .strip_suffix(suffix.as_str())?;
                Some(vec![num(abi)?])
            }
            Series::V6_12 => {
                let rest = pkg
                    .strip_prefix("linux-image-6.12.")?
                    .strip_suffix(suffix.as_str())?;
                let (patch, deb) = rest.split_once("+deb")?;
                Some(vec![num(patch)?, num(deb)?])
            }
        }
    }
}

/// An unpacked kernel package.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub series: Series,
    pub arch: Arch,
    /// The Debian package name.
    pub package: String,
    /// `uname -r` inside the VM, e.g. `6.1.0-57-amd64`.
    pub release: String,
    pub vmlinuz: PathBuf,
    pub modules_dir: PathBuf,
}

/// The newest installable package of `series` for `arch` in the local apt indexes.
pub fn resolve(series: Series, arch: Arch) -> Result<String> {
    crate::prereq::ensure_foreign_arch(arch)?;
    if let Some(p) = newest_known(series, arch)? {
        return Ok(p);
    }
    // A fresh machine has no package lists yet: refresh once and look again.
    crate::prereq::apt_update()?;
    if let Some(p) = newest_known(series, arch)? {
        return Ok(p);
    }
    // Debian 12's 6.12 kernels are only in bookworm-security, which a debootstrap chroot lacks.
    if crate::prereq::ensure_security_suite()? {
        if let Some(p) = newest_known(series, arch)? {
            return Ok(p);
        }
    }
    newest_known(series, arch)?.ok_or_else(|| {
        err!(
            "no Debian package found for the {} {} kernel series (looked for {} with `apt-cache pkgnames`); \
             the package may no longer exist, or bookworm / bookworm-security is not in the apt sources",
            arch.label(),
            series.label(),
            series.pattern(arch)
        )
    })
}

fn newest_known(series: Series, arch: Arch) -> Result<Option<String>> {
    let prefix = match series {
        Series::V6_1 => "linux-image-6.1.0-",
        Series::V6_12 => "linux-image-6.12.",
    };
    let names = output(Command::new("apt-cache").args(["pkgnames", prefix]))?;
    let mut candidates: Vec<(Vec<u64>, &str)> = names
        .lines()
        .filter_map(|n| Some((series.version_key(arch, n.trim())?, n.trim())))
        .collect();
    candidates.sort();
    // pkgnames also lists names only mentioned as dependencies; take the newest with a candidate.
    for (_, name) in candidates.iter().rev() {
        let policy = output(Command::new("apt-cache").args(["policy", &arch.apt_name(name)]))?;
        let has_candidate = policy
            .lines()
            .any(|l| l.trim_start().starts_with("Candidate:") && !l.contains("(none)"));
        if has_candidate {
            return Ok(Some(name.to_string()));
        }
    }
    Ok(None)
}

/// Resolve, download (if not cached) and unpack the newest kernel of `series` for `arch`.
pub fn fetch(series: Series, arch: Arch) -> Result<Kernel> {
    let package = resolve(series, arch)?;
    let release = package
        .strip_prefix("linux-image-")
        .unwrap_or(&package)
        .to_string();
    let cache = crate::util::cache_dir()?;
    let root = cache.join(&package);
    let stamp = root.join(".unpacked");
    if !stamp.exists() {
        println!("xtask: fetching kernel {package} into {}", cache.display());
        let dl = cache.join("download");
        let _ = std::fs::remove_dir_all(&dl);
        std::fs::create_dir_all(&dl).context(|| format!("creating {}", dl.display()))?;
        let mut cmd = Command::new("apt-get");
        cmd.args(["download", "-q", &arch.apt_name(&package)])
            .current_dir(&dl);
        if let Err(e) = crate::util::run(&mut cmd) {
            // Maybe the indexes are stale (package superseded): refresh once and retry.
            crate::prereq::apt_update()?;
            crate::util::run(&mut cmd).map_err(|e2| {
                err!("could not download kernel package {package} from the Debian archive: {e2} (first try: {e})")
            })?;
        }
        let deb = std::fs::read_dir(&dl)
            .context(|| format!("listing {}", dl.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .ok_or_else(|| {
                err!(
                    "apt-get download {package} left no .deb in {}",
                    dl.display()
                )
            })?;
        let _ = std::fs::remove_dir_all(&root);
        crate::util::run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
        std::fs::write(&stamp, &package).context(|| format!("writing {}", stamp.display()))?;
        let _ = std::fs::remove_dir_all(&dl);
        prune_older(&cache, series, arch, &package);
    }
    let vmlinuz = root.join("boot").join(format!("vmlinuz-{release}"));
    let modules_dir = root.join("lib/modules").join(&release);
    if !vmlinuz.is_file() || !modules_dir.join("kernel").is_dir() {
        return Err(err!(
            "kernel package {package} unpacked in {} lacks boot/vmlinuz-{release} or lib/modules/{release}/kernel; \
             delete that directory to fetch it again",
            root.display()
        ));
    }
    Ok(Kernel {
        series,
        arch,
        package,
        release,
        vmlinuz,
        modules_dir,
    })
}

/// Remove superseded kernels of the same series from the cache (they are ~300 MB each).
fn prune_older(cache: &Path, series: Series, arch: Arch, keep: &str) {
    let Ok(dir) = std::fs::read_dir(cache) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != keep && series.version_key(arch, &name).is_some() {
            println!("xtask: removing superseded kernel {name} from the cache");
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A loadable module file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub name: String,
    /// Path relative to the modules directory (`kernel/.../x.ko` or `.ko.xz`).
    pub rel_path: String,
}

fn module_name(path: &str) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    let base = base.split(".ko").next().unwrap_or(base);
    base.replace('-', "_")
}

/// Where a kernel's modules are and what each depends on: from `modules.dep` when the tree
/// has one, otherwise (Debian's packages ship none: depmod runs at install time) from each
/// needed module's own `.modinfo` `depends=` list, the data depmod builds modules.dep from.
#[derive(Debug, Default)]
pub struct ModuleIndex {
    /// name -> path relative to the modules directory
    paths: BTreeMap<String, String>,
    /// name -> names of its dependencies (filled from modules.dep, or lazily from .modinfo)
    deps: BTreeMap<String, Vec<String>>,
    builtin: BTreeSet<String>,
    /// Set when dependencies come from .modinfo.
    modules_dir: Option<PathBuf>,
}

impl ModuleIndex {
    pub fn load(modules_dir: &Path) -> Result<ModuleIndex> {
        let builtin =
            std::fs::read_to_string(modules_dir.join("modules.builtin")).unwrap_or_default();
        if let Ok(dep) = std::fs::read_to_string(modules_dir.join("modules.dep")) {
            return Ok(ModuleIndex::parse(&dep, &builtin));
        }
        let mut idx = ModuleIndex::parse("", &builtin);
        idx.modules_dir = Some(modules_dir.to_path_buf());
        let mut stack = vec![modules_dir.join("kernel")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).context(|| format!("listing {}", dir.display()))? {
                let path = entry
                    .context(|| format!("listing {}", dir.display()))?
                    .path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.to_string_lossy().contains(".ko") {
                    let rel = path
                        .strip_prefix(modules_dir)
                        .unwrap_or(&path)
                        .to_string_lossy()
                        .into_owned();
                    idx.paths.insert(module_name(&rel), rel);
                }
            }
        }
        if idx.paths.is_empty() {
            return Err(err!(
                "no kernel modules under {}",
                modules_dir.join("kernel").display()
            ));
        }
        Ok(idx)
    }

    pub fn parse(dep: &str, builtin: &str) -> ModuleIndex {
        let mut idx = ModuleIndex::default();
        for line in dep.lines() {
            let Some((path, rest)) = line.split_once(':') else {
                continue;
            };
            let name = module_name(path);
            idx.deps.insert(
                name.clone(),
                rest.split_whitespace().map(module_name).collect(),
            );
            idx.paths.insert(name, path.to_string());
        }
        idx.builtin = builtin
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(module_name)
            .collect();
        idx
    }

    fn deps_of(&mut self, name: &str) -> Result<Vec<String>> {
        if let Some(d) = self.deps.get(name) {
            return Ok(d.clone());
        }
        let (Some(dir), Some(rel)) = (&self.modules_dir, self.paths.get(name)) else {
            return Err(err!("no dependency information for kernel module {name}"));
        };
        let m = Module {
            name: name.to_string(),
            rel_path: rel.clone(),
        };
        let bytes = module_bytes(dir, &m)?;
        let info = crate::elf::modinfo(&bytes).ok_or_else(|| {
            err!(
                "kernel module {} has no readable .modinfo section",
                dir.join(rel).display()
            )
        })?;
        let deps: Vec<String> = info
            .iter()
            .filter(|(k, _)| k == "depends")
            .flat_map(|(_, v)| v.split(','))
            .filter(|d| !d.is_empty())
            .map(|d| d.replace('-', "_"))
            .collect();
        self.deps.insert(name.to_string(), deps.clone());
        Ok(deps)
    }

    /// The module files to insmod, in load order, for `wanted` (each after its dependencies).
    /// Modules built into the kernel are skipped; unknown ones are an error.
    pub fn load_order(&mut self, wanted: &[&str]) -> Result<Vec<Module>> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for w in wanted {
            let name = w.replace('-', "_");
            if self.builtin.contains(&name) && !self.paths.contains_key(&name) {
                continue;
            }
            if !self.paths.contains_key(&name) {
                return Err(err!(
                    "kernel module {name} is neither a module file nor built in"
                ));
            }
            self.visit(&name, &mut seen, &mut out)?;
        }
        Ok(out)
    }

    fn visit(
        &mut self,
        name: &str,
        seen: &mut BTreeSet<String>,
        out: &mut Vec<Module>,
    ) -> Result<()> {
        if !seen.insert(name.to_string())
            || (self.builtin.contains(name) && !self.paths.contains_key(name))
        {
            return Ok(());
        }
        // Depth first: every module's dependencies are pushed before it.
        for d in self.deps_of(name)? {
            self.visit(&d, seen, out)?;
        }
        let rel_path = self
            .paths
            .get(name)
            .ok_or_else(|| err!("kernel module {name} (a dependency) is missing"))?;
        out.push(Module {
            name: name.to_string(),
            rel_path: rel_path.clone(),
        });
        Ok(())
    }
}

/// The module's bytes, ready for busybox insmod (which cannot read `.ko.xz`).
pub fn module_bytes(modules_dir: &Path, m: &Module) -> Result<Vec<u8>> {
    let path = modules_dir.join(&m.rel_path);
    if m.rel_path.ends_with(".xz") {
        let out = Command::new("xz")
            .arg("-dc")
            .arg(&path)
            .output()
            .context(|| {
                format!(
                    "running xz to decompress {} (package xz-utils)",
                    path.display()
                )
            })?;
        if !out.status.success() {
            return Err(err!(
                "xz could not decompress {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(out.stdout)
    } else {
        std::fs::read(&path).context(|| format!("reading module {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_keys_pick_plain_amd64_images_only() {
        let s = Series::V6_1;
        assert_eq!(
            s.version_key(Arch::X86_64, "linux-image-6.1.0-57-amd64"),
            Some(vec![57])
        );
        assert_eq!(
            s.version_key(Arch::X86_64, "linux-image-6.1.0-57-cloud-amd64"),
            None
        );
        assert_eq!(
            s.version_key(Arch::X86_64, "linux-image-6.1.0-57-rt-amd64"),
            None
        );
        assert_eq!(
            s.version_key(Arch::X86_64, "linux-image-6.1.0-57-amd64-dbg"),
            None
        );
        assert_eq!(
            s.version_key(Arch::X86_64, "linux-image-6.1.0-57-amd64-unsigned"),
            None
        );
        let s = Series::V6_12;
        assert_eq!(
            s.version_key(Arch::X86_64, "linux-image-6.12.117+deb12-amd64"),
            Some(vec![117, 12])
        );
        assert_eq!(
            s.version_key(Arch::X86_64, "linux-image-6.12.117+deb12-cloud-amd64"),
            None
        );
        assert_eq!(s.version_key(Arch::X86_64, "linux-image-6.12-amd64"), None);
        assert_eq!(
            s.version_key(Arch::X86_64, "linux-image-6.12.117+deb12-amd64-unsigned"),
            None
        );
        assert_eq!(
            s.version_key(Arch::Aarch64, "linux-image-6.12.117+deb12-arm64"),
            Some(vec![117, 12])
        );
        assert_eq!(
            s.version_key(Arch::Aarch64, "linux-image-6.12.117+deb12-arm64-16k"),
            None
        );
        assert_eq!(
            s.version_key(Arch::Aarch64, "linux-image-6.12.117+deb12-amd64"),
            None
        );
        assert_eq!(
            s.version_key(Arch::X86_64, "linux-image-6.12.117+deb12-arm64"),
            None
        );
        assert_eq!(
            Series::V6_1.version_key(Arch::Aarch64, "linux-image-6.1.0-57-cloud-arm64"),
            None
        );
        // numeric, not lexical, order
        assert!(
            s.version_key(Arch::X86_64, "linux-image-6.12.9+deb12-amd64")
                < s.version_key(Arch::X86_64, "linux-image-6.12.10+deb12-amd64")
        );
    }

    #[test]
    fn load_order_puts_dependencies_first_and_skips_builtins() {
        let dep = "\
kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: kernel/net/ipv6/ip6_udp_tunnel.ko.xz kernel/net/ipv4/udp_tunnel.ko.xz kernel/drivers/infiniband/core/ib_uverbs.ko.xz kernel/drivers/infiniband/core/ib_core.ko.xz
kernel/drivers/infiniband/core/ib_uverbs.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz
kernel/drivers/infiniband/core/ib_core.ko.xz:
kernel/net/ipv4/udp_tunnel.ko.xz:
kernel/net/ipv6/ip6_udp_tunnel.ko.xz:
kernel/crypto/crc32_generic.ko.xz:
";
        let mut idx = ModuleIndex::parse(dep, "kernel/drivers/net/virtio_net.ko\n");
        let order: Vec<String> = idx
            .load_order(&["crc32_generic", "rdma_rxe", "virtio_net", "ib_core"])
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(
            order,
            [
                "crc32_generic",
                "ip6_udp_tunnel",
                "udp_tunnel",
                "ib_core",
                "ib_uverbs",
                "rdma_rxe"
            ]
        );
        let e = idx
            .load_order(&["nonexistent_mod"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("nonexistent_mod"), "{e}");
    }
}
