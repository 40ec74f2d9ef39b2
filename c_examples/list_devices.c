#include <stdio.h>
#include <infiniband/verbs.h>

int main(void)
{
	struct ibv_device **device_list;
	int num_devices;
	int i;

	device_list = ibv_get_device_list(&num_devices);
	if (!device_list) {
		fprintf(stderr, "Error, ibv_get_device_list() failed\n");
		return -1;
	}

	printf("%d RDMA device(s) found:\n\n", num_devices);

	for (i = 0; i < num_devices; ++ i)
		printf("RDMA device[%d]: name=%s\n", i,
		       ibv_get_device_name(device_list[i]));

	ibv_free_device_list(device_list);

	return 0;
}
