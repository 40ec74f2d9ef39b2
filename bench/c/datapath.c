/* Figure 5: the data path (inline verbs that never reach the shim).
 *
 *   datapath ITERS BATCHES [sge [BYTES]]
 *
 * With "sge" the WRITE is not inline: its buffer goes as an SGE (what the
 * shim's data-path checks look up), of BYTES bytes (default 8, at most
 * 64 KiB: what the work-in-flight checks fingerprint).
 * Two RC QPs on one context, connected to each other (loopback through the
 * sim), one CQ. Each operation posts one signaled 8-byte RDMA WRITE with
 * ibv_post_send and polls the CQ with ibv_poll_cq until its completion
 * arrives. Prints ns=<median ns per operation>. */
#include "sim.h"

static void to_rts(struct ibv_qp *qp, uint32_t dest_qpn, uint16_t dlid, uint8_t port)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = port,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
    };
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("modify_qp INIT");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = dlid;
    a.ah_attr.port_num = port;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("modify_qp RTR");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        die("modify_qp RTS");
}

static struct ibv_qp *qp;
static struct ibv_cq *cq;
static struct ibv_sge sge;
static struct ibv_send_wr wr;

static void ops(long n)
{
    for (long i = 0; i < n; i++) {
        struct ibv_send_wr *bad;
        wr.wr_id = (uint64_t)i;
        if (ibv_post_send(qp, &wr, &bad))
            die("ibv_post_send");
        struct ibv_wc wc;
        int got;
        while ((got = ibv_poll_cq(cq, 1, &wc)) == 0)
            ;
        if (got < 0 || wc.status != IBV_WC_SUCCESS)
            die("ibv_poll_cq: %d, status %d", got, got > 0 ? (int)wc.status : -1);
    }
}

int main(int argc, char **argv)
{
    long iters = arg_long(argc, argv, 1, 20000);
    int batches = (int)arg_long(argc, argv, 2, 21);
    int inline_flag = argc > 3 && !strcmp(argv[3], "sge") ? 0 : IBV_SEND_INLINE;
    long bytes = inline_flag ? 8 : arg_long(argc, argv, 4, 8);
    if (bytes < 8 || bytes > 65536)
        die("BYTES: 8 to 65536");

    struct ibv_context *ctx = open_nth(0);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    if (!pd || !cq)
        die("set-up (PD, CQ)");
    struct ibv_qp *a = make_qp(pd, cq, IBV_QPT_RC), *b = make_qp(pd, cq, IBV_QPT_RC);
    if (!a || !b)
        die("ibv_create_qp");
    struct ibv_port_attr port;
    if (ibv_query_port(ctx, 1, &port))
        die("ibv_query_port");
    to_rts(a, b->qp_num, port.lid, 1);
    to_rts(b, a->qp_num, port.lid, 1);

    static char src[65536], dst[65536];
    struct ibv_mr *ms = ibv_reg_mr(pd, src, sizeof src, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *md = ibv_reg_mr(pd, dst, sizeof dst, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!ms || !md)
        die("ibv_reg_mr");
    qp = a;
    sge = (struct ibv_sge){ .addr = (uintptr_t)src, .length = (uint32_t)bytes, .lkey = ms->lkey };
    wr = (struct ibv_send_wr){
        .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
        .send_flags = IBV_SEND_SIGNALED | inline_flag,
        .wr.rdma = { .remote_addr = (uintptr_t)dst, .rkey = md->rkey },
    };
    memcpy(src, "datapath", 8);
    ops(iters / 10 + 1); /* warm-up */
    if (memcmp(dst, "datapath", 8))
        die("the RDMA WRITE did not land");

    double *per = calloc((size_t)batches, sizeof *per);
    for (int i = 0; i < batches; i++) {
        double t0 = now_ns();
        ops(iters);
        per[i] = (now_ns() - t0) / (double)iters;
    }
    report_batches("ns", per, batches);

    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
    ibv_dereg_mr(ms);
    ibv_dereg_mr(md);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return 0;
}
