/* A device's object limit counts every process's objects, as the kernel
 * counts them: a child process holds half of max_ah address handles, the
 * parent gets the rest and no more; when the child dies holding its own,
 * they are freed with it and the parent can create again. */
#include <signal.h>
#include <sys/wait.h>

#include "probe.h"

static struct ibv_ah_attr ah_attr(struct probe *p)
{
	struct ibv_ah_attr aa;
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.grh.dgid = p->gid;
	aa.grh.sgid_index = (uint8_t)p->gid_index;
	aa.grh.hop_limit = 64;
	aa.port_num = 1;
	return aa;
}

int main(void)
{
	int ready[2], done[2];
	NEED(pipe(ready) == 0 && pipe(done) == 0);
	pid_t child = fork();
	NEED(child >= 0);
	if (child == 0) {
		struct probe p;
		probe_open(&p);
		struct ibv_device_attr da;
		NEED(ibv_query_device(p.ctx, &da) == 0);
		struct ibv_ah_attr aa = ah_attr(&p);
		char ok = 'y';
		for (int i = 0; i < da.max_ah / 2; i++)
			if (!ibv_create_ah(p.pd, &aa))
				ok = 'n';
		NEED(write(ready[1], &ok, 1) == 1);
		char c;
		(void)!read(done[0], &c, 1);
		/* Dies holding its address handles, its context open. */
		_exit(0);
	}
	char ok = 0;
	NEED(read(ready[0], &ok, 1) == 1);
	say("child_created_half", ok == 'y' ? "yes" : "no");

	struct probe p;
	probe_open(&p);
	struct ibv_device_attr da;
	NEED(ibv_query_device(p.ctx, &da) == 0);
	NEED(da.max_ah > 0 && da.max_ah < (1 << 20));
	int cap = da.max_ah + 1;
	struct ibv_ah **ahs = calloc((size_t)cap, sizeof(*ahs));
	NEED(ahs);
	struct ibv_ah_attr aa = ah_attr(&p);
	int n = 0, err = 0;
	for (; n < cap; n++) {
		errno = 0;
		ahs[n] = ibv_create_ah(p.pd, &aa);
		if (!ahs[n]) {
			err = errno;
			break;
		}
	}
	say("parent_got_the_rest", n == da.max_ah - da.max_ah / 2 ? "yes" : "no");
	say("ah_past_max_across_processes", n == cap ? "created" : errno_name(err));

	NEED(write(done[1], "x", 1) == 1);
	int status = 0;
	NEED(waitpid(child, &status, 0) == child);
	errno = 0;
	struct ibv_ah *more = ibv_create_ah(p.pd, &aa);
	say("ah_after_the_child_died", more ? "created" : errno_name(errno));
	if (more)
		NEED(ibv_destroy_ah(more) == 0);
	for (int i = 0; i < n; i++)
		NEED(ibv_destroy_ah(ahs[i]) == 0);
	free(ahs);
	probe_close(&p);
	return 0;
}
