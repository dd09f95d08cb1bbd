/* A forked child runs code whose syscall sites another process rewrote:
 * the page cache shares a program's text between processes, and zpoline
 * rewrites a site once per cached page, so a fork's copy must get the
 * original `syscall` back at sites the forking process never ran itself
 * (the child runs in a host process of its own, where a rewritten site
 * would enter nomu's stub in its copy of nomu). Regression: such a child
 * died of SIGSEGV. */
#include "nomu_test.h"
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

extern char **environ;

/* Only the helper process runs these sites before the fork. */
__attribute__((noinline)) static int rarely_used_calls(void)
{
	errno = 0;
	int prio = getpriority(PRIO_PROCESS, 0);
	if (prio == -1 && errno != 0)
		return 1;
	struct rlimit rl;
	if (getrlimit(RLIMIT_CORE, &rl) != 0)
		return 2;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "warm"))
		return rarely_used_calls();

	/* Another process of this program runs the sites first. */
	pid_t helper;
	char *args[] = {argv[0], "warm", NULL};
	CHECK_EQ(posix_spawn(&helper, argv[0], NULL, NULL, args, environ), 0);
	int st;
	CHECK_EQ(waitpid(helper, &st, 0), helper);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* Then a forked child of this one runs them. */
	for (int round = 0; round < 3; round++) {
		pid_t child = fork();
		if (child == 0)
			_exit(rarely_used_calls() + 10);
		CHECK(child > 0);
		CHECK_EQ(waitpid(child, &st, 0), child);
		CHECK(WIFEXITED(st));
		CHECK_EQ(WEXITSTATUS(st), 10);
	}
	CHECK_EQ(rarely_used_calls(), 0);
	return checks_done();
}
