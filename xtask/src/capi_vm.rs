//! `cargo xtask capi-vm`: uverbs' C ABI (`capi/`: libibverbs.so.1, libefa.so.1, libibverbs.a,
//! and the libmlx5.so.1 placeholder that pyverbs and perftest load)
//! under programs written for rdma-core, in the soft-RoCE VM. One VM boot per kernel runs:
//!
//! 1. rdma-core's own test suite (Debian 12's `python3-pyverbs`, 44.0-2) module by module,
//!    first on rdma-core's libibverbs with its rxe provider, then with `LD_LIBRARY_PATH`
//!    starting at our libraries; the two runs are compared test by test (a test that passes
//!    on rdma-core must pass on uverbs). Then its EFA modules on our libraries built with
//!    `--features efa-model` and `UVERBS_EFA_MODEL=2` (the EFA device model), on `efa_model0`
//!    (`--dev`: the device list puts rxe0 first, on which the EFA tests skip).
//! 2. rdma-core's C programs in pairs on rxe0 (a server in the background, a client against
//!    it): the `ibv_*_pingpong`s with their buffer check (`-c`), perftest's `ib_*` tools and
//!    librdmacm's `rping -V`, `ucmatose` and `udaddy`; each with rdma-core on both sides (the
//!    control), a uverbs server with an rdma-core client, and the reverse.
//! 3. `xtask/capi-c/static_pingpong.c` linked statically against our `libibverbs.a`, run in a
//!    chroot holding nothing but the executable and `/dev`, `/sys`, `/proc`; the same source
//!    linked dynamically against rdma-core runs beside it as the control.
//!
//! The pyverbs userland (python3.11 with its standard library, pyverbs, the tests) is
//! downloaded with `apt-get download` and unpacked with `dpkg-deb -x` into the cache; the host
//! libraries its ELF files need are copied in as `ldd` names them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::guest::{Net, Payload};
use crate::harness::Harness;
use crate::kernel::Series;
use crate::testrun::{Item, Report};
use crate::util::{err, output, Context, Result};
use crate::vm::{Echo, Run};

/// Debian 12's packages for rdma-core's Python tests: pyverbs (and the tests, in
/// /usr/share/doc/rdma-core/tests), the interpreter, its shared library and standard library.
/// Their other dependencies (libssl, libffi, libexpat, rdma-core's libraries, ...) come from
/// the host through `ldd`.
pub const PYVERBS_PACKAGES: &[&str] = &[
    "python3-pyverbs",
    "python3.11-minimal",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "libpython3.11",
];

/// Where the tests are, in the package and in the guest.
const TESTS_DIR: &str = "usr/share/doc/rdma-core/tests";
/// Parts of the standard library no test imports (about a third of its size).
const STDLIB_LEFT_OUT: &[&str] = &[
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
    "config-3.11-x86_64-linux-gnu",
];
/// rdma-core's EFA test modules: run on the EFA device model.
const EFA_MODULES: &[&str] = &["test_efadv", "test_efa_srd"];

const RUNNER_PY: &str = include_str!("../capi-vm/pyverbs_runner.py");
const PAIR_SH: &str = include_str!("../capi-vm/pair.sh");
const STATIC_PINGPONG_C: &str = "xtask/capi-c/static_pingpong.c";

/// Time limit of one pyverbs run in the guest.
const PYVERBS_LIMIT_SECS: u32 = 900;
/// Time limit of one program pair.
const PAIR_LIMIT_SECS: u32 = 120;
/// Hard limit for one kernel's boot.
const BOOT_TIMEOUT: Duration = Duration::from_secs(3600);

/// What `cargo xtask capi-vm` runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub kernels: Vec<Series>,
    pub pyverbs: bool,
    pub programs: bool,
    /// Write the pyverbs comparison (markdown) here besides target/capi-vm/.
    pub doc: Option<PathBuf>,
    /// A check of the harness itself: rdma-core's own libibverbs.so.1, libefa.so.1 and
    /// libmlx5.so.1 stand in for ours (the comparison must then come out even and every pair
    /// pass).
    pub rdma_core_as_uverbs: bool,
}

/// `cargo xtask capi-vm [--kernel K]... [--no-pyverbs] [--no-programs] [--doc PATH]`.
pub fn command(args: &[String]) -> Result<bool> {
    let mut o = Options {
        kernels: Vec::new(),
        pyverbs: true,
        programs: true,
        doc: None,
        rdma_core_as_uverbs: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--kernel" => {
                let v = it
                    .next()
                    .ok_or_else(|| err!("--kernel needs 6.1 or 6.12"))?;
                o.kernels.push(Series::parse(v)?);
            }
            "--no-pyverbs" => o.pyverbs = false,
            "--no-programs" => o.programs = false,
            "--rdma-core-as-uverbs" => o.rdma_core_as_uverbs = true,
            "--doc" => {
                let v = it.next().ok_or_else(|| err!("--doc needs a file name"))?;
                o.doc = Some(v.into());
            }
            other => return Err(err!("`cargo xtask capi-vm`: unknown option `{other}`")),
        }
    }
    if o.kernels.is_empty() {
        o.kernels = Series::ALL.to_vec();
    }
    crate::prereq::ensure()?;
    crate::prereq::ensure_capi()?;
    let mut h = Harness::new(None);
    let mut timings = Vec::new();
    let reports = sections(&mut h, &o, &mut timings)?;
    for r in &reports {
        r.print();
    }
    println!("\ntimings: {}", timings.join("; "));
    Ok(crate::testrun::print_overall(&reports))
}

/// One report per kernel (the `cargo xtask test` step), with the wall time of each boot in
/// `timings`.
pub fn sections(h: &mut Harness, o: &Options, timings: &mut Vec<String>) -> Result<Vec<Report>> {
    let t = Instant::now();
    let libs = crate::capi::build(&[])?;
    let efa_libs = crate::capi::build(&["efa-model"])?;
    let out_dir = crate::util::workspace_root().join("target/capi-vm");
    std::fs::create_dir_all(&out_dir).context(|| format!("creating {}", out_dir.display()))?;
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for (guest, l) in [("capi/default", &libs), ("capi/efa-model", &efa_libs)] {
        // libmlx5.so.1 (the placeholder of capi/mlx5-stub) because pyverbs and perftest are
        // linked against it: Debian's cannot load on our libibverbs.so.1.
        for f in ["libibverbs.so.1", "libefa.so.1", "libmlx5.so.1"] {
            let host = if o.rdma_core_as_uverbs {
                Path::new("/usr/lib/x86_64-linux-gnu").join(f)
            } else {
                l.dir.join(f)
            };
            if f == "libmlx5.so.1" && !host.is_file() {
                // A tree without capi/mlx5-stub: the guest finds Debian's (which fails to load).
                continue;
            }
            files.push((format!("{guest}/{f}"), host));
        }
    }
    let mut build_items = Vec::new();
    if o.programs {
        let src = crate::util::workspace_root().join(STATIC_PINGPONG_C);
        let exe = out_dir.join("static_pingpong");
        let _ = std::fs::remove_file(&exe);
        match crate::capi::build_static_c(&libs, &src, &exe) {
            Ok(()) => {
                build_items.push(static_check(&exe));
                files.push(("static-root/static_pingpong".into(), exe));
            }
            // The guest step then reports the executable missing.
            Err(e) => build_items.push(Item::fail(
                "capi::static_pingpong links against libibverbs.a",
                e.to_string(),
            )),
        }
        let control = out_dir.join("static_pingpong-rdma-core");
        crate::util::run(
            Command::new("gcc")
                .args(["-O2", "-Wall", "-Werror", "-o"])
                .arg(&control)
                .arg(&src)
                .arg("-libverbs"),
        )?;
        files.push(("usr/bin/static_pingpong-rdma-core".into(), control));
        files.push(pair_file()?);
    }
    if o.pyverbs {
        let tree = pyverbs_tree()?;
        files.extend(pyverbs_files(&tree)?);
    }
    timings.push(format!(
        "capi-vm builds and image files: {:.0} s",
        t.elapsed().as_secs_f64()
    ));
    let mut script = String::from(GUEST_SETUP);
    if o.pyverbs {
        script.push_str(&pyverbs_steps());
    }
    if o.programs {
        script.push_str(&program_steps());
    }
    script.push_str("exit $rc\n");
    let mut reports = Vec::new();
    for &series in &o.kernels {
        let t = Instant::now();
        let payload = Payload {
            net: Net::Veth {
                addr: "10.99.0.1/24".into(),
            },
            script: script.clone(),
            files: files.clone(),
        };
        let echo = Echo {
            prefix: format!("[capi {}] ", series.label()),
            step_banners: true,
            boot_messages: false,
        };
        let release = h.kernel(series)?.release;
        let title = format!("uverbs C ABI, kernel {release}");
        println!("\nxtask: ==== {title}: pyverbs and rdma-core's programs over uverbs ====");
        let run = h.run(series, &payload, BOOT_TIMEOUT, echo)?;
        println!("xtask: {}", run.describe());
        let mut r = Report::new(&title);
        for i in &build_items {
            r.push(i.clone());
        }
        if o.pyverbs {
            let cmp = Comparison::from_run(&run);
            let md = cmp.markdown(&release);
            let path = out_dir.join(format!("pyverbs-{}.md", series.label()));
            std::fs::write(&path, &md).context(|| format!("writing {}", path.display()))?;
            println!("xtask: the pyverbs comparison is in {}", path.display());
            if let Some(doc) = &o.doc {
                let mut all = std::fs::read_to_string(doc).unwrap_or_default();
                all.push_str(&md);
                std::fs::write(doc, all).context(|| format!("writing {}", doc.display()))?;
            }
            println!("{}", cmp.counts_line());
            cmp.items(series, &mut r);
            efa_items(&run, series, &mut r);
        }
        if o.programs {
            program_items(&run, series, &mut r);
        }
        if !run.success() && r.passed() {
            r.push(Item::fail("capi VM run", run.describe()));
        }
        timings.push(format!(
            "capi-vm {}: boot {} s, run {:.0} s (wall {:.0} s)",
            series.label(),
            run.boot_secs
                .map(|b| format!("{b:.1}"))
                .unwrap_or_else(|| "-".into()),
            run.total_secs,
            t.elapsed().as_secs_f64()
        ));
        reports.push(r);
    }
    Ok(reports)
}

/// `file` on the host says the executable is statically linked.
fn static_check(exe: &Path) -> Item {
    let name = "capi::static_pingpong is statically linked";
    match output(Command::new("file").arg(exe)) {
        Ok(s) if s.contains("statically linked") => Item::pass(name),
        Ok(s) => Item::fail(name, format!("`file` says: {}", s.trim())),
        Err(e) => Item::fail(name, e.to_string()),
    }
}

/// Guest set-up before the steps: the tmpfs the multi-process tests need, python3, and
/// iproute2's `ip` for a bare `ip` (the tests run `ip -j addr show`, which busybox's applet
/// cannot answer).
const GUEST_SETUP: &str = "\
rc=0
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
ln -sf /usr/bin/ip /bin/ip
[ -e /usr/bin/python3.11 ] && ln -sf python3.11 /usr/bin/python3
mkdir -p /static-root/dev /static-root/sys /static-root/proc
mount --bind /dev /static-root/dev && mount -t sysfs sysfs /static-root/sys && mount -t proc proc /static-root/proc
";

/// The three pyverbs steps.
fn pyverbs_steps() -> String {
    let run = "/usr/bin/python3.11 /lib/uverbs/pyverbs_runner.py --dev rxe0";
    let mut s = String::new();
    let _ = writeln!(
        s,
        "step pyverbs:rdma-core {PYVERBS_LIMIT_SECS} env PATH=/usr/bin:/bin {run} || rc=1"
    );
    let _ = writeln!(
        s,
        "step pyverbs:uverbs {PYVERBS_LIMIT_SECS} env PATH=/usr/bin:/bin LD_LIBRARY_PATH=/capi/default:$LD_LIBRARY_PATH {run} || rc=1"
    );
    let _ = writeln!(
        s,
        "step pyverbs:uverbs-efa-model {PYVERBS_LIMIT_SECS} env PATH=/usr/bin:/bin UVERBS_EFA_MODEL=2 LD_LIBRARY_PATH=/capi/efa-model:$LD_LIBRARY_PATH /usr/bin/python3.11 /lib/uverbs/pyverbs_runner.py --dev efa_model0 {} || rc=1",
        EFA_MODULES.join(" ")
    );
    s
}

/// A program run as server and client: (name, what the client waits for, server, client).
/// `@GID@` is rxe0's RoCE v2 GID index; the client's server is 127.0.0.1 (verbs tools) or
/// rxe0's address 10.99.0.1 (rdma_cm).
fn programs() -> Vec<(&'static str, &'static str, String, String)> {
    let mut v = Vec::new();
    for (tool, extra) in [
        ("ibv_rc_pingpong", ""),
        ("ibv_uc_pingpong", ""),
        // UD messages must fit rxe0's MTU (1024 on the veth).
        ("ibv_ud_pingpong", " -s 512"),
        ("ibv_srq_pingpong", ""),
    ] {
        let cmd = format!("/usr/bin/{tool} -d rxe0 -g @GID@ -n 100 -c{extra}");
        v.push((tool, "18515", cmd.clone(), format!("{cmd} 127.0.0.1")));
    }
    for tool in [
        "ib_write_bw",
        "ib_read_lat",
        "ib_send_lat",
        "ib_send_bw",
        "ib_write_lat",
        "ib_read_bw",
        "ib_atomic_bw",
    ] {
        let cmd = format!("/usr/bin/{tool} -d rxe0 -x @GID@ -n 200 -F");
        v.push((tool, "18515", cmd.clone(), format!("{cmd} 127.0.0.1")));
    }
    v.push((
        "rping",
        "retry",
        "/usr/bin/rping -s -a 10.99.0.1 -p 7174 -C 10 -V".into(),
        "/usr/bin/rping -c -a 10.99.0.1 -p 7174 -C 10 -V".into(),
    ));
    v.push((
        "ucmatose",
        "retry",
        "/usr/bin/ucmatose -b 10.99.0.1".into(),
        "/usr/bin/ucmatose -s 10.99.0.1".into(),
    ));
    v.push((
        "udaddy",
        "retry",
        "/usr/bin/udaddy -b 10.99.0.1".into(),
        "/usr/bin/udaddy -s 10.99.0.1".into(),
    ));
    v
}

/// The roles of each program pair: (step suffix, server's library, client's library).
const ROLES: [(&str, &str, &str); 3] = [
    ("rdma-core", "rdma-core", "rdma-core"),
    ("uverbs-server", "uverbs", "rdma-core"),
    ("uverbs-client", "rdma-core", "uverbs"),
];

fn program_steps() -> String {
    let q = crate::guest::sh_quote;
    let mut s = String::new();
    for (name, wait, server, client) in programs() {
        for (role, sl, cl) in ROLES {
            let _ = writeln!(
                s,
                "step pair:{name}:{role} {PAIR_LIMIT_SECS} /lib/uverbs/pair.sh {sl} {cl} {wait} {} {} || rc=1",
                q(&server),
                q(&client)
            );
        }
    }
    let _ = writeln!(
        s,
        "step static:rdma-core 60 sh -c '. /lib/uverbs/lib.sh; /usr/bin/static_pingpong-rdma-core rxe0 $(roce_v2_ipv4_gid rxe0)' || rc=1"
    );
    let _ = writeln!(
        s,
        "step static:uverbs 60 sh -c '. /lib/uverbs/lib.sh; g=$(roce_v2_ipv4_gid rxe0); echo in the chroot: $(ls /static-root); chroot /static-root /static_pingpong rxe0 $g' || rc=1"
    );
    s
}

/// Items for the program steps: a step passes when it exited 0.
fn program_items(run: &Run, series: Series, r: &mut Report) {
    let mut names: Vec<(String, String)> = Vec::new();
    for (name, ..) in programs() {
        for (role, sl, cl) in ROLES {
            names.push((
                format!("pair:{name}:{role}"),
                format!("capi::{name} server {sl}, client {cl} [{}]", series.label()),
            ));
        }
    }
    names.push((
        "static:rdma-core".into(),
        format!(
            "capi::static_pingpong.c on rdma-core (dynamic, control) [{}]",
            series.label()
        ),
    ));
    names.push((
        "static:uverbs".into(),
        format!(
            "capi::static_pingpong.c static on libibverbs.a [{}]",
            series.label()
        ),
    ));
    for (step, item) in names {
        r.push(match run.step(&step) {
            None => Item::fail(&item, format!("did not run: {}", run.describe())),
            Some(s) if s.timed_out => Item::fail(&item, format!("timed out after {:.0} s", s.secs)),
            Some(s) if s.status == Some(0) => Item::pass(&item),
            Some(s) => {
                let pair = s
                    .output
                    .iter()
                    .find_map(|l| l.split_once("UVERBS-PAIR ").map(|(_, p)| p.to_string()));
                Item::fail(
                    &item,
                    format!(
                        "exit status {:?}{}",
                        s.status,
                        pair.map(|p| format!(" ({p})")).unwrap_or_default()
                    ),
                )
            }
        });
    }
}

/// Items for the EFA-model run: every test of rdma-core's EFA modules that ran must pass, an
/// import error fails, and at least one test must have passed (otherwise the model listed no
/// device and every test skipped).
fn efa_items(run: &Run, series: Series, r: &mut Report) {
    let k = series.label();
    let step = "pyverbs:uverbs-efa-model";
    let Some(s) = run.step(step) else {
        r.push(Item::fail(
            &format!("pyverbs EFA model [{k}]"),
            format!("did not run: {}", run.describe()),
        ));
        return;
    };
    let res = PyRun::parse(&s.output);
    for (m, why) in &res.import_errors {
        r.push(Item::fail(
            &format!("pyverbs::{m} [efa-model {k}]"),
            format!("import error: {why}"),
        ));
    }
    for (id, o) in &res.tests {
        let name = format!("pyverbs::{id} [efa-model {k}]");
        r.push(match o {
            Outcome::Ok | Outcome::XFail => Item::pass(&name),
            Outcome::Skip(why) => Item::skip(&name, why.clone()),
            other => Item::fail(&name, other.describe()),
        });
    }
    if !res.tests.values().any(|o| matches!(o, Outcome::Ok)) {
        r.push(Item::fail(
            &format!("pyverbs EFA model: some test passes [{k}]"),
            format!(
                "no test of {} passed on the EFA model ({} ran; exit status {:?})",
                EFA_MODULES.join(", "),
                res.tests.len(),
                s.status
            ),
        ));
    }
}

/// One test's result, from an `UVERBS-PYTEST` line.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Ok,
    Skip(String),
    Fail(String),
    Error(String),
    XFail,
    XPass,
    /// The test's module did not import.
    NotImported(String),
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::Ok => "ok".into(),
            Outcome::Skip(r) => format!("skipped: {r}"),
            Outcome::Fail(r) => format!("FAIL: {r}"),
            Outcome::Error(r) => format!("ERROR: {r}"),
            Outcome::XFail => "expected failure".into(),
            Outcome::XPass => "unexpected success".into(),
            Outcome::NotImported(r) => format!("module import error: {r}"),
        }
    }

    fn short(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Skip(_) => "skip",
            Outcome::Fail(_) => "FAIL",
            Outcome::Error(_) => "ERROR",
            Outcome::XFail => "xfail",
            Outcome::XPass => "xpass",
            Outcome::NotImported(_) => "import error",
        }
    }
}

/// The parsed results of one pyverbs run.
#[derive(Debug, Default)]
pub struct PyRun {
    /// Test id (`tests.test_cq.CQTest.test_resize_cq`) -> outcome.
    pub tests: BTreeMap<String, Outcome>,
    /// Module -> the import error's last line.
    pub import_errors: BTreeMap<String, String>,
    /// Modules that ran to the end.
    pub done: BTreeSet<String>,
}

impl PyRun {
    pub fn parse(lines: &[String]) -> PyRun {
        let mut r = PyRun::default();
        for l in lines {
            if let Some((_, rest)) = l.split_once("UVERBS-PYTEST ") {
                let mut w = rest.splitn(3, ' ');
                let (Some(kind), Some(id)) = (w.next(), w.next()) else {
                    continue;
                };
                let why = w.next().unwrap_or("").trim().to_string();
                let why = why
                    .strip_prefix('\'')
                    .and_then(|s| s.strip_suffix('\''))
                    .map(str::to_string)
                    .unwrap_or(why);
                let o = match kind {
                    "ok" => Outcome::Ok,
                    "skip" => Outcome::Skip(why),
                    "fail" => Outcome::Fail(why),
                    "error" => Outcome::Error(why),
                    "xfail" => Outcome::XFail,
                    "xpass" => Outcome::XPass,
                    _ => continue,
                };
                // A subtest failure after the test's own line: the worse one stays.
                match r.tests.get(id) {
                    Some(Outcome::Fail(_) | Outcome::Error(_)) => {}
                    _ => {
                        r.tests.insert(id.to_string(), o);
                    }
                }
            } else if let Some((_, rest)) = l.split_once("UVERBS-PYMODULE ") {
                let mut w = rest.splitn(3, ' ');
                match (w.next(), w.next()) {
                    (Some(m), Some("import-error")) => {
                        r.import_errors
                            .insert(m.to_string(), w.next().unwrap_or("").trim().to_string());
                    }
                    (Some(m), Some("done")) => {
                        r.done.insert(m.to_string());
                    }
                    _ => {}
                }
            }
        }
        r
    }

    /// The outcome of `id`, or its module's import error, or None (not run at all).
    fn outcome(&self, id: &str) -> Option<Outcome> {
        if let Some(o) = self.tests.get(id) {
            return Some(o.clone());
        }
        let module = module_of(id);
        self.import_errors
            .get(&module)
            .map(|e| Outcome::NotImported(e.clone()))
    }

    fn count(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for o in self.tests.values() {
            match o {
                Outcome::Ok | Outcome::XFail => c.0 += 1,
                Outcome::Skip(_) => c.1 += 1,
                _ => c.2 += 1,
            }
        }
        c
    }
}

/// `tests.test_cq` of `tests.test_cq.CQTest.test_resize_cq`.
fn module_of(id: &str) -> String {
    id.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// The two runs of the suite, rdma-core's and ours, side by side.
pub struct Comparison {
    pub rdma_core: PyRun,
    pub uverbs: PyRun,
    /// Steps that did not run or ended badly: (step, what happened).
    pub problems: Vec<(String, String)>,
}

/// How one test compares.
#[derive(Debug, PartialEq)]
enum Row {
    BothOk,
    BothSkip(String),
    /// rdma-core's result, ours; `regression` when rdma-core passed and we did not.
    Differ {
        rdma_core: Outcome,
        uverbs: Option<Outcome>,
        regression: bool,
    },
}

impl Comparison {
    pub fn from_run(run: &Run) -> Comparison {
        let mut problems = Vec::new();
        let mut parse = |step: &str| match run.step(step) {
            Some(s) => {
                if s.timed_out {
                    problems.push((step.to_string(), format!("timed out after {:.0} s", s.secs)));
                }
                PyRun::parse(&s.output)
            }
            None => {
                problems.push((step.to_string(), format!("did not run: {}", run.describe())));
                PyRun::default()
            }
        };
        let rdma_core = parse("pyverbs:rdma-core");
        let uverbs = parse("pyverbs:uverbs");
        Comparison {
            rdma_core,
            uverbs,
            problems,
        }
    }

    fn rows(&self) -> Vec<(String, Row)> {
        let ids: BTreeSet<&String> = self
            .rdma_core
            .tests
            .keys()
            .chain(self.uverbs.tests.keys())
            .collect();
        ids.into_iter()
            .map(|id| {
                let a = self.rdma_core.outcome(id);
                let b = self.uverbs.outcome(id);
                let row = match (&a, &b) {
                    (Some(Outcome::Ok), Some(Outcome::Ok)) => Row::BothOk,
                    (Some(Outcome::Skip(x)), Some(Outcome::Skip(y))) if x == y => {
                        Row::BothSkip(x.clone())
                    }
                    _ => Row::Differ {
                        rdma_core: a.clone().unwrap_or(Outcome::NotImported("not run".into())),
                        uverbs: b.clone(),
                        regression: a == Some(Outcome::Ok) && b != Some(Outcome::Ok),
                    },
                };
                (id.clone(), row)
            })
            .collect()
    }

    pub fn counts_line(&self) -> String {
        let (a, b) = (self.rdma_core.count(), self.uverbs.count());
        format!(
            "pyverbs: rdma-core {} ok, {} skipped, {} failed/errors, {} modules not imported; \
             uverbs {} ok, {} skipped, {} failed/errors, {} modules not imported",
            a.0,
            a.1,
            a.2,
            self.rdma_core.import_errors.len(),
            b.0,
            b.1,
            b.2,
            self.uverbs.import_errors.len()
        )
    }

    /// Report items: a test passing on rdma-core must pass on uverbs; a test that does not
    /// pass on rdma-core is listed as not run with its reason (or passes, if ours passes).
    pub fn items(&self, series: Series, r: &mut Report) {
        let k = series.label();
        for (step, why) in &self.problems {
            r.push(Item::fail(&format!("pyverbs {step} [{k}]"), why.clone()));
        }
        if self.rdma_core.count().0 == 0 {
            r.push(Item::fail(
                &format!("pyverbs on rdma-core [{k}]"),
                "rdma-core's own run passed no test: the VM's pyverbs set-up is broken",
            ));
        }
        // Tests that pass nowhere are counted per reason (one skipped item each), not one item
        // per test: the markdown table lists them test by test.
        let mut not_passing: BTreeMap<String, usize> = BTreeMap::new();
        for (id, row) in self.rows() {
            let name = format!("pyverbs::{id} [{k}]");
            match row {
                Row::BothOk => r.push(Item::pass(&name)),
                Row::BothSkip(why) => {
                    *not_passing
                        .entry(format!("skipped on rdma-core and uverbs: {why}"))
                        .or_default() += 1
                }
                Row::Differ {
                    rdma_core,
                    uverbs,
                    regression,
                } => {
                    let ours = uverbs.map_or("not run".to_string(), |o| o.describe());
                    if regression {
                        r.push(Item::fail(
                            &name,
                            format!("ok on rdma-core, {ours} on uverbs"),
                        ));
                    } else if uverbs_ok(&ours) {
                        r.push(Item::pass(&name));
                    } else {
                        *not_passing
                            .entry(format!(
                                "rdma-core: {}; uverbs: {ours}",
                                rdma_core.describe()
                            ))
                            .or_default() += 1;
                    }
                }
            }
        }
        for (why, n) in not_passing {
            let name = format!("pyverbs: {n} test(s), {} [{k}]", cell(&why));
            r.push(Item::skip(&name, "passes on neither library"));
        }
    }

    /// The markdown section for docs/testing.md: counts, differences test by test, what both
    /// skip (by reason), and per module how many pass on both.
    pub fn markdown(&self, kernel: &str) -> String {
        let rows = self.rows();
        let mut md = String::new();
        let (a, b) = (self.rdma_core.count(), self.uverbs.count());
        let _ = writeln!(md, "### Kernel {kernel}\n");
        let _ = writeln!(
            md,
            "| library | ok | skipped | FAIL/ERROR | modules not imported |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|");
        let _ = writeln!(
            md,
            "| rdma-core 44 (librxe) | {} | {} | {} | {} |",
            a.0,
            a.1,
            a.2,
            self.rdma_core.import_errors.len()
        );
        let _ = writeln!(
            md,
            "| uverbs (`capi/`) | {} | {} | {} | {} |\n",
            b.0,
            b.1,
            b.2,
            self.uverbs.import_errors.len()
        );
        let both_ok = rows.iter().filter(|(_, r)| *r == Row::BothOk).count();
        let both_skip = rows
            .iter()
            .filter(|(_, r)| matches!(r, Row::BothSkip(_)))
            .count();
        let differ: Vec<_> = rows
            .iter()
            .filter(|(_, r)| matches!(r, Row::Differ { .. }))
            .collect();
        let regressions = differ
            .iter()
            .filter(|(_, r)| {
                matches!(
                    r,
                    Row::Differ {
                        regression: true,
                        ..
                    }
                )
            })
            .count();
        let _ = writeln!(
            md,
            "{} tests: {both_ok} pass on both, {both_skip} skip on both for the same reason, {} differ \
             ({regressions} pass on rdma-core only).\n",
            rows.len(),
            differ.len()
        );
        for (step, why) in &self.problems {
            let _ = writeln!(md, "- step `{step}`: {why}");
        }
        let errs = |run: &PyRun, who: &str, md: &mut String| {
            for (m, e) in &run.import_errors {
                let _ = writeln!(md, "- {who}: `{m}` did not import: {}", cell(e));
            }
        };
        errs(&self.rdma_core, "rdma-core", &mut md);
        errs(&self.uverbs, "uverbs", &mut md);
        if !differ.is_empty() {
            let _ = writeln!(md, "\nDifferences, test by test:\n");
            let _ = writeln!(md, "| test | rdma-core | uverbs | reason |");
            let _ = writeln!(md, "|---|---|---|---|");
            for (id, r) in &differ {
                if let Row::Differ {
                    rdma_core, uverbs, ..
                } = r
                {
                    let why = [Some(rdma_core), uverbs.as_ref()]
                        .into_iter()
                        .flatten()
                        .filter(|o| !matches!(o, Outcome::Ok | Outcome::XFail | Outcome::XPass))
                        .map(|o| o.describe())
                        .collect::<Vec<_>>()
                        .join("; ");
                    let _ = writeln!(
                        md,
                        "| `{}` | {} | {} | {} |",
                        id.trim_start_matches("tests."),
                        rdma_core.short(),
                        uverbs.as_ref().map_or("not run", |o| o.short()),
                        cell(&why)
                    );
                }
            }
        }
        let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (id, r) in &rows {
            if let Row::BothSkip(why) = r {
                by_reason.entry(why).or_default().push(id);
            }
        }
        if !by_reason.is_empty() {
            let _ = writeln!(md, "\nSkipped on both, by reason:\n");
            let _ = writeln!(md, "| reason | tests |");
            let _ = writeln!(md, "|---|---|");
            for (why, ids) in by_reason {
                let _ = writeln!(md, "| {} | {} |", cell(why), ids.len());
            }
        }
        let mut per_module: BTreeMap<String, usize> = BTreeMap::new();
        for (id, r) in &rows {
            if *r == Row::BothOk {
                *per_module.entry(module_of(id)).or_default() += 1;
            }
        }
        if !per_module.is_empty() {
            let _ = writeln!(md, "\nPassing on both, per module:\n");
            let list: Vec<String> = per_module
                .iter()
                .map(|(m, n)| format!("`{}` {n}", m.trim_start_matches("tests.")))
                .collect();
            let _ = writeln!(md, "{}\n", list.join(", "));
        }
        md
    }
}

fn uverbs_ok(described: &str) -> bool {
    described == "ok" || described == "expected failure"
}

/// Text for one markdown table cell.
fn cell(s: &str) -> String {
    let s = s.replace('|', "\\|").replace('\n', " ");
    if s.chars().count() > 160 {
        format!("{}…", s.chars().take(160).collect::<String>())
    } else {
        s
    }
}

/// Download (once) and unpack [`PYVERBS_PACKAGES`] into the cache, the tests gunzipped and
/// the Python files compiled (the guest then imports without compiling under TCG).
pub fn pyverbs_tree() -> Result<PathBuf> {
    let cache = crate::util::cache_dir()?;
    let root = cache.join("pyverbs-userland");
    let stamp = root.join(".unpacked");
    let wanted = PYVERBS_PACKAGES.join("\n");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) {
        return Ok(root);
    }
    println!(
        "xtask: fetching rdma-core's Python tests ({}) into {}",
        PYVERBS_PACKAGES.join(", "),
        root.display()
    );
    let dl = cache.join("download-pyverbs");
    let _ = std::fs::remove_dir_all(&dl);
    std::fs::create_dir_all(&dl).context(|| format!("creating {}", dl.display()))?;
    let mut cmd = Command::new("apt-get");
    cmd.args(["download", "-q"])
        .args(PYVERBS_PACKAGES)
        .current_dir(&dl);
    if crate::util::run(&mut cmd).is_err() {
        crate::prereq::apt_update()?;
        crate::util::run(&mut cmd)
            .map_err(|e| err!("could not download {}: {e}", PYVERBS_PACKAGES.join(", ")))?;
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).context(|| format!("creating {}", root.display()))?;
    for e in std::fs::read_dir(&dl).context(|| format!("listing {}", dl.display()))? {
        let p = e.context(|| format!("listing {}", dl.display()))?.path();
        if p.extension().is_some_and(|x| x == "deb") {
            crate::util::run(Command::new("dpkg-deb").arg("-x").arg(&p).arg(&root))?;
        }
    }
    let tests = root.join(TESTS_DIR);
    crate::util::run(
        Command::new("sh")
            .args(["-c", "gunzip -f ./*.py.gz"])
            .current_dir(&tests),
    )?;
    // The unpacked interpreter compiles its own tree (run on the host with the tree's
    // libpython); the .pyc files name the guest's paths.
    crate::util::run(
        Command::new(root.join("usr/bin/python3.11"))
            .env("LD_LIBRARY_PATH", root.join("usr/lib/x86_64-linux-gnu"))
            .args(["-m", "compileall", "-q", "-j", "0", "-s"])
            .arg(&root)
            .args([
                "-p",
                "/",
                "-x",
                "/(test|idlelib|tkinter|turtledemo|lib2to3)/",
            ])
            .arg(root.join("usr/lib/python3.11"))
            .arg(root.join("usr/lib/python3/dist-packages"))
            .arg(&tests),
    )?;
    std::fs::write(&stamp, &wanted).context(|| format!("writing {}", stamp.display()))?;
    let _ = std::fs::remove_dir_all(&dl);
    Ok(root)
}

/// The guest files of the pyverbs userland: the tree (less [`STDLIB_LEFT_OUT`]), our runner
/// and pair script, and the host libraries its ELF files need.
pub fn pyverbs_files(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    let mut elves = Vec::new();
    let mut stack = vec![root.join("usr")];
    let left_out: BTreeSet<PathBuf> = STDLIB_LEFT_OUT
        .iter()
        .map(|d| root.join("usr/lib/python3.11").join(d))
        .collect();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).context(|| format!("listing {}", d.display()))? {
            let e = e.context(|| format!("listing {}", d.display()))?;
            let p = e.path();
            if left_out.contains(&p) {
                continue;
            }
            let meta = std::fs::metadata(&p).context(|| format!("reading {}", p.display()))?;
            if meta.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p
                .strip_prefix(root)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            if rel.starts_with("usr/share/") && !rel.starts_with(TESTS_DIR) {
                continue;
            }
            let host = crate::userland::resolve_in(root, &p);
            let is_elf = std::fs::read(&host)
                .map(|b| b.starts_with(b"\x7fELF"))
                .unwrap_or(false);
            if is_elf {
                elves.push(host.clone());
            }
            files.push((rel, host));
        }
    }
    // The host libraries the ELF files need (libpython resolves inside the tree).
    let mut host_libs = BTreeSet::new();
    let tree_lib = root.join("usr/lib/x86_64-linux-gnu");
    for chunk in elves.chunks(64) {
        let out = output(
            Command::new("ldd")
                .env("LD_LIBRARY_PATH", &tree_lib)
                .args(chunk),
        )?;
        for line in out.lines() {
            if line.contains("not found") {
                return Err(err!(
                    "a pyverbs file needs a library the host lacks: {} (package \
                     ibverbs-providers, librdmacm1?)",
                    line.trim()
                ));
            }
            let Some((_, rest)) = line.split_once("=> ") else {
                continue;
            };
            let path = rest.split(" (").next().unwrap_or("").trim();
            if path.starts_with('/') && !Path::new(path).starts_with(root) {
                host_libs.insert(PathBuf::from(path));
            }
        }
    }
    for lib in host_libs {
        files.push((
            lib.to_string_lossy().trim_start_matches('/').to_string(),
            lib,
        ));
    }
    files.push((
        "lib/uverbs/pyverbs_runner.py".into(),
        write_temp("pyverbs_runner.py", RUNNER_PY)?,
    ));
    Ok(files)
}

/// Write an embedded file under target/capi-vm/ (payload files are host paths).
fn write_temp(name: &str, body: &str) -> Result<PathBuf> {
    let dir = crate::util::workspace_root().join("target/capi-vm");
    std::fs::create_dir_all(&dir).context(|| format!("creating {}", dir.display()))?;
    let p = dir.join(name);
    std::fs::write(&p, body).context(|| format!("writing {}", p.display()))?;
    Ok(p)
}

/// The pair script as a payload file.
pub fn pair_file() -> Result<(String, PathBuf)> {
    Ok(("lib/uverbs/pair.sh".into(), write_temp("pair.sh", PAIR_SH)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn results_parse_and_compare_test_by_test() {
        let a = PyRun::parse(&lines(
            "test_a (tests.test_x.T.test_a) ... ok\n\
             UVERBS-PYTEST ok tests.test_x.T.test_a \n\
             UVERBS-PYTEST skip tests.test_x.T.test_b 'no ODP'\n\
             UVERBS-PYTEST ok tests.test_x.T.test_c \n\
             UVERBS-PYTEST fail tests.test_x.T.test_d AssertionError\n\
             UVERBS-PYTEST skip tests.test_x.T.test_e No EFA\n\
             UVERBS-PYMODULE tests.test_x done",
        ));
        assert_eq!(a.count(), (2, 2, 1));
        let b = PyRun::parse(&lines(
            "[capi 6.12] UVERBS-PYTEST ok tests.test_x.T.test_a \n\
             UVERBS-PYTEST skip tests.test_x.T.test_b 'no ODP'\n\
             UVERBS-PYTEST error tests.test_x.T.test_c PyverbsRDMAError: Failed\n\
             UVERBS-PYTEST skip tests.test_x.T.test_e No EFA device\n\
             UVERBS-PYMODULE tests.test_y import-error OSError: libefa.so.1",
        ));
        let mut cmp = Comparison {
            rdma_core: a,
            uverbs: b,
            problems: Vec::new(),
        };
        cmp.rdma_core
            .tests
            .insert("tests.test_y.U.test_f".into(), Outcome::Ok);
        let rows = cmp.rows();
        let row = |id: &str| &rows.iter().find(|(i, _)| i == id).unwrap().1;
        assert_eq!(*row("tests.test_x.T.test_a"), Row::BothOk);
        assert_eq!(
            *row("tests.test_x.T.test_b"),
            Row::BothSkip("no ODP".into())
        );
        assert!(matches!(
            row("tests.test_x.T.test_c"),
            Row::Differ {
                regression: true,
                ..
            }
        ));
        assert!(matches!(
            row("tests.test_x.T.test_d"),
            Row::Differ {
                regression: false,
                ..
            }
        ));
        // Different skip reasons are a difference, not a regression.
        assert!(matches!(
            row("tests.test_x.T.test_e"),
            Row::Differ {
                regression: false,
                ..
            }
        ));
        // A module that did not import on uverbs: its tests are regressions.
        let Row::Differ {
            uverbs, regression, ..
        } = row("tests.test_y.U.test_f")
        else {
            panic!()
        };
        assert!(*regression);
        assert_eq!(
            *uverbs,
            Some(Outcome::NotImported("OSError: libefa.so.1".into()))
        );
        let mut r = Report::new("k");
        cmp.items(Series::V6_12, &mut r);
        assert_eq!(r.counts(), (1, 2, 3), "{:?}", r.items);
        assert!(r.items.iter().any(|i| i
            .name
            .contains("1 test(s), skipped on rdma-core and uverbs: no ODP")));
        let md = cmp.markdown("6.12.1");
        assert!(
            md.contains("| rdma-core 44 (librxe) | 3 | 2 | 1 | 0 |"),
            "{md}"
        );
        assert!(
            md.contains("| `test_x.T.test_c` | ok | ERROR | ERROR: PyverbsRDMAError: Failed |"),
            "{md}"
        );
        assert!(md.contains("| no ODP | 1 |"), "{md}");
    }

    #[test]
    fn every_program_runs_in_every_role() {
        let s = program_steps();
        for (name, ..) in programs() {
            for (role, ..) in ROLES {
                assert!(
                    s.contains(&format!("step pair:{name}:{role} ")),
                    "{name} {role}"
                );
            }
        }
        assert!(
            s.contains(
                "pair:ibv_rc_pingpong:uverbs-server 120 /lib/uverbs/pair.sh uverbs rdma-core 18515"
            ),
            "{s}"
        );
        assert!(s.contains("chroot /static-root /static_pingpong"), "{s}");
    }
}
