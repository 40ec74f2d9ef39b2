/* A verbs program that does what programs do to the files around it.
 *
 *   hostile leak           open the first device, allocate a PD, close the
 *                          device (the shim warns: an orphan), exit 0
 *   hostile chdir DIR      the same, then chdir(DIR) before exit
 *   hostile reopen2 FILE   close fd 2 and open FILE (which gets fd 2),
 *                          then the same
 *   hostile daemon FILE    list the devices (so the shim's log is open),
 *                          close every descriptor, pause, open /dev/null as 0, 1
 *                          and 2, then FILE on every other number up to
 *                          1023, then the same
 *
 * In the last two, FILE is the program's own: it writes one line to it and
 * nothing else may appear there. Prints "ok" on stdout at the end (when
 * stdout is still the caller's). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static int leak(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list || n == 0) {
		printf("no devices: %s\n", strerror(errno));
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx) {
		printf("ibv_open_device: %s\n", strerror(errno));
		ibv_free_device_list(list);
		return 1;
	}
	if (!ibv_alloc_pd(ctx)) {
		printf("ibv_alloc_pd: %s\n", strerror(errno));
		return 1;
	}
	/* The PD is left behind: the shim reports it at close and at exit. */
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}

static int own_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0) {
		perror(path);
		exit(2);
	}
	const char line[] = "the program's own line\n";
	if (write(fd, line, sizeof line - 1) != (ssize_t)(sizeof line - 1))
		exit(2);
	return fd;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "leak";

	if (!strcmp(mode, "reopen2") && argc > 2) {
		close(2);
		if (own_file(argv[2]) != 2) {
			printf("FILE did not get fd 2\n");
			return 2;
		}
	} else if (!strcmp(mode, "daemon") && argc > 2) {
		/* A verbs call first, so the shim has its log open already. */
		struct ibv_device **list = ibv_get_device_list(NULL);
		if (list)
			ibv_free_device_list(list);
		for (int fd = 0; fd < 1024; fd++)
			close(fd);
		/* A daemon's pause between closing and opening: long enough for
		 * the shim's log writer thread to find its log gone while the
		 * lines of the calls above are still queued. It must not reopen
		 * the log then (it would take fd 0). */
		usleep(20000);
		for (int fd = 0; fd < 3; fd++)
			if (open("/dev/null", O_RDWR) != fd)
				return 2;
		int f = own_file(argv[2]);
		for (int fd = 3; fd < 1024; fd++)
			if (fd != f)
				dup2(f, fd);
	} else if (strcmp(mode, "leak") && strcmp(mode, "chdir")) {
		fprintf(stderr, "usage: hostile leak|chdir DIR|reopen2 FILE|daemon FILE\n");
		return 2;
	}
	int r = leak();
	if (!strcmp(mode, "chdir") && argc > 2 && chdir(argv[2]) != 0) {
		perror(argv[2]);
		return 2;
	}
	if (r == 0)
		printf("ok\n");
	return r;
}
