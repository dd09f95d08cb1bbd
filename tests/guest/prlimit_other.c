/* prlimit64 on another process: reads and sets its limits, ESRCH for no
 * such process, EPERM for one whose ids are not all the caller's without
 * CAP_SYS_RESOURCE; and raising a hard limit takes CAP_SYS_RESOURCE.
 * (Regression: another pid was ESRCH, so `prlimit -p` failed, and any
 * caller could raise its hard limits.) Runs as root natively; whether
 * root may raise hard limits is the host's (a container's root may lack
 * CAP_SYS_RESOURCE), and nomu's guests have the host's capabilities. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

static pid_t child;

/* Whether this process has CAP_SYS_RESOURCE (CapEff's bit 24). */
static int has_sys_resource(void)
{
	unsigned long long eff = 0;
	const char *p = strstr(nomu_slurp("/proc/self/status"), "CapEff:\t");
	if (p)
		sscanf(p + 8, "%llx", &eff);
	return (eff >> 24) & 1;
}

/* A hard limit raised: done with CAP_SYS_RESOURCE, else EPERM. */
#define CHECK_RAISE(call)                                                     \
	do {                                                                  \
		if (has_sys_resource())                                       \
			CHECK_OK(call);                                       \
		else                                                          \
			CHECK_ERR(call, EPERM);                               \
	} while (0)

static long prlimit_of(pid_t pid, int resource, const struct rlimit *new, struct rlimit *old)
{
	return syscall(SYS_prlimit64, pid, resource, new, old);
}

/* With uid 1000 (this thread only, as the raw syscall sets it). */
static void *unprivileged(void *arg)
{
	(void)arg;
	struct rlimit rl, higher;
	if (syscall(SYS_setresuid, 1000, 1000, 1000) != 0)
		return (void *)1;
	getrlimit(RLIMIT_NOFILE, &rl);
	higher = rl;
	higher.rlim_max = rl.rlim_max + 1;
	if (setrlimit(RLIMIT_NOFILE, &higher) != -1 || errno != EPERM)
		return (void *)2;
	/* Lowering the soft limit is anyone's. */
	rl.rlim_cur = rl.rlim_cur - 1;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return (void *)3;
	/* Another user's process: not even a read. */
	if (prlimit_of(child, RLIMIT_NOFILE, NULL, &rl) != -1 || errno != EPERM)
		return (void *)4;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		char c;
		return read(0, &c, 1) == 1 ? 0 : 1;
	}
	int to_child[2];
	CHECK_OK(pipe(to_child));
	child = vfork();
	if (child == 0) {
		dup2(to_child[0], 0);
		char *args[] = {argv[0], "wait", NULL};
		execve(argv[0], args, environ);
		_exit(99);
	}
	close(to_child[0]);
	struct rlimit mine, theirs, set = {77, 4000};
	CHECK_OK(getrlimit(RLIMIT_NOFILE, &mine));
	CHECK_OK(prlimit_of(child, RLIMIT_NOFILE, NULL, &theirs));
	CHECK_EQ(theirs.rlim_cur, mine.rlim_cur);
	CHECK_EQ(theirs.rlim_max, mine.rlim_max);
	CHECK_OK(prlimit_of(child, RLIMIT_NOFILE, &set, &theirs));
	CHECK_EQ(theirs.rlim_cur, mine.rlim_cur);
	CHECK_OK(prlimit_of(child, RLIMIT_NOFILE, NULL, &theirs));
	CHECK_EQ(theirs.rlim_cur, 77);
	CHECK_EQ(theirs.rlim_max, 4000);
	/* Raised back: CAP_SYS_RESOURCE's. */
	CHECK_RAISE(prlimit_of(child, RLIMIT_NOFILE, &mine, NULL));
	CHECK_ERR(prlimit_of(-1, RLIMIT_NOFILE, NULL, &theirs), ESRCH);
	CHECK_ERR(prlimit_of(0x3fffffff, RLIMIT_NOFILE, NULL, &theirs), ESRCH);
	CHECK_ERR(prlimit_of(child, 999, NULL, &theirs), EINVAL);

	/* A finite hard limit, so that there is one to raise. */
	struct rlimit finite = {mine.rlim_cur < 4096 ? mine.rlim_cur : 4096, 4096};
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &finite));
	pthread_t t;
	void *r;
	CHECK_EQ(pthread_create(&t, NULL, unprivileged, NULL), 0);
	CHECK_EQ(pthread_join(t, &r), 0);
	CHECK_EQ((long)r, 0);
	CHECK_RAISE(setrlimit(RLIMIT_NOFILE, &mine));

	CHECK_EQ(write(to_child[1], "x", 1), 1);
	int status;
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return checks_done();
}
