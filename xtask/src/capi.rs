//! `cargo xtask capi`: rdma-core's libraries built from uverbs (`capi/`), and the checks that
//! programs built against rdma-core link and run on them.
//!
//! [`build`] links `libibverbs.so.1` from the `uverbs-capi` staticlib with rdma-core's symbol
//! versions (capi/libibverbs.map), copies the staticlib as `libibverbs.a`, links
//! `libefa.so.1` from the libefa shim crate (capi/efa-shim, when the tree has it) and writes
//! `libefa.a` as an archive with no members (capi/README.md says why). [`checks`] looks at
//! what was built (sonames, exported and undefined symbols, the symbols rdma-core's users
//! import) and runs a C program compiled against the installed `<infiniband/verbs.h>`,
//! linked dynamically and statically.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::testrun::{Item, Report};
use crate::util::{err, output, run, workspace_root, Context, Result};

/// The libraries [`build`] made, all in one directory.
#[derive(Debug, Clone)]
pub struct CapiLibs {
    /// `target/capi/<profile-and-features>/`: `libibverbs.so.1`, `libibverbs.so`,
    /// `libibverbs.a`, `libefa.so.1`, `libefa.so`, `libefa.a`, `libmlx5.so.1`, `libmlx5.so`,
    /// and `native-static-libs` (the
    /// system libraries a program linked with `libibverbs.a` needs, as rustc reports them).
    pub dir: PathBuf,
}

impl CapiLibs {
    pub fn libibverbs_so(&self) -> PathBuf {
        self.dir.join("libibverbs.so.1")
    }
    pub fn libibverbs_a(&self) -> PathBuf {
        self.dir.join("libibverbs.a")
    }
    pub fn libefa_so(&self) -> PathBuf {
        self.dir.join("libefa.so.1")
    }
    pub fn libefa_a(&self) -> PathBuf {
        self.dir.join("libefa.a")
    }
    pub fn libmlx5_so(&self) -> PathBuf {
        self.dir.join("libmlx5.so.1")
    }

    /// The `-l` options rustc printed for the staticlib (`--print native-static-libs`).
    pub fn native_libs(&self) -> Result<Vec<String>> {
        let f = self.dir.join("native-static-libs");
        let s = std::fs::read_to_string(&f).context(|| format!("reading {}", f.display()))?;
        Ok(s.split_whitespace().map(str::to_string).collect())
    }
}

/// The package of the libefa shim (capi/efa-shim): `efadv_*` forwarding to libibverbs.so.1.
const EFA_SHIM_PACKAGE: &str = "uverbs-capi-efa-shim";
const EFA_SHIM_DIR: &str = "capi/efa-shim";
/// The package of the libmlx5 placeholder (capi/mlx5-stub): `mlx5dv_*` answering "not an mlx5
/// device", until uverbs has an mlx5 provider.
const MLX5_STUB_PACKAGE: &str = "uverbs-capi-mlx5-stub";
const MLX5_STUB_DIR: &str = "capi/mlx5-stub";
/// The private node of libibverbs.so.1 that the shim's calls bind to, as
/// capi/libibverbs-efa.map.part defines it; used when that file is missing.
const EFA_PRIVATE_NODE: &str = "UVERBS_PRIVATE_EFA_1 {\n\tglobal:\n\t\tuverbs_efadv_*;\n};\n";
/// The node of the `standin` feature's hooks (capi/src/standin.rs, measuring equipment for
/// `cargo xtask bench --host`): appended to the version script of that build only, so no
/// library built for programs exports them.
const STANDIN_NODE: &str = "UVERBS_PRIVATE_STANDIN_1 {\n\tglobal:\n\t\tuverbs_standin_*;\n};\n";

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Build the libraries into `target/capi/release[+feature...]/` (see [`CapiLibs`]).
pub fn build(features: &[&str]) -> Result<CapiLibs> {
    let root = workspace_root();
    let mut name = "release".to_string();
    for f in features {
        name.push('+');
        name.push_str(&f.replace('/', "-"));
    }
    let dir = target_dir().join("capi").join(name);
    std::fs::create_dir_all(&dir).context(|| format!("creating {}", dir.display()))?;
    let libs = CapiLibs { dir };

    // libibverbs: the staticlib, and the shared library linked from all of it.
    let (archive, natives) = staticlib("uverbs-capi", "uverbs_capi", features)?;
    std::fs::write(
        libs.dir.join("native-static-libs"),
        natives.join(" ") + "\n",
    )
    .context(|| format!("writing {}", libs.dir.join("native-static-libs").display()))?;
    copy(&archive, &libs.libibverbs_a())?;
    let script = libs.dir.join("libibverbs.ver");
    let mut ver = version_script(&root)?;
    if features.contains(&"standin") {
        ver.push_str(STANDIN_NODE);
    }
    std::fs::write(&script, ver).context(|| format!("writing {}", script.display()))?;
    link_shared(
        &libs.libibverbs_so(),
        &script,
        &archive,
        &[],
        &natives,
        "libibverbs.so.1",
    )?;
    symlink("libibverbs.so.1", &libs.dir.join("libibverbs.so"))?;

    // libefa: the shim, bound to the libibverbs.so.1 just linked.
    if root.join(EFA_SHIM_DIR).join("Cargo.toml").is_file() {
        let shim_features: Vec<&str> = Vec::new();
        let (shim, shim_natives) =
            staticlib(EFA_SHIM_PACKAGE, "uverbs_capi_efa_shim", &shim_features)?;
        let mut before = vec!["-L".to_string(), libs.dir.display().to_string()];
        before.push("-libverbs".into());
        link_shared(
            &libs.libefa_so(),
            &root.join("capi/libefa.map"),
            &shim,
            &before,
            &shim_natives,
            "libefa.so.1",
        )?;
        symlink("libefa.so.1", &libs.dir.join("libefa.so"))?;
    } else {
        println!(
            "xtask: capi: no {EFA_SHIM_DIR}/Cargo.toml in this tree: libefa.so.1 not built \
             (libefa.a is, and libibverbs.a holds efadv_* for static programs)"
        );
        for stale in [libs.libefa_so(), libs.dir.join("libefa.so")] {
            let _ = std::fs::remove_file(stale);
        }
    }
    // libmlx5: the placeholder, on its own (it calls nothing of libibverbs).
    if root.join(MLX5_STUB_DIR).join("Cargo.toml").is_file() {
        let (stub, stub_natives) = staticlib(MLX5_STUB_PACKAGE, "uverbs_capi_mlx5_stub", &[])?;
        link_shared(
            &libs.libmlx5_so(),
            &root.join("capi/libmlx5.map"),
            &stub,
            &[],
            &stub_natives,
            "libmlx5.so.1",
        )?;
        symlink("libmlx5.so.1", &libs.dir.join("libmlx5.so"))?;
    } else {
        println!("xtask: capi: no {MLX5_STUB_DIR}/Cargo.toml in this tree: libmlx5.so.1 not built");
        for stale in [libs.libmlx5_so(), libs.dir.join("libmlx5.so")] {
            let _ = std::fs::remove_file(stale);
        }
    }
    // libefa.a has no members: a static program takes efadv_* from libibverbs.a. A second
    // Rust staticlib would bring a second copy of Rust's std into the program.
    let efa_a = libs.libefa_a();
    let _ = std::fs::remove_file(&efa_a);
    run(Command::new("ar").arg("rcs").arg(&efa_a))
        .map_err(|e| err!("making the empty {} (needs binutils): {e}", efa_a.display()))?;
    println!("xtask: capi: libraries in {}", libs.dir.display());
    Ok(libs)
}

/// `cargo rustc --release -p <package> --lib`: the staticlib's path and the native libraries
/// rustc prints for it (cargo replays that note when the crate is already built).
fn staticlib(package: &str, lib_name: &str, features: &[&str]) -> Result<(PathBuf, Vec<String>)> {
    let mut cmd = Command::new(crate::util::cargo());
    cmd.args(["rustc", "--release", "-p", package, "--lib"]);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    cmd.args(["--", "--print", "native-static-libs"])
        .current_dir(workspace_root());
    println!("$ {}", crate::util::show(&cmd));
    let (lines, status) = crate::util::run_tee(&mut cmd)?;
    if !status.success() {
        return Err(err!("`{}` failed ({status})", crate::util::show(&cmd)));
    }
    let natives = parse_native_static_libs(&lines).ok_or_else(|| {
        err!(
            "`{}` printed no `native-static-libs:` note",
            crate::util::show(&cmd)
        )
    })?;
    let archive = target_dir()
        .join("release")
        .join(format!("lib{lib_name}.a"));
    if !archive.is_file() {
        return Err(err!("{} was not built", archive.display()));
    }
    Ok((archive, natives))
}

/// The libraries of rustc's `note: native-static-libs: -lgcc_s -lutil ...` line.
fn parse_native_static_libs(lines: &[String]) -> Option<Vec<String>> {
    lines.iter().rev().find_map(|l| {
        let (_, libs) = l.split_once("native-static-libs:")?;
        Some(libs.split_whitespace().map(str::to_string).collect())
    })
}

/// capi/libibverbs.map and the libefa shim's private node (capi/libibverbs-efa.map.part
/// when the tree has it, else the same node written here).
fn version_script(root: &Path) -> Result<String> {
    let map = root.join("capi/libibverbs.map");
    let mut s = std::fs::read_to_string(&map).context(|| format!("reading {}", map.display()))?;
    let part = root.join("capi/libibverbs-efa.map.part");
    if !s.ends_with('\n') {
        s.push('\n');
    }
    if part.is_file() {
        s.push_str(
            &std::fs::read_to_string(&part).context(|| format!("reading {}", part.display()))?,
        );
    } else {
        s.push_str(EFA_PRIVATE_NODE);
    }
    Ok(s)
}

/// `gcc -shared`: all of `archive` behind `script`'s symbol versions.
fn link_shared(
    out: &Path,
    script: &Path,
    archive: &Path,
    extra: &[String],
    natives: &[String],
    soname: &str,
) -> Result<()> {
    let mut cmd = Command::new("gcc");
    cmd.arg("-shared")
        .arg("-o")
        .arg(out)
        .arg(format!("-Wl,-soname,{soname}"))
        .arg(format!("-Wl,--version-script={}", script.display()))
        .arg("-Wl,--whole-archive")
        .arg(archive)
        .arg("-Wl,--no-whole-archive")
        .args(["-Wl,--gc-sections", "-Wl,-z,now"])
        .args(extra)
        .args(natives);
    run(&mut cmd).map_err(|e| err!("linking {soname} (needs gcc and binutils): {e}"))
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .map(drop)
        .context(|| format!("copying {} to {}", from.display(), to.display()))
}

fn symlink(target: &str, link: &Path) -> Result<()> {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link)
        .context(|| format!("linking {} -> {target}", link.display()))
}

/// Compile and link `src` (C, against the installed `<infiniband/verbs.h>`) statically with
/// `libefa.a` and `libibverbs.a` of `libs` into `out`: an executable that needs no shared
/// library, for a VM with nothing else installed.
pub fn build_static_c(libs: &CapiLibs, src: &Path, out: &Path) -> Result<()> {
    let natives = libs.native_libs()?;
    let mut cmd = Command::new("gcc");
    cmd.args(["-O2", "-Wall", "-Werror", "-static", "-o"])
        .arg(out)
        .arg(src)
        .arg(libs.libefa_a())
        .arg(libs.libibverbs_a())
        .args(static_libs(&natives));
    run(&mut cmd).map_err(|e| {
        err!(
            "linking {} statically (needs gcc, libibverbs-dev): {e}",
            src.display()
        )
    })
}

/// rustc's native libraries for a static link: libgcc_s has no archive (gcc -static takes
/// libgcc and libgcc_eh itself) and libc comes last anyway.
fn static_libs(natives: &[String]) -> Vec<String> {
    natives
        .iter()
        .filter(|l| *l != "-lgcc_s" && *l != "-lc")
        .cloned()
        .collect()
}

/// `cargo xtask capi [--features F,...]`: build, then [`checks`].
pub fn command(args: &[String]) -> Result<bool> {
    let mut features = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--features" => {
                let v = it
                    .next()
                    .ok_or_else(|| err!("--features needs a value, e.g. efa-model"))?;
                features.extend(v.split(',').filter(|f| !f.is_empty()).map(str::to_string));
            }
            other => return Err(err!("`cargo xtask capi`: unknown option `{other}`")),
        }
    }
    crate::prereq::ensure_capi()?;
    let mut report = Report::new("capi");
    step(&mut report, &features);
    report.print();
    Ok(report.passed())
}

/// Build with `features` and run [`checks`], each a reported item (the `cargo xtask test`
/// host step).
pub fn step(report: &mut Report, features: &[String]) {
    let t = std::time::Instant::now();
    let f: Vec<&str> = features.iter().map(String::as_str).collect();
    match build(&f) {
        Ok(libs) => {
            report.push(Item::pass(
                "capi: build libibverbs.so.1, libibverbs.a, libefa, libmlx5",
            ));
            for i in checks(&libs) {
                report.push(i);
            }
        }
        Err(e) => report.push(Item::fail(
            "capi: build libibverbs.so.1, libibverbs.a, libefa, libmlx5",
            e.to_string(),
        )),
    }
    println!("xtask: capi: {:.0} s", t.elapsed().as_secs_f64());
}

/// The checks of built libraries, one item each.
pub fn checks(libs: &CapiLibs) -> Vec<Item> {
    let mut items = Vec::new();
    let mut push = |name: &str, r: Result<()>| {
        items.push(match r {
            Ok(()) => Item::pass(name),
            Err(e) => Item::fail(name, e.to_string()),
        })
    };
    let so = libs.libibverbs_so();
    push(
        "capi: libibverbs.so.1 soname",
        check_soname(&so, "libibverbs.so.1"),
    );
    let exports = dynamic_symbols(&so);
    push(
        "capi: libibverbs.so.1 exports only its version script's symbols",
        exports.as_ref().map_err(clone_err).and_then(|s| {
            let script = std::fs::read_to_string(libs.dir.join("libibverbs.ver"))
                .context(|| "reading libibverbs.ver".to_string())?;
            only_mapped(s, &parse_version_script(&script))
        }),
    );
    push(
        "capi: libibverbs.so.1 needs only libc and libgcc",
        exports
            .as_ref()
            .map_err(clone_err)
            .and_then(|s| undefined_only_system(s)),
    );
    for (importer, list) in IMPORTERS {
        push(
            &format!("capi: libibverbs.so.1 exports what {importer} imports"),
            exports
                .as_ref()
                .map_err(clone_err)
                .and_then(|s| exports_all(s, list)),
        );
    }
    if libs.libefa_so().is_file() {
        let efa = libs.libefa_so();
        push(
            "capi: libefa.so.1 soname",
            check_soname(&efa, "libefa.so.1"),
        );
        push(
            "capi: libefa.so.1 exports what pyverbs' efa module imports",
            dynamic_symbols(&efa).and_then(|s| exports_all(&s, EFA_IMPORTS)),
        );
    } else {
        items.push(Item::skip(
            "capi: libefa.so.1",
            format!("not built: no {EFA_SHIM_DIR} in this tree"),
        ));
    }
    if libs.libmlx5_so().is_file() {
        items.extend(mlx5_checks(libs));
    } else {
        items.push(Item::skip(
            "capi: libmlx5.so.1",
            format!("not built: no {MLX5_STUB_DIR} in this tree"),
        ));
    }
    let mut push = |name: &str, r: Result<()>| {
        items.push(match r {
            Ok(()) => Item::pass(name),
            Err(e) => Item::fail(name, e.to_string()),
        })
    };
    push(
        "capi: C program linked with -libverbs runs on libibverbs.so.1",
        dynamic_program(libs),
    );
    push(
        "capi: rdma-core's ibv_devices runs on libibverbs.so.1",
        rdma_core_binary(libs),
    );
    push(
        "capi: C program linked statically with libefa.a and libibverbs.a runs",
        static_program(libs),
    );
    items
}

/// The libmlx5 placeholder: soname; that it exports nothing but capi/libmlx5.map's symbols
/// (no Rust symbol) and needs nothing but glibc and libgcc (it must load without uverbs'
/// libibverbs.so.1 too); that it exports what pyverbs and perftest import.
fn mlx5_checks(libs: &CapiLibs) -> Vec<Item> {
    let mut items = Vec::new();
    let mut push = |name: &str, r: Result<()>| {
        items.push(match r {
            Ok(()) => Item::pass(name),
            Err(e) => Item::fail(name, e.to_string()),
        })
    };
    let so = libs.libmlx5_so();
    push(
        "capi: libmlx5.so.1 soname",
        check_soname(&so, "libmlx5.so.1"),
    );
    let exports = dynamic_symbols(&so);
    push(
        "capi: libmlx5.so.1 exports only capi/libmlx5.map's symbols",
        exports.as_ref().map_err(clone_err).and_then(|s| {
            let map = workspace_root().join("capi/libmlx5.map");
            let script =
                std::fs::read_to_string(&map).context(|| format!("reading {}", map.display()))?;
            only_mapped(s, &parse_version_script(&script))
        }),
    );
    push(
        "capi: libmlx5.so.1 needs only libc and libgcc",
        exports
            .as_ref()
            .map_err(clone_err)
            .and_then(|s| undefined_only_system(s)),
    );
    for (importer, list) in MLX5_IMPORTERS {
        push(
            &format!("capi: libmlx5.so.1 exports what {importer} imports"),
            exports
                .as_ref()
                .map_err(clone_err)
                .and_then(|s| exports_all(s, list)),
        );
    }
    items
}

fn clone_err(e: &crate::util::Error) -> crate::util::Error {
    crate::util::Error(e.0.clone())
}

fn check_soname(lib: &Path, soname: &str) -> Result<()> {
    let d = output(Command::new("readelf").arg("-d").arg(lib))?;
    let want = format!("Library soname: [{soname}]");
    if d.contains(&want) {
        Ok(())
    } else {
        Err(err!("readelf -d {}: no `{want}`", lib.display()))
    }
}

/// One line of `objdump -T`.
#[derive(Debug, Clone, PartialEq)]
struct DynSym {
    name: String,
    /// The version (`IBVERBS_1.1`, `GLIBC_2.2.5`, `Base`), without objdump's parentheses.
    version: String,
    /// objdump prints a hidden (non-default) version in parentheses.
    hidden: bool,
    undefined: bool,
    weak: bool,
    /// An `*ABS*` symbol naming a version node.
    version_node: bool,
}

fn dynamic_symbols(lib: &Path) -> Result<Vec<DynSym>> {
    Ok(parse_objdump_t(&output(
        Command::new("objdump").arg("-T").arg(lib),
    )?))
}

fn parse_objdump_t(text: &str) -> Vec<DynSym> {
    text.lines()
        .filter(|l| l.len() > 17 && l.as_bytes()[..16].iter().all(u8::is_ascii_hexdigit))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 4 {
                return None;
            }
            let name = f[f.len() - 1].to_string();
            let ver = f[f.len() - 2];
            let hidden = ver.starts_with('(');
            let version = ver.trim_matches(|c| c == '(' || c == ')').to_string();
            Some(DynSym {
                version_node: l.contains("*ABS*") && name == version,
                undefined: l.contains("*UND*"),
                // The seven flag characters after the address; the second is `w` for weak.
                weak: l.get(17..24).is_some_and(|f| f.contains('w')),
                name,
                version,
                hidden,
            })
        })
        .collect()
}

/// A version script's nodes: (node, global patterns).
fn parse_version_script(text: &str) -> Vec<(String, Vec<String>)> {
    // Comments out, then `NODE { global: a; b; local: *; } PARENT;` statements.
    let mut clean = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        clean.push_str(&rest[..i]);
        rest = rest[i..].split_once("*/").map_or("", |(_, r)| r);
    }
    clean.push_str(rest);
    let mut nodes = Vec::new();
    let mut rest = clean.as_str();
    while let Some((head, body)) = rest.split_once('{') {
        let Some((body, after)) = body.split_once('}') else {
            break;
        };
        let node = head.split(';').next_back().unwrap_or("").trim().to_string();
        let mut globals = Vec::new();
        let mut local = false;
        for tok in body.split(';') {
            let mut tok = tok.trim();
            if let Some(t) = tok.strip_prefix("global:") {
                local = false;
                tok = t.trim();
            }
            if let Some(t) = tok.strip_prefix("local:") {
                local = true;
                tok = t.trim();
            }
            if !tok.is_empty() && !local {
                globals.push(tok.to_string());
            }
        }
        nodes.push((node, globals));
        rest = after;
    }
    nodes
}

/// A version-script pattern: a name, or a name ending in `*`.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Every defined symbol is a version node or a global of the node it carries.
fn only_mapped(syms: &[DynSym], nodes: &[(String, Vec<String>)]) -> Result<()> {
    let mut bad = Vec::new();
    let mut count = 0;
    for s in syms.iter().filter(|s| !s.undefined && !s.version_node) {
        count += 1;
        let ok = nodes
            .iter()
            .any(|(n, g)| *n == s.version && !s.hidden && g.iter().any(|p| matches(p, &s.name)));
        if !ok {
            bad.push(format!("{}@{}", s.name, s.version));
        }
    }
    if count == 0 {
        return Err(err!("no defined dynamic symbol at all"));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(err!(
            "{} exported symbols outside the version script: {}",
            bad.len(),
            bad.join(" ")
        ))
    }
}

/// Weak references the C runtime's start files leave unresolved in every shared library.
const WEAK_CRT: &[&str] = &[
    "__gmon_start__",
    "_ITM_deregisterTMCloneTable",
    "_ITM_registerTMCloneTable",
    "__cxa_finalize",
];

/// Every undefined symbol is glibc's or libgcc's (or a weak start-file reference).
fn undefined_only_system(syms: &[DynSym]) -> Result<()> {
    let bad: Vec<String> = syms
        .iter()
        .filter(|s| s.undefined)
        .filter(|s| {
            !(s.version.starts_with("GLIBC_")
                || s.version.starts_with("GCC_")
                || (s.weak && WEAK_CRT.contains(&s.name.as_str())))
        })
        .map(|s| format!("{}@{}", s.name, s.version))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(err!(
            "undefined symbols not from libc/libgcc: {}",
            bad.join(" ")
        ))
    }
}

/// Every (version, name) of `list` is exported as its default version.
fn exports_all(syms: &[DynSym], list: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<String> = list
        .iter()
        .filter(|(v, n)| {
            !syms
                .iter()
                .any(|s| !s.undefined && !s.hidden && s.name == *n && s.version == *v)
        })
        .map(|(v, n)| format!("{n}@{v}"))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(err!(
            "{} of {} missing: {}",
            missing.len(),
            list.len(),
            missing.join(" ")
        ))
    }
}

/// The C program of the link checks: the device list, and where libibverbs came from.
const PROBE_C: &str = r#"/* Written by `cargo xtask capi` (xtask/src/capi.rs). */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* argv[1]: the number of devices expected; argv[2]: "static", or the path of the
   libibverbs.so.1 that must be mapped. */
int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s <devices> <static|libibverbs.so.1 path>\n", argv[0]);
		return 2;
	}
	int want = atoi(argv[1]);
	int num = -1;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list) {
		perror("ibv_get_device_list returned NULL");
		return 1;
	}
	if (num != want || list[num] != NULL) {
		fprintf(stderr, "ibv_get_device_list: %d devices (expected %d), list[num] %p\n",
			num, want, (void *)list[num < 0 ? 0 : num]);
		return 1;
	}
	for (int i = 0; i < num; i++)
		if (!ibv_get_device_name(list[i]) || !ibv_get_device_name(list[i])[0]) {
			fprintf(stderr, "device %d has no name\n", i);
			return 1;
		}
	ibv_free_device_list(list);

	/* Which libibverbs is in the process. */
	FILE *maps = fopen("/proc/self/maps", "r");
	if (!maps) {
		perror("/proc/self/maps");
		return 1;
	}
	char line[4096];
	int ours = 0, other = 0;
	while (fgets(line, sizeof(line), maps)) {
		if (!strstr(line, "libibverbs"))
			continue;
		if (strcmp(argv[2], "static") != 0 && strstr(line, argv[2]))
			ours = 1;
		else
			other = 1;
	}
	fclose(maps);
	if (other || (strcmp(argv[2], "static") != 0 && !ours)) {
		fprintf(stderr, "libibverbs mappings: ours %d, another %d\n", ours, other);
		return 1;
	}
	printf("capi probe: %d devices, libibverbs %s\n", num, argv[2]);
	return 0;
}
"#;

/// How many uverbs devices this machine has (what ibv_get_device_list must list).
fn host_device_count() -> usize {
    std::fs::read_dir("/sys/class/infiniband_verbs")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("uverbs"))
                .count()
        })
        .unwrap_or(0)
}

fn probe_source(libs: &CapiLibs) -> Result<PathBuf> {
    let src = libs.dir.join("probe.c");
    std::fs::write(&src, PROBE_C).context(|| format!("writing {}", src.display()))?;
    Ok(src)
}

fn run_probe(exe: &Path, libs: &CapiLibs, mode: &str) -> Result<()> {
    let mut cmd = Command::new(exe);
    cmd.arg(host_device_count().to_string()).arg(mode);
    if mode != "static" {
        cmd.env("LD_LIBRARY_PATH", &libs.dir);
    }
    let out = output(&mut cmd)?;
    print!("{out}");
    Ok(())
}

fn dynamic_program(libs: &CapiLibs) -> Result<()> {
    let src = probe_source(libs)?;
    let exe = libs.dir.join("probe-dynamic");
    run(Command::new("gcc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-L")
        .arg(&libs.dir)
        .arg("-libverbs"))
    .map_err(|e| err!("compiling the probe (needs gcc, libibverbs-dev): {e}"))?;
    let so = libs
        .libibverbs_so()
        .canonicalize()
        .context(|| "libibverbs.so.1".into())?;
    check_ldd(&exe, libs, &so)?;
    run_probe(&exe, libs, &so.display().to_string())
}

/// `ldd` (with the libraries' directory on LD_LIBRARY_PATH) resolves libibverbs.so.1 to ours.
fn check_ldd(exe: &Path, libs: &CapiLibs, so: &Path) -> Result<()> {
    let ldd = output(
        Command::new("ldd")
            .arg(exe)
            .env("LD_LIBRARY_PATH", &libs.dir),
    )?;
    let line = ldd
        .lines()
        .find(|l| l.contains("libibverbs.so.1"))
        .ok_or_else(|| err!("ldd {}: no libibverbs.so.1:\n{ldd}", exe.display()))?;
    let resolved = line
        .split("=>")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .map(PathBuf::from)
        .and_then(|p| p.canonicalize().ok());
    if resolved.as_deref() == Some(so) {
        Ok(())
    } else {
        Err(err!(
            "ldd {}: `{}`, not {}",
            exe.display(),
            line.trim(),
            so.display()
        ))
    }
}

/// ibv_devices of ibverbs-utils, linked against rdma-core's libibverbs, on ours.
fn rdma_core_binary(libs: &CapiLibs) -> Result<()> {
    let exe = crate::util::find_program("ibv_devices")
        .ok_or_else(|| err!("ibv_devices not found (package ibverbs-utils)"))?;
    let so = libs
        .libibverbs_so()
        .canonicalize()
        .context(|| "libibverbs.so.1".into())?;
    check_ldd(&exe, libs, &so)?;
    let out = output(Command::new(&exe).env("LD_LIBRARY_PATH", &libs.dir))?;
    print!("{out}");
    let listed = out.lines().skip(2).filter(|l| !l.trim().is_empty()).count();
    let want = host_device_count();
    if listed == want {
        Ok(())
    } else {
        Err(err!(
            "ibv_devices listed {listed} devices, expected {want}:\n{out}"
        ))
    }
}

fn static_program(libs: &CapiLibs) -> Result<()> {
    let src = probe_source(libs)?;
    let exe = libs.dir.join("probe-static");
    build_static_c(libs, &src, &exe)?;
    let file = output(Command::new("file").arg(&exe))?;
    if !file.contains("statically linked") {
        return Err(err!("file {}: {}", exe.display(), file.trim()));
    }
    run_probe(&exe, libs, "static")
}

/// The libibverbs symbols (default version, name) that rdma-core's users import, from
/// `objdump -T` of Debian bookworm's packages (rdma-core 44): a program bound to one that
/// libibverbs.so.1 lacks does not start.
pub const IMPORTERS: &[(&str, &[(&str, &str)])] = &[
    ("librdmacm.so.1", LIBRDMACM),
    ("pyverbs (python3-pyverbs)", PYVERBS),
    ("perftest", PERFTEST),
    ("ibverbs-utils", IBVERBS_UTILS),
    ("rdmacm-utils", RDMACM_UTILS),
];

const LIBRDMACM: &[(&str, &str)] = &[
    ("IBVERBS_1.0", "ibv_copy_path_rec_from_kern"),
    ("IBVERBS_1.0", "ibv_copy_qp_attr_from_kern"),
    ("IBVERBS_1.0", "ibv_create_comp_channel"),
    ("IBVERBS_1.0", "ibv_destroy_comp_channel"),
    ("IBVERBS_1.0", "ibv_get_sysfs_path"),
    ("IBVERBS_1.0", "ibv_read_sysfs_file"),
    ("IBVERBS_1.1", "ibv_ack_cq_events"),
    ("IBVERBS_1.1", "ibv_alloc_pd"),
    ("IBVERBS_1.1", "ibv_attach_mcast"),
    ("IBVERBS_1.1", "ibv_close_device"),
    ("IBVERBS_1.1", "ibv_copy_ah_attr_from_kern"),
    ("IBVERBS_1.1", "ibv_create_ah"),
    ("IBVERBS_1.1", "ibv_create_cq"),
    ("IBVERBS_1.1", "ibv_create_qp"),
    ("IBVERBS_1.1", "ibv_create_srq"),
    ("IBVERBS_1.1", "ibv_dealloc_pd"),
    ("IBVERBS_1.1", "ibv_dereg_mr"),
    ("IBVERBS_1.1", "ibv_destroy_ah"),
    ("IBVERBS_1.1", "ibv_destroy_cq"),
    ("IBVERBS_1.1", "ibv_destroy_qp"),
    ("IBVERBS_1.1", "ibv_destroy_srq"),
    ("IBVERBS_1.1", "ibv_detach_mcast"),
    ("IBVERBS_1.1", "ibv_free_device_list"),
    ("IBVERBS_1.1", "ibv_get_cq_event"),
    ("IBVERBS_1.1", "ibv_get_device_guid"),
    ("IBVERBS_1.1", "ibv_get_device_list"),
    ("IBVERBS_1.1", "ibv_modify_qp"),
    ("IBVERBS_1.1", "ibv_open_device"),
    ("IBVERBS_1.1", "ibv_query_device"),
    ("IBVERBS_1.1", "ibv_query_gid"),
    ("IBVERBS_1.1", "ibv_query_port"),
    ("IBVERBS_1.1", "ibv_reg_mr"),
    ("IBVERBS_1.10", "ibv_query_ece"),
    ("IBVERBS_1.10", "ibv_set_ece"),
    ("IBVERBS_1.5", "ibv_get_pkey_index"),
    ("IBVERBS_1.9", "ibv_get_device_index"),
];

const PYVERBS: &[(&str, &str)] = &[
    ("IBVERBS_1.0", "ibv_create_comp_channel"),
    ("IBVERBS_1.0", "ibv_destroy_comp_channel"),
    ("IBVERBS_1.1", "ibv_ack_async_event"),
    ("IBVERBS_1.1", "ibv_ack_cq_events"),
    ("IBVERBS_1.1", "ibv_alloc_pd"),
    ("IBVERBS_1.1", "ibv_close_device"),
    ("IBVERBS_1.1", "ibv_create_ah"),
    ("IBVERBS_1.1", "ibv_create_ah_from_wc"),
    ("IBVERBS_1.1", "ibv_create_cq"),
    ("IBVERBS_1.1", "ibv_create_qp"),
    ("IBVERBS_1.1", "ibv_create_srq"),
    ("IBVERBS_1.1", "ibv_dealloc_pd"),
    ("IBVERBS_1.1", "ibv_dereg_mr"),
    ("IBVERBS_1.1", "ibv_destroy_ah"),
    ("IBVERBS_1.1", "ibv_destroy_cq"),
    ("IBVERBS_1.1", "ibv_destroy_qp"),
    ("IBVERBS_1.1", "ibv_destroy_srq"),
    ("IBVERBS_1.1", "ibv_fork_init"),
    ("IBVERBS_1.1", "ibv_free_device_list"),
    ("IBVERBS_1.1", "ibv_get_async_event"),
    ("IBVERBS_1.1", "ibv_get_cq_event"),
    ("IBVERBS_1.1", "ibv_get_device_guid"),
    ("IBVERBS_1.1", "ibv_get_device_list"),
    ("IBVERBS_1.1", "ibv_get_device_name"),
    ("IBVERBS_1.1", "ibv_modify_qp"),
    ("IBVERBS_1.1", "ibv_modify_srq"),
    ("IBVERBS_1.1", "ibv_open_device"),
    ("IBVERBS_1.1", "ibv_query_device"),
    ("IBVERBS_1.1", "ibv_query_gid"),
    ("IBVERBS_1.1", "ibv_query_pkey"),
    ("IBVERBS_1.1", "ibv_query_port"),
    ("IBVERBS_1.1", "ibv_query_qp"),
    ("IBVERBS_1.1", "ibv_query_srq"),
    ("IBVERBS_1.1", "ibv_reg_mr"),
    ("IBVERBS_1.1", "ibv_rereg_mr"),
    ("IBVERBS_1.1", "ibv_resize_cq"),
    ("IBVERBS_1.10", "ibv_import_device"),
    ("IBVERBS_1.10", "ibv_import_mr"),
    ("IBVERBS_1.10", "ibv_import_pd"),
    ("IBVERBS_1.10", "ibv_query_ece"),
    ("IBVERBS_1.10", "ibv_set_ece"),
    ("IBVERBS_1.10", "ibv_unimport_mr"),
    ("IBVERBS_1.10", "ibv_unimport_pd"),
    ("IBVERBS_1.11", "_ibv_query_gid_ex"),
    ("IBVERBS_1.11", "_ibv_query_gid_table"),
    ("IBVERBS_1.12", "ibv_reg_dmabuf_mr"),
    ("IBVERBS_1.13", "ibv_import_dm"),
    ("IBVERBS_1.13", "ibv_is_fork_initialized"),
    ("IBVERBS_1.13", "ibv_unimport_dm"),
    ("IBVERBS_1.14", "ibv_query_qp_data_in_order"),
    ("IBVERBS_1.6", "ibv_qp_to_qp_ex"),
    ("IBVERBS_1.8", "ibv_reg_mr_iova2"),
    ("IBVERBS_1.9", "ibv_get_device_index"),
    ("IBVERBS_PRIVATE_34", "ibv_query_gid_type"),
];

const PERFTEST: &[(&str, &str)] = &[
    ("IBVERBS_1.0", "ibv_create_comp_channel"),
    ("IBVERBS_1.0", "ibv_destroy_comp_channel"),
    ("IBVERBS_1.1", "ibv_ack_cq_events"),
    ("IBVERBS_1.1", "ibv_alloc_pd"),
    ("IBVERBS_1.1", "ibv_attach_mcast"),
    ("IBVERBS_1.1", "ibv_close_device"),
    ("IBVERBS_1.1", "ibv_create_ah"),
    ("IBVERBS_1.1", "ibv_create_ah_from_wc"),
    ("IBVERBS_1.1", "ibv_create_cq"),
    ("IBVERBS_1.1", "ibv_create_qp"),
    ("IBVERBS_1.1", "ibv_create_srq"),
    ("IBVERBS_1.1", "ibv_dealloc_pd"),
    ("IBVERBS_1.1", "ibv_dereg_mr"),
    ("IBVERBS_1.1", "ibv_destroy_ah"),
    ("IBVERBS_1.1", "ibv_destroy_cq"),
    ("IBVERBS_1.1", "ibv_destroy_qp"),
    ("IBVERBS_1.1", "ibv_destroy_srq"),
    ("IBVERBS_1.1", "ibv_detach_mcast"),
    ("IBVERBS_1.1", "ibv_get_cq_event"),
    ("IBVERBS_1.1", "ibv_get_device_list"),
    ("IBVERBS_1.1", "ibv_get_device_name"),
    ("IBVERBS_1.1", "ibv_modify_qp"),
    ("IBVERBS_1.1", "ibv_open_device"),
    ("IBVERBS_1.1", "ibv_query_device"),
    ("IBVERBS_1.1", "ibv_query_gid"),
    ("IBVERBS_1.1", "ibv_query_pkey"),
    ("IBVERBS_1.1", "ibv_query_port"),
    ("IBVERBS_1.1", "ibv_query_qp"),
    ("IBVERBS_1.1", "ibv_reg_mr"),
    ("IBVERBS_1.11", "_ibv_query_gid_ex"),
    ("IBVERBS_1.6", "ibv_qp_to_qp_ex"),
    ("IBVERBS_1.8", "ibv_reg_mr_iova2"),
];

const IBVERBS_UTILS: &[(&str, &str)] = &[
    ("IBVERBS_1.0", "ibv_create_comp_channel"),
    ("IBVERBS_1.0", "ibv_destroy_comp_channel"),
    ("IBVERBS_1.0", "ibv_read_sysfs_file"),
    ("IBVERBS_1.1", "ibv_ack_async_event"),
    ("IBVERBS_1.1", "ibv_ack_cq_events"),
    ("IBVERBS_1.1", "ibv_alloc_pd"),
    ("IBVERBS_1.1", "ibv_close_device"),
    ("IBVERBS_1.1", "ibv_create_ah"),
    ("IBVERBS_1.1", "ibv_create_cq"),
    ("IBVERBS_1.1", "ibv_create_qp"),
    ("IBVERBS_1.1", "ibv_create_srq"),
    ("IBVERBS_1.1", "ibv_dealloc_pd"),
    ("IBVERBS_1.1", "ibv_dereg_mr"),
    ("IBVERBS_1.1", "ibv_destroy_ah"),
    ("IBVERBS_1.1", "ibv_destroy_cq"),
    ("IBVERBS_1.1", "ibv_destroy_qp"),
    ("IBVERBS_1.1", "ibv_destroy_srq"),
    ("IBVERBS_1.1", "ibv_free_device_list"),
    ("IBVERBS_1.1", "ibv_get_async_event"),
    ("IBVERBS_1.1", "ibv_get_cq_event"),
    ("IBVERBS_1.1", "ibv_get_device_guid"),
    ("IBVERBS_1.1", "ibv_get_device_list"),
    ("IBVERBS_1.1", "ibv_get_device_name"),
    ("IBVERBS_1.1", "ibv_modify_qp"),
    ("IBVERBS_1.1", "ibv_open_device"),
    ("IBVERBS_1.1", "ibv_query_device"),
    ("IBVERBS_1.1", "ibv_query_gid"),
    ("IBVERBS_1.1", "ibv_query_port"),
    ("IBVERBS_1.1", "ibv_query_qp"),
    ("IBVERBS_1.1", "ibv_reg_mr"),
    ("IBVERBS_1.1", "ibv_wc_status_str"),
    ("IBVERBS_1.6", "ibv_qp_to_qp_ex"),
    ("IBVERBS_PRIVATE_34", "ibv_query_gid_type"),
];

const RDMACM_UTILS: &[(&str, &str)] = &[
    ("IBVERBS_1.0", "ibv_create_comp_channel"),
    ("IBVERBS_1.0", "ibv_destroy_comp_channel"),
    ("IBVERBS_1.1", "ibv_ack_cq_events"),
    ("IBVERBS_1.1", "ibv_alloc_pd"),
    ("IBVERBS_1.1", "ibv_create_ah"),
    ("IBVERBS_1.1", "ibv_create_ah_from_wc"),
    ("IBVERBS_1.1", "ibv_create_cq"),
    ("IBVERBS_1.1", "ibv_create_qp"),
    ("IBVERBS_1.1", "ibv_dealloc_pd"),
    ("IBVERBS_1.1", "ibv_dereg_mr"),
    ("IBVERBS_1.1", "ibv_destroy_ah"),
    ("IBVERBS_1.1", "ibv_destroy_cq"),
    ("IBVERBS_1.1", "ibv_destroy_qp"),
    ("IBVERBS_1.1", "ibv_get_cq_event"),
    ("IBVERBS_1.1", "ibv_modify_qp"),
    ("IBVERBS_1.1", "ibv_query_port"),
    ("IBVERBS_1.1", "ibv_query_qp"),
    ("IBVERBS_1.1", "ibv_reg_mr"),
];

/// libefa's symbols pyverbs' efa module imports (rdma-core 44's EFA_1.x versions).
const EFA_IMPORTS: &[(&str, &str)] = &[
    ("EFA_1.0", "efadv_create_driver_qp"),
    ("EFA_1.1", "efadv_create_qp_ex"),
    ("EFA_1.1", "efadv_query_ah"),
    ("EFA_1.1", "efadv_query_device"),
    ("EFA_1.2", "efadv_cq_from_ibv_cq_ex"),
    ("EFA_1.2", "efadv_create_cq"),
];

/// The libmlx5 symbols (default version, name) that programs linked with `-lmlx5` import,
/// from `objdump -T` of Debian bookworm's packages (rdma-core 44, perftest 4.5): pyverbs'
/// `pyverbs/providers/mlx5/*.so` and perftest's `/usr/bin/ib_*` (and `raw_ethernet_*`). A
/// program bound to one that libmlx5.so.1 lacks does not start.
pub const MLX5_IMPORTERS: &[(&str, &[(&str, &str)])] = &[
    ("pyverbs' mlx5 modules", MLX5_PYVERBS),
    ("perftest", MLX5_PERFTEST),
];

const MLX5_PYVERBS: &[(&str, &str)] = &[
    ("MLX5_1.0", "mlx5dv_query_device"),
    ("MLX5_1.1", "mlx5dv_create_cq"),
    ("MLX5_1.10", "mlx5dv_create_mkey"),
    ("MLX5_1.10", "mlx5dv_destroy_mkey"),
    ("MLX5_1.10", "mlx5dv_dr_action_create_dest_ibv_qp"),
    ("MLX5_1.10", "mlx5dv_dr_action_create_dest_table"),
    ("MLX5_1.10", "mlx5dv_dr_action_create_dest_vport"),
    ("MLX5_1.10", "mlx5dv_dr_action_create_drop"),
    ("MLX5_1.10", "mlx5dv_dr_action_create_flow_counter"),
    ("MLX5_1.10", "mlx5dv_dr_action_create_modify_header"),
    ("MLX5_1.10", "mlx5dv_dr_action_create_packet_reformat"),
    ("MLX5_1.10", "mlx5dv_dr_action_create_tag"),
    ("MLX5_1.10", "mlx5dv_dr_action_destroy"),
    ("MLX5_1.10", "mlx5dv_dr_domain_create"),
    ("MLX5_1.10", "mlx5dv_dr_domain_destroy"),
    ("MLX5_1.10", "mlx5dv_dr_domain_sync"),
    ("MLX5_1.10", "mlx5dv_dr_matcher_create"),
    ("MLX5_1.10", "mlx5dv_dr_matcher_destroy"),
    ("MLX5_1.10", "mlx5dv_dr_rule_create"),
    ("MLX5_1.10", "mlx5dv_dr_rule_destroy"),
    ("MLX5_1.10", "mlx5dv_dr_table_create"),
    ("MLX5_1.10", "mlx5dv_dr_table_destroy"),
    ("MLX5_1.10", "mlx5dv_qp_ex_from_ibv_qp_ex"),
    ("MLX5_1.12", "mlx5dv_alloc_var"),
    ("MLX5_1.12", "mlx5dv_dump_dr_domain"),
    ("MLX5_1.12", "mlx5dv_free_var"),
    ("MLX5_1.13", "mlx5dv_pp_alloc"),
    ("MLX5_1.13", "mlx5dv_pp_free"),
    ("MLX5_1.14", "mlx5dv_dr_action_create_default_miss"),
    ("MLX5_1.14", "mlx5dv_modify_qp_lag_port"),
    ("MLX5_1.14", "mlx5dv_query_qp_lag_port"),
    ("MLX5_1.15", "mlx5dv_dr_action_create_dest_devx_tir"),
    ("MLX5_1.16", "mlx5dv_dr_action_create_dest_array"),
    ("MLX5_1.16", "mlx5dv_dr_action_create_flow_sampler"),
    ("MLX5_1.17", "mlx5dv_dr_action_create_pop_vlan"),
    ("MLX5_1.17", "mlx5dv_dr_action_create_push_vlan"),
    ("MLX5_1.17", "mlx5dv_modify_qp_sched_elem"),
    ("MLX5_1.17", "mlx5dv_modify_qp_udp_sport"),
    ("MLX5_1.17", "mlx5dv_sched_leaf_create"),
    ("MLX5_1.17", "mlx5dv_sched_leaf_destroy"),
    ("MLX5_1.17", "mlx5dv_sched_leaf_modify"),
    ("MLX5_1.17", "mlx5dv_sched_node_create"),
    ("MLX5_1.17", "mlx5dv_sched_node_destroy"),
    ("MLX5_1.17", "mlx5dv_sched_node_modify"),
    ("MLX5_1.18", "mlx5dv_reserved_qpn_alloc"),
    ("MLX5_1.18", "mlx5dv_reserved_qpn_dealloc"),
    ("MLX5_1.19", "_mlx5dv_query_port"),
    ("MLX5_1.19", "mlx5dv_devx_umem_reg_ex"),
    ("MLX5_1.19", "mlx5dv_dm_map_op_addr"),
    ("MLX5_1.2", "mlx5dv_init_obj"),
    ("MLX5_1.20", "_mlx5dv_mkey_check"),
    ("MLX5_1.20", "mlx5dv_dr_domain_allow_duplicate_rules"),
    ("MLX5_1.20", "mlx5dv_map_ah_to_qp"),
    ("MLX5_1.20", "mlx5dv_qp_cancel_posted_send_wrs"),
    ("MLX5_1.21", "mlx5dv_crypto_login"),
    ("MLX5_1.21", "mlx5dv_crypto_login_query_state"),
    ("MLX5_1.21", "mlx5dv_crypto_logout"),
    ("MLX5_1.21", "mlx5dv_dci_stream_id_reset"),
    ("MLX5_1.21", "mlx5dv_dek_create"),
    ("MLX5_1.21", "mlx5dv_dek_destroy"),
    ("MLX5_1.21", "mlx5dv_dek_query"),
    ("MLX5_1.21", "mlx5dv_dr_action_create_dest_ib_port"),
    ("MLX5_1.21", "mlx5dv_dr_matcher_set_layout"),
    ("MLX5_1.21", "mlx5dv_get_vfio_device_list"),
    ("MLX5_1.21", "mlx5dv_vfio_get_events_fd"),
    ("MLX5_1.21", "mlx5dv_vfio_process_events"),
    ("MLX5_1.23", "mlx5dv_devx_alloc_msi_vector"),
    ("MLX5_1.23", "mlx5dv_devx_create_eq"),
    ("MLX5_1.23", "mlx5dv_devx_destroy_eq"),
    ("MLX5_1.23", "mlx5dv_devx_free_msi_vector"),
    ("MLX5_1.24", "mlx5dv_crypto_login_create"),
    ("MLX5_1.24", "mlx5dv_crypto_login_destroy"),
    ("MLX5_1.24", "mlx5dv_crypto_login_query"),
    ("MLX5_1.3", "mlx5dv_create_qp"),
    ("MLX5_1.4", "mlx5dv_get_clock_info"),
    ("MLX5_1.6", "mlx5dv_create_flow"),
    ("MLX5_1.6", "mlx5dv_create_flow_matcher"),
    ("MLX5_1.6", "mlx5dv_destroy_flow_matcher"),
    ("MLX5_1.7", "mlx5dv_create_flow_action_packet_reformat"),
    ("MLX5_1.7", "mlx5dv_devx_alloc_uar"),
    ("MLX5_1.7", "mlx5dv_devx_free_uar"),
    ("MLX5_1.7", "mlx5dv_devx_general_cmd"),
    ("MLX5_1.7", "mlx5dv_devx_obj_create"),
    ("MLX5_1.7", "mlx5dv_devx_obj_destroy"),
    ("MLX5_1.7", "mlx5dv_devx_obj_modify"),
    ("MLX5_1.7", "mlx5dv_devx_obj_query"),
    ("MLX5_1.7", "mlx5dv_devx_query_eqn"),
    ("MLX5_1.7", "mlx5dv_devx_umem_dereg"),
    ("MLX5_1.7", "mlx5dv_devx_umem_reg"),
    ("MLX5_1.7", "mlx5dv_open_device"),
    ("MLX5_1.8", "mlx5dv_is_supported"),
];

const MLX5_PERFTEST: &[(&str, &str)] = &[
    ("MLX5_1.10", "mlx5dv_create_mkey"),
    ("MLX5_1.10", "mlx5dv_destroy_mkey"),
    ("MLX5_1.10", "mlx5dv_qp_ex_from_ibv_qp_ex"),
    ("MLX5_1.21", "mlx5dv_crypto_login"),
    ("MLX5_1.21", "mlx5dv_dek_create"),
    ("MLX5_1.21", "mlx5dv_dek_destroy"),
    ("MLX5_1.3", "mlx5dv_create_qp"),
    ("MLX5_1.7", "mlx5dv_devx_general_cmd"),
    ("MLX5_1.7", "mlx5dv_open_device"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objdump_lines_become_symbols() {
        let text = "\
libibverbs.so.1:     file format elf64-x86-64

DYNAMIC SYMBOL TABLE:
0000000000000000 g    DO *ABS*\t0000000000000000  IBVERBS_1.1 IBVERBS_1.1
000000000000db00 g    DF .text\t000000000000012e  IBVERBS_1.1 ibv_close_device
0000000000020ab0 g    DF .text\t0000000000000050 (IBVERBS_1.0) ibv_get_device_list
0000000000000000  w   D  *UND*\t0000000000000000  Base        __gmon_start__
0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.2.5) free
";
        let s = parse_objdump_t(text);
        assert_eq!(s.len(), 5);
        assert!(s[0].version_node && !s[0].undefined);
        assert_eq!(
            (s[1].name.as_str(), s[1].version.as_str()),
            ("ibv_close_device", "IBVERBS_1.1")
        );
        assert!(!s[1].hidden && !s[1].version_node);
        assert!(s[2].hidden && s[2].version == "IBVERBS_1.0");
        assert!(s[3].undefined && s[3].weak && s[3].version == "Base");
        assert!(s[4].undefined && !s[4].weak && s[4].version == "GLIBC_2.2.5");
        assert!(undefined_only_system(&s).is_ok());
        let nodes = parse_version_script(
            "/* c */ IBVERBS_1.0 {\n global:\n  a;\n local: *;\n};\n\
             IBVERBS_1.1 { global: ibv_close_device; } IBVERBS_1.0;\n\
             UVERBS_PRIVATE_EFA_1 { global: uverbs_efadv_*; };",
        );
        assert_eq!(
            nodes,
            vec![
                ("IBVERBS_1.0".to_string(), vec!["a".to_string()]),
                (
                    "IBVERBS_1.1".to_string(),
                    vec!["ibv_close_device".to_string()]
                ),
                (
                    "UVERBS_PRIVATE_EFA_1".to_string(),
                    vec!["uverbs_efadv_*".to_string()]
                ),
            ]
        );
        // The hidden ibv_get_device_list@IBVERBS_1.0 is not in the script.
        let err = only_mapped(&s, &nodes).unwrap_err().0;
        assert!(err.contains("ibv_get_device_list@IBVERBS_1.0"), "{err}");
        assert!(only_mapped(&s[..2], &nodes).is_ok());
        assert!(matches("uverbs_efadv_*", "uverbs_efadv_query_device"));
        assert!(!matches("uverbs_efadv_*", "efadv_query_device"));
        let missing = exports_all(
            &s,
            &[
                ("IBVERBS_1.1", "ibv_close_device"),
                ("IBVERBS_1.0", "ibv_get_device_list"),
            ],
        )
        .unwrap_err()
        .0;
        assert!(
            missing.contains("1 of 2 missing: ibv_get_device_list@IBVERBS_1.0"),
            "{missing}"
        );
    }

    #[test]
    fn the_version_script_gives_each_imported_symbol_its_node() {
        let text = std::fs::read_to_string(workspace_root().join("capi/libibverbs.map")).unwrap();
        let nodes = parse_version_script(&text);
        for (importer, list) in IMPORTERS {
            for (v, n) in *list {
                let in_nodes: Vec<&str> = nodes
                    .iter()
                    .filter(|(_, g)| g.iter().any(|p| matches(p, n)))
                    .map(|(node, _)| node.as_str())
                    .collect();
                assert_eq!(in_nodes, [*v], "{importer} imports {n}@{v}");
            }
        }
        // No name is in two nodes, and every node but the first has `local:` from it.
        let mut all: Vec<&String> = nodes.iter().flat_map(|(_, g)| g).collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a symbol in two version nodes");
        assert!(text.contains("local: *;"));
    }

    #[test]
    fn the_mlx5_version_script_gives_each_imported_symbol_its_node() {
        let text = std::fs::read_to_string(workspace_root().join("capi/libmlx5.map")).unwrap();
        let nodes = parse_version_script(&text);
        for (importer, list) in MLX5_IMPORTERS {
            for (v, n) in *list {
                let in_nodes: Vec<&str> = nodes
                    .iter()
                    .filter(|(_, g)| g.iter().any(|p| matches(p, n)))
                    .map(|(node, _)| node.as_str())
                    .collect();
                assert_eq!(in_nodes, [*v], "{importer} imports {n}@{v}");
            }
        }
    }

    #[test]
    fn native_static_libs_note_is_parsed() {
        let lines = vec![
            "note: link against the following native artifacts".to_string(),
            "note: native-static-libs: -lgcc_s -lutil -lc".to_string(),
        ];
        assert_eq!(
            parse_native_static_libs(&lines).unwrap(),
            ["-lgcc_s", "-lutil", "-lc"]
        );
        assert_eq!(
            static_libs(&parse_native_static_libs(&lines).unwrap()),
            ["-lutil"]
        );
        assert!(parse_native_static_libs(&lines[..1]).is_none());
    }
}
