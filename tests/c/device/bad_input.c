/*
 * bad_input CASE: make one device-API call with a bad (NULL) argument and
 * print what came back:
 *
 *   CALL -> RESULT errno=NAME
 *
 * RESULT is NULL / non-NULL for pointers, the number for int results, the
 * GUID as %016llx, "void" for ibv_free_device_list. errno is cleared before
 * the call. The real libibverbs may crash here (that is the point of asking
 * it first); the shim must not.
 *
 * CASE "list_null_num" calls ibv_get_device_list(NULL), which is valid, and
 * prints the names it lists.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

static const char *errname(int e)
{
	const char *name = strerrorname_np(e);

	return e == 0 ? "0" : name ? name : "?";
}

int main(int argc, char **argv)
{
	const char *c = argc == 2 ? argv[1] : "";
	int e;

	errno = 0;
	if (!strcmp(c, "name")) {
		const char *r = ibv_get_device_name(NULL);

		e = errno;
		printf("ibv_get_device_name(NULL) -> %s errno=%s\n",
		       r ? "non-NULL" : "NULL", errname(e));
	} else if (!strcmp(c, "guid")) {
		unsigned long long r = (unsigned long long)ibv_get_device_guid(NULL);

		e = errno;
		printf("ibv_get_device_guid(NULL) -> %016llx errno=%s\n", r, errname(e));
	} else if (!strcmp(c, "index")) {
		int r = ibv_get_device_index(NULL);

		e = errno;
		printf("ibv_get_device_index(NULL) -> %d errno=%s\n", r, errname(e));
	} else if (!strcmp(c, "open")) {
		struct ibv_context *r = ibv_open_device(NULL);

		e = errno;
		printf("ibv_open_device(NULL) -> %s errno=%s\n",
		       r ? "non-NULL" : "NULL", errname(e));
	} else if (!strcmp(c, "close")) {
		int r = ibv_close_device(NULL);

		e = errno;
		printf("ibv_close_device(NULL) -> %d errno=%s\n", r, errname(e));
	} else if (!strcmp(c, "free")) {
		ibv_free_device_list(NULL);
		e = errno;
		printf("ibv_free_device_list(NULL) -> void errno=%s\n", errname(e));
	} else if (!strcmp(c, "list_null_num")) {
		struct ibv_device **list = ibv_get_device_list(NULL);
		int i;

		e = errno;
		if (!list) {
			printf("ibv_get_device_list(NULL) -> NULL errno=%s\n", errname(e));
			return 0;
		}
		printf("ibv_get_device_list(NULL) -> list\n");
		for (i = 0; list[i]; i++)
			printf("device %d: %s\n", i, ibv_get_device_name(list[i]));
		ibv_free_device_list(list);
	} else {
		fprintf(stderr, "usage: %s name|guid|index|open|close|free|list_null_num\n",
			argv[0]);
		return 2;
	}
	return 0;
}
