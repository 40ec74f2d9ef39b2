/* Creates one object of each kind and destroys everything in order: the
 * shim must report nothing. Exits with argv[1] (default 0). */
#include "common.h"
#include <unistd.h>

static char buf[8192];

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = open_first(&list);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	int access = getpid() == 0 ? 0 : IBV_ACCESS_LOCAL_WRITE;
	struct ibv_mr *mr1 = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mr2 = ibv_reg_mr(pd, buf + 4096, 4096, access);
	struct ibv_mr *mr3 = ibv_reg_mr_iova(pd, buf, 4096, (uintptr_t)buf + 0x100000, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sattr);
	struct ibv_qp *qp = rc_qp(pd, cq, cq, srq);
	struct ibv_ah_attr aattr = { .dlid = 3, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(pd, &aattr);
	if (!pd || !mr1 || !mr2 || !mr3 || !ch || !cq || !srq || !qp || !ah)
		die("create");
	if (ibv_resize_cq(cq, 64))
		die("ibv_resize_cq");
	if (ibv_destroy_ah(ah) || ibv_destroy_qp(qp) || ibv_destroy_srq(srq) || ibv_destroy_cq(cq) ||
	    ibv_destroy_comp_channel(ch) || ibv_dereg_mr(mr3) || ibv_dereg_mr(mr2) || ibv_dereg_mr(mr1) ||
	    ibv_dealloc_pd(pd))
		die("destroy");
	if (ibv_close_device(ctx))
		die("ibv_close_device");
	ibv_free_device_list(list);
	printf("clean\n");
	return argc > 1 ? atoi(argv[1]) : 0;
}
