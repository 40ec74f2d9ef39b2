/* A correct program that loads librdmacm by hand (as libfabric's verbs
 * provider does under Open MPI's mtl ofi), lists the devices with it, frees
 * the list and unloads librdmacm before it exits (MPI_Finalize closes the
 * component that needed it). What librdmacm keeps (its device list, a
 * context per device) was made by librdmacm's code, which is no longer
 * mapped when the exit report is written: it is still librdmacm's, not a
 * leak of this program. Prints "devices N" and "unloaded", exits 0. */
#include <dlfcn.h>
#include <stdio.h>

struct ibv_context;

int main(void)
{
	void *cm = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cm) {
		fprintf(stderr, "dlopen librdmacm.so.1: %s\n", dlerror());
		return 2;
	}
	struct ibv_context **(*get)(int *) =
		(struct ibv_context **(*)(int *))dlsym(cm, "rdma_get_devices");
	void (*release)(struct ibv_context **) =
		(void (*)(struct ibv_context **))dlsym(cm, "rdma_free_devices");
	if (!get || !release) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 2;
	}
	int n = -1;
	struct ibv_context **list = get(&n);
	if (!list) {
		perror("rdma_get_devices");
		return 2;
	}
	printf("devices %d\n", n);
	release(list);
	if (dlclose(cm)) {
		fprintf(stderr, "dlclose: %s\n", dlerror());
		return 2;
	}
	/* Gone from the process: a second open without loading fails. */
	if (dlopen("librdmacm.so.1", RTLD_NOW | RTLD_NOLOAD)) {
		fprintf(stderr, "librdmacm.so.1 is still loaded after dlclose\n");
		return 3;
	}
	printf("unloaded\n");
	return 0;
}
