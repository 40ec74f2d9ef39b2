/*
 * disassoc: the value of verbs_allow_disassociate_destroy@IBVERBS_PRIVATE_34
 * as seen through dlopen("libibverbs.so") (then "libibverbs.so.1"), after
 * ibv_get_device_list (the real library sets it then, from
 * RDMAV_ALLOW_DISASSOC_DESTROY). Provider plugins (mlx5) read this object;
 * they bind to the same definition as this lookup when the shim stands in
 * for libibverbs, so it must hold what the real library decided.
 *
 *   devices: N | NULL errno=E
 *   value: 0|1
 *
 * Exit status 0 when it printed a value, 1 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct ibv_device;

int main(void)
{
	struct ibv_device **(*get_list)(int *);
	void (*free_list)(struct ibv_device **);
	struct ibv_device **list;
	bool *value;
	void *lib;
	int n = -1;

	lib = dlopen("libibverbs.so", RTLD_NOW);
	if (!lib)
		lib = dlopen("libibverbs.so.1", RTLD_NOW);
	if (!lib) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	*(void **)&get_list = dlvsym(lib, "ibv_get_device_list", "IBVERBS_1.1");
	*(void **)&free_list = dlvsym(lib, "ibv_free_device_list", "IBVERBS_1.1");
	value = dlvsym(lib, "verbs_allow_disassociate_destroy", "IBVERBS_PRIVATE_34");
	if (!get_list || !free_list || !value) {
		printf("dlvsym: %s\n", dlerror());
		return 1;
	}
	errno = 0;
	list = get_list(&n);
	if (list) {
		printf("devices: %d\n", n);
		free_list(list);
	} else {
		printf("devices: NULL errno=%s\n", strerrorname_np(errno));
	}
	printf("value: %d\n", *value ? 1 : 0);
	return 0;
}
