//! Write-command response decoding: every verb whose kernel answer is a `write()` response
//! (get_context, query_device/port, alloc_pd, reg_mr, create_cq/qp/srq/ah, modify/query,
//! resize, destroy) run against a kernel whose responses are hostile bytes, with every ioctl
//! missing so the write fallbacks (and their zero-extension of short responses) are used.
//! Property: a value or a typed error naming op and object; never a panic or OOB access.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uverbs_fuzz::{verbs, IoctlMode};

fuzz_target!(|data: &[u8]| {
    verbs::run(data, IoctlMode::Missing);
});
