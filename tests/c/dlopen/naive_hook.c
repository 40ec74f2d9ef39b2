/*
 * A preloadable dlopen hook written the naive way: it calls glibc's dlopen
 * as an ordinary function (built with -O0, so no tail call). glibc then
 * sees the hook as the caller and searches the hook's RUNPATH, not the
 * program's. The RUNPATH test uses it as its control: the test's program
 * must fail under this hook, proving the test can tell the difference.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

void *dlopen(const char *file, int mode)
{
	void *(*real)(const char *, int);
	void *h;

	*(void **)&real = dlsym(RTLD_NEXT, "dlopen");
	h = real(file, mode);
	return h;
}
