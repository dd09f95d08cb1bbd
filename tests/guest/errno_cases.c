/* Error returns exactly as Linux gives them: EFAULT for bad pointers (raw
 * syscalls, so libc never touches the pointer first), partial transfers at
 * the edge of mapped memory, EBADF, ENOENT, ENOTDIR, EISDIR, EEXIST, EINVAL,
 * ENAMETOOLONG and ENOSYS. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PG 4096
#define BAD ((void *)1)

static char top[] = "/tmp/nomu-XXXXXX";

/* The kernel's struct sigaction (rt_sigaction ABI). */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

int main(void)
{
	char buf[PG];
	struct stat st;
	struct timespec ts;

	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 2;
	}
	CHECK_OK(chdir(top));

	/* An 8192-byte file, bytes i % 251. */
	static unsigned char data[2 * PG];
	for (int i = 0; i < 2 * PG; i++)
		data[i] = (unsigned char)(i % 251);
	int fd = open("f", O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, data, sizeof data), sizeof data);
	int p[2];
	CHECK_OK(pipe(p));
	int devnull = open("/dev/null", O_RDWR);
	CHECK(devnull >= 0);

	printf("== EFAULT\n");
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_ERR(syscall(SYS_read, fd, BAD, 10), EFAULT);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 0); /* nothing consumed */
	CHECK_ERR(syscall(SYS_write, fd, BAD, 10), EFAULT);
	CHECK_ERR(syscall(SYS_write, p[1], BAD, 10), EFAULT);
	CHECK_ERR(syscall(SYS_pread64, fd, BAD, 10, 0), EFAULT);
	CHECK_ERR(syscall(SYS_pwrite64, fd, BAD, 10, 0), EFAULT);
	CHECK_ERR(syscall(SYS_readv, fd, BAD, 1), EFAULT);
	struct iovec badiov = {BAD, 10};
	CHECK_ERR(syscall(SYS_writev, fd, &badiov, 1), EFAULT);
	/* /dev/null's write never looks at the buffer: a bad pointer is fine */
	CHECK_EQ(syscall(SYS_write, devnull, BAD, 10), 10);
	/* zero-length transfers do not touch the buffer either */
	CHECK_EQ(syscall(SYS_read, fd, BAD, 0), 0);
	CHECK_EQ(syscall(SYS_write, fd, BAD, 0), 0);
	CHECK_EQ(syscall(SYS_read, fd, NULL, 0), 0);
	CHECK_EQ(read(fd, NULL, 0), 0);
	CHECK_ERR(syscall(SYS_open, BAD, O_RDONLY), EFAULT);
	CHECK_ERR(syscall(SYS_openat, AT_FDCWD, BAD, O_RDONLY), EFAULT);
	CHECK_ERR(syscall(SYS_stat, BAD, &st), EFAULT);
	CHECK_ERR(syscall(SYS_stat, "f", BAD), EFAULT);
	CHECK_ERR(syscall(SYS_lstat, BAD, &st), EFAULT);
	CHECK_ERR(syscall(SYS_fstat, fd, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_newfstatat, AT_FDCWD, "f", BAD, 0), EFAULT);
	/* The lookup comes first: its errors win over a bad buffer. */
	CHECK_ERR(syscall(SYS_stat, "no-such-file", BAD), ENOENT);
	CHECK_ERR(syscall(SYS_lstat, "no-such-file", BAD), ENOENT);
	CHECK_ERR(syscall(SYS_fstat, 999, BAD), EBADF);
	CHECK_ERR(syscall(SYS_getcwd, BAD, 4096), EFAULT);
	CHECK_ERR(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_clock_gettime, CLOCK_REALTIME, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_gettimeofday, BAD, NULL), EFAULT);
	CHECK_ERR(syscall(SYS_uname, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_pipe, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_nanosleep, BAD, NULL), EFAULT);
	CHECK_ERR(syscall(SYS_access, BAD, F_OK), EFAULT);
	CHECK_ERR(syscall(SYS_mkdir, BAD, 0755), EFAULT);
	CHECK_ERR(syscall(SYS_unlink, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_chdir, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_readlink, "f", BAD, 10), EINVAL); /* not a link first */
	int dfd = open(".", O_RDONLY | O_DIRECTORY);
	CHECK_ERR(syscall(SYS_getdents64, dfd, BAD, 4096), EFAULT);
	close(dfd);
	CHECK_ERR(syscall(SYS_getrandom, BAD, 16, 0), EFAULT);
	CHECK_ERR(syscall(SYS_sysinfo, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_rt_sigprocmask, SIG_BLOCK, BAD, NULL, 8), EFAULT);
	/* a sleep that completes never writes the remaining time: a bad
	 * rem pointer goes unnoticed */
	ts.tv_sec = 0;
	ts.tv_nsec = 1000;
	CHECK_EQ(syscall(SYS_nanosleep, &ts, BAD), 0);

	printf("== partial transfers at the end of mapped memory\n");
	unsigned char *m = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	CHECK_OK(munmap(m + PG, PG));
	/* read 300 bytes into the last 100 bytes of the mapped page: 100 */
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(syscall(SYS_read, fd, m + PG - 100, 300), 100);
	CHECK(memcmp(m + PG - 100, data, 100) == 0);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 100);
	/* the whole file into the page: one page's worth */
	CHECK_EQ(syscall(SYS_pread64, fd, m, 2 * PG, 0), PG);
	CHECK(memcmp(m, data, PG) == 0);
	/* nothing fits: EFAULT */
	CHECK_ERR(syscall(SYS_read, fd, m + PG, 10), EFAULT);
	/* a struct stat that runs off the end of the mapping */
	CHECK_ERR(syscall(SYS_fstat, fd, m + PG - 8), EFAULT);
	CHECK_ERR(syscall(SYS_stat, "f", m + PG - 8), EFAULT);
	/* a pipe read does not: when the copy faults part-way it fails with
	 * EFAULT, and nothing is consumed from the pipe */
	CHECK_EQ(write(p[1], data, 200), 200);
	CHECK_ERR(syscall(SYS_read, p[0], m + PG - 50, 200), EFAULT);
	CHECK_EQ(read(p[0], buf, sizeof buf), 200);
	CHECK(memcmp(buf, data, 200) == 0);
	/* a write from memory that ends early: the mapped part is written */
	int w = open("w", O_RDWR | O_CREAT | O_TRUNC, 0644);
	memset(m + PG - 64, 'q', 64);
	CHECK_EQ(syscall(SYS_write, w, m + PG - 64, 200), 64);
	CHECK_OK(fstat(w, &st));
	CHECK_EQ(st.st_size, 64);
	close(w);
	CHECK_OK(unlink("w"));
	CHECK_OK(munmap(m, PG));

	printf("== EBADF\n");
	CHECK_ERR(read(-1, buf, 1), EBADF);
	CHECK_ERR(write(-1, buf, 1), EBADF);
	CHECK_ERR(close(9999), EBADF);
	CHECK_ERR(close(-1), EBADF);
	CHECK_ERR(fstat(9999, &st), EBADF);
	CHECK_ERR(syscall(SYS_fstat, -5, &st), EBADF);
	CHECK_ERR(lseek(9999, 0, SEEK_SET), EBADF);
	int ro = open("f", O_RDONLY);
	CHECK_ERR(write(ro, "x", 1), EBADF);
	CHECK_ERR(pwrite(ro, "x", 1, 0), EBADF);
	int wo = open("f", O_WRONLY);
	CHECK_ERR(read(wo, buf, 1), EBADF);
	close(wo);
	close(ro);
	CHECK_ERR(syscall(SYS_fstat, 1 << 20, &st), EBADF);

	printf("== ENOENT/ENOTDIR/EISDIR/EEXIST\n");
	CHECK_ERR(open("nope", O_RDONLY), ENOENT);
	CHECK_ERR(open("nope/x", O_RDONLY), ENOENT);
	CHECK_ERR(open("nope/x", O_RDWR | O_CREAT, 0644), ENOENT);
	CHECK_ERR(open("", O_RDONLY), ENOENT);
	CHECK_ERR(stat("nope", &st), ENOENT);
	CHECK_ERR(unlink("nope"), ENOENT);
	CHECK_ERR(open("f/x", O_RDONLY), ENOTDIR);
	CHECK_ERR(open("f/x", O_RDWR | O_CREAT, 0644), ENOTDIR);
	CHECK_ERR(stat("f/", &st), ENOTDIR);
	CHECK_ERR(mkdir("f/d", 0755), ENOTDIR);
	CHECK_ERR(open(".", O_WRONLY), EISDIR);
	CHECK_ERR(open("/tmp", O_RDWR), EISDIR);
	CHECK_ERR(open("/tmp", O_WRONLY | O_CREAT, 0644), EISDIR);
	CHECK_ERR(open("f", O_RDWR | O_CREAT | O_EXCL, 0644), EEXIST);
	CHECK_ERR(open(".", O_RDWR | O_CREAT | O_EXCL, 0644), EEXIST);
	CHECK_ERR(mkdir(".", 0755), EEXIST);
	CHECK_ERR(mkdir("/", 0755), EEXIST);

	printf("== EINVAL\n");
	CHECK_ERR(lseek(fd, 0, 99), EINVAL);
	CHECK_ERR(lseek(fd, -1, SEEK_SET), EINVAL);
	uint64_t set = 0, old = 0;
	CHECK_ERR(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, 4), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, 16), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigprocmask, 99, &set, &old, 8), EINVAL);
	CHECK_OK(syscall(SYS_rt_sigprocmask, 99, NULL, &old, 8)); /* how ignored without set */
	struct ksigaction ka = {0}, ko;
	ka.handler = (void *)SIG_IGN;
	CHECK_ERR(syscall(SYS_rt_sigaction, SIGKILL, &ka, NULL, 8), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigaction, SIGSTOP, &ka, NULL, 8), EINVAL);
	CHECK_OK(syscall(SYS_rt_sigaction, SIGKILL, NULL, &ko, 8)); /* reading is fine */
	CHECK_ERR(syscall(SYS_rt_sigaction, 0, NULL, &ko, 8), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigaction, 65, NULL, &ko, 8), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigaction, SIGUSR1, NULL, &ko, 16), EINVAL);
	CHECK_ERR(syscall(SYS_set_robust_list, buf, 12), EINVAL);
	CHECK_ERR(syscall(SYS_clock_gettime, 12345, &ts), EINVAL);
	ts.tv_sec = 0;
	ts.tv_nsec = 1000000000;
	CHECK_ERR(syscall(SYS_nanosleep, &ts, NULL), EINVAL);
	ts.tv_nsec = -1;
	CHECK_ERR(syscall(SYS_nanosleep, &ts, NULL), EINVAL);
	ts.tv_sec = -1;
	ts.tv_nsec = 0;
	CHECK_ERR(syscall(SYS_nanosleep, &ts, NULL), EINVAL);
	ts.tv_sec = 0;
	ts.tv_nsec = 1000000000;
	CHECK_ERR(syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL), EINVAL);
	CHECK_ERR(syscall(SYS_fcntl, fd, 0x7fff, 0), EINVAL);
	CHECK_ERR(syscall(SYS_open, "f", O_RDONLY | O_CREAT | O_DIRECTORY, 0644), EINVAL);
	CHECK_ERR(syscall(SYS_getrandom, buf, 16, 0x1000), EINVAL);
	CHECK_ERR(syscall(SYS_readv, fd, buf, -1), EINVAL);
	CHECK_ERR(syscall(SYS_arch_prctl, 0x9999, buf), EINVAL);

	printf("== ENAMETOOLONG\n");
	char longname[300];
	memset(longname, 'n', 256);
	longname[256] = 0;
	CHECK_ERR(open(longname, O_RDONLY), ENAMETOOLONG);
	CHECK_ERR(open(longname, O_RDWR | O_CREAT, 0644), ENAMETOOLONG);
	CHECK_ERR(stat(longname, &st), ENAMETOOLONG);
	CHECK_ERR(mkdir(longname, 0755), ENAMETOOLONG);
	longname[255] = 0; /* 255 is allowed: just not there */
	CHECK_ERR(open(longname, O_RDONLY), ENOENT);
	static char longpath[5000];
	for (int i = 0; i < 4999; i++)
		longpath[i] = i % 2 ? '/' : 'a';
	CHECK_ERR(open(longpath, O_RDONLY), ENAMETOOLONG); /* > PATH_MAX */

	printf("== ENOSYS\n");
	CHECK_ERR(syscall(1000), ENOSYS);
	CHECK_ERR(syscall(100000), ENOSYS);
	/* (not 335: since Linux 6.11 that is uretprobe, which raises SIGILL) */

	close(fd);
	close(p[0]);
	close(p[1]);
	close(devnull);
	CHECK_OK(unlink("f"));
	CHECK_OK(chdir("/"));
	CHECK_OK(rmdir(top));
	return checks_done();
}
