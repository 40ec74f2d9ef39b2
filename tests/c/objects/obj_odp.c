/* On-demand paging (pyverbs' test_odp): reported for every transport but
 * not implicit; an ODP MR works in the data path (a WRITE and a READ into
 * ODP MRs, the QP's access flags carrying IBV_ACCESS_ON_DEMAND along, as
 * mlx5 accepts); ibv_advise_mr checks its request (advice, flags, SGEs
 * inside ODP MRs of the PD) with the kernel's errno. */
#include "rc_pair.h"

#define ODP (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	     IBV_ACCESS_ON_DEMAND)

int main(void)
{
	static struct side a, b;
	setup_pair(&a, &b, ODP);
	CHECK(a.mr->lkey && b.mr->rkey);

	struct ibv_device_attr_ex dx;
	CHECK(ibv_query_device_ex(a.ctx, NULL, &dx) == 0);
	CHECK(dx.odp_caps.general_caps == IBV_ODP_SUPPORT);
	uint32_t rc = dx.odp_caps.per_transport_caps.rc_odp_caps;
	CHECK((rc & (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
		     IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV)) == rc &&
	      rc != 0);
	CHECK(dx.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND);
	CHECK(dx.xrc_odp_caps & IBV_ODP_SUPPORT_SRQ_RECV);
	/* Implicit ODP is not. */
	CHECK_ERRNO(ibv_reg_mr(a.pd, NULL, SIZE_MAX, ODP), EOPNOTSUPP);

	/* The QPs' access flags may carry ON_DEMAND (ignored). */
	reconnect(&a, &b);
	struct ibv_qp_attr qa = { .qp_access_flags = ODP & ~IBV_ACCESS_LOCAL_WRITE };
	CHECK(ibv_modify_qp(b.qp, &qa, IBV_QP_ACCESS_FLAGS) == 0);
	strcpy((char *)a.buf, "on demand");
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, a.buf, 10, (uintptr_t)&b.buf[4], b.mr->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(strcmp((char *)&b.buf[4], "on demand") == 0);
	memset(a.buf, 0, 16);
	CHECK(rdma(&a, IBV_WR_RDMA_READ, a.buf, 10, (uintptr_t)&b.buf[4], b.mr->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(strcmp((char *)a.buf, "on demand") == 0);

	/* Prefetch: every advice, synchronous or not, inside the MR. */
	struct ibv_sge sge = { (uintptr_t)a.buf, 64, a.mr->lkey };
	CHECK(ibv_advise_mr(a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == 0);
	CHECK(ibv_advise_mr(a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
			    &sge, 1) == 0);
	CHECK(ibv_advise_mr(a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &sge, 1) == 0);
	/* Unknown advice or flag; no SGE; past the MR; another PD's MR; an
	 * MR without ON_DEMAND. */
	CHECK(ibv_advise_mr(a.pd, 3, 0, &sge, 1) == EOPNOTSUPP);
	CHECK(ibv_advise_mr(a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, &sge, 1) == EOPNOTSUPP);
	CHECK(ibv_advise_mr(a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 0) == EINVAL);
	sge.length = sizeof(a.buf) + 1;
	CHECK(ibv_advise_mr(a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == EINVAL);
	struct ibv_sge other = { (uintptr_t)b.buf, 8, b.mr->lkey };
	CHECK(ibv_advise_mr(a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &other, 1) == EINVAL);
	static char plain_buf[64];
	struct ibv_mr *plain = ibv_reg_mr(a.pd, plain_buf, sizeof(plain_buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(plain);
	struct ibv_sge ps = { (uintptr_t)plain_buf, 8, plain->lkey };
	CHECK(ibv_advise_mr(a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &ps, 1) == EINVAL);
	CHECK(ibv_dereg_mr(plain) == 0);
	DONE("obj_odp");
}
