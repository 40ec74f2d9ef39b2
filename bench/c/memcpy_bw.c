/* The baseline of the sim-fabric bandwidth figure: a plain memcpy of one
 * message size between two buffers, as many times as asked, in GB/s
 * (1e9 bytes per second). Prints "gbps=<value>". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Called through a volatile pointer so the compiler cannot drop or merge
 * the copies. */
static void *(*volatile copy)(void *, const void *, size_t) = memcpy;

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 65536;
	long iters = argc > 2 ? strtol(argv[2], NULL, 0) : 10000;
	char *src = malloc(size), *dst = malloc(size);
	struct timespec a, b;

	if (!src || !dst || iters <= 0) {
		printf("error=bad arguments or no memory\n");
		return 1;
	}
	memset(src, 1, size);
	memset(dst, 2, size);
	for (long i = 0; i < iters / 10; i++) /* warm up */
		copy(dst, src, size);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < iters; i++)
		copy(dst, src, size);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	printf("gbps=%.4f\n", (double)size * iters / s / 1e9);
	free(src);
	free(dst);
	return 0;
}
