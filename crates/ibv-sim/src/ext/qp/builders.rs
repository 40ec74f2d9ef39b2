//! The `ibv_wr_*` builders of an extended QP: one per opcode (a new work
//! request) and the setters of its address, scatter list and inline data,
//! kept within the QP's bounds.

use super::*;

pub(super) unsafe extern "C" fn wr_send(x: *mut ibv_qp_ex) {
    op(x, WR_SEND, |_| {})
}

pub(super) unsafe extern "C" fn wr_send_imm(x: *mut ibv_qp_ex, imm_data: u32) {
    op(x, WR_SEND_WITH_IMM, |w| w.imm = imm_data)
}

pub(super) unsafe extern "C" fn wr_rdma_write(x: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    op(x, WR_RDMA_WRITE, |w| {
        w.rkey = rkey;
        w.remote_addr = remote_addr;
    })
}

pub(super) unsafe extern "C" fn wr_rdma_write_imm(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm_data: u32,
) {
    op(x, WR_RDMA_WRITE_WITH_IMM, |w| {
        w.rkey = rkey;
        w.remote_addr = remote_addr;
        w.imm = imm_data;
    })
}

pub(super) unsafe extern "C" fn wr_rdma_read(x: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    op(x, WR_RDMA_READ, |w| {
        w.rkey = rkey;
        w.remote_addr = remote_addr;
    })
}

pub(super) unsafe extern "C" fn wr_atomic_cmp_swp(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    op(x, WR_ATOMIC_CMP_AND_SWP, |w| {
        w.rkey = rkey;
        w.remote_addr = remote_addr;
        w.compare_add = compare;
        w.swap = swap;
    })
}

pub(super) unsafe extern "C" fn wr_atomic_fetch_add(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    op(x, WR_ATOMIC_FETCH_AND_ADD, |w| {
        w.rkey = rkey;
        w.remote_addr = remote_addr;
        w.compare_add = add;
    })
}

pub(super) unsafe extern "C" fn wr_set_ud_addr(
    x: *mut ibv_qp_ex,
    ah: *mut ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    set(x, |w| {
        w.ah = ah as usize;
        w.remote_qpn = remote_qpn;
        w.remote_qkey = remote_qkey;
        Ok(())
    })
}

pub(super) unsafe extern "C" fn wr_set_sge(x: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    set(x, |w| {
        w.data = Data::Sge(ibv_sge { addr, length, lkey });
        Ok(())
    })
}

/// The QP's own bounds for the builders (its `max_send_sge` and
/// `max_inline_data`, as `ibv_query_qp` reports them) and what exceeding
/// one fails with (the profile's `builder_errno`).
fn bounds(x: *mut ibv_qp_ex) -> (usize, usize, c_int) {
    // SAFETY: the builders are reached only through the table of a live
    // extended QP.
    let q = unsafe { qp::unchecked(x.cast::<ibv_qp>()) };
    let cap = &q.shared.cap;
    (
        cap.max_send_sge as usize,
        cap.max_inline_data as usize,
        q.shared.dev.profile().builder_errno,
    )
}

/// The profile of the QP's device.
fn profile_of(x: *mut ibv_qp_ex) -> &'static crate::profile::Profile {
    // SAFETY: as in `bounds`.
    unsafe { qp::unchecked(x.cast::<ibv_qp>()) }
        .shared
        .dev
        .profile()
}

/// `sge_list_first_len`: the entries that carry `n` times the first
/// one's length, the last cut short (the whole list when it is shorter).
fn first_len_list(list: &[ibv_sge]) -> Vec<ibv_sge> {
    let Some(first) = list.first() else {
        return Vec::new();
    };
    let mut left = u64::from(first.length) * list.len() as u64;
    if left > list.iter().map(|e| u64::from(e.length)).sum::<u64>() {
        return list.to_vec();
    }
    let mut out = Vec::new();
    for e in list {
        if left == 0 {
            break;
        }
        let n = u64::from(e.length).min(left);
        out.push(ibv_sge {
            length: n as u32,
            ..*e
        });
        left -= n;
    }
    out
}

pub(super) unsafe extern "C" fn wr_set_sge_list(
    x: *mut ibv_qp_ex,
    num_sge: usize,
    list: *const ibv_sge,
) {
    let (max_sge, _, too_many) = bounds(x);
    let first_len = profile_of(x).quirks.sge_list_first_len;
    set(x, |w| {
        if num_sge > max_sge {
            return Err(too_many);
        }
        if num_sge > 0 && list.is_null() {
            return Err(libc::EINVAL);
        }
        w.data = match num_sge {
            0 => Data::List(Vec::new()),
            // SAFETY: the program passes num_sge readable entries.
            1 => Data::Sge(unsafe { list.read() }),
            _ => {
                // SAFETY: as above.
                let l = unsafe { core::slice::from_raw_parts(list, num_sge) };
                Data::List(if first_len {
                    first_len_list(l)
                } else {
                    l.to_vec()
                })
            }
        };
        Ok(())
    })
}

/// Appends `len` bytes at `addr` to the inline data being built, within
/// the QP's bound (`bounds`).
fn add_inline(
    w: &mut Wr,
    addr: *const c_void,
    len: usize,
    (max, too_long): (usize, c_int),
) -> Result<(), c_int> {
    let Data::Inline(d) = &mut w.data else {
        return Err(libc::EINVAL);
    };
    if d.len().saturating_add(len) > max {
        return Err(too_long);
    }
    if len > 0 {
        if addr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the program passes len readable bytes at addr.
        d.extend_from_slice(unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), len) });
    }
    Ok(())
}

pub(super) unsafe extern "C" fn wr_set_inline_data(
    x: *mut ibv_qp_ex,
    addr: *mut c_void,
    length: usize,
) {
    let (_, max, too_long) = bounds(x);
    set(x, |w| {
        w.data = Data::Inline(Vec::new());
        add_inline(w, addr, length, (max, too_long))
    })
}

pub(super) unsafe extern "C" fn wr_set_inline_data_list(
    x: *mut ibv_qp_ex,
    num_buf: usize,
    bufs: *const ibv_data_buf,
) {
    let (_, max, too_long) = bounds(x);
    let empty = profile_of(x).quirks.inline_list_empty;
    set(x, |w| {
        w.data = Data::Inline(Vec::new());
        if num_buf > 0 && bufs.is_null() {
            return Err(libc::EINVAL);
        }
        for i in 0..num_buf {
            // SAFETY: the program passes num_buf readable entries.
            let b = unsafe { bufs.add(i).read() };
            if empty {
                // Each buffer bounded on its own, none of it sent.
                if b.length > max {
                    return Err(too_long);
                }
                continue;
            }
            add_inline(w, b.addr, b.length, (max, too_long))?;
        }
        Ok(())
    })
}

/// A type 2 bind (`objects::mw` executes it).
pub(super) unsafe extern "C" fn wr_bind_mw(
    x: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    if info.is_null() {
        return fail(x, libc::EINVAL);
    }
    // SAFETY: info points at the caller's struct (plain data), copied now.
    let info = unsafe { info.read() };
    op(x, WR_BIND_MW, |w| {
        w.rkey = rkey;
        w.bind = Some((mw, info));
    })
}

/// The rkey to invalidate travels where `ibv_send_wr` keeps it, in `imm_data`.
pub(super) unsafe extern "C" fn wr_local_inv(x: *mut ibv_qp_ex, rkey: u32) {
    op(x, WR_LOCAL_INV, |w| w.imm = rkey)
}

pub(super) unsafe extern "C" fn wr_send_inv(x: *mut ibv_qp_ex, rkey: u32) {
    op(x, WR_SEND_WITH_INV, |w| w.imm = rkey)
}

/// The remote XRC SRQ of the request being built.
pub(super) unsafe extern "C" fn wr_set_xrc_srqn(x: *mut ibv_qp_ex, srqn: u32) {
    set(x, |w| {
        w.xrc_srqn = srqn;
        Ok(())
    })
}

// Operations the sim does not simulate: `ibv_create_qp_ex` refuses their
// send ops, and a program that calls them anyway gets EOPNOTSUPP from
// `ibv_wr_complete` instead of a jump through NULL. Atomic write is posted
// where the provider takes it and its kernel fails it
// (`Quirks::unexecutable_ops`).

pub(super) unsafe extern "C" fn wr_send_tso(
    x: *mut ibv_qp_ex,
    _hdr: *mut c_void,
    _hdr_sz: u16,
    _mss: u16,
) {
    fail(x, libc::EOPNOTSUPP)
}

pub(super) unsafe extern "C" fn wr_atomic_write(
    x: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    _atomic_wr: *const c_void,
) {
    if !profile_of(x).quirks.unexecutable_ops {
        return fail(x, libc::EOPNOTSUPP);
    }
    op(x, WR_ATOMIC_WRITE, |w| {
        w.rkey = rkey;
        w.remote_addr = remote_addr;
    })
}
