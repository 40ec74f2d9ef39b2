/*
 * Compiled (never run) by tests/layout.rs against include/infiniband/verbs.h
 * as C11, GNU99 and C++ with -Wall -Wextra -Werror: the device API as the
 * seed document uses it, the inline data-path verbs, and member access
 * through the types C declares anonymously. Including the header twice
 * checks its include guard.
 */
#include <stdio.h>
#include <infiniband/verbs.h>
#include <infiniband/verbs.h>

/*
 * Members of anonymous unions, named as C code names them, and a few of the
 * inline verbs and macros rdma-core's header has besides the data path.
 */
static unsigned long anonymous_members(struct ibv_wc *wc, struct ibv_send_wr *wr,
				       struct ibv_flow_spec *spec)
{
	unsigned long sum = wc->invalidated_rkey + wc->imm_data;

	sum += wr->invalidate_rkey + wr->imm_data;
	sum += wr->bind_mw.rkey + wr->bind_mw.bind_info.length + wr->tso.mss;
	sum += spec->hdr.size + spec->eth.val.ether_type + spec->ipv4.mask.dst_ip;
	sum += ibv_inc_rkey(wr->bind_mw.rkey) + ibv_flow_label_to_udp_sport(7);
	sum += (unsigned long)ibv_wc_status_str(IBV_WC_SUCCESS)[0];
	if (verbs_get_ctx_op(wr->bind_mw.mw->context, create_qp_ex))
		sum++;
	return sum;
}

static int data_path(struct ibv_cq *cq, struct ibv_qp *qp, struct ibv_srq *srq,
		     struct ibv_mr *mr, struct ibv_ah *ah)
{
	struct ibv_sge sge;
	struct ibv_send_wr swr, *bad_swr = NULL;
	struct ibv_recv_wr rwr, *bad_rwr = NULL;
	struct ibv_wc wc;
	int n;

	memset(&sge, 0, sizeof(sge));
	sge.addr = (uintptr_t)mr->addr;
	sge.length = (uint32_t)mr->length;
	sge.lkey = mr->lkey;

	memset(&swr, 0, sizeof(swr));
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	swr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	swr.imm_data = 0x01000000;
	swr.wr.rdma.remote_addr = 4096;
	swr.wr.rdma.rkey = mr->rkey;
	swr.wr.atomic.compare_add = 1;
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qkey = 0x11111111;
	swr.qp_type.xrc.remote_srqn = 7;

	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = &sge;
	rwr.num_sge = 1;

	if (ibv_post_send(qp, &swr, &bad_swr) || ibv_post_recv(qp, &rwr, &bad_rwr) ||
	    ibv_post_srq_recv(srq, &rwr, &bad_rwr) || ibv_req_notify_cq(cq, 0))
		return -1;

	n = ibv_poll_cq(cq, 1, &wc);
	if (n > 0 && wc.status == IBV_WC_SUCCESS && (wc.opcode & IBV_WC_RECV) &&
	    (wc.wc_flags & IBV_WC_WITH_IMM))
		return (int)wc.imm_data;
	return n;
}

static void attributes(struct ibv_port_attr *port, struct ibv_device_attr *dev,
		       struct ibv_qp_attr *qp_attr, struct ibv_async_event *event)
{
	union ibv_gid gid;

	memset(&gid, 0, sizeof(gid));
	gid.global.subnet_prefix = dev->node_guid;
	gid.raw[15] = dev->phys_port_cnt;
	qp_attr->qp_state = IBV_QPS_RTR;
	qp_attr->path_mtu = port->active_mtu;
	qp_attr->ah_attr.grh.dgid = gid;
	qp_attr->ah_attr.is_global = port->link_layer == IBV_LINK_LAYER_ETHERNET;
	qp_attr->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	if (event->event_type == IBV_EVENT_PORT_ACTIVE)
		qp_attr->port_num = (uint8_t)event->element.port_num;
}

int main(void)
{
	struct ibv_device **list;
	int num = 0;
	int i;

	list = ibv_get_device_list(&num);
	if (!list)
		return 1;
	for (i = 0; i < num; i++) {
		struct ibv_context *ctx;
		__be64 guid = ibv_get_device_guid(list[i]);

		printf("%s %016llx\n", ibv_get_device_name(list[i]), (unsigned long long)guid);
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			continue;
		printf("opened %s (%d)\n", ibv_get_device_name(ctx->device),
		       (int)ctx->device->node_type);
		{
			/* The real header's macro form, with the new port_attr. */
			struct ibv_port_attr port;

			if (ibv_query_port(ctx, 1, &port) == 0)
				printf("port 1: state %d, lid %u\n", (int)port.state, port.lid);
		}
		if (ibv_close_device(ctx))
			return 1;
	}
	ibv_free_device_list(list);

	/* Only taken so the static functions count as used. */
	if (num < 0) {
		attributes(NULL, NULL, NULL, NULL);
		anonymous_members(NULL, NULL, NULL);
		return data_path(NULL, NULL, NULL, NULL, NULL);
	}
	return 0;
}
