/* A program whose signal handler calls exit() while the process is already
 * exiting, as qperf's does: when the other side of its connection fails,
 * SIGURG runs a handler that prints the remote error and calls exit(1),
 * even when this side has failed too and is already inside exit().
 *
 *   exit_in_handler DIR
 *
 * Leaks its device list (what qperf leaks on a failed open), asks the kernel
 * (dnotify) to send SIGIO as soon as a file is created in DIR, and returns
 * 0 from main. The shim's exit report is the only thing that creates a file
 * in DIR, so the handler runs exactly while the report is being written,
 * and calls exit(1). Prints "ok" (flushed) before returning, and "handler"
 * (with write) from the handler. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static void on_sigio(int sig)
{
	(void)sig;
	static const char msg[] = "handler\n";
	if (write(1, msg, sizeof msg - 1) < 0) {
		/* Nothing to do about it: exiting anyway. */
	}
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: exit_in_handler DIR\n");
		return 2;
	}
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		printf("ibv_get_device_list: %s\n", strerror(errno));
		return 2;
	}
	/* The list is not freed: the one leak the shim must report. */

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigio;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGIO, &sa, NULL) != 0) {
		perror("sigaction");
		return 2;
	}
	int dir = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (dir < 0 || fcntl(dir, F_NOTIFY, DN_CREATE) != 0) {
		perror(argv[1]);
		return 2;
	}
	printf("ok\n");
	fflush(stdout);
	return 0;
}
