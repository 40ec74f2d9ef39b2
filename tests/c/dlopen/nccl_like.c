/*
 * nccl_like [DEVICE]: loads verbs the way NCCL does, with none of its code.
 *
 * Not linked to libibverbs and no verbs.h: dlopen() the candidates
 * "libibverbs.so" then "libibverbs.so.1" with RTLD_NOW, look every verb up
 * with dlvsym() at IBVERBS_1.1 (the completion channel at IBVERBS_1.0, where
 * it only exists), and the optional newer verbs at their own versions. Then
 * list the devices, open DEVICE (default: the first), allocate a PD,
 * register an MR, register and deregister a second MR with
 * ibv_reg_mr_iova2 when it exists, and close the device WITHOUT freeing the
 * PD and the first MR (a deliberate leak).
 *
 * Output, one fact a line (the test compares runs line by line):
 *
 *   dlopen NAME: ok | failed (dlerror)
 *   sym NAME@VERSION: FILE            required verb; FILE from dladdr()
 *   optional NAME@VERSION: FILE | absent
 *   devices: N
 *   device I: NAME
 *   open NAME: ok | NULL errno=E      (then "done": nothing to leak)
 *   alloc_pd: ok | NULL errno=E
 *   reg_mr: ok | NULL errno=E
 *   reg_mr_iova2: ok | NULL errno=E | absent
 *   dereg_mr iova2: RC
 *   close NAME: RC
 *   addr pd=0x.. mr=0x.. mr_iova2=0x..|none   (the leaked PD and MR, and the freed MR)
 *   object PATH                       every loaded object (dl_iterate_phdr)
 *   done
 *
 * Exit status: 0 when it ran to the end (a failed open is an outcome, not an
 * error), 1 when the library or a required verb is missing or a call that
 * must work on an opened device fails.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Opaque: this program never looks inside a verbs object. */
struct ibv_device;
struct ibv_context;
struct ibv_pd;
struct ibv_mr;

/* The values of enum ibv_access_flags (verbs.h), as NCCL copies them. */
#define ACCESS_LOCAL_WRITE 1
#define ACCESS_REMOTE_WRITE 2
#define ACCESS_REMOTE_READ 4

struct verb {
	const char *name;
	const char *version;
	int optional;
	void *fn;
};

static struct verb verbs[] = {
	{ "ibv_get_device_list", "IBVERBS_1.1", 0, NULL },
	{ "ibv_free_device_list", "IBVERBS_1.1", 0, NULL },
	{ "ibv_get_device_name", "IBVERBS_1.1", 0, NULL },
	{ "ibv_open_device", "IBVERBS_1.1", 0, NULL },
	{ "ibv_close_device", "IBVERBS_1.1", 0, NULL },
	{ "ibv_get_async_event", "IBVERBS_1.1", 0, NULL },
	{ "ibv_ack_async_event", "IBVERBS_1.1", 0, NULL },
	{ "ibv_query_device", "IBVERBS_1.1", 0, NULL },
	{ "ibv_query_port", "IBVERBS_1.1", 0, NULL },
	{ "ibv_query_gid", "IBVERBS_1.1", 0, NULL },
	{ "ibv_query_qp", "IBVERBS_1.1", 0, NULL },
	{ "ibv_alloc_pd", "IBVERBS_1.1", 0, NULL },
	{ "ibv_dealloc_pd", "IBVERBS_1.1", 0, NULL },
	{ "ibv_reg_mr", "IBVERBS_1.1", 0, NULL },
	{ "ibv_dereg_mr", "IBVERBS_1.1", 0, NULL },
	{ "ibv_create_cq", "IBVERBS_1.1", 0, NULL },
	{ "ibv_destroy_cq", "IBVERBS_1.1", 0, NULL },
	{ "ibv_create_qp", "IBVERBS_1.1", 0, NULL },
	{ "ibv_modify_qp", "IBVERBS_1.1", 0, NULL },
	{ "ibv_destroy_qp", "IBVERBS_1.1", 0, NULL },
	{ "ibv_fork_init", "IBVERBS_1.1", 0, NULL },
	{ "ibv_event_type_str", "IBVERBS_1.1", 0, NULL },
	{ "ibv_create_comp_channel", "IBVERBS_1.0", 0, NULL },
	{ "ibv_destroy_comp_channel", "IBVERBS_1.0", 0, NULL },
	{ "ibv_reg_mr_iova2", "IBVERBS_1.8", 1, NULL },
	{ "ibv_reg_dmabuf_mr", "IBVERBS_1.12", 1, NULL },
	{ "ibv_query_ece", "IBVERBS_1.10", 1, NULL },
	{ "ibv_set_ece", "IBVERBS_1.10", 1, NULL },
	{ "ibv_is_fork_initialized", "IBVERBS_1.13", 1, NULL },
};

#define NVERBS (sizeof(verbs) / sizeof(verbs[0]))

static void *verb(const char *name)
{
	size_t i;

	for (i = 0; i < NVERBS; i++)
		if (!strcmp(verbs[i].name, name))
			return verbs[i].fn;
	fprintf(stderr, "nccl_like: no table entry %s\n", name);
	exit(3);
}

static const char *file_of(const void *addr)
{
	Dl_info info;

	if (!dladdr(addr, &info) || !info.dli_fname)
		return "(dladdr failed)";
	return info.dli_fname;
}

static int print_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_name && info->dlpi_name[0])
		printf("object %s\n", info->dlpi_name);
	return 0;
}

static const char *err(void)
{
	const char *e = strerrorname_np(errno);

	return e ? e : "?";
}

static int finish(int status)
{
	dl_iterate_phdr(print_object, NULL);
	printf("done\n");
	return status;
}

int main(int argc, char **argv)
{
	static const char *candidates[] = { "libibverbs.so", "libibverbs.so.1" };
	struct ibv_device **(*get_list)(int *);
	void (*free_list)(struct ibv_device **);
	const char *(*get_name)(struct ibv_device *);
	struct ibv_context *(*open_dev)(struct ibv_device *);
	int (*close_dev)(struct ibv_context *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *, void *, size_t, unsigned long long, unsigned int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr, *mr2 = NULL;
	void *lib = NULL;
	size_t i;
	int n = -1, status = 0, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && !lib; i++) {
		lib = dlopen(candidates[i], RTLD_NOW);
		if (lib)
			printf("dlopen %s: ok\n", candidates[i]);
		else
			printf("dlopen %s: failed (%s)\n", candidates[i], dlerror());
	}
	if (!lib)
		return finish(1);

	for (i = 0; i < NVERBS; i++) {
		struct verb *v = &verbs[i];

		v->fn = dlvsym(lib, v->name, v->version);
		if (v->fn) {
			printf("%s %s@%s: %s\n", v->optional ? "optional" : "sym", v->name, v->version,
			       file_of(v->fn));
		} else if (v->optional) {
			printf("optional %s@%s: absent\n", v->name, v->version);
		} else {
			printf("sym %s@%s: MISSING (%s)\n", v->name, v->version, dlerror());
			status = 1;
		}
	}
	if (status)
		return finish(status);

	*(void **)&get_list = verb("ibv_get_device_list");
	*(void **)&free_list = verb("ibv_free_device_list");
	*(void **)&get_name = verb("ibv_get_device_name");
	*(void **)&open_dev = verb("ibv_open_device");
	*(void **)&close_dev = verb("ibv_close_device");
	*(void **)&alloc_pd = verb("ibv_alloc_pd");
	*(void **)&reg_mr = verb("ibv_reg_mr");
	*(void **)&reg_mr_iova2 = verb("ibv_reg_mr_iova2");
	*(void **)&dereg_mr = verb("ibv_dereg_mr");

	errno = 0;
	list = get_list(&n);
	if (!list) {
		printf("devices: NULL errno=%s\n", err());
		return finish(1);
	}
	printf("devices: %d\n", n);
	for (i = 0; i < (size_t)n; i++) {
		const char *name = get_name(list[i]);

		printf("device %zu: %s\n", i, name ? name : "(NULL)");
		if (!dev && (argc < 2 || (name && !strcmp(name, argv[1]))))
			dev = list[i];
	}
	if (!dev) {
		printf("open: no such device\n");
		free_list(list);
		return finish(1);
	}

	errno = 0;
	ctx = open_dev(dev);
	if (!ctx) {
		printf("open %s: NULL errno=%s\n", get_name(dev), err());
		free_list(list);
		return finish(0);
	}
	printf("open %s: ok\n", get_name(dev));

	errno = 0;
	pd = alloc_pd(ctx);
	if (!pd) {
		printf("alloc_pd: NULL errno=%s\n", err());
		close_dev(ctx);
		free_list(list);
		return finish(1);
	}
	printf("alloc_pd: ok\n");

	/* Never freed: the MR, like the PD, outlives the context. */
	static char buf[2][4096];
	errno = 0;
	mr = reg_mr(pd, buf[0], sizeof(buf[0]), ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ);
	if (!mr) {
		printf("reg_mr: NULL errno=%s\n", err());
		status = 1;
	} else {
		printf("reg_mr: ok\n");
	}

	if (!reg_mr_iova2) {
		printf("reg_mr_iova2: absent\n");
	} else {
		errno = 0;
		mr2 = reg_mr_iova2(pd, buf[1], sizeof(buf[1]), (unsigned long long)(uintptr_t)buf[1],
				   ACCESS_LOCAL_WRITE);
		if (!mr2) {
			printf("reg_mr_iova2: NULL errno=%s\n", err());
			status = 1;
		} else {
			printf("reg_mr_iova2: ok\n");
			rc = dereg_mr(mr2);
			printf("dereg_mr iova2: %d\n", rc);
			if (rc)
				status = 1;
		}
	}

	rc = close_dev(ctx);
	printf("close %s: %d\n", get_name(dev), rc);
	if (rc)
		status = 1;
	printf("addr pd=%p mr=%p mr_iova2=%p\n", (void *)pd, (void *)mr, (void *)mr2);
	free_list(list);
	return finish(status);
}
