//! ioctl attribute encoding and response decoding.
//!
//! Part 1 builds an `IoctlCmd` from the input (any ids, kinds, sizes, duplicates, more
//! attributes than fit, optional flags) and checks the encoder's contract: an encoding error
//! is reported (never a panic), a finalized header counts exactly the attributes it carries,
//! inputs read back as given, and outputs written by "the kernel" never exceed their buffer.
//! Part 2 runs verbs against a kernel whose ioctl outputs (PTR_OUT contents and lengths, the
//! valid-output flag, new handles) are hostile.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uverbs::channel::{AttrKind, IoctlCmd, MAX_ATTRS};
use uverbs_fuzz::{verbs, Input, IoctlMode};

fuzz_target!(|data: &[u8]| {
    let split = usize::from(data.first().copied().unwrap_or(0)).min(data.len());
    let (enc, rest) = data.split_at(split);
    encode(enc);
    verbs::run(rest, IoctlMode::Hostile);
});

fn encode(data: &[u8]) {
    let mut inp = Input::new(data);
    let n = inp.below(MAX_ATTRS as u32 + 4) as usize;
    // Buffers live outside the command, as IoctlCmd borrows them.
    let ins: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let len = match inp.u8() % 4 {
                0 => inp.below(9) as usize,
                1 => 65_536,
                _ => inp.below(200) as usize,
            };
            inp.take(len).to_vec()
        })
        .collect();
    let mut outs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; inp.below(300) as usize]).collect();
    let plan: Vec<(u8, u16, u64)> = (0..n).map(|_| (inp.u8(), inp.u16(), inp.u64())).collect();
    let driver_id = inp.u32();
    let mut cmd = IoctlCmd::new(inp.u16(), inp.u16());
    let mut expected_in: Vec<(u16, Vec<u8>)> = Vec::new();
    for ((kind, id, val), (inb, outb)) in plan.iter().zip(ins.iter().zip(outs.iter_mut())) {
        let id = *id % 24; // small id space: duplicates happen
        match kind % 9 {
            0 => {
                cmd.const_u64(id, *val);
            }
            1 => {
                cmd.u32_in(id, *val as u32);
            }
            2 => {
                cmd.ptr_in(id, &inb[..]);
                expected_in.push((id, inb.clone()));
            }
            3 => {
                cmd.ptr_out(id, &mut outb[..]);
            }
            4 => {
                cmd.idr(id, *val as u32);
            }
            5 => {
                cmd.idr_new(id);
            }
            6 => {
                cmd.enum_in(id, *val as u8, &inb[..]);
            }
            7 => {
                cmd.driver_in(&inb[..]);
            }
            _ => {
                cmd.driver_out(&mut outb[..]);
            }
        }
        if val & 1 == 1 {
            cmd.optional();
        }
    }
    let err = cmd.encoding_error();
    let fin = cmd.finalize(driver_id);
    assert_eq!(
        err.is_some(),
        fin.is_err(),
        "encoding_error and finalize disagree"
    );
    if err.is_some() {
        return;
    }
    let count = cmd.attrs().count();
    assert!(count <= MAX_ATTRS);
    let wire = cmd.wire_bytes();
    assert_eq!(wire.len(), 24 + 16 * count, "header + attributes");
    // Inputs read back exactly as given, unless the id was reused (then the encoder refused).
    for (id, bytes) in &expected_in {
        let a = cmd
            .attrs()
            .find(|a| a.id() == *id)
            .expect("attribute present");
        if a.kind() == AttrKind::PtrIn {
            assert_eq!(a.input(), Some(&bytes[..]));
        }
    }
    // "The kernel" writes outputs: never more than the buffer, only into PTR_OUT.
    let ids: Vec<(u16, AttrKind, usize)> =
        cmd.attrs().map(|a| (a.id(), a.kind(), a.len())).collect();
    for (id, kind, len) in ids {
        let junk = vec![0xa5u8; len + 64];
        let mut a = cmd.attr_mut(id).expect("attribute present");
        match a.write_output(&junk) {
            Ok(n) => {
                assert_eq!(kind, AttrKind::PtrOut);
                assert!(n <= len, "wrote {n} into a {len}-byte buffer");
            }
            Err(_) => assert_ne!(kind, AttrKind::PtrOut),
        }
        let _ = cmd.out_valid(id);
        let _ = cmd.out_data(id);
    }
}
