/* A librdmacm user that leaks a PD of its own on a context librdmacm owns:
 * the PD is this program's leak and must be reported, although the context
 * under it is suppressed by default. Prints "devices N" and "pd 0x...". */
#include <stdio.h>
#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>

int main(void)
{
	int n = -1;
	struct ibv_context **list = rdma_get_devices(&n);
	struct ibv_pd *pd;

	if (!list || n < 1) {
		fprintf(stderr, "no rdmacm device (n=%d)\n", n);
		return 2;
	}
	printf("devices %d\n", n);
	pd = ibv_alloc_pd(list[0]);
	if (!pd) {
		perror("ibv_alloc_pd");
		return 2;
	}
	printf("pd %p\n", (void *)pd);
	rdma_free_devices(list);
	return 0;
}
