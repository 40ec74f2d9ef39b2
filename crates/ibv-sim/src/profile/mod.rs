//! Device profiles: the attributes, limits and provider rules of the real
//! device a simulated family stands for (`config::FAMILIES` names one for
//! each family): `mlx` the Mellanox ConnectX generations (ConnectX-6 for
//! mlx5, ConnectX-3 for mlx4), `soft` the kernel's software devices
//! (Soft-RoCE for rxe, Soft-iWARP for siw), each as rdma-core 44's
//! provider and Linux 6.1's driver present it. A family whose own
//! device has no profile yet reports ConnectX-6's figures. A leaf module:
//! plain data.

mod mlx;
mod soft;

pub use mlx::{CONNECTX3, CONNECTX6};
pub use soft::{RXE, SIW};

/// What a profile reports and how its provider behaves.
#[derive(Debug)]
pub struct Profile {
    /// The real device it stands for, for the documentation.
    pub name: &'static str,
    pub max_qp: i32,
    pub max_qp_wr: i32,
    pub max_sge: i32,
    pub max_sge_rd: i32,
    pub max_cq: i32,
    pub max_cqe: i32,
    pub max_mr: i32,
    pub max_pd: i32,
    pub max_qp_rd_atom: i32,
    pub max_res_rd_atom: i32,
    pub max_qp_init_rd_atom: i32,
    pub max_mcast_grp: i32,
    pub max_mcast_qp_attach: i32,
    /// None: `max_mcast_grp * max_mcast_qp_attach`.
    pub max_total_mcast_qp_attach: Option<i32>,
    pub max_ah: i32,
    pub max_srq: i32,
    pub max_srq_wr: i32,
    pub max_srq_sge: i32,
    pub max_mw: i32,
    pub max_inline_data: u32,
    /// None: the P_Key table's length.
    pub max_pkeys: Option<u16>,
    pub local_ca_ack_delay: u8,
    pub page_size_cap: u64,
    /// None: `ibv_device_attr.fw_ver` is the family's.
    pub fw_ver: Option<&'static str>,
    /// None: the family's capability flags (`SimDevice::device_cap_flags`).
    pub cap_flags: Option<u32>,
    /// XRC, on-demand paging, device memory, thread and parent domains,
    /// completion timestamps, WQs and RSS tables: offered, or refused as
    /// the provider refuses what it lacks (`EOPNOTSUPP`).
    pub xrc: bool,
    pub odp: bool,
    pub device_memory: bool,
    pub domains: bool,
    pub timestamps: bool,
    pub wq: bool,
    /// Memory windows (`ibv_alloc_mw`); a device that offers them and
    /// advertises `max_mw` 0 (mlx4) does not count them.
    pub mw: bool,
    /// `ibv_create_cq_ex` and `ibv_create_qp_ex` beyond a PD: the
    /// provider's extended verbs (siw has neither: EOPNOTSUPP).
    pub cq_ex: bool,
    pub qp_ex: bool,
    /// Port 1 (RoCE families): GID table length, maximum message size,
    /// link width and speed (`ibv_port_attr` encodings).
    pub gid_tbl_len: i32,
    /// `port_cap_flags` and `flags` (`IBV_QPF_GRH_REQUIRED`) of a RoCE port.
    pub roce_port_cap_flags: u32,
    pub roce_port_flags: u8,
    pub max_msg_sz: u32,
    pub active_width: u8,
    pub active_speed: u8,
    /// RoCE v2 GIDs only (rxe): entry 0 the link-local GID, 1 the
    /// IPv4-mapped one. Otherwise v1 and v2 of each, 0-3.
    pub roce_v2_only: bool,
    /// Queues are rings of a power of two slots, one kept empty: a request
    /// for n entries gets `next_power_of_two(n + 1) - 1` (rxe_queue_init),
    /// for send and receive queues, SRQs and CQs; the send queue's inline
    /// size is at least its SGEs' size (16 bytes each).
    pub ring_queues: bool,
    /// A requester's send completion carries the bytes sent in `byte_len`.
    pub send_byte_len: bool,
    /// A request the responder refuses for access or key reasons (class C
    /// errors of an RC responder) moves the responder QP to ERR too,
    /// flushing its receives (the IB spec's rule: rxe, ConnectX);
    /// otherwise the responder stays RTS.
    pub responder_fails: bool,
    /// An RDMA request the responder QP's own access flags do not grant is
    /// an invalid request (`IBV_WC_REM_INV_REQ_ERR`), not an access error.
    pub qp_access_inv_req: bool,
    /// A SEND longer than its receive: the responder completes it with
    /// `IBV_WC_LOC_QP_OP_ERR` and the requester gets `IBV_WC_REM_OP_ERR`
    /// (rxe: its copy returns EINVAL, a malformed WQE); otherwise
    /// `IBV_WC_LOC_LEN_ERR` and `IBV_WC_REM_INV_REQ_ERR`.
    pub short_recv_qp_op_err: bool,
    /// A CQ raises `IBV_EVENT_CQ_ERR` for every completion it loses to
    /// overflow, and a responder whose receive completion was lost goes
    /// to ERR; otherwise one event and the QP carries on.
    pub cq_overflow_fails_qp: bool,
    /// A send that finds no receive retries after the responder's RNR
    /// timer (`min_rnr_timer`, the IB spec's table), `rnr_retry` times;
    /// otherwise (below 7) it fails at once.
    pub rnr_timer: bool,
    /// A type 2 memory window's bind takes the key (low 8 bits) of the
    /// rkey it carries and keeps the window's index (upper 24); otherwise
    /// an rkey of another index is `IBV_WC_MW_BIND_ERR`.
    pub mw_key_byte_only: bool,
    /// A request a QP of this process drops (not connected back, not
    /// ready) times out after the requester's retries; otherwise it fails
    /// at once with `IBV_WC_RETRY_EXC_ERR`.
    pub unanswered_times_out: bool,
    /// One completion vector per CPU (rxe); otherwise a fixed number.
    pub comp_vector_per_cpu: bool,
    /// The QP async events of the IB spec: `IBV_EVENT_COMM_EST` for the
    /// first request a QP in RTR receives, and on a responder that a
    /// refused RDMA or atomic request moved to ERR (`responder_fails`; no
    /// receive consumed, so no completion tells it)
    /// `IBV_EVENT_QP_ACCESS_ERR` (access, key or bounds) or
    /// `IBV_EVENT_QP_REQ_ERR` (an invalid request). rxe 6.1 raises none of
    /// them: its QPs just move to ERR.
    pub spec_qp_events: bool,
    /// A requester whose own SGE's lkey is refused completes with
    /// `IBV_WC_LOC_QP_OP_ERR` (rxe 6.1's copy fails as a malformed WQE);
    /// otherwise `IBV_WC_LOC_PROT_ERR`.
    pub lkey_qp_op_err: bool,
    /// What `ibv_post_send` returns for a work request with more SGEs or
    /// inline bytes than the QP takes (rxe EINVAL; mlx5 and mlx4 ENOMEM),
    /// and for one posted before RTS (rxe EINVAL; mlx5 ENOMEM: its send
    /// queue takes no SGE until RTS).
    pub post_errno: core::ffi::c_int,
    pub post_state_errno: core::ffi::c_int,
    /// What `ibv_wr_complete` returns after `ibv_wr_set_sge_list` or
    /// `ibv_wr_set_inline_data*` exceeded the QP's own `max_send_sge` or
    /// `max_inline_data` (rxe: ENOSPC; mlx5: ENOMEM).
    pub builder_errno: core::ffi::c_int,
    /// Where the provider or its kernel driver departs from the spec.
    pub quirks: Quirks,
    /// What creating an object past the advertised maximum fails with
    /// (rxe's pools: EINVAL; mlx5: ENOMEM).
    pub limit_errno: core::ffi::c_int,
}

/// Behaviours of one provider and kernel driver where they depart from
/// the spec (and from other devices), each measured on the device.
#[derive(Debug)]
pub struct Quirks {
    /// `ibv_wr_set_inline_data_list` sends nothing: rdma-core 44's rxe
    /// never adds the buffers' lengths up (each is still bounded).
    pub inline_list_empty: bool,
    /// `ibv_wr_set_sge_list` sends `num_sge` times the first SGE's length
    /// (rxe sums the first entry again and again), taken from the list
    /// in order.
    pub sge_list_first_len: bool,
    /// Send operations the provider takes and its kernel cannot execute
    /// (Linux 6.1's rxe: atomic write on RC, SEND with invalidate on
    /// UC): created and posted, then `IBV_WC_LOC_QP_OP_ERR`, QP to ERR.
    pub unexecutable_ops: bool,
    /// An RDMA READ or atomic on a QP whose `max_rd_atomic` is 0 waits
    /// for a credit that never comes (until the QP is reset or fails).
    pub no_credit_stalls: bool,
    /// A responder whose `max_dest_rd_atomic` is 0 refuses READs and
    /// atomics as an invalid request (`IBV_WC_REM_INV_REQ_ERR`).
    pub no_dest_credit_refused: bool,
    /// `ibv_rereg_mr` is not offered (`IBV_REREG_MR_ERR_CMD`, EOPNOTSUPP).
    pub no_rereg_mr: bool,
}

/// No quirk: the spec's behaviour.
pub const SPEC: Quirks = Quirks {
    inline_list_empty: false,
    sge_list_first_len: false,
    unexecutable_ops: false,
    no_credit_stalls: false,
    no_dest_credit_refused: false,
    no_rereg_mr: false,
};

/// The largest `max_qp` of any profile (the fabric's QP table holds it).
pub const LARGEST_MAX_QP: i32 = soft::RXE_DEFAULT_MAX - 16;

/// `Err(EOPNOTSUPP)` for a feature the profile lacks (`offered(p.xrc)?`):
/// what rdma-core's placeholder for a provider's missing verb returns.
pub fn offered(feature: bool) -> Result<(), core::ffi::c_int> {
    if feature {
        Ok(())
    } else {
        Err(libc::EOPNOTSUPP)
    }
}

/// The capacity a ring of `requested` entries gets (`ring_queues`).
pub fn ring_capacity(requested: u32) -> u32 {
    (requested.saturating_add(1))
        .checked_next_power_of_two()
        .map_or(u32::MAX, |n| n - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_round_up_keeping_a_slot() {
        assert_eq!(ring_capacity(1), 1);
        assert_eq!(ring_capacity(7), 7);
        assert_eq!(ring_capacity(8), 15);
        assert_eq!(ring_capacity(15), 15);
        assert_eq!(ring_capacity(16), 31);
    }

    #[test]
    fn rxe_cap_flags_are_the_kernels() {
        assert_eq!(RXE.cap_flags, Some(0x0122_3c76));
    }

    #[test]
    fn no_profile_exceeds_the_fabric_qp_table() {
        for p in [&CONNECTX6, &CONNECTX3, &RXE, &SIW] {
            assert!(p.max_qp <= LARGEST_MAX_QP, "{}", p.name);
        }
    }
}
