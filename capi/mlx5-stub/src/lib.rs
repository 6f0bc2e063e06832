//! `libmlx5.so.1` of uverbs, a placeholder until uverbs has an mlx5 provider: rdma-core's
//! mlx5 direct-verbs API (`<infiniband/mlx5dv.h>`), every function answering as rdma-core's
//! libmlx5 answers for a device that is not an mlx5 device. `mlx5dv_is_supported` is false,
//! so pyverbs' mlx5 tests skip ("This is not an MLX5 device") as they do with rdma-core on
//! rxe, and programs linked with `-lmlx5` (pyverbs, perftest) load and run on uverbs'
//! libibverbs.so.1. Debian's own libmlx5.so.1 cannot load there: it imports rdma-core's
//! private provider ABI (`IBVERBS_PRIVATE_*`), which uverbs does not export.
//!
//! The table below is ours: each symbol of rdma-core's `providers/mlx5/libmlx5.map`
//! (master: `MLX5_1.0` ... `MLX5_1.27`; Debian 12's rdma-core 44 exports up to `MLX5_1.24`),
//! at its default version node, with the answer rdma-core's libmlx5 gives when the context
//! or object is not mlx5's:
//!
//! | kind | returns | errno |
//! |------|---------|-------|
//! | `null` | NULL | `EOPNOTSUPP` |
//! | `eopnotsupp` | `EOPNOTSUPP` (an `int`: the mlx5dv convention of a positive errno) | untouched |
//! | `neg_eopnotsupp` | `-EOPNOTSUPP` (`mlx5dv_dump_dr_*`, `mlx5dv_qp_cancel_posted_send_wrs`: "-errno on error") | untouched |
//! | `minus_one` | -1 (an `int` file descriptor) | `EOPNOTSUPP` |
//! | `minus_one_ssize` | -1 (`ssize_t`, `mlx5dv_devx_get_event`) | `EOPNOTSUPP` |
//! | `no` | false (`mlx5dv_is_supported`) | untouched |
//! | `nothing` | (void: destroy/free of objects this library never makes) | untouched |
//! | `custom` | written out below the table | |
//!
//! Where rdma-core needs no device (`mlx5dv_dr_action_create_drop`, `_tag`, `_pop_vlan`,
//! `_default_miss` allocate an action; `mlx5dv_qp_ex_from_ibv_qp_ex` is pointer arithmetic
//! on mlx5's QP), the placeholder still answers NULL with `EOPNOTSUPP`: such an object is of
//! no use without an mlx5 domain or QP, which nothing here creates. rdma-core's hidden
//! compatibility version `mlx5dv_init_obj@MLX5_1.0` (programs linked before rdma-core 15) is
//! not provided, as capi/libibverbs.map provides none of libibverbs' either.
//!
//! Arguments are declared with the header's ABI classes (pointers as `*mut c_void`, `bool`
//! as `u8`, enums as `c_uint`) and ignored but for the two `custom` functions. Ignoring
//! arguments is ABI-safe for the callee on the targets uverbs supports (x86-64 System V and
//! AArch64 AAPCS64): arguments arrive in registers or in the caller's stack frame, which the
//! caller allocates and releases, so a callee that reads fewer of them leaves nothing behind.
//! Nothing here can panic; with the version script (capi/libmlx5.map) every symbol but the
//! table's is local, and unused code is dropped at link time.

use core::ffi::{c_int, c_uint, c_void};
use core::ptr;

use libc::{EINVAL, EOPNOTSUPP};

type P = *mut c_void;

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno, valid for writes for the
    // thread's lifetime.
    unsafe { *libc::__errno_location() = e };
}

macro_rules! not_mlx5 {
    ($( $node:literal { $( $name:ident ( $($arg:ident : $ty:ty),* ) => $kind:ident; )* } )*) => {
        $( $( not_mlx5!(@fn $kind $name ($($arg: $ty),*)); )* )*

        /// (version node, symbol) of every function this library exports, in
        /// capi/libmlx5.map's order.
        pub const SYMBOLS: &[(&str, &str)] = &[ $( $( ($node, stringify!($name)), )* )* ];
    };
    (@fn null $name:ident ($($arg:ident : $ty:ty),*)) => {
        /// Not an mlx5 device: NULL, errno `EOPNOTSUPP`.
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> P {
            set_errno(EOPNOTSUPP);
            ptr::null_mut()
        }
    };
    (@fn eopnotsupp $name:ident ($($arg:ident : $ty:ty),*)) => {
        /// Not an mlx5 device: `EOPNOTSUPP`.
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> c_int {
            EOPNOTSUPP
        }
    };
    (@fn neg_eopnotsupp $name:ident ($($arg:ident : $ty:ty),*)) => {
        /// Not an mlx5 device: `-EOPNOTSUPP`.
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> c_int {
            -EOPNOTSUPP
        }
    };
    (@fn minus_one $name:ident ($($arg:ident : $ty:ty),*)) => {
        /// Not an mlx5 device: -1, errno `EOPNOTSUPP`.
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> c_int {
            set_errno(EOPNOTSUPP);
            -1
        }
    };
    (@fn minus_one_ssize $name:ident ($($arg:ident : $ty:ty),*)) => {
        /// Not an mlx5 device: -1, errno `EOPNOTSUPP`.
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> isize {
            set_errno(EOPNOTSUPP);
            -1
        }
    };
    (@fn no $name:ident ($($arg:ident : $ty:ty),*)) => {
        /// Not an mlx5 device.
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> bool {
            false
        }
    };
    (@fn nothing $name:ident ($($arg:ident : $ty:ty),*)) => {
        /// Nothing to release: this library never hands out the object.
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) {}
    };
    (@fn custom $name:ident ($($arg:ident : $ty:ty),*)) => {};
}

not_mlx5! {
    "MLX5_1.0" {
        mlx5dv_query_device(_ctx_in: P, _attrs_out: P) => eopnotsupp;
    }
    "MLX5_1.1" {
        mlx5dv_create_cq(_context: P, _cq_attr: P, _mlx5_cq_attr: P) => null;
    }
    "MLX5_1.2" {
        mlx5dv_init_obj(_obj: P, _obj_type: u64) => custom;
        mlx5dv_set_context_attr(_context: P, _type: c_uint, _attr: P) => eopnotsupp;
    }
    "MLX5_1.3" {
        mlx5dv_create_qp(_context: P, _qp_attr: P, _mlx5_qp_attr: P) => null;
        mlx5dv_create_wq(_context: P, _wq_init_attr: P, _mlx5_wq_attr: P) => null;
    }
    "MLX5_1.4" {
        mlx5dv_get_clock_info(_context: P, _clock_info: P) => eopnotsupp;
    }
    "MLX5_1.5" {
        mlx5dv_create_flow_action_esp(_ctx: P, _esp: P, _mlx5_attr: P) => null;
    }
    "MLX5_1.6" {
        mlx5dv_create_flow_matcher(_context: P, _matcher_attr: P) => null;
        mlx5dv_destroy_flow_matcher(_matcher: P) => eopnotsupp;
        mlx5dv_create_flow(_matcher: P, _match_value: P, _num_actions: usize, _actions_attr: P) => null;
    }
    "MLX5_1.7" {
        mlx5dv_create_flow_action_modify_header(_ctx: P, _actions_sz: usize, _actions: P, _ft_type: c_uint) => null;
        mlx5dv_create_flow_action_packet_reformat(_ctx: P, _data_sz: usize, _data: P, _reformat_type: c_uint, _ft_type: c_uint) => null;
        mlx5dv_devx_alloc_uar(_context: P, _flags: u32) => null;
        mlx5dv_devx_free_uar(_devx_uar: P) => nothing;
        mlx5dv_devx_general_cmd(_context: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_obj_create(_context: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => null;
        mlx5dv_devx_obj_destroy(_obj: P) => eopnotsupp;
        mlx5dv_devx_obj_modify(_obj: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_obj_query(_obj: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_query_eqn(_context: P, _vector: u32, _eqn: P) => eopnotsupp;
        mlx5dv_devx_umem_dereg(_umem: P) => eopnotsupp;
        mlx5dv_devx_umem_reg(_ctx: P, _addr: P, _size: usize, _access: u32) => null;
        mlx5dv_open_device(_device: P, _attr: P) => null;
    }
    "MLX5_1.8" {
        mlx5dv_devx_cq_modify(_cq: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_cq_query(_cq: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_ind_tbl_modify(_ind_tbl: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_ind_tbl_query(_ind_tbl: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_qp_modify(_qp: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_qp_query(_qp: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_srq_modify(_srq: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_srq_query(_srq: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_wq_modify(_wq: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_devx_wq_query(_wq: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => eopnotsupp;
        mlx5dv_is_supported(_device: P) => no;
    }
    "MLX5_1.9" {
        mlx5dv_devx_create_cmd_comp(_context: P) => null;
        mlx5dv_devx_destroy_cmd_comp(_cmd_comp: P) => nothing;
        mlx5dv_devx_get_async_cmd_comp(_cmd_comp: P, _cmd_resp: P, _cmd_resp_len: usize) => eopnotsupp;
        mlx5dv_devx_obj_query_async(_obj: P, _in: P, _inlen: usize, _outlen: usize, _wr_id: u64, _cmd_comp: P) => eopnotsupp;
    }
    "MLX5_1.10" {
        mlx5dv_alloc_dm(_context: P, _dm_attr: P, _mlx5_dm_attr: P) => null;
        mlx5dv_create_mkey(_mkey_init_attr: P) => null;
        mlx5dv_destroy_mkey(_mkey: P) => eopnotsupp;
        mlx5dv_dr_action_create_dest_table(_table: P) => null;
        mlx5dv_dr_action_create_dest_ibv_qp(_ibqp: P) => null;
        mlx5dv_dr_action_create_dest_vport(_domain: P, _vport: u32) => null;
        mlx5dv_dr_action_create_flow_counter(_devx_obj: P, _offset: u32) => null;
        mlx5dv_dr_action_create_drop() => null;
        mlx5dv_dr_action_create_modify_header(_domain: P, _flags: u32, _actions_sz: usize, _actions: P) => null;
        mlx5dv_dr_action_create_packet_reformat(_domain: P, _flags: u32, _reformat_type: c_uint, _data_sz: usize, _data: P) => null;
        mlx5dv_dr_action_create_tag(_tag_value: u32) => null;
        mlx5dv_dr_action_destroy(_action: P) => eopnotsupp;
        mlx5dv_dr_domain_create(_ctx: P, _type: c_uint) => null;
        mlx5dv_dr_domain_destroy(_domain: P) => eopnotsupp;
        mlx5dv_dr_domain_sync(_domain: P, _flags: u32) => eopnotsupp;
        mlx5dv_dr_matcher_create(_table: P, _priority: u16, _match_criteria_enable: u8, _mask: P) => null;
        mlx5dv_dr_matcher_destroy(_matcher: P) => eopnotsupp;
        mlx5dv_dr_rule_create(_matcher: P, _value: P, _num_actions: usize, _actions: P) => null;
        mlx5dv_dr_rule_destroy(_rule: P) => eopnotsupp;
        mlx5dv_dr_table_create(_domain: P, _level: u32) => null;
        mlx5dv_dr_table_destroy(_table: P) => eopnotsupp;
        mlx5dv_qp_ex_from_ibv_qp_ex(_qp: P) => null;
    }
    "MLX5_1.11" {
        mlx5dv_devx_create_event_channel(_context: P, _flags: c_uint) => null;
        mlx5dv_devx_destroy_event_channel(_event_channel: P) => nothing;
        mlx5dv_devx_get_event(_event_channel: P, _event_data: P, _event_resp_len: usize) => minus_one_ssize;
        mlx5dv_devx_subscribe_devx_event(_event_channel: P, _obj: P, _events_sz: u16, _events_num: P, _cookie: u64) => eopnotsupp;
        mlx5dv_devx_subscribe_devx_event_fd(_event_channel: P, _fd: c_int, _obj: P, _event_num: u16) => eopnotsupp;
    }
    "MLX5_1.12" {
        mlx5dv_alloc_var(_context: P, _flags: u32) => null;
        mlx5dv_dr_action_create_flow_meter(_attr: P) => null;
        mlx5dv_dr_action_modify_flow_meter(_action: P, _attr: P, _modify_field_select: u64) => eopnotsupp;
        mlx5dv_dump_dr_domain(_fout: P, _domain: P) => neg_eopnotsupp;
        mlx5dv_dump_dr_matcher(_fout: P, _matcher: P) => neg_eopnotsupp;
        mlx5dv_dump_dr_rule(_fout: P, _rule: P) => neg_eopnotsupp;
        mlx5dv_dump_dr_table(_fout: P, _table: P) => neg_eopnotsupp;
        mlx5dv_free_var(_dv_var: P) => nothing;
    }
    "MLX5_1.13" {
        mlx5dv_pp_alloc(_context: P, _pp_context_sz: usize, _pp_context: P, _flags: u32) => null;
        mlx5dv_pp_free(_pp: P) => nothing;
    }
    "MLX5_1.14" {
        mlx5dv_dr_action_create_default_miss() => null;
        mlx5dv_dr_domain_set_reclaim_device_memory(_dmn: P, _enable: u8) => nothing;
        mlx5dv_modify_qp_lag_port(_qp: P, _port_num: u8) => eopnotsupp;
        mlx5dv_query_qp_lag_port(_qp: P, _port_num: P, _active_port_num: P) => eopnotsupp;
    }
    "MLX5_1.15" {
        mlx5dv_dr_action_create_dest_devx_tir(_devx_obj: P) => null;
    }
    "MLX5_1.16" {
        mlx5dv_dr_action_create_dest_array(_domain: P, _num_dest: usize, _dests: P) => null;
        mlx5dv_dr_action_create_flow_sampler(_attr: P) => null;
    }
    "MLX5_1.17" {
        mlx5dv_dr_action_create_aso(_domain: P, _devx_obj: P, _offset: u32, _flags: u32, _return_reg_c: u8) => null;
        mlx5dv_dr_action_create_pop_vlan() => null;
        mlx5dv_dr_action_create_push_vlan(_domain: P, _vlan_hdr: u32) => null;
        mlx5dv_dr_action_modify_aso(_action: P, _offset: u32, _flags: u32, _return_reg_c: u8) => eopnotsupp;
        mlx5dv_modify_qp_sched_elem(_qp: P, _requestor: P, _responder: P) => eopnotsupp;
        mlx5dv_modify_qp_udp_sport(_qp: P, _udp_sport: u16) => eopnotsupp;
        mlx5dv_sched_leaf_create(_context: P, _sched_attr: P) => null;
        mlx5dv_sched_leaf_destroy(_leaf: P) => eopnotsupp;
        mlx5dv_sched_leaf_modify(_leaf: P, _sched_attr: P) => eopnotsupp;
        mlx5dv_sched_node_create(_context: P, _sched_attr: P) => null;
        mlx5dv_sched_node_destroy(_node: P) => eopnotsupp;
        mlx5dv_sched_node_modify(_node: P, _sched_attr: P) => eopnotsupp;
    }
    "MLX5_1.18" {
        mlx5dv_reserved_qpn_alloc(_ctx: P, _qpn: P) => eopnotsupp;
        mlx5dv_reserved_qpn_dealloc(_ctx: P, _qpn: u32) => eopnotsupp;
    }
    "MLX5_1.19" {
        mlx5dv_devx_umem_reg_ex(_ctx: P, _umem_in: P) => null;
        mlx5dv_dm_map_op_addr(_dm: P, _op: u8) => null;
        _mlx5dv_query_port(_context: P, _port_num: u32, _info: P, _info_len: usize) => eopnotsupp;
    }
    "MLX5_1.20" {
        mlx5dv_dr_domain_allow_duplicate_rules(_domain: P, _allow: u8) => nothing;
        mlx5dv_map_ah_to_qp(_ah: P, _qp_num: u32) => eopnotsupp;
        mlx5dv_qp_cancel_posted_send_wrs(_mqp: P, _wr_id: u64) => neg_eopnotsupp;
        _mlx5dv_mkey_check(_mkey: P, _err_info: P, _err_info_size: usize) => eopnotsupp;
    }
    "MLX5_1.21" {
        mlx5dv_crypto_login(_context: P, _login_attr: P) => eopnotsupp;
        mlx5dv_crypto_login_query_state(_context: P, _state: P) => eopnotsupp;
        mlx5dv_crypto_logout(_context: P) => eopnotsupp;
        mlx5dv_dci_stream_id_reset(_qp: P, _stream_id: u16) => eopnotsupp;
        mlx5dv_dek_create(_context: P, _init_attr: P) => null;
        mlx5dv_dek_destroy(_dek: P) => eopnotsupp;
        mlx5dv_dek_query(_dek: P, _attr: P) => eopnotsupp;
        mlx5dv_dr_action_create_dest_ib_port(_domain: P, _ib_port: u32) => null;
        mlx5dv_dr_matcher_set_layout(_matcher: P, _layout: P) => eopnotsupp;
        mlx5dv_get_vfio_device_list(_attr: P) => null;
        mlx5dv_vfio_get_events_fd(_ibctx: P) => minus_one;
        mlx5dv_vfio_process_events(_context: P) => eopnotsupp;
    }
    "MLX5_1.22" {
        mlx5dv_dr_aso_other_domain_link(_devx_obj: P, _peer_dmn: P, _dmn: P, _flags: u32, _return_reg_c: u8) => eopnotsupp;
        mlx5dv_dr_aso_other_domain_unlink(_devx_obj: P, _dmn: P) => eopnotsupp;
    }
    "MLX5_1.23" {
        mlx5dv_devx_alloc_msi_vector(_ibctx: P) => null;
        mlx5dv_devx_create_eq(_ibctx: P, _in: P, _inlen: usize, _out: P, _outlen: usize) => null;
        mlx5dv_devx_destroy_eq(_eq: P) => eopnotsupp;
        mlx5dv_devx_free_msi_vector(_msi: P) => eopnotsupp;
    }
    "MLX5_1.24" {
        mlx5dv_create_steering_anchor(_context: P, _attr: P) => null;
        mlx5dv_crypto_login_create(_context: P, _login_attr: P) => null;
        mlx5dv_crypto_login_destroy(_crypto_login: P) => eopnotsupp;
        mlx5dv_crypto_login_query(_crypto_login: P, _query_attr: P) => eopnotsupp;
        mlx5dv_destroy_steering_anchor(_sa: P) => eopnotsupp;
        mlx5dv_dr_action_create_dest_root_table(_table: P, _priority: u16) => null;
    }
    "MLX5_1.25" {
        mlx5dv_get_data_direct_sysfs_path(_context: P, _buf: P, _buf_len: usize) => eopnotsupp;
        mlx5dv_reg_dmabuf_mr(_pd: P, _offset: u64, _length: usize, _iova: u64, _fd: c_int, _access: c_int, _mlx5_access: c_int) => null;
    }
    "MLX5_1.25.1" {
        __mlx5dv_create_flow(_matcher: P, _match_value: P, _num_actions: usize, _actions_attr: P, _attr_len: usize) => null;
    }
    "MLX5_1.26" {
        mlx5dv_devx_uar_export_dmabuf_fd(_devx_uar: P) => minus_one;
    }
    "MLX5_1.27" {
        _mlx5dv_get_export_sizes(_sizes: P, _sizes_len: usize) => custom;
        mlx5dv_devx_obj_export(_obj: P, _data: P) => eopnotsupp;
        mlx5dv_devx_obj_import(_context: P, _data: P) => null;
        mlx5dv_devx_obj_unimport(_obj: P) => nothing;
        mlx5dv_devx_umem_export(_umem: P, _data: P) => eopnotsupp;
        mlx5dv_devx_umem_import(_context: P, _data: P) => null;
        mlx5dv_devx_umem_unimport(_umem: P) => nothing;
        mlx5dv_var_export(_dv_var: P, _data: P) => eopnotsupp;
        mlx5dv_var_import(_context: P, _data: P) => null;
        mlx5dv_var_unimport(_dv_var: P) => nothing;
    }
}

/// The `MLX5DV_OBJ_*` bits (`QP` ... `DEVX`) that name an object whose context libmlx5 looks up.
const MLX5DV_OBJ_KNOWN: u64 = 0xff;

/// `EINVAL` when `obj_type` names no object (libmlx5 finds no context to ask), else
/// `EOPNOTSUPP`: the object is not mlx5's. `obj` is not read.
#[no_mangle]
pub extern "C" fn mlx5dv_init_obj(_obj: P, obj_type: u64) -> c_int {
    if obj_type & MLX5DV_OBJ_KNOWN == 0 {
        EINVAL
    } else {
        EOPNOTSUPP
    }
}

/// Zeroes `*sizes` (`sizes_len` bytes): no object of this library can be exported, so every
/// export size is 0. rdma-core fills in its attribute structs' sizes, device or not.
///
/// # Safety
///
/// `sizes` is NULL or valid for writes of `sizes_len` bytes (the header's
/// `mlx5dv_get_export_sizes` passes `sizeof(struct mlx5dv_export_sizes)`).
#[no_mangle]
pub unsafe extern "C" fn _mlx5dv_get_export_sizes(sizes: P, sizes_len: usize) {
    if !sizes.is_null() {
        // SAFETY: the caller promises `sizes_len` writable bytes at `sizes`.
        unsafe { ptr::write_bytes(sizes.cast::<u8>(), 0, sizes_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// capi/libmlx5.map: (node, globals) in order.
    fn map_nodes() -> Vec<(String, Vec<String>)> {
        let text = include_str!("../../libmlx5.map");
        let mut clean = String::new();
        let mut rest = text;
        while let Some(i) = rest.find("/*") {
            clean.push_str(&rest[..i]);
            rest = rest[i..].split_once("*/").map_or("", |(_, r)| r);
        }
        clean.push_str(rest);
        let mut nodes = Vec::new();
        let mut rest = clean.as_str();
        while let Some((head, body)) = rest.split_once('{') {
            let (body, after) = body.split_once('}').unwrap();
            let node = head.split(';').next_back().unwrap().trim().to_string();
            let body = body.split("local:").next().unwrap().replace("global:", "");
            let names = body
                .split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            nodes.push((node, names));
            rest = after;
        }
        nodes
    }

    #[test]
    fn the_version_script_lists_the_table() {
        let from_map: Vec<(String, String)> = map_nodes()
            .into_iter()
            .flat_map(|(node, names)| names.into_iter().map(move |n| (node.clone(), n)))
            .collect();
        let from_table: Vec<(String, String)> = SYMBOLS
            .iter()
            .map(|(v, n)| (v.to_string(), n.to_string()))
            .collect();
        assert_eq!(from_map, from_table);
        let mut names: Vec<&str> = SYMBOLS.iter().map(|(_, n)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SYMBOLS.len(), "a symbol in two nodes");
    }

    #[test]
    fn answers_are_not_an_mlx5_device() {
        let p = ptr::null_mut();
        assert!(!mlx5dv_is_supported(p));
        set_errno(0);
        assert!(mlx5dv_open_device(p, p).is_null());
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(EOPNOTSUPP)
        );
        assert_eq!(mlx5dv_query_device(p, p), EOPNOTSUPP);
        assert_eq!(_mlx5dv_query_port(p, 1, p, 0), EOPNOTSUPP);
        assert_eq!(mlx5dv_dump_dr_domain(p, p), -EOPNOTSUPP);
        set_errno(0);
        assert_eq!(mlx5dv_devx_get_event(p, p, 0), -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(EOPNOTSUPP)
        );
        assert_eq!(mlx5dv_init_obj(p, 0), EINVAL);
        assert_eq!(mlx5dv_init_obj(p, 1 << 1), EOPNOTSUPP);
        let mut sizes = [0xffu32; 3];
        // SAFETY: `sizes` is 12 writable bytes.
        unsafe { _mlx5dv_get_export_sizes(sizes.as_mut_ptr().cast(), 12) };
        assert_eq!(sizes, [0; 3]);
    }
}
