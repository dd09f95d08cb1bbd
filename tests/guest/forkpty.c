/* A pseudo-terminal as a session's controlling terminal (TIOCSCTTY), as
 * login_tty, forkpty, script(1) and CPython's pty.fork take one: only a
 * session leader without one may, asking again is no error, and a
 * terminal that is another session's stays that session's (EPERM, also
 * for root asking with 0). Then forkpty itself: the child's output
 * reaches the master. (Regression: TIOCSCTTY was ENOTTY, so forkpty's
 * child exited 1 at once.) */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pty.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

/* Runs `fn(arg)` in a child and returns its exit status (or -1). */
static int in_child(int (*fn)(int), int arg)
{
	pid_t c = fork();
	if (c == 0)
		_exit(fn(arg));
	int status;
	if (c < 0 || waitpid(c, &status, 0) != c || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Exit codes: 0 as expected, else the step that went wrong. */
static int not_a_leader(int slave)
{
	/* A member of its parent's session, not its leader. */
	return ioctl(slave, TIOCSCTTY, 0) == -1 && errno == EPERM ? 0 : 1;
}

static int second_session(int slave)
{
	if (setsid() < 0)
		return 1;
	/* The terminal is the first session's (its leader still runs). */
	return ioctl(slave, TIOCSCTTY, 0) == -1 && errno == EPERM ? 0 : 2;
}

static int leader(int slave)
{
	if (setsid() < 0)
		return 1;
	if (ioctl(slave, TIOCSCTTY, 0) != 0)
		return 2;
	if (ioctl(slave, TIOCSCTTY, 0) != 0) /* already ours: no error */
		return 3;
	/* A process of the session that is not its leader may not. */
	if (in_child(not_a_leader, slave) != 0)
		return 4;
	/* Nor a leader of another session while this one holds it. */
	if (in_child(second_session, slave) != 0)
		return 5;
	return 0;
}

int main(void)
{
	int master, slave;
	CHECK_OK(openpty(&master, &slave, NULL, NULL, NULL));
	CHECK_EQ(in_child(not_a_leader, slave), 0);
	CHECK_EQ(in_child(leader, slave), 0);
	/* Its leader gone, the terminal may be another session's. */
	CHECK_EQ(in_child(leader, slave), 0);
	close(slave);
	close(master);

	pid_t c = forkpty(&master, NULL, NULL, NULL);
	if (c == 0) {
		printf("child on a terminal: %d\n", isatty(1));
		fflush(stdout);
		_exit(4);
	}
	CHECK(c > 0);
	char out[256] = {0};
	size_t got = 0;
	ssize_t n;
	/* Until the child's end closes the slave: EIO, or 0. */
	while (got < sizeof out - 1 && (n = read(master, out + got, sizeof out - 1 - got)) > 0)
		got += n;
	int status = -1;
	CHECK_EQ(waitpid(c, &status, 0), c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 4);
	CHECK(strstr(out, "child on a terminal: 1") != NULL);
	printf("forkpty: %s", strstr(out, "child") ? strstr(out, "child") : "(nothing)\n");
	return checks_done();
}
