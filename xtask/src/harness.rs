//! Ties kernels, images and VM runs together: fetches each kernel once, builds its base image
//! once, and boots VMs with per-run payloads (one VM, or two joined over UDP).

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::guest::{BaseContents, Net, Payload};
use crate::kernel::{Kernel, Series};
use crate::util::{err, Context, Result};
use crate::vm::{self, Echo, LinkAction, Nic, Run, VmConfig};

/// The release build of our CLI for the VM.
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

pub struct Harness {
    kernels: BTreeMap<&'static str, Kernel>,
    bases: BTreeMap<&'static str, PathBuf>,
    contents: BaseContents,
    run_counter: u32,
}

/// Build the static `uverbs` CLI (the `uverbs-cli` package, `cli/`) for the VM.
pub fn build_uverbs_cli() -> Result<PathBuf> {
    let root = crate::util::workspace_root();
    crate::util::run(
        Command::new(crate::util::cargo())
            .args([
                "build",
                "--release",
                "--target",
                MUSL_TARGET,
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
    let bin = target.join(MUSL_TARGET).join("release/uverbs");
    crate::elf::ensure_static(&bin, "the uverbs CLI")?;
    Ok(bin)
}

impl Harness {
    pub fn new(uverbs_cli: Option<PathBuf>) -> Harness {
        Harness {
            kernels: BTreeMap::new(),
            bases: BTreeMap::new(),
            contents: BaseContents { uverbs_cli },
            run_counter: 0,
        }
    }

    pub fn kernel(&mut self, series: Series) -> Result<Kernel> {
        if let Some(k) = self.kernels.get(series.label()) {
            return Ok(k.clone());
        }
        let k = crate::kernel::fetch(series)?;
        println!(
            "xtask: kernel {}: {} ({})",
            series.label(),
            k.release,
            k.package
        );
        self.kernels.insert(series.label(), k.clone());
        Ok(k)
    }

    fn base(&mut self, series: Series) -> Result<PathBuf> {
        if let Some(p) = self.bases.get(series.label()) {
            return Ok(p.clone());
        }
        let k = self.kernel(series)?;
        let path = crate::util::work_dir()?.join(format!("base-{}.cpio", k.release));
        crate::guest::build_base(&k, &self.contents, &path)?;
        self.bases.insert(series.label(), path.clone());
        Ok(path)
    }

    fn prepare(
        &mut self,
        series: Series,
        payload: &Payload,
        tag: &str,
    ) -> Result<(Kernel, PathBuf)> {
        let base = self.base(series)?;
        let kernel = self.kernel(series)?;
        self.run_counter += 1;
        let initrd = crate::util::work_dir()?.join(format!(
            "initrd-{}-{tag}-{}.cpio",
            kernel.release, self.run_counter
        ));
        payload.write_initrd(&base, &initrd)?;
        Ok((kernel, initrd))
    }

    /// Boot one VM with an rxe device on a veth pair and run `payload`.
    pub fn run(
        &mut self,
        series: Series,
        payload: &Payload,
        timeout: Duration,
        echo: Echo,
    ) -> Result<Run> {
        let (kernel, initrd) = self.prepare(series, payload, "run")?;
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
        };
        let run = vm::run(&cfg);
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
        let (ka, ia) = self.prepare(a.0, a.1, "a")?;
        let (kb, ib) = self.prepare(b.0, b.1, "b")?;
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
        let actions_a = actions(&qmp_a, "VM A", &qmp_b, "VM B");
        let actions_b = actions(&qmp_b, "VM B", &qmp_a, "VM A");
        let cfg = |name: &str, kernel: Kernel, initrd: PathBuf, ports: (u16, u16), mac: &str| {
            let series = kernel.series.label();
            VmConfig {
                echo: Echo {
                    prefix: format!("[{name} {series}] "),
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
            }
        };
        let mut ca = cfg("A", ka, ia.clone(), (pa, pb), "52:54:00:99:01:01");
        (ca.qmp, ca.link_actions) = (qmp_a.clone(), actions_a);
        let mut cb = cfg("B", kb, ib.clone(), (pb, pa), "52:54:00:99:01:02");
        (cb.qmp, cb.link_actions) = (qmp_b.clone(), actions_b);
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| vm::run(&ca));
            let tb = s.spawn(|| vm::run(&cb));
            (ta.join(), tb.join())
        });
        let _ = std::fs::remove_file(&ia);
        let _ = std::fs::remove_file(&ib);
        for q in [&qmp_a, &qmp_b].into_iter().flatten() {
            let _ = std::fs::remove_file(q);
        }
        let ra = ra.map_err(|_| err!("the thread watching VM A panicked"))??;
        let rb = rb.map_err(|_| err!("the thread watching VM B panicked"))??;
        Ok((ra, rb))
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
