/* A fault rule for a verb the program first called before the shim was
 * set up: built twice. With -DEARLY_LIB, a library whose constructor
 * allocates and frees a PD (it runs before the preloaded shim's, which
 * is no dependency of it); without, the program linked to it, which then
 * allocates a PD once and prints "pd ok" or "pd fail ERRNO". */
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdio.h>

static int with_pd(int *err)
{
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
    int ok = -1;
    if (ctx) {
        errno = 0;
        struct ibv_pd *pd = ibv_alloc_pd(ctx);
        *err = errno;
        ok = pd != NULL;
        if (pd)
            ibv_dealloc_pd(pd);
        ibv_close_device(ctx);
    }
    if (list)
        ibv_free_device_list(list);
    return ok;
}

#ifdef EARLY_LIB
__attribute__((constructor)) static void early(void)
{
    int err;
    printf("early %s\n", with_pd(&err) == 1 ? "ok" : "fail");
}
#else
int main(void)
{
    int err = 0;
    int ok = with_pd(&err);
    if (ok < 0) {
        printf("no device\n");
        return 1;
    }
    if (ok)
        printf("pd ok\n");
    else
        printf("pd fail %d\n", err);
    return 0;
}
#endif
