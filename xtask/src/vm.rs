//! Boots one qemu VM (TCG), streams its serial console, follows the marker protocol of
//! [`crate::guest`], and turns what happened into an [`Outcome`]. It never hangs: a hard
//! timeout kills qemu. The serial log of a failed run is kept and its path printed.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::kernel::{Arch, Kernel};
use crate::util::{show, Context, Result};

/// Default VM size. The test boot's initramfs carries every test executable (built with line
/// tables only: about 300 MB for 41; with full debug info 1.1 GB, which did not fit) and is
/// unpacked into RAM next to its packed copy; the rootfs may take half the RAM. When it does
/// not fit the kernel says "Initramfs unpacking failed: write error" and executables are
/// missing. Guest RAM is only host memory once touched, so the headroom costs nothing.
pub const MEMORY_MB: u32 = 4096;
pub const CPUS: u32 = 2;
/// Boot + module load + rxe set-up takes ~10 s under TCG; this leaves room for a slow machine.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(180);

/// A virtio-net NIC joined to another VM over UDP on 127.0.0.1 (`-netdev dgram`).
#[derive(Debug, Clone)]
pub struct Nic {
    pub local_port: u16,
    pub remote_port: u16,
    pub mac: String,
}

/// How to show guest output on the host terminal.
#[derive(Debug, Clone)]
pub struct Echo {
    /// Put before every echoed line (e.g. `[6.1] `).
    pub prefix: String,
    /// Print a header/footer line for every step.
    pub step_banners: bool,
    /// Also echo kernel boot messages (before the rxe device is up).
    pub boot_messages: bool,
}

/// Set a VM's link down or up from outside when this VM's console prints a line (the two-VM
/// fault test): qemu's `set_link <netdev> off|on` over that VM's QMP socket.
#[derive(Debug, Clone)]
pub struct LinkAction {
    /// A console line containing this asks for the action (done once).
    pub trigger: String,
    /// The QMP socket of the VM whose link changes.
    pub qmp: PathBuf,
    /// Its netdev id (`net0`).
    pub netdev: String,
    /// Up (`true`) or down.
    pub up: bool,
    /// Names that VM in messages (`VM B`).
    pub target: String,
}

pub struct VmConfig {
    /// Short name for messages and the log file (e.g. `6.1.0-57-amd64`).
    pub label: String,
    pub kernel: Kernel,
    pub initrd: PathBuf,
    pub memory_mb: u32,
    pub cpus: u32,
    pub nic: Option<Nic>,
    /// Serve QMP on this Unix socket (so the harness can act on the VM from outside).
    pub qmp: Option<PathBuf>,
    /// Link changes this VM's console can ask for.
    pub link_actions: Vec<LinkAction>,
    /// Hard limit for the whole run, boot included.
    pub timeout: Duration,
    pub echo: Echo,
    /// Stop the run when a console line shows this fault (shared by a pair of VMs).
    pub abort: Option<Abort>,
}

/// A fault of the emulator seen on a VM's console that makes the rest of a run meaningless
/// (a virtio-net transmit queue stalled for good: `NETDEV WATCHDOG`): the VM that prints
/// `pattern` raises `flag`, and every VM sharing the flag is stopped within a second.
#[derive(Clone, Debug)]
pub struct Abort {
    pub pattern: &'static str,
    pub flag: Arc<AtomicBool>,
}

/// The console line of a stalled virtio-net transmit queue (the guest's netdev watchdog).
pub const NIC_STALL: &str = "NETDEV WATCHDOG";

/// How a boot failure in the guest's own set-up (after the kernel booted) begins.
const SETUP_FAILED: &str = "guest set-up failed";

/// One payload step's result (see the marker protocol in [`crate::guest`]).
#[derive(Debug, Clone, Default)]
pub struct Step {
    pub name: String,
    /// `None` if the step never finished (the VM died or timed out in it).
    pub status: Option<i32>,
    /// Killed by its in-guest time limit.
    pub timed_out: bool,
    pub output: Vec<String>,
    pub secs: f64,
}

/// How a VM run ended. The three failure kinds are kept apart on purpose.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The payload ran and exited with this status (0 = success, else test failure).
    Exited(i32),
    /// The VM never got to run the payload.
    BootFailed(String),
    /// The hard timeout hit after boot; qemu was killed.
    TimedOut { secs: u64, in_step: Option<String> },
    /// The guest vanished after boot without reporting an exit status (kernel panic, qemu crash).
    Died(String),
    /// Stopped on an emulator fault ([`Abort`]): this VM's console line, or the other VM's.
    Aborted(String),
}

#[derive(Debug)]
pub struct Run {
    pub label: String,
    pub outcome: Outcome,
    pub steps: Vec<Step>,
    /// Seconds from qemu start to the rxe device being ready.
    pub boot_secs: Option<f64>,
    pub total_secs: f64,
    /// The serial log; kept only when the run failed.
    pub log: Option<PathBuf>,
    /// The link actions ([`VmConfig::link_actions`]) this VM asked for, by trigger, and
    /// whether each was done.
    pub link_actions: Vec<(String, std::result::Result<(), String>)>,
}

impl Run {
    pub fn success(&self) -> bool {
        self.outcome == Outcome::Exited(0)
    }

    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.name == name)
    }

    /// One clear sentence about the outcome.
    pub fn describe(&self) -> String {
        let log = match &self.log {
            Some(p) => format!(" — serial log: {}", p.display()),
            None => String::new(),
        };
        match &self.outcome {
            Outcome::Exited(0) => format!(
                "VM {}: command succeeded ({:.0} s)",
                self.label, self.total_secs
            ),
            Outcome::Exited(code) => format!(
                "VM {}: TEST FAILURE: the command in the VM exited with status {code}{log}",
                self.label
            ),
            Outcome::BootFailed(why) => format!("VM {}: BOOT FAILURE: {why}{log}", self.label),
            Outcome::TimedOut { secs, in_step } => format!(
                "VM {}: TIMEOUT: killed after {secs} s{}{log}",
                self.label,
                in_step
                    .as_ref()
                    .map(|s| format!(" while running step `{s}`"))
                    .unwrap_or_default()
            ),
            Outcome::Died(why) => format!("VM {}: GUEST DIED: {why}{log}", self.label),
            Outcome::Aborted(why) => format!(
                "VM {}: STOPPED ON AN EMULATOR FAULT: {why}{log}",
                self.label
            ),
        }
    }

    /// The guest kernel crashed or hung before the payload's set-up began (seen under TCG:
    /// an int3 oops in `sched_clock_cpu` while 6.12 boots). That is the emulator's or the
    /// kernel's fault and no result at all; a set-up step that failed is not counted here.
    pub fn kernel_never_booted(&self) -> bool {
        matches!(&self.outcome, Outcome::BootFailed(why) if !why.starts_with(SETUP_FAILED))
    }

    /// Forget the log of a run whose failure was expected (harness self-test).
    pub fn discard_log(&mut self) {
        if let Some(p) = self.log.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

enum Line {
    Serial(String),
    Qemu(String),
}

/// The qemu program, machine and serial console for a kernel's architecture.
fn machine(arch: Arch) -> (&'static str, &'static [&'static str], &'static str) {
    match arch {
        Arch::X86_64 => ("qemu-system-x86_64", &["-cpu", "max"], "ttyS0"),
        // The virt board's PL011 UART is ttyAMA0. `pauth-impdef=on`: TCG emulates pointer
        // authentication with an implementation-defined hash instead of QARMA, which costs
        // most of an arm64 guest's time otherwise; the guest sees the same features.
        Arch::Aarch64 => (
            "qemu-system-aarch64",
            &["-M", "virt", "-cpu", "max,pauth-impdef=on"],
            "ttyAMA0",
        ),
    }
}

fn qemu_command(cfg: &VmConfig) -> Command {
    let (program, machine, console) = machine(cfg.kernel.arch);
    let mut cmd = Command::new(program);
    cmd.args(["-accel", "tcg"])
        .args(machine)
        .args(["-nodefaults", "-no-user-config", "-no-reboot"])
        .args(["-display", "none", "-serial", "stdio", "-monitor", "none"])
        .args([
            "-m",
            &cfg.memory_mb.to_string(),
            "-smp",
            &cfg.cpus.to_string(),
        ])
        .arg("-kernel")
        .arg(&cfg.kernel.vmlinuz)
        .arg("-initrd")
        .arg(&cfg.initrd)
        // panic=-1 + -no-reboot: a kernel panic ends qemu instead of hanging.
        .arg("-append")
        .arg(format!("console={console} panic=-1 rdinit=/init"));
    if let Some(q) = &cfg.qmp {
        cmd.arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", q.display()));
    }
    match &cfg.nic {
        None => {
            cmd.args(["-nic", "none"]);
        }
        Some(nic) => {
            cmd.arg("-netdev").arg(format!(
                "dgram,id=net0,local.type=inet,local.host=127.0.0.1,local.port={},\
                 remote.type=inet,remote.host=127.0.0.1,remote.port={}",
                nic.local_port, nic.remote_port
            ));
            cmd.arg("-device")
                .arg(format!("virtio-net-pci,netdev=net0,mac={}", nic.mac));
        }
    }
    cmd
}

fn spawn_reader(src: impl std::io::Read + Send + 'static, tx: mpsc::Sender<Line>, serial: bool) {
    std::thread::spawn(move || {
        let mut r = BufReader::new(src);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let s = String::from_utf8_lossy(&buf);
                    let s = s.trim_end_matches(['\n', '\r']).replace('\r', "");
                    let line = if serial {
                        Line::Serial(s)
                    } else {
                        Line::Qemu(s)
                    };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
}

/// Marker parsing: a marker may follow unterminated output on the same line.
fn split_marker(line: &str) -> (&str, Option<(&str, &str)>) {
    const MARKERS: [&str; 6] = [
        "UVERBS-INIT",
        "UVERBS-BOOT-FAILED",
        "UVERBS-BOOTED",
        "UVERBS-STEP-BEGIN",
        "UVERBS-STEP-TIMEOUT",
        "UVERBS-STEP-END",
    ];
    let mut from = 0;
    while let Some(i) = line[from..].find("UVERBS-").map(|i| i + from) {
        let rest = &line[i..];
        let word = rest.split(' ').next().unwrap_or(rest);
        if MARKERS.contains(&word) || word == "UVERBS-EXIT" {
            let arg = rest[word.len()..].trim();
            return (&line[..i], Some((word, arg)));
        }
        from = i + 1;
    }
    (line, None)
}

struct Watch<'a> {
    cfg: &'a VmConfig,
    log: std::io::BufWriter<std::fs::File>,
    start: Instant,
    booted: Option<f64>,
    boot_failed: Option<String>,
    exit: Option<i32>,
    steps: Vec<Step>,
    current: Option<(Step, Instant)>,
    tail: std::collections::VecDeque<String>,
    link_done: Vec<(String, std::result::Result<(), String>)>,
}

impl Watch<'_> {
    fn echo(&self, s: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}{s}", self.cfg.echo.prefix);
        let _ = out.flush();
    }

    fn output_line(&mut self, text: &str) {
        if text.is_empty() && self.current.is_none() {
            return;
        }
        // After the exit marker only the kernel's power-off messages follow.
        let show = self.exit.is_none() && (self.booted.is_some() || self.cfg.echo.boot_messages);
        if show {
            self.echo(text);
        }
        if let Some((step, _)) = &mut self.current {
            step.output.push(text.to_string());
        }
    }

    fn serial(&mut self, line: &str) {
        let _ = writeln!(self.log, "{line}");
        self.tail.push_back(line.to_string());
        if self.tail.len() > 25 {
            self.tail.pop_front();
        }
        let (before, marker) = split_marker(line);
        if !before.is_empty() || marker.is_none() {
            self.output_line(before);
        }
        for act in &self.cfg.link_actions {
            if line.contains(&act.trigger) && !self.link_done.iter().any(|(t, _)| *t == act.trigger)
            {
                let updown = if act.up { "on" } else { "off" };
                let done = qmp_set_link(&act.qmp, &act.netdev, act.up);
                self.echo(&match &done {
                    Ok(()) => format!("xtask: set_link {} {updown} on {}", act.netdev, act.target),
                    Err(e) => format!(
                        "xtask: FAILED: set_link {} {updown} on {}: {e}",
                        act.netdev, act.target
                    ),
                });
                self.link_done.push((act.trigger.clone(), done));
            }
        }
        let Some((word, arg)) = marker else { return };
        match word {
            "UVERBS-BOOT-FAILED" => self.boot_failed = Some(arg.to_string()),
            "UVERBS-BOOTED" => {
                let secs = self.start.elapsed().as_secs_f64();
                self.booted = Some(secs);
                if self.cfg.echo.step_banners {
                    self.echo(&format!("VM booted, rxe0 ready ({secs:.1} s)"));
                }
            }
            "UVERBS-STEP-BEGIN" => {
                if self.cfg.echo.step_banners {
                    self.echo(&format!("──── {arg} ────"));
                }
                self.current = Some((
                    Step {
                        name: arg.to_string(),
                        ..Step::default()
                    },
                    Instant::now(),
                ));
            }
            "UVERBS-STEP-TIMEOUT" => {
                if let Some((step, _)) = &mut self.current {
                    step.timed_out = true;
                }
                self.echo(&format!(
                    "step timed out: {arg} s in-guest limit hit, killed"
                ));
            }
            "UVERBS-STEP-END" => {
                if let Some((mut step, t0)) = self.current.take() {
                    step.status = arg.rsplit(' ').next().and_then(|s| s.parse().ok());
                    step.secs = t0.elapsed().as_secs_f64();
                    if self.cfg.echo.step_banners {
                        let verdict = match step.status {
                            Some(0) => "ok".to_string(),
                            Some(s) => format!("FAILED (exit status {s})"),
                            None => "FAILED".to_string(),
                        };
                        self.echo(&format!(
                            "──── {} {verdict} ({:.1} s) ────",
                            step.name, step.secs
                        ));
                    }
                    self.steps.push(step);
                }
            }
            "UVERBS-EXIT" => self.exit = arg.parse().ok().or(Some(255)),
            _ => {}
        }
    }
}

/// `set_link NETDEV on|off` through a VM's QMP socket: the link goes down (or up) at the
/// emulated NIC, outside the guest. Waits up to 10 s for each answer.
pub fn qmp_set_link(
    socket: &std::path::Path,
    netdev: &str,
    up: bool,
) -> std::result::Result<(), String> {
    use std::os::unix::net::UnixStream;
    let at = || format!("QMP {}", socket.display());
    let s = UnixStream::connect(socket).map_err(|e| format!("connecting to {}: {e}", at()))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| format!("{}: {e}", at()))?;
    let mut w = s.try_clone().map_err(|e| format!("{}: {e}", at()))?;
    let mut r = BufReader::new(s);
    let mut read = |what: &str| -> std::result::Result<serde_json::Value, String> {
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) => return Err(format!("{} closed while waiting for {what}", at())),
                Ok(_) => {}
                Err(e) => return Err(format!("{}: waiting for {what}: {e}", at())),
            }
            let v: serde_json::Value = serde_json::from_str(&line)
                .map_err(|e| format!("{}: bad reply {line:?}: {e}", at()))?;
            // Asynchronous events may come in between; they answer nothing.
            if v.get("event").is_none() {
                return Ok(v);
            }
        }
    };
    let greeting = read("the greeting")?;
    if greeting.get("QMP").is_none() {
        return Err(format!("{}: unexpected greeting {greeting}", at()));
    }
    let set_link = serde_json::json!({
        "execute": "set_link",
        "arguments": { "name": netdev, "up": up },
    });
    for cmd in [
        serde_json::json!({ "execute": "qmp_capabilities" }),
        set_link,
    ] {
        writeln!(w, "{cmd}").map_err(|e| format!("{}: sending {cmd}: {e}", at()))?;
        let v = read(&cmd.to_string())?;
        if let Some(e) = v.get("error") {
            return Err(format!("{}: {cmd} failed: {e}", at()));
        }
        if v.get("return").is_none() {
            return Err(format!("{}: {cmd}: unexpected reply {v}", at()));
        }
    }
    Ok(())
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Boot a VM and run its payload to the end (or the timeout).
pub fn run(cfg: &VmConfig) -> Result<Run> {
    let logs = crate::util::work_dir()?.join("logs");
    std::fs::create_dir_all(&logs).context(|| format!("creating {}", logs.display()))?;
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let log_path = logs.join(format!(
        "{}-{}-{}-{}.log",
        cfg.label.replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '.' && c != '-',
            "_"
        ),
        crate::util::timestamp(),
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let log_file =
        std::fs::File::create(&log_path).context(|| format!("creating {}", log_path.display()))?;

    let mut cmd = qemu_command(cfg);
    let mut log = std::io::BufWriter::new(log_file);
    let _ = writeln!(log, "# {}", show(&cmd));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().context(|| {
        format!(
            "starting qemu: `{}` (package {})",
            show(&cmd),
            match cfg.kernel.arch {
                Arch::X86_64 => "qemu-system-x86",
                Arch::Aarch64 => "qemu-system-arm",
            }
        )
    })?;
    let (tx, rx) = mpsc::channel();
    spawn_reader(child.stdout.take().expect("piped stdout"), tx.clone(), true);
    spawn_reader(child.stderr.take().expect("piped stderr"), tx, false);

    let mut w = Watch {
        cfg,
        log,
        start,
        booted: None,
        boot_failed: None,
        exit: None,
        steps: Vec::new(),
        current: None,
        tail: Default::default(),
        link_done: Vec::new(),
    };
    let mut qemu_errors: Vec<String> = Vec::new();
    let hard_deadline = start + cfg.timeout;
    let mut timed_out = false;
    let mut exit_seen_at: Option<Instant> = None;
    let mut aborted: Option<String> = None;
    loop {
        let deadline = match (w.booted, exit_seen_at) {
            // After the exit (or boot-failed) marker qemu should be gone within seconds (poweroff -f).
            (_, Some(t)) => t + Duration::from_secs(20),
            (None, None) => hard_deadline.min(start + BOOT_TIMEOUT),
            (Some(_), None) => hard_deadline,
        };
        if let Some(a) = &cfg.abort {
            if aborted.is_none() && a.flag.load(Ordering::SeqCst) {
                aborted = Some(
                    "the other VM of the pair stopped (an emulator fault, or its guest died or never \
                     booted)"
                        .into(),
                );
                kill(&mut child);
                break;
            }
        }
        // With an abort flag to watch, wake at least once a second.
        let wait = deadline.saturating_duration_since(Instant::now());
        let wait = if cfg.abort.is_some() {
            wait.min(Duration::from_secs(1))
        } else {
            wait
        };
        match rx.recv_timeout(wait) {
            Ok(Line::Serial(l)) => {
                if let Some(a) = cfg.abort.as_ref().filter(|a| l.contains(a.pattern)) {
                    a.flag.store(true, Ordering::SeqCst);
                    let _ = writeln!(w.log, "{l}");
                    println!("{}{l}", cfg.echo.prefix);
                    aborted = Some(format!(
                        "its console said `{}`: the emulator stopped sending what the guest \
                         transmits, so the rest of the run is void (not a uverbs result)",
                        l.trim()
                    ));
                    kill(&mut child);
                    break;
                }
                w.serial(&l);
                if (w.exit.is_some() || w.boot_failed.is_some()) && exit_seen_at.is_none() {
                    exit_seen_at = Some(Instant::now());
                }
            }
            Ok(Line::Qemu(l)) => {
                let _ = writeln!(w.log, "[qemu] {l}");
                // TCG prints harmless "host doesn't support requested feature" warnings for -cpu max.
                if !l.contains("doesn't support requested feature") {
                    qemu_errors.push(l);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if exit_seen_at.is_none() {
                    timed_out = true;
                }
                kill(&mut child);
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait().ok();
    let total = start.elapsed();
    let tail = if w.tail.is_empty() {
        "(none: the console stayed silent)".to_string()
    } else {
        w.tail.iter().cloned().collect::<Vec<_>>().join("\n    ")
    };
    let outcome = if let Some(why) = aborted {
        Outcome::Aborted(why)
    } else if let Some(code) = w.exit {
        Outcome::Exited(code)
    } else if let Some(why) = &w.boot_failed {
        Outcome::BootFailed(format!("{SETUP_FAILED}: {why}"))
    } else if timed_out && w.booted.is_none() {
        Outcome::BootFailed(format!(
            "the VM did not finish booting within {} s; last console lines:\n    {tail}",
            total.as_secs()
        ))
    } else if timed_out {
        Outcome::TimedOut {
            secs: total.as_secs(),
            in_step: w.current.as_ref().map(|(s, _)| s.name.clone()),
        }
    } else if w.booted.is_none() {
        let qemu = if qemu_errors.is_empty() {
            String::new()
        } else {
            format!("; qemu said: {}", qemu_errors.join(" / "))
        };
        Outcome::BootFailed(format!(
            "qemu exited ({}) before the guest was ready{qemu}; last console lines:\n    {tail}",
            status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "unknown status".into())
        ))
    } else {
        Outcome::Died(format!(
            "the VM stopped{} without reporting an exit status (kernel panic?); last console lines:\n    {tail}",
            w.current.as_ref().map(|(s, _)| format!(" during step `{}`", s.name)).unwrap_or_default()
        ))
    };
    if let Some((mut step, t0)) = w.current.take() {
        step.secs = t0.elapsed().as_secs_f64();
        w.steps.push(step);
    }
    let _ = w.log.flush();
    let mut run = Run {
        label: cfg.label.clone(),
        outcome,
        steps: w.steps,
        boot_secs: w.booted,
        total_secs: total.as_secs_f64(),
        log: Some(log_path),
        link_actions: w.link_done,
    };
    if run.success() {
        run.discard_log();
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_found_after_unterminated_output() {
        assert_eq!(
            split_marker("UVERBS-EXIT 3"),
            ("", Some(("UVERBS-EXIT", "3")))
        );
        assert_eq!(
            split_marker("partialUVERBS-STEP-END t 0"),
            ("partial", Some(("UVERBS-STEP-END", "t 0")))
        );
        assert_eq!(
            split_marker("UVERBS-NOTAMARKER x"),
            ("UVERBS-NOTAMARKER x", None)
        );
        assert_eq!(split_marker("plain"), ("plain", None));
    }

    fn run_with(outcome: Outcome) -> Run {
        Run {
            label: "t".into(),
            outcome,
            steps: vec![],
            boot_secs: None,
            total_secs: 1.0,
            log: None,
            link_actions: Vec::new(),
        }
    }

    #[test]
    fn qmp_set_link_speaks_qmp_and_reports_errors() {
        use std::os::unix::net::UnixListener;
        let dir = std::env::temp_dir().join(format!("uverbs-qmp-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("q.sock");
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        // A fake qemu: greeting, an event in between, then answers; the second connection
        // refuses set_link as qemu does for an unknown device.
        let server = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for refuse in [false, true] {
                let (s, _) = listener.accept().unwrap();
                let mut w = s.try_clone().unwrap();
                let mut r = BufReader::new(s);
                writeln!(w, r#"{{"QMP": {{"version": {{}}, "capabilities": []}}}}"#).unwrap();
                for _ in 0..2 {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap() == 0 {
                        break;
                    }
                    seen.push(line.trim().to_string());
                    writeln!(w, r#"{{"event": "NIC_RX_FILTER_CHANGED"}}"#).unwrap();
                    if refuse && line.contains("set_link") {
                        writeln!(
                            w,
                            r#"{{"error": {{"class": "DeviceNotFound", "desc": "no net0"}}}}"#
                        )
                        .unwrap();
                    } else {
                        writeln!(w, r#"{{"return": {{}}}}"#).unwrap();
                    }
                }
            }
            seen
        });
        assert_eq!(qmp_set_link(&path, "net0", false), Ok(()));
        let e = qmp_set_link(&path, "net0", false).unwrap_err();
        assert!(e.contains("DeviceNotFound"), "{e}");
        let seen = server.join().unwrap();
        assert!(seen[0].contains("qmp_capabilities"), "{seen:?}");
        let v: serde_json::Value = serde_json::from_str(&seen[1]).unwrap();
        assert_eq!(v["execute"], "set_link");
        assert_eq!(v["arguments"]["name"], "net0");
        assert_eq!(v["arguments"]["up"], false);
        let e = qmp_set_link(&dir.join("absent.sock"), "net0", false).unwrap_err();
        assert!(e.contains("connecting"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_exit_zero_is_success_and_failures_are_worded_apart() {
        assert!(run_with(Outcome::Exited(0)).success());
        let fail = run_with(Outcome::Exited(3));
        assert!(!fail.success());
        assert!(fail.describe().contains("TEST FAILURE") && fail.describe().contains("status 3"));
        let boot = run_with(Outcome::BootFailed("x".into()));
        assert!(!boot.success() && boot.describe().contains("BOOT FAILURE"));
        let t = run_with(Outcome::TimedOut {
            secs: 60,
            in_step: Some("cmd".into()),
        });
        assert!(!t.success() && t.describe().contains("TIMEOUT: killed after 60 s"));
    }

    #[test]
    fn only_a_kernel_that_never_booted_is_booted_again() {
        let crashed = run_with(Outcome::BootFailed(
            "qemu exited (exit status: 0) before the guest was ready".into(),
        ));
        assert!(crashed.kernel_never_booted());
        let setup = run_with(Outcome::BootFailed(format!(
            "{SETUP_FAILED}: modprobe rdma_rxe"
        )));
        assert!(!setup.kernel_never_booted());
        for ran in [
            Outcome::Exited(1),
            Outcome::Died("panic".into()),
            Outcome::Aborted("x".into()),
        ] {
            assert!(!run_with(ran).kernel_never_booted());
        }
    }
}
