/* Record locks (fcntl F_GETLK/F_SETLK/F_SETLKW, the OFD commands) and
 * flock(2): Linux's errno rules, splitting and merging, owners (a process
 * for POSIX locks, an open file description for OFD locks and flock),
 * release on close and exit, waits ended by a release or a signal, and
 * deadlock detection, between two processes (this program spawned again).
 *
 * With "host FILE" it is the guest side of tests/cli.rs's test against a
 * host process instead (see there). */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;
static char *self;
static char path[64];

static int lk(int fd, int cmd, int type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
	return fcntl(fd, cmd, &fl);
}

/* F_GETLK (or F_OFD_GETLK) for `type` over [start, start+len): what is in
 * the way, as "T start len" (T: R, W or - for none), and its owner's pid. */
static const char *getlk(int fd, int cmd, int type, off_t start, off_t len, pid_t *pid)
{
	static char out[64];
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
	if (fcntl(fd, cmd, &fl) != 0)
		return "error";
	if (fl.l_type == F_UNLCK)
		return "-";
	if (pid)
		*pid = fl.l_pid;
	snprintf(out, sizeof out, "%c %lld %lld", fl.l_type == F_RDLCK ? 'R' : 'W', (long long)fl.l_start,
		 (long long)fl.l_len);
	return out;
}

static pid_t spawn(const char *what)
{
	char *args[] = { self, (char *)what, path, NULL };
	pid_t pid;
	if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0)
		return -1;
	return pid;
}

static int status_of(pid_t pid)
{
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* Arms SIGALRM in `ms` milliseconds, its handler without SA_RESTART. */
static void alarm_in(int ms)
{
	nomu_handle(SIGALRM, on_alarm, 0);
	struct itimerval it = { { 0, 0 }, { ms / 1000, (ms % 1000) * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

/* The second process: one look or action on the parent's file. */
static int child(const char *what)
{
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return 100;
	pid_t pid = 0;
	if (!strcmp(what, "split")) {
		printf("child: [10,20) W: %s\n", getlk(fd, F_GETLK, F_WRLCK, 10, 10, &pid));
		printf("child: owner is the parent: %d\n", pid == getppid());
		printf("child: [15,16) R: %s\n", getlk(fd, F_GETLK, F_RDLCK, 15, 1, NULL));
		printf("child: [5,6) R: %s\n", getlk(fd, F_GETLK, F_RDLCK, 5, 1, NULL));
		printf("child: [50,51) R: %s\n", getlk(fd, F_GETLK, F_RDLCK, 50, 1, NULL));
		printf("child: [200,EOF) W: %s\n", getlk(fd, F_GETLK, F_WRLCK, 200, 0, NULL));
		errno = 0;
		int r = lk(fd, F_SETLK, F_WRLCK, 0, 1);
		printf("child: F_SETLK [0,1) W: %d %s\n", r, strerror(errno));
		printf("child: F_SETLK [15,16) R: %d\n", lk(fd, F_SETLK, F_RDLCK, 15, 1));
		/* The parent's OFD view: a POSIX lock of another process. */
		printf("child: OFD [0,1) W: %s\n", getlk(fd, F_OFD_GETLK, F_WRLCK, 0, 1, &pid));
		printf("child: OFD owner is the parent: %d\n", pid == getppid());
		return 0;
	}
	if (!strcmp(what, "merged")) {
		printf("child: [50,51) R: %s\n", getlk(fd, F_GETLK, F_RDLCK, 50, 1, NULL));
		printf("child: [45,46) W: %s\n", getlk(fd, F_GETLK, F_WRLCK, 45, 1, NULL));
		printf("child: [30,31) W: %s\n", getlk(fd, F_GETLK, F_WRLCK, 30, 1, NULL));
		printf("child: [70,71) W: %s\n", getlk(fd, F_GETLK, F_WRLCK, 70, 1, NULL));
		return 0;
	}
	if (!strcmp(what, "look")) {
		printf("child: [0,EOF) W: %s\n", getlk(fd, F_GETLK, F_WRLCK, 0, 0, NULL));
		return 0;
	}
	if (!strcmp(what, "wait")) {
		/* Waits for the parent to let go of [0,1); a signal whose handler
		 * has SA_RESTART comes meanwhile, and the wait goes on. */
		nomu_handle(SIGALRM, on_alarm, SA_RESTART);
		struct itimerval it = { { 0, 0 }, { 0, 50000 } };
		setitimer(ITIMER_REAL, &it, NULL);
		printf("child: F_SETLKW [0,1) W: %d\n", lk(fd, F_SETLKW, F_WRLCK, 0, 1));
		fflush(stdout);
		return 0;
	}
	if (!strcmp(what, "interrupted")) {
		alarm_in(100);
		errno = 0;
		int r = lk(fd, F_SETLKW, F_WRLCK, 0, 1);
		printf("child: F_SETLKW interrupted: %d %s\n", r, strerror(errno));
		int other = open(path, O_RDWR);
		alarm_in(100);
		errno = 0;
		r = flock(other, LOCK_EX);
		printf("child: flock interrupted: %d %s\n", r, strerror(errno));
		alarm_in(100);
		errno = 0;
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
		r = fcntl(other, F_OFD_SETLKW, &fl);
		printf("child: F_OFD_SETLKW interrupted: %d %s\n", r, strerror(errno));
		return 0;
	}
	if (!strcmp(what, "deadlock")) {
		/* Holds [1,2), then waits for the parent's [0,1). */
		if (lk(fd, F_SETLK, F_WRLCK, 1, 1) != 0)
			return 101;
		int r = lk(fd, F_SETLKW, F_WRLCK, 0, 1);
		printf("child: waited for [0,1): %d\n", r);
		fflush(stdout);
		return 0;
	}
	if (!strcmp(what, "flock")) {
		errno = 0;
		int r = flock(fd, LOCK_EX | LOCK_NB);
		printf("child: flock LOCK_EX|LOCK_NB: %d %s\n", r, strerror(errno));
		errno = 0;
		r = flock(fd, LOCK_SH | LOCK_NB);
		printf("child: flock LOCK_SH|LOCK_NB: %d %s\n", r, strerror(errno));
		return 0;
	}
	return 102;
}

/* A host process holds locks on FILE (tests/cli.rs): write [0,10) by
 * fcntl and LOCK_EX by flock. This guest must see and respect them, then
 * take its own where the host process then looks. */
static int host_side(void)
{
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	pid_t pid = 0;
	printf("guest: [0,1) W: %s\n", getlk(fd, F_GETLK, F_WRLCK, 0, 1, &pid));
	CHECK(pid != getpid() && pid > 0);
	CHECK_ERR(lk(fd, F_SETLK, F_RDLCK, 5, 1), EAGAIN);
	CHECK_ERR(lk(fd, F_OFD_SETLK, F_RDLCK, 5, 1), EAGAIN);
	CHECK_ERR(flock(fd, LOCK_SH | LOCK_NB), EWOULDBLOCK);
	alarm_in(100);
	CHECK_ERR(lk(fd, F_SETLKW, F_WRLCK, 0, 1), EINTR);
	alarm_in(100);
	CHECK_ERR(flock(fd, LOCK_EX), EINTR);
	CHECK_OK(lk(fd, F_SETLK, F_WRLCK, 100, 10));
	int other = open(path, O_RDWR);
	CHECK_OK(lk(other, F_OFD_SETLK, F_RDLCK, 200, 10));
	printf("guest: locked\n");
	fflush(stdout);
	/* The host process looks, then lets go of its own locks and says so. */
	char c;
	CHECK_EQ(read(0, &c, 1), 1);
	CHECK_OK(lk(fd, F_SETLKW, F_WRLCK, 0, 10));
	CHECK_OK(flock(fd, LOCK_EX));
	printf("guest: got the host's locks\n");
	fflush(stdout);
	/* It looks again, and then the guest leaves (its locks with it). */
	CHECK_EQ(read(0, &c, 1), 1);
	return checks_done();
}

int main(int argc, char **argv)
{
	self = argv[0];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "host")) {
		snprintf(path, sizeof path, "%s", argv[2]);
		return host_side();
	}
	if (argc == 3) {
		snprintf(path, sizeof path, "%s", argv[2]);
		return child(argv[1]);
	}
	/* Unique: every nomu's first guest has the same pid. */
	snprintf(path, sizeof path, "/tmp/nomu-locks-XXXXXX");
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "0123456789", 10), 10);
	int rd = open(path, O_RDONLY), wr = open(path, O_WRONLY);

	/* Linux's errno rules. */
	CHECK_ERR(lk(fd, F_GETLK, F_UNLCK, 0, 1), EINVAL);
	CHECK_ERR(lk(fd, F_GETLK, 7, 0, 1), EINVAL);
	CHECK_ERR(lk(fd, F_SETLK, 7, 0, 1), EINVAL);
	CHECK_ERR(lk(rd, F_SETLK, F_WRLCK, 0, 1), EBADF);
	CHECK_ERR(lk(wr, F_SETLK, F_RDLCK, 0, 1), EBADF);
	CHECK_OK(lk(rd, F_SETLK, F_UNLCK, 0, 1));
	CHECK_ERR(lk(fd, F_SETLK, F_WRLCK, -1, 1), EINVAL);
	CHECK_ERR(lk(fd, F_SETLK, F_WRLCK, 0, -1), EINVAL);
	CHECK_ERR(lk(fd, F_SETLK, F_WRLCK, LLONG_MAX, 2), EOVERFLOW);
	CHECK_ERR(lk(fd, F_SETLK, F_WRLCK, 2, LLONG_MAX), EOVERFLOW);
	struct flock bad = { .l_type = F_WRLCK, .l_whence = 3 };
	CHECK_ERR(fcntl(fd, F_SETLK, &bad), EINVAL);
	struct flock ofd = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1, .l_pid = 1 };
	CHECK_ERR(fcntl(fd, F_OFD_SETLK, &ofd), EINVAL);
	CHECK_ERR(fcntl(fd, F_OFD_GETLK, &ofd), EINVAL);
	CHECK_ERR(syscall(SYS_fcntl, fd, F_GETLK, (void *)8), EFAULT);
	CHECK_ERR(syscall(SYS_fcntl, 999, F_GETLK, &bad), EBADF);
	int opath = open(path, O_PATH);
	CHECK_ERR(lk(opath, F_SETLK, F_RDLCK, 0, 1), EBADF);
	CHECK_ERR(flock(opath, LOCK_SH), EBADF);
	close(opath);
	CHECK_ERR(flock(fd, 0), EINVAL);
	CHECK_ERR(flock(fd, LOCK_SH | LOCK_EX), EINVAL);

	/* SEEK_CUR and SEEK_END and a negative length, as F_GETLK reports them
	 * to another process. */
	lseek(fd, 4, SEEK_SET);
	struct flock cur = { .l_type = F_WRLCK, .l_whence = SEEK_CUR, .l_start = 2, .l_len = -3 };
	CHECK_OK(fcntl(fd, F_SETLK, &cur));
	/* One's own locks never get in one's way. */
	printf("own [0,EOF) W: %s\n", getlk(fd, F_GETLK, F_WRLCK, 0, 0, NULL));
	CHECK_EQ(status_of(spawn("look")), 0);
	CHECK_OK(lk(fd, F_SETLK, F_UNLCK, 0, 0));
	struct flock end = { .l_type = F_RDLCK, .l_whence = SEEK_END, .l_start = -2, .l_len = 0 };
	CHECK_OK(fcntl(fd, F_SETLK, &end));
	CHECK_EQ(status_of(spawn("look")), 0);
	CHECK_OK(lk(fd, F_SETLK, F_UNLCK, 0, 0));

	/* Splitting: a read lock in the middle of a write lock. */
	CHECK_OK(lk(fd, F_SETLK, F_WRLCK, 0, 100));
	CHECK_OK(lk(fd, F_SETLK, F_RDLCK, 10, 10));
	CHECK_EQ(status_of(spawn("split")), 0);
	/* Merging: a write lock over the read one makes one lock again; then
	 * an unlock in the middle and a read lock touching a write lock. */
	CHECK_OK(lk(fd, F_SETLK, F_WRLCK, 10, 10));
	CHECK_OK(lk(fd, F_SETLK, F_UNLCK, 40, 20));
	CHECK_OK(lk(fd, F_SETLK, F_RDLCK, 60, 20));
	CHECK_EQ(status_of(spawn("merged")), 0);

	/* Closing any descriptor of the file drops the process's locks. */
	int again = open(path, O_RDONLY);
	close(again);
	CHECK_EQ(status_of(spawn("look")), 0);

	/* A wait that a release ends, and the waiter's lock gone at its exit. */
	CHECK_OK(lk(fd, F_SETLK, F_WRLCK, 0, 1));
	pid_t waiter = spawn("wait");
	nomu_sleep_ms(200);
	printf("parent: letting go\n");
	CHECK_OK(lk(fd, F_SETLK, F_UNLCK, 0, 1));
	CHECK_EQ(status_of(waiter), 0);
	printf("after the waiter: %s\n", getlk(fd, F_GETLK, F_WRLCK, 0, 0, NULL));

	/* Waits that a signal ends: EINTR without SA_RESTART (POSIX and OFD
	 * locks wait for the parent's POSIX lock, flock for its flock). */
	CHECK_OK(lk(fd, F_SETLK, F_WRLCK, 0, 1));
	CHECK_OK(flock(fd, LOCK_EX));
	CHECK_EQ(status_of(spawn("interrupted")), 0);
	CHECK_OK(flock(fd, LOCK_UN));

	/* Deadlock: the child holds [1,2) and waits for the parent's [0,1);
	 * the parent's wait for [1,2) would close the circle. */
	pid_t dl = spawn("deadlock");
	nomu_sleep_ms(300);
	CHECK_ERR(lk(fd, F_SETLKW, F_WRLCK, 1, 1), EDEADLK);
	CHECK_ERR(lk(fd, F_SETLK, F_WRLCK, 1, 1), EAGAIN);
	CHECK_OK(lk(fd, F_SETLK, F_UNLCK, 0, 1));
	CHECK_EQ(status_of(dl), 0);

	/* OFD locks: owned by the open file description. */
	int a = open(path, O_RDWR), b = open(path, O_RDWR), a2 = dup(a);
	CHECK_OK(lk(a, F_OFD_SETLK, F_WRLCK, 0, 10));
	CHECK_ERR(lk(b, F_OFD_SETLK, F_RDLCK, 5, 1), EAGAIN);
	printf("OFD through a dup: %s\n", getlk(a2, F_OFD_GETLK, F_WRLCK, 0, 10, NULL));
	printf("OFD through another open: %s\n", getlk(b, F_OFD_GETLK, F_WRLCK, 0, 10, NULL));
	/* OFD and POSIX locks conflict, even in one process, even through one
	 * descriptor. */
	CHECK_ERR(lk(a, F_SETLK, F_RDLCK, 5, 1), EAGAIN);
	printf("POSIX test against OFD: %s\n", getlk(fd, F_GETLK, F_RDLCK, 0, 0, NULL));
	close(a);
	CHECK_ERR(lk(b, F_OFD_SETLK, F_RDLCK, 5, 1), EAGAIN);
	close(a2);
	CHECK_OK(lk(b, F_OFD_SETLK, F_RDLCK, 5, 1));
	CHECK_OK(lk(b, F_OFD_SETLK, F_UNLCK, 0, 0));
	CHECK_OK(lk(fd, F_SETLK, F_WRLCK, 20, 5));
	pid_t mine = 0;
	printf("OFD test against own POSIX: %s\n", getlk(b, F_OFD_GETLK, F_WRLCK, 0, 0, &mine));
	CHECK_EQ(mine, getpid());
	CHECK_ERR(lk(b, F_OFD_SETLK, F_RDLCK, 22, 1), EAGAIN);
	CHECK_OK(lk(fd, F_SETLK, F_UNLCK, 0, 0));
	close(b);

	/* flock: owned by the open file description too. */
	a = open(path, O_RDONLY), b = open(path, O_RDONLY), a2 = dup(a);
	CHECK_OK(flock(a, LOCK_EX));
	CHECK_ERR(flock(b, LOCK_SH | LOCK_NB), EWOULDBLOCK);
	CHECK_OK(flock(a2, LOCK_SH | LOCK_NB));
	CHECK_EQ(status_of(spawn("flock")), 0);
	close(a);
	CHECK_ERR(flock(b, LOCK_EX | LOCK_NB), EWOULDBLOCK);
	close(a2);
	CHECK_OK(flock(b, LOCK_EX | LOCK_NB));
	close(b);

	close(rd);
	close(wr);
	close(fd);
	unlink(path);
	return checks_done();
}
