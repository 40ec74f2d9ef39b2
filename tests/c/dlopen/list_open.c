/*
 * list_open: a program LINKED to verbs (it compiles against the real
 * <infiniband/verbs.h> and against the shim's header alike). Lists the
 * devices, opens and closes each, then says which objects are loaded.
 *
 *   devices: N | NULL errno=E
 *   device I: NAME
 *   open NAME: ok | NULL errno=E
 *   close NAME: RC
 *   object PATH      every loaded object (dl_iterate_phdr)
 *   mapped PATH      every file mapped into the process (/proc/self/maps), once
 *   done
 *
 * Exit status 0 when it ran to the end (a failed open is an outcome), 1 when
 * the list is NULL or a close fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

static int print_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_name && info->dlpi_name[0])
		printf("object %s\n", info->dlpi_name);
	return 0;
}

static void print_mapped(void)
{
	static char seen[256][512];
	char line[1024];
	int nseen = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f) {
		printf("mapped: cannot open /proc/self/maps\n");
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		int i;

		if (!path)
			continue;
		path[strcspn(path, "\n")] = '\0';
		for (i = 0; i < nseen; i++)
			if (!strcmp(seen[i], path))
				break;
		if (i < nseen || nseen == 256)
			continue;
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", path);
		printf("mapped %s\n", path);
	}
	fclose(f);
}

static int finish(int status)
{
	dl_iterate_phdr(print_object, NULL);
	print_mapped();
	printf("done\n");
	return status;
}

int main(void)
{
	struct ibv_device **list;
	int n = -1, i, status = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		printf("devices: NULL errno=%s\n", strerrorname_np(errno));
		return finish(1);
	}
	printf("devices: %d\n", n);
	for (i = 0; i < n; i++)
		printf("device %d: %s\n", i, ibv_get_device_name(list[i]));
	for (i = 0; i < n; i++) {
		struct ibv_context *ctx;
		int rc;

		errno = 0;
		ctx = ibv_open_device(list[i]);
		if (!ctx) {
			printf("open %s: NULL errno=%s\n", ibv_get_device_name(list[i]),
			       strerrorname_np(errno));
			continue;
		}
		printf("open %s: ok\n", ibv_get_device_name(ctx->device));
		rc = ibv_close_device(ctx);
		printf("close %s: %d\n", ibv_get_device_name(list[i]), rc);
		if (rc)
			status = 1;
	}
	ibv_free_device_list(list);
	return finish(status);
}
