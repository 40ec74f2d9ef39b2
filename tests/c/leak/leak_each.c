/*
 * Leaks one object of each kind the sim can make, each from its own
 * function (so the reports name it), and prints what it made.
 *   leak_each close   close the context and free the device list
 *   leak_each keep    leave both for the exit report
 */
#include "common.h"

static char buf[4 * 4096];

struct ibv_pd *leak_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	created("pd", pd, NULL, __func__);
	return pd;
}

/* Constant access flags: the verbs.h macro calls the exported ibv_reg_mr. */
void leak_mr_const(struct ibv_pd *pd)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	created("mr", mr, pd, __func__);
	printf("mr-via 0x%lx ibv_reg_mr\n", (unsigned long)(uintptr_t)mr);
}

/* Flags only known at run time: the macro calls ibv_reg_mr_iova2. */
void leak_mr_runtime(struct ibv_pd *pd, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, buf + 4096, 4096, access);
	if (!mr)
		die("ibv_reg_mr (runtime flags)");
	created("mr", mr, pd, __func__);
	printf("mr-via 0x%lx ibv_reg_mr_iova2\n", (unsigned long)(uintptr_t)mr);
}

void leak_mr_iova(struct ibv_pd *pd)
{
	/* Same offset in the page as the address, as the kernel wants. */
	uint64_t iova = (uintptr_t)(buf + 8192) + 0x100000;
	struct ibv_mr *mr = ibv_reg_mr_iova(pd, buf + 8192, 4096, iova, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr_iova");
	created("mr", mr, pd, __func__);
	printf("mr-via 0x%lx ibv_reg_mr_iova\n", (unsigned long)(uintptr_t)mr);
}

struct ibv_comp_channel *leak_channel(struct ibv_context *ctx)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	if (!ch)
		die("ibv_create_comp_channel");
	created("comp_channel", ch, NULL, __func__);
	return ch;
}

struct ibv_cq *leak_cq(struct ibv_context *ctx, struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	if (!cq)
		die("ibv_create_cq");
	created("cq", cq, ch, __func__);
	return cq;
}

struct ibv_srq *leak_srq(struct ibv_pd *pd)
{
	struct ibv_srq_init_attr attr = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &attr);
	if (!srq)
		die("ibv_create_srq");
	created("srq", srq, pd, __func__);
	return srq;
}

void leak_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.cap = { .max_send_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &attr);
	if (!qp)
		die("ibv_create_qp");
	created("qp", qp, pd, __func__);
	printf("qp-links 0x%lx 0x%lx 0x%lx 0x%lx %u\n", (unsigned long)(uintptr_t)qp, (unsigned long)(uintptr_t)cq,
	       (unsigned long)(uintptr_t)cq, (unsigned long)(uintptr_t)srq, qp->qp_num);
}

void leak_ah(struct ibv_pd *pd)
{
	struct ibv_ah_attr attr = { .dlid = 0x17, .port_num = 1, .sl = 2 };
	struct ibv_ah *ah = ibv_create_ah(pd, &attr);
	if (!ah)
		die("ibv_create_ah");
	created("ah", ah, pd, __func__);
}

int main(int argc, char **argv)
{
	int close_it = argc > 1 && strcmp(argv[1], "close") == 0;
	struct ibv_device **list;
	struct ibv_context *ctx = open_first(&list);
	struct ibv_pd *pd = leak_pd(ctx);
	leak_mr_const(pd);
	/* argc is never 100: the flags are not a compile-time constant. */
	leak_mr_runtime(pd, argc == 100 ? 0 : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	leak_mr_iova(pd);
	struct ibv_comp_channel *ch = leak_channel(ctx);
	struct ibv_cq *cq = leak_cq(ctx, ch);
	struct ibv_srq *srq = leak_srq(pd);
	leak_qp(pd, cq, srq);
	leak_ah(pd);
	if (close_it) {
		if (ibv_close_device(ctx))
			die("ibv_close_device");
		ibv_free_device_list(list);
		printf("closed\n");
	}
	return 0;
}
