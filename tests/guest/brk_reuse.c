/* Heap pages a program grows its break over read as zero, also where an
 * earlier program's heap was (regression test for the loader leaving a
 * new image's heap room unzeroed, for the break to zero as it grows).
 *
 * The parent runs itself by turns as a child that fills 1 MiB of heap
 * with a pattern and as one that grows its break by as much and checks
 * every byte is zero; under nomu the second's image is placed where the
 * first's was. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <spawn.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

#define HEAP (1 << 20)
#define ROUNDS 6

/* Grows the break by HEAP with raw syscalls (no allocator in between);
 * returns the old break, or 0. */
static unsigned char *grow(void)
{
	uintptr_t cur = syscall(SYS_brk, 0);
	if (syscall(SYS_brk, cur + HEAP) != (long)(cur + HEAP))
		return 0;
	return (unsigned char *)cur;
}

static int fill(void)
{
	unsigned char *heap = grow();
	if (!heap)
		return 2;
	memset(heap, 0xa5, HEAP);
	__asm__ volatile("" : : "r"(heap) : "memory");
	return 0;
}

static int check(void)
{
	unsigned char *heap = grow();
	if (!heap)
		return 2;
	for (size_t i = 0; i < HEAP; i++)
		if (heap[i])
			return 1;
	/* Shrunk and grown again: still zero (the break scrubs). */
	memset(heap, 0x3c, HEAP);
	if (syscall(SYS_brk, heap) != (long)heap || !grow())
		return 2;
	for (size_t i = 0; i < HEAP; i++)
		if (heap[i])
			return 3;
	return 0;
}

static int run(const char *self, const char *mode)
{
	char *args[] = {(char *)self, (char *)mode, NULL};
	pid_t c;
	int status = -1;
	if (posix_spawn(&c, self, NULL, NULL, args, environ) != 0 || waitpid(c, &status, 0) != c)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--fill"))
		return fill();
	if (argc > 1 && !strcmp(argv[1], "--check"))
		return check();

	for (int i = 0; i < ROUNDS; i++) {
		CHECK_EQ(run(argv[0], "--fill"), 0);
		CHECK_EQ(run(argv[0], "--check"), 0);
	}
	printf("%d rounds: grown heap reads as zero\n", ROUNDS);
	return checks_done();
}
