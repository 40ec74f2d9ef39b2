/* Bad arguments get the real errno; destroying a parent that still has
 * children is EBUSY (returned, as rdma-core returns it) and succeeds once
 * the children are gone; ibv_fork_init is EINVAL once memory was registered;
 * ibv_close_device leaves orphans readable. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <sys/mman.h>

#include "check.h"

int main(void)
{
	CHECK(ibv_fork_init() == 0); /* nothing registered yet */
	CHECK(ibv_is_fork_initialized() == IBV_FORK_ENABLED);

	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	static char buf[4096];

	/* Memory registration: the kernel's checks. */
	CHECK_ERRNO(ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE), EINVAL);
	CHECK_ERRNO(ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_ATOMIC), EINVAL);
	CHECK_ERRNO(ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE), EINVAL);
	CHECK_ERRNO(ibv_reg_mr(pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE), EFAULT);
	CHECK_ERRNO(ibv_reg_mr(pd, buf, sizeof(buf), 1 << 15), EINVAL); /* unknown flag */
	/* Implicit on-demand paging (the whole address space) is not simulated. */
	CHECK_ERRNO(ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND), EOPNOTSUPP);
	CHECK_ERRNO(ibv_reg_mr(NULL, buf, sizeof(buf), 0), EINVAL);
	void *gone = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(gone != MAP_FAILED);
	CHECK(munmap(gone, 8192) == 0);
	CHECK_ERRNO(ibv_reg_mr(pd, gone, 8192, IBV_ACCESS_LOCAL_WRITE), EFAULT);
	struct ibv_mr *ro = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_READ); /* read-only is fine */
	CHECK(ro);
	CHECK(ibv_fork_init() == 0); /* already enabled above */

	/* Other bad arguments. */
	CHECK_ERRNO(ibv_open_device(NULL), EINVAL);
	CHECK_ERRNO(ibv_alloc_pd(NULL), EINVAL);
	CHECK_ERRNO(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
	CHECK_ERRNO(ibv_create_cq(ctx, 1 << 30, NULL, NULL, 0), EINVAL);
	CHECK_ERRNO(ibv_create_cq(ctx, 4, NULL, NULL, 1000), EINVAL);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(cq);
	struct ibv_qp_init_attr qia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = { .max_send_wr = 1, .max_recv_wr = 1,
						 .max_send_sge = 1, .max_recv_sge = 1 } };
	qia.cap.max_send_sge = 1000;
	CHECK_ERRNO(ibv_create_qp(pd, &qia), EINVAL);
	qia.cap.max_send_sge = 1;
	qia.send_cq = NULL;
	CHECK_ERRNO(ibv_create_qp(pd, &qia), EINVAL);
	qia.send_cq = cq;
	qia.qp_type = 77;
	CHECK_ERRNO(ibv_create_qp(pd, &qia), EINVAL);
	qia.qp_type = IBV_QPT_RAW_PACKET;
	CHECK_ERRNO(ibv_create_qp(pd, &qia), EOPNOTSUPP);
	qia.qp_type = IBV_QPT_RC;
	struct ibv_ah_attr bad_ah = { .port_num = 9 };
	CHECK_ERRNO(ibv_create_ah(pd, &bad_ah), EINVAL);
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 0, .max_sge = 1 } };
	CHECK_ERRNO(ibv_create_srq(pd, &sia), EINVAL);
	union ibv_gid g;
	CHECK_ERRNO(ibv_query_gid(ctx, 3, 0, &g) == 0, EINVAL);

	/* EBUSY ordering: every parent refuses while a child is alive. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch);
	struct ibv_cq *ccq = ibv_create_cq(ctx, 4, NULL, ch, 0);
	CHECK(ccq);
	struct ibv_srq_init_attr sia2 = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sia2);
	CHECK(srq);
	qia.srq = srq;
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	CHECK(qp);
	struct ibv_ah_attr aha = { .dlid = 1, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(pd, &aha);
	CHECK(ah);

	CHECK(ibv_destroy_comp_channel(ch) == EBUSY); /* used by ccq */
	CHECK(ibv_destroy_cq(cq) == EBUSY);            /* used by qp */
	CHECK(ibv_destroy_srq(srq) == EBUSY);          /* used by qp */
	CHECK(ibv_dealloc_pd(pd) == EBUSY);            /* mr, qp, srq, ah */
	CHECK(errno == EBUSY);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_dealloc_pd(pd) == EBUSY);            /* mr, srq, ah */
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == EBUSY);            /* mr, ah */
	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_dealloc_pd(pd) == EBUSY);            /* mr */
	CHECK(ibv_dereg_mr(ro) == 0);
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY);
	CHECK(ibv_destroy_cq(ccq) == 0);
	CHECK(ibv_destroy_comp_channel(ch) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);

	/* Fork protection is too late once memory was registered (new process state
	 * cannot be tested here: it was enabled before; see sim_fork.c). */

	/* Orphans: close with children alive; their fields stay readable. */
	ctx = ibv_open_device(list[1]);
	CHECK(ctx);
	pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(pd && mr && cq);
	CHECK(ibv_close_device(ctx) == 0);
	CHECK(mr->pd == pd && mr->length == sizeof(buf) && pd->context == ctx);
	CHECK(ctx->device == list[1]);
	CHECK(cq->cqe >= 4);
	CHECK(ibv_dealloc_pd(pd) != 0); /* unusable after close */

	ibv_free_device_list(list);
	DONE("sim_errors");
}
