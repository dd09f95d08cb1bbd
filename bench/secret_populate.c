/* The populate benchmark of seed 003 (`__GFP_UNMAPPED` v2), on nomu's
 * memfd_secret: create a secret file of N MiB, map it, write every page,
 * unmap and close it, in a loop; optionally with a second thread spinning
 * in guest code all the while (on a second CPU, TLB shootdowns then cost
 * most). Prints the median and best nanoseconds per populate.
 *
 *   secret_populate MIB SPIN(0|1) ITERS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static void *spin(void *arg)
{
	(void)arg;
	while (!stop)
		;
	return NULL;
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s MIB SPIN ITERS\n", argv[0]);
		return 2;
	}
	size_t len = (size_t)atol(argv[1]) << 20;
	int spinning = atoi(argv[2]), iters = atoi(argv[3]);
	pthread_t t;
	if (spinning && pthread_create(&t, NULL, spin, NULL) != 0)
		return 1;
	long long *ns = calloc(iters, sizeof *ns);
	for (int i = 0; i < iters; i++) {
		long long t0 = now_ns();
		int fd = syscall(447, 0);
		if (fd < 0 || ftruncate(fd, len) < 0) {
			perror("memfd_secret");
			return 1;
		}
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		for (size_t off = 0; off < len; off += 4096)
			p[off] = 1;
		munmap(p, len);
		close(fd);
		ns[i] = now_ns() - t0;
	}
	stop = 1;
	if (spinning)
		pthread_join(t, NULL);
	qsort(ns, iters, sizeof *ns, cmp);
	printf("populate_ns median %lld best %lld\n", ns[iters / 2], ns[0]);
	return 0;
}
