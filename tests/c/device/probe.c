/*
 * probe: walk the device API once and print every result and errno, so that
 * two runs (real library alone, shim preloaded) can be compared line by line.
 *
 *   list: N device(s)             or  list: NULL errno=ENOSYS
 *   device I: name=... guid=%016llx index=...
 *   open NAME: NULL errno=...     or  open NAME: ok close=0
 *
 * Exit status 0 whatever the library answered; 2 on a broken invariant.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

static const char *errname(int e)
{
	const char *name = strerrorname_np(e);

	return name ? name : "?";
}

int main(void)
{
	struct ibv_device **list;
	int num = -1;
	int i;

	errno = 0;
	list = ibv_get_device_list(&num);
	if (!list) {
		printf("list: NULL errno=%s\n", errname(errno));
		return 0;
	}
	printf("list: %d device(s)\n", num);
	for (i = 0; i < num; i++) {
		if (!list[i]) {
			printf("list[%d] is NULL before the count %d\n", i, num);
			return 2;
		}
		printf("device %d: name=%s guid=%016llx index=%d\n", i,
		       ibv_get_device_name(list[i]),
		       (unsigned long long)be64toh(ibv_get_device_guid(list[i])),
		       ibv_get_device_index(list[i]));
	}
	if (list[num]) {
		printf("list is not NULL-terminated at %d\n", num);
		return 2;
	}
	for (i = 0; i < num; i++) {
		struct ibv_context *ctx;

		errno = 0;
		ctx = ibv_open_device(list[i]);
		if (!ctx) {
			printf("open %s: NULL errno=%s\n",
			       ibv_get_device_name(list[i]), errname(errno));
			continue;
		}
		if (ctx->device != list[i]) {
			printf("open %s: ctx->device %p is not the listed device %p\n",
			       ibv_get_device_name(list[i]), (void *)ctx->device,
			       (void *)list[i]);
			return 2;
		}
		printf("open %s: ok close=%d\n", ibv_get_device_name(list[i]),
		       ibv_close_device(ctx));
	}
	ibv_free_device_list(list);
	return 0;
}
