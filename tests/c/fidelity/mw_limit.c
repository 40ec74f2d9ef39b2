/* Memory windows up to the device's max_mw are allocated, the next is
 * refused, and one is allocated again once they are freed. */
#include "probe.h"

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct ibv_device_attr da;
	NEED(ibv_query_device(p.ctx, &da) == 0);
	NEED(da.max_mw > 0 && da.max_mw < (1 << 22));
	int cap = da.max_mw + 1;
	struct ibv_mw **mws = calloc((size_t)cap, sizeof(*mws));
	NEED(mws);
	int n = 0, err = 0;
	for (; n < cap; n++) {
		errno = 0;
		mws[n] = ibv_alloc_mw(p.pd, IBV_MW_TYPE_2);
		if (!mws[n]) {
			err = errno;
			break;
		}
	}
	say("mw_allocated_is_max_mw", n == da.max_mw ? "yes" : "no");
	say("mw_past_max", n == cap ? "allocated" : errno_name(err));
	for (int i = 0; i < n; i++)
		NEED(ibv_dealloc_mw(mws[i]) == 0);
	free(mws);
	errno = 0;
	struct ibv_mw *mw = ibv_alloc_mw(p.pd, IBV_MW_TYPE_2);
	say("mw_after_freeing", mw ? "allocated" : errno_name(errno));
	if (mw)
		NEED(ibv_dealloc_mw(mw) == 0);
	probe_close(&p);
	return 0;
}
