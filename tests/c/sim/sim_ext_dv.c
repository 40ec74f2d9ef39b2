/* Provider direct-verbs libraries (the real libmlx5 and libefa) linked into
 * a program running on the sim: their entry points see devices that are not
 * theirs and fail cleanly, and the private kernel-command entry points of
 * IBVERBS_PRIVATE_34 that a provider would reach fail with EOPNOTSUPP
 * without touching the objects they are given. */
#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "check.h"

/* From rdma-core 44's libibverbs/driver.h and cmd_ioctl.h (not installed). */
struct verbs_context;
int ibv_cmd_destroy_cq(struct ibv_cq *cq);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr, void *cmd, size_t cmd_size);
int execute_ioctl(struct ibv_context *context, void *cmd);
struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data);
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
				    struct verbs_context *context_offset, uint32_t driver_id);
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link);
extern bool verbs_allow_disassociate_destroy;

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	CHECK(!mlx5dv_is_supported(list[0]));
	struct mlx5dv_context_attr dva = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
	CHECK_ERRNO(mlx5dv_open_device(list[0], &dva), EOPNOTSUPP);

	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	struct mlx5dv_context mdv = { 0 };
	CHECK(mlx5dv_query_device(ctx, &mdv) == EOPNOTSUPP);
	struct efadv_device_attr ea;
	CHECK(efadv_query_device(ctx, &ea, sizeof(ea)) == EOPNOTSUPP);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	CHECK(pd && cq && qp);

	/* Kernel commands: EOPNOTSUPP, objects untouched and still usable. */
	CHECK(ibv_cmd_destroy_qp(qp) == EOPNOTSUPP);
	CHECK(ibv_cmd_destroy_cq(cq) == EOPNOTSUPP);
	CHECK(ibv_cmd_dealloc_pd(pd) == EOPNOTSUPP);
	CHECK(ibv_cmd_req_notify_cq(cq, 0) == EOPNOTSUPP);
	struct ibv_wc wc;
	errno = 0;
	CHECK(ibv_cmd_poll_cq(cq, 1, &wc) == -1 && errno == EOPNOTSUPP);
	struct ibv_port_attr port;
	CHECK(ibv_cmd_query_port(ctx, 1, &port, NULL, 0) == EOPNOTSUPP);
	CHECK(execute_ioctl(ctx, NULL) == EOPNOTSUPP);
	CHECK_ERRNO(_verbs_init_and_alloc_context(list[0], -1, 1024, NULL, 0), EOPNOTSUPP);
	CHECK(__ioctl_final_num_attrs(3, NULL) == 3);
	CHECK(!verbs_allow_disassociate_destroy);

	/* verbs_open_device without private data is ibv_open_device. */
	struct ibv_context *c2 = verbs_open_device(list[0], NULL);
	CHECK(c2 && ibv_close_device(c2) == 0);
	CHECK_ERRNO(verbs_open_device(list[0], &dva), EOPNOTSUPP);

	/* verbs_init_cq initialises a CQ the caller owns. */
	struct ibv_cq mine;
	memset(&mine, 0xff, sizeof(mine));
	verbs_init_cq(&mine, ctx, NULL, &mine);
	CHECK(mine.context == ctx && mine.channel == NULL && mine.cq_context == &mine &&
	      mine.comp_events_completed == 0 && mine.async_events_completed == 0);

	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS) == 0);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
	DONE("sim_ext_dv");
}
