/* RLIMIT_AS and RLIMIT_DATA hold as Linux's may_expand_vm holds them:
 * mmap, mremap growing, brk and shmat past RLIMIT_AS fail with ENOMEM (a
 * MAP_FIXED mapping counting what it replaces as gone); private writable
 * mappings (data) past RLIMIT_DATA fail too, so does mprotect making a
 * private mapping writable and brk past the limit (brk returns the old
 * break), while shared and read-only mappings do not count; a soft
 * RLIMIT_DATA of 0 under a larger hard limit lets data through (Linux's
 * Valgrind workaround). nomu recorded both limits and enforced neither:
 * every call here succeeded. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define MiB (1024UL * 1024)

/* This process's VmSize, in bytes. */
static unsigned long vm_size(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long kb = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmSize: %lu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* Moves the break up by `n` bytes; whether it moved (brk returns the old
 * break when it cannot). */
static int grow_brk(unsigned long n)
{
	unsigned long cur = syscall(SYS_brk, 0);
	return (unsigned long)syscall(SYS_brk, cur + n) == cur + n;
}

static unsigned long brk_now(void)
{
	return syscall(SYS_brk, 0);
}

static void *map(size_t len, int prot, int flags)
{
	return mmap(NULL, len, prot, flags | MAP_ANONYMOUS, -1, 0);
}

static void address_space(void)
{
	unsigned long now = vm_size();
	CHECK(now > 0);
	struct rlimit r = {now + 16 * MiB, RLIM_INFINITY};
	CHECK_OK(setrlimit(RLIMIT_AS, &r));

	CHECK(map(32 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE) == MAP_FAILED && errno == ENOMEM);
	CHECK(map(32 * MiB, PROT_NONE, MAP_PRIVATE) == MAP_FAILED && errno == ENOMEM);
	CHECK(map(32 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED) == MAP_FAILED && errno == ENOMEM);
	char *a = map(8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	CHECK(a != MAP_FAILED);
	/* Over itself: what it replaces goes first. */
	CHECK(mmap(a, 8 * MiB, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == a);
	CHECK(mremap(a, 8 * MiB, 32 * MiB, MREMAP_MAYMOVE) == MAP_FAILED && errno == ENOMEM);
	/* Shrinking is always allowed. */
	CHECK(mremap(a, 8 * MiB, 4 * MiB, 0) == a);
	CHECK(malloc(64 * MiB) == NULL);
	unsigned long brk_was = brk_now();
	CHECK(!grow_brk(32 * MiB));
	CHECK_EQ(brk_now(), brk_was);

	int id = shmget(IPC_PRIVATE, 32 * MiB, IPC_CREAT | 0600);
	CHECK(id >= 0);
	CHECK(shmat(id, NULL, 0) == (void *)-1 && errno == ENOMEM);
	CHECK_OK(shmctl(id, IPC_RMID, NULL));

	CHECK_OK(munmap(a, 4 * MiB));
	/* The room is back. */
	char *b = map(8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	CHECK(b != MAP_FAILED);
	if (b != MAP_FAILED)
		munmap(b, 8 * MiB);

	r.rlim_cur = RLIM_INFINITY;
	CHECK_OK(setrlimit(RLIMIT_AS, &r));
	b = map(64 * MiB, PROT_NONE, MAP_PRIVATE);
	CHECK(b != MAP_FAILED);
	if (b != MAP_FAILED)
		munmap(b, 64 * MiB);
}

static void data(void)
{
	struct rlimit r = {64 * MiB, RLIM_INFINITY};
	CHECK_OK(setrlimit(RLIMIT_DATA, &r));

	/* Neither read-only nor shared memory is data. */
	char *ro = map(128 * MiB, PROT_READ, MAP_PRIVATE);
	CHECK(ro != MAP_FAILED);
	char *sh = map(128 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED);
	CHECK(sh != MAP_FAILED);
	CHECK(map(128 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE) == MAP_FAILED && errno == ENOMEM);
	char *small = map(MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	CHECK(small != MAP_FAILED);
	if (ro != MAP_FAILED) {
		CHECK(mprotect(ro, 128 * MiB, PROT_READ | PROT_WRITE) == -1 && errno == ENOMEM);
		/* A part that fits may. */
		CHECK_OK(mprotect(ro, MiB, PROT_READ | PROT_WRITE));
		munmap(ro, 128 * MiB);
	}
	if (sh != MAP_FAILED)
		munmap(sh, 128 * MiB);
	if (small != MAP_FAILED)
		munmap(small, MiB);
	unsigned long brk_was = brk_now();
	CHECK(!grow_brk(128 * MiB));
	CHECK_EQ(brk_now(), brk_was);
	/* A little heap still grows. */
	CHECK(grow_brk(64 * 1024));

	/* A soft limit of 0 under a larger hard one lets data through. */
	r.rlim_cur = 0;
	r.rlim_max = 256 * MiB;
	CHECK_OK(setrlimit(RLIMIT_DATA, &r));
	char *v = map(MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	CHECK(v != MAP_FAILED);
	if (v != MAP_FAILED)
		munmap(v, MiB);
	CHECK(map(512 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE) == MAP_FAILED && errno == ENOMEM);
}

/* Each part in a child of its own: lowered hard limits stay lowered. */
static void in_child(void (*part)(void))
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		part();
		exit(nomu_failed ? 1 : 0);
	}
	int st = 0;
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
	in_child(address_space);
	in_child(data);
	return nomu_checks_done("rlimit_vm");
}
