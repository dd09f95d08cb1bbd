/* The first byte of a libc syscall wrapper stays a place to enter it.
 *
 * glibc's wrappers are `ret`, alignment padding, then `mov $nr, %eax;
 * syscall; ret`. The rewrite entry path patched each such syscall from the
 * padding on, which made the function's first byte (the `mov`, a boundary
 * inside the patched range) an int3: every call trapped, ~1.8 us instead
 * of ~50 ns (regression). Patched from the `mov` on, the function starts
 * with the jump to its trampoline.
 *
 * A guest reads its patched code as patched, so the check is the byte at
 * each wrapper's entry after many calls: never int3 (natively it is the
 * `mov`, under nomu's rewrite path the jump, under zpoline the `mov`). */
#include "nomu_test.h"
#include <stdint.h>
#include <sys/types.h>

static int first_byte(void (*fn)(void))
{
	return *(volatile uint8_t *)(uintptr_t)fn;
}

int main(void)
{
	struct {
		const char *name;
		void (*fn)(void);
	} wrappers[] = {
		{ "getppid", (void (*)(void))getppid },
		{ "getuid", (void (*)(void))getuid },
		{ "getgid", (void (*)(void))getgid },
		{ "geteuid", (void (*)(void))geteuid },
		{ "getegid", (void (*)(void))getegid },
	};
	for (int round = 0; round < 1000; round++) {
		getppid();
		getuid();
		getgid();
		geteuid();
		getegid();
	}
	for (unsigned i = 0; i < sizeof wrappers / sizeof *wrappers; i++) {
		int b = first_byte(wrappers[i].fn);
		nomu_checks++;
		if (b == 0xcc)
			NOMU_FAIL("%s starts with int3", wrappers[i].name);
	}
	return checks_done();
}
