/* UD over RoCE v2 with the IPv4-mapped GID: what the receiver finds in
 * the 40 bytes before the payload (RoCE v2 over IPv4: 20 zero bytes and
 * the IPv4 header, the sender's traffic class as its TOS), and the
 * address vector ibv_init_ah_from_wc makes of it, which must reach the
 * sender back. */
#include "probe.h"

static struct ibv_qp *ud_qp(struct probe *p, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	struct ibv_qp *qp = ibv_create_qp(p->pd, &ia);
	NEED(qp);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x1111 };
	NEED(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	NEED(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	NEED(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
	return qp;
}

static int send_ud(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, struct ibv_mr *mr, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = 0x1111;
	return ibv_post_send(qp, &wr, &bad);
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct ibv_cq *scq = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	NEED(scq && rcq);
	struct ibv_qp *s = ud_qp(&p, scq), *r = ud_qp(&p, rcq);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dst = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge sge = { .addr = (uintptr_t)dst->addr, .length = 40 + 256, .lkey = dst->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *rbad;
	NEED(ibv_post_recv(r, &rwr, &rbad) == 0);
	struct ibv_ah_attr aa;
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.grh.dgid = p.gid;
	aa.grh.sgid_index = (uint8_t)p.gid_index;
	aa.grh.hop_limit = 64;
	aa.grh.traffic_class = 0x28;
	aa.port_num = 1;
	struct ibv_ah *ah = ibv_create_ah(p.pd, &aa);
	NEED(ah);
	NEED(send_ud(s, ah, r->qp_num, src, 100) == 0);
	say("send", next_status(scq, 5000));
	struct ibv_wc wc;
	NEED(poll_one(rcq, 5000, &wc));
	say("recv", wc_name(wc.status));
	say_int("recv.byte_len", wc.byte_len);
	say("recv.grh_flag", wc.wc_flags & IBV_WC_GRH ? "yes" : "no");
	/* mlx5 reports the RoCE packet type there (2: IPv4), UCX reads it. */
	say_int("recv.sl", wc.sl);
	say_int("recv.src_qp_is_sender", wc.src_qp == s->qp_num);
	const uint8_t *g = dst->addr;
	int zero = 1;
	for (int i = 0; i < 20; i++)
		zero &= g[i] == 0;
	say("grh.first_20_zero", zero ? "yes" : "no");
	say_hex("grh.ip_version_ihl", g[20]);
	say_hex("grh.tos", g[21]);
	say_int("grh.ttl", g[28]);
	say_int("grh.protocol", g[29]);

	struct ibv_ah_attr back;
	NEED(ibv_init_ah_from_wc(p.ctx, 1, &wc, (struct ibv_grh *)dst->addr, &back) == 0);
	say_int("reply_ah.is_global", back.is_global);
	say_int("reply_ah.sgid_index", back.grh.sgid_index);
	say_hex("reply_ah.traffic_class", back.grh.traffic_class);
	say_int("reply_ah.hop_limit", back.grh.hop_limit);
	say("reply_ah.dgid_is_own", memcmp(&back.grh.dgid, &p.gid, 16) == 0 ? "yes" : "no");
	struct ibv_ah *rah = ibv_create_ah(p.pd, &back);
	NEED(rah);
	sge.addr = (uintptr_t)dst->addr;
	NEED(ibv_post_recv(s, &rwr, &rbad) == 0);
	NEED(send_ud(r, rah, s->qp_num, src, 10) == 0);
	say("reply.send", next_status(rcq, 5000));
	say("reply.recv", next_status(scq, 5000));
	NEED(ibv_destroy_ah(rah) == 0);
	NEED(ibv_destroy_ah(ah) == 0);
	NEED(ibv_destroy_qp(s) == 0);
	NEED(ibv_destroy_qp(r) == 0);
	NEED(ibv_destroy_cq(scq) == 0);
	NEED(ibv_destroy_cq(rcq) == 0);
	mr_free(src);
	mr_free(dst);
	probe_close(&p);
	return 0;
}
