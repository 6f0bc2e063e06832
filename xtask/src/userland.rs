//! The guest userland of a foreign-architecture VM (arm64): Debian's arm64 packages of
//! busybox-static, rdma-core's tools and providers, perftest, iproute2 and rdmacm-utils, with every library
//! package they depend on, downloaded with `apt-get download` and unpacked with `dpkg-deb -x`
//! into one directory of the cache (nothing is installed). The guest image takes its programs
//! from there, with all of the tree's shared libraries and its `ld-linux-aarch64.so.1`
//! (there is no `ldd` for a foreign architecture, and the library set is small).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::kernel::Arch;
use crate::util::{err, output, Context, Result};

/// The packages whose programs the guest runs; their library dependencies come along.
const ROOTS: &[&str] = &[
    "busybox-static",
    "ibverbs-utils",
    "perftest",
    "ibverbs-providers",
    "iproute2",
    // rping, ucmatose, udaddy: the rdma_cm peers of uverbs::cm's tests.
    "rdmacm-utils",
];

/// Shared-library packages whose names do not start with `lib` (iproute2 needs libz.so.1).
const LIBRARIES_NOT_NAMED_LIB: &[&str] = &["zlib1g"];

/// An unpacked userland tree for one architecture.
#[derive(Debug, Clone)]
pub struct Userland {
    pub arch: Arch,
    pub root: PathBuf,
}

impl Userland {
    /// A program of the tree, looked for where Debian puts programs.
    pub fn program(&self, name: &str) -> Result<PathBuf> {
        for dir in ["usr/bin", "bin", "usr/sbin", "sbin"] {
            let p = self.root.join(dir).join(name);
            if p.exists() {
                return Ok(p);
            }
        }
        Err(err!(
            "{name} is not in the {} userland unpacked at {} (packages {})",
            self.arch.debian(),
            self.root.display(),
            ROOTS.join(", ")
        ))
    }

    /// Every regular file or symlink under the tree's library directories, as (guest path,
    /// host path): the shared libraries, the loader and rdma-core's providers.
    pub fn library_files(&self) -> Result<Vec<(String, PathBuf)>> {
        let mut out = Vec::new();
        let multiarch = self.arch.multiarch();
        for dir in [format!("lib/{multiarch}"), format!("usr/lib/{multiarch}")] {
            let mut stack = vec![self.root.join(&dir)];
            while let Some(d) = stack.pop() {
                let Ok(rd) = std::fs::read_dir(&d) else {
                    continue;
                };
                for e in rd.flatten() {
                    let p = e.path();
                    let ft = e
                        .file_type()
                        .context(|| format!("reading {}", p.display()))?;
                    if ft.is_dir() {
                        stack.push(p);
                        continue;
                    }
                    let name = p.to_string_lossy();
                    if name.contains(".so") {
                        let rel = p
                            .strip_prefix(&self.root)
                            .unwrap_or(&p)
                            .to_string_lossy()
                            .into_owned();
                        out.push((rel, p));
                    }
                }
            }
        }
        // The program interpreter (PT_INTERP) of arm64 binaries.
        let loader = self.root.join("lib/ld-linux-aarch64.so.1");
        if self.arch == Arch::Aarch64 {
            if !loader.exists() {
                return Err(err!(
                    "the {} userland at {} has no lib/ld-linux-aarch64.so.1 (package libc6:arm64)",
                    self.arch.debian(),
                    self.root.display()
                ));
            }
            out.push(("lib/ld-linux-aarch64.so.1".into(), loader));
        }
        Ok(out)
    }
}

/// The library packages `ROOTS` need, for `arch` (`apt-cache depends --recurse`, keeping
/// the `lib*` packages of that architecture: the scripts and tools of other dependencies,
/// debconf, adduser and the like, are not needed to run a program).
fn packages(arch: Arch) -> Result<Vec<String>> {
    let mut cmd = Command::new("apt-cache");
    cmd.args([
        "depends",
        "--recurse",
        "--no-recommends",
        "--no-suggests",
        "--no-conflicts",
        "--no-breaks",
        "--no-replaces",
        "--no-enhances",
    ]);
    for r in ROOTS {
        cmd.arg(arch.apt_name(r));
    }
    let out = output(&mut cmd)?;
    let suffix = format!(":{}", arch.debian());
    let mut pkgs: Vec<String> = ROOTS.iter().map(|r| r.to_string()).collect();
    for line in out.lines().filter(|l| !l.starts_with(' ')) {
        // Virtual packages are printed as <name>.
        let Some(name) = line.trim().strip_suffix(suffix.as_str()) else {
            continue;
        };
        let library = name.starts_with("lib") || LIBRARIES_NOT_NAMED_LIB.contains(&name);
        if library && !pkgs.iter().any(|p| p == name) {
            pkgs.push(name.to_string());
        }
    }
    Ok(pkgs)
}

/// Download (once) and unpack the userland for `arch` into the cache.
pub fn fetch(arch: Arch) -> Result<Userland> {
    let cache = crate::util::cache_dir()?;
    let root = cache.join(format!("userland-{}", arch.debian()));
    let stamp = root.join(".unpacked");
    crate::prereq::ensure_foreign_arch(arch)?;
    let mut pkgs = packages(arch)?;
    if pkgs.len() <= ROOTS.len() {
        // Nothing resolved: the lists may lack this architecture yet.
        crate::prereq::apt_update()?;
        pkgs = packages(arch)?;
    }
    // The stamp holds the package list the tree was unpacked from: a changed list (new
    // dependencies, a new library kept) unpacks it again.
    let wanted = pkgs.join("\n");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) {
        return Ok(Userland { arch, root });
    }
    println!(
        "xtask: fetching the {} guest userland ({} packages) into {}",
        arch.debian(),
        pkgs.len(),
        root.display()
    );
    let dl = cache.join(format!("download-userland-{}", arch.debian()));
    let _ = std::fs::remove_dir_all(&dl);
    std::fs::create_dir_all(&dl).context(|| format!("creating {}", dl.display()))?;
    let mut cmd = Command::new("apt-get");
    cmd.args(["download", "-q"])
        .args(pkgs.iter().map(|p| arch.apt_name(p)))
        .current_dir(&dl);
    crate::util::run(&mut cmd).map_err(|e| {
        err!(
            "could not download the {} userland packages {}: {e}",
            arch.debian(),
            pkgs.join(", ")
        )
    })?;
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).context(|| format!("creating {}", root.display()))?;
    let mut debs: Vec<PathBuf> = std::fs::read_dir(&dl)
        .context(|| format!("listing {}", dl.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    debs.sort();
    for deb in &debs {
        crate::util::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root))?;
    }
    std::fs::write(&stamp, &wanted).context(|| format!("writing {}", stamp.display()))?;
    let _ = std::fs::remove_dir_all(&dl);
    Ok(Userland { arch, root })
}

/// A symlink's target file inside `root` (absolute links are taken relative to the tree),
/// so the image gets a copy of the file rather than a link.
pub fn resolve_in(root: &Path, p: &Path) -> PathBuf {
    let mut cur = p.to_path_buf();
    for _ in 0..16 {
        let Ok(target) = std::fs::read_link(&cur) else {
            return cur;
        };
        cur = if target.is_absolute() {
            root.join(target.strip_prefix("/").unwrap_or(&target))
        } else {
            cur.parent().unwrap_or(root).join(target)
        };
    }
    cur
}
