/* execveat(2): a program named relative to a directory descriptor, the
 * descriptor's own file with AT_EMPTY_PATH (fexecve, also of a memfd with
 * no name on any file system), AT_SYMLINK_NOFOLLOW, and the errors. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int execveat_(int dirfd, const char *path, char *const argv[], int flags)
{
	return (int)syscall(SYS_execveat, dirfd, path, argv, environ, flags);
}

/* Runs execveat in a child; returns its exit status, or 100 + errno when
 * the call failed there. */
static int run(int dirfd, const char *path, int flags, const char *tag)
{
	char *argv[] = { "execveat-child", (char *)tag, NULL };
	pid_t p = fork();
	if (p == 0) {
		execveat_(dirfd, path, argv, flags);
		_exit(100 + errno);
	}
	int st;
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Copies the file at `from` into a new memfd. */
static int memfd_copy(const char *from)
{
	int in = open(from, O_RDONLY);
	int m = memfd_create("program", MFD_CLOEXEC);
	if (in < 0 || m < 0)
		return -1;
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(m, buf, n) != n)
			return -1;
	close(in);
	return m;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[0], "execveat-child")) {
		/* AT_EXECFN: the name the program was run by. */
		const char *fn = (const char *)getauxval(AT_EXECFN);
		printf("child %s: execfn %s\n", argv[1],
		       strncmp(fn, "/dev/fd/", 8) == 0 ? fn : (fn[0] == '/' ? "(absolute)" : fn));
		return 7;
	}
	const char *self = argv[0];
	char dir_buf[4096], base_buf[4096];
	snprintf(dir_buf, sizeof dir_buf, "%s", self);
	snprintf(base_buf, sizeof base_buf, "%s", self);
	const char *dir = dirname(dir_buf), *base = basename(base_buf);
	fflush(stdout);

	/* An absolute path, AT_FDCWD: as execve. */
	CHECK_EQ(run(AT_FDCWD, self, 0, "absolute"), 7);
	/* Relative to a directory descriptor. */
	int d = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(d >= 0);
	CHECK_EQ(run(d, base, 0, "relative"), 7);
	/* An O_PATH directory descriptor does as well. */
	int dp = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ(run(dp, base, 0, "o_path-dir"), 7);
	/* The descriptor's own file: fexecve, close-on-exec or not. */
	int f = open(self, O_RDONLY);
	CHECK(f >= 0);
	CHECK_EQ(run(f, "", AT_EMPTY_PATH, "fd"), 7);
	int fc = open(self, O_RDONLY | O_CLOEXEC);
	CHECK_EQ(run(fc, "", AT_EMPTY_PATH, "cloexec-fd"), 7);
	int fp = open(self, O_PATH);
	CHECK_EQ(run(fp, "", AT_EMPTY_PATH, "o_path-fd"), 7);
	/* A memfd: a program with no name on any file system. */
	int m = memfd_copy(self);
	CHECK(m >= 0);
	CHECK_EQ(fchmod(m, 0755), 0);
	CHECK_EQ(run(m, "", AT_EMPTY_PATH, "memfd"), 7);
	fflush(stdout);

	/* Files of this run's own, in a directory of its own: a guest pid
	 * names nothing unique (parallel nomu runs each have a pid 1). */
	char tmpdir[] = "/tmp/nomu-execveat-XXXXXX";
	CHECK(mkdtemp(tmpdir) != NULL);

	/* AT_SYMLINK_NOFOLLOW: a link is ELOOP, the file itself runs. */
	char link[64];
	snprintf(link, sizeof link, "%s/link", tmpdir);
	CHECK_OK(symlink(self, link));
	CHECK_EQ(run(AT_FDCWD, link, AT_SYMLINK_NOFOLLOW, "nofollow-link"), 100 + ELOOP);
	CHECK_EQ(run(AT_FDCWD, link, 0, "followed-link"), 7);
	CHECK_EQ(run(AT_FDCWD, self, AT_SYMLINK_NOFOLLOW, "nofollow-file"), 7);
	CHECK_OK(unlink(link));

	/* A script: its interpreter is given /dev/fd/N (or /dev/fd/N/name),
	 * so a descriptor that closes on exec cannot serve it: ENOENT. */
	char script[64];
	snprintf(script, sizeof script, "%s/s.sh", tmpdir);
	int w = open(script, O_WRONLY | O_CREAT | O_EXCL, 0755);
	CHECK(w >= 0);
	CHECK_EQ(write(w, "#!/bin/sh\nexit 9\n", 18), 18);
	close(w);
	int s_fd = open(script, O_RDONLY);
	int s_cfd = open(script, O_RDONLY | O_CLOEXEC);
	int tmp = open(tmpdir, O_RDONLY | O_DIRECTORY);
	int tmp_c = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ(run(s_fd, "", AT_EMPTY_PATH, "script-fd"), 9);
	CHECK_EQ(run(s_cfd, "", AT_EMPTY_PATH, "script-cloexec-fd"), 100 + ENOENT);
	CHECK_EQ(run(tmp, "s.sh", 0, "script-relative"), 9);
	CHECK_EQ(run(tmp_c, "s.sh", 0, "script-cloexec-dir"), 100 + ENOENT);
	/* An ELF program is read before the exec: close-on-exec is fine. */
	CHECK_EQ(run(dp, base, 0, "elf-cloexec-dir"), 7);
	CHECK_OK(unlink(script));
	CHECK_OK(rmdir(tmpdir));
	close(s_fd);
	close(s_cfd);
	close(tmp);
	close(tmp_c);

	/* Errors. */
	char *none[] = { "x", NULL };
	CHECK_ERR(execveat_(AT_FDCWD, self, none, 0x8000), EINVAL);
	CHECK_ERR(execveat_(f, "", none, 0), ENOENT);
	CHECK_ERR(execveat_(AT_FDCWD, "", none, AT_EMPTY_PATH), EACCES);
	CHECK_ERR(execveat_(9999, base, none, 0), EBADF);
	CHECK_ERR(execveat_(9999, "", none, AT_EMPTY_PATH), EBADF);
	CHECK_ERR(execveat_(f, base, none, 0), ENOTDIR);
	CHECK_ERR(execveat_(d, "", none, AT_EMPTY_PATH), EACCES);
	CHECK_ERR(execveat_(d, "no-such-program", none, 0), ENOENT);
	close(m);
	close(f);
	close(fc);
	close(fp);
	close(d);
	close(dp);
	return checks_done();
}
