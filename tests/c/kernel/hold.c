/* Holds RDMA objects for tests/real_kernel.rs to count with the kernel's
 * own `rdma resource show`, and stops at named points:
 *
 *   created        two contexts, each with PDs, MRs, CQs, QPs and an SRQ
 *   destroyed      some of each destroyed again
 *   before_close   (the same) just before the second context is closed
 *   after_close    the second context closed with its objects still made
 *
 * At each point it writes DIR/<point> and waits for DIR/<point>.go; it
 * exits (without destroying anything more) after the point named by
 * argv[2], so that the shim's exit report lists what was live there.
 *
 * usage: hold DIR LAST_POINT */
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/check.h"

static const char *dir, *last;

static void point(const char *name)
{
	char path[4096], go[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(go, sizeof go, "%s/%s.go", dir, name);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(fd >= 0);
	close(fd);
	while (access(go, F_OK) != 0)
		usleep(20000);
	if (strcmp(name, last) == 0)
		exit(0);
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd[2];
	struct ibv_mr *mr[3];
	struct ibv_cq *cq[3];
	struct ibv_srq *srq;
	struct ibv_qp *qp[2];
};

static char buf[3][4096];

static void make(struct side *s, struct ibv_device *dev)
{
	s->ctx = ibv_open_device(dev);
	CHECK(s->ctx);
	for (int i = 0; i < 2; i++)
		CHECK(s->pd[i] = ibv_alloc_pd(s->ctx));
	for (int i = 0; i < 3; i++)
		CHECK(s->mr[i] = ibv_reg_mr(s->pd[0], buf[i], sizeof buf[i], IBV_ACCESS_LOCAL_WRITE));
	for (int i = 0; i < 3; i++)
		CHECK(s->cq[i] = ibv_create_cq(s->ctx, 16, NULL, NULL, 0));
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
	CHECK(s->srq = ibv_create_srq(s->pd[0], &sa));
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr qa = {
			.send_cq = s->cq[0],
			.recv_cq = s->cq[0],
			.qp_type = IBV_QPT_RC,
			.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
		};
		CHECK(s->qp[i] = ibv_create_qp(s->pd[0], &qa));
	}
}

/* One of each kind goes: the spare PD, an MR, an unused CQ, a QP. */
static void unmake_some(struct side *s)
{
	CHECK(ibv_destroy_qp(s->qp[1]) == 0);
	CHECK(ibv_dereg_mr(s->mr[2]) == 0);
	CHECK(ibv_destroy_cq(s->cq[2]) == 0);
	CHECK(ibv_dealloc_pd(s->pd[1]) == 0);
}

int main(int argc, char **argv)
{
	CHECK(argc == 3);
	dir = argv[1];
	last = argv[2];
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	static struct side a, b;
	make(&a, list[0]);
	make(&b, list[0]);
	ibv_free_device_list(list);
	point("created");
	unmake_some(&a);
	unmake_some(&b);
	point("destroyed");
	point("before_close");
	CHECK(ibv_close_device(b.ctx) == 0);
	point("after_close");
	return 0;
}
