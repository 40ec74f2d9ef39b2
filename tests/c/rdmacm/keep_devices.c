/* A correct librdmacm user, linked to -lrdmacm only: it lists the devices
 * with rdma_get_devices and frees the list. librdmacm itself keeps its
 * device list and one open context per device for the life of the process
 * (rdma_free_devices does not close them); that is not this program's leak.
 * Prints "devices N", exits 0. */
#include <stdio.h>
#include <rdma/rdma_cma.h>

int main(void)
{
	int n = -1;
	struct ibv_context **list = rdma_get_devices(&n);

	if (!list) {
		perror("rdma_get_devices");
		return 2;
	}
	printf("devices %d\n", n);
	rdma_free_devices(list);
	return 0;
}
