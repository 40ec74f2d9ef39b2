#include <stdio.h>
#include <endian.h>
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

	for (i = 0; i < num_devices; ++ i) {
		/* The GUID comes in network byte order: print it as ibv_devices does. */
		unsigned long long guid =
			(unsigned long long) be64toh(ibv_get_device_guid(device_list[i]));

		/* The top 24 bits are the vendor's IEEE OUI. */
		printf("RDMA device[%d]: name=%s guid=%016llx oui=%06llx index=%d\n", i,
		       ibv_get_device_name(device_list[i]), guid, guid >> 40,
		       ibv_get_device_index(device_list[i]));
	}

	ibv_free_device_list(device_list);

	return 0;
}
