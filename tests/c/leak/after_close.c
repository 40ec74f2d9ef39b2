/*
 * Closes a context with objects on it, then uses them: every call must fail
 * with EINVAL (in the verb's own convention) without reaching the library.
 * Prints "NAME RESULT ERRNO".
 */
#include "common.h"

static char buf[8192];

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = open_first(&list);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, ch, 0);
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sattr);
	struct ibv_qp *qp = rc_qp(pd, cq, cq, NULL);
	struct ibv_ah_attr aattr = { .dlid = 5, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(pd, &aattr);
	if (!pd || !mr || !ch || !cq || !srq || !qp || !ah)
		die("create");
	if (ibv_close_device(ctx))
		die("ibv_close_device");
	printf("closed\n");
#define RC(name, call)                                                                                  \
	do {                                                                                            \
		errno = 0;                                                                              \
		int rc_ = (call);                                                                       \
		printf("%s %d %d\n", name, rc_, errno);                                                 \
	} while (0)
#define PTR(name, call)                                                                                 \
	do {                                                                                            \
		errno = 0;                                                                              \
		void *p_ = (call);                                                                      \
		printf("%s %s %d\n", name, p_ ? "ptr" : "NULL", errno);                                 \
	} while (0)
	RC("ibv_dereg_mr", ibv_dereg_mr(mr));
	RC("ibv_destroy_qp", ibv_destroy_qp(qp));
	RC("ibv_destroy_ah", ibv_destroy_ah(ah));
	RC("ibv_destroy_srq", ibv_destroy_srq(srq));
	RC("ibv_destroy_cq", ibv_destroy_cq(cq));
	RC("ibv_destroy_comp_channel", ibv_destroy_comp_channel(ch));
	RC("ibv_dealloc_pd", ibv_dealloc_pd(pd));
	RC("ibv_rereg_mr", ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE));
	RC("ibv_resize_cq", ibv_resize_cq(cq, 32));
	struct ibv_qp_attr qattr = { .qp_state = IBV_QPS_INIT };
	RC("ibv_modify_qp", ibv_modify_qp(qp, &qattr, IBV_QP_STATE));
	struct ibv_qp_init_attr qinit;
	RC("ibv_query_qp", ibv_query_qp(qp, &qattr, IBV_QP_STATE, &qinit));
	PTR("ibv_reg_mr", ibv_reg_mr(pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE));
	struct ibv_qp_init_attr init = { .send_cq = cq, .recv_cq = cq, .cap = { 1, 1, 1, 1, 0 }, .qp_type = IBV_QPT_RC };
	PTR("ibv_create_qp", ibv_create_qp(pd, &init));
	ibv_free_device_list(list);
	return 0;
}
