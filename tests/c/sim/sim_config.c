/* IBV_SIM_DEVICES as the test sets it: argv[1] says what to expect.
 *   malformed        -> empty (non-NULL) list, errno EINVAL
 *   families         -> "mlx5_0=0002:c903:0001:0002,rxe0,siw0": GUID, transports
 */
#include <infiniband/verbs.h>
#include <stdint.h>

#include "check.h"

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	int n = -1;
	errno = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (strcmp(argv[1], "malformed") == 0) {
		CHECK(list != NULL && list[0] == NULL && n == 0);
		CHECK(errno == EINVAL);
		ibv_free_device_list(list);
		DONE("sim_config malformed");
	}
	CHECK(list != NULL && n == 3);
	CHECK(be64toh(ibv_get_device_guid(list[0])) == 0x0002c90300010002ULL);
	CHECK(list[1]->transport_type == IBV_TRANSPORT_IB && list[1]->node_type == IBV_NODE_CA);
	CHECK(list[2]->transport_type == IBV_TRANSPORT_IWARP && list[2]->node_type == IBV_NODE_RNIC);
	struct ibv_context *ctx = ibv_open_device(list[1]);
	struct ibv_port_attr pa;
	CHECK(ctx && ibv_query_port(ctx, 1, &pa) == 0);
	CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	/* RoCE address handles need a GRH. */
	struct ibv_ah_attr aha = { .port_num = 1 };
	CHECK_ERRNO(ibv_create_ah(pd, &aha), EINVAL);
	aha.is_global = 1;
	CHECK(ibv_query_gid(ctx, 1, 1, &aha.grh.dgid) == 0);
	aha.grh.sgid_index = 1;
	struct ibv_ah *ah = ibv_create_ah(pd, &aha);
	CHECK(ah);
	uint8_t mac[6];
	uint16_t vid;
	CHECK(ibv_resolve_eth_l2_from_gid(ctx, &aha, mac, &vid) == 0);
	CHECK(mac[0] == 0x52 && mac[1] == 0x54 && mac[2] == 0x00);
	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	/* iWARP: RC only. */
	ctx = ibv_open_device(list[2]);
	pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr qia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
					.cap = { .max_send_wr = 1, .max_recv_wr = 1,
						 .max_send_sge = 1, .max_recv_sge = 1 } };
	CHECK_ERRNO(ibv_create_qp(pd, &qia), EOPNOTSUPP);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
	DONE("sim_config families");
}
