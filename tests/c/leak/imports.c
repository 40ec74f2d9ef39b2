/*
 * Against fake_verbs (IBV_SHIM_LIBRARY): imports a context, two PDs and two
 * MRs, registers a dma-buf MR, releases one imported MR, and leaks the rest
 * before closing the context. Then calls verbs the library lacks, which
 * must fail with EOPNOTSUPP. Prints "obj KIND HANDLE PARENT FUNCTION" and
 * "missing NAME RESULT ERRNO".
 */
#include "common.h"

int main(void)
{
	struct ibv_context *ctx = ibv_import_device(3);
	if (!ctx)
		die("ibv_import_device");
	printf("context 0x%lx fake0\n", (unsigned long)(uintptr_t)ctx);
	struct ibv_pd *pd = ibv_import_pd(ctx, 7);
	struct ibv_pd *pd2 = ibv_import_pd(ctx, 8);
	struct ibv_mr *mr = pd ? ibv_import_mr(pd, 9) : NULL;
	struct ibv_mr *gone = pd ? ibv_import_mr(pd, 10) : NULL;
	struct ibv_mr *dmabuf = pd2 ? ibv_reg_dmabuf_mr(pd2, 0x2000, 4096, 0, 5, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!pd || !pd2 || !mr || !gone || !dmabuf)
		die("import");
	created("imported_pd", pd, NULL, "main");
	created("imported_pd", pd2, NULL, "main");
	created("imported_mr", mr, pd, "main");
	created("mr", dmabuf, pd2, "main");
	ibv_unimport_mr(gone);

	errno = 0;
	struct ibv_pd *none = ibv_alloc_pd(ctx);
	printf("missing ibv_alloc_pd %s %d\n", none ? "ptr" : "NULL", errno);
	errno = 0;
	int rc = ibv_dealloc_pd(pd);
	printf("missing ibv_dealloc_pd %d %d\n", rc, errno);
	errno = 0;
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	printf("missing ibv_create_cq %s %d\n", cq ? "ptr" : "NULL", errno);
	struct ibv_device_attr attr;
	errno = 0;
	rc = ibv_query_device(ctx, &attr);
	printf("missing ibv_query_device %d %d\n", rc, errno);

	if (ibv_close_device(ctx))
		die("ibv_close_device");
	return 0;
}
