//! The function tables of a context: `ibv_context.ops` (the data path the header's inline
//! functions call: post, poll, notify) and `verbs_context` (the extended verbs the header
//! finds with `verbs_get_ctx_op`). A NULL entry is a verb this library does not have; the
//! header answers it with EOPNOTSUPP, as rdma-core does for a provider without it.

use crate::abi::verbs_context;

/// Fills the tables of a new context; `rxe` chooses the poll with rxe's guard-free common
/// step, else EFA's (its one-completion poll inline in the entry point).
pub fn fill(v: &mut verbs_context, rxe: bool) {
    let ops = &mut v.context.ops;
    ops.poll_cq = Some(if rxe {
        crate::cq::poll_cq
    } else {
        crate::cq::poll_cq_efa
    });
    ops.req_notify_cq = Some(crate::cq::req_notify_cq);
    ops.post_send = Some(crate::qp::post_send);
    ops.post_recv = Some(crate::qp::post_recv);
    ops.post_srq_recv = Some(crate::srq::post_srq_recv);
    ops.alloc_mw = Some(crate::mr::alloc_mw);
    ops.dealloc_mw = Some(crate::mr::dealloc_mw);
    ops.bind_mw = Some(crate::mr::bind_mw);

    v.query_port = Some(crate::query::query_port);
    v.query_device_ex = Some(crate::query::query_device_ex);
    v.create_cq_ex = Some(crate::cq::create_cq_ex);
    v.create_qp_ex = Some(crate::qp::create_qp_ex);
    v.create_srq_ex = Some(crate::srq::create_srq_ex);
    v.get_srq_num = Some(crate::srq::get_srq_num);
    v.open_xrcd = Some(crate::xrcd::open_xrcd);
    v.close_xrcd = Some(crate::xrcd::close_xrcd);
}
