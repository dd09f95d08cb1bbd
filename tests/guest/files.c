/* Every file and directory syscall nomu emulates, with its results, the
 * contents it moves and the errors Linux gives.  Works in a fresh
 * mkdtemp("/tmp/nomu-XXXXXX") directory and removes it at the end.
 * Prints section names and the (sorted) directory listing only. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* musl 1.2.3 has no statx(): the kernel's struct and constants. */
struct kstatx_timestamp {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t reserved;
};
struct kstatx {
	uint32_t stx_mask, stx_blksize;
	uint64_t stx_attributes;
	uint32_t stx_nlink, stx_uid, stx_gid;
	uint16_t stx_mode, pad1;
	uint64_t stx_ino, stx_size, stx_blocks, stx_attributes_mask;
	struct kstatx_timestamp stx_atime, stx_btime, stx_ctime, stx_mtime;
	uint32_t stx_rdev_major, stx_rdev_minor, stx_dev_major, stx_dev_minor;
	uint64_t spare[14];
};
#define K_STATX_TYPE 0x1U
#define K_STATX_MODE 0x2U
#define K_STATX_NLINK 0x4U
#define K_STATX_SIZE 0x200U
#define K_STATX_BASIC_STATS 0x7ffU
#define K_STATX_RESERVED 0x80000000U

struct kdirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static char top[] = "/tmp/nomu-XXXXXX";

static void section(const char *name)
{
	printf("== %s\n", name);
	fflush(stdout);
}

/* Reads the whole file at path into buf (NUL-terminated); returns length. */
static long slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	long n = read(fd, buf, cap - 1);
	close(fd);
	if (n >= 0)
		buf[n] = 0;
	return n;
}

static int put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	long n = write(fd, text, strlen(text));
	close(fd);
	return n == (long)strlen(text) ? 0 : -1;
}

/* Lists a directory fd with raw getdents64 and a given buffer size; fills
 * names (sorted) and returns the count, or -1.  *types gets d_type per name. */
static int list_dir(int dfd, size_t bufsz, char names[][64], unsigned char *types,
		    int max)
{
	char buf[4096] __attribute__((aligned(8)));
	int n = 0;
	if (bufsz > sizeof buf)
		bufsz = sizeof buf;
	for (;;) {
		long got = syscall(SYS_getdents64, dfd, buf, bufsz);
		if (got < 0)
			return -1;
		if (got == 0)
			break;
		for (long off = 0; off < got;) {
			struct kdirent64 *d = (struct kdirent64 *)(buf + off);
			if (n < max) {
				snprintf(names[n], 64, "%s", d->d_name);
				types[n] = d->d_type;
				n++;
			}
			off += d->d_reclen;
		}
	}
	/* sort names together with their types */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char tmp[64];
			unsigned char t = types[j];
			memcpy(tmp, names[j], 64);
			memcpy(names[j], names[j - 1], 64);
			memcpy(names[j - 1], tmp, 64);
			types[j] = types[j - 1];
			types[j - 1] = t;
		}
	return n;
}

static void test_open_read_write(void)
{
	char buf[256];
	section("open/read/write/lseek");

	int fd = open("a.txt", O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "hello world\n", 12), 12);
	CHECK_EQ(write(fd, "", 0), 0);
	CHECK_ERR(read(fd, buf, 1), EBADF);	/* O_WRONLY */
	CHECK_OK(close(fd));
	CHECK_ERR(close(fd), EBADF);
	CHECK_ERR(open("a.txt", O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST);
	CHECK_ERR(open("missing.txt", O_RDONLY), ENOENT);

	fd = open("a.txt", O_RDWR);
	CHECK(fd >= 0);
	memset(buf, 0, sizeof buf);
	CHECK_EQ(read(fd, buf, 5), 5);
	CHECK(memcmp(buf, "hello", 5) == 0);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 5);
	CHECK_EQ(lseek(fd, 1, SEEK_CUR), 6);
	CHECK_EQ(read(fd, buf, sizeof buf), 6);
	CHECK(memcmp(buf, "world\n", 6) == 0);
	CHECK_EQ(read(fd, buf, sizeof buf), 0); /* EOF */
	CHECK_EQ(lseek(fd, 0, SEEK_END), 12);
	CHECK_EQ(lseek(fd, -6, SEEK_END), 6);
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_ERR(lseek(fd, -1, SEEK_SET), EINVAL);
	CHECK_ERR(lseek(fd, -100, SEEK_CUR), EINVAL);
	CHECK_ERR(lseek(fd, 0, 99), EINVAL);

	/* pread/pwrite use their own offset and leave the file offset. */
	CHECK_EQ(lseek(fd, 3, SEEK_SET), 3);
	CHECK_EQ(pread(fd, buf, 5, 6), 5);
	CHECK(memcmp(buf, "world", 5) == 0);
	CHECK_EQ(pwrite(fd, "WORLD", 5, 6), 5);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 3);
	CHECK_EQ(pread(fd, buf, 100, 0), 12);
	CHECK(memcmp(buf, "hello WORLD\n", 12) == 0);
	CHECK_EQ(pread(fd, buf, 10, 100), 0); /* past EOF */
	CHECK_ERR(pread(fd, buf, 1, -1), EINVAL);

	/* A write past EOF leaves a hole that reads as zeros. */
	CHECK_EQ(pwrite(fd, "X", 1, 20), 1);
	CHECK_EQ(pread(fd, buf, 100, 0), 21);
	static const char zeros[8];
	CHECK(memcmp(buf + 12, zeros, 8) == 0 && buf[20] == 'X');
	CHECK_EQ(lseek(fd, 40, SEEK_SET), 40); /* seeking past EOF is fine */
	CHECK_EQ(read(fd, buf, 10), 0);
	CHECK_OK(close(fd));

	/* readv / writev */
	fd = open("v.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	struct iovec wv[3] = {{"abc", 3}, {"", 0}, {"defgh", 5}};
	CHECK_EQ(writev(fd, wv, 3), 8);
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	char r1[2], r2[4], r3[10];
	struct iovec rv[3] = {{r1, 2}, {r2, 4}, {r3, 10}};
	CHECK_EQ(readv(fd, rv, 3), 8);
	CHECK(memcmp(r1, "ab", 2) == 0 && memcmp(r2, "cdef", 4) == 0 &&
	      memcmp(r3, "gh", 2) == 0);
	CHECK_ERR(readv(fd, rv, -1), EINVAL);
	CHECK_ERR(writev(fd, wv, 1025), EINVAL);
	CHECK_EQ(readv(fd, rv, 0), 0);
	CHECK_OK(close(fd));

	/* O_TRUNC empties, O_APPEND always writes at the end. */
	fd = open("v.txt", O_WRONLY | O_TRUNC);
	CHECK(fd >= 0);
	struct stat st;
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 0);
	CHECK_EQ(write(fd, "12345", 5), 5);
	CHECK_OK(close(fd));
	fd = open("v.txt", O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(write(fd, "67", 2), 2);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 7);
	CHECK_OK(close(fd));
	CHECK_EQ(slurp("v.txt", buf, sizeof buf), 7);
	CHECK(strcmp(buf, "1234567") == 0);

	/* O_CREAT mode with a fresh file, O_CREAT on an existing file keeps it */
	fd = open("v.txt", O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 7);
	CHECK_OK(close(fd));

	/* O_CLOEXEC shows in F_GETFD */
	fd = open("v.txt", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
	CHECK_OK(close(fd));
	fd = open("v.txt", O_RDONLY);
	CHECK_EQ(fcntl(fd, F_GETFD), 0);
	CHECK_OK(close(fd));

	/* The lowest free descriptor is used. */
	int f1 = open("v.txt", O_RDONLY), f2 = open("v.txt", O_RDONLY);
	CHECK(f2 == f1 + 1);
	CHECK_OK(close(f1));
	CHECK_EQ(open("v.txt", O_RDONLY), f1);
	CHECK_OK(close(f1));
	CHECK_OK(close(f2));
	CHECK_OK(unlink("v.txt"));
}

static void test_stat(void)
{
	struct stat st, st2;
	struct kstatx sx;
	section("stat/lstat/fstatat/statx");

	CHECK_OK(stat("a.txt", &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_size, 21);
	CHECK_EQ(st.st_nlink, 1);
	CHECK_OK(chmod("a.txt", 0640));
	CHECK_OK(stat("a.txt", &st));
	CHECK_EQ(st.st_mode & 07777, 0640);
	CHECK_OK(chmod("a.txt", 0644));
	CHECK_ERR(chmod("nope", 0644), ENOENT);

	int fd = open("a.txt", O_RDONLY);
	CHECK_OK(fstat(fd, &st2));
	CHECK_EQ(st2.st_ino, st.st_ino);
	CHECK_EQ(st2.st_dev, st.st_dev);
	CHECK_EQ(st2.st_size, 21);
	CHECK_EQ(st2.st_mode & 07777, 0644);

	CHECK_OK(symlink("a.txt", "link"));
	CHECK_OK(lstat("link", &st2));
	CHECK(S_ISLNK(st2.st_mode));
	CHECK_EQ(st2.st_size, 5); /* strlen of the target */
	CHECK_OK(stat("link", &st2));
	CHECK(S_ISREG(st2.st_mode));
	CHECK_EQ(st2.st_ino, st.st_ino);

	/* newfstatat: follow, AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH */
	CHECK_OK(syscall(SYS_newfstatat, AT_FDCWD, "link", &st2, 0));
	CHECK(S_ISREG(st2.st_mode));
	CHECK_OK(syscall(SYS_newfstatat, AT_FDCWD, "link", &st2, AT_SYMLINK_NOFOLLOW));
	CHECK(S_ISLNK(st2.st_mode));
	CHECK_OK(syscall(SYS_newfstatat, fd, "", &st2, AT_EMPTY_PATH));
	CHECK_EQ(st2.st_ino, st.st_ino);
	CHECK_EQ(st2.st_size, 21);
	CHECK_ERR(syscall(SYS_newfstatat, fd, "", &st2, 0), ENOENT);
	CHECK_ERR(syscall(SYS_newfstatat, AT_FDCWD, "a.txt", &st2, 0x12345678), EINVAL);
	CHECK_ERR(syscall(SYS_newfstatat, fd, "x", &st2, 0), ENOTDIR);
	CHECK_ERR(syscall(SYS_newfstatat, 9999, "x", &st2, 0), EBADF);
	CHECK_ERR(stat("", &st2), ENOENT);

	/* statx */
	memset(&sx, 0xff, sizeof sx);
	CHECK_OK(syscall(SYS_statx, AT_FDCWD, "a.txt", 0, K_STATX_BASIC_STATS, &sx));
	CHECK((sx.stx_mask & (K_STATX_SIZE | K_STATX_MODE | K_STATX_TYPE | K_STATX_NLINK)) ==
	      (K_STATX_SIZE | K_STATX_MODE | K_STATX_TYPE | K_STATX_NLINK));
	CHECK_EQ(sx.stx_size, 21);
	CHECK_EQ(sx.stx_mode, S_IFREG | 0644);
	CHECK_EQ(sx.stx_nlink, 1);
	CHECK_EQ(sx.stx_ino, st.st_ino);
	CHECK_OK(syscall(SYS_statx, AT_FDCWD, "link", AT_SYMLINK_NOFOLLOW, K_STATX_BASIC_STATS, &sx));
	CHECK(S_ISLNK(sx.stx_mode));
	CHECK_OK(syscall(SYS_statx, fd, "", AT_EMPTY_PATH, K_STATX_SIZE, &sx));
	CHECK_EQ(sx.stx_size, 21);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, "nope", 0, K_STATX_BASIC_STATS, &sx), ENOENT);
	CHECK_ERR(syscall(SYS_statx, AT_FDCWD, "a.txt", 0, K_STATX_RESERVED, &sx), EINVAL);
	CHECK_OK(close(fd));

	/* access / faccessat */
	CHECK_OK(access("a.txt", F_OK));
	CHECK_OK(access("a.txt", R_OK | W_OK));
	CHECK_ERR(access("a.txt", X_OK), EACCES); /* even root needs an x bit */
	CHECK_ERR(access("nope", F_OK), ENOENT);
	CHECK_ERR(access("a.txt/x", F_OK), ENOTDIR);
	CHECK_ERR(syscall(SYS_access, "a.txt", 0x10), EINVAL);
	CHECK_OK(chmod("a.txt", 0755));
	CHECK_OK(access("a.txt", X_OK));
	CHECK_OK(chmod("a.txt", 0644));
	CHECK_OK(syscall(SYS_faccessat, AT_FDCWD, "a.txt", R_OK));
	CHECK_OK(access(".", X_OK));
	CHECK_OK(unlink("link"));
}

static void test_dirs(void)
{
	char names[16][64];
	unsigned char types[16];
	char cwd[4096], want[4096], buf[256];
	struct stat st;
	section("mkdir/getdents64/getcwd/chdir");

	CHECK_OK(mkdir("d", 0755));
	CHECK_ERR(mkdir("d", 0755), EEXIST);
	CHECK_ERR(mkdir("a.txt", 0755), EEXIST);
	CHECK_ERR(mkdir("nope/d", 0755), ENOENT);
	CHECK_ERR(mkdir("a.txt/d", 0755), ENOTDIR);
	CHECK_OK(stat("d", &st));
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_nlink, 2);

	int dfd = open("d", O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	CHECK_EQ(fcntl(dfd, F_GETFL), O_RDONLY | O_DIRECTORY | 0100000);
	CHECK_OK(mkdirat(dfd, "sub", 0755));
	CHECK_ERR(mkdirat(dfd, "sub", 0755), EEXIST);
	CHECK_OK(stat("d", &st));
	CHECK_EQ(st.st_nlink, 3); /* "..", of sub */
	int fd = openat(dfd, "f1", O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "one", 3), 3);
	CHECK_OK(close(fd));
	fd = openat(dfd, "f2", O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	CHECK_OK(close(fd));
	CHECK_OK(symlinkat("f1", dfd, "sl"));

	/* getdents64 with a big buffer, then entry by entry. */
	int n = list_dir(dfd, 4096, names, types, 16);
	CHECK_EQ(n, 6);
	printf("listing:");
	for (int i = 0; i < n; i++)
		printf(" %s", names[i]);
	printf("\n");
	if (n == 6) {
		CHECK(strcmp(names[0], ".") == 0 && types[0] == DT_DIR);
		CHECK(strcmp(names[1], "..") == 0 && types[1] == DT_DIR);
		CHECK(strcmp(names[2], "f1") == 0 && types[2] == DT_REG);
		CHECK(strcmp(names[3], "f2") == 0 && types[3] == DT_REG);
		CHECK(strcmp(names[4], "sl") == 0 && types[4] == DT_LNK);
		CHECK(strcmp(names[5], "sub") == 0 && types[5] == DT_DIR);
	}
	CHECK_EQ(syscall(SYS_getdents64, dfd, buf, sizeof buf), 0); /* at end */
	CHECK_EQ(lseek(dfd, 0, SEEK_SET), 0);
	n = list_dir(dfd, 32, names, types, 16); /* one 24..32-byte entry per call */
	CHECK_EQ(n, 6);
	CHECK_EQ(lseek(dfd, 0, SEEK_SET), 0);
	CHECK_ERR(syscall(SYS_getdents64, dfd, buf, 8), EINVAL); /* too small */
	fd = open("a.txt", O_RDONLY);
	CHECK_ERR(syscall(SYS_getdents64, fd, buf, sizeof buf), ENOTDIR);
	CHECK_ERR(syscall(SYS_getdents64, 9999, buf, sizeof buf), EBADF);
	CHECK_ERR(read(dfd, buf, sizeof buf), EISDIR);
	CHECK_OK(close(fd));

	/* getcwd / chdir / fchdir and ".." */
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	CHECK(strcmp(cwd, top) == 0);
	CHECK_EQ(syscall(SYS_getcwd, cwd, sizeof cwd), strlen(top) + 1); /* counts the NUL */
	CHECK_ERR(syscall(SYS_getcwd, cwd, 3), ERANGE);
	CHECK_OK(chdir("d/sub"));
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	snprintf(want, sizeof want, "%s/d/sub", top);
	CHECK(strcmp(cwd, want) == 0);
	CHECK_EQ(slurp("../f1", buf, sizeof buf), 3);
	CHECK_EQ(slurp("../../a.txt", buf, sizeof buf), 21);
	CHECK_EQ(slurp("./.././../d/./f1", buf, sizeof buf), 3);
	CHECK_OK(chdir(".."));
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	snprintf(want, sizeof want, "%s/d", top);
	CHECK(strcmp(cwd, want) == 0);
	CHECK_OK(chdir(top));
	CHECK_OK(fchdir(dfd));
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	CHECK(strcmp(cwd, want) == 0);
	CHECK_EQ(slurp("f1", buf, sizeof buf), 3);
	CHECK_OK(chdir(".."));
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	CHECK(strcmp(cwd, top) == 0);
	CHECK_ERR(chdir("a.txt"), ENOTDIR);
	CHECK_ERR(chdir("nope"), ENOENT);
	fd = open("a.txt", O_RDONLY);
	CHECK_ERR(fchdir(fd), ENOTDIR);
	CHECK_ERR(fchdir(9999), EBADF);
	CHECK_OK(close(fd));

	/* ".." at the root stays at the root; ".." after a file is ENOTDIR */
	struct stat root, rootdd;
	CHECK_OK(stat("/", &root));
	CHECK_OK(stat("/../..", &rootdd));
	CHECK(root.st_ino == rootdd.st_ino && root.st_dev == rootdd.st_dev);
	CHECK_ERR(stat("a.txt/..", &st), ENOTDIR);
	CHECK_ERR(open("a.txt/", O_RDONLY), ENOTDIR);
	CHECK_OK(stat("d/sub/../../a.txt", &st));
	CHECK_EQ(st.st_size, 21);
	CHECK_OK(stat("d/", &st));
	CHECK_OK(stat("d/sub/..", &st));
	CHECK(S_ISDIR(st.st_mode));

	/* O_DIRECTORY, O_NOFOLLOW, directories opened for writing */
	CHECK_ERR(open("a.txt", O_RDONLY | O_DIRECTORY), ENOTDIR);
	CHECK_ERR(open("d", O_WRONLY), EISDIR);
	CHECK_ERR(open("d", O_RDWR), EISDIR);
	CHECK_ERR(open("d/sl", O_RDONLY | O_NOFOLLOW), ELOOP);
	fd = open("d/f1", O_RDONLY | O_NOFOLLOW);
	CHECK(fd >= 0);
	CHECK_OK(close(fd));
	fd = open("d/sl", O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(read(fd, buf, sizeof buf), 3);
	CHECK_OK(close(fd));

	/* Relative *at paths through the directory fd */
	fd = openat(dfd, "../a.txt", O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(read(fd, buf, sizeof buf), 21);
	CHECK_ERR(openat(fd, "x", O_RDONLY), ENOTDIR);
	CHECK_OK(close(fd));
	CHECK_ERR(openat(9999, "a.txt", O_RDONLY), EBADF);
	snprintf(want, sizeof want, "%s/a.txt", top);
	fd = openat(9999, want, O_RDONLY); /* absolute: dirfd is ignored */
	CHECK(fd >= 0);
	CHECK_OK(close(fd));
	CHECK_OK(syscall(SYS_newfstatat, dfd, "sub/../f1", &st, 0));
	CHECK_EQ(st.st_size, 3);
	CHECK_OK(syscall(SYS_faccessat, dfd, "f2", F_OK));
	CHECK_ERR(syscall(SYS_faccessat, dfd, "f3", F_OK), ENOENT);

	CHECK_OK(close(dfd));
}

static void test_names(void)
{
	char buf[256];
	struct stat st;
	section("rename/link/symlink/readlink/unlink/rmdir");
	int dfd = open("d", O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);

	/* readlink / readlinkat */
	memset(buf, 'z', sizeof buf);
	CHECK_EQ(readlink("d/sl", buf, sizeof buf), 2);
	CHECK(memcmp(buf, "f1z", 3) == 0); /* not NUL-terminated */
	CHECK_EQ(readlinkat(dfd, "sl", buf, 1), 1); /* truncated */
	CHECK_EQ(buf[0], 'f');
	CHECK_ERR(readlink("a.txt", buf, sizeof buf), EINVAL);
	CHECK_ERR(readlink("nope", buf, sizeof buf), ENOENT);
	CHECK_ERR(syscall(SYS_readlink, "d/sl", buf, 0), EINVAL);
	CHECK_OK(symlinkat("/nonexistent/target", dfd, "dangling"));
	CHECK_EQ(readlinkat(dfd, "dangling", buf, sizeof buf), 19);
	CHECK_ERR(stat("d/dangling", &st), ENOENT);
	CHECK_OK(lstat("d/dangling", &st));
	CHECK_ERR(symlink("x", "d/dangling"), EEXIST);
	CHECK_ERR(open("d/dangling", O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST);
	CHECK_OK(unlinkat(dfd, "dangling", 0));
	CHECK_OK(symlink("../a.txt", "d/up"));
	CHECK_EQ(slurp("d/up", buf, sizeof buf), 21);
	CHECK_OK(unlink("d/up"));

	/* link / linkat and st_nlink */
	CHECK_OK(link("a.txt", "hard"));
	CHECK_OK(stat("a.txt", &st));
	CHECK_EQ(st.st_nlink, 2);
	CHECK_ERR(link("a.txt", "hard"), EEXIST);
	CHECK_ERR(link("nope", "hard2"), ENOENT);
	CHECK_ERR(link("d", "dlink"), EPERM);
	CHECK_OK(linkat(AT_FDCWD, "hard", dfd, "hard3", 0));
	CHECK_OK(stat("hard", &st));
	CHECK_EQ(st.st_nlink, 3);
	CHECK_OK(unlink("hard"));
	CHECK_OK(unlinkat(dfd, "hard3", 0));
	CHECK_OK(stat("a.txt", &st));
	CHECK_EQ(st.st_nlink, 1);

	/* rename / renameat */
	CHECK_OK(put("r1", "first"));
	CHECK_OK(put("r2", "second"));
	CHECK_OK(rename("r1", "r3"));
	CHECK_ERR(stat("r1", &st), ENOENT);
	CHECK_EQ(slurp("r3", buf, sizeof buf), 5);
	CHECK_OK(rename("r3", "r2")); /* replaces r2 */
	CHECK_EQ(slurp("r2", buf, sizeof buf), 5);
	CHECK(strcmp(buf, "first") == 0);
	CHECK_OK(renameat(AT_FDCWD, "r2", dfd, "r4"));
	CHECK_EQ(slurp("d/r4", buf, sizeof buf), 5);
	CHECK_OK(renameat(dfd, "r4", dfd, "../r5"));
	CHECK_EQ(slurp("r5", buf, sizeof buf), 5);
	CHECK_OK(rename("r5", "r5")); /* same name: nothing happens */
	CHECK_ERR(rename("nope", "r6"), ENOENT);
	CHECK_ERR(rename("r5", "d"), EISDIR);
	CHECK_ERR(rename("d/sub", "r5"), ENOTDIR);
	CHECK_ERR(rename("d", "d/sub/x"), EINVAL); /* into itself */
	CHECK_OK(mkdir("e", 0755));
	CHECK_OK(rename("e", "e2")); /* empty dir */
	CHECK_OK(put("e2/x", "x"));
	CHECK_ERR(rename("d/sub", "e2"), ENOTEMPTY);
	CHECK_OK(unlink("e2/x"));
	CHECK_OK(rename("d/sub", "e2")); /* onto an empty dir */
	CHECK_OK(stat("e2", &st));
	CHECK(S_ISDIR(st.st_mode));
	CHECK_OK(unlink("r5"));

	/* unlink / unlinkat / rmdir */
	CHECK_ERR(unlink("d"), EISDIR); /* Linux says EISDIR, not EPERM */
	CHECK_ERR(unlink("nope"), ENOENT);
	CHECK_ERR(rmdir("d"), ENOTEMPTY);
	CHECK_ERR(rmdir("a.txt"), ENOTDIR);
	CHECK_ERR(rmdir("nope"), ENOENT);
	CHECK_ERR(rmdir("e2/."), EINVAL);
	CHECK_ERR(unlinkat(dfd, "f1", AT_REMOVEDIR), ENOTDIR);
	CHECK_ERR(unlinkat(dfd, "f1", 0x1), EINVAL); /* unknown flag */
	CHECK_OK(unlinkat(dfd, "f1", 0));
	CHECK_OK(unlinkat(dfd, "f2", 0));
	CHECK_OK(unlinkat(dfd, "sl", 0));
	CHECK_OK(unlinkat(AT_FDCWD, "e2", AT_REMOVEDIR));
	char names[8][64];
	unsigned char types[8];
	CHECK_EQ(lseek(dfd, 0, SEEK_SET), 0);
	CHECK_EQ(list_dir(dfd, 4096, names, types, 8), 2); /* . and .. */
	CHECK_OK(close(dfd));
	CHECK_OK(rmdir("d"));
	CHECK_ERR(stat("d", &st), ENOENT);
}

static void test_fd_ops(void)
{
	char buf[64];
	struct stat st;
	section("ftruncate/fsync/fcntl/dup/pipe");

	/* ftruncate: grow (zero-filled) and shrink */
	int fd = open("t", O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "abcdef", 6), 6);
	CHECK_OK(ftruncate(fd, 3));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 3);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 6); /* offset unchanged */
	CHECK_OK(ftruncate(fd, 10));
	CHECK_EQ(pread(fd, buf, sizeof buf, 0), 10);
	CHECK(memcmp(buf, "abc\0\0\0\0\0\0\0", 10) == 0);
	CHECK_ERR(ftruncate(fd, -1), EINVAL);
	CHECK_OK(fsync(fd));
	int ro = open("t", O_RDONLY);
	CHECK_ERR(ftruncate(ro, 0), EINVAL); /* not open for writing */
	CHECK_ERR(write(ro, "x", 1), EBADF);
	CHECK_ERR(ftruncate(9999, 0), EBADF);
	CHECK_ERR(fsync(9999), EBADF);

	/* fcntl */
	CHECK_EQ(fcntl(fd, F_GETFD), 0);
	CHECK_EQ(fcntl(fd, F_SETFD, FD_CLOEXEC), 0);
	CHECK_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
	CHECK_EQ(fcntl(fd, F_SETFD, 0), 0);
	CHECK_EQ(fcntl(fd, F_GETFD), 0);
	/* Linux x86-64 reports O_LARGEFILE (0100000) in F_GETFL */
	CHECK_EQ(fcntl(fd, F_GETFL), O_RDWR | 0100000);
	CHECK_EQ(fcntl(ro, F_GETFL), O_RDONLY | 0100000);
	CHECK_EQ(fcntl(fd, F_SETFL, O_APPEND | O_NONBLOCK), 0);
	CHECK_EQ(fcntl(fd, F_GETFL), O_RDWR | O_APPEND | O_NONBLOCK | 0100000);
	CHECK_EQ(fcntl(ro, F_SETFL, O_WRONLY), 0); /* access mode is ignored */
	CHECK_EQ(fcntl(ro, F_GETFL) & O_ACCMODE, O_RDONLY);
	CHECK_EQ(write(fd, "Z", 1), 1); /* O_APPEND now: at offset 10 */
	CHECK_EQ(pread(fd, buf, sizeof buf, 0), 11);
	CHECK_EQ(buf[10], 'Z');
	CHECK_EQ(fcntl(fd, F_SETFL, 0), 0);
	CHECK_EQ(fcntl(fd, F_GETFL), O_RDWR | 0100000);
	CHECK_ERR(fcntl(9999, F_GETFD), EBADF);
	CHECK_ERR(fcntl(fd, 12345), EINVAL);

	int d = fcntl(fd, F_DUPFD, 100);
	CHECK_EQ(d, 100);
	CHECK_EQ(fcntl(d, F_GETFD), 0);
	int d2 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	CHECK_EQ(d2, 101);
	CHECK_EQ(fcntl(d2, F_GETFD), FD_CLOEXEC);
	CHECK_ERR(fcntl(fd, F_DUPFD, -1), EINVAL);
	CHECK_OK(close(d));
	CHECK_OK(close(d2));

	/* dup / dup2 / dup3: shared offset, fresh FD_CLOEXEC */
	CHECK_OK(fcntl(fd, F_SETFD, FD_CLOEXEC));
	d = dup(fd);
	CHECK(d > fd);
	CHECK_EQ(fcntl(d, F_GETFD), 0);
	CHECK_EQ(lseek(fd, 2, SEEK_SET), 2);
	CHECK_EQ(lseek(d, 0, SEEK_CUR), 2);
	CHECK_EQ(read(d, buf, 1), 1);
	CHECK_EQ(buf[0], 'c');
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 3);
	CHECK_EQ(dup2(fd, fd), fd); /* same fd: returns it */
	CHECK_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC); /* and leaves the flag */
	CHECK_EQ(dup2(ro, d), d); /* closes what d was */
	CHECK_EQ(fcntl(d, F_GETFL) & O_ACCMODE, O_RDONLY);
	CHECK_EQ(dup2(fd, 200), 200);
	CHECK_EQ(lseek(200, 0, SEEK_CUR), 3);
	CHECK_ERR(dup2(9999, 201), EBADF);
	CHECK_ERR(dup2(fd, -1), EBADF);
	CHECK_ERR(syscall(SYS_dup3, fd, fd, 0), EINVAL);
	CHECK_ERR(syscall(SYS_dup3, fd, 202, 0x4), EINVAL); /* bad flag */
	CHECK_EQ(syscall(SYS_dup3, fd, 202, O_CLOEXEC), 202);
	CHECK_EQ(fcntl(202, F_GETFD), FD_CLOEXEC);
	CHECK_ERR(dup(9999), EBADF);
	CHECK_OK(close(200));
	CHECK_OK(close(202));
	CHECK_OK(close(d));
	CHECK_OK(close(ro));
	CHECK_OK(close(fd));
	CHECK_OK(unlink("t"));

	/* pipes */
	int p[2];
	CHECK_OK(pipe(p));
	/* no O_LARGEFILE on pipes, unlike files and directories */
	CHECK_EQ(fcntl(p[0], F_GETFL), O_RDONLY);
	CHECK_EQ(fcntl(p[1], F_GETFL), O_WRONLY);
	CHECK_EQ(fcntl(p[0], F_GETFD), 0);
	CHECK_EQ(write(p[1], "through the pipe", 16), 16);
	CHECK_EQ(read(p[0], buf, 7), 7);
	CHECK(memcmp(buf, "through", 7) == 0);
	CHECK_EQ(read(p[0], buf, sizeof buf), 9); /* the rest, short read */
	CHECK(memcmp(buf, " the pipe", 9) == 0);
	CHECK_ERR(lseek(p[0], 0, SEEK_SET), ESPIPE);
	CHECK_ERR(pread(p[0], buf, 1, 0), ESPIPE);
	CHECK_ERR(write(p[0], "x", 1), EBADF);
	CHECK_ERR(read(p[1], buf, 1), EBADF);
	CHECK_ERR(fsync(p[0]), EINVAL);
	CHECK_OK(fstat(p[0], &st));
	CHECK(S_ISFIFO(st.st_mode));
	CHECK_ERR(ftruncate(p[1], 0), EINVAL);
	CHECK_OK(close(p[1]));
	CHECK_EQ(read(p[0], buf, sizeof buf), 0); /* EOF: writer closed */
	CHECK_OK(close(p[0]));

	CHECK_OK(pipe2(p, O_CLOEXEC | O_NONBLOCK));
	CHECK_EQ(fcntl(p[0], F_GETFD), FD_CLOEXEC);
	CHECK_EQ(fcntl(p[1], F_GETFD), FD_CLOEXEC);
	CHECK_EQ(fcntl(p[0], F_GETFL), O_RDONLY | O_NONBLOCK);
	CHECK_EQ(fcntl(p[1], F_GETFL), O_WRONLY | O_NONBLOCK);
	CHECK_ERR(read(p[0], buf, sizeof buf), EAGAIN);
	struct iovec iov[2] = {{"ab", 2}, {"cd", 2}};
	CHECK_EQ(writev(p[1], iov, 2), 4);
	CHECK_EQ(read(p[0], buf, sizeof buf), 4);
	CHECK(memcmp(buf, "abcd", 4) == 0);
	int big = 0; /* fill the pipe until it would block */
	char chunk[4096];
	memset(chunk, 'p', sizeof chunk);
	long w;
	while ((w = write(p[1], chunk, sizeof chunk)) > 0)
		big += w;
	CHECK_ERR(write(p[1], chunk, sizeof chunk), EAGAIN);
	CHECK(big >= 4096);
	long drained = 0, r;
	while ((r = read(p[0], chunk, sizeof chunk)) > 0)
		drained += r;
	CHECK_EQ(drained, big);
	CHECK_OK(close(p[0]));
	CHECK_OK(close(p[1]));
	CHECK_ERR(pipe2(p, 0x4), EINVAL);
	int pfd = open("a.txt", O_RDONLY);
	CHECK_ERR(ioctl(pfd, TIOCGWINSZ, buf), ENOTTY);
	CHECK_OK(close(pfd));
}

int main(void)
{
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 2;
	}
	CHECK_OK(chdir(top));

	test_open_read_write();
	test_stat();
	test_dirs();
	test_names();
	test_fd_ops();

	CHECK_OK(unlink("a.txt"));
	CHECK_OK(chdir("/"));
	CHECK_OK(rmdir(top));
	/* Regression: open(2) ignores a mode without O_CREAT and unknown flag
	 * bits (openat2, which nomu uses, refuses both). */
	{
		int fd = open("/etc/passwd", O_RDONLY, 0666);
		CHECK(fd >= 0);
		close(fd);
		fd = open("/etc/passwd", O_RDONLY | 0x4000000);
		CHECK(fd >= 0);
		close(fd);
	}
	return checks_done();
}
