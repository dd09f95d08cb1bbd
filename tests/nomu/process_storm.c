/* The syscalls the plain storm leaves out (they end, block, fork or signal
 * the caller), each called with garbage arguments in a child of its own
 * that an alarm ends if it blocks. nomu must outlive all of them. */
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "raw_syscall.h"

static void survive(int sig) { (void)sig; }

int main(int argc, char **argv)
{
	static const long nrs[] = { 7, 15, 23, 34, 35, 37, 38, 56, 57, 58, 59, 61, 62, 128, 130,
				    200, 202, 230, 232, 234, 247, 270, 271, 281, 322, 435, 441, 60, 231 };
	static const long patterns[] = { 0xdeadbeef000L, 1, -1, 0x7fffffff, 0 };
	if (argc == 4) {
		alarm(1);
		raw(atol(argv[2]), atol(argv[3]));
		return 0;
	}
	/* This program is pid 1 under nomu, and kill(1, 1) is among the calls:
	 * the first program has no init protection, so it catches SIGHUP (a
	 * handler, unlike SIG_IGN, is not inherited across the children's exec). */
	signal(SIGHUP, survive);
	int runs = 0;
	for (unsigned i = 0; i < sizeof(nrs) / sizeof(nrs[0]); i++)
		for (unsigned p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
			char nr[32], pat[32];
			snprintf(nr, sizeof(nr), "%ld", nrs[i]);
			snprintf(pat, sizeof(pat), "%ld", patterns[p]);
			char *args[] = { argv[0], "one", nr, pat, NULL };
			pid_t c;
			if (posix_spawn(&c, argv[0], NULL, NULL, args, environ) == 0) {
				/* Reap it and anything it may have started. */
				while (waitpid(-1, NULL, 0) > 0)
					;
				runs++;
			}
		}
	printf("survived %d children\n", runs);
	return 0;
}
