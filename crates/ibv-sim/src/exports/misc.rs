//! Strings, rates, fork support, sysfs, and the kernel-ABI copy helpers.

// The `.symver` directives that give this module's exports their versions.
#[cfg(not(test))]
core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/symver_misc.s")));

use core::ffi::{c_char, c_int, c_void};

use verbs_abi::{ibv_ah_attr, ibv_context, ibv_qp_attr};

use crate::{context, fork, guard, strings, sysfs};

#[no_mangle]
pub unsafe extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    guard::call(c"unknown".as_ptr(), || strings::node_type(node_type))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_port_state_str(port_state: c_int) -> *const c_char {
    guard::call(c"unknown".as_ptr(), || strings::port_state(port_state))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    guard::call(c"unknown".as_ptr(), || strings::event_type(event))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    guard::call(c"unknown".as_ptr(), || strings::wc_status(status))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    guard::call(-1, || strings::rate_to_mult(rate))
}

#[no_mangle]
pub unsafe extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    guard::call(0, || strings::mult_to_rate(mult))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    guard::call(-1, || strings::rate_to_mbps(rate))
}

#[no_mangle]
pub unsafe extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    guard::call(0, || strings::mbps_to_rate(mbps))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    guard::call(libc::EIO, || {
        let r = fork::init();
        if r != 0 {
            guard::set_errno(r);
        }
        r
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_is_fork_initialized() -> c_int {
    guard::call(0, fork::status)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dontfork_range(base: *mut c_void, size: usize) -> c_int {
    guard::call(libc::EIO, || {
        fork::dontfork_range(base, size).err().unwrap_or(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dofork_range(base: *mut c_void, size: usize) -> c_int {
    guard::call(libc::EIO, || fork::dofork_range(base, size))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    guard::call(c"/sys".as_ptr(), sysfs::sysfs_path)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    guard::call(-1, || sysfs::read_file(dir, file, buf, size))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_resolve_eth_l2_from_gid(
    ctx: *mut ibv_context,
    attr: *mut ibv_ah_attr,
    eth_mac: *mut u8,
    vid: *mut u16,
) -> c_int {
    guard::call(-1, || {
        let r = (|| {
            let sim = context::from_ibv(ctx)?;
            if attr.is_null() || eth_mac.is_null() || !sim.dev.is_ethernet() {
                return Err(libc::EINVAL);
            }
            // SAFETY: attr points at the caller's ibv_ah_attr (plain data).
            let a = unsafe { *attr };
            if a.is_global == 0 {
                return Err(libc::EINVAL);
            }
            // SAFETY: reading the raw bytes of a GID union.
            let g = unsafe { a.grh.dgid.raw };
            // Link-local GIDs carry the MAC as a modified EUI-64; another
            // (IPv4-mapped) GID resolves when a simulated device holds it,
            // as the neighbour table knows the machine's own addresses.
            let mac = if g[0] == 0xfe && g[1] & 0xc0 == 0x80 && g[11] == 0xff && g[12] == 0xfe {
                [g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]]
            } else {
                crate::device::devices()
                    .map_err(|_| libc::EINVAL)?
                    .iter()
                    .find(|d| {
                        (1..=u32::from(d.phys_ports())).any(|port| {
                            (0..d.gid_slots())
                                .any(|i| matches!(d.gid(port, i), Ok(Some((raw, _))) if raw == g))
                        })
                    })
                    .ok_or(libc::EINVAL)?
                    .mac
            };
            // SAFETY: eth_mac holds ETHERNET_LL_SIZE (6) bytes; vid, if
            // given, points at the caller's u16.
            unsafe {
                core::ptr::copy_nonoverlapping(mac.as_ptr(), eth_mac, 6);
                if !vid.is_null() {
                    *vid = 0xffff;
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) => 0,
            Err(e) => {
                guard::set_errno(e);
                -1
            }
        }
    })
}

/// `struct ib_uverbs_global_route` + `ib_uverbs_ah_attr` (kernel ABI).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ib_uverbs_ah_attr {
    dgid: [u8; 16],
    flow_label: u32,
    sgid_index: u8,
    hop_limit: u8,
    traffic_class: u8,
    reserved0: u8,
    dlid: u16,
    sl: u8,
    src_path_bits: u8,
    static_rate: u8,
    is_global: u8,
    port_num: u8,
    reserved: u8,
}
verbs_abi::assert_layout!(ib_uverbs_ah_attr, 32, 4; dgid => 0, flow_label => 16, dlid => 24, port_num => 30);

/// `struct ib_uverbs_qp_attr` (kernel ABI).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ib_uverbs_qp_attr {
    qp_attr_mask: u32,
    qp_state: u32,
    cur_qp_state: u32,
    path_mtu: u32,
    path_mig_state: u32,
    qkey: u32,
    rq_psn: u32,
    sq_psn: u32,
    dest_qp_num: u32,
    qp_access_flags: u32,
    ah_attr: ib_uverbs_ah_attr,
    alt_ah_attr: ib_uverbs_ah_attr,
    max_send_wr: u32,
    max_recv_wr: u32,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline_data: u32,
    pkey_index: u16,
    alt_pkey_index: u16,
    en_sqd_async_notify: u8,
    sq_draining: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    min_rnr_timer: u8,
    port_num: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    alt_port_num: u8,
    alt_timeout: u8,
    reserved: [u8; 5],
}
verbs_abi::assert_layout!(ib_uverbs_qp_attr, 144, 4; ah_attr => 40, alt_ah_attr => 72, max_send_wr => 104, pkey_index => 124, alt_timeout => 138);

fn ah_from_kern(k: &ib_uverbs_ah_attr) -> ibv_ah_attr {
    // SAFETY: plain data; all-zero is valid.
    let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
    a.grh.dgid.raw = k.dgid;
    a.grh.flow_label = k.flow_label;
    a.grh.sgid_index = k.sgid_index;
    a.grh.hop_limit = k.hop_limit;
    a.grh.traffic_class = k.traffic_class;
    a.dlid = k.dlid;
    a.sl = k.sl;
    a.src_path_bits = k.src_path_bits;
    a.static_rate = k.static_rate;
    a.is_global = k.is_global;
    a.port_num = k.port_num;
    a
}

#[no_mangle]
pub unsafe extern "C" fn ibv_copy_ah_attr_from_kern(
    dst: *mut ibv_ah_attr,
    src: *const ib_uverbs_ah_attr,
) {
    guard::void(|| {
        if dst.is_null() || src.is_null() {
            return;
        }
        // SAFETY: the caller passes a kernel ah_attr and room for an ibv_ah_attr.
        unsafe { dst.write(ah_from_kern(&*src)) };
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_copy_qp_attr_from_kern(
    dst: *mut ibv_qp_attr,
    src: *const ib_uverbs_qp_attr,
) {
    guard::void(|| {
        if dst.is_null() || src.is_null() {
            return;
        }
        // SAFETY: the caller passes a kernel qp_attr and room for an
        // ibv_qp_attr; enum fields are written as ints.
        unsafe {
            let k = &*src;
            let d = dst;
            use core::ptr::addr_of_mut as m;
            m!((*d).qp_state).cast::<u32>().write(k.qp_state);
            m!((*d).cur_qp_state).cast::<u32>().write(k.cur_qp_state);
            m!((*d).path_mtu).cast::<u32>().write(k.path_mtu);
            m!((*d).path_mig_state)
                .cast::<u32>()
                .write(k.path_mig_state);
            m!((*d).qkey).write(k.qkey);
            m!((*d).rq_psn).write(k.rq_psn);
            m!((*d).sq_psn).write(k.sq_psn);
            m!((*d).dest_qp_num).write(k.dest_qp_num);
            m!((*d).qp_access_flags).write(k.qp_access_flags);
            m!((*d).cap.max_send_wr).write(k.max_send_wr);
            m!((*d).cap.max_recv_wr).write(k.max_recv_wr);
            m!((*d).cap.max_send_sge).write(k.max_send_sge);
            m!((*d).cap.max_recv_sge).write(k.max_recv_sge);
            m!((*d).cap.max_inline_data).write(k.max_inline_data);
            m!((*d).ah_attr).write(ah_from_kern(&k.ah_attr));
            m!((*d).alt_ah_attr).write(ah_from_kern(&k.alt_ah_attr));
            m!((*d).pkey_index).write(k.pkey_index);
            m!((*d).alt_pkey_index).write(k.alt_pkey_index);
            m!((*d).en_sqd_async_notify).write(k.en_sqd_async_notify);
            m!((*d).sq_draining).write(k.sq_draining);
            m!((*d).max_rd_atomic).write(k.max_rd_atomic);
            m!((*d).max_dest_rd_atomic).write(k.max_dest_rd_atomic);
            m!((*d).min_rnr_timer).write(k.min_rnr_timer);
            m!((*d).port_num).write(k.port_num);
            m!((*d).timeout).write(k.timeout);
            m!((*d).retry_cnt).write(k.retry_cnt);
            m!((*d).rnr_retry).write(k.rnr_retry);
            m!((*d).alt_port_num).write(k.alt_port_num);
            m!((*d).alt_timeout).write(k.alt_timeout);
        }
    })
}

/// `struct ib_user_path_rec` (kernel ABI, `rdma/ib_user_sa.h`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ib_user_path_rec {
    dgid: [u8; 16],
    sgid: [u8; 16],
    dlid: u16,
    slid: u16,
    raw_traffic: u32,
    flow_label: u32,
    reversible: u32,
    mtu: u32,
    pkey: u16,
    hop_limit: u8,
    traffic_class: u8,
    numb_path: u8,
    sl: u8,
    mtu_selector: u8,
    rate_selector: u8,
    rate: u8,
    packet_life_time_selector: u8,
    packet_life_time: u8,
    preference: u8,
}
verbs_abi::assert_layout!(ib_user_path_rec, 64, 4; dlid => 32, raw_traffic => 36, pkey => 52, preference => 63);

/// `struct ibv_sa_path_rec` (`infiniband/sa.h`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_sa_path_rec {
    dgid: [u8; 16],
    sgid: [u8; 16],
    dlid: u16,
    slid: u16,
    raw_traffic: c_int,
    flow_label: u32,
    hop_limit: u8,
    traffic_class: u8,
    reversible: c_int,
    numb_path: u8,
    pkey: u16,
    sl: u8,
    mtu_selector: u8,
    mtu: u8,
    rate_selector: u8,
    rate: u8,
    packet_life_time_selector: u8,
    packet_life_time: u8,
    preference: u8,
}
verbs_abi::assert_layout!(ibv_sa_path_rec, 64, 4;
    dlid => 32, raw_traffic => 36, flow_label => 40, hop_limit => 44, reversible => 48,
    numb_path => 52, pkey => 54, sl => 56, preference => 63);

#[no_mangle]
pub unsafe extern "C" fn ibv_copy_path_rec_from_kern(
    dst: *mut ibv_sa_path_rec,
    src: *const ib_user_path_rec,
) {
    guard::void(|| {
        if dst.is_null() || src.is_null() {
            return;
        }
        // SAFETY: the caller passes both records.
        let k = unsafe { *src };
        let p = ibv_sa_path_rec {
            dgid: k.dgid,
            sgid: k.sgid,
            dlid: k.dlid,
            slid: k.slid,
            raw_traffic: k.raw_traffic as c_int,
            flow_label: k.flow_label,
            hop_limit: k.hop_limit,
            traffic_class: k.traffic_class,
            reversible: k.reversible as c_int,
            numb_path: k.numb_path,
            pkey: k.pkey,
            sl: k.sl,
            mtu_selector: k.mtu_selector,
            mtu: k.mtu as u8,
            rate_selector: k.rate_selector,
            rate: k.rate,
            packet_life_time_selector: k.packet_life_time_selector,
            packet_life_time: k.packet_life_time,
            preference: k.preference,
        };
        // SAFETY: as above.
        unsafe { dst.write(p) };
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_copy_path_rec_to_kern(
    dst: *mut ib_user_path_rec,
    src: *const ibv_sa_path_rec,
) {
    guard::void(|| {
        if dst.is_null() || src.is_null() {
            return;
        }
        // SAFETY: the caller passes both records.
        let p = unsafe { *src };
        let k = ib_user_path_rec {
            dgid: p.dgid,
            sgid: p.sgid,
            dlid: p.dlid,
            slid: p.slid,
            raw_traffic: p.raw_traffic as u32,
            flow_label: p.flow_label,
            reversible: p.reversible as u32,
            mtu: u32::from(p.mtu),
            pkey: p.pkey,
            hop_limit: p.hop_limit,
            traffic_class: p.traffic_class,
            numb_path: p.numb_path,
            sl: p.sl,
            mtu_selector: p.mtu_selector,
            rate_selector: p.rate_selector,
            rate: p.rate,
            packet_life_time_selector: p.packet_life_time_selector,
            packet_life_time: p.packet_life_time,
            preference: p.preference,
        };
        // SAFETY: as above.
        unsafe { dst.write(k) };
    })
}
