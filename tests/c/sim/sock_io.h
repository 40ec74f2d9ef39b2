/* The two processes of a fabric test exchange addresses and go-aheads over
 * a socketpair: whole messages or the test fails (CHECK). The test sets
 * `sock` to its end after fork. */
#ifndef SIM_SOCK_IO_H
#define SIM_SOCK_IO_H
#include <stddef.h>
#include <unistd.h>

#include "check.h"

static int sock;

static void xsend(const void *p, size_t n) { CHECK(write(sock, p, n) == (ssize_t)n); }

static void xrecv(void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(sock, (char *)p + got, n - got);
		CHECK(r > 0);
		got += r;
	}
}
#endif
