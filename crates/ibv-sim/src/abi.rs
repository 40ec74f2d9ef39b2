//! The values of `verbs-abi`'s C enums that the data path compares, as
//! the integer types of the fields that carry them (enum-typed fields are
//! read as integers, never as the Rust enum: a program may store any
//! value there). Every value comes from `verbs-abi`; none is written here.

use core::ffi::c_int;

/// `const NAME: type = verbs_abi::ENUM::VALUE as type;` for each pair:
/// `values!(pub c_int: ibv_wc_status { WC_SUCCESS = IBV_WC_SUCCESS, .. })`.
macro_rules! values {
    ($vis:vis $ty:ty: $enum:ident { $($name:ident = $value:ident),* $(,)? }) => {
        $($vis const $name: $ty = verbs_abi::$enum::$value as $ty;)*
    };
}
pub(crate) use values;

values!(pub c_int: ibv_wc_opcode {
    WC_SEND = IBV_WC_SEND,
    WC_RDMA_WRITE = IBV_WC_RDMA_WRITE,
    WC_RDMA_READ = IBV_WC_RDMA_READ,
    WC_COMP_SWAP = IBV_WC_COMP_SWAP,
    WC_FETCH_ADD = IBV_WC_FETCH_ADD,
    WC_RECV = IBV_WC_RECV,
    WC_RECV_RDMA_WITH_IMM = IBV_WC_RECV_RDMA_WITH_IMM,
    WC_BIND_MW = IBV_WC_BIND_MW,
    WC_LOCAL_INV = IBV_WC_LOCAL_INV,
});

values!(pub c_int: ibv_wc_status {
    WC_SUCCESS = IBV_WC_SUCCESS,
    WC_LOC_LEN_ERR = IBV_WC_LOC_LEN_ERR,
    WC_LOC_QP_OP_ERR = IBV_WC_LOC_QP_OP_ERR,
    WC_LOC_PROT_ERR = IBV_WC_LOC_PROT_ERR,
    WC_WR_FLUSH_ERR = IBV_WC_WR_FLUSH_ERR,
    WC_REM_INV_REQ_ERR = IBV_WC_REM_INV_REQ_ERR,
    WC_REM_ACCESS_ERR = IBV_WC_REM_ACCESS_ERR,
    WC_REM_OP_ERR = IBV_WC_REM_OP_ERR,
    WC_RETRY_EXC_ERR = IBV_WC_RETRY_EXC_ERR,
    WC_RNR_RETRY_EXC_ERR = IBV_WC_RNR_RETRY_EXC_ERR,
    WC_MW_BIND_ERR = IBV_WC_MW_BIND_ERR,
});

values!(pub c_int: ibv_wr_opcode {
    WR_RDMA_WRITE = IBV_WR_RDMA_WRITE,
    WR_RDMA_WRITE_WITH_IMM = IBV_WR_RDMA_WRITE_WITH_IMM,
    WR_SEND = IBV_WR_SEND,
    WR_SEND_WITH_IMM = IBV_WR_SEND_WITH_IMM,
    WR_RDMA_READ = IBV_WR_RDMA_READ,
    WR_ATOMIC_CMP_AND_SWP = IBV_WR_ATOMIC_CMP_AND_SWP,
    WR_ATOMIC_FETCH_AND_ADD = IBV_WR_ATOMIC_FETCH_AND_ADD,
    WR_LOCAL_INV = IBV_WR_LOCAL_INV,
    WR_BIND_MW = IBV_WR_BIND_MW,
    WR_SEND_WITH_INV = IBV_WR_SEND_WITH_INV,
    WR_ATOMIC_WRITE = IBV_WR_ATOMIC_WRITE,
});

values!(pub u32: ibv_send_flags {
    SEND_FENCE = IBV_SEND_FENCE,
    SEND_SIGNALED = IBV_SEND_SIGNALED,
    SEND_SOLICITED = IBV_SEND_SOLICITED,
    SEND_INLINE = IBV_SEND_INLINE,
    SEND_IP_CSUM = IBV_SEND_IP_CSUM,
});

values!(pub u32: ibv_wc_flags {
    WC_GRH = IBV_WC_GRH,
    WC_WITH_IMM = IBV_WC_WITH_IMM,
    WC_WITH_INV = IBV_WC_WITH_INV,
});
