//! Harness shared by `c_layout_host_only.rs` and `c_layout_providers_host_only.rs`: collects layout facts from
//! the Rust side, asks a C compiler for the same facts from the kernel headers, compares.
//!
//! How it works
//! - `check_struct!` / `check_const!` record Rust facts (size, alignment, field offsets and
//!   sizes, constant values) together with the C expression that yields the same fact.
//! - Items declared `newer` (present in the newest uapi we mirror, absent from Linux 6.1's
//!   headers) or `older` (removed from newer headers) are first *probed*: one compile of a
//!   file holding one probe per line; probes whose line has an error are absent from the
//!   headers on this machine and reported as "not checked" with the reason. Everything else
//!   must compile: a typo in a C name fails the test.
//! - One C program prints every fact; any difference fails the test with a list.
//!
//! Environment
//! - `CC`: C compiler (default `cc`).
//! - `UVERBS_C_LAYOUT_INCLUDE`: extra `-I` directory searched before the system headers,
//!   e.g. `/work/ref/rdma-core/kernel-headers` to check against the newest uapi.
//! - `UVERBS_SKIP_C_LAYOUT`: skip (loudly) when no compiler or no headers exist. Without it
//!   a missing compiler or header is a test failure, never a silent pass.

#![allow(dead_code)] // each test binary uses a different subset

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::Command;

/// Why an item may be missing from the installed headers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Era {
    /// Must exist in the installed headers.
    Always,
    /// Newer than the installed (6.1) headers: checked only if the headers have it.
    Newer,
    /// Only in older headers (removed or renamed later): checked only if present.
    Older,
    /// Exists in every header version but its size changed (e.g. a `reserved` array that a
    /// newer field was carved out of): its offset is checked, its size is reported unchecked.
    Resized,
}

struct Fact {
    /// Human label, e.g. `IbUverbsCmdHdr.in_words offset`.
    label: String,
    /// C expression evaluating to the fact (cast to long long).
    c_expr: String,
    rust: i128,
    era: Era,
    /// Name reported when the item is skipped (struct, `struct.field` or constant).
    item: String,
}

/// Collected facts of one test.
pub struct Layout {
    headers: Vec<&'static str>,
    facts: Vec<Fact>,
    structs: usize,
    fields: usize,
    consts: usize,
    /// Values with no uapi header to compare against, reported by name.
    not_in_uapi: Vec<(&'static str, &'static str)>,
}

/// Size of the field a projection closure points at (no unsafe, no value needed).
pub fn field_size<T, F>(_project: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// Strips the `r#` of raw identifiers (`r#type` is the C field `type`).
pub fn c_name(rust_name: &str) -> &str {
    rust_name.strip_prefix("r#").unwrap_or(rust_name)
}

impl Layout {
    pub fn new(headers: &[&'static str]) -> Self {
        Layout {
            headers: headers.to_vec(),
            facts: Vec::new(),
            structs: 0,
            fields: 0,
            consts: 0,
            not_in_uapi: Vec::new(),
        }
    }

    fn push(&mut self, label: String, c_expr: String, rust: i128, era: Era, item: String) {
        self.facts.push(Fact {
            label,
            c_expr,
            rust,
            era,
            item,
        });
    }

    pub fn record_struct(&mut self, rust: &str, c_type: &str, era: Era, size: usize, align: usize) {
        self.structs += 1;
        let item = c_type.to_string();
        self.push(
            format!("{rust} size"),
            format!("sizeof({c_type})"),
            size as i128,
            era,
            item.clone(),
        );
        self.push(
            format!("{rust} align"),
            format!("_Alignof({c_type})"),
            align as i128,
            era,
            item,
        );
    }

    #[allow(clippy::too_many_arguments)]
    pub fn record_field(
        &mut self,
        rust: &str,
        c_type: &str,
        era: Era,
        field: &str,
        offset: usize,
        size: usize,
    ) {
        self.fields += 1;
        let f = c_name(field);
        let item = format!("{c_type}.{f}");
        let offset_era = if era == Era::Resized {
            Era::Always
        } else {
            era
        };
        self.push(
            format!("{rust}.{field} offset"),
            format!("offsetof({c_type}, {f})"),
            offset as i128,
            offset_era,
            item.clone(),
        );
        self.push(
            format!("{rust}.{field} size"),
            format!("sizeof(((({c_type} *)0)->{f}))"),
            size as i128,
            era,
            item,
        );
    }

    pub fn record_const(&mut self, name: &str, value: i128, era: Era) {
        self.consts += 1;
        self.push(
            name.to_string(),
            format!("({name})"),
            value,
            era,
            name.to_string(),
        );
    }

    /// A value we define that no uapi header carries (kernel-internal enums): listed in the
    /// report so nobody mistakes it for checked.
    pub fn not_in_uapi(&mut self, name: &'static str, source: &'static str) {
        self.not_in_uapi.push((name, source));
    }

    fn prelude(&self) -> String {
        let mut s = String::from("#include <stddef.h>\n#include <stdio.h>\n");
        for h in &self.headers {
            let _ = writeln!(s, "#include <{h}>");
        }
        s
    }

    /// Compiles, runs, compares; panics with every mismatch. Returns the report text.
    pub fn run(self, test_name: &str) -> String {
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
        let skip = std::env::var_os("UVERBS_SKIP_C_LAYOUT").is_some();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("c_layout_{test_name}"));
        std::fs::create_dir_all(&dir).expect("create CARGO_TARGET_TMPDIR subdir");
        let mut cflags: Vec<String> = vec!["-std=gnu11".into(), "-w".into()];
        if let Some(inc) = std::env::var_os("UVERBS_C_LAYOUT_INCLUDE") {
            cflags.push(format!("-I{}", PathBuf::from(inc).display()));
        }

        // 0. Compiler and headers present?
        let pre = dir.join("headers.c");
        std::fs::write(
            &pre,
            format!("{}int main(void) {{ return 0; }}\n", self.prelude()),
        )
        .expect("write headers.c");
        match Command::new(&cc)
            .args(&cflags)
            .arg("-fsyntax-only")
            .arg(&pre)
            .output()
        {
            Err(e) => {
                let msg = format!(
                    "{test_name}: cannot run C compiler `{cc}` ({e}); install gcc (or set CC), \
                     or set UVERBS_SKIP_C_LAYOUT=1 to skip this layout check explicitly"
                );
                if skip {
                    report(&format!("SKIPPED (UVERBS_SKIP_C_LAYOUT): {msg}\n"));
                    return String::new();
                }
                panic!("{msg}");
            }
            Ok(out) if !out.status.success() => {
                let msg = format!(
                    "{test_name}: the kernel uapi headers {:?} do not compile with `{cc}` \
                     (install linux-libc-dev, or set UVERBS_SKIP_C_LAYOUT=1 to skip \
                     explicitly):\n{}",
                    self.headers,
                    String::from_utf8_lossy(&out.stderr)
                );
                if skip {
                    report(&format!("SKIPPED (UVERBS_SKIP_C_LAYOUT): {msg}\n"));
                    return String::new();
                }
                panic!("{msg}");
            }
            Ok(_) => {}
        }

        // 1. Probe newer/older items: one line per probe, errors name the line.
        let optional: Vec<usize> = (0..self.facts.len())
            .filter(|&i| matches!(self.facts[i].era, Era::Newer | Era::Older))
            .collect();
        let mut absent_items = std::collections::BTreeSet::new();
        if !optional.is_empty() {
            let mut probe = self.prelude();
            let first_line = probe.lines().count() + 2;
            probe.push_str("void probe(void) {\n");
            for &i in &optional {
                let _ = writeln!(probe, "(void)({});", self.facts[i].c_expr);
            }
            probe.push_str("}\n");
            let path = dir.join("probe.c");
            std::fs::write(&path, &probe).expect("write probe.c");
            let out = Command::new(&cc)
                .args(&cflags)
                .arg("-fsyntax-only")
                .arg("-fmax-errors=0")
                .arg(&path)
                .output()
                .expect("run C compiler for probe");
            let stderr = String::from_utf8_lossy(&out.stderr);
            let path_s = path.display().to_string();
            for line in stderr.lines() {
                let Some(rest) = line.strip_prefix(&format!("{path_s}:")) else {
                    continue;
                };
                if !line.contains("error") {
                    continue;
                }
                let Some(n) = rest.split(':').next().and_then(|n| n.parse::<usize>().ok()) else {
                    continue;
                };
                if n >= first_line && n - first_line < optional.len() {
                    absent_items.insert(self.facts[optional[n - first_line]].item.clone());
                }
            }
        }

        // 2. The real program: every fact that is present.
        let checked: Vec<&Fact> = self
            .facts
            .iter()
            .filter(|f| match f.era {
                Era::Always => true,
                Era::Newer | Era::Older => !absent_items.contains(&f.item),
                Era::Resized => false,
            })
            .collect();
        let mut prog = self.prelude();
        prog.push_str("int main(void) {\n");
        for f in &checked {
            let _ = writeln!(prog, "  printf(\"%lld\\n\", (long long)({}));", f.c_expr);
        }
        prog.push_str("  return 0;\n}\n");
        let src = dir.join("layout.c");
        let exe = dir.join("layout");
        std::fs::write(&src, &prog).expect("write layout.c");
        let out = Command::new(&cc)
            .args(&cflags)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .output()
            .expect("run C compiler");
        assert!(
            out.status.success(),
            "{test_name}: layout program does not compile (a C name in the check table is \
             wrong, or an item missing from these headers is not marked newer/older):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = Command::new(&exe).output().expect("run layout program");
        assert!(run.status.success(), "layout program failed: {run:?}");
        let stdout = String::from_utf8(run.stdout).expect("layout output is UTF-8");
        let values: Vec<i128> = stdout
            .lines()
            .map(|l| l.parse().expect("layout program prints integers"))
            .collect();
        assert_eq!(
            values.len(),
            checked.len(),
            "layout program printed too few values"
        );

        let mut mismatches = String::new();
        for (f, c) in checked.iter().zip(&values) {
            if f.rust != *c {
                let _ = writeln!(
                    mismatches,
                    "  {}: Rust {} != C {} ({})",
                    f.label, f.rust, c, f.c_expr
                );
            }
        }

        // 3. Report.
        let mut rep = String::new();
        let optional_present = self
            .facts
            .iter()
            .filter(|f| matches!(f.era, Era::Newer | Era::Older) && !absent_items.contains(&f.item))
            .map(|f| f.item.clone())
            .collect::<std::collections::BTreeSet<_>>();
        let _ = writeln!(
            rep,
            "{test_name}: compared {} facts with the C headers ({} structs, {} fields, {} \
             constants declared; headers: {:?}{})",
            checked.len(),
            self.structs,
            self.fields,
            self.consts,
            self.headers,
            std::env::var("UVERBS_C_LAYOUT_INCLUDE")
                .map(|d| format!(", -I{d}"))
                .unwrap_or_default()
        );
        if !optional_present.is_empty() {
            let _ = writeln!(
                rep,
                "{test_name}: newer/older-era items present in these headers and checked: {}",
                optional_present.len()
            );
        }
        let newer_absent: Vec<&String> = absent_items
            .iter()
            .filter(|i| {
                self.facts
                    .iter()
                    .any(|f| &f.item == *i && f.era == Era::Newer)
            })
            .collect();
        let older_absent: Vec<&String> = absent_items
            .iter()
            .filter(|i| {
                self.facts
                    .iter()
                    .any(|f| &f.item == *i && f.era == Era::Older)
            })
            .collect();
        if !newer_absent.is_empty() {
            let _ = writeln!(
                rep,
                "{test_name}: not checked: newer than installed headers ({}):",
                newer_absent.len()
            );
            wrap(&mut rep, newer_absent.iter().map(|s| s.as_str()));
        }
        if !older_absent.is_empty() {
            let _ = writeln!(
                rep,
                "{test_name}: not checked: only in older headers, absent here ({}):",
                older_absent.len()
            );
            wrap(&mut rep, older_absent.iter().map(|s| s.as_str()));
        }
        let resized: Vec<&str> = self
            .facts
            .iter()
            .filter(|f| f.era == Era::Resized)
            .map(|f| f.item.as_str())
            .collect();
        if !resized.is_empty() {
            let _ = writeln!(
                rep,
                "{test_name}: size not checked (offset is): differs between header versions ({}):",
                resized.len()
            );
            wrap(&mut rep, resized.into_iter());
        }
        if !self.not_in_uapi.is_empty() {
            let _ = writeln!(
                rep,
                "{test_name}: not checked: no uapi header defines them ({}):",
                self.not_in_uapi.len()
            );
            let mut by_src: Vec<&str> = self.not_in_uapi.iter().map(|(_, s)| *s).collect();
            by_src.dedup();
            for src in by_src {
                let _ = writeln!(rep, "  from {src}:");
                wrap(
                    &mut rep,
                    self.not_in_uapi
                        .iter()
                        .filter(|(_, s)| *s == src)
                        .map(|(n, _)| *n),
                );
            }
        }
        report(&rep);
        let _ = std::fs::write(dir.join("report.txt"), &rep);
        assert!(
            mismatches.is_empty(),
            "{test_name}: Rust layout differs from the C headers:\n{mismatches}"
        );
        rep
    }
}

/// Appends `names` comma-separated, wrapped at about 100 columns, indented.
fn wrap<'a>(rep: &mut String, names: impl Iterator<Item = &'a str>) {
    let mut line = String::from("   ");
    for n in names {
        if line.len() + n.len() > 100 {
            let _ = writeln!(rep, "{line}");
            line = String::from("   ");
        }
        line.push(' ');
        line.push_str(n);
        line.push(',');
    }
    if !line.trim().is_empty() {
        let _ = writeln!(rep, "{}", line.trim_end_matches(','));
    }
}

/// Writes straight to the process's stderr, past libtest's output capture, so the list of
/// unchecked items is visible in every `cargo test` run.
fn report(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// `check_struct!(layout, RustType, "C type", field, field, ...; newer: f, ...; rust_only: f, ...)`
///
/// Records size, alignment and every listed field's offset and size. The field list must be
/// complete: an exhaustive pattern over the Rust struct makes a forgotten field a compile
/// error. `newer:` fields exist only in headers newer than 6.1 (probed, reported when
/// absent); `rust_only:` fields have no C counterpart (spelled-out implicit padding) and are
/// only named for the exhaustiveness check; `resized:` fields changed size between header
/// versions (offset checked, size reported). Prefix the C type with `newer` to mark the
/// whole struct newer: `check_struct!(l, T, newer "struct x", ...)`.
macro_rules! check_struct {
    ($l:expr, $ty:ident, newer $c:literal $(, $f:ident)* $(; newer: $($nf:ident),*)? $(; resized: $($zf:ident),*)? $(; rust_only: $($rf:ident),*)? $(;)?) => {
        check_struct!(@era $l, $ty, $c, $crate::common::Era::Newer $(, $f)* ; newer: $($($nf),*)? ; resized: $($($zf),*)? ; rust_only: $($($rf),*)?)
    };
    ($l:expr, $ty:ident, $c:literal $(, $f:ident)* $(; newer: $($nf:ident),*)? $(; resized: $($zf:ident),*)? $(; rust_only: $($rf:ident),*)? $(;)?) => {
        check_struct!(@era $l, $ty, $c, $crate::common::Era::Always $(, $f)* ; newer: $($($nf),*)? ; resized: $($($zf),*)? ; rust_only: $($($rf),*)?)
    };
    (@era $l:expr, $ty:ident, $c:literal, $era:expr $(, $f:ident)* ; newer: $($nf:ident),* ; resized: $($zf:ident),* ; rust_only: $($rf:ident),*) => {{
        #[allow(dead_code, clippy::unneeded_field_pattern)]
        fn _every_field_is_listed(x: &$ty) {
            let $ty { $($f: _,)* $($nf: _,)* $($zf: _,)* $($rf: _,)* } = x;
        }
        let era = $era;
        let l: &mut $crate::common::Layout = $l;
        l.record_struct(
            stringify!($ty),
            $c,
            era,
            ::core::mem::size_of::<$ty>(),
            ::core::mem::align_of::<$ty>(),
        );
        $(
            l.record_field(
                stringify!($ty), $c, era, stringify!($f),
                ::core::mem::offset_of!($ty, $f),
                $crate::common::field_size(|s: &$ty| &s.$f),
            );
        )*
        $(
            l.record_field(
                stringify!($ty), $c, $crate::common::Era::Newer, stringify!($nf),
                ::core::mem::offset_of!($ty, $nf),
                $crate::common::field_size(|s: &$ty| &s.$nf),
            );
        )*
        $(
            l.record_field(
                stringify!($ty), $c, $crate::common::Era::Resized, stringify!($zf),
                ::core::mem::offset_of!($ty, $zf),
                $crate::common::field_size(|s: &$ty| &s.$zf),
            );
        )*
    }};
}

/// `check_const!(layout, NAME)`; `check_const!(layout, newer NAME)` for constants newer than
/// the 6.1 headers; `check_const!(layout, older NAME)` for ones removed from newer headers.
macro_rules! check_const {
    ($l:expr, newer $($name:ident),+ $(,)?) => {
        $( ($l).record_const(stringify!($name), $name as i128, $crate::common::Era::Newer); )+
    };
    ($l:expr, older $($name:ident),+ $(,)?) => {
        $( ($l).record_const(stringify!($name), $name as i128, $crate::common::Era::Older); )+
    };
    ($l:expr, $($name:ident),+ $(,)?) => {
        $( ($l).record_const(stringify!($name), $name as i128, $crate::common::Era::Always); )+
    };
}

/// `check_not_in_uapi!(layout, "where it is defined", NAME, ...)`: constants we define that no
/// uapi header carries. They cannot be compared with C here; naming them keeps them in the
/// report (and makes a removed or renamed constant a compile error).
#[allow(unused_macros)] // used by c_layout_host_only.rs only
macro_rules! check_not_in_uapi {
    ($l:expr, $src:literal, $($name:ident),+ $(,)?) => {
        $( let _ = $name; ($l).not_in_uapi(stringify!($name), $src); )+
    };
}
