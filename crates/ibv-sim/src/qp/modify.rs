//! `ibv_modify_qp`: the kernel's checks on a state change and its attributes.

use super::*;

pub(super) fn port_ok(dev: &SimDevice, port: u8) -> bool {
    dev.port_valid(u32::from(port))
}

/// The address checks the kernel and driver make on an address vector.
pub(super) fn check_av(dev: &SimDevice, ah: &ibv_ah_attr) -> Result<(), c_int> {
    if !port_ok(dev, ah.port_num) {
        return Err(libc::EINVAL);
    }
    if dev.is_ethernet() {
        // RoCE addresses are GIDs: a GRH is mandatory.
        if ah.is_global == 0 {
            return Err(libc::EINVAL);
        }
    }
    if ah.is_global != 0 {
        match dev.gid(u32::from(ah.port_num), u32::from(ah.grh.sgid_index)) {
            Ok(Some(_)) => {}
            _ => return Err(libc::EINVAL),
        }
    }
    Ok(())
}

/// `ibv_modify_qp`, with the kernel's checks.
pub fn modify(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> Result<(), c_int> {
    let (_ctx, q) = get(qp)?;
    if attr.is_null() {
        return Err(libc::EINVAL);
    }
    let m = attr_mask as u32;
    if m & !mask::KNOWN != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let s = &q.shared;
    let dev = s.dev;
    // SAFETY: attr points at the caller's ibv_qp_attr; enum fields are read
    // as ints, the rest are plain integers or plain structs.
    let (new_state_in, cur_state_in, path_mtu, mig, a) = unsafe {
        (
            addr_of!((*attr).qp_state).cast::<c_int>().read(),
            addr_of!((*attr).cur_qp_state).cast::<c_int>().read(),
            addr_of!((*attr).path_mtu).cast::<c_int>().read(),
            addr_of!((*attr).path_mig_state).cast::<c_int>().read(),
            &*attr.cast::<RawQpAttr>(),
        )
    };
    let valid_state = |v: c_int| (RESET..=ERR).contains(&v);
    if m & mask::STATE != 0 && !valid_state(new_state_in) {
        return Err(libc::EINVAL);
    }
    if m & mask::CUR_STATE != 0 && !valid_state(cur_state_in) {
        return Err(libc::EINVAL);
    }
    let mut g = s.st.lock();
    let cur = g.state;
    if m & mask::CUR_STATE != 0 && cur_state_in != cur {
        return Err(libc::EINVAL);
    }
    let new = if m & mask::STATE != 0 {
        new_state_in
    } else {
        cur
    };
    if !qp_state::modify_is_ok(cur, new, s.qp_type, m) {
        return Err(libc::EINVAL);
    }
    if m & mask::PORT != 0 && !port_ok(dev, a.port_num) {
        return Err(libc::EINVAL);
    }
    if m & mask::PKEY_INDEX != 0 && a.pkey_index >= dev.pkey_tbl_len() {
        return Err(libc::EINVAL);
    }
    if m & mask::AV != 0 {
        check_av(dev, &a.ah_attr)?;
    }
    if m & mask::ALT_PATH != 0 {
        // Alternate paths (APM) exist on InfiniBand only.
        if dev.is_ethernet()
            || !port_ok(dev, a.alt_port_num)
            || a.alt_pkey_index >= dev.pkey_tbl_len()
        {
            return Err(libc::EINVAL);
        }
        check_av(dev, &a.alt_ah_attr)?;
    }
    if m & mask::PATH_MTU != 0 && !(1..=5).contains(&path_mtu) {
        return Err(libc::EINVAL);
    }
    if m & mask::PATH_MIG_STATE != 0 && !(0..=2).contains(&mig) {
        return Err(libc::EINVAL);
    }
    if m & mask::MAX_QP_RD_ATOMIC != 0
        && i32::from(a.max_rd_atomic) > dev.profile().max_qp_init_rd_atom
    {
        return Err(libc::EINVAL);
    }
    if m & mask::MAX_DEST_RD_ATOMIC != 0
        && i32::from(a.max_dest_rd_atomic) > dev.profile().max_qp_rd_atom
    {
        return Err(libc::EINVAL);
    }
    if m & mask::ACCESS_FLAGS != 0 {
        let ok = crate::mr::LOCAL_WRITE
            | crate::mr::REMOTE_WRITE
            | crate::mr::REMOTE_READ
            | crate::mr::REMOTE_ATOMIC
            | (1 << 4) // MW_BIND
            // An MR's flag programs pass along (pyverbs' ODP tests); mlx5
            // ignores it.
            | crate::mr::ON_DEMAND;
        if a.qp_access_flags & !ok != 0 {
            return Err(libc::EINVAL);
        }
    }

    // All checks passed: apply.
    let t = &mut g.attrs;
    if m & mask::QKEY != 0 {
        t.qkey = a.qkey;
    }
    if m & mask::RQ_PSN != 0 {
        t.rq_psn = a.rq_psn & 0x00ff_ffff;
    }
    if m & mask::SQ_PSN != 0 {
        t.sq_psn = a.sq_psn & 0x00ff_ffff;
    }
    if m & mask::DEST_QPN != 0 {
        t.dest_qp_num = a.dest_qp_num & 0x00ff_ffff;
    }
    if m & mask::ACCESS_FLAGS != 0 {
        t.access = a.qp_access_flags;
    }
    if m & mask::AV != 0 {
        t.ah = a.ah_attr;
    }
    if m & mask::ALT_PATH != 0 {
        t.alt_ah = a.alt_ah_attr;
        t.alt_pkey_index = a.alt_pkey_index;
        t.alt_port_num = a.alt_port_num;
        t.alt_timeout = a.alt_timeout;
    }
    if m & mask::PKEY_INDEX != 0 {
        t.pkey_index = a.pkey_index;
    }
    if m & mask::PORT != 0 {
        t.port_num = a.port_num;
    }
    if m & mask::PATH_MTU != 0 {
        t.path_mtu = path_mtu;
    }
    if m & mask::PATH_MIG_STATE != 0 {
        t.path_mig_state = mig;
    }
    if m & mask::TIMEOUT != 0 {
        t.timeout = a.timeout;
    }
    if m & mask::RETRY_CNT != 0 {
        t.retry_cnt = a.retry_cnt;
    }
    if m & mask::RNR_RETRY != 0 {
        t.rnr_retry = a.rnr_retry;
    }
    if m & mask::MAX_QP_RD_ATOMIC != 0 {
        t.max_rd_atomic = a.max_rd_atomic;
    }
    if m & mask::MAX_DEST_RD_ATOMIC != 0 {
        t.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if m & mask::MIN_RNR_TIMER != 0 {
        t.min_rnr_timer = a.min_rnr_timer;
    }
    if m & mask::EN_SQD_ASYNC_NOTIFY != 0 {
        t.en_sqd_async_notify = a.en_sqd_async_notify;
    }
    if m & mask::RATE_LIMIT != 0 {
        t.rate_limit = a.rate_limit;
    }
    if new != cur || m & mask::STATE != 0 {
        g.state = new;
        s.publish_state(new);
        match new {
            RESET => {
                g.rq.wqes.clear();
                g.out.clear();
                crate::fabric::settle_outbox();
                g.attrs = QpAttrs::default();
                drop(g);
                s.send_cq.remove_qp(s.qp_num);
                s.recv_cq.remove_qp(s.qp_num);
                drop_pending_from(s);
                s.sq_use.reset();
                s.sent.clear();
            }
            ERR if cur != ERR => s.flush_locked(&mut g),
            SQD if cur != SQD && g.attrs.en_sqd_async_notify != 0 => {
                // Nothing is ever outstanding: the send queue is drained at once.
                s.async_q.push(AsyncEvent {
                    event_type: async_kind::SQ_DRAINED,
                    element: s.addr,
                });
            }
            RTR | RTS if !g.early.is_empty() => {
                drop(g);
                replay_early(s);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Delivers, in order, the requests that arrived before `s` could receive.
fn replay_early(s: &QpShared) {
    loop {
        let Some((w, data)) = s.st.lock().early.pop_front() else {
            return;
        };
        crate::fabric::replay(&w, &data);
    }
}
