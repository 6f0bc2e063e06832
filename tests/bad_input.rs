//! What the kernel rejects, reached through the raw API, and objects closed in the wrong order:
//! each must come back as a typed error naming the operation, the object and the reason.

mod common;

use common::*;
use uverbs::channel::IoctlCmd;
use uverbs::uapi::cmds::{
    UVERBS_ATTR_QUERY_PORT_PORT_NUM, UVERBS_ATTR_QUERY_PORT_RESP, UVERBS_METHOD_QUERY_PORT,
    UVERBS_OBJECT_DEVICE,
};
use uverbs::uapi::verbs::IbUverbsQueryPortRespEx;
use uverbs::{raw, AccessFlags, Context, Errno};

/// Builds a valid QUERY_PORT call, lets `spoil` alter it, sends it exactly as left.
fn query_port_with(
    ctx: &Context,
    spoil: impl FnOnce(&mut IoctlCmd<'_>),
) -> uverbs::Result<IbUverbsQueryPortRespEx> {
    let mut resp = IbUverbsQueryPortRespEx::default();
    {
        let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
        cmd.const_u64(UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
            .ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp);
        spoil(&mut cmd);
        raw::ioctl_unchecked(ctx, "query_port", &mut cmd)?;
    }
    Ok(resp)
}

/// One change to an otherwise valid call.
type Spoil = Box<dyn FnOnce(&mut IoctlCmd<'_>)>;

fn driver_id(ctx: &Context) -> u32 {
    ctx.channel().driver_id()
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn kernel_ioctl_rejections_are_reported_with_their_errno() {
    let ctx = rxe_context();
    let d = driver_id(&ctx);

    // The well-formed call works, so each failure below is due to its one change.
    let ok = query_port_with(&ctx, |c| c.finalize(d).unwrap()).unwrap();
    assert_ne!(ok.legacy_resp.state, 0, "port state must be filled in");

    let cases: Vec<(&str, Errno, Spoil)> = vec![
        (
            "header length wrong",
            Errno::INVAL,
            Box::new(move |c| {
                c.finalize(d).unwrap();
                c.raw_header_mut().length += 16;
            }),
        ),
        (
            "reserved1 non-zero",
            Errno::PROTONOSUPPORT,
            Box::new(move |c| {
                c.finalize(d).unwrap();
                c.raw_header_mut().reserved1 = 1;
            }),
        ),
        (
            "reserved2 non-zero",
            Errno::PROTONOSUPPORT,
            Box::new(move |c| {
                c.finalize(d).unwrap();
                c.raw_header_mut().reserved2 = 1;
            }),
        ),
        (
            "driver id mismatch",
            Errno::INVAL,
            Box::new(move |c| {
                c.finalize(d).unwrap();
                c.raw_header_mut().driver_id = d + 1;
            }),
        ),
        (
            "unknown object",
            Errno::PROTONOSUPPORT,
            Box::new(move |c| {
                c.finalize(d).unwrap();
                c.raw_header_mut().object_id = 0x0fff;
            }),
        ),
        (
            "unknown method",
            Errno::PROTONOSUPPORT,
            Box::new(move |c| {
                c.finalize(d).unwrap();
                c.raw_header_mut().method_id = 0x0fff;
            }),
        ),
        (
            "unknown mandatory attribute",
            Errno::PROTONOSUPPORT,
            Box::new(move |c| {
                c.const_u64(0x0777, 1);
                c.finalize(d).unwrap();
            }),
        ),
        (
            "missing mandatory attribute",
            Errno::INVAL,
            Box::new(move |c| {
                c.finalize(d).unwrap();
                // Drop the RESP attribute from the count: the kernel sees only PORT_NUM.
                c.raw_header_mut().num_attrs = 1;
                c.raw_header_mut().length -= 16;
            }),
        ),
    ];
    for (what, want, spoil) in cases {
        let e = query_port_with(&ctx, spoil).unwrap_err();
        assert!(e.is(want), "{what}: want {want:?}, got {e}");
        assert_eq!(e.op(), "query_port", "{what}: {e}");
        assert!(e.object().starts_with("device rxe"), "{what}: {e}");
    }

    // An unknown attribute that is not mandatory is ignored, as the kernel documents.
    let r = query_port_with(&ctx, |c| {
        c.const_u64(0x0777, 1).optional();
        c.finalize(d).unwrap();
    });
    assert!(r.is_ok(), "optional unknown attribute: {r:?}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn encoding_errors_are_caught_before_the_kernel() {
    let ctx = rxe_context();
    let mut resp = IbUverbsQueryPortRespEx::default();
    let mut cmd = IoctlCmd::new(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
    cmd.const_u64(UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
        .const_u64(UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
        .ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp);
    let e = raw::ioctl(&ctx, "query_port", &mut cmd).unwrap_err();
    assert!(e.is(Errno::INVAL) && e.reason().contains("twice"), "{e}");
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn raw_destroy_in_the_wrong_order_is_refused_clearly() {
    let ctx = rxe_context();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();

    // The PD still has an MR: the kernel refuses, and we say why.
    let e = raw::dealloc_pd(&ctx, pd.handle()).unwrap_err();
    assert!(e.is(Errno::BUSY), "{e}");
    assert_eq!(e.op(), "dealloc_pd");
    assert!(
        e.object().starts_with(&format!("pd {}", pd.handle())),
        "{e}"
    );
    assert!(e.reason().contains("still exist"), "{e}");

    // Children first, then the parent, all through the raw API.
    raw::dereg_mr(&ctx, mr.handle()).unwrap();
    let e = raw::dereg_mr(&ctx, mr.handle()).unwrap_err();
    assert!(e.reason().contains("already destroyed"), "{e}");
    // The safe wrapper's own deregistration now fails, and says so instead of panicking.
    let e = mr.dereg().unwrap_err();
    assert_eq!(e.error().op(), "dereg_mr");
    // It hands the MR back; dropping it tries once more, and reports that failure too.
    let before = uverbs::drop_error_count();
    drop(e);
    assert_eq!(uverbs::drop_error_count(), before + 1);

    let cq = ctx.create_cq(8, None, 0).unwrap();
    raw::destroy_cq(&ctx, cq.handle()).unwrap();
    let e = raw::destroy_cq(&ctx, cq.handle()).unwrap_err();
    assert!(e.reason().contains("unknown or already destroyed"), "{e}");
    let before = uverbs::drop_error_count();
    drop(cq); // its kernel object is gone: the failure is reported, not ignored
    assert_eq!(uverbs::drop_error_count(), before + 1);
}

#[test]
#[ignore = "needs an RDMA device: runs in the soft-RoCE VM (cargo xtask test)"]
fn kernel_objects_do_not_leak() {
    // `rdma resource show` counts the kernel objects of every process; ours must come back to
    // where they started after many create/destroy cycles.
    // The kernel records the creating task, which is this test's thread, not the process.
    let tid = common::leaks::thread_id();
    let count = |kind: &str| common::leaks::kernel_objects_of_task(kind, &tid);
    let ctx0 = rxe_context();
    let (pd0, cq0, mr0) = (count("pd"), count("cq"), count("mr"));
    for _ in 0..100 {
        let ctx = rxe_context();
        let pd = ctx.alloc_pd().unwrap();
        let _mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
        let _cq = ctx.create_cq(4, None, 0).unwrap();
        let ch = ctx.create_comp_channel().unwrap();
        let _cq2 = ctx.create_cq(4, Some(&ch), 0).unwrap();
    }
    {
        let pd = ctx0.alloc_pd().unwrap();
        let _mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
        assert_eq!(count("pd"), pd0 + 1, "the count must see our objects");
        assert_eq!(count("mr"), mr0 + 1);
    }
    assert_eq!((count("pd"), count("cq"), count("mr")), (pd0, cq0, mr0));
}
