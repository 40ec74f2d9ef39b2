/*
 * lookup [-C DIR] LIBRARY NAME@VERSION...: (chdir(DIR) first, with -C)
 * dlopen(LIBRARY, RTLD_NOW | RTLD_LOCAL) and
 * look each symbol up on that handle with dlvsym() at exactly VERSION, as a
 * program that loads verbs by hand does. One line per lookup:
 *
 *   handle LIBRARY: FILE                the object the handle is (dlinfo)
 *   NAME@VERSION: ADDRESS FILE SYMBOL   FILE and SYMBOL: what dladdr() says
 *   NAME@VERSION: MISSING (dlerror)
 *
 * Then, if ibv_get_device_list@IBVERBS_1.1 was found, calls it through that
 * pointer: "call: N device(s)" or "call: NULL errno=E".
 * Exit status: 0 when everything resolved, 1 otherwise, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct ibv_device;

int main(int argc, char **argv)
{
	struct ibv_device **(*get_list)(int *) = NULL;
	void (*free_list)(struct ibv_device **) = NULL;
	struct link_map *map = NULL;
	void *lib;
	int status = 0, i;

	if (argc > 2 && !strcmp(argv[1], "-C")) {
		if (chdir(argv[2])) {
			perror(argv[2]);
			return 2;
		}
		argv += 2;
		argc -= 2;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: lookup [-C DIR] LIBRARY NAME@VERSION...\n");
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		printf("handle %s: dlopen failed (%s)\n", argv[1], dlerror());
		return 1;
	}
	if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map)
		printf("handle %s: %s\n", argv[1], map->l_name);
	else
		printf("handle %s: (dlinfo failed)\n", argv[1]);
	for (i = 2; i < argc; i++) {
		char name[256];
		char *version;
		void *sym;
		Dl_info info;

		snprintf(name, sizeof(name), "%s", argv[i]);
		version = strchr(name, '@');
		if (!version) {
			fprintf(stderr, "%s: expected NAME@VERSION\n", argv[i]);
			return 2;
		}
		*version++ = '\0';
		sym = dlvsym(lib, name, version);
		if (!sym) {
			const char *e = dlerror();

			printf("%s: MISSING (%s)\n", argv[i], e ? e : "no error");
			status = 1;
			continue;
		}
		if (!dladdr(sym, &info) || !info.dli_fname) {
			printf("%s: %p (dladdr failed)\n", argv[i], sym);
			status = 1;
			continue;
		}
		printf("%s: %p %s %s\n", argv[i], sym, info.dli_fname,
		       info.dli_sname ? info.dli_sname : "(no symbol)");
		if (!strcmp(argv[i], "ibv_get_device_list@IBVERBS_1.1"))
			*(void **)&get_list = sym;
		if (!strcmp(argv[i], "ibv_free_device_list@IBVERBS_1.1"))
			*(void **)&free_list = sym;
	}
	if (get_list) {
		struct ibv_device **list;
		int n = -1;

		errno = 0;
		list = get_list(&n);
		if (list)
			printf("call: %d device(s)\n", n);
		else
			printf("call: NULL errno=%s\n", strerrorname_np(errno));
		if (list && free_list)
			free_list(list);
	}
	return status;
}
