/* Lists the RDMA devices through a librdmacm the program loads with
 * dlopen(RTLD_LOCAL) at run time (as Python or a plugin host would): the
 * verbs library then lives in a local scope, after libc. Same output as
 * rdmacm_list. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdma/rdma_cma.h>

int main(void)
{
	void *h = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	struct ibv_context **(*get)(int *) =
		(struct ibv_context **(*)(int *))dlsym(h, "rdma_get_devices");
	void (*put)(struct ibv_context **) =
		(void (*)(struct ibv_context **))dlsym(h, "rdma_free_devices");
	if (!get || !put) {
		printf("dlsym: %s\n", dlerror());
		return 1;
	}
	int n = -1;
	struct ibv_context **list = get(&n);
	if (!list) {
		printf("rdma_get_devices failed: %s\n", strerror(errno));
		return 1;
	}
	printf("%d devices\n", n);
	for (int i = 0; i < n; i++)
		printf("%s\n", list[i]->device->name);
	put(list);
	return 0;
}
