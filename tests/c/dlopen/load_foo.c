/*
 * load_foo NAME: dlopen(NAME, RTLD_NOW) by the name given (a bare name is
 * searched for with this program's RPATH/RUNPATH) and call foo_answer().
 *
 *   dlopen NAME: ok foo_answer=42 | failed (dlerror)
 *
 * Exit status 0 when it loaded and answered 42, 1 otherwise.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int (*answer)(void);
	void *h;

	if (argc != 2) {
		fprintf(stderr, "usage: %s NAME\n", argv[0]);
		return 2;
	}
	h = dlopen(argv[1], RTLD_NOW);
	if (!h) {
		printf("dlopen %s: failed (%s)\n", argv[1], dlerror());
		return 1;
	}
	*(void **)&answer = dlsym(h, "foo_answer");
	if (!answer) {
		printf("dlopen %s: ok, no foo_answer (%s)\n", argv[1], dlerror());
		return 1;
	}
	printf("dlopen %s: ok foo_answer=%d\n", argv[1], answer());
	return answer() == 42 ? 0 : 1;
}
