/*
 * dlvsym LIBRARY NAME@VERSION...: dlopen LIBRARY (RTLD_NOW | RTLD_LOCAL), the
 * way NCCL loads libibverbs, and look each symbol up at its exact version.
 * Prints one line per symbol:
 *
 *   NAME@VERSION: FILE      (the object dladdr says defines it)
 *   NAME@VERSION: MISSING (dlerror)
 *
 * Then, if ibv_get_device_list@IBVERBS_1.1 was asked for and found, calls it
 * through that pointer and prints "call: N device(s)" or "call: NULL errno=E".
 * Exits 1 if anything is missing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

struct ibv_device;

int main(int argc, char **argv)
{
	struct ibv_device **(*get_list)(int *) = NULL;
	void (*free_list)(struct ibv_device **) = NULL;
	void *lib;
	int missing = 0;
	int i;

	if (argc < 2) {
		fprintf(stderr, "usage: %s LIBRARY NAME@VERSION...\n", argv[0]);
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
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
			const char *err = dlerror();

			printf("%s: MISSING (%s)\n", argv[i], err ? err : "no error");
			missing = 1;
			continue;
		}
		if (!dladdr(sym, &info) || !info.dli_fname) {
			printf("%s: found, no dladdr\n", argv[i]);
			missing = 1;
			continue;
		}
		printf("%s: %s\n", argv[i], info.dli_fname);
		if (!strcmp(argv[i], "ibv_get_device_list@IBVERBS_1.1"))
			*(void **)&get_list = sym;
		if (!strcmp(argv[i], "ibv_free_device_list@IBVERBS_1.1"))
			*(void **)&free_list = sym;
	}
	if (get_list) {
		int num = -1;
		struct ibv_device **list;

		errno = 0;
		list = get_list(&num);
		if (list)
			printf("call: %d device(s)\n", num);
		else
			printf("call: NULL errno=%s\n", strerrorname_np(errno));
		if (list && free_list)
			free_list(list);
	}
	return missing;
}
