/* Hostile work requests, on the sim, with or without the shim (and its
 * data-path checks or trace): none may crash or hang the program, and
 * each post fails as a provider fails it.
 *
 *   hostile_wr sge_cap   num_sge one above the queue's granted SGEs, the
 *                        list ending where an unreadable page begins, and
 *                        num_sge = 1 << 30: send, receive and SRQ receive
 *                        each fail with EINVAL, bad_wr the request.
 *   hostile_wr loop      a chain that loops back on itself (wr.next = &wr)
 *                        to a send queue in RTS and in ERR, a receive
 *                        queue in RTS and in ERR, and an SRQ: each fails
 *                        with ENOMEM, bad_wr the request, after the
 *                        queue's depth of posts.
 *   hostile_wr null_sg   sg_list NULL with num_sge 2 (an RDMA WRITE, a
 *                        receive): EINVAL, bad_wr the request.
 *
 * Prints one "NAME rc R bad B" line per post (R the errno name, B "wr"
 * when bad_wr is the request, "null" when NULL, "other" else), then
 * "hostile_wr MODE done". */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "rc_pair.h"

#define SITE __attribute__((noipa))

static const char *errname(int rc)
{
	switch (rc) {
	case 0:
		return "0";
	case EINVAL:
		return "EINVAL";
	case ENOMEM:
		return "ENOMEM";
	default:
		return "other";
	}
}

static void show(const char *name, int rc, const void *bad, const void *wr)
{
	printf("%s rc %s bad %s\n", name, errname(rc), bad == wr ? "wr" : bad ? "other" : "null");
	fflush(stdout);
}

/* Room for `n` SGEs ending exactly where a PROT_NONE page begins. */
static struct ibv_sge *before_a_hole(int n)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	CHECK(mprotect(p + page, page, PROT_NONE) == 0);
	return (struct ibv_sge *)(p + page) - n;
}

static struct ibv_srq *make_srq(struct side *s)
{
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 16, .max_sge = 2 } };
	struct ibv_srq *srq = ibv_create_srq(s->pd, &sia);
	CHECK(srq);
	return srq;
}

static void to_err(struct side *s)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE) == 0);
}

SITE static int post_send_here(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return ibv_post_send(qp, wr, bad);
}

SITE static int post_recv_here(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return ibv_post_recv(qp, wr, bad);
}

SITE static int post_srq_here(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return ibv_post_srq_recv(srq, wr, bad);
}

/* A send of `n` SGEs at `list` (an unsignaled RDMA WRITE to the peer). */
static int send_sges(struct side *s, struct side *peer, uint64_t id, struct ibv_sge *list, int n,
		     struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	*wr = (struct ibv_send_wr){ .wr_id = id, .sg_list = list, .num_sge = n,
				    .opcode = IBV_WR_RDMA_WRITE };
	wr->wr.rdma.remote_addr = (uintptr_t)peer->buf;
	wr->wr.rdma.rkey = peer->mr->rkey;
	*bad = NULL;
	return post_send_here(s->qp, wr, bad);
}

static void fill(struct side *s, struct ibv_sge *list, int n)
{
	for (int i = 0; i < n; i++)
		list[i] = (struct ibv_sge){ .addr = (uintptr_t)&s->buf[i], .length = 8,
					    .lkey = s->mr->lkey };
}

static void sge_cap(struct side *a, struct side *b)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	CHECK(ibv_query_qp(a->qp, &attr, IBV_QP_CAP, &init) == 0);
	int send_max = init.cap.max_send_sge, recv_max = init.cap.max_recv_sge;
	/* The granted SGEs fit before the hole; the one past them is in it. */
	struct ibv_sge *sl = before_a_hole(send_max);
	fill(a, sl, send_max);
	struct ibv_send_wr swr, *sbad;
	int rc = send_sges(a, b, 0x11, sl, send_max + 1, &swr, &sbad);
	show("send_above_cap", rc, sbad, &swr);
	rc = send_sges(a, b, 0x12, sl, 1 << 30, &swr, &sbad);
	show("send_huge", rc, sbad, &swr);

	struct ibv_sge *rl = before_a_hole(recv_max);
	fill(a, rl, recv_max);
	struct ibv_recv_wr rwr = { .wr_id = 0x21, .sg_list = rl, .num_sge = recv_max + 1 }, *rbad = NULL;
	rc = post_recv_here(a->qp, &rwr, &rbad);
	show("recv_above_cap", rc, rbad, &rwr);
	rwr.num_sge = 1 << 30;
	rbad = NULL;
	rc = post_recv_here(a->qp, &rwr, &rbad);
	show("recv_huge", rc, rbad, &rwr);

	struct ibv_srq *srq = make_srq(a);
	struct ibv_srq_attr sa;
	CHECK(ibv_query_srq(srq, &sa) == 0);
	struct ibv_sge *ql = before_a_hole(sa.max_sge);
	fill(a, ql, sa.max_sge);
	struct ibv_recv_wr qwr = { .wr_id = 0x31, .sg_list = ql, .num_sge = sa.max_sge + 1 }, *qbad = NULL;
	rc = post_srq_here(srq, &qwr, &qbad);
	show("srq_above_cap", rc, qbad, &qwr);
	CHECK(ibv_destroy_srq(srq) == 0);
}

static void loops(struct side *a, struct side *b)
{
	struct ibv_sge sge = { .addr = (uintptr_t)a->buf, .length = 8, .lkey = a->mr->lkey };
	struct ibv_send_wr swr, *sbad;
	int rc;
	swr = (struct ibv_send_wr){ .wr_id = 0x41, .sg_list = &sge, .num_sge = 1,
				    .opcode = IBV_WR_RDMA_WRITE };
	swr.wr.rdma.remote_addr = (uintptr_t)b->buf;
	swr.wr.rdma.rkey = b->mr->rkey;
	swr.next = &swr;
	sbad = NULL;
	rc = post_send_here(a->qp, &swr, &sbad);
	show("send_loop", rc, sbad, &swr);

	struct ibv_sge bsge = { .addr = (uintptr_t)b->buf, .length = 8, .lkey = b->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 0x51, .sg_list = &bsge, .num_sge = 1 }, *rbad = NULL;
	rwr.next = &rwr;
	rc = post_recv_here(b->qp, &rwr, &rbad);
	show("recv_loop", rc, rbad, &rwr);

	struct ibv_srq *srq = make_srq(a);
	struct ibv_recv_wr qwr = { .wr_id = 0x61, .sg_list = &sge, .num_sge = 1 }, *qbad = NULL;
	qwr.next = &qwr;
	rc = post_srq_here(srq, &qwr, &qbad);
	show("srq_loop", rc, qbad, &qwr);

	/* In ERR every request is flushed at once, never queued: the chain
	 * still ends at the queue's depth. */
	to_err(a);
	struct ibv_wc wc[64];
	while (ibv_poll_cq(a->cq, 64, wc) > 0)
		;
	sbad = NULL;
	swr.wr_id = 0x42;
	rc = post_send_here(a->qp, &swr, &sbad);
	show("send_loop_err", rc, sbad, &swr);
	while (ibv_poll_cq(a->cq, 64, wc) > 0)
		;
	rbad = NULL;
	rwr.wr_id = 0x52;
	rwr.sg_list = &sge;
	rc = post_recv_here(a->qp, &rwr, &rbad);
	show("recv_loop_err", rc, rbad, &rwr);
	while (ibv_poll_cq(a->cq, 64, wc) > 0)
		;
	CHECK(ibv_destroy_srq(srq) == 0);
}

static void null_sg(struct side *a, struct side *b)
{
	struct ibv_send_wr swr, *sbad;
	int rc = send_sges(a, b, 0x71, NULL, 2, &swr, &sbad);
	show("send_null_sg", rc, sbad, &swr);
	struct ibv_recv_wr rwr = { .wr_id = 0x81, .sg_list = NULL, .num_sge = 1 }, *rbad = NULL;
	rc = post_recv_here(b->qp, &rwr, &rbad);
	show("recv_null_sg", rc, rbad, &rwr);
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	struct side a, b;
	setup_pair(&a, &b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	connect_pair(&a, &b);
	if (!strcmp(argv[1], "sge_cap"))
		sge_cap(&a, &b);
	else if (!strcmp(argv[1], "loop"))
		loops(&a, &b);
	else if (!strcmp(argv[1], "null_sg"))
		null_sg(&a, &b);
	else
		CHECK(!"mode");
	printf("hostile_wr %s done\n", argv[1]);
	return 0;
}
