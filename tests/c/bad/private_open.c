/*
 * rdma-core's private verbs_open_device (IBVERBS_PRIVATE_34), called as a
 * provider's direct open (mlx5dv_open_device) calls it (tests/bad_contexts.rs).
 * Prints "verbs_open_device -> NULL errno=N" or "... -> ctx", and for a
 * context, whether ibv_alloc_pd accepts it, then closes it.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data);

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0]) {
		fprintf(stderr, "no devices: %s\n", strerror(errno));
		return 95;
	}
	errno = 0;
	struct ibv_context *ctx = verbs_open_device(list[0], NULL);
	if (!ctx) {
		printf("verbs_open_device -> NULL errno=%d\n", errno);
	} else {
		printf("verbs_open_device -> ctx\n");
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		printf("ibv_alloc_pd -> %s\n", pd ? "pd" : "NULL");
		if (pd)
			ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	return 0;
}
