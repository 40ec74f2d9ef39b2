/* A program that loads librdmacm by hand, as plugin hosts do: `by_hand`
 * dlopens librdmacm.so.1 (it is not linked to it), looks its functions up
 * with dlsym on that handle, makes an event channel and a cm_id and leaves
 * them, closes the handle and says whether the library is gone
 * ("unloaded yes|no", asked with RTLD_NOLOAD). Then it does it again with
 * a fresh dlopen, destroying what it made this time, to show the calls
 * still reach the library after it was unloaded and loaded again. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <rdma/rdma_cma.h>

#define DIE(...) do { printf("FAIL: "); printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)

typedef struct rdma_event_channel *(*create_channel_fn)(void);
typedef void (*destroy_channel_fn)(struct rdma_event_channel *);
typedef int (*create_id_fn)(struct rdma_event_channel *, struct rdma_cm_id **, void *,
			    enum rdma_port_space);
typedef int (*destroy_id_fn)(struct rdma_cm_id *);

static void *need(void *h, const char *name)
{
	void *f = dlsym(h, name);

	if (!f)
		DIE("dlsym %s: %s", name, dlerror());
	return f;
}

static void round_trip(int keep)
{
	void *h = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	create_channel_fn create_channel;
	destroy_channel_fn destroy_channel;
	create_id_fn create_id;
	destroy_id_fn destroy_id;

	if (!h)
		DIE("dlopen librdmacm.so.1: %s", dlerror());
	create_channel = (create_channel_fn)need(h, "rdma_create_event_channel");
	destroy_channel = (destroy_channel_fn)need(h, "rdma_destroy_event_channel");
	create_id = (create_id_fn)need(h, "rdma_create_id");
	destroy_id = (destroy_id_fn)need(h, "rdma_destroy_id");
	ch = create_channel();
	if (!ch)
		DIE("rdma_create_event_channel");
	if (create_id(ch, &id, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id");
	if (keep) {
		printf("left a channel and an id\n");
	} else {
		if (destroy_id(id))
			DIE("rdma_destroy_id");
		destroy_channel(ch);
		printf("destroyed a channel and an id\n");
	}
	if (dlclose(h))
		DIE("dlclose: %s", dlerror());
	h = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_NOLOAD);
	printf("unloaded %s\n", h ? "no" : "yes");
	if (h)
		dlclose(h);
}

int main(void)
{
	round_trip(1);
	round_trip(0);
	fflush(stdout);
	return 0;
}
