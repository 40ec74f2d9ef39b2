/* What Open MPI's openib BTL asks before it uses a verbs device
 * (opal_common_verbs_check_basics): that ibv_get_sysfs_path()'s
 * class/infiniband is a directory. Then what it does next: lists the
 * devices and opens each, and reads a device's sysfs attribute through
 * its ibdev_path (served by the sim).
 *
 * Prints "sysfs PATH", "class/infiniband ok" or "class/infiniband
 * missing", then "device NAME board_id ID" per device. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <sys/stat.h>

#include "check.h"

/* infiniband/driver.h's, not installed by libibverbs-dev (Open MPI
 * declares the first one itself too). */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

int main(void)
{
	const char *sysfs = ibv_get_sysfs_path();
	CHECK(sysfs);
	printf("sysfs %s\n", sysfs);
	char path[4096];
	snprintf(path, sizeof(path), "%s/class/infiniband", sysfs);
	struct stat st;
	int ok = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	printf("class/infiniband %s\n", ok ? "ok" : "missing");
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n > 0);
	for (int i = 0; i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		CHECK(ctx);
		char board[64] = "";
		CHECK(ibv_read_sysfs_file(list[i]->ibdev_path, "board_id", board, sizeof(board)) > 0);
		printf("device %s board_id %s\n", ibv_get_device_name(list[i]), board);
		CHECK(ibv_close_device(ctx) == 0);
	}
	ibv_free_device_list(list);
	return 0;
}
