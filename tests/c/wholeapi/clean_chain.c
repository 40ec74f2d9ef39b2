/* The data-path checks' clean path (src/exports/interpose/clean.rs) hands
 * over to the full checks in the middle of a chain, and remembers what it
 * vouched for. Run under the shim with IBV_SHIM_CHECK=datapath:
 *
 *   clean_chain
 *
 * 1. Pair (a, b): clean RDMA WRITEs (caps asked, lkey cached: the clean
 *    path takes the next posts), then a clean WRITE to a bad rkey, wr_id
 *    0x201: its error completion is explained with the WR as posted.
 * 2. Pair (c, d): clean WRITEs, then one chain of three WRITEs whose last,
 *    wr_id 0x103, runs past the end of its MR: reported once, for 0x103
 *    only.
 * 3. On d: a clean receive, then a chain of two receives whose second,
 *    wr_id 0x302, has an lkey no MR has: reported, for 0x302 only. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "rc_pair.h" /* tests/c/objects: two connected RC QPs */

#define SITE __attribute__((noipa))

static void warm(struct side *s, struct side *peer)
{
	for (int i = 0; i < 3; i++) {
		CHECK(post_rdma(s, IBV_WR_RDMA_WRITE, 0x10 + i, s->buf, 64, s->mr->lkey,
				(uintptr_t)peer->buf, peer->mr->rkey) == 0);
		CHECK(poll_one(s->cq).status == IBV_WC_SUCCESS);
	}
}

SITE static int write_bad_rkey(struct side *s, struct side *peer)
{
	return post_rdma(s, IBV_WR_RDMA_WRITE, 0x201, s->buf, 64, s->mr->lkey, (uintptr_t)peer->buf,
			 peer->mr->rkey ^ 0x5a5a00);
}

SITE static int write_chain(struct side *s, struct side *peer)
{
	struct ibv_sge sge[3];
	struct ibv_send_wr wr[3], *bad = NULL;
	for (int i = 0; i < 3; i++) {
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)&s->buf[i * 8], .length = 64,
					   .lkey = s->mr->lkey };
		wr[i] = (struct ibv_send_wr){ .wr_id = 0x101 + i, .sg_list = &sge[i], .num_sge = 1,
					      .opcode = IBV_WR_RDMA_WRITE,
					      .send_flags = IBV_SEND_SIGNALED,
					      .next = i < 2 ? &wr[i + 1] : NULL };
		wr[i].wr.rdma.remote_addr = (uintptr_t)peer->buf;
		wr[i].wr.rdma.rkey = peer->mr->rkey;
	}
	/* The last one: its 64 bytes start 16 before the end of the buffer. */
	sge[2].addr = (uintptr_t)s->buf + sizeof(s->buf) - 16;
	return ibv_post_send(s->qp, &wr[0], &bad);
}

SITE static int recv_chain(struct side *s)
{
	struct ibv_sge sge[2] = {
		{ .addr = (uintptr_t)s->buf, .length = 64, .lkey = s->mr->lkey },
		{ .addr = (uintptr_t)&s->buf[8], .length = 64, .lkey = s->mr->lkey ^ 0x777000 },
	};
	struct ibv_recv_wr wr[2] = {
		{ .wr_id = 0x301, .sg_list = &sge[0], .num_sge = 1, .next = &wr[1] },
		{ .wr_id = 0x302, .sg_list = &sge[1], .num_sge = 1 },
	}, *bad = NULL;
	return ibv_post_recv(s->qp, &wr[0], &bad);
}

int main(void)
{
	static struct side a, b, c, d;
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	setup(&a, list[0], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	setup(&b, list[1], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	connect_rc(&a, &b);
	connect_rc(&b, &a);
	warm(&a, &b);
	CHECK(write_bad_rkey(&a, &b) == 0);
	struct ibv_wc wc = poll_one(a.cq);
	printf("bad rkey: wr_id=%#llx status=%s\n", (unsigned long long)wc.wr_id,
	       ibv_wc_status_str(wc.status));

	setup(&c, list[0], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	setup(&d, list[1], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	connect_rc(&c, &d);
	connect_rc(&d, &c);
	warm(&c, &d);
	printf("chain rc %d\n", write_chain(&c, &d));
	post_recv(&d, 0x300, d.buf, 64);
	printf("recv chain rc %d\n", recv_chain(&d));
	printf("clean_chain done\n");
	return 0;
}
