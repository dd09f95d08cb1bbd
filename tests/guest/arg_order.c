/* Which error a syscall reports when several of its arguments are bad at
 * once: Linux checks them in a fixed order, and a program may tell the
 * errors apart (an EBADF for a bad descriptor versus the EFAULT of a bad
 * buffer, say).  Each check below has two or more bad arguments, or one
 * bad argument and one Linux looks at later, and expects the error Linux
 * reports first.  Raw syscalls throughout, so libc checks nothing first;
 * a negative 64-bit argument is written as a long (an int passed through
 * syscall()'s varargs may arrive with its upper half zero). */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG 4096
/* A user address with nothing mapped: Linux's access_ok passes it, the
 * copy itself faults. */
#define BAD ((void *)1)
/* An address in the kernel's half: access_ok fails it at once. */
#define KBAD ((void *)0xffff800000000000ul)
#define NOFD 9999
/* No pid can be this high (PID_MAX_LIMIT is 4M). */
#define NOPID 0x3fffffff

#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_WAIT_BITSET 9
#define FUTEX_CLOCK_REALTIME 256
#define NO_RENAME_NOREPLACE 1
#define NO_RENAME_EXCHANGE 2
#define NO_STATX_RESERVED 0x80000000u
#define NO_AT_STATX_SYNC_TYPE 0x6000
#define NO_AT_STATX_FORCE_SYNC 0x2000
#define NO_PROT_SEM 0x8
#define NO_PR_SET_NO_NEW_PRIVS 38
#define NO_PR_GET_NO_NEW_PRIVS 39

static char top[] = "/tmp/nomu-XXXXXX";

/* The kernel's struct sigaction (rt_sigaction ABI). */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

static void io_family(void)
{
	char buf[64];
	int fd = open("f", O_RDWR), ro = open("f", O_RDONLY), wo = open("f", O_WRONLY);
	int dir = open(".", O_RDONLY | O_DIRECTORY), opath = open("f", O_PATH);
	int p[2];
	CHECK(fd >= 0 && ro >= 0 && wo >= 0 && dir >= 0 && opath >= 0);
	CHECK_OK(pipe(p));

	printf("== read, write\n");
	/* the descriptor, its mode, then the buffer */
	CHECK_ERR(syscall(SYS_read, NOFD, BAD, 10), EBADF);
	CHECK_ERR(syscall(SYS_read, wo, BAD, 10), EBADF);
	CHECK_ERR(syscall(SYS_write, ro, BAD, 10), EBADF);
	CHECK_ERR(syscall(SYS_read, opath, BAD, 10), EBADF);
	CHECK_ERR(syscall(SYS_read, wo, buf, (size_t)-1), EBADF);
	/* a buffer outside user space (access_ok) before anything else */
	CHECK_ERR(syscall(SYS_read, fd, buf, (size_t)-1), EFAULT);
	CHECK_ERR(syscall(SYS_write, fd, buf, (size_t)-1), EFAULT);
	CHECK_ERR(syscall(SYS_read, dir, KBAD, 10), EFAULT);
	/* a directory's EISDIR before an unmapped buffer is touched */
	CHECK_ERR(syscall(SYS_read, dir, BAD, 10), EISDIR);

	printf("== pread64, pwrite64\n");
	/* the offset before the descriptor (ksys_pread64) */
	CHECK_ERR(syscall(SYS_pread64, NOFD, buf, 1, (long)-1), EINVAL);
	CHECK_ERR(syscall(SYS_pwrite64, NOFD, buf, 1, (long)-1), EINVAL);
	CHECK_ERR(syscall(SYS_pread64, p[0], buf, 1, (long)-1), EINVAL);
	/* then whether the file has offsets at all (ESPIPE), its mode, the
	 * buffer */
	CHECK_ERR(syscall(SYS_pread64, p[0], BAD, 10, 0), ESPIPE);
	CHECK_ERR(syscall(SYS_pread64, p[1], buf, 10, 0), ESPIPE);
	CHECK_ERR(syscall(SYS_pwrite64, p[0], BAD, 10, 0), ESPIPE);
	CHECK_ERR(syscall(SYS_pread64, wo, BAD, 10, 0), EBADF);
	CHECK_ERR(syscall(SYS_pwrite64, ro, BAD, 10, 0), EBADF);
	CHECK_ERR(syscall(SYS_pread64, dir, BAD, 10, 0), EISDIR);

	printf("== readv, writev\n");
	struct iovec iov[2] = {{buf, 10}, {buf, 10}};
	CHECK_ERR(syscall(SYS_readv, NOFD, BAD, 1), EBADF);
	CHECK_ERR(syscall(SYS_readv, NOFD, iov, -1), EBADF);
	/* the mode before the iovec is read */
	CHECK_ERR(syscall(SYS_readv, wo, BAD, 1), EBADF);
	CHECK_ERR(syscall(SYS_readv, wo, iov, 2000), EBADF);
	CHECK_ERR(syscall(SYS_writev, ro, BAD, 1), EBADF);
	CHECK_ERR(syscall(SYS_writev, ro, iov, -1), EBADF);
	/* the count before the array; every length before any buffer */
	CHECK_ERR(syscall(SYS_readv, fd, BAD, 2000), EINVAL);
	struct iovec badlen[2] = {{BAD, 10}, {buf, (size_t)-1}};
	CHECK_ERR(syscall(SYS_readv, fd, badlen, 2), EINVAL);
	CHECK_ERR(syscall(SYS_writev, fd, badlen, 2), EINVAL);
	/* each buffer of several must lie in user space whole (access_ok; one
	 * alone is cut to MAX_RW_COUNT first, so where the stack lies would
	 * decide) */
	struct iovec huge[2] = {{buf, 1ul << 62}, {buf, 1ul << 62}};
	CHECK_ERR(syscall(SYS_readv, fd, huge, 2), EFAULT);
	struct iovec kbad[2] = {{buf, 1}, {KBAD, 1}};
	CHECK_ERR(syscall(SYS_writev, fd, kbad, 2), EFAULT);
	CHECK_ERR(syscall(SYS_writev, fd, kbad + 1, 1), EFAULT);

	printf("== sendfile\n");
	off_t off = 0, neg = -1;
	/* the offset is read first, then the input, then the output */
	CHECK_ERR(syscall(SYS_sendfile, NOFD, NOFD, BAD, 10), EFAULT);
	CHECK_ERR(syscall(SYS_sendfile, NOFD, fd, &neg, 10), EINVAL);
	CHECK_ERR(syscall(SYS_sendfile, NOFD, p[0], &off, 10), ESPIPE);
	CHECK_ERR(syscall(SYS_sendfile, NOFD, wo, &off, 10), EBADF);
	CHECK_ERR(syscall(SYS_sendfile, wo, p[0], &off, 10), ESPIPE);
	CHECK_ERR(syscall(SYS_sendfile, wo, p[0], &neg, 10), ESPIPE);

	printf("== lseek\n");
	CHECK_ERR(syscall(SYS_lseek, NOFD, 0, 99), EBADF);
	CHECK_ERR(syscall(SYS_lseek, p[0], 0, 99), EINVAL);
	CHECK_ERR(syscall(SYS_lseek, p[0], (long)-1, SEEK_SET), ESPIPE);

	printf("== ftruncate, truncate\n");
	/* the length before the descriptor or the path */
	CHECK_ERR(syscall(SYS_ftruncate, NOFD, (long)-1), EINVAL);
	CHECK_ERR(syscall(SYS_ftruncate, ro, (long)-1), EINVAL);
	CHECK_ERR(syscall(SYS_truncate, BAD, (long)-1), EINVAL);
	CHECK_ERR(syscall(SYS_truncate, "nope", (long)-1), EINVAL);

	printf("== getdents64\n");
	CHECK_ERR(syscall(SYS_getdents64, NOFD, BAD, 4096), EBADF);
	CHECK_ERR(syscall(SYS_getdents64, fd, BAD, 4096), ENOTDIR);
	int opdir = open(".", O_PATH | O_DIRECTORY);
	CHECK_ERR(syscall(SYS_getdents64, opdir, buf, sizeof buf), EBADF);
	close(opdir);
	/* an entry that does not fit is EINVAL before it is written */
	CHECK_ERR(syscall(SYS_getdents64, dir, BAD, 1), EINVAL);
	/* and at the end of the directory nothing is written */
	char ents[4096];
	while (syscall(SYS_getdents64, dir, ents, sizeof ents) > 0)
		;
	CHECK_EQ(syscall(SYS_getdents64, dir, BAD, 4096), 0);
	CHECK_EQ(lseek(dir, 0, SEEK_SET), 0);

	printf("== fcntl, dup\n");
	/* the descriptor before the command or its argument */
	CHECK_ERR(syscall(SYS_fcntl, NOFD, F_DUPFD, 1 << 30), EBADF);
	CHECK_ERR(syscall(SYS_fcntl, NOFD, 0x7fff, 0), EBADF);
	CHECK_ERR(syscall(SYS_fcntl, fd, F_DUPFD, 1 << 30), EINVAL);
	/* an O_PATH descriptor allows only a few commands: EBADF for the rest,
	 * unknown ones too */
	CHECK_ERR(syscall(SYS_fcntl, opath, F_SETFL, O_NONBLOCK), EBADF);
	CHECK_ERR(syscall(SYS_fcntl, opath, 0x7fff, 0), EBADF);
	CHECK_EQ(syscall(SYS_fcntl, opath, F_GETFL) & O_PATH, O_PATH);
	int d = syscall(SYS_fcntl, opath, F_DUPFD_CLOEXEC, 0);
	CHECK(d >= 0);
	close(d);
	/* dup3: the flags, then old == new, then the descriptors */
	CHECK_ERR(syscall(SYS_dup3, NOFD, NOFD, 1), EINVAL);
	CHECK_ERR(syscall(SYS_dup3, NOFD, NOFD, O_CLOEXEC), EINVAL);
	CHECK_ERR(syscall(SYS_dup3, NOFD, 1 << 30, 0), EBADF);
	CHECK_ERR(syscall(SYS_dup2, NOFD, NOFD), EBADF);

	printf("== descriptor table full\n");
	struct rlimit old, none = {0, 0};
	CHECK_OK(getrlimit(RLIMIT_NOFILE, &old));
	none.rlim_max = old.rlim_max;
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &none));
	CHECK_ERR(syscall(SYS_dup, NOFD), EBADF);
	CHECK_ERR(syscall(SYS_dup, fd), EMFILE);
	CHECK_ERR(syscall(SYS_fcntl, NOFD, F_DUPFD, 0), EBADF);
	CHECK_ERR(syscall(SYS_fcntl, fd, F_DUPFD, 0), EINVAL);
	/* open takes a descriptor before it looks the path up */
	CHECK_ERR(syscall(SYS_open, "nope", O_RDONLY), EMFILE);
	CHECK_ERR(syscall(SYS_openat, NOFD, "nope", O_RDONLY), EMFILE);
	CHECK_ERR(syscall(SYS_open, "", O_RDONLY), ENOENT);
	CHECK_ERR(syscall(SYS_open, BAD, O_RDONLY), EFAULT);
	CHECK_ERR(syscall(SYS_pipe, BAD), EMFILE);
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &old));

	close(fd);
	close(ro);
	close(wo);
	close(dir);
	close(opath);
	close(p[0]);
	close(p[1]);
}

static void path_family(void)
{
	char buf[256];
	struct stat st;
	int fd = open("f", O_RDWR);
	CHECK(fd >= 0);

	printf("== open\n");
	/* the flags before the path is read */
	CHECK_ERR(syscall(SYS_open, BAD, O_RDONLY | O_CREAT | O_DIRECTORY, 0644), EINVAL);
	CHECK_ERR(syscall(SYS_open, "", O_RDONLY | O_CREAT | O_DIRECTORY, 0644), EINVAL);
	CHECK_ERR(syscall(SYS_openat, NOFD, BAD, O_TMPFILE | O_RDONLY, 0644), EINVAL);
	CHECK_ERR(syscall(SYS_openat, NOFD, BAD, O_TMPFILE | O_CREAT | O_RDWR, 0644), EINVAL);
	/* O_PATH drops the other flags first */
	CHECK_ERR(syscall(SYS_open, BAD, O_PATH | O_CREAT | O_DIRECTORY, 0644), EFAULT);
	/* the path before the directory descriptor */
	CHECK_ERR(syscall(SYS_openat, NOFD, BAD, O_RDONLY), EFAULT);
	CHECK_ERR(syscall(SYS_openat, NOFD, "", O_RDONLY), ENOENT);
	CHECK_ERR(syscall(SYS_openat, NOFD, "f", O_RDONLY), EBADF);
	CHECK_ERR(syscall(SYS_openat, fd, "f", O_RDONLY), ENOTDIR);

	printf("== stat, newfstatat, statx\n");
	/* the flags (statx: and the mask) before the path is read */
	CHECK_ERR(syscall(SYS_newfstatat, AT_FDCWD, BAD, &st, 0x8000), EINVAL);
	CHECK_ERR(syscall(SYS_newfstatat, AT_FDCWD, "", &st, 0x8000), EINVAL);
	CHECK_ERR(syscall(SYS_newfstatat, NOFD, "f", &st, 0x8000), EINVAL);
	CHECK_ERR(syscall(SYS_newfstatat, NOFD, "", &st, AT_EMPTY_PATH), EBADF);
	CHECK_ERR(syscall(SYS_newfstatat, NOFD, "f", BAD, 0), EBADF);
	CHECK_ERR(syscall(SYS_newfstatat, AT_FDCWD, "nope", BAD, 0), ENOENT);
	/* newfstatat takes statx's sync flags, both at once too */
	CHECK_EQ(syscall(SYS_newfstatat, AT_FDCWD, "f", &st, NO_AT_STATX_SYNC_TYPE), 0);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, BAD, 0x8000, 0, buf), EINVAL);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, BAD, 0, NO_STATX_RESERVED, buf), EINVAL);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, BAD, NO_AT_STATX_SYNC_TYPE, 0, buf), EINVAL);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, "", 0x8000, 0, buf), EINVAL);
	CHECK_ERR(syscall(SYS_statx, NOFD, "f", 0x8000, 0, buf), EINVAL);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, "nope", 0, NO_STATX_RESERVED, buf), EINVAL);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, "nope", NO_AT_STATX_SYNC_TYPE, 0, buf), EINVAL);
	CHECK_ERR(syscall(SYS_statx, NOFD, "f", 0, 0, BAD), EBADF);
	/* except that an empty (or NULL) path with AT_EMPTY_PATH on a
	 * descriptor is an fstat of it, whatever the other flags */
	CHECK_EQ(syscall(SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH | 0x8000), 0);
	CHECK_EQ(syscall(SYS_newfstatat, fd, NULL, &st, AT_EMPTY_PATH | 0x8000), 0);
	CHECK_EQ(syscall(SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH | NO_AT_STATX_SYNC_TYPE), 0);
	CHECK_ERR(syscall(SYS_newfstatat, fd, "", BAD, AT_EMPTY_PATH | 0x8000), EFAULT);
	CHECK_ERR(syscall(SYS_newfstatat, NOFD, NULL, &st, AT_EMPTY_PATH | 0x8000), EBADF);
	CHECK_EQ(syscall(SYS_newfstatat, AT_FDCWD, NULL, &st, AT_EMPTY_PATH), 0);
	CHECK_ERR(syscall(SYS_newfstatat, AT_FDCWD, NULL, &st, AT_EMPTY_PATH | 0x8000), EINVAL);
	CHECK_ERR(syscall(SYS_newfstatat, AT_FDCWD, "", &st, AT_EMPTY_PATH | 0x8000), EINVAL);
	CHECK_ERR(syscall(SYS_newfstatat, AT_FDCWD, NULL, &st, 0), EFAULT);
	CHECK_ERR(syscall(SYS_newfstatat, -5, NULL, &st, AT_EMPTY_PATH), EBADF);
	CHECK_EQ(syscall(SYS_statx, fd, NULL, AT_EMPTY_PATH | 0x8000, 0, buf), 0);
	CHECK_ERR(syscall(SYS_statx, fd, NULL, AT_EMPTY_PATH, NO_STATX_RESERVED, buf), EINVAL);
	CHECK_ERR(syscall(SYS_statx, NOFD, NULL, AT_EMPTY_PATH, 0, buf), EBADF);
	CHECK_ERR(syscall(SYS_statx, NOFD, "", AT_EMPTY_PATH, NO_STATX_RESERVED, buf), EINVAL);
	CHECK_ERR(syscall(SYS_statx, NOFD, "", AT_EMPTY_PATH | NO_AT_STATX_SYNC_TYPE, 0, buf), EINVAL);
	CHECK_EQ(syscall(SYS_statx, AT_FDCWD, NULL, AT_EMPTY_PATH, 0, buf), 0);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, NULL, 0, 0, buf), EFAULT);
	/* NULL is not an empty path to the other calls */
	CHECK_ERR(syscall(SYS_faccessat2, fd, NULL, R_OK, AT_EMPTY_PATH), EFAULT);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, "nope", 0, 0, BAD), ENOENT);

	printf("== access\n");
	/* the mode and the flags before the path */
	CHECK_ERR(syscall(SYS_access, BAD, 8), EINVAL);
	CHECK_ERR(syscall(SYS_faccessat, NOFD, BAD, 8), EINVAL);
	CHECK_ERR(syscall(SYS_faccessat2, NOFD, BAD, R_OK, 1), EINVAL);
	CHECK_ERR(syscall(SYS_faccessat, NOFD, BAD, F_OK), EFAULT);
	CHECK_ERR(syscall(SYS_faccessat, NOFD, "f", F_OK), EBADF);

	printf("== mkdir, unlink, rename, link, symlink\n");
	CHECK_ERR(syscall(SYS_mkdirat, NOFD, BAD, 0755), EFAULT);
	CHECK_ERR(syscall(SYS_mkdirat, NOFD, "", 0755), ENOENT);
	CHECK_ERR(syscall(SYS_mkdirat, NOFD, "d", 0755), EBADF);
	/* the flags first */
	CHECK_ERR(syscall(SYS_unlinkat, NOFD, BAD, 1), EINVAL);
	CHECK_ERR(syscall(SYS_unlinkat, NOFD, BAD, AT_REMOVEDIR), EFAULT);
	CHECK_ERR(syscall(SYS_renameat2, NOFD, BAD, NOFD, BAD, 0x8000), EINVAL);
	CHECK_ERR(syscall(SYS_renameat2, NOFD, BAD, NOFD, BAD, NO_RENAME_EXCHANGE | NO_RENAME_NOREPLACE),
		  EINVAL);
	/* the old name's parent is looked up before the new name is read */
	CHECK_ERR(syscall(SYS_rename, "nodir/x", BAD), ENOENT);
	CHECK_ERR(syscall(SYS_rename, BAD, "nodir/x"), EFAULT);
	CHECK_ERR(syscall(SYS_renameat, NOFD, "x", AT_FDCWD, BAD), EBADF);
	CHECK_ERR(syscall(SYS_linkat, NOFD, BAD, NOFD, BAD, 0x8000), EINVAL);
	/* link looks the old file up whole before the new name */
	CHECK_ERR(syscall(SYS_link, "nope", "f/x"), ENOENT);
	CHECK_ERR(syscall(SYS_link, "nope", BAD), ENOENT);
	CHECK_ERR(syscall(SYS_link, BAD, "nope"), EFAULT);
	CHECK_ERR(syscall(SYS_symlink, BAD, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_symlink, "", BAD), ENOENT);
	CHECK_ERR(syscall(SYS_symlinkat, "x", NOFD, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_symlinkat, "x", NOFD, "x"), EBADF);

	printf("== readlink, chmod, getcwd\n");
	/* the size before the path */
	CHECK_ERR(syscall(SYS_readlink, BAD, BAD, 0), EINVAL);
	CHECK_ERR(syscall(SYS_readlinkat, NOFD, BAD, buf, (long)-1), EINVAL);
	CHECK_ERR(syscall(SYS_readlinkat, NOFD, "x", BAD, 10), EBADF);
	CHECK_ERR(syscall(SYS_fchmodat, NOFD, BAD, 0644), EFAULT);
	CHECK_ERR(syscall(SYS_fchmodat, NOFD, "f", 0644), EBADF);
	int opath = open("f", O_PATH);
	CHECK_ERR(syscall(SYS_fchmod, opath, 0644), EBADF);
	close(opath);
	/* the size is judged before the buffer */
	CHECK_ERR(syscall(SYS_getcwd, BAD, 1), ERANGE);

	printf("== utimensat\n");
	struct timespec omit[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
	struct timespec badns[2] = {{0, UTIME_NOW}, {0, 1000000000}};
	struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
	/* the times are read first; two UTIME_OMITs do nothing, checking
	 * nothing else */
	CHECK_ERR(syscall(SYS_utimensat, AT_FDCWD, "f", BAD, 0x8000), EFAULT);
	CHECK_EQ(syscall(SYS_utimensat, NOFD, NULL, omit, 0x8000), 0);
	CHECK_EQ(syscall(SYS_utimensat, AT_FDCWD, BAD, omit, 0), 0);
	/* then the flags, the file, and last the nanoseconds */
	CHECK_ERR(syscall(SYS_utimensat, NOFD, BAD, badns, 0x8000), EINVAL);
	CHECK_ERR(syscall(SYS_utimensat, AT_FDCWD, "nope", badns, 0), ENOENT);
	CHECK_ERR(syscall(SYS_utimensat, AT_FDCWD, BAD, badns, 0), EFAULT);
	CHECK_ERR(syscall(SYS_utimensat, NOFD, NULL, badns, 0), EBADF);
	CHECK_ERR(syscall(SYS_utimensat, fd, NULL, badns, 0), EINVAL);
	/* a NULL path is the descriptor, which takes no flags; with AT_FDCWD
	 * it is a path (and a bad one) */
	CHECK_ERR(syscall(SYS_utimensat, fd, NULL, now, AT_SYMLINK_NOFOLLOW), EINVAL);
	CHECK_ERR(syscall(SYS_utimensat, AT_FDCWD, NULL, now, 0), EFAULT);

	close(fd);
}

static void wait_family(void)
{
	struct pollfd pfd = {0, POLLIN, 0};
	struct timespec badts = {0, -1};
	struct timeval badtv = {0, -1};
	uint64_t mask = 0;

	printf("== poll, ppoll\n");
	CHECK_ERR(syscall(SYS_poll, BAD, 1 << 30, 0), EINVAL);
	/* ppoll: the timeout, then the signal mask, then the descriptors */
	CHECK_ERR(syscall(SYS_ppoll, BAD, 1, &badts, NULL, 8), EINVAL);
	CHECK_ERR(syscall(SYS_ppoll, BAD, 1, BAD, NULL, 8), EFAULT);
	CHECK_ERR(syscall(SYS_ppoll, BAD, 1, NULL, &mask, 16), EINVAL);
	CHECK_ERR(syscall(SYS_ppoll, &pfd, 1 << 30, NULL, BAD, 8), EFAULT);
	CHECK_ERR(syscall(SYS_ppoll, &pfd, 1 << 30, &badts, &mask, 8), EINVAL);

	printf("== select, pselect6\n");
	/* select: the timeout, then the count, then the sets */
	CHECK_ERR(syscall(SYS_select, -1, NULL, NULL, NULL, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_select, 1, BAD, NULL, NULL, &badtv), EINVAL);
	CHECK_ERR(syscall(SYS_select, -1, BAD, NULL, NULL, NULL), EINVAL);
	/* the timeout is normalised before it is judged: {-1 s, 1000000 us}
	 * is zero; a zero timeout is not written back; a count above the
	 * descriptor table's size is cut to it */
	struct timeval tv = {-1, 1000000};
	CHECK_EQ(syscall(SYS_select, 0, NULL, NULL, NULL, &tv), 0);
	struct timeval *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	CHECK_EQ(syscall(SYS_select, 0, NULL, NULL, NULL, ro), 0);
	CHECK_EQ(syscall(SYS_select, 1 << 21, NULL, NULL, NULL, ro), 0);
	munmap(ro, 4096);
	/* pselect6: the sigset argument pack, the timeout, the mask, then the
	 * count and the sets */
	struct {
		void *p;
		size_t size;
	} pack = {&mask, 8}, badsize = {&mask, 16}, badp = {BAD, 8};
	CHECK_ERR(syscall(SYS_pselect6, -1, NULL, NULL, NULL, &badts, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_pselect6, -1, NULL, NULL, NULL, &badts, &badsize), EINVAL);
	CHECK_ERR(syscall(SYS_pselect6, -1, NULL, NULL, NULL, BAD, &badsize), EFAULT);
	CHECK_ERR(syscall(SYS_pselect6, -1, NULL, NULL, NULL, NULL, &badp), EFAULT);
	CHECK_ERR(syscall(SYS_pselect6, 1, BAD, NULL, NULL, NULL, &badsize), EINVAL);
	CHECK_ERR(syscall(SYS_pselect6, -1, BAD, NULL, NULL, NULL, &pack), EINVAL);
	CHECK_ERR(syscall(SYS_pselect6, 1, BAD, NULL, NULL, NULL, &pack), EFAULT);
}

static volatile int altstack_err;
static char altstack[4 * 16384];

static void on_altstack(int sig)
{
	/* on the alternate stack, a change is EPERM before its flags are
	 * judged */
	stack_t ss = {altstack, 0x10, sizeof altstack};
	errno = 0;
	if (syscall(SYS_sigaltstack, &ss, NULL) == -1)
		altstack_err = errno;
}

static void signal_family(void)
{
	struct ksigaction ka = {0}, ko = {0};
	uint64_t set, oset;
	struct timespec badts = {0, -1};

	printf("== rt_sigaction\n");
	/* the new action is read before the signal is judged */
	CHECK_ERR(syscall(SYS_rt_sigaction, 0, BAD, NULL, 8), EFAULT);
	CHECK_ERR(syscall(SYS_rt_sigaction, SIGKILL, BAD, NULL, 8), EFAULT);
	CHECK_ERR(syscall(SYS_rt_sigaction, 65, BAD, BAD, 16), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigaction, 0, NULL, BAD, 8), EINVAL);
	/* the old action is written after the new one is in place */
	ka.handler = (void *)SIG_IGN;
	CHECK_ERR(syscall(SYS_rt_sigaction, SIGUSR1, &ka, BAD, 8), EFAULT);
	CHECK_OK(syscall(SYS_rt_sigaction, SIGUSR1, NULL, &ko, 8));
	CHECK(ko.handler == (void *)SIG_IGN);
	ka.handler = (void *)SIG_DFL;
	CHECK_OK(syscall(SYS_rt_sigaction, SIGUSR1, &ka, NULL, 8));

	printf("== rt_sigprocmask\n");
	/* the new set is read before `how` is judged */
	CHECK_ERR(syscall(SYS_rt_sigprocmask, 99, BAD, NULL, 8), EFAULT);
	CHECK_ERR(syscall(SYS_rt_sigprocmask, 99, BAD, NULL, 16), EINVAL);
	/* the old set is written after the new one is in place */
	set = 1ul << (SIGUSR2 - 1);
	CHECK_ERR(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, BAD, 8), EFAULT);
	CHECK_OK(syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &set, &oset, 8));
	CHECK(oset & set);

	printf("== kill, tkill, tgkill\n");
	/* the target is found before the signal is judged */
	CHECK_ERR(syscall(SYS_kill, NOPID, 999), ESRCH);
	CHECK_ERR(syscall(SYS_kill, -NOPID, 999), ESRCH);
	CHECK_ERR(syscall(SYS_kill, INT_MIN, 999), ESRCH);
	CHECK_ERR(syscall(SYS_kill, getpid(), 999), EINVAL);
	CHECK_ERR(syscall(SYS_kill, 0, (long)-1), EINVAL);
	CHECK_ERR(syscall(SYS_tkill, NOPID, 999), ESRCH);
	CHECK_ERR(syscall(SYS_tkill, 0, 999), EINVAL);
	CHECK_ERR(syscall(SYS_tkill, gettid(), 999), EINVAL);
	CHECK_ERR(syscall(SYS_tgkill, NOPID, gettid(), 999), ESRCH);
	CHECK_ERR(syscall(SYS_tgkill, getpid(), NOPID, 999), ESRCH);
	CHECK_ERR(syscall(SYS_tgkill, 0, NOPID, 999), EINVAL);
	CHECK_ERR(syscall(SYS_tgkill, getpid(), gettid(), 999), EINVAL);

	printf("== rt_sigqueueinfo, rt_tgsigqueueinfo\n");
	siginfo_t queue = {0}, user = {0};
	queue.si_code = SI_QUEUE;
	user.si_code = SI_USER;
	/* the siginfo is read first */
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, NOPID, 999, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, NOPID, 999, &user), EPERM);
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, NOPID, 999, &queue), ESRCH);
	CHECK_ERR(syscall(SYS_rt_sigqueueinfo, getpid(), 999, &queue), EINVAL);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, 0, 0, 999, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, 0, 0, 999, &user), EINVAL);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, getpid(), NOPID, 999, &user), EPERM);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, getpid(), NOPID, 999, &queue), ESRCH);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, NOPID, gettid(), 999, &queue), ESRCH);
	CHECK_ERR(syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), 999, &queue), EINVAL);

	printf("== rt_sigtimedwait, rt_sigsuspend, rt_sigpending\n");
	set = 1ul << (SIGUSR2 - 1);
	CHECK_ERR(syscall(SYS_rt_sigtimedwait, BAD, BAD, &badts, 16), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigtimedwait, BAD, NULL, &badts, 8), EFAULT);
	CHECK_ERR(syscall(SYS_rt_sigtimedwait, &set, NULL, BAD, 8), EFAULT);
	CHECK_ERR(syscall(SYS_rt_sigtimedwait, &set, BAD, &badts, 8), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigsuspend, BAD, 16), EINVAL);
	CHECK_ERR(syscall(SYS_rt_sigpending, BAD, 16), EINVAL);

	printf("== sigaltstack\n");
	stack_t ss = {altstack, 0x10, sizeof altstack}, os;
	CHECK_ERR(syscall(SYS_sigaltstack, BAD, BAD), EFAULT);
	/* the new stack is judged before the old one is written */
	CHECK_ERR(syscall(SYS_sigaltstack, &ss, BAD), EINVAL);
	ss.ss_flags = 0;
	ss.ss_size = 1024;
	CHECK_ERR(syscall(SYS_sigaltstack, &ss, BAD), ENOMEM);
	/* and the old one written after the new one is in place */
	ss.ss_size = sizeof altstack;
	CHECK_ERR(syscall(SYS_sigaltstack, &ss, BAD), EFAULT);
	CHECK_OK(syscall(SYS_sigaltstack, NULL, &os));
	CHECK(os.ss_sp == altstack && os.ss_size == sizeof altstack && os.ss_flags == 0);
	struct sigaction sa = {0};
	sa.sa_handler = on_altstack;
	sa.sa_flags = SA_ONSTACK;
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	CHECK_OK(raise(SIGUSR1));
	CHECK_EQ(altstack_err, EPERM);
	sa.sa_handler = SIG_DFL;
	sa.sa_flags = 0;
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	ss.ss_flags = SS_DISABLE;
	CHECK_OK(syscall(SYS_sigaltstack, &ss, NULL));
}

static void time_family(void)
{
	struct timespec badts = {0, -1};
	struct itimerval badit = {{0, 0}, {0, 1000000}};

	printf("== clocks\n");
	/* the clock before the pointer */
	CHECK_ERR(syscall(SYS_clock_gettime, 12345, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_clock_getres, 12345, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_clock_nanosleep, 12345, 0, BAD, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_clock_nanosleep, CLOCK_THREAD_CPUTIME_ID, 0, BAD, BAD), ENOTSUP);
	CHECK_ERR(syscall(SYS_clock_nanosleep, CLOCK_PROCESS_CPUTIME_ID, 0, BAD, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_clock_nanosleep, CLOCK_PROCESS_CPUTIME_ID, 0, &badts, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, BAD, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &badts, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_nanosleep, &badts, BAD), EINVAL);

	printf("== itimers, rusage\n");
	/* setitimer reads and judges the new value before `which` */
	CHECK_ERR(syscall(SYS_setitimer, 99, BAD, NULL), EFAULT);
	CHECK_ERR(syscall(SYS_setitimer, 99, &badit, NULL), EINVAL);
	CHECK_ERR(syscall(SYS_setitimer, 99, NULL, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_setitimer, ITIMER_REAL, &badit, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_getitimer, 99, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_getrusage, 99, BAD), EINVAL);
}

static void limits_family(void)
{
	struct rlimit lim, bad = {2, 1}, core;

	printf("== rlimits\n");
	/* setrlimit reads the new limit before it judges the resource */
	CHECK_ERR(syscall(SYS_setrlimit, 999, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_setrlimit, 999, &bad), EINVAL);
	CHECK_ERR(syscall(SYS_getrlimit, 999, BAD), EINVAL);
	/* prlimit64: the new limit, the pid, the resource, the limit's values */
	CHECK_ERR(syscall(SYS_prlimit64, NOPID, 999, BAD, NULL), EFAULT);
	CHECK_ERR(syscall(SYS_prlimit64, NOPID, 999, &bad, BAD), ESRCH);
	CHECK_ERR(syscall(SYS_prlimit64, 0, 999, &bad, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_prlimit64, 0, RLIMIT_CORE, &bad, BAD), EINVAL);
	/* and the old limit is written after the new one is in place */
	CHECK_OK(getrlimit(RLIMIT_CORE, &core));
	lim.rlim_cur = 0;
	lim.rlim_max = core.rlim_max;
	CHECK_ERR(syscall(SYS_prlimit64, 0, RLIMIT_CORE, &lim, BAD), EFAULT);
	CHECK_OK(getrlimit(RLIMIT_CORE, &lim));
	CHECK_EQ(lim.rlim_cur, 0);
	CHECK_OK(setrlimit(RLIMIT_CORE, &core));
	CHECK_ERR(syscall(SYS_getrandom, BAD, 16, 0x1000), EINVAL);
}

static void process_family(const char *self)
{
	printf("== wait4, waitid\n");
	CHECK_ERR(syscall(SYS_wait4, -1, BAD, 0x12345, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_wait4, INT_MIN, BAD, 0, BAD), ESRCH);
	CHECK_ERR(syscall(SYS_wait4, -1, BAD, WNOHANG, BAD), ECHILD);
	/* waitid writes the siginfo's fields whatever the outcome (zeroed on
	 * an error): a bad infop is EFAULT even when the call fails */
	CHECK_ERR(syscall(SYS_waitid, 99, 0, BAD, 0, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_waitid, 99, 0, NULL, 0, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_waitid, P_PID, 0, BAD, WEXITED, NULL), EFAULT);
	CHECK_ERR(syscall(SYS_waitid, P_PID, 0, NULL, WEXITED, BAD), EINVAL);
	CHECK_ERR(syscall(SYS_waitid, P_ALL, 0, BAD, WEXITED | WNOHANG, NULL), EFAULT);
	CHECK_ERR(syscall(SYS_waitid, P_ALL, 0, NULL, WEXITED | WNOHANG, BAD), ECHILD);
	siginfo_t si;
	memset(&si, 0x55, sizeof si);
	CHECK_ERR(syscall(SYS_waitid, 99, 0, &si, 0, NULL), EINVAL);
	CHECK(si.si_signo == 0 && si.si_errno == 0 && si.si_code == 0);
	CHECK(si.si_pid == 0 && si.si_uid == 0 && si.si_status == 0);
	/* only those fields */
	CHECK_EQ(((unsigned char *)&si)[12], 0x55);
	CHECK_EQ(((unsigned char *)&si)[100], 0x55);

	printf("== process groups\n");
	CHECK_ERR(syscall(SYS_setpgid, -5, 0), EINVAL);
	CHECK_ERR(syscall(SYS_setpgid, 0, (long)-1), EINVAL);
	CHECK_ERR(syscall(SYS_setpgid, -5, 1), ESRCH);
	CHECK_ERR(syscall(SYS_getpgid, -1), ESRCH);
	CHECK_ERR(syscall(SYS_getsid, NOPID), ESRCH);

	printf("== robust list, prctl\n");
	CHECK_ERR(syscall(SYS_get_robust_list, NOPID, BAD, BAD), ESRCH);
	/* the length is written before the head */
	size_t len = 0;
	CHECK_ERR(syscall(SYS_get_robust_list, 0, BAD, &len), EFAULT);
	CHECK_EQ(len, 24);
	CHECK_ERR(syscall(SYS_set_robust_list, BAD, 1), EINVAL);
	CHECK_ERR(syscall(SYS_prctl, NO_PR_SET_NO_NEW_PRIVS, 1, 1, 0, 0), EINVAL);
	CHECK_ERR(syscall(SYS_prctl, NO_PR_GET_NO_NEW_PRIVS, 1, 0, 0, 0), EINVAL);

	printf("== futex\n");
	static uint32_t w[2];
	struct timespec badts = {0, -1}, ts = {0, 1000};
	uint32_t *odd = (uint32_t *)((char *)w + 1);
	/* the timeout is read and judged first */
	CHECK_ERR(syscall(SYS_futex, odd, FUTEX_WAIT, 0, BAD, NULL, 0), EFAULT);
	CHECK_ERR(syscall(SYS_futex, odd, FUTEX_WAIT, 0, &badts, NULL, 0), EINVAL);
	CHECK_ERR(syscall(SYS_futex, w, FUTEX_WAIT_BITSET, 0, BAD, NULL, 0), EFAULT);
	CHECK_ERR(syscall(SYS_futex, w, FUTEX_WAIT, 1, &badts, NULL, 0), EINVAL);
	/* then the command */
	CHECK_ERR(syscall(SYS_futex, odd, 99, 0, NULL, NULL, 0), ENOSYS);
	CHECK_ERR(syscall(SYS_futex, odd, FUTEX_WAKE | FUTEX_CLOCK_REALTIME, 1, NULL, NULL, 0), ENOSYS);
	/* FUTEX_CLOCK_REALTIME only with FUTEX_WAIT_BITSET (of the calls nomu
	 * has), checked after the timeout */
	CHECK_ERR(syscall(SYS_futex, w, FUTEX_WAIT | FUTEX_CLOCK_REALTIME, 1, &ts, NULL, 0), ENOSYS);
	CHECK_ERR(syscall(SYS_futex, w, FUTEX_WAIT | FUTEX_CLOCK_REALTIME, 1, BAD, NULL, 0), EFAULT);
	CHECK_ERR(syscall(SYS_futex, w, FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME, 1, NULL, NULL, ~0u), EAGAIN);

	printf("== execve\n");
	/* the file is opened before argv and envp are read */
	char *bad_argv[] = {BAD, NULL};
	CHECK_ERR(syscall(SYS_execve, "nope", BAD, BAD), ENOENT);
	CHECK_ERR(syscall(SYS_execve, "f", BAD, BAD), EACCES);
	CHECK_ERR(syscall(SYS_execve, BAD, BAD, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_execve, self, bad_argv, BAD), EFAULT);
	/* both arrays are counted before any string is read, and envp's
	 * strings are read before argv's */
	static char huge[200000];
	memset(huge, 'x', sizeof huge - 1);
	char *huge_argv[] = {huge, NULL};
	CHECK_ERR(syscall(SYS_execve, self, huge_argv, BAD), EFAULT);
	CHECK_ERR(syscall(SYS_execve, self, bad_argv, huge_argv), E2BIG);
}

static void memory_family(void)
{
	char *m = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	CHECK_OK(munmap(m + PG, PG));

	printf("== mprotect\n");
	/* alignment, then an empty range (done), the end, the protection */
	CHECK_ERR(syscall(SYS_mprotect, m + 1, 0, 0x100), EINVAL);
	CHECK_EQ(syscall(SYS_mprotect, m, 0, 0x100), 0);
	CHECK_ERR(syscall(SYS_mprotect, m, -2L * PG, 0x100), ENOMEM);
	CHECK_ERR(syscall(SYS_mprotect, m + PG, PG, 0x100), EINVAL);
	CHECK_ERR(syscall(SYS_mprotect, m, 0, PROT_GROWSDOWN | PROT_GROWSUP), EINVAL);
	CHECK_ERR(syscall(SYS_mprotect, m + PG, PG, PROT_READ | PROT_GROWSDOWN | PROT_GROWSUP), EINVAL);
	CHECK_EQ(syscall(SYS_mprotect, m, PG, PROT_READ | NO_PROT_SEM), 0);
	CHECK_ERR(syscall(SYS_mprotect, m + PG, PG, PROT_READ), ENOMEM);

	printf("== msync, madvise\n");
	CHECK_ERR(syscall(SYS_msync, m + 1, 0, MS_ASYNC | MS_SYNC | 0x100), EINVAL);
	CHECK_ERR(syscall(SYS_msync, m, -2L * PG, MS_ASYNC), ENOMEM);
	CHECK_ERR(syscall(SYS_madvise, m + 1, 0, 999), EINVAL);
	CHECK_ERR(syscall(SYS_madvise, m, -2L * PG, MADV_NORMAL), EINVAL);
	CHECK_EQ(syscall(SYS_madvise, m, 0, MADV_NORMAL), 0);

	printf("== mremap\n");
	CHECK_ERR(syscall(SYS_mremap, m + 1, PG, 0, 0x100), EINVAL);
	CHECK_ERR(syscall(SYS_mremap, m, PG, 0, 0), EINVAL);
	CHECK_ERR(syscall(SYS_mremap, m, PG, 1ul << 48, MREMAP_MAYMOVE), EINVAL);
	CHECK_ERR(syscall(SYS_mremap, m + PG, PG, 2 * PG, 0), EFAULT);
	CHECK_ERR(syscall(SYS_mremap, m + PG, 0, PG, MREMAP_MAYMOVE), EFAULT);
	CHECK_OK(munmap(m, PG));
}

int main(int argc, char **argv)
{
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 2;
	}
	CHECK_OK(chdir(top));
	int fd = open("f", O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "0123456789", 10), 10);
	close(fd);

	io_family();
	path_family();
	wait_family();
	signal_family();
	time_family();
	limits_family();
	process_family(argv[0]);
	memory_family();

	CHECK_OK(unlink("f"));
	CHECK_OK(chdir("/"));
	CHECK_OK(rmdir(top));
	return checks_done();
}
