/*
 * dlopen_reason FILE: print what dlopen(FILE) says, exactly as the shim would
 * see it: "ok" or dlerror()'s text. The tests use it to know the expected
 * reason without hard-coding glibc's wording.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	void *h;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE\n", argv[0]);
		return 2;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("%s\n", dlerror());
		return 1;
	}
	printf("ok\n");
	return 0;
}
