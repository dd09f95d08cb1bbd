/* Run as init (pid 1) under nomu: an orphaned grandchild is re-parented to
 * init, which can then reap it. */
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	pid_t p;
	if (argc > 1 && !strcmp(argv[1], "grandchild")) {
		struct timespec t = { 0, 200000000 };
		nanosleep(&t, NULL); /* outlive the parent */
		return getppid() == 1 ? 42 : 1;
	}
	if (argc > 1 && !strcmp(argv[1], "child")) {
		char *args[] = { argv[0], "grandchild", NULL };
		return posix_spawn(&p, argv[0], NULL, NULL, args, environ) ? 1 : 0;
	}
	printf("init pid %d\n", getpid());
	char *args[] = { argv[0], "child", NULL };
	posix_spawn(&p, argv[0], NULL, NULL, args, environ);
	int st, reaped = 0;
	pid_t w;
	while ((w = wait(&st)) > 0) {
		if (w == p)
			printf("child exited %d\n", WEXITSTATUS(st));
		else
			printf("orphan reaped by init, exited %d\n", WEXITSTATUS(st));
		reaped++;
	}
	printf("reaped %d\n", reaped);
	return 0;
}
