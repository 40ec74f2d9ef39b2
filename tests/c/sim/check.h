/* Shared helpers for the sim's C tests: CHECK prints the failing line and exits 1. */
#ifndef SIM_CHECK_H
#define SIM_CHECK_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks;

#define CHECK(cond)                                                              \
	do {                                                                     \
		checks++;                                                        \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d: %s)\n", \
				__FILE__, __LINE__, #cond, errno, strerror(errno)); \
			exit(1);                                                 \
		}                                                                \
	} while (0)

/* A call that must fail with NULL / non-zero and leave errno == e. */
#define CHECK_ERRNO(expr, e)                                                     \
	do {                                                                     \
		errno = 0;                                                       \
		CHECK(!(expr));                                                  \
		CHECK(errno == (e));                                             \
	} while (0)

#define DONE(name)                                                               \
	do {                                                                     \
		printf("%s: %d checks passed\n", name, checks);                  \
		return 0;                                                        \
	} while (0)

#endif
