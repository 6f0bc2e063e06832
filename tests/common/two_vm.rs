//! What the two-VM tests share (tests/faults_two_vm.rs, tests/lossy_two_vm.rs,
//! tests/nak_two_vm.rs): the role the harness gives each VM, console lines past libtest's
//! capture, the out-of-band connection, and GIDs as text for the exchange over it.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use uverbs::Gid;

/// `(UVERBS_TWO_VM_ROLE, UVERBS_TWO_VM_PEER)`: this VM's role and the other VM's address, as
/// the harness sets them; `runs_in` names the harness section that sets them, for the panic
/// when they are missing.
pub fn role(runs_in: &str) -> (String, String) {
    let role = std::env::var("UVERBS_TWO_VM_ROLE").unwrap_or_else(|_| {
        panic!("UVERBS_TWO_VM_ROLE is not set: this test runs in {runs_in}, which sets it")
    });
    let peer =
        std::env::var("UVERBS_TWO_VM_PEER").expect("UVERBS_TWO_VM_PEER (the peer's address)");
    (role, peer)
}

/// Writes a line straight to fd 1, past libtest's capture: the harness reads the console.
pub fn say(msg: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "\n{msg}").unwrap();
    out.flush().unwrap();
}

/// A GID as 32 hex digits.
pub fn gid_hex(g: &Gid) -> String {
    g.raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// The GID of [`gid_hex`]'s text.
pub fn parse_gid(s: &str) -> Gid {
    assert_eq!(s.len(), 32, "GID {s:?}");
    let mut g = Gid::default();
    for (i, b) in g.raw.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex GID");
    }
    g
}

/// The out-of-band connection of a two-VM test: the side that `listens` accepts one on `port`;
/// the other connects to `peer` (the other VM may still be booting or finishing its step
/// before: retried for up to 120 s).
pub fn control_stream(listens: bool, peer: &str, port: u16) -> TcpStream {
    if listens {
        let l = TcpListener::bind(("0.0.0.0", port)).expect("listen for the peer");
        return l.accept().expect("accept the peer").0;
    }
    let t = Instant::now();
    loop {
        match TcpStream::connect((peer, port)) {
            Ok(s) => return s,
            Err(e) => {
                assert!(
                    t.elapsed() < Duration::from_secs(120),
                    "no peer listening at {peer}:{port}: {e}"
                );
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }
}
