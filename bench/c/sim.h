/* Set-up shared by the programs that run on the sim: open a device, the
 * create/destroy pairs of figure 2, and the same pairs through the sim's
 * own functions (bypassing the shim). */
#ifndef IBV_BENCH_SIM_H
#define IBV_BENCH_SIM_H

#include "bench.h" /* first: defines _GNU_SOURCE */

#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <link.h>
#include <stdint.h>

/* Opens device `index` (modulo the number of devices). */
static struct ibv_context *open_nth(int index)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n == 0)
        die("no devices (is the sim in place?)");
    struct ibv_context *ctx = ibv_open_device(list[index % n]);
    if (!ctx)
        die("ibv_open_device(%s)", ibv_get_device_name(list[index % n]));
    ibv_free_device_list(list);
    return ctx;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type)
{
    struct ibv_qp_init_attr a = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = type,
        .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
                 .max_recv_sge = 1, .max_inline_data = 64 },
    };
    return ibv_create_qp(pd, &a);
}

/* One create + destroy of `kind` on `ctx`/`pd` (with `cq` for QPs). */
enum pair_kind { PAIR_PD, PAIR_MR, PAIR_CQ, PAIR_QP, PAIR_KINDS };
static const char *const pair_names[PAIR_KINDS] = { "pd", "mr", "cq", "qp" };

static inline void one_pair(enum pair_kind k, struct ibv_context *ctx, struct ibv_pd *pd,
                            struct ibv_cq *cq, void *buf)
{
    switch (k) {
    case PAIR_PD: {
        struct ibv_pd *p = ibv_alloc_pd(ctx);
        if (!p || ibv_dealloc_pd(p))
            die("ibv_alloc_pd/ibv_dealloc_pd");
        break;
    }
    case PAIR_MR: {
        /* Constant access flags: the exported ibv_reg_mr, not _iova2. */
        struct ibv_mr *m = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
        if (!m || ibv_dereg_mr(m))
            die("ibv_reg_mr/ibv_dereg_mr");
        break;
    }
    case PAIR_CQ: {
        struct ibv_cq *c = ibv_create_cq(ctx, 16, NULL, NULL, 0);
        if (!c || ibv_destroy_cq(c))
            die("ibv_create_cq/ibv_destroy_cq");
        break;
    }
    default: {
        struct ibv_qp *q = make_qp(pd, cq, IBV_QPT_RC);
        if (!q || ibv_destroy_qp(q))
            die("ibv_create_qp/ibv_destroy_qp");
        break;
    }
    }
}

/* The sim's own functions, bypassing the shim (for same-process A/B
 * comparisons): the programs' symbols resolve to the shim when it is
 * preloaded; these pointers come from dlvsym on the loaded libibverbs.so.1
 * that is not the shim, found in the loader's list of objects (the shim
 * hooks dlopen, so glibc's own dlopen opens it, without loading anything). */
struct real {
    struct ibv_pd *(*alloc_pd)(struct ibv_context *);
    int (*dealloc_pd)(struct ibv_pd *);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
    int (*dereg_mr)(struct ibv_mr *);
    struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
    int (*destroy_cq)(struct ibv_cq *);
    struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
    int (*destroy_qp)(struct ibv_qp *);
};

static inline void *real_sym(void *h, const char *name)
{
    void *p = dlvsym(h, name, "IBVERBS_1.1");
    if (!p)
        die("dlvsym(%s@IBVERBS_1.1): %s", name, dlerror());
    return p;
}

static inline void resolve_real(struct real *r)
{
    /* The program's dlopen is the shim's hook: take glibc's own, and open
     * (without loading anything) each loaded libibverbs until one is not
     * the shim. */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *(*libc_dlopen)(const char *, int) = libc ? (void *(*)(const char *, int))dlsym(libc, "dlopen") : NULL;
    if (!libc_dlopen)
        die("glibc's dlopen");
    void *h = NULL;
    for (struct link_map *lm = _r_debug.r_map; lm && !h; lm = lm->l_next) {
        if (!lm->l_name || !strstr(lm->l_name, "libibverbs.so"))
            continue;
        h = libc_dlopen(lm->l_name, RTLD_NOW | RTLD_NOLOAD);
        if (h && dlsym(h, "ibvshim_version"))
            h = NULL;
    }
    if (!h)
        die("no libibverbs.so.1 other than the shim is loaded");
    r->alloc_pd = real_sym(h, "ibv_alloc_pd");
    r->dealloc_pd = real_sym(h, "ibv_dealloc_pd");
    r->reg_mr = real_sym(h, "ibv_reg_mr");
    r->dereg_mr = real_sym(h, "ibv_dereg_mr");
    r->create_cq = real_sym(h, "ibv_create_cq");
    r->destroy_cq = real_sym(h, "ibv_destroy_cq");
    r->create_qp = real_sym(h, "ibv_create_qp");
    r->destroy_qp = real_sym(h, "ibv_destroy_qp");
}

/* one_pair(), through the real library's functions. */
static inline void real_pair(const struct real *r, enum pair_kind k, struct ibv_context *ctx,
                      struct ibv_pd *pd, struct ibv_cq *cq, void *buf)
{
    switch (k) {
    case PAIR_PD: {
        struct ibv_pd *p = r->alloc_pd(ctx);
        if (!p || r->dealloc_pd(p))
            die("real ibv_alloc_pd/ibv_dealloc_pd");
        break;
    }
    case PAIR_MR: {
        struct ibv_mr *m = r->reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
        if (!m || r->dereg_mr(m))
            die("real ibv_reg_mr/ibv_dereg_mr");
        break;
    }
    case PAIR_CQ: {
        struct ibv_cq *c = r->create_cq(ctx, 16, NULL, NULL, 0);
        if (!c || r->destroy_cq(c))
            die("real ibv_create_cq/ibv_destroy_cq");
        break;
    }
    default: {
        struct ibv_qp_init_attr a = {
            .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
            .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
                     .max_recv_sge = 1, .max_inline_data = 64 },
        };
        struct ibv_qp *q = r->create_qp(pd, &a);
        if (!q || r->destroy_qp(q))
            die("real ibv_create_qp/ibv_destroy_qp");
        break;
    }
    }
}

#endif
