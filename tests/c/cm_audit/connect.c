/* A client and a server over the connection manager, with the error path
 * many programs have: `connect server PORT` or `connect client ADDR PORT`.
 *
 * Each side makes a channel and an id, a PD, a CQ and a QP on its id,
 * connects (client) or listens and accepts (server), then disconnects
 * and frees everything. An event other than the one expected is printed
 * ("event NAME status N"), acked, and answered by destroying the id and
 * exiting 2: the QP, CQ, PD and channel are left behind (the QP still
 * alive under the destroyed id), as in many examples' error paths.
 * Every step is a line, flushed: the server's "listening" says a client
 * may start. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define DIE(...) do { printf("FAIL: "); printf(__VA_ARGS__); printf(" (errno %d)\n", errno); exit(1); } while (0)

static struct rdma_event_channel *ch;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

static void say(const char *what)
{
	printf("%s\n", what);
	fflush(stdout);
}

/* The next event, which must be `want` on `id` (NULL: any id); anything
 * else takes the error path. */
static struct rdma_cm_event *expect(enum rdma_cm_event_type want, struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		DIE("rdma_get_cm_event");
	printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
	fflush(stdout);
	if (ev->event != want) {
		struct rdma_cm_id *failed = ev->id;

		rdma_ack_cm_event(ev);
		say("error path: destroying the id");
		rdma_destroy_id(failed);
		exit(2);
	}
	(void)id;
	return ev;
}

static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr attr;

	pd = ibv_alloc_pd(id->verbs);
	if (!pd)
		DIE("ibv_alloc_pd");
	cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	if (!cq)
		DIE("ibv_create_cq");
	memset(&attr, 0, sizeof(attr));
	attr.send_cq = attr.recv_cq = cq;
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, pd, &attr))
		DIE("rdma_create_qp");
}

static void teardown(struct rdma_cm_id *id)
{
	rdma_destroy_qp(id);
	if (ibv_destroy_cq(cq))
		DIE("ibv_destroy_cq");
	if (ibv_dealloc_pd(pd))
		DIE("ibv_dealloc_pd");
	if (rdma_destroy_id(id))
		DIE("rdma_destroy_id");
}

static struct sockaddr_in address(const char *addr, const char *port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(atoi(port));
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		DIE("bad address %s", addr);
	return sin;
}

static int client(const char *addr, const char *port)
{
	struct sockaddr_in sin = address(addr, port);
	struct rdma_conn_param param;
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id");
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000))
		DIE("rdma_resolve_addr");
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_ADDR_RESOLVED, id));
	if (rdma_resolve_route(id, 2000))
		DIE("rdma_resolve_route");
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_ROUTE_RESOLVED, id));
	make_qp(id);
	memset(&param, 0, sizeof(param));
	param.retry_count = 7;
	if (rdma_connect(id, &param))
		DIE("rdma_connect");
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED, id));
	say("connected; disconnecting");
	if (rdma_disconnect(id))
		DIE("rdma_disconnect");
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED, id));
	teardown(id);
	return 0;
}

static int server(const char *port)
{
	struct sockaddr_in sin = address("0.0.0.0", port);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *listen, *id;
	struct rdma_conn_param param;

	if (rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id");
	if (rdma_bind_addr(listen, (struct sockaddr *)&sin))
		DIE("rdma_bind_addr");
	if (rdma_listen(listen, 1))
		DIE("rdma_listen");
	say("listening");
	ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	id = ev->id;
	rdma_ack_cm_event(ev);
	make_qp(id);
	memset(&param, 0, sizeof(param));
	if (rdma_accept(id, &param))
		DIE("rdma_accept");
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_ESTABLISHED, id));
	say("connected; waiting for the client's disconnect");
	rdma_ack_cm_event(expect(RDMA_CM_EVENT_DISCONNECTED, id));
	teardown(id);
	if (rdma_destroy_id(listen))
		DIE("rdma_destroy_id");
	return 0;
}

int main(int argc, char **argv)
{
	int rc;

	ch = rdma_create_event_channel();
	if (!ch)
		DIE("rdma_create_event_channel");
	if (argc == 3 && !strcmp(argv[1], "server"))
		rc = server(argv[2]);
	else if (argc == 4 && !strcmp(argv[1], "client"))
		rc = client(argv[2], argv[3]);
	else {
		fprintf(stderr, "usage: connect server PORT | connect client ADDR PORT\n");
		return 64;
	}
	rdma_destroy_event_channel(ch);
	say("done");
	return rc;
}
