/* Threads in a forked child (issue 18): under nomu a forked child runs in
 * a host process of its own, and each of its threads gets a host thread
 * there. Each scenario runs in a forked child, which reports through its
 * exit status; the parent prints one line per scenario.
 *   - N threads make syscalls (write to a pipe, getpid, gettid) and are
 *     joined (futex-based pthread_join);
 *   - memory mapped by one thread is used by another, and unmapped memory
 *     faults in another thread;
 *   - threads map, write, protect and unmap at once (fresh pages are zero);
 *   - exit_group while other threads spin in guest code;
 *   - a signal to one thread (pthread_kill) runs its handler there;
 *   - a second thread forks: only it is copied;
 *   - a thread execs: the others die, the program runs. */
#define _GNU_SOURCE
#include "nomu_test.h"
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static const char *self_path;

#define NTHREADS 4

static int wait_status(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -2;
}

/* Runs fn in a forked child; its exit status (0: passed). */
static int in_child(int (*fn)(void))
{
	fflush(stdout);
	pid_t p = fork();
	if (p == 0)
		_exit(fn());
	return p < 0 ? -1 : wait_status(p);
}

/* ---- syscalls from several threads ---- */

static int pipefd[2];
static pid_t child_pid;

static void *syscall_thread(void *arg)
{
	long i = (long)arg;
	if (getpid() != child_pid || syscall(SYS_gettid) == child_pid)
		return (void *)1;
	char c = (char)('a' + i);
	for (int k = 0; k < 50; k++)
		if (write(pipefd[1], &c, 1) != 1)
			return (void *)2;
	return (void *)0;
}

static int threads_syscalls(void)
{
	child_pid = getpid();
	if (pipe(pipefd))
		return 10;
	pthread_t t[NTHREADS];
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&t[i], NULL, syscall_thread, (void *)i))
			return 11;
	int bad = 0;
	for (int i = 0; i < NTHREADS; i++) {
		void *r;
		if (pthread_join(t[i], &r) || r)
			bad++;
	}
	int counts[NTHREADS] = { 0 };
	char buf[64];
	for (int got = 0; got < NTHREADS * 50;) {
		ssize_t n = read(pipefd[0], buf, sizeof buf);
		if (n <= 0)
			return 12;
		for (ssize_t k = 0; k < n; k++)
			counts[buf[k] - 'a']++;
		got += (int)n;
	}
	for (int i = 0; i < NTHREADS; i++)
		if (counts[i] != 50)
			bad++;
	return bad ? 13 : 0;
}

/* ---- memory mapped by one thread, used by another ---- */

static char *volatile shared_map;
static sigjmp_buf fault_jump;

static void *mapper(void *arg)
{
	char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return (void *)1;
	m[0] = 'x';
	m[(1 << 20) - 1] = 'y';
	shared_map = m;
	return arg;
}

static void on_segv(int sig)
{
	siglongjmp(fault_jump, sig);
}

static volatile int reader_go;

/* Waits until the main thread has unmapped shared_map, then reads it. */
static void *unmapped_reader(void *unused)
{
	signal(SIGSEGV, on_segv);
	while (!reader_go)
		__asm__ volatile("" ::: "memory");
	if (sigsetjmp(fault_jump, 1) == 0) {
		(void)*(volatile char *)shared_map;
		return (void *)1; /* no fault */
	}
	return NULL;
}

static int threads_memory(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, mapper, NULL) || pthread_join(t, NULL))
		return 20;
	char *m = shared_map;
	if (!m || m[0] != 'x' || m[(1 << 20) - 1] != 'y')
		return 21;
	m[4096] = 'z';
	if (pthread_create(&t, NULL, unmapped_reader, NULL))
		return 23;
	if (munmap(m, 1 << 20))
		return 22;
	reader_go = 1;
	void *r;
	if (pthread_join(t, &r))
		return 23;
	return r ? 24 : 0;
}

/* ---- several threads map, write, protect and unmap at once ---- */

static void *churn(void *arg)
{
	long id = (long)arg, bad = 0;
	for (int i = 0; i < 200; i++) {
		size_t n = 4096 * (1 + i % 7);
		unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return (void *)1000;
		/* Fresh pages read as zero, and hold what this thread wrote. */
		for (size_t k = 0; k < n; k += 512) {
			bad += m[k] != 0;
			m[k] = (unsigned char)id;
		}
		for (size_t k = 0; k < n; k += 512)
			bad += m[k] != (unsigned char)id;
		if (i % 3 == 0)
			mprotect(m, n, PROT_READ);
		munmap(m, n);
	}
	return (void *)bad;
}

static int threads_map_churn(void)
{
	pthread_t t[NTHREADS];
	long bad = 0;
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&t[i], NULL, churn, (void *)(i + 1)))
			return 70;
	for (int i = 0; i < NTHREADS; i++) {
		void *r;
		if (pthread_join(t[i], &r))
			return 71;
		bad += (long)r;
	}
	return bad ? 72 : 0;
}

/* ---- exit_group while other threads spin ---- */

static void *spinner(void *arg)
{
	for (;;)
		__asm__ volatile("" ::: "memory");
	return arg;
}

static int threads_exit_group(void)
{
	pthread_t t;
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t, NULL, spinner, NULL))
			return 30;
	nomu_sleep_ms(20);
	syscall(SYS_exit_group, 0);
	return 31;
}

/* ---- a signal to one thread ---- */

static volatile pid_t handled_on;
static volatile int thread_ready;

static void on_usr1(int sig)
{
	handled_on = (pid_t)syscall(SYS_gettid);
}

static void *waiter(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	thread_ready = 1;
	while (!handled_on)
		__asm__ volatile("" ::: "memory");
	return NULL;
}

static int threads_signal(void)
{
	signal(SIGUSR1, on_usr1);
	pid_t tid = 0;
	pthread_t t;
	if (pthread_create(&t, NULL, waiter, &tid))
		return 40;
	while (!thread_ready)
		__asm__ volatile("" ::: "memory");
	if (pthread_kill(t, SIGUSR1))
		return 41;
	if (pthread_join(t, NULL))
		return 42;
	return handled_on == tid ? 0 : 43;
}

/* ---- fork from a second thread ---- */

static void *forker(void *arg)
{
	pid_t p = fork();
	if (p == 0) {
		/* Only this thread was copied: a new thread works here too. */
		_exit(getpid() == syscall(SYS_gettid) ? 5 : 6);
	}
	return (void *)(long)wait_status(p);
}

static int threads_fork(void)
{
	pthread_t t, s;
	if (pthread_create(&s, NULL, spinner, NULL))
		return 50;
	void *r;
	if (pthread_create(&t, NULL, forker, NULL) || pthread_join(t, &r))
		return 51;
	return (long)r == 5 ? 0 : 52;
}

/* ---- a thread execs ---- */

static void *execer(void *arg)
{
	char *argv[] = { (char *)self_path, "exec", NULL };
	execve(self_path, argv, environ);
	return (void *)1;
}

static int threads_exec(void)
{
	pthread_t t, s;
	if (pthread_create(&s, NULL, spinner, NULL))
		return 60;
	if (pthread_create(&t, NULL, execer, NULL))
		return 61;
	pthread_join(t, NULL);
	return 62;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "exec"))
		return 33;
	self_path = argv[0];
	setvbuf(stdout, NULL, _IONBF, 0);
	struct {
		const char *name;
		int (*fn)(void);
		int want;
	} cases[] = {
		{ "syscalls from threads", threads_syscalls, 0 },
		{ "memory across threads", threads_memory, 0 },
		{ "map churn in threads", threads_map_churn, 0 },
		{ "exit_group with spinners", threads_exit_group, 0 },
		{ "signal to one thread", threads_signal, 0 },
		{ "fork from a thread", threads_fork, 0 },
		{ "exec from a thread", threads_exec, 33 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		/* "fork_threads N...": those scenarios only (to debug one) */
		int listed = argc < 2;
		for (int a = 1; a < argc; a++)
			listed |= (size_t)atoi(argv[a]) == i;
		if (!listed)
			continue;
		int st = in_child(cases[i].fn);
		printf("%s: %d\n", cases[i].name, st);
		CHECK_EQ(st, cases[i].want);
	}
	return checks_done();
}
