/* Times whole process runs (fork + exec + exit + wait), alternating between
 * two environments so that both share the machine's noise.
 *
 *   spawn RUNS [-a NAME=VALUE]... [-b NAME=VALUE]... -- PROGRAM ARGS...
 *
 * Run i (of RUNS each) executes PROGRAM once with the -a settings added to
 * the environment, then once with the -b settings. Prints a_ns= and b_ns=
 * (the medians of the wall times), a_fail= and b_fail= (runs whose exit
 * status was not 0), and ratio= (the median of the per-pair b/a ratios). */
#define _GNU_SOURCE
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define MAXSET 16

static double run(char **argv, char **set, int nset, int *failed)
{
    double t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        for (int i = 0; i < nset; i++)
            putenv(set[i]);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0)
        die("waitpid");
    double t = now_ns() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        (*failed)++;
    return t;
}

int main(int argc, char **argv)
{
    int runs = (int)arg_long(argc, argv, 1, 100);
    char *a[MAXSET], *b[MAXSET];
    int na = 0, nb = 0, i = 2;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "-a") && i + 1 < argc && na < MAXSET)
            a[na++] = argv[++i];
        else if (!strcmp(argv[i], "-b") && i + 1 < argc && nb < MAXSET)
            b[nb++] = argv[++i];
        else {
            fprintf(stderr, "usage: spawn RUNS [-a N=V]... [-b N=V]... -- PROGRAM ARGS...\n");
            return 2;
        }
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "spawn: no program\n");
        return 2;
    }
    char **prog = argv + i + 1;
    int fa = 0, fb = 0;
    for (int w = 0; w < 3; w++) { /* warm-up: page cache, dynamic loader */
        run(prog, a, na, &fa);
        run(prog, b, nb, &fb);
    }
    fa = fb = 0;
    double *ta = calloc((size_t)runs, sizeof(double));
    double *tb = calloc((size_t)runs, sizeof(double));
    double *r = calloc((size_t)runs, sizeof(double));
    double *d = calloc((size_t)runs, sizeof(double));
    for (int k = 0; k < runs; k++) {
        ta[k] = run(prog, a, na, &fa);
        tb[k] = run(prog, b, nb, &fb);
        r[k] = tb[k] / ta[k];
        d[k] = tb[k] - ta[k];
    }
    printf("a_ns=%.0f\nb_ns=%.0f\n", median(ta, runs), median(tb, runs));
    printf("added_ns=%.0f\nratio=%.4f\n", median(d, runs), median(r, runs));
    printf("a_fail=%d\nb_fail=%d\n", fa, fb);
    return 0;
}
