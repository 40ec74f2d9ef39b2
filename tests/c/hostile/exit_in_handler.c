/* A program whose signal handler calls exit() at a moment it does not
 * choose, as qperf's does: when the other side of its connection fails,
 * SIGURG runs a handler that prints the remote error and calls exit(1),
 * whatever the process is doing, even when it is already inside exit().
 *
 *   exit_in_handler report DIR   leak the device list, then ask the kernel
 *                                (dnotify) for SIGIO as soon as a file is
 *                                created in DIR, and return 0 from main.
 *                                The shim's exit report is the only thing
 *                                that creates a file there, so the handler
 *                                runs while the report is being written.
 *   exit_in_handler call DIR     ask for SIGIO as soon as a file in DIR is
 *                                read, then call ibv_get_device_list: with
 *                                DIR a sysfs directory the real library
 *                                reads, the handler runs inside that call.
 *
 * Prints "ok" (flushed) before returning from main, and "handler" (with
 * write) from the handler, which calls exit(1). */
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

static int notify(const char *path, unsigned long events)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigio;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGIO, &sa, NULL) != 0) {
		perror("sigaction");
		return -1;
	}
	int dir = open(path, O_RDONLY | O_DIRECTORY);
	if (dir < 0 || fcntl(dir, F_NOTIFY, events) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "report") && strcmp(argv[1], "call"))) {
		fprintf(stderr, "usage: exit_in_handler report|call DIR\n");
		return 2;
	}
	int during_call = !strcmp(argv[1], "call");
	if (during_call && notify(argv[2], DN_ACCESS) != 0)
		return 2;
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		printf("ibv_get_device_list: %s\n", strerror(errno));
		return 2;
	}
	/* The list is not freed: the one leak the shim must report. */
	if (!during_call && notify(argv[2], DN_CREATE) != 0)
		return 2;
	printf("ok\n");
	fflush(stdout);
	return 0;
}
