/* A process group orphaned with a stopped member gets SIGHUP, then
 * SIGCONT (POSIX; Linux's kill_orphaned_pgrp): nothing outside it in its
 * session could continue it any more. Two ways: a session leader (an
 * interactive shell) exits with a stopped job; and the last process that
 * linked a group to its session (the parent of its only members, in
 * another group) exits, its stopped children going to a reaper in
 * another session. A group that keeps such a link is left stopped.
 * (Regression: the stopped jobs stayed stopped for good, and nomu with
 * them.) Each case runs in a session of its own, so the reaper of the
 * orphans (init natively, nomu's first program) is outside it. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <poll.h>
#include <stdlib.h>
#include <sys/wait.h>

static int hup_pipe[2];

static void on_hangup(int sig)
{
	(void)sig;
	if (write(hup_pipe[1], "H", 1) != 1)
		_exit(2);
	_exit(0);
}

/* Stops itself; SIGHUP, once it is continued, reports and ends it. */
static void stop_self(void)
{
	signal(SIGHUP, on_hangup);
	raise(SIGSTOP);
	for (;;)
		pause();
}

/* A job in a group of its own, stopped once this returns; -1 if not. */
static pid_t stopped_job(void)
{
	pid_t job = fork();
	if (job == 0) {
		setpgid(0, 0);
		stop_self();
	}
	setpgid(job, job);
	int status;
	if (waitpid(job, &status, WUNTRACED) != job || !WIFSTOPPED(status))
		return -1;
	return job;
}

/* A session leader with a stopped job: exits. */
static int shell_with_stopped_job(void)
{
	return stopped_job() > 0 ? 0 : 1;
}

/* In a group of its own, with a stopped child in that group: exits. */
static int link_to_stopped_child(void)
{
	pid_t child = fork();
	if (child == 0)
		stop_self();
	int status;
	if (waitpid(child, &status, WUNTRACED) != child || !WIFSTOPPED(status))
		return 1;
	return 0;
}

static int session_with_middle(void)
{
	pid_t middle = fork();
	if (middle == 0) {
		setpgid(0, 0);
		_exit(link_to_stopped_child());
	}
	setpgid(middle, middle);
	int status;
	if (waitpid(middle, &status, 0) != middle || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 1;
	return 0;
}

/* A stopped job whose session leader lives on: not orphaned, left
 * stopped (no SIGHUP) until the leader kills it. */
static int shell_keeps_its_job(void)
{
	pid_t job = stopped_job();
	int status;
	if (job < 0)
		return 1;
	struct pollfd p = {.fd = hup_pipe[0], .events = POLLIN};
	if (poll(&p, 1, 200) != 0)
		return 2;
	kill(job, SIGKILL);
	waitpid(job, &status, 0);
	return 0;
}

/* Runs `fn` in a new session; its exit status. */
static int in_session(int (*fn)(void))
{
	pid_t s = fork();
	if (s == 0) {
		if (setsid() < 0)
			_exit(9);
		_exit(fn());
	}
	int status;
	if (waitpid(s, &status, 0) != s || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Whether a hung-up process reported within 5 s. */
static int hung_up(void)
{
	struct pollfd p = {.fd = hup_pipe[0], .events = POLLIN};
	char c;
	return poll(&p, 1, 5000) == 1 && read(hup_pipe[0], &c, 1) == 1 && c == 'H';
}

int main(void)
{
	CHECK_OK(pipe(hup_pipe));
	CHECK_EQ(in_session(shell_keeps_its_job), 0);
	CHECK_EQ(in_session(shell_with_stopped_job), 0);
	CHECK(hung_up());
	CHECK_EQ(in_session(session_with_middle), 0);
	CHECK(hung_up());
	return checks_done();
}
