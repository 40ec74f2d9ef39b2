/* The objects only the context's function tables make (the inline verbs of
 * verbs.h), and the data path, for tests/whole_api.rs.
 *
 *   whole_api leak      make one object of each kind the device supports,
 *                       print "made KIND HANDLE PARENT" for each ("skip KIND"
 *                       for the others), close the context and exit.
 *   whole_api clean     the same, each destroyed in order: nothing leaks.
 *   whole_api datapath  two connected RC QPs; post each kind of bad work
 *                       request twice from one site; poll.
 *   whole_api caps      two connected RC QPs; post work requests above
 *                       the QPs' granted SGEs and inline data twice each.
 *   whole_api pingpong  40 send/receive rounds between two RC QPs.
 *   whole_api ops       print which module ctx->ops.post_send lives in.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "first_device.h" /* tests/c/common: open_first */
#include "rc_pair.h"      /* tests/c/common: two connected RC QPs */

#define MADE(kind, obj, parent)                                                          \
	printf("made %s 0x%lx 0x%lx\n", kind, (unsigned long)(uintptr_t)(obj),            \
	       (unsigned long)(uintptr_t)(parent))
#define SKIP(kind) printf("skip %s errno=%d\n", kind, errno)

struct all {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mw *mw1, *mw2;
	struct ibv_xrcd *xrcd;
	struct ibv_srq *xsrq;
	struct ibv_qp *xtgt, *xopen;
	struct ibv_cq_ex *cqx;
	struct ibv_wq *wq;
	struct ibv_rwq_ind_table *rwq;
	struct ibv_qp *ud;
	struct ibv_flow *flow;
	struct ibv_flow_action *action;
	struct ibv_td *td;
	struct ibv_pd *pdom;
	struct ibv_dm *dm;
	struct ibv_mr *dm_mr;
	struct ibv_counters *counters;
};

static void make_all(struct all *a)
{
	a->ctx = open_first();
	a->pd = ibv_alloc_pd(a->ctx);
	a->cq = ibv_create_cq(a->ctx, 16, NULL, NULL, 0);
	CHECK(a->pd && a->cq);

	/* ibv_create_qp_ex with more than a PD: verbs_context.create_qp_ex. */
	struct ibv_qp_init_attr_ex qx = {
		.send_cq = a->cq, .recv_cq = a->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = a->pd, .send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	a->qp = ibv_create_qp_ex(a->ctx, &qx);
	if (a->qp) MADE("qp", a->qp, a->pd); else SKIP("qp");

	struct ibv_cq_init_attr_ex cx = { .cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN };
	a->cqx = ibv_create_cq_ex(a->ctx, &cx);
	if (a->cqx) MADE("cq", a->cqx, 0); else SKIP("cq");

	a->mw1 = ibv_alloc_mw(a->pd, IBV_MW_TYPE_1);
	if (a->mw1) MADE("mw", a->mw1, a->pd); else SKIP("mw");
	a->mw2 = ibv_alloc_mw(a->pd, IBV_MW_TYPE_2);
	if (a->mw2) MADE("mw", a->mw2, a->pd); else SKIP("mw");

	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	a->xrcd = ibv_open_xrcd(a->ctx, &xa);
	if (a->xrcd) {
		MADE("xrcd", a->xrcd, 0);
		struct ibv_srq_init_attr_ex sx = {
			.attr = { .max_wr = 8, .max_sge = 1 },
			.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
				     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
			.srq_type = IBV_SRQT_XRC, .pd = a->pd, .xrcd = a->xrcd, .cq = a->cq,
		};
		a->xsrq = ibv_create_srq_ex(a->ctx, &sx);
		if (a->xsrq) MADE("srq", a->xsrq, a->pd); else SKIP("srq");
		struct ibv_qp_init_attr_ex tx = {
			.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD,
			.xrcd = a->xrcd,
		};
		a->xtgt = ibv_create_qp_ex(a->ctx, &tx);
		if (a->xtgt) {
			MADE("qp", a->xtgt, a->xrcd);
			struct ibv_qp_open_attr oa = {
				.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
					     IBV_QP_OPEN_ATTR_TYPE,
				.qp_num = a->xtgt->qp_num, .xrcd = a->xrcd, .qp_type = IBV_QPT_XRC_RECV,
			};
			a->xopen = ibv_open_qp(a->ctx, &oa);
			if (a->xopen) MADE("qp", a->xopen, a->xrcd); else SKIP("qp");
		} else {
			SKIP("qp");
		}
	} else {
		SKIP("xrcd");
	}

	struct ibv_wq_init_attr wa = { .wq_type = IBV_WQT_RQ, .max_wr = 8, .max_sge = 1,
				       .pd = a->pd, .cq = a->cq };
	a->wq = ibv_create_wq(a->ctx, &wa);
	if (a->wq) {
		MADE("wq", a->wq, a->pd);
		struct ibv_rwq_ind_table_init_attr ra = { .log_ind_tbl_size = 0, .ind_tbl = &a->wq };
		a->rwq = ibv_create_rwq_ind_table(a->ctx, &ra);
		if (a->rwq) MADE("rwq_ind_table", a->rwq, 0); else SKIP("rwq_ind_table");
	} else {
		SKIP("wq");
	}

	/* A steering rule on a UD QP: one Ethernet spec. */
	struct ibv_qp_init_attr ua = { .send_cq = a->cq, .recv_cq = a->cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	a->ud = ibv_create_qp(a->pd, &ua);
	CHECK(a->ud);
	struct {
		struct ibv_flow_attr attr;
		struct ibv_flow_spec_eth eth;
	} rule = { .attr = { .type = IBV_FLOW_ATTR_NORMAL, .size = sizeof(rule),
			     .num_of_specs = 1, .port = 1 },
		   .eth = { .type = IBV_FLOW_SPEC_ETH, .size = sizeof(struct ibv_flow_spec_eth) } };
	a->flow = ibv_create_flow(a->ud, &rule.attr);
	if (a->flow) MADE("flow", a->flow, a->ud); else SKIP("flow");

	static struct ibv_flow_action_esp esp = { .spi = 1 };
	static unsigned char key[36] = { 1 };
	struct ibv_flow_action_esp_attr ea = { .esp_attr = &esp,
					       .keymat_proto = IBV_FLOW_ACTION_ESP_KEYMAT_AES_GCM,
					       .keymat_len = sizeof(key), .keymat_ptr = key };
	a->action = ibv_create_flow_action_esp(a->ctx, &ea);
	if (a->action) MADE("flow_action", a->action, 0); else SKIP("flow_action");

	struct ibv_td_init_attr ta = { 0 };
	a->td = ibv_alloc_td(a->ctx, &ta);
	if (a->td) {
		MADE("td", a->td, 0);
		struct ibv_parent_domain_init_attr pa = { .pd = a->pd, .td = a->td };
		a->pdom = ibv_alloc_parent_domain(a->ctx, &pa);
		if (a->pdom) MADE("parent_domain", a->pdom, a->pd); else SKIP("parent_domain");
	} else {
		SKIP("td");
	}

	struct ibv_alloc_dm_attr da = { .length = 4096 };
	a->dm = ibv_alloc_dm(a->ctx, &da);
	if (a->dm) {
		MADE("dm", a->dm, 0);
		a->dm_mr = ibv_reg_dm_mr(a->pd, a->dm, 0, 4096,
					 IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE);
		if (a->dm_mr) MADE("mr", a->dm_mr, a->pd); else SKIP("mr");
	} else {
		SKIP("dm");
	}

	struct ibv_counters_init_attr ca = { 0 };
	a->counters = ibv_create_counters(a->ctx, &ca);
	if (a->counters) MADE("counters", a->counters, 0); else SKIP("counters");
	fflush(stdout);
}

static void destroy_all(struct all *a)
{
	if (a->counters) CHECK(ibv_destroy_counters(a->counters) == 0);
	if (a->dm_mr) CHECK(ibv_dereg_mr(a->dm_mr) == 0);
	if (a->dm) CHECK(ibv_free_dm(a->dm) == 0);
	if (a->pdom) CHECK(ibv_dealloc_pd(a->pdom) == 0);
	if (a->td) CHECK(ibv_dealloc_td(a->td) == 0);
	if (a->action) CHECK(ibv_destroy_flow_action(a->action) == 0);
	if (a->flow) CHECK(ibv_destroy_flow(a->flow) == 0);
	CHECK(ibv_destroy_qp(a->ud) == 0);
	if (a->rwq) CHECK(ibv_destroy_rwq_ind_table(a->rwq) == 0);
	if (a->wq) CHECK(ibv_destroy_wq(a->wq) == 0);
	if (a->xopen) CHECK(ibv_destroy_qp(a->xopen) == 0);
	if (a->xtgt) CHECK(ibv_destroy_qp(a->xtgt) == 0);
	if (a->xsrq) CHECK(ibv_destroy_srq(a->xsrq) == 0);
	if (a->xrcd) CHECK(ibv_close_xrcd(a->xrcd) == 0);
	if (a->mw2) CHECK(ibv_dealloc_mw(a->mw2) == 0);
	if (a->mw1) CHECK(ibv_dealloc_mw(a->mw1) == 0);
	if (a->cqx) CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(a->cqx)) == 0);
	if (a->qp) CHECK(ibv_destroy_qp(a->qp) == 0);
	CHECK(ibv_destroy_cq(a->cq) == 0);
	CHECK(ibv_dealloc_pd(a->pd) == 0);
}

/* --- the data path ---------------------------------------------------------- */

/* One call site per kind of violation, so each is reported once: kept
 * apart (noipa: gcc would fold the identical ones into one), each with its
 * own inlined ibv_post_* (the site is where the program jumps through the
 * context's table). */
#define SITE __attribute__((noipa))
SITE static int send_one(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	return ibv_post_send(qp, &wr, &bad);
}

SITE static int send_past_end(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	return ibv_post_send(qp, &wr, &bad);
}

SITE static int recv_other_pd(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

SITE static int recv_read_only(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

SITE static int recv_good(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[8];
	for (int spins = 0; spins < 200; spins++) {
		int n = ibv_poll_cq(cq, 8, wc);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++)
			printf("completion wr_id=%llu status=%s\n", (unsigned long long)wc[i].wr_id,
			       ibv_wc_status_str(wc[i].status));
		if (n == 0)
			usleep(1000);
	}
}

static int datapath(void)
{
	static struct side a, b;
	setup_pair(&a, &b, IBV_ACCESS_LOCAL_WRITE);
	connect_pair(&a, &b);

	/* A clean exchange first: nothing to report. */
	CHECK(recv_good(b.qp, 1, b.buf, 64, b.mr->lkey) == 0);
	CHECK(send_one(a.qp, 2, a.buf, 64, a.mr->lkey) == 0);
	drain(a.cq);
	drain(b.cq);

	/* An MR of another PD, and one without local write, as receive buffers. */
	struct ibv_pd *other = ibv_alloc_pd(b.ctx);
	static char other_buf[256], ro_buf[256];
	struct ibv_mr *other_mr = ibv_reg_mr(other, other_buf, sizeof(other_buf),
					     IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *ro = ibv_reg_mr(b.pd, ro_buf, sizeof(ro_buf), 0);
	CHECK(other && other_mr && ro);
	/* A deregistered MR's lkey. */
	static char gone_buf[256];
	struct ibv_mr *gone = ibv_reg_mr(a.pd, gone_buf, sizeof(gone_buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(gone);
	uint32_t gone_lkey = gone->lkey;
	CHECK(ibv_dereg_mr(gone) == 0);

	for (int i = 0; i < 2; i++) {
		printf("rc %d\n", recv_other_pd(b.qp, 10 + i, other_buf, 64, other_mr->lkey));
		printf("rc %d\n", recv_read_only(b.qp, 20 + i, ro_buf, 64, ro->lkey));
		printf("rc %d\n", send_past_end(a.qp, 30 + i, (char *)a.buf + sizeof(a.buf) - 16, 64, a.mr->lkey));
		printf("rc %d\n", send_one(a.qp, 40 + i, gone_buf, 64, gone_lkey));
	}
	drain(a.cq);
	drain(b.cq);
	printf("datapath done\n");
	return 0;
}

SITE static int recv_after_rereg(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len,
				 uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

/* ibv_rereg_mr moves the receiver's MR to another PD and back: a receive
 * into it while it is the other PD's is reported (once), the ones while it
 * is the QP's PD again are not. Each post follows a clean one that the
 * checks remembered the MR's facts for. */
static int rereg(void)
{
	static struct side a, b;
	setup_pair(&a, &b, IBV_ACCESS_LOCAL_WRITE);
	connect_pair(&a, &b);
	struct ibv_pd *other = ibv_alloc_pd(b.ctx);
	CHECK(other);
	for (int round = 0; round < 2; round++) {
		CHECK(recv_good(b.qp, 100 + round, b.buf, 64, b.mr->lkey) == 0);
		CHECK(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, other, NULL, 0, 0) == 0);
		printf("rc %d\n", recv_after_rereg(b.qp, 110 + round, b.buf, 64, b.mr->lkey));
		CHECK(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, b.pd, NULL, 0, 0) == 0);
		CHECK(recv_good(b.qp, 120 + round, b.buf, 64, b.mr->lkey) == 0);
	}
	printf("rereg done\n");
	return 0;
}

/* Work requests above the QP's caps (rc_pair.h grants 2 send and 2 receive
 * SGEs, no inline data): more SGEs than granted, inline data it has no
 * room for; each twice from one site, after two that fit. */
SITE static int send_sges(struct ibv_qp *qp, uint64_t id, struct ibv_sge *sge, int n, int flags)
{
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = sge, .num_sge = n,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED | flags }, *bad;
	return ibv_post_send(qp, &wr, &bad);
}

SITE static int send_inline(struct ibv_qp *qp, uint64_t id, struct ibv_sge *sge, int n)
{
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = sge, .num_sge = n, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE }, *bad;
	return ibv_post_send(qp, &wr, &bad);
}

SITE static int recv_sges(struct ibv_qp *qp, uint64_t id, struct ibv_sge *sge, int n)
{
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = sge, .num_sge = n }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

static int caps(void)
{
	static struct side a, b;
	setup_pair(&a, &b, IBV_ACCESS_LOCAL_WRITE);
	connect_pair(&a, &b);
	struct ibv_sge sa[3], sb[3];
	for (int i = 0; i < 3; i++) {
		sa[i] = (struct ibv_sge){ .addr = (uintptr_t)&a.buf[i * 8], .length = 16, .lkey = a.mr->lkey };
		sb[i] = (struct ibv_sge){ .addr = (uintptr_t)&b.buf[i * 8], .length = 16, .lkey = b.mr->lkey };
	}
	/* Within the caps: nothing to report. */
	CHECK(recv_sges(b.qp, 1, sb, 2) == 0);
	CHECK(send_sges(a.qp, 2, sa, 2, 0) == 0);
	drain(a.cq);
	drain(b.cq);
	for (int i = 0; i < 2; i++) {
		printf("rc %d\n", recv_sges(b.qp, 10 + i, sb, 3));
		printf("rc %d\n", send_sges(a.qp, 20 + i, sa, 3, 0));
		printf("rc %d\n", send_inline(a.qp, 30 + i, sa, 2));
	}
	drain(a.cq);
	drain(b.cq);
	printf("caps done\n");
	return 0;
}

/* A ping-pong of sends between two RC QPs: each round, the receiver posts
 * a receive, the sender a signaled send, and both poll their completion;
 * 20 rounds each way, so each QP has 40 posts and 40 completions. */
static int pingpong(void)
{
	static struct side a, b;
	setup_pair(&a, &b, IBV_ACCESS_LOCAL_WRITE);
	connect_pair(&a, &b);
	for (int i = 0; i < 40; i++) {
		struct side *from = i % 2 ? &b : &a, *to = i % 2 ? &a : &b;
		post_recv(to, 1000 + i, to->buf, 64);
		CHECK(post_rdma(from, IBV_WR_SEND, i, from->buf, 64, from->mr->lkey, 0, 0) == 0);
		struct ibv_wc s = poll_one(from->cq), r = poll_one(to->cq);
		CHECK(s.status == IBV_WC_SUCCESS && s.wr_id == (uint64_t)i);
		CHECK(r.status == IBV_WC_SUCCESS && r.wr_id == (uint64_t)(1000 + i));
	}
	printf("qp_num a=%#x b=%#x\npingpong done\n", a.qp->qp_num, b.qp->qp_num);
	return 0;
}

/* An error completion read through an extended CQ's poll cursor. */
static int excq(void)
{
	static struct side a, b;
	setup_pair(&a, &b, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_cq_init_attr_ex cx = { .cqe = 16,
					  .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM };
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(a.ctx, &cx);
	CHECK(cqx);
	Dl_info info;
	CHECK(dladdr((void *)cqx->start_poll, &info) && info.dli_fname);
	printf("start_poll in %s\n", info.dli_fname);
	struct ibv_qp_init_attr qia = { .send_cq = ibv_cq_ex_to_cq(cqx),
					.recv_cq = ibv_cq_ex_to_cq(cqx), .qp_type = IBV_QPT_RC,
					.cap = { .max_send_wr = 4, .max_recv_wr = 4,
						 .max_send_sge = 1, .max_recv_sge = 1 } };
	a.qp = ibv_create_qp(a.pd, &qia);
	CHECK(a.qp);
	connect_pair(&a, &b);
	printf("rc %d\n", send_one(a.qp, 7, a.buf, 8, 0xdead));
	struct ibv_poll_cq_attr pa = { 0 };
	int got = 0;
	for (int spins = 0; spins < 2000 && !got; spins++) {
		if (ibv_start_poll(cqx, &pa) == 0) {
			printf("excq wr_id=%llu status=%s qp_num_ok=%d\n",
			       (unsigned long long)cqx->wr_id, ibv_wc_status_str(cqx->status),
			       ibv_wc_read_qp_num(cqx) == a.qp->qp_num);
			got = 1;
			ibv_end_poll(cqx);
		} else {
			usleep(1000);
		}
	}
	CHECK(got);
	printf("excq done\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "leak") || !strcmp(mode, "clean")) {
		static struct all a;
		make_all(&a);
		if (!strcmp(mode, "clean"))
			destroy_all(&a);
		CHECK(ibv_close_device(a.ctx) == 0);
		DONE(mode);
	}
	if (!strcmp(mode, "rules")) {
		/* The exports' rules for table-made objects: EBUSY keeps the
		 * record, a destroy after close is refused. (A second destroy
		 * cannot be shown: the inline verb reads the freed object before
		 * the shim sees the call.) */
		struct ibv_context *ctx = open_first();
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct ibv_td_init_attr ta = { 0 };
		struct ibv_td *td = ibv_alloc_td(ctx, &ta);
		struct ibv_parent_domain_init_attr pa = { .pd = pd, .td = td };
		struct ibv_pd *pdom = ibv_alloc_parent_domain(ctx, &pa);
		struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		struct ibv_counters_init_attr ca = { 0 };
		struct ibv_counters *c = ibv_create_counters(ctx, &ca);
		CHECK(pd && td && pdom && mw && c);
		printf("busy ibv_dealloc_td %d\n", ibv_dealloc_td(td));
		CHECK(ibv_dealloc_pd(pdom) == 0);
		CHECK(ibv_dealloc_td(td) == 0);
		CHECK(ibv_destroy_counters(c) == 0);
		CHECK(ibv_close_device(ctx) == 0);
		printf("closed ibv_dealloc_mw %d\n", ibv_dealloc_mw(mw));
		DONE(mode);
	}
	if (!strcmp(mode, "datapath"))
		return datapath();
	if (!strcmp(mode, "excq"))
		return excq();
	if (!strcmp(mode, "rereg"))
		return rereg();
	if (!strcmp(mode, "caps"))
		return caps();
	if (!strcmp(mode, "pingpong"))
		return pingpong();
	if (!strcmp(mode, "ops")) {
		struct ibv_context *ctx = open_first();
		Dl_info info;
		CHECK(dladdr((void *)ctx->ops.post_send, &info) && info.dli_fname);
		printf("post_send in %s\n", info.dli_fname);
		CHECK(dladdr((void *)ctx->ops.poll_cq, &info) && info.dli_fname);
		printf("poll_cq in %s\n", info.dli_fname);
		CHECK(ibv_close_device(ctx) == 0);
		return 0;
	}
	fprintf(stderr, "usage: whole_api leak|clean|datapath|caps|pingpong|excq|ops\n");
	return 2;
}
