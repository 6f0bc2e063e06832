//! Ties kernels, images and VM runs together: fetches each kernel once, builds its base image
//! once, and boots VMs with per-run payloads (one VM, or two joined over UDP).

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::guest::{BaseContents, Net, Payload};
use crate::kernel::{Arch, Kernel, Series};
use crate::util::{err, Context, Result};
use crate::vm::{self, Echo, LinkAction, Nic, Run, VmConfig};

/// The release build of our CLI for the VM.
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

pub struct Harness {
    /// The architecture of every VM this harness boots.
    pub arch: Arch,
    kernels: BTreeMap<(Arch, &'static str), Kernel>,
    bases: BTreeMap<(Arch, &'static str), PathBuf>,
    /// Our CLI per architecture, for the base images.
    clis: BTreeMap<Arch, Option<PathBuf>>,
    run_counter: u32,
}

/// Build the static `uverbs` CLI (the `uverbs-cli` package, `cli/`) for the x86-64 VM.
pub fn build_uverbs_cli() -> Result<PathBuf> {
    build_uverbs_cli_for(Arch::X86_64)
}

/// Build the static `uverbs` CLI for a VM of `arch` (`.cargo/config.toml` links the
/// aarch64 one with rust-lld).
pub fn build_uverbs_cli_for(arch: Arch) -> Result<PathBuf> {
    let root = crate::util::workspace_root();
    crate::util::run(
        Command::new(crate::util::cargo())
            .args([
                "build",
                "--release",
                "--target",
                arch.musl_target(),
                "-p",
                "uverbs-cli",
                "--bin",
                "uverbs",
            ])
            .current_dir(&root),
    )?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join(arch.musl_target()).join("release/uverbs");
    crate::elf::ensure_static_for(&bin, "the uverbs CLI", arch)?;
    Ok(bin)
}

impl Harness {
    pub fn new(uverbs_cli: Option<PathBuf>) -> Harness {
        Harness::for_arch(Arch::X86_64, uverbs_cli)
    }

    /// A harness whose VMs are `arch` machines (`uverbs_cli` built for it).
    pub fn for_arch(arch: Arch, uverbs_cli: Option<PathBuf>) -> Harness {
        Harness {
            arch,
            kernels: BTreeMap::new(),
            bases: BTreeMap::new(),
            clis: BTreeMap::from([(arch, uverbs_cli)]),
            run_counter: 0,
        }
    }

    /// Also boot VMs of `arch` (a pair of mixed architectures, [`Harness::run_pair_on`]), with
    /// our CLI built for it.
    pub fn add_arch(&mut self, arch: Arch, uverbs_cli: Option<PathBuf>) {
        self.clis.insert(arch, uverbs_cli);
    }

    pub fn kernel(&mut self, series: Series) -> Result<Kernel> {
        self.kernel_for(self.arch, series)
    }

    fn kernel_for(&mut self, arch: Arch, series: Series) -> Result<Kernel> {
        if let Some(k) = self.kernels.get(&(arch, series.label())) {
            return Ok(k.clone());
        }
        let k = crate::kernel::fetch(series, arch)?;
        println!(
            "xtask: kernel {} {}: {} ({})",
            arch.label(),
            series.label(),
            k.release,
            k.package
        );
        self.kernels.insert((arch, series.label()), k.clone());
        Ok(k)
    }

    fn base(&mut self, arch: Arch, series: Series) -> Result<PathBuf> {
        if let Some(p) = self.bases.get(&(arch, series.label())) {
            return Ok(p.clone());
        }
        let k = self.kernel_for(arch, series)?;
        let path = crate::util::work_dir()?.join(format!("base-{}.cpio", k.release));
        let contents = BaseContents {
            uverbs_cli: self.clis.get(&arch).cloned().flatten(),
        };
        crate::guest::build_base(&k, &contents, &path)?;
        self.bases.insert((arch, series.label()), path.clone());
        Ok(path)
    }

    fn prepare(
        &mut self,
        arch: Arch,
        series: Series,
        payload: &Payload,
        tag: &str,
    ) -> Result<(Kernel, PathBuf)> {
        let base = self.base(arch, series)?;
        let kernel = self.kernel_for(arch, series)?;
        self.run_counter += 1;
        let initrd = crate::util::work_dir()?.join(format!(
            "initrd-{}-{tag}-{}.cpio",
            kernel.release, self.run_counter
        ));
        payload.write_initrd(&base, &initrd)?;
        Ok((kernel, initrd))
    }

    /// Boot one VM with an rxe device on a veth pair and run `payload`. A guest kernel that
    /// never booted ([`Run::kernel_never_booted`]) is booted once more, saying so; a payload
    /// that ran is never retried.
    pub fn run(
        &mut self,
        series: Series,
        payload: &Payload,
        timeout: Duration,
        echo: Echo,
    ) -> Result<Run> {
        let (kernel, initrd) = self.prepare(self.arch, series, payload, "run")?;
        let cfg = VmConfig {
            label: kernel.release.clone(),
            kernel,
            initrd: initrd.clone(),
            memory_mb: vm::MEMORY_MB,
            cpus: vm::CPUS,
            nic: None,
            qmp: None,
            link_actions: Vec::new(),
            timeout,
            echo,
            abort: None,
        };
        let mut run = vm::run(&cfg);
        if let Some(why) = run
            .as_ref()
            .ok()
            .filter(|r| r.kernel_never_booted())
            .map(|r| r.describe())
        {
            println!("xtask: {why}\nxtask: the guest kernel never booted; booting it once more");
            run = vm::run(&cfg);
        }
        let _ = std::fs::remove_file(&initrd);
        run
    }

    /// Boot two VMs joined by a virtio-net link (qemu `-netdev dgram` on 127.0.0.1) and run
    /// one payload in each, concurrently. Their payloads must use `Net::Nic`.
    ///
    /// With `link_markers` = (cut, up): a console line of either VM containing `cut` makes
    /// the harness set the *other* VM's link down from outside (QMP `set_link net0 off`), one
    /// containing `up` sets the VM's *own* link up again; each at most once per VM.
    /// `Run::link_actions` says what was done.
    pub fn run_pair(
        &mut self,
        a: (Series, &Payload),
        b: (Series, &Payload),
        timeout: Duration,
        link_markers: Option<(&str, &str)>,
    ) -> Result<(Run, Run)> {
        let arch = self.arch;
        self.run_pair_on((arch, a.0, a.1), (arch, b.0, b.1), timeout, link_markers)
    }

    /// [`Harness::run_pair`] with each VM's architecture given (an x86-64 VM and an arm64 VM
    /// joined by the same link; [`Harness::add_arch`] first for an architecture other than
    /// the harness's own).
    pub fn run_pair_on(
        &mut self,
        a: (Arch, Series, &Payload),
        b: (Arch, Series, &Payload),
        timeout: Duration,
        link_markers: Option<(&str, &str)>,
    ) -> Result<(Run, Run)> {
        let (ka, ia) = self.prepare(a.0, a.1, a.2, "a")?;
        let (kb, ib) = self.prepare(b.0, b.1, b.2, "b")?;
        let (pa, pb) = (free_udp_port()?, free_udp_port()?);
        // Short paths: a Unix socket's path is limited to 107 bytes.
        let qmp = |name: &str| {
            link_markers.map(|_| {
                std::env::temp_dir().join(format!(
                    "uverbs-qmp-{}-{}-{name}.sock",
                    std::process::id(),
                    self.run_counter
                ))
            })
        };
        let (qmp_a, qmp_b) = (qmp("a"), qmp("b"));
        let actions = |own: &Option<PathBuf>,
                       own_name: &str,
                       peer: &Option<PathBuf>,
                       peer_name: &str| {
            match (link_markers, own, peer) {
                (Some((cut, up)), Some(own), Some(peer)) => vec![
                    LinkAction {
                        trigger: cut.to_string(),
                        qmp: peer.clone(),
                        netdev: "net0".into(),
                        up: false,
                        target: peer_name.to_string(),
                    },
                    LinkAction {
                        trigger: up.to_string(),
                        qmp: own.clone(),
                        netdev: "net0".into(),
                        up: true,
                        target: own_name.to_string(),
                    },
                ],
                _ => Vec::new(),
            }
        };
        // A stalled NIC in either VM voids the pair's run: both stop at once.
        let abort = vm::Abort {
            pattern: vm::NIC_STALL,
            flag: Default::default(),
        };
        let actions_a = actions(&qmp_a, "VM A", &qmp_b, "VM B");
        let actions_b = actions(&qmp_b, "VM B", &qmp_a, "VM A");
        let cfg = |name: &str, kernel: Kernel, initrd: PathBuf, ports: (u16, u16), mac: &str| {
            let series = kernel.series.label();
            let arch = match kernel.arch {
                Arch::X86_64 => String::new(),
                other => format!("{} ", other.label()),
            };
            VmConfig {
                echo: Echo {
                    prefix: format!("[{name} {arch}{series}] "),
                    step_banners: true,
                    boot_messages: false,
                },
                label: format!("{name}-{}", kernel.release),
                kernel,
                initrd,
                // Two TCG VMs share the 2 host cores: one vCPU each keeps them from starving each other.
                memory_mb: 1024,
                cpus: 1,
                nic: Some(Nic {
                    local_port: ports.0,
                    remote_port: ports.1,
                    mac: mac.to_string(),
                }),
                qmp: None,
                link_actions: Vec::new(),
                timeout,
                abort: Some(abort.clone()),
            }
        };
        let mut ca = cfg("A", ka, ia.clone(), (pa, pb), "52:54:00:99:01:01");
        (ca.qmp, ca.link_actions) = (qmp_a.clone(), actions_a);
        let mut cb = cfg("B", kb, ib.clone(), (pb, pa), "52:54:00:99:01:02");
        (cb.qmp, cb.link_actions) = (qmp_b.clone(), actions_b);
        // A guest that died (a kernel panic) or never booted leaves its peer's remaining
        // steps waiting for nobody: stop the peer too.
        let run_one = |cfg: &VmConfig| {
            let r = vm::run(cfg);
            if let (Ok(run), Some(a)) = (&r, &cfg.abort) {
                if matches!(run.outcome, vm::Outcome::Died(_)) || run.kernel_never_booted() {
                    a.flag.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
            r
        };
        let run_both = || {
            abort.flag.store(false, std::sync::atomic::Ordering::SeqCst);
            let (ra, rb) = std::thread::scope(|s| {
                let ta = s.spawn(|| run_one(&ca));
                let tb = s.spawn(|| run_one(&cb));
                (ta.join(), tb.join())
            });
            let ra = ra.map_err(|_| err!("the thread watching VM A panicked"))??;
            let rb = rb.map_err(|_| err!("the thread watching VM B panicked"))??;
            Ok::<_, crate::util::Error>((ra, rb))
        };
        // A guest kernel that never booted voids the pair before anything ran: once more.
        let mut runs = run_both();
        let never_booted = runs.as_ref().ok().and_then(|(ra, rb)| {
            [ra, rb]
                .into_iter()
                .find(|r| r.kernel_never_booted())
                .map(|r| r.describe())
        });
        if let Some(why) = never_booted {
            println!(
                "xtask: {why}\nxtask: the guest kernel never booted; booting the pair once more"
            );
            runs = run_both();
        }
        let _ = std::fs::remove_file(&ia);
        let _ = std::fs::remove_file(&ib);
        for q in [&qmp_a, &qmp_b].into_iter().flatten() {
            let _ = std::fs::remove_file(q);
        }
        runs
    }
}

/// A UDP port on 127.0.0.1 that is free right now (qemu binds it a moment later).
fn free_udp_port() -> Result<u16> {
    let s = UdpSocket::bind("127.0.0.1:0")
        .context(|| "finding a free UDP port on 127.0.0.1".to_string())?;
    Ok(s.local_addr()
        .context(|| "reading a UDP socket's address".to_string())?
        .port())
}

/// A payload running one shell command as a single step named `cmd`.
pub fn command_payload(command: &str, files: Vec<(String, PathBuf)>) -> Payload {
    Payload {
        net: Net::Veth {
            addr: "10.99.0.1/24".into(),
        },
        script: format!("step cmd 0 sh -c {}\n", crate::guest::sh_quote(command)),
        files,
    }
}
