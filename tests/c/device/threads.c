/*
 * threads THREADS ITERATIONS: each thread, released together by a barrier,
 * runs ITERATIONS rounds of ibv_get_device_list, then name, GUID and index
 * of every device, then ibv_free_device_list.
 *
 * Prints "threads=T iterations=I devices=N reference_rounds=1" and exits 0
 * when every round saw the same devices with the same names and GUIDs as the
 * reference round; exits 1 otherwise.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define MAX_DEVICES 64

static pthread_barrier_t start;
static int iterations;
static int expected_num;
static char expected_name[MAX_DEVICES][IBV_SYSFS_NAME_MAX];
static uint64_t expected_guid[MAX_DEVICES];

static int one_round(int check)
{
	struct ibv_device **list;
	int num;
	int i;
	int bad = 0;

	list = ibv_get_device_list(&num);
	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	if (num > MAX_DEVICES)
		num = MAX_DEVICES;
	if (check && num != expected_num) {
		fprintf(stderr, "saw %d devices, expected %d\n", num, expected_num);
		bad = 1;
	}
	for (i = 0; i < num; i++) {
		const char *name = ibv_get_device_name(list[i]);
		uint64_t guid = ibv_get_device_guid(list[i]);

		(void)ibv_get_device_index(list[i]);
		if (!name) {
			fprintf(stderr, "device %d has no name\n", i);
			bad = 1;
			continue;
		}
		if (!check) {
			snprintf(expected_name[i], sizeof(expected_name[i]), "%s", name);
			expected_guid[i] = guid;
		} else if (i < expected_num &&
			   (strcmp(name, expected_name[i]) || guid != expected_guid[i])) {
			fprintf(stderr, "device %d changed: %s vs %s\n", i, name,
				expected_name[i]);
			bad = 1;
		}
	}
	if (!check)
		expected_num = num;
	ibv_free_device_list(list);
	return bad;
}

static void *worker(void *arg)
{
	long failures = 0;
	int i;

	(void)arg;
	pthread_barrier_wait(&start);
	for (i = 0; i < iterations; i++)
		failures += one_round(1);
	return (void *)failures;
}

int main(int argc, char **argv)
{
	pthread_t tids[256];
	int threads;
	long failures = 0;
	int i;

	if (argc != 3) {
		fprintf(stderr, "usage: %s THREADS ITERATIONS\n", argv[0]);
		return 2;
	}
	threads = atoi(argv[1]);
	iterations = atoi(argv[2]);
	if (threads < 1 || threads > 256 || iterations < 0) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}

	/* One reference round on the main thread; its calls are logged too, so
	 * the output reports it for the test's count. */
	if (one_round(0))
		return 1;

	pthread_barrier_init(&start, NULL, (unsigned)threads);
	for (i = 0; i < threads; i++)
		if (pthread_create(&tids[i], NULL, worker, NULL)) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	for (i = 0; i < threads; i++) {
		void *ret;

		pthread_join(tids[i], &ret);
		failures += (long)ret;
	}
	printf("threads=%d iterations=%d devices=%d reference_rounds=1\n", threads,
	       iterations, expected_num);
	return failures ? 1 : 0;
}
