/* Process creation the no-MMU way: vfork, vfork+execve, posix_spawn with
 * file actions, wait4/waitpid/waitid, exit statuses, execve errors. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static const char *self;

static int child_main(int argc, char **argv)
{
	if (!strcmp(argv[2], "exit"))
		return atoi(argv[3]);
	if (!strcmp(argv[2], "hello")) {
		printf("child says hello, argc=%d\n", argc);
		return 0;
	}
	if (!strcmp(argv[2], "segv"))
		*(volatile int *volatile)0 = 1;
	if (!strcmp(argv[2], "ppid"))
		return getppid() == atoi(argv[3]) ? 0 : 1;
	if (!strcmp(argv[2], "sites")) {
		/* Each run uses its own mix of syscall instructions, each with
		 * its own number and registers: a site prepared from an earlier
		 * run of this file must behave exactly like a fresh one. */
		int mix = atoi(argv[3]), bad = 0;
		if (mix & 1)
			bad |= syscall(SYS_getppid) != getppid();
		if (mix & 2) {
			long r;
			__asm__ volatile("syscall" : "=a"(r) : "a"(SYS_getpid) : "rcx", "r11", "memory");
			bad |= r != getpid();
		}
		if (mix & 4) {
			long r;
			__asm__ volatile("syscall" : "=a"(r) : "a"(SYS_umask), "D"(022) : "rcx", "r11", "memory");
			bad |= r < 0 || syscall(SYS_umask, 022) != 022;
		}
		if (mix & 8) {
			long r;
			__asm__ volatile("syscall" : "=a"(r) : "a"(SYS_close), "D"(-1) : "rcx", "r11", "memory");
			bad |= r != -EBADF;
		}
		return bad;
	}
	return 99;
}

static void report_orphaned(int fd, pid_t parent);

/* A process whose vfork child tells `fd` it runs, then waits (up to 10 s)
 * until its parent is gone and tells whether it saw that. */
static int vforker_main(int fd)
{
	pid_t me = getpid();
	if (vfork() == 0) {
		write(fd, "running\n", 8);
		report_orphaned(fd, me);
		_exit(0);
	}
	return 1; /* only after the child, and the test kills us first */
}

/* Waits (up to 10 s) until the caller's parent is no longer `parent`, and
 * tells `fd` whether it saw that. */
static void report_orphaned(int fd, pid_t parent)
{
	for (int i = 0; i < 10000 && getppid() == parent; i++)
		usleep(1000);
	if (getppid() == parent)
		write(fd, "still\n", 6);
	else
		write(fd, "orphaned\n", 9);
}

/* A process whose vfork child kills it, then reports being orphaned. */
static int parricide_main(int fd)
{
	pid_t me = getpid();
	if (vfork() == 0) {
		kill(me, SIGKILL);
		report_orphaned(fd, me);
		_exit(0);
	}
	return 1;
}

/* A process whose vfork child vforks in turn: the grandchild says it runs
 * and waits for a byte on `go`; the child, released when it exits, reports
 * whether its own parent (killed meanwhile) is gone. */
static int vfork_chain_main(int fd, int go)
{
	pid_t me = getpid();
	if (vfork() == 0) {
		if (vfork() == 0) {
			char c;
			write(fd, "running\n", 8);
			read(go, &c, 1);
			_exit(0);
		}
		report_orphaned(fd, me);
		_exit(0);
	}
	return 1;
}

/* Spawns this program in `mode` with a pipe it reports to (its read end
 * in *out) and, when `go` is given, one it reads from (write end in *go). */
static pid_t spawn_reporter(const char *mode, int *out, int *go)
{
	int rep[2], g[2] = { -1, -1 };
	char rfd[16], gfd[16];
	CHECK_OK(pipe(rep));
	if (go)
		CHECK_OK(pipe(g));
	snprintf(rfd, sizeof(rfd), "%d", rep[1]);
	snprintf(gfd, sizeof(gfd), "%d", g[0]);
	char *args[] = { (char *)self, (char *)mode, rfd, go ? gfd : NULL, NULL };
	pid_t p = -1;
	CHECK_EQ(posix_spawn(&p, self, NULL, NULL, args, environ), 0);
	close(rep[1]);
	*out = rep[0];
	if (go) {
		close(g[0]);
		*go = g[1];
	}
	return p;
}

/* One line from fd, waiting at most 10 s. */
static int read_line(int fd, char *buf, int size)
{
	int got = 0;
	while (got < size - 1) {
		struct timeval tv = { .tv_sec = 10 };
		fd_set r;
		FD_ZERO(&r);
		FD_SET(fd, &r);
		if (select(fd + 1, &r, NULL, NULL, &tv) != 1 || read(fd, buf + got, 1) != 1)
			break;
		if (buf[got++] == '\n')
			break;
	}
	buf[got] = 0;
	return got;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child_main(argc, argv);
	if (argc > 2 && !strcmp(argv[1], "vforker"))
		return vforker_main(atoi(argv[2]));
	if (argc > 2 && !strcmp(argv[1], "parricide"))
		return parricide_main(atoi(argv[2]));
	if (argc > 3 && !strcmp(argv[1], "vfork-chain"))
		return vfork_chain_main(atoi(argv[2]), atoi(argv[3]));
	self = argv[0];
	int st;

	printf("== vfork + _exit\n");
	pid_t p = vfork();
	if (p == 0)
		_exit(5);
	CHECK(p > 0);
	CHECK_EQ(waitpid(p, &st, 0), p);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 5);

	printf("== vfork + execve\n");
	fflush(stdout);
	p = vfork();
	if (p == 0) {
		char *args[] = { (char *)self, "child", "hello", NULL };
		execve(self, args, environ);
		_exit(127);
	}
	CHECK_EQ(waitpid(p, &st, 0), p);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	printf("== exit statuses and signals\n");
	fflush(stdout);
	const char *codes[] = { "0", "1", "42", "255" };
	for (int i = 0; i < 4; i++) {
		char *args[] = { (char *)self, "child", "exit", (char *)codes[i], NULL };
		CHECK_EQ(posix_spawn(&p, self, NULL, NULL, args, environ), 0);
		CHECK_EQ(waitpid(p, &st, 0), p);
		CHECK(WIFEXITED(st));
		CHECK_EQ(WEXITSTATUS(st), atoi(codes[i]));
	}
	char *segv[] = { (char *)self, "child", "segv", NULL };
	CHECK_EQ(posix_spawn(&p, self, NULL, NULL, segv, environ), 0);
	CHECK_EQ(waitpid(p, &st, 0), p);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);

	printf("== posix_spawn with file actions\n");
	int pfd[2];
	CHECK_OK(pipe(pfd));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_addclose(&fa, pfd[0]);
	char *hello[] = { (char *)self, "child", "hello", "extra", NULL };
	fflush(stdout);
	CHECK_EQ(posix_spawn(&p, self, &fa, NULL, hello, environ), 0);
	close(pfd[1]);
	char buf[128] = { 0 };
	ssize_t n, got = 0;
	while ((n = read(pfd[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += n;
	CHECK(!strcmp(buf, "child says hello, argc=4\n"));
	close(pfd[0]);
	CHECK_EQ(waitpid(p, &st, 0), p);
	posix_spawn_file_actions_destroy(&fa);

	printf("== getppid in the child\n");
	char mypid[16];
	snprintf(mypid, sizeof(mypid), "%d", getpid());
	char *pp[] = { (char *)self, "child", "ppid", mypid, NULL };
	CHECK_EQ(posix_spawn(&p, self, NULL, NULL, pp, environ), 0);
	CHECK_EQ(waitpid(p, &st, 0), p);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	printf("== one program exec'd again and again, new syscall sites each time\n");
	for (int mix = 0; mix < 16; mix++) {
		for (int again = 0; again < 2; again++) {
			char m[8];
			snprintf(m, sizeof(m), "%d", mix ^ (again ? 15 : 0));
			char *sv[] = { (char *)self, "child", "sites", m, NULL };
			CHECK_EQ(posix_spawn(&p, self, NULL, NULL, sv, environ), 0);
			CHECK_EQ(waitpid(p, &st, 0), p);
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
	}

	printf("== wait variants\n");
	CHECK_ERR(waitpid(-1, &st, WNOHANG), ECHILD);
	CHECK_ERR(waitpid(-1, &st, 0), ECHILD);
	char *e7[] = { (char *)self, "child", "exit", "7", NULL };
	CHECK_EQ(posix_spawn(&p, self, NULL, NULL, e7, environ), 0);
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	CHECK_OK(waitid(P_PID, p, &si, WEXITED | WNOWAIT));
	CHECK_EQ(si.si_pid, p);
	CHECK_EQ(si.si_code, CLD_EXITED);
	CHECK_EQ(si.si_status, 7);
	struct rusage ru;
	CHECK_EQ(wait4(p, &st, 0, &ru), p); /* WNOWAIT left it waitable */
	CHECK_EQ(WEXITSTATUS(st), 7);
	CHECK_ERR(waitpid(-1, &st, 12345678), EINVAL);

	printf("== a vfork parent killed while its child runs\n");
	/* Its wait for the child is killable (as on Linux): it dies at once,
	 * and the child goes on, orphaned. */
	int out, go;
	char line[32];
	p = spawn_reporter("vforker", &out, NULL);
	read_line(out, line, sizeof(line));
	CHECK(!strcmp(line, "running\n"));
	CHECK_OK(kill(p, SIGKILL));
	CHECK_EQ(waitpid(p, &st, 0), p);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	read_line(out, line, sizeof(line));
	CHECK(!strcmp(line, "orphaned\n"));
	close(out);

	printf("== a vfork child that kills its parent\n");
	p = spawn_reporter("parricide", &out, NULL);
	CHECK_EQ(waitpid(p, &st, 0), p);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	read_line(out, line, sizeof(line));
	CHECK(!strcmp(line, "orphaned\n"));
	close(out);

	printf("== a vfork parent killed while its child waits in a vfork of its own\n");
	p = spawn_reporter("vfork-chain", &out, &go);
	read_line(out, line, sizeof(line));
	CHECK(!strcmp(line, "running\n"));
	CHECK_OK(kill(p, SIGKILL));
	CHECK_EQ(waitpid(p, &st, 0), p); /* at once: the grandchild still waits */
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK_EQ(write(go, "g", 1), 1);
	read_line(out, line, sizeof(line));
	CHECK(!strcmp(line, "orphaned\n"));
	close(out);
	close(go);

	printf("== execve errors\n");
	char dir[] = "/tmp/nomu-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[128];
	snprintf(path, sizeof(path), "%s/notexec", dir);
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	CHECK_OK(write(fd, "just text\n", 10));
	close(fd);
	char *noargs[] = { path, NULL };
	CHECK_ERR(execve(path, noargs, environ), EACCES);
	CHECK_OK(chmod(path, 0755));
	CHECK_ERR(execve(path, noargs, environ), ENOEXEC);
	CHECK_ERR(execve("/no/such/program", noargs, environ), ENOENT);
	CHECK_ERR(execve(dir, noargs, environ), EACCES);
	char *volatile bad = (char *)1;
	CHECK_ERR(execve(bad, noargs, environ), EFAULT);
	unlink(path);
	rmdir(dir);
	return checks_done();
}
