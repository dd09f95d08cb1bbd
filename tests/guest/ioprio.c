/* ioprio_set and ioprio_get (ionice): a thread's I/O priority, kept and
 * read back (hint bits too, in 16 bits), checked as Linux checks it (the
 * "none" class only with level 0, no class above idle, real time only
 * with CAP_SYS_NICE or CAP_SYS_ADMIN, another user's thread not without
 * CAP_SYS_NICE), set for a process group, and inherited by a child.
 * (Regression: ENOSYS, so every ionice failed.) Runs as root natively. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

#define WHO_PROCESS 1
#define WHO_PGRP 2
#define CLASS(c, level) ((c) << 13 | (level))

static long set(int which, int who, int ioprio)
{
	return syscall(SYS_ioprio_set, which, who, ioprio);
}

static long get(int which, int who)
{
	return syscall(SYS_ioprio_get, which, who);
}

static pid_t main_tid;

/* As uid 1000 (this thread only): no real time, no root's thread. */
static void *unprivileged(void *arg)
{
	(void)arg;
	if (syscall(SYS_setresuid, 1000, 1000, 1000) != 0)
		return (void *)1;
	if (set(WHO_PROCESS, 0, CLASS(3, 0)) != 0 || get(WHO_PROCESS, 0) != CLASS(3, 0))
		return (void *)2;
	if (set(WHO_PROCESS, 0, CLASS(1, 4)) != -1 || errno != EPERM)
		return (void *)3;
	if (set(WHO_PROCESS, main_tid, CLASS(2, 1)) != -1 || errno != EPERM)
		return (void *)4;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return get(WHO_PROCESS, 0) == atol(argv[1]) ? 0 : 1;
	main_tid = syscall(SYS_gettid);
	CHECK_OK(set(WHO_PROCESS, 0, CLASS(2, 5)));
	CHECK_EQ(get(WHO_PROCESS, 0), CLASS(2, 5));
	CHECK_EQ(get(WHO_PROCESS, main_tid), CLASS(2, 5));
	CHECK_OK(set(WHO_PROCESS, 0, CLASS(2, 0) | 1 << 3)); /* a hint */
	CHECK_EQ(get(WHO_PROCESS, 0), CLASS(2, 0) | 1 << 3);
	CHECK_OK(set(WHO_PROCESS, 0, CLASS(3, 5)));
	CHECK_EQ(get(WHO_PROCESS, 0), CLASS(3, 5));
	CHECK_OK(set(WHO_PROCESS, 0, 0x10000 | CLASS(2, 3)));
	CHECK_EQ(get(WHO_PROCESS, 0), CLASS(2, 3));
	CHECK_ERR(set(WHO_PROCESS, 0, CLASS(0, 1)), EINVAL);
	CHECK_ERR(set(WHO_PROCESS, 0, CLASS(4, 0)), EINVAL);
	CHECK_ERR(set(WHO_PROCESS, 0, -1), EINVAL);
	CHECK_ERR(set(9, 0, CLASS(2, 0)), EINVAL);
	CHECK_ERR(get(9, 0), EINVAL);
	CHECK_ERR(set(WHO_PROCESS, 0x3fffffff, CLASS(2, 0)), ESRCH);
	CHECK_ERR(get(WHO_PROCESS, 0x3fffffff), ESRCH);
	CHECK_EQ(get(WHO_PROCESS, 0), CLASS(2, 3));
	CHECK_OK(set(WHO_PROCESS, 0, CLASS(1, 2))); /* root: real time */
	CHECK_EQ(get(WHO_PROCESS, 0), CLASS(1, 2));

	CHECK_OK(set(WHO_PGRP, 0, CLASS(2, 6)));
	CHECK_EQ(get(WHO_PROCESS, 0), CLASS(2, 6));
	CHECK_EQ(get(WHO_PGRP, 0), CLASS(2, 6));

	/* A child starts with its parent's. */
	char want[16];
	snprintf(want, sizeof want, "%d", CLASS(2, 6));
	char *args[] = {argv[0], want, NULL};
	pid_t c = vfork();
	if (c == 0) {
		execve(argv[0], args, environ);
		_exit(99);
	}
	int status;
	CHECK_EQ(waitpid(c, &status, 0), c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	pthread_t t;
	void *r;
	CHECK_EQ(pthread_create(&t, NULL, unprivileged, NULL), 0);
	CHECK_EQ(pthread_join(t, &r), 0);
	CHECK_EQ((long)r, 0);
	return checks_done();
}
