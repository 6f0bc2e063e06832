//! Encoding of the `write()` commands of `ib_user_verbs.h`, legacy and extended.
//!
//! A legacy command is `struct ib_uverbs_cmd_hdr` (command, in_words, out_words in 4-byte
//! words, the header included in in_words) followed by the command struct and then the
//! driver's input. Commands with a response carry the response pointer as the first 8 bytes of
//! the command struct; the kernel writes the core response followed by the driver's response
//! there.
//!
//! An extended command (`IB_USER_VERBS_CMD_FLAG_EXTENDED`) is `struct ib_uverbs_cmd_hdr` with
//! in/out sizes of the *core* parts in 8-byte words (headers excluded), then
//! `struct ib_uverbs_ex_cmd_hdr` (response pointer, driver in/out sizes in 8-byte words), then
//! the command struct and the driver's input.
//!
//! [`WriteCmd`] owns its request and response buffers (this is control path; the one write on
//! the data path, rxe's send doorbell, is prebuilt by the QP).

use uverbs_uapi::write::{IbUverbsCmdHdr, IbUverbsExCmdHdr, IB_USER_VERBS_CMD_FLAG_EXTENDED};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use super::Errno;

const HDR: usize = std::mem::size_of::<IbUverbsCmdHdr>();
const EX_HDR: usize = HDR + std::mem::size_of::<IbUverbsExCmdHdr>();

/// One `write()` command with its response buffer.
#[derive(Debug, Clone)]
pub struct WriteCmd {
    command: u32,
    extended: bool,
    /// Header(s) + core request + driver request, exactly the bytes written.
    req: Vec<u8>,
    core_req_len: usize,
    /// Core response followed by driver response.
    resp: Vec<u8>,
    core_resp_len: usize,
    /// The response-pointer field inside a legacy request (`None`: no response).
    has_resp_ptr: bool,
}

impl WriteCmd {
    /// A legacy command: `core` is the command struct (whose first field is the `response`
    /// pointer when `core_resp_len + driver_resp_len > 0`), `driver_in` the driver's input.
    ///
    /// Fails with `EINVAL` if a length is not a multiple of 4 bytes or too long to encode.
    pub fn legacy<T: IntoBytes + Immutable + ?Sized>(
        command: u32,
        core: &T,
        driver_in: &[u8],
        core_resp_len: usize,
        driver_resp_len: usize,
    ) -> Result<Self, Errno> {
        let core = core.as_bytes();
        let in_len = HDR + core.len() + driver_in.len();
        let out_len = core_resp_len + driver_resp_len;
        if in_len % 4 != 0 || out_len % 4 != 0 {
            return Err(Errno::INVAL);
        }
        let hdr = IbUverbsCmdHdr {
            command,
            in_words: u16::try_from(in_len / 4).map_err(|_| Errno::INVAL)?,
            out_words: u16::try_from(out_len / 4).map_err(|_| Errno::INVAL)?,
        };
        let has_resp_ptr = out_len > 0;
        if has_resp_ptr && core.len() < 8 {
            return Err(Errno::INVAL);
        }
        let mut req = Vec::with_capacity(in_len);
        req.extend_from_slice(hdr.as_bytes());
        req.extend_from_slice(core);
        req.extend_from_slice(driver_in);
        Ok(WriteCmd {
            command,
            extended: false,
            req,
            core_req_len: core.len(),
            resp: vec![0; out_len],
            core_resp_len,
            has_resp_ptr,
        })
    }

    /// An extended command (`command` without the extended flag; it is added here).
    ///
    /// Fails with `EINVAL` if a length is not a multiple of 8 bytes or too long to encode.
    pub fn extended<T: IntoBytes + Immutable + ?Sized>(
        command: u32,
        core: &T,
        driver_in: &[u8],
        core_resp_len: usize,
        driver_resp_len: usize,
    ) -> Result<Self, Errno> {
        let core = core.as_bytes();
        if core.len() % 8 != 0
            || driver_in.len() % 8 != 0
            || core_resp_len % 8 != 0
            || driver_resp_len % 8 != 0
        {
            return Err(Errno::INVAL);
        }
        let words = |n: usize| u16::try_from(n / 8).map_err(|_| Errno::INVAL);
        let hdr = IbUverbsCmdHdr {
            command: command | IB_USER_VERBS_CMD_FLAG_EXTENDED,
            in_words: words(core.len())?,
            out_words: words(core_resp_len)?,
        };
        let ex = IbUverbsExCmdHdr {
            response: 0,
            provider_in_words: words(driver_in.len())?,
            provider_out_words: words(driver_resp_len)?,
            cmd_hdr_reserved: 0,
        };
        let mut req = Vec::with_capacity(EX_HDR + core.len() + driver_in.len());
        req.extend_from_slice(hdr.as_bytes());
        req.extend_from_slice(ex.as_bytes());
        req.extend_from_slice(core);
        req.extend_from_slice(driver_in);
        Ok(WriteCmd {
            command,
            extended: true,
            req,
            core_req_len: core.len(),
            resp: vec![0; core_resp_len + driver_resp_len],
            core_resp_len,
            has_resp_ptr: core_resp_len + driver_resp_len > 0,
        })
    }

    /// The command number (without the extended flag).
    pub fn command(&self) -> u32 {
        self.command
    }

    /// Whether this is an extended command.
    pub fn is_extended(&self) -> bool {
        self.extended
    }

    fn core_start(&self) -> usize {
        if self.extended {
            EX_HDR
        } else {
            HDR
        }
    }

    /// The command struct bytes (for a legacy command with a response, the response pointer
    /// is its first 8 bytes and is filled in when the command is sent).
    pub fn core_request(&self) -> &[u8] {
        let s = self.core_start();
        &self.req[s..s + self.core_req_len]
    }

    /// The command struct read as `T` (for device models), if it is at least `T`'s size.
    pub fn core_request_as<T: FromBytes>(&self) -> Option<T> {
        T::read_from_prefix(self.core_request())
            .ok()
            .map(|(t, _)| t)
    }

    /// The driver's input bytes.
    pub fn driver_request(&self) -> &[u8] {
        &self.req[self.core_start() + self.core_req_len..]
    }

    /// The core response (after the call).
    pub fn response(&self) -> &[u8] {
        &self.resp[..self.core_resp_len]
    }

    /// The core response read as `T`, zero-extended if the kernel's response is shorter.
    pub fn response_as<T: FromBytes + IntoBytes>(&self) -> T {
        read_zero_extended(self.response())
    }

    /// The driver's response (after the call).
    pub fn driver_response(&self) -> &[u8] {
        &self.resp[self.core_resp_len..]
    }

    /// The driver response read as `T`, zero-extended.
    pub fn driver_response_as<T: FromBytes + IntoBytes>(&self) -> T {
        read_zero_extended(self.driver_response())
    }

    /// Mutable core response, for a device model answering the command.
    pub fn response_mut(&mut self) -> &mut [u8] {
        &mut self.resp[..self.core_resp_len]
    }

    /// Mutable driver response, for a device model answering the command.
    pub fn driver_response_mut(&mut self) -> &mut [u8] {
        &mut self.resp[self.core_resp_len..]
    }

    /// Points the request at the response buffer and returns the bytes to `write()`.
    pub(crate) fn wire(&mut self) -> &[u8] {
        let ptr = self.resp.as_mut_ptr() as u64;
        if self.has_resp_ptr {
            // Legacy: the first field of the command struct. Extended: the first field of
            // `ib_uverbs_ex_cmd_hdr`. Both sit right after `ib_uverbs_cmd_hdr`.
            self.req[HDR..HDR + 8].copy_from_slice(&ptr.to_ne_bytes());
        }
        &self.req
    }

    /// The request bytes exactly as written (after the channel sent it).
    pub fn wire_bytes(&self) -> &[u8] {
        &self.req
    }
}

/// Reads a `T` from `bytes`, zero-filling what `bytes` lacks and ignoring what it has beyond:
/// never trusts a response to have any particular length.
pub(crate) fn read_zero_extended<T: FromBytes + IntoBytes>(bytes: &[u8]) -> T {
    let mut t = T::new_zeroed();
    let dst = t.as_mut_bytes();
    let n = dst.len().min(bytes.len());
    dst[..n].copy_from_slice(&bytes[..n]);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_counts_words_including_header() {
        // alloc_pd-like: response pointer only, 4-byte core response, no driver data.
        let core = [0u64; 1];
        let mut cmd = WriteCmd::legacy(3, &core, &[], 4, 0).unwrap();
        let wire = cmd.wire().to_vec();
        assert_eq!(&wire[0..4], &3u32.to_ne_bytes());
        assert_eq!(&wire[4..6], &4u16.to_ne_bytes()); // (8 + 8) / 4
        assert_eq!(&wire[6..8], &1u16.to_ne_bytes());
        let ptr = u64::from_ne_bytes(wire[8..16].try_into().unwrap());
        assert_eq!(ptr, cmd.resp.as_ptr() as u64);
    }

    #[test]
    fn extended_counts_core_words_and_driver_words() {
        let core = [0u64; 3];
        let driver = [1u8; 16];
        let mut cmd = WriteCmd::extended(2, &core, &driver, 24, 8).unwrap();
        let wire = cmd.wire().to_vec();
        let hdr = u32::from_ne_bytes(wire[0..4].try_into().unwrap());
        assert_eq!(hdr, 2 | IB_USER_VERBS_CMD_FLAG_EXTENDED);
        assert_eq!(u16::from_ne_bytes(wire[4..6].try_into().unwrap()), 3);
        assert_eq!(u16::from_ne_bytes(wire[6..8].try_into().unwrap()), 3);
        assert_eq!(u16::from_ne_bytes(wire[16..18].try_into().unwrap()), 2);
        assert_eq!(u16::from_ne_bytes(wire[18..20].try_into().unwrap()), 1);
        assert_eq!(cmd.driver_request(), &driver);
        assert_eq!(wire.len(), 24 + 24 + 16);
    }

    #[test]
    fn misaligned_lengths_are_refused() {
        assert_eq!(
            WriteCmd::legacy(1, &[0u8; 6], &[], 0, 0).unwrap_err(),
            Errno::INVAL
        );
        assert_eq!(
            WriteCmd::extended(1, &[0u8; 12], &[], 0, 0).unwrap_err(),
            Errno::INVAL
        );
    }

    #[test]
    fn short_responses_are_zero_extended() {
        let v: u64 = read_zero_extended(&[1, 0]);
        assert_eq!(v, 1);
        let v: u32 = read_zero_extended(&[1, 0, 0, 0, 9, 9]);
        assert_eq!(v, 1);
    }
}
