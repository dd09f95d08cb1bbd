/* Threads of a forked parent writing its large private mapping at once,
 * right after the child is gone. nomu write-protects such a mapping at
 * fork (src/mm/space/cow.rs); once no child is left, the first write
 * fault handled unprotects the whole mapping, so the faults of the other
 * threads, taken before that, find nothing left to copy there. Each must
 * simply be retried, as Linux retries a fault whose page table entry was
 * fixed meanwhile (regression: on the sysemu path the holder thread of
 * fork.c's multithreaded_parent died of SIGSEGV in about one run in four).
 */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define WRITERS 3
#define ROUNDS 150
#define REGION (1 << 20) /* copied on access under nomu: >= 256 KiB */
#define PAGE 4096

static unsigned char *region;
static atomic_int round_no, done;

/* Spins until *v reaches `want`, yielding now and then: the spinners must
 * not keep the forked child off the CPUs. */
static void wait_for(atomic_int *v, int want)
{
	for (int spins = 0; atomic_load(v) < want; spins++)
		if (spins % 256 == 255)
			sched_yield();
}

/* Waits for round `r` to start, then bumps a counter every writer shares
 * and one of its own, on two different pages of the region. */
static void *writer(void *arg)
{
	int id = (int)(long)arg;
	for (int r = 1; r <= ROUNDS; r++) {
		wait_for(&round_no, r);
		atomic_fetch_add((atomic_int *)region, 1);
		((int *)(region + PAGE))[id]++;
		atomic_fetch_add(&done, 1);
	}
	return NULL;
}

int main(void)
{
	region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(region != MAP_FAILED);
	memset(region, 0, REGION);
	pthread_t t[WRITERS];
	for (long i = 0; i < WRITERS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, writer, (void *)i), 0);
	int forked_ok = 0;
	for (int r = 1; r <= ROUNDS; r++) {
		int before = atomic_load((atomic_int *)region);
		pid_t p = fork();
		if (p == 0)
			_exit(*(int *)region == before ? 0 : 1);
		int st;
		if (p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			forked_ok++;
		/* No child left: every writer faults on the same mapping now. */
		atomic_store(&round_no, r);
		wait_for(&done, r * WRITERS);
	}
	for (int i = 0; i < WRITERS; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	CHECK_EQ(forked_ok, ROUNDS);
	CHECK_EQ(*(int *)region, ROUNDS * WRITERS);
	for (int i = 0; i < WRITERS; i++)
		CHECK_EQ(((int *)(region + PAGE))[i], ROUNDS);
	return checks_done();
}
