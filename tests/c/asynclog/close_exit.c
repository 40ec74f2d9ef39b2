#include <infiniband/verbs.h>
#include <stdio.h>
#include <unistd.h>
int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		return 2;
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		return 3;
	ibv_free_device_list(list);
	if (ibv_close_device(ctx))
		return 4;
	_exit(0);
}
