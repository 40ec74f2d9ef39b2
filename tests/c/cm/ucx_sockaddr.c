/* UCX over the rdmacm connection manager: a UCP listener on a socket
 * address and a client endpoint made from that address (UCX's
 * client-server mode, whose connection goes through librdmacm). The client
 * sends a tagged message, the server checks it and sends it back changed,
 * the client checks the answer.
 *
 *   ucx_sockaddr server ADDR PORT
 *   ucx_sockaddr client ADDR PORT
 *
 * Prints each endpoint's configuration (ucp_ep_print_info: its lanes and
 * the connection manager they were made with) and "ok" at the end. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#define MSG_LEN 4096
#define TAG_REQ 0x1234
#define TAG_REP 0x5678

static ucp_conn_request_h conn_req;

static void on_conn(ucp_conn_request_h req, void *arg)
{
	(void)arg;
	if (conn_req)
		ucp_listener_reject(NULL, req);
	else
		conn_req = req;
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	(void)arg;
	(void)ep;
	fprintf(stderr, "endpoint error: %s\n", ucs_status_string(status));
}

static int wait_req(ucp_worker_h w, void *req, const char *what)
{
	ucs_status_t st;

	if (req == NULL)
		return 0;
	if (UCS_PTR_IS_ERR(req)) {
		fprintf(stderr, "%s: %s\n", what, ucs_status_string(UCS_PTR_STATUS(req)));
		return -1;
	}
	do {
		ucp_worker_progress(w);
		st = ucp_request_check_status(req);
	} while (st == UCS_INPROGRESS);
	ucp_request_free(req);
	if (st != UCS_OK) {
		fprintf(stderr, "%s: %s\n", what, ucs_status_string(st));
		return -1;
	}
	return 0;
}

static int send_msg(ucp_worker_h w, ucp_ep_h ep, const void *buf, ucp_tag_t tag)
{
	ucp_request_param_t p = {0};

	return wait_req(w, ucp_tag_send_nbx(ep, buf, MSG_LEN, tag, &p), "ucp_tag_send_nbx");
}

static int recv_msg(ucp_worker_h w, void *buf, ucp_tag_t tag)
{
	ucp_request_param_t p = {0};

	return wait_req(w, ucp_tag_recv_nbx(w, buf, MSG_LEN, tag, (ucp_tag_t)-1, &p),
			"ucp_tag_recv_nbx");
}

static void fill(unsigned char *buf, unsigned seed)
{
	for (unsigned i = 0; i < MSG_LEN; i++)
		buf[i] = (unsigned char)(i * 31 + seed);
}

static int close_ep(ucp_worker_h w, ucp_ep_h ep)
{
	ucp_request_param_t p = {0};

	p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = UCP_EP_CLOSE_FLAG_FORCE;
	return wait_req(w, ucp_ep_close_nbx(ep, &p), "ucp_ep_close_nbx");
}

int main(int argc, char **argv)
{
	ucp_params_t params = {0};
	ucp_worker_params_t wparams = {0};
	ucp_ep_params_t ep_params = {0};
	struct sockaddr_in sin = {0};
	ucp_context_h ctx;
	ucp_worker_h worker;
	ucp_listener_h listener = NULL;
	ucp_ep_h ep;
	ucs_status_t st;
	unsigned char want[MSG_LEN], got[MSG_LEN];
	int server, ret = 1;

	if (argc != 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: %s server|client ADDR PORT\n", argv[0]);
		return 2;
	}
	server = !strcmp(argv[1], "server");
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", argv[2]);
		return 2;
	}

	params.field_mask = UCP_PARAM_FIELD_FEATURES;
	params.features = UCP_FEATURE_TAG;
	st = ucp_init(&params, NULL, &ctx);
	if (st != UCS_OK) {
		fprintf(stderr, "ucp_init: %s\n", ucs_status_string(st));
		return 1;
	}
	wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
	st = ucp_worker_create(ctx, &wparams, &worker);
	if (st != UCS_OK) {
		fprintf(stderr, "ucp_worker_create: %s\n", ucs_status_string(st));
		goto out_ctx;
	}

	ep_params.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
	ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
	ep_params.err_handler.cb = on_ep_error;
	if (server) {
		ucp_listener_params_t lp = {0};

		lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
				UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
		lp.sockaddr.addr = (const struct sockaddr *)&sin;
		lp.sockaddr.addrlen = sizeof sin;
		lp.conn_handler.cb = on_conn;
		st = ucp_listener_create(worker, &lp, &listener);
		if (st != UCS_OK) {
			fprintf(stderr, "ucp_listener_create: %s\n", ucs_status_string(st));
			goto out_worker;
		}
		printf("listening\n");
		fflush(stdout);
		while (conn_req == NULL)
			ucp_worker_progress(worker);
		ep_params.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
		ep_params.conn_request = conn_req;
	} else {
		ep_params.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
		ep_params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
		ep_params.sockaddr.addr = (const struct sockaddr *)&sin;
		ep_params.sockaddr.addrlen = sizeof sin;
	}
	st = ucp_ep_create(worker, &ep_params, &ep);
	if (st != UCS_OK) {
		fprintf(stderr, "ucp_ep_create: %s\n", ucs_status_string(st));
		goto out_listener;
	}

	if (server) {
		fill(want, 1);
		if (recv_msg(worker, got, TAG_REQ))
			goto out_ep;
		if (memcmp(got, want, MSG_LEN)) {
			fprintf(stderr, "server: the request's data differs\n");
			goto out_ep;
		}
		printf("server: request received intact\n");
		fill(want, 2);
		if (send_msg(worker, ep, want, TAG_REP))
			goto out_ep;
	} else {
		fill(want, 1);
		if (send_msg(worker, ep, want, TAG_REQ))
			goto out_ep;
		fill(want, 2);
		if (recv_msg(worker, got, TAG_REP))
			goto out_ep;
		if (memcmp(got, want, MSG_LEN)) {
			fprintf(stderr, "client: the reply's data differs\n");
			goto out_ep;
		}
		printf("client: reply received intact\n");
	}
	fflush(stdout);
	ucp_ep_print_info(ep, stdout);
	fflush(stdout);
	/* The client stays until the server has its reply on the wire: both
	 * ends exchange a last message before closing. */
	if (server) {
		if (recv_msg(worker, got, TAG_REQ))
			goto out_ep;
	} else {
		if (send_msg(worker, ep, want, TAG_REQ))
			goto out_ep;
	}
	ret = 0;
out_ep:
	if (close_ep(worker, ep))
		ret = 1;
out_listener:
	if (listener)
		ucp_listener_destroy(listener);
out_worker:
	ucp_worker_destroy(worker);
out_ctx:
	ucp_cleanup(ctx);
	if (ret == 0)
		printf("ok\n");
	return ret;
}
