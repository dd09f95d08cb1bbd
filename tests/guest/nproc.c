/* RLIMIT_NPROC as Linux holds it (kernel/fork.c copy_process, kernel/sys.c
 * flag_nproc_exceeded, fs/exec.c): a user's tasks (threads and processes,
 * zombies until reaped) may not outnumber the limit; fork, vfork,
 * posix_spawn and pthread_create past it are EAGAIN; root's tasks are not
 * held; a setuid into a user over the limit succeeds and the next execve is
 * EAGAIN.
 *
 * Run as root (natively, and under nomu as the guest's root): each part
 * runs in a child that drops to a uid of its own (100000 + its pid, so
 * parallel runs of this test never share a user). Not root: the parts are
 * skipped, with the same output. */
#include "nomu_test.h"

#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

extern char **environ;

#define LIMIT 6

static void set_nproc(rlim_t n)
{
	struct rlimit rl = {n, n};
	CHECK_OK(setrlimit(RLIMIT_NPROC, &rl));
}

static void become(uid_t uid)
{
	CHECK_OK(setresgid(uid, uid, uid));
	CHECK_OK(setresuid(uid, uid, uid));
}

static void *idle(void *arg)
{
	return arg;
}

/* Waits for a child's exit status; -1 if it did not exit normally. */
static int exit_code(pid_t pid)
{
	int st = 0;
	if (waitpid(pid, &st, 0) != pid)
		return -2;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Forks children that wait for EOF on `gate` until fork fails; returns
 * how many it made and stores their pids. */
static int fork_until_refused(int gate_r, int gate_w, pid_t *pids, int max, int *err)
{
	int n = 0;
	*err = 0;
	while (n < max) {
		pid_t p = fork();
		if (p < 0) {
			*err = errno;
			break;
		}
		if (p == 0) {
			char c;
			close(gate_w);
			while (read(gate_r, &c, 1) > 0)
				;
			_exit(0);
		}
		pids[n++] = p;
	}
	return n;
}

/* The user's process forks to the limit, then finds every other way of
 * making a task refused, a zombie still counted, a reaped one not. */
static int user_holds_the_limit(void)
{
	set_nproc(LIMIT);
	become(100000 + getpid());
	int gate[2];
	CHECK_OK(pipe(gate));
	pid_t pids[64];
	int err;
	int n = fork_until_refused(gate[0], gate[1], pids, 64, &err);
	/* itself and LIMIT - 1 children */
	CHECK_EQ(n, LIMIT - 1);
	CHECK_EQ(err, EAGAIN);
	printf("fork refused at the limit: %s\n", err == EAGAIN ? "EAGAIN" : "?");

	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, idle, NULL), EAGAIN);
	errno = 0;
	pid_t v = vfork();
	if (v == 0)
		_exit(0);
	CHECK_EQ(v, -1);
	CHECK_EQ(errno, EAGAIN);
	if (v > 0)
		waitpid(v, NULL, 0);
	pid_t sp;
	char *argv[] = {"true", NULL};
	CHECK_EQ(posix_spawn(&sp, "/nonexistent", NULL, NULL, argv, environ), EAGAIN);
	printf("pthread_create, vfork and posix_spawn refused too\n");

	/* A child that exited is counted until it is reaped. */
	CHECK_OK(kill(pids[0], SIGKILL));
	siginfo_t si = {0};
	CHECK_OK(waitid(P_PID, pids[0], &si, WEXITED | WNOWAIT));
	CHECK_ERR(fork(), EAGAIN);
	CHECK_EQ(waitpid(pids[0], NULL, 0), pids[0]);
	pid_t p = fork();
	if (p == 0)
		_exit(7);
	CHECK(p > 0);
	CHECK_EQ(exit_code(p), 7);
	printf("a zombie counts until reaped\n");

	close(gate[1]);
	int clean = 0;
	for (int i = 1; i < n; i++)
		clean += exit_code(pids[i]) == 0;
	CHECK_EQ(clean, n - 1);
	return nomu_failed ? 1 : 0;
}

/* Root is not held: with RLIMIT_NPROC at 1 its forks go on. */
static int root_is_not_held(void)
{
	set_nproc(1);
	int ok = 0;
	for (int i = 0; i < 3; i++) {
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		ok += p > 0 && exit_code(p) == 0;
	}
	CHECK_EQ(ok, 3);
	return nomu_failed ? 1 : 0;
}

/* Root's children join one user, one by one, with the limit at 2: the
 * fourth's setuid (3 tasks there already) succeeds and its execve is
 * EAGAIN, twice (a failure keeps the flag); the third's setuid (2 there)
 * leaves it unflagged and its execve runs. */
static int exec_after_setuid_over_the_limit(const char *self)
{
	set_nproc(2);
	uid_t user = 100000 + getpid();
	int gate[2], ready[2];
	CHECK_OK(pipe(gate));
	CHECK_OK(pipe(ready));
	pid_t kids[4];
	for (int k = 0; k < 4; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			close(gate[1]);
			if (setresgid(user, user, user) || setresuid(user, user, user))
				_exit(20);
			char *argv[] = {(char *)self, "exit33", NULL};
			if (k == 3) {
				int e1 = execve(self, argv, environ) < 0 ? errno : 0;
				int e2 = execve(self, argv, environ) < 0 ? errno : 0;
				_exit(e1 == EAGAIN && e2 == EAGAIN ? 30 : 31);
			}
			if (write(ready[1], "r", 1) != 1)
				_exit(22);
			char c;
			while (read(gate[0], &c, 1) > 0)
				;
			if (k == 2) {
				execve(self, argv, environ);
				_exit(21);
			}
			_exit(0);
		}
		CHECK(kids[k] > 0);
		if (k < 3) {
			char c;
			CHECK_EQ(read(ready[0], &c, 1), 1);
		}
	}
	CHECK_EQ(exit_code(kids[3]), 30);
	close(gate[1]);
	CHECK_EQ(exit_code(kids[0]), 0);
	CHECK_EQ(exit_code(kids[1]), 0);
	CHECK_EQ(exit_code(kids[2]), 33);
	printf("execve after a setuid over the limit: EAGAIN\n");
	return nomu_failed ? 1 : 0;
}

static void run_part(const char *name, int (*part)(const char *), const char *self)
{
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		int r = part(self);
		fflush(stdout);
		_exit(r);
	}
	CHECK(p > 0);
	int code = exit_code(p);
	CHECK_EQ(code, 0);
	printf("%s: %s\n", name, code == 0 ? "ok" : "FAILED");
}

static int part_user(const char *self)
{
	return user_holds_the_limit();
}

static int part_root(const char *self)
{
	return root_is_not_held();
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "exit33") == 0)
		return 33;
	if (getuid() != 0 || geteuid() != 0) {
		printf("fork refused at the limit: EAGAIN\n");
		printf("pthread_create, vfork and posix_spawn refused too\n");
		printf("a zombie counts until reaped\n");
		printf("the user's limit: ok\nroot: ok\n");
		printf("execve after a setuid over the limit: EAGAIN\n");
		printf("setuid then execve: ok\n");
		return nomu_checks_done("nproc");
	}
	run_part("the user's limit", part_user, argv[0]);
	run_part("root", part_root, argv[0]);
	run_part("setuid then execve", exec_after_setuid_over_the_limit, argv[0]);
	return nomu_checks_done("nproc");
}
