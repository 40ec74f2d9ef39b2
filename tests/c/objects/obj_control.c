/* The sim's control-path objects: receive WQs (state machine, posting),
 * RWQ indirection tables, flow steering rules, flow actions and counters,
 * each created, used and destroyed through the inline verbs, with the
 * kernel's errno on misuse (EINVAL, EBUSY while in use, EOPNOTSUPP). */
#include <infiniband/verbs.h>
#include <stdint.h>

#include "check.h"
#include "first_device.h" /* tests/c/common: the first device, a PD, a CQ */

static void wqs(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_device_attr_ex ex;
	CHECK(ibv_query_device_ex(ctx, NULL, &ex) == 0);
	CHECK(ex.max_wq_type_rq > 0 && ex.rss_caps.max_rwq_indirection_table_size >= 4);

	struct ibv_wq_init_attr wa = { .wq_context = &wa, .wq_type = IBV_WQT_RQ, .max_wr = 2,
				       .max_sge = 1, .pd = pd, .cq = cq };
	wa.wq_type = (enum ibv_wq_type)7;
	CHECK_ERRNO(ibv_create_wq(ctx, &wa), EINVAL);
	wa.wq_type = IBV_WQT_RQ;
	wa.max_wr = 0;
	CHECK_ERRNO(ibv_create_wq(ctx, &wa), EINVAL);
	wa.max_wr = 2;
	struct ibv_wq *wq[4];
	for (int i = 0; i < 4; i++) {
		wq[i] = ibv_create_wq(ctx, &wa);
		CHECK(wq[i] && wq[i]->state == IBV_WQS_RESET && wq[i]->wq_context == &wa);
		CHECK(wq[i]->pd == pd && wq[i]->cq == cq && wq[i]->context == ctx);
	}
	CHECK(wq[0]->wq_num != wq[1]->wq_num);
	/* The PD and CQ are in use. */
	CHECK(ibv_dealloc_pd(pd) == EBUSY && ibv_destroy_cq(cq) == EBUSY);

	/* State machine: RESET -> RDY -> ERR -> RESET; RESET -> ERR is not one;
	 * a wrong current state is refused. */
	struct ibv_wq_attr ma = { .attr_mask = IBV_WQ_ATTR_STATE, .wq_state = IBV_WQS_ERR };
	CHECK(ibv_modify_wq(wq[0], &ma) == EINVAL);
	ma.wq_state = IBV_WQS_RDY;
	CHECK(ibv_modify_wq(wq[0], &ma) == 0 && wq[0]->state == IBV_WQS_RDY);
	ma.attr_mask = IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE;
	ma.curr_wq_state = IBV_WQS_RESET;
	ma.wq_state = IBV_WQS_ERR;
	CHECK(ibv_modify_wq(wq[0], &ma) == EINVAL);
	ma.curr_wq_state = IBV_WQS_RDY;
	CHECK(ibv_modify_wq(wq[0], &ma) == 0 && wq[0]->state == IBV_WQS_ERR);
	ma.attr_mask = 1 << 5;
	CHECK(ibv_modify_wq(wq[0], &ma) == EINVAL);

	/* Posting: not in RESET, at most max_wr outstanding. */
	uint64_t buf[4];
	struct ibv_sge sge = { (uintptr_t)buf, 8, 0 };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	CHECK(ibv_post_wq_recv(wq[1], &rwr, &bad) == EINVAL && bad == &rwr);
	ma.attr_mask = IBV_WQ_ATTR_STATE;
	ma.wq_state = IBV_WQS_RDY;
	CHECK(ibv_modify_wq(wq[1], &ma) == 0);
	CHECK(ibv_post_wq_recv(wq[1], &rwr, &bad) == 0);
	CHECK(ibv_post_wq_recv(wq[1], &rwr, &bad) == 0);
	CHECK(ibv_post_wq_recv(wq[1], &rwr, &bad) == ENOMEM);

	/* Indirection tables: 1 << log entries, WQs of this context. */
	struct ibv_rwq_ind_table_init_attr ta = { .log_ind_tbl_size = 2, .ind_tbl = wq };
	ta.comp_mask = 1;
	CHECK_ERRNO(ibv_create_rwq_ind_table(ctx, &ta), EINVAL);
	ta.comp_mask = 0;
	ta.log_ind_tbl_size = 30;
	CHECK_ERRNO(ibv_create_rwq_ind_table(ctx, &ta), EINVAL);
	ta.log_ind_tbl_size = 2;
	struct ibv_rwq_ind_table *t = ibv_create_rwq_ind_table(ctx, &ta);
	CHECK(t && t->context == ctx);
	struct ibv_wq *bogus[2] = { wq[0], (struct ibv_wq *)buf };
	ta.ind_tbl = bogus;
	ta.log_ind_tbl_size = 1;
	CHECK_ERRNO(ibv_create_rwq_ind_table(ctx, &ta), EINVAL);
	/* A WQ in a table is busy until the table goes. */
	CHECK(ibv_destroy_wq(wq[2]) == EBUSY);
	CHECK(ibv_destroy_rwq_ind_table(t) == 0);
	for (int i = 0; i < 4; i++)
		CHECK(ibv_destroy_wq(wq[i]) == 0);
}

struct rule {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_eth eth;
	struct ibv_flow_spec_action_handle handle;
	struct ibv_flow_spec_counter_action count;
} __attribute__((packed, aligned(8)));

static void flows(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *ud = ibv_create_qp(pd, &qa);
	qa.qp_type = IBV_QPT_RC;
	struct ibv_qp *rc = ibv_create_qp(pd, &qa);
	CHECK(ud && rc);

	/* Counters: described before the flow, read back as zeros. */
	struct ibv_counters_init_attr ca = { .comp_mask = 1 };
	CHECK_ERRNO(ibv_create_counters(ctx, &ca), EINVAL);
	ca.comp_mask = 0;
	struct ibv_counters *cnt = ibv_create_counters(ctx, &ca);
	CHECK(cnt && cnt->context == ctx);
	struct ibv_counter_attach_attr aa = { .counter_desc = IBV_COUNTER_PACKETS, .index = 0 };
	CHECK(ibv_attach_counters_point_flow(cnt, &aa, NULL) == 0);
	aa.counter_desc = IBV_COUNTER_BYTES;
	aa.index = 1;
	CHECK(ibv_attach_counters_point_flow(cnt, &aa, NULL) == 0);
	aa.comp_mask = 1;
	CHECK(ibv_attach_counters_point_flow(cnt, &aa, NULL) == EINVAL);
	aa.comp_mask = 0;
	uint64_t vals[2] = { 7, 7 };
	CHECK(ibv_read_counters(cnt, vals, 1, 0) == EINVAL);
	CHECK(ibv_read_counters(cnt, vals, 2, 1 << 4) == EINVAL);
	CHECK(ibv_read_counters(cnt, vals, 2, IBV_READ_COUNTERS_ATTR_PREFER_CACHED) == 0);
	CHECK(vals[0] == 0 && vals[1] == 0);

	/* A flow action (ESP, AES-GCM keys). */
	struct ibv_flow_action_esp esp = { .spi = 1 };
	unsigned char key[36] = { 1 }; /* an AES-GCM key blob */
	struct ibv_flow_action_esp_attr ea = { .esp_attr = &esp,
					       .keymat_proto = IBV_FLOW_ACTION_ESP_KEYMAT_AES_GCM,
					       .keymat_len = sizeof(key), .keymat_ptr = &key };
	ea.keymat_ptr = NULL;
	CHECK_ERRNO(ibv_create_flow_action_esp(ctx, &ea), EINVAL);
	ea.keymat_ptr = &key;
	struct ibv_flow_action *act = ibv_create_flow_action_esp(ctx, &ea);
	CHECK(act && act->context == ctx);
	esp.spi = 2;
	CHECK(ibv_modify_flow_action_esp(act, &ea) == 0);
	ea.comp_mask = 1 << 3;
	CHECK(ibv_modify_flow_action_esp(act, &ea) == EINVAL);
	ea.comp_mask = 0;

	/* A rule on the UD QP with both: they and the QP are now in use. */
	struct rule r;
	memset(&r, 0, sizeof(r));
	struct ibv_flow_attr *fa = (struct ibv_flow_attr *)(void *)&r;
	r.attr.type = IBV_FLOW_ATTR_NORMAL;
	r.attr.size = sizeof(r);
	r.attr.num_of_specs = 3;
	r.attr.port = 1;
	r.eth.type = IBV_FLOW_SPEC_ETH;
	r.eth.size = sizeof(r.eth);
	r.handle.type = IBV_FLOW_SPEC_ACTION_HANDLE;
	r.handle.size = sizeof(r.handle);
	r.handle.action = act;
	r.count.type = IBV_FLOW_SPEC_ACTION_COUNT;
	r.count.size = sizeof(r.count);
	r.count.counters = cnt;
	CHECK_ERRNO(ibv_create_flow(rc, fa), EINVAL);
	r.attr.port = 9;
	CHECK_ERRNO(ibv_create_flow(ud, fa), EINVAL);
	r.attr.port = 1;
	r.attr.flags = 1 << 7;
	CHECK_ERRNO(ibv_create_flow(ud, fa), EINVAL);
	r.attr.flags = 0;
	r.eth.type = (enum ibv_flow_spec_type)0x77;
	CHECK_ERRNO(ibv_create_flow(ud, fa), EINVAL);
	r.eth.type = IBV_FLOW_SPEC_ETH;
	struct ibv_flow *f = ibv_create_flow(ud, fa);
	CHECK(f && f->context == ctx);
	CHECK(ibv_destroy_flow_action(act) == EBUSY);
	CHECK(ibv_destroy_counters(cnt) == EBUSY);
	CHECK(ibv_attach_counters_point_flow(cnt, &aa, NULL) == EBUSY);
	CHECK(ibv_attach_counters_point_flow(cnt, &aa, f) == EOPNOTSUPP);
	CHECK(ibv_destroy_qp(ud) == EBUSY);
	CHECK(ibv_destroy_flow(f) == 0);

	CHECK(ibv_destroy_flow_action(act) == 0 && ibv_destroy_counters(cnt) == 0);
	CHECK(ibv_destroy_qp(ud) == 0 && ibv_destroy_qp(rc) == 0);
}

int main(void)
{
	struct first_device dev;
	open_first_device(&dev, 8);
	wqs(dev.ctx, dev.pd, dev.cq);
	flows(dev.ctx, dev.pd, dev.cq);
	close_first_device(&dev);
	DONE("obj_control");
}
