/* The prologue and epilogue of the C tests that work on one device (the
 * first of the list): opening it, a PD and a CQ, and closing them again.
 * Shared by tests/c/wholeapi and tests/c/objects; failures go through
 * CHECK (tests/c/sim/check.h), so the program exits at the failing line. */
#ifndef C_FIRST_DEVICE_H
#define C_FIRST_DEVICE_H
#include <infiniband/verbs.h>

#include "../sim/check.h"

/* A context on the first device; the list is freed at once (an open
 * context keeps its device), so nothing but the context is left. */
static inline struct ibv_context *open_first(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	ibv_free_device_list(list);
	return ctx;
}

/* The first device with a PD and a CQ; the list is kept until
 * close_first_device, which frees it last. */
struct first_device {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

/* Opens the first device, a PD and a CQ of cqe entries. */
static inline void open_first_device(struct first_device *d, int cqe)
{
	d->list = ibv_get_device_list(NULL);
	CHECK(d->list && d->list[0]);
	d->ctx = ibv_open_device(d->list[0]);
	CHECK(d->ctx);
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	CHECK(d->pd && d->cq);
}

/* Destroys the CQ and the PD (which must be free of other objects by now),
 * closes the context and frees the list. */
static inline void close_first_device(struct first_device *d)
{
	CHECK(ibv_destroy_cq(d->cq) == 0 && ibv_dealloc_pd(d->pd) == 0);
	CHECK(ibv_close_device(d->ctx) == 0);
	ibv_free_device_list(d->list);
}

#endif
