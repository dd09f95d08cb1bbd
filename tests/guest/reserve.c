/* Reservations: address space mapped PROT_NONE (and MAP_NORESERVE) costs
 * no memory until it is made accessible, the way glibc reserves 64 MiB per
 * malloc arena and a JVM its whole heap.  Under nomu this case runs with
 * --mem 256M and reserves far more (about 10 GiB), using small parts of
 * it: the arenas' first pieces made accessible with mprotect, a heap's
 * chunks committed with MAP_FIXED and given back with a PROT_NONE
 * MAP_FIXED over them (512 MiB used in all, 32 MiB at a time), thread
 * stacks with their guard pages.  Natively nothing limits it either.
 *
 * Whether memory is accessible is probed without signals: write(2) from it
 * into a pipe gives EFAULT when it is not readable. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PG 4096UL
#define MIB (1024UL * 1024UL)
#define GIB (1024UL * MIB)
#define HEAP_MAX (64 * MIB) /* glibc's HEAP_MAX_SIZE on x86-64 */
#define ARENAS 24
#define RESERVE (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

static int probe_pipe[2];

static void *rmmap(void *addr, size_t len, int prot, int flags)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, -1, 0);
}

/* 1 when the byte at p is readable. */
static int readable(const void *p)
{
	char c;
	if (syscall(SYS_write, probe_pipe[1], p, 1) != 1)
		return 0;
	return read(probe_pipe[0], &c, 1) == 1;
}

/* 1 when every byte of [p, p+len) is `v`. */
static int all(const unsigned char *p, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

/* glibc's new_heap: twice the size reserved, the aligned half kept. */
static unsigned char *new_heap(void)
{
	unsigned char *p = rmmap(NULL, 2 * HEAP_MAX, PROT_NONE, RESERVE);
	if (p == MAP_FAILED)
		return NULL;
	uintptr_t a = ((uintptr_t)p + HEAP_MAX - 1) & ~(HEAP_MAX - 1);
	if (a > (uintptr_t)p)
		syscall(SYS_munmap, p, a - (uintptr_t)p);
	syscall(SYS_munmap, a + HEAP_MAX, (uintptr_t)p + HEAP_MAX - a);
	return (unsigned char *)a;
}

static void arenas(void)
{
	printf("== %d malloc arenas of 64 MiB reserved, 1 MiB of each used\n", ARENAS);
	unsigned char *heap[ARENAS];
	int made = 0, grown = 0, fresh = 0, used = 0, closed = 0;
	for (int i = 0; i < ARENAS; i++) {
		heap[i] = new_heap();
		if (!heap[i])
			continue;
		made++;
		/* grow_heap: the top made accessible a piece at a time */
		int ok = 1;
		for (size_t off = 0; off < MIB; off += 132 * 1024) {
			size_t len = off + 132 * 1024 > MIB ? MIB - off : 132 * 1024;
			ok &= syscall(SYS_mprotect, heap[i] + off, len, PROT_READ | PROT_WRITE) == 0;
		}
		grown += ok;
		fresh += all(heap[i], MIB, 0);
		memset(heap[i], 'a' + i, MIB);
		closed += !readable(heap[i] + MIB) && !readable(heap[i] + HEAP_MAX - 1);
	}
	CHECK_EQ(made, ARENAS);
	CHECK_EQ(grown, ARENAS);
	CHECK_EQ(fresh, ARENAS);
	CHECK_EQ(closed, ARENAS);
	for (int i = 0; i < ARENAS; i++)
		used += heap[i] && all(heap[i], MIB, 'a' + i);
	CHECK_EQ(used, ARENAS);

	/* contents survive a trip through PROT_NONE */
	CHECK_OK(syscall(SYS_mprotect, heap[0], MIB, PROT_NONE));
	CHECK(!readable(heap[0]));
	CHECK_OK(syscall(SYS_mprotect, heap[0], MIB, PROT_READ | PROT_WRITE));
	CHECK(all(heap[0], MIB, 'a'));
	/* shrink_heap: MADV_DONTNEED, and the pages read as zero again */
	CHECK_OK(syscall(SYS_madvise, heap[1] + MIB / 2, MIB / 2, MADV_DONTNEED));
	CHECK(all(heap[1], MIB / 2, 'b') && all(heap[1] + MIB / 2, MIB / 2, 0));
	/* or a PROT_NONE mapping over the top (glibc, under strict overcommit) */
	CHECK(rmmap(heap[2] + MIB / 2, MIB / 2, PROT_NONE, RESERVE | MAP_FIXED) == heap[2] + MIB / 2);
	CHECK(all(heap[2], MIB / 2, 'c') && !readable(heap[2] + MIB / 2));
	CHECK_OK(syscall(SYS_mprotect, heap[2] + MIB / 2, MIB / 2, PROT_READ | PROT_WRITE));
	CHECK(all(heap[2] + MIB / 2, MIB / 2, 0));
	/* a reservation grown by mremap stays one */
	unsigned char *r = rmmap(NULL, HEAP_MAX, PROT_NONE, RESERVE);
	unsigned char *g = (unsigned char *)syscall(SYS_mremap, r, HEAP_MAX, 2 * HEAP_MAX, MREMAP_MAYMOVE);
	CHECK(r != MAP_FAILED && g != MAP_FAILED);
	if (g != MAP_FAILED) {
		CHECK(!readable(g) && !readable(g + 2 * HEAP_MAX - 1));
		CHECK_OK(syscall(SYS_mprotect, g + 2 * HEAP_MAX - MIB, MIB, PROT_READ | PROT_WRITE));
		CHECK(all(g + 2 * HEAP_MAX - MIB, MIB, 0));
		memset(g + 2 * HEAP_MAX - MIB, 'g', MIB);
		CHECK_OK(syscall(SYS_munmap, g, 2 * HEAP_MAX));
	}
	int unmapped = 1;
	for (int i = 0; i < ARENAS; i++)
		if (heap[i] && syscall(SYS_munmap, heap[i], HEAP_MAX) != 0)
			unmapped = 0;
	CHECK(unmapped);
}

/* A JVM's heap: reserved whole, committed and uncommitted in chunks. */
static void java_heap(void)
{
	const size_t size = 8 * GIB, chunk = 32 * MIB;
	printf("== an 8 GiB heap reserved, 512 MiB used 32 MiB at a time\n");
	unsigned char *heap = rmmap(NULL, size, PROT_NONE, RESERVE);
	CHECK(heap != MAP_FAILED);
	if (heap == MAP_FAILED)
		return;
	CHECK(!readable(heap) && !readable(heap + size - 1));
	int committed = 0, fresh = 0, kept = 0, uncommitted = 0;
	for (int i = 0; i < 16; i++) {
		unsigned char *c = heap + (size_t)i * (size / 16);
		unsigned char *m = rmmap(c, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED);
		if (m != c)
			continue;
		committed++;
		fresh += all(c, chunk, 0);
		for (size_t off = 0; off < chunk; off += PG)
			c[off] = (unsigned char)(i + 1);
		kept += c[0] == i + 1 && c[chunk - PG] == i + 1 && !readable(c + chunk);
		/* os::uncommit_memory: a PROT_NONE MAP_NORESERVE mapping over it */
		uncommitted += rmmap(c, chunk, PROT_NONE, RESERVE | MAP_FIXED) == c && !readable(c);
	}
	CHECK_EQ(committed, 16);
	CHECK_EQ(fresh, 16);
	CHECK_EQ(kept, 16);
	CHECK_EQ(uncommitted, 16);
	CHECK_OK(syscall(SYS_munmap, heap, size));
}

/* Thread stacks as glibc makes them: reserved, then all but the guard page
 * made accessible. */
static void stacks(void)
{
	const size_t size = 8 * MIB + PG;
	printf("== 8 thread stacks with guard pages\n");
	unsigned char *s[8];
	int ok = 0;
	for (int i = 0; i < 8; i++) {
		s[i] = rmmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK);
		if (s[i] == MAP_FAILED || syscall(SYS_mprotect, s[i] + PG, size - PG, PROT_READ | PROT_WRITE) != 0)
			continue;
		s[i][size - 1] = 1;
		s[i][PG] = 2;
		ok += !readable(s[i] + PG - 1) && s[i][size - 1] == 1 && s[i][PG] == 2;
	}
	CHECK_EQ(ok, 8);
	for (int i = 0; i < 8; i++)
		if (s[i] != MAP_FAILED)
			CHECK_OK(syscall(SYS_munmap, s[i], size));
}

int main(void)
{
	CHECK_OK(pipe(probe_pipe));
	arenas();
	java_heap();
	stacks();
	/* and all of it again: reservations and their uses leave nothing behind */
	arenas();
	java_heap();
	return checks_done();
}
