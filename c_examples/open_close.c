#include <stdio.h>
#include <infiniband/verbs.h>

int main(void)
{
	struct ibv_device **device_list;
	int num_devices;
	int i;
	int rc;

	device_list = ibv_get_device_list(&num_devices);
	if (!device_list) {
		fprintf(stderr, "Error, ibv_get_device_list() failed\n");
		return -1;
	}

	printf("%d RDMA device(s) found:\n\n", num_devices);

	for (i = 0; i < num_devices; ++ i) {
		struct ibv_context *ctx;

		ctx = ibv_open_device(device_list[i]);
		if (!ctx) {
			fprintf(stderr, "Error, failed to open the device '%s'\n",
				ibv_get_device_name(device_list[i]));
			rc = -1;
			goto out;
		}

		printf("The device '%s' was opened\n", ibv_get_device_name(ctx->device));

		rc = ibv_close_device(ctx);
		if (rc) {
			fprintf(stderr, "Error, failed to close the device '%s'\n",
				ibv_get_device_name(ctx->device));
			rc = -1;
			goto out;
		}
	}
		
	ibv_free_device_list(device_list);

	return 0;

out:
	ibv_free_device_list(device_list);
	return rc;
}
