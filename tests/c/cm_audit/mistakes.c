/* Connection-manager mistakes, one process on one device: `mistakes
 * SCENARIO [ADDR]` makes one and prints what it did, one step a line, so
 * the audit's diagnosis can be read beside it. ADDR (default 127.0.0.1)
 * is a local address of an RDMA device: resolving it needs no peer.
 *
 *   leak      an event channel and a cm_id, never destroyed
 *   unacked   an ADDR_RESOLVED event fetched and not acked, then
 *             rdma_destroy_id (librdmacm blocks until the ack: for ever)
 *   double    an event acked twice
 *   id_qp     an id with a QP (rdma_create_qp) destroyed before its QP
 *   id_verbs  an id left with what librdmacm made for its QP (CQs and
 *             their completion channels: the program gave none) and a
 *             buffer registered by rdma_reg_msgs on the QP's PD
 *
 * Each line is flushed, so a harness that kills the blocked program still
 * reads the steps. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define DIE(...) do { printf("FAIL: "); printf(__VA_ARGS__); printf(" (errno %d)\n", errno); exit(1); } while (0)

static struct rdma_event_channel *ch;
static struct rdma_cm_id *id;

static void say(const char *what)
{
	printf("%s\n", what);
	fflush(stdout);
}

/* A channel and an id whose address is resolved; the event is returned
 * unacked. */
static struct rdma_cm_event *resolved(const char *addr)
{
	struct sockaddr_in sin;
	struct rdma_cm_event *ev;

	ch = rdma_create_event_channel();
	if (!ch)
		DIE("rdma_create_event_channel");
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id");
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(7471);
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		DIE("bad address %s", addr);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000))
		DIE("rdma_resolve_addr");
	if (rdma_get_cm_event(ch, &ev))
		DIE("rdma_get_cm_event");
	printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
	fflush(stdout);
	if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
		exit(1);
	return ev;
}

/* An RC QP on the id, on librdmacm's PD and with CQs librdmacm makes
 * (the program gives neither). */
static void make_qp(void)
{
	struct ibv_qp_init_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, NULL, &attr))
		DIE("rdma_create_qp");
}

int main(int argc, char **argv)
{
	const char *scenario = argc > 1 ? argv[1] : "";
	const char *addr = argc > 2 ? argv[2] : "127.0.0.1";

	if (!strcmp(scenario, "leak")) {
		ch = rdma_create_event_channel();
		if (!ch)
			DIE("rdma_create_event_channel");
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			DIE("rdma_create_id");
		say("made a channel and an id; exiting without destroying them");
		return 0;
	}
	if (!strcmp(scenario, "unacked")) {
		resolved(addr);
		say("destroying the id with its event unacked");
		rdma_destroy_id(id);
		say("destroy returned");
		return 0;
	}
	if (!strcmp(scenario, "double")) {
		struct rdma_cm_event *ev = resolved(addr);

		if (rdma_ack_cm_event(ev))
			DIE("first ack");
		say("acked once");
		{
			int rc;

			errno = 0;
			rc = rdma_ack_cm_event(ev);
			printf("second ack %d errno %d\n", rc, errno);
			fflush(stdout);
		}
		rdma_destroy_id(id);
		rdma_destroy_event_channel(ch);
		say("done");
		return 0;
	}
	if (!strcmp(scenario, "id_qp")) {
		struct rdma_cm_event *ev = resolved(addr);

		rdma_ack_cm_event(ev);
		make_qp();
		say("made a QP on the id; destroying the id first");
		if (rdma_destroy_id(id))
			DIE("rdma_destroy_id");
		rdma_destroy_event_channel(ch);
		say("done");
		return 0;
	}
	if (!strcmp(scenario, "id_verbs")) {
		static char buf[4096];
		struct rdma_cm_event *ev = resolved(addr);
		struct ibv_mr *mr;

		rdma_ack_cm_event(ev);
		make_qp();
		if (!id->send_cq || !id->recv_cq || !id->send_cq_channel || !id->recv_cq_channel)
			DIE("rdma_create_qp made no CQs for the id");
		mr = rdma_reg_msgs(id, buf, sizeof(buf));
		if (!mr)
			DIE("rdma_reg_msgs");
		printf("id %p qp %p pd %p send_cq %p recv_cq %p send_cq_channel %p recv_cq_channel %p mr %p\n",
		       (void *)id, (void *)id->qp, (void *)id->pd, (void *)id->send_cq,
		       (void *)id->recv_cq, (void *)id->send_cq_channel,
		       (void *)id->recv_cq_channel, (void *)mr);
		say("exiting with the id, its QP, CQs, channels and MR");
		return 0;
	}
	printf("usage: mistakes leak|unacked|double|id_qp|id_verbs [ADDR]\n");
	return 2;
}
