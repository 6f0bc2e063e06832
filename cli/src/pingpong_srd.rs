//! `uverbs pingpong srd`: SEND/RECV ping-pong over an EFA SRD QP (`efadv_create_qp`).
//!
//! rdma-core has no SRD pingpong, so this follows our `ud` mode (itself `ibv_ud_pingpong`):
//! the same message flow (the server waits; the client sends first; each side sends again once
//! its last send and a receive completed), the same summary lines, and an address exchange in
//! the same text style extended by the Q_Key the sender must put in every SRD send:
//! `"%04x:%06x:%06x:%08x:%s"` = LID:QPN:PSN:QKEY:wire-GID with its NUL (61 bytes), then the
//! client's `"done"`. Each side picks a random Q_Key (bit 31 clear: set means a privileged
//! controlled Q_Key), so a side that used the wrong one would see its sends dropped.
//!
//! SRD is reliable but unordered; here at most one message is in flight per direction, so the
//! k-th receive is the peer's k-th send. Every receive has its own buffer slot (wr_id = slot),
//! reposted right after its completion, so with `chk` each message is checked in place against
//! the pattern its sender wrote (message number and direction in every byte).
//!
//! This file uses only the public uverbs API, std and the CLI's std-only TCP module
//! ([`crate::exchange`]; no clap, no CLI types), so a test can include the two
//! (`cli/tests/efa_pingpong.rs`: `#[path = "../src/pingpong_srd.rs"] mod srd;`) and run both
//! sides on the EFA device model. The loop posts and polls with objects this function owns and
//! work requests built before it: no lock, no allocation, no indirect call on the data path.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use uverbs::{
    AccessFlags, AhAttr, Context, CqInitAttr, Driver, EfaCqInitAttr, EfaQpFlags, EfaQpInitAttr,
    EfaWc, Gid, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Sge,
};

use crate::exchange;

/// Bytes of one address message: `sizeof "0000:000000:000000:00000000:" + 32` with the NUL.
pub const SRD_MSG_LEN: usize = 61;
/// wr_id of the one send (receives use their slot number, below `rx_depth`).
const SEND_WRID: u64 = u64::MAX;
/// Empty polls between two looks at the clock.
const POLLS_PER_CLOCK_READ: u32 = 1024;

/// Which side of the exchange this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Waits for the first message.
    Server,
    /// Sends first and writes `"done"` after the address exchange.
    Client,
}

/// Settings of one SRD run.
#[derive(Debug, Clone)]
pub struct SrdOptions {
    /// Bytes per message (at most the port's `max_msg_sz`, the EFA MTU).
    pub size: usize,
    /// Receives kept posted (one buffer slot each).
    pub rx_depth: u32,
    /// Exchanges.
    pub iters: u32,
    /// Port of the device.
    pub ib_port: u8,
    /// GID index (EFA has index 0 only).
    pub gid_idx: u8,
    /// Service level of the QP.
    pub sl: u8,
    /// Fill every sent message with a pattern and check every received one.
    pub chk: bool,
    /// Give up when no completion arrives for this long (a peer gone, a dropped message).
    pub idle_limit: Duration,
}

impl Default for SrdOptions {
    fn default() -> Self {
        SrdOptions {
            size: 4096,
            rx_depth: 500,
            iters: 1000,
            ib_port: 1,
            gid_idx: 0,
            sl: 0,
            chk: false,
            idle_limit: Duration::from_secs(30),
        }
    }
}

/// One side's address as exchanged over TCP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SrdDest {
    /// Port LID (0 on EFA).
    pub lid: u16,
    /// SRD QP number.
    pub qpn: u32,
    /// Send PSN the QP was moved to RTS with.
    pub psn: u32,
    /// Q_Key the QP accepts.
    pub qkey: u32,
    /// Port GID (what the peer makes its AH from).
    pub gid: [u8; 16],
}

impl SrdDest {
    /// The 61-byte message `"%04x:%06x:%06x:%08x:%s"`, NUL-terminated.
    pub fn to_wire(self) -> [u8; SRD_MSG_LEN] {
        let text = format!(
            "{:04x}:{:06x}:{:06x}:{:08x}:{}",
            self.lid,
            self.qpn,
            self.psn,
            self.qkey,
            exchange::wire_gid(&self.gid)
        );
        let mut msg = [0u8; SRD_MSG_LEN];
        let n = text.len().min(SRD_MSG_LEN - 1);
        msg[..n].copy_from_slice(&text.as_bytes()[..n]);
        msg
    }

    /// Parses [`SrdDest::to_wire`]'s message; anything else is an error quoting it.
    pub fn from_wire(msg: &[u8]) -> Result<SrdDest, String> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = std::str::from_utf8(&msg[..end])
            .map_err(|_| "the SRD address message is not ASCII".to_string())?;
        let bad =
            || format!("malformed SRD address message {text:?} (want LID:QPN:PSN:QKEY:GID in hex)");
        let f: Vec<&str> = text.split(':').collect();
        if f.len() != 5 {
            return Err(bad());
        }
        let hex = |s: &str, digits: usize| -> Result<u32, String> {
            if s.is_empty() || s.len() > digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(s, 16).map_err(|_| bad())
        };
        let lid = hex(f[0], 4)? as u16;
        let qpn = hex(f[1], 6)?;
        let psn = hex(f[2], 6)?;
        let qkey = hex(f[3], 8)?;
        let gid = exchange::gid_from_wire(f[4]).ok_or_else(bad)?;
        Ok(SrdDest {
            lid,
            qpn,
            psn,
            qkey,
            gid,
        })
    }
}

/// What one run measured and checked.
#[derive(Debug, Clone)]
pub struct SrdOutcome {
    /// Exchanges completed (sends and receives each).
    pub iters: u32,
    /// Bytes moved both ways: `size * iters * 2`, as rdma-core counts them.
    pub bytes: u64,
    /// Time from the first post to the last completion.
    pub elapsed: Duration,
    /// Received messages whose every byte was checked against the sender's pattern.
    pub checked: u32,
}

impl SrdOutcome {
    /// The two summary lines of rdma-core's pingpong programs (microseconds in a float, rates
    /// from them), without trailing newlines.
    pub fn summary(&self) -> [String; 2] {
        let usec = self.elapsed.as_micros() as f32;
        let secs = f64::from(usec) / 1_000_000.0;
        [
            format!(
                "{} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
                self.bytes,
                self.bytes as f64 * 8.0 / f64::from(usec)
            ),
            format!(
                "{} iters in {secs:.2} seconds = {:.2} usec/iter",
                self.iters,
                f64::from(usec) / f64::from(self.iters)
            ),
        ]
    }
}

/// Refuses a device that cannot run SRD, naming it: only EFA has SRD QPs.
pub fn check_device(ctx: &Context) -> Result<(), String> {
    let dev = ctx.device();
    match dev.driver() {
        Driver::Efa => Ok(()),
        d => Err(format!(
            "device {} (driver {d}) cannot run pingpong srd: SRD needs an EFA device \
             (SRD QPs exist only on AWS EFA, through efadv); use rc, uc, ud or srq on {}",
            dev.name(),
            dev.name()
        )),
    }
}

/// Refuses a message size the port cannot carry in one SRD message (`max_msg_sz`).
pub fn check_size(ctx: &Context, ib_port: u8, size: usize) -> Result<(), String> {
    let port = ctx
        .query_port(ib_port)
        .map_err(|e| format!("Unable to query port info for port {ib_port}: {e}"))?;
    if size == 0 || size > port.max_msg_sz as usize {
        return Err(format!(
            "-s/--size {size}: an SRD message on port {ib_port} of {} carries 1 to {} bytes (max_msg_sz)",
            ctx.device().name(),
            port.max_msg_sz
        ));
    }
    Ok(())
}

/// Byte `j` of message `k` sent by `role`: differs between messages, positions and directions.
fn pattern(role: Role, k: u32, j: usize) -> u8 {
    let tag = match role {
        Role::Client => 0xc1,
        Role::Server => 0x5e,
    };
    let m = (k ^ (k >> 8) ^ (k >> 16) ^ (k >> 24)) as u8;
    m.wrapping_mul(151) ^ (j as u8).wrapping_add((j >> 8) as u8) ^ tag
}

/// A random 24-bit PSN and 31-bit Q_Key: seeded by the clock, the process and the role.
fn random_psn_qkey(role: Role) -> (u32, u32) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut z = t
        ^ (u64::from(std::process::id()) << 32)
        ^ (role as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut next = || {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    };
    let psn = (next() & 0xff_ffff) as u32;
    // Never 0, so the peer is seen to have used the exchanged value.
    let qkey = ((next() & 0x7fff_ffff) as u32).max(1);
    (psn, qkey)
}

fn exchange(stream: &mut TcpStream, role: Role, my: SrdDest) -> Result<SrdDest, String> {
    let mut msg = [0u8; SRD_MSG_LEN];
    match role {
        Role::Client => {
            stream
                .write_all(&my.to_wire())
                .map_err(|e| format!("Couldn't send local address: {e}"))?;
            stream
                .read_exact(&mut msg)
                .map_err(|e| format!("Couldn't read remote address: {e}"))?;
            stream
                .write_all(exchange::DONE)
                .map_err(|e| format!("Couldn't send \"done\": {e}"))?;
            SrdDest::from_wire(&msg)
        }
        Role::Server => {
            stream
                .read_exact(&mut msg)
                .map_err(|e| format!("Couldn't read remote address: {e}"))?;
            let rem = SrdDest::from_wire(&msg)?;
            stream
                .write_all(&my.to_wire())
                .map_err(|e| format!("Couldn't send local address: {e}"))?;
            exchange::wait_done(stream)?;
            Ok(rem)
        }
    }
}

/// Runs one side: creates an EFA CQ, a PD, an MR of `rx_depth` receive slots and one send
/// buffer, an SRD QP brought to RTS with a random PSN and Q_Key, posts every receive, tells
/// the peer its address over `stream` (already connected), makes an AH for the peer's GID and
/// ping-pongs `iters` messages. Writes the `local address`/`remote address` lines to `out`.
/// Every object is destroyed before it returns, errors included (by drop).
pub fn run(
    ctx: &Context,
    stream: &mut TcpStream,
    role: Role,
    opt: &SrdOptions,
    out: &mut dyn Write,
) -> Result<SrdOutcome, String> {
    check_device(ctx)?;
    if opt.size == 0 || opt.size > u32::MAX as usize {
        return Err(format!("-s/--size {} is not a message size", opt.size));
    }
    if opt.rx_depth == 0 || opt.iters == 0 {
        return Err("rx_depth and iters must be at least 1".into());
    }
    let size = opt.size;
    let depth = opt.rx_depth as usize;
    let cq_depth = opt.rx_depth.checked_add(1).ok_or("rx_depth is too large")?;
    let mut cq = ctx
        .efadv_create_cq(
            &CqInitAttr {
                cqe: cq_depth,
                ..Default::default()
            },
            &EfaCqInitAttr::default(),
        )
        .map_err(|e| format!("Couldn't create CQ: {e}"))?;
    let pd = ctx
        .alloc_pd()
        .map_err(|e| format!("Couldn't allocate PD: {e}"))?;
    // Slots 0..rx_depth receive; the last one holds the message to send.
    let buf_len = size
        .checked_mul(depth + 1)
        .ok_or("rx_depth * size is too large")?;
    let mut mr = pd
        .reg_mr(buf_len, AccessFlags::LOCAL_WRITE)
        .map_err(|e| format!("Couldn't register MR: {e}"))?;
    let send_off = depth * size;
    mr.fill(send_off, size, 0x7b).map_err(|e| e.to_string())?;
    let mut init = QpInitAttr::new(
        QpType::Srd,
        &cq,
        &cq,
        QpCap {
            max_send_wr: 1,
            max_recv_wr: opt.rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
    );
    init.sq_sig_all = true;
    let mut qp = pd
        .efadv_create_qp_ex(
            &init,
            &EfaQpInitAttr {
                flags: EfaQpFlags::empty(),
                sl: opt.sl,
                wr_flags: Default::default(),
            },
        )
        .map_err(|e| format!("Couldn't create SRD QP: {e}"))?;
    let (psn, qkey) = random_psn_qkey(role);
    for (state, what) in [
        (QpState::Init, "INIT"),
        (QpState::Rtr, "RTR"),
        (QpState::Rts, "RTS"),
    ] {
        let mut a = QpAttr {
            qp_state: state,
            ..Default::default()
        };
        let mut mask = QpAttrMask::STATE;
        match state {
            QpState::Init => {
                a.qkey = qkey;
                a.pkey_index = 0;
                a.port_num = opt.ib_port;
                mask |= QpAttrMask::QKEY | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
            }
            QpState::Rts => {
                a.sq_psn = psn;
                mask |= QpAttrMask::SQ_PSN;
            }
            _ => {}
        }
        qp.modify(&a, mask)
            .map_err(|e| format!("Failed to modify QP to {what}: {e}"))?;
    }

    // One SGE per receive slot and one for the send, built before anything is posted.
    let mut recv_sges: Vec<Sge> = Vec::with_capacity(depth);
    for i in 0..depth {
        recv_sges.push(mr.sge(i * size, size as u32).map_err(|e| e.to_string())?);
    }
    let send_sge: [Sge; 1] = [mr.sge(send_off, size as u32).map_err(|e| e.to_string())?];
    for (i, s) in recv_sges.iter().enumerate() {
        qp.post_recv(&[RecvWr::new(i as u64, std::slice::from_ref(s))])
            .map_err(|e| format!("Couldn't post receive ({i}): {e}"))?;
    }

    let port = ctx
        .query_port(opt.ib_port)
        .map_err(|e| format!("Couldn't get port info: {e}"))?;
    let sgid = ctx
        .query_gid(opt.ib_port, u32::from(opt.gid_idx))
        .map_err(|e| format!("can't read sgid of index {}: {e}", opt.gid_idx))?;
    let (lid, gid) = (port.lid, sgid.raw);
    let my = SrdDest {
        lid,
        qpn: qp.qp_num(),
        psn,
        qkey,
        gid,
    };
    let line = |d: &SrdDest, what: &str| {
        format!(
            "  {what} LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, QKEY 0x{:08x}, GID {}",
            d.lid,
            d.qpn,
            d.psn,
            d.qkey,
            std::net::Ipv6Addr::from(d.gid)
        )
    };
    writeln!(out, "{}", line(&my, "local address: "))
        .map_err(|e| format!("writing output: {e}"))?;
    let rem = exchange(stream, role, my)?;
    writeln!(out, "{}", line(&rem, "remote address:"))
        .map_err(|e| format!("writing output: {e}"))?;

    let ah = pd
        .create_ah(&AhAttr::roce(
            Gid { raw: rem.gid },
            opt.gid_idx,
            opt.ib_port,
        ))
        .map_err(|e| format!("Failed to create AH: {e}"))?;
    let send_wr = [SendWr::send(SEND_WRID)
        .sge(&send_sge)
        .signaled()
        .ud(&ah, rem.qpn, rem.qkey)];
    let peer = match role {
        Role::Client => Role::Server,
        Role::Server => Role::Client,
    };
    // The message staged for the next send and the one a receive is checked against.
    let mut msg = vec![0u8; if opt.chk { size } else { 0 }];
    let mut got = vec![0u8; if opt.chk { size } else { 0 }];

    const RECV: u8 = 1;
    const SEND: u8 = 2;
    let iters = opt.iters;
    let (mut rcnt, mut scnt, mut posted, mut checked) = (0u32, 0u32, 0u32, 0u32);
    let mut wcs = [EfaWc::default(); 2];
    // The MR is a parameter, not a capture: the loop reads it between posts.
    let mut post =
        |qp: &mut uverbs::Qp, mr: &mut uverbs::Mr, posted: &mut u32| -> Result<(), String> {
            if opt.chk {
                for (j, b) in msg.iter_mut().enumerate() {
                    *b = pattern(role, *posted, j);
                }
                mr.write(send_off, &msg).map_err(|e| e.to_string())?;
            }
            qp.post_send(&send_wr)
                .map_err(|e| format!("Couldn't post send: {e}"))?;
            *posted += 1;
            Ok(())
        };
    let start = Instant::now();
    let mut pending = if role == Role::Client {
        post(&mut qp, &mut mr, &mut posted)?;
        RECV | SEND
    } else {
        RECV
    };
    let mut last_progress = start;
    let mut empty = 0u32;
    while rcnt < iters || scnt < iters {
        let ne = cq
            .poll_efa(&mut wcs)
            .map_err(|e| format!("poll CQ failed: {e}"))?;
        if ne == 0 {
            empty += 1;
            if empty == POLLS_PER_CLOCK_READ {
                empty = 0;
                // A removed device completes nothing more (EFA disassociates: the kernel
                // also sends DEVICE_FATAL and fails every command with EIO).
                // (The message of `removal::removed`, spelled out: tests include this file.)
                if ctx.is_device_removed() {
                    return Err(format!(
                        "device {} was removed (learned from {}): stopped, freed every \
                         resource on it and exiting so the removal can complete",
                        ctx.device().name(),
                        ctx.removal_source()
                            .map(|s| s.to_string())
                            .unwrap_or_else(|| "an error".into())
                    ));
                }
                let now = Instant::now();
                if now.duration_since(last_progress) > opt.idle_limit {
                    return Err(format!(
                        "no completion for {:?} after {scnt} sends and {rcnt} receives of {iters} \
                         (peer QPN 0x{:06x} at {}: gone, or its messages dropped)",
                        opt.idle_limit,
                        rem.qpn,
                        std::net::Ipv6Addr::from(rem.gid)
                    ));
                }
            }
            continue;
        }
        last_progress = Instant::now();
        for w in &wcs[..ne] {
            let wc = &w.wc;
            if !wc.status.is_success() {
                return Err(format!(
                    "Failed status {} ({}) for wr_id {} (vendor_err {})",
                    wc.status.as_str(),
                    wc.status.0,
                    wc.wr_id,
                    wc.vendor_err
                ));
            }
            if wc.opcode.is_recv() {
                let slot = wc.wr_id as usize;
                if slot >= depth {
                    return Err(format!("receive completion for unknown wr_id {}", wc.wr_id));
                }
                if wc.byte_len as usize != size {
                    return Err(format!(
                        "message {rcnt} from the peer has {} bytes, not {size}",
                        wc.byte_len
                    ));
                }
                if opt.chk {
                    mr.read(slot * size, &mut got).map_err(|e| e.to_string())?;
                    if let Some(j) = (0..size).find(|&j| got[j] != pattern(peer, rcnt, j)) {
                        return Err(format!(
                            "message {rcnt} from the peer is corrupt at byte {j}: 0x{:02x}, not 0x{:02x}",
                            got[j],
                            pattern(peer, rcnt, j)
                        ));
                    }
                    checked += 1;
                }
                qp.post_recv(&[RecvWr::new(
                    wc.wr_id,
                    std::slice::from_ref(&recv_sges[slot]),
                )])
                .map_err(|e| format!("Couldn't post receive: {e}"))?;
                rcnt += 1;
                pending &= !RECV;
            } else if wc.wr_id == SEND_WRID {
                scnt += 1;
                pending &= !SEND;
            } else {
                return Err(format!("Completion for unknown wr_id {}", wc.wr_id));
            }
            if scnt < iters && pending == 0 {
                post(&mut qp, &mut mr, &mut posted)?;
                pending = RECV | SEND;
            }
        }
    }
    let elapsed = start.elapsed();

    qp.destroy()
        .map_err(|e| format!("Couldn't destroy QP: {e}"))?;
    ah.destroy()
        .map_err(|e| format!("Couldn't destroy AH: {e}"))?;
    cq.destroy()
        .map_err(|e| format!("Couldn't destroy CQ: {e}"))?;
    mr.dereg()
        .map_err(|e| format!("Couldn't deregister MR: {e}"))?;
    drop(pd);
    Ok(SrdOutcome {
        iters,
        bytes: size as u64 * u64::from(iters) * 2,
        elapsed,
        checked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srd_address_message_round_trips() {
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[1] = 0x80;
        gid[15] = 2;
        let d = SrdDest {
            lid: 0,
            qpn: 0x12,
            psn: 0xabcdef,
            qkey: 0x1234_5678,
            gid,
        };
        let m = d.to_wire();
        assert_eq!(
            &m[..SRD_MSG_LEN - 1],
            b"0000:000012:abcdef:12345678:fe800000000000000000000000000002"
        );
        assert_eq!(m[SRD_MSG_LEN - 1], 0);
        assert_eq!(SrdDest::from_wire(&m), Ok(d));
    }

    #[test]
    fn malformed_srd_messages_are_refused() {
        // rdma-core's 52-byte message (no Q_Key) is not an SRD address.
        assert!(
            SrdDest::from_wire(b"0000:000011:abcdef:00000000000000000000ffff0a630001\0").is_err()
        );
        assert!(SrdDest::from_wire(
            b"0000:1000000:000000:00000000:00000000000000000000000000000000\0"
        )
        .is_err());
        assert!(SrdDest::from_wire(
            b"0000:000001:000000:1234567z:00000000000000000000000000000000\0"
        )
        .is_err());
        assert!(SrdDest::from_wire(b"\xff\0").is_err());
    }

    #[test]
    fn patterns_differ_by_message_position_and_direction() {
        assert_ne!(pattern(Role::Client, 0, 0), pattern(Role::Server, 0, 0));
        assert_ne!(pattern(Role::Client, 0, 0), pattern(Role::Client, 1, 0));
        assert_ne!(pattern(Role::Client, 0, 0), pattern(Role::Client, 0, 1));
        assert_ne!(
            pattern(Role::Client, 7, 0),
            pattern(Role::Client, 7 + 256, 0)
        );
        let (p, q) = random_psn_qkey(Role::Client);
        assert!(p <= 0xff_ffff && q != 0 && q < 1 << 31);
    }
}
