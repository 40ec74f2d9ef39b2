/* Lists the RDMA devices through librdmacm only: the program links
 * -lrdmacm and gets libibverbs as librdmacm's dependency, so libc.so.6
 * comes before libibverbs.so.1 in the load order (no ibv_* call here, so
 * nothing pulls libibverbs in earlier). Prints the count and one
 * name per line; exits 1 if rdma_get_devices fails. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdma/rdma_cma.h>

int main(void)
{
	int n = -1;
	struct ibv_context **list = rdma_get_devices(&n);

	if (!list) {
		printf("rdma_get_devices failed: %s\n", strerror(errno));
		return 1;
	}
	printf("%d devices\n", n);
	for (int i = 0; i < n; i++)
		printf("%s\n", list[i]->device->name);
	rdma_free_devices(list);
	return 0;
}
