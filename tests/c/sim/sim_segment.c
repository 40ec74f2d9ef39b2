/* The fabric segment's lifetime: processes that leave without closing.
 *
 *   sim_segment hold      opens the first device, prints "open", waits for
 *                         EOF on stdin, then exits with the context open.
 *   sim_segment rlimit MB opens the first device under RLIMIT_AS = MB MiB
 *                         (too little to map the segment): prints "open
 *                         failed" or "open ok", then exits (with the
 *                         context open, if it opened). */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "check.h"

int main(int argc, char **argv)
{
	CHECK(argc >= 2);
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	if (!strcmp(argv[1], "hold")) {
		struct ibv_context *ctx = ibv_open_device(list[0]);
		CHECK(ctx);
		printf("open\n");
		fflush(stdout);
		char buf[64];
		while (fread(buf, 1, sizeof(buf), stdin) > 0)
			;
	} else if (!strcmp(argv[1], "rlimit") && argc == 3) {
		struct rlimit r = { .rlim_cur = (rlim_t)atol(argv[2]) << 20,
				    .rlim_max = (rlim_t)atol(argv[2]) << 20 };
		CHECK(setrlimit(RLIMIT_AS, &r) == 0);
		struct ibv_context *ctx = ibv_open_device(list[0]);
		printf("open %s\n", ctx ? "ok" : "failed");
	} else {
		CHECK(!"mode");
	}
	fflush(stdout);
	return 0;
}
