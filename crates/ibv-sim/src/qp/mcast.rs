//! Multicast attachment of UD QPs.

use super::*;

pub(super) fn is_multicast_lid(lid: u16) -> bool {
    (0xc000..0xffff).contains(&lid)
}

/// `ibv_attach_mcast`.
pub fn attach_mcast(qp: *mut ibv_qp, gid: *const [u8; 16], lid: u16) -> Result<(), c_int> {
    let (_ctx, q) = get(qp)?;
    let s = &q.shared;
    if s.dev.is_iwarp() {
        return Err(libc::EOPNOTSUPP);
    }
    if gid.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: gid points at the caller's 16-byte GID.
    let g = unsafe { *gid };
    if g[0] != 0xff || s.qp_type != QPT_UD || (!s.dev.is_ethernet() && !is_multicast_lid(lid)) {
        return Err(libc::EINVAL);
    }
    let mut st = s.st.lock();
    if st.mcast.iter().any(|(x, _)| *x == g) {
        return Ok(());
    }
    st.mcast.push((g, lid));
    drop(st);
    let shared = QPS.get(s.qp_num).ok_or(libc::EINVAL)?;
    let mut m = MCAST.lock();
    let members = m.entry(g).or_default();
    members.push(shared);
    if members.len() == 1 {
        // This process's first QP in the group: other processes' sends to
        // it now come here too.
        crate::fabric::mcast_join(&g);
    }
    Ok(())
}

/// `ibv_detach_mcast`.
pub fn detach_mcast(qp: *mut ibv_qp, gid: *const [u8; 16], lid: u16) -> Result<(), c_int> {
    let (_ctx, q) = get(qp)?;
    let s = &q.shared;
    if s.dev.is_iwarp() {
        return Err(libc::EOPNOTSUPP);
    }
    if gid.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: gid points at the caller's 16-byte GID.
    let g = unsafe { *gid };
    let _ = lid;
    let mut st = s.st.lock();
    let Some(pos) = st.mcast.iter().position(|(x, _)| *x == g) else {
        return Err(libc::EINVAL);
    };
    st.mcast.remove(pos);
    drop(st);
    let mut m = MCAST.lock();
    if let Some(v) = m.get_mut(&g) {
        v.retain(|x| x.qp_num != s.qp_num);
        if v.is_empty() {
            m.remove(&g);
            crate::fabric::mcast_leave(&g);
        }
    }
    if m.is_empty() {
        m.shrink_to_fit();
    }
    Ok(())
}
