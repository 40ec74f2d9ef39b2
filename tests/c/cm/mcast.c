/* rdma_join_multicast in one process (the sim's multicast reaches the
 * QPs of the sending process): two RDMA_PS_UDP ids resolve a multicast
 * address, make UD QPs and join the group; MULTICAST_JOIN carries the
 * group's address vector, QP number 0xffffff, the UDP qkey and the
 * program's context; a SEND to the group from one id's QP lands on the
 * other's. Then both leave. Prints "ok" and exits 0 on success. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#define DIE(what) do { printf("FAIL %s (errno %d)\n", what, errno); exit(1); } while (0)

static struct rdma_event_channel *ch;

static struct rdma_cm_event *next(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		DIE("rdma_get_cm_event");
	printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
	if (ev->event != want)
		DIE("the event");
	return ev;
}

struct member {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[40 + 64];
	struct ibv_ah_attr ah_attr;
	uint32_t qpn, qkey;
};

static void join(struct member *m, struct sockaddr *group, int tag)
{
	struct ibv_qp_init_attr a;
	struct rdma_cm_event *ev;

	if (rdma_create_id(ch, &m->id, NULL, RDMA_PS_UDP))
		DIE("rdma_create_id");
	if (rdma_resolve_addr(m->id, NULL, group, 2000))
		DIE("rdma_resolve_addr");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ADDR_RESOLVED));
	m->pd = ibv_alloc_pd(m->id->verbs);
	m->cq = ibv_create_cq(m->id->verbs, 8, NULL, NULL, 0);
	m->mr = ibv_reg_mr(m->pd, m->buf, sizeof m->buf, IBV_ACCESS_LOCAL_WRITE);
	if (!m->pd || !m->cq || !m->mr)
		DIE("verbs objects");
	memset(&a, 0, sizeof a);
	a.send_cq = a.recv_cq = m->cq;
	a.qp_type = IBV_QPT_UD;
	a.cap.max_send_wr = a.cap.max_recv_wr = 2;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	if (rdma_create_qp(m->id, m->pd, &a))
		DIE("rdma_create_qp");
	if (rdma_join_multicast(m->id, group, (void *)(long)tag))
		DIE("rdma_join_multicast");
	ev = next(RDMA_CM_EVENT_MULTICAST_JOIN);
	printf("context %ld qp_num %#x qkey %#x global %d\n", (long)ev->param.ud.private_data,
	       ev->param.ud.qp_num, ev->param.ud.qkey, ev->param.ud.ah_attr.is_global);
	m->ah_attr = ev->param.ud.ah_attr;
	m->qpn = ev->param.ud.qp_num;
	m->qkey = ev->param.ud.qkey;
	rdma_ack_cm_event(ev);
}

int main(void)
{
	struct sockaddr_in group;
	struct member a, b;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_send_wr swr, *sbad;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	int i, n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	memset(&group, 0, sizeof group);
	group.sin_family = AF_INET;
	inet_pton(AF_INET, "239.1.2.3", &group.sin_addr);
	ch = rdma_create_event_channel();
	if (!ch)
		DIE("rdma_create_event_channel");
	join(&a, (struct sockaddr *)&group, 1);
	join(&b, (struct sockaddr *)&group, 2);

	sge.addr = (uintptr_t)b.buf;
	sge.length = sizeof b.buf;
	sge.lkey = b.mr->lkey;
	memset(&rwr, 0, sizeof rwr);
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (ibv_post_recv(b.id->qp, &rwr, &rbad))
		DIE("ibv_post_recv");

	ah = ibv_create_ah(a.pd, &a.ah_attr);
	if (!ah)
		DIE("ibv_create_ah");
	strcpy(a.buf, "to the group");
	sge.addr = (uintptr_t)a.buf;
	sge.length = 13;
	sge.lkey = a.mr->lkey;
	memset(&swr, 0, sizeof swr);
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = a.qpn;
	swr.wr.ud.remote_qkey = a.qkey;
	if (ibv_post_send(a.id->qp, &swr, &sbad))
		DIE("ibv_post_send");
	for (i = 0, n = 0; n < 1 && i < 1000000; i++)
		n = ibv_poll_cq(b.cq, 1, &wc);
	if (n != 1 || wc.status != IBV_WC_SUCCESS || strcmp(b.buf + 40, "to the group"))
		DIE("the group's message");
	printf("received: %s\n", b.buf + 40);
	for (i = 0, n = 0; n < 1 && i < 1000000; i++)
		n = ibv_poll_cq(a.cq, 1, &wc);
	ibv_destroy_ah(ah);
	if (rdma_leave_multicast(a.id, (struct sockaddr *)&group) ||
	    rdma_leave_multicast(b.id, (struct sockaddr *)&group))
		DIE("rdma_leave_multicast");
	if (rdma_leave_multicast(a.id, (struct sockaddr *)&group) == 0)
		DIE("a second leave");
	for (struct member *m = &a; m; m = (m == &a ? &b : NULL)) {
		rdma_destroy_qp(m->id);
		ibv_dereg_mr(m->mr);
		ibv_destroy_cq(m->cq);
		ibv_dealloc_pd(m->pd);
		rdma_destroy_id(m->id);
	}
	rdma_destroy_event_channel(ch);
	printf("ok\n");
	return 0;
}
