/* Every guest thread's syscalls reach the guest's kernel, however the
 * thread came to be: the first thread, threads made by pthread_create
 * (each a host thread of nomu's that must turn its own interception on:
 * syscall user dispatch is per host thread), a forked child (a host
 * process of its own under nomu) and a vfork child. A syscall that reached the host instead would answer with the
 * host's ids: getpid in a thread differing from the process's, a tid that
 * is no thread of the process, a forked child's pid differing from what
 * fork returned. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 6

static long raw_getpid(void) { return syscall(SYS_getpid); }
static long raw_gettid(void) { return syscall(SYS_gettid); }

/* Whether `tid` is a thread of this process (signal 0 checks only that). */
static int is_own_thread(long tid)
{
	return syscall(SYS_tgkill, raw_getpid(), tid, 0) == 0;
}

struct seen {
	long pid, tid;
	int own;
};

static void *thread_main(void *arg)
{
	struct seen *s = arg;
	s->pid = raw_getpid();
	s->tid = raw_gettid();
	s->own = is_own_thread(s->tid);
	return NULL;
}

/* Runs THREADS threads; checks each saw the process's pid and its own tid,
 * a thread of the process, and no two the same tid. Returns how many
 * checks failed (so a child can report through its exit status). */
static int threads_agree(void)
{
	pthread_t t[THREADS];
	struct seen s[THREADS];
	long pid = raw_getpid();
	int bad = 0;
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, thread_main, &s[i]))
			return 100;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < THREADS; i++) {
		bad += s[i].pid != pid;
		bad += s[i].tid == pid || !s[i].own;
		for (int j = 0; j < i; j++)
			bad += s[i].tid == s[j].tid;
	}
	return bad;
}

int main(void)
{
	long pid = raw_getpid();
	CHECK_EQ(raw_gettid(), pid);
	CHECK(is_own_thread(pid));
	CHECK_EQ(threads_agree(), 0);

	/* A forked child: its pid is what fork returned, its parent us. */
	int pipefd[2];
	CHECK_OK(pipe(pipefd));
	pid_t child = fork();
	if (child == 0) {
		long me = raw_getpid();
		if (write(pipefd[1], &me, sizeof me) != sizeof me)
			_exit(101);
		if (syscall(SYS_getppid) != pid)
			_exit(102);
		_exit(0);
	}
	CHECK(child > 0);
	long reported = 0;
	CHECK_EQ(read(pipefd[0], &reported, sizeof reported), (long)sizeof reported);
	CHECK_EQ(reported, child);
	int status = -1;
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK_EQ(status, 0);

	/* A vfork child: the same check, before it exits. */
	child = vfork();
	if (child == 0) {
		long me = raw_getpid();
		_exit(me != pid && syscall(SYS_getppid) == pid ? 0 : 104);
	}
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK_EQ(status, 0);
	close(pipefd[0]);
	close(pipefd[1]);
	return checks_done();
}
