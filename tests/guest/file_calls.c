/* Small file calls: the chown family, statfs/fstatfs, mknod/mknodat
 * (FIFOs, sockets, regular files), fallocate, fadvise64, readahead, sync,
 * syncfs, sync_file_range, preadv/pwritev/preadv2/pwritev2, close_range,
 * utimes/futimesat and the extended-attribute calls, with Linux's errors.
 * Works in a scratch directory under /tmp; prints section names only. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/xattr.h>

#define PIPEFS_MAGIC 0x50495045
/* Not in musl's headers (glibc's have them: the same values). */
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE 2
#define CLOSE_RANGE_CLOEXEC 4
#endif
#ifndef RWF_HIPRI
#define RWF_HIPRI 1
#define RWF_APPEND 0x10
#endif

/* Not in this musl (glibc has them, but the raw calls are what is tested,
 * in both builds): the offset's high half is pos_h. */
static long raw_preadv2(int fd, const struct iovec *iov, int cnt, long off, int flags)
{
	return syscall(SYS_preadv2, fd, iov, cnt, off, 0, flags);
}

static long raw_pwritev2(int fd, const struct iovec *iov, int cnt, long off, int flags)
{
	return syscall(SYS_pwritev2, fd, iov, cnt, off, 0, flags);
}

static char dir[64];

static const char *at(const char *name)
{
	static char buf[4][128];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

static int make_file(const char *name, const char *content)
{
	int fd = open(at(name), O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0 && content)
		CHECK_EQ(write(fd, content, strlen(content)), (long)strlen(content));
	return fd;
}

static void chown_family(void)
{
	printf("== chown\n");
	uid_t u = geteuid();
	gid_t g = getegid();
	int fd = make_file("owned", "x");
	CHECK(fd >= 0);
	CHECK_OK(symlink(at("owned"), at("link")));
	CHECK_OK(chown(at("owned"), u, g));
	CHECK_OK(chown(at("owned"), -1, -1));
	CHECK_OK(lchown(at("link"), u, g));
	CHECK_OK(fchown(fd, u, -1));
	CHECK_OK(fchownat(AT_FDCWD, at("link"), -1, g, AT_SYMLINK_NOFOLLOW));
	CHECK_OK(fchownat(fd, "", u, g, AT_EMPTY_PATH));
	CHECK_ERR(fchownat(AT_FDCWD, at("owned"), u, g, 0x8000), EINVAL);
	CHECK_ERR(fchownat(AT_FDCWD, "", u, g, 0), ENOENT);
	CHECK_ERR(chown(at("missing"), u, g), ENOENT);
	CHECK_ERR(fchown(-1, u, g), EBADF);
	int opath = open(at("owned"), O_PATH);
	CHECK_ERR(syscall(SYS_fchown, opath, u, g), EBADF);
	CHECK_OK(fchownat(opath, "", u, g, AT_EMPTY_PATH));
	close(opath);
	if (u == 0) {
		struct stat st;
		CHECK_OK(chown(at("owned"), 1234, 5678));
		CHECK_OK(stat(at("owned"), &st));
		CHECK(st.st_uid == 1234 && st.st_gid == 5678);
		CHECK_OK(chown(at("owned"), -1, 99));
		CHECK_OK(stat(at("owned"), &st));
		CHECK(st.st_uid == 1234 && st.st_gid == 99);
		/* lchown changes the link, not its target. */
		CHECK_OK(lchown(at("link"), 42, 43));
		CHECK_OK(lstat(at("link"), &st));
		CHECK(st.st_uid == 42 && st.st_gid == 43);
		CHECK_OK(stat(at("link"), &st));
		CHECK_EQ(st.st_uid, 1234);
		/* A change of owner clears set-user-id. */
		CHECK_OK(fchmod(fd, 04755));
		CHECK_OK(fchown(fd, 7, -1));
		CHECK_OK(fstat(fd, &st));
		CHECK(st.st_uid == 7 && !(st.st_mode & 04000));
	}
	close(fd);
}

static void statfs_calls(void)
{
	printf("== statfs\n");
	struct statfs a, b;
	int fd = make_file("fs", NULL);
	CHECK_OK(statfs(at("fs"), &a));
	CHECK_OK(fstatfs(fd, &b));
	CHECK(a.f_type == b.f_type && a.f_bsize == b.f_bsize && a.f_blocks == b.f_blocks);
	CHECK_OK(statfs(dir, &b));
	CHECK_EQ(a.f_type, b.f_type);
	CHECK_ERR(statfs(at("missing"), &a), ENOENT);
	CHECK_ERR(statfs(at("fs/x"), &a), ENOTDIR);
	CHECK_ERR(syscall(SYS_statfs, at("fs"), (void *)8), EFAULT);
	CHECK_ERR(fstatfs(-1, &a), EBADF);
	CHECK_ERR(syscall(SYS_fstatfs, fd, (void *)8), EFAULT);
	int p[2];
	CHECK_OK(pipe(p));
	CHECK_OK(fstatfs(p[0], &a));
	CHECK_EQ(a.f_type, PIPEFS_MAGIC);
	/* /proc is a proc file system; what a link out of it names is not. */
	CHECK_OK(statfs("/proc", &a));
	CHECK_EQ(a.f_type, 0x9fa0);
	CHECK_OK(statfs("/proc/self", &a));
	CHECK_EQ(a.f_type, 0x9fa0);
	int status = open("/proc/self/status", O_RDONLY);
	CHECK_OK(fstatfs(status, &a));
	CHECK_EQ(a.f_type, 0x9fa0);
	close(status);
	CHECK_OK(statfs("/proc/self/exe", &a));
	CHECK(a.f_type != 0x9fa0);
	/* O_PATH descriptors are enough. */
	int opath = open(at("fs"), O_PATH);
	CHECK_OK(fstatfs(opath, &a));
	CHECK_EQ(a.f_type, b.f_type);
	close(opath);
	close(p[0]);
	close(p[1]);
	close(fd);
}

static void mknod_calls(void)
{
	printf("== mknod\n");
	struct stat st;
	umask(022);
	CHECK_OK(mknod(at("fifo"), S_IFIFO | 0666, 0));
	CHECK_OK(stat(at("fifo"), &st));
	CHECK(S_ISFIFO(st.st_mode) && (st.st_mode & 07777) == 0644);
	CHECK_OK(mknod(at("plain"), 0600, 0));
	CHECK_OK(stat(at("plain"), &st));
	CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600 && st.st_size == 0);
	CHECK_OK(mknod(at("reg"), S_IFREG | 0640, 0));
	CHECK_OK(stat(at("reg"), &st));
	CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640);
	CHECK_OK(mknod(at("sock"), S_IFSOCK | 0600, 0));
	CHECK_OK(lstat(at("sock"), &st));
	CHECK(S_ISSOCK(st.st_mode));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK_OK(mknodat(dfd, "fifo2", S_IFIFO | 0600, 0));
	CHECK_OK(fstatat(dfd, "fifo2", &st, 0));
	CHECK(S_ISFIFO(st.st_mode));
	CHECK_OK(mkfifoat(dfd, "fifo3", 0600));
	/* The guest's umask alone masks the mode. */
	umask(0);
	CHECK_OK(mknodat(dfd, "fifo4", S_IFIFO | 0666, 0));
	CHECK_OK(fstatat(dfd, "fifo4", &st, 0));
	CHECK_EQ(st.st_mode & 07777, 0666);
	CHECK_OK(mkdirat(dfd, "dir0", 0777));
	CHECK_OK(fstatat(dfd, "dir0", &st, 0));
	CHECK_EQ(st.st_mode & 07777, 0777);
	CHECK_OK(unlinkat(dfd, "dir0", AT_REMOVEDIR));
	umask(022);
	close(dfd);
	CHECK_ERR(mknod(at("fifo"), S_IFIFO | 0600, 0), EEXIST);
	CHECK_ERR(mknod(at("dir"), S_IFDIR | 0700, 0), EPERM);
	CHECK_ERR(mknod(at("odd"), 0110000 | 0600, 0), EINVAL);
	CHECK_ERR(mknod(at("missing/fifo"), S_IFIFO | 0600, 0), ENOENT);
	CHECK_ERR(mknod("", S_IFIFO | 0600, 0), ENOENT);
	/* A FIFO made so works as one. */
	int r = open(at("fifo"), O_RDONLY | O_NONBLOCK), w = open(at("fifo"), O_WRONLY);
	CHECK(r >= 0 && w >= 0);
	CHECK_EQ(write(w, "via fifo", 8), 8);
	char buf[16] = "";
	CHECK_EQ(read(r, buf, sizeof(buf)), 8);
	CHECK(!memcmp(buf, "via fifo", 8));
	close(r);
	close(w);
}

static void space_and_sync(void)
{
	printf("== fallocate, fadvise, readahead, sync\n");
	struct stat st;
	int fd = make_file("space", NULL);
	CHECK_OK(fallocate(fd, 0, 0, 8192));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 8192);
	CHECK_OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 8192, 8192));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 8192);
	CHECK_ERR(fallocate(fd, 0, 0, 0), EINVAL);
	CHECK_ERR(fallocate(fd, 0, -1, 10), EINVAL);
	CHECK_ERR(fallocate(-1, 0, 0, 10), EBADF);
	int ro = open(at("space"), O_RDONLY);
	CHECK_ERR(fallocate(ro, 0, 0, 10), EBADF);
	int p[2];
	CHECK_OK(pipe(p));
	CHECK_ERR(fallocate(p[1], 0, 0, 10), ESPIPE);

	CHECK_OK(syscall(SYS_fadvise64, fd, 0, 0, POSIX_FADV_SEQUENTIAL));
	CHECK_OK(syscall(SYS_fadvise64, ro, 0, 4096, POSIX_FADV_DONTNEED));
	CHECK_ERR(syscall(SYS_fadvise64, fd, 0, 0, 99), EINVAL);
	CHECK_ERR(syscall(SYS_fadvise64, p[0], 0, 0, POSIX_FADV_NORMAL), ESPIPE);
	CHECK_ERR(syscall(SYS_fadvise64, -1, 0, 0, POSIX_FADV_NORMAL), EBADF);
	CHECK_OK(readahead(ro, 0, 4096));
	CHECK_ERR(readahead(p[0], 0, 4096), EINVAL);
	CHECK_ERR(readahead(-1, 0, 4096), EBADF);

	sync();
	CHECK_OK(syncfs(fd));
	CHECK_ERR(syncfs(-1), EBADF);
	CHECK_OK(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE));
	CHECK_OK(sync_file_range(fd, 0, 4096, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE));
	CHECK_ERR(sync_file_range(fd, 0, 0, 8), EINVAL);
	CHECK_ERR(sync_file_range(fd, -1, 0, 0), EINVAL);
	CHECK_ERR(sync_file_range(p[0], 0, 0, SYNC_FILE_RANGE_WRITE), ESPIPE);
	close(p[0]);
	close(p[1]);
	close(ro);
	close(fd);
}

static void vectors(void)
{
	printf("== preadv, pwritev, preadv2, pwritev2\n");
	int fd = make_file("vec", "0123456789");
	CHECK_OK(lseek(fd, 2, SEEK_SET));
	char a[5] = "hello", b[6] = " world";
	struct iovec out[2] = { { a, 5 }, { b, 6 } };
	CHECK_EQ(pwritev(fd, out, 2, 100), 11);
	char x[6] = "", y[5] = "";
	struct iovec in[2] = { { x, 6 }, { y, 5 } };
	CHECK_EQ(preadv(fd, in, 2, 100), 11);
	CHECK(!memcmp(x, "hello ", 6) && !memcmp(y, "world", 5));
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 2);
	/* preadv2 at -1: the file position, which moves. */
	CHECK_EQ(raw_preadv2(fd, in, 1, -1, 0), 6);
	CHECK(!memcmp(x, "234567", 6));
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 8);
	CHECK_EQ(raw_preadv2(fd, in, 1, -1, RWF_HIPRI), 6);
	CHECK(!memcmp(x, "89", 2));
	CHECK_EQ(raw_preadv2(fd, in, 1, 0, RWF_HIPRI), 6);
	CHECK(!memcmp(x, "012345", 6));
	CHECK_EQ(raw_pwritev2(fd, out, 1, 0, RWF_APPEND), 5);
	struct stat st;
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 116);
	CHECK_EQ(raw_pwritev2(fd, out, 1, -1, 0), 5);
	CHECK_ERR(raw_preadv2(fd, in, 1, 0, 0x10000), EOPNOTSUPP);
	CHECK_ERR(raw_pwritev2(fd, out, 1, 0, 0x10000), EOPNOTSUPP);
	CHECK_ERR(preadv(fd, in, 1, -1), EINVAL);
	CHECK_ERR(raw_preadv2(fd, in, 1, -2, 0), EINVAL);
	CHECK_ERR(pwritev(-1, out, 1, -5), EINVAL); /* the offset first */
	CHECK_ERR(preadv(-1, in, 1, 0), EBADF);
	CHECK_ERR(preadv(fd, (void *)8, 1, 0), EFAULT);
	CHECK_ERR(preadv(fd, in, 1025, 0), EINVAL);
	int ro = open(at("vec"), O_RDONLY);
	CHECK_ERR(pwritev(ro, out, 1, 0), EBADF);
	close(ro);
	int p[2];
	CHECK_OK(pipe(p));
	CHECK_ERR(preadv(p[0], in, 1, 0), ESPIPE);
	CHECK_ERR(pwritev(p[1], out, 1, 0), ESPIPE);
	/* At -1 a pipe is read and written as by readv and writev. */
	CHECK_EQ(raw_pwritev2(p[1], out, 2, -1, 0), 11);
	CHECK_EQ(raw_preadv2(p[0], in, 2, -1, 0), 11);
	CHECK(!memcmp(x, "hello ", 6));
	CHECK_EQ(raw_pwritev2(p[1], out, 1, -1, RWF_HIPRI), 5);
	CHECK_EQ(raw_preadv2(p[0], in, 1, -1, RWF_HIPRI), 5);
	close(p[0]);
	close(p[1]);
	close(fd);
}

static void close_ranges(void)
{
	printf("== close_range\n");
	int fd = open("/dev/null", O_RDONLY);
	for (int i = 20; i <= 25; i++)
		CHECK_EQ(dup2(fd, i), i);
	CHECK_OK(syscall(SYS_close_range, 21, 23, 0));
	CHECK(fcntl(20, F_GETFD) == 0 && fcntl(24, F_GETFD) == 0);
	CHECK_ERR(fcntl(21, F_GETFD), EBADF);
	CHECK_ERR(fcntl(23, F_GETFD), EBADF);
	CHECK_OK(syscall(SYS_close_range, 24, 25, CLOSE_RANGE_CLOEXEC));
	CHECK(fcntl(24, F_GETFD) == FD_CLOEXEC && fcntl(25, F_GETFD) == FD_CLOEXEC);
	CHECK_EQ(fcntl(20, F_GETFD), 0);
	CHECK_ERR(syscall(SYS_close_range, 5, 4, 0), EINVAL);
	CHECK_ERR(syscall(SYS_close_range, 20, 20, 1), EINVAL);
	CHECK_OK(syscall(SYS_close_range, 1000, ~0u, 0));
	CHECK_OK(syscall(SYS_close_range, 24, 24, CLOSE_RANGE_UNSHARE));
	CHECK_ERR(fcntl(24, F_GETFD), EBADF);
	CHECK_OK(syscall(SYS_close_range, 20, ~0u, 0));
	CHECK_ERR(fcntl(25, F_GETFD), EBADF);
	CHECK_EQ(fcntl(fd, F_GETFD), 0);
	close(fd);
}

static void old_utimes(void)
{
	printf("== utimes, futimesat\n");
	struct stat st;
	int fd = make_file("times", NULL);
	struct timeval tv[2] = { { 1000, 5 }, { 2000, 7 } };
	CHECK_OK(utimes(at("times"), tv));
	CHECK_OK(stat(at("times"), &st));
	CHECK(st.st_atim.tv_sec == 1000 && st.st_atim.tv_nsec == 5000);
	CHECK(st.st_mtim.tv_sec == 2000 && st.st_mtim.tv_nsec == 7000);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	tv[1].tv_sec = 3000;
	CHECK_OK(syscall(SYS_futimesat, dfd, "times", tv));
	CHECK_OK(stat(at("times"), &st));
	CHECK_EQ(st.st_mtim.tv_sec, 3000);
	/* No path: the descriptor itself. */
	tv[1].tv_sec = 4000;
	CHECK_OK(syscall(SYS_futimesat, fd, NULL, tv));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_mtim.tv_sec, 4000);
	CHECK_ERR(syscall(SYS_futimesat, AT_FDCWD, NULL, tv), EFAULT);
	CHECK_OK(utimes(at("times"), NULL));
	CHECK_OK(stat(at("times"), &st));
	CHECK(st.st_mtim.tv_sec > 4000);
	tv[0].tv_usec = 1000000;
	CHECK_ERR(utimes(at("times"), tv), EINVAL);
	tv[0].tv_usec = -1;
	CHECK_ERR(utimes(at("times"), tv), EINVAL);
	tv[0].tv_usec = 0;
	CHECK_ERR(utimes(at("missing"), tv), ENOENT);
	CHECK_ERR(syscall(SYS_utimes, at("times"), (void *)8), EFAULT);
	close(dfd);
	close(fd);
}

static void xattrs(void)
{
	printf("== extended attributes\n");
	int fd = make_file("attrs", "x");
	CHECK_OK(symlink(at("attrs"), at("attrs-link")));
	char f[128], buf[256];
	snprintf(f, sizeof(f), "%s", at("attrs"));
	CHECK_OK(setxattr(f, "user.nomu", "value", 5, 0));
	CHECK_EQ(getxattr(f, "user.nomu", NULL, 0), 5);
	CHECK_EQ(getxattr(f, "user.nomu", buf, sizeof(buf)), 5);
	CHECK(!memcmp(buf, "value", 5));
	CHECK_ERR(getxattr(f, "user.nomu", buf, 2), ERANGE);
	CHECK_ERR(setxattr(f, "user.nomu", "v", 1, XATTR_CREATE), EEXIST);
	CHECK_ERR(setxattr(f, "user.other", "v", 1, XATTR_REPLACE), ENODATA);
	CHECK_ERR(setxattr(f, "user.other", "v", 1, 4), EINVAL);
	CHECK_OK(fsetxattr(fd, "user.two", "2", 1, XATTR_CREATE));
	CHECK_EQ(fgetxattr(fd, "user.two", buf, sizeof(buf)), 1);
	long n = listxattr(f, NULL, 0);
	CHECK(n >= 19);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(listxattr(f, buf, sizeof(buf)), n);
	int found = 0;
	for (char *p = buf; p < buf + n; p += strlen(p) + 1)
		found += !strcmp(p, "user.nomu") || !strcmp(p, "user.two");
	CHECK_EQ(found, 2);
	CHECK_EQ(flistxattr(fd, buf, sizeof(buf)), n);
	CHECK_ERR(listxattr(f, buf, 1), ERANGE);
	/* Through a symlink, or on the link itself. */
	CHECK_EQ(getxattr(at("attrs-link"), "user.nomu", buf, sizeof(buf)), 5);
	CHECK_ERR(lgetxattr(at("attrs-link"), "user.nomu", buf, sizeof(buf)), ENODATA);
	CHECK_ERR(lsetxattr(at("attrs-link"), "user.nomu", "v", 1, 0), EPERM);
	CHECK(llistxattr(at("attrs-link"), buf, sizeof(buf)) >= 0);
	CHECK_ERR(lremovexattr(at("attrs-link"), "user.nomu"), EPERM);
	CHECK_OK(removexattr(at("attrs-link"), "user.nomu"));
	CHECK_ERR(getxattr(f, "user.nomu", buf, sizeof(buf)), ENODATA);
	CHECK_ERR(removexattr(f, "user.nomu"), ENODATA);
	CHECK_OK(fremovexattr(fd, "user.two"));
	/* Names: empty or too long is ERANGE; values past 64 KiB E2BIG. */
	char name[300];
	memset(name, 'a', sizeof(name));
	memcpy(name, "user.", 5);
	name[256] = 0;
	CHECK_ERR(setxattr(f, "", "v", 1, 0), ERANGE);
	CHECK_ERR(getxattr(f, name, buf, sizeof(buf)), ERANGE);
	name[255] = 0;
	CHECK_ERR(getxattr(f, name, buf, sizeof(buf)), ENODATA);
	CHECK_ERR(setxattr(f, "user.big", buf, 65537, 0), E2BIG);
	CHECK_ERR(setxattr(f, "user.bad", (void *)8, 4, 0), EFAULT);
	CHECK_ERR(setxattr(f, (void *)8, "v", 1, 0), EFAULT);
	CHECK_OK(setxattr(f, "user.nomu", "value", 5, 0));
	CHECK_ERR(getxattr(f, "user.nomu", (void *)8, 16), EFAULT);
	/* The name is read before the path is looked up. */
	CHECK_ERR(setxattr(at("missing"), "", "v", 1, 0), ERANGE);
	CHECK_ERR(getxattr(at("missing"), "user.nomu", buf, sizeof(buf)), ENOENT);
	CHECK_ERR(fgetxattr(-1, "user.nomu", buf, sizeof(buf)), EBADF);
	CHECK_ERR(setxattr(f, "bogus.name", "v", 1, 0), EOPNOTSUPP);
	close(fd);
}

static void cleanup(void)
{
	const char *names[] = { "owned", "link", "fs", "fifo", "fifo2", "fifo3", "fifo4", "plain", "reg", "sock",
				"space", "vec", "times", "attrs", "attrs-link" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(at(names[i]));
	CHECK_OK(rmdir(dir));
}

int main(void)
{
	/* Every guest is pid 1 under nomu: a random name (tests run at once). */
	snprintf(dir, sizeof(dir), "/tmp/nomu-file-calls-XXXXXX");
	if (!mkdtemp(dir)) {
		perror(dir);
		return 2;
	}
	chown_family();
	statfs_calls();
	mknod_calls();
	space_and_sync();
	vectors();
	close_ranges();
	old_utimes();
	xattrs();
	cleanup();
	return checks_done();
}
