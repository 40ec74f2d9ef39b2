/* A QP destroyed and the next one made at the same address (the allocator
 * hands the freed memory back), for tests/whole_api.rs: the data-path
 * checks must judge each QP by its own caps, not by those kept for the
 * address.
 *
 *   recycled_qp   40 QPs made and destroyed in turn, granting 4 and 2
 *                 receive SGEs alternately; each gets one receive of 3
 *                 SGEs, from one site: the 20 of the QPs granting 2 are
 *                 above their caps. Prints "recycled N": how many QPs were
 *                 made at the address of an earlier one that granted
 *                 another number of SGEs.
 */
#include <infiniband/verbs.h>
#include <stdint.h>

#include "check.h"
#include "first_device.h" /* tests/c/common: the first device, a PD, a CQ */

static struct ibv_qp *make(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t sges)
{
	struct ibv_qp_init_attr qia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = { .max_send_wr = 4, .max_recv_wr = 4,
						 .max_send_sge = sges, .max_recv_sge = sges } };
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	CHECK(qp);
	/* INIT: a receive may be posted. */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					    IBV_QP_ACCESS_FLAGS) == 0);
	return qp;
}

/* One site for every post: a violation is logged once, counted each time. */
__attribute__((noipa)) static int recv_three(struct ibv_qp *qp, uint64_t id, struct ibv_sge *sge)
{
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = sge, .num_sge = 3 }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

int main(void)
{
	struct first_device dev;
	open_first_device(&dev, 16);
	static char buf[256];
	struct ibv_mr *mr = ibv_reg_mr(dev.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	struct ibv_sge sge[3];
	for (int i = 0; i < 3; i++)
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)&buf[i * 64], .length = 64,
					   .lkey = mr->lkey };

	enum { N = 40 };
	static uintptr_t addr[N];
	int recycled = 0;
	for (int i = 0; i < N; i++) {
		uint32_t sges = i % 2 ? 2 : 4;
		struct ibv_qp *qp = make(dev.pd, dev.cq, sges);
		addr[i] = (uintptr_t)qp;
		for (int j = 0; j < i; j++)
			if (addr[j] == addr[i] && (j % 2) != (i % 2)) {
				recycled++;
				break;
			}
		printf("rc %d\n", recv_three(qp, 10 + i, sge));
		CHECK(ibv_destroy_qp(qp) == 0);
	}
	printf("recycled %d\n", recycled);
	CHECK(ibv_dereg_mr(mr) == 0);
	close_first_device(&dev);
	DONE("recycled_qp");
}
