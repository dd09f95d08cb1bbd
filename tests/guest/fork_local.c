/* The syscalls a forked child's host process answers itself (gettid,
 * getpid, set_robust_list: src/entry/split.rs, "Local answers") answer as
 * the kernel does: ids in the child and in a thread of it, a robust list
 * set there is the one get_robust_list reports and the one walked when
 * the child dies holding a robust mutex, and a bad length is still
 * refused. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* The kernel's struct robust_list_head (linux/futex.h, which musl's
 * headers do not have). */
struct robust_list {
	struct robust_list *next;
};
struct robust_list_head {
	struct robust_list list;
	long futex_offset;
	struct robust_list *list_op_pending;
};

static long tid_of_thread;

static void *thread_ids(void *arg)
{
	(void)arg;
	tid_of_thread = syscall(SYS_gettid);
	return NULL;
}

/* In the child: 0 when every check holds, else the failing check's number. */
static int child_checks(pid_t parent)
{
	pid_t me = getpid();
	if (me == parent || syscall(SYS_getpid) != me)
		return 1;
	if (syscall(SYS_gettid) != me || getppid() != parent)
		return 2;
	pthread_t t;
	if (pthread_create(&t, NULL, thread_ids, NULL) || pthread_join(t, NULL))
		return 3;
	if (tid_of_thread == me || tid_of_thread <= 0 || getpid() != me)
		return 4;
	struct robust_list_head head = {.list = {&head.list}, .futex_offset = 0};
	if (syscall(SYS_set_robust_list, &head, sizeof head - 1) != -1 || errno != EINVAL)
		return 5;
	if (syscall(SYS_set_robust_list, &head, sizeof head))
		return 6;
	struct robust_list_head *got = NULL;
	size_t len = 0;
	if (syscall(SYS_get_robust_list, 0, &got, &len) || got != &head || len != sizeof head)
		return 7;
	return 0;
}

int main(void)
{
	pid_t parent = getpid();
	for (int round = 0; round < 3; round++) {
		fflush(stdout);
		pid_t c = fork();
		CHECK(c >= 0);
		if (c == 0)
			_exit(child_checks(parent));
		int st;
		CHECK_EQ(waitpid(c, &st, 0), c);
		CHECK(WIFEXITED(st));
		CHECK_EQ(WEXITSTATUS(st), 0);
	}
	printf("ids and robust list in forked children: ok\n");

	/* A robust mutex in shared memory, left locked by a child that dies:
	 * its libc registered the robust list in the child (glibc after fork,
	 * musl at the first robust lock). */
	pthread_mutex_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	CHECK_EQ(pthread_mutex_init(m, &ma), 0);
	for (int round = 0; round < 3; round++) {
		fflush(stdout);
		pid_t c = fork();
		CHECK(c >= 0);
		if (c == 0)
			_exit(pthread_mutex_lock(m) == 0 ? 0 : 1);
		int st;
		CHECK_EQ(waitpid(c, &st, 0), c);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK_EQ(pthread_mutex_lock(m), EOWNERDEAD);
		CHECK_EQ(pthread_mutex_consistent(m), 0);
		CHECK_EQ(pthread_mutex_unlock(m), 0);
	}
	printf("robust mutex of a dead forked child: EOWNERDEAD\n");
	return 0;
}
