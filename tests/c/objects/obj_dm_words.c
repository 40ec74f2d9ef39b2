/* Device memory as mlx5 has it (pyverbs' test_dm_write_bad_flow,
 * test_dm_bad_access, test_create_dm_mr): copies move whole 32-bit words,
 * so an offset or length that is not a multiple of 4 is EINVAL (a range
 * past the end is EFAULT first), and an MR on device memory may be empty. */
#include <infiniband/verbs.h>

#include "check.h"

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(ctx && pd);
	struct ibv_alloc_dm_attr da = { .length = 100 };
	struct ibv_dm *dm = ibv_alloc_dm(ctx, &da);
	CHECK(dm);
	char in[16] = "device memory", out[16] = { 0 };

	CHECK(ibv_memcpy_to_dm(dm, 4, in, 16) == 0);
	CHECK(ibv_memcpy_from_dm(out, dm, 4, 16) == 0 && strcmp(out, "device memory") == 0);
	CHECK(ibv_memcpy_to_dm(dm, 0, in, 0) == 0);
	/* Unaligned offset, unaligned length, each way. */
	CHECK(ibv_memcpy_to_dm(dm, 3, in, 4) == EINVAL);
	CHECK(ibv_memcpy_from_dm(out, dm, 3, 4) == EINVAL);
	CHECK(ibv_memcpy_to_dm(dm, 4, in, 3) == EINVAL);
	CHECK(ibv_memcpy_from_dm(out, dm, 4, 3) == EINVAL);
	/* Outside the DM: EFAULT, checked before the alignment. */
	CHECK(ibv_memcpy_to_dm(dm, 104, in, 4) == EFAULT);
	CHECK(ibv_memcpy_from_dm(out, dm, 0, 104) == EFAULT);
	CHECK(ibv_memcpy_from_dm(out, dm, 99, 3) == EFAULT);

	/* An empty MR on it (at its start and at its end), and a full one;
	 * one byte past the end is still refused. */
	const unsigned acc = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE;
	struct ibv_mr *empty = ibv_reg_dm_mr(pd, dm, 0, 0, acc);
	CHECK(empty && empty->length == 0);
	struct ibv_mr *end = ibv_reg_dm_mr(pd, dm, 100, 0, acc);
	CHECK(end);
	struct ibv_mr *full = ibv_reg_dm_mr(pd, dm, 0, 100, acc);
	CHECK(full);
	CHECK_ERRNO(ibv_reg_dm_mr(pd, dm, 0, 101, acc), EINVAL);
	CHECK(ibv_free_dm(dm) == EBUSY);
	CHECK(ibv_dereg_mr(empty) == 0 && ibv_dereg_mr(end) == 0 && ibv_dereg_mr(full) == 0);
	CHECK(ibv_free_dm(dm) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0);
	DONE("obj_dm_words");
}
