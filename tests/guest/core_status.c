/* A process killed by a signal whose default action dumps core (SIGQUIT,
 * SIGABRT, SIGSEGV) with RLIMIT_CORE 0 writes no core, and its wait
 * status says so: WCOREDUMP false, waitid's CLD_KILLED (Linux reports a
 * core only when it wrote one). (Regression: nomu said "core dumped",
 * and bash printed "Quit (core dumped)".) */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

extern char **environ;

static pid_t start(const char *self, const char *sig)
{
	char *args[] = {(char *)self, (char *)sig, NULL};
	pid_t pid = vfork();
	if (pid == 0) {
		execve(self, args, environ);
		_exit(99);
	}
	return pid;
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		int sig = atoi(argv[1]);
		signal(sig, SIG_DFL);
		raise(sig);
		return 98;
	}
	struct rlimit none = {0, 0};
	CHECK_OK(setrlimit(RLIMIT_CORE, &none));
	int sigs[] = {SIGQUIT, SIGABRT, SIGSEGV, SIGTERM};
	for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		char arg[8];
		snprintf(arg, sizeof arg, "%d", sigs[i]);
		pid_t pid = start(argv[0], arg);
		CHECK(pid > 0);
		siginfo_t info;
		CHECK_OK(waitid(P_PID, pid, &info, WEXITED | WNOWAIT));
		CHECK_EQ(info.si_code, CLD_KILLED);
		CHECK_EQ(info.si_status, sigs[i]);
		int status;
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sigs[i]);
		CHECK(!WCOREDUMP(status));
	}
	return checks_done();
}
