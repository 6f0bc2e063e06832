//! The legacy `write()` commands the EFA driver answers: context, device and port queries,
//! PD, MR, completion channel, QP (create and modify in [`crate::qp`]), AH; and the helpers
//! that read their requests and write their responses.

use std::os::fd::IntoRawFd;

use uverbs::channel::WriteCmd;
use uverbs::Errno;
use uverbs_uapi::efa::*;
use uverbs_uapi::write::*;
use zerocopy::{FromBytes, IntoBytes};

use crate::qp::{create_qp, modify_qp};
use crate::query::{check_port, port_resp};
use crate::state::{AhState, Fabric, MrState};

pub(crate) fn eventfd() -> Result<u32, Errno> {
    let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
    Ok(fd.into_raw_fd() as u32)
}

pub(crate) fn req<T: FromBytes>(cmd: &WriteCmd) -> Result<T, Errno> {
    cmd.core_request_as::<T>().ok_or(Errno::INVAL)
}

pub(crate) fn drv<T: FromBytes>(cmd: &WriteCmd) -> Result<T, Errno> {
    T::read_from_prefix(cmd.driver_request())
        .map(|(t, _)| t)
        .map_err(|_| Errno::INVAL)
}

pub(crate) fn put<T: IntoBytes + zerocopy::Immutable>(dst: &mut [u8], v: &T) {
    let b = v.as_bytes();
    let n = b.len().min(dst.len());
    dst[..n].copy_from_slice(&b[..n]);
}

pub(crate) fn write_cmd(f: &mut Fabric, d: usize, cmd: &mut WriteCmd) -> Result<(), Errno> {
    let dev = &mut f.devs[d];
    let cfg = dev.cfg;
    match (cmd.command(), cmd.is_extended()) {
        (IB_USER_VERBS_CMD_GET_CONTEXT, false) => {
            let c: EfaIbvAllocUcontextCmd = drv(cmd)?;
            // A device that reports impossible values never gets this far on a real host.
            if cfg.validate().is_err() {
                return Err(Errno::INVAL);
            }
            if c.reserved_20 != [0; 4] {
                return Err(Errno::INVAL);
            }
            let resp = IbUverbsGetContextResp {
                async_fd: eventfd()?,
                num_comp_vectors: 1,
            };
            put(cmd.response_mut(), &resp);
            let r = EfaIbvAllocUcontextResp {
                cmds_supp_udata_mask: EFA_USER_CMDS_SUPP_UDATA_QUERY_DEVICE
                    | EFA_USER_CMDS_SUPP_UDATA_CREATE_AH,
                sub_cqs_per_cq: cfg.sub_cqs_per_cq,
                inline_buf_size: cfg.inline_buf_size,
                max_llq_size: cfg.max_llq_size,
                max_tx_batch: cfg.max_tx_batch,
                min_sq_wr: cfg.min_sq_wr,
                inline_buf_size_ex: cfg.inline_buf_size_ex,
                ..Default::default()
            };
            put(cmd.driver_response_mut(), &r);
            Ok(())
        }
        (IB_USER_VERBS_CMD_QUERY_DEVICE, ext) => {
            let base = IbUverbsQueryDeviceResp {
                fw_ver: 0x0001_0002_0003,
                vendor_id: 0x1d0f,
                vendor_part_id: 0xefa1,
                max_mr_size: 1 << 40,
                page_size_cap: 0xffff_f000,
                max_qp: 1024,
                max_qp_wr: cfg.max_sq_wr,
                max_sge: u32::from(cfg.max_sq_sge),
                max_sge_rd: 1,
                max_cq: 1024,
                max_cqe: cfg.max_cqe,
                max_mr: 1 << 16,
                max_pd: 1 << 16,
                max_ah: 1 << 16,
                max_pkeys: 1,
                phys_port_cnt: 1,
                ..Default::default()
            };
            if ext {
                let r = IbUverbsExQueryDeviceResp {
                    base,
                    response_length: std::mem::size_of::<IbUverbsExQueryDeviceResp>() as u32,
                    ..Default::default()
                };
                put(cmd.response_mut(), &r);
                let e = EfaIbvExQueryDeviceResp {
                    max_sq_wr: cfg.max_sq_wr,
                    max_rq_wr: cfg.max_rq_wr,
                    max_sq_sge: cfg.max_sq_sge,
                    max_rq_sge: cfg.max_rq_sge,
                    max_rdma_size: cfg.max_rdma_size,
                    device_caps: cfg.device_caps,
                    ..Default::default()
                };
                put(cmd.driver_response_mut(), &e);
            } else {
                put(cmd.response_mut(), &base);
            }
            Ok(())
        }
        (IB_USER_VERBS_CMD_QUERY_PORT, false) => {
            // ib_uverbs_query_port: the same attributes, legacy layout.
            let r: IbUverbsQueryPort = req(cmd)?;
            check_port(u64::from(r.port_num))?;
            put(cmd.response_mut(), &port_resp(&cfg));
            Ok(())
        }
        (IB_USER_VERBS_CMD_ALLOC_PD, false) => {
            let h = dev.handle();
            let pdn = h as u16;
            dev.pds.insert(h, pdn);
            put(cmd.response_mut(), &IbUverbsAllocPdResp { pd_handle: h });
            put(
                cmd.driver_response_mut(),
                &EfaIbvAllocPdResp {
                    pdn,
                    ..Default::default()
                },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_DEALLOC_PD, false) => {
            let r: IbUverbsDeallocPd = req(cmd)?;
            if !dev.pds.contains_key(&r.pd_handle) {
                return Err(Errno::INVAL);
            }
            let busy = dev.mrs.values().any(|m| m.pd == r.pd_handle)
                || dev.qps.values().any(|q| q.pd == r.pd_handle)
                || dev.ahs.values().any(|a| a.pd == r.pd_handle);
            if busy {
                return Err(Errno::BUSY);
            }
            dev.pds.remove(&r.pd_handle);
            Ok(())
        }
        (IB_USER_VERBS_CMD_REG_MR, false) => {
            let r: IbUverbsRegMr = req(cmd)?;
            if !dev.pds.contains_key(&r.pd_handle) || r.length == 0 {
                return Err(Errno::INVAL);
            }
            if r.start != r.hca_va {
                // The model moves data by CPU address: only identity-mapped MRs.
                return Err(Errno::OPNOTSUPP);
            }
            let h = dev.handle();
            dev.next_mr += 1;
            let n = dev.next_mr;
            let m = MrState {
                pd: r.pd_handle,
                lkey: 0x100 + n,
                rkey: 0x8000 + n,
                addr: r.start,
                len: r.length,
                access: r.access_flags,
            };
            dev.mrs.insert(h, m);
            put(
                cmd.response_mut(),
                &IbUverbsRegMrResp {
                    mr_handle: h,
                    lkey: m.lkey,
                    rkey: m.rkey,
                },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_DEREG_MR, false) => {
            let r: IbUverbsDeregMr = req(cmd)?;
            dev.mrs.remove(&r.mr_handle).map(|_| ()).ok_or(Errno::INVAL)
        }
        (IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, false) => {
            put(
                cmd.response_mut(),
                &IbUverbsCreateCompChannelResp { fd: eventfd()? },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_CREATE_QP, false) => create_qp(dev, cmd),
        (IB_USER_VERBS_CMD_MODIFY_QP, false) => modify_qp(dev, cmd),
        (IB_USER_VERBS_CMD_QUERY_QP, false) => {
            let r: IbUverbsQueryQp = req(cmd)?;
            let q = dev.qps.get(&r.qp_handle).ok_or(Errno::INVAL)?;
            let resp = IbUverbsQueryQpResp {
                qp_state: q.state,
                cur_qp_state: q.state,
                qkey: q.qkey,
                sq_psn: q.sq_psn,
                max_send_wr: q.depth,
                max_recv_wr: q.rq_descs / q.max_recv_sge.max(1),
                max_send_sge: q.max_send_sge,
                max_recv_sge: q.max_recv_sge,
                max_inline_data: q.max_inline,
                sq_sig_all: u8::from(q.sq_sig_all),
                port_num: 1,
                ..Default::default()
            };
            put(cmd.response_mut(), &resp);
            Ok(())
        }
        (IB_USER_VERBS_CMD_DESTROY_QP, false) => {
            let r: IbUverbsDestroyQp = req(cmd)?;
            let q = dev.qps.remove(&r.qp_handle).ok_or(Errno::INVAL)?;
            crate::cntr::detach_all(dev, &q.cntrs);
            for k in q.keys {
                dev.regions.remove(&k);
            }
            for c in [q.send_cq, q.recv_cq] {
                if let Some(c) = dev.cqs.get_mut(&c) {
                    c.qp_refs -= 1;
                }
            }
            put(
                cmd.response_mut(),
                &IbUverbsDestroyQpResp { events_reported: 0 },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_CREATE_AH, false) => {
            let r: IbUverbsCreateAh = req(cmd)?;
            if !dev.pds.contains_key(&r.pd_handle) || r.attr.is_global != 1 || r.attr.port_num != 1
            {
                return Err(Errno::INVAL);
            }
            let gid = r.attr.grh.dgid;
            let next = dev.ahns.len() as u16 + 1;
            let e = dev.ahns.entry(gid).or_insert((next, 0));
            e.1 += 1;
            let ahn = e.0;
            let h = dev.handle();
            dev.ahs.insert(
                h,
                AhState {
                    pd: r.pd_handle,
                    gid,
                    ahn,
                },
            );
            put(cmd.response_mut(), &IbUverbsCreateAhResp { ah_handle: h });
            put(
                cmd.driver_response_mut(),
                &EfaIbvCreateAhResp {
                    efa_address_handle: ahn,
                    ..Default::default()
                },
            );
            Ok(())
        }
        (IB_USER_VERBS_CMD_DESTROY_AH, false) => {
            let r: IbUverbsDestroyAh = req(cmd)?;
            let a = dev.ahs.remove(&r.ah_handle).ok_or(Errno::INVAL)?;
            if let Some(e) = dev.ahns.get_mut(&a.gid) {
                e.1 -= 1;
                if e.1 == 0 {
                    dev.ahns.remove(&a.gid);
                }
            }
            Ok(())
        }
        _ => Err(Errno::OPNOTSUPP),
    }
}
