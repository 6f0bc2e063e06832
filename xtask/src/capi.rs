//! Builds `capi/` (package `uverbs-capi`) into rdma-core's library names: `libibverbs.so.1`,
//! `libibverbs.so`, `libibverbs.a`, `libefa.so.1`, `libefa.so` and `libefa.a` in one directory,
//! and links C programs statically against them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{err, Context, Result};

/// The libraries of one build of `uverbs-capi`.
#[derive(Debug, Clone)]
pub struct CapiLibs {
    /// Holds libibverbs.so.1, libibverbs.so, libibverbs.a, libefa.so.1, libefa.so, libefa.a.
    pub dir: PathBuf,
}

/// `cargo build --release -p uverbs-capi` with `features`, then the shared libraries linked
/// from its static library, in `target/capi/<features>/` (one directory per feature set, so
/// builds with different features do not overwrite each other).
pub fn build(features: &[&str]) -> Result<CapiLibs> {
    let root = crate::util::workspace_root();
    let mut cmd = Command::new(crate::util::cargo());
    cmd.args(["build", "--release", "-p", "uverbs-capi"])
        .current_dir(&root);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    crate::util::run(&mut cmd)?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let staticlib = target.join("release/libuverbs_capi.a");
    let name = if features.is_empty() {
        "default".to_string()
    } else {
        features.join("+")
    };
    let dir = target.join("capi").join(name);
    std::fs::create_dir_all(&dir).context(|| format!("creating {}", dir.display()))?;
    for lib in ["libibverbs", "libefa"] {
        let a = dir.join(format!("{lib}.a"));
        std::fs::copy(&staticlib, &a)
            .context(|| format!("copying {} to {}", staticlib.display(), a.display()))?;
        let so1 = format!("{lib}.so.1");
        crate::util::run(
            Command::new("gcc")
                .args(["-shared", "-o"])
                .arg(dir.join(&so1))
                .arg(format!("-Wl,-soname,{so1}"))
                .arg("-Wl,--whole-archive")
                .arg(&a)
                .args([
                    "-Wl,--no-whole-archive",
                    "-lpthread",
                    "-ldl",
                    "-lm",
                    "-lrt",
                    "-lgcc_s",
                ]),
        )?;
        let link = dir.join(format!("{lib}.so"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&so1, &link)
            .context(|| format!("linking {}", link.display()))?;
    }
    Ok(CapiLibs { dir })
}

/// Compile the C program `src` and link it statically against `libs`' libibverbs.a and
/// libefa.a (rdma-core 44's headers from libibverbs-dev) into `out`.
pub fn build_static_c(libs: &CapiLibs, src: &Path, out: &Path) -> Result<()> {
    crate::util::run(
        Command::new("gcc")
            .args(["-O2", "-Wall", "-Werror", "-static", "-o"])
            .arg(out)
            .arg(src)
            .arg(libs.dir.join("libibverbs.a"))
            .args(["-lpthread", "-ldl", "-lm", "-lrt"]),
    )
    .map_err(|e| err!("linking {} statically: {e}", src.display()))
}
