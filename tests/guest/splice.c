/* splice, tee, vmsplice and copy_file_range: Linux's errno rules (EINVAL
 * when neither end of a splice is a pipe, ESPIPE for an offset of a pipe,
 * EBADF, EFAULT...), offsets read and written back, file positions moved
 * or not, waits on pipes that a signal ends, EPIPE. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/uio.h>

static long spl(int in, loff_t *oin, int out, loff_t *oout, size_t len, unsigned flags)
{
	return syscall(SYS_splice, in, oin, out, oout, len, flags);
}

static long cfr(int in, loff_t *oin, int out, loff_t *oout, size_t len, unsigned flags)
{
	return syscall(SYS_copy_file_range, in, oin, out, oout, len, flags);
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void alarm_in(int ms)
{
	nomu_handle(SIGALRM, on_alarm, 0);
	struct itimerval it = { { 0, 0 }, { 0, ms * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static char *drain(int fd)
{
	static char buf[256];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	char path[] = "/tmp/nomu-splice-XXXXXX", path2[] = "/tmp/nomu-splice2-XXXXXX";
	int file = mkstemp(path), file2 = mkstemp(path2);
	CHECK(file >= 0 && file2 >= 0);
	CHECK_EQ(write(file, "0123456789abcdefghij", 20), 20);
	int p[2], q[2];
	CHECK_OK(pipe(p));
	CHECK_OK(pipe(q));
	loff_t off;

	/* splice: the errno rules. */
	CHECK_EQ(spl(-1, NULL, -1, NULL, 0, 0), 0);
	CHECK_ERR(spl(file, NULL, p[1], NULL, 1, 0x100), EINVAL);
	CHECK_ERR(spl(-1, NULL, p[1], NULL, 1, 0), EBADF);
	CHECK_ERR(spl(file, NULL, 999, NULL, 1, 0), EBADF);
	CHECK_ERR(spl(file, NULL, file2, NULL, 1, 0), EINVAL);
	off = 0;
	CHECK_ERR(spl(p[0], &off, q[1], NULL, 1, 0), ESPIPE);
	CHECK_ERR(spl(file, NULL, p[1], &off, 1, 0), ESPIPE);
	CHECK_ERR(spl(file, (loff_t *)8, p[1], NULL, 1, 0), EFAULT);
	off = -1;
	CHECK_ERR(spl(file, &off, p[1], NULL, 1, 0), EINVAL);
	CHECK_ERR(spl(p[1], NULL, q[1], NULL, 1, 0), EBADF);
	CHECK_ERR(spl(p[0], NULL, p[1], NULL, 1, 0), EINVAL);
	CHECK_ERR(spl(p[0], NULL, q[1], NULL, 1, SPLICE_F_NONBLOCK), EAGAIN);

	/* File to pipe at an offset: the offset moves, the position does not. */
	off = 5;
	CHECK_EQ(spl(file, &off, p[1], NULL, 4, 0), 4);
	CHECK_EQ(off, 9);
	CHECK_EQ(lseek(file, 0, SEEK_CUR), 20);
	/* Pipe to pipe, then pipe to file at the file's position. */
	CHECK_EQ(spl(p[0], NULL, q[1], NULL, 100, 0), 4);
	CHECK_EQ(lseek(file2, 3, SEEK_SET), 3);
	CHECK_EQ(spl(q[0], NULL, file2, NULL, 100, 0), 4);
	CHECK_EQ(lseek(file2, 0, SEEK_CUR), 7);
	char buf[64] = { 0 };
	CHECK_EQ(pread(file2, buf, sizeof buf, 0), 7);
	printf("spliced: %s\n", buf + 3);
	/* From the file's position, which moves. */
	CHECK_EQ(lseek(file, 10, SEEK_SET), 10);
	CHECK_EQ(spl(file, NULL, p[1], NULL, 3, 0), 3);
	CHECK_EQ(lseek(file, 0, SEEK_CUR), 13);
	printf("from the position: %s\n", drain(p[0]));

	/* A wait on an empty pipe, ended by a signal. */
	alarm_in(100);
	CHECK_ERR(spl(p[0], NULL, file2, NULL, 10, 0), EINTR);
	/* No reader: EPIPE (and SIGPIPE, ignored here). */
	signal(SIGPIPE, SIG_IGN);
	int r[2];
	CHECK_OK(pipe(r));
	close(r[0]);
	off = 0;
	CHECK_ERR(spl(file, &off, r[1], NULL, 1, 0), EPIPE);

	/* tee. */
	CHECK_ERR(syscall(SYS_tee, p[0], q[1], 1, 0x100), EINVAL);
	CHECK_EQ(syscall(SYS_tee, -1, -1, 0, 0), 0);
	CHECK_ERR(syscall(SYS_tee, -1, q[1], 1, 0), EBADF);
	CHECK_ERR(syscall(SYS_tee, file, q[1], 1, 0), EINVAL);
	CHECK_ERR(syscall(SYS_tee, p[0], p[1], 1, 0), EINVAL);
	CHECK_ERR(syscall(SYS_tee, p[0], q[1], 1, SPLICE_F_NONBLOCK), EAGAIN);
	CHECK_EQ(write(p[1], "teed", 4), 4);
	CHECK_EQ(syscall(SYS_tee, p[0], q[1], 100, 0), 4);
	printf("tee: copy %s,", drain(q[0]));
	printf(" original %s\n", drain(p[0]));
	alarm_in(100);
	CHECK_ERR(syscall(SYS_tee, p[0], q[1], 1, 0), EINTR);

	/* vmsplice on a pipe splice never used (Linux's splice changes how a
	 * pipe takes non-blocking I/O), then on one it used: into the pipe from
	 * memory, out of it into memory. */
	int fresh[2];
	CHECK_OK(pipe(fresh));
	char fr[] = "fresh", frgot[8] = { 0 };
	struct iovec fiov = { fr, 5 }, fout = { frgot, sizeof frgot };
	CHECK_ERR(vmsplice(fresh[0], &fout, 1, SPLICE_F_NONBLOCK), EAGAIN);
	CHECK_EQ(vmsplice(fresh[1], &fiov, 1, 0), 5);
	CHECK_EQ(vmsplice(fresh[0], &fout, 1, 0), 5);
	printf("fresh pipe: %s\n", frgot);
	alarm_in(100);
	CHECK_ERR(vmsplice(fresh[0], &fout, 1, 0), EINTR);
	close(fresh[0]);
	close(fresh[1]);
	char a[] = "vm", b[] = "splice";
	struct iovec iov[2] = { { a, 2 }, { b, 6 } };
	CHECK_EQ(vmsplice(p[1], iov, 2, 0), 8);
	char got1[3] = { 0 }, got2[6] = { 0 };
	struct iovec out[2] = { { got1, 2 }, { got2, 5 } };
	CHECK_EQ(vmsplice(p[0], out, 2, 0), 7);
	printf("vmsplice: %s %s, then %s\n", got1, got2, drain(p[0]));
	CHECK_ERR(vmsplice(p[0], out, 2, SPLICE_F_NONBLOCK), EAGAIN);
	CHECK_ERR(vmsplice(p[1], iov, 2, 0x100), EINVAL);
	CHECK_ERR(vmsplice(file, iov, 2, 0), EBADF);
	CHECK_ERR(vmsplice(-1, iov, 2, 0), EBADF);
	CHECK_ERR(vmsplice(p[1], (struct iovec *)8, 2, 0), EFAULT);
	CHECK_ERR(vmsplice(p[1], iov, 1025, 0), EINVAL);
	CHECK_EQ(vmsplice(p[1], iov, 0, 0), 0);
	alarm_in(100);
	CHECK_ERR(vmsplice(p[0], out, 2, 0), EINTR);
	/* A full pipe: SPLICE_F_NONBLOCK is EAGAIN, even on a blocking pipe. */
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	static char fill[65536];
	while (write(p[1], fill, sizeof fill) > 0)
		;
	fcntl(p[1], F_SETFL, 0);
	CHECK_ERR(vmsplice(p[1], iov, 2, SPLICE_F_NONBLOCK), EAGAIN);
	alarm_in(100);
	CHECK_ERR(vmsplice(p[1], iov, 2, 0), EINTR);
	CHECK_ERR(vmsplice(r[1], iov, 2, 0), EPIPE);

	/* copy_file_range. */
	CHECK_ERR(cfr(-1, NULL, file2, NULL, 1, 0), EBADF);
	CHECK_ERR(cfr(file, NULL, -1, NULL, 1, 0), EBADF);
	CHECK_ERR(cfr(file, (loff_t *)8, file2, NULL, 1, 0), EFAULT);
	CHECK_ERR(cfr(file, NULL, file2, NULL, 1, 1), EINVAL);
	CHECK_ERR(cfr(p[0], NULL, file2, NULL, 1, 0), EINVAL);
	CHECK_ERR(cfr(file, NULL, q[1], NULL, 1, 0), EINVAL);
	int dir = open("/tmp", O_RDONLY | O_DIRECTORY);
	CHECK_ERR(cfr(dir, NULL, file2, NULL, 1, 0), EISDIR);
	int ro = open(path2, O_RDONLY), app = open(path2, O_WRONLY | O_APPEND);
	CHECK_ERR(cfr(file, NULL, ro, NULL, 1, 0), EBADF);
	CHECK_ERR(cfr(file, NULL, app, NULL, 1, 0), EBADF);
	loff_t oin = 0, oout = 0;
	CHECK_ERR(cfr(file, &oin, file, &oout, 5, 0), EINVAL);
	oin = 10, oout = 0;
	CHECK_EQ(cfr(file, &oin, file2, &oout, 6, 0), 6);
	CHECK_EQ(oin, 16);
	CHECK_EQ(oout, 6);
	CHECK_EQ(lseek(file, 0, SEEK_CUR), 13);
	CHECK_EQ(lseek(file2, 0, SEEK_CUR), 7);
	CHECK_EQ(lseek(file, 0, SEEK_SET), 0);
	CHECK_EQ(cfr(file, NULL, file2, NULL, 3, 0), 3);
	CHECK_EQ(lseek(file, 0, SEEK_CUR), 3);
	CHECK_EQ(lseek(file2, 0, SEEK_CUR), 10);
	memset(buf, 0, sizeof buf);
	CHECK_EQ(pread(file2, buf, sizeof buf, 0), 10);
	printf("copied: %s\n", buf);
	/* At the end of the input: 0. */
	oin = 20;
	CHECK_EQ(cfr(file, &oin, file2, NULL, 5, 0), 0);
	CHECK_EQ(oin, 20);

	close(dir);
	close(ro);
	close(app);
	unlink(path);
	unlink(path2);
	return checks_done();
}
