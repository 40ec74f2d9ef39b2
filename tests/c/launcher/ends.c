/* Uses verbs (opens the first device and allocates a PD it never frees),
 * then ends as argv[1] says:
 *   exit   returns from main;
 *   sleep  sleeps 60 s (to be killed by a wrapper such as timeout);
 *   kill   kills itself with SIGKILL;
 *   fork   forks a child that allocates a PD of its own; both return;
 *   handler  sets its own SIGTERM handler first (it _exits 9), then sleeps.
 * Prints "pid N" (and "child N") first. */
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void own_handler(int sig)
{
	(void)sig;
	_exit(9);
}

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "exit";
	struct ibv_device **list;
	struct ibv_context *ctx;

	if (!strcmp(how, "handler"))
		signal(SIGTERM, own_handler);
	list = ibv_get_device_list(NULL);

	if (!list || !list[0]) {
		fprintf(stderr, "no device\n");
		return 2;
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx || !ibv_alloc_pd(ctx)) {
		perror("ibv_open_device/ibv_alloc_pd");
		return 2;
	}
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	if (!strcmp(how, "sleep") || !strcmp(how, "handler")) {
		sleep(60);
	} else if (!strcmp(how, "kill")) {
		raise(SIGKILL);
	} else if (!strcmp(how, "fork")) {
		pid_t c = fork();
		int status;

		if (c < 0) {
			perror("fork");
			return 2;
		}
		if (c == 0) {
			if (!ibv_alloc_pd(ctx))
				return 3;
			printf("child %d\n", (int)getpid());
			return 0;
		}
		if (waitpid(c, &status, 0) != c || !WIFEXITED(status) || WEXITSTATUS(status))
			return 4;
	}
	return 0;
}
