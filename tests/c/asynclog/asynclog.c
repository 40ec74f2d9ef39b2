/* The text log's writer thread (tests/asynclog.rs). Each logged call is
 * ibv_rate_to_mult(TAG << 20 | i): forwarded untouched, logged at
 * IBV_SHIM_LOG=trace with its raw first argument, so every line names its
 * sender and its place in that sender's sequence.
 *
 *   threads T N   T threads x N calls; each prints how many write(2)
 *                 calls it made itself ("writes TAG COUNT")
 *   exit-thread N a second thread makes N calls then exit(0)s, main waits
 *   fork N        N calls (tag 1), fork: the child warns, makes N calls
 *                 (tag 2), waits for them to be in the log and _exit(0)s;
 *                 the parent waits, then N calls (tag 3)
 *   warn N        N calls, then a refused ibv_close_device(NULL) (a WARN)
 *   reuse N PATH  N calls, closes the log's descriptor and opens PATH on
 *                 that number, N more calls (tag 2), writes its own line
 *   names N       (on ibv-sim's devices) a second thread, the first to
 *                 make a verbs call, calls ibv_get_device_list, N x
 *                 ibv_get_device_name(list[0]), ibv_free_device_list;
 *                 main joins it (callgrind --separate-threads: thread 2)
 *   rename N      (on ibv-sim's devices) ibv_get_device_list, each
 *                 device's name asked, then every name overwritten
 *                 ("gone") before the list is freed: the log must show
 *                 the names the calls saw; N is unused
 *
 * write(2) is wrapped (the program is linked -rdynamic, so the shim's
 * calls land here) to count the writes each thread makes. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static __thread long my_writes;

ssize_t write(int fd, const void *buf, size_t n)
{
    my_writes++;
    return syscall(SYS_write, fd, buf, n);
}

static volatile int sink;

static void calls(int tag, int n)
{
    for (int i = 0; i < n; i++)
        sink = ibv_rate_to_mult((enum ibv_rate)(((unsigned)tag << 20) | (unsigned)i));
}

struct job {
    int tag, n;
    long writes;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    calls(j->tag, j->n);
    j->writes = my_writes;
    return NULL;
}

static void *exiter(void *arg)
{
    calls(1, *(int *)arg);
    exit(0);
}

/* The descriptor that is open on PATH, or -1. */
static int fd_of(const char *path)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char link[300], target[PATH_MAX];
    int found = -1;
    while (d && (e = readdir(d))) {
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = 0;
            if (strcmp(target, path) == 0)
                found = atoi(e->d_name);
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* How many lines of the file at PATH contain NEEDLE. */
static int count_in(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return n;
}

static void *names(void *arg)
{
    int n = *(int *)arg;
    struct ibv_device **list = ibv_get_device_list(NULL);
    if (!list || !list[0])
        return list;
    for (int i = 0; i < n; i++)
        ibv_get_device_name(list[0]);
    ibv_free_device_list(list);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *mode = argv[1];
    if (!strcmp(mode, "threads") && argc == 4) {
        int t = atoi(argv[2]), n = atoi(argv[3]);
        pthread_t th[64];
        struct job jobs[64];
        if (t > 64)
            return 2;
        for (int i = 0; i < t; i++) {
            jobs[i] = (struct job){ .tag = i + 1, .n = n };
            pthread_create(&th[i], NULL, worker, &jobs[i]);
        }
        for (int i = 0; i < t; i++) {
            pthread_join(th[i], NULL);
            printf("writes %d %ld\n", jobs[i].tag, jobs[i].writes);
        }
        return 0;
    }
    int n = atoi(argv[2]);
    if (!strcmp(mode, "exit-thread")) {
        pthread_t th;
        pthread_create(&th, NULL, exiter, &n);
        pthread_join(th, NULL);
        return 3; /* not reached: the thread exits the process */
    }
    if (!strcmp(mode, "fork")) {
        calls(1, n);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            /* A warning first: written at once, after what the parent
             * had queued before the fork. */
            ibv_close_device(NULL);
            calls(2, n);
            /* Its own writer thread writes its lines: wait for them (up
             * to 20 s), then leave without exit handlers. */
            const char *log = getenv("IBV_SHIM_LOG_FILE");
            for (int tries = 0; log && tries < 2000; tries++) {
                if (count_in(log, "ibv_rate_to_mult(0x2") >= n)
                    _exit(0);
                usleep(10 * 1000);
            }
            _exit(1);
        }
        int status;
        waitpid(pid, &status, 0);
        calls(3, n);
        printf("child %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 0;
    }
    if (!strcmp(mode, "names")) {
        pthread_t th;
        void *rc;
        pthread_create(&th, NULL, names, &n);
        pthread_join(th, &rc);
        return rc ? 1 : 0;
    }
    if (!strcmp(mode, "rename")) {
        int num = 0;
        struct ibv_device **list = ibv_get_device_list(&num);
        if (!list || !list[0])
            return 1;
        for (int i = 0; i < num; i++)
            ibv_get_device_name(list[i]);
        /* As if the devices were freed and their memory reused before
         * the log's writer thread formats the lines. */
        for (int i = 0; i < num; i++)
            snprintf(list[i]->name, sizeof list[i]->name, "gone%d", i);
        ibv_free_device_list(list);
        return 0;
    }
    if (!strcmp(mode, "warn")) {
        calls(1, n);
        ibv_close_device(NULL);
        return 0;
    }
    if (!strcmp(mode, "reuse") && argc == 4) {
        const char *log = getenv("IBV_SHIM_LOG_FILE");
        calls(1, n);
        int fd = log ? fd_of(log) : -1;
        if (fd < 0) {
            printf("no log descriptor\n");
            return 1;
        }
        close(fd);
        int own = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (own != fd) {
            dup2(own, fd);
            close(own);
        }
        calls(2, n);
        /* Give the writer thread its turn while the number is ours. */
        usleep(100 * 1000);
        const char line[] = "the program's own line\n";
        syscall(SYS_write, fd, line, sizeof line - 1);
        close(fd);
        printf("fd %d\n", fd);
        return 0;
    }
    return 2;
}
