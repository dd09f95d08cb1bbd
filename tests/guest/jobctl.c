/* Job control and zombies: SIGSTOP/SIGTSTP stop a child, SIGCONT resumes
 * it, SIGKILL ends a stopped one; wait reports it all (WUNTRACED,
 * WCONTINUED, waitid WSTOPPED); a zombie exists until reaped. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static pid_t spawn(char *self, char *mode)
{
	pid_t p;
	char *args[] = { self, mode, NULL };
	/* In a process group of its own, whose parent (this test) is in
	 * another group of the same session: never an orphaned group, where
	 * Linux discards SIGTSTP (regression: run from a harness whose own
	 * group was orphaned, the SIGTSTP case failed natively). */
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&attr, 0);
	int err = posix_spawn(&p, self, NULL, &attr, args, environ);
	posix_spawnattr_destroy(&attr);
	return err ? -1 : p;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "spin"))
		for (;;)
			syscall(SYS_getppid);
	if (argc > 1 && !strcmp(argv[1], "nap")) {
		struct timespec t = { 1, 500000000 };
		while (nanosleep(&t, &t) && errno == EINTR)
			;
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "quick"))
		return 9;
	int st;

	printf("== SIGSTOP, SIGCONT, SIGTERM\n");
	pid_t c = spawn(argv[0], "spin");
	CHECK(c > 0);
	CHECK_OK(kill(c, SIGSTOP));
	CHECK_EQ(waitpid(c, &st, WUNTRACED), c);
	CHECK(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
	CHECK_EQ(waitpid(c, &st, WNOHANG | WUNTRACED), 0); /* reported once */
	CHECK_OK(kill(c, SIGCONT));
	CHECK_EQ(waitpid(c, &st, WCONTINUED), c);
	CHECK(WIFCONTINUED(st));
	CHECK_OK(kill(c, SIGTERM));
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);

	printf("== a stopped sleeper resumes and finishes\n");
	c = spawn(argv[0], "nap");
	struct timespec t = { 0, 50000000 };
	nanosleep(&t, NULL);
	CHECK_OK(kill(c, SIGTSTP));
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	CHECK_OK(waitid(P_PID, c, &si, WSTOPPED));
	CHECK_EQ(si.si_code, CLD_STOPPED);
	CHECK_EQ(si.si_status, SIGTSTP);
	CHECK_OK(kill(c, SIGCONT));
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	printf("== SIGKILL ends a stopped process\n");
	c = spawn(argv[0], "spin");
	CHECK_OK(kill(c, SIGSTOP));
	CHECK_EQ(waitpid(c, &st, WUNTRACED), c);
	CHECK_OK(kill(c, SIGKILL));
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

	printf("== zombies exist until reaped\n");
	c = spawn(argv[0], "quick");
	nanosleep(&t, NULL);
	CHECK_OK(kill(c, 0));
	memset(&si, 0, sizeof(si));
	CHECK_OK(waitid(P_PID, c, &si, WEXITED | WNOWAIT));
	CHECK_EQ(si.si_status, 9);
	CHECK_OK(kill(c, 0));
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK_EQ(WEXITSTATUS(st), 9);
	CHECK_ERR(kill(c, 0), ESRCH);
	return checks_done();
}
