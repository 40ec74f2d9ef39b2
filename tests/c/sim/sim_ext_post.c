/* The extended verbs real programs use by default (perftest's path), on a
 * loopback RC pair in one process: ibv_create_qp_ex with send_ops_flags and
 * the ibv_wr_* post API (send, send_imm, write, write_imm, read, both
 * atomics, inline data, sge lists, batches, abort, builder errors), and
 * ibv_create_cq_ex with start/next/end_poll and every ibv_wc_read_*; then
 * UD with ibv_wr_set_ud_addr. Every payload and completion field is checked. */
#include <infiniband/verbs.h>
#include <stdint.h>

#include "../common/rc_connect.h"
#include "check.h"

#define WC_FLAGS (IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
		  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define RC_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE | \
		IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |             \
		IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cqx;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	uint16_t lid;
	uint64_t buf[512];
};

/* One completion as the ex readers report it. */
struct got {
	uint64_t wr_id;
	int status;
	int opcode;
	uint32_t vendor_err, byte_len, imm, qp_num, src_qp, slid;
	unsigned int flags;
	uint8_t sl, dlid_path_bits;
	uint64_t ts, wallclock;
};

static struct ibv_cq_ex *make_cq(struct ibv_context *ctx, uint64_t wc_flags)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 64, .wc_flags = wc_flags,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					  .flags = 0 };
	return ibv_create_cq_ex(ctx, &ca);
}

static struct ibv_qp *make_qp(struct side *s, enum ibv_qp_type t, uint64_t ops)
{
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = t,
		.cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = s->pd, .send_ops_flags = ops };
	return ibv_create_qp_ex(s->ctx, &qa);
}

static void setup(struct side *s, struct ibv_device *dev, enum ibv_qp_type t)
{
	struct ibv_port_attr pa;
	s->ctx = ibv_open_device(dev);
	CHECK(s->ctx && ibv_query_port(s->ctx, 1, &pa) == 0);
	s->lid = pa.lid;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cqx = make_cq(s->ctx, WC_FLAGS);
	CHECK(s->pd && s->cqx);
	s->cq = ibv_cq_ex_to_cq(s->cqx);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	s->qp = make_qp(s, t, t == IBV_QPT_UD ? IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM
					       : RC_OPS);
	CHECK(s->mr && s->qp);
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	CHECK(s->qpx && &s->qpx->qp_base == s->qp);
}

static void connect_rc(struct side *s, struct side *peer)
{
	rc_init(s->qp, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	struct rc_path p = { .qpn = peer->qp->qp_num, .lid = peer->lid, .sl = 3, .rd_atomic = 4,
			     .rnr_timer = 12, .timeout = 14, .retry_cnt = 7, .rnr_retry = 0 };
	rc_rtr_rts(s->qp, &p);
}

static uint64_t now_ns(struct ibv_context *ctx)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	CHECK(ibv_query_rt_values_ex(ctx, &v) == 0);
	return (uint64_t)v.raw_clock.tv_sec * 1000000000ull + (uint64_t)v.raw_clock.tv_nsec;
}

static struct got read_cur(struct ibv_cq_ex *cq)
{
	struct got g = { .wr_id = cq->wr_id, .status = cq->status,
			 .opcode = ibv_wc_read_opcode(cq),
			 .vendor_err = ibv_wc_read_vendor_err(cq),
			 .byte_len = ibv_wc_read_byte_len(cq),
			 .imm = be32toh(ibv_wc_read_imm_data(cq)),
			 .qp_num = ibv_wc_read_qp_num(cq),
			 .src_qp = ibv_wc_read_src_qp(cq),
			 .slid = ibv_wc_read_slid(cq),
			 .flags = ibv_wc_read_wc_flags(cq),
			 .sl = ibv_wc_read_sl(cq),
			 .dlid_path_bits = ibv_wc_read_dlid_path_bits(cq),
			 .ts = ibv_wc_read_completion_ts(cq),
			 .wallclock = ibv_wc_read_completion_wallclock_ns(cq) };
	return g;
}

/* Exactly `n` completions, via start/next/end_poll. */
static int poll_n(struct ibv_cq_ex *cq, struct got *out, int n)
{
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	int got = 0;
	int r = ibv_start_poll(cq, &pa);
	if (r == ENOENT)
		return 0;
	CHECK(r == 0);
	while (r == 0 && got < n) {
		out[got++] = read_cur(cq);
		r = ibv_next_poll(cq);
	}
	CHECK(r == 0 || r == ENOENT);
	ibv_end_poll(cq);
	return got;
}

static struct got one(struct ibv_cq_ex *cq)
{
	struct got g;
	CHECK(poll_n(cq, &g, 1) == 1);
	return g;
}

static void post_recv(struct side *s, uint64_t id, void *addr, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
}

static void begin(struct side *s, uint64_t id)
{
	ibv_wr_start(s->qpx);
	s->qpx->wr_id = id;
	s->qpx->wr_flags = IBV_SEND_SIGNALED;
}

static void check_send_wc(struct got g, struct side *s, uint64_t id, int opcode, uint32_t len)
{
	CHECK(g.wr_id == id && g.status == IBV_WC_SUCCESS && g.opcode == opcode);
	CHECK(g.qp_num == s->qp->qp_num && g.vendor_err == 0);
	if (opcode != IBV_WC_SEND)
		CHECK(g.byte_len == len);
}

static void check_recv_wc(struct got g, struct side *rx, struct side *tx, uint64_t id,
			  int opcode, uint32_t len, int imm, uint32_t imm_val)
{
	CHECK(g.wr_id == id && g.status == IBV_WC_SUCCESS && g.opcode == opcode);
	CHECK(g.byte_len == len && g.qp_num == rx->qp->qp_num && g.src_qp == tx->qp->qp_num);
	CHECK(g.slid == tx->lid && g.sl == 3 && g.dlid_path_bits == 0 && g.vendor_err == 0);
	CHECK(!!(g.flags & IBV_WC_WITH_IMM) == !!imm);
	if (imm)
		CHECK(g.imm == imm_val);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	static struct side a, b;
	struct got g[8];
	setup(&a, list[0], IBV_QPT_RC);
	setup(&b, list[1], IBV_QPT_RC);
	connect_rc(&a, &b);
	connect_rc(&b, &a);

	/* An empty CQ: start_poll says ENOENT (and end_poll is not called). */
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	CHECK(ibv_start_poll(a.cqx, &pa) == ENOENT);
	struct ibv_poll_cq_attr bad_pa = { .comp_mask = 1 };
	CHECK(ibv_start_poll(a.cqx, &bad_pa) == EINVAL);

	/* SEND with one SGE. */
	char *abuf = (char *)a.buf, *bbuf = (char *)b.buf;
	strcpy(abuf, "hello, wr_send");
	post_recv(&b, 100, bbuf, 64);
	uint64_t t0 = now_ns(a.ctx);
	begin(&a, 1);
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 15);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	struct got s = one(a.cqx);
	uint64_t t1 = now_ns(a.ctx);
	check_send_wc(s, &a, 1, IBV_WC_SEND, 0);
	CHECK(s.ts >= t0 && s.ts <= t1 && s.wallclock > 1600000000ull * 1000000000ull);
	check_recv_wc(one(b.cqx), &b, &a, 100, IBV_WC_RECV, 15, 0, 0);
	CHECK(strcmp(bbuf, "hello, wr_send") == 0);

	/* SEND with immediate. */
	post_recv(&b, 101, bbuf + 64, 64);
	begin(&a, 2);
	ibv_wr_send_imm(a.qpx, htobe32(0x1234abcd));
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 5);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 2, IBV_WC_SEND, 0);
	check_recv_wc(one(b.cqx), &b, &a, 101, IBV_WC_RECV, 5, 1, 0x1234abcd);
	CHECK(memcmp(bbuf + 64, "hello", 5) == 0);

	/* RDMA WRITE. */
	strcpy(abuf + 128, "written by wr_rdma_write");
	begin(&a, 3);
	ibv_wr_rdma_write(a.qpx, b.mr->rkey, (uintptr_t)(bbuf + 256));
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)(abuf + 128), 25);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 3, IBV_WC_RDMA_WRITE, 25);
	CHECK(strcmp(bbuf + 256, "written by wr_rdma_write") == 0);
	CHECK(poll_n(b.cqx, g, 1) == 0);

	/* RDMA WRITE with immediate: data lands, the receiver gets the immediate. */
	post_recv(&b, 102, bbuf + 1024, 8);
	begin(&a, 4);
	ibv_wr_rdma_write_imm(a.qpx, b.mr->rkey, (uintptr_t)(bbuf + 512), htobe32(77));
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)(abuf + 128), 10);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 4, IBV_WC_RDMA_WRITE, 10);
	check_recv_wc(one(b.cqx), &b, &a, 102, IBV_WC_RECV_RDMA_WITH_IMM, 10, 1, 77);
	CHECK(memcmp(bbuf + 512, "written by", 10) == 0);

	/* RDMA READ. */
	strcpy(bbuf + 1536, "read me back");
	begin(&a, 5);
	ibv_wr_rdma_read(a.qpx, b.mr->rkey, (uintptr_t)(bbuf + 1536));
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)(abuf + 1536), 13);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 5, IBV_WC_RDMA_READ, 13);
	CHECK(strcmp(abuf + 1536, "read me back") == 0);

	/* Atomics: compare-and-swap then fetch-and-add on b.buf[300]. */
	b.buf[300] = 41;
	begin(&a, 6);
	ibv_wr_atomic_cmp_swp(a.qpx, b.mr->rkey, (uintptr_t)&b.buf[300], 41, 1000);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)&a.buf[300], 8);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 6, IBV_WC_COMP_SWAP, 8);
	CHECK(a.buf[300] == 41 && b.buf[300] == 1000);
	begin(&a, 7);
	ibv_wr_atomic_fetch_add(a.qpx, b.mr->rkey, (uintptr_t)&b.buf[300], 5);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)&a.buf[301], 8);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 7, IBV_WC_FETCH_ADD, 8);
	CHECK(a.buf[301] == 1000 && b.buf[300] == 1005);

	/* Inline data is copied at the setter: the buffer is reused at once. */
	char stack[32] = "inline payload";
	post_recv(&b, 103, bbuf + 2048, 64);
	begin(&a, 8);
	ibv_wr_send(a.qpx);
	ibv_wr_set_inline_data(a.qpx, stack, 15);
	memset(stack, 'X', sizeof(stack));
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 8, IBV_WC_SEND, 0);
	check_recv_wc(one(b.cqx), &b, &a, 103, IBV_WC_RECV, 15, 0, 0);
	CHECK(strcmp(bbuf + 2048, "inline payload") == 0);

	/* Inline data list, written by RDMA. */
	struct ibv_data_buf parts[2] = { { (void *)"abc", 3 }, { (void *)"defg", 5 } };
	begin(&a, 9);
	ibv_wr_rdma_write(a.qpx, b.mr->rkey, (uintptr_t)(bbuf + 2200));
	ibv_wr_set_inline_data_list(a.qpx, 2, parts);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 9, IBV_WC_RDMA_WRITE, 8);
	CHECK(strcmp(bbuf + 2200, "abcdefg") == 0);

	/* An SGE list gathers two buffers into one message. */
	strcpy(abuf + 3000, "first+");
	strcpy(abuf + 3100, "second");
	struct ibv_sge two[2] = { { (uintptr_t)(abuf + 3000), 6, a.mr->lkey },
				  { (uintptr_t)(abuf + 3100), 7, a.mr->lkey } };
	post_recv(&b, 104, bbuf + 3000, 64);
	begin(&a, 10);
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge_list(a.qpx, 2, two);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 10, IBV_WC_SEND, 0);
	check_recv_wc(one(b.cqx), &b, &a, 104, IBV_WC_RECV, 13, 0, 0);
	CHECK(strcmp(bbuf + 3000, "first+second") == 0);

	/* A batch of three in one critical section; next_poll walks them. */
	post_recv(&b, 105, bbuf + 3200, 16);
	post_recv(&b, 106, bbuf + 3300, 16);
	ibv_wr_start(a.qpx);
	a.qpx->wr_flags = IBV_SEND_SIGNALED;
	a.qpx->wr_id = 11;
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 2);
	a.qpx->wr_id = 12;
	ibv_wr_send_imm(a.qpx, htobe32(12));
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 3);
	a.qpx->wr_id = 13;
	a.qpx->wr_flags = 0; /* unsignaled: no completion */
	ibv_wr_rdma_write(a.qpx, b.mr->rkey, (uintptr_t)(bbuf + 3400));
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 4);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	CHECK(poll_n(a.cqx, g, 8) == 2);
	check_send_wc(g[0], &a, 11, IBV_WC_SEND, 0);
	check_send_wc(g[1], &a, 12, IBV_WC_SEND, 0);
	CHECK(poll_n(b.cqx, g, 8) == 2);
	check_recv_wc(g[0], &b, &a, 105, IBV_WC_RECV, 2, 0, 0);
	check_recv_wc(g[1], &b, &a, 106, IBV_WC_RECV, 3, 1, 12);
	CHECK(memcmp(bbuf + 3400, abuf, 4) == 0);

	/* wr_abort posts nothing. */
	post_recv(&b, 107, bbuf + 3500, 16);
	begin(&a, 14);
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 2);
	ibv_wr_abort(a.qpx);
	CHECK(poll_n(a.cqx, g, 8) == 0 && poll_n(b.cqx, g, 8) == 0);

	/* Builder errors fail wr_complete and post nothing: a setter with no
	 * work request (EINVAL); too many SGEs (max_send_sge 2); inline data
	 * beyond max_inline_data (the QP's bounds: ENOMEM, as mlx5's
	 * builders answer); in a batch whose first request is good. */
	ibv_wr_start(a.qpx);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 2);
	CHECK(ibv_wr_complete(a.qpx) == EINVAL);
	struct ibv_sge three[3] = { two[0], two[1], two[0] };
	begin(&a, 15);
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 2);
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge_list(a.qpx, 3, three);
	CHECK(ibv_wr_complete(a.qpx) == ENOMEM);
	static char big[128];
	begin(&a, 16);
	ibv_wr_send(a.qpx);
	ibv_wr_set_inline_data(a.qpx, big, sizeof(big));
	CHECK(ibv_wr_complete(a.qpx) == ENOMEM);
	CHECK(poll_n(a.cqx, g, 8) == 0 && poll_n(b.cqx, g, 8) == 0);
	/* The receive posted before the abort is still there. */
	begin(&a, 17);
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 2);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 17, IBV_WC_SEND, 0);
	check_recv_wc(one(b.cqx), &b, &a, 107, IBV_WC_RECV, 2, 0, 0);

	/* The plain ibv_poll_cq reads the same queue as the cursor. */
	post_recv(&b, 108, bbuf + 3600, 16);
	begin(&a, 18);
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 2);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(a.cq, 1, &wc) == 1 && wc.wr_id == 18 && wc.status == IBV_WC_SUCCESS);
	CHECK(ibv_poll_cq(b.cq, 1, &wc) == 1 && wc.wr_id == 108 && wc.byte_len == 2);

	/* IBV_SEND_INLINE in wr_flags does not make an SGE inline (only the
	 * inline setters do): the SGE still goes through its lkey, here of an
	 * MR whose I/O address is not the buffer's virtual address. */
	static char iobuf[64] = "through the lkey";
	uint64_t iova = 0x10000 + ((uintptr_t)iobuf & 0xfff); /* same page offset */
	struct ibv_mr *iomr = ibv_reg_mr_iova(a.pd, iobuf, sizeof(iobuf), iova,
					      IBV_ACCESS_LOCAL_WRITE);
	CHECK(iomr);
	post_recv(&b, 109, bbuf + 3700, 64);
	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 20;
	a.qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, iomr->lkey, iova, 17);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	check_send_wc(one(a.cqx), &a, 20, IBV_WC_SEND, 0);
	check_recv_wc(one(b.cqx), &b, &a, 109, IBV_WC_RECV, 17, 0, 0);
	CHECK(strcmp(bbuf + 3700, "through the lkey") == 0);
	CHECK(ibv_dereg_mr(iomr) == 0);

	/* An error completion through the cursor: a bad rkey. */
	begin(&a, 19);
	ibv_wr_rdma_write(a.qpx, b.mr->rkey + 1000, (uintptr_t)bbuf);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)abuf, 8);
	CHECK(ibv_wr_complete(a.qpx) == 0);
	s = one(a.cqx);
	CHECK(s.wr_id == 19 && s.status == IBV_WC_REM_ACCESS_ERR);

	/* What the sim refuses, cleanly. */
	CHECK(ibv_qp_to_qp_ex(NULL) == NULL);
	struct ibv_qp_init_attr plain = { .send_cq = a.cq, .recv_cq = a.cq, .qp_type = IBV_QPT_RC,
					  .cap = { .max_send_wr = 1, .max_recv_wr = 1,
						   .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *pq = ibv_create_qp(a.pd, &plain);
	CHECK(pq && ibv_qp_to_qp_ex(pq) == NULL);
	CHECK(ibv_destroy_qp(pq) == 0);
	CHECK_ERRNO(make_qp(&a, IBV_QPT_RC, IBV_QP_EX_WITH_TSO), EOPNOTSUPP);
	CHECK_ERRNO(make_qp(&a, IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE), EOPNOTSUPP);
	CHECK_ERRNO(make_cq(a.ctx, IBV_WC_EX_WITH_CVLAN), EOPNOTSUPP);
	struct ibv_cq_init_attr_ex io = { .cqe = 4, .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					  .flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN };
	CHECK_ERRNO(ibv_create_cq_ex(a.ctx, &io), EOPNOTSUPP);
	/* Posting on a QP that is not ready fails at complete, as ibv_post_send. */
	struct ibv_qp *fresh = make_qp(&a, IBV_QPT_RC, RC_OPS);
	struct ibv_qp_ex *fx = fresh ? ibv_qp_to_qp_ex(fresh) : NULL;
	CHECK(fx);
	ibv_wr_start(fx);
	fx->wr_id = 1;
	fx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(fx);
	ibv_wr_set_sge(fx, a.mr->lkey, (uintptr_t)abuf, 2);
	CHECK(ibv_wr_complete(fx) == EINVAL);
	CHECK(ibv_destroy_qp(fresh) == 0);
	/* A single-threaded CQ polls without the lock. */
	struct ibv_cq_init_attr_ex st = { .cqe = 4, .wc_flags = IBV_WC_STANDARD_FLAGS,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					  .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED };
	struct ibv_cq_ex *stcq = ibv_create_cq_ex(a.ctx, &st);
	CHECK(stcq && ibv_start_poll(stcq, &pa) == ENOENT && ibv_start_poll(stcq, &pa) == ENOENT);
	CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(stcq)) == 0);
	/* Only the readers asked for are installed (as providers do). */
	struct ibv_cq_ex *lean = make_cq(a.ctx, IBV_WC_EX_WITH_BYTE_LEN);
	CHECK(lean && lean->read_byte_len && lean->read_opcode && lean->read_wc_flags &&
	      !lean->read_qp_num && !lean->read_completion_ts);
	CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(lean)) == 0);

	/* UD with ibv_wr_set_ud_addr. */
	static struct side u, v;
	setup(&u, list[0], IBV_QPT_UD);
	setup(&v, list[1], IBV_QPT_UD);
	struct side *ud[2] = { &u, &v };
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11 };
		CHECK(ibv_modify_qp(ud[i]->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
							    IBV_QP_PORT | IBV_QP_QKEY) == 0);
		qa.qp_state = IBV_QPS_RTR;
		CHECK(ibv_modify_qp(ud[i]->qp, &qa, IBV_QP_STATE) == 0);
		qa.qp_state = IBV_QPS_RTS;
		CHECK(ibv_modify_qp(ud[i]->qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
	}
	struct ibv_ah_attr aha = { .dlid = v.lid, .sl = 2, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(u.pd, &aha);
	CHECK(ah);
	char *ubuf = (char *)u.buf, *vbuf = (char *)v.buf;
	strcpy(ubuf, "datagram");
	post_recv(&v, 200, vbuf, 40 + 64);
	begin(&u, 20);
	ibv_wr_send_imm(u.qpx, htobe32(99));
	ibv_wr_set_ud_addr(u.qpx, ah, v.qp->qp_num, 0x11);
	ibv_wr_set_sge(u.qpx, u.mr->lkey, (uintptr_t)ubuf, 9);
	CHECK(ibv_wr_complete(u.qpx) == 0);
	check_send_wc(one(u.cqx), &u, 20, IBV_WC_SEND, 0);
	s = one(v.cqx);
	CHECK(s.wr_id == 200 && s.status == IBV_WC_SUCCESS && s.opcode == IBV_WC_RECV);
	CHECK(s.byte_len == 40 + 9 && s.src_qp == u.qp->qp_num && s.qp_num == v.qp->qp_num);
	CHECK(s.slid == u.lid && s.sl == 2 && (s.flags & IBV_WC_WITH_IMM) && s.imm == 99);
	CHECK(strcmp(vbuf + 40, "datagram") == 0);
	/* A UD request without an address handle is refused at complete. */
	begin(&u, 21);
	ibv_wr_send(u.qpx);
	ibv_wr_set_sge(u.qpx, u.mr->lkey, (uintptr_t)ubuf, 9);
	CHECK(ibv_wr_complete(u.qpx) == EINVAL);

	/* Teardown: extended QPs and CQs go through the plain destroy verbs. */
	struct side *all[4] = { &a, &b, &u, &v };
	CHECK(ibv_destroy_ah(ah) == 0);
	for (int i = 0; i < 4; i++) {
		CHECK(ibv_destroy_qp(all[i]->qp) == 0);
		CHECK(ibv_destroy_cq(all[i]->cq) == 0);
		CHECK(ibv_dereg_mr(all[i]->mr) == 0);
		CHECK(ibv_dealloc_pd(all[i]->pd) == 0);
		CHECK(ibv_close_device(all[i]->ctx) == 0);
	}
	ibv_free_device_list(list);
	DONE("sim_ext_post");
}
