/* The program nomu runs first (its pid 1) gets signals as it does when run
 * directly: a signal raised while blocked stays pending until taken, kill
 * of itself works, abort() dies of SIGABRT, raise(SIGTERM) of SIGTERM
 * (regression: nomu gave it Linux init's protection, so all of these were
 * discarded, and abort() ended in SIGSEGV). What it leaves running in the
 * background is not killed when it exits: the background child's line
 * comes after the program's own. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t got;
static void on_signal(int sig) { got = sig; }

static void nap(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "abort"))
		abort();
	if (argc > 1 && !strcmp(argv[1], "term")) {
		raise(SIGTERM);
		return 1;
	}
	if (argc > 1 && !strcmp(argv[1], "kill")) {
		kill(getpid(), SIGKILL);
		return 1;
	}
	if (argc > 1 && !strcmp(argv[1], "background")) {
		nap(300);
		printf("background child: still running after its parent\n");
		return 0;
	}

	printf("== a blocked signal stays pending\n");
	sigset_t set, pending;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	CHECK_OK(sigprocmask(SIG_BLOCK, &set, NULL));
	CHECK_OK(raise(SIGUSR1));
	CHECK_OK(kill(getpid(), SIGTERM)); /* default action: terminate, but blocked */
	CHECK_OK(sigpending(&pending));
	CHECK(sigismember(&pending, SIGUSR1) && sigismember(&pending, SIGTERM));
	siginfo_t si;
	struct timespec zero = {0, 0};
	CHECK_EQ(sigtimedwait(&set, &si, &zero), SIGUSR1); /* lowest number first */
	CHECK_EQ(si.si_pid, getpid());
	CHECK_EQ(sigtimedwait(&set, &si, &zero), SIGTERM);
	CHECK_ERR(sigtimedwait(&set, &si, &zero), EAGAIN);
	CHECK_OK(sigprocmask(SIG_UNBLOCK, &set, NULL));

	printf("== kill of itself reaches its handler\n");
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	CHECK_OK(sigaction(SIGUSR2, &sa, NULL));
	CHECK_OK(kill(getpid(), SIGUSR2));
	CHECK_EQ(got, SIGUSR2);

	printf("== what it starts in the background outlives it\n");
	pid_t p;
	char *args[] = {argv[0], "background", NULL};
	CHECK_EQ(posix_spawn(&p, argv[0], NULL, NULL, args, environ), 0);
	printf("first program: exiting\n");
	fflush(stdout);
	return checks_done();
}
