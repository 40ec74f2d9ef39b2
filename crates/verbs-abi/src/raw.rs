//! The C enums' types as struct fields and callback arguments hold them:
//! any `int`. Memory the program, the real library or a provider writes can
//! hold a value no Rust enum variant has (a newer rdma-core's, a driver's,
//! garbage), and reading it as the Rust enum would be undefined behaviour.
//! So every enum-typed field of these mirrors is a transparent newtype over
//! `c_int` named as its C enum (`raw::ibv_qp_type` for `enum ibv_qp_type`):
//! the layout is C's, cbindgen writes the field as the C enum (it resolves
//! the type by its last path segment), and Rust code gets the value through
//! `get()`, which is `None` for an integer the enum does not list.
//! Comparing with a variant (`attr.qp_type == ibv_qp_type::IBV_QPT_RC`)
//! compares integers; a variant converts with `.into()`.

use core::ffi::c_int;

/// One newtype per enum, with the enum's full list of variants: `get()`
/// tests the integer against each, and a match over the list (which fails
/// to compile if a variant is missing) keeps it complete.
macro_rules! raw_enums {
    ($($name:ident { $($v:ident),* $(,)? })*) => {$(
        #[doc = concat!("`enum ", stringify!($name), "` as C stores it (see the module docs).")]
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub c_int);

        impl $name {
            /// The enum's variant, or `None` for an integer it does not list.
            pub const fn get(self) -> Option<crate::$name> {
                $(if self.0 == crate::$name::$v as c_int {
                    return Some(crate::$name::$v);
                })*
                None
            }

            /// The field's value for a variant.
            pub const fn of(value: crate::$name) -> Self {
                Self(value as c_int)
            }
        }

        impl From<crate::$name> for $name {
            fn from(value: crate::$name) -> Self {
                Self::of(value)
            }
        }

        impl PartialEq<crate::$name> for $name {
            fn eq(&self, other: &crate::$name) -> bool {
                self.0 == *other as c_int
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.get() {
                    Some(v) => v.fmt(f),
                    None => write!(f, "{}({})", stringify!($name), self.0),
                }
            }
        }

        const _: () = {
            #[allow(dead_code)]
            fn every_variant_listed(value: crate::$name) {
                match value {
                    $(crate::$name::$v)|* => {}
                }
            }
            assert!(core::mem::size_of::<$name>() == core::mem::size_of::<c_int>());
        };
    )*};
}

raw_enums! {
    ibv_node_type {
        IBV_NODE_UNKNOWN, IBV_NODE_CA, IBV_NODE_SWITCH, IBV_NODE_ROUTER, IBV_NODE_RNIC,
        IBV_NODE_USNIC, IBV_NODE_USNIC_UDP, IBV_NODE_UNSPECIFIED
    }
    ibv_transport_type {
        IBV_TRANSPORT_UNKNOWN, IBV_TRANSPORT_IB, IBV_TRANSPORT_IWARP, IBV_TRANSPORT_USNIC,
        IBV_TRANSPORT_USNIC_UDP, IBV_TRANSPORT_UNSPECIFIED
    }
    ibv_atomic_cap {
        IBV_ATOMIC_NONE, IBV_ATOMIC_HCA, IBV_ATOMIC_GLOB
    }
    ibv_port_state {
        IBV_PORT_NOP, IBV_PORT_DOWN, IBV_PORT_INIT, IBV_PORT_ARMED, IBV_PORT_ACTIVE,
        IBV_PORT_ACTIVE_DEFER
    }
    ibv_mtu {
        IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096
    }
    ibv_event_type {
        IBV_EVENT_CQ_ERR, IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR,
        IBV_EVENT_COMM_EST, IBV_EVENT_SQ_DRAINED, IBV_EVENT_PATH_MIG, IBV_EVENT_PATH_MIG_ERR,
        IBV_EVENT_DEVICE_FATAL, IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR, IBV_EVENT_LID_CHANGE,
        IBV_EVENT_PKEY_CHANGE, IBV_EVENT_SM_CHANGE, IBV_EVENT_SRQ_ERR, IBV_EVENT_SRQ_LIMIT_REACHED,
        IBV_EVENT_QP_LAST_WQE_REACHED, IBV_EVENT_CLIENT_REREGISTER, IBV_EVENT_GID_CHANGE,
        IBV_EVENT_WQ_FATAL
    }
    ibv_wc_status {
        IBV_WC_SUCCESS, IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOC_EEC_OP_ERR,
        IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR, IBV_WC_MW_BIND_ERR, IBV_WC_BAD_RESP_ERR,
        IBV_WC_LOC_ACCESS_ERR, IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_OP_ERR,
        IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_LOC_RDD_VIOL_ERR,
        IBV_WC_REM_INV_RD_REQ_ERR, IBV_WC_REM_ABORT_ERR, IBV_WC_INV_EECN_ERR,
        IBV_WC_INV_EEC_STATE_ERR, IBV_WC_FATAL_ERR, IBV_WC_RESP_TIMEOUT_ERR, IBV_WC_GENERAL_ERR,
        IBV_WC_TM_ERR, IBV_WC_TM_RNDV_INCOMPLETE
    }
    ibv_qp_type {
        IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV,
        IBV_QPT_DRIVER
    }
    ibv_srq_type {
        IBV_SRQT_BASIC, IBV_SRQT_XRC, IBV_SRQT_TM
    }
    ibv_wq_state {
        IBV_WQS_RESET, IBV_WQS_RDY, IBV_WQS_ERR, IBV_WQS_UNKNOWN
    }
    ibv_wq_type {
        IBV_WQT_RQ
    }
    ibv_counter_description {
        IBV_COUNTER_PACKETS, IBV_COUNTER_BYTES
    }
    ibv_qp_state {
        IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE,
        IBV_QPS_ERR, IBV_QPS_UNKNOWN
    }
    ibv_mig_state {
        IBV_MIG_MIGRATED, IBV_MIG_REARM, IBV_MIG_ARMED
    }
    ibv_wr_opcode {
        IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
        IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV,
        IBV_WR_BIND_MW, IBV_WR_SEND_WITH_INV, IBV_WR_TSO, IBV_WR_DRIVER1, IBV_WR_ATOMIC_WRITE
    }
    ibv_wc_opcode {
        IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD,
        IBV_WC_BIND_MW, IBV_WC_LOCAL_INV, IBV_WC_TSO, IBV_WC_ATOMIC_WRITE, IBV_WC_RECV,
        IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_TM_ADD, IBV_WC_TM_DEL, IBV_WC_TM_SYNC, IBV_WC_TM_RECV,
        IBV_WC_TM_NO_TAG, IBV_WC_DRIVER1, IBV_WC_DRIVER2, IBV_WC_DRIVER3
    }
    ibv_flow_attr_type {
        IBV_FLOW_ATTR_NORMAL, IBV_FLOW_ATTR_ALL_DEFAULT, IBV_FLOW_ATTR_MC_DEFAULT,
        IBV_FLOW_ATTR_SNIFFER
    }
    ibv_mw_type {
        IBV_MW_TYPE_1, IBV_MW_TYPE_2
    }
    ibv_advise_mr_advice {
        IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
        IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_int_is_a_value_and_only_listed_ones_a_variant() {
        let garbage = ibv_qp_type(0x7fff_0000);
        assert_eq!(garbage.get(), None);
        assert_eq!(ibv_qp_type(2).get(), Some(crate::ibv_qp_type::IBV_QPT_RC));
        assert!(ibv_node_type(-1) == crate::ibv_node_type::IBV_NODE_UNKNOWN);
        assert_eq!(format!("{garbage:?}"), "ibv_qp_type(2147418112)");
        assert_eq!(
            ibv_wc_status::from(crate::ibv_wc_status::IBV_WC_SUCCESS).0,
            0
        );
    }
}
