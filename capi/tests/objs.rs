//! MRs, MWs, AHs, SRQs and XRCDs through the C entry points, on the stand-in rxe kernel
//! (PDs and MRs; it refuses the other objects' commands as a kernel without them would) and
//! on the EFA device model (AHs, the GID table, identity-mapped MRs). SRQ posting, memory
//! window binding and XRC need a kernel that has them: they run in the VM.

use core::ffi::{c_int, c_void};
use core::ptr;

use uverbs::uapi::ucma::IbUserPathRec;
use uverbs::uapi::write::{IbUverbsAhAttr, IbUverbsQpAttr};
use uverbs_capi::abi::*;
use uverbs_capi::wrap_context;
use uverbs_efa_model::{EfaDevice, EfaFabric};
use uverbs_rxe_standin::RxeStandin;

// The entry points as a C program declares them (the header's prototypes).
extern "C" {
    fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
    fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
    fn ibv_close_device(ctx: *mut ibv_context) -> c_int;
    fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, access: c_int) -> *mut ibv_mr;
    fn ibv_reg_mr_iova(
        pd: *mut ibv_pd,
        addr: *mut c_void,
        len: usize,
        iova: u64,
        access: c_int,
    ) -> *mut ibv_mr;
    fn ibv_reg_mr_iova2(
        pd: *mut ibv_pd,
        addr: *mut c_void,
        len: usize,
        iova: u64,
        access: u32,
    ) -> *mut ibv_mr;
    fn ibv_reg_dmabuf_mr(
        pd: *mut ibv_pd,
        offset: u64,
        len: usize,
        iova: u64,
        fd: c_int,
        access: c_int,
    ) -> *mut ibv_mr;
    fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int;
    fn ibv_rereg_mr(
        mr: *mut ibv_mr,
        flags: c_int,
        pd: *mut ibv_pd,
        addr: *mut c_void,
        len: usize,
        access: c_int,
    ) -> c_int;
    fn ibv_import_pd(ctx: *mut ibv_context, handle: u32) -> *mut ibv_pd;
    fn ibv_import_mr(pd: *mut ibv_pd, handle: u32) -> *mut ibv_mr;
    fn ibv_import_dm(ctx: *mut ibv_context, handle: u32) -> *mut c_void;
    fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context;
    fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah;
    fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int;
    fn ibv_init_ah_from_wc(
        ctx: *mut ibv_context,
        port: u8,
        wc: *mut ibv_wc,
        grh: *mut ibv_grh,
        attr: *mut ibv_ah_attr,
    ) -> c_int;
    fn ibv_create_ah_from_wc(
        pd: *mut ibv_pd,
        wc: *mut ibv_wc,
        grh: *mut ibv_grh,
        port: u8,
    ) -> *mut ibv_ah;
    fn ibv_resolve_eth_l2_from_gid(
        ctx: *mut ibv_context,
        attr: *mut ibv_ah_attr,
        mac: *mut u8,
        vid: *mut u16,
    ) -> c_int;
    fn ibv_copy_ah_attr_from_kern(dst: *mut ibv_ah_attr, src: *const IbUverbsAhAttr);
    fn ibv_copy_qp_attr_from_kern(dst: *mut ibv_qp_attr, src: *const IbUverbsQpAttr);
    fn ibv_copy_path_rec_from_kern(dst: *mut ibv_sa_path_rec, src: *const IbUserPathRec);
    fn ibv_copy_path_rec_to_kern(dst: *mut IbUserPathRec, src: *const ibv_sa_path_rec);
    fn ibv_create_srq(pd: *mut ibv_pd, init: *mut ibv_srq_init_attr) -> *mut ibv_srq;
    fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int;
    fn ibv_modify_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> c_int;
    fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int;
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A C context on the stand-in rxe kernel.
fn rxe() -> *mut ibv_context {
    let s = RxeStandin::new().expect("stand-in");
    let ctx = s.open().expect("open the stand-in");
    wrap_context(ctx.device().clone(), ctx)
}

/// A C context on an EFA model device (kept alive by the returned fabric and device).
fn efa() -> (*mut ibv_context, EfaFabric, EfaDevice) {
    let fabric = EfaFabric::new(1);
    let dev = fabric.add_device(Default::default());
    let ctx = dev.open().expect("open the model");
    (wrap_context(ctx.device().clone(), ctx), fabric, dev)
}

/// The `verbs_context` a context ends.
fn vctx(ctx: *mut ibv_context) -> *mut verbs_context {
    let off = core::mem::offset_of!(verbs_context, context);
    // SAFETY: every context this library returns is the last field of a verbs_context.
    unsafe { (ctx as *mut u8).sub(off) as *mut verbs_context }
}

fn alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: a live context.
    let pd = unsafe { ibv_alloc_pd(ctx) };
    assert!(!pd.is_null(), "ibv_alloc_pd: errno {}", errno());
    pd
}

const LOCAL_WRITE: c_int = 1;
const REMOTE_WRITE: c_int = 1 << 1;
const RELAXED_ORDERING: c_int = 1 << 20;

#[test]
fn reg_mr_over_a_vec_and_the_busy_pd() {
    let ctx = rxe();
    let pd = alloc_pd(ctx);
    let mut buf = vec![0u8; 8192];
    let addr = buf.as_mut_ptr() as *mut c_void;
    // SAFETY: the buffer outlives the MR (deregistered below).
    let mr = unsafe { ibv_reg_mr(pd, addr, buf.len(), LOCAL_WRITE | REMOTE_WRITE) };
    assert!(!mr.is_null(), "ibv_reg_mr: errno {}", errno());
    // SAFETY: a live MR.
    let m = unsafe { &*mr };
    assert_eq!(m.context, ctx);
    assert_eq!(m.pd, pd);
    assert_eq!(m.addr, addr);
    assert_eq!(m.length, 8192);
    assert_ne!(m.lkey, 0);
    assert_ne!(m.rkey, 0);
    assert_ne!(m.lkey, m.rkey);
    assert_ne!(m.handle, 0);

    // The PD is held by the MR: refused, and still usable.
    // SAFETY: a live PD.
    assert_eq!(unsafe { ibv_dealloc_pd(pd) }, libc::EBUSY);
    // SAFETY: the buffer outlives the MR; the PD is still live after the refusal.
    let mr2 = unsafe { ibv_reg_mr(pd, addr, 4096, LOCAL_WRITE | RELAXED_ORDERING) };
    assert!(
        !mr2.is_null(),
        "ibv_reg_mr on the refused PD: errno {}",
        errno()
    );
    // SAFETY: live MRs, given up.
    unsafe {
        assert_eq!(ibv_dereg_mr(mr2), 0);
        assert_eq!(ibv_dereg_mr(mr), 0);
    }
    // SAFETY: the PD, now unused.
    assert_eq!(unsafe { ibv_dealloc_pd(pd) }, 0);
    // SAFETY: the context, now empty.
    assert_eq!(unsafe { ibv_close_device(ctx) }, 0);
}

#[test]
fn reg_mr_iova_names_the_iova_to_the_kernel() {
    // The model moves data by CPU address and refuses MRs whose iova is not their address:
    // ibv_reg_mr_iova reaches the kernel with the iova, ibv_reg_mr with the address.
    let (ctx, _f, _d) = efa();
    let pd = alloc_pd(ctx);
    let mut buf = vec![0u8; 4096];
    let addr = buf.as_mut_ptr() as *mut c_void;
    // SAFETY: the buffer outlives the MRs.
    unsafe {
        let mr = ibv_reg_mr_iova(pd, addr, 4096, addr as u64 + 4096, LOCAL_WRITE);
        assert!(mr.is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        let mr = ibv_reg_mr_iova2(pd, addr, 4096, addr as u64, LOCAL_WRITE as u32);
        assert!(!mr.is_null(), "errno {}", errno());
        assert_eq!((*mr).addr, addr);
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
}

#[test]
fn null_arguments_are_einval() {
    let ctx = rxe();
    let mut wr = ibv_recv_wr {
        wr_id: 1,
        next: ptr::null_mut(),
        sg_list: ptr::null_mut(),
        num_sge: 0,
    };
    let mut bad: *mut ibv_recv_wr = ptr::null_mut();
    // SAFETY: NULL objects, which every entry point refuses before using anything.
    unsafe {
        assert!(ibv_reg_mr(ptr::null_mut(), ptr::null_mut(), 16, 0).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(ibv_reg_dmabuf_mr(ptr::null_mut(), 0, 16, 0, 3, 0).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(ibv_dereg_mr(ptr::null_mut()), libc::EINVAL);
        assert_eq!(
            ibv_rereg_mr(ptr::null_mut(), 0, ptr::null_mut(), ptr::null_mut(), 0, 0),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        assert!(ibv_create_ah(ptr::null_mut(), ptr::null_mut()).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(ibv_destroy_ah(ptr::null_mut()), libc::EINVAL);
        assert!(ibv_create_srq(ptr::null_mut(), ptr::null_mut()).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(ibv_destroy_srq(ptr::null_mut()), libc::EINVAL);
        assert_eq!(
            ibv_modify_srq(ptr::null_mut(), ptr::null_mut(), 0),
            libc::EINVAL
        );
        assert_eq!(
            ibv_query_srq(ptr::null_mut(), ptr::null_mut()),
            libc::EINVAL
        );
        let ops = &(*ctx).ops;
        let post = ops.post_srq_recv.expect("post_srq_recv");
        assert_eq!(post(ptr::null_mut(), &mut wr, &mut bad), libc::EINVAL);
        assert_eq!(bad, &mut wr as *mut ibv_recv_wr);
        assert!(ops.alloc_mw.expect("alloc_mw")(ptr::null_mut(), 2).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(
            ops.dealloc_mw.expect("dealloc_mw")(ptr::null_mut()),
            libc::EINVAL
        );
        let v = &*vctx(ctx);
        assert!(v.open_xrcd.expect("open_xrcd")(ctx, ptr::null_mut()).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(
            v.close_xrcd.expect("close_xrcd")(ptr::null_mut()),
            libc::EINVAL
        );
        assert!(v.create_srq_ex.expect("create_srq_ex")(ctx, ptr::null_mut()).is_null());
        assert_eq!(errno(), libc::EINVAL);
        let mut n = 0u32;
        assert_eq!(
            v.get_srq_num.expect("get_srq_num")(ptr::null_mut(), &mut n),
            libc::EINVAL
        );
        assert_eq!(ibv_close_device(ctx), 0);
    }
}

#[test]
fn rereg_mr_answers_with_rdma_cores_codes() {
    let ctx = rxe();
    let pd = alloc_pd(ctx);
    let pd2 = alloc_pd(ctx);
    let mut buf = vec![0u8; 4096];
    let addr = buf.as_mut_ptr() as *mut c_void;
    // SAFETY: the buffer outlives the MR; live PDs.
    unsafe {
        let mr = ibv_reg_mr(pd, addr, 4096, LOCAL_WRITE);
        assert!(!mr.is_null());
        let (lkey, rkey) = ((*mr).lkey, (*mr).rkey);
        // Input errors: IBV_REREG_MR_ERR_INPUT (-1), errno EINVAL.
        assert_eq!(ibv_rereg_mr(mr, 1 << 3, pd2, ptr::null_mut(), 0, 0), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(
            ibv_rereg_mr(mr, 1 << 1, pd2, ptr::null_mut(), 0, LOCAL_WRITE),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(
            ibv_rereg_mr(mr, 1 << 0, ptr::null_mut(), ptr::null_mut(), 0, 0),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(
            ibv_rereg_mr(mr, 1 << 1, ptr::null_mut(), ptr::null_mut(), 0, 0),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        // Command errors: IBV_REREG_MR_ERR_CMD (-4) with the errno.
        assert_eq!(
            ibv_rereg_mr(mr, 0, ptr::null_mut(), ptr::null_mut(), 0, 0),
            -4
        );
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(ibv_rereg_mr(mr, 1 << 0, ptr::null_mut(), addr, 4096, 0), -4);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        // The stand-in has no REREG_MR: the kernel's refusal, and the MR is unchanged.
        assert_eq!(ibv_rereg_mr(mr, 1 << 1, pd2, ptr::null_mut(), 0, 0), -4);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!((*mr).pd, pd);
        assert_eq!(((*mr).lkey, (*mr).rkey), (lkey, rkey));
        assert_eq!(ibv_dealloc_pd(pd2), 0);
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
}

#[test]
fn dmabuf_mr_with_no_fd_is_ebadf() {
    let ctx = rxe();
    let pd = alloc_pd(ctx);
    // SAFETY: a live PD.
    unsafe {
        assert!(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, LOCAL_WRITE).is_null());
        assert_eq!(errno(), libc::EBADF);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
}

#[test]
fn imports_are_not_supported() {
    let ctx = rxe();
    // SAFETY: the import entry points read nothing.
    unsafe {
        assert!(ibv_import_pd(ctx, 1).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert!(ibv_import_mr(ptr::null_mut(), 1).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert!(ibv_import_dm(ctx, 1).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert!(ibv_import_device(0).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
    }
}

/// The stand-in answers the commands of MWs, SRQs and XRCDs as a kernel without them:
/// EOPNOTSUPP reaches the program, after this library's own argument checks.
#[test]
fn kernel_refusals_pass_through() {
    let ctx = rxe();
    let pd = alloc_pd(ctx);
    // SAFETY: a live context and PD; attributes of ours.
    unsafe {
        let alloc_mw = (*ctx).ops.alloc_mw.expect("alloc_mw");
        assert!(alloc_mw(pd, 2).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert!(alloc_mw(pd, 3).is_null());
        assert_eq!(errno(), libc::EINVAL);

        let mut init = ibv_srq_init_attr {
            srq_context: ptr::null_mut(),
            attr: ibv_srq_attr {
                max_wr: 16,
                max_sge: 1,
                srq_limit: 0,
            },
        };
        assert!(ibv_create_srq(pd, &mut init).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);

        let v = &*vctx(ctx);
        let open_xrcd = v.open_xrcd.expect("open_xrcd");
        let mut xa = ibv_xrcd_init_attr {
            comp_mask: 1,
            fd: -1,
            oflags: libc::O_CREAT,
        };
        assert!(open_xrcd(ctx, &mut xa).is_null());
        assert_eq!(errno(), libc::EINVAL, "the oflags bit is missing");
        xa.comp_mask = 7;
        assert!(open_xrcd(ctx, &mut xa).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP, "a reserved bit");
        xa.comp_mask = 3;
        assert!(open_xrcd(ctx, &mut xa).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP, "the kernel's answer");

        let create = v.create_srq_ex.expect("create_srq_ex");
        // SAFETY: all-zero is a valid init attribute.
        let mut ex: ibv_srq_init_attr_ex = core::mem::zeroed();
        ex.attr.max_wr = 16;
        ex.attr.max_sge = 1;
        assert!(create(ctx, &mut ex).is_null());
        assert_eq!(errno(), libc::EINVAL, "no PD");
        ex.comp_mask = 1 << 1 | 1 << 0; // PD, TYPE
        ex.pd = pd;
        ex.srq_type = 1; // XRC, without XRCD and CQ
        assert!(create(ctx, &mut ex).is_null());
        assert_eq!(errno(), libc::EINVAL, "XRC without XRCD and CQ");
        ex.srq_type = 7;
        assert!(create(ctx, &mut ex).is_null());
        assert_eq!(errno(), libc::EINVAL, "unknown type");
        ex.srq_type = 0;
        assert!(create(ctx, &mut ex).is_null());
        assert_eq!(
            errno(),
            libc::EOPNOTSUPP,
            "a basic SRQ: the kernel's answer"
        );
        ex.comp_mask |= 1 << 5;
        assert!(create(ctx, &mut ex).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP, "a reserved bit");
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
}

fn efa_ah_attr(gid: [u8; 16]) -> ibv_ah_attr {
    // SAFETY: all-zero is a valid attribute.
    let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
    a.grh.dgid = ibv_gid { raw: gid };
    a.is_global = 1;
    a.port_num = 1;
    a
}

#[test]
fn ah_on_the_efa_model_holds_its_pd() {
    let (ctx, _f, dev) = efa();
    let pd = alloc_pd(ctx);
    let mut attr = efa_ah_attr(dev.gid());
    // SAFETY: a live PD and our attribute.
    unsafe {
        let ah = ibv_create_ah(pd, &mut attr);
        assert!(!ah.is_null(), "ibv_create_ah: errno {}", errno());
        assert_eq!((*ah).context, ctx);
        assert_eq!((*ah).pd, pd);
        assert_eq!(ibv_dealloc_pd(pd), libc::EBUSY);
        assert_eq!(ibv_destroy_ah(ah), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
}

/// A received GRH (40 bytes, network order) with IPv6 fields.
fn grh6(tclass: u8, flow: u32, next_hdr: u8, hop: u8, sgid: [u8; 16], dgid: [u8; 16]) -> ibv_grh {
    let vtf = 6u32 << 28 | u32::from(tclass) << 20 | flow;
    ibv_grh {
        version_tclass_flow: vtf.to_be(),
        paylen: 0,
        next_hdr,
        hop_limit: hop,
        sgid: ibv_gid { raw: sgid },
        dgid: ibv_gid { raw: dgid },
    }
}

fn wc_with(flags: uverbs::WcFlags) -> ibv_wc {
    ibv_wc {
        wc_flags: flags,
        slid: 0x1234,
        sl: 3,
        dlid_path_bits: 2,
        ..Default::default()
    }
}

fn init_ah(
    ctx: *mut ibv_context,
    wc: &mut ibv_wc,
    grh: &mut ibv_grh,
) -> Result<ibv_ah_attr, c_int> {
    // SAFETY: all-zero is a valid attribute.
    let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
    // SAFETY: a live context, and our completion, GRH and attribute.
    match unsafe { ibv_init_ah_from_wc(ctx, 1, wc, grh, &mut a) } {
        0 => Ok(a),
        -1 => Err(errno()),
        r => panic!("ibv_init_ah_from_wc returned {r}"),
    }
}

fn gid_of(g: &ibv_gid) -> [u8; 16] {
    // SAFETY: raw covers the union's 16 bytes.
    unsafe { g.raw }
}

#[test]
fn init_ah_from_wc_reads_the_grh_and_finds_the_gid() {
    let (ctx, _f, dev) = efa();
    let ours = dev.gid();
    let peer = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];

    // An IB GRH (next header 0x1b) to our GID: the reply goes to its source.
    let mut g = grh6(0x2a, 0xbeef, 0x1b, 9, peer, ours);
    let mut wc = wc_with(uverbs::WcFlags::GRH);
    let a = init_ah(ctx, &mut wc, &mut g).expect("init_ah_from_wc");
    assert_eq!(a.is_global, 1);
    assert_eq!(gid_of(&a.grh.dgid), peer);
    assert_eq!(a.grh.sgid_index, 0);
    assert_eq!(a.grh.hop_limit, 9);
    assert_eq!(a.grh.traffic_class, 0x2a);
    assert_eq!(a.grh.flow_label, 0xbeef);
    assert_eq!(
        (a.dlid, a.sl, a.src_path_bits, a.port_num),
        (0x1234, 3, 2, 1)
    );

    // Without the GRH flag: the LID fields only.
    let mut wc = wc_with(uverbs::WcFlags::empty());
    let a = init_ah(ctx, &mut wc, &mut g).expect("no GRH");
    assert_eq!(a.is_global, 0);
    assert_eq!(gid_of(&a.grh.dgid), [0; 16]);
    assert_eq!(a.dlid, 0x1234);

    let mut wc = wc_with(uverbs::WcFlags::GRH);
    // The model's GID is an IB GID: no RoCE v2 (UDP) entry has it.
    let mut g = grh6(0, 0, 17, 1, peer, ours);
    assert_eq!(init_ah(ctx, &mut wc, &mut g).err(), Some(libc::EINVAL));
    // A GID that is not ours.
    let mut g = grh6(0, 0, 0x1b, 1, peer, peer);
    assert_eq!(init_ah(ctx, &mut wc, &mut g).err(), Some(libc::EINVAL));
    // A multicast destination.
    let mut mc = ours;
    mc[0] = 0xff;
    let mut g = grh6(0, 0, 0x1b, 1, peer, mc);
    assert_eq!(init_ah(ctx, &mut wc, &mut g).err(), Some(libc::EINVAL));
    // Neither UDP nor IB next.
    let mut g = grh6(0, 0, 6, 1, peer, ours);
    assert_eq!(
        init_ah(ctx, &mut wc, &mut g).err(),
        Some(libc::EPROTONOSUPPORT)
    );
    // Neither IPv6 nor IPv4.
    let mut g = grh6(0, 0, 0x1b, 1, peer, ours);
    g.version_tclass_flow = 0;
    assert_eq!(
        init_ah(ctx, &mut wc, &mut g).err(),
        Some(libc::EPROTONOSUPPORT)
    );

    // And an AH from it.
    let pd = alloc_pd(ctx);
    let mut g = grh6(0, 0, 0x1b, 1, ours, ours);
    // SAFETY: a live PD, our completion and GRH.
    unsafe {
        let ah = ibv_create_ah_from_wc(pd, &mut wc, &mut g, 1);
        assert!(!ah.is_null(), "ibv_create_ah_from_wc: errno {}", errno());
        assert_eq!(ibv_destroy_ah(ah), 0);
        let mut bad = grh6(0, 0, 6, 1, ours, ours);
        assert!(ibv_create_ah_from_wc(pd, &mut wc, &mut bad, 1).is_null());
        assert_eq!(errno(), libc::EPROTONOSUPPORT);
        assert_eq!(ibv_dealloc_pd(pd), 0);
    }
}

/// The RFC 1071 checksum of an IPv4 header (checksum field zero).
fn ip_checksum(h: &[u8; 20]) -> [u8; 2] {
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    (!(sum as u16)).to_be_bytes()
}

/// A RoCE v2 IPv4 packet's GRH slot: 20 bytes the device leaves, then the IPv4 header.
fn grh4(first: u8, tos: u8, ttl: u8, saddr: [u8; 4], daddr: [u8; 4], good_sum: bool) -> ibv_grh {
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[1] = tos;
    ip[8] = ttl;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&saddr);
    ip[16..20].copy_from_slice(&daddr);
    let mut sum = ip_checksum(&ip);
    if !good_sum {
        sum[0] ^= 0x40;
    }
    ip[10..12].copy_from_slice(&sum);
    let mut b = [0u8; 40];
    b[0] = first;
    b[20..].copy_from_slice(&ip);
    // SAFETY: ibv_grh is 40 bytes of plain integers, any pattern valid.
    unsafe { core::mem::transmute::<[u8; 40], ibv_grh>(b) }
}

#[test]
fn init_ah_from_wc_tells_ipv4_from_ipv6() {
    let (ctx, _f, _dev) = efa();
    let mut wc = wc_with(uverbs::WcFlags::GRH);
    // An IPv4 header after 20 bytes whose first nibble is not 6: IPv4. The EFA model has no
    // RoCE v2 GID for the destination address, so the lookup fails with EINVAL...
    let mut g = grh4(0, 0, 64, [10, 0, 0, 1], [10, 0, 0, 2], true);
    assert_eq!(init_ah(ctx, &mut wc, &mut g).err(), Some(libc::EINVAL));
    // ... and a class D destination is refused before any lookup, which only the IPv4 path
    // checks (byte 24 of the slot, the IPv6 reading's dgid[0], is 0 here).
    let mut g = grh4(0, 0, 64, [10, 0, 0, 1], [224, 0, 0, 1], true);
    assert_eq!(init_ah(ctx, &mut wc, &mut g).err(), Some(libc::EINVAL));
    // A first nibble of 6 with a checksum that holds: still IPv4 (class D refused).
    let mut g = grh4(0x60, 0, 64, [10, 0, 0, 1], [224, 0, 0, 1], true);
    assert_eq!(init_ah(ctx, &mut wc, &mut g).err(), Some(libc::EINVAL));
    // With a wrong checksum it is IPv6: next header byte 6 is 0, neither UDP nor IB.
    let mut g = grh4(0x60, 0, 64, [10, 0, 0, 1], [224, 0, 0, 1], false);
    assert_eq!(
        init_ah(ctx, &mut wc, &mut g).err(),
        Some(libc::EPROTONOSUPPORT)
    );
}

#[test]
fn resolve_eth_l2_is_not_supported() {
    let ctx = rxe();
    let mut mac = [0u8; 6];
    let mut vid = 0u16;
    // SAFETY: the function reads nothing.
    let r =
        unsafe { ibv_resolve_eth_l2_from_gid(ctx, ptr::null_mut(), mac.as_mut_ptr(), &mut vid) };
    assert_eq!((r, errno()), (-1, libc::EOPNOTSUPP));
}

#[test]
fn kernel_struct_copies() {
    let mut k = IbUverbsQpAttr {
        qp_state: 3,
        cur_qp_state: 2,
        path_mtu: 5,
        qkey: 0x1111,
        dest_qp_num: 77,
        max_send_wr: 8,
        max_inline_data: 64,
        pkey_index: 4,
        rnr_retry: 7,
        alt_timeout: 9,
        ..Default::default()
    };
    k.ah_attr.grh.dgid = [7; 16];
    k.ah_attr.dlid = 0x55;
    k.ah_attr.is_global = 1;
    k.alt_ah_attr.port_num = 2;
    // SAFETY: all-zero is a valid ibv_qp_attr.
    let mut q: ibv_qp_attr = unsafe { core::mem::zeroed() };
    q.qp_state = 42;
    // SAFETY: valid source and destination.
    unsafe { ibv_copy_qp_attr_from_kern(&mut q, &k) };
    assert_eq!(q.qp_state, 42, "qp_state is not copied, as in rdma-core");
    assert_eq!(
        (q.cur_qp_state, q.path_mtu, q.qkey, q.dest_qp_num),
        (2, 5, 0x1111, 77)
    );
    assert_eq!((q.cap.max_send_wr, q.cap.max_inline_data), (8, 64));
    assert_eq!((q.pkey_index, q.rnr_retry, q.alt_timeout), (4, 7, 9));
    assert_eq!(gid_of(&q.ah_attr.grh.dgid), [7; 16]);
    assert_eq!(
        (q.ah_attr.dlid, q.ah_attr.is_global, q.alt_ah_attr.port_num),
        (0x55, 1, 2)
    );

    let ah = IbUverbsAhAttr {
        sl: 5,
        static_rate: 3,
        ..Default::default()
    };
    let mut a = efa_ah_attr([0; 16]);
    // SAFETY: valid source and destination.
    unsafe { ibv_copy_ah_attr_from_kern(&mut a, &ah) };
    assert_eq!((a.sl, a.static_rate, a.is_global, a.port_num), (5, 3, 0, 0));

    let p = IbUserPathRec {
        dgid: [1; 16],
        sgid: [2; 16],
        dlid: 0x1234u16.to_be(),
        flow_label: 0xabcdu32.to_be(),
        reversible: 1,
        mtu: 4,
        pkey: 0xffffu16.to_be(),
        hop_limit: 3,
        numb_path: 1,
        packet_life_time_selector: 2,
        preference: 6,
        ..Default::default()
    };
    // SAFETY: all-zero is a valid path record.
    let mut s: ibv_sa_path_rec = unsafe { core::mem::zeroed() };
    // SAFETY: valid source and destination.
    unsafe { ibv_copy_path_rec_from_kern(&mut s, &p) };
    assert_eq!((gid_of(&s.dgid), gid_of(&s.sgid)), ([1; 16], [2; 16]));
    assert_eq!(
        (s.dlid, s.flow_label, s.pkey),
        (p.dlid, p.flow_label, p.pkey)
    );
    assert_eq!(
        (s.reversible, s.mtu, s.hop_limit, s.numb_path),
        (1, 4, 3, 1)
    );
    assert_eq!((s.packet_life_time_selector, s.preference), (2, 6));
    let mut back = IbUserPathRec::default();
    // SAFETY: valid source and destination.
    unsafe { ibv_copy_path_rec_to_kern(&mut back, &s) };
    assert_eq!(back, p);
}
