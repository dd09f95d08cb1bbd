/* inotify: Linux's errno rules, events for files made, written, renamed and
 * removed in a watched directory, in order, with their names; symlinks
 * followed or not; non-blocking and blocking reads (a signal ends one, or
 * restarts it under SA_RESTART while its handler makes an event); poll
 * readiness, FIONREAD, and IN_IGNORED after inotify_rm_watch. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <poll.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>

static char dir[64], made_by_handler[96];

static void show(int fd)
{
	char buf[4096] __attribute__((aligned(8)));
	ssize_t n = read(fd, buf, sizeof buf);
	if (n < 0) {
		printf("read: %s\n", strerror(errno));
		return;
	}
	for (char *p = buf; p < buf + n;) {
		struct inotify_event *e = (struct inotify_event *)p;
		printf("  wd %d mask %#x%s%s\n", e->wd, e->mask, e->len ? " " : "", e->len ? e->name : "");
		p += sizeof *e + e->len;
	}
}

static void on_alarm(int sig)
{
	(void)sig;
	if (made_by_handler[0])
		close(open(made_by_handler, O_CREAT | O_WRONLY, 0600));
}

static void alarm_in(int ms, int flags)
{
	nomu_handle(SIGALRM, on_alarm, flags);
	struct itimerval it = { { 0, 0 }, { 0, ms * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(dir, sizeof dir, "/tmp/nomu-inotify-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	char file[96], moved[96], link[96], dangling[96];
	snprintf(file, sizeof file, "%s/file", dir);
	snprintf(moved, sizeof moved, "%s/moved", dir);
	snprintf(link, sizeof link, "%s/link", dir);
	snprintf(dangling, sizeof dangling, "%s/dangling", dir);

	CHECK_ERR(inotify_init1(0x1234), EINVAL);
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	CHECK(in >= 0);
	CHECK_EQ(fcntl(in, F_GETFD), FD_CLOEXEC);
	CHECK_ERR(inotify_add_watch(in, dir, 0), EINVAL);
	CHECK_ERR(inotify_add_watch(in, dir, IN_CREATE | IN_MASK_ADD | IN_MASK_CREATE), EINVAL);
	CHECK_ERR(inotify_add_watch(-1, dir, IN_CREATE), EBADF);
	CHECK_ERR(inotify_add_watch(0, dir, IN_CREATE), EINVAL);
	CHECK_ERR(inotify_add_watch(in, "/nonexistent/x", IN_CREATE), ENOENT);
	CHECK_ERR(inotify_add_watch(in, (char *)8, IN_CREATE), EFAULT);
	CHECK_ERR(inotify_rm_watch(in, 99), EINVAL);
	CHECK_ERR(inotify_rm_watch(0, 1), EINVAL);
	CHECK_ERR(read(in, file, 1), EAGAIN);

	int wd = inotify_add_watch(in, dir, IN_ALL_EVENTS & ~(IN_ACCESS | IN_CLOSE_NOWRITE | IN_OPEN));
	printf("directory watch: %d\n", wd);
	CHECK_EQ(inotify_add_watch(in, dir, IN_CREATE | IN_MASK_CREATE), -1);
	CHECK_EQ(errno, EEXIST);
	struct pollfd pfd = { in, POLLIN, 0 };
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	int f = open(file, O_CREAT | O_WRONLY, 0600);
	CHECK_EQ(write(f, "x", 1), 1);
	close(f);
	CHECK_OK(rename(file, moved));
	CHECK_OK(symlink("moved", link));
	CHECK_OK(symlink("nowhere", dangling));
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	int avail = 0;
	CHECK_OK(ioctl(in, FIONREAD, &avail));
	CHECK(avail > 0);
	char tiny[8];
	CHECK_ERR(read(in, tiny, sizeof tiny), EINVAL);
	printf("events:\n");
	show(in);

	/* The file, through the symlink or not. */
	CHECK_ERR(inotify_add_watch(in, moved, IN_MODIFY | IN_ONLYDIR), ENOTDIR);
	int fwd = inotify_add_watch(in, link, IN_MODIFY);
	printf("file watch through the link: %d\n", fwd);
	CHECK_ERR(inotify_add_watch(in, dangling, IN_ATTRIB), ENOENT);
	int lwd = inotify_add_watch(in, dangling, IN_ATTRIB | IN_DONT_FOLLOW);
	printf("dangling link's own watch: %d\n", lwd);
	f = open(moved, O_WRONLY);
	CHECK_EQ(write(f, "y", 1), 1);
	close(f);
	printf("after a write:\n");
	show(in);
	CHECK_OK(inotify_rm_watch(in, fwd));
	printf("after rm_watch:\n");
	show(in);

	/* A blocking instance: a signal ends a read (EINTR), or, under
	 * SA_RESTART, the read goes on and gets the event its handler made. */
	int bl = inotify_init();
	CHECK(bl >= 0);
	CHECK_EQ(inotify_add_watch(bl, dir, IN_CREATE), 1);
	alarm_in(100, 0);
	CHECK_ERR(read(bl, file, sizeof file), EINTR);
	snprintf(made_by_handler, sizeof made_by_handler, "%s/by-handler", dir);
	alarm_in(100, SA_RESTART);
	printf("woken by the handler's file:\n");
	show(bl);
	close(bl);

	unlink(made_by_handler);
	unlink(moved);
	unlink(link);
	unlink(dangling);
	rmdir(dir);
	printf("after removing the directory:\n");
	show(in);
	close(in);
	return checks_done();
}
