/*
 * A stand-in "real library" for the shim (IBV_SHIM_LIBRARY), for what the
 * sim does not simulate: imported devices, PDs and MRs, and dma-buf MRs. It
 * has rdma-core's symbol versions (fake_verbs.map) but only these verbs,
 * so every other verb is "missing from an older library".
 */
#include <endian.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>

static struct ibv_device device = { .name = "fake0" };
static struct ibv_device *devices[] = { &device, NULL };

struct ibv_device **ibv_get_device_list(int *num)
{
	if (num)
		*num = 1;
	struct ibv_device **list = malloc(sizeof devices);
	memcpy(list, devices, sizeof devices);
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

__be64 ibv_get_device_guid(struct ibv_device *dev)
{
	(void)dev;
	return htobe64(0x0002c90300001234ull);
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct ibv_context *ctx = calloc(1, sizeof *ctx);
	ctx->device = &device;
	ctx->cmd_fd = cmd_fd;
	return ctx;
}

int ibv_close_device(struct ibv_context *ctx)
{
	free(ctx);
	return 0;
}

struct ibv_pd *ibv_import_pd(struct ibv_context *ctx, uint32_t handle)
{
	struct ibv_pd *pd = calloc(1, sizeof *pd);
	pd->context = ctx;
	pd->handle = handle;
	return pd;
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
	free(pd);
}

static struct ibv_mr *new_mr(struct ibv_pd *pd, uint32_t handle, uint64_t addr, size_t length)
{
	struct ibv_mr *mr = calloc(1, sizeof *mr);
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = (void *)(uintptr_t)addr;
	mr->length = length;
	mr->handle = handle;
	mr->lkey = mr->rkey = handle * 256;
	return mr;
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t handle)
{
	return new_mr(pd, handle, 0x100000 * handle, 8192);
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
	free(mr);
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
				 int access)
{
	(void)iova;
	(void)fd;
	(void)access;
	return new_mr(pd, 42, offset, length);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	free(mr);
	return 0;
}
