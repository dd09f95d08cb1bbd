/* Dies by a signal chosen with argv[1]:
 *   segv      write through a NULL pointer            SIGSEGV (11)
 *   fpe       integer division by zero                SIGFPE  (8)
 *   ill       ud2                                     SIGILL  (4)
 *   trap      int3                                    SIGTRAP (5)
 *   wprotect  write to a page made PROT_READ          SIGSEGV (11)
 *   stack     unbounded recursion, stack overflow     SIGSEGV (11)
 * Prints "about to <mode>" first.  An unknown mode exits 2. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static volatile int stop_recursing;

static int recurse(int depth)
{
	volatile char big[64 * 1024];
	big[0] = (char)depth;
	big[sizeof big - 1] = (char)depth;
	if (stop_recursing)
		return big[0];
	/* not a tail call: the frame stays alive */
	return recurse(depth + 1) + big[sizeof big - 1];
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	printf("about to %s\n", mode);
	fflush(stdout);

	if (strcmp(mode, "segv") == 0) {
		volatile int *volatile p = NULL;
		*p = 42;
	} else if (strcmp(mode, "fpe") == 0) {
		volatile int a = 1, b = 0;
		a = a / b;
	} else if (strcmp(mode, "ill") == 0) {
		__asm__ volatile("ud2");
	} else if (strcmp(mode, "trap") == 0) {
		__asm__ volatile("int3");
	} else if (strcmp(mode, "wprotect") == 0) {
		volatile char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (page == MAP_FAILED)
			return 3;
		page[0] = 1;
		if (mprotect((void *)page, 4096, PROT_READ) != 0)
			return 3;
		page[1] = 2;
	} else if (strcmp(mode, "stack") == 0) {
		return recurse(0);
	} else {
		printf("usage: crash segv|fpe|ill|trap|wprotect|stack\n");
		return 2;
	}
	printf("still alive after %s\n", mode);
	return 1;
}
