/* Calls that do not follow a final symlink, on paths whose last component
 * is `..` or `.`: inside --root, "/.." is "/" (Linux's chroot semantics),
 * never the host directory above the root. Prints one line per check;
 * the test also checks the host directory above the root is unchanged.
 * Run only under nomu with a scratch --root (it sets times on "/..").
 * Also: nomu's device nodes are the host's, so their attributes and names
 * are refused (EPERM), and so is the owner of a /proc directory, whose
 * host descriptor is the host's /proc. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void same_inode(const char *what, const struct stat *a, const struct stat *root)
{
	int same = a->st_dev == root->st_dev && a->st_ino == root->st_ino;
	printf("%s: %s\n", what, same ? "the root" : "ANOTHER DIRECTORY");
	failures += !same;
}

static void expect_errno(const char *what, long r, int e)
{
	int ok = r < 0 && errno == e;
	printf("%s: %s\n", what, ok ? "refused" : "ALLOWED or wrong errno");
	if (!ok)
		printf("  (r=%ld errno=%s)\n", r, strerror(errno));
	failures += !ok;
}

int main(void)
{
	struct stat root, st;
	if (stat("/", &root) != 0) {
		perror("stat /");
		return 2;
	}
	const char *paths[] = { "/..", "/../", "/.", "/../..", "/tmp/../..", "..", "../.." };
	if (chdir("/tmp") != 0)
		return 2;
	for (unsigned i = 0; i < sizeof paths / sizeof *paths; i++) {
		char what[64];
		snprintf(what, sizeof what, "lstat %s", paths[i]);
		if (lstat(paths[i], &st) == 0)
			same_inode(what, &st, &root);
		else
			printf("%s: %s\n", what, strerror(errno));
		snprintf(what, sizeof what, "fstatat nofollow %s", paths[i]);
		if (fstatat(AT_FDCWD, paths[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
			same_inode(what, &st, &root);
		else
			printf("%s: %s\n", what, strerror(errno));
	}
	/* musl 1.2.3 has no statx(): struct statx's stx_ino is at byte 32. */
	unsigned long long sx[32];
	if (syscall(SYS_statx, AT_FDCWD, "/..", AT_SYMLINK_NOFOLLOW, 0x100 /* STATX_INO */, sx) == 0) {
		int same = sx[4] == root.st_ino;
		printf("statx nofollow /..: %s\n", same ? "the root" : "ANOTHER DIRECTORY");
		failures += !same;
	}
	printf("faccessat2 nofollow /..: %d\n", (int)syscall(SYS_faccessat2, AT_FDCWD, "/..", F_OK, AT_SYMLINK_NOFOLLOW));
	/* Times of "/.." are the root's own: set them, then read them back. */
	struct timespec t[2] = { { 1234567, 0 }, { 7654321, 0 } };
	if (utimensat(AT_FDCWD, "/..", t, AT_SYMLINK_NOFOLLOW) == 0 && stat("/", &st) == 0)
		printf("utimensat nofollow /..: the root's mtime is %ld\n", (long)st.st_mtime);
	else
		printf("utimensat nofollow /..: %s\n", strerror(errno));
	if (utimensat(AT_FDCWD, "../..", NULL, AT_SYMLINK_NOFOLLOW) == 0)
		printf("utimensat nofollow ../..: ok\n");
	printf("rmdir /..: %s\n", rmdir("/..") == 0 ? "REMOVED" : strerror(errno));
	printf("rmdir /: %s\n", rmdir("/") == 0 ? "REMOVED" : strerror(errno));
	printf("mkdir /..: %s\n", mkdir("/..", 0700) == 0 ? "MADE" : strerror(errno));

	/* The host's device nodes. */
	int fd = open("/dev/null", O_RDWR);
	expect_errno("chmod /dev/null", chmod("/dev/null", 0600), EPERM);
	expect_errno("fchmod /dev/null", fchmod(fd, 0600), EPERM);
	expect_errno("fchmodat /dev/zero", fchmodat(AT_FDCWD, "/dev/zero", 0600, 0), EPERM);
	expect_errno("utimensat /dev/null", utimensat(AT_FDCWD, "/dev/null", t, 0), EPERM);
	expect_errno("touch /dev/null", utimensat(AT_FDCWD, "/dev/null", NULL, 0), EPERM);
	expect_errno("futimens /dev/null", futimens(fd, t), EPERM);
	expect_errno("utimensat nofollow /dev/urandom", utimensat(AT_FDCWD, "/dev/urandom", t, AT_SYMLINK_NOFOLLOW), EPERM);
	expect_errno("chown /dev/null", chown("/dev/null", 1, 1), EPERM);
	expect_errno("lchown /dev/zero", lchown("/dev/zero", 1, 1), EPERM);
	expect_errno("fchown /dev/null", fchown(fd, 1, 1), EPERM);
	expect_errno("fchownat /dev/urandom", fchownat(AT_FDCWD, "/dev/urandom", 1, 1, AT_SYMLINK_NOFOLLOW), EPERM);
	expect_errno("utimes /dev/null", utimes("/dev/null", NULL), EPERM);
	expect_errno("setxattr /dev/null", setxattr("/dev/null", "user.nomu", "x", 1, 0), EPERM);
	expect_errno("fremovexattr /dev/null", fremovexattr(fd, "user.nomu"), EPERM);
	expect_errno("mknod a device", mknod("/tmp/nomu-null", S_IFCHR | 0666, makedev(1, 3)), EPERM);
	close(fd);
	/* nomu's /proc directories stand on the host's /proc: a guest's fchown
	 * of one reached it (-1, -1 changes nothing, were it allowed). */
	fd = open("/proc", O_RDONLY | O_DIRECTORY);
	expect_errno("fchown /proc", fchown(fd, -1, -1), EPERM);
	close(fd);
	fd = open("/proc/self", O_RDONLY | O_DIRECTORY);
	expect_errno("fchown /proc/self", fchown(fd, -1, -1), EPERM);
	close(fd);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures != 0;
}
