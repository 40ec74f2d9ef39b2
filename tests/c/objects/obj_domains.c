/* XRC domains, thread domains, parent domains and device memory on the
 * sim: created through the inline verbs, used (a parent domain as a PD, an
 * MR on device memory in the data path), destroyed, with the errno of each
 * misuse (EBUSY while in use, EINVAL / EEXIST / ENOENT / EFAULT ...). */
#include <fcntl.h>
#include <unistd.h>

#include "rc_pair.h"

#define ALL_REMOTE (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		    IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_xrcd *open_xrcd(struct ibv_context *ctx, int fd, int oflags, uint32_t mask)
{
	struct ibv_xrcd_init_attr a = { .comp_mask = mask, .fd = fd, .oflags = oflags };
	return ibv_open_xrcd(ctx, &a);
}

static void xrc_domains(struct ibv_context *ctx)
{
	const uint32_t both = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	struct ibv_xrcd *x = open_xrcd(ctx, -1, O_CREAT, both);
	CHECK(x && x->context == ctx);
	CHECK_ERRNO(open_xrcd(ctx, -1, O_CREAT, IBV_XRCD_INIT_ATTR_FD), EINVAL);
	CHECK_ERRNO(open_xrcd(ctx, -1, O_CREAT, both | IBV_XRCD_INIT_ATTR_RESERVED), EOPNOTSUPP);
	CHECK_ERRNO(open_xrcd(ctx, 999, O_CREAT, both), EBADF);

	/* A domain named by a file: O_CREAT makes it, O_EXCL refuses an
	 * existing one, without O_CREAT a missing one is ENOENT. */
	char path[] = "/tmp/obj_xrcd_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	CHECK_ERRNO(open_xrcd(ctx, fd, 0, both), ENOENT);
	struct ibv_xrcd *f1 = open_xrcd(ctx, fd, O_CREAT, both);
	CHECK(f1);
	CHECK_ERRNO(open_xrcd(ctx, fd, O_CREAT | O_EXCL, both), EEXIST);
	struct ibv_xrcd *f2 = open_xrcd(ctx, fd, 0, both);
	CHECK(f2 && f2 != f1);
	CHECK(ibv_close_xrcd(f1) == 0 && ibv_close_xrcd(f2) == 0);
	CHECK_ERRNO(open_xrcd(ctx, fd, 0, both), ENOENT);
	close(fd);
	CHECK(ibv_close_xrcd(x) == 0);
}

static void thread_and_parent_domains(struct side *a, struct side *b)
{
	struct ibv_td_init_attr tda = { .comp_mask = 1 };
	CHECK_ERRNO(ibv_alloc_td(b->ctx, &tda), EINVAL);
	tda.comp_mask = 0;
	struct ibv_td *td = ibv_alloc_td(b->ctx, &tda);
	CHECK(td && td->context == b->ctx);

	struct ibv_parent_domain_init_attr pa = { .pd = NULL, .td = td };
	CHECK_ERRNO(ibv_alloc_parent_domain(b->ctx, &pa), EINVAL);
	pa.pd = b->pd;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS; /* without the functions */
	CHECK_ERRNO(ibv_alloc_parent_domain(b->ctx, &pa), EINVAL);
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	pa.pd_context = b;
	struct ibv_pd *pd = ibv_alloc_parent_domain(b->ctx, &pa);
	CHECK(pd && pd->context == b->ctx && pd != b->pd);
	/* Not a parent of a parent; the TD and the PD are now in use. */
	pa.pd = pd;
	CHECK_ERRNO(ibv_alloc_parent_domain(b->ctx, &pa), EINVAL);
	CHECK(ibv_dealloc_td(td) == EBUSY);

	/* Usable wherever a PD is: an MR on it is an MR of its PD, reached
	 * through b's QP (made on the PD itself). */
	struct ibv_mr *mr = ibv_reg_mr(pd, &b->buf[256], 64, ALL_REMOTE);
	CHECK(mr && mr->pd == pd);
	strcpy((char *)a->buf, "parent");
	CHECK(rdma(a, IBV_WR_RDMA_WRITE, a->buf, 7, (uintptr_t)&b->buf[256], mr->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(strcmp((char *)&b->buf[256], "parent") == 0);
	struct ibv_cq *cq = ibv_create_cq(b->ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr qia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = { .max_send_wr = 1, .max_recv_wr = 1,
						 .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	CHECK(cq && qp && qp->pd == pd);
	CHECK(ibv_dealloc_pd(pd) == EBUSY);
	CHECK(ibv_destroy_qp(qp) == 0 && ibv_dereg_mr(mr) == 0 && ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_dealloc_td(td) == 0);
}

static void device_memory(struct side *a, struct side *b)
{
	struct ibv_device_attr_ex dx;
	CHECK(ibv_query_device_ex(b->ctx, NULL, &dx) == 0);
	CHECK(dx.max_dm_size >= 4096);
	struct ibv_alloc_dm_attr da = { .length = 0 };
	CHECK_ERRNO(ibv_alloc_dm(b->ctx, &da), EINVAL);
	da.length = dx.max_dm_size + 1;
	CHECK_ERRNO(ibv_alloc_dm(b->ctx, &da), EINVAL);
	da.length = 4096;
	da.comp_mask = 1;
	CHECK_ERRNO(ibv_alloc_dm(b->ctx, &da), EINVAL);
	da.comp_mask = 0;
	struct ibv_dm *dm = ibv_alloc_dm(b->ctx, &da);
	CHECK(dm && dm->context == b->ctx);

	char in[16] = "device memory", out[16] = { 0 };
	CHECK(ibv_memcpy_to_dm(dm, 100, in, sizeof(in)) == 0);
	CHECK(ibv_memcpy_from_dm(out, dm, 100, sizeof(out)) == 0);
	CHECK(memcmp(in, out, sizeof(in)) == 0);
	CHECK(ibv_memcpy_to_dm(dm, 4090, in, sizeof(in)) == EFAULT);
	CHECK(ibv_memcpy_from_dm(out, dm, 4096, 1) == EFAULT);

	/* An MR on it: zero-based only, inside it. */
	CHECK_ERRNO(ibv_reg_dm_mr(b->pd, dm, 0, 4096, IBV_ACCESS_LOCAL_WRITE), EINVAL);
	CHECK_ERRNO(ibv_reg_dm_mr(b->pd, dm, 4000, 200,
				  IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE),
		    EINVAL);
	struct ibv_mr *mr = ibv_reg_dm_mr(b->pd, dm, 1024, 1024, IBV_ACCESS_ZERO_BASED | ALL_REMOTE);
	CHECK(mr && mr->pd == b->pd);
	/* The data path reaches it: a WRITE at zero-based offset 8 lands at
	 * DM offset 1032; a READ brings DM contents back. */
	strcpy((char *)a->buf, "written to DM");
	CHECK(rdma(a, IBV_WR_RDMA_WRITE, a->buf, 14, 8, mr->rkey) == IBV_WC_SUCCESS);
	CHECK(ibv_memcpy_from_dm(out, dm, 1032, 16) == 0 && strcmp(out, "written to DM") == 0);
	CHECK(ibv_memcpy_to_dm(dm, 1024 + 512, in, sizeof(in)) == 0);
	memset(&a->buf[8], 0, 16);
	CHECK(rdma(a, IBV_WR_RDMA_READ, &a->buf[8], 16, 512, mr->rkey) == IBV_WC_SUCCESS);
	CHECK(strcmp((char *)&a->buf[8], "device memory") == 0);
	/* Past the MR's end: a remote access error. */
	CHECK(rdma(a, IBV_WR_RDMA_READ, a->buf, 16, 1020, mr->rkey) == IBV_WC_REM_ACCESS_ERR);
	reconnect(a, b);

	CHECK(ibv_free_dm(dm) == EBUSY);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_free_dm(dm) == 0);
}

int main(void)
{
	static struct side a, b;
	setup_pair(&a, &b, ALL_REMOTE);
	reconnect(&a, &b);

	xrc_domains(b.ctx);
	thread_and_parent_domains(&a, &b);
	device_memory(&a, &b);

	CHECK(ibv_destroy_qp(b.qp) == 0 && ibv_dereg_mr(b.mr) == 0);
	CHECK(ibv_dealloc_pd(b.pd) == 0);
	DONE("obj_domains");
}
