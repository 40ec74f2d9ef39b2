//! `ibv_query_qp`, and the plain-integer view of `ibv_qp_attr` that it
//! and `modify` read the caller's struct through.

use super::*;

/// Plain-integer view of `ibv_qp_attr`, so the caller's struct can be read
/// without ever holding (possibly invalid) enum values as Rust enums. The
/// enum fields are the first four ints; `assert_layout!` below pins the
/// rest to `ibv_qp_attr`'s offsets.
#[repr(C)]
pub(super) struct RawQpAttr {
    pub(super) qp_state: c_int,
    pub(super) cur_qp_state: c_int,
    pub(super) path_mtu: c_int,
    pub(super) path_mig_state: c_int,
    pub(super) qkey: u32,
    pub(super) rq_psn: u32,
    pub(super) sq_psn: u32,
    pub(super) dest_qp_num: u32,
    pub(super) qp_access_flags: u32,
    pub(super) cap: ibv_qp_cap,
    pub(super) ah_attr: ibv_ah_attr,
    pub(super) alt_ah_attr: ibv_ah_attr,
    pub(super) pkey_index: u16,
    pub(super) alt_pkey_index: u16,
    pub(super) en_sqd_async_notify: u8,
    pub(super) sq_draining: u8,
    pub(super) max_rd_atomic: u8,
    pub(super) max_dest_rd_atomic: u8,
    pub(super) min_rnr_timer: u8,
    pub(super) port_num: u8,
    pub(super) timeout: u8,
    pub(super) retry_cnt: u8,
    pub(super) rnr_retry: u8,
    pub(super) alt_port_num: u8,
    pub(super) alt_timeout: u8,
    pub(super) rate_limit: u32,
}

verbs_abi::assert_layout!(RawQpAttr, 144, 8;
    qp_state => 0, cur_qp_state => 4, path_mtu => 8, path_mig_state => 12, qkey => 16,
    rq_psn => 20, sq_psn => 24, dest_qp_num => 28, qp_access_flags => 32, cap => 36,
    ah_attr => 56, alt_ah_attr => 88, pkey_index => 120, alt_pkey_index => 122,
    en_sqd_async_notify => 124, sq_draining => 125, max_rd_atomic => 126,
    max_dest_rd_atomic => 127, min_rnr_timer => 128, port_num => 129, timeout => 130,
    retry_cnt => 131, rnr_retry => 132, alt_port_num => 133, alt_timeout => 134,
    rate_limit => 136);
const _: () = assert!(core::mem::size_of::<RawQpAttr>() == core::mem::size_of::<ibv_qp_attr>());

/// `ibv_query_qp`: fills every attribute (as the kernel does) and the init attributes.
pub fn query(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> Result<(), c_int> {
    let (_ctx, q) = get(qp)?;
    if attr.is_null() || init.is_null() {
        return Err(libc::EINVAL);
    }
    let s = &q.shared;
    let g = s.st.lock();
    let t = &g.attrs;
    let out = RawQpAttr {
        qp_state: g.state,
        cur_qp_state: g.state,
        path_mtu: t.path_mtu,
        path_mig_state: t.path_mig_state,
        qkey: t.qkey,
        rq_psn: t.rq_psn,
        sq_psn: t.sq_psn,
        dest_qp_num: t.dest_qp_num,
        qp_access_flags: t.access,
        cap: s.cap,
        ah_attr: t.ah,
        alt_ah_attr: t.alt_ah,
        pkey_index: t.pkey_index,
        alt_pkey_index: t.alt_pkey_index,
        en_sqd_async_notify: t.en_sqd_async_notify,
        sq_draining: 0,
        max_rd_atomic: t.max_rd_atomic,
        max_dest_rd_atomic: t.max_dest_rd_atomic,
        min_rnr_timer: t.min_rnr_timer,
        port_num: t.port_num,
        timeout: t.timeout,
        retry_cnt: t.retry_cnt,
        rnr_retry: t.rnr_retry,
        alt_port_num: t.alt_port_num,
        alt_timeout: t.alt_timeout,
        rate_limit: t.rate_limit,
    };
    let state = g.state;
    drop(g);
    // SAFETY: attr and init point at the caller's structs; RawQpAttr has
    // ibv_qp_attr's layout with valid values for its enum fields; the
    // init attributes' enum field is written as an int.
    unsafe {
        attr.cast::<RawQpAttr>().write(out);
        addr_of_mut!((*init).qp_context).write((*qp).qp_context);
        addr_of_mut!((*init).send_cq).write((*qp).send_cq);
        addr_of_mut!((*init).recv_cq).write((*qp).recv_cq);
        addr_of_mut!((*init).srq).write((*qp).srq);
        addr_of_mut!((*init).cap).write(s.cap);
        addr_of_mut!((*init).qp_type)
            .cast::<c_int>()
            .write(s.qp_type);
        addr_of_mut!((*init).sq_sig_all).write(c_int::from(s.sq_sig_all));
    }
    s.publish_state(state);
    Ok(())
}
