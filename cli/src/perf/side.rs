//! One side of a `uverbs perf` run: the objects it owns (context, PD, MR, CQs, QP), its
//! address as the peer needs it, bringing the QP to RTS against the peer's address, and the
//! orderly destruction at the end.

use uverbs::{
    AccessFlags, AhAttr, CompChannel, Context, Cq, Gid, GlobalRoute, Mr, Pd, Qp, QpAttr,
    QpAttrMask, QpCap, QpInitAttr, QpState, QpType,
};

use super::fail;
use super::options::Settings;
use crate::cause::Idle;
use crate::{exchange, Failure};

/// Everything one side owns. Fields drop in order: QP, CQs, MR, PD, context.
pub(super) struct Side {
    pub(super) qp: Qp,
    pub(super) send_cq: Cq,
    pub(super) recv_cq: Cq,
    /// The completion channel of both CQs with `-e`.
    pub(super) channel: Option<CompChannel>,
    pub(super) mr: Mr,
    pub(super) pd: Pd,
    pub(super) ctx: Context,
    /// The quiet the run tolerates (`--peer-timeout`; none until the run sets it).
    pub(super) idle: Idle,
}

/// One side's address as exchanged over TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Dest {
    pub(super) lid: u16,
    pub(super) qpn: u32,
    pub(super) psn: u32,
    pub(super) rkey: u32,
    pub(super) addr: u64,
    pub(super) gid: Gid,
}

impl Dest {
    pub(super) fn to_line(self) -> String {
        format!(
            "UVPERF1 {:x} {:x} {:x} {:x} {:x} {}\n",
            self.lid,
            self.qpn,
            self.psn,
            self.rkey,
            self.addr,
            exchange::wire_gid(&self.gid.raw)
        )
    }

    pub(super) fn from_line(line: &str) -> Result<Dest, String> {
        let bad = || format!("malformed address line {line:?} from the peer (is it uverbs perf?)");
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 7 || f[0] != "UVPERF1" {
            return Err(bad());
        }
        let h = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad());
        let gid = Gid {
            raw: exchange::gid_from_wire(f[6]).ok_or_else(bad)?,
        };
        Ok(Dest {
            lid: u16::try_from(h(f[1])?).map_err(|_| bad())?,
            qpn: u32::try_from(h(f[2])?).map_err(|_| bad())?,
            psn: u32::try_from(h(f[3])?).map_err(|_| bad())?,
            rkey: u32::try_from(h(f[4])?).map_err(|_| bad())?,
            addr: h(f[5])?,
            gid,
        })
    }
}

pub(super) fn setup(ctx: Context, set: &Settings) -> Result<Side, Failure> {
    let pd = ctx.alloc_pd().map_err(fail("Couldn't allocate PD"))?;
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mr = pd
        // Two halves: the peer writes into the first, our RDMA writes and sends come from the
        // second (write-lat spins on the first while its own mark sits in the second).
        .reg_mr(2 * set.size.max(1) as usize, access)
        .map_err(fail("Couldn't register MR"))?;
    let channel = if set.events {
        Some(
            ctx.create_comp_channel()
                .map_err(fail("Couldn't create the completion channel"))?,
        )
    } else {
        None
    };
    let send_cq = ctx
        .create_cq(set.tx_depth.max(2), channel.as_ref(), 0)
        .map_err(fail("Couldn't create the send CQ"))?;
    let recv_cq = ctx
        .create_cq(set.rx_depth.max(2), channel.as_ref(), 0)
        .map_err(fail("Couldn't create the receive CQ"))?;
    let inline = if set.size <= set.inline_size {
        set.inline_size
    } else {
        0
    };
    let cap = QpCap {
        max_send_wr: set.tx_depth,
        max_recv_wr: set.rx_depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: inline,
    };
    let mut qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &send_cq, &recv_cq, cap))
        .map_err(fail("Couldn't create QP"))?;
    let attr = QpAttr {
        qp_state: QpState::Init,
        pkey_index: 0,
        port_num: set.ib_port,
        qp_access_flags: access,
        ..QpAttr::default()
    };
    qp.modify(
        &attr,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .map_err(fail("Failed to modify QP to INIT"))?;
    Ok(Side {
        qp,
        send_cq,
        recv_cq,
        channel,
        mr,
        pd,
        ctx,
        idle: Idle::new(0),
    })
}

pub(super) fn local_dest(side: &Side, set: &Settings) -> Result<Dest, Failure> {
    let port = side.ctx.query_port(set.ib_port)?;
    let gid = side
        .ctx
        .query_gid(set.ib_port, set.gid_index)
        .map_err(fail("Couldn't read the local GID"))?;
    let psn = (std::process::id().wrapping_mul(2_654_435_761) ^ side.qp.qp_num()) & 0xff_ffff;
    Ok(Dest {
        lid: port.lid,
        qpn: side.qp.qp_num(),
        psn,
        rkey: side.mr.rkey(),
        addr: side.mr.addr(),
        gid,
    })
}

pub(super) fn connect_qp(
    side: &mut Side,
    set: &Settings,
    my: &Dest,
    rem: &Dest,
) -> Result<(), Failure> {
    let mut attr = QpAttr {
        qp_state: QpState::Rtr,
        path_mtu: set.mtu,
        dest_qp_num: rem.qpn,
        rq_psn: rem.psn,
        max_dest_rd_atomic: set.outs as u8,
        min_rnr_timer: 12,
        ah_attr: AhAttr {
            dlid: rem.lid,
            port_num: set.ib_port,
            is_global: rem.gid.raw != [0; 16],
            grh: GlobalRoute {
                dgid: rem.gid,
                flow_label: 0,
                sgid_index: set.gid_index as u8,
                hop_limit: 64,
                traffic_class: 0,
            },
            ..AhAttr::default()
        },
        ..QpAttr::default()
    };
    side.qp
        .modify(
            &attr,
            QpAttrMask::STATE
                | QpAttrMask::AV
                | QpAttrMask::PATH_MTU
                | QpAttrMask::DEST_QPN
                | QpAttrMask::RQ_PSN
                | QpAttrMask::MAX_DEST_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER,
        )
        .map_err(fail("Failed to modify QP to RTR"))?;
    attr.qp_state = QpState::Rts;
    attr.sq_psn = my.psn;
    attr.timeout = 14;
    attr.retry_cnt = crate::cause::RETRY_CNT;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = set.outs as u8;
    side.qp
        .modify(
            &attr,
            QpAttrMask::STATE
                | QpAttrMask::SQ_PSN
                | QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::MAX_QP_RD_ATOMIC,
        )
        .map_err(fail("Failed to modify QP to RTS"))
}

pub(super) fn close(side: Side) -> Result<(), Failure> {
    let Side {
        qp,
        send_cq,
        recv_cq,
        channel,
        mr,
        pd,
        ctx,
        idle: _,
    } = side;
    qp.destroy().map_err(fail("Couldn't destroy QP"))?;
    send_cq.destroy().map_err(fail("Couldn't destroy CQ"))?;
    recv_cq.destroy().map_err(fail("Couldn't destroy CQ"))?;
    drop(channel);
    mr.dereg().map_err(fail("Couldn't deregister MR"))?;
    drop(pd);
    drop(ctx);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_lines_round_trip_and_bad_ones_are_refused() {
        let mut gid = Gid::default();
        gid.raw[10] = 0xff;
        gid.raw[11] = 0xff;
        gid.raw[12..].copy_from_slice(&[10, 99, 0, 1]);
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234,
            addr: 0x7f00_0000_1000,
            gid,
        };
        let line = d.to_line();
        assert!(line.ends_with('\n'));
        assert_eq!(Dest::from_line(line.trim_end()), Ok(d));
        assert!(Dest::from_line("0000:000011:abcdef:00").is_err());
        assert!(Dest::from_line("UVPERF1 0 11 1 1 1 00").is_err());
        assert!(
            Dest::from_line("UVPERF1 10000 11 1 1 1 00000000000000000000000000000000").is_err()
        );
    }
}
