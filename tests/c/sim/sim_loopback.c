/* The loopback data path: two RC QPs on the two simulated devices,
 * connected to each other: SEND/RECV with immediate, RDMA WRITE, READ,
 * atomics, access errors, completion channel events; then UD. */
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdint.h>

#include "../common/rc_connect.h"
#include "check.h"

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint16_t lid;
	uint64_t buf[512];
};

static void setup(struct side *s, struct ibv_device *dev, enum ibv_qp_type t)
{
	struct ibv_port_attr pa;
	s->ctx = ibv_open_device(dev);
	CHECK(s->ctx && ibv_query_port(s->ctx, 1, &pa) == 0);
	s->lid = pa.lid;
	s->pd = ibv_alloc_pd(s->ctx);
	s->ch = ibv_create_comp_channel(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 64, s, s->ch, 0);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	struct ibv_qp_init_attr qia = { .send_cq = s->cq, .recv_cq = s->cq, .qp_type = t,
					.cap = { .max_send_wr = 16, .max_recv_wr = 16,
						 .max_send_sge = 2, .max_recv_sge = 2,
						 .max_inline_data = 64 } };
	s->qp = ibv_create_qp(s->pd, &qia);
	CHECK(s->pd && s->ch && s->cq && s->mr && s->qp);
}

static void connect_rc(struct side *s, struct side *peer, int access)
{
	rc_init(s->qp, access);
	/* No RNR retries: a send without a receive fails. */
	struct rc_path p = { .qpn = peer->qp->qp_num, .lid = peer->lid, .rd_atomic = 4,
			     .rnr_timer = 12, .timeout = 14, .retry_cnt = 7, .rnr_retry = 0 };
	rc_rtr_rts(s->qp, &p);
}

static struct ibv_wc poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(cq, 1, &wc);
	CHECK(n == 1);
	return wc;
}

static void post_recv(struct side *s, uint64_t id, void *addr, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
}

static int post(struct side *s, enum ibv_wr_opcode op, uint64_t id, void *addr, uint32_t len,
		uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.imm_data = htobe32(0xabcd);
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 5;
		wr.wr.atomic.swap = 99;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(s->qp, &wr, &bad);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	static struct side a, b;
	setup(&a, list[0], IBV_QPT_RC);
	setup(&b, list[1], IBV_QPT_RC);

	/* Posting before the QP is ready fails: ENOMEM on mlx5, whose send
	 * queue takes no SGE until RTS. */
	CHECK(post(&a, IBV_WR_SEND, 1, a.buf, 8, 0, 0) == ENOMEM);

	int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	connect_rc(&a, &b, access);
	connect_rc(&b, &a, access);

	/* SEND with immediate -> RECV. Arm b's CQ to get a channel event. */
	CHECK(ibv_req_notify_cq(b.cq, 0) == 0);
	strcpy((char *)b.buf, "");
	strcpy((char *)a.buf, "hello, sim");
	post_recv(&b, 100, b.buf, 64);
	CHECK(post(&a, IBV_WR_SEND_WITH_IMM, 1, a.buf, 11, 0, 0) == 0);
	struct ibv_wc wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND && wc.wr_id == 1);
	struct pollfd pfd = { .fd = b.ch->fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 1000) == 1);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx) == 0);
	CHECK(ev_cq == b.cq && ev_ctx == &b);
	ibv_ack_cq_events(ev_cq, 1);
	wc = poll_one(b.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == 100);
	CHECK(wc.byte_len == 11 && (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htobe32(0xabcd));
	CHECK(wc.src_qp == a.qp->qp_num && wc.qp_num == b.qp->qp_num && wc.slid == a.lid);
	CHECK(strcmp((char *)b.buf, "hello, sim") == 0);

	/* RDMA WRITE into b, READ back from b, atomics on b. */
	strcpy((char *)&a.buf[16], "written");
	CHECK(post(&a, IBV_WR_RDMA_WRITE, 2, &a.buf[16], 8, (uintptr_t)&b.buf[32], b.mr->rkey) == 0);
	wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE);
	CHECK(strcmp((char *)&b.buf[32], "written") == 0);
	strcpy((char *)&b.buf[40], "readme!");
	CHECK(post(&a, IBV_WR_RDMA_READ, 3, &a.buf[48], 8, (uintptr_t)&b.buf[40], b.mr->rkey) == 0);
	wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == 8);
	CHECK(strcmp((char *)&a.buf[48], "readme!") == 0);
	b.buf[64] = 5;
	CHECK(post(&a, IBV_WR_ATOMIC_CMP_AND_SWP, 4, &a.buf[72], 8, (uintptr_t)&b.buf[64],
		   b.mr->rkey) == 0);
	wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP);
	CHECK(a.buf[72] == 5 && b.buf[64] == 99);
	CHECK(post(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, &a.buf[72], 8, (uintptr_t)&b.buf[64],
		   b.mr->rkey) == 0);
	wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && a.buf[72] == 99 && b.buf[64] == 104);

	/* Errors become completions: a bad lkey is a local protection error. */
	struct ibv_sge bad_sge = { .addr = (uintptr_t)a.buf, .length = 8, .lkey = 0xdead };
	struct ibv_send_wr bwr = { .wr_id = 6, .sg_list = &bad_sge, .num_sge = 1,
				   .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	bwr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	bwr.wr.rdma.rkey = b.mr->rkey;
	CHECK(ibv_post_send(a.qp, &bwr, &bad) == 0);
	wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_LOC_PROT_ERR && wc.wr_id == 6);
	CHECK(a.qp->state == IBV_QPS_ERR);
	/* In ERR, new work requests are flushed. */
	CHECK(post(&a, IBV_WR_SEND, 7, a.buf, 8, 0, 0) == 0);
	wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 7);

	/* Reconnect a; a wrong rkey is a remote access error. */
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	CHECK(ibv_modify_qp(a.qp, &r, IBV_QP_STATE) == 0);
	connect_rc(&a, &b, access);
	CHECK(post(&a, IBV_WR_RDMA_WRITE, 8, a.buf, 8, (uintptr_t)b.buf, b.mr->rkey + 1) == 0);
	wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_REM_ACCESS_ERR);
	/* A class C error of the responder: b goes to ERR as well, with the
	 * async event that says why. */
	CHECK(b.qp->state == IBV_QPS_ERR);
	int fl = fcntl(b.ctx->async_fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(b.ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	int access_errs = 0;
	struct ibv_async_event ev;
	while (ibv_get_async_event(b.ctx, &ev) == 0) {
		access_errs += ev.event_type == IBV_EVENT_QP_ACCESS_ERR && ev.element.qp == b.qp;
		ibv_ack_async_event(&ev);
	}
	CHECK(errno == EAGAIN && access_errs == 1);
	CHECK(fcntl(b.ctx->async_fd, F_SETFL, fl) == 0);
	CHECK(ibv_modify_qp(b.qp, &r, IBV_QP_STATE) == 0);
	connect_rc(&b, &a, access);
	CHECK(ibv_modify_qp(a.qp, &r, IBV_QP_STATE) == 0);
	connect_rc(&a, &b, access);
	/* A send with no receive posted and rnr_retry 0: RNR retry exceeded. */
	CHECK(post(&a, IBV_WR_SEND, 9, a.buf, 8, 0, 0) == 0);
	wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_RNR_RETRY_EXC_ERR);
	CHECK(strcmp(ibv_wc_status_str(wc.status), "RNR retry counter exceeded") == 0);
	/* A receive too small for the message: local length error at b. */
	CHECK(ibv_modify_qp(a.qp, &r, IBV_QP_STATE) == 0);
	connect_rc(&a, &b, access);
	post_recv(&b, 101, b.buf, 4);
	CHECK(post(&a, IBV_WR_SEND, 10, a.buf, 8, 0, 0) == 0);
	wc = poll_one(b.cq);
	CHECK(wc.status == IBV_WC_LOC_LEN_ERR && wc.wr_id == 101);
	wc = poll_one(a.cq);
	CHECK(wc.status == IBV_WC_REM_INV_REQ_ERR);
	CHECK(b.qp->state == IBV_QPS_ERR);

	/* UD between two QPs: a GRH-sized header precedes the payload. */
	static struct side c, d;
	setup(&c, list[0], IBV_QPT_UD);
	setup(&d, list[1], IBV_QPT_UD);
	struct side *uds[2] = { &c, &d };
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr u = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x1234 };
		CHECK(ibv_modify_qp(uds[i]->qp, &u, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
							    IBV_QP_PORT | IBV_QP_QKEY) == 0);
		u.qp_state = IBV_QPS_RTR;
		CHECK(ibv_modify_qp(uds[i]->qp, &u, IBV_QP_STATE) == 0);
		u.qp_state = IBV_QPS_RTS;
		CHECK(ibv_modify_qp(uds[i]->qp, &u, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
	}
	struct ibv_ah_attr aha = { .dlid = d.lid, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(c.pd, &aha);
	CHECK(ah);
	post_recv(&d, 200, d.buf, 40 + 64);
	strcpy((char *)c.buf, "datagram");
	struct ibv_sge usge = { .addr = (uintptr_t)c.buf, .length = 9, .lkey = c.mr->lkey };
	struct ibv_send_wr uwr = { .wr_id = 11, .sg_list = &usge, .num_sge = 1,
				   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	uwr.wr.ud.ah = ah;
	uwr.wr.ud.remote_qpn = d.qp->qp_num;
	uwr.wr.ud.remote_qkey = 0x1234;
	CHECK(ibv_post_send(c.qp, &uwr, &bad) == 0);
	wc = poll_one(c.cq);
	CHECK(wc.status == IBV_WC_SUCCESS);
	wc = poll_one(d.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + 9 && wc.src_qp == c.qp->qp_num);
	CHECK(strcmp((char *)d.buf + 40, "datagram") == 0);
	/* A wrong Q_Key: silently dropped, the sender still completes. */
	post_recv(&d, 201, d.buf, 40 + 64);
	uwr.wr.ud.remote_qkey = 0x9999;
	CHECK(ibv_post_send(c.qp, &uwr, &bad) == 0);
	wc = poll_one(c.cq);
	CHECK(wc.status == IBV_WC_SUCCESS);
	CHECK(ibv_poll_cq(d.cq, 1, &wc) == 0);
	CHECK(ibv_destroy_ah(ah) == 0);

	struct side *all[4] = { &a, &b, &c, &d };
	for (int i = 0; i < 4; i++) {
		struct side *s = all[i];
		CHECK(ibv_destroy_qp(s->qp) == 0);
		CHECK(ibv_destroy_cq(s->cq) == 0);
		CHECK(ibv_destroy_comp_channel(s->ch) == 0);
		CHECK(ibv_dereg_mr(s->mr) == 0);
		CHECK(ibv_dealloc_pd(s->pd) == 0);
		CHECK(ibv_close_device(s->ctx) == 0);
	}
	ibv_free_device_list(list);
	DONE("sim_loopback");
}
