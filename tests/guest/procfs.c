/* /proc as programs read it: its own device and inode numbers (find and
 * fts see no loop), /proc/self, exe, cwd, fd/ and fdinfo/ (also read a
 * few entries at a time while the descriptors it lists are closed, as
 * CPython's subprocess closes all but pass_fds), maps,
 * mountinfo and mounts, cpuinfo, stat, sys/kernel, status's signal
 * masks (SigBlk, SigIgn, SigCgt: CPython's test_subprocess reads SigIgn,
 * which nomu left out), limits (as Linux prints them, after a setrlimit),
 * and the errors for
 * what /proc refuses.  Run with argv[1] = "child" it is the program
 * execve'd through /proc/self/exe and fexecve.  Prints section names
 * and facts that hold on every run, never numbers that differ. */
#define _GNU_SOURCE
#include "nomu_test.h"

#include <dirent.h>
#include <signal.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static int data_word = 42;

/* struct statx (musl may not have it). */
struct kstatx {
	uint32_t mask, blksize;
	uint64_t attributes;
	uint32_t nlink, uid, gid;
	uint16_t mode, pad;
	uint64_t ino, size, blocks, attributes_mask;
	struct {
		int64_t sec;
		uint32_t nsec;
		int32_t pad;
	} atime, btime, ctime, mtime;
	uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
	uint64_t mnt_id;
	uint64_t spare[13];
};
#define K_STATX_BASIC_STATS 0x7ffU
#define K_STATX_MNT_ID 0x1000U

/* Reads a whole file (up to the buffer) into buf, NUL-terminated. */
static ssize_t slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	size_t len = 0;
	ssize_t n;
	while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = 0;
	return len;
}

static int link_is(const char *path, const char *want)
{
	char buf[PATH_MAX];
	ssize_t n = readlink(path, buf, sizeof buf - 1);
	if (n < 0)
		return 0;
	buf[n] = 0;
	if (strcmp(buf, want) != 0)
		printf("readlink %s: \"%s\", want \"%s\"\n", path, buf, want);
	return strcmp(buf, want) == 0;
}

/* How many descriptors are open (fcntl answers for each). */
static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

/* The value of a "key:\t" line of an fdinfo file. */
static long long fdinfo_field(int fd, const char *key, int octal)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	if (slurp(path, buf, sizeof buf) < 0)
		return -1;
	char *at = strstr(buf, key);
	if (!at)
		return -1;
	return strtoll(at + strlen(key), NULL, octal ? 8 : 10);
}

static void identity(void)
{
	printf("identity\n");
	struct stat root, proc, self, fddir, statf, fd0, self_link;
	CHECK_OK(stat("/", &root));
	CHECK_OK(stat("/proc", &proc));
	CHECK(proc.st_dev != root.st_dev);
	CHECK(S_ISDIR(proc.st_mode));
	CHECK_OK(stat("/proc/self", &self));
	CHECK_OK(lstat("/proc/self", &self_link));
	CHECK_OK(stat("/proc/self/fd", &fddir));
	CHECK_OK(stat("/proc/self/stat", &statf));
	CHECK_OK(lstat("/proc/self/fd/0", &fd0));
	CHECK(S_ISDIR(self.st_mode) && S_ISLNK(self_link.st_mode));
	CHECK(S_ISDIR(fddir.st_mode) && S_ISREG(statf.st_mode) && S_ISLNK(fd0.st_mode));
	const struct stat *all[] = {&proc, &self, &self_link, &fddir, &statf, &fd0};
	for (unsigned i = 0; i < sizeof all / sizeof *all; i++) {
		CHECK_EQ(all[i]->st_dev, proc.st_dev);
		for (unsigned j = 0; j < i; j++)
			CHECK(all[i]->st_ino != all[j]->st_ino);
	}
	CHECK_EQ(statf.st_size, 0);
	CHECK_EQ(fd0.st_size, 64);
	CHECK_EQ(proc.st_mode & 07777, 0555);
	CHECK_EQ(fddir.st_mode & 07777, 0500);
	CHECK_EQ(statf.st_mode & 07777, 0444);
	/* A trailing slash follows the link. */
	struct stat slash;
	CHECK_OK(lstat("/proc/self/", &slash));
	CHECK(S_ISDIR(slash.st_mode) && slash.st_ino == self.st_ino);
	/* The descriptor says what the path says. */
	int fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
	struct stat f;
	CHECK_OK(fstat(fd, &f));
	CHECK(f.st_dev == fddir.st_dev && f.st_ino == fddir.st_ino);
	close(fd);
	fd = open("/proc/self/stat", O_RDONLY);
	CHECK_OK(fstat(fd, &f));
	CHECK(f.st_dev == statf.st_dev && f.st_ino == statf.st_ino && S_ISREG(f.st_mode));
	close(fd);
	struct kstatx sx;
	CHECK_OK(syscall(SYS_statx, AT_FDCWD, "/proc/self/stat", 0, K_STATX_BASIC_STATS | K_STATX_MNT_ID, &sx));
	CHECK_EQ(sx.ino, statf.st_ino);
	CHECK_EQ(makedev(sx.dev_major, sx.dev_minor), statf.st_dev);
	CHECK(sx.mask & K_STATX_MNT_ID);
}

static void links(const char *exe)
{
	printf("links\n");
	char want[64], cwd[PATH_MAX];
	snprintf(want, sizeof want, "%d", getpid());
	CHECK(link_is("/proc/self", want));
	CHECK(link_is("/proc/self/exe", exe));
	snprintf(want, sizeof want, "/proc/%d/exe", getpid());
	CHECK(link_is(want, exe));
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	CHECK(link_is("/proc/self/cwd", cwd));
	CHECK(link_is("/proc/self/root", "/"));
	CHECK(link_is("/proc/mounts", "self/mounts"));
	char buf[8];
	CHECK_ERR(readlink("/proc/self/stat", buf, sizeof buf), EINVAL);
	/* cwd/ leads on into the file system. */
	struct stat a, b;
	CHECK_OK(stat("/proc/self/cwd/.", &a));
	CHECK_OK(stat(".", &b));
	CHECK(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
	CHECK_OK(stat("/proc/self/root/proc/self/stat", &a));
	CHECK_OK(stat("/proc/self/stat", &b));
	CHECK(a.st_ino == b.st_ino);
	/* chdir into /proc: getcwd names the process by pid. */
	CHECK_OK(chdir("/proc/self/fd"));
	snprintf(want, sizeof want, "/proc/%d/fd", getpid());
	char here[PATH_MAX];
	CHECK(getcwd(here, sizeof here) && strcmp(here, want) == 0);
	CHECK_OK(chdir(cwd));
}

static void descriptors(const char *exe)
{
	printf("fd\n");
	int p[2];
	CHECK_OK(pipe(p));
	int file = open(exe, O_RDONLY | O_CLOEXEC);
	int wr = open("/dev/null", O_WRONLY);
	int rw = open("/dev/null", O_RDWR);
	char path[64], buf[PATH_MAX];
	snprintf(path, sizeof path, "/proc/self/fd/%d", file);
	CHECK(link_is(path, exe));
	snprintf(path, sizeof path, "/dev/fd/%d", file);
	CHECK(link_is(path, exe));
	CHECK(link_is("/dev/stdin", "/proc/self/fd/0"));
	snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
	ssize_t n = readlink(path, buf, sizeof buf - 1);
	CHECK(n > 7);
	buf[n > 0 ? n : 0] = 0;
	CHECK(strncmp(buf, "pipe:[", 6) == 0 && buf[n - 1] == ']');
	struct stat st;
	snprintf(path, sizeof path, "/proc/self/fd/%d", wr);
	CHECK_OK(lstat(path, &st));
	CHECK_EQ(st.st_mode & 0777, 0300);
	snprintf(path, sizeof path, "/proc/self/fd/%d", rw);
	CHECK_OK(lstat(path, &st));
	CHECK_EQ(st.st_mode & 0777, 0700);
	/* Followed, the link is the open file. */
	struct stat a, b;
	snprintf(path, sizeof path, "/proc/self/fd/%d", p[1]);
	CHECK_OK(stat(path, &a));
	CHECK_OK(fstat(p[1], &b));
	CHECK(S_ISFIFO(a.st_mode) && a.st_ino == b.st_ino);
	int again = open(path, O_WRONLY);
	CHECK(again >= 0);
	CHECK_EQ(write(again, "x", 1), 1);
	CHECK_EQ(read(p[0], buf, 1), 1);
	close(again);

	/* The listing: every open descriptor, once, as a link. */
	int expect = open_fds() + 1; /* and the directory's own */
	DIR *d = opendir("/proc/self/fd");
	CHECK(d != NULL);
	struct stat dirst;
	CHECK_OK(fstat(dirfd(d), &dirst));
	CHECK_EQ(dirst.st_size, expect);
	int count = 0, dots = 0, bad = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) {
			dots++;
			bad += e->d_type != DT_DIR;
			continue;
		}
		count++;
		bad += e->d_type != DT_LNK || fcntl(atoi(e->d_name), F_GETFD) < 0;
		struct stat l;
		if (fstatat(dirfd(d), e->d_name, &l, AT_SYMLINK_NOFOLLOW) < 0 || l.st_ino != e->d_ino)
			bad++;
	}
	CHECK_EQ(dots, 2);
	CHECK_EQ(count, expect);
	CHECK_EQ(bad, 0);
	rewinddir(d);
	int again_count = 0;
	while ((e = readdir(d)))
		again_count++;
	CHECK_EQ(again_count, expect + 2);
	closedir(d);

	printf("fdinfo\n");
	CHECK_EQ(lseek(file, 5, SEEK_SET), 5);
	CHECK_EQ(fdinfo_field(file, "pos:\t", 0), 5);
	long long flags = fdinfo_field(file, "flags:\t", 1);
	CHECK_EQ(flags & (O_ACCMODE | O_CLOEXEC | O_APPEND), O_RDONLY | O_CLOEXEC);
	CHECK_OK(fcntl(file, F_SETFD, 0));
	flags = fdinfo_field(file, "flags:\t", 1);
	CHECK_EQ(flags & (O_ACCMODE | O_CLOEXEC), O_RDONLY);
	CHECK_OK(fstat(file, &st));
	CHECK_EQ(fdinfo_field(file, "ino:\t", 0), st.st_ino);
	CHECK(fdinfo_field(file, "mnt_id:\t", 0) > 0);
	CHECK_EQ(fdinfo_field(wr, "flags:\t", 1) & O_ACCMODE, O_WRONLY);
	/* An fdinfo file kept open says the new position when read again
	 * from the start. */
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", file);
	int info = open(path, O_RDONLY);
	n = read(info, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	CHECK(strncmp(buf, "pos:\t5\n", 7) == 0);
	CHECK_EQ(lseek(file, 7, SEEK_SET), 7);
	CHECK_EQ(lseek(info, 0, SEEK_SET), 0);
	n = read(info, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	CHECK(strncmp(buf, "pos:\t7\n", 7) == 0);
	CHECK_EQ(fdinfo_field(info, "pos:\t", 0), n);
	close(info);
	close(file);
	close(wr);
	close(rw);
	close(p[0]);
	close(p[1]);
}

/* Closes every descriptor from 3 up but `dir` while reading /proc/self/fd
 * with room for one entry per getdents64, as CPython's _posixsubprocess
 * does; returns how many such descriptors are still open. On Linux an
 * entry's position is its descriptor's number, so the closes skip none. */
static int close_while_listing(int dir)
{
	char buf[sizeof(struct dirent64)];
	long n;
	while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0)
		for (long off = 0; off < n;) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);
			char *end;
			long fd = strtol(e->d_name, &end, 10);
			if (*end == 0 && end != e->d_name && fd > 2 && fd != dir)
				close((int)fd);
			off += e->d_reclen;
		}
	CHECK_EQ(n, 0);
	int left = 0;
	for (int fd = 3; fd < 1024; fd++)
		if (fd != dir && fcntl(fd, F_GETFD) >= 0)
			left++;
	return left;
}

static void listing_while_closing(void)
{
	printf("fd listing while closing\n");
	pid_t c = fork();
	if (c == 0) {
		for (int i = 0; i < 12; i++)
			open("/dev/null", O_RDONLY);
		int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
		_exit(dir >= 0 ? close_while_listing(dir) : 100);
	}
	int status = -1;
	CHECK_EQ(waitpid(c, &status, 0), c);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	/* A position given back by lseek resumes there: read one entry at a
	 * time (24 bytes hold one with a one-letter name), the one after "."
	 * and ".." is stdin's. */
	int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
	char one[24];
	CHECK_EQ(syscall(SYS_getdents64, dir, one, sizeof one), 24);
	CHECK_EQ(syscall(SYS_getdents64, dir, one, sizeof one), 24);
	off_t after_dots = lseek(dir, 0, SEEK_CUR);
	CHECK_EQ(syscall(SYS_getdents64, dir, one, sizeof one), 24);
	CHECK(!strcmp(((struct dirent64 *)one)->d_name, "0"));
	CHECK_EQ(lseek(dir, after_dots, SEEK_SET), after_dots);
	CHECK_EQ(syscall(SYS_getdents64, dir, one, sizeof one), 24);
	CHECK(!strcmp(((struct dirent64 *)one)->d_name, "0"));
	close(dir);
}

static void maps(const char *exe)
{
	printf("maps\n");
	static char buf[1 << 16];
	CHECK(slurp("/proc/self/maps", buf, sizeof buf) > 0);
	int local = 0, lines = 0, bad = 0, stack = 0, text = 0, data = 0;
	uintptr_t here = (uintptr_t)&local, code = (uintptr_t)&maps, word = (uintptr_t)&data_word;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long start, end, off, ino;
		unsigned maj, min;
		char perms[5];
		int used = 0;
		lines++;
		if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &start, &end, perms, &off, &maj, &min, &ino, &used) < 7 ||
		    start >= end || strlen(perms) != 4 || !strchr("ps", perms[3])) {
			printf("bad line: %s\n", line);
			bad++;
			continue;
		}
		const char *name = strlen(line) > 73 ? line + 73 : "";
		if (*name && (line[72] != ' ' || line[71] != ' ')) {
			printf("name not at column 73: %s\n", line);
			bad++;
		}
		if (start <= here && here < end)
			stack += !strcmp(name, "[stack]") && perms[0] == 'r' && perms[1] == 'w';
		if (start <= code && code < end)
			text += !strcmp(name, exe) && perms[2] == 'x' && ino != 0;
		if (start <= word && word < end)
			data += !strcmp(name, exe) && perms[1] == 'w';
	}
	CHECK(lines > 3);
	CHECK_EQ(bad, 0);
	CHECK_EQ(stack, 1);
	CHECK_EQ(text, 1);
	CHECK_EQ(data, 1);
	CHECK_EQ(data_word, 42);
}

static void mounts(void)
{
	printf("mounts\n");
	static char buf[1 << 16];
	struct stat root, proc;
	CHECK_OK(stat("/", &root));
	CHECK_OK(stat("/proc", &proc));
	struct kstatx sx;
	CHECK_OK(syscall(SYS_statx, AT_FDCWD, "/proc", 0, K_STATX_MNT_ID, &sx));
	CHECK(slurp("/proc/self/mountinfo", buf, sizeof buf) > 0);
	int root_lines = 0, proc_lines = 0, bad = 0;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long id, parent;
		unsigned maj, min;
		char mroot[PATH_MAX], point[PATH_MAX], opts[256];
		if (sscanf(line, "%lu %lu %u:%u %s %s %255s", &id, &parent, &maj, &min, mroot, point, opts) != 7 ||
		    !strstr(line, " - ")) {
			printf("bad line: %s\n", line);
			bad++;
			continue;
		}
		const char *fs = strstr(line, " - ") + 3;
		if (!strcmp(point, "/")) {
			root_lines++;
			CHECK_EQ(makedev(maj, min), root.st_dev);
		}
		if (!strcmp(point, "/proc")) {
			proc_lines++;
			CHECK(!strncmp(fs, "proc proc ", 10));
			CHECK_EQ(makedev(maj, min), proc.st_dev);
			CHECK_EQ(id, sx.mnt_id);
			CHECK(!strcmp(mroot, "/"));
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(root_lines, 1);
	CHECK_EQ(proc_lines, 1);
	CHECK(slurp("/proc/mounts", buf, sizeof buf) > 0);
	CHECK(strstr(buf, "proc /proc proc rw") != NULL);
	CHECK(strstr(buf, " / ") != NULL);
	char other[sizeof buf];
	CHECK(slurp("/proc/self/mounts", other, sizeof other) > 0);
	CHECK(strcmp(buf, other) == 0);
}

static int count_lines(const char *text, const char *prefix, int digit_after)
{
	int n = 0;
	size_t len = strlen(prefix);
	for (const char *at = text; at && *at; at = strchr(at, '\n'), at = at ? at + 1 : NULL)
		if (!strncmp(at, prefix, len) && (!digit_after || (at[len] >= '0' && at[len] <= '9')))
			n++;
	return n;
}

static void system_files(void)
{
	printf("system\n");
	static char cpuinfo[1 << 18], stat[1 << 16];
	CHECK(slurp("/proc/cpuinfo", cpuinfo, sizeof cpuinfo) > 0);
	CHECK(slurp("/proc/stat", stat, sizeof stat) > 0);
	int cpus = count_lines(cpuinfo, "processor\t:", 0);
	CHECK(cpus >= 1);
	CHECK_EQ(count_lines(stat, "cpu", 1), cpus);
	CHECK_EQ(count_lines(stat, "cpu ", 0), 1);
	unsigned long long user, nice, sys, idle;
	CHECK_EQ(sscanf(stat, "cpu %llu %llu %llu %llu", &user, &nice, &sys, &idle), 4);
	char *bt = strstr(stat, "\nbtime ");
	CHECK(bt != NULL);
	long long btime = bt ? atoll(bt + 7) : 0;
	CHECK(btime > 0 && btime <= time(NULL));
	CHECK(strstr(stat, "\nprocesses ") != NULL);

	struct utsname u;
	CHECK_OK(uname(&u));
	char buf[256], want[256];
	CHECK(slurp("/proc/sys/kernel/ostype", buf, sizeof buf) > 0);
	snprintf(want, sizeof want, "%s\n", u.sysname);
	CHECK(!strcmp(buf, want));
	CHECK(slurp("/proc/sys/kernel/osrelease", buf, sizeof buf) > 0);
	snprintf(want, sizeof want, "%s\n", u.release);
	CHECK(!strcmp(buf, want));
	CHECK(slurp("/proc/sys/kernel/hostname", buf, sizeof buf) > 0);
	snprintf(want, sizeof want, "%s\n", u.nodename);
	CHECK(!strcmp(buf, want));
	CHECK(slurp("/proc/sys/kernel/pid_max", buf, sizeof buf) > 0);
	CHECK(atol(buf) > getpid());
	CHECK(slurp("/proc/meminfo", buf, sizeof buf) > 0 && !strncmp(buf, "MemTotal:", 9));
	CHECK(slurp("/proc/uptime", buf, sizeof buf) > 0);
	CHECK(slurp("/proc/loadavg", buf, sizeof buf) > 0);
}

static void process_files(int argc, char **argv)
{
	printf("process\n");
	char buf[4096], comm[64];
	CHECK(slurp("/proc/self/comm", comm, sizeof comm) > 0);
	CHECK(slurp("/proc/self/stat", buf, sizeof buf) > 0);
	int pid = 0, ppid = 0;
	char state;
	char *close_paren = strrchr(buf, ')');
	CHECK(close_paren != NULL);
	CHECK_EQ(sscanf(buf, "%d", &pid), 1);
	CHECK_EQ(pid, getpid());
	if (close_paren) {
		CHECK_EQ(sscanf(close_paren + 2, "%c %d", &state, &ppid), 2);
		CHECK_EQ(ppid, getppid());
		*strchr(comm, '\n') = 0;
		char *open_paren = strchr(buf, '(');
		*close_paren = 0;
		CHECK(open_paren && !strcmp(open_paren + 1, comm));
	}
	int n = slurp("/proc/self/cmdline", buf, sizeof buf);
	int at = 0, same = 1;
	for (int i = 0; i < argc; i++) {
		same &= at < n && !strcmp(buf + at, argv[i]);
		at += strlen(argv[i]) + 1;
	}
	CHECK(same && at == n);
	n = slurp("/proc/self/environ", buf, sizeof buf);
	CHECK(n >= 0);
	if (environ[0] && strlen(environ[0]) < sizeof buf)
		CHECK(!strcmp(buf, environ[0]));
	CHECK(slurp("/proc/self/status", buf, sizeof buf) > 0 && !strncmp(buf, "Name:\t", 6));
	CHECK(slurp("/proc/self/statm", buf, sizeof buf) > 0);

	/* /proc lists this process, and self. */
	DIR *d = opendir("/proc");
	char me[16];
	snprintf(me, sizeof me, "%d", getpid());
	int found_me = 0, found_self = 0;
	struct dirent *e;
	struct stat st;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, me)) {
			CHECK_OK(stat("/proc/self", &st));
			found_me += e->d_type == DT_DIR && e->d_ino == st.st_ino;
		}
		if (!strcmp(e->d_name, "self")) {
			CHECK_OK(lstat("/proc/self", &st));
			found_self += e->d_type == DT_LNK && e->d_ino == st.st_ino;
		}
	}
	closedir(d);
	CHECK_EQ(found_me, 1);
	CHECK_EQ(found_self, 1);
}

static void refusals(void)
{
	printf("refusals\n");
	struct stat st;
	CHECK_ERR(stat("/proc/nonexistent", &st), ENOENT);
	CHECK_ERR(stat("/proc/self/stat/", &st), ENOTDIR);
	CHECK_ERR(stat("/proc/self/stat/x", &st), ENOTDIR);
	CHECK_ERR(stat("/proc/self/fd/999", &st), ENOENT);
	CHECK_ERR(open("/proc/self/exe", O_RDONLY | O_NOFOLLOW), ELOOP);
	CHECK_ERR(open("/proc/self/stat", O_RDONLY | O_DIRECTORY), ENOTDIR);
	CHECK_ERR(open("/proc/self", O_WRONLY), EISDIR);
	CHECK_ERR(mkdir("/proc/newdir", 0755), ENOENT);
	CHECK_ERR(unlink("/proc/self/stat"), EPERM);
	CHECK_ERR(rmdir("/proc/self/fd"), EPERM);
	CHECK_ERR(chmod("/proc/self/stat", 0600), EPERM);
	CHECK_ERR(link("/proc/self/stat", "/tmp/nomu-procfs-link"), EXDEV);
	int fd = open("/proc/self/stat", O_RDONLY);
	char c;
	CHECK_ERR(write(fd, "x", 1), EBADF);
	CHECK(read(fd, &c, 1) == 1);
	close(fd);
	CHECK_OK(access("/proc/self/stat", R_OK));
	CHECK_ERR(access("/proc/self/stat", X_OK), EACCES);
	CHECK_OK(access("/proc/self/fd", X_OK));
	/* An O_PATH descriptor of the link itself. */
	fd = open("/proc/self/exe", O_PATH | O_NOFOLLOW);
	CHECK(fd >= 0);
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISLNK(st.st_mode));
	close(fd);
}

/* The program runs again through /proc/self/exe and fexecve. */
static void exec_self(char **argv)
{
	printf("exec\n");
	char *args[] = {argv[0], "child", NULL};
	pid_t pid;
	int status = 0;
	fflush(stdout);
	CHECK_EQ(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ), 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);
	fflush(stdout);
	int fd = open(argv[0], O_RDONLY);
	pid = vfork();
	if (pid == 0) {
		fexecve(fd, args, environ);
		_exit(99);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);
	close(fd);
}

/* A hex mask line of /proc/self/status, or ~0 when it is not there. */
static uint64_t status_mask(const char *key)
{
	static char buf[8192];
	if (slurp("/proc/self/status", buf, sizeof buf) <= 0)
		return ~0ull;
	size_t len = strlen(key);
	for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (!strncmp(line, key, len) && line[len] == ':' && line[len + 1] == '\t')
			return strtoull(line + len + 2, NULL, 16);
	return ~0ull;
}

static void on_usr2(int sig)
{
	(void)sig;
}

/* /proc/self/limits: Linux's table, following setrlimit. */
static void limits_file(void)
{
	struct rlimit old, r;
	CHECK_OK(getrlimit(RLIMIT_NOFILE, &old));
	r.rlim_max = old.rlim_max;
	r.rlim_cur = old.rlim_max < 77 ? old.rlim_max : 77;
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &r));
	static char buf[8192];
	CHECK(slurp("/proc/self/limits", buf, sizeof buf) > 0);
	char want[200];
	snprintf(want, sizeof want, "%-25s %-20s %-20s %-10s\n", "Limit", "Soft Limit", "Hard Limit", "Units");
	CHECK(strncmp(buf, want, strlen(want)) == 0);
	char hard[32];
	if (r.rlim_max == RLIM_INFINITY)
		snprintf(hard, sizeof hard, "unlimited");
	else
		snprintf(hard, sizeof hard, "%llu", (unsigned long long)r.rlim_max);
	snprintf(want, sizeof want, "\nMax open files            %-20llu %-20s files     \n",
		 (unsigned long long)r.rlim_cur, hard);
	CHECK(strstr(buf, want) != NULL);
	/* A limit without a unit ends at its hard value's padding. */
	char *nice = strstr(buf, "\nMax nice priority ");
	CHECK(nice != NULL && strchr(nice + 1, '\n') - (nice + 1) == 25 + 1 + 20 + 1 + 20 + 1);
	int lines = 0;
	for (char *c = buf; *c; c++)
		lines += *c == '\n';
	CHECK_EQ(lines, 17);
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &old));
}

static void signal_masks(void)
{
	printf("== status signal masks\n");
	uint64_t mine = (1ull << (SIGUSR1 - 1)) | (1ull << (SIGUSR2 - 1)) | (1ull << (SIGHUP - 1)) |
			(1ull << (SIGWINCH - 1));
	CHECK(signal(SIGUSR1, SIG_IGN) != SIG_ERR);
	CHECK(signal(SIGUSR2, on_usr2) != SIG_ERR);
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	CHECK_OK(sigprocmask(SIG_BLOCK, &set, &old));
	CHECK_EQ(status_mask("SigBlk") & mine, 1ull << (SIGHUP - 1));
	CHECK_EQ(status_mask("SigIgn") & mine, 1ull << (SIGUSR1 - 1));
	CHECK_EQ(status_mask("SigCgt") & mine, 1ull << (SIGUSR2 - 1));
	CHECK_OK(sigprocmask(SIG_SETMASK, &old, NULL));
	CHECK(signal(SIGUSR1, SIG_DFL) != SIG_ERR);
	CHECK(signal(SIGUSR2, SIG_DFL) != SIG_ERR);
	CHECK_EQ(status_mask("SigBlk") & mine, 0);
	CHECK_EQ(status_mask("SigIgn") & mine, 0);
	CHECK_EQ(status_mask("SigCgt") & mine, 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child")) {
		char exe[PATH_MAX];
		printf("child: exe %s\n", realpath(argv[0], exe) && link_is("/proc/self/exe", exe) ? "ok" : "wrong");
		return 7;
	}
	char exe[PATH_MAX];
	CHECK(realpath(argv[0], exe) != NULL);
	identity();
	links(exe);
	descriptors(exe);
	listing_while_closing();
	maps(exe);
	mounts();
	system_files();
	process_files(argc, argv);
	refusals();
	limits_file();
	signal_masks();
	exec_self(argv);
	return checks_done();
}
