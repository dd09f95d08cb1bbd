/* A forked child whose host process dies on its own (tests/cli.rs kills it
 * by pid from the host, as the host's OOM killer would): its guest dies of
 * SIGKILL, the parent's wait says so, and nomu goes on. argv[1] is where
 * the child is when it is killed: "pause" (blocked in a syscall), "spin"
 * (running guest code), "stopped" (stopped by SIGSTOP). The parent prints
 * "ready" when it is there. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *where = argc > 1 ? argv[1] : "pause";
	int st = 0;
	pid_t p = fork();
	if (p < 0) {
		perror("fork");
		return 1;
	}
	if (p == 0) {
		if (!strcmp(where, "spin"))
			for (volatile unsigned long i = 0;; i++)
				;
		if (!strcmp(where, "stopped"))
			raise(SIGSTOP);
		for (;;)
			pause();
	}
	if (!strcmp(where, "stopped") && (waitpid(p, &st, WUNTRACED) != p || !WIFSTOPPED(st)))
		return 2;
	printf("ready\n");
	fflush(stdout);
	if (waitpid(p, &st, 0) != p)
		return 3;
	if (WIFSIGNALED(st))
		printf("child killed by signal %d\n", WTERMSIG(st));
	else
		printf("child exited %d\n", WEXITSTATUS(st));
	/* nomu goes on: another fork works */
	p = fork();
	if (p == 0)
		_exit(5);
	if (p < 0 || waitpid(p, &st, 0) != p)
		return 4;
	printf("next child exited %d\n", WEXITSTATUS(st));
	return 0;
}
