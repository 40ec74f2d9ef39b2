/* ibv_query_device_ex on every simulated device: the base attributes equal
 * ibv_query_device's, the extended fields agree with what the device then
 * does (completion timestamps on the advertised clock work; every feature
 * reported as absent, as rxe reports them, is refused), and the size contract of rdma-core holds
 * for programs built against a larger or smaller struct. */
#include <infiniband/verbs.h>
#include <stdint.h>

#include "check.h"

static uint64_t raw_ns(struct ibv_context *ctx)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	CHECK(ibv_query_rt_values_ex(ctx, &v) == 0);
	return (uint64_t)v.raw_clock.tv_sec * 1000000000ull + (uint64_t)v.raw_clock.tv_nsec;
}

static int all(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static void one_device(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx);
	struct ibv_device_attr base;
	struct ibv_device_attr_ex ex;
	memset(&ex, 0xa5, sizeof(ex));
	CHECK(ibv_query_device(ctx, &base) == 0);
	CHECK(ibv_query_device_ex(ctx, NULL, &ex) == 0);
	CHECK(memcmp(&base, &ex.orig_attr, sizeof(base)) == 0);
	CHECK(ex.phys_port_cnt_ex == base.phys_port_cnt);
	CHECK((ex.device_cap_flags_ex & 0xffffffffull) == (uint64_t)base.device_cap_flags);
	CHECK(ex.comp_mask == 0);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static uint64_t buf[64];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd && mr);
	/* Timestamps: advertised, and delivered on that clock (1 GHz: ns);
	 * or (rxe) not advertised, and refused. */
	struct ibv_cq_init_attr_ex ca = { .cqe = 8,
					  .wc_flags = IBV_WC_STANDARD_FLAGS |
						      IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	struct ibv_cq_ex *cq;
	if (ex.completion_timestamp_mask == 0) {
		CHECK(ex.hca_core_clock == 0);
		CHECK_ERRNO(ibv_create_cq_ex(ctx, &ca), EOPNOTSUPP);
		ca.wc_flags = IBV_WC_STANDARD_FLAGS;
		cq = ibv_create_cq_ex(ctx, &ca);
		/* siw's provider has no extended CQ: rdma-core's placeholder. */
		CHECK(cq || errno == EOPNOTSUPP);
	} else {
		CHECK(ex.hca_core_clock == 1000000);
		cq = ibv_create_cq_ex(ctx, &ca);
		CHECK(cq && cq->read_completion_ts);
		/* A QP in the error state flushes what is posted: a completion with no peer. */
		struct ibv_qp_init_attr qa = { .send_cq = ibv_cq_ex_to_cq(cq),
					       .recv_cq = ibv_cq_ex_to_cq(cq), .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
							.max_send_sge = 1, .max_recv_sge = 1 } };
		struct ibv_qp *qp = ibv_create_qp(pd, &qa);
		CHECK(qp);
		struct ibv_qp_attr st = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
		CHECK(ibv_modify_qp(qp, &st, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						     IBV_QP_ACCESS_FLAGS) == 0);
		st.qp_state = IBV_QPS_ERR;
		CHECK(ibv_modify_qp(qp, &st, IBV_QP_STATE) == 0);
		uint64_t t0 = raw_ns(ctx);
		struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(qp, &rwr, &bad) == 0);
		struct ibv_poll_cq_attr pa = { 0 };
		CHECK(ibv_start_poll(cq, &pa) == 0);
		uint64_t ts = ibv_wc_read_completion_ts(cq);
		CHECK(cq->wr_id == 5 && cq->status == IBV_WC_WR_FLUSH_ERR);
		ibv_end_poll(cq);
		uint64_t t1 = raw_ns(ctx);
		CHECK(ts >= t0 && ts <= t1 && (ts & ~ex.completion_timestamp_mask) == 0);
		CHECK(ibv_destroy_qp(qp) == 0);
	}

	struct ibv_cq *cq0 = cq ? ibv_cq_ex_to_cq(cq) : ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(cq0);

	/* On-demand paging, WQs and device memory are reported and work
	 * (tests/c/objects has the rest), or are not and are refused. */
	struct ibv_mr *odp = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	if (ex.odp_caps.general_caps == IBV_ODP_SUPPORT) {
		CHECK(ex.xrc_odp_caps != 0);
		CHECK(odp && ibv_dereg_mr(odp) == 0);
	} else {
		CHECK(ex.odp_caps.general_caps == 0 && ex.xrc_odp_caps == 0);
		/* rxe on Linux 6.1: EINVAL (measured). */
		CHECK(!odp && errno == EINVAL);
	}
	struct ibv_wq_init_attr wa = { .wq_type = IBV_WQT_RQ, .max_wr = 1, .max_sge = 1,
				       .pd = pd, .cq = cq0 };
	struct ibv_wq *wq = ibv_create_wq(ctx, &wa);
	if (ex.max_wq_type_rq > 0)
		CHECK(wq && ibv_destroy_wq(wq) == 0);
	else
		CHECK(!wq && errno == EOPNOTSUPP);
	struct ibv_alloc_dm_attr da = { .length = 64 };
	struct ibv_dm *dm = ibv_alloc_dm(ctx, &da);
	if (ex.max_dm_size > 0)
		CHECK(dm && ibv_free_dm(dm) == 0);
	else
		CHECK(!dm && errno == EOPNOTSUPP);
	CHECK(ex.cq_mod_caps.max_cq_count == 0 && ex.cq_mod_caps.max_cq_period == 0);
	struct ibv_modify_cq_attr ma = { .attr_mask = IBV_CQ_ATTR_MODERATE,
					 .moderate = { 1, 1 } };
	CHECK(ibv_modify_cq(cq0, &ma) == EOPNOTSUPP);
	CHECK(ex.tso_caps.max_tso == 0 && ex.rss_caps.supported_qpts == 0 &&
	      ex.packet_pacing_caps.qp_rate_limit_max == 0 && ex.raw_packet_caps == 0 &&
	      ex.tm_caps.max_num_tags == 0 &&
	      ex.pci_atomic_caps.fetch_add == 0);

	/* The size contract (rdma-core's ibv_cmd_query_device_any). */
	struct verbs_context *vctx = verbs_get_ctx(ctx);
	CHECK(vctx && vctx->query_device_ex);
	static unsigned char big[sizeof(struct ibv_device_attr_ex) + 112];
	/* A program built against a larger struct: its tail is zeroed. */
	memset(big, 0xff, sizeof(big));
	CHECK(vctx->query_device_ex(ctx, NULL, (struct ibv_device_attr_ex *)big, sizeof(big)) == 0);
	CHECK(memcmp(big, &ex, sizeof(ex)) == 0);
	CHECK(all(big + sizeof(ex), sizeof(big) - sizeof(ex), 0));
	/* One built when the struct was only the base attributes. */
	memset(big, 0xff, sizeof(big));
	CHECK(vctx->query_device_ex(ctx, NULL, (struct ibv_device_attr_ex *)big, sizeof(base)) == 0);
	CHECK(memcmp(big, &base, sizeof(base)) == 0);
	CHECK(all(big + sizeof(base), sizeof(big) - sizeof(base), 0xff));
	/* A size that ends inside hca_core_clock: the field is not half-written. */
	size_t cut = offsetof(struct ibv_device_attr_ex, hca_core_clock) + 4;
	memset(big, 0xff, sizeof(big));
	CHECK(vctx->query_device_ex(ctx, NULL, (struct ibv_device_attr_ex *)big, cut) == 0);
	CHECK(memcmp(big, &ex, offsetof(struct ibv_device_attr_ex, hca_core_clock)) == 0);
	CHECK(all(big + offsetof(struct ibv_device_attr_ex, hca_core_clock), 4, 0));
	CHECK(all(big + cut, sizeof(big) - cut, 0xff));
	/* Too small, or input the sim does not know. */
	CHECK(vctx->query_device_ex(ctx, NULL, (struct ibv_device_attr_ex *)big, 16) == EINVAL);
	struct ibv_query_device_ex_input in = { .comp_mask = 1 };
	CHECK(ibv_query_device_ex(ctx, &in, &ex) == EINVAL);

	CHECK(ibv_destroy_cq(cq0) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n > 0);
	for (int i = 0; i < n; i++)
		one_device(list[i]);
	ibv_free_device_list(list);
	DONE("sim_ext_device");
}
