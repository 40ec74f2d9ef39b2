/* The connection manager's event paths, two processes: `paths server
 * SCENARIO PORT` and `paths client SCENARIO PORT`. Each prints what it
 * saw, one fact a line ("event NAME status N", "private_len N", "qp STATE",
 * ...), so the same binary's output can be compared between the sim and
 * the real kernel. The server prints "listening" once it listens.
 * Exits 0 when every step went as the scenario expects, 1 otherwise.
 *
 * Scenarios: connect, reject, reject_ece, nolistener, addr_error,
 * peer_death (the server dies connected), server_death (it dies holding
 * the request), unreachable (it holds the request and never answers),
 * nonblock, udp, limits, destroy_blocks. ADDR (argv[4], default
 * 127.0.0.1) is the address to listen on and connect to.
 *
 * Once listening, the server also listens on TCP port PORT: only so that a
 * harness can see it is ready in /proc/net/tcp (the RDMA CM's ports are
 * its own, apart from TCP's). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

static const char *scenario;
static const char *host = "127.0.0.1";
static int port;
static int failed;

#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL line %d: ", __LINE__); printf(__VA_ARGS__); printf("\n"); failed = 1; } } while (0)
#define DIE(...) do { printf("FAIL: "); printf(__VA_ARGS__); printf(" (errno %d)\n", errno); exit(1); } while (0)

static struct rdma_event_channel *ch;

static const char *state_name(int s)
{
	static const char *n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
	return s >= 0 && s <= 6 ? n[s] : "?";
}

static void print_qp(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &i))
		DIE("ibv_query_qp");
	printf("qp %s\n", state_name(a.qp_state));
}

/* Prints the private data's length and whether the bytes past `sent` are zero. */
static void print_private(const void *data, int len, int sent, char fill)
{
	const unsigned char *p = data;
	int i, ok = 1;

	printf("private_len %d\n", len);
	for (i = 0; i < len; i++)
		if (p[i] != (i < sent ? (unsigned char)fill : 0))
			ok = 0;
	printf("private_data %s\n", ok ? "ok" : "bad");
}

static struct rdma_cm_event *next(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		DIE("rdma_get_cm_event");
	printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
	CHECK(ev->event == want, "wanted %s", rdma_event_str(want));
	return ev;
}

static void addr_of(struct sockaddr_in *sin, int p)
{
	memset(sin, 0, sizeof *sin);
	sin->sin_family = AF_INET;
	sin->sin_port = htons(p);
	inet_pton(AF_INET, host, &sin->sin_addr);
}

static struct ibv_pd *pd;
static struct ibv_cq *cq;

static void make_qp(struct rdma_cm_id *id, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a;

	if (!pd)
		pd = ibv_alloc_pd(id->verbs);
	if (!cq)
		cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	if (!pd || !cq)
		DIE("pd/cq");
	memset(&a, 0, sizeof a);
	a.send_cq = a.recv_cq = cq;
	a.qp_type = type;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, pd, &a))
		DIE("rdma_create_qp");
	print_qp(id->qp);
}

static void teardown(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	if (rdma_destroy_id(id))
		DIE("rdma_destroy_id");
}

static int udp(void)
{
	return !strcmp(scenario, "udp");
}

static void ready_signal(void)
{
	struct sockaddr_in sin;
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (s < 0 || bind(s, (struct sockaddr *)&sin, sizeof sin) || listen(s, 1))
		DIE("the readiness socket");
}

static int server(void)
{
	struct rdma_cm_id *listen_id, *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in sin;
	struct rdma_conn_param cp;
	char data[256];

	if (rdma_create_id(ch, &listen_id, NULL, udp() ? RDMA_PS_UDP : RDMA_PS_TCP))
		DIE("rdma_create_id");
	addr_of(&sin, port);
	if (rdma_bind_addr(listen_id, (struct sockaddr *)&sin))
		DIE("rdma_bind_addr");
	if (rdma_listen(listen_id, 4))
		DIE("rdma_listen");
	ready_signal();
	printf("listening\n");
	fflush(stdout);

	ev = next(RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	CHECK(ev->listen_id == listen_id, "listen_id");
	CHECK(id != listen_id, "a new id");
	if (udp())
		print_private(ev->param.ud.private_data, ev->param.ud.private_data_len, 10, 'c');
	else
		print_private(ev->param.conn.private_data, ev->param.conn.private_data_len, 10, 'c');
	rdma_ack_cm_event(ev);
	if (!strcmp(scenario, "server_death"))
		_exit(0);	/* dies holding the request */
	if (!strcmp(scenario, "unreachable")) {
		sleep(3);	/* alive, never answering */
		_exit(0);
	}

	memset(data, 's', sizeof data);
	memset(&cp, 0, sizeof cp);
	cp.private_data = data;
	if (!strcmp(scenario, "reject") || !strcmp(scenario, "reject_ece")) {
		int r = !strcmp(scenario, "reject") ? rdma_reject(id, data, 20)
						     : rdma_reject_ece(id, data, 20);
		CHECK(r == 0, "reject");
		rdma_destroy_id(id);
		rdma_destroy_id(listen_id);
		return failed;
	}
	make_qp(id, udp() ? IBV_QPT_UD : IBV_QPT_RC);
	if (!strcmp(scenario, "limits")) {
		/* Too much: EINVAL, and the request is rejected (28). */
		cp.private_data_len = 197;
		CHECK(rdma_accept(id, &cp) == -1 && errno == EINVAL, "accept with 197 bytes: EINVAL");
		printf("accept 197 EINVAL\n");
		teardown(id);
		rdma_destroy_id(listen_id);
		return failed;
	}
	cp.private_data_len = 20;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	if (rdma_accept(id, &cp))
		DIE("rdma_accept");
	if (udp()) {
		teardown(id);
		rdma_destroy_id(listen_id);
		return failed;
	}
	ev = next(RDMA_CM_EVENT_ESTABLISHED);
	rdma_ack_cm_event(ev);
	print_qp(id->qp);
	if (!strcmp(scenario, "peer_death"))
		_exit(0);	/* the client must see DISCONNECTED */
	ev = next(RDMA_CM_EVENT_DISCONNECTED);
	rdma_ack_cm_event(ev);
	if (rdma_disconnect(id))
		DIE("rdma_disconnect");
	print_qp(id->qp);
	ev = next(RDMA_CM_EVENT_TIMEWAIT_EXIT);
	rdma_ack_cm_event(ev);
	teardown(id);
	rdma_destroy_id(listen_id);
	return failed;
}

struct destroyer {
	struct rdma_cm_id *id;
	volatile int done;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;

	rdma_destroy_id(d->id);
	d->done = 1;
	return NULL;
}

static int client(void)
{
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in sin;
	struct rdma_conn_param cp;
	char data[256];

	if (rdma_create_id(ch, &id, NULL, udp() ? RDMA_PS_UDP : RDMA_PS_TCP))
		DIE("rdma_create_id");
	if (!strcmp(scenario, "addr_error")) {
		struct sockaddr_in far;

		memset(&far, 0, sizeof far);
		far.sin_family = AF_INET;
		far.sin_port = htons(port);
		inet_pton(AF_INET, "192.0.2.1", &far.sin_addr);	/* TEST-NET-1 */
		if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&far, 500))
			printf("rdma_resolve_addr errno %d\n", errno);
		else
			rdma_ack_cm_event(next(RDMA_CM_EVENT_ADDR_ERROR));
		rdma_destroy_id(id);
		return failed;
	}
	if (!strcmp(scenario, "nonblock")) {
		int fl = fcntl(ch->fd, F_GETFL);
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };

		fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
		CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN, "EAGAIN when empty");
		printf("empty EAGAIN\n");
		CHECK(poll(&p, 1, 0) == 0, "nothing to poll");
		addr_of(&sin, port);
		if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000))
			DIE("rdma_resolve_addr");
		CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN), "readable");
		printf("poll readable\n");
		CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED, "the event");
		printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(id);
		return failed;
	}
	addr_of(&sin, port);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000))
		DIE("rdma_resolve_addr");
	ev = next(RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(id, 2000))
		DIE("rdma_resolve_route");
	ev = next(RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(ev);
	CHECK(id->verbs != NULL, "a device");
	make_qp(id, udp() ? IBV_QPT_UD : IBV_QPT_RC);

	memset(data, 'c', sizeof data);
	memset(&cp, 0, sizeof cp);
	cp.private_data = data;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (!strcmp(scenario, "limits")) {
		cp.private_data_len = udp() ? 181 : 57;
		CHECK(rdma_connect(id, &cp) == -1 && errno == EINVAL, "connect with 57 bytes: EINVAL");
		printf("connect 57 EINVAL\n");
	}
	cp.private_data_len = 10;
	if (rdma_connect(id, &cp))
		DIE("rdma_connect");
	if (!strcmp(scenario, "reject") || !strcmp(scenario, "reject_ece") || !strcmp(scenario, "nolistener") ||
	    !strcmp(scenario, "server_death") || !strcmp(scenario, "limits")) {
		ev = next(RDMA_CM_EVENT_REJECTED);
		if (!strcmp(scenario, "reject") || !strcmp(scenario, "reject_ece"))
			print_private(ev->param.conn.private_data, ev->param.conn.private_data_len, 20, 's');
		rdma_ack_cm_event(ev);
		teardown(id);
		return failed;
	}
	if (!strcmp(scenario, "unreachable")) {
		ev = next(RDMA_CM_EVENT_UNREACHABLE);
		rdma_ack_cm_event(ev);
		teardown(id);
		return failed;
	}
	ev = next(RDMA_CM_EVENT_ESTABLISHED);
	if (udp()) {
		print_private(ev->param.ud.private_data, ev->param.ud.private_data_len, 20, 's');
		printf("qkey %#x qp_num_set %d\n", ev->param.ud.qkey, ev->param.ud.qp_num != 0);
		rdma_ack_cm_event(ev);
		teardown(id);
		return failed;
	}
	print_private(ev->param.conn.private_data, ev->param.conn.private_data_len, 20, 's');
	printf("responder_resources %d initiator_depth %d\n", ev->param.conn.responder_resources,
	       ev->param.conn.initiator_depth);
	if (!strcmp(scenario, "destroy_blocks")) {
		/* The event is not acknowledged yet: rdma_destroy_id must wait for it. */
		struct destroyer d = { .id = id };
		pthread_t t;

		if (id->qp)
			rdma_destroy_qp(id);
		pthread_create(&t, NULL, destroy_thread, &d);
		usleep(300000);
		printf("destroy returned before ack: %s\n", d.done ? "yes" : "no");
		CHECK(!d.done, "rdma_destroy_id waits for the ack");
		rdma_ack_cm_event(ev);
		pthread_join(t, NULL);
		printf("destroy returned after ack: %s\n", d.done ? "yes" : "no");
		return failed;
	}
	rdma_ack_cm_event(ev);
	print_qp(id->qp);
	if (!strcmp(scenario, "peer_death")) {
		ev = next(RDMA_CM_EVENT_DISCONNECTED);
		rdma_ack_cm_event(ev);
		teardown(id);
		return failed;
	}
	if (rdma_disconnect(id))
		DIE("rdma_disconnect");
	print_qp(id->qp);
	ev = next(RDMA_CM_EVENT_DISCONNECTED);
	rdma_ack_cm_event(ev);
	ev = next(RDMA_CM_EVENT_TIMEWAIT_EXIT);
	rdma_ack_cm_event(ev);
	teardown(id);
	return failed;
}

int main(int argc, char **argv)
{
	int r;

	if (argc < 4)
		return 2;
	scenario = argv[2];
	port = atoi(argv[3]);
	if (argc > 4)
		host = argv[4];
	setvbuf(stdout, NULL, _IOLBF, 0);
	ch = rdma_create_event_channel();
	if (!ch)
		DIE("rdma_create_event_channel");
	r = !strcmp(argv[1], "server") ? server() : client();
	if (pd)
		ibv_dealloc_pd(pd);
	if (cq)
		ibv_destroy_cq(cq);
	rdma_destroy_event_channel(ch);
	printf("%s\n", r ? "failed" : "ok");
	return r;
}
