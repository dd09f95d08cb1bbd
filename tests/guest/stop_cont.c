/* A child that stops itself again as soon as it is continued, and a
 * parent that waits for each stop (WUNTRACED) and continues it: every stop
 * must reach the parent's wait, however quickly it follows the SIGCONT.
 * Regression: under nomu the continue was recorded after the child could
 * run, so a quick re-stop was overwritten by it and the parent's wait4
 * waited forever (always on one CPU). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 2000

extern char **environ;

int main(int argc, char **argv)
{
	if (argc > 1)
		for (;;)
			raise(SIGSTOP);
	char *args[] = {argv[0], "stopper", NULL};
	pid_t pid;
	CHECK(posix_spawn(&pid, argv[0], NULL, NULL, args, environ) == 0);
	int stops = 0, status;
	for (int i = 0; i < ROUNDS; i++) {
		if (waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status) || WSTOPSIG(status) != SIGSTOP)
			break;
		stops++;
		if (kill(pid, SIGCONT) < 0)
			break;
	}
	CHECK_EQ(stops, ROUNDS);
	CHECK_OK(kill(pid, SIGKILL));
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	printf("%d stops seen, each continued\n", ROUNDS);
	return checks_done();
}
