//! Compares every row of [`uverbs_capi::abi::layout`] (each struct's size, each field's
//! offset and size) with rdma-core's installed `<infiniband/verbs.h>` (libibverbs-dev), and
//! every row of [`uverbs_capi::efa_abi::efa_layout`] (the efadv.h rows rdma-core 44 and
//! master share) with its `<infiniband/efadv.h>`, by compiling and running a generated C
//! program with gcc (`CC` to use another compiler).
//!
//! `UVERBS_C_LAYOUT_INCLUDE=<dir>` puts `<dir>` before the system headers, e.g. a directory
//! with rdma-core master's `infiniband/` headers: fields master added (see [`MASTER_ONLY`])
//! are then checked too. With rdma-core 44's header they are reported by name as not checked.
//!
//! `verbs_context` is compared relative to its `context` field: programs find its operations
//! at negative offsets from the `ibv_context` they hold, and master prepends operations.
//!
//! Adding a header's table is one line in [`TABLES`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use uverbs_capi::abi::LayoutRow;

/// A table of rows (`uverbs_capi::abi::layout`, ...).
type Table = fn() -> Vec<LayoutRow>;

/// The header each table is checked against, and the table.
const TABLES: &[(&str, Table)] = &[
    ("infiniband/verbs.h", uverbs_capi::abi::layout),
    ("infiniband/sa.h", uverbs_capi::abi::sa_layout),
    ("infiniband/efadv.h", uverbs_capi::efa_abi::efa_layout),
];

/// Fields of rdma-core master that rdma-core 44's header lacks: (struct, field, the struct's
/// size changes with it). When the installed header lacks the field, its row (and the size
/// row, if the field grew the struct) is reported as not checked.
const MASTER_ONLY: &[(&str, &str, bool)] = &[
    ("ibv_port_attr", "active_speed_ex", true),
    ("ibv_qp_ex", "wr_flush", true),
    // Prepended: verbs_context is compared relative to `context`, so its size is unaffected.
    ("verbs_context", "free_buf", false),
    ("verbs_context", "alloc_dmah", false),
];

/// Structs compared relative to this field's offset.
const RELATIVE_TO: &[(&str, &str)] = &[("verbs_context", "context")];

/// C types that are unions.
const UNIONS: &[&str] = &["ibv_gid"];

fn c_type(name: &str) -> String {
    if UNIONS.contains(&name) {
        format!("union {name}")
    } else {
        format!("struct {name}")
    }
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "gcc".to_string())
}

fn work_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn compile(src: &Path, exe: &Path) -> Result<(), String> {
    let mut cmd = Command::new(cc());
    cmd.args(["-Wall", "-Werror", "-o"]).arg(exe).arg(src);
    if let Some(inc) = std::env::var_os("UVERBS_C_LAYOUT_INCLUDE") {
        cmd.arg("-I").arg(inc);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{}` ({e}): install gcc (or set CC)", cc()));
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Whether the header has `structname.field` (a one-line program compiles).
fn header_has(dir: &Path, header: &str, st: &str, field: &str) -> bool {
    let src = dir.join(format!("has_{st}_{field}.c"));
    std::fs::write(
        &src,
        format!(
            "#include <stddef.h>\n#include <{header}>\nint main(void) {{ return (int)offsetof({}, {field}); }}\n",
            c_type(st)
        ),
    )
    .unwrap();
    compile(&src, &dir.join("has")).is_ok()
}

#[test]
fn abi_structs_match_installed_verbs_h_host_only() {
    let dir = work_dir("capi_layout");
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for (header, table) in TABLES {
        let rows = table();
        let absent: Vec<(&str, &str, bool)> = MASTER_ONLY
            .iter()
            .copied()
            .filter(|(st, f, _)| rows.iter().any(|r| r.0 == *st && r.1 == *f))
            .filter(|(st, f, _)| !header_has(&dir, header, st, f))
            .collect();
        let skipped = |r: &LayoutRow| {
            absent
                .iter()
                .any(|(st, f, grows)| r.0 == *st && (r.1 == *f || (*grows && r.1.is_empty())))
        };
        for r in rows.iter().filter(|r| skipped(r)) {
            println!(
                "not checked: {}.{} (rdma-core master; not in the installed {header})",
                r.0,
                if r.1.is_empty() { "<size>" } else { r.1 }
            );
        }
        let rows: Vec<&LayoutRow> = rows.iter().filter(|r| !skipped(r)).collect();
        let mut c = format!(
            "#include <stddef.h>\n#include <stdio.h>\n#include <{header}>\nint main(void)\n{{\n"
        );
        for (st, field, _, _) in &rows {
            let t = c_type(st);
            if field.is_empty() {
                writeln!(c, "\tprintf(\"%zu %zu\\n\", (size_t)0, sizeof({t}));").unwrap();
            } else {
                writeln!(
                    c,
                    "\tprintf(\"%zu %zu\\n\", offsetof({t}, {field}), sizeof((({t} *)0)->{field}));"
                )
                .unwrap();
            }
        }
        c.push_str("\treturn 0;\n}\n");
        let stem = header.replace(['/', '.'], "_");
        let src = dir.join(format!("{stem}.c"));
        let exe = dir.join(&stem);
        std::fs::write(&src, &c).unwrap();
        if let Err(e) = compile(&src, &exe) {
            panic!("{} does not compile against {header}:\n{e}", src.display());
        }
        let out = Command::new(&exe)
            .output()
            .expect("running the layout program");
        assert!(out.status.success(), "{} failed: {:?}", exe.display(), out);
        let text = String::from_utf8(out.stdout).unwrap();
        let c_rows: Vec<(usize, usize)> = text
            .lines()
            .map(|l| {
                let (a, b) = l.split_once(' ').unwrap();
                (a.parse().unwrap(), b.parse().unwrap())
            })
            .collect();
        assert_eq!(c_rows.len(), rows.len(), "one output line per row");
        // Offsets of the RELATIVE_TO structs, from the rows themselves.
        let base = |st: &str, c: bool| -> usize {
            let Some((_, f)) = RELATIVE_TO.iter().find(|(s, _)| *s == st) else {
                return 0;
            };
            let i = rows
                .iter()
                .position(|r| r.0 == st && r.1 == *f)
                .unwrap_or_else(|| panic!("{st} has no row for {f}"));
            if c {
                c_rows[i].0
            } else {
                rows[i].2
            }
        };
        for (r, (c_off, c_size)) in rows.iter().zip(&c_rows) {
            let (st, field, rust_off, rust_size) = **r;
            checked += 1;
            let (rb, cb) = (base(st, false), base(st, true));
            if field.is_empty() {
                // Relative structs: the size from the base field on.
                if rust_size - rb != c_size - cb {
                    mismatches.push(format!(
                        "sizeof({}): Rust {} C {}{}",
                        c_type(st),
                        rust_size - rb,
                        c_size - cb,
                        if rb != 0 { " (from `context` on)" } else { "" }
                    ));
                }
                continue;
            }
            let (ro, co) = (
                rust_off as isize - rb as isize,
                *c_off as isize - cb as isize,
            );
            if ro != co || rust_size != *c_size {
                mismatches.push(format!(
                    "{st}.{field}: Rust offset {ro} size {rust_size}, C offset {co} size {c_size}{}",
                    if rb != 0 { " (offsets relative to `context`)" } else { "" }
                ));
            }
        }
    }
    println!("{checked} rows checked");
    assert!(
        mismatches.is_empty(),
        "{} layout mismatches with the C headers:\n  {}",
        mismatches.len(),
        mismatches.join("\n  ")
    );
}

/// The data-path structs the exported functions hand straight to uverbs: `ibv_wc` is
/// `uverbs::Wc`, `ibv_sge` is `uverbs::Sge`, and the table checks them field by field.
#[test]
fn wc_and_sge_are_uverbs_types_in_the_table_host_only() {
    let rows = uverbs_capi::abi::layout();
    let size = |st: &str| {
        rows.iter()
            .find(|r| r.0 == st && r.1.is_empty())
            .unwrap_or_else(|| panic!("no size row for {st}"))
            .3
    };
    assert_eq!(size("ibv_wc"), core::mem::size_of::<uverbs::Wc>());
    assert_eq!(size("ibv_sge"), core::mem::size_of::<uverbs::Sge>());
    for (st, n) in [("ibv_wc", 13), ("ibv_sge", 3)] {
        assert_eq!(
            rows.iter().filter(|r| r.0 == st && !r.1.is_empty()).count(),
            n,
            "every field of struct {st} is a row"
        );
    }
}
