/* The extended post API (ibv_wr_start ... ibv_wr_complete) between two RC
 * QPs made with ibv_create_qp_ex and send ops, for tests/datapath_ex.rs.
 *
 *   wr_ex clean   every operation the sim builds (send, send with imm,
 *                 RDMA write with an SGE list, RDMA read, both atomics,
 *                 inline data and an inline list), each completed with
 *                 success; prints which module qpx->wr_set_sge lives in.
 *   wr_ex bad     a clean exchange, then each kind of bad work request
 *                 twice from one site: a deregistered MR's lkey, an SGE
 *                 past the end of its MR, an MR of another PD, an RDMA READ
 *                 into an MR without local write, inline data above the
 *                 QP's max_inline_data; a send on a QP still in RESET.
 *   wr_ex excq    four RDMA writes built in one batch, their completions
 *                 read through an extended CQ's cursor (ibv_start_poll,
 *                 then ibv_next_poll); prints each one's wr_id and status.
 *   wr_ex churn   makes and destroys extended QPs until more than 4,200
 *                 distinct QP addresses were seen (a few stay alive at a
 *                 time, small blocks are kept so the heap moves on), then
 *                 begins a send on one more QP still in RESET: the shim
 *                 reports it only if that QP's builders were wrapped.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "first_device.h" /* tests/c/common: the first device, a PD, a CQ */
#include "rc_pair.h"      /* tests/c/common: struct side, connect_pair, poll_one */

#define ACCESS                                                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |      \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* rc_pair.h's setup, the QP made with ibv_create_qp_ex and send ops. */
static void setup_ex(struct side *s, struct ibv_device *dev)
{
	setup_side(s, dev, ACCESS);
	CHECK(s->pd && s->cq && s->mr);
	struct ibv_qp_init_attr_ex qx = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = s->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				  IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
	};
	s->qp = ibv_create_qp_ex(s->ctx, &qx);
	CHECK(s->qp && ibv_qp_to_qp_ex(s->qp));
}

static void pair(struct side *a, struct side *b)
{
	struct ibv_device **list = two_devices();
	setup_ex(a, list[0]);
	setup_ex(b, list[1]);
	ibv_free_device_list(list);
	connect_pair(a, b);
}

static void begin(struct ibv_qp_ex *x, uint64_t id)
{
	ibv_wr_start(x);
	x->wr_id = id;
	x->wr_flags = IBV_SEND_SIGNALED;
}

static void expect_ok(struct side *s, uint64_t id)
{
	struct ibv_wc wc = poll_one(s->cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == id);
}

static int clean(void)
{
	static struct side a, b;
	pair(&a, &b);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a.qp);
	Dl_info info;
	CHECK(dladdr((void *)x->wr_set_sge, &info) && info.dli_fname);
	printf("wr_set_sge in %s\n", info.dli_fname);
	uint64_t raddr = (uintptr_t)b.buf;
	uint32_t rkey = b.mr->rkey, lkey = a.mr->lkey;

	post_recv(&b, 100, b.buf, 64);
	begin(x, 1);
	ibv_wr_send(x);
	ibv_wr_set_sge(x, lkey, (uintptr_t)a.buf, 64);
	CHECK(ibv_wr_complete(x) == 0);
	expect_ok(&a, 1);
	expect_ok(&b, 100);

	post_recv(&b, 101, b.buf, 64);
	begin(x, 2);
	ibv_wr_send_imm(x, htonl(7));
	ibv_wr_set_inline_data(x, a.buf, 32);
	CHECK(ibv_wr_complete(x) == 0);
	expect_ok(&a, 2);
	expect_ok(&b, 101);

	struct ibv_sge list[2] = { { (uintptr_t)&a.buf[0], 16, lkey },
				   { (uintptr_t)&a.buf[8], 16, lkey } };
	struct ibv_data_buf bufs[2] = { { &a.buf[0], 16 }, { &a.buf[8], 16 } };
	begin(x, 3);
	ibv_wr_rdma_write(x, rkey, raddr + 256);
	ibv_wr_set_sge_list(x, 2, list);
	/* Two requests in one batch. */
	x->wr_id = 4;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, rkey, raddr + 512);
	ibv_wr_set_inline_data_list(x, 2, bufs);
	CHECK(ibv_wr_complete(x) == 0);
	expect_ok(&a, 3);
	expect_ok(&a, 4);

	begin(x, 5);
	ibv_wr_rdma_read(x, rkey, raddr);
	ibv_wr_set_sge(x, lkey, (uintptr_t)&a.buf[64], 64);
	CHECK(ibv_wr_complete(x) == 0);
	expect_ok(&a, 5);

	begin(x, 6);
	ibv_wr_atomic_cmp_swp(x, rkey, raddr + 1024, 0, 1);
	ibv_wr_set_sge(x, lkey, (uintptr_t)&a.buf[100], 8);
	CHECK(ibv_wr_complete(x) == 0);
	expect_ok(&a, 6);

	begin(x, 7);
	ibv_wr_atomic_fetch_add(x, rkey, raddr + 1024, 1);
	ibv_wr_set_sge(x, lkey, (uintptr_t)&a.buf[101], 8);
	CHECK(ibv_wr_complete(x) == 0);
	expect_ok(&a, 7);

	/* An aborted batch posts nothing. */
	begin(x, 8);
	ibv_wr_send(x);
	ibv_wr_set_sge(x, lkey, (uintptr_t)a.buf, 8);
	ibv_wr_abort(x);

	printf("clean done\n");
	return 0;
}

/* Each bad request from its own site (noipa: gcc would fold identical
 * ones), the site of a report being the program's call of the setter. */
#define SITE __attribute__((noipa))

SITE static int send_sge(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	begin(x, id);
	ibv_wr_send(x);
	ibv_wr_set_sge(x, lkey, (uintptr_t)addr, len);
	return ibv_wr_complete(x);
}

SITE static int send_other_pd(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len,
			      uint32_t lkey)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	begin(x, id);
	ibv_wr_send(x);
	ibv_wr_set_sge_list(x, 1, &sge);
	return ibv_wr_complete(x);
}

SITE static int write_past_end(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len,
			       uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	begin(x, id);
	ibv_wr_rdma_write(x, rkey, raddr);
	ibv_wr_set_sge(x, lkey, (uintptr_t)addr, len);
	return ibv_wr_complete(x);
}

SITE static int read_into(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len, uint32_t lkey,
			  uint64_t raddr, uint32_t rkey)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	begin(x, id);
	ibv_wr_rdma_read(x, rkey, raddr);
	ibv_wr_set_sge(x, lkey, (uintptr_t)addr, len);
	return ibv_wr_complete(x);
}

SITE static int send_inline(struct ibv_qp *qp, uint64_t id, void *addr, size_t len)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	begin(x, id);
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, addr, len);
	return ibv_wr_complete(x);
}

/* A QP still in RESET: the builder's state check. */
SITE static int send_in_reset(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len,
			      uint32_t lkey)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	begin(x, id);
	ibv_wr_send(x);
	ibv_wr_set_sge(x, lkey, (uintptr_t)addr, len);
	return ibv_wr_complete(x);
}

static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[8];
	for (int spins = 0; spins < 200; spins++) {
		int n = ibv_poll_cq(cq, 8, wc);
		CHECK(n >= 0);
		if (n == 0)
			usleep(1000);
	}
}

static int bad(void)
{
	static struct side a, b;
	pair(&a, &b);
	/* A clean exchange first: nothing to report. */
	post_recv(&b, 1, b.buf, 64);
	CHECK(send_sge(a.qp, 2, a.buf, 64, a.mr->lkey) == 0);
	expect_ok(&a, 2);
	expect_ok(&b, 1);

	static char other_buf[256], ro_buf[256], gone_buf[256], big[128];
	struct ibv_pd *other = ibv_alloc_pd(a.ctx);
	CHECK(other);
	struct ibv_mr *other_mr = ibv_reg_mr(other, other_buf, sizeof(other_buf),
					     IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *ro = ibv_reg_mr(a.pd, ro_buf, sizeof(ro_buf), 0);
	struct ibv_mr *gone = ibv_reg_mr(a.pd, gone_buf, sizeof(gone_buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(other_mr && ro && gone);
	uint32_t gone_lkey = gone->lkey;
	CHECK(ibv_dereg_mr(gone) == 0);
	uint64_t raddr = (uintptr_t)b.buf;
	struct ibv_qp_init_attr_ex qx = {
		.send_cq = a.cq, .recv_cq = a.cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = a.pd, .send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	struct ibv_qp *reset = ibv_create_qp_ex(a.ctx, &qx);
	CHECK(reset);

	for (int i = 0; i < 2; i++) {
		printf("rc_reset %d\n", send_in_reset(reset, 60 + i, a.buf, 8, a.mr->lkey));
		printf("rc %d\n", send_sge(a.qp, 10 + i, gone_buf, 64, gone_lkey));
		printf("rc %d\n", write_past_end(a.qp, 20 + i, (char *)a.buf + sizeof(a.buf) - 16, 64,
						 a.mr->lkey, raddr, b.mr->rkey));
		printf("rc %d\n", send_other_pd(a.qp, 30 + i, other_buf, 64, other_mr->lkey));
		printf("rc %d\n", read_into(a.qp, 40 + i, ro_buf, 64, ro->lkey, raddr, b.mr->rkey));
		printf("rc %d\n", send_inline(a.qp, 50 + i, big, sizeof(big)));
	}
	drain(a.cq);
	drain(b.cq);
	printf("bad done\n");
	return 0;
}

static int excq(void)
{
	static struct side a, b;
	pair(&a, &b);
	struct ibv_cq_init_attr_ex cx = { .cqe = 16, .wc_flags = IBV_WC_EX_WITH_QP_NUM };
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(a.ctx, &cx);
	CHECK(cqx);
	/* Side a's QP again, sending into the extended CQ. */
	struct ibv_qp_init_attr_ex qx = {
		.send_cq = ibv_cq_ex_to_cq(cqx), .recv_cq = a.cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = a.pd, .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
	};
	a.qp = ibv_create_qp_ex(a.ctx, &qx);
	CHECK(a.qp);
	connect_pair(&a, &b);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a.qp);
	ibv_wr_start(x);
	for (int i = 1; i <= 4; i++) {
		x->wr_id = i;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)&b.buf[i * 8]);
		ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)&a.buf[i * 8], 8);
	}
	CHECK(ibv_wr_complete(x) == 0);
	struct ibv_poll_cq_attr pa = { 0 };
	int rc, got = 0;
	for (int spins = 0; spins < 5000 && (rc = ibv_start_poll(cqx, &pa)) == ENOENT; spins++)
		usleep(1000);
	CHECK(rc == 0);
	do {
		printf("excq wr_id=%llu status=%d qp_num_ok=%d\n", (unsigned long long)cqx->wr_id,
		       cqx->status, ibv_wc_read_qp_num(cqx) == a.qp->qp_num);
		got++;
		for (int spins = 0; spins < 5000 && (rc = ibv_next_poll(cqx)) == ENOENT && got < 4;
		     spins++)
			usleep(1000);
	} while (rc == 0);
	ibv_end_poll(cqx);
	CHECK(got == 4);
	printf("qp_num %#x\nexcq done\n", a.qp->qp_num);
	return 0;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static struct ibv_qp *make_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex qx = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	return ibv_create_qp_ex(ctx, &qx);
}

/* Keeps the heap block a destroyed QP lived in (found by asking malloc for
 * each size class until it hands that address back), so that the next QP
 * gets a new address: the allocator would otherwise give it the same one. */
static void plug(void *gone)
{
	for (size_t size = 16; size <= 16384; size += 16) {
		void *p = malloc(size);
		if (p == gone)
			return; /* kept */
		free(p);
	}
}

static int churn(void)
{
	enum { WANT = 4200, LIVE = 48, MAX_ITER = 60000 };
	struct first_device dev;
	open_first_device(&dev, 16);
	static uintptr_t seen[MAX_ITER];
	struct ibv_qp *live[LIVE] = { 0 };
	size_t n = 0, distinct = 0;
	for (int i = 0; i < MAX_ITER && distinct <= WANT; i++) {
		int k = rand() % LIVE;
		if (live[k]) {
			void *gone = live[k];
			CHECK(ibv_destroy_qp(live[k]) == 0);
			plug(gone);
		}
		live[k] = make_qp_ex(dev.ctx, dev.pd, dev.cq);
		CHECK(live[k]);
		seen[n++] = (uintptr_t)live[k];
		if (n % 512 == 0) {
			qsort(seen, n, sizeof(seen[0]), cmp_ptr);
			size_t d = 0;
			for (size_t j = 0; j < n; j++)
				if (j == 0 || seen[j] != seen[j - 1])
					seen[d++] = seen[j];
			n = distinct = d;
		}
	}
	printf("distinct QP addresses: %zu\n", distinct);
	CHECK(distinct > WANT);
	for (int k = 0; k < LIVE; k++)
		if (live[k])
			CHECK(ibv_destroy_qp(live[k]) == 0);
	struct ibv_qp *qp = make_qp_ex(dev.ctx, dev.pd, dev.cq);
	CHECK(qp);
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	qpx->wr_id = 0x77;
	ibv_wr_start(qpx);
	ibv_wr_send(qpx); /* the QP is still in RESET */
	ibv_wr_abort(qpx);
	CHECK(ibv_destroy_qp(qp) == 0);
	close_first_device(&dev);
	printf("churn done\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "clean"))
		return clean();
	if (!strcmp(mode, "bad"))
		return bad();
	if (!strcmp(mode, "excq"))
		return excq();
	if (!strcmp(mode, "churn"))
		return churn();
	fprintf(stderr, "usage: wr_ex clean|bad|excq|churn\n");
	return 2;
}
