/* Device files and the standard descriptors: /dev/null, /dev/zero,
 * /dev/urandom, fds 0-2 open, terminal ioctls on things that are not
 * terminals (ENOTTY).  /dev/tty may or may not be there: nothing printed
 * depends on it. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

static char top[] = "/tmp/nomu-XXXXXX";

int main(void)
{
	unsigned char buf[4096];
	struct stat st;

	printf("== /dev/null\n");
	int fd = open("/dev/null", O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(read(fd, buf, sizeof buf), 0);
	CHECK_EQ(write(fd, "anything at all", 15), 15);
	CHECK_EQ(write(fd, buf, sizeof buf), sizeof buf);
	CHECK_EQ(syscall(SYS_write, fd, (void *)1, 1 << 20), 1 << 20); /* buffer never read */
	CHECK_EQ(pwrite(fd, "x", 1, 12345), 1);
	CHECK_EQ(lseek(fd, 100, SEEK_SET), 0); /* always at 0 */
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISCHR(st.st_mode));
	CHECK_OK(stat("/dev/null", &st));
	CHECK(S_ISCHR(st.st_mode));
	struct winsize ws;
	struct termios tio;
	CHECK_ERR(ioctl(fd, TIOCGWINSZ, &ws), ENOTTY);
	CHECK_ERR(ioctl(fd, TCGETS, &tio), ENOTTY);
	CHECK_EQ(isatty(fd), 0);
	CHECK_OK(close(fd));
	/* Nothing is read or written, but the descriptor's mode and the
	 * buffer's place in user space are still checked (vfs_read/write). */
	fd = open("/dev/null", O_RDONLY);
	CHECK(fd >= 0);
	CHECK_ERR(write(fd, "x", 1), EBADF);
	CHECK_EQ(syscall(SYS_read, fd, (void *)1, 100), 0); /* never touched */
	CHECK_ERR(syscall(SYS_read, fd, (void *)0xffff800000000000ul, 1), EFAULT);
	CHECK_ERR(syscall(SYS_read, fd, (void *)0x7ffffffff000ul, 1), EFAULT);
	CHECK_EQ(syscall(SYS_read, fd, (void *)0x7fffffffefffu, 1), 0);
	CHECK_OK(close(fd));
	fd = open("/dev/null", O_WRONLY);
	CHECK(fd >= 0);
	CHECK_ERR(read(fd, buf, 1), EBADF);
	CHECK_ERR(syscall(SYS_write, fd, (void *)0xffffffffff600000ul, 1), EFAULT);
	CHECK_EQ(syscall(SYS_write, fd, (void *)0x7fffffffe000ul, 0x1000), 0x1000);
	CHECK_ERR(syscall(SYS_write, fd, (void *)0x7fffffffe000ul, 0x1001), EFAULT);
	CHECK_OK(close(fd));

	printf("== /dev/zero\n");
	fd = open("/dev/zero", O_RDONLY);
	CHECK(fd >= 0);
	memset(buf, 0xff, sizeof buf);
	CHECK_EQ(read(fd, buf, sizeof buf), sizeof buf);
	int zero = 1;
	for (size_t i = 0; i < sizeof buf; i++)
		zero &= buf[i] == 0;
	CHECK(zero);
	memset(buf, 0xff, 100);
	CHECK_EQ(pread(fd, buf + 10, 50, 999), 50);
	CHECK(buf[9] == 0xff && buf[10] == 0 && buf[59] == 0 && buf[60] == 0xff);
	CHECK_OK(close(fd));
	fd = open("/dev/zero", O_WRONLY);
	CHECK_EQ(write(fd, "data", 4), 4); /* discarded, like /dev/null */
	CHECK_OK(close(fd));

	printf("== /dev/urandom\n");
	fd = open("/dev/urandom", O_RDONLY);
	CHECK(fd >= 0);
	unsigned char r1[64], r2[64];
	memset(r1, 0, sizeof r1);
	CHECK_EQ(read(fd, r1, sizeof r1), 64);
	int nz = 0;
	for (int i = 0; i < 64; i++)
		nz += r1[i] != 0;
	CHECK(nz > 32);
	CHECK_EQ(read(fd, r2, sizeof r2), 64);
	CHECK(memcmp(r1, r2, sizeof r1) != 0);
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISCHR(st.st_mode));
	CHECK_OK(close(fd));

	printf("== standard descriptors\n");
	CHECK_OK(fcntl(0, F_GETFD));
	CHECK_OK(fcntl(1, F_GETFD));
	CHECK_OK(fcntl(2, F_GETFD));
	CHECK_OK(fcntl(0, F_GETFL));
	CHECK_OK(fstat(1, &st));
	CHECK((fcntl(1, F_GETFL) & O_ACCMODE) != O_RDONLY); /* stdout is writable */
	int d = dup(1);
	CHECK(d > 2);
	CHECK_OK(close(d));

	printf("== terminal ioctls on non-terminals\n");
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 2;
	}
	char path[64];
	snprintf(path, sizeof path, "%s/plain", top);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_ERR(ioctl(fd, TIOCGWINSZ, &ws), ENOTTY);
	CHECK_ERR(ioctl(fd, TCGETS, &tio), ENOTTY);
	CHECK_ERR(ioctl(fd, TIOCGPGRP, &d), ENOTTY);
	CHECK_EQ(isatty(fd), 0);
	CHECK_ERR(ioctl(9999, TIOCGWINSZ, &ws), EBADF);
	int dfd = open(top, O_RDONLY | O_DIRECTORY);
	CHECK_ERR(ioctl(dfd, TCGETS, &tio), ENOTTY);
	CHECK_OK(close(dfd));
	int p[2];
	CHECK_OK(pipe(p));
	CHECK_ERR(ioctl(p[0], TIOCGWINSZ, &ws), ENOTTY);
	CHECK_ERR(ioctl(p[1], TCGETS, &tio), ENOTTY);
	close(p[0]);
	close(p[1]);
	CHECK_OK(close(fd));
	CHECK_OK(unlink(path));
	CHECK_OK(rmdir(top));

	/* /dev/tty: present or not (no controlling terminal: ENXIO) */
	int tty = open("/dev/tty", O_RDWR | O_NOCTTY);
	CHECK(tty >= 0 || errno == ENXIO || errno == ENOENT || errno == EACCES);
	if (tty >= 0)
		close(tty);

	return checks_done();
}
