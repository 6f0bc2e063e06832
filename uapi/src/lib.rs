//! Kernel ABI of the Linux RDMA uverbs interface, mirrored as `#[repr(C)]` zerocopy structs.
//!
//! This crate holds only what the kernel headers define: structs, ids, flags. No logic, no
//! syscalls, no allocation, `no_std`, no `unsafe`.
//!
//! | module | mirrors (kernel uapi header) |
//! |---|---|
//! | [`ioctl`] | `rdma/rdma_user_ioctl_cmds.h`, `rdma/rdma_user_ioctl.h`, `enum rdma_driver_id` |
//! | [`cmds`] | `rdma/ib_user_ioctl_cmds.h` (object / method / attribute ids) |
//! | [`verbs`] | `rdma/ib_user_ioctl_verbs.h` + the kernel-internal `include/rdma/ib_verbs.h` values that travel through uverbs (WC status, async event types, QP states, ...) |
//! | [`write`](mod@write) | `rdma/ib_user_verbs.h` (legacy `write()` commands and their structs) |
//! | [`rxe`] | `rdma/rdma_user_rxe.h` |
//! | [`efa`] | `rdma/efa-abi.h` |
//! | [`ucma`] | `rdma/rdma_user_cm.h` (the rdma_cm device, `/dev/infiniband/rdma_cm`) |
//!
//! Version basis: the newest uapi as shipped in rdma-core 65.0's `kernel-headers/rdma/`.
//! Items newer than Linux 6.1 (the oldest kernel we test) are marked "newer than 6.1" in
//! their docs; a kernel that predates them rejects them (usually `EPROTONOSUPPORT` for
//! unknown ids, `EOPNOTSUPP`/`EINVAL` for unknown bits).
//!
//! # Naming
//! Rust struct name = CamelCase of the C struct name (`struct ib_uverbs_ioctl_hdr` ->
//! [`ioctl::IbUverbsIoctlHdr`]); anonymous nested C structs get the outer name plus the field
//! name (`ib_uverbs_odp_caps.per_transport_caps` -> [`write::IbUverbsOdpCapsPerTransportCaps`]).
//! Field names are the C field names. Constants keep their exact C names, typed with the type
//! the ABI carries them in (object/method/attribute ids `u16`, write command numbers `u32`,
//! flags as wide as the struct field that carries them).
//!
//! Kernel unions are byte arrays (`[u8; N]`) with typed accessor methods. C flexible array
//! members (`driver_data[]`, `attrs[]`, `wc[]`, ...) are not part of the Rust struct: the
//! struct is the fixed part and its docs say what follows it.
//!
//! Layout is asserted at compile time (size of every struct) and compared field by field with
//! the C headers installed on the build machine by `tests/c_layout_host_only.rs`.
#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

/// Declares uapi structs: `#[repr(C)]`, the zerocopy derives, a generated doc line per field
/// naming the C field, and a compile-time size assertion.
///
/// ```text
/// uapi_struct! {
///     /// Docs.
///     pub struct IbUverbsCmdHdr = "ib_uverbs_cmd_hdr", size 8 {
///         pub command: u32,
///         ...
///     }
/// }
/// ```
macro_rules! uapi_struct {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident = $c:literal, size $size:literal {
            $( $(#[$fmeta:meta])* pub $field:ident : $fty:ty, )*
        }
    )*) => {$(
        $(#[$meta])*
        #[doc = ""]
        #[doc = concat!("C: `struct ", $c, "`.")]
        #[repr(C)]
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq,
            zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::KnownLayout, zerocopy::Immutable,
        )]
        pub struct $name {
            $(
                $(#[$fmeta])*
                #[doc = ""]
                #[doc = concat!("C: `", $c, ".", stringify!($field), "`.")]
                pub $field: $fty,
            )*
        }
        const _: () = assert!(core::mem::size_of::<$name>() == $size);
        // All zero, as a derived `Default` would be, but also for arrays longer than 32
        // (`[u8; 256]` private data), which have no `Default`.
        impl Default for $name {
            fn default() -> Self {
                zerocopy::FromZeros::new_zeroed()
            }
        }
    )*};
}

pub mod cmds;
pub mod efa;
pub mod ioctl;
pub mod rxe;
pub mod ucma;
pub mod verbs;
pub mod write;
