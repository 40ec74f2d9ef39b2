/* Calls a device getter N times, for instruction counts under callgrind.
 *
 *   getter_loop OP N
 *
 * OP: name   ibv_get_device_name(list[0])
 *     rot    ibv_get_device_name(list[i % n]): every device in turn
 *     index  ibv_get_device_index(list[0])
 *     guid   ibv_get_device_guid(list[0])
 *     bad    each getter with NULL and with a copy of list[0] (not a device
 *            the library handed out), N times: each must fail with EINVAL
 *     fork   fork N children after the list; each calls only
 *            ibv_get_device_name(list[0]) and exits; prints "child PID" each
 * Prints "ok" after checking each result against a first call's. */
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    const char *op = argv[1];
    long n = strtol(argv[2], NULL, 0);
    int ndev = 0;
    struct ibv_device **list = ibv_get_device_list(&ndev);
    if (!list || ndev < 2) {
        printf("need at least two devices\n");
        return 1;
    }
    uintptr_t sum = 0, want = 0;
    if (!strcmp(op, "name")) {
        for (long i = 0; i < n; i++)
            sum += (uintptr_t)ibv_get_device_name(list[0]);
        want = (uintptr_t)ibv_get_device_name(list[0]) * (uintptr_t)n;
    } else if (!strcmp(op, "rot")) {
        for (long i = 0, d = 0; i < n; i++, d = d + 1 == ndev ? 0 : d + 1) {
            sum += (uintptr_t)ibv_get_device_name(list[d]);
            want += (uintptr_t)list[d]->name;
        }
    } else if (!strcmp(op, "index")) {
        for (long i = 0; i < n; i++)
            sum += (uintptr_t)ibv_get_device_index(list[0]);
        want = (uintptr_t)ibv_get_device_index(list[0]) * (uintptr_t)n;
    } else if (!strcmp(op, "guid")) {
        for (long i = 0; i < n; i++)
            sum += (uintptr_t)ibv_get_device_guid(list[0]);
        want = (uintptr_t)ibv_get_device_guid(list[0]) * (uintptr_t)n;
    } else if (!strcmp(op, "fork")) {
        for (long i = 0; i < n; i++) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0)
                exit(ibv_get_device_name(list[0]) ? 0 : 1);
            int status = 0;
            if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
                WEXITSTATUS(status) != 0)
                sum++;
            printf("child %d\n", (int)pid);
        }
    } else if (!strcmp(op, "bad")) {
        static struct ibv_device copy;
        memcpy(&copy, list[0], sizeof copy);
        struct ibv_device *bad[2] = {NULL, &copy};
        for (long i = 0; i < n; i++) {
            for (int b = 0; b < 2; b++) {
                errno = 0;
                if (ibv_get_device_name(bad[b]) != NULL || errno != EINVAL)
                    sum++;
                errno = 0;
                if (ibv_get_device_index(bad[b]) != -1 || errno != EINVAL)
                    sum++;
                errno = 0;
                if (ibv_get_device_guid(bad[b]) != 0 || errno != EINVAL)
                    sum++;
            }
        }
    } else {
        return 2;
    }
    ibv_free_device_list(list);
    printf(sum == want ? "ok\n" : "wrong results\n");
    return sum == want ? 0 : 1;
}
