//! The generic files name no provider: a test that reads them.
//!
//! "Generic" is every file under `src/` outside the providers' own modules (`src/rxe`,
//! `src/efa`) and this seam (`src/provider`, where the dispatch enums and arms live). In
//! their code (comments aside: user documentation may say what EFA refuses) no identifier or
//! string names a provider, so a third provider cannot silently take another's branch. The
//! only names allowed are listed in [`ALLOWED`], each with its reason. Unit-test modules
//! (`#[cfg(test)] mod`) are skipped: they build synthetic devices of a given driver.

use std::path::{Path, PathBuf};

/// (file relative to `src/`, line as written after trimming) that may name a provider.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "lib.rs",
        "mod efa;",
        "the provider modules are declared at the crate root",
    ),
    (
        "lib.rs",
        "mod rxe;",
        "the provider modules are declared at the crate root",
    ),
    (
        "lib.rs",
        "pub use efa::{",
        "EFA's direct verbs (efadv_*) and their types are public API, re-exported at the root",
    ),
];

/// Whether an identifier or word names a provider: one of its parts (split at `_`, digits and
/// lower-to-upper case changes) is `rxe`, `efa` or `efadv` in any case (`RxeQp`,
/// `uverbs_efa`, `RDMA_DRIVER_RXE`, `efadv_query_device`, `rxe0`), which leaves the words that
/// only contain the letters (`Default`, `EFAULT`, `DeviceFatal`).
fn names_a_provider(word: &str) -> bool {
    let mut part = String::new();
    let mut prev_lower = false;
    let mut parts = Vec::new();
    for c in word.chars() {
        if c == '_' || c.is_ascii_digit() || (c.is_ascii_uppercase() && prev_lower) {
            parts.push(std::mem::take(&mut part));
        }
        if c.is_ascii_alphabetic() {
            part.push(c.to_ascii_lowercase());
        }
        prev_lower = c.is_ascii_lowercase();
    }
    parts.push(part);
    parts
        .iter()
        .any(|p| matches!(p.as_str(), "rxe" | "efa" | "efadv"))
}

/// The offending lines of one file: (line number, line).
fn offenders(rel: &str, text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_allowed_block = false;
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let t = line.trim();
        if t == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|(_, l)| l.trim().starts_with("mod "))
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        if in_allowed_block {
            in_allowed_block = !t.ends_with("};");
            continue;
        }
        if ALLOWED.iter().any(|&(f, l, _)| f == rel && l == t) {
            in_allowed_block = t.ends_with('{');
            continue;
        }
        // A trailing comment is documentation too.
        let code = t.split(" // ").next().unwrap_or(t);
        if code
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(names_a_provider)
        {
            out.push((i + 1, line.to_string()));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Reads the source tree, so it runs where the tree is: on the host (`host_only`: the VM
/// harness skips it, it has only the test executables).
#[test]
fn generic_files_name_no_provider_host_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut found = Vec::new();
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        if ["rxe/", "efa/", "provider/"]
            .iter()
            .any(|p| rel.starts_with(p))
        {
            continue;
        }
        checked += 1;
        let text = std::fs::read_to_string(f).expect("read a source file");
        for (n, line) in offenders(&rel, &text) {
            found.push(format!("src/{rel}:{n}: {}", line.trim()));
        }
    }
    assert!(
        checked > 30,
        "only {checked} generic files found under {src:?}"
    );
    assert!(
        found.is_empty(),
        "generic files name a provider (move the code behind the provider traits):\n{}",
        found.join("\n")
    );
}

/// The check itself catches what it is for, and lets through what it must.
#[test]
fn the_check_sees_provider_names_and_only_them() {
    let bad =
        "fn f(c: &Ctx) {\n    if let CqRing::Efa(r) = &c.ring {}\n    let s = \"on rxe\";\n}\n";
    assert_eq!(
        offenders("cq.rs", bad)
            .iter()
            .map(|o| o.0)
            .collect::<Vec<_>>(),
        [2, 3]
    );
    let good = "/// EFA refuses solicited-only.\nfn f() -> Errno { let _ = Default::default(); \
                Errno::FAULT } // EFAULT on efa\n#[cfg(test)]\nmod tests { const D: &str = \"rxe0\"; }\n";
    assert!(
        offenders("cq.rs", good).is_empty(),
        "{:?}",
        offenders("cq.rs", good)
    );
    for w in [
        "RxeQp",
        "uverbs_efa",
        "RDMA_DRIVER_RXE",
        "efadv_query_device",
        "rxe0",
        "EFA",
    ] {
        assert!(names_a_provider(w), "{w}");
    }
    for w in ["Default", "EFAULT", "DeviceFatal", "defaults", "prefab"] {
        assert!(!names_a_provider(w), "{w}");
    }
    let lib = "mod efa;\npub use efa::{\n    EfaWc,\n};\nuse crate::efa::X;\n";
    assert_eq!(
        offenders("lib.rs", lib),
        [(5, "use crate::efa::X;".to_string())]
    );
}
