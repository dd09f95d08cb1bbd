/* RLIMIT_FSIZE (`ulimit -f`): a write to a regular file is cut to end at
 * the limit, and one that would start at or past it fails with EFBIG and
 * sends SIGXFSZ to the writer (SI_USER, from its own process); a file
 * grows past it by no truncate or fallocate. nomu recorded the limit and
 * enforced none of it (regression).
 *
 * - write, pwrite, writev, pwritev, O_APPEND, sendfile, copy_file_range
 *   and splice into the file: cut at the limit, then EFBIG;
 * - zero-length writes, pipes, and shrinking a file already past the
 *   limit are not limited; fallocate with FALLOC_FL_KEEP_SIZE neither;
 * - ftruncate, truncate and fallocate past it: EFBIG;
 * - without a handler, SIGXFSZ kills the writer. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define LIMIT 1000

static volatile int xfsz, xfsz_code = -1, xfsz_from_self;

static void on_xfsz(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	xfsz++;
	xfsz_code = si->si_code;
	xfsz_from_self = si->si_pid == getpid();
}

static char buf[4096];

static off_t size_of(int fd)
{
	struct stat st;
	fstat(fd, &st);
	return st.st_size;
}

static int fresh(const char *path, int flags)
{
	return open(path, O_RDWR | O_CREAT | O_TRUNC | flags, 0600);
}

static void writes(const char *dir)
{
	char path[300];
	snprintf(path, sizeof path, "%s/f", dir);
	int fd = fresh(path, 0);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, buf, 600), 600);
	CHECK_EQ(write(fd, buf, 600), 400);
	CHECK_EQ(xfsz, 0);
	CHECK_ERR(write(fd, buf, 1), EFBIG);
	CHECK_EQ(xfsz, 1);
	CHECK_EQ(xfsz_code, SI_USER);
	CHECK(xfsz_from_self);
	/* Nothing to write: no check at all. */
	CHECK_EQ(write(fd, buf, 0), 0);
	CHECK_EQ(xfsz, 1);
	CHECK_EQ(pwrite(fd, buf, 200, 900), 100);
	CHECK_ERR(pwrite(fd, buf, 10, LIMIT), EFBIG);
	CHECK_ERR(pwrite(fd, buf, 10, 5000), EFBIG);
	CHECK_EQ(xfsz, 3);
	struct iovec iov[2] = { { buf, 300 }, { buf, 300 } };
	CHECK_EQ(lseek(fd, 800, SEEK_SET), 800);
	CHECK_EQ(writev(fd, iov, 2), 200);
	CHECK_EQ(pwritev(fd, iov, 2, 300), 600);
	CHECK_EQ(pwritev(fd, iov, 2, 700), 300);
	CHECK_EQ(size_of(fd), LIMIT);
	close(fd);

	/* O_APPEND writes at the end, wherever the offset is. */
	fd = fresh(path, O_APPEND);
	CHECK_EQ(write(fd, buf, 700), 700);
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(write(fd, buf, 700), 300);
	CHECK_ERR(write(fd, buf, 1), EFBIG);
	close(fd);

	/* Into the file from another (written before the limit was set):
	 * sendfile, copy_file_range, splice. */
	char src_path[300];
	snprintf(src_path, sizeof src_path, "%s/src", dir);
	int src = open(src_path, O_RDONLY);
	CHECK_EQ(size_of(src), 3000);
	fd = fresh(path, 0);
	CHECK_EQ(lseek(fd, 500, SEEK_SET), 500);
	off_t in_off = 0;
	CHECK_EQ(sendfile(fd, src, &in_off, 2000), 500);
	CHECK_ERR(sendfile(fd, src, &in_off, 2000), EFBIG);
	loff_t from = 0, to = 700;
	CHECK_EQ(copy_file_range(src, &from, fd, &to, 2000, 0), 300);
	int p[2];
	CHECK_OK(pipe(p));
	CHECK_EQ(write(p[1], buf, 2000), 2000);
	to = 900;
	CHECK_EQ(splice(p[0], NULL, fd, &to, 2000, 0), 100);
	close(p[0]);
	close(p[1]);
	CHECK_EQ(size_of(fd), LIMIT);
	close(src);
	close(fd);
}

static void sizes(const char *dir)
{
	char path[300];
	snprintf(path, sizeof path, "%s/g", dir);
	int fd = fresh(path, 0);
	CHECK(fd >= 0);
	CHECK_OK(ftruncate(fd, LIMIT));
	int before = xfsz;
	CHECK_ERR(ftruncate(fd, LIMIT + 1), EFBIG);
	CHECK_ERR(truncate(path, 5000), EFBIG);
	CHECK_EQ(xfsz, before + 2);
	int r = fallocate(fd, 0, 0, 4096);
	if (r == 0 || errno != EOPNOTSUPP) {
		CHECK_ERR(fallocate(fd, 0, 0, 4096), EFBIG);
		CHECK_OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096));
	}
	CHECK_EQ(size_of(fd), LIMIT);
	close(fd);
}

/* A file larger than the limit (made before it was set) may shrink, and
 * a pipe takes any amount. */
static void not_limited(int big)
{
	CHECK_OK(ftruncate(big, 3000));
	CHECK_EQ(size_of(big), 3000);
	int p[2];
	CHECK_OK(pipe(p));
	CHECK_EQ(write(p[1], buf, 2000), 2000);
	close(p[0]);
	close(p[1]);
}

/* The default action of SIGXFSZ ends the writer. */
static void killed(const char *dir)
{
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGXFSZ, SIG_DFL);
		char path[300];
		snprintf(path, sizeof path, "%s/h", dir);
		int fd = fresh(path, 0);
		write(fd, buf, LIMIT);
		write(fd, buf, 1);
		_exit(0);
	}
	int status = 0;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ);
}

int main(void)
{
	char dir[] = "/tmp/nomu-fsize-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	memset(buf, 'x', sizeof buf);
	char big_path[300];
	snprintf(big_path, sizeof big_path, "%s/big", dir);
	int big = fresh(big_path, 0);
	CHECK_OK(ftruncate(big, 8000));
	snprintf(big_path, sizeof big_path, "%s/src", dir);
	int src = fresh(big_path, 0);
	CHECK_EQ(write(src, buf, 3000), 3000);
	close(src);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_xfsz;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGXFSZ, &sa, NULL);
	struct rlimit r = { LIMIT, RLIM_INFINITY };
	CHECK_OK(setrlimit(RLIMIT_FSIZE, &r));

	writes(dir);
	sizes(dir);
	not_limited(big);
	killed(dir);

	close(big);
	const char *names[] = { "f", "g", "h", "src", "big" };
	for (unsigned i = 0; i < sizeof names / sizeof *names; i++) {
		char path[300];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
	return checks_done();
}
