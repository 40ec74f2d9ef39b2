/* Leaks what its arguments say, on the first device (tests/reports.rs).
 * "pd": one PD; "mr N": a PD and N MRs on it; "nothing": frees all.
 * Each creating call is on a line the test names (LINE_* below). */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char buf[4096];

int main(int argc, char **argv)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1)
		return 99;
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		return 98;
	struct ibv_pd *pd = ibv_alloc_pd(ctx); /* LINE_PD 21 */
	if (!pd)
		return 97;
	const char *what = argc > 1 ? argv[1] : "pd";
	long count = argc > 2 ? atol(argv[2]) : 0;
	for (long i = 0; i < count; i++)
		if (!ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE)) /* LINE_MR 27 */
			return 96;
	if (strcmp(what, "nothing") == 0) {
		ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
	}
	printf("done %s\n", what);
	return 0;
}
