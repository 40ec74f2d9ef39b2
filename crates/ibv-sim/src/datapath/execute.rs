//! Execution of a send work request of an RTS QP: the connected peer,
//! the provider's checks, RC / UC operations and UD sends.

use super::*;

/// The connected peer of an RC / UC QP: it must exist, be of the same
/// type, be able to receive, point back at us, and be reachable at the
/// address we were given.
pub(super) fn connected_peer(src: &QpShared, a: &QpAttrs) -> Option<(Arc<QpShared>, u32)> {
    let dst = QPS.get(a.dest_qp_num)?;
    if !peers(src.qp_type, dst.qp_type) {
        return None;
    }
    let g = dst.st.lock();
    if !qp::can_receive(g.state) || g.attrs.dest_qp_num != src.qp_num {
        return None;
    }
    if !reaches(&a.ah, &dst, u32::from(g.attrs.port_num)) {
        return None;
    }
    dst.arrived(g.state);
    let access = g.attrs.access;
    drop(g);
    Some((dst, access))
}

/// Whether an address vector reaches `port` of `dst`'s device.
pub(crate) fn reaches(ah: &verbs_abi::ibv_ah_attr, dst: &QpShared, port: u32) -> bool {
    if !dst.dev.port_valid(port) {
        return false;
    }
    if dst.dev.is_ethernet() || dst.dev.is_iwarp() {
        if ah.is_global == 0 {
            return false;
        }
        // SAFETY: reading the raw bytes of a GID union.
        let dgid = unsafe { ah.grh.dgid.raw };
        (0..dst.dev.gid_slots())
            .any(|i| matches!(dst.dev.gid(port, i), Ok(Some((g, _))) if g == dgid))
    } else {
        ah.dlid == dst.dev.lid(port)
    }
}

/// Checks a send work request the way the provider does before queueing it.
pub(super) fn check_send(s: &QpShared, w: &SendWr) -> Result<(), c_int> {
    if w.num_sge < 0 {
        return Err(libc::EINVAL);
    }
    // More SGEs or inline bytes than the QP takes: the provider's errno.
    if w.num_sge as u32 > s.cap.max_send_sge.max(1) {
        return Err(s.dev.profile().post_errno);
    }
    if w.flags & SEND_INLINE != 0 && total_len(&w.sge) > u64::from(s.cap.max_inline_data) {
        return Err(s.dev.profile().post_errno);
    }
    let ok = match s.qp_type {
        QPT_RC => rc_opcode(w.opcode, s.dev.family.atomics),
        QPT_UC => matches!(
            w.opcode,
            WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM | WR_SEND | WR_SEND_WITH_IMM
        ),
        // XRC requests are RC's (mlx5 posts them alike), memory windows
        // aside: the target's memory is checked against its SRQ's PD.
        QPT_XRC_SEND => {
            rc_opcode(w.opcode, s.dev.family.atomics)
                && !matches!(w.opcode, WR_LOCAL_INV | WR_BIND_MW)
        }
        QPT_UD => matches!(w.opcode, WR_SEND | WR_SEND_WITH_IMM),
        _ => false,
    };
    if !ok && !unexecutable(s, w.opcode) {
        return Err(libc::EINVAL);
    }
    if s.qp_type == QPT_UD && !registry::is_live(w.ah as usize, Kind::Ah) {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// An operation the provider posts and its kernel cannot execute
/// (`Quirks::unexecutable_ops`).
fn unexecutable(s: &QpShared, opcode: c_int) -> bool {
    s.dev.profile().quirks.unexecutable_ops
        && matches!(
            (s.qp_type, opcode),
            (QPT_RC, WR_ATOMIC_WRITE) | (QPT_UC, WR_SEND_WITH_INV)
        )
}

/// Port MTU in bytes of a path MTU code.
pub(super) fn mtu_bytes(code: c_int) -> usize {
    128usize << code.clamp(1, 5)
}

/// Executes one send work request of an RTS QP.
pub(super) fn execute(s: &Arc<QpShared>, a: &QpAttrs, w: SendWr) {
    let signaled = s.sq_sig_all || w.flags & SEND_SIGNALED != 0;
    let opcode = wc_opcode_of(w.opcode);
    let done = |status: c_int, len: u32| complete_send(s, w.wr_id, signaled, opcode, status, len);
    let inline = w.flags & SEND_INLINE != 0;
    let slid = s.dev.lid(u32::from(a.port_num.max(1)));
    let with_imm = matches!(w.opcode, WR_SEND_WITH_IMM | WR_RDMA_WRITE_WITH_IMM);

    if matches!(w.opcode, WR_BIND_MW | WR_LOCAL_INV) {
        let (opcode, status) = crate::mw::execute_local(s, w.bind.as_ref(), w.rkey);
        return remote::complete_in_order(s, w.wr_id, signaled, opcode, status);
    }
    if s.qp_type == QPT_UD {
        return execute_ud(s, a, w, signaled, slid);
    }
    if unexecutable(s, w.opcode) {
        // The kernel's requester fails the WQE and the QP, whatever its type.
        remote::complete_in_order(s, w.wr_id, signaled, opcode, WC_LOC_QP_OP_ERR);
        return s.fail(ERR);
    }
    let reads = matches!(
        w.opcode,
        WR_RDMA_READ | WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD
    );
    if reads && a.max_rd_atomic == 0 && s.dev.profile().quirks.no_credit_stalls {
        return remote::stall(s, w.wr_id, signaled, opcode);
    }
    if QPS.get(a.dest_qp_num).is_none() {
        // Not ours: the fabric decides whether anybody answers.
        return remote::execute(s, a, w, signaled, slid);
    }
    let Some((dst, dst_access)) = connected_peer(s, a) else {
        // A QP of ours that does not take the request (not connected back,
        // not ready to receive) drops it: where the profile says so (rxe),
        // the requester then times out as towards anyone silent, through
        // the fabric's deadlines (`timeout`, `retry_cnt`).
        if s.qp_type != QPT_UC && s.dev.profile().unanswered_times_out {
            return remote::execute(s, a, w, signaled, slid);
        }
        // Nobody answers: RC retries and gives up; UC just loses the message.
        return done(
            if s.qp_type != QPT_UC {
                WC_RETRY_EXC_ERR
            } else {
                WC_SUCCESS
            },
            0,
        );
    };
    if reads
        && dst.dev.profile().quirks.no_dest_credit_refused
        && dst.st.lock().attrs.max_dest_rd_atomic == 0
    {
        return done(refused(&dst, WC_REM_INV_REQ_ERR), 0);
    }
    let msg_for = |payload: Vec<u8>, write_imm_len: Option<u32>| Message {
        src: Origin::Local(s.clone()),
        src_qpn: s.qp_num,
        payload,
        imm: with_imm.then_some(w.imm),
        inv: (w.opcode == WR_SEND_WITH_INV).then_some(w.rkey),
        xrc: None,
        write_imm_len,
        solicited: w.flags & SEND_SOLICITED != 0,
        grh: None,
        grh_valid: false,
        slid,
        sl: a.ah.sl,
        wr_id: w.wr_id,
        signaled,
        send_opcode: opcode,
    };
    match w.opcode {
        WR_SEND | WR_SEND_WITH_IMM | WR_SEND_WITH_INV => {
            let xrc = match xrc_target(&dst, w.xrc_srqn) {
                Ok(x) => x,
                Err(st) => return done(st, 0),
            };
            match source(s, &w, inline) {
                Ok(p) => deliver_for(
                    &dst,
                    Message {
                        xrc,
                        ..msg_for(p, None)
                    },
                    rnr_wait_of(a, &dst),
                ),
                Err(st) => done(st, 0),
            }
        }
        WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM => {
            let data = match source(s, &w, inline) {
                Ok(d) => d,
                Err(st) => return done(st, 0),
            };
            if !data.is_empty() {
                match remote(
                    &dst,
                    dst_access,
                    w.xrc_srqn,
                    w.rkey,
                    w.remote_addr,
                    data.len() as u64,
                    REMOTE_WRITE,
                ) {
                    Ok(host) => copy_bytes(data.as_ptr() as usize, host.host, data.len()),
                    Err(st) => return done(refused(&dst, st), 0),
                }
            }
            if w.opcode == WR_RDMA_WRITE_WITH_IMM {
                let n = data.len() as u32;
                // The immediate takes a receive of the named XRC SRQ.
                let xrc = xrc_target(&dst, w.xrc_srqn).ok().flatten();
                let m = Message {
                    xrc,
                    ..msg_for(Vec::new(), Some(n))
                };
                deliver_for(&dst, m, rnr_wait_of(a, &dst));
            } else {
                done(WC_SUCCESS, data.len() as u32);
            }
        }
        WR_RDMA_READ => {
            let len = total_len(&w.sge);
            let host = if len == 0 {
                None
            } else {
                match remote(
                    &dst,
                    dst_access,
                    w.xrc_srqn,
                    w.rkey,
                    w.remote_addr,
                    len,
                    REMOTE_READ,
                ) {
                    Ok(h) => Some(h),
                    Err(st) => return done(refused(&dst, st), 0),
                }
            };
            let mut data = vec![0u8; len as usize];
            if let Some(h) = host {
                copy_bytes(h.host, data.as_mut_ptr() as usize, len as usize);
            }
            match scatter(s.pd, &w.sge, &[&data]) {
                Ok(()) => done(WC_SUCCESS, len as u32),
                Err(st) => done(st, 0),
            }
        }
        WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD => {
            if !w.remote_addr.is_multiple_of(8) || total_len(&w.sge) < 8 {
                return done(WC_REM_INV_REQ_ERR, 0);
            }
            let host = match remote(
                &dst,
                dst_access,
                w.xrc_srqn,
                w.rkey,
                w.remote_addr,
                8,
                REMOTE_ATOMIC,
            ) {
                Ok(h) => h,
                Err(st) => return done(refused(&dst, st), 0),
            };
            // SAFETY: 8 aligned bytes inside a registered MR with atomic access.
            let cell = unsafe { &*(host.host as *const AtomicU64) };
            let old = if w.opcode == WR_ATOMIC_CMP_AND_SWP {
                match cell.compare_exchange(
                    w.compare_add,
                    w.swap,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(v) | Err(v) => v,
                }
            } else {
                cell.fetch_add(w.compare_add, Ordering::SeqCst)
            };
            // One pin at a time (`mr::Pinned`).
            drop(host);
            match scatter(s.pd, &w.sge, &[&old.to_ne_bytes()]) {
                Ok(()) => done(WC_SUCCESS, 8),
                Err(st) => done(st, 0),
            }
        }
        _ => done(WC_REM_INV_REQ_ERR, 0),
    }
}

pub(super) fn execute_ud(s: &Arc<QpShared>, a: &QpAttrs, w: SendWr, signaled: bool, slid: u16) {
    let done = |status: c_int| complete_send(s, w.wr_id, signaled, WC_SEND, status, 0);
    let payload = match source(s, &w, w.flags & SEND_INLINE != 0) {
        Ok(p) => p,
        Err(st) => return done(st),
    };
    let port = u32::from(a.port_num.max(1));
    let mtu = s
        .dev
        .port_attr(port)
        .map_or(4096, |p| mtu_bytes(p.active_mtu.0));
    if payload.len() > mtu {
        return done(WC_LOC_LEN_ERR);
    }
    // SAFETY: the AH was checked live when the request was posted.
    let ah = unsafe { &*(w.ah as *const SimAh) }.attr;
    let qkey = if w.remote_qkey & 0x8000_0000 != 0 {
        a.qkey
    } else {
        w.remote_qkey
    };
    let grh = (ah.is_global != 0).then(|| {
        let source = s
            .dev
            .gid(u32::from(ah.port_num), u32::from(ah.grh.sgid_index));
        // SAFETY: reading the raw bytes of a GID union.
        let dgid = unsafe { ah.grh.dgid.raw };
        let (tclass, hop) = (ah.grh.traffic_class, ah.grh.hop_limit);
        if let Some(g) =
            crate::ah::ipv4_grh(source.ok().flatten(), &dgid, tclass, hop, payload.len())
        {
            return g;
        }
        let mut g = [0u8; GRH_LEN];
        let flow =
            (6u32 << 28) | (u32::from(ah.grh.traffic_class) << 20) | (ah.grh.flow_label & 0xfffff);
        g[0..4].copy_from_slice(&flow.to_be_bytes());
        g[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        g[6] = 0x1b;
        g[7] = ah.grh.hop_limit;
        if let Ok(Some((sgid, _))) = source {
            g[8..24].copy_from_slice(&sgid);
        }
        g[24..40].copy_from_slice(&dgid);
        g
    });
    if w.remote_qpn != 0x00ff_ffff && QPS.get(w.remote_qpn).is_none() {
        remote::send_ud(s, &w, &ah, qkey, slid, grh, &payload);
        return done(WC_SUCCESS);
    }
    let targets: Vec<Arc<QpShared>> = if w.remote_qpn == 0x00ff_ffff {
        // SAFETY: reading the raw bytes of a GID union.
        let dgid = unsafe { ah.grh.dgid.raw };
        remote::send_ud(s, &w, &ah, qkey, slid, grh, &payload);
        qp::MCAST
            .lock()
            .get(&dgid)
            .map(|v| v.iter().filter(|q| q.qp_num != s.qp_num).cloned().collect())
            .unwrap_or_default()
    } else {
        QPS.get(w.remote_qpn).into_iter().collect()
    };
    for dst in targets {
        let g = dst.st.lock();
        let ok = dst.qp_type == QPT_UD
            && qp::can_receive(g.state)
            && g.attrs.qkey == qkey
            && (w.remote_qpn == 0x00ff_ffff || reaches(&ah, &dst, u32::from(g.attrs.port_num)));
        drop(g);
        if !ok {
            continue;
        }
        let msg = Message {
            src: Origin::Local(s.clone()),
            src_qpn: s.qp_num,
            payload: payload.clone(),
            imm: (w.opcode == WR_SEND_WITH_IMM).then_some(w.imm),
            inv: None,
            xrc: None,
            write_imm_len: None,
            solicited: w.flags & SEND_SOLICITED != 0,
            grh: Some(grh.unwrap_or([0u8; GRH_LEN])),
            grh_valid: grh.is_some(),
            slid,
            sl: ah.sl,
            wr_id: 0,
            signaled: false,
            send_opcode: WC_SEND,
        };
        // No receive posted: the datagram is dropped.
        if let Taken::Wqe(wqe, m) = take_wqe(&dst, msg, false) {
            land(&dst, wqe, &m);
        }
    }
    done(WC_SUCCESS);
}

/// A request `dst` refused (access, key, bounds): a responder that treats
/// that as a class C error (the profile's `responder_fails`) goes to ERR as
/// well, with the async event the profile raises for it. Returns the
/// requester's status.
pub(super) fn refused(dst: &QpShared, status: c_int) -> c_int {
    if dst.dev.profile().responder_fails && dst.qp_type == QPT_RC {
        dst.fail(ERR);
        dst.refused_event(status);
    }
    status
}

/// An opcode an RC send queue takes (atomics where the device has them).
fn rc_opcode(op: c_int, atomics: bool) -> bool {
    matches!(
        op,
        WR_RDMA_WRITE
            | WR_RDMA_WRITE_WITH_IMM
            | WR_SEND
            | WR_SEND_WITH_IMM
            | WR_RDMA_READ
            | WR_LOCAL_INV
            | WR_BIND_MW
            | WR_SEND_WITH_INV
    ) || (atomics && matches!(op, WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD))
}
