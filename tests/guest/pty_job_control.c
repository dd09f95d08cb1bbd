/* Job control on a pseudo-terminal a program made (script, tmux, ssh,
 * expect): the terminal is the controlling terminal of the session whose
 * leader opened it (without O_NOCTTY), with that session's own foreground
 * group; /dev/tty names it; ps reads it from /proc/PID/stat. A process of
 * another session reads it freely and gets ENOTTY asking its foreground
 * group; a background group of its session is stopped by SIGTTIN (EIO
 * when ignored) until tcsetpgrp moves it to the foreground; its
 * leader's exit hangs up the foreground group (SIGHUP). The terminal's
 * keys and resizes signal its foreground group: a window size set through
 * the master sends SIGWINCH, a Ctrl-C typed there SIGINT. (Regressions:
 * all terminals shared one foreground group, that of the terminal nomu
 * runs on, so `echo x | script -qc "head -1"` stopped head for good; and
 * a Ctrl-C typed into script or tmux reached nobody.) */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pty.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

static char slave_name[64];
/* A pipe a hung-up grandchild reports SIGHUP on. */
static int hup_pipe[2];

/* Reads one line from the terminal; 1 if it was `want`. */
static int read_line(int fd, const char *want)
{
	char buf[64] = {0};
	ssize_t n = read(fd, buf, sizeof buf - 1);
	return n > 0 && strcmp(buf, want) == 0;
}

/* /proc/self/stat's tty_nr and tpgid (fields 7 and 8). */
static void stat_tty(long *tty_nr, long *tpgid)
{
	*tty_nr = *tpgid = -2;
	const char *p = strrchr(nomu_slurp("/proc/self/stat"), ')');
	if (p)
		sscanf(p + 2, "%*c %*d %*d %*d %ld %ld", tty_nr, tpgid);
}

static void on_winch(int sig)
{
	(void)sig;
	_exit(7);
}

static void on_hangup(int sig)
{
	(void)sig;
	write(hup_pipe[1], "H", 1);
	_exit(0);
}

/* A process of the session in a group of its own: exit code 0 when its
 * reads went as `mode` says. */
static int background(int tty, const char *mode)
{
	setpgid(0, 0);
	if (strcmp(mode, "ignored") == 0) {
		signal(SIGTTIN, SIG_IGN);
		char c;
		return read(tty, &c, 1) == -1 && errno == EIO ? 0 : 1;
	}
	if (strcmp(mode, "hangup") == 0) {
		/* SIGHUP was blocked before the fork: the handler is in place
		 * before it can come. */
		sigset_t none;
		sigemptyset(&none);
		signal(SIGHUP, on_hangup);
		for (;;)
			sigsuspend(&none);
	}
	if (strcmp(mode, "winch") == 0) {
		/* SIGWINCH was blocked before the fork, as SIGHUP below. */
		sigset_t none;
		sigemptyset(&none);
		signal(SIGWINCH, on_winch);
		for (;;)
			sigsuspend(&none);
	}
	if (strcmp(mode, "interrupted") == 0)
		for (;;)
			pause();
	/* Stopped by SIGTTIN, then read in the foreground. */
	return read_line(tty, "three\n") ? 0 : 2;
}

static pid_t start_background(int tty, const char *mode)
{
	pid_t c = fork();
	if (c == 0)
		_exit(background(tty, mode));
	return c;
}

/* A job in `mode` made the terminal's foreground group, `sig` (0: none)
 * blocked across its fork so that its handler is in place first; -1 if
 * tcsetpgrp failed. */
static pid_t foreground_job(int tty, const char *mode, int sig)
{
	sigset_t set;
	sigemptyset(&set);
	if (sig)
		sigaddset(&set, sig);
	sigprocmask(SIG_BLOCK, &set, NULL);
	pid_t job = start_background(tty, mode);
	setpgid(job, job);
	return tcsetpgrp(tty, job) == 0 ? job : -1;
}

/* The session leader: exit code 0, or the step that failed. */
static int session(int report)
{
	if (setsid() < 0)
		return 1;
	int tty = open(slave_name, O_RDWR); /* no O_NOCTTY: it is ours now */
	if (tty < 0)
		return 2;
	if (tcgetpgrp(tty) != getpid())
		return 3;
	/* /dev/tty is the same terminal (its own device node on Linux). */
	struct stat by_name;
	int again = open("/dev/tty", O_RDWR);
	if (again < 0 || tcgetpgrp(again) != getpid() || fstat(tty, &by_name))
		return 4;
	close(again);
	long tty_nr, tpgid;
	stat_tty(&tty_nr, &tpgid);
	unsigned maj = major(by_name.st_rdev), min = minor(by_name.st_rdev);
	if (tty_nr != (long)((min & 0xff) | (maj << 8) | ((min & ~0xffu) << 12)) || tpgid != getpid())
		return 5;
	/* In the foreground: read. */
	if (!read_line(tty, "one\n"))
		return 6;
	/* Tell the test, and wait while it looks at the terminal. */
	char ack;
	if (write(report, "R", 1) != 1 || read(report, &ack, 1) != 1)
		return 7;

	/* In the background, SIGTTIN ignored: EIO. */
	int status;
	pid_t bg = start_background(tty, "ignored");
	if (waitpid(bg, &status, 0) != bg || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 8;
	/* Else stopped, until it is the foreground and continued. */
	bg = start_background(tty, "stopped");
	if (waitpid(bg, &status, WUNTRACED) != bg || !WIFSTOPPED(status) || WSTOPSIG(status) != SIGTTIN)
		return 9;
	if (tcsetpgrp(tty, 0x3fffffff) != -1 || errno != ESRCH)
		return 10;
	if (tcsetpgrp(tty, getppid()) != -1 || errno != EPERM) /* another session's group */
		return 11;
	if (tcsetpgrp(tty, bg) != 0 || tcgetpgrp(tty) != bg)
		return 12;
	kill(bg, SIGCONT);
	if (waitpid(bg, &status, 0) != bg || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 13;
	/* The leader, now in the background, moves itself back (SIGTTOU
	 * ignored, as shells do). */
	signal(SIGTTOU, SIG_IGN);
	if (tcsetpgrp(tty, getpid()) != 0)
		return 14;

	/* The test resizes the terminal, then types Ctrl-C: each reaches the
	 * foreground group of the moment. */
	bg = foreground_job(tty, "winch", SIGWINCH);
	if (bg < 0 || write(report, "W", 1) != 1)
		return 16;
	if (waitpid(bg, &status, 0) != bg || !WIFEXITED(status) || WEXITSTATUS(status) != 7)
		return 17;
	bg = foreground_job(tty, "interrupted", 0);
	if (bg < 0 || write(report, "C", 1) != 1)
		return 18;
	if (waitpid(bg, &status, 0) != bg || !WIFSIGNALED(status) || WTERMSIG(status) != SIGINT)
		return 19;
	if (tcsetpgrp(tty, getpid()) != 0)
		return 20;

	/* Its exit hangs up the foreground group it leaves. */
	if (foreground_job(tty, "hangup", SIGHUP) < 0)
		return 15;
	return 0;
}

int main(void)
{
	int master, slave, report[2];
	CHECK_OK(openpty(&master, &slave, NULL, NULL, NULL));
	CHECK_OK(ptsname_r(master, slave_name, sizeof slave_name));
	/* No session's terminal yet. */
	CHECK_ERR(tcgetpgrp(slave), ENOTTY);
	CHECK_EQ(tcgetpgrp(master), 0);
	CHECK_EQ(write(master, "one\ntwo\nthree\n", 14), 14);

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, report));
	CHECK_OK(pipe(hup_pipe));
	pid_t c = fork();
	if (c == 0) {
		close(report[0]);
		close(hup_pipe[0]);
		_exit(session(report[1]));
	}
	close(report[1]);
	close(hup_pipe[1]);
	char r = 0;
	CHECK_EQ(read(report[0], &r, 1), 1);
	/* The session's: its foreground group through the master, ENOTTY
	 * through the slave to a process of another session, which reads it
	 * without job control. */
	CHECK_EQ(tcgetpgrp(master), c);
	CHECK_ERR(tcgetpgrp(slave), ENOTTY);
	CHECK(read_line(slave, "two\n"));
	CHECK_EQ(write(report[0], "A", 1), 1);
	struct winsize ws = {.ws_row = 33, .ws_col = 99};
	CHECK_EQ(read(report[0], &r, 1), 1);
	CHECK_EQ(r, 'W');
	CHECK_OK(ioctl(master, TIOCSWINSZ, &ws));
	CHECK_EQ(read(report[0], &r, 1), 1);
	CHECK_EQ(r, 'C');
	CHECK_EQ(write(master, "\003", 1), 1);
	int status;
	CHECK_EQ(waitpid(c, &status, 0), c);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	/* The hung-up group's SIGHUP, and the terminal free again. */
	char h = 0;
	CHECK_EQ(read(hup_pipe[0], &h, 1), 1);
	CHECK_EQ(h, 'H');
	CHECK_EQ(tcgetpgrp(master), 0);
	return checks_done();
}
