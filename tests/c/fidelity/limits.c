/* The device's advertised object limits, enforced: address handles up to
 * max_ah are created, the next is refused. (rxe's max_srq, 917503, is
 * past what a small VM's memory holds: its SRQs fail with ENOMEM first.) */
#include "probe.h"

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct ibv_device_attr da;
	NEED(ibv_query_device(p.ctx, &da) == 0);
	NEED(da.max_ah > 0 && da.max_ah < (1 << 20));
	int cap = da.max_ah + 1;
	struct ibv_ah **ahs = calloc((size_t)cap, sizeof(*ahs));
	NEED(ahs);
	struct ibv_ah_attr aa;
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.grh.dgid = p.gid;
	aa.grh.sgid_index = (uint8_t)p.gid_index;
	aa.grh.hop_limit = 64;
	aa.port_num = 1;
	int n = 0, err = 0;
	for (; n < cap; n++) {
		errno = 0;
		ahs[n] = ibv_create_ah(p.pd, &aa);
		if (!ahs[n]) {
			err = errno;
			break;
		}
	}
	say("ah_created_is_max_ah", n == da.max_ah ? "yes" : "no");
	say("ah_past_max", n == cap ? "created" : errno_name(err));
	for (int i = 0; i < n; i++)
		NEED(ibv_destroy_ah(ahs[i]) == 0);
	free(ahs);
	errno = 0;
	struct ibv_ah *ah = ibv_create_ah(p.pd, &aa);
	say("ah_after_destroying", ah ? "created" : errno_name(errno));
	if (ah)
		NEED(ibv_destroy_ah(ah) == 0);

	probe_close(&p);
	return 0;
}
