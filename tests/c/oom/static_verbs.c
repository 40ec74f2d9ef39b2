/*
 * A stand-in "real library" for the shim (IBV_SHIM_LIBRARY) that never
 * allocates: one device, contexts and PDs from static pools. With it a
 * test can take all of a process's memory and still have the verbs calls
 * succeed, so that only the shim's own behaviour out of memory is seen.
 * rdma-core's symbol versions come from static_verbs.map.
 */
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stddef.h>

#define POOL 8

static struct ibv_device device = { .name = "static0" };
static struct ibv_device *list[2] = { &device, NULL };
static struct ibv_context contexts[POOL];
static int context_used[POOL];
/* Enough PDs for "many" to outgrow the shim's emergency reserve; handed
 * out in order, never reused (each program allocates, then exits). */
#define PD_POOL 300000
static struct ibv_pd pds[PD_POOL];
static int pd_next;

struct ibv_device **ibv_get_device_list(int *num)
{
	if (num)
		*num = 1;
	return list;
}

void ibv_free_device_list(struct ibv_device **l)
{
	(void)l;
}

const char *ibv_get_device_name(struct ibv_device *dev)
{
	return dev->name;
}

__be64 ibv_get_device_guid(struct ibv_device *dev)
{
	(void)dev;
	return htobe64(0x0002c90300005678ull);
}

struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	for (int i = 0; i < POOL; i++) {
		if (!context_used[i]) {
			context_used[i] = 1;
			contexts[i].device = dev;
			return &contexts[i];
		}
	}
	errno = ENOMEM;
	return NULL;
}

int ibv_close_device(struct ibv_context *ctx)
{
	context_used[ctx - contexts] = 0;
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	if (pd_next == PD_POOL) {
		errno = ENOMEM;
		return NULL;
	}
	pds[pd_next].context = ctx;
	pds[pd_next].handle = pd_next + 1;
	return &pds[pd_next++];
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	(void)pd;
	return 0;
}
