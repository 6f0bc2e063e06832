//! The TCP side of the CLI's peer-to-peer commands: how `pingpong` (every mode, `srd`
//! included) and `perf` reach their peer and swap addresses before any RDMA traffic.
//!
//! The client connects to the server's host and port; the server listens on the port and takes
//! one connection. The messages themselves belong to each command: `pingpong` speaks
//! rdma-core's fixed-size text messages (so it interoperates with `ibv_*_pingpong`) ended by the
//! client's [`DONE`]; `pingpong srd` the same style with a Q_Key added; `perf` one text line per
//! side ([`read_line`]) and one-byte [`barrier`]s. A GID travels as 32 lower-case hex digits
//! in every one of them ([`wire_gid`], [`gid_from_wire`]).
//!
//! Only std is used here (errors are strings naming the step and the cause), so a test that
//! compiles a command's logic from its source file (`cli/tests/efa_pingpong.rs`) includes this
//! file beside it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The client's final message of rdma-core's pingpong exchange, with its NUL (`sizeof "done"`).
pub const DONE: &[u8; 5] = b"done\0";

/// How long to wait between two rounds of connection attempts.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// Connects to the first address of `host` that answers, trying each in turn as rdma-core's
/// client does. While none answers, the attempts are repeated every 100 ms for up to
/// `patience` (a peer may still be setting up); with [`Duration::ZERO`] each address is tried
/// once.
pub fn connect(host: &str, port: u16, patience: Duration) -> Result<TcpStream, String> {
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{e} for {host}:{port}"))?
        .collect();
    let deadline = Instant::now() + patience;
    loop {
        let mut last = String::from("no address");
        for a in &addrs {
            match TcpStream::connect(a) {
                Ok(s) => return Ok(s),
                Err(e) => last = e.to_string(),
            }
        }
        if Instant::now() >= deadline {
            return Err(format!("Couldn't connect to {host}:{port}: {last}"));
        }
        std::thread::sleep(RETRY_EVERY);
    }
}

/// Listens on `port` and accepts one client; the listener is closed on return. std sets
/// SO_REUSEADDR on Unix listeners, as rdma-core does. `[::]` also takes IPv4 clients; without
/// IPv6, 0.0.0.0.
pub fn accept(port: u16) -> Result<TcpStream, String> {
    let listener = TcpListener::bind(("::", port))
        .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
        .map_err(|e| format!("Couldn't listen to port {port}: {e}"))?;
    let (conn, _) = listener
        .accept()
        .map_err(|e| format!("accept() failed: {e}"))?;
    Ok(conn)
}

/// The server's end of rdma-core's exchange: reads the client's [`DONE`] (up to its length;
/// the client closing early is an error saying how much came) and checks it.
pub fn wait_done(s: &mut TcpStream) -> Result<(), String> {
    let mut done = [0u8; DONE.len()];
    let mut n = 0;
    while n < DONE.len() {
        match s.read(&mut done[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("Couldn't read \"done\": {e}")),
        }
    }
    if n != DONE.len() {
        return Err(format!(
            "Couldn't send/recv local address: read {n} bytes where the client's \"done\" has {}",
            DONE.len()
        ));
    }
    if &done != DONE {
        return Err(format!(
            "the client ended the exchange with {done:?}, not \"done\""
        ));
    }
    Ok(())
}

/// Reads one `\n`-terminated line (without the `\n`; at most 256 bytes, the rest is left).
pub fn read_line(s: &mut TcpStream) -> std::io::Result<String> {
    let mut out = Vec::new();
    let mut b = [0u8];
    while out.len() < 256 {
        s.read_exact(&mut b)?;
        if b[0] == b'\n' {
            break;
        }
        out.push(b[0]);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Both sides write one byte and read the other's.
pub fn barrier(s: &mut TcpStream) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("Couldn't sync with the peer: {e}");
    s.write_all(b"B").map_err(fail)?;
    let mut b = [0u8];
    s.read_exact(&mut b).map_err(fail)?;
    if b[0] != b'B' {
        return Err(format!(
            "the peer sent {:#04x} where a sync byte belongs",
            b[0]
        ));
    }
    Ok(())
}

/// Watches a control connection with TCP keepalives so that a peer that vanished without a
/// word (a black hole, a cut link, a powered-off host) ends a blocking read with `ETIMEDOUT`
/// within about `secs` seconds: probes start after a third of it, then five, spread over the
/// rest. Nothing changes on the wire while the peer answers (probes are empty ACKs).
pub fn keepalive(s: &TcpStream, secs: u64) -> Result<(), String> {
    use rustix::net::sockopt;
    let fail = |e: rustix::io::Errno| format!("Couldn't set TCP keepalive: {e}");
    let idle = (secs / 3).max(1);
    let intvl = (secs.saturating_sub(idle) / 5).max(1);
    sockopt::set_socket_keepalive(s, true).map_err(fail)?;
    sockopt::set_tcp_keepidle(s, Duration::from_secs(idle)).map_err(fail)?;
    sockopt::set_tcp_keepintvl(s, Duration::from_secs(intvl)).map_err(fail)?;
    sockopt::set_tcp_keepcnt(s, 5).map_err(fail)?;
    Ok(())
}

/// rdma-core's `gid_to_wire_gid`: the 16 bytes in order as 32 lower-case hex digits.
pub fn wire_gid(raw: &[u8; 16]) -> String {
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// The inverse of [`wire_gid`]: exactly 32 hex digits (either case), else `None`.
pub fn gid_from_wire(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut raw = [0u8; 16];
    for (i, b) in raw.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_gids_round_trip_and_bad_ones_are_refused() {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[10, 99, 0, 1]);
        let text = wire_gid(&raw);
        assert_eq!(text, "00000000000000000000ffff0a630001");
        assert_eq!(gid_from_wire(&text), Some(raw));
        assert_eq!(gid_from_wire(&text.to_uppercase()), Some(raw));
        assert_eq!(gid_from_wire(&text[1..]), None);
        // Not hex, a sign from_str_radix would take, and a multi-byte character.
        assert_eq!(gid_from_wire("0000000000000000000000000000000g"), None);
        assert_eq!(gid_from_wire("+f000000000000000000000000000000"), None);
        assert_eq!(gid_from_wire("é000000000000000000000000000000"), None);
    }

    /// A client that sends `msg` and closes, and the server's verdict on it.
    fn server_sees(msg: &'static [u8]) -> Result<(), String> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::thread::spawn(move || {
            let mut s = connect("127.0.0.1", port, Duration::ZERO).unwrap();
            s.write_all(msg).unwrap();
        });
        let (mut conn, _) = listener.accept().unwrap();
        let r = wait_done(&mut conn);
        client.join().unwrap();
        r
    }

    #[test]
    fn the_server_takes_done_and_refuses_anything_else() {
        assert_eq!(server_sees(b"done\0"), Ok(()));
        let short = server_sees(b"don").unwrap_err();
        assert!(short.contains("read 3 bytes"), "{short}");
        let wrong = server_sees(b"nope!").unwrap_err();
        assert!(wrong.contains("not \"done\""), "{wrong}");
    }

    #[test]
    fn barrier_passes_between_two_sides_and_names_a_wrong_byte() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let peer = std::thread::spawn(move || {
            let mut s = connect("127.0.0.1", port, Duration::from_secs(5)).unwrap();
            barrier(&mut s).unwrap();
            s.write_all(b"X").unwrap();
            // Open until the server is done (its second sync byte, then its close).
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).unwrap();
        });
        let (mut conn, _) = listener.accept().unwrap();
        barrier(&mut conn).unwrap();
        let e = barrier(&mut conn).unwrap_err();
        assert!(e.contains("0x58"), "{e}");
        drop(conn);
        peer.join().unwrap();
    }

    #[test]
    fn connect_names_the_peer_when_nothing_listens() {
        // A port that was just free: bind, read it, close.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = connect("127.0.0.1", port, Duration::ZERO).unwrap_err();
        assert!(
            e.starts_with(&format!("Couldn't connect to 127.0.0.1:{port}: ")),
            "{e}"
        );
    }
}
