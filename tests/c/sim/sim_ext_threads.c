/* The extended API under threads: several threads post RDMA WRITE batches
 * to one QP through ibv_wr_start..ibv_wr_complete (a per-QP critical
 * section) while two threads drain the CQ with start/next/end_poll (locked
 * from start to end). Every work request completes exactly once, with its
 * own wr_id, and every write lands. */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../common/rc_connect.h"
#include "check.h"

#define POSTERS 4
#define BATCHES 200
#define PER_BATCH 3
#define TOTAL (POSTERS * BATCHES * PER_BATCH)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	uint16_t lid;
	uint64_t buf[TOTAL];
};

static struct side a, b;
static atomic_int seen[TOTAL];
static atomic_int done_count;

static void setup(struct side *s, struct ibv_device *dev)
{
	struct ibv_port_attr pa;
	s->ctx = ibv_open_device(dev);
	CHECK(s->ctx && ibv_query_port(s->ctx, 1, &pa) == 0);
	s->lid = pa.lid;
	s->pd = ibv_alloc_pd(s->ctx);
	struct ibv_cq_init_attr_ex ca = { .cqe = TOTAL, .wc_flags = IBV_WC_STANDARD_FLAGS };
	s->cqx = ibv_create_cq_ex(s->ctx, &ca);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(s->pd && s->cqx && s->mr);
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = ibv_cq_ex_to_cq(s->cqx), .recv_cq = ibv_cq_ex_to_cq(s->cqx),
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = s->pd, .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE };
	s->qp = ibv_create_qp_ex(s->ctx, &qa);
	CHECK(s->qp && (s->qpx = ibv_qp_to_qp_ex(s->qp)));
}

static void connect_rc(struct side *s, struct side *peer)
{
	rc_init(s->qp, IBV_ACCESS_REMOTE_WRITE);
	struct rc_path p = { .qpn = peer->qp->qp_num, .lid = peer->lid };
	rc_rtr_rts(s->qp, &p);
}

static void *poster(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int i = 0; i < BATCHES; i++) {
		ibv_wr_start(a.qpx);
		for (int k = 0; k < PER_BATCH; k++) {
			int id = (t * BATCHES + i) * PER_BATCH + k;
			a.buf[id] = 0x1000000ull + (uint64_t)id;
			a.qpx->wr_id = (uint64_t)id;
			a.qpx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_rdma_write(a.qpx, b.mr->rkey, (uintptr_t)&b.buf[id]);
			ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)&a.buf[id], 8);
		}
		CHECK(ibv_wr_complete(a.qpx) == 0);
	}
	return NULL;
}

static void *poller(void *arg)
{
	(void)arg;
	struct ibv_poll_cq_attr pa = { 0 };
	while (atomic_load(&done_count) < TOTAL) {
		if (ibv_start_poll(a.cqx, &pa) != 0)
			continue;
		int r = 0;
		while (r == 0) {
			CHECK(a.cqx->status == IBV_WC_SUCCESS);
			CHECK(ibv_wc_read_opcode(a.cqx) == IBV_WC_RDMA_WRITE);
			CHECK(ibv_wc_read_byte_len(a.cqx) == 8);
			uint64_t id = a.cqx->wr_id;
			CHECK(id < TOTAL && atomic_fetch_add(&seen[id], 1) == 0);
			atomic_fetch_add(&done_count, 1);
			r = ibv_next_poll(a.cqx);
		}
		CHECK(r == ENOENT);
		ibv_end_poll(a.cqx);
	}
	return NULL;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	setup(&a, list[0]);
	setup(&b, list[1]);
	connect_rc(&a, &b);
	connect_rc(&b, &a);
	pthread_t p[POSTERS], q[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&q[i], NULL, poller, NULL) == 0);
	for (int i = 0; i < POSTERS; i++)
		CHECK(pthread_create(&p[i], NULL, poster, (void *)(intptr_t)i) == 0);
	for (int i = 0; i < POSTERS; i++)
		CHECK(pthread_join(p[i], NULL) == 0);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_join(q[i], NULL) == 0);
	CHECK(atomic_load(&done_count) == TOTAL);
	for (int id = 0; id < TOTAL; id++)
		CHECK(seen[id] == 1 && b.buf[id] == 0x1000000ull + (uint64_t)id);
	struct side *all[2] = { &a, &b };
	for (int i = 0; i < 2; i++) {
		CHECK(ibv_destroy_qp(all[i]->qp) == 0);
		CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(all[i]->cqx)) == 0);
		CHECK(ibv_dereg_mr(all[i]->mr) == 0);
		CHECK(ibv_dealloc_pd(all[i]->pd) == 0);
		CHECK(ibv_close_device(all[i]->ctx) == 0);
	}
	ibv_free_device_list(list);
	DONE("sim_ext_threads");
}
