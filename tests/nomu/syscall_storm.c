/* Calls every syscall number with garbage arguments (bad pointers, bad
 * descriptors, huge sizes, all-ones, zeros): nomu must answer each with an
 * errno or a harmless success and never fall over. Only run under nomu:
 * natively some of these would really do things. Calls that end or block
 * the caller, or signal it, are left out. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "raw_syscall.h"

static int skipped(long nr)
{
	static const long skip[] = {
		7, 15, 23, 34, 35, 37, 38, 56, 57, 58, 59, 60, 61, 62, 128, 130, 169, 200,
		202, 230, 231, 232, 234, 247, 270, 271, 281, 322, 335, 435, 441,
	};
	for (unsigned i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (skip[i] == nr)
			return 1;
	return 0;
}

int main(void)
{
	static const long patterns[] = { 0xdeadbeef000L, 1, -1, 0x7fffffff };
	long calls = 0;
	/* close(1) is among the garbage calls: report through a copy. */
	int out = fcntl(1, F_DUPFD, 100);
	for (unsigned p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++)
		for (long nr = 0; nr < 470; nr++) {
			if (skipped(nr))
				continue;
			raw(nr, patterns[p]);
			calls++;
		}
	/* Out-of-range numbers too. */
	raw(100000, 1);
	raw(-1, 1);
	dprintf(out, "survived %ld calls\n", calls + 2);
	return 0;
}
