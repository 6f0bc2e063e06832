//! `libefa.so.1` of uverbs: rdma-core's libefa API, each `efadv_X` a jump to `uverbs_efadv_X`,
//! which uverbs' `libibverbs.so.1` exports under its private version node
//! `UVERBS_PRIVATE_EFA_1` (capi/libibverbs-efa.map.part). The EFA verbs live in libibverbs
//! because they work on its objects; this library only gives them libefa's soname and symbol
//! versions (capi/libefa.map), so programs linked with `-lefa` find them.
//!
//! Pointer arguments are `*mut c_void`: the shim never looks at the structs, it passes them on.
//! Nothing here can panic (each function is one call); with the version script every symbol
//! but the `efadv_*` ones is local, and unused code is dropped at link time.
#![allow(clippy::missing_safety_doc)]

use core::ffi::{c_int, c_void};

type P = *mut c_void;

macro_rules! shim {
    ($( $name:ident => $target:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        extern "C" {
            $( fn $target($($arg: $ty),*) -> $ret; )*
        }
        $(
            /// Forwards to uverbs' `libibverbs.so.1`.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                // SAFETY: the same arguments, under the caller's promises, to the same call.
                unsafe { $target($($arg),*) }
            }
        )*
    };
}

shim! {
    efadv_create_driver_qp => uverbs_efadv_create_driver_qp(pd: P, attr: P, driver_qp_type: u32) -> P;
    efadv_create_qp_ex => uverbs_efadv_create_qp_ex(ctx: P, attr_ex: P, efa_attr: P, inlen: u32) -> P;
    efadv_query_ah => uverbs_efadv_query_ah(ah: P, attr: P, inlen: u32) -> c_int;
    efadv_query_device => uverbs_efadv_query_device(ctx: P, attr: P, inlen: u32) -> c_int;
    efadv_cq_from_ibv_cq_ex => uverbs_efadv_cq_from_ibv_cq_ex(cq: P) -> P;
    efadv_create_cq => uverbs_efadv_create_cq(ctx: P, attr_ex: P, efa_attr: P, inlen: u32) -> P;
    efadv_query_mr => uverbs_efadv_query_mr(mr: P, attr: P, inlen: u32) -> c_int;
    efadv_query_qp_wqs => uverbs_efadv_query_qp_wqs(qp: P, sq_attr: P, rq_attr: P, inlen: u32) -> c_int;
    efadv_query_cq => uverbs_efadv_query_cq(cq: P, attr: P, inlen: u32) -> c_int;
    efadv_get_max_sq_depth => uverbs_efadv_get_max_sq_depth(ctx: P, attr: P, inlen: u32) -> c_int;
    efadv_get_max_rq_depth => uverbs_efadv_get_max_rq_depth(ctx: P, attr: P, inlen: u32) -> c_int;
    efadv_qp_from_ibv_qp_ex => uverbs_efadv_qp_from_ibv_qp_ex(qp: P) -> P;
    efadv_create_comp_cntr => uverbs_efadv_create_comp_cntr(ctx: P, attr: P, efa_attr: P, inlen: u32) -> P;
}
