//! The CLI interop tests' processes: which `uverbs` binary runs, and a child whose output is
//! collected while it runs and which is killed at a deadline.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Whose implementation a side runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    Ours,
    RdmaCore,
}

/// Our binary: `UVERBS_BIN` if set, else `/usr/bin/uverbs` (where the VM harness installs it)
/// if it exists, else the one cargo built for this test.
pub fn uverbs_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("UVERBS_BIN") {
        return PathBuf::from(p);
    }
    if Path::new("/usr/bin/uverbs").exists() {
        return PathBuf::from("/usr/bin/uverbs");
    }
    PathBuf::from(env!("CARGO_BIN_EXE_uverbs"))
}

/// rdma-core's tool `name` in /usr/bin (where Debian installs them); fails the test if absent.
pub fn rdma_core_tool(name: &str) -> PathBuf {
    let p = Path::new("/usr/bin").join(name);
    assert!(p.exists(), "rdma-core's {name} is not in /usr/bin");
    p
}

/// Whether a TCP socket listens on `port` (from /proc/net/tcp and tcp6; state 0A = LISTEN).
pub fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|s| {
            s.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
        })
    })
}

/// Whether an rdma_cm id listens on `port` (`rdma resource show cm_id`).
pub fn cm_listening(port: u16) -> bool {
    Command::new("/usr/bin/rdma")
        .args(["resource", "show", "cm_id"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.contains("LISTEN") && l.contains(&format!(":{port} ")))
        })
}

/// A running side: the child and the threads collecting its output.
pub struct Side {
    pub what: String,
    pub child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// A side that has exited (or was killed: `status` None).
pub struct Finished {
    pub what: String,
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The exit code, None if killed or ended by a signal.
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// What ran, how it ended and everything it printed, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}):\n--- stdout\n{}--- stderr\n{}",
            self.what,
            match self.status {
                Some(s) => s.to_string(),
                None => "killed at its deadline".to_string(),
            },
            self.stdout,
            self.stderr
        )
    }
}

fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

impl Side {
    /// Starts `cmd` with `args`, stdin empty and both outputs collected; `what` names it in
    /// messages (with the command line).
    pub fn spawn(mut cmd: Command, args: &[String], what: &str) -> Side {
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let what = format!("{what} {cmd:?}");
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        let out = child.stdout.take().map(collect);
        let err = child.stderr.take().map(collect);
        Side {
            what,
            child,
            out,
            err,
        }
    }

    /// Waits until `deadline`; kills the process if it is still running then.
    pub fn finish(mut self, deadline: Instant) -> Finished {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() >= deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("waiting for {}: {e}", self.what),
            }
        };
        let join =
            |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        Finished {
            what: self.what,
            status,
            stdout: join(self.out.take()),
            stderr: join(self.err.take()),
        }
    }

    /// Kills the process now.
    pub fn kill(mut self) -> Finished {
        let _ = self.child.kill();
        self.finish(Instant::now())
    }
}
