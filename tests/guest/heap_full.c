/* With the address space filled by mappings, the break cannot grow and
 * malloc fails with ENOMEM; once some room is unmapped, malloc succeeds
 * again (through mmap). musl's libc-test regression malloc-brk-fail checks
 * the same: under nomu the heap's reservation above the break stayed the
 * heap's, so brk still grew when nothing else could be mapped (now a full
 * memory takes it back). Filled as libc-test's t_vmfill does: PROT_NONE
 * mappings of the largest size that still fits, until none does. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PG 4096UL
#define MAX_MAPS 4096

static void *maps[MAX_MAPS];
static size_t lens[MAX_MAPS];

/* The largest mapping that fits now, searched from `*start` down. */
static size_t largest(size_t *start)
{
	size_t n = *start;
	for (size_t i = *start; i >= PG; i /= 2) {
		void *p = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			n -= i / 2;
		} else {
			munmap(p, n);
			if (n == i)
				*start = n;
			n += i / 2;
		}
	}
	return n & -PG;
}

int main(void)
{
	/* Before: the break grows and shrinks. */
	uintptr_t brk0 = (uintptr_t)syscall(SYS_brk, 0);
	CHECK_EQ(syscall(SYS_brk, brk0 + 16 * PG), brk0 + 16 * PG);
	CHECK_EQ(syscall(SYS_brk, brk0), brk0);

	size_t start = SIZE_MAX / 2 + 1, n;
	int count = 0, mapped = 1;
	while ((n = largest(&start)) != 0 && count < MAX_MAPS) {
		void *p = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			mapped = 0;
			break;
		}
		maps[count] = p;
		lens[count++] = n;
	}
	CHECK(mapped);
	CHECK(count < MAX_MAPS);
	CHECK(count > 0 && lens[0] >= 2 * 65536);
	printf("filled with %s mappings\n", count > 1 ? "several" : "one");

	/* Full: the break stays where it is, malloc fails. */
	CHECK_EQ(syscall(SYS_brk, brk0 + 4 * PG), brk0);
	errno = 0;
	void *q = malloc(10000);
	CHECK(q == NULL);
	CHECK_EQ(errno, ENOMEM);

	/* Room again (not next to the break): malloc succeeds. */
	CHECK_OK(munmap((char *)maps[0] + 65536, lens[0] - 65536));
	q = malloc(10000);
	CHECK(q != NULL);
	if (q)
		((char *)q)[9999] = 1;
	free(q);

	int unmapped = munmap(maps[0], 65536) == 0;
	for (int i = 1; i < count; i++)
		unmapped &= munmap(maps[i], lens[i]) == 0;
	CHECK(unmapped);
	return nomu_checks_done("heap_full");
}
