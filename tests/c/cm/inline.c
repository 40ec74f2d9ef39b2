/* rdma_verbs.h's inline helpers over synchronous endpoints, two processes:
 * `inline server PORT` and `inline client PORT`. The client sends a
 * message (rdma_post_send), the server answers it and offers a buffer;
 * the client RDMA-writes into it and reads it back (rdma_post_write,
 * rdma_post_read), each completion taken with rdma_get_send_comp /
 * rdma_get_recv_comp. Also: rdma_getaddrinfo, rdma_get_devices,
 * rdma_set_option, rdma_init_qp_attr, rdma_get_src_port / dst_port.
 * Prints "ok" and exits 0 when every step did what it should. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define DIE(what) do { printf("FAIL %s (errno %d)\n", what, errno); exit(1); } while (0)

struct offer {
	uint64_t addr;
	uint32_t rkey;
};

static void check_qp_attr(struct rdma_cm_id *id)
{
	struct ibv_qp_attr attr;
	int mask = 0;

	memset(&attr, 0, sizeof attr);
	attr.qp_state = IBV_QPS_RTS;
	if (rdma_init_qp_attr(id, &attr, &mask))
		DIE("rdma_init_qp_attr");
	if (!(mask & IBV_QP_SQ_PSN) || !(mask & IBV_QP_STATE))
		DIE("rdma_init_qp_attr's mask");
}

static int server(const char *port)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *listen_id, *id;
	struct ibv_qp_init_attr attr;
	struct ibv_mr *mr, *win_mr;
	struct ibv_wc wc;
	char msg[16], win[64];
	struct offer o;

	memset(&hints, 0, sizeof hints);
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo("127.0.0.1", port, &hints, &res))
		DIE("rdma_getaddrinfo");
	memset(&attr, 0, sizeof attr);
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	attr.sq_sig_all = 1;
	if (rdma_create_ep(&listen_id, res, NULL, &attr))
		DIE("rdma_create_ep");
	rdma_freeaddrinfo(res);
	if (rdma_listen(listen_id, 1))
		DIE("rdma_listen");
	printf("listening\n");
	fflush(stdout);
	if (rdma_get_request(listen_id, &id))
		DIE("rdma_get_request");
	if (!id->qp || !id->pd)
		DIE("the request's id has its QP");
	mr = rdma_reg_msgs(id, msg, sizeof msg);
	/* The client writes into it and reads it back. */
	win_mr = ibv_reg_mr(id->pd, win, sizeof win,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr || !win_mr)
		DIE("rdma_reg_msgs");
	memset(win, 0, sizeof win);
	if (rdma_post_recv(id, NULL, msg, sizeof msg, mr))
		DIE("rdma_post_recv");
	if (rdma_accept(id, NULL))
		DIE("rdma_accept");
	check_qp_attr(id);
	if (rdma_get_recv_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS || strcmp(msg, "hello"))
		DIE("the client's message");
	o.addr = (uintptr_t)win;
	o.rkey = win_mr->rkey;
	memcpy(msg, &o, sizeof o);
	if (rdma_post_send(id, NULL, msg, sizeof o, mr, 0))
		DIE("rdma_post_send");
	if (rdma_get_send_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
		DIE("the send's completion");
	/* The client writes, reads back, then sends "done". */
	if (rdma_post_recv(id, NULL, msg, sizeof msg, mr))
		DIE("rdma_post_recv 2");
	if (rdma_get_recv_comp(id, &wc) != 1 || strcmp(msg, "done"))
		DIE("done");
	if (strcmp(win, "written by the client"))
		DIE("the RDMA write's data");
	printf("window: %s\n", win);
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_dereg_mr(win_mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen_id);
	printf("ok\n");
	return 0;
}

static int client(const char *port)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr attr;
	struct ibv_mr *mr, *buf_mr;
	struct ibv_wc wc;
	struct ibv_context **devs;
	char msg[16], buf[64], back[64];
	struct offer o;
	uint8_t tos = 0;
	int n = 0;

	devs = rdma_get_devices(&n);
	if (!devs || n < 1 || devs[n] != NULL)
		DIE("rdma_get_devices");
	rdma_free_devices(devs);
	memset(&hints, 0, sizeof hints);
	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo("127.0.0.1", port, &hints, &res))
		DIE("rdma_getaddrinfo");
	if (res->ai_dst_addr == NULL || res->ai_qp_type != IBV_QPT_RC)
		DIE("rdma_getaddrinfo's result");
	memset(&attr, 0, sizeof attr);
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	attr.sq_sig_all = 1;
	if (rdma_create_ep(&id, res, NULL, &attr))
		DIE("rdma_create_ep");
	rdma_freeaddrinfo(res);
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos))
		DIE("rdma_set_option");
	mr = rdma_reg_msgs(id, msg, sizeof msg);
	buf_mr = rdma_reg_read(id, buf, sizeof buf);
	if (!mr || !buf_mr || !rdma_reg_write(id, back, sizeof back))
		DIE("rdma_reg_*");
	if (rdma_post_recv(id, NULL, msg, sizeof msg, mr))
		DIE("rdma_post_recv");
	if (rdma_connect(id, NULL))
		DIE("rdma_connect");
	if (ntohs(rdma_get_dst_port(id)) != atoi(port) || rdma_get_src_port(id) == 0)
		DIE("the ports");
	strcpy(msg + 0, "hello");
	{
		char out[16];
		struct ibv_mr *omr = rdma_reg_msgs(id, out, sizeof out);

		strcpy(out, "hello");
		if (!omr || rdma_post_send(id, NULL, out, 6, omr, 0))
			DIE("rdma_post_send");
		if (rdma_get_send_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
			DIE("the send's completion");
		if (rdma_get_recv_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
			DIE("the server's offer");
		memcpy(&o, msg, sizeof o);
		memset(buf, 0, sizeof buf);
		strcpy(buf, "written by the client");
		if (rdma_post_write(id, NULL, buf, sizeof buf, buf_mr, 0, o.addr, o.rkey))
			DIE("rdma_post_write");
		if (rdma_get_send_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
			DIE("the write's completion");
		memset(back, 0, sizeof back);
		{
			struct ibv_mr *bmr = rdma_reg_write(id, back, sizeof back);

			if (!bmr || rdma_post_read(id, NULL, back, sizeof back, bmr, 0, o.addr, o.rkey))
				DIE("rdma_post_read");
			if (rdma_get_send_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
				DIE("the read's completion");
			rdma_dereg_mr(bmr);
		}
		if (strcmp(back, "written by the client"))
			DIE("the RDMA read's data");
		printf("read back: %s\n", back);
		strcpy(out, "done");
		if (rdma_post_send(id, NULL, out, 5, omr, 0) || rdma_get_send_comp(id, &wc) != 1)
			DIE("done");
		rdma_dereg_mr(omr);
	}
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_dereg_mr(buf_mr);
	rdma_destroy_ep(id);
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 3)
		return 2;
	return !strcmp(argv[1], "server") ? server(argv[2]) : client(argv[2]);
}
