/* MADV_DONTNEED drops a range's pages and keeps each mapping's protection,
 * as the guest's own loads and stores see it (not only the kernel's
 * copies): glibc's thread exit advises a whole stack, its PROT_NONE guard
 * page included, and that guard must still fault afterwards. Also: a
 * read-only page stays read-only and reads zero, a read-only private file
 * mapping reads the file again and stays unwritable, and the dropped guard
 * opened again reads zero. Shared mappings keep their data through
 * MADV_DONTNEED (only MADV_REMOVE frees it); regression: a shared
 * anonymous mapping read zero. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG 4096UL

static sigjmp_buf back;
static volatile uintptr_t fault_addr;
static volatile int fault_code;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	fault_addr = (uintptr_t)si->si_addr;
	fault_code = si->si_code;
	siglongjmp(back, 1);
}

/* 0: the access went through; 1: SIGSEGV at p with SEGV_ACCERR (a mapped
 * page the protection forbids); -1: anything else. */
static int faults(volatile uint8_t *p, int write)
{
	fault_addr = 0;
	fault_code = 0;
	if (sigsetjmp(back, 1) == 0) {
		if (write)
			*p = 0x77;
		else
			(void)*p;
		return 0;
	}
	if (fault_addr != (uintptr_t)p || fault_code != SEGV_ACCERR) {
		printf("%s at %p: si_addr %#lx, si_code %d\n", write ? "write" : "read", (void *)p,
		       (unsigned long)fault_addr, fault_code);
		return -1;
	}
	return 1;
}

static int all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static void anonymous(void)
{
	/* A stack as glibc makes one: guard, then read-write; and a page
	 * made read-only after it was written. */
	uint8_t *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	memset(p, 0x5a, 4 * PG);
	CHECK_OK(mprotect(p, PG, PROT_NONE));
	CHECK_OK(mprotect(p + PG, PG, PROT_READ));
	for (int round = 0; round < 2; round++) {
		CHECK_OK(madvise(p, 4 * PG, MADV_DONTNEED));
		CHECK_EQ(faults(p, 0), 1);
		CHECK_EQ(faults(p + PG - 1, 1), 1);
		CHECK_EQ(faults(p + PG, 0), 0);
		CHECK(all_bytes(p + PG, PG, 0));
		CHECK_EQ(faults(p + PG, 1), 1);
		CHECK(all_bytes(p + 2 * PG, 2 * PG, 0));
		CHECK_EQ(faults(p + 3 * PG, 1), 0);
		CHECK_EQ(p[3 * PG], 0x77);
	}
	/* The guard opened again: zero, as the rest. */
	CHECK_OK(mprotect(p, PG, PROT_READ | PROT_WRITE));
	CHECK(all_bytes(p, PG, 0));
	CHECK_OK(munmap(p, 4 * PG));
}

static void file_read_only(void)
{
	char path[] = "/tmp/nomu-madvise-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	uint8_t data[2 * PG];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (uint8_t)(i * 13 + 5);
	CHECK_EQ(write(fd, data, sizeof data), (long)sizeof data);
	uint8_t *m = mmap(NULL, 2 * PG, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(m != MAP_FAILED);
	CHECK(memcmp(m, data, sizeof data) == 0);
	CHECK_OK(madvise(m, 2 * PG, MADV_DONTNEED));
	CHECK(memcmp(m, data, sizeof data) == 0);
	CHECK_EQ(faults(m + 100, 1), 1);
	CHECK_OK(munmap(m, 2 * PG));
	CHECK_OK(close(fd));
	CHECK_OK(unlink(path));
}

static void shared(void)
{
	uint8_t *a = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(a != MAP_FAILED);
	memset(a, 0x6b, 2 * PG);
	CHECK_OK(madvise(a, 2 * PG, MADV_DONTNEED));
	CHECK(all_bytes(a, 2 * PG, 0x6b));
	CHECK_OK(madvise(a, PG, MADV_REMOVE));
	CHECK(all_bytes(a, PG, 0));
	CHECK(all_bytes(a + PG, PG, 0x6b));
	CHECK_OK(munmap(a, 2 * PG));

	/* A file's shared mapping: what was written through it stays. */
	char path[] = "/tmp/nomu-madvise-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_OK(ftruncate(fd, PG));
	uint8_t *m = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	memset(m, 0x3c, PG);
	CHECK_OK(madvise(m, PG, MADV_DONTNEED));
	CHECK(all_bytes(m, PG, 0x3c));
	uint8_t b = 0;
	CHECK_EQ(pread(fd, &b, 1, 7), 1);
	CHECK_EQ(b, 0x3c);
	CHECK_OK(munmap(m, PG));
	CHECK_OK(close(fd));
	CHECK_OK(unlink(path));
}

int main(void)
{
	struct sigaction sa = {0};
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	CHECK_OK(sigaction(SIGSEGV, &sa, NULL));
	anonymous();
	file_read_only();
	shared();
	return checks_done();
}
