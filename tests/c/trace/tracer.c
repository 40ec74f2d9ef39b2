/* A traced verbs program for tests/trace.rs.
 *
 *   tracer MODE THREADS CALLS
 *
 * Opens the first device, then THREADS threads each call
 * ibv_get_device_name CALLS times and ibv_query_gid on port 99 (which
 * fails) FAILS times (FAILS from $TRACER_FAILS, default 0).
 * Then, by MODE: "exit" returns from main; "kill" raises SIGKILL; "segv"
 * writes through NULL; "abort" calls abort(); "_exit" calls _exit(0);
 * "loop" calls ibv_get_device_name LOOP_FIRST (2000) times, prints
 * "ready", and goes on calling it until killed;
 * "closefds" closes every descriptor above 2 after the first call and
 * opens files until one gets each number, then makes the calls; "fork"
 * forks after the calls, and the child makes CALLS calls of
 * ibv_get_device_guid and exits; "serial" runs the THREADS threads one
 * after another (each exits before the next starts), any number of them;
 * "together" runs the THREADS threads (up to 512) all at once, each
 * making its calls and then waiting for all the others before it exits
 * (every one holds a trace ring at the same time); "exec" forks after the
 * calls and the child execs this program as "tracer exit 1 CALLS" (same
 * environment, so the same trace path), while the parent calls
 * ibv_get_device_name until the child has exited and prints "parent
 * calls N" (N those calls).
 * With $TRACER_OBJECTS set, before closing the device: a PD, an MR, a CQ
 * and an RC QP made, the QP moved to INIT, the MR's access changed
 * (ibv_rereg_mr), and all destroyed.
 */
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* "loop": the calls made before it says "ready". */
#define LOOP_FIRST 2000

static struct ibv_device *dev;
static struct ibv_context *ctx;
static long calls, fails;
static pthread_barrier_t all_made;

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < calls; i++)
        if (!ibv_get_device_name(dev))
            abort();
    for (long i = 0; i < fails; i++) {
        union ibv_gid gid;
        if (ibv_query_gid(ctx, 99, 0, &gid) == 0)
            abort();
    }
    return NULL;
}

/* worker, then wait until every thread has made its calls. */
static void *worker_together(void *arg)
{
    worker(arg);
    pthread_barrier_wait(&all_made);
    return NULL;
}

/* A PD, an MR, a CQ and a QP, the QP moved to INIT; 0 when all went. */
static int objects(void)
{
    static char buf[4096];
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (!pd)
        return 1;
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    if (!mr || !cq)
        return 1;
    struct ibv_qp_init_attr init = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC,
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    if (!qp)
        return 1;
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_INIT,
        .port_num = 1,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE,
    };
    int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    /* Traced whatever its outcome (a provider may not support it). */
    (void)ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: tracer MODE THREADS CALLS\n");
        return 2;
    }
    const char *mode = argv[1];
    int threads = atoi(argv[2]);
    calls = atol(argv[3]);
    fails = getenv("TRACER_FAILS") ? atol(getenv("TRACER_FAILS")) : 0;
    struct ibv_device **list = ibv_get_device_list(NULL);
    if (!list || !list[0]) {
        perror("ibv_get_device_list");
        return 1;
    }
    dev = list[0];
    ctx = ibv_open_device(dev);
    if (!ctx) {
        perror("ibv_open_device");
        return 1;
    }
    if (!strcmp(mode, "closefds")) {
        /* A daemon: every descriptor closed, the numbers reused. */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        for (int i = 0; i < 200; i++)
            if (open("/dev/null", O_RDONLY) < 0)
                break;
    }
    if (!strcmp(mode, "serial")) {
        for (int i = 0; i < threads; i++) {
            pthread_t one;
            pthread_create(&one, NULL, worker, NULL);
            pthread_join(one, NULL);
        }
        threads = 0;
    }
    if (!strcmp(mode, "together")) {
        static pthread_t many[512];
        if (threads > 512)
            threads = 512;
        pthread_barrier_init(&all_made, NULL, threads);
        for (int i = 0; i < threads; i++)
            if (pthread_create(&many[i], NULL, worker_together, NULL))
                return 5;
        for (int i = 0; i < threads; i++)
            pthread_join(many[i], NULL);
        threads = 0;
    }
    pthread_t t[64];
    if (threads > 64)
        threads = 64;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    if (!strcmp(mode, "kill"))
        raise(SIGKILL);
    if (!strcmp(mode, "segv"))
        *(volatile int *)0 = 1;
    if (!strcmp(mode, "abort"))
        abort();
    if (!strcmp(mode, "_exit"))
        _exit(0);
    if (!strcmp(mode, "loop")) {
        for (int i = 0; i < LOOP_FIRST; i++)
            ibv_get_device_name(dev);
        printf("ready\n");
        fflush(stdout);
        for (;;)
            ibv_get_device_name(dev);
    }
    if (!strcmp(mode, "fork")) {
        pid_t pid = fork();
        if (pid == 0) {
            for (long i = 0; i < calls; i++)
                ibv_get_device_guid(dev);
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 3;
        ibv_get_device_name(dev);
    }
    if (!strcmp(mode, "exec")) {
        pid_t pid = fork();
        if (pid == 0) {
            char n[32];
            snprintf(n, sizeof n, "%ld", calls);
            execl("/proc/self/exe", "tracer", "exit", "1", n, (char *)NULL);
            _exit(127);
        }
        long made = 0;
        int status;
        while (waitpid(pid, &status, WNOHANG) == 0) {
            ibv_get_device_name(dev);
            made++;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 3;
        printf("parent calls %ld\n", made);
    }
    if (getenv("TRACER_OBJECTS") && objects())
        return 4;
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return 0;
}
