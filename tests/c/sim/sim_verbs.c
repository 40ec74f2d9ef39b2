/* Every simulated verb, including the inline ones of verbs.h, on the sim's
 * default devices (mlx5_0, mlx5_1). */
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static int fd_is_open(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0;
}

int main(void)
{
	int num = -1;
	struct ibv_device **list = ibv_get_device_list(&num);

	CHECK(list != NULL);
	CHECK(num == 2);
	CHECK(list[2] == NULL);
	CHECK(strcmp(ibv_get_device_name(list[0]), "mlx5_0") == 0);
	CHECK(strcmp(ibv_get_device_name(list[1]), "mlx5_1") == 0);
	CHECK(strcmp(list[0]->dev_name, "uverbs0") == 0);
	CHECK(strcmp(list[1]->dev_path, "/sys/class/infiniband_verbs/uverbs1") == 0);
	CHECK(strcmp(list[0]->ibdev_path, "/sys/class/infiniband/mlx5_0") == 0);
	CHECK(list[0]->node_type == IBV_NODE_CA);
	CHECK(list[0]->transport_type == IBV_TRANSPORT_IB);
	CHECK(ibv_get_device_index(list[0]) == 0);
	CHECK(ibv_get_device_index(list[1]) == 1);
	/* GUID in network byte order, Mellanox OUI in the top 24 bits. */
	uint64_t guid = be64toh(ibv_get_device_guid(list[0]));
	CHECK((guid >> 40) == 0x0c42a1);
	CHECK(ibv_get_device_guid(list[0]) != ibv_get_device_guid(list[1]));

	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx != NULL);
	CHECK(ctx->device == list[0]);
	CHECK(fd_is_open(ctx->cmd_fd));
	CHECK(fd_is_open(ctx->async_fd));
	CHECK(ctx->cmd_fd != ctx->async_fd);
	CHECK(verbs_get_ctx(ctx) != NULL);

	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0);
	CHECK(da.phys_port_cnt == 1);
	CHECK(da.vendor_id == 0x02c9);
	CHECK(da.node_guid == ibv_get_device_guid(list[0]));
	CHECK(strlen(da.fw_ver) > 0);

	struct ibv_device_attr_ex dax;
	CHECK(ibv_query_device_ex(ctx, NULL, &dax) == 0); /* inline, via verbs_context */
	CHECK(dax.orig_attr.max_qp == da.max_qp);
	CHECK(dax.phys_port_cnt_ex == 1);
	struct ibv_query_device_ex_input in = { .comp_mask = 1 };
	CHECK(ibv_query_device_ex(ctx, &in, &dax) == EINVAL);

	struct ibv_port_attr pa;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0); /* macro -> verbs_context.query_port */
	CHECK(pa.state == IBV_PORT_ACTIVE);
	CHECK(pa.link_layer == IBV_LINK_LAYER_INFINIBAND);
	CHECK(pa.lid != 0);
	CHECK(ibv_query_port(ctx, 2, &pa) == EINVAL);

	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
	CHECK(gid.raw[0] == 0xfe && gid.raw[1] == 0x80);
	CHECK(memcmp(&gid.raw[8], &da.node_guid, 8) == 0);
	CHECK_ERRNO(ibv_query_gid(ctx, 1, 1000, &gid) == 0, EINVAL);
	struct ibv_gid_entry ge;
	CHECK(ibv_query_gid_ex(ctx, 1, 0, &ge, 0) == 0);
	CHECK(ge.gid_type == IBV_GID_TYPE_IB);
	__be16 pkey;
	CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0);
	CHECK(pkey == htobe16(0xffff));
	CHECK(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)) == 0);

	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	CHECK(ibv_query_rt_values_ex(ctx, &v) == 0);

	/* PD, MRs. */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd != NULL && pd->context == ctx);
	static char buf[8192];
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), access);
	CHECK(mr != NULL && mr->pd == pd && mr->addr == buf && mr->length == sizeof(buf));
	volatile int runtime_access = access; /* not a constant: ibv_reg_mr_iova2 */
	struct ibv_mr *mr2 = ibv_reg_mr(pd, buf, 4096, runtime_access);
	CHECK(mr2 != NULL && mr2->lkey != mr->lkey && mr2->rkey != mr->rkey);
	/* The iova must share the buffer's offset within a page (kernel rule). */
	CHECK_ERRNO(ibv_reg_mr_iova(pd, buf, 4096, 0x10000 + (((uintptr_t)buf + 1) & 0xfff), access), EINVAL);
	struct ibv_mr *mr3 = ibv_reg_mr_iova(pd, buf, 4096, 0x10000 + ((uintptr_t)buf & 0xfff), access);
	CHECK(mr3 != NULL);
	struct ibv_mr *mr4 = ibv_reg_mr_iova2(pd, buf, 4096, (uintptr_t)buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr4 != NULL);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	CHECK(pd2 != NULL);
	CHECK(ibv_rereg_mr(mr4, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_TRANSLATION, pd2,
			   buf + 4096, 4096, 0) == 0);
	CHECK(mr4->pd == pd2 && mr4->addr == buf + 4096);
	CHECK_ERRNO(ibv_rereg_mr(mr4, 0x100, NULL, NULL, 0, 0) == 0, EINVAL);
	CHECK(ibv_dereg_mr(mr4) == 0);
	CHECK(ibv_dealloc_pd(pd2) == 0);
	CHECK(ibv_dereg_mr(mr3) == 0);
	CHECK(ibv_dereg_mr(mr2) == 0);

	/* Memory windows (tests/c/objects/obj_mw.c has the rest). */
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(mw && mw->pd == pd && ibv_dealloc_mw(mw) == 0);

	/* Completion channel, CQs. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch != NULL && fd_is_open(ch->fd));
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, (void *)0x1234, ch, 0);
	CHECK(cq != NULL && cq->cqe >= 16 && cq->channel == ch && cq->cq_context == (void *)0x1234);
	CHECK(ibv_resize_cq(cq, 100) == 0 && cq->cqe >= 100);
	CHECK(ibv_req_notify_cq(cq, 0) == 0);
	struct ibv_wc wc[4];
	CHECK(ibv_poll_cq(cq, 4, wc) == 0);
	/* Extended CQs exist (tests/c/sim/sim_ext_post.c); CVLANs are not simulated. */
	struct ibv_cq_init_attr_ex cqx = { .cqe = 4, .wc_flags = IBV_WC_EX_WITH_CVLAN };
	CHECK_ERRNO(ibv_create_cq_ex(ctx, &cqx), EOPNOTSUPP);

	/* SRQ. */
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sia);
	CHECK(srq != NULL);
	struct ibv_srq_attr sa;
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr == 8);
	sa.srq_limit = 2;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_srq_recv(srq, &rwr, &bad_r) == 0);
	uint32_t srqn;
	CHECK(ibv_get_srq_num(srq, &srqn) == EOPNOTSUPP);

	/* QPs (RC via ibv_create_qp, UD via ibv_create_qp_ex). */
	struct ibv_qp_init_attr qia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	CHECK(qp != NULL && qp->state == IBV_QPS_RESET && qp->qp_num != 0 && qp->pd == pd);
	struct ibv_qp_init_attr_ex qiax = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS, .pd = pd,
	};
	struct ibv_qp *ud = ibv_create_qp_ex(ctx, &qiax);
	CHECK(ud != NULL && ud->qp_type == IBV_QPT_UD);
	/* The ibv_wr_* API exists (sim_ext_post.c), but UD cannot RDMA WRITE. */
	qiax.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qiax.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
	CHECK_ERRNO(ibv_create_qp_ex(ctx, &qiax), EOPNOTSUPP);
	CHECK(ibv_qp_to_qp_ex(qp) == NULL);

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS) == 0);
	CHECK(qp->state == IBV_QPS_INIT);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) == 0);
	CHECK(qa.qp_state == IBV_QPS_INIT && qa.port_num == 1 && qi.qp_type == IBV_QPT_RC);
	CHECK(qi.send_cq == cq && qi.cap.max_send_wr == 4);

	/* Multicast on UD. */
	union ibv_gid mgid = { .raw = { 0xff, 0x12, 0x40, 0x1b } };
	CHECK(ibv_attach_mcast(ud, &mgid, 0xc001) == 0);
	CHECK(ibv_destroy_qp(ud) == EBUSY);
	CHECK(ibv_detach_mcast(ud, &mgid, 0xc001) == 0);
	CHECK(ibv_attach_mcast(qp, &mgid, 0xc001) == EINVAL); /* not UD */

	/* AH. */
	struct ibv_ah_attr aha = { .dlid = pa.lid, .port_num = 1, .sl = 0 };
	struct ibv_ah *ah = ibv_create_ah(pd, &aha);
	CHECK(ah != NULL && ah->pd == pd);

	/* Strings and rates. */
	CHECK(strcmp(ibv_wc_status_str(IBV_WC_SUCCESS), "success") == 0);
	CHECK(strcmp(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter") == 0);
	CHECK(strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active") == 0);
	CHECK(strcmp(ibv_event_type_str(IBV_EVENT_CQ_ERR), "CQ error") == 0);
	CHECK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4 && mult_to_ibv_rate(4) == IBV_RATE_10_GBPS);
	CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125);
	CHECK(mbps_to_ibv_rate(103125) == IBV_RATE_100_GBPS);

	/* Teardown in dependency order. */
	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_destroy_qp(ud) == 0);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_destroy_comp_channel(ch) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	int async_fd = ctx->async_fd;
	CHECK(ibv_close_device(ctx) == 0);
	CHECK(!fd_is_open(async_fd));
	ibv_free_device_list(list);
	DONE("sim_verbs");
}
