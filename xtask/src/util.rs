//! Small helpers shared by the tasks: errors with context, running host commands, paths.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An xtask failure: one sentence saying what was being done and why it failed.
#[derive(Debug)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Build an [`Error`] from format arguments.
macro_rules! err {
    ($($arg:tt)*) => { $crate::util::Error(format!($($arg)*)) };
}
pub(crate) use err;

/// Attach "while doing X" context to an `std::io` (or any displayable) error.
pub trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error(format!("{}: {e}", what())))
    }
}

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent directory")
        .to_path_buf()
}

/// Scratch space for generated initramfs images and serial logs (inside the ignored target dir).
pub fn work_dir() -> Result<PathBuf> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("xtask");
    std::fs::create_dir_all(&dir).context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Cache for downloaded kernels, kept outside the repository so `cargo clean` does not
/// throw away ~200 MB of downloads: `$XDG_CACHE_HOME/uverbs-vm` or `~/.cache/uverbs-vm`.
pub fn cache_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".cache"),
            None => {
                return Err(err!(
                    "neither XDG_CACHE_HOME nor HOME is set: cannot place the kernel cache"
                ))
            }
        },
    };
    let dir = base.join("uverbs-vm");
    std::fs::create_dir_all(&dir).context(|| format!("creating kernel cache {}", dir.display()))?;
    Ok(dir)
}

/// The cargo that runs us (`cargo xtask` sets CARGO), for nested builds.
pub fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Render a command line for messages (cargo by its short name).
pub fn show(cmd: &Command) -> String {
    let program = cmd.get_program();
    let mut s = if Some(program) == Some(cargo().as_os_str()) {
        "cargo".to_string()
    } else {
        program.to_string_lossy().into_owned()
    };
    for arg in cmd.get_args() {
        let arg = arg.to_string_lossy();
        if arg.is_empty() || arg.contains(|c: char| c.is_whitespace() || c == '\'') {
            s.push_str(&format!(" '{}'", arg.replace('\'', r"'\''")));
        } else {
            s.push(' ');
            s.push_str(&arg);
        }
    }
    s
}

/// Run a command with inherited stdio, echoing it first; fail with its exit status.
pub fn run(cmd: &mut Command) -> Result<()> {
    println!("$ {}", show(cmd));
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .context(|| format!("starting `{}`", show(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(err!("`{}` failed ({status})", show(cmd)))
    }
}

/// Run a command with its stdout and stderr passed through to ours as they come, and return
/// their lines (interleaved in arrival order) with the exit status.
pub fn run_tee(cmd: &mut Command) -> Result<(Vec<String>, std::process::ExitStatus)> {
    use std::io::{BufRead, Write};
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context(|| format!("starting `{}`", show(cmd)))?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut readers = Vec::new();
    let out = child
        .stdout
        .take()
        .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>);
    let err = child
        .stderr
        .take()
        .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>);
    for (src, to_stderr) in [(out, false), (err, true)] {
        let Some(src) = src else { continue };
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in std::io::BufReader::new(src).lines() {
                let Ok(line) = line else { break };
                if to_stderr {
                    let _ = writeln!(std::io::stderr().lock(), "{line}");
                } else {
                    let _ = writeln!(std::io::stdout().lock(), "{line}");
                }
                if tx.send(line).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let lines: Vec<String> = rx.iter().collect();
    for r in readers {
        let _ = r.join();
    }
    let status = child
        .wait()
        .context(|| format!("waiting for `{}`", show(cmd)))?;
    Ok((lines, status))
}

/// Run a command and return its stdout; a failure carries its stderr.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .context(|| format!("starting `{}`", show(cmd)))?;
    if !out.status.success() {
        return Err(err!(
            "`{}` failed ({}): {}",
            show(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).context(|| format!("`{}` printed non-UTF-8 output", show(cmd)))
}

/// Find an executable in the usual system directories (PATH first).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Whether we run as root (apt-get needs it; otherwise we go through sudo).
pub fn is_root() -> bool {
    output(Command::new("id").arg("-u"))
        .map(|s| s.trim() == "0")
        .unwrap_or(false)
}

/// Seconds since the epoch, for unique log names.
pub fn timestamp() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
